//! Device syncs per commit on the file medium, counted (not timed): where a fence is an
//! `msync`, an engine's background work must not add one per commit.
//!
//! A binary of its own, with one test that runs its parts in turn: the `msync` counter
//! is the process's.

use pisces::tools::counters::msync_calls;
use pisces::{Config, EngineId, PPtr, Pool};
use std::path::PathBuf;

#[test]
fn engines_pay_about_one_sync_per_update_commit_on_a_file() {
    sp3_frees_are_reused_in_batches_on_a_file();
    mvcc_syncs_home_writes_lazily_on_a_file();
    spht_commits_are_their_own_durable_points_on_a_file();
    fresh_slabs_are_formatted_in_batches_on_a_file();
}

/// The `pisces` engine on a file, transactions that each allocate eight 1 KiB objects:
/// about every eighth needs a fresh slab, whose format takes two syncs. Formatted in
/// batches for a class that keeps growing, a commit costs about 1.1 syncs (its record's,
/// and the log's recycling: each record holds 8 KiB); one slab at a time gives about
/// 1.4.
fn fresh_slabs_are_formatted_in_batches_on_a_file() {
    let Some((pool, path)) = file_pool(EngineId::Pisces) else {
        return;
    };
    const N: u64 = 400;
    let before = msync_calls();
    let mut last = PPtr::null();
    for i in 0..N {
        last = pool
            .run(|tx| {
                let mut p = PPtr::null();
                for k in 0..8 {
                    p = tx.alloc([i * 8 + k; 128])?;
                }
                Ok(p)
            })
            .unwrap();
    }
    let per_commit = (msync_calls() - before) as f64 / N as f64;
    eprintln!("fresh slabs: {per_commit:.2} syncs per commit");
    assert!(
        per_commit < 1.2,
        "{per_commit:.2} syncs per commit: every fresh slab is formatted with its own two syncs"
    );
    assert_eq!(pool.run(|tx| Ok(tx.read(last)?[127])).unwrap(), N * 8 - 1);
    drop(pool);
    std::fs::remove_file(&path).unwrap();
}

/// A fresh pool file for `engine` in the test's directory, or `None` (said on stderr)
/// where that directory is not on a disk file system.
fn file_pool(engine: EngineId) -> Option<(Pool, PathBuf)> {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("file_syncs");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("{}.pool", engine.name()));
    let _ = std::fs::remove_file(&path);
    let cfg = Config::default()
        .size(16 << 20)
        .engine(engine)
        .max_threads(2);
    let pool = Pool::create(&path, cfg).unwrap();
    if pool.persistence_domain() != pisces::PersistenceDomain::PageCache {
        eprintln!("the target directory is not on a disk file system: nothing to count");
        return None;
    }
    Some((pool, path))
}

/// Syncs per commit of `n` update transactions on `engine`'s pool file, each adding 1
/// to one of four root words; the pool is reopened (recovery replays what its log
/// still holds) and every increment must be there. `None` off a disk file system.
fn increment_syncs(engine: EngineId, n: u64) -> Option<f64> {
    let (pool, path) = file_pool(engine)?;
    let root: PPtr<[u64; 4]> = pool.root().unwrap();
    let before = msync_calls();
    for i in 0..n {
        pool.run(|tx| {
            tx.write(root)?[(i % 4) as usize] += 1;
            Ok(())
        })
        .unwrap();
    }
    let per_commit = (msync_calls() - before) as f64 / n as f64;
    eprintln!("{}: {per_commit:.2} syncs per commit", engine.name());
    drop(pool);
    let pool = Pool::open(&path, Config::default().engine(engine)).unwrap();
    assert_eq!(pool.run(|tx| Ok(*tx.read(root)?)).unwrap(), [n / 4; 4]);
    drop(pool);
    std::fs::remove_file(&path).unwrap();
    Some(per_commit)
}

/// spht on a file, one thread: every commit finds no older transaction still to
/// persist, so its log record is a point record and it writes no marker; the replayer
/// applies what a pause gathered, three syncs per batch. Close to one sync per commit;
/// with the marker written at every commit, two or more (and the replayer's three per
/// commit when it replays each commit on its own). The bound sits between: how many
/// commits a pause gathers depends on when the replayer thread is scheduled, and on a
/// loaded machine the batches are smaller (1.35 has been seen), which is not the fault
/// the test looks for.
fn spht_commits_are_their_own_durable_points_on_a_file() {
    if let Some(per_commit) = increment_syncs(EngineId::Spht, 1000) {
        assert!(
            per_commit < 1.6,
            "{per_commit:.2} syncs per commit: commits write markers, or the replayer syncs per commit"
        );
    }
}

/// mvcc on a file: each update transaction writes one word. Its record's sync is the
/// commit's durability point; the home write waits for the lazy home sync at log
/// recycling, so a commit costs close to one sync. Fencing the home write at every
/// commit (the strawman's step 7 as written) gives two.
fn mvcc_syncs_home_writes_lazily_on_a_file() {
    if let Some(per_commit) = increment_syncs(EngineId::Mvcc, 2000) {
        assert!(
            per_commit < 1.2,
            "{per_commit:.2} syncs per commit: the home writes are synced at every commit"
        );
    }
}

/// SP3 on a file: transactions that each free one block and allocate another. An
/// allocation that finds frees waiting checkpoints first (two syncs) so that they are
/// reused; on the file medium it waits for a batch of them, so a commit costs close to
/// its one record sync. Checkpointing at every waiting free gives about three per
/// commit.
fn sp3_frees_are_reused_in_batches_on_a_file() {
    let Some((pool, path)) = file_pool(EngineId::Sp3) else {
        return;
    };
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
