//! The bank-transfer workload of `pisces smoke`.
//!
//! [`ACCOUNTS`] accounts, each its own persistent object (so that transfers between
//! different accounts do not conflict), start with [`INITIAL`] each. Worker threads move
//! random amounts between random pairs of accounts, each transfer one transaction; a
//! concurrent auditor thread sums all balances in read-only transactions (one every
//! [`AUDIT_PAUSE`]) and counts every sum that is not the exact total (snapshot
//! isolation says there is none).

use bytemuck::{Pod, Zeroable};
use pisces::tools::counters;
use pisces::{PPtr, Pool};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Number of accounts.
pub const ACCOUNTS: usize = 64;
/// Initial balance of every account.
pub const INITIAL: u64 = 1_000;
/// Pause between two audits. A back-to-back auditor is a third busy thread next to two
/// workers on a 2-core machine, and every write-back's grace period then waits for
/// its 64-read transaction (often descheduled): the table would measure that, not the
/// workers.
pub const AUDIT_PAUSE: Duration = Duration::from_millis(1);
/// The sum every audit must see.
pub const TOTAL: u64 = ACCOUNTS as u64 * INITIAL;

/// The root object: one pointer per account.
#[derive(Clone, Copy, Pod, Zeroable)]
#[repr(C)]
pub struct Bank {
    /// The accounts' balances, one object each.
    pub accounts: [PPtr<u64>; ACCOUNTS],
}

/// Open the bank of `pool`, creating the accounts on first use.
pub fn setup(pool: &Pool) -> pisces::Result<PPtr<Bank>> {
    let bank: PPtr<Bank> = pool.root()?;
    pool.run(|tx| {
        if !tx.read(bank)?.accounts[0].is_null() {
            return Ok(());
        }
        for i in 0..ACCOUNTS {
            let a = tx.alloc(INITIAL)?;
            tx.write(bank)?.accounts[i] = a;
        }
        Ok(())
    })?;
    Ok(bank)
}

/// The sum of all balances, in one transaction.
pub fn total(pool: &Pool, bank: PPtr<Bank>) -> pisces::Result<u64> {
    pool.run(|tx| sum(tx, bank))
}

fn sum(tx: &pisces::Tx<'_>, bank: PPtr<Bank>) -> pisces::Result<u64> {
    let accounts = tx.read(bank)?.accounts;
    let mut s = 0u64;
    for a in accounts {
        s += *tx.read(a)?;
    }
    Ok(s)
}

/// What one round did.
#[derive(Clone, Debug, Default)]
pub struct RoundStats {
    /// Worker threads.
    pub threads: usize,
    /// Wall time of the round.
    pub elapsed: Duration,
    /// Transfers committed.
    pub transfers: u64,
    /// Transfers refused (insufficient funds; committed as read-only transactions).
    pub refused: u64,
    /// Audits completed.
    pub audits: u64,
    /// Audits that saw a total other than [`TOTAL`].
    pub bad_audits: u64,
    /// Cache lines the workers flushed.
    pub lines_flushed: u64,
    /// Fences the workers issued.
    pub fences: u64,
}

impl RoundStats {
    /// Committed transactions (transfers and refusals) per second.
    pub fn tx_per_sec(&self) -> f64 {
        (self.transfers + self.refused) as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

struct WorkerOut {
    transfers: u64,
    refused: u64,
    lines_flushed: u64,
    fences: u64,
}

/// Progress shared with the caller's ticker: transactions done so far.
static DONE: AtomicU64 = AtomicU64::new(0);

fn worker(
    pool: &Pool,
    bank: PPtr<Bank>,
    seed: u64,
    stop: &AtomicBool,
) -> Result<WorkerOut, String> {
    let before = counters::snapshot();
    let mut out = WorkerOut {
        transfers: 0,
        refused: 0,
        lines_flushed: 0,
        fences: 0,
    };
    {
        let mut h = pool.handle().map_err(|e| e.to_string())?;
        let accounts = h
            .run(|tx| Ok(tx.read(bank)?.accounts))
            .map_err(|e| e.to_string())?;
        let mut rng = StdRng::seed_from_u64(seed);
        let mut unreported = 0u64;
        // Relaxed: a stop flag; nothing else is published through it.
        while !stop.load(Ordering::Relaxed) {
            let from = rng.gen_range(0..ACCOUNTS);
            let to = (from + rng.gen_range(1..ACCOUNTS)) % ACCOUNTS;
            let amount = rng.gen_range(1..=100u64);
            let (src, dst) = (accounts[from], accounts[to]);
            let moved = h
                .run(|tx| {
                    if *tx.read(src)? < amount {
                        return Ok(false);
                    }
                    *tx.write(src)? -= amount;
                    *tx.write(dst)? += amount;
                    Ok(true)
                })
                .map_err(|e| e.to_string())?;
            if moved {
                out.transfers += 1;
            } else {
                out.refused += 1;
            }
            unreported += 1;
            if unreported == 256 {
                // Relaxed: a progress statistic.
                DONE.fetch_add(unreported, Ordering::Relaxed);
                unreported = 0;
            }
        }
        DONE.fetch_add(unreported, Ordering::Relaxed);
        // The handle is dropped here: its pending group-commit write-backs are done on
        // this thread and counted below.
    }
    let c = counters::snapshot() - before;
    out.lines_flushed = c.lines_flushed;
    out.fences = c.fences;
    Ok(out)
}

fn auditor(pool: &Pool, bank: PPtr<Bank>, stop: &AtomicBool) -> Result<(u64, u64), String> {
    let mut h = pool.handle().map_err(|e| e.to_string())?;
    let (mut audits, mut bad) = (0u64, 0u64);
    // Relaxed: a stop flag. At least one audit runs, however short the round.
    loop {
        let s = h.run(|tx| sum(tx, bank)).map_err(|e| e.to_string())?;
        audits += 1;
        if s != TOTAL {
            bad += 1;
        }
        if stop.load(Ordering::Relaxed) {
            return Ok((audits, bad));
        }
        std::thread::sleep(AUDIT_PAUSE);
    }
}

/// Run `threads` transfer workers and one auditor for `duration`. `tick(elapsed,
/// transactions so far)` is called about every 50 ms from the calling thread.
pub fn run_round(
    pool: &Pool,
    bank: PPtr<Bank>,
    threads: usize,
    duration: Duration,
    mut tick: impl FnMut(Duration, u64),
) -> Result<RoundStats, String> {
    let stop = AtomicBool::new(false);
    DONE.store(0, Ordering::Relaxed);
    let seed0: u64 = rand::thread_rng().gen();
    let start = Instant::now();
    let (workers, audit) = std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|i| {
                let stop = &stop;
                s.spawn(move || worker(pool, bank, seed0.wrapping_add(i as u64), stop))
            })
            .collect();
        let audit = s.spawn(|| auditor(pool, bank, &stop));
        loop {
            let el = start.elapsed();
            tick(el, DONE.load(Ordering::Relaxed));
            if el >= duration {
                break;
            }
            std::thread::sleep((duration - el).min(Duration::from_millis(50)));
        }
        stop.store(true, Ordering::Relaxed);
        let workers: Vec<_> = workers
            .into_iter()
            .map(|w| {
                w.join()
                    .unwrap_or_else(|_| Err("a worker thread panicked".into()))
            })
            .collect();
        let audit = audit
            .join()
            .unwrap_or_else(|_| Err("the auditor thread panicked".into()));
        (workers, audit)
    });
    let elapsed = start.elapsed();
    let mut st = RoundStats {
        threads,
        elapsed,
        ..RoundStats::default()
    };
    for w in workers {
        let w = w?;
        st.transfers += w.transfers;
        st.refused += w.refused;
        st.lines_flushed += w.lines_flushed;
        st.fences += w.fences;
    }
    let (audits, bad) = audit?;
    st.audits = audits;
    st.bad_audits = bad;
    Ok(st)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pisces::Config;

    #[test]
    fn transfers_keep_the_total_and_audits_see_it() {
        let dir = tempfile::tempdir_in("/dev/shm").unwrap();
        let pool = Pool::create(
            dir.path().join("bank.pool"),
            Config::default()
                .size(8 << 20)
                .max_threads(4)
                .log_bytes_per_thread(64 << 10),
        )
        .unwrap();
        let bank = setup(&pool).unwrap();
        assert_eq!(total(&pool, bank).unwrap(), TOTAL);
        // Setting up again does not add accounts.
        assert_eq!(setup(&pool).unwrap(), bank);
        assert_eq!(total(&pool, bank).unwrap(), TOTAL);
        let mut ticks = 0;
        let st = run_round(&pool, bank, 2, Duration::from_millis(300), |_, _| {
            ticks += 1
        })
        .unwrap();
        assert!(ticks >= 2);
        assert!(st.transfers > 100, "{st:?}");
        assert!(st.audits >= 1 && st.bad_audits == 0, "{st:?}");
        assert!(st.lines_flushed > 0 && st.fences > 0, "{st:?}");
        assert_eq!(total(&pool, bank).unwrap(), TOTAL);
        // Balances moved.
        let balances = pool
            .run(|tx| {
                let a = tx.read(bank)?.accounts;
                let mut v = Vec::new();
                for p in a {
                    v.push(*tx.read(p)?);
                }
                Ok(v)
            })
            .unwrap();
        assert!(balances.iter().any(|&b| b != INITIAL));
        // No free thread slot is an error, not a panic. The slots are held here, so
        // the outcome does not depend on how the round's threads are scheduled.
        let held: Vec<_> = (0..4).map(|_| pool.handle().unwrap()).collect();
        assert!(run_round(&pool, bank, 1, Duration::from_millis(10), |_, _| {}).is_err());
        drop(held);
        assert!(run_round(&pool, bank, 1, Duration::from_millis(10), |_, _| {}).is_ok());
    }
}
