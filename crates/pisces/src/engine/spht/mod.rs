//! The `spht` engine: SPHT (Castro, Romano, Barreto, Baldassin, *Scalable Persistent
//! Hardware Transactions*, 2021) with a software TM standing in for HTM.
//!
//! # The algorithm (the paper's, and where each part lives)
//! * Transactions run on a **working snapshot** — a private volatile image of the pool
//!   ([`snapshot`]) — under a TL2-style serializable software TM ([`stripes`],
//!   [`thread`]): versioned locks per object stripe, commit-time read validation, and
//!   a **physical commit clock** (`rdtscp`, [`clock`]) read while the write locks are
//!   held, so timestamp order is a serialization order. No HTM on this machine (AMD);
//!   the STM is the substitution, with the same contract the paper needs from HTM:
//!   a committed transaction's timestamp orders it after everything it depends on.
//! * Each thread appends one redo record per update transaction to its persistent log
//!   ([`log`]): the kit's (address, value) entries, the timestamp, a checksum, and two
//!   link slots.
//! * **Durability (§3.1, [`durability`], [`thread`])**: per-thread published words
//!   `vts = ts | isPers | isUpd`; after flushing its record a transaction waits for every
//!   slot with a smaller, non-persistent timestamp, then advances one persistent
//!   global marker by CAS and flushes it — unless it sees an update transaction with a
//!   larger timestamp, which will (skipCAS). A transaction is durable once the marker
//!   covers its timestamp. `marker=nvhtm` replaces the global marker with NV-HTM's
//!   sequential per-thread commit markers (the baseline of Fig. 1a).
//! * **Links (§3.2)**: each transaction links its predecessor in timestamp order to
//!   itself (forward) and itself to its predecessor (backward).
//! * **Replay (§3.3, [`replayer`], [`order`], [`apply`])**: background threads owned by
//!   the engine apply durable transactions (ts ≤ marker) to the durable heap, sharded by
//!   4 KiB address chunks, then persist their progress and truncate the logs. A thread
//!   whose log is full waits for (or runs) the replayer. Three ways to find a batch in
//!   timestamp order (option `replay`): the backward links from the newest durable
//!   transaction (the default), the forward links from the last replayed one, or a
//!   scan of the per-thread logs merged by timestamp (no links: the baseline the
//!   links are measured against). Applying is independent of that (option
//!   `dup_filter`): newest first with the duplicate filter (each word written once,
//!   the default with backward) or oldest first writing every word.
//!   `replay_hold=true` keeps the background replayer idle so that the logs build up
//!   (the replay benchmark); full logs, allocation, `quiesce`, close and recovery
//!   still replay. All options: [`options`].
//! * **Recovery ([`recovery`])** is the same apply code over the records up to the
//!   durable point (on `OpenCtx::recovery_threads` shards), ordered the way the
//!   `replay` option says (links checked against the timestamps); then the working
//!   snapshot is re-created from the recovered durable heap.
//! * Allocation and free go through the redo log like any write: `ALLOC` / `FREE`
//!   entries, applied to the durable allocator state by the replayer; a freed block is
//!   reused after its free is replayed.
//!
//! # Substitutions and decisions (details in each module)
//! * STM instead of HTM (above); serializable, so `ISOLATION = Serializable`.
//! * The working snapshot is a `MAP_PRIVATE` mapping of the pool file (DRAM cost: the
//!   pages written in the run); on media without a file (crash simulator, anonymous
//!   DRAM) an eager private DRAM copy (**DRAM cost: one pool size**) ([`snapshot`]).
//! * The lower bound of a transaction's timestamp is published at commit, not at begin;
//!   isPers is set after linking, which replaces Alg. 2's predecessor estimate
//!   ([`thread`], *Decisions*).
//! * A bound on attempts: a transaction that aborted
//!   [`kit::cc::fallback::THRESHOLD`](crate::engine::kit::cc::fallback::THRESHOLD) times in a
//!   row on conflicts takes the pool's fallback word (the paper's HTM design falls back
//!   to a single global lock after N aborts; here the word's holder waits for the
//!   commits in flight and runs optimistically as before, while other commits abort
//!   before locking and wait, each wait bounded by the holder's deadline). So a long
//!   read-only transaction beside a steady writer — which the STM's validation would
//!   abort forever — and a long update transaction commit within a bounded number of
//!   attempts ([`thread`], *Fallback*). Not a snapshot: the working snapshot is written
//!   in place and keeps no old versions. The fast path pays one load after step 2's
//!   fence.
//! * Multi-word per-thread metadata is read through a seqlock, not 32-byte AVX
//!   atomicity ([`durability`]).
//! * Recovery follows a link only where it names the record the timestamp order would
//!   take next (a crash may lose links, never the checksummed timestamps) and merges by
//!   timestamp when one is missing ([`recovery`], [`order`]).
//! * Recovery tells a torn tail from damage the way the kit's redo log does: an invalid
//!   last record of a slot's log is a torn tail and ends that log, but **a damaged
//!   record followed by a valid later one is refused** (`Error::Corrupt` at open,
//!   naming the slot and ring offset), as is a head word outside the ring: replaying
//!   the other slots without that log's later records would build a state no
//!   sequence of transactions produced ([`log`], [`recovery`]). A marker or
//!   `replayed` word at or above the timestamp limit is refused too (no run writes
//!   one).
//! * One NUMA node here: shards stride chunks over replayers without placement.
//! * The duplicate filter is a per-shard hash set of word offsets, not a bitmap.
//!
//! # Evidence
//! * Unit tests ([`tests`]): the wait on smaller timestamps, skipCAS, the forward and
//!   backward links, the shard filter, the duplicate filter, replay equal to the
//!   snapshot under every option set, read-only tokens, the copy-on-write snapshot,
//!   log space (a log holding only the replayer's cursor fits the largest record; a
//!   wrap marker the replayer's head names is not overwritten), recovery's torn tail
//!   and damage (a damaged record followed by a valid later one refused and the pool
//!   left unchanged, also across a wrap of the ring; a torn last record ignored; a
//!   head word outside the ring refused; a marker above every timestamp refused).
//!   Each was checked to fail with its path broken (commit history).
//! * The wait on smaller timestamps also has a crash test
//!   (`a_crash_never_recovers_a_transaction_without_one_it_read_from`: B reads A's
//!   write, A is held before its log record, the pool's bytes are recovered as a new
//!   process would); with the `mutation` feature's `SphtWait` switch removing the
//!   wait, `mutation_spht_wait_is_caught_by_the_dependent_commit_crash` shows that
//!   crash recovering B without A (CI runs both). The random crash campaigns did not
//!   catch this mutation: its window is a few instructions wide.
//! * The `mutation` feature's other spht switches, each caught by a unit test that CI
//!   runs with it on (`every_spht_mutation_is_caught`, a row per switch): `SphtSkipCas` (delegating the
//!   marker to a larger lower bound that is not an update transaction's:
//!   `skip_cas_needs_an_update_transaction`), `SphtForwardLink` (no forward link
//!   update: the link chain test), `SphtShardFilter` (every shard applies every word:
//!   the shard test), `SphtDuplicateFilter` (backward replay without the filter
//!   leaves the oldest value: the duplicate-filter test), `SphtScanMerge` (the scan
//!   takes the slots' logs one after the other instead of merging them: the held-log
//!   test and the recovery test of every mode), `SphtDenseFilterUnit` (recovery's
//!   bitmap filter keeps one bit per line, not per word: the recovery test of every
//!   mode and the duplicate-filter test), `SphtParseValidation` (recovery's parse
//!   checks only the first entry of a record:
//!   `recovery_refuses_a_record_with_a_bad_later_entry_unchanged`), and the kit's
//!   `ReplayPartMask` and `ParseSlotOrder` (parallel recovery's part masks and slot
//!   order: `parallel_recovery_replays_ranges_across_chunks`).
//! * Every replay mode × duplicate filter × 1 and 2 shards is tested at run time (two
//!   threads writing the same words: the durable heap equals the working snapshot)
//!   and at recovery of a crash image whose logs hold every transaction (the
//!   recovered values equal the committed ones; the link modes really follow the
//!   links, and a wrong link makes recovery merge instead).
//! * `crates/pisces-verify/tests/engine_spht.rs`: crash campaigns on every workload (one and
//!   two threads, every option set) and serializability of recorded histories; the
//!   fallback: a long reader and a long update transaction beside a writer commit
//!   within 5 s (without the fallback they never did), a holder whose attempt waits
//!   for a writer holds it only until its deadline, holders of two pools writing each
//!   other do not deadlock (a pure single-lock fallback does).
//! * `pisces crashtest --engine spht` in CI: 200 states each of bank, list, alloc,
//!   hashmap and btree on two threads of 100 operations.
//! * `pisces bench --workloads markers`: the marker ablation (`spht` vs `spht-nvhtm`).
//! * `pisces bench --workloads replay`: replay throughput per mode, filter and thread
//!   count over a log of 1 GiB (recovery on open of a crash image filled with the
//!   replayer held).
//!
//! # Not done
//! * No NUMA placement of shards or heap arenas (one node here).
//! * The working snapshot never shrinks during a run (neither does the paper's).
//!
//! # Persistent format
//! Engine area: watermark word (unused), root slot, the global marker (+128), the
//! replay progress word (+192), and from +4096 one NV-HTM marker per slot (a cache line
//! each). Logs: one region per slot ([`log`]).

pub mod apply;
pub mod clock;
pub mod durability;
pub mod log;
pub mod options;
pub mod order;
pub mod recovery;
pub mod replayer;
pub mod shared;
pub mod snapshot;
pub mod stripes;
pub mod thread;

#[cfg(test)]
mod tests;

use crate::engine::{Engine, EngineDef, EngineOptions, Inspection, OpenCtx};
use crate::heap::alloc::Allocator;
use crate::heap::layout::Regions;
use crate::heap::Heap;
use crate::tx_options::Isolation;
use crate::{Error, Result};
use crossbeam_utils::CachePadded;
use options::SphtOptions;
use shared::{Shared, Stats};
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex, OnceLock};

/// Registry entry of the `spht` engine.
pub struct Spht;

/// Stripes in the lock table (2^18 words: 2 MiB of DRAM).
const STRIPE_BITS: u32 = 18;

impl EngineDef for Spht {
    const ID: u32 = 7;
    const NAME: &'static str = "spht";
    const SUMMARY: &'static str =
        "SPHT (2021): STM on a working snapshot, physical-clock redo logs, global marker, linked parallel replay";
    const ISOLATION: Isolation = Isolation::Serializable;
    const GROWTH_REFUSED: Option<&'static str> = Some(
        "its working snapshot is a private mapping of the pool at open and does not follow a growth",
    );
    type Engine = SphtEngine;
    type Thread = thread::SphtThread;
    fn option_sets() -> Vec<EngineOptions> {
        SphtOptions::option_sets()
    }
    fn regions(ctx: &OpenCtx) -> Regions {
        Regions {
            logs_per_thread: 1,
            engine_area_bytes: durability::engine_area_bytes(ctx.max_threads),
        }
    }
    fn open(heap: Arc<Heap>, opts: &EngineOptions, ctx: &OpenCtx) -> Result<SphtEngine> {
        SphtEngine::open(heap, SphtOptions::parse(Self::NAME, opts)?, ctx)
    }
    fn inspect(heap: &Heap) -> Inspection {
        recovery::inspect(heap)
    }
}

/// The `spht` engine over one pool.
pub struct SphtEngine {
    sh: Arc<Shared>,
    worker: Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl SphtEngine {
    fn open(heap: Arc<Heap>, opts: SphtOptions, ctx: &OpenCtx) -> Result<SphtEngine> {
        let l = *heap.layout();
        if l.engine_area_size < durability::engine_area_bytes(l.max_threads) {
            return Err(Error::Corrupt(format!(
                "engine area of {} bytes is too small for spht's {} slot markers",
                l.engine_area_size, l.max_threads
            )));
        }
        let rec = recovery::recover(&heap, &opts, ctx.recovery_threads)?;
        let alloc = Arc::new(Allocator::rebuild(heap.clone())?);
        // The replayer is not started yet: nobody writes the image.
        let ws = snapshot::Snapshot::of(&heap)
            .map_err(|e| Error::io("allocating the spht working snapshot".to_string(), e))?;
        let n = l.max_threads;
        let clock = clock::PhysClock::above(opts.clock, n, rec.max_ts);
        let locals = (0..n)
            .map(|s| {
                Mutex::new(Some(thread::SlotLocal {
                    log: log::LogWriter::new(&heap, s, rec.next_seq[s]),
                    last_raw: 0,
                    last_ts: 0,
                }))
            })
            .collect();
        let sh = Arc::new(Shared {
            alloc,
            ws,
            unreplayed: Mutex::new(Default::default()),
            stripes: stripes::Stripes::new(STRIPE_BITS),
            fallback: Default::default(),
            clock,
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
            replay: Mutex::new(replayer::ReplayState::new(&rec.next_seq)),
            stop: AtomicBool::new(false),
            worker: OnceLock::new(),
            stats: Stats::default(),
            locals,
            heap,
            #[cfg(test)]
            hold: Default::default(),
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
            .spawn(move || replayer::background(sh2))
            .map_err(|e| Error::io("starting the spht replayer".to_string(), e))?;
        let _ = sh.worker.set(h.thread().clone());
        Ok(SphtEngine {
            sh,
            worker: Mutex::new(Some(h)),
        })
    }

    /// The engine's shared state (tests).
    #[cfg(test)]
    pub(crate) fn shared(&self) -> &Arc<Shared> {
        &self.sh
    }
}

impl Engine for SphtEngine {
    type Thread = thread::SphtThread;
    fn thread(&self, slot: usize) -> Result<thread::SphtThread> {
        if slot >= self.sh.slots.len() {
            return Err(Error::TooManyThreads(self.sh.slots.len()));
        }
        thread::SphtThread::new(self.sh.clone(), slot)
    }
    /// Replay until the durable heap holds every durable transaction.
    fn quiesce(&self) {
        let mut round = 0;
        while self.sh.replayed_ts.load(Acquire) < self.sh.durable.load(Acquire) {
            replayer::catch_up(&self.sh);
            crate::sync::spin_step(&mut round);
        }
    }
    fn heap(&self) -> Option<&Arc<Heap>> {
        Some(&self.sh.heap)
    }
    fn shutdown(&self) {
        self.sh.stop.store(true, Release);
        replayer::kick(&self.sh);
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
