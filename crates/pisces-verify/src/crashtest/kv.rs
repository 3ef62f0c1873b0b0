//! Key-value workloads (`hashmap`, `btree`) over any structure implementing [`KvStore`].
//!
//! [`KvWorkload`] drives a map with upserts and removes and judges it; the map itself
//! is behind the [`KvStore`] trait, a few lines per structure: the public containers
//! ([`public_maps`](super::public_maps), the `hashmap` and `btree` workloads) and two
//! engine-test structures ([`BucketMap`](super::bucket_map::BucketMap), a fixed array
//! of buckets with chained nodes, and [`SortedTree`](super::sorted_tree::SortedTree), a
//! two-level tree of sorted arrays; the `bucket-map` and `sorted-tree` workloads).
//!
//! Operation `i` of thread `t` upserts or (one time in four) removes a key of thread
//! `t`'s own key space (keys `8k + t + 1`, 24 per thread), so threads never touch each
//! other's keys and the expected map is the union of per-thread models. The oracle
//! asks the store for all pairs and its objects ([`KvStore::scan`], which also checks
//! the structure's shape), compares each thread's keys with its model after exactly
//! its acknowledged operations, or that plus some of those in doubt ([`Bounds`]), and,
//! when the store can list its objects, checks the allocator against them.

use super::oracle::allocated_equals_reachable;
use super::rng::mix;
use super::workload::{match_threads, Bounds, Shape, Workload, MAX_THREADS};
use pisces::{Pool, Result, ThreadHandle, Tx, TxOptions};
use std::collections::{BTreeMap, BTreeSet};

/// Keys per thread.
pub const KEYS_PER_THREAD: u64 = 24;

/// What [`KvStore::scan`] found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Scan {
    /// Every key-value pair.
    pub pairs: BTreeMap<u64, u64>,
    /// Payload offsets of every object of the structure, its root included, if the
    /// store can list them (then the allocator is checked against them).
    pub objects: Option<BTreeSet<u64>>,
}

/// A persistent map from `u64` to `u64` that a [`KvWorkload`] can drive.
///
/// Keys and values are never 0. Implementations must detect a malformed structure in
/// `scan` (returning `Err`), never loop forever or panic on one.
pub trait KvStore: Send + Sync {
    /// Create the empty structure (its root object is `pool.root()`).
    fn create(&self, pool: &Pool) -> Result<()>;
    /// The payload offset of the root object.
    fn root(&self, pool: &Pool) -> Result<u64>;
    /// Insert `key`, or replace its value.
    fn upsert(&self, tx: &mut Tx<'_>, root: u64, key: u64, value: u64) -> Result<()>;
    /// Remove `key`; false if it was absent.
    fn remove(&self, tx: &mut Tx<'_>, root: u64, key: u64) -> Result<bool>;
    /// Read everything in one transaction, checking the shape.
    fn scan(&self, pool: &Pool) -> std::result::Result<Scan, String>;
    /// The pool geometry the store's transactions need.
    fn shape(&self) -> Shape {
        Shape::default()
    }
}

/// A workload of upserts and removes on a [`KvStore`] (see the [module docs](self)).
pub struct KvWorkload<S> {
    name: &'static str,
    describe: &'static str,
    store: S,
}

impl<S: KvStore> KvWorkload<S> {
    /// A workload called `name` over `store`.
    pub fn new(name: &'static str, describe: &'static str, store: S) -> Self {
        KvWorkload {
            name,
            describe,
            store,
        }
    }
}

/// Operation `i` of thread `t`: `(key, Some(value))` upserts, `(key, None)` removes.
pub fn kv_op(t: usize, i: usize) -> (u64, Option<u64>) {
    let x = mix(t as u64 + 0x4B56, i as u64);
    let key = (x % KEYS_PER_THREAD) * MAX_THREADS as u64 + t as u64 + 1;
    if (x >> 32).is_multiple_of(4) {
        (key, None)
    } else {
        (key, Some((x >> 8) | 1))
    }
}

/// Thread `t`'s keys after its first `c` operations.
pub fn kv_after(t: usize, c: usize) -> BTreeMap<u64, u64> {
    let mut m = BTreeMap::new();
    for i in 0..c {
        match kv_op(t, i) {
            (k, Some(v)) => {
                m.insert(k, v);
            }
            (k, None) => {
                m.remove(&k);
            }
        }
    }
    m
}

/// The thread whose key space holds `key`.
fn owner(key: u64) -> usize {
    (key.wrapping_sub(1) % MAX_THREADS as u64) as usize
}

impl<S: KvStore> Workload for KvWorkload<S> {
    fn name(&self) -> &'static str {
        self.name
    }

    fn describe(&self) -> &'static str {
        self.describe
    }

    fn setup(&self, pool: &Pool) -> Result<()> {
        self.store.create(pool)
    }

    fn shape(&self, _threads: usize, _ops: usize) -> Shape {
        self.store.shape()
    }

    fn root(&self, pool: &Pool) -> Result<u64> {
        self.store.root(pool)
    }

    fn op(
        &self,
        h: &mut ThreadHandle,
        root: u64,
        t: usize,
        i: usize,
        opts: TxOptions,
    ) -> Result<()> {
        let (key, value) = kv_op(t, i);
        h.run_with(opts, |tx| match value {
            Some(v) => self.store.upsert(tx, root, key, v),
            None => self.store.remove(tx, root, key).map(|_| ()),
        })
    }

    fn check(&self, pool: &Pool, bounds: &[Bounds]) -> std::result::Result<Vec<usize>, String> {
        let scan = self.store.scan(pool)?;
        let mut per_thread = vec![BTreeMap::new(); MAX_THREADS];
        for (&k, &v) in &scan.pairs {
            if k == 0 {
                return Err(format!("key 0 present (value {v:#x})"));
            }
            per_thread[owner(k)].insert(k, v);
        }
        if let Some(t) = (bounds.len()..MAX_THREADS).find(|&t| !per_thread[t].is_empty()) {
            return Err(format!("keys of thread {t}, which never ran, are present"));
        }
        let counts = match_threads(bounds, |t, c| {
            let want = kv_after(t, c);
            if per_thread[t] == want {
                Ok(())
            } else {
                Err(format!("keys {:?} are not {want:?}", per_thread[t]))
            }
        })?;
        if let Some(objects) = &scan.objects {
            allocated_equals_reachable(pool, objects)?;
        }
        Ok(counts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_belong_to_their_thread_and_ops_mix_upserts_and_removes() {
        let mut removes = 0;
        for t in 0..MAX_THREADS {
            for i in 0..200 {
                let (k, v) = kv_op(t, i);
                assert_eq!(owner(k), t);
                assert!(k != 0 && v != Some(0));
                removes += usize::from(v.is_none());
            }
        }
        assert!(removes > 200 && removes < 600, "{removes}");
        assert!(!kv_after(1, 100).is_empty());
    }
}
