//! Logical transaction ids (§III-C) and the per-thread persistence marks (§III-B, step 5).
//!
//! # Ids without a global counter
//! A transaction id is the pair (thread slot, logical id), packed into one word:
//! `slot << 48 | lid`. Each slot numbers its *update* transactions 1, 2, 3, ... (a
//! read-only transaction writes nothing, so nobody can depend on it and it needs no id);
//! the numbering continues across runs (recovery starts a slot at its retired
//! watermark + 1, see [`super::recovery`]). The word 0 means "no transaction" (lids
//! start at 1).
//!
//! # "Is this predecessor persistent?"
//! The paper keeps a (curTid, isPersistent) pair per thread. A thread persists its
//! records strictly in lid order, so the pair carries no more information than one
//! monotone word: `persisted[slot]` = the largest lid of that slot whose record is
//! durable. Predecessor (s, l) is persistent iff `persisted[s] >= l`. One word cannot be
//! read torn, and it never goes back.

use crate::sync::AtomicU64;
use std::sync::atomic::Ordering::{Acquire, Release};

/// Bits of the logical id.
const LID_BITS: u32 = 48;
const LID_MASK: u64 = (1 << LID_BITS) - 1;

/// "No transaction" (an object nobody committed to in this run).
pub const NONE: u64 = 0;

/// Pack (slot, lid).
#[inline]
pub fn pack(slot: usize, lid: u64) -> u64 {
    (slot as u64) << LID_BITS | (lid & LID_MASK)
}

/// The slot of a packed id.
#[inline]
pub fn slot_of(tid: u64) -> usize {
    (tid >> LID_BITS) as usize
}

/// The logical id of a packed id.
#[inline]
pub fn lid_of(tid: u64) -> u64 {
    tid & LID_MASK
}

/// One slot's persistence mark.
#[derive(Debug, Default)]
pub struct PersistMark(AtomicU64);

impl PersistMark {
    /// A mark saying lids `..= lid` are durable.
    pub fn new(lid: u64) -> Self {
        PersistMark(AtomicU64::new(lid))
    }
    /// Record that lid `lid` (and so every smaller one) is durable. Release: a thread
    /// that sees the value (Acquire in [`PersistMark::covers`]) and then returns to its
    /// user has a durable predecessor — the fence that made the record durable precedes
    /// this store in program order.
    #[inline]
    pub fn set(&self, lid: u64) {
        self.0.store(lid, Release);
    }
    /// True if lid `lid` of this slot is durable.
    #[inline]
    pub fn covers(&self, lid: u64) -> bool {
        self.0.load(Acquire) >= lid
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn ids_pack_and_unpack() {
        let t = pack(1023, 77);
        assert_eq!((slot_of(t), lid_of(t)), (1023, 77));
        assert_ne!(pack(0, 1), NONE);
        let m = PersistMark::new(3);
        assert!(m.covers(3) && !m.covers(4));
        m.set(9);
        assert!(m.covers(4) && m.covers(9) && !m.covers(10));
    }
}
