//! Pool-wide state of the Pisces engine and the write-back stage.
//!
//! # Slots
//! Each thread slot has, in DRAM and cache-padded ([`Slot`]):
//! * its published start timestamp (`protocol::SlotClock`);
//! * `persisting_ts` and `pending_min`, which bound from below the persistTS of every
//!   record of this slot that is not yet durably written back (see [`PiscesShared::watermark`]);
//! * `wb_seq`, the highest log sequence number whose write-back is durable;
//! * the batch of committed transactions whose write-back is pending (group commit),
//!   behind a mutex so that *another* thread can perform it ("helping").
//!
//! # Group commit and helping
//! A committed transaction keeps its objects locked (header words pointing to its
//! copies) until its write-back. Write-backs of up to K transactions of a thread are
//! batched under one grace period and one fence. The batch is written back when it is
//! full, when the owner's next transaction writes one of its objects, when the owner
//! quiesces, or when another thread that aborted on one of its locks helps: any thread
//! that is not inside a transaction may lock a slot's batch and write it back. Copies
//! are immutable after commit, so the helper needs nothing from the owner. The
//! owner's read-only commits write back what they can without waiting (as below) once
//! 32 of them in a row found the batch not empty: after a burst of updates followed
//! only by reads, the batch would otherwise keep its objects locked, and every read of
//! them on the copy path, until the next updates filled it; a mix of reads and updates
//! rarely meets the count, and its batches still fill.
//!
//! The owner's write-back of a full batch does not wait for the grace period
//! ([`PiscesShared::try_write_back`]): it writes back the oldest transactions whose grace
//! period has passed (no other slot runs a transaction that started before their
//! endTS) and leaves the younger ones in the batch, still locked, for a later
//! write-back. It waits only when the batch has grown to a few times its size, for
//! the write-backs that must happen now (a transaction of the owner writes one of the
//! objects, log space, quiescing) and in helpers. So a committer is not tied to the
//! progress of the other threads' running transactions.
//!
//! # Reclaiming copies (P-1)
//! After a write-back unlinks copies, readers that loaded a header earlier may still be
//! reading them. The unlinked copies are *retired* with `retire_ts = globalTS + 1` (read
//! after the unlink): every transaction that could have loaded the header has
//! `startTS < retire_ts`. They are reused only after a grace period for `retire_ts`.
//! The owner's own running transaction is never waited for (it is the caller, or its
//! start is after all its batch's endTS); it is protected because its slot's batch is
//! empty while it runs, so no grace period frees its retired copies before it commits.
//!
//! # Log recycling (P-2) and the watermark
//! A record may be dropped only when every record with a smaller persistTS (in any
//! thread's log) is durably written back; otherwise recovery would replay the older
//! record over the newer value. The persistent watermark W says "every record with
//! persistTS < W is written back and may be ignored". A thread advances W to
//! `min(globalTS, persisting_ts[*], pending_min[*], unsynced_min[*])`, persists it,
//! and only then drops its own records below W and persists its new log tail.
//!
//! # Lazy home sync (the file medium)
//! Where the persist point is `msync` (persistence domain `PageCache`), a write-back
//! stores home, publishes allocations and frees, unlocks, and leaves the ranges it
//! wrote in the slot's batch (`unsynced`, the kit's
//! [`lazy_home`](crate::engine::kit::log::lazy_home), whose docs give the safety
//! argument) without flushing or fencing. The records stay in the log meanwhile:
//! `wb_seq` is not advanced, and the slot's `unsynced_min` (the least persistTS among
//! them) holds the watermark below them. [`PiscesShared::sync_home`] syncs the ranges,
//! then advances `wb_seq` and clears `unsynced_min`; it runs when the slot recycles its
//! log, when a thread that needs log space or memory helps every slot (`help_all`), and
//! at quiesce. A block freed by a written-back transaction is reused at once, as with
//! the eager write-back: its reuse is logged after the free, and replay applies both in
//! persistTS order. On media whose persist point is the fence (DRAM, DAX) the
//! write-back fences as before.

use super::arena::{CopyArena, CHUNK_BYTES};
use super::options::PiscesOptions;
use super::plan::{plan_bytes, Plan, PlanWriter};
use super::protocol::TxRecord;
use super::thread::PiscesThread;
use crate::engine::kit::cc::clock::{Clock, SlotClock};
use crate::engine::kit::cc::fallback::Fallback;
use crate::engine::kit::cc::grace::{oldest_reader, wait_for_readers};
use crate::engine::kit::cc::header_word::PTR_MASK;
use crate::engine::kit::cc::header_word::{tag_of, tag_wraps};
use crate::engine::kit::log::lazy_home::UnsyncedHome;
use crate::engine::kit::log::redo_log::LogWriter;
use crate::engine::kit::log::unfenced_run::SharedRun;
use crate::engine::kit::log::watermark;
use crate::engine::kit::recovery::replay;
use crate::engine::kit::shared_counts::count_write;
use crate::engine::Engine;
use crate::heap::alloc::{Allocator, ThreadCache};
use crate::heap::{Heap, ROOT_SLOT_OFFSET};
use crate::medium::counters;
use crate::Result;
use crossbeam_utils::CachePadded;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::{Release, SeqCst};
use std::sync::{Arc, Mutex, MutexGuard};

crate::mutation::point! {
    /// Write-back does not wait for older snapshots (lines 52-54 of the paper's algorithm).
    pub(crate) static GRACE_PERIOD = "grace-period";
    /// The group-commit write-back that does not wait (it writes back only the
    /// transactions whose grace period has passed) writes back the whole batch, as if no
    /// reader were older than its transactions.
    pub(crate) static DEFERRED_WRITE_BACK_IGNORES_READERS = "deferred-write-back-ignores-readers";
    /// A write-back of part of a batch clears the slot's `pending_min` as if the whole
    /// batch were written back, so the watermark may pass the persistTS of a record still
    /// waiting in the batch.
    pub(crate) static PARTIAL_WRITE_BACK_CLEARS_PENDING = "partial-write-back-clears-pending";
    /// The write-back of a transaction whose durability was deferred writes home
    /// without first making its record durable.
    pub(crate) static UNFENCED_WRITE_BACK = "unfenced-write-back";
}

/// Header of an object copy in the engine's [`CopyArena`]. The copy's data (the whole
/// payload) follows.
///
/// A copy describes its write-set entry whole: the object (its header word precedes
/// `home`), the word its lock replaced and what the transaction does to the block. The
/// writer's own write set is a list of its copies, and a rollback needs nothing but
/// them: what lets another thread, or another process that maps the arena, roll back
/// an attempt whose owner is gone.
#[repr(C)]
pub(crate) struct CopyHdr {
    /// The arena offset of the writer's commit record (identity and endTS).
    pub writer: u64,
    /// Payload offset of the home object.
    pub home: u64,
    /// Payload length in bytes (a multiple of 8).
    pub len: u64,
    /// Index of the transaction's write-set entry for this object.
    pub entry: u64,
    /// The header word's value before the writer's lock: what a rollback puts back
    /// (see [`LIVE`] for why it must not be a fixed "unlocked" value).
    pub prev: u64,
    /// What the writer does to the object ([`super::plan::kind_word`]); changed by
    /// its writer only, while the copy is its own and uncommitted.
    pub kind: u64,
}

/// Bytes of [`CopyHdr`]; data starts here (8-aligned).
pub(super) const COPY_HDR: usize = std::mem::size_of::<CopyHdr>();

impl CopyHdr {
    /// Pointer to the copy's data.
    ///
    /// # Safety
    /// `this` must point to a live copy.
    #[inline]
    pub(crate) unsafe fn data(this: *const CopyHdr) -> *mut u8 {
        // SAFETY: data follows the header inside the same run of chunks (caller's
        // contract).
        unsafe { (this as *mut u8).add(COPY_HDR) }
    }
}

/// Bytes of an attempt's first chunk, after its run link, that hold its commit record:
/// the link and the record share the chunk's first cache line, and the copies start on
/// the next.
const RECORD_BYTES: usize = 64 - RUN_LINK;
const _: () = assert!(std::mem::size_of::<TxRecord>() <= RECORD_BYTES);
const _: () = assert!(std::mem::align_of::<TxRecord>() <= 8);

/// Header-word marker (with this run's tag): the block is allocated, unlocked, and its
/// home is the version every snapshot reads. Stored by the write-back that unlocks a
/// written or new object (after `publish_alloc`), by a rollback that gives back a lock
/// taken from such a word, and by a reader that found an object allocated in an
/// earlier run (`PiscesThread::read`). It lets the read fast path check "allocated"
/// and "unlocked" with the one load of the header word it needs anyway, instead of
/// another load of the slab's allocation bitmap on another cache line.
///
/// Invariant: within a run, a header word equal to `tag | LIVE` means the block's
/// allocation bit is set. A free is published only by a write-back that holds the
/// object's lock, and that write-back then stores [`FREED`], never `LIVE`; and once a
/// free is published in this run the word holds this run's values only (locks and
/// markers; a rollback restores the value its lock replaced, also of this run), so a
/// reader's compare-and-swap from an older run's value cannot succeed on a block freed
/// in this run (no ABA). Small slabs keep their class for the whole run, so a word at
/// a block's header position stays that block's header word. Words of earlier runs
/// carry another tag and never match.
pub(super) const LIVE: u64 = 1;

/// Header-word marker (with this run's tag): a transaction of this run freed the block
/// (see [`LIVE`]).
pub(super) const FREED: u64 = 2;

/// The low bits that tell a marker from a lock (copy pointers are 8-aligned).
const MARKER_BITS: u64 = 7;

/// The memory of one transaction attempt: its commit record, its copies, and the
/// plan of its write-back ([`super::plan`]).
///
/// The record and the copies are in the engine's [`CopyArena`], in runs of chunks the
/// attempt owns: the first chunk holds the record and is kept for the attempt's life;
/// the others are given back when the attempt is recycled. The first chunk is taken
/// with the first copy: an attempt that writes nothing takes no arena memory, and its
/// record offset is 0, which no copy's writer equals.
///
/// The runs are listed in the arena itself: each starts with a [`RunLink`] naming the
/// next run the attempt took, so the attempt is a handful of offsets and counts, with
/// nothing in process memory that another process mapping the arena would need to
/// find its memory.
pub(crate) struct Attempt {
    /// The owning slot.
    slot: usize,
    /// Arena offset of the commit record (0: none yet).
    record: u64,
    /// Arena offset of the write-back plan (0: none; written at commit).
    plan: u64,
    /// The first run (the record's chunk) and the last run taken (0: none yet).
    first: u64,
    last: u64,
    /// The single chunk small copies are placed in, and the bytes of it in use.
    small: u64,
    used: usize,
}

/// The start of every run of chunks an attempt owns.
#[repr(C)]
struct RunLink {
    /// The next run the attempt took (0: none).
    next: u64,
    /// Chunks in this run.
    chunks: u64,
}

/// Bytes of [`RunLink`]: a run's copies (or record) start after it (8-aligned).
const RUN_LINK: usize = std::mem::size_of::<RunLink>();

impl Attempt {
    /// A fresh attempt for slot `slot`.
    pub(crate) fn new(slot: usize) -> Box<Attempt> {
        Box::new(Attempt {
            slot,
            record: 0,
            plan: 0,
            first: 0,
            last: 0,
            small: 0,
            used: 0,
        })
    }

    /// The arena offset of the commit record: 0 until the first copy.
    #[inline]
    pub(crate) fn record(&self) -> u64 {
        self.record
    }

    /// Forget all copies (only when no thread can reference them) and reset the record.
    pub(crate) fn recycle(&mut self, arena: &CopyArena) {
        if self.first == 0 {
            return;
        }
        // SAFETY: our own record, initialised when the first chunk was taken.
        unsafe { record_at(arena, self.record) }.reset();
        self.plan = 0;
        // SAFETY: `first` is a run of ours, starting with its link.
        let head = unsafe { &mut *(arena.ptr(self.first) as *mut RunLink) };
        let mut run = std::mem::replace(&mut head.next, 0);
        while run != 0 {
            // SAFETY: every run in the list is ours and starts with its link; it is read
            // before the run is given back.
            let RunLink { next, chunks } = unsafe { (arena.ptr(run) as *const RunLink).read() };
            arena.give_back(run, chunks as usize);
            run = next;
        }
        self.last = self.first;
        self.small = self.first;
        self.used = RUN_LINK + RECORD_BYTES;
    }

    /// Take a run of `n` chunks and list it after the attempt's last run.
    fn take_run(&mut self, arena: &CopyArena, n: usize) -> Result<u64> {
        let off = arena.take(n)?;
        // SAFETY: a fresh run of ours, 8-aligned, with room for its link.
        unsafe {
            (arena.ptr(off) as *mut RunLink).write(RunLink {
                next: 0,
                chunks: n as u64,
            })
        };
        if self.last != 0 {
            // SAFETY: our last run, which starts with its link.
            unsafe { (*(arena.ptr(self.last) as *mut RunLink)).next = off };
        }
        self.last = off;
        Ok(off)
    }

    /// Room for a copy of `len` payload bytes (a multiple of 8); returns the arena
    /// offset of its header. Takes the attempt's first chunk, and starts its commit
    /// record there, if it has none yet.
    pub(crate) fn alloc_copy(&mut self, arena: &CopyArena, len: usize) -> Result<u64> {
        if self.first == 0 {
            let off = self.take_run(arena, 1)?;
            let record = off + RUN_LINK as u64;
            // SAFETY: a fresh chunk of ours, 8-aligned, with room for the record after
            // the link (`RECORD_BYTES`, checked against the type above).
            unsafe { (arena.ptr(record) as *mut TxRecord).write(TxRecord::new(self.slot)) };
            self.first = off;
            self.record = record;
            self.small = off;
            self.used = RUN_LINK + RECORD_BYTES;
        }
        self.place(arena, COPY_HDR + len)
    }

    /// Room for `bytes` bytes (a multiple of 8) in the attempt's chunks: after what the
    /// current small chunk holds, in a new chunk when it is full, in a run of their own
    /// beyond a chunk.
    #[inline]
    fn place(&mut self, arena: &CopyArena, bytes: usize) -> Result<u64> {
        if self.used + bytes <= CHUNK_BYTES {
            let off = self.small + self.used as u64;
            self.used += bytes;
            return Ok(off);
        }
        self.place_in_new_run(arena, bytes)
    }

    /// [`Attempt::place`] where the small chunk has no room.
    #[cold]
    #[inline(never)]
    fn place_in_new_run(&mut self, arena: &CopyArena, bytes: usize) -> Result<u64> {
        let need = RUN_LINK + bytes;
        if need > CHUNK_BYTES {
            // Large objects get a run of their own.
            let off = self.take_run(arena, need.div_ceil(CHUNK_BYTES))?;
            return Ok(off + RUN_LINK as u64);
        }
        let off = self.take_run(arena, 1)?;
        self.small = off;
        self.used = need;
        Ok(off + RUN_LINK as u64)
    }

    /// Space for the write-back plan of `objects` objects and at most `ranges` ranges,
    /// and a writer over it. Only once the attempt has its record (it wrote), and once
    /// per attempt until it is recycled; [`Attempt::end_plan`] ends it.
    pub(crate) fn start_plan(
        &mut self,
        arena: &CopyArena,
        objects: usize,
        ranges: usize,
    ) -> Result<PlanWriter> {
        debug_assert!(self.record != 0 && self.plan == 0);
        let off = self.place(arena, plan_bytes(objects, ranges))?;
        self.plan = off;
        // SAFETY: just placed for the plan, in the attempt's own chunks, 8-aligned
        // (every size placed is a multiple of 8), written by no one else.
        Ok(unsafe { PlanWriter::new(arena.ptr(off), objects, ranges) })
    }

    /// The plan `w` is complete. (What it did not use of its space stays unused: the
    /// plan is the last thing an attempt places before its commit.)
    pub(crate) fn end_plan(&mut self, w: PlanWriter) {
        debug_assert!(self.plan != 0);
        w.finish();
    }

    /// The write-back plan (only of a committed attempt).
    #[inline]
    pub(crate) fn plan<'a>(&'a self, arena: &'a CopyArena) -> Plan<'a> {
        debug_assert!(self.plan != 0);
        // SAFETY: a committed attempt's plan was finished at its commit, and is not
        // written again until the attempt is recycled, which needs it exclusively.
        unsafe { Plan::at(arena, self.plan) }
    }
}

/// The commit record at arena offset `off`.
///
/// # Safety
/// `off` is the record offset of an attempt of this arena (from [`Attempt::record`], or
/// the writer field of a copy that is alive or within its grace period).
#[inline(always)]
pub(crate) unsafe fn record_at(arena: &CopyArena, off: u64) -> &TxRecord {
    // SAFETY: the caller's contract: a record lives there, and the arena memory lives
    // as long as the arena.
    unsafe { &*(arena.ptr(off) as *const TxRecord) }
}

/// A committed transaction waiting for write-back.
pub(crate) struct Committed {
    /// Copies, commit record, and what write-back must do (`Attempt::plan`).
    pub attempt: Box<Attempt>,
    /// endTS.
    pub end_ts: u64,
    /// Log sequence number of its record.
    pub log_seq: u64,
    /// persistTS of its record (`u64::MAX` without persistence): what the slot's
    /// `pending_min` must stay at or below while the entry waits.
    pub persist_ts: u64,
    /// Its record was appended unfenced (durability deferred): the write-back makes
    /// the slot's run durable before it writes home.
    pub unfenced: bool,
}

/// Attempts whose copies were unlinked at a time before `retire_ts`.
pub(crate) struct Retired {
    attempt: Box<Attempt>,
    retire_ts: u64,
}

/// The pending write-backs of one slot and its reclaimable memory.
#[derive(Default)]
pub(crate) struct Batch {
    /// Committed transactions, in commit order.
    pub entries: Vec<Committed>,
    /// Unlinked attempts awaiting a grace period.
    pub retired: Vec<Retired>,
    /// Attempts ready for reuse. Boxed: copies and header words point at an attempt's
    /// commit record, so its address must not change while it is reused.
    #[allow(clippy::vec_box)]
    pub spare: Vec<Box<Attempt>>,
    /// Lazy home sync (module docs, *Lazy home sync*): home ranges written back and
    /// not yet made durable.
    pub unsynced: UnsyncedHome,
}

/// One thread slot.
pub(crate) struct Slot {
    /// Published start timestamp.
    pub clock: SlotClock,
    /// Lower bound of the persistTS of a record being written (u64::MAX: none).
    pub persisting_ts: AtomicU64,
    /// Minimum persistTS of records not yet durably written back (u64::MAX: none).
    pub pending_min: AtomicU64,
    /// Highest log sequence number durably written back.
    pub wb_seq: AtomicU64,
    /// Lazy home sync: minimum persistTS of records written back whose home writes
    /// are not durable yet (u64::MAX: none).
    pub unsynced_min: AtomicU64,
    /// Pending write-backs.
    pub batch: Mutex<Batch>,
    /// The slot's log's unfenced run (records of commits whose durability is
    /// deferred), which any thread can make durable.
    pub run: SharedRun,
}

impl Slot {
    fn new(run: SharedRun) -> Slot {
        Slot {
            clock: SlotClock::default(),
            persisting_ts: AtomicU64::new(u64::MAX),
            pending_min: AtomicU64::new(u64::MAX),
            wb_seq: AtomicU64::new(0),
            unsynced_min: AtomicU64::new(u64::MAX),
            batch: Mutex::new(Batch::default()),
            run,
        }
    }

    /// Lock the batch; a panic in another thread while holding it cannot leave it in a
    /// state worse than "some write-backs not done", so poisoning is ignored.
    pub(crate) fn lock_batch(&self) -> MutexGuard<'_, Batch> {
        // Counted: helpers take other slots' batch locks, so several threads write
        // the lock word.
        crate::engine::kit::shared_counts::lock(&self.batch)
    }

    /// [`Slot::lock_batch`] without waiting: None if another thread holds the lock.
    pub(crate) fn try_lock_batch(&self) -> Option<MutexGuard<'_, Batch>> {
        count_write(&self.batch);
        let b = self.batch.try_lock().ok()?;
        count_write(&self.batch);
        Some(b)
    }
}

/// Pool-wide engine state.
pub(crate) struct PiscesShared {
    /// The pool.
    pub heap: Arc<Heap>,
    /// The allocator.
    pub alloc: Arc<Allocator>,
    /// globalTS, on a cache line of its own: every commit increments it, and the
    /// fields around it (heap, allocator, tag, options) are read by every access of
    /// every thread, which would otherwise miss after each commit of another thread.
    pub clock: CachePadded<Clock>,
    /// Thread slots.
    pub slots: Vec<CachePadded<Slot>>,
    /// Engine options.
    pub opts: PiscesOptions,
    /// False for the `volatile` baseline: no log, no flush, no fence (same DVCC).
    pub durable: bool,
    /// Home writes are made durable lazily, at log reuse (module docs, *Lazy home
    /// sync*): durable on a medium whose persist point is `msync` (the file medium).
    pub lazy_home: bool,
    /// Generation tag in the top 16 bits of a locked header word.
    pub tag: u64,
    /// Next log sequence number of each slot after recovery.
    pub next_seq: Vec<u64>,
    /// The serial fallback word (`thread`, *Fallback*).
    pub fallback: Fallback,
    /// Where copies and commit records live.
    pub arena: CopyArena,
}

impl PiscesShared {
    /// Build the shared state (after recovery).
    pub(crate) fn new(
        heap: Arc<Heap>,
        alloc: Arc<Allocator>,
        opts: PiscesOptions,
        durable: bool,
        clock_start: u64,
        next_seq: Vec<u64>,
    ) -> Result<PiscesShared> {
        let l = *heap.layout();
        let tag = tag_of(heap.generation());
        let lazy_home = durable && heap.fence_is_device_sync();
        let ring = |slot| l.log_offset(slot) + crate::engine::kit::log::redo_log::RING_OFFSET;
        let cap = l.log_bytes_per_thread - crate::engine::kit::log::redo_log::RING_OFFSET;
        Ok(PiscesShared {
            heap,
            alloc,
            clock: CachePadded::new(Clock::new(clock_start)),
            slots: (0..l.max_threads)
                .map(|i| CachePadded::new(Slot::new(SharedRun::new(ring(i), cap))))
                .collect(),
            opts,
            durable,
            lazy_home,
            tag,
            next_seq,
            fallback: Fallback::default(),
            arena: CopyArena::new()?,
        })
    }

    /// The copy a locked header word `h` of this run names.
    #[inline(always)]
    pub(crate) fn copy_of(&self, h: u64) -> *const CopyHdr {
        self.arena.ptr(h & PTR_MASK) as *const CopyHdr
    }

    /// The commit record at arena offset `off`.
    ///
    /// # Safety
    /// As [`record_at`].
    #[inline(always)]
    pub(crate) unsafe fn record(&self, off: u64) -> &TxRecord {
        // SAFETY: the caller's contract.
        unsafe { record_at(&self.arena, off) }
    }

    /// True if header word `h` is a lock of this run (this run's tag and a copy
    /// pointer, 8-aligned, so never one of the markers).
    #[inline]
    pub(crate) fn is_locked(&self, h: u64) -> bool {
        h & (!PTR_MASK | MARKER_BITS) == self.tag
    }

    /// The header word of an allocated, unlocked object whose home is current, in this
    /// run (see [`LIVE`]).
    #[inline]
    pub(crate) fn live_word(&self) -> u64 {
        self.tag | LIVE
    }

    /// The header word of a block a committed transaction of this run freed.
    #[inline]
    pub(crate) fn freed_word(&self) -> u64 {
        self.tag | FREED
    }

    /// The slot clocks, for grace periods.
    pub(crate) fn clocks(&self) -> impl Iterator<Item = &SlotClock> {
        self.slots.iter().map(|s| &s.clock)
    }

    /// A new log writer for slot `slot`. Its records start on cache-line boundaries:
    /// a commit's record then flushes no line of the record before it
    /// (`kit::log::redo_log`, "Line-aligned records").
    pub(crate) fn log_writer(&self, slot: usize) -> LogWriter {
        let l = self.heap.layout();
        LogWriter::new(
            l.log_offset(slot),
            l.log_bytes_per_thread,
            self.next_seq[slot],
        )
        .line_aligned()
    }

    /// Write back a slot's batch (the third commit stage) and reclaim what the grace
    /// period frees. `caller_slot` is the slot of the calling thread, which must not be
    /// inside a transaction unless it is the batch's owner.
    pub(crate) fn write_back(
        &self,
        slot: usize,
        batch: &mut Batch,
        caller_slot: usize,
        cache: &mut ThreadCache,
    ) {
        if batch.entries.is_empty() {
            return;
        }
        let max_end = batch.entries.iter().map(|e| e.end_ts).max().unwrap_or(0);
        let skip = crate::mutation::active!(GRACE_PERIOD);
        if !skip {
            wait_for_readers(self.clocks(), caller_slot, max_end);
        }
        // (Retire timestamps are at least 2: with the grace period skipped, 0 reclaims
        // nothing.)
        let n = batch.entries.len();
        self.write_back_first(slot, batch, n, if skip { 0 } else { max_end }, cache);
    }

    /// Group commit's write-back that never waits: write back the oldest transactions
    /// of the batch whose grace period has already passed (their endTS is at most the
    /// oldest running snapshot of the other slots, [`oldest_reader`]) and leave the
    /// rest pending, still locked, for a later write-back. Returns how many were
    /// written back.
    ///
    /// Why: the batch's newest transactions are often younger than a transaction the
    /// other threads are running right now, and waiting for it (or, on a loaded
    /// machine, for a descheduled thread to run again) ties every committer to every
    /// other thread's progress. Their copies stay linked meanwhile, so readers and
    /// writers treat them exactly as committed transactions waiting in the batch.
    ///
    /// Only a prefix: the slot's log is recycled up to `wb_seq`, the sequence number of
    /// the last transaction written back, so write-backs follow commit order (endTS
    /// grows along the batch, as one thread commits them one after the other).
    pub(crate) fn try_write_back(
        &self,
        slot: usize,
        batch: &mut Batch,
        caller_slot: usize,
        cache: &mut ThreadCache,
    ) -> usize {
        let ignore = crate::mutation::active!(GRACE_PERIOD, DEFERRED_WRITE_BACK_IGNORES_READERS);
        let oldest = if ignore {
            u64::MAX
        } else {
            oldest_reader(self.clocks(), caller_slot)
        };
        let n = batch
            .entries
            .iter()
            .take_while(|e| e.end_ts <= oldest)
            .count();
        if n == 0 {
            return 0;
        }
        let covered = if ignore {
            0
        } else {
            batch.entries[n - 1].end_ts
        };
        self.write_back_first(slot, batch, n, covered, cache);
        n
    }

    /// Write back the first `n` (at least one) transactions of the batch, whose grace
    /// period the caller has established, and reclaim the attempts retired at or below
    /// `covered` (a timestamp every other slot's transaction has started at or after).
    fn write_back_first(
        &self,
        slot: usize,
        batch: &mut Batch,
        n: usize,
        covered: u64,
        cache: &mut ThreadCache,
    ) {
        let heap = &*self.heap;
        // A record appended unfenced must be durable before its home writes may be:
        // the page cache writes home pages back whenever it likes, and only the record
        // could replay a transaction it wrote in part.
        let newest_unfenced = batch.entries[..n]
            .iter()
            .filter(|e| e.unfenced)
            .map(|e| e.log_seq)
            .max();
        if let Some(seq) = newest_unfenced {
            let run = &self.slots[slot].run;
            if !run.is_durable(seq) && !crate::mutation::active!(UNFENCED_WRITE_BACK) {
                run.sync(heap);
            }
        }
        for e in &batch.entries[..n] {
            let plan = e.attempt.plan(&self.arena);
            for r in plan.ranges {
                // SAFETY: `src` is inside a copy of `e.attempt`, alive while the batch
                // holds it; `home` is inside the object the copy belongs to, validated
                // when it was locked (the plan's invariants). Both are 8-aligned (word
                // runs of 8-aligned payloads).
                unsafe {
                    let src = self.arena.ptr(r.src);
                    let dst = heap.ptr(r.home as usize);
                    if r.len == 8 {
                        // One changed word, the most common run: a store, not a call.
                        (dst as *mut u64).write((src as *const u64).read());
                    } else {
                        std::ptr::copy_nonoverlapping(src, dst, r.len as usize);
                    }
                };
                if self.lazy_home {
                    batch.unsynced.push(r.home as usize, r.len as usize);
                } else if self.durable {
                    heap.flush(r.home as usize, r.len as usize);
                }
                counters::add_bytes_written_home(r.len);
            }
            if plan.allocations + plan.frees == 0 {
                continue;
            }
            if self.lazy_home {
                for (b, allocated) in plan.objects.iter().filter_map(|o| o.published()) {
                    if let Some((off, len)) = self.alloc.publish_unflushed(b, allocated) {
                        // The allocator's words go with the home writes, to `sync_home`.
                        batch.unsynced.push(off, len);
                    }
                }
            } else {
                for o in plan.objects {
                    if let Some(b) = o.allocated() {
                        self.alloc.publish_alloc(b);
                    } else if let Some(b) = o.freed() {
                        self.alloc.publish_free(b);
                    }
                }
            }
        }
        // Unlock after the home copies: Release publishes the new home contents to a
        // reader that Acquires the cleared header (it then reads home, not the copy).
        for e in &batch.entries[..n] {
            for o in e.attempt.plan(&self.arena).objects {
                count_write(heap.atomic_u64(o.header as usize));
                heap.atomic_u64(o.header as usize).store(o.unlock, Release);
            }
        }
        let s = &self.slots[slot];
        let last_seq = batch.entries[n - 1].log_seq;
        if self.lazy_home {
            // Not durable yet: the records stay in the log, and below the watermark
            // bound, until `sync_home`. SeqCst: stored before `pending_min` is raised
            // below, and the watermark scan loads it after `pending_min` (`watermark`),
            // so a scan that sees the raised `pending_min` sees this bound too.
            let least = batch.entries[..n].iter().map(|e| e.persist_ts).min();
            s.unsynced_min.fetch_min(least.unwrap_or(u64::MAX), SeqCst);
            batch.unsynced.wrote_up_to(last_seq);
        } else {
            if self.durable {
                heap.fence();
            }
            // Release: the owner's recycler Acquires wb_seq and then overwrites log
            // space; our fence above made the write-back durable before this store.
            count_write(&s.wb_seq);
            s.wb_seq.fetch_max(last_seq, Release);
        }
        // The records still waiting keep the watermark below their persistTS. Only the
        // batch's lock holder changes `pending_min` (the owner lowers it when it adds
        // an entry, under this lock), so this store cannot hide a newer entry's value.
        let clear_all = crate::mutation::active!(PARTIAL_WRITE_BACK_CLEARS_PENDING);
        let waiting = batch.entries[n..]
            .iter()
            .map(|e| e.persist_ts)
            .min()
            .filter(|_| !clear_all)
            .unwrap_or(u64::MAX);
        // SeqCst: ordered with the owner's next `pending_min` update and with the
        // watermark scans (see `watermark`).
        count_write(&s.pending_min);
        s.pending_min.store(waiting, SeqCst);
        // Reclaim attempts retired before a timestamp the grace period covered.
        let mut i = 0;
        while i < batch.retired.len() {
            if batch.retired[i].retire_ts <= covered {
                let mut r = batch.retired.swap_remove(i);
                r.attempt.recycle(&self.arena);
                batch.spare.push(r.attempt);
            } else {
                i += 1;
            }
        }
        // Freed blocks are durable-free and no snapshot can see them any more.
        for e in &batch.entries[..n] {
            let plan = e.attempt.plan(&self.arena);
            if plan.frees != 0 {
                for b in plan.objects.iter().filter_map(|o| o.freed()) {
                    self.alloc.release(cache, b);
                }
            }
        }
        // Copies just unlinked: reclaim after a later grace period.
        let retire_ts = self.clock.now() + 1;
        for e in batch.entries.drain(..n) {
            batch.retired.push(Retired {
                attempt: e.attempt,
                retire_ts,
            });
        }
    }

    /// Lazy home sync: make the home writes of `slot`'s written-back transactions
    /// durable (one fence over their ranges), then let its log drop their records
    /// (`wb_seq`) and the watermark pass them (`unsynced_min`). The caller holds the
    /// slot's batch lock. Nothing to do without lazy home sync.
    pub(crate) fn sync_home(&self, slot: usize, batch: &mut Batch) {
        let Some(synced_seq) = batch.unsynced.sync(&self.heap) else {
            return;
        };
        let s = &self.slots[slot];
        // Release: as in `write_back_first` (the fence above made the home writes
        // durable before this store).
        count_write(&s.wb_seq);
        s.wb_seq.fetch_max(synced_seq, Release);
        // SeqCst: ordered with the watermark scans, as `pending_min`.
        count_write(&s.unsynced_min);
        s.unsynced_min.store(u64::MAX, SeqCst);
    }

    /// Retire an aborted attempt whose locks are already released.
    pub(crate) fn retire(&self, batch: &mut Batch, attempt: Box<Attempt>) {
        let retire_ts = self.clock.now() + 1;
        batch.retired.push(Retired { attempt, retire_ts });
    }

    /// Grace period for everything retired in `batch`, then reclaim it. Only for a
    /// caller that is not inside a transaction.
    pub(crate) fn reclaim_all(&self, batch: &mut Batch, caller_slot: usize) {
        let Some(ts) = batch.retired.iter().map(|r| r.retire_ts).max() else {
            return;
        };
        wait_for_readers(self.clocks(), caller_slot, ts);
        for mut r in batch.retired.drain(..) {
            r.attempt.recycle(&self.arena);
            batch.spare.push(r.attempt);
        }
    }

    /// Reclaim the retired attempts whose grace period has passed already (no wait).
    pub(crate) fn reclaim_ready(&self, batch: &mut Batch, caller_slot: usize) {
        let oldest = oldest_reader(self.clocks(), caller_slot);
        let mut i = 0;
        while i < batch.retired.len() {
            if batch.retired[i].retire_ts <= oldest {
                let mut r = batch.retired.swap_remove(i);
                r.attempt.recycle(&self.arena);
                batch.spare.push(r.attempt);
            } else {
                i += 1;
            }
        }
    }

    /// The watermark candidate: no record with a smaller persistTS is pending anywhere.
    ///
    /// Races closed: a thread entering its persist stage publishes `persisting_ts = 0`
    /// (SeqCst) before loading globalTS for its persistTS, and we load globalTS before
    /// scanning, so either we see its guard or its persistTS is at least our globalTS.
    /// A committing thread sets `pending_min` before clearing `persisting_ts`; we read
    /// `persisting_ts` first, so we cannot miss both.
    pub(crate) fn watermark(&self) -> u64 {
        let mut w = self.clock.now();
        for s in &self.slots {
            w = w.min(s.persisting_ts.load(SeqCst));
            w = w.min(s.pending_min.load(SeqCst));
            w = w.min(s.unsynced_min.load(SeqCst));
        }
        w
    }

    /// Raise the persistent watermark to at least `w` and make it durable.
    pub(crate) fn persist_watermark(&self, w: u64) {
        watermark::raise(&self.heap, w);
    }

    /// Write back every slot's pending batch (pool close); the caller is in no
    /// transaction.
    pub(crate) fn quiesce(&self, caller_slot: usize, cache: &mut ThreadCache) {
        for (i, s) in self.slots.iter().enumerate() {
            let mut b = s.lock_batch();
            self.write_back(i, &mut b, caller_slot, cache);
            self.sync_home(i, &mut b);
        }
    }

    /// Help: write back other slots' batches that are not locked right now (`wait`:
    /// all of each after its grace period; else only what needs no wait).
    pub(crate) fn help_all(&self, caller_slot: usize, cache: &mut ThreadCache, wait: bool) {
        for (i, s) in self.slots.iter().enumerate() {
            if i == caller_slot {
                continue;
            }
            if let Some(mut b) = s.try_lock_batch() {
                self.write_back_or_try(i, &mut b, caller_slot, cache, wait);
                // Help for log space or memory: the slot's written-back records may be
                // what holds the watermark (a help after a conflict needs no sync).
                self.sync_home(i, &mut b);
            }
        }
    }

    /// Help one slot (after aborting on one of its locks); `wait` as in `help_all`.
    pub(crate) fn help(
        &self,
        slot: usize,
        caller_slot: usize,
        cache: &mut ThreadCache,
        wait: bool,
    ) {
        if let Some(s) = self.slots.get(slot) {
            let mut b = s.lock_batch();
            self.write_back_or_try(slot, &mut b, caller_slot, cache, wait);
        }
    }

    fn write_back_or_try(
        &self,
        slot: usize,
        batch: &mut Batch,
        caller_slot: usize,
        cache: &mut ThreadCache,
        wait: bool,
    ) {
        if wait {
            self.write_back(slot, batch, caller_slot, cache);
        } else {
            self.try_write_back(slot, batch, caller_slot, cache);
        }
    }
}

/// The Pisces engine over one pool.
pub(crate) struct PiscesEngine {
    sh: Arc<PiscesShared>,
}

impl PiscesEngine {
    /// Recover the pool (if `durable`) and start the engine.
    pub(super) fn start(
        heap: Arc<Heap>,
        opts: PiscesOptions,
        durable: bool,
    ) -> Result<PiscesEngine> {
        let recovered = replay::recover(&heap)?;
        let alloc = Arc::new(Allocator::rebuild(heap.clone())?);
        // The root slot's header word is outside the allocator's heap; a lock left
        // there by a crash reads as empty (older tag), but clear it anyway: it is free.
        heap.atomic_u64(ROOT_SLOT_OFFSET)
            .store(0, std::sync::atomic::Ordering::Relaxed);
        heap.persist(ROOT_SLOT_OFFSET, 8);
        if tag_wraps(heap.generation()) {
            // This run's tag was used 65535 runs ago: words left by that run would
            // read as locks of this one.
            Allocator::clear_header_words(&heap)?;
        }
        let sh = Arc::new(PiscesShared::new(
            heap,
            alloc,
            opts,
            durable,
            recovered.clock_start,
            recovered.next_seq.clone(),
        )?);
        Ok(PiscesEngine { sh })
    }
}

impl Engine for PiscesEngine {
    type Thread = PiscesThread;
    fn thread(&self, slot: usize) -> Result<PiscesThread> {
        if slot >= self.sh.slots.len() {
            return Err(crate::Error::TooManyThreads(self.sh.slots.len()));
        }
        Ok(PiscesThread::new(self.sh.clone(), slot))
    }
    fn quiesce(&self) {
        let mut cache = ThreadCache::default();
        self.sh.quiesce(usize::MAX, &mut cache);
        self.sh.alloc.drain(&mut cache);
    }
    fn heap(&self) -> Option<&Arc<Heap>> {
        Some(&self.sh.heap)
    }
}
