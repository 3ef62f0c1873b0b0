//! Pool geometry: where each region of a pool lives.
//!
//! ```text
//! 0            superblock copy A (4 KiB)   -- double-buffered: the valid copy with the
//! 4096         superblock copy B (4 KiB)      higher sequence number is current
//! 8192         engine area (>= 4 KiB)       -- owned by the engine (watermark, root slot, ...)
//! logs_offset  log areas: max_threads x logs_per_thread x log_bytes_per_thread
//! slab_table   one u32 per slab (4 KiB aligned)
//! heap         slabs of SLAB_SIZE bytes (SLAB_SIZE aligned)
//! ```
//!
//! The geometry is a pure function of (maximum pool size, max_threads, log bytes per
//! thread, the engine's [`Regions`]), all recorded in the superblock, so an opened pool
//! recomputes it and checks that it agrees. The slab table has one entry for every slab
//! the pool can have at its maximum size ([`Layout::slab_count`]); at its current size
//! only the first [`Layout::slabs_at`]`(size)` of them exist. Growing a pool adds slabs
//! at the end of the heap and moves nothing. A pool that cannot grow has maximum size =
//! size, and every slab exists.

use crate::{Error, Result};

/// The persistent regions an engine needs in a pool of our format, fixed at creation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Regions {
    /// Log regions per thread slot, each the pool's log bytes per thread (0..=8).
    pub logs_per_thread: usize,
    /// Bytes of the engine-wide area (rounded up to 4 KiB pages; at least one page,
    /// which holds the recycle watermark and the root slot).
    pub engine_area_bytes: usize,
}

impl Default for Regions {
    fn default() -> Self {
        Regions {
            logs_per_thread: 1,
            engine_area_bytes: 4096,
        }
    }
}

/// Size of one superblock copy.
pub const SUPERBLOCK_SIZE: usize = 4096;
/// Smallest engine area (one page: the watermark and the root slot).
pub const ENGINE_AREA_SIZE: usize = 4096;
/// Largest engine area.
pub const MAX_ENGINE_AREA: usize = 64 << 20;
/// Most log regions per thread slot.
pub const MAX_LOGS_PER_THREAD: usize = 8;
/// Offset of the engine area.
pub const ENGINE_AREA_OFFSET: usize = 2 * SUPERBLOCK_SIZE;
/// Offset of the first log area when the engine area has its minimum size.
pub const LOGS_OFFSET: usize = ENGINE_AREA_OFFSET + ENGINE_AREA_SIZE;
/// Size of one slab of the heap.
pub const SLAB_SIZE: usize = 64 * 1024;
/// Page granularity used for alignment of regions.
pub const PAGE: usize = 4096;
/// Smallest log area per thread.
pub const MIN_LOG_BYTES: usize = 16 * 1024;
/// Most threads a pool can be configured for.
pub const MAX_THREADS: usize = 1024;
/// Smallest pool: the fixed areas, one small log and a few slabs.
pub const MIN_POOL_SIZE: u64 = (LOGS_OFFSET + MIN_LOG_BYTES + PAGE + 4 * SLAB_SIZE) as u64;
// The medium's file factory refuses smaller files by its own copy of this number.
const _: () = assert!(MIN_POOL_SIZE == crate::medium::open::MIN_POOL_FILE_SIZE);

/// Offsets and sizes of the regions of one pool.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    /// Size of the pool when the layout was computed (the heap's current size is
    /// `Heap::size`).
    pub pool_size: u64,
    /// Most bytes the pool can grow to (`pool_size` if it cannot grow).
    pub max_size: u64,
    /// Number of thread slots (one log area each).
    pub max_threads: usize,
    /// Bytes of one log region.
    pub log_bytes_per_thread: usize,
    /// Log regions per thread slot.
    pub logs_per_thread: usize,
    /// Bytes of the engine area.
    pub engine_area_size: usize,
    /// Offset of the first log region.
    pub logs_offset: usize,
    /// Offset of the slab table.
    pub slab_table_offset: usize,
    /// Offset of the first slab.
    pub heap_offset: usize,
    /// Number of slabs of the heap at the maximum size (entries of the slab table).
    pub slab_count: usize,
}

fn align_up(x: usize, a: usize) -> usize {
    x.div_ceil(a) * a
}

impl Layout {
    /// Compute the layout of a pool, or say why these parameters cannot make one.
    #[cfg_attr(not(feature = "tools"), allow(dead_code))] // read by the tools only
    pub fn compute(
        pool_size: u64,
        max_threads: usize,
        log_bytes_per_thread: usize,
        regions: Regions,
    ) -> Result<Layout> {
        Self::compute_growable(
            pool_size,
            pool_size,
            max_threads,
            log_bytes_per_thread,
            regions,
        )
    }

    /// The layout of a pool of `pool_size` bytes that can grow to `max_size`: the
    /// geometry of a `max_size` pool, of which the first `slabs_at(pool_size)` slabs
    /// exist (at least two).
    pub fn compute_growable(
        pool_size: u64,
        max_size: u64,
        max_threads: usize,
        log_bytes_per_thread: usize,
        regions: Regions,
    ) -> Result<Layout> {
        if max_size < pool_size {
            return Err(Error::invalid_config(format!(
                "maximum size {max_size} is below the pool size {pool_size}"
            )));
        }
        let Regions {
            logs_per_thread,
            engine_area_bytes,
        } = regions;
        if logs_per_thread > MAX_LOGS_PER_THREAD {
            return Err(Error::invalid_config(format!(
                "an engine may ask for at most {MAX_LOGS_PER_THREAD} log regions per thread, not {logs_per_thread}"
            )));
        }
        if engine_area_bytes > MAX_ENGINE_AREA {
            return Err(Error::invalid_config(format!(
                "an engine area of {engine_area_bytes} bytes is larger than {MAX_ENGINE_AREA}"
            )));
        }
        let engine_area_size = align_up(engine_area_bytes.max(ENGINE_AREA_SIZE), PAGE);
        let logs_offset = ENGINE_AREA_OFFSET + engine_area_size;
        if max_threads == 0 || max_threads > MAX_THREADS {
            return Err(Error::invalid_config(format!(
                "max_threads must be 1..={MAX_THREADS}, got {max_threads}"
            )));
        }
        if log_bytes_per_thread < MIN_LOG_BYTES || !log_bytes_per_thread.is_multiple_of(PAGE) {
            return Err(Error::invalid_config(format!(
                "log_bytes_per_thread must be a multiple of {PAGE} and at least {MIN_LOG_BYTES}, got {log_bytes_per_thread}"
            )));
        }
        let size = usize::try_from(max_size).map_err(|_| {
            Error::invalid_config(format!("pool size {max_size} does not fit in memory"))
        })?;
        let logs_end = max_threads
            .checked_mul(log_bytes_per_thread)
            .and_then(|l| l.checked_mul(logs_per_thread))
            .and_then(|l| l.checked_add(logs_offset))
            .ok_or_else(|| Error::invalid_config("log areas overflow"))?;
        let slab_table_offset = align_up(logs_end, PAGE);
        // Each slab costs SLAB_SIZE bytes plus 4 bytes of table; solve for the count.
        let avail = size.saturating_sub(slab_table_offset);
        let mut slab_count = avail / (SLAB_SIZE + 4);
        loop {
            let heap_offset = align_up(slab_table_offset + 4 * slab_count, SLAB_SIZE);
            if slab_count == 0 || heap_offset + slab_count * SLAB_SIZE <= size {
                break;
            }
            slab_count -= 1;
        }
        if slab_count < 2 {
            return Err(Error::invalid_config(format!(
                "pool size {pool_size} leaves no room for a heap after {max_threads} logs of {log_bytes_per_thread} bytes"
            )));
        }
        let heap_offset = align_up(slab_table_offset + 4 * slab_count, SLAB_SIZE);
        let present = (pool_size.saturating_sub(heap_offset as u64) / SLAB_SIZE as u64)
            .min(slab_count as u64);
        if present < 2 {
            return Err(Error::invalid_config(format!(
                "pool size {pool_size} leaves no room for a heap after {max_threads} logs of {log_bytes_per_thread} bytes and a slab table for a maximum size of {max_size} bytes"
            )));
        }
        Ok(Layout {
            pool_size,
            max_size,
            max_threads,
            log_bytes_per_thread,
            logs_per_thread,
            engine_area_size,
            logs_offset,
            slab_table_offset,
            heap_offset,
            slab_count,
        })
    }

    /// Offset of thread slot `slot`'s (first) log region.
    pub fn log_offset(&self, slot: usize) -> usize {
        self.log_region(slot, 0)
    }

    /// Offset of log region `i` of thread slot `slot`.
    pub fn log_region(&self, slot: usize, i: usize) -> usize {
        debug_assert!(slot < self.max_threads && i < self.logs_per_thread);
        self.logs_offset + (slot * self.logs_per_thread + i) * self.log_bytes_per_thread
    }

    /// Offset of slab `i`.
    pub fn slab_offset(&self, i: usize) -> usize {
        self.heap_offset + i * SLAB_SIZE
    }

    /// End of the heap at the maximum size (one past the last slab byte).
    pub fn heap_end(&self) -> usize {
        self.heap_offset + self.slab_count * SLAB_SIZE
    }

    /// Number of slabs that exist in a pool of `size` bytes.
    pub fn slabs_at(&self, size: u64) -> usize {
        ((size.saturating_sub(self.heap_offset as u64) / SLAB_SIZE as u64) as usize)
            .min(self.slab_count)
    }

    /// Pool size whose heap has exactly `slabs` slabs (the end of the last one).
    pub fn size_for_slabs(&self, slabs: usize) -> u64 {
        (self.heap_offset + slabs.min(self.slab_count) * SLAB_SIZE) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regions_are_ordered_aligned_and_inside_the_pool() {
        for &(size, threads, log) in &[
            (MIN_POOL_SIZE, 1, MIN_LOG_BYTES),
            (64 << 20, 8, 1 << 20),
            (1 << 30, 64, 4 << 20),
            ((64 << 20) + 12345, 3, 64 << 10),
        ] {
            let l = Layout::compute(size, threads, log, Regions::default()).unwrap();
            assert!(l.log_offset(threads - 1) + log <= l.slab_table_offset);
            assert!(l.slab_table_offset + 4 * l.slab_count <= l.heap_offset);
            assert_eq!(l.heap_offset % SLAB_SIZE, 0);
            assert!(l.heap_end() as u64 <= size);
            assert!(l.slab_count >= 2);
        }
    }

    #[test]
    fn a_growable_layout_is_the_maximum_one_with_fewer_slabs() {
        let max = Layout::compute(64 << 20, 2, MIN_LOG_BYTES, Regions::default()).unwrap();
        let g = Layout::compute_growable(1 << 20, 64 << 20, 2, MIN_LOG_BYTES, Regions::default())
            .unwrap();
        assert_eq!(g.heap_offset, max.heap_offset);
        assert_eq!(g.slab_count, max.slab_count);
        assert_eq!(g.slabs_at(1 << 20), ((1 << 20) - g.heap_offset) / SLAB_SIZE);
        assert_eq!(g.slabs_at(64 << 20), max.slab_count);
        assert_eq!(g.slabs_at(g.size_for_slabs(5)), 5);
        // A maximum so large that its slab table leaves no two slabs at the size.
        assert!(
            Layout::compute_growable(1 << 20, 1 << 40, 2, MIN_LOG_BYTES, Regions::default())
                .is_err()
        );
        assert!(
            Layout::compute_growable(2 << 20, 1 << 20, 2, MIN_LOG_BYTES, Regions::default())
                .is_err()
        );
    }

    #[test]
    fn bad_parameters_are_errors() {
        assert!(Layout::compute(1 << 20, 0, MIN_LOG_BYTES, Regions::default()).is_err());
        assert!(Layout::compute(1 << 20, 1, 100, Regions::default()).is_err());
        assert!(Layout::compute(1 << 20, 64, 1 << 20, Regions::default()).is_err());
        assert!(Layout::compute(4096, 1, MIN_LOG_BYTES, Regions::default()).is_err());
    }
}
