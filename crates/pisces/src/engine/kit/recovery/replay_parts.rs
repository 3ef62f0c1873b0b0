//! Parallel replay's partition of the pool: which thread writes which bytes.
//!
//! The pool is cut into [`PART_BYTES`] chunks, strided over the replay threads: chunk
//! `c` belongs to part `c mod count`. Every replay thread walks the whole replay order
//! and writes only the bytes of its own chunks, so threads write disjoint memory, each
//! byte is written by one thread in replay order (the result is serial replay's), and
//! no thread waits for another until the end.
//!
//! A recovery that decodes every record once while it parses can note, per record,
//! the parts its data entries write ([`part_mask`], bit `p`: part `p`); a replay thread
//! then skips the records of other parts without reading their bytes
//! ([`Part::touched_by`]). With one-word records (most of a full log) each thread then
//! reads only its share of the log instead of all of it.
//!
//! **Invariant:** a record's mask holds the part of every chunk any of its data entries
//! overlaps. A missing bit loses writes: the mutation `ReplayPartMask` marks only the
//! first chunk's part, and the parallel-recovery tests of `sp3` and `spht` catch it.

use crate::engine::kit::log::redo_log::Entry;

crate::mutation::point! {
    /// Recovery marks a record only for the replay part of the first chunk its data
    /// entries write, so a parallel replay thread skips the pieces of its own chunks that
    /// a record writes beyond that chunk.
    pub(crate) static REPLAY_PART_MASK = "replay-part-mask";
}

/// Bytes of the chunks by which parallel replay partitions the pool.
pub(crate) const PART_BYTES: usize = 4096;

/// `log2(PART_BYTES)`.
const PART_SHIFT: u32 = PART_BYTES.trailing_zeros();

/// The share of the pool one replay thread writes: the chunks whose number mod
/// `count` is `index`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Part {
    /// This part's number, below `count`.
    pub index: usize,
    /// How many parts the pool is cut into (1: serial replay).
    pub count: usize,
}

impl Part {
    /// Every chunk (serial replay).
    pub(crate) const ALL: Part = Part { index: 0, count: 1 };

    /// True if a record whose data entries touch the parts of `mask` has anything
    /// for this part.
    #[inline]
    pub(crate) fn touched_by(self, mask: u32) -> bool {
        self.count == 1 || mask & (1 << self.index) != 0
    }

    /// True if pool offset `off` is in one of this part's chunks.
    #[inline]
    pub(crate) fn owns(self, off: u64) -> bool {
        self.count == 1 || part_of(off, self.count) == self.index
    }
}

/// The part of `count` that pool offset `off` belongs to. A power-of-two count takes a
/// mask: this runs for every replayed word, and a 64-bit division per word was 40 % of
/// a two-thread replay of one-word records.
#[inline]
pub(crate) fn part_of(off: u64, count: usize) -> usize {
    let chunk = off >> PART_SHIFT;
    if count.is_power_of_two() {
        (chunk & (count as u64 - 1)) as usize
    } else {
        (chunk % count as u64) as usize
    }
}

/// The parts (bit p: part p of `parts`, at most 32) whose chunks `off..off + len`
/// overlaps.
pub(crate) fn part_mask(off: usize, len: usize, parts: usize) -> u32 {
    debug_assert!(parts <= 32);
    if len == 0 {
        return 0;
    }
    if parts == 1 {
        return 1;
    }
    let (first, last) = (off / PART_BYTES, (off + len - 1) / PART_BYTES);
    if first == last {
        // One chunk (a word entry, most of a full log): no loop, no division.
        return 1 << part_of(off as u64, parts);
    }
    let mut mask = 0u32;
    // After `parts` consecutive chunks every part is in.
    for chunk in first..=last.min(first + parts - 1) {
        mask |= 1 << (chunk % parts);
    }
    if crate::mutation::active!(REPLAY_PART_MASK) {
        // The bug: only the part of the first chunk is marked.
        mask = 1 << (first % parts);
    }
    mask
}

/// The parts (of `parts`) a redo entry's data writes; none for allocator and
/// operation entries.
#[inline]
pub(crate) fn entry_mask(e: &Entry<'_>, parts: usize) -> u32 {
    match *e {
        Entry::Word { off, .. } => part_mask(off as usize, 8, parts),
        Entry::Range { off, data } => part_mask(off as usize, data.len(), parts),
        Entry::Alloc(_) | Entry::Free(_) | Entry::Op { .. } => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mask_names_every_part_a_range_overlaps() {
        assert_eq!(part_mask(0, 8, 1), 1);
        assert_eq!(part_mask(PART_BYTES - 8, 8, 2), 0b01);
        assert_eq!(part_mask(PART_BYTES, 8, 2), 0b10);
        assert_eq!(part_mask(PART_BYTES - 8, 16, 2), 0b11);
        assert_eq!(part_mask(0, 10 * PART_BYTES, 3), 0b111);
        assert_eq!(part_mask(5 * PART_BYTES + 1, 0, 3), 0);
        for count in 1..=5 {
            for off in (0..40 * PART_BYTES as u64).step_by(1000) {
                let owner = (0..count).filter(|&i| Part { index: i, count }.owns(off));
                assert_eq!(owner.collect::<Vec<_>>(), vec![part_of(off, count)]);
                let mask = part_mask(off as usize, 8, count);
                assert_eq!(mask, 1 << part_of(off, count), "off {off} count {count}");
            }
        }
    }
}
