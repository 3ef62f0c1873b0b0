//! The memory of the engine's copies and commit records: the part of the engine's
//! [`Region`] after its placed state, handed out in chunks and addressed by offset
//! from the region's start.
//!
//! A locked header word names the copy that holds its object's new version, and the
//! copy names its writer's commit record. Both names are offsets into the region, not
//! addresses: an offset means the same thing wherever the region is mapped, which is
//! what a copy needs to be found by another process that maps the same memory at
//! another address. In one process it costs one add to decode
//! ([`CopyArena::ptr`]).
//!
//! # Invariants
//! * Chunks start after the region's placed state (the arena seals the region), so
//!   every offset a chunk or a copy has is at least [`CHUNK_BYTES`]: never 0 (the "no
//!   record" of an attempt) and, 8-aligned, never one of the header word's markers.
//! * A run of chunks is handed out to one owner at a time: taken from the free lists
//!   or the untouched end under the arena's lock word, and put back only by its owner.
//! * The free lists are in the region too, in arrays sized for every chunk the
//!   reservation holds: a chunk is in at most one list entry, so they never overflow.
//!
//! # A holder that dies
//! In a pool shared by processes, the holder of the arena's lock may die at any
//! instruction; its recoverer releases the lock ([`CopyArena::release_dead`]) and the
//! arena goes on. What makes that sound: every change of the bookkeeping is made by
//! one store of a count (an entry is written before the count that lists it; a count
//! is lowered before the entry it dropped is overwritten; a compiler fence keeps each
//! pair in that order), so a death leaves no chunk listed twice or listed while
//! owned. A run the dead holder was taking or giving back may be in no list and owned
//! by no one: lost until the pool's next recovery of the whole.

use crate::holder_lock::HolderLock;
use crate::region::{Guarded, InRegion, Placed, Region};
use crate::{Error, Result};
use std::sync::atomic::{compiler_fence, Ordering::SeqCst};
use std::sync::Arc;

crate::mutation::hook_point! {
    /// The copy arena's lock is held in the middle of a change of its free list of
    /// runs: a run given back is written and not yet counted, or a run taken is
    /// uncounted and the last entry not yet moved into its place.
    pub(crate) static ARENA_CHANGING = "arena-changing";
}

/// Bytes of one chunk: the unit an attempt takes its copies' memory in.
pub(crate) const CHUNK_BYTES: usize = 64 << 10;

/// Address space reserved for the engine's region beyond the allocator's state: the
/// most copy memory the engine's attempts can hold at once (every copy of every
/// transaction whose write-back is pending, and of every attempt awaiting its grace
/// period), and the engine's placed state before it. Only what is used is backed by memory; where the system refuses that
/// much address space, less is reserved ([`Region::anonymous`]).
pub(super) const RESERVED_BYTES: usize = 64 << 30;

/// The arena's bookkeeping, in the region, under its lock word.
#[repr(C)]
struct ArenaState {
    lock: HolderLock,
    /// The first chunk never handed out.
    next: Guarded<u64>,
    /// Entries of the single-chunk free list in use.
    singles: Guarded<u64>,
    /// Entries of the free list of longer runs in use.
    runs: Guarded<u64>,
}

// SAFETY: a lock word and integers: zero is a free lock and empty lists, no address,
// no drop, `repr(C)`.
unsafe impl InRegion for ArenaState {}

/// The arena (see the module docs).
pub(crate) struct CopyArena {
    region: Arc<Region>,
    /// The region's base address in this process (what [`CopyArena::ptr`] adds to).
    base: *mut u8,
    state: Placed<ArenaState>,
    /// Single chunks given back, by index.
    singles: Placed<Guarded<u32>>,
    /// Runs of more than one chunk given back: `first chunk << 32 | chunks`.
    runs: Placed<Guarded<u64>>,
}

// SAFETY: `base` is the address of the region, which `region` keeps mapped; every
// access through it follows the arena's and the attempts' ownership rules (module
// docs), whichever thread makes it.
unsafe impl Send for CopyArena {}
// SAFETY: as above.
unsafe impl Sync for CopyArena {}

impl std::fmt::Debug for CopyArena {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CopyArena")
            .field("region", &self.region)
            .finish()
    }
}

impl CopyArena {
    /// The arena of `region`, after what has been placed in it: places its own state,
    /// then seals the region.
    pub(crate) fn new(region: &Arc<Region>) -> Result<CopyArena> {
        let chunks = region.reserved() / CHUNK_BYTES;
        let state = region.place::<ArenaState>(1, |_, _| {})?;
        let singles = region.place::<Guarded<u32>>(chunks, |_, _| {})?;
        let runs = region.place::<Guarded<u64>>(chunks / 2, |_, _| {})?;
        let first = region.seal().div_ceil(CHUNK_BYTES).max(1);
        if region.is_fresh() {
            // SAFETY: not shared yet (a fresh region); the lock is free and no one else
            // knows the state.
            unsafe { *state.one().next.get() = first as u64 };
        }
        Ok(CopyArena {
            base: region.ptr(0),
            region: Arc::clone(region),
            state,
            singles,
            runs,
        })
    }

    /// A region of its own with an arena (tests of the attempts and plans).
    #[cfg(test)]
    pub(crate) fn standalone() -> CopyArena {
        CopyArena::new(&Region::anonymous(1 << 30, 0).unwrap()).unwrap()
    }

    /// The address of arena offset `off`. Inside the arena's memory if `off` is inside a
    /// run the arena handed out.
    #[inline(always)]
    pub(crate) fn ptr(&self, off: u64) -> *mut u8 {
        self.base.wrapping_add(off as usize)
    }

    /// The arena offset of `p`, an address inside the arena's memory (from
    /// [`CopyArena::ptr`]).
    #[inline(always)]
    pub(crate) fn offset_of(&self, p: *const u8) -> u64 {
        self.region.offset_of(p)
    }

    /// How many chunks the arena's mapping holds.
    pub(crate) fn region_chunks(&self) -> usize {
        self.region.reserved() / CHUNK_BYTES
    }

    /// Whether `len` bytes at arena offset `off` are inside the arena's mapping, for a
    /// walk that follows offsets a thread that died may have left half written.
    pub(crate) fn holds(&self, off: u64, len: u64) -> bool {
        off.checked_add(len)
            .is_some_and(|end| end <= self.region.reserved() as u64)
    }

    /// The offset of a run of `n` chunks (`n >= 1`), now owned by the caller; an error
    /// when the reservation is full. `holder` names the calling thread's slot (the lock
    /// word's holder).
    pub(crate) fn take(&self, holder: u32, n: usize) -> Result<u64> {
        let st = self.state.one();
        let _held = st.lock.lock(holder);
        // SAFETY: every `Guarded` access below is made while the arena's lock is held
        // (until the function returns), and no reference outlives it.
        let reused = unsafe {
            if n == 1 {
                let len = &mut *st.singles.get();
                len.checked_sub(1).map(|l| {
                    *len = l;
                    u64::from(*self.singles[l as usize].get())
                })
            } else {
                let len = &mut *st.runs.get();
                (0..*len as usize)
                    .find(|&i| *self.runs[i].get() & 0xFFFF_FFFF == n as u64)
                    .map(|i| {
                        let run = *self.runs[i].get();
                        *len -= 1;
                        // The last entry unlisted before it is copied over entry `i`
                        // (module docs, *A holder that dies*).
                        compiler_fence(SeqCst);
                        crate::mutation::hook!(ARENA_CHANGING, holder as usize);
                        *self.runs[i].get() = *self.runs[*len as usize].get();
                        run >> 32
                    })
            }
        };
        if let Some(c) = reused {
            return Ok(c * CHUNK_BYTES as u64);
        }
        // SAFETY: as above.
        let next = unsafe { &mut *st.next.get() };
        let c = *next as usize;
        let end = c
            .checked_add(n)
            .and_then(|e| e.checked_mul(CHUNK_BYTES))
            .filter(|&e| e <= self.region.reserved())
            .ok_or_else(|| exhausted(n, self.region.reserved()))?;
        self.region.make_usable(end)?;
        *next = (c + n) as u64;
        Ok((c * CHUNK_BYTES) as u64)
    }

    /// Give back the run of `n` chunks at `off` (taken by [`CopyArena::take`]; nothing
    /// reads or writes it any more). A run of several chunks (a large copy) also gives
    /// its memory back to the system: such copies are rare, and their memory would
    /// otherwise stay resident. `holder` as for `take`.
    pub(crate) fn give_back(&self, holder: u32, off: u64, n: usize) {
        let c = off / CHUNK_BYTES as u64;
        if n > 1 {
            // The run is no longer used by anyone (the caller's contract).
            self.region.discard(off, n * CHUNK_BYTES);
        }
        let st = self.state.one();
        let _held = st.lock.lock(holder);
        // SAFETY: the arena's lock is held. A chunk is in at most one entry (it was
        // handed out, and is given back once), so the lists, sized for every chunk of
        // the reservation (a run of several for half as many), have room.
        // Each entry is written before the count that lists it (module docs, *A
        // holder that dies*).
        unsafe {
            if n == 1 {
                let len = &mut *st.singles.get();
                *self.singles[*len as usize].get() = c as u32;
                compiler_fence(SeqCst);
                *len += 1;
            } else {
                let len = &mut *st.runs.get();
                *self.runs[*len as usize].get() = c << 32 | n as u64;
                compiler_fence(SeqCst);
                crate::mutation::hook!(ARENA_CHANGING, holder as usize);
                *len += 1;
            }
        }
    }

    /// Release the arena's lock if `holder`, a thread slot whose process died, holds
    /// it (module docs, *A holder that dies*). The caller is the one recoverer of the
    /// slot.
    pub(crate) fn release_dead(&self, holder: u32) {
        self.state.one().lock.release_dead(holder);
    }
}

/// The error of a full arena.
#[cold]
fn exhausted(n: usize, reserved: usize) -> Error {
    Error::invalid_config(format!(
        "copy memory is exhausted: a copy of {} KiB does not fit in the {} MiB the engine reserves for the copies of pending transactions",
        n.saturating_mul(CHUNK_BYTES) >> 10,
        reserved >> 20
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// More chunks than the region's first usable part holds.
    const MANY: usize = 69;

    #[test]
    fn runs_are_disjoint_usable_and_reused_by_length() {
        let a = CopyArena::standalone();
        let one = a.take(0, 1).unwrap();
        let three = a.take(0, 3).unwrap();
        let big = a.take(0, MANY).unwrap();
        assert!(one >= CHUNK_BYTES as u64, "chunk 0 is never handed out");
        assert!(
            one as usize >= a.region.placed_end(),
            "chunks start after the placed state"
        );
        assert_eq!(three, one + CHUNK_BYTES as u64);
        assert_eq!(big, three + 3 * CHUNK_BYTES as u64);
        // Every byte of every run is writable (the mapping grew past its first part).
        for (off, n) in [(one, 1), (three, 3), (big, MANY)] {
            let p = a.ptr(off);
            // SAFETY: the run is ours and inside the usable mapping.
            unsafe {
                p.write_bytes(0xa5, n * CHUNK_BYTES);
                assert_eq!(*p.add(n * CHUNK_BYTES - 1), 0xa5);
            }
        }
        a.give_back(0, three, 3);
        a.give_back(0, one, 1);
        assert_eq!(a.take(0, 1).unwrap(), one);
        assert_eq!(a.take(0, 3).unwrap(), three);
        // SAFETY: as above; a run given back as several chunks reads as zeroes.
        assert_eq!(unsafe { *a.ptr(three) }, 0);
        assert_eq!(a.take(0, 2).unwrap(), big + ((MANY) * CHUNK_BYTES) as u64);
    }

    #[test]
    fn a_full_arena_is_an_error() {
        let a = CopyArena::standalone();
        let too_many = a.region.reserved() / CHUNK_BYTES;
        assert!(
            matches!(a.take(0, too_many), Err(Error::InvalidConfig(m)) if m.contains("exhausted"))
        );
        assert!(matches!(
            a.take(0, usize::MAX),
            Err(Error::InvalidConfig(_))
        ));
        assert!(a.take(0, 1).is_ok());
    }
}
