//! Return codes, the per-thread error message, and the panic barrier of every entry
//! point.
//!
//! # Panics stay silent
//! A panic inside an entry point becomes `PISCES_EPANIC` with its message (and where it
//! happened) in `pisces_errmsg`; a C library prints nothing of its own. The default
//! panic hook would print the message (and maybe a backtrace) to stderr before the
//! barrier catches the unwinding, so the first entry point called installs a hook that
//! stays silent while the calling thread is inside an entry point ([`IN_ENTRY`]) and
//! passes every other panic on to the hook that was installed before it (a Rust program
//! linking this crate keeps its own reporting for its own panics).

use pisces::Error;
use std::cell::{Cell, RefCell};
use std::ffi::{c_char, c_int, CString};
use std::panic::{catch_unwind, AssertUnwindSafe, UnwindSafe};
use std::sync::Once;

/// Success.
pub const PISCES_OK: c_int = 0;
/// An error without a more specific code.
pub const PISCES_ERROR: c_int = 1;
/// An argument is invalid (NULL, out of range, not UTF-8, a pool path that names
/// something other than a regular file or a directory, e.g. a device).
pub const PISCES_EINVAL: c_int = 2;
/// The transaction conflicted with another one: roll back and retry (`pisces_run`
/// does that itself).
pub const PISCES_ECONFLICT: c_int = 3;
/// The transaction was aborted by the user (`pisces_tx_abort` is not an error).
pub const PISCES_EABORTED: c_int = 4;
/// A `pisces_tx` was used after its transaction ended.
pub const PISCES_ESTALE: c_int = 5;
/// The handle is busy (a transaction is running on it, or only reads are allowed
/// inside a foreach/range callback).
pub const PISCES_EBUSY: c_int = 6;
/// A transaction of this pool is already running on this thread (no nesting).
pub const PISCES_ENESTED: c_int = 7;
/// The pool file, or a directory on its path, does not exist.
pub const PISCES_ENOENT: c_int = 8;
/// The pool file already exists.
pub const PISCES_EEXIST: c_int = 9;
/// An operating-system call failed, or the pool path names a directory or a file that
/// may not be written.
pub const PISCES_EIO: c_int = 10;
/// The pool has no free block of the size asked for.
pub const PISCES_ENOSPC: c_int = 11;
/// The transaction is too large for a thread's log.
pub const PISCES_ETOOLARGE: c_int = 12;
/// All thread slots of the pool are taken.
pub const PISCES_ETHREADS: c_int = 13;
/// An offset does not name a valid object (of that size: an access past the size the
/// object was allocated with, or of the container type).
pub const PISCES_EPTR: c_int = 14;
/// The pool is damaged, not a pool, or of an unsupported format version.
pub const PISCES_ECORRUPT: c_int = 15;
/// Unknown or unavailable engine, or the pool belongs to another engine.
pub const PISCES_EENGINE: c_int = 16;
/// Another process has the pool open.
pub const PISCES_ELOCKED: c_int = 17;
/// A read-only transaction tried to write, allocate or free.
pub const PISCES_EREADONLY: c_int = 18;
/// The engine does not offer the isolation level asked for.
pub const PISCES_EISOLATION: c_int = 19;
/// A configuration value is invalid.
pub const PISCES_ECONFIG: c_int = 20;
/// An internal panic was caught (a bug in Pisces); `pisces_errmsg` says what and
/// where. Nothing is printed.
pub const PISCES_EPANIC: c_int = 21;
/// The container value size is not one of the supported sizes.
pub const PISCES_EVALUESIZE: c_int = 22;
/// The pool or handle was closed (or the pointer never came from this library): a
/// second close, or a call after close. Checked without touching freed memory.
pub const PISCES_ECLOSED: c_int = 23;
/// A process that shares the pool (`pisces_pool_open_shared`) ended while it held what
/// this call waited for: the pool is stopped in every process. Writing transactions
/// fail with this code until every process has closed the pool; the next open then
/// recovers it as after a crash (a transaction that failed with it may or may not be
/// there).
pub const PISCES_EPEERDIED: c_int = 24;
/// First code free for the application's own return values from callbacks.
pub const PISCES_USER: c_int = 1000;

/// The code for a library error.
pub(crate) fn code_of(e: &Error) -> c_int {
    match e {
        // A missing directory on the way to the pool file: as a missing file.
        Error::Io(e) if e.source.kind() == std::io::ErrorKind::NotFound => PISCES_ENOENT,
        Error::Io(_) | Error::ReadOnly(_) | Error::IsDirectory(_) => PISCES_EIO,
        Error::NotFound(_) => PISCES_ENOENT,
        Error::AlreadyExists(_) => PISCES_EEXIST,
        Error::TooSmall(_)
        | Error::SizeMismatch(_)
        | Error::BadMagic
        | Error::UnsupportedVersion { .. }
        | Error::Corrupt(_) => PISCES_ECORRUPT,
        Error::WrongEngine(_) | Error::UnknownEngine(_) => PISCES_EENGINE,
        // Open elsewhere, or already open in this process: either way, locked.
        Error::Locked(_) | Error::AlreadyOpen(_) => PISCES_ELOCKED,
        Error::MediumUnsupported(_) | Error::InvalidConfig(_) => PISCES_ECONFIG,
        Error::OutOfSpace { .. } => PISCES_ENOSPC,
        Error::TooLargeForLog(_) => PISCES_ETOOLARGE,
        Error::TooManyThreads(_) => PISCES_ETHREADS,
        Error::InvalidPointer(_) => PISCES_EPTR,
        Error::Conflict => PISCES_ECONFLICT,
        Error::UserAbort(_) => PISCES_EABORTED,
        Error::ReadOnlyTransaction => PISCES_EREADONLY,
        Error::IsolationUnsupported(_) => PISCES_EISOLATION,
        Error::NestedTransaction => PISCES_ENESTED,
        Error::InvalidArgument(_) => PISCES_EINVAL,
        Error::PeerDied { .. } => PISCES_EPEERDIED,
        _ => PISCES_ERROR,
    }
}

thread_local! {
    /// True while this thread runs inside an entry point: its panics are caught there
    /// and reported through `pisces_errmsg`, so the hook prints nothing for them.
    static IN_ENTRY: Cell<bool> = const { Cell::new(false) };
    /// Where the last silenced panic of this thread happened ("file:line:column").
    static PANIC_AT: RefCell<Option<String>> = const { RefCell::new(None) };
    static MSG: RefCell<CString> = RefCell::new(CString::default());
    /// Code of the last failure on this thread (for `pisces_run` to tell whether a
    /// callback passed an access's error on).
    static LAST: Cell<c_int> = const { Cell::new(PISCES_OK) };
}

pub(crate) fn set_msg(msg: String) {
    let c = CString::new(msg.replace('\0', " ")).unwrap_or_default();
    let _ = MSG.try_with(|m| {
        if let Ok(mut m) = m.try_borrow_mut() {
            *m = c;
        }
    });
}

pub(crate) fn last_code() -> c_int {
    LAST.try_with(Cell::get).unwrap_or(PISCES_OK)
}

pub(crate) fn clear_last_code() {
    let _ = LAST.try_with(|l| l.set(PISCES_OK));
}

/// A failure whose message is already recorded for this thread.
#[derive(Debug)]
pub(crate) struct Fail(pub c_int);

impl Fail {
    pub(crate) fn new(code: c_int, msg: impl Into<String>) -> Fail {
        set_msg(msg.into());
        let _ = LAST.try_with(|l| l.set(code));
        Fail(code)
    }
    /// A failure whose message was set already.
    pub(crate) fn already_set(code: c_int) -> Fail {
        let _ = LAST.try_with(|l| l.set(code));
        Fail(code)
    }
}

impl From<Error> for Fail {
    fn from(e: Error) -> Fail {
        Fail::new(code_of(&e), e.to_string())
    }
}

fn panic_text(p: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "unknown panic payload".to_string()
    }
}

/// Install the panic hook of this library once (see the module docs): silent inside
/// entry points, the previous hook's behaviour everywhere else.
#[cold]
#[inline(never)]
fn install_hook() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if IN_ENTRY.try_with(Cell::get).unwrap_or(false) {
            let at = info
                .location()
                .map(|l| format!("{}:{}:{}", l.file(), l.line(), l.column()));
            let _ = PANIC_AT.try_with(|p| {
                if let Ok(mut p) = p.try_borrow_mut() {
                    *p = at;
                }
            });
            return;
        }
        previous(info)
    }));
}

/// Run `f` behind the panic barrier, with the silent hook in place and this thread
/// marked as inside an entry point (restored afterwards: entry points nest when a C
/// callback calls back in).
#[inline(always)]
pub(crate) fn guarded<R>(f: impl FnOnce() -> R + UnwindSafe) -> std::thread::Result<R> {
    static HOOK: Once = Once::new();
    if !HOOK.is_completed() {
        HOOK.call_once(install_hook);
    }
    let outer = IN_ENTRY.try_with(|e| e.replace(true)).unwrap_or(false);
    let r = catch_unwind(f);
    let _ = IN_ENTRY.try_with(|e| e.set(outer));
    r
}

/// Run an entry point's body: its error as a code, a panic as `PISCES_EPANIC`.
#[inline(always)]
pub(crate) fn entry(f: impl FnOnce() -> Result<(), Fail>) -> c_int {
    match guarded(AssertUnwindSafe(f)) {
        Ok(Ok(())) => PISCES_OK,
        Ok(Err(Fail(code))) => code,
        Err(p) => panicked(p),
    }
}

/// A panic caught by [`entry`], as its code (off the fast path).
#[cold]
#[inline(never)]
fn panicked(p: Box<dyn std::any::Any + Send>) -> c_int {
    let at = PANIC_AT
        .try_with(|a| a.try_borrow_mut().ok().and_then(|mut a| a.take()))
        .ok()
        .flatten()
        .map_or(String::new(), |a| format!(" (at {a})"));
    Fail::new(
        PISCES_EPANIC,
        format!("internal panic in libpisces: {}{at}", panic_text(&*p)),
    )
    .0
}

/// The message of the last failed call on this thread ("" if none failed yet).
///
/// The string is read only and valid until the next failing call on this thread, and
/// not after the thread exits; copy it to keep it.
#[no_mangle]
pub extern "C" fn pisces_errmsg() -> *const c_char {
    // `try_with`: during thread exit the message may be gone already.
    guarded(|| {
        MSG.try_with(|m| m.try_borrow().map(|c| c.as_ptr()).ok())
            .ok()
            .flatten()
            .unwrap_or(c"".as_ptr())
    })
    .unwrap_or(c"".as_ptr())
}

/// A short description of a return code. The string is static (valid for the rest of
/// the process) and read only.
#[no_mangle]
pub extern "C" fn pisces_strerror(code: c_int) -> *const c_char {
    guarded(|| strerror(code).as_ptr().cast()).unwrap_or(c"unknown code".as_ptr())
}

fn strerror(code: c_int) -> &'static [u8] {
    match code {
        PISCES_OK => b"success\0",
        PISCES_ERROR => b"error\0",
        PISCES_EINVAL => b"invalid argument\0",
        PISCES_ECONFLICT => b"transaction conflict\0",
        PISCES_EABORTED => b"transaction aborted by the user\0",
        PISCES_ESTALE => b"transaction has ended\0",
        PISCES_EBUSY => b"handle busy\0",
        PISCES_ENESTED => b"nested transaction\0",
        PISCES_ENOENT => b"pool file not found\0",
        PISCES_EEXIST => b"pool file exists\0",
        PISCES_EIO => b"I/O error\0",
        PISCES_ENOSPC => b"out of pool space\0",
        PISCES_ETOOLARGE => b"transaction too large for the log\0",
        PISCES_ETHREADS => b"all thread slots in use\0",
        PISCES_EPTR => b"invalid persistent pointer\0",
        PISCES_ECORRUPT => b"pool corrupt or not a pool\0",
        PISCES_EENGINE => b"engine unknown, unavailable or wrong\0",
        PISCES_ELOCKED => b"pool locked by another process\0",
        PISCES_EREADONLY => b"read-only transaction\0",
        PISCES_EISOLATION => b"isolation level not offered\0",
        PISCES_ECONFIG => b"invalid configuration\0",
        PISCES_EPANIC => b"internal panic\0",
        PISCES_EVALUESIZE => b"unsupported container value size\0",
        PISCES_ECLOSED => b"pool or handle closed\0",
        PISCES_EPEERDIED => b"a process sharing the pool died; the pool is stopped\0",
        _ => b"unknown code\0",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Set in the environment of the child run of [`panics_are_silent_inside_entry_points`].
    const CHILD: &str = "PISCES_CAPI_PANIC_CHILD";

    /// A panic inside an entry point is `PISCES_EPANIC` with its message and place in
    /// `pisces_errmsg`, and prints nothing; a panic outside one still reaches the hook
    /// that was there before. Checked on the real stderr of a child run of this test
    /// (the test harness captures panic output in-process).
    #[test]
    fn panics_are_silent_inside_entry_points() {
        if std::env::var_os(CHILD).is_some() {
            let code = entry(|| panic!("boom inside an entry point"));
            assert_eq!(code, PISCES_EPANIC);
            // SAFETY: the message is a nul-terminated string of this thread, read before
            // the next failing call.
            let msg = unsafe { std::ffi::CStr::from_ptr(pisces_errmsg()) }
                .to_string_lossy()
                .into_owned();
            assert!(
                msg.contains("internal panic in libpisces: boom inside an entry point (at ")
                    && msg.contains("errors.rs:"),
                "{msg}"
            );
            // Entry points nest (a C callback calling back in): the inner one leaves the
            // outer one marked.
            let code = entry(|| {
                assert_eq!(entry(|| Ok(())), PISCES_OK);
                panic!("boom after a nested entry point")
            });
            assert_eq!(code, PISCES_EPANIC);
            let outside = std::thread::spawn(|| panic!("boom outside the interface")).join();
            assert!(outside.is_err());
            return;
        }
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "errors::tests::panics_are_silent_inside_entry_points",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD, "1")
            .env("RUST_BACKTRACE", "1")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "child failed:\n{stderr}");
        assert!(!stderr.contains("boom inside"), "printed:\n{stderr}");
        assert!(!stderr.contains("boom after"), "printed:\n{stderr}");
        // One report (with its backtrace: RUST_BACKTRACE is set): the outside panic's.
        assert_eq!(stderr.matches("panicked at").count(), 1, "{stderr}");
        assert_eq!(stderr.matches("stack backtrace").count(), 1, "{stderr}");
        assert!(
            stderr.contains("boom outside the interface"),
            "the previous hook did not run:\n{stderr}"
        );
    }
}
