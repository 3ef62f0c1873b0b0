//! Version chains: the committed versions of one object, newest first, and the
//! object's commit lock.
//!
//! # Nodes
//! A [`Version`] is one DRAM allocation: a header (commit timestamp, pointer to the
//! next older version, size) followed by the object's whole payload. A transaction's
//! private copy of an object is a version that is not yet published; at commit it gets
//! its timestamp and becomes the chain's head, so committing copies nothing.
//!
//! # Invariants
//! 1. *Immutable once published.* A published version's timestamp and data never
//!    change; only its `next` pointer does, and only when truncation cuts the chain
//!    below it.
//! 2. *Ordered.* Timestamps strictly decrease along `next` (each version is pushed by
//!    a committer holding the object's lock, with a commit timestamp taken after the
//!    lock, so after every earlier version's timestamp).
//! 3. *Single writer.* Only the holder of the entry's lock ([`Entry::try_lock`]) pushes or truncates; readers
//!    never write.
//! 4. *Never empty.* The head is never null: an entry is created with a first version.
//!
//! # Reclamation
//! Let `oldest` be a lower bound of the start timestamps of all running transactions
//! (and `≤` the start of every transaction that starts later). Every transaction then
//! sees, in this chain, the newest version with `ts ≤ start`, which is the *keeper*
//! (the newest version with `ts ≤ oldest`) or a newer one. (This relies on the blocking
//! read: a transaction that the truncating committer's scan missed has a start at or
//! above the committer's timestamp, and it reads the chain only after
//! [`Entry::wait_unlocked`], so it sees the committer's new version, not an older one
//! that truncation frees. Without the wait it could hold a freed version.) A reader walks from the
//! head and stops at the first version with `ts ≤ start`, so it never loads the
//! keeper's `next` nor visits anything older. [`Entry::truncate`] therefore cuts the
//! chain below the keeper and frees the older versions at once, without a grace
//! period: no reader can be on them or reach them, and no returned pointer points
//! into them (a returned pointer is the reader's visible version: the keeper or newer).
//!
//! A reader that finds no version with `ts ≤ start` (it follows a stale pointer to an
//! object created after its snapshot: a program error, but never undefined behaviour)
//! gets the oldest version. Truncation cannot free it under that reader: the reader's
//! start bounds `oldest` from above, so a keeper would have `ts ≤ start` and the reader
//! would have stopped there; without a keeper nothing is cut.

use crate::sync::spin_step;
use std::alloc::{alloc, alloc_zeroed, dealloc, Layout};
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use std::sync::atomic::{AtomicPtr, AtomicU64};

/// Timestamp of a version that is not published yet (a private copy).
pub const UNPUBLISHED: u64 = u64::MAX;

/// Header of a version; the payload (`words` 8-byte words) follows.
#[repr(C)]
pub struct Version {
    /// Commit timestamp; [`UNPUBLISHED`] for a private copy.
    ts: u64,
    /// Next older version, or null.
    next: AtomicPtr<Version>,
    /// Payload length in words.
    words: usize,
}

const HDR: usize = std::mem::size_of::<Version>();
const _: () = assert!(HDR.is_multiple_of(8));

fn layout(words: usize) -> Layout {
    // Object sizes are bounded by the pool size, far below isize::MAX.
    Layout::from_size_align(HDR + 8 * words, 8).expect("version size overflows")
}

impl Version {
    /// A private copy of `bytes` bytes (a multiple of 8): zeroed, or copied from
    /// `src`. Counts itself in `live`.
    ///
    /// # Safety
    /// `src`, if given, must be valid for reads of `bytes` bytes.
    pub unsafe fn new(bytes: usize, src: Option<*const u8>, live: &AtomicU64) -> *mut Version {
        debug_assert!(bytes.is_multiple_of(8));
        let words = bytes / 8;
        let l = layout(words);
        // SAFETY: `l` has a non-zero size (the header).
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
        // SAFETY: `p` is a fresh allocation of HDR + bytes bytes, 8-aligned; `src` is
        // valid for `bytes` bytes (caller) and cannot overlap a fresh allocation.
        unsafe {
            p.write(Version {
                ts: UNPUBLISHED,
                next: AtomicPtr::new(std::ptr::null_mut()),
                words,
            });
            if let Some(src) = src {
                std::ptr::copy_nonoverlapping(src, Self::data(p), bytes);
            }
        }
        // Relaxed: a statistic, read only by tests and diagnostics.
        live.fetch_add(1, Relaxed);
        p
    }

    /// Pointer to the payload.
    ///
    /// # Safety
    /// `this` must point to a live version.
    #[inline]
    pub unsafe fn data(this: *const Version) -> *mut u8 {
        // SAFETY: the payload follows the header in the same allocation.
        unsafe { (this as *mut u8).add(HDR) }
    }

    /// Free one version.
    ///
    /// # Safety
    /// `this` came from [`Version::new`], is freed once, and no thread can reach it.
    pub unsafe fn free(this: *mut Version, live: &AtomicU64) {
        // SAFETY: caller's contract; the layout is the one it was allocated with.
        unsafe { dealloc(this as *mut u8, layout((*this).words)) };
        // Relaxed: a statistic.
        live.fetch_sub(1, Relaxed);
    }

    /// Free `this` and every older version; returns how many were freed.
    ///
    /// # Safety
    /// As for [`Version::free`], for every version of the chain.
    unsafe fn free_chain(mut this: *mut Version, live: &AtomicU64) -> usize {
        let mut n = 0;
        while !this.is_null() {
            // SAFETY: caller's contract; `next` is read before the node is freed.
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

/// One object of the index: its commit lock and its version chain.
pub struct Entry {
    /// 0 when free, else the committing thread's slot + 1. Held only during a commit.
    lock: AtomicU64,
    /// Timestamp of the last commit that wrote or freed the object (the write-write
    /// conflict check); written only under `lock`.
    last_ts: AtomicU64,
    /// Newest version (never null).
    head: AtomicPtr<Version>,
}

// SAFETY: the versions the entry owns are plain bytes behind raw pointers; all shared
// access goes through the atomics above under the invariants of the module docs.
unsafe impl Send for Entry {}
// SAFETY: as above.
unsafe impl Sync for Entry {}

impl Entry {
    /// An entry whose only version is `first`, published with timestamp 0 (the state
    /// the object had before anything was committed to it in this run).
    ///
    /// # Safety
    /// `first` is an unpublished version owned by the caller.
    pub unsafe fn new(first: *mut Version) -> Entry {
        // SAFETY: caller's contract: nobody else can see `first` yet.
        unsafe { (*first).ts = 0 };
        Entry {
            lock: AtomicU64::new(0),
            last_ts: AtomicU64::new(0),
            head: AtomicPtr::new(first),
        }
    }

    /// Try to take the commit lock for slot `slot` (no waiting: a taken lock aborts
    /// the committer). Acquire: pairs with the previous holder's Release in
    /// [`Entry::unlock`], so we see its pushed version and `last_ts`.
    #[inline]
    pub fn try_lock(&self, slot: usize) -> bool {
        self.lock
            .compare_exchange(0, slot as u64 + 1, Acquire, Relaxed)
            .is_ok()
    }

    /// Release the commit lock. Release: publishes our version push, `last_ts` and
    /// truncation to the next holder and to every reader that waited for us.
    #[inline]
    pub fn unlock(&self) {
        self.lock.store(0, Release);
    }

    /// The strawman's blocking read: wait while a committer holds the lock, since it
    /// may be about to publish a version with a timestamp at or below our start.
    ///
    /// Race closed: a committer takes its locks, then its commit timestamp C with a
    /// Release increment of the clock. A reader whose start timestamp S ≥ C read the
    /// clock with Acquire from that increment or a later one (all increments are RMWs),
    /// so the committer's lock happens-before this load, which therefore sees the lock
    /// or a later value: the unlock (Acquire pairs with its Release: the new version is
    /// visible) or another committer's lock (we wait for that one too). A committer we
    /// do not see gets C > S, and its version is not ours to see.
    #[inline]
    pub fn wait_unlocked(&self) {
        let mut round = 0;
        while self.lock.load(Acquire) != 0 {
            spin_step(&mut round);
        }
    }

    /// The version a transaction started at `start` sees: the newest with
    /// `ts ≤ start` (or the oldest, see the module docs). Call after
    /// [`Entry::wait_unlocked`].
    #[inline]
    pub fn visible(&self, start: u64) -> *const Version {
        // Acquire: pairs with the Release in `push`: the version's header and data.
        let mut v = self.head.load(Acquire);
        loop {
            // SAFETY: `v` is published and not freed: it is the head or a version newer
            // than the keeper (module docs, Reclamation).
            let (ts, next) = unsafe { ((*v).ts, &(*v).next) };
            if ts <= start {
                return v;
            }
            // Acquire: the older version's contents (published before `v` was).
            let n = next.load(Acquire);
            if n.is_null() {
                return v;
            }
            v = n;
        }
    }

    /// Timestamp of the last commit to this object (under the lock).
    #[inline]
    pub fn last_ts(&self) -> u64 {
        // Relaxed: read under the lock, whose Acquire ordered the last holder's store.
        self.last_ts.load(Relaxed)
    }

    /// Record a commit at `ts` that frees the object (no new version). Under the lock.
    #[inline]
    pub fn mark(&self, ts: u64) {
        // Relaxed: published by `unlock`.
        self.last_ts.store(ts, Relaxed);
    }

    /// Publish `v` (an unpublished version) as the newest, with timestamp `ts`. Under
    /// the lock.
    ///
    /// # Safety
    /// `v` is an unpublished version owned by the caller, of this object's size; the
    /// caller holds the lock. Ownership passes to the entry.
    pub unsafe fn push(&self, v: *mut Version, ts: u64) {
        // Relaxed: only lock holders write `head`, and the lock's Acquire ordered us
        // after the previous one.
        let old = self.head.load(Relaxed);
        // SAFETY: `v` is ours and unpublished (caller), so plain writes race with no one.
        unsafe {
            debug_assert!((*old).ts < ts);
            (*v).ts = ts;
            (*v).next.store(old, Relaxed);
        }
        // Release: a reader that loads the new head sees `ts`, `next` and the data.
        self.head.store(v, Release);
        self.mark(ts);
    }

    /// Cut the chain below the keeper, the newest version with `ts ≤ oldest`, and free
    /// what was below it; returns how many versions were freed. Under the lock.
    ///
    /// # Safety
    /// The caller holds the lock, and no running or future transaction has a start
    /// timestamp below `oldest` (module docs).
    pub unsafe fn truncate(&self, oldest: u64, live: &AtomicU64) -> usize {
        // Relaxed: we are the only writer (lock).
        let mut v = self.head.load(Relaxed);
        loop {
            // SAFETY: a version of the chain, not freed (only we free, below).
            let (ts, next) = unsafe { ((*v).ts, &(*v).next) };
            let older = next.load(Relaxed);
            if older.is_null() {
                return 0;
            }
            if ts <= oldest {
                // Relaxed: no reader loads the keeper's `next` (module docs); the
                // versions below are unreachable for everyone from now on.
                next.store(std::ptr::null_mut(), Relaxed);
                // SAFETY: cut off above, unreachable (module docs), owned by the entry.
                return unsafe { Version::free_chain(older, live) };
            }
            v = older;
        }
    }

    /// Free the whole chain (the index is being dropped: no thread uses it).
    ///
    /// # Safety
    /// No thread can reach this entry any more.
    pub unsafe fn destroy(&mut self, live: &AtomicU64) {
        let head = std::mem::replace(self.head.get_mut(), std::ptr::null_mut());
        // SAFETY: caller's contract.
        unsafe { Version::free_chain(head, live) };
    }
}
