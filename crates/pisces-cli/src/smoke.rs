//! `pisces smoke`: a short smoke run of the Pisces engine on a fresh pool under
//! `/dev/shm`.
//!
//! It creates a pool with a unique name (removed at the end, also on errors), runs the
//! bank-transfer workload of [`crate::bank`] with 1 and 2 worker threads plus a
//! concurrent auditor, closes the pool, reopens it (recovery runs), checks the total
//! again and runs `pisces check` on the file, and prints a table. The engine
//! comparison is the `pisces-bench` binary.

use crate::bank::{self, RoundStats, ACCOUNTS, TOTAL};
use crate::output::{err, out};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use pisces::tools::check::check_pool;
use pisces::{Config, MediumKind, Pool};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Removes the pool file when dropped (the pool itself is dropped first).
struct RemoveOnDrop(PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        // Best effort: the file may not have been created.
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Where to put the pool: `/dev/shm` (DRAM) if it exists, else the temporary directory.
fn pool_dir() -> PathBuf {
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        shm.to_path_buf()
    } else {
        std::env::temp_dir()
    }
}

fn unique_name() -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("pisces-smoke-{}-{nanos}.pool", std::process::id())
}

fn progress(threads: usize, seconds: f64) -> ProgressBar {
    let pb = ProgressBar::with_draw_target(
        Some((seconds * 1000.0) as u64),
        ProgressDrawTarget::stderr(),
    );
    if let Ok(style) = ProgressStyle::with_template("{prefix:>12} [{bar:32}] {msg}") {
        pb.set_style(style.progress_chars("=> "));
    }
    pb.set_prefix(format!(
        "{threads} thread{}",
        if threads == 1 { "" } else { "s" }
    ));
    pb
}

/// Run the smoke test with rounds of `seconds` each.
pub fn run(seconds: f64) -> ExitCode {
    let path = pool_dir().join(unique_name());
    let guard = RemoveOnDrop(path.clone());
    let code = match job(&path, seconds) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            err(&format!("pisces: smoke run failed: {e}"));
            ExitCode::from(2)
        }
    };
    drop(guard);
    if path.exists() {
        err(&format!("pisces: could not remove {}", path.display()));
    } else {
        out(&format!("pool file removed: {}\n", path.display()));
    }
    code
}

/// The job; `Ok(false)` if an invariant failed.
fn job(path: &Path, seconds: f64) -> Result<bool, String> {
    let cfg = Config::default()
        .size(64 << 20)
        .medium(MediumKind::DRAM)
        // The smoke run checks invariants and recovery after a reopen, not power loss:
        // the DRAM medium also where no /dev/shm holds the pool.
        .allow_volatile_medium(true)
        .max_threads(8);
    out(&format!(
        "pisces smoke: bank transfers on the Pisces engine\n\
         pool: {} ({} MiB, {} thread slots, medium dram, no emulated NVM latency)\n\
         workload: {ACCOUNTS} accounts of {} (total {TOTAL}), random transfers of 1..=100, \
         one transaction each, plus a concurrent read-only auditor that sums all balances \
         every {} ms and checks the exact total\n\n",
        path.display(),
        cfg.size >> 20,
        cfg.max_threads,
        bank::INITIAL,
        bank::AUDIT_PAUSE.as_millis(),
    ));
    let pool = Pool::create(path, cfg.clone()).map_err(|e| e.to_string())?;
    let bank = bank::setup(&pool).map_err(|e| e.to_string())?;
    let mut rounds: Vec<RoundStats> = Vec::new();
    for threads in [1, 2] {
        let pb = progress(threads, seconds);
        let st = bank::run_round(
            &pool,
            bank,
            threads,
            Duration::from_secs_f64(seconds),
            |el, done| {
                pb.set_position(el.as_millis() as u64);
                pb.set_message(format!("{done} transactions"));
            },
        );
        pb.finish_and_clear();
        rounds.push(st?);
    }
    let total_live = bank::total(&pool, bank).map_err(|e| e.to_string())?;
    drop(pool);

    // Reopen: recovery runs over the logs, the run generation is bumped.
    let pool = Pool::open(path, cfg).map_err(|e| format!("reopening the pool: {e}"))?;
    let bank2 = bank::setup(&pool).map_err(|e| e.to_string())?;
    let total_reopened = bank::total(&pool, bank2).map_err(|e| e.to_string())?;
    drop(pool);
    let report = check_pool(path, MediumKind::DRAM).map_err(|e| e.to_string())?;

    let mut t = String::new();
    t += &format!(
        "{:>7}  {:>14}  {:>9}  {:>8}  {:>10}  {:>10}  {:>9}\n",
        "threads", "committed tx/s", "transfers", "refused", "audits", "lines/tx", "fences/tx"
    );
    for r in &rounds {
        let txs = (r.transfers + r.refused).max(1) as f64;
        let ok = if r.bad_audits == 0 {
            "ok".to_string()
        } else {
            format!("{} BAD", r.bad_audits)
        };
        t += &format!(
            "{:>7}  {:>14.0}  {:>9}  {:>8}  {:>10}  {:>10.2}  {:>9.2}\n",
            r.threads,
            r.tx_per_sec(),
            r.transfers,
            r.refused,
            format!("{} {ok}", r.audits),
            r.lines_flushed as f64 / txs,
            r.fences as f64 / txs,
        );
    }
    out(&t);
    let audits_ok = rounds.iter().all(|r| r.bad_audits == 0);
    let totals_ok = total_live == TOTAL && total_reopened == TOTAL;
    out(&format!(
        "\ntotal ok: {} (every audit saw {TOTAL}; after the rounds {total_live}; after close and reopen {total_reopened})\n\
         check after reopen: {}\n\n\
         Figures are on DRAM (/dev/shm) with real cache-line flushes and fences but no emulated \
         NVM latency: they are not NVM numbers. lines/tx and fences/tx count the workers' own \
         flushes. The engine comparison is `pisces-bench`.\n",
        if audits_ok && totals_ok { "yes" } else { "NO" },
        report.summary_line(),
    ));
    if !report.is_ok() {
        out(&report.to_string());
    }
    Ok(audits_ok && totals_ok && report.is_ok())
}
