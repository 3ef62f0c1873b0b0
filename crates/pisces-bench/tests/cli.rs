//! The `pisces-bench` binary and its main job, run as a user would, with tiny durations and data
//! sets. These check what the harness writes (CSV columns and rows, plots, tables,
//! exit codes) and counter relations that follow from the engines' design; they assert
//! nothing about speed (benchmarks are measured, not asserted).

use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Command, Stdio};

const HEADER: &str = "engine,workload,threads,update_pct,nvm_latency_ns,run,ops_per_sec,\
abort_rate,ro_p50_ns,ro_p99_ns,upd_p50_ns,upd_p99_ns,flushes_per_tx,fences_per_tx,write_amp,\
ro_locked_reads_per_ro_tx,shared_rmw_per_tx,shared_lines_per_tx,medium,write_tx_per_sec,\
syncs_per_write_tx,device_bytes_per_write_tx";

struct Run {
    pid: u32,
    code: i32,
    stdout: String,
    stderr: String,
}

fn bench(args: &[&str]) -> Run {
    let child = Command::new(env!("CARGO_BIN_EXE_pisces-bench"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary runs");
    let pid = child.id();
    let o = child.wait_with_output().expect("the binary runs");
    let r = Run {
        pid,
        code: o.status.code().expect("exited, not killed by a signal"),
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
    };
    assert!(
        !r.stderr.contains("panicked"),
        "pisces-bench {args:?} panicked:\n{}",
        r.stderr
    );
    r
}

/// One CSV row, by column name.
struct Row(Vec<(String, String)>);

impl Row {
    fn s(&self, col: &str) -> &str {
        &self
            .0
            .iter()
            .find(|(c, _)| c == col)
            .unwrap_or_else(|| panic!("no column {col}"))
            .1
    }
    fn f(&self, col: &str) -> f64 {
        let v = self.s(col);
        v.parse()
            .unwrap_or_else(|_| panic!("{col} = `{v}` is not a number"))
    }
}

/// Read `results.csv`: the header must be exact and every field of every row present.
fn read_csv(dir: &Path) -> Vec<Row> {
    let text = std::fs::read_to_string(dir.join("results.csv")).unwrap();
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some(HEADER));
    let cols: Vec<&str> = HEADER.split(',').collect();
    lines
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            assert_eq!(f.len(), cols.len(), "{l}");
            let row = Row(cols
                .iter()
                .zip(&f)
                .map(|(c, v)| (c.to_string(), v.to_string()))
                .collect());
            // Every numeric column parses (NaN marks a metric that does not apply); the
            // medium is a name.
            for c in cols[2..].iter().filter(|c| **c != "medium") {
                row.f(c);
            }
            assert!(["dram", "file"].contains(&row.s("medium")), "{l}");
            row
        })
        .collect()
}

fn assert_svg(path: &Path) {
    let s = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert!(
        s.starts_with("<svg") && s.trim_end().ends_with("</svg>"),
        "{} is not an SVG document",
        path.display()
    );
}

#[test]
fn hash_bench_writes_every_run_to_the_csv_and_plots_it() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("report");
    let md = d.path().join("BENCH.md");
    let r = bench(&[
        "--seconds",
        "0.2",
        "--runs",
        "1",
        "--engines",
        "pisces,undo",
        "--workloads",
        "hash",
        "--threads",
        "1",
        "--hash-pairs",
        "2000",
        "--out",
        out.to_str().unwrap(),
        "--markdown",
        md.to_str().unwrap(),
    ]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    // The Markdown report: in the report directory and in the --markdown file, with
    // the facts of the run, the tables and the plot.
    let summary_md = std::fs::read_to_string(out.join("summary.md")).unwrap();
    for want in [
        "| command | `pisces-bench --seconds 0.2 --runs 1 --engines pisces,undo",
        "| build | ",
        "| machine | ",
        "| load average (1, 5, 15 min) | ",
        "pisces/undo",
        "### Targets",
        "![throughput-hash](throughput-hash.svg)",
    ] {
        assert!(summary_md.contains(want), "{want}\n{summary_md}");
    }
    let file_md = std::fs::read_to_string(&md).unwrap();
    assert!(
        file_md.contains("](report/throughput-hash.svg)"),
        "{file_md}"
    );
    assert_eq!(
        file_md.replace("](report/", "]("),
        summary_md,
        "the same Markdown, plots linked from where the file is"
    );
    let rows = read_csv(&out);
    // 2 engines x the quick hash mixes 0, 2, 20 %.
    assert_eq!(rows.len(), 6);
    let configs: BTreeSet<(String, u32)> = rows
        .iter()
        .map(|r| (r.s("engine").to_string(), r.f("update_pct") as u32))
        .collect();
    let want: BTreeSet<(String, u32)> = ["pisces", "undo"]
        .iter()
        .flat_map(|e| [0, 2, 20].map(|p| (e.to_string(), p)))
        .collect();
    assert_eq!(configs, want);
    for row in &rows {
        assert_eq!(row.s("workload"), "hash");
        assert_eq!((row.f("threads"), row.f("run")), (1.0, 1.0));
        assert_eq!(row.f("nvm_latency_ns"), 0.0);
        assert!(row.f("ops_per_sec") > 0.0);
        let a = row.f("abort_rate");
        assert!((0.0..=1.0).contains(&a));
        assert!(row.f("ro_p50_ns") > 0.0 && row.f("ro_p99_ns") >= row.f("ro_p50_ns"));
        if row.s("engine") != "pisces" || row.f("update_pct") == 0.0 {
            // Only pisces counts copy-path reads, and without writers there are none.
            assert_eq!(row.f("ro_locked_reads_per_ro_tx"), 0.0);
        }
        if row.f("update_pct") == 0.0 {
            // No update transactions: no update latency, no write amplification, and
            // read-only transactions persist nothing.
            assert!(row.f("upd_p50_ns").is_nan() && row.f("write_amp").is_nan());
            assert_eq!(row.f("flushes_per_tx"), 0.0);
            assert_eq!(row.f("fences_per_tx"), 0.0);
        }
        if row.f("update_pct") == 20.0 {
            assert!(row.f("upd_p99_ns") >= row.f("upd_p50_ns"));
            assert!(row.f("flushes_per_tx") > 0.0 && row.f("fences_per_tx") > 0.0);
            // Both engines log and write home at least what the program changed.
            assert!(row.f("write_amp") >= 1.0, "{}", row.s("engine"));
        }
    }
    assert_svg(&out.join("throughput-hash.svg"));
    let summary = std::fs::read_to_string(out.join("summary.txt")).unwrap();
    assert!(summary.contains("pisces/undo"), "{summary}");
    // The terminal shows the engines side by side with ratios, and where the report is.
    assert!(r.stdout.contains("pisces Mops/s") && r.stdout.contains("undo Mops/s"));
    assert!(r.stdout.contains("pisces/undo"));
    assert!(r.stdout.contains("Targets (measured in this run"));
    assert!(!r.stdout.contains("issue 5"), "{}", r.stdout);
    let written = r
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("report written to "))
        .expect("says where the report is");
    assert_eq!(
        Path::new(written),
        std::fs::canonicalize(&out).unwrap().as_path()
    );
    // Not a terminal: no progress bar, one line per measurement on stderr.
    assert_eq!(r.stderr.lines().filter(|l| l.starts_with("[")).count(), 6);
    // No pool file of this process is left behind.
    let prefix = format!("pisces-bench-{}-", r.pid);
    let leftover = std::fs::read_dir("/dev/shm")
        .map(|d| {
            d.filter_map(|e| e.ok())
                .any(|e| e.file_name().to_string_lossy().starts_with(&prefix))
        })
        .unwrap_or(false);
    assert!(!leftover, "a pool file is left in /dev/shm");
}

#[test]
fn latency_sweep_and_breakdown_rows_runs_and_plots() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("r");
    let r = bench(&[
        "--seconds",
        "0.15",
        "--runs",
        "2",
        "--engines",
        "pisces",
        "--workloads",
        "latency,latency-split,breakdown",
        "--threads",
        "2",
        "--nvm-latency-ns",
        "0,1000",
        "--hash-pairs",
        "2000",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let rows = read_csv(&out);
    // Per run: latency and latency-split 1 engine x 2 latencies each, the latency
    // sweep's control at its largest latency; breakdown 3 variants x 2 latencies.
    assert_eq!(rows.len(), 2 * (2 + 1 + 2 + 6));
    for run in [1.0, 2.0] {
        assert_eq!(rows.iter().filter(|r| r.f("run") == run).count(), 11);
    }
    let control: Vec<&Row> = rows
        .iter()
        .filter(|r| r.s("workload") == "latency-waits-outside")
        .collect();
    assert_eq!(control.len(), 2);
    assert!(control.iter().all(|r| r.s("engine") == "pisces"
        && r.f("nvm_latency_ns") == 1000.0
        && r.f("update_pct") == 20.0
        && r.f("threads") == 2.0
        && r.f("ro_p50_ns") > 0.0
        && r.f("upd_p50_ns") > 0.0));
    // The split sweep: a reader thread and a writer thread, so both kinds of latency.
    for r in rows.iter().filter(|r| r.s("workload") == "latency-split") {
        assert_eq!((r.f("update_pct"), r.f("threads")), (100.0, 2.0));
        assert!(r.f("ro_p50_ns") > 0.0 && r.f("upd_p50_ns") > 0.0);
        // Copy-path reads: a count per read-only transaction, well below one lookup's
        // few reads.
        let locked = r.f("ro_locked_reads_per_ro_tx");
        assert!((0.0..3.0).contains(&locked), "{locked}");
    }
    let lat: Vec<&Row> = rows
        .iter()
        .filter(|r| r.s("workload") == "latency")
        .collect();
    assert!(lat
        .iter()
        .all(|r| r.s("engine") == "pisces" && r.f("update_pct") == 20.0));
    let labels: BTreeSet<&str> = rows
        .iter()
        .filter(|r| r.s("workload") == "breakdown")
        .map(|r| r.s("engine"))
        .collect();
    assert_eq!(
        labels,
        BTreeSet::from(["pisces", "pisces-diff", "pisces-whole"])
    );
    // What each optimisation removes shows in the counters (not in timing):
    // flush-diff logs less than flushing whole objects, and group commit batches the
    // write-back fences of 8 transactions.
    let mean = |engine: &str, col: &str| {
        let v: Vec<f64> = rows
            .iter()
            .filter(|r| r.s("workload") == "breakdown" && r.s("engine") == engine)
            .map(|r| r.f(col))
            .collect();
        v.iter().sum::<f64>() / v.len() as f64
    };
    assert!(mean("pisces-whole", "write_amp") > mean("pisces-diff", "write_amp"));
    assert!(mean("pisces-whole", "flushes_per_tx") > mean("pisces-diff", "flushes_per_tx"));
    assert!(mean("pisces", "fences_per_tx") < mean("pisces-diff", "fences_per_tx"));
    assert_svg(&out.join("latency.svg"));
    assert_svg(&out.join("latency-split.svg"));
    assert_svg(&out.join("breakdown.svg"));
    assert!(r.stdout.contains("p99/p99@0"), "{}", r.stdout);
    for want in [
        "pisces read-only p99, 2 threads, 20% updates",
        "pisces read-only p99, 2 threads, dedicated reader",
        "latency-waits-outside: transaction latency",
        "the same with each NVM wait paid after the transaction (control)",
    ] {
        assert!(r.stdout.contains(want), "{want}: {}", r.stdout);
    }
    // The control is a table, not a plot.
    assert!(!out.join("throughput-latency-waits-outside.svg").exists());
}

#[test]
fn a_signal_stops_the_bench_removes_the_pool_and_keeps_the_partial_report() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("s");
    let child = Command::new(env!("CARGO_BIN_EXE_pisces-bench"))
        .args([
            "--seconds",
            "600",
            "--runs",
            "1",
            "--engines",
            "volatile",
            "--workloads",
            "hash",
            "--threads",
            "1",
            "--update-pct",
            "0",
            "--hash-pairs",
            "1000",
            "--out",
            out.to_str().unwrap(),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let prefix = format!("pisces-bench-{pid}-");
    let pools = || -> Vec<String> {
        std::fs::read_dir("/dev/shm")
            .map(|d| {
                d.filter_map(|e| e.ok())
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .filter(|n| n.starts_with(&prefix))
                    .collect()
            })
            .unwrap_or_default()
    };
    // Wait until the measurement's pool exists (the bench is then running).
    let mut waited = 0;
    while pools().is_empty() {
        assert!(waited < 600, "no pool file appeared");
        std::thread::sleep(std::time::Duration::from_millis(100));
        waited += 1;
    }
    let k = Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .unwrap();
    assert!(k.success());
    let o = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(130), "{:?} {stdout}", o.status);
    assert!(stdout.contains("INTERRUPTED"), "{stdout}");
    assert!(pools().is_empty(), "the pool file was left behind");
    // The report is still written: the CSV header, no rows (nothing finished).
    assert!(read_csv(&out).is_empty());
    assert!(out.join("summary.txt").exists());
}

/// Without `--workloads` or `--full` the binary runs the main job: the quick mode's
/// default workloads, the sets in their reduced form (1 thread, 1 and 10 % updates);
/// sizes, engines and durations given on the command line apply to it.
#[test]
fn the_main_job_is_the_quick_default_and_takes_options() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("m");
    let r = bench(&[
        "--seconds",
        "0.1",
        "--runs",
        "1",
        "--engines",
        "volatile",
        "--threads",
        "1",
        "--hash-pairs",
        "2000",
        "--btree-keys",
        "2000",
        "--set-keys",
        "1000",
        "--tree-set-keys",
        "1000",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert!(
        r.stdout
            .starts_with("pisces-bench main job: the quick default"),
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains("mode quick"));
    assert!(r.stdout.contains("emulated PM"));
    let rows = read_csv(&out);
    let mixes = |workload: &str| -> Vec<u32> {
        rows.iter()
            .filter(|r| r.s("workload") == workload && r.s("engine") == "volatile")
            .map(|r| r.f("update_pct") as u32)
            .collect()
    };
    // The quick mixes of the hash table and the B+-tree; the sets' reduced mixes.
    assert_eq!(mixes("hash"), [0, 2, 20]);
    assert_eq!(mixes("btree"), [0, 20]);
    assert_eq!(mixes("set-1k"), [1, 10]);
    assert_eq!(mixes("tree-set-1k"), [1, 10]);
    // The breakdown runs its own Pisces variants at 20 % updates.
    assert!(
        rows.iter()
            .any(|r| r.s("workload") == "breakdown" && r.f("update_pct") == 20.0),
        "no breakdown rows"
    );
    assert_svg(&out.join("throughput-btree.svg"));
    // Naming the workloads leaves the main job: its own title, the sets' full mixes.
    let out = d.path().join("w");
    let r = bench(&[
        "--seconds",
        "0.1",
        "--runs",
        "1",
        "--engines",
        "volatile",
        "--workloads",
        "set",
        "--threads",
        "1",
        "--set-keys",
        "1000",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert!(r.stdout.starts_with("pisces-bench\n"), "{}", r.stdout);
    let mixes: Vec<u32> = read_csv(&out)
        .iter()
        .map(|r| r.f("update_pct") as u32)
        .collect();
    assert_eq!(mixes, [1, 10, 100]);
}

#[test]
fn set_workloads_run_once_per_size_when_named() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("s");
    let r = bench(&[
        "--seconds",
        "0.1",
        "--runs",
        "1",
        "--engines",
        "pisces",
        "--workloads",
        "set,tree-set",
        "--threads",
        "1",
        "--set-keys",
        "1000,3000",
        "--tree-set-keys",
        "2000",
        "--update-pct",
        "0,100",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("data: set, a hash set"), "{}", r.stdout);
    assert!(r.stdout.contains("data: tree-set"), "{}", r.stdout);
    let rows = read_csv(&out);
    let got: Vec<(String, u32)> = rows
        .iter()
        .map(|r| (r.s("workload").to_string(), r.f("update_pct") as u32))
        .collect();
    let want: Vec<(String, u32)> = ["set-1k", "set-3k", "tree-set-2k"]
        .iter()
        .flat_map(|w| [0, 100].map(|p| (w.to_string(), p)))
        .collect();
    assert_eq!(got, want);
    for row in &rows {
        assert!(row.f("ops_per_sec") > 0.0);
        if row.f("update_pct") == 100.0 {
            // Remove and add back: the program changes 16 bytes per update.
            assert!(row.f("write_amp") >= 1.0 && row.f("fences_per_tx") > 0.0);
            assert!(row.f("ro_p50_ns").is_nan());
        }
    }
    for w in ["set-1k", "set-3k", "tree-set-2k"] {
        assert_svg(&out.join(format!("throughput-{w}.svg")));
    }
}

/// The recovery and replay workloads time each open in a child process (the binary run
/// with its hidden `recovery-child` subcommand): every CSV row has the child's wall,
/// CPU and page-fault figures, and the harness checked every recovered value (a
/// wrong value fails the run: exit 1).
#[test]
fn recovery_and_replay_time_the_open_in_a_child_process() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("r");
    let r = bench(&[
        "--runs",
        "1",
        "--engines",
        "sp3",
        "--workloads",
        "recovery,replay",
        "--recovery-log-mib",
        "4",
        "--replay-log-mib",
        "4",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert!(
        r.stdout.contains("timed in a fresh process"),
        "{}",
        r.stdout
    );
    for (file, rows, wall, cpu) in [
        ("recovery.csv", 2, "recovery_secs", "recovery_cpu_secs"),
        ("replay.csv", 12, "open_secs", "open_cpu_secs"),
    ] {
        let text = std::fs::read_to_string(out.join(file)).unwrap();
        let mut lines = text.lines();
        let header: Vec<&str> = lines.next().unwrap().split(',').collect();
        let body: Vec<&str> = lines.collect();
        assert_eq!(body.len(), rows, "{file}:\n{text}");
        for line in body {
            let row: Vec<&str> = line.split(',').collect();
            assert_eq!(row.len(), header.len(), "{file}: {line}");
            let col = |c: &str| -> f64 {
                row[header.iter().position(|h| *h == c).unwrap()]
                    .parse()
                    .unwrap()
            };
            assert!(col(wall) > 0.0 && col(cpu) >= 0.0, "{file}: {line}");
            // The child mapped the pool and faulted its pages in: a fresh process.
            assert!(col("minor_faults") > 100.0, "{file}: {line}");
            assert!(col("log_bytes") >= f64::from(4 << 20), "{file}: {line}");
        }
    }
    // The hidden subcommand refuses bad arguments with exit 2.
    let bad = bench(&["recovery-child", "/nonexistent", "sp3"]);
    assert_eq!(bad.code, 2, "{}", bad.stderr);
    assert!(bad.stderr.contains("usage"), "{}", bad.stderr);
}

#[test]
fn bad_bench_options_exit_2_with_a_reason() {
    let d = tempfile::tempdir().unwrap();
    let file = d.path().join("f");
    std::fs::write(&file, b"x").unwrap();
    let under_file = file.join("sub");
    for (args, want) in [
        (vec!["--engines", "nosuch"], "unknown engine"),
        (vec!["--threads", "0"], "thread count"),
        (vec!["--update-pct", "150"], "percentage"),
        (vec!["--seconds", "-1"], "unexpected argument"),
        (vec!["--quick", "--full"], "cannot be used with"),
        (vec!["--workloads", "tpc-c"], "invalid value"),
        (vec!["--set-keys", "0"], "key count"),
        (vec!["--engines", "nope"], "unknown engine"),
        (
            vec![
                "--workloads",
                "breakdown",
                "--update-pct",
                "0",
                "--out",
                d.path().to_str().unwrap(),
            ],
            "nothing to measure",
        ),
        (
            vec!["--out", under_file.to_str().unwrap()],
            "cannot create the report directory",
        ),
    ] {
        let r = bench(&args);
        assert_eq!(r.code, 2, "{args:?}: {}{}", r.stdout, r.stderr);
        assert!(r.stderr.contains(want), "{args:?}: {}", r.stderr);
    }
}
