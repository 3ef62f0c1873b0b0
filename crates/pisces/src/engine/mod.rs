//! Engines: concurrency control and logging over a [`Heap`].
//!
//! An engine is chosen when a pool is created; the superblock records it and
//! `Pool::open` takes it from there. Each engine is one folder under `engine/` plus one
//! line in [`registry`]: the folder implements [`EngineDef`] (id, name, persistent
//! regions, isolation levels, options, open = recovery, inspect), [`Engine`] (pool-wide
//! state) and [`EngineThread`] (one thread's transactions). What engines share lives in
//! [`kit`]; no engine imports another engine's modules.
//!
//! # Dispatch
//! The registry generates one enum over the engines' pool states and one over their
//! thread states ([`registry::AnyEngine`], [`registry::AnyThread`]); the transaction
//! API calls `begin`, `read`, `write` and `commit` (and, for a read-only transaction,
//! `begin_snapshot` and `end_snapshot`) through a `match` that the compiler inlines
//! per engine. Dynamic choice happens once, at create / open.
//!
//! # Contract for implementors
//! Offsets passed in are payload offsets validated by the engine itself (user input).
//! `read` returns a pointer valid for reads of `len` bytes until the transaction ends or
//! until the next `write` / `alloc` / `free` call of the same thread (the API borrows
//! the transaction mutably for those, so no reference outlives them); the bytes behind
//! it must not change while that holds. `write` returns a pointer valid for reads and
//! writes of `len` bytes under the same rule, to memory no other thread reads or writes
//! until commit.
//!
//! # Commit and durability
//! [`EngineThread::commit`] returns once the transaction is visible to others (or has
//! failed and rolled back) and hands back a [`DurableToken`]; [`EngineThread::wait_durable`]
//! returns once that transaction survives a crash. Engines whose commit is durable
//! before it is visible (pisces, undo, mvcc) return a token that is already durable;
//! engines with collective durability (a wait on predecessors, a global marker) do the
//! waiting there. `run` waits unless the caller asked for deferred durability.
//!
//! # Background work
//! An engine may start threads (replayers, checkpointers) in `open`; the pool calls
//! [`Engine::shutdown`] before it closes, and the engine must stop and join them there.

mod bare;
pub(crate) mod kit;
mod mvcc;
mod options;
mod pisces;
mod pmdk;
pub(crate) mod registry;
mod sp3;
mod spht;
mod timestone;
mod undo;

use crate::heap::layout::Regions;
use crate::heap::Heap;
use crate::medium::MediumKind;
use crate::tx_options::{Isolation, TxOptions};
use crate::Result;
/// The read fast path an engine hands the transaction layer per attempt
/// ([`EngineThread::fast_reads`]), which `Tx::read` inlines.
pub(crate) use kit::fast_reads::{FastPath, FastReads};
pub use options::EngineOptions;
pub use pisces::PiscesOptions;
pub use registry::EngineId;
pub use sp3::Sp3Options;
pub use spht::{SphtClock, SphtMarker, SphtOptions, SphtReplay};
use std::sync::Arc;
pub use timestone::TimestoneOptions;

/// Where an engine keeps its pool.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Storage {
    /// Our pool format: superblock, engine area, per-thread log regions, heap.
    Heap,
    /// A pool file in the engine's own format (`pmdk`): [`EngineDef::open_file`].
    OwnFile,
}

/// What an engine sees of the pool's configuration: the pool layer builds it from the
/// user's `Config`, so the engines depend on neither the configuration type nor the
/// transaction API above them.
#[derive(Clone)]
pub(crate) struct OpenCtx {
    /// Size of a new pool file in bytes (`Storage::OwnFile` engines create it; a build
    /// without such an engine reads it nowhere).
    #[cfg_attr(not(pmdk), allow(dead_code))]
    pub size: u64,
    /// Most threads that run transactions at once.
    pub max_threads: usize,
    /// Bytes of each thread's log region.
    pub log_bytes_per_thread: usize,
    /// The medium kind asked for (`Storage::OwnFile` engines map their own file).
    #[cfg_attr(not(pmdk), allow(dead_code))]
    pub medium: MediumKind,
    /// The engine options the caller gave (parsed and checked by the engine).
    pub options: EngineOptions,
    /// Threads recovery may use (engines with parallel replay; the others replay on
    /// one thread and ignore it).
    pub recovery_threads: usize,
    /// The operations registered with the pool, for engines that log operations and
    /// re-execute them in recovery (timestone).
    pub reexecute: Arc<dyn Reexecute>,
    /// The pool is shared by several processes: the region of its sidecar, where an
    /// engine that can share places its state (fresh: this process builds it, after
    /// recovery; else another process built it, and the engine finds it and recovers
    /// nothing). `None`: the pool is this process's alone.
    pub region: Option<Arc<crate::region::Region>>,
}

impl Default for OpenCtx {
    fn default() -> Self {
        OpenCtx {
            size: 64 << 20,
            max_threads: 8,
            log_bytes_per_thread: 1 << 20,
            medium: MediumKind::DRAM,
            options: EngineOptions::new(),
            recovery_threads: 1,
            reexecute: Arc::new(NoOperations),
            region: None,
        }
    }
}

/// Registered operations as an engine's recovery sees them: whether an id is
/// registered, and running one as a transaction on a thread of the engine being
/// recovered. The pool layer implements it over its operation registry and the
/// transaction API, so recovery can re-execute operations at the step its crash
/// argument needs them (between its own steps) without the engine layer depending on
/// the layers above it or on the registry.
pub(crate) trait Reexecute: Send + Sync {
    /// Whether operation `id` is registered.
    fn registered(&self, id: u32) -> bool;
    /// Run operation `id` with its logged argument bytes as one transaction on
    /// `thread`, the recovering engine's own thread state.
    fn run(&self, thread: LentThread<'_>, id: u32, args: &[u8]) -> Result<()>;
}

/// A thread state of the engine being recovered, lent to [`Reexecute::run`] for one
/// transaction. The engine keeps its thread in an `Option` (`Some` between the
/// transactions); the pool layer takes it out into the registry's dispatch enum for the
/// transaction and puts it back (`registry::AnyThread::lend`). The thread is passed
/// type-erased so that no engine names that enum, which names every engine.
pub(crate) struct LentThread<'a> {
    engine: u32,
    /// `&mut Option<D::Thread>` of the engine whose id is `engine` (`new` pairs them).
    slot: &'a mut dyn std::any::Any,
}

impl<'a> LentThread<'a> {
    /// Lend the thread state in `slot` of engine `D`.
    pub(crate) fn new<D: EngineDef>(slot: &'a mut Option<D::Thread>) -> LentThread<'a> {
        LentThread {
            engine: D::ID,
            slot,
        }
    }
    /// The id of the engine whose thread this is ([`EngineDef::ID`]).
    pub(crate) fn engine(&self) -> u32 {
        self.engine
    }
    /// The slot, if the engine's thread type is `T` (it is when `T` is the thread type
    /// of the engine [`LentThread::engine`] names).
    pub(crate) fn slot<T: EngineThread>(&mut self) -> Option<&mut Option<T>> {
        self.slot.downcast_mut()
    }
}

/// No operation registered (engine-level tests; pools opened without operations).
struct NoOperations;

impl Reexecute for NoOperations {
    fn registered(&self, _id: u32) -> bool {
        false
    }
    fn run(&self, _thread: LentThread<'_>, id: u32, _args: &[u8]) -> Result<()> {
        Err(crate::Error::invalid_argument(format!(
            "no operation registered as {id}"
        )))
    }
}

/// What `pisces info` / `pisces check` print about an engine's persistent state, and
/// the problems `check` reports (exit 1).
#[derive(Clone, Debug, Default)]
#[cfg_attr(not(feature = "tools"), allow(dead_code))] // read by the tools only
pub struct Inspection {
    /// One line per fact (`name: value`).
    pub lines: Vec<String>,
    /// Problems found (the pool would be refused or recover wrongly).
    pub problems: Vec<String>,
}

/// A transaction's place in its engine's durability order (see the module docs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct DurableToken(pub(crate) u64);

impl DurableToken {
    /// A token that is durable already.
    pub(crate) const DURABLE: DurableToken = DurableToken(0);
    /// Every transaction the thread committed so far.
    pub(crate) const ALL: DurableToken = DurableToken(u64::MAX);
}

/// Static description and factory of one engine: what the registry knows of it.
pub(crate) trait EngineDef: 'static {
    /// Id in the superblock (never reused).
    const ID: u32;
    /// Stable name (command line, C ABI, superblock messages).
    const NAME: &'static str;
    /// One line for `--help` and `pisces info`.
    const SUMMARY: &'static str;
    /// The engine's native isolation level; requests for this level or a weaker one
    /// are accepted, stronger ones refused.
    const ISOLATION: Isolation;
    /// The level of a transaction that asks for none (`TxOptions::isolation` `None`,
    /// every `Pool::read`): [`EngineDef::ISOLATION`] unless the engine offers several
    /// levels per transaction.
    const DEFAULT_ISOLATION: Isolation = Self::ISOLATION;
    /// Whether committed transactions survive a crash (false: `volatile`).
    const DURABLE: bool = true;
    /// Where the pool lives.
    const STORAGE: Storage = Storage::Heap;
    /// Whether the registry inlines this engine's `begin` + `fast_reads` and
    /// `commit` + `wait_durable` into every transaction's retry loop (`Pool::run`);
    /// the other engines are one call away there. For the default engine and the
    /// reference it is measured against (so both get the same treatment): inlining
    /// every engine would grow each `run` instantiation by all of them.
    const INLINE_DISPATCH: bool = false;
    /// Why the engine cannot run on a pool that grows (`Config::max_size` above the
    /// size), or `None` if it can.
    const GROWTH_REFUSED: Option<&'static str> = None;
    /// Why the engine cannot run on a pool that several processes open at once
    /// (`Sharing::Shared`), or `None` if it can: its state must then live in the region
    /// the open gives it ([`OpenCtx::region`]), found there by every process.
    const SHARING_REFUSED: Option<&'static str> =
        Some("its concurrency-control state lives in the memory of one process");
    /// The engine's mutation points (tests only, `mutation` feature): each protocol
    /// step a test can remove, declared with `mutation::point!` in the module that owns
    /// the step, and the points of `kit` parts the engine runs through. The engine's
    /// mutation suites iterate this list; `pisces crashtest --mutation NAME` takes a
    /// name from it. The heap's points (`heap::MUTATIONS`) are added by the registry.
    #[cfg(feature = "mutation")]
    const MUTATIONS: &'static [&'static crate::mutation::MutationPoint] = &[];
    /// The engine's hook points (tests only, `mutation` feature): places where a test
    /// can pause a thread or slow it down, declared with `mutation::hook_point!`.
    #[cfg(feature = "mutation")]
    const HOOKS: &'static [&'static crate::mutation::HookPoint] = &[];
    /// Pool-wide state.
    type Engine: Engine<Thread = Self::Thread>;
    /// One thread's state.
    type Thread: EngineThread;
    /// The option sets test campaigns (crash, isolation, behaviour) cycle through: each
    /// ablation switch on and off. Default: the engine's defaults only.
    fn option_sets() -> Vec<EngineOptions> {
        vec![EngineOptions::new()]
    }
    /// Regions the engine needs in a new pool.
    fn regions(_ctx: &OpenCtx) -> Regions {
        Regions::default()
    }
    /// Open (recover) a pool of our format; `opts` are the caller's engine options,
    /// which the engine parses and validates (unknown keys are an error).
    fn open(heap: Arc<Heap>, opts: &EngineOptions, ctx: &OpenCtx) -> Result<Self::Engine>;
    /// Describe and verify the engine's persistent state of a pool nobody runs (for
    /// `pisces info` / `check`); must not write.
    #[cfg_attr(not(feature = "tools"), allow(dead_code))] // read by the tools only
    fn inspect(_heap: &Heap) -> Inspection {
        Inspection::default()
    }
    /// Create or open a pool file of the engine's own format (`Storage::OwnFile`).
    fn open_file(_path: &std::path::Path, _ctx: &OpenCtx, _create: bool) -> Result<Self::Engine> {
        Err(crate::Error::invalid_config(format!(
            "the {} engine keeps its pool in the common format",
            Self::NAME
        )))
    }
}

/// Pool-wide state of an engine.
pub(crate) trait Engine: Send + Sync + 'static {
    /// Thread state type.
    type Thread: EngineThread;
    /// State for thread slot `slot` (unique among live threads, `< max_threads`).
    fn thread(&self, slot: usize) -> Result<Self::Thread>;
    /// Finish deferred work that must be durable now (e.g. a batch of commits that is
    /// not durable yet): `Pool::sync` and a close call it. Work recovery would redo
    /// from a durable log may stay deferred (timestone's checkpoint) until
    /// [`Engine::close`].
    fn quiesce(&self);
    /// A clean close, after [`Engine::quiesce`], with no thread state left: leave every
    /// committed transaction at home, so that the pool's state does not depend on log
    /// records a damaged log could lose without a trace (an engine whose `quiesce`
    /// already does needs nothing more).
    fn close(&self) {}
    /// Write everything committed home, allocator bitmaps included, so that the heap
    /// alone shows the committed state ([`crate::Pool::allocated_objects`] reads the
    /// bitmaps). Called after [`Engine::quiesce`]; engines whose `quiesce` leaves home
    /// current need nothing more.
    fn write_back_all(&self) {}
    /// The heap the engine works on; `None` for an engine that brings its own pool
    /// format (`pmdk`).
    fn heap(&self) -> Option<&Arc<Heap>>;
    /// The offset `Pool::root` reads the pool's 16-byte root slot at (where the root
    /// object's offset and size are kept): a capability token that only the engine hands
    /// out (see `root_slot_token`), not the slot's real offset.
    fn root_slot(&self) -> u64 {
        kit::validate::root_slot_token()
    }
    /// Make everything committed durable now (e.g. msync of a file medium).
    fn sync(&self) -> Result<()> {
        self.heap().map_or(Ok(()), |h| h.medium().sync_all())
    }
    /// Stop and join the engine's background threads (pool close). Called once, after
    /// every thread state is gone and before `quiesce`.
    fn shutdown(&self) {}
    /// A pool shared by processes: a thread slot whose state was left in use although
    /// no process owns it (`owned(slot)` false): its process ended without handing it
    /// over (it died, or its log could not be emptied). Engines that do not share
    /// have none.
    fn abandoned_slot(&self, _owned: &dyn Fn(usize) -> bool) -> Option<usize> {
        None
    }
}

/// One thread's transaction state. At most one transaction runs per thread at a time.
pub(crate) trait EngineThread: Send + 'static {
    /// Start a transaction. The isolation level has been checked against the engine's
    /// (`opts.isolation` is `None` or one the engine offers).
    fn begin(&mut self, opts: &TxOptions);
    /// Pointer to the version of the object at `off` (payload offset, `len` bytes) this
    /// transaction must see. Err(Conflict) if the engine must abort.
    fn read(&self, off: u64, len: usize) -> Result<*const u8>;
    /// Reads in transactions that committed read-only which met an object locked by
    /// another writer, since this state was made (Pisces' copy path: the reader chose
    /// between the writer's copy and home without waiting). 0 for engines that do not
    /// count them.
    fn ro_locked_reads(&self) -> u64 {
        0
    }
    /// The fast path of `read` for the attempt `begin` just started (see
    /// [`FastReads`]), or [`FastPath::NONE`] if every read must go to `read`.
    fn fast_reads(&mut self) -> FastPath {
        FastPath::NONE
    }
    /// Start a read-only transaction (`Pool::read`: no `write`, `alloc` or `free`
    /// follows) and return its read fast path. An engine with a leaner path for
    /// attempts that will not write takes it here.
    #[inline]
    fn begin_snapshot(&mut self) -> FastPath {
        self.begin(&TxOptions::read_only());
        self.fast_reads()
    }
    /// End the read-only transaction [`EngineThread::begin_snapshot`] started: commit
    /// it, and if `wait`, return once what it read is durable (as `run` does by
    /// default). The outer error is the commit's (the attempt is rolled back), the
    /// inner one the wait's, as in `registry::AnyThread::commit_then_wait`.
    #[inline]
    fn end_snapshot(&mut self, wait: bool) -> Result<Result<()>> {
        let token = self.commit()?;
        Ok(if wait {
            self.wait_durable(token)
        } else {
            Ok(())
        })
    }
    /// Pointer to this transaction's private, writable version of the object.
    fn write(&mut self, off: u64, len: usize) -> Result<*mut u8>;
    /// Allocate an object with `len` payload bytes; returns its payload offset. Its
    /// content is writable through `write` and zeroed.
    fn alloc(&mut self, len: usize) -> Result<u64>;
    /// Free the object at `off` when the transaction commits.
    fn free(&mut self, off: u64) -> Result<()>;
    /// Commit: on `Ok` the transaction is visible to later transactions; on `Err` it
    /// has been rolled back.
    fn commit(&mut self) -> Result<DurableToken>;
    /// Wait until the transaction of `token` (committed by this thread) is durable.
    fn wait_durable(&mut self, _token: DurableToken) -> Result<()> {
        Ok(())
    }
    /// Roll back.
    fn abort(&mut self);
    /// The running transaction is registered operation `id` with argument bytes
    /// (`Pool::run_op`); engines that log operations instead of data use it. Called
    /// after `begin`.
    fn set_operation(&mut self, _op: Option<(u32, &[u8])>) {}
    /// Called by `run` after a conflict abort, before the retry, outside any
    /// transaction: an engine may help the transaction it conflicted with here.
    fn after_abort(&mut self) {}
    /// Whether the transactions begun from now on run nested in a transaction of
    /// another pool on this thread. Such a transaction must not wait for other
    /// transactions of its pool to finish (a grace period, a lock): the one it waits
    /// for may be waiting, inside its own thread's transaction of the other pool, for
    /// the transaction around ours. It aborts with a conflict instead (the API bounds
    /// the retries of nested transactions). Engines that never wait ignore it.
    fn set_nested(&mut self, _nested: bool) {}
    /// Push out deferred work of this thread (group commit); called when a thread
    /// unregisters.
    fn quiesce(&mut self);
    /// The thread slot this state runs in (unique among the states of a pool, across
    /// the processes that share it).
    fn slot(&self) -> usize;
}
