//! The [`Workload`] trait: what a crash campaign runs and how it judges a recovered pool.
//!
//! A workload is a deterministic sequence of transactions per thread — operation `i` of
//! thread `t` is a pure function of `(t, i)` — plus an oracle that knows nothing of the
//! engine. After a crash, the oracle is told, per thread, how many operations were
//! *acknowledged* (their commit returned before the power failed) and whether one more
//! was in flight ([`Bounds`]). The recovered state must equal the state after exactly
//! `c[t]` operations of each thread `t`, where `c[t]` is the acknowledged count or that
//! plus the in-flight one: every acknowledged transaction is present and none is
//! present in part. Workloads also check their structure's shape and that the
//! allocator's persistent bitmaps hold exactly the reachable objects (see
//! [`oracle`](super::oracle)).
//!
//! Operations of different threads must commute in their effect on the checked state
//! (bank transfers add up; the other workloads give each thread its own keys or slots),
//! so that the expected state depends only on the per-thread counts and not on how the
//! threads interleaved.

use pisces::{Pool, Result, ThreadHandle};

/// Most threads a campaign runs; workloads size their per-thread roots for it.
pub const MAX_THREADS: usize = 8;

/// Per thread: what the recovered state may contain of its operations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bounds {
    /// Operations whose commit returned before the crash: all must be present.
    pub acked: usize,
    /// True if one more operation (number `acked`) may have committed: its commit had
    /// started but not returned when the power failed.
    pub in_flight: bool,
}

impl Bounds {
    /// Exactly `n` operations (no crash, or after a continuation).
    pub fn exact(n: usize) -> Bounds {
        Bounds {
            acked: n,
            in_flight: false,
        }
    }

    /// The possible operation counts, smallest first.
    pub fn counts(self) -> impl Iterator<Item = usize> {
        self.acked..=self.acked + usize::from(self.in_flight)
    }
}

/// Per-thread counts as text: `3,5+` is thread 0 with 3 acknowledged operations and
/// thread 1 with 5 and one in flight.
pub fn format_bounds(bounds: &[Bounds]) -> String {
    bounds
        .iter()
        .map(|b| format!("{}{}", b.acked, if b.in_flight { "+" } else { "" }))
        .collect::<Vec<_>>()
        .join(",")
}

/// Parse what [`format_bounds`] writes.
pub fn parse_bounds(s: &str) -> std::result::Result<Vec<Bounds>, String> {
    s.split(',')
        .map(|part| {
            let part = part.trim();
            let (num, in_flight) = match part.strip_suffix('+') {
                Some(n) => (n, true),
                None => (part, false),
            };
            num.parse::<usize>()
                .map(|acked| Bounds { acked, in_flight })
                .map_err(|_| format!("`{part}` is not a count like 12 or 12+"))
        })
        .collect()
}

/// Pool geometry a workload needs (see [`Workload::shape`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shape {
    /// Pool size in bytes. Every crash image is a copy of the pool, so small is fast.
    pub pool_size: u64,
    /// Bytes of each thread's redo log; a transaction's record may use half of it.
    pub log_bytes: usize,
}

impl Default for Shape {
    /// 512 KiB with 16 KiB logs: room for the small workloads (five or more 64 KiB
    /// slabs with up to 8 thread slots), and cheap to copy — the simulator copies the
    /// pool at every boot, crash and crash image, which dominates a campaign's time.
    fn default() -> Self {
        Shape {
            pool_size: 512 << 10,
            log_bytes: 16 << 10,
        }
    }
}

/// A crash-test workload: setup, per-thread operations, and an engine-independent
/// oracle. Implementations must be deterministic: operation `i` of thread `t` must do
/// the same thing every time.
pub trait Workload: Send + Sync {
    /// Name on the command line (`bank`, `list`, ...).
    fn name(&self) -> &'static str;

    /// One line saying what the workload does and checks.
    fn describe(&self) -> &'static str;

    /// Pool geometry for runs of `ops` operations on each of `threads` threads.
    fn shape(&self, threads: usize, ops: usize) -> Shape {
        let _ = (threads, ops);
        Shape::default()
    }

    /// Build the initial state (runs once per campaign on a machine that does not
    /// crash; the resulting image is the start of every crash run).
    fn setup(&self, pool: &Pool) -> Result<()>;

    /// The payload offset of the workload's root object, looked up once per run and
    /// passed to [`op`](Self::op) (threads hold handles, so they cannot call
    /// [`Pool::root`] themselves without running out of thread slots).
    fn root(&self, pool: &Pool) -> Result<u64>;

    /// Run operation `i` of thread `thread` as one transaction on `h`.
    fn op(&self, h: &mut ThreadHandle, root: u64, thread: usize, i: usize) -> Result<()>;

    /// Judge a recovered pool: `Ok(counts)` with the per-thread operation counts whose
    /// state it holds (each within its [`Bounds`]), or `Err(what is wrong)`.
    fn check(&self, pool: &Pool, bounds: &[Bounds]) -> std::result::Result<Vec<usize>, String>;
}

/// Every combination of per-thread counts allowed by `bounds` (at most 2^threads).
pub fn candidates(bounds: &[Bounds]) -> Vec<Vec<usize>> {
    let mut out = vec![Vec::with_capacity(bounds.len())];
    for b in bounds {
        out = out
            .into_iter()
            .flat_map(|prefix| {
                b.counts().map(move |c| {
                    let mut v = prefix.clone();
                    v.push(c);
                    v
                })
            })
            .collect();
    }
    out
}

/// For workloads whose threads own disjoint parts of the state: `matches(t, c)` says
/// whether thread `t`'s part equals the state after its first `c` operations (or why
/// not). Returns the matching counts, or every thread's mismatch.
pub fn match_threads(
    bounds: &[Bounds],
    mut matches: impl FnMut(usize, usize) -> std::result::Result<(), String>,
) -> std::result::Result<Vec<usize>, String> {
    let mut counts = Vec::with_capacity(bounds.len());
    for (t, b) in bounds.iter().enumerate() {
        let mut why = Vec::new();
        let mut found = None;
        for c in b.counts() {
            match matches(t, c) {
                Ok(()) => {
                    found = Some(c);
                    break;
                }
                Err(e) => why.push(format!("after {c} ops: {e}")),
            }
        }
        match found {
            Some(c) => counts.push(c),
            None => {
                return Err(format!(
                    "thread {t} ({} acknowledged{}) matches no allowed state: {}",
                    b.acked,
                    if b.in_flight { ", one in flight" } else { "" },
                    why.join("; ")
                ))
            }
        }
    }
    Ok(counts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn candidates_enumerate_every_combination() {
        let b = [
            Bounds {
                acked: 3,
                in_flight: true,
            },
            Bounds::exact(5),
            Bounds {
                acked: 0,
                in_flight: true,
            },
        ];
        assert_eq!(
            candidates(&b),
            vec![vec![3, 5, 0], vec![3, 5, 1], vec![4, 5, 0], vec![4, 5, 1]]
        );
        assert_eq!(candidates(&[]), vec![Vec::<usize>::new()]);
    }

    #[test]
    fn bounds_text_round_trips() {
        let b = vec![
            Bounds::exact(3),
            Bounds {
                acked: 5,
                in_flight: true,
            },
        ];
        assert_eq!(format_bounds(&b), "3,5+");
        assert_eq!(parse_bounds("3, 5+"), Ok(b));
        assert!(parse_bounds("3,x").is_err());
        assert!(parse_bounds("").is_err());
        assert!(parse_bounds("-1").is_err());
    }

    #[test]
    fn match_threads_takes_the_first_match_and_explains_failures() {
        let b = [
            Bounds {
                acked: 2,
                in_flight: true,
            },
            Bounds::exact(1),
        ];
        let ok = match_threads(&b, |t, c| {
            if t == 0 && c == 3 || t == 1 {
                Ok(())
            } else {
                Err("no".into())
            }
        });
        assert_eq!(ok, Ok(vec![3, 1]));
        let bad = match_threads(&b, |t, _| {
            if t == 0 {
                Ok(())
            } else {
                Err("differs".into())
            }
        });
        let e = bad.unwrap_err();
        assert!(
            e.contains("thread 1") && e.contains("after 1 ops: differs"),
            "{e}"
        );
    }
}
