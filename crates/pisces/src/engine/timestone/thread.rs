//! One thread's `timestone` transactions.
//!
//! # Transaction
//! * **Begin**: take and publish the snapshot S, the horizon of complete commits
//!   (`TimestoneShared::horizon`); remember the isolation level.
//! * **Read**: own copy if written; else home, if its home word is clean at X ≤ S
//!   (`tlog`, *The home word*; snapshot transactions do this inline in `Tx::read`
//!   until their first write, `fast_reads`); else the object's version visible at S
//!   (TLog). Serializable and linearizable transactions remember the object (its chain
//!   or the home word they saw) in their read set.
//! * **Write**: the first write copies the visible version into a private copy.
//! * **Alloc / free**: a reserved block gets a zeroed private copy; frees take effect at
//!   commit. During recovery, allocations follow the logged script (same blocks as the
//!   original execution, so pointers stay valid).
//!
//! # Commit (update transactions; read-only ones just end)
//! 1. Build the OLog record: the registered operation and its arguments plus the
//!    blocks it allocated (logical), or — for a plain closure — the written objects,
//!    allocations and frees (physical).
//! 2. Make room for it in the OLog (recycle below K_done, else checkpoint), and reserve
//!    its items' cost in the checkpoint budget, before any lock is taken.
//! 3. Stop publishing the snapshot (nothing is read from here on). Lock the write set
//!    (no waiting: a taken lock is a conflict), marking each home word dirty; first
//!    committer wins (`last_ts > S` aborts).
//! 4. Push the copies onto their chains (`PENDING`), guard `committing` (a lower
//!    bound of the timestamp, `TimestoneShared::enter_commit`), fence, stamp them `COMMITTING`, take C = tick.
//! 5. Serializable / linearizable: validate the read set — an object locked by another
//!    committer or committed after S aborts (stamps become `ABORTED`).
//! 6. Stamp `C | UNDURABLE`, queue the checkpoint items, append the OLog record with C,
//!    **fence** — the only persistent write of the commit. Then stamp `C`, set
//!    `last_ts`, truncate chains, unlock, clear `committing`, and wait until every
//!    commit with a smaller timestamp is complete (`TimestoneShared::wait_predecessors`).
//! 7. If the pending items passed the high-water mark, checkpoint (`clog`).
//!
//! # Fallback (a bound on attempts)
//! First committer wins (step 3), and serializable transactions also fail validation
//! when an object they read changed, so a transaction that runs longer than the gap
//! between two commits of what it writes (or reads, serializable) would abort for as
//! long as their writers run. After
//! [`THRESHOLD`](crate::engine::kit::cc::fallback::THRESHOLD) conflict aborts in a row
//! it takes the pool's fallback word for its next attempt
//! ([`crate::engine::kit::cc::fallback`]): a tick of the clock (a timestamp no commit
//! takes) and a grace period for every other slot's transaction that started before
//! it (bounded by the hold's deadline), and a transaction that finds another slot's
//! hold running at its first write, allocation or free aborts and waits for it in
//! `after_abort`, holding nothing. A commit already under way may still make the
//! holder's attempt abort once (its slot shows inactive once its commit starts); the
//! next one meets no writer. The word goes back when the attempt ends (`end`). Nested
//! transactions and recovery's re-execution neither take the word nor wait for it;
//! transactions that only read never look at it. Cost: one load of the word per
//! update transaction.
//!
//! # Blocks freed after the snapshot
//! A block a commit freed after S is still a live object for S: the transaction may
//! hold pointers to it (read at S) and follow them at any time. If the allocator handed
//! the transaction that block, its reads through those pointers would find its own new
//! object (a hash-map split, for one, would find a node of another bucket in the chain
//! it is moving), and its writes through them would land in the new object's copy. So
//! a transaction is never handed such a block: the reuse lists give out only blocks
//! freed at or below S (`Reuse`; each entry carries its free's timestamp), and a large
//! block the allocator hands out after a checkpoint is checked against the pending
//! allocator state, which keeps a free while a snapshot older than it may run (the
//! transaction then retries with a newer snapshot). Other transactions read such a
//! block's versions visible at their snapshots, and a write through a stale pointer
//! meets the free's `last_ts` at step 3. The `TsReuseAfterSnapshot` mutation lifts the
//! rule for the reuse lists.
//!
//! The same rule has a cost when the heap is full: what commits freed after S is out
//! of the transaction's reach (small blocks by the rule, large ones because no
//! checkpoint cuts past a running snapshot, S included), so an allocation that finds
//! no block after one checkpoint restarts with a newer snapshot when any commit
//! followed S, and reports `OutOfSpace` only when none did (after a few more
//! checkpoints and waits, for commits in flight and for older snapshots that hold the
//! cut back). The unit test
//! `a_full_heap_restarts_an_allocation_that_a_later_free_makes_room_for` shows it.

use super::clog::{self, Item};
use super::olog::{self, Compact};
use super::shared::TimestoneShared;
use super::tlog::{self, Entry, Version, ABORTED, COMMITTING, PENDING, UNDURABLE};
use crate::engine::kit::cc::fallback::Retries;
use crate::engine::kit::fast_reads::{FastPath, FastReads, OwnedFastReads};
use crate::engine::kit::log::redo_log::{self as log, Framing, LogWriter, RecordBuilder};
use crate::engine::kit::rollback::Rollback;
use crate::engine::kit::validate::{locate_block_to_free, locate_object, root_object, running};
use crate::engine::kit::write_set::{self, WriteKind as Kind, WriteSet};
use crate::engine::{DurableToken, EngineThread};
use crate::fasthash::FastMap;
use crate::heap::alloc::{Allocator, Block, ThreadCache, HEADER};
use crate::sync::fence;
use crate::tx_options::{Isolation, TxOptions};
use crate::{Error, Result};
use std::collections::VecDeque;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release, SeqCst};
use std::sync::Arc;

crate::mutation::point! {
    /// The OLog record is neither flushed nor fenced at commit.
    pub(crate) static OLOG_PERSIST = "olog-persist";
    /// Serializable transactions skip read-set validation.
    pub(crate) static VALIDATION = "validation";
}

/// One object of the write set (its entry is set when the commit locks it).
type WriteEntry = write_set::WriteEntry<Version, Entry>;

/// An object a serializable transaction read, for validation.
#[derive(Clone, Copy)]
enum Read {
    /// Read through its chain.
    Chain(*const Entry),
    /// Read at home: its home word and the clean value it had (`tlog`, *The home
    /// word*).
    Home(*const AtomicU64, u64),
}

/// A thread's `timestone` state.
pub(crate) struct TimestoneThread {
    sh: Arc<TimestoneShared>,
    slot: usize,
    cache: ThreadCache,
    log: LogWriter<Compact>,
    record: RecordBuilder,
    /// The header tag when `record` is an operation record (`olog`).
    record_tag: Option<u16>,
    /// Operation id → table index, as far as this thread has used them.
    op_index: FastMap<u32, u8>,
    /// The operation record's blocks (reused).
    op_blocks: Vec<(bool, Block)>,
    active: bool,
    start_ts: u64,
    iso: Isolation,
    writes: WriteSet<Version, Entry>,
    reads: std::cell::RefCell<Vec<Read>>,
    op: Option<(u32, Vec<u8>)>,
    allocs: Vec<Block>,
    script: VecDeque<Block>,
    items: Vec<Item>,
    /// Small blocks the committing transaction frees, and whether each is fresh
    /// (`clog::push_items`).
    freed: Vec<(Block, bool)>,
    locked: usize,
    /// Conflict aborts in a row and the fallback word (module docs, *Fallback*).
    retries: Retries,
    /// Transactions run nested in another pool's (`EngineThread::set_nested`): they
    /// never take the fallback word, whose drain waits for other transactions.
    nested: bool,
    /// The attempt aborted because another slot holds the fallback word.
    fallback_wait: bool,
    /// The read fast path of the running attempt (`fast_reads` sets it).
    fast: OwnedFastReads,
}

// SAFETY: raw pointers are private copies owned here and index entries owned by `sh`;
// the state moves between threads only between transactions.
unsafe impl Send for TimestoneThread {}

impl TimestoneThread {
    /// State for `slot`.
    pub(crate) fn new(sh: Arc<TimestoneShared>, slot: usize) -> TimestoneThread {
        let l = *sh.heap.layout();
        let log = LogWriter::framed(
            super::OLOG_FRAMING,
            l.log_offset(slot),
            super::olog_len(&l),
            sh.next_seq[slot],
        );
        TimestoneThread {
            sh,
            slot,
            cache: ThreadCache::default(),
            log,
            record: RecordBuilder::default(),
            record_tag: None,
            op_index: FastMap::default(),
            op_blocks: Vec::new(),
            active: false,
            start_ts: 0,
            iso: Isolation::Snapshot,
            writes: WriteSet::default(),
            reads: std::cell::RefCell::new(Vec::new()),
            op: None,
            allocs: Vec::new(),
            script: VecDeque::new(),
            items: Vec::new(),
            freed: Vec::new(),
            locked: 0,
            retries: Retries::default(),
            nested: false,
            fallback_wait: false,
            fast: OwnedFastReads::new(FastReads::NONE),
        }
    }

    /// Before the transaction's first write, allocation or free: if another slot's
    /// fallback attempt runs (module docs, *Fallback*), the attempt aborts, and
    /// `after_abort` waits for the holder, holding nothing.
    #[inline]
    fn check_fallback(&mut self) -> Result<()> {
        if self.writes.is_empty()
            && !self.nested
            && !self.sh.recovering
            && self.sh.fallback.blocks(self.slot)
        {
            self.fallback_wait = true;
            return Err(Error::Conflict);
        }
        Ok(())
    }

    /// Recovery: the blocks the next transaction's allocations must return, in order.
    pub(crate) fn set_script(&mut self, blocks: Vec<Block>) {
        self.script = blocks.into();
    }

    /// Recovery: allocations of the script not used by the re-executed transaction.
    pub(crate) fn script_left(&self) -> usize {
        self.script.len()
    }

    /// A block whose allocation bit is clear that this transaction may still use: one
    /// it allocated, or one a committed transaction allocated whose checkpoint has not
    /// written the bitmaps yet.
    fn pending(&self, b: Block) -> bool {
        self.writes.own_fresh(b)
            || match self.committed_state(b) {
                Some((true, _)) => true,
                // Freed after this snapshot was taken: still an object for it.
                Some((false, ts)) => ts > self.start_ts,
                None => false,
            }
    }

    /// The committed allocation state of `b` (and the commit timestamp) if a checkpoint
    /// has not written it yet, or (for a free) a snapshot older than it may still run.
    fn committed_state(&self, b: Block) -> Option<(bool, u64)> {
        self.sh.committed_state(b)
    }

    /// Validate a user offset: the object's real payload offset (the root slot's token
    /// maps to the slot) and its payload length.
    fn locate(&self, off: u64, len: usize) -> Result<(u64, usize)> {
        if self.sh.recovering && off == crate::engine::kit::validate::ROOT_SLOT_PAYLOAD && len <= 16
        {
            // Recovery re-executes logged write sets, which name the slot by its real
            // payload offset (users can only reach it through `Pool::root`'s token).
            return Ok((off, 16));
        }
        let (hdr, plen) = locate_object(&self.sh.alloc, off, len, |b| self.pending(b))?;
        Ok((hdr + HEADER as u64, plen))
    }

    /// The home payload of the object at `off` if it is the version this snapshot
    /// reads (`tlog`, *The home word*), noted in the read set of a serializable
    /// transaction.
    #[inline]
    fn read_home(&self, off: u64) -> Option<*const u8> {
        let w = tlog::home_word(&self.sh.heap, off)?;
        let seen = tlog::home_readable(w, self.sh.home_tag, self.start_ts)?;
        if self.iso >= Isolation::Serializable {
            self.reads.borrow_mut().push(Read::Home(w, seen));
        }
        // SAFETY: a payload validated by `locate_object`.
        Some(unsafe { self.sh.heap.ptr(off as usize) })
    }

    #[inline]
    fn snapshot(&self, off: u64, len: usize) -> (*const Entry, *const Version) {
        // SAFETY: validated by `locate_object`.
        let e = unsafe {
            self.sh
                .index
                .get_or_create(off, len, &self.sh.heap, &self.sh.alloc)
        };
        (e, tlog::visible(e, self.start_ts))
    }

    /// A block this thread reserved and no commit published, or one a complete
    /// commit freed: a small block goes to the engine's reuse lists (it may have come
    /// from them, with its bit still set at home, which the allocator's own lists must
    /// never hold); a large one back to the allocator as a reservation never
    /// published (a freed large block waits for its checkpoint instead).
    ///
    /// A block handed to this transaction was freed at or below its snapshot (module
    /// docs, *Blocks freed after the snapshot*), so the snapshot bounds its free's
    /// timestamp; snapshots only grow, so a retry can take it again.
    fn give_back(&mut self, b: Block) {
        if b.is_small() {
            let mut r = crate::engine::kit::shared_counts::lock(&self.sh.reuse);
            r.put_fresh(self.start_ts, b);
        } else {
            self.sh.alloc.unreserve(&mut self.cache, b);
        }
    }

    fn end(&mut self) {
        self.writes.clear_index();
        self.allocs.clear();
        self.items.clear();
        self.locked = 0;
        self.end_reads();
    }

    /// The part of [`Self::end`] every transaction needs, a snapshot's whole end: drop
    /// the read set and the operation, leave the grace-period clock, give the fallback
    /// word back.
    #[inline]
    fn end_reads(&mut self) {
        self.reads.get_mut().clear();
        self.op = None;
        self.sh.slots[self.slot].clock.finish();
        self.retries.end(&self.sh.fallback, self.slot);
        self.active = false;
    }

    fn unlock(&self) {
        for w in &self.writes[..self.locked] {
            if !w.entry.is_null() {
                // SAFETY: entries live as long as the index.
                unsafe { (*w.entry).unlock() };
            }
        }
    }

    /// Step 1: the OLog record.
    fn build_record(&mut self) {
        self.record.clear();
        self.record_tag = None;
        if let Some((id, args)) = &self.op {
            // Logical: the operation, and its allocation script. An allocation freed
            // again by the same transaction is logged as FREE (recovery does not mark
            // it allocated beforehand). The compact operation record when it has that
            // form (an index in the operation table, at most 31 blocks), else the
            // general entries.
            self.op_blocks.clear();
            for b in &self.allocs {
                let kept = matches!(
                    self.writes
                        .index_of(b.payload())
                        .map(|i| self.writes[i].kind),
                    Some(Kind::Fresh(_))
                );
                self.op_blocks.push((kept, *b));
            }
            let index = match self.op_index.get(id) {
                Some(&i) => Some(i),
                None => {
                    let i = self.sh.ops.index_of(&self.sh.heap, *id);
                    if let Some(i) = i {
                        self.op_index.insert(*id, i);
                    }
                    i
                }
            };
            if let Some(index) = index {
                self.record_tag = olog::op_record(&mut self.record, index, args, &self.op_blocks);
                if self.record_tag.is_some() {
                    return;
                }
            }
            self.record.op(*id, args);
            for b in &self.allocs {
                match self
                    .writes
                    .index_of(b.payload())
                    .map(|i| self.writes[i].kind)
                {
                    Some(Kind::Fresh(_)) => self.record.alloc(*b),
                    _ => self.record.free(*b),
                }
            }
            return;
        }
        // Physical: allocations first (recovery re-creates them before writing them).
        for w in self.writes.iter() {
            if let Kind::Fresh(b) = w.kind {
                self.record.alloc(b);
            }
        }
        for w in self.writes.iter() {
            match w.kind {
                Kind::Written | Kind::Fresh(_) => {
                    // SAFETY: a live private copy of `len` bytes.
                    let data = unsafe { std::slice::from_raw_parts(Version::data(w.copy), w.len) };
                    self.record.range(w.off, data);
                }
                Kind::Freed(b) => self.record.free(b),
                Kind::FreshFreed(_) => {}
            }
        }
    }

    /// Drop OLog records covered by the last checkpoint.
    fn recycle(&mut self) {
        let k = self.sh.k_done.load(std::sync::atomic::Ordering::Acquire);
        self.log
            .recycle(&self.sh.heap, u64::MAX, k.saturating_add(1));
    }

    /// Step 2a: room in the OLog.
    fn reserve_log(&mut self, n: usize) -> Result<()> {
        let rec = super::OLOG_FRAMING.header_len(n) + n;
        if rec > self.log.max_record() {
            return Err(Error::TooLargeForLog(Box::new(
                crate::error::TooLargeForLog {
                    needed: rec,
                    capacity: self.log.max_record(),
                },
            )));
        }
        while !self.log.fits(n) {
            self.recycle();
            if !self.log.fits(n) {
                clog::checkpoint(&self.sh)?;
                self.recycle();
            }
        }
        Ok(())
    }

    /// Step 2b: the cost of the checkpoint items in the budget.
    fn items_cost(&self) -> u64 {
        self.writes
            .iter()
            .map(|w| match w.kind {
                Kind::Written => 16 + w.len as u64,
                Kind::Fresh(_) => 32 + w.len as u64,
                Kind::Freed(_) => 16,
                Kind::FreshFreed(_) => 0,
            })
            .sum()
    }

    /// The checkpoint items (after locking: entries known; timestamps filled in later).
    fn build_items(&mut self) {
        self.items.clear();
        for w in self.writes.iter() {
            match w.kind {
                Kind::Written => self.items.push(Item::Write {
                    ts: 0,
                    off: w.off,
                    len: w.len,
                    entry: w.entry,
                }),
                Kind::Fresh(b) => {
                    self.items.push(Item::Alloc { ts: 0, b });
                    self.items.push(Item::Write {
                        ts: 0,
                        off: w.off,
                        len: w.len,
                        entry: w.entry,
                    });
                }
                Kind::Freed(b) => self.items.push(Item::Free { ts: 0, b }),
                Kind::FreshFreed(_) => {}
            }
        }
        debug_assert_eq!(
            self.items.iter().map(|i| i.cost()).sum::<u64>(),
            self.items_cost()
        );
    }

    /// Step 3: lock and first-committer-wins check.
    fn lock_and_check(&mut self) -> Result<()> {
        for i in 0..self.writes.len() {
            let w = &self.writes[i];
            if let Kind::FreshFreed(_) = w.kind {
                // Allocated and freed by us: nothing to publish, nothing to lock.
                self.locked = i + 1;
                continue;
            }
            // SAFETY: validated when it entered the write set (or a reserved block).
            let e = unsafe {
                self.sh
                    .index
                    .get_or_create(w.off, w.len, &self.sh.heap, &self.sh.alloc)
            };
            if !e.try_lock(self.slot) {
                self.locked = i;
                return Err(Error::Conflict);
            }
            self.writes[i].entry = e;
            self.locked = i + 1;
            // Before our timestamp: readers stop reading this object at home.
            if let Some(w) = tlog::home_word(&self.sh.heap, self.writes[i].off) {
                tlog::mark_dirty(w, self.sh.home_tag);
            }
            // A block we allocated was freed at or below S (module docs), so its
            // `last_ts` is too, unless a stale writer got in first.
            if e.last_ts() > self.start_ts {
                return Err(Error::Conflict);
            }
        }
        Ok(())
    }

    /// Step 5: no object of the read set was committed to after S or is being
    /// committed by someone else. Runs after our timestamp was taken: a committer with
    /// a smaller timestamp locked before its increment, which precedes ours, so we see
    /// its lock or, after its unlock, its `last_ts`.
    fn validate(&self) -> bool {
        if crate::mutation::active!(VALIDATION) {
            return true;
        }
        self.reads.borrow().iter().all(|&r| match r {
            Read::Chain(e) => {
                // SAFETY: entries live as long as the index.
                let e = unsafe { &*e };
                !e.locked_by_other(self.slot) && e.last_ts() <= self.start_ts
            }
            Read::Home(w, seen) => {
                // SAFETY: a home word inside the mapped image (`tlog::home_word`).
                // Acquire, after our clock increment: a committer with a smaller
                // timestamp marked the word dirty before its increment, which ours
                // follows in the clock's modification order (release sequence).
                let now = unsafe { &*w }.load(Acquire);
                // A word we marked dirty ourselves: `lock_and_check` found the object
                // unchanged since S under its lock.
                now == seen || {
                    let off =
                        w as u64 - self.sh.heap.base() as u64 + crate::heap::alloc::HEADER as u64;
                    self.writes
                        .index_of(off)
                        .is_some_and(|i| !self.writes[i].entry.is_null())
                }
            }
        })
    }

    fn pushed(&self) -> impl Iterator<Item = &WriteEntry> {
        self.writes
            .iter()
            .filter(|w| matches!(w.kind, Kind::Written | Kind::Fresh(_)))
    }

    fn commit_inner(&mut self) -> Result<()> {
        running(self.active)?;
        if self.writes.publishes_nothing() {
            // Read-only (serializable ones too: they serialize at S).
            self.rollback();
            return Ok(());
        }
        // (After the read-only return: a clone is a write of the `Arc`'s count, which
        // shares a line with fields every thread reads.)
        let sh = self.sh.clone();
        let slot = &sh.slots[self.slot];
        // The transaction reads nothing from here on (its copies are private, its
        // read set names chains and home words): its snapshot stops bounding
        // checkpoints' cuts and truncation, so a commit that waits for a checkpoint
        // (OLog or budget full) never waits for its own snapshot.
        slot.clock.finish();
        // 1, 2.
        self.build_record();
        if !sh.recovering {
            if let Err(e) = self.reserve_log(self.record.len()) {
                self.rollback();
                return Err(e);
            }
        }
        let cost = self.items_cost();
        if let Err(e) = clog::reserve_budget(&sh, cost) {
            self.rollback();
            return Err(e);
        }
        // 3.
        if let Err(e) = self.lock_and_check() {
            self.unlock();
            clog::unreserve_budget(&sh, cost);
            self.rollback();
            return Err(e);
        }
        self.build_items();
        // 4. Push, guard, COMMITTING, tick.
        for w in self.pushed() {
            // SAFETY: we hold the lock; the copy is ours and of the object's size.
            unsafe { (*w.entry).push(w.copy, PENDING) };
        }
        // Guard: a lower bound of the timestamp we are about to take.
        sh.enter_commit(self.slot);
        fence(SeqCst);
        for w in self.pushed() {
            // SAFETY: our pushed version.
            unsafe { Version::set_stamp(w.copy, COMMITTING) };
        }
        let ts = sh.clock.tick();
        slot.committing.store(ts, Release);
        // The compact OLog header holds 48 bits of commit timestamp: past them a
        // record's order could not be told at recovery, so the commit is refused
        // (2^48 commits: about a year of 10 M commits per second).
        let clock_exhausted = ts > olog::COMPACT_MAX_TS;
        // 5.
        if clock_exhausted || (self.iso >= Isolation::Serializable && !self.validate()) {
            for w in self.pushed() {
                // SAFETY: our pushed version; the chain owns it from now on.
                unsafe { Version::set_stamp(w.copy, ABORTED) };
            }
            for w in self.writes.iter_mut() {
                if matches!(w.kind, Kind::Written | Kind::Fresh(_)) {
                    w.copy = std::ptr::null_mut();
                }
            }
            self.unlock();
            slot.committing.store(u64::MAX, Release);
            clog::unreserve_budget(&sh, cost);
            self.rollback();
            if clock_exhausted {
                return Err(Error::corrupt(format!(
                    "commit timestamp {ts} does not fit the operation log's 48 bits"
                )));
            }
            crate::engine::kit::shared_counts::count_write(&sh.stats.validation_aborts);
            sh.stats.validation_aborts.fetch_add(1, Relaxed);
            return Err(Error::Conflict);
        }
        slot.clock.finish();
        // 6. Undurable stamp, items, OLog persist.
        for w in self.pushed() {
            // SAFETY: our pushed version.
            unsafe { Version::set_stamp(w.copy, ts | UNDURABLE) };
        }
        for it in self.items.iter_mut() {
            match it {
                Item::Write { ts: t, .. }
                | Item::Alloc { ts: t, .. }
                | Item::Free { ts: t, .. } => *t = ts,
            }
        }
        self.freed.clear();
        clog::push_items(&sh, &self.items, cost, &mut self.freed);
        if !sh.recovering {
            match self.record_tag {
                Some(tag) => self
                    .log
                    .append_tagged(&sh.heap, self.record.bytes(), tag, ts),
                None => self.log.append(&sh.heap, self.record.bytes(), ts),
            };
            sh.stats.add_olog_bytes(
                self.slot,
                (self.record.len() + super::OLOG_FRAMING.header_len(self.record.len())) as u64,
            );
            if !crate::mutation::active!(OLOG_PERSIST) {
                sh.heap.fence();
            }
        }
        // Visible.
        for w in self.pushed() {
            // SAFETY: our pushed version.
            unsafe { Version::set_stamp(w.copy, ts) };
        }
        let oldest = sh.oldest_active(ts);
        for w in self.writes.iter() {
            if w.entry.is_null() {
                continue;
            }
            // SAFETY: locked by us; `oldest` bounds every snapshot.
            unsafe {
                (*w.entry).mark(ts);
                if matches!(w.kind, Kind::Written | Kind::Fresh(_)) {
                    tlog::truncate(&*w.entry, oldest, &sh.index.live);
                }
            }
        }
        self.unlock();
        slot.committing.store(u64::MAX, Release);
        if !sh.recovering {
            sh.wait_predecessors(ts);
        }
        let recovering = sh.recovering;
        if !recovering && !self.freed.is_empty() {
            // Reusable now that this commit is complete: its OLog record (the free) is
            // durable and every smaller timestamp is complete, so a commit that reuses
            // a block has a larger timestamp and can never be durable without this one
            // (see `clog`, *Reuse inside a window*).
            let mut r = crate::engine::kit::shared_counts::lock(&sh.reuse);
            for &(b, fresh) in &self.freed {
                if fresh {
                    r.put_fresh(ts, b);
                } else {
                    r.held.push((ts, b));
                }
            }
        }
        let mut writes = std::mem::take(&mut self.writes.list);
        for w in writes.drain(..) {
            if let Kind::Freed(_) = w.kind {
                if !w.copy.is_null() {
                    // SAFETY: an unlinked copy of an object freed by this transaction.
                    unsafe { Version::free(w.copy, &sh.index.live) }
                }
            }
            match w.kind {
                Kind::FreshFreed(b) if !recovering => self.give_back(b),
                _ => {}
            }
        }
        self.writes.list = writes;
        self.end();
        // 7.
        if clog::above_high_water(&sh) {
            clog::checkpoint(&sh)?;
        }
        if self.log.used() > self.log.capacity() / 2 {
            self.recycle();
        }
        Ok(())
    }

    /// Recovery: re-apply a physical OLog record as a transaction of this thread.
    pub(crate) fn replay_physical(&mut self, entries: &[log::Entry<'_>]) -> Result<()> {
        for e in entries {
            match *e {
                log::Entry::Alloc(b) => {
                    self.script.push_back(b);
                    self.alloc(b.payload_len())?;
                }
                log::Entry::Range { off, data } => {
                    let p = self.write(off, data.len())?;
                    // SAFETY: our private copy of at least `data.len()` bytes.
                    unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), p, data.len()) };
                }
                log::Entry::Free(b) => self.free(b.payload())?,
                _ => return Err(Error::corrupt("unexpected entry in an OLog record")),
            }
        }
        Ok(())
    }
}

impl Rollback for TimestoneThread {
    /// End the transaction, dropping private copies (not those already linked).
    fn rollback(&mut self) {
        let recovering = self.sh.recovering;
        let mut writes = std::mem::take(&mut self.writes.list);
        for w in writes.drain(..) {
            if !w.copy.is_null() {
                // SAFETY: an unlinked private copy owned by us.
                unsafe { Version::free(w.copy, &self.sh.index.live) };
            }
            if let Kind::Fresh(b) | Kind::FreshFreed(b) = w.kind {
                if !recovering {
                    self.give_back(b);
                }
            }
        }
        self.writes.list = writes;
        self.end();
    }

    fn is_running(&self) -> bool {
        self.active
    }
}

impl EngineThread for TimestoneThread {
    fn slot(&self) -> usize {
        self.slot
    }
    fn begin(&mut self, opts: &TxOptions) {
        self.abort_running();
        if self.retries.begin() {
            // (module docs, *Fallback*)
            let sh = &self.sh;
            let (me, nested) = (self.slot, self.nested);
            self.retries
                .take_and_drain_slots(&sh.fallback, &sh.clock, &sh.slots, me, nested);
        }
        self.active = true;
        self.iso = opts
            .isolation
            .unwrap_or(<super::Timestone as crate::engine::EngineDef>::DEFAULT_ISOLATION);
        let sh = &self.sh;
        self.start_ts = sh.slots[self.slot]
            .clock
            .start_with(&sh.clock, |t| sh.horizon(t));
    }

    /// A snapshot wrote, allocated and freed nothing (the API refuses those in a
    /// read-only transaction), and its reads are of committed versions, whose OLog
    /// records were durable before they became visible: ending it is `end_reads`, with
    /// nothing to wait for.
    #[inline]
    fn end_snapshot(&mut self, _wait: bool) -> Result<Result<()>> {
        running(self.active)?;
        debug_assert!(
            self.writes.list.is_empty() && self.allocs.is_empty() && self.items.is_empty()
        );
        self.end_reads();
        Ok(Ok(()))
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

    fn fast_reads(&mut self) -> FastPath {
        // Snapshot transactions only: serializable ones note each read (`read_home`).
        // The path ends at the first write (`FastReads::versioned`): the written
        // objects' versions are private copies.
        // A snapshot at `PTR_MASK` would pass a dirty word (`tlog`, *The home word*).
        if !self.active
            || self.iso != Isolation::Snapshot
            || self.start_ts >= crate::engine::kit::cc::header_word::PTR_MASK
        {
            return FastPath::NONE;
        }
        // SAFETY: the thread state holds the allocator (through `sh`) and outlives
        // the attempt the value is handed to; a block allocated at home whose word
        // passes the check is an object whose home is the version visible at
        // `start_ts`, unchanged while the attempt runs (`tlog`, *The home word*).
        self.fast
            .set(unsafe { FastReads::versioned(&self.sh.alloc, self.sh.home_tag, self.start_ts) });
        // SAFETY: `fast` lives as long as this state, which the `Tx` the path goes to
        // borrows, and changes only here, when the next attempt begins.
        unsafe { self.fast.path() }
    }

    fn set_operation(&mut self, op: Option<(u32, &[u8])>) {
        self.op = op.map(|(id, a)| (id, a.to_vec()));
    }

    #[inline]
    fn read(&self, off: u64, len: usize) -> Result<*const u8> {
        running(self.active)?;
        let (off, plen) = self.locate(off, len)?;
        if let Some(w) = self.writes.get(off) {
            if !w.copy.is_null() {
                if len > w.len {
                    return Err(Error::invalid_pointer(format!(
                        "object at {off:#x} has {} bytes, not {len}",
                        w.len
                    )));
                }
                // SAFETY: our live private copy.
                return Ok(unsafe { Version::data(w.copy) });
            }
        }
        if let Some(p) = self.read_home(off) {
            return Ok(p);
        }
        let (e, v) = self.snapshot(off, plen);
        if self.iso >= Isolation::Serializable {
            self.reads.borrow_mut().push(Read::Chain(e));
        }
        // SAFETY: a version visible at S, kept until we end.
        Ok(unsafe { Version::data(v) })
    }

    fn write(&mut self, off: u64, len: usize) -> Result<*mut u8> {
        running(self.active)?;
        self.check_fallback()?;
        let (off, plen) = self.locate(off, len)?;
        if let Some(i) = self.writes.index_of(off) {
            if self.writes[i].copy.is_null() {
                let (_, v) = self.snapshot(off, plen);
                // SAFETY: `v` is live with `plen` bytes.
                self.writes[i].copy = unsafe { Version::copy_of(v, plen, &self.sh.index.live) };
            } else if len > self.writes[i].len {
                return Err(Error::invalid_pointer(format!(
                    "object at {off:#x} has {} bytes, not {len}",
                    self.writes[i].len
                )));
            }
            // SAFETY: our private copy.
            return Ok(unsafe { Version::data(self.writes[i].copy) });
        }
        let (e, v) = self.snapshot(off, plen);
        if self.iso >= Isolation::Serializable {
            self.reads.get_mut().push(Read::Chain(e));
        }
        // SAFETY: `v` is live with `plen` bytes.
        let copy = unsafe { Version::copy_of(v, plen, &self.sh.index.live) };
        self.writes
            .push(WriteEntry::new(off, plen, copy, Kind::Written));
        // SAFETY: ours.
        Ok(unsafe { Version::data(copy) })
    }

    fn alloc(&mut self, len: usize) -> Result<u64> {
        running(self.active)?;
        self.check_fallback()?;
        let b = if self.sh.recovering {
            let b = self.script.pop_front().ok_or_else(|| {
                Error::corrupt("re-executed operation allocates more than it did")
            })?;
            if Allocator::block_size_for(len) != Some(b.size) {
                return Err(Error::corrupt(format!(
                    "re-executed operation allocates {len} bytes where it allocated a block of {}",
                    b.size
                )));
            }
            b
        } else {
            // Small blocks freed by complete commits first (`clog`, *Reuse inside a
            // window*), then the allocator. Large blocks freed since the last
            // checkpoint become reusable only when a checkpoint has made their free
            // durable: when the heap looks full, run one and try again, a few times
            // (another thread's commit that frees space may be in flight, or a reader's
            // old snapshot may hold the cut back), before reporting the pool full.
            // A checkpoint's cut never passes this transaction's own snapshot, and
            // small blocks freed after it are not handed to it: when commits followed
            // the snapshot, what they freed is out of this attempt's reach, so it
            // restarts with a newer snapshot (a conflict) rather than report a pool
            // that is not full.
            let small =
                Allocator::block_size_for(len).filter(|&size| Block { offset: 0, size }.is_small());
            let mut attempt = 0;
            let b = loop {
                let s = self.start_ts;
                let fresh = small.and_then(|size| {
                    let mut r = crate::engine::kit::shared_counts::lock(&self.sh.reuse);
                    r.take_fresh(size, s)
                        .or_else(|| self.sh.eager_reuse.then(|| r.take_held(size, s)).flatten())
                });
                if let Some(b) = fresh {
                    break b;
                }
                match self.sh.alloc.reserve(&mut self.cache, len) {
                    Err(Error::OutOfSpace { .. }) if attempt < 8 => {
                        // A block live at K_done and freed inside the window (its new
                        // contents then take a CLog copy), before a checkpoint.
                        let held = small.and_then(|size| {
                            let mut r = crate::engine::kit::shared_counts::lock(&self.sh.reuse);
                            r.take_held(size, s)
                        });
                        if let Some(b) = held {
                            break b;
                        }
                        if attempt > 0 && self.sh.clock.now() > s {
                            return Err(Error::Conflict);
                        }
                        clog::checkpoint(&self.sh)?;
                        if attempt > 0 {
                            std::thread::sleep(std::time::Duration::from_micros(200 << attempt));
                        }
                        attempt += 1;
                    }
                    r => break r?,
                }
            };
            if !b.is_small()
                && matches!(self.committed_state(b), Some((false, ts)) if ts > self.start_ts)
            {
                // A large block freed after S, released by a checkpoint since: still a
                // live object for S (module docs, *Blocks freed after the snapshot*).
                // Retry with a snapshot that sees the free.
                self.sh.alloc.unreserve(&mut self.cache, b);
                return Err(Error::Conflict);
            }
            b
        };
        // SAFETY: zeroed copy.
        let copy = unsafe { Version::new(b.payload_len() & !7, None, &self.sh.index.live) };
        self.writes.push(WriteEntry::fresh(b, copy));
        self.allocs.push(b);
        Ok(b.payload())
    }

    fn free(&mut self, off: u64) -> Result<()> {
        running(self.active)?;
        self.check_fallback()?;
        let root = root_object(|o, l| self.read(o, l))?;
        let b0 = locate_block_to_free(&self.sh.alloc, off, root, |b| self.pending(b))?;
        let off = b0.payload();
        // A block this transaction allocated may be one a complete commit freed and
        // the reuse lists handed back (`clog`, *Reuse inside a window*): its committed
        // state is still that free, but the block is this transaction's live object, so
        // the write set, not the committed state, decides (a double free there is
        // refused by `Kind::freed`).
        let own = self.writes.own_fresh(b0);
        if let Some((false, ts)) = self.committed_state(b0).filter(|_| !own) {
            // Freed by a committed transaction: after our snapshot, the first committer
            // wins (retry); before it, the object is gone for us.
            return Err(if ts > self.start_ts {
                Error::Conflict
            } else {
                Error::invalid_pointer(format!(
                    "{off:#x} is not an allocated object (already freed)"
                ))
            });
        }
        if let Some(i) = self.writes.index_of(off) {
            let w = &mut self.writes[i];
            let b = match w.kind {
                Kind::Fresh(b) | Kind::FreshFreed(b) | Kind::Freed(b) => b,
                Kind::Written => b0,
            };
            w.kind = w.kind.freed(off, b)?;
            return Ok(());
        }
        let b = b0;
        if self.iso >= Isolation::Serializable {
            // SAFETY: `b` is a block of the heap: its payload is an object.
            let e = unsafe {
                self.sh.index.get_or_create(
                    off,
                    b.payload_len() & !7,
                    &self.sh.heap,
                    &self.sh.alloc,
                )
            };
            self.reads.get_mut().push(Read::Chain(e));
        }
        self.writes.push(WriteEntry::freed(b));
        Ok(())
    }

    fn commit(&mut self) -> Result<DurableToken> {
        self.commit_inner()?;
        // The OLog record is durable before the versions become visible.
        Ok(DurableToken::DURABLE)
    }

    fn quiesce(&mut self) {
        self.abort();
        self.recycle();
        if !self.sh.recovering {
            self.sh.alloc.drain(&mut self.cache);
        }
    }
}

impl Drop for TimestoneThread {
    fn drop(&mut self) {
        self.quiesce();
    }
}
