//! One measurement: a fresh pool, a preload, `T` worker threads for `S` seconds.
//!
//! The pool file is created under `/dev/shm` (else the temporary directory) with a
//! unique name on the emulated-NVM DRAM medium and removed afterwards, also when the
//! measurement fails. Every worker has its own [`ThreadHandle`] (taken before the
//! workers start, so that running out of thread slots is an error, not a hang), its
//! own seeded RNG and its own latency histograms; it snapshots the medium counters of
//! its thread before its first transaction and after its handle is dropped (so the
//! write-backs still pending in its group-commit batch are counted with the
//! transactions that produced them), and it times every transaction, retries
//! included.
//!
//! Transactions the workload rolls back on purpose (TPC-C's 1 % of new-orders with an
//! unused item number: a user abort, `TxStats::failed`) are completed transactions
//! here (a choice, see the `tpcc` module): they count in the throughput and in the
//! per-transaction counts, and separately in [`Outcome::user_aborts`]. No other
//! workload has them (any other failed transaction fails the measurement).

use crate::dataset::{DataSet, Sizes};
use crate::engines::EngineSpec;
use crate::registry::{self, DataKind};
use crate::signal::interrupted;
use hdrhistogram::Histogram;
use pisces::medium::counters::{self, Counters};
use pisces::{MediumKind, Pool, ThreadHandle};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Barrier;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Largest latency a histogram records (longer ones are clamped): 60 s.
const MAX_LATENCY_NS: u64 = 60_000_000_000;

/// What to measure (one run of it).
#[derive(Clone, Debug)]
pub struct Spec {
    /// Engine configuration.
    pub engine: EngineSpec,
    /// Workload name in reports (`hash`, `btree`, `latency`, `breakdown`, `set-1k`, ...).
    pub workload: String,
    /// The data structure.
    pub data: DataKind,
    /// Worker threads.
    pub threads: usize,
    /// Percentage of update transactions (0..=100).
    pub update_pct: u32,
    /// Thread 0 runs only lookups and the other threads only updates (`update_pct`
    /// is then 100, the writers' mix).
    pub dedicated_reader: bool,
    /// Emulated NVM write latency per flushed cache line.
    pub nvm_latency_ns: u64,
}

/// What one measurement produced.
pub struct Outcome {
    /// Completed transactions per second (sum over workers of completed / own time).
    pub ops_per_sec: f64,
    /// Completed transactions: committed, plus rolled back by the workload on purpose.
    pub commits: u64,
    /// Of `commits`, the transactions the workload rolled back on purpose.
    pub user_aborts: u64,
    /// Conflict retries.
    pub conflicts: u64,
    /// Read-only transaction latencies (ns).
    pub ro: Histogram<u64>,
    /// Update transaction latencies (ns).
    pub upd: Histogram<u64>,
    /// Medium counters summed over the workers.
    pub counters: Counters,
    /// Bytes the program changed (declared by the workload per update).
    pub changed_bytes: u64,
}

fn histogram() -> Result<Histogram<u64>, String> {
    Histogram::new_with_bounds(1, MAX_LATENCY_NS, 3).map_err(|e| e.to_string())
}

/// Removes the pool file when dropped (after the pool, which is dropped first).
struct RemoveOnDrop(PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        // Best effort: the file may not have been created.
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Where pools go: `/dev/shm` (DRAM) if it exists, else the temporary directory.
pub fn pool_dir() -> PathBuf {
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        shm.to_path_buf()
    } else {
        std::env::temp_dir()
    }
}

fn unique_pool_path() -> PathBuf {
    static N: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    // Relaxed: a counter that only needs to be unique.
    let n = N.fetch_add(1, Ordering::Relaxed);
    pool_dir().join(format!(
        "pisces-bench-{}-{n}-{nanos}.pool",
        std::process::id()
    ))
}

struct WorkerOut {
    commits: u64,
    user_aborts: u64,
    conflicts: u64,
    elapsed: Duration,
    ro: Histogram<u64>,
    upd: Histogram<u64>,
    counters: Counters,
    changed_bytes: u64,
}

#[allow(clippy::too_many_arguments)]
fn worker(
    index: usize,
    mut h: ThreadHandle,
    data: &dyn DataSet,
    update_pct: u32,
    seed: u64,
    start: &Barrier,
    stop: &AtomicBool,
    done: &AtomicU64,
) -> Result<WorkerOut, String> {
    let mut rng = StdRng::seed_from_u64(seed);
    let (mut ro, mut upd) = (histogram()?, histogram()?);
    let mut changed_bytes = 0u64;
    let mut unreported = 0u64;
    start.wait();
    let before = counters::snapshot();
    let t0 = Instant::now();
    // Relaxed: a stop flag; nothing is published through it.
    while !stop.load(Ordering::Relaxed) {
        let update = rng.gen_range(0..100) < update_pct;
        let t = Instant::now();
        let changed = data.op(index, &mut h, &mut rng, update).map_err(|e| {
            format!(
                "{} transaction failed: {e}",
                if update { "an update" } else { "a read-only" }
            )
        })?;
        let ns = (t.elapsed().as_nanos() as u64).max(1);
        if update {
            upd.saturating_record(ns);
        } else {
            ro.saturating_record(ns);
        }
        changed_bytes += changed;
        unreported += 1;
        if unreported == 1024 {
            // Relaxed: a progress statistic.
            done.fetch_add(unreported, Ordering::Relaxed);
            unreported = 0;
        }
    }
    let elapsed = t0.elapsed();
    done.fetch_add(unreported, Ordering::Relaxed);
    let stats = data.worker_done(index).unwrap_or_else(|| h.stats());
    drop(h); // writes back the pending batch on this thread: counted below
    Ok(WorkerOut {
        commits: stats.commits + stats.failed,
        user_aborts: stats.failed,
        conflicts: stats.conflicts,
        elapsed,
        ro,
        upd,
        counters: counters::snapshot() - before,
        changed_bytes,
    })
}

/// Run `spec` for `seconds` on a fresh pool. `tick(elapsed, transactions so far)` is
/// called about every 50 ms from the calling thread while the workers run.
pub fn measure(
    spec: &Spec,
    sizes: &Sizes,
    seconds: f64,
    seed: u64,
    tick: &mut dyn FnMut(Duration, u64),
) -> Result<Outcome, String> {
    measure_at(&unique_pool_path(), spec, sizes, seconds, seed, tick)
}

/// [`measure`] with the pool at `path` (which must not exist; removed at the end).
fn measure_at(
    path: &Path,
    spec: &Spec,
    sizes: &Sizes,
    seconds: f64,
    seed: u64,
    tick: &mut dyn FnMut(Duration, u64),
) -> Result<Outcome, String> {
    let _guard = RemoveOnDrop(path.to_path_buf());
    let cfg = spec.engine.config(
        spec.data.pool_bytes(sizes, spec.threads, seconds),
        MediumKind::Dram {
            write_latency_ns: spec.nvm_latency_ns,
            bandwidth_bytes_per_sec: 0,
        },
        spec.data.thread_slots(spec.threads),
        4 << 20,
    );
    let pool = Pool::create(path, cfg)
        .map_err(|e| format!("creating the pool {}: {e}", path.display()))?;
    let data = registry::build(&pool, spec.data, sizes, spec.threads, seed)
        .map_err(|e| format!("preloading the {}: {e}", spec.workload))?;
    // Nothing of the preload may be left for the measured run to write back (an
    // engine that defers write-back, such as timestone's checkpoints, would otherwise
    // be charged for it).
    pool.sync()
        .map_err(|e| format!("syncing the preloaded {}: {e}", spec.workload))?;
    let handles = (0..spec.threads)
        .map(|_| pool.handle())
        .collect::<pisces::Result<Vec<_>>>()
        .map_err(|e| format!("taking thread handles: {e}"))?;
    let start = Barrier::new(spec.threads + 1);
    let stop = AtomicBool::new(false);
    let done = AtomicU64::new(0);
    let duration = Duration::from_secs_f64(seconds);
    let outs = std::thread::scope(|s| {
        let workers: Vec<_> = handles
            .into_iter()
            .enumerate()
            .map(|(i, h)| {
                let (data, start, stop, done) = (data.as_ref(), &start, &stop, &done);
                let seed = seed
                    .wrapping_mul(0x9e37_79b9_7f4a_7c15)
                    .wrapping_add(i as u64);
                let pct = match (spec.dedicated_reader, i) {
                    (false, _) => spec.update_pct,
                    (true, 0) => 0,
                    (true, _) => 100,
                };
                s.spawn(move || worker(i, h, data, pct, seed, start, stop, done))
            })
            .collect();
        start.wait();
        let t0 = Instant::now();
        loop {
            let el = t0.elapsed();
            // Relaxed: a progress statistic.
            tick(el, done.load(Ordering::Relaxed));
            if el >= duration || interrupted() {
                break;
            }
            std::thread::sleep((duration - el).min(Duration::from_millis(50)));
        }
        stop.store(true, Ordering::Relaxed);
        workers
            .into_iter()
            .map(|w| {
                w.join()
                    .unwrap_or_else(|_| Err("a worker thread panicked".into()))
            })
            .collect::<Vec<_>>()
    });
    // What the engine still defers when the workers stop (timestone's last checkpoint)
    // is made durable at close, on this thread: it counts as the run's.
    let before_close = counters::snapshot();
    drop(data);
    drop(pool);
    let at_close = counters::snapshot() - before_close;
    if interrupted() {
        return Err("interrupted".into());
    }
    let mut o = Outcome {
        ops_per_sec: 0.0,
        commits: 0,
        user_aborts: 0,
        conflicts: 0,
        ro: histogram()?,
        upd: histogram()?,
        counters: Counters::default(),
        changed_bytes: 0,
    };
    for w in outs {
        let w = w?;
        o.ops_per_sec += w.commits as f64 / w.elapsed.as_secs_f64().max(1e-9);
        o.commits += w.commits;
        o.user_aborts += w.user_aborts;
        o.conflicts += w.conflicts;
        o.ro.add(&w.ro).map_err(|e| e.to_string())?;
        o.upd.add(&w.upd).map_err(|e| e.to_string())?;
        o.counters.add(w.counters);
        o.changed_bytes += w.changed_bytes;
    }
    o.counters.add(at_close);
    Ok(o)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engines::Engine;

    const TINY: Sizes = Sizes {
        hash_buckets: 128,
        hash_pairs: 1000,
        btree_keys: 1000,
        ..Sizes::QUICK
    };

    fn spec(engine: Engine, data: DataKind, threads: usize, update_pct: u32) -> Spec {
        Spec {
            engine: EngineSpec::plain(engine),
            workload: "test".into(),
            data,
            threads,
            update_pct,
            dedicated_reader: false,
            nvm_latency_ns: 0,
        }
    }

    #[test]
    fn a_measurement_counts_transactions_and_removes_its_pool() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.pool");
        let mut ticks = 0;
        let o = measure_at(
            &path,
            &spec(Engine::PISCES, DataKind::Hash, 2, 50),
            &TINY,
            0.2,
            1,
            &mut |_, _| ticks += 1,
        )
        .unwrap();
        assert!(ticks >= 2);
        assert!(o.commits > 0);
        assert_eq!(o.ro.len() + o.upd.len(), o.commits);
        assert!(!o.ro.is_empty() && !o.upd.is_empty());
        assert!(o.changed_bytes >= 8 * o.upd.len());
        // Pisces persists every update: a log record and a fence at least.
        assert!(o.counters.fences >= o.upd.len(), "{:?}", o.counters);
        assert!(o.counters.bytes_logged > 0 && o.counters.lines_flushed > 0);
        assert!(o.ops_per_sec > 0.0);
        assert!(!path.exists(), "the pool file was not removed");
    }

    #[test]
    fn tpcc_and_tatp_latencies_go_to_their_columns() {
        let sizes = Sizes {
            tpcc_items: 1000,
            tpcc_customers: 30,
            tatp_subscribers: 2000,
            ..TINY
        };
        let o = measure(
            &spec(Engine::PISCES, DataKind::Tpcc, 2, 100),
            &sizes,
            0.3,
            1,
            &mut |_, _| {},
        )
        .unwrap();
        // Every new-order is an update; rolled-back ones count as completed.
        assert!(o.commits > 100 && o.ro.is_empty(), "{}", o.commits);
        assert_eq!(o.upd.len(), o.commits);
        assert!(
            o.user_aborts < o.commits / 20,
            "{} of {}",
            o.user_aborts,
            o.commits
        );
        assert!(o.changed_bytes >= (o.commits - o.user_aborts) * crate::tpcc::changed_bytes(5));
        let o = measure(
            &spec(Engine::UNDO, DataKind::Tatp, 2, 20),
            &sizes,
            0.3,
            2,
            &mut |_, _| {},
        )
        .unwrap();
        assert_eq!(o.user_aborts, 0);
        assert_eq!(o.ro.len() + o.upd.len(), o.commits);
        // 80 % read-only.
        assert!(o.ro.len() > 3 * o.upd.len() && o.ro.len() < 5 * o.upd.len());
    }

    #[test]
    fn a_failed_measurement_removes_its_pool_too() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.pool");
        let bad = Sizes {
            hash_buckets: 0, // refused by HashMap::create: the preload fails
            ..TINY
        };
        let e = measure_at(
            &path,
            &spec(Engine::UNDO, DataKind::Hash, 1, 0),
            &bad,
            0.1,
            1,
            &mut |_, _| {},
        )
        .err()
        .unwrap();
        assert!(e.contains("preloading"), "{e}");
        assert!(!path.exists(), "the pool file was not removed");
    }

    #[test]
    fn read_only_runs_flush_nothing_and_volatile_never_flushes() {
        let o = measure(
            &spec(Engine::PISCES, DataKind::Tree, 1, 0),
            &TINY,
            0.1,
            2,
            &mut |_, _| {},
        )
        .unwrap();
        assert!(o.commits > 0 && o.upd.is_empty());
        assert_eq!(o.counters, Counters::default());
        assert_eq!(o.changed_bytes, 0);
        let o = measure(
            &spec(Engine::VOLATILE, DataKind::Tree, 1, 100),
            &TINY,
            0.1,
            3,
            &mut |_, _| {},
        )
        .unwrap();
        assert!(!o.upd.is_empty() && o.changed_bytes > 0);
        // No log and no write-back persistence; only the allocator persists its own
        // metadata when it formats a new slab (rarely).
        assert_eq!(o.counters.bytes_logged, 0);
        assert!(o.counters.fences * 20 < o.upd.len(), "{:?}", o.counters);
    }
}
