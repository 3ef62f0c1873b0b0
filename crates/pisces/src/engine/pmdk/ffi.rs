//! The part of libpmemobj's C API (PMDK 1.x, `libpmemobj.h`) the `pmdk` engine uses.
//!
//! Only the function API that needs no `setjmp` (`pmemobj_tx_begin` with a null
//! `jmp_buf`, the `x`-variants with `POBJ_FLAG_TX_NO_ABORT` so that a failing call
//! returns an error instead of aborting the transaction behind our back).

use std::os::raw::{c_char, c_int, c_void};

/// `PMEMobjpool` (opaque).
#[repr(C)]
pub(super) struct PmemObjPool {
    _private: [u8; 0],
}

/// `PMEMoid`: pool id and offset of an object inside its pool.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct PmemOid {
    pub pool_uuid_lo: u64,
    pub off: u64,
}

impl PmemOid {
    pub(super) fn is_null(self) -> bool {
        self.off == 0
    }
}

/// `TX_PARAM_NONE`: ends the variadic parameter list of `pmemobj_tx_begin`.
pub(super) const TX_PARAM_NONE: c_int = 0;
/// `POBJ_FLAG_ZERO` (`POBJ_XALLOC_ZERO`).
pub(super) const POBJ_FLAG_ZERO: u64 = 1 << 0;
/// `POBJ_FLAG_TX_NO_ABORT` (`POBJ_XADD_NO_ABORT`, `POBJ_XALLOC_NO_ABORT`, ...).
pub(super) const POBJ_FLAG_TX_NO_ABORT: u64 = 1 << 4;
/// `TX_STAGE_WORK`.
pub(super) const TX_STAGE_WORK: c_int = 1;

#[link(name = "pmemobj")]
unsafe extern "C" {
    pub(super) fn pmemobj_create(
        path: *const c_char,
        layout: *const c_char,
        poolsize: usize,
        mode: libc::mode_t,
    ) -> *mut PmemObjPool;
    pub(super) fn pmemobj_open(path: *const c_char, layout: *const c_char) -> *mut PmemObjPool;
    pub(super) fn pmemobj_close(pop: *mut PmemObjPool);
    pub(super) fn pmemobj_errormsg() -> *const c_char;
    pub(super) fn pmemobj_root(pop: *mut PmemObjPool, size: usize) -> PmemOid;
    pub(super) fn pmemobj_first(pop: *mut PmemObjPool) -> PmemOid;
    pub(super) fn pmemobj_next(oid: PmemOid) -> PmemOid;
    pub(super) fn pmemobj_type_num(oid: PmemOid) -> u64;
    pub(super) fn pmemobj_alloc_usable_size(oid: PmemOid) -> usize;

    pub(super) fn pmemobj_tx_begin(pop: *mut PmemObjPool, env: *mut c_void, ...) -> c_int;
    pub(super) fn pmemobj_tx_stage() -> c_int;
    pub(super) fn pmemobj_tx_xadd_range_direct(
        ptr: *const c_void,
        size: usize,
        flags: u64,
    ) -> c_int;
    pub(super) fn pmemobj_tx_xalloc(size: usize, type_num: u64, flags: u64) -> PmemOid;
    pub(super) fn pmemobj_tx_xfree(oid: PmemOid, flags: u64) -> c_int;
    pub(super) fn pmemobj_tx_commit();
    pub(super) fn pmemobj_tx_abort(errnum: c_int);
    pub(super) fn pmemobj_tx_end() -> c_int;
}
