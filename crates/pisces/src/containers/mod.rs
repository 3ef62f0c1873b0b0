//! Persistent containers built on the transaction API: [`HashMap`] and [`BTreeMap`].
//!
//! Both are written only against [`Tx`](crate::Tx) (`read`, `write`, `alloc`, `free`),
//! so they work on every engine, and every operation takes the running transaction:
//! several container operations, and any other object changes, commit or roll back
//! together. A container handle is 8 bytes of plain data (`Pod`): keep it in the root
//! object or inside other persistent objects. Keys and values are `Pod` types with
//! alignment at most 8 (like everything stored in a pool).
//!
//! * [`HashMap<K, V>`]: chained buckets whose heads are split into 256-byte chunk
//!   objects, a fixed number of them or growing by linear hashing; growable maps of
//!   small entries (key and value in two words) are open-addressed groups of 7 tagged
//!   slots instead, so a lookup reads the header and one group (see [`hashmap`]).
//! * [`BTreeMap<K, V, FANOUT>`]: a B+-tree with leaf links for range scans; `FANOUT`
//!   (default 16) is a const generic (see [`btree`]).
//!
//! * [`PBytes`], [`PString`], [`PVec`]: variable-size values, one-word handles to
//!   blocks they own (see [`bytes`] and [`vec`](mod@vec)); a [`BTreeMap`] keyed by byte
//!   strings owns its keys ([`TreeKey`]); [`owning`] says who frees what a value owns.
//!
//! # Snapshot isolation
//! Pisces gives snapshot isolation, which allows write skew: two transactions that read
//! overlapping data and write disjoint objects can both commit. The containers follow
//! §5.1 of the paper so that their own invariants survive that: read operations never
//! write, and an update writes (and so locks) every node whose content it relies on or
//! changes — including a node it is about to unlink and free — so that conflicting
//! updates meet in a write-write conflict and one of them retries. The module docs of
//! [`hashmap`] and [`btree`] give the argument for each operation. Application-level
//! invariants that span several keys still need the usual SI care.
//!
//! The containers read a node, decide, and then write it; they rely on what every
//! engine guarantees: `write` gives the object's version in the transaction's snapshot,
//! or the transaction aborts (first-committer-wins under SI; under two-phase locking
//! the read lock makes the two the same version).
//!
//! # Costs
//! A read is one `tx.read` per object visited and no copying (values can be borrowed
//! with `get_ref`); no allocation happens on read paths. One counter written by every
//! insert and remove would make all concurrent writers conflict, so each container
//! keeps its element count in 32 stripes (the `count` module): a writer adds to its
//! thread's stripe, `len` sums them (O(1) in the container's size).
//!
//! # Transactions
//! Reading operations take `&Tx`; updating ones take `&mut impl` [`TxAccess`](crate::TxAccess),
//! which both [`Tx`](crate::Tx) and [`ExplicitTx`](crate::ExplicitTx) are, so an explicit
//! transaction calls them directly. [`Entry`] (`entry`) is insert-or-update with
//! one search.
//!
//! # Node storage
//! A node's size depends on `K`, `V` (and `FANOUT`), but `bytemuck` cannot derive `Pod`
//! for generic structs and this module uses no `unsafe`, so nodes are stored as word
//! arrays `[u64; S]` with `S` taken from a fixed ladder of sizes, and keys and values are
//! viewed in place through checked casts. A node is at most 16 KiB.
//!
//! # Format stability
//! What the containers store is part of the pool format: the node layouts, the object
//! sizes (ladder), the magic numbers and, for the hash map, [`stable_hash`] and the
//! bucket mapping. Changing any of them makes existing pools' containers unreadable
//! (the header checks turn that into an error, not a misreading); unit tests pin the
//! hash values.
//!
//! # Limits
//! Headers and node kinds, counts and type signatures are checked on every access, so a
//! damaged pool or a handle used with the wrong types is an error, not undefined
//! behaviour or a panic. Walks along links (hash chains, the B+-tree's leaf chain)
//! detect cycles (Brent's algorithm, see [`walk`]) and return [`Error::Corrupt`](crate::Error::Corrupt)
//! instead of running forever; tree descents are bounded by the height. [`HashMap::check`]
//! and [`BTreeMap::check`] verify a whole container.
//!
//! # Iterators
//! * [`HashIter`] ([`HashMap::iter`]): every entry, bucket order then chain order.
//! * [`RangeIter`] ([`BTreeMap::iter`], [`BTreeMap::range`]): entries in key
//!   order, optionally limited to a key range, from either end (double-ended; a
//!   backward step descends from the root, as leaves are only chained forward).
//!
//! Both borrow the transaction immutably and yield `Result<(&K, &V)>` borrowed from it
//! (no copying): they read only, see the transaction's snapshot, and conflict with
//! nothing. An error (a damaged pool: a bad pointer, a cycle the walk guard finds) is
//! yielded once and ends the iteration.
//!
//! # Recognising containers
//! Each container's header object starts with a magic word ([`hashmap::MAGIC`],
//! [`btree::MAGIC`]) followed by a signature word holding the key and value sizes (and
//! the B+-tree's fanout), so a tool that knows neither `K` nor `V` can find a container
//! behind a pointer and walk it: `pisces check --deep` does that for the containers whose
//! handles are words of the root object (see `deep`).

pub(crate) mod btree;
pub(crate) mod bytes;
pub(crate) mod count;
#[cfg(any(test, feature = "tools"))]
pub(crate) mod deep;
mod entry;
mod hash;
pub(crate) mod hashmap;
pub(crate) mod key;
mod owning;
pub(crate) mod value_kind;
pub(crate) mod vec;
mod walk;
mod words;

pub use btree::{BTreeMap, RangeIter, TreeStats};
pub use bytes::{Owned, PBytes, PString};
pub use entry::Entry;
pub use hash::stable_hash;
pub use hashmap::{HashIter, HashMap, MapStats};
pub use key::TreeKey;
pub use vec::PVec;
