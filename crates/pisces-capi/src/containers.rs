//! The persistent containers through C: a hash map and a B+-tree with `uint64_t` keys
//! and fixed-size byte values.
//!
//! The Rust containers are generic over the key and value types; C picks the value
//! size at run time, so the value is a byte array `[u8; N]` with `N` one of
//! [`PISCES_VALUE_SIZES`] and every operation dispatches on the size recorded in the
//! C handle (`pisces_hmap` / `pisces_btree`, 16 bytes of plain data to keep in a pool
//! object). The container's own header records key and value sizes and is checked on
//! every access, so a handle with the wrong value size fails with `PISCES_EPTR`.

use crate::errors::{entry, Fail, PISCES_EINVAL, PISCES_EVALUESIZE};
use crate::{current, pisces_tx, with_tx_mut, with_tx_ref};
use pisces::{BTreeMap, HashMap, Tx};
use std::ffi::{c_int, c_void};

/// The value sizes the containers support, in bytes.
pub const PISCES_VALUE_SIZES: [usize; 13] =
    [8, 16, 24, 32, 40, 48, 56, 64, 96, 128, 256, 512, 1024];

/// A hash map handle: the map's header offset and its value size. Plain data: store it
/// in a pool object (e.g. the root) and copy it freely. All zero = no map.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct pisces_hmap {
    /// Offset of the map's header object.
    pub header: u64,
    /// Bytes of every value (one of the supported sizes).
    pub value_size: u64,
}

/// A B+-tree handle (keys in order; range scans), like `pisces_hmap`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct pisces_btree {
    /// Offset of the tree's header object.
    pub header: u64,
    /// Bytes of every value (one of the supported sizes).
    pub value_size: u64,
}

/// Called for each entry by foreach / range: return 0 to go on, nonzero to stop.
/// `value` points to `value_size` bytes valid during the call. Inside it only reads
/// of the same transaction are allowed (`pisces_read`, `pisces_get`, lookups);
/// updates fail with `PISCES_EBUSY`.
pub type pisces_entry_fn =
    Option<unsafe extern "C" fn(key: u64, value: *const c_void, ctx: *mut c_void) -> c_int>;

/// 1 if `value_size` is supported by the containers, else 0.
#[no_mangle]
pub extern "C" fn pisces_value_size_supported(value_size: usize) -> c_int {
    std::panic::catch_unwind(|| c_int::from(PISCES_VALUE_SIZES.contains(&value_size))).unwrap_or(0)
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

unsafe fn value_in<const N: usize>(p: *const c_void) -> Result<[u8; N], Fail> {
    if p.is_null() {
        return Err(Fail::new(PISCES_EINVAL, "value is NULL"));
    }
    let mut v = [0u8; N];
    std::ptr::copy_nonoverlapping(p.cast::<u8>(), v.as_mut_ptr(), N);
    Ok(v)
}

unsafe fn value_out<const N: usize>(p: *mut c_void, v: &[u8; N]) {
    if !p.is_null() {
        std::ptr::copy_nonoverlapping(v.as_ptr(), p.cast::<u8>(), N);
    }
}

unsafe fn set_flag(p: *mut c_int, v: bool) {
    if let Some(p) = p.as_mut() {
        *p = c_int::from(v);
    }
}

/// Run a read-only scan, calling the C function for each entry (the transaction is
/// borrowed shared meanwhile: the C function may read, not update or end it).
unsafe fn iterate<const N: usize>(
    tx: pisces_tx,
    scan: impl Fn(&Tx<'_>, &mut dyn FnMut(&u64, &[u8; N]) -> bool) -> pisces::Result<()>,
    f: pisces_entry_fn,
    ctx: *mut c_void,
) -> Result<(), Fail> {
    let f = f.ok_or_else(|| Fail::new(PISCES_EINVAL, "the entry callback is NULL"))?;
    let h = current(tx)?;
    struct Reset<'a>(&'a crate::pisces_handle, bool);
    impl Drop for Reset<'_> {
        fn drop(&mut self) {
            self.0.iterating.set(self.1);
        }
    }
    let _r = Reset(h, h.iterating.replace(true));
    with_tx_ref(tx, |t| {
        Ok(scan(t, &mut |k, v| f(*k, v.as_ptr().cast(), ctx) == 0)?)
    })
}

// ---------------------------------------------------------------------------------
// Hash map

unsafe fn hmap_create_n<const N: usize>(tx: pisces_tx, buckets: usize) -> Result<u64, Fail> {
    with_tx_mut(tx, |t| Ok(Hm::<N>::create(t, buckets)?.offset()))
}

/// Create an empty hash map with `buckets` chains (fixed for its life; about a tenth
/// of the expected entries is a good count) and values of `value_size` bytes.
#[no_mangle]
pub unsafe extern "C" fn pisces_hmap_create(
    tx: pisces_tx,
    buckets: usize,
    value_size: usize,
    out: *mut pisces_hmap,
) -> c_int {
    entry(move || {
        let out = crate::out_ptr(out, "out")?;
        let header = by_size!(value_size, hmap_create_n(tx, buckets))?;
        *out = pisces_hmap {
            header,
            value_size: value_size as u64,
        };
        Ok(())
    })
}

unsafe fn hmap_insert_n<const N: usize>(
    tx: pisces_tx,
    m: u64,
    key: u64,
    value: *const c_void,
    replaced: *mut c_int,
) -> Result<(), Fail> {
    let v = value_in::<N>(value)?;
    let old = with_tx_mut(tx, |t| Ok(hm::<N>(m).insert(t, key, v)?))?;
    set_flag(replaced, old.is_some());
    Ok(())
}

/// Insert or replace `key` with the `value_size` bytes at `value`; `*replaced` (may be
/// NULL) = 1 if the key was present.
#[no_mangle]
pub unsafe extern "C" fn pisces_hmap_insert(
    tx: pisces_tx,
    m: pisces_hmap,
    key: u64,
    value: *const c_void,
    replaced: *mut c_int,
) -> c_int {
    entry_by_size!(
        m.value_size,
        hmap_insert_n(tx, m.header, key, value, replaced)
    )
}

unsafe fn hmap_get_n<const N: usize>(
    tx: pisces_tx,
    m: u64,
    key: u64,
    out: *mut c_void,
    found: *mut c_int,
) -> Result<(), Fail> {
    let out = out as usize;
    let hit = with_tx_ref(tx, |t| {
        Ok(match hm::<N>(m).get_ref(t, &key)? {
            Some(v) => {
                value_out(out as *mut c_void, v);
                true
            }
            None => false,
        })
    })?;
    set_flag(found, hit);
    Ok(())
}

/// Look `key` up: `*found` (may be NULL) = 1 and the value copied to `out` (may be
/// NULL) if present, else `*found` = 0 (not an error).
#[no_mangle]
pub unsafe extern "C" fn pisces_hmap_get(
    tx: pisces_tx,
    m: pisces_hmap,
    key: u64,
    out: *mut c_void,
    found: *mut c_int,
) -> c_int {
    entry_by_size!(m.value_size, hmap_get_n(tx, m.header, key, out, found))
}

unsafe fn hmap_find_n<const N: usize>(
    tx: pisces_tx,
    m: u64,
    key: u64,
    value: *mut *const c_void,
) -> Result<(), Fail> {
    let value = crate::out_ptr(value, "value")?;
    *value = with_tx_ref(tx, |t| {
        Ok(hm::<N>(m)
            .get_ref(t, &key)?
            .map_or(std::ptr::null(), |v| v.as_ptr().cast()))
    })?;
    Ok(())
}

/// Look `key` up without copying: `*value` = a pointer to its `value_size` bytes in
/// this transaction's snapshot, or NULL if the key is absent (not an error).
///
/// Lifetime: as for `pisces_read` — valid until the next `pisces_write`,
/// `pisces_put`, `pisces_alloc`, `pisces_free` or container update of the same
/// transaction, or its end; read only.
#[no_mangle]
pub unsafe extern "C" fn pisces_hmap_find(
    tx: pisces_tx,
    m: pisces_hmap,
    key: u64,
    value: *mut *const c_void,
) -> c_int {
    entry_by_size!(m.value_size, hmap_find_n(tx, m.header, key, value))
}

unsafe fn hmap_remove_n<const N: usize>(
    tx: pisces_tx,
    m: u64,
    key: u64,
    old: *mut c_void,
    found: *mut c_int,
) -> Result<(), Fail> {
    let prev = with_tx_mut(tx, |t| Ok(hm::<N>(m).remove(t, &key)?))?;
    if let Some(v) = &prev {
        value_out(old, v);
    }
    set_flag(found, prev.is_some());
    Ok(())
}

/// Remove `key`: `*found` (may be NULL) = 1 and the old value copied to `old` (may be
/// NULL) if it was present.
#[no_mangle]
pub unsafe extern "C" fn pisces_hmap_remove(
    tx: pisces_tx,
    m: pisces_hmap,
    key: u64,
    old: *mut c_void,
    found: *mut c_int,
) -> c_int {
    entry_by_size!(m.value_size, hmap_remove_n(tx, m.header, key, old, found))
}

unsafe fn hmap_len_n<const N: usize>(tx: pisces_tx, m: u64) -> Result<u64, Fail> {
    with_tx_ref(tx, |t| Ok(hm::<N>(m).len(t)? as u64))
}

/// `*len` = the number of entries (counted by walking the map).
#[no_mangle]
pub unsafe extern "C" fn pisces_hmap_len(tx: pisces_tx, m: pisces_hmap, len: *mut u64) -> c_int {
    entry(move || {
        let len = crate::out_ptr(len, "len")?;
        *len = by_size!(m.value_size, hmap_len_n(tx, m.header))?;
        Ok(())
    })
}

unsafe fn hmap_foreach_n<const N: usize>(
    tx: pisces_tx,
    m: u64,
    f: pisces_entry_fn,
    ctx: *mut c_void,
) -> Result<(), Fail> {
    iterate::<N>(tx, |t, g| hm::<N>(m).for_each(t, |k, v| g(k, v)), f, ctx)
}

/// Call `fn(key, value, ctx)` for every entry (bucket order) until it returns nonzero.
#[no_mangle]
pub unsafe extern "C" fn pisces_hmap_foreach(
    tx: pisces_tx,
    m: pisces_hmap,
    f: pisces_entry_fn,
    ctx: *mut c_void,
) -> c_int {
    entry_by_size!(m.value_size, hmap_foreach_n(tx, m.header, f, ctx))
}

unsafe fn hmap_destroy_n<const N: usize>(tx: pisces_tx, m: u64) -> Result<(), Fail> {
    with_tx_mut(tx, |t| Ok(hm::<N>(m).destroy(t)?))
}

/// Free the map and all its entries (at commit). The handle must not be used again.
#[no_mangle]
pub unsafe extern "C" fn pisces_hmap_destroy(tx: pisces_tx, m: pisces_hmap) -> c_int {
    entry_by_size!(m.value_size, hmap_destroy_n(tx, m.header))
}

// ---------------------------------------------------------------------------------
// B+-tree

unsafe fn btree_create_n<const N: usize>(tx: pisces_tx) -> Result<u64, Fail> {
    with_tx_mut(tx, |t| Ok(Bt::<N>::create(t)?.offset()))
}

/// Create an empty B+-tree (fanout 16) with values of `value_size` bytes.
#[no_mangle]
pub unsafe extern "C" fn pisces_btree_create(
    tx: pisces_tx,
    value_size: usize,
    out: *mut pisces_btree,
) -> c_int {
    entry(move || {
        let out = crate::out_ptr(out, "out")?;
        let header = by_size!(value_size, btree_create_n(tx))?;
        *out = pisces_btree {
            header,
            value_size: value_size as u64,
        };
        Ok(())
    })
}

unsafe fn btree_insert_n<const N: usize>(
    tx: pisces_tx,
    m: u64,
    key: u64,
    value: *const c_void,
    replaced: *mut c_int,
) -> Result<(), Fail> {
    let v = value_in::<N>(value)?;
    let old = with_tx_mut(tx, |t| Ok(bt::<N>(m).insert(t, key, v)?))?;
    set_flag(replaced, old.is_some());
    Ok(())
}

/// Insert or replace `key` (see `pisces_hmap_insert`).
#[no_mangle]
pub unsafe extern "C" fn pisces_btree_insert(
    tx: pisces_tx,
    t: pisces_btree,
    key: u64,
    value: *const c_void,
    replaced: *mut c_int,
) -> c_int {
    entry_by_size!(
        t.value_size,
        btree_insert_n(tx, t.header, key, value, replaced)
    )
}

unsafe fn btree_get_n<const N: usize>(
    tx: pisces_tx,
    m: u64,
    key: u64,
    out: *mut c_void,
    found: *mut c_int,
) -> Result<(), Fail> {
    let out = out as usize;
    let hit = with_tx_ref(tx, |t| {
        Ok(match bt::<N>(m).get_ref(t, &key)? {
            Some(v) => {
                value_out(out as *mut c_void, v);
                true
            }
            None => false,
        })
    })?;
    set_flag(found, hit);
    Ok(())
}

/// Look `key` up (see `pisces_hmap_get`).
#[no_mangle]
pub unsafe extern "C" fn pisces_btree_get(
    tx: pisces_tx,
    t: pisces_btree,
    key: u64,
    out: *mut c_void,
    found: *mut c_int,
) -> c_int {
    entry_by_size!(t.value_size, btree_get_n(tx, t.header, key, out, found))
}

unsafe fn btree_remove_n<const N: usize>(
    tx: pisces_tx,
    m: u64,
    key: u64,
    old: *mut c_void,
    found: *mut c_int,
) -> Result<(), Fail> {
    let prev = with_tx_mut(tx, |t| Ok(bt::<N>(m).remove(t, &key)?))?;
    if let Some(v) = &prev {
        value_out(old, v);
    }
    set_flag(found, prev.is_some());
    Ok(())
}

/// Remove `key` (see `pisces_hmap_remove`).
#[no_mangle]
pub unsafe extern "C" fn pisces_btree_remove(
    tx: pisces_tx,
    t: pisces_btree,
    key: u64,
    old: *mut c_void,
    found: *mut c_int,
) -> c_int {
    entry_by_size!(t.value_size, btree_remove_n(tx, t.header, key, old, found))
}

unsafe fn btree_len_n<const N: usize>(tx: pisces_tx, m: u64) -> Result<u64, Fail> {
    with_tx_ref(tx, |t| Ok(bt::<N>(m).len(t)? as u64))
}

/// `*len` = the number of entries.
#[no_mangle]
pub unsafe extern "C" fn pisces_btree_len(tx: pisces_tx, t: pisces_btree, len: *mut u64) -> c_int {
    entry(move || {
        let len = crate::out_ptr(len, "len")?;
        *len = by_size!(t.value_size, btree_len_n(tx, t.header))?;
        Ok(())
    })
}

unsafe fn btree_range_n<const N: usize>(
    tx: pisces_tx,
    m: u64,
    lo: u64,
    hi: u64,
    f: pisces_entry_fn,
    ctx: *mut c_void,
) -> Result<(), Fail> {
    iterate::<N>(
        tx,
        |t, g| bt::<N>(m).range(t, lo..=hi, |k, v| g(k, v)),
        f,
        ctx,
    )
}

/// Call `fn(key, value, ctx)` for the entries with `lo <= key <= hi`, in key order,
/// until it returns nonzero. (0 and UINT64_MAX scan everything.)
#[no_mangle]
pub unsafe extern "C" fn pisces_btree_range(
    tx: pisces_tx,
    t: pisces_btree,
    lo: u64,
    hi: u64,
    f: pisces_entry_fn,
    ctx: *mut c_void,
) -> c_int {
    entry_by_size!(t.value_size, btree_range_n(tx, t.header, lo, hi, f, ctx))
}

unsafe fn btree_destroy_n<const N: usize>(tx: pisces_tx, m: u64) -> Result<(), Fail> {
    with_tx_mut(tx, |t| Ok(bt::<N>(m).destroy(t)?))
}

/// Free the tree and all its entries (at commit).
#[no_mangle]
pub unsafe extern "C" fn pisces_btree_destroy(tx: pisces_tx, t: pisces_btree) -> c_int {
    entry_by_size!(t.value_size, btree_destroy_n(tx, t.header))
}
