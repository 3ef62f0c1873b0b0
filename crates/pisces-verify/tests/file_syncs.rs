//! Device syncs per commit on the file medium, counted (not timed): where a fence is an
//! `msync`, an engine's background work must not add one per commit.
//!
//! A binary of its own, with one test: the `msync` counter is the process's.

use pisces::tools::counters::msync_calls;
use pisces::{Config, EngineId, PPtr, Pool};

/// SP3 on a file: transactions that each free one block and allocate another. An
/// allocation that finds frees waiting checkpoints first (two syncs) so that they are
/// reused; on the file medium it waits for a batch of them, so a commit costs close to
/// its one record sync. Checkpointing at every waiting free gives about three per
/// commit.
#[test]
fn sp3_frees_are_reused_in_batches_on_a_file() {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("file_syncs");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("sp3.pool");
    let _ = std::fs::remove_file(&path);
    let cfg = Config::default()
        .size(16 << 20)
        .engine(EngineId::Sp3)
        .max_threads(2);
    let pool = Pool::create(&path, cfg).unwrap();
    if pool.persistence_domain() != pisces::PersistenceDomain::PageCache {
        eprintln!("the target directory is not on a disk file system: nothing to count");
        return;
    }
    const N: u64 = 400;
    let mut blocks: Vec<PPtr<u64>> = (0..8)
        .map(|i| pool.run(|tx| tx.alloc(i)).unwrap())
        .collect();
    let before = msync_calls();
    for i in 0..N {
        let old = blocks.remove(0);
        let new = pool
            .run(|tx| {
                tx.free(old)?;
                tx.alloc(i)
            })
            .unwrap();
        blocks.push(new);
    }
    let per_commit = (msync_calls() - before) as f64 / N as f64;
    assert!(
        per_commit < 1.3,
        "{per_commit:.2} syncs per commit: the allocation checkpoints for single frees"
    );
    let sum: u64 = blocks
        .iter()
        .map(|&b| pool.run(|tx| Ok(*tx.read(b)?)).unwrap())
        .sum();
    assert_eq!(sum, (N - 8..N).sum::<u64>());
    drop(pool);
    std::fs::remove_file(&path).unwrap();
}
