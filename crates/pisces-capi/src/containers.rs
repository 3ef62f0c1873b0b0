//! The persistent containers through C: a hash map and a B+-tree with `uint64_t` keys
//! and fixed-size byte values.
//!
//! The Rust containers are generic over the key and value types; C picks the value
//! size at run time, so the value is a byte array `[u8; N]` with `N` one of
//! [`PISCES_VALUE_SIZES`] and every operation dispatches on the size recorded in the
//! container descriptor (`pisces_hmap` / `pisces_btree`, 16 bytes of plain data to keep
//! in a pool object; not to be confused with a thread handle, `pisces_handle`). The
//! container's own header records key and value sizes and is checked on every access,
//! so a descriptor with the wrong value size fails with `PISCES_EPTR`.

use crate::errors::{entry, Fail, PISCES_EINVAL, PISCES_EVALUESIZE};
use crate::{current, pisces_tx, with_tx_mut, with_tx_ref};
use pisces::{BTreeMap, HashMap, Tx};
use std::ffi::{c_int, c_void};

/// The value sizes the containers support, in bytes.
pub const PISCES_VALUE_SIZES: [usize; 13] =
    [8, 16, 24, 32, 40, 48, 56, 64, 96, 128, 256, 512, 1024];

/// A hash map descriptor: the map's header offset and its value size. Plain data:
/// store it in a pool object (e.g. the root) and copy it freely. All zero = no map.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct pisces_hmap {
    /// Offset of the map's header object.
    pub header: u64,
    /// Bytes of every value (one of the supported sizes).
    pub value_size: u64,
}

/// A B+-tree descriptor (keys in order; range scans), like `pisces_hmap`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct pisces_btree {
    /// Offset of the tree's header object.
    pub header: u64,
    /// Bytes of every value (one of the supported sizes).
    pub value_size: u64,
}

/// Called for each entry by foreach / range: return 0 to go on, nonzero to stop.
/// `value` points to `value_size` bytes, read only and valid during the call. Inside
/// it only reads of the same transaction are allowed (`pisces_read`, `pisces_get`,
/// lookups); updates, commit, abort and closing the thread handle fail with
/// `PISCES_EBUSY`.
/// It must return normally: no unwinding (C++ exceptions) and no `longjmp` out of it.
pub type pisces_entry_fn =
    Option<unsafe extern "C" fn(key: u64, value: *const c_void, ctx: *mut c_void) -> c_int>;

/// 1 if `value_size` is supported by the containers, else 0.
#[no_mangle]
pub extern "C" fn pisces_value_size_supported(value_size: usize) -> c_int {
    crate::errors::guarded(|| c_int::from(PISCES_VALUE_SIZES.contains(&value_size))).unwrap_or(0)
}

#[cold]
#[inline(never)]
fn bad_size(n: u64) -> Fail {
    Fail::new(
        PISCES_EVALUESIZE,
        format!("container value size {n} is not supported (sizes: {PISCES_VALUE_SIZES:?})"),
    )
}

macro_rules! by_size {
    ($n:expr, $f:ident ( $($a:expr),* )) => {
        match $n {
            8 => $f::<8>($($a),*),
            16 => $f::<16>($($a),*),
            24 => $f::<24>($($a),*),
            32 => $f::<32>($($a),*),
            40 => $f::<40>($($a),*),
            48 => $f::<48>($($a),*),
            56 => $f::<56>($($a),*),
            64 => $f::<64>($($a),*),
            96 => $f::<96>($($a),*),
            128 => $f::<128>($($a),*),
            256 => $f::<256>($($a),*),
            512 => $f::<512>($($a),*),
            1024 => $f::<1024>($($a),*),
            n => Err(bad_size(n as u64)),
        }
    };
}

/// `by_size!` with the size dispatch outside the panic barrier: each size gets its own
/// small barrier around one container call, which the compiler inlines whole (one
/// barrier around all sizes is too large to inline and costs a call and spills).
macro_rules! entry_by_size {
    ($n:expr, $f:ident ( $($a:expr),* )) => {
        match $n {
            8 => entry(move || $f::<8>($($a),*)),
            16 => entry(move || $f::<16>($($a),*)),
            24 => entry(move || $f::<24>($($a),*)),
            32 => entry(move || $f::<32>($($a),*)),
            40 => entry(move || $f::<40>($($a),*)),
            48 => entry(move || $f::<48>($($a),*)),
            56 => entry(move || $f::<56>($($a),*)),
            64 => entry(move || $f::<64>($($a),*)),
            96 => entry(move || $f::<96>($($a),*)),
            128 => entry(move || $f::<128>($($a),*)),
            256 => entry(move || $f::<256>($($a),*)),
            512 => entry(move || $f::<512>($($a),*)),
            1024 => entry(move || $f::<1024>($($a),*)),
            n => entry(move || Err(bad_size(n as u64))),
        }
    };
}

type Hm<const N: usize> = HashMap<u64, [u8; N]>;
type Bt<const N: usize> = BTreeMap<u64, [u8; N]>;

fn hm<const N: usize>(header: u64) -> Hm<N> {
    bytemuck::cast(header)
}
fn bt<const N: usize>(header: u64) -> Bt<N> {
    bytemuck::cast(header)
}

/// A copy of the `N` bytes at `p`; `PISCES_EINVAL` for NULL.
///
/// # Safety
/// `p` is NULL or valid for reads of `N` bytes, unchanged during the call.
unsafe fn value_in<const N: usize>(p: *const c_void) -> Result<[u8; N], Fail> {
    if p.is_null() {
        return Err(Fail::new(PISCES_EINVAL, "value is NULL"));
    }
    let mut v = [0u8; N];
    // SAFETY: `p` is not NULL, so valid for reads of `N` bytes (contract); `v` is a
    // fresh local array of `N` bytes, which cannot overlap them.
    unsafe { std::ptr::copy_nonoverlapping(p.cast::<u8>(), v.as_mut_ptr(), N) };
    Ok(v)
}

/// Copy `v` to `p` (nothing for NULL).
///
/// # Safety
/// `p` is NULL or valid for writes of `N` bytes that do not overlap `v` and that nothing
/// else uses during the call.
unsafe fn value_out<const N: usize>(p: *mut c_void, v: &[u8; N]) {
    if !p.is_null() {
        // SAFETY: `p` is not NULL, so valid for writes of `N` bytes that do not overlap
        // `v` (contract); `v` has `N` readable bytes.
        unsafe { std::ptr::copy_nonoverlapping(v.as_ptr(), p.cast::<u8>(), N) };
    }
}

/// Run a read-only scan, calling the C function for each entry (the transaction is
/// borrowed shared meanwhile: the C function may read, not update or end it).
///
/// # Safety
/// * `tx.handle` is NULL or an open handle that no other thread uses during the call.
/// * `f` is NULL or a function that returns normally on every call (no unwinding, no
///   `longjmp` out of it), and `ctx` is whatever it expects.
unsafe fn iterate<const N: usize>(
    tx: pisces_tx,
    scan: impl Fn(&Tx<'_>, &mut dyn FnMut(&u64, &[u8; N]) -> bool) -> pisces::Result<()>,
    f: pisces_entry_fn,
    ctx: *mut c_void,
) -> Result<(), Fail> {
    let f = f.ok_or_else(|| Fail::new(PISCES_EINVAL, "the entry callback is NULL"))?;
    // SAFETY: `tx.handle` is NULL or an open handle used only by this thread during the
    // call (contract).
    let h = unsafe { current(tx) }?;
    struct Reset<'a>(&'a crate::pisces_handle, bool);
    impl Drop for Reset<'_> {
        fn drop(&mut self) {
            self.0.iterating.set(self.1);
        }
    }
    let _r = Reset(h, h.iterating.replace(true));
    let mut each = |k: &u64, v: &[u8; N]| {
        // SAFETY: `f` returns normally and takes this `ctx` (contract); `v` is an
        // entry's `N` bytes, borrowed from the shared transaction for the call.
        unsafe { f(*k, v.as_ptr().cast(), ctx) == 0 }
    };
    // SAFETY: `tx.handle` as above; the closure runs C code (`f`) with `iterating` set
    // (by `_r`, until this function returns), as `with_tx_ref` requires.
    unsafe { with_tx_ref(tx, |t| Ok(scan(t, &mut each)?)) }
}

// ---------------------------------------------------------------------------------
// Hash map

/// # Safety
/// `tx.handle` is NULL or an open handle that no other thread uses during the call.
unsafe fn hmap_create_n<const N: usize>(tx: pisces_tx, buckets: usize) -> Result<u64, Fail> {
    // SAFETY: `tx.handle` is NULL or an open handle used only by this thread during the
    // call (contract); the closure runs no C code.
    unsafe { with_tx_mut(tx, |t| Ok(Hm::<N>::fixed(t, buckets)?.offset())) }
}

/// The most buckets a hash map can have (`pisces_hmap_create`'s `buckets` is 1 to this).
pub const PISCES_HMAP_MAX_BUCKETS: usize = 8_257_536;
const _: () = assert!(PISCES_HMAP_MAX_BUCKETS == HashMap::<u64, u64>::MAX_BUCKETS);

/// Create an empty hash map with `buckets` chains (1 to `PISCES_HMAP_MAX_BUCKETS`,
/// else `PISCES_ECONFIG`; fixed for its life; about a tenth of the expected entries is
/// a good count) and values of `value_size` bytes; `*out` is its descriptor.
///
/// # Safety
/// * `tx`: its handle is open (not closed since the transaction began) and no other
///   thread uses it during the call; a `tx` whose transaction has ended is refused
///   (`PISCES_ESTALE`).
/// * `out` is NULL (`PISCES_EINVAL`) or points to a writable `pisces_hmap` that no other
///   thread uses during the call and that is not memory the transaction handed out.
/// * This call ends the validity of every pointer the transaction handed out before
///   (`pisces_read`, `pisces_write`, `pisces_hmap_find`): use none of them from here
///   on.
#[no_mangle]
pub unsafe extern "C" fn pisces_hmap_create(
    tx: pisces_tx,
    buckets: usize,
    value_size: usize,
    out: *mut pisces_hmap,
) -> c_int {
    entry(move || {
        // SAFETY: `out` is NULL or a writable `pisces_hmap` used only by this call,
        // outside the transaction's memory (contract).
        let out = unsafe { crate::out_ptr(out, "out") }?;
        // SAFETY: `tx` as `hmap_create_n` requires (contract).
        let header = unsafe { by_size!(value_size, hmap_create_n(tx, buckets)) }?;
        out.write(pisces_hmap {
            header,
            value_size: value_size as u64,
        });
        Ok(())
    })
}

/// # Safety
/// * `tx.handle` is NULL or an open handle that no other thread uses during the call.
/// * `value` is NULL or valid for reads of `N` bytes; `replaced` is NULL or a writable
///   `c_int`; neither is memory the transaction handed out, and no other thread uses
///   them during the call.
unsafe fn hmap_insert_n<const N: usize>(
    tx: pisces_tx,
    m: u64,
    key: u64,
    value: *const c_void,
    replaced: *mut c_int,
) -> Result<(), Fail> {
    // SAFETY: `replaced` is NULL or a writable `c_int` outside the transaction's memory,
    // used only by this call (contract). Checked before the operation, so that a bad
    // pointer fails the call before it changes anything; written after it.
    let replaced = unsafe { crate::opt_out(replaced, "replaced") }?;
    // SAFETY: `value` is NULL or `N` readable bytes (contract).
    let v = unsafe { value_in::<N>(value) }?;
    // SAFETY: `tx.handle` is NULL or an open handle used only by this thread during the
    // call (contract); the closure runs no C code.
    let old = unsafe { with_tx_mut(tx, |t| Ok(hm::<N>(m).insert(t, key, v)?)) }?;
    if let Some(replaced) = replaced {
        replaced.write(c_int::from(old.is_some()));
    }
    Ok(())
}

/// Insert or replace `key` with the `value_size` bytes at `value`; `*replaced` (may be
/// NULL) = 1 if the key was present.
///
/// # Safety
/// * `tx`: its handle is open (not closed since the transaction began) and no other
///   thread uses it during the call; a `tx` whose transaction has ended is refused
///   (`PISCES_ESTALE`).
/// * `value` is NULL (`PISCES_EINVAL`) or valid for reads of `value_size` bytes of the
///   map (`m.value_size`), unchanged during the call.
/// * `replaced` is NULL or points to a writable `int` that no other thread uses during
///   the call.
/// * Neither `value` nor `replaced` is memory the transaction handed out: copy bytes
///   from `pisces_read` / `pisces_write` / `pisces_hmap_find` to a buffer of your own
///   first.
/// * This call ends the validity of every pointer the transaction handed out before
///   (`pisces_read`, `pisces_write`, `pisces_hmap_find`): use none of them from here
///   on.
#[no_mangle]
pub unsafe extern "C" fn pisces_hmap_insert(
    tx: pisces_tx,
    m: pisces_hmap,
    key: u64,
    value: *const c_void,
    replaced: *mut c_int,
) -> c_int {
    // SAFETY: `tx`, `value` and `replaced` as `hmap_insert_n` requires, for `N` the
    // map's value size (contract).
    unsafe {
        entry_by_size!(
            m.value_size,
            hmap_insert_n(tx, m.header, key, value, replaced)
        )
    }
}

/// # Safety
/// * `tx.handle` is NULL or an open handle that no other thread uses during the call.
/// * `out` is NULL or valid for writes of `N` bytes that do not overlap the map's own
///   objects; `found` is NULL or a writable `c_int`; no other thread uses them during
///   the call.
unsafe fn hmap_get_n<const N: usize>(
    tx: pisces_tx,
    m: u64,
    key: u64,
    out: *mut c_void,
    found: *mut c_int,
) -> Result<(), Fail> {
    // SAFETY: `found` is NULL or a writable `c_int` outside the transaction's memory,
    // used only by this call (contract). Checked before the operation, so that a bad
    // pointer fails the call before it changes anything; written after it.
    let found = unsafe { crate::opt_out(found, "found") }?;
    let out = out as usize;
    let get = |t: &Tx<'_>| -> Result<bool, Fail> {
        Ok(match hm::<N>(m).get_ref(t, &key)? {
            Some(v) => {
                // SAFETY: `out` is NULL or `N` writable bytes that do not overlap the
                // map's objects, where `v` lies (contract).
                unsafe { value_out(out as *mut c_void, v) };
                true
            }
            None => false,
        })
    };
    // SAFETY: `tx.handle` is NULL or an open handle used only by this thread during the
    // call (contract); `get` runs no C code.
    let hit = unsafe { with_tx_ref(tx, get) }?;
    if let Some(found) = found {
        found.write(c_int::from(hit));
    }
    Ok(())
}

/// Look `key` up: `*found` (may be NULL) = 1 and the value copied to `out` (may be
/// NULL) if present, else `*found` = 0 (not an error).
///
/// # Safety
/// * `tx`: its handle is open (not closed since the transaction began) and no other
///   thread uses it during the call; a `tx` whose transaction has ended is refused
///   (`PISCES_ESTALE`).
/// * `out` is NULL or valid for writes of `value_size` bytes of the map
///   (`m.value_size`) that do not overlap the map's own objects in the pool; it is not a
///   pointer from `pisces_read` / `pisces_hmap_find` (read only).
/// * `found` is NULL or points to a writable `int`.
/// * No other thread uses `*out` or `*found` during the call.
#[no_mangle]
pub unsafe extern "C" fn pisces_hmap_get(
    tx: pisces_tx,
    m: pisces_hmap,
    key: u64,
    out: *mut c_void,
    found: *mut c_int,
) -> c_int {
    // SAFETY: `tx`, `out` and `found` as `hmap_get_n` requires, for `N` the map's value
    // size (contract).
    unsafe { entry_by_size!(m.value_size, hmap_get_n(tx, m.header, key, out, found)) }
}

/// # Safety
/// * `tx.handle` is NULL or an open handle that no other thread uses during the call.
/// * `value` is NULL or points to a writable `const void *` that no other thread uses
///   during the call.
unsafe fn hmap_find_n<const N: usize>(
    tx: pisces_tx,
    m: u64,
    key: u64,
    value: *mut *const c_void,
) -> Result<(), Fail> {
    // SAFETY: `value` is NULL or a writable `const void *` used only here (contract).
    let value = unsafe { crate::out_ptr(value, "value") }?;
    // SAFETY: `tx.handle` is NULL or an open handle used only by this thread during the
    // call (contract); the closure runs no C code.
    value.write(unsafe {
        with_tx_ref(tx, |t| {
            Ok(hm::<N>(m)
                .get_ref(t, &key)?
                .map_or(std::ptr::null(), |v| v.as_ptr().cast()))
        })
    }?);
    Ok(())
}

/// Look `key` up without copying: `*value` = a pointer to its `value_size` bytes in
/// this transaction's snapshot, or NULL if the key is absent (not an error).
///
/// # Safety
/// * `tx`: its handle is open (not closed since the transaction began) and no other
///   thread uses it during the call; a `tx` whose transaction has ended is refused
///   (`PISCES_ESTALE`).
/// * `value` is NULL (`PISCES_EINVAL`) or points to a writable `const void *` that no
///   other thread uses during the call.
/// * `*value` may be read for `value_size` bytes, never written through, until the next
///   `pisces_write`, `pisces_put`, `pisces_alloc`, `pisces_free` or container update
///   (insert, remove, create, destroy) of the same transaction, or its end (commit,
///   abort, the return of the `pisces_run` callback), whichever comes first — as a
///   pointer from `pisces_read`.
#[no_mangle]
pub unsafe extern "C" fn pisces_hmap_find(
    tx: pisces_tx,
    m: pisces_hmap,
    key: u64,
    value: *mut *const c_void,
) -> c_int {
    // SAFETY: `tx` and `value` as `hmap_find_n` requires (contract).
    unsafe { entry_by_size!(m.value_size, hmap_find_n(tx, m.header, key, value)) }
}

/// # Safety
/// * `tx.handle` is NULL or an open handle that no other thread uses during the call.
/// * `old` is NULL or valid for writes of `N` bytes; `found` is NULL or a writable
///   `c_int`; neither is memory the transaction handed out, and no other thread uses
///   them during the call.
unsafe fn hmap_remove_n<const N: usize>(
    tx: pisces_tx,
    m: u64,
    key: u64,
    old: *mut c_void,
    found: *mut c_int,
) -> Result<(), Fail> {
    // SAFETY: `found` is NULL or a writable `c_int` outside the transaction's memory,
    // used only by this call (contract). Checked before the operation, so that a bad
    // pointer fails the call before it changes anything; written after it.
    let found = unsafe { crate::opt_out(found, "found") }?;
    // SAFETY: `tx.handle` is NULL or an open handle used only by this thread during the
    // call (contract); the closure runs no C code.
    let prev = unsafe { with_tx_mut(tx, |t| Ok(hm::<N>(m).remove(t, &key)?)) }?;
    if let Some(v) = &prev {
        // SAFETY: `old` is NULL or `N` writable bytes used only here (contract); `v` is
        // a local copy, which they cannot overlap.
        unsafe { value_out(old, v) };
    }
    if let Some(found) = found {
        found.write(c_int::from(prev.is_some()));
    }
    Ok(())
}

/// Remove `key`: `*found` (may be NULL) = 1 and the old value copied to `old` (may be
/// NULL) if it was present.
///
/// # Safety
/// * `tx`: its handle is open (not closed since the transaction began) and no other
///   thread uses it during the call; a `tx` whose transaction has ended is refused
///   (`PISCES_ESTALE`).
/// * `old` is NULL or valid for writes of `value_size` bytes of the map
///   (`m.value_size`); `found` is NULL or points to a writable `int`; no other thread
///   uses them during the call.
/// * Neither `old` nor `found` is memory the transaction handed out (`pisces_read`,
///   `pisces_write`, `pisces_hmap_find`).
/// * This call ends the validity of every pointer the transaction handed out before
///   (`pisces_read`, `pisces_write`, `pisces_hmap_find`): use none of them from here
///   on.
#[no_mangle]
pub unsafe extern "C" fn pisces_hmap_remove(
    tx: pisces_tx,
    m: pisces_hmap,
    key: u64,
    old: *mut c_void,
    found: *mut c_int,
) -> c_int {
    // SAFETY: `tx`, `old` and `found` as `hmap_remove_n` requires, for `N` the map's
    // value size (contract).
    unsafe { entry_by_size!(m.value_size, hmap_remove_n(tx, m.header, key, old, found)) }
}

/// # Safety
/// `tx.handle` is NULL or an open handle that no other thread uses during the call.
unsafe fn hmap_len_n<const N: usize>(tx: pisces_tx, m: u64) -> Result<u64, Fail> {
    // SAFETY: `tx.handle` is NULL or an open handle used only by this thread during the
    // call (contract); the closure runs no C code.
    unsafe { with_tx_ref(tx, |t| Ok(hm::<N>(m).len(t)? as u64)) }
}

/// `*len` = the number of entries (counted by walking the map).
///
/// # Safety
/// * `tx`: its handle is open (not closed since the transaction began) and no other
///   thread uses it during the call; a `tx` whose transaction has ended is refused
///   (`PISCES_ESTALE`).
/// * `len` is NULL (`PISCES_EINVAL`) or points to a writable `uint64_t` that no other
///   thread uses during the call; it is not a pointer from `pisces_read` /
///   `pisces_hmap_find` (read only).
#[no_mangle]
pub unsafe extern "C" fn pisces_hmap_len(tx: pisces_tx, m: pisces_hmap, len: *mut u64) -> c_int {
    entry(move || {
        // SAFETY: `len` is NULL or a writable `uint64_t` used only by this call
        // (contract).
        let len = unsafe { crate::out_ptr(len, "len") }?;
        // SAFETY: `tx` as `hmap_len_n` requires (contract).
        len.write(unsafe { by_size!(m.value_size, hmap_len_n(tx, m.header)) }?);
        Ok(())
    })
}

/// # Safety
/// * `tx.handle` is NULL or an open handle that no other thread uses during the call.
/// * `f` is NULL or returns normally on every call (no unwinding, no `longjmp` out of
///   it), and `ctx` is whatever it expects.
unsafe fn hmap_foreach_n<const N: usize>(
    tx: pisces_tx,
    m: u64,
    f: pisces_entry_fn,
    ctx: *mut c_void,
) -> Result<(), Fail> {
    // SAFETY: `tx`, `f` and `ctx` as `iterate` requires (contract).
    unsafe { iterate::<N>(tx, |t, g| hm::<N>(m).for_each(t, |k, v| g(k, v)), f, ctx) }
}

/// Call `fn(key, value, ctx)` for every entry (bucket order) until it returns nonzero.
///
/// # Safety
/// * `tx`: its handle is open (not closed since the transaction began) and no other
///   thread uses it during the call; a `tx` whose transaction has ended is refused
///   (`PISCES_ESTALE`).
/// * `f` is NULL (`PISCES_EINVAL`) or a `pisces_entry_fn` that returns normally on every
///   call: no unwinding (C++ exceptions) and no `longjmp` out of it. `ctx` is passed to
///   it as is; the library never dereferences it.
/// * The `value` given to `f` may be read for `value_size` bytes during that call only,
///   never written through. Inside `f` only reads of `tx` are allowed (others return
///   `PISCES_EBUSY`), so pointers the transaction handed out stay valid across it.
#[no_mangle]
pub unsafe extern "C" fn pisces_hmap_foreach(
    tx: pisces_tx,
    m: pisces_hmap,
    f: pisces_entry_fn,
    ctx: *mut c_void,
) -> c_int {
    // SAFETY: `tx`, `f` and `ctx` as `hmap_foreach_n` requires (contract).
    unsafe { entry_by_size!(m.value_size, hmap_foreach_n(tx, m.header, f, ctx)) }
}

/// # Safety
/// `tx.handle` is NULL or an open handle that no other thread uses during the call.
unsafe fn hmap_destroy_n<const N: usize>(tx: pisces_tx, m: u64) -> Result<(), Fail> {
    // SAFETY: `tx.handle` is NULL or an open handle used only by this thread during the
    // call (contract); the closure runs no C code.
    unsafe { with_tx_mut(tx, |t| Ok(hm::<N>(m).destroy(t)?)) }
}

/// Free the map and all its entries (at commit). The descriptor must not be used again.
///
/// # Safety
/// * `tx`: its handle is open (not closed since the transaction began) and no other
///   thread uses it during the call; a `tx` whose transaction has ended is refused
///   (`PISCES_ESTALE`).
/// * This call ends the validity of every pointer the transaction handed out before
///   (`pisces_read`, `pisces_write`, `pisces_hmap_find`): use none of them from here
///   on.
#[no_mangle]
pub unsafe extern "C" fn pisces_hmap_destroy(tx: pisces_tx, m: pisces_hmap) -> c_int {
    // SAFETY: `tx` as `hmap_destroy_n` requires (contract).
    unsafe { entry_by_size!(m.value_size, hmap_destroy_n(tx, m.header)) }
}

// ---------------------------------------------------------------------------------
// B+-tree

/// # Safety
/// `tx.handle` is NULL or an open handle that no other thread uses during the call.
unsafe fn btree_create_n<const N: usize>(tx: pisces_tx) -> Result<u64, Fail> {
    // SAFETY: `tx.handle` is NULL or an open handle used only by this thread during the
    // call (contract); the closure runs no C code.
    unsafe { with_tx_mut(tx, |t| Ok(Bt::<N>::new(t)?.offset())) }
}

/// Create an empty B+-tree (fanout 16) with values of `value_size` bytes.
///
/// # Safety
/// * `tx`: its handle is open (not closed since the transaction began) and no other
///   thread uses it during the call; a `tx` whose transaction has ended is refused
///   (`PISCES_ESTALE`).
/// * `out` is NULL (`PISCES_EINVAL`) or points to a writable `pisces_btree` that no
///   other thread uses during the call and that is not memory the transaction handed
///   out.
/// * This call ends the validity of every pointer the transaction handed out before
///   (`pisces_read`, `pisces_write`, `pisces_hmap_find`): use none of them from here
///   on.
#[no_mangle]
pub unsafe extern "C" fn pisces_btree_create(
    tx: pisces_tx,
    value_size: usize,
    out: *mut pisces_btree,
) -> c_int {
    entry(move || {
        // SAFETY: `out` is NULL or a writable `pisces_btree` used only by this call,
        // outside the transaction's memory (contract).
        let out = unsafe { crate::out_ptr(out, "out") }?;
        // SAFETY: `tx` as `btree_create_n` requires (contract).
        let header = unsafe { by_size!(value_size, btree_create_n(tx)) }?;
        out.write(pisces_btree {
            header,
            value_size: value_size as u64,
        });
        Ok(())
    })
}

/// # Safety
/// * `tx.handle` is NULL or an open handle that no other thread uses during the call.
/// * `value` is NULL or valid for reads of `N` bytes; `replaced` is NULL or a writable
///   `c_int`; neither is memory the transaction handed out, and no other thread uses
///   them during the call.
unsafe fn btree_insert_n<const N: usize>(
    tx: pisces_tx,
    m: u64,
    key: u64,
    value: *const c_void,
    replaced: *mut c_int,
) -> Result<(), Fail> {
    // SAFETY: `replaced` is NULL or a writable `c_int` outside the transaction's memory,
    // used only by this call (contract). Checked before the operation, so that a bad
    // pointer fails the call before it changes anything; written after it.
    let replaced = unsafe { crate::opt_out(replaced, "replaced") }?;
    // SAFETY: `value` is NULL or `N` readable bytes (contract).
    let v = unsafe { value_in::<N>(value) }?;
    // SAFETY: `tx.handle` is NULL or an open handle used only by this thread during the
    // call (contract); the closure runs no C code.
    let old = unsafe { with_tx_mut(tx, |t| Ok(bt::<N>(m).insert(t, key, v)?)) }?;
    if let Some(replaced) = replaced {
        replaced.write(c_int::from(old.is_some()));
    }
    Ok(())
}

/// Insert or replace `key` with the `value_size` bytes at `value`; `*replaced` (may be
/// NULL) = 1 if the key was present.
///
/// # Safety
/// * `tx`: its handle is open (not closed since the transaction began) and no other
///   thread uses it during the call; a `tx` whose transaction has ended is refused
///   (`PISCES_ESTALE`).
/// * `value` is NULL (`PISCES_EINVAL`) or valid for reads of `value_size` bytes of the
///   tree (`t.value_size`), unchanged during the call.
/// * `replaced` is NULL or points to a writable `int` that no other thread uses during
///   the call.
/// * Neither `value` nor `replaced` is memory the transaction handed out: copy bytes
///   from `pisces_read` / `pisces_write` / `pisces_hmap_find` to a buffer of your own
///   first.
/// * This call ends the validity of every pointer the transaction handed out before
///   (`pisces_read`, `pisces_write`, `pisces_hmap_find`): use none of them from here
///   on.
#[no_mangle]
pub unsafe extern "C" fn pisces_btree_insert(
    tx: pisces_tx,
    t: pisces_btree,
    key: u64,
    value: *const c_void,
    replaced: *mut c_int,
) -> c_int {
    // SAFETY: `tx`, `value` and `replaced` as `btree_insert_n` requires, for `N` the
    // tree's value size (contract).
    unsafe {
        entry_by_size!(
            t.value_size,
            btree_insert_n(tx, t.header, key, value, replaced)
        )
    }
}

/// # Safety
/// * `tx.handle` is NULL or an open handle that no other thread uses during the call.
/// * `out` is NULL or valid for writes of `N` bytes that do not overlap the tree's own
///   objects; `found` is NULL or a writable `c_int`; no other thread uses them during
///   the call.
unsafe fn btree_get_n<const N: usize>(
    tx: pisces_tx,
    m: u64,
    key: u64,
    out: *mut c_void,
    found: *mut c_int,
) -> Result<(), Fail> {
    // SAFETY: `found` is NULL or a writable `c_int` outside the transaction's memory,
    // used only by this call (contract). Checked before the operation, so that a bad
    // pointer fails the call before it changes anything; written after it.
    let found = unsafe { crate::opt_out(found, "found") }?;
    let out = out as usize;
    let get = |t: &Tx<'_>| -> Result<bool, Fail> {
        Ok(match bt::<N>(m).get_ref(t, &key)? {
            Some(v) => {
                // SAFETY: `out` is NULL or `N` writable bytes that do not overlap the
                // tree's objects, where `v` lies (contract).
                unsafe { value_out(out as *mut c_void, v) };
                true
            }
            None => false,
        })
    };
    // SAFETY: `tx.handle` is NULL or an open handle used only by this thread during the
    // call (contract); `get` runs no C code.
    let hit = unsafe { with_tx_ref(tx, get) }?;
    if let Some(found) = found {
        found.write(c_int::from(hit));
    }
    Ok(())
}

/// Look `key` up: `*found` (may be NULL) = 1 and the value copied to `out` (may be
/// NULL) if present, else `*found` = 0 (not an error).
///
/// # Safety
/// * `tx`: its handle is open (not closed since the transaction began) and no other
///   thread uses it during the call; a `tx` whose transaction has ended is refused
///   (`PISCES_ESTALE`).
/// * `out` is NULL or valid for writes of `value_size` bytes of the tree
///   (`t.value_size`) that do not overlap the tree's own objects in the pool; it is not
///   a pointer from `pisces_read` / `pisces_hmap_find` (read only).
/// * `found` is NULL or points to a writable `int`.
/// * No other thread uses `*out` or `*found` during the call.
#[no_mangle]
pub unsafe extern "C" fn pisces_btree_get(
    tx: pisces_tx,
    t: pisces_btree,
    key: u64,
    out: *mut c_void,
    found: *mut c_int,
) -> c_int {
    // SAFETY: `tx`, `out` and `found` as `btree_get_n` requires, for `N` the tree's
    // value size (contract).
    unsafe { entry_by_size!(t.value_size, btree_get_n(tx, t.header, key, out, found)) }
}

/// # Safety
/// * `tx.handle` is NULL or an open handle that no other thread uses during the call.
/// * `old` is NULL or valid for writes of `N` bytes; `found` is NULL or a writable
///   `c_int`; neither is memory the transaction handed out, and no other thread uses
///   them during the call.
unsafe fn btree_remove_n<const N: usize>(
    tx: pisces_tx,
    m: u64,
    key: u64,
    old: *mut c_void,
    found: *mut c_int,
) -> Result<(), Fail> {
    // SAFETY: `found` is NULL or a writable `c_int` outside the transaction's memory,
    // used only by this call (contract). Checked before the operation, so that a bad
    // pointer fails the call before it changes anything; written after it.
    let found = unsafe { crate::opt_out(found, "found") }?;
    // SAFETY: `tx.handle` is NULL or an open handle used only by this thread during the
    // call (contract); the closure runs no C code.
    let prev = unsafe { with_tx_mut(tx, |t| Ok(bt::<N>(m).remove(t, &key)?)) }?;
    if let Some(v) = &prev {
        // SAFETY: `old` is NULL or `N` writable bytes used only here (contract); `v` is
        // a local copy, which they cannot overlap.
        unsafe { value_out(old, v) };
    }
    if let Some(found) = found {
        found.write(c_int::from(prev.is_some()));
    }
    Ok(())
}

/// Remove `key`: `*found` (may be NULL) = 1 and the old value copied to `old` (may be
/// NULL) if it was present.
///
/// # Safety
/// * `tx`: its handle is open (not closed since the transaction began) and no other
///   thread uses it during the call; a `tx` whose transaction has ended is refused
///   (`PISCES_ESTALE`).
/// * `old` is NULL or valid for writes of `value_size` bytes of the tree
///   (`t.value_size`); `found` is NULL or points to a writable `int`; no other thread
///   uses them during the call.
/// * Neither `old` nor `found` is memory the transaction handed out (`pisces_read`,
///   `pisces_write`, `pisces_hmap_find`).
/// * This call ends the validity of every pointer the transaction handed out before
///   (`pisces_read`, `pisces_write`, `pisces_hmap_find`): use none of them from here
///   on.
#[no_mangle]
pub unsafe extern "C" fn pisces_btree_remove(
    tx: pisces_tx,
    t: pisces_btree,
    key: u64,
    old: *mut c_void,
    found: *mut c_int,
) -> c_int {
    // SAFETY: `tx`, `old` and `found` as `btree_remove_n` requires, for `N` the tree's
    // value size (contract).
    unsafe { entry_by_size!(t.value_size, btree_remove_n(tx, t.header, key, old, found)) }
}

/// # Safety
/// `tx.handle` is NULL or an open handle that no other thread uses during the call.
unsafe fn btree_len_n<const N: usize>(tx: pisces_tx, m: u64) -> Result<u64, Fail> {
    // SAFETY: `tx.handle` is NULL or an open handle used only by this thread during the
    // call (contract); the closure runs no C code.
    unsafe { with_tx_ref(tx, |t| Ok(bt::<N>(m).len(t)? as u64)) }
}

/// `*len` = the number of entries.
///
/// # Safety
/// * `tx`: its handle is open (not closed since the transaction began) and no other
///   thread uses it during the call; a `tx` whose transaction has ended is refused
///   (`PISCES_ESTALE`).
/// * `len` is NULL (`PISCES_EINVAL`) or points to a writable `uint64_t` that no other
///   thread uses during the call; it is not a pointer from `pisces_read` /
///   `pisces_hmap_find` (read only).
#[no_mangle]
pub unsafe extern "C" fn pisces_btree_len(tx: pisces_tx, t: pisces_btree, len: *mut u64) -> c_int {
    entry(move || {
        // SAFETY: `len` is NULL or a writable `uint64_t` used only by this call
        // (contract).
        let len = unsafe { crate::out_ptr(len, "len") }?;
        // SAFETY: `tx` as `btree_len_n` requires (contract).
        len.write(unsafe { by_size!(t.value_size, btree_len_n(tx, t.header)) }?);
        Ok(())
    })
}

/// # Safety
/// * `tx.handle` is NULL or an open handle that no other thread uses during the call.
/// * `f` is NULL or returns normally on every call (no unwinding, no `longjmp` out of
///   it), and `ctx` is whatever it expects.
unsafe fn btree_range_n<const N: usize>(
    tx: pisces_tx,
    m: u64,
    lo: u64,
    hi: u64,
    f: pisces_entry_fn,
    ctx: *mut c_void,
) -> Result<(), Fail> {
    // SAFETY: `tx`, `f` and `ctx` as `iterate` requires (contract).
    unsafe {
        iterate::<N>(
            tx,
            |t, g| bt::<N>(m).for_each_in(t, lo..=hi, |k, v| g(k, v)),
            f,
            ctx,
        )
    }
}

/// Call `fn(key, value, ctx)` for the entries with `lo <= key <= hi`, in key order,
/// until it returns nonzero. (0 and UINT64_MAX scan everything.)
///
/// # Safety
/// * `tx`: its handle is open (not closed since the transaction began) and no other
///   thread uses it during the call; a `tx` whose transaction has ended is refused
///   (`PISCES_ESTALE`).
/// * `f` is NULL (`PISCES_EINVAL`) or a `pisces_entry_fn` that returns normally on every
///   call: no unwinding (C++ exceptions) and no `longjmp` out of it. `ctx` is passed to
///   it as is; the library never dereferences it.
/// * The `value` given to `f` may be read for `value_size` bytes during that call only,
///   never written through. Inside `f` only reads of `tx` are allowed (others return
///   `PISCES_EBUSY`), so pointers the transaction handed out stay valid across it.
#[no_mangle]
pub unsafe extern "C" fn pisces_btree_range(
    tx: pisces_tx,
    t: pisces_btree,
    lo: u64,
    hi: u64,
    f: pisces_entry_fn,
    ctx: *mut c_void,
) -> c_int {
    // SAFETY: `tx`, `f` and `ctx` as `btree_range_n` requires (contract).
    unsafe { entry_by_size!(t.value_size, btree_range_n(tx, t.header, lo, hi, f, ctx)) }
}

/// # Safety
/// `tx.handle` is NULL or an open handle that no other thread uses during the call.
unsafe fn btree_destroy_n<const N: usize>(tx: pisces_tx, m: u64) -> Result<(), Fail> {
    // SAFETY: `tx.handle` is NULL or an open handle used only by this thread during the
    // call (contract); the closure runs no C code.
    unsafe { with_tx_mut(tx, |t| Ok(bt::<N>(m).destroy(t)?)) }
}

/// Free the tree and all its entries (at commit). The descriptor must not be used again.
///
/// # Safety
/// * `tx`: its handle is open (not closed since the transaction began) and no other
///   thread uses it during the call; a `tx` whose transaction has ended is refused
///   (`PISCES_ESTALE`).
/// * This call ends the validity of every pointer the transaction handed out before
///   (`pisces_read`, `pisces_write`, `pisces_hmap_find`): use none of them from here
///   on.
#[no_mangle]
pub unsafe extern "C" fn pisces_btree_destroy(tx: pisces_tx, t: pisces_btree) -> c_int {
    // SAFETY: `tx` as `btree_destroy_n` requires (contract).
    unsafe { entry_by_size!(t.value_size, btree_destroy_n(tx, t.header)) }
}
