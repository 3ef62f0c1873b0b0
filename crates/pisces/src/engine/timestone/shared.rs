//! Pool-wide state of the `timestone` engine: the clock, the thread slots, the object
//! index, the checkpoint's pending list and budget, and the persistent words of the
//! engine area.
//!
//! # Engine area
//! ```text
//! +0     recycle watermark word of the kit (unused by this engine, kept zero)
//! +64    root slot (16 B, every engine)
//! +128   K_done: timestamp of the last completed checkpoint (persisted by the
//!        checkpointer after the home writes of that checkpoint are durable)
//! +192   OLog format word (`optable`)
//! +256   operation table: 255 slots of 8 bytes, operation index → id (`optable`)
//! +4096  the CLog area: one checkpoint record (`clog`); `clog_mib` MiB, by default
//!        half a thread log + 8 KiB (the checkpoint budget is the area less 4 KiB)
//! ```
//!
//! # Slots
//! Each thread slot has its published start timestamp ([`SlotClock`], the Pisces
//! protocol) and `committing`, which says what a commit in flight on the slot may still
//! take as its timestamp:
//!
//! | `committing`      | meaning                                                     |
//! |-------------------|-------------------------------------------------------------|
//! | `u64::MAX`        | no commit between guard and completion                       |
//! | [`BOUND_UNKNOWN`] | guarding: the bound is being read (its timestamp will be above the clock value of anyone whose fenced scan sees this) |
//! | `L`               | a **lower bound** of the timestamp (first the guard, then the timestamp itself) |
//!
//! [`TimestoneShared::enter_commit`] publishes the bound with the start protocol of
//! [`SlotClock::start`]: store `BOUND_UNKNOWN`, fence, read the clock g, store `g + 1`.
//! Readers of the word use it thus: the snapshot horizon stays below each bound
//! (`L - 1`) and skips `BOUND_UNKNOWN`; the checkpointer waits for slots at or below
//! its cut (`BOUND_UNKNOWN` included, see `clog`); a returning committer waits for
//! slots at or below its own timestamp (`TimestoneShared::wait_predecessors`).
//!
//! Why a bound and why the two steps: a transaction that begins after a commit at C
//! returned must get a snapshot ≥ C (read-your-writes across threads, linearizable
//! isolation). A guard equal to a clock value g (not `g + 1`) puts the horizon at
//! `g - 1`, below the commit that produced g — typically the one the same thread just
//! returned from. A single store of `g + 1` is not enough either: a clock value read
//! before another thread's commit at C = g + 1 can sit in the store buffer while that
//! commit checks its predecessors and returns, and then hold a later reader's horizon
//! at g. With the fence after `BOUND_UNKNOWN`, either the returning committer sees the
//! marker (and waits for the bound) or the bound was read after its increment (≥ C).
//! `linearizable_sees_every_earlier_commit` in the verification suite and the
//! `TsCommitGuard` mutation (the single-store guard g) show it.

use super::clog::{checkpoint, read_clog, Pending};
use super::optable::{check_format, OpTable};
use super::options::TimestoneOptions;
use super::recovery::recover;
use super::thread::TimestoneThread;
use crate::engine::kit::cc::clock::{Clock, SlotClock, STARTING};
use crate::engine::kit::log::redo_log;
use crate::engine::kit::slab_table::SlabWords;
use crate::engine::kit::versions::version_index::VersionIndex as Index;
use crate::engine::{Engine, OpenCtx};
use crate::fasthash::FastMap;
use crate::heap::alloc::{Allocator, Block, SmallSlot};
use crate::heap::layout::ENGINE_AREA_OFFSET;
use crate::heap::Heap;
use crate::sync::fence;
use crate::{Error, Result};
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::{Acquire, Relaxed, SeqCst};
use std::sync::{Arc, Mutex};

crate::mutation::point! {
    /// A committer's guard is the clock value, not a lower bound of its timestamp
    /// (snapshots fall one below the last completed commit).
    pub(crate) static COMMIT_GUARD = "commit-guard";
    /// The reuse lists hand a transaction a block that a commit freed after its
    /// snapshot, for which that block is still a live object: reads through the pointers
    /// the snapshot holds then find the transaction's own new object (an inconsistent
    /// snapshot, no crash needed).
    pub(crate) static REUSE_AFTER_SNAPSHOT = "reuse-after-snapshot";
}

/// Offset of the persistent K_done word.
pub(super) const K_DONE_OFFSET: usize = ENGINE_AREA_OFFSET + 128;
/// `committing` of a slot whose commit is reading its guard (see the module docs).
/// Below every real bound: the clock starts at 1, so bounds are ≥ 2.
pub(super) const BOUND_UNKNOWN: u64 = 0;
/// Offset of the CLog ring area inside the pool.
pub(super) const CLOG_OFFSET: usize = ENGINE_AREA_OFFSET + 4096;

/// One thread slot: `committing` is the lower bound of the commit in flight (see the
/// module docs).
pub(crate) use crate::engine::kit::cc::clock::CommitSlot as Slot;

/// Engine statistics (tests, diagnostics).
pub(crate) struct Stats {
    /// Checkpoints completed.
    pub checkpoints: AtomicU64,
    /// Bytes of OLog records appended, per thread slot: every update commit adds to
    /// its slot's own line (one counter for all would be a word every committer
    /// writes).
    olog_bytes: Box<[crossbeam_utils::CachePadded<AtomicU64>]>,
    /// Bytes of CLog records appended.
    pub clog_bytes: AtomicU64,
    /// Bytes written home by checkpoints.
    pub home_bytes: AtomicU64,
    /// Transactions aborted by serializable validation.
    pub validation_aborts: AtomicU64,
}

impl Stats {
    fn new(slots: usize) -> Stats {
        Stats {
            checkpoints: AtomicU64::new(0),
            olog_bytes: (0..slots).map(|_| Default::default()).collect(),
            clog_bytes: AtomicU64::new(0),
            home_bytes: AtomicU64::new(0),
            validation_aborts: AtomicU64::new(0),
        }
    }

    /// Slot `slot` appended an OLog record of `bytes` bytes.
    #[inline]
    pub(crate) fn add_olog_bytes(&self, slot: usize, bytes: u64) {
        // Relaxed: a statistic; only the slot's thread writes its counter.
        self.olog_bytes[slot].fetch_add(bytes, Relaxed);
    }

    /// Bytes of OLog records appended by every slot.
    #[cfg(test)]
    pub(crate) fn olog_bytes(&self) -> u64 {
        // Relaxed: a statistic, read once the commits counted are complete.
        self.olog_bytes.iter().map(|c| c.load(Relaxed)).sum()
    }
}

/// Small blocks this engine hands out again itself, before asking the allocator:
/// blocks freed by complete commits (whose free may not be durable yet) and
/// reservations given back. Each block is in at most one list, at most once: the
/// lists are bounded by the heap. See `clog`, *Reuse inside a window*, for why and
/// when this is crash-safe.
///
/// Every entry carries a timestamp at or after the block's free (the freeing commit's,
/// or the snapshot of the transaction that gives a reservation back), and a
/// transaction is handed only blocks freed at or below its snapshot: for an older
/// snapshot the block is still a live object, which the transaction may reach
/// through the pointers it reads, and its own new object must never stand in for it
/// (see `thread`, *Blocks freed after the snapshot*).
#[derive(Default)]
pub(crate) struct Reuse {
    /// Per block size: blocks free in the state at K_done as far as the engine knows
    /// (allocated inside the current window and freed again, or freed at or below
    /// K_done, or never published), each with its free's timestamp. Handed out first:
    /// reused, they stay on the checkpoint's fresh-block path (home only, no CLog
    /// copy).
    pub fresh: FastMap<u64, Vec<(u64, Block)>>,
    /// Blocks live at K_done and freed inside the window, with the timestamp of the
    /// free. Handed out only when the allocator has no free block left (a reused one
    /// costs a CLog copy of its new contents); a checkpoint whose cut covers the free
    /// moves them to `fresh`. Bounded by the small blocks live at K_done.
    pub held: Vec<(u64, Block)>,
}

/// The newest entry of `list` of `size` bytes freed at or below `snapshot`.
fn take_newest(list: &mut Vec<(u64, Block)>, size: u64, snapshot: u64) -> Option<Block> {
    let any = crate::mutation::active!(REUSE_AFTER_SNAPSHOT);
    // Mutation: the defect the timestamp closes (any freed block is handed out).
    let i = list
        .iter()
        .rposition(|&(ts, b)| b.size == size && (ts <= snapshot || any))?;
    Some(list.swap_remove(i).1)
}

impl Reuse {
    /// A fresh block of `size` bytes freed at or below `snapshot`.
    pub(crate) fn take_fresh(&mut self, size: u64, snapshot: u64) -> Option<Block> {
        take_newest(self.fresh.get_mut(&size)?, size, snapshot)
    }
    /// A held block of `size` bytes freed at or below `snapshot` (the newest such).
    pub(crate) fn take_held(&mut self, size: u64, snapshot: u64) -> Option<Block> {
        take_newest(&mut self.held, size, snapshot)
    }
    /// A block free at K_done, freed at or before `ts`.
    pub(crate) fn put_fresh(&mut self, ts: u64, b: Block) {
        self.fresh.entry(b.size).or_default().push((ts, b));
    }
    /// After a checkpoint at cut `k`: held blocks freed at or below `k` are free in
    /// the new K_done state.
    pub(crate) fn checkpointed(&mut self, k: u64) {
        let mut i = 0;
        while i < self.held.len() {
            if self.held[i].0 <= k {
                let (ts, b) = self.held.swap_remove(i);
                self.put_fresh(ts, b);
            } else {
                i += 1;
            }
        }
    }
}

/// A word of `committed_small`: the block has a committed state (else the word is 0).
const COMMITTED_KNOWN: u64 = 2;
/// A word of `committed_small`: the committed state is "allocated" (else "freed"); the
/// commit timestamp is in the bits above these two.
const COMMITTED_ALLOCATED: u64 = 1;

/// Pool-wide engine state.
pub(crate) struct TimestoneShared {
    /// The pool.
    pub heap: Arc<Heap>,
    /// The allocator.
    pub alloc: Arc<Allocator>,
    /// The global clock (commit and start timestamps).
    pub clock: Clock,
    /// Thread slots.
    pub slots: Vec<Slot>,
    /// Object → version chain.
    pub index: Index,
    /// The checkpointer's published snapshot (one checkpoint at a time).
    pub ckpt_clock: SlotClock,
    /// What committed transactions left for the next checkpoint.
    pub pending: Mutex<Pending>,
    /// `Pending::bits` of the small blocks, one word per block, written under the
    /// `pending` lock and read without it ([`TimestoneShared::committed_state`]).
    committed_small: SlabWords,
    /// Serializes checkpoints; holds the checkpointer's allocator cache.
    pub ckpt: Mutex<super::clog::CkptState>,
    /// Volatile mirror of K_done.
    pub k_done: AtomicU64,
    /// Bytes of the CLog ring.
    pub clog_len: usize,
    /// Checkpoint budget: the encoded size of pending items may not pass this (so one
    /// checkpoint always fits one CLog record).
    pub budget: u64,
    /// Next OLog sequence number of each slot.
    pub next_seq: Vec<u64>,
    /// Recovery re-executes operations: no OLog records are written.
    pub recovering: bool,
    /// Trigger: a checkpoint starts when the pending bytes pass this.
    pub high_water: u64,
    /// Trigger: a checkpoint starts when the bytes of large blocks (runs of slabs)
    /// freed since the last one pass this: a sixteenth of `high_water`, at least one
    /// slab (freed large blocks are reusable only after the checkpoint, see `clog`;
    /// small ones are reused at once and do not count).
    pub freed_high_water: u64,
    /// Small blocks free for reuse by this engine (see `clog`, *Reuse inside a
    /// window*).
    pub reuse: Mutex<Reuse>,
    /// Engine option `eager_reuse`: hand out held blocks (live at K_done, freed inside
    /// the window) before asking the allocator, not only when it has none left: a
    /// smaller heap, a CLog copy per reused block.
    pub eager_reuse: bool,
    /// Statistics.
    pub stats: Stats,
    /// Operation ids ↔ the indices OLog operation records name them by.
    pub ops: super::optable::OpTable,
    /// This run's tag of home words (`tlog`, *The home word*).
    pub home_tag: u64,
    /// The serial fallback word (`thread`, *Fallback*).
    pub fallback: crate::engine::kit::cc::fallback::Fallback,
}

impl TimestoneShared {
    /// The committed allocation state of `b` and its commit timestamp, if a checkpoint
    /// has not written it to the bitmaps yet, or (for a free) a snapshot older than it
    /// may still run: `Pending::bits`, for a small block from its word, without the
    /// `pending` lock (object validation asks for every block whose bit is clear).
    ///
    /// The word changes in the same order as the map's entry (both under the lock), so
    /// the answer is one the map gave at some moment of the call, as under the lock. A
    /// reader that reached `b` through a commit's publication sees that commit's word
    /// or a later one: the commit stored it before publishing (Release / Acquire).
    pub(crate) fn committed_state(&self, b: Block) -> Option<(bool, u64)> {
        if let Some(slot) = self.small_slot_of(b) {
            let w = self.committed_small.load(slot);
            return (w & COMMITTED_KNOWN != 0).then_some((w & COMMITTED_ALLOCATED != 0, w >> 2));
        }
        crate::engine::kit::shared_counts::lock(&self.pending)
            .bits
            .get(&b.offset)
            .copied()
    }

    /// Record the committed state of `b` in `p.bits` (`None`: forget it), and in the
    /// word of a small block. `p` is the guard of `self.pending`.
    pub(crate) fn set_committed_state(
        &self,
        p: &mut Pending,
        b: Block,
        state: Option<(bool, u64)>,
    ) {
        match state {
            Some(st) => {
                p.bits.insert(b.offset, st);
            }
            None => {
                p.bits.remove(&b.offset);
            }
        }
        if let Some(slot) = self.small_slot_of(b) {
            let w = state.map_or(0, |(allocated, ts)| {
                debug_assert!(ts < 1 << 62);
                ts << 2 | COMMITTED_KNOWN | if allocated { COMMITTED_ALLOCATED } else { 0 }
            });
            self.committed_small.store(slot, w);
        }
    }

    fn small_slot_of(&self, b: Block) -> Option<SmallSlot> {
        if b.is_small() {
            self.alloc.small_slot(b.payload(), 0)
        } else {
            None
        }
    }

    /// Build the state (after recovery).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        heap: Arc<Heap>,
        alloc: Arc<Allocator>,
        clock_start: u64,
        k_done: u64,
        next_seq: Vec<u64>,
        recovering: bool,
        high_water_pct: u64,
        ops: super::optable::OpTable,
    ) -> TimestoneShared {
        let n = heap.layout().max_threads;
        let clog_len = heap.layout().engine_area_size - 4096;
        let budget = (clog_len - 4096) as u64;
        TimestoneShared {
            clock: Clock::new(clock_start),
            slots: Slot::slots(n),
            index: Index::new(&heap, &alloc),
            ckpt_clock: SlotClock::default(),
            pending: Mutex::new(Pending::default()),
            committed_small: SlabWords::new(&heap, alloc.slab_capacity()),
            ckpt: Mutex::new(super::clog::CkptState::default()),
            k_done: AtomicU64::new(k_done),
            clog_len,
            budget,
            next_seq,
            recovering,
            high_water: budget * high_water_pct.clamp(1, 100) / 100,
            freed_high_water: (budget * high_water_pct.clamp(1, 100) / 100 / 16)
                .max(crate::heap::layout::SLAB_SIZE as u64),
            reuse: Mutex::default(),
            eager_reuse: false,
            stats: Stats::new(n),
            ops,
            home_tag: super::tlog::tag_of(heap.generation()),
            fallback: Default::default(),
            heap,
            alloc,
        }
    }

    /// A lower bound of every running snapshot (and of every later one if `bound` is a
    /// timestamp this thread took from the clock before the call): the scan of the
    /// `mvcc` baseline, plus the checkpointer's snapshot, plus `committing - 1` of every
    /// commit in flight, because a transaction starting now may take a snapshot that
    /// low (see [`TimestoneShared::horizon`]).
    ///
    /// Race closed: the fence pairs with the one in [`SlotClock::start_with`]. A starter
    /// the scan misses read the clock after our increment; the in-flight commits it may
    /// see below that were guarded before our increment: a bound read after our fence
    /// is above our timestamp, and one read before it follows a `BOUND_UNKNOWN` store
    /// fenced before ours, so the scan sees the marker (counted as 0: its bound is
    /// unknown) or the bound.
    pub(crate) fn oldest_active(&self, bound: u64) -> u64 {
        fence(SeqCst);
        self.slots
            .iter()
            .map(|s| {
                let c = s.committing.load(Acquire);
                s.clock.load().min(c.saturating_sub(1))
            })
            .fold(bound.min(self.ckpt_clock.load()), u64::min)
    }

    /// The oldest snapshot a transaction that may still read has published (`u64::MAX`
    /// if none): the bound of a checkpoint's cut (`clog::checkpoint`, step 1). A slot
    /// that is starting is waited for (it computes its horizon and publishes it, with no
    /// waiting of its own). Transactions publish their snapshot until their last read,
    /// at the start of their commit. The caller fenced after its last store (the
    /// checkpointer's `start_with`).
    pub(crate) fn oldest_snapshot(&self) -> u64 {
        self.slots
            .iter()
            .map(|s| {
                let mut round = 0;
                loop {
                    let v = s.clock.load();
                    if v != STARTING {
                        break v;
                    }
                    crate::sync::spin_step(&mut round);
                }
            })
            .min()
            .unwrap_or(u64::MAX)
    }

    /// The snapshot of a transaction starting when the clock reads `t`: the newest
    /// timestamp at or below `t` below which every commit is complete (visible with
    /// its final stamp, OLog record durable). Every version a reader needs is then
    /// final: readers never wait for a committer, nor for its OLog fence.
    ///
    /// A commit whose timestamp C is at most `t` stored its bound L ≤ C (or C itself)
    /// before its increment, which precedes our clock load (Release/Acquire on the
    /// clock), so this fenced scan sees L, C, or `u64::MAX` once it is complete; either
    /// of the first two minus one is below C. A slot showing `BOUND_UNKNOWN` has not
    /// incremented yet as far as we can tell (else we would see its bound), so its
    /// timestamp will be above `t`: skipped. A commit that returned before this
    /// transaction began leaves only bounds above its timestamp (see
    /// [`TimestoneShared::wait_predecessors`]), so the horizon is at or above it. No waiting.
    pub(crate) fn horizon(&self, t: u64) -> u64 {
        fence(SeqCst);
        let mut s = t;
        for slot in &self.slots {
            let c = slot.committing.load(Acquire);
            if c != BOUND_UNKNOWN && c <= t {
                s = s.min(c - 1);
            }
        }
        s
    }

    /// After a commit at `ts` is complete: wait until no other slot may still take a
    /// timestamp at or below `ts` without being complete, so that a transaction that
    /// begins after this one returned (on any thread) has a snapshot that includes it.
    /// The committer waits (at most for the OLog fences of commits that took their
    /// timestamps before it, and for guards being read); readers never do.
    ///
    /// Exits on a slot once it shows a bound above `ts` or `u64::MAX`; every later
    /// value of that slot is above `ts` too: a later guard either read the clock after
    /// our fence (so after our increment: bound > ts) or stored `BOUND_UNKNOWN` before
    /// its fence preceded ours, and then our load would have seen that marker or later
    /// (and waited), not the earlier value it exited on.
    pub(crate) fn wait_predecessors(&self, ts: u64) {
        fence(SeqCst);
        for slot in &self.slots {
            let mut round = 0;
            // Own slot shows u64::MAX here; timestamps are unique, so a value equal to
            // `ts` is another commit's guard.
            while slot.committing.load(Acquire) <= ts {
                crate::sync::spin_step(&mut round);
            }
        }
    }

    /// Publish the guard of a commit about to take its timestamp in `slot`'s
    /// `committing` (module docs). The caller fences after it and then increments the
    /// clock.
    #[inline]
    pub(crate) fn enter_commit(&self, slot: usize) {
        let c = &self.slots[slot].committing;
        if crate::mutation::active!(COMMIT_GUARD) {
            // The defect this mutation restores: the clock value itself, in one store.
            c.store(self.clock.now(), Relaxed);
            return;
        }
        // Relaxed stores: the fences order them (here against the clock load, in
        // the caller against the increment).
        c.store(BOUND_UNKNOWN, Relaxed);
        fence(SeqCst);
        c.store(self.clock.now() + 1, Relaxed);
    }

    /// The durable K_done.
    pub(crate) fn load_k_done(heap: &Heap) -> u64 {
        heap.atomic_u64(K_DONE_OFFSET).load(Acquire)
    }
}

/// The engine over one pool.
pub(crate) struct TimestoneEngine {
    sh: Arc<TimestoneShared>,
    /// Records re-executed by the recovery that opened this pool.
    #[cfg_attr(not(test), allow(dead_code))]
    pub replayed: usize,
}

impl TimestoneEngine {
    /// Open a pool: check its format, recover ([`recover`]), start.
    pub(super) fn open(
        heap: Arc<Heap>,
        o: TimestoneOptions,
        ctx: &OpenCtx,
    ) -> Result<TimestoneEngine> {
        Self::prepare(&heap)?;
        let rec = recover(&heap, ctx.reexecute.as_ref())?;
        Self::start(heap, o, rec.k_done, rec.next_seq, rec.replayed)
    }

    /// Before recovery: check the pool's format, and mark its header words unused.
    fn prepare(heap: &Heap) -> Result<()> {
        check_format(heap, never_committed(heap))?;
        // Objects are validated by the allocation bitmap, and the home word in a header
        // is safe whatever value it holds (`tlog`, *The home word*): slab formatting
        // need not zero them.
        heap.set_header_words_unused();
        Ok(())
    }

    /// After recovery (which left every commit up to `k_done` home, re-executed
    /// `replayed` records and returned each slot's next OLog sequence number): start.
    fn start(
        heap: Arc<Heap>,
        o: TimestoneOptions,
        k_done: u64,
        next_seq: Vec<u64>,
        replayed: usize,
    ) -> Result<TimestoneEngine> {
        let alloc = Arc::new(Allocator::rebuild_private(heap.clone())?);
        let table = OpTable::load(&heap)?;
        let mut sh = TimestoneShared::new(
            heap,
            alloc,
            k_done,
            k_done,
            next_seq,
            false,
            o.checkpoint_pct,
            table,
        );
        sh.eager_reuse = o.eager_reuse;
        let sh = Arc::new(sh);
        Ok(TimestoneEngine { sh, replayed })
    }

    /// Shared state (tests).
    #[cfg(test)]
    pub(super) fn shared(&self) -> &Arc<TimestoneShared> {
        &self.sh
    }
}

impl Engine for TimestoneEngine {
    type Thread = TimestoneThread;
    fn thread(&self, slot: usize) -> Result<TimestoneThread> {
        if slot >= self.sh.slots.len() {
            return Err(Error::TooManyThreads(self.sh.slots.len()));
        }
        Ok(TimestoneThread::new(self.sh.clone(), slot))
    }
    /// Nothing: every commit is durable in its OLog record (`Pool::sync` leaves the
    /// window open; [`Engine::close`] checkpoints it).
    fn quiesce(&self) {}
    /// Checkpoint the window, then empty the OLogs (module docs, *The close*).
    fn close(&self) {
        close(&self.sh);
    }
    /// Checkpoint everything committed, so home (the allocator's bitmaps included) is
    /// current: leak checks read it.
    fn write_back_all(&self) {
        let _ = checkpoint(&self.sh);
    }
    fn heap(&self) -> Option<&Arc<Heap>> {
        Some(&self.sh.heap)
    }
}

/// A clean close (no thread state left, so no commit runs): checkpoint every commit
/// (no snapshot is open, so the cut is the clock), and once K_done covers the clock,
/// reset every slot's OLog to empty (recovery's step 6) so that the next open
/// re-executes nothing. A crash in between leaves records at or below K_done, which
/// recovery skips. A checkpoint that fails (a medium that refuses writes) leaves the
/// window in the OLogs, as a crash would.
fn close(sh: &TimestoneShared) {
    if checkpoint(sh).is_err() || sh.k_done.load(Acquire) < sh.clock.now() {
        return;
    }
    let l = *sh.heap.layout();
    for slot in 0..l.max_threads {
        let next = super::recovery::parse_olog(&sh.heap, slot).next_seq;
        redo_log::reset(&sh.heap, l.log_offset(slot), next);
    }
    sh.heap.fence();
}

/// True if the pool has never committed anything: no checkpoint, no CLog record, and
/// every OLog never recycled or reset (tail word zero) with no record ever written (a
/// slot's first record goes to ring offset 0).
pub(super) fn never_committed(heap: &Heap) -> bool {
    let l = *heap.layout();
    TimestoneShared::load_k_done(heap) == 0
        && read_clog(heap, l.engine_area_size - 4096).is_none()
        && (0..l.max_threads).all(|slot| {
            let mut first = [0u8; 24];
            heap.read_bytes(l.log_offset(slot), &mut first[..8]);
            heap.read_bytes(l.log_offset(slot) + redo_log::RING_OFFSET, &mut first[8..]);
            first == [0; 24]
        })
}
