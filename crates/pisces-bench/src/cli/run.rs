//! `pisces bench` and the main job: make the plan, measure it run by run
//! (interleaved), and print and write the report.
//!
//! Output: a progress bar on stderr (hidden when stderr is not a terminal; one line per
//! measurement is printed there instead), tables and the performance targets on stdout,
//! and a report directory with `results.csv` (every run, the columns of
//! [`CSV_HEADER`]), `summary.txt` (the tables) and SVG plots.

use crate::cli::args::{BenchArgs, TREE_SET_KEYS_QUICK};
use crate::cli::out_dir::make_out_dir;
use crate::cli::plan;
use crate::engines::Engine;
use crate::measure::pin::Placement;
use crate::measure::signal::{catch_signals, interrupted};
use crate::measure::{self, Spec};
use crate::recovery::crash::{FILL_THREADS, KEYS};
use crate::recovery::{self, RecoveryWorkload};
use crate::report::{domain_table, hot_table, plot, tables, targets};
use crate::report::{Results, Row, CSV_HEADER};
use crate::workloads::select::WorkloadKind;
use crate::workloads::ycsb::{YCSB_KEYS, ZIPF_THETA};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::{IsTerminal, Write};
use std::process::ExitCode;
use std::time::Instant;

/// Write to stdout, ignoring errors (a closed pipe must not panic the tool).
fn out(s: &str) {
    let mut o = std::io::stdout().lock();
    let _ = o.write_all(s.as_bytes());
    let _ = o.flush();
}

/// Write a line to stderr, ignoring errors.
fn err(s: &str) {
    let _ = writeln!(std::io::stderr().lock(), "{s}");
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
    let (specs, mut notes) = plan::plan(&s);
    let (recovery_engines, recovery_notes) = if s.workloads.contains(&WorkloadKind::Recovery) {
        recovery::recovery_engines(&s.engines)
    } else {
        (Vec::new(), Vec::new())
    };
    notes.extend(recovery_notes);
    // Read the affinity mask here, on the main thread, which is never pinned.
    let placement = Placement::new(s.pin);
    let replay_spht = s.workloads.contains(&WorkloadKind::Replay);
    if specs.is_empty() && recovery_engines.is_empty() && !replay_spht {
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
    if s.workloads.contains(&WorkloadKind::Tpcc) {
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
    if s.workloads.contains(&WorkloadKind::Tatp) {
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
    if s.workloads.contains(&WorkloadKind::Hot) {
        head += &format!(
            "data: hot, {} counters of 64 bytes; every transaction reads {} of them and \
             updates {} (update_pct 100); sp3 also without early visibility (sp3-no-ev)\n",
            crate::workloads::hot::HOT_KEYS,
            crate::workloads::hot::READS,
            crate::workloads::hot::WRITES,
        );
    }
    if !recovery_engines.is_empty() {
        head += &format!(
            "data: recovery, {} MiB of log from {} threads overwriting a {}-key hash table, \
             a crash, then Pool::open with 1 and 2 recovery threads, {} run{}\n",
            s.recovery_log_mib,
            FILL_THREADS,
            KEYS,
            s.runs,
            if s.runs == 1 { "" } else { "s" },
        );
    }
    if replay_spht {
        head += &format!(
            "data: replay, spht only (whatever --engines says), {} MiB of log from {} \
             threads overwriting a {}-key hash table and B+-tree with the replayer held, a \
             crash, then Pool::open per replay mode, duplicate filter and 1 and 2 threads, \
             {} run{}\n",
            s.replay_log_mib,
            FILL_THREADS,
            KEYS,
            s.runs,
            if s.runs == 1 { "" } else { "s" },
        );
    }
    if (s.workloads.contains(&WorkloadKind::Set) || s.workloads.contains(&WorkloadKind::TreeSet))
        && (s.set_engines != s.engines || s.set_threads != s.threads)
    {
        let names: Vec<&str> = s.set_engines.iter().map(|e| e.name()).collect();
        head += &format!(
            "sets: engines {}; threads {} (a reduced form in the main job)\n",
            names.join(","),
            list(&s.set_threads),
        );
    }
    if s.workloads.contains(&WorkloadKind::Set) {
        head += &format!(
            "data: set, a hash set (growing as it fills) of {} keys drawn from twice as many; \
             update mixes {} %\n",
            list(&s.set_keys),
            list(&s.set_mixes),
        );
    }
    if s.workloads.contains(&WorkloadKind::TreeSet) {
        head += &format!(
            "data: tree-set, a fanout-16 B+-tree set of {} keys drawn from twice as many{}; \
             update mixes {} %\n",
            list(&s.tree_set_keys),
            if s.mode == "quick" && s.tree_set_keys == TREE_SET_KEYS_QUICK {
                " (quick mode: the peers' 1M keys scaled down to 100K)"
            } else {
                ""
            },
            list(&s.set_mixes),
        );
    }
    if s.workloads.contains(&WorkloadKind::Capi) {
        head += &format!(
            "data: capi, the hash table above with the hash workload's operations, each \
             engine measured from Rust and then from C through the C interface \
             (labelled <engine>-c: one pisces_run per operation); update mixes {} %\n",
            list(&s.mixes),
        );
    }
    if s.workloads.contains(&WorkloadKind::Ycsb) {
        head += &format!(
            "data: ycsb, a key-value table of {YCSB_KEYS} records (8-byte keys, 64-byte \
             values; the library's engines on HashMap, one bucket per record), zipfian \
             requests (constant {ZIPF_THETA}, hot records scattered), one operation per \
             transaction; update mixes {} % (A = 50, B = 5, C = 0)\n",
            list(&s.ycsb_mixes),
        );
    }
    let peers: Vec<&'static str> = s
        .engines
        .iter()
        .filter_map(|e| e.peer())
        .map(|p| p.durability())
        .collect();
    if !peers.is_empty() {
        head += &format!(
            "peers: key-value stores on their own files under {}, durable at every commit: \
             {}; on /dev/shm (tmpfs) an fsync is nearly free, so these figures are their \
             CPU cost, not a device's; one write transaction at a time, concurrent readers\n",
            measure::pool_dir().display(),
            peers.join("; "),
        );
    }
    head += &format!("threads: {}\n", placement.describe());
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
            let r = measure::measure(spec, &s.sizes, s.seconds, seed, &placement, &mut |el, _| {
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
    let mut recovery_text = String::new();
    if !recovery_engines.is_empty() && !interrupted() {
        let (text, failed) = recovery::run(
            RecoveryWorkload::Recovery,
            &recovery_engines,
            s.recovery_log_mib,
            s.runs,
            s.seed,
            &dir,
            &mut |line| err(line),
        );
        recovery_text = text;
        failures.extend(failed);
    }

    let mut replay_text = String::new();
    if replay_spht && !interrupted() {
        let (text, failed) = recovery::run(
            RecoveryWorkload::Replay,
            &[Engine::SPHT],
            s.replay_log_mib,
            s.runs,
            s.seed,
            &dir,
            &mut |line| err(line),
        );
        replay_text = text;
        failures.extend(failed);
    }

    let mut summary = String::new();
    summary += &tables::throughput_tables(&res);
    summary += &tables::latency_table(&res);
    summary += &tables::breakdown_table(&res);
    summary += &hot_table::early_visibility_table(&res);
    summary += &domain_table::domain_table(&res);
    summary += &recovery_text;
    summary += &replay_text;
    summary += &tables::capi_table(&res);
    summary += &tables::markers_table(&res);
    summary += &tables::detail_table(&res);
    summary.push('\n');
    summary += &targets::targets(&res);
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
