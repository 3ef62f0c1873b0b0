//! Crash consistency of the Pisces engine on the crash simulator.
//!
//! Each test runs a workload on a simulated machine that loses power at a chosen fence,
//! builds crash images with the adversary (per 8-byte word: flushed-but-unfenced and
//! never-flushed dirty words may or may not have reached the medium), recovers each
//! image as a fresh process would, and checks the recovered state against an oracle
//! that knows nothing of the engine:
//! * every transaction whose commit returned before the crash is present;
//! * no transaction is present in part (the state equals the state after exactly the
//!   acknowledged transactions, possibly plus the one in flight per thread);
//! * the allocator's persistent bitmaps equal the set of reachable objects.
//!
//! Short runs crash at every fence; 2-thread runs at random fences; some recoveries are
//! crashed again and recovered again.

mod common;

use pisces::heap::alloc::Allocator;
use pisces::medium::sim::{Adversary, SimConfig, SimMedium};
use pisces::medium::Medium;
use pisces::{Config, EngineOptions, PPtr, Pod, Pool, Zeroable};
use std::collections::BTreeSet;
use std::sync::Arc;

const POOL: u64 = 1 << 20;
const ACCOUNTS: usize = 8;
const INITIAL: i64 = 100;

fn cfg(opts: EngineOptions) -> Config {
    Config {
        size: POOL,
        max_threads: 2,
        log_bytes_per_thread: 16 << 10,
        engine_options: opts,
        ..Config::default()
    }
}

/// A fresh pool image with the workload's initial state, made on a machine that does
/// not crash.
fn initial_image(opts: EngineOptions, setup: impl Fn(&Pool)) -> Vec<u8> {
    let sim = Arc::new(SimMedium::new(POOL as usize, SimConfig::default()).unwrap());
    let pool = Pool::create_on(sim.clone(), cfg(opts)).unwrap();
    setup(&pool);
    drop(pool);
    sim.crash_image_now_with(0, Adversary::DurableOnly).image
}

fn boot(image: Vec<u8>, sim_cfg: SimConfig) -> Arc<SimMedium> {
    Arc::new(SimMedium::from_image(image, sim_cfg).unwrap())
}

/// Open a crash image, crashing again during recovery when `recovery_crash` says so,
/// and return the recovered pool.
fn recover(image: Vec<u8>, opts: EngineOptions, recovery_crash: Option<u64>, seed: u64) -> Pool {
    let image = match recovery_crash {
        Some(n) => {
            let sim = boot(image.clone(), SimConfig::crash_at_fence(n).with_seed(seed));
            let opened = Pool::open_on(sim.clone(), cfg(opts));
            drop(opened);
            if sim.crashed() {
                sim.crash_image(seed).unwrap()
            } else {
                // Recovery needed fewer fences: it completed; use its result.
                sim.crash_image_now_with(seed, Adversary::DurableOnly).image
            }
        }
        None => image,
    };
    let sim = boot(image, SimConfig::default());
    Pool::open_on(sim, cfg(opts)).expect("recovery must succeed on every crash image")
}

/// Payload offsets of all allocated blocks.
fn allocated(pool: &Pool) -> BTreeSet<u64> {
    let mut set = BTreeSet::new();
    Allocator::for_each_allocated(pool.heap(), |b| {
        set.insert(b.payload());
    })
    .unwrap();
    set
}

// ---------------------------------------------------------------- bank workload

/// The i-th transfer of thread `t`: (from, to, amount), unconditional so that effects
/// commute between threads.
fn transfer(t: usize, i: usize) -> (usize, usize, i64) {
    let x = (t as u64 * 1_000_003 + i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    let from = (x >> 20) as usize % ACCOUNTS;
    let to = (from + 1 + (x >> 40) as usize % (ACCOUNTS - 1)) % ACCOUNTS;
    (from, to, (x >> 8) as i64 % 37 + 1)
}

fn bank_setup(pool: &Pool) {
    let table: PPtr<[PPtr<i64>; ACCOUNTS]> = pool.root().unwrap();
    pool.run(|tx| {
        let mut t = [PPtr::null(); ACCOUNTS];
        for a in t.iter_mut() {
            *a = tx.alloc(INITIAL)?;
        }
        *tx.write(table)? = t;
        Ok(())
    })
    .unwrap();
}

/// Runs transfers until the machine crashes or `n` are done on each of `threads`
/// threads; returns, per thread, how many commits returned before the crash.
fn bank_run(pool: &Pool, sim: &SimMedium, threads: usize, n: usize) -> Vec<usize> {
    let table: PPtr<[PPtr<i64>; ACCOUNTS]> = pool.root().unwrap();
    let accounts = pool.run(|tx| Ok(*tx.read(table)?)).unwrap();
    std::thread::scope(|s| {
        let hs: Vec<_> = (0..threads)
            .map(|t| {
                let pool = pool.clone();
                s.spawn(move || {
                    let mut h = pool.handle().unwrap();
                    let mut acked = 0;
                    for i in 0..n {
                        if sim.crashed() {
                            break;
                        }
                        let (from, to, amount) = transfer(t, i);
                        h.run(|tx| {
                            *tx.write(accounts[from])? -= amount;
                            *tx.write(accounts[to])? += amount;
                            Ok(())
                        })
                        .unwrap();
                        // Acknowledged only if the commit completed before the crash.
                        if !sim.crashed() {
                            acked += 1;
                        }
                    }
                    acked
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

fn balances_after(counts: &[usize]) -> [i64; ACCOUNTS] {
    let mut b = [INITIAL; ACCOUNTS];
    for (t, &c) in counts.iter().enumerate() {
        for i in 0..c {
            let (from, to, amount) = transfer(t, i);
            b[from] -= amount;
            b[to] += amount;
        }
    }
    b
}

fn bank_check(pool: &Pool, acked: &[usize], n: usize, what: &str) {
    let table: PPtr<[PPtr<i64>; ACCOUNTS]> = pool.root().unwrap();
    let (accounts, got) = pool
        .run(|tx| {
            let t = *tx.read(table)?;
            let mut b = [0i64; ACCOUNTS];
            for (i, a) in t.iter().enumerate() {
                b[i] = *tx.read(*a)?;
            }
            Ok((t, b))
        })
        .unwrap();
    // Each thread: its acknowledged prefix, or that plus its in-flight transfer.
    let mut ok = false;
    for mask in 0..(1usize << acked.len()) {
        let counts: Vec<usize> = acked
            .iter()
            .enumerate()
            .map(|(t, &a)| (a + (mask >> t & 1)).min(n))
            .collect();
        if balances_after(&counts) == got {
            ok = true;
            break;
        }
    }
    assert!(
        ok,
        "{what}: recovered balances {got:?} match no acknowledged prefix {acked:?}"
    );
    assert_eq!(
        got.iter().sum::<i64>(),
        INITIAL * ACCOUNTS as i64,
        "{what}: total"
    );
    let mut reachable: BTreeSet<u64> = accounts.iter().map(|p| p.offset()).collect();
    reachable.insert(table.offset());
    assert_eq!(
        allocated(pool),
        reachable,
        "{what}: allocator bitmaps vs reachable objects"
    );
}

/// Single thread, crash at every fence of a short run, two adversary images per crash,
/// and every fifth image crashed again during recovery.
#[test]
fn bank_single_thread_every_fence() {
    for opts in common::all_options() {
        let n = 24;
        let image = initial_image(opts, bank_setup);
        // Count the fences of a run that does not crash.
        let sim = boot(image.clone(), SimConfig::default());
        let pool = Pool::open_on(sim.clone(), cfg(opts)).unwrap();
        bank_run(&pool, &sim, 1, n);
        drop(pool);
        let fences = sim.fence_count();
        assert!(
            fences > n as u64,
            "every update transaction fences at least once"
        );
        let mut checked = 0;
        for f in 0..fences {
            let sim = boot(image.clone(), SimConfig::crash_at_fence(f).with_seed(f));
            let acked = match Pool::open_on(sim.clone(), cfg(opts)) {
                Ok(pool) => {
                    let a = bank_run(&pool, &sim, 1, n);
                    drop(pool);
                    a
                }
                // Crashed inside the open's own recovery: nothing acknowledged.
                Err(e) => panic!("open before the crash failed: {e}"),
            };
            assert!(sim.crashed(), "fence {f} of {fences} was reached");
            for seed in 0..2 {
                let img = sim.crash_image(seed).unwrap();
                let rc = (f % 5 == 0).then_some(seed + f % 7);
                let pool = recover(img, opts, rc, seed);
                bank_check(&pool, &acked, n, &format!("{opts:?} fence {f} seed {seed}"));
                checked += 1;
            }
        }
        assert!(checked >= 2 * fences);
    }
}

/// Two threads on shared accounts, crashes at random fences.
#[test]
fn bank_two_threads_random_fences() {
    for opts in common::all_options() {
        let n = 40;
        let image = initial_image(opts, bank_setup);
        let sim = boot(image.clone(), SimConfig::default());
        let pool = Pool::open_on(sim.clone(), cfg(opts)).unwrap();
        bank_run(&pool, &sim, 2, n);
        drop(pool);
        let fences = sim.fence_count();
        let mut x = 12345u64;
        for round in 0..30 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
            let f = (x >> 33) % fences;
            let sim = boot(image.clone(), SimConfig::crash_at_fence(f).with_seed(round));
            let pool = Pool::open_on(sim.clone(), cfg(opts)).unwrap();
            let acked = bank_run(&pool, &sim, 2, n);
            drop(pool);
            if !sim.crashed() {
                continue; // this interleaving needed fewer fences
            }
            let img = sim.crash_image(round).unwrap();
            let pool = recover(img, opts, (round % 4 == 0).then_some(round % 5), round);
            bank_check(&pool, &acked, n, &format!("{opts:?} 2 threads fence {f}"));
        }
    }
}

// ---------------------------------------------------------------- list workload

#[derive(Clone, Copy, Pod, Zeroable)]
#[repr(C)]
struct Node {
    key: u64,
    payload: [u64; 3],
    next: PPtr<Node>,
}

/// Heads of one sorted list per thread.
type Heads = [PPtr<Node>; 2];

/// Operation i of thread t: insert a key, or delete the smallest key (every third op).
fn list_op(t: usize, i: usize) -> Option<u64> {
    if i % 3 == 2 {
        None
    } else {
        Some(((t * 7919 + i * 104_729) % 1000) as u64)
    }
}

fn list_apply(list: &mut Vec<u64>, op: Option<u64>) {
    match op {
        Some(k) => {
            let pos = list.partition_point(|&x| x < k);
            list.insert(pos, k);
        }
        None => {
            if !list.is_empty() {
                list.remove(0);
            }
        }
    }
}

fn list_run(pool: &Pool, sim: &SimMedium, threads: usize, n: usize) -> Vec<usize> {
    let heads: PPtr<Heads> = pool.root().unwrap();
    std::thread::scope(|s| {
        let hs: Vec<_> = (0..threads)
            .map(|t| {
                let pool = pool.clone();
                s.spawn(move || {
                    let mut h = pool.handle().unwrap();
                    let mut acked = 0;
                    for i in 0..n {
                        if sim.crashed() {
                            break;
                        }
                        let op = list_op(t, i);
                        h.run(|tx| {
                            let head = tx.read(heads)?[t];
                            match op {
                                Some(k) => {
                                    // Sorted insert.
                                    let mut prev: Option<PPtr<Node>> = None;
                                    let mut cur = head;
                                    while !cur.is_null() {
                                        let n = *tx.read(cur)?;
                                        if n.key >= k {
                                            break;
                                        }
                                        prev = Some(cur);
                                        cur = n.next;
                                    }
                                    let node = tx.alloc(Node {
                                        key: k,
                                        payload: [k; 3],
                                        next: cur,
                                    })?;
                                    match prev {
                                        None => tx.write(heads)?[t] = node,
                                        Some(p) => tx.write(p)?.next = node,
                                    }
                                }
                                None => {
                                    if !head.is_null() {
                                        let next = tx.read(head)?.next;
                                        tx.write(heads)?[t] = next;
                                        tx.free(head)?;
                                    }
                                }
                            }
                            Ok(())
                        })
                        .unwrap();
                        if !sim.crashed() {
                            acked += 1;
                        }
                    }
                    acked
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

fn list_check(pool: &Pool, acked: &[usize], n: usize, what: &str) {
    let heads: PPtr<Heads> = pool.root().unwrap();
    let (lists, nodes) = pool
        .run(|tx| {
            let hs = *tx.read(heads)?;
            let mut lists = Vec::new();
            let mut nodes = BTreeSet::new();
            for h in hs {
                let mut v = Vec::new();
                let mut cur = h;
                while !cur.is_null() {
                    assert!(
                        nodes.insert(cur.offset()),
                        "{what}: a node is reachable twice (cycle or shared)"
                    );
                    let n = *tx.read(cur)?;
                    assert_eq!(n.payload, [n.key; 3], "{what}: torn node");
                    v.push(n.key);
                    cur = n.next;
                }
                lists.push(v);
            }
            Ok((lists, nodes))
        })
        .unwrap();
    for (t, got) in lists.iter().enumerate().take(acked.len()) {
        let mut expect = Vec::new();
        for i in 0..acked[t] {
            list_apply(&mut expect, list_op(t, i));
        }
        let mut expect_plus = expect.clone();
        if acked[t] < n {
            list_apply(&mut expect_plus, list_op(t, acked[t]));
        }
        assert!(
            *got == expect || *got == expect_plus,
            "{what}: thread {t} list {got:?} is neither {expect:?} nor {expect_plus:?}"
        );
    }
    let mut reachable = nodes;
    reachable.insert(heads.offset());
    assert_eq!(
        allocated(pool),
        reachable,
        "{what}: allocator bitmaps vs reachable nodes"
    );
}

fn list_setup(pool: &Pool) {
    let _: PPtr<Heads> = pool.root().unwrap();
}

#[test]
fn list_single_thread_every_fence() {
    for opts in common::all_options() {
        let n = 21;
        let image = initial_image(opts, list_setup);
        let sim = boot(image.clone(), SimConfig::default());
        let pool = Pool::open_on(sim.clone(), cfg(opts)).unwrap();
        list_run(&pool, &sim, 1, n);
        drop(pool);
        let fences = sim.fence_count();
        for f in 0..fences {
            let sim = boot(image.clone(), SimConfig::crash_at_fence(f).with_seed(f));
            let pool = Pool::open_on(sim.clone(), cfg(opts)).unwrap();
            let acked = list_run(&pool, &sim, 1, n);
            drop(pool);
            for seed in 0..2 {
                let img = sim.crash_image(seed).unwrap();
                let pool = recover(img, opts, (f % 6 == 1).then_some(f % 4), seed);
                list_check(&pool, &acked, n, &format!("{opts:?} fence {f} seed {seed}"));
            }
        }
    }
}

#[test]
fn list_two_threads_random_fences() {
    for opts in common::all_options() {
        let n = 30;
        let image = initial_image(opts, list_setup);
        let sim = boot(image.clone(), SimConfig::default());
        let pool = Pool::open_on(sim.clone(), cfg(opts)).unwrap();
        list_run(&pool, &sim, 2, n);
        drop(pool);
        let fences = sim.fence_count();
        let mut x = 777u64;
        for round in 0..30 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
            let f = (x >> 33) % fences;
            let sim = boot(image.clone(), SimConfig::crash_at_fence(f).with_seed(round));
            let pool = Pool::open_on(sim.clone(), cfg(opts)).unwrap();
            let acked = list_run(&pool, &sim, 2, n);
            drop(pool);
            if !sim.crashed() {
                continue;
            }
            let img = sim.crash_image(round).unwrap();
            let pool = recover(img, opts, (round % 3 == 0).then_some(round % 6), round);
            list_check(&pool, &acked, n, &format!("{opts:?} 2 threads fence {f}"));
        }
    }
}

/// Eviction at its worst: every written word reached the medium, or none did.
#[test]
fn extreme_adversaries() {
    let opts = EngineOptions::default();
    let n = 15;
    let image = initial_image(opts, bank_setup);
    let sim = boot(image.clone(), SimConfig::default());
    let pool = Pool::open_on(sim.clone(), cfg(opts)).unwrap();
    bank_run(&pool, &sim, 1, n);
    drop(pool);
    for f in 0..sim.fence_count() {
        for adv in [Adversary::AllWritten, Adversary::DurableOnly] {
            let sim = boot(
                image.clone(),
                SimConfig::crash_at_fence(f).with_adversary(adv),
            );
            let pool = Pool::open_on(sim.clone(), cfg(opts)).unwrap();
            let acked = bank_run(&pool, &sim, 1, n);
            drop(pool);
            let img = sim.crash_image(f).unwrap();
            let pool = recover(img, opts, None, 0);
            bank_check(&pool, &acked, n, &format!("{adv:?} fence {f}"));
        }
    }
    let _ = Medium::len(&*sim);
}
