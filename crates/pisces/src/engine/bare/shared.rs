//! Pool-wide state of the `bare` engine: the heap, the allocator and the gate.

use super::gate::Gate;
use super::thread::BareThread;
use crate::engine::kit::cc::header_word::{tag_of, tag_wraps};
use crate::engine::Engine;
use crate::heap::alloc::{Allocator, Block};
use crate::heap::Heap;
use crate::{Error, Result};
use std::sync::Arc;

/// Pool-wide state, shared by the thread states.
pub(super) struct BareShared {
    pub(super) heap: Arc<Heap>,
    pub(super) alloc: Arc<Allocator>,
    pub(super) gate: Gate,
    /// The header word of a block allocated in this run ([`BareShared::mark_live`]):
    /// this run's tag with the low bit set.
    pub(super) live: u64,
}

impl BareShared {
    /// Mark a block just published as allocated: its header word becomes this run's
    /// live word, which lets the read fast path skip the slab's allocation bitmap.
    ///
    /// Invariant: within a run, a header word equal to `live` means the block's
    /// allocation bit is set. Only the writer publishes allocations and frees, and it
    /// holds the gate alone (no reader runs), so the word and the bit change together
    /// as far as every reader can see; a free clears the word
    /// ([`BareShared::mark_freed`]); words of earlier runs carry another tag, and a run
    /// that reuses a tag clears every header word at start.
    pub(super) fn mark_live(&self, b: Block) {
        // Relaxed: no reader runs beside the writer; the gate's release at the
        // writer's end orders this store before every later reader's load.
        self.heap
            .atomic_u64(b.offset as usize)
            .store(self.live, std::sync::atomic::Ordering::Relaxed);
    }

    /// Mark a block freed (before its free is published): its header word no longer
    /// says allocated.
    pub(super) fn mark_freed(&self, b: Block) {
        // Relaxed: as in `mark_live`.
        self.heap
            .atomic_u64(b.offset as usize)
            .store(0, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Pool-wide state of the `bare` engine.
pub(crate) struct BareEngine {
    sh: Arc<BareShared>,
}

impl BareEngine {
    /// Start on `heap` (nothing to recover: nothing was persisted).
    pub(super) fn start(heap: Arc<Heap>) -> Result<BareEngine> {
        let alloc = Arc::new(Allocator::rebuild_private(heap.clone())?);
        if tag_wraps(heap.generation()) {
            // This run's tag was used 65535 runs ago: a live word left by that run
            // would read as one of this run.
            Allocator::clear_header_words(&heap)?;
        }
        let gate = Gate::new(heap.layout().max_threads);
        let live = tag_of(heap.generation()) | 1;
        Ok(BareEngine {
            sh: Arc::new(BareShared {
                heap,
                alloc,
                gate,
                live,
            }),
        })
    }

    /// The pool-wide state (tests).
    #[cfg(test)]
    pub(super) fn shared(&self) -> &Arc<BareShared> {
        &self.sh
    }
}

impl Engine for BareEngine {
    type Thread = BareThread;
    fn thread(&self, slot: usize) -> Result<BareThread> {
        if slot >= self.sh.gate.slots() {
            return Err(Error::TooManyThreads(self.sh.gate.slots()));
        }
        Ok(BareThread::new(self.sh.clone(), slot))
    }
    fn quiesce(&self) {}
    fn heap(&self) -> Option<&Arc<Heap>> {
        Some(&self.sh.heap)
    }
}
