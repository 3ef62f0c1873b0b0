//! Simulated machines: making the initial image, running a workload until the power
//! fails, and recovering a crash image (crashing again during recovery on request).
//!
//! Every machine is a [`SimMedium`] booted from an image, so a run starts from exactly
//! the bytes a fresh process would find. A run crashes at the fence named by its
//! [`SimConfig`]; the threads stop when they notice. An operation is *acknowledged*
//! when its commit returned and the machine had still not crashed afterwards: its
//! commit's last fence ran before the crash, so it must survive. With deferred
//! durability the commit's return promises nothing of the kind: an operation is
//! acknowledged when a `wait_durable` of its thread that started after its commit
//! returned has itself returned, the machine still not crashed.

use super::workload::{Bounds, Shape, Workload};
use crate::sim::{Adversary, SimConfig, SimMedium};
use pisces::{Config, Durability, EngineId, EngineOptions, PersistenceDomain, Pool, TxOptions};
use std::sync::Arc;

/// Which engine, tuned how, on pools of which geometry.
#[derive(Clone, Debug)]
pub struct PoolSpec {
    /// The engine.
    pub engine: EngineId,
    /// Its options.
    pub options: EngineOptions,
    /// Pool size and log size.
    pub shape: Shape,
    /// Thread slots (at least the number of workload threads).
    pub slots: usize,
    /// The persistence domain of the simulated machines it runs on.
    pub domain: PersistenceDomain,
}

impl PoolSpec {
    /// A simulator configuration for this spec's machines (its persistence domain).
    pub fn sim(&self, cfg: SimConfig) -> SimConfig {
        cfg.with_domain(self.domain)
    }

    /// The pool configuration.
    pub fn config(&self) -> Config {
        Config::default()
            .size(self.shape.pool_size)
            .engine(self.engine)
            .max_threads(self.slots)
            .log_bytes_per_thread(self.shape.log_bytes)
            .engine_options(self.options.clone())
    }
}

/// Boot a simulated machine from `image`.
pub fn boot(image: Vec<u8>, cfg: SimConfig) -> Result<Arc<SimMedium>, String> {
    SimMedium::from_image(image, cfg)
        .map(Arc::new)
        .map_err(|e| format!("booting the simulator: {e}"))
}

/// A fresh pool with the workload's initial state, made on a machine that does not
/// crash, as the image a clean shutdown leaves.
pub fn initial_image(w: &dyn Workload, spec: &PoolSpec) -> Result<Vec<u8>, String> {
    let len = usize::try_from(spec.shape.pool_size).map_err(|_| "pool too large".to_string())?;
    let sim = Arc::new(
        SimMedium::new(len, spec.sim(SimConfig::default()))
            .map_err(|e| format!("simulator: {e}"))?,
    );
    let pool = Pool::create_on(sim.clone(), spec.config())
        .map_err(|e| format!("creating the pool: {e}"))?;
    w.setup(&pool)
        .map_err(|e| format!("{} setup failed: {e}", w.name()))?;
    drop(pool);
    Ok(sim.crash_image_now_with(0, Adversary::DurableOnly).image)
}

/// What a run on a crashing machine did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunOutcome {
    /// Per thread: acknowledged operations, and how many more may be present.
    pub bounds: Vec<Bounds>,
    /// Per thread: operations whose commit returned before the crash (the acknowledged
    /// ones and, with deferred durability, those not yet covered by a wait).
    pub committed: Vec<usize>,
    /// Fences the machine executed (before the crash, if it crashed).
    pub fences: u64,
    /// True if the power failed during the run.
    pub crashed: bool,
}

/// Open the pool on `sim` and run `ops` operations on each of `threads` threads (or
/// until the machine crashes). With `deferred` = 0 every operation commits with
/// [`Durability::OnReturn`]; otherwise with [`Durability::Deferred`], and each thread
/// calls [`ThreadHandle::wait_durable`](pisces::ThreadHandle::wait_durable) after every
/// `deferred` operations and after its last. `Err` when something fails on a machine
/// that has not crashed: that is a bug, never an effect of the crash.
pub fn run(
    w: &dyn Workload,
    spec: &PoolSpec,
    sim: &Arc<SimMedium>,
    threads: usize,
    ops: usize,
    deferred: usize,
) -> Result<RunOutcome, String> {
    let pool = match Pool::open_on(sim.clone(), spec.config()) {
        Ok(p) => p,
        Err(e) if sim.crashed() => {
            // The power failed while the pool was being opened; nothing ran.
            let _ = e;
            return Ok(RunOutcome {
                bounds: vec![Bounds::exact(0); threads],
                committed: vec![0; threads],
                fences: sim.fence_count(),
                crashed: true,
            });
        }
        Err(e) => return Err(format!("opening the pool: {e}")),
    };
    let opts = TxOptions::default().durability(if deferred == 0 {
        Durability::OnReturn
    } else {
        Durability::Deferred
    });
    let root = w.root(&pool).map_err(|e| format!("root: {e}"));
    let per_thread = root.and_then(|root| {
        // Per thread: (bounds, committed).
        let thread = |t: usize| -> Result<(Bounds, usize), String> {
            let mut h = pool
                .handle()
                .map_err(|e| format!("thread {t}: handle: {e}"))?;
            // Invariant: acked <= committed. Operations 0..acked are durable (their
            // commit returned, or a wait that followed it did, before the crash);
            // acked..committed may be lost, but only as a suffix: a thread's recovered
            // operations are a prefix of them.
            let (mut acked, mut committed, mut in_flight) = (0, 0, false);
            for i in 0..ops {
                if sim.crashed() {
                    break;
                }
                let r = w.op(&mut h, root, t, i, opts);
                if sim.crashed() {
                    // The commit did not finish before the power failed.
                    in_flight = true;
                    break;
                }
                r.map_err(|e| format!("thread {t}: operation {i} failed: {e}"))?;
                committed += 1;
                if deferred == 0 {
                    acked = committed;
                } else if committed % deferred == 0 || committed == ops {
                    let r = h.wait_durable();
                    if sim.crashed() {
                        // The wait's fences may not have run before the power failed,
                        // whether it returned an error or not: it acknowledges nothing.
                        break;
                    }
                    r.map_err(|e| {
                        format!("thread {t}: wait_durable after operation {i} failed: {e}")
                    })?;
                    acked = committed;
                }
            }
            let maybe = committed - acked + usize::from(in_flight);
            Ok((Bounds { acked, maybe }, committed))
        };
        if threads == 1 {
            Ok(vec![thread(0)?])
        } else {
            std::thread::scope(|s| {
                let hs: Vec<_> = (0..threads).map(|t| s.spawn(move || thread(t))).collect();
                hs.into_iter()
                    .map(|h| {
                        h.join().map_err(|p| {
                            format!("a workload thread panicked: {}", panic_text(&*p))
                        })?
                    })
                    .collect::<Result<Vec<_>, String>>()
            })
        }
    });
    drop(pool);
    let (bounds, committed) = per_thread?.into_iter().unzip();
    Ok(RunOutcome {
        bounds,
        committed,
        fences: sim.fence_count(),
        crashed: sim.crashed(),
    })
}

/// A crash during recovery: where, and how its image is chosen.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RecoveryCrash {
    /// Crash instead of this fence of the recovery (counted from the boot).
    pub fence: u64,
    /// Adversary seed of that crash (configuration seed; the image seed is 0).
    pub seed: u64,
    /// The adversary.
    pub adversary: Adversary,
}

/// Fences that opening (recovering) `image` executes, on a machine that does not crash.
pub fn recovery_fences(image: Vec<u8>, spec: &PoolSpec) -> Result<u64, String> {
    let sim = boot(image, spec.sim(SimConfig::default()))?;
    let pool =
        Pool::open_on(sim.clone(), spec.config()).map_err(|e| format!("recovery failed: {e}"))?;
    let n = sim.fence_count();
    discard(pool, &sim);
    Ok(n)
}

/// Close a pool whose durable state no longer matters, fast: the machine is crashed
/// first, so the close's write-backs and its flush of the whole pool (one cache line
/// at a time on the simulator) are no-ops.
pub fn discard(pool: Pool, sim: &SimMedium) {
    sim.crash_now();
    drop(pool);
}

/// Recover `image` as a fresh process would — first crashing during a recovery of it
/// and recovering the result, if `crash` says so — and return the recovered pool and
/// its machine (to [`discard`] the pool when done).
pub fn recover(
    image: Vec<u8>,
    spec: &PoolSpec,
    crash: Option<RecoveryCrash>,
) -> Result<(Pool, Arc<SimMedium>), String> {
    let image = match crash {
        Some(c) => {
            let sim = boot(
                image,
                spec.sim(
                    SimConfig::crash_at_fence(c.fence)
                        .with_seed(c.seed)
                        .with_adversary(c.adversary),
                ),
            )?;
            let opened = Pool::open_on(sim.clone(), spec.config());
            match (opened, sim.crashed()) {
                (Ok(p), true) => drop(p),
                (Err(_), true) => {}
                (Err(e), false) => return Err(format!("first recovery failed: {e}")),
                // Recovery needed fewer fences and completed; its result is the image.
                (Ok(p), false) => drop(p),
            }
            sim.crash_image_now(0)
        }
        None => image,
    };
    let sim = boot(image, spec.sim(SimConfig::default()))?;
    let pool =
        Pool::open_on(sim.clone(), spec.config()).map_err(|e| format!("recovery failed: {e}"))?;
    Ok((pool, sim))
}

/// The message of a panic payload.
pub fn panic_text(p: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "(no message)".to_string()
    }
}
