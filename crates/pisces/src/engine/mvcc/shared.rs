//! Pool-wide state of the `mvcc` engine ([`MvccEngine`]): the clock, the thread slots,
//! the index, and the two scans over the slots (oldest running snapshot;
//! log-recycling watermark).
//!
//! # Slots
//! Each thread slot has, in DRAM and cache-padded ([`Slot`]):
//! * its published start timestamp, [`SlotClock`](crate::engine::kit::cc::clock::SlotClock)
//!   — the same loom-checked protocol as
//!   Pisces (`STARTING`, SeqCst fence, clock load), so a scan after a fence never misses
//!   a transaction whose start timestamp is below the scanner's last clock increment;
//! * `committing`: a lower bound of the commit timestamp of this slot's log record that
//!   is not yet durably written home (`u64::MAX`: none), for the watermark.
//!
//! # Log recycling
//! The redo log and its recovery are Pisces' ([`crate::engine::kit::log::redo_log`],
//! [`crate::engine::kit::recovery::replay`]): records carry the commit timestamp as their
//! persistTS and recovery replays them in that order. A thread may drop a record only
//! when every record with a smaller timestamp, in every thread's log, is durably home —
//! else recovery could replay an older record over a newer value whose record is gone.
//! So, as in Pisces (P-2), a thread persists the watermark W = "every record below W is
//! home" before dropping its records below W; recovery ignores records below W.
//!
//! # Lazy home sync (the file medium)
//! Where a fence is a device sync, a commit stores home without fencing and leaves the
//! ranges it wrote in its slot's [`HomeSync`] (the kit's
//! [`lazy_home`](crate::engine::kit::log::lazy_home)): `unsynced_min` holds the
//! watermark below its record until the ranges are synced. The owner syncs them when it
//! recycles its log; a thread whose log stays full syncs every slot's
//! ([`MvccShared::sync_all_homes`]), so an idle thread's ranges never hold the others'
//! logs; a closing thread syncs its own, a closing pool every slot's.

use super::thread::MvccThread;
use crate::engine::kit::cc::clock::Clock;
use crate::engine::kit::log::lazy_home::UnsyncedHome;
use crate::engine::kit::log::watermark;
use crate::engine::kit::recovery::replay;
use crate::engine::kit::versions::version_index::VersionIndex as Index;
use crate::engine::Engine;
use crate::heap::alloc::Allocator;
use crate::heap::Heap;
use crate::sync::fence;
use crate::{Error, Result};
use crossbeam_utils::CachePadded;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::{Acquire, SeqCst};
use std::sync::{Arc, Mutex, MutexGuard};

/// One thread slot: `committing` is the commit timestamp of a record not yet durably
/// home (0 while it is being taken; `u64::MAX`: none).
pub(crate) use crate::engine::kit::cc::clock::CommitSlot as Slot;

/// Lazy home sync of one slot (module docs).
#[derive(Default)]
pub(crate) struct HomeSync {
    /// The least commit timestamp among the records whose home writes are in
    /// `ranges` (`u64::MAX`: none); part of the watermark scan.
    unsynced_min: AtomicU64,
    /// The home ranges written and not yet durable.
    ranges: Mutex<UnsyncedHome>,
}

impl HomeSync {
    fn new() -> HomeSync {
        HomeSync {
            unsynced_min: AtomicU64::new(u64::MAX),
            ranges: Mutex::new(UnsyncedHome::default()),
        }
    }

    /// Lock the ranges. A panic while they were held leaves at worst ranges not yet
    /// synced, which the next sync makes durable: poisoning is ignored.
    pub(super) fn lock(&self) -> MutexGuard<'_, UnsyncedHome> {
        self.ranges.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The ranges just pushed into `ranges` (this slot's, locked) belong to a record
    /// with commit timestamp `ts`: hold the watermark below it until they are synced.
    /// SeqCst, and stored before the committer clears its `committing` (Release): a
    /// watermark scan that sees `committing` cleared loads this bound after it.
    pub(super) fn hold(&self, _ranges: &MutexGuard<'_, UnsyncedHome>, ts: u64) {
        self.unsynced_min.fetch_min(ts, SeqCst);
    }
}

/// Pool-wide engine state.
pub(crate) struct MvccShared {
    /// The pool.
    pub heap: Arc<Heap>,
    /// The allocator.
    pub alloc: Arc<Allocator>,
    /// The global clock: start and commit timestamps.
    pub clock: Clock,
    /// Thread slots.
    pub slots: Vec<Slot>,
    /// Object → version chain.
    pub index: Index,
    /// Next log sequence number of each slot after recovery.
    pub next_seq: Vec<u64>,
    /// The serial fallback word (`thread`, *Fallback*).
    pub fallback: crate::engine::kit::cc::fallback::Fallback,
    /// Home writes are synced lazily (module docs): the medium's fence is a device sync.
    pub lazy_home: bool,
    /// Each slot's lazy home sync (empty unless `lazy_home`).
    pub home: Vec<CachePadded<HomeSync>>,
}

impl MvccShared {
    /// Build the shared state (after recovery).
    pub(super) fn new(
        heap: Arc<Heap>,
        alloc: Arc<Allocator>,
        clock_start: u64,
        next_seq: Vec<u64>,
    ) -> MvccShared {
        let n = heap.layout().max_threads;
        let index = Index::new(&heap, &alloc);
        let lazy_home = heap.fence_is_device_sync();
        let home = if lazy_home {
            (0..n).map(|_| CachePadded::new(HomeSync::new())).collect()
        } else {
            Vec::new()
        };
        MvccShared {
            heap,
            alloc,
            clock: Clock::new(clock_start),
            slots: Slot::slots(n),
            index,
            next_seq,
            fallback: Default::default(),
            lazy_home,
            home,
        }
    }

    /// Make `slot`'s lazily written home ranges durable and release its watermark
    /// bound (nothing to do without lazy home sync).
    pub(super) fn sync_home(&self, slot: usize) {
        let Some(h) = self.home.get(slot) else {
            return;
        };
        let mut ranges = h.lock();
        if ranges.ranges().sync(&self.heap).is_some() {
            // SeqCst: as in `hold`. Under the lock, after the fence that made every
            // range pushed before it durable.
            h.unsynced_min.store(u64::MAX, SeqCst);
        }
    }

    /// [`MvccShared::sync_home`] for every slot: a thread whose log stays full, and
    /// the pool's close.
    pub(super) fn sync_all_homes(&self) {
        for slot in 0..self.home.len() {
            self.sync_home(slot);
        }
    }

    /// A lower bound of the start timestamp of every running transaction, at most
    /// `bound`, valid for all later ones too *if* `bound` is a timestamp this thread
    /// obtained from the clock before the call (its commit timestamp, or the one of an
    /// earlier commit): every transaction then either shows up in the scan, or read the
    /// clock after our increment, so its start is at least `bound`.
    ///
    /// Race closed: the fence pairs with the one in
    /// [`SlotClock::start`](crate::engine::kit::cc::clock::SlotClock::start) (store
    /// `STARTING`, fence, read the clock): if our scan misses a starting transaction's
    /// store, our fence precedes its fence, so its clock load sees our increment.
    pub(super) fn oldest_active(&self, bound: u64) -> u64 {
        fence(SeqCst);
        self.slots
            .iter()
            .map(|s| s.clock.load())
            .fold(bound, u64::min)
    }

    /// The watermark candidate: no record with a smaller commit timestamp is still
    /// on its way home. Records with a timestamp up to the clock's value count (a
    /// commit timestamp *is* a clock value), so a thread's last record can be dropped
    /// even if no other thread commits after it.
    ///
    /// Race closed: a committer stores `committing = 0`, fences, then increments the
    /// clock. If our clock load sees that increment (or a later one), the committer's
    /// fence precedes ours, so our slot scan sees its guard (0, its timestamp, or
    /// `u64::MAX` stored after its record is home); if not, its timestamp is above our
    /// clock value and so not below the watermark. A slot's lazy home bound is loaded
    /// after its `committing`: if that load sees the Release that cleared it, the bound
    /// the committer stored before is seen too (`HomeSync::hold`).
    pub(super) fn watermark(&self) -> u64 {
        let now = self.clock.now();
        fence(SeqCst);
        let mut w = now + 1;
        for (i, s) in self.slots.iter().enumerate() {
            w = w.min(s.committing.load(Acquire));
            if let Some(h) = self.home.get(i) {
                w = w.min(h.unsynced_min.load(SeqCst));
            }
        }
        w
    }

    /// Raise the persistent watermark to at least `w` and make it durable.
    pub(super) fn persist_watermark(&self, w: u64) {
        watermark::raise(&self.heap, w);
    }
}

/// The multi-version strawman engine over one pool.
pub(crate) struct MvccEngine {
    sh: Arc<MvccShared>,
}

impl MvccEngine {
    /// Recover the pool (replay the redo logs, as for Pisces) and start.
    pub(super) fn open(heap: Arc<Heap>) -> Result<MvccEngine> {
        let recovered = replay::recover(&heap)?;
        let alloc = Arc::new(Allocator::rebuild_private(heap.clone())?);
        let sh = Arc::new(MvccShared::new(
            heap,
            alloc,
            recovered.clock_start,
            recovered.next_seq.clone(),
        ));
        Ok(MvccEngine { sh })
    }

    /// Versions alive in DRAM (published and private), for tests and diagnostics.
    #[cfg(test)]
    pub(super) fn live_versions(&self) -> u64 {
        self.sh.index.live.get()
    }
}

impl Engine for MvccEngine {
    type Thread = MvccThread;
    fn thread(&self, slot: usize) -> Result<MvccThread> {
        if slot >= self.sh.slots.len() {
            return Err(Error::TooManyThreads(self.sh.slots.len()));
        }
        Ok(MvccThread::new(self.sh.clone(), slot))
    }
    /// Every commit writes home itself, and each thread releases its freed blocks when
    /// it quiesces; home writes synced lazily are made durable here.
    fn quiesce(&self) {
        self.sh.sync_all_homes();
    }
    fn heap(&self) -> Option<&Arc<Heap>> {
        Some(&self.sh.heap)
    }
}
