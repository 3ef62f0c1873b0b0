//! The `spht` engine's crash and isolation evidence.
//!
//! * Crash consistency: `crashtest` campaigns on every workload (the five of `all` and
//!   the two engine-test structures), over every option set of the engine
//!   (`marker=global|nvhtm`, `replay=forward`, one replayer on the logical clock),
//!   single-threaded and with two threads, on the crash simulator with the default
//!   adversary; some recoveries crash again. 0 violations required.
//! * Isolation: `sicheck` histories recorded from the engine, checked as serializable:
//!   no forbidden anomaly, and the write-skew workload shows no write skew (SPHT's STM
//!   validates reads at commit).

use pisces::medium::DramMedium;
use pisces::{Config, EngineId, EngineOptions, Pool};
use pisces_verify::crashtest::{run_campaign, workload_by_name, Mode, Report, Settings};
use pisces_verify::sicheck::{check, Isolation, Workload, WorkloadConfig};
use std::sync::Arc;
use std::time::Duration;

const ALL: [&str; 7] = [
    "bank",
    "list",
    "alloc",
    "hashmap",
    "btree",
    "bucket-map",
    "sorted-tree",
];

fn campaign(name: &str, threads: usize, ops: usize, mode: Mode, seed: u64) -> Report {
    let w = workload_by_name(name).unwrap();
    let settings = Settings {
        engine: EngineId::Spht,
        threads,
        ops,
        mode,
        images: 2,
        recovery_crash_one_in: 5,
        continue_ops: 2,
        seed,
        jobs: 2,
        keep: 3,
        ..Settings::default()
    };
    let r = run_campaign(w.as_ref(), &settings, &|_, _| {});
    eprintln!(
        "spht {name} x{threads}: {} states, {} crashes, {} recovery crashes, {} violations, {:?}",
        r.states, r.crashes, r.recovery_crashes, r.violation_count, r.elapsed
    );
    r
}

fn assert_clean(r: &Report, min_states: u64) {
    assert_eq!(r.violation_count, 0, "{:#?}", r.violations);
    assert!(r.states >= min_states, "only {} states", r.states);
}

#[test]
fn crash_every_workload_one_thread() {
    for (i, name) in ALL.iter().enumerate() {
        let r = campaign(name, 1, 12, Mode::Random { states: 400 }, 11 + i as u64);
        assert_clean(&r, 400);
    }
}

#[test]
fn crash_small_runs_one_thread_every_fence() {
    for (name, ops) in [("bank", 6), ("list", 4), ("alloc", 3)] {
        let r = campaign(name, 1, ops, Mode::Exhaustive, 3);
        assert_clean(&r, 40);
    }
}

#[test]
fn crash_every_workload_two_threads() {
    for (i, name) in ALL.iter().enumerate() {
        let r = campaign(name, 2, 16, Mode::Random { states: 300 }, 101 + i as u64);
        assert_clean(&r, 300);
    }
}

fn dram_pool(threads: usize, opts: EngineOptions) -> Pool {
    let size = 32 << 20;
    let m = DramMedium::anonymous(size, 0, 0).unwrap();
    Pool::create_on(
        Arc::new(m),
        Config {
            size: size as u64,
            max_threads: threads + 1,
            log_bytes_per_thread: 256 << 10,
            engine: Some(EngineId::Spht),
            engine_options: opts,
            ..Config::default()
        },
    )
    .unwrap()
}

#[test]
fn histories_are_serializable() {
    for opts in EngineId::Spht.option_sets() {
        for (threads, keys) in [(2, 3), (3, 8)] {
            let cfg = WorkloadConfig {
                threads,
                keys,
                seed: 7,
                ..WorkloadConfig::default()
            };
            let pool = dram_pool(threads, opts.clone());
            let wl = Workload::new(cfg).unwrap();
            wl.setup(&pool).unwrap();
            let h = wl.run(&pool, 0, 2000, &|| false).unwrap();
            let r = check(&h);
            eprintln!("spht {opts}: {}", r.summary_line(Isolation::Serializable));
            assert_eq!(
                r.forbidden(Isolation::Serializable),
                0,
                "{}",
                r.render(Isolation::Serializable)
            );
            assert_eq!(r.write_skew(), 0);
            assert_eq!(r.transactions, 2000);
            let e = r.graph.edges;
            assert!(e[0] > 50 && e[1] > 50 && e[2] > 50, "edges {e:?}");
        }
    }
}

#[test]
fn write_skew_workload_shows_no_write_skew() {
    for seed in 0..3 {
        let cfg = WorkloadConfig {
            threads: 2,
            keys: 2,
            write_skew: true,
            pause: Duration::from_micros(50),
            seed,
            ..WorkloadConfig::default()
        };
        let pool = dram_pool(2, EngineOptions::default());
        let wl = Workload::new(cfg).unwrap();
        wl.setup(&pool).unwrap();
        let h = wl.run(&pool, 0, 400, &|| false).unwrap();
        let r = check(&h);
        eprintln!(
            "spht write skew, seed {seed}: {}",
            r.summary_line(Isolation::Serializable)
        );
        assert_eq!(
            r.forbidden(Isolation::Serializable),
            0,
            "{}",
            r.render(Isolation::Serializable)
        );
        assert_eq!(r.write_skew(), 0);
    }
}
