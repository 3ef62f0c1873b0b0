//! The `mvcc` baseline (the paper's §2.2 strawman) through the public API: snapshot
//! reads stay consistent under concurrent writers, and a reader of an object locked by
//! a committing writer waits for it and then sees the version its snapshot calls for.
//! Then crash consistency on the crash simulator: every library crash workload, and
//! long runs whose logs recycle and wrap. (The behavioural, container and corruption
//! suites run it too, through `common::all_engines`; version reclamation is tested in
//! `engine/mvcc/tests.rs`.)
//!
//! `cargo test -p pisces-verify --release --test engine_mvcc`

mod common;

use pisces::medium::DramMedium;
use pisces::{Config, EngineId, EngineOptions, PPtr, PersistenceDomain, Pool};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const ACCOUNTS: usize = 8;
const TOTAL: u64 = 8_000;

/// Read skew must not happen: two writers move money between accounts while two
/// auditors read the accounts one by one, yielding between reads so that writers
/// commit in the middle of an audit. Every audit must see the exact total, and the
/// auditors must actually have overlapped with commits (the clock moved under them).
#[test]
fn snapshot_reads_have_no_read_skew_under_concurrent_writers() {
    let pool = common::mem_pool_on(EngineId::Mvcc, 16 << 20, 4, EngineOptions::default());
    let table: PPtr<[PPtr<u64>; ACCOUNTS]> = pool.root().unwrap();
    pool.run(|tx| {
        let mut t = [PPtr::null(); ACCOUNTS];
        for a in t.iter_mut() {
            *a = tx.alloc(TOTAL / ACCOUNTS as u64)?;
        }
        *tx.write(table)? = t;
        Ok(())
    })
    .unwrap();
    let accounts = pool.run(|tx| Ok(*tx.read(table)?)).unwrap();
    let stop = AtomicBool::new(false);
    let commits = AtomicU64::new(0);
    let overlapped = AtomicU64::new(0);
    let audits = AtomicU64::new(0);
    std::thread::scope(|s| {
        for t in 0..2u64 {
            let (pool, stop, commits) = (pool.clone(), &stop, &commits);
            s.spawn(move || {
                let mut h = pool.handle().unwrap();
                let mut x = t * 7 + 1;
                while !stop.load(Ordering::Relaxed) {
                    x = x
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    let (from, to) = ((x >> 33) as usize % ACCOUNTS, (x >> 13) as usize % ACCOUNTS);
                    if from == to {
                        continue;
                    }
                    h.run(|tx| {
                        let amount = (*tx.read(accounts[from])?).min(x >> 58);
                        *tx.write(accounts[from])? -= amount;
                        *tx.write(accounts[to])? += amount;
                        Ok(())
                    })
                    .unwrap();
                    commits.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
        for _ in 0..2 {
            let (pool, stop, commits, overlapped, audits) =
                (pool.clone(), &stop, &commits, &overlapped, &audits);
            s.spawn(move || {
                // Stop the writers however this auditor ends (a failed assertion too).
                struct StopOnDrop<'a>(&'a AtomicBool);
                impl Drop for StopOnDrop<'_> {
                    fn drop(&mut self) {
                        self.0.store(true, Ordering::Relaxed);
                    }
                }
                let _stop = StopOnDrop(stop);
                let mut h = pool.handle().unwrap();
                let t0 = Instant::now();
                while overlapped.load(Ordering::Relaxed) < 200 && t0.elapsed().as_secs() < 20 {
                    let mut moved = false;
                    let total = h
                        .run(|tx| {
                            let before = commits.load(Ordering::Relaxed);
                            let mut sum = 0;
                            for a in accounts {
                                sum += *tx.read(a)?;
                                std::thread::yield_now();
                            }
                            moved = commits.load(Ordering::Relaxed) > before;
                            Ok(sum)
                        })
                        .unwrap();
                    assert_eq!(total, TOTAL, "read skew: an audit saw a partial transfer");
                    audits.fetch_add(1, Ordering::Relaxed);
                    if moved {
                        overlapped.fetch_add(1, Ordering::Relaxed);
                    }
                }
            });
        }
    });
    assert!(
        overlapped.load(Ordering::Relaxed) >= 50,
        "only {} of {} audits overlapped a commit",
        overlapped.load(Ordering::Relaxed),
        audits.load(Ordering::Relaxed)
    );
    let sum: u64 = pool
        .run(|tx| accounts.iter().map(|&a| tx.read(a).copied()).sum())
        .unwrap();
    assert_eq!(sum, TOTAL);
}

/// Words of the big object: 32 cache lines, so each of the writer's two fences costs
/// 32 × `LATENCY` of emulated NVM write latency while it holds the object's lock.
const WORDS: usize = 256;
const LATENCY: Duration = Duration::from_millis(4);

/// The strawman's blocking read. A writer commits a new value of a 2 KiB object on a
/// medium with a large emulated NVM write latency, so its commit holds the object's
/// lock for about 2 × 32 × 4 ms. Two readers read the object while it is locked:
/// * `late` starts after the writer took its commit timestamp: its snapshot includes
///   the writer, so it must wait for the lock and then see the new value (without the
///   wait it would find only the old version: the new one is published after the log
///   fence);
/// * `early` started before the writer committed: it waits too (the strawman cannot
///   know the writer's timestamp will be above its start), then sees the old value.
#[test]
fn reader_of_a_locked_object_waits_and_sees_its_snapshot_version() {
    // Small: formatting the pool pays the emulated latency for every line it flushes.
    let size = 2 << 20;
    let m = DramMedium::anonymous(size, LATENCY.as_nanos() as u64, 0).unwrap();
    let pool = Pool::create_on(
        Arc::new(m),
        Config::default()
            .size(size as u64)
            .engine(EngineId::Mvcc)
            .max_threads(3)
            .log_bytes_per_thread(16 << 10),
    )
    .unwrap();
    let root: PPtr<[u64; WORDS]> = pool.root_with(|| [1u64; WORDS]);
    let committing = AtomicBool::new(false);
    let early_started = AtomicBool::new(false);
    let (early, late, writer_took) = std::thread::scope(|s| {
        let (pool2, committing2, early_started2) = (pool.clone(), &committing, &early_started);
        let writer = s.spawn(move || {
            let mut h = pool2.handle().unwrap();
            while !early_started2.load(Ordering::Acquire) {
                std::thread::yield_now();
            }
            let t0 = Instant::now();
            h.run(|tx| {
                *tx.write(root)? = [2u64; WORDS];
                // The commit (lock, timestamp, two slow fences) follows at once.
                committing2.store(true, Ordering::Release);
                Ok(())
            })
            .unwrap();
            t0.elapsed()
        });
        let (pool3, committing3, early_started3) = (pool.clone(), &committing, &early_started);
        let early = s.spawn(move || {
            let mut h = pool3.handle().unwrap();
            h.run(|tx| {
                early_started3.store(true, Ordering::Release);
                while !committing3.load(Ordering::Acquire) {
                    std::thread::yield_now();
                }
                std::thread::sleep(Duration::from_millis(30));
                let t0 = Instant::now();
                let v = tx.read(root)?[0];
                Ok((v, t0.elapsed()))
            })
            .unwrap()
        });
        while !committing.load(Ordering::Acquire) {
            std::thread::yield_now();
        }
        // The writer is in its first fence by now (it takes the lock and the timestamp
        // microseconds after the flag), which lasts ~128 ms.
        std::thread::sleep(Duration::from_millis(30));
        let mut h = pool.handle().unwrap();
        let late = h
            .run(|tx| {
                let t0 = Instant::now();
                let v = tx.read(root)?;
                Ok((v[0], v[WORDS - 1], t0.elapsed()))
            })
            .unwrap();
        (early.join().unwrap(), late, writer.join().unwrap())
    });
    let min_wait = Duration::from_millis(40);
    assert_eq!(
        (late.0, late.1),
        (2, 2),
        "a snapshot taken after the writer's commit timestamp missed its version"
    );
    assert!(
        late.2 >= min_wait,
        "the late reader did not wait ({:?})",
        late.2
    );
    assert_eq!(early.0, 1, "a snapshot taken before the commit saw it");
    assert!(
        early.1 >= min_wait,
        "the early reader did not wait ({:?})",
        early.1
    );
    assert!(
        writer_took >= Duration::from_millis(200),
        "writer took only {writer_took:?}"
    );
    assert_eq!(pool.run(|tx| Ok(tx.read(root)?[WORDS / 2])).unwrap(), 2);
}

/// A root object initialised by `init` (helper for the fixed-size array root above).
trait RootWith {
    fn root_with<T: pisces::Pod>(&self, init: impl Fn() -> T) -> PPtr<T>;
}

impl RootWith for Pool {
    fn root_with<T: pisces::Pod>(&self, init: impl Fn() -> T) -> PPtr<T> {
        let root: PPtr<T> = self.root().unwrap();
        self.run(|tx| {
            *tx.write(root)? = init();
            Ok(())
        })
        .unwrap();
        root
    }
}

/// The Elle-style checker on `mvcc` histories: a random list-append mix shows no
/// anomaly snapshot isolation forbids, and the write-skew workload shows write skew
/// (SI, not serializability) and nothing forbidden. Overlap depends on scheduling (the
/// machine may be busy with other tests): the write-skew run is tried with up to five
/// seeds.
#[test]
fn histories_are_snapshot_isolated_and_show_write_skew() {
    use pisces_verify::sicheck::{check, Isolation, Workload, WorkloadConfig};
    let mut skews = 0;
    for (write_skew, seed) in [
        (false, 11),
        (true, 0),
        (true, 1),
        (true, 2),
        (true, 3),
        (true, 4),
    ] {
        if write_skew && skews > 0 {
            break;
        }
        let threads = 2;
        let pool = common::mem_pool_on(
            EngineId::Mvcc,
            32 << 20,
            threads + 1,
            EngineOptions::default(),
        );
        let wl = Workload::new(WorkloadConfig {
            threads,
            keys: if write_skew { 2 } else { 4 },
            write_skew,
            pause: Duration::from_micros(100),
            seed,
            ..WorkloadConfig::default()
        })
        .unwrap();
        wl.setup(&pool).unwrap();
        let h = wl.run(&pool, 0, 1000, &|| false).unwrap();
        let r = check(&h);
        assert_eq!(
            r.forbidden(Isolation::Snapshot),
            0,
            "{}",
            r.render(Isolation::Snapshot)
        );
        assert_eq!(r.transactions, 1000);
        if write_skew {
            skews = r.write_skew();
        }
    }
    assert!(skews > 0, "no write skew in five runs");
}

/// The `mvcc` strawman on the crash workloads and oracles of the Pisces engine: every
/// fence of short runs (the log fence and the home fence of each commit, log
/// recycling), and random fences of 2-thread runs.
#[test]
fn mvcc_engine_every_fence_and_random() {
    common::crash::baseline_every_fence_and_random(pisces::EngineId::Mvcc);
}

/// The `mvcc` strawman over long runs whose logs recycle and wrap several times, so
/// that crashes land on watermark and tail updates and on wrap markers; on the
/// default model and on the file medium's page cache (where home writes are synced
/// lazily, at log recycling).
#[test]
fn mvcc_crashes_during_log_recycling_and_wrap() {
    for domain in [PersistenceDomain::Adr, PersistenceDomain::PageCache] {
        for threads in [1, 2] {
            let (states, violations) = recycling_campaign(domain, threads);
            assert_eq!(
                violations,
                Vec::<String>::new(),
                "{domain:?}, {threads} threads"
            );
            assert!(states >= 400, "only {states} states");
        }
    }
}

/// States checked and violations of a random campaign of 600 bank operations per
/// thread (the logs recycle several times) on `domain`.
fn recycling_campaign(domain: PersistenceDomain, threads: usize) -> (u64, Vec<String>) {
    use pisces_verify::crashtest::{self, Mode, Settings};
    let settings = Settings {
        engine: pisces::EngineId::Mvcc,
        options: vec![pisces::EngineOptions::default()],
        threads,
        ops: 600,
        mode: Mode::Random { states: 400 },
        seed: 11,
        domain,
        ..Settings::default()
    };
    let w = crashtest::workload_by_name("bank").unwrap();
    let r = crashtest::run_campaign(w.as_ref(), &settings, &|_, _| {});
    let v = r.violations.iter().map(|v| v.to_string()).collect();
    (r.states, v)
}

/// Mutation evidence: without the lazy home sync's flush and fence (each of the
/// engine's mutation points, `EngineId::Mvcc.mutations()`), the page-cache campaign
/// loses home writes whose records the log dropped.
/// `cargo test -p pisces-verify --release --features mutation --test engine_mvcc
/// mutations -- --nocapture`.
#[cfg(feature = "mutation")]
#[test]
fn mutations_each_removed_step_is_detected() {
    let sc = pisces::mutation::Scenario::setup();
    for &p in EngineId::Mvcc.mutations() {
        assert_eq!(
            p.name, "home-sync-skipped",
            "a point without a detector here"
        );
        // SAFETY: a mutation test: the run exists to show the removed step matters, and
        // its outcome is read only as that evidence.
        unsafe { sc.set(Some(p)) };
        let (_, v) = recycling_campaign(PersistenceDomain::PageCache, 1);
        sc.clear();
        eprintln!("{}: {} violations", p.name, v.len());
        assert!(!v.is_empty(), "{} went unnoticed", p.name);
    }
}
