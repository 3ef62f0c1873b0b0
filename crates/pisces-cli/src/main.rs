//! The `pisces` command-line tool: create, inspect and check pool files, explore crash
//! states, check isolation, run the smoke test. The engine comparison is the
//! `pisces-bench` binary of the pisces-bench crate: this tool links the library and its
//! verification tools only, none of the benchmark's peers.
//!
//! Exit status: 0 on success; 1 when a pool has problems (`check`, `info`) or the smoke
//! run saw a broken invariant; 2 on usage errors (no subcommand included: the help is
//! printed) and on errors creating or opening files; 3 when a check found no problem
//! but could not verify everything (`check --deep` on a B+-tree whose header does not
//! record its key order): "not checked", never OK. Errors go to stderr; the tool never
//! panics on user input.
// No unsafe code, except the one call that switches a mutation on in the test build
// (`crashtest --mutation`, the `mutation` feature), allowed where it stands.
#![deny(unsafe_code)]

mod bank;
mod cmd_crashtest;
mod cmd_sicheck;
mod output;
mod size;
mod smoke;

use clap::{Args, Parser, Subcommand, ValueEnum};
use output::{err, out};
use pisces::tools::check::{check_pool, Verdict};
use pisces::{Config, EngineId, MediumKind, PersistenceDomain, Pool};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Persistent transactional memory pools (Pisces engine).
///
/// Creates, inspects and checks pool files, explores crash states, checks isolation.
#[derive(Parser, Debug)]
#[command(name = "pisces", version, arg_required_else_help = true)]
#[command(
    after_help = "Exit status: 0 ok; 1 the pool has problems (check, info) or the smoke \
run saw a broken invariant; 2 usage errors and errors creating or opening files; 3 not \
checked: no problem found, but part of the pool could not be verified (check --deep: the \
key order of a B+-tree whose header does not record it).\n\n\
The engines are compared by the separate pisces-bench binary (in the workspace: cargo run \
--release)."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Bank transfers with a concurrent auditor on a fresh pool, 1 and 2 threads;
    /// checks the total, reopens the pool (recovery) and checks it.
    Smoke {
        /// Seconds per round (one round with 1 thread, one with 2).
        #[arg(long, default_value = "2", value_parser = parse_seconds)]
        seconds: f64,
    },
    /// Explore crash states on the crash simulator and check the recovered states.
    Crashtest(cmd_crashtest::CrashtestArgs),
    /// Run list-append transactions and check the history for isolation anomalies.
    Sicheck(cmd_sicheck::SicheckArgs),
    /// Create a new pool file (it must not exist).
    Create(CreateArgs),
    /// Print a pool's superblock, geometry, usage by size class and log state.
    ///
    /// Read-only: the file is never written and recovery does not run.
    Info {
        /// The pool file.
        path: PathBuf,
    },
    /// Validate everything recovery trusts; exit 0 if consistent, 1 if not, 3 if part of
    /// it could not be checked.
    ///
    /// Read-only: checks both superblock copies, the geometry against the file, the
    /// engine id, the allocator's slab table and bitmaps and the logs, and dry-runs
    /// recovery on a private copy-on-write mapping. Allocated objects beside an empty
    /// root slot are a problem (nothing in the pool leads to them). A pool that is open
    /// elsewhere is refused (exit 2).
    Check {
        /// The pool file.
        path: PathBuf,
        /// Also walk the public containers (hash maps, B+-trees) whose handles are words
        /// of the root object: chains and leaf lists that loop, keys in the wrong
        /// bucket, broken nodes (each container is recognised by the magic word of its
        /// header). Prints what it found. A B+-tree whose header does not record how its
        /// keys compare (made by an older build, or keyed by a type whose order cannot be
        /// read from bytes) is walked without its key order: the verdict is then "not
        /// checked" (exit 3), not OK.
        #[arg(long)]
        deep: bool,
    },
}

#[derive(Args, Debug)]
struct CreateArgs {
    /// Path of the new pool file.
    path: PathBuf,
    /// Size of the pool in bytes; suffixes K, M, G, T are powers of 1024 (e.g. 64M, 1G).
    #[arg(long, default_value = "64M", value_parser = size::parse_size)]
    size: u64,
    /// Most bytes the pool may grow to when its heap is full (same suffixes); without
    /// it the pool keeps its size. Not for the spht and pmdk engines.
    #[arg(long = "max-size", value_parser = size::parse_size)]
    max_size: Option<u64>,
    /// Medium the pool is created on: dram (flushes plus fences, no msync: survives
    /// process crashes, not power loss), dax (a DAX file system, MAP_SYNC), file (any
    /// file system, msync at each fence). Default: the one the file system calls for
    /// (dax on DAX, dram on tmpfs and ramfs such as /dev/shm, file elsewhere); not
    /// recorded in the pool, each open decides again.
    #[arg(long, value_enum)]
    medium: Option<MediumArg>,
    /// Allow --medium dram on a file system that outlives power loss (a power failure
    /// may then lose or tear committed transactions).
    #[arg(long = "allow-volatile", requires = "medium")]
    allow_volatile: bool,
    /// Engine that formats the pool (recorded in it; opening with another is refused).
    #[arg(long, default_value = "pisces", value_parser = parse_engine)]
    engine: EngineId,
    /// Thread slots: most threads running transactions at once (fixed at creation).
    #[arg(long, default_value_t = 8)]
    threads: usize,
    /// Bytes of each thread's redo log (multiple of 4096, at least 16K).
    #[arg(long = "log-bytes", default_value = "1M", value_parser = size::parse_size)]
    log_bytes: u64,
    /// Persistence domain: adr (flush + fence) or eadr (the CPU caches are persistent:
    /// fence only). Default: the platform's (on dax, what the NVDIMM region reports;
    /// adr on dram). Not recorded in the pool: each open decides again.
    #[arg(long, value_parser = parse_domain)]
    domain: Option<PersistenceDomain>,
    /// Allow --domain eadr on a dax file whose platform does not report eadr (a power
    /// failure then loses data if the caches are not persistent after all).
    #[arg(long = "trust-domain", requires = "domain")]
    trust_domain: bool,
}

/// Seconds of a smoke round: above 0, at most one hour.
fn parse_seconds(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 && v <= 3600.0 => Ok(v),
        _ => Err(format!(
            "`{s}` is not a duration in seconds (a number above 0, at most 3600)"
        )),
    }
}

fn parse_domain(s: &str) -> Result<PersistenceDomain, String> {
    match PersistenceDomain::from_name(s) {
        Some(d @ (PersistenceDomain::Adr | PersistenceDomain::Eadr)) => Ok(d),
        _ => Err(format!("unknown persistence domain `{s}` (adr, eadr)")),
    }
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum MediumArg {
    Dram,
    Dax,
    File,
}

impl MediumArg {
    fn kind(self) -> MediumKind {
        match self {
            MediumArg::Dram => MediumKind::DRAM,
            MediumArg::Dax => MediumKind::Dax,
            MediumArg::File => MediumKind::File,
        }
    }
}

fn parse_engine(s: &str) -> Result<EngineId, String> {
    EngineId::from_name(s).ok_or_else(|| {
        let known: Vec<&str> = EngineId::ALL.iter().map(|e| e.name()).collect();
        format!("unknown engine `{s}` (known engines: {})", known.join(", "))
    })
}

fn create(a: &CreateArgs) -> ExitCode {
    let Ok(log_bytes) = usize::try_from(a.log_bytes) else {
        err(&format!("pisces: --log-bytes {} is too large", a.log_bytes));
        return ExitCode::from(2);
    };
    let cfg = Config::default()
        .size(a.size)
        .max_size(a.max_size)
        .medium(a.medium.map(MediumArg::kind))
        .allow_volatile_medium(a.allow_volatile)
        .engine(a.engine)
        .max_threads(a.threads)
        .log_bytes_per_thread(log_bytes)
        .persistence_domain(a.domain)
        .trust_persistence_domain(a.trust_domain);
    let pool = match Pool::create(&a.path, cfg) {
        Ok(p) => p,
        Err(e) => {
            err(&format!("pisces: cannot create {}: {e}", a.path.display()));
            return ExitCode::from(2);
        }
    };
    let durability = pool.durability();
    if let Some(w) = durability.warning() {
        err(&format!("pisces: warning: {w}"));
    }
    let domain = pool.persistence_domain();
    let Some(sb) = pool.superblock() else {
        out(&format!(
            "created {}: {} bytes, engine {} (libpmemobj's own pool format), {} thread slots\n{durability}\n",
            a.path.display(),
            a.size,
            a.engine.name(),
            a.threads
        ));
        return ExitCode::SUCCESS;
    };
    let Ok(l) = sb.layout() else {
        err("pisces: the new pool's superblock describes no valid layout");
        return ExitCode::from(1);
    };
    drop(pool);
    let slabs = l.slabs_at(sb.pool_size);
    let growth = if sb.max_size > sb.pool_size {
        format!(", grows to {} bytes ({} slabs)", sb.max_size, l.slab_count)
    } else {
        String::new()
    };
    out(&format!(
        "created {}: {} bytes, engine {}, medium {} (persistence domain {domain}), {} thread slots with {}-byte logs, heap of {} slabs ({} bytes) at {:#x}{growth}, run generation {}\n{durability}\n",
        a.path.display(),
        sb.pool_size,
        a.engine.name(),
        durability.medium().name(),
        l.max_threads,
        l.log_bytes_per_thread,
        slabs,
        l.slab_offset(slabs) - l.heap_offset,
        l.heap_offset,
        sb.run_generation,
    ));
    ExitCode::SUCCESS
}

fn inspect(path: &Path, full: bool, deep: bool) -> ExitCode {
    let r = if deep {
        pisces::tools::check::check_pool_deep(path, MediumKind::DRAM)
    } else {
        check_pool(path, MediumKind::DRAM)
    };
    let report = match r {
        Ok(r) => r,
        Err(e) => {
            err(&format!("pisces: cannot examine {}: {e}", path.display()));
            return ExitCode::from(2);
        }
    };
    let verdict = report.verdict();
    if full || verdict == Verdict::Problems {
        out(&report.to_string());
        if full {
            out(&platform_info(path));
        }
    } else {
        out(&format!("{}\n", report.summary_line()));
        for c in report.containers.iter().flatten() {
            out(&format!("container: {c}\n"));
        }
        for w in &report.warnings {
            out(&format!("warning: {w}\n"));
        }
        for u in &report.unchecked {
            out(&format!("not checked: {u}\n"));
        }
    }
    match verdict {
        Verdict::Ok => ExitCode::SUCCESS,
        Verdict::NotChecked => {
            if !full {
                err(&format!(
                    "pisces: {} could not be checked completely: {}",
                    path.display(),
                    report.summary_line()
                ));
            }
            ExitCode::from(3)
        }
        Verdict::Problems => {
            if !full {
                err(&format!(
                    "pisces: {} is not consistent: {}",
                    path.display(),
                    report.summary_line()
                ));
            }
            ExitCode::from(1)
        }
    }
}

/// What the platform says about the file system holding `path`: the medium an open
/// that names none gets, what a commit then survives, and the persistence domain a DAX
/// open would run under. Not recorded in the pool.
fn platform_info(path: &Path) -> String {
    let d = pisces::medium::domain::SysfsProbe::default().detect_for_path(path);
    let durability = match pisces::PoolDurability::predict(path) {
        Ok(p) => format!("  medium {} when none is named: {p}\n", p.medium().name()),
        Err(e) => format!("  medium: the file system could not be inspected ({e})\n"),
    };
    format!(
        "platform (decided at each open, not recorded in the pool)\n{durability}  persistence domain {} on dax ({}); adr on dram unless asked, page-cache on file\n",
        d.domain, d.reason
    )
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match &cli.command {
        Command::Smoke { seconds } => smoke::run(*seconds),
        Command::Crashtest(a) => cmd_crashtest::run(a),
        Command::Sicheck(a) => cmd_sicheck::run(a),
        Command::Create(a) => create(a),
        Command::Info { path } => inspect(path, true, false),
        Command::Check { path, deep } => inspect(path, false, *deep),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cli_definition_is_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }

    #[test]
    fn seconds_and_engines() {
        assert_eq!(parse_seconds("0.5"), Ok(0.5));
        for bad in ["0", "-1", "nan", "inf", "x", "4000"] {
            assert!(parse_seconds(bad).is_err(), "{bad}");
        }
        assert_eq!(parse_engine("pisces"), Ok(EngineId::Pisces));
        assert_eq!(parse_engine("mvcc"), Ok(EngineId::Mvcc));
        assert!(parse_engine("nosuch")
            .unwrap_err()
            .contains("known engines: pisces, undo, mvcc, pmdk, volatile"));
    }
}
