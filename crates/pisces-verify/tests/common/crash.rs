//! Crash campaigns for the integration tests: a thin layer over the library's
//! [`pisces_verify::crashtest`] (workloads with engine-independent oracles, the campaign
//! driver): the small API of the Pisces engine's crash and mutation tests, and the
//! campaign the baselines (`undo`, `mvcc`) run.
#![allow(dead_code)]

use pisces::{Config, EngineOptions};
use pisces_verify::crashtest::{self, Mode, Settings};
use pisces_verify::sim::Adversary;

/// Size of the crash-test pools.
pub const POOL: u64 = 1 << 20;

/// The configuration of the crash-test pools (1 MiB, 2 thread slots, 16 KiB logs).
pub fn cfg(opts: EngineOptions) -> Config {
    Config::default()
        .size(POOL)
        .max_threads(2)
        .log_bytes_per_thread(16 << 10)
        .engine_options(opts)
}

/// A workload of [`pisces_verify::crashtest`].
#[derive(Clone, Copy, Debug)]
pub enum Workload {
    /// Transfers between accounts.
    Bank,
    /// Sorted-list inserts and deletes with allocation and free.
    List,
    /// Allocation and free churn, large objects included.
    Alloc,
    /// Upserts and removes on a hash map.
    HashMap,
    /// Upserts and removes on an ordered map.
    BTree,
}

impl Workload {
    /// The library's name for it.
    pub fn name(self) -> &'static str {
        match self {
            Workload::Bank => "bank",
            Workload::List => "list",
            Workload::Alloc => "alloc",
            Workload::HashMap => "hashmap",
            Workload::BTree => "btree",
        }
    }
}

/// Outcome of a crash campaign.
#[derive(Debug, Default)]
pub struct Campaign {
    /// Crash images recovered and checked.
    pub states: usize,
    /// Violations found (descriptions, first few).
    pub violations: Vec<String>,
    /// Number of violations.
    pub violation_count: usize,
}

/// Crash at every fence of a run of `n` transactions per thread (`rounds` = None), or
/// at random fences until `rounds * images` states are checked; `images` adversary
/// images per crash; every fifth state also crashes during recovery.
pub fn campaign(
    w: Workload,
    opts: EngineOptions,
    threads: usize,
    n: usize,
    rounds: Option<usize>,
    images: u64,
    adversary: Adversary,
) -> Campaign {
    let settings = Settings {
        options: vec![opts],
        threads,
        ops: n,
        mode: match rounds {
            None => Mode::Exhaustive,
            Some(r) => Mode::Random {
                states: r as u64 * images,
            },
        },
        images,
        adversary,
        seed: 0x5EED + threads as u64,
        keep: 5,
        ..Settings::default()
    };
    let workload = crashtest::workload_by_name(w.name()).expect("a library workload");
    let report = crashtest::run_campaign(workload.as_ref(), &settings, &|_, _| {});
    Campaign {
        states: report.states as usize,
        violations: report.violations.iter().map(|v| v.to_string()).collect(),
        violation_count: report.violation_count as usize,
    }
}

/// Every library crash workload on `engine` (its default options): a 1-thread run
/// crashed at every fence, a 2-thread run at 300 random fences.
pub fn baseline_every_fence_and_random(engine: pisces::EngineId) {
    for (threads, mode, ops) in [
        (1, Mode::Exhaustive, 20),
        (2, Mode::Random { states: 300 }, 60),
    ] {
        for w in crashtest::workloads() {
            let settings = Settings {
                engine,
                threads,
                ops,
                mode,
                seed: 7,
                ..Settings::default()
            };
            let r = crashtest::run_campaign(w.as_ref(), &settings, &|_, _| {});
            eprintln!(
                "{} {} threads {threads}: crash states: {} checked, {} violations",
                engine.name(),
                w.name(),
                r.states,
                r.violation_count
            );
            assert_eq!(
                r.violation_count,
                0,
                "{:#?}",
                r.violations
                    .iter()
                    .map(|v| v.to_string())
                    .collect::<Vec<_>>()
            );
            assert!(r.states >= 50, "only {} states", r.states);
        }
    }
}
