//! `pisces sicheck --processes N`: the workload in N processes on one pool.
//!
//! The parent creates the pool file in a fresh directory of `/dev/shm` (the DRAM
//! medium, a fixed size), formats it, sets the
//! store up and closes it. It then starts this tool again N times as workers
//! (`sicheck ... --worker P --worker-pool PATH`, hidden options), each of which opens
//! the pool shared, says `ready` on stdout and waits for a line on stdin, so that all
//! of them start their transactions together. Each runs its share of the
//! transactions on `--threads` threads as process P of the workload (its own values,
//! the keys of all: see [`pisces_verify::sicheck::workload`]), closes the pool and
//! writes its history on stdout, one transaction a line (`txn ` and
//! [`Txn::to_line`]) as each resolves, then `keys K` (the keys it used) and `end`.
//!
//! The parent merges the histories ([`History::merge`]), opens the pool again for
//! itself once every worker has ended (a point every process's transactions precede,
//! recorded as a recovery: epoch 1) and reads every key the workers used, so the
//! checker requires each committed append to be in the pool's final state, then checks
//! the whole as one history. A worker that fails makes the run fail with exit status 2.
//!
//! With `--kills K` the parent also kills a random worker (SIGKILL) every 10 to 100 ms
//! while they run, K times, and starts a new worker each time (the next process index:
//! values of its own), which must join the pool once the dead process is recovered.
//! So that a kill cuts nothing short unseen, a worker writes its history as it goes
//! (`Journal`): each attempt that appends, before it tries to commit (`pending ...`),
//! and each transaction's records once they are known. A killed worker's attempts
//! reported since its thread's last transaction are recorded as aborted, the last one
//! as indeterminate, which the parent decides from the merged history before the
//! check (`History::resolve_indeterminate_by_reads`): committed if another
//! transaction read one of its appends (every key is read at the end), aborted
//! otherwise. The recovery of a dead process may have finished its commit or undone
//! it, and either is right; a commit seen in part, or seen and then gone, is not. A kill that stops the pool (see `pisces::Sharing`) ends
//! the kills: the workers record the transactions that met the stop as indeterminate
//! and end, and a new worker says `stopped` instead of `ready`.

use super::setup::{err, judge, out, pool_size, Settings, SicheckArgs, LOG_BYTES};
use clap::ValueEnum;
use pisces::Sharing;
use pisces::{Config, Pool};
use pisces_verify::sicheck::{History, Journal, Op, Outcome, Txn, Workload};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, ExitCode, Stdio};
use std::sync::mpsc::{Receiver, Sender};
use std::thread::JoinHandle;
use std::time::Instant;

/// The line a worker writes once it has the pool open.
const READY: &str = "ready";
/// The line the parent sends every worker to start.
const GO: &str = "go";
/// The line a worker writes instead of `ready` when a dead process stopped the pool.
const STOPPED: &str = "stopped";

/// A fresh directory in `/dev/shm`, removed with everything in it when dropped.
struct ShmDir(PathBuf);

impl ShmDir {
    fn new() -> std::io::Result<ShmDir> {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let p = PathBuf::from(format!(
            "/dev/shm/pisces-sicheck-{}-{nanos:09}",
            std::process::id()
        ));
        std::fs::create_dir(&p)?;
        Ok(ShmDir(p))
    }
}

impl Drop for ShmDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The pool's engine and its options (the rest is the pool's own once created).
fn config(args: &SicheckArgs) -> Config {
    Config::default()
        .engine(args.engine)
        .engine_options(args.engine_options.clone())
}

/// Run the parent: see the module docs.
pub(super) fn run(args: &SicheckArgs, s: &Settings) -> ExitCode {
    let fail = |m: String| {
        err(&format!("pisces sicheck: {m}"));
        ExitCode::from(2)
    };
    // The parent's workload reads the keys at the end (as one more thread).
    let reader = match s.workload(args, 0) {
        Ok(w) => w,
        Err(code) => return code,
    };
    let dir = match ShmDir::new() {
        Ok(d) => d,
        Err(e) => return fail(format!("cannot make a directory in /dev/shm: {e}")),
    };
    let path = dir.0.join("pool");
    let all_threads = s.processes * s.threads;
    let size = pool_size(s.txns, all_threads, s.max_ops);
    let created = Pool::create(
        &path,
        config(args)
            .size(size)
            // Room for a replacement's threads while the slots of the process it
            // replaces are still being recovered (their bytes held by the recoverer).
            .max_threads(all_threads + s.threads + 1)
            .log_bytes_per_thread(LOG_BYTES)
            .sharing(Sharing::Shared),
    )
    .and_then(|pool| reader.setup(&pool));
    if let Err(e) = created {
        return fail(format!("cannot create the pool: {e}"));
    }
    out(&s.header(
        args,
        &format!(
            "{} MiB of DRAM in {}, opened by every process",
            size >> 20,
            path.display()
        ),
    ));
    let mut workers = Vec::with_capacity(s.processes + s.kills);
    let mut gos = Vec::with_capacity(s.processes);
    for p in 0..s.processes {
        let (go, wait) = std::sync::mpsc::channel();
        match Worker::start(args, s, p, &path, Some(wait)) {
            Ok(w) => {
                workers.push(w);
                gos.push(go);
            }
            Err(e) => {
                stop(&mut workers);
                return fail(format!("cannot start worker process {p}: {e}"));
            }
        }
    }
    for (p, w) in workers.iter().enumerate() {
        if w.ready.recv() != Ok(Ready::Open) {
            stop(&mut workers);
            return fail(format!("worker process {p} could not open the pool"));
        }
    }
    let t0 = Instant::now();
    // (A worker that has gone shows in its output and status below.)
    for go in gos {
        let _ = go.send(());
    }
    let (killed, stopped) = match kill_and_replace(args, s, &path, &mut workers) {
        Ok(k) => k,
        Err(m) => {
            stop(&mut workers);
            return fail(m);
        }
    };
    let mut histories = Vec::with_capacity(workers.len());
    let mut keys = 0;
    let mut failed = None;
    for (p, mut w) in workers.into_iter().enumerate() {
        let status = w.child.wait();
        let part = w
            .reader
            .join()
            .unwrap_or_else(|_| Err("reading its history panicked".into()));
        match (status, part) {
            (Ok(st), Ok(part)) if st.success() || w.killed => {
                if part.refused && !stopped {
                    failed = failed.or(Some(format!(
                        "worker process {p} found the pool stopped, and no kill stopped it"
                    )));
                }
                if !w.killed && !part.ended {
                    failed = failed.or(Some(format!(
                        "worker process {p} ended without its whole history"
                    )));
                }
                keys = keys.max(part.keys);
                histories.push(part.history);
            }
            (Ok(st), Err(e)) if st.success() || w.killed => {
                failed = failed.or(Some(format!("worker process {p}: {e}")))
            }
            (Ok(st), _) => failed = failed.or(Some(format!("worker process {p} failed ({st})"))),
            (Err(e), _) => failed = failed.or(Some(format!("worker process {p}: {e}"))),
        }
    }
    let ran = t0.elapsed();
    if let Some(m) = failed {
        return fail(m);
    }
    // Every key an operation named (a killed process's appends in flight may have
    // reached a key beyond those the others looked up).
    let named = histories
        .iter()
        .flat_map(|h| &h.txns)
        .flat_map(|t| &t.ops)
        .map(|op| match op {
            Op::Read { key, .. } | Op::Append { key, .. } => key + 1,
        })
        .max()
        .unwrap_or(0);
    let keys = keys.max(named);
    // Every process has closed the pool: a point all their transactions precede.
    let last =
        Pool::open(&path, config(args)).and_then(|pool| reader.read_keys_below(&pool, 1, keys));
    let last = match last {
        Ok(h) => h,
        Err(e) => return fail(format!("cannot read the pool after the processes: {e}")),
    };
    if s.kills > 0 {
        out(&format!(
            "{killed} processes killed and replaced{}\n",
            if stopped {
                "; the last kill stopped the pool (the process held a lock word of the \
                 engine), so the read after the processes follows its recovery"
            } else {
                ", each recovered while the others ran"
            }
        ));
    }
    out(&format!(
        "{} processes recorded {} transactions and aborted attempts; then every key \
         ({keys}) was read in {} transactions after the last process closed the pool; \
         the lists of {} keys interleave the processes' values\n",
        histories.len(),
        histories.iter().map(|h| h.txns.len()).sum::<usize>(),
        last.txns.len(),
        interleaved_keys(&last),
    ));
    histories.push(last);
    drop(dir);
    let mut history = History::merge(histories);
    let (committed, aborted) = history.resolve_indeterminate_by_reads();
    if committed + aborted > 0 {
        out(&format!(
            "{} transactions were in flight in processes that were killed or met the \
             stop: {committed} read by others (committed), {aborted} read by none \
             (not committed)\n",
            committed + aborted
        ));
    }
    judge(&history, ran, s.iso)
}

/// Keys whose lists, as `last` read them, interleave the values of processes (the
/// process changes at least twice along the list): how much the processes met.
fn interleaved_keys(last: &History) -> usize {
    last.txns
        .iter()
        .flat_map(|t| &t.ops)
        .filter(|op| match op {
            Op::Read { list, .. } => {
                let procs: Vec<usize> = list.iter().map(|v| Workload::process_of(*v)).collect();
                procs.windows(2).filter(|w| w[0] != w[1]).count() >= 2
            }
            Op::Append { .. } => false,
        })
        .count()
}

/// How a worker's start went.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ready {
    /// It has the pool open.
    Open,
    /// The pool was stopped by a dead process: it could not join.
    Stopped,
    /// It failed otherwise.
    Failed,
}

/// A worker process and the thread that reads its output.
struct Worker {
    child: Child,
    /// Whether the parent killed it.
    killed: bool,
    /// How its start went (sent once by `reader`).
    ready: Receiver<Ready>,
    reader: JoinHandle<Result<Part, String>>,
}

/// What a worker handed out.
struct Part {
    history: History,
    /// The keys it used (0 unless it ended).
    keys: u64,
    /// It wrote its whole history and `end`.
    ended: bool,
    /// It could not join a stopped pool.
    refused: bool,
}

impl Worker {
    /// Start worker process `p` on the pool at `path`, with its share of the
    /// transactions. Its reader thread says when it has the pool open, then, once
    /// `go` receives (at once without `go`), tells it to start and reads its history.
    fn start(
        args: &SicheckArgs,
        s: &Settings,
        p: usize,
        path: &Path,
        go: Option<Receiver<()>>,
    ) -> std::io::Result<Worker> {
        let mut child = command(args, s, p, path).spawn()?;
        let out = BufReader::new(child.stdout.take().expect("piped"));
        let input = child.stdin.take().expect("piped");
        let (ready, said) = std::sync::mpsc::channel();
        let reader = std::thread::spawn(move || serve(out, input, ready, go));
        Ok(Worker {
            child,
            killed: false,
            ready: said,
            reader,
        })
    }
}

/// Kill a random worker every 10 to 100 ms, `s.kills` times, starting a new one each
/// time (the next process index) and waiting until it has joined; stops early when
/// every worker has ended, or when a new one finds the pool stopped. Returns the
/// kills made and whether the pool stopped.
fn kill_and_replace(
    args: &SicheckArgs,
    s: &Settings,
    path: &Path,
    workers: &mut Vec<Worker>,
) -> Result<(usize, bool), String> {
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::StdRng::seed_from_u64(args.seed ^ 0x6b69_6c6c);
    for kill in 0..s.kills {
        std::thread::sleep(std::time::Duration::from_millis(rng.gen_range(10..=100)));
        let live: Vec<usize> = (0..workers.len())
            .filter(|&i| !workers[i].killed && matches!(workers[i].child.try_wait(), Ok(None)))
            .collect();
        if live.is_empty() {
            return Ok((kill, false));
        }
        let w = &mut workers[live[rng.gen_range(0..live.len())]];
        let _ = w.child.kill();
        let _ = w.child.wait();
        w.killed = true;
        let p = s.processes + kill;
        let new = Worker::start(args, s, p, path, None)
            .map_err(|e| format!("cannot start worker process {p}: {e}"))?;
        let ready = new.ready.recv();
        workers.push(new);
        match ready {
            Ok(Ready::Open) => {}
            Ok(Ready::Stopped) => return Ok((kill + 1, true)),
            _ => return Err(format!("worker process {p} could not open the pool")),
        }
    }
    Ok((s.kills, false))
}

/// The command of worker process `p` on the pool at `path`, with its share of the
/// transactions.
fn command(args: &SicheckArgs, s: &Settings, p: usize, path: &Path) -> Command {
    let share = if p < s.processes {
        s.txns / s.processes + usize::from(p < s.txns % s.processes)
    } else {
        s.txns / s.processes
    };
    let iso = args
        .isolation
        .to_possible_value()
        .map(|v| v.get_name().to_string())
        .unwrap_or_default();
    let mut c = Command::new(std::env::current_exe().unwrap_or_else(|_| "pisces".into()));
    c.arg("sicheck")
        .args(["--engine", args.engine.name()])
        .args(["--isolation", &iso])
        .args(["--txns", &share.max(1).to_string()])
        .args(["--threads", &s.threads.to_string()])
        .args(["--keys", &s.keys.to_string()])
        .args(["--seed", &args.seed.to_string()])
        .args(["--pause-us", &args.pause_us.to_string()])
        .args(["--max-ops", &s.max_ops.to_string()])
        .args(["--processes", &s.processes.to_string()])
        .args(["--kills", &s.kills.to_string()])
        .args(["--worker", &p.to_string()])
        .arg("--worker-pool")
        .arg(path);
    if args.write_skew {
        c.arg("--write-skew");
    }
    let options = args.engine_options.to_string();
    if !options.is_empty() {
        c.args(["--engine-options", &options]);
    }
    c.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    c
}

/// Kill and reap the workers started (after a failure).
fn stop(workers: &mut [Worker]) {
    for w in workers {
        let _ = w.child.kill();
        let _ = w.child.wait();
    }
}

/// A worker's reader thread: its first line (`ready`, or `stopped`: the pool stopped),
/// sent on `ready`; then, once `go` says so, `go` to the worker, and its history.
fn serve(
    mut out: BufReader<ChildStdout>,
    mut input: ChildStdin,
    ready: Sender<Ready>,
    go: Option<Receiver<()>>,
) -> Result<Part, String> {
    let mut line = String::new();
    let first = match out.read_line(&mut line) {
        Ok(_) if line.trim_end() == READY => Ready::Open,
        Ok(_) if line.trim_end() == STOPPED => Ready::Stopped,
        _ => Ready::Failed,
    };
    let _ = ready.send(first);
    match first {
        Ready::Open => {}
        Ready::Stopped => {
            return Ok(Part {
                history: History::new(),
                keys: 0,
                ended: true,
                refused: true,
            })
        }
        Ready::Failed => return Err("it could not open the pool".into()),
    }
    if let Some(go) = go {
        go.recv().map_err(|_| "the parent gave up")?;
    }
    // (A worker killed meanwhile shows in its output.)
    let _ = writeln!(input, "{GO}");
    drop(input);
    read_history(out)
}

/// A worker's history from its output after `go`: its transactions as they resolved,
/// then the keys it used and `end`. A worker killed before its end leaves, per thread,
/// the attempts it reported since that thread's last transaction: the last may have
/// committed (indeterminate), the ones before it were aborted.
fn read_history(o: BufReader<ChildStdout>) -> Result<Part, String> {
    let mut h = History::new();
    let mut keys = None;
    let mut pending: std::collections::BTreeMap<usize, Vec<Txn>> = Default::default();
    for line in o.lines() {
        let Ok(line) = line else {
            break;
        };
        if let Some(t) = line.strip_prefix("pending ") {
            let t = Txn::from_line(t)?;
            pending.entry(t.thread).or_default().push(t);
        } else if let Some(t) = line.strip_prefix("txn ") {
            let t = Txn::from_line(t)?;
            pending.remove(&t.thread);
            h.push(t);
        } else if let Some(k) = line.strip_prefix("keys ") {
            keys = Some(k.parse::<u64>().map_err(|_| format!("bad line `{line}`"))?);
        } else if line == "end" {
            let keys = keys.ok_or("no key count before its end")?;
            return Ok(Part {
                history: h,
                keys,
                ended: true,
                refused: false,
            });
        } else {
            return Err(format!("unexpected line `{line}`"));
        }
    }
    for attempts in pending.into_values() {
        let last = attempts.len() - 1;
        for (i, mut t) in attempts.into_iter().enumerate() {
            t.outcome = if i == last {
                Outcome::Indeterminate
            } else {
                Outcome::Aborted
            };
            h.push(t);
        }
    }
    Ok(Part {
        history: h,
        keys: 0,
        ended: false,
        refused: false,
    })
}

/// A worker's [`Journal`]: each attempt and each resolved transaction written out at
/// once, a write per report, so that a kill loses nothing reported.
struct Streamed;

impl Journal for Streamed {
    fn attempt(&self, thread: usize, ops: &[Op]) {
        let t = Txn {
            thread,
            epoch: 0,
            outcome: Outcome::Indeterminate,
            ops: ops.to_vec(),
        };
        out(&format!("pending {}\n", t.to_line()));
    }
    fn resolved(&self, txns: &[Txn]) {
        let mut text = String::new();
        for t in txns {
            text.push_str("txn ");
            text.push_str(&t.to_line());
            text.push('\n');
        }
        if !text.is_empty() {
            out(&text);
        }
    }
}

/// Run worker process `p` on the pool at `path`: see the module docs.
pub(super) fn worker(args: &SicheckArgs, s: &Settings, p: u64, path: &Path) -> ExitCode {
    let fail = |m: String| {
        err(&format!("pisces sicheck: worker process {p}: {m}"));
        ExitCode::from(2)
    };
    let Some(p) = usize::try_from(p)
        .ok()
        .filter(|p| *p < s.processes + s.kills)
    else {
        return fail(format!(
            "not one of the {} processes",
            s.processes + s.kills
        ));
    };
    let workload = match s.workload(args, p) {
        Ok(w) => w,
        Err(code) => return code,
    };
    let pool = match Pool::open(path, config(args).sharing(Sharing::Shared)) {
        Ok(pool) => pool,
        Err(pisces::Error::PeerDied { .. }) => {
            out(&format!("{STOPPED}\n"));
            return ExitCode::SUCCESS;
        }
        Err(e) => return fail(format!("cannot open the pool: {e}")),
    };
    out(&format!("{READY}\n"));
    let mut go = String::new();
    if std::io::stdin().read_line(&mut go).is_err() || go.trim_end() != GO {
        // The parent gave up.
        return ExitCode::from(2);
    }
    let history = workload.run_journaled(&pool, 0, s.txns, &|| false, Some(&Streamed));
    drop(pool);
    if let Err(e) = history {
        return fail(format!("the workload failed: {e}"));
    }
    out(&format!("keys {}\nend\n", workload.keys_used()));
    ExitCode::SUCCESS
}
