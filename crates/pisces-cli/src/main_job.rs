//! The main job: `pisces` with no subcommand, i.e. `cargo run --release`.
//!
//! It is `pisces bench --quick`: every engine of the build on the hash
//! table (0, 2 and 20 % updates) and the B+-tree (0 and 20 %) with 1 and 2 threads, the
//! read latency sweep over emulated NVM write latencies, the optimisation breakdown,
//! and the peers' set benchmarks in a reduced form (hash set and B+-tree set of 1K and
//! 100K keys; pisces, undo, bare and the key-value stores redb and lmdb; 1 thread, 1 and
//! 10 % updates), each configuration for 0.4 s, 3 runs interleaved. It prints the tables and the performance targets and where the report
//! (`results.csv`, `summary.txt`, `summary.md`, SVG plots) was written: `target/bench/<UTC time>` in
//! the workspace. Any `pisces bench` option may be given (`pisces --seconds 0.5`).

use pisces_bench::BenchArgs;
use std::process::ExitCode;

/// Run the main job with the bench options given on the command line.
pub fn run(args: &BenchArgs) -> ExitCode {
    pisces_bench::run(
        args,
        "pisces main job: pisces bench --quick (engines compared on the paper's workloads)",
    )
}
