//! The volatile set of free slabs (a bitset, first fit), kept under one mutex.

/// Free slabs: bit `i` set = slab `i` is free (not formatted, not in a large run, not
/// reserved).
#[derive(Debug)]
pub(crate) struct FreeSlabs {
    bits: Vec<u64>,
    count: usize,
    nfree: usize,
}

impl FreeSlabs {
    /// A set of `count` slabs, none free.
    pub(super) fn new(count: usize) -> FreeSlabs {
        FreeSlabs {
            bits: vec![0; count.div_ceil(64)],
            count,
            nfree: 0,
        }
    }

    /// Number of free slabs.
    pub(super) fn nfree(&self) -> usize {
        self.nfree
    }

    fn is_free(&self, i: usize) -> bool {
        self.bits[i / 64] & (1 << (i % 64)) != 0
    }

    /// Mark slabs `first..first + n` free. Each must be in range and not free.
    pub(super) fn insert(&mut self, first: usize, n: usize) {
        for i in first..first + n {
            debug_assert!(i < self.count && !self.is_free(i), "slab {i} freed twice");
            self.bits[i / 64] |= 1 << (i % 64);
        }
        self.nfree += n;
    }

    /// The first free slab at or after `from`.
    fn next_free(&self, from: usize) -> Option<usize> {
        let mut w = from / 64;
        if w >= self.bits.len() {
            return None;
        }
        let mut word = self.bits[w] & (!0u64 << (from % 64));
        loop {
            if word != 0 {
                let i = w * 64 + word.trailing_zeros() as usize;
                return (i < self.count).then_some(i);
            }
            w += 1;
            if w >= self.bits.len() {
                return None;
            }
            word = self.bits[w];
        }
    }

    /// Take the first run of `n` consecutive free slabs (first fit); returns its first
    /// slab, or `None` if there is no such run.
    pub(super) fn take_run(&mut self, n: usize) -> Option<usize> {
        if n == 0 || n > self.nfree {
            return None;
        }
        let mut i = self.next_free(0)?;
        loop {
            if i.checked_add(n)? > self.count {
                return None;
            }
            match (i + 1..i + n).find(|&j| !self.is_free(j)) {
                None => break,
                Some(busy) => i = self.next_free(busy + 1)?,
            }
        }
        for j in i..i + n {
            self.bits[j / 64] &= !(1 << (j % 64));
        }
        self.nfree -= n;
        Some(i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_fit_runs() {
        let mut s = FreeSlabs::new(130);
        s.insert(0, 130);
        assert_eq!(s.take_run(1), Some(0));
        assert_eq!(s.take_run(3), Some(1));
        s.insert(1, 1);
        assert_eq!(s.take_run(2), Some(4), "slab 1 alone is too short");
        assert_eq!(s.take_run(1), Some(1));
        assert_eq!(s.take_run(124), Some(6));
        assert_eq!(s.nfree(), 0);
        assert_eq!(s.take_run(1), None);
        s.insert(70, 60);
        assert_eq!(s.take_run(61), None);
        assert_eq!(s.take_run(60), Some(70));
    }
}
