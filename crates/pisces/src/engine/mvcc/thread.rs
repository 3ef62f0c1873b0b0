//! One thread's `mvcc` transactions: snapshot reads through the index, writes into
//! private copies, and the strawman's commit.
//!
//! # Transaction
//! * **Start**: publish the start timestamp S (the slot clock; see `shared`).
//! * **Read**: the transaction's own copy if it wrote the object; otherwise look the
//!   object up in the index, *wait while a committer holds its lock*, then walk its
//!   chain to the newest version with `ts ≤ S`. The pointer stays valid until the
//!   transaction ends: versions are immutable and reclaimed only below the oldest
//!   running snapshot (`version`).
//! * **Write**: the first write copies the snapshot version into a private copy (an
//!   unpublished [`Version`]); later reads and writes use it.
//! * **Alloc / free**: a reserved block gets a zeroed private copy; a free is recorded
//!   and takes effect at commit. Blocks allocated and freed in one transaction are
//!   handed back unpublished.
//!
//! # Commit (the paper's §2.2 strawman, in this order)
//! 1. Encode the redo record: whole objects (`RANGE`), `ALLOC` / `FREE` entries; make
//!    room for it in the log (before any lock, so no lock is held while waiting).
//! 2. Lock every written or freed object (no wait: a taken lock is a conflict).
//! 3. Write-write check: if an object's last commit timestamp is above S, abort.
//! 4. Take the commit timestamp C (clock increment), announced in `committing`.
//! 5. Persist the record with C as its persistTS: flush, **fence** (durability point).
//! 6. Publish the private copies as versions with timestamp C; truncate each chain
//!    below the oldest running snapshot.
//! 7. Write the objects home, publish allocator changes, flush, **fence** (on the file
//!    medium, no fence: the ranges wait for the lazy home sync, see `shared`).
//! 8. Release the locks (readers that waited go on), clear `committing`.
//! 9. If it freed objects: wait until no snapshot older than C runs, then make the
//!    blocks reusable (no lock held, outside the transaction).
//!
//! Read-only transactions do no persistence work.
//!
//! # Fallback (a bound on attempts)
//! First committer wins (step 3), so an update transaction that runs longer than the
//! gap between two commits of an object it writes would abort for as long as their
//! writers run. After [`THRESHOLD`](crate::engine::kit::cc::fallback::THRESHOLD)
//! conflict aborts in a row it takes the pool's fallback word for its next attempt
//! ([`crate::engine::kit::cc::fallback`]): a tick of the clock and a grace period for
//! every other slot's transaction that started before it (bounded by the hold's
//! deadline), and a transaction that finds another slot's hold running at its first
//! write, allocation or free aborts and waits for it in `after_abort`, holding
//! nothing. A commit already under way may still make the holder's attempt abort once
//! (its slot shows inactive from step 1 on); the next one meets no writer. The word
//! goes back when the attempt ends (after step 8, or its rollback). Nested
//! transactions neither take the word nor wait for it; transactions that only read
//! never look at it. Cost: one load of the word per update transaction.

use super::shared::MvccShared;
use super::version::{self, Entry, Version};
use crate::engine::kit::cc::fallback::Retries;
use crate::engine::kit::cc::grace::wait_for_readers;
use crate::engine::kit::log::redo_log::{LogWriter, RecordBuilder, HEADER_LEN};
use crate::engine::kit::rollback::Rollback;
use crate::engine::kit::validate::{locate_object, running};
use crate::engine::kit::write_set::{self, WriteSet};
use crate::engine::{DurableToken, EngineThread};
use crate::heap::alloc::{Block, ThreadCache, HEADER};
use crate::medium::counters;
use crate::{Error, Result};
use std::sync::atomic::Ordering::{Relaxed, Release};
use std::sync::Arc;

use crate::engine::kit::write_set::WriteKind as Kind;

/// One object of the write set (its index entry is set when the commit locks it).
type WriteEntry = write_set::WriteEntry<Version, Entry>;

/// A thread's `mvcc` state.
pub(crate) struct MvccThread {
    sh: Arc<MvccShared>,
    slot: usize,
    cache: ThreadCache,
    log: LogWriter,
    record: RecordBuilder,
    active: bool,
    start_ts: u64,
    writes: WriteSet<Version, Entry>,
    /// Blocks freed by the committing transaction (reused buffer).
    frees: Vec<Block>,
    /// Highest log sequence number written home (with lazy home sync not yet durably:
    /// the watermark, held below those records until they are synced, keeps them).
    wb_seq: u64,
    durable_watermark: u64,
    /// Conflict aborts in a row and the fallback word (module docs, *Fallback*).
    retries: Retries,
    /// Transactions run nested in another pool's (`EngineThread::set_nested`): they
    /// never take the fallback word, whose drain waits for other transactions.
    nested: bool,
    /// The attempt aborted because another slot holds the fallback word.
    fallback_wait: bool,
}

// SAFETY: the raw pointers in `writes` are private copies owned by this struct and
// index entries owned by `sh`; the state moves between threads only between
// transactions (the API checks a state out to one thread at a time).
unsafe impl Send for MvccThread {}

impl MvccThread {
    /// Before the transaction's first write, allocation or free: if another slot's
    /// fallback attempt runs (module docs, *Fallback*), the attempt aborts, and
    /// `after_abort` waits for the holder, holding nothing.
    #[inline]
    fn check_fallback(&mut self) -> Result<()> {
        if self.writes.is_empty() && !self.nested && self.sh.fallback.blocks(self.slot) {
            self.fallback_wait = true;
            return Err(Error::Conflict);
        }
        Ok(())
    }

    /// State for `slot`; only one may exist per slot.
    pub(super) fn new(sh: Arc<MvccShared>, slot: usize) -> MvccThread {
        let l = sh.heap.layout();
        let log = LogWriter::new(
            l.log_offset(slot),
            l.log_bytes_per_thread,
            sh.next_seq[slot],
        );
        MvccThread {
            sh,
            slot,
            cache: ThreadCache::default(),
            log,
            record: RecordBuilder::default(),
            active: false,
            start_ts: 0,
            writes: WriteSet::default(),
            frees: Vec::new(),
            wb_seq: 0,
            durable_watermark: 0,
            retries: Retries::default(),
            nested: false,
            fallback_wait: false,
        }
    }

    /// Validate a user offset: the object's canonical payload offset (the root slot
    /// token maps to the slot's real offset) and payload length.
    #[inline]
    fn validate(&self, off: u64, len: usize) -> Result<(u64, usize)> {
        let (header, plen) = locate_object(&self.sh.alloc, off, len, |b| self.pending(b))?;
        Ok((header + HEADER as u64, plen))
    }

    /// A block whose allocation bit is clear that this transaction may still use:
    /// allocated by this transaction, or freed by a commit after this snapshot (a free
    /// is published at commit, while older snapshots still read the object's versions;
    /// the block is reused only after they end). The commit publishes the free after
    /// marking the entry, under the entry's lock: wait for the lock, then read the mark.
    #[cold]
    fn pending(&self, b: Block) -> bool {
        if self.writes.own_fresh(b) {
            return true;
        }
        let off = b.payload();
        self.sh
            .index
            .get(off, b.payload_len() & !7)
            .is_some_and(|e| {
                e.wait_unlocked();
                e.last_ts() > self.start_ts
            })
    }

    /// The snapshot version of the object at `off` (`len` payload bytes, validated):
    /// the strawman's read, blocking while a committer holds the object.
    #[inline]
    fn snapshot(&self, off: u64, len: usize) -> *const Version {
        // SAFETY: `off .. off + len` was validated by `locate_object`.
        let e = unsafe {
            self.sh
                .index
                .get_or_create(off, len, &self.sh.heap, &self.sh.alloc)
        };
        e.wait_unlocked();
        version::visible(e, self.start_ts)
    }

    /// Release the locks of the first `n` write entries (those that have an entry).
    fn unlock(&self, n: usize) {
        for w in &self.writes[..n] {
            if !w.entry.is_null() {
                // SAFETY: entries live as long as the index (`sh`).
                unsafe { (*w.entry).unlock() };
            }
        }
    }

    /// Make room in the log for a record of `entries` bytes.
    fn reserve_log(&mut self, entries: usize) -> Result<()> {
        let needed = HEADER_LEN + entries;
        if needed > self.log.max_record() {
            return Err(Error::TooLargeForLog(Box::new(
                crate::error::TooLargeForLog {
                    needed,
                    capacity: self.log.max_record(),
                },
            )));
        }
        let mut round = 0;
        while !self.log.fits(entries) {
            // Our records are all home; the watermark passes them as soon as no older
            // commit of another thread is on its way home (a commit never waits).
            self.recycle();
            if !self.log.fits(entries) && self.sh.lazy_home {
                // Another slot's home writes not yet synced may hold the watermark.
                self.sh.sync_all_homes();
                self.recycle();
            }
            if !self.log.fits(entries) {
                crate::sync::spin_step(&mut round);
            }
        }
        Ok(())
    }

    /// Drop the records below the watermark, persisting it first (P-2); with lazy home
    /// sync, this slot's home writes are made durable first.
    fn recycle(&mut self) {
        self.sh.sync_home(self.slot);
        let w = self.sh.watermark();
        if w > self.durable_watermark {
            self.sh.persist_watermark(w);
            self.durable_watermark = w;
        }
        self.log
            .recycle(&self.sh.heap, self.wb_seq, self.durable_watermark);
    }

    /// Steps 2 and 3 of the commit: lock every object, check for newer commits.
    fn lock_and_validate(&mut self) -> Result<()> {
        for i in 0..self.writes.len() {
            let w = &self.writes[i];
            if let Kind::FreshFreed(_) = w.kind {
                continue;
            }
            // SAFETY: validated when the object entered the write set.
            let e = unsafe {
                self.sh
                    .index
                    .get_or_create(w.off, w.len, &self.sh.heap, &self.sh.alloc)
            };
            if !e.try_lock(self.slot) {
                self.unlock(i);
                return Err(Error::Conflict);
            }
            let fresh = matches!(w.kind, Kind::Fresh(_));
            self.writes[i].entry = e;
            // A block we reserved is ours alone; anything else must not have been
            // committed to since our snapshot (first committer wins).
            if !fresh && e.last_ts() > self.start_ts {
                self.unlock(i + 1);
                return Err(Error::Conflict);
            }
        }
        Ok(())
    }
}

impl Rollback for MvccThread {
    /// Free the private copies, hand back unpublished blocks, end the transaction.
    fn rollback(&mut self) {
        for w in self.writes.drain() {
            if !w.copy.is_null() {
                // SAFETY: an unpublished private copy, owned by us.
                unsafe { Version::free(w.copy, &self.sh.index.live) };
            }
            if let Kind::Fresh(b) | Kind::FreshFreed(b) = w.kind {
                self.sh.alloc.unreserve(&mut self.cache, b);
            }
        }
        self.sh.slots[self.slot].clock.finish();
        self.retries.end(&self.sh.fallback, self.slot);
        self.active = false;
    }

    fn is_running(&self) -> bool {
        self.active
    }
}

impl EngineThread for MvccThread {
    fn slot(&self) -> usize {
        self.slot
    }
    fn begin(&mut self, _opts: &crate::tx_options::TxOptions) {
        self.abort_running();
        if self.retries.begin() {
            // (module docs, *Fallback*)
            let sh = &self.sh;
            let (me, nested) = (self.slot, self.nested);
            self.retries
                .take_and_drain_slots(&sh.fallback, &sh.clock, &sh.slots, me, nested);
        }
        self.active = true;
        self.start_ts = self.sh.slots[self.slot].clock.start(&self.sh.clock);
    }

    fn after_abort(&mut self) {
        self.retries.after_abort();
        if std::mem::take(&mut self.fallback_wait) {
            self.sh.fallback.wait(self.slot);
        }
    }

    fn set_nested(&mut self, nested: bool) {
        self.nested = nested;
    }

    fn abort(&mut self) {
        self.abort_running();
    }

    #[inline]
    fn read(&self, off: u64, len: usize) -> Result<*const u8> {
        running(self.active)?;
        let (off, plen) = self.validate(off, len)?;
        if !self.writes.is_empty() {
            if let Some(i) = self.writes.index_of(off) {
                let c = self.writes[i].copy;
                if !c.is_null() {
                    // SAFETY: our own live private copy.
                    return Ok(unsafe { Version::data(c) });
                }
            }
        }
        let v = self.snapshot(off, plen);
        // SAFETY: a published version visible to us, not reclaimed before we end.
        Ok(unsafe { Version::data(v) })
    }

    fn write(&mut self, off: u64, len: usize) -> Result<*mut u8> {
        running(self.active)?;
        self.check_fallback()?;
        let (off, plen) = self.validate(off, len)?;
        let live = &self.sh.index.live;
        if let Some(i) = self.writes.index_of(off) {
            if self.writes[i].copy.is_null() {
                // Freed first, written now: start from the snapshot.
                let v = self.snapshot(off, plen);
                // SAFETY: `v` is a live version of `plen` bytes.
                self.writes[i].copy = unsafe { Version::copy_of(v, plen, live) };
            }
            // SAFETY: our own live private copy.
            return Ok(unsafe { Version::data(self.writes[i].copy) });
        }
        let v = self.snapshot(off, plen);
        // SAFETY: `v` is a live version of `plen` bytes (index entries have the
        // object's payload length).
        let copy = unsafe { Version::copy_of(v, plen, live) };
        self.writes
            .push(WriteEntry::new(off, plen, copy, Kind::Written));
        // SAFETY: just allocated, ours.
        Ok(unsafe { Version::data(copy) })
    }

    fn alloc(&mut self, len: usize) -> Result<u64> {
        running(self.active)?;
        self.check_fallback()?;
        let b = self.sh.alloc.reserve(&mut self.cache, len)?;
        // SAFETY: no source: a zeroed copy.
        let copy = unsafe { Version::new(b.payload_len() & !7, None, &self.sh.index.live) };
        self.writes.push(WriteEntry::fresh(b, copy));
        Ok(b.payload())
    }

    fn free(&mut self, off: u64) -> Result<()> {
        running(self.active)?;
        self.check_fallback()?;
        let root = crate::engine::kit::validate::root_object(|o, l| self.read(o, l))?;
        let b =
            crate::engine::kit::validate::locate_block_to_free(&self.sh.alloc, off, root, |b| {
                self.pending(b)
            })?;
        if let Some(i) = self.writes.index_of(off) {
            let e = &mut self.writes[i];
            e.kind = e.kind.freed(off, b)?;
            return Ok(());
        }
        self.writes.push(WriteEntry::freed(b));
        Ok(())
    }

    /// The commit (module docs): on `Ok` the transaction is visible and already durable
    /// (its record was persisted before the commit point); on `Err` it has been rolled
    /// back.
    fn commit(&mut self) -> Result<DurableToken> {
        running(self.active)?;
        let slot = &self.sh.slots[self.slot];
        // This transaction reads nothing more: its snapshot no longer holds versions.
        slot.clock.finish();
        if self.writes.publishes_nothing() {
            // Read-only (or nothing published): no persistence work at all.
            self.rollback();
            return Ok(DurableToken::DURABLE);
        }
        // 1. The record, and room for it, before taking any lock.
        self.writes.build_record(&mut self.record);
        if let Err(e) = self.reserve_log(self.record.len()) {
            self.rollback();
            return Err(e);
        }
        // 2, 3. Lock, write-write check.
        if let Err(e) = self.lock_and_validate() {
            self.rollback();
            return Err(e);
        }
        let sh = self.sh.clone();
        let (heap, slot) = (&*sh.heap, &sh.slots[self.slot]);
        // 4. Commit timestamp. Guard first, fence, then the increment (see
        // `Shared::watermark`); Relaxed stores: the fence and the increment order them.
        slot.committing.store(0, Relaxed);
        crate::sync::fence(std::sync::atomic::Ordering::SeqCst);
        let ts = sh.clock.tick();
        slot.committing.store(ts, Release);
        // 5. Persist the record: the transaction is durable after this fence.
        let seq = self.log.append(heap, self.record.bytes(), ts);
        heap.fence();
        // 6. Publish the versions; reclaim what no snapshot can see any more.
        let oldest = sh.oldest_active(ts);
        let live = &sh.index.live;
        for w in self.writes.iter_mut() {
            // SAFETY: `w.entry` is locked by us (step 2) and lives as long as
            // the index; `w.copy` is our unpublished copy of the object's size, and
            // `oldest` bounds every snapshot's start (`Shared::oldest_active` with our
            // own commit timestamp).
            unsafe {
                match w.kind {
                    Kind::Written | Kind::Fresh(_) => {
                        version::publish(&*w.entry, w.copy, ts);
                        version::truncate(&*w.entry, oldest, live);
                    }
                    Kind::Freed(_) => {
                        (*w.entry).mark(ts);
                        if !w.copy.is_null() {
                            Version::free(w.copy, live);
                        }
                        w.copy = std::ptr::null_mut();
                    }
                    Kind::FreshFreed(_) => {}
                }
            }
        }
        // 7. Home, allocator, fence; on the file medium no fence: the ranges wait for
        // the lazy home sync, holding the watermark below this record (`shared`).
        let mut lazy = sh.home.get(self.slot).map(|h| (h, h.lock()));
        for w in self.writes.iter() {
            match w.kind {
                Kind::Written | Kind::Fresh(_) => {
                    // SAFETY: the copy is now a published version, immutable and kept
                    // alive by the chain while we hold the lock; home is a validated
                    // payload of `w.len` bytes that only the lock holder writes.
                    unsafe {
                        std::ptr::copy_nonoverlapping(
                            Version::data(w.copy),
                            heap.ptr(w.off as usize),
                            w.len,
                        )
                    };
                    match &mut lazy {
                        Some((_, ranges)) => ranges.ranges().push(heap, w.off as usize, w.len),
                        None => heap.flush(w.off as usize, w.len),
                    }
                    counters::add_bytes_written_home(w.len as u64);
                }
                _ => {}
            }
            let published = match w.kind {
                Kind::Fresh(b) => Some((b, true)),
                Kind::Freed(b) => Some((b, false)),
                _ => None,
            };
            if let Some((b, allocated)) = published {
                match &mut lazy {
                    Some((_, ranges)) => {
                        if let Some((off, len)) = sh.alloc.publish_unflushed(b, allocated) {
                            ranges.ranges().push(heap, off, len);
                        }
                    }
                    None if allocated => sh.alloc.publish_alloc(b),
                    None => sh.alloc.publish_free(b),
                }
            }
        }
        match lazy {
            Some((h, ranges)) => h.hold(&ranges, ts),
            None => heap.fence(),
        }
        // 8. Unlock; our record is home (durably, or held above the watermark).
        self.unlock(self.writes.len());
        // Release: the record is durably home (fence above), or its lazy home bound is
        // stored, before a watermark scan can see this slot idle.
        slot.committing.store(u64::MAX, Release);
        self.retries.end(&sh.fallback, self.slot);
        self.wb_seq = seq;
        for w in self.writes.drain() {
            match w.kind {
                Kind::Freed(b) => self.frees.push(b),
                Kind::FreshFreed(b) => sh.alloc.unreserve(&mut self.cache, b),
                _ => {}
            }
        }
        self.active = false;
        if !self.frees.is_empty() {
            // Freed blocks are reusable once no snapshot older than the free runs (a
            // grace period, as in Pisces' write-back). Outside the transaction and with
            // no lock held, so nobody waits for us meanwhile.
            wait_for_readers(sh.slots.iter().map(|s| &*s.clock), self.slot, ts);
            for b in self.frees.drain(..) {
                sh.alloc.release(&mut self.cache, b);
            }
        }
        if self.log.used() > self.log.capacity() / 2 {
            self.recycle();
        }
        Ok(DurableToken::DURABLE)
    }

    fn quiesce(&mut self) {
        self.abort();
        self.recycle();
        self.sh.alloc.drain(&mut self.cache);
    }
}

impl Drop for MvccThread {
    fn drop(&mut self) {
        self.quiesce();
    }
}
