//! `pisces crashtest`: crash-state exploration on the crash simulator.
//!
//! Runs workloads of [`pisces_verify::crashtest`] on simulated machines that lose power at
//! chosen fences (every fence with `--exhaustive`, random ones otherwise), recovers
//! every crash image built by the adversary (for one image in
//! `--recovery-crash-every`, crashing again during recovery and recovering again), and
//! checks the recovered states with engine-independent oracles. With `--deferred N` the
//! workloads commit with deferred durability and wait for it every N operations: the
//! oracles then require only what a returned wait covered. A progress bar runs on
//! stderr when it is a terminal; stdout gets a summary per workload, each violation
//! with the file its crash image was written to and a command that reproduces it, and
//! as its last line exactly `crash states: <N> checked, <V> violations`.
//!
//! Exit status: 0 when no violation was found, 1 when some were, 2 on usage errors
//! (bad values, an unreadable image to reproduce).

use clap::{Args, ValueEnum};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use pisces::{EngineId, PersistenceDomain};
use pisces_verify::crashtest::workload::{format_bounds, parse_bounds};
use pisces_verify::crashtest::{
    reproduce, run_plan, workload_by_name, Mode, Plan, Report, Settings, Violation, Workload,
    EXTRA_WORKLOADS, MAX_THREADS, WORKLOADS,
};
use pisces_verify::sim::Adversary;
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// Largest `--ops`: keeps every workload inside its small pool.
const MAX_OPS: usize = 10_000;
/// Largest `--images`.
const MAX_IMAGES: u64 = 1000;
/// Largest crash image `--image` reads.
const MAX_IMAGE_BYTES: u64 = 1 << 30;

/// Arguments of `pisces crashtest`.
#[derive(Args, Debug, Clone)]
#[command(
    after_help = "The last line printed is exactly `crash states: <N> checked, <V> violations`. \
Exit status: 0 no violation; 1 violations found; 2 usage errors.\n\
A crash image written for a violation is a pool file: `pisces check FILE` examines it."
)]
pub struct CrashtestArgs {
    /// Engine under test [default: pisces; with --domain eadr or page-cache, every
    /// durable engine in turn].
    #[arg(long, value_parser = parse_engine)]
    pub engine: Option<EngineId>,
    /// Persistence domain of the simulated machine: adr (a store is durable once
    /// written back and fenced; the adversary decides the rest), eadr (the caches are
    /// persistent: every visible store survives, less a suffix of each thread's stores
    /// since its last fence) or page-cache (the file medium: only the msync of the
    /// pages a thread flushed, at its fence, persists; the kernel may write back any
    /// dirty page at any time, whole or torn at 512-byte sectors).
    #[arg(long, default_value = "adr", value_parser = parse_domain)]
    pub domain: PersistenceDomain,
    /// Workload: bank, list, alloc, hashmap, btree (the public containers), all (these
    /// five), or bucket-map, sorted-tree (engine-test structures), strmap (a tree of
    /// string keys and byte string values; these three not in all).
    #[arg(long, default_value = "all", value_parser = parse_workload)]
    pub workload: String,
    /// Workload threads, 1 to 8 [default: 1 with --exhaustive, else 2].
    #[arg(long)]
    pub threads: Option<usize>,
    /// Crash states to check in random mode, split over the workloads.
    #[arg(long, default_value_t = 10_000, conflicts_with = "exhaustive")]
    pub states: u64,
    /// Seed naming the campaign (crash points, adversary choices).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Crash at every fence of a short run instead of at random fences.
    #[arg(long)]
    pub exhaustive: bool,
    /// Operations per thread in one run [default: 20 with --exhaustive, else 100].
    #[arg(long)]
    pub ops: Option<usize>,
    /// Commit every workload operation with deferred durability, each thread waiting
    /// for durability (`wait_durable`) after every N of its operations and after its
    /// last. An operation is then acknowledged (must survive a crash) only once such a
    /// wait, started after its commit returned, has returned; those committed since may
    /// be lost, the newest first. 0: each commit is durable when it returns.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub deferred: usize,
    /// Crash images per crash point (different adversary choices).
    #[arg(long, default_value_t = 2)]
    pub images: u64,
    /// How words not known to be durable are decided: random (per 8-byte word),
    /// durable-only (all lost), all-written (all kept).
    #[arg(long, value_enum, default_value_t = AdversaryArg::Random)]
    pub adversary: AdversaryArg,
    /// Random adversary: probability that a word of a flushed, unfenced line survives.
    #[arg(long, default_value_t = 0.5)]
    pub p_flushed: f64,
    /// Random adversary: probability that a word of a never-flushed dirty line survives.
    #[arg(long, default_value_t = 0.5)]
    pub p_unflushed: f64,
    /// One crash image in this many also crashes during recovery (0: never).
    #[arg(long, default_value_t = 5)]
    pub recovery_crash_every: u64,
    /// Operations run on each recovered pool before checking it again (0: none).
    #[arg(long, default_value_t = 2)]
    pub continue_ops: usize,
    /// Pisces engine: flush-diff on, off, or both (alternating).
    #[arg(long, value_enum, default_value_t = FlushDiffArg::Both)]
    pub flush_diff: FlushDiffArg,
    /// Pisces engine: group commit sizes to alternate (1 = off), comma separated.
    #[arg(long, value_delimiter = ',', default_value = "1,8")]
    pub group_commit: Vec<usize>,
    /// Rounds run in parallel [default: the number of cores].
    #[arg(long)]
    pub jobs: Option<usize>,
    /// Directory for the crash images of violations [default: <temp dir>/pisces-crashtest].
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Re-run only the state with this index (as printed with a violation).
    #[arg(long, value_name = "INDEX")]
    pub reproduce: Option<u64>,
    /// With --reproduce: recover this saved crash image instead of re-running.
    #[arg(long, requires = "reproduce", requires = "acked")]
    pub image: Option<PathBuf>,
    /// With --image: per-thread acknowledged operations at the crash, `+` marking one
    /// more that may be present (the one in flight), `+N` N more (with --deferred), e.g.
    /// 12,9+,4+3.
    #[arg(long, requires = "image")]
    pub acked: Option<String>,
    /// Test builds only: remove one protocol step of the engine, named by one of its
    /// mutation points (e.g. checksum, log-flush; an unknown name lists the engine's).
    #[cfg(feature = "mutation")]
    #[arg(long, value_name = "NAME")]
    pub mutation: Option<String>,
}

/// `--adversary`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum AdversaryArg {
    /// Each undecided word survives with the given probabilities.
    Random,
    /// Only what fences made durable.
    DurableOnly,
    /// Every written word survives.
    AllWritten,
}

/// `--flush-diff`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum FlushDiffArg {
    /// Alternate on and off.
    Both,
    /// Log only changed words.
    On,
    /// Log whole objects.
    Off,
}

/// The mutation point of `engine` that `--mutation` names, if any.
#[cfg(feature = "mutation")]
fn mutation_point(
    a: &CrashtestArgs,
    engine: EngineId,
) -> Result<Option<&'static pisces::mutation::MutationPoint>, String> {
    let Some(name) = &a.mutation else {
        return Ok(None);
    };
    engine.mutation(name).map(Some).ok_or_else(|| {
        let names = engine.mutation_names();
        format!(
            "--mutation: the {} engine has no mutation point `{name}` (its points: {})",
            engine.name(),
            if names.is_empty() {
                "none".to_string()
            } else {
                names.join(", ")
            }
        )
    })
}

fn parse_engine(s: &str) -> Result<EngineId, String> {
    let known = || {
        EngineId::ALL
            .iter()
            .filter(|&&e| e != EngineId::Pmdk)
            .map(|e| e.name())
            .collect::<Vec<_>>()
            .join(", ")
    };
    match EngineId::from_name(s) {
        Some(EngineId::Pmdk) => Err(format!(
            "the pmdk engine cannot run on the crash simulator (libpmemobj maps and \
             flushes its own pool; its crash test is kill -9 in crates/pisces-verify/tests/engine_pmdk.rs); \
             engines: {}",
            known()
        )),
        Some(e) => Ok(e),
        None => Err(format!("unknown engine `{s}` (known engines: {})", known())),
    }
}

fn parse_workload(s: &str) -> Result<String, String> {
    if s == "all" || WORKLOADS.contains(&s) || EXTRA_WORKLOADS.contains(&s) {
        Ok(s.to_string())
    } else {
        Err(format!(
            "unknown workload `{s}` (known: {}, {}, all)",
            WORKLOADS.join(", "),
            EXTRA_WORKLOADS.join(", ")
        ))
    }
}

/// Run `pisces crashtest`, printing to stdout.
pub fn run(args: &CrashtestArgs) -> ExitCode {
    let mut stdout = std::io::stdout();
    ExitCode::from(run_to(args, &mut stdout))
}

/// Run `pisces crashtest`, printing the report to `out`; returns the exit status.
pub fn run_to(args: &CrashtestArgs, out: &mut dyn Write) -> u8 {
    let engines = engines(args);
    if args.reproduce.is_some() && engines.len() > 1 {
        eprintln_safe("pisces crashtest: --reproduce needs one --engine");
        return 2;
    }
    let mut all = Vec::new();
    for &engine in &engines {
        match settings(args, engine) {
            Ok(s) => all.push(s),
            Err(e) => {
                eprintln_safe(&format!("pisces crashtest: {e}"));
                return 2;
            }
        }
    }
    #[cfg(feature = "mutation")]
    if args.mutation.is_some() && engines.len() > 1 {
        eprintln_safe("pisces crashtest: --mutation needs one --engine (a point is an engine's)");
        return 2;
    }
    // The point stays active until the scenario drops, on a panic too.
    #[cfg(feature = "mutation")]
    let _scenario = match mutation_point(args, engines[0]) {
        Ok(p) => p.map(mutated),
        Err(e) => {
            eprintln_safe(&format!("pisces crashtest: {e}"));
            return 2;
        }
    };
    let names: Vec<&str> = if args.workload == "all" {
        WORKLOADS.to_vec()
    } else {
        vec![args.workload.as_str()]
    };
    if let Some(index) = args.reproduce {
        return reproduce_one(args, &all[0], &names, index, out);
    }
    let (mut states, mut bad) = (0, 0);
    for settings in &all {
        let (n, v) = campaign(args, settings, &names, out);
        states += n;
        bad += v;
    }
    line(
        out,
        &format!("crash states: {states} checked, {bad} violations"),
    );
    u8::from(bad > 0)
}

/// The engines to run: the one named, else Pisces under ADR and every durable engine
/// of this build with its pool on the medium under eADR and in the page cache.
fn engines(a: &CrashtestArgs) -> Vec<EngineId> {
    match (a.engine, a.domain) {
        (Some(e), _) => vec![e],
        (None, PersistenceDomain::Eadr | PersistenceDomain::PageCache) => EngineId::ALL
            .iter()
            .copied()
            .filter(|e| e.available() && e.is_durable() && !e.has_own_pool_format())
            .collect(),
        (None, _) => vec![EngineId::Pisces],
    }
}

fn parse_domain(s: &str) -> Result<PersistenceDomain, String> {
    PersistenceDomain::from_name(s)
        .ok_or_else(|| format!("unknown persistence domain `{s}` (adr, eadr, page-cache)"))
}

/// The library settings for these arguments (the random mode's state count is set
/// per workload later).
fn settings(a: &CrashtestArgs, engine: EngineId) -> Result<Settings, String> {
    let threads = a.threads.unwrap_or(if a.exhaustive { 1 } else { 2 });
    if threads == 0 || threads > MAX_THREADS {
        return Err(format!(
            "--threads must be 1 to {MAX_THREADS}, not {threads}"
        ));
    }
    let ops = a.ops.unwrap_or(if a.exhaustive { 20 } else { 100 });
    if ops == 0 || ops > MAX_OPS {
        return Err(format!("--ops must be 1 to {MAX_OPS}, not {ops}"));
    }
    if a.images == 0 || a.images > MAX_IMAGES {
        return Err(format!(
            "--images must be 1 to {MAX_IMAGES}, not {}",
            a.images
        ));
    }
    if !a.exhaustive && a.states == 0 {
        return Err("--states must be at least 1".into());
    }
    for (name, p) in [
        ("--p-flushed", a.p_flushed),
        ("--p-unflushed", a.p_unflushed),
    ] {
        if !(0.0..=1.0).contains(&p) {
            return Err(format!("{name} must be a probability in [0, 1], not {p}"));
        }
    }
    let jobs = a
        .jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    if jobs == 0 || jobs > 256 {
        return Err(format!("--jobs must be 1 to 256, not {jobs}"));
    }
    if a.group_commit.is_empty() || a.group_commit.iter().any(|&g| g == 0 || g > 1024) {
        return Err("--group-commit sizes must be 1 to 1024".into());
    }
    let options = if engine == EngineId::Pisces {
        let diffs: &[bool] = match a.flush_diff {
            FlushDiffArg::Both => &[true, false],
            FlushDiffArg::On => &[true],
            FlushDiffArg::Off => &[false],
        };
        let mut v = Vec::new();
        for &flush_diff in diffs {
            for &group_commit in &a.group_commit {
                v.push(
                    pisces::PiscesOptions {
                        flush_diff,
                        group_commit,
                    }
                    .into(),
                );
            }
        }
        v
    } else {
        // Other engines: each of their own option sets (their ablation switches).
        Vec::new()
    };
    let adversary = match a.adversary {
        AdversaryArg::Random => Adversary::Random {
            p_keep_flushed: a.p_flushed,
            p_keep_unflushed: a.p_unflushed,
        },
        AdversaryArg::DurableOnly => Adversary::DurableOnly,
        AdversaryArg::AllWritten => Adversary::AllWritten,
    };
    let s = Settings {
        engine,
        domain: a.domain,
        options,
        threads,
        ops,
        deferred: a.deferred,
        mode: if a.exhaustive {
            Mode::Exhaustive
        } else {
            Mode::Random { states: a.states }
        },
        images: a.images,
        adversary,
        recovery_crash_one_in: a.recovery_crash_every,
        continue_ops: a.continue_ops.min(MAX_OPS),
        seed: a.seed,
        jobs,
        keep: 5,
    };
    s.validate()?;
    Ok(s)
}

fn eprintln_safe(s: &str) {
    let _ = writeln!(std::io::stderr().lock(), "{s}");
}

fn line(out: &mut dyn Write, s: &str) {
    let _ = writeln!(out, "{s}");
    let _ = out.flush();
}

/// While alive, panics print nothing: the campaign catches them and reports each as a
/// violation (with its message), and they must not scribble over the progress bar.
type PanicHook = Box<dyn Fn(&std::panic::PanicHookInfo<'_>) + Sync + Send>;

struct QuietPanics(Option<PanicHook>);

impl QuietPanics {
    fn new() -> Self {
        let old = std::panic::take_hook();
        std::panic::set_hook(Box::new(|_| {}));
        QuietPanics(Some(old))
    }
}

impl Drop for QuietPanics {
    fn drop(&mut self) {
        if let Some(old) = self.0.take() {
            std::panic::set_hook(old);
        }
    }
}

/// A mutation scenario with point `m` active: the campaign's pools (its workers enter
/// the scenario) run without the step, other pools of the process wait for it to end.
#[cfg(feature = "mutation")]
#[allow(unsafe_code)]
fn mutated(m: &'static pisces::mutation::MutationPoint) -> pisces::mutation::Scenario {
    let sc = pisces::mutation::Scenario::setup();
    // SAFETY: `pisces crashtest --mutation` is mutation testing (a test build with the
    // `mutation` feature): the campaign exists to show that the removed step matters.
    unsafe { sc.set(Some(m)) };
    sc
}

fn progress_bar(total: u64) -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let pb = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
    if let Ok(style) = ProgressStyle::with_template(
        "{prefix:>8} [{bar:32}] {pos}/{len} states {msg} ({elapsed}, eta {eta})",
    ) {
        pb.set_style(style.progress_chars("=> "));
    }
    pb
}

fn describe_settings(a: &CrashtestArgs, s: &Settings, names: &[&str]) -> String {
    let adversary = match s.adversary {
        Adversary::Random {
            p_keep_unflushed, ..
        } if s.domain == PersistenceDomain::PageCache => format!(
            "random per dirty page (written back {p_keep_unflushed}: whole 3 in 4, else torn at 512-byte sectors)"
        ),
        Adversary::Random {
            p_keep_flushed,
            p_keep_unflushed,
        } => format!("random per word (flushed {p_keep_flushed}, unflushed {p_keep_unflushed})"),
        Adversary::DurableOnly => "durable-only".into(),
        Adversary::AllWritten => "all-written".into(),
    };
    let mut m = format!(
        "crashtest: engine {}, domain {}, workloads {}, {} thread{}, {} ops per thread, {}, {} image{} per crash, adversary {adversary}, crash during recovery 1 in {}, seed {}",
        s.engine.name(),
        s.domain,
        names.join(" "),
        s.threads,
        if s.threads == 1 { "" } else { "s" },
        s.ops,
        if a.exhaustive { "every fence".to_string() } else { format!("random fences, {} states", a.states) },
        s.images,
        if s.images == 1 { "" } else { "s" },
        s.recovery_crash_one_in,
        s.seed,
    );
    if s.deferred > 0 {
        m.push_str(&format!(
            ", durability deferred (wait every {} ops)",
            s.deferred
        ));
    }
    #[cfg(feature = "mutation")]
    if let Some(mu) = &a.mutation {
        m.push_str(&format!(", MUTATION {mu} active"));
    }
    m
}

/// Run the campaign of one engine; returns the states checked and the violations.
fn campaign(a: &CrashtestArgs, s: &Settings, names: &[&str], out: &mut dyn Write) -> (u64, u64) {
    line(out, &describe_settings(a, s, names));
    let workloads: Vec<Box<dyn Workload>> =
        names.iter().filter_map(|n| workload_by_name(n)).collect();
    // States per workload: the total split as evenly as possible.
    let k = workloads.len() as u64;
    let per = |i: usize| match s.mode {
        Mode::Random { states } => Mode::Random {
            states: states / k + u64::from((i as u64) < states % k),
        },
        Mode::Exhaustive => Mode::Exhaustive,
    };
    let quiet = QuietPanics::new();
    let t0 = Instant::now();
    let mut plans = Vec::new();
    let mut reports = Vec::new();
    for (i, w) in workloads.iter().enumerate() {
        let settings = Settings {
            mode: per(i),
            ..s.clone()
        };
        match Plan::new(w.as_ref(), &settings) {
            Ok(p) => plans.push(p),
            // A workload that fails without any crash: a violation, reported below.
            Err(message) => reports.push(Report::failed_before_any_crash(w.name(), &message)),
        }
    }
    let total: u64 = plans.iter().map(|p| p.expected_states()).sum();
    let pb = progress_bar(total);
    let violations = AtomicU64::new(reports.iter().map(|r| r.violation_count).sum());
    for p in &plans {
        pb.set_prefix(p.workload.name());
        pb.set_message(format!("{} violations", violations.load(Ordering::Relaxed)));
        let tick = |n: u64, v: u64| {
            pb.inc(n);
            if v > 0 {
                let all = violations.fetch_add(v, Ordering::Relaxed) + v;
                pb.set_message(format!("{all} violations"));
            }
        };
        let r = run_plan(p, &tick);
        pb.suspend(|| line(out, &summary(&r)));
        reports.push(r);
    }
    pb.finish_and_clear();
    drop(quiet);
    let elapsed = t0.elapsed();
    let states: u64 = reports.iter().map(|r| r.states).sum();
    let bad: u64 = reports.iter().map(|r| r.violation_count).sum();
    let out_dir = a
        .out
        .clone()
        .unwrap_or_else(|| std::env::temp_dir().join("pisces-crashtest"));
    for r in &reports {
        for v in &r.violations {
            report_violation(a, s, v, &out_dir, out);
        }
        if r.violation_count > r.violations.len() as u64 {
            line(
                out,
                &format!(
                    "{}: {} more violations not shown",
                    r.workload,
                    r.violation_count - r.violations.len() as u64
                ),
            );
        }
    }
    line(
        out,
        &format!(
            "total: {states} states in {:.1} s, {:.0} states/s",
            elapsed.as_secs_f64(),
            states as f64 / elapsed.as_secs_f64().max(1e-9)
        ),
    );
    (states, bad)
}

fn summary(r: &Report) -> String {
    format!(
        "{:<11} {:>7} states from {:>6} crashes ({} with a crash during recovery{}), {} violations, {:.1} s, {:.0} states/s",
        r.workload,
        r.states,
        r.crashes,
        r.recovery_crashes,
        if r.missed > 0 {
            format!(
                ", {} run{} ended before {} crash point",
                r.missed,
                if r.missed == 1 { "" } else { "s" },
                if r.missed == 1 { "its" } else { "their" }
            )
        } else {
            String::new()
        },
        r.violation_count,
        r.elapsed.as_secs_f64(),
        r.states_per_second()
    )
}

/// Print a violation, write its crash image, and print the command reproducing it.
fn report_violation(
    a: &CrashtestArgs,
    s: &Settings,
    v: &Violation,
    out_dir: &Path,
    out: &mut dyn Write,
) {
    line(out, &format!("VIOLATION {v}"));
    let Some(index) = v.index else { return };
    let mut cmd = reproducer(a, s, v.workload, index);
    if let Some(image) = &v.image {
        let path = out_dir.join(format!("{}-seed{}-state{index}.pool", v.workload, s.seed));
        match std::fs::create_dir_all(out_dir).and_then(|()| std::fs::write(&path, image)) {
            Ok(()) => {
                line(out, &format!("  crash image: {}", path.display()));
                cmd.push_str(&format!(
                    " --image {} --acked {}",
                    shell_quote(&path.display().to_string()),
                    format_bounds(&v.bounds)
                ));
            }
            Err(e) => line(
                out,
                &format!(
                    "  could not write the crash image to {}: {e}",
                    path.display()
                ),
            ),
        }
    }
    line(out, &format!("  reproduce: {cmd}"));
}

/// The command line that re-runs state `index` of workload `w` of this campaign.
fn reproducer(a: &CrashtestArgs, s: &Settings, w: &str, index: u64) -> String {
    let mut c = format!(
        "pisces crashtest --engine {} --domain {} --workload {w} --threads {} --ops {} --seed {} --images {}",
        s.engine.name(),
        s.domain,
        s.threads,
        s.ops,
        s.seed,
        s.images
    );
    if s.deferred > 0 {
        c.push_str(&format!(" --deferred {}", s.deferred));
    }
    if a.exhaustive {
        c.push_str(" --exhaustive");
    }
    match a.adversary {
        AdversaryArg::Random => c.push_str(&format!(
            " --p-flushed {} --p-unflushed {}",
            a.p_flushed, a.p_unflushed
        )),
        AdversaryArg::DurableOnly => c.push_str(" --adversary durable-only"),
        AdversaryArg::AllWritten => c.push_str(" --adversary all-written"),
    }
    c.push_str(&format!(
        " --recovery-crash-every {} --continue-ops {}",
        s.recovery_crash_one_in, s.continue_ops
    ));
    if s.engine == EngineId::Pisces {
        let fd = match a.flush_diff {
            FlushDiffArg::Both => "both",
            FlushDiffArg::On => "on",
            FlushDiffArg::Off => "off",
        };
        let gc: Vec<String> = a.group_commit.iter().map(|g| g.to_string()).collect();
        c.push_str(&format!(
            " --flush-diff {fd} --group-commit {}",
            gc.join(",")
        ));
    }
    #[cfg(feature = "mutation")]
    if let Some(m) = &a.mutation {
        c.push_str(&format!(" --mutation {m}"));
    }
    c.push_str(&format!(" --reproduce {index}"));
    c
}

fn shell_quote(s: &str) -> String {
    if s.chars()
        .all(|c| c.is_ascii_alphanumeric() || "/._-+=:,".contains(c))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

fn reproduce_one(
    a: &CrashtestArgs,
    s: &Settings,
    names: &[&str],
    index: u64,
    out: &mut dyn Write,
) -> u8 {
    let [name] = names else {
        eprintln_safe("pisces crashtest: --reproduce needs one --workload, not all");
        return 2;
    };
    let Some(w) = workload_by_name(name) else {
        return 2;
    };
    let saved = match (&a.image, &a.acked) {
        (Some(path), Some(acked)) => {
            let bounds = match parse_bounds(acked) {
                Ok(b) => b,
                Err(e) => {
                    eprintln_safe(&format!("pisces crashtest: --acked: {e}"));
                    return 2;
                }
            };
            // The size first: a huge file is refused without reading it.
            let len = std::fs::metadata(path).map(|m| m.len());
            let read = match len {
                Ok(n) if n > MAX_IMAGE_BYTES => Err(std::io::Error::other(format!(
                    "{n} bytes is larger than any crash-test pool"
                ))),
                Ok(_) => std::fs::read(path),
                Err(e) => Err(e),
            };
            match read {
                Ok(img) => Some((img, bounds)),
                Err(e) => {
                    eprintln_safe(&format!(
                        "pisces crashtest: cannot read {}: {e}",
                        path.display()
                    ));
                    return 2;
                }
            }
        }
        _ => None,
    };
    let quiet = QuietPanics::new();
    let plan = match Plan::new(w.as_ref(), s) {
        Ok(p) => p,
        Err(e) => {
            drop(quiet);
            line(out, &format!("VIOLATION {name}: before any crash: {e}"));
            line(out, "crash states: 0 checked, 1 violations");
            return 1;
        }
    };
    let from_image = saved.is_some();
    let result = reproduce(&plan, index, saved);
    drop(quiet);
    let r = match result {
        Ok(r) => r,
        Err(e) => {
            eprintln_safe(&format!(
                "pisces crashtest: cannot reproduce state {index}: {e}"
            ));
            return 2;
        }
    };
    line(
        out,
        &format!(
            "{name} state {index}: crash at fence {} ({}), acknowledged {}{}",
            r.round.fence,
            if from_image {
                "image read from file"
            } else {
                "run again"
            },
            format_bounds(&r.bounds),
            r.recovery_crash.map_or(String::new(), |k| format!(
                ", crashed again at recovery fence {k}"
            ))
        ),
    );
    let bad = u64::from(r.verdict.is_err());
    match &r.verdict {
        Ok(()) => line(out, "recovered state is correct"),
        Err(e) => line(out, &format!("VIOLATION {e}")),
    }
    line(out, &format!("crash states: 1 checked, {bad} violations"));
    u8::from(bad > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting_and_engines() {
        assert_eq!(shell_quote("/tmp/a-b.pool"), "/tmp/a-b.pool");
        assert_eq!(shell_quote("/tmp/a b"), "'/tmp/a b'");
        assert!(parse_engine("nope").unwrap_err().contains("pisces"));
        assert!(parse_workload("bank").is_ok() && parse_workload("all").is_ok());
        assert!(parse_workload("x").is_err());
    }

    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        args: CrashtestArgs,
    }

    fn settings_of(cmd: &str) -> (CrashtestArgs, Settings) {
        use clap::Parser;
        let words = cmd.split_whitespace().skip_while(|w| *w == "pisces");
        let a = Cli::try_parse_from(words).unwrap().args;
        let s = settings(&a, a.engine.unwrap_or(EngineId::Pisces)).unwrap();
        (a, s)
    }

    #[test]
    fn the_reproducer_carries_deferred_durability() {
        let (a, s) = settings_of("crashtest --engine sp3 --workload bank --deferred 3");
        assert_eq!(s.deferred, 3);
        let cmd = reproducer(&a, &s, "bank", 7);
        assert!(cmd.contains(" --deferred 3 "), "{cmd}");
        let (_, again) = settings_of(&cmd);
        assert_eq!((again.deferred, again.engine), (3, EngineId::Sp3));
        let (a, s) = settings_of("crashtest --workload bank");
        assert_eq!(s.deferred, 0);
        assert!(!reproducer(&a, &s, "bank", 7).contains("--deferred"));
    }
}
