//! The persistent recycle watermark of the redo-log engines (Pisces' P-2, §3.2).
//!
//! One 8-byte word in the engine area says "every record with a timestamp below W has
//! been written home durably; recovery ignores it". A thread raises W (never lowers it)
//! and persists it *before* it reuses log space below W, so recovery can never replay an
//! old, still-readable record over a newer value whose own record was recycled.
//!
//! The word carries a check ([`super::checked_word`]): damage to it is refused, never
//! trusted. Every recovery leaves W at 1 or more, so an all-zero word is accepted only
//! in a pool that holds nothing yet (its creation ended before its first recovery):
//! recovery checks that.

use super::checked_word::{self, Word};
use crate::heap::layout::ENGINE_AREA_OFFSET;
use crate::heap::Heap;
use crate::{Error, Result};
use std::sync::atomic::Ordering::{AcqRel, Acquire};

/// Offset of the watermark word (the first word of the engine area).
pub(crate) const WATERMARK_OFFSET: usize = ENGINE_AREA_OFFSET;

/// The durable watermark: `Ok(None)` for an all-zero word (a pool that committed
/// nothing yet, or damage: the caller decides), `Err(Corrupt)` for a word whose check
/// fails.
pub(crate) fn load(heap: &Heap) -> Result<Option<u64>> {
    // Acquire: pairs with `raise` of another thread, so a record dropped by that
    // thread below the value we see is not read by us as live.
    let word = heap.atomic_u64(WATERMARK_OFFSET).load(Acquire);
    match checked_word::classify(word, checked_word::legacy(heap)) {
        Word::Zero => Ok(None),
        Word::Value(v) => Ok(Some(v)),
        Word::Damaged => Err(Error::corrupt(format!(
            "the log watermark word in the engine area is damaged ({word:#018x} fails its check)"
        ))),
    }
}

/// Make the watermark exactly `v`, encoded, and durable (recovery, alone on the pool:
/// also rewrites a format 3 pool's plain word).
pub(crate) fn set(heap: &Heap, v: u64) {
    // AcqRel: nobody else runs; any ordering would do.
    heap.atomic_u64(WATERMARK_OFFSET)
        .swap(checked_word::encode(v), AcqRel);
    heap.persist(WATERMARK_OFFSET, 8);
}

/// Raise the watermark to at least `w` and make it durable before returning.
pub(crate) fn raise(heap: &Heap, w: u64) {
    checked_word::raise(heap.atomic_u64(WATERMARK_OFFSET), w);
    // The line now holds a value >= w whoever wrote it; our flush + fence makes it
    // durable before the caller drops any record below w.
    heap.persist(WATERMARK_OFFSET, 8);
}
