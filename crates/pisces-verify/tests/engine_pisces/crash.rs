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

use crate::common::{self, crash::campaign, crash::Workload};
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

/// Long version (minutes): `cargo test -p pisces-verify --release --test engine_pisces
/// -- --ignored crash::long_campaigns`.
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
