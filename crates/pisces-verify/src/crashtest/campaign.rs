//! Running a campaign: rounds in parallel, counting states and violations, and
//! reproducing one state.
//!
//! Rounds are independent (each boots its own simulated machine), so
//! [`Settings::jobs`](super::Settings) workers take rounds from a shared counter. The
//! report does not depend on the number of workers: violations are kept by lowest
//! index. In random mode, rounds whose run finished before its crash fence (possible
//! with several threads, whose fence counts vary) check no state; more rounds are run
//! until the requested number of states is reached.

use super::machine::panic_text;
use super::plan::{Mode, Plan, RoundSpec, Settings};
use super::state::{judge_state, run_round, RoundResult, StateResult};
use super::workload::{Bounds, Workload};
use crate::sim::SimConfig;
use pisces::EngineOptions;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// A state that failed its check (or a run that failed before its crash).
#[derive(Clone, Debug)]
pub struct Violation {
    /// The workload.
    pub workload: &'static str,
    /// The state's index; `None` for a failure outside any state (setup, a run).
    pub index: Option<u64>,
    /// Engine options of the state.
    pub options: Option<EngineOptions>,
    /// The crash point.
    pub round: Option<RoundSpec>,
    /// Fence of the recovery that crashed, if one did.
    pub recovery_crash: Option<u64>,
    /// Per-thread acknowledged counts (and how many more may be present) at the crash.
    pub bounds: Vec<Bounds>,
    /// What is wrong.
    pub message: String,
    /// The crash image (a pool file's bytes), for the first few violations.
    pub image: Option<Vec<u8>>,
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.workload)?;
        if let Some(i) = self.index {
            write!(f, " state {i}")?;
        }
        if let Some(r) = &self.round {
            write!(f, " (crash at fence {}", r.fence)?;
            if let Some(o) = self.options.as_ref().filter(|o| !o.is_empty()) {
                write!(f, ", options {o}")?;
            }
            if let Some(k) = self.recovery_crash {
                write!(f, ", crashed again at recovery fence {k}")?;
            }
            if !self.bounds.is_empty() {
                write!(
                    f,
                    ", acknowledged {}",
                    super::workload::format_bounds(&self.bounds)
                )?;
            }
            write!(f, ")")?;
        }
        write!(f, ": {}", self.message)
    }
}

/// The outcome of a campaign over one workload.
#[derive(Clone, Debug, Default)]
pub struct Report {
    /// The workload.
    pub workload: &'static str,
    /// Crash states recovered and checked.
    pub states: u64,
    /// Runs that crashed (each gives `images` states).
    pub crashes: u64,
    /// Runs that finished before their crash fence (no state).
    pub missed: u64,
    /// States that also crashed during recovery.
    pub recovery_crashes: u64,
    /// Violations found.
    pub violation_count: u64,
    /// The first violations (lowest index first), at most `Settings::keep`.
    pub violations: Vec<Violation>,
    /// Wall-clock time.
    pub elapsed: Duration,
}

impl Report {
    /// The report of a workload that failed before any crash was injected (its run on
    /// a machine that never crashes went wrong): one violation, no states.
    pub fn failed_before_any_crash(workload: &'static str, message: &str) -> Report {
        Report {
            workload,
            violation_count: 1,
            violations: vec![Violation {
                workload,
                index: None,
                options: None,
                round: None,
                recovery_crash: None,
                bounds: Vec::new(),
                message: format!("before any crash: {message}"),
                image: None,
            }],
            ..Report::default()
        }
    }

    /// States checked per second.
    pub fn states_per_second(&self) -> f64 {
        self.states as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

/// Progress as it happens: states just checked and violations among them.
pub type Progress<'a> = &'a (dyn Fn(u64, u64) + Sync);

struct Acc {
    report: Report,
    /// Kept violations by index (`u64::MAX - n` for those without an index).
    kept: BTreeMap<u64, Violation>,
    keep: usize,
    failures: u64,
}

impl Acc {
    fn keep(&mut self, key: u64, v: Violation) {
        self.report.violation_count += 1;
        self.kept.insert(key, v);
        if self.kept.len() > self.keep {
            self.kept.pop_last();
        }
    }

    fn add_state(&mut self, plan: &Plan<'_>, s: StateResult) {
        self.report.states += 1;
        self.report.recovery_crashes += u64::from(s.recovery_crash.is_some());
        if let Err(message) = s.verdict {
            self.keep(
                s.index,
                Violation {
                    workload: plan.workload.name(),
                    index: Some(s.index),
                    options: Some(plan.specs[s.round.option].options.clone()),
                    round: Some(s.round),
                    recovery_crash: s.recovery_crash,
                    bounds: s.bounds,
                    message,
                    image: s.image,
                },
            );
        }
    }

    fn add_failure(&mut self, plan: &Plan<'_>, message: String) {
        self.failures += 1;
        let key = u64::MAX - self.failures;
        self.keep(
            key,
            Violation {
                workload: plan.workload.name(),
                index: None,
                options: None,
                round: None,
                recovery_crash: None,
                bounds: Vec::new(),
                message,
                image: None,
            },
        );
    }
}

/// Run rounds `start..end` on `jobs` workers.
fn run_rounds(plan: &Plan<'_>, start: u64, end: u64, acc: &Mutex<Acc>, progress: Progress<'_>) {
    let next = AtomicU64::new(start);
    // Under a mutation scenario (`pisces crashtest --mutation`), the workers' pools are
    // the scenario's: a pool opened on a thread outside it would wait for it to end.
    #[cfg(feature = "mutation")]
    let scenario = pisces::mutation::current_scenario();
    let worker = || loop {
        #[cfg(feature = "mutation")]
        let _in_scenario = scenario.map(|s| s.enter());
        let r = next.fetch_add(1, Ordering::Relaxed);
        if r >= end {
            break;
        }
        let RoundResult {
            crashed,
            states,
            run_failure,
        } = run_round(plan, r);
        let bad = states.iter().filter(|s| s.verdict.is_err()).count() as u64
            + u64::from(run_failure.is_some());
        let n = states.len() as u64;
        {
            let mut a = acc.lock().unwrap_or_else(|e| e.into_inner());
            if crashed {
                a.report.crashes += 1;
            } else if run_failure.is_none() {
                a.report.missed += 1;
            }
            for s in states {
                a.add_state(plan, s);
            }
            if let Some(f) = run_failure {
                a.add_failure(plan, f);
            }
        }
        progress(n, bad);
    };
    let jobs = plan.settings.jobs.min((end - start) as usize).max(1);
    if jobs == 1 {
        worker();
    } else {
        std::thread::scope(|s| {
            for _ in 0..jobs {
                s.spawn(worker);
            }
        });
    }
}

/// Run a campaign of `plan` to the end.
pub fn run_plan(plan: &Plan<'_>, progress: Progress<'_>) -> Report {
    let t0 = Instant::now();
    let s = &plan.settings;
    let acc = Mutex::new(Acc {
        report: Report {
            workload: plan.workload.name(),
            ..Report::default()
        },
        kept: BTreeMap::new(),
        keep: s.keep,
        failures: 0,
    });
    match s.mode {
        Mode::Exhaustive => run_rounds(plan, 0, plan.exhaustive_rounds(), &acc, progress),
        Mode::Random { states } => {
            // A round misses when its run ends before the crash fence drawn for it
            // (runs with background threads vary in length), so a top-up can come back
            // empty by chance. Only several empty top-ups in a row mean the runs are
            // too short to crash in.
            const EMPTY_TOP_UPS_TO_GIVE_UP: u32 = 8;
            let mut next = 0;
            let mut empty_top_ups = 0;
            loop {
                let done = acc.lock().unwrap_or_else(|e| e.into_inner()).report.states;
                if done >= states {
                    break;
                }
                let rounds = (states - done).div_ceil(s.images);
                run_rounds(plan, next, next + rounds, &acc, progress);
                next += rounds;
                let after = acc.lock().unwrap_or_else(|e| e.into_inner()).report.states;
                if after == done {
                    empty_top_ups += 1;
                    if empty_top_ups >= EMPTY_TOP_UPS_TO_GIVE_UP {
                        break;
                    }
                } else {
                    empty_top_ups = 0;
                }
            }
        }
    }
    let mut a = acc.into_inner().unwrap_or_else(|e| e.into_inner());
    a.report.violations = a.kept.into_values().collect();
    a.report.elapsed = t0.elapsed();
    a.report
}

/// Prepare and run a campaign of `w`. A workload that fails on a machine that does
/// not crash (setup or the probe run) is reported as one violation.
pub fn run_campaign(w: &dyn Workload, settings: &Settings, progress: Progress<'_>) -> Report {
    let t0 = Instant::now();
    match Plan::new(w, settings) {
        Ok(plan) => run_plan(&plan, progress),
        Err(message) => {
            progress(0, 1);
            Report {
                elapsed: t0.elapsed(),
                ..Report::failed_before_any_crash(w.name(), &message)
            }
        }
    }
}

/// Reproduce state `index` of the campaign `plan`. With `saved` (its crash image and
/// acknowledged counts, as written when it failed) the recovery and check run on
/// exactly that image; without, the round is run again, which rebuilds the same image
/// when the workload has one thread. `Err` if the state does not exist, the saved
/// image does not fit, or the re-run fails before its crash.
pub fn reproduce(
    plan: &Plan<'_>,
    index: u64,
    saved: Option<(Vec<u8>, Vec<Bounds>)>,
) -> Result<StateResult, String> {
    let s = &plan.settings;
    let round = plan.round(index / s.images);
    if let Mode::Exhaustive = s.mode {
        if round.round >= plan.exhaustive_rounds() {
            return Err(format!(
                "state {index} does not exist: the campaign has {} states",
                plan.expected_states()
            ));
        }
    }
    let (image, bounds) = match saved {
        Some((image, bounds)) => {
            let want = plan.specs[round.option].shape.pool_size;
            if image.len() as u64 != want {
                return Err(format!(
                    "the image has {} bytes, but this workload's pools have {want}",
                    image.len()
                ));
            }
            if bounds.len() != s.threads {
                return Err(format!(
                    "{} acknowledged counts given for {} threads",
                    bounds.len(),
                    s.threads
                ));
            }
            (image, bounds)
        }
        None => {
            let rerun = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                let sim = super::machine::boot(
                    plan.images[round.option].clone(),
                    plan.specs[round.option].sim(
                        SimConfig::crash_at_fence(round.fence)
                            .with_seed(round.sim_seed)
                            .with_adversary(s.adversary),
                    ),
                )?;
                let out = super::machine::run(
                    plan.workload,
                    &plan.specs[round.option],
                    &sim,
                    s.threads,
                    s.ops,
                    s.deferred,
                )?;
                match sim.crash_image(index % s.images) {
                    Some(img) if out.crashed => Ok((img, out.bounds)),
                    _ => Err(format!(
                        "the run finished before fence {} this time (several threads do not repeat exactly); reproduce from the saved image",
                        round.fence
                    )),
                }
            }));
            match rerun {
                Ok(r) => r?,
                Err(p) => return Err(format!("the run panicked: {}", panic_text(&*p))),
            }
        }
    };
    Ok(judge_state(plan, round, index, image, &bounds))
}
