//! The `sicheck` isolation checker: first on hand-built histories (each anomaly class
//! must be found and classified, anomaly-free histories must pass), then on histories
//! recorded from the Pisces engine (snapshot isolation: no forbidden anomaly, write
//! skew where the workload provokes it), including histories that span a simulated
//! crash and recovery.

use pisces::medium::DramMedium;
use pisces::{Config, EngineOptions, Pool};
use pisces_verify::sicheck::{
    check, Anomaly, History, Isolation, Op, Report, Txn, Workload, WorkloadConfig,
};
use pisces_verify::sim::{Adversary, SimConfig, SimMedium};
use std::sync::Arc;
use std::time::Duration;

fn history(txns: impl IntoIterator<Item = Txn>) -> History {
    txns.into_iter().collect()
}

/// Check `h` and require exactly the classes `expect` (each at least once).
fn expect_only(h: &History, expect: &[Anomaly]) -> Report {
    let r = check(h);
    let mut want = expect.to_vec();
    want.sort();
    assert_eq!(
        r.found(),
        want,
        "classes found differ from those expected; report:\n{}",
        r.render(Isolation::Serializable)
    );
    r
}

// ------------------------------------------------------------ anomaly-free histories

#[test]
fn serial_history_is_clean() {
    let h = history([
        Txn::committed(0).a(1, 1),
        Txn::committed(1).r(1, &[1]).a(1, 2).a(2, 3).r(1, &[1, 2]),
        Txn::aborted(0).a(1, 99),
        Txn::committed(0).r(1, &[1, 2]).r(2, &[3]).r(3, &[]),
        Txn::committed(1).a(2, 4).r(2, &[3, 4]),
    ]);
    let r = expect_only(&h, &[]);
    assert_eq!(r.transactions, 4);
    assert_eq!(r.aborted, 1);
    assert_eq!(r.forbidden(Isolation::Serializable), 0);
    assert!(r.graph.edges[0] > 0 && r.graph.edges[1] > 0);
}

#[test]
fn concurrent_but_acyclic_history_is_clean() {
    // T1 did not see T0's append (rw T1 -> T0), but nothing leads back.
    let h = history([
        Txn::committed(0).r(1, &[]).a(2, 10),
        Txn::committed(1).r(2, &[]).r(1, &[]),
        Txn::committed(2).r(2, &[10]).a(1, 11),
        Txn::committed(0).r(1, &[11]).r(2, &[10]),
    ]);
    let r = expect_only(&h, &[]);
    assert!(r.graph.edges[2] > 0, "the history has rw edges");
}

// ------------------------------------------------------------ one history per anomaly

#[test]
fn finds_g0_write_cycle() {
    let h = history([
        Txn::committed(0).a(1, 1).a(2, 2),
        Txn::committed(1).a(1, 3).a(2, 4),
        Txn::committed(2).r(1, &[1, 3]).r(2, &[4, 2]),
    ]);
    let r = expect_only(&h, &[Anomaly::G0]);
    assert_eq!(r.count(Anomaly::G0), 1);
    let ex = r
        .examples
        .iter()
        .find(|e| e.anomaly == Anomaly::G0)
        .unwrap();
    assert_eq!(ex.cycle.len(), 2);
    assert!(ex.text.contains("--ww-->"), "{}", ex.text);
}

#[test]
fn finds_g1a_aborted_read() {
    let h = history([Txn::aborted(0).a(1, 5), Txn::committed(1).r(1, &[5])]);
    let r = expect_only(&h, &[Anomaly::G1a]);
    assert_eq!(r.count(Anomaly::G1a), 1);
}

#[test]
fn finds_g1b_intermediate_read() {
    let h = history([
        Txn::committed(0).a(1, 1).a(1, 2),
        Txn::committed(1).r(1, &[1]),
    ]);
    expect_only(&h, &[Anomaly::G1b]);
}

#[test]
fn finds_g1c_circular_information_flow() {
    let h = history([
        Txn::committed(0).a(1, 1).r(2, &[2]),
        Txn::committed(1).a(2, 2).r(1, &[1]),
    ]);
    let r = expect_only(&h, &[Anomaly::G1c]);
    assert_eq!(r.count(Anomaly::G1c), 1);
}

#[test]
fn finds_g_single_read_skew() {
    // T0 saw T1's append to key 2 but not its append to key 1.
    let h = history([
        Txn::committed(0).r(1, &[]).r(2, &[20]),
        Txn::committed(1).a(1, 10).a(2, 20),
        Txn::committed(2).r(1, &[10]),
    ]);
    let r = expect_only(&h, &[Anomaly::GSingle]);
    let ex = &r.examples[0];
    let kinds: Vec<&str> = ex.cycle.iter().map(|s| s.edge.name()).collect();
    assert_eq!(kinds.iter().filter(|k| **k == "rw").count(), 1, "{kinds:?}");
}

#[test]
fn finds_lost_update() {
    let h = history([
        Txn::committed(0).r(1, &[]).a(1, 10),
        Txn::committed(1).r(1, &[]).a(1, 11),
        Txn::committed(2).r(1, &[10, 11]),
    ]);
    // Both read the empty list and both appended: a lost update, which is also the
    // cycle T0 -ww-> T1 -rw-> T0.
    let r = expect_only(&h, &[Anomaly::GSingle, Anomaly::LostUpdate]);
    assert_eq!(r.count(Anomaly::LostUpdate), 1);
}

#[test]
fn finds_write_skew_allowed_under_si_only() {
    let h = history([
        Txn::committed(0).r(1, &[]).r(2, &[]).a(1, 10),
        Txn::committed(1).r(1, &[]).r(2, &[]).a(2, 20),
        Txn::committed(2).r(1, &[10]).r(2, &[20]),
    ]);
    let r = expect_only(&h, &[Anomaly::G2Item]);
    assert_eq!(r.write_skew(), 1);
    assert_eq!(r.forbidden(Isolation::Snapshot), 0);
    assert_eq!(r.forbidden(Isolation::Serializable), 1);
    assert_eq!(
        r.summary_line(Isolation::Snapshot),
        "transactions: 3, forbidden anomalies: 0, write skew: 1"
    );
}

#[test]
fn finds_g_nonadjacent_forbidden_under_si() {
    // T1 -rw-> T2 -wr-> T3 -rw-> T4 -wr-> T1: two rw edges, never adjacent.
    let h = history([
        Txn::committed(1).r(4, &[44]).r(1, &[]),
        Txn::committed(2).a(1, 21).a(2, 22),
        Txn::committed(3).r(2, &[22]).r(3, &[]),
        Txn::committed(4).a(3, 43).a(4, 44),
        Txn::committed(5).r(1, &[21]).r(3, &[43]),
    ]);
    let r = expect_only(&h, &[Anomaly::GNonadjacent]);
    assert_eq!(r.forbidden(Isolation::Snapshot), 1);
    assert_eq!(r.write_skew(), 0);
}

#[test]
fn finds_internal_inconsistency() {
    let h = history([Txn::committed(0).r(1, &[]).a(1, 10).r(1, &[])]);
    expect_only(&h, &[Anomaly::Internal]);
    // A first read that does not end with the transaction's own earlier append.
    let h = history([Txn::committed(0).a(1, 10).r(1, &[])]);
    expect_only(&h, &[Anomaly::Internal]);
}

#[test]
fn finds_garbage_reads() {
    let h = history([Txn::committed(0).r(1, &[99])]);
    expect_only(&h, &[Anomaly::GarbageRead]);
    // A value appended to another key.
    let h = history([Txn::committed(0).a(2, 7), Txn::committed(1).r(1, &[7])]);
    let r = expect_only(&h, &[Anomaly::GarbageRead]);
    assert!(r.examples[0].text.contains("appended to key 2"));
}

#[test]
fn finds_duplicates() {
    let h = history([Txn::committed(0).a(1, 1), Txn::committed(1).r(1, &[1, 1])]);
    expect_only(&h, &[Anomaly::Duplicate]);
    let h = history([Txn::committed(0).a(1, 5), Txn::committed(1).a(1, 5)]);
    expect_only(&h, &[Anomaly::Duplicate]);
}

#[test]
fn finds_incompatible_orders() {
    let h = history([
        Txn::committed(0).a(1, 1),
        Txn::committed(1).a(1, 2),
        Txn::committed(2).r(1, &[1, 2]),
        Txn::committed(3).r(1, &[2, 1]),
    ]);
    expect_only(&h, &[Anomaly::IncompatibleOrder]);
}

// ------------------------------------------------------------ histories across crashes

#[test]
fn crash_acknowledged_write_must_survive() {
    let h = history([
        Txn::committed(0).a(1, 10),
        Txn::committed(0).r(1, &[]).in_epoch(1),
    ]);
    expect_only(&h, &[Anomaly::LostWrite]);
}

#[test]
fn crash_indeterminate_may_vanish_or_survive_but_only_whole() {
    let run = |after: [&[u64]; 2]| {
        history([
            Txn::committed(0).a(3, 30),
            Txn::indeterminate(1).a(1, 10).a(2, 20),
            Txn::committed(0)
                .r(1, after[0])
                .r(2, after[1])
                .r(3, &[30])
                .in_epoch(1),
            Txn::committed(1).r(1, after[0]).a(1, 11).in_epoch(1),
        ])
    };
    expect_only(&run([&[], &[]]), &[]);
    expect_only(&run([&[10], &[20]]), &[]);
    expect_only(&run([&[10], &[]]), &[Anomaly::PartialRecovery]);
}

#[test]
fn crash_what_a_committed_transaction_read_must_survive() {
    let h = history([
        Txn::indeterminate(0).a(1, 10),
        Txn::committed(1).r(1, &[10]),
        Txn::committed(0).r(1, &[]).in_epoch(1),
    ]);
    let r = expect_only(&h, &[Anomaly::LostWrite]);
    assert!(r.examples[0].text.contains("read by a durable transaction"));
}

#[test]
fn crash_later_transactions_follow_the_recovery() {
    // After the recovery, one read sees the surviving 10 and another misses it: the
    // latter would have to precede the recovery.
    let h = history([
        Txn::committed(0).a(1, 10),
        Txn::committed(0).r(1, &[10]).in_epoch(1),
        Txn::committed(1).r(1, &[]).in_epoch(1),
    ]);
    let r = check(&h);
    assert!(
        r.count(Anomaly::CrashOrder) >= 1,
        "{}",
        r.render(Isolation::Snapshot)
    );
    assert!(r.count(Anomaly::LostWrite) >= 1);
    // A transaction before the crash read a value appended after it.
    let h = history([
        Txn::committed(0).r(1, &[10]),
        Txn::committed(0).a(1, 10).in_epoch(1),
    ]);
    expect_only(&h, &[Anomaly::CrashOrder]);
    // The recovered list reorders values.
    let h = history([
        Txn::committed(0).a(1, 1),
        Txn::committed(1).a(1, 2),
        Txn::committed(2).r(1, &[1, 2]),
        Txn::committed(2).r(1, &[2, 1]).in_epoch(1),
    ]);
    let r = check(&h);
    assert!(
        r.count(Anomaly::CrashOrder) >= 1,
        "{}",
        r.render(Isolation::Snapshot)
    );
}

// ------------------------------------------------------------ the engine

fn dram_pool(threads: usize) -> Pool {
    dram_pool_with(threads, EngineOptions::default())
}

fn dram_pool_with(threads: usize, engine_options: EngineOptions) -> Pool {
    let size = 32 << 20;
    let m = DramMedium::anonymous(size, 0, 0).unwrap();
    Pool::create_on(
        Arc::new(m),
        Config::default()
            .size(size as u64)
            .max_threads(threads + 1)
            .log_bytes_per_thread(256 << 10)
            .engine_options(engine_options),
    )
    .unwrap()
}

fn run_dram(cfg: WorkloadConfig, txns: usize) -> (History, Report) {
    let pool = dram_pool(cfg.threads);
    let wl = Workload::new(cfg).unwrap();
    wl.setup(&pool).unwrap();
    let h = wl.run(&pool, 0, txns, &|| false).unwrap();
    let r = check(&h);
    (h, r)
}

#[test]
fn engine_random_mix_has_no_forbidden_anomaly() {
    for (threads, keys) in [(2, 3), (3, 8)] {
        let cfg = WorkloadConfig {
            threads,
            keys,
            seed: 7,
            ..WorkloadConfig::default()
        };
        let (h, r) = run_dram(cfg, 3000);
        assert_eq!(
            r.forbidden(Isolation::Snapshot),
            0,
            "{}",
            r.render(Isolation::Snapshot)
        );
        assert_eq!(h.count(pisces_verify::sicheck::Outcome::Committed), 3000);
        assert_eq!(r.transactions, 3000);
        // The history is rich enough to say something: every edge kind occurs.
        let e = r.graph.edges;
        assert!(e[0] > 100 && e[1] > 100 && e[2] > 100, "edges {e:?}");
    }
}

#[test]
fn engine_write_skew_workload_shows_write_skew_and_nothing_forbidden() {
    // Overlap depends on scheduling: try a few times for at least one write skew.
    let mut skews = 0;
    for seed in 0..5 {
        let cfg = WorkloadConfig {
            threads: 2,
            keys: 2,
            write_skew: true,
            pause: Duration::from_micros(50),
            seed,
            ..WorkloadConfig::default()
        };
        let (_, r) = run_dram(cfg, 400);
        assert_eq!(
            r.forbidden(Isolation::Snapshot),
            0,
            "{}",
            r.render(Isolation::Snapshot)
        );
        assert_eq!(r.forbidden(Isolation::Serializable), r.write_skew());
        skews = r.write_skew();
        eprintln!(
            "write-skew workload, seed {seed}: {}",
            r.summary_line(Isolation::Snapshot)
        );
        if skews > 0 {
            let ex = r
                .examples
                .iter()
                .find(|e| e.anomaly == Anomaly::G2Item)
                .unwrap();
            assert!(ex.cycle.iter().filter(|s| s.edge.name() == "rw").count() >= 2);
            break;
        }
    }
    assert!(skews > 0, "no write skew in five runs");
}

// ------------------------------------------------------------ several processes

/// What a process hands over of its history: every transaction survives its line.
#[test]
fn transactions_survive_their_lines() {
    let txns = [
        Txn::committed(3).r(1, &[]).a(1, 10).r(1, &[10]),
        Txn::aborted(0).a(7, 1 << 60),
        Txn::indeterminate(2).in_epoch(4).r(9, &[1, 2, 3]),
        Txn::committed(1),
    ];
    for t in txns {
        let line = t.to_line();
        assert!(!line.contains('\n'), "{line}");
        assert_eq!(Txn::from_line(&line).unwrap(), t, "{line}");
    }
    assert_eq!(
        Txn::committed(0).r(1, &[5, 6]).a(2, 7).to_line(),
        "0 0 ok r 1 2 5 6 a 2 7"
    );
    for bad in [
        "",
        "0",
        "0 0",
        "0 0 done",
        "x 0 ok",
        "0 0 ok r 1",
        "0 0 ok r 1 2 5",
        "0 0 ok a 1",
        "0 0 ok w 1 2",
        "0 0 ok a 1 -2",
    ] {
        assert!(Txn::from_line(bad).is_err(), "`{bad}` accepted");
    }
}

#[test]
fn merge_keeps_every_transaction_and_numbers_threads_apart() {
    let a = history([Txn::committed(0).a(1, 1), Txn::committed(1).r(1, &[1])]);
    let b = history([Txn::aborted(0).a(1, 2), Txn::committed(2).r(1, &[1])]);
    let c = history([Txn::committed(0).r(1, &[1])]);
    let m = History::merge([a, b, History::new(), c]);
    let threads: Vec<usize> = m.txns.iter().map(|t| t.thread).collect();
    assert_eq!(threads, [0, 1, 2, 4, 5]);
    assert_eq!(m.txns[2], Txn::aborted(2).a(1, 2));
    expect_only(&m, &[]);
}

/// Two workloads of a two-process run on one pool (here two sets of threads of one
/// process): they never append the same values, they go on with the lists the other
/// left (the pool says which key of a slot is current), and their merged history,
/// with a read of every key after both, is clean.
#[test]
fn workloads_of_two_processes_share_keys_not_values() {
    let bad = |processes, process| {
        Workload::new(WorkloadConfig {
            processes,
            process,
            ..WorkloadConfig::default()
        })
        .is_err()
    };
    assert!(bad(0, 0) && bad(2, 2) && bad(1 << 17, 0) && !bad(2, 1));
    let pool = dram_pool(4);
    let wls: Vec<Workload> = (0..2)
        .map(|process| {
            Workload::new(WorkloadConfig {
                threads: 2,
                keys: 3,
                processes: 2,
                process,
                seed: 3,
                ..WorkloadConfig::default()
            })
            .unwrap()
        })
        .collect();
    wls[0].setup(&pool).unwrap();
    // At once (how much they meet is the scheduler's choice), then in turns of ten
    // transactions (they must meet: each goes on with the lists the other left).
    let mut parts: Vec<History> = std::thread::scope(|s| {
        let hs: Vec<_> = wls
            .iter()
            .map(|wl| s.spawn(|| wl.run(&pool, 0, 1000, &|| false).unwrap()))
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for _ in 0..20 {
        for (wl, part) in wls.iter().zip(&mut parts) {
            part.extend(wl.run(&pool, 0, 10, &|| false).unwrap());
        }
    }
    let keys = wls.iter().map(Workload::keys_used).max().unwrap();
    let last = wls[0].read_keys_below(&pool, 1, keys).unwrap();
    let values = |h: &History| -> std::collections::BTreeSet<u64> {
        h.txns
            .iter()
            .flat_map(|t| t.appends())
            .map(|a| a.1)
            .collect()
    };
    assert!(values(&parts[0]).is_disjoint(&values(&parts[1])));
    // Lists where the values of the two processes alternate (A .. B .. A).
    let interleaved = last
        .txns
        .iter()
        .flat_map(|t| &t.ops)
        .filter(|op| match op {
            Op::Read { list, .. } => {
                let procs: Vec<usize> = list.iter().map(|v| Workload::process_of(*v)).collect();
                procs.windows(2).filter(|w| w[0] != w[1]).count() >= 2
            }
            Op::Append { .. } => false,
        })
        .count();
    assert!(
        interleaved >= 5,
        "{interleaved} lists interleave the processes"
    );
    let h = History::merge(parts.into_iter().chain([last]));
    let r = check(&h);
    assert_eq!(
        r.forbidden(Isolation::Snapshot),
        0,
        "{}",
        r.render(Isolation::Snapshot)
    );
    assert_eq!(
        h.count(pisces_verify::sicheck::Outcome::Committed) as u64,
        2 * 1200 + keys.div_ceil(64)
    );
}

// ------------------------------------------------------------ across a crash

const SIM_POOL: usize = 2 << 20;

fn sim_cfg() -> Config {
    Config::default()
        .size(SIM_POOL as u64)
        .max_threads(3)
        .log_bytes_per_thread(32 << 10)
        .engine_options(EngineOptions::default())
}

/// A pool image holding the empty store, made on a machine that does not crash.
fn store_image(wl: &Workload) -> Vec<u8> {
    let sim = Arc::new(SimMedium::new(SIM_POOL, SimConfig::default()).unwrap());
    let pool = Pool::create_on(sim.clone(), sim_cfg()).unwrap();
    wl.setup(&pool).unwrap();
    drop(pool);
    sim.crash_image_now_with(0, Adversary::DurableOnly).image
}

fn workload(seed: u64) -> Workload {
    Workload::new(WorkloadConfig {
        threads: 2,
        keys: 4,
        appends_per_key: 8,
        seed,
        ..WorkloadConfig::default()
    })
    .unwrap()
}

/// Fences of an uncrashed run: (after opening the pool, after the workload).
fn fence_span(txns: usize) -> (u64, u64) {
    let wl = workload(1);
    let sim = Arc::new(SimMedium::from_image(store_image(&wl), SimConfig::default()).unwrap());
    let pool = Pool::open_on(sim.clone(), sim_cfg()).unwrap();
    let start = sim.fence_count();
    wl.run(&pool, 0, txns, &|| false).unwrap();
    (start, sim.fence_count())
}

struct CrashRun {
    history: History,
    report: Report,
    crashed: bool,
}

/// Run, crash at `fence`, recover from an adversary's image, read everything, run
/// more, read everything again; check the combined history.
fn crash_and_continue(fence: u64, seed: u64, txns: usize) -> CrashRun {
    try_crash_and_continue(fence, seed, txns).unwrap()
}

/// [`crash_and_continue`], with the errors of the runs after the crash returned (a
/// correct engine never gives one; an engine with a protocol step removed may recover
/// a state in which the workload meets a freed object).
fn try_crash_and_continue(fence: u64, seed: u64, txns: usize) -> pisces::Result<CrashRun> {
    let wl = workload(seed);
    let sim = Arc::new(
        SimMedium::from_image(
            store_image(&wl),
            SimConfig::crash_at_fence(fence).with_seed(seed),
        )
        .unwrap(),
    );
    let pool = Pool::open_on(sim.clone(), sim_cfg()).unwrap();
    let mut h = wl.run(&pool, 0, txns, &|| sim.crashed()).unwrap();
    drop(pool);
    let crashed = sim.crashed();
    let image = if crashed {
        sim.crash_image(seed).unwrap()
    } else {
        sim.crash_image_now(seed)
    };
    let sim = Arc::new(SimMedium::from_image(image, SimConfig::default()).unwrap());
    let pool = Pool::open_on(sim.clone(), sim_cfg())?;
    h.extend(wl.read_all(&pool, 1)?);
    h.extend(wl.run(&pool, 1, txns, &|| false)?);
    h.extend(wl.read_all(&pool, 1)?);
    let report = check(&h);
    Ok(CrashRun {
        history: h,
        report,
        crashed,
    })
}

#[test]
fn engine_histories_spanning_a_crash_are_clean() {
    let txns = 120;
    let (start, end) = fence_span(txns);
    assert!(
        end > start + 20,
        "the workload issues fences ({start}..{end})"
    );
    let mut crashes = 0;
    for (i, frac) in [0.1, 0.35, 0.6, 0.9].into_iter().enumerate() {
        let fence = start + ((end - start) as f64 * frac) as u64;
        let run = crash_and_continue(fence, i as u64 + 1, txns);
        let r = &run.report;
        eprintln!(
            "crash at fence {fence} (crashed: {}): {} committed, {} indeterminate, {} aborted attempts; {}",
            run.crashed,
            r.transactions,
            r.indeterminate,
            r.aborted,
            r.summary_line(Isolation::Snapshot)
        );
        assert_eq!(
            r.forbidden(Isolation::Snapshot),
            0,
            "crash at fence {fence}:\n{}",
            r.render(Isolation::Snapshot)
        );
        if run.crashed {
            crashes += 1;
            let h = &run.history;
            let before = h
                .txns
                .iter()
                .filter(|t| t.epoch == 0 && t.outcome == pisces_verify::sicheck::Outcome::Committed)
                .count();
            let after = h.txns.iter().filter(|t| t.epoch == 1).count();
            assert!(after > txns / 2, "the run continued after recovery");
            // Acknowledged work existed before the crash (except for the earliest
            // crash points) and the checker had post-recovery reads to test it with.
            assert!(
                before > 0 || frac < 0.2,
                "nothing acknowledged before fence {fence}"
            );
        }
    }
    assert!(crashes >= 3, "only {crashes} of 4 runs crashed");
}

/// The checker is not fooled by a recovery that loses acknowledged work: pretend an
/// acknowledged transaction was only indeterminate, or drop it from the recovered
/// reads, and it must complain.
#[test]
fn crash_checker_detects_a_doctored_recovery() {
    let txns = 80;
    let (start, end) = fence_span(txns);
    let run = crash_and_continue(start + (end - start) / 2, 3, txns);
    assert!(run.crashed);
    let mut h = run.history;
    // Remove the last acknowledged append of epoch 0 from every read after recovery.
    let victim = h
        .txns
        .iter()
        .rev()
        .filter(|t| t.epoch == 0 && t.outcome == pisces_verify::sicheck::Outcome::Committed)
        .find_map(|t| t.appends().last())
        .expect("an acknowledged append before the crash");
    let mut touched = 0;
    for t in h.txns.iter_mut().filter(|t| t.epoch == 1) {
        for op in &mut t.ops {
            if let pisces_verify::sicheck::Op::Read { key, list } = op {
                if *key == victim.0 {
                    list.retain(|v| *v != victim.1);
                    touched += 1;
                }
            }
        }
    }
    assert!(touched > 0);
    let r = check(&h);
    assert!(
        r.count(Anomaly::LostWrite) >= 1,
        "{}",
        r.render(Isolation::Snapshot)
    );
}

/// Long version: `cargo test -p pisces-verify --release --test sicheck -- --ignored`.
#[test]
#[ignore]
fn long_engine_runs() {
    for (threads, keys) in [(2, 4), (4, 16)] {
        let (_, r) = run_dram(
            WorkloadConfig {
                threads,
                keys,
                seed: 11,
                ..WorkloadConfig::default()
            },
            100_000,
        );
        assert_eq!(
            r.forbidden(Isolation::Snapshot),
            0,
            "{}",
            r.render(Isolation::Snapshot)
        );
    }
    let txns = 400;
    let (start, end) = fence_span(txns);
    for i in 0..40u64 {
        let fence = start + (end - start) * i / 40;
        let run = crash_and_continue(fence, i + 100, txns);
        assert_eq!(
            run.report.forbidden(Isolation::Snapshot),
            0,
            "crash at fence {fence}:\n{}",
            run.report.render(Isolation::Snapshot)
        );
    }
}

/// Mutation evidence (`cargo test -p pisces-verify --release --features mutation --test
/// sicheck`): with a protocol step removed, the checker finds forbidden anomalies in the
/// engine's histories.
#[cfg(feature = "mutation")]
mod mutation_evidence {
    use super::*;
    use pisces::mutation::{MutationPoint, Scenario};
    use pisces::EngineId;

    /// The Pisces engine's mutation point `name`.
    fn point(name: &str) -> &'static MutationPoint {
        EngineId::Pisces
            .mutation(name)
            .expect("a point of the engine")
    }

    /// Forbidden anomalies in DRAM runs of both workloads with `m` active.
    fn dram_forbidden(m: Option<&'static MutationPoint>) -> usize {
        let sc = Scenario::setup();
        let label = m.map_or("none", |p| p.name);
        // SAFETY: a mutation test: the run exists to show the removed step matters, and its
        // outcome is read only as that evidence (see `pisces::mutation::Scenario::set`).
        unsafe { sc.set(m) };
        let mut f = 0;
        for write_skew in [false, true] {
            let cfg = WorkloadConfig {
                threads: 2,
                keys: 2,
                write_skew,
                pause: Duration::from_micros(20),
                seed: 5,
                ..WorkloadConfig::default()
            };
            let opts = EngineOptions::new().set("group_commit", 1);
            let pool = dram_pool_with(cfg.threads, opts);
            let wl = Workload::new(cfg).unwrap();
            wl.setup(&pool).unwrap();
            let h = match wl.run(&pool, 0, 2000, &|| false) {
                Ok(h) => h,
                // A mutated engine may corrupt the workload's objects outright: that
                // is detection too (without a mutation it is a failure).
                Err(e) if m.is_some() => {
                    eprintln!("{label}, write skew {write_skew}: the run failed: {e}");
                    f += 1;
                    continue;
                }
                Err(e) => panic!("the run failed without a mutation: {e}"),
            };
            let r = check(&h);
            eprintln!(
                "{label}, write skew {write_skew}: {} {:?}",
                r.summary_line(Isolation::Snapshot),
                r.found()
            );
            f += r.forbidden(Isolation::Snapshot);
        }
        f
    }

    /// Forbidden anomalies in crash-spanning runs with `m` active.
    fn crash_forbidden(m: Option<&'static MutationPoint>) -> usize {
        let sc = Scenario::setup();
        let label = m.map_or("none", |p| p.name);
        // SAFETY: a mutation test: the run exists to show the removed step matters, and its
        // outcome is read only as that evidence (see `pisces::mutation::Scenario::set`).
        unsafe { sc.set(m) };
        let txns = 120;
        let (start, end) = fence_span(txns);
        let mut f = 0;
        for i in 0..8u64 {
            let fence = start + (end - start) * (2 * i + 1) / 16;
            let r = match try_crash_and_continue(fence, i + 1, txns) {
                Ok(run) => run.report,
                // As in `dram_forbidden`: an error is detection only under a mutation.
                Err(e) if m.is_some() => {
                    eprintln!("{label}, crash at fence {fence}: the runs after it failed: {e}");
                    f += 1;
                    continue;
                }
                Err(e) => panic!("crash at fence {fence} without a mutation: {e}"),
            };
            if r.forbidden(Isolation::Snapshot) > 0 {
                eprintln!("{label}, crash at fence {fence}: {:?}", r.found());
            }
            f += r.forbidden(Isolation::Snapshot);
        }
        eprintln!("{label}, crash runs: {f} forbidden anomalies");
        f
    }

    #[test]
    fn grace_period_is_needed() {
        assert_eq!(dram_forbidden(None), 0);
        assert!(dram_forbidden(Some(point("grace-period"))) > 0);
    }

    #[test]
    fn log_flush_is_needed() {
        assert_eq!(crash_forbidden(None), 0);
        assert!(crash_forbidden(Some(point("log-flush"))) > 0);
    }
}

/// A killed process's transaction in flight (indeterminate) that its recovery undid:
/// another transaction went on from the same list. Judged as committed it forms a lost
/// update and an incompatible order with its own read; decided from the others' reads
/// (nobody read its append) it is an aborted attempt, and the history is clean. One
/// whose append somebody read becomes committed, and then its append must be there
/// for every later reader.
#[test]
fn indeterminate_transactions_are_decided_by_what_the_others_read() {
    let txns = [
        Txn::committed(0).a(1, 1),
        Txn::indeterminate(1).r(1, &[1]).a(1, 2).r(1, &[1, 2]),
        Txn::committed(2).r(1, &[1]).a(1, 3),
        Txn::indeterminate(3).a(2, 4),
        Txn::committed(0).r(1, &[1, 3]).r(2, &[4]),
    ];
    let mut h = history(txns.clone());
    expect_only(&h, &[Anomaly::IncompatibleOrder, Anomaly::LostUpdate]);
    assert_eq!(h.resolve_indeterminate_by_reads(), (1, 1));
    assert_eq!(h.txns[1].outcome, pisces_verify::sicheck::Outcome::Aborted);
    assert_eq!(
        h.txns[3].outcome,
        pisces_verify::sicheck::Outcome::Committed
    );
    expect_only(&h, &[]);
    // Read once and then missing: committed, so the later read without it is wrong.
    let mut h = history([
        Txn::indeterminate(1).a(1, 2),
        Txn::committed(2).r(1, &[2]).a(1, 3),
        Txn::committed(3).r(1, &[3]),
    ]);
    assert_eq!(h.resolve_indeterminate_by_reads(), (1, 0));
    assert!(!check(&h).found().is_empty(), "a read append that vanished");
}
