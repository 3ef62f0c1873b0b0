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

crate::mutation::point! {
    /// Lazy home sync lets the log drop records whose home writes it did not make
    /// durable (the sync neither flushes nor fences).
    pub(crate) static HOME_SYNC_SKIPPED = "home-sync-skipped";
}

/// Home ranges written by committed transactions and not yet made durable.
#[derive(Debug, Default)]
pub(crate) struct UnsyncedHome {
    /// `(offset, len)` of each range, in the order written.
    ranges: Vec<(usize, usize)>,
    /// The highest log sequence number among the transactions whose ranges are here.
    seq: u64,
    /// Something was written back since the last sync: a range, or a transaction that
    /// wrote none (one whose copies equal home logs no entry and writes nothing home).
    pending: bool,
}

impl UnsyncedHome {
    /// A range of home (or allocator metadata) a committed transaction wrote.
    #[inline]
    pub(crate) fn push(&mut self, off: usize, len: usize) {
        self.ranges.push((off, len));
        self.pending = true;
    }

    /// The ranges pushed so far belong to transactions up to log sequence number `seq`
    /// (those transactions were written back, whether they pushed a range or not).
    #[inline]
    pub(crate) fn wrote_up_to(&mut self, seq: u64) {
        self.seq = self.seq.max(seq);
        self.pending = true;
    }

    /// Make every waiting range durable: flush each, then one fence (one `msync` of
    /// their pages). Returns the highest log sequence number of the transactions
    /// written back since the last sync, or `None` if none was. The caller then lets
    /// the log drop those records and clears its watermark bound — also when they
    /// wrote no range (no fence then): their bound would otherwise hold the watermark,
    /// and with it the log, until a later transaction wrote something.
    pub(crate) fn sync(&mut self, heap: &Heap) -> Option<u64> {
        if !std::mem::take(&mut self.pending) {
            return None;
        }
        if self.ranges.is_empty() {
            return Some(self.seq);
        }
        let skip = crate::mutation::active!(HOME_SYNC_SKIPPED);
        for (off, len) in self.ranges.drain(..) {
            if !skip {
                heap.flush(off, len);
            }
        }
        if !skip {
            heap.fence();
        }
        Some(self.seq)
    }
}
