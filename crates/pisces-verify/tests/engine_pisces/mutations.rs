//! Mutation evidence of the Pisces engine: removing any one protocol step (each of the
//! engine's mutation points, `EngineId::Pisces.mutations()`: the grace period, the log
//! checksum, the recycle watermark, the lazy home sync, the log flush, the parser's skip of a line-aligned
//! record's gap) makes a test report violations, and with no step removed the same
//! tests report none. The points whose evidence lies elsewhere are named in
//! [`ELSEWHERE`].
//!
//! Needs the test-only `mutation` feature (the table runs in a
//! `pisces::mutation::Scenario`):
//! `cargo test -p pisces-verify --release --features mutation --test engine_pisces
//! mutations:: -- --nocapture`.
//! The `inCritical` wait cannot be observed reliably on real hardware (its window is a
//! few instructions); its evidence is the loom model in `engine/pisces/protocol.rs`,
//! which fails with this mutation (see `.ci/run`). Group commit's partial write-back
//! has its own evidence in `deferred_write_back`.

use crate::common::{self, crash::campaign, crash::cfg, crash::Workload};
use pisces::mutation::Scenario;
use pisces::{EngineId, EngineOptions, PPtr, Pool};
use pisces_verify::sim::{Adversary, SimConfig, SimMedium};
use std::sync::Arc;
use std::time::Duration;

/// Crash-state violations over short every-fence campaigns.
fn crash_violations() -> usize {
    let mut v = 0;
    for opts in common::all_options() {
        for w in [Workload::Bank, Workload::List] {
            v += campaign(w, opts.clone(), 1, 20, None, 2, Adversary::default()).violation_count;
        }
    }
    v
}

/// Read skew under a concurrent write-back, for an update transaction's reads and a
/// snapshot's (1 for each form in which it is seen).
fn grace_violations() -> usize {
    [false, true]
        .into_iter()
        .map(|snapshot| {
            let (sum, _) = common::read_skew_under_write_back(Duration::from_millis(200), snapshot);
            usize::from(sum != 200)
        })
        .sum()
}

/// Write `root[0]` from each of `writers` handles in turn (handle `k` writes `k`),
/// then rewrite `root[1]` from the last one 3,000 times, enough to recycle its log many
/// times; crash keeping only what was made durable and reopen. 1 if the open is refused
/// (a refused open counts too: with the log flush removed, the logs' newest-record word
/// proves records lost) or the root does not read `[writers, 2999]`.
fn log_cycle_violations(sim_cfg: SimConfig, opts: EngineOptions, writers: u64) -> usize {
    let sim = Arc::new(SimMedium::new(1 << 20, sim_cfg).unwrap());
    let pool = Pool::create_on(sim.clone(), cfg(opts.clone())).unwrap();
    let root: PPtr<[u64; 2]> = pool.root().unwrap();
    let mut handles: Vec<_> = (0..writers).map(|_| pool.handle().unwrap()).collect();
    for (k, h) in (1..).zip(handles.iter_mut()) {
        h.run(|tx| {
            tx.write(root)?[0] = k;
            Ok(())
        })
        .unwrap();
    }
    let last = handles.last_mut().expect("at least one writer");
    for i in 0..3000 {
        last.run(|tx| {
            tx.write(root)?[1] = i;
            Ok(())
        })
        .unwrap();
    }
    let image = sim.crash_image_now_with(0, Adversary::DurableOnly).image;
    drop((handles, pool));
    let sim = Arc::new(SimMedium::from_image(image, sim_cfg).unwrap());
    let Ok(pool) = Pool::open_on(sim, cfg(opts)) else {
        return 1;
    };
    // An error (the root lost with its block's allocation) is a violation too.
    let r = pool.run(|tx| Ok(*tx.read(root)?));
    usize::from(r.ok() != Some([writers, 2999]))
}

/// P-2: thread A logs X = 1 and goes idle; thread B writes X = 2, then enough other
/// updates to recycle that record. A clean image must recover X = 2: A's older record
/// must not be replayed over it.
fn watermark_violations() -> usize {
    let opts = EngineOptions::new().set("group_commit", 1);
    log_cycle_violations(SimConfig::default(), opts, 2)
}

/// Lazy home sync on the file medium's page cache: the first record is gone from the
/// log after the rewrites, so its home write must have been made durable (`msync`ed)
/// before the log dropped it.
fn home_sync_violations() -> usize {
    let sim_cfg = SimConfig {
        domain: pisces::PersistenceDomain::PageCache,
        ..SimConfig::default()
    };
    log_cycle_violations(sim_cfg, EngineOptions::new(), 1)
}

/// Where the evidence of the Pisces engine's points that this table does not run lies.
const ELSEWHERE: [(&str, &str); 7] = [
    (
        "in-critical-wait",
        "the loom model `loom_incritical_wait_is_needed` in `engine/pisces/protocol.rs`",
    ),
    (
        "deferred-write-back-ignores-readers",
        "the unit tests `engine::pisces::tests::deferred`",
    ),
    (
        "partial-write-back-clears-pending",
        "`deferred_write_back` in this binary",
    ),
    (
        "freed-stays-live",
        "the unit tests `engine::pisces::tests::live`",
    ),
    (
        "locked-check-trusts-any",
        "the unit tests `engine::pisces::tests::live`",
    ),
    (
        "unfenced-dependency",
        "`deferred_durability` in this binary",
    ),
    (
        "unfenced-write-back",
        "`deferred_durability` in this binary",
    ),
];

#[test]
fn each_protocol_step_is_needed() {
    // The table iterates the engine's mutation points: each is run here or named in
    // ELSEWHERE (a point added without evidence fails here).
    let points = EngineId::Pisces.mutations();
    for (name, _) in ELSEWHERE {
        assert!(
            points.iter().any(|p| p.name == name),
            "{name} is not a point of the engine"
        );
    }
    let mut rows = Vec::new();
    let run = std::iter::once(None).chain(
        points
            .iter()
            .filter(|p| !ELSEWHERE.iter().any(|(n, _)| *n == p.name))
            .map(|p| Some(*p)),
    );
    let sc = Scenario::setup();
    for m in run {
        // SAFETY: a mutation test: the run exists to show the removed step matters, and its
        // outcome is read only as that evidence (see `pisces::mutation::Scenario::set`).
        unsafe { sc.set(m) };
        let row = (
            m.map(|p| p.name),
            crash_violations(),
            grace_violations(),
            watermark_violations(),
            home_sync_violations(),
        );
        sc.clear();
        println!(
            "{:<20} crash-state violations {:>4}   read skew {}   stale replay {}   \
             unsynced home {}",
            row.0.unwrap_or("none"),
            row.1,
            row.2,
            row.3,
            row.4
        );
        rows.push(row);
    }
    for (m, crash, grace, wm, home) in rows {
        match m {
            None => assert_eq!(
                (crash, grace, wm, home),
                (0, 0, 0, 0),
                "violations without any mutation"
            ),
            Some("home-sync-skipped") => assert!(home > 0, "home sync removal not detected"),
            Some("grace-period") => assert!(grace > 0, "grace period removal not detected"),
            Some("checksum") => assert!(crash > 0, "checksum removal not detected"),
            Some("watermark") => assert!(wm > 0, "watermark removal not detected"),
            Some("log-flush") => assert!(crash > 0, "log flush removal not detected"),
            Some("log-line-skip") => {
                assert!(crash > 0, "parser not skipping the line gap not detected")
            }
            Some(other) => panic!("mutation point `{other}`: no detector in this table"),
        }
    }
}
