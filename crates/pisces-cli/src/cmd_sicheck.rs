//! `pisces sicheck`: run list-append transactions on a fresh pool and check the
//! recorded history for isolation anomalies (see [`pisces_verify::sicheck`]).
//!
//! The pool lives on anonymous DRAM (nothing is written to disk). Threads run the
//! workload through the engine's public transaction API; the checker then sees only
//! the history. stdout gets what was run, how fast, the anomaly table with examples,
//! and as its last line exactly
//! `transactions: <N>, forbidden anomalies: <F>, write skew: <W>`.
//!
//! With `--processes N` (N > 1) the workload runs in N processes on one pool file in
//! `/dev/shm`, opened by each of them at once (see [`processes`]): their histories are
//! merged into one and checked as one, together with a read of every key after the last
//! process closed the pool.
//!
//! Exit status: 0 when F = 0 for the requested isolation level (under
//! `serializable`, write skew counts as forbidden), 1 when F > 0, 2 on usage errors and
//! on errors setting up or running the workload.

mod processes;
mod setup;

pub use setup::SicheckArgs;
use setup::{err, judge, out, pool_size, Settings, LOG_BYTES};

use pisces::tools::dram::DramMedium;
use pisces::{Config, Pool};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

/// Run `pisces sicheck`.
pub fn run(args: &SicheckArgs) -> ExitCode {
    let s = match Settings::of(args) {
        Ok(s) => s,
        Err(code) => return code,
    };
    if let (Some(p), Some(path)) = (args.worker, &args.worker_pool) {
        return processes::worker(args, &s, p, path);
    }
    if s.processes > 1 {
        return processes::run(args, &s);
    }
    let workload = match s.workload(args, 0) {
        Ok(w) => w,
        Err(code) => return code,
    };
    let size = pool_size(s.txns, s.threads, s.max_ops);
    let pool = match DramMedium::anonymous(size as usize, 0, 0).and_then(|m| {
        Pool::create_on(
            Arc::new(m),
            Config::default()
                .size(size)
                .engine(args.engine)
                .max_threads(s.threads + 1)
                .log_bytes_per_thread(LOG_BYTES)
                .engine_options(args.engine_options.clone()),
        )
    }) {
        Ok(p) => p,
        Err(e) => {
            err(&format!("pisces sicheck: cannot create the pool: {e}"));
            return ExitCode::from(2);
        }
    };
    out(&s.header(args, &format!("{} MiB of anonymous DRAM", size >> 20)));
    if let Err(e) = workload.setup(&pool) {
        err(&format!("pisces sicheck: cannot set up the pool: {e}"));
        return ExitCode::from(2);
    }
    let t0 = Instant::now();
    let history = match workload.run(&pool, 0, s.txns, &|| false) {
        Ok(h) => h,
        Err(e) => {
            err(&format!("pisces sicheck: the workload failed: {e}"));
            return ExitCode::from(2);
        }
    };
    let ran = t0.elapsed();
    drop(pool);
    judge(&history, ran, s.iso)
}

#[cfg(test)]
mod tests {
    use super::setup::IsolationArg;
    use super::*;
    use clap::Parser;
    use pisces::EngineId;

    #[derive(Parser, Debug)]
    struct Cli {
        #[command(flatten)]
        args: SicheckArgs,
    }

    fn parse(v: &[&str]) -> Result<SicheckArgs, clap::Error> {
        let mut all = vec!["sicheck"];
        all.extend_from_slice(v);
        Cli::try_parse_from(all).map(|c| c.args)
    }

    #[test]
    fn parses_defaults_and_rejects_bad_values() {
        let a = parse(&[]).unwrap();
        assert_eq!(a.txns, 10_000);
        assert_eq!(parse(&["--engine", "mvcc"]).unwrap().engine, EngineId::Mvcc);
        assert_eq!(a.threads, 2);
        assert_eq!(a.isolation, IsolationArg::Si);
        assert!(!a.write_skew);
        assert_eq!(a.processes, 1);
        assert_eq!(parse(&["--processes", "3"]).unwrap().processes, 3);
        let a = parse(&["--isolation", "serializable", "--write-skew", "--txns", "5"]).unwrap();
        assert_eq!(a.isolation, IsolationArg::Serializable);
        assert!(a.write_skew);
        for bad in [
            &["--txns", "0"][..],
            &["--txns", "2000000"],
            &["--threads", "0"],
            &["--keys", "0"],
            &["--engine", "nope"],
            &["--engine", "pmdk"],
            &["--isolation", "rc"],
            &["--txns", "-3"],
            &["--processes", "0"],
            &["--processes", "17"],
            &["--worker", "0"],
            &["--worker-pool", "/dev/shm/x"],
        ] {
            assert!(parse(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn exit_codes_follow_the_isolation_level() {
        let mut a = parse(&["--txns", "300", "--threads", "2", "--keys", "2"]).unwrap();
        assert_eq!(run(&a), ExitCode::SUCCESS);
        a.write_skew = true;
        a.pause_us = 50;
        assert_eq!(run(&a), ExitCode::SUCCESS, "write skew is allowed under SI");
        a.isolation = IsolationArg::Serializable;
        // Write skew needs overlapping transactions; with pauses it is near certain
        // within a few runs.
        let failed = (0..5).any(|seed| {
            a.seed = seed;
            run(&a) == ExitCode::from(1)
        });
        assert!(failed, "serializable must reject the write-skew history");
    }

    /// On an engine with per-transaction levels, `--isolation` sets the level the
    /// transactions run at: the write-skew workload passes under serializable and
    /// linearizable judging (it would fail if they still ran at snapshot, as the test
    /// above shows for an engine that only offers snapshot).
    #[test]
    fn isolation_is_asked_of_an_engine_that_offers_it() {
        let mut a = parse(&[
            "--engine",
            "timestone",
            "--write-skew",
            "--txns",
            "300",
            "--keys",
            "2",
            "--pause-us",
            "50",
        ])
        .unwrap();
        for level in [IsolationArg::Serializable, IsolationArg::Linearizable] {
            a.isolation = level;
            for seed in 0..3 {
                a.seed = seed;
                assert_eq!(run(&a), ExitCode::SUCCESS, "{level:?}, seed {seed}");
            }
        }
        assert_eq!(
            parse(&["--isolation", "linearizable"]).unwrap().isolation,
            IsolationArg::Linearizable
        );
    }
}
