//! Recovery outside the harness, for profiles: make a crash image with full logs (the
//! `recovery` workload's fill for sp3, the `replay` workload's for spht), then time
//! `Pool::open` of fresh copies of it.
//!
//! ```sh
//! cargo build --release -p pisces-bench --example recovery_open
//! target/release/examples/recovery_open make /dev/shm/img.pool 256      # MiB of log
//! target/release/examples/recovery_open open /dev/shm/img.pool 3 1      # opens, threads
//! target/release/examples/recovery_open make /dev/shm/spht.pool 256 spht
//! target/release/examples/recovery_open open /dev/shm/spht.pool 3 1 spht replay=scan,dup_filter=on
//! # the `replay` workload's word fill: 8 logging threads, 1 write per transaction,
//! # a 1 MiB heap, 1,000,000 transactions (MIB is then ignored)
//! target/release/examples/recovery_open make /dev/shm/w.pool 0 spht 8 1 1 1000000
//! ```
//!
//! (`pisces-bench recovery-child PATH ENGINE THREADS OPTIONS` is the harness's own timed
//! open of one copy, in a fresh process.)
//!
//! `open` prints, per open, wall seconds, CPU seconds (user + system, from
//! `/proc/self/stat`) and minor page faults of the open alone; the copy is made before
//! the timer starts. `perf record -- ... open IMG 1 1` profiles one open (plus one
//! copy).

use pisces::{Config, EngineId, EngineOptions, MediumKind, Pool};
use pisces_bench::{crash_image_of, Engine, RecoveryWorkload, ReplayFill};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

/// (CPU seconds, minor faults) of the process so far, from `/proc/self/stat`
/// (CPU in ticks of 1/100 s).
fn usage() -> (f64, u64) {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<u64> = rest
        .split_whitespace()
        .map(|x| x.parse().unwrap_or(0))
        .collect();
    // After the command name: minflt is field 10, utime 14, stime 15.
    let at = |i: usize| f.get(i - 3).copied().unwrap_or(0);
    ((at(14) + at(15)) as f64 / 100.0, at(10))
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("recovery_open: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: &[String]) -> Result<(), String> {
    let usage_msg = "usage: recovery_open make IMAGE MIB [sp3|spht [THREADS WRITES HEAP_MIB \
                     TXNS]] | open IMAGE OPENS THREADS [sp3|spht] [OPTIONS]";
    let engine_at = |i: usize| -> Result<EngineId, String> {
        match args.get(i).map_or("sp3", String::as_str) {
            "sp3" => Ok(EngineId::Sp3),
            "spht" => Ok(EngineId::Spht),
            _ => Err(usage_msg.to_string()),
        }
    };
    match args.first().map(String::as_str) {
        Some("make") if (3..=4).contains(&args.len()) || args.len() == 8 => {
            let image = PathBuf::from(&args[1]);
            let mib: u64 = args[2].parse().map_err(|_| usage_msg.to_string())?;
            let dir = image.parent().unwrap_or(Path::new(".")).to_path_buf();
            // spht: the `replay` workload's fill (replayer held); sp3: `recovery`'s.
            let (workload, engine) = if engine_at(3)? == EngineId::Spht {
                (RecoveryWorkload::Replay, Engine::parse("spht")?)
            } else {
                (RecoveryWorkload::Recovery, Engine::parse("sp3")?)
            };
            let num = |i: usize| -> Result<u64, String> {
                args[i].parse().map_err(|_| usage_msg.to_string())
            };
            let fill = if args.len() == 8 {
                ReplayFill {
                    threads: num(4)? as usize,
                    writes: num(5)? as usize,
                    heap_mib: num(6)?,
                    txns: num(7)?,
                }
            } else {
                ReplayFill::default()
            };
            let (bytes, txns) =
                crash_image_of(workload, engine, mib.max(1) << 20, &fill, 7, &dir, &image)?;
            println!(
                "{}: {bytes} bytes of log, {txns} transactions",
                image.display()
            );
            Ok(())
        }
        Some("open") if (4..=6).contains(&args.len()) => {
            let engine = engine_at(4)?;
            let options: EngineOptions = match args.get(5) {
                Some(o) => o.parse().map_err(|e| format!("options: {e}"))?,
                None => EngineOptions::new(),
            };
            let image = PathBuf::from(&args[1]);
            let opens: usize = args[2].parse().map_err(|_| usage_msg.to_string())?;
            let threads: usize = args[3].parse().map_err(|_| usage_msg.to_string())?;
            let work = image.with_extension("work");
            for _ in 0..opens {
                std::fs::copy(&image, &work).map_err(|e| format!("copying: {e}"))?;
                let cfg = Config::default()
                    .medium(MediumKind::Dram {
                        write_latency_ns: 0,
                        bandwidth_bytes_per_sec: 0,
                    })
                    .engine(engine)
                    .recovery_threads(threads)
                    .engine_options(options.clone());
                let (t0, (c0, f0)) = (Instant::now(), usage());
                let pool = Pool::open(&work, cfg).map_err(|e| format!("recovery: {e}"))?;
                let wall = t0.elapsed().as_secs_f64();
                let (c1, f1) = usage();
                println!(
                    "open: {wall:.3} s wall, {:.3} s cpu, {} minor faults",
                    c1 - c0,
                    f1 - f0
                );
                drop(pool);
            }
            let _ = std::fs::remove_file(&work);
            Ok(())
        }
        _ => Err(usage_msg.into()),
    }
}
