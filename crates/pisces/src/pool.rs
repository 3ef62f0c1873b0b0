//! Pools: create, open, thread handles, the root object, and `run`.
//!
//! A [`Pool`] is a cheap handle (clone it freely) on one mapped pool and its engine.
//! Transactions run on thread states: [`Pool::run`] checks one out for the duration of
//! one transaction (with retries) and gives it back; a [`ThreadHandle`] keeps one for
//! a thread's lifetime, which is what hot loops should use. States hold per-thread
//! engine resources (a log area, a group-commit batch), so there are at most
//! `Config::max_threads` of them; they are never destroyed while the pool is open,
//! and a parked state's pending write-backs are helped out by other threads.

use crate::config::{Config, Sharing};
use crate::engine::registry::{self, AnyEngine, AnyThread};
use crate::engine::{EngineId, OpenCtx, Storage};
use crate::heap::{superblock, FormatParams, Heap};
use crate::medium::{self, Medium};
use crate::nesting::{InTx, OpenExplicit};
use crate::ops::Operations;
use crate::sidecar::{Role, Sidecar};
use crate::tx::{read_on, run_on, Tx, TxStats};
use crate::tx_options::{Isolation, TxOptions};
use crate::{Error, PPtr, Result};
use bytemuck::{Pod, Zeroable};
use std::path::Path;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::ThreadId;
use std::time::{Duration, Instant};

/// How long a process that joins a shared pool waits for a slot that a dead process
/// left in use to be recovered, before it refuses to join.
const JOIN_RECOVERY_WAIT: Duration = Duration::from_secs(10);

/// How long [`Pool::open_or_create`] waits for another caller that has created the
/// pool file to size it: that takes the creator two system calls, so only a creator
/// that was stopped or killed in between makes a caller wait this long.
const CREATOR_WAIT: Duration = Duration::from_secs(1);

/// The root slot's payload: where the root object is, its size and a fingerprint of
/// its type.
#[derive(Clone, Copy, Pod, Zeroable)]
#[repr(C)]
struct RootSlot {
    offset: u64,
    /// Low 32 bits: size of the root type; high 32 bits: its fingerprint.
    size_and_type: u64,
}

/// A fingerprint of `T` for the root slot: CRC32C of its type name with module paths
/// removed (`PPtr<u64>`, not `pisces::heap::pptr::PPtr<u64>`), so moving a type to
/// another module keeps its pools usable, while `u64` and `PPtr<u64>` differ. Never 0.
fn type_fingerprint<T: ?Sized>() -> u32 {
    let full = std::any::type_name::<T>();
    let mut short = String::with_capacity(full.len());
    let mut segment = String::new();
    for c in full.chars() {
        if c.is_alphanumeric() || c == '_' || c == ':' {
            segment.push(c);
        } else {
            short.push_str(segment.rsplit("::").next().unwrap_or(""));
            segment.clear();
            short.push(c);
        }
    }
    short.push_str(segment.rsplit("::").next().unwrap_or(""));
    crc32c::crc32c(short.as_bytes()).max(1)
}

/// `Err(InvalidConfig)` if `cfg` asks for a pool that may grow and `engine` cannot
/// run on one.
fn refuse_growth(engine: EngineId, max_size: Option<u64>, size: u64) -> Result<()> {
    let Some(max) = max_size else {
        return Ok(());
    };
    let Some(why) = engine.growth_refused() else {
        return Ok(());
    };
    if max > size {
        return Err(Error::invalid_config(format!(
            "the {engine} engine cannot use a pool that grows ({why}); leave Config::max_size unset"
        )));
    }
    Ok(())
}

/// `Err(InvalidConfig)` if `engine` cannot run on a pool that several processes share.
fn refuse_sharing(engine: EngineId) -> Result<()> {
    match engine.sharing_refused() {
        None => Ok(()),
        Some(why) => Err(Error::invalid_config(format!(
            "the {engine} engine cannot run on a pool that several processes open at once ({why}); \
             open it exclusively"
        ))),
    }
}

/// The refusal of a pool that may grow, opened or created shared on a medium that
/// cannot follow another process's growth (`why`).
fn shared_growth_refused(why: &str) -> Error {
    Error::invalid_config(format!(
        "a pool that may grow cannot be opened by several processes at once here ({why}); \
         open it exclusively, or make it with Config::max_size unset"
    ))
}

/// `Err(InvalidConfig)` if `cfg` asks for a persistence domain other than the one
/// `medium` runs under (a medium given to `create_on` / `open_on` brings its own).
fn refuse_domain(medium: &dyn Medium, cfg: &Config) -> Result<()> {
    match cfg.persistence_domain {
        Some(d) if d != medium.persistence_domain() => Err(Error::invalid_config(format!(
            "the persistence domain {d} was asked for, the {} medium runs under {}",
            medium.kind().name(),
            medium.persistence_domain()
        ))),
        _ => Ok(()),
    }
}

/// `Err(InvalidConfig)` if `cfg` asks an engine that keeps its own pool file (whose
/// library flushes as it sees fit) for a domain other than ADR.
fn refuse_own_file_domain(engine: EngineId, cfg: &Config) -> Result<()> {
    match cfg.persistence_domain {
        Some(d) if d != medium::PersistenceDomain::Adr => Err(Error::invalid_config(format!(
            "the {engine} engine keeps its own pool file and flushes as its library decides; \
             it cannot run under the {d} domain"
        ))),
        _ => Ok(()),
    }
}

/// A thread slot and its engine state. Boxed: the state moves between the idle list, a
/// `Pool::run`'s lease and a `ThreadHandle` at every checkout and checkin, and an
/// engine's thread state is large (moved by value, it would be a `memcpy` of the whole
/// state twice per `Pool::run`).
type ThreadState = (usize, Box<AnyThread>);

/// Thread states of a pool that are not checked out, and how many exist.
struct Slots {
    idle: Vec<ThreadState>,
    created: usize,
    /// The slots this process owns (shared pools: claimed in the sidecar, the others
    /// are other processes'; exclusive pools: `0..created`).
    owned: Vec<usize>,
}

struct PoolInner {
    engine: AnyEngine,
    slots: Mutex<Slots>,
    /// Signalled when a state is checked in (for `run` waiting on a full pool).
    returned: Condvar,
    max_threads: usize,
    slot_wait: Duration,
    /// Identity for the nesting check (the address of this allocation).
    id: usize,
    /// Registered operations (`crate::ops`).
    ops: Operations,
    /// The explicit transactions that are open, by thread (for the nesting check).
    explicit: OpenExplicit,
    /// Set when `eadr` was forced against what the platform reports.
    domain_warning: Option<String>,
    /// Set when the DRAM medium was forced onto a file system that outlives power loss.
    medium_warning: Option<String>,
    /// What a commit survives, for an engine that keeps its own pool file (the others
    /// derive it from their heap's medium).
    own_file_durability: Option<medium::PoolDurability>,
    /// The pool is shared with other processes: this process's attachment.
    sidecar: Option<Sidecar>,
}

impl Drop for PoolInner {
    fn drop(&mut self) {
        // Thread states first (each writes back its batch; a shared pool's hand their
        // slots over), then background work, then anything left.
        self.slots
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .idle
            .clear();
        if let Some(s) = &self.sidecar {
            return self.detach(s);
        }
        self.engine.shutdown();
        self.engine.quiesce();
        self.close();
    }
}

impl PoolInner {
    /// The engine's close and the mark of a clean close.
    fn close(&self) {
        self.engine.close();
        // Only a close whose last write-back is durable is a clean one (a crashed
        // simulator's, or a failed msync, is not).
        if self.engine.sync().is_ok() {
            if let Some(heap) = self.engine.heap() {
                heap.mark_closed();
            }
        }
    }

    /// Detach from a shared pool, its thread states gone. The last process closes the
    /// pool; the others leave it open, their commits written back and their slots
    /// given up. A failure to tell counts as not the last: the pool stays marked open,
    /// which the next open recovers as after a crash. A pool stopped by a peer's death
    /// is not closed (its state is a crash's); the last process removes the sidecar, so
    /// that the next open recovers it.
    fn detach(&self, sidecar: &Sidecar) {
        sidecar.wait_for_recoveries();
        sidecar.detach_slots();
        if !sidecar.detach_is_last().unwrap_or(false) {
            if sidecar.stopped().is_none() {
                let _ = self.engine.sync();
            }
            return;
        }
        if sidecar.stopped().is_none() {
            self.engine.shutdown();
            self.engine.quiesce();
        }
        // (Looked at again: a wait in the write-back may have found a dead peer.)
        if sidecar.stopped().is_none() {
            self.close();
        }
        sidecar.retire();
    }
}

/// What an explicit transaction borrows from its [`ThreadHandle`].
pub(crate) struct HandleParts<'h> {
    /// The pool's identity (closure transactions' nesting check).
    pub pool: usize,
    /// The pool's open explicit transactions.
    pub explicit: &'h OpenExplicit,
    /// The handle's thread slot.
    pub slot: usize,
    /// The thread state.
    pub th: &'h mut AnyThread,
    /// The handle's counters.
    pub stats: &'h mut TxStats,
    /// The thread that began the handle's open explicit transaction, if any.
    pub began_on: &'h mut Option<ThreadId>,
}

/// A thread state checked out for one `Pool::run`; given back when dropped, also when
/// the transaction's closure panics.
struct Lease<'p> {
    pool: &'p Pool,
    state: Option<ThreadState>,
}

impl Drop for Lease<'_> {
    fn drop(&mut self) {
        if let Some(s) = self.state.take() {
            self.pool.checkin(s);
        }
    }
}

/// An open pool. Cloning gives another handle on the same pool; the pool is closed
/// (pending write-backs done, file synced, lock released) when the last clone and the
/// last [`ThreadHandle`] are dropped.
///
/// ```
/// use pisces::{Config, Pool, PPtr};
/// # fn main() -> pisces::Result<()> {
/// # let dir = tempfile::tempdir().unwrap();
/// # let path = dir.path().join("doc.pool");
/// let pool = Pool::create(&path, Config::default().size(32 << 20))?;
/// let root: PPtr<u64> = pool.root()?;
/// pool.run(|tx| {
///     *tx.write(root)? += 1;
///     Ok(())
/// })?;
/// assert_eq!(pool.run(|tx| Ok(*tx.read(root)?))?, 1);
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Pool {
    inner: Arc<PoolInner>,
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pool")
            .field("engine", &self.inner.engine.id())
            .field("heap", &self.inner.engine.heap())
            .finish()
    }
}

impl Pool {
    /// Create a new pool file at `path` (it must not exist) and open it.
    ///
    /// ```
    /// # use pisces::{Config, Pool, Error};
    /// # let dir = tempfile::tempdir().unwrap();
    /// let path = dir.path().join("new.pool");
    /// let pool = Pool::create(&path, Config::default().size(32 << 20)).unwrap();
    /// drop(pool);
    /// // Creating over an existing file is refused.
    /// assert!(matches!(Pool::create(&path, Config::default()), Err(Error::AlreadyExists(_))));
    /// ```
    pub fn create(path: impl AsRef<Path>, cfg: Config) -> Result<Pool> {
        let engine = cfg.engine.unwrap_or(EngineId::Pisces);
        refuse_growth(engine, cfg.max_size, cfg.size)?;
        if cfg.sharing == Sharing::Shared {
            // Formatted by this process alone, then opened shared (a pool being
            // formatted is no pool yet for anyone else).
            refuse_sharing(engine)?;
            drop(Self::create(
                path.as_ref(),
                cfg.clone().sharing_exclusive(),
            )?);
            return Self::open(path, cfg);
        }
        if engine.storage() == Storage::OwnFile {
            return Self::on_own_file(engine, path.as_ref(), &cfg, true);
        }
        let opened = medium::open::create_pool_file(
            path.as_ref(),
            cfg.size,
            cfg.max_size.unwrap_or(cfg.size),
            cfg.medium_request(),
        )?;
        let cfg = cfg.persistence_domain(opened.medium.persistence_domain());
        Self::create_on(opened.medium, cfg)
            .map(|p| p.with_warnings(opened.domain_warning, opened.medium_warning))
            .inspect_err(|_| {
                let _ = std::fs::remove_file(path.as_ref());
            })
    }

    /// Create (`create`) or open the pool of an engine that keeps its own pool file,
    /// on the medium kind the file system calls for (or the one `cfg` names).
    fn on_own_file(engine: EngineId, path: &Path, cfg: &Config, create: bool) -> Result<Pool> {
        refuse_own_file_domain(engine, cfg)?;
        let fs = medium::FileSystem::of_path(path).map_err(|e| {
            Error::io(
                format!("inspecting the file system of {}", path.display()),
                e,
            )
        })?;
        let (choice, warning) =
            medium::durability::choose(cfg.medium, fs, cfg.allow_volatile_medium)?;
        let kind = match choice {
            medium::durability::Choice::Named(k) => k,
            // The engine's library finds persistent memory by itself.
            medium::durability::Choice::DaxOrFile => medium::MediumKind::File,
        };
        let engine = registry::open_file(engine, path, &cfg.engine_ctx(kind), create)?;
        let durability = medium::PoolDurability::of_own_file(kind, path, warning);
        Self::from_engine(engine, cfg, Some(durability))
    }

    /// Open an existing pool file, running recovery if it was not closed cleanly.
    /// `cfg.size`, `max_threads` and `log_bytes_per_thread` are taken from the pool.
    ///
    /// ```
    /// # use pisces::{Config, Pool, PPtr};
    /// # let dir = tempfile::tempdir().unwrap();
    /// let path = dir.path().join("kept.pool");
    /// let cfg = Config::default().size(32 << 20);
    /// {
    ///     let pool = Pool::create(&path, cfg.clone()).unwrap();
    ///     let n: PPtr<u64> = pool.root().unwrap();
    ///     pool.run(|tx| { *tx.write(n)? = 7; Ok(()) }).unwrap();
    /// } // closed
    /// let pool = Pool::open(&path, cfg).unwrap();
    /// let n: PPtr<u64> = pool.root().unwrap();
    /// assert_eq!(pool.run(|tx| Ok(*tx.read(n)?)).unwrap(), 7);
    /// ```
    pub fn open(path: impl AsRef<Path>, cfg: Config) -> Result<Pool> {
        if let Some(engine) = cfg.engine.filter(|e| e.storage() == Storage::OwnFile) {
            if cfg.sharing == Sharing::Shared {
                refuse_sharing(engine)?;
            }
            return Self::on_own_file(engine, path.as_ref(), &cfg, false);
        }
        let opened = superblock::open_pool_file_in(path.as_ref(), cfg.medium_request())?;
        let cfg = cfg.persistence_domain(opened.medium.persistence_domain());
        let pool = if cfg.sharing == Sharing::Shared {
            Self::open_shared(path.as_ref(), opened.medium, cfg)
        } else {
            Self::open_on(opened.medium, cfg)
        };
        pool.map(|p| p.with_warnings(opened.domain_warning, opened.medium_warning))
    }

    /// [`Pool::open`] of a pool shared with other processes (`Sharing::Shared`; the
    /// pool file is locked shared): attach to its sidecar, then either recover the
    /// pool and build the shared state (no other process has it open) or find the
    /// state the processes that have it open share.
    fn open_shared(path: &Path, medium: Arc<dyn Medium>, cfg: Config) -> Result<Pool> {
        refuse_domain(medium.as_ref(), &cfg)?;
        let heap = Heap::open(medium.clone())?;
        let sb = heap.superblock();
        let engine = EngineId::from_u32(sb.engine_id)
            .filter(|e| e.storage() == Storage::Heap)
            .ok_or(Error::UnknownEngine(sb.engine_id))?;
        if let Some(asked) = cfg.engine.filter(|&e| e != engine) {
            return Err(Error::WrongEngine(Box::new(crate::error::WrongEngine {
                found: engine.name().to_string(),
                requested: asked.name().to_string(),
            })));
        }
        refuse_sharing(engine)?;
        let (reserve, need) = crate::sidecar::region_bytes(heap.layout());
        let sidecar = Sidecar::attach(
            path,
            &sb.uuid,
            &crate::sidecar::path_for(&sb.uuid),
            reserve,
            need,
        )?;
        let options = cfg.engine_options.to_string();
        let heap = match sidecar.role() {
            Role::Initializer => heap,
            Role::Joiner => {
                drop(heap);
                sidecar.check_engine(engine as u32, &options)?;
                Heap::join(medium, sidecar.generation())?
            }
        };
        heap.set_shared();
        heap.share_sizes(sidecar.region()).map_err(|e| match e {
            Error::MediumUnsupported(why) => shared_growth_refused(&why),
            e => e,
        })?;
        let heap = Arc::new(heap);
        let max_threads = heap.layout().max_threads;
        let ctx = OpenCtx {
            region: Some(sidecar.region().clone()),
            ..cfg.engine_ctx(heap.medium().kind())
        };
        let eng = registry::open_heap(engine, heap.clone(), &cfg.engine_options, &ctx)?;
        if sidecar.role() == Role::Initializer {
            // Recovery succeeded: the new run generation becomes durable, then the
            // other processes may come in.
            heap.commit_generation();
            sidecar.ready(heap.generation(), engine as u32, &options)?;
        }
        if sidecar.role() == Role::Joiner {
            // A process that ended with a slot in use may have left its clock, bounds
            // or locks for the others to wait on: recovered first (here, or by the
            // process that already recovers it, which holds its byte meanwhile), or
            // this process does not join.
            let until = Instant::now() + JOIN_RECOVERY_WAIT;
            while let Some(slot) =
                eng.abandoned_slot(&|s| sidecar.slot_held_elsewhere(s).unwrap_or(true))
            {
                if let Some(s) = sidecar.stopped() {
                    return Err(sidecar.died(s));
                }
                if !sidecar.is_dead(slot) || Instant::now() >= until {
                    return Err(Error::invalid_config(format!(
                        "thread slot {slot} of the shared pool was left in use by a process \
                         that ended without giving it up; close the pool in every process and \
                         open it again to recover it"
                    )));
                }
                if !sidecar.report_dead(slot) {
                    return Err(sidecar.died(sidecar.stopped().unwrap_or(slot as u32)));
                }
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        let mut pool = Self::from_engine(eng, &cfg.clone().max_threads(max_threads), None)?;
        Arc::get_mut(&mut pool.inner)
            .expect("a pool just made has one handle")
            .sidecar = Some(sidecar);
        pool.verify_root(&heap)?;
        Ok(pool)
    }

    /// Open the pool at `path`, or create it there if no file exists: for programs that
    /// make their pool on first start and reopen it afterwards. Opening behaves as
    /// [`Pool::open`] (recovery, `cfg`'s engine checked against the pool's, its other
    /// options applied); creating as [`Pool::create`] with `cfg`.
    ///
    /// ```
    /// use pisces::{Config, Pool, PPtr};
    /// # let dir = tempfile::tempdir().unwrap();
    /// let path = dir.path().join("counter.pool");
    /// for run in 1..=2 {
    ///     let pool = Pool::open_or_create(&path, Config::new().size(32 << 20)).unwrap();
    ///     let n: PPtr<u64> = pool.root().unwrap();
    ///     pool.run(|tx| { *tx.write(n)? += 1; Ok(()) }).unwrap();
    ///     assert_eq!(pool.run(|tx| Ok(*tx.read(n)?)).unwrap(), run);
    /// }
    /// ```
    ///
    /// # Several callers at once
    /// When processes call it together on a path where no pool exists, exactly one
    /// creates the pool (the file is created exclusively, so no pool is ever formatted
    /// over another); every other one opens it. A pool is open in one process at a
    /// time, so an open that meets the pool still open — by its creator or by a caller
    /// that opened it first — fails with [`Error::Locked`] (in this process:
    /// [`Error::AlreadyOpen`]); retry it, or share one [`Pool`]. A caller that meets the
    /// file in the instant between its creation and its sizing waits for the creator
    /// (up to a second) and then gets `Locked` as above; if the creator fails, it
    /// removes the file and the waiting caller creates the pool itself. A file that
    /// stays empty (left by a creator that was killed before it sized the file, or
    /// made by something else) is refused after that second with [`Error::TooSmall`];
    /// a creator killed later, while formatting, leaves a file that is refused as not
    /// a pool ([`Error::BadMagic`]). Remove such a file to start over.
    pub fn open_or_create(path: impl AsRef<Path>, cfg: Config) -> Result<Pool> {
        let path = path.as_ref();
        let waited_until = Instant::now() + CREATOR_WAIT;
        loop {
            // `symlink_metadata`: a dangling symlink is a file that exists (create
            // refuses it, with its own error).
            if path.symlink_metadata().is_err() {
                match Self::create(path, cfg.clone()) {
                    // Another caller created it since the check: open theirs.
                    Err(Error::AlreadyExists(_)) => {}
                    done => return done,
                }
            }
            match Self::open(path, cfg.clone()) {
                // A creator that failed removed it: create it here.
                Err(Error::NotFound(_)) if Instant::now() < waited_until => {}
                // A creator has made the file and not yet sized it.
                Err(Error::TooSmall(t)) if t.len == 0 && Instant::now() < waited_until => {
                    std::thread::sleep(Duration::from_millis(1));
                }
                done => return done,
            }
        }
    }

    /// Format a new pool on a zeroed medium (the crash simulator, anonymous memory).
    ///
    /// ```
    /// # use std::sync::Arc;
    /// use pisces::medium::DramMedium;
    /// use pisces::{Config, Pool, PPtr};
    /// let medium = Arc::new(DramMedium::anonymous(32 << 20, 0, 0).unwrap());
    /// let pool = Pool::create_on(medium, Config::default()).unwrap();
    /// let n: PPtr<u64> = pool.root().unwrap();
    /// assert_eq!(pool.run(|tx| Ok(*tx.read(n)?)).unwrap(), 0);
    /// ```
    pub fn create_on(medium: Arc<dyn Medium>, cfg: Config) -> Result<Pool> {
        let engine = cfg.engine.unwrap_or(EngineId::Pisces);
        if engine.storage() != Storage::Heap {
            return Err(Error::invalid_config(format!(
                "the {engine} engine keeps its own pool file: use Pool::create / Pool::open with a path"
            )));
        }
        refuse_domain(medium.as_ref(), &cfg)?;
        refuse_growth(engine, cfg.max_size, medium.len() as u64)?;
        let max_size = cfg.max_size.unwrap_or(medium.len() as u64);
        // The engine sizes its regions by the pool: the medium's.
        let regions = engine.regions(&OpenCtx {
            size: medium.len() as u64,
            ..cfg.engine_ctx(medium.kind())
        });
        let heap = Heap::format_growable(
            medium,
            FormatParams {
                engine_id: engine as u32,
                max_threads: cfg.max_threads,
                log_bytes_per_thread: cfg.log_bytes_per_thread,
                regions,
            },
            max_size,
        )?;
        Self::start(Arc::new(heap), engine, &cfg)
    }

    /// Open a pool on a medium that holds one (e.g. a crash image of the simulator in
    /// `pisces-verify`), running recovery.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// use pisces::medium::DramMedium;
    /// use pisces::{Config, Pool, PPtr};
    /// let cfg = Config::default().size(4 << 20).max_threads(2).log_bytes_per_thread(64 << 10);
    /// let medium = Arc::new(DramMedium::anonymous(4 << 20, 0, 0).unwrap());
    /// let pool = Pool::create_on(medium.clone(), cfg.clone()).unwrap();
    /// let n: PPtr<u64> = pool.root().unwrap();
    /// pool.run(|tx| { *tx.write(n)? = 1; Ok(()) }).unwrap();
    /// drop(pool);
    /// let again = Pool::open_on(medium, cfg).unwrap();
    /// assert_eq!(again.run(|tx| Ok(*tx.read(n)?)).unwrap(), 1);
    /// ```
    pub fn open_on(medium: Arc<dyn Medium>, cfg: Config) -> Result<Pool> {
        refuse_domain(medium.as_ref(), &cfg)?;
        let heap = Heap::open(medium)?;
        let found = heap.superblock().engine_id;
        let engine = EngineId::from_u32(found)
            .filter(|e| e.storage() == Storage::Heap)
            .ok_or(Error::UnknownEngine(found))?;
        if let Some(asked) = cfg.engine.filter(|&e| e != engine) {
            return Err(Error::WrongEngine(Box::new(crate::error::WrongEngine {
                found: engine.name().to_string(),
                requested: asked.name().to_string(),
            })));
        }
        Self::start(Arc::new(heap), engine, &cfg)
    }

    fn start(heap: Arc<Heap>, id: EngineId, cfg: &Config) -> Result<Pool> {
        let max_threads = heap.layout().max_threads;
        refuse_growth(id, Some(heap.layout().max_size), heap.size() as u64)?;
        let ctx = cfg.engine_ctx(heap.medium().kind());
        let engine = registry::open_heap(id, heap.clone(), &cfg.engine_options, &ctx)?;
        // Recovery succeeded: only now does the new run generation become durable.
        heap.commit_generation();
        let pool = Self::from_engine(engine, &cfg.clone().max_threads(max_threads), None)?;
        pool.verify_root(&heap)?;
        Ok(pool)
    }

    /// The root slot as recovery left it, against the superblock's root record: a
    /// slot that lost a recorded root is damage (`Err(Corrupt)`), never a pool without
    /// a root, whose objects would all be unreachable. A root found and not recorded
    /// yet (a version 3 pool, or a crash right after the root was made) is recorded.
    fn verify_root(&self, heap: &Heap) -> Result<()> {
        let slot: PPtr<RootSlot> = PPtr::from_offset(self.inner.engine.root_slot());
        let found = self.run_with(TxOptions::read_only(), |tx| Ok(*tx.read(slot)?))?;
        match heap.superblock().root_record() {
            Some((offset, tag)) if (found.offset, found.size_and_type) != (offset, tag) => {
                Err(Error::corrupt(format!(
                    "the root slot is damaged: the superblock records the root object at {offset:#x} \
                     ({} bytes), the slot names {:#x} ({} bytes); the pool's objects cannot be \
                     reached from it (restore the pool file from a copy)",
                    tag & 0xFFFF_FFFF,
                    found.offset,
                    found.size_and_type & 0xFFFF_FFFF
                )))
            }
            Some(_) => Ok(()),
            None => {
                heap.record_root(found.offset, found.size_and_type);
                Ok(())
            }
        }
    }

    /// A pool running `engine`; `own_file_durability`: what a commit survives, for an
    /// engine that keeps its own pool file.
    fn from_engine(
        engine: AnyEngine,
        cfg: &Config,
        own_file_durability: Option<medium::PoolDurability>,
    ) -> Result<Pool> {
        let max_threads = cfg.max_threads;
        let inner = Arc::new_cyclic(|w| PoolInner {
            engine,
            slots: Mutex::new(Slots {
                idle: Vec::new(),
                created: 0,
                owned: Vec::new(),
            }),
            returned: Condvar::new(),
            max_threads,
            slot_wait: cfg.slot_wait,
            id: w.as_ptr() as usize,
            ops: cfg.operations.clone(),
            explicit: OpenExplicit::default(),
            domain_warning: None,
            medium_warning: None,
            own_file_durability,
            sidecar: None,
        });
        Ok(Pool { inner })
    }

    /// This pool with its persistence-domain and medium warnings (set while it is the
    /// only handle: right after it was opened).
    fn with_warnings(mut self, domain: Option<String>, medium: Option<String>) -> Pool {
        if let Some(inner) = Arc::get_mut(&mut self.inner) {
            inner.domain_warning = domain;
            inner.medium_warning = medium;
        }
        self
    }

    /// What a committed transaction on this pool survives — process crashes and power
    /// loss, process crashes only, or neither — and why: the medium (chosen by the
    /// file system unless the program named one, see
    /// [`medium::durability`]), its persistence domain, the file system. Its
    /// `Display` says it in words; `pisces info` prints it.
    ///
    /// ```
    /// # use pisces::{Config, MediumKind, Pool, Survives};
    /// # let dir = tempfile::tempdir().unwrap();
    /// let pool = Pool::create(dir.path().join("todo.pool"), Config::new().size(32 << 20)).unwrap();
    /// let d = pool.durability();
    /// // In a temporary directory on a disk the pool gets the file medium (msync at each
    /// // fence), on tmpfs the DRAM medium: either way the answer says so.
    /// match d.medium() {
    ///     MediumKind::File => assert_eq!(d.survives(), Survives::PowerLoss),
    ///     MediumKind::Dram { .. } => assert_eq!(d.survives(), Survives::ProcessCrash),
    ///     _ => {}
    /// }
    /// println!("{d}");
    /// ```
    pub fn durability(&self) -> medium::PoolDurability {
        let Some(heap) = self.heap() else {
            // Set at open for every engine without a heap (it keeps its own file).
            return self
                .inner
                .own_file_durability
                .clone()
                .unwrap_or_else(medium::PoolDurability::unknown);
        };
        let warning = match (&self.inner.domain_warning, &self.inner.medium_warning) {
            (Some(d), Some(m)) => Some(format!("{m}; {d}")),
            (d, m) => m.clone().or_else(|| d.clone()),
        };
        let durable = self.inner.engine.id().is_durable();
        medium::PoolDurability::of_medium(heap.medium().as_ref(), durable, warning)
    }

    /// Where a store to this pool becomes durable: the persistence domain its medium
    /// runs under, decided at open ([`Config::persistence_domain`]). The `pmdk`
    /// engine's pool is libpmemobj's, which flushes as under ADR (`adr`).
    ///
    /// ```
    /// # use pisces::{Config, Pool, PersistenceDomain};
    /// # let dir = tempfile::tempdir_in("/dev/shm").unwrap();
    /// let pool = Pool::create(dir.path().join("d.pool"), Config::default().size(32 << 20)).unwrap();
    /// // On tmpfs: the DRAM medium, ADR unless asked otherwise. (The file medium of a
    /// // disk runs under `PageCache`.)
    /// assert_eq!(pool.persistence_domain(), PersistenceDomain::Adr);
    /// ```
    pub fn persistence_domain(&self) -> medium::PersistenceDomain {
        self.heap().map_or(medium::PersistenceDomain::Adr, |h| {
            h.medium().persistence_domain()
        })
    }

    /// Set when the pool runs under `eadr` forced against what the platform reports
    /// ([`Config::trust_persistence_domain`]): a power failure may then lose committed
    /// transactions if the caches are not persistent after all. Tools print it.
    pub fn persistence_domain_warning(&self) -> Option<&str> {
        self.inner.domain_warning.as_deref()
    }

    /// Leak the pool without closing it, as a test simulates a crash: nothing of the
    /// close runs, and the pool's memory stays as the "crash" left it. In `mutation`
    /// builds it also lets mutation scenarios in (a leaked pool would keep them out
    /// forever); a thread of the pool still running must then run no protocol step
    /// (an engine's background thread that never touches the pool again is fine).
    #[cfg(any(test, feature = "tools"))]
    #[doc(hidden)]
    pub fn forget_as_crash(self) {
        #[cfg(feature = "mutation")]
        if let Some(heap) = self.heap() {
            heap.release_mutation_gate();
        }
        std::mem::forget(self);
    }

    /// The heap (layout, medium, superblock); `None` for the `pmdk` engine, whose pool
    /// is libpmemobj's.
    pub(crate) fn heap(&self) -> Option<&Arc<Heap>> {
        self.inner.engine.heap()
    }

    /// Payload offsets of every allocated object of the pool's persistent allocator
    /// state (the root object included), after checking that state is sound: a
    /// diagnostic for leak checks (allocated but unreachable) and tests. Pending
    /// write-backs are finished first ([`write_back`](Pool::write_back)). `Err` for
    /// engines with their own pool format.
    ///
    /// ```
    /// # use pisces::{Config, Pool, PPtr};
    /// # let dir = tempfile::tempdir().unwrap();
    /// let pool = Pool::create(dir.path().join("a.pool"), Config::default().size(32 << 20)).unwrap();
    /// let root: PPtr<u64> = pool.root().unwrap();
    /// assert_eq!(pool.allocated_objects().unwrap(), vec![root.offset()]);
    /// ```
    pub fn allocated_objects(&self) -> Result<Vec<u64>> {
        let heap = self.heap().ok_or_else(|| {
            Error::invalid_config(format!(
                "the {} engine keeps its own pool format; it has no allocator state to list",
                self.engine_id()
            ))
        })?;
        self.write_back()?;
        let mut v = Vec::new();
        crate::heap::alloc::Allocator::for_each_allocated(heap, |b| v.push(b.payload()))?;
        Ok(v)
    }

    /// The pool's current superblock (identity, geometry, run generation); `None` for
    /// an engine with its own pool format (`pmdk`).
    ///
    /// ```
    /// # use pisces::{Config, Pool};
    /// # let dir = tempfile::tempdir().unwrap();
    /// let pool = Pool::create(dir.path().join("h.pool"), Config::default().size(32 << 20)).unwrap();
    /// assert_eq!(pool.superblock().unwrap().pool_size, 32 << 20);
    /// ```
    #[cfg(feature = "tools")]
    pub fn superblock(&self) -> Option<crate::heap::superblock::Superblock> {
        self.heap().map(|h| h.superblock())
    }

    /// The engine running this pool.
    ///
    /// ```
    /// # use pisces::{Config, Pool, EngineId};
    /// # let dir = tempfile::tempdir().unwrap();
    /// let pool = Pool::create(dir.path().join("e.pool"), Config::default().size(32 << 20)).unwrap();
    /// assert_eq!(pool.engine_id(), EngineId::Pisces);
    /// ```
    pub fn engine_id(&self) -> EngineId {
        self.inner.engine.id()
    }

    /// The engine (white-box tests).
    #[cfg(test)]
    pub(crate) fn engine_ref(&self) -> &AnyEngine {
        &self.inner.engine
    }

    /// The pool's registered operations (`crate::ops`).
    pub(crate) fn ops(&self) -> &Operations {
        &self.inner.ops
    }

    /// A thread state: an idle one, a new one while fewer than `max_threads` exist,
    /// or (if `wait`) the next one given back within `Config::slot_wait`.
    fn checkout(&self, wait: bool) -> Result<ThreadState> {
        // The deadline is taken at the first wait: an idle state, the common case,
        // costs no clock read.
        let mut deadline = None;
        let mut slots = self.inner.slots.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if let Some(s) = slots.idle.pop() {
                return Ok(s);
            }
            if slots.created < self.inner.max_threads {
                if let Some(slot) = self.claim_slot(&slots)? {
                    let th = self.inner.engine.thread(slot)?;
                    slots.created += 1;
                    slots.owned.push(slot);
                    return Ok((slot, Box::new(th)));
                }
            }
            let now = Instant::now();
            let until = *deadline.get_or_insert(now + self.inner.slot_wait);
            if !wait || now >= until {
                return Err(Error::TooManyThreads(self.inner.max_threads));
            }
            // Another process that gives up a slot does not signal here: look again
            // every millisecond.
            let step = match self.inner.sidecar {
                Some(_) => (until - now).min(Duration::from_millis(1)),
                None => until - now,
            };
            slots = self
                .inner
                .returned
                .wait_timeout(slots, step)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    /// A slot for a new thread state: the next one for a pool of this process alone;
    /// for a shared pool, one no process owns, now this one's (None: every slot is
    /// owned).
    fn claim_slot(&self, slots: &Slots) -> Result<Option<usize>> {
        let Some(sidecar) = &self.inner.sidecar else {
            return Ok(Some(slots.created));
        };
        for slot in (0..self.inner.max_threads).filter(|s| !slots.owned.contains(s)) {
            if sidecar.claim_slot(slot)? {
                return Ok(Some(slot));
            }
        }
        Ok(None)
    }

    fn checkin(&self, s: ThreadState) {
        self.inner
            .slots
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .idle
            .push(s);
        self.inner.returned.notify_one();
    }

    /// A thread state kept until the handle is dropped: the fast way to run many
    /// transactions on one thread (no checkout per transaction, group commit across
    /// them). Fails with [`Error::TooManyThreads`] when all slots are in use.
    ///
    /// ```
    /// # use pisces::{Config, Pool, PPtr};
    /// # let dir = tempfile::tempdir().unwrap();
    /// let pool = Pool::create(dir.path().join("t.pool"), Config::default().size(32 << 20)).unwrap();
    /// let n: PPtr<u64> = pool.root().unwrap();
    /// std::thread::scope(|s| {
    ///     for _ in 0..2 {
    ///         let pool = pool.clone();
    ///         s.spawn(move || {
    ///             let mut h = pool.handle().unwrap();
    ///             for _ in 0..100 {
    ///                 h.run(|tx| { *tx.write(n)? += 1; Ok(()) }).unwrap();
    ///             }
    ///         });
    ///     }
    /// });
    /// assert_eq!(pool.run(|tx| Ok(*tx.read(n)?)).unwrap(), 200);
    /// ```
    pub fn handle(&self) -> Result<ThreadHandle> {
        let state = self.checkout(false)?;
        // The thread state counts from its creation; the handle's stats from here.
        let stats = TxStats {
            ro_locked_reads: state.1.ro_locked_reads(),
            ..TxStats::default()
        };
        Ok(ThreadHandle {
            pool: self.clone(),
            state: Some(state),
            stats,
            explicit_began_on: None,
        })
    }

    /// Run `f` as one transaction, retrying it on conflicts, and return its value.
    ///
    /// `f` may run several times; an `Err` from it rolls the transaction back and is
    /// returned (use [`Error::abort`] for a user abort; [`Pool::transaction`] takes the
    /// caller's own error type). All reads inside one attempt see one snapshot. `run` returns
    /// after the transaction is durable.
    ///
    /// Transactions commit within a bounded number of attempts, also while other threads
    /// keep writing what they read or write: after repeated conflict aborts, the
    /// optimistic and snapshot engines (`pisces`, `mvcc`, `sp3`, `spht`, `timestone`)
    /// hold update transactions back for a bounded time while the retrying transaction
    /// runs; the locking engines (`undo`, `pmdk`) lock what a transaction reads, so
    /// writers cannot change it under it. (`bare`, the read-path reference, gives no such
    /// bound: a writer there may starve.)
    ///
    /// When all `max_threads` thread states are checked out, `run` waits up to
    /// `Config::slot_wait` for one. A transaction cannot run inside another one of the
    /// same pool on the same thread ([`Error::NestedTransaction`]). If `f` panics, the
    /// attempt is rolled back and the thread state given back before the panic goes on.
    ///
    /// A transaction may run inside a transaction of another pool (they commit
    /// separately: not atomic together). Such a nested transaction never waits for
    /// other transactions of its pool, and retries a conflict a bounded number of
    /// times; then it returns [`Error::Conflict`], and the `run` around it, seeing its
    /// closure fail after that, rolls its own attempt back and retries it (releasing
    /// what the conflict may have been waiting for). So two threads nesting two pools
    /// in opposite order both finish. Around an explicit transaction, the caller gets
    /// the `Conflict` and should abort and begin again.
    ///
    /// ```
    /// # use pisces::{Config, Pool, PPtr};
    /// # let dir = tempfile::tempdir().unwrap();
    /// let pool = Pool::create(dir.path().join("r.pool"), Config::default().size(32 << 20)).unwrap();
    /// let pair: PPtr<[i64; 2]> = pool.root().unwrap();
    /// let moved = pool.run(|tx| {
    ///     let p = tx.write(pair)?;
    ///     p[0] -= 5;
    ///     p[1] += 5;
    ///     Ok(5)
    /// }).unwrap();
    /// assert_eq!(moved, 5);
    /// ```
    pub fn run<R>(&self, f: impl FnMut(&mut Tx<'_>) -> Result<R>) -> Result<R> {
        self.transaction(TxOptions::default(), f)
    }

    /// [`Pool::run`] with transaction options (read-only, isolation level, durability).
    ///
    /// ```
    /// # use pisces::{Config, Pool, PPtr, TxOptions, Isolation, Error};
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let pool = Pool::create(dir.path().join("o.pool"), Config::default().size(32 << 20)).unwrap();
    /// let n: PPtr<u64> = pool.root().unwrap();
    /// let v = pool.run_with(TxOptions::read_only(), |tx| Ok(*tx.read(n)?)).unwrap();
    /// assert_eq!(v, 0);
    /// // Pisces offers snapshot isolation, not serializable:
    /// let r = pool.run_with(TxOptions::default().isolation(Isolation::Serializable), |tx| Ok(*tx.read(n)?));
    /// assert!(matches!(r, Err(Error::IsolationUnsupported(_))));
    /// ```
    pub fn run_with<R>(
        &self,
        opts: TxOptions,
        f: impl FnMut(&mut Tx<'_>) -> Result<R>,
    ) -> Result<R> {
        self.transaction(opts, f)
    }

    /// Run `f` as a read-only transaction and return its value: one snapshot of the
    /// pool, in which `f` reads through `&Tx` (nothing can be written, allocated or
    /// freed through it). The cheapest way to read: on engines whose readers never
    /// conflict (`pisces`, `volatile`, `bare`) `f` runs once, with no retry; on the
    /// others a conflict retries it as [`Pool::run`] does. Its isolation level is the
    /// engine's default ([`EngineId::default_isolation`](crate::EngineId::default_isolation)).
    /// The same as [`Pool::run_with`]`(TxOptions::read_only(), ..)`, which takes this
    /// path too.
    ///
    /// ```
    /// # use pisces::{Config, Pool, PPtr, HashMap};
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let pool = Pool::create(dir.path().join("rd.pool"), Config::default().size(32 << 20)).unwrap();
    /// let root: PPtr<HashMap<u64, u64>> = pool.root().unwrap();
    /// pool.run(|tx| { let m = HashMap::new(tx)?; *tx.write(root)? = m; m.insert(tx, 1, 10)?; Ok(()) }).unwrap();
    /// let v = pool.read(|tx| { let m = *tx.read(root)?; m.get(tx, &1) }).unwrap();
    /// assert_eq!(v, Some(10));
    /// ```
    pub fn read<R>(&self, f: impl FnMut(&Tx<'_>) -> Result<R>) -> Result<R> {
        let in_tx = InTx::enter(self.inner.id, &self.inner.explicit)?;
        let mut lease = Lease {
            pool: self,
            state: Some(self.checkout(true)?),
        };
        let state = lease.state.as_mut().expect("checked out");
        read_on(&mut state.1, &mut TxStats::default(), in_tx.nested(), f)
    }

    /// The general form of [`Pool::run`]: transaction options, and the caller's own
    /// error type (any `E: From<pisces::Error>`), so a program's errors come back as
    /// they were returned instead of flattened into [`Error::UserAbort`]. A conflict
    /// inside `f` is retried whatever error type it was converted into. (`run` keeps
    /// `pisces::Error`: with a generic error type, a closure ending in `Ok(v)` would
    /// need its error type spelled out.)
    ///
    /// ```
    /// # use pisces::{Config, Pool, PPtr, TxOptions};
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let pool = Pool::create(dir.path().join("e.pool"), Config::default().size(32 << 20)).unwrap();
    /// #[derive(Debug)]
    /// enum BankError { Pool(pisces::Error), Overdrawn(i64) }
    /// impl From<pisces::Error> for BankError {
    ///     fn from(e: pisces::Error) -> Self { BankError::Pool(e) }
    /// }
    /// let acct: PPtr<i64> = pool.root().unwrap();
    /// let r = pool.transaction(TxOptions::default(), |tx| {
    ///     let a = tx.write(acct)?;
    ///     if *a < 10 { return Err(BankError::Overdrawn(*a)); }
    ///     *a -= 10;
    ///     Ok(())
    /// });
    /// assert!(matches!(r, Err(BankError::Overdrawn(0))));
    /// ```
    pub fn transaction<R, E: From<Error>>(
        &self,
        opts: TxOptions,
        f: impl FnMut(&mut Tx<'_>) -> std::result::Result<R, E>,
    ) -> std::result::Result<R, E> {
        let in_tx = InTx::enter(self.inner.id, &self.inner.explicit)?;
        let mut lease = Lease {
            pool: self,
            state: Some(self.checkout(true)?),
        };
        let state = lease.state.as_mut().expect("checked out");
        run_on(
            &mut state.1,
            &mut TxStats::default(),
            &opts,
            in_tx.nested(),
            f,
        )
    }

    /// The root object, created zeroed on first use. Every call must use the same `T`:
    /// its size and a fingerprint of its name are recorded and checked (a type renamed
    /// or moved between modules keeps working; `u64` and `PPtr<u64>` are different).
    ///
    /// ```
    /// # use pisces::{Config, Pool, PPtr};
    /// pisces::pod! {
    ///     struct Root { count: u64, head: PPtr<u64> }
    /// }
    /// # let dir = tempfile::tempdir().unwrap();
    /// let pool = Pool::create(dir.path().join("root.pool"), Config::default().size(32 << 20)).unwrap();
    /// let root: PPtr<Root> = pool.root().unwrap();
    /// assert_eq!(pool.root::<Root>().unwrap(), root); // same object every time
    /// assert!(pool.root::<u64>().is_err());          // another type is refused
    /// ```
    pub fn root<T: Pod>(&self) -> Result<PPtr<T>> {
        let size = std::mem::size_of::<T>() as u64;
        let tag = u64::from(type_fingerprint::<T>()) << 32 | size;
        let p = self.root_tagged(size, tag, std::any::type_name::<T>())?;
        Ok(PPtr::from_offset(p.offset()))
    }

    /// The root object as `len` raw bytes, created zeroed on first use: for callers
    /// without a Rust type for it (the C ABI). Every call must give the same `len`; a
    /// root made by [`Pool::root`] is refused (another type), and the other way round.
    /// The same object, checks and protection as [`Pool::root`]: it cannot be freed.
    ///
    /// ```
    /// # use pisces::{Config, Pool};
    /// # let dir = tempfile::tempdir().unwrap();
    /// let pool = Pool::create(dir.path().join("rb.pool"), Config::default().size(32 << 20)).unwrap();
    /// let root = pool.root_bytes(24).unwrap();
    /// assert_eq!(pool.root_bytes(24).unwrap(), root);
    /// assert!(pool.root_bytes(16).is_err());
    /// assert!(pool.run(|tx| tx.free(root)).is_err());
    /// ```
    pub fn root_bytes(&self, len: usize) -> Result<PPtr<u8>> {
        let size = u64::try_from(len)
            .ok()
            .filter(|&s| s > 0 && s <= u64::from(u32::MAX))
            .ok_or_else(|| {
                Error::invalid_argument(format!(
                    "a root object of {len} bytes (1 to {} bytes)",
                    u32::MAX
                ))
            })?;
        let tag = u64::from(type_fingerprint::<[u8]>()) << 32 | size;
        self.root_tagged(size, tag, "raw bytes")
    }

    /// The root object of `size` bytes whose slot records `tag` (size and type),
    /// created zeroed if there is none (both [`Pool::root`] and [`Pool::root_bytes`]).
    fn root_tagged(&self, size: u64, tag: u64, type_name: &str) -> Result<PPtr<u8>> {
        let slot: PPtr<RootSlot> = PPtr::from_offset(self.inner.engine.root_slot());
        let (root, created) = self.run(|tx| {
            let r = *tx.read(slot)?;
            if r.offset != 0 {
                if r.size_and_type & 0xFFFF_FFFF != size {
                    return Err(Error::invalid_pointer(format!(
                        "the root object has {} bytes, not {size} (another type?)",
                        r.size_and_type & 0xFFFF_FFFF
                    )));
                }
                if r.size_and_type != tag {
                    return Err(Error::invalid_pointer(format!(
                        "the root object was created as another type than {type_name} (same size, different type)"
                    )));
                }
                let p = PPtr::<u8>::from_offset(r.offset);
                // A damaged root slot is an error here, not at the caller's first read.
                tx.read_bytes(p, (size as usize).max(1))?;
                return Ok((p, false));
            }
            let p = tx.alloc_bytes((size as usize).max(1))?;
            *tx.write(slot)? = RootSlot {
                offset: p.offset(),
                size_and_type: tag,
            };
            Ok((p, true))
        })?;
        if created {
            // `run` returned after the creating transaction became durable.
            if let Some(heap) = self.heap() {
                heap.record_root(root.offset(), tag);
            }
        }
        Ok(root)
    }

    /// Whether a transaction of this pool (a closure's or an explicit one) is running
    /// on the calling thread: pool-wide waits (`sync`, dropping or waiting on another
    /// handle) from such a thread could wait for that very transaction.
    ///
    /// ```
    /// # use pisces::{Config, Pool};
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let pool = Pool::create(dir.path().join("in.pool"), Config::default().size(32 << 20)).unwrap();
    /// assert!(!pool.in_transaction());
    /// assert!(pool.run(|_| Ok(pool.in_transaction())).unwrap());
    /// ```
    pub fn in_transaction(&self) -> bool {
        InTx::active(self.inner.id) || self.inner.explicit.on_this_thread()
    }

    /// Write back everything pending and make the whole pool durable now (on the
    /// file medium, msync of the whole file). An engine whose commits are durable in a
    /// log that its recovery replays may leave them there rather than write them home
    /// (timestone: its operation log, until a checkpoint or the pool's close).
    ///
    /// ```
    /// # use pisces::{Config, Pool, PPtr};
    /// # let dir = tempfile::tempdir().unwrap();
    /// let pool = Pool::create(dir.path().join("s.pool"), Config::default().size(32 << 20)).unwrap();
    /// pool.sync().unwrap();
    /// ```
    pub fn sync(&self) -> Result<()> {
        for (_, th) in self
            .inner
            .slots
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .idle
            .iter_mut()
        {
            th.quiesce();
        }
        self.inner.engine.quiesce();
        self.inner.engine.sync()
    }

    /// [`sync`](Pool::sync), and write every committed transaction home (the
    /// allocator's bitmaps included), so that the heap alone shows the committed state:
    /// on an engine that keeps commits in a log its recovery replays (timestone's
    /// operation log), `sync` leaves them there; this writes them home (a checkpoint).
    /// On the other engines it is `sync`.
    ///
    /// ```
    /// # use pisces::{Config, Pool, PPtr};
    /// # let dir = tempfile::tempdir().unwrap();
    /// let pool = Pool::create(dir.path().join("w.pool"), Config::default().size(32 << 20)).unwrap();
    /// pool.write_back().unwrap();
    /// ```
    pub fn write_back(&self) -> Result<()> {
        self.sync()?;
        self.inner.engine.write_back_all();
        self.inner.engine.sync()
    }
}

/// A thread's own transaction state on a pool (see [`Pool::handle`]).
pub struct ThreadHandle {
    pool: Pool,
    state: Option<ThreadState>,
    stats: TxStats,
    /// The thread that began this handle's explicit transaction while one is open
    /// (`crate::explicit`). Set while an [`ExplicitTx`](crate::ExplicitTx) borrows the
    /// handle; found set by a method of the handle itself only if that transaction
    /// was leaked (`mem::forget`), which the method then ends ([`Self::end_leaked`]).
    explicit_began_on: Option<ThreadId>,
}

impl std::fmt::Debug for ThreadHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ThreadHandle")
            .field("slot", &self.state.as_ref().map(|s| s.0))
            .finish()
    }
}

impl ThreadHandle {
    /// Run `f` as one transaction (see [`Pool::run`]).
    ///
    /// ```
    /// # use pisces::{Config, Pool, PPtr};
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let pool = Pool::create(dir.path().join("h.pool"), Config::default().size(32 << 20)).unwrap();
    /// let counter: PPtr<u64> = pool.root().unwrap();
    /// let mut h = pool.handle().unwrap();
    /// for _ in 0..10 {
    ///     h.run(|tx| { *tx.write(counter)? += 1; Ok(()) }).unwrap();
    /// }
    /// assert_eq!(h.run(|tx| Ok(*tx.read(counter)?)).unwrap(), 10);
    /// ```
    // (Inline, with `transaction`: each call site has its own copy anyway (the closure
    // is a type parameter), and inlined it shares the caller's frame and registers
    // instead of a second prologue and the closure's captures passed through memory.)
    #[inline]
    pub fn run<R>(&mut self, f: impl FnMut(&mut Tx<'_>) -> Result<R>) -> Result<R> {
        self.transaction(TxOptions::default(), f)
    }

    /// Run `f` as a read-only transaction (see [`Pool::read`]).
    ///
    /// ```
    /// # use pisces::{Config, Pool, PPtr};
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let pool = Pool::create(dir.path().join("hr.pool"), Config::default().size(32 << 20)).unwrap();
    /// let pair: PPtr<[u64; 2]> = pool.root().unwrap();
    /// let mut h = pool.handle().unwrap();
    /// h.run(|tx| { *tx.write(pair)? = [3, 4]; Ok(()) }).unwrap();
    /// assert_eq!(h.read(|tx| { let p = tx.read(pair)?; Ok(p[0] + p[1]) }).unwrap(), 7);
    /// ```
    #[inline]
    pub fn read<R>(&mut self, f: impl FnMut(&Tx<'_>) -> Result<R>) -> Result<R> {
        self.end_leaked();
        // The common case: no transaction runs or is open on this thread, so this one
        // is neither refused nor nested (`InTx::enter_idle`). Any other case takes the
        // full guard, out of line.
        let Some(_in_tx) = InTx::enter_idle(self.pool.inner.id) else {
            return self.read_guarded(f);
        };
        let state = self.state.as_mut().expect("state present until drop");
        read_on(&mut state.1, &mut self.stats, false, f)
    }

    /// [`ThreadHandle::read`] on a thread that runs or has open a transaction (of any
    /// pool): refused if one of this pool, nested otherwise.
    #[cold]
    #[inline(never)]
    fn read_guarded<R>(&mut self, f: impl FnMut(&Tx<'_>) -> Result<R>) -> Result<R> {
        let in_tx = InTx::enter(self.pool.inner.id, &self.pool.inner.explicit)?;
        let state = self.state.as_mut().expect("state present until drop");
        read_on(&mut state.1, &mut self.stats, in_tx.nested(), f)
    }

    /// Run `f` as one transaction with options (see [`Pool::run_with`]).
    #[inline]
    pub fn run_with<R>(
        &mut self,
        opts: TxOptions,
        f: impl FnMut(&mut Tx<'_>) -> Result<R>,
    ) -> Result<R> {
        self.transaction(opts, f)
    }

    /// The general form (see [`Pool::transaction`]).
    #[inline]
    pub fn transaction<R, E: From<Error>>(
        &mut self,
        opts: TxOptions,
        f: impl FnMut(&mut Tx<'_>) -> std::result::Result<R, E>,
    ) -> std::result::Result<R, E> {
        self.end_leaked();
        let in_tx = InTx::enter(self.pool.inner.id, &self.pool.inner.explicit)?;
        let state = self.state.as_mut().expect("state present until drop");
        run_on(&mut state.1, &mut self.stats, &opts, in_tx.nested(), f)
    }

    /// Wait until every transaction this handle committed is durable (after runs with
    /// `Durability::Deferred`).
    ///
    /// ```
    /// # use pisces::{Config, Pool, PPtr, TxOptions, Durability};
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let pool = Pool::create(dir.path().join("d.pool"), Config::default().size(32 << 20)).unwrap();
    /// let n: PPtr<u64> = pool.root().unwrap();
    /// let mut h = pool.handle().unwrap();
    /// let lazy = TxOptions::default().durability(Durability::Deferred);
    /// h.run_with(lazy, |tx| { *tx.write(n)? = 3; Ok(()) }).unwrap();
    /// h.wait_durable().unwrap();
    /// ```
    pub fn wait_durable(&mut self) -> Result<()> {
        self.end_leaked();
        let state = self.state.as_mut().expect("state present until drop");
        state.1.wait_durable(crate::engine::DurableToken::ALL)
    }

    /// Commits, conflict retries and failures of the transactions run on this handle.
    ///
    /// ```
    /// # use pisces::{Config, Pool, PPtr};
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let pool = Pool::create(dir.path().join("st.pool"), Config::default().size(32 << 20)).unwrap();
    /// let n: PPtr<u64> = pool.root().unwrap();
    /// let mut h = pool.handle().unwrap();
    /// h.run(|tx| { *tx.write(n)? = 1; Ok(()) }).unwrap();
    /// assert_eq!(h.stats().commits, 1);
    /// ```
    pub fn stats(&self) -> TxStats {
        let now = self.state.as_ref().map_or(0, |s| s.1.ro_locked_reads());
        TxStats {
            // `self.stats` holds the state's count when the handle was made.
            ro_locked_reads: now.wrapping_sub(self.stats.ro_locked_reads),
            ..self.stats
        }
    }

    /// The pool.
    ///
    /// ```
    /// # use pisces::{Config, Pool};
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let pool = Pool::create(dir.path().join("p.pool"), Config::default().size(32 << 20)).unwrap();
    /// let h = pool.handle().unwrap();
    /// assert_eq!(h.pool().engine_id(), pool.engine_id());
    /// ```
    pub fn pool(&self) -> &Pool {
        &self.pool
    }

    /// What an explicit transaction borrows, apart (for `crate::explicit`).
    pub(crate) fn parts(&mut self) -> HandleParts<'_> {
        self.end_leaked();
        let state = self.state.as_mut().expect("state present until drop");
        HandleParts {
            pool: self.pool.inner.id,
            explicit: &self.pool.inner.explicit,
            slot: state.0,
            th: &mut state.1,
            stats: &mut self.stats,
            began_on: &mut self.explicit_began_on,
        }
    }

    /// End an explicit transaction of this handle that was leaked (`mem::forget` of
    /// its [`ExplicitTx`](crate::ExplicitTx)): roll its attempt back and end its
    /// registration, so the thread and the pool are as if it had been dropped. Every
    /// method that uses the thread state calls this first; while the handle is
    /// borrowed by a live explicit transaction, none can run.
    #[inline]
    fn end_leaked(&mut self) {
        // A test, not a `take`: the common case then stores nothing.
        if self.explicit_began_on.is_some() {
            self.end_leaked_slow();
        }
    }

    #[cold]
    fn end_leaked_slow(&mut self) {
        let Some(began_on) = self.explicit_began_on.take() else {
            return;
        };
        if let Some(state) = self.state.as_mut() {
            state.1.abort();
            state.1.set_nested(false);
            self.stats.failed += 1;
            self.pool.inner.explicit.remove(state.0, began_on);
        }
    }

    /// The thread slot this handle uses (its log area).
    ///
    /// ```
    /// # use pisces::{Config, Pool};
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let pool = Pool::create(dir.path().join("sl.pool"), Config::default().size(32 << 20)).unwrap();
    /// let (a, b) = (pool.handle().unwrap(), pool.handle().unwrap());
    /// assert_ne!(a.slot(), b.slot());
    /// ```
    pub fn slot(&self) -> usize {
        self.state.as_ref().map_or(usize::MAX, |s| s.0)
    }
}

impl Drop for ThreadHandle {
    fn drop(&mut self) {
        self.end_leaked();
        if let Some(mut s) = self.state.take() {
            s.1.quiesce();
            self.pool.checkin(s);
        }
    }
}

/// The options `run_op` uses: at least serializable where the engine offers it.
fn op_options(e: EngineId, opts: TxOptions) -> TxOptions {
    if e.offers(Isolation::Serializable)
        && opts.isolation.is_none_or(|l| l < Isolation::Serializable)
    {
        opts.isolation(Isolation::Serializable)
    } else {
        opts
    }
}

impl Pool {
    /// Register an operation with this pool. The next open needs it in its registry too
    /// ([`Config::operations`]): an engine that logs operations (`timestone`)
    /// re-executes them in recovery. The rules an operation follows: [`Operations`].
    ///
    /// ```
    /// use pisces::{Config, Pool, PPtr};
    /// # fn main() -> pisces::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// let pool = Pool::create(dir.path().join("op.pool"), Config::new().size(32 << 20))?;
    /// let total: PPtr<u64> = pool.root()?;
    /// const ADD: u32 = 1;
    /// pool.register_op(ADD, move |tx, amount: &u64| {
    ///     *tx.write(total)? += *amount;
    ///     Ok(())
    /// })?;
    /// pool.run_op(ADD, &5u64)?;        // one transaction, retried on conflicts
    /// pool.run_op(ADD, &2u64)?;
    /// assert_eq!(pool.run(|tx| Ok(*tx.read(total)?))?, 7);
    /// # Ok(()) }
    /// ```
    pub fn register_op<A: Pod>(
        &self,
        id: u32,
        f: impl Fn(&mut Tx<'_>, &A) -> Result<()> + Send + Sync + 'static,
    ) -> Result<()> {
        self.ops().register(id, f)
    }

    /// The operations registered with this pool.
    pub fn operations(&self) -> Operations {
        self.ops().clone()
    }

    /// Run operation `id` with `args` as one transaction (retried on conflicts).
    pub fn run_op<A: Pod>(&self, id: u32, args: &A) -> Result<()> {
        self.run_op_with(TxOptions::default(), id, args)
    }

    /// [`Pool::run_op`] with transaction options.
    pub fn run_op_with<A: Pod>(&self, opts: TxOptions, id: u32, args: &A) -> Result<()> {
        let f = self.ops().checked::<A>(id)?;
        let bytes = bytemuck::bytes_of(args);
        self.transaction(op_options(self.engine_id(), opts), |tx| {
            tx.set_operation(id, bytes);
            f(tx, bytes)
        })
    }
}

impl ThreadHandle {
    /// Run operation `id` with `args` on this handle's thread state.
    pub fn run_op<A: Pod>(&mut self, id: u32, args: &A) -> Result<()> {
        self.run_op_with(TxOptions::default(), id, args)
    }

    /// [`ThreadHandle::run_op`] with transaction options.
    pub fn run_op_with<A: Pod>(&mut self, opts: TxOptions, id: u32, args: &A) -> Result<()> {
        let f = self.pool().ops().checked::<A>(id)?;
        let opts = op_options(self.pool().engine_id(), opts);
        let bytes = bytemuck::bytes_of(args);
        self.transaction(opts, |tx| {
            tx.set_operation(id, bytes);
            f(tx, bytes)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> Config {
        Config::default()
            .size(4 << 20)
            .max_threads(2)
            .log_bytes_per_thread(64 << 10)
    }

    /// A caller that meets the empty file of another creator waits; when that creator
    /// fails and removes its file, the caller creates the pool itself.
    #[test]
    fn open_or_create_waits_for_a_creator_that_then_fails() {
        let dir = tempfile::tempdir_in("/dev/shm").unwrap();
        let path = dir.path().join("p.pool");
        std::fs::File::create(&path).unwrap();
        let failing_creator = {
            let path = path.clone();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(50));
                std::fs::remove_file(&path).unwrap();
            })
        };
        let pool = Pool::open_or_create(&path, cfg()).unwrap();
        failing_creator.join().unwrap();
        let n: PPtr<u64> = pool.root().unwrap();
        pool.run(|tx| {
            *tx.write(n)? = 5;
            Ok(())
        })
        .unwrap();
        drop(pool);
        let again = Pool::open_or_create(&path, cfg()).unwrap();
        assert_eq!(again.run(|tx| Ok(*tx.read(n)?)).unwrap(), 5);
    }

    /// An empty file nobody sizes is refused after the wait, and left as it was.
    #[test]
    fn open_or_create_refuses_a_file_that_stays_empty() {
        let dir = tempfile::tempdir_in("/dev/shm").unwrap();
        let path = dir.path().join("p.pool");
        std::fs::File::create(&path).unwrap();
        match Pool::open_or_create(&path, cfg()) {
            Err(Error::TooSmall(t)) if t.len == 0 => {}
            other => panic!("expected TooSmall, got {:?}", other.map(|_| ())),
        }
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 0);
    }
}
