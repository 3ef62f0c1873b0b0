//! Pinning worker threads to CPUs (`--pin`, the default but with `--dir`; `--no-pin`).
//!
//! Unpinned, a worker may migrate between cores, and its throughput then varies from
//! run to run with where the scheduler put it; pinned, each worker stays on one CPU. Worker `i` of a
//! measurement goes to the `i`-th CPU of the process's affinity mask, round-robin (with
//! more workers than CPUs, several share one). The mask is read once, from the main
//! thread, which is never pinned itself (it only preloads and watches the clock), so
//! the CPUs are those the process was allowed to run on (`taskset`, cgroup cpusets).
//! If the system refuses to pin a probe thread, the run goes unpinned and says why; a
//! worker that then fails to pin fails its measurement.

/// Where worker threads run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Placement {
    /// Worker `i` is pinned to `cpus[i % cpus.len()]`.
    Pinned {
        /// The CPUs of the process's affinity mask, ascending.
        cpus: Vec<usize>,
    },
    /// Workers run where the scheduler puts them.
    Unpinned {
        /// Why (`--no-pin`, `--dir`'s default, or the affinity mask could not be read).
        why: String,
    },
}

impl Placement {
    /// Pin round-robin over the CPUs the calling thread may run on (call it from the
    /// main thread), or do not pin if `pin` is false or the mask cannot be read.
    pub fn new(pin: bool) -> Placement {
        if !pin {
            return Placement::Unpinned {
                why: "--no-pin".into(),
            };
        }
        let cpus: Vec<usize> = match core_affinity::get_core_ids() {
            Some(ids) if !ids.is_empty() => ids.into_iter().map(|c| c.id).collect(),
            _ => {
                return Placement::Unpinned {
                    why: "the process's CPU affinity mask could not be read".into(),
                }
            }
        };
        // Where the system refuses to pin (some sandboxes), say so and run unpinned
        // rather than fail every measurement: probe once on a throwaway thread.
        let first = core_affinity::CoreId { id: cpus[0] };
        let probe = std::thread::spawn(move || core_affinity::set_for_current(first));
        if !probe.join().unwrap_or(false) {
            return Placement::Unpinned {
                why: format!("the system refused to pin a thread to CPU {}", cpus[0]),
            };
        }
        Placement::Pinned { cpus }
    }

    /// Workers run where the scheduler puts them, for the reason `why`.
    pub fn unpinned(why: &str) -> Placement {
        Placement::Unpinned { why: why.into() }
    }

    /// The CPU of worker `i`, if workers are pinned.
    pub fn cpu_of(&self, i: usize) -> Option<usize> {
        match self {
            Placement::Pinned { cpus } if !cpus.is_empty() => Some(cpus[i % cpus.len()]),
            _ => None,
        }
    }

    /// Pin the calling thread as worker `i` (nothing if unpinned).
    pub fn apply(&self, i: usize) -> Result<(), String> {
        match self.cpu_of(i) {
            Some(cpu) if !core_affinity::set_for_current(core_affinity::CoreId { id: cpu }) => {
                Err(format!("pinning worker {i} to CPU {cpu} failed"))
            }
            _ => Ok(()),
        }
    }

    /// True if workers are pinned.
    pub fn is_pinned(&self) -> bool {
        matches!(self, Placement::Pinned { .. })
    }

    /// One line for the report header.
    pub fn describe(&self) -> String {
        match self {
            Placement::Pinned { cpus } => format!(
                "worker threads pinned, worker i to CPU i mod {} of the process's affinity \
                 mask (CPUs {})",
                cpus.len(),
                cpus.iter()
                    .map(usize::to_string)
                    .collect::<Vec<_>>()
                    .join(",")
            ),
            Placement::Unpinned { why } => format!("worker threads not pinned ({why})"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workers_go_round_robin_over_the_mask() {
        let p = Placement::Pinned {
            cpus: vec![2, 5, 7],
        };
        let got: Vec<_> = (0..5).map(|i| p.cpu_of(i)).collect();
        assert_eq!(got, [Some(2), Some(5), Some(7), Some(2), Some(5)]);
        assert!(p.describe().contains("CPUs 2,5,7"));
        let u = Placement::new(false);
        assert!(!u.is_pinned() && u.cpu_of(0).is_none());
        assert!(u.describe().contains("not pinned (--no-pin)"));
        assert_eq!(u.apply(3), Ok(()));
    }

    /// Pinning really narrows a worker's mask to its CPU, and the mask read is the
    /// calling thread's (the test's thread is not pinned).
    #[test]
    fn a_pinned_worker_runs_on_its_cpu_only() {
        let p = Placement::new(true);
        let Placement::Pinned { cpus } = &p else {
            panic!("this machine's affinity mask cannot be read: {p:?}");
        };
        let mask = |v: Vec<core_affinity::CoreId>| v.into_iter().map(|c| c.id).collect::<Vec<_>>();
        for i in 0..cpus.len() + 1 {
            let p = p.clone();
            let seen = std::thread::spawn(move || {
                p.apply(i).unwrap();
                mask(core_affinity::get_core_ids().unwrap())
            })
            .join()
            .unwrap();
            assert_eq!(seen, [cpus[i % cpus.len()]], "worker {i}");
        }
        // The spawning thread keeps its whole mask.
        assert_eq!(mask(core_affinity::get_core_ids().unwrap()), *cpus);
        // A CPU outside the mask is refused with a reason.
        let bad = Placement::Pinned { cpus: vec![1000] };
        let e = std::thread::spawn(move || bad.apply(0))
            .join()
            .unwrap()
            .unwrap_err();
        assert!(e.contains("CPU 1000 "), "{e}");
    }
}
