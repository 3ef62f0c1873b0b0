//! The count of copy-path reads (`TxStats::ro_locked_reads`): a read-only transaction
//! that meets another writer's lock counts it, and nothing else does.

use crate::engine::pisces::thread::READ_ONLY_COMMITS_BEFORE_WRITE_BACK;
use crate::{Config, PPtr, Pool, TxOptions};

fn pool(dir: &tempfile::TempDir) -> Pool {
    Pool::create(
        dir.path().join("locked.pool"),
        Config {
            size: 16 << 20,
            max_threads: 3,
            ..Config::default()
        },
    )
    .unwrap()
}

#[test]
fn read_only_reads_of_a_locked_object_are_counted() {
    let dir = tempfile::tempdir_in("/dev/shm").unwrap();
    let pool = pool(&dir);
    let mut setup = pool.handle().unwrap();
    let (x, y) = setup
        .run(|tx| Ok((tx.alloc(1u64)?, tx.alloc(2u64)?)))
        .unwrap();
    // A committed writer's objects stay locked (pointing at its copy) until its
    // write-back, which group commit defers; the handle writes back when dropped.
    drop(setup);
    let mut reader = pool.handle().unwrap();
    // Unlocked objects: the home path, not counted.
    let v = reader.run(|tx| Ok(*tx.read(x)? + *tx.read(y)?)).unwrap();
    assert_eq!(v, 3);
    assert_eq!(reader.stats().ro_locked_reads, 0);
    let mut writer = pool.handle().unwrap();
    let mut wtx = writer.begin(TxOptions::default()).unwrap();
    *wtx.write(x).unwrap() = 10;
    std::thread::scope(|s| {
        s.spawn(|| {
            // A read-only transaction meets the writer's lock on `x` and reads home.
            let v = reader.run(|tx| Ok(*tx.read(x)? + *tx.read(y)?)).unwrap();
            assert_eq!(v, 3, "the uncommitted write is not visible");
            assert_eq!(reader.stats().ro_locked_reads, 1);
            // An update transaction's reads of it are not counted (it conflicts on
            // its own write of `y` only if it writes `x`; it writes `y`).
            reader
                .run(|tx| {
                    let a = *tx.read(x)?;
                    *tx.write(y)? = a;
                    Ok(())
                })
                .unwrap();
            assert_eq!(reader.stats().ro_locked_reads, 1);
        });
    });
    wtx.commit().unwrap();
    // A handle's count starts at its creation, although the thread state is reused.
    drop(reader);
    let fresh = pool.handle().unwrap();
    assert_eq!(fresh.stats().ro_locked_reads, 0);
    let got: (u64, u64) = pool.run(|tx| Ok((*tx.read(x)?, *tx.read(y)?))).unwrap();
    assert_eq!(got, (10, 1));
}

#[test]
fn other_engines_count_nothing() {
    let dir = tempfile::tempdir_in("/dev/shm").unwrap();
    let pool = Pool::create(
        dir.path().join("undo.pool"),
        Config {
            size: 16 << 20,
            engine: Some(crate::EngineId::Undo),
            ..Config::default()
        },
    )
    .unwrap();
    let x: PPtr<u64> = pool.run(|tx| tx.alloc(1u64)).unwrap();
    let mut h = pool.handle().unwrap();
    h.run(|tx| Ok(*tx.read(x)?)).unwrap();
    assert_eq!(h.stats().ro_locked_reads, 0);
}

/// A slot's own batch of committed transactions (fewer than a group's worth) is
/// written back by its `READ_ONLY_COMMITS_BEFORE_WRITE_BACK`th read-only commit in a
/// row, once no snapshot needs it: reads after a burst of updates are not left on the
/// copy path until the next updates fill the batch. Fewer read-only commits between
/// updates leave the batch to fill (group commit keeps its groups).
#[test]
fn read_only_commits_write_back_their_slots_batch() {
    let k = READ_ONLY_COMMITS_BEFORE_WRITE_BACK as u64;
    let dir = tempfile::tempdir_in("/dev/shm").unwrap();
    let pool = pool(&dir);
    let mut h = pool.handle().unwrap();
    let (x, y) = h.run(|tx| Ok((tx.alloc(1u64)?, tx.alloc(2u64)?))).unwrap();
    let read_x = |h: &mut crate::ThreadHandle| h.run(|tx| Ok(*tx.read(x)?)).unwrap();
    let locked = |h: &crate::ThreadHandle| h.stats().ro_locked_reads;
    // Updates with fewer read-only commits than the threshold between them: the
    // objects stay locked throughout (both reads of each read-only pair counted).
    for v in 10..13u64 {
        h.run(|tx| {
            *tx.write(x)? = v;
            Ok(())
        })
        .unwrap();
        let before = locked(&h);
        for _ in 0..k - 1 {
            assert_eq!(read_x(&mut h), v);
        }
        assert_eq!(
            locked(&h) - before,
            k - 1,
            "the batch was written back before the threshold"
        );
    }
    // Then only reads: the threshold's commit writes the batch back, and the reads
    // after it take the home path.
    for _ in 0..k {
        read_x(&mut h);
    }
    let after = locked(&h);
    for _ in 0..10 {
        assert_eq!(h.run(|tx| Ok(*tx.read(x)? + *tx.read(y)?)).unwrap(), 14);
    }
    assert_eq!(
        locked(&h),
        after,
        "the later reads found the objects written back"
    );
    // A running reader's snapshot holds the write-back back: the reads stay correct
    // on the copy path meanwhile, and the threshold's commit after it ends writes
    // back.
    let (opened, open) = std::sync::mpsc::channel();
    let (release, released) = std::sync::mpsc::channel::<()>();
    std::thread::scope(|s| {
        let pool = &pool;
        s.spawn(move || {
            let mut old = pool.handle().unwrap();
            let otx = old.begin(TxOptions::default()).unwrap();
            assert_eq!(*otx.read(x).unwrap(), 12);
            opened.send(()).unwrap();
            released.recv().unwrap();
            assert_eq!(
                *otx.read(x).unwrap(),
                12,
                "the old snapshot keeps its version"
            );
            otx.commit().unwrap();
        });
        open.recv().unwrap();
        h.run(|tx| {
            *tx.write(x)? = 20;
            Ok(())
        })
        .unwrap();
        let before = locked(&h);
        for _ in 0..2 * k {
            assert_eq!(read_x(&mut h), 20);
        }
        assert_eq!(locked(&h) - before, 2 * k, "held back by the open snapshot");
        release.send(()).unwrap();
    });
    for _ in 0..k {
        assert_eq!(read_x(&mut h), 20);
    }
    let before = locked(&h);
    assert_eq!(read_x(&mut h), 20);
    assert_eq!(locked(&h), before, "written back after the reader ended");
}
