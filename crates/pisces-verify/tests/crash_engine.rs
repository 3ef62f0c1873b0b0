//! Crash consistency of the Pisces engine on the crash simulator.
//!
//! Each test runs a workload on a simulated machine that loses power at a chosen fence,
//! builds crash images with the adversary (per 8-byte word: flushed-but-unfenced and
//! never-flushed dirty words may or may not have reached the medium), recovers each
//! image as a fresh process would, and checks the recovered state against an oracle
//! that knows nothing of the engine (see `common/crash.rs`):
//! * every transaction whose commit returned before the crash is present;
//! * no transaction is present in part (the state equals the state after exactly the
//!   acknowledged transactions, possibly plus the one in flight per thread);
//! * the allocator's persistent bitmaps equal the set of reachable objects.
//!
//! Short runs crash at every fence; 2-thread runs at random fences; some recoveries are
//! crashed again and recovered again.

mod common;

use common::crash::{campaign, Workload};
use pisces_verify::sim::Adversary;

fn assert_clean(c: common::crash::Campaign, min_states: usize) {
    eprintln!(
        "crash states: {} checked, {} violations",
        c.states, c.violation_count
    );
    assert!(
        c.violations.is_empty(),
        "{} violations, e.g. {:#?}",
        c.violation_count,
        c.violations
    );
    assert!(c.states >= min_states, "only {} states checked", c.states);
}

#[test]
fn bank_single_thread_every_fence() {
    for opts in common::all_options() {
        assert_clean(
            campaign(
                Workload::Bank,
                opts.clone(),
                1,
                24,
                None,
                2,
                Adversary::default(),
            ),
            48,
        );
    }
}

#[test]
fn bank_two_threads_random_fences() {
    for opts in common::all_options() {
        assert_clean(
            campaign(
                Workload::Bank,
                opts.clone(),
                2,
                40,
                Some(30),
                1,
                Adversary::default(),
            ),
            10,
        );
    }
}

#[test]
fn list_single_thread_every_fence() {
    for opts in common::all_options() {
        assert_clean(
            campaign(
                Workload::List,
                opts.clone(),
                1,
                21,
                None,
                2,
                Adversary::default(),
            ),
            42,
        );
    }
}

#[test]
fn list_two_threads_random_fences() {
    for opts in common::all_options() {
        assert_clean(
            campaign(
                Workload::List,
                opts.clone(),
                2,
                30,
                Some(30),
                1,
                Adversary::default(),
            ),
            10,
        );
    }
}

/// Eviction at its worst: every written word reached the medium, or none did.
#[test]
fn extreme_adversaries() {
    let opts = pisces::EngineOptions::default();
    for adv in [Adversary::AllWritten, Adversary::DurableOnly] {
        assert_clean(
            campaign(Workload::Bank, opts.clone(), 1, 15, None, 1, adv),
            15,
        );
        assert_clean(
            campaign(Workload::List, opts.clone(), 1, 15, None, 1, adv),
            15,
        );
    }
}

/// Long version (minutes): `cargo test --release --test crash_engine -- --ignored`.
#[test]
#[ignore]
fn long_campaigns() {
    for opts in common::all_options() {
        for w in [Workload::Bank, Workload::List] {
            assert_clean(
                campaign(w, opts.clone(), 1, 400, None, 3, Adversary::default()),
                1000,
            );
            assert_clean(
                campaign(w, opts.clone(), 2, 400, Some(500), 2, Adversary::default()),
                300,
            );
        }
    }
}

/// Runs long enough that each thread's 16 KiB ring recycles and wraps around several
/// times, so crashes land in recycling (watermark, tail updates) and on wrap markers.
#[test]
fn crashes_during_log_recycling_and_wrap() {
    for flush_diff in [true, false] {
        let opts: pisces::EngineOptions = pisces::PiscesOptions {
            flush_diff,
            group_commit: 4,
        }
        .into();
        assert_clean(
            campaign(
                Workload::Bank,
                opts.clone(),
                1,
                600,
                None,
                1,
                Adversary::default(),
            ),
            600,
        );
        assert_clean(
            campaign(
                Workload::Bank,
                opts.clone(),
                2,
                500,
                Some(40),
                1,
                Adversary::default(),
            ),
            20,
        );
    }
}

/// The `undo` baseline on the same workloads and oracles: every fence of short runs,
/// and random fences of 2-thread runs.
#[test]
fn undo_engine_every_fence_and_random() {
    baseline_every_fence_and_random(pisces::EngineId::Undo);
}

/// The `mvcc` strawman on the same workloads and oracles: every fence of short runs
/// (the log fence and the home fence of each commit, log recycling), and random
/// fences of 2-thread runs.
#[test]
fn mvcc_engine_every_fence_and_random() {
    baseline_every_fence_and_random(pisces::EngineId::Mvcc);
}

/// The `mvcc` strawman over long runs whose logs recycle and wrap several times, so
/// that crashes land on watermark and tail updates and on wrap markers.
#[test]
fn mvcc_crashes_during_log_recycling_and_wrap() {
    use pisces_verify::crashtest::{self, Mode, Settings};
    for threads in [1, 2] {
        let settings = Settings {
            engine: pisces::EngineId::Mvcc,
            options: vec![pisces::EngineOptions::default()],
            threads,
            ops: 600,
            mode: Mode::Random { states: 400 },
            seed: 11,
            ..Settings::default()
        };
        let w = crashtest::workload_by_name("bank").unwrap();
        let r = crashtest::run_campaign(w.as_ref(), &settings, &|_, _| {});
        assert_eq!(
            r.violation_count,
            0,
            "{:?}",
            r.violations.first().map(|v| v.to_string())
        );
        assert!(r.states >= 400, "only {} states", r.states);
    }
}

/// Every library crash workload on `engine` (its default options): a 1-thread run
/// crashed at every fence, a 2-thread run at 300 random fences.
fn baseline_every_fence_and_random(engine: pisces::EngineId) {
    use pisces_verify::crashtest::{self, Mode, Settings};
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
