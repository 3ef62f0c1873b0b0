//! The DVCC timestamp protocol of Algorithm 1: start, visibility, concurrency commit and
//! the grace period.
//!
//! This is the part of Pisces where memory ordering decides correctness, so it is kept
//! small and is model-checked with `loom` (see `loom_tests` below, run under
//! `cfg(loom)`). Where the paper writes `fence` (lines 3 and 44), the code has an
//! explicit `fence(SeqCst)` between a store and a later load of another location,
//! paired with a fence on the other side of the race; the accesses themselves are
//! Acquire / Release. Both sides' fences are totally ordered, so at least one side sees
//! the other's store — the store-buffering pattern that Acquire / Release alone allow.
//! (Writing the fences explicitly rather than relying on SeqCst *accesses* is also what
//! lets loom check the protocol: loom models SeqCst fences exactly but treats SeqCst
//! accesses as AcqRel, and with SeqCst accesses it reports the races below as real.)
//!
//! * `globalTS` ([`Clock`]) is the only global counter.
//! * Each thread slot publishes `active_start`
//!   ([`SlotClock`](crate::engine::kit::cc::clock::SlotClock)): `INACTIVE`, `STARTING`
//!   (active, start timestamp not yet known), or the start timestamp. One word instead
//!   of the paper's separate `status` and `startTS` closes a race: a writer scanning
//!   slots could otherwise read `status == ACTIVE` together with a stale `startTS` from
//!   the thread's previous transaction.
//! * Each transaction has a [`TxRecord`] (`endTS`, `inCritical`): copies point to their
//!   writer's record, so group-committed transactions of one thread keep distinct
//!   `endTS` values.

use crate::engine::kit::cc::clock::Clock;
use crate::peers::Patience;
use crate::sync::{fence, AtomicBool, AtomicU64};
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release, SeqCst};

crate::mutation::point! {
    /// Readers do not wait while a writer is in its commit critical section (line 14 of
    /// the paper's algorithm).
    pub(crate) static IN_CRITICAL_WAIT = "in-critical-wait";
}

crate::mutation::hook_point! {
    /// A commit is in its critical section (`inCritical` set, `endTS` not yet):
    /// readers that meet its copies wait.
    pub(crate) static IN_CRITICAL = "in-critical";
}

/// `endTS` of a transaction that has not committed.
pub(super) const END_INFINITE: u64 = u64::MAX;

/// A transaction's commit record, pointed to (indirectly) by each of its copies.
#[derive(Debug)]
pub(crate) struct TxRecord {
    end_ts: AtomicU64,
    in_critical: AtomicBool,
    /// Slot of the thread that owns the transaction.
    pub slot: usize,
    /// The log sequence number of the transaction's redo record if it was appended
    /// without a fence (durability deferred), else 0: a reader of its copies then
    /// depends on a record that may not be durable yet (`thread`, *Deferred
    /// durability*). Stored before [`TxRecord::commit`], whose Release publishes it.
    pub unfenced_seq: AtomicU64,
}

impl TxRecord {
    /// A fresh, uncommitted record of slot `slot`.
    pub(crate) fn new(slot: usize) -> Self {
        TxRecord {
            end_ts: AtomicU64::new(END_INFINITE),
            in_critical: AtomicBool::new(false),
            slot,
            unfenced_seq: AtomicU64::new(0),
        }
    }

    /// Reset for reuse (only when no copy points at it any more).
    pub(crate) fn reset(&self) {
        self.end_ts.store(END_INFINITE, Release);
        self.in_critical.store(false, Release);
        self.unfenced_seq.store(0, Relaxed);
    }

    /// The concurrency-commit stage (lines 43-47). Returns `endTS`.
    ///
    /// Race closed (the paper's §3.1 store-buffer example): a reader whose start
    /// timestamp came from *another* committer's increment may check us between our
    /// clock load and our `endTS` store. The fence after `inCritical = true` pairs with
    /// the reader's fence in [`TxRecord::visible_to`] (between its clock load and its
    /// `inCritical` load): either the reader sees `inCritical == true` and waits for our
    /// `endTS`, or our clock load sees at least its start timestamp and so
    /// `endTS > startTS` whatever `endTS` it reads.
    /// The Release on `inCritical = false` publishes `endTS` and the copy contents to a
    /// reader that Acquires it; the Release increment does the same for a reader whose
    /// start timestamp is our increment.
    #[inline]
    pub(crate) fn commit(&self, clock: &Clock) -> u64 {
        self.in_critical.store(true, Relaxed);
        fence(SeqCst);
        #[cfg(not(loom))]
        crate::mutation::hook!(IN_CRITICAL, self.slot);
        let end = clock.peek() + 1;
        self.end_ts.store(end, Relaxed);
        self.in_critical.store(false, Release);
        clock.tick();
        end
    }

    /// Lines 14-15: wait while the writer is in its critical section, then decide
    /// whether its copy belongs to the snapshot of a transaction started at `start_ts`.
    /// The fence pairs with the one in [`TxRecord::commit`] (see there); it is only on
    /// this slow path (the object is locked), never on the read fast path.
    #[inline]
    pub(crate) fn visible_to(&self, start_ts: u64) -> bool {
        fence(SeqCst);
        // (The writer's process may have died in its critical section, in a shared
        // pool: the wait then gives up, `crate::peers`.)
        let mut patience = Patience::new();
        while self.in_critical.load(Acquire) && !crate::mutation::active!(IN_CRITICAL_WAIT) {
            patience.step((self as *const TxRecord).cast(), Some(self.slot as u32));
        }
        self.end_ts.load(Acquire) <= start_ts
    }

    /// End the critical section of a commit whose owner died inside it after storing
    /// `endTS` (a shared pool's recovery of its slot): the clock raised to `endTS` (the
    /// owner's tick may not have run), then `inCritical` cleared, Release as in
    /// [`TxRecord::commit`].
    pub(crate) fn finish_commit(&self, clock: &Clock) {
        clock.advance_to(self.end_ts.load(Acquire));
        self.in_critical.store(false, Release);
    }

    /// Whether the record's owner is inside its critical section ([`TxRecord::commit`]).
    #[inline]
    pub(crate) fn in_critical(&self) -> bool {
        self.in_critical.load(Acquire)
    }

    /// `endTS` (END_INFINITE while uncommitted).
    #[inline]
    pub(crate) fn end_ts(&self) -> u64 {
        self.end_ts.load(Acquire)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// A reader that meets a writer in its critical section waits for it, unless the
    /// writer's slot belongs to a process that died (the record in a watched mapping,
    /// `crate::peers`): it then gives up, naming the slot, instead of waiting for ever.
    #[test]
    fn a_reader_gives_up_on_a_dead_writer_in_its_critical_section() {
        let records = [TxRecord::new(3), TxRecord::new(2)];
        let len = std::mem::size_of::<TxRecord>();
        // One pool per record: the first give-up stops its pool.
        let _peers = records
            .each_ref()
            .map(|r| crate::peers::OneDead::watching(3, std::ptr::from_ref(r) as usize, len));
        records[0].in_critical.store(true, Relaxed);
        assert_eq!(
            crate::peers::catch(|| records[0].visible_to(5)).err(),
            Some(3)
        );
        // Alive: waited for until it leaves the section.
        std::thread::scope(|s| {
            records[1].in_critical.store(true, Relaxed);
            let reader = s.spawn(|| records[1].visible_to(5));
            std::thread::sleep(std::time::Duration::from_millis(5));
            records[1].end_ts.store(4, Relaxed);
            records[1].in_critical.store(false, Release);
            assert!(reader.join().unwrap(), "committed at 4, visible at 5");
        });
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    //! Model checks, run by `.ci/run` as
    //! `RUSTFLAGS="--cfg loom" cargo test -p pisces --release --lib loom_`.
    use super::*;
    use crate::engine::kit::cc::clock::SlotClock;
    use crate::engine::kit::cc::grace::wait_for_readers;
    use loom::sync::atomic::AtomicU64 as LAtomicU64;
    use loom::sync::Arc;
    use std::sync::atomic::Ordering::{Acquire, Release};

    /// (1) Reader / committer race on inCritical and endTS. Committer 1 publishes a
    /// copy and commits; committer 2 commits concurrently (it advances globalTS, which
    /// is what lets a reader start *after* committer 1 read the clock but *before* it
    /// stored its endTS); a reader starts concurrently. Snapshot rule: the reader takes
    /// the copy exactly when its start timestamp is at least committer 1's endTS, and if
    /// it takes the copy, the copy's content written before commit is visible.
    fn reader_committer_race() {
        reader_committer_race_with(|rec, clock| rec.commit(clock));
    }

    /// Committer 1's critical section cut short after its endTS store, as by its
    /// process's death there, then ended by the thread that recovers its slot in a
    /// shared pool ([`TxRecord::finish_commit`]). One model thread does both: the
    /// recovery follows the death, which the kernel's release of the slot's lock
    /// orders before it.
    fn commit_cut_short_then_recovered(rec: &TxRecord, clock: &Clock) -> u64 {
        rec.in_critical.store(true, Relaxed);
        fence(SeqCst);
        let end = clock.peek() + 1;
        rec.end_ts.store(end, Relaxed);
        // (The owner dies here: no `inCritical = false`, no tick.)
        rec.finish_commit(clock);
        end
    }

    /// (1') The race of (1) where committer 1 dies inside its critical section and a
    /// recoverer ends it: the same snapshot rule holds.
    #[test]
    fn loom_a_critical_section_ended_by_a_recoverer_keeps_the_snapshot_rule() {
        #[cfg(feature = "mutation")]
        let _unmutated = crate::mutation::Unmutated::hold();
        reader_committer_race_with(commit_cut_short_then_recovered);
    }

    fn reader_committer_race_with(commit: fn(&TxRecord, &Clock) -> u64) {
        loom::model(move || {
            let clock = Arc::new(Clock::new(1));
            let rec = Arc::new(TxRecord::new(0));
            let content = Arc::new(LAtomicU64::new(0));
            let end_seen = Arc::new(LAtomicU64::new(0));
            let w1 = {
                let (clock, rec, content, end_seen) = (
                    clock.clone(),
                    rec.clone(),
                    content.clone(),
                    end_seen.clone(),
                );
                loom::thread::spawn(move || {
                    content.store(42, Relaxed);
                    let end = commit(&rec, &clock);
                    end_seen.store(end, Release);
                })
            };
            let w2 = {
                let clock = clock.clone();
                loom::thread::spawn(move || {
                    TxRecord::new(1).commit(&clock);
                })
            };
            let r = {
                let (clock, rec, content) = (clock.clone(), rec.clone(), content.clone());
                loom::thread::spawn(move || {
                    let reader_slot = SlotClock::default();
                    let start = reader_slot.start(&clock);
                    let visible = rec.visible_to(start);
                    if visible {
                        assert_eq!(content.load(Relaxed), 42, "copy visible before its content");
                    }
                    (start, visible)
                })
            };
            let (start, visible) = r.join().unwrap();
            w1.join().unwrap();
            w2.join().unwrap();
            let end = end_seen.load(Acquire);
            assert_eq!(
                visible,
                end <= start,
                "visibility must follow endTS <= startTS"
            );
        });
    }

    #[test]
    fn loom_reader_sees_every_copy_committed_before_its_start() {
        // The model runs the `inCritical` wait, which a mutation scenario of another
        // test may remove: keep scenarios out meanwhile (no heap does it here).
        #[cfg(feature = "mutation")]
        let _unmutated = crate::mutation::Unmutated::hold();
        reader_committer_race();
    }

    /// Mutation evidence: without the `inCritical` wait, the model finds the race.
    #[cfg(feature = "mutation")]
    #[test]
    #[should_panic(expected = "visibility must follow")]
    fn loom_incritical_wait_is_needed() {
        let sc = crate::mutation::Scenario::setup();
        // SAFETY: a mutation test: the run exists to show the removed step matters, and its
        // outcome is read only as that evidence (see `pisces::mutation::Scenario::set`).
        unsafe { sc.set(Some(&super::IN_CRITICAL_WAIT)) };
        reader_committer_race();
    }

    use std::sync::atomic::Ordering::Relaxed;

    /// (2) Grace period against a reader that starts during write-back. The writer
    /// commits, waits for readers, then overwrites home (`home = 2`). A reader that
    /// started before the writer's endTS must never see the new home value, and one
    /// that reads home must see a value consistent with its snapshot.
    #[test]
    fn loom_grace_period_protects_old_snapshots() {
        grace_model(true);
    }

    /// The model fails without the grace period (so it does check it).
    #[test]
    #[should_panic(expected = "snapshot")]
    fn loom_grace_period_is_needed() {
        grace_model(false);
    }

    fn grace_model(with_grace: bool) {
        // The reader's `visible_to` runs the `inCritical` wait, which a mutation scenario
        // of another test may remove: keep scenarios out meanwhile.
        #[cfg(feature = "mutation")]
        let _unmutated = crate::mutation::Unmutated::hold();
        loom::model(move || {
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
                    if with_grace {
                        wait_for_readers(slots.iter().map(|b| &**b), 0, end);
                    }
                    home.store(2, Relaxed);
                    locked.store(false, Release);
                })
            };
            let r = {
                let (clock, slots, rec, home, locked) = (
                    clock.clone(),
                    slots.clone(),
                    rec.clone(),
                    home.clone(),
                    locked.clone(),
                );
                loom::thread::spawn(move || {
                    let me = &slots[1];
                    let start = me.start(&clock);
                    // TM_READ: header non-empty -> check the writer; empty -> home.
                    let read = || {
                        if locked.load(Acquire) && rec.visible_to(start) {
                            2
                        } else {
                            home.load(Relaxed)
                        }
                    };
                    let value = read();
                    // Read again: a snapshot never changes inside one transaction.
                    let again = read();
                    me.finish();
                    (start, value, again)
                })
            };
            let (start, value, again) = r.join().unwrap();
            w.join().unwrap();
            let end = rec.end_ts();
            let expected = if end <= start { 2 } else { 1 };
            assert_eq!(value, expected, "read outside the snapshot");
            assert_eq!(again, expected, "snapshot changed within a transaction");
        });
    }
}
