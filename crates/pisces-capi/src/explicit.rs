//! Explicit transactions (`pisces_tx_begin` / `pisces_tx_commit` / `pisces_tx_abort`)
//! on top of a closure-only Rust API.
//!
//! # Design
//! The Rust library runs a transaction as a closure (`ThreadHandle::transaction`); C
//! code that begins a transaction, returns to its caller and commits later needs the
//! closure's stack frame to stay suspended in between. So each handle gets, at its
//! first explicit transaction, a dedicated **worker thread**. `pisces_tx_begin` moves
//! the handle's `ThreadHandle` to the worker through a channel; the worker calls
//! `ThreadHandle::transaction` and, inside the closure, serves requests: every access
//! of the C thread (read, write, alloc, free, container operation) is sent as a *job*
//! — a closure over the `&mut Tx` — and the C thread blocks until the worker answers.
//! `pisces_tx_commit` makes the closure return `Ok` (the library commits and makes the
//! transaction durable), `pisces_tx_abort` makes it return an error (rolled back).
//! When the transaction has ended the worker sends the `ThreadHandle` back.
//!
//! # Why it is sound
//! * The `Tx` never leaves the worker thread, and it is used only inside the closure
//!   the library gave it to: all of the library's borrowing rules hold as in any Rust
//!   transaction. Every engine call of one transaction (begin, accesses, commit) runs
//!   on one OS thread, which engines with per-thread state need (pmdk, the file
//!   medium's per-thread fences).
//! * A job borrows the C thread's stack (its arguments and result slot). It is sent as
//!   a raw pointer with its lifetime erased, and the C thread waits for the worker's
//!   answer before returning — the same argument as `std::thread::scope`: the borrow
//!   outlives every use. If the worker died instead, the channel reports it and the
//!   job is not used any more either.
//! * Job and answer travel through channels, whose send/receive pairs order the two
//!   threads' memory accesses. Pointers that jobs hand back to C (`pisces_read`,
//!   `pisces_write`) point into pool memory that stays valid for the same period a
//!   Rust reference would (see the header's lifetime rule); the worker is blocked
//!   while C uses them.
//! * The library retries a transaction whose commit conflicts by calling the closure
//!   again. The C program's accesses cannot be replayed, so a second call of the
//!   closure ends at once: with a conflict if the program asked for commit
//!   (`pisces_tx_commit` returns `PISCES_ECONFLICT`; the program runs its transaction
//!   again), with a user abort if it asked for abort.
//! * The nesting check of the library is per OS thread; the worker is another
//!   thread, so the C API keeps its own per-thread list of pools with a running
//!   transaction (a second transaction of the same pool on this thread would wait for
//!   the first forever) and refuses nesting with `PISCES_ENESTED`.
//! * Panics: a job's panic is caught on the worker and answered as `PISCES_EPANIC`;
//!   a panic of the transaction machinery itself is caught there too and the
//!   `ThreadHandle` is still sent back.
//!
//! Cost: two channel hand-offs (thread wake-ups) per access; the callback API
//! (`pisces_run`) has none and is the fast path.

use crate::errors::{entry, panic_fail, Fail};
use crate::{
    current, handle_ref, nest_enter, nest_leave, out_ptr, pisces_handle, pisces_tx,
    pisces_tx_options, set_explicit, set_idle, to_tx_options, Mode, PISCES_EBUSY, PISCES_ECONFLICT,
    PISCES_EPANIC, PISCES_ESTALE,
};
use pisces::{Error, ThreadHandle, Tx, TxOptions};
use std::ffi::c_int;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::thread::JoinHandle;

type JobFn = dyn FnMut(&mut Tx<'_>);

/// A job borrowed from the waiting C thread (lifetime erased, see the module docs).
struct Job(*mut JobFn);
// SAFETY: the job is run by the worker while the thread that owns it waits for the
// answer; it is never used by two threads at once.
unsafe impl Send for Job {}

enum Msg {
    Begin(Box<ThreadHandle>, TxOptions),
    Job(Job),
    Commit,
    Abort,
}

enum Reply {
    /// The transaction has begun.
    Began,
    /// The last job has run (or panicked: then its result slot is empty).
    JobDone,
    /// The transaction ended (or could not begin): the thread state and the outcome.
    Ended(Box<ThreadHandle>, Result<(), Ended>),
}

enum Ended {
    Error(Error),
    Panic(String),
}

/// A handle's worker thread and its channels.
pub(crate) struct Worker {
    to: Sender<Msg>,
    from: Receiver<Reply>,
    thread: Option<JoinHandle<()>>,
    /// Where the transaction began (it must end there: the nesting list is per thread).
    began_on: Option<std::thread::ThreadId>,
}

fn worker_main(rx: Receiver<Msg>, tx: Sender<Reply>) {
    while let Ok(msg) = rx.recv() {
        let Msg::Begin(mut th, opts) = msg else {
            continue; // stray message between transactions: ignore
        };
        let mut attempt = 0u32;
        let mut commit_asked = false;
        let r = catch_unwind(AssertUnwindSafe(|| {
            th.transaction(opts, |t: &mut Tx<'_>| -> Result<(), Error> {
                attempt += 1;
                if attempt > 1 {
                    // The library retries after a conflict; the C program's accesses
                    // cannot be replayed, so end here.
                    return Err(if commit_asked {
                        Error::Conflict
                    } else {
                        Error::abort("pisces_tx_abort")
                    });
                }
                if tx.send(Reply::Began).is_err() {
                    return Err(Error::abort("the C thread went away"));
                }
                loop {
                    match rx.recv() {
                        Ok(Msg::Job(Job(j))) => {
                            // SAFETY: the owner waits for `JobDone` (module docs).
                            let job = unsafe { &mut *j };
                            let _ = catch_unwind(AssertUnwindSafe(|| job(t)));
                            if tx.send(Reply::JobDone).is_err() {
                                return Err(Error::abort("the C thread went away"));
                            }
                        }
                        Ok(Msg::Commit) => {
                            commit_asked = true;
                            return Ok(());
                        }
                        Ok(Msg::Abort) | Err(_) => return Err(Error::abort("pisces_tx_abort")),
                        Ok(Msg::Begin(..)) => {
                            // Never sent while a transaction runs (the C side checks).
                            return Err(Error::abort("protocol error"));
                        }
                    }
                }
            })
        }));
        let outcome = match r {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(Ended::Error(e)),
            Err(p) => Err(Ended::Panic(
                p.downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| p.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "unknown panic".into()),
            )),
        };
        if tx.send(Reply::Ended(th, outcome)).is_err() {
            return;
        }
    }
}

fn lost() -> Fail {
    Fail::new(
        PISCES_EPANIC,
        "the explicit-transaction worker thread died; close the handle",
    )
}

/// Run `f` on the worker's transaction and return its result.
pub(crate) fn run_job<R>(
    h: &pisces_handle,
    f: impl FnOnce(&mut Tx<'_>) -> Result<R, Fail>,
) -> Result<R, Fail> {
    let w = h.worker.borrow();
    let w = w.as_ref().ok_or_else(lost)?;
    let mut f = Some(f);
    let mut out: Option<Result<R, Fail>> = None;
    // Errors raised on the worker set the worker's message: carry code and text back.
    let mut err: Option<(c_int, String)> = None;
    {
        let mut job = |t: &mut Tx<'_>| {
            if let Some(f) = f.take() {
                let r = f(t);
                if let Err(Fail(code)) = &r {
                    let msg = unsafe { std::ffi::CStr::from_ptr(crate::pisces_errmsg()) }
                        .to_string_lossy()
                        .into_owned();
                    err = Some((*code, msg));
                }
                out = Some(r);
            }
        };
        let p: *mut (dyn FnMut(&mut Tx<'_>) + '_) = &mut job;
        // SAFETY: only the lifetime is erased; this thread waits below until the
        // worker has finished with the job (module docs).
        let p: *mut JobFn = unsafe { std::mem::transmute(p) };
        w.to.send(Msg::Job(Job(p))).map_err(|_| lost())?;
        match w.from.recv() {
            Ok(Reply::JobDone) => {}
            _ => return Err(lost()),
        }
    }
    match out {
        Some(Ok(v)) => Ok(v),
        Some(Err(_)) => {
            let (code, msg) = err.unwrap_or((crate::PISCES_ERROR, String::new()));
            Err(Fail::new(code, msg))
        }
        None => Err(Fail::new(
            PISCES_EPANIC,
            "internal panic in libpisces while running an access",
        )),
    }
}

/// Begin an explicit transaction on `h`; `*out` = the transaction. `opts` may be NULL.
///
/// All accesses of the transaction are executed on the handle's worker thread (started
/// at the first explicit transaction). No automatic retry: when an access or
/// `pisces_tx_commit` returns `PISCES_ECONFLICT`, abort (after an access) and run the
/// transaction again. End it on the thread that began it. Only one transaction per
/// handle at a time (`PISCES_EBUSY`), and none of the same pool already running on
/// this thread (`PISCES_ENESTED`). Keep it short: like any running transaction, an open
/// one delays the write-backs of other threads' commits until it ends.
#[no_mangle]
pub unsafe extern "C" fn pisces_tx_begin(
    h: *mut pisces_handle,
    opts: *const pisces_tx_options,
    out: *mut pisces_tx,
) -> c_int {
    entry(|| {
        let out = out_ptr(out, "out")?;
        let hr = handle_ref(h)?;
        let opts = to_tx_options(opts)?;
        let th = crate::take_th(hr)?;
        if let Err(e) = nest_enter(hr.key()) {
            crate::put_th(hr, th);
            return Err(e);
        }
        let r = begin(hr, th, opts);
        match r {
            Ok(()) => {
                let generation = set_explicit(hr);
                *out = pisces_tx {
                    handle: h,
                    generation,
                };
                Ok(())
            }
            Err(e) => {
                nest_leave(hr.key());
                Err(e)
            }
        }
    })
}

fn begin(h: &pisces_handle, th: ThreadHandle, opts: TxOptions) -> Result<(), Fail> {
    let mut slot = h.worker.borrow_mut();
    if slot.is_none() {
        let (to, rx) = channel();
        let (tx, from) = channel();
        let thread = std::thread::Builder::new()
            .name("pisces-tx-worker".into())
            .spawn(move || worker_main(rx, tx))
            .map_err(|e| Fail::from(Error::io("starting the explicit-transaction worker", e)))?;
        *slot = Some(Worker {
            to,
            from,
            thread: Some(thread),
            began_on: None,
        });
    }
    let w = slot.as_mut().ok_or_else(lost)?;
    if w.to.send(Msg::Begin(Box::new(th), opts)).is_err() {
        return Err(lost());
    }
    match w.from.recv() {
        Ok(Reply::Began) => {
            w.began_on = Some(std::thread::current().id());
            Ok(())
        }
        Ok(Reply::Ended(th, r)) => {
            crate::put_th(h, *th);
            match r {
                Ok(()) => Err(Fail::new(
                    crate::PISCES_ERROR,
                    "the transaction ended at once",
                )),
                Err(Ended::Error(e)) => Err(e.into()),
                Err(Ended::Panic(p)) => Err(panic_fail(&p)),
            }
        }
        _ => Err(lost()),
    }
}

/// End the explicit transaction of `h`: commit or abort. The handle is idle afterwards
/// whatever happened.
pub(crate) fn end(h: &pisces_handle, commit: bool) -> Result<(), Fail> {
    let r = (|| {
        let slot = h.worker.borrow();
        let w = slot.as_ref().ok_or_else(lost)?;
        w.to.send(if commit { Msg::Commit } else { Msg::Abort })
            .map_err(|_| lost())?;
        match w.from.recv() {
            Ok(Reply::Ended(th, r)) => {
                crate::put_th(h, *th);
                match r {
                    Ok(()) => Ok(()),
                    Err(Ended::Error(Error::UserAbort(_))) if !commit => Ok(()),
                    Err(Ended::Error(e)) => Err(Fail::from(e)),
                    Err(Ended::Panic(p)) => Err(panic_fail(&p)),
                }
            }
            _ => Err(lost()),
        }
    })();
    nest_leave(h.key());
    set_idle(h);
    r
}

unsafe fn explicit_of<'a>(tx: pisces_tx) -> Result<&'a pisces_handle, Fail> {
    let h = current(tx)?;
    if h.mode.get() != Mode::Explicit {
        return Err(Fail::new(
            PISCES_ESTALE,
            "not an explicit transaction (commit/abort are for pisces_tx_begin; a callback returns its code)",
        ));
    }
    if h.iterating.get() {
        return Err(Fail::new(
            PISCES_EBUSY,
            "cannot end a transaction inside a foreach/range callback",
        ));
    }
    let here = std::thread::current().id();
    if h.worker.borrow().as_ref().and_then(|w| w.began_on) != Some(here) {
        return Err(Fail::new(
            crate::PISCES_EINVAL,
            "an explicit transaction must end on the thread that began it",
        ));
    }
    Ok(h)
}

/// Commit the explicit transaction `tx` (durable on return unless
/// `deferred_durability`). `PISCES_ECONFLICT`: it was rolled back; run it again.
/// Afterwards `tx` is stale whatever the outcome.
#[no_mangle]
pub unsafe extern "C" fn pisces_tx_commit(tx: pisces_tx) -> c_int {
    entry(|| {
        let h = explicit_of(tx)?;
        end(h, true).map_err(|f| {
            if f.0 == PISCES_ECONFLICT {
                Fail::new(
                    PISCES_ECONFLICT,
                    "transaction aborted by a conflict at commit; run it again",
                )
            } else {
                f
            }
        })
    })
}

/// Roll back the explicit transaction `tx`. Afterwards `tx` is stale.
#[no_mangle]
pub unsafe extern "C" fn pisces_tx_abort(tx: pisces_tx) -> c_int {
    entry(|| {
        let h = explicit_of(tx)?;
        end(h, false)
    })
}

/// Stop the worker thread of `h` (handle close).
pub(crate) fn shutdown(h: &pisces_handle) {
    if let Some(w) = h.worker.borrow_mut().take() {
        let Worker { to, thread, .. } = w;
        drop(to); // the worker's receive fails and it returns
        if let Some(t) = thread {
            let _ = t.join();
        }
    }
}
