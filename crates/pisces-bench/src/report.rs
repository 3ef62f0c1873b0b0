//! Results: CSV rows, medians over runs, the terminal tables and the performance
//! targets (Pisces >= 2x the best baseline on hash 2 % and 20 % and btree 20 % updates;
//! read-only throughput >= 0.8x volatile; read-only p99 at 1000 ns <= 1.1x that at 0 ns).

use crate::measure::{Outcome, Spec};
use std::collections::BTreeSet;
use std::fmt::Write as _;

/// The CSV header (its columns are fixed: scripts read them by name).
pub const CSV_HEADER: &str = "engine,workload,threads,update_pct,nvm_latency_ns,run,ops_per_sec,\
abort_rate,ro_p50_ns,ro_p99_ns,upd_p50_ns,upd_p99_ns,flushes_per_tx,fences_per_tx,write_amp";

/// One run of one configuration. Metrics that do not apply (no update transactions, so
/// no update latency and no write amplification) are NaN, written `NaN` in the CSV.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    /// Engine label.
    pub engine: String,
    /// Workload name.
    pub workload: String,
    /// Worker threads.
    pub threads: usize,
    /// Update percentage.
    pub update_pct: u32,
    /// Emulated NVM write latency (ns per flushed line).
    pub nvm_latency_ns: u64,
    /// Run number, from 1.
    pub run: u32,
    /// Committed transactions per second.
    pub ops_per_sec: f64,
    /// Conflicts / (commits + conflicts).
    pub abort_rate: f64,
    /// Read-only transaction latency, median (ns).
    pub ro_p50_ns: f64,
    /// Read-only transaction latency, 99th percentile (ns).
    pub ro_p99_ns: f64,
    /// Update transaction latency, median (ns).
    pub upd_p50_ns: f64,
    /// Update transaction latency, 99th percentile (ns).
    pub upd_p99_ns: f64,
    /// Cache lines flushed per committed transaction.
    pub flushes_per_tx: f64,
    /// Fences per committed transaction.
    pub fences_per_tx: f64,
    /// (bytes logged + bytes written home) / bytes the program changed.
    pub write_amp: f64,
    /// Fraction of the completed transactions the workload rolled back on purpose
    /// (TPC-C's invalid-item new-orders; 0 elsewhere). Not a CSV column: shown under
    /// the TPC-C throughput table.
    pub user_abort_rate: f64,
}

fn quantile(h: &hdrhistogram::Histogram<u64>, q: f64) -> f64 {
    if h.is_empty() {
        f64::NAN
    } else {
        h.value_at_quantile(q) as f64
    }
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        f64::NAN
    } else {
        a as f64 / b as f64
    }
}

impl Row {
    /// The row of run `run` of `spec`.
    pub fn new(spec: &Spec, run: u32, o: &Outcome) -> Row {
        let c = o.counters;
        // An engine that flushes by itself (libpmemobj) does so out of the medium
        // counters' sight: its counts are not reported rather than reported as zero.
        let counted = spec.engine.engine.flushes_through_medium();
        let seen = |x: f64| if counted { x } else { f64::NAN };
        Row {
            engine: spec.engine.label.clone(),
            workload: spec.workload.clone(),
            threads: spec.threads,
            update_pct: spec.update_pct,
            nvm_latency_ns: spec.nvm_latency_ns,
            run,
            ops_per_sec: o.ops_per_sec,
            abort_rate: ratio(o.conflicts, o.commits + o.conflicts),
            ro_p50_ns: quantile(&o.ro, 0.5),
            ro_p99_ns: quantile(&o.ro, 0.99),
            upd_p50_ns: quantile(&o.upd, 0.5),
            upd_p99_ns: quantile(&o.upd, 0.99),
            flushes_per_tx: seen(ratio(c.lines_flushed, o.commits)),
            fences_per_tx: seen(ratio(c.fences, o.commits)),
            write_amp: seen(ratio(
                c.bytes_logged + c.bytes_written_home,
                o.changed_bytes,
            )),
            user_abort_rate: ratio(o.user_aborts, o.commits),
        }
    }

    /// The CSV line (no newline), columns as [`CSV_HEADER`].
    pub fn to_csv(&self) -> String {
        format!(
            "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
            self.engine,
            self.workload,
            self.threads,
            self.update_pct,
            self.nvm_latency_ns,
            self.run,
            num(self.ops_per_sec, 1),
            num(self.abort_rate, 6),
            num(self.ro_p50_ns, 0),
            num(self.ro_p99_ns, 0),
            num(self.upd_p50_ns, 0),
            num(self.upd_p99_ns, 0),
            num(self.flushes_per_tx, 3),
            num(self.fences_per_tx, 3),
            num(self.write_amp, 3),
        )
    }
}

/// `x` with `d` decimals, `NaN` when not a number.
fn num(x: f64, d: usize) -> String {
    if x.is_nan() {
        "NaN".into()
    } else {
        format!("{x:.d$}")
    }
}

/// Median of the numbers in `v` that are not NaN; NaN if there are none.
pub fn median(v: impl IntoIterator<Item = f64>) -> f64 {
    let mut v: Vec<f64> = v.into_iter().filter(|x| !x.is_nan()).collect();
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// A configuration apart from the engine and the run.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Key {
    /// Update percentage.
    pub update_pct: u32,
    /// Emulated NVM latency.
    pub nvm_latency_ns: u64,
    /// Threads.
    pub threads: usize,
}

/// Every row of a bench run.
#[derive(Clone, Debug, Default)]
pub struct Results {
    /// The rows, in measurement order.
    pub rows: Vec<Row>,
}

/// True for the engines the targets compare Pisces against.
fn is_baseline(engine: &str) -> bool {
    engine != "pisces" && engine != "volatile" && !engine.starts_with("pisces-")
}

impl Results {
    /// Workloads in first-measured order.
    pub fn workloads(&self) -> Vec<String> {
        let mut v: Vec<String> = Vec::new();
        for r in &self.rows {
            if !v.contains(&r.workload) {
                v.push(r.workload.clone());
            }
        }
        v
    }

    /// Engine labels measured on `workload`, in first-measured order.
    pub fn engines(&self, workload: &str) -> Vec<String> {
        let mut v: Vec<String> = Vec::new();
        for r in self.rows.iter().filter(|r| r.workload == workload) {
            if !v.contains(&r.engine) {
                v.push(r.engine.clone());
            }
        }
        v
    }

    /// Configurations measured on `workload`, sorted.
    pub fn keys(&self, workload: &str) -> Vec<Key> {
        self.rows
            .iter()
            .filter(|r| r.workload == workload)
            .map(key_of)
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect()
    }

    /// The runs of `engine` on `workload` at `key`.
    pub fn runs<'a>(
        &'a self,
        workload: &'a str,
        key: &'a Key,
        engine: &'a str,
    ) -> impl Iterator<Item = &'a Row> + 'a {
        self.rows
            .iter()
            .filter(move |r| r.workload == workload && r.engine == engine && key_of(r) == *key)
    }

    /// Median over runs of `f`.
    pub fn median(&self, workload: &str, key: &Key, engine: &str, f: fn(&Row) -> f64) -> f64 {
        median(self.runs(workload, key, engine).map(f))
    }

    /// Median over runs of `a`'s throughput divided by `b`'s in the same run.
    pub fn ratio(&self, workload: &str, key: &Key, a: &str, b: &str) -> f64 {
        median(self.runs(workload, key, a).filter_map(|ra| {
            self.runs(workload, key, b)
                .find(|rb| rb.run == ra.run)
                .map(|rb| ra.ops_per_sec / rb.ops_per_sec)
        }))
    }

    /// Median over runs of Pisces' throughput divided by the best baseline's in the same
    /// run, and the baseline that was best most often. None if either is missing.
    pub fn vs_best_baseline(&self, workload: &str, key: &Key) -> Option<(f64, String)> {
        let baselines: Vec<String> = self
            .engines(workload)
            .into_iter()
            .filter(|e| is_baseline(e))
            .collect();
        let mut ratios = Vec::new();
        let mut best_names: Vec<String> = Vec::new();
        for p in self.runs(workload, key, "pisces") {
            let best = baselines
                .iter()
                .filter_map(|b| {
                    self.runs(workload, key, b)
                        .find(|r| r.run == p.run)
                        .map(|r| (r.ops_per_sec, b))
                })
                .max_by(|x, y| x.0.total_cmp(&y.0));
            if let Some((ops, name)) = best {
                ratios.push(p.ops_per_sec / ops);
                best_names.push(name.clone());
            }
        }
        if ratios.is_empty() {
            return None;
        }
        let most = best_names
            .iter()
            .max_by_key(|n| best_names.iter().filter(|m| m == n).count())
            .cloned()
            .unwrap_or_default();
        Some((median(ratios), most))
    }
}

fn key_of(r: &Row) -> Key {
    Key {
        update_pct: r.update_pct,
        nvm_latency_ns: r.nvm_latency_ns,
        threads: r.threads,
    }
}

/// A text table: first column left-aligned, the others right-aligned.
pub struct Table {
    head: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these column headings.
    pub fn new(head: Vec<String>) -> Self {
        Table {
            head,
            rows: Vec::new(),
        }
    }

    /// Add a row.
    pub fn push(&mut self, row: Vec<String>) {
        self.rows.push(row);
    }

    /// The table as text, one line per row, under a heading line.
    pub fn render(&self) -> String {
        let n = self.head.len();
        let mut w = vec![0usize; n];
        for r in std::iter::once(&self.head).chain(&self.rows) {
            for (i, c) in r.iter().enumerate().take(n) {
                w[i] = w[i].max(c.chars().count());
            }
        }
        let mut s = String::new();
        for r in std::iter::once(&self.head).chain(&self.rows) {
            let mut line = String::new();
            for (i, c) in r.iter().enumerate().take(n) {
                let pad = w[i] - c.chars().count();
                if i == 0 {
                    line += c;
                    line += &" ".repeat(pad);
                } else {
                    line += "  ";
                    line += &" ".repeat(pad);
                    line += c;
                }
            }
            s += line.trim_end();
            s.push('\n');
        }
        s
    }
}

fn mops(x: f64) -> String {
    if x.is_nan() {
        "-".into()
    } else {
        format!("{:.3}", x / 1e6)
    }
}

fn times(x: f64) -> String {
    if x.is_nan() {
        "-".into()
    } else {
        format!("{x:.2}x")
    }
}

fn ns(x: f64) -> String {
    fixed(x, 0)
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

/// Workloads shown as throughput comparisons (everything but the two sweeps).
fn is_throughput_workload(w: &str) -> bool {
    !w.starts_with("latency") && w != "breakdown"
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
        w if w.starts_with("set-") => {
            " (hash set: a read looks a member up, an update removes one and adds it back \
             in one transaction)"
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
        let has_pisces = engines.iter().any(|e| e == "pisces");
        let others: Vec<&String> = engines.iter().filter(|e| *e != "pisces").collect();
        let mut head = vec!["upd%".to_string(), "nvm ns".into(), "threads".into()];
        head.extend(engines.iter().map(|e| format!("{e} Mops/s")));
        if has_pisces {
            head.extend(others.iter().map(|e| format!("pisces/{e}")));
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
                    .map(|e| mops(res.median(w, &k, e, |r| r.ops_per_sec))),
            );
            if has_pisces {
                row.extend(others.iter().map(|e| times(res.ratio(w, &k, "pisces", e))));
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
                t.push(vec![
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
                ]);
            }
        }
    }
    format!(
        "All metrics (median over runs; latencies in ns per transaction, retries included; \
         lines and fences per committed transaction; write amp = (bytes logged + bytes \
         written home) / bytes the program changed)\n{}",
        t.render()
    )
}

/// Read-only latency against the emulated NVM write latency.
pub fn latency_table(res: &Results) -> String {
    let mut s = String::new();
    for (w, what) in [
        ("latency", "every thread mixing lookups and updates"),
        (
            "latency-split",
            "thread 0 only looking up, the other threads only updating",
        ),
    ] {
        s += &latency_table_of(res, w, what);
    }
    s
}

fn latency_table_of(res: &Results, w: &str, what: &str) -> String {
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
            t.push(vec![
                e.clone(),
                k.threads.to_string(),
                k.update_pct.to_string(),
                k.nvm_latency_ns.to_string(),
                ns(m(k, |r| r.ro_p50_ns)),
                ns(m(k, |r| r.ro_p99_ns)),
                times(m(k, |r| r.ro_p99_ns) / m(&zero, |r| r.ro_p99_ns)),
                ns(m(k, |r| r.upd_p50_ns)),
                ns(m(k, |r| r.upd_p99_ns)),
                mops(m(k, |r| r.ops_per_sec)),
            ]);
        }
    }
    format!(
        "{w}: transaction latency (ns, median over runs) vs emulated NVM write latency \
         per flushed line; hash table, {what}\n{}\n",
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

/// The performance targets, evaluated on what was measured (not asserted).
pub fn targets(res: &Results) -> String {
    let mut s = String::from(
        "Targets (measured in this run, not asserted; ratios are medians of \
         per-run ratios):\n",
    );
    let verdict = |ok: bool| if ok { "[met]   " } else { "[MISSED]" };
    // 1. Pisces >= 2x the best baseline.
    for (w, p) in [("hash", 2), ("hash", 20), ("btree", 20)] {
        let keys: Vec<Key> = res
            .keys(w)
            .into_iter()
            .filter(|k| k.update_pct == p && (k.threads == 1 || k.threads == 2))
            .collect();
        if keys.is_empty() {
            let _ = writeln!(s, "  [n/a]    {w} {p}% updates: not measured");
        }
        for k in keys {
            let what = format!(
                "{w} {p}% updates, {} thread{}{}",
                k.threads,
                if k.threads == 1 { "" } else { "s" },
                lat_note(&k)
            );
            match res.vs_best_baseline(w, &k) {
                Some((r, best)) => {
                    let _ = writeln!(
                        s,
                        "  {} {what}: pisces / best baseline ({best}) = {r:.2}x (target >= 2x{})",
                        verdict(r >= 2.0),
                        if r >= 2.0 {
                            String::new()
                        } else {
                            format!("; short by {:.0}%", (1.0 - r / 2.0) * 100.0)
                        }
                    );
                }
                None => {
                    let _ = writeln!(s, "  [n/a]    {what}: pisces or a baseline not measured");
                }
            }
        }
    }
    // 2. Read-only throughput >= 0.8x volatile.
    for w in ["hash", "btree"] {
        for k in res.keys(w).into_iter().filter(|k| k.update_pct == 0) {
            let r = res.ratio(w, &k, "pisces", "volatile");
            if r.is_nan() {
                continue;
            }
            let _ = writeln!(
                s,
                "  {} {w} read-only, {} thread{}{}: pisces / volatile = {r:.2}x (target >= 0.8x)",
                verdict(r >= 0.8),
                k.threads,
                if k.threads == 1 { "" } else { "s" },
                lat_note(&k)
            );
        }
    }
    // 3. Read-only p99 at 1000 ns <= 1.1x of that at 0 ns.
    let mut any = false;
    for w in ["latency", "latency-split"] {
        for k in res.keys(w) {
            if k.nvm_latency_ns != 1000 {
                continue;
            }
            let zero = Key {
                nvm_latency_ns: 0,
                ..k.clone()
            };
            let (hi, lo) = (
                res.median(w, &k, "pisces", |r| r.ro_p99_ns),
                res.median(w, &zero, "pisces", |r| r.ro_p99_ns),
            );
            if hi.is_nan() || lo.is_nan() {
                continue;
            }
            any = true;
            let r = hi / lo;
            let how = if w == "latency" {
                format!("{}% updates", k.update_pct)
            } else {
                "dedicated reader".into()
            };
            let _ = writeln!(
                s,
                "  {} pisces read-only p99, {} threads, {how}: {hi:.0} ns at 1000 ns vs \
                 {lo:.0} ns at 0 ns = {r:.2}x (target <= 1.1x)",
                verdict(r <= 1.1),
                k.threads,
            );
        }
    }
    if !any {
        s += "  [n/a]    read-only p99 at 1000 ns vs 0 ns: not measured (latency workload)\n";
    }
    s += "  Baselines compared: the engines measured other than pisces and volatile (of \
          undo, mvcc and pmdk).\n";
    s
}

fn lat_note(k: &Key) -> String {
    if k.nvm_latency_ns == 0 {
        String::new()
    } else {
        format!(", {} ns NVM", k.nvm_latency_ns)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(engine: &str, workload: &str, threads: usize, pct: u32, run: u32, ops: f64) -> Row {
        Row {
            engine: engine.into(),
            workload: workload.into(),
            threads,
            update_pct: pct,
            nvm_latency_ns: 0,
            run,
            ops_per_sec: ops,
            abort_rate: 0.0,
            ro_p50_ns: 500.0,
            ro_p99_ns: 900.0,
            upd_p50_ns: f64::NAN,
            upd_p99_ns: f64::NAN,
            flushes_per_tx: 0.0,
            fences_per_tx: 0.0,
            write_amp: f64::NAN,
            user_abort_rate: 0.0,
        }
    }

    #[test]
    fn medians_skip_nan() {
        assert!(median([]).is_nan());
        assert!(median([f64::NAN]).is_nan());
        assert_eq!(median([3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median([4.0, 1.0, f64::NAN, 2.0, 3.0]), 2.5);
    }

    #[test]
    fn csv_lines_have_every_column_and_nan_for_what_does_not_apply() {
        let r = row("undo", "hash", 2, 0, 1, 1234.56);
        let line = r.to_csv();
        assert_eq!(line.split(',').count(), CSV_HEADER.split(',').count());
        assert_eq!(
            line,
            "undo,hash,2,0,0,1,1234.6,0.000000,500,900,NaN,NaN,0.000,0.000,NaN"
        );
        for f in line.split(',').skip(2) {
            f.parse::<f64>().unwrap();
        }
    }

    #[test]
    fn ratios_pair_runs_and_the_best_baseline_is_per_run() {
        let mut res = Results::default();
        // Run 1: pisces 100, undo 50, other 80; run 2: pisces 90, undo 60, other 30;
        // run 3: only pisces (no pair).
        for (e, run, ops) in [
            ("pisces", 1, 100.0),
            ("undo", 1, 50.0),
            ("other", 1, 80.0),
            ("volatile", 1, 200.0),
            ("pisces", 2, 90.0),
            ("undo", 2, 60.0),
            ("other", 2, 30.0),
            ("volatile", 2, 100.0),
            ("pisces", 3, 10.0),
        ] {
            res.rows.push(row(e, "hash", 1, 2, run, ops));
        }
        let k = Key {
            update_pct: 2,
            nvm_latency_ns: 0,
            threads: 1,
        };
        assert_eq!(res.ratio("hash", &k, "pisces", "undo"), (2.0 + 1.5) / 2.0);
        let (r, _) = res.vs_best_baseline("hash", &k).unwrap();
        assert_eq!(r, (100.0 / 80.0 + 1.5) / 2.0);
        assert_eq!(res.median("hash", &k, "pisces", |r| r.ops_per_sec), 90.0);
        let t = throughput_tables(&res);
        assert!(t.contains("pisces/undo"), "{t}");
        assert!(t.contains("1.75x"), "{t}");
        let g = targets(&res);
        assert!(
            g.contains("[MISSED] hash 2% updates, 1 thread: pisces / best baseline"),
            "{g}"
        );
        assert!(g.contains("[n/a]    hash 20% updates: not measured"), "{g}");
    }

    #[test]
    fn tables_align_columns() {
        let mut t = Table::new(vec!["a".into(), "bb".into()]);
        t.push(vec!["long".into(), "1".into()]);
        assert_eq!(t.render(), "a     bb\nlong   1\n");
    }
}
