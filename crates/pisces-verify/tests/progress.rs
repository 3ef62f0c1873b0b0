//! Progress: on every engine, a transaction that keeps conflicting with a writer
//! commits within a bounded number of attempts.

use pisces::medium::DramMedium;
use pisces::{Config, Pool};
use std::sync::Arc;

#[test]
fn a_long_update_of_a_hot_object_commits_on_every_engine() {
    for (engine, opts) in pisces_verify::testkit::all_engines() {
        let size = 16 << 20;
        let pool = Pool::create_on(
            Arc::new(DramMedium::anonymous(size, 0, 0).unwrap()),
            Config::default()
                .size(size as u64)
                .engine(engine)
                .max_threads(4)
                .log_bytes_per_thread(1 << 20)
                .engine_options(opts.clone()),
        )
        .unwrap();
        eprintln!("{engine} {opts}");
        pisces_verify::testkit::a_long_update_of_a_hot_object_commits_while_a_writer_runs(&pool);
    }
}
