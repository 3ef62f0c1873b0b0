//! The `timestone` engine (ASPLOS 2020): MVCC with TOC logging — a volatile version
//! log (TLog), a persistent operation log (OLog) and a persistent checkpoint log
//! (CLog) — re-execution of operations in recovery, and an isolation level per
//! transaction.
//!
//! # The algorithm
//! * **TLog** ([`tlog`]; the kit's version chains and object index): every object written in this run has a version
//!   chain in DRAM, newest first, each version stamped with its commit timestamp.
//!   Readers pick the newest version at or below their snapshot.
//! * **The home word** ([`tlog`], *The home word*; the paper's per-object pointer to
//!   its versions): the object's header word says whether home holds its newest
//!   version and since which timestamp X. A reader at snapshot S reads home after one
//!   load of it when X ≤ S — no index lookup, no chain created — and goes to the chain
//!   otherwise. Commits mark it dirty before their timestamp; checkpoints mark it
//!   clean once home holds the newest version.
//! * **OLog** ([`thread`]): per thread, in the thread's log region(s) (the kit's
//!   redo-log ring with the compact framing of [`olog`], [`OLOG_FRAMING`]). At commit the only
//!   persistent write is one record: the registered
//!   operation's id and argument bytes plus the blocks it allocated, stamped with the
//!   commit timestamp; a plain `run` closure (no registered operation) falls back to
//!   its physical write set (whole objects written, allocations, frees) — it costs
//!   every written object's full size in the OLog instead of a few argument bytes.
//!   The OLog record of a registered operation is a compact *operation record*
//!   ([`olog`]): a 16-byte header (CRC32C; 16 bits of the sequence number, the other 16
//!   bound by the checksum; kind, length, the 48-bit commit timestamp; and a 16-bit tag
//!   holding the operation's index in the pool's operation table ([`optable`]), the
//!   argument padding and the number of block words), the argument bytes (padded to
//!   8; *packed* — length, a mask of nonzero bytes, the nonzero bytes — when that is
//!   shorter) and one 8-byte word per allocation (`Block::pack`: the size class in 6
//!   bits, the offset / 16 above, a free flag), or per run of allocations of
//!   consecutive blocks of one class a block word and a run word (the thread's
//!   allocator cache hands blocks out in address order). A hash update's record is 32
//!   bytes for a remove, 40 for an insert (16 argument bytes, too few of them zero to
//!   pack); a TPC-C new-order's is about 16 + 64 (its 144-byte input packed) + 24
//!   (order, new-order and a run of order lines). Why: the record is the one persistent write
//!   of the commit and, on workloads whose keys are rarely touched twice between
//!   checkpoints, the largest share of the bytes made durable; its earlier form (an
//!   8-byte operation word with the 32-bit id, 16 bytes per allocation) was 40–56.
//!   Torn and damaged records are told apart as before (a torn record fails its
//!   checksum; a valid later one proves damage, and recovery refuses the pool). An
//!   operation with more than 31 block words, or whose id finds no free table slot
//!   (127), is logged with the kit's general entries (8-byte operation word, 16 bytes
//!   per block). The pool's OLog format word ([`optable`]) makes pools written by
//!   builds with the earlier record form refuse to open.
//! * **CLog** ([`clog`]): when the distinct dirty bytes pass a high-water mark
//!   (`checkpoint_pct` of the CLog budget, default 90), or a slab's worth of freed
//!   large blocks waits for reuse, or an OLog is full, or the allocator runs out of space,
//!   or [`crate::Pool::write_back`] or a clean close asks for it (*The close* below), one
//!   checkpoint writes the newest
//!   version at a cut K of every object changed since the last one into the CLog, then
//!   home, then persists K_done = K. OLog records at or below K_done are recycled.
//!   Only the 8-byte words that differ from home are written (home holds the state at
//!   K_done), blocks allocated since K_done go home directly (fenced before the CLog
//!   record, with no CLog copy: they are not part of the state at K_done, and their
//!   allocator bits go with them, with no CLog entry), other allocator changes take
//!   8 bytes each in the CLog and each changed bitmap word is written home once per
//!   checkpoint (however many of its blocks changed), and a block
//!   allocated and freed again within the window touches neither (see
//!   `clog::net_bit_changes` for why that is crash-safe). Small blocks freed by a
//!   complete commit are handed out again inside the window; one that was live at
//!   K_done then goes through the CLog, not the fresh-block path (`clog`, *Reuse
//!   inside a window*).
//! * **TLog memory**: chains are truncated at every commit below the oldest running
//!   snapshot (not by checkpoints), so DRAM holds the versions running snapshots need
//!   plus one base version per object written in this run (or read while its home
//!   word was dirty).
//! * **Recovery** ([`recovery`]): repair a crashed checkpoint from the CLog, then
//!   re-execute the OLog records above K_done in commit-timestamp order on the
//!   recovered state, then checkpoint. Every open does it, after a crash and after a
//!   clean close alike.
//! * **The close** (ours; the paper says nothing of it): a clean close checkpoints the
//!   window (no snapshot is open, so the cut is the clock) and then empties every
//!   OLog (recovery's step 6), so a closed pool holds its committed state at home and
//!   in nothing else: the next open re-executes nothing, and damage to a log of a
//!   closed pool (a zeroed page) loses no commit. Why: a window left in the OLogs is
//!   state that only its records hold, and the loss of the newest records of a log
//!   reads as a torn tail, so damage there would open an older state with no error.
//!   What it costs: a close writes home what the window has not coalesced yet (on a
//!   short run most of the bytes the window dirtied), which the next open's recovery
//!   would otherwise have written. `Pool::sync` does not checkpoint (it leaves the
//!   window in the OLogs, durable); [`crate::Pool::write_back`] does (leak checks, a
//!   bench's preload). A crash during the close leaves a state a crash can leave: the
//!   checkpoint is a complete, self-repairing unit, and records at or below K_done
//!   are skipped (invariant 3).
//!
//! # Write amplification
//! Bytes made durable (OLog, CLog, home, allocator metadata, what a close writes —
//! the last window's checkpoint, see *The close*) per byte the program changed, as `pisces-bench` defines
//! it for every engine (the hash insert credits 80 bytes — key, value and the link to the
//! node — a remove 8, a TPC-C index entry 24 — key, pointer, the leaf's count). The
//! README has the measured figures (emulated DRAM medium).
//!
//! **The coalescing window.** A checkpoint writes each object once with its newest
//! value, so the more updates a checkpoint covers, the fewer bytes per update reach
//! the CLog and home. What bounds the window: the CLog budget (`clog_mib`, the
//! high-water mark is `checkpoint_pct` of it; allocations and frees take 16 bytes of
//! it each, objects 16 + their length once per window), the OLog (`olog_regions`: a
//! full OLog forces a checkpoint), the large blocks freed and waiting for reuse
//! (`Shared::freed_high_water`; small blocks are reused inside the window, see
//! `clog`), and the close, which checkpoints the last window whatever its size (*The
//! close*). `pisces-bench --engine-options timestone:clog_mib=63,olog_regions=8` runs
//! the bench with the largest window; `probes/ts_window.rs` in the bench crate
//! compares window sizes.
//!
//! **The default window** ([`options`]) is sized by the pool: a CLog of a quarter of
//! the pool (at most 63 MiB), a checkpoint at 90 % of it, and as many OLog regions
//! (up to 8) as keep every thread's OLog within an eighth of it. Why: the window must span many updates per
//! object for a checkpoint to coalesce, and the pool's size is the one measure of the
//! data an engine is given at creation; the earlier default (half a thread log of
//! CLog, one region of OLog) checkpointed every few thousand updates, so almost
//! nothing coalesced and write amplification sat near 2 on the hash table. What it
//! costs: pool space (up to three eighths of the pool no longer holds heap), the DRAM
//! of a wider window (below), and a longer recovery (up to a window of records to
//! re-execute). The read path pays too: an object written in the window is read
//! through its chain, not at home (its home word is dirty until the checkpoint), so a
//! wider window sends more reads to the DRAM index (for a small block, its direct
//! table: two dependent loads).
//!
//! **DRAM cost of a window**, all bounded: each pending item until the checkpoint
//! (a few per update) — bounded by the OLog, since every commit has a record of at
//! least 32 bytes —, the checkpointer's `charged` and `bits` maps (one entry per
//! distinct dirty object and per allocated or freed block; beside `bits`, 8 bytes per
//! block of every small slab one of whose blocks was allocated or freed in the run,
//! kept for the run — half the slab's size for the 16-byte class, an eighth for 64-byte
//! blocks, as the direct chain table), and the reuse lists (one
//! entry per free small block they hold, each block at most once). The TLog's
//! versions do not grow with the window (chains are truncated at commit). The heap
//! grows by at most the small blocks live at K_done that are freed inside the window
//! (held until the checkpoint, unless the allocator runs out or `eager_reuse` is set).
//!
//! **Where the floor is.** However large the window, an update makes durable its OLog
//! record (the 16-byte header, its arguments — packed when that is shorter — and a
//! word per allocation or run of allocations), and every word whose value differs
//! between a window's start and end reaches home once (with a CLog copy first if its
//! object was live at K_done). The rest is kept off persistent memory by design: slab
//! formatting writes no header words on this engine (the home word is safe whatever
//! value it holds, and it is never flushed),
//! fresh blocks' allocator bits take no CLog entry, consecutive allocations of one
//! class take one run word, and B+-tree leaves split at an insert in their upper
//! half, so that ascending keys (a district's order ids) do not leave half-full
//! leaves behind.

//! # What a read and a commit cost
//! * **Read, snapshot isolation** (inlined in `Tx::read`, the kit's
//!   `FastReads::versioned`): the block's allocation bit and its home word, one compare
//!   against S, then the home payload: the paper's read of an object with no newer
//!   version. Declined (to the engine's `read`): a dirty word or one clean above S, a
//!   block allocated since the last checkpoint (bit not yet home), large blocks, the
//!   root slot, every read after the transaction's first write.
//! * **Read, engine path** (serializable, linearizable, declined reads): validation of
//!   the pointer (`locate`: for a block allocated since the last checkpoint, the
//!   committed allocation state, from a word per small block that follows the pending
//!   map without its lock — ours: the paper's allocator state is not versioned), the
//!   own write set, the home word (a serializable read
//!   notes the word it saw, validated at commit by one load), and only then the DRAM
//!   index (ours, in place of the paper's pointer: for a small block a direct table
//!   from the block to its chain, two dependent loads and no lock, filled at the
//!   object's first access in the run; large blocks and the root slot in a sharded
//!   hash map) and the chain walk (the paper's). In cache lines: the home word, the
//!   chain, the version — three dependent misses for an object the window dirtied
//!   where the paper's header pointer takes two, and where an in-place engine reads one
//!   (the home line): on the hash table's update mix this, not instructions, is what
//!   keeps the engine below the undo baseline.
//! * **Commit**: the OLog record (the paper's; its compact form is ours), room in the
//!   OLog and the budget, the write set locked through the index (ours), each home
//!   word marked dirty (one store, ours), versions pushed, the clock ticked,
//!   validation, one OLog append and fence (the paper's one persistent write), final
//!   stamps, truncation, the wait for smaller timestamps (ours: snapshots are
//!   horizons). Each checkpoint (the paper's CLog, global here) also locks every object
//!   it wrote once, to mark its word clean.
//!
//! Measured costs per operation are in `docs/engines/timestone.md`.
//!
//! # Isolation (per transaction, `TxOptions::isolation`)
//! * **Snapshot** (default): reads at the start timestamp S; first committer wins.
//! * **Serializable**: snapshot reads, plus read-set validation after the commit
//!   timestamp C is taken: an object read that is locked by another committer or was
//!   committed after S aborts the transaction. The transaction is then equivalent to
//!   running alone at C. Read-only transactions serialize at S (no validation).
//! * **Linearizable**: the same protocol. S is the horizon of complete commits at
//!   begin and C is taken at commit, and a commit returns only once it and every
//!   commit with a smaller timestamp are complete (`Shared::wait_predecessors`), so
//!   each transaction's serialization point (S for read-only, C for update
//!   transactions) lies inside its real-time interval: a transaction sees every one
//!   whose commit returned before it began, which is the real-time order
//!   linearizability adds. The argument needs the `committing` word of each slot to
//!   be a lower bound of the timestamp in flight (see `shared`): a snapshot never
//!   falls below a commit that has returned. `ISOLATION = Linearizable`, so all three
//!   are accepted.
//! * Registered operations run at least serializable ([`crate::Pool::run_op`]): their
//!   re-execution in timestamp order must reproduce their original reads.
//!
//! # Timestamps: one global logical clock (`kit::cc::clock`)
//! A fetch-add counter gives unique, totally ordered commit timestamps whose order
//! agrees with every conflict (write locks are held across the increment, validation
//! runs after it), which is exactly what ordering the OLog replay needs. A physical
//! clock with an uncertainty bound (the paper's choice on many sockets) would need
//! waits of the bound's length and ties broken by slot; on this 2-core machine the
//! shared counter is cheap.
//!
//! # Decisions and departures from the paper
//! * The object → chain index is the kit's version index (as in the `mvcc` baseline):
//!   a direct table per slab for small blocks, a sharded DRAM hash map for the rest;
//!   the header word holds the clean/dirty state and X instead of a pointer to the
//!   chain (a pointer would need resetting after a crash; the state is tagged with the
//!   run, and a word of an earlier run means "no commit in this run": home is newest).
//!   The word is never flushed: it is not part of the durable state.
//! * A checkpoint's cut is at or below every snapshot still reading (`clog`, step 1)
//!   instead of the paper's grace period before write-back: home never changes under
//!   a reader holding a pointer into it, and no checkpoint waits for a reader (a
//!   commit may run one while the OLog or the budget is full).
//! * Checkpoints are global and serialized (one cut K for all objects) rather than
//!   per-thread and object-granular: recovery needs one K_done to know which OLog
//!   records to re-execute. The thread that crosses the high-water mark runs it.
//! * **Snapshots are horizons**: a transaction's start timestamp S is the newest
//!   clock value below which every commit is complete (final stamps, OLog durable),
//!   computed at begin by one scan of the slots (`Shared::horizon`). Readers therefore
//!   never wait — not for a committer, not for persistent memory — and never see a
//!   transaction that a crash could lose, so no recovered state lacks a transaction
//!   another one built on. In exchange a committer, once complete, waits until every
//!   commit with a smaller timestamp is complete too (`Shared::wait_predecessors`: at
//!   most the OLog fences already in flight) before `commit` returns, so a transaction
//!   that begins after it returned sees it (read-your-writes, linearizability).
//! * Allocator bitmaps are written by checkpoints (CLog BLOCKS entries, each changed
//!   bitmap word once), never at commit; a freed block becomes reusable once the checkpoint holding its free is
//!   complete (no grace period needed: old snapshots read DRAM versions).
//! * Operation arguments are copied bytes of a `Pod` type; pointers in arguments are
//!   fine, because re-executed allocations return the logged blocks.
//!
//! # Invariants
//! 1. Home holds exactly the state at K_done, except during a checkpoint's step 4,
//!    which only happens after that checkpoint's CLog record is durable.
//! 2. A version is visible (stamp `C`) only after its OLog record is durable.
//! 3. Every transaction with C > K_done whose commit returned has a durable OLog
//!    record; records at or below K_done may be dropped. This holds across a clean
//!    close too (the close empties the OLogs only once K_done covers every commit), so
//!    an open's recovery finds every such record whether the last run crashed or closed.
//! 4. See `tlog` for the chain invariants and reclamation.
//! 5. An operation-table slot is durable before the first OLog record naming its
//!    index ([`optable`]).
//! 6. A home word clean at X (this run's tag): home holds the object's newest
//!    version, committed at X, and no commit of this run has locked the object since
//!    the checkpoint that stored the word ([`tlog`], *The home word*).
//! 7. A checkpoint's cut K is at or below the snapshot of every transaction in its
//!    reading phase, so home holds, while such a transaction runs, versions at or
//!    below its snapshot only.

//!
//! # Under eADR
//! The medium's flush writes nothing back; the fences stay: the OLog record is drained
//! before `commit` returns (the acknowledged operation must survive), a checkpoint's
//! home writes before its CLog record and `K_done`, and fresh blocks before the CLog
//! record that names them. The checkpoint's word diff, which writes home only the words
//! that changed, saves stores under both domains and written-back lines, which only ADR
//! pays for, under ADR alone.
//!
//! # Parts
//! * [`options`]: the window's options (`checkpoint_pct`, `clog_mib`, `olog_regions`,
//!   `eager_reuse`);
//! * [`shared`]: pool-wide state, the engine ([`shared::TimestoneEngine`]) and its
//!   start around recovery;
//! * [`thread`]: one thread's transactions;
//! * the paper's three logs: [`tlog`] (DRAM versions), [`olog`] (the operation log's
//!   format), [`clog`] (checkpoints); [`optable`]: the operation table the OLog's
//!   records name operations by;
//! * [`recovery`]: checkpoint repair and operation re-execution (the engine's open),
//!   and the inspection of a pool nobody runs.

mod clog;
mod olog;
mod optable;
mod options;
mod recovery;
mod shared;
mod thread;
mod tlog;

#[cfg(test)]
mod tests;

use crate::engine::{EngineDef, EngineOptions, Inspection, OpenCtx};
use crate::heap::layout::Regions;
use crate::heap::Heap;
use crate::tx_options::Isolation;
use crate::Result;
use olog::{olog_len, OLOG_FRAMING};
pub use options::TimestoneOptions;
use shared::TimestoneEngine;
use std::sync::Arc;
use thread::TimestoneThread;

/// Registry entry.
pub(crate) struct Timestone;

impl EngineDef for Timestone {
    const ID: u32 = 8;
    const SHARING_REFUSED: Option<&'static str> = Some(
        "its version log holds committed state that is not home yet, which only the process that committed it can reach",
    );
    const NAME: &'static str = "timestone";
    const SUMMARY: &'static str =
        "TimeStone: MVCC with TOC logging (DRAM versions, operation log, checkpoint log), per-transaction isolation";
    const ISOLATION: Isolation = Isolation::Linearizable;
    const DEFAULT_ISOLATION: Isolation = Isolation::Snapshot;
    type Engine = TimestoneEngine;
    #[cfg(feature = "mutation")]
    const MUTATIONS: &'static [&'static crate::mutation::MutationPoint] = &[
        &thread::OLOG_PERSIST,
        &clog::CHECKPOINT_ORDER,
        &tlog::VISIBILITY,
        &thread::VALIDATION,
        &shared::COMMIT_GUARD,
        &clog::CHECKPOINT_DIFF,
        &clog::FRESH_FENCE,
        &olog::OP_BLOCK_CODE,
        &clog::REUSE_FRESH,
        &clog::FRESH_BITS,
        &olog::OP_BLOCK_RUN,
        &olog::ARGS_PACKING,
        &shared::REUSE_AFTER_SNAPSHOT,
    ];
    type Thread = TimestoneThread;

    fn option_sets() -> Vec<EngineOptions> {
        TimestoneOptions::option_sets()
    }

    fn regions(ctx: &OpenCtx) -> Regions {
        TimestoneOptions::regions(ctx)
    }

    fn open(heap: Arc<Heap>, opts: &EngineOptions, ctx: &OpenCtx) -> Result<TimestoneEngine> {
        TimestoneEngine::open(heap, TimestoneOptions::parse(Self::NAME, opts)?, ctx)
    }

    fn inspect(heap: &Heap) -> Inspection {
        recovery::inspect(heap)
    }
}
