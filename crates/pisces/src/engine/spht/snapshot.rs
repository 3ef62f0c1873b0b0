//! The working snapshot: the volatile image transactions read and write.
//!
//! SPHT runs transactions on a copy-on-write mapping of the persistent heap (the TE
//! process maps it `MAP_PRIVATE`); the shared mapping is the durable heap that only the
//! replayer writes. Here:
//!
//! * **Pool file** (the DRAM, DAX and file media, which expose their file through
//!   [`crate::medium::Medium::file`]): a `MAP_PRIVATE` mapping of the file, made at open
//!   right after recovery. **DRAM cost: the pages transactions write in this run** (each
//!   copied on its first write, kept until the pool closes — up to one pool size).
//!   Pages nobody wrote still show the file, which the replayer changes through the
//!   shared mapping; that is sound because the replayer writes only object words that
//!   a transaction wrote into the snapshot first (its write-back precedes its log
//!   record), so their pages were already copied. The allocator's own writes to the
//!   durable image (bitmaps, slab table, run headers) land in such shared pages too;
//!   transactions never read those words (only object payloads).
//! * **No file** (the crash simulator, anonymous DRAM, `pisces check`'s private view):
//!   a private anonymous mapping holding a copy of the whole image. **DRAM cost: one
//!   pool size**, allocated at open. A closed pool's mapping of at most
//!   [`REUSE_MAX_BYTES`] is kept for the next open of a pool of that size (at most
//!   [`REUSE_KEPT`] of them per process): the copy then lands in pages that are already
//!   mapped, instead of a new mapping that faults in every page — what a process that
//!   opens many small pools in a row (the crash simulator's recoveries) spends most of
//!   its time on otherwise.
//! * Either way the snapshot starts equal to the durable image, transactions'
//!   write-backs go only here, and the durable image catches up through the replayer.
//!   Only object payloads (the heap and the root slot) of the snapshot are meaningful.
//! * Words are accessed as `AtomicU64` with Relaxed ordering: readers copy objects that a
//!   committer may be writing (a seqlock read, validated by the stripe version), which
//!   would be a data race with plain loads and stores. Payloads are 8-aligned and their
//!   lengths multiples of 8.

use crate::heap::Heap;
use memmap2::{MmapMut, MmapOptions};
use std::sync::atomic::AtomicU64;
use std::sync::Mutex;

/// Largest anonymous snapshot kept for reuse after its pool closes.
pub(super) const REUSE_MAX_BYTES: usize = 64 << 20;
/// Most anonymous snapshots kept for reuse.
pub(super) const REUSE_KEPT: usize = 2;

/// Anonymous snapshot mappings of closed pools, for reuse (module docs).
static KEPT: Mutex<Vec<MmapMut>> = Mutex::new(Vec::new());

/// The private image.
pub(crate) struct Snapshot {
    base: *mut u8,
    len: usize,
    /// True for a copy-on-write mapping of the pool file.
    #[cfg_attr(not(test), allow(dead_code))]
    pub copy_on_write: bool,
    /// `None` only while being dropped.
    map: Option<MmapMut>,
}

impl Drop for Snapshot {
    fn drop(&mut self) {
        let Some(map) = self.map.take() else { return };
        if self.copy_on_write || map.len() > REUSE_MAX_BYTES {
            return;
        }
        let mut kept = KEPT.lock().unwrap_or_else(|e| e.into_inner());
        if kept.len() == REUSE_KEPT {
            kept.remove(0);
        }
        kept.push(map);
    }
}

// SAFETY: the mapping is owned by the value; all concurrent access goes through atomics.
unsafe impl Send for Snapshot {}
// SAFETY: as above.
unsafe impl Sync for Snapshot {}

impl Snapshot {
    /// The working snapshot of `heap`'s image (nobody may write the image during the
    /// call: the pool is being opened).
    pub(crate) fn of(heap: &Heap) -> std::io::Result<Snapshot> {
        let len = heap.medium().len();
        let (mut map, cow) = match heap.medium().file() {
            // SAFETY: the pool file stays open and locked by the medium for as long as
            // the pool lives; a private mapping never writes it.
            Some(f) => (unsafe { MmapOptions::new().len(len).map_copy(f)? }, true),
            None => {
                let reused = {
                    let mut kept = KEPT.lock().unwrap_or_else(|e| e.into_inner());
                    kept.iter()
                        .position(|m| m.len() == len)
                        .map(|i| kept.swap_remove(i))
                };
                let mut map = match reused {
                    Some(m) => m,
                    None => MmapMut::map_anon(len)?,
                };
                // SAFETY: the image is `len` bytes and nobody writes it now; the
                // anonymous map has `len` bytes.
                unsafe { std::ptr::copy_nonoverlapping(heap.base(), map.as_mut_ptr(), len) };
                (map, false)
            }
        };
        Ok(Snapshot {
            base: map.as_mut_ptr(),
            len,
            copy_on_write: cow,
            map: Some(map),
        })
    }

    /// The word at `off` (8-aligned, inside the image; engine-validated offsets only).
    #[inline]
    pub(crate) fn word(&self, off: u64) -> &AtomicU64 {
        let off = off as usize;
        assert!(
            off.is_multiple_of(8) && off + 8 <= self.len,
            "bad snapshot offset {off:#x}"
        );
        // SAFETY: in bounds, aligned (the map is page aligned), lives as long as self.
        unsafe { &*(self.base.add(off) as *const AtomicU64) }
    }

    /// The `n` words from `off`, without a bounds check: a read's or a write's copy of
    /// an object the engine located.
    ///
    /// # Safety
    /// `off` is 8-aligned and the `n` words from it lie inside the image: a prefix of the
    /// payload of an object the allocator located (every object lies inside the pool's
    /// image, which is the snapshot's length: the engine refuses growth).
    #[inline]
    pub(crate) unsafe fn words_unchecked(&self, off: u64, n: usize) -> &[AtomicU64] {
        debug_assert!(
            off.is_multiple_of(8) && n <= (self.len.saturating_sub(off as usize)) / 8,
            "bad snapshot range {off:#x}+{n} words"
        );
        // SAFETY: in bounds and aligned (caller; the map is page aligned), lives as long
        // as self; the words are only accessed atomically.
        unsafe { std::slice::from_raw_parts(self.base.add(off as usize) as *const AtomicU64, n) }
    }
}
