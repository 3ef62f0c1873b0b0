//! Helpers shared by the integration tests.
#![allow(dead_code)]

use pisces::medium::dram::DramMedium;
use pisces::{Config, EngineOptions, Pool};
use std::sync::Arc;

/// A small pool on anonymous DRAM.
pub fn mem_pool(size: u64, threads: usize, opts: EngineOptions) -> Pool {
    let m = DramMedium::anonymous(size as usize, 0, 0).unwrap();
    Pool::create_on(
        Arc::new(m),
        Config {
            size,
            max_threads: threads,
            log_bytes_per_thread: 256 << 10,
            engine_options: opts,
            ..Config::default()
        },
    )
    .unwrap()
}

/// Engine option combinations every behavioural test runs under.
pub fn all_options() -> Vec<EngineOptions> {
    let mut v = Vec::new();
    for flush_diff in [true, false] {
        for group_commit in [1, 8] {
            v.push(EngineOptions {
                flush_diff,
                group_commit,
            });
        }
    }
    v
}
