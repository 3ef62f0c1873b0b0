//! A reader-writer lock with one reader indicator per thread slot.
//!
//! Readers set their own (cache-padded) indicator and check the writer word; a writer
//! takes the writer word and waits until every other indicator is clear. Readers never
//! write a shared line, so read-only transactions on different threads do not contend.
//!
//! The race it closes is the store-buffering pattern: a reader stores its indicator then
//! loads the writer word, a writer stores the writer word then loads the indicators.
//! All four accesses are SeqCst, so they are totally ordered and at least one side sees
//! the other's store: either the reader sees the writer and backs off, or the writer
//! sees the reader and waits. A reader leaves with a Release store (see `leave_read`).
//!
//! A transaction that keeps losing its upgrade (the writer word was taken each time)
//! falls back: it takes a ticket ([`Gate::enter_fallback`]) and, when its ticket is
//! served, takes the writer word at `begin`, holding no indicator. While any ticket is
//! unserved, upgrades fail, so the writers that may still take the word before it are
//! the ones that checked the tickets before it took its ticket: at most one per slot.

use crate::engine::kit::shared_counts::count_write;
use crate::sync::spin_step;
use crossbeam_utils::CachePadded;
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release, SeqCst};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize};

/// No writer holds the gate.
const NO_WRITER: usize = usize::MAX;

pub(super) struct Gate {
    writer: CachePadded<AtomicUsize>,
    readers: Vec<CachePadded<AtomicBool>>,
    /// Fallback tickets: the next to hand out and the one served (equal: none
    /// pending). Served in order, so no fallback waits for a later one.
    tickets: CachePadded<Tickets>,
}

#[derive(Default)]
struct Tickets {
    next: AtomicU64,
    served: AtomicU64,
}

impl Gate {
    pub(super) fn new(slots: usize) -> Gate {
        Gate {
            writer: CachePadded::new(AtomicUsize::new(NO_WRITER)),
            readers: (0..slots)
                .map(|_| CachePadded::new(AtomicBool::new(false)))
                .collect(),
            tickets: CachePadded::new(Tickets::default()),
        }
    }

    pub(super) fn slots(&self) -> usize {
        self.readers.len()
    }

    /// Whether a writer holds the gate (tests).
    #[cfg(test)]
    pub(super) fn writer_held(&self) -> bool {
        self.writer.load(SeqCst) != NO_WRITER
    }

    /// Enter as a reader: wait while a writer holds the gate. The first try is
    /// inlined; waiting is out of line.
    #[inline]
    pub(super) fn enter_read(&self, slot: usize) {
        self.readers[slot].store(true, SeqCst);
        if self.writer.load(SeqCst) != NO_WRITER {
            self.enter_read_wait(slot);
        }
    }

    #[cold]
    #[inline(never)]
    fn enter_read_wait(&self, slot: usize) {
        let mut round = 0;
        loop {
            // Back off without holding the indicator, so the writer can finish.
            self.readers[slot].store(false, SeqCst);
            while self.writer.load(Relaxed) != NO_WRITER {
                spin_step(&mut round);
            }
            self.readers[slot].store(true, SeqCst);
            if self.writer.load(SeqCst) == NO_WRITER {
                return;
            }
        }
    }

    /// Enter as a reader if no writer holds the gate; `false` (and not inside)
    /// otherwise. The same store-buffering handshake as [`Gate::enter_read`].
    pub(super) fn try_enter_read(&self, slot: usize) -> bool {
        self.readers[slot].store(true, SeqCst);
        if self.writer.load(SeqCst) == NO_WRITER {
            return true;
        }
        self.readers[slot].store(false, SeqCst);
        false
    }

    /// Leave as a reader.
    #[inline]
    pub(super) fn leave_read(&self, slot: usize) {
        // Release: a writer whose scan (a SeqCst load, so also Acquire) reads this
        // `false` sees every read of ours before it, so it writes nothing we read. It
        // needs no place in the SeqCst order: the store-buffering race is between
        // `enter_read` and `upgrade`, whose accesses stay SeqCst. (A writer whose scan
        // still reads `true` waits until it sees this store.)
        self.readers[slot].store(false, Release);
    }

    /// A reader becomes the writer: `false` at once if another thread is the writer
    /// (the caller aborts and retries; waiting here could deadlock with that writer,
    /// which waits for our indicator). Otherwise waits until no other reader is inside.
    ///
    /// Also `false` while a fallback ticket is pending ([`Gate::enter_fallback`]).
    pub(super) fn upgrade(&self, slot: usize) -> bool {
        // SeqCst, before the writer word: either the fallback's ticket (SeqCst
        // `fetch_add`) comes first in the total order and we see it, or this load
        // does and our compare-exchange is one of the at most one per slot that may
        // take the word before the fallback (module docs).
        if self.tickets.next.load(SeqCst) != self.tickets.served.load(SeqCst) {
            return false;
        }
        count_write(&*self.writer);
        if self
            .writer
            .compare_exchange(NO_WRITER, slot, SeqCst, Relaxed)
            .is_err()
        {
            return false;
        }
        self.readers[slot].store(false, SeqCst);
        self.wait_for_readers(slot);
        true
    }

    /// The writer `slot` waits until no other reader is inside.
    fn wait_for_readers(&self, slot: usize) {
        for (i, r) in self.readers.iter().enumerate() {
            if i == slot {
                continue;
            }
            let mut round = 0;
            while r.load(SeqCst) {
                spin_step(&mut round);
            }
        }
    }

    /// Become the writer for a whole attempt, from outside the gate (no indicator
    /// held): take a ticket, wait until it is served, then for the writer word (held
    /// by at most one writer at a time, of which at most one per slot started after
    /// our ticket), then for the readers inside, which never wait for us while
    /// holding their indicator. Ends with [`Gate::leave_fallback`].
    pub(super) fn enter_fallback(&self, slot: usize) {
        count_write(&*self.tickets);
        let ticket = self.tickets.next.fetch_add(1, SeqCst);
        let mut round = 0;
        // Acquire: pairs with the previous holder's Release in `leave_fallback`.
        while self.tickets.served.load(Acquire) != ticket {
            spin_step(&mut round);
        }
        loop {
            count_write(&*self.writer);
            if self
                .writer
                .compare_exchange(NO_WRITER, slot, SeqCst, Relaxed)
                .is_ok()
            {
                break;
            }
            while self.writer.load(Relaxed) != NO_WRITER {
                spin_step(&mut round);
            }
        }
        self.wait_for_readers(slot);
    }

    /// Leave as the writer that [`Gate::enter_fallback`] made, serving the next ticket.
    pub(super) fn leave_fallback(&self) {
        self.leave_write();
        // Release: the next holder (Acquire in `enter_fallback`) starts after our
        // attempt ended. Upgraders need no order from it: they only compare tickets.
        count_write(&*self.tickets);
        self.tickets.served.fetch_add(1, Release);
    }

    /// Leave as the writer.
    pub(super) fn leave_write(&self) {
        // SeqCst: a reader that then enters sees the writer gone together with
        // everything written (pairs with its SeqCst load).
        count_write(&*self.writer);
        self.writer.store(NO_WRITER, SeqCst);
    }
}
