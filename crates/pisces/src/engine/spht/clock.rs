//! The physical commit clock and the timestamp encoding.
//!
//! # Source
//! * `tsc` (default where the CPU has an invariant TSC, CPUID 0x8000_0007 EDX bit 8):
//!   `rdtscp` followed by `lfence`. `rdtscp` waits for the earlier instructions (the
//!   lock CAS before a commit timestamp) and `lfence` keeps later loads (the stripe and
//!   slot scans) from running ahead of it, so a reading is ordered in real time with the
//!   memory operations around it. The value is shifted right by [`TSC_SHIFT`] (about
//!   5 ns per tick at 3 GHz) to leave room for the slot bits. Assumption (documented,
//!   Linux checks it at boot): the TSCs of all cores are synchronized, so a reading
//!   taken after another in real time is not smaller.
//! * `counter` (fallback, and an option): one shared atomic counter; begin loads it,
//!   commit increments it (TL2's GV1). Same contract, no hardware assumption.
//!
//! # Timestamps
//! A transaction timestamp is `raw << slot_bits | slot`: unique across threads (the
//! slot), strictly increasing per thread (a commit waits until the raw clock passes its
//! previous commit). Unique timestamps make the replay order, the marker and the
//! predecessor search total orders with no ties. `raw` starts each run above every
//! timestamp the pool's logs and markers hold (`base`), so timestamps grow across runs.
//! Timestamps stay below 2^62: the two top bits are the `isPers` / `isUpd` flags of a
//! slot's published word, and bit 63 tells a link from a timestamp in a link slot.

use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::SeqCst;

/// Right shift applied to the TSC.
pub(super) const TSC_SHIFT: u32 = 4;
/// Largest timestamp (exclusive).
pub(super) const TS_LIMIT: u64 = 1 << 62;

/// Which clock the engine reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ClockKind {
    /// `rdtscp` (physical).
    Tsc,
    /// A shared counter (logical).
    Counter,
}

impl ClockKind {
    /// True if the processor has an invariant TSC the engine can use.
    pub(crate) fn tsc_available() -> bool {
        #[cfg(target_arch = "x86_64")]
        {
            let max = core::arch::x86_64::__cpuid(0x8000_0000).eax;
            if max < 0x8000_0007 {
                return false;
            }
            let r = core::arch::x86_64::__cpuid(0x8000_0007);
            r.edx & (1 << 8) != 0
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            false
        }
    }
}

/// The commit clock of one open pool.
#[derive(Debug)]
pub(crate) struct PhysClock {
    kind: ClockKind,
    /// Raw value of the first reading of this run.
    base: u64,
    /// TSC (shifted) at open.
    tsc0: u64,
    counter: AtomicU64,
    slot_bits: u32,
}

#[inline]
fn rdtsc() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        let mut aux = 0u32;
        // SAFETY: rdtscp/lfence have no memory effects; the engine only uses the Tsc
        // kind where `tsc_available` said yes.
        unsafe {
            let t = core::arch::x86_64::__rdtscp(&mut aux);
            core::arch::x86_64::_mm_lfence();
            t >> TSC_SHIFT
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        unreachable!("no TSC on this architecture")
    }
}

/// Low bits of a timestamp that hold its slot, for a pool of `max_threads` slots.
fn slot_bits(max_threads: usize) -> u32 {
    usize::BITS - (max_threads.max(2) - 1).leading_zeros()
}

/// The slot of timestamp `ts` in a pool of `max_threads` slots (what
/// [`PhysClock::slot_of`] answers, without a clock: recovery).
pub(crate) fn slot_of_ts(ts: u64, max_threads: usize) -> usize {
    (ts & ((1u64 << slot_bits(max_threads)) - 1)) as usize
}

impl PhysClock {
    /// A clock for `max_threads` slots whose timestamps are all above `above`.
    pub(crate) fn above(kind: ClockKind, max_threads: usize, above: u64) -> PhysClock {
        PhysClock::new(kind, (above >> slot_bits(max_threads)) + 1, max_threads)
    }

    /// A clock whose raw readings start at `base` (≥ 1), for `max_threads` slots.
    pub(crate) fn new(kind: ClockKind, base: u64, max_threads: usize) -> PhysClock {
        let slot_bits = slot_bits(max_threads);
        let tsc0 = if kind == ClockKind::Tsc { rdtsc() } else { 0 };
        PhysClock {
            kind,
            base: base.max(1),
            tsc0,
            counter: AtomicU64::new(base.max(1)),
            slot_bits,
        }
    }

    /// Bits of the slot number in a timestamp.
    #[cfg(test)]
    pub(crate) fn slot_bits(&self) -> u32 {
        self.slot_bits
    }

    /// A raw reading (begin: the read version; commit: the lower bound). Ordered with
    /// the memory operations around it (see the module docs).
    #[inline]
    pub(crate) fn now(&self) -> u64 {
        match self.kind {
            // Saturating: another core's TSC may be a few ticks behind the one read
            // at open.
            ClockKind::Tsc => rdtsc().saturating_sub(self.tsc0) + self.base,
            // SeqCst: ordered with the slot stores and scans around it.
            ClockKind::Counter => self.counter.load(SeqCst),
        }
    }

    /// A raw commit reading strictly above `above`, taken now (spins on the TSC; the
    /// counter is incremented). The caller holds its write locks.
    #[inline]
    pub(crate) fn commit_raw(&self, above: u64) -> u64 {
        let mut round = 0;
        loop {
            let r = match self.kind {
                ClockKind::Tsc => self.now(),
                ClockKind::Counter => {
                    crate::engine::kit::shared_counts::count_write(&self.counter);
                    self.counter.fetch_add(1, SeqCst) + 1
                }
            };
            if r > above {
                return r;
            }
            if self.kind == ClockKind::Counter {
                // Catch the counter up (versions of an earlier run are below `base`,
                // so this only happens with the TSC).
                crate::engine::kit::shared_counts::count_write(&self.counter);
                self.counter.fetch_max(above, SeqCst);
            }
            crate::sync::spin_step(&mut round);
        }
    }

    /// True if a reader whose read version is `rv` (a [`PhysClock::now`] reading) may
    /// accept a stripe written at raw reading `v`. Counter: `v ≤ rv` (TL2: a load that
    /// returns v follows the increment that produced it, which followed the writer's
    /// locks). TSC: `v < rv` — two equal readings on two cores say nothing about which
    /// came first, so equality is refused (a spurious abort at worst). Reads apply it
    /// through [`PhysClock::stripe_bound`]; this is its definition, which the tests
    /// check that bound against.
    #[cfg(test)]
    pub(crate) fn readable(&self, v: u64, rv: u64) -> bool {
        match self.kind {
            ClockKind::Tsc => v < rv,
            ClockKind::Counter => v <= rv,
        }
    }

    /// The least stripe word a reader whose read version is `rv` refuses: a word `w`
    /// is locked ([`LOCKED`](super::stripes::LOCKED), bit 63) or not
    /// [`readable`](Self::readable) exactly when `w >= stripe_bound(rv)`. Computed once
    /// per transaction, it makes a read's version test one compare. (An unlocked word
    /// is a timestamp `raw << slot_bits | slot`, below 2^62, and `raw < b` exactly when
    /// the timestamp is below `b << slot_bits`.)
    #[inline]
    pub(crate) fn stripe_bound(&self, rv: u64) -> u64 {
        let b = match self.kind {
            ClockKind::Tsc => rv,
            ClockKind::Counter => rv + 1,
        };
        b << self.slot_bits
    }

    /// The timestamp of raw reading `raw` taken by `slot`.
    #[inline]
    pub(crate) fn ts(&self, raw: u64, slot: usize) -> u64 {
        let ts = raw << self.slot_bits | slot as u64;
        assert!(ts < TS_LIMIT, "spht: timestamp space exhausted");
        ts
    }

    /// The raw reading of timestamp `ts`.
    #[inline]
    pub(crate) fn raw(&self, ts: u64) -> u64 {
        ts >> self.slot_bits
    }

    /// The slot of timestamp `ts`.
    #[inline]
    pub(crate) fn slot_of(&self, ts: u64) -> usize {
        (ts & ((1u64 << self.slot_bits) - 1)) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readings_grow_and_timestamps_are_unique() {
        for kind in [ClockKind::Counter, ClockKind::Tsc] {
            if kind == ClockKind::Tsc && !ClockKind::tsc_available() {
                continue;
            }
            let c = PhysClock::new(kind, 100, 8);
            assert_eq!(c.slot_bits(), 3);
            let a = c.now();
            assert!(a >= 100);
            let b = c.commit_raw(a);
            assert!(b > a);
            assert!(c.now() >= b || kind == ClockKind::Counter);
            let t = c.ts(b, 5);
            assert_eq!((c.raw(t), c.slot_of(t)), (b, 5));
            assert!(c.ts(b, 4) < t && t < c.ts(b + 1, 0));
        }
    }

    /// `w >= stripe_bound(rv)` refuses exactly the stripe words that are locked or not
    /// readable at `rv`, for both clocks, around the boundary and with every slot.
    #[test]
    fn the_stripe_bound_refuses_exactly_the_unreadable_words() {
        use crate::engine::spht::stripes::LOCKED;
        for kind in [ClockKind::Counter, ClockKind::Tsc] {
            let c = PhysClock::new(kind, 100, 8);
            for rv in [1u64, 2, 100, 1 << 40] {
                let bound = c.stripe_bound(rv);
                for raw in [rv.saturating_sub(2), rv - 1, rv, rv + 1, rv + 2] {
                    for slot in 0..8 {
                        for lock in [0, LOCKED] {
                            let w = c.ts(raw, slot) | lock;
                            let refused = w & LOCKED != 0 || !c.readable(c.raw(w), rv);
                            assert_eq!(
                                w >= bound,
                                refused,
                                "{kind:?} rv {rv} raw {raw} slot {slot} lock {lock:#x}"
                            );
                        }
                    }
                }
            }
        }
    }
}
