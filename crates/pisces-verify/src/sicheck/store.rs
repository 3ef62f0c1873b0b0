//! How the workload's lists live in a pool.
//!
//! Each key is one fixed-capacity object, `{ len, vals: [u64; LIST_CAPACITY] }`: an
//! append writes that one object (so two appends to one key conflict, and appends to
//! different keys never do: Pisces locks whole objects), and a read reads it once and
//! copies `vals[..len]`. The capacity is enough because the workload retires a key
//! after [`LIST_CAPACITY`] appends and moves on to a fresh one (as Elle does, to keep
//! reads short and histories checkable); an append to a full list fails with an error
//! rather than being dropped.
//!
//! Keys are found through a two-level directory rooted at the pool's root object:
//! `Dir { pages: [PPtr<Page>; DIR_PAGES] }`, `Page { lists: [PPtr<ListObj>; PAGE_KEYS] }`.
//! Pages and lists are created by the first append to a key, inside that transaction, so
//! everything is transactional and survives crashes; a read of a key nobody created
//! returns the empty list. Creating keys that share a page writes the page, so two such
//! creations conflict and one retries (rare: a page holds 512 consecutive keys, and keys
//! are created one after another).

use super::history::{Key, Value};
use pisces::{Error, PPtr, Pod, Pool, Result, Tx, Zeroable};

/// Values one key can hold.
pub const LIST_CAPACITY: usize = 32;
/// Keys per directory page.
pub const PAGE_KEYS: usize = 512;
/// Pages in the directory.
pub const DIR_PAGES: usize = 256;
/// Keys a store can hold.
pub const MAX_KEYS: u64 = (PAGE_KEYS * DIR_PAGES) as u64;

/// One key's list.
#[derive(Clone, Copy, Pod, Zeroable)]
#[repr(C)]
pub struct ListObj {
    /// Values in use.
    pub len: u64,
    /// The values, oldest first.
    pub vals: [u64; LIST_CAPACITY],
}

/// A directory page.
#[derive(Clone, Copy, Pod, Zeroable)]
#[repr(C)]
pub struct Page {
    /// The lists of `PAGE_KEYS` consecutive keys (null: not created).
    pub lists: [PPtr<ListObj>; PAGE_KEYS],
}

/// The directory (the pool's root object).
#[derive(Clone, Copy, Pod, Zeroable)]
#[repr(C)]
pub struct Dir {
    /// Pages (null: not created).
    pub pages: [PPtr<Page>; DIR_PAGES],
}

/// Handle on the lists of one pool.
#[derive(Clone, Copy, Debug)]
pub struct Store {
    dir: PPtr<Dir>,
}

fn split(key: Key) -> Result<(usize, usize)> {
    if key >= MAX_KEYS {
        return Err(Error::InvalidConfig(
            format!("key {key} is beyond the {MAX_KEYS} keys a list store holds").into(),
        ));
    }
    let k = key as usize;
    Ok((k / PAGE_KEYS, k % PAGE_KEYS))
}

impl Store {
    /// The store rooted at `pool`'s root object (created empty on first use). The pool
    /// must not use its root for anything else.
    pub fn open(pool: &Pool) -> Result<Store> {
        Ok(Store { dir: pool.root()? })
    }

    /// The list under `key` in `tx`'s snapshot (with `tx`'s own appends).
    pub fn read(&self, tx: &Tx<'_>, key: Key) -> Result<Vec<Value>> {
        let (p, s) = split(key)?;
        let page = tx.read(self.dir)?.pages[p];
        if page.is_null() {
            return Ok(Vec::new());
        }
        let list = tx.read(page)?.lists[s];
        if list.is_null() {
            return Ok(Vec::new());
        }
        let obj = tx.read(list)?;
        let len = usize::try_from(obj.len)
            .ok()
            .filter(|n| *n <= LIST_CAPACITY)
            .ok_or_else(|| {
                Error::Corrupt(format!("list of key {key} claims {} values", obj.len).into())
            })?;
        Ok(obj.vals[..len].to_vec())
    }

    /// Append `value` to the list under `key`, creating the key if needed.
    pub fn append(&self, tx: &mut Tx<'_>, key: Key, value: Value) -> Result<()> {
        let (p, s) = split(key)?;
        let mut page = tx.read(self.dir)?.pages[p];
        if page.is_null() {
            page = tx.alloc(Page::zeroed())?;
            tx.write(self.dir)?.pages[p] = page;
        }
        let list = tx.read(page)?.lists[s];
        if list.is_null() {
            let mut obj = ListObj::zeroed();
            obj.len = 1;
            obj.vals[0] = value;
            let list = tx.alloc(obj)?;
            tx.write(page)?.lists[s] = list;
            return Ok(());
        }
        let obj = tx.write(list)?;
        let len = obj.len as usize;
        if len >= LIST_CAPACITY {
            return Err(Error::InvalidConfig(
                format!("the list of key {key} is full ({LIST_CAPACITY} values)").into(),
            ));
        }
        obj.vals[len] = value;
        obj.len += 1;
        Ok(())
    }
}
