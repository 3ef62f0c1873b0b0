//! The two file-backed media: [`DaxMedium`] ([`MediumKind::Dax`]) and [`FileMedium`]
//! ([`MediumKind::File`]). Pool files are created, locked and mapped by
//! [`super::open`].

use super::counters::{add_fence, add_lines_flushed, add_msync};
use super::flush::{flush_range, sfence, stream_lines};
use super::group_sync::{coalesce, GroupSync, PageRanges};
use super::locked_file::LockedFile;
use super::reserve::{grow_file, map_len, Backing, Mapping};
use super::{checked_line_write, Medium, MediumKind, PersistenceDomain, PAGE};
use crate::{Error, Result};
use std::cell::RefCell;
use std::fs::File;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

// ---------------------------------------------------------------------------------
// DAX
// ---------------------------------------------------------------------------------

/// A pool file on a DAX file system, mapped `MAP_SHARED_VALIDATE | MAP_SYNC`: the
/// processor's cache-line write-back plus `sfence` makes a store durable (ADR), or
/// the store alone once visible (eADR: `flush` then does nothing).
pub struct DaxMedium {
    map: Mapping,
    domain: PersistenceDomain,
    // Keeps the descriptor, and with it the pool's advisory lock, for the mapping's life.
    _file: LockedFile,
}

impl std::fmt::Debug for DaxMedium {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DaxMedium")
            .field("map", &self.map)
            .field("domain", &self.domain)
            .finish()
    }
}

/// The message of [`Error::MediumUnsupported`] when `MAP_SYNC` is refused.
fn not_dax_message(e: &io::Error) -> String {
    format!(
        "the file system is not DAX (mmap with MAP_SYNC failed: {e}); \
         use the file medium (durable through msync, slow) or the dram medium \
         (emulated NVM latency, not durable across power loss)"
    )
}

impl DaxMedium {
    /// Map an opened (and locked) pool file with `MAP_SYNC`, inside a reservation of
    /// `max_len` bytes.
    ///
    /// Returns [`Error::MediumUnsupported`] if the file system is not DAX.
    pub fn from_file(file: File, max_len: usize) -> Result<Self> {
        let len = map_len(&file)?;
        let map = Mapping::new_raw(Some(&file), len, max_len, Backing::Sync).map_err(|e| {
            match e.raw_os_error() {
                // EOPNOTSUPP: the file system does not support MAP_SYNC; EINVAL: a
                // kernel too old to know MAP_SHARED_VALIDATE.
                Some(libc::EOPNOTSUPP) | Some(libc::EINVAL) => {
                    Error::medium_unsupported(not_dax_message(&e))
                }
                _ => Error::io("mapping pool file with MAP_SYNC", e),
            }
        })?;
        Ok(DaxMedium {
            map,
            domain: PersistenceDomain::Adr,
            _file: LockedFile::new(file),
        })
    }

    /// The same medium under `domain` (the caller decided it from the platform, see
    /// [`super::domain`]; [`PersistenceDomain::PageCache`] reads as ADR here).
    pub fn with_domain(mut self, domain: PersistenceDomain) -> Self {
        self.domain = match domain {
            PersistenceDomain::Eadr => PersistenceDomain::Eadr,
            PersistenceDomain::Adr | PersistenceDomain::PageCache => PersistenceDomain::Adr,
        };
        self
    }
}

// SAFETY: `base()` is the start of a mapping of `len()` bytes (page aligned) owned by
// this value and unmapped only when it is dropped; the persistence primitives follow
// the trait contract.
unsafe impl Medium for DaxMedium {
    fn file(&self) -> Option<&File> {
        Some(&*self._file)
    }
    fn kind(&self) -> MediumKind {
        MediumKind::Dax
    }
    fn persistence_domain(&self) -> PersistenceDomain {
        self.domain
    }
    fn base(&self) -> *mut u8 {
        self.map.base()
    }
    fn len(&self) -> usize {
        self.map.len()
    }
    fn max_len(&self) -> usize {
        self.map.reserved()
    }
    fn grow(&self, new_len: usize) -> Result<()> {
        grow_file(&self.map, &self._file, new_len)
    }
    #[inline]
    fn flush(&self, off: usize, len: usize) {
        assert!(self.map.covers(off, len));
        if self.domain == PersistenceDomain::Eadr {
            // The caches are in the persistence domain: a visible store is durable.
            return;
        }
        // SAFETY: the range is inside the mapping (asserted).
        let n = unsafe { flush_range(self.map.base().add(off), len) };
        add_lines_flushed(n);
    }
    fn write_lines(&self, off: usize, parts: &[&[u8]]) {
        checked_line_write(off, parts, |o, l| self.map.covers(o, l));
        // SAFETY: the lines are inside the mapping (asserted; the base is page aligned);
        // the caller has them to itself. Streamed stores plus `sfence` are durable on a
        // DAX mapping as flushed lines are.
        let n = unsafe { stream_lines(self.map.base().add(off), parts) };
        add_lines_flushed(n);
    }
    #[inline]
    fn fence(&self) {
        sfence();
        add_fence();
    }
}

// ---------------------------------------------------------------------------------
// Plain file + msync
// ---------------------------------------------------------------------------------

/// Pages closer than this are synced by one `msync` call. A clean page costs `msync`
/// only a look at the page cache's dirty tags, while every call may end in a device
/// cache flush, so bridging a gap is cheaper than a second call. The gap is wide enough
/// to bridge a log's own header page and its head (a log area of several MiB), which
/// a commit with a large record flushes together, and which a narrower gap would
/// sync in two calls, two device syncs. (Bridged dirty pages are written back early: more durable than
/// required, never less; so every crash state the wider gap allows, the narrower one
/// allows too, as a write-back the kernel may make at any time.)
const MERGE_GAP: usize = 16 << 20;

/// A thread's pending page ranges are first compacted when it has recorded this many.
const COMPACT_AT: usize = 64;

/// Source of the per-tracker ids that key the thread-local pending ranges.
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

thread_local! {
    /// Per thread: (medium id, ranges flushed since this thread's last fence on that
    /// medium). An entry exists only between a flush and the next fence, so the list is
    /// almost always of length 0 or 1.
    static PENDING: RefCell<Vec<(u64, PageRanges)>> = const { RefCell::new(Vec::new()) };
}

/// The file medium's bookkeeping of what to `msync`: the pages each thread flushed
/// since its last fence. [`FileMedium`] uses it over a mapped file; the crash
/// simulator of the verification crate uses the same one over its images, with its
/// own `msync` as the only persist point, so that what it checks is this code.
///
/// The pending ranges are kept in a thread-local list keyed by a unique per-tracker
/// id, not in a shared `Mutex<HashMap<ThreadId, _>>`: `flush` is called many times per
/// fence, and the thread-local needs no lock and shares no cache line between threads.
/// Its one cost is that a thread which flushes and then never fences before the
/// tracker is dropped leaves a small entry behind until it exits (ids are never
/// reused, so it is never mistaken for another tracker's).
#[derive(Debug)]
pub struct PageTracker {
    id: u64,
}

impl Default for PageTracker {
    fn default() -> Self {
        PageTracker {
            // Relaxed: only uniqueness matters, and the read-modify-write alone
            // guarantees that two trackers created concurrently get different ids.
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
        }
    }
}

impl PageTracker {
    /// A tracker with nothing pending.
    pub fn new() -> PageTracker {
        PageTracker::default()
    }

    /// Record that the calling thread flushed `off..off + len` of an image of
    /// `image_len` bytes: the pages it touches are synced at the thread's next
    /// [`fence`](Self::fence). Returns the page range `(start, len)` to sync at once
    /// when the thread has nowhere to remember it (a flush from a thread-local
    /// destructor), `None` otherwise.
    pub fn flushed(&self, off: usize, len: usize, image_len: usize) -> Option<(usize, usize)> {
        if len == 0 {
            return None;
        }
        let start = off & !(PAGE - 1);
        // Cannot overflow: off + len <= image length, which is below usize::MAX - PAGE.
        let end = (off + len).next_multiple_of(PAGE).min(image_len);
        let recorded = PENDING.try_with(|p| {
            let mut p = p.borrow_mut();
            match p.iter_mut().find(|(id, _)| *id == self.id) {
                Some((_, ranges)) => record(ranges, (start, end)),
                None => p.push((self.id, vec![(start, end)])),
            }
        });
        recorded.is_err().then_some((start, end - start))
    }

    /// The fence's work: `msync(start, len)` for each page range the calling thread
    /// flushed since its last fence (ranges closer than 16 MiB merged into one call);
    /// afterwards the thread has nothing pending.
    pub fn fence(&self, mut msync: impl FnMut(usize, usize)) {
        for (s, e) in self.take() {
            msync(s, e - s);
        }
    }

    /// The page ranges `(start, end)` the calling thread flushed since its last fence
    /// (ranges closer than 16 MiB merged), sorted; afterwards it has nothing pending.
    pub fn take(&self) -> PageRanges {
        let mut ranges = PENDING
            .try_with(|p| {
                let mut p = p.borrow_mut();
                match p.iter().position(|(id, _)| *id == self.id) {
                    Some(i) => p.swap_remove(i).1,
                    None => Vec::new(),
                }
            })
            .unwrap_or_default();
        coalesce(&mut ranges, MERGE_GAP);
        ranges
    }

    /// Forget what the calling thread has pending (a sync of the whole image covers
    /// it).
    pub fn forget(&self) {
        let _ = PENDING.try_with(|p| p.borrow_mut().retain(|(id, _)| *id != self.id));
    }
}

/// An ordinary file mapped `MAP_SHARED`; the fence `msync`s the pages this thread
/// flushed since its last fence (kept by a [`PageTracker`]); a commit's fence does so
/// in one call with the commit fences of other threads that run at the same time
/// ([`GroupSync`]).
pub struct FileMedium {
    map: Mapping,
    pages: PageTracker,
    group: GroupSync,
    msyncs: AtomicU64,
    // The first failed msync, reported by the next `sync_all` (after a failed msync the
    // kernel may have marked the pages clean, so the failure must not be forgotten).
    error: Mutex<Option<io::Error>>,
    // Keeps the descriptor, and with it the pool's advisory lock, for the mapping's life.
    _file: LockedFile,
}

impl std::fmt::Debug for FileMedium {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileMedium")
            .field("len", &self.map.len())
            .field("msyncs", &self.msync_calls())
            .finish()
    }
}

impl FileMedium {
    /// Map an opened (and locked) pool file `MAP_SHARED`, inside a reservation of
    /// `max_len` bytes.
    pub fn from_file(file: File, max_len: usize) -> Result<Self> {
        let len = map_len(&file)?;
        // The file is a regular pool file held under an exclusive advisory lock for the
        // life of the mapping, so no cooperating process resizes or maps it.
        let map = Mapping::new(Some(&file), len, max_len, Backing::Shared)?;
        Ok(FileMedium {
            map,
            pages: PageTracker::new(),
            group: GroupSync::new(),
            msyncs: AtomicU64::new(0),
            error: Mutex::new(None),
            _file: LockedFile::new(file),
        })
    }

    /// Number of `msync` calls made so far by fences and `sync_all` on this medium.
    pub fn msync_calls(&self) -> u64 {
        // Relaxed: a statistic; no other memory is published through it.
        self.msyncs.load(Ordering::Relaxed)
    }

    fn msync(&self, off: usize, len: usize) {
        // Relaxed: a statistic (see `msync_calls`).
        self.msyncs.fetch_add(1, Ordering::Relaxed);
        add_msync();
        // Aligns `off` down to the page and calls msync(MS_SYNC).
        if let Err(e) = self.map.msync(off, len) {
            let mut slot = self.error.lock().unwrap_or_else(|p| p.into_inner());
            if slot.is_none() {
                *slot = Some(e);
            }
        }
    }

    fn take_error(&self) -> Option<io::Error> {
        self.error.lock().unwrap_or_else(|p| p.into_inner()).take()
    }
}

/// Add the page range `r` to `ranges`, extending the last range when they touch.
fn record(ranges: &mut PageRanges, r: (usize, usize)) {
    if let Some(last) = ranges.last_mut() {
        if r.0 <= last.1 && r.1 >= last.0 {
            last.0 = last.0.min(r.0);
            last.1 = last.1.max(r.1);
            return;
        }
    }
    ranges.push(r);
    // Compact at 64, 128, 256, ... entries: bounded memory when the flushed pages are
    // close together, amortized O(n log n) when they are not.
    if ranges.len() >= COMPACT_AT && ranges.len().is_power_of_two() {
        coalesce(ranges, MERGE_GAP);
    }
}

// SAFETY: `base()` is the start of a mapping of `len()` bytes (page aligned) owned by
// this value and unmapped only when it is dropped; the persistence primitives follow
// the trait contract.
unsafe impl Medium for FileMedium {
    fn file(&self) -> Option<&File> {
        Some(&*self._file)
    }
    fn kind(&self) -> MediumKind {
        MediumKind::File
    }
    fn persistence_domain(&self) -> PersistenceDomain {
        PersistenceDomain::PageCache
    }
    fn base(&self) -> *mut u8 {
        self.map.base()
    }
    fn len(&self) -> usize {
        self.map.len()
    }
    fn max_len(&self) -> usize {
        self.map.reserved()
    }
    fn grow(&self, new_len: usize) -> Result<()> {
        grow_file(&self.map, &self._file, new_len)
    }
    unsafe fn follow_len(
        &self,
        word: std::ptr::NonNull<std::sync::atomic::AtomicUsize>,
        owner: std::sync::Arc<dyn Send + Sync>,
    ) -> Result<()> {
        // SAFETY: the caller's contract is the mapping's.
        unsafe { self.map.follow_len(&self._file, word, owner) }
            .map_err(|e| Error::io("mapping the pool for the growth of other processes", e))
    }
    fn flush(&self, off: usize, len: usize) {
        let map_len = self.map.len();
        assert!(off.checked_add(len).is_some_and(|e| e <= map_len));
        // SAFETY: the range is inside the mapping (asserted).
        let n = unsafe { flush_range(self.map.base().add(off), len) };
        add_lines_flushed(n);
        if let Some((start, len)) = self.pages.flushed(off, len, map_len) {
            // Thread-local storage is being torn down (a flush from a TLS destructor):
            // there is nowhere to remember the range, so make it durable right away.
            self.msync(start, len);
        }
    }
    fn fence(&self) {
        sfence();
        add_fence();
        self.pages.fence(|start, len| self.msync(start, len));
    }
    fn commit_fence(&self) {
        sfence();
        add_fence();
        self.group
            .fence(self.pages.take(), |start, len| self.msync(start, len));
    }
    fn sync_all(&self) -> Result<()> {
        // Everything this thread had pending is covered by the full msync below.
        self.pages.forget();
        // Relaxed: a statistic (see `msync_calls`).
        self.msyncs.fetch_add(1, Ordering::Relaxed);
        add_msync();
        let full = self
            .map
            .msync(0, self.map.len())
            .map_err(|e| Error::io("msync of pool", e));
        if let Some(e) = self.take_error() {
            return Err(Error::io("an earlier msync of the pool failed", e));
        }
        full
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tracker_syncs_every_page_a_flush_touches_at_this_threads_fence() {
        let t = PageTracker::new();
        let fenced = |t: &PageTracker| {
            let mut got = vec![];
            t.fence(|s, l| got.push((s, l)));
            got
        };
        // A flush that crosses a page boundary covers both pages.
        assert_eq!(t.flushed(4000, 200, 1 << 20), None);
        assert_eq!(fenced(&t), vec![(0, 2 * PAGE)]);
        assert_eq!(fenced(&t), vec![], "nothing left after the fence");
        // The last page of the image is cut at the image's end.
        t.flushed(3 * PAGE + 8, 8, 3 * PAGE + 512);
        assert_eq!(fenced(&t), vec![(3 * PAGE, 512)]);
        // Empty flushes record nothing; another thread's flushes are its own.
        t.flushed(64, 0, 1 << 20);
        std::thread::scope(|s| {
            s.spawn(|| t.flushed(8 * PAGE, 8, 1 << 20));
        });
        assert_eq!(fenced(&t), vec![]);
        // Two trackers on one thread keep apart.
        let u = PageTracker::new();
        t.flushed(0, 8, 1 << 20);
        u.flushed(5 * PAGE, 8, 1 << 20);
        assert_eq!(fenced(&u), vec![(5 * PAGE, PAGE)]);
        assert_eq!(fenced(&t), vec![(0, PAGE)]);
    }

    #[test]
    fn coalescing_merges_touching_and_near_ranges_only() {
        let mut r = vec![];
        record(&mut r, (0, 4096));
        record(&mut r, (4096, 8192));
        assert_eq!(r, vec![(0, 8192)]);
        record(&mut r, (1 << 30, (1 << 30) + 4096));
        record(&mut r, (MERGE_GAP, MERGE_GAP + 4096));
        assert_eq!(r.len(), 3);
        coalesce(&mut r, MERGE_GAP);
        assert_eq!(r, vec![(0, MERGE_GAP + 4096), (1 << 30, (1 << 30) + 4096)]);
        let mut many: Vec<(usize, usize)> = vec![];
        for i in (0..200usize).rev() {
            record(&mut many, (i * 8192, i * 8192 + 4096));
        }
        assert!(many.len() < COMPACT_AT, "compacted: {} ranges", many.len());
        coalesce(&mut many, MERGE_GAP);
        assert_eq!(many, vec![(0, 199 * 8192 + 4096)]);
        let mut far: Vec<(usize, usize)> = vec![];
        for i in (0..200usize).rev() {
            record(&mut far, (i * 2 * MERGE_GAP, i * 2 * MERGE_GAP + 4096));
        }
        coalesce(&mut far, MERGE_GAP);
        assert_eq!(far.len(), 200, "far-apart ranges stay separate");
        assert!(far.windows(2).all(|w| w[0].1 < w[1].0));
    }
}
