//! Command-line arguments of `pisces-bench` and the [`Settings`] they resolve to
//! (defaults of `--quick` and `--full` filled in). The plan of measurements is made
//! from the settings by [`crate::cli::plan`].

use crate::engines::Engine;
use crate::workloads::select::{self, WorkloadKind, DISK_HASH_MIXES, DISK_YCSB_MIXES, SET_MIXES};
use crate::workloads::strmap::STRMAP_MIXES;
use crate::workloads::ycsb::YCSB_MIXES;
use crate::workloads::Sizes;
use clap::Args;
use pisces::tools::containers::MAX_BUCKETS;
use pisces::PersistenceDomain;
use std::path::PathBuf;

/// Emulated NVM write latencies of the read-latency sweep (paper Fig 9c).
pub const LATENCY_SWEEP_NS: [u64; 5] = [0, 100, 300, 600, 1000];
/// Update percentage of the latency sweep and the breakdown (paper Fig 9a, 9c: 20 %).
pub const SWEEP_UPDATE_PCT: u32 = 20;
/// Emulated NVM write latencies of the marker ablation.
pub const MARKER_LATENCIES_NS: [u64; 2] = [0, 1000];
/// Sizes of the `set` workload (both modes).
pub const SET_KEYS: [usize; 2] = [1000, 100_000];
/// Sizes of the `tree-set` workload in quick mode: the peers' 1M keys scaled down to
/// 100K (drawn from 200K).
pub const TREE_SET_KEYS_QUICK: [usize; 2] = [1000, 100_000];
/// Sizes of the `tree-set` workload in full mode: the peers' 1K and 1M (drawn from 2M).
pub const TREE_SET_KEYS_FULL: [usize; 2] = [1000, 1_000_000];

/// Engines of `set` and `tree-set` in the main job (quick mode, no `--workloads`),
/// unless `--engines` is given: Pisces, the in-house baseline `undo`, the physical
/// limit `bare`, and the key-value peers (which run `set`, not `tree-set`).
pub const MAIN_SET_ENGINES: [Engine; 6] = [
    Engine::PISCES,
    Engine::UNDO,
    Engine::BARE,
    Engine::REDB,
    Engine::LMDB,
    Engine::CANOPYDB,
];
/// Thread counts of `set` and `tree-set` in the main job, unless `--threads` is given.
pub const MAIN_SET_THREADS: [usize; 1] = [1];
/// Update mixes of `set` and `tree-set` in the main job, unless `--update-pct` is
/// given (the peers' 1 and 10 %; 100 % runs when the sets are named).
pub const MAIN_SET_MIXES: [u32; 2] = [1, 10];
/// MiB of log the `recovery` workload leaves to a crash by default (all fill threads).
pub const RECOVERY_LOG_MIB: u64 = 256;
/// MiB of log the `replay` workload leaves to a crash by default (all fill threads).
pub const REPLAY_LOG_MIB: u64 = 1024;

/// Arguments of `pisces-bench`.
#[derive(Args, Debug, Clone)]
#[command(after_help = "\
Each measurement creates a fresh pool under /dev/shm (DRAM with the emulated NVM write \
latency of --nvm-latency-ns charged per flushed cache line), preloads it, and runs the \
worker threads for --seconds, one operation per transaction; the pool is removed \
afterwards. Runs are interleaved (run 1 of every configuration, then run 2, ...), and \
the ratios against Pisces are taken within each run, then the median over runs.\n\n\
Defaults: --quick. quick: hash table 10K buckets / 20K pairs, B+-tree 100K keys, \
updates 0,2,20 % (B+-tree 0,20 %), 0.4 s x 3 runs. full: the paper's sizes (10K buckets / 100K pairs, \
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
set and tree-set (the set benchmarks of the published PTM peers): N keys drawn from 0..2N, an update removes a member and adds it back in \
one transaction, a read looks one up; updates 1,10,100 %; one measurement per size, \
reported as set-1k, set-100k, tree-set-1k, ... Sizes: set 1K and 100K; tree-set quick \
1K and 100K (the peers' 1M scaled down), full 1K and 1M. In the quick default (no \
--workloads: the main job) they run reduced, so that its time does not grow: engines \
pisces, undo, bare, redb, lmdb, canopydb (the peers on set only), 1 thread, 1 and 10 % updates \
(--engines, --threads, --update-pct override this); named in --workloads they run with \
the run's engines and threads and 1, 10, 100 %.\n\n\
hot (only when named): every transaction reads 4 and updates 2 of 16 hot counters, on \
2+ threads over the latency sweep; sp3 runs also as sp3-no-ev (early_visibility=false). \
recovery (only when named): --recovery-log-mib of log (default 256) left to a crash by 2 \
threads, then Pool::open timed with 1 and 2 recovery threads (engines whose logs can hold \
it; slow). replay (only when named): spht only, --replay-log-mib of log (default 1024) \
left to a crash with the replayer held (hash table and B+-tree), then the replay timed per \
mode (forward links, timestamp scan, backward links), duplicate filter on/off and 1 and 2 \
threads (slow); --replay-fill-threads logs, --replay-writes N random words per \
transaction of a --replay-heap-mib heap instead of the containers, --replay-txns \
transactions instead of a log size (the SPHT paper's replay setting).\n\n\
capi runs only when named in --workloads: the hash workload's operations issued from C \
through the C interface (one pisces_run per operation, the C side compiled into the \
harness), each engine measured from Rust and then from C (labelled <engine>-c) with \
the hash mixes; its table shows C time / Rust time.\n\n\
ycsb (only when named): a YCSB-style key-value table of 100K records, 8-byte keys and \
64-byte values, zipfian requests (constant 0.99, hot records scattered), one operation \
per transaction; mixes A (50 % updates), B (5 %), C (read-only), reported by update_pct. \
The library's engines run it on HashMap.\n\n\
strmap (only when named): a string-keyed map of 100K records, byte-string keys (user + \
10 digits) and values of 16..=512 bytes (the length a function of the key and a stamp), \
ycsb's zipfian requests, one operation per transaction; a read fetches a value, an \
update replaces one whole (the old value freed); 50 % updates unless --update-pct. The \
library's engines run it on BTreeMap<PBytes, PBytes>, the peers on byte-keyed tables; \
after each measurement every record is read back and checked.\n\n\
markers (only when named) compares the spht engine's SPHT global durability marker \
with NV-HTM's sequential per-thread commit markers (spht-nvhtm) on the hash table at \
20 % updates, 0 and 1000 ns emulated latency.\n\n\
Engines: every engine of the library in this build by default; pmdk is in the build only \
where libpmemobj was found when it was built, and runs only at 0 ns emulated latency (it \
flushes by itself). The peers redb, lmdb and canopydb (key-value stores a Rust user \
might pick instead of a PTM) run when named, on hash, set, ycsb and strmap only, at 0 ns, on \
their own files under /dev/shm: redb with Durability::Immediate (an fsync per commit), \
LMDB with its default sync (an fdatasync and an O_DSYNC meta-page write per commit), canopydb with its write-ahead log \
and commit_with(true) (the log fsynced before a commit returns); on /dev/shm an fsync is \
nearly free. redb and LMDB allow one write transaction at a time, canopydb concurrent \
optimistic ones (a conflict is run again); all allow concurrent readers.\n\n\
--dir PATH measures durable commits on a real file system: every pool is created under \
PATH on the file medium (an ordinary file mapped MAP_SHARED; a fence msyncs the pages \
its thread flushed, so a commit returns after its pages reached the device), and the \
peers' files go under PATH too, each at its durable setting. Defaults there: every \
durable engine of the library in this build but pmdk (its own pool file is preloaded \
with a sync per persist: very slow; it runs when named) and the peers redb, lmdb, \
canopydb; the \
workloads hash (20 % updates), ycsb (A: 50 %) and bulk (one writer, 10 inserts per \
transaction into an empty table of 100K keys); threads 1,2 (bulk: 1); one run (every \
preload transaction is durable too, so the preloads take most of the time). volatile and \
bare are skipped (they make nothing durable), the emulated-latency workloads (latency, \
latency-split, markers) and recovery and replay are skipped, and --nvm-latency-ns and \
--domain are refused. The report's header names the file system and the device PATH is \
on (from /proc/self/mountinfo), and a table gives per write commit: durable commits per \
second, the commit latency (p50, p99), the msync calls of the file medium (every thread \
of the process, the engines' background threads included; pmdk's libpmemobj syncs by \
itself and the peers fsync by themselves, so theirs are not counted: the table states \
their commit path's syncs, marked as stated, not measured), and the bytes written to \
the device: the growth of write_bytes in /proc/self/io, i.e. the pages this process \
dirtied in the page cache (each sent to the device once when the next sync writes it \
back) plus its direct I/O; the file system's journal, written by its own thread, is \
not included. With --update-pct 0 each engine's read-only measurement on the file medium \
has a control on the DRAM medium under /dev/shm beside it (labelled <engine>@dram), and a \
table gives the throughput on the file medium over the DRAM medium.\n\n\
Worker thread i is pinned to the i-th CPU of the process's affinity mask, round-robin, \
unless --no-pin is given; with --dir the scheduler places them unless --pin is given (a \
durable commit sleeps until the device's completion interrupt wakes it, and a thread \
pinned away from the CPU that takes the interrupt waits for a cross-CPU wake-up at \
every sync; unpinned, the scheduler moves it there).\n\n\
--processes 1,2 runs the hash, set and tree-set workloads also with their workers in \
several processes on one pool: for N above 1 the harness creates the pool exclusively \
under /dev/shm (DRAM medium, fixed size), preloads it, writes where the data set is \
into the pool's root object and closes it; then it opens the pool shared and starts N \
worker processes (this program again), each of which opens the pool shared, finds the \
data set from the pool's root, starts its --threads worker threads (pinned as the \
threads of one process would be: worker i of the measurement to the i-th CPU) and waits; \
all start together, run for --seconds, and report their counts, which are summed into \
one row as the threads of one process are. Rows are labelled <engine>@<N>proc and their \
threads column counts every worker thread of every process, so pisces@2proc at 2 \
threads (2 processes x 1 thread) sits beside pisces at 2 threads (1 process x 2 \
threads), and a table gives N processes over the same number of threads in one process \
(goal: 2 processes at least 0.9x 2 threads on the hash table at 20 % updates and on \
read-only lookups). Only the engines that can share a pool run there (pisces and \
volatile); the others are skipped with the library's reason. Without 1 in the list only \
the measurements with several processes run for those workloads; the other workloads \
run in one process.")]
pub struct BenchArgs {
    /// Scaled-down data sets and short runs (the default).
    #[arg(long, conflicts_with = "full")]
    pub quick: bool,
    /// The paper's data-set sizes and longer runs.
    #[arg(long)]
    pub full: bool,
    /// Measure durable commits on a real file system: pools on the file medium (msync
    /// at every fence) and the peers' files in PATH (created if missing); see below.
    #[arg(long, value_name = "PATH", conflicts_with_all = ["nvm_latency_ns", "domains"])]
    pub dir: Option<PathBuf>,
    /// Engines to compare, comma-separated [default: every engine of the library in
    /// this build, of pisces,undo,mvcc,pmdk,volatile,sp3,spht,timestone,bare; the peers
    /// redb,lmdb,canopydb when named; --dir: the durable ones but pmdk, and the
    /// peers].
    #[arg(long, value_delimiter = ',', value_parser = Engine::parse)]
    pub engines: Option<Vec<Engine>>,
    /// Workloads, comma-separated [default: hash,btree,latency,breakdown,set,tree-set;
    /// --full: hash,btree,latency,breakdown,tpcc,tatp; --dir: hash,ycsb,bulk; also
    /// latency-split, hot, recovery, capi, markers, replay].
    #[arg(long, value_delimiter = ',', value_enum)]
    pub workloads: Option<Vec<WorkloadKind>>,
    /// Worker-thread counts, comma-separated [default: 1,2].
    #[arg(long, value_delimiter = ',', value_parser = parse_threads)]
    pub threads: Option<Vec<usize>>,
    /// Processes the workers of a measurement run in, comma-separated [default: 1]. 1:
    /// this process, its worker threads on a pool it opens alone; N above 1: N worker
    /// processes of --threads threads each on one pool they all open shared (rows
    /// labelled <engine>@<N>proc; their threads column counts the threads of every
    /// process); see below.
    #[arg(long, value_delimiter = ',', value_parser = parse_processes, conflicts_with = "dir")]
    pub processes: Option<Vec<usize>>,
    /// Percentages of update transactions, comma-separated [default: see below].
    #[arg(long = "update-pct", value_delimiter = ',', value_parser = parse_pct)]
    pub update_pct: Option<Vec<u32>>,
    /// Emulated NVM write latencies in ns per flushed cache line, comma-separated
    /// [default: 0; the latency sweep 0,100,300,600,1000].
    #[arg(long = "nvm-latency-ns", value_delimiter = ',', value_parser = parse_latency)]
    pub nvm_latency_ns: Option<Vec<u64>>,
    /// Persistence domains the pools run under, comma-separated: adr (flush + fence),
    /// eadr (persistent caches: the medium's flush writes nothing back, the fences
    /// stay) [default: adr]. An engine under eADR is labelled `<engine>@eadr`; with
    /// both, a table gives each engine's throughput under eADR over ADR and its
    /// flushes and fences per transaction under each.
    #[arg(long = "domain", value_delimiter = ',', value_parser = parse_domain)]
    pub domains: Option<Vec<PersistenceDomain>>,
    /// Seconds per measurement [default: 0.4 quick, 10 full].
    #[arg(long, value_parser = parse_seconds)]
    pub seconds: Option<f64>,
    /// Runs of every configuration (the table shows medians) [default: 3; --dir: 1].
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub runs: Option<u32>,
    /// Report directory [default: a fresh target/bench/YYYYMMDD-HHMMSS (UTC) in the
    /// workspace].
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
    /// Sizes of the hash set, comma-separated: one measurement each [default:
    /// 1000,100000].
    #[arg(long = "set-keys", value_delimiter = ',', value_parser = parse_keys)]
    pub set_keys: Option<Vec<usize>>,
    /// Sizes of the B+-tree set, comma-separated: one measurement each [default:
    /// 1000,100000 quick, 1000,1000000 full].
    #[arg(long = "tree-set-keys", value_delimiter = ',', value_parser = parse_keys)]
    pub tree_set_keys: Option<Vec<usize>>,
    /// MiB of log the `recovery` workload leaves to a crash (all fill threads).
    #[arg(long, default_value_t = RECOVERY_LOG_MIB,
          value_parser = clap::value_parser!(u64).range(1..=16384))]
    pub recovery_log_mib: u64,
    /// MiB of log the `replay` workload leaves to a crash (all fill threads).
    #[arg(long, default_value_t = REPLAY_LOG_MIB,
          value_parser = clap::value_parser!(u64).range(1..=16384))]
    pub replay_log_mib: u64,
    /// Logging (fill) threads of the `replay` workload: one log each.
    #[arg(long, default_value_t = crate::recovery::crash::FILL_THREADS as u8,
          value_parser = clap::value_parser!(u8).range(1..=64))]
    pub replay_fill_threads: u8,
    /// Words each `replay` fill transaction writes at random in a heap of
    /// --replay-heap-mib (the SPHT paper's replay setting); 0: the hash table and
    /// B+-tree fill.
    #[arg(long, default_value_t = 0,
          value_parser = clap::value_parser!(u8).range(0..=64))]
    pub replay_writes: u8,
    /// MiB of words the `replay` word fill writes into (its key space; with
    /// --replay-writes).
    #[arg(long, default_value_t = 1,
          value_parser = clap::value_parser!(u16).range(1..=4096))]
    pub replay_heap_mib: u16,
    /// Transactions the `replay` fill commits in all, instead of filling
    /// --replay-log-mib of log (0: by log size).
    #[arg(long, default_value_t = 0)]
    pub replay_txns: u32,
    /// Pin worker thread i to the i-th CPU of the process's affinity mask, round-robin
    /// (the default, but with --dir).
    #[arg(long, overrides_with = "no_pin")]
    pub pin: bool,
    /// Let the scheduler place the worker threads (the default with --dir).
    #[arg(long = "no-pin", overrides_with = "pin")]
    pub no_pin: bool,
    /// Options of one engine for all its measurements (those the plan does not set
    /// itself), `ENGINE:KEY=VALUE[,KEY=VALUE...]`; repeatable. E.g.
    /// `timestone:clog_mib=63,olog_regions=8`.
    #[arg(long = "engine-options", value_parser = parse_engine_options)]
    pub engine_options: Vec<(Engine, pisces::EngineOptions)>,
    /// When the key-value data sets' update transactions return: `on-return` (after
    /// they are durable, the default) or `deferred` (once visible; each worker waits
    /// for durability at its end, inside its measured time). With `deferred` the peers
    /// and the other workloads are left out (they commit durable on return).
    #[arg(long, value_name = "WHEN", default_value = "on-return", value_parser = parse_durability)]
    pub durability: pisces::Durability,
    /// Also write the report as Markdown to FILE (the `summary.md` of the report
    /// directory, with the command, date, build commit, machine, medium and load),
    /// replacing FILE unless --markdown-append is given.
    #[arg(long, value_name = "FILE")]
    pub markdown: Option<PathBuf>,
    /// Add this run to the end of the --markdown FILE instead of replacing it.
    #[arg(long = "markdown-append", requires = "markdown")]
    pub markdown_append: bool,
    /// Copy the SVG plots into DIR and link them from the --markdown FILE there
    /// [default: link them in the report directory].
    #[arg(long = "markdown-plots", value_name = "DIR", requires = "markdown")]
    pub markdown_plots: Option<PathBuf>,
}

fn parse_engine_options(s: &str) -> Result<(Engine, pisces::EngineOptions), String> {
    let (name, opts) = s
        .split_once(':')
        .ok_or_else(|| format!("`{s}`: expected ENGINE:KEY=VALUE[,KEY=VALUE...]"))?;
    let engine = Engine::parse(name)?;
    let opts: pisces::EngineOptions = opts.parse().map_err(|e| format!("`{s}`: {e}"))?;
    Ok((engine, opts))
}

fn parse_durability(s: &str) -> Result<pisces::Durability, String> {
    match s.trim() {
        "on-return" => Ok(pisces::Durability::OnReturn),
        "deferred" => Ok(pisces::Durability::Deferred),
        _ => Err(format!("`{s}` is not a durability (on-return, deferred)")),
    }
}

fn parse_domain(s: &str) -> Result<PersistenceDomain, String> {
    match PersistenceDomain::from_name(s.trim()) {
        Some(d @ (PersistenceDomain::Adr | PersistenceDomain::Eadr)) => Ok(d),
        _ => Err(format!("`{s}` is not a persistence domain (adr, eadr)")),
    }
}

fn parse_threads(s: &str) -> Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(n) if (1..=64).contains(&n) => Ok(n),
        _ => Err(format!("`{s}` is not a thread count (1 to 64)")),
    }
}

fn parse_processes(s: &str) -> Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(n) if (1..=16).contains(&n) => Ok(n),
        _ => Err(format!("`{s}` is not a process count (1 to 16)")),
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
    pub engines: Vec<Engine>,
    /// Workloads, in the order given.
    pub workloads: Vec<WorkloadKind>,
    /// Thread counts, ascending (per process).
    pub threads: Vec<usize>,
    /// Process counts, ascending (`--processes`; 1: the harness's own process).
    pub processes: Vec<usize>,
    /// Update mixes of hash.
    pub mixes: Vec<u32>,
    /// Update mixes of btree.
    pub btree_mixes: Vec<u32>,
    /// Update mixes of latency and breakdown.
    pub sweep_mixes: Vec<u32>,
    /// Update mixes of set and tree-set.
    pub set_mixes: Vec<u32>,
    /// Engines of set and tree-set (those of `engines`, except in the main job).
    pub set_engines: Vec<Engine>,
    /// Thread counts of set and tree-set (those of `threads`, except in the main job).
    pub set_threads: Vec<usize>,
    /// Update mixes of ycsb (A, B, C by default).
    pub ycsb_mixes: Vec<u32>,
    /// Update mixes of strmap (A by default).
    pub strmap_mixes: Vec<u32>,
    /// NVM latencies of hash, btree and breakdown.
    pub latencies: Vec<u64>,
    /// NVM latencies of the latency sweep.
    pub sweep_latencies: Vec<u64>,
    /// NVM latencies of the marker ablation.
    pub marker_latencies: Vec<u64>,
    /// Persistence domains, in the order given.
    pub domains: Vec<PersistenceDomain>,
    /// Seconds per measurement.
    pub seconds: f64,
    /// Runs per configuration.
    pub runs: u32,
    /// Data-set sizes.
    pub sizes: Sizes,
    /// Sizes of the hash set (one measurement each), ascending.
    pub set_keys: Vec<usize>,
    /// Sizes of the B+-tree set (one measurement each), ascending.
    pub tree_set_keys: Vec<usize>,
    /// Seed.
    pub seed: u64,
    /// Report directory, if given.
    pub out: Option<PathBuf>,
    /// MiB of log of the `recovery` workload.
    pub recovery_log_mib: u64,
    /// MiB of log of the `replay` workload.
    pub replay_log_mib: u64,
    /// How the `replay` workload fills its logs.
    pub replay_fill: crate::recovery::ReplayFill,
    /// Pin worker threads to CPUs.
    pub pin: bool,
    /// Options given to an engine's measurements (`--engine-options`).
    pub engine_options: Vec<(Engine, pisces::EngineOptions)>,
    /// `--dir`: the directory of a run on a file system (pools on the file medium,
    /// the peers' files there); None: emulated PM under [`crate::measure::pool_dir`].
    pub disk: Option<PathBuf>,
    /// `--durability deferred`: the key-value data sets' updates commit with
    /// durability deferred ([`crate::workloads::update_options`]).
    pub deferred: bool,
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
    /// The main job: quick mode with its default workloads (what `pisces-bench` runs
    /// with no arguments). It runs the set workloads in a reduced form.
    pub fn is_main_job(&self) -> bool {
        !self.full && self.workloads.is_none() && self.dir.is_none()
    }

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
        let main_job = self.is_main_job();
        let disk = self.dir.is_some();
        let default_engines = if disk {
            Engine::disk_defaults()
        } else {
            Engine::available()
        };
        let engines = dedup_ordered(self.engines.as_deref().unwrap_or(&default_engines));
        let threads = dedup_sorted(self.threads.as_deref().unwrap_or(&[1, 2]));
        let set_engines = match (&self.engines, main_job) {
            (None, true) => MAIN_SET_ENGINES
                .iter()
                .copied()
                .filter(|e| e.in_build())
                .collect(),
            _ => engines.clone(),
        };
        let set_threads = match (&self.threads, main_job) {
            (None, true) => MAIN_SET_THREADS.to_vec(),
            _ => threads.clone(),
        };
        let set_mixes: &[u32] = if main_job {
            &MAIN_SET_MIXES
        } else {
            &SET_MIXES
        };
        Settings {
            mode: if full { "full" } else { "quick" },
            engines,
            set_engines,
            set_threads,
            workloads: dedup_ordered(self.workloads.as_deref().unwrap_or(if disk {
                &select::DISK
            } else if full {
                &select::FULL
            } else {
                &select::QUICK
            })),
            threads,
            processes: dedup_sorted(self.processes.as_deref().unwrap_or(&[1])),
            btree_mixes: explicit_mixes
                .clone()
                .unwrap_or_else(|| default_btree_mixes.to_vec()),
            set_mixes: explicit_mixes.clone().unwrap_or_else(|| set_mixes.to_vec()),
            ycsb_mixes: explicit_mixes.clone().unwrap_or_else(|| {
                if disk {
                    DISK_YCSB_MIXES.to_vec()
                } else {
                    YCSB_MIXES.to_vec()
                }
            }),
            strmap_mixes: explicit_mixes
                .clone()
                .unwrap_or_else(|| STRMAP_MIXES.to_vec()),
            mixes: explicit_mixes.unwrap_or_else(|| {
                if disk {
                    DISK_HASH_MIXES.to_vec()
                } else {
                    default_mixes.to_vec()
                }
            }),
            sweep_mixes,
            latencies: explicit_lat.clone().unwrap_or_else(|| vec![0]),
            marker_latencies: explicit_lat
                .clone()
                .unwrap_or_else(|| MARKER_LATENCIES_NS.to_vec()),
            sweep_latencies: explicit_lat.unwrap_or_else(|| LATENCY_SWEEP_NS.to_vec()),
            domains: dedup_ordered(self.domains.as_deref().unwrap_or(&[PersistenceDomain::Adr])),
            seconds: self.seconds.unwrap_or(if full { 10.0 } else { 0.4 }),
            runs: self.runs.unwrap_or(if disk { 1 } else { 3 }),
            sizes,
            set_keys: dedup_sorted(self.set_keys.as_deref().unwrap_or(&SET_KEYS)),
            tree_set_keys: dedup_sorted(self.tree_set_keys.as_deref().unwrap_or(if full {
                &TREE_SET_KEYS_FULL
            } else {
                &TREE_SET_KEYS_QUICK
            })),
            seed: self.seed,
            out: self.out.clone(),
            recovery_log_mib: self.recovery_log_mib,
            replay_log_mib: self.replay_log_mib,
            replay_fill: crate::recovery::ReplayFill {
                threads: usize::from(self.replay_fill_threads),
                writes: usize::from(self.replay_writes),
                heap_mib: u64::from(self.replay_heap_mib),
                txns: u64::from(self.replay_txns),
            },
            pin: if self.pin || self.no_pin {
                self.pin
            } else {
                self.dir.is_none()
            },
            engine_options: self.engine_options.clone(),
            disk: self.dir.clone(),
            deferred: self.durability == pisces::Durability::Deferred,
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct P {
        #[command(flatten)]
        b: BenchArgs,
    }

    /// Parse `pisces-bench` arguments.
    pub(crate) fn parse(args: &[&str]) -> Result<BenchArgs, String> {
        let mut v = vec!["pisces-bench"];
        v.extend_from_slice(args);
        P::try_parse_from(v).map(|p| p.b).map_err(|e| e.to_string())
    }

    #[test]
    fn engine_options_parse_and_reach_the_plan() {
        let s = parse(&[
            "--engines",
            "pisces,timestone",
            "--workloads",
            "hash",
            "--engine-options",
            "timestone:clog_mib=63,olog_regions=8",
        ])
        .unwrap()
        .settings();
        assert_eq!(s.engine_options.len(), 1);
        let (specs, notes) = crate::cli::plan::plan(&s);
        for sp in &specs {
            let o = sp.engine.options();
            if sp.engine.engine.name() == "timestone" {
                assert_eq!(o.get("clog_mib"), Some("63"));
                assert_eq!(o.get("olog_regions"), Some("8"));
            } else {
                assert!(o.is_empty());
            }
        }
        assert!(notes.iter().any(|n| n.contains("clog_mib=63")), "{notes:?}");
        assert!(parse(&["--engine-options", "timestone"]).is_err());
        assert!(parse(&["--engine-options", "nosuch:a=1"]).is_err());
    }

    #[test]
    fn full_mode_and_explicit_lists() {
        let s = parse(&["--full"]).unwrap().settings();
        assert_eq!(s.mode, "full");
        assert_eq!(s.sizes, Sizes::FULL);
        assert_eq!(s.mixes, [0, 2, 20, 40]);
        assert_eq!(s.btree_mixes, [0, 2, 20, 40]);
        assert_eq!(s.set_mixes, SET_MIXES);
        assert_eq!(s.tree_set_keys, TREE_SET_KEYS_FULL);
        assert_eq!(s.engines, Engine::available());
        let s = parse(&[
            "--engines",
            "undo,pisces,undo",
            "--threads",
            "2,1,2",
            "--update-pct",
            "20,0",
            "--nvm-latency-ns",
            "300",
        ])
        .unwrap()
        .settings();
        assert_eq!(s.engines, [Engine::UNDO, Engine::PISCES]);
        assert_eq!(s.threads, [1, 2]);
        assert_eq!(s.mixes, [0, 20]);
        assert_eq!(s.btree_mixes, [0, 20]);
        assert_eq!(s.set_mixes, [0, 20]);
        assert_eq!(s.sweep_mixes, [20]);
        assert_eq!(s.latencies, [300]);
        assert_eq!(s.sweep_latencies, [300]);
        assert_eq!(s.set_keys, SET_KEYS);
        assert_eq!(s.tree_set_keys, TREE_SET_KEYS_QUICK);
    }

    #[test]
    fn the_help_names_the_engines_of_the_build() {
        use clap::CommandFactory;
        let help = P::command().render_long_help().to_string();
        assert!(!help.contains("Not built yet"), "{help}");
        assert!(
            help.contains("every engine of the library in this build"),
            "{help}"
        );
        assert!(help.contains("redb,lmdb,canopydb when named"), "{help}");
        assert!(help.contains("--no-pin"), "{help}");
        assert!(help.contains("tree-set"), "{help}");
    }

    #[test]
    fn pmdk_is_refused_only_where_the_build_lacks_it() {
        let r = parse(&["--engines", "pmdk"]);
        if Engine::PMDK.in_build() {
            assert_eq!(r.unwrap().settings().engines, [Engine::PMDK]);
        } else {
            let e = r.err().unwrap();
            assert!(e.contains("libpmemobj-dev"), "{e}");
        }
    }

    #[test]
    fn bad_values_are_refused_with_a_reason() {
        for (args, want) in [
            (
                vec!["--engines", "nosuch"],
                "known engines: pisces, undo, mvcc, pmdk, volatile",
            ),
            (vec!["--engines", "pisces,sqlite"], "redb, lmdb"),
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
            (vec!["--set-keys", "10,0"], "key count"),
            (vec!["--tree-set-keys", "x"], "key count"),
        ] {
            let e = parse(&args)
                .err()
                .unwrap_or_else(|| panic!("{args:?} accepted"));
            assert!(e.contains(want), "{args:?}: {e}");
        }
    }

    #[test]
    fn threads_are_pinned_unless_told_otherwise_or_on_a_file_system() {
        for (args, want) in [
            (vec![], true),
            (vec!["--pin"], true),
            (vec!["--no-pin"], false),
            (vec!["--pin", "--no-pin"], false),
            (vec!["--no-pin", "--pin"], true),
            (vec!["--dir", "d"], false),
            (vec!["--dir", "d", "--pin"], true),
            (vec!["--dir", "d", "--no-pin", "--pin"], true),
            (vec!["--dir", "d", "--pin", "--no-pin"], false),
        ] {
            let s = parse(&args).unwrap().settings();
            assert_eq!(s.pin, want, "{args:?}");
        }
        let e = parse(&["--pin=no"]).err().unwrap();
        assert!(e.contains("unexpected value"), "{e}");
    }

    #[test]
    fn peers_and_ycsb_are_named_not_defaults() {
        let s = parse(&[]).unwrap().settings();
        assert!(s.engines.iter().all(|e| e.peer().is_none()));
        assert!(!s.workloads.contains(&WorkloadKind::Ycsb));
        let s = parse(&["--engines", "pisces,redb,lmdb", "--workloads", "ycsb"])
            .unwrap()
            .settings();
        assert_eq!(s.engines, [Engine::PISCES, Engine::REDB, Engine::LMDB]);
        assert_eq!(s.ycsb_mixes, crate::workloads::ycsb::YCSB_MIXES);
        let s = parse(&["--workloads", "ycsb", "--update-pct", "5"])
            .unwrap()
            .settings();
        assert_eq!(s.ycsb_mixes, [5]);
    }

    #[test]
    fn seconds_are_bounded() {
        assert_eq!(parse_seconds("0.5"), Ok(0.5));
        for bad in ["0", "-1", "nan", "inf", "x", "4000"] {
            assert!(parse_seconds(bad).is_err(), "{bad}");
        }
    }
}
