//! Grace periods: wait until every transaction that started before a timestamp has
//! finished.
//!
//! A writer that is about to overwrite or reuse memory that a reader with an older
//! snapshot may still be reading waits here first (Pisces' write-back stage, copy and
//! log reclamation; mvcc's version reclamation).

use super::clock::SlotClock;
use crate::sync::{fence, spin_step};
use std::sync::atomic::Ordering::SeqCst;

/// The grace period (lines 52-54): wait until no slot other than `own_slot` runs a
/// transaction that started before `end_ts`.
///
/// The fence orders the scan after the `globalTS` increment that produced `end_ts`
/// (ours, or — for a helper — one that happened before it took the batch lock); it
/// pairs with the fence in [`SlotClock::start`].
pub fn wait_for_readers<'a>(
    slots: impl IntoIterator<Item = &'a SlotClock>,
    own_slot: usize,
    end_ts: u64,
) {
    fence(SeqCst);
    for (i, s) in slots.into_iter().enumerate() {
        if i == own_slot {
            continue;
        }
        let mut round = 0;
        while s.load() < end_ts {
            spin_step(&mut round);
        }
    }
}
