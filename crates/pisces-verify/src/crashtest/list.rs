//! `list`: sorted singly linked lists with inserts and deletes (allocation and free).
//!
//! Each thread owns one list (a head pointer in the root object). Operation `i` of
//! thread `t` inserts a key chosen by `(t, i)` at its sorted place, or, every third
//! operation, deletes the first node and frees it. The oracle walks every list
//! (no node reached twice, keys sorted, no torn node: each node's payload repeats its
//! key), compares each thread's keys with the list after exactly its acknowledged
//! operations, or that plus some of those in doubt ([`Bounds`]), and checks that the
//! allocator holds exactly the root and the nodes.

use super::oracle::allocated_equals_reachable;
use super::workload::{match_threads, Bounds, Shape, Workload, MAX_THREADS};
use pisces::{Error, PPtr, Pod, Pool, Result, ThreadHandle, TxOptions, Zeroable};
use std::collections::BTreeSet;

/// A list node: the key, three copies of it (to detect a torn node), the next node.
#[derive(Clone, Copy, Pod, Zeroable)]
#[repr(C)]
pub struct Node {
    key: u64,
    payload: [u64; 3],
    next: PPtr<Node>,
}

type Heads = [PPtr<Node>; MAX_THREADS];

/// The list workload (see the [module docs](self)).
#[derive(Clone, Copy, Debug, Default)]
pub struct List;

/// Operation `i` of thread `t`: `Some(key)` inserts, `None` deletes the first node.
pub fn list_op(t: usize, i: usize) -> Option<u64> {
    if i % 3 == 2 {
        None
    } else {
        Some(((t * 7919 + i * 104_729) % 1000) as u64)
    }
}

/// Apply one operation to a model list.
pub fn list_apply(list: &mut Vec<u64>, op: Option<u64>) {
    match op {
        Some(k) => {
            let pos = list.partition_point(|&x| x < k);
            list.insert(pos, k);
        }
        None => {
            if !list.is_empty() {
                list.remove(0);
            }
        }
    }
}

/// The model list of thread `t` after its first `c` operations.
pub fn list_after(t: usize, c: usize) -> Vec<u64> {
    let mut v = Vec::new();
    for i in 0..c {
        list_apply(&mut v, list_op(t, i));
    }
    v
}

impl Workload for List {
    fn name(&self) -> &'static str {
        "list"
    }

    fn describe(&self) -> &'static str {
        "sorted-list insert/delete per thread: shape valid, contents = acknowledged ops (plus any in doubt), allocator = nodes"
    }

    fn shape(&self, threads: usize, ops: usize) -> Shape {
        // Two operations in three insert; 1300 nodes fill a 64 KiB slab.
        let nodes = (threads * ops).div_ceil(3) * 2;
        Shape {
            pool_size: (512 << 10) + (nodes.div_ceil(1300) as u64) * (64 << 10),
            ..Shape::default()
        }
    }

    fn setup(&self, pool: &Pool) -> Result<()> {
        pool.root::<Heads>().map(|_| ())
    }

    fn root(&self, pool: &Pool) -> Result<u64> {
        Ok(pool.root::<Heads>()?.offset())
    }

    fn op(
        &self,
        h: &mut ThreadHandle,
        root: u64,
        t: usize,
        i: usize,
        opts: TxOptions,
    ) -> Result<()> {
        let heads: PPtr<Heads> = PPtr::from_offset(root);
        let op = list_op(t, i);
        h.run_with(opts, |tx| {
            let head = tx.read(heads)?[t];
            match op {
                Some(k) => {
                    let mut prev: Option<PPtr<Node>> = None;
                    let mut cur = head;
                    while !cur.is_null() {
                        let n = *tx.read(cur)?;
                        if n.key >= k {
                            break;
                        }
                        prev = Some(cur);
                        cur = n.next;
                    }
                    let node = tx.alloc(Node {
                        key: k,
                        payload: [k; 3],
                        next: cur,
                    })?;
                    match prev {
                        None => tx.write(heads)?[t] = node,
                        Some(p) => tx.write(p)?.next = node,
                    }
                }
                None => {
                    if !head.is_null() {
                        let next = tx.read(head)?.next;
                        tx.write(heads)?[t] = next;
                        tx.free(head)?;
                    }
                }
            }
            Ok(())
        })
    }

    fn check(&self, pool: &Pool, bounds: &[Bounds]) -> std::result::Result<Vec<usize>, String> {
        let heads: PPtr<Heads> = pool.root().map_err(|e| format!("root: {e}"))?;
        let (lists, nodes) = pool
            .run(|tx| {
                let hs = *tx.read(heads)?;
                let mut lists = Vec::new();
                let mut nodes = BTreeSet::new();
                for (t, h) in hs.into_iter().enumerate() {
                    let mut v = Vec::new();
                    let mut cur = h;
                    while !cur.is_null() {
                        if !nodes.insert(cur.offset()) {
                            return Err(Error::abort(format!(
                                "list {t}: node {:#x} reached twice (cycle or shared)",
                                cur.offset()
                            )));
                        }
                        let n = *tx.read(cur)?;
                        if n.payload != [n.key; 3] {
                            return Err(Error::abort(format!(
                                "list {t}: torn node {:#x}",
                                cur.offset()
                            )));
                        }
                        if v.last().is_some_and(|&l| l > n.key) {
                            return Err(Error::abort(format!("list {t}: not sorted")));
                        }
                        v.push(n.key);
                        cur = n.next;
                    }
                    lists.push(v);
                }
                Ok((lists, nodes))
            })
            .map_err(|e| format!("walking the lists: {e}"))?;
        if let Some(t) = (bounds.len()..MAX_THREADS).find(|&t| !lists[t].is_empty()) {
            return Err(format!("list {t} of a thread that never ran is not empty"));
        }
        let counts = match_threads(bounds, |t, c| {
            let expect = list_after(t, c);
            if lists[t] == expect {
                Ok(())
            } else {
                Err(format!("list {:?} is not {expect:?}", lists[t]))
            }
        })?;
        let mut reachable = nodes;
        reachable.insert(heads.offset());
        allocated_equals_reachable(pool, &reachable)?;
        Ok(counts)
    }
}
