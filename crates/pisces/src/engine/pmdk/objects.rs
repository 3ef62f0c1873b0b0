//! DRAM side tables of the `pmdk` engine: which offsets are object payloads (a bitmap,
//! one bit per 8 bytes of the pool) and the striped lock words.
//!
//! Bits change only under the object's exclusive lock: set after the object's header
//! is written (Release, so a reader that sees the bit — Acquire — sees the length), and
//! cleared before PMDK may reuse the block.

use crate::engine::kit::shared_counts::count_write;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::{Acquire, Release};

/// Number of lock stripes (a power of two): two live objects share a lock with
/// probability 2^-18, which only costs a spurious conflict.
const STRIPES: usize = 1 << 18;

pub(crate) struct Objects {
    bits: Box<[AtomicU64]>,
    locks: Box<[AtomicU64]>,
}

impl Objects {
    /// Tables for a pool of `pool_size` bytes, no object yet.
    pub(crate) fn new(pool_size: u64) -> Self {
        let words = (pool_size / 8).div_ceil(64) as usize;
        Objects {
            bits: (0..words).map(|_| AtomicU64::new(0)).collect(),
            locks: (0..STRIPES).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    fn slot(&self, off: u64) -> Option<(usize, u64)> {
        if !off.is_multiple_of(8) {
            return None;
        }
        let i = off / 8;
        let w = (i / 64) as usize;
        (w < self.bits.len()).then_some((w, 1u64 << (i % 64)))
    }

    /// True if `off` is the payload offset of a live object.
    #[inline]
    pub(crate) fn contains(&self, off: u64) -> bool {
        // Acquire: pairs with the Release in `insert`, so the header written before
        // the bit was set is visible to the caller.
        self.slot(off)
            .is_some_and(|(w, m)| self.bits[w].load(Acquire) & m != 0)
    }

    /// Mark `off` as an object payload (its header already written).
    pub(crate) fn insert(&self, off: u64) {
        if let Some((w, m)) = self.slot(off) {
            count_write(&self.bits[w]);
            self.bits[w].fetch_or(m, Release);
        }
    }

    /// Unmark `off`.
    pub(crate) fn remove(&self, off: u64) {
        if let Some((w, m)) = self.slot(off) {
            count_write(&self.bits[w]);
            self.bits[w].fetch_and(!m, Release);
        }
    }

    /// The lock stripe of the object at `off`: (key, lock word).
    #[inline]
    pub(crate) fn lock_of(&self, off: u64) -> (u64, &AtomicU64) {
        let h = (off / 8).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32;
        let k = h as usize & (STRIPES - 1);
        (k as u64, &self.locks[k])
    }

    /// The lock word of stripe `key`.
    pub(crate) fn lock_word(&self, key: u64) -> &AtomicU64 {
        &self.locks[key as usize & (STRIPES - 1)]
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn bitmap_tracks_exact_offsets_and_refuses_the_rest() {
        let o = Objects::new(1 << 20);
        o.insert(4096);
        assert!(o.contains(4096));
        assert!(!o.contains(4104));
        assert!(!o.contains(4097)); // unaligned
        assert!(!o.contains(u64::MAX - 7)); // beyond the pool
        o.remove(4096);
        assert!(!o.contains(4096));
        let (k, w) = o.lock_of(4096);
        assert!(std::ptr::eq(w, o.lock_word(k)));
    }
}
