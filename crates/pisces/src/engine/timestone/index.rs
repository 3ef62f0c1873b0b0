//! The object index: a sharded DRAM map from an object (payload offset, payload
//! length) to its [`Entry`] (commit lock, last commit timestamp, version chain).
//!
//! * Keyed by `(offset, length)`: a large block's slabs can later form a run of another
//!   length at the same offset, which gets its own entry, so a version always has the
//!   length its readers expect.
//! * An entry is created at the first access of the object in this run with a base
//!   version copied from home. That copy is exact: home is written only by the
//!   checkpointer, and only for objects that have an entry (they are in its dirty
//!   list), so while no entry exists nobody writes home; a racing insert wins and our
//!   copy is discarded.
//! * Entries are never removed while the engine lives, so `&Entry` lives as long as
//!   the index (bounded by the distinct objects a run touches; chains are truncated to
//!   what running snapshots need).

use super::tlog::{Entry, Version};
use crate::fasthash::FastMap;
use crate::heap::Heap;
use crossbeam_utils::CachePadded;
use std::sync::atomic::AtomicU64;
use std::sync::RwLock;

const SHARDS: usize = 64;

type Shard = RwLock<FastMap<(u64, u64), Box<Entry>>>;

/// The index.
pub struct Index {
    shards: Box<[CachePadded<Shard>]>,
    /// Live versions (private copies included): a statistic for tests.
    pub live: AtomicU64,
}

impl Default for Index {
    fn default() -> Self {
        Index {
            shards: (0..SHARDS)
                .map(|_| CachePadded::new(RwLock::new(FastMap::default())))
                .collect(),
            live: AtomicU64::new(0),
        }
    }
}

impl Index {
    #[inline]
    fn shard(&self, off: u64) -> &Shard {
        let k = (off >> 4) ^ (off >> 12);
        &self.shards[k as usize % SHARDS]
    }

    /// The entry of the object at `off` with `len` payload bytes (multiple of 8),
    /// created from home if this is its first access.
    ///
    /// # Safety
    /// `off .. off + len` is an object payload inside `heap` (validated).
    pub unsafe fn get_or_create(&self, off: u64, len: usize, heap: &Heap) -> &Entry {
        let shard = self.shard(off);
        let key = (off, len as u64);
        if let Some(e) = shard.read().unwrap_or_else(|e| e.into_inner()).get(&key) {
            let p: *const Entry = &**e;
            // SAFETY: boxed entries never move nor go away before the index.
            return unsafe { &*p };
        }
        // SAFETY: validated range; nobody writes home while no entry exists.
        let base = unsafe { Version::new(len, Some(heap.ptr(off as usize)), &self.live) };
        let mut map = shard.write().unwrap_or_else(|e| e.into_inner());
        let mut ours = false;
        let e = map.entry(key).or_insert_with(|| {
            ours = true;
            // SAFETY: `base` is ours and unlinked.
            Box::new(unsafe { Entry::new(base) })
        });
        let p: *const Entry = &**e;
        drop(map);
        if !ours {
            // SAFETY: never linked.
            unsafe { Version::free(base, &self.live) };
        }
        // SAFETY: as above.
        unsafe { &*p }
    }
}

impl Drop for Index {
    fn drop(&mut self) {
        for s in self.shards.iter_mut() {
            let m = s.get_mut().unwrap_or_else(|e| e.into_inner());
            for e in m.values_mut() {
                // SAFETY: the index is being dropped.
                unsafe { e.destroy(&self.live) };
            }
        }
    }
}
