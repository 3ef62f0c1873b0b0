//! `bank`: transfers between accounts, one object per account.
//!
//! Operation `i` of thread `t` moves a fixed amount between two accounts chosen by
//! `(t, i)`, unconditionally (balances may go negative), so transfers of different
//! threads commute and the balances after `c[t]` transfers of each thread are known.
//! The oracle checks, in this order: the total is conserved (no transfer is present in
//! part), the balances equal those after exactly the acknowledged transfers of each
//! thread, or that plus some of its transfers in doubt (every acknowledged transfer is
//! present; see [`Bounds`]), and the allocator holds exactly the table and the accounts.

use super::oracle::allocated_equals_reachable;
use super::rng::mix;
use super::workload::{candidates, format_bounds, Bounds, Workload};
use pisces::{PPtr, Pool, Result, ThreadHandle, TxOptions};
use std::collections::{BTreeSet, HashMap};

/// Number of accounts.
pub const ACCOUNTS: usize = 8;
/// Initial balance of each account.
pub const INITIAL: i64 = 100;

type Table = [PPtr<i64>; ACCOUNTS];

/// The bank workload (see the [module docs](self)).
#[derive(Clone, Copy, Debug, Default)]
pub struct Bank;

/// The `i`-th transfer of thread `t`: `(from, to, amount)` with `from != to`.
pub fn transfer(t: usize, i: usize) -> (usize, usize, i64) {
    let x = mix(t as u64 + 0xBA4C, i as u64);
    let from = (x >> 20) as usize % ACCOUNTS;
    let to = (from + 1 + (x >> 40) as usize % (ACCOUNTS - 1)) % ACCOUNTS;
    (from, to, (x >> 8) as i64 % 37 + 1)
}

/// Balances after the first `counts[t]` transfers of each thread `t`.
pub fn balances_after(counts: &[usize]) -> [i64; ACCOUNTS] {
    let mut b = [INITIAL; ACCOUNTS];
    for (t, &c) in counts.iter().enumerate() {
        for i in 0..c {
            let (from, to, amount) = transfer(t, i);
            b[from] -= amount;
            b[to] += amount;
        }
    }
    b
}

impl Workload for Bank {
    fn name(&self) -> &'static str {
        "bank"
    }

    fn describe(&self) -> &'static str {
        "transfers between 8 accounts: total conserved, exactly the acknowledged transfers (plus any in doubt) present, allocator = accounts"
    }

    fn setup(&self, pool: &Pool) -> Result<()> {
        let table: PPtr<Table> = pool.root()?;
        pool.run(|tx| {
            let mut t = [PPtr::null(); ACCOUNTS];
            for a in t.iter_mut() {
                *a = tx.alloc(INITIAL)?;
            }
            *tx.write(table)? = t;
            Ok(())
        })
    }

    fn root(&self, pool: &Pool) -> Result<u64> {
        Ok(pool.root::<Table>()?.offset())
    }

    fn op(
        &self,
        h: &mut ThreadHandle,
        root: u64,
        thread: usize,
        i: usize,
        opts: TxOptions,
    ) -> Result<()> {
        let (from, to, amount) = transfer(thread, i);
        let table: PPtr<Table> = PPtr::from_offset(root);
        h.run_with(opts, |tx| {
            let accounts = *tx.read(table)?;
            *tx.write(accounts[from])? -= amount;
            *tx.write(accounts[to])? += amount;
            Ok(())
        })
    }

    fn check(&self, pool: &Pool, bounds: &[Bounds]) -> std::result::Result<Vec<usize>, String> {
        let table: PPtr<Table> = pool.root().map_err(|e| format!("root: {e}"))?;
        let (accounts, got) = pool
            .run(|tx| {
                let t = *tx.read(table)?;
                let mut b = [0i64; ACCOUNTS];
                for (i, a) in t.iter().enumerate() {
                    b[i] = *tx.read(*a)?;
                }
                Ok((t, b))
            })
            .map_err(|e| format!("reading the accounts: {e}"))?;
        let total: i64 = got.iter().sum();
        if total != INITIAL * ACCOUNTS as i64 {
            return Err(format!(
                "total not conserved: {total} instead of {} (balances {got:?})",
                INITIAL * ACCOUNTS as i64
            ));
        }
        // Per thread, the balance changes of its first `c` transfers for every allowed
        // `c`: a candidate's balances are then a sum of one of these per thread, so
        // trying one costs threads x accounts, not every transfer again (there are
        // many candidates with deferred durability).
        let deltas: Vec<Vec<[i64; ACCOUNTS]>> = bounds
            .iter()
            .enumerate()
            .map(|(t, b)| {
                let mut d = [0i64; ACCOUNTS];
                let mut after = Vec::with_capacity(b.maybe + 1);
                for i in 0..b.acked + b.maybe {
                    if i >= b.acked {
                        after.push(d);
                    }
                    let (from, to, amount) = transfer(t, i);
                    d[from] -= amount;
                    d[to] += amount;
                }
                after.push(d);
                after
            })
            .collect();
        let counts = find_counts(bounds, &deltas, got).ok_or_else(|| {
            format!(
                "balances {got:?} are those after no allowed numbers of transfers (acknowledged {})",
                format_bounds(bounds)
            )
        })?;
        let mut reachable: BTreeSet<u64> = accounts.iter().map(|p| p.offset()).collect();
        reachable.insert(table.offset());
        allocated_equals_reachable(pool, &reachable)?;
        Ok(counts)
    }
}

/// Counts of transfers per thread, within `bounds`, whose balances are `got`, if any:
/// `deltas[t][k]` is thread `t`'s change to the balances after `acked + k` transfers.
///
/// Meet in the middle: the balances are a sum of one delta per thread, so the threads
/// are split in two groups of about as many combinations each; every sum of the first
/// group is kept by value, and each combination of the second looks up the sum it
/// needs from the first. That tries about the square root of the combinations that
/// trying each one in turn would (many threads with operations in doubt each make
/// millions of them), at the cost of one table of the first group's sums.
fn find_counts(
    bounds: &[Bounds],
    deltas: &[Vec<[i64; ACCOUNTS]>],
    got: [i64; ACCOUNTS],
) -> Option<Vec<usize>> {
    // The split: the first group takes threads while its combinations stay at or below
    // the square root of all of them.
    let all: f64 = bounds.iter().map(|b| (b.maybe + 1) as f64).product();
    let mut split = 0;
    let mut first = 1.0;
    while split < bounds.len() && first * ((bounds[split].maybe + 1) as f64) <= all.sqrt() {
        first *= (bounds[split].maybe + 1) as f64;
        split += 1;
    }
    let (low, high) = bounds.split_at(split);
    // The summed deltas of `counts`, the counts of threads `from..` (bounds `group`).
    let sum = |group: &[Bounds], from: usize, counts: &[usize]| {
        let mut b = [0i64; ACCOUNTS];
        for (i, &n) in counts.iter().enumerate() {
            for (x, d) in b.iter_mut().zip(deltas[from + i][n - group[i].acked]) {
                *x += d;
            }
        }
        b
    };
    let mut sums: HashMap<[i64; ACCOUNTS], Vec<usize>> = HashMap::new();
    for c in candidates(low) {
        sums.entry(sum(low, 0, &c)).or_insert(c);
    }
    for c in candidates(high) {
        let s = sum(high, split, &c);
        let mut need = got;
        for (n, x) in need.iter_mut().zip(s) {
            *n -= INITIAL + x;
        }
        if let Some(l) = sums.get(&need) {
            return Some(l.iter().chain(&c).copied().collect());
        }
    }
    None
}
