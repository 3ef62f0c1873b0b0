//! The transaction API's contract under misuse: panics, nesting, a full pool of thread
//! slots, root types, options the engine does not have, the caller's own error type.

use pisces::{Config, EngineId, EngineOptions, Error, Isolation, PPtr, Pool, TxOptions};
use std::time::{Duration, Instant};

fn pool_with(dir: &tempfile::TempDir, name: &str, cfg: Config) -> Pool {
    Pool::create(dir.path().join(name), cfg.size(16 << 20)).unwrap()
}

/// A panic inside `run` rolls the attempt back and gives the thread slot back: more
/// panics than there are slots leave the pool fully usable.
#[test]
fn panics_in_run_roll_back_and_return_the_slot() {
    let d = tempfile::tempdir_in("/dev/shm").unwrap();
    let pool = pool_with(&d, "p", Config::default().max_threads(2));
    let n: PPtr<u64> = pool.root().unwrap();
    for _ in 0..5 {
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            pool.run(|tx| -> pisces::Result<()> {
                *tx.write(n)? += 1;
                panic!("user code panics mid-transaction");
            })
        }));
        assert!(r.is_err());
    }
    // Nothing of the panicking attempts is visible, and both slots are free.
    assert_eq!(pool.run(|tx| Ok(*tx.read(n)?)).unwrap(), 0);
    let (a, b) = (pool.handle().unwrap(), pool.handle().unwrap());
    drop((a, b));
    pool.run(|tx| {
        *tx.write(n)? = 9;
        Ok(())
    })
    .unwrap();
}

/// A transaction started inside another one of the same pool on the same thread is an
/// error, never a hang — also when the inner one touches what the outer one wrote.
#[test]
fn nested_transactions_are_refused() {
    let d = tempfile::tempdir_in("/dev/shm").unwrap();
    for engine in [EngineId::Pisces, EngineId::Undo, EngineId::Mvcc] {
        let pool = pool_with(&d, engine.name(), Config::default().engine(engine));
        let n: PPtr<u64> = pool.root().unwrap();
        let mut handle = pool.handle().unwrap();
        let inner = pool.run(|tx| {
            *tx.write(n)? = 1;
            let nested = pool.run(|tx2| {
                *tx2.write(n)? = 2;
                Ok(())
            });
            let nested_handle = handle.run(|tx2| Ok(*tx2.read(n)?));
            Ok((nested, nested_handle))
        });
        let (nested, nested_handle) = inner.unwrap();
        assert!(
            matches!(nested, Err(Error::NestedTransaction)),
            "{engine}: {nested:?}"
        );
        assert!(
            matches!(nested_handle, Err(Error::NestedTransaction)),
            "{engine}: {nested_handle:?}"
        );
        assert_eq!(pool.run(|tx| Ok(*tx.read(n)?)).unwrap(), 1, "{engine}");
        // Another pool inside a transaction is fine.
        let other = pool_with(&d, &format!("{engine}-other"), Config::default());
        let m: PPtr<u64> = other.root().unwrap();
        pool.run(|tx| {
            let v = *tx.read(n)?;
            other.run(|tx2| {
                *tx2.write(m)? = v;
                Ok(())
            })
        })
        .unwrap();
        assert_eq!(other.run(|tx| Ok(*tx.read(m)?)).unwrap(), 1);
    }
}

/// `run` waits (bounded by `Config::slot_wait`) for a slot when all are checked out.
#[test]
fn run_waits_for_a_free_slot_within_the_bound() {
    let d = tempfile::tempdir_in("/dev/shm").unwrap();
    let pool = pool_with(
        &d,
        "w",
        Config::default()
            .max_threads(1)
            .slot_wait(Duration::from_secs(10)),
    );
    let n: PPtr<u64> = pool.root().unwrap();
    let h = pool.handle().unwrap();
    let t0 = Instant::now();
    std::thread::scope(|s| {
        s.spawn(|| {
            std::thread::sleep(Duration::from_millis(100));
            drop(h);
        });
        pool.run(|tx| {
            *tx.write(n)? = 5;
            Ok(())
        })
        .unwrap();
    });
    assert!(t0.elapsed() >= Duration::from_millis(90));
    // With no wait allowed, a full pool is an error at once.
    let quick = pool_with(
        &d,
        "q",
        Config::default().max_threads(1).slot_wait(Duration::ZERO),
    );
    let _h = quick.handle().unwrap();
    let r = std::thread::scope(|s| s.spawn(|| quick.run(|_| Ok(()))).join().unwrap());
    assert!(matches!(r, Err(Error::TooManyThreads(1))), "{r:?}");
}

/// The root's type is recorded (size and a fingerprint): the same size under another
/// type is refused, also after reopening.
#[test]
fn root_of_another_type_is_refused() {
    let d = tempfile::tempdir_in("/dev/shm").unwrap();
    let path = d.path().join("r");
    {
        let pool = Pool::create(&path, Config::default().size(16 << 20)).unwrap();
        let r: PPtr<u64> = pool.root().unwrap();
        pool.run(|tx| {
            *tx.write(r)? = 0xDEAD_BEEF;
            Ok(())
        })
        .unwrap();
        assert!(matches!(
            pool.root::<PPtr<u64>>(),
            Err(Error::InvalidPointer(_))
        ));
        assert!(matches!(pool.root::<i64>(), Err(Error::InvalidPointer(_))));
        assert_eq!(pool.root::<u64>().unwrap(), r);
    }
    let pool = Pool::open(&path, Config::default()).unwrap();
    assert!(matches!(
        pool.root::<PPtr<u64>>(),
        Err(Error::InvalidPointer(_))
    ));
    let r: PPtr<u64> = pool.root().unwrap();
    assert_eq!(pool.run(|tx| Ok(*tx.read(r)?)).unwrap(), 0xDEAD_BEEF);
}

/// The caller's error type comes back as returned; a conflict converted into it is
/// still retried (two threads increment one counter through their own error type).
#[test]
fn the_callers_error_type_is_kept_and_conflicts_inside_it_are_retried() {
    #[derive(Debug)]
    enum AppError {
        Pool(Error),
        TooBig(u64),
    }
    impl From<Error> for AppError {
        fn from(e: Error) -> Self {
            AppError::Pool(e)
        }
    }
    let d = tempfile::tempdir_in("/dev/shm").unwrap();
    let pool = pool_with(&d, "e", Config::default());
    let n: PPtr<u64> = pool.root().unwrap();
    std::thread::scope(|s| {
        for _ in 0..2 {
            let pool = pool.clone();
            s.spawn(move || {
                let mut h = pool.handle().unwrap();
                for _ in 0..2000 {
                    h.transaction(TxOptions::default(), |tx| -> Result<(), AppError> {
                        let v = *tx.read(n)?;
                        *tx.write(n)? = v + 1;
                        Ok(())
                    })
                    .unwrap();
                }
            });
        }
    });
    assert_eq!(pool.run(|tx| Ok(*tx.read(n)?)).unwrap(), 4000);
    let r = pool.transaction(TxOptions::default(), |tx| {
        let v = *tx.read(n)?;
        if v > 10 {
            return Err(AppError::TooBig(v));
        }
        Ok(())
    });
    assert!(matches!(r, Err(AppError::TooBig(4000))), "{r:?}");
    let r = pool.transaction(TxOptions::read_only(), |tx| -> Result<(), AppError> {
        *tx.write(n)? = 0;
        Ok(())
    });
    assert!(
        matches!(r, Err(AppError::Pool(Error::ReadOnlyTransaction))),
        "{r:?}"
    );
}

/// Read-only transactions cannot change the pool; isolation levels an engine lacks are
/// refused, those it has are accepted.
#[test]
fn transaction_options_are_enforced() {
    let d = tempfile::tempdir_in("/dev/shm").unwrap();
    let pool = pool_with(&d, "o", Config::default());
    let n: PPtr<u64> = pool.root().unwrap();
    let r = pool.run_with(TxOptions::read_only(), |tx| {
        *tx.write(n)? = 1;
        Ok(())
    });
    assert!(matches!(r, Err(Error::ReadOnlyTransaction)), "{r:?}");
    let r = pool.run_with(TxOptions::read_only(), |tx| tx.alloc(1u64));
    assert!(matches!(r, Err(Error::ReadOnlyTransaction)), "{r:?}");
    assert_eq!(
        pool.run_with(TxOptions::read_only(), |tx| Ok(*tx.read(n)?))
            .unwrap(),
        0
    );
    for level in [Isolation::Serializable, Isolation::Linearizable] {
        let r = pool.run_with(TxOptions::default().isolation(level), |tx| Ok(*tx.read(n)?));
        assert!(matches!(r, Err(Error::IsolationUnsupported(_))), "{r:?}");
    }
    pool.run_with(TxOptions::default().isolation(Isolation::Snapshot), |tx| {
        Ok(*tx.read(n)?)
    })
    .unwrap();
    let undo = pool_with(&d, "u", Config::default().engine(EngineId::Undo));
    let m: PPtr<u64> = undo.root().unwrap();
    for level in [
        Isolation::Snapshot,
        Isolation::Serializable,
        Isolation::Linearizable,
    ] {
        undo.run_with(TxOptions::default().isolation(level), |tx| Ok(*tx.read(m)?))
            .unwrap();
    }
}

/// Engine options are the engine's own: unknown keys and bad values are clear errors.
#[test]
fn engine_options_are_checked_by_the_engine() {
    let d = tempfile::tempdir_in("/dev/shm").unwrap();
    let bad = |name: &str, engine: EngineId, o: &str| {
        let r = Pool::create(
            d.path().join(name),
            Config::default()
                .size(16 << 20)
                .engine(engine)
                .engine_options(o.parse::<EngineOptions>().unwrap()),
        );
        match r {
            Err(Error::InvalidConfig(m)) => m,
            other => panic!("{engine} with `{o}`: {other:?}"),
        }
    };
    assert!(bad("a", EngineId::Pisces, "group_commit=0").contains("group_commit"));
    assert!(bad("b", EngineId::Pisces, "flush_diff=maybe").contains("flush_diff"));
    assert!(bad("c", EngineId::Undo, "group_commit=8").contains("undo"));
    assert!(
        !d.path().join("a").exists(),
        "a refused pool leaves no file"
    );
    assert!("novalue".parse::<EngineOptions>().is_err());
}

/// `open` takes the engine from the superblock; naming another one is refused.
#[test]
fn open_reads_the_engine_from_the_pool() {
    let d = tempfile::tempdir_in("/dev/shm").unwrap();
    let path = d.path().join("m");
    drop(pool_with(&d, "m", Config::default().engine(EngineId::Mvcc)));
    let pool = Pool::open(&path, Config::default()).unwrap();
    assert_eq!(pool.engine_id(), EngineId::Mvcc);
    drop(pool);
    let r = Pool::open(&path, Config::default().engine(EngineId::Undo));
    assert!(matches!(r, Err(Error::WrongEngine(_))), "{r:?}");
}

/// Two threads nesting two pools in opposite order, each outer transaction holding
/// what the other's inner one needs: both finish (an inner transaction gives its
/// conflict up to its outer one after a bounded number of retries, and the outer one
/// rolls back and retries), on every engine that lets a transaction of one pool write
/// inside another's (pmdk refuses two open transactions on one thread). Transactions
/// of two pools are not atomic together: an inner one commits on its own.
#[test]
fn two_pools_nested_in_opposite_order_both_finish() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, Barrier};
    let d = tempfile::tempdir_in("/dev/shm").unwrap();
    for &engine in EngineId::ALL
        .iter()
        .filter(|e| e.available() && e.name() != "pmdk")
    {
        let cfg = Config::default().engine(engine).max_threads(4);
        let a = pool_with(&d, &format!("{engine}-a"), cfg.clone());
        let b = pool_with(&d, &format!("{engine}-b"), cfg);
        let xa: PPtr<u64> = a.root().unwrap();
        let xb: PPtr<u64> = b.root().unwrap();
        // Both outer transactions hold their object before either inner one starts
        // (first attempts only).
        let barrier = Arc::new(Barrier::new(2));
        let (done_tx, done) = std::sync::mpsc::channel();
        for (outer, inner, xo, xi) in [
            (a.clone(), b.clone(), xa, xb),
            (b.clone(), a.clone(), xb, xa),
        ] {
            let (barrier, done_tx) = (barrier.clone(), done_tx.clone());
            std::thread::spawn(move || {
                let first = AtomicBool::new(true);
                let r = outer.run(|tx| {
                    *tx.write(xo)? += 1;
                    if first.swap(false, Ordering::Relaxed) {
                        barrier.wait();
                    }
                    inner.run(|t| {
                        *t.write(xi)? += 1;
                        Ok(())
                    })
                });
                let _ = done_tx.send(r);
            });
        }
        for _ in 0..2 {
            let r = done
                .recv_timeout(Duration::from_secs(30))
                .unwrap_or_else(|_| panic!("{engine}: nested transactions did not finish"));
            r.unwrap_or_else(|e| panic!("{engine}: {e}"));
        }
        // At least both increments of each (an inner transaction commits on its own
        // pool, so an outer one that retries after it runs it again).
        assert!(a.run(|tx| Ok(*tx.read(xa)?)).unwrap() >= 2, "{engine}");
        assert!(b.run(|tx| Ok(*tx.read(xb)?)).unwrap() >= 2, "{engine}");
    }
}

/// The root object can never be freed, on every engine (also pmdk's own pool format),
/// whether made by `root` or `root_bytes` (the C ABI's root).
#[test]
fn the_root_object_cannot_be_freed_on_any_engine() {
    let d = tempfile::tempdir_in("/dev/shm").unwrap();
    for &engine in EngineId::ALL.iter().filter(|e| e.available()) {
        for bytes in [false, true] {
            let pool = pool_with(
                &d,
                &format!("{engine}-{bytes}"),
                Config::default().engine(engine),
            );
            let root = if bytes {
                pool.root_bytes(24).unwrap()
            } else {
                PPtr::from_offset(pool.root::<[u64; 3]>().unwrap().offset())
            };
            let r = pool.run(|tx| tx.free(root));
            assert!(
                matches!(r, Err(Error::InvalidPointer(_))),
                "{engine}: {r:?}"
            );
            // Nothing handed out afterwards is the root.
            for _ in 0..3 {
                let p = pool.run(|tx| tx.alloc([0u64; 3])).unwrap();
                assert_ne!(p.offset(), root.offset(), "{engine}");
            }
            let again = if bytes {
                pool.root_bytes(24).unwrap()
            } else {
                PPtr::from_offset(pool.root::<[u64; 3]>().unwrap().offset())
            };
            assert_eq!(again, root, "{engine}");
        }
    }
}
