//! One round of a campaign: crash a run, then recover and judge each of its images.
//!
//! Judging a crash image: recover it (for some states, first crash during a recovery
//! of it and recover the result), ask the workload's oracle which per-thread counts the
//! recovered state holds, then run [`Settings::continue_ops`](super::Settings) more
//! operations on the recovered pool and check again with exact counts — a recovered
//! pool must go on working (its volatile allocator state rebuilt right, its logs reset
//! right), not only look right. Panics anywhere are caught and reported as violations.

use super::machine::{boot, discard, panic_text, recover, recovery_fences, run, RecoveryCrash};
use super::plan::{Plan, RoundSpec};
use super::workload::Bounds;
use crate::sim::SimConfig;
use pisces::TxOptions;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// The verdict on one crash state.
#[derive(Clone, Debug)]
pub struct StateResult {
    /// The state's index.
    pub index: u64,
    /// Its round's crash point.
    pub round: RoundSpec,
    /// Per-thread acknowledged counts of the crashed run.
    pub bounds: Vec<Bounds>,
    /// Fence of the recovery at which the recovery crashed, if it did.
    pub recovery_crash: Option<u64>,
    /// `Err(what is wrong)` for a violation.
    pub verdict: Result<(), String>,
    /// The crash image (before any recovery); [`run_round`] keeps it for violations.
    pub image: Option<Vec<u8>>,
}

/// What one round produced.
#[derive(Debug, Default)]
pub struct RoundResult {
    /// True if the machine crashed (else the run needed fewer fences than planned).
    pub crashed: bool,
    /// One result per image (empty if the machine did not crash, or the run failed).
    pub states: Vec<StateResult>,
    /// A failure of the run itself (before the crash): a violation with no state.
    pub run_failure: Option<String>,
}

/// Run round `r`: crash, then judge every image of the crash.
pub fn run_round(plan: &Plan<'_>, r: u64) -> RoundResult {
    let spec = plan.round(r);
    let s = &plan.settings;
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        let sim = boot(
            plan.images[spec.option].clone(),
            plan.specs[spec.option].sim(
                SimConfig::crash_at_fence(spec.fence)
                    .with_seed(spec.sim_seed)
                    .with_adversary(s.adversary),
            ),
        )?;
        let out = run(
            plan.workload,
            &plan.specs[spec.option],
            &sim,
            s.threads,
            s.ops,
            s.deferred,
        )?;
        Ok::<_, String>(out.crashed.then_some((out.bounds, sim)))
    }));
    let (bounds, sim) = match outcome {
        Ok(Ok(Some(x))) => x,
        Ok(Ok(None)) => return RoundResult::default(),
        Ok(Err(e)) => {
            return RoundResult {
                crashed: false,
                states: Vec::new(),
                run_failure: Some(format!("round {r} ({spec:?}): {e}")),
            }
        }
        Err(p) => {
            return RoundResult {
                crashed: false,
                states: Vec::new(),
                run_failure: Some(format!(
                    "round {r} ({spec:?}): panicked: {}",
                    panic_text(&*p)
                )),
            }
        }
    };
    // Images are built one at a time (each is a copy of the pool) and rebuilt, which
    // is deterministic, only for the violations that keep them.
    let states = (0..s.images)
        .filter_map(|j| {
            let image = sim.crash_image(j)?;
            let mut st = judge_state(plan, spec, r * s.images + j, image, &bounds);
            if st.verdict.is_err() {
                st.image = sim.crash_image(j);
            }
            Some(st)
        })
        .collect();
    RoundResult {
        crashed: true,
        states,
        run_failure: None,
    }
}

/// Judge one crash image of round `spec` (state `index`) whose run acknowledged
/// `bounds`. The result carries no image.
pub fn judge_state(
    plan: &Plan<'_>,
    spec: RoundSpec,
    index: u64,
    image: Vec<u8>,
    bounds: &[Bounds],
) -> StateResult {
    let mut recovery_crash = None;
    let verdict = catch_unwind(AssertUnwindSafe(|| {
        let pspec = &plan.specs[spec.option];
        let crash = if plan.wants_recovery_crash(index) {
            let n = recovery_fences(image.clone(), pspec)?;
            plan.recovery_crash(index, n)
                .map(|(fence, seed)| RecoveryCrash {
                    fence,
                    seed,
                    adversary: plan.settings.adversary,
                })
        } else {
            None
        };
        recovery_crash = crash.map(|c| c.fence);
        let (pool, sim) = recover(image, pspec, crash)?;
        let w = plan.workload;
        let counts = w
            .check(&pool, bounds)
            .map_err(|e| format!("recovered state: {e}"))?;
        let more = plan.settings.continue_ops;
        if more > 0 {
            let root = w.root(&pool).map_err(|e| format!("root: {e}"))?;
            let mut h = pool
                .handle()
                .map_err(|e| format!("handle on the recovered pool: {e}"))?;
            for k in 0..more {
                w.op(&mut h, root, 0, counts[0] + k, TxOptions::default())
                    .map_err(|e| {
                        format!(
                            "operation {} on the recovered pool failed: {e}",
                            counts[0] + k
                        )
                    })?;
            }
            drop(h);
            let mut exact: Vec<Bounds> = counts.iter().map(|&c| Bounds::exact(c)).collect();
            exact[0].acked += more;
            w.check(&pool, &exact)
                .map_err(|e| format!("after {more} more operations on the recovered pool: {e}"))?;
        }
        discard(pool, &sim);
        Ok(())
    }))
    .unwrap_or_else(|p| Err(format!("panicked: {}", panic_text(&*p))));
    StateResult {
        index,
        round: spec,
        bounds: bounds.to_vec(),
        recovery_crash,
        image: None,
        verdict,
    }
}
