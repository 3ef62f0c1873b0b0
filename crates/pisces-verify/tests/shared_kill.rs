//! A process of a shared pool killed at each step of the `pisces` engine's protocol
//! (its hook points): the process that goes on meets what the dead one left (a lock, a
//! critical section, a batch lock). Where the engine recovers the dead slot while the
//! others run (every hook point now), the survivor goes on and a new process joins;
//! elsewhere (a lock word held in the middle of what it guards) the survivor would get
//! `Error::PeerDied` within the wait bound instead of waiting for ever, and after
//! every process has closed, the next open recovers the pool as after a crash. Either
//! way the total is kept and every acknowledged transfer is there.
//!
//! The growth steps (`grow-*`: the file extended, the size recorded, the size raised)
//! are reached by a worker that appends objects to a pool that may grow until it
//! grows; the survivor then appends enough to need a growth itself, and must get it.
//!
//! The killed process is this test binary started again (`worker`): it runs transfers
//! in a `mutation::Scenario` that pauses its thread at the hook point, says so, and
//! waits to be killed.
#![cfg(feature = "mutation")]

use pisces::Sharing;
use pisces::{Config, EngineId, Error, PPtr, Pool};
use std::io::BufRead;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

const ACCOUNTS: usize = 16;
const TOTAL: u64 = 1600;
/// The root: the accounts, then the number of transfers made.
type Bank = [u64; ACCOUNTS + 1];

fn cfg() -> Config {
    Config::default()
        .size(8 << 20)
        .max_threads(4)
        .log_bytes_per_thread(64 << 10)
}

fn shared() -> Config {
    cfg().sharing(Sharing::Shared)
}

/// The environment variables of a worker: the pool's path and the hook point to die at.
const WORKER_POOL: &str = "PISCES_SHARED_KILL_POOL";
const WORKER_POINT: &str = "PISCES_SHARED_KILL_POINT";

/// One transfer of `n` between two accounts (by `i`), counted in the root.
fn transfer(h: &mut pisces::ThreadHandle, root: PPtr<Bank>, i: usize) -> pisces::Result<()> {
    h.run(|tx| {
        let a = tx.write(root)?;
        let (from, to) = (i % ACCOUNTS, (i * 7 + 3) % ACCOUNTS);
        if a[from] > 0 {
            a[from] -= 1;
            a[to] += 1;
        }
        a[ACCOUNTS] += 1;
        Ok(())
    })
}

/// A worker: transfers on a thread that the scenario pauses at the hook point; once
/// paused, says "holding N" (N: its transfers that committed) and waits to be killed.
/// Does nothing unless started by the test below.
#[test]
fn worker() {
    let (Ok(path), Ok(point)) = (std::env::var(WORKER_POOL), std::env::var(WORKER_POINT)) else {
        return;
    };
    let sc = pisces::mutation::Scenario::setup();
    if point.starts_with("grow-") {
        return grow_until_killed(sc, &path, &point);
    }
    let pool = Pool::open(&path, shared()).unwrap();
    let root: PPtr<Bank> = pool.root().unwrap();
    let mut h = pool.handle().unwrap();
    let point = EngineId::Pisces
        .hook(&point)
        .expect("a hook point of the engine");
    // Some transfers first, so that the pool holds this process's commits.
    for i in 0..20 {
        transfer(&mut h, root, i).unwrap();
    }
    if point.name == "block-released" {
        // Only a transaction that frees a block releases one in its write-back.
        let mut last = None;
        hold_and_wait(&sc, point, h, 20, move |h, i| {
            transfer_and_churn(h, root, i as usize, &mut last)
        })
    } else if point.name == "slabs-taken" || point.name == "blocks-claimed" {
        // Allocations that take slabs (a 96 KiB block is a run of them) and refill a
        // class's cache (a small block).
        let (mut last_big, mut last_small) = (None, None);
        hold_and_wait(&sc, point, h, 20, move |h, i| {
            transfer_and_churn(h, root, i as usize, &mut last_small)?;
            churn_run(h, &mut last_big)
        })
    } else if point.name == "arena-changing" {
        // A copy larger than a chunk takes a run of chunks, which its attempt gives
        // back when it is recycled.
        let big = h.run(|tx| tx.alloc([[0u64; 4096]; 3])).unwrap();
        hold_and_wait(&sc, point, h, 20, move |h, i| {
            transfer(h, root, i as usize)?;
            h.run(|tx| {
                tx.write(big)?[0][0] = i;
                Ok(())
            })
        })
    } else {
        hold_and_wait(&sc, point, h, 20, move |h, i| transfer(h, root, i as usize))
    }
}

/// Free the 96 KiB block the last call allocated (`last`) and allocate one: a run of
/// slabs given back to the free-slab set and one taken out of it.
fn churn_run(
    h: &mut pisces::ThreadHandle,
    last: &mut Option<PPtr<[[u64; 4096]; 3]>>,
) -> pisces::Result<()> {
    let o = h.run(|tx| {
        if let Some(o) = *last {
            tx.free(o)?;
        }
        tx.alloc_zeroed::<[[u64; 4096]; 3]>()
    })?;
    *last = Some(o);
    Ok(())
}

/// A transfer (as [`transfer`]) that also frees the object the last one allocated
/// (`last`) and allocates one.
fn transfer_and_churn(
    h: &mut pisces::ThreadHandle,
    root: PPtr<Bank>,
    i: usize,
    last: &mut Option<PPtr<u64>>,
) -> pisces::Result<()> {
    let o = h.run(|tx| {
        let a = tx.write(root)?;
        let (from, to) = (i % ACCOUNTS, (i * 7 + 3) % ACCOUNTS);
        if a[from] > 0 {
            a[from] -= 1;
            a[to] += 1;
        }
        a[ACCOUNTS] += 1;
        if let Some(o) = *last {
            tx.free(o)?;
        }
        tx.alloc(i as u64)
    })?;
    *last = Some(o);
    Ok(())
}

/// Run `step(h, i)` for `i` from `done` on on a thread of the scenario `sc`, which
/// pauses the handle's slot at hook point `point`; once paused, say "holding N" (N:
/// the steps that went through, `done` before these included) and wait to be killed.
fn hold_and_wait(
    sc: &pisces::mutation::Scenario,
    point: &'static pisces::mutation::HookPoint,
    mut h: pisces::ThreadHandle,
    done: u64,
    mut step: impl FnMut(&mut pisces::ThreadHandle, u64) -> pisces::Result<()> + Send + 'static,
) -> ! {
    let pause = sc.pause(point, h.slot());
    let done = Arc::new(AtomicU64::new(done));
    let d = done.clone();
    let scenario = sc.share();
    std::thread::spawn(move || {
        let _in = scenario.enter();
        loop {
            step(&mut h, d.load(Relaxed)).unwrap();
            d.fetch_add(1, Relaxed);
        }
    });
    let until = Instant::now() + Duration::from_secs(20);
    while !pause.reached() {
        assert!(
            Instant::now() < until,
            "the worker never reached {}",
            point.name
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    println!("holding {}", done.load(Relaxed));
    loop {
        std::thread::sleep(Duration::from_secs(1));
    }
}

/// The bank at `p`, made exclusive.
fn create_bank(p: &std::path::Path) {
    let pool = Pool::create(p, cfg()).unwrap();
    let root: PPtr<Bank> = pool.root().unwrap();
    pool.run(|tx| {
        tx.write(root)?[..ACCOUNTS].fill(TOTAL / ACCOUNTS as u64);
        Ok(())
    })
    .unwrap();
}

/// Transfers the survivor makes after the kill, unless one fails first.
const SURVIVOR_TRANSFERS: u64 = 5_000;

/// Whether a death at hook point `point` is recovered while the others run: at every
/// step of a commit (rolled back before its record is in the log, rolled forward
/// after), and at every step of a write-back that holds its batch's lock word (made
/// again, or finished where it stopped). (Deaths that still stop the pool are in the
/// middle of what the arena's or the allocator's locks guard; no hook point is
/// there.)
fn recovered_at(_point: &str) -> bool {
    true
}

/// Start a worker on the pool at `p` that pauses at hook point `point`, and kill it once
/// it says it holds there: its transactions that committed before (what it said).
fn kill_a_worker_at(p: &std::path::Path, point: &str) -> u64 {
    let mut worker = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "worker", "--nocapture", "--test-threads=1"])
        .env(WORKER_POOL, p)
        .env(WORKER_POINT, point)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let out = std::io::BufReader::new(worker.stdout.take().unwrap());
    let theirs: u64 = out
        .lines()
        .map_while(|l| l.ok())
        // (The test harness may have begun the line with the test's name.)
        .find_map(|l| {
            let at = l.find("holding ")?;
            Some(l[at + "holding ".len()..].trim().parse().unwrap())
        })
        .unwrap_or_else(|| panic!("{point}: the worker never held its step"));
    worker.kill().unwrap();
    worker.wait().unwrap();
    theirs
}

/// Kill a worker at `point`, then run transfers here: where the death is recovered
/// ([`recovered_at`]) they all go through and a new process joins; elsewhere one fails
/// with `PeerDied` within the bound. Either way the pool, opened alone afterwards,
/// holds every acknowledged transfer and the total.
fn killed_at(point: &str) {
    let d = tempfile::tempdir_in("/dev/shm").unwrap();
    let p = d.path().join("pool");
    create_bank(&p);
    let here = Pool::open(&p, shared()).unwrap();
    let root: PPtr<Bank> = here.root().unwrap();
    let theirs = kill_a_worker_at(&p, point);
    // The survivor, on a thread of its own so that a hang fails the test.
    let (tx, rx) = std::sync::mpsc::channel();
    let pool = here.clone();
    let survivor = std::thread::spawn(move || {
        let mut h = pool.handle().unwrap();
        let started = Instant::now();
        // Transfers that also allocate and free, small blocks and now and then a run of
        // slabs: the survivor needs the allocator's locks the dead one may hold.
        let (mut small, mut big) = (None, None);
        for i in 0..SURVIVOR_TRANSFERS {
            let step = transfer_and_churn(&mut h, root, i as usize, &mut small).and_then(|()| {
                if i % 64 != 0 {
                    return Ok(());
                }
                churn_run(&mut h, &mut big)
            });
            if let Err(e) = step {
                let _ = tx.send((Some(e), i, started.elapsed()));
                return;
            }
        }
        let _ = tx.send((None, SURVIVOR_TRANSFERS, started.elapsed()));
    });
    let (e, ours, took) = rx
        .recv_timeout(Duration::from_secs(30))
        .unwrap_or_else(|_| panic!("{point}: the survivor waited 30 s for a process that died"));
    assert!(took < Duration::from_secs(10), "{point}: took {took:?}");
    let recovered = recovered_at(point);
    if recovered {
        assert!(e.is_none(), "{point}: {e:?}");
        let joined =
            Pool::open(&p, shared()).expect("a process joins once the dead one is recovered");
        let mut h = joined.handle().unwrap();
        transfer(&mut h, root, 0).unwrap();
    } else {
        assert!(matches!(e, Some(Error::PeerDied { .. })), "{point}: {e:?}");
        assert!(
            matches!(Pool::open(&p, shared()), Err(Error::PeerDied { .. })),
            "{point}: a process joined a stopped pool"
        );
    }
    // (The survivor's handle on the pool goes with its thread.)
    survivor.join().unwrap();
    drop(here);
    let report = pisces::tools::check::check_pool(&p, pisces::medium::MediumKind::DRAM).unwrap();
    assert!(report.is_ok(), "{point}: {report}");
    let pool = Pool::open(&p, cfg()).unwrap();
    let (total, count) = pool
        .read(|tx| {
            let b = tx.read(root)?;
            Ok((b[..ACCOUNTS].iter().sum::<u64>(), b[ACCOUNTS]))
        })
        .unwrap();
    assert_eq!(total, TOTAL, "{point}: the total");
    // Acknowledged: the worker's `theirs`, our `ours` and the joiner's; maybe committed
    // besides: the worker's paused transfer (rolled back or forward), and where the
    // pool stopped, our failed one.
    let acked = theirs + ours + u64::from(recovered);
    let unknown = if recovered { 1 } else { 2 };
    assert!(
        (acked..=acked + unknown).contains(&count),
        "{point}: {count} transfers recovered, {acked} acknowledged"
    );
    let outcome = if recovered { "recovered" } else { "stopped" };
    eprintln!(
        "{point}: {outcome}, {ours} transfers after the kill ({took:?}); {count} in the pool"
    );
}

/// Every hook point of the engine, in one test (they share this process's scenario
/// gate with nothing else).
#[test]
fn a_process_killed_at_each_protocol_step_is_recovered_or_stops_the_others() {
    let points: Vec<_> = EngineId::Pisces.hooks().iter().map(|h| h.name).collect();
    assert!(points.len() >= 6, "{points:?}");
    for point in points {
        if point.starts_with("grow-") {
            killed_growing_at(point);
        } else {
            killed_at(point);
        }
    }
}

/// The root of the growth cases: a list of 4 KiB objects (head, length).
type List = [u64; 2];
const OBJ_WORDS: usize = 512;

/// A shared pool of 8 MiB that may grow to 64 MiB.
fn growable() -> Config {
    shared().max_size(64 << 20)
}

/// Append one 4 KiB object to the list at `root`.
fn append(h: &mut pisces::ThreadHandle, root: PPtr<List>) -> pisces::Result<()> {
    h.run(|tx| {
        let [head, count] = *tx.read(root)?;
        let mut o = [count ^ 0x5a5a; OBJ_WORDS];
        o[0] = head;
        o[1] = count;
        let p = tx.alloc(o)?;
        *tx.write(root)? = [p.offset(), count + 1];
        Ok(())
    })
}

/// The list's length, every object checked.
fn list_len(pool: &Pool, root: PPtr<List>) -> u64 {
    pool.read(|tx| {
        let [mut head, count] = *tx.read(root)?;
        let mut seen = 0;
        while head != 0 {
            let o = tx.read(PPtr::<[u64; OBJ_WORDS]>::from_offset(head))?;
            let i = count - 1 - seen;
            assert_eq!(o[1], i, "object {seen} from the head");
            assert!(
                o[2..].iter().all(|&w| w == i ^ 0x5a5a),
                "object {i}'s words"
            );
            head = o[0];
            seen += 1;
        }
        assert_eq!(seen, count);
        Ok(count)
    })
    .unwrap()
}

/// The worker of a growth case: appends objects on a thread that the scenario pauses
/// at the growth's hook point `point` (the pool grows when its first 8 MiB are full),
/// says "holding N" once paused (N: its appends that committed), and waits to be
/// killed.
fn grow_until_killed(sc: pisces::mutation::Scenario, path: &str, point: &str) {
    let pool = Pool::open(path, growable()).unwrap();
    let root: PPtr<List> = pool.root().unwrap();
    let h = pool.handle().unwrap();
    let point = EngineId::Pisces.hook(point).expect("a hook point");
    hold_and_wait(&sc, point, h, 0, move |h, _| append(h, root));
}

/// Appends the survivor makes after a kill in a growth: 12 MiB, so that it needs the
/// pool to grow (again) itself.
const SURVIVOR_APPENDS: u64 = 3_000;

/// Kill a worker at growth step `point`, then append here: the dead growth is finished
/// or dropped by the recovery while this process runs (`Allocator::release_dead`), so
/// every append goes through, growing the pool further, and a new process joins; the
/// pool, opened alone afterwards, holds every acknowledged append and is sound.
fn killed_growing_at(point: &str) {
    let d = tempfile::tempdir_in("/dev/shm").unwrap();
    let p = d.path().join("pool");
    drop(Pool::create(&p, cfg().max_size(64 << 20)).unwrap());
    let here = Pool::open(&p, growable()).unwrap();
    let root: PPtr<List> = here.root().unwrap();
    let theirs = kill_a_worker_at(&p, point);
    let (tx, rx) = std::sync::mpsc::channel();
    let pool = here.clone();
    let survivor = std::thread::spawn(move || {
        let mut h = pool.handle().unwrap();
        let started = Instant::now();
        for i in 0..SURVIVOR_APPENDS {
            if let Err(e) = append(&mut h, root) {
                let _ = tx.send((Some(e), i, started.elapsed()));
                return;
            }
        }
        let _ = tx.send((None, SURVIVOR_APPENDS, started.elapsed()));
    });
    let (e, ours, took) = rx
        .recv_timeout(Duration::from_secs(30))
        .unwrap_or_else(|_| panic!("{point}: the survivor waited 30 s for a process that died"));
    assert!(e.is_none(), "{point}: {e:?} after {ours} appends");
    assert!(took < Duration::from_secs(20), "{point}: took {took:?}");
    survivor.join().unwrap();
    let joined =
        Pool::open(&p, growable()).expect("a process joins once the dead one is recovered");
    let mut h = joined.handle().unwrap();
    append(&mut h, root).unwrap();
    drop(h);
    drop(joined);
    drop(here);
    let report = pisces::tools::check::check_pool(&p, pisces::medium::MediumKind::DRAM).unwrap();
    assert!(report.is_ok(), "{point}: {report}");
    let pool = Pool::open(&p, cfg().max_size(64 << 20)).unwrap();
    let count = list_len(&pool, root);
    // Acknowledged: the worker's, the survivor's and the joiner's; maybe committed
    // besides: the worker's paused append (rolled back, as it had not committed).
    let acked = theirs + ours + 1;
    assert!(
        (acked..=acked + 1).contains(&count),
        "{point}: {count} appends recovered, {acked} acknowledged"
    );
    let size = std::fs::metadata(&p).unwrap().len();
    eprintln!("{point}: recovered, {ours} appends after the kill ({took:?}); {count} in the pool of {size} bytes");
}
