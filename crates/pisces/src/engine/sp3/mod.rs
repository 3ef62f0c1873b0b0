//! The SP3 engine (SPeculative Parallel Persistence, `papers/sp3.txt`): optimistic
//! concurrency control, serializable, whose new versions become visible *before* they
//! persist; a transaction returns to its user only once every transaction it depends on
//! is persistent; recovery rebuilds the dependency DAG from per-thread logs, drops
//! what lost a predecessor and replays the rest in topological order.
//!
//! Modules, one concept each:
//! * [`options`]: early visibility or its ablation ([`options::Sp3Options`]);
//! * [`shared`]: pool-wide state and the engine ([`shared::Sp3Engine`]);
//! * [`tid`]: logical transaction ids (slot, lid) and what "persistent" means;
//! * [`index`]: the DRAM index entry (`ptr`, `ver`, `lastTid`) and the seqlock read;
//! * [`version`]: immutable DRAM versions and their epoch-based reclamation;
//! * [`log`]: the log record (dependency set + kit redo entries, lid as persistTS);
//! * [`thread`]: the read phase and the commit protocol (Algorithm 1);
//! * [`checkpoint`]: the queues of durable records, the stable marks (transitive
//!   persistence), write-back in dependency order and the `retired` watermarks that
//!   truncate the logs;
//! * [`recovery`]: the DAG, the drop rule, (parallel) replay, with [`dirty_lines`]
//!   for its flushes.
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
//! # What a read and a commit cost
//! * **Read** (the paper's: find the index entry, take `ver` / `ptr` / `lastTid`
//!   consistently, record them in the read set): a small block this transaction did
//!   not write goes through [`index::Index::lookup_small`] — the slab's entry table,
//!   a cell per 16-byte granule found with two shifts and two dependent loads, the
//!   entry's own offset and length checked against the read's — then the
//!   seqlock snapshot (whose first load of the `ver` word says in one test that the
//!   object is unlocked and allocated: [`index`], *The `ver` word*), the opacity check
//!   and a push in place — a repeated read among
//!   the first few is recorded again rather than looked for (`thread::FEW_READS`: its
//!   version is the same while the commit clock stands still; when it moved, a scan
//!   finds the earlier read); past them, a 64-bit filter says the object was not read
//!   before (else a scan or an index finds the earlier read). No
//!   lock, no hash, no allocation, no allocator state. Ours on top of the paper: the
//!   opacity check (the paper validates only at commit) — one load of the commit clock
//!   while no update commit ran since the last check, else one pass over the read set
//!   ([`thread`], *Read*, says why that is sound) — and the `Tx` layer's call into the
//!   engine (engines whose read is a home payload inline theirs, `kit::fast_reads`;
//!   SP3's read must record what it read, so it has no inline form). The first access
//!   of an object in a run, large blocks and the root slot take the slow path: the
//!   allocator's check of the offset, then the sharded map (which creates the entry
//!   from home and links it into the table). In cache lines: the entry and the
//!   version, both DRAM, where an in-place engine reads the home line only; sampling
//!   the hash table's lookups puts most of the read's own time on the entry's first
//!   load (the seqlock word), most of the container's on the version's bytes.
//! * **Read-only commit**: no validation (each read checked the set after its
//!   snapshot, so the transaction serializes at its last check: [`thread`]), no record;
//!   the predecessors still volatile are noted from the read set (the paper's step 5)
//!   if a read saw another slot's writer (each read sets a flag), and the slot's clock
//!   is reset (ours: epochs for version reclamation).
//! * **Update commit** (the paper's steps 1-5): validation, the dependency set, the
//!   publication of the new versions, one log record (whole objects) appended,
//!   flushed and fenced, the record queued for the checkpoint; the checkpoint later
//!   writes the objects home (ours: the paper leaves write-back open). Ours too: one
//!   tick of the commit clock (an atomic RMW of a word every update commit writes)
//!   before validation.
//! * **Begin**: the slot's clock (one SeqCst fence, for the epochs), one load of the
//!   fallback word and one of the commit clock (ours).
//!
//! # Decisions the paper leaves open
//! * Index entries live in DRAM ([`index`] says why and what it costs); so do versions:
//!   readers never touch persistent memory. A small block's entry is reached from its
//!   address through a per-slab table (the paper's `entryPtr` without a search);
//!   large blocks and the root slot through a sharded hash map.
//! * `isPersistent` is one monotone word per slot ([`tid`]).
//! * `lastTid` of an object read is taken together with its version (seqlock), not at
//!   commit: after validation another writer may have replaced it, and waiting for that
//!   writer would not wait for the one whose data we read.
//! * Opacity: each new read checks that the read set is still current — by the commit
//!   clock, a counter every update commit ticks once it holds its locks, while it has
//!   not moved since the last check, else by validating the set again ([`thread`],
//!   *Read*). The clock is the one shared word SP3 adds to the paper's update commit;
//!   it is not a transaction id and no version carries it.
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
//!   version and no timestamp per version (the commit clock says whether anything
//!   committed, not when a version did), so a reader could not tell which older
//!   version belongs to its snapshot. The fast path pays one load of
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
//! # Under eADR
//! The medium's flush writes nothing back; the fences stay. The log record's fence
//! completes its non-temporal stores before the transaction's `isPersistent` word is
//! set (early visibility does not change that: a dependent waits for it), the
//! checkpoint's fences drain the home writes before the `retired` watermark that lets
//! recovery skip the record and its log space be reused.
//! The checkpoint's write-back in dependency order costs only its stores and fences
//! here; its flushes, the bulk of its cost under ADR, are gone.
//!
//! # Evidence (`crates/pisces-verify/tests/engine_sp3.rs`, `tests.rs`)
//! Behaviour, crash campaigns of every crash-test workload, Elle-style histories, and
//! targeted tests of each protocol step; each step's test fails with the step removed
//! (the engine's mutation points, `Sp3::MUTATIONS`, and bugs injected by hand, listed in
//! `crates/pisces-verify/tests/engine_sp3.rs`).
//! The fallback: a long reader and a long update transaction beside a writer commit
//! within 5 s (without the fallback they never did); a holder whose attempt waits for
//! a writer holds it only until its deadline (`crates/pisces-verify/tests/engine_sp3.rs`); holders of an `sp3` and
//! a `spht` pool writing each other do not deadlock (`crates/pisces-verify/tests/engine_spht.rs`).
//! The commit clock (`tests.rs`): after a commit that changed an object read, a new
//! read and a write of another object it wrote conflict, and so does a new read whose
//! snapshot the commit overtook before the check; without the tick (mutation point
//! `no-commit-tick`) the first two see mixed states. A repeated read past the first few is recorded once
//! and keeps its version, also past the filter's 64 bits; among the first few reads
//! it keeps its version after a commit changed the object and is recorded a bounded
//! number of times.
//!
//! # Options
//! * `early_visibility` (default `true`): the paper's protocol. `false` is the ablation
//!   that unlocks only after persisting (the "NVM-TX" baseline of the paper's Fig. 6);
//!   dependencies are then always persistent already.

mod checkpoint;
mod dirty_lines;
mod index;
mod log;
mod options;
mod recovery;
mod shared;
mod thread;
mod tid;
mod version;

#[cfg(test)]
mod tests;

use crate::engine::{EngineDef, EngineOptions, Inspection, OpenCtx};
use crate::heap::layout::Regions;
use crate::heap::Heap;
use crate::tx_options::Isolation;
use crate::Result;
pub use options::Sp3Options;
use shared::Sp3Engine;
use std::sync::Arc;
use thread::Sp3Thread;

/// Registry entry of the SP3 engine.
pub(crate) struct Sp3;

impl EngineDef for Sp3 {
    const ID: u32 = 6;
    const SHARING_REFUSED: Option<&'static str> = Some(
        "its versions and index live in the memory of one process, and a version is visible before its record persists",
    );
    const NAME: &'static str = "sp3";
    const SUMMARY: &'static str =
        "SP3: serializable OCC, versions visible before they persist, dependency DAG recovery";
    const ISOLATION: Isolation = Isolation::Serializable;
    type Engine = Sp3Engine;
    #[cfg(feature = "mutation")]
    const MUTATIONS: &'static [&'static crate::mutation::MutationPoint] = &[
        &thread::SKIP_VALIDATION,
        &thread::NO_DEPENDENCIES,
        &thread::NO_DEPENDENCY_WAIT,
        &thread::NO_COMMIT_TICK,
        &checkpoint::HOME_BEFORE_PREDECESSORS,
        &recovery::REPLAY_FLUSH,
        &crate::engine::kit::recovery::replay_parts::REPLAY_PART_MASK,
        &crate::engine::kit::recovery::per_slot::PARSE_SLOT_ORDER,
    ];
    #[cfg(feature = "mutation")]
    const HOOKS: &'static [&'static crate::mutation::HookPoint] = &[&thread::BEFORE_PERSIST];
    type Thread = Sp3Thread;
    fn option_sets() -> Vec<EngineOptions> {
        [true, false]
            .map(|early_visibility| Sp3Options { early_visibility }.into())
            .to_vec()
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
        Sp3Engine::open(heap, Sp3Options::parse(Self::NAME, opts)?, ctx)
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
