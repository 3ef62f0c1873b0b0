//! A dead slot of a shared pool, recovered while the other processes run
//! ([`crate::peers`], *Recovery, or a stop*).
//!
//! # What is recovered
//! A slot's process died; a thread of another process holds the slot's liveness byte
//! (so it is the one recoverer) and acts as the slot: the lock words it takes name the
//! slot, its allocator cache is the slot's. In this order:
//! 1. The slot's clock is finished: a dead thread reads nothing more, and the grace
//!    periods and readers' waits of the others end. The fallback word, if the slot
//!    held it, is given back (writers waited for it only until its deadline, but no
//!    transaction could take it again).
//! 2. The lock words the slot names, each released after what it guards is made whole.
//!    The allocator's (`Allocator::release_dead`): a growth is finished from what the
//!    superblock records, the free-slab set's count made again from its bits, a
//!    class's list of slabs made again from its bits. The copy arena's: its
//!    bookkeeping is whole after any instruction (`super::arena`, *A holder that
//!    dies*). A batch's lock (the slot's own, or
//!    another slot's that it was helping) is taken over and the batch made whole
//!    (`settle_batch`): every change of its lists is made by one store or is a move
//!    that may be left half made, which is finished, and a write-back under way is
//!    finished as the dead thread would have (`Slot::wb_progress`).
//! 3. Under the slot's batch lock: the attempts no list of the batch holds are the
//!    dead thread's own (every attempt is held by exactly one holder,
//!    [`super::attempt`]). If the thread was inside a commit, that commit is finished
//!    or undone (`PiscesShared::commit_of`): rolled forward once its record is
//!    committed or valid in the log (made durable, its critical section run or ended,
//!    its entry pushed into the batch), rolled back before. Every other attempt it
//!    held is rolled back from its copies, as the owner's `rollback` would (the word
//!    each lock replaced put back, a fresh block given back), but only where the
//!    object's header word still holds the copy's lock: the owner may have died half
//!    through its own rollback, and a word it put back may have a new writer since.
//!    Then each is retired (readers may still hold its copies' offsets), for the
//!    slot's next owner to reclaim.
//! 4. The batch's committed transactions are written back, as a helper writes them
//!    (copies are immutable after commit), and their home writes made durable.
//! 5. The log: every record of the slot is written back now, but a record may be
//!    dropped only once the persistent watermark passes it (P-2 in `super::shared`):
//!    an older record of another slot would otherwise be replayed over its newer
//!    value. The recoverer helps every slot's batch until the watermark passes the
//!    clock it read after step 4 (every record of the slot has a smaller persistTS),
//!    persists it, and resets the log where its chain ends, as a hand-over leaves it
//!    ([`LOG_HANDED_OVER`]). If the watermark stays below (others' write-backs
//!    pending for all the rounds), [`Recovery::Later`]: nothing of the slot is waited
//!    for any more, and the next report tries the log again (steps 1-4 find nothing
//!    left to do).
//!
//! The recovery's allocator cache is the slot's (`ThreadCache::for_slot`), whose
//! blocks live in the allocator's region: draining it at the end gives the dead
//! thread's cached blocks back to the heap, with the fresh blocks its rolled-back
//! attempts had reserved. What the dead thread held on the way (a batch between the
//! free bitmaps and its cache, a large run reserved for an attempt whose copy was not
//! linked) stays unused until the pool's next recovery of the whole (the next open
//! after every process has closed).

use super::attempt::{record_at, AttemptId};
use super::batch::{Batch, Committed};
use super::plan::kind_of;
use super::shared::{CopyHdr, PiscesShared, WbProgress, COPY_HDR, LOG_HANDED_OVER};
use crate::engine::kit::log::redo_log;
use crate::engine::kit::log::unfenced_run;
use crate::engine::kit::write_set::WriteKind as Kind;
use crate::error::StopCause;
use crate::heap::alloc::{ThreadCache, HEADER};
use crate::peers::{Recover, Recovery};
use std::sync::atomic::Ordering::{Relaxed, Release, SeqCst};

/// Rounds of helping the other slots' write-backs for the watermark to pass a dead
/// slot's records before its recovery leaves the log for later (step 5).
const LOG_ROUNDS: usize = 1_000;

/// What the recovery does with the commit a dead thread was in (`commit_of`).
#[derive(Clone, Copy, Debug)]
enum Commit {
    /// It was in none.
    None,
    /// Rolled back: its record is not in the log.
    Back,
    /// Finished: `attempt`'s record is committed or valid in the log (as record `seq`).
    Forward { attempt: AttemptId, seq: u64 },
}

impl Recover for PiscesShared {
    fn recover(&self, slot: u32) -> Recovery {
        self.recover_dead(slot as usize)
    }
}

impl PiscesShared {
    /// Recover slot `s`, whose process died (module docs).
    fn recover_dead(&self, s: usize) -> Recovery {
        let Some(view) = self.slots.get(s) else {
            return Recovery::Impossible(StopCause::Recovery);
        };
        // 1.
        view.clock.finish();
        self.fallback.give_back_for(s);
        // 2. (The dead slot changes nothing any more: what is read here stays.)
        let holder = s as u32;
        let held: Vec<usize> = (0..self.slots.len())
            .filter(|&t| self.slots[t].batch_holder() == Some(holder))
            .collect();
        self.arena.release_dead(holder);
        self.alloc.release_dead(holder);
        let mut cache = ThreadCache::for_slot(s);
        for t in held {
            if let Err(cause) = self.settle_batch(t, s, &mut cache) {
                return Recovery::Impossible(cause);
            }
        }
        // 3.
        let mut b = view.lock_batch(s);
        let Some(in_batch) = b.held_once(view.attempts.ids().len()) else {
            return Recovery::Impossible(StopCause::BatchLists);
        };
        let loose: Vec<AttemptId> = view
            .attempts
            .ids()
            .filter(|a| !in_batch[a.index()])
            .collect();
        let Some(commit) = self.commit_of(s, &loose) else {
            return Recovery::Impossible(StopCause::Commit);
        };
        if let Commit::Forward { attempt, seq } = commit {
            self.roll_forward(s, &mut b, attempt, seq);
        }
        for &id in &loose {
            if matches!(commit, Commit::Forward { attempt, .. } if attempt == id) {
                continue;
            }
            let attempt = view.attempts.get(id);
            let record = attempt.record();
            if record != 0 {
                // SAFETY: the dead thread held the attempt, and this recovery holds it
                // now (the slot's byte): nothing places in it or recycles it.
                unsafe {
                    attempt.placed(
                        &self.arena,
                        |at| self.copy_bytes(record, at),
                        |at| self.undo_copy(record, at, &mut cache),
                    )
                };
            }
            self.retire(&mut b, id);
        }
        // The persist stage ended, in the owner's order (`pending_min` at or below every
        // pending entry's persistTS before `persisting_ts` is cleared: an entry pushed
        // by the dead thread or by an earlier recovery may not have lowered it yet). A
        // commit rolled back: its record is not in the log (P-2: a valid record is
        // never rolled back), and the watermark may pass its persistTS now.
        if let Some(least) = b.entries.iter().map(|e| e.persist_ts).min() {
            view.pending_min.fetch_min(least, SeqCst);
        }
        view.persisting_ts.store(u64::MAX, SeqCst);
        // 4.
        self.write_back(s, &mut b, s, &mut cache);
        self.sync_home(s, &mut b);
        drop(b);
        // 5.
        let log = if self.durable {
            self.empty_log(s, &mut cache)
        } else {
            Recovery::Done
        };
        self.alloc.drain(&mut cache);
        if log != Recovery::Done {
            return log;
        }
        // Release: the next state of the slot Acquires it (`PiscesEngine::thread`).
        view.log_state.store(LOG_HANDED_OVER, Release);
        Recovery::Done
    }

    /// Step 2 of the module docs for slot `t`'s batch, whose lock the dead thread of
    /// slot `s` held: its lists made whole, and a write-back it was making finished as
    /// it would have (per [`WbProgress`]); the lock is then released. Err if the
    /// progress word does not match the lists.
    ///
    /// - A move between two lists half made (in both: `super::batch`, *A holder that
    ///   dies*) is finished.
    /// - A write-back in its first part (`Copying`: homes copied, blocks published, no
    ///   object unlocked yet) is made again from its start. Repeating that part is
    ///   harmless: its objects are all still locked by the transactions being written
    ///   back, so nothing else wrote their homes; the copies are immutable after
    ///   commit; and publishing a block's state is idempotent. The grace period the
    ///   dead thread waited for before it began still covers them.
    /// - In its second part (`Unlocking`: every home copied, some objects unlocked),
    ///   each object still locked by its transaction's copy is unlocked, as the dead
    ///   thread would have; one it unlocked already is left alone (another writer may
    ///   hold it now), and its home is not written again. A copy's lock is unique
    ///   while its attempt is in the batch (the attempt is recycled only after it is
    ///   retired and a grace period), so "still locked by the copy" is exact. Then the
    ///   write-back's end.
    /// - In its end (`Ending`), the bounds are set again (each store is a maximum, a
    ///   minimum or a value of the batch) if a transaction is left to move, and the
    ///   moves to the retired ring finished. The freed blocks of a transaction whose
    ///   release had begun (`releasing`) are not released again: some may be, and
    ///   the rest stay unused until the pool's next recovery of the whole.
    /// - With lazy home sync, a sync the dead thread was making may have dropped
    ///   ranges it had not made durable: the whole pool is flushed, and the batch
    ///   synced.
    fn settle_batch(&self, t: usize, s: usize, cache: &mut ThreadCache) -> Result<(), StopCause> {
        let view = &self.slots[t];
        let Some(mut b) = view.adopt_batch(s) else {
            return Ok(());
        };
        // A recycled attempt pushed on the spare stack and not yet dropped from the
        // retired ring (`reclaim_retired_by`).
        if let Some(r) = b.retired.front().copied() {
            if b.spare.as_slice().contains(&r.attempt) {
                b.retired.pop_front(1);
            }
        }
        // Relaxed: the dead thread's last stores are in the mapping (it stopped), and
        // only a holder of the batch's lock writes the word.
        match WbProgress::decode(view.wb_progress.load(Relaxed)) {
            WbProgress::Idle | WbProgress::Copying(0) | WbProgress::Unlocking(0) => {}
            WbProgress::Copying(n) => {
                let n = n.min(b.entries.len());
                if n != 0 {
                    // (Reclaims nothing: 0 covers no retired attempt; a later write-back
                    // does.)
                    self.write_back_first(t, &mut b, s, n, 0, cache);
                }
            }
            WbProgress::Unlocking(n) => {
                let n = n.min(b.entries.len());
                if n != 0 {
                    self.unlock_written_back(t, &b, n);
                    self.write_back_tail(t, &mut b, s, n, 0, cache);
                }
            }
            WbProgress::Ending { last, releasing } => {
                self.finish_ending(t, &mut b, s, last, releasing, cache)?;
            }
        }
        if self.lazy_home {
            let heap = &self.heap;
            heap.flush(0, heap.size());
            heap.fence();
            b.unsynced.assume_pending();
            self.sync_home(t, &mut b);
        }
        // Relaxed: as the write-back's own stores of the word.
        view.wb_progress.store(WbProgress::Idle.encode(), Relaxed);
        // What the moves above assume, checked: no attempt is in two places.
        match b.held_once(view.attempts.ids().len()) {
            Some(_) => Ok(()),
            None => Err(StopCause::BatchLists),
        }
    }

    /// `settle_batch` for a write-back in its second part: each of the first `n`
    /// transactions' objects still locked by its copy unlocked.
    fn unlock_written_back(&self, t: usize, b: &Batch<'_>, n: usize) {
        let view = &self.slots[t];
        for e in b.entries.range(0, n) {
            let attempt = view.attempts.get(e.attempt);
            let record = attempt.record();
            let mut copy_of = std::collections::HashMap::new();
            let mut note = |at: u64| {
                // SAFETY: a copy of the attempt starts at `at` (`copy_bytes` said so).
                let hdr = unsafe { (self.arena.ptr(at) as *const CopyHdr).read() };
                copy_of.insert(hdr.home - HEADER as u64, at);
            };
            // SAFETY: the attempt is in the batch, whose lock this recovery holds:
            // nothing places in it or recycles it.
            unsafe { attempt.placed(&self.arena, |at| self.copy_bytes(record, at), &mut note) };
            for o in e.plan(&self.arena).objects {
                let Some(&at) = copy_of.get(&o.header) else {
                    continue;
                };
                // Release: as the write-back's unlock. Relaxed on failure: the object
                // was unlocked already, and nothing is read.
                let _ = self.heap.atomic_u64(o.header as usize).compare_exchange(
                    self.tag | at,
                    o.unlock,
                    Release,
                    Relaxed,
                );
            }
        }
    }

    /// `settle_batch` for a write-back in its end: the moves of the transactions up to
    /// the one in attempt `last` to the retired ring finished.
    fn finish_ending(
        &self,
        t: usize,
        b: &mut Batch<'_>,
        s: usize,
        last: AttemptId,
        releasing: bool,
        cache: &mut ThreadCache,
    ) -> Result<(), StopCause> {
        let front = b.entries.front().map(|e| e.attempt);
        let half_moved = front.is_some() && b.retired.back().map(|r| r.attempt) == front;
        if b.retired.iter().any(|r| r.attempt == last) {
            // Every move made; the last perhaps only half.
            if half_moved && front == Some(last) {
                b.entries.pop_front(1);
            }
            return Ok(());
        }
        let Some(n) = b.entries.iter().position(|e| e.attempt == last) else {
            return Err(StopCause::WriteBackEnd);
        };
        self.set_write_back_bounds(t, b, n + 1);
        let keep = if half_moved {
            b.entries.pop_front(1);
            None
        } else {
            front.filter(|_| releasing)
        };
        self.retire_written_back(t, b, s, last, keep, cache);
        Ok(())
    }

    /// What became of the commit the dead thread of slot `s` was in, if any, given
    /// the attempts it held (`loose`); None if its state is none a thread leaves.
    ///
    /// The thread holds one attempt while it commits (its idle one is taken only after
    /// the commit's entry is in the batch), so the commit is that attempt's. Its record
    /// is committed (`endTS` set, or in its critical section): it is visible, or about
    /// to be, and rolled forward. Otherwise the thread was in the persist stage
    /// (`persisting_ts` set): if its log's chain ends with a valid record of that
    /// persistTS, the record may be durable already, and a valid record is never
    /// rolled back (a later crash would replay it): rolled forward too. Else rolled back.
    /// In the persist stage with no attempt: nothing to decide (the commit is in the
    /// batch, or an earlier recovery decided it); only the stage is ended.
    fn commit_of(&self, s: usize, loose: &[AttemptId]) -> Option<Commit> {
        let view = &self.slots[s];
        let persisting = view.persisting_ts.load(SeqCst);
        let mut with_record = loose
            .iter()
            .copied()
            .filter(|&id| view.attempts.get(id).record() != 0);
        let committed = |id: AttemptId| {
            // SAFETY: the attempt's own record (its first chunk is kept for its life).
            let r = unsafe { record_at(&self.arena, view.attempts.get(id).record()) };
            r.end_ts() != super::protocol::END_INFINITE || r.in_critical()
        };
        if persisting == u64::MAX {
            // In no commit: every attempt it held is uncommitted (without persistence,
            // a commit that is not in the batch yet sets no persistTS).
            let forward = with_record
                .clone()
                .filter(|&id| committed(id))
                .collect::<Vec<_>>();
            return match (self.durable, forward.as_slice()) {
                (_, []) => Some(Commit::None),
                (false, &[attempt]) => Some(Commit::Forward { attempt, seq: 0 }),
                _ => None,
            };
        }
        let Some(attempt) = with_record.next() else {
            // In the persist stage, and no attempt of its own: its commit's entry is in
            // the batch already (it died after pushing it, before it ended the stage),
            // or an earlier recovery of the slot, itself killed, finished or undid it.
            // What is left is the stage's end (`recover_dead`).
            return Some(Commit::None);
        };
        if with_record.next().is_some() || !self.durable {
            return None;
        }
        let seq = (persisting != 0)
            .then(|| self.logged(s, persisting))
            .flatten();
        if committed(attempt) || seq.is_some() {
            if persisting == 0 {
                return None;
            }
            return Some(Commit::Forward {
                attempt,
                seq: seq.unwrap_or(0),
            });
        }
        Some(Commit::Back)
    }

    /// The sequence number of the valid record of persistTS `persist_ts` in slot `s`'s
    /// log, if its chain has one.
    fn logged(&self, s: usize, persist_ts: u64) -> Option<u64> {
        let l = self.heap.layout();
        let mut seq = None;
        redo_log::walk(&self.heap, l.log_offset(s), l.log_bytes_per_thread, |r| {
            if r.persist_ts == persist_ts {
                seq = Some(r.seq);
            }
        });
        seq
    }

    /// Finish the commit of the dead thread of slot `s` in `attempt`, whose record
    /// (sequence number `seq`, 0 if not found) is valid or committed (`commit_of`), as
    /// its owner would have: the record made durable, the commit's critical section
    /// run or ended, the entry pushed into the batch (`b`), `pending_min` lowered before
    /// `persisting_ts` is cleared (the owner's order, `PiscesThread::commit_visible`).
    /// Its fresh blocks that it also freed stay unused: whether the owner gave them
    /// back before it died is not known.
    fn roll_forward(&self, s: usize, b: &mut Batch<'_>, attempt: AttemptId, seq: u64) {
        let view = &self.slots[s];
        let a = view.attempts.get(attempt);
        // SAFETY: the attempt's own record.
        let r = unsafe { record_at(&self.arena, a.record()) };
        let unfenced = r.unfenced_seq.load(Relaxed) != 0;
        let persist_ts = if self.durable {
            view.persisting_ts.load(SeqCst)
        } else {
            u64::MAX
        };
        if self.durable && !unfenced {
            // Durable before visible: the owner may have died before its fence.
            let l = self.heap.layout();
            self.heap.flush(l.log_offset(s), l.log_bytes_per_thread);
            self.heap.commit_fence();
        }
        let end_ts = match r.end_ts() {
            super::protocol::END_INFINITE => r.commit(&self.clock),
            end => {
                r.finish_commit(&self.clock);
                end
            }
        };
        b.entries.push(Committed {
            attempt,
            plan: a.plan_offset(),
            end_ts,
            log_seq: seq,
            persist_ts,
            unfenced,
        });
        view.pending_min.fetch_min(persist_ts, SeqCst);
        view.persisting_ts.store(u64::MAX, SeqCst);
    }

    /// The bytes of the copy at arena offset `at` if a copy of the attempt whose record
    /// is at `record` starts there (`Attempt::placed`'s `size`).
    fn copy_bytes(&self, record: u64, at: u64) -> Option<usize> {
        if !at.is_multiple_of(8) || !self.arena.holds(at, COPY_HDR as u64) {
            return None;
        }
        // SAFETY: inside the arena's mapping and 8-aligned (checked); plain data,
        // whatever a dead owner left there.
        let hdr = unsafe { (self.arena.ptr(at) as *const CopyHdr).read() };
        let home = hdr.home as usize;
        let sane = hdr.writer == record
            && home >= HEADER
            && self.heap.in_bounds(home - HEADER, 8)
            && (home - HEADER).is_multiple_of(8)
            && hdr.len <= self.heap.size() as u64;
        sane.then(|| COPY_HDR + hdr.len as usize)
    }

    /// Undo the copy at `at` of a dead slot's attempt whose record is at `record`
    /// (module docs, step 3).
    fn undo_copy(&self, record: u64, at: u64, cache: &mut ThreadCache) {
        if self.copy_bytes(record, at).is_none() {
            return;
        }
        // SAFETY: as in `copy_bytes`.
        let hdr = unsafe { (self.arena.ptr(at) as *const CopyHdr).read() };
        let header = hdr.home - HEADER as u64;
        let word = self.heap.atomic_u64(header as usize);
        // AcqRel: as the owner's rollback's Release store (our copy unlinked before the
        // attempt is retired); a word that no longer holds our lock is left alone.
        if word
            .compare_exchange(self.tag | at, hdr.prev, Release, Relaxed)
            .is_err()
        {
            return;
        }
        if let Kind::Fresh(b) | Kind::FreshFreed(b) = kind_of(header, hdr.kind) {
            self.alloc.unreserve(cache, b);
        }
    }

    /// Step 5 of the module docs: [`Recovery::Later`] if the watermark stayed below
    /// the slot's records, [`Recovery::Impossible`] if the log is damaged (the next
    /// recovery of the whole pool refuses it).
    fn empty_log(&self, s: usize, cache: &mut ThreadCache) -> Recovery {
        let view = &self.slots[s];
        // Every record of the slot took its persistTS from the clock before its
        // commit ticked it: all are below this.
        let newest = self.clock.now();
        let passed = (0..LOG_ROUNDS).any(|round| {
            let w = self.watermark();
            if w >= newest {
                self.persist_watermark(w);
                return true;
            }
            self.help_all(s, cache, true);
            if round > 2 {
                // What holds the watermark may be another dead slot that nothing waits
                // on (so nothing reported it): have it recovered too.
                if let Some(peers) = &self.peers {
                    if let Some(dead) = peers.any_dead() {
                        peers.report_dead(dead);
                    }
                }
                std::thread::yield_now();
            }
            false
        });
        if !passed {
            return Recovery::Later;
        }
        // What the slot appended without a fence is written back, and below the
        // watermark: its run ends here.
        unfenced_run::sync_all(&self.heap, std::iter::once(&view.run));
        let l = self.heap.layout();
        let area = l.log_offset(s);
        let walked = redo_log::walk(&self.heap, area, l.log_bytes_per_thread, |_| {});
        if walked.damage.is_some() {
            return Recovery::Impossible(StopCause::Log);
        }
        redo_log::reset(&self.heap, area, walked.next_seq);
        self.heap.fence();
        view.next_seq.store(walked.next_seq, Relaxed);
        Recovery::Done
    }
}
