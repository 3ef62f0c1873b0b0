//! Pool-wide state of the `pmdk` engine: the open libpmemobj pool, its root slot and
//! the DRAM side tables ([`Objects`]), and the flush mode libpmemobj runs with (module
//! docs of [`crate::engine::pmdk`]).

use super::ffi::{self, PmemObjPool, PmemOid};
use super::objects::Objects;
use super::thread::PmdkThread;
use crate::engine::{Engine, OpenCtx};
use crate::heap::Heap;
use crate::medium::MediumKind;
use crate::{Error, Result};
use std::ffi::{CStr, CString};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, OnceLock};

/// Layout name PMDK records in the pool: a pool of another program is refused.
const LAYOUT: &CStr = c"pisces-pmdk";
/// Bytes before an object's payload: its payload length, then padding (keeps 16-byte
/// payload alignment).
pub(super) const HEADER: u64 = 16;
/// PMDK type number of our objects (the root object is PMDK's own).
pub(super) const TYPE_NUM: u64 = 1;
/// Root object: header (16) + root slot (16).
const ROOT_SIZE: usize = 32;
/// libpmemobj's smallest pool.
const MIN_POOL: u64 = 8 << 20;

/// Whether this process runs libpmemobj with `PMEM_IS_PMEM_FORCE=1` (decided once).
static PMEM_FORCED: OnceLock<bool> = OnceLock::new();

pub(super) fn pmdk_error(what: String) -> Error {
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
            return Err(Error::invalid_config(
                "the pmdk engine cannot emulate NVM latency or bandwidth (libpmemobj \
                 flushes by itself); use the DRAM medium with 0 latency and no cap",
            ))
        }
        MediumKind::Dax | MediumKind::File => false,
        MediumKind::Custom => {
            return Err(Error::invalid_config(
                "the pmdk engine cannot run on the crash simulator",
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
        Err(Error::invalid_config(format!(
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
pub(super) struct PmdkShared {
    pub(super) pop: *mut PmemObjPool,
    pub(super) base: usize,
    pub(super) uuid: u64,
    pub(super) root_slot: u64,
    pub(super) objects: Objects,
    pub(super) max_threads: usize,
    pub(super) path: PathBuf,
}

// SAFETY: libpmemobj's pool handle may be used from any thread (its API is thread-safe;
// transactions are per thread, which `PmdkThread` enforces). `base` is only
// dereferenced at offsets validated against `objects`, under the object's lock.
unsafe impl Send for PmdkShared {}
// SAFETY: as above; the side tables are atomics.
unsafe impl Sync for PmdkShared {}

impl Drop for PmdkShared {
    fn drop(&mut self) {
        // SAFETY: the last reference: no thread state (and so no transaction) is left.
        unsafe { ffi::pmemobj_close(self.pop) };
    }
}

impl PmdkShared {
    /// Pointer to pool offset `off`.
    ///
    /// # Safety
    /// `off` must be inside the pool.
    pub(super) unsafe fn ptr(&self, off: u64) -> *mut u8 {
        (self.base + off as usize) as *mut u8
    }

    /// The header's length word of the object whose payload is at `payload`.
    pub(super) fn len_word(&self, payload: u64) -> &AtomicU64 {
        // SAFETY: `payload` is (or was a moment ago) a validated payload offset, so its
        // header lies inside the pool; the word is 8-aligned (payloads are 16-aligned)
        // and the pool mapping lives as long as `self`. Reading it as an atomic makes a
        // racing reuse of the block a stale value, not a data race; every use is
        // re-validated under the object's lock.
        unsafe { &*(self.ptr(payload - HEADER) as *const AtomicU64) }
    }

    pub(super) fn oid(&self, payload: u64) -> PmemOid {
        PmemOid {
            pool_uuid_lo: self.uuid,
            off: payload - HEADER,
        }
    }
}

/// The engine: one open PMDK pool.
pub(crate) struct PmdkEngine {
    sh: Arc<PmdkShared>,
}

impl PmdkEngine {
    /// Create (`create`) or open the pool at `path`.
    pub(super) fn start(path: &Path, ctx: &OpenCtx, create: bool) -> Result<PmdkEngine> {
        settle_flush_mode(ctx.medium)?;
        if ctx.max_threads == 0 {
            return Err(Error::invalid_config("max_threads must be at least 1"));
        }
        let cpath = CString::new(path.as_os_str().as_encoded_bytes())
            .map_err(|_| Error::invalid_config(format!("path {path:?} contains a NUL byte")))?;
        let pop = if create {
            if ctx.size < MIN_POOL {
                return Err(Error::invalid_config(format!(
                    "a pmdk pool needs at least {MIN_POOL} bytes, not {}",
                    ctx.size
                )));
            }
            if path.exists() {
                return Err(Error::AlreadyExists(path.to_path_buf().into()));
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
                return Err(Error::NotFound(path.to_path_buf().into()));
            }
            // SAFETY: valid NUL-terminated strings; libpmemobj checks the pool, runs its
            // recovery and maps it.
            let pop = unsafe { ffi::pmemobj_open(cpath.as_ptr(), LAYOUT.as_ptr()) };
            if pop.is_null() {
                let os = std::io::Error::last_os_error();
                if os.raw_os_error() == Some(libc::EWOULDBLOCK) {
                    return Err(Error::Locked(path.to_path_buf().into()));
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
        let sh = PmdkShared {
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
        Ok(PmdkThread::new(self.sh.clone(), slot))
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
