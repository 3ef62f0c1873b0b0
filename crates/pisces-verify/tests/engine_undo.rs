//! The `undo` baseline (undo logging with two-phase locking) on the crash simulator:
//! every library crash workload, checked by the engine-independent oracles of
//! `common/crash.rs`. (The behavioural, container and corruption suites run it too,
//! through `common::all_engines`; `.ci/run` runs `pisces crashtest --engine undo`.)
//!
//! `cargo test -p pisces-verify --release --test engine_undo`

mod common;

use common::crash::baseline_every_fence_and_random;

/// The `undo` baseline on the crash workloads and oracles of the Pisces engine: every
/// fence of short runs, and random fences of 2-thread runs.
#[test]
fn undo_engine_every_fence_and_random() {
    baseline_every_fence_and_random(pisces::EngineId::Undo);
}
