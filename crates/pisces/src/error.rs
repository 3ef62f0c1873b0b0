//! The one error type of the library.
//!
//! Every way a pool can be refused or a transaction can fail has its own variant, with a
//! message that says what is wrong and what to do about it. Nothing in the library panics
//! on bad user input or a bad pool file; it returns one of these.

use std::path::PathBuf;

/// Everything that can go wrong in Pisces.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An operating-system call failed (open, mmap, msync, flock, ...).
    #[error("{context}: {source}")]
    Io {
        /// What the library was doing.
        context: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The pool file does not exist.
    #[error("pool file {0} does not exist; create it first")]
    NotFound(PathBuf),
    /// The path names a directory, not a pool file.
    #[error("{0} is a directory, not a pool file")]
    IsDirectory(PathBuf),
    /// A pool file already exists where one was to be created.
    #[error("{0} already exists; open it, or remove it to create a new pool")]
    AlreadyExists(PathBuf),
    /// The file is too small to hold even a superblock.
    #[error("{path} is {len} bytes, smaller than the {min}-byte minimum of a pool: not a pool, or truncated")]
    TooSmall {
        /// The file.
        path: PathBuf,
        /// Its length.
        len: u64,
        /// The smallest possible pool.
        min: u64,
    },
    /// The superblock records a different size than the file has.
    #[error(
        "pool is truncated or was extended: superblock says {expected} bytes, file has {actual}"
    )]
    SizeMismatch {
        /// Size recorded in the superblock.
        expected: u64,
        /// Actual file size.
        actual: u64,
    },
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
    #[error("pool was created by engine `{found}`, not `{requested}`; open it with `{found}`")]
    WrongEngine {
        /// The engine recorded in the pool.
        found: String,
        /// The engine the caller asked for.
        requested: String,
    },
    /// The pool was created by an engine this build does not have (another build, or
    /// an engine that keeps its own pool format).
    #[error(
        "the pool was created by engine #{0}, which this build cannot open on this pool format"
    )]
    UnknownEngine(u32),
    /// A checksum did not match: the pool is damaged.
    #[error("pool is corrupt: {0}")]
    Corrupt(String),
    /// The file is read-only but the pool must be written (recovery and transactions write).
    #[error("{0} is read-only; a pool must be writable to be opened")]
    ReadOnly(PathBuf),
    /// Another process has the pool open (it holds the pool's advisory lock).
    #[error("{0} is already open in another process (advisory lock held)")]
    Locked(PathBuf),
    /// This process already has the pool open (a pool may be opened once at a time;
    /// share the open [`crate::Pool`] handle — it is `Clone` — instead).
    #[error("{0} is already open in this process (open a pool once and clone the Pool handle)")]
    AlreadyOpen(PathBuf),
    /// The requested medium cannot be used here.
    #[error("medium not supported: {0}")]
    MediumUnsupported(String),
    /// A configuration value is out of range.
    #[error("invalid configuration: {0}")]
    InvalidConfig(String),
    /// The heap has no free block of the requested size.
    #[error("out of space: no free block for {requested} bytes; create a larger pool")]
    OutOfSpace {
        /// The size asked for.
        requested: usize,
    },
    /// One transaction's log record does not fit in a thread's log.
    #[error("transaction too large for the log: needs {needed} bytes, a thread's log holds {capacity}; raise Config::log_bytes_per_thread")]
    TooLargeForLog {
        /// Bytes the record needs.
        needed: usize,
        /// Bytes a thread's log can hold.
        capacity: usize,
    },
    /// All thread slots of the pool are taken.
    #[error("all {0} thread slots are in use; raise Config::max_threads")]
    TooManyThreads(usize),
    /// A persistent pointer does not name a valid object of the expected type.
    #[error("invalid persistent pointer: {0}")]
    InvalidPointer(String),
    /// The transaction hit a conflict; `run` retries these, so users rarely see it.
    #[error("transaction aborted by a conflict")]
    Conflict,
    /// The user aborted the transaction.
    #[error("transaction aborted by the user: {0}")]
    UserAbort(String),
    /// A transaction started with `TxOptions::read_only` tried to change the pool.
    #[error("a read-only transaction cannot write, allocate or free")]
    ReadOnlyTransaction,
    /// The engine does not offer the isolation level a transaction asked for.
    #[error("the {engine} engine does not offer {requested} isolation (its strongest level is {offered})")]
    IsolationUnsupported {
        /// The engine.
        engine: &'static str,
        /// What the transaction asked for.
        requested: crate::tx_options::Isolation,
        /// The strongest level the engine offers.
        offered: crate::tx_options::Isolation,
    },
    /// A transaction was started on a thread that is already inside a transaction of
    /// the same pool (transactions do not nest; run the inner work in the outer one).
    #[error(
        "a transaction is already running on this thread for this pool; transactions do not nest"
    )]
    NestedTransaction,
    /// An argument is out of range.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// The crash simulator has crashed; the medium no longer accepts work.
    #[error("the simulated machine has crashed")]
    Crashed,
}

impl Error {
    /// An I/O error with the context in which it happened.
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        Error::Io {
            context: context.into(),
            source,
        }
    }

    /// An I/O error that says the storage is full: no space, a quota, a file size
    /// limit.
    pub(crate) fn is_storage_full(&self) -> bool {
        use std::io::ErrorKind::{FileTooLarge, QuotaExceeded, StorageFull};
        matches!(self, Error::Io { source, .. }
            if matches!(source.kind(), StorageFull | QuotaExceeded | FileTooLarge))
    }

    /// A user abort with a message; return it from a transaction closure to roll back.
    pub fn abort(msg: impl Into<String>) -> Self {
        Error::UserAbort(msg.into())
    }

    // The library's own constructors of the message variants, for call sites that read
    // the same whatever the variants hold. Cold: errors are off the paths that matter.

    /// [`Error::Corrupt`] with a message.
    #[cold]
    pub(crate) fn corrupt(msg: impl Into<String>) -> Self {
        Error::Corrupt(msg.into())
    }

    /// [`Error::InvalidConfig`] with a message.
    #[cold]
    pub(crate) fn invalid_config(msg: impl Into<String>) -> Self {
        Error::InvalidConfig(msg.into())
    }

    /// [`Error::InvalidArgument`] with a message.
    #[cold]
    pub(crate) fn invalid_argument(msg: impl Into<String>) -> Self {
        Error::InvalidArgument(msg.into())
    }

    /// [`Error::InvalidPointer`] with a message.
    #[cold]
    pub(crate) fn invalid_pointer(msg: impl Into<String>) -> Self {
        Error::InvalidPointer(msg.into())
    }

    /// [`Error::MediumUnsupported`] with a message.
    #[cold]
    pub(crate) fn medium_unsupported(msg: impl Into<String>) -> Self {
        Error::MediumUnsupported(msg.into())
    }
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
