//! Cost of the persistence primitives on each medium (a measurement, not a check).
//!
//! ```text
//! cargo test --release -p pisces persist_cost -- --ignored --nocapture
//! ```

use crate::sim::{SimConfig, SimMedium};
use pisces::medium::{Medium, MediumKind, CACHE_LINE};
use pisces::tools::create_file;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const RUNS: usize = 5;
/// Lines cycled through by the writes (256 KiB).
const LINES: usize = 4096;

fn store(m: &dyn Medium, off: usize, v: u64) {
    assert!(off + 8 <= m.len() && off & 7 == 0);
    // SAFETY: in bounds and aligned (asserted); atomic because the simulator reads the
    // image concurrently with stores in general (here there is one thread).
    unsafe { AtomicU64::from_ptr(m.base().add(off) as *mut u64) }.store(v, Ordering::Relaxed);
}

/// Median over `RUNS` runs of the mean time of one `store + persist(line)`, with `n`
/// operations per run.
fn median_persist_ns(m: &dyn Medium, n: usize) -> f64 {
    let mut runs: Vec<f64> = (0..RUNS)
        .map(|r| {
            let t = Instant::now();
            for i in 0..n {
                let off = ((i * 7 + r) % LINES) * CACHE_LINE;
                store(m, off, i as u64);
                m.persist(off, 8);
            }
            t.elapsed().as_nanos() as f64 / n as f64
        })
        .collect();
    runs.sort_by(f64::total_cmp);
    runs[RUNS / 2]
}

#[test]
#[ignore = "measurement; run with --release --ignored --nocapture"]
fn persist_cost_report() {
    const POOL: u64 = 4 << 20;
    let shm = tempfile::tempdir_in("/dev/shm").unwrap();
    let disk = tempfile::tempdir_in(std::env::temp_dir()).unwrap();
    println!(
        "persist() of one cache line (store 8 bytes + flush + fence), median of {RUNS} runs; \
         flush instruction: {}",
        pisces::tools::flush::instruction().name()
    );
    let cases: Vec<(&str, Arc<dyn Medium>, usize)> = vec![
        (
            "dram, latency 0 (/dev/shm)",
            create_file(&shm.path().join("a"), POOL, MediumKind::DRAM).unwrap(),
            1_000_000,
        ),
        (
            "dram, latency 300 ns (/dev/shm)",
            create_file(
                &shm.path().join("b"),
                POOL,
                MediumKind::Dram {
                    write_latency_ns: 300,
                    bandwidth_bytes_per_sec: 0,
                },
            )
            .unwrap(),
            200_000,
        ),
        (
            "file + msync (/tmp, disk)",
            create_file(&disk.path().join("c"), POOL, MediumKind::File).unwrap(),
            300,
        ),
        (
            "simulator",
            Arc::new(SimMedium::new(POOL as usize, SimConfig::default()).unwrap()),
            300_000,
        ),
    ];
    for (name, m, n) in &cases {
        let ns = median_persist_ns(&**m, *n);
        println!("  {name:<34} {ns:>12.0} ns");
    }

    // Crash-image throughput on a 4 MiB image with some dirty and unfenced lines.
    let s = SimMedium::new(4 << 20, SimConfig::default()).unwrap();
    let words = s.len() / 8;
    for i in 0..10_000usize {
        let off = (i * 7919 % words) * 8;
        store(&s, off, i as u64 + 1);
        if i % 2 == 0 {
            s.flush(off, 8);
        }
        if i % 10 == 0 {
            s.fence();
        }
    }
    s.crash_now();
    let mut per_sec: Vec<f64> = (0..RUNS)
        .map(|r| {
            let t = Instant::now();
            let mut n = 0u64;
            while t.elapsed() < Duration::from_millis(300) {
                let img = s.crash_image((r as u64) << 32 | n).unwrap();
                std::hint::black_box(&img);
                n += 1;
            }
            n as f64 / t.elapsed().as_secs_f64()
        })
        .collect();
    per_sec.sort_by(f64::total_cmp);
    let stats = s.crash_image_with(0, s.config().adversary).unwrap().stats;
    println!(
        "  crash images of a 4 MiB image: {:.0} per second (median of {RUNS}); \
         undecided words per image: {} flushed-unfenced, {} unflushed",
        per_sec[RUNS / 2],
        stats.words_flushed_unfenced_kept + stats.words_flushed_unfenced_dropped,
        stats.words_unflushed_kept + stats.words_unflushed_dropped
    );
}
