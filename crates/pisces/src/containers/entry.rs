//! [`Entry`]: insert-or-update with one lookup, as std's `entry` API, for both maps.
//!
//! `map.entry(tx, k)?` searches once and keeps where `k` is (or would go) together
//! with the transaction; [`Entry::and_modify`] and [`Entry::or_insert`] then write that
//! place without searching again. The entry holds the transaction mutably, so nothing
//! else can change the map between the search and the write.

use crate::{Result, Tx};
use std::fmt;

/// A key's place in a map, found by `entry`: occupied (the key
/// is there) or vacant (it is not). Made by [`HashMap::entry`](crate::HashMap::entry)
/// and [`BTreeMap::entry`](crate::BTreeMap::entry).
///
/// ```
/// # use pisces::{BTreeMap, Config, HashMap, Pool};
/// # let dir = tempfile::tempdir().unwrap();
/// # let pool = Pool::create(dir.path().join("e.pool"), Config::default().size(32 << 20)).unwrap();
/// pool.run(|tx| {
///     let words = HashMap::<[u8; 8], u64>::new(tx)?;
///     for w in [*b"fish    ", *b"tree    ", *b"fish    "] {
///         words.entry(tx, w)?.and_modify(|n| *n += 1)?.or_insert(1)?;
///     }
///     assert_eq!(words.get(tx, b"fish    ")?, Some(2));
///     let t = BTreeMap::<u64, u64>::new(tx)?;
///     *t.entry(tx, 7)?.or_insert(0)? += 10;
///     *t.entry(tx, 7)?.or_insert(0)? += 10;
///     assert_eq!(t.get(tx, &7)?, Some(20));
///     Ok(())
/// }).unwrap();
/// ```
pub struct Entry<'t, 'h, M: sealed::EntryMap> {
    tx: &'t mut Tx<'h>,
    map: M,
    key: M::Key,
    at: M::At,
}

pub(crate) mod sealed {
    use crate::{Pod, Result, Tx};

    /// What a map gives [`Entry`](super::Entry): its key's place and the two writes.
    pub trait EntryMap: Copy + std::fmt::Debug {
        type Key: Pod;
        type Value: Pod;
        /// Where the key is, or where it would be inserted.
        type At;
        /// True if the key is in the map.
        fn occupied(at: &Self::At) -> bool;
        /// The present key's value, writable (writes its node).
        fn value_mut<'t>(self, tx: &'t mut Tx<'_>, at: &Self::At) -> Result<&'t mut Self::Value>;
        /// Insert the absent key with value `v` at its place.
        fn insert_vacant<'t>(
            self,
            tx: &'t mut Tx<'_>,
            at: Self::At,
            k: Self::Key,
            v: Self::Value,
        ) -> Result<&'t mut Self::Value>;
    }
}

use sealed::EntryMap;

impl<'t, 'h, M: EntryMap> Entry<'t, 'h, M> {
    pub(crate) fn new(tx: &'t mut Tx<'h>, map: M, key: M::Key, at: M::At) -> Self {
        Entry { tx, map, key, at }
    }

    /// The entry's key.
    pub fn key(&self) -> &M::Key {
        &self.key
    }

    /// True if the key is in the map (std's `Entry::Occupied`).
    pub fn is_occupied(&self) -> bool {
        M::occupied(&self.at)
    }

    /// If the key is present, change its value in place with `f` (writes its node);
    /// otherwise nothing. Returns the entry for [`or_insert`](Self::or_insert).
    pub fn and_modify(self, f: impl FnOnce(&mut M::Value)) -> Result<Self> {
        if M::occupied(&self.at) {
            f(self.map.value_mut(&mut *self.tx, &self.at)?);
        }
        Ok(self)
    }

    /// The key's value, writable: the present one, or `default` inserted.
    pub fn or_insert(self, default: M::Value) -> Result<&'t mut M::Value> {
        self.or_insert_with(|| default)
    }

    /// The key's value, writable: the present one, or `f()` inserted.
    pub fn or_insert_with(self, f: impl FnOnce() -> M::Value) -> Result<&'t mut M::Value> {
        if M::occupied(&self.at) {
            self.map.value_mut(self.tx, &self.at)
        } else {
            self.map.insert_vacant(self.tx, self.at, self.key, f())
        }
    }

    /// The key's value, writable: the present one, or all-zero bytes inserted (the
    /// `Pod` default).
    pub fn or_default(self) -> Result<&'t mut M::Value> {
        self.or_insert_with(bytemuck::Zeroable::zeroed)
    }
}

impl<M: EntryMap> fmt::Debug for Entry<'_, '_, M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Entry")
            .field("map", &self.map)
            .field("occupied", &M::occupied(&self.at))
            .finish_non_exhaustive()
    }
}
