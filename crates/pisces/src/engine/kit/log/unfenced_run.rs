//! A log's unfenced run, as other threads see it: where its bytes are, which records it
//! holds, and how far it is known durable — so that any thread can persist it.
//!
//! A commit whose durability is deferred appends its record without a fence, in its
//! log's unfenced run (`redo_log`, "Unfenced runs"), and becomes visible at once. Three
//! kinds of thread then need the run durable, and the log's owner may be idle: a
//! transaction of another thread that read what the record wrote, before that
//! transaction's own record can reach the device (or, read-only, before it returns as
//! durable); a write-back of the transaction's home writes, which the page cache may
//! write back at any time while only the record can replay them; and the owner waiting
//! for durability. [`SharedRun::sync`] flushes the run's bytes from the calling thread
//! and fences: the medium's flush and fence of any thread persist lines another thread
//! stored (`append_unfenced` writes them with plain stores, not streamed ones).
//!
//! What the owner keeps: after each unfenced append it publishes the run's span, then
//! the record's sequence number ([`SharedRun::appended`]); after each fence of its own
//! that covers the run, the newest sequence number covered ([`SharedRun::fenced`]).
//! A syncer that has seen a record (through the transaction's visibility, which comes
//! after `appended`) therefore loads a sequence number at least the record's, and then
//! a span that covers the record or belongs to a later run, begun after the owner's
//! fence made the record durable.

use crate::heap::Heap;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::{Acquire, Release};

/// One log's unfenced run, shared ([`self`]).
#[repr(C)]
#[derive(Debug)]
pub(crate) struct SharedRun {
    /// Pool offset of the log's ring.
    ring: usize,
    /// Ring bytes.
    cap: usize,
    /// The run's span as the owner last published it: ring offset of its first byte
    /// (high half) and of the head after its newest record (low half).
    span: AtomicU64,
    /// The newest record appended unfenced (0: none yet).
    appended: AtomicU64,
    /// Every record up to this sequence number is durable (as far as this state knows).
    durable: AtomicU64,
}

// SAFETY: pool offsets, sizes and atomics (set by its placer before use); `repr(C)`.
unsafe impl crate::region::InRegion for SharedRun {}

impl SharedRun {
    /// The shared run of the log whose ring is `cap` bytes at pool offset `ring`.
    pub(crate) fn new(ring: usize, cap: usize) -> SharedRun {
        assert!(
            u32::try_from(cap).is_ok(),
            "a log ring of {cap} bytes (at most 4 GiB)"
        );
        SharedRun {
            ring,
            cap,
            span: AtomicU64::new(0),
            appended: AtomicU64::new(0),
            durable: AtomicU64::new(0),
        }
    }

    /// The owner appended record `seq` unfenced; the run now spans `span` (ring
    /// offsets of its first byte and of the head, `LogWriter::unfenced_span`).
    pub(crate) fn appended(&self, span: (usize, usize), seq: u64) {
        let packed = (span.0 as u64) << 32 | span.1 as u64;
        // Release (both): a syncer that Acquires `appended` sees this span or a later
        // one, and the record's bytes, stored before (module docs).
        self.span.store(packed, Release);
        self.appended.store(seq, Release);
    }

    /// The owner fenced after appending up to `seq`: records up to it are durable.
    pub(crate) fn fenced(&self, seq: u64) {
        // Release: pairs with the Acquire in `is_durable` (a reader that sees the
        // record durable also sees it needs no flush of its own).
        self.durable.fetch_max(seq, Release);
    }

    /// Whether record `seq` is known durable.
    #[inline]
    pub(crate) fn is_durable(&self, seq: u64) -> bool {
        self.durable.load(Acquire) >= seq
    }

    /// Whether every record appended unfenced so far is known durable.
    #[inline]
    pub(crate) fn all_durable(&self) -> bool {
        self.is_durable(self.appended.load(Acquire))
    }

    /// Make every record appended unfenced so far durable, from the calling thread:
    /// flush the run's bytes and fence (one `msync` on the file medium). Nothing to do
    /// if they are known durable.
    pub(crate) fn sync(&self, heap: &Heap) {
        sync_all(heap, std::iter::once(self));
    }

    /// Flush what `sync` would and return the sequence number the flush covers, or
    /// None if the run is known durable.
    fn flush(&self, heap: &Heap) -> Option<u64> {
        // Acquire (both): see `appended`.
        let target = self.appended.load(Acquire);
        if self.is_durable(target) {
            return None;
        }
        let packed = self.span.load(Acquire);
        let (start, head) = ((packed >> 32) as usize, (packed & 0xFFFF_FFFF) as usize);
        for (from, to) in ranges(start, head, self.cap) {
            heap.flush(self.ring + from, to - from);
        }
        Some(target)
    }
}

/// [`SharedRun::sync`] of several runs with one fence.
pub(crate) fn sync_all<'a>(heap: &Heap, runs: impl Iterator<Item = &'a SharedRun>) {
    let flushed: Vec<(&SharedRun, u64)> =
        runs.filter_map(|r| r.flush(heap).map(|t| (r, t))).collect();
    if flushed.is_empty() {
        return;
    }
    heap.fence();
    // What each flush covered is durable now (a record appended since is not claimed).
    for (r, t) in flushed {
        r.fenced(t);
    }
}

/// The ring byte ranges of a run from `start` to `head` in a ring of `cap` bytes: one
/// range, or two when it wraps around the ring's end (the head at or before the start;
/// a head of 0 after a record that ended at the ring's end is the end).
fn ranges(start: usize, head: usize, cap: usize) -> impl Iterator<Item = (usize, usize)> {
    let head = if head == 0 { cap } else { head };
    let (first, second) = if start < head {
        ((start, head), None)
    } else {
        ((start, cap), Some((0, head)))
    };
    std::iter::once(first).chain(second)
}

#[cfg(test)]
mod tests {
    use super::ranges;

    #[test]
    fn a_run_is_one_range_unless_it_wraps() {
        let r = |s, h| ranges(s, h, 1024).collect::<Vec<_>>();
        assert_eq!(r(64, 256), vec![(64, 256)]);
        assert_eq!(r(64, 0), vec![(64, 1024)]);
        assert_eq!(r(0, 0), vec![(0, 1024)]);
        assert_eq!(r(768, 128), vec![(768, 1024), (0, 128)]);
    }
}
