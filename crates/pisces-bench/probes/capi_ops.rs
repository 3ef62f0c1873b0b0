//! A fixed number of the `capi` workload's operations on one thread, from Rust or
//! through the C interface, for instruction counts under callgrind (load-independent,
//! unlike the timed benchmark):
//!
//! ```sh
//! cargo build --release -p pisces-bench --example capi_ops
//! for n in 20000 40000; do for v in rust c; do
//!   valgrind --tool=callgrind --callgrind-out-file=/tmp/cg.$v.$n \
//!     target/release/examples/capi_ops $v $n 20 pisces; done; done
//! ```
//!
//! Arguments: `rust` or `c`, operations, percentage of updates (default 20), engine
//! (default pisces). The difference of the totals of two runs with different counts,
//! divided by the difference of the counts, is the instructions per operation without
//! the preload.

use pisces::{Config, EngineId, MediumKind, Pool};
use pisces_bench::{CapiHashBench, DataSet, OpRng, Sizes};
use rand::{Rng, SeedableRng};
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: capi_ops rust|c OPS [UPDATE_PCT] [ENGINE]";
    let via_c = match args.first().map(String::as_str) {
        Some("rust") => false,
        Some("c") => true,
        _ => {
            eprintln!("{usage}");
            return ExitCode::from(2);
        }
    };
    let Some(ops) = args.get(1).and_then(|s| s.parse::<u64>().ok()) else {
        eprintln!("{usage}");
        return ExitCode::from(2);
    };
    let pct: u32 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(20);
    let engine = match args.get(3) {
        Some(n) => match EngineId::from_name(n) {
            Some(e) => e,
            None => {
                eprintln!("unknown engine {n}");
                return ExitCode::from(2);
            }
        },
        None => EngineId::Pisces,
    };
    let dir = match tempfile::tempdir_in("/dev/shm").or_else(|_| tempfile::tempdir()) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("temporary directory: {e}");
            return ExitCode::from(1);
        }
    };
    let run = || -> pisces::Result<u64> {
        let pool = Pool::create(
            dir.path().join("ops.pool"),
            Config::default()
                .size(256 << 20)
                .medium(MediumKind::DRAM)
                .engine(engine)
                .max_threads(3)
                .log_bytes_per_thread(4 << 20),
        )?;
        let data = CapiHashBench::build(&pool, &Sizes::QUICK, 1, 42, via_c)?;
        let mut h = pool.handle()?;
        let mut rng = OpRng::seed_from_u64(7);
        let mut changed = 0;
        for _ in 0..ops {
            let update = rng.gen_range(0..100) < pct;
            changed += data.op(0, &mut h, &mut rng, update)?;
        }
        data.worker_done(0);
        Ok(changed)
    };
    match run() {
        Ok(changed) => {
            println!(
                "{} ops ({}), {pct}% updates, {}: {changed} bytes changed",
                ops,
                if via_c { "C" } else { "Rust" },
                engine.name()
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("capi_ops: {e}");
            ExitCode::from(1)
        }
    }
}
