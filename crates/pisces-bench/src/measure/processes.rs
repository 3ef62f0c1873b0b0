//! A measurement whose workers run in several processes on one pool (`--processes`):
//! P worker processes of T worker threads each, against the same mix as T·P threads of
//! one process.
//!
//! The harness's process (the parent) creates the pool exclusively on the DRAM medium
//! under `/dev/shm`, with a fixed size and a thread slot per worker of every process,
//! builds and preloads the data set, writes where it is into the pool's root
//! ([`Anchor`]), makes the preload durable and closes the pool. It then opens the pool again shared ([`Sharing::Shared`]) and keeps it
//! open, running no transaction, until the workers are done: it attaches first, so the
//! worker processes join the pool's shared state rather than race to set it up, and
//! the last close, which closes the pool as an exclusive close does, is its own.
//!
//! It then starts the P workers: its own program (`pisces-bench`) again with the hidden
//! subcommand [`PROCESS_WORKER`] and the measurement's settings as `key=value`
//! arguments ([`WorkerArgs`]), each in a process group of its own (a Ctrl-C reaches the
//! parent, which stops them cleanly). A worker opens the pool shared, finds the data
//! set from the pool's root ([`DataKind::attach`]: the container's handle and its count
//! from the anchor, a set's members read back from the container), takes a thread
//! handle per worker thread, starts the threads (pinned to the CPUs of measurement-wide
//! worker indices `p·T .. p·T + T`), and prints `ready`. Once every worker is ready the
//! parent writes `go` to each one's standard input (the start barrier), waits for the
//! duration and writes `stop`; each worker then stops its threads, closes the pool and
//! prints one `result` line: its [`Outcome`] (completed transactions per second summed
//! over its threads, the counts, the latency histograms of its timed sample, the medium
//! counters of its threads and of its close). The parent sums the workers' outcomes
//! into one, as it sums the threads of one process, and adds its own close.
//!
//! The worker threads run the very loop of the threads of one process
//! ([`Workers::run`]), with the same seeds (worker `g` of the measurement gets the seed
//! of thread `g`) and the same CPUs. Rows are labelled `<engine>@<P>proc` and count
//! every worker thread of every process in `threads`, so `pisces@2proc` at 2 threads
//! (2 processes × 1 thread) sits beside `pisces` at 2 threads (1 process × 2 threads).
//!
//! Only engines that can share a pool run here (`pisces` and `volatile`; the others
//! refuse with their reason: [`sharing_refusal`] asks the library before anything is
//! preloaded), and only the data sets that a process can find again from the pool's
//! root ([`DataKind::shares`]: the hash table and the sets).

use crate::engines::{Engine, EngineSpec};
use crate::measure::pin::Placement;
use crate::measure::signal::interrupted;
use crate::measure::timing::histogram;
use crate::measure::{pool_dir, unique_pool_path, watch, Outcome, RemoveOnDrop, Spec, Workers};
use crate::workloads::kinds::DataKind;
use crate::workloads::Sizes;
use hdrhistogram::Histogram;
use pisces::tools::counters::{self, Counters};
use pisces::tools::shared_counts::{self, SharedCounts};
use pisces::Sharing;
use pisces::{Config, EngineOptions, Error, MediumKind, PersistenceDomain, Pool};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitCode, Stdio};
use std::sync::atomic::AtomicU64;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

/// The hidden subcommand of the `pisces-bench` binary that runs [`process_worker`].
pub const PROCESS_WORKER: &str = "process-worker";

/// How long the parent waits for every worker to be ready (open, attach, handles).
const READY_WITHIN: Duration = Duration::from_secs(120);

/// How long the parent waits for a worker's result after `stop`.
const RESULT_WITHIN: Duration = Duration::from_secs(120);

/// Log bytes per thread slot: what [`crate::measure`] gives a measurement's pool.
const LOG_BYTES: usize = 4 << 20;

/// The label of `label`'s rows measured with `processes` processes:
/// `<label>@<processes>proc`.
pub fn label(label: &str, processes: usize) -> String {
    format!("{label}@{processes}proc")
}

/// The configuration label and the process count of a row labelled by [`label`];
/// None for a row of one process.
pub fn split_label(label: &str) -> Option<(&str, usize)> {
    let (base, p) = label.strip_suffix("proc")?.rsplit_once('@')?;
    let p: usize = p.parse().ok()?;
    (p > 1 && !base.is_empty()).then_some((base, p))
}

/// Why `engine` cannot run a measurement of several processes, if it cannot: a peer
/// (its own files, no pool), or the library's refusal of a shared pool for the engine
/// (its [`Error::InvalidConfig`] message). Asked of the library by creating a small
/// shared pool under [`pool_dir`] (removed at once): an engine that refuses does so
/// before anything is written.
pub fn sharing_refusal(engine: &EngineSpec) -> Option<String> {
    if engine.engine.peer().is_some() {
        return Some("a key-value store on its own files, not a pool".into());
    }
    let path = unique_pool_path(&pool_dir());
    let _guard = RemoveOnDrop(path.clone());
    let cfg = engine
        .config(16 << 20, MediumKind::DRAM, 1, 256 << 10)
        .sharing(Sharing::Shared);
    match Pool::create(&path, cfg) {
        Ok(pool) => {
            drop(pool);
            None
        }
        Err(e @ Error::InvalidConfig(_)) => Some(e.to_string()),
        Err(e) => Some(format!("a shared pool could not be made: {e}")),
    }
}

/// What a worker process is told: the pool, the engine configuration and the workers'
/// share of the measurement (see the module docs).
#[derive(Clone, Debug, PartialEq)]
pub struct WorkerArgs {
    /// The preloaded pool.
    pub pool: PathBuf,
    /// The engine.
    pub engine: Engine,
    /// Its options.
    pub options: EngineOptions,
    /// The persistence domain.
    pub domain: PersistenceDomain,
    /// Emulated NVM write latency per flushed line.
    pub nvm_latency_ns: u64,
    /// The control of the latency sweep ([`Spec::waits_outside`]).
    pub waits_outside: bool,
    /// Update transactions commit with durability deferred.
    pub deferred: bool,
    /// Pool bytes (as created).
    pub bytes: u64,
    /// Thread slots of the pool (every process's).
    pub slots: usize,
    /// The data set.
    pub data: DataKind,
    /// The workload's name (in errors).
    pub workload: String,
    /// Worker threads of this process.
    pub threads: usize,
    /// Update percentage.
    pub update_pct: u32,
    /// The measurement's seed.
    pub seed: u64,
    /// The measurement-wide index of this process's first worker.
    pub first: usize,
    /// The CPUs workers are pinned to (round-robin by worker index); None: unpinned.
    pub cpus: Option<Vec<usize>>,
}

impl WorkerArgs {
    /// The arguments of worker process `p` of `spec` on the pool at `pool`.
    fn of(
        spec: &Spec,
        pool: &Path,
        p: usize,
        bytes: u64,
        slots: usize,
        seed: u64,
        placement: &Placement,
    ) -> Result<WorkerArgs, String> {
        let engine = spec.engine.engine;
        if engine.id().is_none() {
            return Err(format!("{}: not an engine of the library", engine.name()));
        }
        Ok(WorkerArgs {
            pool: pool.to_path_buf(),
            engine,
            options: spec.engine.options().clone(),
            domain: spec.engine.domain,
            nvm_latency_ns: spec.nvm_latency_ns,
            waits_outside: spec.waits_outside,
            deferred: spec.deferred,
            bytes,
            slots,
            data: spec.data,
            workload: spec.workload.clone(),
            threads: spec.threads,
            update_pct: spec.update_pct,
            seed,
            first: p * spec.threads,
            cpus: match placement {
                Placement::Pinned { cpus } => Some(cpus.clone()),
                Placement::Unpinned { .. } => None,
            },
        })
    }

    /// As `key=value` arguments.
    pub fn to_args(&self) -> Vec<String> {
        let cpus = self.cpus.as_ref().map_or("none".into(), |c| {
            c.iter().map(usize::to_string).collect::<Vec<_>>().join(",")
        });
        [
            ("pool", self.pool.to_string_lossy().into_owned()),
            ("engine", self.engine.name().into()),
            ("options", self.options.to_string()),
            ("domain", self.domain.name().into()),
            ("nvm_latency_ns", self.nvm_latency_ns.to_string()),
            ("waits_outside", self.waits_outside.to_string()),
            ("deferred", self.deferred.to_string()),
            ("bytes", self.bytes.to_string()),
            ("slots", self.slots.to_string()),
            ("data", self.data.to_arg().unwrap_or_default()),
            ("workload", self.workload.clone()),
            ("threads", self.threads.to_string()),
            ("update_pct", self.update_pct.to_string()),
            ("seed", self.seed.to_string()),
            ("first", self.first.to_string()),
            ("cpus", cpus),
        ]
        .into_iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect()
    }

    /// Parse [`Self::to_args`]'s arguments.
    pub fn parse(args: &[String]) -> Result<WorkerArgs, String> {
        let get = |key: &str| -> Result<&str, String> {
            args.iter()
                .find_map(|a| a.strip_prefix(key).and_then(|r| r.strip_prefix('=')))
                .ok_or_else(|| format!("missing argument {key}=..."))
        };
        fn num<T: std::str::FromStr>(key: &str, v: &str) -> Result<T, String> {
            v.parse().map_err(|_| format!("{key}=`{v}`: not a number"))
        }
        let flag = |key: &str| -> Result<bool, String> {
            match get(key)? {
                "true" => Ok(true),
                "false" => Ok(false),
                v => Err(format!("{key}=`{v}`: not true or false")),
            }
        };
        let data = get("data")?;
        let cpus = match get("cpus")? {
            "none" => None,
            c => Some(
                c.split(',')
                    .map(|x| num("cpus", x))
                    .collect::<Result<Vec<usize>, _>>()?,
            ),
        };
        let domain = get("domain")?;
        Ok(WorkerArgs {
            pool: PathBuf::from(get("pool")?),
            engine: Engine::parse(get("engine")?)?,
            options: get("options")?
                .parse()
                .map_err(|e| format!("options: {e}"))?,
            domain: PersistenceDomain::from_name(domain)
                .ok_or_else(|| format!("domain=`{domain}`: not a persistence domain"))?,
            nvm_latency_ns: num("nvm_latency_ns", get("nvm_latency_ns")?)?,
            waits_outside: flag("waits_outside")?,
            deferred: flag("deferred")?,
            bytes: num("bytes", get("bytes")?)?,
            slots: num("slots", get("slots")?)?,
            data: DataKind::from_arg(data)
                .ok_or_else(|| format!("data=`{data}`: not a data set that shares"))?,
            workload: get("workload")?.to_string(),
            threads: num("threads", get("threads")?)?,
            update_pct: num("update_pct", get("update_pct")?)?,
            seed: num("seed", get("seed")?)?,
            first: num("first", get("first")?)?,
            cpus,
        })
    }

    /// The measurement of this process's workers.
    fn spec(&self) -> Spec {
        let mut engine = EngineSpec::with_options(
            self.engine,
            self.engine.name().to_string(),
            self.options.clone(),
        );
        engine.domain = self.domain;
        Spec {
            engine,
            workload: self.workload.clone(),
            data: self.data,
            threads: self.threads,
            update_pct: self.update_pct,
            dedicated_reader: false,
            nvm_latency_ns: self.nvm_latency_ns,
            waits_outside: self.waits_outside,
            disk: None,
            deferred: self.deferred,
            processes: 1,
        }
    }
}

/// The pool configuration of a measurement of several processes: the engine's, on the
/// DRAM medium with the measurement's emulated latency.
fn config(spec: &Spec, bytes: u64, slots: usize) -> Config {
    let medium = MediumKind::Dram {
        write_latency_ns: spec.nvm_latency_ns,
        bandwidth_bytes_per_sec: 0,
    };
    spec.engine.config(bytes, medium, slots, LOG_BYTES)
}

/// The first word of a worker's line that says it is ready.
const READY: &str = "ready";
/// The first word of a worker's line with its result.
const RESULT: &str = "result";
/// The first word of a worker's line with its error.
const FAILED: &str = "error";

/// A line on a worker's standard output (for the parent).
fn say(line: &str) {
    let mut o = std::io::stdout().lock();
    // A parent that is gone reads nothing: nothing to do about it.
    let _ = writeln!(o, "{line}");
    let _ = o.flush();
}

/// The worker process: see the module docs. Exit status 0 with a `result` line, 1 with
/// an `error` line.
pub fn process_worker(args: &[String]) -> ExitCode {
    match worker_main(args) {
        Ok(line) => {
            say(&line);
            ExitCode::SUCCESS
        }
        Err(e) => {
            say(&format!("{FAILED} {}", e.replace('\n', " ")));
            ExitCode::from(1)
        }
    }
}

fn worker_main(args: &[String]) -> Result<String, String> {
    let a = WorkerArgs::parse(args)?;
    let spec = a.spec();
    let cfg = config(&spec, a.bytes, a.slots).sharing(Sharing::Shared);
    let pool = Pool::open(&a.pool, cfg)
        .map_err(|e| format!("opening the pool {} shared: {e}", a.pool.display()))?;
    let data = a
        .data
        .attach(&pool)
        .map_err(|e| format!("finding the {} in the pool: {e}", a.workload))?;
    let handles = (0..a.threads)
        .map(|_| pool.handle())
        .collect::<pisces::Result<Vec<_>>>()
        .map_err(|e| format!("taking thread handles: {e}"))?;
    let placement = match &a.cpus {
        Some(cpus) => Placement::Pinned { cpus: cpus.clone() },
        None => Placement::unpinned("unpinned by the parent"),
    };
    let workers = Workers {
        spec: &spec,
        seed: a.seed,
        first: a.first,
        placement: &placement,
    };
    // A line from the parent: `go`, then `stop`; end of input (the parent is gone)
    // counts as either.
    let next_line = || {
        let mut l = String::new();
        let _ = std::io::stdin().read_line(&mut l);
    };
    let mut shared_before = SharedCounts::default();
    let outs = workers.run(
        handles,
        Some(data.as_ref()),
        None,
        &mut || {
            say(READY);
            next_line();
            shared_before = shared_counts::totals();
        },
        &mut |_| next_line(),
    );
    // This process's close: what it writes back counts as the run's, as the close of a
    // measurement in one process does (`crate::measure`).
    let before_close = counters::snapshot();
    drop(data);
    let synced = pool.sync();
    let at_close = counters::snapshot() - before_close;
    drop(pool);
    let shared = shared_counts::totals() - shared_before;
    synced.map_err(|e| format!("closing the pool: {e}"))?;
    let mut o = Outcome::empty(shared, 0, None)?;
    for w in outs {
        o.add_worker(&w?)?;
    }
    o.counters.add(at_close);
    Ok(format!("{RESULT} {}", encode(&o)))
}

/// A histogram as `value:count` pairs separated by `;` (`-` when empty).
fn encode_histogram(h: &Histogram<u64>) -> String {
    let v: Vec<String> = h
        .iter_recorded()
        .map(|x| format!("{}:{}", x.value_iterated_to(), x.count_at_value()))
        .collect();
    if v.is_empty() {
        "-".into()
    } else {
        v.join(";")
    }
}

fn decode_histogram(s: &str) -> Result<Histogram<u64>, String> {
    let mut h = histogram()?;
    for pair in s.split(';').filter(|p| !p.is_empty() && *p != "-") {
        let (v, c) = pair
            .split_once(':')
            .ok_or_else(|| format!("`{pair}`: not value:count"))?;
        let (v, c): (u64, u64) = (
            v.parse().map_err(|_| format!("`{pair}`: bad value"))?,
            c.parse().map_err(|_| format!("`{pair}`: bad count"))?,
        );
        h.record_n(v, c).map_err(|e| e.to_string())?;
    }
    Ok(h)
}

/// An outcome as `key=value` words (what a worker process reports).
fn encode(o: &Outcome) -> String {
    let c = o.counters;
    format!(
        "ops_per_sec={} commits={} user_aborts={} conflicts={} ro_txs={} upd_txs={} \
         changed_bytes={} ro_locked_reads={} lines_flushed={} fences={} bytes_logged={} \
         bytes_written_home={} bytes_metadata={} shared_writes={} shared_lines={} \
         msyncs={} ro={} upd={}",
        o.ops_per_sec,
        o.commits,
        o.user_aborts,
        o.conflicts,
        o.ro_txs,
        o.upd_txs,
        o.changed_bytes,
        o.ro_locked_reads,
        c.lines_flushed,
        c.fences,
        c.bytes_logged,
        c.bytes_written_home,
        c.bytes_metadata,
        o.shared.writes,
        o.shared.lines,
        o.msyncs,
        encode_histogram(&o.ro),
        encode_histogram(&o.upd),
    )
}

/// Parse [`encode`]'s words.
fn decode(s: &str) -> Result<Outcome, String> {
    let get = |key: &str| -> Result<&str, String> {
        s.split_whitespace()
            .find_map(|w| w.strip_prefix(key).and_then(|r| r.strip_prefix('=')))
            .ok_or_else(|| format!("no {key} in a worker's result"))
    };
    let n = |key: &str| -> Result<u64, String> {
        let v = get(key)?;
        v.parse()
            .map_err(|_| format!("{key}=`{v}` in a worker's result"))
    };
    let ops = get("ops_per_sec")?;
    let mut o = Outcome::empty(
        SharedCounts {
            writes: n("shared_writes")?,
            lines: n("shared_lines")?,
        },
        n("msyncs")?,
        None,
    )?;
    o.ops_per_sec = ops
        .parse()
        .map_err(|_| format!("ops_per_sec=`{ops}` in a worker's result"))?;
    o.commits = n("commits")?;
    o.user_aborts = n("user_aborts")?;
    o.conflicts = n("conflicts")?;
    o.ro_txs = n("ro_txs")?;
    o.upd_txs = n("upd_txs")?;
    o.changed_bytes = n("changed_bytes")?;
    o.ro_locked_reads = n("ro_locked_reads")?;
    o.counters = Counters {
        lines_flushed: n("lines_flushed")?,
        fences: n("fences")?,
        bytes_logged: n("bytes_logged")?,
        bytes_written_home: n("bytes_written_home")?,
        bytes_metadata: n("bytes_metadata")?,
    };
    o.ro = decode_histogram(get("ro")?)?;
    o.upd = decode_histogram(get("upd")?)?;
    Ok(o)
}

/// What a worker's reader thread passes on: a line of its standard output, or its
/// end (with what the worker wrote to its standard error).
enum Said {
    Line(String),
    End(String),
}

/// The worker processes of one measurement. Those still running when it is dropped
/// (a measurement that failed) are killed and waited for.
struct Children {
    procs: Vec<Child>,
    inputs: Vec<Option<ChildStdin>>,
    said: Receiver<(usize, Said)>,
}

impl Children {
    /// Start a worker process of `exe` per element of `args`.
    fn spawn(exe: &Path, args: &[WorkerArgs]) -> Result<Children, String> {
        use std::os::unix::process::CommandExt;
        let (tx, said) = mpsc::channel();
        let mut c = Children {
            procs: Vec::new(),
            inputs: Vec::new(),
            said,
        };
        for (i, a) in args.iter().enumerate() {
            let mut child = Command::new(exe)
                .arg(PROCESS_WORKER)
                .args(a.to_args())
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                // Its own process group: a Ctrl-C reaches the parent only, which then
                // stops the workers through their input.
                .process_group(0)
                .spawn()
                .map_err(|e| format!("starting worker process {i} ({}): {e}", exe.display()))?;
            let (out, mut err) = (child.stdout.take(), child.stderr.take());
            c.inputs.push(child.stdin.take());
            c.procs.push(child);
            let tx = tx.clone();
            // Standard error on a thread of its own, so that a worker that writes much
            // there never waits for the reader of its output.
            let errors = std::thread::spawn(move || {
                let mut text = String::new();
                if let Some(e) = err.as_mut() {
                    let _ = e.read_to_string(&mut text);
                }
                text
            });
            std::thread::spawn(move || {
                if let Some(out) = out {
                    for line in BufReader::new(out).lines().map_while(Result::ok) {
                        let _ = tx.send((i, Said::Line(line)));
                    }
                }
                let text = errors.join().unwrap_or_default();
                let _ = tx.send((i, Said::End(text)));
            });
        }
        Ok(c)
    }

    /// Write `line` to every worker's input.
    fn tell(&mut self, line: &str) {
        for input in self.inputs.iter_mut().flatten() {
            // A worker that is gone says so on its output: its failure is reported
            // from there.
            let _ = writeln!(input, "{line}").and_then(|()| input.flush());
        }
    }

    /// Wait (until `deadline`) for a line starting with `word` from every worker; the
    /// rest of each worker's line, by worker.
    fn expect(&mut self, word: &str, within: Duration) -> Result<Vec<String>, String> {
        let deadline = Instant::now() + within;
        let mut got: Vec<Option<String>> = vec![None; self.procs.len()];
        while got.iter().any(Option::is_none) {
            let left = deadline.saturating_duration_since(Instant::now());
            let (i, said) = match self.said.recv_timeout(left) {
                Ok(x) => x,
                Err(RecvTimeoutError::Timeout) => {
                    let late: Vec<String> = (0..got.len())
                        .filter(|&i| got[i].is_none())
                        .map(|i| i.to_string())
                        .collect();
                    return Err(format!(
                        "worker process(es) {} said no `{word}` within {} s",
                        late.join(","),
                        within.as_secs()
                    ));
                }
                Err(RecvTimeoutError::Disconnected) => {
                    return Err("the worker processes' output ended".into())
                }
            };
            match said {
                Said::Line(l) => {
                    if let Some(rest) = l.strip_prefix(word) {
                        got[i] = Some(rest.trim().to_string());
                    } else if let Some(e) = l.strip_prefix(FAILED) {
                        return Err(format!("worker process {i}: {}", e.trim()));
                    }
                }
                // Its output ended after what was asked for: `finish` waits for it.
                Said::End(_) if got[i].is_some() => {}
                Said::End(stderr) => {
                    let status = self.procs[i]
                        .wait()
                        .map_or_else(|e| e.to_string(), |s| s.to_string());
                    let tail: Vec<&str> = stderr.lines().rev().take(5).collect();
                    let tail: Vec<&str> = tail.into_iter().rev().collect();
                    return Err(format!(
                        "worker process {i} ended ({status}) before saying `{word}`{}",
                        if tail.is_empty() {
                            String::new()
                        } else {
                            format!(": {}", tail.join(" | "))
                        }
                    ));
                }
            }
        }
        Ok(got.into_iter().flatten().collect())
    }

    /// Close the workers' inputs and wait for them to exit; an error if one failed.
    fn finish(mut self) -> Result<(), String> {
        self.inputs.clear();
        for (i, p) in self.procs.iter_mut().enumerate() {
            let status = p
                .wait()
                .map_err(|e| format!("waiting for worker process {i}: {e}"))?;
            if !status.success() {
                return Err(format!("worker process {i} failed ({status})"));
            }
        }
        Ok(())
    }
}

impl Drop for Children {
    fn drop(&mut self) {
        self.inputs.clear();
        for p in &mut self.procs {
            if let Ok(None) = p.try_wait() {
                // Only the processes this measurement started, by their own handle.
                let _ = p.kill();
                let _ = p.wait();
            }
        }
    }
}

/// Measure `spec` with `spec.processes` worker processes of `exe` (the `pisces-bench`
/// binary, which has the [`PROCESS_WORKER`] subcommand) on a pool created at `path`
/// (which must not exist). The pool is left at `path`, closed, for the caller to
/// inspect or remove. `tick(elapsed, 0)` is called about every 50 ms while the workers
/// run (the worker processes report their counts at the end only).
#[allow(clippy::too_many_arguments)]
pub fn measure_processes_at(
    path: &Path,
    spec: &Spec,
    sizes: &Sizes,
    seconds: f64,
    seed: u64,
    placement: &Placement,
    exe: &Path,
    tick: &mut dyn FnMut(Duration, u64),
) -> Result<Outcome, String> {
    if spec.disk.is_some() {
        return Err("several processes run on the DRAM medium under /dev/shm only".into());
    }
    if !spec.data.shares() {
        return Err(format!(
            "the {} cannot be run from several processes (only the hash table and the sets \
             are found again from the pool's root)",
            spec.workload
        ));
    }
    if let Some(why) = sharing_refusal(&spec.engine) {
        return Err(format!("{} cannot share a pool: {why}", spec.engine.label));
    }
    let workers = spec.processes * spec.threads;
    let bytes = spec.data.pool_bytes(sizes, workers, seconds);
    let slots = spec.data.thread_slots(workers);
    {
        let pool = Pool::create(path, config(spec, bytes, slots))
            .map_err(|e| format!("creating the pool {}: {e}", path.display()))?;
        let data = spec
            .data
            .build(&pool, sizes, workers, seed)
            .map_err(|e| format!("preloading the {}: {e}", spec.workload))?;
        let anchor = data
            .anchor()
            .ok_or_else(|| format!("the {} has no anchor", spec.workload))?;
        anchor
            .publish(&pool)
            .map_err(|e| format!("publishing the {} in the pool's root: {e}", spec.workload))?;
        pool.write_back()
            .map_err(|e| format!("syncing the preloaded {}: {e}", spec.workload))?;
    }
    let keeper = Pool::open(path, config(spec, bytes, slots).sharing(Sharing::Shared))
        .map_err(|e| format!("opening the preloaded pool shared: {e}"))?;
    let args = (0..spec.processes)
        .map(|p| WorkerArgs::of(spec, path, p, bytes, slots, seed, placement))
        .collect::<Result<Vec<_>, String>>()?;
    let mut children = Children::spawn(exe, &args)?;
    children.expect(READY, READY_WITHIN)?;
    children.tell("go");
    watch(
        Duration::from_secs_f64(seconds),
        &AtomicU64::new(0),
        &mut *tick,
    );
    children.tell("stop");
    let results = children.expect(RESULT, RESULT_WITHIN)?;
    children.finish()?;
    let before_close = counters::snapshot();
    let synced = keeper.sync();
    let at_close = counters::snapshot() - before_close;
    drop(keeper);
    synced.map_err(|e| format!("closing the pool: {e}"))?;
    if interrupted() {
        return Err("interrupted".into());
    }
    let mut o = Outcome::empty(SharedCounts::default(), 0, None)?;
    for r in &results {
        o.add(&decode(r)?)?;
    }
    o.counters.add(at_close);
    Ok(o)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_name_the_processes() {
        assert_eq!(label("pisces", 2), "pisces@2proc");
        assert_eq!(split_label("pisces@2proc"), Some(("pisces", 2)));
        assert_eq!(split_label("pisces@eadr@4proc"), Some(("pisces@eadr", 4)));
        for one in ["pisces", "pisces@eadr", "pisces@1proc", "@2proc", "x@yproc"] {
            assert_eq!(split_label(one), None, "{one}");
        }
    }

    #[test]
    fn worker_arguments_round_trip() {
        let mut engine = EngineSpec::with_options(
            Engine::PISCES,
            "pisces".into(),
            "group_commit=4,flush_diff=false".parse().unwrap(),
        );
        engine.domain = PersistenceDomain::Eadr;
        let spec = Spec {
            engine,
            workload: "set-1k".into(),
            data: DataKind::Set(1000),
            threads: 2,
            update_pct: 20,
            dedicated_reader: false,
            nvm_latency_ns: 300,
            waits_outside: false,
            disk: None,
            deferred: true,
            processes: 3,
        };
        let pinned = Placement::Pinned { cpus: vec![0, 1] };
        let a = WorkerArgs::of(
            &spec,
            Path::new("/dev/shm/x y.pool"),
            2,
            1 << 30,
            7,
            9,
            &pinned,
        )
        .unwrap();
        assert_eq!(a.first, 4);
        assert_eq!(WorkerArgs::parse(&a.to_args()), Ok(a.clone()));
        let s = a.spec();
        assert_eq!(s.engine.options().get("group_commit"), Some("4"));
        assert_eq!(s.engine.domain, PersistenceDomain::Eadr);
        assert_eq!((s.threads, s.processes, s.deferred), (2, 1, true));
        let unpinned =
            WorkerArgs::of(&spec, Path::new("p"), 0, 1, 1, 1, &Placement::new(false)).unwrap();
        assert_eq!(WorkerArgs::parse(&unpinned.to_args()).unwrap().cpus, None);
        let e = WorkerArgs::parse(&["pool=p".to_string()]).unwrap_err();
        assert!(e.starts_with("missing argument "), "{e}");
    }

    #[test]
    fn outcomes_round_trip_through_a_line() {
        let mut o = Outcome::empty(
            SharedCounts {
                writes: 5,
                lines: 3,
            },
            2,
            None,
        )
        .unwrap();
        o.ops_per_sec = 12345.678;
        o.commits = 100;
        o.ro_txs = 80;
        o.upd_txs = 20;
        o.counters.fences = 21;
        for v in [100, 150, 150, 9000] {
            o.ro.record(v).unwrap();
        }
        o.upd.record(2500).unwrap();
        let back = decode(&encode(&o)).unwrap();
        assert_eq!(back.ops_per_sec, o.ops_per_sec);
        assert_eq!((back.commits, back.ro_txs, back.upd_txs), (100, 80, 20));
        assert_eq!(back.counters, o.counters);
        assert_eq!(back.shared, o.shared);
        assert_eq!(back.ro, o.ro);
        assert_eq!(back.upd, o.upd);
        let empty = decode(&encode(
            &Outcome::empty(SharedCounts::default(), 0, None).unwrap(),
        ))
        .unwrap();
        assert!(empty.ro.is_empty() && empty.upd.is_empty());
    }

    /// Engines that cannot share a pool say why before anything is preloaded; those
    /// that can say nothing.
    #[test]
    fn refusals_come_from_the_library() {
        assert_eq!(sharing_refusal(&EngineSpec::plain(Engine::PISCES)), None);
        assert_eq!(sharing_refusal(&EngineSpec::plain(Engine::VOLATILE)), None);
        let why = sharing_refusal(&EngineSpec::plain(Engine::UNDO)).unwrap();
        assert!(why.contains("several processes"), "{why}");
        assert!(sharing_refusal(&EngineSpec::plain(Engine::REDB)).is_some());
    }
}
