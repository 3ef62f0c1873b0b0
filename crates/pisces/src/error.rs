//! The one error type of the library.
//!
//! Every way a pool can be refused or a transaction can fail has its own variant, with a
//! message that says what is wrong and what to do about it. Nothing in the library panics
//! on bad user input or a bad pool file; it returns one of these.
//!
//! The structs beside [`Error`] are the data of its variants that have more than one
//! field, each named after its variant.

use std::path::PathBuf;

use crate::tx_options::Isolation;

/// Everything that can go wrong in Pisces.
///
/// An `Error` is two words, and so is the `Result<&T>` or `Result<*const u8>` of a read:
/// little to write and copy on every read that leaves the inlined fast path. A variant
/// whose data is larger than a word therefore holds it in a [`Box`]:
///
/// * a message is a `Box<String>` (`Corrupt`, `InvalidConfig`, `UserAbort`, ...), a
///   file a `Box<PathBuf>` (`NotFound`, `Locked`, ...). The pattern `Error::Corrupt(msg)`
///   binds the box, which dereferences to the `String` (`msg.contains(..)`) and displays
///   as it; `String::into()` builds one (`Error::Corrupt(format!(..).into())`), and
///   `*path == other_path` compares one;
/// * a variant with several fields holds one boxed struct of the same name with the same
///   fields, in this module ([`error::Io`](Io), [`error::TooSmall`](TooSmall),
///   [`error::SizeMismatch`](SizeMismatch), [`error::WrongEngine`](WrongEngine),
///   [`error::TooLargeForLog`](TooLargeForLog),
///   [`error::IsolationUnsupported`](IsolationUnsupported)): `Error::TooSmall(t)`,
///   then `t.len`.
///
/// Variants without data, or with at most one word of it, hold it directly. The
/// messages do not depend on the boxes.
///
/// ```
/// use pisces::Error;
///
/// let e = Error::InvalidArgument(format!("{} blocks", 0).into());
/// match &e {
///     Error::InvalidArgument(msg) => assert_eq!(msg.as_str(), "0 blocks"),
///     _ => unreachable!(),
/// }
/// assert_eq!(e.to_string(), "invalid argument: 0 blocks");
///
/// let e = Error::io("opening p.pool", std::io::ErrorKind::NotFound.into());
/// match &e {
///     Error::Io(io) => assert_eq!(io.source.kind(), std::io::ErrorKind::NotFound),
///     _ => unreachable!(),
/// }
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An operating-system call failed (open, mmap, msync, flock, ...). Its
    /// [`source`](std::error::Error::source) is the [`std::io::Error`].
    #[error(transparent)]
    Io(Box<Io>),
    /// The pool file does not exist.
    #[error("pool file {0} does not exist; create it first")]
    NotFound(Box<PathBuf>),
    /// The path names a directory, not a pool file.
    #[error("{0} is a directory, not a pool file")]
    IsDirectory(Box<PathBuf>),
    /// A pool file already exists where one was to be created.
    #[error("{0} already exists; open it, or remove it to create a new pool")]
    AlreadyExists(Box<PathBuf>),
    /// The file is too small to hold even a superblock.
    #[error("{} is {} bytes, smaller than the {}-byte minimum of a pool: not a pool, or truncated", .0.path.display(), .0.len, .0.min)]
    TooSmall(Box<TooSmall>),
    /// The superblock records a different size than the file has.
    #[error(
        "pool is truncated or was extended: superblock says {} bytes, file has {}",
        .0.expected,
        .0.actual
    )]
    SizeMismatch(Box<SizeMismatch>),
    /// The file does not start with the Pisces magic number.
    #[error("not a Pisces pool (bad magic number)")]
    BadMagic,
    /// The pool was written by a format version this build does not understand.
    #[error("pool format version {found} is not supported (this build reads version {supported})")]
    UnsupportedVersion {
        /// The version in the file.
        found: u32,
        /// The version this build writes and reads.
        supported: u32,
    },
    /// The pool was formatted by another engine.
    #[error("pool was created by engine `{found}`, not `{requested}`; open it with `{found}`", found = .0.found, requested = .0.requested)]
    WrongEngine(Box<WrongEngine>),
    /// The pool was created by an engine this build does not have (another build, or
    /// an engine that keeps its own pool format).
    #[error(
        "the pool was created by engine #{0}, which this build cannot open on this pool format"
    )]
    UnknownEngine(u32),
    /// A checksum did not match: the pool is damaged.
    #[error("pool is corrupt: {0}")]
    Corrupt(Box<String>),
    /// The file is read-only but the pool must be written (recovery and transactions write).
    #[error("{0} is read-only; a pool must be writable to be opened")]
    ReadOnly(Box<PathBuf>),
    /// Another process has the pool open (it holds the pool's advisory lock).
    #[error("{0} is already open in another process (advisory lock held)")]
    Locked(Box<PathBuf>),
    /// This process already has the pool open (a pool may be opened once at a time;
    /// share the open [`crate::Pool`] handle — it is `Clone` — instead).
    #[error("{0} is already open in this process (open a pool once and clone the Pool handle)")]
    AlreadyOpen(Box<PathBuf>),
    /// The requested medium cannot be used here.
    #[error("medium not supported: {0}")]
    MediumUnsupported(Box<String>),
    /// A configuration value is out of range.
    #[error("invalid configuration: {0}")]
    InvalidConfig(Box<String>),
    /// The heap has no free block of the requested size.
    #[error("out of space: no free block for {requested} bytes; create a larger pool")]
    OutOfSpace {
        /// The size asked for.
        requested: usize,
    },
    /// One transaction's log record does not fit in a thread's log.
    #[error("transaction too large for the log: needs {} bytes, a thread's log holds {}; raise Config::log_bytes_per_thread", .0.needed, .0.capacity)]
    TooLargeForLog(Box<TooLargeForLog>),
    /// All thread slots of the pool are taken.
    #[error("all {0} thread slots are in use; raise Config::max_threads")]
    TooManyThreads(usize),
    /// A persistent pointer does not name a valid object of the expected type.
    #[error("invalid persistent pointer: {0}")]
    InvalidPointer(Box<String>),
    /// The transaction hit a conflict; `run` retries these, so users rarely see it.
    #[error("transaction aborted by a conflict")]
    Conflict,
    /// The user aborted the transaction.
    #[error("transaction aborted by the user: {0}")]
    UserAbort(Box<String>),
    /// A transaction started with `TxOptions::read_only` tried to change the pool.
    #[error("a read-only transaction cannot write, allocate or free")]
    ReadOnlyTransaction,
    /// The engine does not offer the isolation level a transaction asked for.
    #[error("the {} engine does not offer {} isolation (its strongest level is {})", .0.engine, .0.requested, .0.offered)]
    IsolationUnsupported(Box<IsolationUnsupported>),
    /// A transaction was started on a thread that is already inside a transaction of
    /// the same pool (transactions do not nest; run the inner work in the outer one).
    #[error(
        "a transaction is already running on this thread for this pool; transactions do not nest"
    )]
    NestedTransaction,
    /// An argument is out of range.
    #[error("invalid argument: {0}")]
    InvalidArgument(Box<String>),
    /// The crash simulator has crashed; the medium no longer accepts work.
    #[error("the simulated machine has crashed")]
    Crashed,
    /// A process that shares the pool ended (was killed) while it held state the
    /// others' transactions depend on, here thread slot `.0`'s, in a state that cannot
    /// be recovered while the others run (holding a lock word of the engine; see
    /// [`Sharing`](crate::Sharing)). The pool is stopped in every
    /// process that has it open: transactions that write, and waits for the dead
    /// process, fail with this error, and no process may open the pool shared until
    /// all have closed it; the next open then recovers it as after a crash. A
    /// transaction that failed with it may or may not have committed, as at a crash.
    #[error(
        "a process sharing the pool ended while using thread slot {slot} ({cause}); the pool \
         is stopped: close it in every process and open it again to recover"
    )]
    PeerDied {
        /// The dead process's thread slot.
        slot: u32,
        /// What it was doing that the others could not recover.
        cause: StopCause,
    },
}

/// What a process that shared a pool was doing when it died, that the other processes
/// could not recover while they ran ([`Error::PeerDied`]). A diagnostic: each names a
/// state of the engine that is repaired only by the next open after every process has
/// closed the pool.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum StopCause {
    /// It was ending a write-back, and what it recorded of its progress does not
    /// match its batch.
    WriteBackEnd,
    /// It held a batch's lock and left the batch's lists in a state no holder leaves
    /// (an attempt in two places).
    BatchLists,
    /// It was in a commit whose outcome its state does not tell.
    Commit,
    /// Its redo log is damaged.
    Log,
    /// No recovery could run (the thread or the lock it needs could not be had, or the
    /// recovery itself failed).
    Recovery,
}

impl std::fmt::Display for StopCause {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            StopCause::WriteBackEnd => "it was ending a write-back that cannot be finished",
            StopCause::BatchLists => "it left a batch's lists inconsistent",
            StopCause::Commit => "it was in a commit whose outcome cannot be told",
            StopCause::Log => "its redo log is damaged",
            StopCause::Recovery => "no recovery could run",
        })
    }
}

impl StopCause {
    /// The code of the cause in a shared word (`from_code` reads it back).
    pub(crate) fn code(self) -> u8 {
        self as u8
    }

    /// The cause of code `c`; `Recovery` for a code no cause has.
    pub(crate) fn from_code(c: u8) -> StopCause {
        use StopCause::*;
        [WriteBackEnd, BatchLists, Commit, Log, Recovery]
            .into_iter()
            .find(|k| k.code() == c)
            .unwrap_or(Recovery)
    }
}

// Every read returns a `Result<&T>` or `Result<*const u8>`: two words (the `Ok` value
// beside the variant tag, marked by a tag value no variant uses), which the boxes keep
// from growing to the six words of the largest unboxed payload: less to write and copy
// per out-of-line read. Two words would fit two registers, but rustc (1.95) returns
// this `Result` through memory all the same: an `Ok` value beside a niche in the
// error's tag makes it an aggregate, and only scalars and scalar pairs come back in
// registers.
const _: () = assert!(std::mem::size_of::<Error>() <= 16);
const _: () = assert!(std::mem::size_of::<Result<*const u8>>() == 16);
const _: () = assert!(std::mem::size_of::<Result<&u64>>() == 16);

/// The data of [`Error::Io`].
#[derive(Debug, thiserror::Error)]
#[error("{context}: {source}")]
pub struct Io {
    /// What the library was doing.
    pub context: String,
    /// The underlying error.
    #[source]
    pub source: std::io::Error,
}

/// The data of [`Error::TooSmall`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TooSmall {
    /// The file.
    pub path: PathBuf,
    /// Its length.
    pub len: u64,
    /// The smallest possible pool.
    pub min: u64,
}

/// The data of [`Error::SizeMismatch`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SizeMismatch {
    /// Size recorded in the superblock.
    pub expected: u64,
    /// Actual file size.
    pub actual: u64,
}

/// The data of [`Error::WrongEngine`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WrongEngine {
    /// The engine recorded in the pool.
    pub found: String,
    /// The engine the caller asked for.
    pub requested: String,
}

/// The data of [`Error::TooLargeForLog`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TooLargeForLog {
    /// Bytes the record needs.
    pub needed: usize,
    /// Bytes a thread's log can hold.
    pub capacity: usize,
}

/// The data of [`Error::IsolationUnsupported`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IsolationUnsupported {
    /// The engine.
    pub engine: &'static str,
    /// What the transaction asked for.
    pub requested: Isolation,
    /// The strongest level the engine offers.
    pub offered: Isolation,
}

impl Error {
    /// An I/O error with the context in which it happened.
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        Error::Io(Box::new(Io {
            context: context.into(),
            source,
        }))
    }

    /// An I/O error that says the storage is full: no space, a quota, a file size
    /// limit.
    pub(crate) fn is_storage_full(&self) -> bool {
        use std::io::ErrorKind::{FileTooLarge, QuotaExceeded, StorageFull};
        matches!(self, Error::Io(e)
            if matches!(e.source.kind(), StorageFull | QuotaExceeded | FileTooLarge))
    }

    /// A user abort with a message; return it from a transaction closure to roll back.
    pub fn abort(msg: impl Into<String>) -> Self {
        Error::UserAbort(Box::new(msg.into()))
    }

    // The library's own constructors of the message variants: they box the message, so
    // a call site reads as it would with an unboxed one. Cold: errors are off the paths
    // that matter, and this keeps the allocation out of the reads that can fail.

    /// [`Error::Corrupt`] with a message.
    #[cold]
    pub(crate) fn corrupt(msg: impl Into<String>) -> Self {
        Error::Corrupt(Box::new(msg.into()))
    }

    /// [`Error::InvalidConfig`] with a message.
    #[cold]
    pub(crate) fn invalid_config(msg: impl Into<String>) -> Self {
        Error::InvalidConfig(Box::new(msg.into()))
    }

    /// [`Error::InvalidArgument`] with a message.
    #[cold]
    pub(crate) fn invalid_argument(msg: impl Into<String>) -> Self {
        Error::InvalidArgument(Box::new(msg.into()))
    }

    /// [`Error::InvalidPointer`] with a message.
    #[cold]
    pub(crate) fn invalid_pointer(msg: impl Into<String>) -> Self {
        Error::InvalidPointer(Box::new(msg.into()))
    }

    /// [`Error::MediumUnsupported`] with a message.
    #[cold]
    pub(crate) fn medium_unsupported(msg: impl Into<String>) -> Self {
        Error::MediumUnsupported(Box::new(msg.into()))
    }
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;
    use std::error::Error as _;

    /// The boxed variants display as the unboxed ones did: the C interface and the tools
    /// pass these messages on.
    #[test]
    fn messages_of_the_boxed_variants() {
        let p = || Box::new(PathBuf::from("/p.pool"));
        let cases = [
            (
                Error::io("opening /p.pool", std::io::Error::other("no")),
                "opening /p.pool: no",
            ),
            (
                Error::NotFound(p()),
                "pool file /p.pool does not exist; create it first",
            ),
            (
                Error::IsDirectory(p()),
                "/p.pool is a directory, not a pool file",
            ),
            (
                Error::AlreadyExists(p()),
                "/p.pool already exists; open it, or remove it to create a new pool",
            ),
            (
                Error::TooSmall(Box::new(TooSmall { path: *p(), len: 4096, min: 8192 })),
                "/p.pool is 4096 bytes, smaller than the 8192-byte minimum of a pool: not a pool, or truncated",
            ),
            (
                Error::SizeMismatch(Box::new(SizeMismatch { expected: 2, actual: 1 })),
                "pool is truncated or was extended: superblock says 2 bytes, file has 1",
            ),
            (
                Error::WrongEngine(Box::new(WrongEngine {
                    found: "sp3".into(),
                    requested: "undo".into(),
                })),
                "pool was created by engine `sp3`, not `undo`; open it with `sp3`",
            ),
            (Error::Corrupt(String::from("x").into()), "pool is corrupt: x"),
            (
                Error::ReadOnly(p()),
                "/p.pool is read-only; a pool must be writable to be opened",
            ),
            (
                Error::Locked(p()),
                "/p.pool is already open in another process (advisory lock held)",
            ),
            (
                Error::AlreadyOpen(p()),
                "/p.pool is already open in this process (open a pool once and clone the Pool handle)",
            ),
            (
                Error::MediumUnsupported(String::from("x").into()),
                "medium not supported: x",
            ),
            (
                Error::InvalidConfig(String::from("x").into()),
                "invalid configuration: x",
            ),
            (
                Error::TooLargeForLog(Box::new(TooLargeForLog { needed: 2, capacity: 1 })),
                "transaction too large for the log: needs 2 bytes, a thread's log holds 1; raise Config::log_bytes_per_thread",
            ),
            (
                Error::InvalidPointer(String::from("x").into()),
                "invalid persistent pointer: x",
            ),
            (Error::abort("x"), "transaction aborted by the user: x"),
            (
                Error::IsolationUnsupported(Box::new(IsolationUnsupported {
                    engine: "undo",
                    requested: Isolation::Serializable,
                    offered: Isolation::Snapshot,
                })),
                "the undo engine does not offer serializable isolation (its strongest level is snapshot)",
            ),
            (
                Error::InvalidArgument(String::from("x").into()),
                "invalid argument: x",
            ),
            (
                Error::PeerDied {
                    slot: 3,
                    cause: StopCause::Commit,
                },
                "a process sharing the pool ended while using thread slot 3 (it was in a \
                 commit whose outcome cannot be told); the pool is stopped: close it in every \
                 process and open it again to recover",
            ),
        ];
        for (e, want) in cases {
            assert_eq!(e.to_string(), want, "{e:?}");
        }
    }

    /// A stop's cause survives its code in the sidecar's word; an unknown code reads
    /// as `Recovery`.
    #[test]
    fn a_stop_cause_round_trips_through_its_code() {
        use StopCause::*;
        for c in [WriteBackEnd, BatchLists, Commit, Log, Recovery] {
            assert_eq!(StopCause::from_code(c.code()), c);
        }
        assert_eq!(StopCause::from_code(200), Recovery);
    }

    /// An I/O error's source is the operating system's error itself (as before the box),
    /// not the boxed struct around it.
    #[test]
    fn the_source_of_an_io_error_is_the_io_error() {
        let e = Error::io("syncing", std::io::Error::other("disk on fire"));
        let src = e.source().expect("an io error has a source");
        assert!(src.is::<std::io::Error>(), "{src:?}");
        assert_eq!(src.to_string(), "disk on fire");
        assert!(Error::Conflict.source().is_none());
    }
}
