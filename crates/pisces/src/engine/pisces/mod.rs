//! The Pisces engine (USENIX ATC 2019): dual-version concurrency control with a
//! three-stage commit, so that readers never wait for persistent memory.
//!
//! Parts, one concept each:
//! * [`protocol`]: timestamps, start, visibility (`inCritical` / endTS), grace period —
//!   the part model-checked with loom;
//! * [`options`]: flush-diff and group commit ([`PiscesOptions`]);
//! * [`shared`]: pool-wide state, the write-back stage, group commit with helping,
//!   copy reclamation (P-1) and the recycle watermark (P-2) ([`shared::PiscesEngine`]);
//! * [`thread`]: one thread's transactions (Algorithm 1);
//! * [`arena`]: the DRAM copies and commit records live in, named by offset;
//! * [`plan`]: what the write-back of a committed transaction does, kept in its arena
//!   memory and named by offsets;
//! * the log and recovery are the kit's: redo records in per-thread rings
//!   ([`crate::engine::kit::log::redo_log`]) and their replay after a crash
//!   ([`crate::engine::kit::recovery::replay`]);
//! * `volatile` is this engine with every persistence step removed ([`Volatile`]): no
//!   log, no flush, no fence, nothing to recover.
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
//! * A locked header word names its copy, and a copy its writer's commit record, by
//!   offset into the engine's copy arena ([`arena::CopyArena`]), not by address: an
//!   offset means the same wherever the arena is mapped, the groundwork for a pool that
//!   several processes share. Decoding it is one add, on the locked path only (the
//!   read fast path compares the word with the live marker and never decodes).
//! * An unlocked header word also says whether the block is allocated: the write-back
//!   that unlocks an object stores a "live" marker of this run, the one that publishes
//!   a free a "freed" marker ([`shared::LIVE`]). The read fast path then checks
//!   allocated and unlocked with the single load of the word next to the payload (no
//!   load of the slab's allocation bitmap on another line). Objects of earlier runs are
//!   marked by their first read through the engine.
//!
//! Under eADR (`PersistenceDomain::Eadr`, the medium's flush writes nothing back) the
//! fences stay, each for its own reason: the commit's fence completes the redo record,
//! which the kit streams with non-temporal stores that bypass the persistent caches,
//! before the transaction is acknowledged; the write-back's fence orders the home
//! stores before the recycle watermark lets the record's log space be reused. What
//! goes away is the write-back's line flushes, so the two options pay off less:
//! flush-diff still logs fewer bytes but its saving in written-back lines is gone, and
//! group commit still shares one write-back fence among a batch but no longer shares
//! flushes of lines the batch's transactions have in common.

mod arena;
mod attempt;
mod batch;
mod options;
mod peer_recovery;
mod plan;
mod protocol;
mod shared;
mod thread;

#[cfg(test)]
mod tests;

use crate::engine::kit::recovery::replay;
use crate::engine::{EngineDef, EngineOptions, Inspection, OpenCtx};
use crate::heap::Heap;
use crate::tx_options::Isolation;
use crate::Result;
pub use options::PiscesOptions;
use shared::PiscesEngine;
use std::sync::Arc;
use thread::PiscesThread;

/// Registry entry of the Pisces engine.
pub(crate) struct Pisces;

impl EngineDef for Pisces {
    const ID: u32 = 1;
    const NAME: &'static str = "pisces";
    const SUMMARY: &'static str =
        "Pisces (USENIX ATC 2019): snapshot isolation, dual-version concurrency control, three-stage commit";
    const ISOLATION: Isolation = Isolation::Snapshot;
    /// The default engine.
    const INLINE_DISPATCH: bool = true;
    const SHARING_REFUSED: Option<&'static str> = None;
    type Engine = PiscesEngine;
    #[cfg(feature = "mutation")]
    const MUTATIONS: &'static [&'static crate::mutation::MutationPoint] = &[
        &protocol::IN_CRITICAL_WAIT,
        &shared::GRACE_PERIOD,
        &shared::DEFERRED_WRITE_BACK_IGNORES_READERS,
        &shared::PARTIAL_WRITE_BACK_CLEARS_PENDING,
        &crate::engine::kit::log::lazy_home::HOME_SYNC_SKIPPED,
        &thread::WATERMARK,
        &thread::FREED_STAYS_LIVE,
        &thread::LOCKED_CHECK_TRUSTS_ANY,
        &thread::UNFENCED_DEPENDENCY,
        &shared::UNFENCED_WRITE_BACK,
        &crate::engine::kit::log::redo_log::CHECKSUM,
        &crate::engine::kit::log::redo_log::LOG_FLUSH,
        &crate::engine::kit::log::redo_log::LOG_LINE_SKIP,
    ];
    #[cfg(feature = "mutation")]
    const HOOKS: &'static [&'static crate::mutation::HookPoint] = &[
        &thread::COPY_LINKED,
        &thread::BEFORE_APPEND,
        &thread::AFTER_FENCE,
        &protocol::IN_CRITICAL,
        &thread::BEFORE_BATCH,
        &thread::BATCH_JOINED,
        &shared::HOME_COPIED,
        &shared::FIRST_UNLOCKED,
        &shared::BOUNDS_SET,
        &shared::BLOCK_RELEASED,
        &shared::ENTRY_RETIRED,
        &shared::ATTEMPT_SPARED,
        &arena::ARENA_CHANGING,
        &crate::heap::GROW_FILE_EXTENDED,
        &crate::heap::GROW_SIZE_WRITTEN,
        &crate::heap::alloc::GROW_SIZE_RAISED,
        &crate::heap::alloc::SLABS_TAKEN,
        &crate::heap::alloc::BLOCKS_CLAIMED,
    ];
    type Thread = PiscesThread;
    fn open(heap: Arc<Heap>, opts: &EngineOptions, ctx: &OpenCtx) -> Result<PiscesEngine> {
        let opts = PiscesOptions::parse(Self::NAME, opts)?;
        PiscesEngine::start(heap, opts, true, ctx.region.clone())
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
pub(crate) struct Volatile;

impl EngineDef for Volatile {
    const ID: u32 = 4;
    const NAME: &'static str = "volatile";
    const SUMMARY: &'static str =
        "baseline: Pisces' concurrency control with no persistence (the upper bound; not crash-safe)";
    const ISOLATION: Isolation = Isolation::Snapshot;
    const DURABLE: bool = false;
    const SHARING_REFUSED: Option<&'static str> = None;
    type Engine = PiscesEngine;
    type Thread = PiscesThread;
    fn open(heap: Arc<Heap>, opts: &EngineOptions, ctx: &OpenCtx) -> Result<PiscesEngine> {
        let opts = PiscesOptions::parse(Self::NAME, opts)?;
        PiscesEngine::start(heap, opts, false, ctx.region.clone())
    }
    fn option_sets() -> Vec<EngineOptions> {
        PiscesOptions::ablations()
    }
}
