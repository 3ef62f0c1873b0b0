//! Pisces: persistent transactional memory with snapshot isolation.
//!
//! # Quick start
//! ```
//! use pisces::{BTreeMap, Config, HashMap, PPtr, Pool};
//!
//! pisces::pod! {
//!     /// The root object: found again by every run.
//!     struct Root {
//!         runs: u64,
//!         squares: HashMap<u64, u64>,
//!         log: BTreeMap<u64, u64>,
//!     }
//! }
//!
//! /// One run of a program: the first creates the pool, later ones open it (and
//! /// recover it, if the last run crashed).
//! fn run(path: &std::path::Path) -> pisces::Result<u64> {
//!     let pool = Pool::open_or_create(path, Config::new().size(32 << 20))?;
//!     let root: PPtr<Root> = pool.root()?; // zeroed on first use
//!     pool.run(|tx| {
//!         if tx.read(root)?.runs == 0 {
//!             let squares = HashMap::new(tx)?;
//!             let log = BTreeMap::new(tx)?;
//!             let r = tx.write(root)?;
//!             (r.squares, r.log) = (squares, log);
//!         }
//!         let r = tx.write(root)?; // a private copy until commit
//!         r.runs += 1;
//!         let (runs, squares, log) = (r.runs, r.squares, r.log);
//!         squares.insert(tx, runs, runs * runs)?;
//!         log.insert(tx, runs, 0)?;
//!         Ok(runs)
//!     }) // commits, or rolls back on `Err`; retried on conflict
//! }
//!
//! # fn main() -> pisces::Result<()> {
//! # let dir = tempfile::tempdir().unwrap();
//! let path = dir.path().join("quickstart.pool");
//! assert_eq!(run(&path)?, 1);
//! assert_eq!(run(&path)?, 2); // the first run's work is in the pool
//! # Ok(()) }
//! ```
//!
//! Programs keep their data structures in a persistent heap (a pool file mapped into
//! memory) and change them in ACID transactions that survive crashes and run
//! concurrently. The default engine is Pisces (USENIX ATC 2019): dual-version
//! concurrency control and a three-stage commit, so readers never wait for persistent
//! memory.
//!
//! The API is flat: a [`Pool`] (made from a [`Config`]) runs transactions ([`Tx`] in a
//! closure, [`ExplicitTx`] on a [`ThreadHandle`]) with [`TxOptions`]; objects are
//! [`PPtr`]s to [`Pod`] types; [`HashMap`] and [`BTreeMap`] are persistent containers;
//! [`PBytes`], [`PString`] and [`PVec`] hold variable-size data (see below);
//! [`EngineId`] picks the concurrency control and logging engine. The one extension
//! point is [`medium::Medium`], where the pool's bytes live and become durable.
//!
//! # Strings and vectors
//! Variable-size data lives in blocks owned by one-word handles, plain data like
//! [`PPtr`]: [`PBytes`] (a byte string that stores its length), [`PString`] (UTF-8,
//! checked on every read) and [`PVec`] (a growable vector). They are fields of `pod!`
//! structs and keys and values of the maps; a [`BTreeMap`] keyed by [`PString`] or
//! [`PBytes`] owns its keys, orders them by their bytes and is looked up by `&str` or
//! `&[u8]` ([`TreeKey`]). The maps' `insert` and `remove` hand the value they take out
//! back to the caller, who owns it; `insert_and_free`, `remove_and_free` and
//! `destroy_with_values` free what an [`Owned`] value owns.
//!
//! ```
//! use pisces::{BTreeMap, Config, HashMap, Owned, PPtr, PString, PVec, Pool, Tx};
//!
//! pisces::pod! {
//!     struct Item { due: u64, title: PString, tags: PVec<u32> }
//!     struct Root { items: HashMap<u64, Item>, by_title: BTreeMap<PString, u64> }
//! }
//!
//! impl Owned for Item {
//!     fn for_each_owned(&self, tx: &Tx<'_>, f: &mut dyn FnMut(u64)) -> pisces::Result<()> {
//!         self.title.for_each_owned(tx, f)?;
//!         self.tags.for_each_owned(tx, f)
//!     }
//! }
//!
//! # fn main() -> pisces::Result<()> {
//! # let dir = tempfile::tempdir().unwrap();
//! let pool = Pool::create(dir.path().join("items.pool"), Config::new().size(32 << 20))?;
//! let root: PPtr<Root> = pool.root()?;
//! pool.run(|tx| {
//!     let (items, by_title) = (HashMap::new(tx)?, BTreeMap::new(tx)?);
//!     *tx.write(root)? = Root { items, by_title };
//!     for (id, name) in [(1, "write the report"), (2, "buy milk")] {
//!         let title = PString::new(tx, name)?;
//!         let tags = PVec::new(tx)?;
//!         tags.push(tx, id as u32)?;
//!         items.insert(tx, id, Item { due: 10 * id, title, tags })?;
//!         by_title.insert_str(tx, name, id)?;
//!     }
//!     Ok(())
//! })?;
//! let first = pool.run(|tx| {
//!     let r = *tx.read(root)?;
//!     let (title, id) = r.by_title.first_key_value(tx)?.map(|(k, v)| (*k, *v)).unwrap(); // "buy milk" sorts first
//!     assert_eq!(r.items.get(tx, &id)?.unwrap().due, 20);
//!     let name = title.to_string(tx)?;
//!     r.by_title.remove(tx, name.as_str())?; // frees the key's block
//!     r.items.remove_and_free(tx, &id)?; // frees the title and the tags
//!     Ok(id)
//! })?;
//! assert_eq!(first, 2);
//! # Ok(()) }
//! ```
//!
//! Layers inside, bottom up: the medium (bytes and durability), the heap (pool
//! layout, allocator), the engines (concurrency control and logging, over a kit of
//! shared parts), the transaction API and the pool, the containers. Each depends only
//! on those below it.
#![warn(missing_docs)]
// A `pub` item is part of the API: the root re-exports it, or the tools' surface does.
// Checked where every surface is built (the workspace's instrumented build).
#![cfg_attr(all(feature = "tools", feature = "mutation"), warn(unreachable_pub))]

#[cfg(any(test, feature = "tools"))]
mod check;
mod config;
mod containers;
mod engine;
pub mod error;
mod explicit;
mod fasthash;
mod heap;
mod holder_lock;
pub mod medium;
#[cfg(feature = "mutation")]
#[doc(hidden)]
pub mod mutation;
mod region;
mod sidecar;
// Without the feature every switch reads as off and the setters are unused.
#[cfg(not(feature = "mutation"))]
#[allow(dead_code)]
mod mutation;
mod nesting;
mod ops;
mod peers;
mod pod;
mod pool;
mod sync;
#[cfg(feature = "tools")]
pub mod tools;
mod tx;
mod tx_options;

/// The crate's README (its page on the registry): its example compiles.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeExample;

pub use config::{Config, Sharing};
pub use containers::{
    stable_hash, BTreeMap, Entry, HashIter, HashMap, MapStats, Owned, PBytes, PString, PVec,
    RangeIter, TreeKey, TreeStats,
};
pub use engine::{
    EngineId, EngineOptions, PiscesOptions, Sp3Options, SphtClock, SphtMarker, SphtOptions,
    SphtReplay, TimestoneOptions,
};
pub use error::{Error, Result};
pub use explicit::ExplicitTx;
pub use heap::pptr::PPtr;
pub use medium::{MediumKind, PersistenceDomain, PoolDurability, Survives};
pub use ops::Operations;
pub use pool::{Pool, ThreadHandle};
pub use tx::{Tx, TxAccess, TxStats};
pub use tx_options::{Durability, Isolation, TxOptions};

/// The trait of types stored in a pool: plain data, any bit pattern valid, no padding.
///
/// Declare your own with [`pod!`], which needs no other dependency. (The derive macro
/// re-exported under this name expands to paths of the `bytemuck` crate: it compiles
/// only where `bytemuck` is a dependency of your crate too.)
pub use bytemuck::Pod;
/// The trait of types whose all-zero bytes are a valid value (every [`Pod`] type).
///
/// [`pod!`] implements it; the derive macro re-exported under this name needs
/// `bytemuck` as a dependency of your crate, as [`Pod`]'s does.
pub use bytemuck::Zeroable;
