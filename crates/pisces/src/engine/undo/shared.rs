//! Pool-wide state of the `undo` engine: the heap, the allocator, the run's lock tag
//! and each slot's sequence number after recovery.

use super::recovery::recover;
use super::thread::UndoThread;
use crate::engine::kit::cc::header_word::{tag_of, tag_wraps};
use crate::engine::Engine;
use crate::heap::alloc::Allocator;
use crate::heap::{Heap, ROOT_SLOT_OFFSET};
use crate::{Error, Result};
use std::sync::atomic::Ordering::Release;
use std::sync::Arc;

/// Pool-wide state, shared by the thread states.
pub(super) struct UndoShared {
    pub(super) heap: Arc<Heap>,
    pub(super) alloc: Arc<Allocator>,
    /// The run's tag of lock words (`kit::cc::header_word`).
    pub(super) tag: u64,
    /// Each slot's last sequence number after recovery.
    pub(super) seqs: Vec<u64>,
}

/// The undo-logging, two-phase-locking engine.
pub(crate) struct UndoEngine {
    sh: Arc<UndoShared>,
}

impl UndoEngine {
    /// Recover (undo unfinished transactions) and start.
    pub(super) fn open(heap: Arc<Heap>) -> Result<UndoEngine> {
        let seqs = recover(&heap)?;
        let alloc = Arc::new(Allocator::rebuild_private(heap.clone())?);
        heap.atomic_u64(ROOT_SLOT_OFFSET).store(0, Release);
        heap.persist(ROOT_SLOT_OFFSET, 8);
        if tag_wraps(heap.generation()) {
            Allocator::clear_header_words(&heap)?;
        }
        let tag = tag_of(heap.generation());
        Ok(UndoEngine {
            sh: Arc::new(UndoShared {
                heap,
                alloc,
                tag,
                seqs,
            }),
        })
    }
}

#[cfg(test)]
impl UndoEngine {
    /// The pool-wide state (tests).
    pub(super) fn shared(&self) -> &Arc<UndoShared> {
        &self.sh
    }
}

impl Engine for UndoEngine {
    type Thread = UndoThread;
    fn thread(&self, slot: usize) -> Result<UndoThread> {
        if slot >= self.sh.seqs.len() {
            return Err(Error::TooManyThreads(self.sh.seqs.len()));
        }
        Ok(UndoThread::new(self.sh.clone(), slot))
    }
    fn quiesce(&self) {}
    fn heap(&self) -> Option<&Arc<Heap>> {
        Some(&self.sh.heap)
    }
}
