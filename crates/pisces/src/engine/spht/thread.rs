//! One thread's `spht` transactions: a TL2-style software TM on the working snapshot
//! (standing in for HTM), then SPHT's durability protocol.
//!
//! # Transaction (serializable)
//! * **Begin**: read version `rv` = a clock reading. Nothing is published (see
//!   *Decisions*).
//! * **Read**: the private copy if the transaction wrote the object; else the object's
//!   stripe must be unlocked with a version below `rv` (else `Conflict`), the (stripe,
//!   version) pair joins the read set, and the read hands out a copy of the bytes asked
//!   for: the thread's kept copy of the object if it was taken at that same version
//!   ([`CopyCache`]: no commit changed the object since), else a new copy out of the
//!   working snapshot taken as a seqlock read (the stripe unchanged after the copy,
//!   else `Conflict`). Copies are never written while the transaction runs
//!   ([`ReadCopies`], [`CopyCache`]), so the bytes behind the returned pointer never
//!   change — committers write the snapshot in place, which is why a read copies at
//!   all (an HTM read is a plain load: a concurrent write aborts the reader). A
//!   transaction that wrote nothing first looks for the kept copy of the object whose
//!   header word would precede `off`, without locating it: the cache keeps only copies
//!   of objects a read located at their own payload offset, and every commit that
//!   allocates, frees or writes an object moves its stripe to a new version, so a kept
//!   copy at the stripe's current version is of an object still allocated there,
//!   unchanged. Else an allocated small object is located with the kit's read fast
//!   path ([`FastReads`]: geometry and allocation bit); every other offset, and every
//!   read of a transaction that wrote, goes through `locate_object` and the write set.
//!   The kept copy and a new copy into a cache set whose buffer already holds the object
//!   are `read_fast`, inlined into the engine's read function; the rest, and whatever
//!   it declines, is `read_full`, out of line.
//! * **Write**: a private copy of the whole payload out of the working snapshot,
//!   remembered with the stripe version it was copied at (an earlier read's version is
//!   in the read set). **Alloc**: a reserved block with a zeroed
//!   copy. **Free**: recorded with the stripe version; applied at commit.
//! * A `read` / `write` / `free` of an offset that is no longer an object (a stale
//!   pointer of a transaction that is already doomed) answers `Conflict` when the read
//!   set no longer validates, so `run` retries instead of failing.
//!
//! # Snapshots
//! A read-only transaction of the API (`begin_snapshot`: nothing is written,
//! allocated or freed after it begins) keeps no read set, as TL2's read-only
//! transactions: each read already checked its stripe against `rv` and, for a new
//! copy, that the stripe did not move during the copy, so every value it read is the
//! value as of `rv` (a commit with a timestamp below `rv` held its stripes locked
//! before `rv` was read, so a read sees it locked or written back), and its commit has
//! nothing to validate. The read set's other use, telling a stale pointer from a bad
//! one, asks the stripe of the offset's header word instead: an offset that was an
//! object as of `rv` and is no longer one was freed by a commit at or after `rv`, which
//! moved that stripe to a version at or above the bound. The largest version read is
//! still kept (the durability token).
//!
//! # Commit of an update transaction
//! 1. Bound the record's size and wait for that much log space (the replayer frees
//!    it; a full log runs a replay batch itself when the replayer is busy elsewhere).
//! 2. Publish the lower bound `L` = a clock reading in `vts` (not persistent), SeqCst,
//!    then take a reading `c` after the publication.
//! 3. Lock the write set's stripes by CAS (a taken stripe, or a stripe changed since
//!    the object was copied, aborts: no waiting while holding locks).
//! 4. Commit timestamp `ts` = a clock reading taken now, strictly above `c`, every old
//!    version of the locked stripes and this slot's previous timestamp (the physical
//!    clock read while the locks are held: timestamp order is a serialization order).
//! 5. Validate the read set (each stripe unchanged, or locked by us at the version read).
//! 6. Publish `vts = ts | isUpd`; write the private copies into the snapshot while
//!    building the redo record (changed words only for existing objects — `WORD`
//!    entries, or one `RANGE` when most words changed; the whole payload for a new
//!    block, whose durable bytes may differ from the snapshot's; `ALLOC` / `FREE`);
//!    release the stripes with version `ts`. **Visible.**
//! 7. Append the record (its forward link slot holding `ts`), flush, fence. With
//!    point records (option `points`), first check that step 8 would not wait: then
//!    the record is a point record, and steps 8, 10 and 12 are skipped; or that it
//!    would wait only for visible transactions: then the record is a conditional
//!    point naming them, and steps 10 and 12 are skipped (*Point records*).
//! 8. **Wait** for every slot whose `vts` is below `ts` and not persistent
//!    (`WAITPRECEDINGTXS`); note an update transaction with a larger timestamp
//!    (**skipCAS**).
//! 9. **Link**: the predecessor is the slot-`last` entry with the largest timestamp
//!    (all are below `ts`, see *Invariants*); store our link in its forward slot and
//!    its link in our backward slot (or, first of the run, in `genesis`). Publish our
//!    own `last`. Where a fence is a device sync, a forward link into another slot's
//!    log is not flushed: our next sync would otherwise cover that slot's log page and
//!    wait for that slot's own sync of it, so two threads' syncs would run one after
//!    the other. The link reaches the medium with its page.
//! 10. `marker=nvhtm`: store `ts` in this slot's persistent marker, persist it.
//! 11. Set isPers: `vts = ts | isUpd | isPers`.
//! 12. `marker=global`: unless skipCAS, CAS the global marker up to `ts`; the winner
//!     flushes it and raises the volatile durable point. `commit` returns the token
//!     `ts`; `wait_durable` waits until the durable point reaches it.
//!
//! # Point records
//! On the file medium a fence is a device sync, and steps 7 and 10/12 are two of them
//! per commit. A commit that finds, before appending its record, every other slot
//! persistent or above `ts` (the test of step 8, made ahead) appends a *point record*
//! (`log`): once the record is durable, every update transaction with a smaller
//! timestamp is durable too — each was persistent (isPers, set after its own record's
//! fence; our Acquire load sees it) when we checked, and none gets a smaller timestamp
//! later (*Invariants*). So the record's own fence is the commit's durability point:
//! the commit links itself (step 9), raises the volatile durable point and sets
//! isPers, with no marker write. Recovery counts the newest valid point record in the
//! durable point as it counts the markers (`recovery`); the replayer raises the global
//! marker over what it replays before its `replayed` word passes them, since the log
//! releases the point records it applied. A commit that finds an older transaction
//! not yet persistent takes the steps above unchanged, unless every such transaction
//! is visible: see below. On one thread every commit is a point: one device sync per
//! commit.
//!
//! **Conditional points.** When the older transactions the check finds not persistent
//! are all past step 6 (their `vts` holds a final timestamp with isUpd: validated, so
//! nothing aborts them, and their log space was reserved at step 1, so their records
//! will be appended), and there are at most `log::MAX_DEPS` of them, the commit
//! appends its record as a *conditional point* naming their timestamps, fences (its
//! one device sync), waits for them at step 8, links, raises the volatile durable
//! point and sets isPers, with no marker write. Recovery counts a conditional point
//! in the durable point only if every timestamp it names is a valid record of the
//! logs or already replayed (`recovery`). Sound for the point record's reason: every
//! transaction with a smaller timestamp was, at the check, persistent (its record
//! durable before ours) or named, and none gets a smaller timestamp afterwards; so a
//! named record's own dependencies were persistent or named by us too, and the check
//! needs no recursion. Waiting for them before isPers keeps the invariant that isPers
//! implies every smaller timestamp durable, which the next commit's check relies on.
//! A transaction that has only its lower bound published may still end with a final
//! timestamp below ours that the check cannot name, or abort: a commit that meets one
//! takes the marker path. The check costs one load per slot; the option
//! is on by default only where a fence is a device sync, and the paper's marker
//! protocol stays the default elsewhere.
//!
//! A read-only transaction publishes nothing and writes nothing; its token is the
//! largest version it read, so `wait_durable` makes it wait until everything it saw is
//! durable (immediate durability for readers, which the paper's HTM readers do not
//! need since HTM hides non-committed state — here committed-but-not-durable state is
//! visible).
//!
//! # Fallback (a bound on attempts)
//! A transaction that aborted [`THRESHOLD`](crate::engine::kit::cc::fallback::THRESHOLD)
//! times in a row on conflicts (a long reader whose reads writers keep replacing, a
//! long update transaction that reads a lot) takes the pool's fallback word before its
//! next attempt ([`crate::engine::kit::cc::fallback`]; HTM systems such as SPHT's paper
//! fall back to a single global lock after N aborts):
//! * it stores the word, fences (SeqCst) and waits until no other slot's `vts` is
//!   non-persistent, i.e. until every commit in steps 2-11 has finished (bounded: those
//!   steps wait only for each other, in timestamp order), then reads `rv`;
//! * step 2 of every other commit loads the word after its SeqCst fence and, while the
//!   holder's deadline runs, aborts before locking anything and waits in `after_abort`.
//!
//! Race closed (store buffering): the holder stores the word then fences then loads
//! `vts`; a committer stores `vts` then fences then loads the word. Either the
//! committer sees the word (and aborts), or the holder sees its non-persistent `vts`
//! (and waits for it to finish: its write-back and unlock happen before its isPers
//! store, which the holder's Acquire load reads). So after the drain, until the
//! deadline, no commit changes what the holder reads, and its attempt commits: readers
//! (and update transactions) commit within a bounded number of attempts. Everything
//! else is unchanged (the holder validates as always), so serializability and the
//! durability protocol are untouched. Fast-path cost: one load after step 2's fence.
//!
//! # Invariants
//! * A transaction that has not read its commit clock yet gets a larger timestamp than
//!   one that scans now (the clock is monotonic and the scan follows the reading).
//!   So when step 8 ends, every update transaction with a smaller timestamp has set
//!   isPers, and (because it waits for us, unpersisted, from step 2 on) no transaction
//!   with a larger timestamp has — hence at step 9 every slot's `last` is below `ts`,
//!   and the largest of them is our immediate predecessor.
//! * The durable point only ever holds the timestamp of an update transaction that
//!   waited for all smaller ones: every transaction up to it has its record flushed
//!   (durability, §3.1's C2) and its links written (replayer).
//! * A skipCAS delegate (larger timestamp, isUpd) is past its validation and cannot
//!   abort, and it never waits for `wait_durable`: it CASes (or delegates upward) inside
//!   its own `commit`, so the delegation chain always ends.
//! * No wait happens while holding stripes; waits in step 8 are for transactions in
//!   steps 2-11, which wait only for smaller timestamps: no cycle.
//!
//! # Decisions
//! * Begin does not publish a lower bound (Alg. 1 line 8); step 2 does, just before the
//!   commit clock is read. The paper needs it at begin because HTM reads the clock
//!   inside the hardware transaction; here the window between reading `ts` and
//!   publishing it is covered by `L`, and committers never wait for transactions that
//!   are still executing user code (a long reader would stall every commit).
//! * isPers is set after linking (step 11), not right after the log flush as in Alg. 1:
//!   the predecessor search then needs only the `last` entries, not Alg. 2's
//!   `precTXs` estimate. The sequential part this adds is volatile (two link stores and
//!   a seqlock write per transaction, no fence).

use super::clock::PhysClock;
use super::durability::{slot_marker_offset, MARKER_OFFSET, PERS, TS_MASK, UPD};
use super::log::{self, LogWriter, Standing, BACK, FWD, HEADER_LEN, MAX_DEPS, MAX_DEPS_BYTES};
use super::options::SphtMarker;
use super::read_copies::{CopyCache, ReadCopies, Set};
use super::replayer;
use super::shared::SphtShared;
use super::stripes::{Stripe, Stripes, LOCKED};
use crate::engine::kit::cc::fallback::Retries;
use crate::engine::kit::fast_reads::FastReads;
use crate::engine::kit::log::redo_log::RecordBuilder;
use crate::engine::kit::rollback::Rollback;
use crate::engine::kit::validate::{locate_block_to_free, locate_object, root_object, running};
use crate::engine::kit::write_set::WriteKind as Kind;
use crate::engine::{DurableToken, EngineThread, FastPath};
use crate::fasthash::FastMap;
use crate::heap::alloc::{class_for, Block, ThreadCache, HEADER};
use crate::sync::{fence, spin_step};
use crate::{Error, Result};
use std::cell::UnsafeCell;
use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed, Release, SeqCst};
use std::sync::Arc;

crate::mutation::point! {
    /// A committer does not wait for transactions with smaller timestamps to persist
    /// before it advances the durability marker (§3.1's wait).
    pub(crate) static WAIT = "wait";
    /// skipCAS delegates the marker to any slot with a larger published timestamp, not
    /// only to an update transaction (a committer still validating may abort and never
    /// advance the marker).
    pub(crate) static SKIP_CAS = "skip-cas";
    /// A committer does not link itself into its predecessor's forward slot.
    pub(crate) static FORWARD_LINK = "forward-link";
    /// A commit writes its record as a point record without checking that every
    /// smaller timestamp is persistent.
    pub(crate) static POINT_CHECK = "point-check";
}

crate::mutation::hook_point! {
    /// A commit after its write-back (visible), before its record is appended: tests
    /// pause a slot here to act while its transaction is visible and its log record
    /// not written.
    pub(crate) static BEFORE_LOG = "before-log";
    /// A commit after its record's fence, before it waits for older transactions and
    /// sets isPers: tests pause a slot here to act while its record is durable and
    /// its transaction not yet persistent.
    pub(crate) static AFTER_LOG = "after-log";
}

/// The timestamps a conditional point names (`Standing::Conditional`).
#[derive(Default)]
struct Deps {
    n: usize,
    ts: [u64; MAX_DEPS],
}

/// What a slot keeps between thread states (a slot may be leased again).
#[derive(Debug)]
pub(crate) struct SlotLocal {
    /// The slot's log writer.
    pub log: LogWriter,
    /// Raw clock value of the slot's last commit.
    pub last_raw: u64,
    /// Timestamp of the slot's last update commit.
    pub last_ts: u64,
}

/// What [`SphtThread::read_kept`] found.
enum Kept {
    /// The kept copy, handed out (joined the read set).
    Hit(*const u8),
    /// No kept copy at this version: the stripe and the version to copy at, and the
    /// object's cache set.
    Miss(Stripe, u64, Set),
    /// The stripe is locked or written at or after `rv`.
    Unreadable,
}

/// One object of the write set.
struct WEntry {
    off: u64,
    hdr: u64,
    /// Payload words (empty: freed without a copy).
    copy: Box<[u64]>,
    kind: Kind,
    /// Stripe version the copy (or free) was based on; `None` for a fresh block.
    seen: Option<u64>,
}

/// Read-side state (mutated by `read`, which takes `&self`).
#[derive(Default)]
struct ReadState {
    /// (stripe, version) of every snapshot copy taken: the read set.
    reads: Vec<(Stripe, u64)>,
    /// Largest version read.
    max_read: u64,
    /// The copies reads hand out that the cache does not keep.
    copies: ReadCopies,
    /// Copies kept across transactions, handed out again while their stripe's version
    /// is unchanged.
    cache: CopyCache,
}

/// A thread's `spht` state.
pub(crate) struct SphtThread {
    sh: Arc<SphtShared>,
    slot: usize,
    local: Option<SlotLocal>,
    cache: ThreadCache,
    record: RecordBuilder,
    active: bool,
    /// The running attempt is a snapshot (`begin_snapshot`): it will not write, so its
    /// reads keep no read set (module docs, *Snapshots*).
    snapshot: bool,
    /// `clock.stripe_bound(rv)` of the attempt's read version `rv` (a clock reading
    /// at begin): a read refuses a stripe word at or above it.
    stripe_bound: u64,
    /// Only through [`SphtThread::rs_mut`] and [`SphtThread::rs`].
    rs: UnsafeCell<ReadState>,
    writes: Vec<WEntry>,
    by_off: FastMap<u64, usize>,
    /// Stripes locked by the committing transaction, with their old versions.
    locks: Vec<(Stripe, u64)>,
    /// Conflict aborts in a row and the fallback word (module docs, *Fallback*).
    retries: Retries,
    /// Transactions run nested in another pool's (`EngineThread::set_nested`).
    nested: bool,
    /// Locates allocated small objects for `read` (only the geometry and the
    /// allocation bit: the payload it points at is the durable heap's, never read).
    located: FastReads,
}

fn words_as_bytes(w: &[u64]) -> &[u8] {
    bytemuck::cast_slice(w)
}

impl SphtThread {
    /// State for `slot` (unique among live thread states).
    pub(crate) fn new(sh: Arc<SphtShared>, slot: usize) -> Result<SphtThread> {
        let local = sh.locals[slot]
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
            .ok_or_else(|| Error::invalid_config(format!("thread slot {slot} is in use")))?;
        Ok(SphtThread {
            slot,
            local: Some(local),
            cache: ThreadCache::default(),
            record: RecordBuilder::default(),
            active: false,
            snapshot: false,
            stripe_bound: 0,
            rs: UnsafeCell::new(ReadState::default()),
            writes: Vec::new(),
            by_off: FastMap::default(),
            locks: Vec::new(),
            retries: Retries::default(),
            nested: false,
            // SAFETY: the allocator lives in `sh`, which this state holds for as long
            // as it lives; `read` uses only whether the lookup answers, and every
            // allocated small block is an object `read` may copy (as `locate_object`
            // says of it).
            located: unsafe { FastReads::bitmap(&sh.alloc) },
            sh,
        })
    }

    fn local(&mut self) -> &mut SlotLocal {
        self.local
            .as_mut()
            .expect("slot state present while the thread state lives")
    }

    fn clock(&self) -> &PhysClock {
        &self.sh.clock
    }

    /// The read state, which `read` (taking `&self`) changes: a `RefCell` without the
    /// borrow flag's check and stores on every read.
    ///
    /// # Safety
    /// No other reference to the read state (from `rs_mut`, `rs` or `get_mut`) lives
    /// while the result does. (`UnsafeCell` makes the thread state `!Sync`: one thread
    /// at a time calls its methods.)
    #[allow(clippy::mut_from_ref)]
    #[inline(always)]
    unsafe fn rs_mut(&self) -> &mut ReadState {
        // SAFETY: caller.
        unsafe { &mut *self.rs.get() }
    }

    /// The read state, shared: for functions that do not read (so no `rs_mut`
    /// reference is live while they run).
    #[inline]
    fn rs(&self) -> &ReadState {
        // SAFETY: `rs_mut`'s references live only inside the read path's functions,
        // which call neither this nor anything that does.
        unsafe { &*self.rs.get() }
    }

    /// True while every snapshot copy taken is still current.
    fn reads_valid(&self) -> bool {
        let rs = self.rs();
        rs.reads
            .iter()
            .all(|&(i, v)| self.sh.stripes.word(i).load(Acquire) == v)
    }

    /// A block whose allocation bit is clear that this transaction may still use: one
    /// it allocated, or one a committed transaction allocated whose record is not
    /// replayed yet (the bit is set by replay).
    fn own_fresh(&self, b: Block) -> bool {
        self.by_off
            .get(&b.payload())
            .is_some_and(|&i| matches!(self.writes[i].kind, Kind::Fresh(_) | Kind::FreshFreed(_)))
            || self.committed_state(b) == Some(true)
    }

    /// The committed allocation state of `b` if replay has not applied it yet.
    fn committed_state(&self, b: Block) -> Option<bool> {
        crate::engine::kit::shared_counts::count_write(&self.sh.unreplayed); // the lock and the unlock: the replayer locks it too
        crate::engine::kit::shared_counts::count_write(&self.sh.unreplayed);
        let pending = self.sh.unreplayed.lock().unwrap_or_else(|e| e.into_inner());
        pending.get(&b.offset).copied()
    }

    /// Record a committed allocation (`true`) or free of `b` until replay applies it.
    fn unreplayed(&self, b: Block, allocated: bool) {
        crate::engine::kit::shared_counts::count_write(&self.sh.unreplayed); // the lock and the unlock: the replayer locks it too
        crate::engine::kit::shared_counts::count_write(&self.sh.unreplayed);
        self.sh
            .unreplayed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(b.offset, allocated);
    }

    /// An error `e` about user offset `user_off`: `Conflict` if the transaction is
    /// doomed anyway (it may hold a stale pointer), else the error itself.
    ///
    /// A snapshot keeps no read set: its reads are consistent as of `rv` (each checked
    /// against it), so an offset it read is an object's as of `rv`, and one that is no
    /// longer an object was freed by a commit at or after `rv`, which moved the stripe
    /// of its header word to a version at or above the bound. That stripe answers for
    /// it (another object's stripe may share it: a conflict then retries, and the
    /// fallback's attempt, which no commit overtakes, sees the error).
    fn offset_error(&self, user_off: u64, e: Error) -> Error {
        let doomed = if self.snapshot {
            self.sh
                .stripes
                .word(self.sh.stripes.index(user_off.wrapping_sub(HEADER as u64)))
                .load(Acquire)
                >= self.stripe_bound
        } else {
            !self.reads_valid()
        };
        if doomed {
            Error::Conflict
        } else {
            e
        }
    }

    /// Record a read of stripe `idx` at version `v`: the read set (not for a
    /// snapshot), and the largest version read (the commit's durability token).
    #[inline(always)]
    fn joined(&self, rs: &mut ReadState, idx: Stripe, v: u64) {
        if !self.snapshot {
            rs.reads.push((idx, v));
        }
        rs.max_read = rs.max_read.max(v);
    }

    /// Copy the object (`dst.len()` words at `off`, header at `hdr`) out of the working
    /// snapshot as of `rv`; returns the stripe version.
    ///
    /// # Safety
    /// As for [`Self::copy_at`].
    unsafe fn snap_copy(&self, hdr: u64, off: u64, dst: &mut [u64]) -> Result<(Stripe, u64)> {
        let (idx, v1) = self.readable_stripe(hdr)?;
        // SAFETY: caller.
        unsafe { self.copy_at(idx, v1, off, dst) }?;
        Ok((idx, v1))
    }

    /// The stripe of the object at `hdr` and its version, if a transaction reading at
    /// `rv` may read it (unlocked, written before `rv`).
    #[inline]
    fn readable_stripe(&self, hdr: u64) -> Result<(Stripe, u64)> {
        let idx = self.sh.stripes.index(hdr);
        // Acquire: pairs with the committer's Release unlock, so a copy taken after this
        // load sees at least the write-back of the version we accept.
        let v1 = self.sh.stripes.word(idx).load(Acquire);
        // Locked or written after our read version (`PhysClock::stripe_bound`).
        if v1 >= self.stripe_bound {
            return Err(Error::Conflict);
        }
        Ok((idx, v1))
    }

    /// Copy `dst.len()` words at `off` out of the working snapshot, if stripe `idx`
    /// still has version `v1` (read by [`Self::readable_stripe`]) afterwards: a seqlock
    /// read.
    ///
    /// # Safety
    /// The `dst.len()` words at `off` are a prefix of the payload of an object that
    /// `locate_object` or the small-block geometry located (inside the image).
    #[inline]
    unsafe fn copy_at(&self, idx: Stripe, v1: u64, off: u64, dst: &mut [u64]) -> Result<()> {
        let w = self.sh.stripes.word(idx);
        // SAFETY: a located object's payload (caller).
        let src = unsafe { self.sh.ws.words_unchecked(off, dst.len()) };
        for (d, s) in dst.iter_mut().zip(src) {
            *d = s.load(Relaxed);
        }
        // Acquire fence: the word loads above happen before the re-check (seqlock).
        fence(Acquire);
        if w.load(Relaxed) != v1 {
            return Err(Error::Conflict);
        }
        Ok(())
    }

    /// `read` of any object: validated by `locate_object` (large runs, the root slot,
    /// blocks whose allocation is not replayed yet, bad offsets), then this
    /// transaction's own copy if it wrote the object.
    #[inline(never)]
    fn read_located(&self, user_off: u64, len: usize) -> Result<*const u8> {
        let (hdr, plen) = locate_object(&self.sh.alloc, user_off, len, |b| self.own_fresh(b))
            .map_err(|e| self.offset_error(user_off, e))?;
        // The real payload (the root slot's token maps to the slot).
        let off = hdr + HEADER as u64;
        if let Some(&i) = self.by_off.get(&off) {
            let w = &self.writes[i];
            if !w.copy.is_empty() || plen == 0 {
                return Ok(w.copy.as_ptr() as *const u8);
            }
        }
        // The root slot's token is not its payload's offset, which a user may not
        // read: its copy is not kept (`read_kept` would hand it out for that offset).
        // SAFETY: `locate_object` located the object at `hdr` and checked `len`
        // against its payload.
        unsafe { self.read_snapshot(hdr, off, len, off == user_off) }
    }

    /// The kept copy of at least `n` words of the object whose header word is at `hdr`
    /// if its stripe is readable at `rv` and still has the version the copy was taken
    /// at (it then joins the read set); else the stripe and its version for a copy, or
    /// `Unreadable` (locked, or written at or after `rv`).
    ///
    /// No check that `hdr` is an object's header: the cache only keeps copies of
    /// objects located at `hdr` (`read_copy` with `keep`), of at most their payload
    /// length, and every commit that allocates or frees the block at `hdr` (as every
    /// one that writes it) locks and releases its stripe with a new version — so a kept
    /// copy whose version is the stripe's now is of an object that is still allocated
    /// there, unchanged. An offset that is no object matches no kept copy.
    #[inline(always)]
    fn read_kept(&self, hdr: u64, n: usize) -> Kept {
        let idx = self.sh.stripes.index(hdr);
        // Acquire: pairs with the committer's Release unlock (as in `readable_stripe`):
        // a copy taken after this load sees at least the write-back of version `v`.
        let v = self.sh.stripes.word(idx).load(Acquire);
        if v >= self.stripe_bound {
            return Kept::Unreadable;
        }
        // SAFETY: no other reference to the read state lives in this function.
        let rs = unsafe { self.rs_mut() };
        match rs.cache.find(hdr, v, n) {
            Ok(p) => {
                self.joined(rs, idx, v);
                Kept::Hit(p as *const u8)
            }
            Err(set) => Kept::Miss(idx, v, set),
        }
    }

    /// A copy of the first `len` bytes (`len` validated against the payload) of the
    /// object whose header word is at `hdr` and payload at `off`, as of `rv`: the kept
    /// copy if its stripe still has the version it was taken at (`CopyCache`), else a
    /// new seqlock copy, kept in the cache if `keep` (only for an object a user reads
    /// at `off` itself: `read_kept` hands a kept copy out for `hdr + HEADER` without
    /// locating it). Joins the read set.
    ///
    /// Two reads of an object in one transaction may hand out two copies: both are of
    /// a version below `rv`, which no commit replaces before a reader sees the stripe
    /// locked (TL2), so they are equal or the second read conflicts.
    ///
    /// # Safety
    /// The first `len` bytes at `off` are a prefix of the payload of an object that
    /// `locate_object` located with its header word at `hdr`.
    #[inline(always)]
    unsafe fn read_snapshot(
        &self,
        hdr: u64,
        off: u64,
        len: usize,
        keep: bool,
    ) -> Result<*const u8> {
        let n = len.div_ceil(8);
        let (idx, v) = self.readable_stripe(hdr)?;
        let set = {
            // SAFETY: no other reference to the read state lives in this block.
            let rs = unsafe { self.rs_mut() };
            match rs.cache.find(hdr, v, n) {
                Ok(p) => {
                    self.joined(rs, idx, v);
                    return Ok(p as *const u8);
                }
                Err(set) => set,
            }
        };
        // SAFETY: caller.
        unsafe { self.read_copy(idx, v, hdr, off, n, keep.then_some(set)) }
    }

    /// A new seqlock copy of `n` words (validated against the payload) of the object
    /// whose header word is at `hdr` and payload at `off`, if stripe `idx` has version
    /// `v` (below `rv`, read before) before and after it; kept in the cache in `keep`
    /// (the object's set) if the set has room. Joins the read set.
    ///
    /// # Safety
    /// The `n` words at `off` are a prefix of the payload of an object that
    /// `locate_object` or the small-block geometry located.
    #[inline(always)]
    unsafe fn read_copy(
        &self,
        idx: Stripe,
        v: u64,
        hdr: u64,
        off: u64,
        n: usize,
        keep: Option<Set>,
    ) -> Result<*const u8> {
        // SAFETY: no other reference to the read state lives in this function (`copy_at`
        // takes none).
        let rs = unsafe { self.rs_mut() };
        let (p, kept) = match keep.and_then(|set| rs.cache.slot_in(set, n).map(|p| (p, set))) {
            Some((p, set)) => (p, Some(set)),
            None => (rs.copies.take(n), None),
        };
        // SAFETY: `slot` and `take` hand out `n` words that no copy handed out in this
        // transaction uses, not moved before it ends (`CopyCache`, `ReadCopies`).
        let dst = unsafe { std::slice::from_raw_parts_mut(p, n) };
        // SAFETY: a located object's payload (caller).
        unsafe { self.copy_at(idx, v, off, dst) }?;
        if let Some(set) = kept {
            rs.cache.filled_in(set, hdr, v, n);
        }
        self.joined(rs, idx, v);
        Ok(p as *const u8)
    }

    /// The stripe of the object whose header word is at `hdr` (`h`: its
    /// [`Stripes::hash`]) and its version, if a transaction reading at `rv`
    /// may read it (unlocked, written before `rv`).
    #[inline(always)]
    fn readable_of_hash(&self, h: u64) -> Option<(Stripe, u64)> {
        let idx = Stripes::index_of_hash(h);
        // Acquire: pairs with the committer's Release unlock (as in `readable_stripe`):
        // a copy taken after this load sees at least the write-back of version `v`.
        let v = self.sh.stripes.word(idx).load(Acquire);
        (v < self.stripe_bound).then_some((idx, v))
    }

    /// `read`'s common cases, inlined into the read function, for a running
    /// transaction that wrote nothing: the kept copy of the object at `off` at its
    /// stripe's current version (as `read_kept`: no geometry), or else a new seqlock
    /// copy of an allocated small object of a class that holds `len` bytes, kept in
    /// its cache set (whose buffer holds it and is not handed out in this
    /// transaction). The read joins the read set. Else `None` ([`Self::read_full`] then
    /// reads, and answers every error), having changed nothing but, for a copy whose
    /// stripe changed under it or a read set that must grow, the set's entry: it
    /// declines a stripe it may not read (locked, or written at or after `rv`), a set
    /// with no room, any other object, those two cases, and every read of a
    /// transaction that wrote.
    #[inline(always)]
    fn read_fast(&self, off: u64, len: usize) -> Option<*const u8> {
        if !self.active || !self.writes.is_empty() {
            return None;
        }
        let hdr = off.wrapping_sub(HEADER as u64);
        // One multiply for the stripe and the cache set.
        let h = Stripes::hash(hdr);
        let (idx, v) = self.readable_of_hash(h)?;
        let set = CopyCache::set_of_hash(h);
        // SAFETY: no other reference to the read state lives in this function.
        let rs = unsafe { self.rs_mut() };
        let p = match rs.cache.hit(set, hdr, v, len) {
            Some(p) => p,
            None => {
                let n = len.div_ceil(8);
                // Located before its bytes are read: the object's header word precedes
                // `off`, and its payload holds the `n` words (the kept copy's later hits
                // rely on that, see `read_kept`).
                if !class_for(len.saturating_add(HEADER))
                    .is_some_and(|c| self.located.allocated(off, c as u32))
                {
                    return None;
                }
                // (A kept copy that `hit` did not hand out is not one of `n` words at
                // version `v`: this copy replaces it.)
                let dst = rs.cache.room(set, hdr, v, n)?;
                // SAFETY: the geometry located a block at `off` of a class whose payload
                // holds `len` bytes (`n` words).
                let src = unsafe { self.sh.ws.words_unchecked(off, n) };
                for (i, s) in src.iter().enumerate() {
                    // SAFETY: `room` gave `n` words at `dst`, which no copy handed out in
                    // this transaction uses (`CopyCache`).
                    unsafe { dst.add(i).write(s.load(Relaxed)) };
                }
                // Acquire fence: the word loads above happen before the re-check
                // (seqlock: a commit that wrote the object meanwhile moved the stripe
                // to another version for good).
                fence(Acquire);
                if self.sh.stripes.word(idx).load(Relaxed) != v {
                    rs.cache.discard(set);
                    return None;
                }
                dst
            }
        };
        if !self.snapshot {
            // Room in the read set without growing it (a call here would cost every
            // read saved registers; `read_full` grows it, finding the copy kept).
            let at = rs.reads.len();
            if at == rs.reads.capacity() {
                return None;
            }
            // SAFETY: `at < capacity` (above); the element is written before the
            // length covers it.
            unsafe {
                rs.reads.as_mut_ptr().add(at).write((idx, v));
                rs.reads.set_len(at + 1);
            }
        }
        rs.max_read = rs.max_read.max(v);
        Some(p as *const u8)
    }

    /// `read` of every case: the kept copy or an allocated small object for a
    /// transaction that wrote nothing, else `read_located`. Authoritative: whatever
    /// [`Self::read_fast`] declines comes here, and is read here whatever made it
    /// decline.
    #[inline(never)]
    fn read_full(&self, off: u64, len: usize) -> Result<*const u8> {
        running(self.active)?;
        // The common cases in a few compares, for a transaction with no write of ours
        // to look up: first the kept copy of the object at `off` (no geometry: a kept
        // copy's header offset was located as an object's when it was taken, and
        // nothing changed the object since, see `read_kept`); then an allocated small
        // block of a class that holds `len` bytes (its header word precedes the
        // payload). Everything else goes through `read_located`.
        if self.writes.is_empty() {
            let hdr = off.wrapping_sub(HEADER as u64);
            let n = len.div_ceil(8);
            let kept = self.read_kept(hdr, n);
            if let Kept::Hit(p) = kept {
                return Ok(p);
            }
            if class_for(len.saturating_add(HEADER))
                .is_some_and(|c| self.located.allocated(off, c as u32))
            {
                return match kept {
                    // SAFETY: the geometry located a block at `off` of a class whose
                    // payload holds `len` bytes.
                    Kept::Miss(idx, v, set) => unsafe {
                        self.read_copy(idx, v, hdr, off, n, Some(set))
                    },
                    _ => Err(Error::Conflict),
                };
            }
        }
        self.read_located(off, len)
    }

    /// The stripe version of an object about to be freed (validated against `rv`).
    fn stripe_version(&self, hdr: u64) -> Result<u64> {
        let v = self
            .sh
            .stripes
            .word(self.sh.stripes.index(hdr))
            .load(Acquire);
        if v >= self.stripe_bound {
            return Err(Error::Conflict);
        }
        Ok(v)
    }

    /// End the transaction: hand back the blocks it reserved and did not publish (all
    /// of them if it did not commit), drop its copies.
    fn end(&mut self, committed: bool) {
        for w in self.writes.drain(..) {
            match w.kind {
                Kind::Fresh(b) if !committed => self.sh.alloc.unreserve(&mut self.cache, b),
                Kind::FreshFreed(b) => self.sh.alloc.unreserve(&mut self.cache, b),
                _ => {}
            }
        }
        // (A hash map's `clear` rewrites its whole control array even when empty.)
        if !self.by_off.is_empty() {
            self.by_off.clear();
        }
        self.end_reads();
    }

    /// The part of [`Self::end`] every transaction needs, a snapshot's whole end: drop
    /// the read set and the read copies, give the fallback word back.
    #[inline]
    fn end_reads(&mut self) {
        let rs = self.rs.get_mut();
        rs.reads.clear();
        rs.copies.reset();
        rs.cache.end_transaction();
        rs.max_read = 0;
        self.active = false;
        self.retries.end(&self.sh.fallback, self.slot);
    }

    /// The fallback's drain (module docs, *Fallback*): wait until no other slot is in
    /// steps 2-11 of a commit, or the deadline of our hold has passed.
    fn drain(&self) {
        // SeqCst fence: orders our store of the fallback word before the `vts` loads
        // below (store buffering with the committers' fence in step 2).
        fence(SeqCst);
        for (t, s) in self.sh.slots.iter().enumerate() {
            if t == self.slot {
                continue;
            }
            let mut round = 0;
            // Acquire: pairs with the committer's Release of isPers (or of its abort),
            // so its write-back and unlocks happen before our reads.
            while s.vts.load(Acquire) & PERS == 0 && self.sh.fallback.held() {
                spin_step(&mut round);
            }
        }
    }

    /// Release the stripes locked so far, restoring their versions.
    fn unlock_restore(&mut self) {
        for &(i, old) in &self.locks {
            crate::engine::kit::shared_counts::count_write(self.sh.stripes.word(i));
            self.sh.stripes.word(i).store(old, Release);
        }
        self.locks.clear();
    }

    /// Upper bound of the record's entry bytes.
    fn record_bound(&self) -> usize {
        let deps = if self.sh.point_records {
            MAX_DEPS_BYTES
        } else {
            0
        };
        deps + self
            .writes
            .iter()
            .map(|w| match w.kind {
                Kind::Written => 16 + 8 * w.copy.len(),
                Kind::Fresh(_) => 32 + 8 * w.copy.len(),
                Kind::Freed(_) => 16,
                Kind::FreshFreed(_) => 0,
            })
            .sum::<usize>()
    }

    /// Wait until the log has room for `bound` entry bytes.
    fn wait_for_log(&mut self, bound: usize) -> Result<()> {
        let needed = HEADER_LEN + bound;
        let max = self.local().log.max_record();
        if needed > max {
            return Err(Error::TooLargeForLog(Box::new(
                crate::error::TooLargeForLog {
                    needed,
                    capacity: max,
                },
            )));
        }
        let mut round = 0;
        loop {
            let released = self.sh.released_seq[self.slot].load(Acquire);
            let sh = self.sh.clone();
            let local = self.local();
            local.log.reclaim(released);
            if local.log.fits(bound) {
                return Ok(());
            }
            // Every record of ours is committed: the durable point reaches it without
            // us (see the invariants), then the replayer frees the space.
            match sh.replay.try_lock() {
                Ok(mut st) => {
                    replayer::run_batch(&sh, &mut st)?;
                }
                Err(std::sync::TryLockError::WouldBlock) => replayer::kick(&sh),
                Err(std::sync::TryLockError::Poisoned(_)) => {
                    // A replay batch panicked: nobody frees the log any more.
                    return Err(Error::corrupt(
                        "the spht replayer stopped after a failure; reopen the pool",
                    ));
                }
            }
            spin_step(&mut round);
        }
    }

    /// Steps 3-5: lock the write set, take the timestamp, validate. On `Err` nothing is
    /// locked any more.
    fn lock_and_validate(&mut self, after_lower: u64) -> Result<u64> {
        let me = LOCKED | self.slot as u64;
        let mut max_old = self.local().last_raw.max(after_lower);
        for k in 0..self.writes.len() {
            let (hdr, seen, kind) = {
                let w = &self.writes[k];
                (w.hdr, w.seen, w.kind)
            };
            if let Kind::FreshFreed(_) = kind {
                continue;
            }
            let idx = self.sh.stripes.index(hdr);
            let word = self.sh.stripes.word(idx);
            let cur = word.load(Acquire);
            (cur != me && cur & LOCKED == 0)
                .then(|| crate::engine::kit::shared_counts::count_write(word));
            let old = if cur == me {
                self.locks
                    .iter()
                    .find(|l| l.0 == idx)
                    .map(|l| l.1)
                    .unwrap_or(0)
            } else if cur & LOCKED != 0 || word.compare_exchange(cur, me, Acquire, Relaxed).is_err()
            {
                self.unlock_restore();
                return Err(Error::Conflict);
            } else {
                self.locks.push((idx, cur));
                cur
            };
            if seen.is_some_and(|s| s != old) {
                self.unlock_restore();
                return Err(Error::Conflict);
            }
            max_old = max_old.max(self.clock().raw(old));
        }
        let raw = self.clock().commit_raw(max_old);
        let ok = {
            let rs = self.rs();
            rs.reads.iter().all(|&(i, v)| {
                let cur = self.sh.stripes.word(i).load(Acquire);
                cur == v || (cur == me && self.locks.iter().any(|l| l.0 == i && l.1 == v))
            })
        };
        if !ok {
            self.unlock_restore();
            return Err(Error::Conflict);
        }
        Ok(raw)
    }

    /// Step 6: write the copies into the snapshot and build the record.
    fn write_back(&mut self) {
        let ws = &self.sh.ws;
        self.record.clear();
        let mut changed: Vec<usize> = Vec::new();
        for w in &self.writes {
            match w.kind {
                Kind::FreshFreed(_) => {}
                Kind::Freed(b) => {
                    self.record.free(b);
                    self.unreplayed(b, false);
                }
                Kind::Fresh(b) => {
                    self.record.alloc(b);
                    self.unreplayed(b, true);
                    self.record.range(w.off, words_as_bytes(&w.copy));
                    for (i, &v) in w.copy.iter().enumerate() {
                        ws.word(w.off + 8 * i as u64).store(v, Relaxed);
                    }
                }
                Kind::Written => {
                    changed.clear();
                    for (i, &v) in w.copy.iter().enumerate() {
                        if ws.word(w.off + 8 * i as u64).load(Relaxed) != v {
                            changed.push(i);
                        }
                    }
                    if 16 * changed.len() <= 16 + 8 * w.copy.len() {
                        for &i in &changed {
                            self.record.word(w.off + 8 * i as u64, w.copy[i]);
                        }
                    } else {
                        self.record.range(w.off, words_as_bytes(&w.copy));
                    }
                    for &i in &changed {
                        ws.word(w.off + 8 * i as u64).store(w.copy[i], Relaxed);
                    }
                }
            }
        }
    }

    /// How the record of the transaction with timestamp `ts` can stand, read before it
    /// is appended (module docs, *Point records*): a point if every other slot's
    /// transaction with a smaller timestamp is persistent (step 8 would not wait); a
    /// conditional point naming them in `deps` if those that are not are all visible
    /// (final timestamp published: their records will be appended) and at most
    /// [`MAX_DEPS`]; else a record the marker makes durable.
    fn standing(&self, ts: u64, deps: &mut Deps) -> Standing {
        deps.n = 0;
        if crate::mutation::active!(POINT_CHECK) {
            return Standing::Point;
        }
        for (t, s) in self.sh.slots.iter().enumerate() {
            // Acquire: pairs with the Release of isPers, which follows that
            // transaction's record fence: its record is durable before ours.
            let w = s.vts.load(Acquire);
            if t == self.slot || w & PERS != 0 || w & TS_MASK > ts {
                continue;
            }
            // A final timestamp (isUpd) is published after validation (step 6):
            // nothing aborts it and its log space is reserved. A lower bound alone
            // (below ours) may still end in a final timestamp below ours that is not
            // known yet, or in an abort: nothing to name.
            if w & UPD == 0 || deps.n == MAX_DEPS {
                deps.n = 0;
                return Standing::ByMarker;
            }
            deps.ts[deps.n] = w & TS_MASK;
            deps.n += 1;
        }
        if deps.n == 0 {
            Standing::Point
        } else {
            Standing::Conditional
        }
    }

    /// Steps 8-12 for the transaction with timestamp `ts` whose record is at `pos`
    /// (`standing`: a point record is durable as its own durable point: no wait, no
    /// marker; a conditional point after the wait, with no marker).
    fn make_durable(&mut self, ts: u64, pos: usize, standing: Standing) {
        let point = standing == Standing::Point;
        let sh = self.sh.clone();
        let heap = &*sh.heap;
        let me = &sh.slots[self.slot];
        let my_link = log::link(self.slot, pos);
        // 8. Wait for smaller timestamps; look for a larger update transaction. (A
        // point record found nothing to wait for before it was appended, and no
        // transaction gets a smaller timestamp afterwards: see the invariants. A
        // conditional point waits here for the transactions it named, the only ones
        // it can find not persistent.)
        let mut skip = false;
        let mut waited = false;
        for (t, s) in sh.slots.iter().enumerate() {
            if t == self.slot || point {
                continue;
            }
            let mut round = 0;
            loop {
                // Acquire: pairs with the Release of isPers, so its record, links and
                // `last` are visible to us (and, through our own Release, to whoever
                // sees our isPers or the marker we set).
                let w = s.vts.load(Acquire);
                let wts = w & TS_MASK;
                let no_wait = crate::mutation::active!(WAIT);
                if w & PERS != 0 || wts > ts || no_wait {
                    // Only an update transaction is past its validation and sure to
                    // advance the marker; a larger lower bound may still abort.
                    let upd = w & UPD != 0 || crate::mutation::active!(SKIP_CAS);
                    if wts > ts && upd {
                        skip = true;
                    }
                    break;
                }
                waited = true;
                spin_step(&mut round);
            }
        }
        if waited {
            crate::engine::kit::shared_counts::count_write(&sh.stats.waited);
            sh.stats.waited.fetch_add(1, Relaxed);
        }
        // 9. Link to the predecessor: the largest `last` (all are below ts).
        let (mut pts, mut plink) = (0, 0);
        for s in sh.slots.iter() {
            let (t, l) = s.last();
            if l != 0 && t >= pts {
                (pts, plink) = (t, l);
            }
        }
        debug_assert!(
            plink == 0 || pts < ts,
            "spht: predecessor {pts} not below {ts}"
        );
        if plink != 0 {
            let (ps, ppos) = log::unlink(plink);
            if !crate::mutation::active!(FORWARD_LINK) {
                if ps != self.slot && sh.unflushed_links {
                    // Where a fence is a device sync, flushing a line of another
                    // slot's log would put that slot's page into our next sync, which
                    // then waits for that slot's own sync of the page to finish: the
                    // two threads' syncs would run one after the other.
                    log::store_link(heap, ps, ppos, FWD, my_link);
                } else {
                    log::set_link(heap, ps, ppos, FWD, my_link);
                }
            }
            log::set_link(heap, self.slot, pos, BACK, plink);
        } else {
            crate::engine::kit::shared_counts::count_write(&sh.genesis);
            sh.genesis.store(my_link, Release);
        }
        me.set_last(ts, my_link);
        if standing != Standing::ByMarker {
            // The record, durable, is the durable point (a conditional one: now that
            // every record it names is durable too); raised after the links, as a
            // marker's is, for the replayer.
            crate::engine::kit::shared_counts::count_write(&sh.durable);
            sh.durable.fetch_max(ts, AcqRel);
            me.vts.store(ts | UPD | PERS, Release);
            let counter = if point {
                &sh.stats.points
            } else {
                &sh.stats.conditional
            };
            crate::engine::kit::shared_counts::count_write(counter);
            counter.fetch_add(1, Relaxed);
            return;
        }
        match sh.opts.marker {
            SphtMarker::Nvhtm => {
                // 10. Our own commit marker, after every smaller one (step 8).
                let off = slot_marker_offset(self.slot);
                heap.atomic_u64(off).store(ts, Release);
                heap.persist(off, 8);
                crate::engine::kit::shared_counts::count_write(&sh.durable);
                sh.durable.fetch_max(ts, AcqRel);
                // 11.
                me.vts.store(ts | UPD | PERS, Release);
            }
            SphtMarker::Global => {
                // 11.
                me.vts.store(ts | UPD | PERS, Release);
                // 12.
                if skip {
                    crate::engine::kit::shared_counts::count_write(&sh.stats.skipped);
                    sh.stats.skipped.fetch_add(1, Relaxed);
                    return;
                }
                let m = heap.atomic_u64(MARKER_OFFSET);
                let mut val = m.load(Acquire);
                while val < ts {
                    crate::engine::kit::shared_counts::count_write(m);
                    match m.compare_exchange(val, ts, AcqRel, Acquire) {
                        Ok(_) => {
                            // The line holds ts or a larger value: durable after this.
                            heap.persist(MARKER_OFFSET, 8);
                            crate::engine::kit::shared_counts::count_write(&sh.durable);
                            sh.durable.fetch_max(ts, AcqRel);
                            crate::engine::kit::shared_counts::count_write(&sh.stats.cas);
                            sh.stats.cas.fetch_add(1, Relaxed);
                            break;
                        }
                        Err(v) => val = v,
                    }
                }
            }
        }
    }

    /// Commit an update transaction (steps 1-12). On `Err` it has been rolled back.
    fn commit_update(&mut self) -> Result<DurableToken> {
        let bound = self.record_bound();
        if let Err(e) = self.wait_for_log(bound) {
            self.rollback();
            return Err(e);
        }
        // 2. The lower bound, before the commit clock is read (SeqCst store + fence:
        // a scanner that misses it read its own clock before ours).
        let sh = self.sh.clone();
        let me = &sh.slots[self.slot];
        let lower = sh.clock.ts(sh.clock.now(), self.slot);
        me.vts.store(lower, SeqCst);
        fence(SeqCst);
        // The fallback: after the fence, so a holder either sees our `vts` in its drain
        // or we see its word here (module docs, *Fallback*).
        if sh.fallback.blocks(self.slot) {
            me.vts.store(lower | PERS, Release);
            self.rollback();
            return Err(Error::Conflict);
        }
        // The commit reading must be strictly above a reading taken after the
        // publication: a scanner that missed the publication read its clock before
        // it, so its timestamp is then strictly smaller than ours (equal TSC readings
        // would otherwise be ordered by slot number alone).
        let after_lower = sh.clock.now();
        let raw = match self.lock_and_validate(after_lower) {
            Ok(raw) => raw,
            Err(e) => {
                me.vts.store(lower | PERS, Release);
                self.rollback();
                return Err(e);
            }
        };
        let ts = sh.clock.ts(raw, self.slot);
        // 6. Committed: nothing can abort it any more.
        me.vts.store(ts | UPD, Release);
        self.write_back();
        for &(i, _) in &self.locks {
            // Release: the write-back happens-before a reader that sees version ts.
            crate::engine::kit::shared_counts::count_write(sh.stripes.word(i));
            sh.stripes.word(i).store(ts, Release);
        }
        self.locks.clear();
        crate::mutation::hook!(BEFORE_LOG, self.slot);
        // 7. The record: a point record if nothing older is still to persist, a
        // conditional one if what is still to persist is visible (module docs, *Point
        // records*).
        let heap = &*sh.heap;
        let mut deps = Deps::default();
        let standing = if sh.point_records {
            self.standing(ts, &mut deps)
        } else {
            Standing::ByMarker
        };
        let entries = std::mem::take(&mut self.record);
        let pos = self
            .local()
            .log
            .append(heap, entries.bytes(), ts, standing, &deps.ts[..deps.n]);
        self.record = entries;
        heap.fence();
        crate::mutation::hook!(AFTER_LOG, self.slot);
        self.make_durable(ts, pos, standing);
        let l = self.local();
        l.last_raw = raw;
        l.last_ts = ts;
        self.end(true);
        Ok(DurableToken(ts))
    }
}

impl Rollback for SphtThread {
    /// Undo the running transaction's volatile effects and end it.
    fn rollback(&mut self) {
        self.end(false);
    }

    fn is_running(&self) -> bool {
        self.active
    }
}

impl EngineThread for SphtThread {
    fn slot(&self) -> usize {
        self.slot
    }
    // (Inline: a handful of stores and one clock load, which a snapshot's begin
    // inlines into its dispatch rather than calling.)
    #[inline]
    fn begin(&mut self, _opts: &crate::tx_options::TxOptions) {
        self.abort_running();
        self.active = true;
        self.snapshot = false;
        // A nested transaction never waits for other transactions of the pool
        // (`EngineThread::set_nested`): it takes no fallback word (whose drain waits).
        if self.retries.begin() && !self.nested && self.retries.take(&self.sh.fallback, self.slot) {
            self.drain();
        }
        self.stripe_bound = self.sh.clock.stripe_bound(self.sh.clock.now());
    }

    fn abort(&mut self) {
        self.abort_running();
    }

    /// `begin`, and no read set for the attempt's reads (module docs, *Snapshots*).
    #[inline]
    fn begin_snapshot(&mut self) -> FastPath {
        self.begin(&crate::tx_options::TxOptions::read_only());
        self.snapshot = true;
        FastPath::NONE
    }

    // Inlined into its own out-of-line caller (`registry::read_of`), the one
    // function through which `Tx` reads what its fast path declines: the common cases
    // (`read_fast`) inline, everything else one call away (`read_full`).
    #[inline(always)]
    fn read(&self, off: u64, len: usize) -> Result<*const u8> {
        match self.read_fast(off, len) {
            Some(p) => Ok(p),
            None => self.read_full(off, len),
        }
    }

    fn write(&mut self, off: u64, len: usize) -> Result<*mut u8> {
        running(self.active)?;
        let (hdr, plen) = locate_object(&self.sh.alloc, off, len, |b| self.own_fresh(b))
            .map_err(|e| self.offset_error(off, e))?;
        let off = hdr + HEADER as u64;
        if let Some(&i) = self.by_off.get(&off) {
            if self.writes[i].copy.is_empty() && plen > 0 {
                // Freed first, written now: copy at the version the free was based on.
                let mut buf = vec![0u64; plen / 8].into_boxed_slice();
                // SAFETY: `locate_object` located the object: `plen` is its payload.
                let (_, v) = unsafe { self.snap_copy(hdr, off, &mut buf) }?;
                if Some(v) != self.writes[i].seen {
                    return Err(Error::Conflict);
                }
                self.writes[i].copy = buf;
            }
            return Ok(self.writes[i].copy.as_mut_ptr() as *mut u8);
        }
        // An earlier read's version is in the read set: if the object changed since,
        // validation at commit fails.
        let mut copy = vec![0u64; plen / 8].into_boxed_slice();
        // SAFETY: `locate_object` located the object: `plen` is its payload.
        let (_, seen) = unsafe { self.snap_copy(hdr, off, &mut copy) }?;
        self.by_off.insert(off, self.writes.len());
        self.writes.push(WEntry {
            off,
            hdr,
            copy,
            kind: Kind::Written,
            seen: Some(seen),
        });
        Ok(self.writes.last_mut().unwrap().copy.as_mut_ptr() as *mut u8)
    }

    fn alloc(&mut self, len: usize) -> Result<u64> {
        running(self.active)?;
        let b = match self.sh.alloc.reserve(&mut self.cache, len) {
            Err(Error::OutOfSpace { .. }) => {
                // Committed frees become reusable when replay applies them: catch up
                // (replay only takes durable records; this transaction holds no lock
                // yet), then try once more.
                replayer::catch_up(&self.sh);
                self.sh.alloc.reserve(&mut self.cache, len)?
            }
            r => r?,
        };
        let off = b.payload();
        self.by_off.insert(off, self.writes.len());
        self.writes.push(WEntry {
            off,
            hdr: b.offset,
            copy: vec![0u64; (b.payload_len() & !7) / 8].into_boxed_slice(),
            kind: Kind::Fresh(b),
            seen: None,
        });
        Ok(off)
    }

    fn free(&mut self, off: u64) -> Result<()> {
        running(self.active)?;
        let root = root_object(|o, l| self.read(o, l))?;
        let b = locate_block_to_free(&self.sh.alloc, off, root, |b| self.own_fresh(b))
            .map_err(|e| self.offset_error(off, e))?;
        if self.committed_state(b) == Some(false) {
            // Its bit is still set (replay has not applied the free): freed already.
            return Err(self.offset_error(
                off,
                Error::invalid_pointer(format!(
                    "{off:#x} is not an allocated object (already freed)"
                )),
            ));
        }
        if let Some(&i) = self.by_off.get(&off) {
            let w = &mut self.writes[i];
            w.kind = w.kind.freed(off, b)?;
            return Ok(());
        }
        let v = self.stripe_version(b.offset)?;
        self.by_off.insert(off, self.writes.len());
        self.writes.push(WEntry {
            off,
            hdr: b.offset,
            copy: Box::new([]),
            kind: Kind::Freed(b),
            seen: Some(v),
        });
        Ok(())
    }

    fn commit(&mut self) -> Result<DurableToken> {
        running(self.active)?;
        if self
            .writes
            .iter()
            .all(|w| matches!(w.kind, Kind::FreshFreed(_)))
        {
            // Read-only: every read was validated against rv; nothing to publish. The
            // token makes `wait_durable` wait for the writers of what we read.
            let token = DurableToken(self.rs.get_mut().max_read);
            self.rollback();
            return Ok(token);
        }
        self.commit_update()
    }

    fn wait_durable(&mut self, token: DurableToken) -> Result<()> {
        let t = if token == DurableToken::ALL {
            self.local().last_ts
        } else {
            token.0
        };
        let mut round = 0;
        // Acquire: pairs with the raise after the marker's flush.
        while self.sh.durable.load(Acquire) < t {
            spin_step(&mut round);
        }
        Ok(())
    }

    /// A snapshot wrote, allocated and freed nothing (the API refuses those in a
    /// read-only transaction): `commit`'s read-only case without the write set's scan
    /// and clean-up (both empty). It waits, if `wait`, for the writers of what it read
    /// to be durable, as a read-only commit does.
    #[inline]
    fn end_snapshot(&mut self, wait: bool) -> Result<Result<()>> {
        running(self.active)?;
        debug_assert!(self.writes.is_empty() && self.by_off.is_empty());
        let token = DurableToken(self.rs.get_mut().max_read);
        self.end_reads();
        Ok(if wait {
            self.wait_durable(token)
        } else {
            Ok(())
        })
    }

    fn after_abort(&mut self) {
        self.retries.after_abort();
        // A commit the fallback turned away waits here, holding nothing (bounded); a
        // nested one retries at once (its retries are bounded by the API instead).
        if !self.nested {
            self.sh.fallback.wait(self.slot);
        }
    }

    fn set_nested(&mut self, nested: bool) {
        self.nested = nested;
    }

    fn quiesce(&mut self) {
        self.abort();
        let _ = self.wait_durable(DurableToken::ALL);
        self.sh.alloc.drain(&mut self.cache);
    }
}

impl Drop for SphtThread {
    fn drop(&mut self) {
        self.quiesce();
        if let Some(l) = self.local.take() {
            *self.sh.locals[self.slot]
                .lock()
                .unwrap_or_else(|e| e.into_inner()) = Some(l);
        }
    }
}
