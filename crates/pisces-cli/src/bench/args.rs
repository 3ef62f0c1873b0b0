//! Command-line arguments of `pisces bench` and the plan they expand to.

use super::measure::{EngineSpec, Spec};
use super::workload::{DataKind, Sizes};
use clap::{Args, ValueEnum};
use pisces::containers::hashmap::MAX_BUCKETS;
use pisces::EngineId;
use std::path::PathBuf;

/// Emulated NVM write latencies of the read-latency sweep (paper Fig 9c).
pub const LATENCY_SWEEP_NS: [u64; 5] = [0, 100, 300, 600, 1000];
/// Update percentage of the latency sweep and the breakdown (paper Fig 9a, 9c: 20 %).
pub const SWEEP_UPDATE_PCT: u32 = 20;

/// A workload of `pisces bench`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, ValueEnum)]
pub enum WorkloadKind {
    /// Hash table (10K buckets, 8-byte keys, 64-byte values), lookups and insert/remove.
    Hash,
    /// B+-tree (fanout 16, 256-byte nodes), lookups and inserts/overwrites.
    Btree,
    /// Read-only latency percentiles vs emulated NVM write latency (hash table, every
    /// thread mixing lookups and updates, as in the paper's Fig 9c).
    Latency,
    /// The same sweep with a dedicated reader: thread 0 only looks up, the other
    /// threads only update (not in the default list).
    LatencySplit,
    /// Pisces' optimisations one by one on the hash table: flush whole, flush-diff,
    /// flush-diff + group commit.
    Breakdown,
    /// TPC-C new-order, one warehouse per worker thread, fanout-32 B+-tree tables
    /// (scaled down; in `--full`, not in the quick default).
    Tpcc,
    /// TATP, fanout-32 B+-tree tables, the standard 80 % read-only mix (in `--full`,
    /// not in the quick default).
    Tatp,
}

/// `update_pct` of TPC-C: every new-order is read-write.
pub const TPCC_UPDATE_PCT: u32 = 100;
/// `update_pct` of TATP: its standard mix has 20 % read-write transactions.
pub const TATP_UPDATE_PCT: u32 = 20;

impl WorkloadKind {
    /// Name in reports.
    pub fn name(self) -> &'static str {
        match self {
            WorkloadKind::Hash => "hash",
            WorkloadKind::Btree => "btree",
            WorkloadKind::Latency => "latency",
            WorkloadKind::LatencySplit => "latency-split",
            WorkloadKind::Breakdown => "breakdown",
            WorkloadKind::Tpcc => "tpcc",
            WorkloadKind::Tatp => "tatp",
        }
    }
}

/// Arguments of `pisces bench`.
#[derive(Args, Debug, Clone)]
#[command(after_help = "\
Each measurement creates a fresh pool under /dev/shm (DRAM with the emulated NVM write \
latency of --nvm-latency-ns charged per flushed cache line), preloads it, and runs the \
worker threads for --seconds, one operation per transaction; the pool is removed \
afterwards. Runs are interleaved (run 1 of every configuration, then run 2, ...), and \
the ratios against Pisces are taken within each run, then the median over runs.\n\n\
Defaults: --quick. quick: hash table 10K buckets / 20K pairs, B+-tree 100K keys, \
updates 0,2,20 % (B+-tree 0,20 %), 0.6 s x 3 runs. full: the paper's sizes (10K buckets / 100K pairs, \
1M keys), updates 0,2,20,40 %, 10 s x 3 runs. The latency sweep uses 0,100,300,600,1000 \
ns and 20 % updates on 2 threads (or the --threads values above 1); latency-split (not \
in the default list) sweeps the same latencies with thread 0 only looking up and the \
others only updating (update_pct 100 in the CSV: the writers' mix); the breakdown uses \
20 % updates. An explicit --update-pct or --nvm-latency-ns applies to every workload \
(0 % is skipped where a workload needs writers), except that tpcc and tatp always run \
their own mix (update_pct 100: every new-order is read-write; 20: TATP's 80 % read-only \
mix).\n\n\
tpcc (TPC-C new-order, one warehouse per worker thread) and tatp run in --full and when \
named in --workloads, not in the quick default. Scaled down: tpcc quick 10K items and \
300 customers per district, full 100K items and 3K customers; tatp quick 20K \
subscribers, full 200K (the paper's).\n\n\
Not built yet: the mvcc and pmdk engines.")]
pub struct BenchArgs {
    /// Scaled-down data sets and short runs (the default).
    #[arg(long, conflicts_with = "full")]
    pub quick: bool,
    /// The paper's data-set sizes and longer runs.
    #[arg(long)]
    pub full: bool,
    /// Engines to compare, comma-separated [default: pisces,undo,volatile].
    #[arg(long, value_delimiter = ',', value_parser = parse_engine)]
    pub engines: Option<Vec<EngineId>>,
    /// Workloads, comma-separated [default: hash,btree,latency,breakdown; --full adds
    /// tpcc,tatp; also latency-split].
    #[arg(long, value_delimiter = ',', value_enum)]
    pub workloads: Option<Vec<WorkloadKind>>,
    /// Worker-thread counts, comma-separated [default: 1,2].
    #[arg(long, value_delimiter = ',', value_parser = parse_threads)]
    pub threads: Option<Vec<usize>>,
    /// Percentages of update transactions, comma-separated [default: see below].
    #[arg(long = "update-pct", value_delimiter = ',', value_parser = parse_pct)]
    pub update_pct: Option<Vec<u32>>,
    /// Emulated NVM write latencies in ns per flushed cache line, comma-separated
    /// [default: 0; the latency sweep 0,100,300,600,1000].
    #[arg(long = "nvm-latency-ns", value_delimiter = ',', value_parser = parse_latency)]
    pub nvm_latency_ns: Option<Vec<u64>>,
    /// Seconds per measurement [default: 0.6 quick, 10 full].
    #[arg(long, value_parser = parse_seconds)]
    pub seconds: Option<f64>,
    /// Runs of every configuration (the table shows medians) [default: 3].
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub runs: Option<u32>,
    /// Report directory [default: target/bench/<UTC timestamp> in the workspace].
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Seed of the workers' operation choices and of the preload order.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Hash-table buckets [default: 10000].
    #[arg(long, value_parser = parse_buckets)]
    pub hash_buckets: Option<usize>,
    /// Hash-table pairs preloaded [default: 20000 quick, 100000 full].
    #[arg(long, value_parser = parse_keys)]
    pub hash_pairs: Option<usize>,
    /// B+-tree keys preloaded [default: 100000 quick, 1000000 full].
    #[arg(long, value_parser = parse_keys)]
    pub btree_keys: Option<usize>,
    /// TPC-C items, and stock rows per warehouse [default: 10000 quick, 100000 full].
    #[arg(long, value_parser = parse_keys)]
    pub tpcc_items: Option<usize>,
    /// TPC-C customers (and preloaded orders) per district [default: 300 quick, 3000
    /// full].
    #[arg(long, value_parser = parse_keys)]
    pub tpcc_customers: Option<usize>,
    /// TATP subscribers [default: 20000 quick, 200000 full].
    #[arg(long, value_parser = parse_keys)]
    pub tatp_subscribers: Option<usize>,
}

fn parse_engine(s: &str) -> Result<EngineId, String> {
    let e = EngineId::from_name(s.trim()).ok_or_else(|| {
        let known: Vec<&str> = EngineId::ALL.iter().map(|e| e.name()).collect();
        format!("unknown engine `{s}` (known engines: {})", known.join(", "))
    })?;
    if e == EngineId::Pmdk && !EngineId::Pmdk.available() {
        return Err(PMDK_MISSING.into());
    }
    Ok(e)
}

/// Why `pmdk` is not in this build.
const PMDK_MISSING: &str = "this build has no pmdk engine: libpmemobj was not found when it \
     was built (install Debian's libpmemobj-dev, then `cargo clean -p pisces` and rebuild)";

/// The engines run when `--engines` is not given: all of this build's.
fn default_engines() -> Vec<EngineId> {
    EngineId::ALL
        .iter()
        .copied()
        .filter(|e| e.available())
        .collect()
}

fn parse_threads(s: &str) -> Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(n) if (1..=64).contains(&n) => Ok(n),
        _ => Err(format!("`{s}` is not a thread count (1 to 64)")),
    }
}

fn parse_pct(s: &str) -> Result<u32, String> {
    match s.trim().parse::<u32>() {
        Ok(n) if n <= 100 => Ok(n),
        _ => Err(format!("`{s}` is not a percentage (0 to 100)")),
    }
}

fn parse_latency(s: &str) -> Result<u64, String> {
    match s.trim().parse::<u64>() {
        Ok(n) if n <= 1_000_000 => Ok(n),
        _ => Err(format!(
            "`{s}` is not a latency in ns (0 to 1000000 per cache line)"
        )),
    }
}

/// Seconds per measurement: above 0, at most one hour.
pub fn parse_seconds(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 && v <= 3600.0 => Ok(v),
        _ => Err(format!(
            "`{s}` is not a duration in seconds (a number above 0, at most 3600)"
        )),
    }
}

fn parse_buckets(s: &str) -> Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(n) if (1..=MAX_BUCKETS).contains(&n) => Ok(n),
        _ => Err(format!("`{s}` is not a bucket count (1 to {MAX_BUCKETS})")),
    }
}

fn parse_keys(s: &str) -> Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(n) if (1..=20_000_000).contains(&n) => Ok(n),
        _ => Err(format!("`{s}` is not a key count (1 to 20000000)")),
    }
}

/// Everything a bench run needs, defaults resolved.
#[derive(Clone, Debug)]
pub struct Settings {
    /// `quick` or `full`.
    pub mode: &'static str,
    /// Engines compared on hash and btree (and swept for latency).
    pub engines: Vec<EngineId>,
    /// Workloads, in the order given.
    pub workloads: Vec<WorkloadKind>,
    /// Thread counts, ascending.
    pub threads: Vec<usize>,
    /// Update mixes of hash.
    pub mixes: Vec<u32>,
    /// Update mixes of btree.
    pub btree_mixes: Vec<u32>,
    /// Update mixes of latency and breakdown.
    pub sweep_mixes: Vec<u32>,
    /// NVM latencies of hash, btree and breakdown.
    pub latencies: Vec<u64>,
    /// NVM latencies of the latency sweep.
    pub sweep_latencies: Vec<u64>,
    /// Seconds per measurement.
    pub seconds: f64,
    /// Runs per configuration.
    pub runs: u32,
    /// Data-set sizes.
    pub sizes: Sizes,
    /// Seed.
    pub seed: u64,
    /// Report directory, if given.
    pub out: Option<PathBuf>,
}

fn dedup_sorted<T: Ord + Copy>(v: &[T]) -> Vec<T> {
    let mut v = v.to_vec();
    v.sort_unstable();
    v.dedup();
    v
}

fn dedup_ordered<T: PartialEq + Copy>(v: &[T]) -> Vec<T> {
    let mut out: Vec<T> = Vec::new();
    for &x in v {
        if !out.contains(&x) {
            out.push(x);
        }
    }
    out
}

impl BenchArgs {
    /// Resolve defaults (quick unless `--full`).
    pub fn settings(&self) -> Settings {
        let full = self.full;
        let base = if full { Sizes::FULL } else { Sizes::QUICK };
        let sizes = Sizes {
            hash_buckets: self.hash_buckets.unwrap_or(base.hash_buckets),
            hash_pairs: self.hash_pairs.unwrap_or(base.hash_pairs),
            btree_keys: self.btree_keys.unwrap_or(base.btree_keys),
            tpcc_items: self.tpcc_items.unwrap_or(base.tpcc_items),
            tpcc_customers: self.tpcc_customers.unwrap_or(base.tpcc_customers),
            tatp_subscribers: self.tatp_subscribers.unwrap_or(base.tatp_subscribers),
        };
        let (default_mixes, default_btree_mixes): (&[u32], &[u32]) = if full {
            (&[0, 2, 20, 40], &[0, 2, 20, 40])
        } else {
            (&[0, 2, 20], &[0, 20])
        };
        let explicit_mixes = self.update_pct.as_deref().map(dedup_sorted);
        let sweep_mixes = match &explicit_mixes {
            Some(m) => m.iter().copied().filter(|&p| p > 0).collect(),
            None => vec![SWEEP_UPDATE_PCT],
        };
        let explicit_lat = self.nvm_latency_ns.as_deref().map(dedup_sorted);
        Settings {
            mode: if full { "full" } else { "quick" },
            engines: dedup_ordered(self.engines.as_deref().unwrap_or(&default_engines())),
            workloads: dedup_ordered(self.workloads.as_deref().unwrap_or(if full {
                &[
                    WorkloadKind::Hash,
                    WorkloadKind::Btree,
                    WorkloadKind::Latency,
                    WorkloadKind::Breakdown,
                    WorkloadKind::Tpcc,
                    WorkloadKind::Tatp,
                ]
            } else {
                &[
                    WorkloadKind::Hash,
                    WorkloadKind::Btree,
                    WorkloadKind::Latency,
                    WorkloadKind::Breakdown,
                ]
            })),
            threads: dedup_sorted(self.threads.as_deref().unwrap_or(&[1, 2])),
            btree_mixes: explicit_mixes
                .clone()
                .unwrap_or_else(|| default_btree_mixes.to_vec()),
            mixes: explicit_mixes.unwrap_or_else(|| default_mixes.to_vec()),
            sweep_mixes,
            latencies: explicit_lat.clone().unwrap_or_else(|| vec![0]),
            sweep_latencies: explicit_lat.unwrap_or_else(|| LATENCY_SWEEP_NS.to_vec()),
            seconds: self.seconds.unwrap_or(if full { 10.0 } else { 0.6 }),
            runs: self.runs.unwrap_or(3),
            sizes,
            seed: self.seed,
            out: self.out.clone(),
        }
    }
}

/// The Pisces configurations of the breakdown (paper Fig 9a).
pub fn breakdown_engines() -> [EngineSpec; 3] {
    [
        EngineSpec {
            label: "pisces-whole".into(),
            id: EngineId::Pisces,
            options: pisces::PiscesOptions {
                flush_diff: false,
                group_commit: 1,
            }
            .into(),
        },
        EngineSpec {
            label: "pisces-diff".into(),
            id: EngineId::Pisces,
            options: pisces::PiscesOptions {
                flush_diff: true,
                group_commit: 1,
            }
            .into(),
        },
        EngineSpec::plain(EngineId::Pisces),
    ]
}

/// The measurements of one run, in order, and notes on choices the plan made.
pub fn plan(s: &Settings) -> (Vec<Spec>, Vec<String>) {
    let mut specs = Vec::new();
    let mut notes = Vec::new();
    if !EngineId::Pmdk.available() {
        notes.push(format!("pmdk skipped: {PMDK_MISSING}"));
    }
    let mut pmdk_slow_skipped = false;
    for &w in &s.workloads {
        let (data, engines, mixes, lats, threads): (_, Vec<EngineSpec>, _, _, Vec<usize>) = match w
        {
            WorkloadKind::Hash => (
                DataKind::Hash,
                s.engines.iter().map(|&e| EngineSpec::plain(e)).collect(),
                s.mixes.clone(),
                s.latencies.clone(),
                s.threads.clone(),
            ),
            WorkloadKind::Btree => (
                DataKind::Tree,
                s.engines.iter().map(|&e| EngineSpec::plain(e)).collect(),
                s.btree_mixes.clone(),
                s.latencies.clone(),
                s.threads.clone(),
            ),
            WorkloadKind::Latency | WorkloadKind::LatencySplit => {
                let mut engines: Vec<EngineSpec> = s
                    .engines
                    .iter()
                    .filter(|&&e| e != EngineId::Volatile && e != EngineId::Pmdk)
                    .map(|&e| EngineSpec::plain(e))
                    .collect();
                if engines.is_empty() {
                    engines = s.engines.iter().map(|&e| EngineSpec::plain(e)).collect();
                } else {
                    if s.engines.contains(&EngineId::Volatile) {
                        notes.push(format!(
                            "{}: volatile skipped (it flushes nothing, so the emulated NVM \
                             latency cannot change it)",
                            w.name()
                        ));
                    }
                    if s.engines.contains(&EngineId::Pmdk) {
                        notes.push(format!(
                            "{}: pmdk skipped (libpmemobj flushes by itself; NVM latency \
                             cannot be emulated for it)",
                            w.name()
                        ));
                    }
                }
                let mut threads: Vec<usize> =
                    s.threads.iter().copied().filter(|&t| t >= 2).collect();
                if threads.is_empty() {
                    threads = vec![2];
                    notes.push(format!(
                        "{}: needs concurrent writers, so it runs on 2 threads",
                        w.name()
                    ));
                }
                (
                    DataKind::Hash,
                    engines,
                    if w == WorkloadKind::LatencySplit {
                        vec![100]
                    } else {
                        s.sweep_mixes.clone()
                    },
                    s.sweep_latencies.clone(),
                    threads,
                )
            }
            WorkloadKind::Breakdown => (
                DataKind::Hash,
                breakdown_engines().to_vec(),
                s.sweep_mixes.clone(),
                s.latencies.clone(),
                s.threads.clone(),
            ),
            WorkloadKind::Tpcc | WorkloadKind::Tatp => {
                let (data, pct) = if w == WorkloadKind::Tpcc {
                    (DataKind::Tpcc, TPCC_UPDATE_PCT)
                } else {
                    (DataKind::Tatp, TATP_UPDATE_PCT)
                };
                (
                    data,
                    s.engines.iter().map(|&e| EngineSpec::plain(e)).collect(),
                    vec![pct],
                    s.latencies.clone(),
                    s.threads.clone(),
                )
            }
        };
        if mixes.is_empty() {
            notes.push(format!(
                "{}: skipped (it needs an update percentage above 0)",
                w.name()
            ));
        }
        for &update_pct in &mixes {
            for &nvm_latency_ns in &lats {
                for &t in &threads {
                    for e in &engines {
                        if e.id == EngineId::Pmdk && nvm_latency_ns > 0 {
                            pmdk_slow_skipped = true;
                            continue;
                        }
                        specs.push(Spec {
                            engine: e.clone(),
                            workload: w.name(),
                            data,
                            threads: t,
                            update_pct,
                            dedicated_reader: w == WorkloadKind::LatencySplit,
                            nvm_latency_ns,
                        });
                    }
                }
            }
        }
    }
    if pmdk_slow_skipped {
        notes.push(
            "pmdk runs only at 0 ns emulated latency (libpmemobj flushes by itself, so \
             no latency can be added to it)"
                .into(),
        );
    }
    (specs, notes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct P {
        #[command(flatten)]
        b: BenchArgs,
    }

    fn parse(args: &[&str]) -> Result<BenchArgs, String> {
        let mut v = vec!["bench"];
        v.extend_from_slice(args);
        P::try_parse_from(v).map(|p| p.b).map_err(|e| e.to_string())
    }

    #[test]
    fn quick_defaults_plan_every_engine_workload_and_mix() {
        let s = parse(&[]).unwrap().settings();
        assert_eq!(s.mode, "quick");
        assert_eq!(s.sizes, Sizes::QUICK);
        assert_eq!((s.seconds, s.runs), (0.6, 3));
        let (specs, notes) = plan(&s);
        let count = |w: &str| specs.iter().filter(|x| x.workload == w).count();
        // Every engine of the build x 2 thread counts x 3 mixes (B+-tree: 2).
        let engines = default_engines().len();
        let available = EngineId::ALL.iter().filter(|e| e.available()).count();
        assert_eq!(engines, available);
        assert_eq!(count("hash"), engines * 6);
        assert_eq!(count("btree"), engines * 4);
        // Every engine but volatile and pmdk x 5 latencies on 2 threads.
        let swept = EngineId::ALL
            .iter()
            .filter(|&&e| e.available() && e != EngineId::Volatile && e != EngineId::Pmdk)
            .count();
        assert_eq!(count("latency"), swept * 5);
        assert!(specs
            .iter()
            .filter(|x| x.workload == "latency")
            .all(|x| x.threads == 2
                && x.update_pct == 20
                && x.engine.label != "volatile"
                && x.engine.label != "pmdk"));
        // 3 Pisces variants x 2 thread counts.
        assert_eq!(count("breakdown"), 6);
        let labels: Vec<_> = specs
            .iter()
            .filter(|x| x.workload == "breakdown")
            .map(|x| x.engine.label.as_str())
            .collect();
        assert_eq!(labels[..3], ["pisces-whole", "pisces-diff", "pisces"]);
        assert!(notes.iter().any(|n| n.contains("volatile skipped")));
        // Engines of one configuration are measured back to back.
        let first: Vec<_> = specs[..engines]
            .iter()
            .map(|x| x.engine.label.as_str())
            .collect();
        let want: Vec<_> = EngineId::ALL
            .iter()
            .filter(|e| e.available())
            .map(|e| e.name())
            .collect();
        assert_eq!(first, want);
    }

    #[test]
    fn pmdk_runs_only_where_latency_is_not_emulated() {
        if !EngineId::Pmdk.available() {
            let e = parse(&["--engines", "pmdk"]).err().unwrap();
            assert!(e.contains("libpmemobj-dev"), "{e}");
            return;
        }
        let s = parse(&["--engines", "pisces,pmdk", "--nvm-latency-ns", "0,300"])
            .unwrap()
            .settings();
        let (specs, notes) = plan(&s);
        assert!(specs.iter().any(|x| x.engine.id == EngineId::Pmdk));
        assert!(specs
            .iter()
            .all(|x| x.engine.id != EngineId::Pmdk || x.nvm_latency_ns == 0));
        assert!(specs
            .iter()
            .any(|x| x.engine.id == EngineId::Pisces && x.nvm_latency_ns == 300));
        assert!(notes.iter().any(|n| n.contains("pmdk runs only at 0 ns")));
    }

    #[test]
    fn full_mode_and_explicit_lists() {
        let s = parse(&["--full"]).unwrap().settings();
        assert_eq!(s.sizes, Sizes::FULL);
        assert_eq!(s.mixes, [0, 2, 20, 40]);
        assert_eq!(s.btree_mixes, [0, 2, 20, 40]);
        let s = parse(&[
            "--engines",
            "undo,pisces,undo",
            "--threads",
            "2,1,2",
            "--update-pct",
            "20,0",
            "--nvm-latency-ns",
            "300",
            "--workloads",
            "latency,hash",
            "--seconds",
            "0.5",
            "--runs",
            "1",
        ])
        .unwrap()
        .settings();
        assert_eq!(s.engines, [EngineId::Undo, EngineId::Pisces]);
        assert_eq!(s.threads, [1, 2]);
        assert_eq!(s.mixes, [0, 20]);
        assert_eq!(s.btree_mixes, [0, 20]);
        assert_eq!(s.sweep_mixes, [20]);
        assert_eq!(s.latencies, [300]);
        assert_eq!(s.sweep_latencies, [300]);
        let (specs, _) = plan(&s);
        assert_eq!(specs[0].workload, "latency");
        assert_eq!(specs.len(), 2 + 2 * 2 * 2);
        assert!(specs.iter().all(|x| x.nvm_latency_ns == 300));
    }

    #[test]
    fn workloads_needing_writers_skip_zero_percent() {
        let s = parse(&["--update-pct", "0", "--workloads", "breakdown"])
            .unwrap()
            .settings();
        let (specs, notes) = plan(&s);
        assert!(specs.is_empty());
        assert!(notes[0].contains("breakdown: skipped"), "{notes:?}");
        let s = parse(&["--threads", "1", "--workloads", "latency"])
            .unwrap()
            .settings();
        let (specs, notes) = plan(&s);
        assert!(specs.iter().all(|x| x.threads == 2));
        assert!(notes.iter().any(|n| n.contains("2 threads")), "{notes:?}");
    }

    #[test]
    fn tpcc_and_tatp_run_their_own_mix_in_full_mode_or_when_named() {
        let s = parse(&[]).unwrap().settings();
        assert!(!s.workloads.contains(&WorkloadKind::Tpcc));
        assert!(!s.workloads.contains(&WorkloadKind::Tatp));
        let s = parse(&["--full"]).unwrap().settings();
        assert!(s
            .workloads
            .ends_with(&[WorkloadKind::Tpcc, WorkloadKind::Tatp]));
        let s = parse(&[
            "--workloads",
            "tpcc,tatp",
            "--engines",
            "pisces,undo",
            "--update-pct",
            "0,40",
            "--tatp-subscribers",
            "1000",
        ])
        .unwrap()
        .settings();
        assert_eq!(s.sizes.tatp_subscribers, 1000);
        assert_eq!(s.sizes.tpcc_items, Sizes::QUICK.tpcc_items);
        let (specs, notes) = plan(&s);
        assert!(notes.is_empty(), "{notes:?}");
        // 2 engines x 2 thread counts each, one mix each.
        assert_eq!(specs.len(), 8);
        for x in &specs {
            match x.workload {
                "tpcc" => assert_eq!((x.data, x.update_pct), (DataKind::Tpcc, 100)),
                "tatp" => assert_eq!((x.data, x.update_pct), (DataKind::Tatp, 20)),
                w => panic!("{w}"),
            }
        }
    }

    #[test]
    fn bad_values_are_refused_with_a_reason() {
        for (args, want) in [
            (
                vec!["--engines", "nosuch"],
                "known engines: pisces, undo, mvcc, pmdk, volatile",
            ),
            (vec!["--threads", "0"], "thread count"),
            (vec!["--threads", "1,x"], "thread count"),
            (vec!["--update-pct", "101"], "percentage"),
            (vec!["--nvm-latency-ns=-1"], "latency"),
            (vec!["--nvm-latency-ns", "2000000"], "latency"),
            (vec!["--seconds", "0"], "duration"),
            (vec!["--seconds", "nan"], "duration"),
            (vec!["--runs", "0"], "0"),
            (vec!["--workloads", "tpc-c"], "invalid value"),
            (vec!["--tpcc-items", "0"], "key count"),
            (vec!["--quick", "--full"], "cannot be used with"),
            (vec!["--hash-buckets", "0"], "bucket count"),
            (vec!["--btree-keys", "0"], "key count"),
        ] {
            let e = parse(&args)
                .err()
                .unwrap_or_else(|| panic!("{args:?} accepted"));
            assert!(e.contains(want), "{args:?}: {e}");
        }
    }
}
