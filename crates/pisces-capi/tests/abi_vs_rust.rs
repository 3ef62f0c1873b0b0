//! The same hash-map workload through the C ABI (`pisces_run` + `pisces_hmap_*`,
//! called as `extern "C"` functions) and directly in Rust, on one thread, same engine,
//! same process; prints the time ratio (no assertion: timing is noisy, especially on
//! a shared machine). Also times the ABI's explicit transactions (begin, the same
//! accesses, commit: on the calling thread, like the callback's).
//!
//! `cargo test --release -p pisces-capi --test abi_vs_rust -- --nocapture`

use pisces::{Config, HashMap, PPtr, Pool};
use pisces_capi::*;
use std::ffi::{c_int, c_void, CString};
use std::time::{Duration, Instant};

const KEYS: u64 = 20_000;
const PER_TX: u64 = 10;
type V = [u8; 16];

fn value(k: u64) -> V {
    let mut v = [0u8; 16];
    v[..8].copy_from_slice(&k.to_le_bytes());
    v
}

fn rust_run(path: &std::path::Path) -> Duration {
    let pool = Pool::create(path, Config::default().size(64 << 20)).unwrap();
    let root: PPtr<HashMap<u64, V>> = pool.root().unwrap();
    let mut h = pool.handle().unwrap();
    let m = h
        .run(|tx| {
            let m = HashMap::fixed(tx, 2048)?;
            *tx.write(root)? = m;
            Ok(m)
        })
        .unwrap();
    let t = Instant::now();
    for b in 0..KEYS / PER_TX {
        h.run(|tx| {
            for k in b * PER_TX..(b + 1) * PER_TX {
                m.insert(tx, k, value(k))?;
            }
            Ok(())
        })
        .unwrap();
    }
    for b in 0..KEYS / PER_TX {
        let sum = h
            .run(|tx| {
                let mut s = 0u64;
                for k in b * PER_TX..(b + 1) * PER_TX {
                    s += m.get(tx, &k)?.map_or(0, |v| v[0] as u64);
                }
                Ok(s)
            })
            .unwrap();
        assert!(sum > 0 || b == 0);
    }
    t.elapsed()
}

struct Batch {
    map: pisces_hmap,
    first: u64,
    sum: u64,
}

/// Insert keys `first .. first + PER_TX` of the batch at `ctx`.
///
/// # Safety
/// `ctx` points to a `Batch` that nothing else uses during the call, and `tx` is a
/// running transaction of this thread whose handle is open.
unsafe extern "C" fn insert_batch(tx: pisces_tx, ctx: *mut c_void) -> c_int {
    // SAFETY: `ctx` is an exclusive `Batch` for the call (contract).
    let b = unsafe { &mut *(ctx as *mut Batch) };
    for k in b.first..b.first + PER_TX {
        let v = value(k);
        // SAFETY: `tx` is running on this thread with its handle open (contract); `v` has
        // the map's 16 value bytes, in this frame; `replaced` is NULL.
        let rc =
            unsafe { pisces_hmap_insert(tx, b.map, k, v.as_ptr().cast(), std::ptr::null_mut()) };
        if rc != PISCES_OK {
            return rc;
        }
    }
    PISCES_OK
}

/// Look up keys `first .. first + PER_TX` of the batch at `ctx`, summing a byte of each.
///
/// # Safety
/// As for [`insert_batch`].
unsafe extern "C" fn get_batch(tx: pisces_tx, ctx: *mut c_void) -> c_int {
    // SAFETY: `ctx` is an exclusive `Batch` for the call (contract).
    let b = unsafe { &mut *(ctx as *mut Batch) };
    b.sum = 0;
    for k in b.first..b.first + PER_TX {
        let mut v = [0u8; 16];
        let mut found = 0;
        // SAFETY: `tx` is running on this thread with its handle open (contract); `v`
        // (16 bytes, the map's value size) and `found` are locals of this frame.
        let rc = unsafe { pisces_hmap_get(tx, b.map, k, v.as_mut_ptr().cast(), &mut found) };
        if rc != PISCES_OK {
            return rc;
        }
        b.sum += v[0] as u64;
    }
    PISCES_OK
}

/// Create the batch's map (16-byte values).
///
/// # Safety
/// As for [`insert_batch`].
unsafe extern "C" fn create_map(tx: pisces_tx, ctx: *mut c_void) -> c_int {
    // SAFETY: `ctx` is an exclusive `Batch` for the call (contract).
    let b = unsafe { &mut *(ctx as *mut Batch) };
    // SAFETY: `tx` is running on this thread with its handle open (contract); `b.map` is
    // a writable `pisces_hmap` outside the pool.
    unsafe { pisces_hmap_create(tx, 2048, 16, &mut b.map) }
}

fn open_abi(path: &std::path::Path) -> (*mut pisces_pool, *mut pisces_handle, pisces_hmap) {
    // SAFETY: all zero is a valid `pisces_config` (integers and NULL pointers).
    let mut cfg: pisces_config = unsafe { std::mem::zeroed() };
    // SAFETY: `cfg` is a writable `pisces_config` of this frame.
    assert_eq!(unsafe { pisces_config_init(&mut cfg) }, 0);
    cfg.size = 64 << 20;
    let p = CString::new(path.to_str().unwrap()).unwrap();
    let mut pool = std::ptr::null_mut();
    // SAFETY: `p` is a nul-terminated string, `cfg` an initialized configuration with
    // NULL strings, `pool` a writable out-parameter.
    let rc = unsafe { pisces_pool_create(p.as_ptr(), &cfg, &mut pool) };
    assert_eq!(rc, 0);
    let mut h = std::ptr::null_mut();
    // SAFETY: `pool` is open; `h` is a writable out-parameter.
    assert_eq!(unsafe { pisces_handle_open(pool, &mut h) }, 0);
    let mut b = Batch {
        map: pisces_hmap::default(),
        first: 0,
        sum: 0,
    };
    // SAFETY: `h` is open and used only by this thread; `create_map` returns normally
    // and gets `b`, which nothing else uses during the call.
    let rc = unsafe { pisces_run(h, Some(create_map), (&mut b as *mut Batch).cast()) };
    assert_eq!(rc, 0);
    (pool, h, b.map)
}

fn abi_run(path: &std::path::Path) -> Duration {
    let (pool, h, map) = open_abi(path);
    let mut b = Batch {
        map,
        first: 0,
        sum: 0,
    };
    let t = Instant::now();
    for i in 0..KEYS / PER_TX {
        b.first = i * PER_TX;
        // SAFETY: as in `open_abi`, with `insert_batch`.
        let rc = unsafe { pisces_run(h, Some(insert_batch), (&mut b as *mut Batch).cast()) };
        assert_eq!(rc, 0);
    }
    for i in 0..KEYS / PER_TX {
        b.first = i * PER_TX;
        // SAFETY: as in `open_abi`, with `get_batch`.
        let rc = unsafe { pisces_run(h, Some(get_batch), (&mut b as *mut Batch).cast()) };
        assert_eq!(rc, 0);
        assert!(b.sum > 0 || i == 0);
    }
    let d = t.elapsed();
    // SAFETY: `h` and `pool` are open, no transaction runs, and neither is used again.
    unsafe {
        pisces_handle_close(h);
        pisces_pool_close(pool);
    }
    d
}

fn abi_explicit_run(path: &std::path::Path) -> Duration {
    let (pool, h, map) = open_abi(path);
    let mut b = Batch {
        map,
        first: 0,
        sum: 0,
    };
    let t = Instant::now();
    for phase in [insert_batch as unsafe extern "C" fn(_, _) -> _, get_batch] {
        for i in 0..KEYS / PER_TX {
            b.first = i * PER_TX;
            let mut tx = pisces_tx {
                handle: std::ptr::null_mut(),
                generation: 0,
            };
            // SAFETY: `h` is open and used only by this thread, idle between
            // transactions; `tx` is a writable out-parameter. `phase` gets the running
            // transaction (begun on this thread) and `b`, which nothing else uses
            // meanwhile; the transaction is committed on this thread.
            unsafe {
                assert_eq!(pisces_tx_begin(h, std::ptr::null(), &mut tx), 0);
                assert_eq!(phase(tx, (&mut b as *mut Batch).cast()), 0);
                assert_eq!(pisces_tx_commit(tx), 0);
            }
        }
    }
    let d = t.elapsed();
    // SAFETY: `h` and `pool` are open, no transaction runs, and neither is used again.
    unsafe {
        pisces_handle_close(h);
        pisces_pool_close(pool);
    }
    d
}

#[test]
fn hashmap_workload_abi_vs_rust() {
    let dir = tempfile::tempdir_in("/dev/shm").unwrap();
    let (mut rust, mut abi, mut explicit) = (Duration::MAX, Duration::MAX, Duration::MAX);
    // Alternate (and swap who goes first) and keep each side's best round: less
    // sensitive to other load on the machine.
    const ROUNDS: usize = 5;
    for round in 0..ROUNDS {
        let r = || rust_run(&dir.path().join(format!("rust{round}.pool")));
        let a = || abi_run(&dir.path().join(format!("abi{round}.pool")));
        let (tr, ta) = if round % 2 == 0 {
            let tr = r();
            (tr, a())
        } else {
            let ta = a();
            (r(), ta)
        };
        rust = rust.min(tr);
        abi = abi.min(ta);
        explicit = explicit.min(abi_explicit_run(
            &dir.path().join(format!("ex{round}.pool")),
        ));
    }
    let ops = (2 * KEYS) as f64;
    println!(
        "hash map, {KEYS} inserts + {KEYS} lookups, {PER_TX} per transaction, engine pisces, 1 thread (best of {ROUNDS}):"
    );
    println!(
        "  Rust API                 {:>8.1} ms  {:>6.0} ns/op",
        rust.as_secs_f64() * 1e3,
        rust.as_secs_f64() * 1e9 / ops
    );
    println!(
        "  C ABI, pisces_run        {:>8.1} ms  {:>6.0} ns/op",
        abi.as_secs_f64() * 1e3,
        abi.as_secs_f64() * 1e9 / ops
    );
    println!(
        "  C ABI, explicit tx       {:>8.1} ms  {:>6.0} ns/op",
        explicit.as_secs_f64() * 1e3,
        explicit.as_secs_f64() * 1e9 / ops
    );
    println!(
        "  ratio ABI(pisces_run) / Rust = {:.2}",
        abi.as_secs_f64() / rust.as_secs_f64()
    );
    println!(
        "  ratio ABI(explicit)   / Rust = {:.2}",
        explicit.as_secs_f64() / rust.as_secs_f64()
    );
}
