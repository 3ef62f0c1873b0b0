//! The SP3 engine through the public API: behaviour (counters, bank transfers with
//! concurrent auditors, write skew, reopen, invalid pointers), crash consistency on the
//! crash simulator (every crash-test workload), recovery's drop rule, and — with the
//! `mutation` feature — each protocol step's guard failing when the step is removed
//! (the engine's mutation points, `EngineId::Sp3.mutations()`).
//!
//! Run: `cargo test -p pisces-verify --release --test engine_sp3` (add `--features
//! mutation` for the mutation tests and the tests that slow a commit down between its
//! visibility and its persistence with the engine's `before-persist` hook point; each
//! runs in a `pisces::mutation::Scenario`, which keeps the other tests' pools apart).
//! The engine's white-box tests are in `crates/pisces/src/engine/sp3/tests.rs`.
//!
//! # Evidence that the guards guard (besides the mutation points)
//! Bugs injected by hand into the source, run, reverted:
//! * commit publishes without bumping the version (`unlock(prior, false)`):
//!   `bank_auditors_never_see_a_broken_invariant`, `write_skew_is_prevented` and
//!   `list_append_histories_are_serializable` fail (`counters_lose_no_update` does not:
//!   its writes copy the newest version under the encounter-time lock);
//! * recovery treats a missing predecessor as satisfied:
//!   `recovery_drops_the_dependents_of_a_lost_record` fails (the crash campaigns do
//!   not: a durable dependent of a lost record needs a precise interleaving);
//! * the checkpoint's fence between the home writes and the `retired` words removed:
//!   `crash_during_checkpoints` finds violations (bank, 2 of 60 states).

use pisces::tools::dram::DramMedium;
use pisces::{Config, EngineId, EngineOptions, Error, PPtr, Pool, ThreadHandle, TxOptions};
use pisces_verify::sim::{Adversary, SimConfig, SimMedium};

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};

fn options() -> Vec<EngineOptions> {
    EngineId::Sp3.option_sets()
}

fn cfg(threads: usize, opts: EngineOptions) -> Config {
    Config::default()
        .size(8 << 20)
        .engine(EngineId::Sp3)
        .max_threads(threads)
        .log_bytes_per_thread(64 << 10)
        .engine_options(opts)
}

fn mem_pool(threads: usize, opts: EngineOptions) -> Pool {
    let m = DramMedium::anonymous(8 << 20, 0, 0).unwrap();
    Pool::create_on(Arc::new(m), cfg(threads, opts)).unwrap()
}

/// Two threads increment one shared counter and their own; nothing is lost.
#[test]
fn counters_lose_no_update() {
    for opts in options() {
        let pool = mem_pool(2, opts.clone());
        let root: PPtr<[PPtr<u64>; 3]> = pool.root().unwrap();
        let c = pool
            .run(|tx| {
                let c = [tx.alloc(0u64)?, tx.alloc(0u64)?, tx.alloc(0u64)?];
                *tx.write(root)? = c;
                Ok(c)
            })
            .unwrap();
        let n = 3000;
        std::thread::scope(|s| {
            for t in 0..2 {
                let pool = &pool;
                s.spawn(move || {
                    let mut h = pool.handle().unwrap();
                    for _ in 0..n {
                        h.run(|tx| {
                            *tx.write(c[0])? += 1;
                            *tx.write(c[1 + t])? += 1;
                            Ok(())
                        })
                        .unwrap();
                    }
                });
            }
        });
        let v = pool
            .run(|tx| Ok([*tx.read(c[0])?, *tx.read(c[1])?, *tx.read(c[2])?]))
            .unwrap();
        assert_eq!(v, [2 * n, n, n], "{opts}");
    }
}

const ACCOUNTS: usize = 8;
const START: u64 = 1000;

fn bank(pool: &Pool) -> PPtr<[PPtr<u64>; ACCOUNTS]> {
    let root: PPtr<[PPtr<u64>; ACCOUNTS]> = pool.root().unwrap();
    pool.run(|tx| {
        let mut a = [PPtr::null(); ACCOUNTS];
        for x in a.iter_mut() {
            *x = tx.alloc(START)?;
        }
        *tx.write(root)? = a;
        Ok(())
    })
    .unwrap();
    root
}

/// Bank transfers on one thread, auditors on another: every audit (inside the
/// transaction and after its commit) sees the total; the final total holds too.
/// Returns (audits whose committed sum was wrong, in-transaction views that were wrong).
fn bank_with_auditor(opts: EngineOptions, transfers: usize) -> (u64, u64) {
    let pool = mem_pool(2, opts);
    let root = bank(&pool);
    let done = AtomicBool::new(false);
    let (bad_commits, bad_views) = (AtomicU64::new(0), AtomicU64::new(0));
    std::thread::scope(|s| {
        s.spawn(|| {
            let mut h = pool.handle().unwrap();
            let mut x = 12345u64;
            for _ in 0..transfers {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let (i, j) = (
                    (x % ACCOUNTS as u64) as usize,
                    ((x >> 8) % ACCOUNTS as u64) as usize,
                );
                if i == j {
                    continue;
                }
                h.run(|tx| {
                    let a = *tx.read(root)?;
                    let amount = (x >> 16) % 50;
                    let from = *tx.read(a[i])?;
                    if from >= amount {
                        *tx.write(a[i])? = from - amount;
                        *tx.write(a[j])? += amount;
                    }
                    Ok(())
                })
                .unwrap();
            }
            done.store(true, Ordering::Release);
        });
        s.spawn(|| {
            let mut h = pool.handle().unwrap();
            while !done.load(Ordering::Acquire) {
                let sum = h
                    .run_with(TxOptions::read_only(), |tx| {
                        let a = *tx.read(root)?;
                        let mut sum = 0;
                        for p in a {
                            sum += *tx.read(p)?;
                        }
                        if sum != START * ACCOUNTS as u64 {
                            bad_views.fetch_add(1, Ordering::Relaxed);
                        }
                        Ok(sum)
                    })
                    .unwrap();
                if sum != START * ACCOUNTS as u64 {
                    bad_commits.fetch_add(1, Ordering::Relaxed);
                }
            }
        });
    });
    let total = pool
        .run(|tx| {
            let a = *tx.read(root)?;
            let mut sum = 0;
            for p in a {
                sum += *tx.read(p)?;
            }
            Ok(sum)
        })
        .unwrap();
    let lost = u64::from(total != START * ACCOUNTS as u64);
    (bad_commits.into_inner() + lost, bad_views.into_inner())
}

#[test]
fn bank_auditors_never_see_a_broken_invariant() {
    for opts in options() {
        assert_eq!(bank_with_auditor(opts.clone(), 20_000), (0, 0), "{opts}");
    }
}

/// Write skew (Hermitage G2-item): both transactions read x and y (on call: x + y = 2),
/// each takes its own one off duty if the other is on. Serializable: at most one of
/// them commits its write (the other's validation fails, and its retry sees the first
/// one's write). Returns x + y at the end.
fn write_skew(opts: EngineOptions) -> u64 {
    let pool = mem_pool(2, opts);
    let root: PPtr<[PPtr<u64>; 2]> = pool.root().unwrap();
    let xy = pool
        .run(|tx| {
            let xy = [tx.alloc(1u64)?, tx.alloc(1u64)?];
            *tx.write(root)? = xy;
            Ok(xy)
        })
        .unwrap();
    let both_read = Barrier::new(2);
    let first_done = AtomicBool::new(false);
    std::thread::scope(|s| {
        for me in 0..2usize {
            let (pool, both_read, first_done) = (&pool, &both_read, &first_done);
            s.spawn(move || {
                let mut h = pool.handle().unwrap();
                let mut attempt = 0;
                h.run(|tx| {
                    attempt += 1;
                    let on = *tx.read(xy[0])? + *tx.read(xy[1])?;
                    if attempt == 1 {
                        both_read.wait();
                        if me == 1 {
                            // Commit after the other transaction committed.
                            while !first_done.load(Ordering::Acquire) {
                                std::thread::yield_now();
                            }
                        }
                    }
                    if on >= 2 {
                        *tx.write(xy[me])? = 0;
                    }
                    Ok(())
                })
                .unwrap();
                if me == 0 {
                    first_done.store(true, Ordering::Release);
                }
            });
        }
    });
    pool.run(|tx| Ok(*tx.read(xy[0])? + *tx.read(xy[1])?))
        .unwrap()
}

#[test]
fn write_skew_is_prevented() {
    for opts in options() {
        assert_eq!(write_skew(opts.clone()), 1, "{opts}");
    }
}

#[test]
fn serializable_is_offered_and_linearizable_refused() {
    let pool = mem_pool(1, EngineOptions::new());
    let ok = pool.run_with(
        TxOptions::default().isolation(pisces::Isolation::Serializable),
        |_| Ok(()),
    );
    assert!(ok.is_ok());
    let no = pool.run_with(
        TxOptions::default().isolation(pisces::Isolation::Linearizable),
        |_| Ok(()),
    );
    assert!(matches!(no, Err(Error::IsolationUnsupported(_))), "{no:?}");
}

#[test]
fn reopen_keeps_data_and_frees() {
    for opts in options() {
        let dir = tempfile::tempdir_in("/dev/shm").unwrap();
        let path = dir.path().join("p");
        let c = cfg(2, opts.clone());
        let (keep, gone) = {
            let pool = Pool::create(&path, c.clone()).unwrap();
            let root: PPtr<[PPtr<u64>; 2]> = pool.root().unwrap();
            let kg = pool
                .run(|tx| {
                    let kg = [tx.alloc(7u64)?, tx.alloc(8u64)?];
                    *tx.write(root)? = kg;
                    Ok(kg)
                })
                .unwrap();
            for i in 0..500 {
                pool.run(|tx| {
                    *tx.write(kg[0])? = 1000 + i;
                    Ok(())
                })
                .unwrap();
            }
            pool.run(|tx| {
                tx.free(kg[1])?;
                tx.write(root)?[1] = PPtr::null();
                Ok(())
            })
            .unwrap();
            (kg[0], kg[1])
        };
        let pool = Pool::open(&path, c.engine(None)).unwrap();
        assert_eq!(pool.engine_id(), EngineId::Sp3);
        let root: PPtr<[PPtr<u64>; 2]> = pool.root().unwrap();
        let (v, r) = pool
            .run(|tx| Ok((*tx.read(keep)?, *tx.read(root)?)))
            .unwrap();
        assert_eq!((v, r), (1499, [keep, PPtr::null()]), "{opts}");
        // The freed block is free in the reopened pool: the allocator hands it out.
        let again = pool.run(|tx| tx.alloc(1u64)).unwrap();
        let _ = gone;
        assert!(pool.run(|tx| Ok(*tx.read(again)?)).unwrap() == 1);
    }
}

#[test]
fn invalid_pointers_are_errors() {
    let pool = mem_pool(1, EngineOptions::new());
    let bad = PPtr::<u64>::from_offset(12345);
    let r = pool.run(|tx| Ok(*tx.read(bad)?));
    assert!(matches!(r, Err(Error::InvalidPointer(_))), "{r:?}");
    let r = pool.run(|tx| {
        *tx.write(bad)? = 1;
        Ok(())
    });
    assert!(matches!(r, Err(Error::InvalidPointer(_))), "{r:?}");
    let p = pool.run(|tx| tx.alloc(5u64)).unwrap();
    let r = pool.run(|tx| {
        tx.free(p)?;
        tx.free(p)
    });
    assert!(matches!(r, Err(Error::InvalidPointer(_))), "{r:?}");
    // Too large for its object.
    let r = pool.run(|tx| Ok(tx.read_bytes(p.cast(), 4096)?.len()));
    assert!(matches!(r, Err(Error::InvalidPointer(_))), "{r:?}");
    // The pool still works, and `p` survived the failed transactions.
    assert_eq!(pool.run(|tx| Ok(*tx.read(p)?)).unwrap(), 5);
}

#[test]
fn unknown_options_are_refused() {
    let m = DramMedium::anonymous(8 << 20, 0, 0).unwrap();
    let r = Pool::create_on(
        Arc::new(m),
        cfg(1, EngineOptions::new().set("group_commit", 4)),
    );
    assert!(matches!(r, Err(Error::InvalidConfig(_))));
}

#[test]
fn a_record_too_large_for_the_log_is_an_error() {
    let pool = mem_pool(1, EngineOptions::new());
    let r = pool.run(|tx| {
        let p = tx.alloc_bytes(48 << 10)?;
        tx.write_bytes(p, 48 << 10)?[0] = 1;
        Ok(())
    });
    assert!(matches!(r, Err(Error::TooLargeForLog(_))), "{r:?}");
    pool.run(|tx| tx.alloc(1u64).map(|_| ())).unwrap();
}

/// Many transactions, long logs: the checkpoint must truncate them (the 64 KiB logs
/// would fill after a few hundred records), with allocation churn.
#[test]
fn logs_are_truncated_and_blocks_reused() {
    for opts in options() {
        let pool = mem_pool(2, opts.clone());
        let root: PPtr<[PPtr<[u64; 16]>; 2]> = pool.root().unwrap();
        std::thread::scope(|s| {
            for t in 0..2usize {
                let pool = &pool;
                s.spawn(move || {
                    let mut h = pool.handle().unwrap();
                    for i in 0..5000u64 {
                        h.run(|tx| {
                            let old = tx.read(root)?[t];
                            let new = tx.alloc([i; 16])?;
                            tx.write(root)?[t] = new;
                            if !old.is_null() {
                                tx.free(old)?;
                            }
                            Ok(())
                        })
                        .unwrap();
                    }
                });
            }
        });
        let v = pool
            .run(|tx| {
                let r = *tx.read(root)?;
                Ok([tx.read(r[0])?[15], tx.read(r[1])?[3]])
            })
            .unwrap();
        assert_eq!(v, [4999, 4999], "{opts}");
    }
}

// ---------------------------------------------------------------------------------
// Crash consistency: the library's crash campaigns on every workload.

use pisces_verify::crashtest::{self, run_campaign, workload_by_name, Mode, Settings};

fn campaign(
    workload: &str,
    threads: usize,
    ops: usize,
    mode: Mode,
    opts: Vec<EngineOptions>,
) -> crashtest::Report {
    campaign_with(workload, threads, ops, mode, opts, Adversary::default(), 1)
}

fn campaign_with(
    workload: &str,
    threads: usize,
    ops: usize,
    mode: Mode,
    opts: Vec<EngineOptions>,
    adversary: Adversary,
    seed: u64,
) -> crashtest::Report {
    let w = workload_by_name(workload).unwrap();
    let s = Settings {
        adversary,
        seed,
        engine: EngineId::Sp3,
        options: opts,
        threads,
        ops,
        mode,
        images: 2,
        recovery_crash_one_in: 4,
        jobs: 2,
        ..Settings::default()
    };
    run_campaign(w.as_ref(), &s, &|_, _| {})
}

fn assert_clean(r: &crashtest::Report, min_states: u64) {
    eprintln!(
        "{}: {} states, {} recovery crashes, {} violations",
        r.workload, r.states, r.recovery_crashes, r.violation_count
    );
    assert_eq!(r.violation_count, 0, "{:#?}", r.violations);
    assert!(
        r.states >= min_states,
        "{}: only {} states",
        r.workload,
        r.states
    );
}

fn all_workloads() -> Vec<&'static str> {
    crashtest::WORKLOADS
        .iter()
        .chain(&crashtest::EXTRA_WORKLOADS)
        .copied()
        .collect()
}

/// Every fence of a one-thread run of every workload, both option sets.
#[test]
fn crash_every_fence_of_every_workload() {
    for w in all_workloads() {
        let r = campaign(w, 1, 8, Mode::Exhaustive, Vec::new());
        assert_clean(&r, 16);
    }
}

/// Random fences of two-thread runs of every workload (dependencies across threads).
#[test]
fn crash_random_fences_two_threads() {
    for w in all_workloads() {
        let r = campaign(w, 2, 16, Mode::Random { states: 40 }, Vec::new());
        assert_clean(&r, 40);
    }
}

/// Eviction at its worst: every written word reached the medium, or none did.
#[test]
fn crash_with_extreme_adversaries() {
    for adv in [Adversary::AllWritten, Adversary::DurableOnly] {
        for w in ["bank", "list", "alloc"] {
            let r = campaign_with(w, 1, 12, Mode::Exhaustive, Vec::new(), adv, 3);
            assert_clean(&r, 24);
            let r = campaign_with(w, 2, 40, Mode::Random { states: 40 }, Vec::new(), adv, 3);
            assert_clean(&r, 40);
        }
    }
}

/// Longer runs: logs fill, so checkpoints (write-back, retired words, log truncation,
/// wrap markers) happen during the run and crashes land in them.
#[test]
fn crash_during_checkpoints() {
    for w in ["bank", "list", "hashmap"] {
        let r = campaign(w, 1, 150, Mode::Random { states: 60 }, Vec::new());
        assert_clean(&r, 60);
        let r = campaign(w, 2, 100, Mode::Random { states: 60 }, Vec::new());
        assert_clean(&r, 60);
    }
}

// ---------------------------------------------------------------------------------
// The drop rule and the durability wait, on the crash simulator.

fn sim_pool(opts: EngineOptions, log_bytes: usize) -> (Arc<SimMedium>, Pool, Config) {
    let c = cfg(2, opts).log_bytes_per_thread(log_bytes);
    let sim = Arc::new(SimMedium::new(8 << 20, SimConfig::default()).unwrap());
    let pool = Pool::create_on(sim.clone(), c.clone()).unwrap();
    (sim, pool, c)
}

fn reboot(image: Vec<u8>, c: &Config) -> Pool {
    let m = SimMedium::from_image(image, SimConfig::default()).unwrap();
    Pool::open_on(Arc::new(m), c.clone()).unwrap()
}

const MAGIC: u64 = 0x5EED_F00D_0000_0001;

/// A predecessor's record is lost: slot 0's T1 writes x = MAGIC; slot 1 runs T0 (z = 5),
/// then T2 (y = x + 1, depends on T1), then T3 (z = 6, after T2 in its slot). The crash
/// image is taken with every record durable, then T1's record is damaged (its MAGIC
/// word flipped: the checksum fails), as if it had not persisted. Recovery must drop T2
/// and T3 and keep T0. Returns (x, y, z) after recovery, with and without the damage.
fn lost_predecessor(opts: EngineOptions) -> [(u64, u64, u64); 2] {
    let lp = lost_predecessor_images(opts);
    let mut out = [(0, 0, 0); 2];
    for (k, img) in [lp.whole.clone(), lp.damaged.clone()]
        .into_iter()
        .enumerate()
    {
        out[k] = lp.values(&reboot(img, &lp.cfg));
    }
    out
}

/// The crash images of [`lost_predecessor`]: whole, and with T1's record damaged.
struct LostPredecessor {
    whole: Vec<u8>,
    damaged: Vec<u8>,
    cfg: Config,
    xyz: [PPtr<u64>; 3],
}

impl LostPredecessor {
    fn values(&self, p: &Pool) -> (u64, u64, u64) {
        let [x, y, z] = self.xyz;
        p.run(|tx| Ok((*tx.read(x)?, *tx.read(y)?, *tx.read(z)?)))
            .unwrap()
    }
}

fn lost_predecessor_images(opts: EngineOptions) -> LostPredecessor {
    let (sim, pool, c) = sim_pool(opts, 64 << 10);
    let root: PPtr<[PPtr<u64>; 3]> = pool.root().unwrap();
    let mut h0 = pool.handle().unwrap();
    let mut h1 = pool.handle().unwrap();
    let [x, y, z] = h0
        .run(|tx| {
            let xyz = [tx.alloc(0u64)?, tx.alloc(0u64)?, tx.alloc(0u64)?];
            *tx.write(root)? = xyz;
            Ok(xyz)
        })
        .unwrap();
    h1.run(|tx| {
        *tx.write(z)? = 5;
        Ok(())
    })
    .unwrap();
    h0.run(|tx| {
        *tx.write(x)? = MAGIC;
        Ok(())
    })
    .unwrap();
    h1.run(|tx| {
        *tx.write(y)? = *tx.read(x)? + 1;
        Ok(())
    })
    .unwrap();
    h1.run(|tx| {
        *tx.write(z)? = 6;
        Ok(())
    })
    .unwrap();
    let whole = sim.crash_image_now_with(0, Adversary::DurableOnly).image;
    drop((h0, h1));
    let mut damaged = whole.clone();
    let mut hits = 0;
    for w in damaged.chunks_exact_mut(8) {
        if u64::from_le_bytes(w.try_into().unwrap()) == MAGIC {
            w[0] ^= 0xFF;
            hits += 1;
        }
    }
    assert_eq!(hits, 1, "T1's record holds the only copy of MAGIC");
    LostPredecessor {
        whole,
        damaged,
        cfg: c,
        xyz: [x, y, z],
    }
}

/// Recovery of the damaged image crashes at each of its fences (with several
/// adversaries), and is recovered again: the dropped transactions stay dropped, the
/// kept ones stay, and the pool keeps working.
#[test]
fn crashes_during_recovery_keep_the_drop_decision() {
    let crashed_at = crash_recovery_at_each_fence().unwrap_or_else(|e| panic!("{e}"));
    assert!(crashed_at >= 3, "recovery has only {crashed_at} fences");
}

/// The body of [`crashes_during_recovery_keep_the_drop_decision`]: the number of
/// recovery fences crashed at, or the first wrong outcome.
fn crash_recovery_at_each_fence() -> Result<usize, String> {
    let lp = lost_predecessor_images(EngineOptions::new());
    let mut crashed_at = 0;
    for fence in 0.. {
        let sim = Arc::new(
            SimMedium::from_image(lp.damaged.clone(), SimConfig::crash_at_fence(fence)).unwrap(),
        );
        let first = Pool::open_on(sim.clone(), lp.cfg.clone());
        if sim.crash_info().is_none() {
            let got = lp.values(&first.unwrap());
            if got != (0, 0, 5) {
                return Err(format!("recovery without a crash: {got:?}"));
            }
            break;
        }
        drop(first);
        crashed_at += 1;
        for (seed, adv) in [
            (1, Adversary::default()),
            (2, Adversary::AllWritten),
            (3, Adversary::DurableOnly),
        ] {
            let image = sim.crash_image_with(seed, adv).unwrap().image;
            // A pool refused after a crash is a wrong outcome too (e.g. a root slot
            // whose replayed value was lost).
            let m = SimMedium::from_image(image, SimConfig::default()).unwrap();
            let p = Pool::open_on(Arc::new(m), lp.cfg.clone()).map_err(|e| {
                format!("crash at recovery fence {fence}, {adv:?}: reopening failed: {e}")
            })?;
            let got = lp.values(&p);
            if got != (0, 0, 5) {
                return Err(format!(
                    "crash at recovery fence {fence}, {adv:?}: recovered {got:?}, want (0, 0, 5)"
                ));
            }
            let [x, _, z] = lp.xyz;
            p.run(|tx| {
                *tx.write(z)? += *tx.read(x)? + 1;
                Ok(())
            })
            .unwrap();
            assert_eq!(lp.values(&p), (0, 0, 6));
        }
    }
    Ok(crashed_at)
}

/// Mutation evidence for replay's flush (each written line flushed once, after the
/// whole replay, before its fence): without it the replayed writes are not durable
/// when recovery retires their records, and a crash after that loses them (T0's
/// z = 5 above).
#[cfg(feature = "mutation")]
#[test]
fn recovery_without_the_replay_flush_is_caught() {
    let sc = mutated("replay-flush");
    let r = crash_recovery_at_each_fence();
    drop(sc);
    let e = r.expect_err("recovery without the replay flush went unnoticed");
    eprintln!("replay-flush: {e}");
}

#[test]
fn recovery_drops_the_dependents_of_a_lost_record() {
    for opts in options() {
        let [whole, damaged] = lost_predecessor(opts.clone());
        assert_eq!(whole, (MAGIC, MAGIC + 1, 6), "{opts}");
        assert_eq!(
            damaged,
            (0, 0, 5),
            "{opts}: T2 and T3 must be dropped, T0 kept"
        );
    }
}

/// Slot 0 sleeps 300 ms between its commit's visibility and its persistence (the
/// engine's `before-persist` hook point) while scenario `sc` lives.
#[cfg(feature = "mutation")]
fn slow_persist_of_slot0(sc: &pisces::mutation::Scenario) {
    let p = EngineId::Sp3
        .hook("before-persist")
        .expect("a hook point of the engine");
    sc.sleep(p, 0, std::time::Duration::from_millis(300));
}

#[cfg(feature = "mutation")] // the `before-persist` hook point
/// Slot 0 commits T1 (x = 1) and sleeps 300 ms between visibility and persistence.
/// Slot 1 sees x = 1 (early visibility), then runs T2: y = x + 1, and as soon as T2's
/// `run` returns, the power fails (an image of what is durable now). T2 returned, so it
/// must survive: `run` must have waited for T1 to persist. Returns (x, y) recovered.
fn acknowledged_dependent_survives(
    sc: &pisces::mutation::Scenario,
    opts: EngineOptions,
) -> (u64, u64) {
    slow_persist_of_slot0(sc);
    let (sim, pool, c) = sim_pool(opts, 64 << 10);
    let root: PPtr<[PPtr<u64>; 2]> = pool.root().unwrap();
    let mut h0 = pool.handle().unwrap();
    let mut h1 = pool.handle().unwrap();
    assert_eq!((h0.slot(), h1.slot()), (0, 1));
    let [x, y] = h1
        .run(|tx| {
            let xy = [tx.alloc(0u64)?, tx.alloc(0u64)?];
            *tx.write(root)? = xy;
            Ok(xy)
        })
        .unwrap();
    let image = std::thread::scope(|s| {
        s.spawn(move || {
            h0.run(|tx| {
                *tx.write(x)? = 1;
                Ok(())
            })
            .unwrap();
        });
        let deferred = TxOptions::read_only().durability(pisces::Durability::Deferred);
        while h1.run_with(deferred, |tx| Ok(*tx.read(x)?)).unwrap() != 1 {
            std::thread::yield_now();
        }
        h1.run(|tx| {
            *tx.write(y)? = *tx.read(x)? + 1;
            Ok(())
        })
        .unwrap();
        sim.crash_image_now_with(0, Adversary::DurableOnly).image
    });
    drop(h1);
    let p = reboot(image, &c);
    p.run(|tx| Ok((*tx.read(x)?, *tx.read(y)?))).unwrap()
}

#[cfg(feature = "mutation")] // the `before-persist` hook point
#[test]
fn run_returns_only_after_predecessors_persist() {
    let sc = pisces::mutation::Scenario::setup();
    let opts = EngineOptions::new().set("early_visibility", true);

    assert_eq!(acknowledged_dependent_survives(&sc, opts), (1, 2));
}

#[cfg(feature = "mutation")] // the `before-persist` hook point
/// A chain over three slots: T1 (slot 0, x = 1) sleeps between visibility and
/// persistence; T2 (slot 1, y = x + 1) commits with durability deferred (its own record
/// is durable, its predecessor T1 is not); T3 (slot 2, z = y + 1) depends on T2 only.
/// When T3's `run` returns the power fails: T3 must survive, so its wait must cover
/// T1 too (a predecessor is persistent only with its own predecessors). Returns x, y, z.
fn transitive_chain(sc: &pisces::mutation::Scenario, opts: EngineOptions) -> (u64, u64, u64) {
    slow_persist_of_slot0(sc);
    let c = cfg(3, opts).log_bytes_per_thread(64 << 10);
    let sim = Arc::new(SimMedium::new(8 << 20, SimConfig::default()).unwrap());
    let pool = Pool::create_on(sim.clone(), c.clone()).unwrap();
    let root: PPtr<[PPtr<u64>; 3]> = pool.root().unwrap();
    let mut h0 = pool.handle().unwrap();
    let mut h1 = pool.handle().unwrap();
    let mut h2 = pool.handle().unwrap();
    assert_eq!((h0.slot(), h1.slot(), h2.slot()), (0, 1, 2));
    let [x, y, z] = h2
        .run(|tx| {
            let xyz = [tx.alloc(0u64)?, tx.alloc(0u64)?, tx.alloc(0u64)?];
            *tx.write(root)? = xyz;
            Ok(xyz)
        })
        .unwrap();
    let image = std::thread::scope(|s| {
        s.spawn(move || {
            h0.run(|tx| {
                *tx.write(x)? = 1;
                Ok(())
            })
            .unwrap();
        });
        let deferred = TxOptions::read_only().durability(pisces::Durability::Deferred);
        while h1.run_with(deferred, |tx| Ok(*tx.read(x)?)).unwrap() != 1 {
            std::thread::yield_now();
        }
        h1.run_with(
            TxOptions::default().durability(pisces::Durability::Deferred),
            |tx| {
                *tx.write(y)? = *tx.read(x)? + 1;
                Ok(())
            },
        )
        .unwrap();
        h2.run(|tx| {
            *tx.write(z)? = *tx.read(y)? + 1;
            Ok(())
        })
        .unwrap();
        sim.crash_image_now_with(0, Adversary::DurableOnly).image
    });
    drop((h1, h2));
    let p = reboot(image, &c);
    p.run(|tx| Ok((*tx.read(x)?, *tx.read(y)?, *tx.read(z)?)))
        .unwrap()
}

#[cfg(feature = "mutation")]
#[test]
fn run_waits_for_transitive_predecessors() {
    let sc = pisces::mutation::Scenario::setup();
    for opts in options() {
        assert_eq!(transitive_chain(&sc, opts.clone()), (1, 2, 3), "{opts}");
    }
}

#[cfg(feature = "mutation")] // the `before-persist` hook point
/// Slot 0's T1 (x = 1) is visible but sleeps before persisting; slot 1 runs T2
/// (y = x + 1) and then fills half its log with other transactions (durability
/// deferred), so its checkpoint runs while T1 is not persistent. Then the power fails.
/// Home may hold T2's write only if T1 is recoverable: the recovered state must have
/// y = 0 or y = x + 1. Returns (x, y).
fn home_waits_for_predecessors(sc: &pisces::mutation::Scenario, opts: EngineOptions) -> (u64, u64) {
    slow_persist_of_slot0(sc);
    let (sim, pool, c) = sim_pool(opts, 16 << 10);
    let root: PPtr<[PPtr<u64>; 3]> = pool.root().unwrap();
    let mut h0 = pool.handle().unwrap();
    let mut h1 = pool.handle().unwrap();
    let [x, y, w] = h1
        .run(|tx| {
            let xyw = [tx.alloc(0u64)?, tx.alloc(0u64)?, tx.alloc(0u64)?];
            *tx.write(root)? = xyw;
            Ok(xyw)
        })
        .unwrap();
    let image = std::thread::scope(|s| {
        s.spawn(move || {
            h0.run(|tx| {
                *tx.write(x)? = 1;
                Ok(())
            })
            .unwrap();
        });
        let deferred = TxOptions::default().durability(pisces::Durability::Deferred);
        while h1
            .run_with(
                TxOptions::read_only().durability(pisces::Durability::Deferred),
                |tx| Ok(*tx.read(x)?),
            )
            .unwrap()
            != 1
        {
            std::thread::yield_now();
        }
        h1.run_with(deferred, |tx| {
            *tx.write(y)? = *tx.read(x)? + 1;
            Ok(())
        })
        .unwrap();
        // ~64-byte records: 150 of them fill more than half of a 16 KiB ring, less
        // than all of it.
        for i in 0..150u64 {
            h1.run_with(deferred, |tx| {
                *tx.write(w)? = i;
                Ok(())
            })
            .unwrap();
        }
        sim.crash_image_now_with(0, Adversary::DurableOnly).image
    });
    drop(h1);
    let p = reboot(image, &c);
    p.run(|tx| Ok((*tx.read(x)?, *tx.read(y)?))).unwrap()
}

#[cfg(feature = "mutation")] // the `before-persist` hook point
#[test]
fn home_is_written_only_after_predecessors_persist() {
    let sc = pisces::mutation::Scenario::setup();
    for opts in options() {
        let (x, y) = home_waits_for_predecessors(&sc, opts.clone());
        assert!(y == 0 || y == x + 1, "{opts}: x = {x}, y = {y}");
    }
}

/// Parallel replay (recovery_threads = 2) recovers the same state as serial replay.
#[test]
fn parallel_replay_recovers_the_same_state() {
    let (sim, pool, c) = sim_pool(EngineOptions::new(), 256 << 10);
    let root: PPtr<[PPtr<[u64; 4]>; 16]> = pool.root().unwrap();
    let objs = pool
        .run(|tx| {
            let mut a = [PPtr::null(); 16];
            for (i, p) in a.iter_mut().enumerate() {
                *p = tx.alloc([i as u64; 4])?;
            }
            *tx.write(root)? = a;
            Ok(a)
        })
        .unwrap();
    std::thread::scope(|s| {
        for t in 0..2u64 {
            let pool = &pool;
            s.spawn(move || {
                let mut h = pool.handle().unwrap();
                for i in 0..300u64 {
                    h.run(|tx| {
                        let k = ((i * 7 + t * 3) % 16) as usize;
                        let j = ((i * 5 + 1) % 16) as usize;
                        let v = tx.read(objs[j])?[0];
                        let o = tx.write(objs[k])?;
                        o[0] = v + 1;
                        o[1 + t as usize] += 1;
                        Ok(())
                    })
                    .unwrap();
                }
            });
        }
    });
    let expect = pool
        .run(|tx| {
            let mut v = Vec::new();
            for p in objs {
                v.push(*tx.read(p)?);
            }
            Ok(v)
        })
        .unwrap();
    let image = sim.crash_image_now_with(0, Adversary::DurableOnly).image;
    drop(pool);
    for threads in [1, 2, 4] {
        let p = reboot(image.clone(), &c.clone().recovery_threads(threads));
        let got = p
            .run(|tx| {
                let mut v = Vec::new();
                for p in objs {
                    v.push(*tx.read(p)?);
                }
                Ok(v)
            })
            .unwrap();
        assert_eq!(got, expect, "recovery_threads = {threads}");
        let counts: u64 = got.iter().map(|o| o[1] + o[2]).sum();
        // 300 increments per thread on top of the initial values 2 × (0 + ... + 15).
        assert_eq!(counts, 600 + 240);
    }
}

/// Parallel replay partitions the pool by 4 KiB chunk: with objects of 8 KiB (each
/// spanning several chunks) written by two threads and every record still in the logs
/// (no checkpoint: 80 records of 8 KiB in logs of 1 MiB), recovery with 1, 2 and 3
/// threads restores every byte of every object.
#[test]
fn parallel_replay_restores_objects_spanning_chunks() {
    type Big = [u64; 1024];
    let (sim, pool, c) = sim_pool(EngineOptions::new(), 1 << 20);
    let root: PPtr<[PPtr<Big>; 8]> = pool.root().unwrap();
    let objs = pool
        .run(|tx| {
            let mut a = [PPtr::null(); 8];
            for (i, p) in a.iter_mut().enumerate() {
                *p = tx.alloc([i as u64; 1024])?;
            }
            *tx.write(root)? = a;
            Ok(a)
        })
        .unwrap();
    // The workers' handles are kept until the crash: a thread leaving checkpoints.
    let handles: Vec<ThreadHandle> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..2u64)
            .map(|t| {
                let pool = &pool;
                s.spawn(move || {
                    let mut h = pool.handle().unwrap();
                    for i in 0..40u64 {
                        h.run(|tx| {
                            let o = tx.write(objs[((i * 3 + t) % 8) as usize])?;
                            for j in [0, 1 + t as usize, 511, 512, 1023] {
                                o[j] = o[j] * 3 + i + 1;
                            }
                            Ok(())
                        })
                        .unwrap();
                    }
                    h
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).collect()
    });
    let read_all = move |tx: &mut pisces::Tx<'_>| {
        let mut v = Vec::new();
        for o in objs {
            v.push(*tx.read(o)?);
        }
        Ok(v)
    };
    let mut handles = handles;
    let expect = handles[0].run(read_all).unwrap();
    let image = sim.crash_image_now_with(0, Adversary::DurableOnly).image;
    drop(handles);
    drop(pool);
    for threads in [1, 2, 3] {
        let p = reboot(image.clone(), &c.clone().recovery_threads(threads));
        assert!(
            p.run(read_all).unwrap() == expect,
            "recovery_threads = {threads}"
        );
    }
}

// ---------------------------------------------------------------------------------
// Mutation evidence: each guard above fails when its protocol step is removed.
// (`cargo test -p pisces-verify --release --features mutation --test engine_sp3
// mutation`.)

/// A scenario with the engine's mutation point `name` active.
#[cfg(feature = "mutation")]
fn mutated(name: &str) -> pisces::mutation::Scenario {
    let sc = pisces::mutation::Scenario::setup();
    let p = EngineId::Sp3.mutation(name).expect("a point of the engine");
    // SAFETY: a mutation test: the run exists to show the removed step matters, and
    // its outcome is read only as that evidence (see `pisces::mutation::Scenario::set`).
    unsafe { sc.set(Some(p)) };
    sc
}

/// The engine's points whose evidence is not in [`mutation_each_sp3_step_is_needed`],
/// with where it is.
#[cfg(feature = "mutation")]
const ELSEWHERE: [(&str, &str); 4] = [
    (
        "no-commit-tick",
        "the engine's unit test `reads_without_the_commit_tick_mix_states`",
    ),
    (
        "replay-flush",
        "`recovery_without_the_replay_flush_is_caught` in this binary",
    ),
    (
        "replay-part-mask",
        "the engine's unit test `mutations_of_parallel_recovery_are_caught`",
    ),
    (
        "parse-slot-order",
        "the engine's unit test `mutations_of_parallel_recovery_are_caught`",
    ),
];

/// Each of the engine's mutation points (`EngineId::Sp3.mutations()`, iterated here)
/// breaks the test that guards its step, or is named in [`ELSEWHERE`].
#[cfg(feature = "mutation")]
#[test]
fn mutation_each_sp3_step_is_needed() {
    let d = EngineOptions::new;
    for p in EngineId::Sp3.mutations() {
        if ELSEWHERE.iter().any(|(n, _)| *n == p.name) {
            continue;
        }
        eprintln!("mutation {}", p.name);
        match p.name {
            "skip-validation" => {
                let _sc = mutated(p.name);
                assert_eq!(write_skew(d()), 0, "write skew went unnoticed");
                // Interleaving-dependent: a few tries.
                let broken = (0..5).any(|_| {
                    let (bad_commits, bad_views) = bank_with_auditor(d(), 50_000);
                    bad_commits + bad_views > 0
                });
                assert!(broken, "no broken audit without validation");
                let mut found = 0;
                for seed in 0..5 {
                    let (forbidden, _, _) = list_append(d(), true, seed, 400);
                    found += forbidden;
                    if found > 0 {
                        break;
                    }
                }
                assert!(found > 0, "the checker saw nothing without validation");
            }
            "no-dependencies" => {
                let _sc = mutated(p.name);
                let [_, damaged] = lost_predecessor(d());
                assert_eq!(
                    damaged.1,
                    MAGIC + 1,
                    "T2 survived its lost predecessor: {damaged:?}"
                );
            }
            "no-dependency-wait" => {
                let sc = mutated(p.name);
                let (x, y) = acknowledged_dependent_survives(&sc, d());
                assert_eq!((x, y), (0, 0), "the acknowledged T2 was lost with T1");
                assert_eq!(transitive_chain(&sc, d()), (0, 0, 0));
            }
            "home-before-predecessors" => {
                let sc = mutated(p.name);
                let (x, y) = home_waits_for_predecessors(&sc, d());
                assert!(y != 0 && y != x + 1, "x = {x}, y = {y}");
            }
            other => panic!("mutation point `{other}`: no evidence in this table"),
        }
    }
}

/// `pisces check` on a copy of a running pool's file: the live records are reported,
/// no problem is found, and the dry run of recovery succeeds.
#[test]
fn check_reports_live_records_of_a_running_pool() {
    let dir = tempfile::tempdir_in("/dev/shm").unwrap();
    let path = dir.path().join("p");
    let pool = Pool::create(&path, cfg(2, EngineOptions::new())).unwrap();
    let root: PPtr<[PPtr<u64>; 2]> = pool.root().unwrap();
    let mut h = pool.handle().unwrap();
    let p = h
        .run(|tx| {
            let p = tx.alloc(1u64)?;
            tx.write(root)?[0] = p;
            Ok(p)
        })
        .unwrap();
    for i in 0..10 {
        h.run(|tx| {
            *tx.write(p)? = i;
            Ok(())
        })
        .unwrap();
    }
    // (Not `pool.sync()`: it writes everything back.)
    h.wait_durable().unwrap();
    let copy = dir.path().join("copy");
    std::fs::copy(&path, &copy).unwrap();
    let r = pisces::tools::check::check_pool(&copy, pisces::MediumKind::DRAM).unwrap();
    assert!(r.is_ok(), "{:?}", r.problems);
    assert!(r.recovery_ok);
    let lines = r.engine_state.unwrap().lines.join("\n");
    assert!(lines.contains("live records   1"), "{lines}");
    assert!(lines.contains("replay 1"), "{lines}");
    drop(h);
    drop(pool);
    let copy2 = dir.path().join("copy2");
    std::fs::copy(&path, &copy2).unwrap();
    let r = pisces::tools::check::check_pool(&copy2, pisces::MediumKind::DRAM).unwrap();
    let lines = r.engine_state.unwrap().lines.join("\n");
    assert!(
        lines.contains("live records   0"),
        "closed cleanly: {lines}"
    );
    let reopened = Pool::open(&copy2, Config::default()).unwrap();
    assert_eq!(reopened.run(|tx| Ok(*tx.read(p)?)).unwrap(), 9);
}

// ---------------------------------------------------------------------------------
// Isolation, black-box: the Elle-style checker on list-append histories.

use pisces_verify::sicheck::workload::{Workload as ListAppend, WorkloadConfig};
use pisces_verify::sicheck::{check, Isolation as Level};

fn sicheck_pool(threads: usize, opts: EngineOptions) -> Pool {
    let size = 32 << 20;
    let m = DramMedium::anonymous(size, 0, 0).unwrap();
    Pool::create_on(
        Arc::new(m),
        cfg(threads + 1, opts)
            .size(size as u64)
            .max_threads(threads + 1)
            .log_bytes_per_thread(256 << 10),
    )
    .unwrap()
}

/// (forbidden under serializability, write skews, committed) of a list-append run.
fn list_append(
    opts: EngineOptions,
    write_skew: bool,
    seed: u64,
    txns: usize,
) -> (usize, usize, usize) {
    let wcfg = WorkloadConfig {
        threads: 2,
        keys: if write_skew { 2 } else { 3 },
        write_skew,
        pause: std::time::Duration::from_micros(50),
        seed,
        ..WorkloadConfig::default()
    };
    let pool = sicheck_pool(2, opts);
    let wl = ListAppend::new(wcfg).unwrap();
    wl.setup(&pool).unwrap();
    let h = wl.run(&pool, 0, txns, &|| false).unwrap();
    let r = check(&h);
    if r.forbidden(Level::Serializable) > 0 {
        eprintln!("{}", r.render(Level::Serializable));
    }
    (
        r.forbidden(Level::Serializable),
        r.write_skew(),
        h.count(pisces_verify::sicheck::Outcome::Committed),
    )
}

#[test]
fn list_append_histories_are_serializable() {
    for opts in options() {
        let (forbidden, _, committed) = list_append(opts.clone(), false, 7, 3000);
        assert_eq!((forbidden, committed), (0, 3000), "{opts}");
        for seed in 0..3 {
            let (forbidden, skews, _) = list_append(opts.clone(), true, seed, 400);
            assert_eq!((forbidden, skews), (0, 0), "{opts}, write-skew workload");
        }
    }
}

/// The checkpoint of records with a chain of cross-slot dependencies (each transaction
/// rewrites what the other slot wrote last), crashed at each of its fences with several
/// adversaries: every transaction was acknowledged, so the recovered state must be
/// exactly the final one (invariant R: a slot is never retired ahead of its
/// predecessors in the other slot).
#[test]
fn crashes_during_a_checkpoint_of_a_dependency_chain() {
    let c = cfg(2, EngineOptions::new()).log_bytes_per_thread(64 << 10);
    // The initial image: the pool with x, y allocated.
    let base = {
        let sim = Arc::new(SimMedium::new(8 << 20, SimConfig::default()).unwrap());
        let pool = Pool::create_on(sim.clone(), c.clone()).unwrap();
        let root: PPtr<[PPtr<u64>; 2]> = pool.root().unwrap();
        pool.run(|tx| {
            let xy = [tx.alloc(0u64)?, tx.alloc(0u64)?];
            *tx.write(root)? = xy;
            Ok(())
        })
        .unwrap();
        drop(pool);
        sim.crash_image_now_with(0, Adversary::DurableOnly).image
    };
    // The scenario, deterministic (one OS thread alternating two thread slots); then
    // `sync`, which runs the checkpoint. Returns the fences before the sync and x, y.
    let scenario = |sim: &Arc<SimMedium>| -> (u64, [PPtr<u64>; 2], (u64, u64)) {
        let pool = Pool::open_on(sim.clone(), c.clone()).unwrap();
        let root: PPtr<[PPtr<u64>; 2]> = pool.root().unwrap();
        let [x, y] = pool.run(|tx| Ok(*tx.read(root)?)).unwrap();
        let mut h = [pool.handle().unwrap(), pool.handle().unwrap()];
        for i in 0..12u64 {
            // Both slots write both objects, alternately: each transaction depends on
            // the other slot's previous one.
            h[(i % 2) as usize]
                .run(|tx| {
                    let v = *tx.read(x)?;
                    *tx.write(x)? = v * 3 + i + 1;
                    *tx.write(y)? = i;
                    Ok(())
                })
                .unwrap();
        }
        let before = sim.fence_count();
        drop(h);
        // (On a crashed machine the final msync reports the crash.)
        let synced = pool.sync();
        assert!(synced.is_ok() || sim.crash_info().is_some(), "{synced:?}");
        let v = pool.run(|tx| Ok((*tx.read(x)?, *tx.read(y)?))).unwrap();
        (before, [x, y], v)
    };
    let clean = Arc::new(SimMedium::from_image(base.clone(), SimConfig::default()).unwrap());
    let (start, [x, y], expect) = scenario(&clean);
    let end = clean.fence_count();
    assert!(
        end - start >= 6,
        "the checkpoint has only {} fences",
        end - start
    );
    for fence in start..end {
        let sim = Arc::new(
            SimMedium::from_image(base.clone(), SimConfig::crash_at_fence(fence)).unwrap(),
        );
        let _ = scenario(&sim);
        assert!(sim.crash_info().is_some());
        for (seed, adv) in [
            (1, Adversary::default()),
            (2, Adversary::default()),
            (3, Adversary::AllWritten),
            (4, Adversary::DurableOnly),
        ] {
            let image = sim.crash_image_with(seed, adv).unwrap().image;
            let p = reboot(image, &c);
            let got = p.run(|tx| Ok((*tx.read(x)?, *tx.read(y)?))).unwrap();
            assert_eq!(
                got, expect,
                "crash at fence {fence} (checkpoint from {start}), {adv:?}"
            );
        }
    }
}

/// Long version (minutes): `cargo test -p pisces-verify --release --test engine_sp3 --
/// --ignored long_crash_campaigns`.
#[test]
#[ignore]
fn long_crash_campaigns() {
    for w in all_workloads() {
        let r = campaign(w, 1, 40, Mode::Exhaustive, Vec::new());
        assert_clean(&r, 80);
        let r = campaign(w, 2, 60, Mode::Random { states: 300 }, Vec::new());
        assert_clean(&r, 300);
        for seed in 2..5 {
            let r = campaign_with(
                w,
                2,
                150,
                Mode::Random { states: 200 },
                Vec::new(),
                Adversary::default(),
                seed,
            );
            assert_clean(&r, 200);
        }
    }
}

/// Hermitage-style fixed interleavings. Read skew (G-single): the reader reads A, a
/// writer moves 50 from A to B and commits, the reader reads B: it must not see
/// A + B ≠ 200 (opacity: the read of B revalidates A, the attempt aborts and retries).
/// Lost update: two transactions read x, both write x + 1, one after the other: x = 2.
#[test]
fn read_skew_and_lost_update_are_prevented() {
    for opts in options() {
        let pool = mem_pool(2, opts.clone());
        let root: PPtr<[PPtr<u64>; 2]> = pool.root().unwrap();
        let [a, b] = pool
            .run(|tx| {
                let ab = [tx.alloc(100u64)?, tx.alloc(100u64)?];
                *tx.write(root)? = ab;
                Ok(ab)
            })
            .unwrap();
        let read_a = Barrier::new(2);
        let written = AtomicBool::new(false);
        let (seen, attempts) = std::thread::scope(|s| {
            let reader = s.spawn(|| {
                let mut h = pool.handle().unwrap();
                let mut attempts = 0;
                let seen = h
                    .run(|tx| {
                        attempts += 1;
                        let va = *tx.read(a)?;
                        if attempts == 1 {
                            read_a.wait();
                            while !written.load(Ordering::Acquire) {
                                std::thread::yield_now();
                            }
                        }
                        Ok(va + *tx.read(b)?)
                    })
                    .unwrap();
                (seen, attempts)
            });
            let mut h = pool.handle().unwrap();
            read_a.wait();
            h.run(|tx| {
                *tx.write(a)? -= 50;
                *tx.write(b)? += 50;
                Ok(())
            })
            .unwrap();
            written.store(true, Ordering::Release);
            reader.join().unwrap()
        });
        assert_eq!((seen, attempts), (200, 2), "{opts}: read skew");

        // Lost update.
        pool.run(|tx| {
            *tx.write(a)? = 0;
            Ok(())
        })
        .unwrap();
        let both_read = Barrier::new(2);
        let first_done = AtomicBool::new(false);
        std::thread::scope(|s| {
            for me in 0..2 {
                let (pool, both_read, first_done) = (&pool, &both_read, &first_done);
                s.spawn(move || {
                    let mut h = pool.handle().unwrap();
                    let mut attempt = 0;
                    h.run(|tx| {
                        attempt += 1;
                        let v = *tx.read(a)?;
                        if attempt == 1 {
                            both_read.wait();
                            if me == 1 {
                                while !first_done.load(Ordering::Acquire) {
                                    std::thread::yield_now();
                                }
                            }
                        }
                        *tx.write(a)? = v + 1;
                        Ok(())
                    })
                    .unwrap();
                    if me == 0 {
                        first_done.store(true, Ordering::Release);
                    }
                });
            }
        });
        assert_eq!(
            pool.run(|tx| Ok(*tx.read(a)?)).unwrap(),
            2,
            "{opts}: lost update"
        );
    }
}

/// Histories spanning a crash, judged by the black-box checker: run list-append
/// transactions on two threads, crash at a fence, recover an adversary's image, read
/// everything, run more, read again. Every acknowledged transaction (and everything one
/// read from) must be visible after recovery, an unacknowledged one may be lost only as
/// a whole, and the combined history must be serializable.
#[test]
fn list_append_histories_spanning_a_crash_are_serializable_and_durable() {
    const POOL: usize = 2 << 20;
    for opts in options() {
        let c = cfg(3, opts.clone())
            .size(POOL as u64)
            .log_bytes_per_thread(32 << 10);
        let workload = |seed| {
            ListAppend::new(WorkloadConfig {
                threads: 2,
                keys: 4,
                appends_per_key: 8,
                seed,
                ..WorkloadConfig::default()
            })
            .unwrap()
        };
        let base = |wl: &ListAppend| {
            let sim = Arc::new(SimMedium::new(POOL, SimConfig::default()).unwrap());
            let pool = Pool::create_on(sim.clone(), c.clone()).unwrap();
            wl.setup(&pool).unwrap();
            drop(pool);
            sim.crash_image_now_with(0, Adversary::DurableOnly).image
        };
        let txns = 120;
        let (start, end) = {
            let wl = workload(1);
            let sim = Arc::new(SimMedium::from_image(base(&wl), SimConfig::default()).unwrap());
            let pool = Pool::open_on(sim.clone(), c.clone()).unwrap();
            let s = sim.fence_count();
            wl.run(&pool, 0, txns, &|| false).unwrap();
            (s, sim.fence_count())
        };
        assert!(end > start + 20);
        // Two threads race, so a run may commit its transactions in fewer fences than
        // the measured one: a run that ends before its crash point is checked too and
        // then repeated with the crash at half the distance, until each of the five
        // crashed (a few halvings at most: the first fence after `start` always comes).
        let mut crashes = 0;
        for (i, first_frac) in [0.1, 0.3, 0.5, 0.7, 0.9].into_iter().enumerate() {
            let seed = i as u64 + 1;
            let mut frac: f64 = first_frac;
            let mut crashed = false;
            for _attempt in 0..8 {
                let fence = start + ((end - start) as f64 * frac) as u64;
                let wl = workload(seed);
                let sim = Arc::new(
                    SimMedium::from_image(
                        base(&wl),
                        SimConfig::crash_at_fence(fence).with_seed(seed),
                    )
                    .unwrap(),
                );
                let pool = Pool::open_on(sim.clone(), c.clone()).unwrap();
                let mut h = wl
                    .run(&pool, 0, txns, &|| sim.crash_info().is_some())
                    .unwrap();
                drop(pool);
                let image = match sim.crash_image(seed) {
                    Some(img) => {
                        crashed = true;
                        img
                    }
                    None => sim.crash_image_now(seed),
                };
                let pool = reboot(image, &c);
                h.extend(wl.read_all(&pool, 1).unwrap());
                h.extend(wl.run(&pool, 1, txns, &|| false).unwrap());
                h.extend(wl.read_all(&pool, 1).unwrap());
                let r = check(&h);
                assert_eq!(
                    r.forbidden(Level::Serializable),
                    0,
                    "{opts}, crash at fence {fence}:\n{}",
                    r.render(Level::Serializable)
                );
                if crashed {
                    break;
                }
                frac /= 2.0;
            }
            crashes += usize::from(crashed);
        }
        assert_eq!(crashes, 5, "only {crashes} of 5 runs crashed");
    }
}

/// Early visibility is what the option says: with slot 0 sleeping 300 ms between
/// visibility and persistence, another thread sees its write long before the sleep
/// ends when `early_visibility=true`, and only after it with `false` (the ablation
/// unlocks after persisting). Returns how long the reader waited.
#[cfg(feature = "mutation")] // the `before-persist` hook point
fn time_to_visibility(sc: &pisces::mutation::Scenario, early: bool) -> std::time::Duration {
    slow_persist_of_slot0(sc);
    let pool = mem_pool(3, EngineOptions::new().set("early_visibility", early));
    let root: PPtr<[PPtr<u64>; 1]> = pool.root().unwrap();
    let mut h0 = pool.handle().unwrap();
    let mut h1 = pool.handle().unwrap();
    assert_eq!(h0.slot(), 0);
    let x = h1
        .run(|tx| {
            let x = tx.alloc(0u64)?;
            *tx.write(root)? = [x];
            Ok(x)
        })
        .unwrap();
    let started = Barrier::new(2);
    let started = &started;
    std::thread::scope(|s| {
        s.spawn(move || {
            started.wait();
            h0.run(|tx| {
                *tx.write(x)? = 1;
                Ok(())
            })
            .unwrap();
        });
        started.wait();
        let t = std::time::Instant::now();
        let deferred = TxOptions::read_only().durability(pisces::Durability::Deferred);
        while h1.run_with(deferred, |tx| Ok(*tx.read(x)?)).unwrap() != 1 {
            std::thread::yield_now();
        }
        t.elapsed()
    })
}

#[cfg(feature = "mutation")]
#[test]
fn early_visibility_shows_versions_before_they_persist() {
    let sc = pisces::mutation::Scenario::setup();
    let early = time_to_visibility(&sc, true);
    let late = time_to_visibility(&sc, false);
    assert!(
        early < std::time::Duration::from_millis(150),
        "early: {early:?}"
    );
    assert!(
        late >= std::time::Duration::from_millis(290),
        "ablation: {late:?}"
    );
}

/// A rough throughput look (not a benchmark: the machine is shared), printed:
/// `cargo test -p pisces-verify --release --test engine_sp3 -- --ignored rough_throughput
/// --nocapture`.
#[test]
#[ignore]
fn rough_throughput() {
    for (engine, opts) in [
        (
            EngineId::Sp3,
            EngineOptions::new().set("early_visibility", true),
        ),
        (
            EngineId::Sp3,
            EngineOptions::new().set("early_visibility", false),
        ),
        (EngineId::Pisces, EngineOptions::new()),
        (EngineId::Mvcc, EngineOptions::new()),
    ] {
        for shared in [false, true] {
            let m = DramMedium::anonymous(32 << 20, 0, 0).unwrap();
            let pool = Pool::create_on(
                Arc::new(m),
                Config::default()
                    .size(32 << 20)
                    .engine(engine)
                    .max_threads(3)
                    .log_bytes_per_thread(1 << 20)
                    .engine_options(opts.clone()),
            )
            .unwrap();
            let root: PPtr<[PPtr<[u64; 8]>; 64]> = pool.root().unwrap();
            let objs = pool
                .run(|tx| {
                    let mut a = [PPtr::null(); 64];
                    for p in a.iter_mut() {
                        *p = tx.alloc([0u64; 8])?;
                    }
                    *tx.write(root)? = a;
                    Ok(a)
                })
                .unwrap();
            let n = 50_000u64;
            let t = std::time::Instant::now();
            std::thread::scope(|s| {
                for th in 0..2u64 {
                    let pool = &pool;
                    s.spawn(move || {
                        let mut h = pool.handle().unwrap();
                        let mut x = th + 1;
                        for _ in 0..n {
                            x = x
                                .wrapping_mul(6364136223846793005)
                                .wrapping_add(1442695040888963407);
                            let k = if shared {
                                (x >> 33) % 4
                            } else {
                                th * 32 + (x >> 33) % 32
                            };
                            let r = (x >> 40) % 64;
                            h.run(|tx| {
                                let v = tx.read(objs[r as usize])?[0];
                                tx.write(objs[k as usize])?[1] += v & 1;
                                Ok(())
                            })
                            .unwrap();
                        }
                    });
                }
            });
            let secs = t.elapsed().as_secs_f64();
            eprintln!(
                "{engine:>7} {opts:<22} {}: {:.0} ktx/s",
                if shared {
                    "4 hot objects "
                } else {
                    "disjoint writes"
                },
                2.0 * n as f64 / secs / 1000.0
            );
        }
    }
}

#[test]
fn long_transactions_commit_while_a_writer_runs_every_option() {
    for opts in options() {
        pisces_verify::testkit::long_transactions_commit_while_a_writer_runs(&mem_pool(3, opts));
    }
}

#[test]
fn a_holder_waiting_for_a_writer_holds_it_only_until_its_deadline_every_option() {
    for opts in options() {
        pisces_verify::testkit::a_holder_waiting_for_a_writer_holds_it_only_until_its_deadline(
            &mem_pool(3, opts),
        );
    }
}
