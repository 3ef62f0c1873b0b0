//! The SP3 engine through the public API: behaviour (counters, bank transfers with
//! concurrent auditors, write skew, reopen, invalid pointers), crash consistency on the
//! crash simulator (every crash-test workload), recovery's drop rule, and — with the
//! `mutation` feature — each protocol step's guard failing when the step is removed
//! (`inject_bug=...`, see `engine/sp3/mod.rs`).
//!
//! Run: `cargo test -p pisces --release --test sp3` (add `--features mutation` for the
//! injected-bug tests).

use pisces::medium::dram::DramMedium;
use pisces::medium::sim::{Adversary, SimConfig, SimMedium};
use pisces::{Config, Durability, EngineId, EngineOptions, Error, PPtr, Pool, TxOptions};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};

fn options() -> Vec<EngineOptions> {
    EngineId::Sp3.option_sets()
}

fn cfg(threads: usize, opts: EngineOptions) -> Config {
    Config {
        size: 8 << 20,
        engine: Some(EngineId::Sp3),
        max_threads: threads,
        log_bytes_per_thread: 64 << 10,
        engine_options: opts,
        ..Config::default()
    }
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
                let (i, j) = ((x % ACCOUNTS as u64) as usize, ((x >> 8) % ACCOUNTS as u64) as usize);
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
    pool.run(|tx| Ok(*tx.read(xy[0])? + *tx.read(xy[1])?)).unwrap()
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
    assert!(matches!(no, Err(Error::IsolationUnsupported { .. })), "{no:?}");
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
        let pool = Pool::open(&path, Config { engine: None, ..c }).unwrap();
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
    assert!(matches!(r, Err(Error::TooLargeForLog { .. })), "{r:?}");
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
