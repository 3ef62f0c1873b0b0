//! The read fast path that `Tx::read` inlines for the engines whose read of a live
//! object is its home payload ([`FastReads`]), and how a `Tx` holds it ([`FastPath`],
//! a pointer into the engine thread's [`OwnedFastReads`]).

use crate::heap::alloc::{self, Allocator, SmallBlocks, HEADER};
use crossbeam_utils::CachePadded;

/// The common case of an engine's read, inlined into every `Tx::read`: a live
/// small-class object whose header word says that its home payload is the version this
/// transaction reads. Engines whose read of such an object is its home payload hand one
/// out per transaction attempt (`EngineThread::fast_reads`); every other access goes
/// through the engine's `read`, which handles all cases and all errors.
///
/// Three ways of knowing the object is allocated and its home payload is the version
/// to read:
/// * [`FastReads::live_word`]: the engine keeps the allocation state in the header word
///   itself (a word equal to the engine's "live" value implies the allocation bit is
///   set and, for engines with per-object locks, that the object is unlocked: Pisces,
///   bare), so the read loads one word next to the payload and nothing else;
/// * [`FastReads::bitmap`]: the allocation bit in the slab's bitmap (one more load, on
///   another cache line) and no header-word check (engines that keep nothing there);
/// * [`FastReads::versioned`]: the allocation bit, and a header word that says "home
///   holds the newest version, committed at X" with X at or below the transaction's
///   snapshot (multi-version engines whose versions live in DRAM until a checkpoint
///   writes them home: TimeStone).
///
/// The header-word check is one compare in every mode, with no test of the mode before
/// it: `word - base <= bound` (wrapping), with `bound` 0 for an exact value, the
/// snapshot for a versioned word, and `u64::MAX` (any word) for the bitmap mode. The
/// one value with no slabs ([`FastReads::NONE`]) declines before it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct FastReads {
    blocks: SmallBlocks,
    /// Blocks this path found before ([`FoundBlocks`]): the engine thread's own table,
    /// or [`NOTHING_FOUND`].
    found: *const FoundBlocks,
    /// The header-word value a readable object has at least (`live_word`: exactly).
    base: u64,
    /// How far above `base` the header word may be (`u64::MAX`: any value, the header
    /// word is not checked).
    bound: u64,
    /// Check the allocation bit in the slab's bitmap.
    bitmap: bool,
    /// The path ends at the transaction's first write (`Tx::write` then drops it): the
    /// engine keeps the transaction's writes in private copies, which home does not
    /// show.
    until_write: bool,
}

// SAFETY: it only reads through the allocator's geometry (atomics and immutable
// fields), which is `Sync`; the contract of the constructors keeps it alive. What it
// writes is its found-blocks table, which is `Sync` by its own argument (one thread at
// a time; `NOTHING_FOUND` never written) and outlives it (`OwnedFastReads`).
unsafe impl Send for FastReads {}
// SAFETY: as for `Send`.
unsafe impl Sync for FastReads {}

impl FastReads {
    /// No fast path: every read goes to the engine (engines without one, and a `Tx`
    /// outside a running attempt).
    pub(crate) const NONE: FastReads = FastReads {
        blocks: SmallBlocks::empty(),
        found: &NOTHING_FOUND,
        base: 0,
        bound: 0,
        // The bitmap mode's lookup declines at once (no slabs), without a look at the
        // found blocks' table first.
        bitmap: true,
        until_write: false,
    };

    /// Fast reads of objects whose header word equals `live` (not 0).
    ///
    /// # Safety
    /// `alloc` must stay alive and the heap mapped while the value is used (engines
    /// give it to a `Tx`, which lives inside one attempt of their thread state, which
    /// holds the allocator); a header word equal to `live` must imply, for the whole
    /// attempt, that the block is allocated and that the engine's `read` returns its
    /// home payload.
    pub(crate) unsafe fn live_word(alloc: &Allocator, live: u64) -> FastReads {
        debug_assert_ne!(live, 0);
        FastReads {
            blocks: alloc.small_blocks(),
            found: &NOTHING_FOUND,
            base: live,
            bound: 0,
            bitmap: false,
            until_write: false,
        }
    }

    /// Fast reads of objects whose allocation bit is set (engines that keep nothing in
    /// header words).
    ///
    /// # Safety
    /// As for [`FastReads::live_word`], with "allocation bit set" in place of the
    /// header-word condition.
    pub(crate) unsafe fn bitmap(alloc: &Allocator) -> FastReads {
        FastReads {
            blocks: alloc.small_blocks(),
            found: &NOTHING_FOUND,
            base: 0,
            bound: u64::MAX,
            bitmap: true,
            until_write: false,
        }
    }

    /// Fast reads of objects whose allocation bit is set and whose header word is
    /// `base + X` with `X <= snapshot` (wrapping arithmetic, so a word below `base` or
    /// more than `snapshot` above it declines), until the transaction's first write.
    ///
    /// # Safety
    /// As for [`FastReads::live_word`], with this condition in place of the header-word
    /// one: a block whose bit is set and whose header word passes the check must be
    /// allocated for the whole attempt's snapshot, and its home payload must be the
    /// version the engine's `read` returns at `snapshot`, unchanged while the attempt
    /// runs (until its first write, after which the path is not used).
    pub(crate) unsafe fn versioned(alloc: &Allocator, base: u64, snapshot: u64) -> FastReads {
        debug_assert_ne!(base, 0);
        FastReads {
            blocks: alloc.small_blocks(),
            found: &NOTHING_FOUND,
            base,
            bound: snapshot,
            bitmap: true,
            until_write: true,
        }
    }

    /// The smallest size class whose blocks hold `len` bytes: what [`FastReads::read`]
    /// checks a `len`-byte read's block against (a compile-time constant for a read of
    /// a type).
    #[inline(always)]
    pub(crate) const fn min_class(len: usize) -> u32 {
        alloc::min_class(len)
    }

    /// Whether the path ends at the transaction's first write (or free).
    #[inline(always)]
    pub(crate) fn until_write(&self) -> bool {
        self.until_write
    }

    /// Whether `off` is the payload of an allocated small block of class `min_class` or
    /// larger: the allocation bit alone, whatever the mode (for engines that only
    /// locate objects with this geometry: the bitmap test without the mode's
    /// run-time tests).
    #[inline(always)]
    pub(crate) fn allocated(&self, off: u64, min_class: u32) -> bool {
        // SAFETY: the allocator is alive while `self` is used (constructors).
        unsafe { self.blocks.allocated_header(off, min_class) }.is_some()
    }

    /// The home payload of the object at `off` whose block is of class `min_class` or
    /// larger (`min_class(len)` for a `len`-byte read), or `None`: ask the engine.
    ///
    /// `FIND_AGAIN`: look the offset up in the path's table of blocks found before
    /// ([`FoundBlocks`]) first, and enter it there once found; for objects read again
    /// and again (containers' headers), where a hit skips the geometry lookup. Other
    /// reads leave the table alone: where few reads hit, the lookup and the entry cost
    /// more than the hits save.
    #[inline(always)]
    pub(crate) fn read<const FIND_AGAIN: bool>(
        &self,
        off: u64,
        min_class: u32,
    ) -> Option<*const u8> {
        let hw = if self.bitmap {
            // SAFETY: the allocator is alive while `self` is used (constructors).
            unsafe { self.blocks.allocated_header(off, min_class) }?
        } else if !FIND_AGAIN {
            // SAFETY: as above.
            unsafe { self.blocks.header(off, min_class) }?
        } else {
            // SAFETY: `found` is `NOTHING_FOUND` or the owning engine thread's table,
            // which outlives every path to it (`OwnedFastReads`).
            let found = unsafe { &*self.found };
            let i = FoundBlocks::index(off);
            if found.offsets[i].get() == off && u32::from(found.classes[i].get()) > min_class {
                self.blocks.header_of_found(off)
            } else {
                // SAFETY: as above.
                let (hw, class) = unsafe { self.blocks.header_and_class(off, min_class) }?;
                // (Never `NOTHING_FOUND`: a path to it has no slabs, so the lookup
                // above declined.)
                found.offsets[i].set(off);
                found.classes[i].set(class as u8 + 1);
                hw
            }
        };
        // SAFETY: a block's header word inside the mapped image, 8-aligned, only
        // accessed atomically (`SmallBlocks::header`).
        // Acquire: pairs with the engine's Release that ordered the home contents
        // before a readable value (a Pisces write-back's store, a TimeStone
        // checkpoint's store, bare's writer leaving the gate), so the payload read
        // after it is the home contents that value announces.
        let w = unsafe { &*hw }.load(std::sync::atomic::Ordering::Acquire);
        if w.wrapping_sub(self.base) > self.bound {
            return None;
        }
        // The payload follows the header word inside the block.
        Some((hw as *const u8).wrapping_add(HEADER))
    }
}

/// Payload offsets that a [`FastReads`] path found to be blocks of a small class, with
/// the class: a later read of one skips the geometry lookup (slab table, class, block
/// start by one multiply). Sound because the answer never changes within a run: a
/// small slab keeps its class until the pool is opened again, so a block start of
/// class `c` stays one, and the path is built again at every open. What may change,
/// the allocation state and the version to read, is the header word's, which every
/// read still checks.
///
/// Direct-mapped by a hash of the offset. An entry holds the offset and the class
/// plus one (0: empty, which no read's class test passes, so an empty entry never
/// matches whatever offset a forged pointer names); a read hits when the offset is
/// equal and the class holds its length (`class + 1 > min_class`).
///
/// Written only by the thread that holds the engine thread owning the table (the
/// `Tx` that reads through the path is not `Sync`, and an engine thread is used by
/// one thread at a time); [`NOTHING_FOUND`] is never written.
pub(crate) struct FoundBlocks {
    offsets: [std::cell::Cell<u64>; FOUND],
    classes: [std::cell::Cell<u8>; FOUND],
}

/// Entries of a [`FoundBlocks`] table: room for the first groups of a hash map whose
/// directory is in its header (at most 504, read through the table by its lookups)
/// beside the containers' headers, at 9 bytes an entry.
const FOUND: usize = 512;

/// The table of paths without their own: every entry empty, never written.
static NOTHING_FOUND: FoundBlocks = FoundBlocks::new();

// SAFETY: see the type's docs: a table is written by one thread at a time (the one
// holding its engine thread, handed between threads with the synchronisation that
// hands the engine thread), and `NOTHING_FOUND`, the one shared by every thread, is
// never written (a path pointing to it has no slabs, and only a successful lookup
// writes).
unsafe impl Sync for FoundBlocks {}

impl FoundBlocks {
    const fn new() -> FoundBlocks {
        FoundBlocks {
            offsets: [const { std::cell::Cell::new(0) }; FOUND],
            classes: [const { std::cell::Cell::new(0) }; FOUND],
        }
    }

    /// The entry of `off`: the top bits of a multiplicative hash (payload offsets of
    /// one class differ by multiples of the block size, so their low bits repeat).
    #[inline(always)]
    fn index(off: u64) -> usize {
        (off.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - FOUND.trailing_zeros())) as usize
    }
}

impl std::fmt::Debug for FoundBlocks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FoundBlocks").finish_non_exhaustive()
    }
}

/// A read fast path as a `Tx` holds it: a pointer to a [`FastReads`] that stays put
/// (the engine thread's [`OwnedFastReads`], or [`FastReads::NONE`]), so that beginning a
/// transaction hands out one word instead of copying the whole value into the `Tx`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct FastPath(std::ptr::NonNull<FastReads>);

// SAFETY: a shared pointer to a `FastReads`, which is `Sync`; the pointee outlives
// every `FastPath` made of it (the constructors' contracts).
unsafe impl Send for FastPath {}
// SAFETY: as for `Send`.
unsafe impl Sync for FastPath {}

impl FastPath {
    /// No fast path: every read goes to the engine.
    // SAFETY: a reference to a constant (promoted to a static) is not null. Only read
    // through (`get`), never written.
    pub(crate) const NONE: FastPath = FastPath(unsafe {
        std::ptr::NonNull::new_unchecked(&FastReads::NONE as *const FastReads as *mut FastReads)
    });

    /// The fast path this points to.
    #[inline(always)]
    pub(crate) fn get(&self) -> &FastReads {
        // SAFETY: `NONE` points to a constant; an `OwnedFastReads`' path is used only
        // while its owner lives and does not change it (`OwnedFastReads::path`).
        unsafe { self.0.as_ref() }
    }

    /// The transaction writes (or frees): a path that ends at the first write ends.
    #[inline(always)]
    pub(crate) fn wrote(&mut self) {
        if self.get().until_write() {
            *self = FastPath::NONE;
        }
    }
}

/// An engine thread's read fast path, in an allocation of its own: a [`FastPath`] to it
/// is not a borrow of the engine thread, which the `Tx` holding the path also borrows
/// (mutably), and it does not move when the thread state does.
/// With the path, the [`FoundBlocks`] table its reads fill (kept across
/// [`OwnedFastReads::set`]: an engine thread's paths all come from its pool's one
/// allocator, whose geometry the table records). Both on cache lines of their own:
/// each is written by its thread (the path at every begin of some engines, the table
/// at reads), and two threads' allocations side by side would share a line.
#[derive(Debug)]
pub(crate) struct OwnedFastReads(
    std::ptr::NonNull<CachePadded<FastReads>>,
    Box<CachePadded<FoundBlocks>>,
);

// SAFETY: owns its `FastReads` (which is `Send` and `Sync`), like a `Box`, and its
// table, which moves with it (only the thread holding the engine thread uses either).
unsafe impl Send for OwnedFastReads {}

impl OwnedFastReads {
    pub(crate) fn new(f: FastReads) -> OwnedFastReads {
        let found = Box::new(CachePadded::new(FoundBlocks::new()));
        let f = FastReads {
            found: &**found,
            ..f
        };
        OwnedFastReads(
            std::ptr::NonNull::from(Box::leak(Box::new(CachePadded::new(f)))),
            found,
        )
    }

    /// The path to hand to a `Tx`.
    ///
    /// # Safety
    /// The caller must keep `self` alive and unchanged ([`OwnedFastReads::set`]) while
    /// the path is used: an engine hands it to the `Tx` of one attempt, which borrows
    /// the engine thread that owns `self` for its whole life, and changes it only when
    /// the next attempt begins.
    #[inline(always)]
    pub(crate) unsafe fn path(&self) -> FastPath {
        // SAFETY: the allocation is ours and alive (`new`), changed only by `set`,
        // which the caller's contract keeps apart from the path's use.
        FastPath(std::ptr::NonNull::from(unsafe { &**self.0.as_ref() }))
    }

    /// Replace the fast path (no `FastPath` to it may be in use).
    #[inline(always)]
    pub(crate) fn set(&mut self, f: FastReads) {
        let f = FastReads {
            found: &**self.1,
            ..f
        };
        // SAFETY: the allocation is ours and alive; `&mut self` and the contract of
        // `path` rule out any reader.
        unsafe { **self.0.as_ptr() = f }
    }
}

impl Drop for OwnedFastReads {
    fn drop(&mut self) {
        // SAFETY: made by `Box::leak` in `new`, freed once here.
        drop(unsafe { Box::from_raw(self.0.as_ptr()) });
    }
}

#[cfg(test)]
mod tests {
    //! The table of found blocks ([`FoundBlocks`]) through `Tx::read_again`, on the
    //! engines whose path uses it (header-word mode: pisces and bare).
    use crate::{Config, EngineId, Error, PPtr, Pool};

    fn pools(dir: &tempfile::TempDir) -> Vec<Pool> {
        [EngineId::Pisces, EngineId::Bare]
            .into_iter()
            .map(|e| {
                let path = dir.path().join(format!("{e:?}.pool"));
                Pool::create(path, Config::default().size(16 << 20).engine(e)).unwrap()
            })
            .collect()
    }

    #[test]
    fn a_block_found_again_holds_only_what_its_class_holds() {
        let dir = tempfile::tempdir_in("/dev/shm").unwrap();
        for pool in pools(&dir) {
            let mut h = pool.handle().unwrap();
            let p = h.run(|tx| tx.alloc(7u64)).unwrap();
            let big = PPtr::<[u64; 64]>::from_offset(p.offset());
            let (small, again, large) = h
                .read(|tx| {
                    let small = *tx.read_again(p)?;
                    let again = *tx.read_again(p)?;
                    // The entry names the block's class: a read it does not hold is
                    // refused as before, not served from the entry.
                    Ok((small, again, tx.read_again(big).map(|_| ())))
                })
                .unwrap();
            assert_eq!((small, again), (7, 7));
            assert!(matches!(large, Err(Error::InvalidPointer(_))), "{large:?}");
        }
    }

    /// A block found again is located where the geometry's lookup locates it: the
    /// table's answer (`SmallBlocks::header_of_found`) is the pointer the lookup
    /// without the table gives, not a decline that the engine's read would hide.
    #[test]
    fn a_block_found_again_is_where_the_lookup_finds_it() {
        let dir = tempfile::tempdir_in("/dev/shm").unwrap();
        for pool in pools(&dir) {
            let mut h = pool.handle().unwrap();
            let ps: Vec<PPtr<[u64; 16]>> = h
                .run(|tx| (0..40).map(|i| tx.alloc([i; 16])).collect())
                .unwrap();
            // Dropped, the handle writes its transactions back: the blocks' header
            // words are then the live marker, which the fast path reads.
            drop(h);
            let mut h = pool.handle().unwrap();
            h.read(|tx| {
                let f = tx.fast_reads();
                let class = super::FastReads::min_class(128);
                for p in &ps {
                    let looked_up = f.read::<false>(p.offset(), class);
                    assert!(looked_up.is_some(), "{:?}", pool.engine_id());
                    // The first read enters the block, the second is the table's hit.
                    assert_eq!(f.read::<true>(p.offset(), class), looked_up);
                    assert_eq!(f.read::<true>(p.offset(), class), looked_up);
                }
                Ok(())
            })
            .unwrap();
        }
    }

    #[test]
    fn forged_offsets_never_match_an_empty_entry() {
        let dir = tempfile::tempdir_in("/dev/shm").unwrap();
        for pool in pools(&dir) {
            let mut h = pool.handle().unwrap();
            for off in [0, 1, 8, 24, 4096, u64::MAX - 7, u64::MAX] {
                let r = h.read(|tx| tx.read_again(PPtr::<u8>::from_offset(off)).copied());
                assert!(r.is_err(), "offset {off}: {r:?}");
            }
        }
    }

    #[test]
    fn a_block_found_again_is_read_as_it_is_now() {
        let dir = tempfile::tempdir_in("/dev/shm").unwrap();
        for pool in pools(&dir) {
            let mut h = pool.handle().unwrap();
            let p = h.run(|tx| tx.alloc(1u64)).unwrap();
            assert_eq!(h.read(|tx| Ok(*tx.read_again(p)?)).unwrap(), 1);
            h.run(|tx| {
                *tx.write(p)? = 2;
                Ok(())
            })
            .unwrap();
            assert_eq!(h.read(|tx| Ok(*tx.read_again(p)?)).unwrap(), 2);
            h.run(|tx| tx.free(p)).unwrap();
            // Dropped, the handle writes its transactions back (the free is published
            // in the header word); the next handle takes the same thread state, whose
            // table has `p`.
            drop(h);
            let mut h = pool.handle().unwrap();
            let r = h.read(|tx| tx.read_again(p).copied());
            assert!(r.is_err(), "freed ({:?}): {r:?}", pool.engine_id());
        }
    }
}
