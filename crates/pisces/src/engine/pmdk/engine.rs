//! The `pmdk` engine and its per-thread transaction state (see the module docs of
//! [`crate::engine::pmdk`]).

use super::ffi::{self, PmemObjPool, PmemOid};
use super::objects::Objects;
use crate::engine::kit::cc::two_phase::{HeldLocks, Mode};
use crate::engine::kit::rollback::Rollback;
use crate::engine::kit::validate::running;
use crate::engine::OpenCtx;
use crate::engine::{Engine, EngineThread};
use crate::fasthash::FastMap;
use crate::heap::Heap;
use crate::medium::MediumKind;
use crate::{Error, Result};
use std::cell::Cell;
use std::ffi::{CStr, CString};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, OnceLock};

/// Layout name PMDK records in the pool: a pool of another program is refused.
const LAYOUT: &CStr = c"pisces-pmdk";
/// Bytes before an object's payload: its payload length, then padding (keeps 16-byte
/// payload alignment).
const HEADER: u64 = 16;
/// PMDK type number of our objects (the root object is PMDK's own).
const TYPE_NUM: u64 = 1;
/// Root object: header (16) + root slot (16).
const ROOT_SIZE: usize = 32;
/// libpmemobj's smallest pool.
const MIN_POOL: u64 = 8 << 20;

/// Whether this process runs libpmemobj with `PMEM_IS_PMEM_FORCE=1` (decided once).
static PMEM_FORCED: OnceLock<bool> = OnceLock::new();

thread_local! {
    /// Set while a PMDK transaction is open on this OS thread.
    static TX_OPEN: Cell<bool> = const { Cell::new(false) };
    static THREAD_KEY: u8 = const { 0 };
}

/// A number unique to the calling OS thread while it lives.
fn thread_key() -> usize {
    THREAD_KEY.with(|k| k as *const u8 as usize)
}

fn pmdk_error(what: String) -> Error {
    let os = std::io::Error::last_os_error();
    // SAFETY: pmemobj_errormsg returns a thread-local, NUL-terminated string (never
    // null), valid until the next libpmemobj call on this thread; it is copied at once.
    let msg = unsafe { CStr::from_ptr(ffi::pmemobj_errormsg()) }
        .to_string_lossy()
        .into_owned();
    Error::io(format!("libpmemobj: {what}: {msg}"), os)
}

/// Choose libpmemobj's flush mode for `kind` (see the module docs).
fn settle_flush_mode(kind: MediumKind) -> Result<()> {
    let want = match kind {
        MediumKind::Dram {
            write_latency_ns: 0,
            bandwidth_bytes_per_sec: 0,
        } => true,
        MediumKind::Dram { .. } => {
            return Err(Error::InvalidConfig(
                "the pmdk engine cannot emulate NVM latency or bandwidth (libpmemobj \
                 flushes by itself); use the DRAM medium with 0 latency and no cap"
                    .into(),
            ))
        }
        MediumKind::Dax | MediumKind::File => false,
        MediumKind::Custom => {
            return Err(Error::InvalidConfig(
                "the pmdk engine cannot run on the crash simulator".into(),
            ))
        }
    };
    let got = *PMEM_FORCED.get_or_init(|| {
        // Set before libpmemobj first looks at it (it reads the variable once, lazily,
        // on its first persistence check), and only once per process.
        if want {
            std::env::set_var("PMEM_IS_PMEM_FORCE", "1");
        } else {
            std::env::remove_var("PMEM_IS_PMEM_FORCE");
        }
        want
    });
    if got == want {
        Ok(())
    } else {
        Err(Error::InvalidConfig(format!(
            "libpmemobj already runs {} in this process; a pmdk pool on the {} medium kind \
             needs the other mode (open it in another process)",
            if got {
                "with PMEM_IS_PMEM_FORCE=1 (DRAM kind)"
            } else {
                "without PMEM_IS_PMEM_FORCE (file kind)"
            },
            kind.name()
        )))
    }
}

/// The open PMDK pool, shared by the engine and its thread states.
struct Shared {
    pop: *mut PmemObjPool,
    base: usize,
    uuid: u64,
    root_slot: u64,
    objects: Objects,
    max_threads: usize,
    path: PathBuf,
}

// SAFETY: libpmemobj's pool handle may be used from any thread (its API is thread-safe;
// transactions are per thread, which `PmdkThread` enforces). `base` is only
// dereferenced at offsets validated against `objects`, under the object's lock.
unsafe impl Send for Shared {}
// SAFETY: as above; the side tables are atomics.
unsafe impl Sync for Shared {}

impl Drop for Shared {
    fn drop(&mut self) {
        // SAFETY: the last reference: no thread state (and so no transaction) is left.
        unsafe { ffi::pmemobj_close(self.pop) };
    }
}

impl Shared {
    /// Pointer to pool offset `off`.
    ///
    /// # Safety
    /// `off` must be inside the pool.
    unsafe fn ptr(&self, off: u64) -> *mut u8 {
        (self.base + off as usize) as *mut u8
    }

    /// The header's length word of the object whose payload is at `payload`.
    fn len_word(&self, payload: u64) -> &AtomicU64 {
        // SAFETY: `payload` is (or was a moment ago) a validated payload offset, so its
        // header lies inside the pool; the word is 8-aligned (payloads are 16-aligned)
        // and the pool mapping lives as long as `self`. Reading it as an atomic makes a
        // racing reuse of the block a stale value, not a data race; every use is
        // re-validated under the object's lock.
        unsafe { &*(self.ptr(payload - HEADER) as *const AtomicU64) }
    }

    fn oid(&self, payload: u64) -> PmemOid {
        PmemOid {
            pool_uuid_lo: self.uuid,
            off: payload - HEADER,
        }
    }
}

/// The engine: one open PMDK pool.
pub(crate) struct PmdkEngine {
    sh: Arc<Shared>,
}

impl PmdkEngine {
    /// Create (`create`) or open the pool at `path`.
    pub(crate) fn start(path: &Path, ctx: &OpenCtx, create: bool) -> Result<PmdkEngine> {
        settle_flush_mode(ctx.medium)?;
        if ctx.max_threads == 0 {
            return Err(Error::InvalidConfig(
                "max_threads must be at least 1".into(),
            ));
        }
        let cpath = CString::new(path.as_os_str().as_encoded_bytes())
            .map_err(|_| Error::InvalidConfig(format!("path {path:?} contains a NUL byte")))?;
        let pop = if create {
            if ctx.size < MIN_POOL {
                return Err(Error::InvalidConfig(format!(
                    "a pmdk pool needs at least {MIN_POOL} bytes, not {}",
                    ctx.size
                )));
            }
            if path.exists() {
                return Err(Error::AlreadyExists(path.to_path_buf()));
            }
            // SAFETY: valid NUL-terminated strings; libpmemobj creates and maps the file.
            let pop = unsafe {
                ffi::pmemobj_create(cpath.as_ptr(), LAYOUT.as_ptr(), ctx.size as usize, 0o600)
            };
            if pop.is_null() {
                return Err(pmdk_error(format!("cannot create {}", path.display())));
            }
            pop
        } else {
            if !path.exists() {
                return Err(Error::NotFound(path.to_path_buf()));
            }
            // SAFETY: valid NUL-terminated strings; libpmemobj checks the pool, runs its
            // recovery and maps it.
            let pop = unsafe { ffi::pmemobj_open(cpath.as_ptr(), LAYOUT.as_ptr()) };
            if pop.is_null() {
                let os = std::io::Error::last_os_error();
                if os.raw_os_error() == Some(libc::EWOULDBLOCK) {
                    return Err(Error::Locked(path.to_path_buf()));
                }
                return Err(pmdk_error(format!(
                    "cannot open {} as a pmdk pool",
                    path.display()
                )));
            }
            pop
        };
        let size = std::fs::metadata(path)
            .map_err(|e| Error::io(format!("stat {}", path.display()), e))?
            .len();
        // SAFETY: `pop` is an open pool; the root object is created zeroed if missing.
        let root = unsafe { ffi::pmemobj_root(pop, ROOT_SIZE) };
        if root.is_null() {
            let e = pmdk_error("cannot get the root object".into());
            // SAFETY: open pool, no transaction.
            unsafe { ffi::pmemobj_close(pop) };
            return Err(e);
        }
        let sh = Shared {
            pop,
            base: pop as usize,
            uuid: root.pool_uuid_lo,
            root_slot: root.off + HEADER,
            objects: Objects::new(size),
            max_threads: ctx.max_threads,
            path: path.to_path_buf(),
        };
        // The header length words are rebuilt from PMDK's own sizes: they need not be
        // durable, and a crash cannot leave them wrong.
        sh.len_word(sh.root_slot).store(16, Relaxed);
        sh.objects.insert(sh.root_slot);
        // SAFETY: open pool, no concurrent user yet; `pmemobj_next` of a live object.
        let mut oid = unsafe { ffi::pmemobj_first(pop) };
        while !oid.is_null() {
            // SAFETY: `oid` is a live object of this pool (from PMDK's iterator).
            let (ty, usable) = unsafe {
                (
                    ffi::pmemobj_type_num(oid),
                    ffi::pmemobj_alloc_usable_size(oid) as u64,
                )
            };
            if ty == TYPE_NUM && usable >= HEADER + 8 {
                let payload = oid.off + HEADER;
                sh.len_word(payload).store((usable - HEADER) & !7, Relaxed);
                sh.objects.insert(payload);
            }
            // SAFETY: as above.
            oid = unsafe { ffi::pmemobj_next(oid) };
        }
        Ok(PmdkEngine { sh: Arc::new(sh) })
    }
}

impl Engine for PmdkEngine {
    type Thread = PmdkThread;
    fn thread(&self, slot: usize) -> Result<PmdkThread> {
        if slot >= self.sh.max_threads {
            return Err(Error::TooManyThreads(self.sh.max_threads));
        }
        Ok(PmdkThread {
            sh: self.sh.clone(),
            locks: HeldLocks::new(0, slot),
            active: false,
            in_tx: false,
            tx_thread: 0,
            added: FastMap::default(),
            allocs: Vec::new(),
            frees: Vec::new(),
        })
    }
    fn quiesce(&self) {}
    fn heap(&self) -> Option<&Arc<Heap>> {
        None
    }
    fn root_slot(&self) -> u64 {
        self.sh.root_slot
    }
}

impl std::fmt::Debug for PmdkEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PmdkEngine")
            .field("path", &self.sh.path)
            .finish()
    }
}

/// One thread's transaction state.
pub(crate) struct PmdkThread {
    sh: Arc<Shared>,
    locks: HeldLocks,
    active: bool,
    /// A PMDK transaction is open (the first write, alloc or free opened it).
    in_tx: bool,
    /// `thread_key()` of the OS thread that opened it.
    tx_thread: usize,
    /// Objects already snapshotted in this transaction (payload offsets).
    added: FastMap<u64, ()>,
    /// Objects allocated in this transaction.
    allocs: Vec<u64>,
    /// Objects freed by this transaction (at commit).
    frees: Vec<u64>,
}

impl PmdkThread {
    /// Check that `off` names a live object of at least `len` bytes; its payload length.
    fn check(&self, off: u64, len: usize) -> Result<u64> {
        let sh = &self.sh;
        if !sh.objects.contains(off) {
            // A clear bit under another thread's exclusive lock may be a free that has
            // not committed yet: retry rather than call the pointer bad.
            let (key, word) = sh.objects.lock_of(off);
            if self.locks.held_by_another(key, word) {
                return Err(Error::Conflict);
            }
            return Err(Error::InvalidPointer(format!(
                "{off:#x} is not an object of this pool"
            )));
        }
        let plen = sh.len_word(off).load(Relaxed);
        if len as u64 > plen {
            return Err(Error::InvalidPointer(format!(
                "object at {off:#x} has {plen} bytes, not {len}"
            )));
        }
        Ok(plen)
    }

    /// Validate `off`, take its lock in `mode`, validate again (it may have been freed
    /// and reused before the lock was ours). Returns the payload length.
    fn acquire(&self, off: u64, len: usize, mode: Mode) -> Result<u64> {
        running(self.active)?;
        self.check(off, len)?;
        let (key, word) = self.sh.objects.lock_of(off);
        self.locks.lock(key, word, mode)?;
        self.check(off, len)
    }

    /// Open the PMDK transaction if this is the transaction's first change.
    fn ensure_tx(&mut self) -> Result<()> {
        let me = thread_key();
        if self.in_tx {
            if self.tx_thread != me {
                return Err(Error::InvalidConfig(
                    "a pmdk transaction must stay on the OS thread that began it".into(),
                ));
            }
            return Ok(());
        }
        if TX_OPEN.with(Cell::get) {
            return Err(Error::InvalidConfig(
                "another pmdk transaction is open on this OS thread \
                 (nested transactions are not supported)"
                    .into(),
            ));
        }
        // SAFETY: open pool; no PMDK transaction on this thread (checked above); the
        // null jmp_buf selects the error-returning API; TX_PARAM_NONE ends the list.
        let rc =
            unsafe { ffi::pmemobj_tx_begin(self.sh.pop, std::ptr::null_mut(), ffi::TX_PARAM_NONE) };
        if rc != 0 {
            let e = pmdk_error("cannot begin a transaction".into());
            // SAFETY: tx_begin must be paired with tx_end even when it failed.
            unsafe { ffi::pmemobj_tx_end() };
            return Err(e);
        }
        TX_OPEN.with(|t| t.set(true));
        self.in_tx = true;
        self.tx_thread = me;
        Ok(())
    }

    /// End the PMDK transaction: commit it (`commit`) or roll it back. Returns false
    /// if it did not commit.
    fn end_tx(&mut self, commit: bool) -> bool {
        if !self.in_tx {
            return true;
        }
        // SAFETY: our transaction is open on this OS thread (callers check
        // `tx_thread`); in the WORK stage commit/abort are allowed, and end is always.
        let rc = unsafe {
            let working = ffi::pmemobj_tx_stage() == ffi::TX_STAGE_WORK;
            if commit && working {
                ffi::pmemobj_tx_commit();
            } else if working {
                ffi::pmemobj_tx_abort(libc::ECANCELED);
            }
            ffi::pmemobj_tx_end()
        };
        TX_OPEN.with(|t| t.set(false));
        self.in_tx = false;
        commit && rc == 0
    }

    /// Forget the transaction's bookkeeping and release its locks.
    fn finish(&mut self) {
        let objects = &self.sh.objects;
        self.locks.release_all(|key| objects.lock_word(key));
        self.added.clear();
        self.allocs.clear();
        self.frees.clear();
        self.active = false;
    }
}

impl Rollback for PmdkThread {
    fn rollback(&mut self) {
        // Unmark our new objects while we still lock them, before PMDK frees them.
        for &a in &self.allocs {
            self.sh.objects.remove(a);
        }
        if self.in_tx && self.tx_thread != thread_key() {
            // Cannot happen through `run` (it ends transactions where it began them);
            // a PMDK transaction cannot be ended from another thread, so keep its
            // locks rather than expose its half-done writes.
            return;
        }
        self.end_tx(false);
        self.finish();
    }

    fn is_running(&self) -> bool {
        self.active
    }
}

impl EngineThread for PmdkThread {
    fn begin(&mut self, _opts: &crate::tx_options::TxOptions) {
        self.abort_running();
        self.active = true;
    }

    fn abort(&mut self) {
        self.abort_running();
    }

    fn read(&self, off: u64, len: usize) -> Result<*const u8> {
        self.acquire(off, len, Mode::Shared)?;
        // SAFETY: a validated payload inside the pool, share-locked until commit.
        Ok(unsafe { self.sh.ptr(off) })
    }

    fn write(&mut self, off: u64, len: usize) -> Result<*mut u8> {
        let plen = self.acquire(off, len, Mode::Exclusive)?;
        self.ensure_tx()?;
        // SAFETY: a validated payload inside the pool, exclusively locked by us.
        let p = unsafe { self.sh.ptr(off) };
        if !self.added.contains_key(&off) && !self.allocs.contains(&off) {
            // SAFETY: our transaction is open on this thread; the range is one object.
            let rc = unsafe {
                ffi::pmemobj_tx_xadd_range_direct(
                    p as *const _,
                    plen as usize,
                    ffi::POBJ_FLAG_TX_NO_ABORT,
                )
            };
            if rc != 0 {
                return Err(pmdk_error(format!(
                    "cannot snapshot the object at {off:#x}"
                )));
            }
            self.added.insert(off, ());
        }
        Ok(p)
    }

    fn alloc(&mut self, len: usize) -> Result<u64> {
        running(self.active)?;
        self.ensure_tx()?;
        let size = HEADER as usize + len.max(8).next_multiple_of(8);
        // SAFETY: our transaction is open on this thread.
        let oid = unsafe {
            ffi::pmemobj_tx_xalloc(
                size,
                TYPE_NUM,
                ffi::POBJ_FLAG_ZERO | ffi::POBJ_FLAG_TX_NO_ABORT,
            )
        };
        if oid.is_null() {
            return Err(Error::OutOfSpace { requested: len });
        }
        let payload = oid.off + HEADER;
        let (key, word) = self.sh.objects.lock_of(payload);
        if let Err(e) = self.locks.lock(key, word, Mode::Exclusive) {
            // Its stripe is another thread's: give the block back within our tx.
            // SAFETY: our transaction is open; `oid` was allocated in it.
            unsafe { ffi::pmemobj_tx_xfree(oid, ffi::POBJ_FLAG_TX_NO_ABORT) };
            return Err(e);
        }
        // SAFETY: a live object of this pool, allocated by our open transaction.
        let usable = unsafe { ffi::pmemobj_alloc_usable_size(oid) } as u64;
        self.sh
            .len_word(payload)
            .store((usable - HEADER) & !7, Relaxed);
        self.sh.objects.insert(payload);
        self.allocs.push(payload);
        Ok(payload)
    }

    fn free(&mut self, off: u64) -> Result<()> {
        if off == self.sh.root_slot {
            return Err(Error::InvalidPointer(
                "the root slot cannot be freed".into(),
            ));
        }
        // The root object (the root slot's first word) cannot be freed either:
        // `Pool::root` would hand it out again after its block is reused.
        let slot = self.read(self.sh.root_slot, 16)?;
        // SAFETY: `read` returns a pointer valid for reads of 16 bytes that do not
        // change while this transaction runs (engine contract); read unaligned.
        let root = unsafe { (slot as *const u64).read_unaligned() };
        if root != 0 && off == root {
            return Err(Error::InvalidPointer(format!(
                "{off:#x} is the root object, which cannot be freed (Pool::root hands it out)"
            )));
        }
        if self.frees.contains(&off) {
            return Err(Error::InvalidPointer(format!(
                "object {off:#x} freed twice"
            )));
        }
        self.acquire(off, 0, Mode::Exclusive)?;
        self.ensure_tx()?;
        if let Some(i) = self.allocs.iter().position(|&a| a == off) {
            // Allocated in this transaction: PMDK gives it back at once, so unmark it
            // first.
            self.allocs.swap_remove(i);
            self.sh.objects.remove(off);
        }
        // SAFETY: our transaction is open on this thread; `off` is a live object.
        let rc = unsafe { ffi::pmemobj_tx_xfree(self.sh.oid(off), ffi::POBJ_FLAG_TX_NO_ABORT) };
        if rc != 0 {
            return Err(pmdk_error(format!("cannot free the object at {off:#x}")));
        }
        if self.sh.objects.contains(off) {
            self.frees.push(off);
        }
        Ok(())
    }

    /// Commit: on `Ok` the transaction is visible and durable (libpmemobj's commit
    /// returns once the transaction is durable, and the locks are released after it);
    /// on `Err` it has been rolled back.
    fn commit(&mut self) -> Result<crate::engine::DurableToken> {
        running(self.active)?;
        if self.in_tx && self.tx_thread != thread_key() {
            self.rollback();
            return Err(Error::InvalidConfig(
                "a pmdk transaction must commit on the OS thread that began it".into(),
            ));
        }
        // Unmark freed objects before PMDK can hand their blocks out again (we still
        // hold their locks, so nobody validates them meanwhile without retrying).
        for &f in &self.frees {
            self.sh.objects.remove(f);
        }
        if !self.end_tx(true) {
            for &f in &self.frees {
                self.sh.objects.insert(f);
            }
            let e = pmdk_error("the transaction did not commit".into());
            self.frees.clear();
            self.rollback();
            return Err(e);
        }
        self.finish();
        Ok(crate::engine::DurableToken::DURABLE)
    }

    fn quiesce(&mut self) {
        self.abort();
    }
}

impl Drop for PmdkThread {
    fn drop(&mut self) {
        self.abort();
    }
}
