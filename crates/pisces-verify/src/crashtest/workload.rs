//! The [`Workload`] trait: what a crash campaign runs and how it judges a recovered pool.
//!
//! A workload is a deterministic sequence of transactions per thread — operation `i` of
//! thread `t` is a pure function of `(t, i)` — plus an oracle that knows nothing of the
//! engine. After a crash, the oracle is told, per thread, how many operations were
//! *acknowledged* (known durable before the power failed) and how many after those are
//! in doubt ([`Bounds`]). With the default durability an operation is acknowledged when
//! its commit returned before the power failed, and at most one is in doubt, the one in
//! flight. With deferred durability ([`Settings::deferred`](super::Settings::deferred))
//! an operation is acknowledged only when a `wait_durable` of its thread, started after
//! its commit returned, has returned before the power failed; the operations committed
//! since are in doubt too. A thread's operations survive as a prefix, so the recovered
//! state must equal the state after exactly `c[t]` operations of each thread `t`, where
//! `c[t]` is the acknowledged count plus any number up to those in doubt: every
//! acknowledged transaction is present and none is present in part. Workloads also
//! check their structure's shape and that the allocator's persistent bitmaps hold
//! exactly the reachable objects (see [`oracle`](super::oracle)).
//!
//! Operations of different threads must commute in their effect on the checked state
//! (bank transfers add up; the other workloads give each thread its own keys or slots),
//! so that the expected state depends only on the per-thread counts and not on how the
//! threads interleaved.

use pisces::{Pool, Result, ThreadHandle, TxOptions};

/// Most threads a campaign runs; workloads size their per-thread roots for it.
pub const MAX_THREADS: usize = 8;

/// Per thread: what the recovered state may contain of its operations.
///
/// The recovered state holds a prefix of each thread's operations: the first `c`
/// of them for some `c` in `acked..=acked + maybe` ([`counts`](Self::counts)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bounds {
    /// Operations known to be durable before the crash: all must be present.
    pub acked: usize,
    /// Operations after those that may be present (as a prefix): one whose commit had
    /// started but not returned when the power failed, and, with deferred durability,
    /// those committed since the last acknowledged point.
    pub maybe: usize,
}

impl Bounds {
    /// Exactly `n` operations (no crash, or after a continuation).
    pub fn exact(n: usize) -> Bounds {
        Bounds { acked: n, maybe: 0 }
    }

    /// The possible operation counts, smallest first.
    pub fn counts(self) -> impl Iterator<Item = usize> {
        self.acked..=self.acked + self.maybe
    }
}

/// Per-thread counts as text: `3,5+,7+4` is thread 0 with 3 acknowledged operations,
/// thread 1 with 5 and one more that may be present (the one in flight), thread 2 with
/// 7 and four more that may be present.
pub fn format_bounds(bounds: &[Bounds]) -> String {
    bounds
        .iter()
        .map(|b| match b.maybe {
            0 => b.acked.to_string(),
            1 => format!("{}+", b.acked),
            m => format!("{}+{m}", b.acked),
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// Parse what [`format_bounds`] writes.
pub fn parse_bounds(s: &str) -> std::result::Result<Vec<Bounds>, String> {
    s.split(',')
        .map(|part| {
            let part = part.trim();
            let bad = || format!("`{part}` is not a count like 12, 12+ or 12+3");
            let (acked, maybe) = match part.split_once('+') {
                Some((a, "")) => (a, Ok(1)),
                Some((a, m)) => (a, m.parse::<usize>().map_err(|_| bad())),
                None => (part, Ok(0)),
            };
            let acked = acked.parse::<usize>().map_err(|_| bad())?;
            let maybe = maybe?;
            acked
                .checked_add(maybe)
                .ok_or_else(bad)
                .map(|_| Bounds { acked, maybe })
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

    /// Run operation `i` of thread `thread` as one transaction on `h`, with `opts` (the
    /// campaign chooses their durability).
    fn op(
        &self,
        h: &mut ThreadHandle,
        root: u64,
        thread: usize,
        i: usize,
        opts: TxOptions,
    ) -> Result<()>;

    /// Judge a recovered pool: `Ok(counts)` with the per-thread operation counts whose
    /// state it holds (each within its [`Bounds`]), or `Err(what is wrong)`.
    fn check(&self, pool: &Pool, bounds: &[Bounds]) -> std::result::Result<Vec<usize>, String>;
}

/// Every combination of per-thread counts allowed by `bounds`, the last thread's count
/// varying fastest. There are as many as the product of `maybe + 1` over the threads
/// (2^threads at most with one operation in flight each, far more with deferred
/// durability), so they are made one at a time: a caller that stops at the first match
/// does not pay for the rest.
pub fn candidates(bounds: &[Bounds]) -> impl Iterator<Item = Vec<usize>> + '_ {
    let mut next = Some(bounds.iter().map(|b| b.acked).collect::<Vec<_>>());
    std::iter::from_fn(move || {
        let current = next.take()?;
        // An odometer: advance the last count that can, resetting the ones after it.
        let mut n = current.clone();
        for t in (0..n.len()).rev() {
            if n[t] < bounds[t].acked + bounds[t].maybe {
                n[t] += 1;
                next = Some(n);
                break;
            }
            n[t] = bounds[t].acked;
        }
        Some(current)
    })
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
                    match b.maybe {
                        0 => String::new(),
                        m => format!(", up to {m} more"),
                    },
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

    fn b(acked: usize, maybe: usize) -> Bounds {
        Bounds { acked, maybe }
    }

    #[test]
    fn candidates_enumerate_every_combination() {
        let bounds = [b(3, 1), Bounds::exact(5), b(0, 1)];
        assert_eq!(
            candidates(&bounds).collect::<Vec<_>>(),
            vec![vec![3, 5, 0], vec![3, 5, 1], vec![4, 5, 0], vec![4, 5, 1]]
        );
        assert_eq!(
            candidates(&[]).collect::<Vec<_>>(),
            vec![Vec::<usize>::new()]
        );
        assert_eq!(
            candidates(&[b(2, 3), b(7, 0)]).collect::<Vec<_>>(),
            vec![vec![2, 7], vec![3, 7], vec![4, 7], vec![5, 7]]
        );
        let all: Vec<Vec<usize>> = candidates(&[b(1, 4), b(0, 2), b(9, 3)]).collect();
        assert_eq!(all.len(), 5 * 3 * 4);
        assert_eq!(all.first(), Some(&vec![1, 0, 9]));
        assert_eq!(all.last(), Some(&vec![5, 2, 12]));
        let distinct: std::collections::BTreeSet<_> = all.iter().collect();
        assert_eq!(distinct.len(), all.len());
        assert!(
            all.windows(2).all(|w| w[0] < w[1]),
            "in lexicographic order"
        );
    }

    #[test]
    fn counts_run_from_the_acknowledged_to_every_possible_one() {
        assert_eq!(Bounds::exact(4).counts().collect::<Vec<_>>(), [4]);
        assert_eq!(b(4, 1).counts().collect::<Vec<_>>(), [4, 5]);
        assert_eq!(b(0, 3).counts().collect::<Vec<_>>(), [0, 1, 2, 3]);
    }

    #[test]
    fn bounds_text_round_trips() {
        let bounds = vec![Bounds::exact(3), b(5, 1), b(7, 4), b(0, 12)];
        assert_eq!(format_bounds(&bounds), "3,5+,7+4,0+12");
        assert_eq!(parse_bounds("3, 5+,7+4 ,0+12"), Ok(bounds.clone()));
        assert_eq!(parse_bounds(&format_bounds(&bounds)), Ok(bounds));
        // One more may be written either way; none, too.
        assert_eq!(parse_bounds("5+1,5+0"), Ok(vec![b(5, 1), Bounds::exact(5)]));
        for bad in [
            "3,x",
            "",
            "-1",
            "+",
            "+2",
            "3++",
            "3+-1",
            "3+x",
            "3+2+",
            "1+18446744073709551615",
        ] {
            assert!(parse_bounds(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn match_threads_takes_the_first_match_and_explains_failures() {
        let bounds = [b(2, 1), Bounds::exact(1)];
        let ok = match_threads(&bounds, |t, c| {
            if t == 0 && c == 3 || t == 1 {
                Ok(())
            } else {
                Err("no".into())
            }
        });
        assert_eq!(ok, Ok(vec![3, 1]));
        let bad = match_threads(&bounds, |t, _| {
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
        // Deferred durability: any count of the prefix, the first that matches.
        let deferred = [b(2, 4)];
        assert_eq!(
            match_threads(&deferred, |_, c| if c >= 5 {
                Ok(())
            } else {
                Err("no".into())
            }),
            Ok(vec![5])
        );
        let e = match_threads(&deferred, |_, _| Err("no".into())).unwrap_err();
        assert!(
            e.contains("2 acknowledged, up to 4 more") && e.contains("after 6 ops: no"),
            "{e}"
        );
    }
}
