//! One pool opened by several processes at once (`Sharing::Shared`). Each open of a
//! pool shared in this test binary stands for a process: the sidecar's locks are
//! open-file-description locks, which two opens conflict on as two processes would.

use pisces::Sharing;
use pisces::{Config, EngineId, Error, PPtr, Pool};
use std::sync::{Arc, Barrier, Mutex, MutexGuard};

/// Held by every test for its whole run: a test spawns worker processes, and a child
/// between its fork and its exec holds a copy of every descriptor of this process —
/// the locks of any pool another test just closed, which would then refuse that test's
/// next open.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn one_at_a_time() -> MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

fn cfg() -> Config {
    Config::default()
        .size(8 << 20)
        .max_threads(4)
        .log_bytes_per_thread(64 << 10)
}

fn shared() -> Config {
    cfg()
        .sharing(Sharing::Shared)
        .slot_wait(std::time::Duration::from_millis(20))
}

fn pool_path() -> (tempfile::TempDir, std::path::PathBuf) {
    let d = tempfile::tempdir_in("/dev/shm").unwrap();
    let p = d.path().join("pool");
    (d, p)
}

/// Shared opens coexist; an exclusive open is refused while any is open, and a shared
/// open while an exclusive one is; the last shared close lets an exclusive open in,
/// with every commit of both "processes" there.
#[test]
fn shared_and_exclusive_opens_exclude_each_other() {
    let _one = one_at_a_time();
    let (_d, p) = pool_path();
    drop(Pool::create(&p, cfg()).unwrap());
    let a = Pool::open(&p, shared()).unwrap();
    let b = Pool::open(&p, shared()).unwrap();
    assert!(matches!(
        Pool::open(&p, cfg()),
        Err(Error::AlreadyOpen(_) | Error::Locked(_))
    ));
    // The offline check refuses a pool that processes have open.
    assert!(matches!(
        pisces::tools::check::check_pool(&p, pisces::medium::MediumKind::DRAM),
        Err(Error::Locked(_))
    ));
    let root: PPtr<u64> = a.root().unwrap();
    assert_eq!(b.root::<u64>().unwrap(), root, "one root for both");
    a.run(|tx| {
        *tx.write(root)? += 1;
        Ok(())
    })
    .unwrap();
    b.run(|tx| {
        *tx.write(root)? += 10;
        Ok(())
    })
    .unwrap();
    assert_eq!(a.run(|tx| Ok(*tx.read(root)?)).unwrap(), 11);
    drop(a);
    assert!(Pool::open(&p, cfg()).is_err(), "b still has it");
    drop(b);
    let only = Pool::open(&p, cfg()).unwrap();
    assert_eq!(only.run(|tx| Ok(*tx.read(root)?)).unwrap(), 11);
    assert!(matches!(
        Pool::open(&p, shared()),
        Err(Error::AlreadyOpen(_) | Error::Locked(_))
    ));
}

/// Engines whose state cannot be shared refuse a shared open, saying why; a pool that
/// may grow is refused too.
#[test]
fn engines_that_cannot_share_refuse() {
    let _one = one_at_a_time();
    for engine in [
        EngineId::Mvcc,
        EngineId::Undo,
        EngineId::Sp3,
        EngineId::Spht,
    ] {
        let (_d, p) = pool_path();
        let e = Pool::create(&p, shared().engine(engine)).unwrap_err();
        let msg = e.to_string();
        assert!(
            matches!(e, Error::InvalidConfig(_)) && msg.contains("several processes"),
            "{engine}: {msg}"
        );
    }
}

/// Two "processes" move money between accounts at the same time, each with two
/// threads; every snapshot of each sees the total conserved, and the last close leaves
/// it conserved for the next exclusive open.
#[test]
fn two_processes_transfer_and_keep_the_total() {
    let _one = one_at_a_time();
    let (_d, p) = pool_path();
    create_bank(&p);
    let pools: Vec<Pool> = (0..2).map(|_| Pool::open(&p, shared()).unwrap()).collect();
    let go = Arc::new(Barrier::new(4));
    std::thread::scope(|s| {
        for (i, pool) in pools.iter().flat_map(|p| [p, p]).enumerate() {
            let go = go.clone();
            s.spawn(move || {
                go.wait();
                transfers(pool, i as u64, 2000);
            });
        }
    });
    drop(pools);
    let pool = Pool::open(&p, cfg()).unwrap();
    assert_eq!(audit(&pool), (TOTAL, 4 * 2000));
}

/// A process that closes gives its slots up: with one slot each, processes that come
/// after it take the slots it had, and their commits go on where its log ended.
#[test]
fn slots_pass_from_a_closed_process_to_the_next() {
    let _one = one_at_a_time();
    let (_d, p) = pool_path();
    drop(Pool::create(&p, cfg().max_threads(2)).unwrap());
    let keeper = Pool::open(&p, shared()).unwrap();
    let root: PPtr<u64> = keeper.root().unwrap();
    let mut h = keeper.handle().unwrap();
    for round in 1..=5u64 {
        let visitor = Pool::open(&p, shared()).unwrap();
        for _ in 0..50 {
            visitor
                .run(|tx| {
                    *tx.write(root)? += 1;
                    Ok(())
                })
                .unwrap();
        }
        let held = visitor.handle().unwrap();
        assert!(
            matches!(visitor.handle().map(|_| ()), Err(Error::TooManyThreads(_))),
            "both slots are taken"
        );
        drop(held);
        drop(visitor);
        // Through the handle: `keeper.read` would take the slot the visitor gave up.
        assert_eq!(h.read(|tx| Ok(*tx.read(root)?)).unwrap(), 50 * round);
    }
    drop(h);
    drop(keeper);
    // Recovery reads every log the visitors handed over: intact, nothing replayed twice.
    let pool = Pool::open(&p, cfg()).unwrap();
    assert_eq!(pool.read(|tx| Ok(*tx.read(root)?)).unwrap(), 250);
}

/// The environment variable that makes this test binary a worker process of
/// [`real_processes_transfer_and_keep_the_total`]: the pool's path.
const WORKER_POOL: &str = "PISCES_SHARED_POOL_WORKER";

/// This test binary started again as `worker_process` on the pool at `p`.
fn worker(p: &std::path::Path) -> std::process::Command {
    let mut c = std::process::Command::new(std::env::current_exe().unwrap());
    c.args([
        "--exact",
        "worker_process",
        "--nocapture",
        "--test-threads=1",
    ])
    .env(WORKER_POOL, p);
    c
}

/// The environment variable that makes `worker_process` stop after its transfers and
/// wait to be killed, saying so on stdout.
const WORKER_WAITS: &str = "PISCES_SHARED_POOL_WORKER_WAITS";

/// A worker process: opens the pool shared and runs transfers, checking the total in
/// every snapshot. Does nothing unless started by a test below.
#[test]
fn worker_process() {
    let Ok(path) = std::env::var(WORKER_POOL) else {
        return;
    };
    // A kill loop's replacement may find every slot taken until the slot of the
    // process it replaces is recovered: it waits for one as long as a joiner waits for
    // a recovery.
    let cfg = match std::env::var(WORKER_LOOPS) {
        Ok(_) => shared().slot_wait(std::time::Duration::from_secs(10)),
        Err(_) => shared(),
    };
    let pool = match Pool::open(&path, cfg) {
        Ok(pool) => pool,
        // A kill loop's replacement that finds the pool stopped.
        Err(Error::PeerDied { .. }) if std::env::var(WORKER_LOOPS).is_ok() => {
            println!("peer died");
            return;
        }
        Err(e) => panic!("{e}"),
    };
    if let Ok(what) = std::env::var(WORKER_HOLDS) {
        hold_and_wait(&pool, &what);
    }
    if let Ok(n) = std::env::var(WORKER_GROWS) {
        let lists: PPtr<Lists> = pool.root().unwrap();
        append(&pool, lists, 1, n.parse().unwrap());
        check_lists(&pool, lists);
        return;
    }
    if std::env::var(WORKER_LOOPS).is_ok() {
        return transfer_until_told(pool);
    }
    if std::env::var(WORKER_WAITS).is_ok() {
        transfers(&pool, std::process::id() as u64, 100);
        println!("transferred");
        loop {
            std::thread::sleep(std::time::Duration::from_secs(1));
        }
    }
    transfers(&pool, std::process::id() as u64, 3000);
}

/// The environment variable that makes `worker_process` make some transfers, then stop
/// inside a transaction of the kind it names ([`hold_and_wait`]) and wait there to be
/// killed.
const WORKER_HOLDS: &str = "PISCES_SHARED_POOL_WORKER_HOLDS";

/// A worker's transfers, then a transaction that stops halfway and waits to be killed,
/// saying "holding" on stdout once it is there: `"write"`, an update that has written
/// (locked) the root; `"snapshot"`, a read-only snapshot that has read it (its slot's
/// clock holds back every write-back of a later commit).
fn hold_and_wait(pool: &Pool, what: &str) -> ! {
    transfers(pool, std::process::id() as u64, 50);
    let root: PPtr<Bank> = pool.root().unwrap();
    let hold = || -> ! {
        println!("holding");
        loop {
            std::thread::sleep(std::time::Duration::from_secs(1));
        }
    };
    match what {
        "write" => {
            let _: pisces::Result<()> = pool.run(|tx| {
                tx.write(root)?[0] += 1;
                hold()
            });
        }
        "snapshot" => {
            let _: pisces::Result<()> = pool.read(|tx| {
                tx.read(root)?;
                hold()
            });
        }
        _ => panic!("unknown hold {what}"),
    }
    unreachable!()
}

/// Start a worker with `var` set, and wait until it says `line` on stdout.
fn worker_saying(p: &std::path::Path, var: &str, value: &str, line: &str) -> std::process::Child {
    use std::io::BufRead;
    let mut worker = worker(p)
        .env(var, value)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let out = std::io::BufReader::new(worker.stdout.take().unwrap());
    assert!(
        out.lines().map_while(|l| l.ok()).any(|l| l.contains(line)),
        "the worker never said {line:?}"
    );
    worker
}

/// Start a worker that holds `what` ([`hold_and_wait`]) and kill it once it holds it.
fn kill_a_worker_holding(p: &std::path::Path, what: &str) {
    let mut worker = worker_saying(p, WORKER_HOLDS, what, "holding");
    worker.kill().unwrap();
    worker.wait().unwrap();
}

/// Run `n` transfers on `pool`, on a thread of its own: how long they took, or the
/// first one's error; a failure of the test if they did not end within `limit` (the
/// survivor hung).
fn transfers_within(
    pool: &Pool,
    n: usize,
    limit: std::time::Duration,
) -> Result<std::time::Duration, Error> {
    let pool = pool.clone();
    let (tx, rx) = std::sync::mpsc::channel();
    let thread = std::thread::spawn(move || {
        let started = std::time::Instant::now();
        let root: PPtr<Bank> = pool.root().unwrap();
        let mut h = pool.handle().unwrap();
        for i in 0..n {
            let r = h.run(|tx| {
                let a = tx.write(root)?;
                a[i % ACCOUNTS] += 1;
                a[(i + 1) % ACCOUNTS] -= 1;
                a[ACCOUNTS] += 1;
                Ok(())
            });
            if let Err(e) = r {
                let _ = tx.send(Err(e));
                return;
            }
        }
        let _ = tx.send(Ok(started.elapsed()));
    });
    let r = rx
        .recv_timeout(limit)
        .unwrap_or_else(|_| panic!("a survivor waited {limit:?} for a process that died"));
    // (Its handle on the pool goes with the thread: the caller may close the pool next.)
    thread.join().unwrap();
    r
}

/// Every thread slot of the pool at `p` can be had by a process that attaches now
/// (the dead process's slot is free again), and its transactions go through.
fn every_slot_is_free_again(p: &std::path::Path) {
    let other = Pool::open(p, shared()).unwrap();
    let root: PPtr<Bank> = other.root().unwrap();
    // (A recovery that had to leave the log for later is finished by the claim that
    // finds it; give it a moment.)
    let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let mut handles = Vec::new();
    while handles.len() < 3 {
        match other.handle() {
            Ok(h) => handles.push(h),
            Err(Error::TooManyThreads(_)) if std::time::Instant::now() < until => {}
            Err(e) => panic!("{} slots had, then {e}", handles.len()),
        }
    }
    for h in &mut handles {
        h.run(|tx| {
            tx.write(root)?[ACCOUNTS] += 1;
            Ok(())
        })
        .unwrap();
    }
}

/// A process killed while it holds a lock (an update that wrote the root and has not
/// committed) is recovered while the others run: a survivor that writes the root waits
/// for the recovery (the dead update rolled back), not for ever, and goes on; the dead
/// process's slot is free again; a process that attaches afterwards joins; and the
/// next exclusive open finds every acknowledged transfer and the total kept.
#[test]
fn a_process_killed_holding_a_lock_is_recovered_while_the_others_run() {
    let _one = one_at_a_time();
    let (_d, p) = pool_path();
    create_bank(&p);
    let here = Pool::open(&p, shared()).unwrap();
    transfers(&here, 3, 20);
    kill_a_worker_holding(&p, "write");
    let took = transfers_within(&here, 1000, std::time::Duration::from_secs(30)).unwrap();
    assert!(took < std::time::Duration::from_secs(10), "took {took:?}");
    assert_eq!(audit(&here), (TOTAL, 20 + 50 + 1000));
    every_slot_is_free_again(&p);
    drop(here);
    let pool = Pool::open(&p, cfg()).unwrap();
    assert_eq!(audit(&pool), (TOTAL, 20 + 50 + 1000 + 3));
}

/// A process killed inside a read-only snapshot leaves its slot's clock running, which
/// every write-back of a later commit waits for (the grace period): it is recovered
/// (its clock finished), and a survivor's updates go on.
#[test]
fn a_process_killed_in_a_snapshot_is_recovered_while_the_others_run() {
    let _one = one_at_a_time();
    let (_d, p) = pool_path();
    create_bank(&p);
    let here = Pool::open(&p, shared()).unwrap();
    kill_a_worker_holding(&p, "snapshot");
    let took = transfers_within(&here, 2000, std::time::Duration::from_secs(30)).unwrap();
    assert!(took < std::time::Duration::from_secs(10), "took {took:?}");
    every_slot_is_free_again(&p);
    drop(here);
    let pool = Pool::open(&p, cfg()).unwrap();
    assert_eq!(audit(&pool), (TOTAL, 50 + 2000 + 3));
}

/// The environment variable that makes `worker_process` run [`transfer_until_told`].
const WORKER_LOOPS: &str = "PISCES_SHARED_POOL_WORKER_LOOPS";

/// A worker of the kill loop: transfers one at a time, saying "acknowledged" on stdout
/// after each one that committed, until its stdin closes (then it closes the pool) or a
/// transfer fails with `PeerDied` (it says "peer died: " and the stop's cause, and
/// closes the pool). Any other error fails the worker.
fn transfer_until_told(pool: Pool) {
    use std::io::{Read, Write};
    use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
    let told = Arc::new(AtomicBool::new(false));
    let t = told.clone();
    std::thread::spawn(move || {
        let _ = std::io::stdin().read_to_end(&mut Vec::new());
        t.store(true, Relaxed);
    });
    let root: PPtr<Bank> = pool.root().unwrap();
    let mut h = pool.handle().unwrap();
    let mut out = std::io::stdout().lock();
    let mut x = std::process::id() as u64 | 1;
    while !told.load(Relaxed) {
        match h.run(|tx| transfer(tx, root, next_pair(&mut x))) {
            Ok(()) => writeln!(out, "acknowledged").unwrap(),
            Err(Error::PeerDied { cause, .. }) => {
                writeln!(out, "peer died: {cause:?}").unwrap();
                break;
            }
            Err(e) => panic!("a transfer failed: {e}"),
        }
        out.flush().unwrap();
    }
    out.flush().unwrap();
}

/// Kills of the kill loop (`PISCES_KILLS` overrides: the long run is a command of the
/// design note).
fn kills() -> usize {
    std::env::var("PISCES_KILLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(24)
}

/// A kill loop worker, as the loop sees it: the process, and the thread that reads
/// its lines (the stop's cause once it said "peer died").
struct LoopWorker {
    child: std::process::Child,
    lines: std::thread::JoinHandle<Option<String>>,
    said_stopped: Arc<std::sync::atomic::AtomicBool>,
}

impl LoopWorker {
    /// Start a worker of the loop on `p`, counting its acknowledged transfers in
    /// `acked`.
    fn start(p: &std::path::Path, acked: &Arc<std::sync::atomic::AtomicU64>) -> LoopWorker {
        use std::io::BufRead;
        use std::sync::atomic::Ordering::Relaxed;
        let mut child = worker(p)
            .env(WORKER_LOOPS, "1")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let out = std::io::BufReader::new(child.stdout.take().unwrap());
        let said_stopped = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (acked, said) = (acked.clone(), said_stopped.clone());
        let lines = std::thread::spawn(move || {
            // (A line may begin with the test harness's own words: the first one
            // follows "test worker_process ... ", and the harness ends with "ok".)
            let mut cause = None;
            for l in out.lines().map_while(|l| l.ok()) {
                if l.ends_with("acknowledged") {
                    acked.fetch_add(1, Relaxed);
                } else if let Some((_, c)) = l.split_once("peer died: ") {
                    cause = Some(c.to_string());
                    said.store(true, Relaxed);
                }
            }
            cause
        });
        LoopWorker {
            child,
            lines,
            said_stopped,
        }
    }
}

/// The kill loop: four processes move money on one pool; every 10 to 300 ms one of
/// them is `SIGKILL`ed and a new one started in its place, while the others go on (the
/// dead one is recovered while they run). Where a death cannot be recovered the pool
/// stops: its processes end with `PeerDied`, and the loop lets every process close,
/// checks the pool from an exclusive open and starts over. No survivor may hang; at
/// every check the total is kept and every acknowledged transfer is there, plus at
/// most one per process killed (its last transfer may have committed without its
/// saying so) and one per process that failed with `PeerDied` (its commit may have
/// been durable before a wait in it gave up, as at a crash).
#[test]
fn processes_killed_at_random_lose_nothing_acknowledged() {
    use rand::Rng;
    use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
    let _one = one_at_a_time();
    let (_d, p) = pool_path();
    create_bank(&p);
    let mut rng = rand::thread_rng();
    let (mut committed, mut killed, mut stops, mut checks) = (0u64, 0usize, 0usize, 0usize);
    let mut stops_by_cause = std::collections::BTreeMap::new();
    while killed < kills() {
        let acked = Arc::new(AtomicU64::new(0));
        let mut workers: Vec<LoopWorker> = (0..4).map(|_| LoopWorker::start(&p, &acked)).collect();
        let (mut unknown, mut stopped) = (0u64, false);
        let started = std::time::Instant::now();
        while acked.load(Relaxed) == 0 {
            assert!(
                started.elapsed() < std::time::Duration::from_secs(30),
                "no worker committed a transfer"
            );
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        while killed < kills() {
            std::thread::sleep(std::time::Duration::from_millis(rng.gen_range(10..=300)));
            if workers.iter().any(|w| w.said_stopped.load(Relaxed)) {
                stopped = true;
                break;
            }
            let victim = rng.gen_range(0..workers.len());
            let mut dead = workers.swap_remove(victim);
            dead.child.kill().unwrap();
            dead.child.wait().unwrap();
            let _ = dead.lines.join();
            killed += 1;
            unknown += 1;
            workers.push(LoopWorker::start(&p, &acked));
        }
        // Every worker closes when told (those stopped have closed already).
        for w in &mut workers {
            drop(w.child.stdin.take());
        }
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        for w in &mut workers {
            loop {
                if let Some(status) = w.child.try_wait().unwrap() {
                    assert!(status.success(), "after {killed} kills: a worker failed");
                    break;
                }
                if std::time::Instant::now() >= deadline {
                    for w in &mut workers {
                        let _ = w.child.kill();
                    }
                    panic!("after {killed} kills: a survivor hung");
                }
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
        }
        let causes: Vec<String> = workers
            .into_iter()
            .filter_map(|w| w.lines.join().unwrap())
            .collect();
        let said_stopped = causes.len() as u64;
        stops += usize::from(stopped || said_stopped > 0);
        if let Some(c) = causes.first() {
            *stops_by_cause.entry(c.clone()).or_insert(0) += 1;
        }
        let pool = Pool::open(&p, cfg()).unwrap();
        let (total, count) = audit(&pool);
        assert_eq!(total, TOTAL, "after {killed} kills: the total");
        let acked = committed + acked.load(Relaxed);
        let unknown = unknown + said_stopped;
        assert!(
            (acked..=acked + unknown).contains(&count),
            "after {killed} kills: {count} transfers in the pool, {acked} acknowledged, \
             {unknown} unknown"
        );
        // What the killed processes committed without saying so counts from now on.
        committed = count;
        checks += 1;
    }
    eprintln!(
        "{killed} kills, {stops} of them stopping the pool (by cause: {stops_by_cause:?}), \
         {checks} checks, {committed} transfers"
    );
}

const ACCOUNTS: usize = 16;
const TOTAL: u64 = 1600;
/// The root: the accounts, then the number of transfers made.
type Bank = [u64; ACCOUNTS + 1];

/// A new bank pool at `p`.
fn create_bank(p: &std::path::Path) {
    let pool = Pool::create(p, cfg()).unwrap();
    let root: PPtr<Bank> = pool.root().unwrap();
    pool.run(|tx| {
        let b = tx.write(root)?;
        b[..ACCOUNTS].fill(TOTAL / ACCOUNTS as u64);
        Ok(())
    })
    .unwrap();
}

/// The total of the accounts and the number of transfers, in one snapshot.
fn audit(pool: &Pool) -> (u64, u64) {
    let root: PPtr<Bank> = pool.root().unwrap();
    pool.read(|tx| {
        let b = tx.read(root)?;
        Ok((b[..ACCOUNTS].iter().sum(), b[ACCOUNTS]))
    })
    .unwrap()
}

/// `n` random transfers between the accounts of the pool's root, each followed by a
/// snapshot that checks the total.
fn transfers(pool: &Pool, seed: u64, n: usize) {
    let root: PPtr<Bank> = pool.root().unwrap();
    let mut x = 0x9e37_79b9_7f4a_7c15u64 ^ seed;
    for _ in 0..n {
        pool.run(|tx| transfer(tx, root, next_pair(&mut x)))
            .unwrap();
        assert_eq!(audit(pool).0, TOTAL);
    }
}

/// The next pair of accounts (from, to) of the xorshift sequence in `x`.
fn next_pair(x: &mut u64) -> (usize, usize) {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    ((*x % 16) as usize, ((*x >> 8) % 16) as usize)
}

/// Move one unit from account `from` to `to` (if `from` has one) and count the transfer.
fn transfer(
    tx: &mut pisces::Tx<'_>,
    root: PPtr<Bank>,
    (from, to): (usize, usize),
) -> pisces::Result<()> {
    let a = tx.write(root)?;
    if a[from] > 0 {
        a[from] -= 1;
        a[to] += 1;
    }
    a[ACCOUNTS] += 1;
    Ok(())
}

/// Three processes (this test binary started again as `worker_process`) and this one
/// move money on one pool at the same time; each checks the total in every snapshot,
/// and the total is there for the next exclusive open.
#[test]
fn real_processes_transfer_and_keep_the_total() {
    let _one = one_at_a_time();
    let (_d, p) = pool_path();
    create_bank(&p);
    let here = Pool::open(&p, shared()).unwrap();
    let workers: Vec<_> = (0..3).map(|_| worker(&p).spawn().unwrap()).collect();
    transfers(&here, 7, 3000);
    for mut w in workers {
        assert!(w.wait().unwrap().success(), "a worker failed");
    }
    drop(here);
    let pool = Pool::open(&p, cfg()).unwrap();
    assert_eq!(audit(&pool), (TOTAL, 4 * 3000), "every process's transfers");
}

/// A process killed with the pool open (between transactions) leaves its slot in use
/// and its committed transactions waiting for write-back: a process that attaches
/// afterwards recovers the slot before it joins (it could otherwise wait on the slot
/// without end), while the processes attached go on, and the next open after they
/// close finds every committed transfer.
#[test]
fn a_process_killed_with_the_pool_open_is_recovered_by_the_next_to_join() {
    let _one = one_at_a_time();
    let (_d, p) = pool_path();
    create_bank(&p);
    let here = Pool::open(&p, shared()).unwrap();
    // This process has slot 0; another "process" takes slot 1 and gives it back
    // cleanly after the worker has taken slot 2.
    let mut h = here.handle().unwrap();
    let visitor = Pool::open(&p, shared()).unwrap();
    let v = visitor.handle().unwrap();
    let mut worker = worker_saying(&p, WORKER_WAITS, "1", "transferred");
    drop(v);
    drop(visitor);
    worker.kill().unwrap();
    worker.wait().unwrap();
    let joined = Pool::open(&p, shared()).unwrap();
    let root: PPtr<Bank> = here.root().unwrap();
    joined
        .run(|tx| {
            tx.write(root)?[ACCOUNTS] += 1;
            Ok(())
        })
        .unwrap();
    drop(joined);
    for _ in 0..200 {
        h.run(|tx| {
            tx.write(root)?[ACCOUNTS] += 1;
            Ok(())
        })
        .unwrap();
    }
    drop(h);
    drop(here);
    let pool = Pool::open(&p, cfg()).unwrap();
    assert_eq!(audit(&pool), (TOTAL, 301));
}

/// The environment variable that makes `worker_process` append that many objects to
/// the second list of a pool that grows ([`append`]), then check both lists.
const WORKER_GROWS: &str = "PISCES_SHARED_POOL_WORKER_GROWS";

/// The root of a pool that grows: two lists of 4 KiB objects (head, length each).
type Lists = [u64; 4];
/// Words of one list object.
const OBJ_WORDS: usize = 512;
type Obj = [u64; OBJ_WORDS];

/// A shared pool of 8 MiB that may grow to 64 MiB.
fn growable() -> Config {
    shared().max_size(64 << 20)
}

fn pattern(list: usize, i: u64, k: usize) -> u64 {
    (i ^ (list as u64) << 40).wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ k as u64
}

/// Append `n` objects to list `list` of the root `lists`, one per transaction.
fn append(pool: &Pool, lists: PPtr<Lists>, list: usize, n: u64) {
    let mut h = pool.handle().unwrap();
    for _ in 0..n {
        h.run(|tx| {
            let l = *tx.read(lists)?;
            let (head, count) = (l[2 * list], l[2 * list + 1]);
            let mut o: Obj = [0; OBJ_WORDS];
            o[0] = head;
            o[1] = count;
            for (k, w) in o.iter_mut().enumerate().skip(2) {
                *w = pattern(list, count, k);
            }
            let p = tx.alloc(o)?;
            let l = tx.write(lists)?;
            l[2 * list] = p.offset();
            l[2 * list + 1] = count + 1;
            Ok(())
        })
        .unwrap();
    }
}

/// Walk both lists in one snapshot and check every object: the lengths.
fn check_lists(pool: &Pool, lists: PPtr<Lists>) -> [u64; 2] {
    pool.read(|tx| {
        let l = *tx.read(lists)?;
        let mut lens = [0; 2];
        for (list, len) in lens.iter_mut().enumerate() {
            let (mut head, count) = (l[2 * list], l[2 * list + 1]);
            while head != 0 {
                let o = tx.read(PPtr::<Obj>::from_offset(head))?;
                let i = count - 1 - *len;
                assert_eq!(o[1], i, "list {list}: object {len} from the head");
                for (k, &w) in o.iter().enumerate().skip(2) {
                    assert_eq!(
                        w,
                        pattern(list, i, k),
                        "list {list}: word {k} of object {i}"
                    );
                }
                head = o[0];
                *len += 1;
            }
            assert_eq!(*len, count, "list {list}");
        }
        Ok(lens)
    })
    .unwrap()
}

/// Two "processes" append to a pool that grows, at the same time: each growth, made by
/// whichever needs it, is used by the other (it allocates in the grown part, and reads
/// the other's objects there), and the next exclusive open finds both lists whole and
/// the pool sound.
#[test]
fn a_pool_grown_by_one_process_is_used_by_the_others() {
    let _one = one_at_a_time();
    let (_d, p) = pool_path();
    // 2 × 3,000 objects of 4 KiB: 24 MiB, three times the pool's first size.
    grow_together(&p, growable(), 500, pisces::medium::MediumKind::DRAM);
}

/// The same on a disk file (the file medium, whose commits `msync` the pages they
/// wrote, in the part grown by either process too).
#[test]
fn a_pool_on_disk_grown_by_one_process_is_used_by_the_others() {
    let _one = one_at_a_time();
    let d = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let p = d.path().join("pool");
    let cfg = growable()
        .size(2 << 20)
        .max_size(32 << 20)
        .medium(pisces::medium::MediumKind::File);
    // 2 × 600 objects of 4 KiB: 4.8 MiB, more than twice the pool's first size.
    grow_together(&p, cfg, 100, pisces::medium::MediumKind::File);
}

/// Create the pool at `p` with `cfg` (shared, may grow), open it a second time, and
/// append six rounds of `round` objects to one list from each open at once, each open
/// checking both lists after every round; then the same checks after the last close,
/// and `pisces check` of the file.
fn grow_together(p: &std::path::Path, cfg: Config, round: u64, medium: pisces::medium::MediumKind) {
    let a = Pool::create(p, cfg.clone()).unwrap();
    let b = Pool::open(p, cfg.clone()).unwrap();
    let lists: PPtr<Lists> = a.root().unwrap();
    assert_eq!(b.root::<Lists>().unwrap(), lists);
    let before = std::fs::metadata(p).unwrap().len();
    std::thread::scope(|s| {
        for (list, pool) in [&a, &b].into_iter().enumerate() {
            s.spawn(move || {
                for _ in 0..6 {
                    append(pool, lists, list, round);
                    // Each reads both lists, the other's objects in parts grown by
                    // either process.
                    check_lists(pool, lists);
                }
            });
        }
    });
    let grown = std::fs::metadata(p).unwrap().len();
    assert!(
        grown > 2 * before,
        "the pool grew from {before} to {grown} bytes"
    );
    let n = 6 * round;
    assert_eq!(check_lists(&a, lists), [n, n]);
    assert_eq!(check_lists(&b, lists), [n, n]);
    drop(a);
    drop(b);
    let report = pisces::tools::check::check_pool(p, medium).unwrap();
    assert!(report.is_ok(), "{report}");
    let pool = Pool::open(p, cfg.sharing(Sharing::Exclusive)).unwrap();
    assert_eq!(check_lists(&pool, lists), [n, n]);
}

/// A worker process grows the pool while this one does: both lists are whole in each
/// and at the next exclusive open.
#[test]
fn real_processes_grow_one_pool() {
    let _one = one_at_a_time();
    let (_d, p) = pool_path();
    let here = Pool::create(&p, growable()).unwrap();
    let lists: PPtr<Lists> = here.root().unwrap();
    let mut w = worker(&p).env(WORKER_GROWS, "2500").spawn().unwrap();
    append(&here, lists, 0, 2500);
    assert!(w.wait().unwrap().success(), "the worker failed");
    assert_eq!(check_lists(&here, lists), [2500, 2500]);
    drop(here);
    let pool = Pool::open(&p, cfg().max_size(64 << 20)).unwrap();
    assert_eq!(check_lists(&pool, lists), [2500, 2500]);
}
