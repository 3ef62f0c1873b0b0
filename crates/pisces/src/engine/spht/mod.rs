//! The `spht` engine: SPHT (Castro, Romano, Barreto, Baldassin, *Scalable Persistent
//! Hardware Transactions*, 2021) with a software TM standing in for HTM.
//!
//! # The algorithm (the paper's, and where each part lives)
//! * Transactions run on a **working snapshot** — a private volatile image of the pool
//!   ([`snapshot`]) — under a TL2-style serializable software TM ([`stripes`],
//!   [`thread`]): versioned locks per object stripe, commit-time read validation, and
//!   a **physical commit clock** (`rdtscp`, [`clock`]) read while the write locks are
//!   held, so timestamp order is a serialization order. The engine does not rely on
//!   HTM (many processors have none, or have it disabled); the STM is the
//!   substitution, with the same contract the paper needs from HTM: a committed
//!   transaction's timestamp orders it after everything it depends on.
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
//! * The pool-wide state and the engine's open (recovery, working snapshot, replayer
//!   thread) and shutdown: [`shared`] ([`shared::SphtEngine`]).
//!
//! # What a read and a commit cost
//! Under HTM (the paper) a read is a plain load and the hardware tracks it; the commit
//! is `xend`, then the paper's own work. Here the software TM stands in, and each part
//! is either the paper's or the stand-in's:
//! * **Read** (stand-in, [`thread`]): one load of the stripe's version word (unlocked,
//!   below `rv`), one read-set entry (stripe, version; none in a snapshot, the API's
//!   read-only transaction, whose reads are consistent as of `rv` by that test alone:
//!   [`thread`], *Snapshots*), and the bytes handed out: the
//!   thread's kept copy when it was taken at that version ([`read_copies::CopyCache`],
//!   a hash and three compares; looked up before the object is located, which a kept
//!   copy at the stripe's current version makes unnecessary), else the object located
//!   (an allocated small block: the kit's read fast path, a few compares and one
//!   bitmap load; anything else: `locate_object`) and a seqlock copy of the bytes asked
//!   for (one relaxed load per word, the version word loaded again). A read allocates nothing and hashes nothing
//!   into a map once the thread's copy chunks exist; a transaction that wrote looks its
//!   write set up first. The common cases of a transaction that wrote nothing — the kept
//!   copy, or a new copy of an allocated small object into its cache set's buffer when
//!   the buffer already holds it — are inlined into the engine's read function, with one
//!   multiply hashing the header offset for both the stripe and the cache set; every
//!   other case, and any the inline path declines (a stripe it may not read, a set with
//!   no room, a read set that must grow, a copy whose stripe changed under it), is one
//!   call away on the path that handles them all. A copy is needed at all because committers write the working
//!   snapshot in place while a reader may hold a reference into what it read.
//!   In cache lines: the stripe word is a line of its own (the stripes are hashed
//!   from the object's address, 2 MiB of them), so a read of a random object takes
//!   two misses where an in-place engine takes one, and sampling the hash table's
//!   lookups puts most of the read's time on the stripe word's load — the HTM read
//!   the paper has has neither the word nor the miss.
//! * **Begin** (the paper's): the physical clock's `rdtscp` and fence, which a sample
//!   of the lookups finds to be the larger part of `begin`.
//! * **Read-only commit** (stand-in): nothing to validate (every read was checked
//!   against `rv`, TL2), nothing published; the token is the largest version read.
//! * **Update commit**: stand-in — a private copy per written object (at `write`),
//!   one CAS per written stripe, the read set's validation (one load per read), the
//!   write-back into the snapshot with a word diff that builds the record; the
//!   paper's — the commit clock (`rdtscp`, with the lower bound published before it:
//!   one SeqCst store and fence), the redo record's append and flush (one fence), the
//!   wait for smaller timestamps (one load per slot), the two links, `isPers`, and the
//!   global marker's CAS and flush unless skipCAS applies.
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
//! * Reads hand out copies (above); each thread keeps its last copies of up to 4096
//!   objects of at most 4 KiB, 2 MiB together ([`read_copies::CopyCache`], direct
//!   mapped), so that re-reading an unchanged object costs its version check, and its
//!   other copies go into chunks kept across transactions
//!   ([`read_copies::ReadCopies`]). **DRAM cost: up to 2 MiB of copies, 224 KiB of
//!   cache entries and 256 KiB of chunks per thread state.**
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
//! * **Point records on the file medium** (option `points`, default on where a fence is
//!   a device sync): a commit that finds every older update transaction already
//!   persistent writes its log record as a durable point of its own and writes no
//!   marker, so one thread pays one device sync per commit instead of two; recovery
//!   takes the newest valid point record into the durable point. A commit that finds
//!   the older ones not yet persistent but all visible names them in a *conditional
//!   point* record, waits for them and writes no marker either; recovery counts it
//!   only if every record it names is valid. The background
//!   replayer rests 20 ms between batches there (a batch costs three syncs whatever
//!   its size). Not in the paper, whose persistent memory makes the marker's persist
//!   one fence ([`thread`], *Point records*; [`log`]).
//! * Shards stride chunks over replayers without NUMA placement (the operating system
//!   places the memory and the threads).
//! * The duplicate filter is a per-shard hash set of word offsets, not a bitmap.
//!
//! # Under eADR
//! The medium's flush writes nothing back; the fences stay: the record's (its
//! non-temporal stores complete before `isPers` is published), the global marker's
//! (drained before the transaction returns as durable), and the replayer's (the
//! durable heap's stores before the progress that truncates the logs). skipCAS and the
//! marker protocol exist to amortise the marker's persist; under eADR that persist is
//! one fence, so they save less.
//!
//! # Evidence
//! * Unit tests (`tests`): the wait on smaller timestamps, skipCAS, the forward and
//!   backward links, the shard filter, the duplicate filter, replay equal to the
//!   snapshot under every option set, read-only tokens, the copy-on-write snapshot,
//!   the read path (a kept copy is not handed out after its object changed, on small
//!   and large objects; copies handed out stay unchanged while later reads of the
//!   transaction fill their cache set and new chunks; the small-object lookup refuses
//!   a freed object and a read longer than the object; the kept-copy lookup refuses a
//!   read longer than the copy, an empty entry and the root slot's payload by its own
//!   offset; the inline
//!   path's reads, kept copy and new copy, join the read set),
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
//! * Point records: `point_records_are_durable_points_without_a_marker` (a crash with
//!   the markers never raised recovers every commit from its point record; recovery
//!   counting only the markers fails it), the dependent-commit crash with points on,
//!   and `mutation_spht_point_check_is_caught_by_the_dependent_commit_crash` (a record
//!   made a point without the check recovers B without A). Campaigns run an option set
//!   with points on under every domain; `file_syncs` counts the syncs per commit on a
//!   file (about two without points).
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
//! * `pisces-bench --workloads markers`: the marker ablation (`spht` vs `spht-nvhtm`).
//! * `pisces-bench --workloads replay`: replay throughput per mode, filter and thread
//!   count over a log of 1 GiB (recovery on open of a crash image filled with the
//!   replayer held).
//!
//! # Not done
//! * No NUMA placement of shards or heap arenas.
//! * The working snapshot never shrinks during a run (neither does the paper's).
//!
//! # Persistent format
//! Engine area: watermark word (unused), root slot, the global marker (+128), the
//! replay progress word (+192), and from +4096 one NV-HTM marker per slot (a cache line
//! each). Logs: one region per slot ([`log`]).

mod apply;
mod clock;
mod durability;
mod log;
mod options;
mod order;
mod read_copies;
mod recovery;
mod replayer;
mod shared;
mod snapshot;
mod stripes;
mod thread;

#[cfg(test)]
mod tests;

use crate::engine::{EngineDef, EngineOptions, Inspection, OpenCtx};
use crate::heap::layout::Regions;
use crate::heap::Heap;
use crate::tx_options::Isolation;
use crate::Result;
use options::SphtSettings;
pub use options::{SphtClock, SphtMarker, SphtOptions, SphtReplay};
use shared::SphtEngine;
use std::sync::Arc;
use thread::SphtThread;

/// Registry entry of the `spht` engine.
pub(crate) struct Spht;

impl EngineDef for Spht {
    const ID: u32 = 7;
    const SHARING_REFUSED: Option<&'static str> = Some(
        "each process runs on a private snapshot mapping of the pool and would not see the commits of the others",
    );
    const NAME: &'static str = "spht";
    const SUMMARY: &'static str =
        "SPHT (2021): STM on a working snapshot, physical-clock redo logs, global marker, linked parallel replay";
    const ISOLATION: Isolation = Isolation::Serializable;
    const GROWTH_REFUSED: Option<&'static str> = Some(
        "its working snapshot is a private mapping of the pool at open and does not follow a growth",
    );
    #[cfg(feature = "mutation")]
    const HOOKS: &'static [&'static crate::mutation::HookPoint] =
        &[&thread::BEFORE_LOG, &thread::AFTER_LOG];
    #[cfg(feature = "mutation")]
    const MUTATIONS: &'static [&'static crate::mutation::MutationPoint] = &[
        &thread::WAIT,
        &thread::SKIP_CAS,
        &thread::FORWARD_LINK,
        &thread::POINT_CHECK,
        &apply::SHARD_FILTER,
        &apply::DUPLICATE_FILTER,
        &order::SCAN_MERGE,
        &recovery::RECOVERY_ALLOC_FLAGS,
        &apply::DENSE_FILTER_UNIT,
        &recovery::PARSE_VALIDATION,
        &recovery::CONDITIONAL_DEPS,
        &log::CHECKSUM,
        &log::LOG_FLUSH,
        &crate::engine::kit::recovery::replay_parts::REPLAY_PART_MASK,
        &crate::engine::kit::recovery::per_slot::PARSE_SLOT_ORDER,
    ];
    type Engine = SphtEngine;
    type Thread = SphtThread;
    fn option_sets() -> Vec<EngineOptions> {
        SphtSettings::option_sets()
    }
    fn regions(ctx: &OpenCtx) -> Regions {
        Regions {
            logs_per_thread: 1,
            engine_area_bytes: durability::engine_area_bytes(ctx.max_threads),
        }
    }
    fn open(heap: Arc<Heap>, opts: &EngineOptions, ctx: &OpenCtx) -> Result<SphtEngine> {
        SphtEngine::open(heap, SphtSettings::parse(Self::NAME, opts)?, ctx)
    }
    fn inspect(heap: &Heap) -> Inspection {
        recovery::inspect(heap)
    }
}
