//! Media: where the bytes of a pool live and how they become durable.
//!
//! A [`Medium`] is a contiguous byte image (the mapped pool) plus the two persistence
//! primitives of the papers: [`Medium::flush`] writes back the cache lines covering a
//! range, [`Medium::fence`] orders them: once `fence` returns, every line this thread
//! flushed before it is durable. `persist = flush + fence`. A third, optional one,
//! [`Medium::write_lines`], writes whole cache lines and starts their write-back in
//! one step, for bytes not read again soon (log records): the DRAM and DAX media store
//! them with non-temporal stores, which skip the cache (no read for ownership, no
//! write-back; the same fence completes them); the others copy and flush.
//!
//! Everything above this layer (heap, engines) addresses the image by offset and calls
//! only these primitives, so the same engine runs unchanged on
//!
//! * [`MediumKind::Dram`] ([`DramMedium`]): a file under `/dev/shm`, real flush
//!   instructions, and an emulated NVM write latency charged per flushed line at the
//!   fence (the papers' emulation method);
//! * [`MediumKind::Dax`] ([`DaxMedium`]): a file on a DAX file system mapped with
//!   `MAP_SYNC`, where flush + fence is durability. Elsewhere it is refused with
//!   [`Error::MediumUnsupported`](crate::Error::MediumUnsupported), naming the fallbacks;
//! * [`MediumKind::File`] ([`FileMedium`]): an ordinary file where the fence `msync`s
//!   the pages the calling thread flushed since its last fence (a commit's fence, one
//!   call serving the commits of every thread that commits at the same time:
//!   [`GroupSync`]);
//! * the crash simulator (`SimMedium` in `pisces-verify`), which keeps a second, durable image that a
//!   line reaches only when the thread that flushed it fences, can freeze everything at
//!   any fence or flush, and builds the images a power failure could leave (an
//!   adversary picks, per 8-byte word, among unfenced and never-flushed writes).
//!
//! Which of them a pool file gets follows its file system unless the program names
//! one ([`durability`]): DAX on a DAX file system, DRAM on tmpfs and ramfs, the file
//! medium elsewhere; [`PoolDurability`] says what a commit then survives. The crash
//! simulator models the file medium too (its domain `page-cache`): there the file
//! medium's own [`PageTracker`] decides what a fence `msync`s.
//!
//! Pool files are created and opened by the pool (`Pool::create`, `Pool::open`): every
//! operating-system check (missing, directory, read-only, too small, locked by another
//! open) is its own error, and the pool stays `flock`ed for as long as its medium lives.
//!
//! # Growth
//! A pool created with a maximum size larger than its size can grow: its medium
//! reserves the whole maximum of address space at the start (an address-space reservation) and
//! maps the file over the start of it, so [`Medium::grow`] extends the file and maps the
//! new part in place — the base address never changes. Growing is the heap's decision
//! (when the allocator runs out); a medium that cannot grow (the default of
//! [`Medium::grow`]) refuses with [`Error::MediumUnsupported`](crate::Error::MediumUnsupported).
//!
//! # Persistence domain
//! Where a store becomes durable is the medium's [`Medium::persistence_domain`]
//! ([`domain`]): under ADR a line must be written back and fenced; under eADR (the CPU
//! caches inside the domain) a visible store is durable, so `flush` writes nothing
//! back and only `fence` remains. The DRAM medium takes the domain as an option (both
//! can be measured), the DAX medium reads it from the platform at every open, the file
//! medium's is the page cache.
//!
//! Per-thread counters (lines flushed, fences, bytes logged, bytes written home) are in
//! the media's counters.
//!
//! Cost of one `persist` of a cache line on this machine (`cargo test --release -p
//! pisces-verify persist_cost -- --ignored --nocapture`): DRAM ~0.2 us, DRAM with 300 ns
//! emulated latency ~0.4 us, file + msync on disk ~130-260 us, simulator ~0.2 us.

pub(crate) mod counters;
pub mod domain;
pub(crate) mod dram;
pub mod durability;
mod file;
pub(crate) mod flush;
pub(crate) mod group_sync;
pub(crate) mod locked_file;
pub(crate) mod open;
pub(crate) mod reserve;

pub use domain::PersistenceDomain;
pub use dram::DramMedium;
pub use durability::{FileSystem, PoolDurability, Survives};
pub use file::{DaxMedium, FileMedium, PageTracker};
pub use group_sync::{GroupSync, PageRanges};

/// Page size assumed for `msync` alignment and pool sizes.
pub(crate) const PAGE: usize = 4096;

/// Size of a cache line: the unit of write-back.
pub const CACHE_LINE: usize = 64;

/// The length of a [`Medium::write_lines`] of `parts` at `off`, after checking that
/// `off` is a line boundary and the lines fit the image (`covers(off, len)`: whether
/// `len` bytes at `off` do; a caller's bug otherwise: panics).
pub(crate) fn checked_line_write(
    off: usize,
    parts: &[&[u8]],
    covers: impl FnOnce(usize, usize) -> bool,
) -> usize {
    let len: usize = parts.iter().map(|p| p.len()).sum();
    assert!(
        off.is_multiple_of(CACHE_LINE) && covers(off, len.next_multiple_of(CACHE_LINE)),
        "line write of {len} bytes at {off:#x} outside the image"
    );
    len
}

/// Which kind of medium a pool is mapped on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MediumKind {
    /// DRAM-backed file with emulated NVM write latency (ns per flushed cache line) and an
    /// optional bandwidth cap (bytes per second; 0 = none). Latency 0 is plain DRAM.
    Dram {
        /// Extra latency charged per flushed cache line, at the fence.
        write_latency_ns: u64,
        /// Write bandwidth cap in bytes per second, 0 for none.
        bandwidth_bytes_per_sec: u64,
    },
    /// A DAX-mapped file (`MAP_SYNC`): flush + fence is durability.
    Dax,
    /// An ordinary file: the fence `msync`s the pages flushed since the last fence.
    File,
    /// A medium the program implements ([`Medium`]) and gives to `Pool::create_on` /
    /// `Pool::open_on`, not backed by a pool file (the crash simulator of the
    /// verification crate is one).
    Custom,
}

impl MediumKind {
    /// DRAM with no emulated latency.
    pub const DRAM: MediumKind = MediumKind::Dram {
        write_latency_ns: 0,
        bandwidth_bytes_per_sec: 0,
    };

    /// A short, stable name (`dram`, `dax`, `file`, `custom`).
    pub fn name(&self) -> &'static str {
        match self {
            MediumKind::Dram { .. } => "dram",
            MediumKind::Dax => "dax",
            MediumKind::File => "file",
            MediumKind::Custom => "custom",
        }
    }
}

/// A byte image with persistence primitives: the storage seam between media and the
/// heap and engines (DRAM with emulated NVM latency, DAX, a plain file, the crash
/// simulator of the verification crate).
///
/// # Safety
/// Unsafe code in the heap and engines trusts the contract below (it dereferences
/// `base()` for `len()` bytes), so implementing the trait is `unsafe`: a wrong `base` or
/// `len` would make safe pool operations undefined behaviour.
///
/// # Contract
/// * `base()` is valid for reads and writes of `len()` bytes for the medium's lifetime
///   and never moves; it is aligned to at least 4096 bytes. `len()` only grows (by
///   [`Medium::grow`]), never beyond `max_len()`, and once a thread has read a length
///   the bytes up to it stay valid.
/// * `flush(off, len)` starts the write-back of every cache line overlapping
///   `off..off+len`; it orders nothing by itself. Under
///   [`PersistenceDomain::Eadr`] there is nothing to write back and it may do nothing.
/// * `fence()` returns only when every line the *calling thread* flushed before it is
///   durable. Lines flushed by other threads are not covered (as with `sfence`).
/// * Implementations never panic on a range inside the image; a range outside it is a
///   bug in the caller and may panic.
pub unsafe trait Medium: Send + Sync {
    /// The kind of this medium.
    fn kind(&self) -> MediumKind;
    /// Where a store on this medium becomes durable ([`domain`]). Default:
    /// [`PersistenceDomain::Adr`], the domain every engine's protocol is written for.
    fn persistence_domain(&self) -> PersistenceDomain {
        PersistenceDomain::Adr
    }
    /// Start of the mapped image; constant for the medium's lifetime (the heap caches
    /// it).
    fn base(&self) -> *mut u8;
    /// Length of the image in bytes; grows only through [`Medium::grow`].
    fn len(&self) -> usize;
    /// Most bytes the image can grow to (its reserved address range). Default: `len()`,
    /// a medium that cannot grow.
    fn max_len(&self) -> usize {
        self.len()
    }
    /// Make the image at least `new_len` bytes long (at most `max_len()`), in place:
    /// extend the backing store, make its new length durable, map the new bytes. On
    /// return `len() >= new_len`. The new bytes are zero or whatever an earlier,
    /// interrupted growth left there. Default: refused with
    /// [`Error::MediumUnsupported`](crate::Error::MediumUnsupported).
    fn grow(&self, new_len: usize) -> crate::Result<()> {
        if new_len <= self.len() {
            return Ok(());
        }
        Err(crate::Error::medium_unsupported(format!(
            "the {} medium cannot grow a pool",
            self.kind().name()
        )))
    }
    /// From now on, take the image's length from `word`, which every process that has
    /// the pool open shares and which a growth in any of them raises once it has
    /// extended the file; `owner` keeps the word alive. On return the whole reserved
    /// range is mapped (a mapping may reach past the end of the file), so another
    /// process's growth needs nothing of this one. Default: refused with
    /// [`Error::MediumUnsupported`](crate::Error::MediumUnsupported).
    ///
    /// # Safety
    /// `word` must stay valid while `owner` lives, and must be raised only to lengths
    /// the pool file has reached. Called before the medium is used by another thread.
    unsafe fn follow_len(
        &self,
        word: std::ptr::NonNull<std::sync::atomic::AtomicUsize>,
        owner: std::sync::Arc<dyn Send + Sync>,
    ) -> crate::Result<()> {
        let _ = (word, owner);
        Err(crate::Error::medium_unsupported(format!(
            "the {} medium cannot grow a pool that several processes share",
            self.kind().name()
        )))
    }
    /// True if the image has no bytes (no medium constructor produces one).
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Write back the cache lines covering `off..off + len`.
    fn flush(&self, off: usize, len: usize);
    /// Wait until this thread's earlier flushes are durable.
    fn fence(&self);
    /// The fence that ends a commit (its durability point): the same guarantee as
    /// [`fence`](Self::fence). A medium whose fence is a device sync may share one sync
    /// among the commit fences of concurrent threads, making a commit wait briefly for
    /// others to join (the file medium does). Fences that only order a thread's own
    /// writes stay plain `fence`s, so they never wait for another thread's commit.
    /// Default: `fence`.
    fn commit_fence(&self) {
        self.fence()
    }
    /// Write `parts`, one after the other, at `off` (a multiple of [`CACHE_LINE`]),
    /// zero the rest of the last line they touch, and start the write-back of those
    /// lines: as a copy followed by `flush` of the lines, durable after this thread's
    /// next `fence`. For bytes written whole and not read again soon (log records): a
    /// medium may store them without bringing the lines into the cache
    /// (non-temporal stores). The caller has the lines to itself. Default: the copy
    /// and the `flush`.
    fn write_lines(&self, off: usize, parts: &[&[u8]]) {
        let len = checked_line_write(off, parts, |o, l| {
            o.checked_add(l).is_some_and(|e| e <= self.len())
        });
        let pad = [0u8; CACHE_LINE];
        let pad: &[u8] = &pad[..len.next_multiple_of(CACHE_LINE) - len];
        let mut at = off;
        for part in parts.iter().chain([&pad]) {
            // SAFETY: `at .. at + part.len()` is inside the image (checked: the parts
            // and the padding end at the end of the last line); the caller has these
            // lines to itself.
            unsafe {
                std::ptr::copy_nonoverlapping(part.as_ptr(), self.base().add(at), part.len())
            };
            at += part.len();
        }
        self.flush(off, len);
    }
    /// `flush` then `fence`.
    fn persist(&self, off: usize, len: usize) {
        self.flush(off, len);
        self.fence();
    }
    /// Make the whole image durable (used when a pool is closed). Default: flush all + fence.
    fn sync_all(&self) -> crate::Result<()> {
        self.persist(0, self.len());
        Ok(())
    }
    /// The file the image maps, if it maps one (an engine may map it again, e.g.
    /// `MAP_PRIVATE` for a copy-on-write working snapshot). Default: none.
    fn file(&self) -> Option<&std::fs::File> {
        None
    }
}
