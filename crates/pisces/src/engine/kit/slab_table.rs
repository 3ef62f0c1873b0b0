//! A direct table from small-class blocks to per-object DRAM metadata: the object's
//! address finds its metadata with no search and no lock (sp3's index entries, the
//! version chains of mvcc and timestone).
//!
//! One array of pointers per slab, indexed by the block's index in its slab
//! ([`Allocator::small_slot`](crate::heap::alloc::Allocator::small_slot)), allocated on
//! the slab's first link. A lookup is one multiply (does a block of the slab's class
//! start at this offset?) and two dependent Acquire loads. This is sound because a small
//! slab keeps its class for the whole run (the allocator's module docs): the table
//! records the class at the slab's first link, and a slot names the same block for as
//! long as the table lives.
//!
//! The table does not own what it points to: the engine's map that creates the metadata
//! does, and must keep it alive (and in place) as long as the table ([`SlabTable::link`]).
//! Large runs and the root slot are not small blocks: they stay in the engine's map.

use crate::heap::alloc::{small_block_index, SmallSlot, HEADER};
use crate::heap::layout::SLAB_SIZE;
use crate::heap::Heap;
use std::sync::atomic::AtomicPtr;
use std::sync::atomic::Ordering::{AcqRel, Acquire, Release};

/// The cells of one small slab's blocks, by block index (null: nothing linked yet).
struct SlabCells<T> {
    /// The slab's size class (fixed for the run).
    class: u32,
    /// Payload bytes of the class's blocks.
    payload_len: u32,
    cells: Box<[AtomicPtr<T>]>,
}

/// The table (see the module docs).
pub(crate) struct SlabTable<T> {
    /// Per slab of the geometry: null, or its cells (owned; never replaced).
    slabs: Box<[AtomicPtr<SlabCells<T>>]>,
    /// Pool offset of the payload of a block at the heap's first byte.
    payload0: u64,
}

// SAFETY: the table only hands out shared references to `T` and stores pointers to
// `T`s that other threads created: that needs `T: Sync` (shared use) and `T: Send`
// (the creator's value is used, and dropped by its owner, elsewhere).
unsafe impl<T: Send + Sync> Send for SlabTable<T> {}
// SAFETY: as for `Send`; the cells are atomics.
unsafe impl<T: Send + Sync> Sync for SlabTable<T> {}

impl<T> SlabTable<T> {
    /// An empty table for `heap`, of up to `slabs` slabs
    /// ([`Allocator::slab_capacity`](crate::heap::alloc::Allocator::slab_capacity)).
    pub(crate) fn new(heap: &Heap, slabs: usize) -> SlabTable<T> {
        SlabTable {
            slabs: (0..slabs).map(|_| AtomicPtr::default()).collect(),
            payload0: (heap.layout().heap_offset + HEADER) as u64,
        }
    }

    /// What is linked for the small block whose payload starts at `off`, if its payload
    /// holds at least `len` bytes (the linked metadata is that of the whole block). No
    /// lock and no allocator state: the slab's cells know its class, which says whether
    /// a block starts at `off`.
    #[inline(always)]
    pub(crate) fn lookup(&self, off: u64, len: usize) -> Option<&T> {
        self.find(off, |payload| len <= payload)
    }

    /// As [`SlabTable::lookup`], for a block whose payload is exactly `len` bytes.
    #[inline(always)]
    pub(crate) fn lookup_exact(&self, off: u64, len: usize) -> Option<&T> {
        self.find(off, |payload| len == payload)
    }

    #[inline(always)]
    fn find(&self, off: u64, fits: impl Fn(usize) -> bool) -> Option<&T> {
        let (t, index) = self.cells_of(off)?;
        if !fits(t.payload_len as usize) {
            return None;
        }
        // Acquire: pairs with the Release store of the cell in `link`, so the linked
        // value's initialisation is visible.
        let p = t.cells.get(index as usize)?.load(Acquire);
        // SAFETY: linked values stay alive and in place while the table lives (`link`).
        (!p.is_null()).then(|| unsafe { &*p })
    }

    /// The slab's cells and the block's index in them, if a block of the slab's class
    /// starts at `off`.
    #[inline(always)]
    fn cells_of(&self, off: u64) -> Option<(&SlabCells<T>, u32)> {
        let rel = off.wrapping_sub(self.payload0);
        // (A `rel` that wrapped gives a slab index past the table.)
        // Acquire: pairs with the Release publication of the cells in `link`.
        let t = self
            .slabs
            .get((rel / SLAB_SIZE as u64) as usize)?
            .load(Acquire);
        if t.is_null() {
            return None;
        }
        // SAFETY: published cells are never freed or replaced while the table lives.
        let t = unsafe { &*t };
        let index = small_block_index(t.class, (rel % SLAB_SIZE as u64) as u32)?;
        Some((t, index))
    }

    /// What is linked for the small block at `slot` (the allocator's), if anything.
    #[inline(always)]
    pub(crate) fn get(&self, slot: SmallSlot) -> Option<&T> {
        // Acquire (both loads): pairs with the Release stores in `link`.
        let t = self.slabs.get(slot.slab)?.load(Acquire);
        if t.is_null() {
            return None;
        }
        // SAFETY: published cells are never freed or replaced while the table lives.
        let t = unsafe { &*t };
        let p = t.cells.get(slot.index as usize)?.load(Acquire);
        // SAFETY: linked values stay alive and in place while the table lives (`link`).
        (!p.is_null()).then(|| unsafe { &*p })
    }

    /// Link `value` as the metadata of the small block at `slot`.
    ///
    /// # Safety
    /// `slot` must be the allocator's slot of a block of this table's heap (from
    /// `Allocator::small_slot`), `value` must stay alive and in place as long as the
    /// table, it must be the metadata of that whole block (`slot.payload_len` bytes),
    /// and every thread that links a slot must link the same value (the caller's map
    /// makes one per block).
    pub(crate) unsafe fn link(&self, slot: SmallSlot, value: *const T) {
        let Some(cell) = self.slabs.get(slot.slab) else {
            return;
        };
        let mut t = cell.load(Acquire);
        if t.is_null() {
            let fresh = Box::into_raw(Box::new(SlabCells {
                class: slot.class,
                payload_len: slot.payload_len,
                cells: (0..slot.nblocks).map(|_| AtomicPtr::default()).collect(),
            }));
            // AcqRel: Release publishes the cells' initialisation; Acquire on failure
            // sees the winner's.
            t = match cell.compare_exchange(std::ptr::null_mut(), fresh, AcqRel, Acquire) {
                Ok(_) => fresh,
                Err(winner) => {
                    // SAFETY: ours, never published.
                    drop(unsafe { Box::from_raw(fresh) });
                    winner
                }
            };
        }
        // SAFETY: published cells live as long as the table.
        let t = unsafe { &*t };
        debug_assert_eq!((t.class, t.payload_len), (slot.class, slot.payload_len));
        if let Some(c) = t.cells.get(slot.index as usize) {
            // Release: the value's initialisation before a reader's Acquire load.
            c.store(value as *mut T, Release);
        }
    }
}

impl<T> Drop for SlabTable<T> {
    fn drop(&mut self) {
        for t in self.slabs.iter_mut() {
            let t = *t.get_mut();
            if !t.is_null() {
                // SAFETY: the table is being dropped; cells came from `Box::into_raw` in
                // `link` and are freed only here (the values they point to are owned
                // elsewhere).
                drop(unsafe { Box::from_raw(t) });
            }
        }
    }
}
