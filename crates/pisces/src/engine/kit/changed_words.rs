//! Runs of changed words: where a new version of an object differs from its home copy,
//! in 8-byte words, so that a commit logs and writes back only those (Pisces'
//! flush-diff, TimeStone's checkpoint diff).
//!
//! [`changed_runs`] yields the maximal runs `start..end` of word indices below `words`
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

#[cfg(test)]
mod tests {
    use super::changed_runs;

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
