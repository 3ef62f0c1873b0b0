//! Transactions through `run` on every engine of the registry, each with every option
//! set (`common::all_engines`): allocation and free in a linked list, rollback of a
//! user abort, logs that recycle over long runs, concurrent increments, and audits
//! that see the exact total while transfers run.

mod common;

use pisces::{Error, PPtr, Pod, Zeroable};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Barrier;

#[derive(Clone, Copy, Pod, Zeroable, Debug, PartialEq)]
#[repr(C)]
struct Node {
    key: u64,
    next: PPtr<Node>,
}

#[test]
fn linked_list_alloc_and_free_under_every_option() {
    for (engine, opts) in common::all_engines() {
        let pool = common::mem_pool_on(engine, 16 << 20, 2, opts.clone());
        let head: PPtr<PPtr<Node>> = pool.root().unwrap();
        let mut h = pool.handle().unwrap();
        for k in 0..200u64 {
            h.run(|tx| {
                let old = *tx.read(head)?;
                let n = tx.alloc(Node { key: k, next: old })?;
                *tx.write(head)? = n;
                Ok(())
            })
            .unwrap();
        }
        // Remove every even key.
        h.run(|tx| {
            let mut prev: Option<PPtr<Node>> = None;
            let mut cur = *tx.read(head)?;
            while !cur.is_null() {
                let n = *tx.read(cur)?;
                if n.key % 2 == 0 {
                    match prev {
                        None => *tx.write(head)? = n.next,
                        Some(p) => tx.write(p)?.next = n.next,
                    }
                    tx.free(cur)?;
                } else {
                    prev = Some(cur);
                }
                cur = n.next;
            }
            Ok(())
        })
        .unwrap();
        let keys = h
            .run(|tx| {
                let mut v = Vec::new();
                let mut cur = *tx.read(head)?;
                while !cur.is_null() {
                    let n = tx.read(cur)?;
                    v.push(n.key);
                    cur = n.next;
                }
                Ok(v)
            })
            .unwrap();
        let expected: Vec<u64> = (0..200).rev().filter(|k| k % 2 == 1).collect();
        assert_eq!(keys, expected, "{opts:?}");
    }
}

/// A block freed by one commit and allocated again by a later transaction is that
/// transaction's object: it may write it and free it again before committing (an engine
/// that hands freed blocks out again inside its window must not take the earlier free
/// for a double free), and the next allocation still succeeds.
#[test]
fn a_block_freed_reused_and_freed_again_in_one_transaction() {
    for (engine, opts) in common::all_engines() {
        let pool = common::mem_pool_on(engine, 16 << 20, 1, opts.clone());
        let root: PPtr<PPtr<Node>> = pool.root().unwrap();
        let mut h = pool.handle().unwrap();
        let first = h
            .run(|tx| {
                let n = tx.alloc(Node {
                    key: 1,
                    next: PPtr::null(),
                })?;
                *tx.write(root)? = n;
                Ok(n)
            })
            .unwrap();
        h.run(|tx| {
            *tx.write(root)? = PPtr::null();
            tx.free(first)
        })
        .unwrap();
        for round in 0..64u64 {
            let r = h.run(|tx| {
                let n = tx.alloc(Node {
                    key: round,
                    next: PPtr::null(),
                })?;
                tx.write(n)?.key += 1;
                tx.free(n)?;
                let kept = tx.alloc(Node {
                    key: round,
                    next: PPtr::null(),
                })?;
                let old = *tx.read(root)?;
                tx.write(kept)?.next = old;
                *tx.write(root)? = kept;
                Ok(())
            });
            r.unwrap_or_else(|e| panic!("{} {opts:?} round {round}: {e}", engine.name()));
        }
        let n = h
            .run(|tx| {
                let mut n = 0;
                let mut cur = *tx.read(root)?;
                while !cur.is_null() {
                    n += 1;
                    cur = tx.read(cur)?.next;
                }
                Ok(n)
            })
            .unwrap();
        assert_eq!(n, 64, "{}", engine.name());
    }
}

#[test]
fn user_abort_and_errors_roll_back_everything() {
    for (engine, opts) in common::all_engines() {
        let pool = common::mem_pool_on(engine, 8 << 20, 2, opts.clone());
        let root: PPtr<[u64; 2]> = pool.root().unwrap();
        let r: pisces::Result<()> = pool.run(|tx| {
            tx.write(root)?[0] = 1;
            let p = tx.alloc(Node {
                key: 1,
                next: PPtr::null(),
            })?;
            tx.write(root)?[1] = p.offset();
            Err(tx.abort("no"))
        });
        assert!(matches!(r, Err(Error::UserAbort(_))));
        assert_eq!(pool.run(|tx| Ok(*tx.read(root)?)).unwrap(), [0, 0]);
        // The object is writable again by someone else: its lock was released.
        pool.run(|tx| {
            tx.write(root)?[0] = 9;
            Ok(())
        })
        .unwrap();
        assert_eq!(pool.run(|tx| Ok(tx.read(root)?[0])).unwrap(), 9);
        // Several objects of different sizes written, then an abort: each gets its own
        // old bytes back.
        let (a, b) = pool
            .run(|tx| Ok((tx.alloc([1u64, 2, 3])?, tx.alloc([4u64, 5, 6, 7, 8])?)))
            .unwrap();
        let r: pisces::Result<()> = pool.run(|tx| {
            tx.write(a)?[0] = 10;
            tx.write(b)?[4] = 80;
            tx.write(root)?[1] = 7;
            tx.write(a)?[2] = 30;
            Err(tx.abort("no"))
        });
        assert!(matches!(r, Err(Error::UserAbort(_))));
        let after = pool
            .run(|tx| Ok((*tx.read(a)?, *tx.read(b)?, *tx.read(root)?)))
            .unwrap();
        assert_eq!(after, ([1, 2, 3], [4, 5, 6, 7, 8], [9, 0]), "{engine:?}");
    }
}

#[test]
fn log_recycling_keeps_long_runs_going() {
    for (engine, opts) in common::all_engines() {
        let pool = common::mem_pool_on(engine, 8 << 20, 1, opts.clone());
        let root: PPtr<[u64; 32]> = pool.root().unwrap();
        let mut h = pool.handle().unwrap();
        // Far more log bytes than one 256 KiB ring holds.
        for i in 0..20_000u64 {
            h.run(|tx| {
                let r = tx.write(root)?;
                for (j, w) in r.iter_mut().enumerate() {
                    *w = i + j as u64;
                }
                Ok(())
            })
            .unwrap();
        }
        assert_eq!(h.run(|tx| Ok(tx.read(root)?[31])).unwrap(), 19_999 + 31);
    }
}

#[test]
fn concurrent_increments_are_not_lost() {
    for (engine, opts) in common::all_engines() {
        let pool = common::mem_pool_on(engine, 8 << 20, 4, opts.clone());
        let root: PPtr<u64> = pool.root().unwrap();
        let threads = 3;
        let per = 2_000;
        std::thread::scope(|s| {
            for _ in 0..threads {
                let pool = pool.clone();
                s.spawn(move || {
                    let mut h = pool.handle().unwrap();
                    for _ in 0..per {
                        h.run(|tx| {
                            *tx.write(root)? += 1;
                            Ok(())
                        })
                        .unwrap();
                    }
                });
            }
        });
        assert_eq!(
            pool.run(|tx| Ok(*tx.read(root)?)).unwrap(),
            threads * per,
            "{opts:?}"
        );
    }
}

const ACCOUNTS: usize = 16;
const INITIAL: u64 = 1_000;

/// Transfers between accounts (each its own object) on 2 threads while a third audits:
/// every audit, a read-only snapshot, must see the exact total.
#[test]
fn bank_audits_see_the_exact_total() {
    for (engine, opts) in common::all_engines() {
        let pool = common::mem_pool_on(engine, 16 << 20, 4, opts.clone());
        let table: PPtr<[PPtr<u64>; ACCOUNTS]> = pool.root().unwrap();
        pool.run(|tx| {
            let mut t = [PPtr::null(); ACCOUNTS];
            for a in t.iter_mut() {
                *a = tx.alloc(INITIAL)?;
            }
            *tx.write(table)? = t;
            Ok(())
        })
        .unwrap();
        let accounts = pool.run(|tx| Ok(*tx.read(table)?)).unwrap();
        let stop = AtomicBool::new(false);
        let audits = AtomicU64::new(0);
        let barrier = Barrier::new(3);
        std::thread::scope(|s| {
            for t in 0..2u64 {
                let (pool, stop, barrier, audits) = (pool.clone(), &stop, &barrier, &audits);
                s.spawn(move || {
                    let mut h = pool.handle().unwrap();
                    barrier.wait();
                    let mut x = t * 7 + 1;
                    let t0 = std::time::Instant::now();
                    let mut i = 0;
                    // At least 3000 transfers, and on until the auditor has audited
                    // concurrently 100 times (bounded, for a loaded machine).
                    while i < 3_000
                        || (audits.load(Ordering::Relaxed) < 100 && t0.elapsed().as_secs() < 20)
                    {
                        i += 1;
                        x = x
                            .wrapping_mul(6364136223846793005)
                            .wrapping_add(1442695040888963407);
                        let from = (x >> 33) as usize % ACCOUNTS;
                        let to = (x >> 13) as usize % ACCOUNTS;
                        let amount = (x >> 50) % 50;
                        h.run(|tx| {
                            let f = *tx.read(accounts[from])?;
                            if f < amount || from == to {
                                return Ok(());
                            }
                            *tx.write(accounts[from])? -= amount;
                            *tx.write(accounts[to])? += amount;
                            Ok(())
                        })
                        .unwrap();
                    }
                    stop.store(true, Ordering::Relaxed);
                });
            }
            let (pool, stop, audits, barrier) = (pool.clone(), &stop, &audits, &barrier);
            s.spawn(move || {
                let mut h = pool.handle().unwrap();
                barrier.wait();
                while !stop.load(Ordering::Relaxed) {
                    let total = h
                        .run(|tx| {
                            let mut sum = 0;
                            for a in accounts {
                                sum += *tx.read(a)?;
                            }
                            Ok(sum)
                        })
                        .unwrap();
                    assert_eq!(
                        total,
                        INITIAL * ACCOUNTS as u64,
                        "audit saw a torn snapshot ({opts:?})"
                    );
                    audits.fetch_add(1, Ordering::Relaxed);
                }
            });
        });
        assert!(audits.load(Ordering::Relaxed) > 0);
        let total: u64 = pool
            .run(|tx| {
                let mut sum = 0;
                for a in accounts {
                    sum += *tx.read(a)?;
                }
                Ok(sum)
            })
            .unwrap();
        assert_eq!(total, INITIAL * ACCOUNTS as u64);
    }
}
