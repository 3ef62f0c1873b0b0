//! The kinds of data set: [`DataKind`] names one (with its size where a workload runs
//! it at several), says how much pool it needs, and [`builds`](DataKind::build) it.
//!
//! This module sits on top of the data sets (which know only [`crate::workloads`]);
//! no data set refers to it.

use crate::workloads::anchor::Anchor;
use crate::workloads::oltp::{tatp, tpcc};
use crate::workloads::{btree, bulk, capi, hash, hot, set, strmap, tree_set, ycsb};
use crate::workloads::{DataSet, Sizes};
use pisces::Pool;

/// Which data set a measurement runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DataKind {
    /// [`hash::HashBench`].
    Hash,
    /// [`btree::TreeBench`].
    Tree,
    /// [`set::SetBench`] of this many keys.
    Set(usize),
    /// [`tree_set::TreeSetBench`] of this many keys.
    TreeSet(usize),
    /// [`tpcc::TpccBench`].
    Tpcc,
    /// [`tatp::TatpBench`].
    Tatp,
    /// [`hot::HotBench`].
    Hot,
    /// [`capi::CapiHashBench`]: the hash table driven through the C interface
    /// (`via_c`) or from Rust.
    CapiHash {
        /// The operations go through C.
        via_c: bool,
    },
    /// [`ycsb::YcsbBench`] of this many records.
    Ycsb(usize),
    /// [`strmap::StrMapBench`] of this many records.
    StrMap(usize),
    /// [`bulk::BulkBench`] loading this many keys.
    Bulk(usize),
}

impl DataKind {
    /// Pool bytes to reserve for a run of `threads` workers for `seconds`: generous
    /// for the data sets that stay about their preloaded size; for TPC-C (whose order
    /// tables grow by every new-order) room for [`tpcc::MAX_RATE`] new-orders per
    /// second per worker. Pool files are reserved with `posix_fallocate`, so this is
    /// memory under /dev/shm while the measurement runs.
    pub fn pool_bytes(self, s: &Sizes, threads: usize, seconds: f64) -> u64 {
        let bytes = (128u64 << 20)
            + match self {
                DataKind::Hash | DataKind::CapiHash { .. } => hash::pool_bytes(s),
                DataKind::Tree => btree::pool_bytes(s),
                DataKind::Set(n) => set::pool_bytes(n),
                DataKind::TreeSet(n) => tree_set::pool_bytes(n),
                DataKind::Tpcc => {
                    let orders = (tpcc::MAX_RATE * seconds.max(0.0)) as u64;
                    tpcc::pool_bytes(s, threads, orders) / 4 * 5
                }
                DataKind::Tatp => tatp::pool_bytes(s) / 4 * 5,
                DataKind::Hot => hot::pool_bytes(),
                DataKind::Ycsb(n) => ycsb::pool_bytes(n),
                DataKind::StrMap(n) => strmap::pool_bytes(n),
                DataKind::Bulk(n) => bulk::pool_bytes(n),
            };
        bytes.div_ceil(1 << 20) << 20
    }

    /// True for the data sets that hold nothing of their pool but the pool's bytes and
    /// what [`DataSet::reopened`] gives a reopened pool, so a measurement may build
    /// them, close the pool and measure on it opened again (the hash table, YCSB's
    /// table, the string-keyed map, the bulk load's table).
    pub fn reopens(self) -> bool {
        matches!(
            self,
            DataKind::Hash | DataKind::Ycsb(_) | DataKind::StrMap(_) | DataKind::Bulk(_)
        )
    }

    /// Thread slots of the pool of a measurement with `threads` workers: a handle per
    /// worker and one for the preload; the `capi` data set holds a C handle per worker
    /// besides.
    pub fn thread_slots(self, threads: usize) -> usize {
        match self {
            DataKind::CapiHash { .. } => 2 * threads + 1,
            _ => threads + 1,
        }
    }

    /// Build the data set on `pool` with `sizes` for `threads` workers, preloading in
    /// batches.
    pub fn build(
        self,
        pool: &Pool,
        sizes: &Sizes,
        threads: usize,
        seed: u64,
    ) -> pisces::Result<Box<dyn DataSet>> {
        Ok(match self {
            DataKind::Hash => Box::new(hash::HashBench::build(pool, sizes, seed)?),
            DataKind::Tree => Box::new(btree::TreeBench::build(pool, sizes, seed)?),
            DataKind::Set(n) => Box::new(set::SetBench::build(pool, n, seed)?),
            DataKind::TreeSet(n) => Box::new(tree_set::TreeSetBench::build(pool, n, seed)?),
            DataKind::Tpcc => Box::new(tpcc::TpccBench::build(pool, sizes, threads, seed)?),
            DataKind::Tatp => Box::new(tatp::TatpBench::build(pool, sizes, threads, seed)?),
            DataKind::Hot => Box::new(hot::HotBench::build(pool)?),
            DataKind::CapiHash { via_c } => Box::new(capi::CapiHashBench::build(
                pool, sizes, threads, seed, via_c,
            )?),
            DataKind::Ycsb(n) => Box::new(ycsb::YcsbBench::build(pool, n, seed)?),
            DataKind::StrMap(n) => Box::new(strmap::StrMapBench::build(pool, n, seed)?),
            DataKind::Bulk(n) => Box::new(bulk::BulkBench::build(pool, n, seed)?),
        })
    }

    /// True for the data sets a measurement can run from several processes: those a
    /// process finds again from the pool's root ([`DataSet::anchor`], [`Self::attach`]):
    /// the hash table and the sets.
    pub fn shares(self) -> bool {
        matches!(
            self,
            DataKind::Hash | DataKind::Set(_) | DataKind::TreeSet(_)
        )
    }

    /// The data set published in `pool`'s root by the process that built it
    /// ([`Anchor`]), for a process that opened the pool and has nothing else of it.
    pub fn attach(self, pool: &Pool) -> pisces::Result<Box<dyn DataSet>> {
        let a = Anchor::find(pool)?;
        Ok(match self {
            DataKind::Hash => Box::new(hash::HashBench::attach(pool, &a)?),
            DataKind::Set(_) => Box::new(set::SetBench::attach(pool, &a)?),
            DataKind::TreeSet(_) => Box::new(tree_set::TreeSetBench::attach(pool, &a)?),
            other => {
                return Err(pisces::Error::Corrupt(
                    format!("the {other:?} data set cannot be attached from another process")
                        .into(),
                ))
            }
        })
    }

    /// The data set as a worker process's argument (`hash`, `set:N`, `tree-set:N`), if
    /// it [shares](Self::shares).
    pub fn to_arg(self) -> Option<String> {
        match self {
            DataKind::Hash => Some("hash".into()),
            DataKind::Set(n) => Some(format!("set:{n}")),
            DataKind::TreeSet(n) => Some(format!("tree-set:{n}")),
            _ => None,
        }
    }

    /// The data set of a worker process's argument ([`Self::to_arg`]).
    pub fn from_arg(s: &str) -> Option<DataKind> {
        match s.split_once(':') {
            None if s == "hash" => Some(DataKind::Hash),
            Some(("set", n)) => n.parse().ok().map(DataKind::Set),
            Some(("tree-set", n)) => n.parse().ok().map(DataKind::TreeSet),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engines::Engine;
    use crate::testutil::file_pool;

    /// A data set that shares is found again through the pool's root alone: a second
    /// view built by `attach` sees the same container (the same contents), and the
    /// data sets that do not share have no anchor and no argument.
    #[test]
    fn shared_data_sets_are_found_again_from_the_root() {
        let sizes = Sizes {
            hash_buckets: 64,
            hash_pairs: 300,
            ..Sizes::QUICK
        };
        for kind in [DataKind::Hash, DataKind::Set(200), DataKind::TreeSet(200)] {
            let (pool, dir) = file_pool(Engine::PISCES, 32 << 20, 2);
            let built = kind.build(&pool, &sizes, 1, 3).unwrap();
            let a = built
                .anchor()
                .expect("a data set that shares has an anchor");
            assert!(kind.shares());
            assert_eq!(DataKind::from_arg(&kind.to_arg().unwrap()), Some(kind));
            assert!(
                kind.attach(&pool).is_err(),
                "{kind:?}: nothing published yet"
            );
            a.publish(&pool).unwrap();
            // Another process's view: the pool closed and opened again, nothing of the
            // built data set kept.
            drop(built);
            drop(pool);
            let pool = Pool::open(
                dir.path().join("w.pool"),
                Engine::PISCES.config(32 << 20, 2),
            )
            .unwrap();
            let seen = kind.attach(&pool).unwrap();
            assert_eq!(seen.anchor(), Some(a), "{kind:?}");
            // Another kind's view of it is refused.
            let other = if kind == DataKind::Hash {
                DataKind::Set(200)
            } else {
                DataKind::Hash
            };
            assert!(other.attach(&pool).is_err(), "{kind:?} as {other:?}");
        }
        for kind in [DataKind::Tree, DataKind::Ycsb(10), DataKind::Bulk(10)] {
            assert!(!kind.shares() && kind.to_arg().is_none(), "{kind:?}");
        }
        assert_eq!(DataKind::from_arg("set:x"), None);
        assert_eq!(DataKind::from_arg("btree"), None);
    }
}
