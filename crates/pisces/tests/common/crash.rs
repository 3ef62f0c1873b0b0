//! Crash-test workloads with engine-independent oracles, shared by the crash tests and
//! the mutation tests. Checks return `Err(description)` instead of panicking so that a
//! mutation test can count violations.
#![allow(dead_code)]

use pisces::heap::alloc::Allocator;
use pisces::medium::sim::{Adversary, SimConfig, SimMedium};
use pisces::medium::Medium;
use pisces::{Config, EngineOptions, PPtr, Pod, Pool, Zeroable};
use std::collections::BTreeSet;
use std::sync::Arc;

pub const POOL: u64 = 1 << 20;
pub const ACCOUNTS: usize = 8;
pub const INITIAL: i64 = 100;

pub fn cfg(opts: EngineOptions) -> Config {
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
pub fn initial_image(opts: EngineOptions, setup: impl Fn(&Pool)) -> Vec<u8> {
    let sim = Arc::new(SimMedium::new(POOL as usize, SimConfig::default()).unwrap());
    let pool = Pool::create_on(sim.clone(), cfg(opts)).unwrap();
    setup(&pool);
    drop(pool);
    sim.crash_image_now_with(0, Adversary::DurableOnly).image
}

pub fn boot(image: Vec<u8>, sim_cfg: SimConfig) -> Arc<SimMedium> {
    Arc::new(SimMedium::from_image(image, sim_cfg).unwrap())
}

/// Open a crash image, crashing again during recovery when `recovery_crash` says so,
/// and return the recovered pool.
pub fn recover(
    image: Vec<u8>,
    opts: EngineOptions,
    recovery_crash: Option<u64>,
    seed: u64,
) -> Result<Pool, String> {
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
    Pool::open_on(sim, cfg(opts)).map_err(|e| format!("recovery failed: {e}"))
}

/// Payload offsets of all allocated blocks.
pub fn allocated(pool: &Pool) -> BTreeSet<u64> {
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
pub fn transfer(t: usize, i: usize) -> (usize, usize, i64) {
    let x = (t as u64 * 1_000_003 + i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    let from = (x >> 20) as usize % ACCOUNTS;
    let to = (from + 1 + (x >> 40) as usize % (ACCOUNTS - 1)) % ACCOUNTS;
    (from, to, (x >> 8) as i64 % 37 + 1)
}

pub fn bank_setup(pool: &Pool) {
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
pub fn bank_run(pool: &Pool, sim: &SimMedium, threads: usize, n: usize) -> Vec<usize> {
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

pub fn balances_after(counts: &[usize]) -> [i64; ACCOUNTS] {
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

pub fn bank_check(pool: &Pool, acked: &[usize], n: usize, what: &str) -> Result<(), String> {
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
        .map_err(|e| format!("{what}: reading the recovered state: {e}"))?;
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
    if !ok {
        return Err(format!(
            "{what}: recovered balances {got:?} match no acknowledged prefix {acked:?}"
        ));
    }
    let mut reachable: BTreeSet<u64> = accounts.iter().map(|p| p.offset()).collect();
    reachable.insert(table.offset());
    let alloc = allocated(pool);
    if alloc != reachable {
        return Err(format!(
            "{what}: allocator bitmaps {alloc:?} vs reachable objects {reachable:?}"
        ));
    }
    Ok(())
}

// ---------------------------------------------------------------- list workload

#[derive(Clone, Copy, Pod, Zeroable)]
#[repr(C)]
pub struct Node {
    key: u64,
    payload: [u64; 3],
    next: PPtr<Node>,
}

/// Heads of one sorted list per thread.
pub type Heads = [PPtr<Node>; 2];

/// Operation i of thread t: insert a key, or delete the smallest key (every third op).
pub fn list_op(t: usize, i: usize) -> Option<u64> {
    if i % 3 == 2 {
        None
    } else {
        Some(((t * 7919 + i * 104_729) % 1000) as u64)
    }
}

pub fn list_apply(list: &mut Vec<u64>, op: Option<u64>) {
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

pub fn list_run(pool: &Pool, sim: &SimMedium, threads: usize, n: usize) -> Vec<usize> {
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

pub fn list_check(pool: &Pool, acked: &[usize], n: usize, what: &str) -> Result<(), String> {
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
                    if !nodes.insert(cur.offset()) {
                        return Err(pisces::Error::abort(
                            "a node is reachable twice (cycle or shared)",
                        ));
                    }
                    let n = *tx.read(cur)?;
                    if n.payload != [n.key; 3] {
                        return Err(pisces::Error::abort("torn node"));
                    }
                    v.push(n.key);
                    cur = n.next;
                }
                lists.push(v);
            }
            Ok((lists, nodes))
        })
        .map_err(|e| format!("{what}: {e}"))?;
    for (t, got) in lists.iter().enumerate().take(acked.len()) {
        let mut expect = Vec::new();
        for i in 0..acked[t] {
            list_apply(&mut expect, list_op(t, i));
        }
        let mut expect_plus = expect.clone();
        if acked[t] < n {
            list_apply(&mut expect_plus, list_op(t, acked[t]));
        }
        if *got != expect && *got != expect_plus {
            return Err(format!(
                "{what}: thread {t} list {got:?} is neither {expect:?} nor {expect_plus:?}"
            ));
        }
    }
    let mut reachable = nodes;
    reachable.insert(heads.offset());
    let alloc = allocated(pool);
    if alloc != reachable {
        return Err(format!(
            "{what}: allocator bitmaps {alloc:?} vs reachable nodes {reachable:?}"
        ));
    }
    Ok(())
}

pub fn list_setup(pool: &Pool) {
    let _: PPtr<Heads> = pool.root().unwrap();
}

/// A workload: setup, run (returns per-thread acknowledged counts), check.
#[derive(Clone, Copy, Debug)]
pub enum Workload {
    /// Transfers between accounts.
    Bank,
    /// Sorted-list inserts and deletes with allocation and free.
    List,
}

impl Workload {
    pub fn setup(self, pool: &Pool) {
        match self {
            Workload::Bank => bank_setup(pool),
            Workload::List => list_setup(pool),
        }
    }
    pub fn run(self, pool: &Pool, sim: &SimMedium, threads: usize, n: usize) -> Vec<usize> {
        match self {
            Workload::Bank => bank_run(pool, sim, threads, n),
            Workload::List => list_run(pool, sim, threads, n),
        }
    }
    pub fn check(self, pool: &Pool, acked: &[usize], n: usize, what: &str) -> Result<(), String> {
        match self {
            Workload::Bank => bank_check(pool, acked, n, what),
            Workload::List => list_check(pool, acked, n, what),
        }
    }
}

/// Outcome of a crash campaign.
#[derive(Debug, Default)]
pub struct Campaign {
    /// Crash images recovered and checked.
    pub states: usize,
    /// Violations found (descriptions, first few).
    pub violations: Vec<String>,
    /// Number of violations.
    pub violation_count: usize,
}

impl Campaign {
    fn record(&mut self, r: Result<(), String>) {
        self.states += 1;
        if let Err(e) = r {
            self.violation_count += 1;
            if self.violations.len() < 5 {
                self.violations.push(e);
            }
        }
    }
}

/// Crash at every fence of a run of `n` transactions on one thread (or, with
/// `threads > 1`, at `rounds` random fences), `images` adversary images per crash, a
/// crash during recovery for every `recovery_crash_every`-th image.
pub fn campaign(
    w: Workload,
    opts: EngineOptions,
    threads: usize,
    n: usize,
    rounds: Option<usize>,
    images: u64,
    adversary: Adversary,
) -> Campaign {
    let image = initial_image(opts, |p| w.setup(p));
    let sim = boot(image.clone(), SimConfig::default());
    let pool = Pool::open_on(sim.clone(), cfg(opts)).unwrap();
    w.run(&pool, &sim, threads, n);
    drop(pool);
    let fences = sim.fence_count();
    let points: Vec<u64> = match rounds {
        None => (0..fences).collect(),
        Some(r) => {
            let mut x = 0x5EED_u64 + threads as u64;
            (0..r)
                .map(|_| {
                    x = x
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    (x >> 33) % fences
                })
                .collect()
        }
    };
    let mut c = Campaign::default();
    for (i, &f) in points.iter().enumerate() {
        let sim = boot(
            image.clone(),
            SimConfig::crash_at_fence(f)
                .with_seed(i as u64)
                .with_adversary(adversary),
        );
        let pool = Pool::open_on(sim.clone(), cfg(opts)).unwrap();
        let acked = w.run(&pool, &sim, threads, n);
        drop(pool);
        if !sim.crashed() {
            continue; // this interleaving needed fewer fences
        }
        for seed in 0..images {
            let img = sim.crash_image(seed).unwrap();
            let rc = (i % 5 == 1).then_some((i as u64 + seed) % 6);
            let what = format!(
                "{w:?} {opts:?} threads {threads} fence {f} seed {seed} recovery crash {rc:?}"
            );
            let r = recover(img, opts, rc, seed).and_then(|pool| w.check(&pool, &acked, n, &what));
            c.record(r.map_err(|e| {
                if e.starts_with(&format!("{w:?}")) {
                    e
                } else {
                    format!("{what}: {e}")
                }
            }));
        }
    }
    c
}
