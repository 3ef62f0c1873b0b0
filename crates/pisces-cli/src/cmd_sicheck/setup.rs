//! `pisces sicheck`'s arguments, their bounded settings, the pool's size and the
//! verdict: what the run in one process and the run in several share.

use clap::{Args, ValueEnum};
use pisces::{EngineId, EngineOptions};
use pisces_verify::sicheck::store::{LIST_CAPACITY, MAX_KEYS as STORE_KEYS};
use pisces_verify::sicheck::{check, History, Isolation, Workload, WorkloadConfig};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// Most transactions per run (the key store holds 131072 keys of 32 appends).
pub(super) const MAX_TXNS: usize = 1_000_000;
/// Most threads.
pub(super) const MAX_THREADS: usize = 64;
/// Most active keys.
pub(super) const MAX_KEYS: usize = 4096;
/// Most processes.
pub(super) const MAX_PROCESSES: usize = 16;
/// Redo log bytes per thread.
pub(super) const LOG_BYTES: usize = 256 << 10;

/// Arguments of `pisces sicheck`.
#[derive(Args, Debug, Clone)]
#[command(after_help = "The last line printed is exactly \
`transactions: <N>, forbidden anomalies: <F>, write skew: <W>`. \
Exit status: 0 no forbidden anomaly for the isolation level; 1 some; 2 usage or setup errors.")]
pub struct SicheckArgs {
    /// Engine under test: any engine of this build on the pool format (every one but
    /// pmdk, which keeps its own pool file).
    #[arg(long, default_value = "pisces", value_parser = parse_engine)]
    pub engine: EngineId,
    /// Isolation level: si (write skew allowed), serializable (write skew forbidden)
    /// or linearizable (judged as serializable: the history has no real-time order).
    /// The transactions ask the engine for this level when it offers it (timestone
    /// offers all three per transaction); otherwise they run at the engine's own level
    /// and the history is judged against the one asked for. They ask for none where
    /// the engine's transactions that ask for none have that level or a stronger one,
    /// so that read-only ones run as snapshots.
    #[arg(long, value_enum, default_value_t = IsolationArg::Si)]
    pub isolation: IsolationArg,
    /// Transactions to run, split over the threads (1 to 1000000).
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(1..=MAX_TXNS as u64))]
    pub txns: u64,
    /// Threads running transactions (1 to 64).
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u64).range(1..=MAX_THREADS as u64))]
    pub threads: u64,
    /// Keys active at a time (1 to 4096; each is retired after 32 appends and replaced
    /// by a fresh one). Fewer keys, more contention.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u64).range(1..=MAX_KEYS as u64))]
    pub keys: u64,
    /// Seed of the transaction generators.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Run the write-skew workload: each transaction reads both keys of a pair, waits
    /// `--pause-us`, and appends to one of them.
    #[arg(long)]
    pub write_skew: bool,
    /// Microseconds between the reads and the append of the write-skew workload, and
    /// between the reads of a transaction of the default mix that only reads (0 to
    /// 100000).
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u64).range(0..=100_000))]
    pub pause_us: u64,
    /// Most micro-operations per transaction in the default mix (1 to 64).
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u64).range(1..=64))]
    pub max_ops: u64,
    /// The engine's options, `KEY=VALUE[,KEY=VALUE...]` (e.g. `points=on` for spht: its
    /// file-medium commit paths on this tool's DRAM pool) [default: the engine's].
    #[arg(long = "engine-options", default_value = "", value_parser = parse_engine_options)]
    pub engine_options: EngineOptions,
    /// Processes running the workload at once on one pool (1 to 16), each with
    /// `--threads` threads and its share of `--txns`. Above 1 the pool is a file in
    /// /dev/shm that every process opens shared (engines pisces and volatile only), the
    /// processes read and append to the same keys, their histories are checked as one,
    /// and every key is read once more after the last process closed the pool: each
    /// committed append must be there. Threads of all processes: at most 64.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=MAX_PROCESSES as u64))]
    pub processes: u64,
    /// With `--processes`: kill a worker process this many times (SIGKILL, one at
    /// random every 10 to 100 ms while they run), each replaced by a new process that
    /// joins the pool and runs a share of its own (0 to 10000). A killed process's
    /// transaction in flight may have committed or not; the others go on, and it is
    /// judged committed if another transaction read one of its appends, not otherwise. A kill that stops the pool (the
    /// process died holding one of the engine's lock words: see `pisces::Sharing`)
    /// ends the kills: the processes' transactions that meet the stop are recorded as
    /// indeterminate, and the read after the processes follows the pool's recovery.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u64).range(0..=10_000))]
    pub kills: u64,
    /// Run as worker process P of `--processes` on the pool at `--worker-pool` (the
    /// tool starts itself so; not for users).
    #[arg(long, hide = true, requires = "worker_pool")]
    pub worker: Option<u64>,
    /// The pool file of a worker process.
    #[arg(long = "worker-pool", hide = true, requires = "worker")]
    pub worker_pool: Option<PathBuf>,
}

pub(super) fn parse_engine_options(s: &str) -> Result<EngineOptions, String> {
    s.parse::<EngineOptions>().map_err(|e| e.to_string())
}

/// `--isolation` values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum IsolationArg {
    /// Snapshot isolation.
    Si,
    /// Serializability.
    Serializable,
    /// Linearizability (serializability plus real-time order; the checker judges the
    /// serializable part).
    Linearizable,
}

impl IsolationArg {
    /// The level the checker judges the history against.
    pub(super) fn level(self) -> Isolation {
        match self {
            IsolationArg::Si => Isolation::Snapshot,
            IsolationArg::Serializable | IsolationArg::Linearizable => Isolation::Serializable,
        }
    }

    /// The level transactions ask the engine for.
    pub(super) fn tx_level(self) -> pisces::Isolation {
        match self {
            IsolationArg::Si => pisces::Isolation::Snapshot,
            IsolationArg::Serializable => pisces::Isolation::Serializable,
            IsolationArg::Linearizable => pisces::Isolation::Linearizable,
        }
    }
}

/// Engines this tool runs: every engine of the registry that runs on our pool format
/// (this tool runs on anonymous DRAM, so not pmdk, which keeps its own pool file).
/// Every engine offers at least snapshot isolation, so `--isolation si` judges each
/// fairly; `--isolation serializable` shows which ones are.
pub(super) fn engines() -> Vec<EngineId> {
    EngineId::ALL
        .iter()
        .copied()
        .filter(|e| e.available() && !e.has_own_pool_format())
        .collect()
}

pub(super) fn parse_engine(s: &str) -> Result<EngineId, String> {
    let engines = engines();
    EngineId::from_name(s)
        .filter(|e| engines.contains(e))
        .ok_or_else(|| {
            let known: Vec<&str> = engines.iter().map(|e| e.name()).collect();
            format!("unknown engine `{s}` (known engines: {})", known.join(", "))
        })
}

pub(super) fn out(s: &str) {
    let mut o = std::io::stdout().lock();
    let _ = o.write_all(s.as_bytes());
    let _ = o.flush();
}

pub(super) fn err(s: &str) {
    let _ = writeln!(std::io::stderr().lock(), "{s}");
}

/// Pool bytes for a run: room for every key the run can create, the directory, the
/// thread logs, and slack; anonymous memory is only touched where used.
pub(super) fn pool_size(txns: usize, threads: usize, max_ops: usize) -> u64 {
    let appends = txns.saturating_mul(max_ops) as u64;
    let lists = (appends / LIST_CAPACITY as u64 + MAX_KEYS as u64).min(STORE_KEYS) * 512;
    let logs = (threads as u64 + 1) * LOG_BYTES as u64;
    let size = (32 << 20) + lists * 2 + logs * 2;
    size.next_multiple_of(1 << 20)
}

/// The run's parameters, bounded.
pub(super) struct Settings {
    pub(super) txns: usize,
    pub(super) threads: usize,
    pub(super) keys: usize,
    pub(super) max_ops: usize,
    pub(super) processes: usize,
    /// Worker processes killed and replaced (`--kills`).
    pub(super) kills: usize,
    /// The level the history is judged against.
    pub(super) iso: Isolation,
    /// The level transactions ask the engine for (`None`: none, they run at the
    /// engine's default level).
    pub(super) tx_level: Option<pisces::Isolation>,
}

impl Settings {
    /// The parameters of `args`, or the exit code of a usage error (reported).
    pub(super) fn of(args: &SicheckArgs) -> Result<Settings, ExitCode> {
        // The parsers bound these; saturate anyway rather than trust a caller.
        let txns = usize::try_from(args.txns).unwrap_or(MAX_TXNS).min(MAX_TXNS);
        let threads = usize::try_from(args.threads)
            .unwrap_or(MAX_THREADS)
            .clamp(1, MAX_THREADS);
        let keys = usize::try_from(args.keys)
            .unwrap_or(MAX_KEYS)
            .clamp(1, MAX_KEYS);
        let max_ops = usize::try_from(args.max_ops).unwrap_or(64).clamp(1, 64);
        let processes = usize::try_from(args.processes)
            .unwrap_or(MAX_PROCESSES)
            .clamp(1, MAX_PROCESSES);
        // Half the operations are appends on average; each key takes LIST_CAPACITY.
        let expected_keys = (txns as u64 * (max_ops as u64 + 1) / 4) / LIST_CAPACITY as u64;
        if !args.write_skew && expected_keys + keys as u64 > STORE_KEYS {
            err(&format!(
                "pisces sicheck: {txns} transactions of up to {max_ops} operations would need \
                 about {expected_keys} keys, more than the {STORE_KEYS} the list store holds; \
                 lower --txns or --max-ops"
            ));
            return Err(ExitCode::from(2));
        }
        if processes > 1 && processes * threads > MAX_THREADS {
            err(&format!(
                "pisces sicheck: {processes} processes of {threads} threads are more than \
                 {MAX_THREADS} threads; lower --processes or --threads"
            ));
            return Err(ExitCode::from(2));
        }
        // (A worker's --txns is its share.)
        if txns < processes && args.worker.is_none() {
            err(&format!(
                "pisces sicheck: {txns} transactions cannot be split over {processes} \
                 processes; raise --txns"
            ));
            return Err(ExitCode::from(2));
        }
        // Ask for the level only where the engine offers it: elsewhere the transactions
        // run at the engine's own level, which the history then shows to be weaker.
        let asked = args.isolation.tx_level();
        let offered = if args.engine.offers(asked) {
            asked
        } else {
            args.engine.isolation()
        };
        // A level the engine's transactions have when they ask for none is not asked
        // for: a plan of reads only then runs as a snapshot (`ThreadHandle::read`), the
        // path of read-only transactions, which a transaction that asks for a level
        // does not take.
        let tx_level = if args.engine.default_isolation() >= offered {
            None
        } else {
            Some(offered)
        };
        let kills = usize::try_from(args.kills).unwrap_or(10_000).min(10_000);
        if kills > 0 && processes < 2 {
            err("pisces sicheck: --kills needs --processes 2 or more");
            return Err(ExitCode::from(2));
        }
        Ok(Settings {
            txns,
            threads,
            keys,
            max_ops,
            processes,
            kills,
            iso: args.isolation.level(),
            tx_level,
        })
    }

    /// The workload of process `process` (0 when there is one).
    pub(super) fn workload(
        &self,
        args: &SicheckArgs,
        process: usize,
    ) -> Result<Workload, ExitCode> {
        Workload::new(WorkloadConfig {
            tx_options: pisces::TxOptions {
                isolation: self.tx_level,
                ..pisces::TxOptions::default()
            },
            threads: self.threads,
            keys: self.keys,
            max_ops: self.max_ops,
            write_skew: args.write_skew,
            pause: Duration::from_micros(args.pause_us),
            seed: args.seed,
            // (The processes that replace killed ones have values of their own.)
            processes: self.processes + self.kills,
            process,
            ..WorkloadConfig::default()
        })
        .map_err(|e| {
            err(&format!("pisces sicheck: {e}"));
            ExitCode::from(2)
        })
    }

    /// The header: what runs.
    pub(super) fn header(&self, args: &SicheckArgs, pool: &str) -> String {
        let kind = if args.write_skew {
            format!(
                "write skew (read a pair, pause {} us, append to one)",
                args.pause_us
            )
        } else {
            format!(
                "list-append mix (1 to {} ops per transaction)",
                self.max_ops
            )
        };
        let on = if self.kills > 0 {
            format!(
                "{} processes of {} threads at a time, {} killed and replaced",
                self.processes, self.threads, self.kills
            )
        } else if self.processes > 1 {
            format!("{} processes of {} threads", self.processes, self.threads)
        } else {
            format!("{} threads", self.threads)
        };
        format!(
            "pisces sicheck: engine {}, transactions at {}, judged as {}, {} \
             transactions on {on}, {} active keys, seed {}\n\
             workload: {kind}; pool: {pool}\n",
            args.engine.name(),
            match self.tx_level {
                Some(l) => l.to_string(),
                None => format!("{} (the engine's default)", args.engine.default_isolation()),
            },
            self.iso.name(),
            self.txns,
            self.keys,
            args.seed,
        )
    }
}

/// Check `history` (run in `ran`), print the report and return the exit code.
pub(super) fn judge(history: &History, ran: Duration, iso: Isolation) -> ExitCode {
    let t1 = Instant::now();
    let report = check(history);
    let checked = t1.elapsed();
    out(&format!(
        "ran {} transactions ({} aborted attempts recorded) in {:.2} s ({:.0} tx/s); \
         checked {} keys in {:.2} s\n",
        report.transactions,
        report.aborted,
        ran.as_secs_f64(),
        report.transactions as f64 / ran.as_secs_f64().max(1e-9),
        report.keys,
        checked.as_secs_f64()
    ));
    out(&report.render(iso));
    let forbidden = report.forbidden(iso);
    out(&format!("{}\n", report.summary_line(iso)));
    if forbidden == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}
