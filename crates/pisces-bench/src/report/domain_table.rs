//! The table of a run measured under both persistence domains (`--domain adr,eadr`):
//! per engine configuration and measured configuration, the throughput under eADR
//! over the throughput under ADR (the median of the per-run ratios), and the cache
//! lines flushed and the fences per committed transaction under each. Under eADR the
//! medium's flush writes nothing back, so the lines still counted there are those the
//! engine streams (log records through non-temporal stores, which the fence
//! completes); the fences stay.

use crate::engines::EADR_SUFFIX;
use crate::report::table::Table;
use crate::report::tables::{mops, times};
use crate::report::Results;

fn per_tx(x: f64) -> String {
    if x.is_nan() {
        "-".into()
    } else {
        format!("{x:.2}")
    }
}

/// The eADR / ADR table, or nothing when no configuration ran under both domains.
pub fn domain_table(res: &Results) -> String {
    let mut t = Table::new(
        [
            "workload",
            "engine",
            "threads",
            "upd %",
            "nvm ns",
            "adr Mops/s",
            "eadr Mops/s",
            "eadr/adr",
            "adr flushes/tx",
            "eadr flushes/tx",
            "adr fences/tx",
            "eadr fences/tx",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect(),
    );
    let mut any = false;
    for w in res.workloads() {
        let engines = res.engines(&w);
        for eadr in engines.iter().filter(|e| e.ends_with(EADR_SUFFIX)) {
            let adr = &eadr[..eadr.len() - EADR_SUFFIX.len()];
            if !engines.iter().any(|e| e == adr) {
                continue;
            }
            for k in res.keys(&w) {
                let m = |e: &str, f: fn(&crate::report::Row) -> f64| res.median(&w, &k, e, f);
                let (a, e) = (m(adr, |r| r.ops_per_sec), m(eadr, |r| r.ops_per_sec));
                if a.is_nan() || e.is_nan() {
                    continue;
                }
                any = true;
                t.push(vec![
                    w.clone(),
                    adr.to_string(),
                    k.threads.to_string(),
                    k.update_pct.to_string(),
                    k.nvm_latency_ns.to_string(),
                    mops(a),
                    mops(e),
                    times(res.ratio(&w, &k, eadr, adr)),
                    per_tx(m(adr, |r| r.flushes_per_tx)),
                    per_tx(m(eadr, |r| r.flushes_per_tx)),
                    per_tx(m(adr, |r| r.fences_per_tx)),
                    per_tx(m(eadr, |r| r.fences_per_tx)),
                ]);
            }
        }
    }
    if !any {
        return String::new();
    }
    format!(
        "persistence domain: throughput under eADR over ADR (committed transactions per \
         second, medians over runs; eadr/adr the median of the per-run ratios), cache lines \
         written back and fences per committed transaction under each (eADR: only streamed \
         lines are written back; DRAM medium, emulated: not an NVM measurement)\n{}\n",
        t.render()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::test_row;

    #[test]
    fn the_table_pairs_each_engine_with_itself_under_eadr() {
        let mut res = Results::default();
        assert_eq!(domain_table(&res), "");
        for (e, ops, flushes) in [("undo", 100.0, 6.0), ("undo@eadr", 150.0, 0.0)] {
            let mut r = test_row(e, "hash", 1, 20, 1, ops);
            r.flushes_per_tx = flushes;
            r.fences_per_tx = 3.0;
            res.rows.push(r);
        }
        let t = domain_table(&res);
        assert!(t.contains("1.50x"), "{t}");
        assert!(
            t.contains("6.00") && t.contains("0.00") && t.contains("3.00"),
            "{t}"
        );
        // An engine measured under one domain only has no row.
        res.rows.push(test_row("mvcc", "hash", 1, 20, 1, 90.0));
        assert!(!domain_table(&res).contains("mvcc"));
    }
}
