//! The object index of the multi-version engines: a sharded, concurrent DRAM map from
//! an object (payload offset and payload length) to its [`Chain`].
//!
//! # Entries
//! * Keyed by `(payload offset, payload length)`: a large block's slabs can later form
//!   a run of another length at the same offset, which then gets its own chain, so a
//!   version always has the length its readers expect.
//! * Created on the first access in this run (read or commit), with a base version
//!   stamped 0: a copy of the object's home bytes. That copy is exact as long as the
//!   engine writes home only for objects that already have a chain, under the chain's
//!   lock or with the chain's newer versions in DRAM (each engine says how); if
//!   another thread inserts first, our copy is discarded and theirs is used.
//! * Never removed while the index lives, so a `&Chain` is valid as long as the index.
//!   (A freed object's chain stays; the block's next owner pushes its versions onto the
//!   same chain. The index is bounded by the distinct objects a run touches.)
//!
//! Shards are `RwLock`ed hash maps: readers share a shard; only the first access of an
//! object takes the write lock. They own every chain. A small block's chain is also
//! linked into a direct table ([`SlabTable`]) at its first access, and found there
//! afterwards: a multiply and two dependent loads, no hash and no lock — the lookup
//! of every read whose object has versions in DRAM, so a shard's lock word would
//! otherwise take two read-modify-writes per such read, shared by every thread reading
//! an object of the shard.

use super::version::{LiveCount, Version};
use super::version_chain::Chain;
use crate::engine::kit::shared_counts::count_write;
use crate::engine::kit::slab_table::SlabTable;
use crate::fasthash::FastMap;
use crate::heap::alloc::{min_class, Allocator};
use crate::heap::Heap;
use crossbeam_utils::CachePadded;

use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

const SHARDS: usize = 64;

type Map = FastMap<(u64, u64), Box<Chain>>;
type Shard = RwLock<Map>;

/// The index.
pub(crate) struct VersionIndex {
    shards: Box<[CachePadded<Shard>]>,
    /// Small blocks' chains (the shards own them): keyed by the block, linked only for
    /// a chain of the block's whole payload.
    small: SlabTable<Chain>,
    /// Live versions (private copies included): counted in tests only.
    pub live: LiveCount,
}

impl VersionIndex {
    /// An empty index for the heap of `alloc`.
    pub(crate) fn new(heap: &Heap, alloc: &Allocator) -> VersionIndex {
        VersionIndex {
            shards: (0..SHARDS)
                .map(|_| CachePadded::new(RwLock::new(FastMap::default())))
                .collect(),
            small: SlabTable::new(heap, alloc.slab_capacity()),
            live: LiveCount::default(),
        }
    }
}

fn read(s: &Shard) -> RwLockReadGuard<'_, Map> {
    // The shard lock's state word: a read lock is a read-modify-write of it, and so
    // is its release (shared by every thread that looks an object of the shard up).
    count_write(s);
    count_write(s);
    // A panic while holding a shard lock cannot leave a map half-updated in a way that
    // matters (an insert either happened or not): ignore poisoning.
    s.read().unwrap_or_else(|e| e.into_inner())
}

fn write(s: &Shard) -> RwLockWriteGuard<'_, Map> {
    count_write(s);
    count_write(s);
    s.write().unwrap_or_else(|e| e.into_inner())
}

impl VersionIndex {
    #[inline]
    fn shard(&self, off: u64) -> &Shard {
        // Payloads are 16 bytes apart at least; fold in higher bits for large strides.
        let k = (off >> 4) ^ (off >> 12);
        &self.shards[k as usize % SHARDS]
    }

    /// The chain of the object at payload offset `off` with `len` payload bytes, if one
    /// exists (never creates one).
    pub(crate) fn get(&self, off: u64, len: usize) -> Option<&Chain> {
        if let Some(c) = self.small_chain(off, len) {
            return Some(c);
        }
        let p: *const Chain = &**read(self.shard(off)).get(&(off, len as u64))?;
        // SAFETY: boxed chains never move and are never removed before the index is
        // dropped (module docs), so the reference outlives the guard.
        Some(unsafe { &*p })
    }

    /// The chain of the object at payload offset `off` with `len` payload bytes (a
    /// multiple of 8), created from its home bytes if this is its first access.
    ///
    /// # Safety
    /// `off .. off + len` must be an object payload inside `heap` (validated by the
    /// caller).
    #[inline]
    pub(crate) unsafe fn get_or_create(
        &self,
        off: u64,
        len: usize,
        heap: &Heap,
        alloc: &Allocator,
    ) -> &Chain {
        if let Some(c) = self.small_chain(off, len) {
            return c;
        }
        // SAFETY: the caller's contract.
        let c = unsafe { self.get_or_create_shared(off, len, heap) };
        if let Some(slot) = alloc.small_slot(off, min_class(len)) {
            if slot.payload_len as usize == len {
                // SAFETY: the allocator's slot of the block at `off`, whose whole
                // payload the chain holds; boxed chains never move and live as long as
                // the index; the shards make one chain per (offset, length), and a slot
                // names one offset and length for the run.
                unsafe { self.small.link(slot, c) };
            }
        }
        c
    }

    /// The chain of the small block at `off` from the direct table, if it is linked
    /// and holds exactly `len` payload bytes (a chain of another length at the same
    /// offset lives in the shards only).
    #[inline(always)]
    fn small_chain(&self, off: u64, len: usize) -> Option<&Chain> {
        self.small.lookup_exact(off, len)
    }

    /// True if the small block at `off` has its chain of `len` payload bytes in the
    /// direct table (tests).
    #[cfg(test)]
    pub(crate) fn in_small_table(&self, off: u64, len: usize) -> bool {
        self.small_chain(off, len).is_some()
    }

    /// [`VersionIndex::get_or_create`] in the shards.
    ///
    /// # Safety
    /// As for [`VersionIndex::get_or_create`].
    unsafe fn get_or_create_shared(&self, off: u64, len: usize, heap: &Heap) -> &Chain {
        let shard = self.shard(off);
        let key = (off, len as u64);
        if let Some(e) = read(shard).get(&key) {
            let p: *const Chain = &**e;
            // SAFETY: boxed chains never move and are never removed before the index
            // is dropped (module docs), so the reference outlives the guard.
            return unsafe { &*p };
        }
        // SAFETY: the caller validated the range; while no chain exists nobody writes
        // home (module docs), and a racing insert makes us discard this copy.
        let base = unsafe { Version::new(len, Some(heap.ptr(off as usize)), &self.live) };
        let mut map = write(shard);
        let mut ours = false;
        let e = map.entry(key).or_insert_with(|| {
            ours = true;
            // SAFETY: `base` is ours and unpublished.
            Box::new(unsafe { Chain::new(base) })
        });
        let p: *const Chain = &**e;
        drop(map);
        if !ours {
            // SAFETY: never published: another thread's chain won.
            unsafe { Version::free(base, &self.live) };
        }
        // SAFETY: as above.
        unsafe { &*p }
    }
}

impl Drop for VersionIndex {
    fn drop(&mut self) {
        for s in self.shards.iter_mut() {
            let m = s.get_mut().unwrap_or_else(|e| e.into_inner());
            for e in m.values_mut() {
                // SAFETY: the index is being dropped; no thread can reach its chains.
                unsafe { e.destroy(&self.live) };
            }
        }
    }
}
