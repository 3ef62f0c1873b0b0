//! Runs of changed words: where a new version of an object differs from its home copy,
//! in 8-byte words, so that a commit logs and writes back only those (Pisces'
//! flush-diff, TimeStone's checkpoint diff).
//!
//! [`changed_word_runs`] yields the maximal runs `start..end` of word indices at which
//! two byte slices differ, in increasing order; runs never touch (a run ends at a word
//! that does not differ); the tests hold it to a naive word-by-word oracle. It is
//! written for the common case of an object whose words mostly did not change (a
//! B+-tree node where one key or value was written): it first skips whole 64-byte
//! blocks that are equal, comparing each with four 16-byte vector compares on x86-64
//! (eight word compares elsewhere), and compares word by word only inside a block
//! that differs, so the work for an unchanged block is one comparison, not eight.

/// Words per block that [`changed_word_runs`] skips with one comparison.
const BLOCK_WORDS: usize = 8;

/// The maximal runs of word indices (8-byte words) at which `new` and `old` differ, in
/// increasing order (module docs). The slices have the same length,
/// a multiple of 8 (a caller's bug otherwise: panics).
#[inline]
pub(crate) fn changed_word_runs<'a>(
    new: &'a [u8],
    old: &'a [u8],
) -> impl Iterator<Item = (usize, usize)> + 'a {
    assert!(
        new.len() == old.len() && new.len().is_multiple_of(8),
        "changed_word_runs of {} against {} bytes",
        new.len(),
        old.len()
    );
    let words = new.len() / 8;
    let differs = move |i: usize| {
        debug_assert!(i < words);
        // SAFETY: `i < words`, so bytes `8 i .. 8 i + 8` are inside both slices.
        unsafe {
            (new.as_ptr().add(8 * i) as *const u64).read_unaligned()
                != (old.as_ptr().add(8 * i) as *const u64).read_unaligned()
        }
    };
    let mut i = 0;
    std::iter::from_fn(move || {
        loop {
            while i + BLOCK_WORDS <= words {
                // SAFETY: words `i .. i + BLOCK_WORDS` are inside both slices.
                let equal =
                    unsafe { blocks_equal(new.as_ptr().add(8 * i), old.as_ptr().add(8 * i)) };
                if !equal {
                    break;
                }
                i += BLOCK_WORDS;
            }
            // Word by word through the block that differs (or the tail).
            let limit = (i + BLOCK_WORDS).min(words);
            while i < limit && !differs(i) {
                i += 1;
            }
            if i < limit || i == words {
                break;
            }
        }
        if i == words {
            return None;
        }
        let start = i;
        while i < words && differs(i) {
            i += 1;
        }
        Some((start, i))
    })
}

/// Whether the 64 bytes at `a` and at `b` are equal.
///
/// # Safety
/// Both ranges are readable (no alignment needed) and not written meanwhile.
#[inline(always)]
unsafe fn blocks_equal(a: *const u8, b: *const u8) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{
            __m128i, _mm_and_si128, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_movemask_epi8,
        };
        // SAFETY: SSE2 is part of the x86-64 baseline; the loads are unaligned ones
        // inside the caller's two 64-byte ranges.
        unsafe {
            let eq = |k: usize| {
                _mm_cmpeq_epi8(
                    _mm_loadu_si128(a.add(16 * k) as *const __m128i),
                    _mm_loadu_si128(b.add(16 * k) as *const __m128i),
                )
            };
            let all = _mm_and_si128(_mm_and_si128(eq(0), eq(1)), _mm_and_si128(eq(2), eq(3)));
            _mm_movemask_epi8(all) == 0xffff
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let mut diff = 0u64;
        for k in 0..BLOCK_WORDS {
            // SAFETY: word `k` of the caller's two 64-byte ranges.
            diff |= unsafe {
                (a.add(8 * k) as *const u64).read_unaligned()
                    ^ (b.add(8 * k) as *const u64).read_unaligned()
            };
        }
        diff == 0
    }
}

#[cfg(test)]
mod tests {
    use super::changed_word_runs;
    use proptest::prelude::*;

    /// The oracle: the maximal runs of word indices in `0..words` for which
    /// `differs(i)` holds, found word by word (the definition `changed_word_runs` is
    /// held to; kept naive on purpose).
    fn changed_runs(
        words: usize,
        differs: impl Fn(usize) -> bool,
    ) -> impl Iterator<Item = (usize, usize)> {
        let mut i = 0;
        std::iter::from_fn(move || {
            while i < words && !differs(i) {
                i += 1;
            }
            if i == words {
                return None;
            }
            let start = i;
            while i < words && differs(i) {
                i += 1;
            }
            Some((start, i))
        })
    }

    proptest! {
        /// The block-skipping scan finds exactly the runs of the word-by-word one, for
        /// every length and pattern of changed bytes (a change in any byte of a word
        /// changes the word), at any alignment of the slices.
        #[test]
        fn word_runs_match_the_word_by_word_scan(
            words in 0usize..70,
            changes in proptest::collection::vec((0usize..560, 1u8..=255), 0..12),
            shift in 0usize..8,
        ) {
            let mut buf_old = vec![0u8; 8 * words + 8];
            for (i, b) in buf_old.iter_mut().enumerate() {
                *b = (i * 7 % 251) as u8;
            }
            let old = &buf_old[shift..shift + 8 * words];
            let mut new = old.to_vec();
            for &(at, x) in &changes {
                if !new.is_empty() {
                    let at = at % new.len();
                    new[at] ^= x;
                }
            }
            let want: Vec<_> =
                changed_runs(words, |i| new[8 * i..8 * i + 8] != old[8 * i..8 * i + 8]).collect();
            let got: Vec<_> = changed_word_runs(&new, old).collect();
            prop_assert_eq!(got, want);
        }
    }

    #[test]
    fn word_runs_across_block_boundaries() {
        let old = vec![0u8; 8 * 24];
        let mut new = old.clone();
        for w in [0usize, 7, 8, 15, 16, 23] {
            new[8 * w + 3] = 1;
        }
        let runs: Vec<_> = changed_word_runs(&new, &old).collect();
        assert_eq!(runs, vec![(0, 1), (7, 9), (15, 17), (23, 24)]);
        assert_eq!(changed_word_runs(&old, &old).count(), 0);
        let all = vec![1u8; 8 * 24];
        assert_eq!(
            changed_word_runs(&all, &old).collect::<Vec<_>>(),
            vec![(0, 24)]
        );
    }

    fn runs(mask: &[bool]) -> Vec<(usize, usize)> {
        changed_runs(mask.len(), |i| mask[i]).collect()
    }

    #[test]
    fn maximal_runs_in_order() {
        assert_eq!(runs(&[]), vec![]);
        assert_eq!(runs(&[false, false]), vec![]);
        assert_eq!(runs(&[true]), vec![(0, 1)]);
        assert_eq!(runs(&[true, true, false, true]), vec![(0, 2), (3, 4)]);
        assert_eq!(
            runs(&[false, true, false, false, true, true]),
            vec![(1, 2), (4, 6)]
        );
    }
}
