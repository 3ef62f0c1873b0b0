//! Explicit transactions (`pisces_tx_begin` / `pisces_tx_commit` / `pisces_tx_abort`)
//! on the caller's thread.
//!
//! # Design
//! The library's explicit transaction ([`pisces::ExplicitTx`], from
//! `ThreadHandle::begin`) owns one attempt on a thread handle until it is committed,
//! aborted or dropped. `pisces_tx_begin` begins one on the C handle's `ThreadHandle`
//! and keeps it in the handle (`pisces_handle::explicit`) until `pisces_tx_commit` or
//! `pisces_tx_abort` takes it out and ends it. Every access between runs on the
//! calling thread, exactly like an access inside a `pisces_run` callback; the only
//! difference is where the `Tx` comes from (`with_tx_ref` /
//! `with_tx_mut` in the crate root).
//!
//! # Why it is sound
//! In Rust, `ExplicitTx<'h>` borrows its `ThreadHandle` mutably for `'h`. The C
//! program's transaction lives across calls, so the handle stores it as
//! `ExplicitTx<'static>`: the lifetime is erased, and this module keeps the borrow's
//! rules by hand:
//! * The `ThreadHandle` sits in the boxed `pisces_handle` and never moves while the
//!   handle is open; the transaction is taken out and ended before the handle is freed
//!   (`pisces_handle_close`, and `Drop for pisces_handle` as a last resort, which drops
//!   the transaction before the thread state).
//! * While the transaction exists the handle's `mode` is `Explicit`, and the thread
//!   state is reachable only through `idle_th` (crate root), which refuses a non-idle
//!   handle: no second reference to the borrowed state is ever created.
//! * The transaction is not `Send` in Rust, because its nesting registration is per
//!   thread and some engines keep per-thread transaction state. C cannot be stopped
//!   from passing a `pisces_tx` to another thread, so every use of an explicit
//!   transaction (accesses, commit, abort, closing the handle) checks that it runs on
//!   the thread that began it (`PISCES_EINVAL` otherwise). The check compares the
//!   address of a thread-local, which a thread started after that one exits may get
//!   too: so `pisces_tx_begin`'s contract has the transaction ended before its thread
//!   exits.
//! * Pointers handed to C follow the header's lifetime rule, the C form of the Rust
//!   borrows (`&self` for reads, `&mut self` for writes, `self` for commit).
//!
//! Conflicts are not retried: an access or commit that returns `PISCES_ECONFLICT`
//! ends with the transaction rolled back (after an access: once the program aborts
//! it; a commit after a conflicted access rolls back and returns `PISCES_ECONFLICT`
//! too), and the program runs it again.

use crate::errors::{entry, Fail};
use crate::{
    check_thread, current, end, handle_ref, idle_th, out_ptr, pisces_handle, pisces_tx,
    pisces_tx_options, set_explicit, thread_mark, to_tx_options, Mode, PISCES_EBUSY, PISCES_ESTALE,
};
use pisces::ThreadHandle;
use std::ffi::c_int;

/// Begin an explicit transaction on `h`; `*out` = the transaction. `opts` may be NULL.
///
/// It runs on the calling thread: use it, commit it and abort it only there. No
/// automatic retry: when an access or `pisces_tx_commit` returns `PISCES_ECONFLICT`,
/// abort (after an access) and run the transaction again. Only one transaction per
/// handle at a time (`PISCES_EBUSY`), and none of the same pool already running on
/// this thread (`PISCES_ENESTED`). Keep it short: like any running transaction, an open
/// one delays the write-backs of other threads' commits until it ends.
///
/// # Safety
/// * `h` is NULL (`PISCES_EINVAL`) or an open handle (from `pisces_handle_open`, not
///   closed) that no other thread uses during the call.
/// * `opts` is NULL or points to an initialized `pisces_tx_options`, readable during
///   the call.
/// * `out` is NULL (`PISCES_EINVAL`) or points to a writable `pisces_tx` that no other
///   thread uses during the call.
/// * The transaction is ended on this thread (`pisces_tx_commit`, `pisces_tx_abort` or
///   `pisces_handle_close`) before the thread exits: the thread check compares the
///   address of a thread-local variable, which a thread started later may reuse.
#[no_mangle]
pub unsafe extern "C" fn pisces_tx_begin(
    h: *mut pisces_handle,
    opts: *const pisces_tx_options,
    out: *mut pisces_tx,
) -> c_int {
    entry(move || {
        // SAFETY: `out` is NULL or a writable `pisces_tx` used only by this call
        // (contract).
        let out = unsafe { out_ptr(out, "out") }?;
        // SAFETY: `h` is NULL or an open handle used only by this thread during the call
        // (contract).
        let hr = unsafe { handle_ref(h) }?;
        // SAFETY: `opts` is NULL or initialized options (contract).
        let opts = unsafe { to_tx_options(opts) }?;
        // SAFETY: the borrow becomes the explicit transaction's below, and `mode` is
        // `Explicit` until that transaction is taken out again (the rule of `idle_th`);
        // no C code runs in between.
        let th: *mut ThreadHandle = unsafe { idle_th(hr) }?;
        // SAFETY: the lifetime of the borrow is erased (module docs): the handle is
        // idle, so no other reference to its thread state exists; from here until the
        // transaction is taken out again `mode` is `Explicit`, which keeps `idle_th`
        // from handing out another, and the transaction is dropped before the handle.
        let th: &'static mut ThreadHandle = unsafe { &mut *th };
        let t = th.begin(opts)?;
        // SAFETY: the slot is empty and unborrowed while the handle is idle.
        let slot = unsafe { &mut *hr.explicit.get() };
        // The accesses reach the `Tx` inside the transaction through `hr.tx`, as they
        // reach a callback's (one path for both; the `Tx` stays in place in the boxed
        // handle until `end` takes the transaction out, which clears the pointer
        // first). `with_tx` lends it under a fresh lifetime; as a raw pointer it
        // carries none.
        let p = slot
            .insert(t)
            .with_tx(|t| std::ptr::from_mut(t).cast::<pisces::Tx<'static>>());
        hr.tx.set(p);
        hr.began_on.set(thread_mark());
        let generation = set_explicit(hr);
        out.write(pisces_tx {
            handle: h,
            generation,
        });
        Ok(())
    })
}

/// The handle of the current explicit transaction `tx`, checked for ending it here:
/// `PISCES_ESTALE` for an ended or callback transaction, `PISCES_EBUSY` inside a
/// foreach/range callback, `PISCES_EINVAL` on another thread than the one that began it.
///
/// # Safety
/// `tx.handle` is NULL or an open handle that stays open and is used by no other thread
/// during `'a` (as for `current`).
unsafe fn explicit_of<'a>(tx: pisces_tx) -> Result<&'a pisces_handle, Fail> {
    // SAFETY: the contract of `current`, which this function's contract gives.
    let h = unsafe { current(tx) }?;
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
    check_thread(h)?;
    Ok(h)
}

/// Commit the explicit transaction `tx` (durable on return unless
/// `deferred_durability`). `PISCES_ECONFLICT`: it was rolled back; run it again.
/// Afterwards `tx` is stale whatever the outcome.
///
/// # Safety
/// * `tx`: its handle is open (not closed since the transaction began) and no other
///   thread uses it during the call; a `tx` whose transaction has ended is refused
///   (`PISCES_ESTALE`), one used on another thread than its `pisces_tx_begin`'s too
///   (`PISCES_EINVAL`).
/// * Once it returns, whatever the outcome, no pointer the transaction handed out
///   (`pisces_read`, `pisces_write`, `pisces_hmap_find`) may be used.
#[no_mangle]
pub unsafe extern "C" fn pisces_tx_commit(tx: pisces_tx) -> c_int {
    entry(move || {
        // SAFETY: `tx`'s handle is open and used only by this thread (contract).
        let h = unsafe { explicit_of(tx) }?;
        // SAFETY: `explicit_of` checked that this is the thread that began the
        // transaction and that `h` is not iterating. So no reference to its `Tx` is
        // alive: the only `with_tx_*` that runs C code is a foreach/range scan, which
        // sets `iterating`, and inside a `pisces_run` callback `h` is not `Explicit`.
        unsafe { end(h, true) }
    })
}

/// Roll back the explicit transaction `tx`. Afterwards `tx` is stale.
///
/// # Safety
/// * `tx`: its handle is open (not closed since the transaction began) and no other
///   thread uses it during the call; a `tx` whose transaction has ended is refused
///   (`PISCES_ESTALE`), one used on another thread than its `pisces_tx_begin`'s too
///   (`PISCES_EINVAL`).
/// * Once it returns, no pointer the transaction handed out (`pisces_read`,
///   `pisces_write`, `pisces_hmap_find`) may be used.
#[no_mangle]
pub unsafe extern "C" fn pisces_tx_abort(tx: pisces_tx) -> c_int {
    entry(move || {
        // SAFETY: `tx`'s handle is open and used only by this thread (contract).
        let h = unsafe { explicit_of(tx) }?;
        // SAFETY: as in `pisces_tx_commit`.
        unsafe { end(h, false) }
    })
}
