//! Grace periods: wait until every transaction that started before a timestamp has
//! finished.
//!
//! A writer that is about to overwrite or reuse memory that a reader with an older
//! snapshot may still be reading waits here first (Pisces' write-back stage, copy and
//! log reclamation; mvcc's version reclamation).

use super::clock::SlotClock;
use crate::peers::Patience;
use crate::sync::fence;
use std::sync::atomic::Ordering::SeqCst;

/// The grace period (lines 52-54): wait until no slot other than `own_slot` runs a
/// transaction that started before `end_ts`.
///
/// The fence orders the scan after the `globalTS` increment that produced `end_ts`
/// (ours, or — for a helper — one that happened before it took the batch lock); it
/// pairs with the fence in [`SlotClock::start`].
pub(crate) fn wait_for_readers<'a>(
    slots: impl IntoIterator<Item = &'a SlotClock>,
    own_slot: usize,
    end_ts: u64,
) {
    fence(SeqCst);
    for (i, s) in slots.into_iter().enumerate() {
        if i == own_slot {
            continue;
        }
        // (A slot of a shared pool may belong to a process that died in its
        // transaction: the wait then gives up, `crate::peers`.)
        let mut patience = Patience::new();
        while s.load() < end_ts {
            patience.step((s as *const SlotClock).cast(), Some(i as u32));
        }
    }
}

/// The grace period without the wait: the oldest start timestamp among the slots
/// other than `own_slot` that run a transaction ([`super::clock::INACTIVE`], i.e.
/// `u64::MAX`, if none does). Every transaction that started before an `end_ts` at
/// most this value has finished, exactly as if [`wait_for_readers`] had returned for
/// it: that function's loop ends for a slot the first time the slot shows a value at
/// or above `end_ts`, and this scan takes one such look per slot. The fence is the
/// same one, and closes the same race (see [`wait_for_readers`]).
pub(crate) fn oldest_reader<'a>(
    slots: impl IntoIterator<Item = &'a SlotClock>,
    own_slot: usize,
) -> u64 {
    fence(SeqCst);
    slots
        .into_iter()
        .enumerate()
        .filter(|&(i, _)| i != own_slot)
        .map(|(_, s)| s.load())
        .min()
        .unwrap_or(u64::MAX)
}
