//! Monotone persistent words that carry their own check (the log watermark, SP3's
//! `retired` words).
//!
//! Recovery trusts such a word completely: one too high skips records that were never
//! written home, one too low replays old records over newer values or drops a slot's
//! records as if their predecessors were lost; either way the pool opens to a state no
//! sequence of transactions produced. So the word holds its value in the low 48 bits
//! (counters of the logical clock or of a slot's transactions, one per commit) and a
//! 16-bit CRC32C-based check of it, never zero, in the high 16 bits. One aligned 8-byte
//! word: a crash never tears it, and a flipped bit or garbage fails the check
//! ([`Word::Damaged`]). The all-zero word ([`Word::Zero`]) is the never-written state;
//! what it may mean is the caller's to decide (an engine that always writes the word
//! at its first recovery treats it as damage in a pool that holds data).
//!
//! Pools of superblock format 3 kept these words as plain numbers ([`legacy`]): a word
//! without a valid check whose high 16 bits are clear is read as that number there.
//! Recovery rewrites them encoded before the open makes the pool format 4.

use crate::heap::Heap;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::{AcqRel, Acquire};

/// The largest value a word holds.
pub(crate) const MAX_VALUE: u64 = (1 << 48) - 1;

/// The first superblock format whose words are encoded.
const ENCODED_SINCE_FORMAT: u32 = 4;

fn check_bits(v: u64) -> u64 {
    let c = crc32c::crc32c(&v.to_le_bytes()[..6]) as u16 | 1;
    u64::from(c) << 48
}

/// The word that holds `v` (at most [`MAX_VALUE`]; larger values are clamped).
pub(crate) fn encode(v: u64) -> u64 {
    let v = v.min(MAX_VALUE);
    v | check_bits(v)
}

/// The value an encoded word holds, if its check is right.
pub(crate) fn decode(word: u64) -> Option<u64> {
    let v = word & MAX_VALUE;
    (word == encode(v)).then_some(v)
}

/// Whether `heap`'s pool keeps these words plain (format 3, as read at open).
pub(crate) fn legacy(heap: &Heap) -> bool {
    heap.superblock().format_version < ENCODED_SINCE_FORMAT
}

/// What a word read from the pool holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Word {
    /// All zero: never written.
    Zero,
    /// A valid value.
    Value(u64),
    /// The check fails: damaged.
    Damaged,
}

/// Classify `word` (`legacy`: see [`legacy`]).
pub(crate) fn classify(word: u64, legacy: bool) -> Word {
    if word == 0 {
        return Word::Zero;
    }
    if let Some(v) = decode(word) {
        return Word::Value(v);
    }
    if legacy && word <= MAX_VALUE {
        return Word::Value(word);
    }
    Word::Damaged
}

/// Raise the word to hold at least `v`, encoded (a plain word of a format 3 pool is
/// rewritten encoded even if its value is already `v` or more). The caller persists.
pub(crate) fn raise(a: &AtomicU64, v: u64) {
    let v = v.min(MAX_VALUE);
    // Acquire: pairs with the AcqRel of another raiser, whose value we then compare.
    let mut cur = a.load(Acquire);
    loop {
        let (have, encoded) = match decode(cur) {
            Some(h) => (h, true),
            None => (cur & MAX_VALUE, cur == 0),
        };
        if have >= v && encoded {
            return;
        }
        // AcqRel: the flush that follows reads the line, which then holds our value or
        // a larger one; nothing else is ordered by this RMW.
        crate::engine::kit::shared_counts::count_write(a);
        match a.compare_exchange_weak(cur, encode(have.max(v)), AcqRel, Acquire) {
            Ok(_) => return,
            Err(now) => cur = now,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_single_bit_flip_fails_the_check() {
        for v in [0, 1, 2, 77, 1 << 20, MAX_VALUE] {
            let w = encode(v);
            assert_eq!(decode(w), Some(v));
            assert_eq!(classify(w, false), Word::Value(v));
            for bit in 0..64 {
                assert_eq!(decode(w ^ (1 << bit)), None, "value {v}, bit {bit}");
                assert_ne!(classify(w ^ (1 << bit), false), Word::Value(v));
            }
        }
        assert_eq!(classify(0, false), Word::Zero);
        assert_eq!(classify(5, false), Word::Damaged);
        assert_eq!(classify(5, true), Word::Value(5));
        assert_eq!(classify(encode(9), true), Word::Value(9));
    }

    #[test]
    fn raise_encodes_and_never_lowers() {
        let a = AtomicU64::new(0);
        raise(&a, 5);
        assert_eq!(decode(a.load(Acquire)), Some(5));
        raise(&a, 3);
        assert_eq!(decode(a.load(Acquire)), Some(5));
        // A format 3 plain word is rewritten encoded, keeping the larger value.
        let a = AtomicU64::new(9);
        raise(&a, 4);
        assert_eq!(decode(a.load(Acquire)), Some(9));
    }
}
