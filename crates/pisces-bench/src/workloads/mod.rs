//! What every data set of the benchmark is: the [`DataSet`] trait, the data-set
//! [`Sizes`], and the preload helpers they share.
//!
//! A data set is built (preloaded) once per measurement on a fresh pool and then
//! shared by the worker threads; each worker calls [`DataSet::op`] in a loop, one
//! transaction per call, asking for a read-only operation or an update as its seeded
//! RNG decides. `op` returns the bytes the *program* changed (the denominator of write
//! amplification), 0 for a read.
//!
//! The data sets themselves ([`hash`], [`btree`], [`set`], [`tree_set`], [`ycsb`],
//! [`strmap`], [`bulk`], [`hot`], [`capi`], [`oltp`]'s `tpcc` and `tatp`) depend on this
//! module only (and `capi` and `bulk` on `hash`, `tree_set` on `set`, `strmap` on
//! `ycsb`'s request distribution); [`kinds`], which names, sizes and builds
//! them, sits on top of them. [`select`] (what `--workloads` selects) depends on none
//! of them.

pub mod anchor;
pub mod btree;
pub mod bulk;
pub mod capi;
pub mod hash;
pub mod hot;
pub mod kinds;
pub mod oltp;
pub mod select;
pub mod set;
pub mod strmap;
pub mod tree_set;
pub mod ycsb;

use pisces::{Durability, Error, ThreadHandle, Tx, TxOptions, TxStats};
use rand::rngs::{SmallRng, StdRng};
use rand::seq::SliceRandom;
use rand::SeedableRng;
use std::hint::black_box;

std::thread_local! {
    /// Update transactions of the key-value data sets ([`hash`], [`btree`], [`set`],
    /// [`ycsb`], [`strmap`], [`bulk`], [`hot`]) run on this thread return after they
    /// are durable (false), or once visible, with durability deferred (true:
    /// `--durability deferred`). Per thread: a measurement's worker sets it for its own
    /// operations ([`set_deferred_updates`]), so measurements that run side by side
    /// (the harness's tests) do not see each other's; preloads, on the main thread,
    /// and the other data sets commit durable on return.
    static DEFERRED_UPDATES: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Set how this thread's update transactions commit (see [`update_options`]).
pub fn set_deferred_updates(deferred: bool) {
    DEFERRED_UPDATES.with(|d| d.set(deferred));
}

/// The options of an update transaction of a key-value data set: durable on return,
/// or with durability deferred ([`set_deferred_updates`]).
#[inline]
pub fn update_options() -> TxOptions {
    let durability = if DEFERRED_UPDATES.with(std::cell::Cell::get) {
        Durability::Deferred
    } else {
        Durability::OnReturn
    };
    TxOptions::default().durability(durability)
}

/// Keys inserted per transaction while preloading.
pub const PRELOAD_BATCH: usize = 64;

/// Preload: `insert(tx, k)` for every key of `keys`, [`PRELOAD_BATCH`] keys per
/// transaction.
pub fn preload(
    h: &mut ThreadHandle,
    keys: &[u64],
    mut insert: impl FnMut(&mut Tx<'_>, u64) -> pisces::Result<()>,
) -> pisces::Result<()> {
    for batch in keys.chunks(PRELOAD_BATCH) {
        h.run(|tx| {
            for &k in batch {
                insert(tx, k)?;
            }
            Ok(())
        })?;
    }
    Ok(())
}

/// Bytes the program changes in an update of a set data set ([`set`], [`tree_set`]):
/// the key removed and the key added back (8 each; their one-byte placeholder value is
/// not counted).
pub const SET_UPDATE_BYTES: u64 = 16;

/// The error of a set data set that finds one of its members missing.
pub fn missing_member(set: &str, k: u64) -> Error {
    Error::Corrupt(format!("{set}: member key {k} is missing").into())
}

/// The generator of a worker's transactions (their kind, keys and arguments): seeded
/// per worker, so a run is reproducible. A small non-cryptographic generator
/// (xoshiro256++): a transaction of the `set` data set costs a few tens of ns, and a
/// draw of a cryptographic one (`StdRng`, ChaCha12, with its block refills) would be a
/// visible part of it.
pub type OpRng = SmallRng;

/// A uniform pick from `0 .. n` (0 if `n` is 0): the high half of a 64×64-bit product
/// (Lemire's multiply-shift without the rejection step, whose bias is below
/// `n / 2^64`, nothing for the sizes of these data sets).
#[inline]
pub fn pick(rng: &mut OpRng, n: u64) -> u64 {
    use rand::RngCore;
    ((u128::from(rng.next_u64()) * u128::from(n)) >> 64) as u64
}

/// The read-only side of [`DataSet::op`]: `read` as one read-only transaction on `h`
/// ([`ThreadHandle::read`]), its result
/// kept alive through [`black_box`] (a lookup whose result nobody uses could be
/// optimised away), and 0 bytes changed. `#[inline]`: it is on the measured path, and
/// costs no more than writing it out in place.
#[inline]
pub fn read_only_op<R>(
    h: &mut ThreadHandle,
    read: impl FnMut(&Tx<'_>) -> pisces::Result<R>,
) -> pisces::Result<u64> {
    black_box(h.read(read)?);
    Ok(0)
}

/// A preloaded data set shared by the workers of one measurement.
pub trait DataSet: Send + Sync {
    /// Run one transaction on `h` for worker thread `worker` (`0..threads`): a read,
    /// or an update if `update`. Returns the bytes the program changed (0 for a read).
    fn op(
        &self,
        worker: usize,
        h: &mut ThreadHandle,
        rng: &mut OpRng,
        update: bool,
    ) -> pisces::Result<u64>;

    /// Called on worker `worker`'s thread after its last operation, before its Rust
    /// handle is dropped: a data set that holds something per worker gives it back
    /// here, and one that ran the worker's transactions on a handle of its own (the
    /// `capi` data set's C handles) returns that handle's counts, which then replace
    /// the Rust handle's.
    fn worker_done(&self, _worker: usize) -> Option<TxStats> {
        None
    }

    /// Called when the pool this data set was built on has been closed and opened
    /// again (the same bytes, a new [`pisces::Pool`]): a data set gives the new pool
    /// what does not live in the pool's bytes (its registered operations). Only the
    /// data sets whose [`kinds::DataKind::reopens`] is true are reopened.
    fn reopened(&self, _pool: &pisces::Pool) -> pisces::Result<()> {
        Ok(())
    }

    /// Called once the workers have stopped, before the pool is closed: a data set
    /// that can tell whether its contents are what its operations leave reads them
    /// back and says what is wrong (the measurement then fails). Most data sets check
    /// nothing here (their tests check their contents).
    fn final_check(&self, _pool: &pisces::Pool) -> Result<(), String> {
        Ok(())
    }

    /// Where this data set is in its pool, for a process that opens the pool and has
    /// nothing else of it ([`anchor`]); None for the data sets that cannot be found
    /// again that way (they are measured in one process only).
    fn anchor(&self) -> Option<anchor::Anchor> {
        None
    }
}

/// Data-set sizes (the sets' sizes are part of their [`DataKind`](kinds::DataKind)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sizes {
    /// Buckets of the hash table.
    pub hash_buckets: usize,
    /// Pairs preloaded into the hash table.
    pub hash_pairs: usize,
    /// Keys preloaded into the B+-tree.
    pub btree_keys: usize,
    /// TPC-C items (and stock rows per warehouse).
    pub tpcc_items: usize,
    /// TPC-C customers (and preloaded orders) per district.
    pub tpcc_customers: usize,
    /// TATP subscribers.
    pub tatp_subscribers: usize,
}

impl Sizes {
    /// The paper's sizes (`--full`).
    pub const FULL: Sizes = Sizes {
        hash_buckets: 10_000,
        hash_pairs: 100_000,
        btree_keys: 1_000_000,
        tpcc_items: 100_000,
        tpcc_customers: 3_000,
        tatp_subscribers: 200_000,
    };
    /// Scaled down for 2 cores and a few minutes (`--quick`, the main job).
    pub const QUICK: Sizes = Sizes {
        hash_buckets: 10_000,
        hash_pairs: 20_000,
        btree_keys: 100_000,
        tpcc_items: 10_000,
        tpcc_customers: 300,
        tatp_subscribers: 20_000,
    };
}

/// The even keys of `0 .. 2n` in a random order (a seeded shuffle).
pub fn preload_keys(n: usize, seed: u64) -> Vec<u64> {
    let mut keys: Vec<u64> = (0..n as u64).map(|i| 2 * i).collect();
    keys.shuffle(&mut StdRng::seed_from_u64(seed ^ 0x005e_ed0f_da7a));
    keys
}

/// `n` distinct keys drawn uniformly from `0 .. space`, in a random order.
pub fn sample_keys(n: usize, space: u64, seed: u64) -> Vec<u64> {
    let mut rng = StdRng::seed_from_u64(seed ^ 0x005a_4e7b_e75e);
    let space = usize::try_from(space).unwrap_or(usize::MAX).max(n);
    let mut keys: Vec<u64> = rand::seq::index::sample(&mut rng, space, n)
        .into_iter()
        .map(|i| i as u64)
        .collect();
    keys.shuffle(&mut rng);
    keys
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn picks_are_uniform_and_in_range() {
        let mut rng = OpRng::seed_from_u64(1);
        let mut count = [0u32; 10];
        for _ in 0..100_000 {
            count[pick(&mut rng, 10) as usize] += 1;
        }
        assert!(
            count.iter().all(|&c| (9_000..11_000).contains(&c)),
            "{count:?}"
        );
        assert_eq!(pick(&mut rng, 0), 0);
        assert!((0..1000).all(|_| pick(&mut rng, 1) == 0));
    }

    #[test]
    fn preload_keys_are_the_even_keys_once() {
        let mut k = preload_keys(100, 1);
        assert_ne!(k, preload_keys(100, 2), "the order depends on the seed");
        k.sort_unstable();
        assert_eq!(k, (0..100).map(|i| 2 * i).collect::<Vec<u64>>());
    }

    #[test]
    fn sampled_keys_are_distinct_and_in_the_space() {
        let mut k = sample_keys(1000, 2000, 3);
        assert_ne!(
            k,
            sample_keys(1000, 2000, 4),
            "the draw depends on the seed"
        );
        k.sort_unstable();
        k.dedup();
        assert_eq!(k.len(), 1000);
        assert!(k.iter().all(|&x| x < 2000));
        assert_eq!(
            sample_keys(5, 3, 1).len(),
            5,
            "a space too small is widened"
        );
    }
}
