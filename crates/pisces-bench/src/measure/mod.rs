//! One measurement: a fresh pool, a preload, `T` worker threads for `S` seconds.
//! (With `--processes`, `P` worker processes of `T` threads each on one shared pool:
//! [`processes`], whose workers run the same loop, [`Workers::run`].)
//!
//! A peer ([`crate::peers`]) gets a fresh directory instead of a pool, with its store
//! in it, and the same workers (an operation is one transaction of the store; its
//! conflicts are the write transactions it ran again, none for the stores whose second
//! writer waits for the first). Each worker is
//! pinned to its CPU first, as the [`Placement`] says.
//!
//! The pool file is created under `/dev/shm` (else the temporary directory) with a
//! unique name on the emulated-NVM DRAM medium, or with `--dir` ([`Spec::disk`]) in
//! that directory on the file medium, and removed afterwards, also when the
//! measurement fails. From the workers' start to the pool's close a measurement also
//! reads two process-wide counts: the file medium's `msync` calls and `write_bytes` of
//! `/proc/self/io` (one measurement runs at a time, so they are its own). On a file
//! system the preload of a data set that can be reopened runs on the DRAM medium over
//! the pool's file, which is then fsynced and opened again on the file medium: only
//! the measured commits are durable one by one.
//!
//! Every worker has its own [`ThreadHandle`] (taken before the workers start, so that
//! running out of thread slots is an error, not a hang), its own seeded RNG and its own
//! latency histograms; it snapshots the medium counters of its thread before its first
//! transaction and after its handle is dropped (so the write-backs still pending in its
//! group-commit batch are counted with the transactions that produced them), and it
//! times its transactions, retries included: all of them when they are long, a random
//! sample when they are short (the clock's cost would otherwise be most of a short
//! transaction's time: [`timing`]).
//!
//! The writes to words several threads write ([`pisces::tools::shared_counts`], in a
//! build with the `shared-counts` feature) are counted over every thread of the
//! process, the engine's background threads included, from the start of the workers'
//! loops to the pool's close; each worker ends its unit of distinct lines after every
//! transaction it completes (its retries included).
//!
//! Transactions the workload rolls back on purpose (TPC-C's 1 % of new-orders with an
//! unused item number: a user abort, `TxStats::failed`) are completed transactions
//! here (a choice, see the `tpcc` module): they count in the throughput and in the
//! per-transaction counts, and separately in [`Outcome::user_aborts`]. No other
//! workload has them (any other failed transaction fails the measurement).

pub mod pin;
pub mod processes;
pub mod run;
pub mod signal;
pub mod timing;

use crate::engines::EngineSpec;
use crate::measure::pin::Placement;
use crate::measure::signal::interrupted;
use crate::measure::timing::{histogram, OpTimer};
use crate::peers::PeerBench;
use crate::workloads::kinds::DataKind;
use crate::workloads::DataSet;
use crate::workloads::OpRng;
use hdrhistogram::Histogram;
use pisces::tools::counters::{self, Counters};
use pisces::tools::dram;
use pisces::tools::shared_counts::{self, SharedCounts};
use pisces::ThreadHandle;
use rand::{Rng, SeedableRng};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Barrier;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// What to measure (one run of it).
#[derive(Clone, Debug)]
pub struct Spec {
    /// Engine configuration.
    pub engine: EngineSpec,
    /// Workload name in reports (`hash`, `btree`, `latency`, `breakdown`, `set-1k`, ...).
    pub workload: String,
    /// The data structure.
    pub data: DataKind,
    /// Worker threads (of each process: see `processes`).
    pub threads: usize,
    /// Percentage of update transactions (0..=100).
    pub update_pct: u32,
    /// Thread 0 runs only lookups and the other threads only updates (`update_pct`
    /// is then 100, the writers' mix).
    pub dedicated_reader: bool,
    /// Emulated NVM write latency per flushed cache line.
    pub nvm_latency_ns: u64,
    /// The control of the latency sweep: each worker's emulated NVM waits are paid
    /// after its transaction returns instead of at the fence inside it
    /// ([`pisces::tools::dram::defer_emulated_waits`]): the same waits, with nothing
    /// the engine holds held during them.
    pub waits_outside: bool,
    /// A directory on a file system (`--dir`): the pool is created there on the file
    /// medium (a fence `msync`s the pages its thread flushed), a peer's files go there.
    /// None: the pool on emulated PM under [`pool_dir`].
    pub disk: Option<PathBuf>,
    /// Update transactions commit with durability deferred (`--durability deferred`,
    /// [`crate::workloads::update_options`]); each worker then waits for its commits'
    /// durability at its end, inside its measured time.
    pub deferred: bool,
    /// Processes the workers run in: 1, this one (`threads` worker threads on a pool
    /// it opened alone); more, as many worker processes of `threads` workers each on
    /// one pool they open shared ([`processes`]).
    pub processes: usize,
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
    /// Read-only transaction latencies (ns) of the timed sample ([`crate::measure::timing`]).
    pub ro: Histogram<u64>,
    /// Update transaction latencies (ns) of the timed sample.
    pub upd: Histogram<u64>,
    /// Completed read-only transactions (all of them, timed or not).
    pub ro_txs: u64,
    /// Completed updates (all of them).
    pub upd_txs: u64,
    /// Medium counters summed over the workers.
    pub counters: Counters,
    /// Bytes the program changed (declared by the workload per update).
    pub changed_bytes: u64,
    /// Reads of the committed read-only transactions that took the copy path
    /// ([`pisces::TxStats::ro_locked_reads`]).
    pub ro_locked_reads: u64,
    /// Writes to shared words, all threads (zero without the `shared-counts` feature).
    pub shared: SharedCounts,
    /// `msync` calls of the file medium, every thread of the process, from the workers'
    /// start to the pool's close ([`counters::msync_calls`]; 0 on the other media).
    pub msyncs: u64,
    /// Bytes this process sent to the storage layer over the same span: the growth of
    /// `write_bytes` in `/proc/self/io` (pages it dirtied in the page cache, counted
    /// when dirtied, plus direct I/O). None where the kernel does not say.
    pub device_write_bytes: Option<u64>,
}

impl Outcome {
    /// An outcome with no worker's counts yet, and these process-wide counts.
    pub(crate) fn empty(
        shared: SharedCounts,
        msyncs: u64,
        device_write_bytes: Option<u64>,
    ) -> Result<Outcome, String> {
        Ok(Outcome {
            ops_per_sec: 0.0,
            commits: 0,
            user_aborts: 0,
            conflicts: 0,
            ro: histogram()?,
            upd: histogram()?,
            ro_txs: 0,
            upd_txs: 0,
            counters: Counters::default(),
            changed_bytes: 0,
            ro_locked_reads: 0,
            shared,
            msyncs,
            device_write_bytes,
        })
    }

    /// Add a worker's counts (its throughput: its completed transactions over its own
    /// time).
    fn add_worker(&mut self, w: &WorkerOut) -> Result<(), String> {
        self.ops_per_sec += w.commits as f64 / w.elapsed.as_secs_f64().max(1e-9);
        self.commits += w.commits;
        self.user_aborts += w.user_aborts;
        self.conflicts += w.conflicts;
        self.ro.add(&w.ro).map_err(|e| e.to_string())?;
        self.upd.add(&w.upd).map_err(|e| e.to_string())?;
        self.ro_txs += w.ro_txs;
        self.upd_txs += w.upd_txs;
        self.counters.add(w.counters);
        self.changed_bytes += w.changed_bytes;
        self.ro_locked_reads += w.ro_locked_reads;
        Ok(())
    }

    /// Add what another process measured (the workers of a measurement's worker
    /// processes: [`processes`]).
    pub(crate) fn add(&mut self, o: &Outcome) -> Result<(), String> {
        self.ops_per_sec += o.ops_per_sec;
        self.commits += o.commits;
        self.user_aborts += o.user_aborts;
        self.conflicts += o.conflicts;
        self.ro.add(&o.ro).map_err(|e| e.to_string())?;
        self.upd.add(&o.upd).map_err(|e| e.to_string())?;
        self.ro_txs += o.ro_txs;
        self.upd_txs += o.upd_txs;
        self.counters.add(o.counters);
        self.changed_bytes += o.changed_bytes;
        self.ro_locked_reads += o.ro_locked_reads;
        self.shared.writes += o.shared.writes;
        self.shared.lines += o.shared.lines;
        self.msyncs += o.msyncs;
        self.device_write_bytes = match (self.device_write_bytes, o.device_write_bytes) {
            (Some(a), Some(b)) => Some(a + b),
            _ => None,
        };
        Ok(())
    }
}

/// `write_bytes` of `/proc/self/io`: bytes this process caused to be sent to the
/// storage layer (counted when a page is dirtied, so a page rewritten before its
/// write-back counts once). None where the file or the field is missing (a kernel
/// without task I/O accounting).
pub fn process_write_bytes() -> Option<u64> {
    let io = std::fs::read_to_string("/proc/self/io").ok()?;
    io.lines()
        .find_map(|l| l.strip_prefix("write_bytes:"))
        .and_then(|v| v.trim().parse().ok())
}

/// Removes the pool file when dropped (after the pool, which is dropped first).
struct RemoveOnDrop(PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        // Best effort: the file or directory may not have been created.
        if self.0.is_dir() {
            let _ = std::fs::remove_dir_all(&self.0);
        } else {
            let _ = std::fs::remove_file(&self.0);
        }
    }
}

/// The environment variable naming another directory for the pools (for example a
/// tmpfs mounted with `huge=always`, to measure huge pages).
pub const POOL_DIR_VAR: &str = "PISCES_BENCH_DIR";

/// Where pools go: `$PISCES_BENCH_DIR` if set, else `/dev/shm` (DRAM) if it exists,
/// else the temporary directory.
pub fn pool_dir() -> PathBuf {
    if let Some(d) = std::env::var_os(POOL_DIR_VAR).filter(|d| !d.is_empty()) {
        return PathBuf::from(d);
    }
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        shm.to_path_buf()
    } else {
        std::env::temp_dir()
    }
}

/// A fresh name for a pool (or a peer's directory) in `dir`.
fn unique_pool_path(dir: &Path) -> PathBuf {
    static N: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    // Relaxed: a counter that only needs to be unique.
    let n = N.fetch_add(1, Ordering::Relaxed);
    dir.join(format!(
        "pisces-bench-{}-{n}-{nanos}.pool",
        std::process::id()
    ))
}

pub(crate) struct WorkerOut {
    commits: u64,
    user_aborts: u64,
    conflicts: u64,
    elapsed: Duration,
    ro: Histogram<u64>,
    upd: Histogram<u64>,
    ro_txs: u64,
    upd_txs: u64,
    counters: Counters,
    changed_bytes: u64,
    ro_locked_reads: u64,
}

/// What a worker's loop measured, before the engine's own counts are added.
struct Timed {
    ops: u64,
    ro_txs: u64,
    upd_txs: u64,
    elapsed: Duration,
    ro: Histogram<u64>,
    upd: Histogram<u64>,
    changed_bytes: u64,
    /// The thread's medium counters when the loop started.
    before: Counters,
}

/// The shared state the workers of one measurement run against.
#[derive(Clone, Copy)]
struct Gate<'a> {
    start: &'a Barrier,
    stop: &'a AtomicBool,
    done: &'a AtomicU64,
}

#[cold]
fn failed(update: bool, e: String) -> String {
    format!(
        "{} transaction failed: {e}",
        if update { "an update" } else { "a read-only" }
    )
}

/// Wait for the start, then run `op` (one transaction, `update` or not, returning the
/// bytes changed) until told to stop, timing a sample of them ([`timing`]).
fn timed_loop(
    mut op: impl FnMut(&mut OpRng, bool) -> Result<u64, String>,
    update_pct: u32,
    seed: u64,
    gate: Gate<'_>,
) -> Result<Timed, String> {
    let mut rng = OpRng::seed_from_u64(seed);
    let mut timer = OpTimer::new(seed)?;
    let mut changed_bytes = 0u64;
    let mut unreported = 0u64;
    let (mut ops, mut updates) = (0u64, 0u64);
    gate.start.wait();
    let before = counters::snapshot();
    let t0 = Instant::now();
    timer.start();
    // Relaxed: a stop flag; nothing is published through it.
    while !gate.stop.load(Ordering::Relaxed) {
        let update = match update_pct {
            0 => false,
            100.. => true,
            p => rng.gen_range(0..100) < p,
        };
        let changed = if timer.timed() {
            let t = timer.now();
            let r = op(&mut rng, update);
            timer.record(update, t, timer.now());
            r
        } else {
            op(&mut rng, update)
        }
        .map_err(|e| failed(update, e))?;
        timer.count();
        shared_counts::end_unit();
        changed_bytes += changed;
        updates += u64::from(update);
        ops += 1;
        unreported += 1;
        if unreported == 1024 {
            // Relaxed: a progress statistic.
            gate.done.fetch_add(unreported, Ordering::Relaxed);
            unreported = 0;
        }
    }
    let elapsed = t0.elapsed();
    let lat = timer.finish()?;
    gate.done.fetch_add(unreported, Ordering::Relaxed);
    Ok(Timed {
        ops,
        ro_txs: ops - updates,
        upd_txs: updates,
        elapsed,
        ro: lat.ro,
        upd: lat.upd,
        changed_bytes,
        before,
    })
}

/// A worker on a library engine's pool.
/// With `waits_outside`, the thread's emulated NVM waits are paid after each
/// transaction, inside the timed operation (an update's latency keeps its waits); with
/// `deferred`, the worker waits for its commits' durability at its end, inside its
/// measured time.
fn lib_worker(
    index: usize,
    mut h: ThreadHandle,
    data: &dyn DataSet,
    update_pct: u32,
    spec: &Spec,
    seed: u64,
    gate: Gate<'_>,
) -> Result<WorkerOut, String> {
    let (waits_outside, deferred) = (spec.waits_outside, spec.deferred);
    dram::defer_emulated_waits(waits_outside);
    crate::workloads::set_deferred_updates(deferred);
    let t = timed_loop(
        |rng, update| {
            let r = data.op(index, &mut h, rng, update);
            if waits_outside {
                dram::pay_deferred_waits();
            }
            r.map_err(|e| e.to_string())
        },
        update_pct,
        seed,
        gate,
    )?;
    let mut t = t;
    if deferred {
        // Inside the measured time: the commits counted are durable when it ends.
        let w = Instant::now();
        h.wait_durable().map_err(|e| e.to_string())?;
        t.elapsed += w.elapsed();
    }
    crate::workloads::set_deferred_updates(false);
    let stats = data.worker_done(index).unwrap_or_else(|| h.stats());
    drop(h); // writes back the pending batch on this thread: counted below
    dram::defer_emulated_waits(false);
    Ok(WorkerOut {
        commits: stats.commits + stats.failed,
        user_aborts: stats.failed,
        conflicts: stats.conflicts,
        elapsed: t.elapsed,
        ro: t.ro,
        upd: t.upd,
        ro_txs: t.ro_txs,
        upd_txs: t.upd_txs,
        counters: counters::snapshot() - t.before,
        changed_bytes: t.changed_bytes,
        ro_locked_reads: stats.ro_locked_reads,
    })
}

/// A worker on a peer's store: every operation is one committed transaction.
fn peer_worker(
    data: &PeerBench,
    update_pct: u32,
    seed: u64,
    gate: Gate<'_>,
) -> Result<WorkerOut, String> {
    let t = timed_loop(|rng, update| data.op(rng, update), update_pct, seed, gate)?;
    Ok(WorkerOut {
        commits: t.ops,
        user_aborts: 0,
        conflicts: 0,
        elapsed: t.elapsed,
        ro: t.ro,
        upd: t.upd,
        ro_txs: t.ro_txs,
        upd_txs: t.upd_txs,
        counters: counters::snapshot() - t.before,
        changed_bytes: t.changed_bytes,
        ro_locked_reads: 0,
    })
}

/// The workers of one process, started and stopped by the calling thread.
pub(crate) struct Workers<'a> {
    /// What the workers run (its thread count: the workers of this process).
    pub spec: &'a Spec,
    /// The measurement's seed.
    pub seed: u64,
    /// The measurement-wide index of this process's first worker (its seed and its
    /// CPU are those of that index): 0 in the harness's own process, `p * threads` in
    /// worker process `p`.
    pub first: usize,
    /// Where worker `first + i` runs.
    pub placement: &'a Placement,
}

impl Workers<'_> {
    /// Run `spec.threads` workers, each on a handle of `handles` (a library engine's
    /// pool, with `data`) or on `peer`: `start` is called once they are all waiting to
    /// start, they start when it returns, `drive(done)` is called while they run
    /// (`done`: transactions so far, roughly), and they stop when it returns.
    pub(crate) fn run(
        &self,
        mut handles: Vec<ThreadHandle>,
        data: Option<&dyn DataSet>,
        peer: Option<&PeerBench>,
        start: &mut dyn FnMut(),
        drive: &mut dyn FnMut(&AtomicU64),
    ) -> Vec<Result<WorkerOut, String>> {
        let spec = self.spec;
        let barrier = Barrier::new(spec.threads + 1);
        let stop = AtomicBool::new(false);
        let done = AtomicU64::new(0);
        let gate = Gate {
            start: &barrier,
            stop: &stop,
            done: &done,
        };
        std::thread::scope(|s| {
            let workers: Vec<_> = (0..spec.threads)
                .map(|i| {
                    let g = self.first + i;
                    let seed = self
                        .seed
                        .wrapping_mul(0x9e37_79b9_7f4a_7c15)
                        .wrapping_add(g as u64);
                    let pct = match (spec.dedicated_reader, g) {
                        (false, _) => spec.update_pct,
                        (true, 0) => 0,
                        (true, _) => 100,
                    };
                    let handle = (!handles.is_empty()).then(|| handles.remove(0));
                    let placement = self.placement;
                    s.spawn(move || {
                        // Pinned before the barrier: a failure still reaches the barrier.
                        let pinned = placement.apply(g);
                        match (pinned, handle, data, peer) {
                            (Err(e), _, _, _) => {
                                gate.start.wait();
                                Err(e)
                            }
                            (Ok(()), Some(h), Some(data), _) => {
                                lib_worker(i, h, data, pct, spec, seed, gate)
                            }
                            (Ok(()), _, _, Some(peer)) => peer_worker(peer, pct, seed, gate),
                            _ => {
                                gate.start.wait();
                                Err("a worker has nothing to run".into())
                            }
                        }
                    })
                })
                .collect();
            start();
            barrier.wait();
            drive(&done);
            // Relaxed: a stop flag; nothing is published through it.
            stop.store(true, Ordering::Relaxed);
            workers
                .into_iter()
                .map(|w| {
                    w.join()
                        .unwrap_or_else(|_| Err("a worker thread panicked".into()))
                })
                .collect::<Vec<_>>()
        })
    }
}

/// Call `tick(elapsed, done)` about every 50 ms until `duration` has passed or a
/// signal asked the run to stop.
pub(crate) fn watch(duration: Duration, done: &AtomicU64, tick: &mut dyn FnMut(Duration, u64)) {
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
}

#[cfg(test)]
mod tests {
    use super::run::{measure, measure_at};
    use super::*;
    use crate::engines::Engine;
    use crate::workloads::ycsb::YCSB_UPDATE_BYTES;
    use crate::workloads::Sizes;

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
            waits_outside: false,
            nvm_latency_ns: 0,
            disk: None,
            deferred: false,
            processes: 1,
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
            &Placement::new(true),
            &mut |_, _| ticks += 1,
        )
        .unwrap();
        assert!(ticks >= 2);
        assert!(o.commits > 0);
        assert_eq!(o.ro_txs + o.upd_txs, o.commits);
        assert!(!o.ro.is_empty() && !o.upd.is_empty());
        // The latencies are of a sample (every transaction at this size).
        assert!(o.ro.len() <= o.ro_txs && o.upd.len() <= o.upd_txs);
        assert!(o.changed_bytes >= 8 * o.upd_txs);
        // Pisces persists every update: a log record and a fence at least.
        assert!(o.counters.fences >= o.upd_txs, "{:?}", o.counters);
        assert!(o.counters.bytes_logged > 0 && o.counters.lines_flushed > 0);
        assert!(o.ops_per_sec > 0.0);
        assert!(!path.exists(), "the pool file was not removed");
    }

    /// With durability deferred, update commits do not each fence (a thread's records
    /// wait for a later fence), and the measurement still counts them all. (The bulk
    /// load: its transactions write distinct objects, none still locked by the
    /// thread's own batch, whose write-back would sync the records.)
    #[test]
    fn deferred_updates_fence_less_than_once_per_commit() {
        let dir = tempfile::tempdir().unwrap();
        let run = |deferred: bool| {
            let path = dir.path().join(format!("d{deferred}.pool"));
            let s = Spec {
                deferred,
                ..spec(Engine::PISCES, DataKind::Bulk(100_000), 1, 100)
            };
            measure_at(
                &path,
                &s,
                &TINY,
                0.2,
                1,
                &Placement::new(true),
                &mut |_, _| {},
            )
            .unwrap()
        };
        let (on_return, deferred) = (run(false), run(true));
        assert!(on_return.counters.fences >= on_return.upd_txs);
        assert!(deferred.upd_txs > 0 && deferred.upd_txs == deferred.commits);
        assert!(
            deferred.counters.fences < deferred.upd_txs / 2,
            "{} fences for {} deferred commits",
            deferred.counters.fences,
            deferred.upd_txs
        );
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
            &Placement::new(false),
            &mut |_, _| {},
        )
        .unwrap();
        // Every new-order is an update; rolled-back ones count as completed.
        assert!(o.commits > 100 && o.ro.is_empty(), "{}", o.commits);
        assert_eq!(o.upd_txs, o.commits);
        assert!(
            o.user_aborts < o.commits / 20,
            "{} of {}",
            o.user_aborts,
            o.commits
        );
        assert!(
            o.changed_bytes
                >= (o.commits - o.user_aborts) * crate::workloads::oltp::tpcc::changed_bytes(5)
        );
        let o = measure(
            &spec(Engine::UNDO, DataKind::Tatp, 2, 20),
            &sizes,
            0.3,
            2,
            &Placement::new(false),
            &mut |_, _| {},
        )
        .unwrap();
        assert_eq!(o.user_aborts, 0);
        assert_eq!(o.ro_txs + o.upd_txs, o.commits);
        // 80 % read-only.
        assert!(o.ro_txs > 3 * o.upd_txs && o.ro_txs < 5 * o.upd_txs);
    }

    #[test]
    fn a_failed_measurement_removes_its_pool_too() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.pool");
        let bad = Sizes {
            hash_buckets: 0, // refused by HashMap::fixed: the preload fails
            ..TINY
        };
        let e = measure_at(
            &path,
            &spec(Engine::UNDO, DataKind::Hash, 1, 0),
            &bad,
            0.1,
            1,
            &Placement::new(false),
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
            &Placement::new(false),
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
            &Placement::new(false),
            &mut |_, _| {},
        )
        .unwrap();
        assert!(!o.upd.is_empty() && o.changed_bytes > 0);
        // No log and no write-back persistence; only the allocator persists its own
        // metadata when it formats a new slab (rarely).
        assert_eq!(o.counters.bytes_logged, 0);
        assert!(o.counters.fences * 20 < o.upd_txs, "{:?}", o.counters);
    }

    /// The string-keyed map on a library engine and a peer: both run reads and
    /// updates, report the new values' bytes, and the check after the run passes
    /// (every record present with a whole value of its own).
    #[test]
    fn strmap_runs_on_an_engine_and_a_peer_and_checks_its_records() {
        for e in [Engine::PISCES, Engine::REDB] {
            let dir = tempfile::tempdir().unwrap();
            let o = measure_at(
                &dir.path().join("strmap"),
                &spec(e, DataKind::StrMap(2000), 2, 50),
                &TINY,
                0.2,
                1,
                &Placement::new(false),
                &mut |_, _| {},
            )
            .unwrap();
            let name = e.name();
            assert!(
                o.ro_txs > 0 && o.upd_txs > 0,
                "{name}: {} {}",
                o.ro_txs,
                o.upd_txs
            );
            assert_eq!(o.ro_txs + o.upd_txs, o.commits, "{name}");
            assert!(
                (16 * o.upd_txs..=512 * o.upd_txs).contains(&o.changed_bytes),
                "{name}: {} bytes in {} updates",
                o.changed_bytes,
                o.upd_txs
            );
        }
    }

    /// The peers run the key-value data sets through the same workers; their files go
    /// with the measurement, and an update is one committed transaction of the store.
    #[test]
    fn peers_are_measured_and_their_directory_removed() {
        for e in Engine::peers() {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("peer");
            let o = measure_at(
                &path,
                &spec(e, DataKind::Ycsb(2000), 2, 50),
                &TINY,
                0.2,
                1,
                &Placement::new(true),
                &mut |_, _| {},
            )
            .unwrap();
            let name = e.name();
            assert!(o.commits > 20, "{name}: {}", o.commits);
            assert_eq!(o.ro_txs + o.upd_txs, o.commits, "{name}");
            assert_eq!(o.changed_bytes, YCSB_UPDATE_BYTES * o.upd_txs, "{name}");
            assert_eq!(o.user_aborts, 0, "{name}");
            if e != Engine::CANOPYDB {
                // Their writers wait for each other.
                assert_eq!(o.conflicts, 0, "{name}");
            }
            // Nothing goes through the pool's medium.
            assert_eq!(o.counters.bytes_logged, 0, "{name}");
            assert!(!path.exists(), "{name}: the store was not removed");
            let e = measure_at(
                &path,
                &spec(e, DataKind::Tree, 1, 0),
                &TINY,
                0.1,
                1,
                &Placement::new(false),
                &mut |_, _| {},
            )
            .err()
            .unwrap();
            assert!(e.contains("key-value"), "{name}: {e}");
            assert!(!path.exists(), "{name}: a failed store was not removed");
        }
    }

    /// The counting build reports the writes to shared words: an update of Pisces
    /// writes at least the clock, the header word it locks and unlocks and its slot's
    /// batch lock; a lookup writes none. (Other tests of this process count at the
    /// same time, so only lower bounds hold for the totals.)
    #[cfg(feature = "shared-counts")]
    #[test]
    fn the_counting_build_reports_shared_writes() {
        use crate::report::Row;
        let s = spec(Engine::PISCES, DataKind::Hash, 1, 100);
        let o = measure(&s, &TINY, 0.2, 1, &Placement::new(false), &mut |_, _| {}).unwrap();
        assert!(
            o.shared.writes >= 5 * o.upd_txs,
            "{:?} {}",
            o.shared,
            o.upd_txs
        );
        assert!(
            o.shared.lines >= 3 * o.upd_txs,
            "{:?} {}",
            o.shared,
            o.upd_txs
        );
        let row = Row::new(&s, 1, &o);
        assert!(row.shared_rmw_per_tx >= 5.0 && row.shared_lines_per_tx >= 3.0);
        let redb = spec(Engine::REDB, DataKind::Hash, 1, 100);
        let o = measure(&redb, &TINY, 0.1, 1, &Placement::new(false), &mut |_, _| {}).unwrap();
        assert!(Row::new(&redb, 1, &o).shared_rmw_per_tx.is_nan());
    }

    #[test]
    fn a_worker_that_cannot_be_pinned_fails_the_measurement() {
        let bad = Placement::Pinned { cpus: vec![1000] };
        let e = measure(
            &spec(Engine::PISCES, DataKind::Hash, 2, 50),
            &TINY,
            0.1,
            1,
            &bad,
            &mut |_, _| {},
        )
        .err()
        .unwrap();
        assert!(e.contains("pinning worker 0 to CPU 1000"), "{e}");
    }
}
