//! Misuse and damage that must be clear errors: double frees, forged pointers, the root
//! slot, space freed while the heap is full. Every engine of `common::all_engines`.

mod common;

use pisces::tools::ROOT_SLOT_OFFSET;
use pisces::{EngineOptions, Error, PPtr, Pool};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

fn invalid<T: std::fmt::Debug>(r: pisces::Result<T>, what: &str) {
    match r {
        Err(Error::InvalidPointer(_)) => {}
        other => panic!("{what}: expected InvalidPointer, got {other:?}"),
    }
}

#[test]
fn double_free_across_transactions_is_an_error() {
    for (engine, opts) in common::all_engines() {
        let pool = common::mem_pool_on(engine, 16 << 20, 2, opts.clone());
        let mut h = pool.handle().unwrap();
        let x = h.run(|tx| tx.alloc([7u64; 6])).unwrap();
        h.run(|tx| tx.free(x)).unwrap();
        // The second free, in a later transaction (the first one's write-back may still
        // be pending in a group-commit batch).
        invalid(h.run(|tx| tx.free(x)), &format!("{engine:?} second free"));
        // The allocator is intact: two allocations are two blocks.
        let (a, b) = h
            .run(|tx| Ok((tx.alloc([1u64; 6])?, tx.alloc([2u64; 6])?)))
            .unwrap();
        assert_ne!(a, b, "{engine:?}: one block handed out twice");
        let (a2, b2) = h
            .run(|tx| Ok((tx.alloc([3u64; 6])?, tx.alloc([4u64; 6])?)))
            .unwrap();
        let all = [a, b, a2, b2];
        for i in 0..4 {
            for j in i + 1..4 {
                assert_ne!(all[i], all[j], "{engine:?}: one block handed out twice");
            }
        }
        assert_eq!(h.run(|tx| Ok(*tx.read(a)?)).unwrap(), [1u64; 6]);
        assert_eq!(h.run(|tx| Ok(*tx.read(b)?)).unwrap(), [2u64; 6]);
    }
}

#[test]
fn never_allocated_blocks_are_not_objects() {
    for (engine, opts) in common::all_engines() {
        let pool = common::mem_pool_on(engine, 16 << 20, 2, opts.clone());
        let mut h = pool.handle().unwrap();
        let x: PPtr<[u64; 6]> = h.run(|tx| tx.alloc([7u64; 6])).unwrap();
        // Blocks of the same class far after `x` in its slab: geometry fine, never
        // allocated.
        let size = 64; // the class of a 48-byte payload (header included)
        let forged: PPtr<[u64; 6]> = PPtr::from_offset(x.offset() + 40 * size);
        invalid(h.run(|tx| tx.free(forged)), &format!("{engine:?} free"));
        invalid(
            h.run(|tx| tx.read(forged).copied()),
            &format!("{engine:?} read"),
        );
        invalid(
            h.run(|tx| tx.write(forged).map(|v| v[0] = 1)),
            &format!("{engine:?} write"),
        );
        // A freed object is gone for reads and writes too (after its write-back).
        h.run(|tx| tx.free(x)).unwrap();
        pool.sync().unwrap();
        invalid(
            h.run(|tx| tx.read(x).copied()),
            &format!("{engine:?} read after free"),
        );
        // Objects allocated by the running transaction are usable before commit.
        h.run(|tx| {
            let n = tx.alloc([5u64; 6])?;
            assert_eq!(*tx.read(n)?, [5u64; 6]);
            tx.write(n)?[1] = 9;
            assert_eq!(tx.read(n)?[1], 9);
            let m = tx.alloc(3u64)?;
            tx.free(m)?;
            Ok(())
        })
        .unwrap();
    }
}

/// A snapshot taken before a free still reads the object, whichever engine.
#[test]
fn snapshot_reads_an_object_freed_after_it() {
    for (engine, opts) in common::all_engines() {
        let pool = common::mem_pool_on(engine, 16 << 20, 3, opts.clone());
        let x: PPtr<u64> = pool.run(|tx| tx.alloc(41u64)).unwrap();
        let root: PPtr<PPtr<u64>> = pool.root().unwrap();
        pool.run(|tx| {
            *tx.write(root)? = x;
            Ok(())
        })
        .unwrap();
        let freeing = Arc::new(AtomicBool::new(false));
        let (p2, f2) = (pool.clone(), freeing.clone());
        let mut h = pool.handle().unwrap();
        let mut first = true;
        let got = h.run(|tx| {
            let v1 = *tx.read(x)?;
            if first {
                first = false;
                let (p2, f2) = (p2.clone(), f2.clone());
                std::thread::spawn(move || {
                    p2.run(|tx| {
                        f2.store(true, Ordering::SeqCst);
                        *tx.write(root)? = PPtr::null();
                        tx.free(x)
                    })
                    .unwrap();
                });
                while !freeing.load(Ordering::SeqCst) {
                    std::thread::yield_now();
                }
                // Let the freeing transaction commit (or wait for us, or retry).
                std::thread::sleep(Duration::from_millis(150));
            }
            let v2 = *tx.read(x)?;
            Ok((v1, v2))
        });
        match got {
            // One attempt saw the object throughout (snapshot and locking engines).
            Ok(v) => assert_eq!(v, (41, 41), "{engine:?}"),
            // An optimistic engine (sp3) aborts the attempt whose read the free
            // overwrote; the retry starts after the free, so the object is gone.
            Err(Error::InvalidPointer(_)) if h.stats().conflicts > 0 => {}
            Err(e) => panic!("{engine:?}: {e}"),
        }
        drop(h);
        // Wait for the free to be committed, then the object is gone.
        let t0 = std::time::Instant::now();
        while !pool.run(|tx| Ok(tx.read(root)?.is_null())).unwrap() {
            assert!(
                t0.elapsed() < Duration::from_secs(10),
                "{engine:?}: free stuck"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        pool.sync().unwrap();
        invalid(pool.run(|tx| tx.read(x).copied()), &format!("{engine:?}"));
    }
}

#[test]
fn the_root_slot_is_not_reachable_by_forged_pointers() {
    let slot = (ROOT_SLOT_OFFSET + 8) as u64;
    for (engine, opts) in common::all_engines() {
        let pool = common::mem_pool_on(engine, 16 << 20, 2, opts.clone());
        let root: PPtr<[u64; 2]> = pool.root().unwrap();
        pool.run(|tx| {
            *tx.write(root)? = [3, 4];
            Ok(())
        })
        .unwrap();
        for off in [slot, slot + 8] {
            let p: PPtr<u64> = PPtr::from_offset(off);
            invalid(
                pool.run(|tx| tx.read(p).copied()),
                &format!("{engine:?} read {off:#x}"),
            );
            invalid(
                pool.run(|tx| tx.write(p).map(|v| *v = 12345)),
                &format!("{engine:?} write {off:#x}"),
            );
            invalid(
                pool.run(|tx| tx.free(p)),
                &format!("{engine:?} free {off:#x}"),
            );
        }
        // Pool::root still works, and still names the same object.
        assert_eq!(pool.root::<[u64; 2]>().unwrap(), root, "{engine:?}");
        assert_eq!(pool.run(|tx| Ok(*tx.read(root)?)).unwrap(), [3, 4]);
    }
}

#[test]
fn the_root_object_cannot_be_freed() {
    for (engine, opts) in common::all_engines() {
        let pool = common::mem_pool_on(engine, 16 << 20, 2, opts.clone());
        let root: PPtr<[u64; 2]> = pool.root().unwrap();
        invalid(pool.run(|tx| tx.free(root)), &format!("{engine:?}"));
        pool.sync().unwrap();
        // Not reused: new objects are other blocks, and root() still gives it.
        let n = pool.run(|tx| tx.alloc([9u64; 2])).unwrap();
        assert_ne!(n, root);
        assert_eq!(pool.root::<[u64; 2]>().unwrap(), root);
        assert_eq!(pool.run(|tx| Ok(*tx.read(root)?)).unwrap(), [0, 0]);
        // Also once the root slot is written back (read from home, not from a copy).
        invalid(
            pool.run(|tx| tx.free(root)),
            &format!("{engine:?} after sync"),
        );
    }
}

/// Fill the heap with `obj`-sized objects, free them all, allocate again without
/// `sync`: the space freed by committed transactions must be found.
fn refill_after_out_of_space(pool: &Pool, free_elsewhere: bool) {
    let mut objs: Vec<PPtr<[u64; 128]>> = Vec::new();
    loop {
        match pool.run(|tx| {
            let mut v = Vec::new();
            for _ in 0..16 {
                v.push(tx.alloc([1u64; 128])?);
            }
            Ok(v)
        }) {
            Ok(v) => objs.extend(v),
            Err(Error::OutOfSpace { .. }) => break,
            Err(e) => panic!("filling: {e:?}"),
        }
    }
    // Single allocations until the last block is gone.
    while let Ok(p) = pool.run(|tx| tx.alloc([1u64; 128])) {
        objs.push(p);
    }
    assert!(objs.len() > 100);
    let free_all = |h: &mut pisces::ThreadHandle, objs: &[PPtr<[u64; 128]>]| {
        for chunk in objs.chunks(8) {
            h.run(|tx| chunk.iter().try_for_each(|&p| tx.free(p)))
                .unwrap();
        }
    };
    if free_elsewhere {
        // Another thread frees, and keeps its handle (its batch stays pending).
        let p2 = pool.clone();
        let objs2 = objs.clone();
        let (tx_done, rx_done) = std::sync::mpsc::channel();
        let (tx_go, rx_go) = std::sync::mpsc::channel::<()>();
        let t = std::thread::spawn(move || {
            let mut h = p2.handle().unwrap();
            free_all(&mut h, &objs2);
            tx_done.send(()).unwrap();
            rx_go.recv().unwrap();
        });
        rx_done.recv().unwrap();
        for i in 0..objs.len() {
            pool.run(|tx| tx.alloc([2u64; 128])).unwrap_or_else(|e| {
                panic!(
                    "{:?}: allocation {i} of {} after the frees: {e:?}",
                    pool.engine_id(),
                    objs.len()
                )
            });
        }
        tx_go.send(()).unwrap();
        t.join().unwrap();
    } else {
        let mut h = pool.handle().unwrap();
        free_all(&mut h, &objs);
        for i in 0..objs.len() {
            h.run(|tx| tx.alloc([2u64; 128]))
                .unwrap_or_else(|e| panic!("allocation {i} after the frees: {e:?}"));
        }
    }
}

#[test]
fn space_freed_after_out_of_space_is_reusable_without_sync() {
    for (engine, opts) in common::all_engines() {
        for elsewhere in [false, true] {
            let pool = common::mem_pool_on(engine, 4 << 20, 3, opts.clone());
            refill_after_out_of_space(&pool, elsewhere);
        }
    }
    // Group commit larger than the number of freeing transactions.
    let opts = EngineOptions::new().set("group_commit", 64);
    let pool = common::mem_pool(4 << 20, 3, opts.clone());
    refill_after_out_of_space(&pool, true);
}
