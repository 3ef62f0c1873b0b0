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
//!
//! # Several processes
//! A process records its own history and hands it over as text, one transaction a line
//! ([`Txn::to_line`], [`Txn::from_line`]); [`History::merge`] joins the histories of
//! several processes into one, numbering their threads apart.

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

impl Txn {
    /// This transaction as one line of text (no newline), read back by
    /// [`from_line`](Self::from_line): the thread, the epoch, the outcome (`ok`,
    /// `aborted` or `indeterminate`), then each operation in order, a read as
    /// `r KEY N V1 .. VN` and an append as `a KEY VALUE`, all separated by spaces.
    pub fn to_line(&self) -> String {
        use fmt::Write;
        let mut s = format!(
            "{} {} {}",
            self.thread,
            self.epoch,
            outcome_name(self.outcome)
        );
        for op in &self.ops {
            // Writing to a String cannot fail.
            let _ = match op {
                Op::Read { key, list } => {
                    let _ = write!(s, " r {key} {}", list.len());
                    list.iter().try_for_each(|v| write!(s, " {v}"))
                }
                Op::Append { key, value } => write!(s, " a {key} {value}"),
            };
        }
        s
    }

    /// The transaction a line of [`to_line`](Self::to_line) describes; an error names
    /// what is wrong with the line.
    pub fn from_line(line: &str) -> Result<Txn, String> {
        let mut words = line.split_ascii_whitespace();
        let mut num = |what: &str| next_number(&mut words, what, line);
        let thread = usize::try_from(num("a thread")?).map_err(|e| e.to_string())?;
        let epoch = u32::try_from(num("an epoch")?).map_err(|e| e.to_string())?;
        let outcome = match words.next() {
            Some("ok") => Outcome::Committed,
            Some("aborted") => Outcome::Aborted,
            Some("indeterminate") => Outcome::Indeterminate,
            w => return Err(format!("`{}` is not an outcome: `{line}`", w.unwrap_or(""))),
        };
        let mut ops = Vec::new();
        while let Some(kind) = words.next() {
            let mut num = |what: &str| next_number(&mut words, what, line);
            match kind {
                "r" => {
                    let key = num("a key")?;
                    let n = num("a list length")?;
                    let list = (0..n).map(|_| num("a value")).collect::<Result<_, _>>()?;
                    ops.push(Op::Read { key, list });
                }
                "a" => {
                    let key = num("a key")?;
                    let value = num("a value")?;
                    ops.push(Op::Append { key, value });
                }
                w => return Err(format!("`{w}` is not an operation: `{line}`")),
            }
        }
        Ok(Txn {
            thread,
            epoch,
            outcome,
            ops,
        })
    }
}

/// The next word of a line of [`Txn::to_line`] as a number (`what` names it in the
/// error).
fn next_number<'a>(
    words: &mut impl Iterator<Item = &'a str>,
    what: &str,
    line: &str,
) -> Result<u64, String> {
    let w = words
        .next()
        .ok_or_else(|| format!("the line ends where {what} should be: `{line}`"))?;
    w.parse::<u64>()
        .map_err(|_| format!("`{w}` is not {what}: `{line}`"))
}

fn outcome_name(o: Outcome) -> &'static str {
    match o {
        Outcome::Committed => "ok",
        Outcome::Aborted => "aborted",
        Outcome::Indeterminate => "indeterminate",
    }
}

impl fmt::Display for Txn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let outcome = outcome_name(self.outcome);
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

    /// One history of the histories of several processes (or any runs that shared a
    /// pool): their transactions one after another, so every transaction has its own
    /// id, and their threads numbered apart: the threads of each part follow those of
    /// the parts before it (a part's thread `t` becomes `t` plus one more than the
    /// highest thread number of the merged parts before it).
    pub fn merge(parts: impl IntoIterator<Item = History>) -> History {
        let mut out = History::new();
        let mut first_thread = 0;
        for part in parts {
            let next = part
                .txns
                .iter()
                .map(|t| first_thread + t.thread + 1)
                .max()
                .unwrap_or(first_thread);
            out.txns.extend(part.txns.into_iter().map(|mut t| {
                t.thread += first_thread;
                t
            }));
            first_thread = next;
        }
        out
    }

    /// Decide every indeterminate transaction from what the others read: committed if
    /// another transaction read one of its appends, aborted otherwise. Returns how many
    /// became each (committed, aborted).
    ///
    /// For histories where an indeterminate transaction may also never have taken
    /// effect at all, before any recovery: a process killed in the middle of its
    /// commit while the others ran (a pool shared by processes), whose commit the
    /// others' recovery of it finished or undid. Judged as committed-in-its-epoch (the
    /// meaning of [`Outcome::Indeterminate`]) an undone one would form false cycles
    /// with the transactions that went on without it. The history must read every key
    /// after the last of them (as `sicheck --processes` does): a transaction that
    /// committed is then read by someone, so "not read" means "not committed"; and one
    /// that is read in part becomes committed, so the appends nobody read are then
    /// lost writes.
    pub fn resolve_indeterminate_by_reads(&mut self) -> (usize, usize) {
        let mut read_by: std::collections::HashMap<Value, Vec<TxnId>> = Default::default();
        for (id, t) in self.txns.iter().enumerate() {
            for op in &t.ops {
                if let Op::Read { list, .. } = op {
                    for v in list {
                        let readers = read_by.entry(*v).or_default();
                        if readers.last() != Some(&id) {
                            readers.push(id);
                        }
                    }
                }
            }
        }
        let (mut committed, mut aborted) = (0, 0);
        for id in 0..self.txns.len() {
            if self.txns[id].outcome != Outcome::Indeterminate {
                continue;
            }
            let seen = self.txns[id].appends().any(|(_, v)| {
                read_by
                    .get(&v)
                    .is_some_and(|readers| readers.iter().any(|&r| r != id))
            });
            self.txns[id].outcome = if seen {
                committed += 1;
                Outcome::Committed
            } else {
                aborted += 1;
                Outcome::Aborted
            };
        }
        (committed, aborted)
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
