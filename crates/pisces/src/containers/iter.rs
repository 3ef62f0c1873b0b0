//! Iterators over the containers' entries inside a transaction, and the cycle guard
//! every link-following walk uses.
//!
//! * [`HashIter`] ([`HashMap::iter`]): every entry, bucket order then chain order.
//! * [`RangeIter`] ([`BTreeMap::iter`], [`BTreeMap::range_iter`]): entries in key
//!   order, optionally limited to a key range.
//!
//! Both borrow the transaction immutably and yield `Result<(&K, &V)>` borrowed from it
//! (no copying): they read only, see the transaction's snapshot, and conflict with
//! nothing. An error (a damaged pool: a bad pointer, a cycle) is yielded once and ends
//! the iteration.
//!
//! # Cycles
//! A damaged pool may link a chain or the leaf list back onto itself; a walk that
//! trusted the links would run forever. [`Walk`] is Brent's cycle detection: it keeps
//! one remembered node and compares each next node with it, moving the remembered node
//! forward at power-of-two step counts. A cycle is found within a few times its length
//! plus the length of the path into it, for one comparison and one counter per step, and
//! is reported as [`Error::Corrupt`].

use super::btree::BTreeMap;
use super::hashmap::HashMap;
use crate::{Error, Pod, Result, Tx};
use std::ops::{Bound, RangeBounds};

/// Brent's cycle detection over a walk along links (see the module docs).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Walk {
    what: &'static str,
    mark: u64,
    power: u64,
    steps: u64,
}

impl Walk {
    /// A walk of `what` (for the message) starting at node `start`.
    #[inline]
    pub(crate) fn new(what: &'static str, start: u64) -> Walk {
        Walk {
            what,
            mark: start,
            power: 1,
            steps: 0,
        }
    }

    /// Record a step to `next` (non-null); `Err(Corrupt)` if the links form a cycle.
    #[inline]
    pub(crate) fn step(&mut self, next: u64) -> Result<()> {
        if next == self.mark {
            return Err(cycle(self.what, next));
        }
        self.steps += 1;
        if self.steps == self.power {
            self.mark = next;
            self.power *= 2;
            self.steps = 0;
        }
        Ok(())
    }
}

#[cold]
fn cycle(what: &str, at: u64) -> Error {
    Error::Corrupt(format!(
        "{what}: the links through the node at {at:#x} form a cycle"
    ))
}

/// Entries of a [`HashMap`] in bucket order, then chain order (see
/// [`HashMap::iter`]).
pub struct HashIter<'t, 'a, K, V> {
    map: HashMap<K, V>,
    tx: &'t Tx<'a>,
    /// Next chunk to read.
    chunk: usize,
    /// The current chunk's heads and the next slot in it.
    heads: Option<&'t [u64]>,
    slot: usize,
    /// Next node of the current chain (0: none).
    cur: u64,
    walk: Walk,
    done: bool,
}

impl<'t, 'a, K: Pod + Eq, V: Pod> HashIter<'t, 'a, K, V> {
    pub(super) fn new(map: HashMap<K, V>, tx: &'t Tx<'a>) -> Self {
        HashIter {
            map,
            tx,
            chunk: 0,
            heads: None,
            slot: 0,
            cur: 0,
            walk: Walk::new("hash map chain", 0),
            done: false,
        }
    }

    fn fail(&mut self, e: Error) -> Option<Result<(&'t K, &'t V)>> {
        self.done = true;
        Some(Err(e))
    }
}

impl<'t, 'a, K: Pod + Eq, V: Pod> Iterator for HashIter<'t, 'a, K, V> {
    type Item = Result<(&'t K, &'t V)>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if self.done {
                return None;
            }
            if self.cur != 0 {
                let (k, v, next) = match self.map.node(self.tx, self.cur) {
                    Ok(x) => x,
                    Err(e) => return self.fail(e),
                };
                if next != 0 {
                    if let Err(e) = self.walk.step(next) {
                        return self.fail(e);
                    }
                }
                self.cur = next;
                return Some(Ok((k, v)));
            }
            match self.heads {
                Some(heads) if self.slot < heads.len() => {
                    let head = heads[self.slot];
                    self.slot += 1;
                    if head != 0 {
                        self.cur = head;
                        self.walk = Walk::new("hash map chain", head);
                    }
                }
                _ => match self.map.chunk_heads(self.tx, self.chunk) {
                    Ok(Some(heads)) => {
                        self.heads = Some(heads);
                        self.chunk += 1;
                        self.slot = 0;
                    }
                    Ok(None) => self.done = true,
                    Err(e) => return self.fail(e),
                },
            }
        }
    }
}

/// Entries of a [`BTreeMap`] in key order within a range (see [`BTreeMap::iter`] and
/// [`BTreeMap::range_iter`]).
pub struct RangeIter<'t, 'a, K, V, const F: usize> {
    tx: &'t Tx<'a>,
    /// Keys and values of the current leaf, and the next index in it.
    keys: &'t [K],
    vals: &'t [V],
    i: usize,
    /// The next leaf (0: none).
    next: u64,
    end: Bound<K>,
    walk: Walk,
    /// Not started yet: (tree, start bound).
    start: Option<(BTreeMap<K, V, F>, Bound<K>)>,
    done: bool,
}

impl<'t, 'a, K: Pod + Ord, V: Pod, const F: usize> RangeIter<'t, 'a, K, V, F> {
    pub(super) fn new<R: RangeBounds<K>>(tree: BTreeMap<K, V, F>, tx: &'t Tx<'a>, r: R) -> Self {
        RangeIter {
            tx,
            keys: &[],
            vals: &[],
            i: 0,
            next: 0,
            end: r.end_bound().cloned(),
            walk: Walk::new("B+-tree leaf chain", 0),
            start: Some((tree, r.start_bound().cloned())),
            done: false,
        }
    }

    fn fail(&mut self, e: Error) -> Option<Result<(&'t K, &'t V)>> {
        self.done = true;
        Some(Err(e))
    }

    /// Load leaf `off` (its entries from index `from`).
    fn load(&mut self, off: u64, from: impl FnOnce(&[K]) -> usize) -> Result<()> {
        let (keys, vals, next) = BTreeMap::<K, V, F>::leaf_entries(self.tx, off)?;
        self.i = from(keys);
        self.keys = keys;
        self.vals = vals;
        self.next = next;
        if next != 0 {
            self.walk.step(next)?;
        }
        Ok(())
    }
}

impl<'t, 'a, K: Pod + Ord, V: Pod, const F: usize> Iterator for RangeIter<'t, 'a, K, V, F> {
    type Item = Result<(&'t K, &'t V)>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        if let Some((tree, start)) = self.start.take() {
            let first = match tree.seek(self.tx, start.as_ref()) {
                Ok(leaf) => leaf,
                Err(e) => return self.fail(e),
            };
            self.walk = Walk::new("B+-tree leaf chain", first);
            if let Err(e) = self.load(first, |keys| super::btree::start_pos(keys, start.as_ref())) {
                return self.fail(e);
            }
        }
        loop {
            if self.i < self.keys.len() {
                let (k, v) = (&self.keys[self.i], &self.vals[self.i]);
                if super::btree::past_end(k, self.end.as_ref()) {
                    self.done = true;
                    return None;
                }
                self.i += 1;
                return Some(Ok((k, v)));
            }
            if self.next == 0 {
                self.done = true;
                return None;
            }
            if let Err(e) = self.load(self.next, |_| 0) {
                return self.fail(e);
            }
        }
    }
}
