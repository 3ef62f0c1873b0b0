//! The DVCC timestamp protocol of Algorithm 1: start, visibility, concurrency commit and
//! the grace period.
//!
//! This is the part of Pisces where memory ordering decides correctness, so it is kept
//! small and is model-checked with `loom` (see `tests` below, run under `cfg(loom)`).
//! All the operations that the paper separates with a `fence` use `SeqCst`: the
//! arguments below rely on one total order of those loads and stores (store → load
//! ordering across two locations is exactly what weaker orderings do not give).
//!
//! * `globalTS` ([`Clock`]) is the only global counter.
//! * Each thread slot publishes `active_start` ([`SlotClock`]): `INACTIVE`, `STARTING`
//!   (active, start timestamp not yet known), or the start timestamp. One word instead
//!   of the paper's separate `status` and `startTS` closes a race: a writer scanning
//!   slots could otherwise read `status == ACTIVE` together with a stale `startTS` from
//!   the thread's previous transaction.
//! * Each transaction has a [`TxRecord`] (`endTS`, `inCritical`): copies point to their
//!   writer's record, so group-committed transactions of one thread keep distinct
//!   `endTS` values.

use crate::sync::{spin_step, AtomicBool, AtomicU64};
use std::sync::atomic::Ordering::{Acquire, Release, SeqCst};

/// `active_start` of a slot with no running transaction.
pub const INACTIVE: u64 = u64::MAX;
/// `active_start` of a slot whose transaction is starting (start timestamp unknown).
pub const STARTING: u64 = 0;
/// `endTS` of a transaction that has not committed.
pub const END_INFINITE: u64 = u64::MAX;

/// `globalTS`.
#[derive(Debug)]
pub struct Clock {
    ts: AtomicU64,
}

impl Clock {
    /// A clock starting at `ts` (≥ 1, so that `STARTING` is below every timestamp).
    pub fn new(ts: u64) -> Self {
        Clock {
            ts: AtomicU64::new(ts.max(1)),
        }
    }
    /// The current value.
    #[inline]
    pub fn now(&self) -> u64 {
        self.ts.load(SeqCst)
    }
}

/// Per-slot published start timestamp.
#[derive(Debug)]
pub struct SlotClock {
    active_start: AtomicU64,
}

impl Default for SlotClock {
    fn default() -> Self {
        SlotClock {
            active_start: AtomicU64::new(INACTIVE),
        }
    }
}

impl SlotClock {
    /// TM_START (lines 2-4): become active, then read `globalTS`.
    ///
    /// Race closed: a committer that increments `globalTS` and then scans the slots must
    /// not miss a reader whose start timestamp predates the increment. Publishing
    /// `STARTING` before loading the clock (both SeqCst) puts the publication before the
    /// load in the total order, so such a committer sees `STARTING` or the start
    /// timestamp, both below its `endTS`, and waits.
    #[inline]
    pub fn start(&self, clock: &Clock) -> u64 {
        self.active_start.store(STARTING, SeqCst);
        let ts = clock.ts.load(SeqCst);
        self.active_start.store(ts, SeqCst);
        ts
    }

    /// TM_COMMIT line 33 / abort: this slot reads nothing any more. Release suffices:
    /// a grace-period waiter that sees INACTIVE must also see that our reads are done,
    /// which program order before a Release store gives.
    #[inline]
    pub fn finish(&self) {
        self.active_start.store(INACTIVE, Release);
    }

    /// The published value (for grace periods and diagnostics).
    #[inline]
    pub fn load(&self) -> u64 {
        self.active_start.load(SeqCst)
    }
}

/// A transaction's commit record, pointed to (indirectly) by each of its copies.
#[derive(Debug)]
pub struct TxRecord {
    end_ts: AtomicU64,
    in_critical: AtomicBool,
    /// Slot of the thread that owns the transaction.
    pub slot: usize,
}

impl TxRecord {
    /// A fresh, uncommitted record of slot `slot`.
    pub fn new(slot: usize) -> Self {
        TxRecord {
            end_ts: AtomicU64::new(END_INFINITE),
            in_critical: AtomicBool::new(false),
            slot,
        }
    }

    /// Reset for reuse (only when no copy points at it any more).
    pub fn reset(&self) {
        self.end_ts.store(END_INFINITE, Release);
        self.in_critical.store(false, Release);
    }

    /// The concurrency-commit stage (lines 43-47). Returns `endTS`.
    ///
    /// Race closed (the paper's §3.1 store-buffer example): `inCritical = true` must be
    /// ordered before the load of `globalTS`, so that a reader that saw `inCritical ==
    /// false` *before* we set it necessarily read its own start timestamp before our
    /// clock load, and therefore has `startTS < endTS` whatever `endTS` it reads.
    /// SeqCst on both gives that order. The Release on `inCritical = false` (SeqCst
    /// here) publishes `endTS` and the copy contents written before it to a reader that
    /// Acquires `inCritical == false`.
    #[inline]
    pub fn commit(&self, clock: &Clock) -> u64 {
        self.in_critical.store(true, SeqCst);
        let end = clock.ts.load(SeqCst) + 1;
        self.end_ts.store(end, SeqCst);
        self.in_critical.store(false, SeqCst);
        clock.ts.fetch_add(1, SeqCst);
        end
    }

    /// Lines 14-15: wait while the writer is in its critical section, then decide
    /// whether its copy belongs to the snapshot of a transaction started at `start_ts`.
    #[inline]
    pub fn visible_to(&self, start_ts: u64) -> bool {
        let mut round = 0;
        while self.in_critical.load(SeqCst) {
            spin_step(&mut round);
        }
        self.end_ts.load(SeqCst) <= start_ts
    }

    /// `endTS` (END_INFINITE while uncommitted).
    #[inline]
    pub fn end_ts(&self) -> u64 {
        self.end_ts.load(Acquire)
    }
}

/// The grace period (lines 52-54): wait until no slot other than `own_slot` runs a
/// transaction that started before `end_ts`.
///
/// Slots are read with SeqCst so that this scan is ordered after the caller's
/// `globalTS` increment (see [`SlotClock::start`]).
pub fn wait_for_readers<'a>(
    slots: impl IntoIterator<Item = &'a SlotClock>,
    own_slot: usize,
    end_ts: u64,
) {
    for (i, s) in slots.into_iter().enumerate() {
        if i == own_slot {
            continue;
        }
        let mut round = 0;
        while s.load() < end_ts {
            spin_step(&mut round);
        }
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    //! Model checks, run by `.ci/run` as
    //! `RUSTFLAGS="--cfg loom" cargo test -p pisces --release --lib loom_`.
    use super::*;
    use loom::sync::atomic::AtomicU64 as LAtomicU64;
    use loom::sync::Arc;
    use std::sync::atomic::Ordering::{Acquire, Release};

    /// (1) Reader / committer race on inCritical and endTS. A committer publishes a copy
    /// (the `copy` word) and commits; a reader starts concurrently. Snapshot rule: if the
    /// reader's start timestamp is at least the committer's endTS, it must take the copy;
    /// and if it takes the copy, the copy's content written before commit is visible.
    #[test]
    fn loom_reader_sees_every_copy_committed_before_its_start() {
        loom::model(|| {
            let clock = Arc::new(Clock::new(1));
            let rec = Arc::new(TxRecord::new(0));
            let content = Arc::new(LAtomicU64::new(0));
            let end_seen = Arc::new(LAtomicU64::new(0));
            let w = {
                let (clock, rec, content, end_seen) = (
                    clock.clone(),
                    rec.clone(),
                    content.clone(),
                    end_seen.clone(),
                );
                loom::thread::spawn(move || {
                    content.store(42, Relaxed);
                    let end = rec.commit(&clock);
                    end_seen.store(end, Release);
                })
            };
            let reader_slot = SlotClock::default();
            let start = reader_slot.start(&clock);
            let visible = rec.visible_to(start);
            if visible {
                assert_eq!(content.load(Relaxed), 42, "copy visible before its content");
            }
            w.join().unwrap();
            let end = end_seen.load(Acquire);
            assert_eq!(
                visible,
                end <= start,
                "visibility must follow endTS <= startTS"
            );
        });
    }
    use std::sync::atomic::Ordering::Relaxed;

    /// (2) Grace period against a reader that starts during write-back. The writer
    /// commits, waits for readers, then overwrites home (`home = 2`). A reader that
    /// started before the writer's endTS must never see the new home value, and one
    /// that reads home must see a value consistent with its snapshot.
    #[test]
    fn loom_grace_period_protects_old_snapshots() {
        loom::model(|| {
            let clock = Arc::new(Clock::new(1));
            let slots: Arc<Vec<Box<SlotClock>>> =
                Arc::new((0..2).map(|_| Box::new(SlotClock::default())).collect());
            let rec = Arc::new(TxRecord::new(0));
            let home = Arc::new(LAtomicU64::new(1));
            let locked = Arc::new(loom::sync::atomic::AtomicBool::new(true));
            let w = {
                let (clock, slots, rec, home, locked) = (
                    clock.clone(),
                    slots.clone(),
                    rec.clone(),
                    home.clone(),
                    locked.clone(),
                );
                loom::thread::spawn(move || {
                    // copy (value 2) already linked: `locked` is the header word.
                    let end = rec.commit(&clock);
                    wait_for_readers(slots.iter().map(|b| &**b), 0, end);
                    home.store(2, Relaxed);
                    locked.store(false, Release);
                })
            };
            let me = &slots[1];
            let start = me.start(&clock);
            // TM_READ: header non-empty -> check the writer; empty -> home.
            let value = if locked.load(Acquire) {
                if rec.visible_to(start) {
                    2
                } else {
                    home.load(Relaxed)
                }
            } else {
                home.load(Relaxed)
            };
            // Read again: a snapshot never changes inside one transaction.
            let again = if locked.load(Acquire) {
                if rec.visible_to(start) {
                    2
                } else {
                    home.load(Relaxed)
                }
            } else {
                home.load(Relaxed)
            };
            me.finish();
            w.join().unwrap();
            let end = rec.end_ts();
            let expected = if end <= start { 2 } else { 1 };
            assert_eq!(value, expected, "read outside the snapshot");
            assert_eq!(again, expected, "snapshot changed within a transaction");
        });
    }
}
