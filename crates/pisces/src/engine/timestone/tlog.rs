//! The TLog: volatile version chains in DRAM, newest first, one per object: the kit's
//! [`Chain`] of [`Version`]s, found through the kit's object index, with a version's
//! stamp giving its commit state. The index's base versions are exact copies of home
//! because home is written only by the checkpointer, and only for objects that have a
//! chain (they are in its pending list).
//!
//! # Versions and stamps
//! A [`Version`] is one DRAM allocation: a header (an atomic *stamp*, the pointer to the
//! next older version, the size) and the object's whole payload. A transaction's
//! private copy is a version that is not linked anywhere yet. At commit it is pushed
//! onto the chain with stamp [`PENDING`] and then moves through these states:
//!
//! | stamp              | meaning                                   |
//! |--------------------|-------------------------------------------|
//! | `PENDING`          | pushed, commit timestamp not taken yet    |
//! | `COMMITTING`       | about to take its commit timestamp        |
//! | `C \| UNDURABLE`   | timestamp C, OLog record not durable yet  |
//! | `C`                | committed at C: complete                  |
//! | `ABORTED`          | failed validation after its timestamp     |
//!
//! A reader at snapshot S takes the newest version whose stamp is a final `C ≤ S`
//! and skips every other one, *without waiting*. This is sound because snapshots are
//! horizons (`TimestoneShared::horizon`): S is below every commit that is not complete when the
//! transaction starts, so every commit with `C ≤ S` had stored its final stamps
//! before it cleared its `committing` guard, which the starting transaction observed
//! (acquire) — a non-final stamp therefore always belongs to a commit above S. The
//! checkpointer reads at a cut K after waiting for every commit `≤ K` to complete, so
//! the same holds for it. (A debug assertion checks it for undurable stamps.)
//!
//! # Invariants
//! 1. A version's data never changes once pushed; its stamp changes only as above and
//!    only by its committer; only `next` of the *keeper* is cut by truncation.
//! 2. Only the holder of the entry's lock pushes, truncates, or changes `last_ts`.
//! 3. The chain is never empty: an entry starts with a base version at timestamp 0.
//! 4. Committed timestamps strictly decrease along `next` (pushes happen under the
//!    lock with a timestamp taken after it); `ABORTED` versions may sit in between.
//!
//! # Reclamation (the kit's keeper rule, [`Chain::truncate`])
//! The committer, after its version is final, computes `oldest` ≤ every running or
//! future snapshot (slot scan after its own increment) and cuts the chain below the
//! *keeper*, the newest committed version with `ts ≤ oldest`. Readers stop at the first
//! committed version with `ts ≤ S` (S ≥ oldest), so they never go below the keeper; a
//! reader the scan missed has S ≥ C and stops at the committer's own version.

//!
//! # The home word (the paper's per-object version pointer)
//! The paper keeps, in each object's header, a pointer to its version chain: a reader
//! of an object with no newer version reads the object in place after one load. Here
//! the object's header word (the 8 bytes in front of its payload, which the heap
//! reserves for engines) says whether home is that version:
//!
//! | word                 | meaning                                                      |
//! |----------------------|--------------------------------------------------------------|
//! | `tag \| X`           | home holds the newest version, committed at X (clean)       |
//! | `tag \| PTR_MASK`    | a commit of this run wrote or freed it since (dirty)         |
//! | another tag          | written by an earlier run (or never): no commit of this run |
//!
//! `tag` is the run generation's ([`tag_of`]); X ≤ [`super::olog::COMPACT_MAX_TS`] < `PTR_MASK`,
//! so one compare (`word - tag <= S`, wrapping) accepts exactly a clean word with
//! X ≤ S. Only the last committer of an object stores *dirty* (under the chain's lock,
//! before it takes its timestamp: [`mark_dirty`]); only the checkpointer stores
//! *clean* (after home holds the version, under the chain's lock, if no commit came
//! since: [`mark_clean`]); a reader that finds an earlier run's word stores `tag | 0`
//! (compare-and-swap, [`home_readable`]). The word is never flushed: it means nothing
//! after a crash, and every value an earlier run left is safe (below).
//!
//! Why a reader at S may read home when the word is `tag | X` with X ≤ S, and the block
//! is allocated at home (or the engine's `locate` found it allocated):
//! * *Home is the version at S.* A commit C ≤ S of the object completed before the
//!   reader began (S is a horizon): its dirty store precedes the release that completed
//!   it, which the reader's begin acquired, so the reader sees it or a later word. The
//!   only later writer of a clean word is a checkpoint that wrote a version ≥ C home.
//!   A word from an earlier run (any tag, garbage included) can only be met on an
//!   object no commit of this run touched, whose home is the recovered state: the
//!   newest version. That is also why the reader may upgrade it to `tag | 0`: a
//!   committer's dirty store either follows the CAS (and wins) or makes it fail.
//! * *Home stays the version at S while the reader runs.* Home changes only in a
//!   checkpoint, to versions at or below its cut K, and the cut is at or below the
//!   snapshot of every transaction that may still read (`clog::checkpoint`, step 1):
//!   a version newer than S never goes home under the reader.
//! * *Serializable reads* record the word they saw; validation (after the commit
//!   timestamp) finds it unchanged or aborts: a committer with a smaller timestamp
//!   stored dirty before its clock increment, which ours follows.
//!
//! The check against S is what keeps a reader from home when its word was cleaned by
//! a checkpoint whose cut is above S; with cuts bounded by the running snapshots that
//! needs a transaction that began during the checkpoint, and the unit test
//! `a_clean_word_above_the_snapshot_is_not_read_home` forces it.

use crate::engine::kit::cc::header_word::{PTR_MASK, TAG_MASK};
use crate::engine::kit::validate::ROOT_SLOT_PAYLOAD;
pub(super) use crate::engine::kit::versions::version::Version;
use crate::engine::kit::versions::version::UNPUBLISHED;
pub(super) use crate::engine::kit::versions::version_chain::Chain as Entry;
use crate::engine::kit::versions::version_chain::Chain;
use crate::heap::alloc::HEADER;
use crate::heap::Heap;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed, Release};

crate::mutation::point! {
    /// Readers take the newest version whatever its stamp.
    pub(crate) static VISIBILITY = "visibility";
}

pub(super) use crate::engine::kit::cc::header_word::tag_of;

/// The home word of the object whose payload is at `off`, or `None` for the root slot
/// (its word in front is not a block header).
#[inline]
pub(super) fn home_word(heap: &Heap, off: u64) -> Option<&AtomicU64> {
    (off != ROOT_SLOT_PAYLOAD).then(|| heap.atomic_u64(off as usize - HEADER))
}

/// A commit of this run is about to write or free the object (the caller holds its
/// chain's lock and has not taken its timestamp yet). Relaxed: readers are ordered
/// after it by the release that completes the commit (their begin acquires it) or, for
/// validation, by the clock increment that follows it (module docs).
#[inline]
pub(super) fn mark_dirty(w: &AtomicU64, tag: u64) {
    w.store(tag | PTR_MASK, Relaxed);
}

/// Home holds the version committed at `x`, the newest one (the caller, a checkpoint,
/// holds the chain's lock and wrote home first). Release: a reader that sees the word
/// (Acquire) sees those home writes.
#[inline]
pub(super) fn mark_clean(w: &AtomicU64, tag: u64, x: u64) {
    debug_assert!(x < PTR_MASK);
    w.store(tag | x, Release);
}

/// The word if home is the version a snapshot at `s` reads: clean at X ≤ S, or an
/// earlier run's word, which it upgrades to clean at 0 first. `None`: ask the chain.
#[inline]
pub(super) fn home_readable(w: &AtomicU64, tag: u64, s: u64) -> Option<u64> {
    // Acquire: pairs with `mark_clean` (the home contents it announces).
    let mut word = w.load(Acquire);
    if word & TAG_MASK != tag {
        // AcqRel: a committer's dirty store either precedes this (we fail and see it)
        // or follows it (and wins); see the module docs.
        word = match w.compare_exchange(word, tag, AcqRel, Acquire) {
            Ok(_) => tag,
            Err(now) => now,
        };
    }
    (s < PTR_MASK && word.wrapping_sub(tag) <= s).then_some(word)
}

/// Pushed, no timestamp yet: invisible to every reader.
pub(super) const PENDING: u64 = UNPUBLISHED;
/// Validation failed after the timestamp was taken: invisible forever.
pub(super) const ABORTED: u64 = u64::MAX - 1;
/// About to take a timestamp (invisible: its commit is above every snapshot that
/// could meet it, see the module docs).
pub(super) const COMMITTING: u64 = u64::MAX - 2;
/// Flag on a timestamp whose OLog record is not yet durable.
pub(super) const UNDURABLE: u64 = 1 << 62;
/// Largest commit timestamp.
pub(super) const TS_MASK: u64 = UNDURABLE - 1;

/// Timestamp of a final committed stamp, if it is one.
#[inline]
pub(super) fn committed(stamp: u64) -> Option<u64> {
    (stamp & !TS_MASK == 0).then_some(stamp)
}

/// The version a snapshot at `s` sees: the newest with a final stamp `ts ≤ s` (see
/// the module docs: no waiting); the oldest one if none qualifies (stale pointer).
pub(super) fn visible(e: &Chain, s: u64) -> *const Version {
    if crate::mutation::active!(VISIBILITY) {
        return e.head();
    }
    e.visible(s, |stamp| {
        debug_assert!(
            !(stamp & UNDURABLE != 0 && stamp < COMMITTING && (stamp & TS_MASK) <= s),
            "a snapshot at {s} met an incomplete commit at {}",
            stamp & TS_MASK
        );
        committed(stamp)
    })
}

/// Cut below the keeper (newest committed version with `ts ≤ oldest`) and free what
/// was below; returns how many were freed.
///
/// # Safety
/// The caller holds the lock; no running or future snapshot is below `oldest`.
pub(super) unsafe fn truncate(
    e: &Chain,
    oldest: u64,
    live: &crate::engine::kit::versions::version::LiveCount,
) -> usize {
    // SAFETY: caller.
    unsafe { e.truncate(oldest, live, committed) }
}
