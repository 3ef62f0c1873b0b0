//! Every durable engine on the file medium's model of the page cache (`crate::sim`,
//! domain `page-cache`): only the `msync` a thread's fence makes of the pages it
//! flushed persists, and the kernel may write back any dirty page at any time, whole or
//! torn at 512-byte sectors. A short random campaign per engine and workload; a long
//! one is `pisces crashtest --domain page-cache --states N` (every durable engine in
//! turn).

use pisces::{EngineId, PersistenceDomain};
use pisces_verify::crashtest::{self, Mode, Settings};

/// The engines whose pool is on the medium and whose commits are durable.
fn engines() -> Vec<EngineId> {
    EngineId::ALL
        .iter()
        .copied()
        .filter(|e| e.available() && e.is_durable() && !e.has_own_pool_format())
        .collect()
}

#[test]
fn every_durable_engine_keeps_its_commits_in_the_page_cache() {
    let engines = engines();
    for name in ["pisces", "sp3", "spht", "timestone", "undo", "mvcc"] {
        assert!(
            engines.iter().any(|e| e.name() == name),
            "{name} is not among {engines:?}"
        );
    }
    for engine in engines {
        for w in crashtest::workloads() {
            let settings = Settings {
                engine,
                threads: 2,
                ops: 24,
                mode: Mode::Random { states: 32 },
                seed: 11,
                domain: PersistenceDomain::PageCache,
                ..Settings::default()
            };
            let r = crashtest::run_campaign(w.as_ref(), &settings, &|_, _| {});
            eprintln!(
                "{} {} page-cache: crash states: {} checked, {} violations",
                engine.name(),
                w.name(),
                r.states,
                r.violation_count
            );
            assert_eq!(
                r.violation_count,
                0,
                "{} {}: {:#?}",
                engine.name(),
                w.name(),
                r.violations
                    .iter()
                    .map(|v| v.to_string())
                    .collect::<Vec<_>>()
            );
            assert!(r.states >= 32, "only {} states", r.states);
        }
    }
}
