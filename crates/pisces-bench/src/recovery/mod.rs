//! The `recovery` and `replay` workloads: one measurement of how long `Pool::open`
//! takes on a pool whose logs a crash left full, and how fast it replays them.
//!
//! The measurement ([`crash`]): a pool under `/dev/shm` is filled with a given amount
//! of log by [`FILL_THREADS`] threads overwriting the values of a hash table (and a
//! B+-tree), copied as a `kill -9` leaves it, and each configuration of the workload
//! ([`Open`]) opens a fresh copy of that crash image, timed in a fresh child process
//! ([`child`]); every recovered value is then checked against the last one committed.
//! The two workloads ([`RecoveryWorkload`]) differ in what they fill and how they open:
//!
//! * `recovery`: every engine that can leave that much log to a crash, with its
//!   default options, on the hash table alone; opened with 1 and 2 recovery threads
//!   ([`RECOVERY_THREADS`]).
//! * `replay`: the `spht` engine with its background replayer held during the fill,
//!   so every durable transaction stays in the logs, on the hash table and the
//!   B+-tree (alternating); opened per replay mode (forward links, timestamp scan of
//!   the per-thread logs, backward links), duplicate filter off and on, and 1 and 2
//!   replay threads. Recovery on open is the engine's replay (`engine::spht::recovery`:
//!   parse and checksum the logs, order the records, decode, and apply them on
//!   `replayers` shards with the background replayer's apply code).
//!
//! Reported per engine, open and run ([`Row`], `recovery.csv` and `replay.csv` in the
//! report directory): log bytes (the sum of the fill threads' bytes-logged counters:
//! the records recovery must read), transactions in the log, the open's wall seconds,
//! CPU seconds (all threads of the child) and the kernel's part of them, minor page
//! faults, GB/s of log (10^9 bytes per wall second of the open, including its fixed
//! cost: compare the clean open), GB per CPU second, transactions replayed per second,
//! and the clean open's seconds. The tables show medians over runs; `recovery` adds
//! the speed-up of N recovery threads over 1, `replay` the target line.
//!
//! # Which engines
//! `recovery`: those for which [`Engine::log_size_for`] names how much log a thread
//! may write before the engine truncates it by itself (SP3: half its log, the point
//! where a commit starts a checkpoint). Engines that truncate their log at every
//! commit or group commit (pisces, undo) have at most a batch to replay, whatever the
//! run; the others are skipped with the reason (`Engine::log_size_for`'s error).
//! `replay`: spht only, whatever `--engines` says.
//!
//! # Space under `/dev/shm`
//! A pool holds the logs and the heap, and two such files exist at once (the pool and
//! its crash image, then the image and the copy being opened). `recovery`: about
//! 230 MB of heap, and for sp3 twice the log size; about 1.6 GB for 256 MiB of log.
//! `replay`: about 330 MB of heap; about 2.8 GB for 1 GiB of log.

pub mod child;
pub mod crash;
pub mod words;

use crate::engines::{self, Engine};
use crate::measure::pool_dir;
use crate::measure::signal::interrupted;
use crate::report::median;
use crate::report::table::Table;
use crate::workloads::select::WorkloadKind;
use child::{Opener, Timing};
use crash::{FillSpec, OpenSpec, FILL_THREADS, KEYS};
use pisces::EngineOptions;
use std::fmt::Write as _;
use std::path::Path;

/// Recovery thread counts of the `recovery` workload.
pub const RECOVERY_THREADS: [usize; 2] = [1, 2];
/// Replay threads of the `replay` workload.
pub const REPLAYERS: [usize; 2] = [1, 2];
/// The log size from which a replay counts for the `replay` target.
const TARGET_LOG_BYTES: u64 = 256 << 20;

/// How the `replay` workload fills the logs (`pisces-bench --replay-*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReplayFill {
    /// Fill (logging) threads: one log each.
    pub threads: usize,
    /// 0: the hash table and B+-tree fill. N: the word fill ([`words`]), N words per
    /// transaction.
    pub writes: usize,
    /// The word fill's heap: MiB of words (the key space).
    pub heap_mib: u64,
    /// Transactions in all (0: fill the log size given instead).
    pub txns: u64,
}

impl Default for ReplayFill {
    /// The hash table and B+-tree fill by [`FILL_THREADS`] threads, to a log size.
    fn default() -> ReplayFill {
        ReplayFill {
            threads: FILL_THREADS,
            writes: 0,
            heap_mib: 1,
            txns: 0,
        }
    }
}

impl ReplayFill {
    /// The word fill's shape, if this is one.
    fn words(&self) -> Option<words::Shape> {
        (self.writes > 0).then(|| words::Shape::new(self.heap_mib << 20, self.writes))
    }

    /// The fill in words (the table heading and the progress lines).
    pub fn describe(&self) -> String {
        let what = match self.words() {
            Some(w) => format!(
                "{} thread(s) writing {} random word(s) per transaction of a {} MiB heap \
                 ({} words)",
                self.threads, w.writes, self.heap_mib, w.words
            ),
            None => format!(
                "{} thread(s) overwriting 64-byte values of a {KEYS}-key hash table and \
                 B+-tree",
                self.threads
            ),
        };
        if self.txns > 0 {
            format!("{what}, {} transactions", self.txns)
        } else {
            what
        }
    }
}

/// The two workloads of the measurement (module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecoveryWorkload {
    /// `recovery`: an engine's full logs, opened with 1 and 2 recovery threads.
    Recovery,
    /// `replay`: spht's held logs, opened per replay configuration.
    Replay,
}

impl RecoveryWorkload {
    /// The workload's name (in `--workloads`, notes and failures).
    pub fn name(self) -> &'static str {
        match self {
            RecoveryWorkload::Recovery => WorkloadKind::Recovery.name(),
            RecoveryWorkload::Replay => WorkloadKind::Replay.name(),
        }
    }

    /// The CSV file in the report directory.
    fn csv_name(self) -> &'static str {
        match self {
            RecoveryWorkload::Recovery => "recovery.csv",
            RecoveryWorkload::Replay => "replay.csv",
        }
    }

    /// The CSV header: `engine,run`, the columns of the open ([`Open::csv`]), then
    /// those every row has ([`Row::to_csv`]).
    fn csv_header(self) -> &'static str {
        match self {
            RecoveryWorkload::Recovery => {
                "engine,run,recovery_threads,log_bytes,transactions,recovery_secs,\
                 recovery_cpu_secs,recovery_sys_secs,minor_faults,gb_per_sec,gb_per_cpu_sec,\
                 tx_per_sec,clean_open_secs"
            }
            RecoveryWorkload::Replay => {
                "engine,run,mode,dup_filter,replayers,log_bytes,transactions,open_secs,\
                 open_cpu_secs,open_sys_secs,minor_faults,gb_per_sec,gb_per_cpu_sec,\
                 tx_per_sec,clean_open_secs"
            }
        }
    }

    /// How `engine`'s logs are filled with `log_bytes` of log (all fill threads).
    fn fill(self, engine: Engine, log_bytes: u64, replay: &ReplayFill) -> Result<FillSpec, String> {
        let per_thread = log_bytes.div_ceil(FILL_THREADS as u64) as usize;
        match self {
            // The engine's default options; logs sized so that the fill never makes
            // the engine checkpoint by itself.
            RecoveryWorkload::Recovery => Ok(FillSpec {
                engine,
                fill_options: EngineOptions::new(),
                log_per_thread: engine
                    .log_size_for(per_thread)
                    .map_err(|why| format!("{}: {why}", engine.name()))?,
                btree: false,
                threads: FILL_THREADS,
                words: None,
                txns: 0,
            }),
            // The replayer held; the record that crosses the fill mark, and wrap
            // waste, fit in the margin, so no writer ever finds its log full (which
            // would replay).
            RecoveryWorkload::Replay if engine == Engine::SPHT => {
                let threads = replay.threads.max(1);
                let words = replay.words();
                // A thread's share of the log, from the log size or from its share of
                // the transactions (the hash fill's records are at most 300 bytes).
                let per_thread = if replay.txns > 0 {
                    let record = words.map_or(300, |w| w.record_bytes());
                    replay.txns.div_ceil(threads as u64) as usize * record
                } else {
                    log_bytes.div_ceil(threads as u64) as usize
                };
                Ok(FillSpec {
                    engine,
                    fill_options: engines::spht_replayer_held(),
                    log_per_thread: (per_thread + per_thread / 16 + (4 << 20))
                        .next_multiple_of(1 << 20),
                    btree: words.is_none(),
                    threads,
                    words,
                    txns: replay.txns,
                })
            }
            RecoveryWorkload::Replay => Err(format!(
                "replay: measures {} only, not {}",
                Engine::SPHT.name(),
                engine.name()
            )),
        }
    }

    /// The opens measured, in order.
    pub fn opens(self) -> Vec<Open> {
        match self {
            RecoveryWorkload::Recovery => RECOVERY_THREADS
                .iter()
                .map(|&threads| Open::Recovery { threads })
                .collect(),
            RecoveryWorkload::Replay => {
                let mut v = Vec::new();
                for mode in engines::SPHT_REPLAY_MODES {
                    for dup_filter in [false, true] {
                        for replayers in REPLAYERS {
                            v.push(Open::Replay(ReplayConfig {
                                mode,
                                dup_filter,
                                replayers,
                            }));
                        }
                    }
                }
                v
            }
        }
    }
}

/// A replay configuration of spht: mode, duplicate filter, threads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReplayConfig {
    /// `replay=` option.
    pub mode: &'static str,
    /// `dup_filter=on`.
    pub dup_filter: bool,
    /// Replay (recovery) threads.
    pub replayers: usize,
}

impl ReplayConfig {
    fn filter_name(self) -> &'static str {
        if self.dup_filter {
            "on"
        } else {
            "off"
        }
    }
}

/// One timed open of a copy of the crash image: what the workload varies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Open {
    /// `recovery`: the engine's default options, this many recovery threads.
    Recovery {
        /// Recovery threads.
        threads: usize,
    },
    /// `replay`: spht with this replay configuration.
    Replay(ReplayConfig),
}

impl Open {
    /// Threads of the open.
    fn threads(self) -> usize {
        match self {
            Open::Recovery { threads } => threads,
            Open::Replay(c) => c.replayers,
        }
    }

    /// What the harness asks of the opener.
    fn spec(self) -> OpenSpec {
        OpenSpec {
            options: match self {
                Open::Recovery { .. } => EngineOptions::new(),
                Open::Replay(c) => engines::spht_replay_options(c.mode, c.dup_filter, c.replayers),
            },
            threads: self.threads(),
        }
    }

    /// The open's CSV columns (after `engine,run`).
    fn csv(self) -> String {
        match self {
            Open::Recovery { threads } => threads.to_string(),
            Open::Replay(c) => format!("{},{},{}", c.mode, c.filter_name(), c.replayers),
        }
    }

    /// The open in a progress line.
    fn describe(self) -> String {
        match self {
            Open::Recovery { threads } => format!("{threads} recovery threads"),
            Open::Replay(c) => format!(
                "replay={} dup_filter={} {} thread(s)",
                c.mode,
                c.filter_name(),
                c.replayers
            ),
        }
    }
}

/// One open of one run of one engine.
#[derive(Clone, Debug)]
pub struct Row {
    /// The engine.
    pub engine: Engine,
    /// Run number, from 1.
    pub run: u32,
    /// The open.
    pub open: Open,
    /// Log bytes the fill appended (what the open reads and replays).
    pub log_bytes: u64,
    /// Transactions the fill committed (records in the log).
    pub transactions: u64,
    /// What the opener measured: the open of the crash image and the clean reopen.
    pub timing: Timing,
}

impl Row {
    /// Log replayed per wall second of the open, in GB (10^9 bytes).
    pub fn gb_per_sec(&self) -> f64 {
        self.log_bytes as f64 / 1e9 / self.timing.open_secs
    }
    /// Log replayed per CPU second of the open, in GB.
    pub fn gb_per_cpu_sec(&self) -> f64 {
        self.log_bytes as f64 / 1e9 / self.timing.cpu_secs
    }
    /// Transactions replayed per second of the open.
    pub fn tx_per_sec(&self) -> f64 {
        self.transactions as f64 / self.timing.open_secs
    }

    /// The CSV line (no newline), columns as the workload's header.
    pub fn to_csv(&self) -> String {
        format!(
            "{},{},{},{},{},{:.6},{:.2},{:.2},{},{:.3},{:.3},{:.0},{:.6}",
            self.engine.name(),
            self.run,
            self.open.csv(),
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

/// One run of workload `w` on `engine`: fill `log_bytes` of log, crash, time each open
/// of the workload. Pool files go to `dir` and are removed.
#[allow(clippy::too_many_arguments)]
pub fn measure(
    w: RecoveryWorkload,
    engine: Engine,
    log_bytes: u64,
    replay: &ReplayFill,
    run: u32,
    seed: u64,
    dir: &Path,
    opener: &Opener,
) -> Result<Vec<Row>, String> {
    let fill = w.fill(engine, log_bytes, replay)?;
    let opens = w.opens();
    let specs: Vec<OpenSpec> = opens.iter().map(|o| o.spec()).collect();
    let (log_bytes, transactions, timings) =
        crash::measure_opens(&fill, log_bytes, seed, dir, &specs, opener)?;
    Ok(opens
        .into_iter()
        .zip(timings)
        .map(|(open, timing)| Row {
            engine,
            run,
            open,
            log_bytes,
            transactions,
            timing,
        })
        .collect())
}

/// Steps 1 to 3 of the measurement alone ([`crash`]): leave at `image` the crash
/// image of `engine`'s pool filled for workload `w` with `log_bytes` of log, for
/// profiling recovery outside the harness (the `recovery_open` probe). Returns the
/// log bytes and transactions.
pub fn crash_image(
    w: RecoveryWorkload,
    engine: Engine,
    log_bytes: u64,
    seed: u64,
    dir: &Path,
    image: &Path,
) -> Result<(u64, u64), String> {
    crash_image_of(
        w,
        engine,
        log_bytes,
        &ReplayFill::default(),
        seed,
        dir,
        image,
    )
}

/// [`crash_image`] with the `replay` workload's fill `replay`.
pub fn crash_image_of(
    w: RecoveryWorkload,
    engine: Engine,
    log_bytes: u64,
    replay: &ReplayFill,
    seed: u64,
    dir: &Path,
    image: &Path,
) -> Result<(u64, u64), String> {
    let f = crash::fill(
        &w.fill(engine, log_bytes, replay)?,
        dir,
        image,
        log_bytes,
        seed,
    )?;
    Ok((f.log_bytes, f.transactions))
}

/// The engines of `engines` that the `recovery` workload measures, and notes on the
/// others.
pub fn recovery_engines(engines: &[Engine]) -> (Vec<Engine>, Vec<String>) {
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

/// The medians over runs of `of` (the rows of one engine and open), in the columns
/// both workloads' tables have.
fn median_cells(of: &[&Row]) -> Vec<String> {
    let m = |f: fn(&Row) -> f64| median(of.iter().map(|r| f(r)));
    vec![
        format!("{:.1}", m(|r| r.log_bytes as f64) / f64::from(1 << 20)),
        format!("{:.0}", m(|r| r.transactions as f64)),
        format!("{:.3}", m(|r| r.timing.open_secs)),
        format!("{:.2}", m(|r| r.timing.cpu_secs)),
        format!("{:.2}", m(|r| r.timing.sys_secs)),
        format!("{:.2}", m(Row::gb_per_sec)),
        format!("{:.2}", m(Row::gb_per_cpu_sec)),
        format!("{:.0}", m(Row::tx_per_sec)),
        format!("{:.3}", m(|r| r.timing.clean_open_secs)),
    ]
}

/// The headings of [`median_cells`].
const MEDIAN_HEADS: [&str; 9] = [
    "log MiB",
    "txns",
    "open s",
    "cpu s",
    "sys s",
    "GB/s",
    "GB/cpu s",
    "txns/s",
    "clean open s",
];

/// The table of workload `w`'s `rows`: medians over runs per engine and open.
pub fn table(w: RecoveryWorkload, rows: &[Row], replay: &ReplayFill) -> String {
    let key_heads: &[&str] = match w {
        RecoveryWorkload::Recovery => &["engine", "rec thr"],
        RecoveryWorkload::Replay => &["mode", "filter", "thr"],
    };
    let mut head: Vec<String> = key_heads.iter().map(|s| s.to_string()).collect();
    head.extend(MEDIAN_HEADS.iter().map(|s| s.to_string()));
    if w == RecoveryWorkload::Recovery {
        head.push("t1/tN".into());
    }
    let mut t = Table::new(head);
    let mut engines: Vec<Engine> = Vec::new();
    for r in rows {
        if !engines.contains(&r.engine) {
            engines.push(r.engine);
        }
    }
    for e in engines {
        for open in w.opens() {
            let of: Vec<&Row> = rows
                .iter()
                .filter(|r| r.engine == e && r.open == open)
                .collect();
            if of.is_empty() {
                continue;
            }
            let mut cells = match open {
                Open::Recovery { threads } => vec![e.name().to_string(), threads.to_string()],
                Open::Replay(c) => vec![
                    c.mode.to_string(),
                    c.filter_name().to_string(),
                    c.replayers.to_string(),
                ],
            };
            cells.extend(median_cells(&of));
            if w == RecoveryWorkload::Recovery {
                // Speed-up over 1 recovery thread: the median of the per-run ratios.
                let speedup = median(of.iter().filter_map(|r| {
                    rows.iter()
                        .find(|o| {
                            o.engine == e
                                && o.run == r.run
                                && o.open == Open::Recovery { threads: 1 }
                        })
                        .map(|o| o.timing.open_secs / r.timing.open_secs)
                }));
                cells.push(format!("{speedup:.2}x"));
            }
            t.push(cells);
        }
    }
    match w {
        RecoveryWorkload::Recovery => format!(
            "recovery: a crash with full logs ({FILL_THREADS} fill threads overwriting \
             64-byte values of a {KEYS}-key hash table), then Pool::open timed in a fresh \
             process with 1 and 2 recovery threads (median over runs; open s = wall \
             seconds of the open; cpu s = CPU seconds of the child during the open, all \
             threads, sys s = the kernel's part; GB/s = log bytes / open s; GB/cpu s = log \
             bytes / cpu s; clean open = the same pool reopened after a clean close; t1/tN \
             = open s with 1 thread / with N, median of per-run ratios)\n{}\n",
            t.render()
        ),
        RecoveryWorkload::Replay => format!(
            "replay: spht logs left to a crash with the replayer held ({}), \
             then Pool::open (the engine's replay) timed in a fresh process per mode \
             (forward links, timestamp scan of the per-thread logs, backward links), \
             duplicate filter and replay threads (medians over runs; GB/s = log bytes / \
             open seconds (wall, including the open's fixed cost: compare clean open s); \
             GB/cpu s = log bytes / CPU seconds of the open, all threads of the child; sys \
             s = the kernel's part)\n{}\n{}",
            replay.describe(),
            t.render(),
            replay_target(rows)
        ),
    }
}

/// The `replay` target line: replay of a full log of at least 256 MiB at 1 GB/s or
/// more (wall time of the open), in the configuration with the best median.
fn replay_target(rows: &[Row]) -> String {
    let best = RecoveryWorkload::Replay
        .opens()
        .into_iter()
        .filter_map(|open| {
            let Open::Replay(c) = open else { return None };
            let of: Vec<&Row> = rows.iter().filter(|r| r.open == open).collect();
            (!of.is_empty()).then(|| {
                let gb = median(of.iter().map(|r| r.gb_per_sec()));
                let log = median(of.iter().map(|r| r.log_bytes as f64));
                (c, gb, log)
            })
        })
        .max_by(|a, b| a.1.total_cmp(&b.1));
    let Some((c, gb, log)) = best else {
        return "  [n/a]    replay of a full log: not measured\n".into();
    };
    let what = format!(
        "replay of a {:.0} MiB spht log: best median {gb:.2} GB/s (replay={}, dup_filter={}, \
         {} thread{}; target >= 1 GB/s",
        log / f64::from(1 << 20),
        c.mode,
        c.filter_name(),
        c.replayers,
        if c.replayers == 1 { "" } else { "s" },
    );
    if log < TARGET_LOG_BYTES as f64 {
        format!("  [n/a]    {what}, for a log of at least 256 MiB)\n")
    } else if gb >= 1.0 {
        format!("  [met]    {what})\n")
    } else {
        format!("  [MISSED] {what}; short by {:.0}%)\n", (1.0 - gb) * 100.0)
    }
}

/// Run workload `w` for `engines` (`runs` runs, `log_mib` MiB of log each), writing
/// its CSV file to `out`. Returns the table text and the failures; `progress` gets a
/// line per open.
#[allow(clippy::too_many_arguments)]
pub fn run(
    w: RecoveryWorkload,
    engines: &[Engine],
    log_mib: u64,
    replay: &ReplayFill,
    runs: u32,
    seed: u64,
    out: &Path,
    progress: &mut dyn FnMut(&str),
) -> (String, Vec<String>) {
    let mut rows = Vec::new();
    let mut failures = Vec::new();
    let mut csv = format!("{}\n", w.csv_header());
    let opener = match Opener::this_program() {
        Ok(o) => o,
        Err(e) => {
            failures.push(format!("{}: {e}", w.name()));
            return (String::new(), failures);
        }
    };
    for run in 1..=runs {
        for &e in engines {
            if interrupted() {
                break;
            }
            let what = format!("{} {} {log_mib} MiB run {run}/{runs}", w.name(), e.name());
            match measure(
                w,
                e,
                log_mib << 20,
                replay,
                run,
                seed ^ u64::from(run),
                &pool_dir(),
                &opener,
            ) {
                Ok(rs) => {
                    for r in &rs {
                        let _ = writeln!(csv, "{}", r.to_csv());
                        progress(&format!(
                            "{what}: {}: {:.3} s, {:.2} GB/s, {:.2} GB/cpu s",
                            r.open.describe(),
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
    let name = w.csv_name();
    if let Err(e) = std::fs::write(out.join(name), csv) {
        failures.push(format!("writing {name}: {e}"));
    }
    let text = if rows.is_empty() {
        String::new()
    } else {
        table(w, &rows, replay)
    };
    (text, failures)
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
        let (log_bytes, transactions) = crash_image(
            RecoveryWorkload::Recovery,
            Engine::SP3,
            4 << 20,
            1,
            dir.path(),
            &image,
        )
        .unwrap();
        assert!(
            log_bytes >= 4 << 20 && transactions > 1000,
            "{transactions}"
        );
        let report = pisces::tools::check::check_pool(&image, crash::plain_dram()).unwrap();
        let lines = report.engine_state.unwrap().lines.join("\n");
        assert!(
            lines.contains(&format!("recovery would replay {transactions} and drop 0")),
            "every fill transaction must be in the log: {lines}"
        );
        let rows = measure(
            RecoveryWorkload::Recovery,
            Engine::SP3,
            4 << 20,
            &ReplayFill::default(),
            1,
            2,
            dir.path(),
            &Opener::InProcess,
        )
        .unwrap();
        assert_eq!(rows.len(), 2);
        assert!(rows
            .iter()
            .all(|r| r.timing.open_secs > 0.0 && r.log_bytes >= 4 << 20));
        let t = table(RecoveryWorkload::Recovery, &rows, &ReplayFill::default());
        assert!(t.contains("sp3") && t.contains("1.00x"), "{t}");
        let line = rows[1].to_csv();
        assert!(line.starts_with("sp3,1,2,"), "{line}");
        assert_eq!(
            line.split(',').count(),
            RecoveryWorkload::Recovery.csv_header().split(',').count()
        );
        // Only this test's files are left in the directory: the crash image above.
        let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(left.len(), 1);
    }

    #[test]
    fn engines_that_truncate_their_logs_are_skipped_with_a_reason() {
        let (run, notes) = recovery_engines(&[Engine::PISCES, Engine::SP3, Engine::UNDO]);
        assert_eq!(run, [Engine::SP3]);
        assert_eq!(notes.len(), 2, "{notes:?}");
        assert!(
            notes[0].starts_with("recovery: pisces skipped ("),
            "{notes:?}"
        );
        assert!(RecoveryWorkload::Replay
            .fill(Engine::SP3, 1 << 20, &ReplayFill::default())
            .is_err());
    }

    /// The target line takes the configuration with the best median and says n/a
    /// below 256 MiB of log.
    #[test]
    fn the_target_takes_the_best_median_of_a_large_enough_log() {
        let row = |replayers: usize, run: u32, open_secs: f64, log_bytes: u64| Row {
            engine: Engine::SPHT,
            run,
            open: Open::Replay(ReplayConfig {
                mode: "forward",
                dup_filter: true,
                replayers,
            }),
            log_bytes,
            transactions: 1,
            timing: Timing {
                open_secs,
                ..Timing::default()
            },
        };
        let gb = 1u64 << 30;
        // 1 thread: medians 0.5 s; 2 threads: runs 0.9, 1.0 and 3.0 s (median 1.0 s).
        let rows = [
            row(1, 1, 0.5, gb),
            row(1, 2, 0.5, gb),
            row(2, 1, 0.9, gb),
            row(2, 2, 1.0, gb),
            row(2, 3, 3.0, gb),
        ];
        let t = replay_target(&rows);
        assert!(
            t.starts_with("  [met]") && t.contains("2.15 GB/s") && t.contains("1 thread;"),
            "{t}"
        );
        let t = replay_target(&rows[2..]);
        assert!(t.starts_with("  [met]") && t.contains("1.07 GB/s"), "{t}");
        let slow = [row(1, 1, 2.0, gb)];
        let t = replay_target(&slow);
        assert!(t.contains("[MISSED]") && t.contains("short by 46%"), "{t}");
        assert!(replay_target(&[row(1, 1, 0.1, 1 << 20)]).starts_with("  [n/a]"));
        assert!(replay_target(&[]).starts_with("  [n/a]"));
        assert!(rows[0]
            .to_csv()
            .starts_with("spht,1,forward,on,1,1073741824,1,"));
    }

    /// The replay fill leaves every transaction in the logs (the replayer was held):
    /// the crash image's inspection counts them all as durable and unreplayed.
    #[test]
    fn the_replay_fill_leaves_every_transaction_in_the_logs() {
        let dir = tempfile::tempdir().unwrap();
        let image = dir.path().join("crash.pool");
        let (log_bytes, transactions) = crash_image(
            RecoveryWorkload::Replay,
            Engine::SPHT,
            4 << 20,
            1,
            dir.path(),
            &image,
        )
        .unwrap();
        assert!(log_bytes >= 4 << 20 && transactions > 1000);
        let report = pisces::tools::check::check_pool(&image, crash::plain_dram()).unwrap();
        let lines = report.engine_state.unwrap().lines.join("\n");
        assert!(
            lines.contains(&format!(
                "live records   {transactions} durable, unreplayed"
            )),
            "every fill transaction must be in the log: {lines}"
        );
    }

    /// A small log (4 MiB): every replay configuration recovers every committed value
    /// of the hash table and the B+-tree (checked inside `measure_opens`), and the
    /// table has a row per configuration.
    #[test]
    fn every_mode_replays_a_held_log() {
        let dir = tempfile::tempdir().unwrap();
        let rows = measure(
            RecoveryWorkload::Replay,
            Engine::SPHT,
            4 << 20,
            &ReplayFill::default(),
            1,
            3,
            dir.path(),
            &Opener::InProcess,
        )
        .unwrap();
        assert_eq!(rows.len(), RecoveryWorkload::Replay.opens().len());
        assert!(rows
            .iter()
            .all(|r| r.timing.open_secs > 0.0 && r.log_bytes >= 4 << 20 && r.transactions > 1000));
        let t = table(RecoveryWorkload::Replay, &rows, &ReplayFill::default());
        for m in engines::SPHT_REPLAY_MODES {
            assert!(t.contains(m), "{t}");
        }
        // Every pool file was removed.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    /// The word fill (the paper's replay setting, scaled down): 4 logging threads,
    /// 5 writes per transaction on a 1 MiB heap, a transaction count. Every
    /// transaction is in the logs, and every replay configuration recovers the last
    /// committed value of every word (checked inside `measure_opens`).
    #[test]
    fn the_word_fill_replays_in_every_mode() {
        let fill = ReplayFill {
            threads: 4,
            writes: 5,
            heap_mib: 1,
            txns: 6000,
        };
        let dir = tempfile::tempdir().unwrap();
        let image = dir.path().join("crash.pool");
        let (log_bytes, transactions) = crash_image_of(
            RecoveryWorkload::Replay,
            Engine::SPHT,
            1 << 20,
            &fill,
            1,
            dir.path(),
            &image,
        )
        .unwrap();
        assert_eq!(transactions, 6000);
        // Records of 5 word entries (fewer where a transaction wrote a word twice).
        assert!(log_bytes > 6000 * (48 + 4 * 16), "{log_bytes}");
        let report = pisces::tools::check::check_pool(&image, crash::plain_dram()).unwrap();
        let lines = report.engine_state.unwrap().lines.join("\n");
        assert!(
            lines.contains("live records   6000 durable, unreplayed"),
            "every fill transaction must be in the log: {lines}"
        );
        std::fs::remove_file(&image).unwrap();
        let rows = measure(
            RecoveryWorkload::Replay,
            Engine::SPHT,
            1 << 20,
            &fill,
            1,
            5,
            dir.path(),
            &Opener::InProcess,
        )
        .unwrap();
        assert_eq!(rows.len(), RecoveryWorkload::Replay.opens().len());
        assert!(rows.iter().all(|r| r.transactions == 6000));
        let t = table(RecoveryWorkload::Replay, &rows, &fill);
        assert!(t.contains("4 thread(s) writing 5 random word(s)"), "{t}");
    }
}
