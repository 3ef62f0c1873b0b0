//! `pisces bench`: the benchmark harness of issue 5.
//!
//! Engines (`pisces`, `undo`, `volatile`, and Pisces with its optimisations switched
//! off one by one) run the paper's workloads (§5: hash table, B+-tree, read latency
//! against emulated NVM write latency, optimisation breakdown, and in `--full` or when
//! named TPC-C new-order and TATP) on fresh pools under `/dev/shm`. Every measurement is one configuration for `--seconds`; `--runs`
//! repeats the whole plan, interleaved, so each engine's run `r` is measured next to
//! the other engines' run `r` and ratios are taken within a run.
//!
//! Output: a progress bar on stderr (hidden when stderr is not a terminal; one line per
//! measurement is printed there instead), tables and the targets of issue 5 on stdout,
//! and a report directory with `results.csv` (every run, the columns of
//! [`report::CSV_HEADER`]), `summary.txt` (the tables) and SVG plots.
//!
//! Module map: [`args`] (options, defaults, the plan), [`workload`] (data sets and
//! their transactions), [`tpcc`] and [`tatp`] (those two data sets), [`measure`] (one
//! measurement), [`report`] (CSV, medians, tables, targets), [`plot`] (SVG).
//!
//! Not built yet (extension points): the `mvcc` and `pmdk` engines (they join through
//! `EngineId::ALL`, and count as baselines in the targets automatically).

pub mod args;
pub mod measure;
pub mod plot;
pub mod report;
pub mod tatp;
pub mod tpcc;
pub mod workload;

pub use args::BenchArgs;

use crate::{err, out};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use measure::Spec;
use report::{Results, Row, CSV_HEADER};
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// Set by SIGINT, SIGTERM or SIGHUP: the current measurement stops, its pool file is
/// removed, and the report is written with what was measured. A second signal ends
/// the process at once (exit status 130).
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// True once a termination signal arrived.
pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
}

fn catch_signals() {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    use signal_hook::flag;
    for sig in [SIGINT, SIGTERM, SIGHUP] {
        // Order matters: the first signal only sets the flag (the shutdown action sees
        // it unset); a second one, with the flag set, exits. Errors leave the default
        // action, which is only less tidy.
        let _ = flag::register_conditional_shutdown(sig, 130, &INTERRUPTED);
        let _ = flag::register(sig, &INTERRUPTED);
    }
}

/// `YYYYMMDD-HHMMSS` in UTC for `secs` since the epoch.
fn utc_stamp(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}{m:02}{d:02}-{:02}{:02}{:02}",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

/// The default report directory: `<target>/bench/<UTC timestamp>` where `<target>` is
/// the cargo target directory the binary was built in (so `cargo run` reports land in
/// the workspace's `target/`), else `./pisces-bench/<timestamp>`.
fn default_out_dir() -> PathBuf {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let base = std::env::current_exe()
        .ok()
        .and_then(|exe| {
            exe.ancestors()
                .find(|p| p.file_name().is_some_and(|n| n == "target"))
                .map(|t| t.join("bench"))
        })
        .unwrap_or_else(|| PathBuf::from("pisces-bench"));
    base.join(utc_stamp(secs))
}

/// Create the report directory (a fresh one when defaulted).
fn make_out_dir(given: Option<&Path>) -> Result<PathBuf, String> {
    let dir = match given {
        Some(d) => {
            std::fs::create_dir_all(d)
                .map_err(|e| format!("cannot create the report directory {}: {e}", d.display()))?;
            d.to_path_buf()
        }
        None => {
            let base = default_out_dir();
            let parent = base.parent().map(Path::to_path_buf).unwrap_or_default();
            std::fs::create_dir_all(&parent).map_err(|e| {
                format!(
                    "cannot create the report directory {}: {e}",
                    parent.display()
                )
            })?;
            let mut n = 1;
            loop {
                let d = if n == 1 {
                    base.clone()
                } else {
                    PathBuf::from(format!("{}-{n}", base.display()))
                };
                match std::fs::create_dir(&d) {
                    Ok(()) => break d,
                    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && n < 100 => n += 1,
                    Err(e) => {
                        return Err(format!(
                            "cannot create the report directory {}: {e}",
                            d.display()
                        ))
                    }
                }
            }
        }
    };
    Ok(std::fs::canonicalize(&dir).unwrap_or(dir))
}

fn describe(spec: &Spec, run: u32, runs: u32) -> String {
    format!(
        "{} {} {}t {}% {}ns run {run}/{runs}",
        spec.workload, spec.engine.label, spec.threads, spec.update_pct, spec.nvm_latency_ns
    )
}

/// The 1, 5 and 15 minute load averages (other work on the machine skews results).
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|| "unknown".into())
}

fn list<T: ToString>(v: &[T]) -> String {
    v.iter().map(T::to_string).collect::<Vec<_>>().join(",")
}

/// Run `pisces bench` (and the main job): exit 0 when every measurement ran, 1 when
/// some failed, 2 on usage errors and when the report cannot be written, 130 when
/// interrupted by a signal.
pub fn run(a: &BenchArgs, title: &str) -> ExitCode {
    let s = a.settings();
    let (specs, notes) = args::plan(&s);
    if specs.is_empty() {
        err("pisces bench: nothing to measure with these options");
        for n in &notes {
            err(&format!("  {n}"));
        }
        return ExitCode::from(2);
    }
    let dir = match make_out_dir(s.out.as_deref()) {
        Ok(d) => d,
        Err(e) => {
            err(&format!("pisces bench: {e}"));
            return ExitCode::from(2);
        }
    };
    let csv_path = dir.join("results.csv");
    let mut csv = match std::fs::File::create(&csv_path)
        .and_then(|mut f| writeln!(f, "{CSV_HEADER}").map(|()| f))
    {
        Ok(f) => f,
        Err(e) => {
            err(&format!(
                "pisces bench: cannot write {}: {e}",
                csv_path.display()
            ));
            return ExitCode::from(2);
        }
    };
    let total = specs.len() * s.runs as usize;
    let workloads: Vec<&str> = s.workloads.iter().map(|w| w.name()).collect();
    let engines: Vec<&str> = s.engines.iter().map(|e| e.name()).collect();
    let z = &s.sizes;
    let mut head = format!(
        "{title}\n\
         mode {}: engines {}; workloads {}; threads {}; seconds {} x {} run{}\n\
         medium: emulated PM = DRAM under {} with real cache-line flushes and fences, plus an \
         emulated NVM write latency charged per flushed line (hash/btree/breakdown: {} ns; \
         latency sweep: {} ns). These are not NVM numbers.\n\
         data: hash table {} buckets / {} pairs of 8-byte keys and 64-byte values; B+-tree \
         fanout 16 (256-byte nodes) with {} keys{}\n\
         update mixes: hash {} %; btree {} %; latency/breakdown {} %\n\
         {total} measurements, about {:.0} s of measuring plus preloads; load average at \
         start: {}\n",
        s.mode,
        engines.join(","),
        workloads.join(","),
        list(&s.threads),
        s.seconds,
        s.runs,
        if s.runs == 1 { "" } else { "s" },
        measure::pool_dir().display(),
        list(&s.latencies),
        list(&s.sweep_latencies),
        z.hash_buckets,
        z.hash_pairs,
        z.btree_keys,
        if s.mode == "quick" {
            " (quick mode: scaled down from the paper's 100000 pairs and ~1M keys)"
        } else {
            ""
        },
        list(&s.mixes),
        list(&s.btree_mixes),
        list(&s.sweep_mixes),
        total as f64 * s.seconds,
        load_average(),
    );
    if s.workloads.contains(&args::WorkloadKind::Tpcc) {
        head += &format!(
            "data: tpcc new-order, one warehouse per worker thread, B+-tree tables of fanout \
             32; {} items, {} customers and initial orders per district{}; all order lines \
             from the home warehouse; 1 % of new-orders roll back on an invalid item and \
             count as completed (update_pct 100)\n",
            z.tpcc_items,
            z.tpcc_customers,
            if (z.tpcc_items, z.tpcc_customers) == (100_000, 3000) {
                " (TPC-C's sizes)"
            } else {
                " (scaled down from TPC-C's 100000 items and 3000 customers per district)"
            },
        );
    }
    if s.workloads.contains(&args::WorkloadKind::Tatp) {
        head += &format!(
            "data: tatp, B+-tree tables of fanout 32, {} subscribers{}; standard mix, 80 % \
             read-only (update_pct 20)\n",
            z.tatp_subscribers,
            if z.tatp_subscribers == 200_000 {
                " (the paper's)"
            } else {
                " (scaled down from the paper's 200000)"
            },
        );
    }
    for n in &notes {
        head += &format!("note: {n}\n");
    }
    head += &format!("report directory: {}\n\n", dir.display());
    out(&head);

    catch_signals();
    let tty = std::io::stderr().is_terminal();
    let ms = (s.seconds * 1000.0).round() as u64;
    let pb = ProgressBar::with_draw_target(
        Some(total as u64 * ms),
        if tty {
            ProgressDrawTarget::stderr()
        } else {
            ProgressDrawTarget::hidden()
        },
    );
    if let Ok(style) =
        ProgressStyle::with_template("[{elapsed_precise}] [{bar:30}] eta {eta:>4} {msg}")
    {
        pb.set_style(style.progress_chars("=> "));
    }
    let started = Instant::now();
    let mut res = Results::default();
    let mut failures: Vec<String> = Vec::new();
    'runs: for run in 1..=s.runs {
        let seed = s.seed ^ u64::from(run).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        for (i, spec) in specs.iter().enumerate() {
            if interrupted() {
                break 'runs;
            }
            let n = (run as usize - 1) * specs.len() + i;
            let what = describe(spec, run, s.runs);
            pb.set_message(format!("[{}/{total}] {what}", n + 1));
            pb.set_position(n as u64 * ms);
            let base = n as u64 * ms;
            let r = measure::measure(spec, &s.sizes, s.seconds, seed, &mut |el, _| {
                pb.set_position(base + (el.as_millis() as u64).min(ms));
            });
            match r {
                Ok(o) => {
                    let row = Row::new(spec, run, &o);
                    if let Err(e) = writeln!(csv, "{}", row.to_csv()) {
                        pb.finish_and_clear();
                        err(&format!(
                            "pisces bench: cannot write {}: {e}",
                            csv_path.display()
                        ));
                        return ExitCode::from(2);
                    }
                    if !tty {
                        err(&format!(
                            "[{}/{total}] {what}: {:.3} Mops/s",
                            n + 1,
                            row.ops_per_sec / 1e6
                        ));
                    }
                    res.rows.push(row);
                }
                Err(_) if interrupted() => break 'runs,
                Err(e) => {
                    let msg = format!("{what}: {e}");
                    pb.suspend(|| err(&format!("pisces bench: measurement failed: {msg}")));
                    failures.push(msg);
                }
            }
        }
    }
    pb.finish_and_clear();
    let _ = csv.flush();

    let mut summary = String::new();
    summary += &report::throughput_tables(&res);
    summary += &report::latency_table(&res);
    summary += &report::breakdown_table(&res);
    summary += &report::detail_table(&res);
    summary.push('\n');
    summary += &report::targets(&res);
    if !failures.is_empty() {
        summary += &format!("\n{} measurement(s) FAILED:\n", failures.len());
        for f in &failures {
            summary += &format!("  {f}\n");
        }
    }
    if interrupted() {
        summary += "\nINTERRUPTED: the tables show the measurements finished before the signal.\n";
    }
    out(&summary);
    let mut code = if interrupted() {
        ExitCode::from(130)
    } else if failures.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    };
    let plots = match plot::all(&dir, &res) {
        Ok(p) => p,
        Err(e) => {
            err(&format!("pisces bench: {e}"));
            code = ExitCode::from(2);
            Vec::new()
        }
    };
    let names: Vec<String> = plots
        .iter()
        .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .collect();
    let footer = format!(
        "\nfinished in {:.0} s (load average now {})\n",
        started.elapsed().as_secs_f64(),
        load_average()
    );
    let summary_path = dir.join("summary.txt");
    if let Err(e) = std::fs::write(&summary_path, format!("{head}{summary}{footer}")) {
        err(&format!(
            "pisces bench: cannot write {}: {e}",
            summary_path.display()
        ));
        code = ExitCode::from(2);
    }
    out(&format!(
        "{footer}report written to {}\n  results.csv ({} rows), summary.txt{}{}\n",
        dir.display(),
        res.rows.len(),
        if names.is_empty() { "" } else { ", " },
        names.join(", "),
    ));
    code
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_stamps() {
        assert_eq!(utc_stamp(0), "19700101-000000");
        assert_eq!(utc_stamp(951_782_400), "20000229-000000");
        assert_eq!(utc_stamp(1_767_225_599), "20251231-235959");
        assert_eq!(utc_stamp(1_778_592_896), "20260512-133456");
    }

    #[test]
    fn default_report_directories_are_fresh() {
        let d = tempfile::tempdir().unwrap();
        let given = d.path().join("a/b");
        assert_eq!(
            make_out_dir(Some(&given)).unwrap(),
            std::fs::canonicalize(&given).unwrap()
        );
        // An existing directory is fine when given explicitly.
        assert!(make_out_dir(Some(&given)).is_ok());
        let file = d.path().join("f");
        std::fs::write(&file, b"x").unwrap();
        assert!(make_out_dir(Some(&file.join("sub")))
            .unwrap_err()
            .contains("cannot create"));
        assert!(default_out_dir().to_string_lossy().contains("bench"));
    }
}
