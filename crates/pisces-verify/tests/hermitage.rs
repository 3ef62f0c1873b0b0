//! The Hermitage isolation cases (after Martin Kleppmann's Hermitage suite) as
//! deterministic two-session interleavings on the Pisces engine, each asserting what
//! snapshot isolation requires; and, at the end, the cases that tell serializability
//! from snapshot isolation (write skew, anti-dependency cycles, the read-only anomaly)
//! and lost update on the serializable engine `sp3` (early visibility on and off),
//! each asserting what serializability requires.
//!
//! The table is the suite's `test (id, value)` with rows 1 => 10 and 2 => 20; rows 3
//! and 4 exist as absent slots so that predicate cases can insert them (the id names
//! the storage slot, like a primary-key index). Each row is its own object, so Pisces'
//! object locks are row locks.
//!
//! # Making the interleavings deterministic
//! A [`Script`] numbers the steps; a session waits for its step number, acts, and
//! passes the turn on. Where the suite has a session *block* on another's row lock,
//! Pisces (encounter-time locking) returns a conflict at once: the attempt aborts and
//! `run` retries it. So a blocked write is asserted to fail with
//! [`Error::Conflict`](pisces::Error::Conflict), and every later attempt waits for the
//! step the blocking session's commit completes before it acts: it then runs on a fresh
//! snapshot, as the suite's session does once unblocked (or, at repeatable read,
//! retried by the application after its serialization failure).
//!
//! Group commit is on (2 or 8 transactions per batch) in every option set: a commit
//! whose write-back is immediate waits for the grace period of older readers, and
//! several scripts have an older reader wait for that commit to return, which would
//! deadlock the script (not the engine: the reader would never end).

use pisces::medium::DramMedium;
use pisces::{Config, EngineId, EngineOptions, Error, PPtr, Pod, Pool, Result, Tx, Zeroable};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
#[repr(C)]
struct Row {
    present: u64,
    value: u64,
}

/// Rows by id (index 0 unused).
type Table = [PPtr<Row>; 5];

const X: usize = 1;
const Y: usize = 2;

fn options() -> Vec<EngineOptions> {
    let mut v = Vec::new();
    for flush_diff in [true, false] {
        for group_commit in [2, 8] {
            v.push(
                pisces::PiscesOptions {
                    flush_diff,
                    group_commit,
                }
                .into(),
            );
        }
    }
    v
}

/// Steps of an interleaving.
struct Script {
    step: AtomicUsize,
}

impl Script {
    fn new() -> Self {
        Script {
            step: AtomicUsize::new(0),
        }
    }

    /// Wait for step `n` (a script that stalls for 10 s has deadlocked: fail).
    fn at(&self, n: usize) {
        let t = Instant::now();
        while self.step.load(Ordering::Acquire) < n {
            assert!(
                t.elapsed() < Duration::from_secs(10),
                "step {n} never came (at step {})",
                self.step.load(Ordering::Acquire)
            );
            std::thread::yield_now();
        }
    }

    /// Step `n` is done.
    fn done(&self, n: usize) {
        let prev = self.step.swap(n + 1, Ordering::AcqRel);
        assert_eq!(prev, n, "step {n} done out of order");
    }

    /// Run step `n`.
    fn step<R>(&self, n: usize, f: impl FnOnce() -> R) -> R {
        self.at(n);
        let r = f();
        self.done(n);
        r
    }
}

struct Env {
    pool: Pool,
    t: Table,
    s: Script,
}

impl Env {
    fn new(opts: EngineOptions) -> Env {
        Env::on(EngineId::Pisces, opts)
    }

    fn on(engine: EngineId, opts: EngineOptions) -> Env {
        let size = 8 << 20;
        let m = DramMedium::anonymous(size, 0, 0).unwrap();
        let pool = Pool::create_on(
            Arc::new(m),
            Config::default()
                .size(size as u64)
                .engine(engine)
                .max_threads(3)
                .log_bytes_per_thread(64 << 10)
                .engine_options(opts.clone()),
        )
        .unwrap();
        let root: PPtr<Table> = pool.root().unwrap();
        let t = pool
            .run(|tx| {
                let mut t = Table::zeroed();
                for (id, slot) in t.iter_mut().enumerate().skip(1) {
                    let row = match id {
                        X => Row {
                            present: 1,
                            value: 10,
                        },
                        Y => Row {
                            present: 1,
                            value: 20,
                        },
                        _ => Row::zeroed(),
                    };
                    *slot = tx.alloc(row)?;
                }
                *tx.write(root)? = t;
                Ok(t)
            })
            .unwrap();
        pool.sync().unwrap();
        Env {
            pool,
            t,
            s: Script::new(),
        }
    }

    fn get(&self, tx: &Tx<'_>, id: usize) -> Result<u64> {
        let r = *tx.read(self.t[id])?;
        assert_eq!(r.present, 1, "row {id} is absent");
        Ok(r.value)
    }

    fn set(&self, tx: &mut Tx<'_>, id: usize, value: u64) -> Result<()> {
        tx.write(self.t[id])?.value = value;
        Ok(())
    }

    fn insert(&self, tx: &mut Tx<'_>, id: usize, value: u64) -> Result<()> {
        *tx.write(self.t[id])? = Row { present: 1, value };
        Ok(())
    }

    fn delete(&self, tx: &mut Tx<'_>, id: usize) -> Result<()> {
        *tx.write(self.t[id])? = Row::zeroed();
        Ok(())
    }

    /// `select * from test where pred(value)`: (id, value) of matching rows.
    fn select(&self, tx: &Tx<'_>, pred: impl Fn(u64) -> bool) -> Result<Vec<(usize, u64)>> {
        let mut out = Vec::new();
        for id in 1..self.t.len() {
            let r = *tx.read(self.t[id])?;
            if r.present == 1 && pred(r.value) {
                out.push((id, r.value));
            }
        }
        Ok(out)
    }

    /// The table after the case, in a fresh transaction.
    fn table(&self) -> Vec<(usize, u64)> {
        self.pool.run(|tx| self.select(tx, |_| true)).unwrap()
    }

    /// Run two sessions on their own threads and thread handles.
    fn sessions<A: Send, B: Send>(
        &self,
        a: impl FnOnce(&mut pisces::ThreadHandle) -> A + Send,
        b: impl FnOnce(&mut pisces::ThreadHandle) -> B + Send,
    ) -> (A, B) {
        std::thread::scope(|sc| {
            let ta = sc.spawn(|| a(&mut self.pool.handle().unwrap()));
            let tb = sc.spawn(|| b(&mut self.pool.handle().unwrap()));
            (ta.join().unwrap(), tb.join().unwrap())
        })
    }
}

/// Run `case` once per option set on a fresh table.
fn each(case: impl Fn(&Env)) {
    for opts in options() {
        case(&Env::new(opts));
    }
}

fn is_conflict<T>(r: &Result<T>) -> bool {
    matches!(r, Err(Error::Conflict))
}

/// G0, write cycles: T2's write of x meets T1's lock; T1 finishes; T2 then writes both
/// rows. The two transactions' writes are never interleaved: the table is T2's.
#[test]
fn g0_write_cycles() {
    each(|e| {
        let s = &e.s;
        let (_, (blocked, attempts)) = e.sessions(
            |h| {
                let mut n = 0;
                h.run(|tx| {
                    n += 1;
                    assert_eq!(n, 1, "T1 must not be retried");
                    s.step(0, || e.set(tx, X, 11))?;
                    s.step(2, || e.set(tx, Y, 21))?;
                    s.at(3);
                    Ok(())
                })
                .unwrap();
                s.done(3);
            },
            |h| {
                let (mut n, mut blocked) = (0, false);
                h.run(|tx| {
                    n += 1;
                    if n == 1 {
                        let r = s.step(1, || e.set(tx, X, 12));
                        blocked = is_conflict(&r);
                        r?;
                    } else {
                        s.at(4);
                        e.set(tx, X, 12)?;
                    }
                    e.set(tx, Y, 22)
                })
                .unwrap();
                (blocked, n)
            },
        );
        assert!(blocked, "T2's write of x must meet T1's lock");
        assert!(attempts >= 2);
        assert_eq!(e.table(), vec![(X, 12), (Y, 22)]);
    });
}

/// G1a, aborted reads: T2 never sees T1's write of 101, before or after T1 aborts.
#[test]
fn g1a_aborted_reads() {
    each(|e| {
        let s = &e.s;
        let (r1, seen) = e.sessions(
            |h| {
                let r = h.run(|tx| {
                    s.step(0, || e.set(tx, X, 101))?;
                    s.at(2);
                    Err::<(), _>(tx.abort("T1 aborts"))
                });
                s.done(2);
                r
            },
            |h| {
                h.run(|tx| {
                    let a = s.step(1, || e.select(tx, |_| true))?;
                    s.at(3);
                    let b = e.select(tx, |_| true)?;
                    Ok((a, b))
                })
                .unwrap()
            },
        );
        assert!(matches!(r1, Err(Error::UserAbort(_))));
        assert_eq!(seen.0, vec![(X, 10), (Y, 20)]);
        assert_eq!(seen.1, vec![(X, 10), (Y, 20)]);
        assert_eq!(e.table(), vec![(X, 10), (Y, 20)]);
    });
}

/// G1b, intermediate reads: T2 never sees T1's intermediate 101; under snapshot
/// isolation it keeps seeing 10 even after T1 committed 11.
#[test]
fn g1b_intermediate_reads() {
    each(|e| {
        let s = &e.s;
        let (_, seen) = e.sessions(
            |h| {
                h.run(|tx| {
                    s.step(0, || e.set(tx, X, 101))?;
                    s.step(2, || e.set(tx, X, 11))?;
                    s.at(3);
                    Ok(())
                })
                .unwrap();
                s.done(3);
            },
            |h| {
                h.run(|tx| {
                    let a = s.step(1, || e.get(tx, X))?;
                    s.at(4);
                    Ok((a, e.get(tx, X)?))
                })
                .unwrap()
            },
        );
        assert_eq!(seen, (10, 10));
        assert_eq!(e.table(), vec![(X, 11), (Y, 20)]);
    });
}

/// G1c, circular information flow: each reads the row the other wrote and sees the old
/// value; both commit.
#[test]
fn g1c_circular_information_flow() {
    each(|e| {
        let s = &e.s;
        let (a, b) = e.sessions(
            |h| {
                let mut n = 0;
                let y = h
                    .run(|tx| {
                        n += 1;
                        s.step(0, || e.set(tx, X, 11))?;
                        let y = s.step(2, || e.get(tx, Y))?;
                        s.at(4);
                        Ok(y)
                    })
                    .unwrap();
                s.done(4);
                (y, n)
            },
            |h| {
                let mut n = 0;
                let x = h
                    .run(|tx| {
                        n += 1;
                        s.step(1, || e.set(tx, Y, 22))?;
                        let x = s.step(3, || e.get(tx, X))?;
                        s.at(5);
                        Ok(x)
                    })
                    .unwrap();
                (x, n)
            },
        );
        assert_eq!(a, (20, 1), "T1 reads y = 20 and commits first time");
        assert_eq!(b, (10, 1), "T2 reads x = 10 and commits first time");
        assert_eq!(e.table(), vec![(X, 11), (Y, 22)]);
    });
}

/// OTV, observed transaction vanishes: T3 (run after T1 on T1's thread) sees T1's
/// committed writes, never T2's uncommitted ones, and keeps its snapshot after T2
/// commits.
#[test]
fn otv_observed_transaction_vanishes() {
    each(|e| {
        let s = &e.s;
        let (t3, blocked) = e.sessions(
            |h| {
                h.run(|tx| {
                    s.step(0, || e.set(tx, X, 11))?;
                    s.step(1, || e.set(tx, Y, 19))
                })
                .unwrap();
                s.step(3, || ());
                // T3.
                h.run(|tx| {
                    let x1 = s.step(4, || e.get(tx, X))?;
                    let y1 = s.step(6, || e.get(tx, Y))?;
                    s.at(8);
                    let x2 = e.get(tx, X)?;
                    let y2 = e.get(tx, Y)?;
                    Ok([x1, y1, x2, y2])
                })
                .unwrap()
            },
            |h| {
                let (mut n, mut blocked) = (0, false);
                h.run(|tx| {
                    n += 1;
                    if n == 1 {
                        let r = s.step(2, || e.set(tx, X, 12));
                        blocked = is_conflict(&r);
                        return r;
                    }
                    s.at(5);
                    e.set(tx, X, 12)?;
                    e.set(tx, Y, 18)?;
                    s.done(5);
                    s.at(7);
                    Ok(())
                })
                .unwrap();
                s.done(7);
                blocked
            },
        );
        assert!(blocked, "T2's write of x must meet T1's lock");
        assert_eq!(t3, [11, 19, 11, 19], "T3 sees T1, never T2");
        assert_eq!(e.table(), vec![(X, 12), (Y, 18)]);
    });
}

/// PMP, predicate-many-preceders: T1's second predicate read does not see the row T2
/// inserted and committed meanwhile.
#[test]
fn pmp_predicate_many_preceders() {
    each(|e| {
        let s = &e.s;
        let (seen, _) = e.sessions(
            |h| {
                h.run(|tx| {
                    let a = s.step(0, || e.select(tx, |v| v == 30))?;
                    s.at(3);
                    Ok((a, e.select(tx, |v| v % 3 == 0)?))
                })
                .unwrap()
            },
            |h| {
                h.run(|tx| s.step(1, || e.insert(tx, 3, 30))).unwrap();
                s.step(2, || ());
            },
        );
        assert_eq!(seen, (vec![], vec![]));
        assert_eq!(e.table(), vec![(X, 10), (Y, 20), (3, 30)]);
    });
}

/// PMP with a write predicate: T2's `delete where value = 20`, planned on its snapshot
/// (row 2), meets T1's lock on row 2 and does not commit; retried after T1's commit it
/// sees the new values and deletes row 1 (now 20): the result of running T1 then T2.
#[test]
fn pmp_write_predicate() {
    each(|e| {
        let s = &e.s;
        let (_, (blocked, deleted)) = e.sessions(
            |h| {
                h.run(|tx| {
                    s.step(0, || -> Result<()> {
                        for (id, v) in e.select(tx, |_| true)? {
                            e.set(tx, id, v + 10)?;
                        }
                        Ok(())
                    })?;
                    s.at(2);
                    Ok(())
                })
                .unwrap();
                s.done(2);
            },
            |h| {
                let (mut n, mut blocked) = (0, false);
                let deleted = h
                    .run(|tx| {
                        n += 1;
                        s.at(if n == 1 { 1 } else { 3 });
                        let r = (|| -> Result<Vec<usize>> {
                            let hits = e.select(tx, |v| v == 20)?;
                            for (id, _) in &hits {
                                e.delete(tx, *id)?;
                            }
                            Ok(hits.iter().map(|h| h.0).collect())
                        })();
                        if n == 1 {
                            blocked = is_conflict(&r);
                            s.done(1);
                        }
                        r
                    })
                    .unwrap();
                (blocked, deleted)
            },
        );
        assert!(blocked, "the delete of row 2 must meet T1's lock");
        assert_eq!(deleted, vec![X], "the retried delete sees T1's update");
        assert_eq!(e.table(), vec![(Y, 30)]);
    });
}

/// P4, lost update: T2's read-modify-write on the stale 10 meets T1's lock and does not
/// commit; the committed retry reads 11 and writes 12.
#[test]
fn p4_lost_update() {
    each(|e| {
        let s = &e.s;
        let (_, (blocked, committed_read)) = e.sessions(
            |h| {
                h.run(|tx| {
                    let v = s.step(0, || e.get(tx, X))?;
                    s.step(2, || e.set(tx, X, v + 1))?;
                    s.at(4);
                    Ok(())
                })
                .unwrap();
                s.done(4);
            },
            |h| {
                let (mut n, mut blocked, mut last_read) = (0, false, 0);
                h.run(|tx| {
                    n += 1;
                    if n == 1 {
                        let v = s.step(1, || e.get(tx, X))?;
                        let r = s.step(3, || e.set(tx, X, v + 1));
                        blocked = is_conflict(&r);
                        return r;
                    }
                    s.at(5);
                    let v = e.get(tx, X)?;
                    last_read = v;
                    e.set(tx, X, v + 1)
                })
                .unwrap();
                (blocked, last_read)
            },
        );
        assert!(blocked, "T2's write on the stale read must meet T1's lock");
        assert_eq!(committed_read, 11);
        assert_eq!(e.table(), vec![(X, 12), (Y, 20)]);
    });
}

/// P4 where the first writer has already committed when the second writes: still no
/// lost update (first committer wins; the second's snapshot is older than the commit).
#[test]
fn p4_lost_update_after_commit() {
    each(|e| {
        let s = &e.s;
        let (_, (blocked, committed_read)) = e.sessions(
            |h| {
                h.run(|tx| {
                    let v = s.step(0, || e.get(tx, X))?;
                    s.at(2);
                    e.set(tx, X, v + 1)
                })
                .unwrap();
                s.done(2);
            },
            |h| {
                let (mut n, mut blocked, mut last_read) = (0, false, 0);
                h.run(|tx| {
                    n += 1;
                    let v = if n == 1 {
                        let v = s.step(1, || e.get(tx, X))?;
                        s.at(3);
                        v
                    } else {
                        e.get(tx, X)?
                    };
                    last_read = v;
                    let r = e.set(tx, X, v + 1);
                    if n == 1 {
                        blocked = is_conflict(&r);
                    }
                    r
                })
                .unwrap();
                (blocked, last_read)
            },
        );
        assert!(blocked, "T2 must not update x over T1's committed write");
        assert_eq!(committed_read, 11);
        assert_eq!(e.table(), vec![(X, 12), (Y, 20)]);
    });
}

/// G-single, read skew: T1 reads x = 10; T2 moves 2 from y to x (x = 12, y = 18) and
/// commits; T1 then reads y = 20: one snapshot, x + y = 30.
#[test]
fn g_single_read_skew() {
    each(|e| {
        let s = &e.s;
        let ((x, y), _) = e.sessions(
            |h| {
                h.run(|tx| {
                    let x = s.step(0, || e.get(tx, X))?;
                    s.at(3);
                    Ok((x, e.get(tx, Y)?))
                })
                .unwrap()
            },
            |h| {
                h.run(|tx| {
                    s.step(1, || -> Result<()> {
                        let (x, y) = (e.get(tx, X)?, e.get(tx, Y)?);
                        assert_eq!((x, y), (10, 20));
                        e.set(tx, X, 12)?;
                        e.set(tx, Y, 18)
                    })
                })
                .unwrap();
                s.step(2, || ());
            },
        );
        assert_eq!((x, y), (10, 20));
        assert_eq!(e.table(), vec![(X, 12), (Y, 18)]);
    });
}

/// G-single with predicate reads: T2 changes the row matching `value % 5 = 0` from 10
/// to 12 and commits; T1's later `value % 3 = 0` does not see 12.
#[test]
fn g_single_predicate_read_skew() {
    each(|e| {
        let s = &e.s;
        let (seen, _) = e.sessions(
            |h| {
                h.run(|tx| {
                    let a = s.step(0, || e.select(tx, |v| v % 5 == 0))?;
                    s.at(3);
                    Ok((a, e.select(tx, |v| v % 3 == 0)?))
                })
                .unwrap()
            },
            |h| {
                h.run(|tx| {
                    s.step(1, || -> Result<()> {
                        for (id, _) in e.select(tx, |v| v == 10)? {
                            e.set(tx, id, 12)?;
                        }
                        Ok(())
                    })
                })
                .unwrap();
                s.step(2, || ());
            },
        );
        assert_eq!(seen, (vec![(X, 10), (Y, 20)], vec![]));
        assert_eq!(e.table(), vec![(X, 12), (Y, 20)]);
    });
}

/// G-single with a write predicate: T1's `delete where value = 20`, planned on its
/// snapshot (row 2 = 20), meets T2's committed write of row 2 and does not commit; the
/// retry sees y = 18 and deletes nothing.
#[test]
fn g_single_write_predicate() {
    each(|e| {
        let s = &e.s;
        let ((blocked, deleted), _) = e.sessions(
            |h| {
                let (mut n, mut blocked) = (0, false);
                let deleted = h
                    .run(|tx| {
                        n += 1;
                        if n == 1 {
                            assert_eq!(s.step(0, || e.get(tx, X))?, 10);
                            s.at(3);
                        }
                        let r = (|| -> Result<Vec<usize>> {
                            let hits = e.select(tx, |v| v == 20)?;
                            for (id, _) in &hits {
                                e.delete(tx, *id)?;
                            }
                            Ok(hits.iter().map(|h| h.0).collect())
                        })();
                        if n == 1 {
                            blocked = is_conflict(&r);
                        }
                        r
                    })
                    .unwrap();
                (blocked, deleted)
            },
            |h| {
                h.run(|tx| {
                    s.step(1, || -> Result<()> {
                        e.select(tx, |_| true)?;
                        e.set(tx, X, 12)?;
                        e.set(tx, Y, 18)
                    })
                })
                .unwrap();
                s.step(2, || ());
            },
        );
        assert!(blocked, "T1's delete of row 2 must meet T2's write");
        assert_eq!(deleted, Vec::<usize>::new());
        assert_eq!(e.table(), vec![(X, 12), (Y, 18)]);
    });
}

/// G2-item, write skew: both read x and y, T1 writes x, T2 writes y; snapshot isolation
/// lets both commit (serializability would not).
#[test]
fn g2_item_write_skew_is_allowed() {
    each(|e| {
        let s = &e.s;
        let (a, b) = e.sessions(
            |h| {
                let mut n = 0;
                let seen = h
                    .run(|tx| {
                        n += 1;
                        let seen = s.step(0, || e.select(tx, |_| true))?;
                        s.step(2, || e.set(tx, X, 11))?;
                        s.at(4);
                        Ok(seen)
                    })
                    .unwrap();
                s.done(4);
                (seen, n)
            },
            |h| {
                let mut n = 0;
                let seen = h
                    .run(|tx| {
                        n += 1;
                        let seen = s.step(1, || e.select(tx, |_| true))?;
                        s.step(3, || e.set(tx, Y, 21))?;
                        s.at(5);
                        Ok(seen)
                    })
                    .unwrap();
                (seen, n)
            },
        );
        let initial = vec![(X, 10), (Y, 20)];
        assert_eq!(a, (initial.clone(), 1), "T1 commits on its first attempt");
        assert_eq!(b, (initial, 1), "T2 commits on its first attempt");
        assert_eq!(e.table(), vec![(X, 11), (Y, 21)]);
    });
}

/// G2, anti-dependency cycles over a predicate: both find no row with `value % 3 = 0`,
/// both insert one; snapshot isolation lets both commit.
#[test]
fn g2_anti_dependency_cycles_are_allowed() {
    each(|e| {
        let s = &e.s;
        let (a, b) = e.sessions(
            |h| {
                let mut n = 0;
                let seen = h
                    .run(|tx| {
                        n += 1;
                        let seen = s.step(0, || e.select(tx, |v| v % 3 == 0))?;
                        s.step(2, || e.insert(tx, 3, 30))?;
                        s.at(4);
                        Ok(seen)
                    })
                    .unwrap();
                s.done(4);
                (seen, n)
            },
            |h| {
                let mut n = 0;
                let seen = h
                    .run(|tx| {
                        n += 1;
                        let seen = s.step(1, || e.select(tx, |v| v % 3 == 0))?;
                        s.step(3, || e.insert(tx, 4, 42))?;
                        s.at(5);
                        Ok(seen)
                    })
                    .unwrap();
                (seen, n)
            },
        );
        assert_eq!(a, (vec![], 1));
        assert_eq!(b, (vec![], 1));
        assert_eq!(e.select_all_mod3(), vec![(3, 30), (4, 42)]);
    });
}

/// G2 with two anti-dependencies and a read-only transaction (Fekete et al.): T1 reads
/// everything; T2 adds 5 to y and commits; T3 reads 10, 25 and commits; T1 then writes
/// x = 0 and commits — allowed under snapshot isolation.
#[test]
fn g2_read_only_anomaly_is_allowed() {
    each(|e| {
        let s = &e.s;
        let ((t1_seen, t1_attempts), t3_seen) = e.sessions(
            |h| {
                let mut n = 0;
                let seen = h
                    .run(|tx| {
                        n += 1;
                        let seen = s.step(0, || e.select(tx, |_| true))?;
                        s.at(4);
                        e.set(tx, X, 0)?;
                        Ok(seen)
                    })
                    .unwrap();
                (seen, n)
            },
            |h| e.g2_t2_then_t3(h),
        );
        assert_eq!(t1_seen, vec![(X, 10), (Y, 20)]);
        assert_eq!(t1_attempts, 1, "T1 commits on its first attempt");
        assert_eq!(t3_seen, vec![(X, 10), (Y, 25)]);
        assert_eq!(e.table(), vec![(X, 0), (Y, 25)]);
    });
}

impl Env {
    /// The G2 read-only anomaly's second session: T2 adds 5 to y at step 1 and commits
    /// (step 2); T3, after T2 committed, reads everything (step 3). Returns T3's read.
    fn g2_t2_then_t3(&self, h: &mut pisces::ThreadHandle) -> Vec<(usize, u64)> {
        let s = &self.s;
        h.run(|tx| {
            s.step(1, || -> Result<()> {
                let y = self.get(tx, Y)?;
                self.set(tx, Y, y + 5)
            })
        })
        .unwrap();
        s.step(2, || ());
        let seen = h.run(|tx| self.select(tx, |_| true)).unwrap();
        s.step(3, || ());
        seen
    }

    fn select_all_mod3(&self) -> Vec<(usize, u64)> {
        self.pool.run(|tx| self.select(tx, |v| v % 3 == 0)).unwrap()
    }
}

// ---------------------------------------------------------------------------------
// Serializable: sp3. Optimistic: reads take no locks, writes lock at encounter (no
// wait: a locked object is a conflict), commit validates the read set. So where the
// snapshot-isolation cases above let both transactions commit on their first attempt,
// one of them must fail here (at a write, or at its commit's validation) and retry on
// the other's result. Which one fails is the engine's business; the cases assert only
// what serializability demands: no committed pair of transactions both missed each
// other's write.

/// The serializable engines' option sets: sp3 with early visibility (versions visible
/// before they persist) and without.
fn serializable_envs() -> Vec<Env> {
    [true, false]
        .into_iter()
        .map(|ev| {
            Env::on(
                EngineId::Sp3,
                EngineOptions::new().set("early_visibility", ev),
            )
        })
        .collect()
}

/// A transaction's committed attempt: what it read, and how many attempts it took.
type Committed<R> = (R, usize);

impl Env {
    /// Two overlapping read-write transactions: A reads (step 0), B reads (1), A
    /// writes (2), B writes (3), A commits (4), B commits (5). A session whose first
    /// attempt fails retries on its own once the other's first attempt has ended too
    /// (6). Each session's write gets what its own attempt read.
    fn overlap<R: Send>(
        &self,
        read: impl Fn(&Tx<'_>) -> Result<R> + Sync,
        write_a: impl Fn(&mut Tx<'_>, &R) -> Result<()> + Sync,
        write_b: impl Fn(&mut Tx<'_>, &R) -> Result<()> + Sync,
    ) -> (Committed<R>, Committed<R>) {
        let s = &self.s;
        let (read, write_a, write_b) = (&read, &write_a, &write_b);
        self.sessions(
            |h| overlap_session(h, s, 0, read, write_a),
            |h| overlap_session(h, s, 1, read, write_b),
        )
    }
}

/// One session of [`Env::overlap`], reading at step `first` and writing at `first + 2`
/// in its first attempt, which ends (commits or conflicts) at step `first + 4`; a retry
/// runs at step 6 once the other session's first attempt has ended.
fn overlap_session<R>(
    h: &mut pisces::ThreadHandle,
    s: &Script,
    first: usize,
    read: &dyn Fn(&Tx<'_>) -> Result<R>,
    write: &dyn Fn(&mut Tx<'_>, &R) -> Result<()>,
) -> Committed<R> {
    let end = first + 4;
    let (mut n, mut over) = (0, false);
    let seen = h
        .run(|tx| {
            n += 1;
            if n == 1 {
                let seen = s.step(first, || read(tx))?;
                s.step(first + 2, || write(tx, &seen))?;
                s.at(end);
                return Ok(seen);
            }
            if !over {
                over = true;
                s.at(end);
                s.done(end);
            }
            s.at(6);
            let seen = read(tx)?;
            write(tx, &seen)?;
            Ok(seen)
        })
        .unwrap();
    if !over {
        s.done(end);
    }
    (seen, n)
}

/// G2-item, write skew, forbidden: both read x and y, A writes x, B writes y. One of
/// them must retry and read the other's write.
#[test]
fn serializable_g2_item_write_skew_is_forbidden() {
    for e in serializable_envs() {
        let ((a, na), (b, nb)) = e.overlap(
            |tx| e.select(tx, |_| true),
            |tx, _| e.set(tx, X, 11),
            |tx, _| e.set(tx, Y, 21),
        );
        assert!(
            na + nb > 2,
            "both committed on their first attempt: {a:?} {b:?}"
        );
        assert!(
            a.contains(&(Y, 21)) || b.contains(&(X, 11)),
            "neither committed transaction saw the other's write: {a:?} {b:?}"
        );
        assert_eq!(e.table(), vec![(X, 11), (Y, 21)]);
    }
}

/// G2, anti-dependency cycles over a predicate, forbidden: both look for rows with
/// `value % 3 = 0`, find none, insert one. One of them must retry and find the other's.
#[test]
fn serializable_g2_anti_dependency_cycles_are_forbidden() {
    for e in serializable_envs() {
        let ((a, na), (b, nb)) = e.overlap(
            |tx| e.select(tx, |v| v % 3 == 0),
            |tx, _| e.insert(tx, 3, 30),
            |tx, _| e.insert(tx, 4, 42),
        );
        assert!(na + nb > 2, "both committed on their first attempt");
        assert!(
            a == vec![(4, 42)] || b == vec![(3, 30)],
            "neither committed transaction saw the other's row: {a:?} {b:?}"
        );
        assert_eq!(e.select_all_mod3(), vec![(3, 30), (4, 42)]);
    }
}

/// P4, lost update, forbidden: both read x and write x + 1. The result is 12.
#[test]
fn serializable_p4_lost_update_is_forbidden() {
    for e in serializable_envs() {
        let ((a, _), (b, _)) = e.overlap(
            |tx| e.get(tx, X),
            |tx, &v| e.set(tx, X, v + 1),
            |tx, &v| e.set(tx, X, v + 1),
        );
        let mut reads = [a, b];
        reads.sort_unstable();
        assert_eq!(reads, [10, 11], "the committed attempts read 10 and 11");
        assert_eq!(e.table(), vec![(X, 12), (Y, 20)]);
    }
}

/// G2 with a read-only transaction (Fekete et al.), forbidden: T1 reads everything;
/// T2 adds 5 to y and commits; T3 reads x = 10, y = 25 and commits; T1 then writes
/// x = 0. If T1 committed on what it first read (y = 20), T3 would have seen T2's
/// effect but not T1's, while T1 missed T2's: a cycle. T1 must retry and read 25.
#[test]
fn serializable_g2_read_only_anomaly_is_forbidden() {
    for e in serializable_envs() {
        let s = &e.s;
        let ((t1_seen, t1_attempts), t3_seen) = e.sessions(
            |h| {
                let mut n = 0;
                let seen = h
                    .run(|tx| {
                        n += 1;
                        let seen = if n == 1 {
                            let seen = s.step(0, || e.select(tx, |_| true))?;
                            s.at(4);
                            seen
                        } else {
                            e.select(tx, |_| true)?
                        };
                        e.set(tx, X, 0)?;
                        Ok(seen)
                    })
                    .unwrap();
                (seen, n)
            },
            |h| e.g2_t2_then_t3(h),
        );
        assert_eq!(t3_seen, vec![(X, 10), (Y, 25)]);
        assert!(t1_attempts >= 2, "T1 committed on its stale read of y");
        assert_eq!(t1_seen, vec![(X, 10), (Y, 25)]);
        assert_eq!(e.table(), vec![(X, 0), (Y, 25)]);
    }
}
