//! Transaction attempts: a slot's fixed table of them, addressed by index, and the
//! memory each one owns in the engine's [`CopyArena`].
//!
//! An attempt is what one transaction attempt leaves behind: its commit record, its
//! copies, and the plan of its write-back ([`super::plan`]). A slot's attempts are
//! the cells of its [`AttemptTable`], made with the slot and never moved or freed, and
//! every holder of an attempt names it by its [`AttemptId`]: the slot's thread (its
//! running and its idle attempt), the slot's batch (committed, retired and spare
//! attempts, [`super::batch`]). Nothing names an attempt by its address, and an
//! attempt's fields are offsets and counts: a table another process maps, at another
//! address, describes the same attempts.
//!
//! # Invariants
//! * Every attempt of a slot is held by exactly one holder at a time: the slot's thread
//!   (running or idle), or one of its batch's entries, retired list or spare stack. A
//!   holder hands an attempt over under the slot's batch lock (the thread takes a spare
//!   and pushes its committed or aborted attempt there), so the fields an attempt's
//!   previous holder wrote are visible to the next (the lock orders them); each field
//!   is written only by the attempt's holder.
//! * The record and the copies are in runs of chunks the attempt owns: the first chunk
//!   holds the record and is kept for the attempt's life; the others are given back
//!   when the attempt is recycled. The first chunk is taken with the first copy: an
//!   attempt that writes nothing takes no arena memory, and its record offset is 0,
//!   which no copy's writer equals.
//! * The runs are listed in the arena itself: each starts with a [`RunLink`] naming the
//!   next run the attempt took, so an attempt is a handful of offsets and counts, with
//!   nothing in process memory that another process mapping the arena would need to
//!   find its memory.

use super::arena::{CopyArena, CHUNK_BYTES};
#[cfg(doc)]
use super::plan::Plan;
use super::plan::{plan_bytes, PlanWriter};
use super::protocol::TxRecord;
use crate::region::{InRegion, Placed, Region};
use crate::Result;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

/// Bytes of an attempt's first chunk, after its run link, that hold its commit record:
/// the link and the record share the chunk's first cache line, and the copies start on
/// the next.
const RECORD_BYTES: usize = 64 - RUN_LINK;
const _: () = assert!(std::mem::size_of::<TxRecord>() <= RECORD_BYTES);
const _: () = assert!(std::mem::align_of::<TxRecord>() <= 8);

/// An attempt of a slot's [`AttemptTable`], by its index there.
#[repr(transparent)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub(crate) struct AttemptId(u32);

// SAFETY: an index; `repr(transparent)`.
unsafe impl InRegion for AttemptId {}

impl AttemptId {
    /// Not an attempt of the table: what a thread runs with when the table has no
    /// attempt to give it and the thread may not wait for one (a nested transaction).
    /// Such a transaction reads and commits read-only; its first write aborts it
    /// (`PiscesThread::lock`), and a later `begin` asks the table again.
    pub(crate) const NO_ROOM: AttemptId = AttemptId(u32::MAX);

    /// The attempt's index in its table.
    #[inline(always)]
    pub(crate) fn index(self) -> usize {
        self.0 as usize
    }

    /// The attempt of index `i` (a value [`AttemptId::index`] gave).
    pub(crate) fn from_index(i: u32) -> AttemptId {
        AttemptId(i)
    }

    /// Whether this names an attempt of the table (not [`AttemptId::NO_ROOM`]).
    #[inline(always)]
    pub(crate) fn is_real(self) -> bool {
        self != Self::NO_ROOM
    }
}

/// One transaction attempt (see the module docs): offsets into the arena and counts,
/// each written only by the attempt's holder. Relaxed: the batch lock orders a
/// hand-over, and no other thread reads the fields of an attempt it does not hold.
/// One cache line per attempt: the slot's thread writes its running attempt's fields at
/// every copy, while a helper holding the batch lock recycles other attempts.
#[repr(C, align(64))]
pub(crate) struct Attempt {
    /// The owning slot (immutable).
    slot: u64,
    /// Arena offset of the commit record (0: none yet).
    record: AtomicU64,
    /// Arena offset of the write-back plan (0: none; written at commit).
    plan: AtomicU64,
    /// The first run (the record's chunk) and the last run taken (0: none yet).
    first: AtomicU64,
    last: AtomicU64,
    /// The single chunk small copies are placed in, and the bytes of it in use.
    small: AtomicU64,
    used: AtomicU64,
}

// SAFETY: atomics and an integer, all offsets or counts (zero: an attempt with nothing
// yet), no drop, `repr(C)`.
unsafe impl InRegion for Attempt {}

/// The start of every run of chunks an attempt owns.
#[repr(C)]
struct RunLink {
    /// The next run the attempt took (0: none).
    next: u64,
    /// Chunks in this run.
    chunks: u64,
}

/// Bytes of [`RunLink`]: a run's copies (or record) start after it (8-aligned).
const RUN_LINK: usize = std::mem::size_of::<RunLink>();

impl Attempt {
    /// The arena offset of the commit record: 0 until the first copy.
    #[inline]
    pub(crate) fn record(&self) -> u64 {
        self.record.load(Relaxed)
    }

    /// Forget all copies and reset the record.
    ///
    /// Made again, or after a holder that died in it, it gives nothing back twice:
    /// the runs after the first are unlinked from it before any is given back (those
    /// a dead holder had not given back are lost until the pool's next recovery).
    ///
    /// # Safety
    /// The caller holds the attempt (the front of its batch's retired ring, under the
    /// batch's lock) after the grace period of its retirement: no header word names
    /// its copies or record, no reader still reads them, and no [`Plan`] of it lives.
    /// `holder` is the caller's slot (it names the caller to the arena's lock).
    pub(crate) unsafe fn recycle(&self, arena: &CopyArena, holder: u32) {
        let first = self.first.load(Relaxed);
        if first == 0 {
            return;
        }
        // SAFETY: our own record, initialised when the first chunk was taken.
        unsafe { record_at(arena, self.record()) }.reset();
        self.plan.store(0, Relaxed);
        // SAFETY: `first` is a run of ours, starting with its link.
        let head = unsafe { &mut *(arena.ptr(first) as *mut RunLink) };
        let mut run = std::mem::replace(&mut head.next, 0);
        // The runs unlinked before the first is given back (doc above).
        std::sync::atomic::compiler_fence(std::sync::atomic::Ordering::Release);
        while run != 0 {
            // SAFETY: every run in the list is ours and starts with its link; it is read
            // before the run is given back.
            let RunLink { next, chunks } = unsafe { (arena.ptr(run) as *const RunLink).read() };
            arena.give_back(holder, run, chunks as usize);
            run = next;
        }
        self.last.store(first, Relaxed);
        self.small.store(first, Relaxed);
        self.used.store((RUN_LINK + RECORD_BYTES) as u64, Relaxed);
    }

    /// Take a run of `n` chunks and list it after the attempt's last run.
    fn take_run(&self, arena: &CopyArena, n: usize) -> Result<u64> {
        // The attempt's slot's thread is the only one that places copies in it.
        let off = arena.take(self.slot as u32, n)?;
        // SAFETY: a fresh run of ours, 8-aligned, with room for its link.
        unsafe {
            (arena.ptr(off) as *mut RunLink).write(RunLink {
                next: 0,
                chunks: n as u64,
            })
        };
        let last = self.last.load(Relaxed);
        if last != 0 {
            // SAFETY: our last run, which starts with its link.
            unsafe { (*(arena.ptr(last) as *mut RunLink)).next = off };
        }
        self.last.store(off, Relaxed);
        Ok(off)
    }

    /// Room for a copy of `bytes` bytes (its header and payload, a multiple of 8);
    /// returns the arena offset of its start. Takes the attempt's first chunk, and
    /// starts its commit record there, if it has none yet.
    #[inline]
    pub(crate) fn place_copy(&self, arena: &CopyArena, bytes: usize) -> Result<u64> {
        if self.first.load(Relaxed) == 0 {
            self.start(arena)?;
        }
        self.place(arena, bytes)
    }

    /// The first copy: take the first chunk and start the commit record there.
    #[cold]
    #[inline(never)]
    fn start(&self, arena: &CopyArena) -> Result<()> {
        let off = self.take_run(arena, 1)?;
        let record = off + RUN_LINK as u64;
        // SAFETY: a fresh chunk of ours, 8-aligned, with room for the record after the
        // link (`RECORD_BYTES`, checked against the type above).
        unsafe { (arena.ptr(record) as *mut TxRecord).write(TxRecord::new(self.slot as usize)) };
        self.first.store(off, Relaxed);
        self.record.store(record, Relaxed);
        self.small.store(off, Relaxed);
        self.used.store((RUN_LINK + RECORD_BYTES) as u64, Relaxed);
        Ok(())
    }

    /// Room for `bytes` bytes (a multiple of 8) in the attempt's chunks: after what the
    /// current small chunk holds, in a new chunk when it is full, in a run of their own
    /// beyond a chunk.
    #[inline]
    fn place(&self, arena: &CopyArena, bytes: usize) -> Result<u64> {
        let used = self.used.load(Relaxed) as usize;
        if used + bytes <= CHUNK_BYTES {
            self.used.store((used + bytes) as u64, Relaxed);
            return Ok(self.small.load(Relaxed) + used as u64);
        }
        self.place_in_new_run(arena, bytes)
    }

    /// [`Attempt::place`] where the small chunk has no room.
    #[cold]
    #[inline(never)]
    fn place_in_new_run(&self, arena: &CopyArena, bytes: usize) -> Result<u64> {
        let need = RUN_LINK + bytes;
        if need > CHUNK_BYTES {
            // Large objects get a run of their own.
            let off = self.take_run(arena, need.div_ceil(CHUNK_BYTES))?;
            return Ok(off + RUN_LINK as u64);
        }
        // The chunk left behind ends with a zero word after its last item, where a
        // walk of the attempt stops ([`Attempt::placed`]); a full chunk ends at its end.
        let (left, used) = (self.small.load(Relaxed), self.used.load(Relaxed) as usize);
        if used + 8 <= CHUNK_BYTES {
            // SAFETY: in our own chunk `left`, past what is placed in it (8-aligned).
            unsafe { (arena.ptr(left + used as u64) as *mut u64).write(0) };
        }
        let off = self.take_run(arena, 1)?;
        self.small.store(off, Relaxed);
        self.used.store(need as u64, Relaxed);
        Ok(off + RUN_LINK as u64)
    }

    /// Walk the items placed in the attempt before its plan, in the order placed (its
    /// copies): `each` gets each one's arena offset. `size(off)` tells the bytes of the
    /// item at `off` (a multiple of 8), or None where no item of the attempt starts:
    /// the zero word a chunk left behind ends with (`place_in_new_run`), or what an
    /// earlier attempt left in the chunk. For a thread that rolls back an attempt whose
    /// owner died (`super::peer_recovery`): its copies are all the attempt knows of its
    /// writes.
    ///
    /// # Safety
    /// The caller holds the attempt: no thread places items in it or recycles it
    /// meanwhile.
    pub(crate) unsafe fn placed(
        &self,
        arena: &CopyArena,
        mut size: impl FnMut(u64) -> Option<usize>,
        mut each: impl FnMut(u64),
    ) {
        let first = self.first.load(Relaxed);
        let plan = self.plan.load(Relaxed);
        let (small, used) = (self.small.load(Relaxed), self.used.load(Relaxed));
        let mut run = first;
        // (A link its owner died writing may name anything: the walk stays inside the
        // arena, and ends.)
        let mut runs_left = arena.region_chunks();
        while run != 0 && run.is_multiple_of(CHUNK_BYTES as u64) && runs_left > 0 {
            runs_left -= 1;
            if !arena.holds(run, CHUNK_BYTES as u64) {
                return;
            }
            // SAFETY: a run of ours (the caller's contract), starting with its link,
            // inside the arena's mapping (checked).
            let RunLink { next, chunks } = unsafe { (arena.ptr(run) as *const RunLink).read() };
            if chunks == 0 || !arena.holds(run, chunks.saturating_mul(CHUNK_BYTES as u64)) {
                return;
            }
            let mut at = run + RUN_LINK as u64;
            if run == first {
                at += RECORD_BYTES as u64;
            }
            if chunks > 1 {
                // A large item has a run of its own.
                if at == plan {
                    return;
                }
                each(at);
            } else {
                let end = if run == small {
                    run + used.min(CHUNK_BYTES as u64)
                } else {
                    run + CHUNK_BYTES as u64
                };
                while at < end {
                    // The plan is the last item an attempt places.
                    if at == plan {
                        return;
                    }
                    match size(at) {
                        Some(n) if n > 0 && n % 8 == 0 && at + n as u64 <= end => {
                            each(at);
                            at += n as u64;
                        }
                        _ => break,
                    }
                }
            }
            run = next;
        }
    }

    /// Space for the write-back plan of `objects` objects and at most `ranges` ranges,
    /// and a writer over it. Only once the attempt has its record (it wrote), and once
    /// per attempt until it is recycled; [`Attempt::end_plan`] ends it.
    pub(crate) fn start_plan(
        &self,
        arena: &CopyArena,
        objects: usize,
        ranges: usize,
    ) -> Result<PlanWriter> {
        debug_assert!(self.record() != 0 && self.plan.load(Relaxed) == 0);
        let off = self.place(arena, plan_bytes(objects, ranges))?;
        self.plan.store(off, Relaxed);
        // SAFETY: just placed for the plan, in the attempt's own chunks, 8-aligned
        // (every size placed is a multiple of 8), written by no one else.
        Ok(unsafe { PlanWriter::new(arena.ptr(off), objects, ranges) })
    }

    /// The plan `w` is complete. (What it did not use of its space stays unused: the
    /// plan is the last thing an attempt places before its commit.)
    pub(crate) fn end_plan(&self, w: PlanWriter) {
        debug_assert!(self.plan.load(Relaxed) != 0);
        w.finish();
    }

    /// The arena offset of the write-back plan (0 until [`Attempt::start_plan`]).
    #[inline]
    pub(crate) fn plan_offset(&self) -> u64 {
        self.plan.load(Relaxed)
    }
}

/// The commit record at arena offset `off`.
///
/// # Safety
/// `off` is the record offset of an attempt of this arena (from [`Attempt::record`], or
/// the writer field of a copy that is alive or within its grace period).
#[inline(always)]
pub(crate) unsafe fn record_at(arena: &CopyArena, off: u64) -> &TxRecord {
    // SAFETY: the caller's contract: a record lives there, and the arena memory lives
    // as long as the arena.
    unsafe { &*(arena.ptr(off) as *const TxRecord) }
}

/// A slot's attempts (see the module docs), made with the slot: as many as its batch
/// can hold at once ([`super::batch::attempts_per_slot`]).
pub(crate) struct AttemptTable {
    cells: Placed<Attempt>,
}

impl AttemptTable {
    /// `n` fresh attempts of slot `slot` (`n` below [`AttemptId::NO_ROOM`]), placed in
    /// `region`.
    pub(crate) fn place(region: &Arc<Region>, slot: usize, n: usize) -> Result<AttemptTable> {
        assert!(n < AttemptId::NO_ROOM.0 as usize, "{n} attempts per slot");
        Ok(AttemptTable {
            cells: region.place(n, |_, a: &mut Attempt| a.slot = slot as u64)?,
        })
    }

    /// How many attempts the table holds.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.cells.len()
    }

    /// Every attempt's id, the first last (what a fresh spare stack holds, so that the
    /// first attempt taken is the table's first).
    pub(crate) fn ids(&self) -> impl ExactSizeIterator<Item = AttemptId> {
        (0..self.cells.len() as u32).rev().map(AttemptId)
    }

    /// The attempt `id` (a real one: never [`AttemptId::NO_ROOM`]).
    #[inline(always)]
    pub(crate) fn get(&self, id: AttemptId) -> &Attempt {
        &self.cells[id.0 as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::kit::cc::clock::Clock;
    use crate::engine::pisces::protocol::END_INFINITE;

    /// An attempt takes its first chunk with its first copy and starts its record there,
    /// keeps that chunk through recycling (copies again after the record), and gives
    /// every other run back, for other attempts' copies and records.
    #[test]
    fn an_attempt_keeps_its_record_chunk_and_gives_back_the_rest() {
        let region = Region::anonymous(1 << 30, 0).unwrap();
        let table = AttemptTable::place(&region, 3, 2).unwrap();
        let a = CopyArena::new(&region).unwrap();
        let ids: Vec<AttemptId> = table.ids().collect();
        assert_eq!(ids, [AttemptId(1), AttemptId(0)]);
        let t = table.get(AttemptId(0));
        assert_eq!(t.record(), 0, "no record before the first copy");
        let first = t.place_copy(&a, 64).unwrap();
        let rec = t.record();
        assert!(rec != 0 && first > rec && first < rec + CHUNK_BYTES as u64);
        // SAFETY: `rec` is this attempt's record.
        let record = unsafe { record_at(&a, rec) };
        assert_eq!(record.slot, 3);
        assert_eq!(record.end_ts(), END_INFINITE);
        // Too large for what is left of the first chunk: a second chunk.
        let second = t.place_copy(&a, CHUNK_BYTES - 64).unwrap();
        // After the new chunk's link to the next run.
        assert_eq!(second % CHUNK_BYTES as u64, RUN_LINK as u64);
        assert_ne!(second, rec);
        let large = t.place_copy(&a, 3 * CHUNK_BYTES).unwrap();
        assert!(record.commit(&Clock::new(7)) != END_INFINITE);

        // SAFETY: nothing names `t`'s copies or record (none was linked).
        unsafe { t.recycle(&a, 3) };
        assert_eq!(t.record(), rec);
        assert_eq!(record.end_ts(), END_INFINITE, "recycling resets the record");
        assert_eq!(t.place_copy(&a, 64).unwrap(), first);
        // Another attempt's record and copies go in runs given back, never in `t`'s
        // first chunk.
        let u = table.get(AttemptId(1));
        u.place_copy(&a, 64).unwrap();
        assert_eq!(u.record(), second);
        let next = u.place_copy(&a, CHUNK_BYTES - 64).unwrap();
        assert!(
            next.abs_diff(rec) >= CHUNK_BYTES as u64,
            "{next:#x} in {rec:#x}'s chunk"
        );
        assert_eq!(u.place_copy(&a, 3 * CHUNK_BYTES).unwrap(), large);
    }

    /// A walk of an attempt finds every item placed in it, in order, across its small
    /// chunks and its large runs, and no more: not what an earlier life of its chunks
    /// left after the items (stale items that look like its own), nor its plan.
    #[test]
    fn a_walk_finds_the_items_placed_and_nothing_else() {
        let region = Region::anonymous(1 << 30, 0).unwrap();
        let table = AttemptTable::place(&region, 0, 1).unwrap();
        let a = CopyArena::new(&region).unwrap();
        let t = table.get(AttemptId(0));
        // Items: a first word naming the attempt's record, then their size.
        let put = |t: &Attempt, bytes: usize| {
            let at = t.place_copy(&a, bytes).unwrap();
            // SAFETY: the item's own room, at least 16 bytes, 8-aligned.
            unsafe {
                (a.ptr(at) as *mut u64).write(t.record());
                (a.ptr(at + 8) as *mut u64).write(bytes as u64);
            }
            at
        };
        let walk = |t: &Attempt| {
            let mut found = Vec::new();
            let rec = t.record();
            // SAFETY: in the attempt's chunks, as `placed` promises.
            let size = |at: u64| unsafe {
                ((a.ptr(at) as *const u64).read() == rec)
                    .then(|| (a.ptr(at + 8) as *const u64).read() as usize)
            };
            // SAFETY: the test holds the attempt.
            unsafe { t.placed(&a, size, |at| found.push(at)) };
            found
        };
        // A first life fills more than two chunks; recycled, the second life's items
        // stop short of where the first one's went on, in the same chunks.
        let many: Vec<u64> = (0..40).map(|_| put(t, 4096)).collect();
        assert_eq!(walk(t), many);
        // SAFETY: nothing names the attempt's items.
        unsafe { t.recycle(&a, 0) };
        // (Where the first life's third item starts, the second life's chunk ends.)
        let mut placed = vec![put(t, 4096), put(t, 4096)];
        // Too large for what is left of the first chunk: the rest of it is skipped.
        placed.push(put(t, CHUNK_BYTES - 64));
        placed.push(put(t, 3 * CHUNK_BYTES));
        placed.push(put(t, 256));
        assert_eq!(walk(t), placed);
        // The plan ends the walk, even where its bytes would read as an item.
        // (Not ended: its bytes are not a plan's.)
        let _plan = t.start_plan(&a, 1, 1).unwrap();
        let at = t.plan_offset();
        // SAFETY: the plan's room (more than 16 bytes), 8-aligned.
        unsafe {
            (a.ptr(at) as *mut u64).write(t.record());
            (a.ptr(at + 8) as *mut u64).write(64);
        }
        assert_eq!(walk(t), placed);
    }
}
