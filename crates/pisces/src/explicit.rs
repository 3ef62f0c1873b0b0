//! Explicit transactions: begin, access, then commit or abort, without a closure.
//!
//! [`ThreadHandle::begin`] starts one attempt on the handle's thread state and returns
//! an [`ExplicitTx`] that owns it until [`ExplicitTx::commit`] or
//! [`ExplicitTx::abort`] consumes it (dropping it aborts). It is the form for code
//! whose transaction does not fit one closure call: a C caller that begins, returns to
//! its own caller and commits later, an event loop, a state machine.
//!
//! # Algorithm
//! The same engine calls as one attempt of [`ThreadHandle::run`]: `begin`, the
//! accesses, then `commit` (and, unless [`Durability::Deferred`], a wait for
//! durability) or `abort`. What the closure API does in its retry loop the caller does
//! here: a conflict on commit (or an access that conflicted before it) rolls the
//! attempt back and `commit` returns [`Error::Conflict`]; the caller begins again.
//! Nothing is retried automatically, because the library cannot replay the caller's
//! accesses.
//!
//! # Invariants and why the API is sound
//! * The transaction borrows its handle mutably for its whole life (`ExplicitTx<'h>`
//!   holds `&'h mut` of the thread state): no second transaction, `wait_durable` or
//!   drop of the handle while it runs, checked by the compiler.
//! * Accesses keep the borrowing rules of [`Tx`]: reads through `&self`, writes,
//!   allocations and frees through `&mut self`; `commit` and `abort` take `self`, so no
//!   reference into the pool outlives the transaction.
//! * The `Tx` is reachable as `&Tx` ([`Deref`]) and as `&mut Tx` only inside
//!   [`ExplicitTx::with_tx`], whose closure sees it under a fresh lifetime: it cannot be
//!   swapped with another transaction's `Tx` (which would leave each transaction ending
//!   the other's attempt). The containers reach it through the sealed
//!   [`TxAccess`](crate::TxAccess) trait, whose method a user cannot call, so
//!   `map.insert(&mut etx, k, v)` works without lending it out either.
//! * Not `Send`: the nesting registration below is per thread, and some engines keep
//!   per-thread state (libpmemobj's transaction, the file medium's fences), so a
//!   transaction ends on the thread that began it.
//! * Nesting: as for closures, a transaction of a pool cannot begin on a thread that
//!   already runs one of the same pool (it could wait for that one forever): `begin`
//!   fails with [`Error::NestedTransaction`]. The registration (kept with the pool,
//!   not in a thread-local) ends when the transaction does, in any order relative to
//!   other transactions of other pools.
//! * Leaking: `mem::forget` of an `ExplicitTx` leaks its attempt, like forgetting a
//!   lock guard, but only until the handle is used again: the handle's next `begin`,
//!   `run`, `wait_durable` or its drop rolls the forgotten attempt back and ends its
//!   registration. Other handles and other pools are never affected.
//! * A conflict seen by an access marks the attempt: it is rolled back, never
//!   committed, even if the caller ignored the error (its reads may have been
//!   inconsistent), exactly as in the closure API.
//!
//! Counters ([`ThreadHandle::stats`]): a commit counts in `commits`; an attempt
//! rolled back by a conflict (at commit, or aborted after an access conflicted) in
//! `conflicts`; any other abort or failure in `failed`.

use crate::engine::registry::AnyThread;
use crate::nesting::{InTx, OpenExplicit};
use crate::pool::HandleParts;
use crate::tx::{commit_attempt, is_snapshot, Tx, TxStats};
use crate::tx_options::{Durability, TxOptions};
use crate::{Error, PPtr, Result, ThreadHandle};
use bytemuck::Pod;
use std::marker::PhantomData;
use std::ops::Deref;
use std::thread::ThreadId;

/// A running explicit transaction on a [`ThreadHandle`] (begun by
/// [`ThreadHandle::begin`]). Reads come from [`Tx`] through `Deref` (`etx.read(p)`); writes,
/// allocations and frees are methods of this type; the containers take it directly
/// (it is a [`TxAccess`](crate::TxAccess)), and [`ExplicitTx::with_tx`] lends the
/// `&mut Tx` to code written for closure transactions. Dropping it without `commit`
/// rolls it back.
///
/// ```
/// # use pisces::{Config, Pool, PPtr, Error, TxOptions};
/// # let dir = tempfile::tempdir().unwrap();
/// # let pool = Pool::create(dir.path().join("x.pool"), Config::default().size(32 << 20)).unwrap();
/// let n: PPtr<u64> = pool.root().unwrap();
/// let mut h = pool.handle().unwrap();
/// loop {
///     let mut t = h.begin(TxOptions::default())?;
///     let v = *t.read(n)?;
///     *t.write(n)? = v + 1;
///     match t.commit() {
///         Err(Error::Conflict) => continue, // rolled back: run it again
///         r => break r?,
///     }
/// }
/// {
///     let mut t = h.begin(TxOptions::default())?;
///     *t.write(n)? = 100;
/// } // dropped: rolled back
/// assert_eq!(h.run(|tx| Ok(*tx.read(n)?))?, 1);
/// # Ok::<(), Error>(())
/// ```
///
/// Containers take the explicit transaction as they take a closure's `Tx`: updates by
/// `&mut`, reads by `&`, no closure around each call.
/// ```
/// # use pisces::{BTreeMap, Config, Error, HashMap, Pool, TxOptions};
/// # let dir = tempfile::tempdir().unwrap();
/// # let pool = Pool::create(dir.path().join("c.pool"), Config::default().size(32 << 20)).unwrap();
/// let mut h = pool.handle()?;
/// let mut t = h.begin(TxOptions::default())?;
/// let map = HashMap::<u64, u64>::new(&mut t)?;
/// let tree = BTreeMap::<u64, u64>::new(&mut t)?;
/// map.insert(&mut t, 7, 70)?;
/// tree.insert(&mut t, 1, 10)?;
/// tree.entry(&mut t, 1)?.and_modify(|v| *v += 1)?.or_insert(0)?;
/// *map.get_mut(&mut t, &7)?.unwrap() += 1;
/// assert_eq!(map.get(&t, &7)?, Some(71));
/// assert_eq!(tree.range(&t, ..).next_back().transpose()?, Some((&1, &11)));
/// assert_eq!((map.len(&t)?, tree.len(&t)?), (1, 1));
/// t.commit()?;
/// assert_eq!(h.run(|tx| map.get(tx, &7))?, Some(71));
/// # Ok::<(), Error>(())
/// ```
///
/// The `&mut Tx` lent by `with_tx` cannot be swapped with another transaction's:
/// ```compile_fail
/// # use pisces::{Pool, TxOptions};
/// # fn f(pool: &Pool) -> pisces::Result<()> {
/// let (mut h1, mut h2) = (pool.handle()?, pool.handle()?);
/// let mut a = h1.begin(TxOptions::default())?;
/// let mut b = h2.begin(TxOptions::default())?;
/// a.with_tx(|ta| b.with_tx(|tb| std::mem::swap(ta, tb)));
/// # Ok(()) }
/// ```
///
/// No reference from an access outlives the transaction:
/// ```compile_fail
/// # use pisces::{Pool, PPtr, TxOptions};
/// # fn f(pool: &Pool, p: PPtr<u64>) -> pisces::Result<()> {
/// let mut h = pool.handle()?;
/// let t = h.begin(TxOptions::default())?;
/// let r = t.read(p)?;
/// t.commit()?;
/// assert_eq!(*r, 0);
/// # Ok(()) }
/// ```
///
/// Nor can it move to another thread:
/// ```compile_fail
/// # use pisces::{Pool, TxOptions};
/// # fn f(pool: &Pool) -> pisces::Result<()> {
/// let mut h = pool.handle()?;
/// let t = h.begin(TxOptions::default())?;
/// std::thread::scope(|s| { s.spawn(move || t.commit()); });
/// # Ok(()) }
/// ```
pub struct ExplicitTx<'h> {
    tx: Tx<'h>,
    stats: &'h mut TxStats,
    durability: Durability,
    /// Begun as a snapshot (`crate::tx::is_snapshot`): ended as one.
    snapshot: bool,
    /// Set once committed or aborted (then `Drop` has nothing to do).
    ended: bool,
    /// Runs nested in a transaction of another pool (the engine was told).
    nested: bool,
    /// Dropped after `tx`'s rollback: the pool counts as running a transaction on this
    /// thread until the attempt is over.
    _registration: Registration<'h>,
    /// Not `Send` (module docs).
    _thread_bound: PhantomData<*mut ()>,
}

impl std::fmt::Debug for ExplicitTx<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExplicitTx").field("tx", &self.tx).finish()
    }
}

impl ThreadHandle {
    /// Begin an explicit transaction on this handle's thread state (see
    /// [`ExplicitTx`]). Fails with [`Error::NestedTransaction`] when a transaction of
    /// the same pool already runs on this thread, and with
    /// [`Error::IsolationUnsupported`] for a level the engine does not offer.
    pub fn begin(&mut self, opts: TxOptions) -> Result<ExplicitTx<'_>> {
        let HandleParts {
            pool,
            explicit,
            slot,
            th,
            stats,
            began_on,
        } = self.parts();
        if InTx::active(pool) || explicit.on_this_thread() {
            return Err(Error::NestedTransaction);
        }
        check_isolation(th, &opts)?;
        // The engine forgets it when the transaction ends (`Drop`, also after
        // `commit`), or, for a leaked one, when its handle ends it.
        let nested = InTx::inside_any();
        if nested {
            th.set_nested(true);
        }
        explicit.add(slot);
        *began_on = Some(std::thread::current().id());
        let registration = Registration {
            explicit,
            slot,
            began_on,
        };
        Ok(ExplicitTx {
            snapshot: is_snapshot(&opts),
            tx: Tx::begin(th, &opts),
            stats,
            durability: opts.durability,
            ended: false,
            nested,
            _registration: registration,
            _thread_bound: PhantomData,
        })
    }
}

/// An explicit transaction's registration with its pool, ended when dropped (after the
/// attempt is over). If the transaction is leaked, `began_on` stays set and the
/// handle ends the registration itself.
struct Registration<'h> {
    explicit: &'h OpenExplicit,
    slot: usize,
    began_on: &'h mut Option<ThreadId>,
}

impl Drop for Registration<'_> {
    fn drop(&mut self) {
        if let Some(t) = self.began_on.take() {
            self.explicit.remove(self.slot, t);
        }
    }
}

fn check_isolation(th: &AnyThread, opts: &TxOptions) -> Result<()> {
    match opts.isolation {
        Some(level) if !th.id().offers(level) => Err(Error::IsolationUnsupported(Box::new(
            crate::error::IsolationUnsupported {
                engine: th.id().name(),
                requested: level,
                offered: th.id().isolation(),
            },
        ))),
        _ => Ok(()),
    }
}

impl<'h> Deref for ExplicitTx<'h> {
    type Target = Tx<'h>;
    #[inline]
    fn deref(&self) -> &Tx<'h> {
        &self.tx
    }
}

impl<'h> crate::tx::sealed::TxMut<'h> for ExplicitTx<'h> {
    #[inline(always)]
    fn tx_mut(&mut self) -> &mut Tx<'h> {
        &mut self.tx
    }
}
impl<'h> crate::tx::TxAccess<'h> for ExplicitTx<'h> {}

impl ExplicitTx<'_> {
    /// Lend the transaction as `&mut Tx` (for the containers and for code shared with
    /// closure transactions). The closure sees it under a lifetime of its own, so it
    /// cannot be swapped with another `Tx`.
    #[inline]
    pub fn with_tx<R>(&mut self, f: impl FnOnce(&mut Tx<'_>) -> R) -> R {
        f(&mut self.tx)
    }

    /// This transaction's writable version of `*p` (see [`Tx::write`]).
    #[inline]
    pub fn write<T: Pod>(&mut self, p: PPtr<T>) -> Result<&mut T> {
        self.tx.write(p)
    }

    /// This transaction's writable version of the first `len` bytes at `p` (see
    /// [`Tx::write_bytes`]).
    #[inline]
    pub fn write_bytes(&mut self, p: PPtr<u8>, len: usize) -> Result<&mut [u8]> {
        self.tx.write_bytes(p, len)
    }

    /// Allocate an object holding `value` (see [`Tx::alloc`]).
    pub fn alloc<T: Pod>(&mut self, value: T) -> Result<PPtr<T>> {
        self.tx.alloc(value)
    }

    /// Allocate a zeroed `T` (see [`Tx::alloc_zeroed`]).
    pub fn alloc_zeroed<T: Pod>(&mut self) -> Result<PPtr<T>> {
        self.tx.alloc_zeroed()
    }

    /// Allocate `len` zeroed bytes (see [`Tx::alloc_bytes`]).
    pub fn alloc_bytes(&mut self, len: usize) -> Result<PPtr<u8>> {
        self.tx.alloc_bytes(len)
    }

    /// Free `*p` when the transaction commits (see [`Tx::free`]).
    pub fn free<T: Pod>(&mut self, p: PPtr<T>) -> Result<()> {
        self.tx.free(p)
    }

    /// Commit; returns once the transaction is durable (visible, with
    /// [`Durability::Deferred`]). [`Error::Conflict`]: it was rolled back — begin it
    /// again. Any other error: rolled back, or (a failed wait for durability)
    /// committed but not known to be durable, as with [`ThreadHandle::run`].
    pub fn commit(mut self) -> Result<()> {
        self.ended = true;
        let conflicted = self.tx.finish();
        let th = self.tx.thread();
        if conflicted {
            // An access conflicted: the caller may have read an inconsistent state.
            th.abort();
            th.after_abort();
            self.stats.conflicts += 1;
            return Err(Error::Conflict);
        }
        match commit_attempt(th, self.snapshot, self.durability == Durability::OnReturn) {
            Ok(Ok(())) => {
                self.stats.commits += 1;
                Ok(())
            }
            Ok(Err(e)) => {
                self.stats.failed += 1;
                Err(e)
            }
            Err(Error::Conflict) => {
                th.after_abort();
                self.stats.conflicts += 1;
                Err(Error::Conflict)
            }
            Err(e) => {
                self.stats.failed += 1;
                Err(e)
            }
        }
    }

    /// Roll back (the same as dropping the transaction).
    pub fn abort(self) {
        // `Drop` does it.
    }

    fn roll_back(&mut self) {
        self.ended = true;
        let conflicted = self.tx.finish();
        let th = self.tx.thread();
        th.abort();
        if conflicted {
            th.after_abort();
            self.stats.conflicts += 1;
        } else {
            self.stats.failed += 1;
        }
    }
}

impl Drop for ExplicitTx<'_> {
    fn drop(&mut self) {
        if !self.ended {
            self.roll_back();
        }
        // Also after `commit` (which drops `self` when it returns).
        if self.nested {
            self.tx.thread().set_nested(false);
        }
    }
}
