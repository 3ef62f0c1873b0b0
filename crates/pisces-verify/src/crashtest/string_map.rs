//! [`KvStore`] for variable-size data: a [`pisces::BTreeMap`] keyed by [`PString`] with
//! [`PBytes`] values (the `strmap` workload).
//!
//! Key `k` is stored as the string `"key/{k}"` (keys of several lengths; their string
//! order is not their numeric order) and value `v` as `v`'s 8 bytes repeated
//! `1 + v % 5` times (8 to 40 bytes, so a replaced value usually moves to a block of
//! another size). Upserts free the value they replace and removes free the key and the
//! value, so the allocator oracle sees every block the tree owns: nodes, keys, the
//! separators copied into inner nodes, values. The scan checks the tree
//! ([`BTreeMap::check`](pisces::BTreeMap::check), which reads every key through its
//! length word) and decodes every key and value, so a torn or lost string is a
//! violation.

use super::kv::{KvStore, Scan};
use super::workload::Shape;
use pisces::{BTreeMap, Error, PBytes, PPtr, PString, Pool, Result, Tx};
use std::collections::{BTreeMap as Map, BTreeSet};

/// A small fanout: the workload's few keys per thread split leaves and inner nodes.
type Tree = BTreeMap<PString, PBytes, 4>;

/// The string-keyed tree with byte string values (see the [module docs](self)).
#[derive(Clone, Copy, Debug, Default)]
pub struct StringMap;

/// The stored form of key `k`.
pub fn key_string(k: u64) -> String {
    format!("key/{k}")
}

/// The stored form of value `v`.
pub fn value_bytes(v: u64) -> Vec<u8> {
    v.to_le_bytes().repeat(1 + (v % 5) as usize)
}

fn decode_key(s: &str) -> Option<u64> {
    let k: u64 = s.strip_prefix("key/")?.parse().ok()?;
    (key_string(k) == s).then_some(k)
}

fn decode_value(b: &[u8]) -> Option<u64> {
    let v = u64::from_le_bytes(b.get(..8)?.try_into().ok()?);
    (value_bytes(v) == b).then_some(v)
}

impl KvStore for StringMap {
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
        let v = PBytes::new(tx, &value_bytes(value))?;
        if let Some(old) = t.insert_str(tx, &key_string(key), v)? {
            old.free(tx)?;
        }
        Ok(())
    }

    fn remove(&self, tx: &mut Tx<'_>, root: u64, key: u64) -> Result<bool> {
        let t = *tx.read(PPtr::<Tree>::from_offset(root))?;
        t.remove_and_free(tx, &key_string(key))
    }

    /// Keys, values of five sizes, nodes and the header are blocks of about eight size
    /// classes, each in slabs of its own (per thread slot on some engines): twice the
    /// default pool.
    fn shape(&self) -> Shape {
        let d = Shape::default();
        Shape {
            pool_size: 2 * d.pool_size,
            ..d
        }
    }

    fn scan(&self, pool: &Pool) -> std::result::Result<Scan, String> {
        let root: PPtr<Tree> = pool.root().map_err(|e| format!("root: {e}"))?;
        pool.run(|tx| {
            let t = *tx.read(root)?;
            t.check(tx)?;
            let mut pairs = Map::new();
            for e in t.iter(tx) {
                let (k, v) = e?;
                let ks = k.get(tx)?;
                let key = decode_key(ks).ok_or_else(|| Error::abort(format!("key {ks:?}")))?;
                let vb = v.get(tx)?;
                let value = decode_value(vb)
                    .ok_or_else(|| Error::abort(format!("the value of {ks:?}: {vb:?}")))?;
                if pairs.insert(key, value).is_some() {
                    return Err(Error::abort(format!("key {ks:?} twice")));
                }
            }
            let mut objects = BTreeSet::from([root.offset()]);
            let mut twice = None;
            t.for_each_object_with_values(tx, |o| {
                if !objects.insert(o) {
                    twice = Some(o);
                }
            })?;
            if let Some(o) = twice {
                return Err(Error::abort(format!("object {o:#x} reached twice")));
            }
            Ok(Scan {
                pairs,
                objects: Some(objects),
            })
        })
        .map_err(|e| format!("scanning the string-keyed tree: {e}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_values_decode_only_from_their_encoding() {
        for x in [1, 7, 24 * 16, u64::MAX] {
            assert_eq!(decode_key(&key_string(x)), Some(x));
            assert_eq!(decode_value(&value_bytes(x)), Some(x));
        }
        assert_eq!(decode_key("key/01"), None);
        assert_eq!(decode_key("key/"), None);
        let mut torn = value_bytes(9);
        torn[9] ^= 1;
        assert_eq!(decode_value(&torn), None);
        assert_eq!(decode_value(&value_bytes(9)[..8]), None);
    }

    /// The campaigns of this workload (20 operations on 2 threads) remove keys that
    /// are there, so freeing keys and values at removal is exercised, not only
    /// inserting them.
    #[test]
    fn twenty_operations_of_thread_1_remove_present_keys() {
        use crate::crashtest::kv::{kv_after, kv_op};
        let removals = (0..20)
            .filter(|&i| {
                let (k, v) = kv_op(1, i);
                v.is_none() && kv_after(1, i).contains_key(&k)
            })
            .count();
        assert!(removals >= 2, "{removals}");
    }
}
