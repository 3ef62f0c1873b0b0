//! Explicit transactions (`ThreadHandle::begin` → accesses → commit / abort / drop) on
//! every engine of the build, by name: visibility, rollback, counters, conflicts,
//! nesting in any order, and panics.

use pisces::{
    BTreeMap, Config, EngineId, Error, HashMap, Isolation, MediumKind, PPtr, PString, PVec, Pool,
    TxOptions, TxStats,
};
use std::sync::mpsc::channel;
use std::time::Duration;

/// Every engine this build runs (also those with their own pool format), each on a
/// pool file of its own.
fn pools(dir: &tempfile::TempDir) -> Vec<(&'static str, Pool)> {
    EngineId::ALL
        .iter()
        .filter(|e| e.available())
        .map(|&e| {
            let name = e.name();
            let engine = EngineId::from_name(name).expect("engine by name");
            let pool = Pool::create(
                dir.path().join(format!("{name}.pool")),
                Config::default()
                    .size(32 << 20)
                    .medium(MediumKind::DRAM)
                    .engine(engine)
                    .max_threads(4)
                    .log_bytes_per_thread(256 << 10),
            )
            .unwrap_or_else(|e| panic!("{name}: {e}"));
            (name, pool)
        })
        .collect()
}

#[derive(Clone, Copy, pisces::Pod, pisces::Zeroable)]
#[repr(C)]
struct Root {
    n: u64,
    obj: PPtr<u64>,
    map: HashMap<u64, u64>,
}

/// Commit makes the accesses visible; abort and drop roll them back; the counters
/// count each outcome.
#[test]
fn commit_abort_and_drop_on_every_engine() {
    let dir = tempfile::tempdir_in("/dev/shm").unwrap();
    for (name, pool) in pools(&dir) {
        let root: PPtr<Root> = pool.root().unwrap();
        let mut h = pool.handle().unwrap();

        // Commit: a write, an allocation and a container.
        let mut t = h.begin(TxOptions::default()).unwrap();
        assert!(pool.in_transaction(), "{name}");
        let obj = t.alloc(41u64).unwrap();
        *t.write(obj).unwrap() += 1;
        let map = HashMap::<u64, u64>::fixed(&mut t, 8).unwrap();
        map.insert(&mut t, 7, 70).unwrap();
        *t.write(root).unwrap() = Root { n: 1, obj, map };
        // Own writes are visible before commit.
        assert_eq!(t.read(root).unwrap().n, 1, "{name}");
        assert_eq!(*t.read(obj).unwrap(), 42, "{name}");
        assert_eq!(map.get(&t, &7).unwrap(), Some(70), "{name}");
        t.commit().unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(!pool.in_transaction(), "{name}");
        let seen = h
            .run(|tx| {
                let r = *tx.read(root)?;
                Ok((r.n, *tx.read(r.obj)?, r.map.get(tx, &7)?))
            })
            .unwrap();
        assert_eq!(seen, (1, 42, Some(70)), "{name}");

        // Abort and drop: nothing of either is visible, the free neither.
        let mut t = h.begin(TxOptions::default()).unwrap();
        t.write(root).unwrap().n = 2;
        t.free(obj).unwrap();
        map.insert(&mut t, 8, 80).unwrap();
        t.abort();
        {
            let mut t = h.begin(TxOptions::default()).unwrap();
            t.write(root).unwrap().n = 3;
            let b = t.alloc_bytes(100).unwrap();
            t.write_bytes(b, 100).unwrap()[99] = 1;
        }
        let seen = h
            .run(|tx| {
                let r = *tx.read(root)?;
                Ok((r.n, *tx.read(r.obj)?, r.map.get(tx, &8)?))
            })
            .unwrap();
        assert_eq!(seen, (1, 42, None), "{name}: rolled back");

        // Read-only transactions refuse writes; deferred durability commits too.
        let mut t = h.begin(TxOptions::read_only()).unwrap();
        assert_eq!(t.read(root).unwrap().n, 1);
        assert!(
            matches!(t.write(root), Err(Error::ReadOnlyTransaction)),
            "{name}"
        );
        t.commit().unwrap();
        let lazy = TxOptions::default().durability(pisces::Durability::Deferred);
        let mut t = h.begin(lazy).unwrap();
        t.write(root).unwrap().n = 4;
        t.commit().unwrap();
        h.wait_durable().unwrap();
        assert_eq!(h.run(|tx| Ok(tx.read(root)?.n)).unwrap(), 4, "{name}");

        // Counters: three explicit commits and three `run`s; the abort and the drop
        // count as failed.
        let s: TxStats = h.stats();
        assert_eq!((s.commits, s.failed), (6, 2), "{name}: {s:?}");

        // An isolation level the engine does not offer is refused at begin.
        if !pool.engine_id().offers(Isolation::Linearizable) {
            let r = h.begin(TxOptions::default().isolation(Isolation::Linearizable));
            assert!(
                matches!(r, Err(Error::IsolationUnsupported(_))),
                "{name}: {r:?}"
            );
        }
        assert!(!pool.in_transaction(), "{name}");
    }
}

/// Strings, vectors and a map of them made and changed in an explicit transaction
/// without a closure (the same calls as in `run`), on every engine; an aborted change
/// of them is not seen.
#[test]
fn strings_and_vectors_in_an_explicit_transaction() {
    let dir = tempfile::tempdir_in("/dev/shm").unwrap();
    for (name, pool) in pools(&dir) {
        let root: PPtr<BTreeMap<PString, PVec<u64>>> = pool.root().unwrap();
        let mut h = pool.handle().unwrap();

        let mut t = h.begin(TxOptions::default()).unwrap();
        let map = BTreeMap::<PString, PVec<u64>>::new(&mut t).unwrap();
        let v = PVec::with_capacity(&mut t, 2).unwrap();
        v.extend_from_slice(&mut t, &[1, 2, 3]).unwrap();
        v.push(&mut t, 4).unwrap();
        map.insert_str(&mut t, "primes?", v).unwrap();
        let mut title = PString::new(&mut t, "draft").unwrap();
        title.set(&mut t, "final").unwrap();
        assert_eq!(title.get(&t).unwrap(), "final", "{name}");
        title.free(&mut t).unwrap();
        *t.write(root).unwrap() = map;
        t.commit().unwrap_or_else(|e| panic!("{name}: {e}"));

        let mut t = h.begin(TxOptions::default()).unwrap();
        let v = map.get(&t, "primes?").unwrap().expect("the vector");
        assert_eq!(v.pop(&mut t).unwrap(), Some(4), "{name}");
        v.set(&mut t, 0, 2).unwrap();
        t.abort();

        let seen = h
            .run(|tx| {
                let map = *tx.read(root)?;
                let v = map.get(tx, "primes?")?.expect("the vector");
                v.to_vec(tx)
            })
            .unwrap();
        assert_eq!(
            seen,
            [1, 2, 3, 4],
            "{name}: the aborted pop and set are not seen"
        );
    }
}

/// Two threads increment a counter in explicit transactions, beginning again after
/// each conflict: no increment is lost, and every conflict was a rolled-back attempt.
#[test]
fn concurrent_increments_with_retries_on_every_engine() {
    let dir = tempfile::tempdir_in("/dev/shm").unwrap();
    const PER_THREAD: u64 = 300;
    for (name, pool) in pools(&dir) {
        let n: PPtr<[u64; 2]> = pool.root().unwrap();
        let stats: Vec<TxStats> = std::thread::scope(|s| {
            let workers: Vec<_> = (0..2)
                .map(|i| {
                    let pool = &pool;
                    s.spawn(move || {
                        let mut h = pool.handle().unwrap();
                        for _ in 0..PER_THREAD {
                            loop {
                                let mut t = h.begin(TxOptions::default()).unwrap();
                                let r = (|| {
                                    let v = *t.read(n)?;
                                    let w = t.write(n)?;
                                    w[0] = v[0] + 1;
                                    w[1] = v[1] + i;
                                    Ok::<(), Error>(())
                                })();
                                match r.and_then(|()| t.commit()) {
                                    Ok(()) => break,
                                    Err(Error::Conflict) => std::thread::yield_now(),
                                    Err(e) => panic!("{name}: {e}"),
                                }
                            }
                        }
                        h.stats()
                    })
                })
                .collect();
            workers.into_iter().map(|w| w.join().unwrap()).collect()
        });
        let v = pool.run(|tx| Ok(*tx.read(n)?)).unwrap();
        assert_eq!(v, [2 * PER_THREAD, PER_THREAD], "{name}");
        for s in stats {
            assert_eq!(s.commits, PER_THREAD, "{name}: {s:?}");
            assert_eq!(s.failed, 0, "{name}: {s:?}");
        }
    }
}

/// An access that conflicted marks the attempt: even when the caller ignores the error
/// and goes on, commit rolls it back with `Conflict`.
#[test]
fn an_ignored_access_conflict_is_never_committed() {
    let dir = tempfile::tempdir_in("/dev/shm").unwrap();
    let mut hit = Vec::new();
    for (name, pool) in pools(&dir) {
        let root: PPtr<[u64; 2]> = pool.root().unwrap();
        let (locked_tx, locked) = channel();
        let (done_tx, done) = channel::<()>();
        let conflicted = std::thread::scope(|s| {
            let pool = &pool;
            s.spawn(move || {
                let mut h = pool.handle().unwrap();
                let mut t = h.begin(TxOptions::default()).unwrap();
                t.write(root).unwrap()[0] = 1;
                locked_tx.send(()).unwrap();
                // Engines whose writers wait for each other get their turn after this.
                let _ = done.recv_timeout(Duration::from_millis(500));
                t.commit().unwrap_or_else(|e| panic!("{name}: {e}"));
            });
            locked.recv().unwrap();
            let mut h = pool.handle().unwrap();
            let mut t = h.begin(TxOptions::default()).unwrap();
            let w = t.write(root).map(|w| w[1] = 5);
            let conflicted = matches!(w, Err(Error::Conflict));
            if conflicted {
                // Ignore it and write something else: must not commit.
                let _ = t.alloc(9u64);
                assert!(
                    matches!(t.commit(), Err(Error::Conflict)),
                    "{name}: a conflicted attempt committed"
                );
                assert_eq!(h.stats().conflicts, 1, "{name}");
            } else {
                drop(t);
            }
            let _ = done_tx.send(());
            conflicted
        });
        assert_eq!(
            pool.run(|tx| Ok(*tx.read(root)?)).unwrap(),
            [1, 0],
            "{name}"
        );
        if conflicted {
            hit.push(name);
        }
    }
    // Engines that lock at the write see the conflict there.
    for name in ["pisces", "undo"] {
        assert!(
            hit.contains(&name),
            "{name} did not conflict at the write: {hit:?}"
        );
    }
}

/// Nesting: a second transaction of the same pool on one thread is refused (never a
/// hang), whether closure or explicit, and registrations end in any order.
#[test]
fn nesting_is_refused_and_ends_in_any_order() {
    let dir = tempfile::tempdir_in("/dev/shm").unwrap();
    let all = pools(&dir);
    for (i, (name, pool)) in all.iter().enumerate() {
        let (other_name, other) = &all[(i + 1) % all.len()];
        let n: PPtr<u64> = pool.root().unwrap();
        let m: PPtr<u64> = other.root().unwrap();
        let (mut h1, mut h2) = (pool.handle().unwrap(), pool.handle().unwrap());
        let mut g = other.handle().unwrap();

        // Explicit inside explicit, closure inside explicit, explicit inside closure.
        let mut a = h1.begin(TxOptions::default()).unwrap();
        *a.write(n).unwrap() = 1;
        let r = h2.begin(TxOptions::default());
        assert!(matches!(r, Err(Error::NestedTransaction)), "{name}: {r:?}");
        drop(r);
        let r = pool.run(|tx| Ok(*tx.read(n)?));
        assert!(matches!(r, Err(Error::NestedTransaction)), "{name}: {r:?}");
        // Another pool is fine; end the first transaction before the second.
        let mut b = g.begin(TxOptions::default()).unwrap();
        *b.write(m).unwrap() = 2;
        a.commit().unwrap();
        assert!(!pool.in_transaction() && other.in_transaction(), "{name}");
        // The first pool is free again, the second still registered.
        assert_eq!(pool.run(|tx| Ok(*tx.read(n)?)).unwrap(), 1, "{name}");
        let r = other.run(|tx| Ok(*tx.read(m)?));
        assert!(
            matches!(r, Err(Error::NestedTransaction)),
            "{name}/{other_name}: {r:?}"
        );
        b.commit().unwrap();
        assert_eq!(other.run(|tx| Ok(*tx.read(m)?)).unwrap(), 2);

        let r = pool.run(|_| {
            let r = h1.begin(TxOptions::default()).map(|_| ());
            Ok(r)
        });
        assert!(
            matches!(r, Ok(Err(Error::NestedTransaction))),
            "{name}: {r:?}"
        );

        // An explicit transaction begun inside a closure of another pool may outlive
        // it; the closure's end must not end the explicit one's registration.
        let mut slot = None;
        let mut h1_ref = Some(&mut h1);
        other
            .run(|_| {
                if let Some(h) = h1_ref.take() {
                    slot = Some(h.begin(TxOptions::default())?);
                }
                Ok(())
            })
            .unwrap();
        assert!(pool.in_transaction() && !other.in_transaction(), "{name}");
        let r = pool.run(|tx| Ok(*tx.read(n)?));
        assert!(matches!(r, Err(Error::NestedTransaction)), "{name}: {r:?}");
        drop(slot);
        assert!(!pool.in_transaction(), "{name}");
        assert_eq!(pool.run(|tx| Ok(*tx.read(n)?)).unwrap(), 1, "{name}");
    }
}

/// A panic while an explicit transaction is open rolls it back and ends its
/// registration (unwinding drops it).
#[test]
fn a_panic_rolls_an_open_transaction_back() {
    let dir = tempfile::tempdir_in("/dev/shm").unwrap();
    for (name, pool) in pools(&dir) {
        let n: PPtr<u64> = pool.root().unwrap();
        let mut h = pool.handle().unwrap();
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let mut t = h.begin(TxOptions::default()).unwrap();
            *t.write(n).unwrap() = 5;
            panic!("user code panics mid-transaction");
        }));
        assert!(r.is_err());
        assert!(!pool.in_transaction(), "{name}");
        assert_eq!(h.run(|tx| Ok(*tx.read(n)?)).unwrap(), 0, "{name}");
        let mut t = h.begin(TxOptions::default()).unwrap();
        *t.write(n).unwrap() = 6;
        t.commit().unwrap();
        assert_eq!(pool.run(|tx| Ok(*tx.read(n)?)).unwrap(), 6, "{name}");
    }
}

/// A leaked explicit transaction (`mem::forget`) affects only its own handle, and only
/// until the handle is used again or dropped: it is rolled back then, and no other
/// pool, later pool or later transaction of the thread is refused.
#[test]
fn a_forgotten_transaction_ends_with_its_handle() {
    let dir = tempfile::tempdir_in("/dev/shm").unwrap();
    for (name, pool) in pools(&dir) {
        let n: PPtr<u64> = pool.root().unwrap();
        let mut h = pool.handle().unwrap();
        let mut t = h.begin(TxOptions::default()).unwrap();
        *t.write(n).unwrap() = 5;
        std::mem::forget(t);
        // The handle's next use rolls the leaked attempt back.
        assert_eq!(h.run(|tx| Ok(*tx.read(n)?)).unwrap(), 0, "{name}");
        assert!(!pool.in_transaction(), "{name}");
        assert_eq!(pool.run(|tx| Ok(*tx.read(n)?)).unwrap(), 0, "{name}");
        // So does its drop; and a new explicit transaction after a leaked one works.
        let mut t = h.begin(TxOptions::default()).unwrap();
        *t.write(n).unwrap() = 6;
        std::mem::forget(t);
        let mut t = h.begin(TxOptions::default()).unwrap();
        *t.write(n).unwrap() = 7;
        t.commit().unwrap();
        let mut t = h.begin(TxOptions::default()).unwrap();
        *t.write(n).unwrap() = 8;
        std::mem::forget(t);
        drop(h);
        assert_eq!(pool.run(|tx| Ok(*tx.read(n)?)).unwrap(), 7, "{name}");
    }
    // More leaked transactions (handles kept) than pools may nest on a thread: every
    // other pool, and pools opened later, same file or not, still run transactions.
    let cfg = |_: usize| {
        Config::default()
            .size(16 << 20)
            .medium(MediumKind::DRAM)
            .max_threads(2)
            .log_bytes_per_thread(64 << 10)
    };
    let mut kept = Vec::new();
    for i in 0..6 {
        let path = dir.path().join(format!("leak{i}.pool"));
        let pool = Pool::create(&path, cfg(i)).unwrap();
        let n: PPtr<u64> = pool.root().unwrap();
        let mut h = pool.handle().unwrap();
        let t = h.begin(TxOptions::read_only()).unwrap();
        assert_eq!(*t.read(n).unwrap(), 0);
        std::mem::forget(t);
        kept.push((pool, h));
    }
    for i in 0..6 {
        let path = dir.path().join(format!("later{i}.pool"));
        let pool = Pool::create(&path, cfg(i)).unwrap();
        let n: PPtr<u64> = pool.root().unwrap();
        pool.run(|tx| {
            *tx.write(n)? += 1;
            Ok(())
        })
        .unwrap();
        drop(pool);
        let pool = Pool::open(&path, cfg(i)).unwrap();
        assert_eq!(pool.run(|tx| Ok(*tx.read(n)?)).unwrap(), 1);
    }
    drop(kept);
}

/// A handle's snapshot (`ThreadHandle::read`, whose guard takes a short path on a
/// thread that runs no transaction) is refused wherever a transaction of its pool runs
/// or is open on the thread, and runs nested inside another pool's.
#[test]
fn a_handle_snapshot_is_refused_inside_its_pools_transactions() {
    let dir = tempfile::tempdir_in("/dev/shm").unwrap();
    let all = pools(&dir);
    for (i, (name, pool)) in all.iter().enumerate() {
        let (_, other) = &all[(i + 1) % all.len()];
        let n: PPtr<u64> = pool.root().unwrap();
        let m: PPtr<u64> = other.root().unwrap();
        let (mut h1, mut h2) = (pool.handle().unwrap(), pool.handle().unwrap());
        let mut g = other.handle().unwrap();

        // Inside a closure transaction of the pool, and the other way round.
        let r = pool.run(|_| Ok(h2.read(|tx| Ok(*tx.read(n)?))));
        assert!(
            matches!(r, Ok(Err(Error::NestedTransaction))),
            "{name}: {r:?}"
        );
        let r = h2.read(|_| Ok(pool.run(|tx| Ok(*tx.read(n)?))));
        assert!(
            matches!(r, Ok(Err(Error::NestedTransaction))),
            "{name}: {r:?}"
        );
        let r = h2.read(|_| Ok(h1.read(|tx| Ok(*tx.read(n)?))));
        assert!(
            matches!(r, Ok(Err(Error::NestedTransaction))),
            "{name}: {r:?}"
        );
        // Inside another pool's transaction: nested, not refused.
        let r = g.read(|_| Ok(h2.read(|tx| Ok(*tx.read(n)?))));
        assert!(matches!(r, Ok(Ok(_))), "{name}: {r:?}");

        // While an explicit transaction of the pool is open on this thread.
        let mut a = h1.begin(TxOptions::default()).unwrap();
        *a.write(n).unwrap() = 7;
        let r = h2.read(|tx| Ok(*tx.read(n)?));
        assert!(matches!(r, Err(Error::NestedTransaction)), "{name}: {r:?}");
        a.commit().unwrap();
        assert_eq!(h2.read(|tx| Ok(*tx.read(n)?)).unwrap(), 7, "{name}");

        // While one of another pool is open: nested, not refused.
        let mut b = g.begin(TxOptions::default()).unwrap();
        *b.write(m).unwrap() = 2;
        assert_eq!(h2.read(|tx| Ok(*tx.read(n)?)).unwrap(), 7, "{name}");
        b.commit().unwrap();

        // A leaked explicit transaction of the pool: refused until its handle ends it.
        std::mem::forget(h1.begin(TxOptions::default()).unwrap());
        let r = h2.read(|tx| Ok(*tx.read(n)?));
        assert!(matches!(r, Err(Error::NestedTransaction)), "{name}: {r:?}");
        assert_eq!(h1.read(|tx| Ok(*tx.read(n)?)).unwrap(), 7, "{name}");
        assert_eq!(h2.read(|tx| Ok(*tx.read(n)?)).unwrap(), 7, "{name}");
    }
}
