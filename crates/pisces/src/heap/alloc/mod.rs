//! The transactional persistent allocator.
//!
//! # Protocol (the engine sequences these steps inside its commit)
//! 1. `reserve` (volatile only) during the transaction;
//! 2. the engine logs `Alloc{block}` / `Free{block}` in the transaction's redo record;
//! 3. in write-back, `publish_alloc` / `publish_free` change the persistent state
//!    (bitmap bit or slab-table run) and flush it; the engine's fence makes it durable;
//! 4. recovery replays logged entries with `replay_alloc` / `replay_free` (idempotent),
//!    then `rebuild` reconstructs the volatile state from the persistent bitmaps;
//! 5. on abort, `unreserve` returns reservations; a freed block becomes reusable with
//!    `release` only after `publish_free` is durable and the engine's grace period says
//!    no snapshot can still see it.
//!
//! A thread that stops using the allocator (thread exit) calls [`Allocator::drain`] so
//! that the free blocks in its [`ThreadCache`] go back to the free bitmaps; a cache that
//! is simply dropped leaks its blocks until the next `rebuild` (they are free in the
//! persistent state, so nothing is lost for good).
//!
//! # Persistent state
//! The heap is a sequence of slabs of [`SLAB_SIZE`] bytes; the slab table holds one `u32`
//! per slab:
//!
//! | entry                   | meaning                                                |
//! |-------------------------|--------------------------------------------------------|
//! | `0`                     | free slab                                              |
//! | `0x1000_0000 \| c`      | small slab of size class `c` (`c` < number of classes) |
//! | `0x2000_0000 \| n`      | head of a large run of `n` ≥ 1 slabs                   |
//! | `0x3000_0000 \| k`      | `k`-th slab (k ≥ 1) after the head of a large run      |
//!
//! Anything else is corrupt. A small slab starts with its allocation bitmap (one bit per
//! block, set = allocated), rounded up to 64 bytes, followed by the blocks. Size classes
//! run from 16 to 16368 bytes (header included; see `classes.rs`): four per doubling up
//! to 3584, then sizes fitted to the slab so that the big classes waste little. Every
//! block starts 16-byte aligned, so payloads are 8 mod 16. A large block is a run of
//! whole slabs starting at the head slab (its payload is at slab start + 8); its size is
//! the run's length times [`SLAB_SIZE`], header included.
//!
//! A [`Block`] names its kind by its size alone: a class size (never a multiple of the
//! slab size) is a small block, a whole number of slabs is a large run. `replay_*` and
//! `publish_*` check the geometry of the block they are given against that.
//!
//! # Durability
//! * Formatting a free slab for a class happens in `reserve` and is persisted at once,
//!   outside any transaction: zero the bitmap, persist, set the table entry, persist. A
//!   formatted slab with an empty bitmap holds nothing, so a crash at any point leaves
//!   a sound pool. The fence is done here, not by the engine, because the slab's blocks
//!   may be published by other threads, whose fences would not cover this flush.
//! * Small blocks: `publish_*` sets or clears the bit with an atomic RMW (several threads
//!   publish into one slab) and flushes the word. Large runs: `publish_alloc` writes the
//!   continuations, then the head; `publish_free` clears the head, then the
//!   continuations; both flush. The engine fences.
//! * `rebuild` returns small slabs whose bitmap is empty to the free state (persistently,
//!   one fence at the end), so that a restart rebalances slabs between classes. The
//!   allocator never does that at run time: within one run a small slab keeps its class
//!   until the next recovery (the recovery argument below relies on it).
//!
//! # Recovery
//! Recovery replays, in order, every logged allocator operation of a suffix of the
//! history (all records at or above the watermark), then calls `rebuild` (before or
//! after resetting the logs); no allocation happens before the logs are reset. `replay_alloc` / `replay_free` validate the
//! geometry (`Err(Corrupt)` on nonsense) and then write the persistent effect:
//! * Large runs are written unconditionally (all `n` entries), whatever the slabs hold
//!   now. Replaying an old `Alloc` of a run may overwrite a slab that was later freed and
//!   formatted for a small class; the run's `Free` is later in the same suffix and clears
//!   it again, and every allocation in that small slab happened after that free, so it
//!   is in the suffix too and replays after it.
//! * A small `Alloc` in a free slab formats the slab first (empty bitmap), then sets the
//!   bit; in a slab of its own class it sets the bit; in a slab of another class or of a
//!   large run it is `Err(Corrupt)` (impossible under the argument above).
//! * A small `Free` in a free slab is a no-op (already free); in a slab of its class it
//!   clears the bit; otherwise `Err(Corrupt)`.
//!
//! Replaying the same suffix again over the result (a crash during recovery, even after
//! `rebuild` freed empty slabs) converges to the same state.
//!
//! `rebuild` then validates every table entry and every large run (head length fits,
//! continuations numbered consistently, no orphans) and the bitmap padding bits, and
//! returns `Err(Corrupt)` naming the first problem; [`Allocator::check`] lists them all.
//!
//! # Volatile state
//! All of it but the caches of threads outside slots lives in a [`Region`]: a mapping whose contents name
//! each other by slab and block index, never by address, so that a process that maps
//! the same memory can find it. [`Allocator::rebuild`] places it in a region its caller
//! gives (the `pisces` engine shares its own; the other engines take one of their own
//! with [`Allocator::rebuild_private`]; [`Allocator::region_bytes`] sizes it), then
//! fills it from the pool. Placing and filling are two steps: the placement only
//! reserves the region's bytes in a fixed order (the allocator's words, the slab table
//! mirror, the free bitmaps, their links and class locks, the free-slab set) and reads
//! nothing, and zero bytes are an allocator with no free slab and no free block, so
//! the state that one process filled can be found by another that places the same
//! sequence. Every table is placed for the pool's maximum size; the pages of slabs that
//! do not exist yet are never touched, so they cost address space only.
//! * A mirror of the slab table (`AtomicU32` per slab) makes [`Allocator::block_at`] a
//!   geometric check without touching the pool: a formatted slab's block starts and the
//!   heads of reserved or allocated large runs are blocks. No bitmap check there.
//! * A large run is marked in the mirror when it is reserved and cleared when it is
//!   unreserved or released; the persistent entries are written only by `publish_*`.
//! * Free small blocks live in volatile free bitmaps and in per-thread caches
//!   ([`ThreadCache`]). Every small slab has a free bitmap (one bit per block, set = free
//!   and in no cache), all of them in one flat array indexed by slab; every class has
//!   a list of its slabs with a set bit, under the class lock (a lock word per class
//!   that names its holder, [`HolderMutex`](crate::holder_lock::HolderMutex)), which
//!   also guards the bits of the class's slabs. A thread refills its cache with up to a
//!   batch of blocks (about 32 KiB, 2..=64 blocks) of one slab, clearing their bits
//!   (`fetch_and`) before the blocks enter the cache; `release` / `unreserve` put
//!   blocks into the caller's cache, whose overflow (above two batches) goes back by
//!   setting their bits (`fetch_or`). A bit that is set already means the block was
//!   given back twice (an engine bug: asserted in debug builds, and the bitmap is left
//!   as it is). When no slab of a class has a free bit, a free slab is formatted for it
//!   (under the class lock, so two threads do not format two slabs for one need).
//! * Why bitmaps rather than lists of offsets: giving a block back is idempotent (it
//!   sets a bit), so a recoverer that does not know how far a dead thread got may
//!   redo it; and the state has a fixed size and is addressed by slab and block index,
//!   not by pointers into process memory, so it can live in a region that several
//!   processes map.
//! * Free slabs are a bitset under one lock (a `HolderMutex` too, whose data is the
//!   number of free slabs; the bit words are read and written only under it),
//!   allocated first fit.
//! * A thread slot's cache ([`ThreadCache::for_slot`], what the `pisces` engine's
//!   threads use) keeps its blocks in the region, per slot and class
//!   (`slot_caches`): a thread that recovers a slot whose process died drains them
//!   through a cache of its own for that slot. Other caches are process memory (an
//!   engine's thread state owns each). The allocator's id, which binds a cache to the
//!   allocator whose blocks it holds, is this process's.
//! * The holder a lock word names is the id of the [`ThreadCache`] of the caller: the
//!   thread slot's index for the cache of a slot's thread state
//!   ([`ThreadCache::for_slot`], what the `pisces` engine's threads use: another
//!   process can test a slot for liveness), an id the allocator gives when the cache
//!   binds to it otherwise, or [`NO_CACHE_HOLDER`] for the allocator's own locking
//!   without a cache (rebuild, diagnostics). The ids are for telling who holds a lock;
//!   the locks' exclusion does not depend on them being unique.
//! * As a guard against engine bugs (a block released while still allocated), `reserve`
//!   skips a cached block whose persistent bit is set (and asserts in debug builds).
//!
//! * Growth: when no free slab (or run of slabs) is left and the pool may grow, the
//!   thread that needs one takes the growth lock, looks again (another thread may have
//!   grown the pool meanwhile), and if there is still none grows the heap by at least
//!   what it needs ([`Heap::grow`]: the new size is durable before it returns) and adds
//!   the new slabs to the free set. Threads that hit the end at once thus grow it
//!   once; the others wait on the lock and find the new slabs. `OutOfSpace` only at
//!   the maximum size.
//! * Out of space: a failed reservation sets a `pressure` flag, cleared when a free
//!   slab is taken again; while it is set, blocks given back skip the caller's cache
//!   and go to the free bitmaps, where any thread finds them. (Engines that defer
//!   frees, such as Pisces' group commit, also write back pending frees before they
//!   report `OutOfSpace`.)
//!
//! Limits: a thread can get `OutOfSpace` while another thread's cache still holds free
//! blocks of the class that it cached before the heap ran full (at most two batches
//! per class per thread), and a small slab
//! whose blocks are all free again is not reused for another class before the next
//! recovery. The free bitmaps cost the same DRAM for every slab that exists (one bit per
//! block of the smallest class), whatever the slab holds.

mod block;
mod classes;
mod free_bits;
mod pmem;
mod slabs;
mod slot_caches;
#[cfg(test)]
mod tests;

use super::layout::{Layout, SLAB_SIZE};
use super::Heap;
use crate::holder_lock::HolderLock;
use crate::region::{bytes_for, InRegion, Line, Placed, PlacedValue, Region};
use crate::{Error, Result};
pub(crate) use block::Block;
pub(crate) use classes::HEADER;
pub(crate) use classes::{class_for, min_class};
use classes::{Kind, ARG_MASK, CLASSES, NCLASSES};
use free_bits::FreeBits;
use pmem::Loc;
use slabs::FreeSlabs;
use slot_caches::SlotCaches;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

/// The most slabs one class gets formatted at once where a fence is a device sync (the
/// file medium). Formatting takes two fences whatever the number of slabs, and on that
/// medium each is an `msync`: a transaction that needs a fresh slab would pay two
/// device syncs beside its commit's one. A format takes as many slabs as the class had
/// formatted so far plus one (1, 2, 4, ...), up to this: a class used once takes one
/// slab, a class that keeps growing (a bulk load) this many at a time.
const FORMAT_BATCH: usize = 8;

/// Free slabs a batched format leaves free at least (for other classes and large
/// blocks): slabs beyond the first are taken only from a free set larger than this,
/// never by growing the heap.
const FORMAT_RESERVE: usize = 4 * FORMAT_BATCH;

/// Usage of one size class (for `pisces info`), from the persistent state.
///
/// `Allocator::usage` returns one entry per small class, in increasing block size,
/// then one entry for large runs (`block_size == 0`).
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(not(feature = "tools"), allow(dead_code))] // read by the tools only
pub struct ClassUsage {
    /// Block size of the class (header included); for large runs, 0.
    pub block_size: u64,
    /// Slabs formatted for this class; for large runs, slabs in allocated runs.
    pub slabs: u64,
    /// Blocks allocated (persistent bit set); for large runs, allocated runs.
    pub allocated: u64,
    /// Blocks in formatted slabs that are free; for large runs, free slabs of the heap
    /// (usable by any class).
    pub free: u64,
}

/// Per-thread volatile cache of free blocks; owned by an engine's thread state.
///
/// Create it with `ThreadCache::default()`; it binds to the first [`Allocator`] that
/// uses it (a cache used with another allocator later drops its blocks, which belong to
/// the first one). Call [`Allocator::drain`] before dropping it.
#[derive(Debug, Default)]
pub(crate) struct ThreadCache {
    /// Id of the allocator these blocks belong to (0: none yet).
    owner: u64,
    /// The holder id the allocator's lock words name while this cache's thread holds
    /// them: the thread slot's index for a cache made for one
    /// ([`ThreadCache::for_slot`]: what another process can test for liveness), else
    /// given by the allocator `owner` when the cache binds to it (below
    /// [`NO_CACHE_HOLDER`]).
    holder: u32,
    /// `holder` is the slot's, kept when the cache binds; the blocks are then in the
    /// slot's lists in the allocator's region ([`slot_caches`]), where a thread of
    /// another process finds them if this one dies, and `lists` stays empty.
    holder_is_slot: bool,
    /// Free block offsets per class; the last one is handed out first.
    lists: Vec<Vec<u64>>,
    /// Blocks on their way between the free bitmaps and the slot's lists.
    moving: Vec<u64>,
}

impl ThreadCache {
    /// The cache of the thread state of slot `slot` (below [`NO_CACHE_HOLDER`]): the
    /// allocator's lock words name the slot while its thread holds them.
    pub(crate) fn for_slot(slot: usize) -> ThreadCache {
        let holder = u32::try_from(slot)
            .ok()
            .filter(|&s| s < NO_CACHE_HOLDER)
            .expect("a thread slot is below the largest holder id");
        ThreadCache {
            holder,
            holder_is_slot: true,
            ..ThreadCache::default()
        }
    }

    /// The holder id the allocator's lock words name for this cache.
    #[cfg(test)]
    pub(crate) fn holder(&self) -> u32 {
        self.holder
    }

    #[cfg(test)]
    /// Number of free blocks held.
    pub(crate) fn len(&self) -> usize {
        self.lists.iter().map(Vec::len).sum()
    }
    #[cfg(test)]
    /// True if the cache holds no block.
    pub(crate) fn is_empty(&self) -> bool {
        self.lists.iter().all(Vec::is_empty)
    }
}

/// Source of allocator ids (for binding thread caches).
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// The holder id of the allocator's locking without a thread cache (rebuild, `Debug`,
/// test checks); reserved: no cache gets it. Once pools are shared, the id of a
/// process's own work outside any thread slot.
pub(super) const NO_CACHE_HOLDER: u32 = HolderLock::MAX_HOLDER;

crate::mutation::hook_point! {
    /// A growth of the heap recorded and its size raised ([`Heap::grow`] returned), the
    /// new slabs not yet in the free set: a process that dies here leaves the growth
    /// lock held and the slabs in no free set (`Allocator::release_dead`).
    pub(crate) static GROW_SIZE_RAISED = "grow-size-raised";
    /// A run of free slabs taken out of the free set, under its lock (the lock held by
    /// a process that dies here: `Allocator::release_dead`).
    pub(crate) static SLABS_TAKEN = "slabs-taken";
    /// A batch of a class's free bits claimed for a thread slot's cache, under the
    /// class's lock, the blocks not yet in the cache.
    pub(crate) static BLOCKS_CLAIMED = "blocks-claimed";
}

/// The allocator's words beside its tables, in its region: each is written rarely (a
/// format, a growth, a thread cache's binding, running out of space), and `pressure`
/// is read by every block given back, so they share a line of their own.
#[repr(C)]
struct AllocWords {
    /// Set when a reservation failed (out of space), cleared when a free slab is taken
    /// again: while set, blocks given back go to the free bitmaps instead of the
    /// caller's cache, so that the thread that ran out (or any other) finds them.
    pressure: AtomicBool,
    /// The next holder id to give a thread cache that binds to this allocator (taken
    /// modulo [`NO_CACHE_HOLDER`], which is reserved).
    next_holder: AtomicU32,
    /// Held while growing the heap (see the module doc).
    grow_lock: HolderLock,
    /// While the holder of `grow_lock` grows the heap: the heap's size before the
    /// growth; 0 otherwise. Cleared under the free-slab lock, with the new slabs'
    /// insertion, so that a recoverer of a holder that died growing knows what its
    /// growth added and whether the free set has it ([`Allocator::release_dead`]).
    growing_from: AtomicU64,
    /// Slabs formatted for each class since the allocator was built (read and written
    /// under the class lock of `free`: Relaxed).
    formatted: [AtomicU32; NCLASSES],
}

// SAFETY: atomics and a lock word: zero is no pressure, holder 0 next, a free lock and
// no slab formatted; no address, no drop; `repr(C)`.
unsafe impl InRegion for AllocWords {}

/// The allocator's volatile state over one heap: this process's views of it in a
/// [`Region`] (module docs, *Volatile state*), and the allocator's id.
pub(crate) struct Allocator {
    heap: Arc<Heap>,
    id: u64,
    /// Mirror of the slab table, plus reserved large runs (the pool's largest geometry).
    kinds: Placed<AtomicU32>,
    /// Free blocks of each class not in any thread cache: a free bitmap per small slab
    /// and, per class, the list of slabs with free bits under the class lock.
    free: FreeBits,
    /// Free slabs.
    slabs: FreeSlabs,
    /// `pressure`, the growth lock, the holder ids' source, the format counts.
    words: PlacedValue<Line<AllocWords>>,
    /// The thread slots' caches.
    caches: SlotCaches,
}

impl std::fmt::Debug for Allocator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Allocator")
            .field("id", &self.id)
            .field("slabs", &self.kinds.len())
            .field("free_slabs", &self.slabs.lock(NO_CACHE_HOLDER).nfree())
            .finish()
    }
}

impl Allocator {
    /// The region bytes the allocator's state takes for a heap of `layout`'s geometry
    /// (what [`Allocator::rebuild`] places; a caller sizes its region with it).
    pub(crate) const fn region_bytes(layout: &Layout) -> usize {
        bytes_for::<Line<AllocWords>>(1)
            + bytes_for::<AtomicU32>(layout.slab_count)
            + FreeBits::region_bytes(layout)
            + FreeSlabs::region_bytes(layout.slab_count)
            + SlotCaches::region_bytes(layout.max_threads)
    }

    /// This process's views of the allocator's state for `heap`, placed in `region` as
    /// found there, in this order (the order that lets a process that did not place
    /// them find them: see `region`): the words ([`AllocWords`]), the slab table
    /// mirror, the free bitmaps (words, links, class locks), the free-slab set (count,
    /// bits), the thread slots' caches. In a fresh region that is an allocator with no free slab and no free
    /// block, every slab free in the mirror: what [`Allocator::rebuild`] then fills.
    fn place(heap: Arc<Heap>, region: &Arc<Region>) -> Result<Allocator> {
        let layout = *heap.layout();
        let words = region.place_value_as_found()?;
        let kinds = region.place_as_found(layout.slab_count)?;
        let free = FreeBits::place(region, &layout)?;
        let slabs = FreeSlabs::place(region, layout.slab_count)?;
        let caches = SlotCaches::place(region, layout.max_threads)?;
        Ok(Allocator {
            heap,
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed), // Relaxed: only uniqueness matters.
            kinds,
            free,
            slabs,
            words,
            caches,
        })
    }

    /// This process's views of the allocator's state that another process rebuilt in
    /// `region` (a pool shared by processes), found by the same placements.
    pub(crate) fn attach(heap: Arc<Heap>, region: &Arc<Region>) -> Result<Allocator> {
        debug_assert!(!region.is_fresh(), "attach to state another process built");
        Self::place(heap, region)
    }

    /// Rebuild the volatile state from the persistent slab table and bitmaps, placing
    /// it in `region` (which must not have been placed in by another allocator: its
    /// placements start zeroed), after what the region holds already.
    ///
    /// Validates the whole persistent allocator state first (`Err(Corrupt)` naming the
    /// first problem). Small slabs whose bitmap is empty are returned to the free state
    /// persistently (see the module doc). Works on a freshly formatted heap too.
    pub(crate) fn rebuild(heap: Arc<Heap>, region: &Arc<Region>) -> Result<Allocator> {
        let (entries, problems) = pmem::scan(&heap);
        if !problems.is_empty() {
            return Err(Error::corrupt(pmem::summarize(&problems)));
        }
        // `entries` covers the slabs that exist now; the mirror and the free set cover
        // every slab the pool can grow to (the missing ones stay free in the mirror and
        // out of the free set until a growth adds them).
        let a = Allocator::place(heap, region)?;
        let heap = &a.heap;
        let layout = *heap.layout();
        let mut free = a.slabs.lock(NO_CACHE_HOLDER);
        // Small slabs with free blocks, with their class.
        let mut small: Vec<(usize, usize)> = Vec::new();
        let mut unformatted = false;
        for (i, &e) in entries.iter().enumerate() {
            let mut e = e;
            match Kind::decode(e) {
                Some(Kind::Free) => free.insert(i, 1),
                Some(Kind::Small(c)) if pmem::bitmap_empty(heap, i, c) => {
                    // Relaxed: recovery is single-threaded; the fence below makes it
                    // durable.
                    pmem::entry(heap, i).store(Kind::Free.encode(), Ordering::Relaxed);
                    heap.flush(layout.slab_table_offset + 4 * i, 4);
                    unformatted = true;
                    free.insert(i, 1);
                    e = 0;
                }
                Some(Kind::Small(c)) => small.push((i, c)),
                // Validated by `scan`: heads and their continuations are consistent.
                Some(Kind::Head(_)) | Some(Kind::Cont(_)) => {}
                None => {
                    return Err(Error::corrupt(format!(
                        "allocator: slab {i}: slab table entry {e:#010x} changed during recovery"
                    )))
                }
            }
            // Relaxed: no other thread knows the allocator before `rebuild` returns
            // (and hands it over with the synchronisation of that hand-over).
            a.kinds[i].store(e, Ordering::Relaxed);
        }
        drop(free);
        if unformatted {
            heap.fence();
        }
        // The free bits are the clear bits of the persistent bitmaps. A class's list is
        // built from its highest slab down, so that low addresses are handed out first.
        for &(i, c) in small.iter().rev() {
            a.free.lock(c, NO_CACHE_HOLDER).add_persistent(i, |w| {
                // Relaxed: recovery is single-threaded.
                pmem::bitmap_word(heap, i, w).load(Ordering::Relaxed)
            });
        }
        Ok(a)
    }

    /// [`Allocator::rebuild`] into a region of its own: for the engines whose other
    /// volatile state is process-private.
    pub(crate) fn rebuild_private(heap: Arc<Heap>) -> Result<Allocator> {
        let need = Allocator::region_bytes(heap.layout());
        Allocator::rebuild(heap, &Region::anonymous(need, need)?)
    }

    /// The block size (header included) `reserve(payload_len)` hands out, or `None` if no
    /// heap could hold it.
    pub(crate) fn block_size_for(payload_len: usize) -> Option<u64> {
        let size = payload_len.checked_add(HEADER)?;
        match class_for(size) {
            Some(c) => Some(CLASSES[c].size as u64),
            None => {
                let n = size.div_ceil(SLAB_SIZE);
                (n <= ARG_MASK as usize).then(|| (n * SLAB_SIZE) as u64)
            }
        }
    }

    /// Reserve a block whose payload holds `payload_len` bytes (volatile; not durable).
    ///
    /// `payload_len` 0 is allowed (the smallest class). `Err(OutOfSpace)` if no free
    /// block or run of slabs is left (or the size is absurd).
    pub(crate) fn reserve(&self, cache: &mut ThreadCache, payload_len: usize) -> Result<Block> {
        // (Built only when needed: an `Error` made and dropped on every call costs a
        // call of its drop glue.)
        let oos = || Error::OutOfSpace {
            requested: payload_len,
        };
        let Some(size) = payload_len.checked_add(HEADER) else {
            return Err(oos());
        };
        let b = match class_for(size) {
            Some(c) => self.reserve_small(cache, c)?,
            None => {
                self.bind(cache);
                self.reserve_large(size, cache.holder)?
            }
        };
        if b.is_none() {
            // Relaxed: a hint for `give_back` (see `pressure`).
            self.words.pressure.store(true, Ordering::Relaxed);
        }
        b.ok_or_else(oos)
    }

    /// Make `cache` this allocator's: drop another allocator's blocks, give it a
    /// holder id.
    fn bind(&self, cache: &mut ThreadCache) {
        if cache.owner != self.id {
            // Blocks of another allocator must never be handed out by this one. (A
            // slot's lists in the region are this allocator's, whichever process
            // placed them.)
            cache.lists.clear();
            cache.owner = self.id;
            if cache.holder_is_slot && !self.caches.has(cache.holder) {
                // A slot beyond the region's caches (not an engine's thread slot).
                cache.holder_is_slot = false;
            }
            if !cache.holder_is_slot {
                // Relaxed: only the value matters (ids are not required to be unique).
                cache.holder =
                    self.words.next_holder.fetch_add(1, Ordering::Relaxed) % NO_CACHE_HOLDER;
            }
        }
        if cache.lists.len() != NCLASSES {
            cache.lists.resize_with(NCLASSES, Vec::new);
        }
    }

    fn reserve_small(&self, cache: &mut ThreadCache, c: usize) -> Result<Option<Block>> {
        self.bind(cache);
        let size = CLASSES[c].size as u64;
        loop {
            let popped = if cache.holder_is_slot {
                self.caches.pop(cache.holder, c)
            } else {
                cache.lists[c].pop()
            };
            let Some(offset) = popped else {
                if self.refill(cache, c)?.is_none() {
                    return Ok(None);
                }
                continue;
            };
            let b = Block { offset, size };
            if self.bit_is_set(b) {
                debug_assert!(
                    false,
                    "{b:?} was in a thread cache but is allocated: released before publish_free?"
                );
                continue;
            }
            return Ok(Some(b));
        }
    }

    /// The persistent bit of a small block this allocator handed out (valid geometry).
    fn bit_is_set(&self, b: Block) -> bool {
        match pmem::locate(self.heap.layout(), b) {
            Ok(Loc::Small { slab, index, .. }) => pmem::bit(&self.heap, slab, index),
            _ => true,
        }
    }

    /// Move up to a batch of class `c` from one slab's free bits (formatting a slab if
    /// no slab of the class has any) into the cache. `None` if there is no free slab
    /// left and the heap cannot grow.
    fn refill(&self, cache: &mut ThreadCache, c: usize) -> Result<Option<()>> {
        let mut bits = self.free.lock(c, cache.holder);
        if bits.is_empty() && self.format_slab(c, &mut bits, cache.holder)?.is_none() {
            return Ok(None);
        }
        let batch = CLASSES[c].batch as usize;
        if !cache.holder_is_slot {
            let n = bits.claim(batch, &mut cache.lists[c]);
            debug_assert!(n > 0, "a listed slab of class {c} had no free bit");
            return Ok(Some(()));
        }
        // The bits are cleared before the blocks reach the slot's list (a death in
        // between loses them until the next full recovery, never hands them out twice).
        cache.moving.clear();
        let n = bits.claim(batch, &mut cache.moving);
        debug_assert!(n > 0, "a listed slab of class {c} had no free bit");
        crate::mutation::hook!(BLOCKS_CLAIMED, cache.holder as usize);
        drop(bits);
        for &off in &cache.moving {
            self.caches.push(cache.holder, c, off);
        }
        Ok(Some(()))
    }

    /// Take a run of `n` free slabs for `holder`, growing the heap if there is none;
    /// `None` at the maximum size.
    fn take_slabs(&self, n: usize, holder: u32) -> Result<Option<usize>> {
        loop {
            let mut free = self.slabs.lock(holder);
            if let Some(i) = free.take_run(n) {
                crate::mutation::hook!(SLABS_TAKEN, holder as usize);
                return Ok(Some(i));
            }
            drop(free);
            let _growing = self.words.grow_lock.lock(holder);
            // Another thread may have grown the heap while this one waited.
            if let Some(i) = self.slabs.lock(holder).take_run(n) {
                return Ok(Some(i));
            }
            // Relaxed: read and written under the growth lock, or by the recoverer of
            // its holder, which holds it as that holder (`release_dead`).
            self.words
                .growing_from
                .store(self.heap.size() as u64, Ordering::Relaxed);
            let grown = self.heap.grow(n, holder);
            if let Ok(Some(_)) = grown {
                crate::mutation::hook!(GROW_SIZE_RAISED, holder as usize);
            }
            let mut free = self.slabs.lock(holder);
            // Relaxed: as above; cleared under the free-slab lock with the insertion.
            self.words.growing_from.store(0, Ordering::Relaxed);
            match grown {
                // The new slabs follow the old ones: a run can start among free slabs
                // at the old end, so they are not handed out directly but inserted
                // (first fit then takes the lowest run that fits).
                // (Their mirror entries and free bitmaps are placed already, for the
                // pool's largest geometry.)
                Ok(Some(new)) => free.insert(new.start, new.len()),
                Ok(None) => return Ok(None),
                // The file system is full (or a quota or file size limit is reached):
                // the heap cannot grow now, as at its maximum, so the allocation is
                // out of space. A failed growth changed nothing durable (the file is
                // cut back, the superblock not written): the pool stays as it was.
                Err(e) if e.is_storage_full() => return Ok(None),
                Err(e) => return Err(e),
            }
        }
    }

    /// Take a free slab, format it for class `c` (persistently) and set its blocks' free
    /// bits (`bits`: the caller, `holder`, holds the class lock). Where a fence is a
    /// device sync, a class that keeps needing slabs gets several at once (see
    /// [`FORMAT_BATCH`]).
    fn format_slab(
        &self,
        c: usize,
        bits: &mut free_bits::ClassBits<'_>,
        holder: u32,
    ) -> Result<Option<()>> {
        let Some(first) = self.take_slabs(1, holder)? else {
            return Ok(None);
        };
        // Relaxed: a hint (see `pressure`).
        self.words.pressure.store(false, Ordering::Relaxed);
        let mut slabs = [first; FORMAT_BATCH];
        let mut n = 1;
        if self.heap.fence_is_device_sync() {
            // Relaxed: only touched under the class lock, which the caller holds.
            let want =
                (self.words.formatted[c].load(Ordering::Relaxed) as usize + 1).min(FORMAT_BATCH);
            let mut free = self.slabs.lock(holder);
            while n < want && free.nfree() > FORMAT_RESERVE {
                let Some(s) = free.take_run(1) else { break };
                slabs[n] = s;
                n += 1;
            }
        }
        let slabs = &slabs[..n];
        self.words.formatted[c].fetch_add(n as u32, Ordering::Relaxed);
        pmem::format_small_slabs(&self.heap, slabs, c);
        // The lowest addresses are handed out first (the last slab listed is first).
        for &slab in slabs.iter().rev() {
            // Release: pairs with the Acquire in `block_at`, so a thread that finds a
            // block of this slab there (even through a racy path such as a stale
            // snapshot pointer) also sees the slab's formatting, not the state of its
            // previous use.
            self.kinds[slab].store(Kind::Small(c).encode(), Ordering::Release);
            bits.add_formatted(slab);
        }
        Ok(Some(()))
    }

    fn reserve_large(&self, size: usize, holder: u32) -> Result<Option<Block>> {
        let n = size.div_ceil(SLAB_SIZE);
        if n > ARG_MASK as usize || n > self.kinds.len() {
            return Ok(None);
        }
        let Some(head) = self.take_slabs(n, holder)? else {
            return Ok(None);
        };
        // Relaxed: a hint (see `pressure`).
        self.words.pressure.store(false, Ordering::Relaxed);
        // The head's header word held whatever the slab held before (a bitmap, payload
        // bytes): make it an empty header, durably, before `block_at` can accept the
        // block (see `pmem::format_small`).
        let head_off = self.heap.layout().slab_offset(head);
        // Relaxed: the slab is ours alone until the Release store to the mirror below.
        self.heap.atomic_u64(head_off).store(0, Ordering::Relaxed);
        self.heap.persist(head_off, 8);
        crate::medium::counters::add_bytes_metadata(8);
        for k in 1..n {
            // Relaxed: continuations are never blocks; nothing reads them for ordering.
            self.kinds[head + k].store(Kind::Cont(k).encode(), Ordering::Relaxed);
        }
        // Release: pairs with the Acquire in `block_at` (see `format_slab`).
        self.kinds[head].store(Kind::Head(n).encode(), Ordering::Release);
        Ok(Some(Block {
            offset: self.heap.layout().slab_offset(head) as u64,
            size: (n * SLAB_SIZE) as u64,
        }))
    }

    /// Release the allocator's locks that `holder`, a thread slot whose process died,
    /// holds, after making whole what they guard. The caller is the one recoverer of
    /// the slot, acting as it.
    ///
    /// - The free-slab set: its count is made again from its bits
    ///   (`FreeSlabs::adopt_dead`).
    /// - A growth (the growth lock): its holder may also hold the lock of the class
    ///   whose refill needed a slab (`refill` → `format_slab` → `take_slabs`). The
    ///   growth is finished from what is durable: if the superblock records a size
    ///   above `growing_from`, the size is raised to it (where the dead holder had not)
    ///   and the slabs from `growing_from` on that are not free yet are inserted (the
    ///   holder clears `growing_from` under the free-slab lock with their insertion,
    ///   which it may have begun); otherwise the growth had not been recorded and is
    ///   dropped (a file extended beyond the recorded size is harmless, as after a
    ///   crash).
    /// - A class lock: the class's list is made again from its bits
    ///   (`FreeBits::rebuild_dead`).
    ///
    /// What the dead holder had taken out of these and not handed on stays unused until
    /// the pool's next recovery of the whole; nothing is handed out twice.
    pub(crate) fn release_dead(&self, holder: u32) {
        drop(self.slabs.adopt_dead(holder));
        if self.words.grow_lock.holder() == Some(holder) {
            // Relaxed: the growth lock is held (by the dead holder, as whom this runs).
            let from = self.words.growing_from.load(Ordering::Relaxed);
            if from != 0 {
                let recorded = self.heap.recorded_size();
                if recorded > from {
                    self.heap.raise_size(recorded);
                    let layout = self.heap.layout();
                    let (old, new) = (layout.slabs_at(from), layout.slabs_at(recorded));
                    if new > old {
                        self.slabs.lock(holder).insert_missing(old, new - old);
                    }
                }
                // Relaxed: as above.
                self.words.growing_from.store(0, Ordering::Relaxed);
            }
            self.words.grow_lock.release_dead(holder);
        }
        for c in 0..NCLASSES {
            self.free.rebuild_dead(c, holder, &self.kinds);
        }
    }

    /// Give back a reservation that was never published (abort).
    pub(crate) fn unreserve(&self, cache: &mut ThreadCache, b: Block) {
        self.give_back(cache, b, "unreserve");
    }

    /// Make a published-free block reusable (after the grace period).
    pub(crate) fn release(&self, cache: &mut ThreadCache, b: Block) {
        self.give_back(cache, b, "release");
    }

    fn give_back(&self, cache: &mut ThreadCache, b: Block, what: &str) {
        self.bind(cache);
        match pmem::locate(self.heap.layout(), b) {
            Ok(Loc::Small { slab, class, index }) => {
                // Relaxed: a sanity check of the store made when the slab was formatted,
                // which happened before the block was handed out (and so before any
                // thread could give it back).
                let kind = Kind::decode(self.kinds[slab].load(Ordering::Relaxed));
                if kind != Some(Kind::Small(class)) {
                    debug_assert!(false, "{what} of {b:?} in a slab that is not of its class");
                    return;
                }
                // Relaxed: a hint (see `pressure`); a stale value only delays reuse by
                // another thread.
                if self.words.pressure.load(Ordering::Relaxed) {
                    let fresh = self.free.lock(class, cache.holder).give(slab, index);
                    debug_assert!(fresh, "{what} of {b:?}: given back twice");
                    return;
                }
                // A block whose free bit is set is free already (not the caller's).
                debug_assert!(
                    !self.free.is_set(slab, index),
                    "{what} of {b:?}: given back twice"
                );
                let batch = CLASSES[class].batch as usize;
                if cache.holder_is_slot {
                    if self.caches.push(cache.holder, class, b.offset) > 2 * batch {
                        // Oldest first, as below.
                        self.give_slot_blocks(cache, class, batch);
                    }
                    return;
                }
                let list = &mut cache.lists[class];
                list.push(b.offset);
                if list.len() > 2 * batch {
                    // Oldest first: the most recently freed blocks stay cache-warm here.
                    let mut bits = self.free.lock(class, cache.holder);
                    for off in list.drain(..batch) {
                        let fresh = bits.give_offset(off);
                        debug_assert!(fresh, "{what} of the block at {off:#x}: given back twice");
                    }
                }
            }
            Ok(Loc::Large { head, n }) => {
                // Relaxed: as above.
                if self.kinds[head].load(Ordering::Relaxed) != Kind::Head(n).encode() {
                    debug_assert!(false, "{what} of {b:?}, which is not a reserved run");
                    return;
                }
                // Clear the mirror before the slabs become free: once they are in the
                // free set another thread may reserve them and write its own entries,
                // which the slab lock orders after these stores.
                for k in 0..n {
                    // Relaxed: ordered before the next owner's stores by the slab lock.
                    self.kinds[head + k].store(0, Ordering::Relaxed);
                }
                self.slabs.lock(cache.holder).insert(head, n);
            }
            Err(msg) => debug_assert!(false, "{what}: {msg}"),
        }
    }

    /// Move the `k` oldest blocks of the slot cache `cache` (one of a slot) of `class`
    /// to the free bitmaps: out of the list first, then given (`slot_caches`). A block
    /// a dead owner's list held twice is set free twice (a bit set twice is set), so
    /// a second give is not a bug here.
    fn give_slot_blocks(&self, cache: &mut ThreadCache, class: usize, k: usize) {
        cache.moving.clear();
        self.caches
            .take_oldest(cache.holder, class, k, &mut cache.moving);
        let mut bits = self.free.lock(class, cache.holder);
        for &off in &cache.moving {
            bits.give_offset(off);
        }
    }

    /// Return every block of `cache` to the free bitmaps (thread exit). The cache stays
    /// usable.
    pub(crate) fn drain(&self, cache: &mut ThreadCache) {
        if cache.holder_is_slot {
            // A slot's lists are the region's, whatever this cache was bound to: a
            // thread that recovers a dead slot drains the dead owner's blocks.
            self.bind(cache);
        }
        if cache.owner != self.id {
            // Not ours (or empty and unbound): the blocks belong to another allocator.
            cache.lists.clear();
            return;
        }
        if cache.holder_is_slot {
            for c in 0..NCLASSES {
                if self.caches.len(cache.holder, c) != 0 {
                    self.give_slot_blocks(cache, c, usize::MAX);
                }
            }
        }
        for (c, list) in cache.lists.iter_mut().enumerate() {
            if !list.is_empty() {
                let mut bits = self.free.lock(c, cache.holder);
                for off in list.drain(..) {
                    let fresh = bits.give_offset(off);
                    debug_assert!(fresh, "drain of the block at {off:#x}: given back twice");
                }
            }
        }
    }

    /// Persistently mark `b` allocated and flush (the caller fences). Idempotent.
    ///
    /// `b` must come from `reserve` of this allocator; a block with invalid geometry is
    /// ignored (and asserts in debug builds).
    pub(crate) fn publish_alloc(&self, b: Block) {
        self.publish(b, true)
    }

    /// Persistently mark `b` free and flush (the caller fences). Idempotent.
    pub(crate) fn publish_free(&self, b: Block) {
        self.publish(b, false)
    }

    fn publish(&self, b: Block, allocated: bool) {
        if let Some((off, len)) = self.publish_unflushed(b, allocated) {
            self.heap.flush(off, len);
        }
    }

    /// [`publish_alloc`](Self::publish_alloc) (`allocated`) or
    /// [`publish_free`](Self::publish_free) without the flush: returns the range
    /// `(offset, len)` of persistent metadata the caller must make durable (`None`
    /// for a block with invalid geometry, which is ignored).
    pub(crate) fn publish_unflushed(&self, b: Block, allocated: bool) -> Option<(usize, usize)> {
        let range = match pmem::locate(self.heap.layout(), b) {
            Ok(Loc::Small { slab, index, class }) => {
                debug_assert_eq!(
                    pmem::read_entry(&self.heap, slab),
                    Kind::Small(class).encode(),
                    "publish of {b:?} in a slab not formatted for its class"
                );
                Some(pmem::set_bit(&self.heap, slab, index, allocated))
            }
            Ok(Loc::Large { head, n }) => Some(pmem::write_run(&self.heap, head, n, allocated)),
            Err(msg) => {
                debug_assert!(false, "publish: {msg}");
                None
            }
        };
        if allocated && crate::mutation::active!(crate::heap::GROW_SIZE_LATE) {
            self.heap.write_late_size(b.offset);
        }
        range
    }

    /// The block whose payload starts at `payload_off`, if it is one (fast, geometric).
    ///
    /// A block start of a formatted slab or the head of a reserved or allocated large
    /// run; whether the block is allocated is not checked.
    #[inline]
    #[cfg_attr(not(feature = "tools"), allow(dead_code))] // read by the tools only
    pub(crate) fn block_at(&self, payload_off: u64) -> Option<Block> {
        let offset = payload_off.checked_sub(HEADER as u64)?;
        let rel = offset.checked_sub(self.heap.layout().heap_offset as u64)?;
        let slab = usize::try_from(rel / SLAB_SIZE as u64).ok()?;
        let within = (rel % SLAB_SIZE as u64) as u32;
        // Acquire: pairs with the Release stores in `format_slab` / `reserve_large`.
        match Kind::decode(self.kinds.get(slab)?.load(Ordering::Acquire))? {
            Kind::Small(c) => {
                let cl = &CLASSES[c];
                cl.index_of(within.checked_sub(cl.data_start)?)?;
                Some(Block {
                    offset,
                    size: cl.size as u64,
                })
            }
            Kind::Head(n) if within == 0 => Some(Block {
                offset,
                size: (n * SLAB_SIZE) as u64,
            }),
            _ => None,
        }
    }

    /// The block whose payload starts at `payload_off` (as [`Allocator::block_at`]) and
    /// whether it is allocated in the persistent state: its bitmap bit (one load of the
    /// bitmap word at the start of its slab), or for a large run, its head entry in the
    /// slab table. The object-access check of every engine (`engine::locate_object`).
    ///
    /// The load is Acquire (free on x86): it pairs with the Release of the RMW in
    /// `publish_*`, so a thread that sees a bit changed also sees what its publisher did
    /// before (e.g. the `mvcc` engine's version push and commit mark).
    #[inline(always)]
    pub(crate) fn block_state(&self, payload_off: u64) -> Option<(Block, bool)> {
        let offset = payload_off.checked_sub(HEADER as u64)?;
        let heap_off = self.heap.layout().heap_offset as u64;
        let rel = offset.checked_sub(heap_off)?;
        let slab = usize::try_from(rel / SLAB_SIZE as u64).ok()?;
        let within = (rel % SLAB_SIZE as u64) as u32;
        // Acquire: pairs with the Release stores in `format_slab` / `reserve_large`.
        match Kind::decode(self.kinds.get(slab)?.load(Ordering::Acquire))? {
            Kind::Small(c) => {
                let cl = &CLASSES[c];
                let index = cl.index_of(within.checked_sub(cl.data_start)?)?;
                let word = heap_off as usize + slab * SLAB_SIZE + 8 * (index / 64) as usize;
                // SAFETY: `slab` indexes `kinds`, which has one entry per slab of the
                // layout, so the slab lies inside the image; its bitmap words are at its
                // start (`index < nblocks` keeps the word inside the bitmap) and 8-aligned
                // (slabs are SLAB_SIZE-aligned in the page-aligned image). Bitmap words
                // are only accessed atomically (`pmem`). (No bounds assert here: this is
                // every object access's path.)
                let w = unsafe { &*(self.heap.ptr(word) as *const AtomicU64) };
                let bit = w.load(Ordering::Acquire) & (1u64 << (index % 64)) != 0;
                Some((
                    Block {
                        offset,
                        size: cl.size as u64,
                    },
                    bit,
                ))
            }
            Kind::Head(n) if within == 0 => {
                // Acquire: as for the bit (see `pmem::write_run`'s callers).
                let e = pmem::entry(&self.heap, slab).load(Ordering::Acquire);
                Some((
                    Block {
                        offset,
                        size: (n * SLAB_SIZE) as u64,
                    },
                    e == Kind::Head(n).encode(),
                ))
            }
            _ => None,
        }
    }

    /// Where the small-class block whose payload starts at `payload_off` sits, if it is
    /// one of class `min_class` or larger ([`min_class`]`(len)` for a `len`-byte
    /// access): its slab, its index in the slab and the slab's block count. Geometric
    /// only, as [`SmallBlocks::header`] (the allocation state is not checked): a small
    /// slab keeps its class for the whole run, so the answer for an offset never
    /// changes while this allocator lives, and a table keyed by it (the `sp3` engine's
    /// index) names one block for good.
    #[inline(always)]
    pub(crate) fn small_slot(&self, payload_off: u64, min_class: u32) -> Option<SmallSlot> {
        let payload0 = (self.heap.layout().heap_offset + HEADER) as u64;
        let rel = payload_off.wrapping_sub(payload0);
        let slab = (rel / SLAB_SIZE as u64) as usize;
        // (A `rel` that wrapped gives a slab index past the table.)
        // Acquire: pairs with the Release stores in `format_slab`.
        let e = self.kinds.get(slab)?.load(Ordering::Acquire);
        let c = classes::small_class_at_least(e, min_class)?;
        let fc = classes::FAST_CLASSES[c];
        let index = fc.block_index((rel % SLAB_SIZE as u64) as u32)?;
        Some(SmallSlot {
            slab,
            index,
            nblocks: u32::from(fc.nblocks),
            payload_len: CLASSES[c].size - HEADER as u32,
            class: c as u32,
        })
    }

    /// Slabs the geometry has room for (the pool's largest size): every
    /// [`SmallSlot::slab`] is below this.
    pub(crate) fn slab_capacity(&self) -> usize {
        self.kinds.len()
    }

    /// The read fast path's copy of the geometry (see [`SmallBlocks`]).
    #[inline]
    pub(crate) fn small_blocks(&self) -> SmallBlocks {
        let heap_off = self.heap.layout().heap_offset;
        let heap = self.heap.base().wrapping_add(heap_off);
        SmallBlocks {
            heap,
            payload0: (heap_off + HEADER) as u64,
            words: heap.wrapping_sub(heap_off + HEADER),
            kinds: self.kinds.as_ptr(),
            slabs: self.kinds.len(),
            _alloc: std::marker::PhantomData,
        }
    }

    /// True if `b` is allocated in the persistent state (its bit is set, or its run is
    /// written in the slab table).
    #[cfg_attr(not(feature = "tools"), allow(dead_code))] // read by the tools only
    pub(crate) fn is_allocated(&self, b: Block) -> bool {
        let heap = &self.heap;
        match pmem::locate_present(heap, b) {
            Ok(Loc::Small { slab, class, index }) => {
                pmem::read_entry(heap, slab) == Kind::Small(class).encode()
                    && pmem::bit(heap, slab, index)
            }
            Ok(Loc::Large { head, n }) => {
                pmem::read_entry(heap, head) == Kind::Head(n).encode()
                    && (1..n).all(|k| pmem::read_entry(heap, head + k) == Kind::Cont(k).encode())
            }
            Err(_) => false,
        }
    }

    #[cfg(test)]
    /// The blocks whose free bit is set (free and in no cache), as offsets; checks the
    /// per-class lists of slabs with free bits against the bits (panics if they differ).
    pub(crate) fn free_bit_blocks(&self) -> std::collections::BTreeSet<u64> {
        self.free.snapshot(&self.kinds, NO_CACHE_HOLDER)
    }

    #[cfg(test)]
    /// Per-class usage from the persistent state: one entry per small class, then one for
    /// large runs (see [`ClassUsage`]).
    pub(crate) fn usage(&self) -> Vec<ClassUsage> {
        let heap = &self.heap;
        let mut out: Vec<ClassUsage> = CLASSES
            .iter()
            .map(|cl| ClassUsage {
                block_size: cl.size as u64,
                slabs: 0,
                allocated: 0,
                free: 0,
            })
            .chain(std::iter::once(ClassUsage {
                block_size: 0,
                slabs: 0,
                allocated: 0,
                free: 0,
            }))
            .collect();
        for slab in 0..heap.slabs_present() {
            match Kind::decode(pmem::read_entry(heap, slab)) {
                Some(Kind::Free) => out[NCLASSES].free += 1,
                Some(Kind::Small(c)) => {
                    let allocated = pmem::count_allocated(heap, slab, c);
                    out[c].slabs += 1;
                    out[c].allocated += allocated;
                    out[c].free += CLASSES[c].nblocks as u64 - allocated;
                }
                Some(Kind::Head(n)) => {
                    out[NCLASSES].slabs += n as u64;
                    out[NCLASSES].allocated += 1;
                }
                Some(Kind::Cont(_)) | None => {}
            }
        }
        out
    }

    #[cfg(test)]
    /// Bytes not allocated in the persistent state: free slabs, plus the free blocks of
    /// formatted slabs (block sizes, header included). Reservations not yet published
    /// count as free; bitmaps and the slack at the end of small slabs do not.
    pub(crate) fn free_bytes(&self) -> u64 {
        self.usage()
            .iter()
            .map(|u| {
                if u.block_size == 0 {
                    u.free * SLAB_SIZE as u64
                } else {
                    u.free * u.block_size
                }
            })
            .sum()
    }

    /// Recovery: persistent effect of `publish_alloc` (validates geometry; idempotent).
    /// Flushes; the caller fences. See the module doc for what is accepted.
    pub(crate) fn replay_alloc(heap: &Heap, b: Block) -> Result<()> {
        let loc = pmem::locate_present(heap, b)
            .map_err(|m| Error::corrupt(format!("replaying an allocation: {m}")))?;
        match loc {
            Loc::Small { slab, class, index } => {
                let e = pmem::read_entry(heap, slab);
                match Kind::decode(e) {
                    Some(Kind::Free) => pmem::format_small(heap, slab, class),
                    Some(Kind::Small(c)) if c == class => {}
                    _ => {
                        return Err(Error::corrupt(format!(
                            "replaying the allocation of the {}-byte block at {:#x}: slab {slab} is {}, not class {class}",
                            b.size,
                            b.offset,
                            classes::describe(e)
                        )))
                    }
                }
                let (off, len) = pmem::set_bit(heap, slab, index, true);
                heap.flush(off, len);
            }
            Loc::Large { head, n } => {
                let (off, len) = pmem::write_run(heap, head, n, true);
                heap.flush(off, len);
            }
        }
        Ok(())
    }

    /// Recovery: persistent effect of `publish_free` (validates geometry; idempotent).
    /// Flushes; the caller fences. See the module doc for what is accepted.
    pub(crate) fn replay_free(heap: &Heap, b: Block) -> Result<()> {
        let loc = pmem::locate_present(heap, b)
            .map_err(|m| Error::corrupt(format!("replaying a free: {m}")))?;
        match loc {
            Loc::Small { slab, class, index } => {
                let e = pmem::read_entry(heap, slab);
                match Kind::decode(e) {
                    Some(Kind::Free) => {}
                    Some(Kind::Small(c)) if c == class => {
                        let (off, len) = pmem::set_bit(heap, slab, index, false);
                        heap.flush(off, len);
                    }
                    _ => {
                        return Err(Error::corrupt(format!(
                            "replaying the free of the {}-byte block at {:#x}: slab {slab} is {}, not class {class}",
                            b.size,
                            b.offset,
                            classes::describe(e)
                        )))
                    }
                }
            }
            Loc::Large { head, n } => {
                let (off, len) = pmem::write_run(heap, head, n, false);
                heap.flush(off, len);
            }
        }
        Ok(())
    }

    /// The persistent effect of [`Allocator::replay_alloc`] (`true`) or
    /// [`Allocator::replay_free`] (`false`) of each change in order, with the bitmap
    /// words written once: a run of changes to small blocks of formatted slabs of
    /// their class is gathered per bitmap word (the last change of a block decides its
    /// bit) and each word that changes is written with one set and one clear RMW,
    /// flushed and counted once, however many of its bits change. Anything else (a
    /// block of a free slab, which formatting must precede, a large run, an error)
    /// first writes out the words gathered so far and then goes through the single
    /// replay, so the result is exactly that of replaying the changes one by one.
    /// Flushes; the caller fences. For checkpoints that write many changes at once.
    pub(crate) fn replay_changes(heap: &Heap, changes: &[(bool, Block)]) -> Result<()> {
        // Per (slab, bitmap word): the bits to set and to clear; `at` indexes it.
        type Words = Vec<((usize, usize), (u64, u64))>;
        type At = std::collections::HashMap<(usize, usize), usize>;
        let mut words: Words = Vec::new();
        let mut at: At = Default::default();
        let write_out = |words: &mut Words, at: &mut At| {
            for &((slab, w), (set, clear)) in words.iter() {
                pmem::set_word_bits(heap, slab, w, set, clear);
            }
            words.clear();
            at.clear();
        };
        for &(allocated, b) in changes {
            let loc = pmem::locate_present(heap, b)
                .map_err(|m| Error::corrupt(format!("replaying an allocator change: {m}")))?;
            match loc {
                Loc::Small { slab, class, index }
                    if Kind::decode(pmem::read_entry(heap, slab)) == Some(Kind::Small(class)) =>
                {
                    let key = (slab, index / 64);
                    let i = *at.entry(key).or_insert_with(|| {
                        words.push((key, (0, 0)));
                        words.len() - 1
                    });
                    let bit = 1u64 << (index % 64);
                    let (set, clear) = &mut words[i].1;
                    if allocated {
                        *set |= bit;
                        *clear &= !bit;
                    } else {
                        *clear |= bit;
                        *set &= !bit;
                    }
                }
                _ => {
                    write_out(&mut words, &mut at);
                    if allocated {
                        Self::replay_alloc(heap, b)?;
                    } else {
                        Self::replay_free(heap, b)?;
                    }
                }
            }
        }
        write_out(&mut words, &mut at);
        Ok(())
    }

    /// Every problem in the persistent allocator state (empty if sound): invalid slab
    /// table entries, broken large runs, stray bitmap bits. For `pisces check`.
    #[cfg_attr(not(feature = "tools"), allow(dead_code))] // read by the tools only
    pub(crate) fn check(heap: &Heap) -> Vec<String> {
        pmem::scan(heap).1
    }

    /// `Ok` if `b` names a possible block of this heap's geometry (a small block start
    /// for its size, or a large run inside the heap). Recovery checks every logged
    /// block with it before replaying anything.
    pub(crate) fn check_block(heap: &Heap, b: Block) -> Result<()> {
        pmem::locate_present(heap, b)
            .map(|_| ())
            .map_err(Error::corrupt)
    }

    /// Zero the header word of every block, allocated or free, and of every large run,
    /// and persist them. Engines call it when their header-word tag wraps around, so
    /// that no word left by a run long ago reads as a lock of the current run. Only
    /// while no thread uses the heap (at open).
    pub(crate) fn clear_header_words(heap: &Heap) -> Result<()> {
        let (entries, problems) = pmem::scan(heap);
        if !problems.is_empty() {
            return Err(Error::corrupt(pmem::summarize(&problems)));
        }
        let layout = heap.layout();
        for (slab, &e) in entries.iter().enumerate() {
            match Kind::decode(e) {
                Some(Kind::Small(class)) => pmem::clear_headers(heap, slab, class),
                Some(Kind::Head(_)) => {
                    let off = layout.slab_offset(slab);
                    // Relaxed: single-threaded (see above); fenced below.
                    heap.atomic_u64(off).store(0, Ordering::Relaxed);
                    heap.flush(off, 8);
                }
                _ => {}
            }
        }
        heap.fence();
        Ok(())
    }

    /// Call `f` for every allocated block of the persistent state (set bits of small
    /// slabs, in address order, and large runs). `Err(Corrupt)` if the state is not sound
    /// (nothing is reported then).
    pub(crate) fn for_each_allocated(heap: &Heap, mut f: impl FnMut(Block)) -> Result<()> {
        let (entries, problems) = pmem::scan(heap);
        if !problems.is_empty() {
            return Err(Error::corrupt(pmem::summarize(&problems)));
        }
        let layout = heap.layout();
        for (slab, &e) in entries.iter().enumerate() {
            match Kind::decode(e) {
                Some(Kind::Small(class)) => pmem::for_each_block(heap, slab, class, |index, a| {
                    if a {
                        f(pmem::block_of(layout, Loc::Small { slab, class, index }))
                    }
                }),
                Some(Kind::Head(n)) => f(pmem::block_of(layout, Loc::Large { head: slab, n })),
                _ => {}
            }
        }
        Ok(())
    }
}

/// A small-class block's place in the heap ([`Allocator::small_slot`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SmallSlot {
    /// The slab's number in the heap.
    pub slab: usize,
    /// The block's index in its slab (`< nblocks`).
    pub index: u32,
    /// Blocks per slab of the block's class.
    pub nblocks: u32,
    /// The block's payload bytes.
    pub payload_len: u32,
    /// The block's size class (for [`small_block_index`]).
    pub class: u32,
}

/// The index in its slab of the block of size class `class` (a [`SmallSlot::class`])
/// whose header is `in_slab` bytes into the slab (`(payload_off - heap_offset -
/// HEADER) % SLAB_SIZE`), if a block starts exactly there; one multiply. With the
/// slab's class known (a small slab keeps it for the run), this is
/// [`Allocator::small_slot`] without loading the slab table.
#[inline(always)]
pub(crate) fn small_block_index(class: u32, in_slab: u32) -> Option<u32> {
    classes::FAST_CLASSES
        .get(class as usize)?
        .block_index(in_slab)
}

/// What the read fast path needs of the allocator, copied out once per transaction so
/// that a read follows no `Arc` or `Box` to find it: the image's base address, the
/// heap's offset and the slab table mirror. Valid while the allocator it came from is
/// alive (its users hold it: engines hand it out inside a `FastReads`, whose contract
/// says so); the base never moves (growth extends the mapping in place) and the slab
/// table mirror is placed once for the largest geometry in the allocator's region,
/// which the allocator's view of it keeps mapped.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SmallBlocks {
    /// The image's address of the heap's first byte (`base + heap_off`): a block's
    /// header word is at `heap + rel`, `rel` the payload's offset from `payload0`.
    heap: *mut u8,
    /// The pool offset of a payload at the heap's first byte (`heap_off + HEADER`).
    payload0: u64,
    /// `heap - payload0` (wrapping): a block's header word is at `words + payload_off`,
    /// one add for [`SmallBlocks::header_of_found`].
    words: *mut u8,
    kinds: *const AtomicU32,
    slabs: usize,
    _alloc: std::marker::PhantomData<*const Allocator>,
}

impl SmallBlocks {
    /// Geometry with no slabs: every lookup answers `None` (for engines without a read
    /// fast path). Dereferences nothing: `locate` refuses every slab index first.
    pub(crate) const fn empty() -> SmallBlocks {
        SmallBlocks {
            heap: std::ptr::null_mut(),
            payload0: 0,
            words: std::ptr::null_mut(),
            kinds: std::ptr::null(),
            slabs: 0,
            _alloc: std::marker::PhantomData,
        }
    }

    /// The header word of the small-class block whose payload starts at `payload_off`
    /// and whose class is at least `min_class` (so that its payload holds the
    /// `len` bytes that [`min_class`]`(len)` was computed from), whatever its
    /// allocation state; `None` for anything else (large runs, the root slot, offsets
    /// that are not a block's payload, smaller blocks). The geometry is all this
    /// checks: a small slab keeps its class for the whole run (module docs), so a block
    /// found here stays a block of that class.
    ///
    /// A raw pointer (valid, 8-aligned, only accessed atomically), not a reference: the
    /// read fast path would otherwise test the address for null after every lookup.
    ///
    /// # Safety
    /// The allocator this came from must be alive.
    #[inline(always)]
    pub(crate) unsafe fn header(
        &self,
        payload_off: u64,
        min_class: u32,
    ) -> Option<*const AtomicU64> {
        // SAFETY: caller.
        unsafe { self.locate(payload_off, min_class) }.map(|(hw, _, _, _)| hw)
    }

    /// [`SmallBlocks::header`] and the block's class.
    ///
    /// # Safety
    /// As for [`SmallBlocks::header`].
    #[inline(always)]
    pub(crate) unsafe fn header_and_class(
        &self,
        payload_off: u64,
        min_class: u32,
    ) -> Option<(*const AtomicU64, u32)> {
        // SAFETY: caller.
        let (hw, _, _, class) = unsafe { self.locate(payload_off, min_class) }?;
        Some((hw, class as u32))
    }

    /// The header word of the small-class block whose payload starts at
    /// `payload_off`, which an earlier [`SmallBlocks::header_and_class`] of this
    /// geometry found, without looking again: a small slab keeps its class for the
    /// whole run, so the block is still a block of the class found then.
    #[inline(always)]
    pub(crate) fn header_of_found(&self, payload_off: u64) -> *const AtomicU64 {
        // As in `locate`: `heap + rel` is the block's header word, and
        // `heap + rel = words + payload_off` (wrapping arithmetic, which may leave the
        // image in between and ends at the block's header word inside it).
        self.words.wrapping_add(payload_off as usize) as *const AtomicU64
    }

    /// [`SmallBlocks::header`] of a block whose allocation bit is set (one more load:
    /// the bitmap word at the start of its slab).
    ///
    /// # Safety
    /// As for [`SmallBlocks::header`].
    #[inline(always)]
    pub(crate) unsafe fn allocated_header(
        &self,
        payload_off: u64,
        min_class: u32,
    ) -> Option<*const AtomicU64> {
        // SAFETY: caller.
        let (hw, slab_start, index, _) = unsafe { self.locate(payload_off, min_class) }?;
        // SAFETY: as in `block_state`: `index < nblocks` keeps the word inside the
        // slab's bitmap, 8-aligned; bitmap words are only accessed atomically.
        let w = unsafe {
            &*(self.heap.add(slab_start + 8 * (index / 64) as usize) as *const AtomicU64)
        };
        // Acquire: as in `block_state`.
        (w.load(Ordering::Acquire) & (1u64 << (index % 64)) != 0).then_some(hw)
    }

    /// The header word, the slab's offset in the heap, the block's index and its class.
    ///
    /// The checks, each one compare: the slab is in the table; its entry is a small
    /// class of at least `min_class` (kind, class range and payload length folded into
    /// one compare, `classes::small_class_at_least`); the offset in the slab is a block
    /// start below the class's block count (one multiply, `FastClass::block_index`).
    ///
    /// # Safety
    /// As for [`SmallBlocks::header`].
    #[inline(always)]
    unsafe fn locate(
        &self,
        payload_off: u64,
        min_class: u32,
    ) -> Option<(*const AtomicU64, usize, u32, usize)> {
        let rel = payload_off.wrapping_sub(self.payload0);
        let slab = (rel / SLAB_SIZE as u64) as usize;
        // (A `rel` that wrapped gives a slab index past the table.)
        if slab >= self.slabs {
            return None;
        }
        // SAFETY: `slab < slabs`, the length of the allocator's live table (caller).
        // Acquire: as in `block_state`.
        let e = unsafe { &*self.kinds.add(slab) }.load(Ordering::Acquire);
        let c = classes::small_class_at_least(e, min_class)?;
        let index = classes::FAST_CLASSES[c].block_index((rel % SLAB_SIZE as u64) as u32)?;
        // The block lies in a slab of the image (`heap + rel` is its header word: `rel`
        // is the block's offset in the heap); its header word is 8-aligned and only
        // accessed atomically (as in `block_state`).
        let hw = self.heap.wrapping_add(rel as usize) as *const AtomicU64;
        Some((hw, slab * SLAB_SIZE, index, c))
    }
}
