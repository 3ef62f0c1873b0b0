//! Pool files: creating and opening them, and the two file-backed media
//! ([`MediumKind::Dax`] and [`MediumKind::File`]).
//!
//! # Opening a pool file
//! [`create_file`] and [`open_file`] do every operating-system check up front and turn
//! each failure into its own [`Error`] variant (never a panic), without modifying the
//! file when they fail:
//!
//! | condition                                   | error                         |
//! |---------------------------------------------|-------------------------------|
//! | path missing (open)                         | [`Error::NotFound`]           |
//! | path exists (create)                        | [`Error::AlreadyExists`]      |
//! | path is a directory                         | [`Error::IsDirectory`]        |
//! | no write permission bit, `EACCES`, `EROFS`  | [`Error::ReadOnly`]           |
//! | shorter than [`MIN_POOL_FILE_SIZE`]         | [`Error::TooSmall`]           |
//! | another process holds its lock              | [`Error::Locked`]             |
//! | this process holds its lock (open already)  | [`Error::AlreadyOpen`]        |
//! | size too small / not page multiple (create) | [`Error::InvalidConfig`]      |
//! | [`MediumKind::Custom`], not a regular file | [`Error::InvalidConfig`]    |
//! | DAX requested on a non-DAX file system      | [`Error::MediumUnsupported`]  |
//!
//! The read-only check looks at the permission bits as well as at `open(2)`: the
//! library often runs as root, for whom opening a `0444` file for writing succeeds.
//!
//! The pool is locked with `flock(LOCK_EX | LOCK_NB)` on the opened descriptor, and the
//! medium owns that descriptor ([`super::locked_file::LockedFile`]), so the lock lives exactly as long as
//! the mapping. A `flock` lock belongs to the open file description, so a second
//! `open_file` of the same pool in the *same* process is refused too.
//!
//! [`create_file`] creates the file exclusively, takes the lock, sets its length and
//! reserves its blocks (`posix_fallocate`, so that a full file system is an error now
//! rather than a `SIGBUS` on a later store into a hole), then maps it. If anything
//! fails after the file was created, the file is removed again.
//!
//! # The media
//! * [`DaxMedium`]: `mmap(MAP_SHARED_VALIDATE | MAP_SYNC)`. With `MAP_SYNC` the file
//!   system keeps the block mapping durable at page-fault time, so a cache-line flush
//!   plus `sfence` is durability. Only DAX file systems accept it; elsewhere the result
//!   is [`Error::MediumUnsupported`] naming the two fallbacks.
//! * [`FileMedium`]: an ordinary `MAP_SHARED` mapping. `flush` executes the flush
//!   instructions (so that its CPU cost is that of the real thing) and records the
//!   flushed pages for the calling thread; `fence` `msync(MS_SYNC)`s the pages this
//!   thread flushed since its last fence. Slow, but durable on any file system.

use super::domain::{resolve, DomainRequest, SysfsProbe};
use super::dram::DramMedium;
use super::durability::{choose, Choice, FileSystem};
use super::file::{DaxMedium, FileMedium};
use super::reserve::map_len;
use super::PAGE;
use super::{Medium, MediumKind};
use crate::{Error, Result};
use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

use std::sync::Arc;

/// The smallest file a pool can live in: the pool format's minimum size
/// (`heap::layout::MIN_POOL_SIZE`: the fixed areas, one small log and a few slabs).
/// Stated here as a number so that the medium does not depend on the heap above it;
/// the heap's layout asserts at compile time that the two agree.
pub(crate) const MIN_POOL_FILE_SIZE: u64 = 294_912;

/// Create a new pool file of `size` bytes (zero-filled) and map it as `kind`.
///
/// Fails with [`Error::AlreadyExists`] if `path` exists, and with
/// [`Error::InvalidConfig`] if `size` is below `MIN_POOL_FILE_SIZE` or not a multiple of
/// 4096, or `kind` is [`MediumKind::Custom`]. On any failure after the file was
/// created, the file is removed.
#[cfg_attr(not(feature = "tools"), allow(dead_code))] // read by the tools only
pub fn create_file(path: &Path, size: u64, kind: MediumKind) -> Result<Arc<dyn Medium>> {
    create_file_growable(path, size, size, kind)
}

/// As [`create_file`], for a pool that may grow to `max_size` bytes: the mapping
/// reserves `max_size` bytes of address space so that it never moves when the pool
/// grows. `max_size == size` is a pool that cannot grow. [`Error::InvalidConfig`] if
/// `max_size` is below `size` or not a multiple of 4096.
#[cfg_attr(not(feature = "tools"), allow(dead_code))] // read by the tools only
pub fn create_file_growable(
    path: &Path,
    size: u64,
    max_size: u64,
    kind: MediumKind,
) -> Result<Arc<dyn Medium>> {
    create_pool_file(path, size, max_size, MediumRequest::exactly(kind)).map(|o| o.medium)
}

/// What a configuration asks of a pool file's medium.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct MediumRequest {
    /// The medium named; `None`: the one the file system calls for
    /// ([`super::durability`]).
    pub kind: Option<MediumKind>,
    /// Allow the DRAM medium on a file system that outlives power loss.
    pub allow_volatile: bool,
    /// What is asked of the persistence domain.
    pub domain: DomainRequest,
    /// Take the pool's lock shared (several processes open the pool at once), not
    /// exclusive.
    pub shared: bool,
}

impl MediumRequest {
    /// Exactly the medium `kind` (the DRAM medium on any file system), under the
    /// platform's domain: the low-level tools' request.
    pub(crate) fn exactly(kind: MediumKind) -> MediumRequest {
        MediumRequest {
            kind: Some(kind),
            allow_volatile: true,
            domain: DomainRequest::default(),
            shared: false,
        }
    }
}

/// A pool file's medium, and the warnings of a persistence domain forced against the
/// platform ([`super::domain`]) and of the DRAM medium forced onto a disk
/// ([`super::durability`]).
pub(crate) struct Opened {
    /// The medium.
    pub medium: Arc<dyn Medium>,
    /// Set when `eadr` was forced where the platform reports otherwise.
    pub domain_warning: Option<String>,
    /// Set when the DRAM medium was forced onto a file system that outlives power loss.
    pub medium_warning: Option<String>,
}

/// [`create_file_growable`] for the medium and domain `req` asks for.
pub(crate) fn create_pool_file(
    path: &Path,
    size: u64,
    max_size: u64,
    req: MediumRequest,
) -> Result<Opened> {
    if let Some(kind) = req.kind {
        check_kind(kind)?;
    }
    if max_size < size || max_size & (PAGE as u64 - 1) != 0 {
        return Err(Error::invalid_config(format!(
            "maximum pool size {max_size} must be a multiple of {PAGE} bytes and at least the size {size}"
        )));
    }
    let Ok(max_len) = usize::try_from(max_size) else {
        return Err(Error::invalid_config(format!(
            "maximum pool size {max_size} does not fit in this machine's address space"
        )));
    };
    if size < MIN_POOL_FILE_SIZE {
        return Err(Error::invalid_config(format!(
            "pool size {size} is below the minimum of {MIN_POOL_FILE_SIZE} bytes"
        )));
    }
    if size & (PAGE as u64 - 1) != 0 {
        return Err(Error::invalid_config(format!(
            "pool size {size} is not a multiple of {PAGE} bytes"
        )));
    }
    if usize::try_from(size).is_err() {
        return Err(Error::invalid_config(format!(
            "pool size {size} does not fit in this machine's address space"
        )));
    }
    // `symlink_metadata` so that a dangling symlink also counts as "exists" (create_new
    // would refuse it anyway, with the same error).
    if path.symlink_metadata().is_ok() {
        return Err(Error::AlreadyExists(path.to_path_buf().into()));
    }
    let file = match OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            return Err(Error::AlreadyExists(path.to_path_buf().into()))
        }
        Err(e) if is_read_only_errno(&e) => return Err(Error::ReadOnly(path.to_path_buf().into())),
        Err(e) => {
            return Err(Error::io(
                format!("creating pool file {}", path.display()),
                e,
            ))
        }
    };
    // From here on the file exists and is ours: remove it on any failure.
    let result = (|| {
        // Lock before giving the file its length: a concurrent `open_file` sees either
        // a too-small file (and refuses it) or a file that is already locked.
        lock(&file, path, false)?;
        file.set_len(size)
            .map_err(|e| Error::io(format!("setting the length of {}", path.display()), e))?;
        reserve(&file, size, path)?;
        map_kind(file, req, path, max_len)
    })();
    if result.is_err() {
        // Best effort: the original error is the one worth reporting.
        let _ = std::fs::remove_file(path);
    }
    result
}

/// Open an existing pool file and map it as `kind`.
///
/// Fails with [`Error::NotFound`], [`Error::IsDirectory`], [`Error::ReadOnly`],
/// [`Error::TooSmall`], [`Error::Locked`] (another process holds the pool's lock),
/// [`Error::AlreadyOpen`] (this process does), [`Error::InvalidConfig`] (simulated kind, not a regular
/// file) or [`Error::MediumUnsupported`] (DAX on a non-DAX file system). The file is
/// not modified when opening fails.
#[cfg_attr(not(feature = "tools"), allow(dead_code))] // read by the tools only
pub fn open_file(path: &Path, kind: MediumKind) -> Result<Arc<dyn Medium>> {
    open_file_reserving(path, MediumRequest::exactly(kind), map_len).map(|o| o.medium)
}

/// [`open_file`], reserving `max_len(file)` bytes of address space for the mapping
/// (the pool's maximum size: what the pool format records, which this layer does not
/// read), so the medium can grow in place, for the medium and domain `req` asks for.
pub(crate) fn open_file_reserving(
    path: &Path,
    req: MediumRequest,
    max_len: impl FnOnce(&File) -> Result<usize>,
) -> Result<Opened> {
    if let Some(kind) = req.kind {
        check_kind(kind)?;
    }
    let file = open_locked(path, req.shared)?;
    let max_len = max_len(&file)?.max(map_len(&file)?);
    map_kind(file, req, path, max_len)
}

fn check_kind(kind: MediumKind) -> Result<()> {
    if kind == MediumKind::Custom {
        return Err(Error::invalid_config(
            "a custom medium is not backed by a pool file: give it to Pool::create_on / Pool::open_on",
        ));
    }
    Ok(())
}

/// The metadata of `path`, which must exist and be a regular file (a distinct error
/// for a missing file, a directory, anything else).
pub(crate) fn pool_file_metadata(path: &Path) -> Result<std::fs::Metadata> {
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Err(Error::NotFound(path.to_path_buf().into()))
        }
        Err(e) => return Err(Error::io(format!("inspecting {}", path.display()), e)),
    };
    if meta.is_dir() {
        return Err(Error::IsDirectory(path.to_path_buf().into()));
    }
    if !meta.is_file() {
        return Err(Error::invalid_config(format!(
            "{} is not a regular file",
            path.display()
        )));
    }
    Ok(meta)
}

/// Open `path` read-write after checking it is a writable regular file of at least
/// [`MIN_POOL_FILE_SIZE`] bytes, and take its lock (`shared`: a shared lock, which
/// other shared openers may hold too; else exclusive).
fn open_locked(path: &Path, shared: bool) -> Result<File> {
    let meta = pool_file_metadata(path)?;
    // Root can open a 0444 file for writing; a pool nobody may write is still refused.
    if meta.permissions().mode() & 0o222 == 0 {
        return Err(Error::ReadOnly(path.to_path_buf().into()));
    }
    let file = match OpenOptions::new().read(true).write(true).open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Err(Error::NotFound(path.to_path_buf().into()))
        }
        Err(e) if e.raw_os_error() == Some(libc::EISDIR) => {
            return Err(Error::IsDirectory(path.to_path_buf().into()))
        }
        Err(e) if is_read_only_errno(&e) => return Err(Error::ReadOnly(path.to_path_buf().into())),
        Err(e) => return Err(Error::io(format!("opening {}", path.display()), e)),
    };
    // Check the descriptor we hold, not the path (which may have been replaced meanwhile).
    let meta = file
        .metadata()
        .map_err(|e| Error::io(format!("inspecting {}", path.display()), e))?;
    if !meta.is_file() {
        return Err(Error::invalid_config(format!(
            "{} is not a regular file",
            path.display()
        )));
    }
    if meta.len() < MIN_POOL_FILE_SIZE {
        return Err(Error::TooSmall(Box::new(crate::error::TooSmall {
            path: path.to_path_buf(),
            len: meta.len(),
            min: MIN_POOL_FILE_SIZE,
        })));
    }
    if usize::try_from(meta.len()).is_err() {
        return Err(Error::invalid_config(format!(
            "{} is {} bytes, more than this machine can map",
            path.display(),
            meta.len()
        )));
    }
    lock(&file, path, shared)?;
    // A non-cooperating writer could have truncated the file between the size check
    // and the lock; check again now that the pool is ours.
    let len = file
        .metadata()
        .map_err(|e| Error::io(format!("inspecting {}", path.display()), e))?
        .size();
    if len < MIN_POOL_FILE_SIZE {
        return Err(Error::TooSmall(Box::new(crate::error::TooSmall {
            path: path.to_path_buf(),
            len,
            min: MIN_POOL_FILE_SIZE,
        })));
    }
    Ok(file)
}

fn is_read_only_errno(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EACCES) | Some(libc::EROFS) | Some(libc::EPERM)
    )
}

/// Take the advisory lock of the pool on `file`'s open file description: exclusive, or
/// `shared` with other shared openers (an exclusive holder refuses both, and shared
/// holders refuse an exclusive one).
fn lock(file: &File, path: &Path, shared: bool) -> Result<()> {
    let mode = if shared { libc::LOCK_SH } else { libc::LOCK_EX };
    loop {
        // SAFETY: `file` owns a valid descriptor for the duration of the call; flock
        // touches no memory.
        let rc = unsafe { libc::flock(file.as_raw_fd(), mode | libc::LOCK_NB) };
        if rc == 0 {
            return Ok(());
        }
        let e = io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EINTR) => continue,
            Some(libc::EWOULDBLOCK) => return Err(lock_conflict(file, path)),
            _ => return Err(Error::io(format!("locking {}", path.display()), e)),
        }
    }
}

/// The error for a pool whose advisory lock is taken: [`Error::AlreadyOpen`] if this
/// process holds it, else [`Error::Locked`].
///
/// Who holds an `flock` lock is read from `/proc/locks` (lines `N: FLOCK ADVISORY WRITE
/// pid major:minor:inode 0 EOF`, device numbers in hex), matched by the file's device
/// and inode: that covers every open of this process (pools, `pisces check`, a lock
/// taken outside the library) without a registry that could go stale. If
/// `/proc/locks` cannot be read or names no holder, the error is `Locked`.
pub(crate) fn lock_conflict(file: &File, path: &Path) -> Error {
    let held_here = file
        .metadata()
        .ok()
        .and_then(|m| held_by_pid(m.dev(), m.ino(), std::process::id()));
    if held_here == Some(true) {
        Error::AlreadyOpen(path.to_path_buf().into())
    } else {
        Error::Locked(path.to_path_buf().into())
    }
}

/// Whether `/proc/locks` shows an `FLOCK` on (`dev`, `ino`) held by `pid` (`None` if
/// it cannot be read or shows no lock on the file).
fn held_by_pid(dev: u64, ino: u64, pid: u32) -> Option<bool> {
    let text = std::fs::read_to_string("/proc/locks").ok()?;
    // glibc's encoding of dev_t (gnu_dev_major / gnu_dev_minor).
    let major = ((dev >> 8) & 0xfff) | ((dev >> 32) & !0xfff);
    let minor = (dev & 0xff) | ((dev >> 12) & !0xff);
    let mut found = None;
    for line in text.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        // Blocked waiters are listed as "N: -> FLOCK ..."; only holders count.
        if f.len() < 6 || f[1] != "FLOCK" {
            continue;
        }
        let mut id = f[5].split(':');
        let (Some(ma), Some(mi), Some(i)) = (id.next(), id.next(), id.next()) else {
            continue;
        };
        let same = u64::from_str_radix(ma, 16).ok() == Some(major)
            && u64::from_str_radix(mi, 16).ok() == Some(minor)
            && i.parse::<u64>().ok() == Some(ino);
        if same {
            let here = f[4].parse::<u32>().ok() == Some(pid);
            found = Some(found.unwrap_or(false) || here);
        }
    }
    found
}

/// Reserve the blocks of a fresh pool file, so a full file system fails here and not
/// with `SIGBUS` on a store into the mapping later.
fn reserve(file: &File, size: u64, path: &Path) -> Result<()> {
    let Ok(len) = libc::off_t::try_from(size) else {
        return Err(Error::invalid_config(format!(
            "pool size {size} is too large"
        )));
    };
    loop {
        // SAFETY: `file` owns a valid descriptor; posix_fallocate touches no memory of
        // ours. It returns the error number instead of setting errno.
        let rc = unsafe { libc::posix_fallocate(file.as_raw_fd(), 0, len) };
        match rc {
            0 => return Ok(()),
            libc::EINTR => continue,
            // Not supported by the file system (glibc emulates it in most such cases):
            // the file keeps its holes, as with set_len alone.
            libc::EOPNOTSUPP => return Ok(()),
            e => {
                return Err(Error::io(
                    format!(
                        "reserving {size} bytes for {} (is the file system full?)",
                        path.display()
                    ),
                    io::Error::from_raw_os_error(e),
                ))
            }
        }
    }
}

fn map_kind(file: File, req: MediumRequest, path: &Path, max_len: usize) -> Result<Opened> {
    let fs = FileSystem::of_file(&file).map_err(|e| {
        Error::io(
            format!("inspecting the file system of {}", path.display()),
            e,
        )
    })?;
    let (choice, medium_warning) = choose(req.kind, fs, req.allow_volatile)?;
    let kind = match choice {
        Choice::Named(kind) => kind,
        Choice::DaxOrFile => {
            // Only a DAX file system accepts MAP_SYNC: try it on a second descriptor of
            // the same open file description (which shares the pool's lock), and fall
            // back to the file medium on a refusal.
            let dup = file.try_clone().map_err(|e| {
                Error::io(
                    format!("duplicating the descriptor of {}", path.display()),
                    e,
                )
            })?;
            match DaxMedium::from_file(dup, max_len) {
                Ok(dax) => {
                    drop(file);
                    let detected = SysfsProbe::default().detect_for_path(path);
                    let (domain, domain_warning) =
                        resolve(MediumKind::Dax, Some(&detected), req.domain)?;
                    return Ok(Opened {
                        medium: Arc::new(dax.with_domain(domain)),
                        domain_warning,
                        medium_warning,
                    });
                }
                Err(Error::MediumUnsupported(_)) => MediumKind::File,
                Err(e) => return Err(e),
            }
        }
    };
    // The platform is asked about DAX files only: the other media are not persistent
    // memory (DRAM emulates either domain, a plain file is durable through msync).
    let detected = (kind == MediumKind::Dax).then(|| SysfsProbe::default().detect_for_path(path));
    let (domain, domain_warning) = resolve(kind, detected.as_ref(), req.domain).map_err(|e| {
        match (e, req.kind) {
            // The medium was chosen here, not by the caller: say why.
            (Error::InvalidConfig(m), None) => Error::invalid_config(format!(
                "{m} ({} is on {}, which gets the {} medium when none is named)",
                path.display(),
                fs.name(),
                kind.name()
            )),
            (e, _) => e,
        }
    })?;
    let medium: Arc<dyn Medium> = match kind {
        MediumKind::Dram {
            write_latency_ns,
            bandwidth_bytes_per_sec,
        } => Arc::new(
            DramMedium::from_file(file, max_len, write_latency_ns, bandwidth_bytes_per_sec)?
                .with_domain(domain),
        ),
        MediumKind::Dax => Arc::new(
            DaxMedium::from_file(file, max_len)
                .map_err(|e| match e {
                    Error::MediumUnsupported(m) => {
                        Error::medium_unsupported(format!("{}: {m}", path.display()))
                    }
                    other => other,
                })?
                .with_domain(domain),
        ),
        MediumKind::File => Arc::new(FileMedium::from_file(file, max_len)?),
        MediumKind::Custom => {
            return Err(Error::invalid_config(
                "a custom medium is not backed by a pool file",
            ))
        }
    };
    Ok(Opened {
        medium,
        domain_warning,
        medium_warning,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Seek, SeekFrom, Write};
    use std::path::PathBuf;

    const SIZE: u64 = MIN_POOL_FILE_SIZE.next_multiple_of(4096) + 4096;

    fn dram() -> MediumKind {
        MediumKind::DRAM
    }

    fn tmpdir() -> tempfile::TempDir {
        tempfile::tempdir().expect("temp dir")
    }

    fn file_bytes(p: &Path) -> Vec<u8> {
        std::fs::read(p).expect("read back")
    }

    fn store(m: &dyn Medium, off: usize, v: u64) {
        assert!(off + 8 <= m.len() && off & 7 == 0);
        // SAFETY: in bounds (asserted) and 8-aligned; the test owns the medium.
        unsafe { (m.base().add(off) as *mut u64).write(v) };
    }

    fn load(m: &dyn Medium, off: usize) -> u64 {
        assert!(off + 8 <= m.len() && off & 7 == 0);
        // SAFETY: as in `store`.
        unsafe { (m.base().add(off) as *const u64).read() }
    }

    #[test]
    fn create_rejects_existing_bad_sizes_and_simulated() {
        let d = tmpdir();
        let p = d.path().join("pool");
        std::fs::write(&p, b"precious").unwrap();
        assert!(matches!(
            create_file(&p, SIZE, dram()),
            Err(Error::AlreadyExists(q)) if *q == p
        ));
        assert_eq!(file_bytes(&p), b"precious");

        let q = d.path().join("q");
        for bad in [0, MIN_POOL_FILE_SIZE - 4096, SIZE + 1, SIZE + 100] {
            assert!(
                matches!(create_file(&q, bad, dram()), Err(Error::InvalidConfig(_))),
                "size {bad}"
            );
            assert!(!q.exists(), "nothing created for size {bad}");
        }
        assert!(matches!(
            create_file(&q, SIZE, MediumKind::Custom),
            Err(Error::InvalidConfig(_))
        ));
        assert!(!q.exists());
        // A directory is "exists" for create.
        assert!(matches!(
            create_file(d.path(), SIZE, dram()),
            Err(Error::AlreadyExists(_))
        ));
    }

    #[test]
    fn open_reports_each_os_level_failure_distinctly() {
        let d = tmpdir();
        let missing = d.path().join("missing");
        assert!(matches!(open_file(&missing, dram()), Err(Error::NotFound(p)) if *p == missing));
        assert!(!missing.exists());

        assert!(matches!(
            open_file(d.path(), dram()),
            Err(Error::IsDirectory(p)) if *p == d.path()
        ));

        let small = d.path().join("small");
        std::fs::write(&small, vec![7u8; 4096]).unwrap();
        match open_file(&small, dram()) {
            Err(Error::TooSmall(t)) => {
                let want = crate::error::TooSmall {
                    path: small.clone(),
                    len: 4096,
                    min: MIN_POOL_FILE_SIZE,
                };
                assert_eq!(*t, want);
            }
            other => panic!("expected TooSmall, got {:?}", other.err()),
        }
        assert_eq!(file_bytes(&small), vec![7u8; 4096]);

        let ro = d.path().join("ro");
        drop(create_file(&ro, SIZE, dram()).unwrap());
        std::fs::set_permissions(&ro, std::fs::Permissions::from_mode(0o444)).unwrap();
        // We run as root: the open(2) itself would succeed; the bits decide.
        assert!(matches!(open_file(&ro, dram()), Err(Error::ReadOnly(p)) if *p == ro));
        assert!(matches!(
            open_file(&ro, MediumKind::File),
            Err(Error::ReadOnly(_))
        ));
        std::fs::set_permissions(&ro, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert!(open_file(&ro, dram()).is_ok());

        assert!(matches!(
            open_file(&ro, MediumKind::Custom),
            Err(Error::InvalidConfig(_))
        ));
        assert!(matches!(
            open_file(Path::new("/dev/null"), dram()),
            Err(Error::InvalidConfig(_))
        ));
    }

    #[test]
    fn the_lock_is_per_open_and_lives_as_long_as_the_medium() {
        let d = tmpdir();
        let p = d.path().join("pool");
        let kinds = [dram(), MediumKind::File];
        let first = create_file(&p, SIZE, dram()).unwrap();
        for k in kinds {
            // Same process, second open file description: refused.
            assert!(matches!(open_file(&p, k), Err(Error::AlreadyOpen(q)) if *q == p));
        }
        drop(first);
        for k in kinds {
            let m = open_file(&p, k).unwrap();
            assert!(matches!(open_file(&p, dram()), Err(Error::AlreadyOpen(_))));
            drop(m);
        }
        // Another process (flock(1) from util-linux, if present) sees the lock too.
        let m = open_file(&p, MediumKind::File).unwrap();
        if let Ok(out) = std::process::Command::new("flock")
            .args(["-n", "-E", "42"])
            .arg(&p)
            .arg("true")
            .output()
        {
            assert_eq!(out.status.code(), Some(42), "other process got the lock");
        }
        drop(m);
        // Lock released: a plain flock(2) on a new descriptor succeeds.
        let f = File::open(&p).unwrap();
        lock(&f, &p, false).unwrap();
        assert!(matches!(open_file(&p, dram()), Err(Error::AlreadyOpen(_))));
    }

    /// A child forked while the pool is open holds a duplicate of its descriptor until
    /// its `exec`; closing the pool must end the lock all the same, or an open right
    /// after the close is refused (as another thread's `Command::spawn` at the wrong
    /// moment would make it).
    #[test]
    fn a_closed_pool_is_unlocked_while_a_forked_child_has_not_reached_exec() {
        use std::os::unix::process::CommandExt;
        let d = tmpdir();
        let p = d.path().join("pool");
        let m = create_file(&p, SIZE, dram()).unwrap();
        let (mut forked, tell) = std::io::pipe().unwrap();
        let tell_fd = tell.as_raw_fd();
        let child = std::thread::spawn(move || {
            let mut c = std::process::Command::new("true");
            // SAFETY: the closure runs in the forked child before `exec` and calls only
            // `write` and `nanosleep`, which are async-signal-safe, on a descriptor the
            // child inherited (`tell` outlives the spawn) and on stack values.
            unsafe {
                c.pre_exec(move || {
                    libc::write(tell_fd, b"f".as_ptr().cast(), 1);
                    let wait = libc::timespec {
                        tv_sec: 0,
                        tv_nsec: 300_000_000,
                    };
                    libc::nanosleep(&wait, std::ptr::null_mut());
                    Ok(())
                });
            }
            let status = c.status();
            drop(tell);
            status
        });
        // The child exists, holds the pool's descriptor, and has not reached `exec`.
        let mut byte = [0u8; 1];
        forked.read_exact(&mut byte).unwrap();
        drop(m);
        let again = open_file(&p, dram());
        assert!(child.join().unwrap().unwrap().success());
        assert!(again.is_ok(), "{:?}", again.err());
    }

    #[test]
    fn created_pool_has_the_size_is_zeroed_and_survives_reopen() {
        for kind in [dram(), MediumKind::File] {
            let d = tmpdir();
            let p = d.path().join("pool");
            let m = create_file(&p, SIZE, kind).unwrap();
            assert_eq!(m.kind(), kind);
            assert_eq!(m.len() as u64, SIZE);
            assert_eq!(m.base() as usize % 4096, 0);
            assert_eq!(std::fs::metadata(&p).unwrap().len(), SIZE);
            assert!((0..m.len()).step_by(8).all(|o| load(&*m, o) == 0));
            store(&*m, 4096, 0xfeed_f00d);
            store(&*m, SIZE as usize - 8, 0xabcd);
            m.persist(4096, 8);
            m.persist(SIZE as usize - 8, 8);
            m.sync_all().unwrap();
            drop(m);

            let m = open_file(&p, kind).unwrap();
            assert_eq!(load(&*m, 4096), 0xfeed_f00d, "{kind:?}");
            assert_eq!(load(&*m, SIZE as usize - 8), 0xabcd, "{kind:?}");
            drop(m);
            // And the bytes are in the file itself, read with ordinary I/O.
            let mut f = File::open(&p).unwrap();
            let mut w = [0u8; 8];
            f.seek(SeekFrom::Start(4096)).unwrap();
            f.read_exact(&mut w).unwrap();
            assert_eq!(u64::from_ne_bytes(w), 0xfeed_f00d);
        }
    }

    #[test]
    fn dax_on_a_non_dax_file_system_is_a_clean_error() {
        for dir in [PathBuf::from("/dev/shm"), std::env::temp_dir()] {
            let d = tempfile::tempdir_in(&dir).unwrap();
            // create: error, and the file is removed again.
            let p = d.path().join("pool");
            match create_file(&p, SIZE, MediumKind::Dax) {
                Err(Error::MediumUnsupported(msg)) => {
                    assert!(msg.contains("not DAX"), "{msg}");
                    assert!(msg.contains("the file medium"), "{msg}");
                    assert!(msg.contains("the dram medium"), "{msg}");
                    assert!(msg.contains(&p.display().to_string()), "{msg}");
                }
                Ok(_) => {
                    eprintln!("{} is DAX: skipping the refusal check", dir.display());
                    continue;
                }
                Err(e) => panic!("expected MediumUnsupported, got {e:?}"),
            }
            assert!(!p.exists(), "failed create must remove the file");

            // open: error, file unchanged, lock released.
            let m = create_file(&p, SIZE, dram()).unwrap();
            store(&*m, 0, 0x1234_5678);
            m.sync_all().unwrap();
            drop(m);
            let before = file_bytes(&p);
            assert!(matches!(
                open_file(&p, MediumKind::Dax),
                Err(Error::MediumUnsupported(_))
            ));
            assert_eq!(file_bytes(&p), before);
            assert!(open_file(&p, dram()).is_ok(), "lock released after failure");
        }
    }

    #[test]
    fn failed_open_does_not_modify_the_file() {
        let d = tmpdir();
        let p = d.path().join("pool");
        let mut f = File::create(&p).unwrap();
        f.write_all(&vec![0x5a; 8192]).unwrap();
        drop(f);
        let before = file_bytes(&p);
        for k in [dram(), MediumKind::File, MediumKind::Dax] {
            assert!(matches!(open_file(&p, k), Err(Error::TooSmall(_))));
        }
        assert_eq!(file_bytes(&p), before);
    }

    /// Minor page faults of the calling thread so far.
    fn minor_faults() -> i64 {
        // RUSAGE_THREAD is 1 on Linux; the gnu flavour of the libc crate lacks the name.
        const RUSAGE_THREAD: libc::c_int = 1;
        // SAFETY: `ru` is a plain C struct for getrusage to fill.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: a valid pointer to a rusage struct.
        let rc = unsafe { libc::getrusage(RUSAGE_THREAD, &mut ru) };
        assert_eq!(rc, 0);
        ru.ru_minflt
    }

    /// Write to `off` and report whether the store took a page fault. After writeback
    /// (msync) the kernel write-protects the page to catch the next store; a page that
    /// is still dirty takes no fault.
    fn store_faults(m: &dyn Medium, off: usize, v: u64) -> bool {
        let before = minor_faults();
        store(m, off, v);
        minor_faults() > before
    }

    #[test]
    fn file_fence_msyncs_exactly_this_threads_flushed_pages() {
        // Must be on a disk file system: tmpfs has no writeback, so nothing to observe.
        let d = tempfile::tempdir_in(std::env::temp_dir()).unwrap();
        let p = d.path().join("pool");
        let created = create_file(&p, SIZE, MediumKind::File).unwrap();
        drop(created);
        let file = open_locked(&p, false).unwrap();
        let m = Arc::new(FileMedium::from_file(file, SIZE as usize).unwrap());
        let off = 8 * 4096;
        store(&*m, off, 1); // first touch: faults the page in
        assert!(!store_faults(&*m, off, 2), "dirty page takes no fault");

        // Flush alone: no msync, the page stays dirty and writable.
        m.flush(off, 8);
        assert_eq!(m.msync_calls(), 0);
        assert!(!store_faults(&*m, off, 3));

        // Another thread's fence does not sync this thread's flushes.
        let m2 = Arc::clone(&m);
        std::thread::spawn(move || m2.fence()).join().unwrap();
        assert_eq!(m.msync_calls(), 0);
        assert!(!store_faults(&*m, off, 4));

        // This thread's fence msyncs the page: it was written back and write-protected.
        m.fence();
        assert_eq!(m.msync_calls(), 1);
        assert!(
            store_faults(&*m, off, 5),
            "fence did not write the page back"
        );

        // Nothing pending: a second fence makes no call.
        m.fence();
        assert_eq!(m.msync_calls(), 1);

        // Flushes of nearby pages are merged into one msync; far apart ones are not.
        let before = m.msync_calls();
        m.flush(0, 64);
        m.flush(4 * 4096 + 8, 64);
        m.flush(3 * 4096, 8);
        m.fence();
        assert_eq!(m.msync_calls() - before, 1);

        // The persisted value is in the file, visible to ordinary reads.
        store(&*m, off, 77);
        m.persist(off, 8);
        let mut f = File::open(&p).unwrap();
        let mut w = [0u8; 8];
        f.seek(SeekFrom::Start(off as u64)).unwrap();
        f.read_exact(&mut w).unwrap();
        assert_eq!(u64::from_ne_bytes(w), 77);

        // sync_all msyncs everything, including what no fence covered.
        let before = m.msync_calls();
        let process_before = crate::medium::counters::msync_calls();
        store(&*m, off, 78);
        assert!(!store_faults(&*m, off, 79));
        m.sync_all().unwrap();
        assert_eq!(m.msync_calls() - before, 1);
        assert!(store_faults(&*m, off, 80));
        // The process-wide count sees the medium's calls (other tests may add theirs).
        let m2 = Arc::clone(&m);
        std::thread::spawn(move || m2.persist(off, 8))
            .join()
            .unwrap();
        assert_eq!(m.msync_calls() - before, 2);
        assert!(crate::medium::counters::msync_calls() - process_before >= 2);
    }

    #[test]
    fn file_counts_flushes_and_fences() {
        let d = tmpdir();
        let p = d.path().join("pool");
        let m = create_file(&p, SIZE, MediumKind::File).unwrap();
        let before = crate::medium::counters::snapshot();
        m.persist(64, 200);
        m.flush(0, 0);
        m.fence();
        let c = crate::medium::counters::snapshot() - before;
        assert_eq!(c.lines_flushed, 4);
        assert_eq!(c.fences, 2);
    }
}
