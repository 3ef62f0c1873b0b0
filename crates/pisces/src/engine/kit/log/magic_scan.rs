//! Finding the next place a record header can start in a log ring: the first 8-byte
//! step whose first four bytes are a format's magic.
//!
//! Recovery's look for later records after the point where a log's chain stopped (the
//! torn-tail-or-damage decision) reads the rest of the ring, most of which is zero
//! (never written) or an old lap's entry bytes. A header starts with the magic, so the
//! positions without it are ruled out before anything is decoded. [`next_magic`] does
//! that test a block at a time: one comparison of every 4-byte lane of the block with
//! the magic, OR-ed together (a reduction the compiler turns into vector compares), and
//! only a block with a match is looked at position by position. Lanes between the
//! 8-byte steps can match too (a word's upper half); the look at the block's positions
//! drops those, so the result is exactly the one of testing every position in turn.

/// Bytes tested at once: four cache lines.
const BLOCK: usize = 256;

/// The first position `p` of `from, from + 8, from + 16, ..` below `end` whose four
/// bytes `ring[p..p + 4]` read as `magic` (little-endian), if any. Positions whose
/// four bytes do not fit in `ring` are not tested.
pub(crate) fn next_magic(ring: &[u8], from: usize, end: usize, magic: u32) -> Option<usize> {
    let end = end.min(ring.len().saturating_sub(3));
    let lane = |p: usize| u32::from_le_bytes(ring[p..p + 4].try_into().expect("4 bytes"));
    let mut pos = from;
    while pos < end {
        // Rule out whole blocks whose lanes all differ from the magic (the block's
        // positions, all below `end`, are among its lanes).
        while pos + BLOCK <= end {
            let hit = ring[pos..pos + BLOCK]
                .chunks_exact(4)
                .fold(false, |any, l| {
                    any | (u32::from_le_bytes(l.try_into().expect("4 bytes")) == magic)
                });
            if hit {
                break;
            }
            pos += BLOCK;
        }
        // A block with a matching lane, or the last positions: one at a time.
        let stop = (pos + BLOCK).min(end);
        while pos < stop {
            if lane(pos) == magic {
                return Some(pos);
            }
            pos += 8;
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const MAGIC: u32 = 0x5350_4854;

    /// The definition: every position in turn.
    fn naive(ring: &[u8], from: usize, end: usize, magic: u32) -> Option<usize> {
        (from..end)
            .step_by(8)
            .take_while(|&p| p + 4 <= ring.len())
            .find(|&p| u32::from_le_bytes(ring[p..p + 4].try_into().unwrap()) == magic)
    }

    #[test]
    fn finds_a_magic_at_every_step_of_a_zero_ring_and_nothing_past_the_end() {
        let len = 4 * BLOCK + 40;
        for at in (0..len - 4).step_by(4) {
            let mut ring = vec![0u8; len];
            ring[at..at + 4].copy_from_slice(&MAGIC.to_le_bytes());
            for from in [0, 8, 16, 24, 32, 48] {
                for end in [0, at, at + 1, at + 8, BLOCK, len - 3, len, len + 64] {
                    assert_eq!(
                        next_magic(&ring, from, end, MAGIC),
                        naive(&ring, from, end, MAGIC),
                        "magic at {at}, from {from}, end {end}"
                    );
                }
            }
        }
    }

    #[test]
    fn a_magic_between_the_steps_is_not_a_position() {
        // Upper halves of words hold the magic everywhere; the positions never do.
        let mut ring = vec![0u8; 8 * BLOCK];
        for p in (4..ring.len()).step_by(8) {
            ring[p..p + 4].copy_from_slice(&MAGIC.to_le_bytes());
        }
        assert_eq!(next_magic(&ring, 0, ring.len(), MAGIC), None);
        assert_eq!(next_magic(&ring, 4, ring.len(), MAGIC), Some(4));
        ring[5 * BLOCK + 16..5 * BLOCK + 20].copy_from_slice(&MAGIC.to_le_bytes());
        assert_eq!(
            next_magic(&ring, 8, ring.len(), MAGIC),
            Some(5 * BLOCK + 16)
        );
    }

    proptest! {
        #[test]
        fn agrees_with_testing_every_position(
            words in proptest::collection::vec(
                prop_oneof![Just(0u32), Just(MAGIC), Just(MAGIC ^ 1), any::<u32>()],
                0..400,
            ),
            sparse in 0usize..4,
            from in 0usize..1700,
            end in 0usize..1700,
        ) {
            // Mostly zero rings (as most of a log past its end is), some dense ones.
            let ring: Vec<u8> = words
                .iter()
                .enumerate()
                .flat_map(|(i, w)| if i % (sparse * 7 + 1) == 0 { *w } else { 0 }.to_le_bytes())
                .collect();
            prop_assert_eq!(
                next_magic(&ring, from, end, MAGIC),
                naive(&ring, from, end, MAGIC)
            );
        }
    }
}
