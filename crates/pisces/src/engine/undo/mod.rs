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
//! Log area of a slot: word 0 = commit marker (last finished sequence number), entries
//! from offset 64: `crc u32 | kind u32 | seq u64 | off u64 | len u64 | data (len,
//! rounded to 8)`. Kinds: `DATA` (old contents), `ALLOC` / `FREE` (a block, `len` =
//! block size). A torn entry fails its checksum and ends the parse; its in-place
//! write never happened, because writes follow the entry's fence.

use crate::engine::kit::two_phase::{HeldLocks, Mode};
use crate::engine::{Engine, EngineDef, EngineOptions, EngineThread, OpenCtx};
use crate::heap::alloc::{Allocator, Block, ThreadCache, HEADER};
use crate::heap::{Heap, ROOT_SLOT_OFFSET};
use crate::medium::counters;
use crate::tx_options::Isolation;
use crate::{Error, Result};
use std::sync::atomic::Ordering::{Acquire, Release};
use std::sync::Arc;

const ENTRY_HDR: usize = 32;
const ENTRIES_OFFSET: usize = 64;
const K_DATA: u32 = 1;
const K_ALLOC: u32 = 2;
const K_FREE: u32 = 3;

fn tag_of(generation: u64) -> u64 {
    crate::engine::kit::header_word::tag_of(generation)
}

/// A parsed undo entry.
#[derive(Debug)]
struct UndoEntry {
    kind: u32,
    off: u64,
    len: u64,
    data: Vec<u8>,
}

fn entry_crc(kind: u32, seq: u64, off: u64, len: u64, data: &[u8]) -> u32 {
    let mut h = [0u8; 28];
    h[0..4].copy_from_slice(&kind.to_le_bytes());
    h[4..12].copy_from_slice(&seq.to_le_bytes());
    h[12..20].copy_from_slice(&off.to_le_bytes());
    h[20..28].copy_from_slice(&len.to_le_bytes());
    crc32c::crc32c_append(crc32c::crc32c(&h), data)
}

/// Entries of slot `area`'s log newer than its commit marker (recovery, in log order),
/// or `Err(Corrupt)` if the parse stopped at a damaged entry that is not a torn tail.
///
/// Entries are appended in order, each persisted before the next is written, so at a
/// crash only the last one can be torn. A checksum-valid entry of an unfinished
/// transaction (sequence number above the commit marker) anywhere after the stop proves
/// the entry at the stop was complete once: undoing only the entries before it would
/// leave the later ones' in-place writes, so the pool is refused. Entries of finished
/// transactions (at or below the marker) left further on prove nothing.
fn parse(heap: &Heap, area: usize, area_len: usize) -> Result<(u64, Vec<UndoEntry>)> {
    let committed = heap.atomic_u64(area).load(Acquire);
    let mut pos = ENTRIES_OFFSET;
    let mut out = Vec::new();
    let mut seq_of_tx = None;
    let stop = loop {
        if pos + ENTRY_HDR > area_len {
            break None;
        }
        let mut h = [0u8; ENTRY_HDR];
        heap.read_bytes(area + pos, &mut h);
        let crc = u32::from_le_bytes(h[0..4].try_into().unwrap());
        let kind = u32::from_le_bytes(h[4..8].try_into().unwrap());
        let seq = u64::from_le_bytes(h[8..16].try_into().unwrap());
        let off = u64::from_le_bytes(h[16..24].try_into().unwrap());
        let len = u64::from_le_bytes(h[24..32].try_into().unwrap());
        if seq <= committed || seq_of_tx.is_some_and(|s| s != seq) {
            break Some(pos);
        }
        let dlen = if kind == K_DATA { len as usize } else { 0 };
        // Checked: a torn entry's length word is garbage, and a wrapped sum would pass
        // the bound and allocate `dlen` bytes.
        let end = dlen
            .checked_next_multiple_of(8)
            .and_then(|p| (pos + ENTRY_HDR).checked_add(p));
        if !(K_DATA..=K_FREE).contains(&kind) || end.is_none_or(|e| e > area_len) {
            break Some(pos);
        }
        let padded = dlen.next_multiple_of(8);
        let mut data = vec![0u8; dlen];
        heap.read_bytes(area + pos + ENTRY_HDR, &mut data);
        if crc != entry_crc(kind, seq, off, len, &data) {
            break Some(pos);
        }
        seq_of_tx = Some(seq);
        out.push(UndoEntry {
            kind,
            off,
            len,
            data,
        });
        pos += ENTRY_HDR + padded;
    };
    if let Some(at) = stop {
        if let Some(later) = later_entry(heap, area, area_len, at, committed) {
            return Err(Error::Corrupt(format!(
                "undo log at {area:#x}: the entry at offset {at:#x} is damaged, but a later entry of an unfinished transaction follows at offset {later:#x}: not a torn tail"
            )));
        }
    }
    Ok((seq_of_tx.unwrap_or(committed), out))
}

/// Offset of a checksum-valid entry with a sequence number above `committed` after
/// `at` (see `parse`).
fn later_entry(
    heap: &Heap,
    area: usize,
    area_len: usize,
    at: usize,
    committed: u64,
) -> Option<usize> {
    let mut pos = at + 8;
    while pos + ENTRY_HDR <= area_len {
        let mut h = [0u8; ENTRY_HDR];
        heap.read_bytes(area + pos, &mut h);
        let crc = u32::from_le_bytes(h[0..4].try_into().unwrap());
        let kind = u32::from_le_bytes(h[4..8].try_into().unwrap());
        let seq = u64::from_le_bytes(h[8..16].try_into().unwrap());
        let off = u64::from_le_bytes(h[16..24].try_into().unwrap());
        let len = u64::from_le_bytes(h[24..32].try_into().unwrap());
        if seq > committed && (K_DATA..=K_FREE).contains(&kind) {
            let dlen = if kind == K_DATA { len as usize } else { 0 };
            if dlen <= area_len - pos - ENTRY_HDR {
                let mut data = vec![0u8; dlen];
                heap.read_bytes(area + pos + ENTRY_HDR, &mut data);
                if crc == entry_crc(kind, seq, off, len, &data) {
                    return Some(pos);
                }
            }
        }
        pos += 8;
    }
    None
}

/// Undo every unfinished transaction, validating all entries first.
fn recover(heap: &Heap) -> Result<Vec<u64>> {
    let l = *heap.layout();
    let mut per_slot = Vec::new();
    for slot in 0..l.max_threads {
        let (seq, entries) =
            parse(heap, l.log_offset(slot), l.log_bytes_per_thread).map_err(|e| match e {
                Error::Corrupt(m) => Error::Corrupt(format!("thread slot {slot}: {m}")),
                e => e,
            })?;
        for e in &entries {
            match e.kind {
                K_DATA => {
                    crate::engine::kit::objects::check_logged_write(heap, e.off, e.len as usize)?
                }
                _ => Allocator::check_block(
                    heap,
                    Block {
                        offset: e.off,
                        size: e.len,
                    },
                )?,
            }
        }
        per_slot.push((slot, seq, entries));
    }
    let mut seqs = Vec::new();
    for (slot, seq, entries) in per_slot {
        for e in entries.iter().rev() {
            undo_one(heap, e)?;
        }
        heap.fence();
        let area = l.log_offset(slot);
        heap.atomic_u64(area).store(seq, Release);
        heap.persist(area, 8);
        seqs.push(seq);
    }
    Ok(seqs)
}

fn undo_one(heap: &Heap, e: &UndoEntry) -> Result<()> {
    let b = Block {
        offset: e.off,
        size: e.len,
    };
    match e.kind {
        K_DATA => {
            heap.write_bytes(e.off as usize, &e.data);
            heap.flush(e.off as usize, e.data.len());
        }
        K_ALLOC => Allocator::replay_free(heap, b)?,
        _ => Allocator::replay_alloc(heap, b)?,
    }
    Ok(())
}

struct Shared {
    heap: Arc<Heap>,
    alloc: Arc<Allocator>,
    tag: u64,
    seqs: Vec<u64>,
}

/// The undo-logging, two-phase-locking engine.
pub struct UndoEngine {
    sh: Arc<Shared>,
}

/// Registry entry of the `undo` baseline.
pub struct Undo;

impl EngineDef for Undo {
    const ID: u32 = 2;
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

impl UndoEngine {
    /// Recover (undo unfinished transactions) and start.
    fn open(heap: Arc<Heap>) -> Result<UndoEngine> {
        let seqs = recover(&heap)?;
        let alloc = Arc::new(Allocator::rebuild(heap.clone())?);
        heap.atomic_u64(ROOT_SLOT_OFFSET).store(0, Release);
        heap.persist(ROOT_SLOT_OFFSET, 8);
        if crate::engine::kit::header_word::tag_wraps(heap.generation()) {
            Allocator::clear_header_words(&heap)?;
        }
        let tag = tag_of(heap.generation());
        Ok(UndoEngine {
            sh: Arc::new(Shared {
                heap,
                alloc,
                tag,
                seqs,
            }),
        })
    }
}

impl Engine for UndoEngine {
    type Thread = UndoThread;
    fn thread(&self, slot: usize) -> Result<UndoThread> {
        if slot >= self.sh.seqs.len() {
            return Err(Error::TooManyThreads(self.sh.seqs.len()));
        }
        let l = self.sh.heap.layout();
        Ok(UndoThread {
            sh: self.sh.clone(),
            area: l.log_offset(slot),
            area_len: l.log_bytes_per_thread,
            seq: self.sh.seqs[slot],
            active: false,
            locks: HeldLocks::new(self.sh.tag, slot),
            log_pos: ENTRIES_OFFSET,
            undo: Vec::new(),
            written: Vec::new(),
            allocs: Vec::new(),
            frees: Vec::new(),
            cache: ThreadCache::default(),
        })
    }
    fn quiesce(&self) {}
    fn heap(&self) -> Option<&Arc<Heap>> {
        Some(&self.sh.heap)
    }
}

pub(crate) struct UndoThread {
    sh: Arc<Shared>,
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
    fn validate(&self, off: u64, len: usize) -> Result<(u64, usize)> {
        if !self.active {
            return Err(Error::InvalidPointer(
                "no transaction is running on this thread".into(),
            ));
        }
        crate::engine::kit::objects::locate_object(&self.sh.alloc, off, len, |b| {
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
        crate::engine::kit::objects::check_still_allocated(&self.sh.alloc, b, |b| {
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
            return Err(Error::TooLargeForLog {
                needed: self.log_pos + need - ENTRIES_OFFSET,
                capacity: self.area_len - ENTRIES_OFFSET,
            });
        }
        let mut h = [0u8; ENTRY_HDR];
        h[0..4].copy_from_slice(&entry_crc(kind, self.seq, off, len, data).to_le_bytes());
        h[4..8].copy_from_slice(&kind.to_le_bytes());
        h[8..16].copy_from_slice(&self.seq.to_le_bytes());
        h[16..24].copy_from_slice(&off.to_le_bytes());
        h[24..32].copy_from_slice(&len.to_le_bytes());
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
}

impl EngineThread for UndoThread {
    fn begin(&mut self, _opts: &crate::tx_options::TxOptions) {
        if self.active {
            self.rollback();
        }
        self.seq += 1;
        self.active = true;
    }

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
        if !self.active {
            return Err(Error::InvalidPointer(
                "no transaction is running on this thread".into(),
            ));
        }
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
        if !self.active {
            return Err(Error::InvalidPointer(
                "no transaction is running on this thread".into(),
            ));
        }
        let root = crate::engine::kit::objects::root_object(|o, l| self.read(o, l))?;
        let b =
            crate::engine::kit::objects::locate_block_to_free(&self.sh.alloc, off, root, |b| {
                self.allocs.contains(&b)
            })?;
        let header = b.offset;
        if self.frees.contains(&b) {
            return Err(Error::InvalidPointer(format!(
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

    fn commit(&mut self) -> Result<crate::engine::DurableToken> {
        self.commit_visible()?;
        // Durable before visible: the record was persisted before the commit point.
        Ok(crate::engine::DurableToken::DURABLE)
    }

    fn abort(&mut self) {
        if self.active {
            self.rollback();
        }
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

impl UndoThread {
    /// Commit up to the point where the transaction is visible (and, for this engine,
    /// already durable). On `Err` the transaction has been rolled back.
    fn commit_visible(&mut self) -> Result<()> {
        if !self.active {
            return Err(Error::InvalidPointer(
                "no transaction is running on this thread".into(),
            ));
        }
        let heap = self.sh.heap.clone();
        if self.written.is_empty() && self.allocs.is_empty() && self.frees.is_empty() {
            self.release_locks();
            self.active = false;
            return Ok(());
        }
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
        Ok(())
    }
}
