//! Recovery of an `undo` pool: every transaction a crash left unfinished (entries
//! above its slot's commit marker) is rolled back from its undo entries.
//!
//! All slots' entries are parsed and checked first (a logged write must target an
//! object payload, a logged block must be one of the heap), so a damaged log refuses
//! the pool before anything is written. Then, per slot, the entries are undone newest
//! first (old contents written back, allocations freed, frees allocated again),
//! flushed, fenced, and the commit marker set past them and persisted. Undoing is
//! idempotent: a crash during recovery repeats it. The unfinished transactions of
//! different slots held exclusive locks on disjoint objects, so the slots' order does
//! not matter.

use super::log::{parse, UndoEntry, K_ALLOC, K_DATA};
use crate::heap::alloc::{Allocator, Block};
use crate::heap::Heap;
use crate::{Error, Result};
use std::sync::atomic::Ordering::Release;

/// Undo every unfinished transaction, validating all entries first; returns each
/// slot's last sequence number.
pub(super) fn recover(heap: &Heap) -> Result<Vec<u64>> {
    let l = *heap.layout();
    let mut per_slot = Vec::new();
    for slot in 0..l.max_threads {
        let (seq, entries) =
            parse(heap, l.log_offset(slot), l.log_bytes_per_thread).map_err(|e| match e {
                Error::Corrupt(m) => Error::corrupt(format!("thread slot {slot}: {m}")),
                e => e,
            })?;
        for e in &entries {
            match e.kind {
                K_DATA => {
                    crate::engine::kit::validate::check_logged_write(heap, e.off, e.len as usize)?
                }
                _ => Allocator::check_block(
                    heap,
                    Block {
                        offset: e.off,
                        size: e.len,
                    },
                )?,
            }
        }
        per_slot.push((slot, seq, entries));
    }
    let mut seqs = Vec::new();
    for (slot, seq, entries) in per_slot {
        for e in entries.iter().rev() {
            undo_one(heap, e)?;
        }
        heap.fence();
        let area = l.log_offset(slot);
        heap.atomic_u64(area).store(seq, Release);
        heap.persist(area, 8);
        seqs.push(seq);
    }
    Ok(seqs)
}

fn undo_one(heap: &Heap, e: &UndoEntry) -> Result<()> {
    let b = Block {
        offset: e.off,
        size: e.len,
    };
    match e.kind {
        K_DATA => {
            heap.write_bytes(e.off as usize, &e.data);
            heap.flush(e.off as usize, e.data.len());
        }
        K_ALLOC => Allocator::replay_free(heap, b)?,
        _ => Allocator::replay_alloc(heap, b)?,
    }
    Ok(())
}
