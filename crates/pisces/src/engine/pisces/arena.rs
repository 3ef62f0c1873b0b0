//! The memory of the engine's copies and commit records: one reservation of address
//! space, handed out in chunks and addressed by offset from its start.
//!
//! A locked header word names the copy that holds its object's new version, and the
//! copy names its writer's commit record. Both names are offsets into this arena, not
//! addresses: an offset means the same thing wherever the arena is mapped, which is
//! what a copy needs to be found by another process that maps the same memory at
//! another address. In one process it costs one add to decode
//! ([`CopyArena::ptr`]).
//!
//! # Invariants
//! * The arena's memory is a [`Mapping`] of anonymous memory: `base .. base + len` is
//!   readable and writable from the arena's creation to its drop and never moves; the
//!   usable length only grows (under the mapping's lock), so a pointer made from an
//!   offset the arena handed out stays valid as long as the arena lives.
//! * Chunk 0 is never handed out: every offset a chunk or a copy has is at least
//!   [`CHUNK_BYTES`], so never 0 (the "no record" of an attempt) and, 8-aligned, never
//!   one of the header word's markers.
//! * A run of chunks is handed out to one owner at a time: taken from the free lists
//!   or the untouched end under the arena's lock, and put back only by its owner.

use crate::medium::reserve::{Backing, Mapping};
use crate::{Error, Result};
use std::collections::BTreeMap;
use std::sync::Mutex;

/// Bytes of one chunk: the unit an attempt takes its copies' memory in.
pub(crate) const CHUNK_BYTES: usize = 64 << 10;

/// Address space reserved for the arena: the most copy memory the engine's attempts
/// can hold at once (every copy of every transaction whose write-back is pending, and
/// of every attempt awaiting its grace period). Only what is used is backed by memory.
/// Where the system refuses that much address space (an address-space limit, a
/// process under valgrind), a quarter of it is tried, down to [`MIN_RESERVED_BYTES`].
pub(super) const RESERVED_BYTES: usize = 64 << 30;
const MIN_RESERVED_BYTES: usize = 256 << 20;

/// How much of the reservation is made usable at a time.
const GROW_BYTES: usize = 4 << 20;

/// The arena (see the module docs).
pub(crate) struct CopyArena {
    map: Mapping,
    /// Chunks handed out never or given back.
    state: Mutex<Free>,
}

#[derive(Default)]
struct Free {
    /// The first chunk never handed out.
    next: usize,
    /// Single chunks given back.
    chunks: Vec<usize>,
    /// Runs of more than one chunk given back, by length.
    runs: BTreeMap<usize, Vec<usize>>,
}

impl std::fmt::Debug for CopyArena {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CopyArena").field("map", &self.map).finish()
    }
}

impl CopyArena {
    /// An empty arena.
    pub(crate) fn new() -> Result<CopyArena> {
        let mut reserve = RESERVED_BYTES;
        let map = loop {
            match Mapping::new_raw(None, GROW_BYTES, reserve, Backing::Anonymous) {
                Ok(m) => break m,
                Err(_) if reserve > MIN_RESERVED_BYTES => reserve /= 4,
                Err(e) => return Err(Error::io("reserving address space for copies", e)),
            }
        };
        Ok(CopyArena {
            map,
            state: Mutex::new(Free {
                next: 1,
                ..Free::default()
            }),
        })
    }

    /// The address of arena offset `off`. Inside the arena's memory if `off` is inside a
    /// run the arena handed out.
    #[inline(always)]
    pub(crate) fn ptr(&self, off: u64) -> *mut u8 {
        self.map.base().wrapping_add(off as usize)
    }

    /// The arena offset of `p`, an address inside the arena's memory (from
    /// [`CopyArena::ptr`]).
    #[inline(always)]
    pub(crate) fn offset_of(&self, p: *const u8) -> u64 {
        debug_assert!(p as usize >= self.map.base() as usize);
        (p as usize - self.map.base() as usize) as u64
    }

    /// The offset of a run of `n` chunks (`n >= 1`), now owned by the caller; an error
    /// when the reservation is full.
    pub(crate) fn take(&self, n: usize) -> Result<u64> {
        let mut f = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let reused = if n == 1 {
            f.chunks.pop()
        } else {
            f.runs.get_mut(&n).and_then(|v| v.pop())
        };
        if let Some(c) = reused {
            return Ok((c * CHUNK_BYTES) as u64);
        }
        let c = f.next;
        let end = c
            .checked_add(n)
            .and_then(|e| e.checked_mul(CHUNK_BYTES))
            .filter(|&e| e <= self.map.reserved())
            .ok_or_else(|| exhausted(n, self.map.reserved()))?;
        if end > self.map.len() {
            let to = end.next_multiple_of(GROW_BYTES).min(self.map.reserved());
            self.map
                .extend(None, to)
                .map_err(|e| Error::io("making copy memory usable", e))?;
        }
        f.next = c + n;
        Ok((c * CHUNK_BYTES) as u64)
    }

    /// Give back the run of `n` chunks at `off` (taken by [`CopyArena::take`]; nothing
    /// reads or writes it any more). A run of several chunks (a large copy) also gives
    /// its memory back to the system: such copies are rare, and their memory would
    /// otherwise stay resident.
    pub(crate) fn give_back(&self, off: u64, n: usize) {
        let c = off as usize / CHUNK_BYTES;
        if n > 1 {
            // SAFETY: the run is inside the usable part of our anonymous mapping and
            // no longer used by anyone (the caller's contract); MADV_DONTNEED on
            // private anonymous memory only replaces its pages with zero pages.
            unsafe {
                libc::madvise(self.ptr(off).cast(), n * CHUNK_BYTES, libc::MADV_DONTNEED);
            }
        }
        let mut f = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if n == 1 {
            f.chunks.push(c);
        } else {
            f.runs.entry(n).or_default().push(c);
        }
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

    #[test]
    fn runs_are_disjoint_usable_and_reused_by_length() {
        let a = CopyArena::new().unwrap();
        let one = a.take(1).unwrap();
        let three = a.take(3).unwrap();
        let big = a.take(GROW_BYTES / CHUNK_BYTES + 5).unwrap();
        assert!(one >= CHUNK_BYTES as u64, "chunk 0 is never handed out");
        assert_eq!(three, one + CHUNK_BYTES as u64);
        assert_eq!(big, three + 3 * CHUNK_BYTES as u64);
        // Every byte of every run is writable (the mapping grew past its first part).
        for (off, n) in [(one, 1), (three, 3), (big, GROW_BYTES / CHUNK_BYTES + 5)] {
            let p = a.ptr(off);
            // SAFETY: the run is ours and inside the usable mapping.
            unsafe {
                p.write_bytes(0xa5, n * CHUNK_BYTES);
                assert_eq!(*p.add(n * CHUNK_BYTES - 1), 0xa5);
            }
        }
        a.give_back(three, 3);
        a.give_back(one, 1);
        assert_eq!(a.take(1).unwrap(), one);
        assert_eq!(a.take(3).unwrap(), three);
        // SAFETY: as above; a run given back as several chunks reads as zeroes.
        assert_eq!(unsafe { *a.ptr(three) }, 0);
        assert_eq!(
            a.take(2).unwrap(),
            big + ((GROW_BYTES / CHUNK_BYTES + 5) * CHUNK_BYTES) as u64
        );
    }

    #[test]
    fn a_full_arena_is_an_error() {
        let a = CopyArena::new().unwrap();
        let too_many = a.map.reserved() / CHUNK_BYTES;
        assert!(
            matches!(a.take(too_many), Err(Error::InvalidConfig(m)) if m.contains("exhausted"))
        );
        assert!(matches!(a.take(usize::MAX), Err(Error::InvalidConfig(_))));
        assert!(a.take(1).is_ok());
    }
}
