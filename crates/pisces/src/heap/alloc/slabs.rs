//! The volatile set of free slabs (a bitset, first fit), in the allocator's region under
//! one lock word.
//!
//! The lock's data is the number of free slabs; the bit words are placed beside it and
//! read and written only under that lock (which orders them: plain words behind
//! [`Guarded`]). The number of slabs, the geometry, is this process's (every process
//! derives it from the pool's layout).

use crate::holder_lock::{HolderMutex, HolderMutexGuard};
use crate::region::{bytes_for, Guarded, Line, Placed, PlacedValue, Region};
use crate::Result;
use std::sync::Arc;

/// Free slabs: bit `i` set = slab `i` is free (not formatted, not in a large run, not
/// reserved).
pub(super) struct FreeSlabs {
    /// The number of free slabs, under the set's lock, on a line of its own (every
    /// slab taken or given back writes it).
    nfree: PlacedValue<Line<HolderMutex<u64>>>,
    /// `count.div_ceil(64)` words, reached only under the lock of `nfree`.
    bits: Placed<Guarded<u64>>,
    /// Slabs in the set's range (the pool's largest geometry).
    count: usize,
}

impl std::fmt::Debug for FreeSlabs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FreeSlabs")
            .field("count", &self.count)
            .field("lock", &**self.nfree)
            .finish_non_exhaustive()
    }
}

impl FreeSlabs {
    /// The region bytes [`FreeSlabs::place`] takes for `count` slabs.
    pub(super) const fn region_bytes(count: usize) -> usize {
        bytes_for::<Line<HolderMutex<u64>>>(1) + bytes_for::<Guarded<u64>>(count.div_ceil(64))
    }

    /// Place the set of `count` slabs in `region` as found there: in a fresh region,
    /// none free.
    pub(super) fn place(region: &Arc<Region>, count: usize) -> Result<FreeSlabs> {
        Ok(FreeSlabs {
            nfree: region.place_value_as_found()?,
            bits: region.place_as_found(count.div_ceil(64))?,
            count,
        })
    }

    /// Take the set's lock for `holder` (see `HolderMutex::lock`).
    #[inline]
    pub(super) fn lock(&self, holder: u32) -> FreeSlabsGuard<'_> {
        FreeSlabsGuard {
            nfree: self.nfree.lock(holder),
            bits: &self.bits,
            count: self.count,
        }
    }

    /// Who holds the lock now (see `HolderLock::holder`).
    #[cfg(test)]
    pub(super) fn holder(&self) -> Option<u32> {
        self.nfree.holder()
    }

    /// The set's lock as `holder`, a thread slot whose process died holding it, for
    /// its one recoverer; None if `holder` does not hold it. The count is made again
    /// from the bits, each of which a holder changes by one store: a run it was taking
    /// or giving back may be left in part free, in part not (the rest lost until the
    /// pool's next recovery of the whole), never counted wrong.
    pub(super) fn adopt_dead(&self, holder: u32) -> Option<FreeSlabsGuard<'_>> {
        let mut g = FreeSlabsGuard {
            nfree: self.nfree.adopt(holder)?,
            bits: &self.bits,
            count: self.count,
        };
        let free = (0..self.count).filter(|&i| g.is_free(i)).count();
        *g.nfree = free as u64;
        Some(g)
    }
}

/// The free-slab set under its lock.
pub(super) struct FreeSlabsGuard<'a> {
    nfree: HolderMutexGuard<'a, u64>,
    bits: &'a [Guarded<u64>],
    count: usize,
}

impl FreeSlabsGuard<'_> {
    /// Number of free slabs.
    pub(super) fn nfree(&self) -> usize {
        *self.nfree as usize
    }

    /// Bit word `w`.
    #[inline]
    fn word(&self, w: usize) -> u64 {
        // SAFETY: the set's lock is held (`self.nfree`), which guards every bit word;
        // the value is copied out, no reference made.
        unsafe { *self.bits[w].get() }
    }

    /// Change bit word `w` to `f` of it.
    #[inline]
    fn update(&mut self, w: usize, f: impl FnOnce(u64) -> u64) {
        // SAFETY: as in `word`; the value is read, then written, with no reference
        // made, and `&mut self` keeps any other access through this guard out between.
        unsafe {
            let p = self.bits[w].get();
            *p = f(*p);
        }
    }

    fn is_free(&self, i: usize) -> bool {
        self.word(i / 64) & (1 << (i % 64)) != 0
    }

    /// Mark slabs `first..first + n` free. Each must be in range and not free.
    pub(super) fn insert(&mut self, first: usize, n: usize) {
        for i in first..first + n {
            debug_assert!(i < self.count && !self.is_free(i), "slab {i} freed twice");
            self.update(i / 64, |w| w | 1 << (i % 64));
        }
        *self.nfree += n as u64;
    }

    /// Mark the slabs of `first..first + n` that are not free free (a recoverer's
    /// insertion that a dead holder may have begun). Each must be in range.
    pub(super) fn insert_missing(&mut self, first: usize, n: usize) {
        for i in first..first + n {
            if !self.is_free(i) {
                self.insert(i, 1);
            }
        }
    }

    /// Slab `i` made free without counting it: a holder that died between the two
    /// stores of an insertion (tests of `adopt_dead`).
    #[cfg(test)]
    pub(super) fn set_free_uncounted(&mut self, i: usize) {
        self.update(i / 64, |w| w | 1 << (i % 64));
    }

    /// The first free slab at or after `from`.
    fn next_free(&self, from: usize) -> Option<usize> {
        let mut w = from / 64;
        if w >= self.bits.len() {
            return None;
        }
        let mut word = self.word(w) & (!0u64 << (from % 64));
        loop {
            if word != 0 {
                let i = w * 64 + word.trailing_zeros() as usize;
                return (i < self.count).then_some(i);
            }
            w += 1;
            if w >= self.bits.len() {
                return None;
            }
            word = self.word(w);
        }
    }

    /// Take the first run of `n` consecutive free slabs (first fit); returns its first
    /// slab, or `None` if there is no such run.
    pub(super) fn take_run(&mut self, n: usize) -> Option<usize> {
        if n == 0 || n > self.nfree() {
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
            self.update(j / 64, |w| w & !(1 << (j % 64)));
        }
        *self.nfree -= n as u64;
        Some(i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_fit_runs() {
        let need = FreeSlabs::region_bytes(130);
        let region = Region::anonymous(need, need).unwrap();
        let slabs = FreeSlabs::place(&region, 130).unwrap();
        let mut s = slabs.lock(0);
        assert_eq!(s.nfree(), 0, "a fresh region holds no free slab");
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
        assert!(
            region.placed_end() <= need,
            "the placements fit their estimate"
        );
    }
}
