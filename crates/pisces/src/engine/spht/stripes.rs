//! Versioned locks (TL2), one per stripe of objects, in DRAM.
//!
//! An object maps to a stripe by the hash of its header offset; unrelated objects may
//! share a stripe (false conflicts only). A stripe word holds either the timestamp of
//! the last transaction that wrote one of its objects (its *version*, `< 2^62`), or,
//! while a committer holds it, [`LOCKED`] | the committer's slot. Versions start at 0
//! each run (DRAM only): the working snapshot is created at open, so every version of
//! an earlier run is older than every reader of this one.
//!
//! Protocol (TL2): a reader accepts a stripe only if it is unlocked with a version whose
//! raw clock value is below its read version, and re-reads the word after copying the
//! object (a seqlock read). A committer locks the stripes of its write set by CAS, takes
//! its timestamp, validates its read set, writes back, and releases each stripe by
//! storing its timestamp (Release: the write-back happens-before any reader that sees
//! the new version).

use std::sync::atomic::AtomicU64;

/// Lock bit of a stripe word.
pub(super) const LOCKED: u64 = 1 << 63;

/// Stripes in a table: 2^18 words, 2 MiB of DRAM. Every table has this size.
const BITS: u32 = 18;
/// Mask of a stripe index.
const MASK: u64 = (1 << BITS) - 1;

/// The stripe table.
pub(crate) struct Stripes {
    words: Box<[AtomicU64]>,
}

/// A stripe's index: only [`Stripes::index`] makes one, below [`MASK`] + 1, the length
/// of every table, so [`Stripes::word`] needs no bounds check.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Stripe(u32);

impl Stripes {
    /// A table of `2^BITS` unlocked stripes at version 0.
    pub(crate) fn new() -> Stripes {
        Stripes {
            words: (0..=MASK).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    /// Stripe index of the object whose header word is at `hdr`.
    #[inline]
    pub(crate) fn index(&self, hdr: u64) -> Stripe {
        Self::index_of_hash(Self::hash(hdr))
    }

    /// The multiplicative hash of a header offset that [`Stripes::index`] takes bits
    /// 32 and up of (the read path's copy cache takes the top bits of the same
    /// product: one multiply for both).
    #[inline(always)]
    pub(crate) fn hash(hdr: u64) -> u64 {
        // Blocks are 16-byte aligned: drop those bits, then a multiplicative hash.
        (hdr >> 4).wrapping_mul(0x9E37_79B9_7F4A_7C15)
    }

    /// [`Stripes::index`] of the header offset whose [`Stripes::hash`] is `h`.
    #[inline(always)]
    pub(crate) fn index_of_hash(h: u64) -> Stripe {
        Stripe(((h >> 32) & MASK) as u32)
    }

    /// The word of stripe `i`.
    #[inline]
    pub(crate) fn word(&self, i: Stripe) -> &AtomicU64 {
        debug_assert!((i.0 as usize) < self.words.len());
        // SAFETY: `index` masks with `MASK`, and every table has `MASK + 1` words
        // (`new`).
        unsafe { self.words.get_unchecked(i.0 as usize) }
    }
}
