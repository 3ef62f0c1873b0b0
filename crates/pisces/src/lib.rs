//! Pisces: persistent transactional memory with snapshot isolation.
//!
//! Programs keep their data structures in a persistent heap (a pool file mapped into
//! memory) and change them in ACID transactions that survive crashes and run
//! concurrently. The default engine is Pisces (USENIX ATC 2019): dual-version
//! concurrency control and a three-stage commit, so readers never wait for persistent
//! memory.
//!
//! Layers, bottom up: [`medium`] (bytes and durability), [`heap`] (pool layout,
//! `PPtr`, allocator), [`engine`] (concurrency control and logging), and the
//! transaction API ([`Pool`], [`Tx`]).
#![warn(missing_docs)]

pub mod check;
mod config;
pub mod containers;
pub mod engine;

pub mod error;
pub mod explicit;
pub(crate) mod fasthash;
pub mod heap;
pub mod medium;
pub mod mutation;
mod nesting;
pub mod ops;
pub mod pool;
mod sync;
pub mod tx;
mod tx_options;

pub use config::Config;
pub use containers::{BTreeMap, HashMap};
pub use engine::{EngineId, EngineOptions, PiscesOptions};
pub use error::{Error, Result};
pub use explicit::ExplicitTx;
pub use heap::pptr::PPtr;
pub use medium::MediumKind;
pub use ops::Operations;
pub use pool::{Pool, ThreadHandle};
pub use tx::{Tx, TxStats};
pub use tx_options::{Durability, Isolation, TxOptions};

/// Derive macros and traits for types stored in a pool.
pub use bytemuck::{Pod, Zeroable};
