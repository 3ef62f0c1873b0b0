//! The free-block caches of thread slots, in the allocator's region: what a thread
//! slot's [`ThreadCache`](super::ThreadCache) holds, where another thread (of another
//! process, for a pool shared by several) can find it and give it back to the heap
//! when the slot's process died.
//!
//! Per slot and class, a count and a fixed array of block offsets, the last one handed
//! out first. Only the slot's thread changes them (or, once its process died, the one
//! thread that recovers the slot), so no lock; what the order of the stores keeps is
//! that a death at any instruction leaves every block listed below the count free in
//! no other place, and no block listed twice in a way that matters:
//! * a push stores the offset, then the count (Release: a later reader of the count
//!   sees the offset);
//! * a pop lowers the count before the block is used (a death in between loses the
//!   block to the cache, until the pool's next full recovery);
//! * taking blocks out to give them elsewhere (to the free bitmaps) copies them out and
//!   stores the new count before they are given (a death in between loses them, never
//!   gives them twice); shifting the rest down may leave, at a death, a later block
//!   listed twice, both copies free in the cache only, which a drain sets free twice
//!   (a free bit set twice is set).

use super::classes::{CLASSES, NCLASSES};
use crate::region::{bytes_for, Placed, Region};
use crate::Result;
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use std::sync::atomic::{AtomicU32, AtomicU64};
use std::sync::Arc;

/// The most blocks one class's cache holds: two batches and the one given back that
/// makes a cache give a batch away (`Allocator::give_back`).
pub(super) const CACHE_CAP: usize = 2 * MAX_BATCH + 1;

/// The largest batch of any class.
const MAX_BATCH: usize = 64;
const _: () = {
    let mut c = 0;
    while c < NCLASSES {
        assert!(CLASSES[c].batch as usize <= MAX_BATCH);
        c += 1;
    }
};

/// Every slot's caches (module docs).
pub(super) struct SlotCaches {
    counts: Placed<AtomicU32>,
    blocks: Placed<AtomicU64>,
}

impl SlotCaches {
    /// The region bytes of `slots` slots' caches.
    pub(super) const fn region_bytes(slots: usize) -> usize {
        bytes_for::<AtomicU32>(slots * NCLASSES)
            + bytes_for::<AtomicU64>(slots * NCLASSES * CACHE_CAP)
    }

    /// The caches of `slots` slots, placed in `region` as found (fresh: all empty).
    pub(super) fn place(region: &Arc<Region>, slots: usize) -> Result<SlotCaches> {
        Ok(SlotCaches {
            counts: region.place_as_found(slots * NCLASSES)?,
            blocks: region.place_as_found(slots * NCLASSES * CACHE_CAP)?,
        })
    }

    /// Whether `slot` has caches here.
    #[inline]
    pub(super) fn has(&self, slot: u32) -> bool {
        (slot as usize) < self.counts.len() / NCLASSES
    }

    #[inline]
    fn list(&self, slot: u32, class: usize) -> (&AtomicU32, &[AtomicU64]) {
        let i = slot as usize * NCLASSES + class;
        (
            &self.counts[i],
            &self.blocks[i * CACHE_CAP..(i + 1) * CACHE_CAP],
        )
    }

    /// Blocks in `slot`'s cache of `class`.
    #[inline]
    pub(super) fn len(&self, slot: u32, class: usize) -> usize {
        // Acquire: a recoverer's first read pairs with the dead owner's last push.
        self.list(slot, class).0.load(Acquire) as usize
    }

    /// The last block of `slot`'s cache of `class`, taken out.
    #[inline]
    pub(super) fn pop(&self, slot: u32, class: usize) -> Option<u64> {
        let (count, blocks) = self.list(slot, class);
        // Relaxed: the slot's thread is the only writer (module docs).
        let n = count.load(Relaxed).checked_sub(1)?;
        count.store(n, Relaxed);
        // Relaxed: written by this thread.
        Some(blocks[n as usize].load(Relaxed))
    }

    /// Add block `off` to `slot`'s cache of `class`; returns the count. The caller
    /// keeps it below [`CACHE_CAP`].
    #[inline]
    pub(super) fn push(&self, slot: u32, class: usize, off: u64) -> usize {
        let (count, blocks) = self.list(slot, class);
        let n = count.load(Relaxed);
        // Relaxed, then Release: the offset is in place before the count names it.
        blocks[n as usize].store(off, Relaxed);
        count.store(n + 1, Release);
        n as usize + 1
    }

    /// Take the `k` oldest blocks (the first listed) out of `slot`'s cache of `class`,
    /// into `out` (module docs: the count is lowered before the caller gives them).
    pub(super) fn take_oldest(&self, slot: u32, class: usize, k: usize, out: &mut Vec<u64>) {
        let (count, blocks) = self.list(slot, class);
        let n = count.load(Relaxed) as usize;
        let k = k.min(n);
        out.extend(blocks[..k].iter().map(|b| b.load(Relaxed)));
        for i in k..n {
            blocks[i - k].store(blocks[i].load(Relaxed), Relaxed);
        }
        count.store((n - k) as u32, Release);
    }
}
