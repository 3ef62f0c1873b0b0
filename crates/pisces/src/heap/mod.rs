//! The heap layer: a pool image with its superblock, geometry and allocator.
//!
//! Public for tools: the on-media layout ([`layout`]), the superblock type ([`superblock`])
//! and [`pptr::PPtr`]. The heap itself (raw access by offset) and the allocator are
//! crate-private: safe code outside the engines must not write pool memory.
//!
//! [`Heap`] is what engines are written against. It knows where the regions of a pool
//! are ([`layout::Layout`]), hands out raw access to them by offset, and owns the
//! superblock. It does not know about transactions: the transactional allocator
//! ([`alloc`]) exposes reserve / publish / release steps that an engine sequences.
//!
//! # Growth
//! A pool formatted with a maximum size above its size grows when the allocator runs
//! out of slabs ([`Heap::grow`], called by the allocator under its growth lock, so one
//! thread grows while the others wait and then find the new slabs):
//! 1. the medium extends the file (durably: `fdatasync` of its new length) and maps the
//!    new part in place ([`Medium::grow`]); the base address never moves;
//! 2. the superblock's other copy is written with the new `pool_size` and persisted;
//! 3. only then the new size is published to other threads (`size`), and the
//!    allocator adds the new slabs to its free set.
//!
//! So no block of the new region can be handed out, let alone committed, before the
//! new size is durable. A crash before step 2 leaves a file longer than the superblock
//! says, which `open` accepts (the extra is ignored and reused by the next growth); a
//! crash after it leaves new slabs that are all free (their slab table entries were
//! never written). New slabs need no formatting: the allocator formats a slab (bitmap,
//! header words) whenever it takes a free one.

pub(crate) mod alloc;
pub(crate) mod layout;
pub(crate) mod pptr;
pub(crate) mod superblock;

use crate::medium::reserve::SizeWord;
use crate::medium::Medium;
use crate::region::{InRegion, Line, PlacedValue, Region};
use crate::{Error, Result};
use layout::{Layout, ENGINE_AREA_OFFSET};
use std::ops::Range;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use superblock::Superblock;

/// Hint the processor to bring the cache line of `p` into its caches. A hint never
/// faults and changes nothing the program can observe, whatever the address: a wrong
/// or stale one costs at most a wasted memory access (replay's home lines ahead of
/// their records, the further lines of an object whose first line is being loaded).
#[inline(always)]
pub(crate) fn prefetch(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is only a hint: it never faults and writes nothing, whatever
    // the address (SSE, which every x86-64 processor has).
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p as *const i8)
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// The value of [`Superblock::dirty_shutdowns_seen`] for a pool on `medium`: the
/// unsafe-shutdown count of the NVDIMMs of its file's region, plus one; 0 without a
/// file, a region, or a count.
fn dirty_shutdowns_seen(medium: &dyn Medium) -> u64 {
    medium
        .file()
        .and_then(|f| crate::medium::domain::SysfsProbe::default().dirty_shutdowns_of_file(f))
        .map_or(0, |n| n.saturating_add(1))
}

crate::mutation::point! {
    /// A grown pool's new size reaches the superblock only when the first block of the
    /// new region is published (after its transaction committed), not before the new
    /// region is handed out.
    pub(crate) static GROW_SIZE_LATE = "grow-size-late";
}
/// The heap's mutation points: they apply to every engine whose pool is the heap (the
/// registry adds them to `EngineId::mutations()`).
#[cfg(feature = "mutation")]
pub(crate) static MUTATIONS: &[&crate::mutation::MutationPoint] = &[&GROW_SIZE_LATE];

/// Parameters fixed when a pool is formatted.
#[derive(Clone, Copy, Debug)]
pub(crate) struct FormatParams {
    /// Engine id recorded in the superblock.
    pub engine_id: u32,
    /// Number of thread slots.
    pub max_threads: usize,
    /// Bytes of each log region.
    pub log_bytes_per_thread: usize,
    /// The engine's regions.
    pub regions: layout::Regions,
}

/// Offset, inside the engine area, of the root slot (header word + root offset + size).
pub const ROOT_SLOT_OFFSET: usize = ENGINE_AREA_OFFSET + 64;

/// The sizes of a pool that several processes share and that may grow, in the region
/// they share ([`Heap::share_sizes`]): zero until the first process raises them to its
/// own, then raised by every growth.
#[repr(C)]
struct SharedSizes {
    /// The pool's size (the superblock's `pool_size`): [`Heap::size`].
    size: AtomicUsize,
    /// The medium's length (the file's, at least): [`Medium::len`].
    mapped: AtomicUsize,
}

// SAFETY: two atomics: zero is a value, no address, no drop, `repr(C)`.
unsafe impl InRegion for SharedSizes {}

crate::mutation::hook_point! {
    /// A growth of the heap with the file extended and the medium's length raised, the
    /// superblock not yet written ([`Heap::grow`]): the growth is not recorded.
    pub(crate) static GROW_FILE_EXTENDED = "grow-file-extended";
    /// A growth of the heap recorded in the superblock, the pool's size not yet raised.
    pub(crate) static GROW_SIZE_WRITTEN = "grow-size-written";
}

/// A mapped pool: medium, geometry, superblock.
pub(crate) struct Heap {
    medium: Arc<dyn Medium>,
    /// `medium.base()` cached: every object access goes through [`Heap::ptr`] /
    /// [`Heap::atomic_u64`], and asking the medium costs a virtual call behind two
    /// pointer loads (about 3 % of a hash-table transaction's instructions under
    /// callgrind). Constant for the medium's lifetime.
    base: *mut u8,
    /// The pool's current size (the superblock's `pool_size`; the medium may be
    /// longer). Grows only, in [`Heap::grow`]; on a pool several processes share and
    /// that may grow, a word they all share ([`Heap::share_sizes`]).
    len: SizeWord,
    layout: Layout,
    /// The current superblock and its slot. Also serialises growth.
    superblock: Mutex<(Superblock, usize)>,
    generation: u64,
    /// A grown size whose superblock write was deferred (only under the
    /// `GrowSizeLate` mutation, which shows that the deferral loses data); 0 if none.
    late_size: AtomicU64,
    /// False once the engine declared that it keeps nothing in block header words
    /// ([`Heap::set_header_words_unused`]): slab formatting then leaves them as they
    /// are (see `alloc::pmem::format_small`).
    header_words_used: AtomicBool,
    /// Other processes have the pool open too ([`Heap::lock_superblock`]).
    shared: AtomicBool,
    /// Keeps mutation scenarios of other tests out while the pool is open (taken
    /// before the pool is formatted or opened; see `mutation::Unmutated`).
    #[cfg(feature = "mutation")]
    _unmutated: crate::mutation::Unmutated,
}

// SAFETY: `base` points into the medium's mapping, which `medium` (an `Arc` of a
// `Send + Sync` medium) keeps alive as long as the heap; the heap hands out access to
// it exactly as it would through `medium.base()`, so sharing or sending the cached
// pointer adds nothing the medium does not already allow.
unsafe impl Send for Heap {}
// SAFETY: as above.
unsafe impl Sync for Heap {}

impl std::fmt::Debug for Heap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Heap")
            .field("medium", &self.medium.kind())
            .field("layout", &self.layout)
            .field("generation", &self.generation)
            .finish()
    }
}

impl Heap {
    /// Format a new pool on `medium`, whose image must be all zero, that cannot grow.
    #[cfg(test)]
    pub(crate) fn format(medium: Arc<dyn Medium>, params: FormatParams) -> Result<Heap> {
        let len = medium.len() as u64;
        Self::format_growable(medium, params, len)
    }

    /// A new pool of `size` bytes on anonymous memory (the DRAM medium), that cannot
    /// grow (engines' unit tests).
    #[cfg(test)]
    pub(crate) fn format_dram(size: usize, params: FormatParams) -> Heap {
        let m = crate::medium::dram::DramMedium::anonymous(size, 0, 0).expect("anonymous memory");
        Self::format(Arc::new(m), params).expect("formatting a DRAM pool")
    }

    /// Format a new pool on `medium` (all zero) that may grow to `max_size` bytes (the
    /// medium's length: a pool that cannot grow); the medium must reserve at least
    /// `max_size` bytes.
    pub(crate) fn format_growable(
        medium: Arc<dyn Medium>,
        params: FormatParams,
        max_size: u64,
    ) -> Result<Heap> {
        #[cfg(feature = "mutation")]
        let unmutated = crate::mutation::Unmutated::hold();
        // Through the superblock's encoding, so an open recomputes exactly this layout.
        let regions = superblock::encode_regions(params.regions);
        if (medium.max_len() as u64) < max_size {
            return Err(Error::medium_unsupported(format!(
                "the {} medium reserves {} bytes, less than the maximum pool size {}",
                medium.kind().name(),
                medium.max_len(),
                max_size
            )));
        }
        let layout = Layout::compute_growable(
            medium.len() as u64,
            max_size,
            params.max_threads,
            params.log_bytes_per_thread,
            superblock::decode_regions(regions),
        )?;
        let mut uuid = [0u8; 16];
        rand::Rng::fill(&mut rand::thread_rng(), &mut uuid[..]);
        let sb = Superblock {
            magic: superblock::MAGIC,
            format_version: superblock::FORMAT_VERSION,
            engine_id: params.engine_id,
            uuid,
            pool_size: medium.len() as u64,
            run_generation: 1,
            max_threads: params.max_threads as u32,
            regions,
            log_bytes_per_thread: params.log_bytes_per_thread as u64,
            root_slot_offset: ROOT_SLOT_OFFSET as u64,
            max_size,
            seq: 1,
            checksum: 0,
            _pad2: 0,
            root_offset: 0,
            root_tag: 0,
            open_state: superblock::OPEN,
            unclean_opens: 0,
            dirty_shutdowns_seen: dirty_shutdowns_seen(medium.as_ref()),
        };
        // Everything but the superblock is zero in a new image: empty logs, an empty slab
        // table, an empty root slot. Make that durable before the superblock says "pool".
        medium.persist(ENGINE_AREA_OFFSET, layout.heap_offset - ENGINE_AREA_OFFSET);
        superblock::write_initial(medium.as_ref(), &sb);
        let sb = Superblock { seq: 1, ..sb }.seal();
        Ok(Heap {
            base: medium.base(),
            len: SizeWord::new(medium.len()),
            medium,
            layout,
            superblock: Mutex::new((sb, 0)),
            generation: 1,
            late_size: AtomicU64::new(0),
            header_words_used: AtomicBool::new(true),
            shared: AtomicBool::new(false),
            #[cfg(feature = "mutation")]
            _unmutated: unmutated,
        })
    }

    /// Let mutation scenarios in although the heap stays (see `Pool::forget_as_crash`).
    #[cfg(feature = "mutation")]
    pub(crate) fn release_mutation_gate(&self) {
        self._unmutated.release();
    }

    /// The current superblock, locked. On a pool other processes share, read again
    /// from the image first: another process may have written it since (its root
    /// record, or its open state; the superblock is written by one process at a time:
    /// the one that recovered the pool, the one that made the root, the last to close).
    fn lock_superblock(&self) -> std::sync::MutexGuard<'_, (Superblock, usize)> {
        let mut cur = self.superblock.lock().unwrap_or_else(|e| e.into_inner());
        if self.shared.load(Ordering::Relaxed) {
            // SAFETY: as in `open`: the medium's mapping is valid for `len()` bytes.
            let image = unsafe { std::slice::from_raw_parts(self.base, self.medium.len()) };
            if let Ok(found) = superblock::read_current(image) {
                *cur = found;
            }
        }
        cur
    }

    /// Place the pool's sizes in `region` (shared by the processes that have the pool
    /// open), and, if the pool may grow, take this process's size and the medium's
    /// length from there from now on: the medium maps its whole reservation first
    /// ([`Medium::follow_len`]), so that a growth in any process is usable in all as
    /// soon as its sizes are raised. Every process places them at the same point of
    /// the region's placements (before the allocator's and the engine's). Call it
    /// before the heap is used by another thread. Err(MediumUnsupported) if the pool
    /// may grow and the medium cannot follow another process's growth.
    pub(crate) fn share_sizes(&self, region: &Arc<Region>) -> Result<()> {
        let sizes: PlacedValue<Line<SharedSizes>> = region.place_value_as_found()?;
        if self.layout.max_size <= self.size() as u64 {
            return Ok(());
        }
        let size = NonNull::from(&sizes.size);
        let mapped = NonNull::from(&sizes.mapped);
        let owner: Arc<dyn Send + Sync> = Arc::new(sizes);
        // SAFETY: both words live in the placement `owner` holds (its region stays
        // mapped while a view lives). Every process raises them only in `grow`: the
        // medium's length after the file is that long (`Medium::grow`), the size after
        // the superblock records it; and `follow_len`/`follow` raise them only to this
        // process's own, which its file and superblock have reached.
        unsafe { self.medium.follow_len(mapped, owner.clone()) }?;
        // SAFETY: as above.
        unsafe { self.len.follow(size, owner) }.map_err(|e| Error::io("sharing the pool's size", e))
    }

    /// The pool is shared with other processes, which may write its superblock
    /// ([`Heap::lock_superblock`]).
    pub(crate) fn set_shared(&self) {
        // Relaxed: set at open, before the heap is given to any other thread.
        self.shared.store(true, Ordering::Relaxed);
    }

    /// Open a pool image that another process has open with run generation
    /// `generation` (shared): as [`Heap::open`], running with that generation, which
    /// the superblock must already record (the process that recovered the pool made it
    /// durable before it let others in).
    pub(crate) fn join(medium: Arc<dyn Medium>, generation: u64) -> Result<Heap> {
        let mut heap = Self::open(medium)?;
        let recorded = heap.superblock().run_generation;
        if recorded != generation {
            return Err(Error::invalid_config(format!(
                "the pool's shared state is of run {generation}, the pool records run {recorded}: \
                 it was not opened by the processes that share that state"
            )));
        }
        heap.generation = generation;
        Ok(heap)
    }

    /// Open an existing pool image: validate the superblock and geometry and check the
    /// engine. Writes nothing (see [`Heap::commit_generation`]).
    pub(crate) fn open(medium: Arc<dyn Medium>) -> Result<Heap> {
        #[cfg(feature = "mutation")]
        let unmutated = crate::mutation::Unmutated::hold();
        // SAFETY: the medium guarantees `base()` is valid for `len()` bytes; no other
        // thread uses the image while the pool is being opened.
        let image = unsafe { std::slice::from_raw_parts(medium.base(), medium.len()) };
        let (sb, slot) = superblock::read_current(image)?;
        let file_len = medium.len() as u64;
        // A pool that can grow may find its file longer than its size (a growth
        // interrupted after extending the file); never shorter, and never past the
        // maximum.
        let fits = if sb.max_size > sb.pool_size {
            file_len >= sb.pool_size && file_len <= sb.max_size
        } else {
            file_len == sb.pool_size
        };
        if !fits {
            return Err(Error::SizeMismatch(Box::new(crate::error::SizeMismatch {
                expected: sb.pool_size,
                actual: file_len,
            })));
        }
        let layout = sb.layout()?;
        if sb.root_slot_offset != ROOT_SLOT_OFFSET as u64 {
            return Err(Error::corrupt(format!(
                "root slot offset {:#x} is not where this format keeps it ({ROOT_SLOT_OFFSET:#x})",
                sb.root_slot_offset
            )));
        }
        if sb.run_generation == 0 {
            return Err(Error::corrupt("run generation is zero"));
        }
        // The bump of the run generation is written by `commit_generation`, after the
        // engine's recovery has validated the logs: a pool refused for any reason is
        // never written.
        Ok(Heap {
            base: medium.base(),
            len: SizeWord::new(sb.pool_size as usize),
            medium,
            layout,
            superblock: Mutex::new((sb, slot)),
            generation: sb.run_generation + 1,
            late_size: AtomicU64::new(0),
            header_words_used: AtomicBool::new(true),
            shared: AtomicBool::new(false),
            #[cfg(feature = "mutation")]
            _unmutated: unmutated,
        })
    }

    /// The engine keeps nothing in block header words (neither locks nor allocation
    /// state: it validates objects by the allocation bitmap and never reads a header
    /// word). Slab formatting then does not zero and persist them: that costs 8 bytes of
    /// allocator metadata per block and only protects engines that read header words
    /// as locks. A pool's engine is fixed when it is created, so no engine that reads
    /// them ever opens a pool formatted this way. Called by the engine's `open`, before
    /// recovery and before any other thread has the heap.
    pub(crate) fn set_header_words_unused(&self) {
        // Relaxed: set before the heap is shared with any other thread (the engine's
        // `open`); the hand-over of the `Arc` orders it for them.
        self.header_words_used.store(false, Ordering::Relaxed);
    }

    /// False if the engine declared that it keeps nothing in header words.
    pub(crate) fn header_words_used(&self) -> bool {
        // Relaxed: see `set_header_words_unused`.
        self.header_words_used.load(Ordering::Relaxed)
    }

    /// Make this run's generation durable (the superblock's other copy, then persist).
    /// Called once per open, after recovery and before any transaction: header words
    /// tagged with an older generation read as unlocked from now on. Idempotent.
    ///
    /// The same write marks the pool open, counts the open as unclean if the pool was
    /// open already (the last process to have it did not close it), and records the
    /// platform's NVDIMM unsafe-shutdown count. It goes into both copies (see
    /// [`Heap::write_open_state`]).
    pub(crate) fn commit_generation(&self) {
        let mut cur = self.lock_superblock();
        if cur.0.run_generation == self.generation {
            return;
        }
        let unclean = u32::from(cur.0.open_state == superblock::OPEN);
        let next = Superblock {
            run_generation: self.generation,
            open_state: superblock::OPEN,
            unclean_opens: cur.0.unclean_opens.saturating_add(unclean),
            dirty_shutdowns_seen: dirty_shutdowns_seen(self.medium.as_ref()),
            ..cur.0
        };
        self.write_open_state(&mut cur, next);
    }

    /// Record a clean close. Called when the pool is closed, after the engine's last
    /// write is durable (nothing is left for recovery to repair; an engine may still
    /// re-execute its durable log at the next open). Written into both copies (see
    /// [`Heap::write_open_state`]).
    pub(crate) fn mark_closed(&self) {
        let mut cur = self.lock_superblock();
        if cur.0.open_state == superblock::CLEAN {
            return;
        }
        let next = Superblock {
            open_state: superblock::CLEAN,
            ..cur.0
        };
        self.write_open_state(&mut cur, next);
    }

    /// Make `next`, which changes the open state, durable in both superblock copies:
    /// first in the copy that is not current (the usual update), then, once that is
    /// durable, in the other. Whichever copy is damaged later, the one left tells the
    /// truth about the last open or close, so a clean close is never counted unclean
    /// because the newest copy was lost, and a pool that was open is never read as
    /// closed cleanly from an older copy. At an open the same holds for the run
    /// generation: an older copy that still named the previous run's generation would,
    /// once the newer copy is lost, hand the crashed run's generation out again, and
    /// the header words that run tagged would read as locks held now. (Other updates,
    /// which write one copy, change neither: the older copy agrees on both.)
    ///
    /// A crash between the two writes leaves the newer copy with the new state and the
    /// older with the previous one. Losing the newer copy as well then reads the state
    /// before this update: at a close, "open" (an unclean close counted, on the safe
    /// side); at an open, the clean close before it. In that case no transaction of the
    /// new run had begun (the state is written before the first), so the pool is as
    /// the clean close left it, and the run generation the lost copy recorded was
    /// never used.
    fn write_open_state(&self, cur: &mut (Superblock, usize), next: Superblock) {
        self.write_superblock(cur, next);
        let again = cur.0;
        self.write_superblock(cur, again);
    }

    /// Record the root object (its payload offset and size-and-type tag, as the root
    /// slot holds them) in the superblock, durably. Called once the transaction that
    /// created the root is durable, or at open for a pool whose root slot is set and
    /// not recorded. A root already recorded is never changed.
    pub(crate) fn record_root(&self, offset: u64, tag: u64) {
        // On a pool other processes have open, a superblock write may meet another
        // process's growth, which writes the same copy without this process's lock:
        // the record waits for an open by one process alone (the root is found in its
        // slot meanwhile, which recovery checks as before).
        if self.shared.load(Ordering::Relaxed) {
            return;
        }
        let mut cur = self.lock_superblock();
        if offset == 0 || cur.0.root_record().is_some() {
            return;
        }
        let next = Superblock {
            root_offset: offset,
            root_tag: tag,
            ..cur.0
        };
        self.write_superblock(&mut cur, next);
    }

    /// The pool's current size in bytes.
    #[inline]
    pub(crate) fn size(&self) -> usize {
        // Acquire: pairs with the Release store in `grow`, so a thread that sees the new
        // size also sees the new part of the medium mapped.
        self.len.get()
    }

    /// Number of slabs that exist at the current size.
    pub(crate) fn slabs_present(&self) -> usize {
        self.layout.slabs_at(self.size() as u64)
    }

    /// End of the slabs that exist at the current size.
    pub(crate) fn heap_end(&self) -> usize {
        self.layout.slab_offset(self.slabs_present())
    }

    /// Grow the pool by at least `slabs` slabs (doubling its heap when that is more,
    /// capped by the maximum size) and return the new slabs; `Ok(None)` if the pool is
    /// at its maximum (or cannot hold `slabs` more). See the module doc for the order
    /// of the steps. Errors are the medium's (the file system is full, the medium
    /// cannot grow); the pool is unchanged then.
    ///
    /// `holder`: the thread slot that grows the heap (where the hook points pause).
    pub(crate) fn grow(&self, slabs: usize, holder: u32) -> Result<Option<Range<usize>>> {
        let _ = holder;
        let mut cur = self.lock_superblock();
        let present = self.slabs_present();
        let cap = self.layout.slab_count;
        let want = present.saturating_add(slabs);
        if slabs == 0 || want > cap {
            return Ok(None);
        }
        let target = want.max(present.saturating_mul(2)).min(cap);
        let new_size = self.layout.size_for_slabs(target);
        self.medium.grow(new_size as usize)?;
        crate::mutation::hook!(GROW_FILE_EXTENDED, holder as usize);
        if crate::mutation::active!(GROW_SIZE_LATE) {
            // Wrong on purpose: the superblock is written only when the first block of
            // the new region is published (`write_late_size`).
            self.late_size.store(new_size, Ordering::Relaxed);
        } else {
            let next = Superblock {
                pool_size: new_size,
                ..cur.0
            };
            self.write_superblock(&mut cur, next);
            crate::mutation::hook!(GROW_SIZE_WRITTEN, holder as usize);
        }
        // Release (in `raise`): see `size`. The medium mapped the new part before this
        // store. A shared size only grows: `raise` is a maximum (and the growths of all
        // the processes are serialised by the allocator's growth lock anyway).
        self.len.raise(new_size as usize);
        Ok(Some(present..target))
    }

    /// The pool's size as the durable superblock records it (read again from the image
    /// on a shared pool: another process's growth may have written it).
    pub(crate) fn recorded_size(&self) -> u64 {
        self.lock_superblock().0.pool_size
    }

    /// Raise the pool's size to `size`, which the superblock records (the recoverer of
    /// a process that died growing the heap, after the superblock write).
    pub(crate) fn raise_size(&self, size: u64) {
        debug_assert!(size <= self.recorded_size());
        // Release: see `size` (the medium's length was raised before the superblock
        // was written).
        self.len.raise(size as usize);
    }

    /// Under the `GrowSizeLate` mutation: write the deferred size now if the block at
    /// `offset`, being published as allocated, lies past the durable size.
    pub(crate) fn write_late_size(&self, offset: u64) {
        // Relaxed: test-only mutation path; the superblock lock orders the write.
        if self.late_size.load(Ordering::Relaxed) == 0 {
            return;
        }
        let mut cur = self.lock_superblock();
        if offset < cur.0.pool_size {
            return;
        }
        let size = self.late_size.swap(0, Ordering::Relaxed);
        if size <= cur.0.pool_size {
            return;
        }
        let next = Superblock {
            pool_size: size,
            ..cur.0
        };
        self.write_superblock(&mut cur, next);
    }

    /// Make `next` the durable superblock (written into the copy that is not current,
    /// then persisted) and remember it, under the superblock lock `cur`.
    fn write_superblock(&self, cur: &mut (Superblock, usize), next: Superblock) {
        let slot = superblock::write_next(self.medium.as_ref(), &next, cur.1);
        *cur = (
            Superblock {
                seq: next.seq + 1,
                format_version: superblock::FORMAT_VERSION,
                ..next
            }
            .seal(),
            slot,
        );
    }

    /// The medium the pool lives on.
    pub(crate) fn medium(&self) -> &Arc<dyn Medium> {
        &self.medium
    }
    /// The pool's geometry.
    pub(crate) fn layout(&self) -> &Layout {
        &self.layout
    }
    /// The current superblock.
    pub(crate) fn superblock(&self) -> Superblock {
        self.lock_superblock().0
    }
    /// This run's generation (incremented at every open).
    pub(crate) fn generation(&self) -> u64 {
        self.generation
    }
    /// Start of the image.
    #[inline]
    pub(crate) fn base(&self) -> *mut u8 {
        self.base
    }
    /// True if `off..off+len` lies inside the image.
    #[inline]
    pub(crate) fn in_bounds(&self, off: usize, len: usize) -> bool {
        // (The ordering argument is `SizeWord::covers`'.)
        off.checked_add(len).is_some_and(|end| self.len.covers(end))
    }
    /// Raw pointer to offset `off`.
    ///
    /// # Safety
    /// `off` must be inside the image.
    #[inline]
    pub(crate) unsafe fn ptr(&self, off: usize) -> *mut u8 {
        debug_assert!(off <= self.size());
        // SAFETY: caller guarantees `off` is inside the image.
        unsafe { self.base.add(off) }
    }
    /// The 8-byte word at `off` as an atomic.
    ///
    /// # Panics
    /// If `off` is not 8-aligned or not inside the image (a bug in the engine, never user
    /// input: engines validate user offsets first).
    #[inline]
    pub(crate) fn atomic_u64(&self, off: usize) -> &AtomicU64 {
        assert!(
            off.is_multiple_of(8) && self.in_bounds(off, 8),
            "bad word offset {off:#x}"
        );
        // SAFETY: in bounds and 8-aligned (the base is page aligned); the image lives as
        // long as `self`; words used as atomics are only accessed atomically or while
        // no other thread can access them (recovery, formatting).
        unsafe { &*(self.base.add(off) as *const AtomicU64) }
    }
    /// Copy `len` bytes at `off` out of the image.
    pub(crate) fn read_bytes(&self, off: usize, out: &mut [u8]) {
        assert!(self.in_bounds(off, out.len()));
        // SAFETY: in bounds; the caller reads a region no thread writes concurrently.
        unsafe { std::ptr::copy_nonoverlapping(self.ptr(off), out.as_mut_ptr(), out.len()) }
    }
    /// Copy `data` into the image at `off` (not flushed).
    pub(crate) fn write_bytes(&self, off: usize, data: &[u8]) {
        assert!(self.in_bounds(off, data.len()));
        // SAFETY: in bounds; the caller holds exclusive access to the region (a lock, or
        // recovery before any thread runs).
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), self.ptr(off), data.len()) }
    }
    /// Zero `len` bytes of the image at `off` (not flushed).
    pub(crate) fn write_zeros(&self, off: usize, len: usize) {
        assert!(self.in_bounds(off, len));
        // SAFETY: in bounds; the caller holds exclusive access to the region, as for
        // `write_bytes`.
        unsafe { std::ptr::write_bytes(self.ptr(off), 0, len) }
    }
    /// Write `parts` at `off`, a line boundary, zero the rest of the last line, and
    /// start the lines' write-back ([`Medium::write_lines`]: durable after the next
    /// fence, possibly without passing through the cache). The caller has the lines to
    /// itself.
    #[inline]
    pub(crate) fn write_lines(&self, off: usize, parts: &[&[u8]]) {
        self.medium.write_lines(off, parts)
    }
    /// Flush `off..off+len`.
    #[inline]
    pub(crate) fn flush(&self, off: usize, len: usize) {
        self.medium.flush(off, len)
    }
    /// Fence this thread's flushes.
    #[inline]
    pub(crate) fn fence(&self) {
        self.medium.fence()
    }
    /// True when a fence is a device sync (`msync`, persistence domain `PageCache`): an
    /// engine then defers what it can to fewer fences.
    pub(crate) fn fence_is_device_sync(&self) -> bool {
        self.medium.persistence_domain() == crate::medium::PersistenceDomain::PageCache
    }
    /// Fence this thread's flushes at the end of a commit ([`Medium::commit_fence`]).
    #[inline]
    pub(crate) fn commit_fence(&self) {
        self.medium.commit_fence()
    }
    /// Flush and fence.
    #[inline]
    pub(crate) fn persist(&self, off: usize, len: usize) {
        self.medium.persist(off, len)
    }
}
