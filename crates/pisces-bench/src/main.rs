//! `pisces-bench`: the engines compared on the paper's workloads (tables, CSV, SVG
//! plots), and the key-value stores redb, LMDB and canopydb as peers when named.
//!
//! With no arguments it runs the main job (`cargo run --release` in the workspace): the
//! quick mode's default workloads, i.e. every engine of the build on the hash table (0, 2
//! and 20 % updates) and the B+-tree (0 and 20 %) with 1 and 2 threads, the read
//! latency sweep over emulated NVM write latencies, the optimisation breakdown, and the
//! peers' set benchmarks in a reduced form (hash set and B+-tree set of 1K and 100K
//! keys; pisces, undo, bare and the key-value stores redb, lmdb and canopydb; 1 thread,
//! 1 and 10 % updates), each configuration for 0.4 s, 3 runs interleaved. Any option
//! narrows or changes that (`pisces-bench --seconds 0.5`, `pisces-bench --workloads
//! hash`). It prints the tables, the performance targets and where the report
//! (`results.csv`, `summary.txt`, `summary.md`, SVG plots) was written:
//! `target/bench/<UTC time>` in the workspace unless `--out` says otherwise.
//!
//! Exit status: 0 when every measurement ran; 1 when a measurement failed; 2 on usage
//! errors and when the report cannot be written; 130 when interrupted by a signal.
#![deny(unsafe_code)]

use clap::{Parser, Subcommand};
use pisces_bench::BenchArgs;
use std::process::ExitCode;

/// The heading of a run of the main job (its report's title and Markdown section).
const MAIN_JOB_TITLE: &str =
    "pisces-bench main job: the quick default (engines compared on the paper's workloads)";

/// The heading of any other run.
const TITLE: &str = "pisces-bench";

/// Compare the Pisces engines (and the key-value stores redb, lmdb, canopydb) on the
/// paper's workloads: tables, results.csv, SVG plots.
///
/// With no options, runs the main job: --quick with its default workloads (every engine
/// on the hash table and the B+-tree with 1 and 2 threads, the read-latency sweep, the
/// optimisation breakdown and the sets in a reduced form; about 4 minutes on 2 cores),
/// prints the tables and where the report was written.
#[derive(Parser, Debug)]
#[command(name = "pisces-bench", version, args_conflicts_with_subcommands = true)]
#[command(
    after_help = "Exit status: 0 every measurement ran; 1 a measurement failed; 2 usage \
errors and a report that cannot be written; 130 interrupted by a signal."
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    bench: BenchArgs,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Internal: open a crashed pool in this fresh process and print how long recovery
    /// took (the `recovery` and `replay` workloads run it).
    #[command(name = pisces_bench::RECOVERY_CHILD, hide = true)]
    RecoveryChild {
        /// PATH ENGINE THREADS OPTIONS.
        #[arg(allow_hyphen_values = true, num_args = 0..)]
        args: Vec<String>,
    },
    /// Internal: one worker process of a measurement with several processes (`--processes`):
    /// opens the pool shared, runs its worker threads between `go` and `stop` on its
    /// standard input, prints its counts.
    #[command(name = pisces_bench::PROCESS_WORKER, hide = true)]
    ProcessWorker {
        /// KEY=VALUE settings from the parent.
        #[arg(allow_hyphen_values = true, num_args = 0..)]
        args: Vec<String>,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match &cli.command {
        Some(Command::RecoveryChild { args }) => pisces_bench::recovery_child(args),
        Some(Command::ProcessWorker { args }) => pisces_bench::process_worker(args),
        None => {
            let title = if cli.bench.is_main_job() {
                MAIN_JOB_TITLE
            } else {
                TITLE
            };
            pisces_bench::run(&cli.bench, title)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cli_definition_is_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }

    #[test]
    fn no_arguments_are_the_main_job() {
        let main_job = |args: &[&str]| {
            let mut v = vec!["pisces-bench"];
            v.extend_from_slice(args);
            Cli::try_parse_from(v).unwrap().bench.is_main_job()
        };
        assert!(main_job(&[]));
        assert!(main_job(&[
            "--quick",
            "--seconds",
            "0.5",
            "--markdown",
            "x.md"
        ]));
        assert!(!main_job(&["--full"]));
        assert!(!main_job(&["--workloads", "hash"]));
    }
}
