//! One thread's `bare` transactions: a reader of the gate from `begin`, the writer from
//! the first write, alloc or free; writes in place, their old bytes kept in DRAM for
//! an abort (module docs).

use super::shared::BareShared;
use crate::engine::kit::cc::fallback::Retries;
use crate::engine::kit::fast_reads::{FastPath, FastReads, OwnedFastReads};
use crate::engine::kit::validate::{locate_block_to_free, locate_object, root_object};
use crate::engine::{DurableToken, EngineThread};
use crate::heap::alloc::{Block, ThreadCache, HEADER};
use crate::tx_options::TxOptions;
use crate::{Error, Result};
use std::sync::Arc;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum State {
    Idle,
    Reading,
    Writing,
    /// The writer from `begin`, by a fallback ticket (module docs, *Fallback*).
    Fallback,
    /// A nested transaction that found the gate held by a writer: it does not wait
    /// (see `EngineThread::set_nested`), every access and the commit conflict.
    Shut,
}

/// One thread's state.
pub(crate) struct BareThread {
    sh: Arc<BareShared>,
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
    fast: OwnedFastReads,
    /// Transactions run nested in another pool's ([`EngineThread::set_nested`]).
    nested: bool,
    /// Conflict aborts in a row of the transaction `run` retries (module docs,
    /// *Fallback*).
    retries: Retries,
}

impl BareThread {
    /// State for `slot` (one live state per slot).
    pub(super) fn new(sh: Arc<BareShared>, slot: usize) -> BareThread {
        // SAFETY: the allocator lives in `sh`, which the thread state holds and which
        // outlives every transaction (`fast_reads` hands the value out only while one
        // runs); a header word equal to `sh.live` means allocated for the whole
        // attempt (`BareShared::mark_live`: only the writer changes it, and no reader
        // runs beside the writer), and `read` returns home for every live object.
        let fast = OwnedFastReads::new(unsafe { FastReads::live_word(&sh.alloc, sh.live) });
        BareThread {
            fast,
            sh,
            slot,
            state: State::Idle,
            undo: Vec::new(),
            undo_bytes: Vec::new(),
            allocs: Vec::new(),
            frees: Vec::new(),
            cache: ThreadCache::default(),
            nested: false,
            retries: Retries::default(),
        }
    }

    fn running(&self) -> Result<()> {
        match self.state {
            State::Idle => Err(Error::invalid_argument(
                "no transaction is running on this thread",
            )),
            State::Shut => Err(Error::Conflict),
            State::Reading | State::Writing | State::Fallback => Ok(()),
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
            self.sh.mark_live(b);
        }
        for b in self.frees.drain(..) {
            self.sh.mark_freed(b);
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
            State::Fallback => self.sh.gate.leave_fallback(),
        }
        self.state = State::Idle;
        self.undo.clear();
        self.undo_bytes.clear();
    }
}

impl EngineThread for BareThread {
    fn slot(&self) -> usize {
        self.slot
    }
    #[inline]
    fn begin(&mut self, _opts: &TxOptions) {
        // The previous transaction ended (the common case): nothing to end.
        if self.state != State::Idle {
            self.end();
        }
        if self.retries.begin() && !self.nested {
            self.begin_fallback();
            return;
        }
        if self.nested {
            self.begin_nested();
            return;
        }
        self.sh.gate.enter_read(self.slot);
        self.state = State::Reading;
    }

    fn after_abort(&mut self) {
        self.retries.after_abort();
    }

    // Inlined into its own out-of-line caller (`registry::read_of`), the one
    // function through which `Tx` reads what its fast path declines.
    #[inline(always)]
    fn read(&self, off: u64, len: usize) -> Result<*const u8> {
        self.running()?;
        let (header, _) = locate_object(&self.sh.alloc, off, len, |b| self.allocs.contains(&b))?;
        // SAFETY: `locate_object` validated the object (header word, then at least
        // `len` payload bytes) inside the image.
        Ok(unsafe { self.sh.heap.ptr(header as usize + HEADER) })
    }

    #[inline]
    fn fast_reads(&mut self) -> FastPath {
        if matches!(self.state, State::Idle | State::Shut) {
            return FastPath::NONE;
        }
        // SAFETY: `fast` is never changed, and lives as long as this state, which the
        // `Tx` the path goes to borrows.
        unsafe { self.fast.path() }
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
            return Err(Error::invalid_pointer(format!(
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
        if matches!(self.state, State::Writing | State::Fallback) {
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
    /// `begin` of a retry after repeated conflicts: the writer for the whole attempt
    /// (module docs, *Fallback*). A nested transaction never falls back: it must not
    /// wait for the gate (`EngineThread::set_nested`).
    #[cold]
    #[inline(never)]
    fn begin_fallback(&mut self) {
        self.sh.gate.enter_fallback(self.slot);
        self.state = State::Fallback;
    }

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
