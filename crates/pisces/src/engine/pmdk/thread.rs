//! One thread's `pmdk` transactions: strict two-phase locking on the DRAM lock table,
//! a libpmemobj transaction opened by the first change and bound to its OS thread
//! (module docs of [`crate::engine::pmdk`]).

use super::ffi;
use super::shared::{pmdk_error, PmdkShared, HEADER, TYPE_NUM};
use crate::engine::kit::cc::two_phase::{HeldLocks, Mode};
use crate::engine::kit::rollback::Rollback;
use crate::engine::kit::validate::running;
use crate::engine::EngineThread;
use crate::fasthash::FastMap;
use crate::{Error, Result};
use std::cell::Cell;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

thread_local! {
    /// Set while a PMDK transaction is open on this OS thread.
    static TX_OPEN: Cell<bool> = const { Cell::new(false) };
    static THREAD_KEY: u8 = const { 0 };
}

/// A number unique to the calling OS thread while it lives.
fn thread_key() -> usize {
    THREAD_KEY.with(|k| k as *const u8 as usize)
}

/// One thread's transaction state.
pub(crate) struct PmdkThread {
    sh: Arc<PmdkShared>,
    slot: usize,
    locks: HeldLocks,
    active: bool,
    /// A PMDK transaction is open (the first write, alloc or free opened it).
    in_tx: bool,
    /// `thread_key()` of the OS thread that opened it.
    tx_thread: usize,
    /// Objects already snapshotted in this transaction (payload offsets).
    added: FastMap<u64, ()>,
    /// Objects allocated in this transaction.
    allocs: Vec<u64>,
    /// Objects freed by this transaction (at commit).
    frees: Vec<u64>,
}

impl PmdkThread {
    /// State for `slot` (one live state per slot).
    pub(super) fn new(sh: Arc<PmdkShared>, slot: usize) -> PmdkThread {
        PmdkThread {
            slot,
            sh,
            locks: HeldLocks::new(0, slot),
            active: false,
            in_tx: false,
            tx_thread: 0,
            added: FastMap::default(),
            allocs: Vec::new(),
            frees: Vec::new(),
        }
    }

    /// Check that `off` names a live object of at least `len` bytes; its payload length.
    fn check(&self, off: u64, len: usize) -> Result<u64> {
        let sh = &self.sh;
        if !sh.objects.contains(off) {
            // A clear bit under another thread's exclusive lock may be a free that has
            // not committed yet: retry rather than call the pointer bad.
            let (key, word) = sh.objects.lock_of(off);
            if self.locks.held_by_another(key, word) {
                return Err(Error::Conflict);
            }
            return Err(Error::invalid_pointer(format!(
                "{off:#x} is not an object of this pool"
            )));
        }
        let plen = sh.len_word(off).load(Relaxed);
        if len as u64 > plen {
            return Err(Error::invalid_pointer(format!(
                "object at {off:#x} has {plen} bytes, not {len}"
            )));
        }
        Ok(plen)
    }

    /// Validate `off`, take its lock in `mode`, validate again (it may have been freed
    /// and reused before the lock was ours). Returns the payload length.
    fn acquire(&self, off: u64, len: usize, mode: Mode) -> Result<u64> {
        running(self.active)?;
        self.check(off, len)?;
        let (key, word) = self.sh.objects.lock_of(off);
        self.locks.lock(key, word, mode)?;
        self.check(off, len)
    }

    /// Open the PMDK transaction if this is the transaction's first change.
    fn ensure_tx(&mut self) -> Result<()> {
        let me = thread_key();
        if self.in_tx {
            if self.tx_thread != me {
                return Err(Error::invalid_config(
                    "a pmdk transaction must stay on the OS thread that began it",
                ));
            }
            return Ok(());
        }
        if TX_OPEN.with(Cell::get) {
            return Err(Error::invalid_config(
                "another pmdk transaction is open on this OS thread \
                 (nested transactions are not supported)",
            ));
        }
        // SAFETY: open pool; no PMDK transaction on this thread (checked above); the
        // null jmp_buf selects the error-returning API; TX_PARAM_NONE ends the list.
        let rc =
            unsafe { ffi::pmemobj_tx_begin(self.sh.pop, std::ptr::null_mut(), ffi::TX_PARAM_NONE) };
        if rc != 0 {
            let e = pmdk_error("cannot begin a transaction".into());
            // SAFETY: tx_begin must be paired with tx_end even when it failed.
            unsafe { ffi::pmemobj_tx_end() };
            return Err(e);
        }
        TX_OPEN.with(|t| t.set(true));
        self.in_tx = true;
        self.tx_thread = me;
        Ok(())
    }

    /// End the PMDK transaction: commit it (`commit`) or roll it back. Returns false
    /// if it did not commit.
    fn end_tx(&mut self, commit: bool) -> bool {
        if !self.in_tx {
            return true;
        }
        // SAFETY: our transaction is open on this OS thread (callers check
        // `tx_thread`); in the WORK stage commit/abort are allowed, and end is always.
        let rc = unsafe {
            let working = ffi::pmemobj_tx_stage() == ffi::TX_STAGE_WORK;
            if commit && working {
                ffi::pmemobj_tx_commit();
            } else if working {
                ffi::pmemobj_tx_abort(libc::ECANCELED);
            }
            ffi::pmemobj_tx_end()
        };
        TX_OPEN.with(|t| t.set(false));
        self.in_tx = false;
        commit && rc == 0
    }

    /// Forget the transaction's bookkeeping and release its locks.
    fn finish(&mut self) {
        let objects = &self.sh.objects;
        self.locks.release_all(|key| objects.lock_word(key));
        self.added.clear();
        self.allocs.clear();
        self.frees.clear();
        self.active = false;
    }
}

impl Rollback for PmdkThread {
    fn rollback(&mut self) {
        // Unmark our new objects while we still lock them, before PMDK frees them.
        for &a in &self.allocs {
            self.sh.objects.remove(a);
        }
        if self.in_tx && self.tx_thread != thread_key() {
            // Cannot happen through `run` (it ends transactions where it began them);
            // a PMDK transaction cannot be ended from another thread, so keep its
            // locks rather than expose its half-done writes.
            return;
        }
        self.end_tx(false);
        self.finish();
    }

    fn is_running(&self) -> bool {
        self.active
    }
}

impl EngineThread for PmdkThread {
    fn slot(&self) -> usize {
        self.slot
    }
    fn begin(&mut self, _opts: &crate::tx_options::TxOptions) {
        self.abort_running();
        self.active = true;
    }

    fn abort(&mut self) {
        self.abort_running();
    }

    // Inlined into its own out-of-line caller (`registry::read_of`), the one
    // function through which `Tx` reads what its fast path declines.
    #[inline(always)]
    fn read(&self, off: u64, len: usize) -> Result<*const u8> {
        self.acquire(off, len, Mode::Shared)?;
        // SAFETY: a validated payload inside the pool, share-locked until commit.
        Ok(unsafe { self.sh.ptr(off) })
    }

    fn write(&mut self, off: u64, len: usize) -> Result<*mut u8> {
        let plen = self.acquire(off, len, Mode::Exclusive)?;
        self.ensure_tx()?;
        // SAFETY: a validated payload inside the pool, exclusively locked by us.
        let p = unsafe { self.sh.ptr(off) };
        if !self.added.contains_key(&off) && !self.allocs.contains(&off) {
            // SAFETY: our transaction is open on this thread; the range is one object.
            let rc = unsafe {
                ffi::pmemobj_tx_xadd_range_direct(
                    p as *const _,
                    plen as usize,
                    ffi::POBJ_FLAG_TX_NO_ABORT,
                )
            };
            if rc != 0 {
                return Err(pmdk_error(format!(
                    "cannot snapshot the object at {off:#x}"
                )));
            }
            self.added.insert(off, ());
        }
        Ok(p)
    }

    fn alloc(&mut self, len: usize) -> Result<u64> {
        running(self.active)?;
        self.ensure_tx()?;
        let size = HEADER as usize + len.max(8).next_multiple_of(8);
        // SAFETY: our transaction is open on this thread.
        let oid = unsafe {
            ffi::pmemobj_tx_xalloc(
                size,
                TYPE_NUM,
                ffi::POBJ_FLAG_ZERO | ffi::POBJ_FLAG_TX_NO_ABORT,
            )
        };
        if oid.is_null() {
            return Err(Error::OutOfSpace { requested: len });
        }
        let payload = oid.off + HEADER;
        let (key, word) = self.sh.objects.lock_of(payload);
        if let Err(e) = self.locks.lock(key, word, Mode::Exclusive) {
            // Its stripe is another thread's: give the block back within our tx.
            // SAFETY: our transaction is open; `oid` was allocated in it.
            unsafe { ffi::pmemobj_tx_xfree(oid, ffi::POBJ_FLAG_TX_NO_ABORT) };
            return Err(e);
        }
        // SAFETY: a live object of this pool, allocated by our open transaction.
        let usable = unsafe { ffi::pmemobj_alloc_usable_size(oid) } as u64;
        self.sh
            .len_word(payload)
            .store((usable - HEADER) & !7, Relaxed);
        self.sh.objects.insert(payload);
        self.allocs.push(payload);
        Ok(payload)
    }

    fn free(&mut self, off: u64) -> Result<()> {
        if off == self.sh.root_slot {
            return Err(Error::invalid_pointer("the root slot cannot be freed"));
        }
        // The root object (the root slot's first word) cannot be freed either:
        // `Pool::root` would hand it out again after its block is reused.
        let slot = self.read(self.sh.root_slot, 16)?;
        // SAFETY: `read` returns a pointer valid for reads of 16 bytes that do not
        // change while this transaction runs (engine contract); read unaligned.
        let root = unsafe { (slot as *const u64).read_unaligned() };
        if root != 0 && off == root {
            return Err(Error::invalid_pointer(format!(
                "{off:#x} is the root object, which cannot be freed (Pool::root hands it out)"
            )));
        }
        if self.frees.contains(&off) {
            return Err(Error::invalid_pointer(format!(
                "object {off:#x} freed twice"
            )));
        }
        self.acquire(off, 0, Mode::Exclusive)?;
        self.ensure_tx()?;
        if let Some(i) = self.allocs.iter().position(|&a| a == off) {
            // Allocated in this transaction: PMDK gives it back at once, so unmark it
            // first.
            self.allocs.swap_remove(i);
            self.sh.objects.remove(off);
        }
        // SAFETY: our transaction is open on this thread; `off` is a live object.
        let rc = unsafe { ffi::pmemobj_tx_xfree(self.sh.oid(off), ffi::POBJ_FLAG_TX_NO_ABORT) };
        if rc != 0 {
            return Err(pmdk_error(format!("cannot free the object at {off:#x}")));
        }
        if self.sh.objects.contains(off) {
            self.frees.push(off);
        }
        Ok(())
    }

    /// Commit: on `Ok` the transaction is visible and durable (libpmemobj's commit
    /// returns once the transaction is durable, and the locks are released after it);
    /// on `Err` it has been rolled back.
    fn commit(&mut self) -> Result<crate::engine::DurableToken> {
        running(self.active)?;
        if self.in_tx && self.tx_thread != thread_key() {
            self.rollback();
            return Err(Error::invalid_config(
                "a pmdk transaction must commit on the OS thread that began it",
            ));
        }
        // Unmark freed objects before PMDK can hand their blocks out again (we still
        // hold their locks, so nobody validates them meanwhile without retrying).
        for &f in &self.frees {
            self.sh.objects.remove(f);
        }
        if !self.end_tx(true) {
            for &f in &self.frees {
                self.sh.objects.insert(f);
            }
            let e = pmdk_error("the transaction did not commit".into());
            self.frees.clear();
            self.rollback();
            return Err(e);
        }
        self.finish();
        Ok(crate::engine::DurableToken::DURABLE)
    }

    fn quiesce(&mut self) {
        self.abort();
    }
}

impl Drop for PmdkThread {
    fn drop(&mut self) {
        self.abort();
    }
}
