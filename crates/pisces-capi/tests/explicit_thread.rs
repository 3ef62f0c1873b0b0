//! Explicit transactions of the C interface run on the calling thread: the library's
//! own per-thread nesting registration sees them (a Rust transaction of the same pool
//! on this thread is refused while one is open, allowed after it ends), on every
//! engine of the build, and they are refused on any other thread.

use pisces::{Config, EngineId, Error, PPtr, Pool};
use pisces_capi::*;
use std::ffi::c_void;

#[test]
fn explicit_transactions_run_on_the_calling_thread() {
    let dir = tempfile::tempdir_in("/dev/shm").unwrap();
    for engine in EngineId::ALL.iter().copied().filter(|e| e.available()) {
        let name = engine.name();
        let pool = Pool::create(
            dir.path().join(format!("{name}.pool")),
            Config::default()
                .size(32 << 20)
                .engine(EngineId::from_name(name))
                .max_threads(4)
                .log_bytes_per_thread(256 << 10),
        )
        .unwrap();
        let n: PPtr<u64> = pool.root().unwrap();
        let cp = pool_from_rust(&pool);
        let mut h = std::ptr::null_mut();
        // SAFETY: every pointer passed is a live object of this test or a valid
        // out-pointer; the pool and the handle are closed at the end.
        unsafe {
            assert_eq!(pisces_handle_open(cp, &mut h), PISCES_OK, "{name}");
            let mut tx = std::mem::zeroed::<pisces_tx>();
            assert_eq!(pisces_tx_begin(h, std::ptr::null(), &mut tx), PISCES_OK);
            assert!(pool.in_transaction(), "{name}: not on this thread");
            let r = pool.run(|t| Ok(*t.read(n)?));
            assert!(matches!(r, Err(Error::NestedTransaction)), "{name}: {r:?}");
            let mut w: *mut c_void = std::ptr::null_mut();
            assert_eq!(pisces_write(tx, n.offset(), 8, &mut w), PISCES_OK, "{name}");
            *(w as *mut u64) = 77;
            // Another thread may not use it, end it, or close its handle.
            // (As C would: the value crosses threads as plain bits.)
            let (hp, generation) = (tx.handle as usize, tx.generation);
            let other = std::thread::scope(|s| {
                s.spawn(move || {
                    let tx = pisces_tx {
                        handle: hp as *mut pisces_handle,
                        generation,
                    };
                    let mut p: *const c_void = std::ptr::null();
                    (
                        pisces_read(tx, n.offset(), 8, &mut p),
                        pisces_tx_commit(tx),
                        pisces_handle_close(tx.handle),
                    )
                })
                .join()
                .unwrap()
            });
            assert_eq!(
                other,
                (PISCES_EINVAL, PISCES_EINVAL, PISCES_EINVAL),
                "{name}"
            );
            assert_eq!(pisces_tx_commit(tx), PISCES_OK, "{name}");
            assert!(!pool.in_transaction(), "{name}");
            assert_eq!(pool.run(|t| Ok(*t.read(n)?)).unwrap(), 77, "{name}");
            assert_eq!(pisces_handle_close(h), PISCES_OK);
            assert_eq!(pisces_pool_close(cp), PISCES_OK);
        }
    }
}
