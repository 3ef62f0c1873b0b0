//! Lazy home sync for the redo-log engines on the file medium.
//!
//! Where the persist point is a device sync (`msync`, persistence domain `PageCache`:
//! [`Heap::fence_is_device_sync`]), a transaction whose redo record is durable is
//! durable: recovery replays the record. Its home writes need to become durable only
//! before the log drops the record. An engine on this medium stores home without
//! flushing or fencing, keeps the ranges it wrote here, and holds the recycle watermark
//! ([`super::watermark`]) below the records' persistTS until [`UnsyncedHome::sync`] has
//! made the ranges durable with one fence. The engine calls it when its log needs the
//! space, when another thread needs log space (every slot's ranges, not only its own),
//! and when the thread or the pool closes.
//!
//! Why it is safe: a crash before the sync finds every record whose home writes may be
//! missing or torn still in the log, above the durable watermark, and recovery replays
//! it (redo records are idempotent and replayed in persistTS order, so a later
//! record's home write, synced or not, is replayed after it too). The allocator's
//! persistent words that a commit publishes go with its ranges: they are replayed from
//! the same records.
//!
//! Why: a committed update then costs one device sync (its record) instead of two, and
//! a page of home data written by many transactions reaches the device once per log
//! cycle instead of once per commit. The cost is a larger sync when the log fills.
//!
//! What an engine must keep: the watermark bound of a slot covers the least persistTS
//! among the records of its ranges, published before the slot stops showing the
//! commit as in flight, and cleared only by the sync that made those ranges durable.

use crate::heap::Heap;
use crate::region::InRegion;

crate::mutation::point! {
    /// Lazy home sync lets the log drop records whose home writes it did not make
    /// durable (the sync neither flushes nor fences).
    pub(crate) static HOME_SYNC_SKIPPED = "home-sync-skipped";
}

/// The most home ranges a slot keeps between syncs. When they are all in use, the next
/// range first makes them durable (one fence) without ending the sync period: the
/// records they belong to still wait for [`UnsyncedRanges::sync`], which then has no
/// range left to fence for. Adjacent ranges are kept as one.
pub(crate) const UNSYNCED_RANGES: usize = 1024;

/// The counts of a slot's unsynced home ranges, beside the ranges' array (both may live
/// in a [`crate::region::Region`]).
#[repr(C)]
#[derive(Debug, Default)]
pub(crate) struct UnsyncedState {
    /// Ranges in use.
    len: u64,
    /// The highest log sequence number among the transactions whose ranges are here.
    seq: u64,
    /// 1 if something was written back since the last sync: a range, or a transaction
    /// that wrote none (one whose copies equal home logs no entry and writes nothing
    /// home).
    pending: u64,
}

// SAFETY: integers; zero is "nothing unsynced"; `repr(C)`.
unsafe impl InRegion for UnsyncedState {}

/// Home ranges written by committed transactions and not yet made durable: `(offset,
/// len)` of each, in the order written, in an array of [`UNSYNCED_RANGES`] that
/// belongs to the holder of this view.
pub(crate) struct UnsyncedRanges<'a> {
    ranges: &'a mut [(u64, u64)],
    st: &'a mut UnsyncedState,
}

impl<'a> UnsyncedRanges<'a> {
    /// The ranges in `ranges` (at least one entry) counted by `st`.
    pub(crate) fn new(ranges: &'a mut [(u64, u64)], st: &'a mut UnsyncedState) -> Self {
        // (A count out of range would make an index panic, never reach outside
        // `ranges`: checked in debug builds only.)
        debug_assert!(!ranges.is_empty() && st.len as usize <= ranges.len());
        UnsyncedRanges { ranges, st }
    }

    /// A range of home (or allocator metadata) a committed transaction wrote.
    #[inline]
    pub(crate) fn push(&mut self, heap: &Heap, off: usize, len: usize) {
        self.st.pending = 1;
        let (off, len) = (off as u64, len as u64);
        let n = self.st.len as usize;
        if let Some(last) = n.checked_sub(1).map(|i| &mut self.ranges[i]) {
            if off <= last.0 + last.1 && off + len >= last.0 {
                let end = (last.0 + last.1).max(off + len);
                last.0 = last.0.min(off);
                last.1 = end - last.0;
                return;
            }
        }
        if n == self.ranges.len() {
            self.make_durable(heap);
        }
        let n = self.st.len as usize;
        self.ranges[n] = (off, len);
        self.st.len += 1;
    }

    /// The ranges pushed so far belong to transactions up to log sequence number `seq`
    /// (those transactions were written back, whether they pushed a range or not).
    #[inline]
    pub(crate) fn wrote_up_to(&mut self, seq: u64) {
        self.st.seq = self.st.seq.max(seq);
        self.st.pending = 1;
    }

    /// Something written back may not be durable and is not listed here (a holder of
    /// the ranges died in a sync, after it dropped them): the next [`sync`] fences
    /// and reports the transactions written back so far, once the caller has flushed
    /// what the lost ranges covered.
    ///
    /// [`sync`]: UnsyncedRanges::sync
    pub(crate) fn assume_pending(&mut self) {
        self.st.pending = 1;
    }

    /// Flush every range in use and fence; the ranges are then free again.
    #[cold]
    fn make_durable(&mut self, heap: &Heap) {
        let n = std::mem::take(&mut self.st.len) as usize;
        if n == 0 || crate::mutation::active!(HOME_SYNC_SKIPPED) {
            return;
        }
        for &(off, len) in &self.ranges[..n] {
            heap.flush(off as usize, len as usize);
        }
        heap.fence();
    }

    /// Make every waiting range durable: flush each, then one fence (one `msync` of
    /// their pages). Returns the highest log sequence number of the transactions
    /// written back since the last sync, or `None` if none was. The caller then lets
    /// the log drop those records and clears its watermark bound — also when they
    /// wrote no range (no fence then): their bound would otherwise hold the watermark,
    /// and with it the log, until a later transaction wrote something.
    pub(crate) fn sync(&mut self, heap: &Heap) -> Option<u64> {
        if std::mem::take(&mut self.st.pending) == 0 {
            return None;
        }
        self.make_durable(heap);
        Some(self.st.seq)
    }
}

/// [`UnsyncedRanges`] with an array of its own, in process memory.
#[derive(Debug)]
pub(crate) struct UnsyncedHome {
    ranges: Box<[(u64, u64)]>,
    st: UnsyncedState,
}

impl Default for UnsyncedHome {
    fn default() -> Self {
        UnsyncedHome {
            ranges: vec![(0, 0); UNSYNCED_RANGES].into_boxed_slice(),
            st: UnsyncedState::default(),
        }
    }
}

impl UnsyncedHome {
    /// The ranges, to push to or sync.
    #[inline]
    pub(crate) fn ranges(&mut self) -> UnsyncedRanges<'_> {
        UnsyncedRanges::new(&mut self.ranges, &mut self.st)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Adjacent and overlapping ranges are kept as one; a full array is made durable
    /// and emptied without ending the sync period, whose sequence number the next
    /// sync still returns.
    #[test]
    fn ranges_merge_fill_and_sync() {
        let heap = Heap::format_dram(
            1 << 20,
            crate::heap::FormatParams {
                engine_id: 0,
                max_threads: 1,
                log_bytes_per_thread: 64 << 10,
                regions: Default::default(),
            },
        );
        let mut h = UnsyncedHome::default();
        let mut r = h.ranges();
        assert_eq!(r.sync(&heap), None, "nothing written back");
        r.push(&heap, 4096, 64);
        r.push(&heap, 4160, 8);
        r.push(&heap, 4100, 4);
        assert_eq!((r.st.len, r.ranges[0]), (1, (4096, 72)));
        for i in 1..UNSYNCED_RANGES {
            r.push(&heap, 4096 + 128 * i, 8);
        }
        assert_eq!(r.st.len as usize, UNSYNCED_RANGES);
        r.wrote_up_to(7);
        r.push(&heap, 1 << 19, 8);
        assert_eq!(r.st.len, 1, "the full array was made durable");
        assert_eq!(r.sync(&heap), Some(7));
        assert_eq!(r.st.len, 0);
        assert_eq!(r.sync(&heap), None);
    }
}
