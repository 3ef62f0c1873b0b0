//! Timing the transactions of a worker: the clock, and which transactions it times.
//!
//! A worker's loop ([`crate::measure`](mod@crate::measure)) runs one transaction per
//! iteration, and a one-lookup transaction takes a few tens of ns: timing every one
//! takes two clock reads per transaction, which would be a large part of its latency
//! and of the throughput. So:
//! * **The clock** is the time-stamp counter where it is invariant (x86_64 with
//!   `constant_tsc` and `nonstop_tsc` in `/proc/cpuinfo`: one rate in every power
//!   state, on every core), read by `rdtsc` after an `lfence` (a read waits for the
//!   instructions before it, so an interval covers the whole transaction): cheaper
//!   than `Instant` (a vDSO `clock_gettime`). Its rate is measured against `Instant`
//!   over the worker's whole loop, and the histograms are converted to ns with it at
//!   the end. Elsewhere the clock is `Instant`. A latency includes one clock read (the
//!   end's).
//! * **A sample** of the transactions is timed when they are short. After a timed
//!   transaction the worker skips a random number of them (uniform in
//!   `0 ..= 2 (s - 1)`, from a generator of its own), so one in `s` is timed on
//!   average and no periodic cost (a group-commit write-back every `n`-th commit) falls
//!   always or never on the timed ones. The stride `s`, a power of two from 1 to
//!   [`MAX_STRIDE`], is set every [`WINDOW`] transactions from their mean duration:
//!   about one timed transaction per 1 to 2 × [`TARGET_NS`] of work (the stride is
//!   rounded down), so a timed one's two clock reads and its histogram record (tens of
//!   ns) cost a few per cent of the time at most; while transactions take more than
//!   1 µs on average, all are timed. Throughput and the per-kind counts include
//!   every transaction; the latency percentiles are those of the sample.

use hdrhistogram::Histogram;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::sync::OnceLock;
#[cfg(test)]
use std::time::Duration;
use std::time::Instant;

/// Largest latency a histogram records (longer ones are clamped): 60 s.
pub const MAX_LATENCY_NS: u64 = 60_000_000_000;
/// The most transactions per timed one (on average).
pub const MAX_STRIDE: u32 = 128;
/// Work per timed transaction the stride aims at.
pub const TARGET_NS: u64 = 2_000;
/// Transactions between two choices of the stride.
pub const WINDOW: u32 = 4096;
/// Clock ticks per ns the tick histograms allow for (a TSC of up to 16 GHz).
const MAX_TICKS_PER_NS: u64 = 16;

/// A latency histogram in ns (1 ns to [`MAX_LATENCY_NS`], 3 significant digits).
pub fn histogram() -> Result<Histogram<u64>, String> {
    Histogram::new_with_bounds(1, MAX_LATENCY_NS, 3).map_err(|e| e.to_string())
}

fn tick_histogram() -> Result<Histogram<u64>, String> {
    Histogram::new_with_bounds(1, MAX_LATENCY_NS * MAX_TICKS_PER_NS, 3).map_err(|e| e.to_string())
}

/// Whether this machine's time-stamp counter is invariant (read once).
fn invariant_tsc() -> bool {
    static TSC: OnceLock<bool> = OnceLock::new();
    *TSC.get_or_init(|| {
        if !cfg!(target_arch = "x86_64") {
            return false;
        }
        let Ok(info) = std::fs::read_to_string("/proc/cpuinfo") else {
            return false;
        };
        info.lines()
            .find(|l| l.starts_with("flags"))
            .is_some_and(|l| {
                let has = |f: &str| l.split_whitespace().any(|w| w == f);
                has("constant_tsc") && has("nonstop_tsc")
            })
    })
}

/// The clock of the latencies (module docs).
#[derive(Clone, Copy)]
enum Clock {
    /// The invariant time-stamp counter, in ticks.
    Tsc,
    /// `Instant`, in ns since `base`.
    Os { base: Instant },
}

impl Clock {
    fn new() -> Clock {
        if invariant_tsc() {
            Clock::Tsc
        } else {
            Clock::Os {
                base: Instant::now(),
            }
        }
    }

    #[inline(always)]
    fn now(&self) -> u64 {
        match self {
            #[cfg(target_arch = "x86_64")]
            Clock::Tsc => {
                // SAFETY: `lfence` needs SSE2, part of the x86_64 baseline; `rdtsc` has
                // no preconditions (`Clock::Tsc` is only chosen where the counter is
                // invariant). The fence makes the read wait for the instructions before
                // it (the transaction that ends here).
                unsafe {
                    std::arch::x86_64::_mm_lfence();
                    std::arch::x86_64::_rdtsc()
                }
            }
            #[cfg(not(target_arch = "x86_64"))]
            Clock::Tsc => unreachable!("the TSC clock is only chosen on x86_64"),
            Clock::Os { base } => base.elapsed().as_nanos() as u64,
        }
    }
}

/// What a worker's timer measured, in ns.
pub struct Latencies {
    /// Latencies of the timed read-only transactions.
    pub ro: Histogram<u64>,
    /// Latencies of the timed updates.
    pub upd: Histogram<u64>,
}

/// One worker's timer: which transactions to time, their latencies in clock ticks.
pub struct OpTimer {
    clock: Clock,
    /// Transactions to run untimed before the next timed one.
    skip: u32,
    stride: u32,
    gaps: SmallRng,
    window_ops: u32,
    window_start: Instant,
    ro: Histogram<u64>,
    upd: Histogram<u64>,
    /// Clock and `Instant` when the loop started (the clock's rate).
    start: (u64, Instant),
}

impl OpTimer {
    /// A timer whose random gaps come from `seed`; it times the first transactions
    /// until the first window sets the stride.
    pub fn new(seed: u64) -> Result<OpTimer, String> {
        let clock = Clock::new();
        Ok(OpTimer {
            clock,
            skip: 0,
            stride: 1,
            gaps: SmallRng::seed_from_u64(seed ^ 0x0071_e5a3_9a95),
            window_ops: 0,
            window_start: Instant::now(),
            ro: tick_histogram()?,
            upd: tick_histogram()?,
            start: (clock.now(), Instant::now()),
        })
    }

    /// Mark the start of the loop (the clock's rate is measured from here).
    pub fn start(&mut self) {
        self.window_start = Instant::now();
        self.start = (self.clock.now(), self.window_start);
    }

    /// Whether the next transaction is timed.
    #[inline(always)]
    pub fn timed(&mut self) -> bool {
        if self.skip == 0 {
            return true;
        }
        self.skip -= 1;
        false
    }

    /// The clock now (a timed transaction's start and end).
    #[inline(always)]
    pub fn now(&self) -> u64 {
        self.clock.now()
    }

    /// Record a timed transaction from `start` (a [`OpTimer::now`]) to `end`.
    #[inline]
    pub fn record(&mut self, update: bool, start: u64, end: u64) {
        let ticks = end.saturating_sub(start).max(1);
        if update {
            self.upd.saturating_record(ticks);
        } else {
            self.ro.saturating_record(ticks);
        }
        if self.stride > 1 {
            self.skip = self.gaps.gen_range(0..=2 * (self.stride - 1));
        }
    }

    /// Count a transaction (timed or not): every [`WINDOW`] of them the stride is set.
    #[inline(always)]
    pub fn count(&mut self) {
        self.window_ops += 1;
        if self.window_ops == WINDOW {
            self.adapt();
        }
    }

    #[cold]
    #[inline(never)]
    fn adapt(&mut self) {
        let now = Instant::now();
        let mean_ns = (now - self.window_start).as_nanos() as u64 / u64::from(WINDOW);
        self.stride = stride_for(mean_ns);
        self.skip = self.skip.min(2 * (self.stride - 1));
        self.window_ops = 0;
        self.window_start = now;
    }

    /// The stride now (tests).
    #[cfg(test)]
    fn stride(&self) -> u32 {
        self.stride
    }

    /// The latencies in ns, converted at the clock's rate measured from
    /// [`OpTimer::start`] to now (the end of the loop).
    pub fn finish(self) -> Result<Latencies, String> {
        let (t0, i0) = self.start;
        let (ticks, ns) = (self.clock.now().saturating_sub(t0), i0.elapsed());
        let ns_per_tick = match self.clock {
            Clock::Tsc => ns.as_nanos() as f64 / ticks.max(1) as f64,
            Clock::Os { .. } => 1.0,
        };
        Ok(Latencies {
            ro: to_ns(&self.ro, ns_per_tick)?,
            upd: to_ns(&self.upd, ns_per_tick)?,
        })
    }
}

/// The stride for transactions of `mean_ns` on average (module docs).
fn stride_for(mean_ns: u64) -> u32 {
    let s = (TARGET_NS / mean_ns.max(1)).clamp(1, u64::from(MAX_STRIDE));
    // The largest power of two not above `s`.
    1 << (63 - s.leading_zeros())
}

/// A tick histogram in ns.
fn to_ns(ticks: &Histogram<u64>, ns_per_tick: f64) -> Result<Histogram<u64>, String> {
    let mut out = histogram()?;
    for v in ticks.iter_recorded() {
        let ns = (v.value_iterated_to() as f64 * ns_per_tick).round() as u64;
        out.saturating_record_n(ns.max(1), v.count_at_value());
    }
    Ok(out)
}

/// The median of `rounds` empty intervals on this clock (its own cost).
#[cfg(test)]
fn empty_interval_ns(rounds: usize) -> Duration {
    let mut t = OpTimer::new(1).unwrap();
    t.start();
    for _ in 0..rounds {
        let a = t.now();
        let b = t.now();
        t.record(false, a, b);
    }
    let l = t.finish().unwrap();
    Duration::from_nanos(l.ro.value_at_quantile(0.5))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stride_aims_at_one_timed_transaction_per_target() {
        assert_eq!(stride_for(0), MAX_STRIDE);
        assert_eq!(stride_for(15), MAX_STRIDE);
        assert_eq!(stride_for(20), 64);
        assert_eq!(stride_for(100), 16);
        assert_eq!(stride_for(999), 2);
        assert_eq!(stride_for(1000), 2);
        assert_eq!(stride_for(1001), 1);
        assert_eq!(stride_for(1_000_000), 1);
    }

    /// Short transactions: about one in `stride` is timed, and the gaps are not
    /// periodic (every residue of a period is timed about equally often).
    #[test]
    fn short_transactions_are_sampled_without_a_period() {
        let mut t = OpTimer::new(5).unwrap();
        t.start();
        t.stride = 16;
        let n = 160_000u32;
        let mut timed = 0u32;
        let mut by_residue = [0u32; 64];
        for i in 0..n {
            if t.timed() {
                timed += 1;
                by_residue[(i % 64) as usize] += 1;
                let a = t.now();
                t.record(false, a, a + 10);
            }
        }
        let want = n / 16;
        assert!(
            timed > want * 9 / 10 && timed < want * 11 / 10,
            "{timed} of {n}"
        );
        let (lo, hi) = (
            *by_residue.iter().min().unwrap(),
            *by_residue.iter().max().unwrap(),
        );
        assert!(lo > want / 64 / 2 && hi < want / 64 * 2, "{by_residue:?}");
    }

    /// Long transactions are all timed: the window sets the stride to 1.
    #[test]
    fn long_transactions_are_all_timed() {
        let mut t = OpTimer::new(5).unwrap();
        t.start();
        t.stride = 64;
        t.window_start = Instant::now() - Duration::from_micros(5) * WINDOW;
        t.window_ops = WINDOW - 1;
        t.count();
        assert_eq!(t.stride(), 1);
        assert!((0..1000).all(|_| t.timed()));
    }

    /// The latencies come out in ns: an interval of a sleep measures that sleep.
    #[test]
    fn latencies_are_converted_to_ns() {
        let mut t = OpTimer::new(1).unwrap();
        t.start();
        for _ in 0..3 {
            let a = t.now();
            std::thread::sleep(Duration::from_millis(20));
            let b = t.now();
            t.record(true, a, b);
        }
        let l = t.finish().unwrap();
        assert_eq!(l.upd.len(), 3);
        assert!(l.ro.is_empty());
        let ms = l.upd.min() as f64 / 1e6;
        assert!((19.0..200.0).contains(&ms), "{ms} ms");
        let clock = empty_interval_ns(10_000);
        assert!(clock < Duration::from_micros(5), "{clock:?}");
    }
}
