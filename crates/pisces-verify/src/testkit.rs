//! Pools and engine lists shared by the test suites (here and in the `pisces` crate):
//! a new engine of the registry joins every suite that iterates [`all_engines`].

use pisces::medium::DramMedium;
use pisces::{Config, EngineOptions, Pool};
use std::sync::Arc;

/// A small Pisces pool on anonymous DRAM.
pub fn mem_pool(size: u64, threads: usize, opts: EngineOptions) -> Pool {
    mem_pool_on(pisces::EngineId::Pisces, size, threads, opts)
}

/// A small pool of engine `engine` on anonymous DRAM.
pub fn mem_pool_on(
    engine: pisces::EngineId,
    size: u64,
    threads: usize,
    opts: EngineOptions,
) -> Pool {
    let m = DramMedium::anonymous(size as usize, 0, 0).unwrap();
    Pool::create_on(
        Arc::new(m),
        Config::default()
            .size(size)
            .engine(engine)
            .max_threads(threads)
            .log_bytes_per_thread(256 << 10)
            .engine_options(opts),
    )
    .unwrap()
}

/// Every (engine, options) combination the behavioural tests run under: every engine
/// of the registry that runs on our pool format, with each of its option sets (its
/// ablation switches on and off). A new engine joins every suite that uses this without
/// a change here.
///
/// `PISCES_TEST_ENGINES` (engine names, comma-separated) narrows the list, for
/// stress-running one engine's share of a suite; unset, every engine runs.
pub fn all_engines() -> Vec<(pisces::EngineId, EngineOptions)> {
    let only: Option<Vec<String>> = std::env::var("PISCES_TEST_ENGINES")
        .ok()
        .map(|v| v.split(',').map(|s| s.trim().to_string()).collect());
    pisces::EngineId::ALL
        .iter()
        .filter(|e| e.available() && !e.has_own_pool_format())
        .filter(|e| {
            only.as_ref()
                .is_none_or(|o| o.iter().any(|n| n == e.name()))
        })
        .flat_map(|&e| e.option_sets().into_iter().map(move |o| (e, o)))
        .collect()
}

/// Pisces' option combinations (flush-diff on and off, group commit off and on).
pub fn all_options() -> Vec<EngineOptions> {
    pisces::EngineId::Pisces.option_sets()
}

/// Hermitage-style read skew under a write-back: a reader reads A, a writer then moves
/// 50 from A to B and commits, the reader reads B. Snapshot isolation requires the
/// reader to see A + B = 200. The writer's grace period must hold its write-back until
/// the reader ends; the reader waits for the writer's commit at most `patience`. The
/// reader is a snapshot ([`ThreadHandle::read`](pisces::ThreadHandle::read)) if
/// `snapshot`, else a transaction of `run` that only reads.
/// Returns (A + B as the reader saw it, how long the writer's commit call took).
pub fn read_skew_under_write_back(
    patience: std::time::Duration,
    snapshot: bool,
) -> (u64, std::time::Duration) {
    use pisces::{PPtr, Tx};
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Instant;
    let pool = mem_pool(8 << 20, 2, EngineOptions::new().set("group_commit", 1));
    let root: PPtr<[PPtr<u64>; 2]> = pool.root().unwrap();
    let [a, b] = pool
        .run(|tx| {
            let ab = [tx.alloc(100u64)?, tx.alloc(100u64)?];
            *tx.write(root)? = ab;
            Ok(ab)
        })
        .unwrap();
    let read_a = AtomicBool::new(false);
    let committed = AtomicBool::new(false);
    std::thread::scope(|s| {
        let writer = s.spawn(|| {
            let mut h = pool.handle().unwrap();
            while !read_a.load(Ordering::Acquire) {
                std::thread::yield_now();
            }
            let t = Instant::now();
            h.run(|tx| {
                *tx.write(a)? -= 50;
                *tx.write(b)? += 50;
                Ok(())
            })
            .unwrap();
            let took = t.elapsed();
            committed.store(true, Ordering::Release);
            took
        });
        let mut h = pool.handle().unwrap();
        let reader = |tx: &Tx<'_>| {
            let va = *tx.read(a)?;
            read_a.store(true, Ordering::Release);
            let t = Instant::now();
            while !committed.load(Ordering::Acquire) && t.elapsed() < patience {
                std::thread::yield_now();
            }
            Ok(va + *tx.read(b)?)
        };
        let sum = if snapshot {
            h.read(reader)
        } else {
            h.run(|tx| reader(tx))
        }
        .unwrap();
        drop(h);
        (sum, writer.join().unwrap())
    })
}

/// The single-version engines (sp3, spht) let long transactions through: a long
/// transaction (read `a`, sleep 30 ms, read `b`) commits while a writer thread moves
/// one unit from `a` to `b` in a loop, as a snapshot ([`Pool::read`]), as a read-only
/// transaction of `run_with` (the same path) and as an update transaction (which also
/// writes a third object): each returns within 5 s (an attempt bound, not a hope: the
/// engine's serial fallback after repeated aborts) and saw `a + b` unchanged, while
/// the writer kept committing. On the engines whose snapshots never conflict, a
/// snapshot that did not hold back the writer's write-back of `a` and `b` would see
/// half of a transfer here.
pub fn long_transactions_commit_while_a_writer_runs(pool: &Pool) {
    use pisces::{PPtr, TxOptions};
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
    use std::sync::mpsc;
    use std::time::Duration;
    const TOTAL: i64 = 1_000_000;
    let root: PPtr<[PPtr<i64>; 3]> = pool.root().unwrap();
    let [a, b, c] = pool
        .run(|tx| {
            let p = [tx.alloc(TOTAL)?, tx.alloc(0i64)?, tx.alloc(0i64)?];
            *tx.write(root)? = p;
            Ok(p)
        })
        .unwrap();
    let (stop, writes) = (&AtomicBool::new(false), &AtomicU64::new(0));
    std::thread::scope(|s| {
        s.spawn(move || {
            let mut h = pool.handle().unwrap();
            while !stop.load(Relaxed) {
                h.run(|tx| {
                    *tx.write(a)? -= 1;
                    *tx.write(b)? += 1;
                    Ok(())
                })
                .unwrap();
                writes.fetch_add(1, Relaxed);
            }
        });
        let (done, results) = mpsc::channel();
        s.spawn(move || {
            let long = |tx: &pisces::Tx<'_>| -> pisces::Result<i64> {
                let x = *tx.read(a)?;
                std::thread::sleep(Duration::from_millis(30));
                let y = *tx.read(b)?;
                Ok(x + y)
            };
            for kind in ["snapshot", "read-only", "update"] {
                let before = writes.load(Relaxed);
                let r = match kind {
                    "snapshot" => pool.read(long),
                    "read-only" => pool.run_with(TxOptions::read_only(), |tx| long(tx)),
                    _ => pool.run(|tx| {
                        let sum = long(tx)?;
                        *tx.write(c)? = sum;
                        Ok(sum)
                    }),
                };
                let _ = done.send((kind, r, before));
            }
        });
        // Stops the writer also when a check below panics: the scope would otherwise
        // wait for it forever and the failure would show as a hang.
        struct StopOnDrop<'a>(&'a AtomicBool);
        impl Drop for StopOnDrop<'_> {
            fn drop(&mut self) {
                self.0.store(true, Relaxed);
            }
        }
        let _stop_writer = StopOnDrop(stop);
        for _ in 0..3 {
            let got = results.recv_timeout(Duration::from_secs(5));
            let Ok((kind, r, before)) = got else {
                panic!("a long transaction did not commit within 5 s while a writer ran");
            };
            assert_eq!(r.unwrap(), TOTAL, "{kind}: a + b changed");
            // The writer kept committing around it (the test is not vacuous).
            let mut round = 0;
            while writes.load(Relaxed) <= before + 1 {
                round += 1;
                assert!(round < 5000, "the writer made no progress");
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    });
    assert_eq!(pool.run(|tx| Ok(*tx.read(c)?)).unwrap(), TOTAL);
}

/// Every engine bounds the attempts of an update transaction that keeps losing its
/// object to a writer: a long transaction (read `a`, sleep 20 ms, write `a`) beside a
/// writer thread that increments `a` in a loop returns within 5 s (the optimistic and
/// snapshot engines' serial fallback after repeated conflicts; the locking engines'
/// lock), while the writer kept committing, and no update was lost: `a` ends as the
/// writer's commits plus the long transaction's addition.
pub fn a_long_update_of_a_hot_object_commits_while_a_writer_runs(pool: &Pool) {
    use pisces::PPtr;
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
    use std::sync::mpsc;
    use std::time::Duration;
    const ADD: u64 = 1 << 40;
    let root: PPtr<PPtr<u64>> = pool.root().unwrap();
    let a = pool
        .run(|tx| {
            let a = tx.alloc(0u64)?;
            *tx.write(root)? = a;
            Ok(a)
        })
        .unwrap();
    let (stop, writes) = (&AtomicBool::new(false), &AtomicU64::new(0));
    std::thread::scope(|s| {
        s.spawn(move || {
            let mut h = pool.handle().unwrap();
            while !stop.load(Relaxed) {
                h.run(|tx| {
                    *tx.write(a)? += 1;
                    Ok(())
                })
                .unwrap();
                writes.fetch_add(1, Relaxed);
            }
        });
        let (done, result) = mpsc::channel();
        s.spawn(move || {
            let before = writes.load(Relaxed);
            let r = pool.run(|tx| {
                let x = *tx.read(a)?;
                std::thread::sleep(Duration::from_millis(20));
                *tx.write(a)? = x + ADD;
                Ok(())
            });
            let _ = done.send((r, before));
        });
        let got = result.recv_timeout(Duration::from_secs(5));
        let Ok((r, before)) = got else {
            stop.store(true, Relaxed);
            panic!("a long update of a hot object did not commit within 5 s while a writer ran");
        };
        r.unwrap();
        // The writer committed beside it (the test is not vacuous) and goes on after.
        let mut round = 0;
        while writes.load(Relaxed) <= before + 1 {
            round += 1;
            assert!(round < 5000, "the writer made no progress");
            std::thread::sleep(Duration::from_millis(1));
        }
        stop.store(true, Relaxed);
    });
    let n = writes.load(Relaxed);
    assert_eq!(
        pool.run(|tx| Ok(*tx.read(a)?)).unwrap(),
        n + ADD,
        "an update was lost"
    );
}

/// The serial fallback of the single-version engines (sp3, spht) never holds writers
/// for good: a reader whose attempt waits until the
/// writer commits once more (what a holder does when its closure waits for a
/// transaction that waits for it: a nested transaction of another pool, a thread-slot
/// checkout) holds the writer only until its deadline, so the writer keeps committing.
/// (This reader can never commit on a single-version engine: it needs a write to what
/// it read during its own attempt. Its deadline doubles with each attempt, so the
/// writer slows down; a permanent wait would stop it.)
pub fn a_holder_waiting_for_a_writer_holds_it_only_until_its_deadline(pool: &Pool) {
    use pisces::{PPtr, TxOptions};
    use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering::Relaxed};
    use std::time::{Duration, Instant};
    let root: PPtr<[PPtr<i64>; 2]> = pool.root().unwrap();
    let [a, b] = pool
        .run(|tx| {
            let p = [tx.alloc(0i64)?, tx.alloc(0i64)?];
            *tx.write(root)? = p;
            Ok(p)
        })
        .unwrap();
    let (stop, writes) = (&AtomicBool::new(false), &AtomicU64::new(0));
    // The value of `a` the writer committed last.
    let last = &AtomicI64::new(0);
    std::thread::scope(|s| {
        s.spawn(move || {
            let mut h = pool.handle().unwrap();
            while !stop.load(Relaxed) {
                let v = h
                    .run(|tx| {
                        *tx.write(b)? += 1;
                        let a = tx.write(a)?;
                        *a += 1;
                        Ok(*a)
                    })
                    .unwrap();
                last.store(v, Relaxed);
                writes.fetch_add(1, Relaxed);
            }
        });
        s.spawn(move || {
            pool.run_with(TxOptions::read_only(), |tx| {
                // Wait for a commit after our read of `a`: our read of `b` then
                // conflicts.
                let x = *tx.read(a)?;
                let t = Instant::now();
                while last.load(Relaxed) <= x
                    && !stop.load(Relaxed)
                    && t.elapsed() < Duration::from_secs(60)
                {
                    std::thread::sleep(Duration::from_millis(1));
                }
                Ok(x + *tx.read(b)?)
            })
            .unwrap();
        });
        // The reader falls back after a few aborts (one write each); from then on the
        // writer waits for the reader's deadline (at least the fallback's floor, and
        // twice the reader's longest attempt), committing freely between the reader's
        // attempts. Wait for a pause of at least the floor and two commits after it.
        let t = Instant::now();
        let (mut seen, mut since) = (writes.load(Relaxed), Instant::now());
        let (mut paused, mut after) = (Duration::ZERO, 0);
        while (paused < Duration::from_millis(10) || after < 2)
            && t.elapsed() < Duration::from_secs(20)
        {
            std::thread::sleep(Duration::from_millis(1));
            let w = writes.load(Relaxed);
            if w != seen {
                if paused >= Duration::from_millis(10) {
                    after += w - seen;
                }
                paused = paused.max(since.elapsed());
                (seen, since) = (w, Instant::now());
            }
        }
        stop.store(true, Relaxed);
        assert!(
            paused >= Duration::from_millis(10),
            "the writer never paused: the reader did not hold it back"
        );
        assert!(
            after >= 2,
            "the writer committed {after} times after a pause of {paused:?}, in {:?}",
            t.elapsed()
        );
    });
}
