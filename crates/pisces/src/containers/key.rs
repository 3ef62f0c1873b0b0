//! [`TreeKey`]: how a [`BTreeMap`](crate::BTreeMap) compares and owns its keys.
//!
//! Plain keys (`Pod + Ord`: integers, byte arrays, your `pod!` structs with `Ord`) are
//! compared in place by `Ord`, with the code the tree always had: the trait's methods
//! for them are `Ord` calls that always succeed, inlined into the tree's loops. Byte
//! string keys ([`PBytes`], [`PString`]) are handles to blocks the tree owns: they are
//! compared by reading the bytes through the transaction (lexicographic order, as
//! `[u8]` and `str` order), looked up by `&[u8]` / `&str` without allocating, freed
//! when their entry is removed, and copied for the separators of inner nodes (a
//! separator outlives the removal of the entry it was copied from, so it cannot share
//! that entry's block).
//!
//! The trait is sealed: its methods keep the tree's invariants (order, ownership).

use super::bytes::{PBytes, PString};
use crate::{Pod, Result, Tx};
use std::cmp::Ordering;

mod sealed {
    pub trait Sealed {}
    impl<K: bytemuck::Pod + Ord> Sealed for K {}
    impl Sealed for super::PBytes {}
    impl Sealed for super::PString {}
}

/// A key type of [`BTreeMap`](crate::BTreeMap): every `Pod + Ord` type (compared in
/// place), [`PBytes`] and [`PString`] (variable-size keys owned by the tree, looked up
/// by `&[u8]` and `&str`). Sealed.
pub trait TreeKey: Pod + sealed::Sealed {
    /// What lookups take: the key itself for plain keys, `[u8]` or `str` for byte
    /// string keys.
    type Query: ?Sized;

    /// Keys live outside the node (in blocks the tree owns).
    #[doc(hidden)]
    const OUT_OF_LINE: bool = false;

    /// How the stored key `k` compares with `q`.
    #[doc(hidden)]
    fn cmp_query(tx: &Tx<'_>, k: &Self, q: &Self::Query) -> Result<Ordering>;

    /// How two stored keys compare.
    #[doc(hidden)]
    fn cmp_keys(tx: &Tx<'_>, a: &Self, b: &Self) -> Result<Ordering>;

    /// The query form of the stored key `k`, borrowed from the transaction's snapshot
    /// (byte string keys: its bytes).
    #[doc(hidden)]
    fn query<'t>(tx: &'t Tx<'_>, k: &'t Self) -> Result<&'t Self::Query>;

    /// Call `f` with the query form of the key `k` (byte string keys: a copy of its
    /// bytes, which cannot stay borrowed from `tx` while `f` writes through it).
    #[doc(hidden)]
    fn with_query<R>(
        tx: &mut Tx<'_>,
        k: &Self,
        f: impl FnOnce(&mut Tx<'_>, &Self::Query) -> R,
    ) -> Result<R>;

    /// Binary search of sorted `keys` for `q` (as `slice::binary_search`).
    #[doc(hidden)]
    #[inline]
    fn search(
        tx: &Tx<'_>,
        keys: &[Self],
        q: &Self::Query,
    ) -> Result<std::result::Result<usize, usize>> {
        let (mut lo, mut hi) = (0, keys.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            match Self::cmp_query(tx, &keys[mid], q)? {
                Ordering::Less => lo = mid + 1,
                Ordering::Greater => hi = mid,
                Ordering::Equal => return Ok(Ok(mid)),
            }
        }
        Ok(Err(lo))
    }

    /// Number of leading keys below `q` (with `or_equal`, at most `q`): the partition
    /// point of sorted `keys`.
    #[doc(hidden)]
    #[inline]
    fn partition(tx: &Tx<'_>, keys: &[Self], q: &Self::Query, or_equal: bool) -> Result<usize> {
        let (mut lo, mut hi) = (0, keys.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let c = Self::cmp_query(tx, &keys[mid], q)?;
            if c == Ordering::Less || (or_equal && c == Ordering::Equal) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        Ok(lo)
    }

    /// A key of its own for an inner node's separator, equal to `k`.
    #[doc(hidden)]
    #[inline]
    fn separator(_tx: &mut Tx<'_>, k: &Self) -> Result<Self> {
        Ok(*k)
    }

    /// Free what a key the tree drops owns.
    #[doc(hidden)]
    #[inline]
    fn release(self, _tx: &mut Tx<'_>) -> Result<()> {
        Ok(())
    }

    /// The block a key owns (0: none).
    #[doc(hidden)]
    #[inline]
    fn owned_block(&self) -> u64 {
        0
    }
}

impl<K: Pod + Ord> TreeKey for K {
    type Query = K;

    #[inline(always)]
    fn cmp_query(_tx: &Tx<'_>, k: &K, q: &K) -> Result<Ordering> {
        Ok(k.cmp(q))
    }

    #[inline(always)]
    fn cmp_keys(_tx: &Tx<'_>, a: &K, b: &K) -> Result<Ordering> {
        Ok(a.cmp(b))
    }

    #[inline(always)]
    fn query<'t>(_tx: &'t Tx<'_>, k: &'t K) -> Result<&'t K> {
        Ok(k)
    }

    #[inline(always)]
    fn with_query<R>(tx: &mut Tx<'_>, k: &K, f: impl FnOnce(&mut Tx<'_>, &K) -> R) -> Result<R> {
        Ok(f(tx, k))
    }

    #[inline(always)]
    fn search(_tx: &Tx<'_>, keys: &[K], q: &K) -> Result<std::result::Result<usize, usize>> {
        Ok(keys.binary_search(q))
    }

    #[inline(always)]
    fn partition(_tx: &Tx<'_>, keys: &[K], q: &K, or_equal: bool) -> Result<usize> {
        Ok(if or_equal {
            keys.partition_point(|x| x <= q)
        } else {
            keys.partition_point(|x| x < q)
        })
    }
}

impl TreeKey for PBytes {
    type Query = [u8];
    const OUT_OF_LINE: bool = true;

    fn cmp_query(tx: &Tx<'_>, k: &PBytes, q: &[u8]) -> Result<Ordering> {
        k.cmp_bytes(tx, q)
    }

    fn cmp_keys(tx: &Tx<'_>, a: &PBytes, b: &PBytes) -> Result<Ordering> {
        a.cmp_bytes(tx, b.get(tx)?)
    }

    fn query<'t>(tx: &'t Tx<'_>, k: &'t PBytes) -> Result<&'t [u8]> {
        k.get(tx)
    }

    fn with_query<R>(
        tx: &mut Tx<'_>,
        k: &PBytes,
        f: impl FnOnce(&mut Tx<'_>, &[u8]) -> R,
    ) -> Result<R> {
        let q = k.to_vec(tx)?;
        Ok(f(tx, &q))
    }

    fn separator(tx: &mut Tx<'_>, k: &PBytes) -> Result<PBytes> {
        let bytes = k.to_vec(tx)?;
        PBytes::new(tx, &bytes)
    }

    fn release(self, tx: &mut Tx<'_>) -> Result<()> {
        self.free(tx)
    }

    fn owned_block(&self) -> u64 {
        self.offset()
    }
}

impl TreeKey for PString {
    type Query = str;
    const OUT_OF_LINE: bool = true;

    fn cmp_query(tx: &Tx<'_>, k: &PString, q: &str) -> Result<Ordering> {
        k.as_pbytes().cmp_bytes(tx, q.as_bytes())
    }

    fn cmp_keys(tx: &Tx<'_>, a: &PString, b: &PString) -> Result<Ordering> {
        a.as_pbytes().cmp_bytes(tx, b.as_bytes(tx)?)
    }

    fn query<'t>(tx: &'t Tx<'_>, k: &'t PString) -> Result<&'t str> {
        k.get(tx)
    }

    fn with_query<R>(
        tx: &mut Tx<'_>,
        k: &PString,
        f: impl FnOnce(&mut Tx<'_>, &str) -> R,
    ) -> Result<R> {
        let q = k.to_string(tx)?;
        Ok(f(tx, &q))
    }

    fn separator(tx: &mut Tx<'_>, k: &PString) -> Result<PString> {
        let s = k.to_string(tx)?;
        PString::new(tx, &s)
    }

    fn release(self, tx: &mut Tx<'_>) -> Result<()> {
        self.free(tx)
    }

    fn owned_block(&self) -> u64 {
        self.offset()
    }
}
