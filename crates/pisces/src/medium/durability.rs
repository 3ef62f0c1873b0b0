//! Which medium a pool file gets, and what a committed transaction survives on it.
//!
//! # Choosing a medium
//! A program that does not name a medium ([`Config::medium`](crate::Config::medium)
//! `None`, the default) gets the one that makes a commit as durable as the file
//! system the pool lives on can keep it:
//!
//! | the pool file is on                        | medium                  | a commit survives            |
//! |--------------------------------------------|-------------------------|------------------------------|
//! | a DAX file system (accepts `MAP_SYNC`)      | [`MediumKind::Dax`]     | process crashes, power loss  |
//! | tmpfs (`/dev/shm`), ramfs                   | [`MediumKind::Dram`]    | process crashes              |
//! | any other file system (ext4, xfs, btrfs...) | [`MediumKind::File`]    | process crashes, power loss  |
//!
//! tmpfs and ramfs lose everything at power loss or reboot whatever is done, so the
//! DRAM medium (flush + fence, no `msync`) is all a commit needs there: the pages are
//! shared with the kernel and survive the process. On a disk the DRAM medium's fence
//! is an `sfence` only, and after a power cut the file holds whatever subset of pages
//! the kernel happened to write back: the [`MediumKind::File`] medium `msync`s the
//! pages a thread flushed at its fence instead. A DAX file system is detected by
//! mapping the file with `MAP_SYNC` (only DAX file systems accept it); its
//! persistence domain is the platform's ([`super::domain`]).
//!
//! Naming a medium is honoured, with one guard: the DRAM medium on a file system that
//! outlives power loss is refused unless
//! [`Config::allow_volatile_medium`](crate::Config::allow_volatile_medium) is set
//! (`pisces create --allow-volatile`), and the pool then carries a warning
//! ([`PoolDurability::warning`]): this is how benchmarks measure the engines without
//! `msync` on a disk, not how data should be kept.
//!
//! The medium is not recorded in the pool: like the persistence domain it is decided
//! at every open, by the same rule, from where the file is then. A pool created on
//! `/dev/shm` and copied to a disk opens on the file medium there; a pool created
//! with the DRAM medium on a disk (before this rule, or with the opt-in) opens on the
//! file medium unless the program names the DRAM medium again. The bytes of a pool
//! are the same on every medium, so any medium opens any pool.

use super::{Medium, MediumKind, PersistenceDomain};
use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::path::Path;

/// The file systems whose contents do not outlive the machine's power.
const TMPFS_MAGIC: u32 = 0x0102_1994;
const RAMFS_MAGIC: u32 = 0x8584_58f6;

/// Names of common file systems by `statfs` magic, for messages.
const NAMES: [(u32, &str); 12] = [
    (TMPFS_MAGIC, "tmpfs"),
    (RAMFS_MAGIC, "ramfs"),
    (0xEF53, "ext4"),
    (0x5846_5342, "xfs"),
    (0x9123_683E, "btrfs"),
    (0x2FC1_2FC1, "zfs"),
    (0xF2F5_2010, "f2fs"),
    (0x794C_7630, "overlayfs"),
    (0x6969, "nfs"),
    (0xFE53_4D42, "smb2"),
    (0x6573_5546, "fuse"),
    (0x0102_1997, "9p"),
];

/// The file system a pool file lives on, as `statfs` reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileSystem {
    /// The `f_type` magic number (low 32 bits).
    pub magic: u32,
}

impl FileSystem {
    /// The file system of an open file.
    pub fn of_file(file: &File) -> io::Result<FileSystem> {
        // SAFETY: `st` is a plain C struct for fstatfs to fill.
        let mut st: libc::statfs = unsafe { std::mem::zeroed() };
        // SAFETY: `file` owns a valid descriptor and `st` is a valid, writable statfs.
        let rc = unsafe { libc::fstatfs(file.as_raw_fd(), &mut st) };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        // The magic numbers are 32-bit; `f_type` is a signed long on most targets, so
        // keep the low 32 bits (ramfs's magic has the high bit set).
        Ok(FileSystem {
            magic: st.f_type as u32,
        })
    }

    /// The file system holding `path` (the file itself, or for a file not created
    /// yet, its directory).
    pub fn of_path(path: &Path) -> io::Result<FileSystem> {
        match File::open(path) {
            Ok(f) => Self::of_file(&f),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                let dir = match path.parent() {
                    Some(d) if !d.as_os_str().is_empty() => d,
                    _ => Path::new("."),
                };
                Self::of_file(&File::open(dir)?)
            }
            Err(e) => Err(e),
        }
    }

    /// A short name (`ext4`, `tmpfs`, ...), or the magic number in hex.
    pub fn name(self) -> String {
        NAMES.iter().find(|(m, _)| *m == self.magic).map_or_else(
            || format!("file system {:#x}", self.magic),
            |(_, n)| n.to_string(),
        )
    }

    /// True for tmpfs and ramfs: memory that does not outlive a power loss or reboot.
    pub fn is_volatile(self) -> bool {
        self.magic == TMPFS_MAGIC || self.magic == RAMFS_MAGIC
    }
}

/// The medium a pool file is mapped on, before DAX is tried.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Choice {
    /// Exactly this medium.
    Named(MediumKind),
    /// DAX if the file system accepts `MAP_SYNC`, else the file medium.
    DaxOrFile,
}

/// The medium for a pool file on `fs` when the program asked for `requested`
/// (`None`: the rule of the [module documentation](self)), and the warning of the DRAM
/// medium forced onto a file system that outlives power loss. `Err(InvalidConfig)`
/// when that is asked for without `allow_volatile`.
pub(crate) fn choose(
    requested: Option<MediumKind>,
    fs: FileSystem,
    allow_volatile: bool,
) -> crate::Result<(Choice, Option<String>)> {
    match requested {
        None if fs.is_volatile() => Ok((Choice::Named(MediumKind::DRAM), None)),
        None => Ok((Choice::DaxOrFile, None)),
        Some(k @ MediumKind::Dram { .. }) if !fs.is_volatile() => {
            if allow_volatile {
                Ok((
                    Choice::Named(k),
                    Some(format!(
                        "the dram medium on {} (a file system that outlives power loss): its fence \
                         does not msync, so after a power failure or reboot the file holds an \
                         arbitrary subset of the pool's pages and committed transactions may be \
                         lost or torn; they survive process crashes only",
                        fs.name()
                    )),
                ))
            } else {
                Err(crate::Error::invalid_config(format!(
                    "the dram medium on {} would lose committed transactions at power loss \
                     (its fence does not msync); leave the medium unset to get the file medium, \
                     or set Config::allow_volatile_medium (pisces: --allow-volatile) to accept that",
                    fs.name()
                )))
            }
        }
        Some(k) => Ok((Choice::Named(k), None)),
    }
}

/// Whether the file system of `file` accepts a `MAP_SYNC` mapping of it (only DAX
/// file systems do). Maps one page read-only and unmaps it again.
fn accepts_map_sync(file: &File) -> bool {
    if file
        .metadata()
        .map_or(true, |m| m.len() < super::PAGE as u64)
    {
        return false;
    }
    // SAFETY: a fresh read-only mapping of one page of a file we hold open, placed by
    // the kernel (no fixed address): it touches no memory of ours.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            super::PAGE,
            libc::PROT_READ,
            libc::MAP_SHARED_VALIDATE | libc::MAP_SYNC,
            file.as_raw_fd(),
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return false;
    }
    // SAFETY: `p` is the page just mapped above, used by nothing else.
    unsafe { libc::munmap(p, super::PAGE) };
    true
}

/// What a committed transaction survives.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Survives {
    /// Process crashes and power loss (and reboots).
    PowerLoss,
    /// Process crashes (the pages stay in the kernel), not power loss or reboot.
    ProcessCrash,
    /// Neither: the pool's memory dies with the process, or the engine keeps no log.
    Nothing,
}

impl Survives {
    /// A short phrase: "process crashes and power loss", ...
    pub fn phrase(self) -> &'static str {
        match self {
            Survives::PowerLoss => "process crashes and power loss",
            Survives::ProcessCrash => "process crashes, not power loss or reboot",
            Survives::Nothing => "neither process crashes nor power loss",
        }
    }
}

/// What a committed transaction on one pool survives, and why: its medium, the
/// persistence domain that runs under, and the file system holding the pool
/// ([`Pool::durability`](crate::Pool::durability)). Its `Display` says it in words:
///
/// ```
/// # use pisces::{Config, Pool, Survives};
/// # let dir = tempfile::tempdir_in("/dev/shm").unwrap();
/// let pool = Pool::create(dir.path().join("d.pool"), Config::new().size(32 << 20)).unwrap();
/// let d = pool.durability();
/// assert_eq!(d.survives(), Survives::ProcessCrash); // tmpfs: the dram medium
/// assert!(d.to_string().starts_with("a committed transaction survives process crashes, not power loss"));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PoolDurability {
    survives: Survives,
    medium: MediumKind,
    domain: PersistenceDomain,
    file_system: Option<String>,
    reason: String,
    warning: Option<String>,
}

impl PoolDurability {
    /// What a committed transaction survives.
    pub fn survives(&self) -> Survives {
        self.survives
    }
    /// The medium the pool is mapped on.
    pub fn medium(&self) -> MediumKind {
        self.medium
    }
    /// The persistence domain the medium runs under.
    pub fn domain(&self) -> PersistenceDomain {
        self.domain
    }
    /// The file system holding the pool (`ext4`, `tmpfs`, ...), if it is in a file.
    pub fn file_system(&self) -> Option<&str> {
        self.file_system.as_deref()
    }
    /// Why, in words (the medium, its fence, the file system).
    pub fn reason(&self) -> &str {
        &self.reason
    }
    /// Set when the pool runs with less durability than its file system could give
    /// (the DRAM medium forced onto a disk) or than the platform reports (eADR
    /// forced): tools print it.
    pub fn warning(&self) -> Option<&str> {
        self.warning.as_deref()
    }

    /// The durability of a pool on `medium` run by an engine that is `durable` (keeps
    /// a log and recovers), with `warning` already known (a forced domain or medium).
    pub(crate) fn of_medium(medium: &dyn Medium, durable: bool, warning: Option<String>) -> Self {
        let fs = medium.file().map(FileSystem::of_file);
        Self::describe(
            medium.kind(),
            medium.persistence_domain(),
            fs,
            durable,
            warning,
        )
    }

    /// What a pool at `path` gets when it is opened without naming a medium, run by a
    /// durable engine: the medium the file system calls for (a DAX file system is
    /// recognised by accepting a `MAP_SYNC` mapping of the file, which is made
    /// read-only and removed at once) and the domain it would run under. For tools
    /// that inspect a pool without opening it (`pisces info`); the file is not
    /// written.
    pub fn predict(path: &Path) -> io::Result<PoolDurability> {
        let fs = FileSystem::of_path(path)?;
        let (kind, domain) = if fs.is_volatile() {
            (MediumKind::DRAM, PersistenceDomain::Adr)
        } else if File::open(path).is_ok_and(|f| accepts_map_sync(&f)) {
            let d = super::domain::SysfsProbe::default().detect_for_path(path);
            (MediumKind::Dax, d.domain)
        } else {
            (MediumKind::File, PersistenceDomain::PageCache)
        };
        Ok(Self::describe(kind, domain, Some(Ok(fs)), true, None))
    }

    fn describe(
        kind: MediumKind,
        domain: PersistenceDomain,
        fs: Option<io::Result<FileSystem>>,
        durable: bool,
        warning: Option<String>,
    ) -> Self {
        let fs_name = fs.as_ref().map(|r| match r {
            Ok(f) => f.name(),
            Err(e) => format!("unknown file system ({e})"),
        });
        let volatile_fs = matches!(fs, Some(Ok(f)) if f.is_volatile());
        let on = fs_name
            .as_ref()
            .map_or_else(|| "no file".to_string(), |n| format!("a file on {n}"));
        let (survives, why) = match kind {
            MediumKind::Dram { .. } if fs.is_none() => (
                Survives::Nothing,
                "the dram medium on anonymous memory, which dies with the process".to_string(),
            ),
            MediumKind::Dram { .. } if volatile_fs => (
                Survives::ProcessCrash,
                format!(
                    "the dram medium on {on}: the pages outlive the process but not power loss \
                     or reboot"
                ),
            ),
            MediumKind::Dram { .. } => (
                Survives::ProcessCrash,
                format!(
                    "the dram medium on {on}: its fence does not msync, so at power loss the \
                     file keeps an arbitrary subset of the pool's pages"
                ),
            ),
            MediumKind::Dax => (
                Survives::PowerLoss,
                format!(
                    "the dax medium (MAP_SYNC) on {on}, persistence domain {domain}: {}",
                    if domain == PersistenceDomain::Eadr {
                        "a visible store is durable"
                    } else {
                        "cache-line write-back plus fence is durable"
                    }
                ),
            ),
            MediumKind::File if volatile_fs => (
                Survives::ProcessCrash,
                format!("the file medium on {on}: msync makes nothing outlive power loss there"),
            ),
            MediumKind::File => (
                Survives::PowerLoss,
                format!("the file medium on {on}: each fence msyncs the pages its thread flushed"),
            ),
            MediumKind::Custom => (
                Survives::PowerLoss,
                format!(
                    "a custom medium ({on}), durable as its fence promises (persistence domain \
                     {domain})"
                ),
            ),
        };
        let (survives, reason) = if durable {
            (survives, why)
        } else {
            (
                Survives::Nothing,
                format!("the engine keeps no log and does not recover ({why})"),
            )
        };
        PoolDurability {
            survives,
            medium: kind,
            domain,
            file_system: fs_name,
            reason,
            warning,
        }
    }

    /// Nothing known (a pool whose engine reported nothing): claims nothing.
    pub(crate) fn unknown() -> Self {
        PoolDurability {
            survives: Survives::Nothing,
            medium: MediumKind::Custom,
            domain: PersistenceDomain::Adr,
            file_system: None,
            reason: "nothing is known of the pool's medium".into(),
            warning: None,
        }
    }

    /// The durability of an engine that keeps its own pool file (`pmdk`): its library
    /// flushes and, off persistent memory, `msync`s by itself.
    pub(crate) fn of_own_file(kind: MediumKind, path: &Path, warning: Option<String>) -> Self {
        let fs = FileSystem::of_path(path).ok();
        let name = fs.map(FileSystem::name);
        let volatile_fs = fs.is_some_and(FileSystem::is_volatile);
        let on = name.as_deref().unwrap_or("an unknown file system");
        let (survives, reason) = match kind {
            _ if volatile_fs => (
                Survives::ProcessCrash,
                format!("the engine's own pool file on {on}: it does not outlive power loss"),
            ),
            MediumKind::Dram { .. } => (
                Survives::ProcessCrash,
                format!(
                    "the engine's own pool file on {on}, treated as persistent memory (no msync)"
                ),
            ),
            _ => (
                Survives::PowerLoss,
                format!("the engine's own pool file on {on}, flushed and msynced by its library"),
            ),
        };
        PoolDurability {
            survives,
            medium: kind,
            domain: PersistenceDomain::Adr,
            file_system: name,
            reason,
            warning,
        }
    }
}

impl std::fmt::Display for PoolDurability {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "a committed transaction survives {} ({})",
            self.survives.phrase(),
            self.reason
        )?;
        if let Some(w) = &self.warning {
            write!(f, "; warning: {w}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXT4: FileSystem = FileSystem { magic: 0xEF53 };
    const TMPFS: FileSystem = FileSystem { magic: TMPFS_MAGIC };

    #[test]
    fn the_medium_follows_the_file_system_unless_named() {
        assert_eq!(
            choose(None, TMPFS, false).unwrap(),
            (Choice::Named(MediumKind::DRAM), None)
        );
        let ramfs = FileSystem { magic: RAMFS_MAGIC };
        assert!(ramfs.is_volatile() && ramfs.name() == "ramfs");
        assert_eq!(
            choose(None, EXT4, false).unwrap(),
            (Choice::DaxOrFile, None)
        );
        assert_eq!(
            choose(Some(MediumKind::File), TMPFS, false).unwrap(),
            (Choice::Named(MediumKind::File), None)
        );
        assert_eq!(
            choose(Some(MediumKind::DRAM), TMPFS, false).unwrap(),
            (Choice::Named(MediumKind::DRAM), None)
        );
    }

    #[test]
    fn dram_on_a_disk_needs_the_opt_in_and_then_warns() {
        match choose(Some(MediumKind::DRAM), EXT4, false) {
            Err(crate::Error::InvalidConfig(m)) => {
                assert!(
                    m.contains("ext4") && m.contains("allow_volatile_medium"),
                    "{m}"
                )
            }
            other => panic!("expected a refusal, got {other:?}"),
        }
        let (c, w) = choose(Some(MediumKind::DRAM), EXT4, true).unwrap();
        assert_eq!(c, Choice::Named(MediumKind::DRAM));
        let w = w.expect("a warning");
        assert!(w.contains("ext4") && w.contains("power"), "{w}");
    }

    #[test]
    fn this_machines_file_systems_are_recognised() {
        let shm = FileSystem::of_path(Path::new("/dev/shm/not-created-yet")).unwrap();
        assert!(shm.is_volatile(), "/dev/shm is {}", shm.name());
        let tmp = FileSystem::of_path(&std::env::temp_dir()).unwrap();
        eprintln!("temp dir on {}", tmp.name());
    }
}
