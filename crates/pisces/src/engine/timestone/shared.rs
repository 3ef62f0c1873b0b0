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
//! +4096  the CLog area: one checkpoint record (`clog`), half a thread log + 4 KiB
//! ```
//!
//! # Slots
//! Each thread slot has its published start timestamp ([`SlotClock`], the Pisces
//! protocol) and `committing`: while a commit is between taking its timestamp and
//! being fully visible and durable, a lower bound of that timestamp minus one (the
//! clock value it read just before taking it, then the timestamp itself); `u64::MAX`
//! otherwise. The checkpointer waits for slots whose
//! `committing` is at or below its cut (see `clog`).

use super::clog::Pending;
use super::index::Index;
use crate::engine::kit::clock::{Clock, SlotClock};
use crate::heap::alloc::Allocator;
use crate::heap::layout::ENGINE_AREA_OFFSET;
use crate::heap::Heap;
use crate::sync::fence;
use crossbeam_utils::CachePadded;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::{Acquire, SeqCst};
use std::sync::{Arc, Mutex};

/// Offset of the persistent K_done word.
pub const K_DONE_OFFSET: usize = ENGINE_AREA_OFFSET + 128;
/// Offset of the CLog ring area inside the pool.
pub const CLOG_OFFSET: usize = ENGINE_AREA_OFFSET + 4096;

/// One thread slot.
pub struct Slot {
    /// Published start timestamp.
    pub clock: SlotClock,
    /// Commit in flight (see the module docs).
    pub committing: AtomicU64,
}

/// Engine statistics (tests, diagnostics).
#[derive(Default)]
pub struct Stats {
    /// Checkpoints completed.
    pub checkpoints: AtomicU64,
    /// Bytes of OLog records appended.
    pub olog_bytes: AtomicU64,
    /// Bytes of CLog records appended.
    pub clog_bytes: AtomicU64,
    /// Bytes written home by checkpoints.
    pub home_bytes: AtomicU64,
    /// Transactions aborted by serializable validation.
    pub validation_aborts: AtomicU64,
}

/// Pool-wide engine state.
pub struct Shared {
    /// The pool.
    pub heap: Arc<Heap>,
    /// The allocator.
    pub alloc: Arc<Allocator>,
    /// The global clock (commit and start timestamps).
    pub clock: Clock,
    /// Thread slots.
    pub slots: Vec<CachePadded<Slot>>,
    /// Object → version chain.
    pub index: Index,
    /// The checkpointer's published snapshot (one checkpoint at a time).
    pub ckpt_clock: SlotClock,
    /// What committed transactions left for the next checkpoint.
    pub pending: Mutex<Pending>,
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
    /// Statistics.
    pub stats: Stats,
}

impl Shared {
    /// Build the state (after recovery).
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        heap: Arc<Heap>,
        alloc: Arc<Allocator>,
        clock_start: u64,
        k_done: u64,
        next_seq: Vec<u64>,
        recovering: bool,
        high_water_pct: u64,
    ) -> Shared {
        let n = heap.layout().max_threads;
        let clog_len = heap.layout().engine_area_size - 4096;
        let budget = (clog_len - 4096) as u64;
        Shared {
            clock: Clock::new(clock_start),
            slots: (0..n)
                .map(|_| {
                    CachePadded::new(Slot {
                        clock: SlotClock::default(),
                        committing: AtomicU64::new(u64::MAX),
                    })
                })
                .collect(),
            index: Index::default(),
            ckpt_clock: SlotClock::default(),
            pending: Mutex::new(Pending::default()),
            ckpt: Mutex::new(super::clog::CkptState::default()),
            k_done: AtomicU64::new(k_done),
            clog_len,
            budget,
            next_seq,
            recovering,
            high_water: budget * high_water_pct.clamp(1, 100) / 100,
            stats: Stats::default(),
            heap,
            alloc,
        }
    }

    /// A lower bound of every running snapshot (and of every later one if `bound` is a
    /// timestamp this thread took from the clock before the call): the scan of the
    /// `mvcc` baseline, plus the checkpointer's snapshot, plus `committing - 1` of every
    /// commit in flight, because a transaction starting now may take a snapshot that
    /// low (see [`Shared::horizon`]).
    ///
    /// Race closed: the fence pairs with the one in [`SlotClock::start_with`]. A starter
    /// the scan misses read the clock after our increment; the in-flight commits it may
    /// see below that were started before our increment, so the scan sees them too
    /// (their guard store precedes their increment, which precedes ours).
    pub fn oldest_active(&self, bound: u64) -> u64 {
        fence(SeqCst);
        self.slots
            .iter()
            .map(|s| {
                let c = s.committing.load(Acquire);
                s.clock.load().min(c.saturating_sub(1))
            })
            .fold(bound.min(self.ckpt_clock.load()), u64::min)
    }

    /// The snapshot of a transaction starting when the clock reads `t`: the newest
    /// timestamp at or below `t` below which every commit is complete (visible with
    /// its final stamp, OLog record durable). Every version a reader needs is then
    /// final: readers never wait for a committer, nor for its OLog fence.
    ///
    /// A commit whose timestamp C is at most `t` stored its guard g (a clock value read
    /// before its increment, so g < C) before that increment, which precedes our clock
    /// load, so this scan sees g, C, or `u64::MAX` once it is complete; either value
    /// minus one is below C. No waiting.
    pub fn horizon(&self, t: u64) -> u64 {
        fence(SeqCst);
        let mut s = t;
        for slot in &self.slots {
            let c = slot.committing.load(Acquire);
            if c <= t {
                s = s.min(c.saturating_sub(1));
            }
        }
        s
    }

    /// After a commit at `ts` is complete: wait until every commit with a smaller
    /// timestamp is complete, so that a transaction that begins after this one
    /// returned (on any thread) has a snapshot that includes it. The committer waits
    /// (at most for the OLog fences of commits that took their timestamps before it);
    /// readers never do.
    pub fn wait_predecessors(&self, ts: u64) {
        fence(SeqCst);
        for slot in &self.slots {
            let mut round = 0;
            // A guard g ≥ ts means a timestamp above g, so above ts.
            while slot.committing.load(Acquire) < ts {
                crate::sync::spin_step(&mut round);
            }
        }
    }

    /// The durable K_done.
    pub fn load_k_done(heap: &Heap) -> u64 {
        heap.atomic_u64(K_DONE_OFFSET).load(Acquire)
    }
}
