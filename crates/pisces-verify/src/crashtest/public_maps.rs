//! [`KvStore`] for the public containers: [`pisces::HashMap`] and
//! [`pisces::BTreeMap`] with `u64` keys and values, their handle in the root object.
//!
//! The scans verify a structure before trusting it: the hash map with
//! [`HashMap::check`](pisces::HashMap::check), then walked with
//! [`HashMap::for_each`](pisces::HashMap::for_each), stopping at the first repeated key,
//! before its objects are listed; the tree with
//! [`BTreeMap::check`](pisces::BTreeMap::check).

use super::kv::{KvStore, Scan};
use super::workload::Shape;
use pisces::{BTreeMap, HashMap};
use pisces::{Error, PPtr, Pool, Result, Tx};
use std::collections::{BTreeMap as Map, BTreeSet};

/// Groups the hash map starts with: one, so that the workload's inserts split groups
/// (the map is growable; `u64` keys and values make it the grouped layout).
pub const GROUPS: usize = 1;

type Hash = HashMap<u64, u64>;
type Tree = BTreeMap<u64, u64>;

/// The public [`pisces::HashMap`] (see the [module docs](self)).
#[derive(Clone, Copy, Debug, Default)]
pub struct PublicHashMap;

/// The public [`pisces::BTreeMap`] (see the [module docs](self)).
#[derive(Clone, Copy, Debug, Default)]
pub struct PublicBTree;

/// Collect `for_each`'s pairs, failing on a repeated key (stopping the walk there).
/// The structure's objects, `root` included, from `walk`; an object listed twice (a
/// shared node or a cycle) is an error.
fn distinct_objects(
    root: u64,
    walk: impl FnOnce(&mut dyn FnMut(u64)) -> Result<()>,
) -> Result<BTreeSet<u64>> {
    let mut objects = BTreeSet::from([root]);
    let mut twice = None;
    walk(&mut |o| {
        if !objects.insert(o) {
            twice = Some(o);
        }
    })?;
    match twice {
        Some(o) => Err(Error::abort(format!("object {o:#x} reached twice"))),
        None => Ok(objects),
    }
}

fn collect(
    walk: impl FnOnce(&mut dyn FnMut(&u64, &u64) -> bool) -> Result<()>,
) -> Result<Map<u64, u64>> {
    let mut pairs = Map::new();
    let mut repeated = None;
    walk(&mut |&k, &v| {
        if pairs.insert(k, v).is_some() {
            repeated = Some(k);
            return false;
        }
        true
    })?;
    match repeated {
        Some(k) => Err(Error::abort(format!(
            "key {k} listed twice (a duplicate or a cycle)"
        ))),
        None => Ok(pairs),
    }
}

impl KvStore for PublicHashMap {
    fn create(&self, pool: &Pool) -> Result<()> {
        let root: PPtr<Hash> = pool.root()?;
        pool.run(|tx| {
            let m = Hash::with_buckets(tx, GROUPS)?;
            *tx.write(root)? = m;
            Ok(())
        })
    }

    fn root(&self, pool: &Pool) -> Result<u64> {
        Ok(pool.root::<Hash>()?.offset())
    }

    fn upsert(&self, tx: &mut Tx<'_>, root: u64, key: u64, value: u64) -> Result<()> {
        let m = *tx.read(PPtr::<Hash>::from_offset(root))?;
        m.insert(tx, key, value).map(|_| ())
    }

    fn remove(&self, tx: &mut Tx<'_>, root: u64, key: u64) -> Result<bool> {
        let m = *tx.read(PPtr::<Hash>::from_offset(root))?;
        Ok(m.remove(tx, &key)?.is_some())
    }

    /// A split writes the map's 4 KiB header, which the engines that log whole objects
    /// record whole, and spht lets one record use a third of a log: twice the default
    /// log. The pool has room for the map's element count beside the tree's.
    fn shape(&self) -> Shape {
        let d = Shape::default();
        Shape {
            pool_size: d.pool_size + (256 << 10),
            log_bytes: 2 * d.log_bytes,
        }
    }

    fn scan(&self, pool: &Pool) -> std::result::Result<Scan, String> {
        let root: PPtr<Hash> = pool.root().map_err(|e| format!("root: {e}"))?;
        pool.run(|tx| {
            let m = *tx.read(root)?;
            m.check(tx)?;
            let pairs = collect(|f| m.for_each(tx, f))?;
            let objects = distinct_objects(root.offset(), |f| m.for_each_object(tx, f))?;
            Ok(Scan {
                pairs,
                objects: Some(objects),
            })
        })
        .map_err(|e| format!("scanning the hash map: {e}"))
    }
}

impl KvStore for PublicBTree {
    fn create(&self, pool: &Pool) -> Result<()> {
        let root: PPtr<Tree> = pool.root()?;
        pool.run(|tx| {
            let t = Tree::new(tx)?;
            *tx.write(root)? = t;
            Ok(())
        })
    }

    fn root(&self, pool: &Pool) -> Result<u64> {
        Ok(pool.root::<Tree>()?.offset())
    }

    fn upsert(&self, tx: &mut Tx<'_>, root: u64, key: u64, value: u64) -> Result<()> {
        let t = *tx.read(PPtr::<Tree>::from_offset(root))?;
        t.insert(tx, key, value).map(|_| ())
    }

    fn remove(&self, tx: &mut Tx<'_>, root: u64, key: u64) -> Result<bool> {
        let t = *tx.read(PPtr::<Tree>::from_offset(root))?;
        Ok(t.remove(tx, &key)?.is_some())
    }

    fn scan(&self, pool: &Pool) -> std::result::Result<Scan, String> {
        let root: PPtr<Tree> = pool.root().map_err(|e| format!("root: {e}"))?;
        pool.run(|tx| {
            let t = *tx.read(root)?;
            t.check(tx)?;
            let pairs = collect(|f| t.for_each(tx, f))?;
            let objects = distinct_objects(root.offset(), |f| t.for_each_object(tx, f))?;
            Ok(Scan {
                pairs,
                objects: Some(objects),
            })
        })
        .map_err(|e| format!("scanning the B+-tree: {e}"))
    }
}
