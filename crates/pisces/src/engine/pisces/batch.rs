//! A slot's batch: its committed transactions waiting for write-back, its attempts
//! waiting for a grace period, and its spare attempts, in rings and stacks of a fixed
//! capacity that hold attempts by [`AttemptId`].
//!
//! # Capacity
//! A slot has [`attempts_per_slot`] attempts, made with it ([`super::attempt`]); every
//! one is in exactly one place at a time: the slot thread's running or idle attempt,
//! the batch's entries, its retired list, or its spare stack. So none of the three
//! ever holds more than the slot's attempts, which is their capacity: they never grow,
//! and nothing in them is a pointer (what lets them live in memory another process
//! maps).
//!
//! The number is what the slot's commits need without waiting: the batch's limit
//! ([`batch_limit`], beyond which a commit writes the batch back and waits for the
//! grace period), the retired attempts a rollback lets accumulate before it reclaims
//! them ([`RETIRED_BEFORE_RECLAIM`]), and the thread's running and idle attempts. When
//! none is spare all the same (retired attempts whose grace period has not passed), the
//! thread's next `begin` reclaims them, waiting for their grace period
//! (`PiscesThread::prepare_attempt`), except in a transaction nested in another pool's,
//! which may not wait: that one runs without an attempt ([`AttemptId::NO_ROOM`]) and
//! aborts as a conflict at its first write.

//!
//! # A holder that dies
//! In a pool shared by processes, the thread that holds a batch's lock may die at any
//! instruction, and its recoverer must find each attempt in one list, or in none (then
//! it is the dead thread's own). So every change of a list is made whole by one store,
//! its *commit*: a push writes the value, then the count; a ring's front and length
//! are one word, so dropping its first values is one store. A compiler fence keeps the
//! compiler from moving the value's store after the count's (the processor keeps the
//! order of stores). An attempt moved from one list to another is pushed on the second
//! before it is dropped from the first: a death in between leaves it in both, and the
//! recoverer, which knows which moves a holder makes (the front of the entries to the
//! back of the retired ring, the front of the retired ring to the spare stack), drops
//! the older place (`PiscesShared::settle_batch`).

use super::arena::CopyArena;
use super::attempt::AttemptId;
use super::plan::Plan;
use crate::engine::kit::log::lazy_home::{UnsyncedRanges, UnsyncedState, UNSYNCED_RANGES};
use crate::holder_lock::HolderGuard;
use crate::region::{Guarded, InRegion, Placed, Region};
use crate::Result;
use std::sync::atomic::Ordering::{Relaxed, Release};
use std::sync::atomic::{compiler_fence, AtomicU64};
use std::sync::Arc;

/// How many group-commit batches' worth of committed transactions may wait for their
/// grace period before a commit waits for it (`PiscesShared::try_write_back`).
/// Transactions waiting keep their objects locked (readers take their copies, writers
/// of those objects abort and help) and their log records and copies in use, so the
/// backlog is bounded; 4 batches absorb a reader's transaction, or a few, on the other
/// threads. Large batches defer at most [`DEFER_MAX_EXTRA`] more (each attempt holds a
/// chunk of copy memory).
const DEFER_BATCHES: usize = 4;

/// The most committed transactions beyond a full batch that wait for their grace
/// period (see [`DEFER_BATCHES`]).
const DEFER_MAX_EXTRA: usize = 64;

/// Retired attempts a rollback lets accumulate before it reclaims them.
pub(crate) const RETIRED_BEFORE_RECLAIM: usize = 64;

/// The most committed transactions a batch of group size `k` holds before a commit
/// writes it back, waiting for the grace period (a nested transaction's commit leaves
/// them, up to the batch's capacity).
pub(crate) fn batch_limit(k: usize) -> usize {
    k.saturating_mul(DEFER_BATCHES)
        .min(k.saturating_add(DEFER_MAX_EXTRA))
}

/// The attempts of a slot whose batches have group size `k` (module docs, *Capacity*):
/// the batch's limit, the retired attempts before a rollback reclaims them, the
/// thread's running and idle attempts, and two more, so that a commit at the limit
/// still finds its next attempt spare.
pub(crate) fn attempts_per_slot(k: usize) -> usize {
    batch_limit(k.max(1)) + RETIRED_BEFORE_RECLAIM + 4
}

/// A committed transaction waiting for write-back.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Committed {
    /// Copies, commit record, and what write-back must do.
    pub attempt: AttemptId,
    /// The arena offset of the attempt's write-back plan ([`super::plan`]), finished
    /// before the entry was made.
    pub plan: u64,
    /// endTS.
    pub end_ts: u64,
    /// Log sequence number of its record.
    pub log_seq: u64,
    /// persistTS of its record (`u64::MAX` without persistence): what the slot's
    /// `pending_min` must stay at or below while the entry waits.
    pub persist_ts: u64,
    /// Its record was appended unfenced (durability deferred): the write-back makes
    /// the slot's run durable before it writes home.
    pub unfenced: bool,
}

// SAFETY: an attempt index, integers and a flag: zero is a value, no address, no drop,
// `repr(C)`.
unsafe impl InRegion for Committed {}

impl Committed {
    /// What the write-back of this transaction must do.
    #[inline]
    pub(crate) fn plan<'a>(&'a self, arena: &'a CopyArena) -> Plan<'a> {
        debug_assert!(self.plan != 0);
        // SAFETY: the plan was finished at the commit, before the entry was made, and
        // its memory is neither written nor given back until the attempt is recycled,
        // which only happens once the entry has left the batch (it is retired, then
        // recycled by a holder of the batch's `&mut`, which this entry's borrow
        // excludes while the plan lives).
        unsafe { Plan::at(arena, self.plan) }
    }
}

/// An attempt whose copies were unlinked at a time before `retire_ts`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Retired {
    pub attempt: AttemptId,
    pub retire_ts: u64,
}

// SAFETY: an attempt index and an integer; `repr(C)`.
unsafe impl InRegion for Retired {}

/// The counts of a slot's batch (the values are in its [`BatchBufs`]): what lives in
/// the slot's state, under the batch's lock word.
#[repr(C)]
#[derive(Debug, Default)]
pub(crate) struct BatchState {
    entries: RingCounts,
    retired: RingCounts,
    spare: u32,
    unsynced: UnsyncedState,
}

// SAFETY: counts: zero is an empty batch, no address, no drop, `repr(C)`.
unsafe impl InRegion for BatchState {}

/// The arrays of a slot's batch, placed with the slot: a [`Batch`] is made of them and
/// the [`BatchState`] that counts them, while the batch's lock is held.
pub(crate) struct BatchBufs {
    entries: Placed<Guarded<Committed>>,
    retired: Placed<Guarded<Retired>>,
    spare: Placed<Guarded<AttemptId>>,
    unsynced: Placed<Guarded<(u64, u64)>>,
}

impl BatchBufs {
    /// Arrays for a slot of `attempts` attempts, in `region`.
    pub(crate) fn place(region: &Arc<Region>, attempts: usize) -> Result<BatchBufs> {
        Ok(BatchBufs {
            entries: region.place(attempts, |_, _| {})?,
            retired: region.place(attempts, |_, _| {})?,
            spare: region.place(attempts, |_, _| {})?,
            unsynced: region.place(UNSYNCED_RANGES, |_, _| {})?,
        })
    }

    /// Make every attempt in `ids` spare in `st`, a fresh slot's batch.
    pub(crate) fn fill_spare(
        &self,
        st: &mut BatchState,
        ids: impl ExactSizeIterator<Item = AttemptId>,
    ) {
        let mut b = self.batch(st, None);
        for id in ids {
            b.spare.push(id);
        }
    }

    /// The batch these arrays and `st` make up, keeping `held`, the batch's lock.
    ///
    /// `st` must be the state of the slot these arrays were placed for, reached
    /// through the batch's lock held by `held` (or, without it, before the slot is
    /// shared): the `&mut` for `'a` shows the lock is held that long, and one slot's
    /// arrays are only reached with its state.
    #[inline]
    pub(crate) fn batch<'a>(
        &'a self,
        st: &'a mut BatchState,
        held: Option<HolderGuard<'a>>,
    ) -> Batch<'a> {
        // SAFETY: the arrays are guarded by the batch's lock, which the caller holds
        // for `'a` (`st` is the data of that lock, borrowed mutably for `'a`); each is
        // a distinct placement, so the slices do not overlap.
        unsafe {
            Batch {
                entries: FixedRing::over(guarded_slice(&self.entries), &mut st.entries),
                retired: FixedRing::over(guarded_slice(&self.retired), &mut st.retired),
                spare: FixedStack::over(guarded_slice(&self.spare), &mut st.spare),
                unsynced: UnsyncedRanges::new(guarded_slice(&self.unsynced), &mut st.unsynced),
                _held: held,
            }
        }
    }
}

/// The values of `p` as one mutable slice.
///
/// # Safety
/// The caller holds the lock that guards them for as long as the slice lives and makes
/// no other reference to them meanwhile.
#[inline(always)]
#[allow(clippy::mut_from_ref)] // the values are behind `Guarded`: the lock makes it unique
unsafe fn guarded_slice<T>(p: &Placed<Guarded<T>>) -> &mut [T] {
    // SAFETY: `Guarded<T>` is `repr(transparent)` over `UnsafeCell<T>`, so the placed
    // values are `p.len()` consecutive `T`s that may be written through a shared view
    // (the pointer is the whole slice's); the caller's contract makes the reference
    // unique.
    unsafe { std::slice::from_raw_parts_mut(p.as_ptr() as *mut T, p.len()) }
}

/// The pending write-backs of one slot and its reclaimable memory, while the slot's
/// batch lock is held (the batch holds it, and unlocks when dropped). Its views of the
/// slot's arrays are never moved out of it: they are valid while its lock is held.
pub(crate) struct Batch<'a> {
    /// Committed transactions, in commit order.
    pub entries: FixedRing<'a, Committed>,
    /// Unlinked attempts awaiting a grace period, oldest first (each is pushed under
    /// the batch's lock with the clock's time then: their `retire_ts` never falls
    /// along the ring).
    pub retired: FixedRing<'a, Retired>,
    /// Attempts ready for reuse.
    pub spare: FixedStack<'a, AttemptId>,
    /// Lazy home sync (module docs of `shared`, *Lazy home sync*): home ranges written
    /// back and not yet made durable.
    pub unsynced: UnsyncedRanges<'a>,
    /// The batch's lock, released after everything above is dropped (declared last).
    _held: Option<HolderGuard<'a>>,
}

impl Batch<'_> {
    /// Which of the slot's `attempts` attempts the batch holds (entries, retired,
    /// spare), by index; None if one is held twice, or is not of the slot (lists a
    /// dead holder left inconsistent).
    pub(crate) fn held_once(&self, attempts: usize) -> Option<Vec<bool>> {
        let mut held = vec![false; attempts];
        let ids = self.entries.iter().map(|e| e.attempt);
        let ids = ids.chain(self.retired.iter().map(|r| r.attempt));
        for id in ids.chain(self.spare.as_slice().iter().copied()) {
            let seen = held.get_mut(id.index())?;
            if std::mem::replace(seen, true) {
                return None;
            }
        }
        Some(held)
    }
}

#[cfg(test)]
impl Batch<'_> {
    /// Every attempt the batch holds: entries, retired, spare (white-box tests).
    pub(crate) fn held_attempts(&self) -> Vec<AttemptId> {
        let mut v: Vec<AttemptId> = self.entries.iter().map(|e| e.attempt).collect();
        v.extend(self.retired.iter().map(|r| r.attempt));
        v.extend_from_slice(self.spare.as_slice());
        v
    }
}

/// Where a [`FixedRing`]'s values start and how many there are, in one word (module
/// docs, *A holder that dies*): the index of the first value in the low half, the
/// count in the high half.
#[repr(C)]
#[derive(Debug, Default)]
pub(crate) struct RingCounts(AtomicU64);

impl RingCounts {
    #[inline(always)]
    fn get(&self) -> (u32, u32) {
        // Relaxed: under the batch's lock (or read by the one recoverer of its dead
        // holder, after the lock word); atomic only so that the store is one.
        let w = self.0.load(Relaxed);
        (w as u32, (w >> 32) as u32)
    }

    #[inline(always)]
    fn set(&self, head: u32, len: u32) {
        // The value stored before the count that names it (module docs).
        compiler_fence(Release);
        // Relaxed: as in `get`.
        self.0
            .store(u64::from(head) | u64::from(len) << 32, Relaxed);
    }
}

/// A queue of at most a fixed number of values, over an array and counts it borrows.
pub(crate) struct FixedRing<'a, T> {
    buf: &'a mut [T],
    c: &'a mut RingCounts,
}

impl<'a, T: Copy> FixedRing<'a, T> {
    /// The ring of `c` over `buf` (whose length is its capacity, below 2^31).
    pub(crate) fn over(buf: &'a mut [T], c: &'a mut RingCounts) -> Self {
        // (Counts out of range would make an index below panic, never reach outside
        // `buf`: checked in debug builds only.)
        debug_assert!(
            buf.len() < 1 << 31
                && (c.get().0 as usize) < buf.len().max(1)
                && c.get().1 as usize <= buf.len(),
            "a ring's counts out of range"
        );
        FixedRing { buf, c }
    }

    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.c.get().1 as usize
    }

    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The first value, if any.
    #[inline]
    pub(crate) fn front(&self) -> Option<&T> {
        (!self.is_empty()).then(|| self.get(0))
    }

    /// The last value, if any.
    #[inline]
    pub(crate) fn back(&self) -> Option<&T> {
        self.len().checked_sub(1).map(|i| self.get(i))
    }

    /// The `i`th value from the front (`i < len`).
    #[inline]
    pub(crate) fn get(&self, i: usize) -> &T {
        assert!(i < self.len(), "index {i} of a ring of {}", self.len());
        let j = self.c.get().0 as usize + i;
        &self.buf[if j >= self.buf.len() {
            j - self.buf.len()
        } else {
            j
        }]
    }

    /// The values from the `from`th to before the `to`th (`from <= to <= len`), front
    /// first: the ring's two slices, so that a walk costs no index arithmetic per value.
    #[inline]
    pub(crate) fn range(&self, from: usize, to: usize) -> impl Iterator<Item = &T> + '_ {
        assert!(
            from <= to && to <= self.len(),
            "{from}..{to} of a ring of {}",
            self.len()
        );
        let n = self.buf.len();
        let head = self.c.get().0 as usize;
        // Where the values start and end in `buf`, unwrapped (below `2 * n`).
        let (start, end) = (head + from, head + to);
        let first = &self.buf[start.min(n)..end.min(n)];
        let second = &self.buf[start.max(n) - n..end.max(n) - n];
        first.iter().chain(second)
    }

    /// Every value, front first.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &T> + '_ {
        self.range(0, self.len())
    }

    /// Add `v` at the back. The ring is never full when this is called (its capacity is
    /// what its users can hold at once, module docs); a full one is a bug, and panics
    /// before anything is overwritten.
    #[inline]
    pub(crate) fn push(&mut self, v: T) {
        let (head, len) = self.c.get();
        assert!((len as usize) < self.buf.len(), "a full ring of {len}");
        let j = head as usize + len as usize;
        let n = self.buf.len();
        self.buf[if j >= n { j - n } else { j }] = v;
        self.c.set(head, len + 1);
    }

    /// Drop the first `n` values (`n <= len`).
    pub(crate) fn pop_front(&mut self, n: usize) {
        let (head, len) = self.c.get();
        assert!(n <= len as usize, "{n} of a ring of {len}");
        let head = (head as usize + n) % self.buf.len().max(1);
        self.c.set(head as u32, len - n as u32);
    }
}

/// A stack of at most a fixed number of values, over an array and a count it borrows.
pub(crate) struct FixedStack<'a, T> {
    buf: &'a mut [T],
    len: &'a mut u32,
}

impl<'a, T: Copy> FixedStack<'a, T> {
    /// The stack of `len` values over `buf` (whose length is its capacity).
    pub(crate) fn over(buf: &'a mut [T], len: &'a mut u32) -> Self {
        // (As in `FixedRing::over`: checked in debug builds only.)
        debug_assert!(*len as usize <= buf.len(), "a stack's count out of range");
        FixedStack { buf, len }
    }

    #[inline]
    pub(crate) fn len(&self) -> usize {
        *self.len as usize
    }

    /// The values, bottom first.
    pub(crate) fn as_slice(&self) -> &[T] {
        &self.buf[..self.len()]
    }

    /// Push `v`; as [`FixedRing::push`], never on a full stack.
    #[inline]
    pub(crate) fn push(&mut self, v: T) {
        let n = self.len();
        assert!(n < self.buf.len(), "a full stack of {n}");
        self.buf[n] = v;
        // The value stored before the count that names it (module docs).
        compiler_fence(Release);
        *self.len += 1;
    }

    #[inline]
    pub(crate) fn pop(&mut self) -> Option<T> {
        *self.len = self.len.checked_sub(1)?;
        Some(self.buf[self.len()])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ring_keeps_its_order_across_the_wrap() {
        let (mut buf, mut c) = ([0u32; 3], RingCounts::default());
        let mut r = FixedRing::over(&mut buf, &mut c);
        r.push(1);
        r.push(2);
        r.pop_front(1);
        r.push(3);
        r.push(4);
        assert_eq!(r.iter().copied().collect::<Vec<_>>(), [2, 3, 4]);
        assert_eq!(r.range(1, 3).copied().collect::<Vec<_>>(), [3, 4]);
        assert_eq!(r.range(0, 1).copied().collect::<Vec<_>>(), [2]);
        assert_eq!(r.range(2, 2).count(), 0);
        assert_eq!((r.front(), r.back()), (Some(&2), Some(&4)));
        r.pop_front(2);
        assert_eq!((r.len(), *r.get(0)), (1, 4));
        r.pop_front(1);
        assert!(r.is_empty() && r.front().is_none() && r.back().is_none());
    }

    #[test]
    #[should_panic(expected = "a full ring")]
    fn a_full_ring_refuses_before_overwriting() {
        let (mut buf, mut c) = ([0u32; 1], RingCounts::default());
        let mut r = FixedRing::over(&mut buf, &mut c);
        r.push(1);
        r.push(2);
    }

    #[test]
    fn a_stack_pops_in_reverse_and_empties() {
        let (mut buf, mut len) = ([0u32; 4], 0);
        let mut s = FixedStack::over(&mut buf, &mut len);
        for v in 1..=4 {
            s.push(v);
        }
        assert_eq!(s.as_slice(), [1, 2, 3, 4]);
        assert_eq!(s.pop(), Some(4));
        assert_eq!(
            (s.pop(), s.pop(), s.pop(), s.pop()),
            (Some(3), Some(2), Some(1), None)
        );
    }

    /// The capacity covers a batch at its limit, the retired attempts a rollback leaves,
    /// and the thread's two, for every group size.
    #[test]
    fn a_slot_has_attempts_for_its_batch_limit_and_more() {
        for k in [0, 1, 8, 100, 10_000] {
            let n = attempts_per_slot(k);
            assert!(
                n >= batch_limit(k.max(1)) + RETIRED_BEFORE_RECLAIM + 2,
                "{k}"
            );
        }
        assert_eq!(batch_limit(8), 32);
        assert_eq!(batch_limit(100), 164);
    }
}
