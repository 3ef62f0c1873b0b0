//! The `capi` data set: the hash-table operations of [`super::hash`] issued from C
//! through the C interface (`pisces-capi`, `include/pisces.h`), or the same operations
//! in Rust, so that the two can be measured on the same engine in the same run.
//!
//! The table is [`HashBench`]'s (preloaded from Rust); the C map handle `pisces_hmap`
//! names the same table, because the C containers are the Rust ones with byte-array
//! values (`HashMap<u64, [u8; 64]>`). At build time the data set wraps the pool as a
//! `pisces_pool` and opens one C thread handle (`pisces_handle`) per worker. An
//! operation is then either [`HashBench`]'s own (`via_c == false`) or one call of
//! `pisces_bench_hash_op` (`c/capi_hash.c`, compiled by the crate's build script),
//! which runs the operation as one `pisces_run` transaction whose C callback calls
//! `pisces_hmap_remove` / `pisces_hmap_insert` / `pisces_hmap_find` (the value in
//! place, as the Rust side's `get_ref`). The key is drawn in Rust by the same generator
//! either way, and the harness times each call the same way.
//!
//! Both variants hold the same thread slots (per worker a Rust handle and a C handle,
//! one of the two idle), so the engine runs with the same pool configuration; the
//! ratio of their throughputs is the cost of the C interface. A worker's C handle is
//! closed on the worker's thread when it finishes ([`DataSet::worker_done`]), so the
//! write-backs still pending in its group-commit batch are counted with its work, as
//! for a Rust handle.

use crate::workloads::hash::HashBench;
use crate::workloads::OpRng;
use crate::workloads::{DataSet, Sizes};
use pisces::{Error, Pool, ThreadHandle, TxStats};
use pisces_capi::{
    pisces_errmsg, pisces_handle, pisces_handle_close, pisces_handle_open, pisces_handle_stats,
    pisces_hmap, pisces_pool, pisces_pool_close, pool_from_rust, PISCES_OK,
};
use std::ffi::{c_int, c_void, CStr};
use std::hint::black_box;
use std::sync::atomic::{AtomicPtr, Ordering};

/// `struct op_ctx` of `c/capi_hash.c`: one operation's arguments and results.
#[repr(C)]
struct OpCtx {
    map: pisces_hmap,
    key: u64,
    /// Bytes the operation changed.
    changed: u64,
    /// The last byte of the value looked up (0 when absent).
    seen: u8,
}

extern "C" {
    /// `c/capi_hash.c`: one update (`update != 0`) or lookup of `c.key` in `c.map` as
    /// one `pisces_run` transaction on `h` (a `pisces_handle *`, opaque to C); returns
    /// its code and fills in `c.changed` and `c.seen`.
    fn pisces_bench_hash_op(h: *mut c_void, c: *mut OpCtx, update: c_int) -> c_int;
}

/// The hash table driven through the C interface or from Rust (see the module docs).
pub struct CapiHashBench {
    rust: HashBench,
    map: pisces_hmap,
    via_c: bool,
    /// The pool as C sees it (closed on drop, after the handles).
    pool: AtomicPtr<pisces_pool>,
    /// Worker `i`'s C handle; null once closed. Only worker `i` uses and closes it while
    /// the workers run, so the atomics carry no data between threads (the pointers are
    /// stored before the workers are spawned, which orders them); `Relaxed` suffices.
    handles: Vec<AtomicPtr<pisces_handle>>,
}

/// The message of the last failed C call on this thread, as a library error.
fn c_error(what: &str, rc: c_int) -> Error {
    // SAFETY: `pisces_errmsg` returns a NUL-terminated string owned by this thread's
    // message slot, valid until the next failing call on this thread; it is copied at
    // once.
    let msg = unsafe { CStr::from_ptr(pisces_errmsg()) }.to_string_lossy();
    Error::abort(format!("C interface: {what} returned {rc}: {msg}"))
}

impl CapiHashBench {
    /// Build [`HashBench`] on `pool`, wrap the pool for C and open a C handle for each
    /// of `threads` workers (`via_c`: the operations go through C).
    pub fn build(
        pool: &Pool,
        sizes: &Sizes,
        threads: usize,
        seed: u64,
        via_c: bool,
    ) -> pisces::Result<Self> {
        let rust = HashBench::build(pool, sizes, seed)?;
        let map = pisces_hmap {
            header: rust.table().offset(),
            value_size: 64,
        };
        let mut me = CapiHashBench {
            rust,
            map,
            via_c,
            pool: AtomicPtr::new(pool_from_rust(pool)),
            handles: Vec::with_capacity(threads),
        };
        for _ in 0..threads {
            let mut h = std::ptr::null_mut();
            // SAFETY: the pool pointer is a live `pisces_pool` (closed only on drop);
            // `h` is a valid out-pointer.
            let rc = unsafe { pisces_handle_open(*me.pool.get_mut(), &mut h) };
            if rc != PISCES_OK {
                return Err(c_error("pisces_handle_open", rc)); // drop closes the rest
            }
            me.handles.push(AtomicPtr::new(h));
        }
        Ok(me)
    }

    fn handle(&self, worker: usize) -> *mut pisces_handle {
        self.handles
            .get(worker)
            .map_or(std::ptr::null_mut(), |h| h.load(Ordering::Relaxed))
    }
}

impl DataSet for CapiHashBench {
    fn op(
        &self,
        worker: usize,
        h: &mut ThreadHandle,
        rng: &mut OpRng,
        update: bool,
    ) -> pisces::Result<u64> {
        if !self.via_c {
            return self.rust.op(worker, h, rng, update);
        }
        let k = self.rust.pick_key(rng);
        let ch = self.handle(worker);
        if ch.is_null() {
            return Err(Error::InvalidArgument(
                format!("capi: worker {worker} has no C handle").into(),
            ));
        }
        let mut c = OpCtx {
            map: self.map,
            key: k,
            changed: 0,
            seen: 0,
        };
        // SAFETY: `ch` is worker `worker`'s open C handle, used by this thread only
        // (the harness runs each worker index on one thread); `c` is a valid local.
        let rc = unsafe { pisces_bench_hash_op(ch.cast(), &mut c, c_int::from(update)) };
        if rc != PISCES_OK {
            return Err(c_error("pisces_run", rc));
        }
        black_box(c.seen);
        Ok(c.changed)
    }

    fn worker_done(&self, worker: usize) -> Option<TxStats> {
        let slot = self.handles.get(worker)?;
        let ch = slot.swap(std::ptr::null_mut(), Ordering::Relaxed);
        if ch.is_null() {
            return None;
        }
        let mut s = TxStats::default();
        // SAFETY: `ch` is this worker's open C handle, taken out of its slot above, so
        // nothing else uses or closes it; the counters are valid out-pointers.
        unsafe {
            pisces_handle_stats(ch, &mut s.commits, &mut s.conflicts, &mut s.failed);
            pisces_handle_close(ch);
        }
        // The Rust variant ran on the worker's Rust handle: its counts are the harness's.
        self.via_c.then_some(s)
    }
}

impl Drop for CapiHashBench {
    fn drop(&mut self) {
        for h in &mut self.handles {
            let ch = std::mem::replace(h.get_mut(), std::ptr::null_mut());
            // SAFETY: an open handle not closed by its worker (NULL is accepted); no
            // worker runs any more (`&mut self`).
            unsafe { pisces_handle_close(ch) };
        }
        let p = std::mem::replace(self.pool.get_mut(), std::ptr::null_mut());
        // SAFETY: the `pisces_pool` made at build, closed once (NULL is accepted).
        unsafe { pisces_pool_close(p) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engines::Engine;
    use crate::testutil::file_pool;
    use rand::SeedableRng;

    const SMALL: Sizes = Sizes {
        hash_buckets: 64,
        hash_pairs: 500,
        ..Sizes::QUICK
    };

    /// The C operations change the table exactly as the Rust ones: the same keys (same
    /// seed) leave the same table, on every engine of the build.
    #[test]
    fn c_and_rust_operations_leave_the_same_table() {
        for engine in Engine::available() {
            let name = engine.name();
            let mut contents = Vec::new();
            for via_c in [false, true] {
                let (p, _dir) = file_pool(engine, 32 << 20, 5);
                let b = CapiHashBench::build(&p, &SMALL, 2, 7, via_c).unwrap();
                let mut h = p.handle().unwrap();
                let mut rng = OpRng::seed_from_u64(3);
                let mut changed = Vec::new();
                for i in 0..300 {
                    changed.push(b.op(i % 2, &mut h, &mut rng, i % 3 != 0).unwrap());
                }
                assert!(
                    changed.contains(&crate::workloads::hash::INSERT_CHANGED)
                        && changed.contains(&crate::workloads::hash::REMOVE_CHANGED),
                    "{name}"
                );
                let c_stats = (0..2).map(|w| b.worker_done(w)).collect::<Vec<_>>();
                if via_c {
                    let commits: u64 = c_stats.iter().map(|s| s.unwrap().commits).sum();
                    assert_eq!(commits, 300, "{name}: C commits");
                    assert_eq!(h.stats().commits, 0, "{name}: the Rust handle was idle");
                } else {
                    assert!(c_stats.iter().all(Option::is_none));
                    assert_eq!(h.stats().commits, 300, "{name}");
                }
                assert_eq!(b.worker_done(0), None, "closed once");
                let mut all = Vec::new();
                let t = b.rust.table();
                h.run(|tx| {
                    all.clear();
                    t.for_each(tx, |k, v| {
                        all.push((*k, *v));
                        true
                    })
                })
                .unwrap();
                all.sort_unstable();
                contents.push((changed, all));
            }
            assert!(contents[0] == contents[1], "{name}: C and Rust differ");
        }
    }
}
