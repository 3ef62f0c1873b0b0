//! An object's version chain: its [`Version`]s in DRAM, newest first, with the
//! object's commit lock and the timestamp of its last commit.
//!
//! The multi-version engines (`mvcc`, `timestone`) share this structure and differ in
//! what a version's stamp means. Every operation that depends on it takes a
//! `committed` function that reads a stamp: `Some(ts)` for a version committed at
//! `ts`, `None` for one that does not count (yet, or ever). An engine whose chains only
//! ever hold committed versions passes `Some`.
//!
//! # Invariants (the engine upholds them; its docs prove them)
//! 1. *Never empty.* A chain starts with a base version stamped 0 (the object as found
//!    at home) and only grows at the head or is cut below a version.
//! 2. *Single writer.* Only the holder of the lock ([`Chain::try_lock`]) pushes, cuts,
//!    or records a commit ([`Chain::mark`]); readers write nothing.
//! 3. *Ordered.* Committed timestamps strictly decrease along the chain (each push is
//!    made under the lock by a committer whose timestamp is taken after it locked);
//!    versions that do not count may sit in between.
//!
//! # Reclamation
//! [`Chain::truncate`] cuts the chain below the *keeper*, the newest committed version
//! with `ts ≤ oldest`, and frees what was below at once. It is sound when `oldest` is
//! at or below every snapshot that is running or will start, and readers stop at the
//! first committed version at or below their snapshot ([`Chain::visible`]): then no
//! reader goes below the keeper or holds a pointer into what is freed. How `oldest` is
//! computed, and why a reader that the computation missed still stops at or above the
//! keeper, is each engine's argument.

use super::version::{LiveCount, Version};
use crate::engine::kit::shared_counts::count_write;
use crate::sync::spin_step;
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use std::sync::atomic::{AtomicPtr, AtomicU64};

/// One object: its commit lock, its last commit timestamp and its version chain.
pub(crate) struct Chain {
    /// 0 when free, else the committing thread's slot + 1. Held only during a commit.
    lock: AtomicU64,
    /// Timestamp of the last commit that wrote or freed the object (the write-write
    /// conflict check); written only under `lock`.
    last_ts: AtomicU64,
    /// Newest version (never null).
    head: AtomicPtr<Version>,
}

// SAFETY: the versions the chain owns are plain bytes behind raw pointers; all shared
// access goes through the atomics above under the invariants of the module docs.
unsafe impl Send for Chain {}
// SAFETY: as above.
unsafe impl Sync for Chain {}

impl Chain {
    /// A chain whose only version is `first`, stamped 0 (the state the object had
    /// before anything was committed to it in this run).
    ///
    /// # Safety
    /// `first` is an unpublished version owned by the caller; ownership passes to the
    /// chain.
    pub(crate) unsafe fn new(first: *mut Version) -> Chain {
        // SAFETY: caller's contract: nobody else can see `first` yet.
        unsafe { Version::set_stamp(first, 0) };
        Chain {
            lock: AtomicU64::new(0),
            last_ts: AtomicU64::new(0),
            head: AtomicPtr::new(first),
        }
    }

    /// Try to take the commit lock for slot `slot` (no waiting: a taken lock is a
    /// conflict). Acquire: pairs with the previous holder's Release in
    /// [`Chain::unlock`], so we see its pushed version and `last_ts`.
    #[inline]
    pub(crate) fn try_lock(&self, slot: usize) -> bool {
        count_write(&self.lock);
        self.lock
            .compare_exchange(0, slot as u64 + 1, Acquire, Relaxed)
            .is_ok()
    }

    /// Release the commit lock. Release: publishes our push, stamps, `last_ts` and cut
    /// to the next holder and to every reader that observes the lock free.
    #[inline]
    pub(crate) fn unlock(&self) {
        count_write(&self.lock);
        self.lock.store(0, Release);
    }

    /// True if a committer other than `slot` holds the lock. Acquire: after seeing it
    /// free, the last holder's `last_ts` is visible.
    #[inline]
    pub(crate) fn locked_by_other(&self, slot: usize) -> bool {
        let l = self.lock.load(Acquire);
        l != 0 && l != slot as u64 + 1
    }

    /// Wait while a committer holds the lock (for engines whose readers must not miss
    /// a commit in flight; the engine says why that is enough). Acquire: after it, the
    /// last holder's push is visible.
    #[inline]
    pub(crate) fn wait_unlocked(&self) {
        let mut round = 0;
        while self.lock.load(Acquire) != 0 {
            spin_step(&mut round);
        }
    }

    /// Timestamp of the last commit that wrote or freed the object. Acquire: pairs
    /// with [`Chain::mark`], for readers that check it without the lock.
    #[inline]
    pub(crate) fn last_ts(&self) -> u64 {
        self.last_ts.load(Acquire)
    }

    /// Record a commit at `ts` (under the lock).
    #[inline]
    pub(crate) fn mark(&self, ts: u64) {
        count_write(&self.last_ts);
        self.last_ts.store(ts, Release);
    }

    /// Push `v` (an unpublished version owned by the caller, of this object's size) as
    /// the newest version, with stamp `stamp`. Ownership passes to the chain.
    ///
    /// # Safety
    /// The caller holds the lock and owns `v`.
    pub(crate) unsafe fn push(&self, v: *mut Version, stamp: u64) {
        // Relaxed: only lock holders write `head`, and the lock's Acquire ordered us
        // after the previous one.
        let old = self.head.load(Relaxed);
        // SAFETY: `v` is ours and unpublished (caller).
        unsafe {
            Version::set_stamp(v, stamp);
            Version::set_next(v, old);
        }
        // Release: a reader that loads the new head sees its stamp, `next` and data.
        count_write(&self.head);
        self.head.store(v, Release);
    }

    /// The newest version committed at or below `s` (by `committed`), or the oldest
    /// version if none is (a stale pointer to an object created after the snapshot: a
    /// program error, never undefined behaviour). Never waits.
    #[inline]
    pub(crate) fn visible(&self, s: u64, committed: impl Fn(u64) -> Option<u64>) -> *const Version {
        // Acquire: pairs with the Release in `push`: the version's header and data.
        let mut v = self.head.load(Acquire);
        loop {
            // SAFETY: `v` is the head or a version above the keeper, not freed (module
            // docs, Reclamation).
            let stamp = unsafe { Version::stamp(v) };
            if committed(stamp).is_some_and(|ts| ts <= s) {
                return v;
            }
            // SAFETY: as above.
            let n = unsafe { Version::next(v) };
            if n.is_null() {
                return v;
            }
            v = n;
        }
    }

    /// The newest version whatever its stamp (diagnostics, mutation tests).
    #[inline]
    pub(crate) fn head(&self) -> *const Version {
        self.head.load(Acquire)
    }

    /// Cut the chain below the keeper (the newest version committed at or below
    /// `oldest`) and free what was below it; returns how many versions were freed.
    ///
    /// # Safety
    /// The caller holds the lock, and no running or future snapshot is below `oldest`
    /// (module docs, Reclamation).
    pub(crate) unsafe fn truncate(
        &self,
        oldest: u64,
        live: &LiveCount,
        committed: impl Fn(u64) -> Option<u64>,
    ) -> usize {
        // Relaxed: we are the only writer (lock).
        let mut v = self.head.load(Relaxed);
        loop {
            // SAFETY: a version of the chain, not freed (only we free, below).
            let (stamp, older) = unsafe { (Version::stamp(v), Version::next(v)) };
            if older.is_null() {
                return 0;
            }
            if committed(stamp).is_some_and(|ts| ts <= oldest) {
                // SAFETY: we hold the lock; no reader loads the keeper's `next`
                // (module docs), so the versions below are unreachable from now on and
                // owned by the chain.
                unsafe {
                    // The keeper's header word: another committer may have written it.
                    count_write(&*v);
                    Version::set_next(v, std::ptr::null_mut());
                    return Version::free_chain(older, live);
                }
            }
            v = older;
        }
    }

    /// Versions in the chain (tests; racy without the lock).
    #[cfg(test)]
    pub(crate) fn versions(&self) -> usize {
        let mut n = 0;
        let mut v = self.head.load(Acquire);
        while !v.is_null() {
            n += 1;
            // SAFETY: diagnostics only, called while no truncation can run.
            v = unsafe { Version::next(v) };
        }
        n
    }

    /// Free the whole chain (the index is being dropped).
    ///
    /// # Safety
    /// No thread can reach this chain any more.
    pub(crate) unsafe fn destroy(&mut self, live: &LiveCount) {
        let head = std::mem::replace(self.head.get_mut(), std::ptr::null_mut());
        // SAFETY: caller's contract.
        unsafe { Version::free_chain(head, live) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn version(live: &LiveCount, v: u64) -> *mut Version {
        // SAFETY: 8 bytes from a live u64.
        unsafe { Version::new(8, Some(&v as *const u64 as *const u8), live) }
    }

    fn value(v: *const Version) -> u64 {
        // SAFETY: live versions of 8 bytes in these tests.
        unsafe { *(Version::data(v) as *const u64) }
    }

    #[test]
    fn visible_and_truncate_follow_the_committed_function() {
        let live = LiveCount::default();
        // Stamps above 1000 do not count, in this test's meaning.
        let committed = |s: u64| (s < 1000).then_some(s);
        // SAFETY: test-owned versions; this thread is the only "lock holder".
        let mut c = unsafe {
            let c = Chain::new(version(&live, 100));
            for (val, stamp) in [(1, 5), (2, 2000), (3, 9), (4, 12)] {
                c.push(version(&live, val), stamp);
            }
            c
        };
        assert_eq!(c.versions(), 5);
        assert_eq!(value(c.visible(100, committed)), 4);
        assert_eq!(value(c.visible(11, committed)), 3);
        assert_eq!(value(c.visible(8, committed)), 1);
        assert_eq!(value(c.visible(4, committed)), 100);
        // The keeper for 10 is the version at 9: the uncounted one below it, the one at
        // 5 and the base go.
        // SAFETY: single-threaded test.
        assert_eq!(unsafe { c.truncate(10, &live, committed) }, 3);
        assert_eq!(c.versions(), 2);
        assert_eq!(value(c.visible(10, committed)), 3);
        // Nothing below the keeper any more: a snapshot below it gets the oldest.
        assert_eq!(value(c.visible(4, committed)), 3);
        // SAFETY: test-owned.
        unsafe { c.destroy(&live) };
        assert_eq!(live.get(), 0);
    }

    #[test]
    fn the_lock_is_held_by_one_slot() {
        let live = LiveCount::default();
        // SAFETY: a fresh version.
        let mut c = unsafe { Chain::new(version(&live, 0)) };
        assert!(c.try_lock(3));
        assert!(!c.try_lock(4));
        assert!(c.locked_by_other(4) && !c.locked_by_other(3));
        c.mark(7);
        c.unlock();
        c.wait_unlocked();
        assert_eq!(c.last_ts(), 7);
        assert!(!c.locked_by_other(4));
        // SAFETY: test-owned.
        unsafe { c.destroy(&live) };
    }
}
