//! How to create or open a pool: the user's configuration, and what of it the engine
//! sees.

use crate::engine::{EngineId, EngineOptions, OpenCtx};
use crate::medium::domain::DomainRequest;
use crate::medium::open::MediumRequest;
use crate::medium::{MediumKind, PersistenceDomain};
use crate::ops::Operations;
use std::sync::Arc;
use std::time::Duration;

/// How to create or open a pool.
///
/// ```
/// use pisces::{Config, EngineId, MediumKind, PiscesOptions};
/// let cfg = Config::new()
///     .size(256 << 20) // a 256 MiB pool
///     .medium(MediumKind::Dram { write_latency_ns: 300, bandwidth_bytes_per_sec: 0 })
///     .engine(EngineId::Pisces)
///     .max_threads(4)
///     .engine_options(PiscesOptions { flush_diff: true, group_commit: 8 });
/// assert_eq!(cfg.log_bytes_per_thread, 1 << 20);
/// ```
///
/// The fields are public to read and to change; a new field may be added in a minor
/// release, so a `Config` is made with [`Config::new`] (or `default`) and the setters,
/// not with a struct literal.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Config {
    /// Size of a new pool file in bytes (multiple of 4096). Ignored by `open`.
    pub size: u64,
    /// Most bytes a new pool may grow to (multiple of 4096, at least `size`); `None`
    /// (the default) is a pool that never grows and reports
    /// [`Error::OutOfSpace`](crate::Error::OutOfSpace) when its heap is full. A pool that may grow reserves
    /// `max_size` bytes of address space when it is mapped (not memory: the reservation
    /// costs nothing until the pool grows), extends its file and heap when the
    /// allocator runs out, and gives `OutOfSpace` only at the maximum. Its slab table is
    /// sized for the maximum (4 bytes per 64 KiB). Fixed at creation; `open` takes it
    /// from the pool. Refused by the `spht` engine (its private working snapshot is a
    /// mapping of the size at open) and by `pmdk` (libpmemobj's pools do not grow).
    pub max_size: Option<u64>,
    /// The medium the pool is mapped on; `None` (the default): the one the file system
    /// holding the pool calls for, decided at every create and open — the DAX medium
    /// on a DAX file system, the DRAM medium on tmpfs and ramfs (`/dev/shm`), the file
    /// medium (`msync` at each fence) on any other file system (see
    /// [`medium::durability`](crate::medium::durability)). Not recorded in the pool.
    /// Naming the DRAM medium for a file on a file system that outlives power loss
    /// is refused unless [`allow_volatile_medium`](Config::allow_volatile_medium) is
    /// set.
    pub medium: Option<MediumKind>,
    /// Allow [`medium`](Config::medium) `Dram` on a file system that outlives power
    /// loss (a disk): its fence does not `msync`, so a power failure may lose or tear
    /// committed transactions (they survive process crashes). For measuring engines
    /// without `msync` on a disk. The pool then says so in
    /// [`PoolDurability::warning`](crate::PoolDurability::warning).
    pub allow_volatile_medium: bool,
    /// The persistence domain to run under (see [`PersistenceDomain`]); `None` (the
    /// default): the platform's, read at every open — on a DAX file the domain its
    /// NVDIMM region reports (ADR when it reports none), ADR on the DRAM medium, the
    /// page cache on a plain file. `Some(Adr)` is always allowed; `Some(Eadr)` on a DAX
    /// file whose platform does not report it is refused unless
    /// [`trust_persistence_domain`](Config::trust_persistence_domain) is set. Not
    /// recorded in the pool.
    pub persistence_domain: Option<PersistenceDomain>,
    /// Allow [`persistence_domain`](Config::persistence_domain) `eadr` against what the
    /// platform reports ("I know": e.g. a kernel that does not report the domain of an
    /// eADR machine). The pool then says so in
    /// [`Pool::persistence_domain_warning`](crate::Pool::persistence_domain_warning).
    pub trust_persistence_domain: bool,
    /// The engine. `create`: the engine of the new pool (`None` = Pisces). `open`:
    /// `None` takes the engine the superblock records; naming another one is refused
    /// with [`Error::WrongEngine`](crate::Error::WrongEngine).
    pub engine: Option<EngineId>,
    /// Most threads that run transactions at once. Fixed at creation.
    pub max_threads: usize,
    /// Bytes of each thread's redo log (multiple of 4096). Fixed at creation. A
    /// transaction's record may use at most half of it.
    pub log_bytes_per_thread: usize,
    /// The engine's options (`key=value`, parsed and checked by the engine at open);
    /// may differ between runs.
    pub engine_options: EngineOptions,
    /// Threads recovery may use at open (engines that replay in parallel).
    pub recovery_threads: usize,
    /// How long `Pool::run` waits for a thread slot when all `max_threads` are checked
    /// out (by handles or other `run` calls) before it fails with
    /// [`Error::TooManyThreads`](crate::Error::TooManyThreads).
    pub slot_wait: Duration,
    /// The registered operations (see [`Operations`]): an engine that logs operations
    /// (`timestone`) re-executes them in recovery, so `open` needs every operation the
    /// pool's log may name. The pool shares the registry: operations registered later
    /// ([`Pool::register_op`](crate::Pool::register_op)) are in it too.
    pub operations: Operations,
    /// Whether other processes may have the pool open at the same time (see
    /// [`Sharing`]); exclusive unless set.
    pub(crate) sharing: Sharing,
}

/// Whether a pool is opened by one process at a time or by several at once.
///
/// # A process that dies
/// A process that ends without closing a shared pool (killed, or aborted by a panic
/// in a `panic = "abort"` build) may leave what the others wait for: the locks of a
/// transaction it was running, its snapshot's clock, committed transactions not yet
/// written back, a commit halfway, a lock word of the engine. The others do not wait
/// for it for long: a wait that lasts a millisecond asks whether the thread slot it
/// waits for belongs to a live process (the kernel releases a slot's lock on the pool
/// file when its process ends), and a dead slot is *recovered while the others run*:
/// a thread of the process that found it rolls back the transaction it was running
/// (or, if it died inside its commit once the commit's redo record was written,
/// finishes the commit), writes back the ones it committed, empties its log and gives
/// the slot free. The wait then ends: it lasts about a millisecond more than it would
/// have had the dead process finished, plus one transaction's rollback or commit and
/// one group-commit batch's write-back. A process that opens the pool meanwhile
/// recovers a dead slot it finds before it joins (it waits up to 10 s for that, then
/// fails with [`Error::InvalidConfig`](crate::Error::InvalidConfig)). Every
/// transaction that returned `Ok`
/// in the dead process is kept; the one it was committing when it died may or may not
/// be, as at a crash.
///
/// A slot that died holding one of the engine's lock words is recovered too: what the
/// lock guards is made whole (a write-back or another change of a group-commit batch
/// finished as the dead thread would have, a growth of the pool finished, the
/// allocator's free lists made again from their bits) and the lock released. Blocks
/// the dead thread had taken out of the free lists and not handed on stay unused until
/// the pool's next open by one process. Where the recovery finds a state no thread
/// leaves (a damaged log, lists that contradict each other) or cannot run, the slot
/// *stops* the pool instead, and [`Error::PeerDied`](crate::Error::PeerDied) names what
/// it found ([`StopCause`](crate::error::StopCause)). From then on, in
/// every process, transactions that write (and the waits for the dead process) fail
/// with [`Error::PeerDied`](crate::Error::PeerDied); a read-only
/// snapshot may still complete from the committed state; no process can open the pool
/// shared until every process has closed it; the next open then recovers it as after a
/// crash: every transaction that returned `Ok` is there, and one that failed with
/// `PeerDied` may or may not be.
///
/// The blocks the dead process kept in its allocator caches are given back to the heap
/// by its recovery. What it held on the way (a batch taken from the free bitmaps and
/// not yet in its cache, a large run reserved for a transaction that had not
/// committed) stays unused until the next recovery of the whole pool (the next open
/// after every process has closed).
///
/// # Limits
/// * Only engines that can share accept it: the `pisces` engine and `volatile`. The
///   others refuse with their reason ([`EngineId::sharing_refused`](crate::EngineId::sharing_refused)).
/// * A pool that may grow ([`Config::max_size`]) grows in whichever process runs out
///   of space, and the others use the new part at once: each process maps the pool
///   file over its whole maximum size when it opens it, and the pool's size is a word
///   they share. This needs a file mapping that may reach past the end of the file:
///   the file and dram media; a pool that may grow on the DAX medium is refused. A
///   process that dies in the middle of a growth is recovered like the others: the
///   growth is finished if the pool's superblock records it, dropped otherwise.
/// * The superblock's record of the root object, which lets an open tell a damaged
///   root slot from a pool without a root, is written only by an open of one process
///   alone (an exclusive open, or the first shared one that recovers the pool).
/// * The shared state lives in `/dev/shm/pisces-<pool uuid>`: every process must see the
///   same `/dev/shm` (one machine, one mount namespace); a process that finds another
///   process's lock on the pool but no shared state refuses to open.
/// * A child made by `fork` inherits the open pool's locks and mappings, which it must
///   not use: open the pool again in the child, after the parent has closed it or
///   alongside it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Sharing {
    /// One process has the pool open; another open fails with
    /// [`Error::Locked`](crate::Error::Locked).
    #[default]
    Exclusive,
    /// Every process that opens the pool shared runs transactions on it at the same
    /// time, with the isolation of threads of one process. The engine keeps its
    /// concurrency-control state in a file on tmpfs (`/dev/shm/pisces-<pool uuid>`)
    /// that every such process maps; an exclusive opener is refused while any shared
    /// one has the pool. Only engines that say they can share accept it (the `pisces`
    /// engine and `volatile`). A pool that may grow grows for all of them.
    Shared,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            size: 64 << 20,
            max_size: None,
            medium: None,
            allow_volatile_medium: false,
            persistence_domain: None,
            trust_persistence_domain: false,
            engine: None,
            max_threads: 8,
            log_bytes_per_thread: 1 << 20,
            engine_options: EngineOptions::default(),
            recovery_threads: 1,
            slot_wait: Duration::from_secs(5),
            operations: Operations::new(),
            sharing: Sharing::Exclusive,
        }
    }
}

impl Config {
    /// The defaults: a 64 MiB pool on the medium its file system calls for, the Pisces
    /// engine, 8 threads.
    /// The setters below change one field each:
    ///
    /// ```
    /// use pisces::{Config, EngineId};
    /// let cfg = Config::new().size(32 << 20).engine(EngineId::Sp3).max_threads(4);
    /// assert_eq!((cfg.size, cfg.engine, cfg.max_threads), (32 << 20, Some(EngineId::Sp3), 4));
    /// ```
    pub fn new() -> Config {
        Config::default()
    }
    /// With [`size`](Config::size) `bytes`.
    pub fn size(mut self, bytes: u64) -> Config {
        self.size = bytes;
        self
    }
    /// With [`max_size`](Config::max_size) `bytes` (`None`: the pool never grows).
    pub fn max_size(mut self, bytes: impl Into<Option<u64>>) -> Config {
        self.max_size = bytes.into();
        self
    }
    /// With [`medium`](Config::medium) `medium` (`None`: the one the file system calls
    /// for).
    pub fn medium(mut self, medium: impl Into<Option<MediumKind>>) -> Config {
        self.medium = medium.into();
        self
    }
    /// With [`allow_volatile_medium`](Config::allow_volatile_medium) `yes`.
    pub fn allow_volatile_medium(mut self, yes: bool) -> Config {
        self.allow_volatile_medium = yes;
        self
    }
    /// With [`persistence_domain`](Config::persistence_domain) `domain` (`None`: the
    /// platform's).
    ///
    /// ```
    /// use pisces::{Config, PersistenceDomain, Pool};
    /// use pisces::medium::DramMedium;
    /// # use std::sync::Arc;
    /// # let dir = tempfile::tempdir_in("/dev/shm").unwrap();
    /// // On tmpfs the pool gets the emulated DRAM medium, which runs under either
    /// // domain (a disk's file medium runs under the page cache's only).
    /// let cfg = Config::new().size(32 << 20).persistence_domain(PersistenceDomain::Eadr);
    /// let pool = Pool::create(dir.path().join("e.pool"), cfg).unwrap();
    /// assert_eq!(pool.persistence_domain(), PersistenceDomain::Eadr);
    /// ```
    pub fn persistence_domain(mut self, domain: impl Into<Option<PersistenceDomain>>) -> Config {
        self.persistence_domain = domain.into();
        self
    }
    /// With [`trust_persistence_domain`](Config::trust_persistence_domain) `yes`.
    pub fn trust_persistence_domain(mut self, yes: bool) -> Config {
        self.trust_persistence_domain = yes;
        self
    }
    /// With [`engine`](Config::engine) `engine` (`None`: the default, or at `open` the
    /// engine the pool records).
    pub fn engine(mut self, engine: impl Into<Option<EngineId>>) -> Config {
        self.engine = engine.into();
        self
    }
    /// With [`max_threads`](Config::max_threads) `n`.
    pub fn max_threads(mut self, n: usize) -> Config {
        self.max_threads = n;
        self
    }
    /// With [`log_bytes_per_thread`](Config::log_bytes_per_thread) `bytes`.
    pub fn log_bytes_per_thread(mut self, bytes: usize) -> Config {
        self.log_bytes_per_thread = bytes;
        self
    }
    /// With [`engine_options`](Config::engine_options) `options` (an engine's own options
    /// type converts, e.g. [`PiscesOptions`](crate::PiscesOptions)).
    pub fn engine_options(mut self, options: impl Into<EngineOptions>) -> Config {
        self.engine_options = options.into();
        self
    }
    /// With [`recovery_threads`](Config::recovery_threads) `n`.
    pub fn recovery_threads(mut self, n: usize) -> Config {
        self.recovery_threads = n;
        self
    }
    /// With [`slot_wait`](Config::slot_wait) `wait`.
    pub fn slot_wait(mut self, wait: Duration) -> Config {
        self.slot_wait = wait;
        self
    }
    /// With [`operations`](Config::operations) `operations`.
    pub fn operations(mut self, operations: Operations) -> Config {
        self.operations = operations;
        self
    }

    /// Open the pool for this process alone (the default), or shared with the other
    /// processes that open it shared (see [`Sharing`]).
    ///
    /// ```
    /// # use pisces::{Config, Pool, PPtr, Sharing};
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let path = dir.path().join("shared.pool");
    /// let cfg = Config::default().size(16 << 20).sharing(Sharing::Shared);
    /// let a = Pool::create(&path, cfg.clone()).unwrap();
    /// let b = Pool::open(&path, cfg).unwrap(); // as another process would
    /// let n: PPtr<u64> = a.root().unwrap();
    /// a.run(|tx| { *tx.write(n)? += 1; Ok(()) }).unwrap();
    /// assert_eq!(b.read(|tx| Ok(*tx.read(n)?)).unwrap(), 1);
    /// ```
    pub fn sharing(mut self, sharing: Sharing) -> Config {
        self.sharing = sharing;
        self
    }

    /// This configuration for a pool of this process alone.
    pub(crate) fn sharing_exclusive(mut self) -> Config {
        self.sharing = Sharing::Exclusive;
        self
    }

    /// What the medium layer is asked for.
    pub(crate) fn medium_request(&self) -> MediumRequest {
        MediumRequest {
            kind: self.medium,
            allow_volatile: self.allow_volatile_medium,
            domain: DomainRequest {
                domain: self.persistence_domain,
                trust: self.trust_persistence_domain,
            },
            shared: self.sharing == Sharing::Shared,
        }
    }

    /// What the engine sees of this configuration, on a medium of kind `medium`.
    pub(crate) fn engine_ctx(&self, medium: MediumKind) -> OpenCtx {
        OpenCtx {
            size: self.size,
            max_threads: self.max_threads,
            log_bytes_per_thread: self.log_bytes_per_thread,
            medium,
            options: self.engine_options.clone(),
            recovery_threads: self.recovery_threads.max(1),
            reexecute: Arc::new(self.operations.clone()),
            region: None,
        }
    }
}
