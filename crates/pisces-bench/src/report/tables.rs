//! The terminal tables of a bench run: engines side by side with Pisces' ratio to
//! each, every metric per configuration, the latency sweeps and the breakdown.

use crate::engines::{labels, Engine};
use crate::report::table::Table;
use crate::report::{median, Key, Results, Row, FILE_MEDIUM};
use crate::workloads::select::{C_SUFFIX, LATENCY_CONTROL};
use pisces::tools::shared_counts;
use std::fmt::Write as _;

pub(crate) fn mops(x: f64) -> String {
    if x.is_nan() {
        "-".into()
    } else {
        format!("{:.3}", x / 1e6)
    }
}

pub(crate) fn times(x: f64) -> String {
    if x.is_nan() {
        "-".into()
    } else {
        format!("{x:.2}x")
    }
}

fn ns(x: f64) -> String {
    fixed(x, 0)
}

/// `cols` if this build counts the writes to shared words, else nothing.
fn shared_columns<T>(cols: &[T]) -> &[T] {
    if shared_counts::ENABLED {
        cols
    } else {
        &[]
    }
}

fn fixed(x: f64, d: usize) -> String {
    if x.is_nan() {
        "-".into()
    } else {
        format!("{x:.d$}")
    }
}

fn pct(x: f64) -> String {
    if x.is_nan() {
        "-".into()
    } else {
        format!("{:.2}%", x * 100.0)
    }
}

/// Workloads shown as throughput comparisons of engines (everything but the two
/// sweeps, the breakdown, the marker ablation and the C interface's own table).
fn is_throughput_workload(w: &str) -> bool {
    !w.starts_with("latency") && w != "breakdown" && w != "markers" && w != "capi"
}

/// What the transactions of TPC-C, TATP and the sets are (after the table title).
fn workload_note(w: &str) -> &'static str {
    match w {
        "tpcc" => {
            " (TPC-C new-order, every transaction read-write, one warehouse per thread; \
             scaled down, see the data line at the top)"
        }
        "tatp" => {
            " (TATP's standard mix: 80 % read-only, 20 % read-write; ro/upd latencies in \
             the detail table are its read-only and read-write transactions)"
        }
        "hot" => " (every transaction reads 4 and updates 2 of 16 hot counters)",
        w if w.starts_with("set-") => {
            " (hash set: a read looks a member up, an update removes one and adds it back \
             in one transaction)"
        }
        "ycsb" => {
            " (YCSB-style: zipfian reads and overwrites of 64-byte records, 100K records; \
             update % 50 = A, 5 = B, 0 = C)"
        }
        "strmap" => {
            " (string-keyed map: zipfian reads and whole replacements of 16..=512-byte \
             values under 14-byte keys, 100K records)"
        }
        w if w.starts_with("tree-set-") => {
            " (B+-tree set of keys drawn from twice as many: a read looks a member up, an \
             update removes one and adds it back in one transaction)"
        }
        _ => "",
    }
}

/// Engines side by side (median Mops/s) with Pisces' ratio to each, per workload.
pub fn throughput_tables(res: &Results) -> String {
    let mut s = String::new();
    for w in res.workloads().iter().filter(|w| is_throughput_workload(w)) {
        let engines = res.engines(w);
        let pisces = Engine::PISCES.name();
        let has_pisces = engines.iter().any(|e| e == pisces);
        let others: Vec<&String> = engines.iter().filter(|e| *e != pisces).collect();
        // On a file system commits are counted in thousands per second at most: whole
        // transactions per second there, millions elsewhere.
        let on_disk = res
            .rows
            .iter()
            .any(|r| r.workload == *w && r.medium == FILE_MEDIUM);
        let (unit, rate): (&str, fn(f64) -> String) = if on_disk {
            ("tx/s", |x| fixed(x, 0))
        } else {
            ("Mops/s", mops)
        };
        let mut head = vec!["upd%".to_string(), "nvm ns".into(), "threads".into()];
        head.extend(engines.iter().map(|e| format!("{e} {unit}")));
        if has_pisces {
            head.extend(others.iter().map(|e| format!("{pisces}/{e}")));
        }
        let mut t = Table::new(head);
        for k in res.keys(w) {
            let mut row = vec![
                k.update_pct.to_string(),
                k.nvm_latency_ns.to_string(),
                k.threads.to_string(),
            ];
            row.extend(
                engines
                    .iter()
                    .map(|e| rate(res.median(w, &k, e, |r| r.ops_per_sec))),
            );
            if has_pisces {
                row.extend(others.iter().map(|e| times(res.ratio(w, &k, pisces, e))));
            }
            t.push(row);
        }
        let _ = writeln!(
            s,
            "{w}: committed transactions per second, median over runs; pisces/X is the \
             median of the per-run ratios{}",
            workload_note(w)
        );
        s += &t.render();
        if w == "tpcc" {
            let rates: Vec<f64> = res
                .rows
                .iter()
                .filter(|r| r.workload == "tpcc")
                .map(|r| r.user_abort_rate)
                .collect();
            let _ = writeln!(
                s,
                "tpcc: {} of the new-orders rolled back on the invalid item (median over \
                 measurements; TPC-C's 1 %), counted as completed transactions",
                pct(median(rates))
            );
        }
        s.push('\n');
    }
    s
}

/// The durable commits of a run on a file system (`--dir`): per engine and
/// configuration, durable commits per second, the commit latency, the device syncs
/// and the bytes sent to the device per commit. Empty when no row was measured there.
pub fn disk_table(res: &Results) -> String {
    let mut t = Table::new(
        [
            "workload",
            "engine",
            "upd%",
            "thr",
            "commits/s",
            "p50 us",
            "p99 us",
            "syncs/commit",
            "KiB/commit",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect(),
    );
    let mut stated: Vec<&'static str> = Vec::new();
    let mut uncounted: Vec<String> = Vec::new();
    for w in res.workloads() {
        for k in res.keys(&w) {
            for e in res.engines(&w) {
                // Read-only rows commit nothing durable (`medium_table` shows them).
                let on_disk = |r: &&Row| r.medium == FILE_MEDIUM && r.update_pct > 0;
                if !res.runs(&w, &k, &e).any(|r| on_disk(&r)) {
                    continue;
                }
                let m = |f: fn(&Row) -> f64| median(res.runs(&w, &k, &e).filter(on_disk).map(f));
                let peer = Engine::parse(&e).ok().and_then(|x| x.peer());
                let syncs = m(|r| r.syncs_per_write_tx);
                let syncs = match peer {
                    _ if !syncs.is_nan() => fixed(syncs, 2),
                    Some(p) => {
                        let (n, why) = p.stated_syncs();
                        if !stated.contains(&why) {
                            stated.push(why);
                        }
                        format!("{n} (stated)")
                    }
                    None => {
                        if !uncounted.contains(&e) {
                            uncounted.push(e.clone());
                        }
                        "n/c".into()
                    }
                };
                t.push(vec![
                    w.clone(),
                    e.clone(),
                    k.update_pct.to_string(),
                    k.threads.to_string(),
                    fixed(m(|r| r.write_tx_per_sec), 0),
                    fixed(m(|r| r.upd_p50_ns) / 1e3, 1),
                    fixed(m(|r| r.upd_p99_ns) / 1e3, 1),
                    syncs,
                    fixed(m(|r| r.device_bytes_per_write_tx) / 1024.0, 1),
                ]);
            }
        }
    }
    if t.is_empty() {
        return String::new();
    }
    let mut s = String::from(
        "Durable commits on the file system (--dir), per committed update transaction, \
         median over runs: commits/s = durable commits per second (all threads); p50/p99 = \
         commit latency (the update transaction, retries included); syncs/commit = msync \
         calls of the file medium (every thread of the process, background threads \
         included); KiB/commit = write_bytes of /proc/self/io (pages this process dirtied \
         in the page cache, each written once by the sync that follows, and its direct \
         I/O; the file system's journal is not included)\n",
    );
    s += &t.render();
    for why in stated {
        let _ = writeln!(s, "stated, not measured: {why}");
    }
    for e in uncounted {
        let _ = writeln!(
            s,
            "n/c: {e} syncs by itself (libpmemobj's own msync calls), out of the counters' \
             sight"
        );
    }
    s.push('\n');
    s
}

/// Every metric, median over runs, one row per engine and configuration.
pub fn detail_table(res: &Results) -> String {
    let mut t = Table::new(
        [
            "workload",
            "engine",
            "upd%",
            "nvm ns",
            "thr",
            "Mops/s",
            "abort",
            "ro p50",
            "ro p99",
            "upd p50",
            "upd p99",
            "lines/tx",
            "fences/tx",
            "write amp",
        ]
        .iter()
        .chain(shared_columns(&["shared w/tx", "shared lines/tx"]))
        .map(|s| s.to_string())
        .collect(),
    );
    for w in res.workloads() {
        for k in res.keys(&w) {
            for e in res.engines(&w) {
                if res.runs(&w, &k, &e).next().is_none() {
                    continue;
                }
                let m = |f: fn(&Row) -> f64| res.median(&w, &k, &e, f);
                t.push(
                    vec![
                        w.clone(),
                        e.clone(),
                        k.update_pct.to_string(),
                        k.nvm_latency_ns.to_string(),
                        k.threads.to_string(),
                        mops(m(|r| r.ops_per_sec)),
                        pct(m(|r| r.abort_rate)),
                        ns(m(|r| r.ro_p50_ns)),
                        ns(m(|r| r.ro_p99_ns)),
                        ns(m(|r| r.upd_p50_ns)),
                        ns(m(|r| r.upd_p99_ns)),
                        fixed(m(|r| r.flushes_per_tx), 2),
                        fixed(m(|r| r.fences_per_tx), 2),
                        fixed(m(|r| r.write_amp), 2),
                    ]
                    .into_iter()
                    .chain(
                        shared_columns(&[
                            fixed(m(|r| r.shared_rmw_per_tx), 2),
                            fixed(m(|r| r.shared_lines_per_tx), 2),
                        ])
                        .iter()
                        .cloned(),
                    )
                    .collect(),
                );
            }
        }
    }
    format!(
        "All metrics (median over runs; latencies in ns per transaction, retries included; \
         lines and fences per committed transaction; write amp = bytes made durable (logs, \
         write-back, allocator metadata, write-back at close) / bytes the program changed{})\n{}",
        if shared_counts::ENABLED {
            "; shared w/tx, shared lines/tx = stores and read-modify-writes to words several \
             threads write, and the distinct lines they hit, per committed transaction (this \
             build counts them on every engine's hot path: its times include the counting)"
        } else {
            ""
        },
        t.render()
    )
}

/// Read-only latency against the emulated NVM write latency.
pub fn latency_table(res: &Results) -> String {
    let mut s = String::new();
    for (w, what, zero_w) in [
        (
            "latency",
            "every thread mixing lookups and updates",
            "latency",
        ),
        (
            LATENCY_CONTROL,
            "the latency mix with each emulated NVM wait paid after the transaction, \
             outside it (the control: lookups spaced as in the sweep, nothing held \
             during the waits; p99/p99@0 against the sweep's 0 ns row)",
            "latency",
        ),
        (
            "latency-split",
            "thread 0 only looking up, the other threads only updating",
            "latency-split",
        ),
    ] {
        s += &latency_table_of(res, w, what, zero_w);
    }
    s
}

/// The latency table of workload `w`; the p99 ratio's 0 ns rows are `zero_w`'s.
fn latency_table_of(res: &Results, w: &str, what: &str, zero_w: &str) -> String {
    let keys = res.keys(w);
    if keys.is_empty() {
        return String::new();
    }
    let mut t = Table::new(
        [
            "engine",
            "thr",
            "upd%",
            "nvm ns",
            "ro p50",
            "ro p99",
            "p99/p99@0",
            "upd p50",
            "upd p99",
            "Mops/s",
            "locked/ro",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect(),
    );
    for e in res.engines(w) {
        for k in &keys {
            if res.runs(w, k, &e).next().is_none() {
                continue;
            }
            let zero = Key {
                nvm_latency_ns: 0,
                ..k.clone()
            };
            let m = |k: &Key, f: fn(&Row) -> f64| res.median(w, k, &e, f);
            let zero_p99 = res.median(zero_w, &zero, &e, |r| r.ro_p99_ns);
            t.push(vec![
                e.clone(),
                k.threads.to_string(),
                k.update_pct.to_string(),
                k.nvm_latency_ns.to_string(),
                ns(m(k, |r| r.ro_p50_ns)),
                ns(m(k, |r| r.ro_p99_ns)),
                times(m(k, |r| r.ro_p99_ns) / zero_p99),
                ns(m(k, |r| r.upd_p50_ns)),
                ns(m(k, |r| r.upd_p99_ns)),
                mops(m(k, |r| r.ops_per_sec)),
                format!("{:.4}", m(k, |r| r.ro_locked_reads_per_ro_tx)),
            ]);
        }
    }
    format!(
        "{w}: transaction latency (ns, median over runs) vs emulated NVM write latency \
         per flushed line; hash table, {what}; locked/ro: reads per read-only transaction \
         that met a writer's lock and took the copy path (counted by pisces only; \
         readers never wait)\n{}\n",
        t.render()
    )
}

/// The C interface against Rust: per engine and configuration, the hash-table
/// operations' throughput from Rust and through the C interface, and the time an
/// operation takes from C relative to Rust (the median of the per-run ratios of
/// throughputs, Rust / C).
pub fn capi_table(res: &Results) -> String {
    let w = "capi";
    let keys = res.keys(w);
    if keys.is_empty() {
        return String::new();
    }
    let mut t = Table::new(
        [
            "engine",
            "upd%",
            "nvm ns",
            "thr",
            "Rust Mops/s",
            "C Mops/s",
            "C time / Rust time",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect(),
    );
    for e in res.engines(w).iter().filter(|e| !e.ends_with(C_SUFFIX)) {
        let c = format!("{e}{C_SUFFIX}");
        for k in &keys {
            if res.runs(w, k, e).next().is_none() {
                continue;
            }
            t.push(vec![
                e.clone(),
                k.update_pct.to_string(),
                k.nvm_latency_ns.to_string(),
                k.threads.to_string(),
                mops(res.median(w, k, e, |r| r.ops_per_sec)),
                mops(res.median(w, k, &c, |r| r.ops_per_sec)),
                times(res.ratio(w, k, e, &c)),
            ]);
        }
    }
    format!(
        "capi: the hash table's operations (one transaction each) from Rust and from C \
         through the C interface (pisces_run, pisces_hmap_*), same engine, same run; \
         median over runs\n{}\n",
        t.render()
    )
}

/// Pisces' optimisations one by one.
pub fn breakdown_table(res: &Results) -> String {
    let w = "breakdown";
    let keys = res.keys(w);
    if keys.is_empty() {
        return String::new();
    }
    let engines = res.engines(w);
    let mut head = vec!["upd%".to_string(), "nvm ns".into(), "threads".into()];
    head.extend(engines.iter().map(|e| format!("{e} Mops/s")));
    head.extend(engines.windows(2).map(|p| format!("{}/{}", p[1], p[0])));
    head.extend(engines.iter().map(|e| format!("{e} lines/tx")));
    let mut t = Table::new(head);
    for k in &keys {
        let mut row = vec![
            k.update_pct.to_string(),
            k.nvm_latency_ns.to_string(),
            k.threads.to_string(),
        ];
        row.extend(
            engines
                .iter()
                .map(|e| mops(res.median(w, k, e, |r| r.ops_per_sec))),
        );
        row.extend(
            engines
                .windows(2)
                .map(|p| times(res.ratio(w, k, &p[1], &p[0]))),
        );
        row.extend(
            engines
                .iter()
                .map(|e| fixed(res.median(w, k, e, |r| r.flushes_per_tx), 2)),
        );
        t.push(row);
    }
    format!(
        "breakdown: Pisces on the hash table with flush whole (no flush-diff, no group \
         commit), flush-diff, and flush-diff + group commit of 8 (the default)\n{}\n",
        t.render()
    )
}

/// The marker ablation: SPHT's global marker against NV-HTM's sequential per-thread
/// markers, and their ratio (median over runs of the same-run ratio).
pub fn markers_table(res: &Results) -> String {
    let w = "markers";
    let keys = res.keys(w);
    if keys.is_empty() {
        return String::new();
    }
    let (spht, nvhtm) = (Engine::SPHT.name(), labels::SPHT_NVHTM);
    let mut t = Table::new(vec![
        "upd%".into(),
        "nvm ns".into(),
        "threads".into(),
        format!("{nvhtm} Mops/s"),
        format!("{spht} Mops/s"),
        format!("{spht}/{nvhtm}"),
        format!("{nvhtm} lines/tx"),
        format!("{spht} lines/tx"),
    ]);
    for k in &keys {
        t.push(vec![
            k.update_pct.to_string(),
            k.nvm_latency_ns.to_string(),
            k.threads.to_string(),
            mops(res.median(w, k, nvhtm, |r| r.ops_per_sec)),
            mops(res.median(w, k, spht, |r| r.ops_per_sec)),
            times(res.ratio(w, k, spht, nvhtm)),
            fixed(res.median(w, k, nvhtm, |r| r.flushes_per_tx), 2),
            fixed(res.median(w, k, spht, |r| r.flushes_per_tx), 2),
        ]);
    }
    format!(
        "markers: spht with SPHT's global durability marker (CAS + skipCAS) vs NV-HTM's \
         sequential per-thread commit markers (marker=nvhtm), hash table\n{}\n",
        t.render()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::test_row;

    #[test]
    fn throughput_tables_show_ratios() {
        let mut res = Results::default();
        for (e, run, ops) in [("pisces", 1, 100.0), ("undo", 1, 50.0)] {
            res.rows.push(test_row(e, "hash", 1, 2, run, ops));
        }
        let t = throughput_tables(&res);
        assert!(t.contains("pisces/undo") && t.contains("2.00x"), "{t}");
    }

    #[test]
    fn the_capi_table_pairs_each_engine_with_its_c_row() {
        let mut res = Results::default();
        for (e, run, ops) in [
            ("pisces", 1, 100.0),
            ("pisces-c", 1, 80.0),
            ("undo", 1, 50.0),
            ("undo-c", 1, 50.0),
        ] {
            res.rows.push(test_row(e, "capi", 1, 2, run, ops));
        }
        let t = capi_table(&res);
        assert!(t.contains("1.25x") && t.contains("1.00x"), "{t}");
        assert_eq!(
            t.lines().filter(|l| l.starts_with("undo")).count(),
            1,
            "{t}"
        );
        assert!(!t.contains("undo-c"), "{t}");
        // Not among the engine comparisons.
        assert!(!throughput_tables(&res).contains("capi"));
    }

    #[test]
    fn markers_table_shows_the_same_run_ratio() {
        let mut res = Results::default();
        for (run, a, b) in [(1, 2e6, 1e6), (2, 3e6, 1e6), (3, 1e6, 1e6)] {
            res.rows
                .push(test_row("spht-nvhtm", "markers", 2, 20, run, b));
            res.rows.push(test_row("spht", "markers", 2, 20, run, a));
        }
        let t = markers_table(&res);
        assert!(t.contains("spht/spht-nvhtm"), "{t}");
        // Ratios 2, 3, 1: median 2.
        assert!(t.contains("2.00x"), "{t}");
        assert!(throughput_tables(&res).is_empty());
    }
}
