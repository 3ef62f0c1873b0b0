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
//! The paper keeps a (curTid, isPersistent) pair per thread, isPersistent being set
//! after step 5, i.e. once the transaction *and its predecessors* are persistent. A
//! slot's records persist in lid order, so the pair carries no more information than
//! one monotone word per slot: `stable[slot]` = the largest lid L such that the slot's
//! transactions up to L are durable together with all their predecessors, recursively
//! ([`super::checkpoint::Checkpointer::stabilize`]). Predecessor (s, l) is persistent
//! iff `stable[s] >= l`. One word cannot be read torn, and it never goes back. Unlike
//! the paper's pair, the word is advanced by whichever thread waits for it (helping),
//! so a thread that deferred its own wait holds nobody up.

/// Bits of the logical id.
const LID_BITS: u32 = 48;
const LID_MASK: u64 = (1 << LID_BITS) - 1;

/// "No transaction" (an object nobody committed to in this run).
pub(super) const NONE: u64 = 0;

/// Pack (slot, lid).
#[inline]
pub(super) fn pack(slot: usize, lid: u64) -> u64 {
    (slot as u64) << LID_BITS | (lid & LID_MASK)
}

/// The slot of a packed id.
#[inline]
pub(super) fn slot_of(tid: u64) -> usize {
    (tid >> LID_BITS) as usize
}

/// The logical id of a packed id.
#[inline]
pub(super) fn lid_of(tid: u64) -> u64 {
    tid & LID_MASK
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn ids_pack_and_unpack() {
        let t = pack(1023, 77);
        assert_eq!((slot_of(t), lid_of(t)), (1023, 77));
        assert_ne!(pack(0, 1), NONE);
    }
}
