//! Direct tables from small-class blocks to per-object DRAM metadata: the object's
//! address finds its metadata with no search and no lock. [`SlabTable`] holds a pointer
//! per block (the version chains of mvcc and timestone),
//! [`SlabWords`] a word per block (timestone's committed allocation state).
//!
//! One array of cells per slab, indexed by the block's index in its slab
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
use std::marker::PhantomData;
use std::sync::atomic::Ordering::{AcqRel, Acquire, Release};
use std::sync::atomic::{AtomicPtr, AtomicU64};

/// The cells of one small slab's blocks, by block index.
struct SlabCells<C> {
    /// The slab's size class (fixed for the run).
    class: u32,
    /// Payload bytes of the class's blocks.
    payload_len: u32,
    cells: Box<[C]>,
}

/// One lazily made array of cells per slab: what both tables are made of.
struct Slabs<C> {
    /// Per slab of the geometry: null, or its cells (owned; never replaced).
    slabs: Box<[AtomicPtr<SlabCells<C>>]>,
    /// Pool offset of the payload of a block at the heap's first byte.
    payload0: u64,
}

impl<C: Default> Slabs<C> {
    fn new(heap: &Heap, slabs: usize) -> Slabs<C> {
        Slabs {
            slabs: (0..slabs).map(|_| AtomicPtr::default()).collect(),
            payload0: (heap.layout().heap_offset + HEADER) as u64,
        }
    }

    /// The slab's cells and the block's index in them, if the slab has cells and a
    /// block of its class starts at payload offset `off`.
    #[inline(always)]
    fn cells_of(&self, off: u64) -> Option<(&SlabCells<C>, u32)> {
        let rel = off.wrapping_sub(self.payload0);
        // (A `rel` that wrapped gives a slab index past the table.)
        // Acquire: pairs with the Release publication of the cells in `cell_or_create`.
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

    /// The cell of the block at `slot` (the allocator's), if its slab has cells.
    #[inline(always)]
    fn cell(&self, slot: SmallSlot) -> Option<&C> {
        // Acquire: pairs with the Release publication of the cells in `cell_or_create`.
        let t = self.slabs.get(slot.slab)?.load(Acquire);
        if t.is_null() {
            return None;
        }
        // SAFETY: published cells are never freed or replaced while the table lives.
        unsafe { &*t }.cells.get(slot.index as usize)
    }

    /// The cell of the block at `slot`, making its slab's cells on first use. `None`
    /// only for a slot outside the table's geometry.
    fn cell_or_create(&self, slot: SmallSlot) -> Option<&C> {
        let cell = self.slabs.get(slot.slab)?;
        let mut t = cell.load(Acquire);
        if t.is_null() {
            let fresh = Box::into_raw(Box::new(SlabCells {
                class: slot.class,
                payload_len: slot.payload_len,
                cells: (0..slot.nblocks).map(|_| C::default()).collect(),
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
        t.cells.get(slot.index as usize)
    }
}

impl<C> Drop for Slabs<C> {
    fn drop(&mut self) {
        for t in self.slabs.iter_mut() {
            let t = *t.get_mut();
            if !t.is_null() {
                // SAFETY: the table is being dropped; cells came from `Box::into_raw` in
                // `cell_or_create` and are freed only here.
                drop(unsafe { Box::from_raw(t) });
            }
        }
    }
}

/// A pointer per small block (see the module docs).
pub(crate) struct SlabTable<T> {
    slabs: Slabs<AtomicPtr<T>>,
    /// The table shares `T`s between threads (`Send`/`Sync` below).
    _values: PhantomData<*const T>,
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
            slabs: Slabs::new(heap, slabs),
            _values: PhantomData,
        }
    }

    /// What is linked for the small block whose payload starts at `off`, if its payload
    /// is exactly `len` bytes (the linked metadata is that of the whole block). No lock
    /// and no allocator state: the slab's cells know its class, which says whether a
    /// block starts at `off`.
    #[inline(always)]
    pub(crate) fn lookup_exact(&self, off: u64, len: usize) -> Option<&T> {
        self.find(off, |payload| len == payload)
    }

    #[inline(always)]
    fn find(&self, off: u64, fits: impl Fn(usize) -> bool) -> Option<&T> {
        let (t, index) = self.slabs.cells_of(off)?;
        if !fits(t.payload_len as usize) {
            return None;
        }
        // Acquire: pairs with the Release store of the cell in `link`, so the linked
        // value's initialisation is visible.
        let p = t.cells.get(index as usize)?.load(Acquire);
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
        if let Some(c) = self.slabs.cell_or_create(slot) {
            // Release: the value's initialisation before a reader's Acquire load.
            c.store(value as *mut T, Release);
        }
    }
}

/// A word per small block, 0 until stored (see the module docs). The words order
/// nothing but themselves: a store is Release and a load Acquire, so a reader that sees
/// a word sees what its writer did before storing it.
pub(crate) struct SlabWords {
    slabs: Slabs<AtomicU64>,
}

impl SlabWords {
    /// All words 0, for `heap`, of up to `slabs` slabs.
    pub(crate) fn new(heap: &Heap, slabs: usize) -> SlabWords {
        SlabWords {
            slabs: Slabs::new(heap, slabs),
        }
    }

    /// The word of the small block at `slot` (the allocator's).
    #[inline]
    pub(crate) fn load(&self, slot: SmallSlot) -> u64 {
        // Acquire: pairs with the Release in `store`.
        self.slabs.cell(slot).map_or(0, |c| c.load(Acquire))
    }

    /// Set the word of the small block at `slot` (the allocator's) to `w`. The slab's
    /// words are made at its first store of a word other than 0.
    pub(crate) fn store(&self, slot: SmallSlot, w: u64) {
        let cell = if w == 0 {
            self.slabs.cell(slot)
        } else {
            self.slabs.cell_or_create(slot)
        };
        if let Some(c) = cell {
            // Release: what the writer did before, for a reader that sees `w`.
            c.store(w, Release);
        }
    }
}
