//! The serial fallback of the optimistic engines (`sp3`, `spht`, and the snapshot
//! engines `pisces`, `mvcc`, `timestone`): a bound on the attempts of a transaction
//! that keeps aborting.
//!
//! # Why
//! An optimistic engine without old versions aborts a reader whenever a writer
//! replaces something it read before it commits. A snapshot engine lets readers
//! through but not an update of an object that a commit changed after the snapshot
//! (first updater or first committer wins). Either way, a transaction that runs
//! longer than the gap between two writes of what it reads (or updates) would abort
//! for as long as the writers run. `run` retries with back-off, but back-off only slows
//! the retrying thread, not the writers.
//!
//! # The rule
//! A transaction that aborted [`THRESHOLD`] times in a row on conflicts (counted by
//! [`Retries`] from `run`'s `after_abort` calls) takes the pool's fallback word before
//! its next attempt, waits for the update transactions already running to leave
//! (engine-specific, see each engine's `begin`), and runs its attempt while other
//! update transactions wait instead of committing ([`Fallback::blocks`],
//! [`Fallback::wait`]). Nothing else changes: the attempt reads, validates and
//! commits exactly as any other (so serializability and crash safety are the
//! engine's), it just meets no concurrent writer. The fast path pays one load of the
//! fallback word (a line that is written only when a transaction falls back).
//!
//! # Bounds (no wait is unbounded)
//! * Writers wait for a holder only until the holder's **deadline**: twice the longest
//!   aborted attempt of the holder's transaction plus [`FLOOR`], set when it takes the
//!   word for an attempt. A holder never keeps the word outside an attempt: it gives it
//!   back at the end of every attempt and takes it again for the next one. So a holder
//!   that itself waits for a writer — a nested transaction of another pool whose own
//!   holder waits for this pool, a thread-slot checkout while writers hold the slots,
//!   a closure that polls for another thread's update — holds them up at most until
//!   its deadline; then they commit as usual, the holder's attempt may abort, and its
//!   next deadline is at least twice as long. No cycle of waits can be permanent.
//! * A holder's attempt therefore aborts only if a writer outlived the drain or the
//!   deadline passed; each such abort at least doubles the next deadline, so a
//!   transaction whose attempts take a bounded time commits within a bounded number
//!   of attempts (in the common case the first attempt under the word commits).
//! * A transaction that finds the word taken when it wants it waits like a writer
//!   (bounded), tries once more, and otherwise runs its attempt without it.

use crate::engine::kit::cc::clock::{Clock, CommitSlot, SlotClock};
use crate::engine::kit::shared_counts::count_write;
use crate::sync::spin_step;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use std::time::{Duration, Instant};

/// Consecutive conflict aborts after which a transaction takes the fallback word.
pub(crate) const THRESHOLD: u32 = 8;
/// The least time a holder may keep writers waiting for one attempt.
pub(crate) const FLOOR: Duration = Duration::from_millis(10);

const SLOT_BITS: u32 = 16;
const SLOT_MASK: u64 = (1 << SLOT_BITS) - 1;

/// A pool's fallback word.
#[repr(C)]
#[derive(Debug, Default)]
pub(crate) struct Fallback {
    /// 0: free; else `deadline_ms << 16 | (holder slot + 1)`, the deadline in
    /// milliseconds of the system's monotonic clock ([`monotonic_ms`]). One word, so
    /// writers never see a holder without its deadline; and a time every process of
    /// the machine reads alike, so that the word means the same to all of them.
    word: AtomicU64,
}

// SAFETY: one atomic word, 0 when free; `repr(C)`.
unsafe impl crate::region::InRegion for Fallback {}

/// Milliseconds of `CLOCK_MONOTONIC`: one clock for every process of the machine (a
/// `std::time::Instant` has no origin another process could share). 48 bits of
/// milliseconds, what the word keeps of a deadline, last thousands of years of uptime.
fn monotonic_ms() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_MONOTONIC always exists on
    // Linux, so the call cannot fail (its result is checked in debug builds).
    let r = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    debug_assert_eq!(r, 0);
    ts.tv_sec as u64 * 1000 + ts.tv_nsec as u64 / 1_000_000
}

impl Fallback {
    fn now_ms(&self) -> u64 {
        monotonic_ms()
    }

    /// True if slot `me` must not commit an update now: another slot holds the word and
    /// its deadline has not passed. Relaxed: callers place the load after their own
    /// SeqCst fence, which with the holder's fence after its store ([`Fallback::take`])
    /// closes the store-buffering race (see the engines).
    #[inline]
    pub(crate) fn blocks(&self, me: usize) -> bool {
        let w = self.word.load(Relaxed);
        w != 0 && self.blocks_slow(w, me)
    }

    #[cold]
    fn blocks_slow(&self, w: u64, me: usize) -> bool {
        w & SLOT_MASK != me as u64 + 1 && self.now_ms() < w >> SLOT_BITS
    }

    /// True while a holder is within its deadline (a holder bounds its drain with it).
    pub(crate) fn held(&self) -> bool {
        let w = self.word.load(Relaxed);
        w != 0 && self.now_ms() < w >> SLOT_BITS
    }

    /// Wait (outside any transaction, holding nothing) while [`Fallback::blocks`] says
    /// so for `me`: at most until the holder's deadline, or a later one if the holder
    /// takes the word for another attempt (bounded, module docs).
    pub(crate) fn wait(&self, me: usize) {
        let mut round = 0u32;
        while self.blocks(me) {
            round += 1;
            if round < 64 {
                std::hint::spin_loop();
            } else if round < 256 {
                std::thread::yield_now();
            } else {
                std::thread::sleep(Duration::from_micros(200));
            }
        }
    }

    /// Take the word for slot `me` with writers held up to `budget` from now; false if
    /// another slot holds it. The caller fences (SeqCst) before it looks for running
    /// writers: the fence pairs with the writers' fence before [`Fallback::blocks`].
    pub(crate) fn take(&self, me: usize, budget: Duration) -> bool {
        debug_assert!((me as u64) < SLOT_MASK, "slot {me} does not fit the word");
        let deadline = self.now_ms() + budget.as_millis() as u64 + 1;
        // Acquire: pairs with the previous holder's Release in `give_back`, so its
        // attempt is over before ours starts. The race with writers is not closed
        // here but by the SeqCst fences after this store and before their loads.
        count_write(&self.word);
        self.word
            .compare_exchange(0, deadline << SLOT_BITS | (me as u64 + 1), Acquire, Relaxed)
            .is_ok()
    }

    /// Give the word back for slot `dead`, if it holds it: its process died (a shared
    /// pool's recovery of the slot). Writers stopped waiting at its deadline, but the
    /// word would stay taken, and no transaction could fall back again.
    pub(crate) fn give_back_for(&self, dead: usize) {
        let w = self.word.load(Relaxed);
        if w != 0 && w & SLOT_MASK == dead as u64 + 1 {
            // Release: as in `give_back`; a failed exchange means it changed hands.
            count_write(&self.word);
            let _ = self.word.compare_exchange(w, 0, Release, Relaxed);
        }
    }

    /// Give the word back (holder `me` only).
    pub(crate) fn give_back(&self, me: usize) {
        debug_assert_eq!(self.word.load(Relaxed) & SLOT_MASK, me as u64 + 1);
        // Release: the next holder (Acquire in `take`) starts after our attempt ended.
        // Writers need no order from it: every commit validates as usual.
        count_write(&self.word);
        self.word.store(0, Release);
    }
}

/// The holder's drain for the engines whose slots publish a start value from a clock
/// ([`SlotClock::start`]): tick `clock`, fence, and wait until every other slot that
/// started before the tick has ended, as in a grace period, or until the holder's
/// deadline passes.
///
/// Race closed (store buffering): the holder stored the word ([`Retries::take`]),
/// ticks (Release) and fences (SeqCst) before it scans the slots; a starting
/// transaction stores `STARTING`, fences and loads the clock in
/// [`SlotClock::start`], and loads the word later, before it takes its first lock
/// (the engine's, see each). Either the scan sees the starter's slot below the tick
/// (and waits for it to end), or the starter's clock load sees the tick, whose
/// Release makes the word visible to its later load. The tick is a timestamp no commit
/// takes: the engines that use the clock for commit timestamps allow gaps (an aborted
/// validation leaves one too).
pub(crate) fn drain<'a>(
    fb: &Fallback,
    clock: &Clock,
    slots: impl Iterator<Item = &'a SlotClock>,
    me: usize,
) {
    let e = clock.tick();
    crate::sync::fence(std::sync::atomic::Ordering::SeqCst);
    for (i, s) in slots.enumerate() {
        if i == me {
            continue;
        }
        let mut round = 0;
        while s.load() < e && fb.held() {
            spin_step(&mut round);
        }
    }
}

/// One thread's count of consecutive conflict aborts of the transaction `run` is
/// retrying, and whether it holds the fallback word.
#[derive(Debug, Default)]
pub(crate) struct Retries {
    /// `after_abort` was called since the last `begin`: the next `begin` is a retry.
    retry: bool,
    /// Conflict aborts in a row of the current `run`.
    conflicts: u32,
    /// Longest attempt measured so far (attempts after the first; from `begin` to
    /// `after_abort`).
    longest: Duration,
    /// Start of the current attempt, if it is measured.
    started: Option<Instant>,
    /// This thread holds the fallback word for the current attempt.
    holding: bool,
}

impl Retries {
    /// At `begin`: count the attempt; true if it must take the fallback word (the
    /// caller then calls [`Retries::take`]). Costs a branch on the first attempt.
    #[inline(always)]
    pub(crate) fn begin(&mut self) -> bool {
        // A retry always follows a conflict, so `conflicts` is 0 on the first attempt
        // of a run whose predecessor never retried: one compare in the common case.
        if self.conflicts == 0 {
            return false;
        }
        self.begin_counted()
    }

    #[cold]
    fn begin_counted(&mut self) -> bool {
        if !self.retry {
            // The first attempt of a new run: forget the last run's counts.
            self.conflicts = 0;
            self.longest = Duration::ZERO;
            self.started = None;
            return false;
        }
        self.retry = false;
        self.started = Some(Instant::now());
        self.conflicts >= THRESHOLD
    }

    /// Take the word for slot `me` (see the module docs): waits for another holder
    /// (bounded) and tries once more. True if this attempt holds it.
    pub(crate) fn take(&mut self, fb: &Fallback, me: usize) -> bool {
        debug_assert!(!self.holding);
        let budget = 2 * self.longest + FLOOR;
        if !fb.take(me, budget) {
            fb.wait(me);
            if !fb.take(me, budget) {
                return false;
            }
        }
        self.holding = true;
        // The drain and the attempt are measured together.
        self.started = Some(Instant::now());
        true
    }

    /// `begin` of a retry that must take the word ([`Retries::begin`] said so), for the
    /// engines whose slots publish a start value: take it for slot `me` and [`drain`].
    /// A nested transaction never takes it: its drain would wait for other
    /// transactions of the pool (`EngineThread::set_nested`).
    #[cold]
    #[inline(never)]
    pub(crate) fn take_and_drain<'a>(
        &mut self,
        fb: &Fallback,
        clock: &Clock,
        slots: impl Iterator<Item = &'a SlotClock>,
        me: usize,
        nested: bool,
    ) {
        if !nested && self.take(fb, me) {
            drain(fb, clock, slots, me);
        }
    }

    /// [`Retries::take_and_drain`] with the start values of the kit's commit slots
    /// (the engines that keep a [`CommitSlot`] per thread).
    #[cold]
    #[inline(never)]
    pub(crate) fn take_and_drain_slots(
        &mut self,
        fb: &Fallback,
        clock: &Clock,
        slots: &[CommitSlot],
        me: usize,
        nested: bool,
    ) {
        self.take_and_drain(fb, clock, slots.iter().map(|s| &*s.clock), me, nested);
    }

    /// At the end of every attempt (commit, abort): give the word back.
    #[inline]
    pub(crate) fn end(&mut self, fb: &Fallback, me: usize) {
        if self.holding {
            self.holding = false;
            fb.give_back(me);
        }
    }

    /// `run`'s `after_abort` (a conflict, a retry follows): count it and measure the
    /// attempt.
    pub(crate) fn after_abort(&mut self) {
        self.retry = true;
        self.conflicts = self.conflicts.saturating_add(1);
        if let Some(t) = self.started.take() {
            self.longest = self.longest.max(t.elapsed());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_holder_blocks_the_others_until_it_gives_back() {
        let fb = Fallback::default();
        assert!(!fb.blocks(0) && !fb.blocks(1));
        assert!(fb.take(0, Duration::from_secs(60)));
        assert!(!fb.take(1, Duration::from_secs(60)), "a second holder");
        assert!(!fb.blocks(0), "the holder blocks itself");
        assert!(fb.blocks(1) && fb.held());
        fb.give_back(0);
        assert!(!fb.blocks(1) && !fb.held());
        assert!(fb.take(1, Duration::from_secs(60)));
    }

    /// A holder that never gives the word back (its attempt waits for something that
    /// waits for it) holds the others up only until its deadline.
    #[test]
    fn the_deadline_bounds_every_wait() {
        let fb = Fallback::default();
        assert!(fb.take(0, Duration::from_millis(30)));
        // The deadline is a time of the system's monotonic clock, which every process
        // reads alike, not of an origin of this one.
        let left = (fb.word.load(Relaxed) >> SLOT_BITS).saturating_sub(monotonic_ms());
        assert!((25..=31).contains(&left), "{left} ms left");
        let t = Instant::now();
        fb.wait(1);
        let waited = t.elapsed();
        assert!(waited >= Duration::from_millis(25), "{waited:?}");
        assert!(waited < Duration::from_secs(5), "{waited:?}");
        assert!(!fb.blocks(1) && !fb.held());
    }

    #[test]
    fn retries_count_consecutive_conflicts_of_one_run() {
        let fb = Fallback::default();
        let mut r = Retries::default();
        assert!(!r.begin(), "a first attempt");
        for _ in 1..THRESHOLD {
            r.after_abort();
            assert!(!r.begin());
        }
        r.after_abort();
        assert!(r.begin(), "after THRESHOLD conflicts in a row");
        assert!(r.take(&fb, 3) && fb.blocks(0) && !fb.blocks(3));
        r.end(&fb, 3);
        assert!(!fb.blocks(0), "given back at the end of the attempt");
        r.after_abort();
        assert!(r.begin(), "still over the threshold on the next retry");
        assert!(
            !r.begin(),
            "a begin without after_abort is a new transaction"
        );
        // The budget grows with the longest aborted attempt.
        r.after_abort();
        r.begin();
        std::thread::sleep(Duration::from_millis(20));
        r.after_abort();
        assert!(r.longest >= Duration::from_millis(20));
    }
}
