//! Write-back and log truncation: the checkpoint (§III-D, "SP3 also performs checkpoint
//! periodically, to truncate logs").
//!
//! # Retired watermarks (persistent)
//! One word per thread slot in the engine area ([`retired_offset`]): `retired[s] = L`
//! says "slot s's records with lid ≤ L are durably home; recovery skips them". The
//! invariant recovery relies on:
//!
//! > **R**: if `retired[s] >= l` is durable, then record (s, l)'s effects are durably
//! > home, and so is every predecessor's: for each (s', l') in its dependency set,
//! > `retired[s'] >= l'` is durable too.
//!
//! Without R, recovery could replay an older record over a newer value whose record is
//! gone (e.g. T1 on slot A writes X=1, T2 on slot B writes X=2; if B's record were
//! retired and A's not, replaying A's would leave X=1).
//!
//! # The checkpoint
//! Threads hand every durable record to their slot's queue ([`Checkpointer::push`]),
//! in lid order. A checkpoint (run by whichever thread needs log space or memory, under
//! one lock; there is no background thread, so runs on the crash simulator stay
//! deterministic) repeats rounds:
//! 1. From each slot's queue, take the prefix of records whose cross-slot predecessors
//!    are *durably* retired (the DRAM mirror is raised only after the persistent word's
//!    fence). Every taken record is durable (pushed after its fence) and so are its
//!    predecessors (retired ⇒ durable): home is written only when a transaction and all
//!    its predecessors are persistent, as the paper requires.
//! 2. Apply them in order (data, allocator bitmaps), flush; **fence**.
//! 3. Store each touched slot's new `retired` word, flush; **fence**; raise the mirrors.
//! 4. Freed blocks become reusable (see below).
//!
//! No record of a round depends on another slot's record of the same round (step 1), so
//! the `retired` words of one round may persist in any order and R holds at every
//! crash point. Writes to one object reach home in dependency order: a later writer of
//! an object always lists the earlier one (its `lastTid`) or follows it in its slot.
//!
//! # Frees
//! A freed block is reused only after the freeing record is retired, so a record that
//! allocates the block again never meets, in recovery, an unretired free of it (replay
//! order between them would be undefined if they were independent in the DAG). Readers
//! need no grace period for this: they read DRAM versions, never home.
//!
//! An allocation checkpoints first when frees wait ([`Sp3Shared::free_batch`] of them):
//! otherwise the allocator would take fresh slabs while freed blocks wait, and the heap
//! would fragment. Where a fence is cheap, one waiting free is enough. Where it is a
//! device sync (the file medium, persistence domain `PageCache`), a checkpoint costs two
//! of them, so the allocation waits for a batch of frees: a mix of inserts and removes
//! would otherwise pay a checkpoint for nearly every insert that follows a remove.
//! Safety does not depend on it: a free still takes effect only in a checkpoint.
//!
//! [`Sp3Shared::free_batch`]: super::shared::Sp3Shared::free_batch

use super::log;
use super::tid::{lid_of, slot_of};
use crate::engine::kit::log::redo_log::{self, Entry};
use crate::heap::alloc::{Allocator, Block, ThreadCache};
use crate::heap::layout::ENGINE_AREA_OFFSET;
use crate::heap::Heap;
use crate::medium::counters;
use crossbeam_utils::CachePadded;
use std::collections::VecDeque;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed, Release};
use std::sync::{Mutex, MutexGuard};

crate::mutation::point! {
    /// The checkpoint writes home and retires before the predecessors are retired.
    pub(crate) static HOME_BEFORE_PREDECESSORS = "home-before-predecessors";
}

/// Offset of the first `retired` word: the engine area's second page (the first holds
/// the kit's watermark and the root slot).
pub(super) const RETIRED_AREA: usize = ENGINE_AREA_OFFSET + 4096;

/// Offset of slot `slot`'s `retired` word.
pub(super) fn retired_offset(slot: usize) -> usize {
    RETIRED_AREA + 8 * slot
}

/// Bytes of the engine area SP3 needs for `slots` thread slots: the kit's first page,
/// the `retired` words, and recovery's intent record (see `recovery`).
pub(super) fn engine_area_bytes(slots: usize) -> usize {
    4096 + 8 * slots + intent_len(slots)
}

/// Offset of recovery's intent record in a pool with `slots` thread slots.
pub(super) fn intent_offset(slots: usize) -> usize {
    RETIRED_AREA + 8 * slots
}

/// Bytes of the intent record: a header word (magic and checksum) and one target per
/// slot.
pub(super) fn intent_len(slots: usize) -> usize {
    8 * (slots + 1)
}

/// The persistent `retired` word of `slot` (0 if never written). The word carries a
/// check ([`crate::engine::kit::log::checked_word`]): a damaged one is `Err(Corrupt)`.
pub(super) fn load_retired(heap: &Heap, slot: usize) -> crate::Result<u64> {
    use crate::engine::kit::log::checked_word::{classify, legacy, Word};
    // Acquire: recovery and inspection run alone; any ordering would do.
    let word = heap.atomic_u64(retired_offset(slot)).load(Acquire);
    match classify(word, legacy(heap)) {
        Word::Zero => Ok(0),
        Word::Value(v) => Ok(v),
        Word::Damaged => Err(crate::Error::corrupt(format!(
            "the retired word of thread slot {slot} in the engine area is damaged \
             ({word:#018x} fails its check)"
        ))),
    }
}

/// Raise `slot`'s `retired` word to `lid` (encoded) and flush it (the caller fences).
pub(super) fn store_retired(heap: &Heap, slot: usize, lid: u64) {
    crate::engine::kit::log::checked_word::raise(heap.atomic_u64(retired_offset(slot)), lid);
    heap.flush(retired_offset(slot), 8);
}

/// A durable record waiting to be written home.
#[derive(Debug)]
pub(crate) struct Pending {
    /// Logical id.
    pub lid: u64,
    /// Cross-slot predecessors (packed ids).
    pub deps: Vec<u64>,
    /// The record's body as logged (dependency prefix + kit entries).
    pub body: Vec<u8>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    crate::engine::kit::shared_counts::lock(m)
}

/// Queues of durable records, the stable marks, and the checkpoint.
pub(crate) struct Checkpointer {
    queues: Vec<CachePadded<Mutex<VecDeque<Pending>>>>,
    /// Durable `retired` watermark per slot (mirror, raised after the fence).
    retired: Vec<CachePadded<AtomicU64>>,
    /// Per slot: the largest lid L such that every record of the slot up to L is
    /// durable and so is, recursively, every predecessor (the paper's isPersistent,
    /// which is set only after step 5). See [`Checkpointer::stabilize`].
    stable: Vec<CachePadded<AtomicU64>>,
    /// Serializes [`Checkpointer::stabilize`].
    stabilizing: Mutex<()>,
    /// FREE entries in queued records (blocks waiting to become reusable).
    frees_pending: AtomicU64,
    /// The checkpoint lock, with the cache freed blocks are released into.
    work: Mutex<ThreadCache>,
}

impl Checkpointer {
    /// Queues for `slots` slots whose `retired` words are `retired`.
    pub(crate) fn new(retired: &[u64]) -> Checkpointer {
        Checkpointer {
            queues: retired
                .iter()
                .map(|_| CachePadded::new(Mutex::new(VecDeque::new())))
                .collect(),
            retired: retired
                .iter()
                .map(|&r| CachePadded::new(AtomicU64::new(r)))
                .collect(),
            stable: retired
                .iter()
                .map(|&r| CachePadded::new(AtomicU64::new(r)))
                .collect(),
            stabilizing: Mutex::new(()),
            frees_pending: AtomicU64::new(0),
            work: Mutex::new(ThreadCache::default()),
        }
    }

    /// Hand a durable record of `slot` with `frees` FREE entries over (lid order per
    /// slot).
    pub(crate) fn push(&self, slot: usize, p: Pending, frees: usize) {
        if frees > 0 {
            // Relaxed: a hint for when to checkpoint.
            crate::engine::kit::shared_counts::count_write(&self.frees_pending);
            self.frees_pending.fetch_add(frees as u64, Relaxed);
        }
        lock(&self.queues[slot]).push_back(p);
    }

    /// Blocks freed by queued records (a checkpoint would make them reusable).
    pub(crate) fn frees_pending(&self) -> u64 {
        self.frees_pending.load(Relaxed)
    }

    /// Slot `slot`'s durable retired watermark.
    pub(crate) fn retired(&self, slot: usize) -> u64 {
        self.retired[slot].load(Acquire)
    }

    /// True if some durable record waits for the checkpoint.
    pub(crate) fn has_pending(&self) -> bool {
        self.queues.iter().any(|q| !lock(q).is_empty())
    }

    /// True if transaction `tid` (packed) and all its predecessors are durable.
    #[inline]
    pub(crate) fn is_stable(&self, tid: u64) -> bool {
        self.stable[slot_of(tid)].load(Acquire) >= lid_of(tid)
    }

    /// Raise the stable marks as far as the queued (durable) records allow: a record is
    /// stable when it is durable (queued records are), its slot's previous record is
    /// stable, and every cross-slot predecessor is stable. Any thread may run this
    /// (waiters help each other: nobody depends on the owner of a record calling
    /// `wait_durable`). With `wait` false, return at once if another thread runs it.
    ///
    /// Why not the owner's own mark after its fence: a record's durability says nothing
    /// of its predecessors'. If T3 waited only until T2 (its predecessor) was durable,
    /// and T2's predecessor T1 was not, a crash could lose T1, recovery would drop T2
    /// and then T3, whose `run` had returned (test
    /// `run_waits_for_transitive_predecessors`).
    pub(crate) fn stabilize(&self, wait: bool) {
        let _g = if wait {
            lock(&self.stabilizing)
        } else {
            // The attempt and the unlock (one too many when the lock is busy).
            crate::engine::kit::shared_counts::count_write(&self.stabilizing);
            crate::engine::kit::shared_counts::count_write(&self.stabilizing);
            match self.stabilizing.try_lock() {
                Ok(g) => g,
                Err(std::sync::TryLockError::Poisoned(e)) => e.into_inner(),
                Err(std::sync::TryLockError::WouldBlock) => return,
            }
        };
        loop {
            let mut progress = false;
            for (s, q) in self.queues.iter().enumerate() {
                let q = lock(q);
                let old = self.stable[s].load(Acquire);
                let mut st = old.max(self.retired[s].load(Acquire));
                if let Some(front) = q.front() {
                    // Lids of a slot's queue are consecutive.
                    let skip = (st + 1).saturating_sub(front.lid) as usize;
                    for p in q.iter().skip(skip) {
                        if p.lid != st + 1 || !p.deps.iter().all(|&d| self.is_stable(d)) {
                            break;
                        }
                        st = p.lid;
                    }
                }
                if st > old {
                    // Release: a waiter that sees the mark returns to its user; the
                    // fences that made these records durable happened before they
                    // were queued (the queue mutex orders them before our reads).
                    crate::engine::kit::shared_counts::count_write(&self.stable[s]);
                    self.stable[s].fetch_max(st, AcqRel);
                    progress = true;
                }
            }
            if !progress {
                break;
            }
        }
    }

    fn eligible(&self, p: &Pending) -> bool {
        p.deps
            .iter()
            .all(|&d| self.retired[slot_of(d)].load(Acquire) >= lid_of(d))
    }

    /// Run a checkpoint (module docs). With `wait` false, return at once if another
    /// thread runs one. Returns the number of records retired.
    pub(crate) fn run(&self, heap: &Heap, alloc: &Allocator, wait: bool) -> usize {
        let mut cache = if wait {
            lock(&self.work)
        } else {
            // The attempt and the unlock (one too many when the lock is busy).
            crate::engine::kit::shared_counts::count_write(&self.work);
            crate::engine::kit::shared_counts::count_write(&self.work);
            match self.work.try_lock() {
                Ok(g) => g,
                Err(std::sync::TryLockError::Poisoned(e)) => e.into_inner(),
                Err(std::sync::TryLockError::WouldBlock) => return 0,
            }
        };
        let mut total = 0;
        let mut frees: Vec<Block> = Vec::new();
        loop {
            // 1. Eligible prefixes.
            let mut round: Vec<(usize, Vec<Pending>)> = Vec::new();
            for (s, q) in self.queues.iter().enumerate() {
                let mut q = lock(q);
                let mut taken = Vec::new();
                while let Some(p) = q.front() {
                    // (Mutation: write home before the predecessors are retired.)
                    if !self.eligible(p) && !crate::mutation::active!(HOME_BEFORE_PREDECESSORS) {
                        break;
                    }
                    taken.push(q.pop_front().expect("front exists"));
                }
                if !taken.is_empty() {
                    round.push((s, taken));
                }
            }
            if round.is_empty() {
                break;
            }
            // 2. Home.
            for (_, recs) in &round {
                for p in recs {
                    apply(heap, alloc, p, &mut frees);
                }
            }
            heap.fence();
            // 3. Retire.
            for (s, recs) in &round {
                let last = recs.last().expect("non-empty").lid;
                store_retired(heap, *s, last);
            }
            heap.fence();
            for (s, recs) in &round {
                total += recs.len();
                let last = recs.last().expect("non-empty").lid;
                // Retired implies stable (invariant R): keep the marks ordered.
                crate::engine::kit::shared_counts::count_write(&self.stable[*s]);
                self.stable[*s].fetch_max(last, AcqRel);
                crate::engine::kit::shared_counts::count_write(&self.retired[*s]);
                self.retired[*s].store(last, Release);
            }
            // 4. Freed blocks are reusable.
            crate::engine::kit::shared_counts::count_write(&self.frees_pending);
            self.frees_pending.fetch_sub(frees.len() as u64, Relaxed);
            for b in frees.drain(..) {
                alloc.release(&mut cache, b);
            }
            alloc.drain(&mut cache);
        }
        total
    }
}

/// Write one record's effects home (flushed, not fenced).
fn apply(heap: &Heap, alloc: &Allocator, p: &Pending, frees: &mut Vec<Block>) {
    // Our own record, checked when it was built: a failure here is an engine bug.
    let rec = log::split(&p.body).expect("a record this run wrote decodes");
    for e in redo_log::entries(rec.entries) {
        match e.expect("a record this run wrote decodes") {
            Entry::Word { off, value } => {
                heap.write_bytes(off as usize, &value.to_le_bytes());
                heap.flush(off as usize, 8);
                counters::add_bytes_written_home(8);
            }
            Entry::Range { off, data } => {
                heap.write_bytes(off as usize, data);
                heap.flush(off as usize, data.len());
                counters::add_bytes_written_home(data.len() as u64);
            }
            Entry::Alloc(b) => alloc.publish_alloc(b),
            Entry::Free(b) => {
                alloc.publish_free(b);
                frees.push(b);
            }
            // sp3 never logs operations (recovery refuses records that hold one).
            Entry::Op { .. } => {}
        }
    }
}
