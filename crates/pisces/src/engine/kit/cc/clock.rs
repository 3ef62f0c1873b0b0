//! The timestamp clock: one global counter (`globalTS`) and one published start
//! timestamp per thread slot.
//!
//! Engines that give each transaction a snapshot by timestamp (pisces, volatile, mvcc)
//! share these. [`SlotClock::start`] is the reader's half of the store-buffering pattern
//! that the grace period ([`super::grace`]) closes: see its docs for the race.

use crate::engine::kit::shared_counts::count_write;
use crate::region::InRegion;
use crate::sync::{fence, AtomicU64};
use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed, Release, SeqCst};

/// `active_start` of a slot with no running transaction.
pub(crate) const INACTIVE: u64 = u64::MAX;
/// `active_start` of a slot whose transaction is starting (start timestamp unknown).
pub(crate) const STARTING: u64 = 0;

/// `globalTS`.
#[repr(C)]
#[derive(Debug)]
pub(crate) struct Clock {
    ts: AtomicU64,
}

// SAFETY: one atomic (set by its placer before use); `repr(C)`.
unsafe impl InRegion for Clock {}

impl Clock {
    /// A clock starting at `ts` (≥ 1, so that `STARTING` is below every timestamp).
    pub(crate) fn new(ts: u64) -> Self {
        Clock {
            ts: AtomicU64::new(ts.max(1)),
        }
    }
    /// The current value. Acquire: a reader of value v sees everything the committer
    /// that produced v did before its increment (its endTS and copy contents).
    #[inline]
    pub(crate) fn now(&self) -> u64 {
        self.ts.load(Acquire)
    }
    /// The current value without ordering (Pisces' concurrency commit reads it between
    /// its own fences, see `TxRecord::commit`).
    #[inline]
    pub(crate) fn peek(&self) -> u64 {
        self.ts.load(Relaxed)
    }
    /// Advance the clock by one and return the new value, which no other caller gets
    /// (the `mvcc` baseline's commit timestamps; Pisces commits through
    /// `TxRecord::commit`). Release: a thread whose [`Clock::now`] returns this value
    /// or a later one (later increments are RMWs, so they continue the release
    /// sequence) sees everything the caller did before, e.g. the locks it holds.
    #[inline]
    pub(crate) fn tick(&self) -> u64 {
        count_write(&self.ts);
        self.ts.fetch_add(1, AcqRel) + 1
    }
    /// Raise the clock to at least `ts` (single-threaded recovery that re-executes
    /// transactions under their original timestamps: the next `tick` gives `ts + 1`;
    /// a shared pool's recovery of a commit whose owner died before its tick).
    #[inline]
    pub(crate) fn advance_to(&self, ts: u64) {
        count_write(&self.ts);
        self.ts.fetch_max(ts, AcqRel);
    }
}

/// Per-slot published start timestamp.
#[repr(C)]
#[derive(Debug)]
pub(crate) struct SlotClock {
    active_start: AtomicU64,
}

// SAFETY: one atomic (set to `INACTIVE` by its placer before use); `repr(C)`.
unsafe impl InRegion for SlotClock {}

impl Default for SlotClock {
    fn default() -> Self {
        SlotClock {
            active_start: AtomicU64::new(INACTIVE),
        }
    }
}

impl SlotClock {
    /// TM_START (lines 2-4): become active, fence, then read `globalTS`.
    ///
    /// Race closed: a committer increments `globalTS`, fences, and scans the slots (the
    /// grace period); it must not miss a reader whose start timestamp predates the
    /// increment. With a fence on both sides, either our clock load sees the increment
    /// (then our snapshot includes the committer) or its scan sees `STARTING` / our
    /// start timestamp, both below its `endTS`, and it waits for us.
    #[inline]
    pub(crate) fn start(&self, clock: &Clock) -> u64 {
        self.active_start.store(STARTING, Relaxed);
        fence(SeqCst);
        let ts = clock.now();
        // Release: nothing to publish really; the scan only compares the value, and
        // STARTING (already visible to it after our fence) is the conservative one.
        self.active_start.store(ts, Release);
        ts
    }

    /// [`SlotClock::start`] with a snapshot derived from the clock value before it is
    /// published: `snapshot(t)` must return at most `t`. While it runs, the slot shows
    /// `STARTING` (a scan treats it as older than everything). Used by timestone, whose
    /// snapshot is the newest timestamp below which every commit is complete.
    #[inline]
    pub(crate) fn start_with(&self, clock: &Clock, snapshot: impl FnOnce(u64) -> u64) -> u64 {
        self.active_start.store(STARTING, Relaxed);
        fence(SeqCst);
        let t = clock.now();
        let s = snapshot(t);
        debug_assert!(s <= t);
        self.active_start.store(s, Release);
        s
    }

    /// TM_COMMIT line 33 / abort: this slot reads nothing any more. Release suffices:
    /// a grace-period waiter that sees INACTIVE must also see that our reads are done,
    /// which program order before a Release store gives.
    #[inline]
    pub(crate) fn finish(&self) {
        self.active_start.store(INACTIVE, Release);
    }

    /// The published value (for grace periods and diagnostics). Acquire pairs with
    /// `finish`: after seeing INACTIVE, the reader's reads are over.
    #[inline]
    pub(crate) fn load(&self) -> u64 {
        self.active_start.load(Acquire)
    }
}

/// A thread slot of the engines that publish, beside the start timestamp, a guard of
/// the slot's commit in flight (mvcc, timestone): each engine says what `committing`
/// bounds and when it stores it; `u64::MAX` means no commit in flight.
///
/// The two words are on separate cache lines: every transaction of the slot's thread
/// writes its start timestamp twice (begin and end), while `committing` changes only
/// around its update commits, and other threads read `committing` of every slot at
/// each begin (timestone's snapshot horizon, mvcc's): on one line, each of those reads
/// would take the line from its owner, which writes it again at once.
pub(crate) struct CommitSlot {
    /// Published start timestamp.
    pub clock: crossbeam_utils::CachePadded<SlotClock>,
    /// The guard of the commit in flight (`u64::MAX`: none).
    pub committing: crossbeam_utils::CachePadded<std::sync::atomic::AtomicU64>,
}

impl CommitSlot {
    /// `n` idle slots (each word on its own cache line).
    pub(crate) fn slots(n: usize) -> Vec<CommitSlot> {
        (0..n)
            .map(|_| CommitSlot {
                clock: crossbeam_utils::CachePadded::new(SlotClock::default()),
                committing: crossbeam_utils::CachePadded::new(std::sync::atomic::AtomicU64::new(
                    u64::MAX,
                )),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// No two of the slots' words that different writers store share a cache line
    /// (128 bytes: the adjacent-line prefetcher pairs 64-byte lines): a start
    /// timestamp, written at every begin and end of its thread, beside a guard that
    /// every other thread's begin reads would make each of those reads a miss.
    #[test]
    fn each_slots_start_and_guard_have_lines_of_their_own() {
        let slots = CommitSlot::slots(3);
        let mut lines: Vec<usize> = slots
            .iter()
            .flat_map(|s| {
                [
                    std::ptr::from_ref(&s.clock.active_start) as usize,
                    std::ptr::from_ref(&*s.committing) as usize,
                ]
            })
            .map(|a| a / 128)
            .collect();
        lines.sort_unstable();
        lines.dedup();
        assert_eq!(lines.len(), 6);
    }
}
