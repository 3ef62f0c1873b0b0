//! The SP3 engine (SPeculative Parallel Persistence, `papers/sp3.txt`): optimistic
//! concurrency control, serializable, whose new versions become visible *before* they
//! persist; a transaction returns to its user only once every transaction it depends on
//! is persistent; recovery rebuilds the dependency DAG from per-thread logs, drops
//! what lost a predecessor and replays the rest in topological order.
//!
//! Modules, one concept each:
//! * [`tid`]: logical transaction ids (slot, lid) and what "persistent" means;
//! * [`index`]: the DRAM index entry (`ptr`, `ver`, `lastTid`) and the seqlock read;
//! * [`version`]: immutable DRAM versions and their epoch-based reclamation;
//! * [`record`]: the log record (dependency set + kit redo entries, lid as persistTS);
//! * [`thread`]: the read phase and the commit protocol (Algorithm 1);
//! * [`checkpoint`]: the queues of durable records, the stable marks (transitive
//!   persistence), write-back in dependency order and the `retired` watermarks that
//!   truncate the logs;
//! * [`recovery`]: the DAG, the drop rule, (parallel) replay.
//!
//! # Invariants
//! 1. A published version is immutable; a pointer `read` returns stays valid and
//!    unchanged until the transaction ends (epochs, [`version`]).
//! 2. Home (persistent memory) is written only by the checkpoint, only from durable
//!    records whose predecessors are all retired (hence persistent), and readers never
//!    read home except to make an object's first version while no entry exists.
//! 3. A visible transaction always persists (its log space was reserved before it
//!    became visible, nothing after visibility can fail or block on another thread), so
//!    a dependent never waits forever.
//! 4. Checkpoint invariant R ([`checkpoint`]): a retired record's predecessors are
//!    retired, durably, so recovery never replays an old record over a newer value.
//!    The checkpoint keeps it by rounds (no record of a round depends on another
//!    slot's record of the same round), recovery by an all-or-nothing intent record.
//!
//! # Decisions the paper leaves open
//! * Index entries live in DRAM ([`index`] says why and what it costs); so do versions:
//!   readers never touch persistent memory.
//! * `isPersistent` is one monotone word per slot ([`tid`]).
//! * `lastTid` of an object read is taken together with its version (seqlock), not at
//!   commit: after validation another writer may have replaced it, and waiting for that
//!   writer would not wait for the one whose data we read.
//! * Opacity: each new read revalidates the read set ([`thread`]).
//! * A reader that finds an object locked aborts at once (it would fail validation).
//! * Locks are no-wait: a locked object aborts the writer; `run` retries with back-off.
//! * A bound on attempts (the paper has none: its validation aborts a reader whenever
//!   a writer replaced an object it read, so a long read-only scan beside a steady
//!   writer never commits): a transaction that aborted
//!   [`kit::cc::fallback::THRESHOLD`](crate::engine::kit::cc::fallback::THRESHOLD) times in a
//!   row takes the pool's fallback word, waits for the transactions already running,
//!   and runs its next attempt while update transactions wait at `begin` (each wait
//!   bounded by the holder's deadline) — so read-only transactions, and update
//!   transactions too, commit within a bounded number of attempts ([`thread`],
//!   *Fallback*). Not a snapshot of old versions: SP3 keeps only each object's newest
//!   version and no global clock (the counter the paper avoids), so a reader could not
//!   tell which older version belongs to its snapshot. The fast path pays one load of
//!   the word per `begin`.
//! * Read-only transactions have no id and no record, but wait for their dependencies.
//! * Log records hold whole objects; write-back and log truncation are a checkpoint run
//!   by the threads themselves (under a try-lock: when a log is half full, before an
//!   allocation while committed frees wait, when log space or heap space runs out, when
//!   a thread leaves, at `Pool::sync` and close), not by a background thread — runs on
//!   the crash simulator stay deterministic.
//! * "Persistent" for a predecessor means durable *with all its predecessors*
//!   (stable marks, [`checkpoint::Checkpointer::stabilize`]): the paper sets
//!   isPersistent after step 5; marking a transaction persistent after its own fence
//!   would let a dependent of a dependent return before a crash that drops it.
//! * Frees take effect in the checkpoint, and the block is reused only after the
//!   freeing record is retired.
//! * Recovery replays in parallel over 4 KiB chunks of the pool, each thread walking
//!   the whole topological order ([`recovery`]).
//! * Persistent state of the engine: the kit's per-thread redo logs (one ring per slot;
//!   persistTS = lid) and, in the engine area's second page, one `retired` word per
//!   slot and recovery's intent record. The kit's watermark word is not used.
//! * Transaction ids continue across runs (a slot restarts at its `retired` word + 1);
//!   no `lastTid` survives a run (the index is DRAM), so dependencies never cross runs.
//!
//! # Evidence (`crates/pisces-verify/tests/engine_sp3.rs`, `tests.rs`)
//! Behaviour, crash campaigns of every crash-test workload, Elle-style histories, and
//! targeted tests of each protocol step; each step's test fails with the step removed
//! (`inject_bug`, and bugs injected by hand, listed in `crates/pisces-verify/tests/engine_sp3.rs`).
//! The fallback: a long reader and a long update transaction beside a writer commit
//! within 5 s (without the fallback they never did); a holder whose attempt waits for
//! a writer holds it only until its deadline (`crates/pisces-verify/tests/engine_sp3.rs`); holders of an `sp3` and
//! a `spht` pool writing each other do not deadlock (`crates/pisces-verify/tests/engine_spht.rs`).
//!
//! # Options
//! * `early_visibility` (default `true`): the paper's protocol. `false` is the ablation
//!   that unlocks only after persisting (the "NVM-TX" baseline of the paper's Fig. 6);
//!   dependencies are then always persistent already.

pub mod checkpoint;
mod dirty_lines;
pub mod index;
pub mod record;
pub mod recovery;
pub mod shared;
pub mod thread;
pub mod tid;
pub mod version;

#[cfg(test)]
mod tests;

use crate::engine::{Engine, EngineDef, EngineOptions, Inspection, OpenCtx};
use crate::heap::alloc::Allocator;
use crate::heap::layout::Regions;
use crate::heap::{Heap, ROOT_SLOT_OFFSET};
use crate::tx_options::Isolation;
use crate::{Error, Result};
use shared::Shared;
use std::sync::Arc;

/// Protocol steps that tests remove on purpose (option `inject_bug`, only in builds with
/// `cfg(test)` or the `mutation` feature)
/// to show that the test guarding each step fails without it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Bug {
    /// None: the real protocol.
    None,
    /// Commit does not validate the read set (step 1), nor does a read.
    SkipValidation,
    /// `wait_durable` does not wait for predecessors (step 5).
    NoDependencyWait,
    /// The checkpoint writes home and retires before the predecessors are retired.
    HomeBeforePredecessors,
    /// Records carry no dependency set (step 2).
    NoDependencies,
}

impl std::str::FromStr for Bug {
    type Err = ();
    fn from_str(s: &str) -> std::result::Result<Bug, ()> {
        Ok(match s {
            "none" => Bug::None,
            "skip_validation" => Bug::SkipValidation,
            "no_dependency_wait" => Bug::NoDependencyWait,
            "home_before_predecessors" => Bug::HomeBeforePredecessors,
            "no_dependencies" => Bug::NoDependencies,
            _ => return Err(()),
        })
    }
}

/// The SP3 engine's options.
#[derive(Clone, Copy, Debug)]
pub struct Sp3Options {
    /// Unlock before persisting (the paper) or after (ablation).
    pub early_visibility: bool,
    pub(crate) bug: Bug,
    /// Test hook (`persist_delay_ms`, same builds as `inject_bug`): slot 0 sleeps this
    /// long between visibility and persistence, so tests can act inside that window.
    pub(crate) persist_delay_ms: u64,
}

impl Sp3Options {
    fn parse(o: &EngineOptions) -> Result<Sp3Options> {
        let keys: &[&str] = if cfg!(any(test, feature = "mutation")) {
            &["early_visibility", "inject_bug", "persist_delay_ms"]
        } else {
            &["early_visibility"]
        };
        o.only(Sp3::NAME, keys)?;
        Ok(Sp3Options {
            early_visibility: o.parse_or(Sp3::NAME, "early_visibility", true)?,
            bug: o.parse_or(Sp3::NAME, "inject_bug", Bug::None)?,
            persist_delay_ms: o.parse_or(Sp3::NAME, "persist_delay_ms", 0)?,
        })
    }
}

/// Registry entry of the SP3 engine.
pub struct Sp3;

impl EngineDef for Sp3 {
    const ID: u32 = 6;
    const NAME: &'static str = "sp3";
    const SUMMARY: &'static str =
        "SP3: serializable OCC, versions visible before they persist, dependency DAG recovery";
    const ISOLATION: Isolation = Isolation::Serializable;
    type Engine = Sp3Engine;
    type Thread = thread::Sp3Thread;
    fn option_sets() -> Vec<EngineOptions> {
        vec![
            EngineOptions::new().set("early_visibility", true),
            EngineOptions::new().set("early_visibility", false),
        ]
    }
    fn regions(ctx: &OpenCtx) -> Regions {
        Regions {
            logs_per_thread: 1,
            // Page 1: the kit's watermark word (unused) and the root slot; page 2 on:
            // one `retired` word per slot, then recovery's intent record.
            engine_area_bytes: checkpoint::engine_area_bytes(ctx.max_threads),
        }
    }
    fn open(heap: Arc<Heap>, opts: &EngineOptions, ctx: &OpenCtx) -> Result<Sp3Engine> {
        let opts = Sp3Options::parse(opts)?;
        let l = *heap.layout();
        if l.engine_area_size < checkpoint::engine_area_bytes(l.max_threads) {
            return Err(Error::Corrupt(format!(
                "the engine area ({} bytes) has no room for {} retired words",
                l.engine_area_size, l.max_threads
            )));
        }
        let rec = recovery::recover(&heap, ctx.recovery_threads)?;
        let alloc = Arc::new(Allocator::rebuild(heap.clone())?);
        // The root slot's header word is not used by this engine; keep it empty.
        heap.atomic_u64(ROOT_SLOT_OFFSET)
            .store(0, std::sync::atomic::Ordering::Relaxed);
        heap.persist(ROOT_SLOT_OFFSET, 8);
        let sh = Arc::new(Shared::new(heap, alloc, opts, &rec.next_lid, &rec.next_seq));
        Ok(Sp3Engine { sh, recovered: rec })
    }
    fn inspect(heap: &Heap) -> Inspection {
        let l = heap.layout();
        if l.engine_area_size < checkpoint::engine_area_bytes(l.max_threads) {
            return Inspection {
                lines: Vec::new(),
                problems: vec!["engine area too small for the retired words".into()],
            };
        }
        recovery::inspect(heap)
    }
}

/// The SP3 engine over one pool.
pub struct Sp3Engine {
    sh: Arc<Shared>,
    #[allow(dead_code)] // read by tests
    recovered: recovery::Recovered,
}

impl Engine for Sp3Engine {
    type Thread = thread::Sp3Thread;
    fn thread(&self, slot: usize) -> Result<thread::Sp3Thread> {
        if slot >= self.sh.slots.len() {
            return Err(Error::TooManyThreads(self.sh.slots.len()));
        }
        Ok(thread::Sp3Thread::new(self.sh.clone(), slot))
    }
    /// Write everything durable home and retire it (pool close).
    fn quiesce(&self) {
        self.sh.checkpoint(true);
    }
    fn heap(&self) -> Option<&Arc<Heap>> {
        Some(&self.sh.heap)
    }
    /// Every transaction visible now becomes durable (deferred-durability commits of
    /// all threads included), then the medium syncs.
    fn sync(&self) -> Result<()> {
        self.sh.wait_all_visible_persistent();
        self.sh.heap.medium().sync_all()
    }
}
