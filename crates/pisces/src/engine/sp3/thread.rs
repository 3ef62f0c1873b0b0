//! One thread's SP3 transactions: OCC read phase and Algorithm 1.
//!
//! # Read phase
//! * **Read**: own private copy if the transaction wrote the object; the same version as
//!   before if it read it already; otherwise a consistent (`ver`, `ptr`, `lastTid`,
//!   `live`) snapshot of the entry ([`Entry::snapshot`]) — an object locked by another
//!   transaction aborts at once (it would fail validation anyway) — recorded in the read
//!   set. A repeated read is found by a scan of the read set, taken only when a 64-bit
//!   filter of the entries read says the entry may be there — once the set holds
//!   [`FEW_READS`] reads. Before that it is not looked for while the commit clock stands
//!   still (its snapshot then has the version of the earlier read, so it is recorded
//!   again, at most [`FEW_READS`] times in all), and looked for by a scan when the clock
//!   moved (before the set is validated again, which the earlier read would fail if the
//!   object changed since).
//!
//!   *Opacity* (ours; the paper validates only at commit): the code inside a
//!   transaction never sees two objects from different states (a zombie could
//!   otherwise loop or follow a freed pointer). After each new read's snapshot — and
//!   after a write's lock, whose copy is of the newest version — the transaction
//!   checks that everything it read is still current ([`Sp3Thread::revalidate`]):
//!   by the *commit clock* when it stands where the last check left it (one load),
//!   else by validating the whole read set and the new read again (O(r)).
//!
//!   The commit clock ([`super::shared::Sp3Shared::commit_clock`]) is a counter that
//!   every update commit ticks once, after it holds all its locks and before it
//!   validates or publishes anything. It is not a transaction id and orders nothing
//!   the paper's protocol relies on; it only lets a reader skip re-validation. Why
//!   skipping is sound — the reader's view is the state after exactly the commits
//!   whose tick is at or below `validated_at`, in tick order, and those form a prefix
//!   of a serial order of the update transactions:
//!   - *Tick order is a serial order.* A committer holds its locks from before its
//!     tick until it publishes; it validates after its tick. A commit that read (or
//!     overwrote) what another published saw that one's unlock, which follows that
//!     one's tick (Release / Acquire), so its own tick is later; one whose read set
//!     another overwrote with a smaller tick sees that one's lock in its validation
//!     (the ticks are RMWs of one word, so the earlier tick's Release reaches the later
//!     ticker) and aborts.
//!   - *Checked at `c`, a reader sees every commit up to `c` and none after.* The
//!     reader loads the clock (Acquire) after its new snapshot and before any
//!     validation load. A commit whose tick it reads locked its objects before the
//!     tick, so the validation that follows sees those locks or the versions published
//!     after them: an object read before that commit changed it fails (the new read
//!     is validated too: a commit can overtake a snapshot before the clock load). A
//!     commit with a later tick publishes only after its tick: had the new snapshot
//!     seen any of its versions, the clock load after it would have read that tick.
//!   - *A skip keeps it.* A new read whose clock load returns `validated_at` again
//!     took its snapshot after the load that set `validated_at`, so commits up to it
//!     show their locks or versions to the snapshot (a lock aborts the read), and
//!     commits after it are unseen (as above).
//!
//!   So a read-only transaction serializes at its last clock check (its commit needs no
//!   validation), and the cost per new read is one load and a compare while no update
//!   commits run, one pass over the read set otherwise. The price: update commits of
//!   all threads write one shared word (one atomic RMW each; the paper's design has no
//!   such word).
//!
//!   *Fast path*: a small block not in the write set whose entry is in the index's
//!   slab table ([`super::index::Index::lookup_small`]) is read from the entry alone,
//!   without the allocator's check of the offset: the table holds entries of blocks
//!   only, and the snapshot's `live` says whether the object is allocated at the
//!   version read (a later change of it fails validation). A snapshot that says "not
//!   allocated" goes to the slow path, which decides as before (the allocator's bit,
//!   then the committed state). The slow path (first access in a run, large blocks,
//!   the root slot, objects in the write set) validates the offset, then finds or
//!   makes the entry in the index's map.
//! * **Write** (encounter-time locking): lock the entry — from the version read earlier
//!   if the transaction read the object (a changed object aborts now), else from its
//!   current version — and copy the newest version into a private DRAM copy.
//! * **Alloc / free**: a reserved block gets a zeroed private copy, its entry is locked
//!   at commit; a free locks the entry like a write and takes effect in the checkpoint.
//!
//! # Commit (Algorithm 1)
//! A read-only transaction skips steps 0-4: its reads were validated as they were
//! made, so it serializes at its last read's check ([`Sp3Thread::commit_read_only`] says why);
//! it only notes the predecessors of step 5 — from its read set, walked only if a read
//! noted a writer in another slot (a flag each new read sets).
//!
//! 0. Encode the kit entries (whole objects: RANGE; ALLOC / FREE), make room in the
//!    log for them and the largest possible dependency set — before anything is
//!    visible, so nothing between visibility and persistence can block; lock the
//!    entries of new blocks.
//! 1. **Validate** the read set: same version, and unlocked or locked by us.
//! 2. **Dependencies**: `lastTid` of every object read (taken with its version, so it
//!    names the writer of exactly the version read) or written (under our lock);
//!    same-slot ones are dropped (implied by lid order).
//! 3. **Visible** (early visibility on): publish the copies, set `lastTid`, bump
//!    versions, unlock.
//! 4. **Persist**: append the record (dependency set + entries, persistTS = lid), flush,
//!    **fence**; hand the record to the checkpointer's queue (queued = durable).
//!    With `early_visibility=false` step 3 happens here, after the fence.
//! 5. **Pending** ([`EngineThread::wait_durable`]): wait until every predecessor is
//!    *stable* — durable together with all its own predecessors, recursively (the
//!    paper sets isPersistent only after step 5, which makes it transitive); waiters
//!    advance the stable marks themselves ([`super::checkpoint::Checkpointer::stabilize`]).
//!    `commit` returns before this; `run` calls it unless the caller deferred
//!    durability. A read-only transaction has no record but waits for its dependencies
//!    too: it may have read data whose log is not durable yet.
//!
//! After validation nothing can fail: a visible transaction always persists (its log
//! space is reserved), so a dependent never waits for a predecessor that gives up.
//!
//! # Fallback (a bound on attempts)
//! A transaction that aborted [`THRESHOLD`](crate::engine::kit::cc::fallback::THRESHOLD)
//! times in a row on conflicts (a long reader whose objects writers keep replacing, a
//! long update transaction that reads a lot) takes the pool's fallback word before its
//! next attempt ([`crate::engine::kit::cc::fallback`]):
//! * it stores the word, ticks the epoch clock and waits, like a grace period, until
//!   every other slot's transaction that started before the tick has ended (or the
//!   deadline of its hold has passed);
//! * `begin` of every transaction not declared read-only loads the word after
//!   [`SlotClock::start`](crate::engine::kit::cc::clock::SlotClock::start) and, while the
//!   holder's deadline runs, leaves the slot inactive and waits before its read phase,
//!   so it takes no encounter-time lock the holder could meet.
//!
//! Race closed (store buffering, the grace period's): the holder stores the word,
//! ticks (Release) and fences (SeqCst) before it scans the slot clocks; a starting
//! transaction stores `STARTING`, fences, loads the clock, then loads the word. Either
//! the scan sees the starter's slot older than the tick (and waits for it to end), or
//! the starter's fence comes later and its load of the word sees it (also when its
//! clock load read the tick: the tick's Release makes the word visible). So after the
//! drain, until the deadline, no update transaction runs beside the holder, whose
//! attempt meets no lock and no changed version and commits. Everything else is
//! unchanged (the holder validates and logs as always): serializability, the
//! dependency rules and crash safety are untouched. Fast-path cost: one load per
//! `begin`.

use super::index::{unchanged, Entry, SmallTable, Snapshot};
use super::log;
use super::shared::Sp3Shared;
use super::tid::{self, slot_of};
use super::version::{Limbo, Version};
use crate::engine::kit::cc::clock::SlotClock;
use crate::engine::kit::cc::fallback::Retries;
use crate::engine::kit::log::redo_log::{LogWriter, RecordBuilder, HEADER_LEN};
use crate::engine::kit::rollback::Rollback;
use crate::engine::kit::validate::{locate_block_to_free, locate_object, root_object, running};
use crate::engine::kit::write_set::{self, WriteKind as Kind, WriteSet};
use crate::engine::{DurableToken, EngineThread};
use crate::heap::alloc::{Block, SmallSlot, ThreadCache, HEADER};
use crate::sync::spin_step;
use crate::tx_options::TxOptions;
use crate::{Error, Result};
use std::cell::UnsafeCell;
use std::collections::HashMap;
use std::sync::Arc;

crate::mutation::point! {
    /// Commit does not validate the read set (step 1), nor does a read.
    pub(crate) static SKIP_VALIDATION = "skip-validation";
    /// `wait_durable` does not wait for predecessors (step 5).
    pub(crate) static NO_DEPENDENCY_WAIT = "no-dependency-wait";
    /// Records carry no dependency set (step 2).
    pub(crate) static NO_DEPENDENCIES = "no-dependencies";
    /// An update commit does not tick the commit clock, so readers that skip
    /// re-validation while the clock stands still miss its changes.
    pub(crate) static NO_COMMIT_TICK = "no-commit-tick";
}

crate::mutation::hook_point! {
    /// A commit between its visibility (with early visibility) and the append of its
    /// record: tests slow a slot down here to act while its transaction is visible and
    /// not persistent.
    pub(crate) static BEFORE_PERSIST = "before-persist";
}

/// Whether a transaction of `slot` that depends on `d` must wait for it: another
/// slot's transaction, not stable yet (same-slot ones are implied by lid order).
#[inline(always)]
fn must_wait_for(sh: &Sp3Shared, slot: usize, d: u64) -> bool {
    d != tid::NONE && slot_of(d) != slot && !sh.ckpt.is_stable(d)
}

/// Note in `owed` that `d` must be waited for, keeping one entry per slot (its largest
/// lid): a slot's stable mark covers every smaller lid of it (`Checkpoint::is_stable`),
/// so waiting for the largest waits for the rest. Transactions with deferred durability
/// whose thread never waits add to `owed` at every commit; this bounds it by the slot
/// count.
#[inline]
fn note_owed(owed: &mut Vec<u64>, d: u64) {
    let s = slot_of(d);
    match owed.iter_mut().find(|o| slot_of(**o) == s) {
        Some(o) if tid::lid_of(d) > tid::lid_of(*o) => *o = d,
        Some(_) => {}
        None => owed.push(d),
    }
}

/// One object of the read set.
struct ReadEntry {
    entry: *const Entry,
    /// `ver` as read (unlocked).
    ver: u64,
    /// Writer of the version read.
    last_tid: u64,
    data: *const u8,
}

/// One object of the write set: its entry is locked (null for a new block until
/// commit), `prior` is the entry's `ver` word before we locked it.
type WriteEntry = write_set::WriteEntry<Version, Entry, u64>;

/// Reads beyond which the read set keeps an index by entry. Up to this many, a scan
/// (taken only when `filter` may hold the entry) is cheaper than a hash lookup; past
/// it, a scan per new read would make a transaction that reads n objects cost n²
/// (a full walk of a large tree in one transaction).
const SCAN_LIMIT: usize = 32;

/// Reads up to which a new read is recorded without looking for an earlier read of the
/// same object (a lookup in a hash map or a small set reads fewer): while the commit
/// clock stands still, a repeated read's snapshot has the version of the earlier read
/// (both see the state after the same commits: module docs, *Read*), so recording it
/// twice changes nothing but the list's length, and the clock-moved path
/// ([`Sp3Thread::record_after_commits`]) looks for the earlier read before validating.
/// From this length on, a new read is looked for (through `filter`), so an object is
/// in the list at most this many times. The list's capacity is never below this, so
/// such a push needs no growth check either.
pub(super) const FEW_READS: usize = 8;

/// The read set, in order of first read. While it holds fewer than [`FEW_READS`]
/// reads, repeated reads are not looked for before they are recorded; from then on,
/// found by entry (an object's entry is unique): by a linear scan taken only when
/// `filter` says the entry may be there; once it holds more than [`SCAN_LIMIT`]
/// reads, through `index`. Every copy of an object in `list` has the same version.
struct ReadSet {
    /// Capacity at least [`FEW_READS`] (`ReadSet::default`; nothing shrinks it).
    list: Vec<ReadEntry>,
    /// Once `list` holds [`FEW_READS`] reads or more: one bit per entry of `list`,
    /// chosen by [`ReadSet::filter_bit`] of its address (a clear bit means the entry
    /// is not in `list`, a set one may be another's). 0 until then.
    filter: u64,
    /// Position in `list` of every entry, by address; empty while `list` holds at
    /// most [`SCAN_LIMIT`] reads, complete (every read of `list`) once it holds more.
    index: HashMap<usize, usize>,
    /// A value of the commit clock at which every entry of `list` still had the
    /// version it was read at (`Sp3Thread::revalidate`).
    validated_at: u64,
    /// Some read of `list` has a writer in another slot ([`ReadSet::note_writer`]):
    /// only then does a read-only commit walk `list` for the writers it must wait for
    /// (`Sp3Thread::owe_reads`).
    foreign_writer: bool,
}

impl Default for ReadSet {
    fn default() -> ReadSet {
        ReadSet {
            list: Vec::with_capacity(FEW_READS),
            filter: 0,
            index: HashMap::new(),
            validated_at: 0,
            foreign_writer: false,
        }
    }
}

impl ReadSet {
    /// The read of the object whose entry is `e`, if the transaction read it (the
    /// first of its copies).
    #[inline]
    fn of(&self, e: *const Entry) -> Option<&ReadEntry> {
        if self.list.len() <= SCAN_LIMIT {
            self.list.iter().find(|r| std::ptr::eq(r.entry, e))
        } else {
            self.index.get(&(e as usize)).map(|&i| &self.list[i])
        }
    }

    /// The read of `e` if the transaction read it, in a list of [`FEW_READS`] reads or
    /// more (which `filter` covers): scanning only when `filter` has `e`'s bit.
    #[inline(always)]
    fn find_among_many(&self, e: *const Entry) -> Option<&ReadEntry> {
        debug_assert!(self.list.len() >= FEW_READS);
        if self.filter & Self::filter_bit(e) == 0 {
            return None;
        }
        self.of(e)
    }

    /// The bit of `filter` for entry `e`: six bits of a multiplicative hash of its
    /// address (entries are separate heap boxes, so their low bits say little).
    #[inline(always)]
    fn filter_bit(e: *const Entry) -> u64 {
        1 << ((e as usize as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 58)
    }

    /// Record a new read (of an entry not in the set, or one read before at the same
    /// version while the set holds fewer than [`FEW_READS`] reads). The push that
    /// makes the list [`FEW_READS`] reads long builds the filter from every earlier
    /// read; past [`SCAN_LIMIT`], the index.
    fn push(&mut self, r: ReadEntry) {
        if self.list.len() + 1 == FEW_READS {
            self.filter = self
                .list
                .iter()
                .fold(0, |f, r| f | Self::filter_bit(r.entry));
        }
        self.filter |= Self::filter_bit(r.entry);
        if self.list.len() >= SCAN_LIMIT {
            self.index_past_scan_limit(&r);
        }
        self.list.push(r);
    }

    /// Note the writer `d` of a version read by a transaction of `slot`: whether it is
    /// another slot's.
    #[inline(always)]
    fn note_writer(&mut self, d: u64, slot: usize) {
        if slot_of(d) != slot && d != tid::NONE {
            self.foreign_writer = true;
        }
    }

    /// `index` for a read about to be pushed at position `list.len()`, past the scan
    /// limit: the first such read indexes every earlier one too.
    #[cold]
    fn index_past_scan_limit(&mut self, r: &ReadEntry) {
        if self.index.is_empty() {
            self.index.extend(
                self.list
                    .iter()
                    .enumerate()
                    .map(|(i, r)| (r.entry as usize, i)),
            );
        }
        self.index.insert(r.entry as usize, self.list.len());
    }

    /// Forget every read.
    #[inline(always)]
    fn clear(&mut self) {
        if self.list.len() >= FEW_READS {
            // Only a list this long set filter bits, and only a longer one indexed.
            self.filter = 0;
            if !self.index.is_empty() {
                self.index.clear();
            }
        }
        self.list.clear();
        self.foreign_writer = false;
    }
}

/// A thread's SP3 state.
pub(crate) struct Sp3Thread {
    sh: Arc<Sp3Shared>,
    slot: usize,
    cache: ThreadCache,
    log: Option<LogWriter>,
    builder: RecordBuilder,
    body: Vec<u8>,
    deps: Vec<u64>,
    active: bool,
    /// `active` and the write set empty: the read's fast path needs both and tests
    /// this one flag (set by `begin`, cleared by every push to the write set and at
    /// the transaction's end).
    reads_only: bool,
    /// `sh.index`'s direct table, for the read's fast path without a load of `sh`'s
    /// pointer; it lives as long as `sh`, which this state holds.
    small: SmallTable,
    /// Interior mutability: `read` takes `&self`. Not a `RefCell`: its borrow flag
    /// costs a read a load, a test and two stores; [`Sp3Thread::reads`] and
    /// [`Sp3Thread::reads_mut`] say when a reference is sound.
    reads: UnsafeCell<ReadSet>,
    writes: WriteSet<Version, Entry, u64>,
    /// Last lid this slot used.
    lid: u64,
    /// Predecessors of committed transactions not known to be persistent yet.
    owed: Vec<u64>,
    limbo: Limbo,
    /// Conflict aborts in a row and the fallback word (module docs, *Fallback*).
    retries: Retries,
    /// Transactions run nested in another pool's (`EngineThread::set_nested`).
    nested: bool,
}

// SAFETY: the raw pointers are private copies owned by this struct, versions kept alive
// by the epoch scheme while a transaction runs, and entries and the direct table owned
// by `sh` (both `Sync`); the state moves between threads only between transactions.
unsafe impl Send for Sp3Thread {}

impl Sp3Thread {
    /// State for `slot` (one live state per slot).
    pub(crate) fn new(sh: Arc<Sp3Shared>, slot: usize) -> Sp3Thread {
        let (log, lid) = sh.slots[slot]
            .parked
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
            .expect("one live thread state per slot");
        // SAFETY: the state holds `sh`, and with it the index, for as long as it lives,
        // and uses the table only through itself.
        let small = unsafe { sh.index.small_table() };
        Sp3Thread {
            sh,
            slot,
            cache: ThreadCache::default(),
            log: Some(log),
            builder: RecordBuilder::default(),
            body: Vec::new(),
            deps: Vec::new(),
            active: false,
            reads_only: false,
            small,
            reads: UnsafeCell::new(ReadSet::default()),
            writes: WriteSet::default(),
            lid,
            owed: Vec::new(),
            limbo: Limbo::default(),
            retries: Retries::default(),
            nested: false,
        }
    }

    /// The read set, shared. Sound because the state is not `Sync` (`UnsafeCell`) and
    /// no `&mut` to the read set outlives the function that made it
    /// ([`Sp3Thread::reads_mut`]), none of which calls this.
    #[inline(always)]
    fn reads(&self) -> &ReadSet {
        // SAFETY: as above: no exclusive reference to the read set is alive.
        unsafe { &*self.reads.get() }
    }

    /// The read set, exclusively, for one of the transaction's operations (a read, the
    /// opacity check of a write).
    ///
    /// # Safety
    /// No other reference to the read set may be alive while the returned one is used:
    /// the caller uses it within its own body and the functions it hands it to, none of
    /// which takes the read set from `self` again ([`Sp3Thread::reads`] or this).
    #[inline(always)]
    #[allow(clippy::mut_from_ref)]
    unsafe fn reads_mut(&self) -> &mut ReadSet {
        // SAFETY: the caller's contract.
        unsafe { &mut *self.reads.get() }
    }

    fn log(&mut self) -> &mut LogWriter {
        self.log
            .as_mut()
            .expect("log present while the state lives")
    }

    /// Step 1 over the whole read set.
    /// A block allocated by this transaction (its allocation bit is set only when the
    /// transaction's record is written back).
    fn own_fresh(&self, b: Block) -> bool {
        self.writes.own_fresh(b)
    }

    /// A block whose allocation bit is clear that this transaction may still use: one it
    /// allocated, or one a committed transaction allocated whose record the checkpoint
    /// has not written back yet (the bit is set there).
    fn pending(&self, b: Block) -> bool {
        self.own_fresh(b)
            || self
                .sh
                .index
                .committed_live(b.payload(), b.payload_len() & !7)
    }

    /// Validate a user offset (see `kit::validate::locate_object`): the object's real
    /// payload offset (the root slot's token maps to the slot) and its length. An
    /// object that is no longer allocated while this transaction's reads are no longer
    /// current is a conflict (a concurrent free unlinked it), not a bad pointer.
    fn locate(&self, off: u64, len: usize) -> Result<(u64, usize)> {
        match locate_object(&self.sh.alloc, off, len, |b| self.pending(b)) {
            Ok((header, plen)) => Ok((header + HEADER as u64, plen)),
            Err(e) => {
                if self.validate(self.reads()) {
                    Err(e)
                } else {
                    Err(Error::Conflict)
                }
            }
        }
    }

    fn validate(&self, rs: &ReadSet) -> bool {
        rs.list.iter().all(|r| self.unchanged(r.entry, r.ver))
    }

    /// Step 1 for one read: the object whose entry is `e` still has the version `seen`
    /// (read unlocked), unlocked or locked by us.
    #[inline(always)]
    fn unchanged(&self, e: *const Entry, seen: u64) -> bool {
        if crate::mutation::active!(SKIP_VALIDATION) {
            return true;
        }
        // SAFETY: entries live as long as the index.
        let now = unsafe { &*e }
            .ver
            .load(std::sync::atomic::Ordering::Acquire);
        unchanged(seen, now, self.slot)
    }

    /// Opacity after a new version joined what the transaction has seen (module docs,
    /// *Read*): true if every read of `rs` is still current, by the commit clock when
    /// it has not moved since `rs` was last validated, else by validating `rs` (and
    /// `also`, the entry and version of a new read not pushed yet) again.
    ///
    /// Call it after the new version was taken. The clock load comes before the
    /// validation's version loads: a commit whose tick it reads had locked its objects
    /// before the tick, so the validation sees those locks or the versions after them.
    #[inline(always)]
    fn revalidate(&self, rs: &mut ReadSet, also: Option<(&Entry, u64)>) -> bool {
        let now = self.sh.commit_clock.now();
        if now == rs.validated_at {
            return true;
        }
        if !self.validate(rs) || also.is_some_and(|(e, seen)| !self.unchanged(e, seen)) {
            return false;
        }
        rs.validated_at = now;
        true
    }

    /// Forget the read and write sets; the slot reads nothing any more.
    #[inline]
    fn end(&mut self) {
        self.writes.clear_index();
        self.end_reads();
    }

    /// [`Sp3Thread::end`] of a transaction whose write set is empty and was never
    /// used (a snapshot): its index is empty already.
    #[inline(always)]
    fn end_reads(&mut self) {
        debug_assert!(self.writes.is_empty());
        self.reads.get_mut().clear();
        self.slot_clock().finish();
        self.active = false;
        self.reads_only = false;
        self.retries.end(&self.sh.fallback, self.slot);
        let sh = &self.sh;
        self.limbo.collect(&sh.clock, || sh.clocks());
    }

    /// This slot's clock (epochs for version reclamation).
    #[inline(always)]
    fn slot_clock(&self) -> &SlotClock {
        // SAFETY: `slot` is below `slots.len()`: `Sp3Thread::new` indexed `slots[slot]`
        // (checked), and `slots` never changes while `sh` lives.
        &unsafe { self.sh.slots.get_unchecked(self.slot) }.clock
    }

    /// The fallback's drain (module docs, *Fallback*): a grace period for every other
    /// slot's transaction that started before a tick after our store of the word,
    /// bounded by the deadline of our hold.
    fn drain(&self) {
        crate::engine::kit::cc::fallback::drain(
            &self.sh.fallback,
            &self.sh.clock,
            self.sh.clocks(),
            self.slot,
        );
    }

    /// `begin` of a retry that may take the fallback word. A nested transaction never
    /// waits for other transactions of the pool (`EngineThread::set_nested`): it neither
    /// takes the word (whose drain waits) nor waits for a holder; it may conflict with
    /// the holder's attempt.
    #[cold]
    #[inline(never)]
    fn begin_retry(&mut self) {
        if !self.nested && self.retries.take(&self.sh.fallback, self.slot) {
            self.drain();
        }
    }

    /// `begin` of an update transaction while another slot's fallback attempt runs:
    /// wait for it reading nothing, then start again.
    #[cold]
    #[inline(never)]
    fn wait_for_fallback(&mut self) {
        let clock = &self.sh.slots[self.slot].clock;
        loop {
            clock.finish();
            self.sh.fallback.wait(self.slot);
            clock.start(&self.sh.clock);
            // After `start`'s fence (module docs, *Fallback*).
            if !self.sh.fallback.blocks(self.slot) {
                break;
            }
        }
    }

    /// Lock `e` for a write or free of the object at `off`: from the version read
    /// earlier, or from the current one. Returns the prior word.
    fn lock_entry(&self, e: &Entry) -> Result<u64> {
        let rs = self.reads();
        match rs.of(e) {
            Some(r) => {
                let seen = r.ver;
                if e.try_lock(seen, self.slot) {
                    Ok(seen)
                } else {
                    Err(Error::Conflict)
                }
            }
            None => e.lock_current(self.slot).ok_or(Error::Conflict),
        }
    }

    /// A read while `reads_only` is false: outside a transaction (an error), or of a
    /// transaction that wrote (or allocated or freed): its own copies first, then as a
    /// read of a transaction that did not.
    #[inline(never)]
    fn read_not_reads_only(&self, off: u64, len: usize) -> Result<*const u8> {
        running(self.active)?;
        if self.writes.get(off).is_none() {
            if let Some(e) = self.sh.index.lookup_small(off, len) {
                return self.read_small_slow(off, len, e);
            }
        }
        self.read_slow(off, len)
    }

    /// A read of the small block at `off` whose entry is `e` (found in the direct
    /// table, not in the write set) that the fast path of `read` declined: a new
    /// snapshot, read as `read_entry` does; one that says the block is not allocated
    /// goes to [`Sp3Thread::read_slow`].
    #[cold]
    #[inline(never)]
    fn read_small_slow(&self, off: u64, len: usize, e: &Entry) -> Result<*const u8> {
        match self.read_entry(e, true)? {
            Some(data) => Ok(data),
            None => self.read_slow(off, len),
        }
    }

    /// [`Sp3Thread::read_small_slow`] of the block whose entry `e` the read's fast path
    /// found for its read (so `e.off()` is its offset and its length at most
    /// `e.small_len()`), with the block's own length for the read's: the answer is the
    /// same (a block validated for its whole payload is one for a part of it, and
    /// every error of the validation is one for either), and the fast path keeps
    /// neither its offset nor its length past the lookup.
    #[cold]
    #[inline(never)]
    fn read_entry_slow(&self, e: &Entry) -> Result<*const u8> {
        self.read_small_slow(e.off(), e.small_len(), e)
    }

    /// A read the fast path declined: validate the offset against the allocator, the
    /// write set, then the entry (created on the object's first access in the run).
    #[inline(never)]
    fn read_slow(&self, off: u64, len: usize) -> Result<*const u8> {
        let (off, plen) = self.locate(off, len)?;
        if let Some(w) = self.writes.get(off) {
            if !w.copy.is_null() {
                // SAFETY: our live private copy.
                return Ok(unsafe { Version::data(w.copy) });
            }
            if !w.entry.is_null() {
                // Freed (not written) by us: we hold the lock, the newest version is
                // stable and, being an entry's, alive while we run.
                // SAFETY: entries live as long as the index; versions as above.
                return Ok(unsafe { Version::data((*w.entry).ptr()) });
            }
        }
        // SAFETY: validated by `locate_object`; the slot is the allocator's for it.
        let e = unsafe {
            self.sh
                .index
                .get_or_create(off, plen, &self.sh.heap, self.slot_of(off), true)
        };
        Ok(self
            .read_entry(e, false)?
            .expect("read_entry answers when not fast"))
    }

    /// The allocator's slot of the object at payload offset `off` if it is a small block
    /// (the index links its entry into the direct table).
    #[inline]
    fn slot_of(&self, off: u64) -> Option<SmallSlot> {
        self.sh.alloc.small_slot(off, 0)
    }

    /// Read the object whose entry is `e`: the version read before, or a new snapshot
    /// recorded in the read set after the opacity check. `fast`: the object's offset was
    /// not validated against the allocator, so a snapshot that says it is not allocated
    /// answers `None` (the slow path decides); otherwise the answer is always `Some`.
    #[inline(always)]
    fn read_entry(&self, e: &Entry, fast: bool) -> Result<Option<*const u8>> {
        // SAFETY: nothing else refers to the read set while the read runs
        // (`Sp3Thread::reads_mut`).
        let rs = unsafe { self.reads_mut() };
        let Ok(snap) = e.snapshot() else {
            // Locked by a writer: a new read would fail validation; a repeated one
            // still has its version.
            return rs.of(e).map(|r| Some(r.data)).ok_or(Error::Conflict);
        };
        if rs.list.len() >= FEW_READS {
            if let Some(r) = rs.find_among_many(e) {
                // Read before: the same version again.
                return Ok(Some(r.data));
            }
        }
        if fast && !snap.live {
            return Ok(None);
        }
        self.record(rs, e, snap).map(Some)
    }

    /// A snapshot `snap` of `e` that `read_entry` did not find in the read set: the
    /// opacity check, then the read set records it. The common case here — the commit
    /// clock stands where the last check left it, so the snapshot is current, and so
    /// is that of any earlier read of `e` (the same version: [`FEW_READS`]), and the
    /// list is short — writes the read in place; the rest is out of line.
    #[inline(always)]
    fn record(&self, rs: &mut ReadSet, e: &Entry, snap: Snapshot) -> Result<*const u8> {
        let n = rs.list.len();
        if self.sh.commit_clock.now() != rs.validated_at || n + 1 >= FEW_READS {
            // The snapshot's fields one by one: an aggregate argument would be stored
            // to the stack on the common path too.
            return self.record_slow(rs, e, snap.ver, snap.ptr, snap.last_tid);
        }
        // SAFETY: a published version, alive while this transaction runs (epochs).
        let data = unsafe { Version::data(snap.ptr) } as *const u8;
        rs.note_writer(snap.last_tid, self.slot);
        // SAFETY: `n + 1 < FEW_READS <= capacity` (the field's invariant): the slot at
        // `n` is allocated and unused; writing it, then counting it, pushes.
        unsafe {
            rs.list.as_mut_ptr().add(n).write(ReadEntry {
                entry: e,
                ver: snap.ver,
                last_tid: snap.last_tid,
                data,
            });
            rs.list.set_len(n + 1);
        }
        Ok(data)
    }

    /// [`Sp3Thread::record`] after commits moved the commit clock, or into a list of
    /// [`FEW_READS`] reads or more. After commits: a repeated read that `read_entry`
    /// did not look for (the set holds fewer than [`FEW_READS`] reads) answers the
    /// version read before; a new read is checked ([`Sp3Thread::revalidate`]).
    #[cold]
    #[inline(never)]
    fn record_slow(
        &self,
        rs: &mut ReadSet,
        e: &Entry,
        ver: u64,
        ptr: *mut Version,
        last_tid: u64,
    ) -> Result<*const u8> {
        if self.sh.commit_clock.now() != rs.validated_at {
            if rs.list.len() < FEW_READS {
                if let Some(r) = rs.of(e) {
                    return Ok(r.data);
                }
            }
            if !self.revalidate(rs, Some((e, ver))) {
                return Err(Error::Conflict);
            }
        }
        // SAFETY: a published version, alive while this transaction runs (epochs).
        let data = unsafe { Version::data(ptr) } as *const u8;
        rs.note_writer(last_tid, self.slot);
        rs.push(ReadEntry {
            entry: e,
            ver,
            last_tid,
            data,
        });
        Ok(data)
    }

    /// [`Sp3Thread::record`] of a snapshot taken earlier by the caller (tests: a
    /// snapshot that a commit overtakes before the reader records it).
    #[cfg(test)]
    pub(super) fn record_snapshot(&self, e: &Entry, snap: Snapshot) -> Result<*const u8> {
        // SAFETY: nothing else refers to the read set here (`Sp3Thread::reads_mut`).
        self.record(unsafe { self.reads_mut() }, e, snap)
    }

    /// Reads in the read set (tests).
    #[cfg(test)]
    pub(super) fn reads_recorded(&self) -> usize {
        self.reads().list.len()
    }

    /// Predecessors `wait_durable` would wait for (tests).
    #[cfg(test)]
    pub(super) fn owed_len(&self) -> usize {
        self.owed.len()
    }

    /// Drop the records the checkpointer retired.
    fn recycle(&mut self) {
        let w = self.sh.ckpt.retired(self.slot) + 1;
        let heap = self.sh.heap.clone();
        self.log().recycle(&heap, u64::MAX, w);
    }

    /// Make room for a record of `entries` bytes (step 0).
    fn reserve_log(&mut self, entries: usize) -> Result<()> {
        let max = self.log().max_record();
        if HEADER_LEN + entries > max {
            return Err(Error::TooLargeForLog(Box::new(
                crate::error::TooLargeForLog {
                    needed: HEADER_LEN + entries,
                    capacity: max,
                },
            )));
        }
        let mut round = 0;
        while !self.log().fits(entries) {
            // Our records are durable; the checkpoint retires them once their
            // predecessors are (every predecessor is visible, so it persists without
            // waiting for anything).
            self.sh.checkpoint(true);
            self.recycle();
            if !self.log().fits(entries) {
                spin_step(&mut round);
            }
        }
        Ok(())
    }

    /// The read-only commit: no validation and no record; the predecessors to wait
    /// for come straight from the read set.
    ///
    /// Why no validation: each new read checked, after taking its own snapshot, that
    /// every earlier one was still current — by the commit clock or by validating them
    /// (*Read*; a version that is the same at its read and at a later check was current
    /// all along: versions only grow, an aborted writer restores the word it locked).
    /// So the transaction's view is the state after the commits the last check
    /// covered: it serializes there, whatever writers did since.
    #[inline(always)]
    fn commit_read_only(&mut self) -> Result<DurableToken> {
        self.owe_reads();
        if self.writes.is_empty() {
            self.end();
        } else {
            // Nothing was written: hand back blocks allocated and freed again.
            self.rollback();
        }
        Ok(self.token())
    }

    /// A read-only commit depends on the writers of what it read that are not durable
    /// yet: note them in `owed`, for `wait_durable`. Only a read set that read another
    /// slot's version has any (`ReadSet::foreign_writer`).
    #[inline(always)]
    fn owe_reads(&mut self) {
        if self.reads.get_mut().foreign_writer {
            self.owe_foreign_reads();
        }
    }

    /// [`Sp3Thread::owe_reads`] of a read set with writers in other slots.
    #[inline(never)]
    fn owe_foreign_reads(&mut self) {
        let Sp3Thread {
            reads,
            owed,
            sh,
            slot,
            ..
        } = self;
        for r in &reads.get_mut().list {
            if must_wait_for(sh, *slot, r.last_tid) {
                note_owed(owed, r.last_tid);
            }
        }
    }

    /// Algorithm 1 for a transaction that writes (module docs, *Commit*).
    #[inline(never)]
    fn commit_update(&mut self) -> Result<DurableToken> {
        // 0. Entries, log space, locks of new blocks.
        self.writes.build_record(&mut self.builder);
        let max_deps = self.reads.get_mut().list.len() + self.writes.len();
        if let Err(e) = self.reserve_log(log::prefix_len(max_deps) + self.builder.len()) {
            self.rollback();
            return Err(e);
        }
        for i in 0..self.writes.len() {
            let w = &self.writes[i];
            if !matches!(w.kind, Kind::Fresh(_)) {
                continue;
            }
            // SAFETY: a block we reserved (valid geometry).
            let slot = self.slot_of(w.off);
            // SAFETY: as above; the slot is the allocator's for the block.
            let e = unsafe {
                self.sh
                    .index
                    .get_or_create(w.off, w.len, &self.sh.heap, slot, false)
            };
            // A new block is ours alone unless a stale pointer of another transaction
            // names it: then that one holds the lock and we retry.
            match e.lock_current(self.slot) {
                Some(prior) => {
                    self.writes[i].entry = e;
                    self.writes[i].prior = prior;
                }
                None => {
                    self.rollback();
                    return Err(Error::Conflict);
                }
            }
        }
        // 1. Validation. The commit clock first: every lock is held, no version is
        // bumped yet (module docs, *Read*: readers skip re-validation while the clock
        // stands still). Release (`Clock::tick`, an AcqRel RMW): a reader whose clock
        // load reads this tick or a later one sees our locks.
        if !crate::mutation::active!(NO_COMMIT_TICK) {
            self.sh.commit_clock.tick();
        }
        // SeqCst fence: orders our locks before the version loads of validation (store
        // → load). Two transactions that each lock what the other read (write skew)
        // both fence; the later fence's validation sees the earlier one's lock, so at
        // least one of them aborts.
        crate::sync::fence(std::sync::atomic::Ordering::SeqCst);
        if !self.validate(self.reads()) {
            self.rollback();
            return Err(Error::Conflict);
        }
        // 2. Dependencies.
        let mut deps = std::mem::take(&mut self.deps);
        deps.clear();
        if !crate::mutation::active!(NO_DEPENDENCIES) {
            deps.extend(self.reads.get_mut().list.iter().map(|r| r.last_tid));
            for w in self.writes.iter() {
                if !w.entry.is_null() {
                    // SAFETY: locked by us; entries live as long as the index.
                    deps.push(unsafe { &*w.entry }.last_tid());
                }
            }
        }
        deps.retain(|&d| d != tid::NONE && slot_of(d) != self.slot);
        deps.sort_unstable();
        deps.dedup();
        self.lid += 1;
        let lid = self.lid;
        let tid = tid::pack(self.slot, lid);
        // 3. Visible (early visibility).
        let early = self.sh.opts.early_visibility;
        if early {
            self.publish(tid);
        }
        crate::mutation::hook!(BEFORE_PERSIST, self.slot);
        // 4. Persist.
        let mut body = std::mem::take(&mut self.body);
        log::encode(&mut body, &deps, self.builder.bytes());
        let sh = self.sh.clone();
        self.log().append(&sh.heap, &body, lid);
        sh.heap.fence();
        if !early {
            self.publish(tid);
        }
        let frees = self
            .writes
            .iter()
            .filter(|w| matches!(w.kind, Kind::Freed(_)))
            .count();
        sh.ckpt.push(
            self.slot,
            super::checkpoint::Pending {
                lid,
                deps: deps.clone(),
                body: body.clone(),
            },
            frees,
        );
        self.body = body;
        // Clean up: copies of freed objects were never published; new blocks freed
        // again go back.
        for w in self.writes.drain() {
            if !w.copy.is_null() {
                // SAFETY: an unpublished copy (published ones were nulled).
                unsafe { Version::free(w.copy) };
            }
            if let Kind::FreshFreed(b) = w.kind {
                sh.alloc.unreserve(&mut self.cache, b);
            }
        }
        self.end();
        let token = self.owe(&deps);
        self.deps = deps;
        if self.log().used() > self.log().capacity() / 2 && sh.checkpoint(false) > 0 {
            self.recycle();
        }
        Ok(token)
    }

    /// Step 5, pending: every predecessor persistent. (Waits for the predecessors of
    /// all transactions committed so far, a superset of a token's.)
    #[cold]
    #[inline(never)]
    fn wait_for_owed(&self) {
        for &d in &self.owed {
            let mut round = 0;
            while !self.sh.ckpt.is_stable(d) {
                self.sh.ckpt.stabilize(false);
                if !self.sh.ckpt.is_stable(d) {
                    spin_step(&mut round);
                }
            }
        }
    }

    /// Remember the predecessors in `deps` that are not persistent yet.
    fn owe(&mut self, deps: &[u64]) -> DurableToken {
        for &d in deps {
            if must_wait_for(&self.sh, self.slot, d) {
                note_owed(&mut self.owed, d);
            }
        }
        self.token()
    }

    /// The durability token of what `owed` holds.
    fn token(&self) -> DurableToken {
        if self.owed.is_empty() {
            DurableToken::DURABLE
        } else {
            DurableToken(self.lid.max(1))
        }
    }

    /// Step 3 for every object of the write set.
    fn publish(&mut self, tid: u64) {
        for w in self.writes.iter_mut() {
            if w.entry.is_null() {
                continue; // allocated and freed again: never published
            }
            // SAFETY: an entry we locked; entries live as long as the index.
            let e = unsafe { &*w.entry };
            match w.kind {
                Kind::Written | Kind::Fresh(_) => {
                    if let Some(old) = e.publish(Some(w.copy), tid) {
                        self.limbo.retire(old);
                    }
                    // Owned by the entry now.
                    w.copy = std::ptr::null_mut();
                }
                Kind::Freed(_) | Kind::FreshFreed(_) => {
                    e.publish(None, tid);
                }
            }
            e.unlock(w.prior, true);
        }
        // Release: `Pool::sync` that sees this lid waits for its persistence.
        self.sh.slots[self.slot]
            .published
            .store(tid::lid_of(tid), std::sync::atomic::Ordering::Release);
    }
}

impl Rollback for Sp3Thread {
    /// Unlock, free private copies, give back new blocks, end the transaction.
    fn rollback(&mut self) {
        for w in self.writes.drain() {
            if !w.entry.is_null() {
                // SAFETY: an entry we locked; entries live as long as the index.
                unsafe { &*w.entry }.unlock(w.prior, false);
            }
            if !w.copy.is_null() {
                // SAFETY: an unpublished private copy, ours.
                unsafe { Version::free(w.copy) };
            }
            if let Kind::Fresh(b) | Kind::FreshFreed(b) = w.kind {
                self.sh.alloc.unreserve(&mut self.cache, b);
            }
        }
        self.end();
    }

    fn is_running(&self) -> bool {
        self.active
    }
}

impl EngineThread for Sp3Thread {
    fn slot(&self) -> usize {
        self.slot
    }
    #[inline]
    fn begin(&mut self, opts: &TxOptions) {
        if self.active {
            self.abort_running();
        }
        if self.retries.begin() {
            self.begin_retry();
        }
        self.slot_clock().start(&self.sh.clock);
        // After `start`'s fence (module docs, *Fallback*).
        if !opts.read_only && !self.nested && self.sh.fallback.blocks(self.slot) {
            self.wait_for_fallback();
        }
        // Acquire: the reads' opacity check starts from this value (`revalidate`).
        self.reads.get_mut().validated_at = self.sh.commit_clock.now();
        self.active = true;
        debug_assert!(self.writes.is_empty());
        self.reads_only = true;
    }

    fn abort(&mut self) {
        self.abort_running();
    }

    // Inlined into its own out-of-line caller (`registry::read_of`), the one
    // function through which `Tx` reads what its fast path declines.
    #[inline(always)]
    fn read(&self, off: u64, len: usize) -> Result<*const u8> {
        // The fast path (module docs, *Read*): a small block of a running transaction
        // that wrote nothing, whose entry exists, is unlocked and says it is allocated,
        // read while the commit clock stands where the last check left it into a read
        // set of fewer than `FEW_READS` reads (`Sp3Thread::record`'s common case).
        // Every other case is one call out of line and the read's last step, so that
        // no value of the fast path lives across a call (and the calls take the
        // offset and length in the registers the read got them in).
        if !self.reads_only {
            return self.read_not_reads_only(off, len);
        }
        let Some(e) = self.small.lookup_small(off, len) else {
            return self.read_slow(off, len);
        };
        let Some(snap) = e.snapshot_live() else {
            return self.read_entry_slow(e);
        };
        // SAFETY: nothing else refers to the read set while the read runs
        // (`Sp3Thread::reads_mut`).
        let rs = unsafe { self.reads_mut() };
        let n = rs.list.len();
        if n + 1 >= FEW_READS || self.sh.commit_clock.now() != rs.validated_at {
            return self.read_entry_slow(e);
        }
        // SAFETY: a published version, alive while this transaction runs (epochs).
        let data = unsafe { Version::data(snap.ptr) } as *const u8;
        rs.note_writer(snap.last_tid, self.slot);
        // SAFETY: `n + 1 < FEW_READS <= capacity` (the field's invariant): the slot at
        // `n` is allocated and unused; writing it, then counting it, pushes.
        unsafe {
            rs.list.as_mut_ptr().add(n).write(ReadEntry {
                entry: e,
                ver: snap.ver,
                last_tid: snap.last_tid,
                data,
            });
            rs.list.set_len(n + 1);
        }
        Ok(data)
    }

    fn write(&mut self, off: u64, len: usize) -> Result<*mut u8> {
        running(self.active)?;
        let (off, plen) = self.locate(off, len)?;
        if let Some(i) = self.writes.index_of(off) {
            let w = &mut self.writes[i];
            if w.copy.is_null() {
                // Freed first, written now: we hold the lock.
                // SAFETY: a locked entry; its newest version is alive and `w.len` long.
                w.copy = unsafe { Version::new(w.len, Some(Version::data((*w.entry).ptr()))) };
            }
            // SAFETY: our live private copy.
            return Ok(unsafe { Version::data(w.copy) });
        }
        // SAFETY: validated by `locate_object`.
        let e = unsafe {
            self.sh
                .index
                .get_or_create(off, plen, &self.sh.heap, self.slot_of(off), true)
        };
        let prior = self.lock_entry(e)?;
        // The read's fast path ends with the write set's first entry.
        self.reads_only = false;
        self.writes.push(WriteEntry {
            entry: e,
            prior,
            ..WriteEntry::new(off, plen, std::ptr::null_mut(), Kind::Written)
        });
        // Opacity: the copy's content joins what this transaction has seen. (A commit
        // that changed the object ticked the commit clock before it unlocked the entry,
        // which our lock read: `revalidate` sees the tick.)
        // SAFETY: nothing else refers to the read set here (`Sp3Thread::reads_mut`).
        if !self.revalidate(unsafe { self.reads_mut() }, None) {
            return Err(Error::Conflict);
        }
        // SAFETY: we hold the lock: the newest version is stable, alive, `plen` long.
        let copy = unsafe { Version::new(plen, Some(Version::data(e.ptr()))) };
        self.writes.last_mut().expect("pushed").copy = copy;
        // SAFETY: our new private copy.
        Ok(unsafe { Version::data(copy) })
    }

    fn alloc(&mut self, len: usize) -> Result<u64> {
        running(self.active)?;
        if self.sh.ckpt.frees_pending() >= self.sh.free_batch {
            // Committed frees wait in the checkpoint queues: make them reusable before
            // the allocator takes fresh slabs (else delayed reuse fragments the heap;
            // `checkpoint`, *Frees*).
            self.sh.checkpoint(false);
        }
        let mut round = 0;
        let b = loop {
            match self.sh.alloc.reserve(&mut self.cache, len) {
                Ok(b) => break b,
                Err(Error::OutOfSpace { .. }) => {
                    // Freed blocks become reusable in the checkpoint, once their
                    // records' predecessors are retired: keep checkpointing while
                    // records wait (a predecessor may be between visibility and its
                    // queue), give up when none is left.
                    let retired = self.sh.checkpoint(true);
                    if retired == 0 && !self.sh.ckpt.has_pending() {
                        break self.sh.alloc.reserve(&mut self.cache, len)?;
                    }
                    if retired == 0 {
                        spin_step(&mut round);
                    }
                }
                Err(e) => return Err(e),
            }
        };
        // SAFETY: no source: zeroed.
        let copy = unsafe { Version::new(b.payload_len() & !7, None) };
        // The read's fast path ends with the write set's first entry.
        self.reads_only = false;
        self.writes.push(WriteEntry::fresh(b, copy));
        Ok(b.payload())
    }

    fn free(&mut self, off: u64) -> Result<()> {
        running(self.active)?;
        let root = root_object(|o, l| self.read(o, l))?;
        let b = locate_block_to_free(&self.sh.alloc, off, root, |b| self.pending(b))?;
        if let Some(i) = self.writes.index_of(off) {
            let w = &mut self.writes[i];
            w.kind = w.kind.freed(off, b)?;
            return Ok(());
        }
        let plen = b.payload_len() & !7;
        // SAFETY: a block of this pool (validated).
        let e = unsafe {
            self.sh
                .index
                .get_or_create(off, plen, &self.sh.heap, self.slot_of(off), true)
        };
        let prior = self.lock_entry(e)?;
        // The read's fast path ends with the write set's first entry.
        self.reads_only = false;
        self.writes.push(WriteEntry {
            entry: e,
            prior,
            ..WriteEntry::freed(b)
        });
        Ok(())
    }

    #[inline]
    fn commit(&mut self) -> Result<DurableToken> {
        running(self.active)?;
        if self.writes.publishes_nothing() {
            return self.commit_read_only();
        }
        self.commit_update()
    }

    /// A snapshot wrote, allocated and freed nothing (the API refuses those in a
    /// read-only transaction): `commit`'s read-only case without its write-set tests.
    #[inline]
    fn end_snapshot(&mut self, wait: bool) -> Result<Result<()>> {
        running(self.active)?;
        self.owe_reads();
        self.end_reads();
        let token = self.token();
        Ok(if wait {
            self.wait_durable(token)
        } else {
            Ok(())
        })
    }

    #[inline]
    fn wait_durable(&mut self, token: DurableToken) -> Result<()> {
        if token != DurableToken::DURABLE && !crate::mutation::active!(NO_DEPENDENCY_WAIT) {
            self.wait_for_owed();
        }
        self.owed.clear();
        Ok(())
    }

    fn after_abort(&mut self) {
        self.retries.after_abort();
    }

    fn set_nested(&mut self, nested: bool) {
        self.nested = nested;
    }

    fn quiesce(&mut self) {
        self.abort();
        let _ = self.wait_durable(DurableToken::ALL);
        self.sh.checkpoint(true);
        self.recycle();
        self.limbo
            .drain_blocking(&self.sh.clock, self.sh.clocks(), self.slot);
        self.sh.alloc.drain(&mut self.cache);
    }
}

impl Drop for Sp3Thread {
    fn drop(&mut self) {
        self.quiesce();
        let log = self.log.take().expect("present");
        *self.sh.slots[self.slot]
            .parked
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = Some((log, self.lid));
    }
}
