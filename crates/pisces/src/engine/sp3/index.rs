//! The index (§III-B, Fig. 4): object → entry with `ptr`, `ver` and `lastTid`.
//!
//! # Where the metadata lives, and what it costs
//! In DRAM. Entries are found two ways:
//! * a **small-class block** (every object but the large runs of whole slabs) through
//!   sp3's direct table ([`EntryTable`]): per slab of the pool, an array of entry
//!   pointers with one cell per 16-byte granule, allocated on the slab's first link. The
//!   payloads of two small blocks are at least a block (16 bytes) apart, so each has a
//!   granule of its own, and the entry records its block's payload offset and length:
//!   a read finds its entry by two shifts and two dependent loads, no lock and no
//!   allocator state, and the entry's own offset and length say whether a block starts
//!   exactly there and holds the read (any other offset in the granule, or a forged
//!   one, names no entry). This is the paper's `entryPtr` reached from the object's
//!   address without a search.
//! * the owner of every entry, and the only way for large runs and the root slot: a
//!   hash map keyed by (payload offset, payload length), sharded 64 ways (`RwLock`ed
//!   maps; only an object's first access in a run takes a write lock). A small block's
//!   entry is created here and then linked into the direct table.
//!
//! Nothing of it is persistent: a crash loses it and recovery rebuilds nothing (the
//! next run's first access of each object makes a fresh entry from home).
//! * Pro: readers and committers never write persistent memory for concurrency control
//!   (no header-word locks to tag or clear after a crash), `lastTid` needs no space in
//!   the pool, and versions can be whole DRAM copies that stay immutable.
//! * Cost: one entry (~40 B with its box) plus one DRAM copy per object touched in a
//!   run, and one pointer per 16 bytes of every slab touched (32 KiB per 64 KiB slab,
//!   whatever its class: the granule is the smallest block's size, so that the cell is
//!   found with shifts, not the class's multiply); entries are never removed
//!   while the engine lives (a freed object's entry stays; the block's next owner of
//!   the same length reuses it), so the index is bounded by the distinct blocks a run
//!   touches.
//!
//! Keyed by length too: a large block's slabs may later form a block of another length
//! at the same offset, which then gets its own entry, so a version always has the
//! length its readers expect.
//!
//! # The `ver` word
//! `version << 17 | dead << 16 | owner_slot << 1 | lock`. The lock is taken at a
//! transaction's first write of the object (encounter time) with a CAS from an unlocked
//! value, and released at commit by storing `(version + 1) << 17 | dead << 16` (or the
//! old value on abort). `dead` is the entry's `live` flag negated, as of the version
//! (set in every unlocked word the flag's writer stores, under the lock): so the
//! read's fast path learns "unlocked and allocated" from one test of the word it
//! loads for the seqlock anyway.
//!
//! # First version of an object
//! The first access in a run copies the object's home bytes into a version. That copy is
//! exact: home is written only by the checkpointer, from log records of transactions
//! that committed to this entry — and while no entry exists, no such transaction exists
//! (a commit creates the entry before it publishes). If another thread inserts first,
//! our copy is discarded.

use super::version::Version;
use crate::fasthash::FastMap;
use crate::heap::alloc::SmallSlot;
use crate::heap::layout::SLAB_SIZE;
use crate::heap::Heap;
use crossbeam_utils::CachePadded;
use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed, Release};
use std::sync::atomic::{AtomicPtr, AtomicU64};
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

/// Lock bit of the `ver` word.
pub(super) const LOCK: u64 = 1;
const OWNER_SHIFT: u32 = 1;
const OWNER_MASK: u64 = 0x7FFF << OWNER_SHIFT;
const _: () = assert!(crate::heap::layout::MAX_THREADS <= (OWNER_MASK >> OWNER_SHIFT) as usize + 1);
/// The `dead` bit of the `ver` word: the object is not allocated in the committed state
/// at this version (module docs).
const DEAD: u64 = 1 << 16;
const VERSION_SHIFT: u32 = 17;

/// True if `w` is locked.
#[inline]
pub(super) fn is_locked(w: u64) -> bool {
    w & LOCK != 0
}

/// The version counter of `w`.
#[inline]
pub(super) fn version_of(w: u64) -> u64 {
    w >> VERSION_SHIFT
}

/// The owner slot of a locked word.
#[inline]
pub(super) fn owner_of(w: u64) -> usize {
    ((w & OWNER_MASK) >> OWNER_SHIFT) as usize
}

/// True if the object whose word was `seen` (unlocked, at read time) is unchanged now
/// (`now`) for slot `me`: same version, and unlocked or locked by `me` (Algorithm 1,
/// step 1).
#[inline]
pub(super) fn unchanged(seen: u64, now: u64, me: usize) -> bool {
    version_of(seen) == version_of(now) && (!is_locked(now) || owner_of(now) == me)
}

/// One object's index entry.
pub(crate) struct Entry {
    /// The `ver` word (see the module docs).
    pub ver: AtomicU64,
    /// Newest committed version (never null).
    ptr: AtomicPtr<Version>,
    /// Packed id of the last transaction that wrote or freed the object ([`super::tid`]).
    last_tid: AtomicU64,
    /// The object is allocated in the committed state: set when an allocation or a write
    /// is published, cleared when a free is. The allocator's bitmap lags behind (it is
    /// written in the checkpoint), so object validation asks this for a block whose bit
    /// is still clear.
    live: std::sync::atomic::AtomicBool,
    /// Payload bytes of a small block's entry (what [`EntryTable::lookup`] checks a
    /// read's length against); 0 for a large run or the root slot, which the table
    /// never holds. Fixed at creation.
    small_len: u32,
    /// Payload offset of the object (the key's; what [`EntryTable::lookup`] checks the
    /// offset against). Fixed at creation.
    off: u64,
}

/// What a reader saw of an entry, consistently.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Snapshot {
    /// The `ver` word (unlocked).
    pub ver: u64,
    /// The version.
    pub ptr: *mut Version,
    /// The last writer.
    pub last_tid: u64,
    /// The object is allocated in the committed state at this version.
    pub live: bool,
}

impl Entry {
    fn new(first: *mut Version, live: bool, off: u64, small_len: u32) -> Entry {
        Entry {
            ver: AtomicU64::new(if live { 0 } else { DEAD }),
            ptr: AtomicPtr::new(first),
            last_tid: AtomicU64::new(super::tid::NONE),
            live: std::sync::atomic::AtomicBool::new(live),
            small_len,
            off,
        }
    }

    /// Read (`ver`, `ptr`, `lastTid`, `live`) consistently, without locking. `Err(owner)` if the
    /// object is locked by a writer (the reader would fail validation anyway).
    ///
    /// Race closed (a seqlock): the committer stores `live`, `ptr` and `lastTid` with
    /// Release while holding the lock bit, then the unlocked new `ver`. If our Acquire
    /// loads see a new `live`, `ptr` or `lastTid`, the lock (earlier in the committer's program order)
    /// happens-before our second `ver` load, which then sees the lock or the new
    /// version, and we retry. If both `ver` loads return the same unlocked value, the
    /// loads between read that version's pointer and last writer.
    #[inline]
    pub(crate) fn snapshot(&self) -> Result<Snapshot, usize> {
        loop {
            let v1 = self.ver.load(Acquire);
            if is_locked(v1) {
                return Err(owner_of(v1));
            }
            let ptr = self.ptr.load(Acquire);
            let last_tid = self.last_tid.load(Acquire);
            let v2 = self.ver.load(Acquire);
            if v1 == v2 {
                return Ok(Snapshot {
                    ver: v1,
                    ptr,
                    last_tid,
                    live: v1 & DEAD == 0,
                });
            }
        }
    }

    /// [`Entry::snapshot`] of an object that is unlocked and allocated at the version
    /// read (the read's fast path): `None` if it is locked or not allocated, tested
    /// together on the first load of the word. Race closed: as for
    /// [`Entry::snapshot`]; the `dead` bit is part of the word the two loads compare.
    #[inline(always)]
    pub(crate) fn snapshot_live(&self) -> Option<Snapshot> {
        loop {
            let v1 = self.ver.load(Acquire);
            if v1 & (LOCK | DEAD) != 0 {
                return None;
            }
            let ptr = self.ptr.load(Acquire);
            let last_tid = self.last_tid.load(Acquire);
            let v2 = self.ver.load(Acquire);
            if v1 == v2 {
                return Some(Snapshot {
                    ver: v1,
                    ptr,
                    last_tid,
                    live: true,
                });
            }
        }
    }

    /// Take the lock for slot `me` if the word is still `expected` (unlocked).
    /// Acquire: we see the previous holder's `ptr` and `lastTid`.
    #[inline]
    pub(crate) fn try_lock(&self, expected: u64, me: usize) -> bool {
        debug_assert!(!is_locked(expected));
        let locked = expected | (me as u64) << OWNER_SHIFT | LOCK;
        crate::engine::kit::shared_counts::count_write(&self.ver);
        self.ver
            .compare_exchange(expected, locked, AcqRel, Relaxed)
            .is_ok()
    }

    /// Take the lock from whatever unlocked value the word has now; `false` if another
    /// slot holds it. Returns the unlocked value it had.
    #[inline]
    pub(crate) fn lock_current(&self, me: usize) -> Option<u64> {
        loop {
            let w = self.ver.load(Acquire);
            if is_locked(w) {
                return None;
            }
            if self.try_lock(w, me) {
                return Some(w);
            }
        }
    }

    /// The payload offset of the object.
    #[inline(always)]
    pub(crate) fn off(&self) -> u64 {
        self.off
    }

    /// The payload bytes of a small block's entry (0 for others).
    #[inline(always)]
    pub(crate) fn small_len(&self) -> usize {
        self.small_len as usize
    }

    /// The newest version (under the lock, or for a snapshot already validated).
    #[inline]
    pub(crate) fn ptr(&self) -> *mut Version {
        self.ptr.load(Acquire)
    }

    /// The last writer (under the lock).
    #[inline]
    pub(crate) fn last_tid(&self) -> u64 {
        self.last_tid.load(Acquire)
    }

    /// Step 3 of Algorithm 1 for this object, under the lock: publish `new` (if any) as
    /// the newest version and `tid` as the last writer. Returns the replaced version
    /// (for the limbo). Release: see [`Entry::snapshot`].
    #[inline]
    pub(crate) fn publish(&self, new: Option<*mut Version>, tid: u64) -> Option<*mut Version> {
        // Release (with the unlock that follows): a validator that sees `live` sees the
        // version published with it.
        crate::engine::kit::shared_counts::count_write(&self.live);
        self.live.store(new.is_some(), Release);
        let old = new.map(|v| {
            crate::engine::kit::shared_counts::count_write(&self.ptr);
            self.ptr.swap(v, AcqRel)
        });
        crate::engine::kit::shared_counts::count_write(&self.last_tid);
        self.last_tid.store(tid, Release);
        old
    }

    /// Release the lock, bumping the version (commit) or not (abort). `locked` is the
    /// word as we locked it. The `dead` bit of the unlocked word is the negation of
    /// `live` as the holder left it (set by [`Entry::publish`] or, on abort, unchanged
    /// since the lock). Release: our `live` / `ptr` / `lastTid` stores and version data
    /// happen before the next holder or reader sees the unlocked word.
    #[inline]
    pub(crate) fn unlock(&self, locked: u64, bump: bool) {
        // Relaxed: `live` is written only under the lock, which we hold.
        let dead = if self.live.load(Relaxed) { 0 } else { DEAD };
        let base = locked & !(OWNER_MASK | LOCK | DEAD) | dead;
        let next = if bump {
            base + (1 << VERSION_SHIFT)
        } else {
            base
        };
        crate::engine::kit::shared_counts::count_write(&self.ver);
        self.ver.store(next, Release);
    }
}

const SHARDS: usize = 64;
type Shard = RwLock<FastMap<(u64, u64), Box<Entry>>>;

/// The index.
pub(crate) struct Index {
    shards: Box<[CachePadded<Shard>]>,
    /// Small blocks' entries (the shards own them).
    small: EntryTable,
}

fn read(s: &Shard) -> RwLockReadGuard<'_, FastMap<(u64, u64), Box<Entry>>> {
    // A read lock and its release are read-modify-writes of the shard's lock word.
    crate::engine::kit::shared_counts::count_write(s);
    crate::engine::kit::shared_counts::count_write(s);
    // An insert either happened or not: a poisoned shard is still consistent.
    s.read().unwrap_or_else(|e| e.into_inner())
}

fn write(s: &Shard) -> RwLockWriteGuard<'_, FastMap<(u64, u64), Box<Entry>>> {
    crate::engine::kit::shared_counts::count_write(s);
    crate::engine::kit::shared_counts::count_write(s);
    s.write().unwrap_or_else(|e| e.into_inner())
}

impl Index {
    /// An empty index for `heap`, of up to `slabs` slabs
    /// ([`crate::heap::alloc::Allocator::slab_capacity`]).
    pub(crate) fn new(heap: &Heap, slabs: usize) -> Index {
        Index {
            shards: (0..SHARDS)
                .map(|_| CachePadded::new(RwLock::new(FastMap::default())))
                .collect(),
            small: EntryTable::new(heap, slabs),
        }
    }

    /// The entry of the small block whose payload starts at `off`, holding at least
    /// `len` bytes, if its first access made one: the read fast path (module docs,
    /// [`EntryTable::lookup`]). An entry found this way is that of a block of this pool
    /// (only [`Index::get_or_create`], given a validated block, links entries).
    #[inline(always)]
    pub(crate) fn lookup_small(&self, off: u64, len: usize) -> Option<&Entry> {
        self.small
            .lookup(off)
            .filter(|e| len <= e.small_len as usize)
    }

    /// The direct table as a thread's read fast path holds it ([`SmallTable`]).
    ///
    /// # Safety
    /// The index must outlive the returned value.
    pub(crate) unsafe fn small_table(&self) -> SmallTable {
        SmallTable {
            slabs: self.small.slabs.as_ptr(),
            len: self.small.slabs.len(),
        }
    }

    #[inline]
    fn shard(&self, off: u64) -> &Shard {
        let k = (off >> 4) ^ (off >> 12);
        &self.shards[k as usize % SHARDS]
    }

    /// The entry of the object at payload offset `off` with `len` payload bytes (a
    /// multiple of 8), created from its home bytes on first access. `slot`: where the
    /// object sits if it is a small block (its entry is then linked into the direct
    /// table, for [`Index::lookup_small`]). `live`: the state a new entry starts in — true for
    /// an object of the committed state, false for a block the caller's commit
    /// allocates (live once that commit publishes it, and never if it rolls back: the
    /// read fast path trusts a live entry without asking the allocator).
    ///
    /// # Safety
    /// `off .. off + len` must be an object payload inside `heap` (validated), and
    /// `slot`, if given, the allocator's slot of exactly that block, which every call
    /// for this block passes with the same `len` while the index lives.
    #[inline]
    pub(crate) unsafe fn get_or_create(
        &self,
        off: u64,
        len: usize,
        heap: &Heap,
        slot: Option<SmallSlot>,
        live: bool,
    ) -> &Entry {
        if slot.is_some() {
            if let Some(e) = self
                .small
                .lookup(off)
                .filter(|e| e.small_len as usize == len)
            {
                return e;
            }
        }
        let small_len = slot.map_or(0, |s| {
            debug_assert!(len <= s.payload_len as usize);
            len as u32
        });
        // SAFETY: the caller's contract.
        let e = unsafe { self.get_or_create_shared(off, len, heap, live, small_len) };
        if slot.is_some() {
            // SAFETY: the caller's slot says a small block's payload starts at `off`,
            // and `e` is its entry (`e.off == off`); boxed entries never move and live
            // as long as the index; the shards make one entry per key, and a small
            // block is read and written with one length for the run.
            unsafe { self.small.link(e) };
        }
        e
    }

    /// [`Index::get_or_create`] in the shards.
    ///
    /// # Safety
    /// As for [`Index::get_or_create`].
    unsafe fn get_or_create_shared(
        &self,
        off: u64,
        len: usize,
        heap: &Heap,
        live: bool,
        small_len: u32,
    ) -> &Entry {
        let shard = self.shard(off);
        let key = (off, len as u64);
        if let Some(e) = read(shard).get(&key) {
            let p: *const Entry = &**e;
            // SAFETY: boxed entries never move and are never removed while the index
            // lives.
            return unsafe { &*p };
        }
        // SAFETY: validated range; nobody writes home while no entry exists (module
        // docs); a racing insert makes us discard this copy.
        let first = unsafe { Version::new(len, Some(heap.ptr(off as usize))) };
        let mut map = write(shard);
        let mut ours = false;
        let e = map.entry(key).or_insert_with(|| {
            ours = true;
            Box::new(Entry::new(first, live, off, small_len))
        });
        let p: *const Entry = &**e;
        drop(map);
        if !ours {
            // SAFETY: never published.
            unsafe { Version::free(first) };
        }
        // SAFETY: as above.
        unsafe { &*p }
    }

    /// True if the committed state has an object of `len` payload bytes at `off`
    /// although the allocator's bit may still be clear (an allocation whose record is
    /// not checkpointed yet).
    pub(crate) fn committed_live(&self, off: u64, len: usize) -> bool {
        read(self.shard(off))
            .get(&(off, len as u64))
            .is_some_and(|e| e.live.load(Acquire))
    }

    /// Entries (tests, diagnostics).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.shards.iter().map(|s| read(s).len()).sum()
    }
}

/// log2 of [`EntryTable`]'s granule: the smallest block size (the allocator's classes
/// are multiples of 16 bytes), so that the payloads of two small blocks, at least a
/// block apart, never share a granule (`tests.rs` reads adjacent smallest blocks).
const GRANULE_SHIFT: u32 = 4;
/// log2 of the slab size: a pool offset's slab in the table.
const SLAB_SHIFT: u32 = SLAB_SIZE.trailing_zeros();
/// Cells of a slab: one per granule.
const CELLS: usize = SLAB_SIZE >> GRANULE_SHIFT;

/// One slab's cells: null, or the entry of the small block whose payload starts in the
/// granule.
type Cells = [AtomicPtr<Entry>; CELLS];

/// The cells of every slab without any: all null, never written ([`EntryTable::link`]
/// replaces a slab's pointer to them by fresh cells before it stores a cell).
static NO_CELLS: Cells = [const { AtomicPtr::new(std::ptr::null_mut()) }; CELLS];

fn no_cells() -> *mut Cells {
    std::ptr::from_ref(&NO_CELLS).cast_mut()
}

/// Small blocks' entries by payload offset (module docs): the cell of a block's
/// granule in its slab's cells, so that a read finds its entry with two shifts and two
/// dependent loads, and checks the entry's own offset and length instead of the
/// allocator's geometry. Sound because a small slab keeps its class for the whole run
/// (the allocator's module docs): a payload offset linked once is a block start for
/// as long as the table lives, and no other block's payload shares its granule. The
/// table does not own the entries (the shards do, boxed, for as long as the index).
struct EntryTable {
    /// Per slab of the pool, by `offset >> SLAB_SHIFT` from pool offset 0 (the heap
    /// starts on a slab boundary, so no subtraction is needed; slabs before the heap
    /// are never linked): [`NO_CELLS`], or the slab's own cells (owned; never replaced
    /// or freed while the table lives).
    slabs: Box<[AtomicPtr<Cells>]>,
}

impl EntryTable {
    /// An empty table for `heap`'s first `slabs` heap slabs.
    fn new(heap: &Heap, slabs: usize) -> EntryTable {
        let heap_offset = heap.layout().heap_offset;
        assert_eq!(
            heap_offset % SLAB_SIZE,
            0,
            "the heap starts on a slab boundary"
        );
        EntryTable {
            slabs: (0..heap_offset / SLAB_SIZE + slabs)
                .map(|_| AtomicPtr::new(no_cells()))
                .collect(),
        }
    }

    /// The cell of payload offset `off`'s granule in `cells`.
    #[inline(always)]
    fn cell(cells: &Cells, off: u64) -> &AtomicPtr<Entry> {
        &cells[(off >> GRANULE_SHIFT) as usize % CELLS]
    }

    /// The entry linked for the small block whose payload starts exactly at `off`, if
    /// any. Any offset is safe to ask: one past the table, or whose granule is empty
    /// or holds another offset's entry, finds nothing.
    #[inline(always)]
    fn lookup(&self, off: u64) -> Option<&Entry> {
        Self::lookup_in(&self.slabs, off)
    }

    /// [`EntryTable::lookup`] in the table's slab array `slabs`.
    #[inline(always)]
    fn lookup_in(slabs: &[AtomicPtr<Cells>], off: u64) -> Option<&Entry> {
        // Acquire: pairs with the Release publication of the slab's cells in `link`,
        // so they are seen initialised.
        let cells = slabs.get((off >> SLAB_SHIFT) as usize)?.load(Acquire);
        // SAFETY: `NO_CELLS` or cells published by `link`, which live as long as the
        // table and are never replaced.
        let cells = unsafe { &*cells };
        // Acquire: pairs with the Release store of the cell in `link`, so the entry's
        // initialisation (its offset and length among it) is visible.
        let e = Self::cell(cells, off).load(Acquire);
        // SAFETY: linked entries stay alive and in place as long as the table (`link`).
        let e = unsafe { e.as_ref() }?;
        (e.off == off).then_some(e)
    }

    /// Link `e` as the entry of the small block whose payload starts at `e.off`,
    /// making the slab's cells on its first link.
    ///
    /// # Safety
    /// A small block's payload must start at `e.off` (in the heap of the table's
    /// geometry), `e` must stay alive and in place as long as the table, and every
    /// thread that links a block must link the same entry (the shards make one per
    /// block).
    unsafe fn link(&self, e: &Entry) {
        let Some(slab) = self.slabs.get((e.off >> SLAB_SHIFT) as usize) else {
            debug_assert!(false, "a small block past the table's slabs");
            return;
        };
        let mut cells = slab.load(Acquire);
        if cells == no_cells() {
            let fresh: Box<Cells> = (0..CELLS)
                .map(|_| AtomicPtr::default())
                .collect::<Box<[_]>>()
                .try_into()
                .unwrap_or_else(|_| unreachable!("CELLS cells"));
            let fresh = Box::into_raw(fresh);
            // AcqRel: Release publishes the cells' initialisation; Acquire on failure
            // sees the winner's.
            cells = match slab.compare_exchange(no_cells(), fresh, AcqRel, Acquire) {
                Ok(_) => fresh,
                Err(winner) => {
                    // SAFETY: ours, never published.
                    drop(unsafe { Box::from_raw(fresh) });
                    winner
                }
            };
        }
        // SAFETY: published cells live as long as the table.
        let cell = Self::cell(unsafe { &*cells }, e.off);
        debug_assert!({
            let p = cell.load(Acquire);
            p.is_null() || std::ptr::eq(p, e)
        });
        // Release: the entry's initialisation before a reader's Acquire load of it.
        cell.store(std::ptr::from_ref(e).cast_mut(), Release);
    }
}

/// [`Index::lookup_small`] from a copy of the direct table's slab array (its address
/// and length, which never change), which a thread state keeps beside the `Arc` that
/// holds the index: its read fast path then reaches the table without loading the
/// `Arc`'s pointer and the array's first. Valid while the index lives
/// ([`Index::small_table`]'s contract).
pub(crate) struct SmallTable {
    slabs: *const AtomicPtr<Cells>,
    len: usize,
}

impl SmallTable {
    /// [`Index::lookup_small`].
    #[inline(always)]
    pub(crate) fn lookup_small(&self, off: u64, len: usize) -> Option<&Entry> {
        // SAFETY: the index, and with it the table's boxed slab array, outlives `self`
        // (`Index::small_table`); the array is never replaced.
        let slabs = unsafe { std::slice::from_raw_parts(self.slabs, self.len) };
        EntryTable::lookup_in(slabs, off).filter(|e| len <= e.small_len as usize)
    }
}

impl Drop for EntryTable {
    fn drop(&mut self) {
        for slab in self.slabs.iter_mut() {
            let cells = *slab.get_mut();
            if cells != no_cells() {
                // SAFETY: the table is being dropped; cells other than `NO_CELLS` came
                // from `Box::into_raw` in `link` and are freed only here.
                drop(unsafe { Box::from_raw(cells) });
            }
        }
    }
}

impl Drop for Index {
    fn drop(&mut self) {
        for s in self.shards.iter_mut() {
            let m = s.get_mut().unwrap_or_else(|e| e.into_inner());
            for e in m.values_mut() {
                let p = *e.ptr.get_mut();
                // SAFETY: the index is being dropped; nobody can reach the entry, and
                // the newest version is owned by it (replaced ones went to a limbo).
                unsafe { Version::free(p) };
            }
        }
    }
}
