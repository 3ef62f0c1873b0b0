//! Version chains of the `mvcc` baseline: the kit's [`Chain`] of [`Version`]s, with a
//! version's stamp meaning its commit timestamp.
//!
//! # Stamps
//! A transaction's private copy is an unpublished version (stamp
//! [`crate::engine::kit::versions::version::UNPUBLISHED`]); at commit it is pushed with its
//! commit timestamp C ([`publish`]) and becomes the chain's head, so committing copies
//! nothing. Every version on a chain is committed: [`committed`] is `Some`.
//!
//! # Invariants
//! 1. *Immutable once published.* A published version's timestamp and data never
//!    change; only its `next` pointer does, and only when truncation cuts the chain
//!    below it.
//! 2. *Ordered.* Timestamps strictly decrease along the chain (each version is pushed
//!    by a committer holding the object's lock, with a commit timestamp taken after
//!    the lock, so after every earlier version's timestamp).
//! 3. The kit's single-writer and never-empty invariants.
//!
//! # Reclamation
//! Let `oldest` be a lower bound of the start timestamps of all running transactions
//! (and `≤` the start of every transaction that starts later). Every transaction then
//! sees, in this chain, the newest version with `ts ≤ start`, which is the *keeper*
//! (the newest version with `ts ≤ oldest`) or a newer one. (This relies on the blocking
//! read: a transaction that the truncating committer's scan missed has a start at or
//! above the committer's timestamp, and it reads the chain only after
//! [`Chain::wait_unlocked`], so it sees the committer's new version, not an older one
//! that truncation frees. Without the wait it could hold a freed version.) A reader
//! walks from the head and stops at the first version with `ts ≤ start`, so it never
//! loads the keeper's `next` nor visits anything older. [`Chain::truncate`] therefore
//! cuts the chain below the keeper and frees the older versions at once, without a
//! grace period: no reader can be on them or reach them, and no returned pointer points
//! into them (a returned pointer is the reader's visible version: the keeper or newer).
//!
//! A reader that finds no version with `ts ≤ start` (it follows a stale pointer to an
//! object created after its snapshot: a program error, but never undefined behaviour)
//! gets the oldest version. Truncation cannot free it under that reader: the reader's
//! start bounds `oldest` from above, so a keeper would have `ts ≤ start` and the reader
//! would have stopped there; without a keeper nothing is cut.

pub(super) use crate::engine::kit::versions::version::Version;
pub(super) use crate::engine::kit::versions::version_chain::Chain as Entry;
use crate::engine::kit::versions::version_chain::Chain;

/// Every stamp on an `mvcc` chain is a commit timestamp.
#[inline]
pub(super) fn committed(stamp: u64) -> Option<u64> {
    Some(stamp)
}

/// The version a transaction started at `start` sees: the newest with `ts ≤ start`
/// (or the oldest, see the module docs). Call after [`Chain::wait_unlocked`].
#[inline]
pub(super) fn visible(e: &Chain, start: u64) -> *const Version {
    e.visible(start, committed)
}

/// Publish `v` (an unpublished version) as the newest, with timestamp `ts`, and record
/// the commit. Under the lock.
///
/// # Safety
/// `v` is an unpublished version owned by the caller, of this object's size; the
/// caller holds the lock. Ownership passes to the chain.
pub(super) unsafe fn publish(e: &Chain, v: *mut Version, ts: u64) {
    debug_assert!(e.last_ts() < ts);
    // SAFETY: caller.
    unsafe { e.push(v, ts) };
    e.mark(ts);
}

/// Cut the chain below the keeper for `oldest` (module docs). Under the lock.
///
/// # Safety
/// The caller holds the lock, and no running or future transaction has a start
/// timestamp below `oldest` (module docs).
pub(super) unsafe fn truncate(
    e: &Chain,
    oldest: u64,
    live: &crate::engine::kit::versions::version::LiveCount,
) -> usize {
    // SAFETY: caller.
    unsafe { e.truncate(oldest, live, committed) }
}
