//! Pools for the unit tests: on a file in a temporary directory (every engine can use
//! one, including those that keep their own pool file) or on anonymous memory.

use crate::engines::Engine;
use pisces::tools::dram::DramMedium;
use pisces::Pool;
use std::sync::Arc;

/// A pool of `size` bytes with `max_threads` slots on a file in a directory that is
/// removed with the returned guard.
pub fn file_pool(engine: Engine, size: u64, max_threads: usize) -> (Pool, tempfile::TempDir) {
    let dir = tempfile::tempdir_in("/dev/shm").unwrap();
    let p = Pool::create(dir.path().join("w.pool"), engine.config(size, max_threads))
        .unwrap_or_else(|e| panic!("{}: {e}", engine.name()));
    (p, dir)
}

/// A pool of at least `bytes` (rounded up, plus 64 MiB for logs and slack) with 3
/// thread slots on anonymous memory (engines that use the pool's medium only).
pub fn memory_pool(engine: Engine, bytes: u64) -> Pool {
    let size = bytes.next_multiple_of(1 << 20) + (64 << 20);
    let m = DramMedium::anonymous(size as usize, 0, 0).unwrap();
    Pool::create_on(Arc::new(m), engine.config(size, 3)).unwrap()
}
