//! The table of a run with several processes (`--processes`): per engine configuration
//! and measured configuration, the throughput of N worker processes (rows labelled
//! `<engine>@<N>proc`) over the throughput of as many worker threads in one process
//! (the row labelled `<engine>` at the same total thread count; the median of the
//! per-run ratios), with the goal the project states for it: 2 processes at least
//! 0.9x 2 threads of one process, on the hash table at 20 % updates and on read-only
//! lookups.

use crate::measure::processes::split_label;
use crate::report::table::Table;
use crate::report::tables::{mops, times};
use crate::report::Results;

/// The ratio the project aims at for 2 processes over 2 threads of one process.
pub const GOAL: f64 = 0.9;

/// The processes / threads table, or nothing when no row was measured with several
/// processes beside its one-process row.
pub fn processes_table(res: &Results) -> String {
    let mut t = Table::new(
        [
            "workload",
            "engine",
            "upd %",
            "nvm ns",
            "threads",
            "processes x threads",
            "1 process Mops/s",
            "N processes Mops/s",
            "processes/threads",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect(),
    );
    let mut any = false;
    for w in res.workloads() {
        let engines = res.engines(&w);
        for multi in &engines {
            let Some((base, n)) = split_label(multi) else {
                continue;
            };
            if !engines.iter().any(|e| e == base) {
                continue;
            }
            for k in res.keys(&w) {
                let m = |e: &str| res.median(&w, &k, e, |r| r.ops_per_sec);
                let (one, many) = (m(base), m(multi));
                if one.is_nan() || many.is_nan() {
                    continue;
                }
                any = true;
                t.push(vec![
                    w.clone(),
                    base.to_string(),
                    k.update_pct.to_string(),
                    k.nvm_latency_ns.to_string(),
                    k.threads.to_string(),
                    format!("{n} x {}", k.threads / n),
                    mops(one),
                    mops(many),
                    times(res.ratio(&w, &k, multi, base)),
                ]);
            }
        }
    }
    if !any {
        return String::new();
    }
    format!(
        "processes: N worker processes on one shared pool over the same number of worker \
         threads in one process (committed transactions per second, medians over runs; \
         processes/threads the median of the per-run ratios; goal for 2 processes: at \
         least {GOAL:.1}x on the hash table at 20 % updates and on read-only lookups)\n{}\n",
        t.render()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::test_row;

    #[test]
    fn the_table_pairs_processes_with_threads_of_one_process() {
        let mut res = Results::default();
        assert_eq!(processes_table(&res), "");
        for (e, threads, ops) in [
            ("pisces", 1, 50.0),
            ("pisces", 2, 100.0),
            ("pisces@2proc", 2, 95.0),
        ] {
            res.rows.push(test_row(e, "hash", threads, 20, 1, ops));
        }
        let t = processes_table(&res);
        assert!(t.contains("0.95x"), "{t}");
        assert!(t.contains("2 x 1"), "{t}");
        // A configuration measured in one process only has no row.
        assert_eq!(
            t.lines().filter(|l| l.starts_with("hash")).count(),
            1,
            "{t}"
        );
        res.rows
            .push(test_row("volatile@2proc", "hash", 2, 20, 1, 90.0));
        assert!(!processes_table(&res).contains("volatile"));
    }
}
