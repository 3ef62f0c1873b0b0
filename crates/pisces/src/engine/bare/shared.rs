//! Pool-wide state of the `bare` engine: the heap, the allocator and the gate.

use super::gate::Gate;
use super::thread::BareThread;
use crate::engine::Engine;
use crate::heap::alloc::Allocator;
use crate::heap::Heap;
use crate::{Error, Result};
use std::sync::Arc;

/// Pool-wide state, shared by the thread states.
pub(super) struct BareShared {
    pub(super) heap: Arc<Heap>,
    pub(super) alloc: Arc<Allocator>,
    pub(super) gate: Gate,
}

/// Pool-wide state of the `bare` engine.
pub(crate) struct BareEngine {
    sh: Arc<BareShared>,
}

impl BareEngine {
    /// Start on `heap` (nothing to recover: nothing was persisted).
    pub(super) fn start(heap: Arc<Heap>) -> Result<BareEngine> {
        let alloc = Arc::new(Allocator::rebuild(heap.clone())?);
        let gate = Gate::new(heap.layout().max_threads);
        Ok(BareEngine {
            sh: Arc::new(BareShared { heap, alloc, gate }),
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
