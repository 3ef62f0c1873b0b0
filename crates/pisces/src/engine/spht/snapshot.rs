//! The working snapshot: the volatile image transactions read and write.
//!
//! SPHT runs transactions on a copy-on-write mapping of the persistent heap (the TE
//! process maps it `MAP_PRIVATE`); the shared mapping is the durable heap that only the
//! replayer writes. Here:
//!
//! * **Decision.** The engine sees its pool through [`crate::medium::Medium`], which
//!   exposes a mapped image and no file (the crash simulator and DRAM views have none).
//!   The working snapshot is therefore a private anonymous DRAM mapping holding a copy
//!   of the whole image, taken at open right after recovery. **DRAM cost: one pool
//!   size** (an eager copy, where `MAP_PRIVATE` would cost only the pages transactions
//!   write). Same semantics as the paper: the snapshot starts equal to the durable
//!   image, transactions' write-backs go only here, and the durable image catches up
//!   through the replayer.
//! * Only object payloads (the heap and the root slot) of the snapshot are meaningful;
//!   the allocator's bitmaps and the logs are used only in the durable image.
//! * Words are accessed as `AtomicU64` with Relaxed ordering: readers copy objects that a
//!   committer may be writing (a seqlock read, validated by the stripe version), which
//!   would be a data race with plain loads and stores. Payloads are 8-aligned and their
//!   lengths multiples of 8.

use memmap2::MmapMut;
use std::sync::atomic::AtomicU64;

/// The private DRAM image.
pub struct Snapshot {
    base: *mut u8,
    len: usize,
    _map: MmapMut,
}

// SAFETY: the mapping is owned by the value; all concurrent access goes through atomics.
unsafe impl Send for Snapshot {}
// SAFETY: as above.
unsafe impl Sync for Snapshot {}

impl Snapshot {
    /// A copy of `len` bytes at `src`.
    ///
    /// # Safety
    /// `src` must be valid for reads of `len` bytes that nobody writes during the call.
    pub unsafe fn copy_of(src: *const u8, len: usize) -> std::io::Result<Snapshot> {
        let mut map = MmapMut::map_anon(len)?;
        // SAFETY: caller's contract; the anonymous map has `len` bytes.
        unsafe { std::ptr::copy_nonoverlapping(src, map.as_mut_ptr(), len) };
        Ok(Snapshot {
            base: map.as_mut_ptr(),
            len,
            _map: map,
        })
    }

    /// The word at `off` (8-aligned, inside the image; engine-validated offsets only).
    #[inline]
    pub fn word(&self, off: u64) -> &AtomicU64 {
        let off = off as usize;
        assert!(off.is_multiple_of(8) && off + 8 <= self.len, "bad snapshot offset {off:#x}");
        // SAFETY: in bounds, aligned (the map is page aligned), lives as long as self.
        unsafe { &*(self.base.add(off) as *const AtomicU64) }
    }
}
