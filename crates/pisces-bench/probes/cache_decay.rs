//! How fast does a thread's cached working set go cold while the thread waits?
//!
//! The DRAM medium emulates NVM write latency by spinning at the fence, so a thread
//! that mixes updates and lookups pauses for microseconds between its lookups. This
//! program measures, without Pisces, what such a pause does to the next reads: it
//! chases 8 dependent pointers (one "lookup") through a working set, 4 lookups per
//! round, with a busy-wait of `spin` ns between rounds (plain loop or `spin_loop`
//! hint), and prints the median and 99th-percentile time of a lookup.
//!
//! `cargo run --release -p pisces-bench --example cache_decay [seconds]`
//!
//! Where a working set that reads at cache speed in a tight loop reads at DRAM speed
//! after a pause of a few microseconds, a thread's lookups slow down by the emulated
//! waits of its own updates: the rise of read-only latency with emulated NVM latency
//! in `pisces-bench`'s mixed `latency` sweep, and its absence for a dedicated reader
//! in `latency-split`. The README has the figures of the machine the benchmarks ran
//! on.

use std::time::{Duration, Instant};

fn lookups(lines: usize, spin_ns: u64, hint: bool, seconds: f64) -> (usize, u64, u64) {
    // A random cyclic permutation of `lines` 64-byte lines (xorshift, fixed seed).
    let mut order: Vec<usize> = (0..lines).collect();
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    for i in (1..lines).rev() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        order.swap(i, (x % (i as u64 + 1)) as usize);
    }
    let mut next = vec![[0u64; 8]; lines];
    for w in 0..lines {
        next[order[w]][0] = order[(w + 1) % lines] as u64;
    }
    let mut p = 0usize;
    let mut lat = Vec::new();
    let end = Instant::now() + Duration::from_secs_f64(seconds);
    while Instant::now() < end {
        if spin_ns > 0 {
            let until = Instant::now() + Duration::from_nanos(spin_ns);
            while Instant::now() < until {
                if hint {
                    std::hint::spin_loop();
                }
            }
        }
        for _ in 0..4 {
            let t = Instant::now();
            for _ in 0..8 {
                p = next[p][0] as usize;
            }
            lat.push(t.elapsed().as_nanos() as u64);
        }
    }
    std::hint::black_box(p);
    lat.sort_unstable();
    let q = |f: f64| lat[((lat.len() - 1) as f64 * f) as usize];
    (lat.len(), q(0.5), q(0.99))
}

fn main() {
    let seconds: f64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .filter(|s: &f64| s.is_finite() && *s > 0.0 && *s <= 60.0)
        .unwrap_or(1.0);
    println!(
        "working set  wait      hint   lookups  p50 ns  p99 ns   (8 dependent reads per lookup)"
    );
    for kib in [32usize, 512, 4096] {
        for spin in [0u64, 1000, 5000, 20_000] {
            for hint in [false, true] {
                if spin == 0 && hint {
                    continue;
                }
                let (n, p50, p99) = lookups(kib * 1024 / 64, spin, hint, seconds);
                println!(
                    "{:>7} KiB  {:>6} ns  {:<5}  {n:>7}  {p50:>6}  {p99:>6}",
                    kib,
                    spin,
                    if hint { "pause" } else { "none" }
                );
            }
        }
    }
}
