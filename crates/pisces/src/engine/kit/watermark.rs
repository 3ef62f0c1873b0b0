//! The persistent recycle watermark of the redo-log engines (Pisces' P-2, §3.2).
//!
//! One 8-byte word in the engine area says "every record with a timestamp below W has
//! been written home durably; recovery ignores it". A thread raises W (never lowers it)
//! and persists it *before* it reuses log space below W, so recovery can never replay an
//! old, still-readable record over a newer value whose own record was recycled.

use crate::heap::layout::ENGINE_AREA_OFFSET;
use crate::heap::Heap;
use std::sync::atomic::Ordering::{AcqRel, Acquire};

/// Offset of the watermark word (the first word of the engine area).
pub const WATERMARK_OFFSET: usize = ENGINE_AREA_OFFSET;

/// The durable watermark.
pub fn load(heap: &Heap) -> u64 {
    // Acquire: pairs with `raise` of another thread, so a record dropped by that
    // thread below the value we see is not read by us as live.
    heap.atomic_u64(WATERMARK_OFFSET).load(Acquire)
}

/// Raise the watermark to at least `w` and make it durable before returning.
pub fn raise(heap: &Heap, w: u64) {
    // AcqRel: the flush that follows reads the line, which then holds our value or a
    // larger one; nothing else is ordered by this RMW.
    heap.atomic_u64(WATERMARK_OFFSET).fetch_max(w, AcqRel);
    // The line now holds a value >= w whoever wrote it; our flush + fence makes it
    // durable before the caller drops any record below w.
    heap.persist(WATERMARK_OFFSET, 8);
}
