//! The `bare` engine: the physical limit that read paths are measured against.
//!
//! The same pool format, allocator and containers, with no transactional
//! instrumentation: a read is the validated pointer to the home object, a write is a
//! store into it. Isolation comes from one reader-writer lock with a reader indicator
//! per thread slot ([`gate`]), so readers share no counter (no cache line bounces
//! between reading threads): a transaction begins as a reader and becomes the writer
//! at its first write, alloc or free. Nothing is persisted: not crash-safe, like
//! `volatile`, and not meant for data.
//!
//! Decisions:
//! * Upgrading to writer never waits for another would-be writer: if the writer word is
//!   taken, the attempt fails with a conflict and `run` retries it (two readers that
//!   both want to upgrade cannot deadlock). The new writer then waits for the other
//!   readers to finish; they never wait for it while holding their indicator.
//! * The read fast path checks one word: a published allocation stores this run's
//!   live value (the run's header-word tag, low bit set) in the block's header word,
//!   and a published free clears it, both by the writer alone
//!   (`BareShared::mark_live`). A read then loads the word next to the payload
//!   instead of the slab's allocation bitmap on another cache line. Objects allocated
//!   in an earlier run keep an older tag and take the slow path (the bitmap); a run
//!   that reuses a tag clears every header word at start.
//! * A user abort must undo in-place writes, so the first write of an object copies its
//!   old bytes to DRAM (the only per-access cost beyond validation). Read-only
//!   transactions pay nothing but the indicator store and the writer check.
//! * No writer preference at the gate: a writer waits for the readers inside, and a
//!   reader that wants to upgrade loses to whichever writer took the word first. The
//!   attempts of a transaction are bounded by the fallback instead (below), which
//!   costs the fast paths nothing: a reader pays nothing, an upgrade two loads of a
//!   line written only by fallbacks.
//!
//! # Fallback
//! Without it, a transaction that reads, then writes (upgrades) late loses its
//! upgrade to a thread that writes in a loop on every attempt, for as long as that
//! thread runs. After [`THRESHOLD`](crate::engine::kit::cc::fallback::THRESHOLD)
//! conflict aborts in a row (counted from `run`'s `after_abort`), the next attempt
//! begins as the writer ([`gate::Gate::enter_fallback`]): it takes a ticket, waits
//! until its ticket is served, takes the writer word and waits for the readers inside.
//! While a ticket is pending, upgrades fail (conflict), so at most one writer per slot
//! that checked the tickets before ours comes first. Tickets are served in order. An
//! attempt that holds the writer word from `begin` conflicts with nothing, so it
//! commits unless its closure fails. A nested transaction never falls back (it must
//! not wait for the gate; `EngineThread::set_nested`).
//!
//! Isolation: one writer at a time and no reader beside it — serializable and
//! linearizable.
//!
//! # Under eADR
//! Nothing changes: the engine persists nothing, so it issues neither flush nor fence.
//!
//! # Parts
//! * [`gate`]: the reader-writer lock with per-slot reader indicators;
//! * [`shared`]: pool-wide state ([`shared::BareEngine`]);
//! * [`thread`]: one thread's transactions;
//! * no log and no recovery (nothing is persisted: a pool reopened after a crash has
//!   whatever reached the medium), no options (the engine refuses any).

mod gate;
mod shared;
mod thread;

#[cfg(test)]
mod tests;

use crate::engine::{EngineDef, EngineOptions, OpenCtx};
use crate::heap::Heap;
use crate::tx_options::Isolation;
use crate::Result;
use shared::BareEngine;
use std::sync::Arc;
use thread::BareThread;

/// Registry entry of the `bare` engine.
pub(crate) struct Bare;

impl EngineDef for Bare {
    const ID: u32 = 9;
    const SHARING_REFUSED: Option<&'static str> = Some(
        "a process that dies while writing leaves in-place writes that only its own undo buffer could roll back: a process death is a crash, which bare does not survive",
    );
    const NAME: &'static str = "bare";
    const SUMMARY: &'static str =
        "reference: no transactional instrumentation, a reader-writer lock with per-thread reader indicators, no persistence (the physical limit; not crash-safe)";
    const ISOLATION: Isolation = Isolation::Linearizable;
    const DURABLE: bool = false;
    /// The reference the default engine is measured against.
    const INLINE_DISPATCH: bool = true;
    type Engine = BareEngine;
    type Thread = BareThread;
    fn open(heap: Arc<Heap>, opts: &EngineOptions, _ctx: &OpenCtx) -> Result<BareEngine> {
        opts.only(Self::NAME, &[])?;
        BareEngine::start(heap)
    }
}
