//! Out-parameters of the C ABI: they may point to uninitialised memory (C callers pass
//! the address of a variable they have not set), which the ABI only writes; a pointer
//! not aligned for its type is refused with `PISCES_EINVAL` and left unwritten.

use pisces_capi::*;
use std::ffi::CString;
use std::mem::MaybeUninit;

#[test]
fn out_parameters_take_uninitialised_memory_and_refuse_misaligned_pointers() {
    let mut cfg = MaybeUninit::<pisces_config>::uninit();
    // SAFETY: `cfg` is writable memory for a `pisces_config`, of this frame.
    assert_eq!(unsafe { pisces_config_init(cfg.as_mut_ptr()) }, PISCES_OK);
    // SAFETY: `pisces_config_init` returned OK: it wrote the whole configuration.
    let mut cfg = unsafe { cfg.assume_init() };
    cfg.size = 64 << 20;
    let dir = tempfile::tempdir_in("/dev/shm").unwrap();
    let path = CString::new(dir.path().join("pool").to_str().unwrap()).unwrap();
    let mut pool = MaybeUninit::<*mut pisces_pool>::uninit();
    // SAFETY: `path` is a nul-terminated string, `cfg` an initialised configuration
    // with NULL strings, `pool` writable memory for the out-parameter.
    let rc = unsafe { pisces_pool_create(path.as_ptr(), &cfg, pool.as_mut_ptr()) };
    assert_eq!(rc, PISCES_OK);
    // SAFETY: written by the successful call.
    let pool = unsafe { pool.assume_init() };

    // Eight bytes inside a buffer, one byte past an 8-byte boundary.
    let mut buf = [0xAAu64; 3];
    let misaligned = buf.as_mut_ptr().cast::<u8>().wrapping_add(9).cast::<u64>();
    // SAFETY: `pool` is open; `misaligned` lies inside `buf` (bytes 9..17), writable
    // memory of this frame; the call must refuse it for its alignment.
    let rc = unsafe { pisces_root(pool, 64, misaligned) };
    assert_eq!(rc, PISCES_EINVAL);
    assert_eq!(buf, [0xAAu64; 3], "a refused out-parameter was written");

    let mut off = MaybeUninit::<u64>::uninit();
    // SAFETY: `pool` is open; `off` is writable memory for a `uint64_t`.
    let rc = unsafe { pisces_root(pool, 64, off.as_mut_ptr()) };
    assert_eq!(rc, PISCES_OK);
    // SAFETY: written by the successful call.
    assert_ne!(unsafe { off.assume_init() }, 0);

    // SAFETY: `pool` is open and not used after this call.
    assert_eq!(unsafe { pisces_pool_close(pool) }, PISCES_OK);
}
