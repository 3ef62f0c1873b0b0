//! DRAM versions of objects and their reclamation.
//!
//! A [`Version`] is one DRAM allocation holding a whole object payload (a multiple of 8
//! bytes), preceded by one header word (its length in words). A transaction writes into
//! a private version; at commit it becomes the object's newest version (the index
//! entry's `ptr`), and from then on it is immutable. Readers read versions only, never
//! the object's home in persistent memory (except to make an object's first version,
//! see [`super::index`]), so a home object being written back can never be seen torn.
//!
//! # Reclamation (epochs on the kit's clock)
//! A version replaced by a newer one may still be read by transactions that loaded the
//! old pointer. The committer puts it in its [`Limbo`]; a full batch is stamped with a
//! clock increment `e` ([`crate::engine::kit::cc::clock::Clock::tick`], once per batch, not
//! per transaction — this is the only shared counter of the engine and it is not a
//! transaction id) and freed once every slot's published start timestamp is `>= e`
//! (or inactive): a transaction that started after the increment loads the entry's
//! pointer after the replacement was stored (the increment is ordered after it), so it
//! cannot hold the old version. The check is a scan, never a wait, except when a thread
//! leaves ([`Limbo::drain_blocking`]).

use crate::engine::kit::cc::clock::{Clock, SlotClock};
use crate::engine::kit::versions::version::{alloc_copy, copy_layout};
use crate::sync::fence;
use std::alloc::dealloc;
use std::sync::atomic::Ordering::SeqCst;

/// A version (opaque: header word + payload words).
pub(crate) struct Version {
    _words: u64,
}

/// Bytes before the payload: the header word (the payload length in words).
const HDR: usize = 8;

impl Version {
    /// A new unpublished version of `bytes` bytes (a multiple of 8): zeroed, or copied
    /// from `src`.
    ///
    /// # Safety
    /// `src`, if given, must be valid for reads of `bytes` bytes.
    pub(crate) unsafe fn new(bytes: usize, src: Option<*const u8>) -> *mut Version {
        // SAFETY: `src` as the caller guarantees.
        let p = unsafe { alloc_copy(HDR, bytes, src) } as *mut u64;
        // SAFETY: a fresh allocation with room for the header word, 8-aligned.
        unsafe { p.write((bytes / 8) as u64) };
        p as *mut Version
    }

    /// The payload.
    ///
    /// # Safety
    /// `this` must be a live version.
    #[inline]
    pub(crate) unsafe fn data(this: *const Version) -> *mut u8 {
        // SAFETY: the payload follows the header word in the same allocation.
        unsafe { (this as *mut u64).add(1) as *mut u8 }
    }

    /// Free a version.
    ///
    /// # Safety
    /// `this` came from [`Version::new`], is freed once, and no thread can reach it.
    pub(crate) unsafe fn free(this: *mut Version) {
        // SAFETY: caller's contract; the layout is the allocation's.
        unsafe {
            let words = *(this as *const u64) as usize;
            dealloc(this as *mut u8, copy_layout(HDR, words));
        }
    }
}

impl crate::engine::kit::write_set::Payload for Version {
    #[inline]
    unsafe fn data(this: *const Version) -> *mut u8 {
        // SAFETY: caller (a live version).
        unsafe { Version::data(this) }
    }
}

/// Versions waiting until no transaction can still read them.
#[derive(Default)]
pub(super) struct Limbo {
    current: Vec<*mut Version>,
    stamped: std::collections::VecDeque<(u64, Vec<*mut Version>)>,
}

/// Versions per stamped batch (one clock increment per batch).
const BATCH: usize = 32;

impl Limbo {
    /// Add a version that no entry points to any more.
    pub(super) fn retire(&mut self, v: *mut Version) {
        self.current.push(v);
    }

    /// Versions not freed yet (tests).
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.current.len() + self.stamped.iter().map(|b| b.1.len()).sum::<usize>()
    }

    /// Stamp a full batch and free every batch no running transaction can read. Call
    /// outside a transaction (the own slot inactive). `slots` gives the slot clocks,
    /// asked for only when there is a batch (finding them costs loads every end of a
    /// transaction would pay).
    #[inline(always)]
    pub(super) fn collect<'a, I: Iterator<Item = &'a SlotClock>>(
        &mut self,
        clock: &Clock,
        slots: impl FnOnce() -> I,
    ) {
        if self.current.len() >= BATCH || !self.stamped.is_empty() {
            self.collect_now(clock, slots());
        }
    }

    /// [`Limbo::collect`] when there is a batch to stamp or to free.
    #[inline(never)]
    fn collect_now<'a>(&mut self, clock: &Clock, slots: impl Iterator<Item = &'a SlotClock>) {
        if self.current.len() >= BATCH {
            let e = clock.tick();
            self.stamped
                .push_back((e, std::mem::take(&mut self.current)));
        }
        let Some(&(first, _)) = self.stamped.front() else {
            return;
        };
        // SeqCst fence: pairs with the one in `SlotClock::start` (a starting reader's
        // STARTING store is seen, or its clock load sees our increment).
        fence(SeqCst);
        let oldest = slots.map(|s| s.load()).min().unwrap_or(u64::MAX);
        if oldest < first {
            return;
        }
        while let Some(&(e, _)) = self.stamped.front() {
            if e > oldest {
                break;
            }
            let (_, batch) = self.stamped.pop_front().expect("front exists");
            for v in batch {
                // SAFETY: unlinked before the increment `e`, and every transaction
                // started at or after `e` or is over (module docs).
                unsafe { Version::free(v) };
            }
        }
    }

    /// Free everything, waiting for the readers that may still hold a version (a
    /// thread leaving).
    pub(super) fn drain_blocking<'a>(
        &mut self,
        clock: &Clock,
        slots: impl Iterator<Item = &'a SlotClock> + Clone,
        own: usize,
    ) {
        if self.current.is_empty() && self.stamped.is_empty() {
            return;
        }
        let e = clock.tick();
        crate::engine::kit::cc::grace::wait_for_readers(slots, own, e);
        for v in self
            .current
            .drain(..)
            .chain(self.stamped.drain(..).flat_map(|b| b.1))
        {
            // SAFETY: every transaction that could read it has ended (grace period).
            unsafe { Version::free(v) };
        }
    }
}
