//! The C ABI of Pisces: `libpisces.so` / `libpisces.a` and `include/pisces.h`.
//!
//! Every entry point is `extern "C"`, returns an `int` code (`PISCES_OK` = 0) and
//! catches Rust panics (they become `PISCES_EPANIC`); on failure the text of the Rust
//! error is kept per thread and returned by [`pisces_errmsg`].
//!
//! Objects:
//! * `pisces_pool`: an open pool (`pisces_pool_create` / `pisces_pool_open` /
//!   `pisces_pool_close`).
//! * `pisces_handle`: a thread handle (one of the pool's `max_threads` thread slots),
//!   used by one thread at a time. "Handle" means only this in the interface; the
//!   16-byte values naming containers (`pisces_hmap`, `pisces_btree`) are container
//!   descriptors.
//! * `pisces_tx`: a running transaction, a small value (handle pointer + generation)
//!   valid until the transaction ends; using it afterwards fails with
//!   `PISCES_ESTALE`.
//!
//! Transactions are either a callback run with retries (`pisces_run`) or explicit
//! (`pisces_tx_begin` / `pisces_tx_commit` / `pisces_tx_abort`, see [`explicit`]);
//! both run on the calling thread.
#![allow(non_camel_case_types)]

pub mod containers;
mod errors;
pub mod explicit;
mod registry;

pub use containers::*;
pub use errors::*;
pub use explicit::{pisces_tx_abort, pisces_tx_begin, pisces_tx_commit};

use errors::{entry, Fail};
use pisces::{
    Config, Durability, EngineId, EngineOptions, Error, ExplicitTx, Isolation, MediumKind, PPtr,
    Pool, ThreadHandle, Tx, TxOptions,
};
use std::cell::{Cell, UnsafeCell};
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::sync::Arc;
use std::time::Duration;

/// How to create or open a pool. Fill it with [`pisces_config_init`] first, then
/// change fields.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct pisces_config {
    /// Size of a new pool file in bytes (multiple of 4096). Ignored by open. At least
    /// `PISCES_MIN_POOL_SIZE`, which fits the smallest geometry (`max_threads` 1 with a
    /// 16 KiB log); in general the pool holds 12 KiB of fixed areas, `max_threads` ×
    /// `log_bytes_per_thread` bytes of logs, then at least two 64 KiB slabs of heap
    /// (starting on a 64 KiB boundary), so the defaults need a little over 8 MiB. A
    /// size too small for the configuration fails with `PISCES_ECONFIG`.
    pub size: u64,
    /// Engine name (see `pisces_engine_name`); NULL: create uses "pisces", open uses
    /// the engine recorded in the pool (a file that is not a Pisces-format pool is
    /// tried as a "pmdk" pool, whose format is libpmemobj's).
    pub engine: *const c_char,
    /// Engine options, "key=value,key=value"; NULL or "" for the engine's defaults.
    pub engine_options: *const c_char,
    /// Medium: NULL (the default) for the one the pool's file system calls for, or
    /// "dram", "file", "dax". NULL: "dax" on a DAX file system, "dram" on tmpfs and
    /// ramfs (/dev/shm; survives process crashes, not power loss or reboot), "file"
    /// on any other file system (survives power loss). "dram": a shared mapping of
    /// the pool file with emulated NVM write latency; nothing is synced, so it is not
    /// durable across power loss or an operating-system crash, and it is refused on a
    /// file system that outlives power loss. "file": durable through msync at every
    /// commit (slow). "dax": a file on a DAX file system mapped with MAP_SYNC, durable
    /// at each commit's cache-line flushes (persistent memory). Durability also needs
    /// a durable engine (not "volatile" or "bare").
    pub medium: *const c_char,
    /// Emulated write latency per flushed cache line in ns (medium "dram" only).
    pub dram_write_latency_ns: u64,
    /// Most thread handles at once. Fixed at creation.
    pub max_threads: u32,
    /// Threads recovery may use at open.
    pub recovery_threads: u32,
    /// Bytes of each thread's redo log (multiple of 4096). Fixed at creation.
    pub log_bytes_per_thread: u64,
    /// How long `pisces_root` waits for a free thread slot, in milliseconds.
    pub slot_wait_ms: u64,
}

/// Options of one transaction (NULL pointer = all zero = the defaults).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct pisces_tx_options {
    /// Nonzero: the transaction only reads (write, alloc and free fail with
    /// `PISCES_EREADONLY`).
    pub read_only: c_int,
    /// Nonzero: commit returns once the transaction is visible; it is durable at the
    /// latest after `pisces_handle_wait_durable` or `pisces_pool_sync`.
    pub deferred_durability: c_int,
    /// One of `PISCES_ISOLATION_*` (0: the engine's own level).
    pub isolation: c_int,
}

/// The smallest pool file in bytes (288 KiB): 12 KiB of fixed areas, one 16 KiB log,
/// a page of slab table and four 64 KiB slabs' worth of space (see `pisces_config.size`
/// for the size a configuration needs).
pub const PISCES_MIN_POOL_SIZE: u64 = 294_912;

/// The engine's own isolation level.
pub const PISCES_ISOLATION_DEFAULT: c_int = 0;
/// Snapshot isolation.
pub const PISCES_ISOLATION_SNAPSHOT: c_int = 1;
/// Serializable.
pub const PISCES_ISOLATION_SERIALIZABLE: c_int = 2;
/// Linearizable (strict serializable).
pub const PISCES_ISOLATION_LINEARIZABLE: c_int = 3;

/// A running transaction: passed to the `pisces_run` callback, or returned by
/// `pisces_tx_begin`. Valid until the transaction (or, for callbacks, the attempt)
/// ends; afterwards every function given it returns `PISCES_ESTALE`, or
/// `PISCES_ECLOSED` once its handle is closed. Use it only on the thread that runs the callback / called
/// `pisces_tx_begin`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct pisces_tx {
    /// The handle the transaction runs on.
    pub handle: *mut pisces_handle,
    /// Which transaction of the handle this is.
    pub generation: u64,
}

/// A transaction body for `pisces_run`: return 0 to commit, `PISCES_ECONFLICT` to roll
/// back and run again, anything else to roll back and make `pisces_run` return that
/// value. It must return normally: no unwinding (C++ exceptions) and no `longjmp` out
/// of it. `tx` is valid during the call only, and so are the pointers its accesses
/// return.
pub type pisces_tx_fn = Option<unsafe extern "C" fn(tx: pisces_tx, ctx: *mut c_void) -> c_int>;

/// An open pool (opaque; the pointer is a name the library checks, not an address).
/// Any number of threads may use it at once; after `pisces_pool_close` returned, every
/// call given it returns `PISCES_ECLOSED`.
pub struct pisces_pool {
    shared: Arc<PoolShared>,
}

// Many threads use one `pisces_pool` at once (documented), through shared references
// (`pool_ref`): it must be `Sync`, and `Send` for the last close on any thread.
const _: () = {
    const fn shared_by_threads<T: Send + Sync>() {}
    shared_by_threads::<pisces_pool>();
};

/// The open pools: `pisces_pool *` is a token of this table ([`registry`]).
static POOLS: registry::Table<pisces_pool> = registry::Table::new();
/// The open handles: `pisces_handle *` is a token of this table ([`registry`]).
static HANDLES: registry::Table<pisces_handle> = registry::Table::new();

/// The failure of a pool or handle that is closed (or never was one).
#[cold]
#[inline(never)]
fn closed(what: &str) -> Fail {
    Fail::new(
        PISCES_ECLOSED,
        format!("{what} is closed (or is not one from this library)"),
    )
}

struct PoolShared {
    pool: Pool,
    engine_name: CString,
    /// The root object (offset, exact size) once `pisces_root` returned it: accesses to
    /// it are bounded by that size (see [`target`]). It never changes for a pool.
    root: std::sync::OnceLock<(u64, u64)>,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Mode {
    Idle,
    Callback,
    Explicit,
}

/// A thread handle (opaque): one thread slot of the pool, used by one thread at a
/// time (a program that hands it to another thread does so with synchronization, as a
/// mutex or a thread join give). The pointer is a name the library checks, not an
/// address: after a successful `pisces_handle_close`, every call given it or a
/// `pisces_tx` of it returns `PISCES_ECLOSED`.
pub struct pisces_handle {
    /// The running explicit transaction (while `mode == Explicit`): a borrow of `th`
    /// with its lifetime erased (see [`explicit`]). Declared before `th` so that it is
    /// dropped first; `Drop` ends it explicitly anyway.
    explicit: UnsafeCell<Option<ExplicitTx<'static>>>,
    shared: Arc<PoolShared>,
    /// The thread state, never moved while the handle is open. Reached only through
    /// [`idle_th`], which hands it out only while `mode` is `Idle` (see there).
    th: UnsafeCell<ThreadHandle>,
    /// Bumped when an attempt starts and when it ends: a `pisces_tx` is current only
    /// while its generation equals this and `mode` is not `Idle`.
    generation: Cell<u64>,
    mode: Cell<Mode>,
    /// The running transaction's `Tx`: the callback's attempt (while `mode ==
    /// Callback`) or the one inside `explicit` (while `mode == Explicit`).
    tx: Cell<*mut Tx<'static>>,
    /// Inside a foreach/range callback: only reads are allowed.
    iterating: Cell<bool>,
    /// The thread that began the running explicit transaction ([`thread_mark`]).
    began_on: Cell<usize>,
}

impl Drop for pisces_handle {
    fn drop(&mut self) {
        // The explicit transaction borrows `th`: end it first (rolled back).
        drop(self.explicit.get_mut().take());
    }
}

// ---------------------------------------------------------------------------------
// Helpers

/// The string at `p` (`None` for NULL); `PISCES_EINVAL` if it is not UTF-8.
///
/// # Safety
/// `p` is NULL or points to a nul-terminated string that stays readable and unchanged
/// for `'a`.
unsafe fn cstr_opt<'a>(p: *const c_char, what: &str) -> Result<Option<&'a str>, Fail> {
    if p.is_null() {
        return Ok(None);
    }
    // SAFETY: `p` is not NULL, so by the contract it points to a nul-terminated string
    // that is readable and unchanged for `'a`.
    unsafe { CStr::from_ptr(p) }
        .to_str()
        .map(Some)
        .map_err(|_| Fail::new(PISCES_EINVAL, format!("{what} is not valid UTF-8")))
}

fn engine_by_name(name: &str) -> Result<EngineId, Fail> {
    EngineId::from_name(name).ok_or_else(|| {
        let names: Vec<&str> = EngineId::ALL.iter().map(|e| e.name()).collect();
        Fail::new(
            PISCES_EENGINE,
            format!("unknown engine `{name}` (engines: {})", names.join(", ")),
        )
    })
}

/// The library's configuration for the C one at `cfg` (NULL: the defaults).
///
/// # Safety
/// `cfg` is NULL or points to an initialized `pisces_config` (as `pisces_config_init`
/// leaves it) whose `engine`, `engine_options` and `medium` are each NULL or a
/// nul-terminated string; all of it stays readable and unchanged during the call (the
/// result keeps no pointer into it).
unsafe fn to_config(cfg: *const pisces_config) -> Result<Config, Fail> {
    let mut c = pisces_config_default();
    if !cfg.is_null() {
        // SAFETY: not NULL, so by the contract an initialized, readable `pisces_config`
        // (plain integers and pointers: every initialized value is valid).
        c = unsafe { *cfg };
    }
    let mut out = Config::default()
        .size(c.size)
        .max_threads(c.max_threads as usize)
        .log_bytes_per_thread(
            usize::try_from(c.log_bytes_per_thread)
                .map_err(|_| Fail::new(PISCES_ECONFIG, "log_bytes_per_thread is too large"))?,
        )
        .recovery_threads((c.recovery_threads as usize).max(1))
        .slot_wait(Duration::from_millis(c.slot_wait_ms));
    // SAFETY: each string field of `c` is NULL or a nul-terminated string readable
    // during this call (contract); the `&str` is used only before it returns. The same
    // holds for the two `cstr_opt` calls below.
    if let Some(name) = unsafe { cstr_opt(c.engine, "engine") }? {
        let e = engine_by_name(name)?;
        if !e.available() {
            return Err(Fail::new(
                PISCES_EENGINE,
                format!(
                    "the {name} engine is not available in this build (pmdk needs libpmemobj \
                     at build time: Debian package libpmemobj-dev)"
                ),
            ));
        }
        out.engine = Some(e);
    }
    // SAFETY: see above.
    if let Some(opts) = unsafe { cstr_opt(c.engine_options, "engine_options") }? {
        out.engine_options = opts.parse::<EngineOptions>()?;
    }
    // SAFETY: see above.
    out.medium = match unsafe { cstr_opt(c.medium, "medium") }? {
        // The medium the file system calls for (the library's rule).
        None => None,
        Some("dram") => Some(MediumKind::Dram {
            write_latency_ns: c.dram_write_latency_ns,
            bandwidth_bytes_per_sec: 0,
        }),
        Some("file") => Some(MediumKind::File),
        Some("dax") => Some(MediumKind::Dax),
        Some(other) => {
            return Err(Fail::new(
                PISCES_ECONFIG,
                format!("unknown medium `{other}` (media: dram, file, dax)"),
            ))
        }
    };
    Ok(out)
}

fn pisces_config_default() -> pisces_config {
    let d = Config::default();
    pisces_config {
        size: d.size,
        engine: std::ptr::null(),
        engine_options: std::ptr::null(),
        medium: std::ptr::null(),
        dram_write_latency_ns: 0,
        max_threads: d.max_threads as u32,
        recovery_threads: d.recovery_threads as u32,
        log_bytes_per_thread: d.log_bytes_per_thread as u64,
        slot_wait_ms: d.slot_wait.as_millis() as u64,
    }
}

/// The library's options for the C ones at `o` (NULL: the defaults).
///
/// # Safety
/// `o` is NULL or points to an initialized, readable `pisces_tx_options`.
#[inline(always)]
unsafe fn to_tx_options(o: *const pisces_tx_options) -> Result<TxOptions, Fail> {
    let o = if o.is_null() {
        pisces_tx_options::default()
    } else {
        // SAFETY: not NULL, so by the contract an initialized, readable
        // `pisces_tx_options` (three `c_int`s: every initialized value is valid).
        unsafe { *o }
    };
    let isolation = match o.isolation {
        PISCES_ISOLATION_DEFAULT => None,
        PISCES_ISOLATION_SNAPSHOT => Some(Isolation::Snapshot),
        PISCES_ISOLATION_SERIALIZABLE => Some(Isolation::Serializable),
        PISCES_ISOLATION_LINEARIZABLE => Some(Isolation::Linearizable),
        other => {
            return Err(Fail::new(
                PISCES_EINVAL,
                format!("unknown isolation level {other}"),
            ))
        }
    };
    Ok(TxOptions {
        read_only: o.read_only != 0,
        isolation,
        durability: if o.deferred_durability != 0 {
            Durability::Deferred
        } else {
            Durability::OnReturn
        },
    })
}

/// The pool `p` names; `PISCES_EINVAL` for NULL, `PISCES_ECLOSED` for a closed pool
/// (or any value that names no open pool).
///
/// # Safety
/// `pisces_pool_close` does not close the pool `p` names during `'a`. Other threads
/// may use it meanwhile (`pisces_pool` is `Sync`).
unsafe fn pool_ref<'a>(p: *const pisces_pool) -> Result<&'a pisces_pool, Fail> {
    if p.is_null() {
        return Err(Fail::new(PISCES_EINVAL, "the pool is NULL"));
    }
    // SAFETY: the pool is not closed during `'a` (contract); shared references to it
    // on several threads are fine, as it is `Sync`.
    unsafe { POOLS.get(p as usize) }.map_err(|_| closed("the pool"))
}

/// The handle `h` names; `PISCES_EINVAL` for NULL, `PISCES_ECLOSED` for a closed
/// handle (or any value that names no open handle).
///
/// # Safety
/// `pisces_handle_close` does not close the handle `h` names during `'a`, and no other
/// thread uses it during `'a` (`pisces_handle` is not `Sync`: its state is in
/// `Cell`s).
#[inline(always)]
unsafe fn handle_ref<'a>(h: *const pisces_handle) -> Result<&'a pisces_handle, Fail> {
    if h.is_null() {
        return Err(null_arg("the handle"));
    }
    // SAFETY: the handle stays open during `'a` and is used only from this thread
    // meanwhile (contract).
    match unsafe { HANDLES.get(h as usize) } {
        Ok(h) => Ok(h),
        Err(_) => Err(closed("the handle")),
    }
}

/// An out-parameter checked to be non-NULL and aligned, valid for one write of a `T`.
/// The memory behind it may be uninitialised (C callers pass `&local` of a variable
/// they have not set), so it is never read nor turned into a `&mut T` (a reference to
/// uninitialised memory of a type with invalid bit patterns is undefined behaviour):
/// [`Out::write`] stores with `ptr::write`, which neither reads nor drops the old
/// contents.
pub(crate) struct Out<T>(std::ptr::NonNull<T>);

impl<T> Out<T> {
    /// Store `v` (the old contents are neither read nor dropped).
    #[inline(always)]
    pub(crate) fn write(self, v: T) {
        // SAFETY: `out_ptr` / `opt_out` made `self` only from a non-NULL, aligned
        // pointer that their caller guaranteed valid for writes of a `T` and used by
        // nothing else during the call; `write` consumes `self`, so one store.
        unsafe { self.0.as_ptr().write(v) }
    }
}

/// The out-parameter `p`, checked: `PISCES_EINVAL` for NULL or a misaligned pointer.
///
/// # Safety
/// `p` is NULL or valid for writes of a `T` (it may point to uninitialised memory),
/// and nothing else reads or writes it until the returned [`Out`] is written or
/// dropped (within the call).
#[inline(always)]
unsafe fn out_ptr<T>(p: *mut T, what: &'static str) -> Result<Out<T>, Fail> {
    match std::ptr::NonNull::new(p) {
        Some(nn) if p.is_aligned() => Ok(Out(nn)),
        Some(_) => Err(misaligned_arg(what)),
        None => Err(null_arg(what)),
    }
}

/// An optional out-parameter: `None` for NULL, else as [`out_ptr`].
///
/// # Safety
/// As [`out_ptr`].
#[inline(always)]
unsafe fn opt_out<T>(p: *mut T, what: &'static str) -> Result<Option<Out<T>>, Fail> {
    if p.is_null() {
        return Ok(None);
    }
    // SAFETY: the caller's contract is `out_ptr`'s.
    unsafe { out_ptr(p, what) }.map(Some)
}

/// The failure of a misaligned out-parameter (off the fast path).
#[cold]
#[inline(never)]
fn misaligned_arg(what: &str) -> Fail {
    Fail::new(PISCES_EINVAL, format!("{what} is not aligned for its type"))
}

/// The failure of a NULL argument (off the fast path).
#[cold]
#[inline(never)]
fn null_arg(what: &str) -> Fail {
    Fail::new(PISCES_EINVAL, format!("{what} is NULL"))
}

/// Refuse pool-wide work (root, sync, closing or waiting on another handle) while
/// this thread has a transaction of the pool running (a callback's or an explicit
/// one): it could wait for that transaction, which waits for this thread.
fn not_in_tx(pool: &Pool) -> Result<(), Fail> {
    if pool.in_transaction() {
        return Err(Fail::from(Error::NestedTransaction));
    }
    Ok(())
}

/// The handle of a current transaction, or `PISCES_ESTALE`.
///
/// # Safety
/// `tx.handle` is NULL or an open handle that stays open and is used by no other thread
/// during `'a` (as for [`handle_ref`]); `tx.generation` may be any value (one that is
/// not current is refused).
#[inline(always)]
unsafe fn current<'a>(tx: pisces_tx) -> Result<&'a pisces_handle, Fail> {
    // SAFETY: the contract of `handle_ref`, which this function's contract gives.
    let h = unsafe { handle_ref(tx.handle) }?;
    if h.mode.get() == Mode::Idle || h.generation.get() != tx.generation {
        return Err(stale());
    }
    Ok(h)
}

/// The failure of a `pisces_tx` whose transaction has ended (off the fast path).
#[cold]
#[inline(never)]
fn stale() -> Fail {
    Fail::new(
        PISCES_ESTALE,
        "the transaction has ended (pisces_tx used after commit, abort or the end of its callback)",
    )
}

/// Run `f` with shared access to the running transaction `tx`.
///
/// # Safety
/// * `tx.handle` is as for [`current`], for the duration of the call.
/// * If `f` runs C code, the handle's `iterating` flag is set while it does, so that the
///   C code can reach the transaction only shared (through this function again), not
///   exclusively ([`with_tx_mut`]) nor to end it.
#[inline]
pub(crate) unsafe fn with_tx_ref<R>(
    tx: pisces_tx,
    f: impl FnOnce(&Tx<'_>) -> Result<R, Fail>,
) -> Result<R, Fail> {
    // SAFETY: this function's contract includes `current`'s.
    let h = unsafe { current(tx) }?;
    if h.mode.get() == Mode::Explicit {
        check_thread(h)?;
    }
    // SAFETY: `tx` is current, so `h.tx` points to the running transaction's `Tx` (the
    // callback's attempt, or the one inside the handle's explicit transaction), which
    // stays in place while the transaction runs. It runs on this thread: an explicit
    // one was checked above, and a callback's handle is used by no other thread until
    // its `pisces_run` returns (contract). Only shared references to it exist while C
    // code can run (a foreach/range callback reading again, with `iterating` set),
    // exclusive ones only outside callbacks.
    f(unsafe { &*h.tx.get() })
}

/// Run `f` with exclusive access to the running transaction `tx` (not allowed inside
/// a foreach/range callback).
///
/// # Safety
/// * `tx.handle` is as for [`current`], for the duration of the call.
/// * `f` runs no C code: nothing else may reach the transaction while the exclusive
///   reference lives.
#[inline]
pub(crate) unsafe fn with_tx_mut<R>(
    tx: pisces_tx,
    f: impl FnOnce(&mut Tx<'_>) -> Result<R, Fail>,
) -> Result<R, Fail> {
    // SAFETY: this function's contract includes `current`'s.
    let h = unsafe { current(tx) }?;
    if h.iterating.get() {
        return Err(Fail::new(
            PISCES_EBUSY,
            "only reads are allowed inside a foreach/range callback",
        ));
    }
    if h.mode.get() == Mode::Explicit {
        check_thread(h)?;
    }
    // SAFETY: as in `with_tx_ref`; not iterating, so no other reference to the `Tx` is
    // alive (the C caller holds only raw pointers), and `f` runs no C code (contract),
    // so none is made while this one lives.
    f(unsafe { &mut *h.tx.get() })
}

// ---------------------------------------------------------------------------------
// The thread an explicit transaction runs on, and its end (closing a handle ends one
// too).

thread_local! {
    /// Its address names the calling thread (cheaper than `std::thread::current()`,
    /// and unique among running threads).
    static THREAD_MARK: u8 = const { 0 };
}

/// The calling thread, as a number unique among running threads.
#[inline]
pub(crate) fn thread_mark() -> usize {
    THREAD_MARK.with(|m| m as *const u8 as usize)
}

/// `PISCES_EINVAL` unless the explicit transaction of `h` was begun on this thread.
#[inline]
pub(crate) fn check_thread(h: &pisces_handle) -> Result<(), Fail> {
    if h.began_on.get() != thread_mark() {
        return Err(other_thread());
    }
    Ok(())
}

/// The failure of an explicit transaction used on another thread (off the fast path).
#[cold]
#[inline(never)]
fn other_thread() -> Fail {
    Fail::new(
        PISCES_EINVAL,
        "an explicit transaction is used only on the thread that began it",
    )
}

/// End the explicit transaction of `h` (running on this thread): commit or roll back.
/// The handle is idle afterwards whatever happened.
///
/// # Safety
/// * The explicit transaction of `h`, if any, was begun on this thread
///   ([`check_thread`] passed): it is not `Send`.
/// * No reference to its `Tx` (through `h.tx`) or to the slot `h.explicit` is alive:
///   the caller is not inside a `with_tx_ref` / `with_tx_mut` of `h` (so `h` is not
///   iterating) nor inside a callback of `h`.
pub(crate) unsafe fn end(h: &pisces_handle, commit: bool) -> Result<(), Fail> {
    // Clears `h.tx` before the transaction moves.
    set_idle(h);
    // SAFETY: no other borrow of the slot is alive (contract), and none is made while
    // this one lives: no C code runs inside this function.
    let t = unsafe { (*h.explicit.get()).take() };
    match t {
        Some(t) if commit => t.commit().map_err(|e| {
            if matches!(e, pisces::Error::Conflict) {
                Fail::new(
                    PISCES_ECONFLICT,
                    "transaction rolled back by a conflict; run it again",
                )
            } else {
                Fail::from(e)
            }
        }),
        Some(t) => {
            t.abort();
            Ok(())
        }
        None => Ok(()),
    }
}

// ---------------------------------------------------------------------------------
// Engines

/// Number of engines this library knows (also those this build cannot run).
#[no_mangle]
pub extern "C" fn pisces_engine_count() -> usize {
    errors::guarded(|| EngineId::ALL.len()).unwrap_or(0)
}

/// Name of engine `i` (0 ≤ i < `pisces_engine_count()`); NULL when out of range.
///
/// The string is static (valid for the rest of the process) and read only.
#[no_mangle]
pub extern "C" fn pisces_engine_name(i: usize) -> *const c_char {
    static NAMES: std::sync::OnceLock<Vec<CString>> = std::sync::OnceLock::new();
    errors::guarded(|| {
        let names = NAMES.get_or_init(|| {
            EngineId::ALL
                .iter()
                .map(|e| CString::new(e.name()).unwrap_or_default())
                .collect()
        });
        names.get(i).map_or(std::ptr::null(), |n| n.as_ptr())
    })
    .unwrap_or(std::ptr::null())
}

/// 1 if this build can run the engine called `name`, 0 if it knows it but cannot run
/// it (`pmdk` without libpmemobj), -1 if the name is unknown or NULL.
///
/// # Safety
/// `name` is NULL or a nul-terminated string, readable and unchanged during the call.
#[no_mangle]
pub unsafe extern "C" fn pisces_engine_available(name: *const c_char) -> c_int {
    let r = errors::guarded(|| {
        // SAFETY: `name` is NULL or a nul-terminated string readable during the call
        // (contract); the `&str` is used only inside it.
        let Ok(Some(n)) = (unsafe { cstr_opt(name, "name") }) else {
            return -1;
        };
        match EngineId::from_name(n) {
            Some(e) => c_int::from(e.available()),
            None => -1,
        }
    });
    r.unwrap_or(-1)
}

// ---------------------------------------------------------------------------------
// Pools

/// Fill `cfg` with the defaults (64 MiB, engine from the pool / "pisces", medium
/// NULL (chosen by the file system), 8 threads, 1 MiB log per thread, 1 recovery thread, 5 s slot wait).
///
/// # Safety
/// `cfg` is NULL (`PISCES_EINVAL`) or points to a writable `pisces_config` that no other
/// thread uses during the call.
#[no_mangle]
pub unsafe extern "C" fn pisces_config_init(cfg: *mut pisces_config) -> c_int {
    entry(move || {
        // SAFETY: `cfg` is NULL or a writable `pisces_config` used only by this call
        // (contract).
        unsafe { out_ptr(cfg, "cfg") }?.write(pisces_config_default());
        Ok(())
    })
}

/// The failure of creating or opening the pool file `path` with the library's error
/// `e`. A path that names neither a regular file nor a directory (a device such as
/// `/dev/null`, a FIFO) is, for the library, an invalid configuration (open) or a file
/// that exists already (create); for C it is an invalid argument either way, with a
/// message that says what is wrong.
#[cold]
#[inline(never)]
fn pool_file_failure(path: &str, e: Error) -> Fail {
    if matches!(e, Error::InvalidConfig(_) | Error::AlreadyExists(_))
        && std::fs::metadata(path).is_ok_and(|m| !m.is_file() && !m.is_dir())
    {
        return Fail::new(
            PISCES_EINVAL,
            format!("{path} is not a regular file (a pool is a regular file)"),
        );
    }
    Fail::from(e)
}

/// Box `pool` as the C pool object and store it in `*out`.
fn finish_pool(pool: Pool, out: Out<*mut pisces_pool>) -> Result<(), Fail> {
    let engine_name = CString::new(pool.engine_id().name()).unwrap_or_default();
    let token = POOLS
        .insert(pisces_pool {
            shared: Arc::new(PoolShared {
                pool,
                engine_name,
                root: std::sync::OnceLock::new(),
            }),
        })
        .map_err(|_| Fail::new(PISCES_ERROR, "too many pool objects open"))?;
    out.write(token as *mut pisces_pool);
    Ok(())
}

/// A `pisces_pool` for C code of this process on a pool opened from Rust (a Rust
/// program that hands a pool to C, like the benchmark harness driving the C interface
/// on the pools it creates). Close it with `pisces_pool_close`; the pool itself stays
/// open while `pool` or any other clone of it lives. NULL if a million pool objects
/// are open already.
pub fn pool_from_rust(pool: &Pool) -> *mut pisces_pool {
    let engine_name = CString::new(pool.engine_id().name()).unwrap_or_default();
    POOLS
        .insert(pisces_pool {
            shared: Arc::new(PoolShared {
                pool: pool.clone(),
                engine_name,
                root: std::sync::OnceLock::new(),
            }),
        })
        .map_or(std::ptr::null_mut(), |t| t as *mut pisces_pool)
}

/// Create a new pool file at `path` (it must not exist) and open it. `cfg` may be
/// NULL (defaults). On success `*out` is the pool; close it with `pisces_pool_close`.
///
/// # Safety
/// * `path` is NULL (`PISCES_EINVAL`) or a nul-terminated string.
/// * `cfg` is NULL or points to an initialized `pisces_config` (`pisces_config_init`,
///   then fields changed) whose `engine`, `engine_options` and `medium` are each NULL or
///   a nul-terminated string.
/// * `out` is NULL (`PISCES_EINVAL`) or points to a writable `pisces_pool *`.
/// * All of these stay readable (`out`: writable) and unchanged by other threads during
///   the call; the library keeps none of them after it returns.
#[no_mangle]
pub unsafe extern "C" fn pisces_pool_create(
    path: *const c_char,
    cfg: *const pisces_config,
    out: *mut *mut pisces_pool,
) -> c_int {
    entry(move || {
        // SAFETY: `out` is NULL or a writable `pisces_pool *` used only by this call
        // (contract).
        let out = unsafe { out_ptr(out, "out") }?;
        // SAFETY: `path` is NULL or a nul-terminated string, readable and unchanged
        // during the call (contract); the `&str` is not used after it.
        let path = unsafe { cstr_opt(path, "path") }?
            .ok_or_else(|| Fail::new(PISCES_EINVAL, "path is NULL"))?;
        // SAFETY: `cfg` is NULL or an initialized configuration whose strings are NULL
        // or nul-terminated, readable during the call (contract).
        let cfg = unsafe { to_config(cfg) }?;
        let pool = Pool::create(path, cfg).map_err(|e| pool_file_failure(path, e))?;
        finish_pool(pool, out)
    })
}

/// Open an existing pool file, running recovery if it was not closed cleanly. `cfg`
/// may be NULL (defaults; the engine is the pool's). On success `*out` is the pool;
/// close it with `pisces_pool_close`.
///
/// # Safety
/// * `path` is NULL (`PISCES_EINVAL`) or a nul-terminated string.
/// * `cfg` is NULL or points to an initialized `pisces_config` (`pisces_config_init`,
///   then fields changed) whose `engine`, `engine_options` and `medium` are each NULL or
///   a nul-terminated string.
/// * `out` is NULL (`PISCES_EINVAL`) or points to a writable `pisces_pool *`.
/// * All of these stay readable (`out`: writable) and unchanged by other threads during
///   the call; the library keeps none of them after it returns.
#[no_mangle]
pub unsafe extern "C" fn pisces_pool_open(
    path: *const c_char,
    cfg: *const pisces_config,
    out: *mut *mut pisces_pool,
) -> c_int {
    entry(move || {
        // SAFETY: `out` is NULL or a writable `pisces_pool *` used only by this call
        // (contract).
        let out = unsafe { out_ptr(out, "out") }?;
        // SAFETY: `path` is NULL or a nul-terminated string, readable and unchanged
        // during the call (contract); the `&str` is not used after it.
        let path = unsafe { cstr_opt(path, "path") }?
            .ok_or_else(|| Fail::new(PISCES_EINVAL, "path is NULL"))?;
        // SAFETY: `cfg` is NULL or an initialized configuration whose strings are NULL
        // or nul-terminated, readable during the call (contract).
        let cfg = unsafe { to_config(cfg) }?;
        let pool = match Pool::open(path, cfg.clone()) {
            // Not a Pisces-format pool: maybe libpmemobj's (the pmdk engine keeps its
            // own file format, so the superblock cannot name it).
            Err(Error::BadMagic) if cfg.engine.is_none() && EngineId::Pmdk.available() => {
                Pool::open(path, cfg.engine(EngineId::Pmdk)).map_err(|_| Error::BadMagic)?
            }
            r => r.map_err(|e| pool_file_failure(path, e))?,
        };
        finish_pool(pool, out)
    })
}

/// Open an existing pool file shared with the other processes that open it with this
/// function: all of them run transactions on it at once, with the isolation of threads
/// of one process (`pisces::Sharing::Shared`). Create the pool first
/// (`pisces_pool_create`, then close it). The first process to open it recovers it;
/// an exclusive open (`pisces_pool_open`) is refused with `PISCES_ELOCKED` while any
/// process has it open shared, and the other way round. Only the "pisces" and
/// "volatile" engines share (others: `PISCES_ECONFIG`, with the reason). A pool that
/// may grow grows for every process (not on the DAX medium: `PISCES_ECONFIG`). A
/// process that ends (is killed) while holding what another waits for is recovered
/// while the others run (its unfinished transaction rolled back, its committed ones
/// written back, a write-back, a growth or a change of the allocator it was in
/// finished). Only where the recovery finds a state no process leaves (a damaged log)
/// does the pool stop: calls then fail with `PISCES_EPEERDIED` (whose message names
/// what was found) until every process has closed it; the next open recovers it as
/// after a crash.
///
/// # Safety
/// As `pisces_pool_open`.
#[no_mangle]
pub unsafe extern "C" fn pisces_pool_open_shared(
    path: *const c_char,
    cfg: *const pisces_config,
    out: *mut *mut pisces_pool,
) -> c_int {
    entry(move || {
        // SAFETY: as in `pisces_pool_open`.
        let out = unsafe { out_ptr(out, "out") }?;
        // SAFETY: as in `pisces_pool_open`.
        let path = unsafe { cstr_opt(path, "path") }?
            .ok_or_else(|| Fail::new(PISCES_EINVAL, "path is NULL"))?;
        // SAFETY: as in `pisces_pool_open`.
        let cfg = unsafe { to_config(cfg) }?.sharing(pisces::Sharing::Shared);
        let pool = Pool::open(path, cfg).map_err(|e| pool_file_failure(path, e))?;
        finish_pool(pool, out)
    })
}

/// Close a pool (NULL is accepted). Handles still open keep the pool open until the
/// last of them is closed; then pending work is written back and the file unlocked.
///
/// # Safety
/// * No other call uses `pool` at the same time (on any thread). Afterwards calls given
///   it return `PISCES_ECLOSED` (a second close too), and the string from
///   `pisces_pool_engine` is freed. Handles opened from it stay valid.
#[no_mangle]
pub unsafe extern "C" fn pisces_pool_close(pool: *mut pisces_pool) -> c_int {
    entry(move || {
        if !pool.is_null() {
            // SAFETY: no other call uses the pool now (contract), so no reference from
            // `pool_ref` to it is alive.
            let p = unsafe { POOLS.remove(pool as usize) }.map_err(|_| closed("the pool"))?;
            drop(p);
        }
        Ok(())
    })
}

/// Write back everything pending and make the whole pool durable now.
///
/// # Safety
/// `pool` is NULL (`PISCES_EINVAL`) or an open pool object (not passed to
/// `pisces_pool_close` before this call returns). Other threads may use it meanwhile.
#[no_mangle]
pub unsafe extern "C" fn pisces_pool_sync(pool: *mut pisces_pool) -> c_int {
    entry(move || {
        // SAFETY: `pool` is NULL or stays open during the call (contract).
        let shared = &unsafe { pool_ref(pool) }?.shared;
        not_in_tx(&shared.pool)?;
        Ok(shared.pool.sync()?)
    })
}

/// The name of the engine running the pool; NULL if `pool` is NULL.
///
/// # Safety
/// * `pool` is NULL or an open pool object (not passed to `pisces_pool_close` before
///   this call returns). Other threads may use it meanwhile.
/// * The string returned is read only and valid until `pisces_pool_close(pool)`.
#[no_mangle]
pub unsafe extern "C" fn pisces_pool_engine(pool: *const pisces_pool) -> *const c_char {
    errors::guarded(std::panic::AssertUnwindSafe(|| {
        // SAFETY: `pool` is NULL or a live pool object during the call (contract); the
        // string returned lives in it (kept alive by the object until it is closed).
        match unsafe { pool_ref(pool) } {
            Ok(p) => p.shared.engine_name.as_ptr(),
            Err(_) => std::ptr::null(),
        }
    }))
    .unwrap_or(std::ptr::null())
}

/// The pool's root object of `size` bytes (1 to 4294967295), allocated zeroed on
/// first use; `*off` is its offset. Every call must give the same size (else
/// `PISCES_EPTR`). It is the library's root object (`Pool::root_bytes`), with the same
/// checks: it can never be freed. Runs its own transaction, which needs a free thread
/// slot (waits `slot_wait_ms` for one).
///
/// The root is exactly `size` bytes for accesses: reading or writing past `size`
/// fails with `PISCES_EPTR`, although the allocator rounds its block up to a size class
/// (multiples of 16 bytes for small objects, 8 of them its header) and the pool file
/// keeps the rounded block. The bound applies once this function returned the root on
/// the `pisces_pool` object used (a pool object that never called it bounds accesses to
/// the root by the rounded block).
///
/// # Safety
/// * `pool` is NULL (`PISCES_EINVAL`) or an open pool object (not passed to
///   `pisces_pool_close` before this call returns). Other threads may use it meanwhile.
/// * `off` is NULL (`PISCES_EINVAL`) or points to a writable `uint64_t` that no other
///   thread uses during the call.
#[no_mangle]
pub unsafe extern "C" fn pisces_root(pool: *mut pisces_pool, size: u64, off: *mut u64) -> c_int {
    entry(move || {
        // SAFETY: `off` is NULL or a writable `uint64_t` used only by this call
        // (contract).
        let off = unsafe { out_ptr(off, "off") }?;
        // SAFETY: `pool` is NULL or stays open during the call (contract).
        let shared = &unsafe { pool_ref(pool) }?.shared;
        not_in_tx(&shared.pool)?;
        if size == 0 {
            return Err(Fail::new(
                PISCES_EINVAL,
                "the root object needs at least 1 byte",
            ));
        }
        let len =
            usize::try_from(size).map_err(|_| Fail::new(PISCES_EINVAL, "root size too large"))?;
        let root = shared.pool.root_bytes(len)?.offset();
        let _ = shared.root.set((root, size));
        off.write(root);
        Ok(())
    })
}

// ---------------------------------------------------------------------------------
// Handles

/// Take one of the pool's thread slots (`PISCES_ETHREADS` when all `max_threads`
/// are taken). A handle is used by one thread at a time; close it with
/// `pisces_handle_close` (before or after the pool).
///
/// # Safety
/// * `pool` is NULL (`PISCES_EINVAL`) or an open pool object (not passed to
///   `pisces_pool_close` before this call returns). Other threads may use it meanwhile.
/// * `out` is NULL (`PISCES_EINVAL`) or points to a writable `pisces_handle *` that no
///   other thread uses during the call.
#[no_mangle]
pub unsafe extern "C" fn pisces_handle_open(
    pool: *mut pisces_pool,
    out: *mut *mut pisces_handle,
) -> c_int {
    entry(move || {
        // SAFETY: `out` is NULL or a writable `pisces_handle *` used only by this call
        // (contract).
        let out = unsafe { out_ptr(out, "out") }?;
        // SAFETY: `pool` is NULL or stays open during the call (contract).
        let shared = unsafe { pool_ref(pool) }?.shared.clone();
        let th = shared.pool.handle()?;
        let token = HANDLES.insert(pisces_handle {
            explicit: UnsafeCell::new(None),
            shared,
            th: UnsafeCell::new(th),
            generation: Cell::new(0),
            mode: Cell::new(Mode::Idle),
            tx: Cell::new(std::ptr::null_mut()),
            iterating: Cell::new(false),
            began_on: Cell::new(0),
        });
        let token = token.map_err(|_| Fail::new(PISCES_ERROR, "too many handles open"))?;
        out.write(token as *mut pisces_handle);
        Ok(())
    })
}

/// Give the thread slot back (NULL is accepted). An explicit transaction still open
/// on it is aborted (close it then on the thread that began the transaction:
/// `PISCES_EINVAL` otherwise). Fails with `PISCES_EBUSY` (and closes nothing) when
/// called from inside a `pisces_run` callback of this handle.
///
/// # Safety
/// * No other thread uses the handle `h` names during the call.
/// * When it returns `PISCES_OK` the handle is closed: calls given `h` or a `pisces_tx`
///   of it return `PISCES_ECLOSED` (a second close too), and no pointer from its
///   transactions may be used.
#[no_mangle]
pub unsafe extern "C" fn pisces_handle_close(h: *mut pisces_handle) -> c_int {
    entry(move || {
        if h.is_null() {
            return Ok(());
        }
        // SAFETY: the handle is used only by this thread during the call (contract);
        // the reference is not used after the handle is removed below.
        let hr = unsafe { handle_ref(h) }?;
        if hr.mode.get() == Mode::Callback || hr.iterating.get() {
            return Err(Fail::new(
                PISCES_EBUSY,
                "cannot close a handle inside its own transaction callback",
            ));
        }
        if hr.mode.get() == Mode::Explicit {
            // Rolled back on the thread that began it, which has its registration.
            check_thread(hr)?;
            // SAFETY: begun on this thread (checked just above); not iterating and not
            // in a callback of `hr` (checked above), so no reference to its `Tx` or to
            // the slot is alive.
            let _ = unsafe { end(hr, false) };
        }
        // Giving the slot back writes back its pending work, which may wait for the
        // transactions running on the pool.
        not_in_tx(&hr.shared.pool)?;
        // SAFETY: nothing uses the handle during this call but it (contract; no
        // transaction of it is running: callback mode was refused, an explicit one was
        // ended above); `hr` is not used again. Afterwards its token is refused.
        let handle = unsafe { HANDLES.remove(h as usize) }.map_err(|_| closed("the handle"))?;
        drop(handle);
        Ok(())
    })
}

/// Wait until every transaction this handle committed is durable (after transactions
/// with `deferred_durability`).
///
/// # Safety
/// `h` is NULL (`PISCES_EINVAL`) or an open handle (from `pisces_handle_open`, not
/// closed) that no other thread uses during the call.
#[no_mangle]
pub unsafe extern "C" fn pisces_handle_wait_durable(h: *mut pisces_handle) -> c_int {
    entry(move || {
        // SAFETY: `h` is NULL or an open handle used only by this thread during the call
        // (contract).
        let h = unsafe { handle_ref(h) }?;
        // SAFETY: the borrow is dropped before this function returns, and no C code
        // runs while it lives.
        let th = unsafe { idle_th(h) }?;
        not_in_tx(&h.shared.pool)?;
        Ok(th.wait_durable()?)
    })
}

/// Commits, conflict retries and failed transactions on this handle (callback and
/// explicit ones; an explicit transaction rolled back by a conflict counts as a
/// conflict, any other abort as a failure).
///
/// # Safety
/// * `h` is NULL (`PISCES_EINVAL`) or an open handle (from `pisces_handle_open`, not
///   closed) that no other thread uses during the call.
/// * `commits`, `conflicts` and `failed` are each NULL (not filled in) or point to a
///   writable `uint64_t` that no other thread uses during the call.
#[no_mangle]
pub unsafe extern "C" fn pisces_handle_stats(
    h: *mut pisces_handle,
    commits: *mut u64,
    conflicts: *mut u64,
    failed: *mut u64,
) -> c_int {
    entry(move || {
        // SAFETY: `h` is NULL or an open handle used only by this thread during the call
        // (contract).
        let h = unsafe { handle_ref(h) }?;
        // SAFETY: the borrow ends within this statement; no C code runs meanwhile.
        let s = unsafe { idle_th(h) }?.stats();
        // SAFETY: `commits`, `conflicts` and `failed` are each NULL or a writable
        // `uint64_t` used only by this call (contract). All three are checked before
        // any is written, so a misaligned one leaves the others unchanged.
        let outs = unsafe {
            [
                (opt_out(commits, "commits")?, s.commits),
                (opt_out(conflicts, "conflicts")?, s.conflicts),
                (opt_out(failed, "failed")?, s.failed),
            ]
        };
        for (out, v) in outs {
            if let Some(out) = out {
                out.write(v);
            }
        }
        Ok(())
    })
}

/// The thread state of `h`, borrowed in place; `PISCES_EBUSY` while a transaction
/// runs on the handle.
///
/// Why no two borrows of the state are ever alive at once: it is handed out only while
/// `h.mode` is `Idle`, and every caller either drops the borrow before C code can run
/// again (stats, wait_durable) or keeps `h.mode` non-idle whenever it calls C code
/// while holding it (`pisces_run` calls the callback only inside an attempt, with
/// `mode == Callback`; between attempts only library code runs; `pisces_tx_begin`
/// turns it into the explicit transaction's borrow and sets `mode == Explicit` until
/// that transaction is taken out again). A handle is used by one thread at a time
/// (documented), and `pisces_handle` is not `Sync`.
///
/// # Safety
/// The caller keeps to the rule above: it does not call this again on `h` while the
/// result is alive, and runs C code while holding it only with `h.mode` set to a
/// non-idle value.
// A `&mut` from a `&`: the state sits in an `UnsafeCell`, and the contract above keeps
// the borrows apart.
#[allow(clippy::mut_from_ref)]
#[inline]
unsafe fn idle_th(h: &pisces_handle) -> Result<&mut ThreadHandle, Fail> {
    check_idle(h)?;
    // SAFETY: the handle is idle, so no other borrow of the state is alive (see above).
    Ok(unsafe { &mut *h.th.get() })
}

#[inline]
fn check_idle(h: &pisces_handle) -> Result<(), Fail> {
    if h.mode.get() != Mode::Idle {
        return Err(Fail::new(
            PISCES_EBUSY,
            "a transaction is running on this handle",
        ));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------
// Callback transactions

enum CbErr {
    Pisces(Error),
    Code(c_int),
}

impl From<Error> for CbErr {
    fn from(e: Error) -> Self {
        CbErr::Pisces(e)
    }
}

/// Run `fn(tx, ctx)` as one transaction with the default options (see
/// `pisces_run_with`).
///
/// # Safety
/// * `h` is NULL (`PISCES_EINVAL`) or an open handle (from `pisces_handle_open`, not
///   closed) that no other thread uses until this call returns: neither the handle nor
///   a `pisces_tx` of it (the callback's `tx` is for this thread).
/// * `f` is NULL (`PISCES_EINVAL`) or a function that returns normally on every call:
///   it must not unwind (a C++ exception) or `longjmp` out of it.
/// * `ctx` is passed to `f` as is; the library never dereferences it.
/// * The `tx` given to `f` is valid during that call only: afterwards it returns
///   `PISCES_ESTALE` (while the handle is open). Pointers from accesses inside `f`
///   (`pisces_read`, `pisces_write`, `pisces_hmap_find`) end with the call at the latest.
#[no_mangle]
pub unsafe extern "C" fn pisces_run(
    h: *mut pisces_handle,
    f: pisces_tx_fn,
    ctx: *mut c_void,
) -> c_int {
    // SAFETY: `h`, `f` and `ctx` as `run_entry` requires (this function's contract is
    // its contract); without options `opts` is not read.
    unsafe { run_entry::<false>(h, std::ptr::null(), f, ctx) }
}

/// Run `fn(tx, ctx)` as one transaction, retrying it on conflicts, and return when it
/// is committed (and durable, unless `deferred_durability`).
///
/// `fn` returns 0 to commit. It may run several times: when any access inside it
/// returned `PISCES_ECONFLICT` (whatever `fn` returns then), or when it returns
/// `PISCES_ECONFLICT`, the attempt is rolled back and `fn` runs again. Any other
/// nonzero value rolls back and is returned by `pisces_run` (an error code of an access
/// passed on keeps its `pisces_errmsg`; use values from `PISCES_USER` up for your own).
/// `opts` may be NULL (the defaults).
///
/// # Safety
/// * `h` is NULL (`PISCES_EINVAL`) or an open handle (from `pisces_handle_open`, not
///   closed) that no other thread uses until this call returns: neither the handle nor
///   a `pisces_tx` of it (the callback's `tx` is for this thread).
/// * `f` is NULL (`PISCES_EINVAL`) or a function that returns normally on every call:
///   it must not unwind (a C++ exception) or `longjmp` out of it.
/// * `ctx` is passed to `f` as is; the library never dereferences it.
/// * The `tx` given to `f` is valid during that call only: afterwards it returns
///   `PISCES_ESTALE` (while the handle is open). Pointers from accesses inside `f`
///   (`pisces_read`, `pisces_write`, `pisces_hmap_find`) end with the call at the latest.
/// * `opts` is NULL or points to an initialized `pisces_tx_options`, readable during
///   the call.
#[no_mangle]
pub unsafe extern "C" fn pisces_run_with(
    h: *mut pisces_handle,
    opts: *const pisces_tx_options,
    f: pisces_tx_fn,
    ctx: *mut c_void,
) -> c_int {
    // SAFETY: `h`, `opts`, `f` and `ctx` as `run_entry` requires (this function's
    // contract is its contract).
    unsafe { run_entry::<true>(h, opts, f, ctx) }
}

/// The body of `pisces_run` (`WITH_OPTS` false: no options, so their decoding folds
/// away) and `pisces_run_with`, inlined into each; the two instances have distinct
/// closures (panic barrier, transaction body), so each of those has a single caller and
/// is inlined whole instead of being called from both.
///
/// # Safety
/// * `h` is NULL or an open handle that no other thread uses (nor a `pisces_tx` of it)
///   until the call returns.
/// * `f` is NULL or a function that returns normally (no unwinding, no `longjmp` out of
///   it); `ctx` is whatever `f` expects.
/// * If `WITH_OPTS`, `opts` is NULL or points to an initialized `pisces_tx_options`
///   (else it is not read).
#[inline(always)]
unsafe fn run_entry<const WITH_OPTS: bool>(
    h: *mut pisces_handle,
    opts: *const pisces_tx_options,
    f: pisces_tx_fn,
    ctx: *mut c_void,
) -> c_int {
    entry(move || {
        // SAFETY: `h` is NULL or an open handle used only by this thread during the call
        // (contract).
        let hr = unsafe { handle_ref(h) }?;
        let f = f.ok_or_else(|| Fail::new(PISCES_EINVAL, "the callback is NULL"))?;
        let opts = if WITH_OPTS {
            // SAFETY: with options, `opts` is NULL or initialized options (contract).
            unsafe { to_tx_options(opts) }?
        } else {
            TxOptions::default()
        };
        // In place (no move of the thread state): see `idle_th`. The library refuses a
        // nested transaction of the pool (`PISCES_ENESTED`).
        // SAFETY: `run_callback` keeps `hr.mode` at `Callback` whenever it calls C code
        // while `th` lives (the rule of `idle_th`), and `th` ends with it.
        let th = unsafe { idle_th(hr) }?;
        // SAFETY: `hr` is `h`'s handle, `th` its thread state lent while it was idle, and
        // `f` / `ctx` follow this function's contract.
        unsafe { run_callback::<WITH_OPTS>(hr, h, th, opts, f, ctx) }
    })
}

/// The body of `pisces_run` / `pisces_run_with`: run `f` in a transaction of `th`,
/// which the library retries on conflicts (a callback's own `PISCES_ECONFLICT`
/// included, counted as one) until it commits or `f` (or the library) asks to stop.
///
/// # Safety
/// * `h` is the open handle `hr` refers to, used by no other thread until this returns.
/// * `th` is `hr`'s thread state, from [`idle_th`] on the idle handle; this function
///   sets `hr.mode` to `Callback` around every call of `f`, as `idle_th` requires.
/// * `f` returns normally on every call (no unwinding, no `longjmp` out of it), and
///   `ctx` is whatever it expects.
#[inline(always)]
unsafe fn run_callback<const WITH_OPTS: bool>(
    hr: &pisces_handle,
    h: *mut pisces_handle,
    th: &mut ThreadHandle,
    opts: TxOptions,
    f: unsafe extern "C" fn(pisces_tx, *mut c_void) -> c_int,
    ctx: *mut c_void,
) -> Result<(), Fail> {
    /// Resets the handle to idle when an attempt ends (also on unwinding).
    struct Attempt<'a>(&'a pisces_handle);
    impl Drop for Attempt<'_> {
        fn drop(&mut self) {
            let h = self.0;
            h.tx.set(std::ptr::null_mut());
            h.mode.set(Mode::Idle);
            h.iterating.set(false);
            h.generation.set(h.generation.get() + 1);
        }
    }
    let r = th.transaction(opts, |t: &mut Tx<'_>| -> Result<(), CbErr> {
        let generation = hr.generation.get() + 1;
        hr.generation.set(generation);
        hr.tx.set((t as *mut Tx<'_>).cast::<Tx<'static>>());
        hr.mode.set(Mode::Callback);
        let _a = Attempt(hr);
        errors::clear_last_code();
        // SAFETY: `f` returns normally and takes this `ctx` (contract); the
        // `pisces_tx` names the attempt just published in the handle (`mode` is
        // `Callback`, so `idle_th` lends `th` to none of the C code's calls).
        let rc = unsafe {
            f(
                pisces_tx {
                    handle: h,
                    generation,
                },
                ctx,
            )
        };
        match rc {
            PISCES_OK => Ok(()),
            PISCES_ECONFLICT => Err(CbErr::Pisces(t.retry())),
            c => Err(CbErr::Code(c)),
        }
    });
    match r {
        Ok(()) => Ok(()),
        Err(CbErr::Pisces(e)) => Err(e.into()),
        Err(CbErr::Code(c)) => {
            if errors::last_code() != c {
                errors::set_msg(format!("the transaction callback returned {c}"));
            }
            Err(Fail::already_set(c))
        }
    }
}

// ---------------------------------------------------------------------------------
// Accesses

/// `*out` = a pointer to the first `len` bytes of the object at offset `off` in this
/// transaction's snapshot (read only). `off` must be an object's start (as returned by
/// `pisces_alloc` / `pisces_root`) and the object at least `len` bytes long; a field
/// inside it is at `(const char *)*out + field_offset`.
///
/// # Safety
/// * `tx`: its handle is open (not closed since the transaction began) and no other
///   thread uses it during the call; a `tx` whose transaction has ended is refused
///   (`PISCES_ESTALE`).
/// * `out` is NULL (`PISCES_EINVAL`) or points to a writable `const void *` that no
///   other thread uses during the call.
/// * `*out` may be read for `len` bytes, never written through, until the next
///   `pisces_write`, `pisces_put`, `pisces_alloc`, `pisces_free` or container update
///   (insert, remove, create, destroy) of the same transaction, or its end (commit,
///   abort, the return of the `pisces_run` callback), whichever comes first.
#[no_mangle]
pub unsafe extern "C" fn pisces_read(
    tx: pisces_tx,
    off: u64,
    len: usize,
    out: *mut *const c_void,
) -> c_int {
    entry(move || {
        // SAFETY: `out` is NULL or a writable `const void *` used only by this call
        // (contract).
        let out = unsafe { out_ptr(out, "out") }?;
        // SAFETY: `tx`'s handle is open and used only by this thread (contract).
        let root = unsafe { root_of(tx) };
        // SAFETY: `tx`'s handle is open and used only by this thread (contract); the
        // closure runs no C code.
        let p = unsafe {
            with_tx_ref(tx, |t| {
                let at = target(t, root, off, len)?;
                Ok(at.read(t, len)?.as_ptr() as usize)
            })
        }?;
        out.write(p as *const c_void);
        Ok(())
    })
}

/// `*out` = a pointer to this transaction's writable version of the first `len` bytes
/// of the object at `off` (the object is locked until the transaction ends; a
/// concurrent writer of it makes one of the two fail with `PISCES_ECONFLICT`).
///
/// # Safety
/// * `tx`: its handle is open (not closed since the transaction began) and no other
///   thread uses it during the call; a `tx` whose transaction has ended is refused
///   (`PISCES_ESTALE`).
/// * `out` is NULL (`PISCES_EINVAL`) or points to a writable `void *` that no other
///   thread uses during the call and that is not memory the transaction handed out.
/// * `*out` may be read and written for `len` bytes until the next `pisces_write`,
///   `pisces_put`, `pisces_alloc`, `pisces_free` or container update (insert, remove,
///   create, destroy) of the same transaction, or its end (commit, abort, the return of
///   the `pisces_run` callback), whichever comes first.
/// * This call ends the validity of every pointer the transaction handed out before
///   (`pisces_read`, `pisces_write`, `pisces_hmap_find`): use none of them from here
///   on, and pass none to it.
#[no_mangle]
pub unsafe extern "C" fn pisces_write(
    tx: pisces_tx,
    off: u64,
    len: usize,
    out: *mut *mut c_void,
) -> c_int {
    entry(move || {
        // SAFETY: `out` is NULL or a writable `void *` used only by this call
        // (contract).
        let out = unsafe { out_ptr(out, "out") }?;
        // SAFETY: `tx`'s handle is open and used only by this thread (contract).
        let root = unsafe { root_of(tx) };
        // SAFETY: `tx`'s handle is open and used only by this thread (contract); the
        // closure runs no C code.
        let p = unsafe {
            with_tx_mut(tx, |t| {
                let at = target(t, root, off, len)?;
                Ok(at.write(t, len)?.as_mut_ptr() as usize)
            })
        }?;
        out.write(p as *mut c_void);
        Ok(())
    })
}

/// Copy `len` bytes at byte `at` of the object at `off` into `dst` (no pointer
/// lifetime to mind; the object must have at least `at + len` bytes).
///
/// # Safety
/// * `tx`: its handle is open (not closed since the transaction began) and no other
///   thread uses it during the call; a `tx` whose transaction has ended is refused
///   (`PISCES_ESTALE`).
/// * `dst` is valid for writes of `len` bytes (NULL only with `len` 0, else
///   `PISCES_EINVAL`), no other thread uses them during the call, and they do not
///   overlap the bytes copied (as a pointer from `pisces_write` of the same object
///   could). It is not a pointer from `pisces_read` / `pisces_hmap_find`, which are
///   read only.
#[no_mangle]
pub unsafe extern "C" fn pisces_get(
    tx: pisces_tx,
    off: u64,
    at: usize,
    dst: *mut c_void,
    len: usize,
) -> c_int {
    entry(move || {
        if dst.is_null() && len > 0 {
            return Err(Fail::new(PISCES_EINVAL, "dst is NULL"));
        }
        let end = span(at, len)?;
        let dst = dst as usize;
        // SAFETY: `tx`'s handle is open and used only by this thread (contract).
        let root = unsafe { root_of(tx) };
        let copy = |t: &Tx<'_>| -> Result<(), Fail> {
            let s = target(t, root, off, end)?.read(t, end)?;
            // SAFETY: `s[at..]` holds `end - at = len` readable bytes; `dst` is valid for
            // writes of `len` bytes and does not overlap them (contract; a copy of 0
            // bytes is valid for any pointer, NULL included).
            unsafe { std::ptr::copy_nonoverlapping(s[at..].as_ptr(), dst as *mut u8, len) };
            Ok(())
        };
        // SAFETY: `tx`'s handle is open and used only by this thread (contract); `copy`
        // runs no C code.
        unsafe { with_tx_ref(tx, copy) }
    })
}

/// Copy `len` bytes from `src` to byte `at` of the object at `off` (the object must
/// have at least `at + len` bytes).
///
/// # Safety
/// * `tx`: its handle is open (not closed since the transaction began) and no other
///   thread uses it during the call; a `tx` whose transaction has ended is refused
///   (`PISCES_ESTALE`).
/// * `src` is valid for reads of `len` bytes (NULL only with `len` 0, else
///   `PISCES_EINVAL`), unchanged by other threads during the call, and not memory the
///   transaction handed out: copy bytes from `pisces_read` / `pisces_write` /
///   `pisces_hmap_find` to a buffer of your own first.
/// * This call ends the validity of every pointer the transaction handed out before
///   (`pisces_read`, `pisces_write`, `pisces_hmap_find`): use none of them from here
///   on, and pass none to it.
#[no_mangle]
pub unsafe extern "C" fn pisces_put(
    tx: pisces_tx,
    off: u64,
    at: usize,
    src: *const c_void,
    len: usize,
) -> c_int {
    entry(move || {
        if src.is_null() && len > 0 {
            return Err(Fail::new(PISCES_EINVAL, "src is NULL"));
        }
        let end = span(at, len)?;
        let src = src as usize;
        // SAFETY: `tx`'s handle is open and used only by this thread (contract).
        let root = unsafe { root_of(tx) };
        let copy = |t: &mut Tx<'_>| -> Result<(), Fail> {
            let s = target(t, root, off, end)?.write(t, end)?;
            // SAFETY: `src` is valid for reads of `len` bytes and is not memory of the
            // transaction, so it does not overlap `s` (contract); `s[at..]` holds `len`
            // writable bytes (a copy of 0 bytes is valid for any pointer, NULL included).
            unsafe { std::ptr::copy_nonoverlapping(src as *const u8, s[at..].as_mut_ptr(), len) };
            Ok(())
        };
        // SAFETY: `tx`'s handle is open and used only by this thread (contract); `copy`
        // runs no C code.
        unsafe { with_tx_mut(tx, copy) }
    })
}

fn span(at: usize, len: usize) -> Result<usize, Fail> {
    at.checked_add(len)
        .ok_or_else(|| Fail::new(PISCES_EINVAL, "at + len overflows"))
}

/// Allocate a zeroed object of `len` bytes (`len` > 0); `*off` = its offset. It is
/// released again if the transaction rolls back. Accesses to it are bounded by `len`
/// exactly (`PISCES_EPTR` past it), not by the allocator's rounded block: the object
/// records its size in a word in front of `*off` (8 bytes of the pool per object).
///
/// # Safety
/// * `tx`: its handle is open (not closed since the transaction began) and no other
///   thread uses it during the call; a `tx` whose transaction has ended is refused
///   (`PISCES_ESTALE`).
/// * `off` is NULL (`PISCES_EINVAL`) or points to a writable `uint64_t` that no other
///   thread uses during the call and that is not memory the transaction handed out.
/// * This call ends the validity of every pointer the transaction handed out before
///   (`pisces_read`, `pisces_write`, `pisces_hmap_find`): use none of them from here
///   on, and pass none to it.
#[no_mangle]
pub unsafe extern "C" fn pisces_alloc(tx: pisces_tx, len: usize, off: *mut u64) -> c_int {
    entry(move || {
        // SAFETY: `off` is NULL or a writable `uint64_t` used only by this call, outside
        // the transaction's memory (contract).
        let off = unsafe { out_ptr(off, "off") }?;
        if len == 0 {
            return Err(Fail::new(PISCES_EINVAL, "cannot allocate 0 bytes"));
        }
        if len as u64 > OBJECT_LEN_MASK {
            return Err(Fail::new(
                PISCES_EINVAL,
                format!("an object of {len} bytes (at most {OBJECT_LEN_MASK})"),
            ));
        }
        let alloc = |t: &mut Tx<'_>| -> Result<u64, Fail> {
            let p = t.alloc_bytes(OBJECT_PREFIX + len)?;
            let word = OBJECT_TAG | len as u64;
            t.write_bytes(p, OBJECT_PREFIX)?
                .copy_from_slice(&word.to_le_bytes());
            Ok(p.offset() + OBJECT_PREFIX as u64)
        };
        // SAFETY: `tx`'s handle is open and used only by this thread (contract); the
        // closure runs no C code.
        off.write(unsafe { with_tx_mut(tx, alloc) }?);
        Ok(())
    })
}

/// Free the object at `off` when the transaction commits.
///
/// # Safety
/// * `tx`: its handle is open (not closed since the transaction began) and no other
///   thread uses it during the call; a `tx` whose transaction has ended is refused
///   (`PISCES_ESTALE`).
/// * This call ends the validity of every pointer the transaction handed out before
///   (`pisces_read`, `pisces_write`, `pisces_hmap_find`): use none of them from here
///   on.
#[no_mangle]
pub unsafe extern "C" fn pisces_free(tx: pisces_tx, off: u64) -> c_int {
    entry(move || {
        // SAFETY: `tx`'s handle is open and used only by this thread (contract).
        let root = unsafe { root_of(tx) };
        let free = |t: &mut Tx<'_>| -> Result<(), Fail> {
            let at = target(t, root, off, 0)?;
            Ok(t.free(PPtr::<u8>::from_offset(at.base))?)
        };
        // SAFETY: `tx`'s handle is open and used only by this thread (contract); the
        // closure runs no C code.
        unsafe { with_tx_mut(tx, free) }
    })
}

// ---------------------------------------------------------------------------------
// Object bounds

/// High 16 bits of the word in front of every object `pisces_alloc` makes ("C0" "B1":
/// a C object); the low 48 bits are the size the object was allocated with.
const OBJECT_TAG: u64 = 0xC0B1 << 48;
/// The size bits of the word in front of an object.
const OBJECT_LEN_MASK: u64 = (1 << 48) - 1;
/// Bytes of that word: a C object's offset is its heap block's payload plus this.
const OBJECT_PREFIX: usize = 8;

/// Where the bytes of the object a C offset names are for the library, and how many
/// of them the object has.
struct Target {
    /// The library's object (the heap block's payload).
    base: u64,
    /// Bytes of the library's object in front of the C object's first byte.
    skip: usize,
}

impl Target {
    /// The first `end` bytes of the C object, read only.
    fn read<'t>(&self, t: &'t Tx<'_>, end: usize) -> Result<&'t [u8], Fail> {
        Ok(&t.read_bytes(PPtr::from_offset(self.base), self.skip + end)?[self.skip..])
    }

    /// The first `end` bytes of the C object, writable.
    fn write<'t>(&self, t: &'t mut Tx<'_>, end: usize) -> Result<&'t mut [u8], Fail> {
        Ok(&mut t.write_bytes(PPtr::from_offset(self.base), self.skip + end)?[self.skip..])
    }
}

/// The object the C offset `off` names, checked to hold at least `end` bytes by the
/// size it was made with:
/// * the root object (`root`, once `pisces_root` returned it): its exact size;
/// * an object of `pisces_alloc`: the size recorded in the word in front of it;
/// * anything else (an object allocated from Rust, or by a build before objects
///   recorded their size): the library's own bounds, its allocation block.
///
/// A read of the word in front of `off` that the library refuses as no object (the
/// usual case for the last two) is not an error; any other failure (a conflict) is.
fn target(t: &Tx<'_>, root: Option<(u64, u64)>, off: u64, end: usize) -> Result<Target, Fail> {
    let exact = |size: u64| {
        if end as u64 > size {
            Err(Fail::new(
                PISCES_EPTR,
                format!("{end} bytes of the object at {off:#x}, which has {size}"),
            ))
        } else {
            Ok(())
        }
    };
    if let Some((root, size)) = root.filter(|r| r.0 == off) {
        exact(size)?;
        return Ok(Target {
            base: root,
            skip: 0,
        });
    }
    if let Some(base) = off.checked_sub(OBJECT_PREFIX as u64).filter(|&b| b != 0) {
        match t.read_bytes(PPtr::from_offset(base), OBJECT_PREFIX) {
            Ok(w) => {
                let mut word = [0u8; OBJECT_PREFIX];
                word.copy_from_slice(w);
                let word = u64::from_le_bytes(word);
                if word & !OBJECT_LEN_MASK == OBJECT_TAG {
                    exact(word & OBJECT_LEN_MASK)?;
                    return Ok(Target {
                        base,
                        skip: OBJECT_PREFIX,
                    });
                }
            }
            Err(Error::InvalidPointer(_)) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(Target { base: off, skip: 0 })
}

/// The root object (offset, exact size) of the pool of `tx`'s handle, if `pisces_root`
/// returned it; `None` also for a handle that is not open (the access then fails).
///
/// # Safety
/// As [`current`]: `tx.handle` is NULL or an open handle that no other thread uses
/// during the call.
#[inline]
unsafe fn root_of(tx: pisces_tx) -> Option<(u64, u64)> {
    // SAFETY: this function's contract is `handle_ref`'s.
    let h = unsafe { handle_ref(tx.handle) }.ok()?;
    h.shared.root.get().copied()
}

/// Mark `h` idle after an attempt or an explicit transaction.
fn set_idle(h: &pisces_handle) {
    h.tx.set(std::ptr::null_mut());
    h.mode.set(Mode::Idle);
    h.iterating.set(false);
    h.generation.set(h.generation.get() + 1);
}

/// Mark `h` as running an explicit transaction; the new generation.
fn set_explicit(h: &pisces_handle) -> u64 {
    let g = h.generation.get() + 1;
    h.generation.set(g);
    h.mode.set(Mode::Explicit);
    g
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `pisces_run` uses `TxOptions::default()` directly (folded in at compile time);
    /// `pisces_run_with` decodes its options: NULL must mean exactly those defaults.
    #[test]
    fn null_options_are_the_default_options() {
        // SAFETY: NULL is a valid argument (it means the defaults).
        let o = unsafe { to_tx_options(std::ptr::null()) }.unwrap();
        assert_eq!(o, TxOptions::default());
        // SAFETY: a valid pointer to all-zero options.
        let z = unsafe { to_tx_options(&pisces_tx_options::default()) }.unwrap();
        assert_eq!(z, TxOptions::default());
    }
}
