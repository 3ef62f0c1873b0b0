//! The data sets the benchmark runs on and the one-operation transactions on them.
//!
//! A [`DataSet`] is built (preloaded) once per measurement on a fresh pool and then
//! shared by the worker threads; each worker calls [`DataSet::op`] in a loop, one
//! transaction per call, asking for a read-only lookup or an update as its seeded RNG
//! decides. `op` returns the bytes the *program* changed (the denominator of write
//! amplification), 0 for a lookup.
//!
//! Both data sets use the key space `0 .. 2N` and preload the `N` even keys in a
//! seeded random order, so that lookups and updates pick uniformly random keys of the
//! whole space (about half of the lookups hit) and the size stays about `N`:
//!
//! * [`HashBench`] (the paper's hash table, §5.2): `HashMap<u64, [u8; 64]>`, 8-byte
//!   keys, 64-byte values, chained buckets. An update is the paper's insert/remove:
//!   it removes the key if present and inserts it (with a 64-byte value) if absent, so
//!   the map's size is a random walk pulled back to `N`. Changed bytes: 72 for an
//!   insert (key and value), 8 for a remove (the key).
//! * [`TreeBench`] (the paper's B+-tree): `BTreeMap<u64, u64, 16>`, 256-byte nodes. An
//!   update is the paper's insert, which overwrites the value when the key exists:
//!   changed bytes 8 for an overwrite, 16 for a new key. The tree grows during a run
//!   (by at most `N` keys), as in the paper.
//!
//! * [`TpccBench`](super::tpcc::TpccBench): TPC-C new-order on fanout-32 B+-tree
//!   tables, one warehouse per worker thread (the `worker` argument of
//!   [`DataSet::op`] picks it); every operation is a new-order.
//! * [`TatpBench`](super::tatp::TatpBench): TATP on fanout-32 B+-tree tables; `update`
//!   picks one of its read-write transactions, else one of its read-only ones.

use pisces::{BTreeMap, HashMap, Pool, ThreadHandle};
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use std::hint::black_box;

/// Keys inserted per transaction while preloading.
const PRELOAD_BATCH: usize = 64;

/// Hash table: 8-byte keys, 64-byte values (the paper's §5.2 parameters).
pub type HashTable = HashMap<u64, [u8; 64]>;
/// B+-tree: 8-byte keys and values, fanout 16, so nodes are 256 bytes (§5.2).
pub type Tree = BTreeMap<u64, u64, 16>;

/// Data-set sizes.
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

/// Which data structure a workload runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DataKind {
    /// [`HashBench`].
    Hash,
    /// [`TreeBench`].
    Tree,
    /// [`TpccBench`](super::tpcc::TpccBench).
    Tpcc,
    /// [`TatpBench`](super::tatp::TatpBench).
    Tatp,
}

impl DataKind {
    /// Pool bytes to reserve for a run of `threads` workers for `seconds`: generous
    /// for the data sets that stay about their preloaded size; for TPC-C (whose order
    /// tables grow by every new-order) room for [`TPCC_MAX_RATE`] new-orders per
    /// second per worker. Pool files are reserved with `posix_fallocate`, so this is
    /// memory under /dev/shm while the measurement runs.
    pub fn pool_bytes(self, s: &Sizes, threads: usize, seconds: f64) -> u64 {
        let bytes = (128u64 << 20)
            + match self {
                DataKind::Hash => 512 * 2 * s.hash_pairs as u64,
                DataKind::Tree => 256 * 2 * s.btree_keys as u64,
                DataKind::Tpcc => {
                    let orders = (TPCC_MAX_RATE * seconds.max(0.0)) as u64;
                    super::tpcc::pool_bytes(s, threads, orders) / 4 * 5
                }
                DataKind::Tatp => super::tatp::pool_bytes(s) / 4 * 5,
            };
        bytes.div_ceil(1 << 20) << 20
    }
}

/// New-orders per second and worker the TPC-C pool has room for (one core of this
/// machine reaches 30 000 to 60 000 with the volatile engine; each new-order costs
/// about 1.5 KB of pool, so a 10-second measurement reserves about 1.5 GB per worker).
pub const TPCC_MAX_RATE: f64 = 80_000.0;

/// A preloaded data set shared by the workers of one measurement.
pub trait DataSet: Send + Sync {
    /// Run one transaction on `h` for worker thread `worker` (`0..threads`): a lookup,
    /// or an update if `update`. Returns the bytes the program changed (0 for a
    /// lookup).
    fn op(
        &self,
        worker: usize,
        h: &mut ThreadHandle,
        rng: &mut StdRng,
        update: bool,
    ) -> pisces::Result<u64>;
}

/// The hash-table data set (see the module docs).
pub struct HashBench {
    map: HashTable,
    key_space: u64,
}

/// The B+-tree data set (see the module docs).
pub struct TreeBench {
    tree: Tree,
    key_space: u64,
}

/// The 64-byte value stored for key `k`.
fn value_of(k: u64) -> [u8; 64] {
    let mut v = [0u8; 64];
    for (i, c) in v.chunks_exact_mut(8).enumerate() {
        c.copy_from_slice(&(k ^ i as u64).to_le_bytes());
    }
    v
}

/// The even keys of `0 .. 2n` in a random order.
fn preload_keys(n: usize, seed: u64) -> Vec<u64> {
    let mut keys: Vec<u64> = (0..n as u64).map(|i| 2 * i).collect();
    keys.shuffle(&mut StdRng::seed_from_u64(seed ^ 0x005e_ed0f_da7a));
    keys
}

/// Build `kind` on `pool` with `sizes` for `threads` workers, preloading in batches.
pub fn build(
    pool: &Pool,
    kind: DataKind,
    sizes: &Sizes,
    threads: usize,
    seed: u64,
) -> pisces::Result<Box<dyn DataSet>> {
    Ok(match kind {
        DataKind::Hash => Box::new(HashBench::build(pool, sizes, seed)?),
        DataKind::Tree => Box::new(TreeBench::build(pool, sizes, seed)?),
        DataKind::Tpcc => Box::new(super::tpcc::TpccBench::build(pool, sizes, threads, seed)?),
        DataKind::Tatp => Box::new(super::tatp::TatpBench::build(pool, sizes, threads, seed)?),
    })
}

impl HashBench {
    fn build(pool: &Pool, sizes: &Sizes, seed: u64) -> pisces::Result<Self> {
        let mut h = pool.handle()?;
        let keys = preload_keys(sizes.hash_pairs, seed);
        let buckets = sizes.hash_buckets;
        let map = h.run(|tx| HashTable::create(tx, buckets))?;
        for batch in keys.chunks(PRELOAD_BATCH) {
            h.run(|tx| {
                for &k in batch {
                    map.insert(tx, k, value_of(k))?;
                }
                Ok(())
            })?;
        }
        // `h` is dropped here: its pending group-commit write-backs are done before
        // the workers start.
        Ok(HashBench {
            map,
            key_space: 2 * keys.len().max(1) as u64,
        })
    }
}

impl TreeBench {
    fn build(pool: &Pool, sizes: &Sizes, seed: u64) -> pisces::Result<Self> {
        let mut h = pool.handle()?;
        let keys = preload_keys(sizes.btree_keys, seed);
        let tree = h.run(Tree::create)?;
        for batch in keys.chunks(PRELOAD_BATCH) {
            h.run(|tx| {
                for &k in batch {
                    tree.insert(tx, k, !k)?;
                }
                Ok(())
            })?;
        }
        Ok(TreeBench {
            tree,
            key_space: 2 * keys.len().max(1) as u64,
        })
    }
}

impl DataSet for HashBench {
    fn op(
        &self,
        _worker: usize,
        h: &mut ThreadHandle,
        rng: &mut StdRng,
        update: bool,
    ) -> pisces::Result<u64> {
        let k = rng.gen_range(0..self.key_space);
        let m = self.map;
        if update {
            h.run(|tx| {
                if m.remove(tx, &k)?.is_some() {
                    Ok(8)
                } else {
                    m.insert(tx, k, value_of(k))?;
                    Ok(72)
                }
            })
        } else {
            let seen = h.run(|tx| Ok(m.get_ref(tx, &k)?.map_or(0, |v| v[63])))?;
            black_box(seen);
            Ok(0)
        }
    }
}

impl DataSet for TreeBench {
    fn op(
        &self,
        _worker: usize,
        h: &mut ThreadHandle,
        rng: &mut StdRng,
        update: bool,
    ) -> pisces::Result<u64> {
        let k = rng.gen_range(0..self.key_space);
        let t = self.tree;
        if update {
            let v: u64 = rng.gen();
            h.run(|tx| Ok(if t.insert(tx, k, v)?.is_some() { 8 } else { 16 }))
        } else {
            let seen = h.run(|tx| Ok(t.get_ref(tx, &k)?.copied()))?;
            black_box(seen);
            Ok(0)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pisces::{Config, EngineId};

    /// A pool file created as the bench creates them (every engine can, including
    /// those that keep their own pool file), in a directory removed with the guard.
    fn pool(engine: EngineId) -> (Pool, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let p = Pool::create(
            dir.path().join("w.pool"),
            Config {
                size: 32 << 20,
                engine,
                max_threads: 2,
                ..Config::default()
            },
        )
        .unwrap_or_else(|e| panic!("{engine:?}: {e}"));
        (p, dir)
    }

    const SMALL: Sizes = Sizes {
        hash_buckets: 64,
        hash_pairs: 500,
        btree_keys: 700,
        ..Sizes::QUICK
    };

    #[test]
    fn preload_keys_are_the_even_keys_once() {
        let mut k = preload_keys(100, 1);
        assert_ne!(k, preload_keys(100, 2), "the order depends on the seed");
        k.sort_unstable();
        assert_eq!(k, (0..100).map(|i| 2 * i).collect::<Vec<u64>>());
    }

    #[test]
    fn hash_updates_insert_or_remove_and_report_changed_bytes() {
        for engine in EngineId::ALL {
            let (p, _dir) = pool(engine);
            let hb = HashBench::build(&p, &SMALL, 7).unwrap();
            let count = |p: &Pool| p.run(|tx| hb.map.len(tx)).unwrap() as i64;
            assert_eq!(count(&p), 500);
            assert_eq!(hb.key_space, 1000);
            let mut h = p.handle().unwrap();
            let mut rng = StdRng::seed_from_u64(3);
            let (mut ins, mut rem) = (0i64, 0i64);
            for _ in 0..400 {
                match hb.op(0, &mut h, &mut rng, true).unwrap() {
                    72 => ins += 1,
                    8 => rem += 1,
                    other => panic!("{engine:?}: changed {other} bytes"),
                }
                assert_eq!(hb.op(0, &mut h, &mut rng, false).unwrap(), 0);
            }
            drop(h);
            assert!(ins > 50 && rem > 50, "{engine:?}: {ins} {rem}");
            assert_eq!(count(&p), 500 + ins - rem, "{engine:?}");
            // Every key present is in the key space and has its value.
            p.run(|tx| {
                hb.map.for_each(tx, |k, v| {
                    assert!(*k < 1000);
                    assert_eq!(*v, value_of(*k));
                    true
                })
            })
            .unwrap();
        }
    }

    #[test]
    fn tree_updates_overwrite_or_insert() {
        for engine in EngineId::ALL {
            let (p, _dir) = pool(engine);
            let tb = TreeBench::build(&p, &SMALL, 9).unwrap();
            let count = |p: &Pool| p.run(|tx| tb.tree.len(tx)).unwrap();
            assert_eq!(count(&p), 700);
            let mut h = p.handle().unwrap();
            let mut rng = StdRng::seed_from_u64(4);
            let mut seen = [0usize; 2];
            for _ in 0..300 {
                match tb.op(0, &mut h, &mut rng, true).unwrap() {
                    8 => seen[0] += 1,
                    16 => seen[1] += 1,
                    other => panic!("changed {other} bytes"),
                }
                assert_eq!(tb.op(0, &mut h, &mut rng, false).unwrap(), 0);
            }
            drop(h);
            assert!(seen[0] > 50 && seen[1] > 50, "{engine:?}: {seen:?}");
            assert_eq!(count(&p), 700 + seen[1], "{engine:?}");
        }
    }
}
