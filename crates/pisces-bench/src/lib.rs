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
//! library's API. Modules, each depending only on those listed before it:
//!
//! * [`dataset`]: the [`DataSet`](dataset::DataSet) trait, sizes, preload helpers;
//! * the data sets: [`hash`], [`btree`], [`set`], [`tree_set`], [`tpcc`], [`tatp`],
//!   [`ycsb`], [`hot`], and [`capi`] (the hash table driven through the C interface);
//! * [`registry`]: [`DataKind`](registry::DataKind), naming, sizing and building them;
//! * [`peers`]: redb and LMDB, and the key-value data sets on them;
//! * [`engines`]: the engines under test (the one module naming engine ids and
//!   options);
//! * [`workload`]: what `--workloads` selects;
//! * [`args`]: options and the settings they resolve to; [`plan`]: the measurements;
//! * [`pin`]: pinning worker threads to CPUs; [`signal`], [`measure`]: one
//!   measurement; [`recovery`]: the recovery measurement (fill logs, crash, time the
//!   reopen); [`replay`]: spht's log replay throughput per replay mode (the same
//!   measurement with the replayer held);
//! * [`report`]: CSV rows, medians, ratios; [`tables`], [`hot_table`], [`targets`],
//!   [`plot`] (SVG) on top of it;
//! * [`out_dir`], [`mod@run`]: a whole bench run.

pub mod args;
pub mod btree;
pub mod capi;
pub mod dataset;
pub mod engines;
pub mod hash;
pub mod hot;
pub mod hot_table;
pub mod measure;
pub mod out_dir;
pub mod peers;
pub mod pin;
pub mod plan;
pub mod plot;
pub mod recovery;
pub mod recovery_child;
pub mod registry;
pub mod replay;
pub mod report;
pub mod run;
pub mod set;
pub mod signal;
pub mod tables;
pub mod targets;
pub mod tatp;
pub mod timing;
pub mod tpcc;
pub mod tree_set;
pub mod workload;
pub mod ycsb;

#[cfg(test)]
mod testutil;

pub use args::{parse_seconds, BenchArgs};
pub use run::run;
