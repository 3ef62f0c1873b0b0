//! Progress: on every engine, a transaction that keeps conflicting with a writer
//! commits within a bounded number of attempts, and a long snapshot beside a writer
//! returns and sees one state.

use pisces::medium::DramMedium;
use pisces::{Config, EngineId, EngineOptions, Pool};
use std::sync::Arc;

/// A 16 MiB DRAM pool of `engine` with `opts`, for 4 threads.
fn dram_pool(engine: EngineId, opts: &EngineOptions) -> Pool {
    let size = 16 << 20;
    Pool::create_on(
        Arc::new(DramMedium::anonymous(size, 0, 0).unwrap()),
        Config::default()
            .size(size as u64)
            .engine(engine)
            .max_threads(4)
            .log_bytes_per_thread(1 << 20)
            .engine_options(opts.clone()),
    )
    .unwrap()
}

#[test]
fn a_long_update_of_a_hot_object_commits_on_every_engine() {
    for (engine, opts) in pisces_verify::testkit::all_engines() {
        eprintln!("{engine} {opts}");
        pisces_verify::testkit::a_long_update_of_a_hot_object_commits_while_a_writer_runs(
            &dram_pool(engine, &opts),
        );
    }
}

#[test]
fn long_snapshots_and_updates_see_one_state_beside_a_writer_on_every_engine() {
    for (engine, opts) in pisces_verify::testkit::all_engines() {
        eprintln!("{engine} {opts}");
        pisces_verify::testkit::long_transactions_commit_while_a_writer_runs(&dram_pool(
            engine, &opts,
        ));
    }
}
