//! A `pisces-bench` run (the main job or any other): make the plan, measure it run by run
//! (interleaved), and print and write the report.
//!
//! Output: a progress bar on stderr (hidden when stderr is not a terminal; one line per
//! measurement is printed there instead), tables and the performance targets on stdout,
//! and a report directory with `results.csv` (every run, the columns of
//! [`CSV_HEADER`]), `summary.txt` (the tables), `summary.md` (the same with the
//! command, date, build, machine and load: [`markdown`]) and SVG plots; `--markdown
//! FILE` writes the Markdown to FILE too.

use crate::cli::args::{BenchArgs, TREE_SET_KEYS_QUICK};
use crate::cli::facts::{self, load_average};
use crate::cli::out_dir::{make_out_dir, utc_datetime};
use crate::cli::plan;
use crate::engines::Engine;
use crate::measure::pin::Placement;
use crate::measure::signal::{catch_signals, interrupted};
use crate::measure::{self, processes, Spec};
use crate::recovery::crash::{FILL_THREADS, KEYS};
use crate::recovery::{self, RecoveryWorkload};
use crate::report::markdown::{self, PlotLink, RunInfo};
use crate::report::{plot, targets};
use crate::report::{Results, Row, CSV_HEADER};
use crate::workloads::bulk::{BULK_BATCH, BULK_KEYS};
use crate::workloads::select::WorkloadKind;
use crate::workloads::strmap::{MAX_VALUE, MIN_VALUE, STRMAP_KEYS};
use crate::workloads::ycsb::{YCSB_KEYS, ZIPF_THETA};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

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
    let threads = if spec.processes > 1 {
        format!("{}x{}t", spec.processes, spec.threads)
    } else {
        format!("{}t", spec.threads)
    };
    format!(
        "{} {} {threads} {}% {}ns run {run}/{runs}",
        spec.workload, spec.engine.label, spec.update_pct, spec.nvm_latency_ns
    )
}

fn list<T: ToString>(v: &[T]) -> String {
    v.iter().map(T::to_string).collect::<Vec<_>>().join(",")
}

/// A `pisces-bench` run (the main job or any other): exit 0 when every measurement ran, 1 when
/// some failed, 2 on usage errors and when the report cannot be written, 130 when
/// interrupted by a signal.
pub fn run(a: &BenchArgs, title: &str) -> ExitCode {
    let s = a.settings();
    let (specs, mut notes) = plan::plan(&s);
    // Engines that cannot share a pool are skipped with the library's reason before
    // anything is preloaded.
    let specs = plan::without_refused(specs, &mut notes, processes::sharing_refusal);
    let on_disk = s.disk.is_some();
    let (recovery_engines, recovery_notes) =
        if s.workloads.contains(&WorkloadKind::Recovery) && !on_disk {
            recovery::recovery_engines(&s.engines)
        } else {
            (Vec::new(), Vec::new())
        };
    notes.extend(recovery_notes);
    // Read the affinity mask here, on the main thread, which is never pinned.
    let placement = if !s.pin && on_disk {
        Placement::unpinned(
            "the --dir default: a durable commit sleeps until the device's interrupt \
             wakes it, and the scheduler may then run it on the CPU that took the \
             interrupt; --pin pins",
        )
    } else {
        Placement::new(s.pin)
    };
    let replay_spht = s.workloads.contains(&WorkloadKind::Replay) && !on_disk;
    if specs.is_empty() && recovery_engines.is_empty() && !replay_spht {
        err("pisces-bench: nothing to measure with these options");
        for n in &notes {
            err(&format!("  {n}"));
        }
        return ExitCode::from(2);
    }
    // The file system and device of a `--dir` run, read once it exists.
    let disk_fs = match &s.disk {
        Some(d) => match std::fs::create_dir_all(d) {
            Ok(()) if d.is_dir() => Some(facts::file_system(d)),
            Ok(()) => {
                err(&format!(
                    "pisces-bench: --dir {}: not a directory",
                    d.display()
                ));
                return ExitCode::from(2);
            }
            Err(e) => {
                err(&format!("pisces-bench: --dir {}: {e}", d.display()));
                return ExitCode::from(2);
            }
        },
        None => None,
    };
    let dir = match make_out_dir(s.out.as_deref()) {
        Ok(d) => d,
        Err(e) => {
            err(&format!("pisces-bench: {e}"));
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
                "pisces-bench: cannot write {}: {e}",
                csv_path.display()
            ));
            return ExitCode::from(2);
        }
    };
    let total = specs.len() * s.runs as usize;
    let workloads: Vec<&str> = s.workloads.iter().map(|w| w.name()).collect();
    let engines: Vec<&str> = s.engines.iter().map(|e| e.name()).collect();
    let z = &s.sizes;
    let started_utc = utc_datetime(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
    );
    let load_start = load_average();
    let medium = match (&s.disk, &disk_fs) {
        (Some(d), Some(fs)) => format!(
            "file medium under {}: {fs}; a fence msyncs the pages its thread flushed, so \
             a commit returns after its writes reached the device",
            d.display()
        ),
        _ => format!(
            "emulated PM: DRAM under {} with real cache-line flushes and fences, plus an \
             emulated NVM write latency charged per flushed line (not NVM)",
            measure::pool_dir().display()
        ),
    };
    let medium_line = match (&s.disk, &disk_fs) {
        (Some(_), Some(_)) => format!(
            "medium: {medium}. The disk table counts per durable commit the file medium's \
             msync calls and the bytes this process sent to the device (write_bytes of \
             /proc/self/io).\n"
        ),
        _ => format!(
            "medium: emulated PM = DRAM under {} with real cache-line flushes and fences, \
             plus an emulated NVM write latency charged per flushed line (hash/btree/\
             breakdown: {} ns; latency sweep: {} ns). These are not NVM numbers.\n",
            measure::pool_dir().display(),
            list(&s.latencies),
            list(&s.sweep_latencies),
        ),
    };
    let mut head = format!(
        "{title}\n\
         mode {}: engines {}; workloads {}; threads {}; seconds {} x {} run{}\n\
         {medium_line}\
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
        load_start,
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
            "data: replay, spht only (whatever --engines says), {} from {} with the \
             replayer held, a crash, then Pool::open per replay mode, duplicate filter and \
             1 and 2 threads, {} run{}\n",
            if s.replay_fill.txns > 0 {
                "the transactions".to_string()
            } else {
                format!("{} MiB of log", s.replay_log_mib)
            },
            s.replay_fill.describe(),
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
    if s.workloads.contains(&WorkloadKind::Strmap) {
        head += &format!(
            "data: strmap, a string-keyed map of {STRMAP_KEYS} records (keys `user` and 10 \
             digits, values of {MIN_VALUE}..={MAX_VALUE} bytes, the length a function of \
             the key and a stamp; the library's engines on BTreeMap<PBytes, PBytes>, the \
             peers on byte-keyed tables), ycsb's zipfian requests, one operation per \
             transaction: a read fetches a value, an update replaces one whole and frees \
             the old; every record checked after each measurement; update mixes {} %\n",
            list(&s.strmap_mixes),
        );
    }
    if s.workloads.contains(&WorkloadKind::Bulk) {
        head += &format!(
            "data: bulk, one writer inserting {BULK_BATCH} keys per transaction into an \
             empty table of {BULK_KEYS} keys (8-byte keys, 64-byte values; the library's \
             engines on HashMap, one bucket per key) in a seeded random order; a run that \
             gets through them all starts again, replacing values (update_pct 100)\n"
        );
    }
    let peers: Vec<&'static str> = s
        .engines
        .iter()
        .filter_map(|e| e.peer())
        .map(|p| p.durability())
        .collect();
    let writers: Vec<String> = s
        .engines
        .iter()
        .filter_map(|e| e.peer())
        .map(|p| format!("{} {}", p.name(), p.writers()))
        .collect();
    if !peers.is_empty() {
        let place = match &s.disk {
            Some(d) => format!("{} (the --dir file system)", d.display()),
            None => format!(
                "{}; on /dev/shm (tmpfs) an fsync is nearly free, so these figures are \
                 their CPU cost, not a device's",
                measure::pool_dir().display()
            ),
        };
        head += &format!(
            "peers: key-value stores on their own files under {place}, durable at every \
             commit: {}; write transactions: {}; concurrent readers\n",
            peers.join("; "),
            writers.join(", "),
        );
    }
    if s.processes.iter().any(|&n| n > 1) {
        head += &format!(
            "processes: {} (hash, set and tree-set; N above 1: N worker processes of \
             each thread count on one pool they open shared, labelled <engine>@<N>proc, \
             threads counting every process's)\n",
            list(&s.processes),
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
            let r =
                measure::run::measure(spec, &s.sizes, s.seconds, seed, &placement, &mut |el, _| {
                    pb.set_position(base + (el.as_millis() as u64).min(ms));
                });
            match r {
                Ok(o) => {
                    let row = Row::new(spec, run, &o);
                    if let Err(e) = writeln!(csv, "{}", row.to_csv()) {
                        pb.finish_and_clear();
                        err(&format!(
                            "pisces-bench: cannot write {}: {e}",
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
                    pb.suspend(|| err(&format!("pisces-bench: measurement failed: {msg}")));
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
            &recovery::ReplayFill::default(),
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
            &s.replay_fill,
            s.runs,
            s.seed,
            &dir,
            &mut |line| err(line),
        );
        replay_text = text;
        failures.extend(failed);
    }

    let extra = format!("{recovery_text}{replay_text}");
    let mut summary = markdown::tables_text(&res, &extra);
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
            err(&format!("pisces-bench: {e}"));
            code = ExitCode::from(2);
            Vec::new()
        }
    };
    let names: Vec<String> = plots
        .iter()
        .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .collect();
    let load_end = load_average();
    let elapsed_s = started.elapsed().as_secs_f64();
    let footer = format!("\nfinished in {elapsed_s:.0} s (load average now {load_end})\n");
    let summary_path = dir.join("summary.txt");
    if let Err(e) = std::fs::write(&summary_path, format!("{head}{summary}{footer}")) {
        err(&format!(
            "pisces-bench: cannot write {}: {e}",
            summary_path.display()
        ));
        code = ExitCode::from(2);
    }
    // The settings as printed, without the title line (the section's heading) and the
    // report directory (a path on the machine that ran it).
    let settings: String = head
        .lines()
        .skip(1)
        .filter(|l| !l.starts_with("report directory:") && !l.is_empty())
        .map(|l| format!("{l}\n"))
        .collect();
    let info = RunInfo {
        title: title.to_string(),
        command: facts::command_line(),
        started: started_utc,
        build: facts::build_commit(),
        machine: facts::machine(),
        medium,
        load_start,
        load_end,
        elapsed_s,
        settings,
    };
    let mut written = vec!["summary.txt".to_string(), "summary.md".to_string()];
    let here: Vec<PlotLink> = names
        .iter()
        .map(|n| PlotLink {
            name: n.clone(),
            link: n.clone(),
        })
        .collect();
    let section = markdown::section(&info, &res, &extra, &failures, interrupted(), &here);
    let md_path = dir.join("summary.md");
    if let Err(e) = std::fs::write(&md_path, format!("{}{section}", markdown::PREFACE)) {
        err(&format!(
            "pisces-bench: cannot write {}: {e}",
            md_path.display()
        ));
        code = ExitCode::from(2);
        written.pop();
    }
    let mut elsewhere = String::new();
    if let Some(file) = &a.markdown {
        match write_markdown(
            file,
            a.markdown_plots.as_deref(),
            a.markdown_append,
            &dir,
            &names,
            |plots| markdown::section(&info, &res, &extra, &failures, interrupted(), plots),
        ) {
            Ok(()) => elsewhere = format!("\nMarkdown report written to {}\n", file.display()),
            Err(e) => {
                err(&format!("pisces-bench: {e}"));
                code = ExitCode::from(2);
            }
        }
    }
    out(&format!(
        "{footer}report written to {}\n  results.csv ({} rows), {}{}{}\n{elsewhere}",
        dir.display(),
        res.rows.len(),
        written.join(", "),
        if names.is_empty() { "" } else { ", " },
        names.join(", "),
    ));
    code
}

/// Write the run's Markdown section to `file` (after the preface, or appended to what
/// `file` holds when `append`), its plots linked where they are: copied into
/// `plots_dir` when given, else in the report directory `dir`.
fn write_markdown(
    file: &Path,
    plots_dir: Option<&Path>,
    append: bool,
    dir: &Path,
    names: &[String],
    section: impl Fn(&[PlotLink]) -> String,
) -> Result<(), String> {
    let base = match file.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let target = match plots_dir {
        Some(d) => {
            std::fs::create_dir_all(d)
                .map_err(|e| format!("cannot create {}: {e}", d.display()))?;
            for n in names {
                std::fs::copy(dir.join(n), d.join(n))
                    .map_err(|e| format!("cannot copy {n} to {}: {e}", d.display()))?;
            }
            d.to_path_buf()
        }
        None => dir.to_path_buf(),
    };
    // Both resolved the same way (symbolic links included), so that the link between
    // them is the shortest.
    let resolve = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    let (base, target) = (resolve(&base), resolve(&target));
    let links: Vec<PlotLink> = names
        .iter()
        .map(|n| PlotLink {
            name: n.clone(),
            link: markdown::link(&markdown::relative_to(&target.join(n), &base)),
        })
        .collect();
    let text = section(&links);
    let text = if append && file.exists() {
        let old = std::fs::read_to_string(file)
            .map_err(|e| format!("cannot read {}: {e}", file.display()))?;
        format!("{old}{text}")
    } else {
        format!("{}{text}", markdown::PREFACE)
    };
    std::fs::write(file, text).map_err(|e| format!("cannot write {}: {e}", file.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `--dir` on the real file system of the temporary directory: the pools on the
    /// file medium, a peer's files beside them; the report names the file system, its
    /// disk table and CSV columns count the msync calls of every durable commit of the
    /// pool engines and the bytes sent to the device, and state the peer's syncs.
    #[test]
    fn a_dir_run_measures_durable_commits_on_the_file_system() {
        use crate::report::FILE_MEDIUM;
        // Not /dev/shm: the file system the user's pools would be on.
        let root = tempfile::tempdir_in(std::env::temp_dir()).unwrap();
        let disk = root.path().join("pools");
        let out = root.path().join("out");
        let args = crate::cli::args::tests::parse(&[
            "--dir",
            disk.to_str().unwrap(),
            "--engines",
            "pisces,undo,volatile,redb",
            "--workloads",
            "hash,bulk,latency",
            "--threads",
            "1",
            "--hash-pairs",
            "500",
            "--hash-buckets",
            "64",
            "--seconds",
            "0.2",
            "--no-pin",
            "--out",
            out.to_str().unwrap(),
        ])
        .unwrap();
        let code = run(&args, "disk test");
        assert_eq!(format!("{code:?}"), format!("{:?}", ExitCode::SUCCESS));
        let fs = facts::file_system(&disk);
        let summary = std::fs::read_to_string(out.join("summary.txt")).unwrap();
        assert!(
            summary.contains(&format!("file medium under {}: {fs}", disk.display())),
            "{summary}"
        );
        assert!(
            summary.contains("Durable commits on the file system"),
            "{summary}"
        );
        assert!(summary.contains("1 (stated)"), "{summary}");
        assert!(summary.contains("volatile skipped (--dir"), "{summary}");
        assert!(summary.contains("latency: skipped with --dir"), "{summary}");
        // Nothing left behind in the directory.
        assert_eq!(std::fs::read_dir(&disk).unwrap().count(), 0);

        let csv = std::fs::read_to_string(out.join("results.csv")).unwrap();
        let mut lines = csv.lines();
        let head: Vec<&str> = lines.next().unwrap().split(',').collect();
        let col = |name: &str| head.iter().position(|h| *h == name).unwrap();
        let (engine, workload, medium) = (col("engine"), col("workload"), col("medium"));
        let (syncs, bytes, rate) = (
            col("syncs_per_write_tx"),
            col("device_bytes_per_write_tx"),
            col("write_tx_per_sec"),
        );
        let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
        let mut seen = Vec::new();
        // tmpfs sends nothing to a device: bytes are only expected of a real one.
        let device = !fs.starts_with("tmpfs");
        for r in &rows {
            let what = format!("{} {}", r[workload], r[engine]);
            assert_eq!(r[medium], FILE_MEDIUM, "{what}");
            assert!(r[rate].parse::<f64>().unwrap() > 0.0, "{what}");
            let b: f64 = r[bytes].parse().unwrap();
            if device {
                // Every durable commit dirties at least one page again after the
                // previous sync cleaned it.
                assert!(b >= 4096.0, "{what}: {b} bytes per commit on {fs}");
            }
            let n: f64 = r[syncs].parse().unwrap();
            match r[engine] {
                // A durable commit on the file medium msyncs at least once.
                "pisces" | "undo" => assert!(n >= 1.0, "{what}: {n} msyncs per commit"),
                // redb syncs by itself: not counted.
                "redb" => assert!(n.is_nan(), "{what}: {n}"),
                other => panic!("{other} was measured"),
            }
            seen.push(what);
        }
        seen.sort();
        assert_eq!(
            seen,
            [
                "bulk pisces",
                "bulk redb",
                "bulk undo",
                "hash pisces",
                "hash redb",
                "hash undo"
            ]
        );
    }

    /// `--markdown FILE` replaces FILE (preface + section), `--markdown-append` adds a
    /// section, and `--markdown-plots DIR` copies the plots there and links them
    /// relative to FILE.
    #[test]
    fn markdown_files_are_replaced_or_appended_with_plots_linked_from_the_file() {
        let d = tempfile::tempdir().unwrap();
        let report = d.path().join("target/bench/run");
        std::fs::create_dir_all(&report).unwrap();
        std::fs::write(report.join("a.svg"), "<svg/>").unwrap();
        let file = d.path().join("BENCH.md");
        std::fs::write(&file, "old contents\n").unwrap();
        let names = vec!["a.svg".to_string()];
        let section =
            |n: u32| move |plots: &[PlotLink]| format!("\n## run {n}\n![a]({})\n", plots[0].link);
        let plots = d.path().join("docs/plots");
        write_markdown(&file, Some(&plots), false, &report, &names, section(1)).unwrap();
        assert_eq!(
            std::fs::read_to_string(plots.join("a.svg")).unwrap(),
            "<svg/>"
        );
        let text = std::fs::read_to_string(&file).unwrap();
        assert!(
            text.starts_with(markdown::PREFACE),
            "replaced, with the preface"
        );
        assert!(text.ends_with("\n## run 1\n![a](docs/plots/a.svg)\n"));
        write_markdown(&file, None, true, &report, &names, section(2)).unwrap();
        let text2 = std::fs::read_to_string(&file).unwrap();
        assert_eq!(
            text2,
            format!("{text}\n## run 2\n![a](target/bench/run/a.svg)\n"),
            "appended, linking the plot in the report directory"
        );
    }
}
