//! Pool-wide state of the SP3 engine.

use super::checkpoint::{engine_area_bytes, Checkpointer};
use super::index::Index;
use super::options::Sp3Options;
use super::recovery::{recover, Recovered};
use super::thread::Sp3Thread;
use crate::engine::kit::cc::clock::{Clock, SlotClock};
use crate::engine::kit::cc::fallback::Fallback;
use crate::engine::kit::log::redo_log::LogWriter;
use crate::engine::{Engine, OpenCtx};
use crate::heap::alloc::Allocator;
use crate::heap::{Heap, ROOT_SLOT_OFFSET};
use crate::{Error, Result};
use crossbeam_utils::CachePadded;
use std::sync::{Arc, Mutex};

/// One thread slot's shared part.
pub(crate) struct Slot {
    /// Published start timestamp (version reclamation only, see `version`).
    pub clock: SlotClock,
    /// Largest lid of this slot that is visible (for `Pool::sync`).
    pub published: std::sync::atomic::AtomicU64,
    /// The log writer and last lid of a thread state that was dropped, for the next
    /// state of this slot in the same run.
    pub parked: Mutex<Option<(LogWriter, u64)>>,
}

/// Pool-wide engine state.
pub(crate) struct Sp3Shared {
    /// The pool.
    pub heap: Arc<Heap>,
    /// The allocator.
    pub alloc: Arc<Allocator>,
    /// Epoch clock for version reclamation (not a transaction id).
    pub clock: Clock,
    /// The commit clock (not a transaction id either): ticked by every update commit
    /// once it holds all its locks and before it validates or publishes anything, so a
    /// reader that finds it unchanged since its last validation knows that no version
    /// it read has changed since (`thread`, *Read*).
    pub commit_clock: CachePadded<Clock>,
    /// Thread slots.
    pub slots: Vec<CachePadded<Slot>>,
    /// Object → entry.
    pub index: Index,
    /// Durable records on their way home.
    pub ckpt: Checkpointer,
    /// The serial fallback word (see `thread`, *Fallback*).
    pub fallback: Fallback,
    /// Options.
    pub opts: Sp3Options,
    /// Frees waiting in the checkpoint queues that make an allocation checkpoint first
    /// (`checkpoint`, *Frees*).
    pub free_batch: u64,
}

/// [`Sp3Shared::free_batch`] where a fence is a device sync.
const FREE_BATCH_ON_SYNC: u64 = 256;

impl Sp3Shared {
    /// After recovery: slot `s` numbers its next transaction `next_lid[s]` and appends
    /// its next record with sequence number `next_seq[s]`.
    pub(crate) fn new(
        heap: Arc<Heap>,
        alloc: Arc<Allocator>,
        opts: Sp3Options,
        next_lid: &[u64],
        next_seq: &[u64],
    ) -> Sp3Shared {
        let l = *heap.layout();
        let retired: Vec<u64> = next_lid.iter().map(|n| n - 1).collect();
        let index = Index::new(&heap, alloc.slab_capacity());
        let free_batch = if heap.fence_is_device_sync() {
            FREE_BATCH_ON_SYNC
        } else {
            1
        };
        Sp3Shared {
            slots: (0..l.max_threads)
                .map(|s| {
                    CachePadded::new(Slot {
                        clock: SlotClock::default(),
                        published: std::sync::atomic::AtomicU64::new(retired[s]),
                        parked: Mutex::new(Some((
                            LogWriter::new(l.log_offset(s), l.log_bytes_per_thread, next_seq[s]),
                            retired[s],
                        ))),
                    })
                })
                .collect(),
            heap,
            alloc,
            clock: Clock::new(1),
            commit_clock: CachePadded::new(Clock::new(1)),
            index,
            ckpt: Checkpointer::new(&retired),
            fallback: Fallback::default(),
            opts,
            free_batch,
        }
    }

    /// Run a checkpoint (see `checkpoint`).
    pub(crate) fn checkpoint(&self, wait: bool) -> usize {
        self.ckpt.run(&self.heap, &self.alloc, wait)
    }

    /// Wait until every transaction visible now is stable (`Pool::sync`): a visible
    /// transaction persists without waiting for anything (invariant 3).
    pub(crate) fn wait_all_visible_persistent(&self) {
        for (slot, s) in self.slots.iter().enumerate() {
            let p = s.published.load(std::sync::atomic::Ordering::Acquire);
            let t = super::tid::pack(slot, p);
            let mut round = 0;
            while !self.ckpt.is_stable(t) {
                self.ckpt.stabilize(false);
                if !self.ckpt.is_stable(t) {
                    crate::sync::spin_step(&mut round);
                }
            }
        }
    }

    /// The slot clocks.
    pub(crate) fn clocks(&self) -> impl Iterator<Item = &SlotClock> + Clone {
        self.slots.iter().map(|s| &s.clock)
    }
}

/// The SP3 engine over one pool.
pub(crate) struct Sp3Engine {
    sh: Arc<Sp3Shared>,
    #[allow(dead_code)] // read by tests
    recovered: Recovered,
}

impl Sp3Engine {
    /// The pool-wide state (white-box tests).
    #[cfg(test)]
    pub(super) fn shared(&self) -> &Sp3Shared {
        &self.sh
    }

    /// Recover the pool (`recovery`) and start the engine.
    pub(super) fn open(heap: Arc<Heap>, opts: Sp3Options, ctx: &OpenCtx) -> Result<Sp3Engine> {
        let l = *heap.layout();
        if l.engine_area_size < engine_area_bytes(l.max_threads) {
            return Err(Error::corrupt(format!(
                "the engine area ({} bytes) has no room for {} retired words",
                l.engine_area_size, l.max_threads
            )));
        }
        let rec = recover(&heap, ctx.recovery_threads)?;
        let alloc = Arc::new(Allocator::rebuild_private(heap.clone())?);
        // The root slot's header word is not used by this engine; keep it empty.
        heap.atomic_u64(ROOT_SLOT_OFFSET)
            .store(0, std::sync::atomic::Ordering::Relaxed);
        heap.persist(ROOT_SLOT_OFFSET, 8);
        let sh = Arc::new(Sp3Shared::new(
            heap,
            alloc,
            opts,
            &rec.next_lid,
            &rec.next_seq,
        ));
        Ok(Sp3Engine { sh, recovered: rec })
    }
}

impl Engine for Sp3Engine {
    type Thread = Sp3Thread;
    fn thread(&self, slot: usize) -> Result<Sp3Thread> {
        if slot >= self.sh.slots.len() {
            return Err(Error::TooManyThreads(self.sh.slots.len()));
        }
        Ok(Sp3Thread::new(self.sh.clone(), slot))
    }
    /// Write everything durable home and retire it (pool close).
    fn quiesce(&self) {
        self.sh.checkpoint(true);
    }
    fn heap(&self) -> Option<&Arc<Heap>> {
        Some(&self.sh.heap)
    }
    /// Every transaction visible now becomes durable (deferred-durability commits of
    /// all threads included), then the medium syncs.
    fn sync(&self) -> Result<()> {
        self.sh.wait_all_visible_persistent();
        self.sh.heap.medium().sync_all()
    }
}
