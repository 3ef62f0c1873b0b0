//! One thread's Pisces transactions: Algorithm 1's TM_START / READ / WRITE / COMMIT.
//!
//! Copies live in DRAM (flush-diff, §4): `write` links a DRAM copy to the object's
//! header word with a CAS (encounter-time locking) and the transaction works on the
//! copy. At commit the copy is compared with home word by word and only changed words
//! are logged (or, with flush-diff off, whole objects), the record is persisted with one
//! fence, the transaction becomes visible through its endTS, and its write-back joins
//! the thread's group-commit batch.
//!
//! Allocation reserves a block and links a zeroed copy to its header like a write, so a
//! new object becomes reachable only through the normal write-back (after a grace
//! period) and a stale pointer to a recently freed block never observes a home write
//! while a reader could be looking.
//!
//! # Fallback (a bound on attempts)
//! A write of an object that a commit changed after the snapshot conflicts (first
//! updater wins), so an update transaction that runs longer than the gap between two
//! commits of an object it updates would abort for as long as their writers run. After
//! [`THRESHOLD`](crate::engine::kit::cc::fallback::THRESHOLD) conflict aborts in a row
//! it takes the pool's fallback word before its next attempt
//! ([`crate::engine::kit::cc::fallback`]): it ticks the clock and waits, like a grace
//! period, for every other slot's transaction that started before the tick (or until
//! its hold's deadline), and a transaction that finds another slot's hold running
//! before its first lock aborts and waits for it in `after_abort`, slot inactive,
//! holding nothing. So the holder's attempt meets no concurrent writer and commits (a
//! copy of a commit still waiting for its write-back may make it abort once;
//! `after_abort` then helps that write-back). Transactions that only read never look
//! at the word and never wait. The race between the holder's scan and a starting
//! writer is closed by the fences of `SlotClock::start` and of the drain
//! (`fallback::drain`). Nested transactions neither take the word nor wait for it
//! (`nested`). Cost: one load of the word per update transaction, at its first write.

//!
//! # Deferred durability
//! A transaction run with [`Durability::Deferred`](crate::Durability::Deferred) appends
//! its record without the persist stage's fence, in the log's *unfenced run*
//! ([`crate::engine::kit::log::redo_log`], "Unfenced runs"), publishes the run for other
//! threads ([`crate::engine::kit::log::unfenced_run`]) and becomes visible at once: on
//! the file medium the commit costs no device sync. Its token names its record; a wait
//! for it is one fence of this thread, which persists the whole run. What keeps a crash
//! image one that a history produced:
//! * the log's chain stops at a run's first lost record, so recovery keeps a prefix of
//!   each thread's commits (a transaction may have read its thread's earlier one);
//! * a transaction that read a copy of *another* slot's transaction whose record was
//!   appended unfenced (`TxRecord::unfenced_seq`, checked on the copy path of `read`)
//!   makes the other slots' runs durable before it appends its own record, so its record
//!   never reaches the device before one it depends on; a read-only one that returns as
//!   durable waits for every run it read from. Reads of home need nothing: home is
//!   written back only after the record is durable (next point), and a write of an
//!   object still locked by such a transaction aborts and helps its write-back;
//! * the write-back makes the owner's run durable before it writes home
//!   (`PiscesShared::write_back_first`): the page cache may write home pages back at
//!   any time, and only the record could replay a transaction written home in part.
//!   With group commit the sync is shared by a batch's transactions.
//!
//! A run grows to at most [`MAX_UNFENCED`](crate::engine::kit::log::redo_log::MAX_UNFENCED)
//! records before the thread fences; a commit with durability on return ends it with
//! its own fence.
//!
//! # Processes that die
//! On a pool shared by several processes a thread may wait for a slot of a process that
//! was killed: its lock words, its clock (a grace period), its record's critical section
//! (a reader's visibility check), the watermark its bounds hold (log space), or the lock
//! of an uncommitted attempt (a write retries). Each such wait asks, once it has lasted
//! [`PEER_CHECK`](crate::peers::PEER_CHECK), whether the slot's process is alive; a dead
//! one is recovered by another thread while the wait goes on (`super::peer_recovery`).
//! Where it cannot be, it *stops* the pool (`crate::peers`): the wait unwinds out to the
//! entry point of this state that it ran in. On a shared pool every entry point that may wait runs
//! through [`PiscesThread::guarded`], which catches that, abandons the state (forgets
//! its attempt without rolling it back: an attempt whose commit had begun may already be
//! read by other processes, and the next open recovers the pool as after a crash) and
//! fails with [`Error::PeerDied`]; so do all later calls, and every write-back in any
//! process of the pool (`PiscesShared::refuse_if_stopped`: a write-back abandoned half
//! done must not be done twice). A snapshot's begin and end wait for nothing: a
//! read-only snapshot may still complete on a stopped pool, from the committed state,
//! unless it reads an object whose writer died in its critical section. A state of a
//! pool of one process takes none of these paths (one test of `shared` per entry point).

use super::attempt::{Attempt, AttemptId};
use super::batch::{batch_limit, Committed, RETIRED_BEFORE_RECLAIM};
use super::plan::{is_fresh_freed, kind_of, kind_word, ranges_bound, HomeRange, PlanObject};
use super::shared::{CopyHdr, PiscesShared, Slot, SlotView, COPY_HDR, LOG_HANDED_OVER};
use crate::engine::kit::cc::fallback::Retries;
use crate::engine::kit::cc::header_word::TAG_MASK;
use crate::engine::kit::changed_words::changed_word_runs;
use crate::engine::kit::fast_reads::{FastPath, FastReads, OwnedFastReads};
use crate::engine::kit::log::redo_log::{LogWriter, RecordBuilder};
use crate::engine::kit::shared_counts::count_write;
use crate::engine::kit::validate::running;
use crate::engine::EngineThread;
use crate::heap::alloc::{Block, ThreadCache, HEADER};
use crate::heap::ROOT_SLOT_OFFSET;
use crate::{Error, Result};
use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed, Release, SeqCst};
use std::sync::Arc;

use crate::engine::kit::write_set::WriteKind as Kind;

/// Read-only commits in a row, over a batch that updates no longer fill, after which
/// the thread writes the batch back itself (`write_back_after_reads`). Large enough
/// that a mix of reads and updates rarely meets it between two updates (at 20 %
/// updates, 0.8^32: about one run in 1,300), so its batches still fill to a whole
/// group; small enough that a read-only phase pays the copy path for only that many
/// transactions.
pub(super) const READ_ONLY_COMMITS_BEFORE_WRITE_BACK: u32 = 32;

crate::mutation::point! {
    /// Log space is recycled without first persisting the watermark.
    pub(crate) static WATERMARK = "watermark";
    /// The write-back that publishes a free leaves the block's header word marked live
    /// (allocated), so the read fast path still accepts the freed object.
    pub(crate) static FREED_STAYS_LIVE = "freed-stays-live";
    /// A writer's check that a block it just locked is still allocated trusts any
    /// unlocked header word the lock replaced (also the freed marker), not only this
    /// run's live marker.
    pub(crate) static LOCKED_CHECK_TRUSTS_ANY = "locked-check-trusts-any";
    /// An update that read a copy of another slot's transaction whose durability was
    /// deferred appends its record without first making that transaction's durable.
    pub(crate) static UNFENCED_DEPENDENCY = "unfenced-dependency";
}

/// An entry of the running attempt's write set: its copy, which records the rest
/// ([`CopyHdr`]).
#[derive(Clone, Copy, Debug)]
struct WriteEntry {
    copy: *mut CopyHdr,
}

impl WriteEntry {
    fn hdr(&self) -> &CopyHdr {
        // SAFETY: the write set's copies are live copies of the running attempt, which
        // outlives the entries (they are drained before it ends), and their header
        // fields are written only through `set_kind` and at creation, never while a
        // reference from here lives.
        unsafe { &*self.copy }
    }

    /// Offset of the object's header word.
    #[inline]
    fn header(&self) -> u64 {
        self.hdr().home - HEADER as u64
    }

    /// The header word's value before our lock.
    #[inline]
    fn prev(&self) -> u64 {
        self.hdr().prev
    }

    #[inline]
    fn kind(&self) -> Kind {
        kind_of(self.header(), self.hdr().kind)
    }

    /// The kind as its word ([`kind_word`]).
    #[inline]
    fn kind_word(&self) -> u64 {
        self.hdr().kind
    }

    fn set_kind(&self, kind: Kind) {
        let word = kind_word(self.header(), kind);
        // SAFETY: our own live copy (see `hdr`); no reference to it is alive.
        unsafe { (*self.copy).kind = word };
    }
}

/// A thread's Pisces state.
pub(crate) struct PiscesThread {
    sh: Arc<PiscesShared>,
    slot: usize,
    /// `&sh.slots[slot]`'s state in the region, kept so that begin and commit reach the slot in one load
    /// (not the shared state, the vector and an index). Valid while `sh` lives: the
    /// vector is never resized and `sh` is held here.
    own: std::ptr::NonNull<Slot>,
    /// `sh.slots[slot]`, this thread's view of its slot.
    own_view: std::ptr::NonNull<SlotView>,
    cache: ThreadCache,
    log: LogWriter,
    /// The running attempt (of the slot's table; [`AttemptId::NO_ROOM`] when the table
    /// had none for a transaction that may not wait, which then may not write).
    attempt: Option<AttemptId>,
    /// An attempt that linked nothing (read-only commit), reusable at once.
    idle_attempt: Option<AttemptId>,
    /// The arena offset of the running attempt's commit record once the attempt has
    /// written, else 0 (before its first copy no header word names the attempt, and 0
    /// is no writer's): what reads and locks compare a copy's writer with, kept here so
    /// that they need not look the attempt up in the table.
    own_record: u64,
    /// A snapshot runs (`begin_snapshot` to `end_snapshot` or `abort`): reads only,
    /// with no attempt (it links nothing, so it needs no commit record; `record_ptr`
    /// is then null, which no writer's record equals).
    in_snapshot: bool,
    start_ts: u64,
    writes: Vec<WriteEntry>,
    /// An upper bound of the home ranges the write set's plan can need: the
    /// `plan::ranges_bound` of every entry pushed since the last commit or rollback
    /// (entries given back in between still count: a bound only).
    plan_ranges: usize,
    record: RecordBuilder,
    /// Slot whose pending lock made us abort: helped before the retry.
    help_hint: Option<usize>,
    /// Out of space with other slots' frees pending: help them all before the retry.
    oos_help: bool,
    /// Conflict retries spent on reclaiming space for this transaction.
    oos_rounds: u32,
    durable_watermark: u64,
    /// Reads of this attempt that met an object locked by another writer (the copy
    /// path: the reader chose between that writer's copy and home).
    attempt_locked_reads: std::cell::Cell<u64>,
    /// Of those, the ones in attempts that committed read-only, since the state was
    /// made ([`EngineThread::ro_locked_reads`]).
    ro_locked_reads: u64,
    /// Read-only commits since this slot's last update commit that found its batch
    /// not empty (`write_back_after_reads`).
    ro_commits_over_batch: u32,
    /// The read fast path every attempt hands out: built once, as the allocator's
    /// geometry copy and this run's live marker do not change while `sh` lives.
    fast: OwnedFastReads,
    /// The running transaction is nested in a transaction of another pool on this
    /// thread ([`EngineThread::set_nested`]): it never waits for a grace period,
    /// since the reader it would wait for may be that other pool's transaction's
    /// counterpart on another thread, waiting in turn for ours. Write-backs it would
    /// wait for are left pending (they need no wait later), and where progress needs
    /// one it aborts as a conflict, which the API bounds.
    nested: bool,
    /// Conflict aborts in a row and the fallback word (module docs, *Fallback*).
    retries: Retries,
    /// The attempt aborted because another slot holds the fallback word.
    fallback_wait: bool,
    /// The running transaction's durability is deferred (*Deferred durability*).
    deferred: bool,
    /// What the running transaction read of records appended unfenced and maybe not
    /// durable yet: [`READ_OWN_UNFENCED`] and [`READ_OTHER_UNFENCED`] bits.
    read_unfenced: std::cell::Cell<u8>,
    /// Other processes share the pool (`sh.shared`, kept here for one load at the
    /// entry points): every entry point that may wait runs guarded
    /// ([`PiscesThread::guarded`], module docs, *Processes that die*).
    shared: bool,
    /// 0, or `1 + s` once a wait of this state gave up on dead slot `s` (or found the
    /// pool stopped): the state was abandoned, and every entry point fails.
    stopped: std::cell::Cell<u32>,
    /// The slot of the writer whose lock made the last attempt abort (a shared pool:
    /// `after_abort` asks whether its process is alive).
    blocked_by: Option<usize>,
    /// When the retries blocked by other writers began, or when the last such writer
    /// was asked about (see `blocked_by`).
    blocked_since: Option<std::time::Instant>,
}

crate::mutation::hook_point! {
    /// A write has linked its copy to the object's header word (the object is locked
    /// by an attempt that has not committed).
    pub(crate) static COPY_LINKED = "copy-linked";
    /// A commit has announced its persist timestamp (the persist stage has begun) and
    /// not appended its record yet.
    pub(crate) static BEFORE_APPEND = "before-append";
    /// A commit's record is durable (the fence ran) and the transaction not visible.
    pub(crate) static AFTER_FENCE = "after-fence";
    /// A commit is visible and not in its slot's batch yet (no write-back knows it).
    pub(crate) static BEFORE_BATCH = "before-batch";
    /// A commit's entry is in its slot's batch, and the slot's persist stage not
    /// ended yet (`persisting_ts` still names the commit).
    pub(crate) static BATCH_JOINED = "batch-joined";
}

/// [`PiscesThread::read_unfenced`]: a copy of this slot's own committed transaction
/// whose record is in the log's unfenced run.
const READ_OWN_UNFENCED: u8 = 1;
/// [`PiscesThread::read_unfenced`]: a copy of another slot's such transaction.
const READ_OTHER_UNFENCED: u8 = 2;
/// The durability token of a read-only transaction that read copies of transactions
/// whose records may not be durable yet: its wait makes every slot's run durable.
const DEPENDENCIES: crate::engine::DurableToken = crate::engine::DurableToken(u64::MAX - 1);

// SAFETY: the raw pointers in `writes` point into `attempt`, owned by this struct; the
// state moves between threads only between transactions (the API checks a state out to
// one thread at a time). `own` points into the shared state, which every thread of the
// pool reaches through `sh` anyway (a slot is atomics and locks).
unsafe impl Send for PiscesThread {}

impl PiscesThread {
    /// This thread's slot in the shared state (through `own`: the begin and commit of
    /// every transaction use it).
    #[inline(always)]
    fn own_slot(&self) -> &Slot {
        debug_assert!(std::ptr::eq(self.own.as_ptr(), &*self.sh.slots[self.slot]));
        // SAFETY: `new` took `own` from `sh.slots[slot]`, the slot's state in the
        // engine's region, which that view keeps mapped; it lives in `sh`, which this
        // state holds, so the slot outlives `&self`. Only shared references to a slot
        // are ever made (its fields are atomics and locks).
        unsafe { self.own.as_ref() }
    }

    /// This thread's slot as this process sees it (its attempts and batch).
    #[inline(always)]
    fn own_view(&self) -> &SlotView {
        // SAFETY: `new` took `own_view` from `sh.slots[slot]`; the vector is never
        // resized and lives in `sh`, which this state holds, so the view outlives
        // `&self`; only shared references to it are made.
        unsafe { self.own_view.as_ref() }
    }

    /// State for `slot`; only one may exist per slot.
    pub(crate) fn new(sh: Arc<PiscesShared>, slot: usize) -> PiscesThread {
        assert!(slot < sh.slots.len(), "thread slot {slot} out of range");
        let own_view = std::ptr::NonNull::from(&sh.slots[slot]);
        let own = std::ptr::NonNull::from(&*sh.slots[slot]);
        let log = sh.log_writer(slot);
        let sh_shared = sh.shared;
        // SAFETY: the allocator lives in `sh`, which this state holds and which outlives
        // every attempt (the only place the value is handed out, `fast_reads`); a header
        // word equal to the live marker means allocated (`shared::LIVE`) and unlocked,
        // for which `read` returns home.
        let fast = OwnedFastReads::new(unsafe { FastReads::live_word(&sh.alloc, sh.live_word()) });
        PiscesThread {
            fast,
            sh,
            slot,
            own,
            own_view,
            cache: ThreadCache::for_slot(slot),
            log,
            attempt: None,
            idle_attempt: None,
            own_record: 0,
            in_snapshot: false,
            start_ts: 0,
            writes: Vec::new(),
            plan_ranges: 0,
            record: RecordBuilder::default(),
            help_hint: None,
            oos_help: false,
            attempt_locked_reads: std::cell::Cell::new(0),
            ro_locked_reads: 0,
            ro_commits_over_batch: 0,
            oos_rounds: 0,
            durable_watermark: 0,
            nested: false,
            retries: Retries::default(),
            fallback_wait: false,
            deferred: false,
            read_unfenced: std::cell::Cell::new(0),
            shared: sh_shared,
            stopped: std::cell::Cell::new(0),
            blocked_by: None,
            blocked_since: None,
        }
    }

    /// Write back this slot's batch: all of it after its grace period, or, nested
    /// (see `nested`), only the prefix that needs no wait. Whether the batch is empty
    /// afterwards.
    fn write_back_own(&mut self) -> bool {
        write_back_own(&self.sh, self.slot, &mut self.cache, self.nested)
    }

    /// Commit the running attempt, which wrote nothing (`commit_visible` of a
    /// read-only transaction): leave the grace-period clock and keep the attempt for
    /// the next transaction.
    #[inline(always)]
    fn end_read_only(&mut self) {
        self.own_slot().clock.finish();
        self.ro_locked_reads += self.attempt_locked_reads.get();
        // `idle_attempt` is None while a transaction runs (`begin` moved it out).
        std::mem::swap(&mut self.attempt, &mut self.idle_attempt);
        self.after_read_only();
    }

    /// The end of every read-only commit (snapshot or attempt): a batch left waiting by
    /// this slot's last update commit is written back after enough of them.
    #[inline(always)]
    fn after_read_only(&mut self) {
        // Relaxed: only this slot's commits raise it; a stale value costs one
        // needless count, or defers the write-back to a later commit.
        if self.own_slot().pending_min.load(Relaxed) != u64::MAX {
            self.ro_commits_over_batch += 1;
            if self.ro_commits_over_batch >= READ_ONLY_COMMITS_BEFORE_WRITE_BACK {
                self.write_back_after_reads();
            }
        }
    }

    /// The arena offset of the running attempt's commit record; 0 (no writer's) if it
    /// has none (a snapshot, or an attempt that has not written).
    #[inline]
    fn record_off(&self) -> u64 {
        self.own_record
    }

    /// The running attempt, if it is one of the table's.
    #[inline]
    fn running_attempt(&self) -> Option<&Attempt> {
        let id = self.attempt.filter(|a| a.is_real())?;
        Some(self.own_view().attempts.get(id))
    }

    /// Validate a user offset: returns the header-word offset and payload length.
    #[inline]
    fn validate(&self, off: u64, len: usize) -> Result<(u64, usize)> {
        crate::engine::kit::validate::locate_object(&self.sh.alloc, off, len, |b| self.pending(b))
    }

    /// A block whose allocation bit is clear that this transaction may still use: its
    /// header is locked (this run) by a copy whose writer is this transaction or is
    /// visible to its snapshot — an allocation not yet published by write-back (the
    /// bit is set in write-back, before the unlock). A free is published only after the
    /// grace period, so an object freed after this snapshot still has its bit set.
    #[cold]
    fn pending(&self, b: Block) -> bool {
        // Acquire: see `lock`; if the header reads unlocked, the caller's second look at
        // the bit is ordered after the write-back that unlocked it.
        let h = self.sh.heap.atomic_u64(b.offset as usize).load(Acquire);
        if !self.sh.is_locked(h) {
            return false;
        }
        let c = self.sh.copy_of(h);
        // SAFETY: a locked header points to a live copy and its writer's record (see
        // `lock`).
        unsafe {
            let w = (*c).writer;
            w == self.record_off() || self.sh.record(w).visible_to(self.start_ts)
        }
    }

    /// After `lock` (which may have written back our own pending batch): the object is
    /// still allocated, or allocated by this transaction. If not, a lock this call just
    /// took (write-set entries from `before` on) is given back, so that a commit after
    /// the error can neither write nor free the block.
    ///
    /// Two cases need no look at the allocation bitmap (another cache line, and the
    /// geometry lookup): a lock this transaction already held before this call (its
    /// first `lock` was checked, and no free of a block we hold locked can be published
    /// until our own write-back), and a lock taken by a compare-and-swap from this run's
    /// live marker on a small block, which implies the allocation bit was set at that
    /// instant (`shared::LIVE`) — and it stays set, since only a write-back holding the
    /// lock publishes a free. Any other word the lock replaced (the freed marker, an
    /// earlier run's word) and any large block (whose slabs may be reused with another
    /// geometry once freed) take the bitmap check.
    #[inline]
    fn check_locked(&mut self, b: Block, c: *mut CopyHdr, before: usize) -> Result<()> {
        // The copy is the write-set entry `lock` returned it for.
        let w = WriteEntry { copy: c };
        let idx = w.hdr().entry as usize;
        let trust_any = crate::mutation::active!(LOCKED_CHECK_TRUSTS_ANY);
        if idx < before
            || b.is_small()
                && (w.prev() == self.sh.live_word() || (trust_any && !self.sh.is_locked(w.prev())))
        {
            return Ok(());
        }
        self.check_locked_slow(b, w, before)
    }

    /// [`Self::check_locked`]'s look at the allocation bitmap.
    #[cold]
    #[inline(never)]
    fn check_locked_slow(&mut self, b: Block, w: WriteEntry, before: usize) -> Result<()> {
        let own_fresh = matches!(w.kind(), Kind::Fresh(_) | Kind::FreshFreed(_));
        let r =
            crate::engine::kit::validate::check_still_allocated(&self.sh.alloc, b, |_| own_fresh);
        if r.is_err() {
            for w in self.writes.drain(before..) {
                // Release: our copy is unlinked (as in `rollback`); the header was
                // unlocked when we took it.
                count_write(self.sh.heap.atomic_u64(w.header() as usize));
                self.sh
                    .heap
                    .atomic_u64(w.header() as usize)
                    .store(w.prev(), Release);
            }
        }
        r
    }

    /// `read` found the object allocated and its header word left by an earlier run
    /// (`seen`, unlocked): store the live marker, so the read fast path takes it from
    /// now on. Only small blocks (the fast path's), only if the allocation bit is set
    /// after `seen` was loaded, and only by a compare-and-swap from `seen`: a word of an
    /// earlier run never comes back once this run freed the block (`shared::LIVE`), so
    /// the swap succeeds only if the block was allocated all along.
    #[cold]
    #[inline(never)]
    fn mark_live(&self, off: u64, header: u64, seen: u64) {
        // SAFETY: the allocator is alive (in `self.sh`).
        let small = unsafe { self.sh.alloc.small_blocks().header(off, 0) }.is_some();
        let allocated = self.sh.alloc.block_state(off).is_some_and(|(_, a)| a);
        if small && allocated {
            // Release: a fast reader that Acquires the marker reads home after it, as
            // after a write-back's unlock. Failure: someone locked or marked it first.
            count_write(self.sh.heap.atomic_u64(header as usize));
            let _ = self.sh.heap.atomic_u64(header as usize).compare_exchange(
                seen,
                self.sh.live_word(),
                Release,
                Relaxed,
            );
        }
    }

    /// The root object's payload offset in this transaction's snapshot (0: none), for
    /// `free`'s refusal to free it: the root slot read as `read` reads it (our copy, a
    /// visible writer's copy, or home), without `read`'s pointer validation, which the
    /// slot's fixed offset does not need.
    fn root_object(&self) -> u64 {
        // Acquire: see `lock`.
        let h = self.sh.heap.atomic_u64(ROOT_SLOT_OFFSET).load(Acquire);
        // SAFETY: the root slot is inside every pool (the layout puts it there).
        let mut p = unsafe { self.sh.heap.ptr(ROOT_SLOT_OFFSET + HEADER) } as *const u8;
        if self.sh.is_locked(h) {
            let c = self.sh.copy_of(h);
            // SAFETY: a locked header points to a live copy and its writer's record (see
            // `read`).
            unsafe {
                let w = (*c).writer;
                if w == self.record_off() || self.sh.record(w).visible_to(self.start_ts) {
                    p = CopyHdr::data(c);
                }
            }
        }
        // SAFETY: the slot's payload (and a copy of it) is 16 bytes, 8-aligned, and does
        // not change while this transaction runs (home is written only after a grace
        // period that waits for it; copies are immutable after commit, ours is ours).
        unsafe { (p as *const u64).read() }
    }

    fn active(&self) -> Result<()> {
        running(self.attempt.is_some() || self.in_snapshot)
    }

    /// Lock the object whose header is at `header` (payload `plen` bytes) for this
    /// transaction, creating its copy; returns the copy. `fresh` copies start zeroed
    /// instead of as a copy of home.
    fn lock(&mut self, header: u64, plen: usize, kind: Kind) -> Result<*mut CopyHdr> {
        if self.writes.is_empty() && self.fallback_blocks() {
            return Err(Error::Conflict);
        }
        let me = self.record_off();
        let hw = self.sh.heap.atomic_u64(header as usize);
        loop {
            // Acquire: pairs with the Release of the CAS that linked a copy (its header
            // fields) and of the write-back's unlock (home contents).
            let h = hw.load(Acquire);
            if self.sh.is_locked(h) {
                let c = self.sh.copy_of(h);
                // SAFETY: a locked header of this run points to a live copy: copies are
                // reclaimed only after a grace period that waits for this transaction.
                let w = unsafe { (*c).writer };
                if w == me {
                    return Ok(c as *mut CopyHdr);
                }
                // SAFETY: the writer record lives as long as its copies (same attempt).
                let owner = unsafe { self.sh.record(w) }.slot;
                if owner == self.slot {
                    // One of our own group-committed transactions still holds it: push
                    // our batch out now (the paper's "another transaction needs to
                    // update the same object"), then look again.
                    if !write_back_own(&self.sh, self.slot, &mut self.cache, self.nested) {
                        return Err(Error::Conflict);
                    }
                    continue;
                }
                // Committed and waiting in its thread's group-commit batch: after we
                // abort, write that batch back ourselves instead of waiting for its
                // owner (who may be idle). An uncommitted owner cannot be helped.
                // SAFETY: as above, the record outlives its copies.
                if unsafe { self.sh.record(w) }.end_ts() != super::protocol::END_INFINITE {
                    self.help_hint = Some(owner);
                }
                // (On a shared pool, retries that the owner's lock keeps failing ask
                // whether it is alive: `ask_after_blocker`. A committed owner's process
                // may have died before its write-back knew the transaction.)
                self.blocked_by = Some(owner);
                return Err(Error::Conflict);
            }
            let Some(attempt) = self.running_attempt() else {
                // No attempt to write in (`AttemptId::NO_ROOM`): the retry's `begin`
                // asks the table again.
                return Err(Error::Conflict);
            };
            let at = attempt.place_copy(&self.sh.arena, COPY_HDR + plen)?;
            let writer = attempt.record();
            self.own_record = writer;
            let copy = self.sh.arena.ptr(at) as *mut CopyHdr;
            // SAFETY: `copy` is fresh memory of COPY_HDR + plen bytes in our attempt.
            unsafe {
                copy.write(CopyHdr {
                    writer,
                    home: header + HEADER as u64,
                    len: plen as u64,
                    entry: self.writes.len() as u64,
                    prev: h,
                    kind: kind_word(header, kind),
                });
            }
            // AcqRel: Release publishes the copy header (writer pointer) to readers that
            // Acquire the header word; Acquire orders our read of home after the
            // previous writer's write-back.
            count_write(hw);
            if hw
                .compare_exchange(h, self.sh.tag | at, AcqRel, Acquire)
                .is_err()
            {
                return Err(Error::Conflict);
            }
            // SAFETY: we hold the lock, so home is stable; both ranges are `plen` bytes
            // (home validated, copy just allocated).
            unsafe {
                let data = CopyHdr::data(copy);
                if matches!(kind, Kind::Fresh(_)) {
                    std::ptr::write_bytes(data, 0, plen);
                } else {
                    std::ptr::copy_nonoverlapping(
                        self.sh.heap.ptr(header as usize + HEADER),
                        data,
                        plen,
                    );
                }
            }
            crate::mutation::hook!(COPY_LINKED, self.slot);
            self.writes.push(WriteEntry { copy });
            self.plan_ranges += ranges_bound(plen, self.sh.opts.flush_diff);
            return Ok(copy);
        }
    }

    /// Release every lock of the running attempt and retire it.
    fn rollback(&mut self) {
        self.plan_ranges = 0;
        self.own_record = 0;
        for w in self.writes.drain(..) {
            // Release: our copy is unlinked before the attempt is retired.
            count_write(self.sh.heap.atomic_u64(w.header() as usize));
            self.sh
                .heap
                .atomic_u64(w.header() as usize)
                .store(w.prev(), Release);
            if let Kind::Fresh(b) | Kind::FreshFreed(b) = w.kind() {
                self.sh.alloc.unreserve(&mut self.cache, b);
            }
        }
        self.sh.slots[self.slot].clock.finish();
        self.retries.end(&self.sh.fallback, self.slot);
        // (`NO_ROOM` is not the table's: nothing to give back.)
        if let Some(a) = self.attempt.take().filter(|a| a.is_real()) {
            let mut b = self.sh.slots[self.slot].lock_batch(self.slot);
            self.sh.retire(&mut b, a);
            if b.retired.len() > RETIRED_BEFORE_RECLAIM {
                if self.nested {
                    self.sh.reclaim_ready(self.slot, &mut b, self.slot);
                } else {
                    self.sh.reclaim_all(self.slot, &mut b, self.slot);
                }
            }
        }
    }

    /// Encode the redo record of the running transaction into `self.record` and write
    /// what write-back must do into the attempt's plan ([`super::plan`]).
    fn build_record(&mut self) -> Result<()> {
        self.record.clear();
        let heap = &self.sh.heap;
        let flush_diff = self.sh.opts.flush_diff;
        let Some(id) = self.attempt.filter(|a| a.is_real()) else {
            return Err(Error::Conflict);
        };
        let attempt = self.sh.slots[self.slot].attempts.get(id);
        let mut plan = attempt.start_plan(&self.sh.arena, self.writes.len(), self.plan_ranges)?;
        for w in &self.writes {
            // SAFETY: our copies are alive (owned by the running attempt).
            let (home, len, data) = unsafe {
                (
                    (*w.copy).home,
                    (*w.copy).len as usize,
                    CopyHdr::data(w.copy),
                )
            };
            let (header, word) = (w.header(), w.kind_word());
            let kind = kind_of(header, word);
            let freed = matches!(kind, Kind::Freed(_) | Kind::FreshFreed(_))
                && !crate::mutation::active!(FREED_STAYS_LIVE);
            let unlock = if freed {
                self.sh.freed_word()
            } else {
                self.sh.live_word()
            };
            plan.object(PlanObject::new(header, unlock, word));
            match kind {
                Kind::Freed(b) => {
                    self.record.free(b);
                    continue;
                }
                Kind::FreshFreed(_) => continue,
                Kind::Fresh(b) => self.record.alloc(b),
                Kind::Written => {}
            }
            // The arena offset of the copy's data.
            let data_off = self.sh.arena.offset_of(data);
            if !flush_diff {
                // SAFETY: copy data is `len` bytes.
                let bytes = unsafe { std::slice::from_raw_parts(data, len) };
                self.record.range(home, bytes);
                plan.range(HomeRange {
                    home,
                    src: data_off,
                    len: len as u64,
                });
                continue;
            }
            // Flush-diff: runs of changed words.
            // SAFETY: the copy is ours and `len` bytes long; home is a validated
            // payload of at least `len` bytes, locked by us, so no thread writes it
            // while these shared views live (readers only read it).
            let (copy, at_home) = unsafe {
                (
                    std::slice::from_raw_parts(data as *const u8, len & !7),
                    std::slice::from_raw_parts(heap.ptr(home as usize) as *const u8, len & !7),
                )
            };
            for (start, end) in changed_word_runs(copy, at_home) {
                let off = home + 8 * start as u64;
                // SAFETY: `start..end` is inside the copy.
                let src = unsafe { data.add(8 * start) };
                let n = end - start;
                if n == 1 {
                    // SAFETY: one word inside the copy.
                    self.record.word(off, unsafe { (src as *const u64).read() });
                } else {
                    // SAFETY: `n` words inside the copy.
                    self.record
                        .range(off, unsafe { std::slice::from_raw_parts(src, 8 * n) });
                }
                plan.range(HomeRange {
                    home: off,
                    src: data_off + 8 * start as u64,
                    len: (8 * n) as u64,
                });
            }
        }
        attempt.end_plan(plan);
        Ok(())
    }

    /// Make room in the log for a record of `entries` bytes.
    fn reserve_log(&mut self, entries: usize) -> Result<()> {
        let needed = crate::engine::kit::log::redo_log::HEADER_LEN + entries;
        if needed > self.log.max_record() {
            return Err(Error::TooLargeForLog(Box::new(
                crate::error::TooLargeForLog {
                    needed,
                    capacity: self.log.max_record(),
                },
            )));
        }
        let mut round = 0u32;
        let mut waited: Option<std::time::Instant> = None;
        while !self.log.fits(entries) {
            if round > 2 {
                // What holds the watermark may be a slot of a process that died (a
                // shared pool; `crate::peers`).
                self.sh.ask_peers(&mut waited);
            }
            // 1. our own pending write-backs; 2. recycle; 3. help the others.
            self.write_back_own();
            self.recycle();
            if self.log.fits(entries) {
                break;
            }
            self.sh.help_all(self.slot, &mut self.cache, !self.nested);
            self.recycle();
            if self.nested && !self.log.fits(entries) {
                // What would free the log needs a grace period: give the attempt up.
                return Err(Error::Conflict);
            }
            round += 1;
            if round > 2 {
                std::thread::yield_now();
            }
        }
        Ok(())
    }

    /// Drop written-back records below the watermark (P-2), persisting it first.
    fn recycle(&mut self) {
        if !self.sh.durable {
            return;
        }
        if self.sh.lazy_home {
            // Log space is what the lazy home writes are made durable for.
            let mut b = self.sh.slots[self.slot].lock_batch(self.slot);
            self.sh.sync_home(self.slot, &mut b);
        }
        let w = self.sh.watermark();
        let skip = crate::mutation::active!(WATERMARK);
        if w > self.durable_watermark {
            if !skip {
                self.sh.persist_watermark(w);
            }
            self.durable_watermark = w;
        }
        let wb = self.sh.slots[self.slot].wb_seq.load(Acquire);
        self.log.recycle(&self.sh.heap, wb, self.durable_watermark);
    }

    /// Reserve a block; out of space, first reclaim what committed frees released.
    ///
    /// Frees take effect in write-back (after a grace period), which group commit
    /// defers, so a full heap may be full only of blocks already freed by committed
    /// transactions. Our own pending batch can be written back at once (we are its
    /// owner, as in `lock`). Other slots' batches must not be written back from inside
    /// a transaction (their grace period would skip us), so if any is pending the
    /// attempt aborts as a conflict and `after_abort` helps them all, outside the
    /// transaction, before the retry (at most a few times per transaction).
    fn reserve(&mut self, len: usize) -> Result<Block> {
        match self.sh.alloc.reserve(&mut self.cache, len) {
            Err(Error::OutOfSpace { .. }) => {}
            r => return r,
        }
        self.write_back_own();
        let r = self.sh.alloc.reserve(&mut self.cache, len);
        if r.is_ok() || self.oos_rounds >= 3 {
            self.oos_rounds = 0;
            return r;
        }
        // (A batch locked right now counts as pending: its holder may be writing it.)
        let others_pending = self.sh.slots.iter().enumerate().any(|(i, s)| {
            i != self.slot
                && s.try_lock_batch(self.slot)
                    .is_none_or(|b| !b.entries.is_empty())
        });
        if others_pending {
            self.oos_rounds += 1;
            self.oos_help = true;
            return Err(Error::Conflict);
        }
        self.oos_rounds = 0;
        r
    }

    /// Which slot to help after a conflict, if any (consumed).
    pub(crate) fn take_help_hint(&mut self) -> Option<usize> {
        self.help_hint.take()
    }
}

#[cfg(test)]
impl PiscesThread {
    /// The attempts of the slot's table this state holds: running and idle (white-box
    /// tests).
    pub(super) fn held_attempts(&self) -> Vec<AttemptId> {
        [self.attempt, self.idle_attempt]
            .into_iter()
            .flatten()
            .filter(|a| a.is_real())
            .collect()
    }
}

impl EngineThread for PiscesThread {
    fn slot(&self) -> usize {
        self.slot
    }
    // (Inlined into `run` with the rest of the default engine's transaction path:
    // `AnyThread::begin_fast`.)
    #[inline(always)]
    fn begin(&mut self, opts: &crate::tx_options::TxOptions) {
        if self.shared {
            return self.begin_shared(opts);
        }
        self.begin_here(opts);
    }

    /// `begin` without the fallback word and without an attempt: a snapshot never
    /// conflicts, so it never needs the word (the retry count is still kept, for a
    /// `Tx::retry` the closure asks for), and it links nothing, so it needs no commit
    /// record. What it must do is what a reader does: announce its start in the slot's
    /// clock, which write-backs wait for.
    #[inline]
    fn begin_snapshot(&mut self) -> FastPath {
        if self.attempt.is_some() {
            // Never while the API pairs every begin with its end or abort; if it
            // did not, the attempt's locks must not outlive it.
            self.rollback();
        }
        let _ = self.retries.begin();
        self.in_snapshot = true;
        self.attempt_locked_reads.set(0);
        self.start_ts = self.own_slot().clock.start(&self.sh.clock);
        // SAFETY: `fast` is never changed, and lives as long as this state, which the
        // `Tx` the path goes to borrows.
        unsafe { self.fast.path() }
    }

    /// A snapshot read committed state, durable before it was visible unless its
    /// writer deferred durability: only then is there something to wait for.
    #[inline]
    fn end_snapshot(&mut self, wait: bool) -> Result<Result<()>> {
        self.own_slot().clock.finish();
        self.in_snapshot = false;
        self.after_read_only();
        // Only a read that met a locked object (the copy path, which counts it) can
        // have read a copy whose record was appended unfenced: one test covers both.
        if self.attempt_locked_reads.get() != 0 {
            self.end_snapshot_after_copies(wait);
        }
        // Nothing here can fail: the compiler then folds the caller's match away.
        Ok(Ok(()))
    }

    // Inlined into its own out-of-line caller (`registry::read_of`), the one
    // function through which `Tx` reads what its fast path declines.
    #[inline(always)]
    fn read(&self, off: u64, len: usize) -> Result<*const u8> {
        if self.shared {
            return self.read_shared(off, len);
        }
        self.read_here(off, len)
    }

    fn ro_locked_reads(&self) -> u64 {
        self.ro_locked_reads
    }

    fn fast_reads(&mut self) -> FastPath {
        // An unlocked header means home is the version every snapshot sees (line 10);
        // a locked one (ours or another writer's) goes to `read`.
        if self.attempt.is_none() {
            return FastPath::NONE;
        }
        // SAFETY: as in `begin_snapshot`.
        unsafe { self.fast.path() }
    }

    fn write(&mut self, off: u64, len: usize) -> Result<*mut u8> {
        if self.shared {
            return self.guarded(|t| t.write_here(off, len));
        }
        self.write_here(off, len)
    }

    fn alloc(&mut self, len: usize) -> Result<u64> {
        if self.shared {
            return self.guarded(|t| t.alloc_here(len));
        }
        self.alloc_here(len)
    }

    fn free(&mut self, off: u64) -> Result<()> {
        if self.shared {
            return self.guarded(|t| t.free_here(off));
        }
        self.free_here(off)
    }

    // Always: the read-only case is a handful of instructions, and the transaction
    // entry points inline it into each closure's caller (left to itself, the compiler
    // stops inlining it there once the write-back count is added).
    #[inline(always)]
    fn commit(&mut self) -> Result<crate::engine::DurableToken> {
        if self.shared {
            return self.commit_shared();
        }
        self.commit_here()
    }

    fn wait_durable(&mut self, token: crate::engine::DurableToken) -> Result<()> {
        if self.shared {
            return self.guarded(|t| t.wait_durable_here(token));
        }
        self.wait_durable_here(token)
    }

    fn abort(&mut self) {
        if self.shared {
            let _ = self.guarded(|t| {
                t.abort_here();
                Ok(())
            });
            return;
        }
        self.abort_here();
    }

    fn set_nested(&mut self, nested: bool) {
        self.nested = nested;
    }

    fn quiesce(&mut self) {
        if self.shared {
            let _ = self.guarded(|t| {
                t.quiesce_here();
                Ok(())
            });
            return;
        }
        self.quiesce_here();
    }

    fn after_abort(&mut self) {
        if self.shared {
            let _ = self.guarded(|t| {
                t.after_abort_here();
                t.ask_after_blocker();
                Ok(())
            });
            return;
        }
        self.after_abort_here();
    }
}

/// The entry points' work, which the trait's functions run guarded on a shared pool
/// (`PiscesThread::guarded`).
impl PiscesThread {
    #[inline(always)]
    fn begin_here(&mut self, opts: &crate::tx_options::TxOptions) {
        self.deferred = opts.durability == crate::tx_options::Durability::Deferred;
        // The common case (the last transaction committed read-only, or its attempt
        // was kept) takes no lock and calls nothing; the rest is out of line.
        if self.attempt.is_some() || self.idle_attempt.is_none() {
            self.prepare_attempt();
        }
        if self.retries.begin() {
            // (module docs, *Fallback*)
            self.retries.take_and_drain(
                &self.sh.fallback,
                &self.sh.clock,
                self.sh.slots.iter().map(|s| &s.clock),
                self.slot,
                self.nested,
            );
        }
        // `attempt` is None here: a swap moves the kept attempt in without a drop call.
        std::mem::swap(&mut self.attempt, &mut self.idle_attempt);
        self.attempt_locked_reads.set(0);
        self.start_ts = self.own_slot().clock.start(&self.sh.clock);
    }

    #[inline(always)]
    fn read_here(&self, off: u64, len: usize) -> Result<*const u8> {
        self.active()?;
        let (header, _) = self.validate(off, len)?;
        let hw = self.sh.heap.atomic_u64(header as usize);
        // Acquire: see `lock`.
        let h = hw.load(Acquire);
        // SAFETY: `header + HEADER` validated to be a payload inside the pool.
        let home = unsafe { self.sh.heap.ptr(header as usize + HEADER) } as *const u8;
        if !self.sh.is_locked(h) {
            if h & TAG_MASK != self.sh.tag {
                self.mark_live(off, header, h);
            }
            return Ok(home); // line 10
        }
        let c = self.sh.copy_of(h);
        // SAFETY: a locked header points to a live copy and its writer's record (see
        // `lock`); both outlive this transaction by the grace period.
        unsafe {
            let w = (*c).writer;
            if w == self.record_off() {
                return Ok(CopyHdr::data(c));
            }
            self.attempt_locked_reads
                .set(self.attempt_locked_reads.get() + 1);
            let w = self.sh.record(w);
            if w.visible_to(self.start_ts) {
                // Relaxed: stored before the writer's commit, whose Release the
                // visibility check Acquired.
                if w.unfenced_seq.load(Relaxed) != 0 {
                    self.note_unfenced_read(w.slot);
                }
                return Ok(CopyHdr::data(c));
            }
        }
        Ok(home)
    }

    #[inline(always)]
    fn write_here(&mut self, off: u64, len: usize) -> Result<*mut u8> {
        self.active()?;
        let (header, plen) = self.validate(off, len)?;
        let before = self.writes.len();
        let c = self.lock(header, plen, Kind::Written)?;
        if header != ROOT_SLOT_OFFSET as u64 {
            // (Every block's payload length is its size minus the header, a multiple of 8.)
            let b = Block {
                offset: header,
                size: (plen + HEADER) as u64,
            };
            self.check_locked(b, c, before)?;
        }
        // SAFETY: our own live copy.
        Ok(unsafe { CopyHdr::data(c) })
    }

    #[inline(always)]
    fn alloc_here(&mut self, len: usize) -> Result<u64> {
        self.active()?;
        let b = self.reserve(len)?;
        match self.lock(b.offset, b.payload_len() & !7, Kind::Fresh(b)) {
            Ok(_) => Ok(b.payload()),
            Err(e) => {
                self.sh.alloc.unreserve(&mut self.cache, b);
                Err(e)
            }
        }
    }

    #[inline(always)]
    fn free_here(&mut self, off: u64) -> Result<()> {
        self.active()?;
        let root = self.root_object();
        let b =
            crate::engine::kit::validate::locate_block_to_free(&self.sh.alloc, off, root, |b| {
                self.pending(b)
            })?;
        let before = self.writes.len();
        let c = self.lock(b.offset, b.payload_len() & !7, Kind::Freed(b))?;
        self.check_locked(b, c, before)?;
        // SAFETY: our own live copy.
        let idx = unsafe { (*c).entry } as usize;
        if idx < before {
            let e = self.writes[idx];
            e.set_kind(e.kind().freed(off, b)?);
        }
        Ok(())
    }

    #[inline(always)]
    fn commit_here(&mut self) -> Result<crate::engine::DurableToken> {
        if self.writes.is_empty() && self.attempt.is_some() {
            // Read-only (see `commit_visible`), kept small enough to inline.
            self.retries.end(&self.sh.fallback, self.slot);
            self.end_read_only();
            if self.read_unfenced.get() != 0 {
                self.read_unfenced.set(0);
                return Ok(DEPENDENCIES);
            }
            return Ok(crate::engine::DurableToken::DURABLE);
        }
        // Durable before visible (the record was persisted before the commit point),
        // unless durability is deferred: then the token names the record.
        self.commit_visible()
    }

    fn wait_durable_here(&mut self, token: crate::engine::DurableToken) -> Result<()> {
        if token == crate::engine::DurableToken::DURABLE {
            return Ok(());
        }
        if token == DEPENDENCIES {
            self.sync_dependencies();
            return Ok(());
        }
        // A record of this slot (or all of them, `DurableToken::ALL`): the records
        // before it are in the same run.
        if self.log.in_run() && !self.own_slot().run.is_durable(token.0) {
            self.fence_own_run();
        }
        Ok(())
    }

    fn abort_here(&mut self) {
        self.read_unfenced.set(0);
        if self.in_snapshot {
            // A snapshot holds nothing but its clock entry.
            self.own_slot().clock.finish();
            self.in_snapshot = false;
        } else if self.attempt.is_some() {
            self.rollback();
        }
    }

    fn quiesce_here(&mut self) {
        self.abort_here();
        if self.log.in_run() {
            self.fence_own_run();
        }
        let mut b = self.sh.slots[self.slot].lock_batch(self.slot);
        self.sh
            .write_back(self.slot, &mut b, self.slot, &mut self.cache);
        drop(b);
        self.recycle();
        self.sh.alloc.drain(&mut self.cache);
    }

    fn after_abort_here(&mut self) {
        self.retries.after_abort();
        if std::mem::take(&mut self.fallback_wait) {
            self.sh.fallback.wait(self.slot);
        }
        if std::mem::take(&mut self.oos_help) {
            self.sh.help_all(self.slot, &mut self.cache, !self.nested);
        }
        if let Some(s) = self.take_help_hint() {
            self.sh.help(s, self.slot, &mut self.cache, !self.nested);
        }
    }
}

impl Drop for PiscesThread {
    fn drop(&mut self) {
        if !self.shared {
            return self.drop_here();
        }
        // A pool stopped by a peer's death is left as it is (module docs, *Processes
        // that die*); so is this state if a wait here gives up.
        if self.stopped_slot().is_none() {
            let _ = crate::peers::catch(|| self.drop_here());
        }
    }
}

impl PiscesThread {
    /// [`Drop`]'s work: write back, give the kept attempt back, hand the slot over.
    fn drop_here(&mut self) {
        self.quiesce_here();
        // The kept attempt goes back to the table, for the slot's next state.
        if let Some(a) = self.idle_attempt.take().filter(|a| a.is_real()) {
            self.sh.slots[self.slot].lock_batch(self.slot).spare.push(a);
        }
        if self.sh.shared {
            self.hand_over();
        }
    }
}

/// The entry points of a state of a shared pool (module docs, *Processes that die*).
impl PiscesThread {
    /// The dead slot that stopped this state or its pool, if either is stopped.
    fn stopped_slot(&self) -> Option<u32> {
        self.stopped
            .get()
            .checked_sub(1)
            .or_else(|| self.sh.peers.as_ref()?.stopped())
    }

    /// The error of a call that finds the pool stopped by slot `s`'s death.
    #[cold]
    fn died(&self, s: u32) -> Error {
        crate::peers::died(self.sh.peers.as_deref(), s)
    }

    /// Run entry point `f` on a shared pool: fail at once if the state or the pool is
    /// stopped; if a wait in `f` gives up on a dead peer (`crate::peers`), abandon the
    /// state and fail with [`Error::PeerDied`].
    #[cold]
    #[inline(never)]
    fn guarded<R>(&mut self, f: impl FnOnce(&mut PiscesThread) -> Result<R>) -> Result<R> {
        if let Some(s) = self.stopped_slot() {
            self.stopped.set(s + 1);
            self.abandon();
            return Err(self.died(s));
        }
        match crate::peers::catch(|| f(&mut *self)) {
            Ok(r) => r,
            Err(s) => {
                self.stopped.set(s + 1);
                self.abandon();
                Err(self.died(s))
            }
        }
    }

    /// Forget what the state was doing, without rolling anything back: once a peer
    /// died, the pool's state is what a crash leaves, and undoing an attempt whose
    /// commit had begun could take back a transaction another process read. Its locks
    /// and slot stay as they are until the pool's next open recovers it.
    fn abandon(&mut self) {
        self.attempt = None;
        self.idle_attempt = None;
        self.writes.clear();
        self.plan_ranges = 0;
        self.own_record = 0;
        self.in_snapshot = false;
        self.help_hint = None;
        self.blocked_by = None;
        self.oos_help = false;
        self.fallback_wait = false;
        self.read_unfenced.set(0);
    }

    /// [`EngineThread::begin`] on a shared pool.
    #[cold]
    #[inline(never)]
    fn begin_shared(&mut self, opts: &crate::tx_options::TxOptions) {
        // A stopped state begins nothing: `fast_reads` then hands out no fast path,
        // and the attempt's first access or its commit fails.
        let _ = self.guarded(|t| {
            t.begin_here(opts);
            Ok(())
        });
    }

    /// [`EngineThread::read`] on a shared pool: as `guarded`, through `&self` (the
    /// state is abandoned at its next `&mut` entry point).
    #[cold]
    #[inline(never)]
    fn read_shared(&self, off: u64, len: usize) -> Result<*const u8> {
        if let Some(s) = self.stopped_slot() {
            self.stopped.set(s + 1);
            return Err(self.died(s));
        }
        match crate::peers::catch(|| self.read_here(off, len)) {
            Ok(r) => r,
            Err(s) => {
                self.stopped.set(s + 1);
                Err(self.died(s))
            }
        }
    }

    /// [`EngineThread::commit`] on a shared pool; a commit ends the retries that
    /// `ask_after_blocker` times.
    #[cold]
    #[inline(never)]
    fn commit_shared(&mut self) -> Result<crate::engine::DurableToken> {
        let r = self.guarded(|t| t.commit_here());
        if r.is_ok() {
            self.blocked_since = None;
        }
        r
    }

    /// After an abort on the lock of another slot's writer: once such retries have
    /// lasted [`PEER_CHECK`](crate::peers::PEER_CHECK), and then every `PEER_CHECK`,
    /// ask whether the writer's process is alive. A dead writer's locks are never
    /// released (an uncommitted attempt will not commit or roll back, and a committed
    /// one that its process had not put in its batch is written back by no one, until
    /// the pool is recovered), so retrying would never end: give up (the pool stops).
    fn ask_after_blocker(&mut self) {
        let Some(owner) = self.blocked_by.take() else {
            return;
        };
        let now = std::time::Instant::now();
        let since = *self.blocked_since.get_or_insert(now);
        if now.duration_since(since) < crate::peers::PEER_CHECK {
            return;
        }
        self.blocked_since = Some(now);
        if let Some(peers) = &self.sh.peers {
            crate::peers::check_peers(&**peers, Some(owner as u32));
        }
    }
}

/// How many rounds of helping and recycling a thread state of a shared pool makes for
/// its log to empty before it leaves the slot in use instead
/// ([`PiscesThread::hand_over`]).
const HAND_OVER_ROUNDS: usize = 10_000;

impl PiscesThread {
    /// Leave the slot to another process (a shared pool): empty the log, reset it and
    /// publish where its numbering goes on. The slot's records may be dropped only once
    /// the watermark passes them (P-2), which other slots' pending write-backs hold
    /// back: write back every slot's batch (copies are shared, so any thread can), then
    /// recycle, until the log is empty. If it stays non-empty (other processes' commits
    /// keep the watermark below it for all the rounds), the slot stays in use, and the
    /// next process that claims it refuses it.
    fn hand_over(&mut self) {
        if self.sh.durable {
            let mut emptied = false;
            let mut waited = None;
            for round in 0..HAND_OVER_ROUNDS {
                if round > 2 {
                    // As in `reserve_log`.
                    self.sh.ask_peers(&mut waited);
                }
                self.sh.help_all(self.slot, &mut self.cache, true);
                self.recycle();
                if self.log.used() == 0 {
                    emptied = true;
                    break;
                }
                if round > 2 {
                    std::thread::yield_now();
                }
            }
            self.sh.alloc.drain(&mut self.cache);
            if !emptied {
                return;
            }
            let area = self.sh.heap.layout().log_offset(self.slot);
            crate::engine::kit::log::redo_log::reset(&self.sh.heap, area, self.log.next_seq());
            self.sh.heap.fence();
        }
        let slot = &self.sh.slots[self.slot];
        slot.next_seq.store(self.log.next_seq(), Relaxed);
        // Release: the next state of the slot (maybe in another process) Acquires it
        // before it writes the log (`PiscesEngine::thread`).
        slot.log_state.store(LOG_HANDED_OVER, Release);
    }
}

/// [`PiscesThread::write_back_own`], on the fields it needs (for callers that hold a
/// borrow of another field).
fn write_back_own(sh: &PiscesShared, slot: usize, cache: &mut ThreadCache, nested: bool) -> bool {
    let mut b = sh.slots[slot].lock_batch(slot);
    if nested {
        sh.try_write_back(slot, &mut b, slot, cache);
        b.entries.is_empty()
    } else {
        sh.write_back(slot, &mut b, slot, cache);
        true
    }
}

#[allow(dead_code)]
const _: () = assert!(COPY_HDR.is_multiple_of(8));

impl PiscesThread {
    /// Before the transaction's first lock: true if another slot's fallback attempt
    /// runs (module docs, *Fallback*); the attempt then aborts, and `after_abort` waits
    /// for the holder, holding nothing. Nested transactions do not wait.
    #[inline]
    fn fallback_blocks(&mut self) -> bool {
        self.fallback_wait = !self.nested && self.sh.fallback.blocks(self.slot);
        self.fallback_wait
    }

    /// The [`READ_ONLY_COMMITS_BEFORE_WRITE_BACK`]th read-only commit in a row of a
    /// slot whose batch still holds committed transactions (fewer than a group's
    /// worth): write back those no running snapshot still needs, without waiting.
    /// Until then their objects stay locked, and every read of them takes the copy
    /// path (`read`, not the inlined fast path): after a burst of updates followed
    /// only by reads, that would last until the next updates filled the batch, a
    /// `sync` or the close. If a snapshot holds some back, the next try comes as many
    /// read-only commits later.
    #[cold]
    #[inline(never)]
    fn write_back_after_reads(&mut self) {
        self.ro_commits_over_batch = 0;
        if self.shared {
            // (A snapshot's end cannot fail: a give-up stops the state, and the next
            // entry point fails.)
            let _ = self.guarded(|t| {
                t.write_back_after_reads_here();
                Ok(())
            });
            return;
        }
        self.write_back_after_reads_here();
    }

    /// [`PiscesThread::write_back_after_reads`]' write-back.
    fn write_back_after_reads_here(&mut self) {
        let mut b = self.sh.slots[self.slot].lock_batch(self.slot);
        self.sh
            .try_write_back(self.slot, &mut b, self.slot, &mut self.cache);
    }

    /// `begin`'s uncommon case: roll back a running attempt, and find an attempt to
    /// use if none is kept; it goes to `idle_attempt`. A spare one of the slot's table
    /// (`batch` module docs, *Capacity*), or, if every attempt is in the batch, one
    /// reclaimed there: at once if a retired attempt's grace period has passed, else by
    /// writing the batch back and waiting for the grace period of what it retired,
    /// which frees them all. No transaction runs here, and every attempt the batch
    /// holds was committed or retired before the next transaction starts, so the wait
    /// is for other slots' transactions that began before then, which never wait for
    /// this slot's (as in every write-back of one's own batch). A nested transaction
    /// does not wait: it gets [`AttemptId::NO_ROOM`].
    #[cold]
    #[inline(never)]
    fn prepare_attempt(&mut self) {
        if self.attempt.is_some() {
            self.rollback();
        }
        if self.idle_attempt.is_none() {
            let mut b = self.sh.slots[self.slot].lock_batch(self.slot);
            let mut id = self.sh.take_spare(self.slot, &mut b);
            if id.is_none() && !self.nested {
                self.sh
                    .write_back(self.slot, &mut b, self.slot, &mut self.cache);
                self.sh.reclaim_all(self.slot, &mut b, self.slot);
                id = self.sh.take_spare(self.slot, &mut b);
                debug_assert!(id.is_some(), "the batch holds all of the slot's attempts");
            }
            self.idle_attempt = Some(id.unwrap_or(AttemptId::NO_ROOM));
        }
    }

    /// Commit up to the point where the transaction is visible (and, unless its
    /// durability is deferred, already durable). Returns its durability token. On
    /// `Err` the transaction has been rolled back.
    #[inline(never)]
    fn commit_visible(&mut self) -> Result<crate::engine::DurableToken> {
        self.active()?;
        // Line 33: this transaction reads nothing more.
        self.sh.slots[self.slot].clock.finish();
        self.retries.end(&self.sh.fallback, self.slot);
        if self.writes.is_empty() {
            // Read-only: no persistence work at all. Nothing was linked, so the attempt
            // is reusable at once.
            // Keep it for the next transaction without touching the batch mutex.
            self.idle_attempt = self.attempt.take();
            return Ok(if self.read_unfenced.replace(0) != 0 {
                DEPENDENCIES
            } else {
                crate::engine::DurableToken::DURABLE
            });
        }
        // Updates run again: their batch fills and is written back as a group.
        self.ro_commits_over_batch = 0;
        if let Err(e) = self.build_record() {
            self.rollback();
            return Err(e);
        }
        let unfenced = self.deferred && self.sh.durable;
        let (persist_ts, seq) = if self.sh.durable {
            if let Err(e) = self.reserve_log(self.record.len()) {
                self.rollback();
                return Err(e);
            }
            // What this transaction read of other slots' unfenced runs is durable
            // before its own record can be (*Deferred durability*).
            if self.read_unfenced.replace(0) & READ_OTHER_UNFENCED != 0
                && !crate::mutation::active!(UNFENCED_DEPENDENCY)
            {
                let others = self.sh.slots.iter().enumerate();
                crate::engine::kit::log::unfenced_run::sync_all(
                    &self.sh.heap,
                    others.filter(|&(i, _)| i != self.slot).map(|(_, s)| &s.run),
                );
            }
            if unfenced {
                self.prepare_unfenced_append();
            }
            let slot = &self.sh.slots[self.slot];
            // Stage 1, persist. Guard first (see `PiscesShared::watermark`), then persistTS.
            slot.persisting_ts.store(0, SeqCst);
            let persist_ts = self.sh.clock.now();
            slot.persisting_ts.store(persist_ts, SeqCst);
            crate::mutation::hook!(BEFORE_APPEND, self.slot);
            let seq = if unfenced {
                let seq = self
                    .log
                    .append_unfenced(&self.sh.heap, self.record.bytes(), persist_ts);
                let span = self
                    .log
                    .unfenced_span()
                    .expect("an unfenced append opens a run");
                slot.run.appended(span, seq);
                seq
            } else {
                let seq = self
                    .log
                    .append(&self.sh.heap, self.record.bytes(), persist_ts);
                // The durability point: shared with concurrent commits where the medium
                // can (one `msync` for all of them on the file medium).
                self.sh.heap.commit_fence();
                if self.log.in_run() {
                    // The fence persisted the run before the record too.
                    self.log.fenced();
                    slot.run.fenced(seq);
                }
                seq
            };
            crate::mutation::hook!(AFTER_FENCE, self.slot);
            (persist_ts, seq)
        } else {
            (u64::MAX, 0)
        };
        self.oos_rounds = 0;
        let slot = &self.sh.slots[self.slot];
        // Stage 2, concurrency commit.
        let attempt = self.attempt.take().expect("checked active");
        self.own_record = 0;
        // SAFETY: the attempt wrote (`writes` is not empty), so it is one of the table's
        // and its first copy started its record.
        let record = unsafe { self.sh.record(slot.attempts.get(attempt).record()) };
        if unfenced {
            // Relaxed: published by the commit's Release below.
            record.unfenced_seq.store(seq, Relaxed);
        }
        let end_ts = record.commit(&self.sh.clock);
        // Fresh-and-freed blocks were never published; hand them back.
        self.plan_ranges = 0;
        for w in self.writes.drain(..) {
            // (The word's test first: the common case decodes nothing.)
            if is_fresh_freed(w.kind_word()) {
                if let Kind::FreshFreed(b) = w.kind() {
                    self.sh.alloc.unreserve(&mut self.cache, b);
                }
            }
        }
        // Stage 3, write-back, possibly deferred (group commit).
        crate::mutation::hook!(BEFORE_BATCH, self.slot);
        let mut b = slot.lock_batch(self.slot);
        b.entries.push(Committed {
            attempt,
            plan: slot.attempts.get(attempt).plan_offset(),
            end_ts,
            log_seq: seq,
            persist_ts,
            unfenced,
        });
        crate::mutation::hook!(BATCH_JOINED, self.slot);
        // Helpers store `pending_min` too (the batch's lock holder does).
        count_write(&slot.pending_min);
        slot.pending_min.fetch_min(persist_ts, SeqCst);
        slot.persisting_ts.store(u64::MAX, SeqCst);
        let k = self.sh.opts.group_commit.max(1);
        if b.entries.len() >= k {
            // A full batch: write back what no running snapshot can still need, without
            // waiting; wait (the paper's grace period) only with group commit off or
            // once the batch has grown to its limit (`batch_limit`).
            let limit = batch_limit(k);
            let at_limit = b.entries.len() >= limit;
            if (k == 1 || at_limit) && !self.nested {
                self.sh
                    .write_back(self.slot, &mut b, self.slot, &mut self.cache);
            } else if !unfenced || at_limit {
                // (A commit with durability deferred lets the batch grow to its limit:
                // its write-back would first sync the log's unfenced run, one device
                // sync per write-back on the file medium.)
                self.sh
                    .try_write_back(self.slot, &mut b, self.slot, &mut self.cache);
            }
        }
        // The next transaction's attempt, taken while the batch is locked anyway, so
        // that `begin` does not lock it again (`prepare_attempt`).
        if self.idle_attempt.is_none() {
            self.idle_attempt = self.sh.take_spare(self.slot, &mut b);
        }
        drop(b);
        if self.log.used() > self.log.capacity() / 2 {
            self.recycle();
        }
        Ok(if unfenced {
            crate::engine::DurableToken(seq)
        } else {
            crate::engine::DurableToken::DURABLE
        })
    }

    /// Before an unfenced append: end the run if it is as long as a run may get (a
    /// fence of our own), or if another thread's sync made all of it durable already
    /// (no fence: its records need counting no more).
    fn prepare_unfenced_append(&mut self) {
        if !self.log.in_run() {
            return;
        }
        if self.log.must_fence() {
            self.fence_own_run();
        } else if self.own_slot().run.all_durable() {
            self.log.fenced();
        }
    }

    /// This thread's fence, over its unfenced run: every record it appended is durable.
    fn fence_own_run(&mut self) {
        self.sh.heap.fence();
        self.log.fenced();
        let newest = self.log.next_seq() - 1;
        self.own_slot().run.fenced(newest);
    }

    /// The end of a snapshot that read copies of other writers' transactions: count
    /// them, and if some of those transactions' records were appended unfenced, forget
    /// them and, if the snapshot returns as durable (`wait`), make every run durable
    /// first. Out of line: the common snapshot read none. Cannot fail (a run's sync
    /// reports nothing), so the snapshot's end stays a constant `Ok` for its caller.
    #[cold]
    #[inline(never)]
    fn end_snapshot_after_copies(&mut self, wait: bool) {
        self.ro_locked_reads += self.attempt_locked_reads.replace(0);
        if self.read_unfenced.replace(0) != 0 && wait {
            self.sync_dependencies();
        }
    }

    /// What [`DEPENDENCIES`] waits for: every slot's run (this one's included), as
    /// what a transaction read may be in any of them.
    fn sync_dependencies(&self) {
        crate::engine::kit::log::unfenced_run::sync_all(
            &self.sh.heap,
            self.sh.slots.iter().map(|s| &s.run),
        );
    }

    /// `read` returned a copy of a transaction of `slot` whose record was appended
    /// unfenced.
    #[cold]
    fn note_unfenced_read(&self, slot: usize) {
        let bit = if slot == self.slot {
            READ_OWN_UNFENCED
        } else {
            READ_OTHER_UNFENCED
        };
        self.read_unfenced.set(self.read_unfenced.get() | bit);
    }
}
