//! The persistent recycle watermark of the redo-log engines (Pisces' P-2, §3.2).
//!
//! One 8-byte word in the engine area says "every record with a timestamp below W has
//! been written home durably; recovery ignores it". A thread raises W (never lowers it)
//! and persists it *before* it reuses log space below W, so recovery can never replay an
//! old, still-readable record over a newer value whose own record was recycled.
//!
//! # Encoding: damage is refused, never trusted
//! Recovery trusts W completely: a W too high skips records that were never written
//! home, one too low replays old records over newer values; either way the pool opens
//! to a state no sequence of transactions produced. So the word carries its own check:
//! the value in the low 48 bits (timestamps of the logical clock, one per commit), a
//! 16-bit CRC32C-based check of it in the high 16 bits, never zero. One aligned 8-byte
//! word: a crash never tears it, and any damage to it (a flipped bit, garbage, zeros)
//! fails the check and is refused ([`load`]). The all-zero word is accepted only in a
//! pool that holds nothing yet (its creation ended before its first recovery raised W
//! to 1): recovery checks that.
//!
//! Pools of superblock format 3 kept W as a plain number; recovery reads it as such
//! and rewrites it encoded, before the open makes the pool format 4.

use crate::heap::layout::ENGINE_AREA_OFFSET;
use crate::heap::Heap;
use crate::{Error, Result};
use std::sync::atomic::Ordering::{AcqRel, Acquire};

/// Offset of the watermark word (the first word of the engine area).
pub const WATERMARK_OFFSET: usize = ENGINE_AREA_OFFSET;

/// The largest watermark the word holds.
pub const MAX_VALUE: u64 = (1 << 48) - 1;

/// The first superblock format whose watermark word is encoded.
const ENCODED_SINCE_FORMAT: u32 = 4;

fn check_bits(v: u64) -> u64 {
    let c = crc32c::crc32c(&v.to_le_bytes()[..6]) as u16 | 1;
    u64::from(c) << 48
}

/// The word that holds watermark `v` (at most [`MAX_VALUE`]).
pub fn encode(v: u64) -> u64 {
    let v = v.min(MAX_VALUE);
    v | check_bits(v)
}

/// The watermark a word holds, if its check is right.
pub fn decode(word: u64) -> Option<u64> {
    let v = word & MAX_VALUE;
    (word == encode(v)).then_some(v)
}

/// The durable watermark: `Ok(None)` for an all-zero word (a pool that committed
/// nothing yet, or damage: the caller decides), `Err(Corrupt)` for a word whose check
/// fails.
pub fn load(heap: &Heap) -> Result<Option<u64>> {
    // Acquire: pairs with `raise` of another thread, so a record dropped by that
    // thread below the value we see is not read by us as live.
    let word = heap.atomic_u64(WATERMARK_OFFSET).load(Acquire);
    if heap.superblock().format_version < ENCODED_SINCE_FORMAT {
        return Ok((word != 0).then_some(word));
    }
    if word == 0 {
        return Ok(None);
    }
    decode(word).map(Some).ok_or_else(|| {
        Error::Corrupt(format!(
            "the log watermark word in the engine area is damaged ({word:#018x} fails its check)"
        ))
    })
}

/// Make the watermark exactly `v`, encoded, and durable (recovery, alone on the pool:
/// also rewrites a format 3 pool's plain word).
pub fn set(heap: &Heap, v: u64) {
    // AcqRel: nobody else runs; any ordering would do.
    heap.atomic_u64(WATERMARK_OFFSET).swap(encode(v), AcqRel);
    heap.persist(WATERMARK_OFFSET, 8);
}

/// Raise the watermark to at least `w` and make it durable before returning.
pub fn raise(heap: &Heap, w: u64) {
    let a = heap.atomic_u64(WATERMARK_OFFSET);
    // Acquire: see `load`. Words at run time are always encoded (recovery wrote one).
    let mut cur = a.load(Acquire);
    while cur & MAX_VALUE < w.min(MAX_VALUE) {
        // AcqRel: the flush that follows reads the line, which then holds our value or
        // a larger one; nothing else is ordered by this RMW.
        match a.compare_exchange_weak(cur, encode(w), AcqRel, Acquire) {
            Ok(_) => break,
            Err(now) => cur = now,
        }
    }
    // The line now holds a value >= w whoever wrote it; our flush + fence makes it
    // durable before the caller drops any record below w.
    heap.persist(WATERMARK_OFFSET, 8);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_single_bit_flip_and_zero_fail_the_check() {
        for v in [0, 1, 2, 77, 1 << 20, MAX_VALUE] {
            let w = encode(v);
            assert_eq!(decode(w), Some(v));
            for bit in 0..64 {
                assert_eq!(decode(w ^ (1 << bit)), None, "value {v}, bit {bit}");
            }
        }
        assert_eq!(decode(0), None);
    }
}
