//! Measurements whose workers run in several processes on one pool (`--processes`):
//! the `pisces-bench` binary started again as worker processes, each finding the data
//! set from the pool's root, run as a user would with tiny data sets and durations.
//! These check that the counts of every process arrive and that the pool is whole
//! afterwards; they assert nothing about speed.

use pisces::{Config, PPtr, Pool};
use pisces_bench::{
    measure_processes_at, Anchor, DataKind, Engine, EngineSpec, HashTable, Placement, Sizes, Spec,
};
use std::path::Path;
use std::process::Command;
use std::sync::{Mutex, MutexGuard};

/// Held by every test for its whole run: a test starts processes, and a child between
/// its fork and its exec holds a copy of every descriptor of this process, the locks
/// of a pool another test holds exclusively included, which would then refuse that
/// test's next shared open.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn one_at_a_time() -> MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

const TINY: Sizes = Sizes {
    hash_buckets: 64,
    hash_pairs: 500,
    ..Sizes::QUICK
};

fn spec(engine: Engine, update_pct: u32) -> Spec {
    Spec {
        engine: EngineSpec::plain(engine),
        workload: "hash".into(),
        data: DataKind::Hash,
        threads: 1,
        update_pct,
        dedicated_reader: false,
        nvm_latency_ns: 0,
        waits_outside: false,
        disk: None,
        deferred: false,
        processes: 2,
    }
}

/// The pool at `path`, opened exclusively (every worker process has closed it), its
/// hash table found from the root as a worker finds it: its key count, after the
/// table's own structural check.
fn keys_of(path: &Path) -> (Anchor, usize) {
    let pool = Pool::open(path, Config::default().allow_volatile_medium(true)).unwrap();
    let a = Anchor::find(&pool).unwrap();
    let map: HashTable = bytemuck::cast(a.handle);
    let n = pool
        .read(|tx| {
            map.check(tx)?;
            map.len(tx)
        })
        .unwrap();
    // The root is the anchor, not some other object.
    let root: PPtr<Anchor> = pool.root().unwrap();
    assert_eq!(pool.read(|tx| Ok(*tx.read(root)?)).unwrap(), a);
    (a, n)
}

/// 2 processes × 1 thread on the read-only mix and on the 20 % update mix: every
/// process's transactions are counted (both kinds), and afterwards the pool opens
/// exclusively with its table whole: as many keys as preloaded after the read-only
/// run, a consistent table after the updates.
#[test]
fn two_processes_run_the_hash_mix_and_leave_the_pool_whole() {
    let _one = one_at_a_time();
    let dir = tempfile::tempdir_in("/dev/shm").unwrap();
    let exe = Path::new(env!("CARGO_BIN_EXE_pisces-bench"));
    for pct in [0, 20] {
        let path = dir.path().join(format!("hash-{pct}.pool"));
        let mut ticks = 0;
        let o = measure_processes_at(
            &path,
            &spec(Engine::PISCES, pct),
            &TINY,
            0.3,
            7,
            &Placement::new(false),
            exe,
            &mut |_, _| ticks += 1,
        )
        .unwrap();
        assert!(ticks >= 2, "{ticks}");
        assert!(
            o.commits > 0 && o.ops_per_sec > 0.0,
            "{pct}%: {}",
            o.commits
        );
        assert_eq!(o.ro_txs + o.upd_txs, o.commits, "{pct}%");
        assert!(!o.ro.is_empty(), "{pct}%: the processes' latencies arrive");
        let (a, keys) = keys_of(&path);
        assert_eq!(a.count, 2 * TINY.hash_pairs as u64, "the key space");
        if pct == 0 {
            assert_eq!(o.upd_txs, 0);
            assert_eq!(keys, TINY.hash_pairs, "a read-only run changes no key");
        } else {
            assert!(o.upd_txs > 0 && !o.upd.is_empty());
            // Every update inserts or removes one key.
            assert!(
                keys.abs_diff(TINY.hash_pairs) as u64 <= o.upd_txs,
                "{keys} keys after {} updates",
                o.upd_txs
            );
            // Pisces persists every update: a fence at least.
            assert!(o.counters.fences >= o.upd_txs, "{:?}", o.counters);
        }
        // No process holds the pool any more.
        assert!(Pool::open(&path, Config::default().allow_volatile_medium(true)).is_ok());
    }
}

/// An engine that cannot share a pool is refused with the library's reason, before
/// anything is created.
#[test]
fn an_engine_that_cannot_share_is_refused_with_its_reason() {
    let _one = one_at_a_time();
    let dir = tempfile::tempdir_in("/dev/shm").unwrap();
    let path = dir.path().join("undo.pool");
    let e = measure_processes_at(
        &path,
        &spec(Engine::UNDO, 0),
        &TINY,
        0.1,
        1,
        &Placement::new(false),
        Path::new(env!("CARGO_BIN_EXE_pisces-bench")),
        &mut |_, _| {},
    )
    .err()
    .unwrap();
    assert!(
        e.contains("undo cannot share a pool")
            && e.contains("cannot run on a pool that several processes open at once"),
        "{e}"
    );
    assert!(!path.exists());
}

/// `pisces-bench --processes 1,2` with an engine that shares and one that does not:
/// the run succeeds, the refusing engine's measurements of several processes are
/// skipped with the library's reason (its measurement in one process runs), and the
/// rows of 2 processes × 1 thread are labelled apart from 1 process × 2 threads, with
/// the table that compares them.
#[test]
fn the_bench_runs_processes_beside_threads_and_skips_refusing_engines() {
    let _one = one_at_a_time();
    let out = tempfile::tempdir().unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_pisces-bench"))
        .args([
            "--engines",
            "pisces,undo",
            "--workloads",
            "hash",
            "--update-pct",
            "0",
            "--threads",
            "1,2",
            "--processes",
            "1,2",
            "--hash-pairs",
            "500",
            "--hash-buckets",
            "64",
            "--seconds",
            "0.2",
            "--runs",
            "1",
            "--no-pin",
            "--out",
            out.path().to_str().unwrap(),
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("note: undo@2proc skipped (several processes on one pool: ")
            && stdout.contains("the undo engine cannot run on a pool that several processes"),
        "{stdout}"
    );
    assert!(stdout.contains("processes/threads"), "{stdout}");
    let csv = std::fs::read_to_string(out.path().join("results.csv")).unwrap();
    let rows: Vec<(String, String)> = csv
        .lines()
        .skip(1)
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            (f[0].to_string(), f[2].to_string())
        })
        .collect();
    let want: Vec<(String, String)> = [
        ("pisces", "1"),
        ("undo", "1"),
        ("pisces", "2"),
        ("undo", "2"),
        ("pisces@2proc", "2"),
        ("pisces@2proc", "4"),
    ]
    .iter()
    .map(|(e, t)| (e.to_string(), t.to_string()))
    .collect();
    let mut got = rows.clone();
    got.sort();
    let mut want_sorted = want.clone();
    want_sorted.sort();
    assert_eq!(got, want_sorted, "{csv}");
    // 2 processes x 1 thread is measured next to 1 process x 2 threads.
    let at = |e: &str, t: &str| rows.iter().position(|r| r.0 == e && r.1 == t).unwrap();
    assert_eq!(at("pisces@2proc", "2"), at("undo", "2") + 1, "{csv}");
}
