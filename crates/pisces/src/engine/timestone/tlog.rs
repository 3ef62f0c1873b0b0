//! The TLog: volatile version chains in DRAM, newest first, one per object.
//!
//! # Versions and stamps
//! A [`Version`] is one DRAM allocation: a header (an atomic *stamp*, the pointer to the
//! next older version, the size) and the object's whole payload. A transaction's
//! private copy is a version that is not linked anywhere yet. At commit it is pushed
//! onto the chain with stamp [`PENDING`] and then moves through these states:
//!
//! | stamp              | meaning                                   |
//! |--------------------|-------------------------------------------|
//! | `PENDING`          | pushed, commit timestamp not taken yet    |
//! | `COMMITTING`       | about to take its commit timestamp        |
//! | `C \| UNDURABLE`   | timestamp C, OLog record not durable yet  |
//! | `C`                | committed at C: complete                  |
//! | `ABORTED`          | failed validation after its timestamp     |
//!
//! A reader at snapshot S takes the newest version whose stamp is a final `C ≤ S`
//! and skips every other one, *without waiting*. This is sound because snapshots are
//! horizons (`Shared::horizon`): S is below every commit that is not complete when the
//! transaction starts, so every commit with `C ≤ S` had stored its final stamps
//! before it cleared its `committing` guard, which the starting transaction observed
//! (acquire) — a non-final stamp therefore always belongs to a commit above S. The
//! checkpointer reads at a cut K after waiting for every commit `≤ K` to complete, so
//! the same holds for it. (A debug assertion checks it for undurable stamps.)
//!
//! # Invariants
//! 1. A version's data never changes once pushed; its stamp changes only as above and
//!    only by its committer; only `next` of the *keeper* is cut by truncation.
//! 2. Only the holder of the entry's lock pushes, truncates, or changes `last_ts`.
//! 3. The chain is never empty: an entry starts with a base version at timestamp 0.
//! 4. Committed timestamps strictly decrease along `next` (pushes happen under the
//!    lock with a timestamp taken after it); `ABORTED` versions may sit in between.
//!
//! # Reclamation (same argument as the `mvcc` baseline, adapted)
//! The committer, after its version is final, computes `oldest` ≤ every running or
//! future snapshot (slot scan after its own increment) and cuts the chain below the
//! *keeper*, the newest committed version with `ts ≤ oldest`. Readers stop at the first
//! committed version with `ts ≤ S` (S ≥ oldest), so they never go below the keeper; a
//! reader the scan missed has S ≥ C and stops at the committer's own version.

use std::alloc::{alloc, alloc_zeroed, dealloc, Layout};
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use std::sync::atomic::{AtomicPtr, AtomicU64};

/// Pushed, no timestamp yet: invisible to every reader.
pub const PENDING: u64 = u64::MAX;
/// Validation failed after the timestamp was taken: invisible forever.
pub const ABORTED: u64 = u64::MAX - 1;
/// About to take a timestamp: readers spin.
pub const COMMITTING: u64 = u64::MAX - 2;
/// Flag on a timestamp whose OLog record is not yet durable.
pub const UNDURABLE: u64 = 1 << 62;
/// Largest commit timestamp.
pub const TS_MASK: u64 = UNDURABLE - 1;

/// Header of a version; the payload follows.
#[repr(C)]
pub struct Version {
    stamp: AtomicU64,
    next: AtomicPtr<Version>,
    words: usize,
}

const HDR: usize = std::mem::size_of::<Version>();

fn layout(words: usize) -> Layout {
    Layout::from_size_align(HDR + 8 * words, 8).expect("version size overflows")
}

impl Version {
    /// A private copy of `bytes` bytes (multiple of 8), zeroed or copied from `src`.
    ///
    /// # Safety
    /// `src`, if given, is valid for reads of `bytes` bytes.
    pub unsafe fn new(bytes: usize, src: Option<*const u8>, live: &AtomicU64) -> *mut Version {
        debug_assert!(bytes.is_multiple_of(8));
        let l = layout(bytes / 8);
        // SAFETY: non-zero size (header).
        let p = unsafe {
            if src.is_some() {
                alloc(l)
            } else {
                alloc_zeroed(l)
            }
        } as *mut Version;
        if p.is_null() {
            std::alloc::handle_alloc_error(l);
        }
        // SAFETY: fresh allocation of HDR + bytes; `src` valid for `bytes` (caller).
        unsafe {
            p.write(Version {
                stamp: AtomicU64::new(PENDING),
                next: AtomicPtr::new(std::ptr::null_mut()),
                words: bytes / 8,
            });
            if let Some(s) = src {
                std::ptr::copy_nonoverlapping(s, Self::data(p), bytes);
            }
        }
        live.fetch_add(1, Relaxed);
        p
    }

    /// The payload.
    ///
    /// # Safety
    /// `this` is a live version.
    #[inline]
    pub unsafe fn data(this: *const Version) -> *mut u8 {
        // SAFETY: the payload follows the header in one allocation.
        unsafe { (this as *mut u8).add(HDR) }
    }

    /// Payload length in bytes.
    ///
    /// # Safety
    /// `this` is a live version.
    pub unsafe fn len(this: *const Version) -> usize {
        // SAFETY: caller.
        unsafe { (*this).words * 8 }
    }

    /// Set the stamp (the committer of a pushed version).
    ///
    /// # Safety
    /// `this` is live and the caller is its committer.
    #[inline]
    pub unsafe fn set_stamp(this: *const Version, s: u64) {
        // Release: a reader that sees the new stamp also sees the data (written before
        // the push) and, for `C`, the committer's durable record.
        // SAFETY: `this` is live (caller).
        unsafe { (*this).stamp.store(s, Release) };
    }

    /// Free one version.
    ///
    /// # Safety
    /// From [`Version::new`], freed once, unreachable by every thread.
    pub unsafe fn free(this: *mut Version, live: &AtomicU64) {
        // SAFETY: caller; same layout as allocated.
        unsafe { dealloc(this as *mut u8, layout((*this).words)) };
        live.fetch_sub(1, Relaxed);
    }

    unsafe fn free_chain(mut this: *mut Version, live: &AtomicU64) -> usize {
        let mut n = 0;
        while !this.is_null() {
            // SAFETY: caller: the whole chain is unreachable.
            unsafe {
                let next = (*this).next.load(Relaxed);
                Self::free(this, live);
                this = next;
            }
            n += 1;
        }
        n
    }
}

/// Timestamp of a final committed stamp, if it is one.
#[inline]
fn committed(stamp: u64) -> Option<u64> {
    (stamp & !TS_MASK == 0).then_some(stamp)
}

/// One object: its commit lock, its last commit timestamp and its version chain.
pub struct Entry {
    lock: AtomicU64,
    last_ts: AtomicU64,
    head: AtomicPtr<Version>,
}

// SAFETY: versions are plain bytes behind raw pointers, shared under the module's
// invariants through the atomics above.
unsafe impl Send for Entry {}
// SAFETY: as above.
unsafe impl Sync for Entry {}

impl Entry {
    /// An entry whose base version `first` is committed at timestamp 0.
    ///
    /// # Safety
    /// `first` is an unlinked version owned by the caller.
    pub unsafe fn new(first: *mut Version) -> Entry {
        // SAFETY: caller.
        unsafe { (*first).stamp.store(0, Relaxed) };
        Entry {
            lock: AtomicU64::new(0),
            last_ts: AtomicU64::new(0),
            head: AtomicPtr::new(first),
        }
    }

    /// Take the commit lock for `slot` without waiting. Acquire pairs with `unlock`.
    #[inline]
    pub fn try_lock(&self, slot: usize) -> bool {
        self.lock
            .compare_exchange(0, slot as u64 + 1, Acquire, Relaxed)
            .is_ok()
    }

    /// Release the commit lock (Release: publishes pushes, stamps and `last_ts`).
    #[inline]
    pub fn unlock(&self) {
        self.lock.store(0, Release);
    }

    /// True if a committer other than `slot` holds the lock. Acquire: after seeing it
    /// free, `last_ts` of the last holder is visible.
    #[inline]
    pub fn locked_by_other(&self, slot: usize) -> bool {
        let l = self.lock.load(Acquire);
        l != 0 && l != slot as u64 + 1
    }

    /// Timestamp of the last commit that wrote or freed the object.
    #[inline]
    pub fn last_ts(&self) -> u64 {
        self.last_ts.load(Acquire)
    }

    /// Record a commit at `ts` (under the lock).
    #[inline]
    pub fn mark(&self, ts: u64) {
        self.last_ts.store(ts, Release);
    }

    /// The version a snapshot at `s` sees: the newest with a final stamp `ts ≤ s` (see
    /// the module docs: no waiting); the oldest one if none qualifies (stale pointer).
    pub fn visible(&self, s: u64) -> *const Version {
        let mut v = self.head.load(Acquire);
        if crate::mutation::active(crate::mutation::Mutation::TsVisibility) {
            return v;
        }
        loop {
            // SAFETY: `v` is reachable and above the keeper (module docs).
            let vr = unsafe { &*v };
            let stamp = vr.stamp.load(Acquire);
            if let Some(ts) = committed(stamp) {
                if ts <= s {
                    return v;
                }
            }
            debug_assert!(
                !(stamp & UNDURABLE != 0 && stamp < COMMITTING && (stamp & TS_MASK) <= s),
                "a snapshot at {s} met an incomplete commit at {}",
                stamp & TS_MASK
            );
            let n = vr.next.load(Acquire);
            if n.is_null() {
                return v;
            }
            v = n;
        }
    }

    /// Push `v` (unlinked, ours) as the newest version with stamp `PENDING`.
    ///
    /// # Safety
    /// The caller holds the lock and owns `v`, of this object's size.
    pub unsafe fn push(&self, v: *mut Version) {
        let old = self.head.load(Relaxed);
        // SAFETY: `v` is ours and not yet reachable.
        unsafe {
            (*v).stamp.store(PENDING, Relaxed);
            (*v).next.store(old, Relaxed);
        }
        // Release: a reader that loads the new head sees header and data.
        self.head.store(v, Release);
    }

    /// Cut below the keeper (newest committed version with `ts ≤ oldest`) and free what
    /// was below; returns how many were freed.
    ///
    /// # Safety
    /// The caller holds the lock; no running or future snapshot is below `oldest`.
    pub unsafe fn truncate(&self, oldest: u64, live: &AtomicU64) -> usize {
        let mut v = self.head.load(Relaxed);
        loop {
            // SAFETY: reachable; only the lock holder frees.
            let vr = unsafe { &*v };
            let older = vr.next.load(Relaxed);
            if older.is_null() {
                return 0;
            }
            if committed(vr.stamp.load(Relaxed)).is_some_and(|ts| ts <= oldest) {
                vr.next.store(std::ptr::null_mut(), Relaxed);
                // SAFETY: unreachable for every reader (module docs).
                return unsafe { Version::free_chain(older, live) };
            }
            v = older;
        }
    }

    /// Versions in the chain (tests and diagnostics; racy without the lock).
    #[cfg(test)]
    pub fn chain_len(&self) -> usize {
        let mut n = 0;
        let mut v = self.head.load(Acquire);
        while !v.is_null() {
            n += 1;
            // SAFETY: diagnostics only, called while no truncation can run.
            v = unsafe { (*v).next.load(Acquire) };
        }
        n
    }

    /// Free the whole chain (index drop).
    ///
    /// # Safety
    /// No thread can reach this entry.
    pub unsafe fn destroy(&mut self, live: &AtomicU64) {
        let head = std::mem::replace(self.head.get_mut(), std::ptr::null_mut());
        // SAFETY: caller.
        unsafe { Version::free_chain(head, live) };
    }
}
