//! A version of an object in DRAM: one allocation holding a small header (a *stamp*,
//! the pointer to the next older version of the same object, the payload length) and a
//! copy of the object's whole payload.
//!
//! The multi-version engines keep an object's versions in a chain ([`super::version_chain`])
//! and give the stamp their own meaning: a commit timestamp, or a state word from which
//! a timestamp is read (see the engine's docs). Here a stamp is just a word, with two
//! fixed points:
//! * a fresh version carries [`UNPUBLISHED`] (it is a transaction's private copy);
//! * the base version a chain starts from carries 0 (the object as found at home).
//!
//! # Invariants (upheld by the chain and its engine)
//! 1. A version's payload never changes once it is reachable from a chain.
//! 2. Its `next` pointer is written by the chain's lock holder only: when it is pushed,
//!    and when truncation cuts the chain below it.
//! 3. A version is freed once, when no thread can reach it (the chain's reclamation).

#[cfg(test)]
use crate::engine::kit::shared_counts::count_write;
use std::alloc::{alloc, alloc_zeroed, dealloc, Layout};
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use std::sync::atomic::{AtomicPtr, AtomicU64};

/// Stamp of a version that no chain holds yet (a private copy).
pub(crate) const UNPUBLISHED: u64 = u64::MAX;

/// Header of a version; the payload (`words` 8-byte words) follows.
#[repr(C)]
pub(crate) struct Version {
    /// The engine's stamp ([`UNPUBLISHED`] for a private copy).
    stamp: AtomicU64,
    /// Next older version, or null.
    next: AtomicPtr<Version>,
    /// Payload length in words.
    words: usize,
}

const HDR: usize = std::mem::size_of::<Version>();
const _: () = assert!(HDR.is_multiple_of(8));

fn layout(words: usize) -> Layout {
    copy_layout(HDR, words)
}

/// The layout of an allocation of `hdr` header bytes followed by a payload of `words`
/// 8-byte words, 8-aligned ([`alloc_copy`]).
#[inline]
pub(crate) fn copy_layout(hdr: usize, words: usize) -> Layout {
    // Object sizes are bounded by the pool size, far below isize::MAX.
    Layout::from_size_align(hdr + 8 * words, 8).expect("version size overflows")
}

/// One allocation of `hdr` header bytes (a multiple of 8, at least 8) followed by a
/// payload of `bytes` bytes (a multiple of 8): the payload zeroed, or copied from
/// `src`; the header is left for the caller to write. The layout is
/// [`copy_layout`]`(hdr, bytes / 8)`, which the caller frees it with.
///
/// # Safety
/// `src`, if given, must be valid for reads of `bytes` bytes.
#[inline]
pub(crate) unsafe fn alloc_copy(hdr: usize, bytes: usize, src: Option<*const u8>) -> *mut u8 {
    debug_assert!(bytes.is_multiple_of(8) && hdr.is_multiple_of(8) && hdr > 0);
    let l = copy_layout(hdr, bytes / 8);
    // SAFETY: `l` has a non-zero size (the header).
    let p = unsafe {
        if src.is_some() {
            alloc(l)
        } else {
            alloc_zeroed(l)
        }
    };
    if p.is_null() {
        std::alloc::handle_alloc_error(l);
    }
    if let Some(src) = src {
        // SAFETY: `p` is a fresh allocation of `hdr + bytes` bytes; `src` is valid for
        // `bytes` bytes (caller) and cannot overlap a fresh allocation.
        unsafe { std::ptr::copy_nonoverlapping(src, p.add(hdr), bytes) };
    }
    p
}

/// The count of versions alive in DRAM (private copies included), which the tests
/// check reclamation by. Counted only in the library's unit tests: elsewhere it is
/// empty and counts nothing, since every version's allocation and free would otherwise
/// be a read-modify-write of one word that every committing thread writes.
#[derive(Debug, Default)]
pub(crate) struct LiveCount {
    #[cfg(test)]
    n: AtomicU64,
}

impl LiveCount {
    #[inline(always)]
    fn add(&self) {
        #[cfg(test)]
        {
            count_write(&self.n);
            // Relaxed: a statistic, read by tests once the threads are joined.
            self.n.fetch_add(1, Relaxed);
        }
    }

    #[inline(always)]
    fn sub(&self) {
        #[cfg(test)]
        {
            count_write(&self.n);
            // Relaxed: as in `add`.
            self.n.fetch_sub(1, Relaxed);
        }
    }

    /// Versions alive now (tests).
    #[cfg(test)]
    pub(crate) fn get(&self) -> u64 {
        self.n.load(Relaxed)
    }
}

impl Version {
    /// A private copy of `bytes` bytes (a multiple of 8): zeroed, or copied from
    /// `src`. Counts itself in `live`.
    ///
    /// # Safety
    /// `src`, if given, must be valid for reads of `bytes` bytes.
    pub(crate) unsafe fn new(
        bytes: usize,
        src: Option<*const u8>,
        live: &LiveCount,
    ) -> *mut Version {
        // SAFETY: `src` as the caller guarantees.
        let p = unsafe { alloc_copy(HDR, bytes, src) } as *mut Version;
        // SAFETY: `p` is a fresh allocation with room for the header, 8-aligned.
        unsafe {
            p.write(Version {
                stamp: AtomicU64::new(UNPUBLISHED),
                next: AtomicPtr::new(std::ptr::null_mut()),
                words: bytes / 8,
            })
        };
        live.add();
        p
    }

    /// A private copy of the first `bytes` bytes (a multiple of 8) of the payload of
    /// `src`: the copy-on-write of a transaction's first write. Counts itself in `live`.
    ///
    /// # Safety
    /// `src` must point to a live version of at least `bytes` bytes.
    #[inline]
    pub(crate) unsafe fn copy_of(
        src: *const Version,
        bytes: usize,
        live: &LiveCount,
    ) -> *mut Version {
        // SAFETY: the payload of a live version of at least `bytes` bytes (caller).
        unsafe { Self::new(bytes, Some(Self::data(src)), live) }
    }

    /// Pointer to the payload.
    ///
    /// # Safety
    /// `this` must point to a live version.
    #[inline]
    pub(crate) unsafe fn data(this: *const Version) -> *mut u8 {
        // SAFETY: the payload follows the header in the same allocation.
        unsafe { (this as *mut u8).add(HDR) }
    }

    /// Payload length in bytes.
    ///
    /// # Safety
    /// `this` must point to a live version.
    #[inline]
    pub(crate) unsafe fn len(this: *const Version) -> usize {
        // SAFETY: caller.
        unsafe { (*this).words * 8 }
    }

    /// The stamp. Acquire: pairs with [`Version::set_stamp`] — a reader that sees a
    /// stamp sees what its writer did before storing it.
    ///
    /// # Safety
    /// `this` must point to a live version.
    #[inline]
    pub(crate) unsafe fn stamp(this: *const Version) -> u64 {
        // SAFETY: caller.
        unsafe { (*this).stamp.load(Acquire) }
    }

    /// Set the stamp. Release: see [`Version::stamp`].
    ///
    /// # Safety
    /// `this` is live and the caller is the one thread allowed to change its stamp
    /// (its owner while private, its committer once pushed).
    #[inline]
    pub(crate) unsafe fn set_stamp(this: *const Version, s: u64) {
        // SAFETY: caller.
        unsafe { (*this).stamp.store(s, Release) };
    }

    /// The next older version (null at the end). Acquire: pairs with the Release that
    /// published this version, which follows the older one's publication.
    ///
    /// # Safety
    /// `this` must point to a live version.
    #[inline]
    pub(super) unsafe fn next(this: *const Version) -> *mut Version {
        // SAFETY: caller.
        unsafe { (*this).next.load(Acquire) }
    }

    /// Link `next` below this version (the chain's lock holder, before publishing it or
    /// when cutting the chain).
    ///
    /// # Safety
    /// As for [`Version::set_stamp`].
    #[inline]
    pub(super) unsafe fn set_next(this: *const Version, next: *mut Version) {
        // Relaxed: published by the Release that makes this version reachable, or (a
        // cut) read by nobody (see the chain's reclamation argument).
        // SAFETY: caller.
        unsafe { (*this).next.store(next, Relaxed) };
    }

    /// Free one version.
    ///
    /// # Safety
    /// `this` came from [`Version::new`], is freed once, and no thread can reach it.
    pub(crate) unsafe fn free(this: *mut Version, live: &LiveCount) {
        // SAFETY: caller's contract; the layout is the one it was allocated with.
        unsafe { dealloc(this as *mut u8, layout((*this).words)) };
        live.sub();
    }

    /// Free `this` and every older version; returns how many were freed.
    ///
    /// # Safety
    /// As for [`Version::free`], for every version of the chain.
    pub(super) unsafe fn free_chain(mut this: *mut Version, live: &LiveCount) -> usize {
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

impl crate::engine::kit::write_set::Payload for Version {
    #[inline]
    unsafe fn data(this: *const Version) -> *mut u8 {
        // SAFETY: caller (a live version).
        unsafe { Version::data(this) }
    }
}
