//! Lookup tables over a history: who appended each value, which transactions are graph
//! nodes, and each transaction's *external* reads.
//!
//! The external read of a key by a transaction is what its snapshot held: its first
//! read of the key, with the transaction's own earlier appends to that key removed from
//! the end. Dependencies are inferred from external reads only; a transaction's later
//! reads of a key are checked against its own appends (internal consistency).

use super::fasthash::{FastMap, FastSet};
use super::history::{History, Key, Op, Outcome, TxnId, Value};
use std::collections::hash_map::Entry;

/// Who appended a value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Write {
    /// The appending transaction.
    pub txn: TxnId,
    /// The key appended to.
    pub key: Key,
    /// That transaction's last append to the same key.
    pub last_of_txn: Value,
}

/// One external read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExtRead {
    /// The reader.
    pub txn: TxnId,
    /// The key.
    pub key: Key,
    /// The snapshot's list.
    pub list: Vec<Value>,
    /// Whether the reader also appended to the key.
    pub appended: bool,
}

/// Lookup tables over one history.
#[derive(Debug)]
pub struct Index<'h> {
    /// The history.
    pub h: &'h History,
    /// Who appended each value (the first append, if appended twice).
    pub writer: FastMap<Value, Write>,
    /// Values appended more than once.
    pub duplicate_appends: Vec<Value>,
    /// Graph node of each transaction (committed and indeterminate ones).
    pub node_of: Vec<Option<usize>>,
    /// Transaction of each graph node.
    pub txn_of: Vec<TxnId>,
    /// External reads of graph transactions, grouped by transaction in id order.
    pub ext_reads: Vec<ExtRead>,
    /// Where each transaction's external reads start in `ext_reads` (one entry per
    /// transaction, plus the end).
    ext_start: Vec<usize>,
    /// Transactions with an internal inconsistency: (txn, key, what it read, what it
    /// should have read, as far as known).
    pub internal: Vec<(TxnId, Key, Vec<Value>, String)>,
    /// Highest epoch.
    pub max_epoch: u32,
    /// Every key touched.
    pub keys: FastSet<Key>,
}

impl<'h> Index<'h> {
    /// Build the tables.
    pub fn new(h: &'h History) -> Index<'h> {
        let mut writer = FastMap::default();
        let mut duplicate_appends = Vec::new();
        let mut node_of = vec![None; h.txns.len()];
        let mut txn_of = Vec::new();
        let mut keys = FastSet::default();
        for (id, t) in h.txns.iter().enumerate() {
            if t.took_effect() {
                node_of[id] = Some(txn_of.len());
                txn_of.push(id);
            }
            let mut last: FastMap<Key, Value> = FastMap::default();
            for op in &t.ops {
                keys.insert(op.key());
                if let Op::Append { key, value } = op {
                    last.insert(*key, *value);
                }
            }
            for (key, value) in t.appends() {
                let w = Write {
                    txn: id,
                    key,
                    last_of_txn: last.get(&key).copied().unwrap_or(value),
                };
                match writer.entry(value) {
                    Entry::Occupied(_) => duplicate_appends.push(value),
                    Entry::Vacant(e) => {
                        e.insert(w);
                    }
                }
            }
        }
        let mut ext_reads = Vec::new();
        let mut ext_start = Vec::with_capacity(h.txns.len() + 1);
        let mut internal = Vec::new();
        for (id, t) in h.txns.iter().enumerate() {
            ext_start.push(ext_reads.len());
            if t.outcome != Outcome::Aborted {
                scan_txn(id, &t.ops, &mut ext_reads, &mut internal);
            }
        }
        ext_start.push(ext_reads.len());
        Index {
            h,
            writer,
            duplicate_appends,
            node_of,
            txn_of,
            ext_reads,
            ext_start,
            internal,
            max_epoch: h.max_epoch(),
            keys,
        }
    }

    /// The epoch of a transaction.
    pub fn epoch(&self, txn: TxnId) -> u32 {
        self.h.txns[txn].epoch
    }

    /// The external reads of one transaction.
    pub fn ext_reads_of(&self, txn: TxnId) -> &[ExtRead] {
        match (self.ext_start.get(txn), self.ext_start.get(txn + 1)) {
            (Some(&a), Some(&b)) => &self.ext_reads[a..b],
            _ => &[],
        }
    }

    /// The writer of `value` if it appended it to `key`.
    pub fn writer_on(&self, key: Key, value: Value) -> Option<Write> {
        self.writer.get(&value).copied().filter(|w| w.key == key)
    }
}

/// Per key, what the transaction knows about the list: nothing yet (with its own
/// appends so far), or the exact list.
enum Known {
    Unread(Vec<Value>),
    Exact(Vec<Value>),
}

/// External reads and internal-consistency check of one transaction.
fn scan_txn(
    id: TxnId,
    ops: &[Op],
    ext: &mut Vec<ExtRead>,
    internal: &mut Vec<(TxnId, Key, Vec<Value>, String)>,
) {
    let mut state: FastMap<Key, Known> = FastMap::default();
    let mut ext_at: FastMap<Key, usize> = FastMap::default();
    for op in ops {
        match op {
            Op::Append { key, value } => {
                match state
                    .entry(*key)
                    .or_insert_with(|| Known::Unread(Vec::new()))
                {
                    Known::Unread(own) | Known::Exact(own) => own.push(*value),
                }
                if let Some(&i) = ext_at.get(key) {
                    ext[i].appended = true;
                }
            }
            Op::Read { key, list } => {
                let known = state
                    .remove(key)
                    .unwrap_or_else(|| Known::Unread(Vec::new()));
                match known {
                    Known::Exact(expect) => {
                        if *list != expect {
                            internal.push((id, *key, list.clone(), format!("{expect:?}")));
                        }
                    }
                    Known::Unread(own) => {
                        let split = list.len().checked_sub(own.len());
                        let consistent = split.is_some_and(|s| {
                            list[s..] == own[..] && !list[..s].iter().any(|v| own.contains(v))
                        });
                        match (consistent, split) {
                            (true, Some(s)) => {
                                ext_at.insert(*key, ext.len());
                                ext.push(ExtRead {
                                    txn: id,
                                    key: *key,
                                    list: list[..s].to_vec(),
                                    appended: !own.is_empty(),
                                });
                            }
                            _ => internal.push((
                                id,
                                *key,
                                list.clone(),
                                format!("a list ending with its own appends {own:?}"),
                            )),
                        }
                    }
                }
                state.insert(*key, Known::Exact(list.clone()));
            }
        }
    }
}
