//! The superblock: the pool's identity and geometry, double-buffered.
//!
//! Two copies live at offsets 0 and 4096. Each carries a sequence number and a CRC32C
//! of its fields. The current superblock is the valid copy with the higher sequence
//! number; an update writes the *other* copy with `seq + 1` and persists it, so a crash
//! in the middle of an update leaves the previous copy intact (this is how the run
//! generation is bumped at every open without a window in which the pool is corrupt,
//! and how a growing pool's new size becomes durable in one step).
//!
//! The root record: once a pool has a root object, the superblock keeps a copy of the
//! root slot's contents (the root's offset and its size-and-type tag). The root never
//! moves or changes type, so the copy never goes stale; it lets `open` and `check` tell
//! a damaged root slot (an error) from a pool that has no root yet. Version 3 pools
//! have no root record (zero); opening one records it.
//!
//! Format 6 changes no superblock field: it says that the `spht` engine's logs may
//! hold conditional point records, which builds before it cannot read. Format 7
//! changes none either: redo-log records may carry a count of unfenced items before
//! them in their kind word (commits with deferred durability), which builds before it
//! would read as damage or a torn tail.
//!
//! Unclean shutdowns (format 5): the superblock says whether the pool is open or was
//! closed cleanly (`open_state`, written at every open and at a clean close, after the
//! engine's last write-back, into both copies one after the other, so that a damaged
//! copy leaves the state readable from the other), counts the opens that found it open
//! (`unclean_opens`: the process or the machine died with the pool open), and keeps the
//! NVDIMM unsafe-shutdown count the platform reported at the last open
//! (`dirty_shutdowns_seen`). Older formats have zeros there: nothing known.

use super::layout::{Layout, Regions, SUPERBLOCK_SIZE};
use crate::medium::open::{MediumRequest, Opened};
use crate::medium::Medium;
use crate::{Error, Result};
use bytemuck::{Pod, Zeroable};
use std::path::Path;

/// Magic number at the start of every pool.
pub const MAGIC: [u8; 8] = *b"PISCESPM";
/// The on-media format version this build writes.
pub const FORMAT_VERSION: u32 = 7;
/// The oldest format version this build reads (3: no root record).
pub const MIN_FORMAT_VERSION: u32 = 3;

/// Whether this build reads pools of format version `v`.
pub fn version_supported(v: u32) -> bool {
    (MIN_FORMAT_VERSION..=FORMAT_VERSION).contains(&v)
}

/// The persistent superblock (one copy).
#[derive(Clone, Copy, Debug, Pod, Zeroable, PartialEq, Eq)]
#[repr(C)]
pub struct Superblock {
    /// [`MAGIC`].
    pub magic: [u8; 8],
    /// [`FORMAT_VERSION`].
    pub format_version: u32,
    /// Which engine formatted the pool (see `engine::EngineId`).
    pub engine_id: u32,
    /// Random identity of the pool.
    pub uuid: [u8; 16],
    /// Size of the pool in bytes: the heap's current extent. The file may be longer
    /// (a growth interrupted by a crash extended it first); never shorter.
    pub pool_size: u64,
    /// Incremented at every open; tags header words so stale locks read as empty.
    pub run_generation: u64,
    /// Number of thread slots.
    pub max_threads: u32,
    /// The engine's regions: log regions per thread (low 8 bits) and engine-area pages
    /// (high 24 bits).
    pub regions: u32,
    /// Bytes of each thread's log area.
    pub log_bytes_per_thread: u64,
    /// Offset of the root slot (an object in the engine area naming the root object).
    pub root_slot_offset: u64,
    /// Most bytes the pool may grow to (`pool_size` for a pool that cannot grow). The
    /// slab table is sized for it.
    pub max_size: u64,
    /// Update sequence number of this copy.
    pub seq: u64,
    /// CRC32C of all preceding bytes, continued over the root record when it is set.
    pub checksum: u32,
    /// Reserved, zero.
    pub _pad2: u32,
    /// The root record's payload offset of the root object (0: no root recorded).
    pub root_offset: u64,
    /// The root record's size-and-type tag (as in the root slot).
    pub root_tag: u64,
    /// From format 5: [`OPEN`] while a process has the pool open, [`CLEAN`] after a
    /// clean close; 0 in older formats (unknown).
    pub open_state: u32,
    /// From format 5: opens that found the pool [`OPEN`], i.e. not closed cleanly.
    pub unclean_opens: u32,
    /// From format 5: the NVDIMM unsafe-shutdown count (summed over the DIMMs of the
    /// pool's region) that the platform reported at the last open, plus one; 0 when
    /// the platform reported none.
    pub dirty_shutdowns_seen: u64,
}

/// [`Superblock::open_state`] while the pool is open.
pub const OPEN: u32 = 0x4F50_454E;
/// [`Superblock::open_state`] after a clean close.
pub const CLEAN: u32 = 0x434C_4E44;

const BODY_LEN: usize = std::mem::offset_of!(Superblock, checksum);
const ROOT_RECORD: std::ops::Range<usize> =
    std::mem::offset_of!(Superblock, root_offset)..std::mem::offset_of!(Superblock, open_state);
/// The root record and the shutdown record: what a format-5 checksum continues over.
const TAIL: std::ops::Range<usize> =
    std::mem::offset_of!(Superblock, root_offset)..std::mem::size_of::<Superblock>();

impl Superblock {
    fn compute_checksum(&self) -> u32 {
        let bytes = bytemuck::bytes_of(self);
        let body = crc32c::crc32c(&bytes[..BODY_LEN]);
        if self.format_version >= 5 {
            return crc32c::crc32c_append(body, &bytes[TAIL]);
        }
        // A version 3 copy has zeros here and the checksum of the body alone.
        if self.root_offset == 0 && self.root_tag == 0 {
            body
        } else {
            crc32c::crc32c_append(body, &bytes[ROOT_RECORD])
        }
    }

    /// Whether the pool was closed cleanly: `None` when the superblock does not say
    /// (format 4 and older).
    #[cfg_attr(not(feature = "tools"), allow(dead_code))] // read by the tools only
    pub fn closed_cleanly(&self) -> Option<bool> {
        match self.open_state {
            CLEAN => Some(true),
            OPEN => Some(false),
            _ => None,
        }
    }

    /// The NVDIMM unsafe-shutdown count seen at the last open, if the platform
    /// reported one.
    #[cfg_attr(not(feature = "tools"), allow(dead_code))] // read by the tools only
    pub fn dirty_shutdowns(&self) -> Option<u64> {
        self.dirty_shutdowns_seen.checked_sub(1)
    }

    /// The root record (offset, tag), if the pool has one.
    pub fn root_record(&self) -> Option<(u64, u64)> {
        (self.root_offset != 0).then_some((self.root_offset, self.root_tag))
    }

    /// Fill in the checksum.
    pub fn seal(mut self) -> Self {
        self.checksum = self.compute_checksum();
        self
    }

    /// The layout this superblock describes.
    pub fn layout(&self) -> Result<Layout> {
        if self.max_size < self.pool_size {
            return Err(Error::corrupt(format!(
                "superblock: maximum size {} is below the pool size {}",
                self.max_size, self.pool_size
            )));
        }
        Layout::compute_growable(
            self.pool_size,
            self.max_size,
            self.max_threads as usize,
            self.log_bytes_per_thread as usize,
            decode_regions(self.regions),
        )
        .map_err(|e| Error::corrupt(format!("superblock geometry is invalid: {e}")))
    }
}

/// The superblock's encoding of an engine's regions.
pub(crate) fn encode_regions(r: Regions) -> u32 {
    let pages = r.engine_area_bytes.div_ceil(4096).max(1) as u32;
    (pages << 8) | (r.logs_per_thread as u32 & 0xFF)
}

/// The regions a superblock records.
pub fn decode_regions(v: u32) -> Regions {
    Regions {
        logs_per_thread: (v & 0xFF) as usize,
        engine_area_bytes: (v >> 8) as usize * 4096,
    }
}

/// Why one copy was rejected (used to give the most useful error when both are bad).
enum CopyState {
    Valid(Superblock),
    Invalid(Error),
}

fn read_copy(image: &[u8], idx: usize) -> CopyState {
    let off = idx * SUPERBLOCK_SIZE;
    let sb: Superblock =
        bytemuck::pod_read_unaligned(&image[off..off + std::mem::size_of::<Superblock>()]);
    if sb.magic != MAGIC {
        return CopyState::Invalid(Error::BadMagic);
    }
    if !version_supported(sb.format_version) {
        return CopyState::Invalid(Error::UnsupportedVersion {
            found: sb.format_version,
            supported: FORMAT_VERSION,
        });
    }
    if sb.checksum != sb.compute_checksum() {
        return CopyState::Invalid(Error::corrupt(format!(
            "superblock copy {} checksum mismatch",
            ["A", "B"][idx]
        )));
    }
    CopyState::Valid(sb)
}

/// Read and validate the current superblock from a pool image.
///
/// Returns the current copy and which slot (0 or 1) it is in. Only fields needed to pick
/// a copy are checked here; callers check geometry against the file.
pub fn read_current(image: &[u8]) -> Result<(Superblock, usize)> {
    if image.len() < 2 * SUPERBLOCK_SIZE {
        return Err(Error::corrupt("image smaller than two superblocks"));
    }
    match (read_copy(image, 0), read_copy(image, 1)) {
        (CopyState::Valid(a), CopyState::Valid(b)) => {
            if b.seq > a.seq {
                Ok((b, 1))
            } else {
                Ok((a, 0))
            }
        }
        (CopyState::Valid(a), CopyState::Invalid(_)) => Ok((a, 0)),
        (CopyState::Invalid(_), CopyState::Valid(b)) => Ok((b, 1)),
        // Both bad: report the more specific reason of copy A (bad magic, version, checksum).
        (CopyState::Invalid(ea), CopyState::Invalid(_)) => Err(ea),
    }
}

/// Write `sb` as the next superblock: into the slot that is not `current_slot`, with the
/// sequence number incremented, then persist. Returns the slot written.
pub(crate) fn write_next(medium: &dyn Medium, sb: &Superblock, current_slot: usize) -> usize {
    let slot = 1 - current_slot;
    let next = Superblock {
        seq: sb.seq + 1,
        format_version: FORMAT_VERSION,
        ..*sb
    }
    .seal();
    let off = slot * SUPERBLOCK_SIZE;
    let bytes = bytemuck::bytes_of(&next);
    // SAFETY: `off + size_of::<Superblock>()` lies in the first 8 KiB of the image, which
    // every pool has (checked at create/open). Superblock writes happen while the pool
    // is being created or opened, when no other thread uses the image, or under the
    // heap's superblock lock (growth); nothing else reads or writes these bytes.
    unsafe {
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), medium.base().add(off), bytes.len());
    }
    medium.persist(off, bytes.len());
    slot
}

/// Write the very first superblock of a new pool into both copies and persist them.
pub(crate) fn write_initial(medium: &dyn Medium, sb: &Superblock) {
    let sb = Superblock { seq: 1, ..*sb }.seal();
    let bytes = bytemuck::bytes_of(&sb);
    for slot in 0..2 {
        // SAFETY: as in `write_next`; the pool is being created and not shared yet.
        unsafe {
            std::ptr::copy_nonoverlapping(
                bytes.as_ptr(),
                medium.base().add(slot * SUPERBLOCK_SIZE),
                bytes.len(),
            );
        }
    }
    medium.flush(0, 2 * SUPERBLOCK_SIZE);
    medium.fence();
}

/// Open a pool file as `kind`, reserving address space for the maximum size its current
/// superblock records, so a growable pool grows in place. A superblock that cannot be
/// read reserves just the file's length (opening the heap then reports why).
#[cfg(test)]
pub(crate) fn open_pool_file(
    path: &Path,
    kind: crate::medium::MediumKind,
) -> Result<std::sync::Arc<dyn Medium>> {
    open_pool_file_in(path, MediumRequest::exactly(kind)).map(|o| o.medium)
}

/// `open_pool_file` for the medium and persistence domain `req` asks for.
pub(crate) fn open_pool_file_in(path: &Path, req: MediumRequest) -> Result<Opened> {
    let max_len = |file: &std::fs::File| {
        use std::os::unix::fs::FileExt;
        let mut head = vec![0u8; 2 * SUPERBLOCK_SIZE];
        if file.read_exact_at(&mut head, 0).is_err() {
            return Ok(0);
        }
        let Ok((sb, _)) = read_current(&head) else {
            return Ok(0);
        };
        usize::try_from(sb.max_size).map_err(|_| {
            Error::corrupt(format!(
                "{}: the superblock's maximum size {} does not fit in this machine's address space",
                path.display(),
                sb.max_size
            ))
        })
    };
    crate::medium::open::open_file_reserving(path, req, max_len)
}
