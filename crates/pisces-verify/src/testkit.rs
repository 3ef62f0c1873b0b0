//! Pools and engine lists shared by the test suites (here and in the `pisces` crate):
//! a new engine of the registry joins every suite that iterates [`all_engines`].

use pisces::medium::DramMedium;
use pisces::{Config, EngineOptions, Pool};
use std::sync::Arc;

/// A small Pisces pool on anonymous DRAM.
pub fn mem_pool(size: u64, threads: usize, opts: EngineOptions) -> Pool {
    mem_pool_on(pisces::EngineId::Pisces, size, threads, opts)
}

/// A small pool of engine `engine` on anonymous DRAM.
pub fn mem_pool_on(
    engine: pisces::EngineId,
    size: u64,
    threads: usize,
    opts: EngineOptions,
) -> Pool {
    let m = DramMedium::anonymous(size as usize, 0, 0).unwrap();
    Pool::create_on(
        Arc::new(m),
        Config {
            size,
            engine: Some(engine),
            max_threads: threads,
            log_bytes_per_thread: 256 << 10,
            engine_options: opts,
            ..Config::default()
        },
    )
    .unwrap()
}

/// Every (engine, options) combination the behavioural tests run under: every engine
/// of the registry that runs on our pool format, with each of its option sets (its
/// ablation switches on and off). A new engine joins every suite that uses this without
/// a change here.
///
/// `PISCES_TEST_ENGINES` (engine names, comma-separated) narrows the list, for
/// stress-running one engine's share of a suite; unset, every engine runs.
pub fn all_engines() -> Vec<(pisces::EngineId, EngineOptions)> {
    let only: Option<Vec<String>> = std::env::var("PISCES_TEST_ENGINES")
        .ok()
        .map(|v| v.split(',').map(|s| s.trim().to_string()).collect());
    pisces::EngineId::ALL
        .iter()
        .filter(|e| e.available() && !e.has_own_pool_format())
        .filter(|e| {
            only.as_ref()
                .is_none_or(|o| o.iter().any(|n| n == e.name()))
        })
        .flat_map(|&e| e.option_sets().into_iter().map(move |o| (e, o)))
        .collect()
}

/// Pisces' option combinations (flush-diff on and off, group commit off and on).
pub fn all_options() -> Vec<EngineOptions> {
    pisces::EngineId::Pisces.option_sets()
}

/// Hermitage-style read skew under a write-back: a reader reads A, a writer then moves
/// 50 from A to B and commits, the reader reads B. Snapshot isolation requires the
/// reader to see A + B = 200. The writer's grace period must hold its write-back until
/// the reader ends; the reader waits for the writer's commit at most `patience`.
/// Returns (A + B as the reader saw it, how long the writer's commit call took).
pub fn read_skew_under_write_back(patience: std::time::Duration) -> (u64, std::time::Duration) {
    use pisces::PPtr;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Instant;
    let pool = mem_pool(8 << 20, 2, EngineOptions::new().set("group_commit", 1));
    let root: PPtr<[PPtr<u64>; 2]> = pool.root().unwrap();
    let [a, b] = pool
        .run(|tx| {
            let ab = [tx.alloc(100u64)?, tx.alloc(100u64)?];
            *tx.write(root)? = ab;
            Ok(ab)
        })
        .unwrap();
    let read_a = AtomicBool::new(false);
    let committed = AtomicBool::new(false);
    std::thread::scope(|s| {
        let writer = s.spawn(|| {
            let mut h = pool.handle().unwrap();
            while !read_a.load(Ordering::Acquire) {
                std::thread::yield_now();
            }
            let t = Instant::now();
            h.run(|tx| {
                *tx.write(a)? -= 50;
                *tx.write(b)? += 50;
                Ok(())
            })
            .unwrap();
            let took = t.elapsed();
            committed.store(true, Ordering::Release);
            took
        });
        let mut h = pool.handle().unwrap();
        let sum = h
            .run(|tx| {
                let va = *tx.read(a)?;
                read_a.store(true, Ordering::Release);
                let t = Instant::now();
                while !committed.load(Ordering::Acquire) && t.elapsed() < patience {
                    std::thread::yield_now();
                }
                Ok(va + *tx.read(b)?)
            })
            .unwrap();
        drop(h);
        (sum, writer.join().unwrap())
    })
}
