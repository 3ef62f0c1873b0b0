//! The `recovery` workload: how long recovery takes, and how fast it replays log, for
//! a log of a given size (default 256 MiB), with 1 and 2 recovery threads.
//!
//! # One measurement
//! 1. A fresh pool under `/dev/shm` (the emulated DRAM medium, no added NVM latency)
//!    with [`FILL_THREADS`] thread slots, each log sized by the engine's
//!    [`Engine::log_size_for`] so that the fill below never reaches the point where the
//!    engine checkpoints (writes home and truncates) by itself. A hash table
//!    (`HashMap<u64, [u8; 64]>`, [`BUCKETS`] buckets, [`KEYS`] keys) is preloaded from
//!    one thread handle, which is then dropped: the engine retires (checkpoints) the
//!    preload, so the logs start empty.
//! 2. The fill: [`FILL_THREADS`] threads overwrite the value of a random key of their
//!    own residue class (key mod threads), one transaction each, until each thread's
//!    medium counter of bytes logged reaches its share of the target. Each thread
//!    remembers the last value it committed for each of its keys.
//! 3. The crash: while the fill's thread handles are still held (so no thread-exit
//!    checkpoint has run) and nothing runs, the pool file is copied. The copy is what a
//!    `kill -9` at that point leaves behind on a DAX file or `/dev/shm`: every store
//!    reached the file, nothing of the engine's close ran, the logs are full. The
//!    original pool is then closed and removed (untimed).
//! 4. For each recovery thread count: a fresh copy of the crash image, then a fresh
//!    child process (the harness's own program, [`crate::recovery::child`]) maps it and
//!    times `Pool::open` with `recovery_threads` set (recovery: parse the logs,
//!    rebuild, replay, retire), closes it, and times a second open of the same file,
//!    as the fixed cost of opening a pool of this size without anything to replay. A
//!    fresh process is what a user meets after a crash; the filling process would
//!    recover with its own heap and page tables warm from the fill (its first
//!    measurements did, and spent a quarter of the open in the kernel zeroing pages).
//!    The harness then opens the recovered pool itself and checks the table against
//!    the values the fill committed (every key of every thread).
//!
//! Space: the pool holds the logs (for sp3 twice the log size, see below) and the
//! heap (about 230 MB), and two such files exist at once (the pool and its crash
//! image, then the image and the copy being recovered): about 1.6 GB under `/dev/shm`
//! for the default 256 MiB.
//!
//! Reported per engine, recovery thread count and run: log bytes (the sum of the
//! fill threads' bytes-logged counters: the records recovery must read), transactions
//! in the log, the open's wall seconds, CPU seconds (all threads) and the kernel's
//! part of them, GB/s of log (10^9 bytes per wall second of the open), GB per CPU
//! second, transactions replayed per second, and the clean open's seconds. The table
//! shows medians over runs.
//!
//! # Which engines
//! Those for which [`Engine::log_size_for`] names how much log a thread may write
//! before the engine truncates it by itself (SP3: half its log, the point where a
//! commit starts a checkpoint). Engines that truncate their log at every commit or
//! group commit (pisces, undo) have at most a batch to replay, whatever the run; the
//! others are skipped with the reason (`Engine::log_size_for`'s error).

pub mod child;
pub mod replay;

use crate::engines::Engine;
use crate::measure::pool_dir;
use crate::recovery::child::{Opener, Timing};
use crate::report::median;
use crate::report::table::Table;
use pisces::medium::counters;
use pisces::{BTreeMap, Config, EngineOptions, HashMap, MediumKind, Pool};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// Threads that fill the logs (and thread slots of the pool).
pub const FILL_THREADS: usize = 2;
/// Recovery thread counts measured.
pub const RECOVERY_THREADS: [usize; 2] = [1, 2];
/// Keys of the hash table the fill overwrites.
pub const KEYS: usize = 100_000;
/// Buckets of that hash table.
pub const BUCKETS: usize = 10_000;

type Table64 = HashMap<u64, [u8; 64]>;
type Tree64 = BTreeMap<u64, [u8; 64]>;

/// The value thread `t` writes to key `k` in its transaction number `seq`.
fn value(t: usize, k: u64, seq: u64) -> [u8; 64] {
    let mut v = [0u8; 64];
    v[..8].copy_from_slice(&(t as u64).to_le_bytes());
    v[8..16].copy_from_slice(&k.to_le_bytes());
    v[16..24].copy_from_slice(&seq.to_le_bytes());
    v
}

/// One run of one engine with one recovery thread count.
#[derive(Clone, Debug)]
pub struct RecoveryRow {
    /// Engine name.
    pub engine: String,
    /// Run number, from 1.
    pub run: u32,
    /// Recovery threads.
    pub recovery_threads: usize,
    /// Log bytes the fill appended (what recovery reads and replays).
    pub log_bytes: u64,
    /// Transactions the fill committed (records in the log).
    pub transactions: u64,
    /// What the child process measured: the open of the crash image (recovery) and
    /// the clean reopen.
    pub timing: Timing,
}

impl RecoveryRow {
    /// Log replayed per wall second of recovery, in GB (10^9 bytes).
    pub fn gb_per_sec(&self) -> f64 {
        self.log_bytes as f64 / 1e9 / self.timing.open_secs
    }
    /// Log replayed per CPU second of recovery, in GB.
    pub fn gb_per_cpu_sec(&self) -> f64 {
        self.log_bytes as f64 / 1e9 / self.timing.cpu_secs
    }
    /// Transactions replayed per second of recovery.
    pub fn tx_per_sec(&self) -> f64 {
        self.transactions as f64 / self.timing.open_secs
    }
}

/// The CSV header of `recovery.csv`.
pub const CSV_HEADER: &str =
    "engine,run,recovery_threads,log_bytes,transactions,recovery_secs,recovery_cpu_secs,recovery_sys_secs,minor_faults,gb_per_sec,gb_per_cpu_sec,tx_per_sec,clean_open_secs";

impl RecoveryRow {
    /// The CSV line (no newline), columns as [`CSV_HEADER`].
    pub fn to_csv(&self) -> String {
        format!(
            "{},{},{},{},{},{:.6},{:.2},{:.2},{},{:.3},{:.3},{:.0},{:.6}",
            self.engine,
            self.run,
            self.recovery_threads,
            self.log_bytes,
            self.transactions,
            self.timing.open_secs,
            self.timing.cpu_secs,
            self.timing.sys_secs,
            self.timing.minor_faults,
            self.gb_per_sec(),
            self.gb_per_cpu_sec(),
            self.tx_per_sec(),
            self.timing.clean_open_secs
        )
    }
}

/// Removes a file when dropped (best effort: it may not exist).
pub(crate) struct Remove(pub(crate) PathBuf);

impl Drop for Remove {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

pub(crate) fn unique(dir: &Path, what: &str) -> PathBuf {
    static N: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    // Relaxed: a counter that only needs to be unique.
    let n = N.fetch_add(1, Ordering::Relaxed);
    dir.join(format!(
        "pisces-bench-recovery-{}-{n}-{nanos}-{what}.pool",
        std::process::id()
    ))
}

pub(crate) fn plain_dram() -> MediumKind {
    MediumKind::Dram {
        write_latency_ns: 0,
        bandwidth_bytes_per_sec: 0,
    }
}

/// How the logs are filled: shared by this workload and `replay`.
#[derive(Clone, Debug)]
pub(crate) struct FillSpec {
    /// The engine.
    pub engine: Engine,
    /// Engine options of the fill. Empty: the pool stays open from the preload on;
    /// else the preload's pool (default options) is closed, which leaves its logs
    /// empty, and reopened with these (spht: `replay_hold=true`).
    pub fill_options: EngineOptions,
    /// `log_bytes_per_thread` of the pool.
    pub log_per_thread: usize,
    /// A B+-tree of the same keys besides the hash table; the fill transactions
    /// alternate between the two.
    pub btree: bool,
}

impl FillSpec {
    /// The `recovery` workload's fill: `engine` with its default options, the hash
    /// table alone, logs sized so the fill threads together hold `log_bytes`.
    fn recovery(engine: Engine, log_bytes: u64) -> Result<FillSpec, String> {
        Ok(FillSpec {
            engine,
            fill_options: EngineOptions::new(),
            log_per_thread: engine
                .log_size_for(log_bytes.div_ceil(FILL_THREADS as u64) as usize)
                .map_err(|why| format!("{}: {why}", engine.name()))?,
            btree: false,
        })
    }
}

/// One timed open of a copy of the crash image.
#[derive(Clone, Debug)]
pub(crate) struct OpenSpec {
    /// Engine options of the open (and of the clean reopen).
    pub options: EngineOptions,
    /// `recovery_threads` of the open.
    pub threads: usize,
}

/// What the fill left: the crash image and what recovery must restore.
pub(crate) struct Filled {
    map: Table64,
    tree: Option<Tree64>,
    /// Per fill thread, per container (hash table, B+-tree): the last sequence number
    /// committed for each of its keys (0: none; the preloaded value is then expected).
    last: Vec<[Vec<u64>; 2]>,
    pub(crate) log_bytes: u64,
    pub(crate) transactions: u64,
}

/// What one fill thread leaves: the last sequence number per container and key, its
/// log bytes, its transactions, and its handle (held until the crash image is taken).
type FillThread = ([Vec<u64>; 2], u64, u64, pisces::ThreadHandle);

/// Create the pool and preload the containers from one thread handle, which is then
/// dropped: the engine retires (checkpoints) the preload.
fn preload(spec: &FillSpec, path: &Path) -> Result<(Pool, Table64, Option<Tree64>), String> {
    let mut heap = 512 * 2 * KEYS as u64 + (128 << 20);
    if spec.btree {
        heap += 512 * 2 * KEYS as u64;
    }
    let size = (heap + (FILL_THREADS * spec.log_per_thread) as u64).next_multiple_of(1 << 20);
    let cfg = Config {
        medium: plain_dram(),
        ..spec.engine.config(size, FILL_THREADS)
    };
    let cfg = Config {
        log_bytes_per_thread: spec.log_per_thread,
        ..cfg
    };
    let pool = Pool::create(path, cfg).map_err(|e| format!("creating the pool: {e}"))?;
    let mut h = pool.handle().map_err(|e| e.to_string())?;
    let (map, tree) = h
        .run(|tx| {
            let map = Table64::create(tx, BUCKETS)?;
            let tree = if spec.btree {
                Some(Tree64::create(tx)?)
            } else {
                None
            };
            Ok((map, tree))
        })
        .map_err(|e| format!("creating the containers: {e}"))?;
    for batch in (0..KEYS as u64).collect::<Vec<_>>().chunks(64) {
        h.run(|tx| {
            for &k in batch {
                map.insert(tx, k, value(usize::MAX, k, 0))?;
                if let Some(t) = &tree {
                    t.insert(tx, k, value(usize::MAX, k, 0))?;
                }
            }
            Ok(())
        })
        .map_err(|e| format!("preloading: {e}"))?;
    }
    drop(h);
    if spec.fill_options.is_empty() {
        return Ok((pool, map, tree));
    }
    drop(pool);
    let cfg = Config {
        medium: plain_dram(),
        engine: spec.engine.id(),
        engine_options: spec.fill_options.clone(),
        ..Config::default()
    };
    let pool = Pool::open(path, cfg).map_err(|e| format!("reopening for the fill: {e}"))?;
    Ok((pool, map, tree))
}

/// Steps 1 to 3 of the module docs: a pool in `dir` filled with `log_bytes` of log,
/// copied to `image` while the fill's handles are held.
pub(crate) fn fill(
    spec: &FillSpec,
    dir: &Path,
    image: &Path,
    log_bytes: u64,
    seed: u64,
) -> Result<Filled, String> {
    let per_thread = log_bytes.div_ceil(FILL_THREADS as u64);
    let path = unique(dir, "fill");
    let _remove = Remove(path.clone());
    let (pool, map, tree) = preload(spec, &path)?;
    let handles = (0..FILL_THREADS)
        .map(|_| pool.handle())
        .collect::<pisces::Result<Vec<_>>>()
        .map_err(|e| format!("taking thread handles: {e}"))?;
    let tree = &tree;
    let outs: Vec<Result<FillThread, String>> = std::thread::scope(|s| {
        let workers: Vec<_> = handles
            .into_iter()
            .enumerate()
            .map(|(t, mut h)| {
                s.spawn(move || {
                    let mut rng = StdRng::seed_from_u64(seed ^ ((t as u64 + 1) * 0x9e37));
                    let mine = KEYS.div_ceil(FILL_THREADS);
                    let mut last = [vec![0u64; mine], vec![0u64; mine]];
                    let before = counters::snapshot().bytes_logged;
                    let mut seq = 0u64;
                    while counters::snapshot().bytes_logged - before < per_thread {
                        let i = rng.gen_range(0..mine);
                        let k = (i * FILL_THREADS + t) as u64;
                        if k >= KEYS as u64 {
                            continue;
                        }
                        seq += 1;
                        // With a B+-tree, odd transactions update it, even ones the
                        // hash table.
                        let in_tree = tree.is_some() && seq % 2 == 1;
                        h.run(|tx| {
                            let v = match tree {
                                Some(t) if in_tree => t.get_mut(tx, &k)?,
                                _ => map.get_mut(tx, &k)?,
                            };
                            let v = v.ok_or_else(|| {
                                pisces::Error::Corrupt(format!("key {k} is missing"))
                            })?;
                            *v = value(t, k, seq);
                            Ok(())
                        })
                        .map_err(|e| format!("fill transaction: {e}"))?;
                        last[usize::from(in_tree)][i] = seq;
                    }
                    let logged = counters::snapshot().bytes_logged - before;
                    Ok((last, logged, seq, h))
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|w| {
                w.join()
                    .unwrap_or_else(|_| Err("a fill thread panicked".into()))
            })
            .collect()
    });
    let mut filled = Filled {
        map,
        tree: *tree,
        last: Vec::new(),
        log_bytes: 0,
        transactions: 0,
    };
    let mut held = Vec::new();
    for o in outs {
        let (last, logged, txs, h) = o?;
        filled.last.push(last);
        filled.log_bytes += logged;
        filled.transactions += txs;
        held.push(h);
    }
    // The crash: the image as a kill -9 now would leave it.
    std::fs::copy(&path, image).map_err(|e| format!("copying the crash image: {e}"))?;
    drop(held);
    drop(pool);
    Ok(filled)
}

/// Check that the recovered containers hold every value the fill committed.
fn verify(pool: &Pool, f: &Filled) -> Result<(), String> {
    let mut h = pool.handle().map_err(|e| e.to_string())?;
    for (t, last) in f.last.iter().enumerate() {
        for (c, last) in last.iter().enumerate() {
            let tree = match (c, &f.tree) {
                (0, _) => None,
                (_, Some(tree)) => Some(tree),
                (_, None) => continue,
            };
            // Small transactions: an engine may revalidate its whole read set on each
            // read.
            for chunk in last.iter().enumerate().collect::<Vec<_>>().chunks(16) {
                h.run(|tx| {
                    for &(i, &seq) in chunk {
                        let k = (i * FILL_THREADS + t) as u64;
                        if k >= KEYS as u64 {
                            continue;
                        }
                        let want = if seq == 0 {
                            value(usize::MAX, k, 0)
                        } else {
                            value(t, k, seq)
                        };
                        let got = match tree {
                            Some(tree) => tree.get(tx, &k)?,
                            None => f.map.get(tx, &k)?,
                        };
                        if got != Some(want) {
                            return Err(pisces::Error::Corrupt(format!(
                                "key {k} of the {}: the recovered value is not the last \
                                 committed one",
                                if tree.is_some() {
                                    "B+-tree"
                                } else {
                                    "hash table"
                                }
                            )));
                        }
                    }
                    Ok(())
                })
                .map_err(|e| format!("after recovery: {e}"))?;
            }
        }
    }
    Ok(())
}

/// Fill `log_bytes` of log as `spec` says, crash, then have `opener` time each open
/// of `opens` on a fresh copy of the crash image (and a clean reopen), and check every
/// value. Returns the log bytes, the transactions, and one timing per open. Pool
/// files go to `dir` and are removed.
pub(crate) fn measure_opens(
    spec: &FillSpec,
    log_bytes: u64,
    seed: u64,
    dir: &Path,
    opens: &[OpenSpec],
    opener: &Opener,
) -> Result<(u64, u64, Vec<Timing>), String> {
    let image = unique(dir, "crash");
    let _remove_image = Remove(image.clone());
    let f = fill(spec, dir, &image, log_bytes, seed)?;
    let mut timings = Vec::new();
    for open in opens {
        let work = unique(dir, "recover");
        let _remove = Remove(work.clone());
        std::fs::copy(&image, &work).map_err(|e| format!("copying the crash image: {e}"))?;
        let timing = opener.open(&work, spec.engine.id(), open.threads, &open.options)?;
        // The opener recovered the pool and closed it: this open has nothing to
        // replay (untimed).
        let cfg = Config {
            medium: plain_dram(),
            engine: spec.engine.id(),
            engine_options: open.options.clone(),
            ..Config::default()
        };
        let pool = Pool::open(&work, cfg).map_err(|e| format!("reopening to check: {e}"))?;
        verify(&pool, &f)?;
        drop(pool);
        timings.push(timing);
    }
    Ok((f.log_bytes, f.transactions, timings))
}

/// One run of `engine`: fill `log_bytes` of log, crash, recover with each thread count
/// of [`RECOVERY_THREADS`]. Pool files go to `dir` and are removed.
pub fn measure(
    engine: Engine,
    log_bytes: u64,
    run: u32,
    seed: u64,
    dir: &Path,
    opener: &Opener,
) -> Result<Vec<RecoveryRow>, String> {
    let spec = FillSpec::recovery(engine, log_bytes)?;
    let opens: Vec<OpenSpec> = RECOVERY_THREADS
        .iter()
        .map(|&threads| OpenSpec {
            options: EngineOptions::new(),
            threads,
        })
        .collect();
    let (log_bytes, transactions, timings) =
        measure_opens(&spec, log_bytes, seed, dir, &opens, opener)?;
    Ok(opens
        .iter()
        .zip(timings)
        .map(|(o, t)| RecoveryRow {
            engine: engine.name().into(),
            run,
            recovery_threads: o.threads,
            log_bytes,
            transactions,
            timing: t,
        })
        .collect())
}

/// Steps 1 to 3 of the module docs for `engine` alone: leave at `image` the crash
/// image of a pool whose logs hold `log_bytes` of log (for profiling recovery outside
/// the harness, `examples/recovery_open.rs`). Returns the log bytes and transactions.
pub fn crash_image(
    engine: Engine,
    log_bytes: u64,
    seed: u64,
    dir: &Path,
    image: &Path,
) -> Result<(u64, u64), String> {
    let spec = FillSpec::recovery(engine, log_bytes)?;
    let f = fill(&spec, dir, image, log_bytes, seed)?;
    Ok((f.log_bytes, f.transactions))
}

/// The engines of `engines` that the workload measures, and notes on the others.
pub fn engines(engines: &[Engine]) -> (Vec<Engine>, Vec<String>) {
    let mut run = Vec::new();
    let mut notes = Vec::new();
    for &e in engines {
        match e.log_size_for(1 << 20) {
            Ok(_) => run.push(e),
            Err(why) => notes.push(format!("recovery: {} skipped ({why})", e.name())),
        }
    }
    (run, notes)
}

/// The table of `rows`: medians over runs per engine and recovery thread count.
pub fn table(rows: &[RecoveryRow]) -> String {
    let mut t = Table::new(
        [
            "engine",
            "rec thr",
            "log MiB",
            "txns",
            "open s",
            "cpu s",
            "sys s",
            "GB/s",
            "GB/cpu s",
            "txns/s",
            "clean open s",
            "t1/tN",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect(),
    );
    let mut engines: Vec<&str> = Vec::new();
    for r in rows {
        if !engines.contains(&r.engine.as_str()) {
            engines.push(&r.engine);
        }
    }
    for e in engines {
        for threads in RECOVERY_THREADS {
            let of: Vec<&RecoveryRow> = rows
                .iter()
                .filter(|r| r.engine == e && r.recovery_threads == threads)
                .collect();
            if of.is_empty() {
                continue;
            }
            let m = |f: fn(&RecoveryRow) -> f64| median(of.iter().map(|r| f(r)));
            // Speed-up over 1 recovery thread: the median of the per-run ratios.
            let speedup = median(of.iter().filter_map(|r| {
                rows.iter()
                    .find(|o| o.engine == e && o.run == r.run && o.recovery_threads == 1)
                    .map(|o| o.timing.open_secs / r.timing.open_secs)
            }));
            t.push(vec![
                e.to_string(),
                threads.to_string(),
                format!("{:.1}", m(|r| r.log_bytes as f64) / f64::from(1 << 20)),
                format!("{:.0}", m(|r| r.transactions as f64)),
                format!("{:.3}", m(|r| r.timing.open_secs)),
                format!("{:.2}", m(|r| r.timing.cpu_secs)),
                format!("{:.2}", m(|r| r.timing.sys_secs)),
                format!("{:.2}", m(RecoveryRow::gb_per_sec)),
                format!("{:.2}", m(RecoveryRow::gb_per_cpu_sec)),
                format!("{:.0}", m(RecoveryRow::tx_per_sec)),
                format!("{:.3}", m(|r| r.timing.clean_open_secs)),
                format!("{speedup:.2}x"),
            ]);
        }
    }
    format!(
        "recovery: a crash with full logs ({FILL_THREADS} fill threads overwriting 64-byte \
         values of a {KEYS}-key hash table), then Pool::open timed in a fresh process with \
         1 and 2 recovery threads (median over runs; open s = wall seconds of the open; \
         cpu s = CPU seconds of the child during the open, all threads, sys s = the \
         kernel's part; GB/s = log bytes / open s; GB/cpu s = log bytes / cpu s; clean \
         open = the same pool reopened after a clean close; t1/tN = open s with 1 thread \
         / with N, median of per-run ratios)\n{}\n",
        t.render()
    )
}

/// Run the workload for `engines` (`runs` runs, `log_mib` MiB of log each), writing
/// `recovery.csv` to `out`. Returns the table text and the failures; `progress` gets a
/// line per measurement.
pub fn run(
    engines: &[Engine],
    log_mib: u64,
    runs: u32,
    seed: u64,
    out: &Path,
    progress: &mut dyn FnMut(&str),
) -> (String, Vec<String>) {
    let mut rows = Vec::new();
    let mut failures = Vec::new();
    let mut csv = format!("{CSV_HEADER}\n");
    let opener = match Opener::this_program() {
        Ok(o) => o,
        Err(e) => {
            failures.push(format!("recovery: {e}"));
            return (String::new(), failures);
        }
    };
    for run in 1..=runs {
        for &e in engines {
            if crate::measure::signal::interrupted() {
                break;
            }
            let what = format!("recovery {} {log_mib} MiB run {run}/{runs}", e.name());
            match measure(
                e,
                log_mib << 20,
                run,
                seed ^ u64::from(run),
                &pool_dir(),
                &opener,
            ) {
                Ok(rs) => {
                    for r in &rs {
                        let _ = writeln!(csv, "{}", r.to_csv());
                        progress(&format!(
                            "{what}: {} recovery threads: {:.3} s, {:.2} GB/s, {:.2} GB/cpu s",
                            r.recovery_threads,
                            r.timing.open_secs,
                            r.gb_per_sec(),
                            r.gb_per_cpu_sec()
                        ));
                    }
                    rows.extend(rs);
                }
                Err(err) => failures.push(format!("{what}: {err}")),
            }
        }
    }
    let text = finish(out, "recovery.csv", &csv, &rows, table, &mut failures);
    (text, failures)
}

/// The end of a log-replay measurement: write `csv` to `out/name` (a failure to write
/// it joins `failures`) and render `rows` with `table` (nothing without rows).
pub(crate) fn finish<R>(
    out: &Path,
    name: &str,
    csv: &str,
    rows: &[R],
    table: fn(&[R]) -> String,
    failures: &mut Vec<String>,
) -> String {
    if let Err(e) = std::fs::write(out.join(name), csv) {
        failures.push(format!("writing {name}: {e}"));
    }
    if rows.is_empty() {
        String::new()
    } else {
        table(rows)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small log (4 MiB) on sp3: the fill commits transactions, their log is in the
    /// crash image (the engine's inspection counts them as live records), and both
    /// recoveries restore every committed value (checked inside `measure`).
    #[test]
    fn sp3_recovers_a_full_log_with_one_and_two_threads() {
        let dir = tempfile::tempdir().unwrap();
        let image = dir.path().join("crash.pool");
        let spec = FillSpec {
            engine: Engine::SP3,
            fill_options: EngineOptions::new(),
            log_per_thread: Engine::SP3.log_size_for(2 << 20).unwrap(),
            btree: false,
        };
        let f = fill(&spec, dir.path(), &image, 4 << 20, 1).unwrap();
        assert!(
            f.log_bytes >= 4 << 20 && f.transactions > 1000,
            "{}",
            f.transactions
        );
        let report = pisces::check::check_pool(&image, plain_dram()).unwrap();
        let lines = report.engine_state.unwrap().lines.join("\n");
        assert!(
            lines.contains(&format!(
                "recovery would replay {} and drop 0",
                f.transactions
            )),
            "every fill transaction must be in the log: {lines}"
        );
        let rows = measure(Engine::SP3, 4 << 20, 1, 2, dir.path(), &Opener::InProcess).unwrap();
        assert_eq!(rows.len(), 2);
        assert!(rows
            .iter()
            .all(|r| r.timing.open_secs > 0.0 && r.log_bytes >= 4 << 20));
        let t = table(&rows);
        assert!(t.contains("sp3") && t.contains("1.00x"), "{t}");
        // Only this test's files are left in the directory: the crash image above.
        let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(left.len(), 1);
    }

    #[test]
    fn engines_that_truncate_their_logs_are_skipped_with_a_reason() {
        let (run, notes) = engines(&[Engine::PISCES, Engine::SP3, Engine::UNDO]);
        assert_eq!(run, [Engine::SP3]);
        assert_eq!(notes.len(), 2, "{notes:?}");
        assert!(
            notes[0].starts_with("recovery: pisces skipped ("),
            "{notes:?}"
        );
    }
}
