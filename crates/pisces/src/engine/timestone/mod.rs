//! The `timestone` engine (ASPLOS 2020): MVCC with TOC logging — a volatile version
//! log (TLog), a persistent operation log (OLog) and a persistent checkpoint log
//! (CLog) — re-execution of operations in recovery, and an isolation level per
//! transaction.
//!
//! # The algorithm
//! * **TLog** ([`tlog`]; the kit's version chains and object index): every object touched in this run has a version
//!   chain in DRAM, newest first, each version stamped with its commit timestamp.
//!   Readers pick the newest version at or below their snapshot and never read home
//!   (after the first access, which copies home into a base version).
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
//!   (`checkpoint_pct` of the CLog budget, default 50), or a slab's worth of freed
//!   large blocks waits for reuse, or an OLog is full, or the allocator runs out of space,
//!   or the pool closes, one checkpoint writes the newest
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
//!   plus one base version per object touched in this run.
//! * **Recovery** ([`recovery`]): repair a crashed checkpoint from the CLog, then
//!   re-execute the OLog records above K_done in commit-timestamp order on the
//!   recovered state, then checkpoint.
//!
//! # Write amplification
//! Bytes made durable (OLog, CLog, home, allocator metadata, the checkpoint at pool
//! close included) per byte the program changed, as `pisces bench` defines it for
//! every engine (the hash insert credits 80 bytes — key, value and the link to the
//! node — a remove 8, a TPC-C index entry 24 — key, pointer, the leaf's count). The
//! README has the measured figures (emulated DRAM medium).
//!
//! **The coalescing window.** A checkpoint writes each object once with its newest
//! value, so the more updates a checkpoint covers, the fewer bytes per update reach
//! the CLog and home. What bounds the window: the CLog budget (`clog_mib`, the
//! high-water mark is `checkpoint_pct` of it; allocations and frees take 16 bytes of
//! it each, objects 16 + their length once per window), the OLog (`olog_regions`: a
//! full OLog forces a checkpoint; at 36 bytes per hash update the largest OLog, 32
//! MiB, holds about 930 000 updates), the large blocks freed and waiting for reuse
//! (`Shared::freed_high_water`; small blocks are reused inside the window, see
//! `clog`), and, in a benchmark, the run itself (the pool's close checkpoints what is
//! left, and that is counted). `pisces bench --engine-options
//! timestone:clog_mib=63,olog_regions=8` runs the bench with the largest window;
//! `probes/ts_window.rs` in the bench crate compares window sizes.
//!
//! **DRAM cost of a window**, all bounded: each pending item (about 40 bytes; 2–3 per
//! hash update, about 25 per new-order) until the checkpoint — bounded by the OLog
//! (every commit has a record of at least 32 bytes), so at most about 120 MB for
//! the largest OLog on the hash table —, the checkpointer's `charged` and `bits` maps
//! (one entry per distinct dirty object and per allocated or freed block), and the
//! reuse lists (one entry per free small block they hold, each block at most once).
//! The TLog's versions do not grow with the window (chains are truncated at commit).
//! The heap grows by at most the small blocks live at K_done that are freed inside
//! the window (held until the checkpoint, unless the allocator runs out or
//! `eager_reuse` is set).
//!
//! **Where the floor is.** Hash table: the OLog record alone is 32 bytes for a
//! remove and 40 for an insert (16-byte header, 16 argument bytes — map handle and
//! key —, one block word per allocation), 36 on average for 44 credited: 0.82 before
//! anything else. Every key whose state differs between the run's start and end must
//! reach home once (an inserted node, about 90 bytes with its bitmap share, or a
//! changed link word), and with uniformly random keys about half the keys touched an
//! odd number of times end up changed; those bytes are amortised only over the
//! updates of the window, so the run length decides: with 40 000 keys, 20 % updates
//! and 10-second runs (about 10⁶ updates, one or two windows) the figure is below
//! 1; at 2 %
//! updates 10 seconds are about 10⁵ updates, about 2.5 per key, and the close
//! checkpoint's roughly 2 MB of changed nodes add about 16 bytes per update (1.2
//! in total); runs of tens of seconds, or an OLog record smaller than 36 bytes, are
//! what would bring it below 1. TPC-C new-order (about 1 220 credited bytes): the
//! new rows' nonzero words (about 776 bytes) and their index entries in B+-tree
//! leaves (16 per entry and the leaf's count, about 200 with full leaves) must reach
//! home once, and the OLog record is its one persistent write at commit (16 + the
//! packed input, about 64 + about 24 of block words); changed stock rows go through
//! the CLog once per window. With the largest window that is about 990 home + 140
//! logged + 4 allocator bytes, 0.93 of the credit (10-second runs); the floor for any
//! window is the home rows and entries plus the OLog record, about 0.88. What got it
//! there: slab formatting writes no header words on this engine (it keeps nothing in
//! them: 8 bytes per block), fresh blocks' allocator bits need no CLog entry (8 per
//! block), run words (8 per order line), packed arguments (about 80), and B+-tree
//! leaves that split at an insert in their upper half (a district's ascending order
//! ids no longer leave half-full leaves behind: about 170 home bytes).

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
//! * The object → chain index is a sharded DRAM hash map (as in the `mvcc` baseline),
//!   not a pointer in a persistent object header: no header word is ever written.
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
//!    record; records at or below K_done may be dropped.
//! 4. See `tlog` for the chain invariants and reclamation.
//! 5. An operation-table slot is durable before the first OLog record naming its
//!    index ([`optable`]).

pub mod clog;
pub mod olog;
pub mod optable;
pub mod recovery;
pub mod shared;
pub mod thread;
pub mod tlog;

#[cfg(test)]
mod tests;

use crate::engine::kit::log::redo_log as log;
use crate::engine::{Engine, EngineDef, EngineOptions, Inspection, OpenCtx};
use crate::heap::alloc::Allocator;
use crate::heap::layout::Regions;
use crate::heap::layout::{Layout, MAX_LOGS_PER_THREAD};
use crate::heap::Heap;
use crate::tx_options::Isolation;
use crate::{Error, Result};
use shared::Shared;
use std::sync::Arc;

/// The engine over one pool.
pub struct TimestoneEngine {
    sh: Arc<Shared>,
    /// Records re-executed by the recovery that opened this pool.
    #[cfg_attr(not(test), allow(dead_code))]
    pub replayed: usize,
}

/// Registry entry.
pub struct Timestone;

const OPT_HIGH_WATER: &str = "checkpoint_pct";
/// Size of the CLog area in MiB, chosen when the pool is created (default: half a
/// thread log plus 12 KiB). It bounds one checkpoint's record, and so how many
/// distinct dirty bytes the TLog gathers before it checkpoints (`checkpoint_pct` of
/// it): the coalescing window (see the module docs on write amplification).
const OPT_CLOG_MIB: &str = "clog_mib";
/// How many of the pool's per-thread log regions (1..=8, `log_bytes_per_thread`
/// each) one thread's OLog spans, chosen when the pool is created (default 1). A
/// full OLog forces a checkpoint, so this bounds the coalescing window too.
const OPT_OLOG_REGIONS: &str = "olog_regions";

/// Hand out small blocks that were live at K_done and freed inside the checkpoint
/// window before asking the allocator (default false: only when the allocator has no
/// free block left). True keeps the heap smaller; each such block's new contents
/// then take a CLog copy at the checkpoint (`clog`, *Reuse inside a window*).
const OPT_EAGER_REUSE: &str = "eager_reuse";

/// Bytes of one thread's OLog area (it starts at `Layout::log_offset(slot)` and spans
/// the slot's log regions, which are contiguous).
pub fn olog_len(l: &Layout) -> usize {
    l.logs_per_thread * l.log_bytes_per_thread
}

/// Largest `clog_mib` (the engine area is at most 64 MiB).
const MAX_CLOG_MIB: usize = 63;

/// How OLog records are framed: the compact 16-byte header (`olog`).
pub const OLOG_FRAMING: olog::Compact = olog::Compact;

impl EngineDef for Timestone {
    const ID: u32 = 8;
    const NAME: &'static str = "timestone";
    const SUMMARY: &'static str =
        "TimeStone: MVCC with TOC logging (DRAM versions, operation log, checkpoint log), per-transaction isolation";
    const ISOLATION: Isolation = Isolation::Linearizable;
    type Engine = TimestoneEngine;
    type Thread = thread::TsThread;

    fn option_sets() -> Vec<EngineOptions> {
        vec![
            EngineOptions::new(),
            // Checkpoint after almost every update: crash campaigns hit checkpoints.
            EngineOptions::new().set(OPT_HIGH_WATER, 1),
        ]
    }

    fn regions(ctx: &OpenCtx) -> Regions {
        // The CLog: one checkpoint record, bounded by the budget (by default half a
        // thread log: the largest physical record), plus slack. A bad `clog_mib` is
        // reported by `open`.
        let clog = match ctx.options.parse_or(Self::NAME, OPT_CLOG_MIB, 0usize) {
            Ok(mib @ 1..=MAX_CLOG_MIB) => mib << 20,
            _ => ctx.log_bytes_per_thread / 2 + 8192,
        };
        let regions = ctx
            .options
            .parse_or(Self::NAME, OPT_OLOG_REGIONS, 1usize)
            .ok()
            .filter(|n| (1..=MAX_LOGS_PER_THREAD).contains(n))
            .unwrap_or(1);
        Regions {
            logs_per_thread: regions,
            engine_area_bytes: 4096 + clog,
        }
    }

    fn open(heap: Arc<Heap>, opts: &EngineOptions, ctx: &OpenCtx) -> Result<TimestoneEngine> {
        opts.only(
            Self::NAME,
            &[
                OPT_HIGH_WATER,
                OPT_CLOG_MIB,
                OPT_OLOG_REGIONS,
                OPT_EAGER_REUSE,
            ],
        )?;
        let regions: usize = opts.parse_or(Self::NAME, OPT_OLOG_REGIONS, 1)?;
        if !(1..=MAX_LOGS_PER_THREAD).contains(&regions) {
            return Err(Error::InvalidConfig(format!(
                "{OPT_OLOG_REGIONS} must be 1..={MAX_LOGS_PER_THREAD}, not {regions}"
            )));
        }
        let mib: usize = opts.parse_or(Self::NAME, OPT_CLOG_MIB, 1)?;
        if !(1..=MAX_CLOG_MIB).contains(&mib) {
            return Err(Error::InvalidConfig(format!(
                "{OPT_CLOG_MIB} must be 1..={MAX_CLOG_MIB}, not {mib}"
            )));
        }
        let pct: u64 = opts.parse_or(Self::NAME, OPT_HIGH_WATER, 50)?;
        if !(1..=100).contains(&pct) {
            return Err(Error::InvalidConfig(format!(
                "{OPT_HIGH_WATER} must be 1..=100, not {pct}"
            )));
        }
        optable::check_format(&heap, never_committed(&heap))?;
        // Objects are validated by the allocation bitmap and no header word is read or
        // written (module docs): slab formatting need not zero them.
        heap.set_header_words_unused();
        let rec = recovery::recover(&heap, ctx.reexecute.as_ref())?;
        let alloc = Arc::new(Allocator::rebuild(heap.clone())?);
        let table = optable::OpTable::load(&heap)?;
        let mut sh = Shared::new(
            heap,
            alloc,
            rec.k_done,
            rec.k_done,
            rec.next_seq,
            false,
            pct,
            table,
        );
        sh.eager_reuse = opts.parse_or(Self::NAME, OPT_EAGER_REUSE, false)?;
        let sh = Arc::new(sh);
        Ok(TimestoneEngine {
            sh,
            replayed: rec.replayed,
        })
    }

    fn inspect(heap: &Heap) -> Inspection {
        let l = *heap.layout();
        let mut problems = Vec::new();
        if let Err(e) = optable::check_format_read_only(heap, never_committed(heap)) {
            problems.push(e.to_string());
        }
        let k_done = Shared::load_k_done(heap);
        let mut live = 0;
        for slot in 0..l.max_threads {
            let p = log::parse_framed(heap, l.log_offset(slot), olog_len(&l), OLOG_FRAMING);
            live += p.records.iter().filter(|r| r.persist_ts > k_done).count();
        }
        let pending_ckpt =
            clog::read_clog(heap, l.engine_area_size - 4096).is_some_and(|(k, _)| k > k_done);
        Inspection {
            lines: vec![
                format!("checkpoint K_done {k_done}"),
                format!("OLog records to re-execute {live}"),
                format!("interrupted checkpoint {pending_ckpt}"),
            ],
            problems,
        }
    }
}

/// True if the pool has never committed anything: no checkpoint, no CLog record, and
/// every OLog never recycled or reset (tail word zero) with no record ever written (a
/// slot's first record goes to ring offset 0).
fn never_committed(heap: &Heap) -> bool {
    let l = *heap.layout();
    Shared::load_k_done(heap) == 0
        && clog::read_clog(heap, l.engine_area_size - 4096).is_none()
        && (0..l.max_threads).all(|slot| {
            let mut first = [0u8; 24];
            heap.read_bytes(l.log_offset(slot), &mut first[..8]);
            heap.read_bytes(l.log_offset(slot) + log::RING_OFFSET, &mut first[8..]);
            first == [0; 24]
        })
}

impl TimestoneEngine {
    /// Shared state (tests).
    #[cfg(test)]
    pub(crate) fn shared(&self) -> &Arc<Shared> {
        &self.sh
    }
}

impl Engine for TimestoneEngine {
    type Thread = thread::TsThread;
    fn thread(&self, slot: usize) -> Result<thread::TsThread> {
        if slot >= self.sh.slots.len() {
            return Err(Error::TooManyThreads(self.sh.slots.len()));
        }
        Ok(thread::TsThread::new(self.sh.clone(), slot))
    }
    /// Checkpoint everything committed, so home is current (pool close, leak checks).
    fn quiesce(&self) {
        let _ = clog::checkpoint(&self.sh);
    }
    fn heap(&self) -> Option<&Arc<Heap>> {
        Some(&self.sh.heap)
    }
}
