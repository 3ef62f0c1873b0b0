//! The Pisces engine (USENIX ATC 2019): dual-version concurrency control with a
//! three-stage commit, so that readers never wait for persistent memory.
//!
//! Modules, one concept each:
//! * [`protocol`]: timestamps, start, visibility (`inCritical` / endTS), grace period —
//!   the part model-checked with loom;
//! * [`log`]: redo records, per-thread ring buffers, the recovery parser;
//! * [`shared`]: pool-wide state, the write-back stage, group commit with helping,
//!   copy reclamation (P-1) and the recycle watermark (P-2);
//! * [`thread`]: one thread's transactions (Algorithm 1);
//! * [`recovery`]: replay after a crash.
//!
//! Departures from the paper, and why:
//! * Copies always live in DRAM, also with flush-diff off; "flush-diff off" then logs
//!   whole objects instead of changed words. The paper's non-flush-diff variant keeps
//!   the copies in the NVM log and reads them there; what Fig. 9a measures — the bytes
//!   and lines made durable — is the same, and one read path is simpler to verify.
//! * New objects are linked like written ones (a zeroed copy under the header lock) and
//!   reach home in the write-back, so a stale pointer to a recycled block can never
//!   observe a home write while a reader might be looking.
//! * The header word tags its pointer with the run generation (top 16 bits), so locks
//!   left by a crash read as empty without a heap scan.
//! * An unlocked header word also says whether the block is allocated: the write-back
//!   that unlocks an object stores a "live" marker of this run, the one that publishes
//!   a free a "freed" marker ([`shared::LIVE`]). The read fast path then checks
//!   allocated and unlocked with the single load of the word next to the payload (no
//!   load of the slab's allocation bitmap on another line). Objects of earlier runs are
//!   marked by their first read through the engine.

pub mod protocol;
pub mod shared;
pub mod thread;

#[cfg(test)]
mod deferred_tests;
#[cfg(test)]
mod live_tests;
#[cfg(test)]
mod locked_read_tests;

use crate::engine::kit::recovery::replay;
use crate::engine::{Engine, EngineDef, EngineOptions, Inspection, OpenCtx, PiscesOptions};
use crate::heap::alloc::{Allocator, ThreadCache};
use crate::heap::{Heap, ROOT_SLOT_OFFSET};
use crate::tx_options::Isolation;
use crate::Result;
use shared::Shared;
use std::sync::Arc;

/// Registry entry of the Pisces engine.
pub struct Pisces;

impl EngineDef for Pisces {
    const ID: u32 = 1;
    const NAME: &'static str = "pisces";
    const SUMMARY: &'static str =
        "Pisces (USENIX ATC 2019): snapshot isolation, dual-version concurrency control, three-stage commit";
    const ISOLATION: Isolation = Isolation::Snapshot;
    type Engine = PiscesEngine;
    type Thread = thread::PiscesThread;
    fn open(heap: Arc<Heap>, opts: &EngineOptions, _ctx: &OpenCtx) -> Result<PiscesEngine> {
        PiscesEngine::start(heap, PiscesOptions::parse(Self::NAME, opts)?, true)
    }
    fn option_sets() -> Vec<EngineOptions> {
        PiscesOptions::ablations()
    }
    fn inspect(heap: &Heap) -> Inspection {
        replay::inspect_redo_logs(heap)
    }
}

/// Registry entry of the `volatile` baseline: the same dual-version concurrency control
/// with every persistence step removed (no redo log, no flush, no fence). Not
/// crash-safe; the reference for read-only throughput (same read path as Pisces).
pub struct Volatile;

impl EngineDef for Volatile {
    const ID: u32 = 4;
    const NAME: &'static str = "volatile";
    const SUMMARY: &'static str =
        "baseline: Pisces' concurrency control with no persistence (the upper bound; not crash-safe)";
    const ISOLATION: Isolation = Isolation::Snapshot;
    const DURABLE: bool = false;
    type Engine = PiscesEngine;
    type Thread = thread::PiscesThread;
    fn open(heap: Arc<Heap>, opts: &EngineOptions, _ctx: &OpenCtx) -> Result<PiscesEngine> {
        PiscesEngine::start(heap, PiscesOptions::parse(Self::NAME, opts)?, false)
    }
    fn option_sets() -> Vec<EngineOptions> {
        PiscesOptions::ablations()
    }
}

/// The Pisces engine over one pool.
pub struct PiscesEngine {
    sh: Arc<Shared>,
}

impl PiscesEngine {
    /// Recover the pool (if `durable`) and start the engine.
    fn start(heap: Arc<Heap>, opts: PiscesOptions, durable: bool) -> Result<PiscesEngine> {
        let recovered = crate::engine::kit::recovery::replay::recover(&heap)?;
        let alloc = Arc::new(Allocator::rebuild(heap.clone())?);
        // The root slot's header word is outside the allocator's heap; a lock left
        // there by a crash reads as empty (older tag), but clear it anyway: it is free.
        heap.atomic_u64(ROOT_SLOT_OFFSET)
            .store(0, std::sync::atomic::Ordering::Relaxed);
        heap.persist(ROOT_SLOT_OFFSET, 8);
        if crate::engine::kit::cc::header_word::tag_wraps(heap.generation()) {
            // This run's tag was used 65535 runs ago: words left by that run would
            // read as locks of this one.
            Allocator::clear_header_words(&heap)?;
        }
        let sh = Arc::new(Shared::new(
            heap,
            alloc,
            opts,
            durable,
            recovered.clock_start,
            recovered.next_seq.clone(),
        ));
        Ok(PiscesEngine { sh })
    }
}

impl Engine for PiscesEngine {
    type Thread = thread::PiscesThread;
    fn thread(&self, slot: usize) -> Result<thread::PiscesThread> {
        if slot >= self.sh.slots.len() {
            return Err(crate::Error::TooManyThreads(self.sh.slots.len()));
        }
        Ok(thread::PiscesThread::new(self.sh.clone(), slot))
    }
    fn quiesce(&self) {
        let mut cache = ThreadCache::default();
        self.sh.quiesce(usize::MAX, &mut cache);
        self.sh.alloc.drain(&mut cache);
    }
    fn heap(&self) -> Option<&Arc<Heap>> {
        Some(&self.sh.heap)
    }
}
