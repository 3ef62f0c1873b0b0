//! Histories: what the checker sees of a run.
//!
//! A history is a list of transactions. Each has the thread that ran it, the *epoch* it
//! ran in (0 before the first crash, incremented by every crash and recovery), an
//! [`Outcome`], and its micro-operations in program order:
//!
//! * [`Op::Read`]`{ key, list }`: the whole list stored under `key`, as this
//!   transaction saw it (its snapshot plus its own earlier appends);
//! * [`Op::Append`]`{ key, value }`: append `value` to the list under `key`.
//!
//! Appended values are unique across the whole history (every attempt of a
//! transaction appends fresh values), so a value in a read names exactly one append of
//! one attempt: that is what makes the dependencies recoverable from the history alone.
//!
//! Outcomes: [`Outcome::Committed`] (the commit returned, and before any crash),
//! [`Outcome::Aborted`] (an attempt that rolled back: its appends must never be seen),
//! and [`Outcome::Indeterminate`] (the commit returned, but a crash happened before the
//! caller could tell whether it was durable: it committed in its epoch's run and after
//! the recovery it is either wholly present or wholly absent).

use std::fmt;

/// A key: names one append-only list.
pub type Key = u64;
/// An appended value (unique in a history).
pub type Value = u64;

/// One micro-operation of a transaction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    /// Read the whole list under `key`; `list` is what was observed, oldest first.
    Read {
        /// The key read.
        key: Key,
        /// The observed list.
        list: Vec<Value>,
    },
    /// Append `value` to the list under `key`.
    Append {
        /// The key appended to.
        key: Key,
        /// The (history-unique) value appended.
        value: Value,
    },
}

impl Op {
    /// The key this operation touches.
    pub fn key(&self) -> Key {
        match self {
            Op::Read { key, .. } | Op::Append { key, .. } => *key,
        }
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Op::Read { key, list } => {
                write!(f, "r({key})=[")?;
                for (i, v) in list.iter().enumerate() {
                    if i > 0 {
                        write!(f, " ")?;
                    }
                    write!(f, "{v}")?;
                }
                write!(f, "]")
            }
            Op::Append { key, value } => write!(f, "append({key}, {value})"),
        }
    }
}

/// How a transaction ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// Its commit returned before any crash: it must be visible to every later
    /// transaction, across crashes.
    Committed,
    /// It rolled back: nothing it wrote may ever be observed.
    Aborted,
    /// Its commit returned, but a crash came before it was acknowledged: it committed
    /// in its epoch, and after recovery is either wholly present or wholly absent.
    Indeterminate,
}

/// One transaction (or one aborted attempt of one).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Txn {
    /// The thread (process) that ran it.
    pub thread: usize,
    /// Crash epoch: 0 before the first crash, n after the n-th recovery.
    pub epoch: u32,
    /// How it ended.
    pub outcome: Outcome,
    /// Its operations in program order.
    pub ops: Vec<Op>,
}

impl Txn {
    /// An empty committed transaction of `thread` in epoch 0 (builder for hand-made
    /// histories: chain [`r`](Self::r) and [`a`](Self::a)).
    pub fn committed(thread: usize) -> Txn {
        Txn {
            thread,
            epoch: 0,
            outcome: Outcome::Committed,
            ops: Vec::new(),
        }
    }

    /// An empty aborted attempt of `thread` in epoch 0.
    pub fn aborted(thread: usize) -> Txn {
        Txn {
            outcome: Outcome::Aborted,
            ..Txn::committed(thread)
        }
    }

    /// An empty indeterminate transaction of `thread` in epoch 0.
    pub fn indeterminate(thread: usize) -> Txn {
        Txn {
            outcome: Outcome::Indeterminate,
            ..Txn::committed(thread)
        }
    }

    /// The same transaction in epoch `epoch`.
    pub fn in_epoch(mut self, epoch: u32) -> Txn {
        self.epoch = epoch;
        self
    }

    /// Add a read of `key` that observed `list`.
    pub fn r(mut self, key: Key, list: &[Value]) -> Txn {
        self.ops.push(Op::Read {
            key,
            list: list.to_vec(),
        });
        self
    }

    /// Add an append of `value` to `key`.
    pub fn a(mut self, key: Key, value: Value) -> Txn {
        self.ops.push(Op::Append { key, value });
        self
    }

    /// True for committed and indeterminate transactions: those that took effect in
    /// their epoch and are part of the dependency graph.
    pub fn took_effect(&self) -> bool {
        self.outcome != Outcome::Aborted
    }

    /// The appends of this transaction, in order.
    pub fn appends(&self) -> impl Iterator<Item = (Key, Value)> + '_ {
        self.ops.iter().filter_map(|op| match op {
            Op::Append { key, value } => Some((*key, *value)),
            Op::Read { .. } => None,
        })
    }
}

impl fmt::Display for Txn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let outcome = match self.outcome {
            Outcome::Committed => "ok",
            Outcome::Aborted => "aborted",
            Outcome::Indeterminate => "indeterminate",
        };
        write!(f, "thread {} epoch {} {outcome}: ", self.thread, self.epoch)?;
        for (i, op) in self.ops.iter().enumerate() {
            if i > 0 {
                write!(f, ", ")?;
            }
            write!(f, "{op}")?;
        }
        Ok(())
    }
}

/// Index of a transaction in its [`History`].
pub type TxnId = usize;

/// A recorded history.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct History {
    /// All transactions and aborted attempts, in any order (order carries no meaning
    /// except through epochs).
    pub txns: Vec<Txn>,
}

impl History {
    /// An empty history.
    pub fn new() -> History {
        History::default()
    }

    /// Add a transaction; returns its id.
    pub fn push(&mut self, txn: Txn) -> TxnId {
        self.txns.push(txn);
        self.txns.len() - 1
    }

    /// Append every transaction of `other`.
    pub fn extend(&mut self, other: History) {
        self.txns.extend(other.txns);
    }

    /// Transactions that took effect (committed or indeterminate).
    pub fn effective_count(&self) -> usize {
        self.txns.iter().filter(|t| t.took_effect()).count()
    }

    /// Transactions with the given outcome.
    pub fn count(&self, outcome: Outcome) -> usize {
        self.txns.iter().filter(|t| t.outcome == outcome).count()
    }

    /// The highest epoch in the history (0 if empty).
    pub fn max_epoch(&self) -> u32 {
        self.txns.iter().map(|t| t.epoch).max().unwrap_or(0)
    }
}

impl FromIterator<Txn> for History {
    fn from_iter<I: IntoIterator<Item = Txn>>(iter: I) -> Self {
        History {
            txns: iter.into_iter().collect(),
        }
    }
}
