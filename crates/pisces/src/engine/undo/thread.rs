//! One thread's `undo` transactions: strict two-phase locking on header words, an undo
//! entry persisted before each first in-place change, the commit marker after the
//! flushed changes (module docs).

use super::log::{entry_header, ENTRIES_OFFSET, ENTRY_HDR, K_ALLOC, K_DATA, K_FREE};
use super::shared::UndoShared;
use crate::engine::kit::cc::two_phase::{HeldLocks, Mode};
use crate::engine::kit::rollback::Rollback;
use crate::engine::kit::validate::running;
use crate::engine::EngineThread;
use crate::heap::alloc::{Block, ThreadCache, HEADER};
use crate::heap::ROOT_SLOT_OFFSET;
use crate::medium::counters;
use crate::{Error, Result};
use std::sync::atomic::Ordering::Release;
use std::sync::Arc;

/// One thread's transactions.
pub(crate) struct UndoThread {
    sh: Arc<UndoShared>,
    slot: usize,
    area: usize,
    area_len: usize,
    /// Sequence number of the running (or last) transaction.
    seq: u64,
    active: bool,
    /// Locks held, by header offset.
    locks: HeldLocks,
    log_pos: usize,
    /// Old contents (DRAM copy of the undo entries), for abort.
    undo: Vec<(u64, Vec<u8>)>,
    /// Objects written in place: (payload offset, length), to flush at commit.
    written: Vec<(u64, usize)>,
    allocs: Vec<Block>,
    frees: Vec<Block>,
    cache: ThreadCache,
}

impl UndoThread {
    /// State for `slot` (one live state per slot).
    pub(super) fn new(sh: Arc<UndoShared>, slot: usize) -> UndoThread {
        let l = sh.heap.layout();
        UndoThread {
            slot,
            area: l.log_offset(slot),
            area_len: l.log_bytes_per_thread,
            seq: sh.seqs[slot],
            active: false,
            locks: HeldLocks::new(sh.tag, slot),
            log_pos: ENTRIES_OFFSET,
            undo: Vec::new(),
            written: Vec::new(),
            allocs: Vec::new(),
            frees: Vec::new(),
            cache: ThreadCache::default(),
            sh,
        }
    }

    fn validate(&self, off: u64, len: usize) -> Result<(u64, usize)> {
        running(self.active)?;
        crate::engine::kit::validate::locate_object(&self.sh.alloc, off, len, |b| {
            self.allocs.contains(&b)
        })
    }

    /// After locking: the object is still allocated (a free committed between the
    /// validation and the lock is seen here), or allocated by this transaction.
    fn recheck(&self, header: u64, plen: usize) -> Result<()> {
        if header == ROOT_SLOT_OFFSET as u64 {
            return Ok(());
        }
        let b = Block {
            offset: header,
            size: (plen + HEADER) as u64,
        };
        crate::engine::kit::validate::check_still_allocated(&self.sh.alloc, b, |b| {
            self.allocs.contains(&b)
        })
    }

    fn lock(&self, header: u64, mode: Mode) -> Result<()> {
        let word = self.sh.heap.atomic_u64(header as usize);
        self.locks.lock(header, word, mode)
    }

    fn release_locks(&self) {
        let heap = &self.sh.heap;
        self.locks
            .release_all(|header| heap.atomic_u64(header as usize));
    }

    fn append(&mut self, kind: u32, off: u64, len: u64, data: &[u8]) -> Result<()> {
        let padded = data.len().next_multiple_of(8);
        let need = ENTRY_HDR + padded;
        if self.log_pos + need > self.area_len {
            return Err(Error::TooLargeForLog(Box::new(
                crate::error::TooLargeForLog {
                    needed: self.log_pos + need - ENTRIES_OFFSET,
                    capacity: self.area_len - ENTRIES_OFFSET,
                },
            )));
        }
        let h = entry_header(kind, self.seq, off, len, data);
        let at = self.area + self.log_pos;
        let heap = &self.sh.heap;
        heap.write_bytes(at, &h);
        heap.write_bytes(at + ENTRY_HDR, data);
        heap.persist(at, ENTRY_HDR + data.len());
        counters::add_bytes_logged(need as u64);
        self.log_pos += need;
        Ok(())
    }

    fn finish(&mut self) {
        // The commit marker: from now on recovery ignores this transaction's entries.
        let heap = &self.sh.heap;
        heap.atomic_u64(self.area).store(self.seq, Release);
        heap.persist(self.area, 8);
        self.release_locks();
        self.undo.clear();
        self.written.clear();
        self.allocs.clear();
        self.frees.clear();
        self.log_pos = ENTRIES_OFFSET;
        self.active = false;
    }
}

impl Rollback for UndoThread {
    fn rollback(&mut self) {
        let heap = self.sh.heap.clone();
        for (off, old) in self.undo.iter().rev() {
            heap.write_bytes(*off as usize, old);
            heap.flush(*off as usize, old.len());
        }
        heap.fence();
        for b in std::mem::take(&mut self.allocs) {
            self.sh.alloc.unreserve(&mut self.cache, b);
        }
        self.finish();
    }

    fn is_running(&self) -> bool {
        self.active
    }
}

impl EngineThread for UndoThread {
    fn slot(&self) -> usize {
        self.slot
    }
    fn begin(&mut self, _opts: &crate::tx_options::TxOptions) {
        self.abort_running();
        self.seq += 1;
        self.active = true;
    }

    fn abort(&mut self) {
        self.abort_running();
    }

    // Inlined into its own out-of-line caller (`registry::read_of`), the one
    // function through which `Tx` reads what its fast path declines.
    #[inline(always)]
    fn read(&self, off: u64, len: usize) -> Result<*const u8> {
        let (header, plen) = self.validate(off, len)?;
        self.lock(header, Mode::Shared)?;
        self.recheck(header, plen)?;
        // SAFETY: validated payload inside the pool.
        Ok(unsafe { self.sh.heap.ptr(header as usize + HEADER) })
    }

    fn write(&mut self, off: u64, len: usize) -> Result<*mut u8> {
        let (header, plen) = self.validate(off, len)?;
        let first = self.locks.mode(header) != Some(Mode::Exclusive);
        self.lock(header, Mode::Exclusive)?;
        self.recheck(header, plen)?;
        let fresh = self.allocs.iter().any(|b| b.offset == header);
        if first && !fresh {
            let payload = header + HEADER as u64;
            let mut old = vec![0u8; plen];
            self.sh.heap.read_bytes(payload as usize, &mut old);
            self.append(K_DATA, payload, plen as u64, &old)?;
            self.undo.push((payload, old));
            self.written.push((payload, plen));
        }
        // SAFETY: validated payload inside the pool, exclusively locked by us.
        Ok(unsafe { self.sh.heap.ptr(header as usize + HEADER) })
    }

    fn alloc(&mut self, len: usize) -> Result<u64> {
        running(self.active)?;
        let b = self.sh.alloc.reserve(&mut self.cache, len)?;
        if let Err(e) = self.lock(b.offset, Mode::Exclusive) {
            self.sh.alloc.unreserve(&mut self.cache, b);
            return Err(e);
        }
        if let Err(e) = self.append(K_ALLOC, b.offset, b.size, &[]) {
            self.sh.alloc.unreserve(&mut self.cache, b);
            return Err(e);
        }
        self.allocs.push(b);
        let payload = b.payload();
        let zeros = vec![0u8; b.payload_len() & !7];
        self.sh.heap.write_bytes(payload as usize, &zeros);
        self.written.push((payload, zeros.len()));
        Ok(payload)
    }

    fn free(&mut self, off: u64) -> Result<()> {
        running(self.active)?;
        let root = crate::engine::kit::validate::root_object(|o, l| self.read(o, l))?;
        let b =
            crate::engine::kit::validate::locate_block_to_free(&self.sh.alloc, off, root, |b| {
                self.allocs.contains(&b)
            })?;
        let header = b.offset;
        if self.frees.contains(&b) {
            return Err(Error::invalid_pointer(format!(
                "object {off:#x} freed twice"
            )));
        }
        self.lock(header, Mode::Exclusive)?;
        self.recheck(header, b.payload_len() & !7)?;
        if let Some(i) = self.allocs.iter().position(|a| *a == b) {
            // Allocated and freed in this transaction: never published.
            self.allocs.swap_remove(i);
            self.sh.alloc.unreserve(&mut self.cache, b);
            return Ok(());
        }
        self.append(K_FREE, b.offset, b.size, &[])?;
        self.frees.push(b);
        Ok(())
    }

    /// Commit: on `Ok` the transaction is visible and durable (its undo entries were
    /// persisted before its in-place writes, which are flushed and fenced before the
    /// commit marker); on `Err` it has been rolled back.
    fn commit(&mut self) -> Result<crate::engine::DurableToken> {
        running(self.active)?;
        if self.written.is_empty() && self.allocs.is_empty() && self.frees.is_empty() {
            self.release_locks();
            self.active = false;
            return Ok(crate::engine::DurableToken::DURABLE);
        }
        // (After the read-only return: a clone is a write of the `Arc`'s count, a line
        // every thread reads.)
        let heap = self.sh.heap.clone();
        for &(off, len) in &self.written {
            heap.flush(off as usize, len);
            counters::add_bytes_written_home(len as u64);
        }
        for &b in &self.allocs {
            self.sh.alloc.publish_alloc(b);
        }
        for &b in &self.frees {
            self.sh.alloc.publish_free(b);
        }
        heap.fence();
        let frees = std::mem::take(&mut self.frees);
        self.finish();
        // Under 2PL nobody can hold the freed blocks any more: reuse them at once.
        for b in frees {
            self.sh.alloc.release(&mut self.cache, b);
        }
        Ok(crate::engine::DurableToken::DURABLE)
    }

    fn quiesce(&mut self) {
        self.abort();
        self.sh.alloc.drain(&mut self.cache);
    }
}

impl Drop for UndoThread {
    fn drop(&mut self) {
        self.quiesce();
    }
}
