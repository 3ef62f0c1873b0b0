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
