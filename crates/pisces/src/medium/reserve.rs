//! A mapping inside a reserved virtual range: the image of a pool that can grow without
//! moving.
//!
//! # Algorithm
//! [`Mapping`] first reserves `reserved` bytes of address space with an anonymous
//! `PROT_NONE` mapping (`MAP_NORESERVE`: no memory or swap is committed for it), then
//! maps the first `len` bytes of the image over its start with `MAP_FIXED`: the pool
//! file (`MAP_SHARED`, or `MAP_SHARED_VALIDATE | MAP_SYNC` for DAX) or, without a file,
//! read-write anonymous memory. [`Mapping::extend`] makes more of the reservation
//! usable the same way (after the caller extended the file), so the base address never
//! changes and every pointer into the image stays valid for the mapping's life.
//!
//! # Invariants
//! * `base..base + reserved` is ours from `new` to `drop` (one `munmap` of the whole
//!   range at drop); nothing else is ever mapped there. Except after a `MAP_FIXED`
//!   mapping failed: Linux may have unmapped its range before failing (it does when the
//!   file system's mmap handler refuses, as ext4 and xfs refuse `MAP_SYNC` without DAX),
//!   and any thread's next `mmap` may take the hole. That range is given away: never
//!   mapped over or unmapped again (`drop` unmaps the rest), and the image no longer
//!   grows.
//! * `base..base + len()` is readable and writable; the rest of the reservation is
//!   `PROT_NONE` and never accessed (media check every range against `len()`).
//! * `len()` only grows, and only under `grow_lock`. It is published with a Release
//!   store after the new pages are mapped, so a thread that reads the new length
//!   (Acquire) also finds the pages mapped.
//! * A file mapping of a pool that several processes grow ([`Mapping::follow_len`])
//!   maps the file over the whole reservation at once: `MAP_SHARED` may extend past the
//!   end of the file (a page there is never touched: touching it would raise `SIGBUS`),
//!   so another process's growth needs no `mmap` here. Its length is then a word all
//!   the processes share, which a growth raises only after the file is extended.
//!
//! With `reserved == len` the mapping is a plain mapping of the file, as before the
//! pool could grow.

use crate::{Error, Result};
use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::ptr::NonNull;
use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed, Release};
use std::sync::atomic::{AtomicPtr, AtomicUsize};
use std::sync::OnceLock;
use std::sync::{Arc, Mutex};

/// Turn off read-ahead for faults on `addr..addr + size` of a shared file mapping.
///
/// Why: `msync` writes back whole page-cache folios, and read-ahead fills the page cache
/// with large folios (up to megabytes on file systems that support them), so one
/// dirty word in a page read that way would cost the next `msync` the whole folio: a
/// commit that changed one log line wrote a megabyte. A fault without read-ahead
/// reads one page into a folio of one page, so a sync writes the pages that changed.
/// The cost is on a cold page cache: pages are read one fault at a time. The advice
/// is only advice; where it fails the mapping works as before, so the error is
/// ignored.
fn advise_no_readahead(addr: *mut libc::c_void, size: usize) {
    // SAFETY: `addr..addr + size` is a mapping this module just made; MADV_RANDOM
    // changes only how its faults read the file, never its contents.
    let _ = unsafe { libc::madvise(addr, size, libc::MADV_RANDOM) };
}

/// Page size: reservations and lengths are multiples of it.
const PAGE: usize = 4096;

/// A size that only grows, held in a word of its own or, once it follows one, also in
/// a word that several processes share (the size of a pool they all map, raised by a
/// growth in any of them).
///
/// The own word is a copy of the shared one that may lag behind: a bound check
/// ([`SizeWord::covers`]) reads it alone, and only when it fails reads the shared word
/// (and raises the copy), so that a check costs what it cost before the size could be
/// shared; [`SizeWord::get`] reads the shared word.
pub(crate) struct SizeWord {
    /// The size, or a size it had (a shared word may be ahead of it).
    own: AtomicUsize,
    /// The followed word, null until [`SizeWord::follow`] (set once, before the owner
    /// is used by another thread).
    shared: AtomicPtr<AtomicUsize>,
    /// Keeps the followed word alive.
    owner: OnceLock<Arc<dyn Send + Sync>>,
}

impl SizeWord {
    /// A size of `v` in a word of its own.
    pub(crate) fn new(v: usize) -> SizeWord {
        SizeWord {
            own: AtomicUsize::new(v),
            shared: AtomicPtr::new(std::ptr::null_mut()),
            owner: OnceLock::new(),
        }
    }

    /// The followed word, if any.
    #[inline]
    fn shared(&self) -> Option<&AtomicUsize> {
        // Relaxed: `shared` changes once, before the owner is shared with other
        // threads (`follow`'s contract).
        let p = self.shared.load(Relaxed);
        // SAFETY: null, or the followed word, which `owner` keeps alive.
        unsafe { p.as_ref() }
    }

    /// The size now. Acquire: pairs with the Release of [`SizeWord::raise`], so that
    /// what was done before the size was raised (the new part mapped, the file
    /// extended) is seen by the caller that sees the new size.
    #[inline]
    pub(crate) fn get(&self) -> usize {
        match self.shared() {
            None => self.own.load(Acquire),
            Some(w) => {
                let v = w.load(Acquire);
                // Relaxed: a copy, only ever raised (a check that reads it and finds it
                // short reads the shared word again).
                self.own.fetch_max(v, Relaxed);
                v
            }
        }
    }

    /// Whether `end` is at most the size. Reads the own word; only if that is short,
    /// the shared word.
    ///
    /// Relaxed: the size only grows, and a thread that holds an offset in a grown part
    /// learned of it through a Release/Acquire chain that starts after the size was
    /// raised (the allocator's free set lock, the slab mirror's Release store, the
    /// engine's own hand-off), so it reads the new size or a later one in the word that
    /// was raised: the own word in this process, the shared one otherwise (which the
    /// slow path reads).
    #[inline]
    pub(crate) fn covers(&self, end: usize) -> bool {
        end <= self.own.load(Relaxed) || self.covers_shared(end)
    }

    /// [`SizeWord::covers`] after the own word fell short.
    #[cold]
    #[inline(never)]
    fn covers_shared(&self, end: usize) -> bool {
        self.shared().is_some() && end <= self.get()
    }

    /// Raise the size to `v` (no change if it is larger). Release: see `get`.
    pub(crate) fn raise(&self, v: usize) {
        if let Some(w) = self.shared() {
            w.fetch_max(v, Release);
        }
        self.own.fetch_max(v, Release);
    }

    /// Set the size to `v` in every word, lower or not: a test that stands for a
    /// growth whose size was not raised yet.
    #[cfg(test)]
    pub(crate) fn set_for_test(&self, v: usize) {
        if let Some(w) = self.shared() {
            w.store(v, Relaxed);
        }
        self.own.store(v, Relaxed);
    }

    /// From now on, follow `word` too, raised first to this size if it is lower.
    /// `owner` keeps `word` alive.
    ///
    /// # Safety
    /// `word` must stay valid while `owner` lives; this size must be a size every
    /// sharer may use (it is published to them); call it before the owner is used by
    /// another thread.
    pub(crate) unsafe fn follow(
        &self,
        word: NonNull<AtomicUsize>,
        owner: Arc<dyn Send + Sync>,
    ) -> io::Result<()> {
        if self.owner.set(owner).is_err() {
            return Err(io::Error::other("the size follows a shared word already"));
        }
        // SAFETY: the caller keeps `word` valid while `owner` lives, which `self.owner`
        // now keeps alive as long as this value.
        let shared = unsafe { word.as_ref() };
        // AcqRel: pairs with the other sharers' raises; the caller vouches that this
        // size may be published.
        let before = shared.fetch_max(self.own.load(Relaxed), AcqRel);
        // Relaxed: see `shared`.
        self.shared.store(word.as_ptr(), Relaxed);
        self.own.fetch_max(before, Relaxed);
        Ok(())
    }
}

/// How the usable part of a [`Mapping`] is backed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backing {
    /// Process-private zeroed memory.
    Anonymous,
    /// The file, `MAP_SHARED`.
    Shared,
    /// The file, `MAP_SHARED_VALIDATE | MAP_SYNC` (DAX).
    Sync,
}

/// An image of `len()` usable bytes at a fixed address inside a reservation of
/// `reserved()` bytes.
pub struct Mapping {
    base: NonNull<u8>,
    reserved: usize,
    /// Usable bytes: this mapping's own word, or one the processes that map the same
    /// pool file share ([`Mapping::follow_len`]).
    len: SizeWord,
    backing: Backing,
    /// Held while the image grows.
    grow_lock: Mutex<GrowState>,
}

/// What only a growth changes, under [`Mapping`]'s `grow_lock`.
#[derive(Clone, Copy)]
struct GrowState {
    /// The range (offset, length) a failed `MAP_FIXED` gave away, if any (module docs,
    /// *Invariants*).
    given_away: Option<(usize, usize)>,
    /// End of what is mapped over the reservation (a page multiple).
    mapped: usize,
}

// SAFETY: the mapping is plain memory owned by this value until Drop; the raw pointer is
// only handed out through `base()`, whose users follow the Medium contract. Growth is
// serialised by `grow_lock`.
unsafe impl Send for Mapping {}
// SAFETY: as above; `&self` methods only read the immutable fields, the atomic length,
// or take the lock.
unsafe impl Sync for Mapping {}

impl std::fmt::Debug for Mapping {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mapping")
            .field("len", &self.len())
            .field("reserved", &self.reserved)
            .field("backing", &self.backing)
            .finish()
    }
}

fn page_multiple(n: usize) -> usize {
    n.next_multiple_of(PAGE)
}

impl Mapping {
    /// Reserve `reserved` bytes (at least `len`) and make the first `len` usable, backed
    /// by `file` (which must be at least `len` bytes long) or anonymous memory.
    ///
    /// Errors: `Io` when the kernel refuses; for [`Backing::Sync`], the raw `io::Error`
    /// of the failed `mmap` is in the `Io` error so the caller can recognise a non-DAX
    /// file system (see [`Mapping::new_raw`]).
    pub fn new(file: Option<&File>, len: usize, reserved: usize, backing: Backing) -> Result<Self> {
        Self::new_raw(file, len, reserved, backing).map_err(|e| Error::io("mapping the pool", e))
    }

    /// As [`Mapping::new`], returning the operating system's error unchanged.
    pub fn new_raw(
        file: Option<&File>,
        len: usize,
        reserved: usize,
        backing: Backing,
    ) -> io::Result<Self> {
        if len == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "cannot map an empty image",
            ));
        }
        if (backing == Backing::Anonymous) != file.is_none() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "a file mapping needs a file, an anonymous one none",
            ));
        }
        if let (Backing::Sync, Some(f)) = (backing, file) {
            // Ask for MAP_SYNC at an address of the kernel's choosing first: a file system
            // without DAX refuses it there, with nothing of ours at stake (over the
            // reservation, a refusal would give the reservation away: `map_range`).
            // SAFETY: a fresh mapping placed by the kernel (no fixed address): it touches
            // no memory of ours; the descriptor is valid for the call.
            let p = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    len,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_SHARED_VALIDATE | libc::MAP_SYNC,
                    f.as_raw_fd(),
                    0,
                )
            };
            if p == libc::MAP_FAILED {
                return Err(io::Error::last_os_error());
            }
            // SAFETY: `p` is the mapping just made above, used by nothing else.
            unsafe { libc::munmap(p, len) };
        }
        let reserved = page_multiple(reserved.max(len));
        // SAFETY: a fresh anonymous mapping at an address of the kernel's choosing (null
        // hint); it overwrites nothing of ours.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                reserved,
                libc::PROT_NONE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let Some(base) = NonNull::new(p.cast::<u8>()) else {
            return Err(io::Error::other("mmap returned a null reservation"));
        };
        let m = Mapping {
            base,
            reserved,
            len: SizeWord::new(0),
            backing,
            grow_lock: Mutex::new(GrowState {
                given_away: None,
                mapped: 0,
            }),
        };
        // On failure `m` is dropped, which unmaps the reservation (less what the failure
        // gave away).
        let mapped = {
            let mut state = m.grow_lock.lock().unwrap_or_else(|e| e.into_inner());
            m.map_range(file, 0, len, &mut state)
        };
        mapped?;
        // Relaxed: the value is not shared with any other thread yet.
        m.len.raise(len);
        Ok(m)
    }

    /// From now on, take the length from `word`, which the processes that map the
    /// same file share and which a growth in any of them raises after it extended the
    /// file (`owner` keeps the word alive). First maps the file over the whole
    /// reservation (module docs, *Invariants*), and raises `word` to this mapping's
    /// length if it is lower (the file is that long). Only for [`Backing::Shared`];
    /// call it before the mapping is used by another thread.
    ///
    /// # Safety
    /// `word` must stay valid while `owner` lives, and every process that shares it
    /// must raise it only to lengths its file has reached.
    pub unsafe fn follow_len(
        &self,
        file: &File,
        word: NonNull<AtomicUsize>,
        owner: Arc<dyn Send + Sync>,
    ) -> io::Result<()> {
        if self.backing != Backing::Shared {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "only a MAP_SHARED mapping of a file can follow a length other processes grow",
            ));
        }
        let mut state = self.grow_lock.lock().unwrap_or_else(|e| e.into_inner());
        if state.given_away.is_some() {
            return Err(io::Error::other(
                "an earlier growth failed and gave part of the reservation away",
            ));
        }
        let from = state.mapped;
        self.map_range(Some(file), from, self.reserved, &mut state)?;
        // SAFETY: the caller's contract; this file is as long as this mapping's length.
        unsafe { self.len.follow(word, owner) }
    }

    /// Make `from..to` of the reservation usable. The caller holds `grow_lock`, whose
    /// state this updates: `mapped` on success, `given_away` when a failed `MAP_FIXED`
    /// may have given the range away.
    fn map_range(
        &self,
        file: Option<&File>,
        from: usize,
        to: usize,
        state: &mut GrowState,
    ) -> io::Result<()> {
        debug_assert!(from <= to && to <= self.reserved && from.is_multiple_of(PAGE));
        debug_assert!(
            state.given_away.is_none(),
            "mapping over a range given away"
        );
        let size = page_multiple(to) - from;
        if size == 0 {
            return Ok(());
        }
        // SAFETY: `from..from + size` lies inside our reservation (checked above: `to <=
        // reserved`, and `reserved` is a page multiple), which no other code maps or
        // touches; replacing its PROT_NONE pages cannot affect any live reference.
        let addr = unsafe { self.base.as_ptr().add(from) }.cast::<libc::c_void>();
        let rc = match (self.backing, file) {
            (Backing::Anonymous, _) => {
                // SAFETY: as above: the range is inside the reservation.
                unsafe { libc::mprotect(addr, size, libc::PROT_READ | libc::PROT_WRITE) }
            }
            (backing, Some(f)) => {
                let flags = match backing {
                    Backing::Sync => libc::MAP_SHARED_VALIDATE | libc::MAP_SYNC,
                    _ => libc::MAP_SHARED,
                };
                let off = libc::off_t::try_from(from)
                    .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "offset too large"))?;
                // SAFETY: MAP_FIXED over pages of our own reservation (see above); the
                // descriptor is valid for the call.
                let p = unsafe {
                    libc::mmap(
                        addr,
                        size,
                        libc::PROT_READ | libc::PROT_WRITE,
                        flags | libc::MAP_FIXED,
                        f.as_raw_fd(),
                        off,
                    )
                };
                if p == libc::MAP_FAILED {
                    let e = io::Error::last_os_error();
                    // The kernel may have unmapped the range before failing, and another
                    // thread's mapping may be there now: it is not ours any more.
                    state.given_away = Some((from, size));
                    return Err(e);
                } else {
                    if backing == Backing::Shared {
                        advise_no_readahead(addr, size);
                    }
                    0
                }
            }
            (_, None) => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "a file mapping needs its file to grow",
                ))
            }
        };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        state.mapped = from + size;
        Ok(())
    }

    /// Start of the image.
    pub fn base(&self) -> *mut u8 {
        self.base.as_ptr()
    }

    /// Usable bytes.
    #[inline]
    pub fn len(&self) -> usize {
        // Acquire: pairs with the Release store in `extend`, so the caller that sees the
        // new length also sees the new pages mapped (and, on a shared length, the file
        // extended by the process that raised it).
        self.len.get()
    }

    /// Whether `off..off + len` lies inside the usable part (a bound check that reads
    /// a shared length only when this process's copy of it is short).
    #[inline]
    pub fn covers(&self, off: usize, len: usize) -> bool {
        off.checked_add(len).is_some_and(|end| self.len.covers(end))
    }

    /// True if nothing is usable (never, for a constructed mapping).
    #[cfg_attr(not(feature = "tools"), allow(dead_code))] // read by the tools only
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Reserved bytes: the most `len()` can grow to.
    pub fn reserved(&self) -> usize {
        self.reserved
    }

    /// Make the image at least `new_len` bytes long. For a file backing, the caller
    /// has already extended `file` to at least `new_len` bytes. A no-op if the image is
    /// long enough already.
    pub fn extend(&self, file: Option<&File>, new_len: usize) -> io::Result<()> {
        let mut state = self.grow_lock.lock().unwrap_or_else(|e| e.into_inner());
        // Acquire: a shared length is raised by other processes too (their raises
        // are serialised by the caller's lock across processes).
        let cur = self.len();
        if new_len <= cur {
            return Ok(());
        }
        if state.given_away.is_some() {
            return Err(io::Error::other(
                "cannot grow the image: an earlier growth failed and gave part of the reservation away",
            ));
        }
        if new_len > self.reserved {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "cannot grow the image to {new_len} bytes: only {} are reserved",
                    self.reserved
                ),
            ));
        }
        // What is mapped ends at a page multiple; a length that ends inside a page has
        // that page mapped already (and a followed length has the whole reservation).
        let from = state.mapped;
        if from < new_len {
            self.map_range(file, from, new_len, &mut state)?;
        }
        // Release: see `len`. `fetch_max`: a shared length only grows, whoever raises it.
        self.len.raise(new_len);
        Ok(())
    }

    /// `msync(MS_SYNC)` the pages covering `off..off + len` (file backings).
    pub fn msync(&self, off: usize, len: usize) -> io::Result<()> {
        let start = off & !(PAGE - 1);
        let end = off.saturating_add(len).min(self.len());
        if end <= start {
            return Ok(());
        }
        // SAFETY: `start..end` lies inside the usable part of the mapping; msync reads
        // no memory of ours.
        let rc = unsafe {
            libc::msync(
                self.base.as_ptr().add(start).cast(),
                end - start,
                libc::MS_SYNC,
            )
        };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        let given_away = self
            .grow_lock
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .given_away;
        let ours = match given_away {
            None => [(0, self.reserved), (0, 0)],
            Some((from, size)) => [(0, from), (from + size, self.reserved)],
        };
        for (start, end) in ours {
            if end > start {
                // SAFETY: `start..end` is part of our reservation (including every part
                // mapped over it) that no failed `MAP_FIXED` gave away (module docs,
                // *Invariants*), and the Medium contract ends the validity of `base()`
                // with the medium that owns this mapping.
                unsafe {
                    libc::munmap(self.base.as_ptr().add(start).cast(), end - start);
                }
            }
        }
    }
}

/// Extend `file` to `new_len` bytes and reserve its blocks, then make the new length
/// durable (`fdatasync`), so that a superblock recording the new size never describes a
/// file shorter than itself after a crash. A no-op if the file is long enough.
pub fn extend_file(file: &File, new_len: u64) -> io::Result<()> {
    let cur = file.metadata()?.len();
    if new_len <= cur {
        return Ok(());
    }
    file.set_len(new_len)?;
    let (Ok(start), Ok(len)) = (
        libc::off_t::try_from(cur),
        libc::off_t::try_from(new_len - cur),
    ) else {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "file too large",
        ));
    };
    loop {
        // SAFETY: a valid descriptor; posix_fallocate touches no memory of ours and
        // returns the error number instead of setting errno.
        let rc = unsafe { libc::posix_fallocate(file.as_raw_fd(), start, len) };
        match rc {
            0 | libc::EOPNOTSUPP => break,
            libc::EINTR => continue,
            e => {
                // Give the blocks back: a shorter file is still a sound pool (the
                // superblock was not changed).
                let _ = file.set_len(cur);
                return Err(io::Error::from_raw_os_error(e));
            }
        }
    }
    file.sync_data()
}

/// Grow a file-backed mapping: extend the file durably, then map the new part.
pub(crate) fn grow_file(map: &Mapping, file: &File, new_len: usize) -> Result<()> {
    extend_file(file, new_len as u64)
        .map_err(|e| Error::io(format!("extending the pool file to {new_len} bytes"), e))?;
    map.extend(Some(file), new_len)
        .map_err(|e| Error::io("mapping the grown part of the pool", e))
}

/// Length of an opened pool file as a mapping length.
pub(crate) fn map_len(file: &File) -> Result<usize> {
    let len = file
        .metadata()
        .map_err(|e| Error::io("inspecting pool file", e))?
        .len();
    match usize::try_from(len) {
        Ok(0) => Err(Error::invalid_config("cannot map an empty pool file")),
        Ok(n) => Ok(n),
        Err(_) => Err(Error::invalid_config(format!(
            "pool file of {len} bytes is larger than the address space"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn anonymous_mapping_grows_in_place() {
        let m = Mapping::new(None, 8192, 1 << 20, Backing::Anonymous).unwrap();
        let base = m.base();
        assert_eq!(m.len(), 8192);
        // SAFETY: inside the usable part.
        unsafe { *base.add(8191) = 1 };
        m.extend(None, 64 << 10).unwrap();
        assert_eq!(m.base(), base);
        assert_eq!(m.len(), 64 << 10);
        // SAFETY: inside the (new) usable part; anonymous memory starts zeroed.
        unsafe {
            assert_eq!(*base.add(8191), 1);
            assert_eq!(*base.add((64 << 10) - 1), 0);
        }
        assert!(m.extend(None, (1 << 20) + 4096).is_err());
        m.extend(None, 4096).unwrap();
        assert_eq!(m.len(), 64 << 10, "never shrinks");
    }

    /// A length inside a page grows within that page (mapped already) and past it.
    #[test]
    fn a_length_inside_a_page_grows_in_it_and_past_it() {
        let m = Mapping::new(None, 100, 1 << 20, Backing::Anonymous).unwrap();
        m.extend(None, 200).unwrap();
        assert_eq!(m.len(), 200);
        m.extend(None, 5000).unwrap();
        assert_eq!(m.len(), 5000);
        // SAFETY: inside the usable part.
        unsafe { *m.base().add(4999) = 1 };
    }

    /// A file of `len` bytes in a fresh directory of the temporary directory (which
    /// the tests need on a disk file system, not tmpfs, to see `MAP_SYNC` refused late).
    fn scratch_file(len: usize) -> (tempfile::TempDir, File) {
        let d = tempfile::tempdir_in(std::env::temp_dir()).unwrap();
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(d.path().join("f"))
            .unwrap();
        f.set_len(len as u64).unwrap();
        (d, f)
    }

    /// A fresh read-write anonymous mapping of `len` bytes, at `hint` if that range is
    /// free (a hint, not `MAP_FIXED`: it replaces nothing).
    fn anonymous_map(hint: *mut libc::c_void, len: usize) -> *mut libc::c_void {
        // SAFETY: a new mapping without MAP_FIXED: the kernel places it where nothing
        // is mapped, so it touches no memory of ours.
        let p = unsafe {
            libc::mmap(
                hint,
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(p, libc::MAP_FAILED);
        p
    }

    /// A refused `MAP_SYNC` mapping (a file system without DAX: what every open of a
    /// pool on an ordinary disk tries first) leaves every other mapping of the process
    /// alone: one thread asks again and again while another maps, checks and unmaps
    /// memory of its own, which must stay mapped until it unmaps it. (On a file system
    /// that refuses `MAP_SYNC` late, such as ext4 or xfs, a `MAP_FIXED` attempt over the
    /// reservation unmapped it first; the other thread's next mapping took the hole, and
    /// the reservation's `munmap` then took that mapping away.)
    #[test]
    fn a_refused_map_sync_unmaps_nothing_of_another_thread() {
        const LEN: usize = 1 << 20;
        let (_d, f) = scratch_file(LEN);
        if Mapping::new_raw(Some(&f), LEN, LEN, Backing::Sync).is_ok() {
            eprintln!("the temporary directory is on a DAX file system: nothing to check");
            return;
        }
        let stop = std::sync::atomic::AtomicBool::new(false);
        let lost = std::thread::scope(|s| {
            let prober = s.spawn(|| {
                let until = std::time::Instant::now() + std::time::Duration::from_secs(2);
                while !stop.load(Relaxed) && std::time::Instant::now() < until {
                    assert!(Mapping::new_raw(Some(&f), LEN, LEN, Backing::Sync).is_err());
                }
                stop.store(true, Relaxed);
            });
            let mut lost = 0u64;
            while !stop.load(Relaxed) {
                let p = anonymous_map(std::ptr::null_mut(), LEN);
                std::thread::yield_now();
                // MADV_NORMAL changes nothing; it fails with ENOMEM where part of the
                // range is not mapped (any more).
                // SAFETY: the range is this loop's own mapping (or was, until taken away).
                if unsafe { libc::madvise(p, LEN, libc::MADV_NORMAL) } != 0 {
                    // Left alone: part of the range may be another mapping's now.
                    lost += 1;
                    stop.store(true, Relaxed);
                } else {
                    // SAFETY: this loop's own mapping, still whole.
                    unsafe { libc::munmap(p, LEN) };
                }
            }
            prober.join().unwrap();
            lost
        });
        assert_eq!(
            lost, 0,
            "a refused MAP_SYNC unmapped another thread's mapping"
        );
    }

    /// A growth whose `MAP_FIXED` mapping fails late (the kernel unmapped the range
    /// first: here `MAP_SYNC` on a file system without DAX) gives that range away: the
    /// mapping neither grows into it again nor unmaps it at drop, where another mapping
    /// now is.
    #[test]
    fn a_failed_growth_gives_its_range_away() {
        const LEN: usize = 1 << 20;
        let (_d, f) = scratch_file(2 * LEN);
        let mut m = Mapping::new(None, LEN, 2 * LEN, Backing::Anonymous).unwrap();
        // Grow as a DAX mapping would, over the reservation.
        m.backing = Backing::Sync;
        if m.extend(Some(&f), 2 * LEN).is_ok() {
            eprintln!("the temporary directory is on a DAX file system: nothing to check");
            return;
        }
        // SAFETY: inside the usable part.
        unsafe { *m.base() = 1 };
        // SAFETY: the end of the usable part, inside the reservation.
        let hint = unsafe { m.base().add(LEN) }.cast::<libc::c_void>();
        // Placed where the failed growth was if that range is free.
        let other = anonymous_map(hint, LEN);
        if other == hint {
            assert!(
                m.extend(Some(&f), 2 * LEN).is_err(),
                "grew over another mapping"
            );
        }
        drop(m);
        // SAFETY: the range is the mapping just made (if it is still mapped).
        let still = unsafe { libc::madvise(other, LEN, libc::MADV_NORMAL) } == 0;
        assert!(still, "the dropped mapping unmapped another one");
        // SAFETY: as above.
        unsafe { libc::munmap(other, LEN) };
    }

    #[test]
    fn file_mapping_grows_and_writes_reach_the_file() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("f");
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&p)
            .unwrap();
        f.set_len(8192).unwrap();
        let m = Mapping::new(Some(&f), 8192, 1 << 20, Backing::Shared).unwrap();
        let base = m.base();
        extend_file(&f, 3 * 65536).unwrap();
        m.extend(Some(&f), 3 * 65536).unwrap();
        assert_eq!(m.base(), base);
        // SAFETY: inside the usable part.
        unsafe { *base.add(3 * 65536 - 1) = 9 };
        m.msync(0, m.len()).unwrap();
        let bytes = std::fs::read(&p).unwrap();
        assert_eq!(bytes.len(), 3 * 65536);
        assert_eq!(bytes[3 * 65536 - 1], 9);
    }
}
