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

use super::arena::{CopyArena, RESERVED_BYTES};
use super::attempt::{record_at, AttemptId, AttemptTable};
use super::batch::{attempts_per_slot, Batch, BatchBufs, BatchState, Retired};
use super::options::PiscesOptions;
use super::protocol::TxRecord;
use super::thread::PiscesThread;
use crate::engine::kit::cc::clock::{Clock, SlotClock};
use crate::engine::kit::cc::fallback::Fallback;
use crate::engine::kit::cc::grace::{oldest_reader, wait_for_readers};
use crate::engine::kit::cc::header_word::PTR_MASK;
use crate::engine::kit::cc::header_word::{tag_of, tag_wraps};
use crate::engine::kit::log::redo_log::LogWriter;
use crate::engine::kit::log::unfenced_run::SharedRun;
use crate::engine::kit::log::watermark;
use crate::engine::kit::recovery::replay;
use crate::engine::kit::shared_counts::count_write;
use crate::engine::Engine;
use crate::heap::alloc::{Allocator, ThreadCache};
use crate::heap::{Heap, ROOT_SLOT_OFFSET};
use crate::holder_lock::{HolderLock, HolderMutex};
use crate::medium::counters;
use crate::peers::Peers;
use crate::region::{InRegion, Line, PlacedValue, Region, MIN_RESERVED_BYTES};
use crate::Result;
use std::sync::atomic::Ordering::{Relaxed, Release, SeqCst};
use std::sync::atomic::{compiler_fence, AtomicU64};
use std::sync::Arc;

crate::mutation::hook_point! {
    /// A write-back (under the batch's lock) has copied its transactions home and not
    /// unlocked their objects yet.
    pub(crate) static HOME_COPIED = "home-copied";
    /// A write-back has unlocked the first of its objects, and not the others.
    pub(crate) static FIRST_UNLOCKED = "first-unlocked";
    /// A write-back's end has set the log's and the watermark's bounds, and moved no
    /// transaction to the retired ring yet.
    pub(crate) static BOUNDS_SET = "bounds-set";
    /// A write-back's end has released the first freed block of a transaction, and
    /// not the others.
    pub(crate) static BLOCK_RELEASED = "block-released";
    /// A write-back's end has pushed a transaction on the retired ring, and not yet
    /// dropped it from the batch's entries.
    pub(crate) static ENTRY_RETIRED = "entry-retired";
    /// A recycled attempt is on the spare stack, and not yet dropped from the retired
    /// ring.
    pub(crate) static ATTEMPT_SPARED = "attempt-spared";
}

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

/// One thread slot's state, in the engine's region.
#[repr(C, align(128))]
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
    /// The slot's log's next record sequence number for the next thread state that
    /// takes the slot: set when the engine starts, and by a state that hands its slot
    /// over ([`LOG_HANDED_OVER`]).
    pub next_seq: AtomicU64,
    /// [`LOG_HANDED_OVER`] or [`LOG_IN_USE`].
    pub log_state: AtomicU64,
    /// Where the write-back of this slot's batch under way is, for the recoverer of a
    /// holder of the batch's lock that died in it: a [`WbProgress`], encoded; 0 when
    /// none is under way. Written under the batch's lock.
    pub wb_progress: AtomicU64,
    /// The counts of the pending write-backs, under a lock word that names the slot of
    /// the thread that holds it (the slot's own, or a helper's).
    batch: HolderMutex<BatchState>,
    /// The slot's log's unfenced run (records of commits whose durability is
    /// deferred), which any thread can make durable.
    pub run: SharedRun,
}

// SAFETY: atomics, a lock word and counts, each initialised in place after the zeroed
// placement (`SlotView::place`); no address, no drop, `repr(C)`.
unsafe impl InRegion for Slot {}

/// A slot's log is empty (reset, its next record numbered `next_seq`) and no thread
/// state has the slot: the next state starts its log writer afresh. What recovery
/// leaves, and what a state of a shared pool leaves when its process gives the slot
/// up.
pub(crate) const LOG_HANDED_OVER: u64 = 0;
/// A thread state has the slot and writes its log.
pub(crate) const LOG_IN_USE: u64 = 1;

/// Where a write-back of a slot's batch is ([`Slot::wb_progress`]): what the recoverer
/// of a lock holder that died in it needs to finish it as the holder would have
/// (`PiscesShared::settle_batch`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WbProgress {
    /// No write-back is under way.
    Idle,
    /// The batch's first `n` transactions are copied home and their blocks
    /// published: steps that may be made again.
    Copying(usize),
    /// Their objects are unlocked: each one once, and not by a copy that is no longer
    /// the lock.
    Unlocking(usize),
    /// The write-back's end: the log's and the watermark's bounds set, then each of the
    /// transactions, front first, up to the one in attempt `last`, moved to the
    /// retired ring after its freed blocks are given back (`releasing`: the front
    /// one's are being given back), then the retired attempts whose grace period has
    /// passed recycled.
    Ending { last: AttemptId, releasing: bool },
}

impl WbProgress {
    /// The word of [`Slot::wb_progress`]: the phase in bits 0-1, `releasing` in bit 2,
    /// `n` or `last` above.
    #[inline]
    pub(crate) fn encode(self) -> u64 {
        match self {
            WbProgress::Idle => 0,
            WbProgress::Copying(n) => (n as u64) << 3 | 1,
            WbProgress::Unlocking(n) => (n as u64) << 3 | 2,
            WbProgress::Ending { last, releasing } => {
                (last.index() as u64) << 3 | u64::from(releasing) << 2 | 3
            }
        }
    }

    /// The progress whose word is `w`.
    pub(crate) fn decode(w: u64) -> WbProgress {
        let v = w >> 3;
        match w & 3 {
            1 => WbProgress::Copying(v as usize),
            2 => WbProgress::Unlocking(v as usize),
            3 => WbProgress::Ending {
                last: AttemptId::from_index(v as u32),
                releasing: w & 4 != 0,
            },
            _ => WbProgress::Idle,
        }
    }
}

/// A thread slot as this process sees it: its state in the region, and its attempts'
/// and batch's arrays there.
pub(crate) struct SlotView {
    state: PlacedValue<Slot>,
    /// The slot's attempts, which its thread and its batch hold by index.
    pub attempts: AttemptTable,
    bufs: BatchBufs,
}

impl std::ops::Deref for SlotView {
    type Target = Slot;

    #[inline(always)]
    fn deref(&self) -> &Slot {
        &self.state
    }
}

impl SlotView {
    /// Place slot `slot`'s state, attempts and arrays in `region`: a fresh slot whose
    /// log's ring is `cap` bytes at pool offset `ring` and whose next record is number
    /// `next_seq`.
    fn place(
        region: &Arc<Region>,
        slot: usize,
        attempts: usize,
        (ring, cap): (usize, usize),
        next_seq: u64,
    ) -> Result<SlotView> {
        let table = AttemptTable::place(region, slot, attempts)?;
        let bufs = BatchBufs::place(region, attempts)?;
        let state = region.place_value(|s: &mut Slot| {
            s.clock = SlotClock::default();
            s.persisting_ts = AtomicU64::new(u64::MAX);
            s.pending_min = AtomicU64::new(u64::MAX);
            s.unsynced_min = AtomicU64::new(u64::MAX);
            s.next_seq = AtomicU64::new(next_seq);
            s.run = SharedRun::new(ring, cap);
            bufs.fill_spare(s.batch.get_mut(), table.ids());
        })?;
        Ok(SlotView {
            state,
            attempts: table,
            bufs,
        })
    }

    /// Lock the batch for the thread of slot `caller_slot` (the lock word names it;
    /// see [`batch_holder`]). A panic while holding it cannot leave the batch in a
    /// state worse than "some write-backs not done": the lock has no poisoning.
    pub(crate) fn lock_batch(&self, caller_slot: usize) -> Batch<'_> {
        // Counted: helpers take other slots' batch locks, so several threads write
        // the lock word (the lock and the unlock).
        count_write(&self.batch);
        count_write(&self.batch);
        let (held, st) = self.batch.lock_raw(batch_holder(caller_slot));
        // SAFETY: `held` holds the lock, and the batch keeps it for as long as it
        // lives (it drops it last).
        self.bufs.batch(unsafe { &mut *st }, Some(held))
    }

    /// The batch of a lock that `dead`'s thread holds and will never release (its
    /// process died), for the one recoverer of that slot; None if it does not hold it.
    pub(crate) fn adopt_batch(&self, dead: usize) -> Option<Batch<'_>> {
        let (held, st) = self.batch.adopt_raw(batch_holder(dead))?;
        // SAFETY: as in `lock_batch`: the guard stands for the dead holder's lock.
        Some(self.bufs.batch(unsafe { &mut *st }, Some(held)))
    }

    /// [`SlotView::lock_batch`] without waiting: None if another thread holds the lock.
    pub(crate) fn try_lock_batch(&self, caller_slot: usize) -> Option<Batch<'_>> {
        count_write(&self.batch);
        let (held, st) = self.batch.try_lock_raw(batch_holder(caller_slot))?;
        count_write(&self.batch);
        // SAFETY: as in `lock_batch`.
        Some(self.bufs.batch(unsafe { &mut *st }, Some(held)))
    }

    /// Who holds the batch's lock.
    pub(crate) fn batch_holder(&self) -> Option<u32> {
        self.batch.holder()
    }
}

/// The holder a batch lock names: the slot of the thread that takes it, or the largest
/// holder id for a caller outside every slot (the engine's write-back at close).
/// Slots are below 1024, far below it.
fn batch_holder(caller_slot: usize) -> u32 {
    u32::try_from(caller_slot)
        .ok()
        .filter(|&s| s < HolderLock::MAX_HOLDER)
        .unwrap_or(HolderLock::MAX_HOLDER)
}

/// Pool-wide engine state.
pub(crate) struct PiscesShared {
    /// The pool.
    pub heap: Arc<Heap>,
    /// The allocator.
    pub alloc: Arc<Allocator>,
    /// globalTS, on a cache line of its own in the region: every commit increments
    /// it, and the fields around it would otherwise miss after each commit of another
    /// thread.
    pub clock: PlacedValue<Line<Clock>>,
    /// Thread slots.
    pub slots: Vec<SlotView>,
    /// Engine options.
    pub opts: PiscesOptions,
    /// False for the `volatile` baseline: no log, no flush, no fence (same DVCC).
    pub durable: bool,
    /// Home writes are made durable lazily, at log reuse (module docs, *Lazy home
    /// sync*): durable on a medium whose persist point is `msync` (the file medium).
    pub lazy_home: bool,
    /// Generation tag in the top 16 bits of a locked header word.
    pub tag: u64,
    /// The serial fallback word (`thread`, *Fallback*), on a line of its own.
    pub fallback: PlacedValue<Line<Fallback>>,
    /// Where copies and commit records live: the rest of the region.
    pub arena: CopyArena,
    /// Other processes share the pool (the region is a sidecar's): a thread state
    /// hands its slot's log over when it goes.
    pub shared: bool,
    /// The processes that share the pool (a shared pool's only).
    pub peers: Option<Arc<dyn Peers>>,
}

impl PiscesShared {
    /// Build the shared state (after recovery) in `region`, after the allocator's state
    /// (see [`PiscesEngine::start`]): places the clock, the fallback word and the slots
    /// in that order, then the arena, which seals the region.
    pub(crate) fn new(
        heap: Arc<Heap>,
        alloc: Arc<Allocator>,
        region: &Arc<Region>,
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
        let per_slot = attempts_per_slot(opts.group_commit);
        let clock = region.place_value(|c: &mut Line<Clock>| c.0 = Clock::new(clock_start))?;
        let fallback = region.place_value(|_: &mut Line<Fallback>| {})?;
        let slots = (0..l.max_threads)
            .map(|i| SlotView::place(region, i, per_slot, (ring(i), cap), next_seq[i]))
            .collect::<Result<Vec<_>>>()?;
        Ok(PiscesShared {
            heap,
            alloc,
            clock,
            slots,
            opts,
            durable,
            lazy_home,
            tag,
            fallback,
            arena: CopyArena::new(region)?,
            shared: region.is_shared(),
            peers: region
                .is_shared()
                .then(|| crate::peers::peers_at(region.ptr(0) as usize))
                .flatten(),
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
            self.slots[slot].next_seq.load(Relaxed),
        )
        .line_aligned()
    }

    /// Write back a slot's batch (the third commit stage) and reclaim what the grace
    /// period frees. `caller_slot` is the slot of the calling thread, which must not be
    /// inside a transaction unless it is the batch's owner.
    pub(crate) fn write_back(
        &self,
        slot: usize,
        batch: &mut Batch<'_>,
        caller_slot: usize,
        cache: &mut ThreadCache,
    ) {
        if batch.entries.is_empty() {
            return;
        }
        self.refuse_if_stopped();
        let max_end = batch.entries.iter().map(|e| e.end_ts).max().unwrap_or(0);
        let skip = crate::mutation::active!(GRACE_PERIOD);
        if !skip {
            wait_for_readers(self.clocks(), caller_slot, max_end);
        }
        // (Retire timestamps are at least 2: with the grace period skipped, 0 reclaims
        // nothing.)
        let n = batch.entries.len();
        let covered = if skip { 0 } else { max_end };
        self.write_back_first(slot, batch, caller_slot, n, covered, cache);
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
        batch: &mut Batch<'_>,
        caller_slot: usize,
        cache: &mut ThreadCache,
    ) -> usize {
        self.refuse_if_stopped();
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
            batch.entries.get(n - 1).end_ts
        };
        self.write_back_first(slot, batch, caller_slot, n, covered, cache);
        n
    }

    /// Write back the first `n` (at least one) transactions of the batch, whose grace
    /// period the caller has established, and reclaim the attempts retired at or below
    /// `covered` (a timestamp every other slot's transaction has started at or after).
    pub(super) fn write_back_first(
        &self,
        slot: usize,
        batch: &mut Batch<'_>,
        caller_slot: usize,
        n: usize,
        covered: u64,
        cache: &mut ThreadCache,
    ) {
        let heap = &*self.heap;
        let progress = &self.slots[slot].wb_progress;
        // Relaxed: read only by the recoverer of this lock's holder, after the lock
        // word (`HolderLock::adopt`).
        progress.store(WbProgress::Copying(n).encode(), Relaxed);
        // A record appended unfenced must be durable before its home writes may be:
        // the page cache writes home pages back whenever it likes, and only the record
        // could replay a transaction it wrote in part.
        let newest_unfenced = batch
            .entries
            .range(0, n)
            .filter(|e| e.unfenced)
            .map(|e| e.log_seq)
            .max();
        if let Some(seq) = newest_unfenced {
            let run = &self.slots[slot].run;
            if !run.is_durable(seq) && !crate::mutation::active!(UNFENCED_WRITE_BACK) {
                run.sync(heap);
            }
        }
        for e in batch.entries.range(0, n) {
            let plan = e.plan(&self.arena);
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
                    batch.unsynced.push(heap, r.home as usize, r.len as usize);
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
                        batch.unsynced.push(heap, off, len);
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
        crate::mutation::hook!(HOME_COPIED, caller_slot);
        // Relaxed: as above.
        progress.store(WbProgress::Unlocking(n).encode(), Relaxed);
        // Unlock after the home copies: Release publishes the new home contents to a
        // reader that Acquires the cleared header (it then reads home, not the copy).
        #[cfg(feature = "mutation")]
        let mut first = true;
        for e in batch.entries.range(0, n) {
            for o in e.plan(&self.arena).objects {
                count_write(heap.atomic_u64(o.header as usize));
                heap.atomic_u64(o.header as usize).store(o.unlock, Release);
                #[cfg(feature = "mutation")]
                if std::mem::take(&mut first) {
                    crate::mutation::hook!(FIRST_UNLOCKED, caller_slot);
                }
            }
        }
        self.write_back_tail(slot, batch, caller_slot, n, covered, cache);
    }

    /// The end of [`PiscesShared::write_back_first`], once the `n` transactions'
    /// objects are unlocked: the log's and the watermark's bounds, the transactions
    /// moved to the retired ring (their freed blocks released), the attempts retired
    /// at or before `covered` recycled ([`WbProgress::Ending`]).
    pub(super) fn write_back_tail(
        &self,
        slot: usize,
        batch: &mut Batch<'_>,
        caller_slot: usize,
        n: usize,
        covered: u64,
        cache: &mut ThreadCache,
    ) {
        let last = batch.entries.get(n - 1).attempt;
        let progress = &self.slots[slot].wb_progress;
        // Relaxed: as in `write_back_first`.
        progress.store(
            WbProgress::Ending {
                last,
                releasing: false,
            }
            .encode(),
            Relaxed,
        );
        self.set_write_back_bounds(slot, batch, n);
        crate::mutation::hook!(BOUNDS_SET, caller_slot);
        self.retire_written_back(slot, batch, caller_slot, last, None, cache);
        // Reclaim attempts retired before a timestamp the grace period covered.
        self.reclaim_retired_by(slot, batch, caller_slot, covered);
        // Release: after the list changes above (the compiler keeps them before it).
        progress.store(WbProgress::Idle.encode(), Release);
    }

    /// The log's and the watermark's bounds once the batch's first `n` transactions
    /// are written back. Made again by a recoverer: every store here is a maximum, a
    /// minimum or a value of the batch.
    pub(super) fn set_write_back_bounds(&self, slot: usize, batch: &mut Batch<'_>, n: usize) {
        let heap = &*self.heap;
        let s = &self.slots[slot];
        let last_seq = batch.entries.get(n - 1).log_seq;
        if self.lazy_home {
            // Not durable yet: the records stay in the log, and below the watermark
            // bound, until `sync_home`. SeqCst: stored before `pending_min` is raised
            // below, and the watermark scan loads it after `pending_min` (`watermark`),
            // so a scan that sees the raised `pending_min` sees this bound too.
            let least = batch.entries.range(0, n).map(|e| e.persist_ts).min();
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
        let waiting = batch
            .entries
            .range(n, batch.entries.len())
            .map(|e| e.persist_ts)
            .min()
            .filter(|_| !clear_all)
            .unwrap_or(u64::MAX);
        // SeqCst: ordered with the owner's next `pending_min` update and with the
        // watermark scans (see `watermark`).
        count_write(&s.pending_min);
        s.pending_min.store(waiting, SeqCst);
    }

    /// Move the batch's written-back transactions, front first, up to the one in
    /// attempt `last`, to the retired ring (its copies were just unlinked: reclaimed
    /// after a later grace period), each after its freed blocks are released (durable
    /// free, and no snapshot can see them any more). `keep` names an attempt whose
    /// blocks are not released (a recoverer's: the dead holder may have released some
    /// of them). Each step is one store ([`super::batch`], *A holder that dies*), and
    /// [`WbProgress::Ending`]'s `releasing` says when the front's blocks are being
    /// released.
    #[cfg_attr(not(feature = "mutation"), allow(unused_variables))] // `caller_slot`: hooks
    pub(super) fn retire_written_back(
        &self,
        slot: usize,
        batch: &mut Batch<'_>,
        caller_slot: usize,
        last: AttemptId,
        keep: Option<AttemptId>,
        cache: &mut ThreadCache,
    ) {
        let progress = &self.slots[slot].wb_progress;
        let retire_ts = self.clock.now() + 1;
        while let Some(&e) = batch.entries.front() {
            let plan = e.plan(&self.arena);
            if plan.frees != 0 && keep != Some(e.attempt) {
                // Relaxed: as in `write_back_first`; the fence keeps the compiler from
                // moving the releases' stores before it (a death would then leave a
                // block released with no trace of it).
                let releasing = WbProgress::Ending {
                    last,
                    releasing: true,
                };
                progress.store(releasing.encode(), Relaxed);
                compiler_fence(SeqCst);
                for (i, b) in plan.objects.iter().filter_map(|o| o.freed()).enumerate() {
                    self.alloc.release(cache, b);
                    if i == 0 {
                        crate::mutation::hook!(BLOCK_RELEASED, caller_slot);
                    }
                }
            }
            batch.retired.push(Retired {
                attempt: e.attempt,
                retire_ts,
            });
            crate::mutation::hook!(ENTRY_RETIRED, caller_slot);
            if plan.frees != 0 {
                // Release: after the push that ends the release (the compiler keeps the
                // push before it).
                let moving = WbProgress::Ending {
                    last,
                    releasing: false,
                };
                progress.store(moving.encode(), Release);
            }
            batch.entries.pop_front(1);
            if e.attempt == last {
                break;
            }
        }
    }

    /// Lazy home sync: make the home writes of `slot`'s written-back transactions
    /// durable (one fence over their ranges), then let its log drop their records
    /// (`wb_seq`) and the watermark pass them (`unsynced_min`). The caller holds the
    /// slot's batch lock. Nothing to do without lazy home sync.
    pub(crate) fn sync_home(&self, slot: usize, batch: &mut Batch<'_>) {
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

    /// Retire an aborted attempt of `slot` whose locks are already released.
    pub(crate) fn retire(&self, batch: &mut Batch<'_>, attempt: AttemptId) {
        let retire_ts = self.clock.now() + 1;
        batch.retired.push(Retired { attempt, retire_ts });
    }

    /// Grace period for everything retired in `slot`'s batch, then reclaim it. Only
    /// for a caller that is not inside a transaction, or that is the slot's owner
    /// (its own transaction started after everything its slot retired).
    pub(crate) fn reclaim_all(&self, slot: usize, batch: &mut Batch<'_>, caller_slot: usize) {
        let Some(ts) = batch.retired.back().map(|r| r.retire_ts) else {
            return;
        };
        wait_for_readers(self.clocks(), caller_slot, ts);
        self.reclaim_retired_by(slot, batch, caller_slot, ts);
    }

    /// Reclaim the retired attempts of `slot`'s batch whose grace period has passed
    /// already (no wait).
    pub(crate) fn reclaim_ready(&self, slot: usize, batch: &mut Batch<'_>, caller_slot: usize) {
        let oldest = oldest_reader(self.clocks(), caller_slot);
        self.reclaim_retired_by(slot, batch, caller_slot, oldest);
    }

    /// Recycle the attempts of `slot`'s batch retired at or below `covered` (a
    /// timestamp every other slot's transaction has started at or after) and make them
    /// spare.
    fn reclaim_retired_by(
        &self,
        slot: usize,
        batch: &mut Batch<'_>,
        caller_slot: usize,
        covered: u64,
    ) {
        let attempts = &self.slots[slot].attempts;
        // Oldest first: the ring's `retire_ts` never falls (`Batch::retired`). Each
        // attempt is recycled, pushed on the spare stack, and only then dropped from
        // the ring (`super::batch`, *A holder that dies*); a recycle made again is
        // harmless (`Attempt::recycle`).
        while let Some(&r) = batch.retired.front().filter(|r| r.retire_ts <= covered) {
            // SAFETY: the front of the retired ring, under the batch's lock, after the
            // grace period of its retirement (`covered`, the caller's contract); plans
            // are only made of the batch's entries.
            unsafe {
                attempts
                    .get(r.attempt)
                    .recycle(&self.arena, batch_holder(caller_slot))
            };
            batch.spare.push(r.attempt);
            crate::mutation::hook!(ATTEMPT_SPARED, caller_slot);
            batch.retired.pop_front(1);
        }
    }

    /// A spare attempt of `slot`'s batch, reclaiming retired ones whose grace period
    /// has passed if none is spare; None if none can be had without waiting.
    #[inline]
    pub(crate) fn take_spare(&self, slot: usize, batch: &mut Batch<'_>) -> Option<AttemptId> {
        batch
            .spare
            .pop()
            .or_else(|| self.take_reclaimed(slot, batch))
    }

    /// [`PiscesShared::take_spare`] when none is spare.
    #[cold]
    #[inline(never)]
    fn take_reclaimed(&self, slot: usize, batch: &mut Batch<'_>) -> Option<AttemptId> {
        self.reclaim_ready(slot, batch, slot);
        batch.spare.pop()
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
            let mut b = s.lock_batch(caller_slot);
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
            if let Some(mut b) = s.try_lock_batch(caller_slot) {
                self.write_back_or_try(i, &mut b, caller_slot, cache, wait);
                // Help for log space or memory: the slot's written-back records may be
                // what holds the watermark (a help after a conflict needs no sync).
                self.sync_home(i, &mut b);
            }
        }
    }

    /// A write-back on a pool stopped by a peer's death gives up (`crate::peers`):
    /// a write-back that a wait abandoned half done must never be done again (its
    /// objects' unlocked headers may have new writers whose write-backs the redone
    /// copies would undo), and which batches are in that state is not known. Called
    /// with the batch's lock held, so a stop made before a give-up released it is seen.
    #[inline]
    fn refuse_if_stopped(&self) {
        if let Some(s) = self.peers.as_ref().and_then(|p| p.stopped()) {
            crate::peers::give_up(s);
        }
    }

    /// For a loop that waits for others' progress (log space, a hand-over): after
    /// [`PEER_CHECK`](crate::peers::PEER_CHECK) since `waited` was first set, and then
    /// every `PEER_CHECK`, give up if the pool is stopped or a peer is dead (the
    /// loop cannot tell which slot it waits for). Nothing on a pool of one process.
    pub(crate) fn ask_peers(&self, waited: &mut Option<std::time::Instant>) {
        let Some(peers) = &self.peers else {
            return;
        };
        let now = std::time::Instant::now();
        let since = *waited.get_or_insert(now);
        if now.duration_since(since) >= crate::peers::PEER_CHECK {
            *waited = Some(now);
            crate::peers::check_peers(&**peers, None);
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
            let mut b = s.lock_batch(caller_slot);
            self.write_back_or_try(slot, &mut b, caller_slot, cache, wait);
        }
    }

    fn write_back_or_try(
        &self,
        slot: usize,
        batch: &mut Batch<'_>,
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
    /// Recover the pool (if `durable`) and start the engine, its state in `region` (a
    /// pool shared by processes: the sidecar's) or in a region of its own. A region
    /// another process built (not fresh) is found, and nothing is recovered: the pool
    /// is running.
    ///
    /// The allocator's state and the engine's share one region, placed in a fixed
    /// order: the allocator's ([`Allocator::rebuild`], or [`Allocator::attach`] where
    /// it is found), then the engine's ([`PiscesShared::new`]: clock, fallback word,
    /// slots), then the arena's bookkeeping, after which the arena seals the region and
    /// its copies take the rest. A process that places the same sequence finds the
    /// same offsets.
    pub(super) fn start(
        heap: Arc<Heap>,
        opts: PiscesOptions,
        durable: bool,
        region: Option<Arc<Region>>,
    ) -> Result<PiscesEngine> {
        let region = match region {
            Some(r) => r,
            None => {
                let alloc_bytes = Allocator::region_bytes(heap.layout());
                Region::anonymous(
                    alloc_bytes.saturating_add(RESERVED_BYTES),
                    alloc_bytes.saturating_add(MIN_RESERVED_BYTES),
                )?
            }
        };
        let threads = heap.layout().max_threads;
        if !region.is_fresh() {
            // Another process recovered the pool and built the state: find it. (The
            // clock and log numbers are the region's; the values below are not used.)
            let alloc = Arc::new(Allocator::attach(heap.clone(), &region)?);
            let sh = PiscesShared::new(heap, alloc, &region, opts, durable, 0, vec![0; threads])?;
            return Ok(PiscesEngine::recovering(Arc::new(sh)));
        }
        let recovered = replay::recover(&heap)?;
        let alloc = Arc::new(Allocator::rebuild(heap.clone(), &region)?);
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
            &region,
            opts,
            durable,
            recovered.clock_start,
            recovered.next_seq.clone(),
        )?);
        Ok(PiscesEngine::recovering(sh))
    }

    /// The engine over `sh`; on a shared pool, the one that recovers its dead slots
    /// (`crate::peers`, `super::peer_recovery`).
    fn recovering(sh: Arc<PiscesShared>) -> PiscesEngine {
        if let Some(peers) = &sh.peers {
            let recover: std::sync::Weak<dyn crate::peers::Recover> = Arc::downgrade(&sh) as _;
            peers.set_recover(recover);
        }
        PiscesEngine { sh }
    }
}

#[cfg(test)]
impl PiscesEngine {
    /// The shared state (white-box tests).
    pub(super) fn shared(&self) -> &PiscesShared {
        &self.sh
    }
}

impl Engine for PiscesEngine {
    type Thread = PiscesThread;
    fn thread(&self, slot: usize) -> Result<PiscesThread> {
        if slot >= self.sh.slots.len() {
            return Err(crate::Error::TooManyThreads(self.sh.slots.len()));
        }
        // A shared pool's slot passes between processes (an exclusive pool's states
        // are made once per slot and kept). Acquire: pairs with the Release of the
        // hand-over (`PiscesThread::hand_over`), so the log's reset and `next_seq` are
        // seen.
        let taken = if !self.sh.shared {
            Ok(LOG_IN_USE)
        } else {
            self.sh.slots[slot].log_state.compare_exchange(
                LOG_HANDED_OVER,
                LOG_IN_USE,
                std::sync::atomic::Ordering::Acquire,
                Relaxed,
            )
        };
        if taken.is_err() {
            return Err(crate::Error::invalid_config(format!(
                "thread slot {slot} of the shared pool was left in use by a process that ended \
                 without giving it up; close the pool in every process and open it again to \
                 recover it"
            )));
        }
        Ok(PiscesThread::new(self.sh.clone(), slot))
    }
    fn quiesce(&self) {
        let quiesce = || {
            let mut cache = ThreadCache::default();
            self.sh.quiesce(usize::MAX, &mut cache);
            self.sh.alloc.drain(&mut cache);
        };
        match &self.sh.peers {
            None => quiesce(),
            // A stopped pool is left as it is; a wait here that gives up stops it
            // (`crate::peers`).
            Some(p) if p.stopped().is_none() => {
                let _ = crate::peers::catch(quiesce);
            }
            Some(_) => {}
        }
    }
    fn heap(&self) -> Option<&Arc<Heap>> {
        Some(&self.sh.heap)
    }
    fn abandoned_slot(&self, owned: &dyn Fn(usize) -> bool) -> Option<usize> {
        // Relaxed: a state in use is published before its process could end; one that
        // is handed over meanwhile reads as in use at worst, and its owner then still
        // holds it.
        (0..self.sh.slots.len())
            .find(|&s| self.sh.slots[s].log_state.load(Relaxed) == LOG_IN_USE && !owned(s))
    }
}
