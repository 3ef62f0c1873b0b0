//! The read fast path that `Tx::read` inlines for the engines whose read of a live
//! object is its home payload ([`FastReads`]).

use crate::heap::alloc::{Allocator, SmallBlocks, HEADER};

/// The common case of an engine's read, inlined into every `Tx::read`: a live
/// small-class object whose header word says that its home payload is the version this
/// transaction reads. Engines whose read of such an object is its home payload hand one
/// out per transaction attempt (`EngineThread::fast_reads`); every other access goes
/// through the engine's `read`, which handles all cases and all errors.
///
/// Two ways of knowing the object is allocated:
/// * [`FastReads::live_word`]: the engine keeps the allocation state in the header word
///   itself (a word equal to the engine's "live" value implies the allocation bit is
///   set and, for engines with per-object locks, that the object is unlocked: Pisces,
///   bare), so the read loads one word next to the payload and nothing else;
/// * [`FastReads::bitmap`]: the allocation bit in the slab's bitmap (one more load, on
///   another cache line) and no header-word check (engines that keep nothing there).
#[derive(Clone, Copy, Debug)]
pub(crate) struct FastReads {
    blocks: SmallBlocks,
    /// The header-word value of a live object whose home is current; 0: check the
    /// allocation bitmap instead and ignore the header word.
    live: u64,
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
        live: 0,
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
            live,
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
            live: 0,
        }
    }

    /// The home payload of the object at `off` whose block is of class `min_class` or
    /// larger (`min_class(len)` for a `len`-byte read), or `None`: ask the engine.
    #[inline(always)]
    pub(crate) fn read(&self, off: u64, min_class: u32) -> Option<*const u8> {
        let hw = if self.live != 0 {
            // SAFETY: the allocator is alive while `self` is used (constructors).
            let hw = unsafe { self.blocks.header(off, min_class) }?;
            // SAFETY: a block's header word inside the mapped image, 8-aligned, only
            // accessed atomically (`SmallBlocks::header`).
            // Acquire: pairs with the engine's Release that ordered the home contents
            // before the live value (Pisces: the store after a write-back; bare: the
            // writer's leaving the gate), as the engine's own reads of the word.
            if unsafe { &*hw }.load(std::sync::atomic::Ordering::Acquire) != self.live {
                return None;
            }
            hw
        } else {
            // SAFETY: as above (`NONE` has no slabs: every offset misses).
            unsafe { self.blocks.allocated_header(off, min_class) }?
        };
        // The payload follows the header word inside the block.
        Some((hw as *const u8).wrapping_add(HEADER))
    }
}
