//! [`BucketMap`]: a small engine-test hash map (the `bucket-map` workload), the same
//! operations as the `hashmap` workload without the container code.
//!
//! A root object with [`BUCKETS`] chain heads; each node holds a key, a value, a check
//! word (`key ^ value ^ CHECK`, so that a torn node shows) and the next node. Upsert
//! updates a node in place or pushes a new node at the head of its chain; remove
//! unlinks the node and frees it.

use super::kv::{KvStore, Scan};
use pisces::{Error, PPtr, Pod, Pool, Result, Tx, Zeroable};
use std::collections::{BTreeMap, BTreeSet};

/// Number of buckets.
pub const BUCKETS: usize = 16;
const CHECK: u64 = 0xC4EC_4ED0_0D1E_5EED;

/// A chained node.
#[derive(Clone, Copy, Pod, Zeroable)]
#[repr(C)]
struct KvNode {
    key: u64,
    value: u64,
    check: u64,
    next: PPtr<KvNode>,
}

type Buckets = [PPtr<KvNode>; BUCKETS];

/// The bucket hash map (see the [module docs](self)).
#[derive(Clone, Copy, Debug, Default)]
pub struct BucketMap;

fn bucket(key: u64) -> usize {
    (super::rng::splitmix(key) % BUCKETS as u64) as usize
}

impl KvStore for BucketMap {
    fn create(&self, pool: &Pool) -> Result<()> {
        pool.root::<Buckets>().map(|_| ())
    }

    fn root(&self, pool: &Pool) -> Result<u64> {
        Ok(pool.root::<Buckets>()?.offset())
    }

    fn upsert(&self, tx: &mut Tx<'_>, root: u64, key: u64, value: u64) -> Result<()> {
        let root: PPtr<Buckets> = PPtr::from_offset(root);
        let b = bucket(key);
        let head = tx.read(root)?[b];
        let mut cur = head;
        while !cur.is_null() {
            let n = *tx.read(cur)?;
            if n.key == key {
                let w = tx.write(cur)?;
                w.value = value;
                w.check = key ^ value ^ CHECK;
                return Ok(());
            }
            cur = n.next;
        }
        let node = tx.alloc(KvNode {
            key,
            value,
            check: key ^ value ^ CHECK,
            next: head,
        })?;
        tx.write(root)?[b] = node;
        Ok(())
    }

    fn remove(&self, tx: &mut Tx<'_>, root: u64, key: u64) -> Result<bool> {
        let root: PPtr<Buckets> = PPtr::from_offset(root);
        let b = bucket(key);
        let mut prev: Option<PPtr<KvNode>> = None;
        let mut cur = tx.read(root)?[b];
        while !cur.is_null() {
            let n = *tx.read(cur)?;
            if n.key == key {
                match prev {
                    None => tx.write(root)?[b] = n.next,
                    Some(p) => tx.write(p)?.next = n.next,
                }
                tx.free(cur)?;
                return Ok(true);
            }
            prev = Some(cur);
            cur = n.next;
        }
        Ok(false)
    }

    fn scan(&self, pool: &Pool) -> std::result::Result<Scan, String> {
        let root: PPtr<Buckets> = pool.root().map_err(|e| format!("root: {e}"))?;
        pool.run(|tx| {
            let heads = *tx.read(root)?;
            let mut objects = BTreeSet::from([root.offset()]);
            let mut pairs = BTreeMap::new();
            for (b, head) in heads.into_iter().enumerate() {
                let mut cur = head;
                while !cur.is_null() {
                    if !objects.insert(cur.offset()) {
                        return Err(Error::abort(format!(
                            "bucket {b}: node {:#x} reached twice",
                            cur.offset()
                        )));
                    }
                    let n = *tx.read(cur)?;
                    if n.check != n.key ^ n.value ^ CHECK {
                        return Err(Error::abort(format!(
                            "bucket {b}: torn node {:#x}",
                            cur.offset()
                        )));
                    }
                    if bucket(n.key) != b {
                        return Err(Error::abort(format!(
                            "key {} in bucket {b}, not {}",
                            n.key,
                            bucket(n.key)
                        )));
                    }
                    if pairs.insert(n.key, n.value).is_some() {
                        return Err(Error::abort(format!("key {} present twice", n.key)));
                    }
                    cur = n.next;
                }
            }
            Ok(Scan {
                pairs,
                objects: Some(objects),
            })
        })
        .map_err(|e| format!("scanning the hash map: {e}"))
    }
}
