//! Protocol paths of the Pisces engine through the public API: a pool file reopened,
//! invalid pointers, a full heap, a transaction too large for its log, a panicking
//! transaction's locks, the bound on thread slots, the grace period of write-back,
//! updates that change nothing on the file medium's page cache.

use crate::common::{self, mem_pool};
use pisces::{Config, EngineOptions, Error, PPtr, Pool};
use std::sync::Arc;

#[test]
fn write_then_read_and_reopen_from_file() {
    let dir = tempfile::tempdir_in("/dev/shm").unwrap();
    let path = dir.path().join("p.pool");
    let cfg = Config::default().size(32 << 20);
    {
        let pool = Pool::create(&path, cfg.clone()).unwrap();
        let root: PPtr<[u64; 4]> = pool.root().unwrap();
        pool.run(|tx| {
            tx.write(root)?[2] = 77;
            Ok(())
        })
        .unwrap();
        // Own writes are visible inside the transaction, before commit.
        pool.run(|tx| {
            tx.write(root)?[0] = 5;
            assert_eq!(tx.read(root)?[0], 5);
            Ok(())
        })
        .unwrap();
    }
    let pool = Pool::open(&path, cfg).unwrap();
    let root: PPtr<[u64; 4]> = pool.root().unwrap();
    assert_eq!(pool.run(|tx| Ok(*tx.read(root)?)).unwrap(), [5, 0, 77, 0]);
    // The root's type is checked by size.
    assert!(matches!(pool.root::<u64>(), Err(Error::InvalidPointer(_))));
}

#[test]
fn invalid_pointers_are_errors_not_crashes() {
    let pool = mem_pool(8 << 20, 2, EngineOptions::default());
    for off in [0u64, 1, 8, 4096, 12345, 1 << 40, u64::MAX - 7] {
        let p: PPtr<u64> = PPtr::from_offset(off);
        assert!(
            matches!(
                pool.run(|tx| Ok(*tx.read(p)?)),
                Err(Error::InvalidPointer(_))
            ),
            "{off}"
        );
        assert!(
            matches!(pool.run(|tx| tx.free(p)), Err(Error::InvalidPointer(_))),
            "{off}"
        );
    }
    // A pointer to a small object read as a bigger type.
    let small = pool.run(|tx| tx.alloc(1u64)).unwrap();
    let big: PPtr<[u64; 64]> = small.cast();
    assert!(matches!(
        pool.run(|tx| Ok(tx.read(big)?[0])),
        Err(Error::InvalidPointer(_))
    ));
    // Double free inside one transaction.
    assert!(matches!(
        pool.run(|tx| {
            tx.free(small)?;
            tx.free(small)
        }),
        Err(Error::InvalidPointer(_))
    ));
}

#[test]
fn out_of_space_is_an_error_and_space_comes_back() {
    let pool = mem_pool(2 << 20, 1, EngineOptions::default());
    let mut h = pool.handle().unwrap();
    let mut ptrs = Vec::new();
    let err = loop {
        match h.run(|tx| tx.alloc([0u64; 500])) {
            Ok(p) => ptrs.push(p),
            Err(e) => break e,
        }
        assert!(ptrs.len() < 100_000);
    };
    assert!(matches!(err, Error::OutOfSpace { .. }), "{err}");
    assert!(ptrs.len() > 10);
    for p in ptrs.drain(..) {
        h.run(|tx| tx.free(p)).unwrap();
    }
    drop(h);
    let mut h = pool.handle().unwrap();
    h.run(|tx| tx.alloc([0u64; 500])).unwrap();
}

#[test]
fn transaction_too_large_for_the_log_is_a_clear_error() {
    let pool = mem_pool(16 << 20, 1, EngineOptions::default());
    let r = pool.run(|tx| {
        for _ in 0..400 {
            tx.alloc([7u64; 128])?;
        }
        Ok(())
    });
    assert!(matches!(r, Err(Error::TooLargeForLog(_))), "{r:?}");
    // The pool is still usable.
    let root: PPtr<u64> = pool.root().unwrap();
    pool.run(|tx| {
        *tx.write(root)? = 1;
        Ok(())
    })
    .unwrap();
}

#[test]
fn a_panicking_transaction_releases_its_locks() {
    let pool = mem_pool(8 << 20, 2, EngineOptions::default());
    let root: PPtr<u64> = pool.root().unwrap();
    let p2 = pool.clone();
    let r = std::thread::spawn(move || {
        p2.run(|tx| -> pisces::Result<()> {
            *tx.write(root)? = 3;
            panic!("user code panicked");
        })
    })
    .join();
    assert!(r.is_err());
    // Not blocked by a leftover lock, and the write did not happen.
    pool.run(|tx| {
        *tx.write(root)? += 1;
        Ok(())
    })
    .unwrap();
    assert_eq!(pool.run(|tx| Ok(*tx.read(root)?)).unwrap(), 1);
    let _ = Arc::new(());
}

#[test]
fn thread_slots_are_bounded() {
    let pool = mem_pool(8 << 20, 2, EngineOptions::default());
    let a = pool.handle().unwrap();
    let b = pool.handle().unwrap();
    assert!(matches!(pool.handle(), Err(Error::TooManyThreads(2))));
    drop(a);
    let _c = pool.handle().unwrap();
    drop(b);
}

/// The grace period (lines 52-54): a write-back waits for a reader whose snapshot is
/// older than the writer's commit, so the reader never sees half of the transfer;
/// whether the reader is a transaction of `run` or a snapshot (`ThreadHandle::read`,
/// which begins without an attempt and announces itself in the slot's clock alone).
#[test]
fn write_back_waits_for_older_snapshots() {
    let patience = std::time::Duration::from_millis(300);
    for snapshot in [false, true] {
        let (sum, commit_took) = common::read_skew_under_write_back(patience, snapshot);
        assert_eq!(
            sum, 200,
            "read skew (snapshot: {snapshot}): the reader saw half a transfer"
        );
        assert!(
            commit_took >= patience / 2,
            "snapshot: {snapshot}: the writer's commit returned in {commit_took:?}, without waiting for the reader"
        );
    }
}

/// A snapshot that ends without committing leaves the slot's clock: after a snapshot
/// the closure aborted, and after one that asked for a retry once, a writer on
/// another handle commits and its write-back (which waits for every older reader)
/// finishes while the snapshot's handle stays idle, and that handle then runs an
/// update of its own. A snapshot whose abort left its clock entry would hold every
/// later write-back until its handle's next transaction.
#[test]
fn an_ended_snapshot_holds_back_no_write_back() {
    let pool = Arc::new(mem_pool(
        8 << 20,
        2,
        EngineOptions::new().set("group_commit", 1),
    ));
    let root: PPtr<u64> = pool.root().unwrap();
    // Three commits from another handle, each written back after its grace period
    // (group commit 1), within 20 s.
    let commit_three = |first: u64| {
        let (done_tx, done) = std::sync::mpsc::channel();
        let p = pool.clone();
        std::thread::spawn(move || {
            let mut w = p.handle().unwrap();
            for i in first..first + 3 {
                w.run(|tx| {
                    *tx.write(root)? = i;
                    Ok(())
                })
                .unwrap();
            }
            // Its slot back before the next call takes one (the pool has two).
            drop(w);
            let _ = done_tx.send(());
        });
        done.recv_timeout(std::time::Duration::from_secs(20))
            .expect("a write-back waited for a snapshot that had ended");
    };
    let mut h = pool.handle().unwrap();
    let r = h.read(|tx| {
        let _ = *tx.read(root)?;
        Err::<(), _>(tx.abort("no"))
    });
    assert!(matches!(r, Err(Error::UserAbort(_))), "{r:?}");
    commit_three(1);
    let mut asked = false;
    let v = h
        .read(|tx| {
            if !std::mem::replace(&mut asked, true) {
                return Err(tx.retry());
            }
            Ok(*tx.read(root)?)
        })
        .unwrap();
    assert_eq!(v, 3);
    assert_eq!(h.stats().conflicts, 1);
    commit_three(4);
    h.run(|tx| {
        *tx.write(root)? += 1;
        Ok(())
    })
    .unwrap();
    assert_eq!(h.read(|tx| Ok(*tx.read(root)?)).unwrap(), 7);
}

/// On the file medium's page cache (home written back lazily, made durable when the
/// log needs the space), updates that change nothing — a value written over itself,
/// whose records carry no entry and whose write-backs write no home range — go on
/// far past the log's capacity: their write-backs release their log space like any
/// other's. (They once held the recycle watermark until some later update wrote
/// something, and a stream of them filled the log and spun forever.)
#[test]
fn updates_that_change_nothing_keep_the_log_moving() {
    use pisces_verify::sim::{SimConfig, SimMedium};
    use std::sync::atomic::{AtomicBool, Ordering};
    let sim_cfg = SimConfig {
        domain: pisces::PersistenceDomain::PageCache,
        ..SimConfig::default()
    };
    let sim = Arc::new(SimMedium::new(4 << 20, sim_cfg).unwrap());
    let cfg = Config::default()
        .size(4 << 20)
        .engine(pisces::EngineId::Pisces)
        .max_threads(2)
        .log_bytes_per_thread(64 << 10);
    let pool = Arc::new(Pool::create_on(sim, cfg).unwrap());
    let root: PPtr<u64> = pool.root().unwrap();
    let done = Arc::new(AtomicBool::new(false));
    let (p, d) = (pool.clone(), done.clone());
    // A 64 KiB log holds about a thousand empty records: five thousand go around it
    // five times.
    std::thread::spawn(move || {
        let mut h = p.handle().unwrap();
        for _ in 0..5000 {
            h.run(|tx| {
                *tx.write(root)? = 0;
                Ok(())
            })
            .unwrap();
        }
        // Release: pairs with the Acquire below (nothing else to publish).
        d.store(true, Ordering::Release);
    });
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !done.load(Ordering::Acquire) {
        assert!(
            std::time::Instant::now() < deadline,
            "5,000 updates that change nothing did not finish in 60 s: the log filled"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}
