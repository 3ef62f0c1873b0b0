//! The read fast path that `Tx::read` inlines for the engines whose read of a live
//! object is its home payload ([`FastReads`]), and how a `Tx` holds it ([`FastPath`],
//! a pointer into the engine thread's [`OwnedFastReads`]).

use crate::heap::alloc::{self, Allocator, SmallBlocks, HEADER};

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
// fields), which is `Sync`; the contract of the constructors keeps it alive.
unsafe impl Send for FastReads {}
// SAFETY: as for `Send`.
unsafe impl Sync for FastReads {}

impl FastReads {
    /// No fast path: every read goes to the engine (engines without one, and a `Tx`
    /// outside a running attempt).
    pub(crate) const NONE: FastReads = FastReads {
        blocks: SmallBlocks::empty(),
        base: 0,
        bound: 0,
        bitmap: false,
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
    #[inline(always)]
    pub(crate) fn read(&self, off: u64, min_class: u32) -> Option<*const u8> {
        let hw = if self.bitmap {
            // SAFETY: the allocator is alive while `self` is used (constructors).
            unsafe { self.blocks.allocated_header(off, min_class) }?
        } else {
            // SAFETY: as above.
            unsafe { self.blocks.header(off, min_class) }?
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
#[derive(Debug)]
pub(crate) struct OwnedFastReads(std::ptr::NonNull<FastReads>);

// SAFETY: owns its `FastReads` (which is `Send` and `Sync`), like a `Box`.
unsafe impl Send for OwnedFastReads {}

impl OwnedFastReads {
    pub(crate) fn new(f: FastReads) -> OwnedFastReads {
        OwnedFastReads(std::ptr::NonNull::from(Box::leak(Box::new(f))))
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
        FastPath(self.0)
    }

    /// Replace the fast path (no `FastPath` to it may be in use).
    #[inline(always)]
    pub(crate) fn set(&mut self, f: FastReads) {
        // SAFETY: the allocation is ours and alive; `&mut self` and the contract of
        // `path` rule out any reader.
        unsafe { *self.0.as_ptr() = f }
    }
}

impl Drop for OwnedFastReads {
    fn drop(&mut self) {
        // SAFETY: made by `Box::leak` in `new`, freed once here.
        drop(unsafe { Box::from_raw(self.0.as_ptr()) });
    }
}
