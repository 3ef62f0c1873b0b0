//! The write-back plan of a committed transaction, kept in its attempt's arena memory.
//!
//! Built at commit, once the attempt holds every lock it will hold, and read by
//! whichever thread writes the transaction back (its own, or a helper). It names
//! everything by offset (home ranges by pool offset, their sources by arena offset), so
//! a write-back needs from the committed attempt nothing but its arena memory: the
//! groundwork for a write-back performed by another process that maps the same arena.
//!
//! # Layout (8-aligned, in one run of the attempt's chunks)
//! ```text
//! PlanHdr { objects, ranges, allocations, frees }     16 bytes
//! [PlanObject; objects]   header word, unlock value, kind      24 bytes each
//! [HomeRange; ranges]     home offset, source offset, length    24 bytes each
//! ```
//! Space is taken for an upper bound of the ranges before they are computed
//! ([`ranges_bound`]); what the plan does not use stays unused until the attempt is
//! recycled (the plan is the last thing an attempt places).
//!
//! # Invariants
//! * A plan is written only by the committing thread, before the attempt is published
//!   in its slot's batch (under the batch lock, whose release orders it before any
//!   helper's read), and is never written again until the attempt is recycled.
//! * Every range's source lies inside a copy of the same attempt, and every range's
//!   home inside the object the copy belongs to (the copy's `home .. home + len`).

use super::arena::CopyArena;
use crate::engine::kit::write_set::WriteKind;
use crate::heap::alloc::Block;

/// Counts at the start of a plan. (The allocations and frees are among the objects;
/// counted so that the write-back skips the objects' scan for them when there are none,
/// the common case.)
#[repr(C)]
struct PlanHdr {
    objects: u32,
    ranges: u32,
    allocations: u32,
    frees: u32,
}

/// One object of the write set: the header word to unlock, the value to store there,
/// and what the transaction did to its block.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub(crate) struct PlanObject {
    /// Pool offset of the object's header word (its block's start).
    pub header: u64,
    /// The value the write-back stores into the header word (the live marker, or the
    /// freed one for a block the transaction freed).
    pub unlock: u64,
    /// What the transaction does to it ([`kind_word`]).
    kind: u64,
}

const FRESH: u64 = 1;
const FREED: u64 = 2;
const FRESH_FREED: u64 = 3;
const KIND_BITS: u64 = 3;

/// The word that says what a transaction does to the object whose header word is at
/// `header`: the block's size with the kind in its low two bits (block sizes are
/// multiples of 16), 0 for a written object. Copies and plans record it.
#[inline]
pub(crate) fn kind_word(header: u64, kind: WriteKind) -> u64 {
    let (code, b) = match kind {
        WriteKind::Written => return 0,
        WriteKind::Fresh(b) => (FRESH, b),
        WriteKind::Freed(b) => (FREED, b),
        WriteKind::FreshFreed(b) => (FRESH_FREED, b),
    };
    debug_assert!(b.offset == header && b.size & KIND_BITS == 0 && b.size != 0);
    b.size | code
}

/// Whether a [`kind_word`] says the block was allocated and freed again by its
/// transaction (so it was never published, and goes back to the allocator at commit).
#[inline]
pub(crate) fn is_fresh_freed(word: u64) -> bool {
    word & KIND_BITS == FRESH_FREED
}

/// The kind a [`kind_word`] of the object at `header` records.
#[inline]
pub(crate) fn kind_of(header: u64, word: u64) -> WriteKind {
    let b = Block {
        offset: header,
        size: word & !KIND_BITS,
    };
    match word & KIND_BITS {
        FRESH => WriteKind::Fresh(b),
        FREED => WriteKind::Freed(b),
        FRESH_FREED => WriteKind::FreshFreed(b),
        _ => WriteKind::Written,
    }
}

impl PlanObject {
    /// The plan entry of the object whose header word is at `header`, `kind` its
    /// [`kind_word`].
    #[inline]
    pub(crate) fn new(header: u64, unlock: u64, kind: u64) -> PlanObject {
        PlanObject {
            header,
            unlock,
            kind,
        }
    }

    fn block(&self) -> Block {
        Block {
            offset: self.header,
            size: self.kind & !KIND_BITS,
        }
    }

    /// The block the transaction allocated, if it allocated this one and kept it: its
    /// allocation is published by the write-back.
    #[inline]
    pub(crate) fn allocated(&self) -> Option<Block> {
        (self.kind & KIND_BITS == FRESH).then(|| self.block())
    }

    /// The block whose state the write-back publishes, and whether it is now
    /// allocated (`true`) or free: [`Self::allocated`] or [`Self::freed`].
    #[inline]
    pub(crate) fn published(&self) -> Option<(Block, bool)> {
        match self.kind & KIND_BITS {
            FRESH => Some((self.block(), true)),
            FREED => Some((self.block(), false)),
            _ => None,
        }
    }

    /// The block the transaction freed, if it freed this existing one: its free is
    /// published by the write-back, and the block is released after it.
    #[inline]
    pub(crate) fn freed(&self) -> Option<Block> {
        (self.kind & KIND_BITS == FREED).then(|| self.block())
    }
}

/// A byte range to copy home at write-back.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub(crate) struct HomeRange {
    /// Destination (pool offset).
    pub home: u64,
    /// Source: arena offset inside one of the transaction's copies.
    pub src: u64,
    /// Length in bytes.
    pub len: u64,
}

/// An upper bound of the ranges an object of `len` bytes can need: one if written
/// whole; with flush-diff, one per run of changed words, and two runs are separated by
/// at least one unchanged word, so at most `ceil(words / 2)`, which `len / 16 + 1` is
/// not below.
#[inline]
pub(crate) fn ranges_bound(len: usize, flush_diff: bool) -> usize {
    if flush_diff {
        len / 16 + 1
    } else {
        1
    }
}

/// Bytes of a plan of `objects` objects and at most `ranges` ranges.
pub(crate) fn plan_bytes(objects: usize, ranges: usize) -> usize {
    std::mem::size_of::<PlanHdr>()
        + objects * std::mem::size_of::<PlanObject>()
        + ranges * std::mem::size_of::<HomeRange>()
}

/// A plan being written into space taken for it (see [`super::shared::Attempt::start_plan`]).
pub(crate) struct PlanWriter {
    base: *mut u8,
    objects_cap: usize,
    ranges_cap: usize,
    objects: usize,
    ranges: usize,
    allocations: usize,
    frees: usize,
}

impl PlanWriter {
    /// A writer over `plan_bytes(objects_cap, ranges_cap)` bytes at `base`.
    ///
    /// # Safety
    /// `base` is 8-aligned, and those bytes are writable and written by no one else
    /// while the writer lives.
    pub(crate) unsafe fn new(base: *mut u8, objects_cap: usize, ranges_cap: usize) -> PlanWriter {
        PlanWriter {
            base,
            objects_cap,
            ranges_cap,
            objects: 0,
            ranges: 0,
            allocations: 0,
            frees: 0,
        }
    }

    /// Add an object. At most the capacity given at creation (a fault of the caller's
    /// bound otherwise, which would write past the plan's space: refused).
    #[inline]
    pub(crate) fn object(&mut self, o: PlanObject) {
        assert!(
            self.objects < self.objects_cap,
            "plan objects beyond its bound"
        );
        // SAFETY: inside the space (checked just above; `new`'s contract), 8-aligned.
        unsafe {
            (self.base.add(std::mem::size_of::<PlanHdr>()) as *mut PlanObject)
                .add(self.objects)
                .write(o);
        }
        self.objects += 1;
        let code = o.kind & KIND_BITS;
        self.allocations += usize::from(code == FRESH);
        self.frees += usize::from(code == FREED);
    }

    /// Add a range (at most the capacity given at creation, as [`Self::object`]).
    #[inline]
    pub(crate) fn range(&mut self, r: HomeRange) {
        assert!(
            self.ranges < self.ranges_cap,
            "plan ranges beyond its bound"
        );
        // SAFETY: as in `object`.
        unsafe {
            (self.ranges_at() as *mut HomeRange)
                .add(self.ranges)
                .write(r);
        }
        self.ranges += 1;
    }

    fn ranges_at(&self) -> *mut u8 {
        self.base.wrapping_add(
            std::mem::size_of::<PlanHdr>() + self.objects_cap * std::mem::size_of::<PlanObject>(),
        )
    }

    /// Write the counts; returns the bytes the plan uses.
    pub(crate) fn finish(self) -> usize {
        // The reader finds the ranges right after the objects it counts, where they
        // were placed only if every object was written (one per write-set entry).
        assert_eq!(
            self.objects, self.objects_cap,
            "a plan with missing objects"
        );
        // SAFETY: the header is the space's first bytes (`new`'s contract).
        unsafe {
            (self.base as *mut PlanHdr).write(PlanHdr {
                objects: count(self.objects),
                ranges: count(self.ranges),
                allocations: count(self.allocations),
                frees: count(self.frees),
            });
        }
        plan_bytes(self.objects_cap, self.ranges)
    }
}

/// A count of a plan's header. Below 2^32: the plan's space was placed in the arena,
/// whose reservation is far below the 96 GiB that 2^32 entries of 24 bytes take.
const _: () = assert!(super::arena::RESERVED_BYTES < (1 << 32) * std::mem::size_of::<HomeRange>());
#[inline]
fn count(n: usize) -> u32 {
    debug_assert!(u32::try_from(n).is_ok());
    n as u32
}

/// A finished plan, read in place.
pub(crate) struct Plan<'a> {
    pub objects: &'a [PlanObject],
    pub ranges: &'a [HomeRange],
    /// How many objects have a block the transaction allocated, and freed.
    pub allocations: u32,
    pub frees: u32,
}

impl<'a> Plan<'a> {
    /// The plan at arena offset `off`.
    ///
    /// # Safety
    /// `off` is the offset of a plan finished by [`PlanWriter::finish`] whose memory
    /// is neither written nor given back while `'a` lasts.
    #[inline]
    pub(crate) unsafe fn at(arena: &'a CopyArena, off: u64) -> Plan<'a> {
        let base = arena.ptr(off);
        // SAFETY: the caller's contract: a finished plan lies at `base`, its header
        // then `objects` objects then `ranges` ranges, all initialised and 8-aligned.
        unsafe {
            let h = &*(base as *const PlanHdr);
            let objects = base.add(std::mem::size_of::<PlanHdr>()) as *const PlanObject;
            let ranges = objects.add(h.objects as usize) as *const HomeRange;
            Plan {
                objects: std::slice::from_raw_parts(objects, h.objects as usize),
                ranges: std::slice::from_raw_parts(ranges, h.ranges as usize),
                allocations: h.allocations,
                frees: h.frees,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_round_trip_through_the_plan_entry() {
        let b = Block {
            offset: 4096,
            size: 96,
        };
        let o = PlanObject::new(4096, 7, kind_word(4096, WriteKind::Fresh(b)));
        assert_eq!((o.allocated(), o.freed()), (Some(b), None));
        assert_eq!(o.published(), Some((b, true)));
        let o = PlanObject::new(4096, 7, kind_word(4096, WriteKind::Freed(b)));
        assert_eq!((o.allocated(), o.freed()), (None, Some(b)));
        assert_eq!(o.published(), Some((b, false)));
        for k in [WriteKind::Written, WriteKind::FreshFreed(b)] {
            let o = PlanObject::new(4096, 7, kind_word(4096, k));
            assert_eq!(
                (o.allocated(), o.freed(), o.published()),
                (None, None, None),
                "{k:?}"
            );
        }
    }

    #[test]
    fn the_ranges_bound_holds_for_every_pattern_of_changed_words() {
        use crate::engine::kit::changed_words::changed_word_runs;
        // Every pattern of changed words of objects of up to 10 words.
        for words in 1..=10usize {
            for mask in 0u32..(1 << words) {
                let home = vec![0u8; 8 * words];
                let mut copy = home.clone();
                for w in 0..words {
                    if mask & (1 << w) != 0 {
                        copy[8 * w] = 1;
                    }
                }
                let runs = changed_word_runs(&copy, &home).count();
                assert!(
                    runs <= ranges_bound(8 * words, true),
                    "{words} words, mask {mask:#b}: {runs} runs"
                );
            }
        }
    }

    #[test]
    fn a_plan_reads_back_as_written() {
        let arena = CopyArena::standalone();
        let off = arena.take(0, 1).unwrap();
        let b = Block {
            offset: 8192,
            size: 64,
        };
        // SAFETY: a fresh chunk of ours.
        let mut w = unsafe { PlanWriter::new(arena.ptr(off), 2, 3) };
        w.object(PlanObject::new(
            4096,
            1,
            kind_word(4096, WriteKind::Written),
        ));
        w.object(PlanObject::new(
            8192,
            2,
            kind_word(8192, WriteKind::Freed(b)),
        ));
        w.range(HomeRange {
            home: 4104,
            src: 99 << 3,
            len: 16,
        });
        assert_eq!(w.finish(), plan_bytes(2, 1));
        // SAFETY: finished just above, not written again.
        let p = unsafe { Plan::at(&arena, off) };
        assert_eq!(p.objects.len(), 2);
        assert_eq!((p.objects[1].header, p.objects[1].unlock), (8192, 2));
        assert_eq!(p.objects[1].freed(), Some(b));
        assert_eq!((p.allocations, p.frees), (0, 1));
        assert_eq!(p.ranges.len(), 1);
        assert_eq!(
            (p.ranges[0].home, p.ranges[0].src, p.ranges[0].len),
            (4104, 792, 16)
        );
    }

    #[test]
    #[should_panic(expected = "beyond its bound")]
    fn a_range_past_the_bound_is_refused() {
        let arena = CopyArena::standalone();
        let off = arena.take(0, 1).unwrap();
        // SAFETY: a fresh chunk of ours.
        let mut w = unsafe { PlanWriter::new(arena.ptr(off), 0, 1) };
        let r = HomeRange {
            home: 0,
            src: 0,
            len: 8,
        };
        w.range(r);
        w.range(r);
    }
}
