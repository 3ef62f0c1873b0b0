//! Pools: create, open, thread handles, the root object, and `run`.
//!
//! A [`Pool`] is a cheap handle (clone it freely) on one mapped pool and its engine.
//! Transactions run on thread states: [`Pool::run`] checks one out for the duration of
//! one transaction (with retries) and gives it back; a [`ThreadHandle`] keeps one for
//! a thread's lifetime, which is what hot loops should use. States hold per-thread
//! engine resources (a log area, a group-commit batch), so there are at most
//! `Config::max_threads` of them; they are never destroyed while the pool is open,
//! and a parked state's pending write-backs are helped out by other threads.

use crate::engine::mvcc::MvccEngine;
use crate::engine::pisces::PiscesEngine;
use crate::engine::undo::UndoEngine;
use crate::engine::{Engine, EngineId, EngineOptions, EngineThread};
use crate::heap::{FormatParams, Heap};
use crate::medium::{self, Medium, MediumKind};
use crate::tx::{run_on, Tx, TxStats};
use crate::{Error, PPtr, Result};
use bytemuck::{Pod, Zeroable};
use std::path::Path;
use std::sync::{Arc, Mutex};

/// How to create or open a pool.
///
/// ```
/// use pisces::{Config, EngineOptions, MediumKind};
/// let cfg = Config {
///     size: 256 << 20,                       // a 256 MiB pool
///     medium: MediumKind::Dram { write_latency_ns: 300, bandwidth_bytes_per_sec: 0 },
///     max_threads: 4,
///     engine_options: EngineOptions { flush_diff: true, group_commit: 8 },
///     ..Config::default()
/// };
/// assert_eq!(cfg.log_bytes_per_thread, 1 << 20);
/// ```
#[derive(Clone, Debug)]
pub struct Config {
    /// Size of a new pool file in bytes (multiple of 4096). Ignored by `open`.
    pub size: u64,
    /// The medium the pool is mapped on.
    pub medium: MediumKind,
    /// The engine. A pool opened with another engine than the one that created it is
    /// refused with [`Error::WrongEngine`].
    pub engine: EngineId,
    /// Most threads that run transactions at once. Fixed at creation.
    pub max_threads: usize,
    /// Bytes of each thread's redo log (multiple of 4096). Fixed at creation. A
    /// transaction's record may use at most half of it.
    pub log_bytes_per_thread: usize,
    /// Engine tuning (flush-diff, group commit); may differ between runs.
    pub engine_options: EngineOptions,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            size: 64 << 20,
            medium: MediumKind::DRAM,
            engine: EngineId::Pisces,
            max_threads: 8,
            log_bytes_per_thread: 1 << 20,
            engine_options: EngineOptions::default(),
        }
    }
}

/// The root slot's payload: where the root object is and how big it is.
#[derive(Clone, Copy, Pod, Zeroable)]
#[repr(C)]
struct RootSlot {
    offset: u64,
    size: u64,
}

struct PoolInner {
    engine: Box<dyn Engine>,
    idle: Mutex<Vec<(usize, Box<dyn EngineThread>)>>,
    created: Mutex<usize>,
    max_threads: usize,
}

impl Drop for PoolInner {
    fn drop(&mut self) {
        // Thread states first (each writes back its batch), then anything left.
        self.idle.lock().unwrap_or_else(|e| e.into_inner()).clear();
        self.engine.quiesce();
        let _ = self.engine.sync();
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
/// let pool = Pool::create(&path, Config { size: 32 << 20, ..Config::default() })?;
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

fn start_engine(heap: Arc<Heap>, cfg: &Config) -> Result<Box<dyn Engine>> {
    if cfg.engine_options.group_commit == 0 {
        return Err(Error::InvalidConfig(
            "group_commit must be at least 1 (1 = off)".into(),
        ));
    }
    match cfg.engine {
        EngineId::Pisces => Ok(Box::new(PiscesEngine::open(heap, cfg.engine_options)?)),
        EngineId::Undo => Ok(Box::new(UndoEngine::open(heap)?)),
        EngineId::Volatile => Ok(Box::new(PiscesEngine::open_volatile(
            heap,
            cfg.engine_options,
        )?)),
        EngineId::Mvcc => Ok(Box::new(MvccEngine::open(heap)?)),
        EngineId::Pmdk => Err(Error::InvalidConfig(
            "the pmdk engine keeps its own pool file: use Pool::create / Pool::open with a path"
                .into(),
        )),
    }
}

impl Pool {
    /// Create a new pool file at `path` (it must not exist) and open it.
    ///
    /// ```
    /// # use pisces::{Config, Pool, Error};
    /// # let dir = tempfile::tempdir().unwrap();
    /// let path = dir.path().join("new.pool");
    /// let pool = Pool::create(&path, Config { size: 32 << 20, ..Config::default() }).unwrap();
    /// drop(pool);
    /// // Creating over an existing file is refused.
    /// assert!(matches!(Pool::create(&path, Config::default()), Err(Error::AlreadyExists(_))));
    /// ```
    pub fn create(path: impl AsRef<Path>, cfg: Config) -> Result<Pool> {
        if cfg.engine == EngineId::Pmdk {
            return Self::from_engine(crate::engine::pmdk::start(path.as_ref(), &cfg, true)?, &cfg);
        }
        let medium = medium::create_file(path.as_ref(), cfg.size, cfg.medium)?;
        Self::create_on(medium, cfg).inspect_err(|_| {
            let _ = std::fs::remove_file(path.as_ref());
        })
    }

    /// Open an existing pool file, running recovery if it was not closed cleanly.
    /// `cfg.size`, `max_threads` and `log_bytes_per_thread` are taken from the pool.
    ///
    /// ```
    /// # use pisces::{Config, Pool, PPtr};
    /// # let dir = tempfile::tempdir().unwrap();
    /// let path = dir.path().join("kept.pool");
    /// let cfg = Config { size: 32 << 20, ..Config::default() };
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
        if cfg.engine == EngineId::Pmdk {
            return Self::from_engine(
                crate::engine::pmdk::start(path.as_ref(), &cfg, false)?,
                &cfg,
            );
        }
        let medium = medium::open_file(path.as_ref(), cfg.medium)?;
        Self::open_on(medium, cfg)
    }

    /// Format a new pool on a zeroed medium (the crash simulator, anonymous memory).
    ///
    /// ```
    /// # use std::sync::Arc;
    /// use pisces::medium::dram::DramMedium;
    /// use pisces::{Config, Pool};
    /// let medium = Arc::new(DramMedium::anonymous(32 << 20, 0, 0).unwrap());
    /// let pool = Pool::create_on(medium, Config::default()).unwrap();
    /// assert_eq!(pool.heap().unwrap().layout().max_threads, 8);
    /// ```
    pub fn create_on(medium: Arc<dyn Medium>, cfg: Config) -> Result<Pool> {
        let heap = Heap::format(
            medium,
            FormatParams {
                engine_id: cfg.engine as u32,
                max_threads: cfg.max_threads,
                log_bytes_per_thread: cfg.log_bytes_per_thread,
            },
        )?;
        Self::start(Arc::new(heap), &cfg)
    }

    /// Open a pool on a medium that holds one (e.g. a crash image), running recovery.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// use pisces::medium::sim::{SimConfig, SimMedium};
    /// use pisces::{Config, Pool, PPtr};
    /// let cfg = Config { size: 4 << 20, max_threads: 2, log_bytes_per_thread: 64 << 10, ..Config::default() };
    /// let sim = Arc::new(SimMedium::new(4 << 20, SimConfig::default()).unwrap());
    /// let pool = Pool::create_on(sim.clone(), cfg.clone()).unwrap();
    /// let n: PPtr<u64> = pool.root().unwrap();
    /// pool.run(|tx| { *tx.write(n)? = 1; Ok(()) }).unwrap();
    /// // Power fails now: boot a new machine from what reached the medium.
    /// let image = sim.crash_image_now(42);
    /// let again = Pool::open_on(Arc::new(SimMedium::from_image(image, SimConfig::default()).unwrap()), cfg).unwrap();
    /// assert_eq!(again.run(|tx| Ok(*tx.read(n)?)).unwrap(), 1);
    /// ```
    pub fn open_on(medium: Arc<dyn Medium>, cfg: Config) -> Result<Pool> {
        let heap = Heap::open(medium, EngineId::describe, cfg.engine as u32)?;
        Self::start(Arc::new(heap), &cfg)
    }

    fn start(heap: Arc<Heap>, cfg: &Config) -> Result<Pool> {
        let max_threads = heap.layout().max_threads;
        let engine = start_engine(heap.clone(), cfg)?;
        // Recovery succeeded: only now does the new run generation become durable.
        heap.commit_generation();
        Self::from_engine(
            engine,
            &Config {
                max_threads,
                ..cfg.clone()
            },
        )
    }

    fn from_engine(engine: Box<dyn Engine>, cfg: &Config) -> Result<Pool> {
        let max_threads = cfg.max_threads;
        Ok(Pool {
            inner: Arc::new(PoolInner {
                engine,
                idle: Mutex::new(Vec::new()),
                created: Mutex::new(0),
                max_threads,
            }),
        })
    }

    /// The heap (layout, medium, superblock) — for tools and engines; `None` for the
    /// `pmdk` engine, whose pool is libpmemobj's.
    ///
    /// ```
    /// # use pisces::{Config, Pool};
    /// # let dir = tempfile::tempdir().unwrap();
    /// let pool = Pool::create(dir.path().join("h.pool"), Config { size: 32 << 20, ..Config::default() }).unwrap();
    /// assert_eq!(pool.heap().unwrap().superblock().pool_size, 32 << 20);
    /// ```
    pub fn heap(&self) -> Option<&Arc<Heap>> {
        self.inner.engine.heap()
    }

    /// The engine running this pool.
    ///
    /// ```
    /// # use pisces::{Config, Pool, EngineId};
    /// # let dir = tempfile::tempdir().unwrap();
    /// let pool = Pool::create(dir.path().join("e.pool"), Config { size: 32 << 20, ..Config::default() }).unwrap();
    /// assert_eq!(pool.engine_id(), EngineId::Pisces);
    /// ```
    pub fn engine_id(&self) -> EngineId {
        self.inner.engine.id()
    }

    fn checkout(&self) -> Result<(usize, Box<dyn EngineThread>)> {
        if let Some(s) = self
            .inner
            .idle
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .pop()
        {
            return Ok(s);
        }
        let mut created = self.inner.created.lock().unwrap_or_else(|e| e.into_inner());
        if *created >= self.inner.max_threads {
            return Err(Error::TooManyThreads(self.inner.max_threads));
        }
        let slot = *created;
        let th = self.inner.engine.thread(slot)?;
        *created += 1;
        Ok((slot, th))
    }

    fn checkin(&self, s: (usize, Box<dyn EngineThread>)) {
        self.inner
            .idle
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(s);
    }

    /// A thread state kept until the handle is dropped: the fast way to run many
    /// transactions on one thread (no checkout per transaction, group commit across
    /// them). Fails with [`Error::TooManyThreads`] when all slots are in use.
    ///
    /// ```
    /// # use pisces::{Config, Pool, PPtr};
    /// # let dir = tempfile::tempdir().unwrap();
    /// let pool = Pool::create(dir.path().join("t.pool"), Config { size: 32 << 20, ..Config::default() }).unwrap();
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
        let state = self.checkout()?;
        Ok(ThreadHandle {
            pool: self.clone(),
            state: Some(state),
            stats: TxStats::default(),
        })
    }

    /// Run `f` as one transaction, retrying it on conflicts, and return its value.
    ///
    /// `f` may run several times; an `Err` from it rolls the transaction back and is
    /// returned (use [`Error::abort`] for a user abort). All reads inside one attempt
    /// see one snapshot.
    ///
    /// ```
    /// # use pisces::{Config, Pool, PPtr};
    /// # let dir = tempfile::tempdir().unwrap();
    /// let pool = Pool::create(dir.path().join("r.pool"), Config { size: 32 << 20, ..Config::default() }).unwrap();
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
        let mut state = self.checkout()?;
        let r = run_on(state.1.as_mut(), &mut TxStats::default(), f);
        self.checkin(state);
        r
    }

    /// The root object, created zeroed on first use. Every call must use the same `T`
    /// (its size is checked).
    ///
    /// ```
    /// # use pisces::{Config, Pool, PPtr, Pod, Zeroable};
    /// #[derive(Clone, Copy, Pod, Zeroable)]
    /// #[repr(C)]
    /// struct Root { count: u64, head: PPtr<u64> }
    /// # let dir = tempfile::tempdir().unwrap();
    /// let pool = Pool::create(dir.path().join("root.pool"), Config { size: 32 << 20, ..Config::default() }).unwrap();
    /// let root: PPtr<Root> = pool.root().unwrap();
    /// assert_eq!(pool.root::<Root>().unwrap(), root); // same object every time
    /// assert!(pool.root::<u64>().is_err());          // another type is refused
    /// ```
    pub fn root<T: Pod>(&self) -> Result<PPtr<T>> {
        let slot: PPtr<RootSlot> = PPtr::from_offset(self.inner.engine.root_slot());
        let size = std::mem::size_of::<T>() as u64;
        self.run(|tx| {
            let r = *tx.read(slot)?;
            if r.offset != 0 {
                if r.size != size {
                    return Err(Error::InvalidPointer(format!(
                        "the root object has {} bytes, not {size} (another type?)",
                        r.size
                    )));
                }
                let p = PPtr::from_offset(r.offset);
                // A damaged root slot is an error here, not at the caller's first read.
                tx.read(p)?;
                return Ok(p);
            }
            let p = tx.alloc(T::zeroed())?;
            *tx.write(slot)? = RootSlot {
                offset: p.offset(),
                size,
            };
            Ok(p)
        })
    }

    /// Write back everything pending and make the whole pool durable now (on the
    /// file medium, msync of the whole file).
    ///
    /// ```
    /// # use pisces::{Config, Pool, PPtr};
    /// # let dir = tempfile::tempdir().unwrap();
    /// let pool = Pool::create(dir.path().join("s.pool"), Config { size: 32 << 20, ..Config::default() }).unwrap();
    /// pool.sync().unwrap();
    /// ```
    pub fn sync(&self) -> Result<()> {
        for (_, th) in self
            .inner
            .idle
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter_mut()
        {
            th.quiesce();
        }
        self.inner.engine.quiesce();
        self.inner.engine.sync()
    }
}

/// A thread's own transaction state on a pool (see [`Pool::handle`]).
pub struct ThreadHandle {
    pool: Pool,
    state: Option<(usize, Box<dyn EngineThread>)>,
    stats: TxStats,
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
    /// # let pool = Pool::create(dir.path().join("h.pool"), Config { size: 32 << 20, ..Config::default() }).unwrap();
    /// let counter: PPtr<u64> = pool.root().unwrap();
    /// let mut h = pool.handle().unwrap();
    /// for _ in 0..10 {
    ///     h.run(|tx| { *tx.write(counter)? += 1; Ok(()) }).unwrap();
    /// }
    /// assert_eq!(h.run(|tx| Ok(*tx.read(counter)?)).unwrap(), 10);
    /// ```
    pub fn run<R>(&mut self, f: impl FnMut(&mut Tx<'_>) -> Result<R>) -> Result<R> {
        let state = self.state.as_mut().expect("state present until drop");
        run_on(state.1.as_mut(), &mut self.stats, f)
    }

    /// Commits, conflict retries and failures of the transactions run on this handle.
    ///
    /// ```
    /// # use pisces::{Config, Pool, PPtr};
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let pool = Pool::create(dir.path().join("st.pool"), Config { size: 32 << 20, ..Config::default() }).unwrap();
    /// let n: PPtr<u64> = pool.root().unwrap();
    /// let mut h = pool.handle().unwrap();
    /// h.run(|tx| { *tx.write(n)? = 1; Ok(()) }).unwrap();
    /// assert_eq!(h.stats().commits, 1);
    /// ```
    pub fn stats(&self) -> TxStats {
        self.stats
    }

    /// The pool.
    ///
    /// ```
    /// # use pisces::{Config, Pool};
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let pool = Pool::create(dir.path().join("p.pool"), Config { size: 32 << 20, ..Config::default() }).unwrap();
    /// let h = pool.handle().unwrap();
    /// assert_eq!(h.pool().engine_id(), pool.engine_id());
    /// ```
    pub fn pool(&self) -> &Pool {
        &self.pool
    }

    /// The thread slot this handle uses (its log area).
    ///
    /// ```
    /// # use pisces::{Config, Pool};
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let pool = Pool::create(dir.path().join("sl.pool"), Config { size: 32 << 20, ..Config::default() }).unwrap();
    /// let (a, b) = (pool.handle().unwrap(), pool.handle().unwrap());
    /// assert_ne!(a.slot(), b.slot());
    /// ```
    pub fn slot(&self) -> usize {
        self.state.as_ref().map_or(usize::MAX, |s| s.0)
    }
}

impl Drop for ThreadHandle {
    fn drop(&mut self) {
        if let Some(mut s) = self.state.take() {
            s.1.quiesce();
            self.pool.checkin(s);
        }
    }
}
