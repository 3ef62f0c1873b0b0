//! Offline validation of a pool file: what `pisces check` and `pisces info` run.
//!
//! [`check_pool`] examines a pool file without changing it and without opening it as a
//! [`Pool`](crate::Pool), and returns a [`CheckReport`]: the facts `pisces info` prints
//! (superblock, geometry, usage by size class, log state, root object) and every
//! problem found. Its `Display` is the readable report.
//!
//! # How the file is read
//! The file is opened read-only and locked with a *shared* `flock`: a pool that is open
//! (its owner holds the exclusive lock) is refused with [`Error::Locked`] instead of
//! being checked while it changes, and nobody can open the pool while the check runs. A
//! read-only file (`0444`) can be checked. The file is mapped private (`MAP_PRIVATE`,
//! copy-on-write), so that the library's own readers (superblock, allocator scan, log
//! parser) run unchanged on it and the last step, a dry run of recovery, writes only to
//! private pages. Nothing is ever written to the file.
//!
//! # What is checked, in order
//! 1. The file is at least [`MIN_POOL_SIZE`] bytes.
//! 2. Both superblock copies: magic, format version, checksum, sequence number; which
//!    copy is current (the same rule as opening). A single invalid copy next to a valid
//!    one is a *warning* (a crash during a superblock update leaves exactly that, and the
//!    next open rewrites it); two valid copies must agree on the pool's identity and
//!    geometry, and must not share a sequence number while differing.
//! 3. The current superblock: pool size equals the file size, the geometry (thread
//!    slots, log size) is valid, the root slot is where this format keeps it, the run
//!    generation is not zero, the engine id is known.
//! 4. The allocator's persistent state ([`Allocator::check`]): slab table entries, large
//!    runs, bitmap padding.
//! 5. The engine's persistent state (each engine's `EngineDef::inspect`): for the
//!    redo-log engines, the records at or above the watermark that recovery would
//!    replay decode and their writes stay in the heap; the other engines check their
//!    own logs, markers and checkpoints.
//! 6. A dry run of the engine's recovery on the private mapping (every engine: it opens
//!    the pool as `Pool::open` would, then the allocator is rebuilt), which catches
//!    what only recovery can see (an allocation
//!    logged into a slab that holds another size class); then the root object named by
//!    the root slot must be an allocated block large enough for the size it records.
//!
//! A step that cannot trust its input is skipped (with bad geometry nothing past step 3
//! runs; with problems in steps 4–5 the dry run does not run).
//!
//! # Verdict
//! [`CheckReport::verdict`]: [`Verdict::Ok`] only when every check ran and found
//! nothing; [`Verdict::Problems`] when one found damage; [`Verdict::NotChecked`] when
//! nothing was found but something could not be verified (with [`check_pool_deep`]: the
//! key order of a B+-tree whose header does not record how its keys compare). A check
//! that could not check never reads as OK.

/// On-media facts of the redo logs of the log-based engines (pisces, mvcc), for tools
/// and damage tests: where the ring of records starts in a thread's log region, and the
/// size of a record header.
pub use crate::engine::kit::log::redo_log::{
    HEADER_LEN as REDO_RECORD_HEADER, RING_OFFSET as REDO_RING_OFFSET,
};

use crate::engine::{registry, EngineId, EngineOptions, Inspection, OpenCtx};
use crate::heap::alloc::{Allocator, ClassUsage, HEADER};
use crate::heap::layout::{Layout, MIN_POOL_SIZE, SLAB_SIZE, SUPERBLOCK_SIZE};
use crate::heap::superblock::{self, Superblock, FORMAT_VERSION, MAGIC, MIN_FORMAT_VERSION};
use crate::heap::{Heap, ROOT_SLOT_OFFSET};
use crate::medium::locked_file::LockedFile;
use crate::medium::{Medium, MediumKind};
use crate::{Error, Result};
use memmap2::{MmapMut, MmapOptions};
use std::fmt;
use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::ptr::NonNull;
use std::sync::Arc;

/// State of one superblock copy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CopyStatus {
    /// Magic, version and checksum are right.
    Valid,
    /// The magic number is not [`MAGIC`].
    BadMagic,
    /// A format version this build does not read.
    UnsupportedVersion(u32),
    /// The stored checksum does not match the fields.
    ChecksumMismatch {
        /// Checksum in the copy.
        stored: u32,
        /// Checksum of the copy's fields.
        computed: u32,
    },
}

impl fmt::Display for CopyStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            CopyStatus::Valid => write!(f, "valid"),
            CopyStatus::BadMagic => write!(f, "bad magic number (not a Pisces superblock)"),
            CopyStatus::UnsupportedVersion(v) => write!(
                f,
                "format version {v} (this build reads versions {MIN_FORMAT_VERSION} to {FORMAT_VERSION})"
            ),
            CopyStatus::ChecksumMismatch { stored, computed } => write!(
                f,
                "checksum mismatch (stored {stored:#010x}, computed {computed:#010x})"
            ),
        }
    }
}

/// One superblock copy as found in the file.
#[derive(Clone, Copy, Debug)]
pub struct CopyReport {
    /// Whether the copy can be used.
    pub status: CopyStatus,
    /// The copy's fields as stored (meaningful only if `status` is `Valid`).
    pub superblock: Superblock,
}

/// The root slot: where the root object is and how big it is (0 = no root yet).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RootInfo {
    /// Payload offset of the root object.
    pub offset: u64,
    /// Size of the root object's type in bytes.
    pub size: u64,
}

/// Everything [`check_pool`] found: facts and problems.
#[derive(Clone, Debug)]
pub struct CheckReport {
    /// The file examined.
    pub path: PathBuf,
    /// The medium kind the caller named.
    pub medium: MediumKind,
    /// Length of the file in bytes.
    pub file_len: u64,
    /// Superblock copies A and B (empty if the file cannot hold them).
    pub copies: Vec<CopyReport>,
    /// Which copy is current (0 = A, 1 = B), if any is valid.
    pub current: Option<usize>,
    /// The engine recorded in the pool, if this build knows it.
    pub engine: Option<EngineId>,
    /// The geometry, if the superblock describes a valid one.
    pub layout: Option<Layout>,
    /// Usage by size class of the persistent allocator state, in the format of
    /// the allocator's usage report (small classes, then large runs), if the state is sound.
    pub usage: Option<Vec<ClassUsage>>,
    /// Allocated objects and their bytes (block sizes, headers included), if sound.
    pub allocated: Option<(u64, u64)>,
    /// What the pool's engine reports of its persistent state (logs, markers), if the
    /// geometry allowed reading it.
    pub engine_state: Option<Inspection>,
    /// True if a dry run of the engine's recovery (on private pages) succeeded.
    pub recovery_ok: bool,
    /// The root slot (after the dry run's replay if it ran, else as stored).
    pub root: Option<RootInfo>,
    /// Inconsistencies: the pool would be refused, or recovery would trust bad data.
    pub problems: Vec<String>,
    /// Findings that recovery handles by itself (a torn superblock copy).
    pub warnings: Vec<String>,
    /// With [`check_pool_deep`]: one line per container found from the root object.
    pub containers: Option<Vec<String>>,
    /// What the check could not verify (each naming what and why): with problems empty
    /// and this not, the verdict is [`Verdict::NotChecked`].
    pub unchecked: Vec<String>,
}

/// The outcome of a check.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Every check ran and found no problem (warnings allowed).
    Ok,
    /// No problem found, but part of the pool could not be verified
    /// ([`CheckReport::unchecked`] says what): not a clean bill of health.
    NotChecked,
    /// Problems found ([`CheckReport::problems`]).
    Problems,
}

impl CheckReport {
    /// The verdict: problems first, then whether everything could be checked.
    pub fn verdict(&self) -> Verdict {
        if !self.problems.is_empty() {
            Verdict::Problems
        } else if !self.unchecked.is_empty() {
            Verdict::NotChecked
        } else {
            Verdict::Ok
        }
    }

    /// True if the verdict is [`Verdict::Ok`]: everything was checked and no problem
    /// was found (warnings allowed).
    pub fn is_ok(&self) -> bool {
        self.verdict() == Verdict::Ok
    }

    /// The current superblock, if one copy is valid.
    pub fn superblock(&self) -> Option<&Superblock> {
        self.current.map(|i| &self.copies[i].superblock)
    }

    /// One line for a consistent pool, e.g. `pool.pisces: OK (pisces pool, 64.0 MiB, 3
    /// objects, run generation 4)`.
    pub fn summary_line(&self) -> String {
        let mut s = format!("{}: ", self.path.display());
        match self.verdict() {
            Verdict::Problems => {
                let n = self.problems.len();
                s += &format!("{n} problem{}", if n == 1 { "" } else { "s" });
                return s;
            }
            Verdict::NotChecked => {
                let n = self.unchecked.len();
                s += &format!(
                    "not checked: {n} thing{} could not be verified, no problem found in the rest (",
                    if n == 1 { "" } else { "s" }
                );
            }
            Verdict::Ok => s += "OK (",
        }
        s += self.engine.map_or("unknown engine", |e| e.name());
        s += &format!(" pool, {}", human_bytes(self.file_len));
        if let Some((objects, _)) = self.allocated {
            s += &format!(", {objects} object{}", if objects == 1 { "" } else { "s" });
        }
        if let Some(sb) = self.superblock() {
            s += &format!(", run generation {}", sb.run_generation);
        }
        if !self.warnings.is_empty() {
            let n = self.warnings.len();
            s += &format!(", {n} warning{}", if n == 1 { "" } else { "s" });
        }
        s += ")";
        s
    }
}

/// `1536` → `1.5 KiB`.
fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut v = n as f64 / 1024.0;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    format!("{v:.1} {}", UNITS[u])
}

fn uuid_string(u: &[u8; 16]) -> String {
    let h: String = u.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

const COPY_NAMES: [&str; 2] = ["A", "B"];

impl fmt::Display for CheckReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "pool file        {}", self.path.display())?;
        writeln!(
            f,
            "file size        {} bytes ({})",
            self.file_len,
            human_bytes(self.file_len)
        )?;
        if !self.copies.is_empty() {
            writeln!(f, "superblock")?;
            for (i, c) in self.copies.iter().enumerate() {
                let cur = if self.current == Some(i) {
                    ", current"
                } else {
                    ""
                };
                if c.status == CopyStatus::Valid {
                    writeln!(
                        f,
                        "  copy {}         valid, seq {}, run generation {}{cur}",
                        COPY_NAMES[i], c.superblock.seq, c.superblock.run_generation
                    )?;
                } else {
                    writeln!(f, "  copy {}         {}", COPY_NAMES[i], c.status)?;
                }
            }
        }
        if let Some(sb) = self.superblock() {
            writeln!(
                f,
                "  magic          ok ({})",
                String::from_utf8_lossy(&MAGIC)
            )?;
            writeln!(f, "  format version {}", sb.format_version)?;
            writeln!(
                f,
                "  engine         {} (id {})",
                EngineId::describe(sb.engine_id),
                sb.engine_id
            )?;
            writeln!(f, "  uuid           {}", uuid_string(&sb.uuid))?;
            writeln!(
                f,
                "  pool size      {} bytes ({})",
                sb.pool_size,
                human_bytes(sb.pool_size)
            )?;
            if sb.max_size > sb.pool_size {
                writeln!(
                    f,
                    "  maximum size   {} bytes ({}): grows when the heap is full",
                    sb.max_size,
                    human_bytes(sb.max_size)
                )?;
            } else {
                writeln!(f, "  maximum size   the pool size (does not grow)")?;
            }
            writeln!(f, "  run generation {}", sb.run_generation)?;
            match sb.closed_cleanly() {
                Some(clean) => {
                    writeln!(
                        f,
                        "  last close     {}",
                        if clean {
                            "clean"
                        } else {
                            "not clean (open now, or the process or machine died with it open)"
                        }
                    )?;
                    writeln!(f, "  unclean opens  {}", sb.unclean_opens)?;
                }
                None => writeln!(
                    f,
                    "  last close     not recorded (format {}: from format 5)",
                    sb.format_version
                )?,
            }
            match sb.dirty_shutdowns() {
                Some(n) => writeln!(
                    f,
                    "  nvdimm unsafe shutdowns {n} (the platform's count at the last open)"
                )?,
                None => writeln!(
                    f,
                    "  nvdimm unsafe shutdowns not exposed by the platform at the last open"
                )?,
            }
            writeln!(f, "  seq            {}", sb.seq)?;
            writeln!(f, "  checksum       {:#010x}", sb.checksum)?;
        }
        if let Some(l) = &self.layout {
            writeln!(f, "geometry")?;
            writeln!(
                f,
                "  thread slots   {} (a redo log of {} each)",
                l.max_threads,
                human_bytes(l.log_bytes_per_thread as u64)
            )?;
            writeln!(f, "  slab table     at {:#x}", l.slab_table_offset)?;
            let size = self.superblock().map_or(l.pool_size, |sb| sb.pool_size);
            let present = l.slabs_at(size);
            writeln!(
                f,
                "  heap           {:#x}..{:#x}: {} slabs of {}",
                l.heap_offset,
                l.slab_offset(present),
                present,
                human_bytes(SLAB_SIZE as u64)
            )?;
            if l.slab_count > present {
                writeln!(
                    f,
                    "  growth         up to {} slabs ({:#x}..{:#x})",
                    l.slab_count,
                    l.heap_offset,
                    l.heap_end()
                )?;
            }
        }
        if let Some(usage) = &self.usage {
            writeln!(f, "usage by size class (persistent state)")?;
            writeln!(
                f,
                "  {:>10}  {:>6}  {:>10}  {:>10}",
                "block size", "slabs", "allocated", "free"
            )?;
            let mut any = false;
            for u in usage.iter().filter(|u| u.block_size != 0 && u.slabs != 0) {
                any = true;
                writeln!(
                    f,
                    "  {:>10}  {:>6}  {:>10}  {:>10}",
                    u.block_size, u.slabs, u.allocated, u.free
                )?;
            }
            if !any {
                writeln!(f, "  (no slab is formatted for a size class)")?;
            }
            if let Some(large) = usage.iter().find(|u| u.block_size == 0) {
                writeln!(
                    f,
                    "  large runs     {} run{} in {} slab{}",
                    large.allocated,
                    if large.allocated == 1 { "" } else { "s" },
                    large.slabs,
                    if large.slabs == 1 { "" } else { "s" }
                )?;
                writeln!(f, "  free slabs     {}", large.free)?;
            }
            if let Some((objects, bytes)) = self.allocated {
                writeln!(
                    f,
                    "  allocated      {objects} objects, {}",
                    human_bytes(bytes)
                )?;
            }
        }
        if let Some(st) = &self.engine_state {
            if !st.lines.is_empty() {
                writeln!(f, "engine state")?;
                for l in &st.lines {
                    writeln!(f, "  {l}")?;
                }
            }
        }
        if self.recovery_ok {
            writeln!(
                f,
                "recovery         a dry run of the engine's recovery succeeds"
            )?;
        }
        if let Some(r) = &self.root {
            if r.offset == 0 {
                writeln!(f, "root object      none yet")?;
            } else {
                writeln!(f, "root object      at {:#x}, {} bytes", r.offset, r.size)?;
            }
        }
        if let Some(cs) = &self.containers {
            writeln!(
                f,
                "containers       {} found from the root object",
                cs.len()
            )?;
            for c in cs {
                writeln!(f, "  {c}")?;
            }
        }
        for w in &self.warnings {
            writeln!(f, "warning: {w}")?;
        }
        for u in &self.unchecked {
            writeln!(f, "not checked: {u}")?;
        }
        if self.problems.is_empty() {
            writeln!(f, "problems: none")?;
        } else {
            writeln!(f, "problems: {}", self.problems.len())?;
            for p in &self.problems {
                writeln!(f, "  - {p}")?;
            }
        }
        Ok(())
    }
}

/// A private, copy-on-write mapping of a pool file: a [`Medium`] whose stores never
/// reach the file. Flushes and fences do nothing.
struct PrivateView {
    ptr: NonNull<u8>,
    len: usize,
    kind: MediumKind,
    /// Owns the mapping; `ptr` points into it.
    _map: MmapMut,
}

// SAFETY: `ptr` points into the mapping owned by `_map`, which is Send + Sync; the
// view only hands the pointer out under the `Medium` contract, like the other media.
unsafe impl Send for PrivateView {}
// SAFETY: as above.
unsafe impl Sync for PrivateView {}

// SAFETY: `base()` is the start of a mapping of `len()` bytes (page aligned) owned by
// this value and unmapped only when it is dropped; the persistence primitives follow
// the trait contract.
unsafe impl Medium for PrivateView {
    fn kind(&self) -> MediumKind {
        self.kind
    }
    fn base(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }
    fn len(&self) -> usize {
        self.len
    }
    fn flush(&self, _off: usize, _len: usize) {}
    fn fence(&self) {}
}

/// Open `path` for reading and take a shared lock on it (ended when the value drops).
fn open_shared(path: &Path) -> Result<LockedFile> {
    crate::medium::open::pool_file_metadata(path)?;
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Err(Error::NotFound(path.to_path_buf().into()))
        }
        Err(e) => return Err(Error::io(format!("opening {}", path.display()), e)),
    };
    loop {
        // SAFETY: `file` owns a valid descriptor for the duration of the call; flock
        // touches no memory.
        let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_SH | libc::LOCK_NB) };
        if rc == 0 {
            // Processes that share the pool hold the lock shared too: their attach
            // byte says they are there, and a read lock on it keeps a new one from
            // building the pool's shared state while the check runs.
            if !crate::sidecar::hold_out_attachers(&file)? {
                return Err(Error::Locked(path.to_path_buf().into()));
            }
            return Ok(LockedFile::new(file));
        }
        let e = io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EINTR) => continue,
            Some(libc::EWOULDBLOCK) => return Err(crate::medium::open::lock_conflict(&file, path)),
            _ => return Err(Error::io(format!("locking {}", path.display()), e)),
        }
    }
}

fn copy_status(sb: &Superblock) -> CopyStatus {
    // The same order of tests as opening a pool (`superblock::read_current`).
    if sb.magic != MAGIC {
        CopyStatus::BadMagic
    } else if !superblock::version_supported(sb.format_version) {
        CopyStatus::UnsupportedVersion(sb.format_version)
    } else {
        let computed = sb.seal().checksum;
        if computed != sb.checksum {
            CopyStatus::ChecksumMismatch {
                stored: sb.checksum,
                computed,
            }
        } else {
            CopyStatus::Valid
        }
    }
}

/// Fields both copies of one pool always agree on (everything but seq, run generation
/// and checksum; and the size of a pool that grows, which only increases).
fn identity_differences(a: &Superblock, b: &Superblock) -> Vec<String> {
    let mut d = Vec::new();
    let mut field = |name: &str, x: String, y: String| {
        if x != y {
            d.push(format!("{name} (A: {x}, B: {y})"));
        }
    };
    field(
        "engine id",
        a.engine_id.to_string(),
        b.engine_id.to_string(),
    );
    field("uuid", uuid_string(&a.uuid), uuid_string(&b.uuid));
    // A pool that grows changes its size: the older copy may record a smaller one,
    // never a larger one.
    let (older, newer) = if a.seq <= b.seq { (a, b) } else { (b, a) };
    if a.max_size == a.pool_size || newer.pool_size < older.pool_size {
        field(
            "pool size",
            a.pool_size.to_string(),
            b.pool_size.to_string(),
        );
    }
    field(
        "maximum size",
        a.max_size.to_string(),
        b.max_size.to_string(),
    );
    field(
        "thread slots",
        a.max_threads.to_string(),
        b.max_threads.to_string(),
    );
    field(
        "log bytes per thread",
        a.log_bytes_per_thread.to_string(),
        b.log_bytes_per_thread.to_string(),
    );
    field(
        "root slot offset",
        format!("{:#x}", a.root_slot_offset),
        format!("{:#x}", b.root_slot_offset),
    );
    d
}

/// Validate the pool file at `path` without writing to it and without opening it as a
/// pool (see the module docs for what is checked).
///
/// `medium` is the kind the pool is used with; it is recorded in the report (the file
/// is read through a private mapping whatever the kind). [`MediumKind::Custom`] is
/// refused.
///
/// Returns `Err` only when the file cannot be examined: [`Error::NotFound`],
/// [`Error::IsDirectory`], [`Error::Locked`] (the pool is open), [`Error::InvalidConfig`]
/// (not a regular file, a custom medium) or [`Error::Io`]. Everything about the
/// file's contents, a file too small to be a pool included, is a problem in the
/// report.
pub fn check_pool(path: &Path, medium: MediumKind) -> Result<CheckReport> {
    check(path, medium, false)
}

/// [`check_pool`], then (if no problem was found) walk the public containers whose
/// handles are words of the root object, on the recovered state, and report each one
/// and its damage: hash chains that loop or join, keys in the wrong bucket, tree nodes
/// of the wrong kind, leaves off the chain (see the `containers::deep` module for how
/// they are recognised and what is checked). The walk sees the state the dry run of
/// recovery left on the private mapping, as `Pool::open` would. What
/// `pisces check --deep` runs. What the walk cannot verify (a B+-tree's key order when
/// its header does not record how keys compare) is listed in
/// [`CheckReport::unchecked`] and makes the verdict [`Verdict::NotChecked`].
pub fn check_pool_deep(path: &Path, medium: MediumKind) -> Result<CheckReport> {
    check(path, medium, true)
}

fn check(path: &Path, medium: MediumKind, deep: bool) -> Result<CheckReport> {
    if medium == MediumKind::Custom {
        return Err(Error::invalid_config(
            "a custom medium has no pool file to check",
        ));
    }
    let file = open_shared(path)?;
    let file_len = file
        .metadata()
        .map_err(|e| Error::io(format!("inspecting {}", path.display()), e))?
        .len();
    let mut r = CheckReport {
        path: path.to_path_buf(),
        medium,
        file_len,
        copies: Vec::new(),
        current: None,
        engine: None,
        layout: None,
        usage: None,
        allocated: None,
        engine_state: None,
        recovery_ok: false,
        root: None,
        problems: Vec::new(),
        warnings: Vec::new(),
        containers: None,
        unchecked: Vec::new(),
    };
    if file_len < MIN_POOL_SIZE {
        r.problems.push(format!(
            "the file is {file_len} bytes, smaller than the {MIN_POOL_SIZE}-byte minimum of a pool: not a pool, or truncated"
        ));
        return Ok(r);
    }
    let Ok(len) = usize::try_from(file_len) else {
        return Err(Error::invalid_config(format!(
            "{} is {file_len} bytes, more than this machine can map",
            path.display()
        )));
    };
    // SAFETY: a private mapping of a file we hold a shared lock on: cooperating
    // processes (Pisces pools take the exclusive lock) cannot change or truncate it
    // while the lock is held; stores into the mapping go to private pages.
    let mut map = unsafe { MmapOptions::new().len(len).map_copy(&*file) }
        .map_err(|e| Error::io(format!("mapping {}", path.display()), e))?;

    // Superblock copies, read before anything writes into the private pages.
    let sb_len = std::mem::size_of::<Superblock>();
    for i in 0..2 {
        let off = i * SUPERBLOCK_SIZE;
        let sb: Superblock = bytemuck::pod_read_unaligned(&map[off..off + sb_len]);
        r.copies.push(CopyReport {
            status: copy_status(&sb),
            superblock: sb,
        });
    }
    let sb = match superblock::read_current(&map[..]) {
        Ok((sb, slot)) => {
            r.current = Some(slot);
            sb
        }
        Err(e) => {
            r.problems
                .push(format!("no usable superblock: {e}; both copies are bad"));
            for (i, c) in r.copies.iter().enumerate() {
                r.problems
                    .push(format!("superblock copy {}: {}", COPY_NAMES[i], c.status));
            }
            return Ok(r);
        }
    };
    let cur = r.current.unwrap_or(0);
    let (a, b) = (&r.copies[0], &r.copies[1]);
    let other = &r.copies[1 - cur];
    if other.status != CopyStatus::Valid {
        r.warnings.push(format!(
            "superblock copy {} is unusable ({}); the pool uses copy {} and the next open rewrites {}",
            COPY_NAMES[1 - cur],
            other.status,
            COPY_NAMES[cur],
            COPY_NAMES[1 - cur]
        ));
    } else {
        // `_pad2` follows the checksum and is not covered by it: ignore it.
        let unpadded = |sb: &Superblock| Superblock { _pad2: 0, ..*sb };
        if a.superblock.seq == b.superblock.seq
            && unpadded(&a.superblock) != unpadded(&b.superblock)
        {
            r.problems.push(format!(
                "superblock copies A and B both have sequence number {} but differ; opening would pick A",
                a.superblock.seq
            ));
        }
        for d in identity_differences(&a.superblock, &b.superblock) {
            r.problems
                .push(format!("the two superblock copies disagree on the {d}"));
        }
    }

    // The current superblock against the file.
    let mut geometry_ok = true;
    if sb.max_size > sb.pool_size && file_len > sb.pool_size && file_len <= sb.max_size {
        // A growth that extended the file and crashed before the superblock recorded
        // the new size: the pool ignores the extra bytes and reuses them.
        r.warnings.push(format!(
            "the file is {file_len} bytes, longer than the pool's {} (an interrupted growth); the extra is ignored until the pool grows",
            sb.pool_size
        ));
    } else if sb.pool_size != file_len {
        r.problems.push(
            Error::SizeMismatch(Box::new(crate::error::SizeMismatch {
                expected: sb.pool_size,
                actual: file_len,
            }))
            .to_string(),
        );
        geometry_ok = false;
    }
    match sb.layout() {
        Ok(l) => r.layout = Some(l),
        Err(e) => {
            r.problems.push(e.to_string());
            geometry_ok = false;
        }
    }
    if sb.root_slot_offset != ROOT_SLOT_OFFSET as u64 {
        r.problems.push(format!(
            "the root slot offset {:#x} is not where this format keeps it ({ROOT_SLOT_OFFSET:#x})",
            sb.root_slot_offset
        ));
        geometry_ok = false;
    }
    if sb.run_generation == 0 {
        r.problems.push("the run generation is zero".into());
    }
    r.engine = EngineId::from_u32(sb.engine_id);
    if r.engine.is_none() {
        r.problems.push(format!(
            "the pool was formatted by engine id {}, which this build does not know",
            sb.engine_id
        ));
    }
    if !geometry_ok {
        return Ok(r);
    }

    let ptr = NonNull::new(map.as_mut_ptr())
        .ok_or_else(|| Error::io("mapping", io::Error::other("null mapping")))?;
    let view: Arc<dyn Medium> = Arc::new(PrivateView {
        ptr,
        len,
        kind: medium,
        _map: map,
    });
    let heap = match Heap::open(view) {
        Ok(h) => Arc::new(h),
        Err(e) => {
            r.problems.push(format!("the heap cannot be opened: {e}"));
            return Ok(r);
        }
    };
    r.root = Some(read_root(&heap));

    // Allocator state.
    let alloc_problems = Allocator::check(&heap);
    let alloc_ok = alloc_problems.is_empty();
    r.problems.extend(
        alloc_problems
            .into_iter()
            .map(|p| format!("allocator: {p}")),
    );
    if alloc_ok {
        match usage(&heap) {
            Ok((u, allocated)) => {
                r.usage = Some(u);
                r.allocated = Some(allocated);
            }
            Err(e) => r.problems.push(format!("allocator: {e}")),
        }
    }

    // The engine's own state (logs, markers).
    let Some(engine) = r.engine else {
        return Ok(r);
    };
    let st = engine.inspect(&heap);
    r.problems
        .extend(st.problems.iter().map(|p| format!("{engine}: {p}")));
    r.engine_state = Some(st);

    // Dry run of the engine's recovery on the private pages: the engine opens the pool
    // exactly as `Pool::open` would, then is dropped (nothing reaches the file).
    if r.problems.is_empty() {
        // No operations (the default): a timestone pool with operations to
        // re-execute reports that it needs them (the dry run cannot know the
        // program's functions).
        let ctx = OpenCtx::default();
        match registry::open_heap(engine, heap.clone(), &EngineOptions::default(), &ctx) {
            Ok(e) => {
                e.shutdown();
                r.recovery_ok = true;
            }
            Err(e) => {
                r.problems.push(format!("recovery would fail: {e}"));
                return Ok(r);
            }
        }
        let alloc = match Allocator::rebuild_private(heap.clone()) {
            Ok(a) => a,
            Err(e) => {
                r.problems.push(format!(
                    "after replaying the logs, the allocator state is unsound: {e}"
                ));
                return Ok(r);
            }
        };
        let root = read_root(&heap);
        r.root = Some(root);
        let tag = read_root_tag(&heap);
        if let Some((offset, rec_tag)) = sb.root_record() {
            if (root.offset, tag) != (offset, rec_tag) {
                r.problems.push(format!(
                    "the root slot is damaged: the superblock records the root object at {offset:#x} ({} bytes), the slot names {:#x} ({} bytes)",
                    rec_tag & 0xFFFF_FFFF,
                    root.offset,
                    root.size
                ));
            }
        }
        if root.offset == 0 {
            let mut objects = 0u64;
            if crate::heap::alloc::Allocator::for_each_allocated(&heap, |_| objects += 1).is_ok()
                && objects > 0
            {
                // Damage: every object of a pool hangs off its root (an object a
                // program allocated and never linked is a leak the pool cannot give
                // back either). An empty slot beside allocated objects is what a lost
                // root slot of a pool without a root record (format 3) looks like.
                r.problems.push(format!(
                    "{objects} object{} allocated but the root slot is empty: nothing in the pool leads to them (a damaged root slot, or objects never linked to a root)",
                    if objects == 1 { " is" } else { "s are" }
                ));
            }
        }
        if root.offset != 0 {
            match alloc.block_at(root.offset) {
                None => r.problems.push(format!(
                    "the root slot names offset {:#x}, which is not the payload of a heap block",
                    root.offset
                )),
                Some(b) => {
                    if !alloc.is_allocated(b) {
                        r.problems.push(format!(
                            "the root object at {:#x} is in a block that is not allocated",
                            root.offset
                        ));
                    }
                    if (b.payload_len() as u64) < root.size {
                        r.problems.push(format!(
                            "the root object at {:#x} is {} bytes according to the root slot, but its block holds {}",
                            root.offset,
                            root.size,
                            b.payload_len()
                        ));
                    }
                }
            }
        }
    }
    if deep && r.problems.is_empty() {
        match Allocator::rebuild_private(heap.clone()) {
            Ok(alloc) => {
                let root = read_root(&heap);
                let d = crate::containers::deep::check_root_containers(
                    &heap,
                    &alloc,
                    root.offset,
                    root.size,
                );
                r.problems
                    .extend(d.problems.into_iter().map(|p| format!("containers: {p}")));
                r.unchecked.extend(d.unchecked);
                r.containers = Some(d.containers);
            }
            Err(e) => r
                .problems
                .push(format!("containers: the allocator state: {e}")),
        }
    }
    Ok(r)
}

/// The root slot's payload (offset, size).
fn read_root(heap: &Heap) -> RootInfo {
    let mut b = [0u8; 16];
    heap.read_bytes(ROOT_SLOT_OFFSET + HEADER, &mut b);
    let word = |i: usize| {
        let mut w = [0u8; 8];
        w.copy_from_slice(&b[i..i + 8]);
        u64::from_ne_bytes(w)
    };
    RootInfo {
        offset: word(0),
        // The high half is the root type's fingerprint (see `Pool::root`).
        size: word(8) & 0xFFFF_FFFF,
    }
}

/// The root slot's size-and-type tag (its second word, whole).
fn read_root_tag(heap: &Heap) -> u64 {
    let mut b = [0u8; 8];
    heap.read_bytes(ROOT_SLOT_OFFSET + HEADER + 8, &mut b);
    u64::from_ne_bytes(b)
}

// Slab table encoding (see the `heap::alloc` module docs).
const KIND_MASK: u32 = 0xF000_0000;
const ARG_MASK: u32 = 0x0FFF_FFFF;
const TAG_SMALL: u32 = 0x1000_0000;
const TAG_HEAD: u32 = 0x2000_0000;

/// Block sizes of the small size classes, in class order (increasing).
fn class_sizes() -> Vec<u64> {
    let mut sizes = Vec::new();
    let mut payload = 0usize;
    while let Some(s) = Allocator::block_size_for(payload) {
        if s as usize >= SLAB_SIZE {
            break;
        }
        sizes.push(s);
        payload = s as usize - HEADER + 1;
    }
    sizes
}

/// Blocks of `size` bytes in one slab: the bitmap (one bit per block, rounded up to
/// whole words, then to 64 bytes) comes first.
fn blocks_per_slab(size: u64) -> u64 {
    let size = size as usize;
    let mut n = SLAB_SIZE / size;
    while (n.div_ceil(64) * 8).div_ceil(64) * 64 + n * size > SLAB_SIZE {
        n -= 1;
    }
    n as u64
}

/// Usage by size class, read-only: the slab table and [`Allocator::for_each_allocated`].
/// Same format as [`Allocator::usage`]; also (objects, bytes) allocated.
fn usage(heap: &Heap) -> Result<(Vec<ClassUsage>, (u64, u64))> {
    let layout = heap.layout();
    let sizes = class_sizes();
    let mut per_slab = vec![0u64; heap.slabs_present()];
    let (mut objects, mut bytes) = (0u64, 0u64);
    Allocator::for_each_allocated(heap, |b| {
        objects += 1;
        bytes += b.size;
        if (b.size as usize) < SLAB_SIZE {
            let slab = (b.offset as usize - layout.heap_offset) / SLAB_SIZE;
            per_slab[slab] += 1;
        }
    })?;
    let mut out: Vec<ClassUsage> = sizes
        .iter()
        .chain(std::iter::once(&0))
        .map(|&block_size| ClassUsage {
            block_size,
            slabs: 0,
            allocated: 0,
            free: 0,
        })
        .collect();
    let large = sizes.len();
    let mut entry = [0u8; 4];
    for (slab, &allocated) in per_slab.iter().enumerate() {
        heap.read_bytes(layout.slab_table_offset + 4 * slab, &mut entry);
        let e = u32::from_ne_bytes(entry);
        let arg = (e & ARG_MASK) as usize;
        match e & KIND_MASK {
            0 => out[large].free += 1,
            TAG_SMALL if arg < sizes.len() => {
                out[arg].slabs += 1;
                out[arg].allocated += allocated;
                out[arg].free += blocks_per_slab(sizes[arg]).saturating_sub(allocated);
            }
            TAG_HEAD => {
                out[large].slabs += arg as u64;
                out[large].allocated += 1;
            }
            // Continuations are counted with their head; anything else was reported
            // by the allocator check, which ran first.
            _ => {}
        }
    }
    Ok((out, (objects, bytes)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::kit::log::redo_log::{self as log, LogWriter, RecordBuilder};
    use crate::heap::alloc::Block;
    use crate::{Config, PPtr, Pool};

    fn small_config() -> Config {
        Config::default()
            .size(8 << 20)
            .max_threads(2)
            .log_bytes_per_thread(64 << 10)
    }

    fn crc(p: &Path) -> (u64, u32) {
        let b = std::fs::read(p).unwrap();
        (b.len() as u64, crc32c::crc32c(&b))
    }

    /// A pool with a root of 32 u64 and a few objects of several sizes.
    fn populated(dir: &tempfile::TempDir) -> PathBuf {
        let p = dir.path().join("p.pool");
        let pool = Pool::create(&p, small_config()).unwrap();
        let root: PPtr<[PPtr<u64>; 32]> = pool.root().unwrap();
        pool.run(|tx| {
            for i in 0..32 {
                let n = tx.alloc(i as u64)?;
                tx.write(root)?[i] = n;
            }
            tx.alloc([7u64; 100])?;
            tx.alloc([7u64; 2100])?; // 16800 bytes: a large run
            Ok(())
        })
        .unwrap();
        drop(pool);
        p
    }

    #[test]
    fn fresh_and_populated_pools_are_ok_and_unchanged() {
        let d = tempfile::tempdir_in("/dev/shm").unwrap();
        let p = populated(&d);
        let before = crc(&p);
        let r = check_pool(&p, MediumKind::DRAM).unwrap();
        assert!(r.is_ok(), "{r}");
        assert!(r.warnings.is_empty(), "{r}");
        assert_eq!(crc(&p), before, "check wrote to the file");
        assert_eq!(r.engine, Some(EngineId::Pisces));
        assert_eq!(r.copies.len(), 2);
        assert!(r.copies.iter().all(|c| c.status == CopyStatus::Valid));
        let sb = r.superblock().unwrap();
        assert_eq!(sb.pool_size, 8 << 20);
        assert_eq!(sb.run_generation, 1, "created, never reopened");
        let l = r.layout.unwrap();
        assert_eq!((l.max_threads, l.log_bytes_per_thread), (2, 64 << 10));
        // root (256 bytes) + 32 u64 + 800 bytes + one large run.
        assert_eq!(r.allocated.unwrap().0, 35);
        let root = r.root.unwrap();
        assert_ne!(root.offset, 0);
        assert_eq!(root.size, 256);
        let st = r.engine_state.as_ref().unwrap();
        assert!(
            st.lines.iter().any(|l| l.contains("per slot: 0 0")),
            "{st:?}"
        );
        assert!(r.recovery_ok);
        let text = r.to_string();
        assert!(text.contains("problems: none"), "{text}");
        assert!(r.summary_line().contains("OK"), "{}", r.summary_line());
    }

    #[test]
    fn read_only_usage_matches_the_allocator() {
        let d = tempfile::tempdir_in("/dev/shm").unwrap();
        let p = populated(&d);
        let r = check_pool(&p, MediumKind::DRAM).unwrap();
        // The allocator's own figures, on a private view (rebuild may write).
        let file = open_shared(&p).unwrap();
        let len = file.metadata().unwrap().len() as usize;
        // SAFETY: test-only private mapping of a file nobody else uses.
        let mut map = unsafe { MmapOptions::new().len(len).map_copy(&*file) }.unwrap();
        let view = Arc::new(PrivateView {
            ptr: NonNull::new(map.as_mut_ptr()).unwrap(),
            len,
            kind: MediumKind::DRAM,
            _map: map,
        });
        let heap = Arc::new(Heap::open(view).unwrap());
        let alloc = Allocator::rebuild_private(heap).unwrap();
        // Every formatted slab holds an object here, so rebuild freed none of them.
        assert_eq!(r.usage.unwrap(), alloc.usage());
        assert_eq!(class_sizes().len(), alloc.usage().len() - 1);
    }

    #[test]
    fn pool_in_use_is_refused_and_missing_files_are_errors() {
        let d = tempfile::tempdir_in("/dev/shm").unwrap();
        let p = d.path().join("open.pool");
        let pool = Pool::create(&p, small_config()).unwrap();
        assert!(matches!(
            check_pool(&p, MediumKind::DRAM),
            Err(Error::AlreadyOpen(_))
        ));
        drop(pool);
        assert!(check_pool(&p, MediumKind::DRAM).unwrap().is_ok());
        assert!(matches!(
            check_pool(&d.path().join("nope"), MediumKind::DRAM),
            Err(Error::NotFound(_))
        ));
        assert!(matches!(
            check_pool(d.path(), MediumKind::DRAM),
            Err(Error::IsDirectory(_))
        ));
        assert!(matches!(
            check_pool(&p, MediumKind::Custom),
            Err(Error::InvalidConfig(_))
        ));
        // While a check holds its shared lock, the pool cannot be opened.
        let f = open_shared(&p).unwrap();
        assert!(matches!(
            Pool::open(&p, small_config()),
            Err(Error::AlreadyOpen(_))
        ));
        drop(f);
        Pool::open(&p, small_config()).unwrap();
    }

    #[test]
    fn read_only_file_can_be_checked() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir_in("/dev/shm").unwrap();
        let p = populated(&d);
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o444)).unwrap();
        let r = check_pool(&p, MediumKind::DRAM).unwrap();
        assert!(r.is_ok(), "{r}");
    }

    fn patch(p: &Path, off: usize, bytes: &[u8]) {
        let mut b = std::fs::read(p).unwrap();
        b[off..off + bytes.len()].copy_from_slice(bytes);
        std::fs::write(p, b).unwrap();
    }

    fn read_sb(p: &Path, copy: usize) -> Superblock {
        let b = std::fs::read(p).unwrap();
        let off = copy * SUPERBLOCK_SIZE;
        bytemuck::pod_read_unaligned(&b[off..off + std::mem::size_of::<Superblock>()])
    }

    #[test]
    fn superblock_problems_and_warnings() {
        let d = tempfile::tempdir_in("/dev/shm").unwrap();
        let p = populated(&d);
        let r0 = check_pool(&p, MediumKind::DRAM).unwrap();
        let cur = r0.current.unwrap();
        // A torn older copy: a warning only. (The byte is flipped, not set: it lies in
        // the random uuid, which may hold any value.)
        let at = (1 - cur) * SUPERBLOCK_SIZE + 20;
        patch(&p, at, &[!std::fs::read(&p).unwrap()[at]]);
        let r = check_pool(&p, MediumKind::DRAM).unwrap();
        assert!(r.is_ok(), "{r}");
        assert_eq!(r.warnings.len(), 1, "{r}");
        assert!(r.warnings[0].contains("checksum"), "{r}");
        // Both bad: problems naming each copy.
        patch(&p, cur * SUPERBLOCK_SIZE, b"NOTAPOOL");
        let r = check_pool(&p, MediumKind::DRAM).unwrap();
        assert!(!r.is_ok());
        let text = r.to_string();
        assert!(text.contains("copy A") && text.contains("copy B"), "{text}");
        assert!(text.contains("bad magic"), "{text}");
        assert!(text.contains("checksum mismatch"), "{text}");
    }

    #[test]
    fn padding_after_the_checksum_is_not_compared() {
        let d = tempfile::tempdir_in("/dev/shm").unwrap();
        let p = populated(&d);
        // Both copies the same (as in a new pool): the current one, written twice.
        let (a, b) = (read_sb(&p, 0), read_sb(&p, 1));
        let b = if a.seq > b.seq { a } else { b };
        patch(&p, 0, bytemuck::bytes_of(&b));
        patch(&p, SUPERBLOCK_SIZE, bytemuck::bytes_of(&b));
        assert!(check_pool(&p, MediumKind::DRAM).unwrap().is_ok());
        patch(
            &p,
            SUPERBLOCK_SIZE,
            bytemuck::bytes_of(&Superblock { _pad2: 7, ..b }),
        );
        let r = check_pool(&p, MediumKind::DRAM).unwrap();
        assert!(r.is_ok() && r.warnings.is_empty(), "{r}");
        patch(
            &p,
            SUPERBLOCK_SIZE,
            bytemuck::bytes_of(
                &Superblock {
                    max_threads: 1,
                    ..b
                }
                .seal(),
            ),
        );
        let r = check_pool(&p, MediumKind::DRAM).unwrap();
        assert!(
            r.problems[0].contains(&format!("both have sequence number {} but differ", b.seq)),
            "{r}"
        );
    }

    #[test]
    fn copies_that_disagree_are_a_problem() {
        let d = tempfile::tempdir_in("/dev/shm").unwrap();
        let p = populated(&d);
        let a = read_sb(&p, 0);
        let other = Superblock { uuid: [9; 16], ..a }.seal();
        let cur = check_pool(&p, MediumKind::DRAM).unwrap().current.unwrap();
        let older = if cur == 0 { 1 } else { 0 };
        let older_sb = read_sb(&p, older);
        let forged = Superblock {
            seq: older_sb.seq,
            run_generation: older_sb.run_generation,
            ..other
        }
        .seal();
        patch(&p, older * SUPERBLOCK_SIZE, bytemuck::bytes_of(&forged));
        let r = check_pool(&p, MediumKind::DRAM).unwrap();
        assert!(!r.is_ok());
        assert!(r.problems.iter().any(|x| x.contains("uuid")), "{r}");
    }

    #[test]
    fn geometry_problems_stop_the_check() {
        let d = tempfile::tempdir_in("/dev/shm").unwrap();
        let p = populated(&d);
        for copy in 0..2 {
            let sb = read_sb(&p, copy);
            let bad = Superblock {
                pool_size: sb.pool_size + 4096,
                max_size: sb.max_size + 4096,
                root_slot_offset: 0x10,
                engine_id: 77,
                ..sb
            }
            .seal();
            patch(&p, copy * SUPERBLOCK_SIZE, bytemuck::bytes_of(&bad));
        }
        let r = check_pool(&p, MediumKind::DRAM).unwrap();
        assert_eq!(r.problems.len(), 3, "{r}");
        assert!(r.problems[0].contains("superblock says"), "{r}");
        assert!(r.problems[1].contains("root slot"), "{r}");
        assert!(r.problems[2].contains("engine id 77"), "{r}");
        assert!(r.usage.is_none() && r.engine_state.is_none());
    }

    #[test]
    fn tiny_file_is_a_problem_not_an_error() {
        let d = tempfile::tempdir_in("/dev/shm").unwrap();
        let p = d.path().join("tiny");
        std::fs::write(&p, [0u8; 100]).unwrap();
        let r = check_pool(&p, MediumKind::DRAM).unwrap();
        assert_eq!(r.problems.len(), 1);
        assert!(r.problems[0].contains("100 bytes"), "{r}");
        let p = d.path().join("zeros");
        std::fs::write(&p, vec![0u8; 1 << 20]).unwrap();
        let r = check_pool(&p, MediumKind::DRAM).unwrap();
        assert!(!r.is_ok());
        assert!(r.to_string().contains("bad magic"), "{r}");
    }

    #[test]
    fn allocator_problems_are_all_listed() {
        let d = tempfile::tempdir_in("/dev/shm").unwrap();
        let p = populated(&d);
        let l = check_pool(&p, MediumKind::DRAM).unwrap().layout.unwrap();
        let last = l.slab_count - 1;
        patch(
            &p,
            l.slab_table_offset + 4 * last,
            &0x7000_0000u32.to_ne_bytes(),
        );
        patch(
            &p,
            l.slab_table_offset + 4 * (last - 1),
            &0x3000_0005u32.to_ne_bytes(),
        );
        let before = crc(&p);
        let r = check_pool(&p, MediumKind::DRAM).unwrap();
        assert_eq!(crc(&p), before);
        let alloc: Vec<_> = r
            .problems
            .iter()
            .filter(|x| x.starts_with("allocator:"))
            .collect();
        assert_eq!(alloc.len(), 2, "{r}");
        assert!(!r.recovery_ok, "no dry run over a broken allocator");
    }

    /// Append a record to slot 0's log of a closed pool file.
    fn append_record(p: &Path, build: impl FnOnce(&Heap, &mut RecordBuilder)) {
        let m = crate::heap::superblock::open_pool_file(p, MediumKind::DRAM).unwrap();
        let heap = Heap::open(m).unwrap();
        let l = *heap.layout();
        let (off, len) = (l.log_offset(0), l.log_bytes_per_thread);
        // Start an empty log (the pool was closed cleanly: its records are written
        // back) and append one record to it.
        let next_seq = log::parse(&heap, off, len).next_seq;
        log::reset(&heap, off, next_seq);
        heap.fence();
        let mut w = LogWriter::new(off, len, next_seq);
        let mut rb = RecordBuilder::default();
        build(&heap, &mut rb);
        let wm = crate::engine::kit::log::watermark::load(&heap)
            .unwrap()
            .unwrap_or(0);
        w.append(&heap, rb.bytes(), wm + 10);
        heap.fence();
    }

    #[test]
    fn log_record_writing_outside_the_heap_is_a_problem() {
        let d = tempfile::tempdir_in("/dev/shm").unwrap();
        let p = populated(&d);
        append_record(&p, |_, rb| rb.word(0x20, 1)); // into the superblock
        let before = crc(&p);
        let r = check_pool(&p, MediumKind::DRAM).unwrap();
        assert_eq!(crc(&p), before);
        assert!(
            r.problems
                .iter()
                .any(|x| x.starts_with("pisces: log:") && x.contains("outside the heap")),
            "{r}"
        );
        let st = r.engine_state.unwrap();
        assert!(
            st.lines.iter().any(|l| l.contains("per slot: 1 ")),
            "{st:?}"
        );
    }

    #[test]
    fn dry_run_catches_an_allocation_into_a_slab_of_another_class() {
        let d = tempfile::tempdir_in("/dev/shm").unwrap();
        let p = populated(&d);
        let r = check_pool(&p, MediumKind::DRAM).unwrap();
        let l = r.layout.unwrap();
        // The root (256 bytes) lives in a slab of the 320-byte class; log the allocation
        // of a 32-byte block there (its geometry is a valid class-32 block start: the
        // bitmap of a 32-byte slab takes 256 bytes).
        let slab = (r.root.unwrap().offset as usize - HEADER - l.heap_offset) / SLAB_SIZE;
        append_record(&p, |_, rb| {
            rb.alloc(Block {
                offset: (l.slab_offset(slab) + 256 + 32 * 10) as u64,
                size: 32,
            })
        });
        let r = check_pool(&p, MediumKind::DRAM).unwrap();
        assert!(!r.is_ok());
        assert!(r.problems[0].starts_with("recovery would fail"), "{r}");
        // And opening the pool indeed refuses it.
        assert!(matches!(
            Pool::open(&p, small_config()),
            Err(Error::Corrupt(_))
        ));
    }

    #[test]
    fn root_pointing_at_a_free_block_is_a_problem() {
        let d = tempfile::tempdir_in("/dev/shm").unwrap();
        let p = populated(&d);
        let r = check_pool(&p, MediumKind::DRAM).unwrap();
        let root = r.root.unwrap();
        // Point the root at a free block of the root's slab, with a huge size.
        append_record(&p, |_, rb| {
            rb.word((ROOT_SLOT_OFFSET + HEADER) as u64, root.offset + 4096);
            rb.word((ROOT_SLOT_OFFSET + HEADER + 8) as u64, 1 << 20);
        });
        let r = check_pool(&p, MediumKind::DRAM).unwrap();
        let text = r.to_string();
        assert!(r.recovery_ok, "{text}");
        assert!(
            r.problems
                .iter()
                .any(|x| x.contains("not allocated") || x.contains("not the payload")),
            "{text}"
        );
    }

    /// A pool of format 3 keeps no root record, so its root slot zeroed by damage
    /// looks like a pool without a root: with objects allocated, that is a problem
    /// (nothing leads to them), never a warning beside an OK verdict.
    #[test]
    fn an_empty_root_slot_beside_objects_is_a_problem() {
        let d = tempfile::tempdir_in("/dev/shm").unwrap();
        let p = populated(&d);
        for copy in 0..2 {
            let sb = read_sb(&p, copy);
            let old = Superblock {
                format_version: 3,
                root_offset: 0,
                root_tag: 0,
                open_state: 0,
                unclean_opens: 0,
                dirty_shutdowns_seen: 0,
                ..sb
            }
            .seal();
            patch(&p, copy * SUPERBLOCK_SIZE, bytemuck::bytes_of(&old));
        }
        let r = check_pool(&p, MediumKind::DRAM).unwrap();
        assert!(r.is_ok(), "an undamaged format-3 pool: {r}");
        patch(&p, ROOT_SLOT_OFFSET + HEADER, &[0u8; 16]);
        let r = check_pool(&p, MediumKind::DRAM).unwrap();
        assert_eq!(r.verdict(), Verdict::Problems, "{r}");
        assert!(
            r.problems
                .iter()
                .any(|x| x.contains("35 objects are allocated but the root slot is empty")),
            "{r}"
        );
        assert!(
            r.summary_line().ends_with("1 problem"),
            "{}",
            r.summary_line()
        );
    }

    /// A pool that never had objects has an empty root slot and is OK, on every
    /// engine of this format (none allocates heap objects of its own at creation).
    #[test]
    fn fresh_pools_of_every_engine_are_ok() {
        let d = tempfile::tempdir_in("/dev/shm").unwrap();
        for &engine in EngineId::ALL
            .iter()
            .filter(|e| e.available() && e.is_durable() && !e.has_own_pool_format())
        {
            let p = d.path().join(format!("{engine}.pool"));
            drop(Pool::create(&p, small_config().engine(engine)).unwrap());
            let r = check_pool_deep(&p, MediumKind::DRAM).unwrap();
            assert_eq!(r.verdict(), Verdict::Ok, "{engine}: {r}");
            assert_eq!(r.root.unwrap().offset, 0, "{engine}");
        }
    }

    #[test]
    fn human_sizes() {
        assert_eq!(human_bytes(100), "100 B");
        assert_eq!(human_bytes(1536), "1.5 KiB");
        assert_eq!(human_bytes(64 << 20), "64.0 MiB");
        assert_eq!(blocks_per_slab(16), 4064);
    }
}
