//! Write amplification of the `timestone` engine against its coalescing window: the
//! CLog size (`clog_mib`, which bounds the distinct dirty bytes a checkpoint takes) and
//! the OLog size (`olog_regions` of the pool's 4 MiB per-thread log regions; a full
//! OLog forces a checkpoint), on the `pisces-bench` workloads and with its definition
//! (bytes made durable, write-back at close included, / bytes the program changed).
//!
//! ```sh
//! cargo run --release -p pisces-bench --example ts_window -- 3 1
//! ```
//!
//! Arguments: runs per point (default 3), seconds per run (default 1), optionally a
//! workload name (`hash`, `hash1k`, `set1k`, `tpcc`) to run only that one and the
//! number of one configuration (1–4) to run only that one. Prints, per
//! configuration and workload, the median write amplification and the medians of the
//! bytes logged (OLog + CLog), written home and of allocator metadata per update
//! transaction, with the median number of checkpoints' worth of updates (the window)
//! left implicit: compare the rows.

use pisces::EngineOptions;
use pisces_bench::{measure, DataKind, Engine, EngineSpec, Placement, Sizes, Spec};

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let runs: usize = args.first().and_then(|s| s.parse().ok()).unwrap_or(3);
    let seconds: f64 = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(1.0);
    let only_workload = args.get(2).cloned();
    let only_config: Option<usize> = args.get(3).and_then(|s| s.parse().ok());
    let engine = Engine::parse("timestone").expect("timestone is in every build");
    let configs: [(&str, &[(&str, usize)]); 4] = [
        ("default (CLog 2 MiB, OLog 4 MiB)", &[]),
        (
            "CLog 16 MiB, OLog 8 MiB",
            &[("clog_mib", 16), ("olog_regions", 2)],
        ),
        (
            "CLog 32 MiB, OLog 16 MiB",
            &[("clog_mib", 32), ("olog_regions", 4)],
        ),
        (
            "CLog 63 MiB, OLog 32 MiB",
            &[("clog_mib", 63), ("olog_regions", 8)],
        ),
    ];
    // The bench's sizes, and a hash table of 1 000 pairs (a key set small enough for
    // a checkpoint window to see keys again).
    let small = Sizes {
        hash_pairs: 1000,
        hash_buckets: 1000,
        ..Sizes::QUICK
    };
    let workloads = [
        ("hash", DataKind::Hash, 2, Sizes::QUICK),
        ("hash", DataKind::Hash, 20, Sizes::QUICK),
        ("hash1k", DataKind::Hash, 20, small),
        ("set1k", DataKind::Set(1000), 20, Sizes::QUICK),
        ("tpcc", DataKind::Tpcc, 100, Sizes::QUICK),
    ];
    println!("runs {runs} x {seconds} s, 1 thread, emulated PM on DRAM (/dev/shm)");
    println!(
        "{:<34} {:<6} {:>4} {:>9} {:>9} {:>8} {:>8} {:>8} {:>9}",
        "configuration",
        "load",
        "upd%",
        "upd/s",
        "credit/u",
        "log/u",
        "home/u",
        "meta/u",
        "write amp"
    );
    for (n, (label, opts)) in configs.into_iter().enumerate() {
        if only_config.is_some_and(|c| c != n + 1) {
            continue;
        }
        let mut options = EngineOptions::new();
        for &(k, v) in opts {
            options = options.set(k, v);
        }
        for &(name, data, pct, sizes) in &workloads {
            if only_workload.as_deref().is_some_and(|w| w != name) {
                continue;
            }
            let spec = Spec {
                engine: EngineSpec::with_options(engine, "timestone".into(), options.clone()),
                workload: name.into(),
                data,
                threads: 1,
                update_pct: pct,
                dedicated_reader: false,
                waits_outside: false,
                nvm_latency_ns: 0,
                disk: None,
                deferred: false,
                processes: 1,
            };
            let mut m: [Vec<f64>; 6] = Default::default();
            for run in 0..runs {
                let o = match measure(
                    &spec,
                    &sizes,
                    seconds,
                    42 + run as u64,
                    &Placement::new(true),
                    &mut |_, _| {},
                ) {
                    Ok(o) => o,
                    Err(e) => {
                        eprintln!("{label} {name} {pct}%: {e}");
                        return;
                    }
                };
                let u = (o.upd.len() as f64).max(1.0);
                let c = o.counters;
                m[0].push(o.upd.len() as f64 / seconds);
                m[1].push(o.changed_bytes as f64 / u);
                m[2].push(c.bytes_logged as f64 / u);
                m[3].push(c.bytes_written_home as f64 / u);
                m[4].push(c.bytes_metadata as f64 / u);
                m[5].push(c.bytes_durable() as f64 / o.changed_bytes.max(1) as f64);
            }
            let [ups, credit, log, home, meta, wa] = m.map(median);
            println!(
                "{label:<34} {name:<6} {pct:>4} {ups:>9.0} {credit:>9.1} {log:>8.1} {home:>8.1} {meta:>8.1} {wa:>9.2}"
            );
        }
    }
}
