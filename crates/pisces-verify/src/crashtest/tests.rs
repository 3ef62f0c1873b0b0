//! Tests of the crash-test library itself: the oracles reject wrong states, campaigns
//! are clean and deterministic, and states can be reproduced.

use super::machine::{boot, initial_image, run, PoolSpec};
use super::*;
use crate::sim::{Adversary, SimConfig};
use pisces::{EngineId, EngineOptions, PPtr, Pool};

/// Every workload, the extra ones included.
fn every_workload() -> Vec<Box<dyn Workload>> {
    WORKLOADS
        .iter()
        .chain(&EXTRA_WORKLOADS)
        .map(|n| workload_by_name(n).unwrap())
        .collect()
}

fn spec(w: &dyn Workload, threads: usize, ops: usize) -> PoolSpec {
    PoolSpec {
        engine: EngineId::Pisces,
        options: EngineOptions::default(),
        shape: w.shape(threads, ops),
        slots: threads.max(2),
        domain: pisces::PersistenceDomain::Adr,
    }
}

/// The pool after `ops` operations of each of `threads` threads, closed cleanly and
/// reopened.
fn pool_after(w: &dyn Workload, threads: usize, ops: usize) -> Pool {
    let spec = spec(w, threads, ops);
    let sim = boot(initial_image(w, &spec).unwrap(), SimConfig::default()).unwrap();
    let out = run(w, &spec, &sim, threads, ops, 0).unwrap();
    assert!(!out.crashed);
    assert_eq!(out.bounds, vec![Bounds::exact(ops); threads]);
    let image = sim.crash_image_now_with(0, Adversary::DurableOnly).image;
    Pool::open_on(boot(image, SimConfig::default()).unwrap(), spec.config()).unwrap()
}

#[test]
fn oracles_accept_exactly_the_acknowledged_state() {
    for w in every_workload() {
        let n = 9;
        let pool = pool_after(w.as_ref(), 2, n);
        let name = w.name();
        let exact = |a, b| vec![Bounds::exact(a), Bounds::exact(b)];
        assert_eq!(w.check(&pool, &exact(n, n)), Ok(vec![n, n]), "{name}");
        // Acknowledged operations missing: violations.
        assert!(w.check(&pool, &exact(n, 0)).is_err(), "{name}");
        assert!(w.check(&pool, &exact(0, n)).is_err(), "{name}");
        // A thread that never ran must have left nothing.
        assert!(w.check(&pool, &[Bounds::exact(n)]).is_err(), "{name}");
        // In these workloads every operation changes the state (a key-value remove of
        // an absent key does not), so the oracle tells counts one apart.
        if ["bank", "list", "alloc"].contains(&name) {
            let in_flight = Bounds {
                acked: n - 1,
                maybe: 1,
            };
            assert_eq!(
                w.check(&pool, &[in_flight, Bounds::exact(n)]),
                Ok(vec![n, n]),
                "{name}"
            );
            assert!(w.check(&pool, &exact(n + 1, n)).is_err(), "{name}");
            assert!(w.check(&pool, &exact(n, n - 1)).is_err(), "{name}");
        }
    }
}

#[test]
fn the_allocator_oracle_finds_leaks_and_reachable_free_blocks() {
    for w in every_workload() {
        let pool = pool_after(w.as_ref(), 1, 6);
        let ok = w.check(&pool, &[Bounds::exact(6)]);
        assert_eq!(ok, Ok(vec![6]), "{}", w.name());
        // An object no structure reaches: a leak.
        // (Each transaction on its own handle, whose drop writes back its group-commit
        // batch: the oracle reads the persistent bitmaps.)
        let once = |f: &mut dyn FnMut(&mut pisces::Tx<'_>) -> pisces::Result<()>| {
            pool.handle().unwrap().run(f).unwrap()
        };
        let mut stray = PPtr::null();
        once(&mut |tx| {
            stray = tx.alloc([7u64; 4])?;
            Ok(())
        });
        let e = w.check(&pool, &[Bounds::exact(6)]).unwrap_err();
        assert!(e.contains("1 leaked"), "{}: {e}", w.name());
        once(&mut |tx| tx.free(stray));
        assert_eq!(w.check(&pool, &[Bounds::exact(6)]), Ok(vec![6]));
        // A reachable object that the bitmaps do not hold: the root object "freed" while
        // still in use. (The API refuses to free the root object and cannot forge
        // bitmaps, so the oracle is handed a reachable set with one block too many.)
        let mut reachable: std::collections::BTreeSet<u64> =
            pool.allocated_objects().unwrap().into_iter().collect();
        reachable.insert(stray.offset());
        let e = super::oracle::allocated_equals_reachable(&pool, &reachable).unwrap_err();
        assert!(e.contains("1 reachable but free"), "{}: {e}", w.name());
    }
}

fn small(mode: Mode, threads: usize) -> Settings {
    Settings {
        options: vec![EngineOptions::default()],
        threads,
        ops: 6,
        mode,
        images: 1,
        recovery_crash_one_in: 3,
        jobs: 2,
        ..Settings::default()
    }
}

#[test]
fn short_campaigns_of_every_workload_are_clean() {
    for w in every_workload() {
        let s = small(Mode::Exhaustive, 1);
        let plan = Plan::new(w.as_ref(), &s).unwrap();
        let expected = plan.expected_states();
        assert!(expected > 6, "{}: {expected} fences", w.name());
        let r = run_plan(&plan, &|_, _| {});
        assert_eq!(r.violation_count, 0, "{}: {:#?}", w.name(), r.violations);
        assert_eq!(r.states, expected, "every fence of a 1-thread run crashes");
        assert!(r.recovery_crashes > 0);
        let r = run_campaign(
            w.as_ref(),
            &small(Mode::Random { states: 12 }, 2),
            &|_, _| {},
        );
        assert_eq!(r.violation_count, 0, "{}: {:#?}", w.name(), r.violations);
        assert!(r.states >= 12);
    }
}

/// The string-keyed tree with byte string values after crashes, on every durable
/// engine: its keys, values, separators and nodes are exactly the allocated blocks
/// and decode to the acknowledged state.
#[test]
fn string_map_campaigns_are_clean_on_every_durable_engine() {
    let w = workload_by_name("strmap").unwrap();
    let engines: Vec<EngineId> = EngineId::ALL
        .iter()
        .copied()
        .filter(|e| e.available() && e.is_durable() && !e.has_own_pool_format())
        .collect();
    assert!(engines.len() >= 5, "{engines:?}");
    for engine in engines {
        let s = Settings {
            engine,
            options: Vec::new(),
            // Thread 1 removes present keys at operations 14 and 19 (a unit test of
            // `string_map` pins it).
            ops: 20,
            ..small(Mode::Random { states: 24 }, 2)
        };
        let r = run_campaign(w.as_ref(), &s, &|_, _| {});
        assert_eq!(r.violation_count, 0, "{engine}: {:#?}", r.violations);
        assert!(r.states >= 24, "{engine}");
    }
}

#[test]
fn single_thread_campaigns_are_deterministic_and_reproducible() {
    let w = workload_by_name("list").unwrap();
    let s = Settings {
        images: 2,
        ..small(Mode::Random { states: 20 }, 1)
    };
    let count = std::sync::atomic::AtomicU64::new(0);
    let a = run_campaign(w.as_ref(), &s, &|n, _| {
        count.fetch_add(n, std::sync::atomic::Ordering::Relaxed);
    });
    let b = run_campaign(
        w.as_ref(),
        &Settings {
            jobs: 1,
            ..s.clone()
        },
        &|_, _| {},
    );
    assert_eq!(count.into_inner(), a.states);
    assert_eq!(
        (a.states, a.crashes, a.recovery_crashes, a.missed),
        (b.states, b.crashes, b.recovery_crashes, b.missed)
    );
    let plan = Plan::new(w.as_ref(), &s).unwrap();
    for index in [0, 7, 19] {
        let x = reproduce(&plan, index, None).unwrap();
        let y = reproduce(&plan, index, None).unwrap();
        assert_eq!(
            (x.index, x.round, &x.bounds),
            (index, plan.round(index / 2), &y.bounds)
        );
        assert_eq!(x.recovery_crash, y.recovery_crash);
        assert!(x.verdict.is_ok() && y.verdict.is_ok());
    }
    // From a saved image: the same verdict; a wrong acknowledged count is caught.
    let st = plan.round(3);
    let sim = boot(
        plan.images[st.option].clone(),
        SimConfig::crash_at_fence(st.fence)
            .with_seed(st.sim_seed)
            .with_adversary(s.adversary),
    )
    .unwrap();
    let out = run(w.as_ref(), &plan.specs[st.option], &sim, 1, s.ops, 0).unwrap();
    let image = sim.crash_image(1).unwrap();
    let saved = reproduce(&plan, 7, Some((image.clone(), out.bounds.clone()))).unwrap();
    assert_eq!(saved.bounds, reproduce(&plan, 7, None).unwrap().bounds);
    assert!(saved.verdict.is_ok());
    let mut wrong = out.bounds.clone();
    wrong[0].acked += 2;
    wrong[0].maybe = 0;
    assert!(reproduce(&plan, 7, Some((image.clone(), wrong)))
        .unwrap()
        .verdict
        .is_err());
    assert!(reproduce(&plan, 7, Some((image[..4096].to_vec(), out.bounds.clone()))).is_err());
    assert!(reproduce(&plan, 7, Some((image, vec![Bounds::exact(0); 2]))).is_err());
}

#[test]
fn invalid_settings_are_errors_not_panics() {
    let w = workload_by_name("bank").unwrap();
    let base = small(Mode::Exhaustive, 1);
    for bad in [
        Settings {
            threads: 0,
            ..base.clone()
        },
        Settings {
            threads: MAX_THREADS + 1,
            ..base.clone()
        },
        Settings {
            ops: 0,
            ..base.clone()
        },
        Settings {
            images: 0,
            ..base.clone()
        },
        Settings {
            jobs: 0,
            ..base.clone()
        },
        Settings {
            options: vec![EngineOptions::new().set("group_commit", 0)],
            ..base.clone()
        },
        Settings {
            options: vec![EngineOptions::new().set("no_such_option", 1)],
            ..base.clone()
        },
        Settings {
            adversary: Adversary::Random {
                p_keep_flushed: f64::NAN,
                p_keep_unflushed: 0.5,
            },
            ..base.clone()
        },
    ] {
        assert!(Plan::new(w.as_ref(), &bad).is_err(), "{bad:?}");
        let r = run_campaign(w.as_ref(), &bad, &|_, _| {});
        assert_eq!((r.states, r.violation_count), (0, 1));
    }
    let plan = Plan::new(w.as_ref(), &base).unwrap();
    assert!(reproduce(&plan, plan.expected_states(), None).is_err());
}

/// Settings of a short deferred-durability campaign of `bank` on sp3 with two threads:
/// sp3 persists a commit's own record before `run` returns, but with durability
/// deferred not the predecessors it read from, so a crash may lose an operation whose
/// commit returned (and every later one of its thread) until its thread's wait.
fn sp3_deferred(deferred: usize, states: u64) -> Settings {
    Settings {
        engine: EngineId::Sp3,
        options: Vec::new(),
        ops: 12,
        deferred,
        ..small(Mode::Random { states }, 2)
    }
}

#[test]
fn deferred_durability_campaigns_are_clean_on_sp3() {
    let w = workload_by_name("bank").unwrap();
    for deferred in [1, 3, 8] {
        let r = run_campaign(w.as_ref(), &sp3_deferred(deferred, 40), &|_, _| {});
        assert_eq!(
            r.violation_count, 0,
            "deferred {deferred}: {:#?}",
            r.violations
        );
        assert!(r.states >= 40, "deferred {deferred}");
    }
}

/// A round run by hand that crashed: the run and the verdicts on its first crash image.
struct Judged {
    run: machine::RunOutcome,
    /// Under the run's own bounds.
    real: Result<(), String>,
    /// Under bounds that take every operation whose commit returned for acknowledged
    /// (as if deferred commits were durable on return).
    on_return: Result<(), String>,
}

/// Rounds `0..rounds` of `plan`, judged by hand; those that crashed.
fn judge_deferred_rounds(plan: &Plan<'_>, rounds: u64) -> Vec<Judged> {
    let s = &plan.settings;
    let mut out = Vec::new();
    for r in 0..rounds {
        let spec = plan.round(r);
        let pspec = &plan.specs[spec.option];
        let sim = boot(
            plan.images[spec.option].clone(),
            pspec.sim(
                SimConfig::crash_at_fence(spec.fence)
                    .with_seed(spec.sim_seed)
                    .with_adversary(s.adversary),
            ),
        )
        .unwrap();
        let run = run(plan.workload, pspec, &sim, s.threads, s.ops, s.deferred).unwrap();
        if !run.crashed {
            continue;
        }
        let acked_on_return: Vec<Bounds> = run
            .bounds
            .iter()
            .zip(&run.committed)
            .map(|(b, &c)| Bounds {
                acked: c,
                maybe: b.acked + b.maybe - c,
            })
            .collect();
        let image = sim.crash_image(0).unwrap();
        let index = r * s.images;
        let real = state::judge_state(plan, spec, index, image.clone(), &run.bounds).verdict;
        let on_return = state::judge_state(plan, spec, index, image, &acked_on_return).verdict;
        out.push(Judged {
            run,
            real,
            on_return,
        });
    }
    out
}

/// The run's bounds in deferred mode: only what a returned wait covered is
/// acknowledged; what was committed since may be present, and a crash between waits
/// leaves more than one operation in doubt.
#[test]
fn deferred_runs_acknowledge_only_what_a_wait_covered() {
    let w = workload_by_name("bank").unwrap();
    let s = Settings {
        adversary: Adversary::DurableOnly,
        ..sp3_deferred(8, 0)
    };
    let plan = Plan::new(w.as_ref(), &s).unwrap();
    let rounds = judge_deferred_rounds(&plan, 24);
    assert!(rounds.len() > 12, "{} rounds crashed", rounds.len());
    for Judged { run, real, .. } in &rounds {
        assert!(real.is_ok(), "{run:?}: {real:?}");
        for (b, &c) in run.bounds.iter().zip(&run.committed) {
            // Waits come after operations 8 and 12: the acknowledged counts are those.
            assert!([0, 8, 12].contains(&b.acked), "{run:?}");
            assert!(b.acked <= c && c <= b.acked + b.maybe && b.acked + b.maybe <= c + 1);
        }
    }
    assert!(
        rounds
            .iter()
            .any(|j| j.run.bounds.iter().any(|b| b.maybe > 1)),
        "no crash left more than one operation in doubt"
    );
    // On return, every commit is acknowledged (at most the one in flight in doubt).
    let s = Settings { deferred: 0, ..s };
    let plan = Plan::new(w.as_ref(), &s).unwrap();
    for j in judge_deferred_rounds(&plan, 8) {
        assert!(j.real.is_ok(), "{:?}: {:?}", j.run, j.real);
        assert_eq!(j.on_return, j.real);
        assert_eq!(
            j.run.bounds.iter().map(|b| b.acked).collect::<Vec<_>>(),
            j.run.committed
        );
        assert!(j.run.bounds.iter().all(|b| b.maybe <= 1));
    }
}

/// The deferred bounds are not vacuous: sp3's slot 0 sleeps between each commit's
/// visibility and its persistence (a hook point of the `mutation` build), so the other
/// thread reads its writes, commits with durability deferred and returns while they
/// are not durable; a crash then loses operations whose commit had returned. Taking
/// those for acknowledged finds violations; the deferred bounds find none.
#[cfg(feature = "mutation")]
#[test]
fn deferred_commits_that_returned_can_be_lost() {
    let sc = pisces::mutation::Scenario::setup();
    let hook = EngineId::Sp3.hook("before-persist").unwrap();
    sc.sleep(hook, 0, std::time::Duration::from_millis(1));
    let w = workload_by_name("bank").unwrap();
    let s = Settings {
        options: vec![pisces::Sp3Options {
            early_visibility: true,
        }
        .into()],
        adversary: Adversary::DurableOnly,
        continue_ops: 0,
        recovery_crash_one_in: 0,
        ..sp3_deferred(6, 0)
    };
    let plan = Plan::new(w.as_ref(), &s).unwrap();
    // About one crash state in eight loses such an operation (more without other
    // tests running beside this one).
    let rounds = judge_deferred_rounds(&plan, 100);
    let lost = rounds.iter().filter(|j| j.on_return.is_err()).count();
    let wrong: Vec<_> = rounds
        .iter()
        .filter_map(|j| j.real.as_ref().err().map(|e| (&j.run, e)))
        .collect();
    assert!(wrong.is_empty(), "{wrong:#?}");
    assert!(
        lost > 0,
        "no crash of {} lost an operation whose commit had returned",
        rounds.len()
    );
    println!(
        "{lost} of {} crash states lost operations whose deferred commit had returned",
        rounds.len()
    );
}

/// Bank's oracle under deferred bounds: three threads with nine operations in doubt
/// each are 1000 combinations, every one tried when none matches.
#[test]
fn bank_oracle_searches_deferred_combinations() {
    let w = workload_by_name("bank").unwrap();
    let pool = pool_after(w.as_ref(), 3, 20);
    let doubt = |acked| Bounds { acked, maybe: 9 };
    let t0 = std::time::Instant::now();
    assert_eq!(
        w.check(&pool, &[doubt(11), doubt(12), doubt(20)]),
        Ok(vec![20, 20, 20])
    );
    assert!(w.check(&pool, &[doubt(0), doubt(0), doubt(0)]).is_err());
    assert!(w.check(&pool, &[doubt(21), doubt(11), doubt(11)]).is_err());
    println!("bank: 3 x 1000 combinations in {:?}", t0.elapsed());
}

/// Eight threads with eight operations in doubt each are 9^8 (43 million)
/// combinations: the oracle finds the one that matches, and refuses when none does,
/// without trying them one by one (which took seconds per crash state).
#[test]
fn bank_oracle_searches_many_threads_in_doubt() {
    let w = workload_by_name("bank").unwrap();
    let pool = pool_after(w.as_ref(), 8, 12);
    let doubt = |acked| Bounds { acked, maybe: 8 };
    let t0 = std::time::Instant::now();
    let bounds: Vec<Bounds> = (0..8).map(|t| doubt(4 + t % 5)).collect();
    assert_eq!(w.check(&pool, &bounds), Ok(vec![12; 8]));
    let mut short = bounds.clone();
    short[5] = doubt(0);
    assert!(w.check(&pool, &short).is_err());
    let mut past = bounds.clone();
    past[2] = doubt(13);
    assert!(w.check(&pool, &past).is_err());
    println!("bank: 3 x 9^8 combinations in {:?}", t0.elapsed());
}
