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
//! * Progress: long transactions commit while a writer runs (the serial fallback), a
//!   holder of the fallback holds a writer only until its deadline, and holders of two
//!   pools writing each other do not deadlock.
//!
//! `cargo test -p pisces-verify --release --test engine_spht`. The engine's white-box
//! tests, with its mutation evidence, are in `crates/pisces/src/engine/spht/tests.rs`.

use pisces::medium::DramMedium;
use pisces::{Config, EngineId, EngineOptions, Pool, TxOptions};
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
        Config::default()
            .size(size as u64)
            .max_threads(threads + 1)
            .log_bytes_per_thread(256 << 10)
            .engine(EngineId::Spht)
            .engine_options(opts),
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

#[test]
fn long_transactions_commit_while_a_writer_runs_default_options() {
    pisces_verify::testkit::long_transactions_commit_while_a_writer_runs(&dram_pool(
        2,
        EngineOptions::new(),
    ));
}

#[test]
fn a_holder_waiting_for_a_writer_holds_it_only_until_its_deadline_default_options() {
    pisces_verify::testkit::a_holder_waiting_for_a_writer_holds_it_only_until_its_deadline(
        &dram_pool(2, EngineOptions::new()),
    );
}

/// No deadlock across pools: a long reader of pool P and a long reader of pool Q, each
/// beside a writer of its pool, both fall back; once a reader sees its pool's writer
/// stalled (it holds the fallback word), it waits for the other reader to hold too,
/// then writes the other pool (a nested transaction). Each holder's nested write then
/// waits for the other pool's holder — a cycle that the deadlines end. Both return.
/// P runs `sp3`, Q `spht`. (With the deadline made infinite, a pure single-lock
/// fallback, the two readers deadlock.)
#[test]
fn holders_of_two_pools_writing_each_other_do_not_deadlock() {
    use pisces::PPtr;
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
    use std::sync::mpsc;
    use std::time::Instant;
    let sp3 = {
        let m = DramMedium::anonymous(8 << 20, 0, 0).unwrap();
        let cfg = Config::default()
            .size(8 << 20)
            .engine(EngineId::Sp3)
            .max_threads(3)
            .log_bytes_per_thread(64 << 10);
        Pool::create_on(Arc::new(m), cfg).unwrap()
    };
    let pools = [sp3, dram_pool(2, EngineOptions::new())];
    let objs: Vec<[PPtr<i64>; 3]> = pools
        .iter()
        .map(|p| {
            let root: PPtr<[PPtr<i64>; 3]> = p.root().unwrap();
            p.run(|tx| {
                let o = [tx.alloc(0i64)?, tx.alloc(0i64)?, tx.alloc(0i64)?];
                *tx.write(root)? = o;
                Ok(o)
            })
            .unwrap()
        })
        .collect();
    let (pools, objs, stop) = (&pools, &objs, &AtomicBool::new(false));
    // Per pool: the writer's commits; per reader: it held the word once, it is done.
    let writes = &[AtomicU64::new(0), AtomicU64::new(0)];
    let held = &[AtomicBool::new(false), AtomicBool::new(false)];
    let finished = &[AtomicBool::new(false), AtomicBool::new(false)];
    std::thread::scope(|s| {
        for i in 0..2 {
            s.spawn(move || {
                let [a, b, _] = objs[i];
                while !stop.load(Relaxed) {
                    pools[i]
                        .run(|tx| {
                            *tx.write(a)? += 1;
                            *tx.write(b)? -= 1;
                            Ok(())
                        })
                        .unwrap();
                    writes[i].fetch_add(1, Relaxed);
                }
            });
        }
        let (done, results) = mpsc::channel();
        for i in 0..2 {
            let done = done.clone();
            s.spawn(move || {
                let [a, b, _] = objs[i];
                let other = 1 - i;
                let c = objs[other][2];
                let r = pools[i].run_with(TxOptions::read_only(), |tx| {
                    let x = *tx.read(a)?;
                    let w = writes[i].load(Relaxed);
                    std::thread::sleep(Duration::from_millis(30));
                    if writes[i].load(Relaxed) == w {
                        // Our writer is held back: we hold the word. Wait for the
                        // other reader to hold its pool's, then write that pool.
                        held[i].store(true, Relaxed);
                        let t = Instant::now();
                        while !held[other].load(Relaxed)
                            && !finished[other].load(Relaxed)
                            && t.elapsed() < Duration::from_secs(5)
                        {
                            std::thread::sleep(Duration::from_millis(1));
                        }
                        pools[other].run(|q| {
                            *q.write(c)? += 1;
                            Ok(())
                        })?;
                    }
                    Ok(x + *tx.read(b)?)
                });
                finished[i].store(true, Relaxed);
                let _ = done.send(r);
            });
        }
        for _ in 0..2 {
            let Ok(r) = results.recv_timeout(Duration::from_secs(20)) else {
                stop.store(true, Relaxed);
                panic!("a long reader did not return within 20 s");
            };
            assert_eq!(r.unwrap(), 0, "a + b changed");
        }
        stop.store(true, Relaxed);
    });
}
