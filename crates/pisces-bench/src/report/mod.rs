//! The results of a bench run: one CSV [`Row`] per run of a configuration, medians over
//! runs, and ratios between engines within a run. The terminal tables are made from
//! them by [`crate::report::tables`], the verdicts on the performance targets by
//! [`crate::report::targets`].

pub mod domain_table;
pub mod hot_table;
pub mod markdown;
pub mod medium_table;
pub mod plot;
pub mod processes_table;
pub mod table;
pub mod tables;
pub mod targets;

use crate::engines::Engine;
use crate::measure::{Outcome, Spec};
use pisces::tools::shared_counts;
use std::collections::BTreeSet;

/// The CSV header (its columns are fixed: scripts read them by name).
pub const CSV_HEADER: &str = "engine,workload,threads,update_pct,nvm_latency_ns,run,ops_per_sec,\
abort_rate,ro_p50_ns,ro_p99_ns,upd_p50_ns,upd_p99_ns,flushes_per_tx,fences_per_tx,write_amp,\
ro_locked_reads_per_ro_tx,shared_rmw_per_tx,shared_lines_per_tx,medium,write_tx_per_sec,\
syncs_per_write_tx,device_bytes_per_write_tx";

/// The `medium` of a row measured on a file system (`--dir`): the pools on the file
/// medium, the peers' files in the same directory.
pub const FILE_MEDIUM: &str = "file";
/// The `medium` of a row measured on emulated PM (DRAM under `/dev/shm`; the peers'
/// files there too).
pub const DRAM_MEDIUM: &str = "dram";

/// One run of one configuration. Metrics that do not apply (no update transactions, so
/// no update latency and no write amplification) are NaN, written `NaN` in the CSV.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    /// Engine label.
    pub engine: String,
    /// Workload name.
    pub workload: String,
    /// Worker threads (of every process, for a measurement of several processes).
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
    /// Write amplification: bytes made durable (logs, write-back, allocator metadata,
    /// including what the engine writes back when the pool closes) / bytes the program
    /// changed ([`pisces::tools::counters::Counters::bytes_durable`]).
    pub write_amp: f64,
    /// Reads that took the copy path (met another writer's lock) per committed
    /// read-only transaction ([`pisces::TxStats::ro_locked_reads`]; 0 on engines
    /// that do not count them, NaN without read-only transactions).
    pub ro_locked_reads_per_ro_tx: f64,
    /// Stores and atomic read-modify-writes to words several threads write (global
    /// clocks, lock words, markers, shared counters), all threads, per committed
    /// transaction ([`pisces::tools::shared_counts`]). NaN unless the build has the
    /// `shared-counts` feature, and for the peers (their internals are not counted).
    pub shared_rmw_per_tx: f64,
    /// Distinct cache lines those writes hit per committed transaction (a line counts
    /// once per transaction of the thread that writes it, its retries included).
    pub shared_lines_per_tx: f64,
    /// Fraction of the completed transactions the workload rolled back on purpose
    /// (TPC-C's invalid-item new-orders; 0 elsewhere). Not a CSV column: shown under
    /// the TPC-C throughput table.
    pub user_abort_rate: f64,
    /// Where it ran: [`FILE_MEDIUM`] (`--dir`) or [`DRAM_MEDIUM`].
    pub medium: String,
    /// Committed update (write) transactions per second: on a file system, durable
    /// commits per second.
    pub write_tx_per_sec: f64,
    /// `msync` calls of the file medium per committed update transaction, every thread
    /// of the process counted ([`Outcome::msyncs`]). NaN on emulated PM and for the
    /// engines that sync by themselves (pmdk's libpmemobj, the peers): not counted.
    pub syncs_per_write_tx: f64,
    /// Bytes this process sent to the storage layer per committed update transaction
    /// ([`Outcome::device_write_bytes`]): pages it dirtied, counted when dirtied, and
    /// its direct I/O. NaN on emulated PM (tmpfs sends nothing to a device) and where
    /// the kernel does not say.
    pub device_bytes_per_write_tx: f64,
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
        let on_disk = spec.disk.is_some();
        let seen = |x: f64| if counted { x } else { f64::NAN };
        let shared_seen = shared_counts::ENABLED && spec.engine.engine.peer().is_none();
        let shared = |x: u64| {
            if shared_seen {
                ratio(x, o.commits)
            } else {
                f64::NAN
            }
        };
        Row {
            engine: spec.engine.label.clone(),
            workload: spec.workload.clone(),
            // Every worker thread of every process.
            threads: spec.threads * spec.processes,
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
            write_amp: seen(ratio(c.bytes_durable(), o.changed_bytes)),
            ro_locked_reads_per_ro_tx: ratio(o.ro_locked_reads, o.ro_txs),
            shared_rmw_per_tx: shared(o.shared.writes),
            shared_lines_per_tx: shared(o.shared.lines),
            user_abort_rate: ratio(o.user_aborts, o.commits),
            medium: if on_disk { FILE_MEDIUM } else { DRAM_MEDIUM }.into(),
            write_tx_per_sec: o.ops_per_sec * ratio(o.upd_txs, o.commits),
            syncs_per_write_tx: if on_disk && counted {
                ratio(o.msyncs, o.upd_txs)
            } else {
                f64::NAN
            },
            device_bytes_per_write_tx: match (on_disk, o.device_write_bytes) {
                (true, Some(b)) => ratio(b, o.upd_txs),
                _ => f64::NAN,
            },
        }
    }

    /// The CSV line (no newline), columns as [`CSV_HEADER`].
    pub fn to_csv(&self) -> String {
        format!(
            "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
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
            num(self.ro_locked_reads_per_ro_tx, 4),
            num(self.shared_rmw_per_tx, 3),
            num(self.shared_lines_per_tx, 3),
            self.medium,
            num(self.write_tx_per_sec, 1),
            num(self.syncs_per_write_tx, 3),
            num(self.device_bytes_per_write_tx, 0),
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

/// True for the engines the throughput target compares Pisces against (undo, mvcc,
/// pmdk).
fn is_baseline(engine: &str) -> bool {
    Engine::parse(engine).is_ok_and(|e| e.is_baseline())
}

/// True for the engines of the other PTM papers (sp3, spht, timestone), compared with
/// Pisces as information only.
fn is_paper_engine(engine: &str) -> bool {
    Engine::parse(engine).is_ok_and(|e| e.is_paper_engine())
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
        for p in self.runs(workload, key, Engine::PISCES.name()) {
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

    /// Pisces' throughput ratio (median of per-run ratios) to each paper engine (sp3,
    /// spht, timestone) measured on `workload` at `key`, in measured order: information
    /// beside the target, not part of it.
    pub fn vs_paper_engines(&self, workload: &str, key: &Key) -> Vec<(String, f64)> {
        self.engines(workload)
            .into_iter()
            .filter(|e| is_paper_engine(e))
            .map(|e| {
                let r = self.ratio(workload, key, Engine::PISCES.name(), &e);
                (e, r)
            })
            .filter(|(_, r)| !r.is_nan())
            .collect()
    }
}

fn key_of(r: &Row) -> Key {
    Key {
        update_pct: r.update_pct,
        nvm_latency_ns: r.nvm_latency_ns,
        threads: r.threads,
    }
}

/// A row of `engine` on `workload` for the unit tests (read-only latencies 500 and 900
/// ns, nothing flushed).
#[cfg(test)]
pub(crate) fn test_row(
    engine: &str,
    workload: &str,
    threads: usize,
    pct: u32,
    run: u32,
    ops: f64,
) -> Row {
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
        ro_locked_reads_per_ro_tx: 0.0,
        shared_rmw_per_tx: f64::NAN,
        shared_lines_per_tx: f64::NAN,
        user_abort_rate: 0.0,
        medium: DRAM_MEDIUM.into(),
        write_tx_per_sec: 0.0,
        syncs_per_write_tx: f64::NAN,
        device_bytes_per_write_tx: f64::NAN,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_skip_nan() {
        assert!(median([]).is_nan());
        assert!(median([f64::NAN]).is_nan());
        assert_eq!(median([3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median([4.0, 1.0, f64::NAN, 2.0, 3.0]), 2.5);
    }

    #[test]
    fn csv_lines_have_every_column_and_nan_for_what_does_not_apply() {
        let r = test_row("undo", "hash", 2, 0, 1, 1234.56);
        let line = r.to_csv();
        assert_eq!(line.split(',').count(), CSV_HEADER.split(',').count());
        assert_eq!(
            line,
            "undo,hash,2,0,0,1,1234.6,0.000000,500,900,NaN,NaN,0.000,0.000,NaN,0.0000,NaN,NaN,\
             dram,0.0,NaN,NaN"
        );
        for f in line.split(',').skip(2).filter(|f| *f != DRAM_MEDIUM) {
            f.parse::<f64>().unwrap();
        }
    }
}
