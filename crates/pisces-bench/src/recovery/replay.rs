//! The `replay` workload: how fast the `spht` engine replays its redo logs into the
//! durable heap, for each way of finding the transactions in timestamp order
//! (`replay=forward|backward|scan`), with the duplicate filter on and off, on 1 and 2
//! replay threads, over a log of `--replay-log-mib` (default 1024 MiB).
//!
//! # One run
//! The [`crate::recovery`] measurement, shared code ([`measure_opens`]), with:
//! 1. The fill: a pool under `/dev/shm` (emulated DRAM medium, no added latency), a
//!    hash table and a B+-tree of 100K keys preloaded (then the pool is closed, which
//!    replays the preload and empties the logs) and reopened with `replay_hold=true`:
//!    the background replayer stays idle, so every durable transaction stays in the
//!    logs. [`recovery::FILL_THREADS`] threads overwrite the 64-byte values of random
//!    keys, one transaction each, alternating between the hash table and the B+-tree,
//!    until their logs hold the target. Each log is sized to hold its thread's share
//!    with room to spare, so no writer ever finds its log full (which would replay).
//! 2. The crash: the pool file is copied while the fill's handles are held.
//! 3. For each mode, filter setting and thread count: `Pool::open` of a fresh copy,
//!    timed in a fresh child process ([`crate::recovery::child`]). Recovery on open is the engine's replay (`engine::spht::recovery`):
//!    parse and checksum the logs, order the records (through the links the mode
//!    names, checked against the timestamps, or by merging the per-thread logs by
//!    timestamp), decode, and apply them on `replayers` shards (the same apply code
//!    as the background replayer). Every value is then checked against the last one
//!    committed, and the pool is reopened after a clean close (timed: the fixed cost
//!    of an open without anything to replay).
//!
//! Reported per configuration and run: log bytes, transactions, open seconds, CPU
//! seconds of the open, GB/s of log (10^9 bytes per second of the open: the
//! conservative figure, it includes the open's fixed cost), GB per CPU second,
//! transactions per second, and the clean open's seconds. `replay.csv` in the report
//! directory has one row per configuration and run; the table shows medians.
//!
//! Space under `/dev/shm`: the pool (the log plus about 330 MB of heap) exists twice
//! at a time (pool and image, then image and the copy being opened): about 2.8 GB for
//! the default 1 GiB.

use crate::engines::Engine;
use crate::measure::pool_dir;
use crate::recovery::child::{Opener, Timing};
use crate::recovery::{self, measure_opens, FillSpec, OpenSpec};
use crate::report::median;
use crate::report::table::Table;
use pisces::EngineOptions;
use std::fmt::Write as _;
use std::path::Path;

/// How the batch is found, in the order measured.
pub const MODES: [&str; 3] = ["forward", "scan", "backward"];
/// Replay threads measured.
pub const REPLAYERS: [usize; 2] = [1, 2];

/// One configuration of the replay: mode, duplicate filter, threads.
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
    /// Every configuration measured: each mode with the filter off and on, each on 1
    /// and 2 threads.
    pub fn all() -> Vec<ReplayConfig> {
        let mut v = Vec::new();
        for mode in MODES {
            for dup_filter in [false, true] {
                for replayers in REPLAYERS {
                    v.push(ReplayConfig {
                        mode,
                        dup_filter,
                        replayers,
                    });
                }
            }
        }
        v
    }

    fn open(self) -> OpenSpec {
        OpenSpec {
            options: EngineOptions::new()
                .set("replay", self.mode)
                .set("dup_filter", if self.dup_filter { "on" } else { "off" })
                .set("replayers", self.replayers),
            threads: self.replayers,
        }
    }

    fn filter_name(self) -> &'static str {
        if self.dup_filter {
            "on"
        } else {
            "off"
        }
    }
}

/// One run of one configuration.
#[derive(Clone, Debug)]
pub struct ReplayRow {
    /// The configuration.
    pub config: ReplayConfig,
    /// Run number, from 1.
    pub run: u32,
    /// Log bytes the fill appended (what the open replays).
    pub log_bytes: u64,
    /// Transactions the fill committed.
    pub transactions: u64,
    /// What the child process measured: the open of the crash image (the replay) and
    /// the clean reopen.
    pub timing: Timing,
}

impl ReplayRow {
    /// Log replayed per second of the open, in GB (10^9 bytes).
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
}

/// The CSV header of `replay.csv`.
pub const CSV_HEADER: &str = "engine,run,mode,dup_filter,replayers,log_bytes,transactions,open_secs,open_cpu_secs,open_sys_secs,minor_faults,gb_per_sec,gb_per_cpu_sec,tx_per_sec,clean_open_secs";

impl ReplayRow {
    /// The CSV line (no newline), columns as [`CSV_HEADER`].
    pub fn to_csv(&self) -> String {
        format!(
            "spht,{},{},{},{},{},{},{:.6},{:.2},{:.2},{},{:.3},{:.3},{:.0},{:.6}",
            self.run,
            self.config.mode,
            self.config.filter_name(),
            self.config.replayers,
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

/// The fill of the workload: spht, replayer held, hash table and B+-tree.
fn fill_spec(log_bytes: u64) -> FillSpec {
    let per_thread = log_bytes.div_ceil(recovery::FILL_THREADS as u64) as usize;
    FillSpec {
        engine: Engine::SPHT,
        fill_options: EngineOptions::new().set("replay_hold", "true"),
        // The record that crosses the fill mark, and wrap waste, fit in the margin.
        log_per_thread: (per_thread + per_thread / 16 + (4 << 20)).next_multiple_of(1 << 20),
        btree: true,
    }
}

/// One run: fill `log_bytes`, crash, replay with each configuration of `configs`.
pub fn measure(
    log_bytes: u64,
    configs: &[ReplayConfig],
    run: u32,
    seed: u64,
    dir: &Path,
    opener: &Opener,
) -> Result<Vec<ReplayRow>, String> {
    let opens: Vec<OpenSpec> = configs.iter().map(|c| c.open()).collect();
    let (log_bytes, transactions, timings) =
        measure_opens(&fill_spec(log_bytes), log_bytes, seed, dir, &opens, opener)?;
    Ok(configs
        .iter()
        .zip(timings)
        .map(|(&config, t)| ReplayRow {
            config,
            run,
            log_bytes,
            transactions,
            timing: t,
        })
        .collect())
}

/// Steps 1 and 2 of the module docs alone: leave at `image` the crash image of an
/// `spht` pool whose held logs hold `log_bytes` of log (for profiling the replay
/// outside the harness, `examples/recovery_open.rs`). Returns the log bytes and
/// transactions.
pub fn crash_image(
    log_bytes: u64,
    seed: u64,
    dir: &Path,
    image: &Path,
) -> Result<(u64, u64), String> {
    let f = recovery::fill(&fill_spec(log_bytes), dir, image, log_bytes, seed)?;
    Ok((f.log_bytes, f.transactions))
}

/// The table of `rows`: medians over runs per configuration.
pub fn table(rows: &[ReplayRow]) -> String {
    let mut t = Table::new(
        [
            "mode",
            "filter",
            "thr",
            "log MiB",
            "txns",
            "open s",
            "cpu s",
            "sys s",
            "GB/s",
            "GB/cpu s",
            "txns/s",
            "clean open s",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect(),
    );
    for c in ReplayConfig::all() {
        let of: Vec<&ReplayRow> = rows.iter().filter(|r| r.config == c).collect();
        if of.is_empty() {
            continue;
        }
        let m = |f: fn(&ReplayRow) -> f64| median(of.iter().map(|r| f(r)));
        t.push(vec![
            c.mode.to_string(),
            c.filter_name().to_string(),
            c.replayers.to_string(),
            format!("{:.1}", m(|r| r.log_bytes as f64) / f64::from(1 << 20)),
            format!("{:.0}", m(|r| r.transactions as f64)),
            format!("{:.3}", m(|r| r.timing.open_secs)),
            format!("{:.2}", m(|r| r.timing.cpu_secs)),
            format!("{:.2}", m(|r| r.timing.sys_secs)),
            format!("{:.2}", m(ReplayRow::gb_per_sec)),
            format!("{:.2}", m(ReplayRow::gb_per_cpu_sec)),
            format!("{:.0}", m(ReplayRow::tx_per_sec)),
            format!("{:.3}", m(|r| r.timing.clean_open_secs)),
        ]);
    }
    format!(
        "replay: spht logs left to a crash with the replayer held ({} fill threads \
         overwriting 64-byte values of a {}-key hash table and B+-tree), then Pool::open \
         (the engine's replay) timed in a fresh process per mode (forward links, timestamp scan of the \
         per-thread logs, backward links), duplicate filter and replay threads (medians \
         over runs; GB/s = log bytes / open seconds (wall, including the open's fixed \
         cost: compare clean open s); GB/cpu s = log bytes / CPU seconds of the open, \
         all threads of the child; sys s = the kernel's part)\n{}\n{}",
        recovery::FILL_THREADS,
        recovery::KEYS,
        t.render(),
        target(rows)
    )
}

/// The log size from which a replay counts for the target.
const TARGET_LOG_BYTES: u64 = 256 << 20;

/// The target line: replay of a full log of at least 256 MiB at 1 GB/s or more (wall
/// time of the open), in the configuration with the best median.
fn target(rows: &[ReplayRow]) -> String {
    let best = ReplayConfig::all()
        .into_iter()
        .filter_map(|c| {
            let of: Vec<&ReplayRow> = rows.iter().filter(|r| r.config == c).collect();
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

/// Run the workload (`runs` runs, `log_mib` MiB of log each), writing `replay.csv`
/// to `out`. Returns the table text and the failures; `progress` gets a line per
/// measurement.
pub fn run(
    log_mib: u64,
    runs: u32,
    seed: u64,
    out: &Path,
    progress: &mut dyn FnMut(&str),
) -> (String, Vec<String>) {
    let mut rows = Vec::new();
    let mut failures = Vec::new();
    let mut csv = format!("{CSV_HEADER}\n");
    let configs = ReplayConfig::all();
    let opener = match Opener::this_program() {
        Ok(o) => o,
        Err(e) => {
            failures.push(format!("replay: {e}"));
            return (String::new(), failures);
        }
    };
    for run in 1..=runs {
        if crate::measure::signal::interrupted() {
            break;
        }
        let what = format!("replay spht {log_mib} MiB run {run}/{runs}");
        match measure(
            log_mib << 20,
            &configs,
            run,
            seed ^ u64::from(run),
            &pool_dir(),
            &opener,
        ) {
            Ok(rs) => {
                for r in &rs {
                    let _ = writeln!(csv, "{}", r.to_csv());
                    progress(&format!(
                        "{what}: replay={} dup_filter={} {} thread(s): {:.3} s, {:.2} GB/s, \
                         {:.2} GB/cpu s",
                        r.config.mode,
                        r.config.filter_name(),
                        r.config.replayers,
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
    let text = recovery::finish(out, "replay.csv", &csv, &rows, table, &mut failures);
    (text, failures)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The target line takes the configuration with the best median and says n/a
    /// below 256 MiB of log.
    #[test]
    fn the_target_takes_the_best_median_of_a_large_enough_log() {
        let row = |replayers: usize, run: u32, open_secs: f64, log_bytes: u64| ReplayRow {
            config: ReplayConfig {
                mode: "forward",
                dup_filter: true,
                replayers,
            },
            run,
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
        let t = target(&rows);
        assert!(
            t.starts_with("  [met]") && t.contains("2.15 GB/s") && t.contains("1 thread;"),
            "{t}"
        );
        let t = target(&rows[2..]);
        assert!(t.starts_with("  [met]") && t.contains("1.07 GB/s"), "{t}");
        let slow = [row(1, 1, 2.0, gb)];
        assert!(target(&slow).contains("[MISSED]") && target(&slow).contains("short by 46%"));
        assert!(target(&[row(1, 1, 0.1, 1 << 20)]).starts_with("  [n/a]"));
        assert!(target(&[]).starts_with("  [n/a]"));
    }

    /// The fill leaves every transaction in the logs (the replayer was held): the
    /// crash image's inspection counts them all as durable and unreplayed.
    #[test]
    fn the_fill_leaves_every_transaction_in_the_logs() {
        let dir = tempfile::tempdir().unwrap();
        let image = dir.path().join("crash.pool");
        let f = recovery::fill(&fill_spec(4 << 20), dir.path(), &image, 4 << 20, 1).unwrap();
        assert!(f.log_bytes >= 4 << 20 && f.transactions > 1000);
        let report = pisces::check::check_pool(&image, recovery::plain_dram()).unwrap();
        let lines = report.engine_state.unwrap().lines.join("\n");
        assert!(
            lines.contains(&format!(
                "live records   {} durable, unreplayed",
                f.transactions
            )),
            "every fill transaction must be in the log: {lines}"
        );
    }

    /// A small log (4 MiB): every configuration recovers every committed value of the
    /// hash table and the B+-tree (checked inside `measure_opens`), and the table has
    /// a row per configuration.
    #[test]
    fn every_mode_replays_a_held_log() {
        let dir = tempfile::tempdir().unwrap();
        let configs = ReplayConfig::all();
        let rows = measure(4 << 20, &configs, 1, 3, dir.path(), &Opener::InProcess).unwrap();
        assert_eq!(rows.len(), configs.len());
        assert!(rows
            .iter()
            .all(|r| r.timing.open_secs > 0.0 && r.log_bytes >= 4 << 20 && r.transactions > 1000));
        let t = table(&rows);
        for m in MODES {
            assert!(t.contains(m), "{t}");
        }
        // Every pool file was removed.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
