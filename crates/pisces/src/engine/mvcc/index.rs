//! The read indirection: a sharded, concurrent DRAM index from an object (payload
//! offset and payload length) to its [`Entry`] (commit lock and version chain).
//!
//! This is the strawman's "object ID → version list" step that Pisces' header-word
//! design removes: every read of the `mvcc` engine looks the object up here first.
//!
//! # Entries
//! * Keyed by `(payload offset, payload length)`: a large block's slabs can later form
//!   a run of another length at the same offset, which then gets its own entry, so a
//!   version always has the length its readers expect.
//! * Created on the first access in this run (read or commit), with one version at
//!   timestamp 0: a copy of the object's home bytes. That copy is exact: home is
//!   written only by a committer holding the entry's lock, so while no entry exists,
//!   nobody writes home; if another thread inserts first, our copy (possibly torn by a
//!   commit that followed that insert) is discarded and theirs is used.
//! * Never removed while the engine lives, so a `&Entry` is valid as long as the
//!   index. (A freed object's entry stays with its newest version; the block's next
//!   owner pushes its versions onto the same entry. The index is bounded by the number
//!   of distinct blocks the run touches.)
//!
//! Shards are `RwLock`ed hash maps (readers share a shard; only the first access of an
//! object takes the write lock).

use super::version::{Entry, Version};
use crate::fasthash::FastMap;
use crate::heap::Heap;
use crossbeam_utils::CachePadded;
use std::sync::atomic::AtomicU64;
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

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

fn read(s: &Shard) -> RwLockReadGuard<'_, FastMap<(u64, u64), Box<Entry>>> {
    // A panic while holding a shard lock cannot leave a map half-updated in a way that
    // matters (an insert either happened or not): ignore poisoning.
    s.read().unwrap_or_else(|e| e.into_inner())
}

fn write(s: &Shard) -> RwLockWriteGuard<'_, FastMap<(u64, u64), Box<Entry>>> {
    s.write().unwrap_or_else(|e| e.into_inner())
}

impl Index {
    #[inline]
    fn shard(&self, off: u64) -> &Shard {
        // Payloads are 16 bytes apart at least; fold in higher bits for large strides.
        let k = (off >> 4) ^ (off >> 12);
        &self.shards[k as usize % SHARDS]
    }

    /// The entry of the object at payload offset `off` with `len` payload bytes, if one
    /// exists (never creates one).
    pub fn get(&self, off: u64, len: usize) -> Option<&Entry> {
        let p: *const Entry = &**read(self.shard(off)).get(&(off, len as u64))?;
        // SAFETY: boxed entries never move and are never removed before the index is
        // dropped (module docs), so the reference outlives the guard.
        Some(unsafe { &*p })
    }

    /// The entry of the object at payload offset `off` with `len` payload bytes (a
    /// multiple of 8), created from its home bytes if this is its first access.
    ///
    /// # Safety
    /// `off .. off + len` must be an object payload inside `heap` (validated by the
    /// caller).
    #[inline]
    pub unsafe fn get_or_create(&self, off: u64, len: usize, heap: &Heap) -> &Entry {
        let shard = self.shard(off);
        let key = (off, len as u64);
        if let Some(e) = read(shard).get(&key) {
            let p: *const Entry = &**e;
            // SAFETY: boxed entries never move and are never removed before the index
            // is dropped (module docs), so the reference outlives the guard.
            return unsafe { &*p };
        }
        // SAFETY: the caller validated the range; while no entry exists nobody writes
        // home (module docs), and a racing insert makes us discard this copy.
        let base = unsafe { Version::new(len, Some(heap.ptr(off as usize)), &self.live) };
        let mut map = write(shard);
        let mut ours = false;
        let e = map.entry(key).or_insert_with(|| {
            ours = true;
            // SAFETY: `base` is ours and unpublished.
            Box::new(unsafe { Entry::new(base) })
        });
        let p: *const Entry = &**e;
        drop(map);
        if !ours {
            // SAFETY: never published: another thread's entry won.
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
                // SAFETY: the index is being dropped; no thread can reach its entries.
                unsafe { e.destroy(&self.live) };
            }
        }
    }
}
