//! [`SortedTree`]: a small engine-test ordered map (the `sorted-tree` workload), the
//! same operations as the `btree` workload without the container code.
//!
//! Two levels of sorted arrays: the root object is a directory of up to [`FANOUT`]
//! separator keys and leaf pointers (the first separator is 0), each leaf holds up to
//! [`LEAF`] sorted key-value pairs. A full leaf splits in two (allocating a leaf and
//! inserting a separator); an emptied leaf is freed, and a leaf that fits into its
//! right neighbour after a removal absorbs it (freeing the neighbour). Unused entries
//! are kept zero, which the shape check verifies along with the ordering, the
//! separator ranges and the leaf fill.

use super::kv::{KvStore, Scan};
use pisces::{Error, PPtr, Pod, Pool, Result, Tx, Zeroable};
use std::collections::{BTreeMap, BTreeSet};

/// Most leaves (directory entries).
pub const FANOUT: usize = 64;
/// Most pairs per leaf.
pub const LEAF: usize = 8;
/// A leaf merges with its right neighbour when together they hold at most this many.
const MERGE: usize = 6;

#[derive(Clone, Copy, Pod, Zeroable)]
#[repr(C)]
struct Dir {
    n: u64,
    seps: [u64; FANOUT],
    kids: [PPtr<Leaf>; FANOUT],
}

#[derive(Clone, Copy, Pod, Zeroable)]
#[repr(C)]
struct Leaf {
    n: u64,
    keys: [u64; LEAF],
    vals: [u64; LEAF],
}

impl Leaf {
    fn len(&self) -> usize {
        (self.n as usize).min(LEAF)
    }
    fn insert_at(&mut self, j: usize, k: u64, v: u64) {
        let n = self.len();
        self.keys.copy_within(j..n, j + 1);
        self.vals.copy_within(j..n, j + 1);
        self.keys[j] = k;
        self.vals[j] = v;
        self.n += 1;
    }
    fn remove_at(&mut self, j: usize) {
        let n = self.len();
        self.keys.copy_within(j + 1..n, j);
        self.vals.copy_within(j + 1..n, j);
        self.keys[n - 1] = 0;
        self.vals[n - 1] = 0;
        self.n -= 1;
    }
}

impl Dir {
    fn len(&self) -> usize {
        (self.n as usize).min(FANOUT)
    }
    /// Index of the leaf whose range holds `key`.
    fn find(&self, key: u64) -> usize {
        self.seps[..self.len()]
            .partition_point(|&s| s <= key)
            .saturating_sub(1)
    }
    fn insert_at(&mut self, i: usize, sep: u64, kid: PPtr<Leaf>) {
        let n = self.len();
        self.seps.copy_within(i..n, i + 1);
        self.kids.copy_within(i..n, i + 1);
        self.seps[i] = sep;
        self.kids[i] = kid;
        self.n += 1;
    }
    fn remove_at(&mut self, i: usize) {
        let n = self.len();
        self.seps.copy_within(i + 1..n, i);
        self.kids.copy_within(i + 1..n, i);
        self.seps[n - 1] = 0;
        self.kids[n - 1] = PPtr::null();
        self.n -= 1;
        self.seps[0] = 0;
    }
}

/// The two-level sorted tree (see the [module docs](self)).
#[derive(Clone, Copy, Debug, Default)]
pub struct SortedTree;

impl KvStore for SortedTree {
    fn create(&self, pool: &Pool) -> Result<()> {
        let root: PPtr<Dir> = pool.root()?;
        pool.run(|tx| {
            let leaf = tx.alloc(Leaf::zeroed())?;
            let d = tx.write(root)?;
            d.n = 1;
            d.kids[0] = leaf;
            Ok(())
        })
    }

    fn root(&self, pool: &Pool) -> Result<u64> {
        Ok(pool.root::<Dir>()?.offset())
    }

    fn upsert(&self, tx: &mut Tx<'_>, root: u64, key: u64, value: u64) -> Result<()> {
        let root: PPtr<Dir> = PPtr::from_offset(root);
        let dir = *tx.read(root)?;
        if dir.n == 0 {
            return Err(Error::abort("tree has no leaf"));
        }
        let i = dir.find(key);
        let lp = dir.kids[i];
        let mut leaf = *tx.read(lp)?;
        let n = leaf.len();
        let j = leaf.keys[..n].partition_point(|&k| k < key);
        if j < n && leaf.keys[j] == key {
            tx.write(lp)?.vals[j] = value;
            return Ok(());
        }
        if n < LEAF {
            leaf.insert_at(j, key, value);
            *tx.write(lp)? = leaf;
            return Ok(());
        }
        if dir.len() == FANOUT {
            return Err(Error::abort("tree directory full"));
        }
        // Split: the upper half moves to a new right leaf.
        let half = LEAF / 2;
        let mut right = Leaf::zeroed();
        for (r, m) in (half..LEAF).enumerate() {
            right.keys[r] = leaf.keys[m];
            right.vals[r] = leaf.vals[m];
            leaf.keys[m] = 0;
            leaf.vals[m] = 0;
        }
        right.n = (LEAF - half) as u64;
        leaf.n = half as u64;
        if j <= half {
            leaf.insert_at(j, key, value);
        } else {
            right.insert_at(j - half, key, value);
        }
        let sep = right.keys[0];
        let rp = tx.alloc(right)?;
        *tx.write(lp)? = leaf;
        tx.write(root)?.insert_at(i + 1, sep, rp);
        Ok(())
    }

    fn remove(&self, tx: &mut Tx<'_>, root: u64, key: u64) -> Result<bool> {
        let root: PPtr<Dir> = PPtr::from_offset(root);
        let dir = *tx.read(root)?;
        if dir.n == 0 {
            return Err(Error::abort("tree has no leaf"));
        }
        let i = dir.find(key);
        let lp = dir.kids[i];
        let mut leaf = *tx.read(lp)?;
        let n = leaf.len();
        let j = leaf.keys[..n].partition_point(|&k| k < key);
        if j >= n || leaf.keys[j] != key {
            return Ok(false);
        }
        leaf.remove_at(j);
        if leaf.n == 0 && dir.len() > 1 {
            tx.free(lp)?;
            tx.write(root)?.remove_at(i);
            return Ok(true);
        }
        if i + 1 < dir.len() {
            let rp = dir.kids[i + 1];
            let right = *tx.read(rp)?;
            if leaf.len() + right.len() <= MERGE {
                for m in 0..right.len() {
                    let at = leaf.len();
                    leaf.insert_at(at, right.keys[m], right.vals[m]);
                }
                tx.free(rp)?;
                tx.write(root)?.remove_at(i + 1);
            }
        }
        *tx.write(lp)? = leaf;
        Ok(true)
    }

    fn scan(&self, pool: &Pool) -> std::result::Result<Scan, String> {
        let root: PPtr<Dir> = pool.root().map_err(|e| format!("root: {e}"))?;
        let bad = |s: String| Error::abort(s);
        pool.run(|tx| {
            let dir = *tx.read(root)?;
            let n = dir.n as usize;
            if n == 0 || n > FANOUT {
                return Err(bad(format!("directory holds {n} leaves")));
            }
            if dir.seps[0] != 0 {
                return Err(bad(format!("first separator is {}", dir.seps[0])));
            }
            if dir.seps[..n].windows(2).any(|w| w[0] >= w[1]) {
                return Err(bad("separators not increasing".into()));
            }
            if dir.seps[n..].iter().any(|&s| s != 0) || dir.kids[n..].iter().any(|k| !k.is_null()) {
                return Err(bad("unused directory entries not zero".into()));
            }
            let mut objects = BTreeSet::from([root.offset()]);
            let mut pairs = BTreeMap::new();
            for i in 0..n {
                let lp = dir.kids[i];
                if !objects.insert(lp.offset()) {
                    return Err(bad(format!("leaf {:#x} reached twice", lp.offset())));
                }
                let leaf = *tx.read(lp)?;
                let m = leaf.n as usize;
                if m > LEAF || (m == 0 && n > 1) {
                    return Err(bad(format!("leaf {i} holds {m} pairs")));
                }
                let hi = if i + 1 < n { dir.seps[i + 1] } else { u64::MAX };
                let keys = &leaf.keys[..m];
                if keys.windows(2).any(|w| w[0] >= w[1]) {
                    return Err(bad(format!("leaf {i} keys not increasing")));
                }
                if keys.iter().any(|&k| k < dir.seps[i] || k >= hi) {
                    return Err(bad(format!("leaf {i} has keys outside its range")));
                }
                if leaf.keys[m..]
                    .iter()
                    .chain(&leaf.vals[m..])
                    .any(|&x| x != 0)
                {
                    return Err(bad(format!("leaf {i} unused entries not zero")));
                }
                for (&k, &v) in keys.iter().zip(&leaf.vals[..m]) {
                    pairs.insert(k, v);
                }
            }
            Ok(Scan {
                pairs,
                objects: Some(objects),
            })
        })
        .map_err(|e| format!("scanning the tree: {e}"))
    }
}
