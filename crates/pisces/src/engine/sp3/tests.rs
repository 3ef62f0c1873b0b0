//! White-box tests of the SP3 engine's parts (the behavioural, crash and isolation
//! suites run it through the public API: `crates/pisces-verify/tests/engine_sp3.rs`).

use super::index::{is_locked, Index};
use super::log;
use super::recovery;
use super::thread::Sp3Thread;
use super::tid::pack;
use super::version::{Limbo, Version};
use crate::engine::kit::cc::clock::{Clock, SlotClock};
use crate::engine::kit::log::redo_log::{LogWriter, RecordBuilder};
use crate::engine::{Engine, EngineDef, EngineThread, OpenCtx};
use crate::heap::{FormatParams, Heap};
use crate::tx_options::TxOptions;
use std::sync::Arc;

fn heap(slots: usize) -> Heap {
    let ctx = OpenCtx {
        max_threads: slots,
        ..OpenCtx::default()
    };
    Heap::format_dram(
        8 << 20,
        FormatParams {
            engine_id: super::Sp3::ID,
            max_threads: slots,
            log_bytes_per_thread: 64 << 10,
            regions: super::Sp3::regions(&ctx),
        },
    )
}

/// Append a record (lid, deps, one WORD entry writing `value` at `off`) to `w`.
fn append(h: &Heap, w: &mut LogWriter, lid: u64, deps: &[u64], off: u64, value: u64) {
    let mut b = RecordBuilder::default();
    b.word(off, value);
    let mut body = Vec::new();
    log::encode(&mut body, deps, b.bytes());
    w.append(h, &body, lid);
    h.fence();
}

/// The DAG rules on hand-made logs: a missing predecessor drops its dependents (also
/// across slots and along a slot's lid order); a cycle (impossible in a correct run)
/// is dropped and reported by `inspect`; retired predecessors count as present.
#[test]
fn recovery_keeps_exactly_the_records_whose_predecessors_are_all_there() {
    let h = heap(3);
    let l = *h.layout();
    let target = l.heap_offset as u64;
    let mut w: Vec<LogWriter> = (0..3)
        .map(|s| LogWriter::new(l.log_offset(s), l.log_bytes_per_thread, 0))
        .collect();
    // Slot 0: lids 1, 2 (2 depends on slot 1's missing lid 9).
    append(&h, &mut w[0], 1, &[], target, 1);
    append(&h, &mut w[0], 2, &[pack(1, 9)], target + 8, 2);
    // Slot 1: lid 1 depends on (0, 1): kept; lid 2 depends on (0, 2): dropped; lid 3
    // follows it in its slot: dropped.
    append(&h, &mut w[1], 1, &[pack(0, 1)], target + 16, 3);
    append(&h, &mut w[1], 2, &[pack(0, 2)], target + 24, 4);
    append(&h, &mut w[1], 3, &[], target + 32, 5);
    // Slot 2: a cycle with itself through slot 0? Not possible; instead lid 1 depends
    // on slot 1's lid 1 (kept) and on slot 0's retired-by-then lid 0 (ignored).
    append(&h, &mut w[2], 1, &[pack(1, 1), pack(0, 0)], target + 40, 6);
    let st = recovery::inspect(&h);
    assert!(
        st.lines.iter().any(|l| l.contains("replay 3 and drop 3")),
        "{:?}",
        st.lines
    );
    let r = recovery::recover(&h, 2).unwrap();
    assert_eq!((r.replayed, r.dropped), (3, 3));
    let mut dropped = r.dropped_ids.clone();
    dropped.sort();
    assert_eq!(dropped, vec![(0, 2), (1, 2), (1, 3)]);
    let word = |o: u64| {
        h.atomic_u64(o as usize)
            .load(std::sync::atomic::Ordering::Relaxed)
    };
    let got: Vec<u64> = (0..6).map(|i| word(target + 8 * i)).collect();
    assert_eq!(got, vec![1, 0, 3, 0, 0, 6]);
    // Next lids continue after the last kept one; the logs are empty now.
    assert_eq!(&r.next_lid[..3], &[2, 2, 2]);
    let again = recovery::recover(&h, 1).unwrap();
    assert_eq!((again.replayed, again.dropped), (0, 0));
}

/// Append a record (lid, deps, one RANGE entry writing `data` at `off`) to `w`.
fn append_range(h: &Heap, w: &mut LogWriter, lid: u64, deps: &[u64], off: u64, data: &[u8]) {
    let mut b = RecordBuilder::default();
    b.range(off, data);
    let mut body = Vec::new();
    log::encode(&mut body, deps, b.bytes());
    w.append(h, &body, lid);
    h.fence();
}

/// Parallel recovery (logs parsed by several threads, data replayed by 4 KiB chunk of
/// the pool) gives serial replay's bytes: records of slots 1 and 2 (slot 0's log is
/// empty, so that with 2 threads one thread parses slots 0 and 2, the other slot 1)
/// overwrite overlapping ranges, each spanning several chunks, in dependency order
/// (1,1) -> (2,1) -> (1,2). Fails if a replay thread skips a record that writes into
/// one of its chunks, or if a parsed log is taken for another slot's.
#[test]
fn parallel_recovery_keeps_slot_and_dependency_order_across_chunks() {
    parallel_recovery_case();
}

fn parallel_recovery_case() {
    let fill = |n: u8, len: usize| -> Vec<u8> {
        (0..len)
            .map(|i| n.wrapping_mul(37).wrapping_add(i as u8))
            .collect()
    };
    // (slot, lid, deps, offset from the region, data)
    let records = [
        (1usize, 1u64, vec![], 0usize, fill(1, 10 << 10)),
        (2, 1, vec![pack(1, 1)], 2048, fill(2, 8 << 10)),
        (1, 2, vec![pack(2, 1)], 0, fill(3, 5 << 10)),
    ];
    let len = 12 << 10;
    let mut expect = vec![0u8; len];
    for (_, _, _, at, data) in &records {
        expect[*at..at + data.len()].copy_from_slice(data);
    }
    for threads in [1, 2, 3] {
        let h = heap(3);
        let l = *h.layout();
        // Not chunk aligned: every range starts inside a chunk and ends in another.
        let region = l.heap_offset + 1000;
        let mut w: Vec<LogWriter> = (0..3)
            .map(|s| LogWriter::new(l.log_offset(s), l.log_bytes_per_thread, 0))
            .collect();
        for (slot, lid, deps, at, data) in &records {
            append_range(&h, &mut w[*slot], *lid, deps, (region + at) as u64, data);
        }
        let r = recovery::recover(&h, threads).unwrap();
        assert_eq!(
            (r.replayed, r.dropped),
            (3, 0),
            "recovery_threads = {threads}"
        );
        assert_eq!(&r.next_lid[..3], &[1, 3, 2], "recovery_threads = {threads}");
        let mut got = vec![0u8; len];
        h.read_bytes(region, &mut got);
        assert!(got == expect, "recovery_threads = {threads}: bytes differ");
    }
}

/// Mutation evidence: the test above fails when a replay thread skips a record that
/// writes into its chunks beyond the record's first chunk, and when the parsed logs
/// are not put back in slot order.
#[cfg(feature = "mutation")]
#[test]
fn mutations_of_parallel_recovery_are_caught() {
    let sc = crate::mutation::Scenario::setup();
    for m in [
        &crate::engine::kit::recovery::replay_parts::REPLAY_PART_MASK,
        &crate::engine::kit::recovery::per_slot::PARSE_SLOT_ORDER,
    ] {
        // SAFETY: a mutation test: the run exists to show the removed step matters,
        // and its outcome is read only as that evidence (see
        // `pisces::mutation::Scenario::set`).
        unsafe { sc.set(Some(m)) };
        let r = std::panic::catch_unwind(parallel_recovery_case);
        sc.clear();
        assert!(r.is_err(), "{} went unnoticed", m.name);
    }
}

#[test]
fn a_dependency_cycle_is_dropped_and_reported() {
    let h = heap(2);
    let l = *h.layout();
    let target = l.heap_offset as u64;
    let mut w0 = LogWriter::new(l.log_offset(0), l.log_bytes_per_thread, 0);
    let mut w1 = LogWriter::new(l.log_offset(1), l.log_bytes_per_thread, 0);
    append(&h, &mut w0, 1, &[pack(1, 1)], target, 1);
    append(&h, &mut w1, 1, &[pack(0, 1)], target + 8, 2);
    let st = recovery::inspect(&h);
    assert_eq!(st.problems.len(), 1, "{:?}", st.problems);
    let r = recovery::recover(&h, 1).unwrap();
    assert_eq!((r.replayed, r.dropped), (0, 2));
}

/// Replaced versions are freed only once no transaction that may hold them runs.
#[test]
fn limbo_frees_versions_only_after_older_readers_end() {
    let clock = Clock::new(1);
    let slots: Vec<SlotClock> = (0..2).map(|_| SlotClock::default()).collect();
    let mut limbo = Limbo::default();
    slots[1].start(&clock); // a reader that may hold every version below
    for _ in 0..40 {
        // SAFETY: a fresh version, never published.
        limbo.retire(unsafe { Version::new(16, None) });
    }
    limbo.collect(&clock, || slots.iter());
    assert_eq!(limbo.len(), 40, "freed under a running reader");
    slots[1].finish();
    limbo.collect(&clock, || slots.iter());
    assert_eq!(limbo.len(), 0, "a stamped batch survived its readers");
    // Fewer than a batch: kept until a thread leaves (then a grace period).
    for _ in 0..5 {
        // SAFETY: as above.
        limbo.retire(unsafe { Version::new(8, None) });
    }
    limbo.collect(&clock, || slots.iter());
    assert_eq!(limbo.len(), 5);
    slots[1].start(&clock);
    slots[1].finish();
    limbo.drain_blocking(&clock, slots.iter(), 0);
    assert_eq!(limbo.len(), 0);
}

/// The `ver` word: a reader sees a locked entry as a conflict naming the owner; commit
/// bumps the version; abort restores it.
#[test]
fn entries_lock_publish_and_unlock() {
    let h = heap(2);
    let off = (h.layout().heap_offset + 8) as u64;
    let idx = Index::new(&h, 0);
    // SAFETY: a payload range inside the heap.
    let e = unsafe { idx.get_or_create(off, 16, &h, None, true) };
    let s0 = e.snapshot().unwrap();
    let prior = e.lock_current(1).unwrap();
    assert!(is_locked(e.ver.load(std::sync::atomic::Ordering::Relaxed)));
    assert_eq!(e.snapshot().unwrap_err(), 1);
    assert!(e.lock_current(0).is_none());
    e.unlock(prior, false);
    assert_eq!(e.snapshot().unwrap().ver, s0.ver);
    let prior = e.lock_current(0).unwrap();
    // SAFETY: a fresh version of the entry's length.
    let v = unsafe { Version::new(16, None) };
    let old = e.publish(Some(v), pack(0, 7)).unwrap();
    e.unlock(prior, true);
    let s1 = e.snapshot().unwrap();
    assert!(s1.ver > s0.ver && s1.ptr == v && s1.last_tid == pack(0, 7));
    assert!(!super::index::unchanged(s0.ver, s1.ver, 0));
    // SAFETY: unlinked above, nobody else can see it.
    unsafe { Version::free(old) };
    assert_eq!(idx.len(), 1);
}

/// An engine over a fresh heap of 2 slots, and its two thread states.
fn engine() -> (super::shared::Sp3Engine, Sp3Thread, Sp3Thread) {
    let h = Arc::new(heap(2));
    let ctx = OpenCtx {
        max_threads: 2,
        ..OpenCtx::default()
    };
    let e = super::Sp3::open(h, &crate::engine::EngineOptions::new(), &ctx).unwrap();
    let a = e.thread(0).unwrap();
    let b = e.thread(1).unwrap();
    (e, a, b)
}

/// A committed transaction of `t` that allocates a `len`-byte object holding `value`
/// in its first word; its offset.
fn new_object(t: &mut Sp3Thread, len: usize, value: u64) -> u64 {
    t.begin(&TxOptions::default());
    let off = t.alloc(len).unwrap();
    // SAFETY: our private copy of the new block, at least 8 bytes, 8-aligned.
    unsafe { (t.write(off, 8).unwrap() as *mut u64).write(value) };
    let tok = t.commit().unwrap();
    t.wait_durable(tok).unwrap();
    off
}

/// A committed transaction of `t` that stores `value` in the first word of each object.
fn store(t: &mut Sp3Thread, offs: &[u64], value: u64) {
    t.begin(&TxOptions::default());
    for &o in offs {
        // SAFETY: our private copy, at least 8 bytes, 8-aligned.
        unsafe { (t.write(o, 8).unwrap() as *mut u64).write(value) };
    }
    let tok = t.commit().unwrap();
    t.wait_durable(tok).unwrap();
}

/// Transactions whose durability is deferred and whose thread never waits: each
/// snapshot that reads another slot's not yet stable commit owes it a wait, and the
/// thread keeps one entry per slot (the newest), not one per transaction.
#[test]
fn deferred_transactions_that_never_wait_owe_one_wait_per_slot() {
    let (_e, mut a, mut b) = engine();
    let x = new_object(&mut a, 24, 0);
    let mut owed_max = 0;
    for v in 1..=2_000u64 {
        a.begin(&TxOptions::default());
        // SAFETY: our private copy, at least 8 bytes, 8-aligned.
        unsafe { (a.write(x, 8).unwrap() as *mut u64).write(v) };
        a.commit().unwrap();
        b.begin_snapshot();
        assert_eq!(load(&b, x).unwrap(), v);
        b.end_snapshot(false).unwrap().unwrap();
        owed_max = owed_max.max(b.owed_len());
    }
    assert!(
        owed_max >= 1,
        "no snapshot read a commit that was not stable yet"
    );
    assert!(
        owed_max <= 2,
        "a thread that never waits kept {owed_max} owed predecessors"
    );
    b.wait_durable(crate::engine::DurableToken::ALL).unwrap();
    assert_eq!(b.owed_len(), 0);
}

/// The first word of the object at `off` as `t`'s running transaction reads it.
fn load(t: &Sp3Thread, off: u64) -> crate::Result<u64> {
    // SAFETY: the engine returns a pointer valid for 8 bytes, 8-aligned.
    t.read(off, 8).map(|p| unsafe { (p as *const u64).read() })
}

/// The direct table of small blocks (the read fast path's lookup): an entry linked for
/// a block is found from the block's payload offset, the same entry the shards hold;
/// nothing is found for an offset inside the block, the next block before its first
/// access, or a read longer than the block's payload.
#[test]
fn small_table_finds_exactly_the_linked_block() {
    let (e, mut a, _b) = engine();
    let off = new_object(&mut a, 24, 1);
    let sh = e.shared();
    let slot = sh.alloc.small_slot(off, 0).expect("a small block");
    let plen = slot.payload_len as usize;
    // SAFETY: a validated payload of this pool; the slot is the allocator's.
    let linked = unsafe {
        sh.index
            .get_or_create(off, plen, &sh.heap, Some(slot), true)
    } as *const _;
    let found = sh.index.lookup_small(off, 8).expect("linked") as *const _;
    assert_eq!(found, linked);
    assert!(std::ptr::eq(
        sh.index.lookup_small(off, plen).unwrap(),
        found
    ));
    assert!(sh.index.lookup_small(off, plen + 1).is_none());
    assert!(sh.index.lookup_small(off + 8, 8).is_none());
    assert!(sh.index.lookup_small(off + plen as u64 + 8, 8).is_none());
    assert!(sh.index.lookup_small(0, 8).is_none());
    // Offsets in the block's own 16-byte granule, and forged ones past the pool or
    // misaligned, name no entry.
    for forged in [off - 8, off - 1, off + 1, off + 4, off + 7] {
        assert!(sh.index.lookup_small(forged, 8).is_none(), "{forged:#x}");
    }
    for forged in [u64::MAX, u64::MAX - 7, 1 << 40, off | 1 << 63] {
        assert!(sh.index.lookup_small(forged, 8).is_none(), "{forged:#x}");
    }
}

/// Blocks of the smallest class lie one granule of the direct table apart: each
/// payload offset finds its own block's entry, and each read through the fast path
/// returns its own object's value.
#[test]
fn adjacent_smallest_blocks_have_entries_of_their_own() {
    let (e, mut a, _b) = engine();
    a.begin(&TxOptions::default());
    let offs: Vec<u64> = (0..8).map(|_| a.alloc(8).unwrap()).collect();
    for (i, &o) in offs.iter().enumerate() {
        // SAFETY: our private copy of the new block, 8 bytes, 8-aligned.
        unsafe { (a.write(o, 8).unwrap() as *mut u64).write(100 + i as u64) };
    }
    let tok = a.commit().unwrap();
    a.wait_durable(tok).unwrap();
    let sh = e.shared();
    let adjacent = offs
        .windows(2)
        .filter(|w| w[1].abs_diff(w[0]) == 16)
        .count();
    assert!(adjacent >= 4, "smallest blocks not adjacent: {offs:x?}");
    let entries: Vec<*const _> = offs
        .iter()
        .map(|&o| sh.index.lookup_small(o, 8).expect("linked at commit") as *const _)
        .collect();
    for (i, p) in entries.iter().enumerate() {
        assert!(!entries[..i].contains(p), "two blocks share an entry");
    }
    a.begin(&TxOptions::default());
    let values: Vec<u64> = offs.iter().map(|&o| load(&a, o).unwrap()).collect();
    a.abort();
    assert_eq!(values, (100..108).collect::<Vec<u64>>());
}

/// The fast path sees what the slow path would: the newest committed version, the same
/// version again on a repeated read (even after another slot committed a new one), and
/// a conflict when a new read would mix states (opacity, which is why a read-only
/// commit need not validate again). (Each transaction ends before its results are
/// checked: a failing check must not leave a reader running, whose slot the other
/// state's drop would wait for.)
#[test]
fn fast_reads_are_repeatable_and_opaque() {
    let (_e, mut a, mut b) = engine();
    let x = new_object(&mut a, 24, 1);
    let y = new_object(&mut a, 24, 1);
    store(&mut a, &[x, y], 2);
    // Repeatable: a's second read of x returns the version of its first read.
    a.begin(&TxOptions::default());
    let first = load(&a, x);
    store(&mut b, &[x], 3);
    let again = load(&a, x);
    // A read-only transaction whose reads were consistent commits (it serializes
    // before b's) without validating again.
    let committed = a.commit();
    assert_eq!((first.ok(), again.ok()), (Some(2), Some(2)));
    assert!(committed.is_ok());
    // Opaque: x read at 3, then b writes x and y together; y's new value must not be
    // seen beside x's old one.
    a.begin(&TxOptions::default());
    let x_read = load(&a, x);
    store(&mut b, &[x, y], 4);
    let y_read = load(&a, y);
    a.abort();
    assert_eq!(x_read.ok(), Some(3));
    assert!(matches!(y_read, Err(crate::Error::Conflict)), "{y_read:?}");
    a.begin(&TxOptions::default());
    let both = (load(&a, x).ok(), load(&a, y).ok());
    a.abort();
    assert_eq!(both, (Some(4), Some(4)));
}

/// A transaction reads its own writes: once it wrote (or allocated) an object, a read
/// of it, read before or not, returns its private copy, not the committed version the
/// read's fast path would find; outside a transaction a read is refused.
#[test]
fn reads_after_a_write_see_the_transactions_own_copies() {
    let (_e, mut a, _b) = engine();
    let x = new_object(&mut a, 24, 1);
    let y = new_object(&mut a, 24, 2);
    a.begin(&TxOptions::default());
    let before = load(&a, x);
    // SAFETY: our private copies, at least 8 bytes, 8-aligned.
    unsafe {
        (a.write(x, 8).unwrap() as *mut u64).write(10);
        (a.write(y, 8).unwrap() as *mut u64).write(20);
    }
    let after = (load(&a, x).ok(), load(&a, y).ok());
    let z = a.alloc(8).unwrap();
    // SAFETY: as above.
    unsafe { (a.write(z, 8).unwrap() as *mut u64).write(30) };
    let fresh = load(&a, z).ok();
    a.abort();
    assert_eq!(before.ok(), Some(1));
    assert_eq!(after, (Some(10), Some(20)));
    assert_eq!(fresh, Some(30));
    a.begin(&TxOptions::default());
    let reread = (load(&a, x).ok(), load(&a, y).ok());
    a.abort();
    assert_eq!(
        reread,
        (Some(1), Some(2)),
        "the abort kept the committed versions"
    );
    assert!(load(&a, x).is_err(), "a read outside a transaction");
}

/// The fast path takes an entry's word for it only while the object is allocated: a
/// freed object, once the checkpoint has cleared its allocation bit, is refused as the
/// slow path refuses it, although its entry still holds the last version.
#[test]
fn a_freed_object_is_refused_on_the_fast_path() {
    let (e, mut a, _b) = engine();
    let x = new_object(&mut a, 24, 7);
    store(&mut a, &[x], 8);
    a.begin(&TxOptions::default());
    let before = load(&a, x);
    a.free(x).unwrap();
    let tok = a.commit().unwrap();
    a.wait_durable(tok).unwrap();
    assert_eq!(before.ok(), Some(8));
    e.shared().checkpoint(true);
    assert!(
        e.shared().index.lookup_small(x, 8).is_some(),
        "the entry stays"
    );
    a.begin(&TxOptions::default());
    let r = load(&a, x);
    a.abort();
    assert!(matches!(r, Err(crate::Error::InvalidPointer(_))), "{r:?}");
}

/// An entry that a commit creates for a block it allocates starts not live. Between its
/// creation and the commit's lock of it the entry is unlocked, and if the commit rolls
/// back the block goes back to the allocator while the entry stays: in both states a
/// forged pointer to the block must be refused, not read through the fast path from
/// the entry (built here as the commit builds it, then rolled back).
#[test]
fn an_entry_of_an_unpublished_allocation_is_not_read() {
    let (e, mut a, mut b) = engine();
    let sh = e.shared();
    a.begin(&TxOptions::default());
    let off = a.alloc(24).unwrap();
    let slot = sh.alloc.small_slot(off, 0).expect("a small block");
    let plen = slot.payload_len as usize & !7;
    // As the commit does for a block it allocated, before it locks the entry.
    // SAFETY: a block this transaction reserved; the slot is the allocator's.
    let _ = unsafe {
        sh.index
            .get_or_create(off, plen, &sh.heap, Some(slot), false)
    };
    a.abort();
    assert!(sh.index.lookup_small(off, 8).is_some(), "the entry stays");
    b.begin(&TxOptions::default());
    let r = load(&b, off);
    b.abort();
    assert!(matches!(r, Err(crate::Error::InvalidPointer(_))), "{r:?}");
}

/// A read repeated any number of times is recorded once and returns its first version,
/// also past the 64 bits of the read set's filter (where every bit may be set) and past
/// the scan limit (where the read set finds reads through its index).
#[test]
fn a_repeated_read_is_found_and_recorded_once() {
    let (_e, mut a, mut b) = engine();
    let objs: Vec<u64> = (0..80).map(|i| new_object(&mut a, 24, i)).collect();
    a.begin(&TxOptions::default());
    let first: Vec<_> = objs.iter().map(|&o| load(&a, o).ok()).collect();
    let after_first = a.reads_recorded();
    // b changes one object a read: a's repeated read keeps the version it read.
    store(&mut b, &objs[3..4], 1000);
    let again: Vec<_> = objs.iter().rev().map(|&o| load(&a, o).ok()).collect();
    let after_again = a.reads_recorded();
    a.abort();
    let expected: Vec<_> = (0..80).map(Some).collect();
    assert_eq!(first, expected);
    assert_eq!(again.into_iter().rev().collect::<Vec<_>>(), expected);
    assert_eq!((after_first, after_again), (80, 80));
}

/// While the read set holds few reads, a repeated read is recorded without a search
/// for the earlier one: it keeps its first version after a commit changed the object
/// (the clock-moved path finds the earlier read), and however often it is repeated
/// the object is in the set at most `FEW_READS` times (from then on reads are looked
/// for).
#[test]
fn a_repeated_read_among_few_keeps_its_version_and_is_bounded() {
    let (_e, mut a, mut b) = engine();
    let x = new_object(&mut a, 24, 7);
    a.begin(&TxOptions::default());
    let again: Vec<_> = (0..3).map(|_| load(&a, x).ok()).collect();
    // b changes x: a's repeated reads keep the version it read, and add nothing.
    store(&mut b, &[x], 1000);
    let recorded = a.reads_recorded();
    let after: Vec<_> = (0..3).map(|_| load(&a, x).ok()).collect();
    let recorded_after = a.reads_recorded();
    a.abort();
    assert_eq!(again, vec![Some(7); 3]);
    assert_eq!(after, vec![Some(7); 3]);
    assert_eq!(recorded_after, recorded);
    // While the clock stands still, repeated reads stop growing the set.
    a.begin(&TxOptions::default());
    let many: Vec<_> = (0..100).map(|_| load(&a, x).ok()).collect();
    let recorded = a.reads_recorded();
    a.abort();
    assert_eq!(many, vec![Some(1000); 100]);
    assert!(
        recorded <= super::thread::FEW_READS,
        "100 reads of one object recorded {recorded} times"
    );
}

/// The opacity check of a new read skips the read set only while the commit clock
/// stands still: a commit that changes what was read moves it (a new read of another
/// object it wrote, or a write of one, then conflicts), and a commit that overtakes a
/// new read between its snapshot and its check makes that read conflict too (the
/// check validates the new read with the others).
fn commit_clock_cases() -> (
    crate::Result<u64>,
    crate::Result<*mut u8>,
    crate::Result<u64>,
) {
    let (e, mut a, mut b) = engine();
    let x = new_object(&mut a, 24, 1);
    let y = new_object(&mut a, 24, 1);
    let z = new_object(&mut a, 24, 1);
    // A new read after b wrote x (read before) and y.
    a.begin(&TxOptions::default());
    let _ = load(&a, x);
    store(&mut b, &[x, y], 2);
    let read = load(&a, y);
    a.abort();
    // A write after b wrote x (read before) and y: the copy would be of b's y.
    a.begin(&TxOptions::default());
    let _ = load(&a, x);
    store(&mut b, &[x, y], 3);
    let written = a.write(y, 8);
    a.abort();
    // A snapshot of y taken before b's commit of y and x, checked after it: the read
    // set (z) is unchanged, y is not.
    a.begin(&TxOptions::default());
    let _ = load(&a, z);
    let entry = e.shared().index.lookup_small(y, 8).expect("linked");
    let snap = entry.snapshot().expect("unlocked");
    store(&mut b, &[y, x], 4);
    // SAFETY: the engine returns a pointer valid for 8 bytes, 8-aligned.
    let overtaken = a
        .record_snapshot(entry, snap)
        .map(|p| unsafe { (p as *const u64).read() });
    a.abort();
    (read, written, overtaken)
}

#[test]
fn reads_skip_revalidation_only_while_the_commit_clock_stands() {
    let (read, written, overtaken) = commit_clock_cases();
    assert!(matches!(read, Err(crate::Error::Conflict)), "{read:?}");
    assert!(
        matches!(written, Err(crate::Error::Conflict)),
        "{written:?}"
    );
    assert!(
        matches!(overtaken, Err(crate::Error::Conflict)),
        "{overtaken:?}"
    );
}

/// Mutation evidence: without the commit's tick, the reads above see b's new y beside
/// the x read before it.
#[cfg(feature = "mutation")]
#[test]
fn reads_without_the_commit_tick_mix_states() {
    let sc = crate::mutation::Scenario::setup();
    // SAFETY: a mutation test: the run exists to show the removed step matters, and its
    // outcome is read only as that evidence (see `pisces::mutation::Scenario::set`).
    unsafe { sc.set(Some(&super::thread::NO_COMMIT_TICK)) };
    let (read, written, _) = commit_clock_cases();
    drop(sc);
    assert_eq!(read.ok(), Some(2), "the new read of y conflicted");
    assert!(written.is_ok(), "the write of y conflicted");
}
