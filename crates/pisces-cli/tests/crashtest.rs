//! `pisces crashtest`: the command's behaviour, and (with the test-only `mutation`
//! feature) its half of the mutation evidence.
//!
//! The command's module is compiled into this test directly, so the tests call the very
//! function the binary runs, with arguments parsed by the same clap definition, and
//! read what it prints. Run the mutation part with
//! `cargo test -p pisces-cli --release --features mutation --test crashtest`.
//!
//! Mutation evidence here: with the log checksum or the flush of the log record removed,
//! every-fence campaigns of `bank` and `list` report violations; with no mutation the
//! same campaigns report none. (The other protocol steps are covered elsewhere: the
//! grace period by the read-skew test and the recycle watermark by the stale-replay
//! test in `crates/pisces-verify/tests/engine_pisces/mutations.rs`, the `inCritical`
//! wait by the loom model of the commit protocol; random 2-thread crashtest campaigns
//! catch the watermark and the grace period too.) For `spht`, whose log is its own,
//! random campaigns catch the removed flush of its log record; an unknown point name
//! is refused with the engine's list.

#[allow(dead_code)]
#[path = "../src/cmd_crashtest.rs"]
mod cmd_crashtest;

use clap::Parser;
use cmd_crashtest::{run_to, CrashtestArgs};
use std::sync::Mutex;

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    args: CrashtestArgs,
}

/// A campaign swaps the process's panic hook while it runs (`QuietPanics`), which two
/// campaigns at once would leave swapped: one campaign at a time.
static SERIAL: Mutex<()> = Mutex::new(());

fn parse(args: &[&str]) -> Result<CrashtestArgs, clap::Error> {
    Cli::try_parse_from(std::iter::once("crashtest").chain(args.iter().copied())).map(|c| c.args)
}

/// Run `pisces crashtest ARGS`: exit status and stdout.
fn crashtest(args: &[&str]) -> (u8, String) {
    let a = parse(args).expect("valid arguments");
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut out = Vec::new();
    let code = run_to(&a, &mut out);
    (code, String::from_utf8(out).expect("utf-8 output"))
}

/// `(states, violations)` from the last line, which must be exactly the summary line.
fn totals(out: &str) -> (u64, u64) {
    let last = out.lines().last().expect("some output");
    let rest = last
        .strip_prefix("crash states: ")
        .unwrap_or_else(|| panic!("last line is not the summary: {last:?}"));
    let (n, rest) = rest.split_once(" checked, ").expect("summary format");
    let v = rest.strip_suffix(" violations").expect("summary format");
    let (n, v) = (n.parse().expect("a count"), v.parse().expect("a count"));
    assert_eq!(last, format!("crash states: {n} checked, {v} violations"));
    (n, v)
}

#[test]
fn a_random_campaign_over_all_workloads_is_clean() {
    let (code, out) = crashtest(&["--states", "60", "--ops", "30", "--seed", "7"]);
    let (n, v) = totals(&out);
    assert_eq!((code, v), (0, 0), "{out}");
    assert!(n >= 60, "{out}");
    for w in ["bank", "list", "alloc", "hashmap", "btree"] {
        assert!(
            out.lines()
                .any(|l| l.starts_with(w) && l.contains("0 violations")),
            "no summary for {w}:\n{out}"
        );
    }
    assert!(!out.contains("VIOLATION"));
}

#[test]
fn an_exhaustive_campaign_checks_every_fence() {
    let (code, out) = crashtest(&[
        "--exhaustive",
        "--workload",
        "btree",
        "--ops",
        "5",
        "--images",
        "1",
        "--flush-diff",
        "on",
        "--group-commit",
        "8",
    ]);
    let (n, v) = totals(&out);
    assert_eq!((code, v), (0, 0), "{out}");
    // One image per fence of one option set: as many states as crash points.
    assert!(
        out.contains(&format!("{n} states from {n:>6} crashes")),
        "{out}"
    );
    assert!(n > 5, "{out}");
}

#[test]
fn a_state_can_be_run_again_by_its_index() {
    let (code, out) = crashtest(&[
        "--workload",
        "list",
        "--threads",
        "1",
        "--ops",
        "20",
        "--reproduce",
        "9",
    ]);
    assert_eq!(code, 0, "{out}");
    assert_eq!(totals(&out), (1, 0));
    assert!(out.contains("list state 9: crash at fence"), "{out}");
}

/// Deferred durability on sp3 (its commits return before their predecessors are
/// durable): the oracles accept what a crash may lose and find nothing wrong; a state
/// is re-run by its index with the same setting.
#[test]
fn a_deferred_campaign_on_sp3_is_clean() {
    let (code, out) = crashtest(&[
        "--engine",
        "sp3",
        "--deferred",
        "3",
        "--states",
        "60",
        "--ops",
        "30",
        "--seed",
        "5",
    ]);
    let (n, v) = totals(&out);
    assert_eq!((code, v), (0, 0), "{out}");
    assert!(n >= 60, "{out}");
    assert!(
        out.contains("durability deferred (wait every 3 ops)"),
        "{out}"
    );
    let (code, out) = crashtest(&[
        "--engine",
        "sp3",
        "--workload",
        "bank",
        "--threads",
        "1",
        "--ops",
        "20",
        "--deferred",
        "3",
        "--reproduce",
        "9",
    ]);
    assert_eq!(code, 0, "{out}");
    assert_eq!(totals(&out), (1, 0));
    assert!(out.contains("bank state 9: crash at fence"), "{out}");
}

#[test]
fn bad_arguments_are_usage_errors() {
    for args in [
        &["--threads", "0"][..],
        &["--threads", "9"],
        &["--ops", "0"],
        &["--images", "0"],
        &["--states", "0"],
        &["--jobs", "0"],
        &["--p-flushed", "1.5"],
        &["--p-unflushed", "NaN"],
        &["--group-commit", "0"],
        &["--reproduce", "1"],
        &[
            "--workload",
            "bank",
            "--reproduce",
            "1",
            "--image",
            "/nonexistent/image.pool",
            "--acked",
            "1,2",
        ],
        &[
            "--workload",
            "bank",
            "--reproduce",
            "1",
            "--image",
            "/dev/null",
            "--acked",
            "x",
        ],
        &[
            "--workload",
            "bank",
            "--reproduce",
            "1",
            "--image",
            "/dev/null",
            "--acked",
            "1,2",
        ],
        &[
            "--workload",
            "bank",
            "--exhaustive",
            "--reproduce",
            "99999999",
        ],
    ] {
        let (code, out) = crashtest(args);
        assert_eq!(code, 2, "{args:?}: {out}");
    }
    for args in [
        &["--engine", "nope"][..],
        &["--workload", "nope"],
        &["--exhaustive", "--states", "5"],
        &["--image", "x.pool"],
        &["--seed", "-1"],
        &["--group-commit", "a"],
        &["--deferred", "-1"],
    ] {
        assert!(parse(args).is_err(), "{args:?} parsed");
    }
}

#[cfg(feature = "mutation")]
mod mutation {
    use super::*;

    /// Every-fence campaign of `workload` (one thread, deterministic), with `mutation`.
    fn campaign(workload: &str, mutation: Option<&str>, out_dir: &str) -> (u8, String) {
        let mut args = vec![
            "--exhaustive",
            "--workload",
            workload,
            "--ops",
            "12",
            "--out",
            out_dir,
        ];
        if let Some(m) = mutation {
            args.extend(["--mutation", m]);
        }
        crashtest(&args)
    }

    #[test]
    fn checksum_and_log_flush_removal_are_detected_and_reproducible() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().to_str().unwrap();
        let mut table = Vec::new();
        for w in ["bank", "list"] {
            let (code, out) = campaign(w, None, d);
            let (n, v) = totals(&out);
            assert_eq!((code, v), (0, 0), "{w} without mutation:\n{out}");
            table.push(format!("{w:<5} none       {n:>4} states {v:>3} violations"));
            for m in ["checksum", "log-flush"] {
                let (code, out) = campaign(w, Some(m), d);
                let (n, v) = totals(&out);
                assert!(v > 0, "{w} with {m} removed: no violation\n{out}");
                assert_eq!(code, 1);
                table.push(format!("{w:<5} {m:<10} {n:>4} states {v:>3} violations"));
                // Each shown violation comes with its crash image and a reproducer
                // that finds the violation again from that image.
                let cmd = out
                    .lines()
                    .find_map(|l| l.trim().strip_prefix("reproduce: pisces crashtest "))
                    .unwrap_or_else(|| panic!("no reproducer:\n{out}"));
                assert!(cmd.contains(&format!("--mutation {m}")), "{cmd}");
                let image = cmd
                    .split_whitespace()
                    .skip_while(|a| *a != "--image")
                    .nth(1)
                    .expect("an image path");
                assert!(std::fs::metadata(image).unwrap().len() > 0);
                let args: Vec<&str> = cmd.split_whitespace().collect();
                let (code, again) = crashtest(&args);
                assert_eq!((code, totals(&again)), (1, (1, 1)), "{cmd}:\n{again}");
                assert!(again.contains("image read from file"), "{again}");
            }
        }
        println!("{}", table.join("\n"));
    }

    #[test]
    fn spht_log_flush_removal_is_detected() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().to_str().unwrap();
        let args = |m: Option<&'static str>| {
            let mut a = vec![
                "--engine",
                "spht",
                "--workload",
                "bank",
                "--states",
                "200",
                "--out",
                d,
            ];
            a.extend(m.iter().flat_map(|m| ["--mutation", *m]));
            a
        };
        let (code, out) = crashtest(&args(None));
        assert_eq!(
            (code, totals(&out).1),
            (0, 0),
            "spht without mutation:\n{out}"
        );
        let (code, out) = crashtest(&args(Some("log-flush")));
        let (n, v) = totals(&out);
        assert!(v > 0, "spht with log-flush removed: no violation\n{out}");
        assert_eq!(code, 1);
        println!("spht  log-flush  {n:>4} states {v:>3} violations");
    }

    #[test]
    fn an_unknown_mutation_point_is_refused() {
        let (code, out) = crashtest(&["--engine", "sp3", "--mutation", "checksum"]);
        assert_eq!((code, out.as_str()), (2, ""));
        let a = parse(&["--engine", "sp3", "--mutation", "skip-validation"]).unwrap();
        assert_eq!(a.mutation.as_deref(), Some("skip-validation"));
    }
}
