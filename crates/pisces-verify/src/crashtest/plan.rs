//! Campaign settings and the plan that names every crash state by an index.
//!
//! A campaign is a sequence of **rounds**; each round boots the workload's initial
//! image on a machine that crashes at one fence, runs the workload, and takes
//! [`Settings::images`] crash images of that crash (adversary image seeds `0..images`).
//! State `index` is image `index % images` of round `index / images`. Everything about
//! a state is a function of the settings, the seed and its index:
//! * the engine options: [`Settings::options`] are cycled, one per round (random mode)
//!   or each with every fence (exhaustive mode);
//! * the crash fence: in exhaustive mode round `r` is the `r`-th fence overall (all
//!   fences of the first option set, then of the next, ...); in random mode a fence
//!   drawn uniformly from those of a probe run of the same options;
//! * the simulator's adversary seed (from the seed and the round);
//! * whether to crash again during recovery (one state in
//!   [`Settings::recovery_crash_one_in`]) and at which fence of the recovery (drawn
//!   uniformly from the fences a clean recovery of that image executes).
//!
//! With one thread the runs are deterministic, so `(seed, index)` rebuilds exactly the
//! same state. With several threads the interleaving differs from run to run; a state is
//! then reproduced from its saved crash image and acknowledged counts.

use super::machine::{boot, initial_image, run, PoolSpec};
use super::rng::{below, mix};
use super::workload::{Workload, MAX_THREADS};
use crate::sim::{Adversary, SimConfig};
use pisces::{EngineId, EngineOptions, PersistenceDomain};

/// How crash points are chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Every fence of the run, for every option set.
    Exhaustive,
    /// Uniformly random fences until at least `states` states have been checked.
    Random {
        /// States to check.
        states: u64,
    },
}

/// Everything that defines a campaign (see the [module docs](self)).
#[derive(Clone, Debug)]
pub struct Settings {
    /// The engine under test.
    pub engine: EngineId,
    /// Engine option sets, cycled through.
    /// (Empty: the engine's own option sets, see `EngineId::option_sets`.)
    pub options: Vec<EngineOptions>,
    /// Workload threads (1..=[`MAX_THREADS`]).
    pub threads: usize,
    /// Operations per thread in one run.
    pub ops: usize,
    /// Durability of the operations. 0: each commits with
    /// [`Durability::OnReturn`](pisces::Durability::OnReturn) and is acknowledged when
    /// its commit returns. N > 0: each commits with
    /// [`Durability::Deferred`](pisces::Durability::Deferred), every thread waits for
    /// durability ([`ThreadHandle::wait_durable`](pisces::ThreadHandle::wait_durable))
    /// after every N of its operations and after its last, and an operation is
    /// acknowledged only when such a wait, started after its commit returned, has
    /// returned.
    pub deferred: usize,
    /// How crash points are chosen.
    pub mode: Mode,
    /// Crash images taken of each crash (different adversary choices).
    pub images: u64,
    /// The adversary deciding each undecided 8-byte word.
    pub adversary: Adversary,
    /// One state in this many also crashes during recovery (0: never).
    pub recovery_crash_one_in: u64,
    /// Operations run on the recovered pool (thread 0's next ones) before checking it
    /// again: the recovered pool must keep working, not only look right.
    pub continue_ops: usize,
    /// Names the campaign.
    pub seed: u64,
    /// Rounds run in parallel.
    pub jobs: usize,
    /// Violations kept in full (with their crash image), lowest indices first.
    pub keep: usize,
    /// The persistence domain of the simulated machines (eADR: visible stores
    /// survive, see [`crate::sim`]).
    pub domain: PersistenceDomain,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            engine: EngineId::Pisces,
            options: Vec::new(),
            threads: 1,
            ops: 20,
            deferred: 0,
            mode: Mode::Exhaustive,
            images: 2,
            adversary: Adversary::default(),
            recovery_crash_one_in: 5,
            continue_ops: 2,
            seed: 1,
            jobs: std::thread::available_parallelism().map_or(1, |n| n.get()),
            keep: 8,
            domain: PersistenceDomain::Adr,
        }
    }
}

impl Settings {
    /// `Err` naming the first setting that cannot work.
    pub fn validate(&self) -> Result<(), String> {
        if self.threads == 0 || self.threads > MAX_THREADS {
            return Err(format!(
                "threads must be 1..={MAX_THREADS}, not {}",
                self.threads
            ));
        }
        if self.ops == 0 {
            return Err("ops must be at least 1".into());
        }
        if self.images == 0 {
            return Err("images must be at least 1".into());
        }
        if self.jobs == 0 {
            return Err("jobs must be at least 1".into());
        }
        if let Adversary::Random {
            p_keep_flushed,
            p_keep_unflushed,
        } = self.adversary
        {
            if !(0.0..=1.0).contains(&p_keep_flushed) || !(0.0..=1.0).contains(&p_keep_unflushed) {
                return Err("adversary probabilities must be in [0, 1]".into());
            }
        }
        Ok(())
    }
}

/// Where round `r` crashes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RoundSpec {
    /// The round.
    pub round: u64,
    /// Index into [`Settings::options`].
    pub option: usize,
    /// Crash instead of this fence (counted from the boot of the initial image).
    pub fence: u64,
    /// Configuration seed of the simulator (adversary).
    pub sim_seed: u64,
}

const SALT_FENCE: u64 = 0xF3;
const SALT_RECOVERY: u64 = 0x2EC0;
const SALT_RECOVERY_FENCE: u64 = 0x2EC1;
const SALT_RECOVERY_SEED: u64 = 0x2EC2;

/// A campaign ready to run: initial images and probe runs done.
pub struct Plan<'w> {
    /// The workload.
    pub workload: &'w dyn Workload,
    /// The settings.
    pub settings: Settings,
    /// Pool spec per option set.
    pub specs: Vec<PoolSpec>,
    /// Initial image per option set.
    pub images: Vec<Vec<u8>>,
    /// Fences of a complete, crash-free run per option set.
    pub fences: Vec<u64>,
}

impl<'w> Plan<'w> {
    /// Make the initial images and probe the fence counts. `Err` if the settings are
    /// invalid or the workload fails on a machine that does not crash.
    pub fn new(workload: &'w dyn Workload, settings: &Settings) -> Result<Plan<'w>, String> {
        settings.validate()?;
        let shape = workload.shape(settings.threads, settings.ops);
        let mut plan = Plan {
            workload,
            settings: settings.clone(),
            specs: Vec::new(),
            images: Vec::new(),
            fences: Vec::new(),
        };
        let sets = if settings.options.is_empty() {
            settings.engine.option_sets()
        } else {
            settings.options.clone()
        };
        for options in sets {
            let spec = PoolSpec {
                engine: settings.engine,
                options,
                shape,
                slots: settings.threads.max(2),
                domain: settings.domain,
            };
            let image = initial_image(workload, &spec)?;
            let sim = boot(image.clone(), spec.sim(SimConfig::default()))?;
            let probe = run(
                workload,
                &spec,
                &sim,
                settings.threads,
                settings.ops,
                settings.deferred,
            )
            .map_err(|e| format!("crash-free run with options `{}`: {e}", spec.options))?;
            plan.specs.push(spec);
            plan.images.push(image);
            plan.fences.push(probe.fences);
        }
        Ok(plan)
    }

    /// Rounds of an exhaustive campaign (every fence of every option set).
    pub fn exhaustive_rounds(&self) -> u64 {
        self.fences.iter().sum()
    }

    /// States the campaign is expected to check.
    pub fn expected_states(&self) -> u64 {
        match self.settings.mode {
            Mode::Exhaustive => self.exhaustive_rounds() * self.settings.images,
            Mode::Random { states } => states,
        }
    }

    /// The crash point of round `r`.
    pub fn round(&self, r: u64) -> RoundSpec {
        let s = &self.settings;
        let (option, fence) = match s.mode {
            Mode::Exhaustive => {
                let mut rest = r;
                let mut option = 0;
                while option + 1 < self.fences.len() && rest >= self.fences[option] {
                    rest -= self.fences[option];
                    option += 1;
                }
                (option, rest)
            }
            Mode::Random { .. } => {
                let option = (r % self.fences.len() as u64) as usize;
                (option, below(s.seed ^ SALT_FENCE, r, self.fences[option]))
            }
        };
        RoundSpec {
            round: r,
            option,
            fence,
            sim_seed: mix(s.seed, r),
        }
    }

    /// Whether state `index` crashes again during a recovery that executes
    /// `recovery_fences` fences, and if so at which fence and with which seed.
    pub fn recovery_crash(&self, index: u64, recovery_fences: u64) -> Option<(u64, u64)> {
        let s = &self.settings;
        (self.wants_recovery_crash(index) && recovery_fences > 0).then(|| {
            (
                below(s.seed ^ SALT_RECOVERY_FENCE, index, recovery_fences),
                mix(s.seed ^ SALT_RECOVERY_SEED, index),
            )
        })
    }

    /// Whether state `index` is one that crashes during recovery.
    pub fn wants_recovery_crash(&self, index: u64) -> bool {
        let n = self.settings.recovery_crash_one_in;
        n > 0 && below(self.settings.seed ^ SALT_RECOVERY, index, n) == 0
    }
}
