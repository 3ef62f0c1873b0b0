//! `pisces sicheck --processes N`: the workload in N processes on one pool.
//!
//! The parent creates the pool file in a fresh directory of `/dev/shm` (the DRAM
//! medium, fixed size: a pool shared by processes may not grow), formats it, sets the
//! store up and closes it. It then starts this tool again N times as workers
//! (`sicheck ... --worker P --worker-pool PATH`, hidden options), each of which opens
//! the pool shared, says `ready` on stdout and waits for a line on stdin, so that all
//! of them start their transactions together. Each runs its share of the
//! transactions on `--threads` threads as process P of the workload (its own values,
//! the keys of all: see [`pisces_verify::sicheck::workload`]), closes the pool and
//! writes its history on stdout, one transaction a line (`txn ` and
//! [`Txn::to_line`]), then `keys K` (the keys it used) and `end`.
//!
//! The parent merges the histories ([`History::merge`]), opens the pool again for
//! itself once every worker has ended (a point every process's transactions precede,
//! recorded as a recovery: epoch 1) and reads every key the workers used, so the
//! checker requires each committed append to be in the pool's final state, then checks
//! the whole as one history. A worker that fails makes the run fail with exit status 2.

use super::setup::{err, judge, out, pool_size, Settings, SicheckArgs, LOG_BYTES};
use clap::ValueEnum;
use pisces::Sharing;
use pisces::{Config, Pool};
use pisces_verify::sicheck::{History, Op, Txn, Workload};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, ExitCode, Stdio};
use std::time::Instant;

/// The line a worker writes once it has the pool open.
const READY: &str = "ready";
/// The line the parent sends every worker to start.
const GO: &str = "go";

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
            .max_threads(all_threads + 1)
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
    let mut workers = Vec::with_capacity(s.processes);
    for p in 0..s.processes {
        match start(args, s, p, &path) {
            Ok(w) => workers.push(w),
            Err(e) => {
                stop(&mut workers);
                return fail(format!("cannot start worker process {p}: {e}"));
            }
        }
    }
    let mut outputs: Vec<BufReader<ChildStdout>> = Vec::with_capacity(s.processes);
    for (p, w) in workers.iter_mut().enumerate() {
        let mut o = BufReader::new(w.stdout.take().expect("piped"));
        let mut line = String::new();
        if o.read_line(&mut line).is_err() || line.trim_end() != READY {
            stop(&mut workers);
            return fail(format!("worker process {p} could not open the pool"));
        }
        outputs.push(o);
    }
    let t0 = Instant::now();
    for w in &mut workers {
        // A worker that has gone shows in its output and status below.
        if let Some(mut i) = w.stdin.take() {
            let _ = writeln!(i, "{GO}");
        }
    }
    let parts: Vec<Result<(History, u64), String>> = std::thread::scope(|sc| {
        let readers: Vec<_> = outputs
            .into_iter()
            .map(|o| sc.spawn(move || read_history(o)))
            .collect();
        readers
            .into_iter()
            .map(|r| {
                r.join()
                    .unwrap_or_else(|_| Err("reading its history panicked".into()))
            })
            .collect()
    });
    let ran = t0.elapsed();
    let mut histories = Vec::with_capacity(s.processes);
    let mut keys = 0;
    let mut failed = None;
    for (p, (w, part)) in workers.iter_mut().zip(parts).enumerate() {
        let status = w.wait();
        match (status, part) {
            (Ok(st), Ok((h, k))) if st.success() => {
                histories.push(h);
                keys = keys.max(k);
            }
            (Ok(st), Err(e)) if st.success() => {
                failed = failed.or(Some(format!("worker process {p}: {e}")))
            }
            (Ok(st), _) => failed = failed.or(Some(format!("worker process {p} failed ({st})"))),
            (Err(e), _) => failed = failed.or(Some(format!("worker process {p}: {e}"))),
        }
    }
    if let Some(m) = failed {
        return fail(m);
    }
    // Every process has closed the pool: a point all their transactions precede.
    let last =
        Pool::open(&path, config(args)).and_then(|pool| reader.read_keys_below(&pool, 1, keys));
    let last = match last {
        Ok(h) => h,
        Err(e) => return fail(format!("cannot read the pool after the processes: {e}")),
    };
    out(&format!(
        "{} processes recorded {} transactions and aborted attempts; then every key \
         ({keys}) was read in {} transactions after the last process closed the pool; \
         the lists of {} keys interleave the processes' values\n",
        s.processes,
        histories.iter().map(|h| h.txns.len()).sum::<usize>(),
        last.txns.len(),
        interleaved_keys(&last),
    ));
    histories.push(last);
    drop(dir);
    judge(&History::merge(histories), ran, s.iso)
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

/// Start worker process `p` on the pool at `path`, with its share of the transactions.
fn start(args: &SicheckArgs, s: &Settings, p: usize, path: &Path) -> std::io::Result<Child> {
    let share = s.txns / s.processes + usize::from(p < s.txns % s.processes);
    let iso = args
        .isolation
        .to_possible_value()
        .map(|v| v.get_name().to_string())
        .unwrap_or_default();
    let mut c = Command::new(std::env::current_exe()?);
    c.arg("sicheck")
        .args(["--engine", args.engine.name()])
        .args(["--isolation", &iso])
        .args(["--txns", &share.to_string()])
        .args(["--threads", &s.threads.to_string()])
        .args(["--keys", &s.keys.to_string()])
        .args(["--seed", &args.seed.to_string()])
        .args(["--pause-us", &args.pause_us.to_string()])
        .args(["--max-ops", &s.max_ops.to_string()])
        .args(["--processes", &s.processes.to_string()])
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
        .stderr(Stdio::inherit())
        .spawn()
}

/// Kill and reap the workers started (after a failure).
fn stop(workers: &mut [Child]) {
    for w in workers {
        let _ = w.kill();
        let _ = w.wait();
    }
}

/// A worker's history and the keys it used, from its output after `ready`.
fn read_history(o: BufReader<ChildStdout>) -> Result<(History, u64), String> {
    let mut h = History::new();
    let mut keys = None;
    for line in o.lines() {
        let line = line.map_err(|e| format!("reading its output: {e}"))?;
        if let Some(t) = line.strip_prefix("txn ") {
            h.push(Txn::from_line(t)?);
        } else if let Some(k) = line.strip_prefix("keys ") {
            keys = Some(k.parse::<u64>().map_err(|_| format!("bad line `{line}`"))?);
        } else if line == "end" {
            let keys = keys.ok_or("no key count before its end")?;
            return Ok((h, keys));
        } else {
            return Err(format!("unexpected line `{line}`"));
        }
    }
    Err("it ended without its whole history".into())
}

/// Run worker process `p` on the pool at `path`: see the module docs.
pub(super) fn worker(args: &SicheckArgs, s: &Settings, p: u64, path: &Path) -> ExitCode {
    let fail = |m: String| {
        err(&format!("pisces sicheck: worker process {p}: {m}"));
        ExitCode::from(2)
    };
    let Some(p) = usize::try_from(p).ok().filter(|p| *p < s.processes) else {
        return fail(format!("not one of the {} processes", s.processes));
    };
    let workload = match s.workload(args, p) {
        Ok(w) => w,
        Err(code) => return code,
    };
    let pool = match Pool::open(path, config(args).sharing(Sharing::Shared)) {
        Ok(pool) => pool,
        Err(e) => return fail(format!("cannot open the pool: {e}")),
    };
    out(&format!("{READY}\n"));
    let mut go = String::new();
    if std::io::stdin().read_line(&mut go).is_err() || go.trim_end() != GO {
        // The parent gave up.
        return ExitCode::from(2);
    }
    let history = workload.run(&pool, 0, s.txns, &|| false);
    drop(pool);
    let history = match history {
        Ok(h) => h,
        Err(e) => return fail(format!("the workload failed: {e}")),
    };
    let mut text = String::new();
    for t in &history.txns {
        text.push_str("txn ");
        text.push_str(&t.to_line());
        text.push('\n');
    }
    text.push_str(&format!("keys {}\nend\n", workload.keys_used()));
    out(&text);
    ExitCode::SUCCESS
}
