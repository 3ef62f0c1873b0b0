//! A slot's attempts (`attempt::AttemptTable`): each is held in exactly one place at a
//! time (the slot's thread, or its batch's entries, retired list or spare stack), a
//! thread state gives its kept attempt back when it goes, and a slot whose attempts are
//! all in its batch waits for their grace period, or, in a nested transaction that may
//! not wait, refuses to write; and the batch's lock names the slot that holds it.

use super::super::batch::attempts_per_slot;
use super::super::shared::PiscesEngine;
use super::super::thread::PiscesThread;
use super::super::PiscesOptions;
use crate::engine::{Engine, EngineId, EngineThread};
use crate::heap::{FormatParams, Heap};
use crate::tx_options::TxOptions;
use crate::Error;
use std::collections::BTreeSet;
use std::sync::Arc;

fn engine(group_commit: usize) -> PiscesEngine {
    let heap = Heap::format_dram(
        16 << 20,
        FormatParams {
            engine_id: EngineId::Pisces as u32,
            max_threads: 2,
            log_bytes_per_thread: 1 << 20,
            regions: Default::default(),
        },
    );
    let opts = PiscesOptions {
        group_commit,
        ..PiscesOptions::default()
    };
    PiscesEngine::start(Arc::new(heap), opts, true, None).unwrap()
}

/// `n` new objects of 64 bytes.
fn objects(th: &mut PiscesThread, n: usize) -> Vec<u64> {
    th.begin(&TxOptions::default());
    let v = (0..n).map(|_| th.alloc(64).unwrap()).collect();
    th.commit().unwrap();
    v
}

/// Store `v` in the object at `off`, in a transaction that commits.
fn put(th: &mut PiscesThread, off: u64, v: u64) -> crate::Result<()> {
    th.begin(&TxOptions::default());
    let p = match th.write(off, 8) {
        Ok(p) => p,
        Err(e) => {
            th.abort();
            return Err(e);
        }
    };
    // SAFETY: our private copy of at least 8 bytes, 8-aligned.
    unsafe { (p as *mut u64).write(v) };
    th.commit().map(|_| ())
}

fn get(th: &mut PiscesThread, off: u64) -> u64 {
    th.begin(&TxOptions::default());
    // SAFETY: a version of at least 8 bytes, 8-aligned, valid while the transaction runs.
    let v = unsafe { (th.read(off, 8).unwrap() as *const u64).read() };
    th.commit().unwrap();
    v
}

/// Slot `slot`'s attempts, wherever they are held: every one of the table's, once.
fn assert_each_in_one_place(e: &PiscesEngine, slot: usize, th: Option<&PiscesThread>) {
    let sh = e.shared();
    let mut held = sh.slots[slot].lock_batch(usize::MAX).held_attempts();
    held.extend(th.map(PiscesThread::held_attempts).unwrap_or_default());
    let distinct: BTreeSet<_> = held.iter().map(|a| format!("{a:?}")).collect();
    assert_eq!(
        distinct.len(),
        held.len(),
        "an attempt in two places: {held:?}"
    );
    assert_eq!(
        held.len(),
        sh.slots[slot].attempts.len(),
        "attempts lost: {held:?}"
    );
}

/// Commits, rollbacks and read-only commits, with a reader holding back the grace
/// period for a while (so the batch keeps entries and retired attempts), and after it
/// ends: at each point every attempt is in one place, and a thread state that goes
/// gives its kept attempt back.
#[test]
fn every_attempt_of_a_slot_is_in_one_place() {
    let e = engine(2);
    let mut w = e.thread(0).unwrap();
    let mut r = e.thread(1).unwrap();
    let xs = objects(&mut w, 8);
    assert_each_in_one_place(&e, 0, Some(&w));
    r.begin(&TxOptions::default());
    assert!(r.read(xs[0], 8).is_ok());
    // Fewer commits than the batch's limit (8 with a group of 2), each to another
    // object, so none waits for the reader; rollbacks retire their attempts.
    for (i, &x) in xs.iter().take(6).enumerate() {
        put(&mut w, x, i as u64 + 1).unwrap();
        w.begin(&TxOptions::default());
        w.write(xs[7], 8).unwrap();
        w.abort();
        assert_eq!(get(&mut w, x), i as u64 + 1);
        assert_each_in_one_place(&e, 0, Some(&w));
    }
    assert!(
        !e.shared().slots[0]
            .lock_batch(usize::MAX)
            .entries
            .is_empty(),
        "the reader kept nothing pending"
    );
    r.commit().unwrap();
    w.quiesce();
    assert_each_in_one_place(&e, 0, Some(&w));
    drop(w);
    assert_each_in_one_place(&e, 0, None);
    // New states of the slot, again and again: no attempt is lost with them.
    for round in 0..2 * attempts_per_slot(2) {
        let mut w = e.thread(0).unwrap();
        put(&mut w, xs[round % 8], round as u64).unwrap();
    }
    assert_each_in_one_place(&e, 0, None);
}

/// A nested transaction never waits: once every attempt of its slot is in the batch
/// (a reader holds their grace period back), its next write is refused as a conflict,
/// and nothing it committed before is lost. Out of the nesting, the slot waits for
/// the grace period instead (after the reader has ended) and writes again.
#[test]
fn a_slot_with_no_spare_attempt_refuses_nested_writes_and_waits_otherwise() {
    let e = engine(1);
    let mut w = e.thread(0).unwrap();
    let mut r = e.thread(1).unwrap();
    let n = attempts_per_slot(1);
    let xs = objects(&mut w, 2 * n);
    r.begin(&TxOptions::default());
    assert!(r.read(xs[0], 8).is_ok());
    w.set_nested(true);
    let mut committed = 0;
    let refused = loop {
        match put(&mut w, xs[committed], 7) {
            Ok(()) => committed += 1,
            Err(e) => break e,
        }
        assert!(
            committed < xs.len(),
            "more commits than the slot has attempts"
        );
    };
    assert!(matches!(refused, Error::Conflict), "{refused:?}");
    assert!(committed < n, "{committed} commits with {n} attempts");
    assert!(
        committed > n / 2,
        "refused after {committed} commits of {n}"
    );
    w.after_abort();
    // Still refused while the reader runs (the nested state does not wait).
    assert!(matches!(
        put(&mut w, xs[committed], 7),
        Err(Error::Conflict)
    ));
    assert_each_in_one_place(&e, 0, Some(&w));
    r.commit().unwrap();
    w.set_nested(false);
    put(&mut w, xs[committed], 7).unwrap();
    for &x in &xs[..=committed] {
        assert_eq!(get(&mut w, x), 7);
    }
    w.quiesce();
    assert_each_in_one_place(&e, 0, Some(&w));
}

/// A slot's batch lock names the slot of the thread that holds it (the slot's own, or
/// a helper's): what a waiter will test for liveness once pools are shared.
#[test]
fn the_batch_lock_names_the_slot_that_holds_it() {
    let e = engine(2);
    let slot = &e.shared().slots[0];
    assert_eq!(slot.batch_holder(), None);
    let helped = slot.lock_batch(1);
    assert_eq!(slot.batch_holder(), Some(1));
    assert!(slot.try_lock_batch(0).is_none(), "two holders at once");
    drop(helped);
    assert_eq!(slot.batch_holder(), None);
    let own = slot.try_lock_batch(0).expect("a free lock");
    assert_eq!(slot.batch_holder(), Some(0));
    drop(own);
    // The engine's own write-back at close runs in no slot.
    let closing = slot.lock_batch(usize::MAX);
    assert_eq!(
        slot.batch_holder(),
        Some(crate::holder_lock::HolderLock::MAX_HOLDER)
    );
    drop(closing);
}
