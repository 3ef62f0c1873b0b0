//! Engines: concurrency control and logging over a [`Heap`].
//!
//! An engine is chosen when a pool is created; its id is recorded in the superblock.
//! Every engine implements [`Engine`] (pool-wide state, recovery) and hands out one
//! [`EngineThread`] per registered thread (that thread's transaction state). The
//! transaction API in [`crate::tx`] is written only against these two traits, so the
//! baselines and the later SP3 / SPHT / TimeStone engines run the same programs.
//!
//! # Contract for implementors
//! Offsets passed in are payload offsets validated by the engine itself (user input).
//! `read` returns a pointer valid for reads of `len` bytes until the transaction ends or
//! until the next `write` / `alloc` / `free` call of the same thread (the API borrows
//! the transaction mutably for those, so no reference outlives them); the bytes behind
//! it must not change while that holds. `write` returns a pointer valid for reads and
//! writes of `len` bytes under the same rule, to memory no other thread reads or writes
//! until commit.

pub(crate) mod kit;
pub mod mvcc;
pub mod pisces;
pub mod pmdk;
pub mod undo;

use crate::heap::Heap;
use crate::Result;
pub(crate) use kit::objects::ROOT_SLOT_PAYLOAD;
use std::sync::Arc;

/// Identifies an engine in the superblock.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum EngineId {
    /// Pisces (USENIX ATC 2019), the default.
    Pisces = 1,
    /// Baseline: undo logging with two-phase locking.
    Undo = 2,
    /// Baseline: the multi-version strawman of the paper's §2.2 (version lists per
    /// object, readers block on objects locked by a committing writer).
    Mvcc = 3,
    /// Baseline: Pisces' concurrency control without any persistence (upper bound).
    Volatile = 4,
    /// Peer: PMDK's libpmemobj through FFI (its own pool file, allocator and undo-log
    /// transactions, per-object locks for isolation). Needs the `pmdk` cargo feature.
    Pmdk = 5,
}

impl EngineId {
    /// Every engine, in benchmark order.
    pub const ALL: [EngineId; 5] = [
        EngineId::Pisces,
        EngineId::Undo,
        EngineId::Mvcc,
        EngineId::Pmdk,
        EngineId::Volatile,
    ];

    /// Stable name.
    pub fn name(self) -> &'static str {
        match self {
            EngineId::Pisces => "pisces",
            EngineId::Undo => "undo",
            EngineId::Mvcc => "mvcc",
            EngineId::Volatile => "volatile",
            EngineId::Pmdk => "pmdk",
        }
    }
    /// From a name given on the command line or in a config.
    pub fn from_name(name: &str) -> Option<EngineId> {
        match name {
            "pisces" => Some(EngineId::Pisces),
            "undo" => Some(EngineId::Undo),
            "mvcc" => Some(EngineId::Mvcc),
            "volatile" => Some(EngineId::Volatile),
            "pmdk" => Some(EngineId::Pmdk),
            _ => None,
        }
    }
    /// From the id stored in a superblock.
    pub fn from_u32(id: u32) -> Option<EngineId> {
        match id {
            1 => Some(EngineId::Pisces),
            2 => Some(EngineId::Undo),
            3 => Some(EngineId::Mvcc),
            4 => Some(EngineId::Volatile),
            5 => Some(EngineId::Pmdk),
            _ => None,
        }
    }
    /// Name for an id read from a pool, known or not.
    pub fn describe(id: u32) -> String {
        Self::from_u32(id).map_or_else(|| format!("unknown engine #{id}"), |e| e.name().to_string())
    }
}

/// Engine options that are not part of the pool format.
#[derive(Clone, Copy, Debug)]
pub struct EngineOptions {
    /// Log only changed words (flush-diff, §4) instead of whole objects.
    pub flush_diff: bool,
    /// Batch the write-back of up to this many transactions per thread (1 = off).
    pub group_commit: usize,
}

impl Default for EngineOptions {
    fn default() -> Self {
        EngineOptions {
            flush_diff: true,
            group_commit: 8,
        }
    }
}

/// Pool-wide state of an engine.
pub trait Engine: Send + Sync {
    /// Which engine this is.
    fn id(&self) -> EngineId;
    /// State for thread slot `slot` (unique among live threads, `< max_threads`).
    fn thread(&self, slot: usize) -> Result<Box<dyn EngineThread>>;
    /// Finish deferred work (pending write-backs) so the pool can be closed.
    fn quiesce(&self);
    /// The heap the engine works on; `None` for an engine that brings its own pool
    /// format (`pmdk`).
    fn heap(&self) -> Option<&Arc<Heap>>;
    /// Payload offset of the pool's 16-byte root slot (where the root object's offset
    /// and size are kept).
    fn root_slot(&self) -> u64 {
        ROOT_SLOT_PAYLOAD
    }
    /// Make everything committed durable now (e.g. msync of a file medium).
    fn sync(&self) -> Result<()> {
        self.heap().map_or(Ok(()), |h| h.medium().sync_all())
    }
}

/// One thread's transaction state. At most one transaction runs per thread at a time.
pub trait EngineThread: Send {
    /// Start a transaction.
    fn begin(&mut self);
    /// Pointer to the version of the object at `off` (payload offset, `len` bytes) this
    /// transaction must see. Err(Conflict) if the engine must abort.
    fn read(&self, off: u64, len: usize) -> Result<*const u8>;
    /// Pointer to this transaction's private, writable version of the object.
    fn write(&mut self, off: u64, len: usize) -> Result<*mut u8>;
    /// Allocate an object with `len` payload bytes; returns its payload offset. Its
    /// content is writable through `write` and zeroed.
    fn alloc(&mut self, len: usize) -> Result<u64>;
    /// Free the object at `off` when the transaction commits.
    fn free(&mut self, off: u64) -> Result<()>;
    /// Commit. On `Err`, the transaction has been rolled back.
    fn commit(&mut self) -> Result<()>;
    /// Roll back.
    fn abort(&mut self);
    /// Called by `run` after a conflict abort, before the retry, outside any
    /// transaction: an engine may help the transaction it conflicted with here.
    fn after_abort(&mut self) {}
    /// Push out deferred work of this thread (group commit); called when a thread
    /// unregisters.
    fn quiesce(&mut self);
}
