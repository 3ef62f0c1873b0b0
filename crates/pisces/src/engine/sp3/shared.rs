//! Pool-wide state of the SP3 engine.

use super::checkpoint::Checkpointer;
use super::index::Index;
use super::Sp3Options;
use crate::engine::kit::cc::clock::{Clock, SlotClock};
use crate::engine::kit::cc::fallback::Fallback;
use crate::engine::kit::log::redo_log::LogWriter;
use crate::heap::alloc::Allocator;
use crate::heap::Heap;
use crossbeam_utils::CachePadded;
use std::sync::{Arc, Mutex};

/// One thread slot's shared part.
pub struct Slot {
    /// Published start timestamp (version reclamation only, see `version`).
    pub clock: SlotClock,
    /// Largest lid of this slot that is visible (for `Pool::sync`).
    pub published: std::sync::atomic::AtomicU64,
    /// The log writer and last lid of a thread state that was dropped, for the next
    /// state of this slot in the same run.
    pub parked: Mutex<Option<(LogWriter, u64)>>,
}

/// Pool-wide engine state.
pub struct Shared {
    /// The pool.
    pub heap: Arc<Heap>,
    /// The allocator.
    pub alloc: Arc<Allocator>,
    /// Epoch clock for version reclamation (not a transaction id).
    pub clock: Clock,
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
}

impl Shared {
    /// After recovery: slot `s` numbers its next transaction `next_lid[s]` and appends
    /// its next record with sequence number `next_seq[s]`.
    pub fn new(
        heap: Arc<Heap>,
        alloc: Arc<Allocator>,
        opts: Sp3Options,
        next_lid: &[u64],
        next_seq: &[u64],
    ) -> Shared {
        let l = *heap.layout();
        let retired: Vec<u64> = next_lid.iter().map(|n| n - 1).collect();
        Shared {
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
            index: Index::default(),
            ckpt: Checkpointer::new(&retired),
            fallback: Fallback::default(),
            opts,
        }
    }

    /// Run a checkpoint (see `checkpoint`).
    pub fn checkpoint(&self, wait: bool) -> usize {
        self.ckpt.run(&self.heap, &self.alloc, wait, self.opts.bug)
    }

    /// Wait until every transaction visible now is stable (`Pool::sync`): a visible
    /// transaction persists without waiting for anything (invariant 3).
    pub fn wait_all_visible_persistent(&self) {
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
    pub fn clocks(&self) -> impl Iterator<Item = &SlotClock> + Clone {
        self.slots.iter().map(|s| &s.clock)
    }
}
