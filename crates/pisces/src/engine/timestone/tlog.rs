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

pub use crate::engine::kit::versions::version::Version;
use crate::engine::kit::versions::version::UNPUBLISHED;
pub use crate::engine::kit::versions::version_chain::Chain as Entry;
use crate::engine::kit::versions::version_chain::Chain;
use std::sync::atomic::AtomicU64;

crate::mutation::point! {
    /// Readers take the newest version whatever its stamp.
    pub(crate) static VISIBILITY = "visibility";
}

/// Pushed, no timestamp yet: invisible to every reader.
pub const PENDING: u64 = UNPUBLISHED;
/// Validation failed after the timestamp was taken: invisible forever.
pub const ABORTED: u64 = u64::MAX - 1;
/// About to take a timestamp (invisible: its commit is above every snapshot that
/// could meet it, see the module docs).
pub const COMMITTING: u64 = u64::MAX - 2;
/// Flag on a timestamp whose OLog record is not yet durable.
pub const UNDURABLE: u64 = 1 << 62;
/// Largest commit timestamp.
pub const TS_MASK: u64 = UNDURABLE - 1;

/// Timestamp of a final committed stamp, if it is one.
#[inline]
pub fn committed(stamp: u64) -> Option<u64> {
    (stamp & !TS_MASK == 0).then_some(stamp)
}

/// The version a snapshot at `s` sees: the newest with a final stamp `ts ≤ s` (see
/// the module docs: no waiting); the oldest one if none qualifies (stale pointer).
pub fn visible(e: &Chain, s: u64) -> *const Version {
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
pub unsafe fn truncate(e: &Chain, oldest: u64, live: &AtomicU64) -> usize {
    // SAFETY: caller.
    unsafe { e.truncate(oldest, live, committed) }
}
