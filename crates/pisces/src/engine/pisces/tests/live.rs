//! The live and freed markers in header words (`shared::LIVE`): what the read fast path
//! accepts, across frees, rollbacks and runs; header words left by old runs that are
//! never followed as locks (white-box: they look at and forge header words).

use crate::engine::kit::cc::header_word::tag_of;
use crate::heap::superblock::Superblock;
use crate::{Config, Error, PPtr, Pool};

fn cfg() -> Config {
    Config {
        size: 16 << 20,
        max_threads: 2,
        log_bytes_per_thread: 64 << 10,
        ..Config::default()
    }
}

/// The header word of the object at `p`.
fn header_word<T>(pool: &Pool, p: PPtr<T>) -> u64 {
    let heap = pool.heap().unwrap();
    heap.atomic_u64(p.offset() as usize - 8)
        .load(std::sync::atomic::Ordering::Acquire)
}

fn live(pool: &Pool) -> u64 {
    tag_of(pool.heap().unwrap().generation()) | crate::engine::pisces::shared::LIVE
}

fn freed(pool: &Pool) -> u64 {
    tag_of(pool.heap().unwrap().generation()) | crate::engine::pisces::shared::FREED
}

fn is_invalid<T: std::fmt::Debug>(r: crate::Result<T>) -> bool {
    matches!(r, Err(Error::InvalidPointer(_)))
}

/// A freed object is refused (`InvalidPointer`) although its header word is the one
/// load the fast path makes: the write-back that publishes the free stores the freed
/// marker. Returns whether the read of the freed object was refused.
fn freed_object_is_refused() -> bool {
    let dir = tempfile::tempdir_in("/dev/shm").unwrap();
    let pool = Pool::create(dir.path().join("freed.pool"), cfg()).unwrap();
    let x = pool.run(|tx| tx.alloc(7u64)).unwrap();
    pool.sync().unwrap();
    assert_eq!(header_word(&pool, x), live(&pool), "a new object is live");
    assert_eq!(pool.run(|tx| Ok(*tx.read(x)?)).unwrap(), 7);
    pool.run(|tx| tx.free(x)).unwrap();
    pool.sync().unwrap(); // the group-commit batch is written back
    let r = pool.run(|tx| Ok(*tx.read(x)?));
    if is_invalid(r) {
        assert_eq!(header_word(&pool, x), freed(&pool));
        true
    } else {
        false
    }
}

#[test]
fn freed_objects_are_refused_by_the_read_fast_path() {
    assert!(freed_object_is_refused());
}

/// Mutation evidence: with the free leaving the live marker, the fast path accepts the
/// freed object.
#[cfg(feature = "mutation")]
#[test]
fn the_freed_marker_is_needed() {
    let sc = crate::mutation::Scenario::setup();
    // SAFETY: a mutation test: the run exists to show the removed step matters, and its
    // outcome is read only as that evidence (see `pisces::mutation::Scenario::set`).
    unsafe { sc.set(Some(&super::super::thread::FREED_STAYS_LIVE)) };
    assert!(!freed_object_is_refused(), "the mutation went unnoticed");
}

/// A rollback gives the header word back as it was: a block allocated by an aborted
/// transaction is not live (refused), a written object stays live.
#[test]
fn rollback_restores_the_header_word() {
    let dir = tempfile::tempdir_in("/dev/shm").unwrap();
    let pool = Pool::create(dir.path().join("rollback.pool"), cfg()).unwrap();
    let x = pool.run(|tx| tx.alloc(1u64)).unwrap();
    pool.sync().unwrap();
    let mut lost = PPtr::<u64>::from_offset(0);
    let r: crate::Result<()> = pool.run(|tx| {
        lost = tx.alloc(2u64)?;
        *tx.write(x)? = 3;
        Err(tx.abort("no"))
    });
    assert!(matches!(r, Err(Error::UserAbort(_))));
    assert_eq!(header_word(&pool, x), live(&pool));
    assert_ne!(header_word(&pool, lost), live(&pool));
    assert!(is_invalid(pool.run(|tx| Ok(*tx.read(lost)?))));
    assert_eq!(pool.run(|tx| Ok(*tx.read(x)?)).unwrap(), 1);
}

/// Objects of an earlier run carry its tag: the first read (the engine's, through the
/// allocation bitmap) marks them live in this run; an object freed in the earlier run
/// stays refused, and one freed in this run after being marked is refused too.
#[test]
fn objects_of_an_earlier_run_are_marked_live_on_first_read() {
    let dir = tempfile::tempdir_in("/dev/shm").unwrap();
    let path = dir.path().join("runs.pool");
    let (x, y) = {
        let pool = Pool::create(&path, cfg()).unwrap();
        let x = pool.run(|tx| tx.alloc(5u64)).unwrap();
        let y = pool.run(|tx| tx.alloc(6u64)).unwrap();
        pool.run(|tx| tx.free(y)).unwrap();
        (x, y)
    };
    let pool = Pool::open(&path, cfg()).unwrap();
    assert_ne!(header_word(&pool, x), live(&pool), "an earlier run's word");
    assert_eq!(pool.run(|tx| Ok(*tx.read(x)?)).unwrap(), 5);
    assert_eq!(header_word(&pool, x), live(&pool), "marked by the read");
    assert_eq!(pool.run(|tx| Ok(*tx.read(x)?)).unwrap(), 5);
    assert!(is_invalid(pool.run(|tx| Ok(*tx.read(y)?))));
    assert_ne!(header_word(&pool, y), live(&pool));
    pool.run(|tx| tx.free(x)).unwrap();
    pool.sync().unwrap();
    assert!(is_invalid(pool.run(|tx| Ok(*tx.read(x)?))));
}

/// A write through a stale pointer, to an object whose free is committed but still
/// waiting in this thread's group-commit batch: the pointer check passes (the
/// allocation bit is still set), the lock writes the batch back first (the free is
/// published, the header word becomes the freed marker) and then takes the lock from
/// the freed marker; the check after the lock must refuse the write. Returns whether
/// it was refused.
fn stale_write_after_pending_free_is_refused() -> bool {
    let dir = tempfile::tempdir_in("/dev/shm").unwrap();
    let pool = Pool::create(dir.path().join("stale.pool"), cfg()).unwrap();
    let mut h = pool.handle().unwrap();
    let x = h.run(|tx| tx.alloc(7u64)).unwrap();
    let y = h.run(|tx| tx.alloc(8u64)).unwrap();
    pool.sync().unwrap();
    assert_eq!(header_word(&pool, x), live(&pool));
    h.run(|tx| tx.free(x)).unwrap();
    // The free is committed, not written back: the object is still locked by its copy.
    assert_ne!(
        header_word(&pool, x),
        freed(&pool),
        "the batch was not pending"
    );
    let r = h.run(|tx| {
        *tx.write(y)? = 9;
        *tx.write(x)? = 5;
        Ok(())
    });
    let refused = is_invalid(r);
    if refused {
        // The refused lock was given back (the freed marker), and the transaction's
        // other write rolled back.
        assert_eq!(header_word(&pool, x), freed(&pool));
        assert_eq!(h.run(|tx| Ok(*tx.read(y)?)).unwrap(), 8);
        // Objects whose lock came from the live marker still take writes.
        h.run(|tx| {
            *tx.write(y)? = 10;
            Ok(())
        })
        .unwrap();
        assert_eq!(h.run(|tx| Ok(*tx.read(y)?)).unwrap(), 10);
    }
    refused
}

#[test]
fn a_stale_write_after_a_pending_free_is_refused() {
    assert!(stale_write_after_pending_free_is_refused());
}

/// Mutation evidence: if the check after the lock trusted any unlocked word it
/// replaced (not only the live marker), the stale write would go through.
#[cfg(feature = "mutation")]
#[test]
fn the_check_after_the_lock_needs_the_live_marker() {
    let sc = crate::mutation::Scenario::setup();
    // SAFETY: a mutation test: the run exists to show the removed step matters, and its
    // outcome is read only as that evidence (see `pisces::mutation::Scenario::set`).
    unsafe { sc.set(Some(&super::super::thread::LOCKED_CHECK_TRUSTS_ANY)) };
    assert!(
        !stale_write_after_pending_free_is_refused(),
        "the mutation went unnoticed"
    );
}

/// The fast path's geometry checks stand on their own, behind a header word that holds
/// the live marker: a small object read as a bigger type (the length, folded into the
/// class compare), and a forged pointer into an object right after a user word equal
/// to the live marker (the block-start test) are both refused.
#[test]
fn the_fast_path_checks_the_geometry_behind_a_live_word() {
    let dir = tempfile::tempdir_in("/dev/shm").unwrap();
    let pool = Pool::create(dir.path().join("geometry.pool"), cfg()).unwrap();
    let x = pool.run(|tx| tx.alloc([0u64; 8])).unwrap();
    pool.sync().unwrap();
    assert_eq!(header_word(&pool, x), live(&pool));
    let big: PPtr<[u64; 64]> = x.cast();
    assert!(
        is_invalid(pool.run(|tx| Ok(tx.read(big)?[0]))),
        "read as a bigger type"
    );
    let l = live(&pool);
    pool.run(|tx| {
        tx.write(x)?[3] = l;
        Ok(())
    })
    .unwrap();
    pool.sync().unwrap();
    let inner: PPtr<u64> = PPtr::from_offset(x.offset() + 32);
    assert_eq!(
        header_word(&pool, inner),
        l,
        "the forged pointer's header word is live"
    );
    assert!(
        is_invalid(pool.run(|tx| Ok(*tx.read(inner)?))),
        "pointer into an object"
    );
    assert_eq!(pool.run(|tx| Ok(tx.read(x)?[3])).unwrap(), l);
}

fn rewrite_generation(path: &std::path::Path, generation: u64) {
    let mut bytes = std::fs::read(path).unwrap();
    for copy in 0..2 {
        let off = copy * 4096;
        let n = std::mem::size_of::<Superblock>();
        let mut sb: Superblock = bytemuck::pod_read_unaligned(&bytes[off..off + n]);
        sb.run_generation = generation;
        let sb = sb.seal();
        bytes[off..off + n].copy_from_slice(bytemuck::bytes_of(&sb));
    }
    std::fs::write(path, bytes).unwrap();
}

fn poke(path: &std::path::Path, off: u64, value: u64) {
    let mut bytes = std::fs::read(path).unwrap();
    bytes[off as usize..off as usize + 8].copy_from_slice(&value.to_le_bytes());
    std::fs::write(path, bytes).unwrap();
}

/// A header word left by a run whose tag equals the current run's (65535 runs ago)
/// must not be followed as a lock: opening at the wrap clears every header word.
#[test]
fn tag_wrap_clears_header_words_of_long_ago_runs() {
    let dir = tempfile::tempdir_in("/dev/shm").unwrap();
    let path = dir.path().join("wrap.pool");
    let x = {
        let pool = Pool::create(&path, cfg()).unwrap();
        let root: PPtr<PPtr<u64>> = pool.root().unwrap();
        pool.run(|tx| {
            let x = tx.alloc(5u64)?;
            *tx.write(root)? = x;
            Ok(x)
        })
        .unwrap()
    };
    // The next open is run 0xFFFF, whose tag is that of run 0: plant a "lock" of that
    // tag pointing nowhere in x's header word.
    rewrite_generation(&path, 0xFFFE);
    poke(&path, x.offset() - 8, tag_of(0xFFFF) | 0x10);
    let pool = Pool::open(&path, cfg()).unwrap();
    assert_eq!(pool.heap().unwrap().generation(), 0xFFFF);
    assert_eq!(pool.run(|tx| Ok(*tx.read(x)?)).unwrap(), 5);
    pool.run(|tx| {
        *tx.write(x)? = 6;
        Ok(())
    })
    .unwrap();
    assert_eq!(pool.run(|tx| Ok(*tx.read(x)?)).unwrap(), 6);
}

/// When a slab is reused for another size class, its new header words sit on old
/// payload bytes; old bytes that look like a lock of the current run must not be
/// followed (the allocator zeroes header words when it formats a slab).
#[test]
fn reformatted_slab_has_no_lock_shaped_header_words() {
    let dir = tempfile::tempdir_in("/dev/shm").unwrap();
    let path = dir.path().join("reformat.pool");
    let next_generation = {
        let pool = Pool::create(&path, cfg()).unwrap();
        let next = pool.heap().unwrap().generation() + 1;
        let mut h = pool.handle().unwrap();
        // Objects of one class, every payload word shaped like a lock of the next run.
        let fake = tag_of(next) | 0x10;
        let objs: Vec<PPtr<[u64; 13]>> = (0..2000)
            .map(|_| h.run(|tx| tx.alloc([fake; 13])).unwrap())
            .collect();
        for o in objs {
            h.run(|tx| tx.free(o)).unwrap();
        }
        next
    };
    // Reopen: empty slabs return to the free state; a different class reuses them.
    let pool = Pool::open(&path, cfg()).unwrap();
    assert_eq!(pool.heap().unwrap().generation(), next_generation);
    let mut h = pool.handle().unwrap();
    for i in 0..3000u64 {
        let p = h.run(|tx| tx.alloc([i; 5])).unwrap();
        assert_eq!(h.run(|tx| Ok(tx.read(p)?[4])).unwrap(), i);
    }
}
