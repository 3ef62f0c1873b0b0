//! Runs of changed words: where a new version of an object differs from its home copy,
//! in 8-byte words, so that a commit logs and writes back only those (Pisces'
//! flush-diff, TimeStone's checkpoint diff).
//!
//! [`changed_runs`] (and [`changed_word_runs`], for words in memory) yields the maximal runs `start..end` of word indices below `words`
//! for which `differs` holds, in increasing order; runs never touch (a run ends at a
//! word that does not differ). `differs` is only ever called with an index below
//! `words`, which is what lets callers compare through raw pointers.

/// The maximal runs of word indices in `0..words` for which `differs(i)` holds (see
/// the module docs).
#[inline]
pub fn changed_runs(
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

/// [`changed_runs`] of `new` against `old` (words `0..min(new.len(), old.len())`):
/// the same runs, found faster where the words are in memory. Equal blocks of four
/// words are skipped with one comparison each (the compiler makes it two vector
/// compares), so an object with a word or two changed — a bucket chunk whose count and
/// one head changed, the common commit — costs about half the instructions of the
/// word-by-word scan.
#[inline]
pub fn changed_word_runs<'a>(
    new: &'a [u64],
    old: &'a [u64],
) -> impl Iterator<Item = (usize, usize)> + 'a {
    let words = new.len().min(old.len());
    let (new, old) = (&new[..words], &old[..words]);
    let mut i = 0;
    std::iter::from_fn(move || {
        loop {
            if let (Some(a), Some(b)) = (new.get(i..i + 4), old.get(i..i + 4)) {
                let d = (a[0] ^ b[0]) | (a[1] ^ b[1]) | (a[2] ^ b[2]) | (a[3] ^ b[3]);
                if d == 0 {
                    i += 4;
                    continue;
                }
            }
            if i < words && new[i] == old[i] {
                i += 1;
                continue;
            }
            break;
        }
        if i == words {
            return None;
        }
        let start = i;
        while i < words && new[i] != old[i] {
            i += 1;
        }
        Some((start, i))
    })
}

#[cfg(test)]
mod tests {
    use super::{changed_runs, changed_word_runs};

    /// The block-skipping scan finds exactly the runs of the word-by-word one, for
    /// every pattern of changed words in objects of up to 12 words and for runs
    /// across block boundaries in a long one.
    #[test]
    fn word_runs_equal_the_reference_runs() {
        for len in 0..=12usize {
            for mask in 0u32..1 << len {
                let old: Vec<u64> = (0..len as u64).map(|i| i * 7 + 1).collect();
                let new: Vec<u64> = (0..len)
                    .map(|i| old[i] ^ u64::from(mask >> i & 1) << (i % 64))
                    .collect();
                let want: Vec<_> = changed_runs(len, |i| new[i] != old[i]).collect();
                let got: Vec<_> = changed_word_runs(&new, &old).collect();
                assert_eq!(got, want, "len {len} mask {mask:#b}");
            }
        }
        let old = vec![5u64; 40];
        let mut new = old.clone();
        for i in [3, 4, 5, 11, 16, 17, 18, 19, 20, 31, 32, 39] {
            new[i] = 6;
        }
        let want: Vec<_> = changed_runs(40, |i| new[i] != old[i]).collect();
        assert_eq!(changed_word_runs(&new, &old).collect::<Vec<_>>(), want);
        assert_eq!(
            want,
            vec![(3, 6), (11, 12), (16, 21), (31, 33), (39, 40)]
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
