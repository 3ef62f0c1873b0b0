//! The volatile free bitmaps: which free small blocks are in no thread cache.
//!
//! Every small slab has [`WORDS_PER_SLAB`] words in one flat array indexed by slab
//! (bit `i` of slab `s` set: block `i` of `s` is free and in no thread cache), and every
//! class a list of its slabs that have a set bit, threaded through a per-slab `next`
//! array, whose head is the data of the class lock (a [`HolderMutex`], whose word
//! names the thread that holds it). The words and the list are read and
//! written under the lock of the slab's class only (a small slab keeps its class for
//! the run), so a slab is listed exactly when it has a set bit.
//!
//! # Orderings
//! Every access to a slab's words and `next` entry is Relaxed and made under the lock of
//! the slab's class: the lock orders them (and what the threads did to the blocks
//! before), so the only race an atomic closes is a debug check's unlocked read of a bit
//! ([`FreeBits::is_set`]). They are atomics so that other processes can later share
//! the state and claim bits without the lock.
//!
//! # In the region
//! The words, the `next` array and the class locks are placed in the allocator's
//! [`Region`] for the pool's largest geometry ([`FreeBits::place`]); the pages of
//! slabs that do not exist are never touched, so they cost address space only. Every
//! slab's words are alone on their cache lines ([`Line`]): two neighbouring slabs of
//! two classes are written under two locks. The links are stored so that zero bytes
//! are the empty state (every slab unlisted, every list empty): a fresh placement needs
//! no filling, and one placed as found is the state the region holds.

use super::classes::{Kind, CLASSES, NCLASSES};
use super::pmem;
use crate::heap::layout::{Layout, SLAB_SIZE};
use crate::holder_lock::{HolderMutex, HolderMutexGuard};
use crate::region::{bytes_for, Line, Placed, Region};
use crate::Result;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

/// Bitmap words per slab: room for the most blocks a slab of any class holds (the
/// 16-byte class; asserted below).
pub(super) const WORDS_PER_SLAB: usize = 64;

const _: () = {
    let mut c = 0;
    while c < NCLASSES {
        assert!(CLASSES[c].nblocks as usize <= WORDS_PER_SLAB * 64);
        c += 1;
    }
};

/// One slab's bitmap words, alone on their cache lines.
type SlabWords = Line<[AtomicU64; WORDS_PER_SLAB]>;

/// `next` of a slab in no list.
const NOT_LISTED: u32 = u32::MAX;
/// `next` of the last slab of a list, and the head of an empty list.
const END: u32 = u32::MAX - 1;

/// What a `next` entry stores for a link (and back): zero is [`NOT_LISTED`].
#[inline(always)]
const fn next_code(link: u32) -> u32 {
    link ^ NOT_LISTED
}

/// What a class lock's data stores for the head of its list (and back): zero is
/// [`END`], the empty list.
#[inline(always)]
const fn head_code(link: u32) -> u32 {
    link ^ END
}

/// The free bitmaps of every slab and the per-class lists of slabs with free bits:
/// this process's views of them in the allocator's region.
pub(super) struct FreeBits {
    /// Per slab: its bitmap words (the pool's largest geometry).
    words: Placed<SlabWords>,
    /// Per slab: the next slab of its class's list, `END`, or `NOT_LISTED`, stored as
    /// [`next_code`].
    next: Placed<AtomicU32>,
    /// Per class: the first slab of its list (`END`: none), stored as [`head_code`];
    /// the class lock.
    heads: Placed<Line<HolderMutex<u32>>>,
    /// The pool offset of slab 0.
    heap_offset: usize,
}

impl FreeBits {
    /// The region bytes [`FreeBits::place`] takes for `layout`.
    pub(super) const fn region_bytes(layout: &Layout) -> usize {
        bytes_for::<SlabWords>(layout.slab_count)
            + bytes_for::<AtomicU32>(layout.slab_count)
            + bytes_for::<Line<HolderMutex<u32>>>(NCLASSES)
    }

    /// Place the free bitmaps of a heap of `layout`'s geometry in `region`, as found
    /// there: in a fresh region, no free bit (module docs, *In the region*).
    pub(super) fn place(region: &Arc<Region>, layout: &Layout) -> Result<FreeBits> {
        Ok(FreeBits {
            words: region.place_as_found(layout.slab_count)?,
            next: region.place_as_found(layout.slab_count)?,
            heads: region.place_as_found(NCLASSES)?,
            heap_offset: layout.heap_offset,
        })
    }

    /// Take the lock of class `class` for `holder` (a thread cache's holder id, or the
    /// allocator's own id for locking without a cache).
    #[inline]
    pub(super) fn lock(&self, class: usize, holder: u32) -> ClassBits<'_> {
        ClassBits {
            bits: self,
            head: self.heads[class].lock(holder),
            class,
        }
    }

    /// Who holds the lock of class `class` (see `HolderLock::holder`).
    #[cfg(test)]
    pub(super) fn holder(&self, class: usize) -> Option<u32> {
        self.heads[class].holder()
    }

    /// Release the lock of class `class` if `holder`, a thread slot whose process died
    /// holding it, holds it, after making the class's list again from the bits (for
    /// its one recoverer). Each bit is changed by one atomic store, but a slab is
    /// linked or unlinked by two: a death may leave a slab with a set bit unlisted, or
    /// listed unreachably. So every slab of the class (`kinds`, the allocator's slab
    /// kinds) is listed exactly when it has a set bit, as the module docs require.
    /// Blocks whose bits the dead holder cleared and did not hand on stay lost until
    /// the pool's next recovery of the whole (they are never handed out twice: a bit
    /// is cleared before its block goes anywhere).
    pub(super) fn rebuild_dead(&self, class: usize, holder: u32, kinds: &[AtomicU32]) {
        let Some(head) = self.heads[class].adopt(holder) else {
            return;
        };
        let mut bits = ClassBits {
            bits: self,
            head,
            class,
        };
        bits.set_head(END);
        for (slab, k) in kinds.iter().enumerate().rev() {
            // Relaxed: a slab's kind changes to a small class under that class's lock,
            // which this recovery holds as the dead holder; other classes' slabs are
            // left alone.
            if Kind::decode(k.load(Ordering::Relaxed)) != Some(Kind::Small(class)) {
                continue;
            }
            self.set_next(slab, NOT_LISTED);
            // Relaxed: under the class lock (module docs).
            let any = (0..CLASSES[class].used_words())
                .any(|w| self.word(slab, w).load(Ordering::Relaxed) != 0);
            if any {
                bits.link(slab);
            }
        }
    }

    /// Word `w` of slab `slab`'s bitmap.
    #[inline]
    fn word(&self, slab: usize, w: usize) -> &AtomicU64 {
        &self.words[slab].0[w]
    }

    /// Slab `slab`'s link to the next slab of its list (`END`, `NOT_LISTED`).
    #[inline]
    fn next(&self, slab: usize) -> u32 {
        // Relaxed: under the class lock (module docs).
        next_code(self.next[slab].load(Ordering::Relaxed))
    }

    /// Set slab `slab`'s link.
    #[inline]
    fn set_next(&self, slab: usize, link: u32) {
        // Relaxed: under the class lock (module docs).
        self.next[slab].store(next_code(link), Ordering::Relaxed);
    }

    /// The pool offset of block `index` of slab `slab` of class `class`.
    fn offset_of(&self, slab: usize, class: usize, index: usize) -> u64 {
        let cl = &CLASSES[class];
        (self.heap_offset + slab * SLAB_SIZE + cl.data_start as usize + index * cl.size as usize)
            as u64
    }

    /// The slab and index of the class-`class` block at pool offset `offset` (a block
    /// this allocator handed out: valid geometry).
    fn slot_of(&self, class: usize, offset: u64) -> Option<(usize, usize)> {
        let rel = offset.checked_sub(self.heap_offset as u64)?;
        let slab = (rel / SLAB_SIZE as u64) as usize;
        let cl = &CLASSES[class];
        let d = ((rel % SLAB_SIZE as u64) as u32).checked_sub(cl.data_start)?;
        Some((slab, cl.index_of(d)? as usize))
    }

    /// True if block `index` of slab `slab` has its free bit set. Unlocked: a hint for
    /// debug checks of blocks the caller holds (no other thread sets their bit).
    pub(super) fn is_set(&self, slab: usize, index: usize) -> bool {
        // Relaxed: the bit of a block the caller holds is only set by this thread; a
        // stale read of another block's bit is never acted on.
        self.word(slab, index / 64).load(Ordering::Relaxed) & (1 << (index % 64)) != 0
    }

    #[cfg(test)]
    /// Every block whose free bit is set, as pool offsets, and a check of the lists:
    /// panics unless every class's list holds exactly its slabs with a set bit.
    /// `holder`: the lock holder id of the caller.
    pub(super) fn snapshot(
        &self,
        kinds: &[AtomicU32],
        holder: u32,
    ) -> std::collections::BTreeSet<u64> {
        let mut out = std::collections::BTreeSet::new();
        for class in 0..NCLASSES {
            let g = self.lock(class, holder);
            let mut listed = std::collections::BTreeSet::new();
            let mut s = g.head();
            while s != END {
                assert!(listed.insert(s as usize), "slab {s} listed twice");
                s = self.next(s as usize);
            }
            for (slab, k) in kinds.iter().enumerate() {
                // Relaxed: the test's own thread formatted the slabs.
                if Kind::decode(k.load(Ordering::Relaxed)) != Some(Kind::Small(class)) {
                    assert!(
                        !listed.contains(&slab),
                        "slab {slab} listed for class {class}"
                    );
                    continue;
                }
                let mut any = false;
                for w in 0..WORDS_PER_SLAB {
                    // Relaxed: under the class lock (module docs).
                    let word = self.word(slab, w).load(Ordering::Relaxed);
                    assert_eq!(word & !pmem::valid_mask(class, w), 0, "stray bits");
                    for b in 0..64 {
                        if word & (1 << b) != 0 {
                            out.insert(self.offset_of(slab, class, w * 64 + b));
                            any = true;
                        }
                    }
                }
                assert_eq!(listed.contains(&slab), any, "slab {slab} of class {class}");
            }
        }
        out
    }
}

/// The free bits of one class, under its lock.
pub(super) struct ClassBits<'a> {
    bits: &'a FreeBits,
    head: HolderMutexGuard<'a, u32>,
    class: usize,
}

impl ClassBits<'_> {
    /// The first slab of the class's list (`END`: none).
    #[inline]
    fn head(&self) -> u32 {
        head_code(*self.head)
    }

    /// Make `link` the first slab of the class's list.
    #[inline]
    fn set_head(&mut self, link: u32) {
        *self.head = head_code(link);
    }

    /// Drop every slab from the class's list, bits kept: what a holder that died
    /// halfway through unlinking a slab can leave (the rest of the list unreachable).
    #[cfg(test)]
    pub(super) fn lose_list(&mut self) {
        self.set_head(END);
    }

    /// True if no slab of the class has a set bit.
    pub(super) fn is_empty(&self) -> bool {
        self.head() == END
    }

    /// Put `slab` at the head of the class's list (it has a set bit now, and was not
    /// listed).
    fn link(&mut self, slab: usize) {
        self.bits.set_next(slab, self.head());
        self.set_head(slab as u32);
    }

    /// Set the bits of every block of `slab`, just formatted for the class, and list it
    /// first: its blocks are handed out next, lowest address first.
    pub(super) fn add_formatted(&mut self, slab: usize) {
        for w in 0..CLASSES[self.class].used_words() {
            // Relaxed: under the class lock (module docs).
            let prev = self
                .bits
                .word(slab, w)
                .fetch_or(pmem::valid_mask(self.class, w), Ordering::Relaxed);
            debug_assert_eq!(prev, 0, "slab {slab} formatted twice");
        }
        debug_assert_eq!(
            self.bits.next(slab),
            NOT_LISTED,
            "slab {slab} formatted twice"
        );
        self.link(slab);
    }

    /// Rebuild: set the bits of the blocks of `slab` (of the class) that the persistent
    /// bitmap `allocated(w)` has clear, and list it first if any.
    pub(super) fn add_persistent(&mut self, slab: usize, allocated: impl Fn(usize) -> u64) {
        let mut any = false;
        for w in 0..CLASSES[self.class].used_words() {
            let free = !allocated(w) & pmem::valid_mask(self.class, w);
            if free != 0 {
                // Relaxed: under the class lock (module docs).
                self.bits.word(slab, w).fetch_or(free, Ordering::Relaxed);
                any = true;
            }
        }
        if any && self.bits.next(slab) == NOT_LISTED {
            self.link(slab);
        }
    }

    /// Give back block `index` of `slab`: set its bit, listing the slab if it had none.
    /// `false` (and nothing changes) if the bit was set already: the block was given
    /// back twice.
    pub(super) fn give(&mut self, slab: usize, index: usize) -> bool {
        let bit = 1u64 << (index % 64);
        // Relaxed: under the class lock (module docs).
        let prev = self
            .bits
            .word(slab, index / 64)
            .fetch_or(bit, Ordering::Relaxed);
        if prev & bit != 0 {
            return false;
        }
        if self.bits.next(slab) == NOT_LISTED {
            self.link(slab);
        }
        true
    }

    /// [`ClassBits::give`] of the block at pool offset `offset`; `false` also for an
    /// offset that is no block of the class.
    pub(super) fn give_offset(&mut self, offset: u64) -> bool {
        match self.bits.slot_of(self.class, offset) {
            Some((slab, index)) => self.give(slab, index),
            None => false,
        }
    }

    /// Claim up to `batch` set bits of the first listed slab (lowest indices first),
    /// clearing them, and push their blocks onto `out` so that the lowest is popped
    /// first; a slab left with no set bit leaves the list. Returns the number claimed
    /// (0 only if the list is empty).
    pub(super) fn claim(&mut self, batch: usize, out: &mut Vec<u64>) -> usize {
        let slab = self.head();
        if slab == END {
            return 0;
        }
        let slab = slab as usize;
        let start = out.len();
        let mut need = batch;
        let mut left = false;
        for w in 0..CLASSES[self.class].used_words() {
            let word = self.bits.word(slab, w);
            // Relaxed: under the class lock (module docs).
            let v = word.load(Ordering::Relaxed);
            if v == 0 {
                continue;
            }
            if need == 0 {
                left = true;
                break;
            }
            let mut take = v;
            if v.count_ones() as usize > need {
                // The `need` lowest set bits.
                take = 0;
                let mut rest = v;
                for _ in 0..need {
                    let low = rest & rest.wrapping_neg();
                    take |= low;
                    rest ^= low;
                }
                left = true;
            }
            // The bits are cleared before their blocks reach the cache. Relaxed: under the
            // class lock (module docs).
            let prev = word.fetch_and(!take, Ordering::Relaxed);
            debug_assert_eq!(
                prev & take,
                take,
                "free bits of slab {slab} changed under the lock"
            );
            need -= take.count_ones() as usize;
            let mut t = take;
            while t != 0 {
                let b = t.trailing_zeros() as usize;
                t &= t - 1;
                out.push(self.bits.offset_of(slab, self.class, w * 64 + b));
            }
        }
        if !left {
            let next = self.bits.next(slab);
            self.set_head(next);
            self.bits.set_next(slab, NOT_LISTED);
        }
        out[start..].reverse();
        out.len() - start
    }
}
