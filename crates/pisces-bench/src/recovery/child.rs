//! The child process that times recovery as a user meets it: a fresh process maps the
//! crashed pool and opens it.
//!
//! The `recovery` and `replay` workloads fill a pool's logs in the harness's own
//! process and copy the pool as a `kill -9` leaves it. Opening the copy in that same
//! process would not be what happens after a crash: the filling process has its heap,
//! its allocator's caches and its page tables warm or dirty, and the kernel serves its
//! new pages from what the fill freed. So the harness re-executes its own binary
//! (`pisces-bench`, found by [`std::env::current_exe`], so a fresh clone's build and CI
//! find it) with the hidden subcommand [`RECOVERY_CHILD`], which opens the copy once
//! (recovery: the engine parses and replays the logs), closes it, opens it again (the
//! clean open: the fixed cost of an open with nothing to replay) and prints one line of
//! [`Timing`]. The harness then opens the recovered pool itself and checks every value.
//!
//! Times come from inside the child around `Pool::open` alone (process start-up, the
//! dynamic loader and the argument parsing are not recovery): wall seconds from
//! [`Instant`], CPU seconds (user and system, every thread of the process) and minor
//! page faults from `/proc/self/stat` (CPU in 1/100 s ticks: a 0.2 s open is measured
//! to about 5 %; take medians of several runs).

use pisces::{Config, EngineId, EngineOptions, MediumKind, Pool};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::Instant;

/// The hidden subcommand of the `pisces-bench` binary that runs [`recovery_child`].
pub const RECOVERY_CHILD: &str = "recovery-child";

/// What one child measured.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Timing {
    /// Wall seconds of `Pool::open` on the crashed pool.
    pub open_secs: f64,
    /// CPU seconds (user + system, all threads) of that open.
    pub cpu_secs: f64,
    /// System (kernel) CPU seconds of that open: page faults, zeroing fresh pages.
    pub sys_secs: f64,
    /// Minor page faults of that open.
    pub minor_faults: u64,
    /// Wall seconds of `Pool::open` on the same pool after a clean close.
    pub clean_open_secs: f64,
}

/// Where an open is timed.
#[derive(Clone, Debug)]
pub enum Opener {
    /// In a fresh child process: this program (the `pisces-bench` binary) run with
    /// [`RECOVERY_CHILD`]. What the harness measures.
    Child(PathBuf),
    /// In the calling process (unit tests of the harness, whose test binary has no
    /// such subcommand).
    #[cfg(test)]
    InProcess,
}

impl Opener {
    /// A child of the running program (`pisces-bench`, which has the subcommand).
    pub fn this_program() -> Result<Opener, String> {
        std::env::current_exe()
            .map(Opener::Child)
            .map_err(|e| format!("finding the running program to re-execute: {e}"))
    }

    /// Open `path` (a crashed pool) with `engine`, `threads` recovery threads and
    /// `options`, then close and reopen it; the timings.
    pub(crate) fn open(
        &self,
        path: &Path,
        engine: Option<EngineId>,
        threads: usize,
        options: &EngineOptions,
    ) -> Result<Timing, String> {
        match self {
            #[cfg(test)]
            Opener::InProcess => open_twice(path, engine, threads, options),
            Opener::Child(exe) => spawn(exe, path, engine, threads, options),
        }
    }
}

/// (user + system CPU seconds, system CPU seconds, minor faults) of this process so
/// far, from `/proc/self/stat` (CPU in clock ticks of 1/100 s, Linux's USER_HZ; NaN
/// where the file is unreadable).
fn usage() -> (f64, f64, u64) {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return (f64::NAN, f64::NAN, 0);
    };
    // Fields after the command name (in parentheses, may hold spaces): minflt is
    // field 10, utime 14, stime 15; field 3 is the first after the parenthesis.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<&str> = rest.split_whitespace().collect();
    let at = |i: usize| f.get(i - 3).and_then(|x| x.parse::<u64>().ok());
    match (at(10), at(14), at(15)) {
        (Some(flt), Some(u), Some(s)) => ((u + s) as f64 / 100.0, s as f64 / 100.0, flt),
        _ => (f64::NAN, f64::NAN, 0),
    }
}

fn config(engine: Option<EngineId>, threads: usize, options: &EngineOptions) -> Config {
    Config::default()
        .medium(MediumKind::Dram {
            write_latency_ns: 0,
            bandwidth_bytes_per_sec: 0,
        })
        // Recovery is measured on the DRAM medium wherever the pool file is.
        .allow_volatile_medium(true)
        .engine(engine)
        .recovery_threads(threads)
        .engine_options(options.clone())
}

/// The measurement itself, in this process.
fn open_twice(
    path: &Path,
    engine: Option<EngineId>,
    threads: usize,
    options: &EngineOptions,
) -> Result<Timing, String> {
    let cfg = config(engine, threads, options);
    let (t0, (cpu0, sys0, flt0)) = (Instant::now(), usage());
    let pool = Pool::open(path, cfg.clone()).map_err(|e| format!("recovery: {e}"))?;
    let open_secs = t0.elapsed().as_secs_f64();
    let (cpu1, sys1, flt1) = usage();
    drop(pool);
    let t0 = Instant::now();
    let pool = Pool::open(path, cfg).map_err(|e| format!("reopening: {e}"))?;
    let clean_open_secs = t0.elapsed().as_secs_f64();
    drop(pool);
    Ok(Timing {
        open_secs,
        cpu_secs: cpu1 - cpu0,
        sys_secs: sys1 - sys0,
        minor_faults: flt1.saturating_sub(flt0),
        clean_open_secs,
    })
}

/// The line the child prints.
fn render(t: &Timing) -> String {
    format!(
        "{RECOVERY_CHILD} open_secs={:.6} cpu_secs={:.6} sys_secs={:.6} minor_faults={} \
         clean_open_secs={:.6}",
        t.open_secs, t.cpu_secs, t.sys_secs, t.minor_faults, t.clean_open_secs
    )
}

/// The child's line back into a [`Timing`]: the last line of `out` that starts with
/// [`RECOVERY_CHILD`]; every field must be there.
fn parse(out: &str) -> Result<Timing, String> {
    let line = out
        .lines()
        .rev()
        .find(|l| l.starts_with(RECOVERY_CHILD))
        .ok_or_else(|| format!("the child printed no timing line: {out:?}"))?;
    let field = |name: &str| -> Result<&str, String> {
        line.split_whitespace()
            .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='))
            .ok_or_else(|| format!("the child's timing line has no {name}: {line:?}"))
    };
    let secs = |name: &str| -> Result<f64, String> {
        field(name)?
            .parse()
            .map_err(|_| format!("the child's {name} is not a number: {line:?}"))
    };
    Ok(Timing {
        open_secs: secs("open_secs")?,
        cpu_secs: secs("cpu_secs")?,
        sys_secs: secs("sys_secs")?,
        minor_faults: field("minor_faults")?
            .parse()
            .map_err(|_| format!("the child's minor_faults is not a number: {line:?}"))?,
        clean_open_secs: secs("clean_open_secs")?,
    })
}

/// Run `exe RECOVERY_CHILD PATH ENGINE THREADS OPTIONS` and read its timing.
fn spawn(
    exe: &Path,
    path: &Path,
    engine: Option<EngineId>,
    threads: usize,
    options: &EngineOptions,
) -> Result<Timing, String> {
    let out = Command::new(exe)
        .arg(RECOVERY_CHILD)
        .arg(path)
        .arg(engine.map_or("-", |e| e.name()))
        .arg(threads.to_string())
        .arg(if options.is_empty() {
            "-".to_string()
        } else {
            options.to_string()
        })
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("running {} {RECOVERY_CHILD}: {e}", exe.display()))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        return Err(format!(
            "{} {RECOVERY_CHILD} failed ({}): {}",
            exe.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    parse(&stdout)
}

/// The child: `args` are `PATH ENGINE THREADS OPTIONS` (`-` for no engine / no
/// options). Prints the timing line; exit status 0, or 2 with the error on stderr.
pub fn recovery_child(args: &[String]) -> ExitCode {
    match child(args) {
        Ok(t) => {
            println!("{}", render(&t));
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("pisces-bench {RECOVERY_CHILD}: {e}");
            ExitCode::from(2)
        }
    }
}

fn child(args: &[String]) -> Result<Timing, String> {
    let [path, engine, threads, options] = args else {
        return Err(format!(
            "usage: pisces-bench {RECOVERY_CHILD} PATH ENGINE THREADS OPTIONS (got {} arguments)",
            args.len()
        ));
    };
    let engine = match engine.as_str() {
        "-" => None,
        name => Some(EngineId::from_name(name).ok_or_else(|| format!("no engine `{name}`"))?),
    };
    let threads: usize = threads
        .parse()
        .map_err(|_| format!("THREADS `{threads}` is not a number"))?;
    let options: EngineOptions = match options.as_str() {
        "-" => EngineOptions::new(),
        o => o.parse().map_err(|e| format!("OPTIONS `{o}`: {e}"))?,
    };
    open_twice(Path::new(path), engine, threads, &options)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_timing_line_round_trips_and_damaged_lines_are_refused() {
        let t = Timing {
            open_secs: 0.25,
            cpu_secs: 0.5,
            sys_secs: 0.125,
            minor_faults: 1234,
            clean_open_secs: 0.001,
        };
        let out = format!("noise\n{}\n", render(&t));
        assert_eq!(parse(&out), Ok(t));
        assert!(parse("nothing").is_err());
        let no_cpu = render(&t).replace("cpu_secs=0.500000 ", "");
        assert!(parse(&no_cpu).unwrap_err().contains("cpu_secs"), "{no_cpu}");
        let bad = render(&t).replace("minor_faults=1234", "minor_faults=x");
        assert!(parse(&bad).is_err());
    }

    #[test]
    fn the_child_refuses_bad_arguments() {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert!(child(&s(&["a"])).unwrap_err().contains("usage"));
        assert!(child(&s(&["/nonexistent", "nosuch", "1", "-"]))
            .unwrap_err()
            .contains("no engine"));
        assert!(child(&s(&["/nonexistent", "sp3", "x", "-"]))
            .unwrap_err()
            .contains("THREADS"));
        assert!(child(&s(&["/nonexistent", "sp3", "1", "-"]))
            .unwrap_err()
            .contains("recovery"));
    }
}
