//! The `undo` baseline: undo logging with two-phase locking (the design class of
//! Mnemosyne, NV-Heaps, Kamino-Tx and DCT that Pisces argues against).
//!
//! * **Locks.** The object's header word is a reader-writer lock: `tag | EXCLUSIVE |
//!   owner` or `tag | reader count` (the tag is the run generation, as in Pisces, so
//!   locks left by a crash read as free). Locks are taken on first access and held to
//!   commit (strict 2PL). A conflicting access aborts at once (no-wait: no deadlock)
//!   and `run` retries after a randomized back-off. So readers *do* wait for writers —
//!   that is the point of the baseline.
//! * **Undo log.** Before the first in-place write of an object, its old contents are
//!   appended to the thread's log as one checksummed entry and persisted (one fence per
//!   object written, as in PMDK's `pmemobj_tx_add_range`). The transaction then writes
//!   home directly.
//! * **Commit.** Flush every written object and the allocator's changes, fence; then
//!   persist the thread's commit marker (the transaction's sequence number): one more
//!   fence. Release the locks.
//! * **Abort / recovery.** Restore the logged old contents in reverse order, undo
//!   allocator changes, persist, then the commit marker. Recovery does this for every
//!   thread whose log holds entries newer than its commit marker. In-flight
//!   transactions of different threads hold exclusive locks on disjoint objects, so
//!   their undo order does not matter.
//!
//! # Invariants
//! 1. An object's undo entry is durable before its first in-place change (the entry's
//!    fence precedes the write), so a crash never leaves a change recovery cannot undo.
//! 2. The commit marker is set after the transaction's changes are flushed and fenced:
//!    a transaction at or below the marker is complete at home.
//! 3. Locks are released only after the marker, so no transaction reads a change that
//!    a crash could undo.
//!
//! # Under eADR
//! The medium's flush writes nothing back; every fence stays. The undo entry's fence drains the entry before the first in-place store (a store still
//! in the store buffer is not yet in the persistent caches, and the entry must be
//! durable before the change it undoes can be); the commit's fence does the same for
//! the transaction's changes before the marker, and the marker's fence before the
//! transaction is acknowledged. Nothing in this engine pays off only under ADR: its
//! cost there is the flushes, which eADR removes.
//!
//! # Parts
//! * [`log`]: the per-slot undo log (entries, commit marker) and its parser;
//! * [`recovery`]: rolls back what a crash left unfinished;
//! * [`shared`]: pool-wide state ([`shared::UndoEngine`]);
//! * [`thread`]: one thread's transactions;
//! * no options (the engine refuses any) and no DRAM versions.

mod log;
mod recovery;
mod shared;
mod thread;

#[cfg(test)]
mod tests;

use crate::engine::{EngineDef, EngineOptions, OpenCtx};
use crate::heap::Heap;
use crate::tx_options::Isolation;
use crate::Result;
use shared::UndoEngine;
use std::sync::Arc;
use thread::UndoThread;

/// Registry entry of the `undo` baseline.
pub(crate) struct Undo;

impl EngineDef for Undo {
    const ID: u32 = 2;
    const SHARING_REFUSED: Option<&'static str> = Some(
        "its table of held locks lives in the memory of one process (a reader count does not say whose readers they are)",
    );
    const NAME: &'static str = "undo";
    const SUMMARY: &'static str = "baseline: undo logging with strict two-phase locking (no-wait)";
    // Strict 2PL: every lock is held to commit, so the commit order is a serial order
    // that respects real time.
    const ISOLATION: Isolation = Isolation::Linearizable;
    type Engine = UndoEngine;
    type Thread = UndoThread;
    fn open(heap: Arc<Heap>, opts: &EngineOptions, _ctx: &OpenCtx) -> Result<UndoEngine> {
        opts.only(Self::NAME, &[])?;
        UndoEngine::open(heap)
    }
}
