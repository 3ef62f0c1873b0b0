//! Maps whose values own pool objects ([`Owned`] values: [`PBytes`], [`PString`],
//! [`PVec`](crate::PVec), your own types), and inserting by `&str` / `&[u8]` into a tree
//! keyed by byte strings.
//!
//! # Who frees a value
//! A map stores any `Pod` value and cannot tell a value that owns blocks from one that
//! does not, so its plain operations keep their meaning: [`insert`](HashMap::insert)
//! and [`remove`](HashMap::remove) hand the value they take out back to the caller,
//! who owns it from then on (it may be moved elsewhere, so the map must not free it),
//! and `destroy` frees the map's own objects only. The methods here are for maps whose
//! values are [`Owned`]: they free what the value they drop owns, at commit, with the
//! entry's removal, replacement, or the whole map. A value dropped by a plain method
//! and neither stored again nor freed is a leak (the pool keeps the block).
//!
//! Keys of a [`BTreeMap`] keyed by [`PBytes`] or [`PString`] are always owned by the
//! tree (it copies them for its separators and frees them with their entries): see
//! [`TreeKey`].

use super::bytes::{Owned, PBytes, PString};
use super::key::TreeKey;
use super::{BTreeMap, HashMap};
use crate::{Pod, Result, Tx, TxAccess};

/// A replaced value that owns objects is freed unless it is the new value itself
/// (inserting the handle that is stored already must not free what it points to).
fn free_replaced<V: Owned>(tx: &mut Tx<'_>, old: Option<V>, new: &V) -> Result<bool> {
    match old {
        Some(old) => {
            if bytemuck::bytes_of(&old) != bytemuck::bytes_of(new) {
                old.free_owned(tx)?;
            }
            Ok(true)
        }
        None => Ok(false),
    }
}

impl<K: Pod + Eq, V: Owned> HashMap<K, V> {
    /// Insert or replace, freeing what the replaced value owns (see [`Owned`], *Who
    /// frees a value*); returns whether a value was replaced.
    ///
    /// ```
    /// use pisces::{Config, HashMap, PString, Pool};
    /// # fn main() -> pisces::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// let pool = Pool::create(dir.path().join("h.pool"), Config::new().size(32 << 20))?;
    /// pool.run(|tx| {
    ///     let m = HashMap::<u64, PString>::new(tx)?;
    ///     let v = PString::new(tx, "first")?;
    ///     m.insert_and_free(tx, 1, v)?;
    ///     let v = PString::new(tx, "second")?;
    ///     assert!(m.insert_and_free(tx, 1, v)?); // "first" is freed at commit
    ///     assert_eq!(m.get(tx, &1)?.unwrap().get(tx)?, "second");
    ///     assert!(m.remove_and_free(tx, &1)?); // and "second" too
    ///     m.destroy_with_values(tx)
    /// })?;
    /// # Ok(()) }
    /// ```
    pub fn insert_and_free<'h>(&self, tx: &mut impl TxAccess<'h>, k: K, v: V) -> Result<bool> {
        let tx = tx.tx_mut();
        let old = self.insert(tx, k, v)?;
        free_replaced(tx, old, &v)
    }

    /// Remove `k` and free what its value owns; returns whether it was there.
    pub fn remove_and_free<'h>(&self, tx: &mut impl TxAccess<'h>, k: &K) -> Result<bool> {
        let tx = tx.tx_mut();
        match self.remove(tx, k)? {
            Some(v) => v.free_owned(tx).map(|()| true),
            None => Ok(false),
        }
    }

    /// [`for_each_object`](Self::for_each_object) and every object the values own.
    pub fn for_each_object_with_values(&self, tx: &Tx<'_>, mut f: impl FnMut(u64)) -> Result<()> {
        self.for_each_object(tx, &mut f)?;
        let mut err = Ok(());
        self.for_each(tx, |_, v| {
            err = v.for_each_owned(tx, &mut f);
            err.is_ok()
        })?;
        err
    }

    /// Free the map and what every value owns. The handle and its copies must not be
    /// used afterwards.
    pub fn destroy_with_values<'h>(self, tx: &mut impl TxAccess<'h>) -> Result<()> {
        let tx = tx.tx_mut();
        let mut vals = Vec::new();
        self.for_each(tx, |_, v| {
            vals.push(*v);
            true
        })?;
        for v in vals {
            v.free_owned(tx)?;
        }
        self.destroy(tx)
    }
}

impl<K: TreeKey, V: Owned, const F: usize> BTreeMap<K, V, F> {
    /// Insert or replace, freeing what the replaced value owns (see [`Owned`], *Who
    /// frees a value*); returns whether a value was replaced.
    pub fn insert_and_free<'h>(&self, tx: &mut impl TxAccess<'h>, k: K, v: V) -> Result<bool> {
        let tx = tx.tx_mut();
        let old = self.insert(tx, k, v)?;
        free_replaced(tx, old, &v)
    }

    /// Remove `k` and free what its value owns; returns whether it was there.
    pub fn remove_and_free<'h>(&self, tx: &mut impl TxAccess<'h>, k: &K::Query) -> Result<bool> {
        let tx = tx.tx_mut();
        match self.remove(tx, k)? {
            Some(v) => v.free_owned(tx).map(|()| true),
            None => Ok(false),
        }
    }

    /// [`for_each_object`](Self::for_each_object) and every object the values own.
    pub fn for_each_object_with_values(&self, tx: &Tx<'_>, mut f: impl FnMut(u64)) -> Result<()> {
        self.for_each_object(tx, &mut f)?;
        let mut err = Ok(());
        self.for_each(tx, |_, v| {
            err = v.for_each_owned(tx, &mut f);
            err.is_ok()
        })?;
        err
    }

    /// Free the tree and what every value owns. The handle and its copies must not be
    /// used afterwards.
    pub fn destroy_with_values<'h>(self, tx: &mut impl TxAccess<'h>) -> Result<()> {
        let tx = tx.tx_mut();
        let mut vals = Vec::new();
        self.for_each(tx, |_, v| {
            vals.push(*v);
            true
        })?;
        for v in vals {
            v.free_owned(tx)?;
        }
        self.destroy(tx)
    }
}

impl<V: Pod, const F: usize> BTreeMap<PString, V, F> {
    /// Insert or replace the value of the key `k`; returns the previous value (which
    /// the caller owns: see [`Owned`], *Who frees a value*). The key is
    /// copied into the pool only when it is new.
    ///
    /// ```
    /// use pisces::{BTreeMap, Config, PString, Pool};
    /// use std::ops::Bound;
    /// # fn main() -> pisces::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// let pool = Pool::create(dir.path().join("s.pool"), Config::new().size(32 << 20))?;
    /// pool.run(|tx| {
    ///     let t = BTreeMap::<PString, u64>::new(tx)?;
    ///     for (i, w) in ["pear", "apple", "fig", "banana"].into_iter().enumerate() {
    ///         t.insert_str(tx, w, i as u64)?;
    ///     }
    ///     assert_eq!(t.get(tx, "fig")?, Some(2)); // looked up by &str, no allocation
    ///     let mut words = Vec::new();
    ///     for e in t.iter(tx) {
    ///         let (k, _) = e?;
    ///         words.push(k.to_string(tx)?);
    ///     }
    ///     assert_eq!(words, ["apple", "banana", "fig", "pear"]);
    ///     let mut from_b = Vec::new();
    ///     for e in t.range(tx, (Bound::Included("b"), Bound::Excluded("g"))) {
    ///         from_b.push(*e?.1);
    ///     }
    ///     assert_eq!(from_b, [3, 2]);
    ///     assert_eq!(t.len(tx)?, 4); // insert_str counts new keys
    ///     assert_eq!(t.remove(tx, "pear")?, Some(0)); // the key's block is freed
    ///     t.destroy(tx) // nodes, keys and separators
    /// })?;
    /// # Ok(()) }
    /// ```
    pub fn insert_str<'h>(&self, tx: &mut impl TxAccess<'h>, k: &str, v: V) -> Result<Option<V>> {
        Ok(self
            .insert_with(tx.tx_mut(), k, |tx| PString::new(tx, k), v)?
            .0)
    }
}

impl<V: Pod, const F: usize> BTreeMap<PBytes, V, F> {
    /// Insert or replace the value of the key `k`; returns the previous value (see
    /// [`BTreeMap::insert_str`]). The key is copied into the pool only when it is new.
    pub fn insert_bytes<'h>(
        &self,
        tx: &mut impl TxAccess<'h>,
        k: &[u8],
        v: V,
    ) -> Result<Option<V>> {
        Ok(self
            .insert_with(tx.tx_mut(), k, |tx| PBytes::new(tx, k), v)?
            .0)
    }
}
