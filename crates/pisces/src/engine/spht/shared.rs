//! Pool-wide state of the `spht` engine (DRAM), and the engine ([`SphtEngine`]): its
//! open (recovery, the working snapshot, the replayer thread) and its shutdown.

use super::clock::PhysClock;
use super::durability::{engine_area_bytes, SlotMeta};
use super::log::LogWriter;
use super::options::SphtSettings;
use super::recovery::recover;
use super::replayer::{background, catch_up, kick, ReplayState};
use super::snapshot::Snapshot;
use super::stripes::Stripes;
use super::thread::{SlotLocal, SphtThread};
use crate::engine::kit::cc::fallback::Fallback;
use crate::engine::{Engine, OpenCtx};
use crate::heap::alloc::Allocator;
use crate::heap::Heap;
use crate::{Error, Result};
use crossbeam_utils::CachePadded;
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex, OnceLock};

/// Counters of the durability protocol (tests, diagnostics).
#[derive(Debug, Default)]
pub(crate) struct Stats {
    /// Successful CASes of the global marker.
    pub cas: AtomicU64,
    /// Commits that skipped the CAS (a larger update transaction will do it).
    pub skipped: AtomicU64,
    /// Commits that waited for a smaller-timestamp transaction to persist.
    pub waited: AtomicU64,
    /// Commits whose record was a point record (no marker write).
    pub points: AtomicU64,
    /// Commits whose record was a conditional point (no marker write).
    pub conditional: AtomicU64,
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

/// Pool-wide engine state.
pub(crate) struct SphtShared {
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
    pub opts: SphtSettings,
    /// Commits write point records where they can (option `points`, resolved against
    /// the medium: `log`, *Point records*).
    pub point_records: bool,
    /// A fence is a device sync (the file medium): a forward link into another slot's
    /// log is stored without a flush (`thread`, step 9).
    pub unflushed_links: bool,
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
    /// Ends the background replayer's rest early (`replayer::kick`).
    pub kicked: AtomicBool,
    /// The background replayer thread (to wake it).
    pub worker: OnceLock<std::thread::Thread>,
    /// Protocol counters.
    pub stats: Stats,
    /// Per slot: the log writer and clock history, while no thread state holds them.
    pub locals: Vec<Mutex<Option<super::thread::SlotLocal>>>,
}

/// The `spht` engine over one pool.
pub(crate) struct SphtEngine {
    sh: Arc<SphtShared>,
    worker: Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl SphtEngine {
    /// Recover the pool (`recovery`), start the replayer and the engine.
    pub(super) fn open(heap: Arc<Heap>, opts: SphtSettings, ctx: &OpenCtx) -> Result<SphtEngine> {
        let l = *heap.layout();
        if l.engine_area_size < engine_area_bytes(l.max_threads) {
            return Err(Error::corrupt(format!(
                "engine area of {} bytes is too small for spht's {} slot markers",
                l.engine_area_size, l.max_threads
            )));
        }
        let rec = recover(&heap, &opts, ctx.recovery_threads)?;
        let alloc = Arc::new(Allocator::rebuild_private(heap.clone())?);
        // The replayer is not started yet: nobody writes the image.
        let ws = Snapshot::of(&heap)
            .map_err(|e| Error::io("allocating the spht working snapshot".to_string(), e))?;
        let n = l.max_threads;
        let clock = PhysClock::above(opts.clock, n, rec.max_ts);
        let locals = (0..n)
            .map(|s| {
                Mutex::new(Some(SlotLocal {
                    log: LogWriter::new(&heap, s, rec.next_seq[s]),
                    last_raw: 0,
                    last_ts: 0,
                }))
            })
            .collect();
        let sh = Arc::new(SphtShared {
            alloc,
            ws,
            unreplayed: Mutex::new(Default::default()),
            stripes: Stripes::new(),
            fallback: Default::default(),
            clock,
            point_records: opts.points.unwrap_or_else(|| heap.fence_is_device_sync()),
            unflushed_links: heap.fence_is_device_sync(),
            opts,
            slots: (0..n)
                .map(|_| CachePadded::new(Default::default()))
                .collect(),
            durable: CachePadded::new(AtomicU64::new(rec.replayed_ts)),
            genesis: AtomicU64::new(0),
            released_seq: (0..n)
                .map(|_| CachePadded::new(AtomicU64::new(0)))
                .collect(),
            replayed_ts: CachePadded::new(AtomicU64::new(rec.replayed_ts)),
            replay: Mutex::new(ReplayState::new(&rec.next_seq)),
            stop: AtomicBool::new(false),
            kicked: AtomicBool::new(false),
            worker: OnceLock::new(),
            stats: Stats::default(),
            locals,
            heap,
        });
        // Relaxed: diagnostics read after `open` returns (the engine's hand-off orders them).
        sh.stats
            .recovered_records
            .store(rec.replayed_records as u64, Relaxed);
        sh.stats
            .recovery_followed_links
            .store(rec.followed_links, Relaxed);
        let sh2 = sh.clone();
        let h = std::thread::Builder::new()
            .name("spht-replayer".into())
            .spawn(move || background(sh2))
            .map_err(|e| Error::io("starting the spht replayer".to_string(), e))?;
        let _ = sh.worker.set(h.thread().clone());
        Ok(SphtEngine {
            sh,
            worker: Mutex::new(Some(h)),
        })
    }

    /// The engine's shared state (tests).
    #[cfg(test)]
    pub(super) fn shared(&self) -> &Arc<SphtShared> {
        &self.sh
    }
}

impl Engine for SphtEngine {
    type Thread = SphtThread;
    fn thread(&self, slot: usize) -> Result<SphtThread> {
        if slot >= self.sh.slots.len() {
            return Err(Error::TooManyThreads(self.sh.slots.len()));
        }
        SphtThread::new(self.sh.clone(), slot)
    }
    /// Replay until the durable heap holds every durable transaction.
    fn quiesce(&self) {
        let mut round = 0;
        while self.sh.replayed_ts.load(Acquire) < self.sh.durable.load(Acquire) {
            catch_up(&self.sh);
            crate::sync::spin_step(&mut round);
        }
    }
    fn heap(&self) -> Option<&Arc<Heap>> {
        Some(&self.sh.heap)
    }
    fn shutdown(&self) {
        self.sh.stop.store(true, Release);
        kick(&self.sh);
        let h = self.worker.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(h) = h {
            let _ = h.join();
        }
        self.quiesce();
    }
}

impl Drop for SphtEngine {
    fn drop(&mut self) {
        self.shutdown();
    }
}
