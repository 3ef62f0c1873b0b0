//! The Pisces benchmark harness behind the `pisces-bench` binary (`src/main.rs`; with no
//! arguments, the main job).
//!
//! Engines (`pisces`, the in-house baselines `undo`, `mvcc` and `pmdk` where the build
//! has it, the paper engines `sp3`, `spht` and `timestone`, the references `volatile`
//! and `bare`, and Pisces with its optimisations switched off one by one) run the
//! paper's workloads (§5: hash table, B+-tree, read latency against emulated NVM write
//! latency, optimisation breakdown; in `--full` or when named TPC-C new-order and TATP;
//! when named the PTM peers' hash-set and B+-tree-set benchmarks, a YCSB-style
//! key-value mix, the conflict-heavy `hot` mix with SP3's early visibility on and off,
//! spht's marker ablation, the `recovery` and `replay` measurements and the hash
//! operations driven through the C interface) on fresh pools under `/dev/shm`; the
//! key-value stores `redb`, LMDB and `canopydb` run the key-value workloads as peers,
//! on their own files there. Every measurement is one configuration for `--seconds`;
//! `--runs` repeats the whole plan, interleaved, so each engine's run `r` is measured
//! next to the other engines' run `r` and ratios are taken within a run. Output: tables and
//! the performance targets on stdout, a report directory with `results.csv`,
//! `summary.txt`, `summary.md` (the same in Markdown with the run's command, date,
//! build, machine and load; `--markdown FILE` writes it elsewhere too) and SVG plots.
//!
//! With `--dir PATH` it measures durable commits on a real file system instead: the
//! pools on the `file` medium under PATH (a fence `msync`s what its thread flushed),
//! the peers' files there too, the durable engines and the peers by default on the
//! hash table (20 % updates), YCSB's A mix and a bulk load; a table per write commit
//! gives durable commits per second, commit latency, the `msync` calls counted by the
//! library (the peers' syncs stated from their commit paths, not measured) and the
//! bytes this process sent to the device (`write_bytes` of `/proc/self/io`), under a
//! header naming the file system and the device.
//!
//! The harness uses the `pisces` library as any user would; it is not part of the
//! library's API. The crate root re-exports only what is used outside the crate: the
//! `pisces-bench` binary's entry points, and what the probes (`probes/`, see its README) drive
//! by hand. The modules, by concern, each depending only on those listed before it
//! (test code aside):
//!
//! 1. `workloads`: what a measurement runs. `mod.rs`: the [`DataSet`] trait, the
//!    [`Sizes`], the preload helpers; the data sets on top of it (`hash`, `btree`,
//!    `set` and `tree_set`, `ycsb`, `hot`, `capi`: the hash table driven through the C
//!    interface, `oltp::{tpcc, tatp}`); `anchor`: where a data set is, in its pool's
//!    root, for a process that has only the pool; `kinds`: [`DataKind`], naming,
//!    sizing, building and attaching them. `select` (what `--workloads` selects, the workloads' names in
//!    reports) depends on nothing of the crate.
//! 2. `peers`: redb, LMDB and canopydb, and the key-value data sets on them.
//! 3. `engines`: the engines under test ([`Engine`], [`EngineSpec`]): the one module
//!    naming engine ids, engine options and configuration labels.
//! 4. `measure`: one measurement ([`measure()`]); below it `timing` (the clock, and
//!    which transactions are timed), `pin` (where workers run) and `signal` (stopping
//!    on a signal), which depend on nothing of the crate; `processes` (a measurement
//!    whose workers run in several processes on one shared pool, `--processes`, and
//!    the worker process) on top of `mod.rs`.
//! 5. `report`: `table` (the text table, a leaf); `mod.rs`: CSV rows, medians, ratios;
//!    `tables`, `hot_table`, `targets` and `plot` (SVG) on top of both; `markdown` (a
//!    run as Markdown: the facts, the tables, the targets, the plots) on top of those.
//! 6. `recovery`: the `recovery` and `replay` workloads: `child` (the open timed in a
//!    fresh process, a leaf), `crash` (fill, crash image, timed opens, check), `mod.rs`
//!    (what each workload opens, its rows, table and run).
//! 7. `cli`: `args` (options and the settings they resolve to), `plan` (the
//!    measurements), `out_dir` (the report directory), `facts` (command line, build
//!    commit, machine and load, read at run time), `run` (a whole `pisces-bench` run,
//!    [`run()`]).

// The modules are private, so the facade's docs link to private items; the harness's
// documentation is read with `cargo doc --document-private-items`.
#![allow(rustdoc::private_intra_doc_links)]

mod cli;
mod engines;
mod measure;
mod peers;
mod recovery;
mod report;
mod workloads;

#[cfg(test)]
mod testutil;

// The `pisces-bench` binary: its options, a run (the main job or any other), and the
// recovery measurements' child process.
pub use cli::args::{parse_seconds, BenchArgs};
pub use cli::run::run;
pub use measure::processes::{process_worker, PROCESS_WORKER};
pub use recovery::child::{recovery_child, RECOVERY_CHILD};

// The probes (`probes/`): one measurement, a data set driven by hand, a crash image.
pub use engines::{Engine, EngineSpec};
pub use measure::pin::Placement;
pub use measure::processes::measure_processes_at;
pub use measure::run::measure;
pub use measure::Spec;
pub use recovery::{crash_image, crash_image_of, RecoveryWorkload, ReplayFill};
pub use workloads::anchor::Anchor;
pub use workloads::capi::CapiHashBench;
pub use workloads::hash::HashTable;
pub use workloads::kinds::DataKind;
pub use workloads::{DataSet, OpRng, Sizes};
