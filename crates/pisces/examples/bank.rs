//! A bank that survives `kill -9`.
//!
//! ```text
//! cargo run --release -p pisces --example bank -- /dev/shm/bank.pool [seconds]
//! ```
//! Creates the pool on first use (1000 accounts of 1000 each), checks on every start
//! that the total is exactly 1 000 000 and that the last acknowledged transfer number
//! is at most the one the pool holds (acknowledged work is never lost), then runs
//! transfers on two threads, printing each acknowledged transfer number to stdout.
//! Kill it at any moment (`kill -9`) and start it again: recovery replays the redo
//! logs and the checks pass. `examples/bank_crash_loop.sh` does that in a loop.

use pisces::{Config, PPtr, Pool};
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

const ACCOUNTS: usize = 1000;
const INITIAL: u64 = 1000;

pisces::pod! {
    struct Root {
        /// Account objects (one persistent object each, so transfers lock two objects).
        accounts: PPtr<[PPtr<u64>; ACCOUNTS]>,
        /// Transfers committed so far (incremented by every transfer).
        transfers: u64,
    }
}

fn setup(pool: &Pool, root: PPtr<Root>) -> pisces::Result<()> {
    pool.run(|tx| {
        if !tx.read(root)?.accounts.is_null() {
            return Ok(());
        }
        let mut table = [PPtr::null(); ACCOUNTS];
        for a in table.iter_mut() {
            *a = tx.alloc(INITIAL)?;
        }
        let t = tx.alloc(table)?;
        tx.write(root)?.accounts = t;
        Ok(())
    })
}

fn audit(pool: &Pool, root: PPtr<Root>) -> pisces::Result<(u64, u64)> {
    pool.run(|tx| {
        let r = *tx.read(root)?;
        let table = *tx.read(r.accounts)?;
        let mut total = 0;
        for a in table {
            total += *tx.read(a)?;
        }
        Ok((total, r.transfers))
    })
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let path = args
        .next()
        .unwrap_or_else(|| "/dev/shm/pisces-bank.pool".into());
    let seconds: u64 = args.next().map(|s| s.parse()).transpose()?.unwrap_or(5);
    let cfg = Config::default().size(64 << 20).max_threads(4);
    let pool = Pool::open_or_create(&path, cfg)?;
    let root: PPtr<Root> = pool.root()?;
    setup(&pool, root)?;
    let (total, transfers) = audit(&pool, root)?;
    let expected = INITIAL * ACCOUNTS as u64;
    eprintln!("opened {path}: total {total} (expected {expected}), {transfers} transfers so far");
    if total != expected {
        return Err(format!("INVARIANT BROKEN: total {total} != {expected}").into());
    }
    // The previous run printed the transfer numbers it acknowledged; the caller checks
    // that the last one is <= `transfers` (see bank_crash_loop.sh).
    println!("recovered {transfers}");

    let accounts = pool.run(|tx| Ok(*tx.read(tx.read(root)?.accounts)?))?;
    let stop = AtomicBool::new(false);
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let out = std::sync::Mutex::new(std::io::stdout());
    std::thread::scope(|s| {
        for t in 0..2u64 {
            let (pool, stop, out) = (pool.clone(), &stop, &out);
            s.spawn(move || -> pisces::Result<()> {
                let mut h = pool.handle()?;
                let mut x = t.wrapping_add(0x9E37_79B9_7F4A_7C15);
                while !stop.load(Ordering::Relaxed) {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    let from = (x % ACCOUNTS as u64) as usize;
                    let to = ((x >> 20) % ACCOUNTS as u64) as usize;
                    let amount = (x >> 40) % 100;
                    let n = h.run(|tx| {
                        let f = *tx.read(accounts[from])?;
                        if from != to && f >= amount {
                            *tx.write(accounts[from])? -= amount;
                            *tx.write(accounts[to])? += amount;
                        }
                        let r = tx.write(root)?;
                        r.transfers += 1;
                        Ok(r.transfers)
                    })?;
                    // Acknowledged: the commit returned, so transfer n is durable.
                    let _ = writeln!(out.lock().unwrap(), "ack {n}");
                }
                Ok(())
            });
        }
        while Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        stop.store(true, Ordering::Relaxed);
    });
    let (total, transfers) = audit(&pool, root)?;
    eprintln!("stopped: total {total}, {transfers} transfers");
    Ok(())
}
