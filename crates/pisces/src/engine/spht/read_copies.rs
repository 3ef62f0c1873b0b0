//! The words a transaction's reads copy out of the working snapshot.
//!
//! A read hands out a pointer to its copy, which the caller may hold until the
//! transaction ends (`Tx::read`'s contract), so a copy never moves and is never
//! written again before [`ReadCopies::reset`]. Copies are bump-allocated in chunks
//! that are kept from one transaction to the next: a read costs no allocation and no
//! zeroing once the thread's first transactions have grown the chunks, and the end of
//! a transaction costs a few stores. A copy larger than a chunk gets its own buffer,
//! dropped at the end of the transaction.

use super::stripes::Stripes;

/// Words per chunk (32 KiB).
const CHUNK_WORDS: usize = 4096;
/// Chunks kept across transactions (the rest are dropped at `reset`).
const KEPT_CHUNKS: usize = 8;

/// A transaction's read copies (module docs).
///
/// Invariant: the words handed out by [`ReadCopies::take`] since the last `reset` are
/// disjoint, and only accessed through the pointer `take` returned (chunk buffers are
/// only ever touched through `Vec::as_mut_ptr`, which creates no reference to the
/// buffer), so a caller's shared reference into one copy stays valid while later
/// copies are written.
#[derive(Default)]
pub(super) struct ReadCopies {
    chunks: Vec<Vec<u64>>,
    /// Chunks in use by this transaction (the last one is being filled).
    in_use: usize,
    /// Words taken from the last chunk in use.
    filled: usize,
    /// Copies larger than a chunk.
    large: Vec<Vec<u64>>,
}

impl ReadCopies {
    /// `n` words no other copy of this transaction uses, valid and unmoved until
    /// [`ReadCopies::reset`] (their contents are stale: the caller writes them).
    #[inline]
    pub(super) fn take(&mut self, n: usize) -> *mut u64 {
        if n > CHUNK_WORDS {
            return self.take_large(n);
        }
        if self.in_use == 0 || self.filled + n > CHUNK_WORDS {
            self.next_chunk();
        }
        let at = self.filled;
        self.filled += n;
        // In bounds: `at + n <= CHUNK_WORDS`, the chunk's length.
        self.chunks[self.in_use - 1].as_mut_ptr().wrapping_add(at)
    }

    #[cold]
    fn next_chunk(&mut self) {
        if self.in_use == self.chunks.len() {
            self.chunks.push(vec![0; CHUNK_WORDS]);
        }
        self.in_use += 1;
        self.filled = 0;
    }

    #[cold]
    fn take_large(&mut self, n: usize) -> *mut u64 {
        let mut v = vec![0; n];
        let p = v.as_mut_ptr();
        // Moving the `Vec` does not move its buffer.
        self.large.push(v);
        p
    }

    /// End of the transaction: every pointer handed out is dead (the caller's
    /// references into copies ended with the transaction); the space is reused.
    #[inline]
    pub(super) fn reset(&mut self) {
        self.in_use = 0;
        self.filled = 0;
        if !self.large.is_empty() {
            self.large.clear();
        }
        if self.chunks.len() > KEPT_CHUNKS {
            self.chunks.truncate(KEPT_CHUNKS);
        }
    }

    /// Words handed out since the last reset that live in kept chunks.
    #[cfg(test)]
    pub(super) fn chunk_words_in_use(&self) -> usize {
        self.in_use.saturating_sub(1) * CHUNK_WORDS + self.filled
    }
}

/// Sets of the [`CopyCache`] (direct mapped; a power of two). Enough that the objects
/// a thread reads again and again (a hash map's directory chunks, a tree's upper
/// levels) keep their copies while reads of objects it reads once pass through.
const CACHE_SETS: usize = 4096;
/// Words the [`CopyCache`]'s buffers hold at most, together (2 MiB): a set whose buffer
/// would grow past it keeps no copy.
const KEPT_WORDS: usize = 1 << 18;
/// Largest object the [`CopyCache`] keeps, in words (4 KiB); larger ones are copied
/// into the [`ReadCopies`] on every read.
pub(super) const CACHE_MAX_WORDS: usize = 512;
/// An empty cache entry's `hdr` (no block header is at this offset, but a forged read
/// offset of 7 gives this header offset: hence [`NO_VERSION`] too).
const EMPTY: u64 = u64::MAX;
/// An empty cache entry's `version`: no read probes with it (a read's stripe version is
/// below its bound, which is at most 2^63), so an empty entry matches no read, whatever
/// its offset.
const NO_VERSION: u64 = u64::MAX;

/// One kept copy.
struct CachedCopy {
    /// Header offset of the object, or [`EMPTY`].
    hdr: u64,
    /// Stripe version the copy was taken at (seqlock-validated), or [`NO_VERSION`]
    /// (with `hdr` [`EMPTY`]).
    version: u64,
    /// Bytes copied: 8 times the words copied (the first `bytes / 8` words of `words`
    /// are the copy). In bytes so that a read's length compares with it as it is.
    bytes: usize,
    /// The transaction (`CopyCache::epoch`) that last handed the copy out.
    epoch: u64,
    /// Only accessed through `Vec::as_mut_ptr` / `as_ptr` while a copy may be handed
    /// out (no reference to the buffer), resized only when no copy of it is.
    words: Vec<u64>,
}

/// A thread's copies of the objects it read, kept across transactions: a read whose
/// object's stripe still has the version its copy was taken at (so no commit changed
/// the object since) hands the copy out again instead of copying the object once more.
/// That is the read an HTM transaction makes at the cost of a stripe-version check —
/// what repeatedly read objects (a hash map's header and directory, a tree's upper
/// levels) cost per read.
///
/// Invariants:
/// * an entry with `hdr != EMPTY` holds the first `bytes / 8` words of that object's
///   payload as of a moment its stripe had version `version` (unlocked); an entry with
///   `hdr == EMPTY` has `version == NO_VERSION`;
/// * a copy handed out in the current transaction (`epoch` equal to the cache's) is
///   neither rewritten nor moved before [`CopyCache::end_transaction`]: a miss on its
///   set copies into the per-transaction [`ReadCopies`] instead.
///
/// Stripe versions are commit timestamps, strictly above the versions they replace;
/// an aborted commit puts the old version back but never wrote the object. So "same
/// version" means "same contents". **DRAM cost**: up to [`KEPT_WORDS`] words (2 MiB)
/// of copies and `CACHE_SETS` entries (224 KiB) per thread state (the objects it read
/// last, at most [`CACHE_MAX_WORDS`] words each).
pub(super) struct CopyCache {
    /// A fixed-size array: `set_of` is below its length by construction, so indexing
    /// it needs no bounds check.
    sets: Box<[CachedCopy; CACHE_SETS]>,
    epoch: u64,
    /// Words the sets' buffers hold (at most [`KEPT_WORDS`]).
    words: usize,
}

/// A set of the [`CopyCache`] (`CopyCache::set_of` of an object's header offset).
#[derive(Clone, Copy, Debug)]
pub(super) struct Set(usize);

impl Default for CopyCache {
    fn default() -> CopyCache {
        CopyCache {
            // Built on the heap (the array is too large for a thread's stack).
            sets: (0..CACHE_SETS)
                .map(|_| CachedCopy {
                    hdr: EMPTY,
                    version: NO_VERSION,
                    bytes: 0,
                    epoch: 0,
                    words: Vec::new(),
                })
                .collect::<Box<[CachedCopy]>>()
                .try_into()
                .unwrap_or_else(|_| unreachable!("CACHE_SETS entries")),
            // Above every entry's epoch: nothing is handed out yet.
            epoch: 1,
            words: 0,
        }
    }
}

impl CopyCache {
    /// The set of the object whose header word is at `hdr`.
    #[inline]
    pub(super) fn set_of(hdr: u64) -> usize {
        Self::set_of_hash(Stripes::hash(hdr)).0
    }

    /// The set of the object whose header word is at `hdr`, from `Stripes::hash(hdr)`
    /// (the stripe index uses other bits of the same product): equal to
    /// [`CopyCache::set_of`]`(hdr)`.
    #[inline(always)]
    pub(super) fn set_of_hash(h: u64) -> Set {
        Set((h >> (64 - CACHE_SETS.trailing_zeros())) as usize % CACHE_SETS)
    }

    /// The kept copy of at least `len` bytes of the object at `hdr` taken at stripe
    /// version `version`, in `set` (`set_of(hdr)`), handed out for the rest of this
    /// transaction: [`CopyCache::find`] for the read-only fast path, which takes the
    /// read's length in bytes.
    #[inline(always)]
    pub(super) fn hit(
        &mut self,
        set: Set,
        hdr: u64,
        version: u64,
        len: usize,
    ) -> Option<*const u64> {
        let epoch = self.epoch;
        let e = &mut self.sets[set.0 % CACHE_SETS];
        if e.hdr == hdr && e.version == version && len <= e.bytes {
            e.epoch = epoch;
            return Some(e.words.as_ptr());
        }
        None
    }

    /// The buffer of `set` (`set_of(hdr)`) if it can take a new copy of `n` words
    /// without growing and its copy is not handed out in this transaction, with the
    /// entry naming the copy of `n` words of the object at `hdr` at stripe version
    /// `version`, handed out for the rest of this transaction; else `None`
    /// ([`CopyCache::slot_in`] also grows a buffer).
    ///
    /// The caller writes the copy, then checks that the stripe still has `version`
    /// and calls [`CopyCache::discard`] if not, before any other use of the cache: the
    /// entry holds what it names only then.
    #[inline(always)]
    pub(super) fn room(&mut self, set: Set, hdr: u64, version: u64, n: usize) -> Option<*mut u64> {
        let epoch = self.epoch;
        let e = &mut self.sets[set.0 % CACHE_SETS];
        // `words.len() <= CACHE_MAX_WORDS` (`slot_in`), so `n` fits the cache too.
        if e.epoch == epoch || n > e.words.len() {
            return None;
        }
        // `n <= CACHE_MAX_WORDS`: no overflow.
        (e.hdr, e.version, e.bytes, e.epoch) = (hdr, version, n * 8, epoch);
        Some(e.words.as_mut_ptr())
    }

    /// The copy [`CopyCache::room`] gave room for in `set` failed: the entry keeps no
    /// copy.
    #[cold]
    pub(super) fn discard(&mut self, set: Set) {
        let e = &mut self.sets[set.0 % CACHE_SETS];
        (e.hdr, e.version) = (EMPTY, NO_VERSION);
    }

    /// The kept copy of at least `n` words of the object at `hdr` taken at stripe
    /// version `version`, handed out for the rest of this transaction.
    #[cfg(test)]
    pub(super) fn get(&mut self, hdr: u64, version: u64, n: usize) -> Option<*const u64> {
        self.find(hdr, version, n).ok()
    }

    /// [`CopyCache::get`], or the object's set for [`CopyCache::slot_in`] (one hash).
    #[inline]
    pub(super) fn find(&mut self, hdr: u64, version: u64, n: usize) -> Result<*const u64, Set> {
        let epoch = self.epoch;
        let set = Set(Self::set_of(hdr));
        let e = &mut self.sets[set.0 % CACHE_SETS];
        if e.hdr == hdr && e.version == version && n <= e.bytes / 8 {
            e.epoch = epoch;
            return Ok(e.words.as_ptr());
        }
        Err(set)
    }

    /// Room for a new copy of `n` words of the object at `hdr`, or `None` (too large,
    /// its set's copy is handed out in this transaction, or its set's buffer would
    /// have to grow past the cache's [`KEPT_WORDS`]). The entry is empty until
    /// [`CopyCache::filled`].
    #[cfg(test)]
    pub(super) fn slot(&mut self, hdr: u64, n: usize) -> Option<*mut u64> {
        self.slot_in(Set(Self::set_of(hdr)), n)
    }

    /// [`CopyCache::slot`] in the set [`CopyCache::find`] named.
    #[inline]
    pub(super) fn slot_in(&mut self, set: Set, n: usize) -> Option<*mut u64> {
        let epoch = self.epoch;
        let e = &mut self.sets[set.0 % CACHE_SETS];
        if n > CACHE_MAX_WORDS || e.epoch == epoch {
            return None;
        }
        if e.words.len() < n {
            let grow = n - e.words.len();
            if self.words + grow > KEPT_WORDS {
                return None;
            }
            self.words += grow;
            e.words.resize(n, 0);
        }
        (e.hdr, e.version) = (EMPTY, NO_VERSION);
        Some(e.words.as_mut_ptr())
    }

    /// The copy [`CopyCache::slot`] gave room for holds `n` words of the object at `hdr`
    /// at stripe version `version`; handed out for the rest of this transaction.
    #[cfg(test)]
    pub(super) fn filled(&mut self, hdr: u64, version: u64, n: usize) {
        self.filled_in(Set(Self::set_of(hdr)), hdr, version, n)
    }

    /// [`CopyCache::filled`] of the set [`CopyCache::slot_in`] gave room in.
    #[inline]
    pub(super) fn filled_in(&mut self, set: Set, hdr: u64, version: u64, n: usize) {
        let epoch = self.epoch;
        let e = &mut self.sets[set.0 % CACHE_SETS];
        // `n <= CACHE_MAX_WORDS` (`slot_in`, `room`): no overflow.
        (e.hdr, e.version, e.bytes, e.epoch) = (hdr, version, n * 8, epoch);
    }

    /// The transaction ended: every copy it was handed is dead.
    #[inline]
    pub(super) fn end_transaction(&mut self) {
        self.epoch += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_are_disjoint_stable_and_reused_after_reset() {
        let mut c = ReadCopies::default();
        let mut seen = Vec::new();
        // Sizes that straddle chunk ends, and one larger than a chunk.
        for (k, n) in [3usize, CHUNK_WORDS - 2, 5, 1, CHUNK_WORDS + 7, 0, 64]
            .into_iter()
            .enumerate()
        {
            let p = c.take(n);
            for i in 0..n {
                // SAFETY: `take` handed out `n` words at `p`.
                unsafe { p.add(i).write((k as u64) << 32 | i as u64) };
            }
            seen.push((p, n, k));
        }
        // Every copy still holds what was written into it: no two overlap and none
        // moved when later chunks or large buffers were added.
        for &(p, n, k) in &seen {
            for i in 0..n {
                // SAFETY: as above; nothing was reset.
                assert_eq!(unsafe { p.add(i).read() }, (k as u64) << 32 | i as u64);
            }
        }
        let first = seen[0].0;
        c.reset();
        assert_eq!(c.chunk_words_in_use(), 0);
        assert_eq!(c.take(3), first, "the first chunk is reused after a reset");
    }

    #[test]
    fn the_kept_copies_stay_within_their_word_budget() {
        let mut c = CopyCache::default();
        let mut used = std::collections::HashSet::new();
        let mut kept = 0;
        for hdr in (1u64..).map(|k| 16 * k) {
            if !used.insert(CopyCache::set_of(hdr)) {
                continue;
            }
            let Some(_) = c.slot(hdr, CACHE_MAX_WORDS) else {
                break;
            };
            c.filled(hdr, 1, CACHE_MAX_WORDS);
            c.end_transaction();
            kept += 1;
        }
        assert_eq!(kept, KEPT_WORDS / CACHE_MAX_WORDS);
        assert_eq!(c.words, KEPT_WORDS);
        // A set whose buffer is large enough takes a new copy without growing.
        let hdr = 16;
        assert!(c.slot(hdr, CACHE_MAX_WORDS).is_some());
        assert_eq!(c.words, KEPT_WORDS);
    }

    #[test]
    fn a_cached_copy_is_never_rewritten_while_its_transaction_runs() {
        let mut c = CopyCache::default();
        // Two objects of the same set.
        let a = 0x1000;
        let b = (1u64..)
            .map(|k| a + 16 * k)
            .find(|&h| CopyCache::set_of(h) == CopyCache::set_of(a))
            .unwrap();
        let p = c.slot(a, 4).unwrap();
        c.filled(a, 7, 4);
        assert_eq!(c.get(a, 7, 4), Some(p as *const u64));
        assert_eq!(c.get(a, 8, 4), None, "another version is another copy");
        assert_eq!(c.get(a, 7, 5), None, "a longer read needs more words");
        assert!(
            c.slot(b, 4).is_none(),
            "a's copy is handed out in this transaction"
        );
        c.end_transaction();
        assert!(c.slot(b, 4).is_some(), "a's transaction ended");
        assert_eq!(c.get(a, 7, 4), None, "a's copy was replaced");
        assert!(c.slot(a, CACHE_MAX_WORDS + 1).is_none());
    }
}
