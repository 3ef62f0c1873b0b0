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
//! * A user abort must undo in-place writes, so the first write of an object copies its
//!   old bytes to DRAM (the only per-access cost beyond validation). Read-only
//!   transactions pay nothing but the indicator store and the writer check.
//! * Writers may starve under a steady stream of readers (no writer preference): this
//!   engine is a reference for read paths, not a fair lock.
//!
//! Isolation: one writer at a time and no reader beside it — serializable and
//! linearizable.

mod gate;

use crate::engine::kit::fast_reads::FastReads;
use crate::engine::kit::validate::{locate_block_to_free, locate_object, root_object};
use crate::engine::{DurableToken, Engine, EngineDef, EngineOptions, EngineThread, OpenCtx};
use crate::heap::alloc::{Allocator, Block, ThreadCache, HEADER};
use crate::heap::Heap;
use crate::tx_options::{Isolation, TxOptions};
use crate::{Error, Result};
use gate::Gate;
use std::sync::Arc;

/// Registry entry of the `bare` engine.
pub struct Bare;

impl EngineDef for Bare {
    const ID: u32 = 9;
    const NAME: &'static str = "bare";
    const SUMMARY: &'static str =
        "reference: no transactional instrumentation, a reader-writer lock with per-thread reader indicators, no persistence (the physical limit; not crash-safe)";
    const ISOLATION: Isolation = Isolation::Linearizable;
    const DURABLE: bool = false;
    type Engine = BareEngine;
    type Thread = BareThread;
    fn open(heap: Arc<Heap>, opts: &EngineOptions, _ctx: &OpenCtx) -> Result<BareEngine> {
        opts.only(Self::NAME, &[])?;
        let alloc = Arc::new(Allocator::rebuild(heap.clone())?);
        let gate = Gate::new(heap.layout().max_threads);
        Ok(BareEngine {
            sh: Arc::new(Shared { heap, alloc, gate }),
        })
    }
}

struct Shared {
    heap: Arc<Heap>,
    alloc: Arc<Allocator>,
    gate: Gate,
}

/// Pool-wide state of the `bare` engine.
pub(crate) struct BareEngine {
    sh: Arc<Shared>,
}

impl Engine for BareEngine {
    type Thread = BareThread;
    fn thread(&self, slot: usize) -> Result<BareThread> {
        if slot >= self.sh.gate.slots() {
            return Err(Error::TooManyThreads(self.sh.gate.slots()));
        }
        // SAFETY: the allocator lives in `sh`, which the thread state holds and which
        // outlives every transaction (`fast_reads` hands the value out only while one
        // runs); `read` returns home for every live object (no header locks here).
        let fast = unsafe { FastReads::bitmap(&self.sh.alloc) };
        Ok(BareThread {
            fast,
            sh: self.sh.clone(),
            slot,
            state: State::Idle,
            undo: Vec::new(),
            undo_bytes: Vec::new(),
            allocs: Vec::new(),
            frees: Vec::new(),
            cache: ThreadCache::default(),
            nested: false,
        })
    }
    fn quiesce(&self) {}
    fn heap(&self) -> Option<&Arc<Heap>> {
        Some(&self.sh.heap)
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum State {
    Idle,
    Reading,
    Writing,
    /// A nested transaction that found the gate held by a writer: it does not wait
    /// (see `EngineThread::set_nested`), every access and the commit conflict.
    Shut,
}

/// One thread's state.
pub(crate) struct BareThread {
    sh: Arc<Shared>,
    slot: usize,
    state: State,
    /// Each object written in place (payload offset, length), for abort; their old
    /// bytes are `undo_bytes`, back to back in the same order. Both keep their
    /// capacity from one transaction to the next: no allocation per write.
    undo: Vec<(u64, usize)>,
    undo_bytes: Vec<u8>,
    allocs: Vec<Block>,
    frees: Vec<Block>,
    cache: ThreadCache,
    /// The read fast path every transaction hands out (the allocator's geometry does
    /// not change while `sh` lives).
    fast: FastReads,
    /// Transactions run nested in another pool's ([`EngineThread::set_nested`]).
    nested: bool,
}

impl BareThread {
    fn running(&self) -> Result<()> {
        match self.state {
            State::Idle => Err(Error::InvalidArgument(
                "no transaction is running on this thread".into(),
            )),
            State::Shut => Err(Error::Conflict),
            State::Reading | State::Writing => Ok(()),
        }
    }

    /// Become the writer (first write, alloc or free of the transaction).
    fn upgrade(&mut self) -> Result<()> {
        self.running()?;
        if self.state == State::Reading {
            if !self.sh.gate.upgrade(self.slot) {
                return Err(Error::Conflict);
            }
            self.state = State::Writing;
        }
        Ok(())
    }

    /// `commit` of a writer, or of a reader that allocated or freed.
    #[inline(never)]
    fn commit_slow(&mut self) -> Result<DurableToken> {
        self.running()?;
        for b in self.allocs.drain(..) {
            self.sh.alloc.publish_alloc(b);
        }
        for b in self.frees.drain(..) {
            self.sh.alloc.publish_free(b);
            // No reader is active while we write, and none can start before we end.
            self.sh.alloc.release(&mut self.cache, b);
        }
        self.end();
        Ok(DurableToken::DURABLE)
    }

    fn end(&mut self) {
        match self.state {
            State::Idle | State::Shut => {}
            State::Reading => self.sh.gate.leave_read(self.slot),
            State::Writing => self.sh.gate.leave_write(),
        }
        self.state = State::Idle;
        self.undo.clear();
        self.undo_bytes.clear();
    }
}

impl EngineThread for BareThread {
    #[inline]
    fn begin(&mut self, _opts: &TxOptions) {
        // The previous transaction ended (the common case): nothing to end.
        if self.state != State::Idle {
            self.end();
        }
        if self.nested {
            self.begin_nested();
            return;
        }
        self.sh.gate.enter_read(self.slot);
        self.state = State::Reading;
    }

    #[inline]
    fn read(&self, off: u64, len: usize) -> Result<*const u8> {
        self.running()?;
        let (header, _) = locate_object(&self.sh.alloc, off, len, |b| self.allocs.contains(&b))?;
        // SAFETY: `locate_object` validated the object (header word, then at least
        // `len` payload bytes) inside the image.
        Ok(unsafe { self.sh.heap.ptr(header as usize + HEADER) })
    }

    #[inline]
    fn fast_reads(&self) -> FastReads {
        if matches!(self.state, State::Idle | State::Shut) {
            return FastReads::NONE;
        }
        self.fast
    }

    fn write(&mut self, off: u64, len: usize) -> Result<*mut u8> {
        self.upgrade()?;
        let allocs = &self.allocs;
        let (header, plen) = locate_object(&self.sh.alloc, off, len, |b| allocs.contains(&b))?;
        let payload = header + HEADER as u64;
        if !self.undo.iter().any(|(o, _)| *o == payload)
            && !self.allocs.iter().any(|b| b.payload() == payload)
        {
            let start = self.undo_bytes.len();
            self.undo_bytes.resize(start + plen, 0);
            self.sh
                .heap
                .read_bytes(payload as usize, &mut self.undo_bytes[start..]);
            self.undo.push((payload, plen));
        }
        // SAFETY: validated payload inside the image; we are the only writer and no
        // reader is active (the gate), so nothing else accesses it until we end.
        Ok(unsafe { self.sh.heap.ptr(payload as usize) })
    }

    fn alloc(&mut self, len: usize) -> Result<u64> {
        self.upgrade()?;
        let b = self.sh.alloc.reserve(&mut self.cache, len)?;
        self.sh
            .heap
            .write_zeros(b.payload() as usize, b.payload_len() & !7);
        self.allocs.push(b);
        Ok(b.payload())
    }

    fn free(&mut self, off: u64) -> Result<()> {
        self.upgrade()?;
        let root = root_object(|o, l| self.read(o, l))?;
        let allocs = &self.allocs;
        let b = locate_block_to_free(&self.sh.alloc, off, root, |b| allocs.contains(&b))?;
        if self.frees.contains(&b) {
            return Err(Error::InvalidPointer(format!(
                "object {off:#x} freed twice"
            )));
        }
        if let Some(i) = self.allocs.iter().position(|a| *a == b) {
            self.allocs.swap_remove(i);
            self.sh.alloc.unreserve(&mut self.cache, b);
            return Ok(());
        }
        self.frees.push(b);
        Ok(())
    }

    #[inline]
    fn commit(&mut self) -> Result<DurableToken> {
        // A reader (it wrote, allocated and freed nothing: each of those makes it the
        // writer first) only leaves the gate; the rest is out of line.
        if self.state == State::Reading {
            debug_assert!(self.allocs.is_empty() && self.frees.is_empty() && self.undo.is_empty());
            self.sh.gate.leave_read(self.slot);
            self.state = State::Idle;
            return Ok(DurableToken::DURABLE);
        }
        if self.state == State::Shut {
            self.state = State::Idle;
            return Err(Error::Conflict);
        }
        self.commit_slow()
    }

    fn abort(&mut self) {
        if self.state == State::Writing {
            // Newest first: the bytes of the last entry are the last ones.
            let mut end = self.undo_bytes.len();
            for &(off, len) in self.undo.iter().rev() {
                let start = end - len;
                self.sh
                    .heap
                    .write_bytes(off as usize, &self.undo_bytes[start..end]);
                end = start;
            }
            for b in self.allocs.drain(..) {
                self.sh.alloc.unreserve(&mut self.cache, b);
            }
            self.frees.clear();
        }
        self.end();
    }

    fn set_nested(&mut self, nested: bool) {
        self.nested = nested;
    }

    fn quiesce(&mut self) {
        self.abort();
        self.sh.alloc.drain(&mut self.cache);
    }
}

impl BareThread {
    /// `begin` of a nested transaction: enter the gate only if no writer holds it.
    #[cold]
    fn begin_nested(&mut self) {
        self.state = if self.sh.gate.try_enter_read(self.slot) {
            State::Reading
        } else {
            State::Shut
        };
    }
}

impl Drop for BareThread {
    fn drop(&mut self) {
        self.quiesce();
    }
}
