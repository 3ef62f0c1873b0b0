//! Durability (§3.1) and predecessor tracking (§3.2): the per-slot published words and
//! the persistent markers.
//!
//! # Per-slot volatile metadata ([`SlotMeta`], cache-padded)
//! * `vts`: one word = timestamp | [`PERS`] (bit 63, the paper's *isPers*) | [`UPD`]
//!   (bit 62, *isUpd*). Packing the three into one word makes every read of them
//!   consistent without multi-word atomicity.
//! * `last`: the timestamp and log link of the slot's last committed update
//!   transaction, two words under a seqlock (the paper reads 32 bytes of metadata with
//!   one AVX load, which x86 does not guarantee to be atomic: hence the seqlock).
//!
//! # Persistent words (engine area)
//! * `pmarker` at [`MARKER_OFFSET`]: the global marker (`marker=global`).
//! * one marker per slot at [`slot_marker_offset`] (`marker=nvhtm`, NV-HTM's
//!   sequential per-thread commit markers), each on its own cache line.
//! * `replayed` at [`REPLAYED_OFFSET`]: every durable transaction with a timestamp up to
//!   it is applied to the durable heap.
//!
//! The durable point of a pool is `max(pmarker, max slot markers)`, or the newest valid
//! point record's timestamp if that is larger (`log`, *Point records*): every committed
//! update transaction with a timestamp up to it has its record in its log.

use crate::heap::layout::ENGINE_AREA_OFFSET;
use crate::heap::Heap;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};

/// isPers bit of a `vts` word.
pub(super) const PERS: u64 = 1 << 63;
/// isUpd bit of a `vts` word.
pub(super) const UPD: u64 = 1 << 62;
/// Timestamp bits of a `vts` word.
pub(super) const TS_MASK: u64 = UPD - 1;

/// Offset of the global marker (after the watermark word and the root slot).
pub(super) const MARKER_OFFSET: usize = ENGINE_AREA_OFFSET + 128;
/// Offset of the replay progress word.
pub(super) const REPLAYED_OFFSET: usize = ENGINE_AREA_OFFSET + 192;
/// Offset of the first per-slot marker.
pub(super) const SLOT_MARKERS_OFFSET: usize = ENGINE_AREA_OFFSET + 4096;

/// Offset of slot `slot`'s NV-HTM marker.
pub(super) fn slot_marker_offset(slot: usize) -> usize {
    SLOT_MARKERS_OFFSET + 64 * slot
}

/// Engine-area bytes for `max_threads` slots.
pub(super) fn engine_area_bytes(max_threads: usize) -> usize {
    4096 + 64 * max_threads
}

/// The durable point recorded in a pool (recovery, inspect).
pub(super) fn durable_point(heap: &Heap) -> u64 {
    let n = heap.layout().max_threads;
    (0..n)
        .map(|s| heap.atomic_u64(slot_marker_offset(s)).load(Acquire))
        .fold(heap.atomic_u64(MARKER_OFFSET).load(Acquire), u64::max)
}

/// The replay progress recorded in a pool.
pub(super) fn replayed(heap: &Heap) -> u64 {
    heap.atomic_u64(REPLAYED_OFFSET).load(Acquire)
}

/// Raise the replay progress word to `ts` and persist it.
pub(super) fn persist_replayed(heap: &Heap, ts: u64) {
    heap.atomic_u64(REPLAYED_OFFSET).fetch_max(ts, Relaxed);
    heap.persist(REPLAYED_OFFSET, 8);
}

/// One slot's published metadata.
#[derive(Debug)]
pub(crate) struct SlotMeta {
    /// ts | PERS | UPD.
    pub vts: AtomicU64,
    seq: AtomicU64,
    last_ts: AtomicU64,
    last_link: AtomicU64,
}

impl Default for SlotMeta {
    fn default() -> Self {
        SlotMeta {
            // Idle: persistent, timestamp 0.
            vts: AtomicU64::new(PERS),
            seq: AtomicU64::new(0),
            last_ts: AtomicU64::new(0),
            last_link: AtomicU64::new(0),
        }
    }
}

impl SlotMeta {
    /// Publish the slot's last update transaction (only the owner writes).
    pub(crate) fn set_last(&self, ts: u64, link: u64) {
        let s = self.seq.load(Relaxed);
        self.seq.store(s + 1, Relaxed);
        // Release fence: the odd sequence number is visible before the new fields.
        std::sync::atomic::fence(Release);
        self.last_ts.store(ts, Relaxed);
        self.last_link.store(link, Relaxed);
        // Release: the fields are visible before the even number.
        self.seq.store(s + 2, Release);
    }

    /// A consistent (ts, link) of the slot's last update transaction ((0, 0): none).
    pub(crate) fn last(&self) -> (u64, u64) {
        let mut round = 0;
        loop {
            let s1 = self.seq.load(Acquire);
            if s1 & 1 == 0 {
                let ts = self.last_ts.load(Relaxed);
                let l = self.last_link.load(Relaxed);
                // Acquire fence: the field loads happen before the re-check.
                std::sync::atomic::fence(Acquire);
                if self.seq.load(Relaxed) == s1 {
                    return (ts, l);
                }
            }
            crate::sync::spin_step(&mut round);
        }
    }
}
