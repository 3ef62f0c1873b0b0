//! A fixed number of read-only one-lookup transactions on the `set` (or `tree-set`)
//! data set, on one thread, for cache-miss counts under valgrind's cache simulation
//! (load-independent, unlike the timed benchmark, and available where perf has no
//! hardware counters). `scripts/set-misses` runs it and prints misses per lookup.
//!
//! ```sh
//! cargo build --release -p pisces-bench --example set_lookups
//! target/release/examples/set_lookups pisces 100000 20000          # set, /dev/shm
//! target/release/examples/set_lookups bare 1000 20000 tree-set /tmp
//! ```
//!
//! Arguments: engine, keys, lookups, data set (`set`, the default, `tree-set`, or the
//! fixed-size `hash` and `btree` data sets, which ignore KEYS), directory of the pool
//! file (default `/dev/shm`). `UPDATE_PCT=20` in the environment makes that share of
//! the transactions updates (drawn from their own seeded generator), for instruction
//! profiles of the update path. The preload and the setup are the
//! same in two runs with different lookup counts (same seed), so the difference of
//! their totals divided by the difference of the counts is the cost of one lookup
//! transaction, with the caches as the preload and the earlier lookups left them.

use pisces::{Config, EngineId, MediumKind, Pool};
use pisces_bench::{DataKind, OpRng, Sizes};
use rand::{Rng, SeedableRng};
use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: set_lookups ENGINE KEYS LOOKUPS [set|tree-set|hash|btree] [DIR]";
    let (Some(engine), Some(keys), Some(lookups)) = (
        args.first().and_then(|n| EngineId::from_name(n)),
        args.get(1).and_then(|s| s.parse::<usize>().ok()),
        args.get(2).and_then(|s| s.parse::<u64>().ok()),
    ) else {
        eprintln!("{usage}");
        return ExitCode::from(2);
    };
    if !engine.available() || keys == 0 {
        eprintln!("{usage} (engine not in this build, or no keys)");
        return ExitCode::from(2);
    }
    let kind = match args.get(3).map(String::as_str) {
        None | Some("set") => DataKind::Set(keys),
        Some("tree-set") => DataKind::TreeSet(keys),
        Some("hash") => DataKind::Hash,
        Some("btree") => DataKind::Tree,
        Some(_) => {
            eprintln!("{usage}");
            return ExitCode::from(2);
        }
    };
    let update_pct: u32 = match std::env::var("UPDATE_PCT") {
        Err(_) => 0,
        Ok(v) => match v.parse() {
            Ok(p) if p <= 100 => p,
            _ => {
                eprintln!("UPDATE_PCT must be a percentage, not `{v}`");
                return ExitCode::from(2);
            }
        },
    };
    let dir = PathBuf::from(args.get(4).map_or("/dev/shm", String::as_str));
    let dir = match tempfile::tempdir_in(&dir) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("temporary directory in {}: {e}", dir.display());
            return ExitCode::from(1);
        }
    };
    let run = || -> pisces::Result<u64> {
        let pool = Pool::create(
            dir.path().join("lookups.pool"),
            Config::default()
                .size(kind.pool_bytes(&Sizes::QUICK, 1, 1.0))
                .medium(MediumKind::DRAM)
                .engine(engine)
                .max_threads(kind.thread_slots(1)),
        )?;
        let data = kind.build(&pool, &Sizes::QUICK, 1, 42)?;
        pool.sync()?;
        let mut h = pool.handle()?;
        let mut rng = OpRng::seed_from_u64(7);
        let mut pick = OpRng::seed_from_u64(11);
        for _ in 0..lookups {
            let update = update_pct > 0 && pick.gen_range(0..100) < update_pct;
            data.op(0, &mut h, &mut rng, update)?;
        }
        data.worker_done(0);
        Ok(lookups)
    };
    match run() {
        Ok(n) => {
            println!("{n} lookups, {kind:?}, {}", engine.name());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("set_lookups: {e}");
            ExitCode::from(1)
        }
    }
}
