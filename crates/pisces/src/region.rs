//! One mapping for the volatile state that the threads of a pool share: an engine's
//! slot table, attempt tables, batches, clock and copies, placed at fixed offsets and
//! reached from each process through its own [`Placed`] views.
//!
//! Why one mapping: state that another process must reach can be neither in the heap
//! of the process that made it nor found through its addresses. A [`Region`] is a
//! mapping whose contents name each other by offset only, so that another process
//! mapping the same memory at another address finds the same state; a [`Placed`] is
//! this process's view of values placed in it (an address and a count), kept in
//! process memory beside the state it describes.
//!
//! # Placing
//! Values are placed one array at a time ([`Region::place`]) at increasing offsets,
//! each aligned for its type, in memory that starts zeroed. A type may be placed only
//! if it says it can live there ([`InRegion`]): all-zero bytes are one of its values,
//! and it holds no address of process memory. Placement is deterministic: the same
//! sequence of placements on a region of the same size gives the same offsets, which
//! is what lets a process that did not place the state find it.
//!
//! # Invariants
//! * `base .. base + reserved` is the region's reservation; `base .. base + len` is
//!   mapped, readable and writable, from the region's creation to its drop, and never
//!   moves ([`Mapping`]). Every [`Placed`] holds the region (an `Arc`), so its memory
//!   outlives every view.
//! * Placed arrays never overlap: the cursor only moves forward, under its lock. What
//!   lies after the last placement ([`Region::placed_end`]) belongs to the user of the
//!   region that seals it ([`Region::seal`]), after which nothing more is placed.

use crate::medium::reserve::{Backing, Mapping};
use crate::{Error, Result};
use std::cell::UnsafeCell;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU32, AtomicU64};
use std::sync::{Arc, Mutex};

/// Types whose values may live in a [`Region`].
///
/// # Safety
/// An implementor promises that:
/// * the all-zero byte pattern is a valid value (placed memory starts zeroed, and
///   values are placed without being constructed, then initialised in place);
/// * a value holds no address of process memory: plain data, atomics, and offsets
///   only (another process maps the region at another address);
/// * a value needs no drop (the region is unmapped without dropping what it holds);
/// * its layout is fixed by `#[repr(C)]` or `#[repr(transparent)]` (another build of
///   the library may map the same region).
pub(crate) unsafe trait InRegion {}

// SAFETY: integers and atomics: zero is a value, no address, no drop, a fixed layout.
unsafe impl InRegion for u32 {}
// SAFETY: as above.
unsafe impl InRegion for u64 {}
// SAFETY: as above.
unsafe impl InRegion for AtomicU32 {}
// SAFETY: as above.
unsafe impl InRegion for AtomicU64 {}
// SAFETY: as above.
unsafe impl InRegion for AtomicI64 {}
// SAFETY: as above (the zero byte is `false`).
unsafe impl InRegion for AtomicBool {}
// SAFETY: a tuple of two `u64` holds what they hold (layout: 16 bytes, no padding,
// which the region's users rely on only through `size_of`).
unsafe impl InRegion for (u64, u64) {}
// SAFETY: an array of values that may live in a region.
unsafe impl<T: InRegion, const N: usize> InRegion for [T; N] {}

/// A value reached only while a lock that guards it is held (an array of them is a
/// buffer behind a region lock): what lets such a value be written through a shared
/// view.
#[repr(transparent)]
pub(crate) struct Guarded<T>(UnsafeCell<T>);

// SAFETY: `UnsafeCell<T>` has `T`'s layout and zero bytes; it adds nothing else.
unsafe impl<T: InRegion> InRegion for Guarded<T> {}

// SAFETY: every access goes through `Guarded::get`, whose callers must hold the lock
// that guards the value: threads reach it one at a time, ordered by that lock.
unsafe impl<T: Send> Sync for Guarded<T> {}

impl<T> Guarded<T> {
    /// The value's address.
    ///
    /// # Safety
    /// The caller holds the lock that guards the value for as long as it uses what the
    /// pointer reaches, and makes no reference that outlives it.
    #[inline(always)]
    pub(crate) unsafe fn get(&self) -> *mut T {
        self.0.get()
    }
}

/// The least address space [`Region::anonymous`] reserves.
pub(crate) const MIN_RESERVED_BYTES: usize = 256 << 20;

/// How much of the reservation is made usable at a time.
const GROW_BYTES: usize = 4 << 20;

/// A mapping that holds shared state by offset (module docs).
pub(crate) struct Region {
    map: Mapping,
    /// The first byte no placement has used, and whether the region is sealed.
    cursor: Mutex<(usize, bool)>,
    /// The region's memory is new (zeroed, and this process places and initialises
    /// its state), not state another process placed and initialised already, which
    /// placements here only find.
    fresh: bool,
    /// The file behind the mapping, if any (a sidecar shared with other processes).
    file: Option<std::fs::File>,
}

impl std::fmt::Debug for Region {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Region").field("map", &self.map).finish()
    }
}

impl Region {
    /// A region of process-private memory: `reserve` bytes of address space (at least
    /// [`MIN_RESERVED_BYTES`]), or a quarter of it as many times as the system refuses
    /// (an address-space limit, a process under valgrind), down to `need` bytes or
    /// [`MIN_RESERVED_BYTES`], whichever is larger. `need`: what the region's
    /// placements take (see [`bytes_for`]), which must fit whatever the system allows;
    /// an error names it when even that much is refused.
    pub(crate) fn anonymous(reserve: usize, need: usize) -> Result<Arc<Region>> {
        let floor = need.max(MIN_RESERVED_BYTES);
        let mut reserve = reserve.max(floor);
        let map = loop {
            match Mapping::new_raw(None, GROW_BYTES, reserve, Backing::Anonymous) {
                Ok(m) => break m,
                Err(_) if reserve > floor => reserve = (reserve / 4).max(floor),
                Err(e) => {
                    return Err(Error::io(
                        format!(
                            "reserving {} MiB of address space for shared state",
                            reserve.div_ceil(1 << 20)
                        ),
                        e,
                    ))
                }
            }
        };
        Ok(Arc::new(Region {
            map,
            cursor: Mutex::new((0, false)),
            fresh: true,
            file: None,
        }))
    }

    /// A region over all of `file`, mapped shared: other processes that map the file
    /// see the same state. `fresh`: the file is new (zeroed; this process places and
    /// initialises the state), else its state was placed by another process and
    /// placements find it ([`Region::place`]).
    pub(crate) fn file(file: std::fs::File, fresh: bool) -> Result<Arc<Region>> {
        let len = file
            .metadata()
            .map_err(|e| Error::io("reading the size of a shared state file", e))?
            .len() as usize;
        let map = Mapping::new_raw(Some(&file), len, len, Backing::Shared)
            .map_err(|e| Error::io("mapping a shared state file", e))?;
        Ok(Arc::new(Region {
            map,
            cursor: Mutex::new((0, false)),
            fresh,
            file: Some(file),
        }))
    }

    /// Whether the region is a file other processes may map ([`Region::file`]).
    pub(crate) fn is_shared(&self) -> bool {
        self.file.is_some()
    }

    /// Whether this process initialises the region's state (see [`Region::file`]).
    pub(crate) fn is_fresh(&self) -> bool {
        self.fresh
    }

    /// Give the memory of `off .. off + len` (page-aligned, no longer used by anyone)
    /// back to the system: it reads as zeroes afterwards.
    pub(crate) fn discard(&self, off: u64, len: usize) {
        let advice = if self.file.is_some() {
            // Shared memory: MADV_DONTNEED would only drop this process's view of the
            // pages; MADV_REMOVE frees them (a hole in the file).
            libc::MADV_REMOVE
        } else {
            libc::MADV_DONTNEED
        };
        // SAFETY: the range is inside the usable part of our mapping and unused (the
        // caller's contract); both advices only replace its pages with zero pages. An
        // error leaves the memory as it was, which is harmless.
        unsafe {
            libc::madvise(self.ptr(off).cast(), len, advice);
        }
    }

    /// The address of region offset `off` (inside the region's memory if `off` is
    /// inside a placement, or inside the part its sealer uses and has made usable).
    #[inline(always)]
    pub(crate) fn ptr(&self, off: u64) -> *mut u8 {
        self.map.base().wrapping_add(off as usize)
    }

    /// The offset of `p`, an address inside the region's memory.
    #[inline(always)]
    pub(crate) fn offset_of(&self, p: *const u8) -> u64 {
        debug_assert!(p as usize >= self.map.base() as usize);
        (p as usize - self.map.base() as usize) as u64
    }

    /// Bytes reserved.
    pub(crate) fn reserved(&self) -> usize {
        self.map.reserved()
    }

    /// Make the region usable up to `end` bytes (at most `reserved`).
    pub(crate) fn make_usable(&self, end: usize) -> Result<()> {
        if end <= self.map.len() {
            return Ok(());
        }
        if end > self.map.reserved() {
            return Err(Error::invalid_config(format!(
                "shared state of {} MiB does not fit in the {} MiB reserved for it",
                end >> 20,
                self.map.reserved() >> 20
            )));
        }
        let to = end.next_multiple_of(GROW_BYTES).min(self.map.reserved());
        self.map
            .extend(None, to)
            .map_err(|e| Error::io("making shared state memory usable", e))
    }

    /// Move the cursor past `n` values of `T` (aligned for it) and make them usable:
    /// their address. Panics on a sealed region (a bug).
    fn claim<T: InRegion>(&self, n: usize) -> Result<NonNull<T>> {
        let mut c = self.cursor.lock().unwrap_or_else(|e| e.into_inner());
        assert!(!c.1, "a placement in a sealed region");
        let start = c.0.next_multiple_of(std::mem::align_of::<T>());
        let end = std::mem::size_of::<T>()
            .checked_mul(n)
            .and_then(|b| b.checked_add(start))
            .ok_or_else(|| Error::invalid_config(format!("{n} values of shared state")))?;
        self.make_usable(end)?;
        c.0 = end;
        // SAFETY: inside the mapping, so not null.
        Ok(unsafe { NonNull::new_unchecked(self.ptr(start as u64).cast::<T>()) })
    }

    /// Place `n` values of `T`, zeroed, then initialised by `init(i, value)` before any
    /// other thread can see them. In a region that is not fresh, `init` does not run:
    /// the values are those the region's initialiser placed at the same offset (the
    /// same sequence of placements). Panics on a sealed region (a bug).
    pub(crate) fn place<T: InRegion>(
        self: &Arc<Self>,
        n: usize,
        mut init: impl FnMut(usize, &mut T),
    ) -> Result<Placed<T>> {
        let ptr = self.claim::<T>(n)?;
        for i in (0..n).filter(|_| self.fresh) {
            // SAFETY: the `n` values at `ptr` are usable, placed to no one else (the
            // cursor moved past them under its lock) and zeroed, which is a `T`
            // (`InRegion`); in a fresh region no other thread or process knows them
            // before `place` returns (a process that finds the state waits until the
            // initialiser declares it ready).
            init(i, unsafe { &mut *ptr.as_ptr().add(i) });
        }
        Ok(self.view(ptr, n))
    }

    /// Place `n` values of `T` without writing them: the view of the values that are
    /// there, zero in a fresh region. The placement a process makes to find state that
    /// the same sequence of placements put there, or that the caller fills through the
    /// view's own synchronisation (atomics, locks). Panics on a sealed region (a bug).
    pub(crate) fn place_as_found<T: InRegion>(self: &Arc<Self>, n: usize) -> Result<Placed<T>> {
        let ptr = self.claim::<T>(n)?;
        Ok(self.view(ptr, n))
    }

    /// Place one value as found (as [`Region::place_as_found`]).
    pub(crate) fn place_value_as_found<T: InRegion>(self: &Arc<Self>) -> Result<PlacedValue<T>> {
        Ok(PlacedValue(self.place_as_found(1)?))
    }

    /// The view of `n` placed values at `ptr`.
    fn view<T>(self: &Arc<Self>, ptr: NonNull<T>, n: usize) -> Placed<T> {
        Placed {
            ptr,
            len: n,
            _region: Arc::clone(self),
        }
    }

    /// Place one value (as [`Region::place`]).
    pub(crate) fn place_value<T: InRegion>(
        self: &Arc<Self>,
        init: impl FnOnce(&mut T),
    ) -> Result<PlacedValue<T>> {
        let mut init = Some(init);
        let p = self.place(1, |_, v| init.take().expect("one value")(v))?;
        Ok(PlacedValue(p))
    }

    /// End the placements: the bytes from [`Region::placed_end`] on are the caller's.
    pub(crate) fn seal(&self) -> usize {
        let mut c = self.cursor.lock().unwrap_or_else(|e| e.into_inner());
        c.1 = true;
        c.0
    }

    /// The first byte no placement used.
    #[cfg(test)]
    pub(crate) fn placed_end(&self) -> usize {
        self.cursor.lock().unwrap_or_else(|e| e.into_inner()).0
    }
}

/// The most bytes a placement of `n` values of `T` takes, wherever the cursor is: their
/// size and the padding that aligns them. What a user of a region adds up to size it
/// ([`Region::anonymous`]).
pub(crate) const fn bytes_for<T>(n: usize) -> usize {
    std::mem::size_of::<T>()
        .saturating_mul(n)
        .saturating_add(std::mem::align_of::<T>() - 1)
}

/// This process's view of `len` values of `T` placed in a [`Region`] (module docs).
pub(crate) struct Placed<T> {
    ptr: NonNull<T>,
    len: usize,
    /// Keeps the memory mapped for as long as the view lives.
    _region: Arc<Region>,
}

// SAFETY: a view hands out only `&T` (and `T` is shared between threads through it),
// so it may be sent and shared when `&T` may.
unsafe impl<T: Sync> Send for Placed<T> {}
// SAFETY: as above.
unsafe impl<T: Sync> Sync for Placed<T> {}

impl<T> std::ops::Deref for Placed<T> {
    type Target = [T];

    #[inline(always)]
    fn deref(&self) -> &[T] {
        // SAFETY: `len` initialised values of `T` at `ptr` (placed), in memory mapped
        // while `_region` lives; only shared references are made to them.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl<T> std::fmt::Debug for Placed<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Placed({} at {:p})", self.len, self.ptr)
    }
}

impl<T> Placed<T> {
    /// The first value (of a placement of one).
    #[inline(always)]
    pub(crate) fn one(&self) -> &T {
        &self[0]
    }
}

/// This process's view of one value placed in a [`Region`].
pub(crate) struct PlacedValue<T>(Placed<T>);

impl<T> std::ops::Deref for PlacedValue<T> {
    type Target = T;

    #[inline(always)]
    fn deref(&self) -> &T {
        // SAFETY: a placement of exactly one value (`Region::place_value`), read as in
        // `Placed::deref`.
        unsafe { &*self.0.ptr.as_ptr() }
    }
}

impl<T> std::fmt::Debug for PlacedValue<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// A value alone on its cache lines (two, as the adjacent-line prefetcher fetches them
/// in pairs): what keeps a word every thread writes from slowing the reads of its
/// neighbours.
#[repr(C, align(128))]
#[derive(Debug, Default)]
pub(crate) struct Line<T>(pub T);

// SAFETY: `T`'s bytes and padding.
unsafe impl<T: InRegion> InRegion for Line<T> {}

impl<T> std::ops::Deref for Line<T> {
    type Target = T;

    #[inline(always)]
    fn deref(&self) -> &T {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering::Relaxed;

    #[repr(C, align(64))]
    struct Line {
        a: AtomicU64,
        b: u32,
    }
    // SAFETY: an atomic and an integer; repr(C).
    unsafe impl InRegion for Line {}

    #[test]
    fn placements_are_aligned_disjoint_initialised_and_stable() {
        let r = Region::anonymous(MIN_RESERVED_BYTES, 0).unwrap();
        let words = r.place::<u32>(3, |i, v| *v = i as u32 + 1).unwrap();
        let lines = r.place::<Line>(2, |i, l| l.b = 10 + i as u32).unwrap();
        assert_eq!(&words[..], [1, 2, 3]);
        let off = r.offset_of((&lines[0] as *const Line).cast());
        assert_eq!(off, 64, "aligned after the words");
        assert_eq!((lines[0].b, lines[1].b), (10, 11));
        assert_eq!(lines[1].a.load(Relaxed), 0, "zeroed");
        // More than the first usable part: the region becomes usable as it grows.
        let big = r.place::<u64>(GROW_BYTES, |_, _| {}).unwrap();
        big[GROW_BYTES - 1..].iter().for_each(|v| assert_eq!(*v, 0));
        assert!(r.placed_end() >= 128 + GROW_BYTES * 8);
        // The views keep the region: dropping the first handle unmaps nothing.
        drop(r);
        lines[0].a.store(5, Relaxed);
        assert_eq!(lines[0].a.load(Relaxed), 5);
    }

    #[test]
    fn placements_as_found_are_zeroed_and_find_the_same_offsets() {
        let r = Region::anonymous(MIN_RESERVED_BYTES, 0).unwrap();
        let words = r.place::<u32>(3, |i, v| *v = i as u32 + 1).unwrap();
        let lines = r.place_as_found::<Line>(2).unwrap();
        let one = r.place_value_as_found::<AtomicU64>().unwrap();
        assert_eq!(lines[0].a.load(Relaxed), 0, "zeroed in a fresh region");
        // The same sequence of placements in another region finds the same offsets,
        // which is what lets a process find the values without placing them again.
        let r2 = Region::anonymous(MIN_RESERVED_BYTES, 0).unwrap();
        r2.place_as_found::<u32>(3).unwrap();
        let lines2 = r2.place_as_found::<Line>(2).unwrap();
        let one2 = r2.place_value_as_found::<AtomicU64>().unwrap();
        let off = |r: &Region, p: *const u8| r.offset_of(p);
        assert_eq!(
            off(&r, (&lines[1] as *const Line).cast()),
            off(&r2, (&lines2[1] as *const Line).cast())
        );
        assert_eq!(
            off(&r, (&*one as *const AtomicU64).cast()),
            off(&r2, (&*one2 as *const AtomicU64).cast())
        );
        assert_eq!(&words[..], [1, 2, 3]);
        // The estimate covers the placements wherever the cursor was.
        let need = bytes_for::<u32>(3) + bytes_for::<Line>(2) + bytes_for::<AtomicU64>(1);
        assert!(r.placed_end() <= need, "{} > {need}", r.placed_end());
    }

    #[test]
    fn a_region_reserves_at_least_what_its_placements_need() {
        let need = MIN_RESERVED_BYTES + (1 << 20);
        let r = Region::anonymous(0, need).unwrap();
        assert!(r.reserved() >= need);
        assert!(r.place_as_found::<u64>(need / 8).is_ok());
    }

    #[test]
    #[should_panic(expected = "sealed")]
    fn a_sealed_region_places_nothing() {
        let r = Region::anonymous(MIN_RESERVED_BYTES, 0).unwrap();
        r.place::<u64>(1, |_, _| {}).unwrap();
        assert_eq!(r.seal(), 8);
        let _ = r.place::<u64>(1, |_, _| {});
    }

    #[test]
    fn a_placement_beyond_the_reservation_is_an_error() {
        let r = Region::anonymous(MIN_RESERVED_BYTES, 0).unwrap();
        let too_many = r.reserved() / 8 + 1;
        assert!(matches!(
            r.place::<u64>(too_many, |_, _| {}),
            Err(Error::InvalidConfig(_))
        ));
        assert!(matches!(
            r.place::<u64>(usize::MAX, |_, _| {}),
            Err(Error::InvalidConfig(_))
        ));
        assert!(r.place::<u64>(1, |_, _| {}).is_ok());
    }
}
