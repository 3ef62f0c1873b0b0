//! `sicheck`: a black-box isolation checker in the style of Jepsen's Elle, and the
//! list-append workload that feeds it from a real pool.
//!
//! # The idea
//! Transactions run over a few keys, each an append-only list. A transaction is a
//! sequence of micro-operations: read a whole list, or append a value to one. Every
//! appended value is unique, so every value seen in a read names the one append that
//! put it there, and a read of `[a, b, c]` reveals the order of the first three
//! appends to its key. From the reads alone the checker recovers each key's *version
//! order*, then the dependencies between transactions (Adya's ww, wr and rw edges), and
//! searches the resulting graph for cycles. It sees only the [`History`], never the
//! engine, so it can judge any engine, and an engine bug cannot hide in shared code.
//!
//! # Modules, one concept each
//! * [`history`]: what is recorded — transactions, operations, outcomes, epochs;
//! * [`index`]: who wrote each value, external reads, internal consistency;
//! * [`local`]: anomalies visible in single reads and transactions (G1a, G1b, garbage,
//!   duplicates, internal, lost update);
//! * [`versions`]: version orders, incompatible orders, and what survives a crash;
//! * [`recovery`]: durability across crashes (lost writes, partial recovery);
//! * [`graph`]: the dependency graph, Tarjan components, shortest-cycle searches;
//! * [`checker`]: edges from orders and reads, cycle classification, the report;
//! * [`anomaly`]: anomaly classes, isolation levels, the [`Report`];
//! * [`store`]: how the lists live in a pool (the engine side);
//! * [`workload`]: the generator and recorder that run list-append transactions on a
//!   [`Pool`](pisces::Pool) from several threads, and the write-skew workload.
//!
//! # Several processes
//! Processes that open one pool shared each run a [`Workload`] with their own
//! [`WorkloadConfig::process`]: their values are apart, their keys shared (the pool
//! says which key of a slot is current). Each records its own history; a process hands
//! it to another as text ([`Txn::to_line`], [`Txn::from_line`]), and
//! [`History::merge`] joins them into one history, checked as any other. `pisces
//! sicheck --processes N` does this with N worker processes, then reads every key once
//! the last has closed the pool (recorded as after a recovery, so every committed
//! append must be there).
//!
//! # Isolation levels
//! Snapshot isolation forbids every class except G2-item (write skew: a cycle with two
//! adjacent anti-dependency edges); serializability forbids that too. See [`anomaly`]
//! for the table and for why a cycle with non-adjacent rw edges is forbidden under SI.
//!
//! # Crashes
//! A history may span crashes: each transaction carries the epoch it ran in. The
//! checker treats each recovery as a point every later transaction follows, requires
//! every acknowledged transaction (and everything one read from) to be visible after
//! it, and allows an indeterminate (unacknowledged) transaction to be lost, but only as
//! a whole. See [`recovery`] and [`versions`].
//!
//! ```
//! use pisces_verify::sicheck::{check, Anomaly, History, Isolation, Txn};
//! // Lost update: both read key 1 as [] and both append to it.
//! let h: History = [
//!     Txn::committed(0).r(1, &[]).a(1, 10),
//!     Txn::committed(1).r(1, &[]).a(1, 11),
//!     Txn::committed(2).r(1, &[10, 11]),
//! ]
//! .into_iter()
//! .collect();
//! let report = check(&h);
//! assert_eq!(report.count(Anomaly::LostUpdate), 1);
//! assert!(report.forbidden(Isolation::Snapshot) > 0);
//! ```

pub mod anomaly;
pub mod checker;
mod fasthash;
pub mod graph;
pub mod history;
pub mod index;
pub mod local;
pub mod recovery;
pub mod store;
pub mod versions;
pub mod workload;

pub use anomaly::{Anomaly, EdgeKind, Example, GraphStats, Isolation, Report, Step};
pub use checker::{check, check_with, CheckOptions};
pub use history::{History, Key, Op, Outcome, Txn, TxnId, Value};
pub use workload::{Journal, Workload, WorkloadConfig};
