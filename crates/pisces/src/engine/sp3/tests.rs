//! White-box tests of the SP3 engine's parts (the behavioural, crash and isolation
//! suites run it through the public API: `crates/pisces-verify/tests/engine_sp3.rs`).

use super::index::{is_locked, Index};
use super::log;
use super::recovery;
use super::tid::pack;
use super::version::{Limbo, Version};
use crate::engine::kit::cc::clock::{Clock, SlotClock};
use crate::engine::kit::log::redo_log::{LogWriter, RecordBuilder};
use crate::engine::{EngineDef, OpenCtx};
use crate::heap::{FormatParams, Heap};
use crate::medium::dram::DramMedium;
use std::sync::Arc;

fn heap(slots: usize) -> Heap {
    let m = Arc::new(DramMedium::anonymous(8 << 20, 0, 0).unwrap());
    let ctx = OpenCtx {
        max_threads: slots,
        ..OpenCtx::default()
    };
    Heap::format(
        m,
        FormatParams {
            engine_id: super::Sp3::ID,
            max_threads: slots,
            log_bytes_per_thread: 64 << 10,
            regions: super::Sp3::regions(&ctx),
        },
    )
    .unwrap()
}

/// Held by the recovery tests here, and by the mutation test while its mutation is
/// active: a mutation is process-wide, and tests run in parallel threads.
fn recovery_lock() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
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
    let _serial = recovery_lock();
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
    let _serial = recovery_lock();
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
    use crate::mutation;
    let _serial = recovery_lock();
    for m in [
        &crate::engine::kit::recovery::replay_parts::REPLAY_PART_MASK,
        &crate::engine::kit::recovery::per_slot::PARSE_SLOT_ORDER,
    ] {
        // SAFETY: a mutation test: the run exists to show the removed step matters,
        // and its outcome is read only as that evidence (see `pisces::mutation::set`).
        unsafe { mutation::set(Some(m)) };
        let r = std::panic::catch_unwind(parallel_recovery_case);
        mutation::clear();
        assert!(r.is_err(), "{} went unnoticed", m.name);
    }
}

#[test]
fn a_dependency_cycle_is_dropped_and_reported() {
    let _serial = recovery_lock();
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
    limbo.collect(&clock, slots.iter());
    assert_eq!(limbo.len(), 40, "freed under a running reader");
    slots[1].finish();
    limbo.collect(&clock, slots.iter());
    assert_eq!(limbo.len(), 0, "a stamped batch survived its readers");
    // Fewer than a batch: kept until a thread leaves (then a grace period).
    for _ in 0..5 {
        // SAFETY: as above.
        limbo.retire(unsafe { Version::new(8, None) });
    }
    limbo.collect(&clock, slots.iter());
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
    let e = unsafe { idx.get_or_create(off, 16, &h, None) };
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
