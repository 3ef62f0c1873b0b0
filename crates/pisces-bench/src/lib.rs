//! The Pisces benchmark harness: `pisces bench` and the main job of the `pisces` tool.
//!
//! Engines (`pisces`, `undo`, `mvcc`, `pmdk` where the build has it, `volatile`, and
//! Pisces with its optimisations switched off one by one) run the paper's workloads
//! (§5: hash table, B+-tree, read latency against emulated NVM write latency,
//! optimisation breakdown; in `--full` or when named TPC-C new-order and TATP; when
//! named the PTM peers' hash-set and B+-tree-set benchmarks, a YCSB-style key-value
//! mix, the conflict-heavy `hot` mix with SP3's early visibility on and off, the
//! `recovery` measurement and the hash operations driven through the C interface) on
//! fresh pools under `/dev/shm`; the key-value stores `redb` and LMDB run the key-value
//! workloads as peers, on their own files there. Every measurement is one configuration
//! for `--seconds`; `--runs`
//! repeats the whole plan, interleaved, so each engine's run `r` is measured next to
//! the other engines' run `r` and ratios are taken within a run. Output: tables and
//! the performance targets on stdout, a report directory with `results.csv`,
//! `summary.txt` and SVG plots.
//!
//! The harness uses the `pisces` library as any user would; it is not part of the
//! library's API. Modules, by concern:
//!
//! * [`workloads`]: the [`DataSet`](workloads::DataSet) trait and the data sets,
//!   [`DataKind`](workloads::kinds::DataKind) and what `--workloads` selects;
//! * [`peers`]: redb and LMDB, and the key-value data sets on them;
//! * [`engines`]: the engines under test;
//! * [`measure`]: one measurement (pinning, signals, timing);
//! * [`report`]: CSV rows, medians, ratios, tables, targets and plots;
//! * [`recovery`]: the recovery and replay measurements and their child process;
//! * [`cli`]: options, the plan, the report directory, a whole run.

pub mod cli;
pub mod engines;
pub mod measure;
pub mod peers;
pub mod recovery;
pub mod report;
pub mod workloads;

#[cfg(test)]
mod testutil;

pub use cli::args::{parse_seconds, BenchArgs};
pub use cli::run::run;
