//! The table of the `hot` workload that answers one question: what does SP3's early
//! visibility buy on a conflict-heavy mix? `sp3` (versions visible and locks released
//! before the log record persists) against `sp3-no-ev` (unlocked only after it
//! persists), per emulated NVM latency and thread count: throughput, the median of
//! the per-run ratios, abort rates and update latencies.

use crate::engines::{labels, Engine};
use crate::report::table::Table;
use crate::report::tables::{mops, times};
use crate::report::Results;

/// The workload.
const W: &str = "hot";

fn pct(x: f64) -> String {
    if x.is_nan() {
        "-".into()
    } else {
        format!("{:.1}%", x * 100.0)
    }
}

fn ns(x: f64) -> String {
    if x.is_nan() {
        "-".into()
    } else {
        format!("{x:.0}")
    }
}

/// The early-visibility table, or nothing when the run has no `hot` rows of both sp3
/// configurations.
pub fn early_visibility_table(res: &Results) -> String {
    // The two configurations compared.
    let (on, off) = (Engine::SP3.name(), labels::SP3_NO_EV);
    let engines = res.engines(W);
    if !(engines.iter().any(|e| e == on) && engines.iter().any(|e| e == off)) {
        return String::new();
    }
    let mut t = Table::new(
        [
            "nvm ns",
            "threads",
            "sp3 Mops/s",
            "no-ev Mops/s",
            "sp3/no-ev",
            "sp3 abort",
            "no-ev abort",
            "sp3 upd p50",
            "no-ev upd p50",
            "sp3 upd p99",
            "no-ev upd p99",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect(),
    );
    for k in res.keys(W) {
        let m = |e: &str, f: fn(&crate::report::Row) -> f64| res.median(W, &k, e, f);
        t.push(vec![
            k.nvm_latency_ns.to_string(),
            k.threads.to_string(),
            mops(m(on, |r| r.ops_per_sec)),
            mops(m(off, |r| r.ops_per_sec)),
            times(res.ratio(W, &k, on, off)),
            pct(m(on, |r| r.abort_rate)),
            pct(m(off, |r| r.abort_rate)),
            ns(m(on, |r| r.upd_p50_ns)),
            ns(m(off, |r| r.upd_p50_ns)),
            ns(m(on, |r| r.upd_p99_ns)),
            ns(m(off, |r| r.upd_p99_ns)),
        ]);
    }
    format!(
        "hot: SP3 early visibility on (sp3) and off (sp3-no-ev): committed transactions per \
         second (median over runs), sp3/no-ev the median of the per-run ratios, abort = \
         conflicts / (commits + conflicts), update latency in ns (retries included)\n{}\n",
        t.render()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::test_row;

    #[test]
    fn the_table_compares_the_two_configurations() {
        let mut res = Results::default();
        assert_eq!(early_visibility_table(&res), "");
        for (e, run, ops) in [("sp3", 1, 300.0), ("sp3-no-ev", 1, 200.0)] {
            res.rows.push(test_row(e, W, 2, 100, run, ops));
        }
        let t = early_visibility_table(&res);
        assert!(t.contains("sp3/no-ev") && t.contains("1.50x"), "{t}");
    }
}
