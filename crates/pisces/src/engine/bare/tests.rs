//! White-box tests of the `bare` engine's gate as its transactions use it: the writer
//! waits for the readers inside and no reader enters beside it; a second would-be
//! writer conflicts at once instead of waiting (no deadlock between two upgrading
//! readers); a nested transaction that meets the writer conflicts instead of waiting;
//! abort puts in-place writes back and hands back allocations; after repeated
//! conflicts a transaction begins as the writer.
//!
//! Where a test shows that a thread *waits*, the waiting side can only go on after the
//! other side's step, so the check that it has not gone on is exact; the pause before
//! it only gives a broken gate the time to let it through.

use super::shared::BareEngine;
use super::thread::BareThread;
use super::Bare;
use crate::engine::{Engine, EngineDef, EngineId, EngineOptions, EngineThread, OpenCtx};
use crate::heap::{FormatParams, Heap};
use crate::tx_options::TxOptions;
use crate::Error;
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::Arc;
use std::time::Duration;

/// Long enough for a thread the gate fails to hold back to get through.
const PAUSE: Duration = Duration::from_millis(100);

fn engine() -> BareEngine {
    let heap = Heap::format_dram(
        8 << 20,
        FormatParams {
            engine_id: EngineId::Bare as u32,
            max_threads: 3,
            log_bytes_per_thread: 64 << 10,
            regions: Default::default(),
        },
    );
    Bare::open(Arc::new(heap), &EngineOptions::new(), &OpenCtx::default()).unwrap()
}

fn begin(t: &mut BareThread) {
    t.begin(&TxOptions::default());
}

fn put(t: &mut BareThread, off: u64, v: u64) -> crate::Result<()> {
    let p = t.write(off, 8)?;
    // SAFETY: the object's payload, at least 8 bytes, 8-aligned; we are the writer.
    unsafe { (p as *mut u64).write(v) };
    Ok(())
}

fn get(t: &BareThread, off: u64) -> u64 {
    // SAFETY: the object's payload, at least 8 bytes, 8-aligned; no writer beside us.
    unsafe { (t.read(off, 8).unwrap() as *const u64).read() }
}

/// A committed object holding `v`.
fn object(t: &mut BareThread, v: u64) -> u64 {
    begin(t);
    let off = t.alloc(8).unwrap();
    put(t, off, v).unwrap();
    t.commit().unwrap();
    off
}

/// A reader is inside; another transaction's first write makes it the writer, which
/// waits until the reader leaves (the reader's snapshot of home stays unchanged
/// meanwhile); a third transaction that wants to write too conflicts at once.
#[test]
fn the_writer_waits_for_the_readers_and_a_second_writer_conflicts() {
    let e = engine();
    let (mut r, mut w, mut x) = (
        e.thread(0).unwrap(),
        e.thread(1).unwrap(),
        e.thread(2).unwrap(),
    );
    let off = object(&mut r, 1);
    begin(&mut r);
    assert_eq!(get(&r, off), 1);
    begin(&mut x);
    let wrote = AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            begin(&mut w);
            put(&mut w, off, 2).unwrap();
            wrote.store(true, SeqCst);
            w.commit().unwrap();
        });
        // The writer has taken the writer word and waits for the readers inside (or,
        // were the gate broken, has written already).
        while !e.shared().gate.writer_held() && !wrote.load(SeqCst) {
            std::thread::yield_now();
        }
        std::thread::sleep(PAUSE);
        assert!(!wrote.load(SeqCst), "the writer wrote beside a reader");
        assert_eq!(get(&r, off), 1, "a reader saw a write beside it");
        assert!(
            matches!(put(&mut x, off, 3), Err(Error::Conflict)),
            "a second would-be writer must not wait for the first"
        );
        r.commit().unwrap();
        x.abort();
    });
    begin(&mut r);
    assert_eq!(get(&r, off), 2);
    r.commit().unwrap();
}

/// While a writer is inside, a transaction that begins waits until the writer leaves,
/// and then reads what it wrote.
#[test]
fn a_reader_waits_for_the_writer() {
    let e = engine();
    let (mut w, mut r) = (e.thread(0).unwrap(), e.thread(1).unwrap());
    let off = object(&mut w, 1);
    begin(&mut w);
    put(&mut w, off, 2).unwrap();
    let entered = AtomicBool::new(false);
    std::thread::scope(|s| {
        let reader = s.spawn(|| {
            begin(&mut r);
            entered.store(true, SeqCst);
            let v = get(&r, off);
            r.commit().unwrap();
            v
        });
        std::thread::sleep(PAUSE);
        assert!(!entered.load(SeqCst), "a reader entered beside the writer");
        put(&mut w, off, 3).unwrap();
        w.commit().unwrap();
        assert_eq!(
            reader.join().unwrap(),
            3,
            "the reader did not see the commit"
        );
    });
}

/// A transaction nested in another pool's never waits for this pool's writer: it
/// conflicts (every access and its commit), and the writer is not disturbed.
#[test]
fn a_nested_transaction_conflicts_instead_of_waiting_for_the_writer() {
    let e = engine();
    let (mut w, mut n) = (e.thread(0).unwrap(), e.thread(1).unwrap());
    let off = object(&mut w, 1);
    begin(&mut w);
    put(&mut w, off, 2).unwrap();
    n.set_nested(true);
    begin(&mut n);
    assert!(matches!(n.read(off, 8), Err(Error::Conflict)));
    assert!(matches!(n.write(off, 8), Err(Error::Conflict)));
    assert!(matches!(n.commit(), Err(Error::Conflict)));
    w.commit().unwrap();
    // With no writer inside it enters as usual.
    begin(&mut n);
    assert_eq!(get(&n, off), 2);
    n.commit().unwrap();
}

/// Abort puts back the old bytes of every object written in place (written several
/// times included) and hands its allocations back to the thread's cache.
#[test]
fn abort_puts_in_place_writes_back_and_gives_back_allocations() {
    let e = engine();
    let mut t = e.thread(0).unwrap();
    let a = object(&mut t, 1);
    let b = object(&mut t, 2);
    begin(&mut t);
    put(&mut t, a, 10).unwrap();
    put(&mut t, b, 20).unwrap();
    put(&mut t, a, 11).unwrap();
    let c = t.alloc(8).unwrap();
    t.abort();
    begin(&mut t);
    assert_eq!((get(&t, a), get(&t, b)), (1, 2), "abort left a write");
    assert_eq!(
        t.alloc(8).unwrap(),
        c,
        "abort did not give its allocation back"
    );
    t.abort();
}

/// The read fast path (the header word's live value) says "home" exactly for objects
/// whose allocation is published: not for one this transaction allocated (its `read`
/// takes the slow path, which knows it), yes once committed, and no again once a
/// committed transaction freed it (a stale pointer is the engine's error, not a read of
/// a free block).
#[test]
fn the_fast_path_serves_published_objects_only() {
    use crate::heap::alloc::min_class;
    let e = engine();
    let mut t = e.thread(0).unwrap();
    begin(&mut t);
    let fresh = t.alloc(8).unwrap();
    assert_eq!(
        t.fast_reads().get().read::<false>(fresh, min_class(8)),
        None
    );
    assert!(
        t.read(fresh, 8).is_ok(),
        "its own allocation, by the slow path"
    );
    t.commit().unwrap();

    begin(&mut t);
    let home = t.fast_reads().get().read::<false>(fresh, min_class(8));
    assert_eq!(home, Some(t.read(fresh, 8).unwrap()));
    t.free(fresh).unwrap();
    t.commit().unwrap();

    begin(&mut t);
    assert_eq!(
        t.fast_reads().get().read::<false>(fresh, min_class(8)),
        None
    );
    assert!(matches!(t.read(fresh, 8), Err(Error::InvalidPointer(_))));
    t.commit().unwrap();
}

/// After `THRESHOLD` conflict aborts in a row, a transaction's next attempt begins as
/// the writer: it waits at `begin` for the reader inside, whose upgrade then
/// conflicts, and writes without conflict once the reader has left.
#[test]
fn after_repeated_conflicts_a_transaction_begins_as_the_writer() {
    use crate::engine::kit::cc::fallback::THRESHOLD;
    let e = engine();
    let (mut r, mut x) = (e.thread(0).unwrap(), e.thread(1).unwrap());
    let off = object(&mut r, 1);
    // `run`'s calls after conflict aborts (what conflicted does not matter here).
    for _ in 0..THRESHOLD {
        begin(&mut x);
        x.abort();
        x.after_abort();
    }
    begin(&mut r);
    let began = AtomicBool::new(false);
    // Checked after the reader has left, so that a failure does not leave the other
    // thread waiting for it.
    let (began_beside, upgraded) = std::thread::scope(|s| {
        s.spawn(|| {
            begin(&mut x);
            began.store(true, SeqCst);
            put(&mut x, off, 3).unwrap();
            x.commit().unwrap();
        });
        while !e.shared().gate.writer_held() {
            std::thread::yield_now();
        }
        std::thread::sleep(PAUSE);
        let began_beside = began.load(SeqCst);
        let upgraded = !matches!(put(&mut r, off, 4), Err(Error::Conflict));
        r.abort();
        (began_beside, upgraded)
    });
    assert!(!began_beside, "the fallback began beside a reader");
    assert!(!upgraded, "a reader upgraded beside the fallback");
    begin(&mut r);
    assert_eq!(get(&r, off), 3);
    r.commit().unwrap();
}
