//! Pool-wide state of the `spht` engine (DRAM).

use super::clock::PhysClock;
use super::durability::SlotMeta;
use super::options::SphtOptions;
use super::replayer::ReplayState;
use super::snapshot::Snapshot;
use super::stripes::Stripes;
use crate::engine::kit::cc::fallback::Fallback;
use crate::heap::alloc::Allocator;
use crate::heap::Heap;
use crossbeam_utils::CachePadded;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex, OnceLock};

/// Counters of the durability protocol (tests, diagnostics).
#[derive(Debug, Default)]
pub struct Stats {
    /// Successful CASes of the global marker.
    pub cas: AtomicU64,
    /// Commits that skipped the CAS (a larger update transaction will do it).
    pub skipped: AtomicU64,
    /// Commits that waited for a smaller-timestamp transaction to persist.
    pub waited: AtomicU64,
    /// Batches the replayer applied.
    pub batches: AtomicU64,
    /// Words skipped by the duplicate filter.
    pub filtered: AtomicU64,
    /// Words applied by the replayer.
    pub applied: AtomicU64,
    /// Records the recovery at open replayed.
    pub recovered_records: AtomicU64,
    /// The recovery at open ordered its records by the links (1) or merged them by
    /// timestamp (0).
    pub recovery_followed_links: AtomicBool,
}

/// A test hook: holds the commit of one slot at one point until released.
#[cfg(test)]
#[derive(Debug, Default)]
pub struct Hold {
    /// Point to hold at (0: none).
    pub point: std::sync::atomic::AtomicU32,
    /// Slot to hold.
    pub slot: std::sync::atomic::AtomicUsize,
    /// Set when the slot reached the point.
    pub held: AtomicBool,
    /// Set to let it go on.
    pub go: AtomicBool,
}

#[cfg(test)]
impl Hold {
    /// Called by slot `slot` at point `p`.
    pub fn hit(&self, p: u32, slot: usize) {
        use std::sync::atomic::Ordering::SeqCst;
        if self.point.load(SeqCst) == p && self.slot.load(SeqCst) == slot {
            self.point.store(0, SeqCst);
            self.held.store(true, SeqCst);
            while !self.go.load(SeqCst) {
                std::thread::yield_now();
            }
        }
    }
}

/// Hold point: after the write-back (visible), before the record is appended.
pub const HOLD_BEFORE_LOG: u32 = 1;
/// Hold point: isPers set, before the marker update.
pub const HOLD_BEFORE_MARKER: u32 = 2;

/// Pool-wide engine state.
pub struct Shared {
    /// The pool (durable heap: logs, markers, and the image only replay writes).
    pub heap: Arc<Heap>,
    /// The allocator (its persistent state lives in the durable heap).
    pub alloc: Arc<Allocator>,
    /// The working snapshot.
    pub ws: Snapshot,
    /// Allocations (`true`) and frees (`false`) that committed but whose records the
    /// replayer has not applied yet, by block offset: the allocator's bitmaps live in
    /// the durable heap, which only replay writes, so object validation asks here for
    /// a block whose bit does not show the committed state yet.
    pub unreplayed: Mutex<crate::fasthash::FastMap<u64, bool>>,
    /// Versioned locks.
    pub stripes: Stripes,
    /// The serial fallback word (see `thread`, *Fallback*).
    pub fallback: Fallback,
    /// Commit clock.
    pub clock: PhysClock,
    /// Options.
    pub opts: SphtOptions,
    /// Per-slot published metadata.
    pub slots: Vec<CachePadded<SlotMeta>>,
    /// Volatile mirror of the durable point: every update transaction with a timestamp
    /// up to it is durable (raised after the marker's flush).
    pub durable: CachePadded<AtomicU64>,
    /// Link of the first update transaction of this run (0: none yet).
    pub genesis: AtomicU64,
    /// Per slot: every record with a smaller sequence number is applied and released.
    pub released_seq: Vec<CachePadded<AtomicU64>>,
    /// Timestamp up to which the durable heap is up to date (volatile mirror).
    pub replayed_ts: CachePadded<AtomicU64>,
    /// The replayer's state; whoever holds it applies the next batch.
    pub replay: Mutex<ReplayState>,
    /// Tells the background replayer to stop.
    pub stop: AtomicBool,
    /// The background replayer thread (to wake it).
    pub worker: OnceLock<std::thread::Thread>,
    /// Protocol counters.
    pub stats: Stats,
    /// Test hook.
    #[cfg(test)]
    pub hold: Hold,
    /// Per slot: the log writer and clock history, while no thread state holds them.
    pub locals: Vec<Mutex<Option<super::thread::SlotLocal>>>,
}
