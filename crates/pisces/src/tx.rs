//! Transactions: typed, borrow-checked access to persistent objects.
//!
//! # Why the API is sound
//! The scheme is "borrows scoped by `&mut self`":
//! * [`Tx::read`] takes `&self` and returns `&T` living as long as that borrow; any
//!   number of reads may be alive together.
//! * [`Tx::write`], [`Tx::alloc`] and [`Tx::free`] take `&mut self`, so no reference
//!   from an earlier `read` or `write` is alive when they run. That is what lets the
//!   engine do anything inside them — create a copy of an object that was just read
//!   from home, write back this thread's own pending group-commit batch, recycle log
//!   space — without invalidating memory behind a live reference, and it makes two
//!   live `&mut` to one object, or a `&` next to a `&mut` of the same copy, impossible.
//! * `Tx` only exists inside the closure given to `run`; the closure's result type
//!   cannot borrow from it, so no reference outlives the transaction.
//! * While a transaction runs, the memory behind a `&T` does not change: a home object
//!   is overwritten only after a grace period that waits for every transaction that
//!   started before the writer's commit, and copies are reclaimed only after a later
//!   grace period.
//! * Stored types are `bytemuck::Pod` (any bit pattern valid, no padding, no
//!   references) with alignment at most 8 (checked at compile time), so reading any
//!   pool bytes as `T` is defined behaviour; every pointer is validated against the
//!   allocator's geometry before use.
//!
//! Values are `Copy`, so the usual pattern for using two objects at once is to copy
//! one out: `let a = *tx.read(x)?; tx.write(y)?.v = a.v;`.
//!
//! Misuse is a compile error:
//! ```compile_fail
//! # use pisces::{Pool, PPtr, Result};
//! # fn f(pool: &Pool, p: PPtr<u64>) -> Result<()> {
//! // A reference cannot escape the transaction.
//! let r: &u64 = pool.run(|tx| tx.read(p))?;
//! # Ok(()) }
//! ```
//! ```compile_fail
//! # use pisces::{Pool, PPtr, Result};
//! # fn f(pool: &Pool, p: PPtr<u64>) -> Result<()> {
//! pool.run(|tx| {
//!     let a = tx.write(p)?;
//!     let b = tx.write(p)?; // two live &mut to one object
//!     *a += *b;
//!     Ok(())
//! })
//! # }
//! ```
//! ```compile_fail
//! # use pisces::{Pool, PPtr, Result};
//! # fn f(pool: &Pool, p: PPtr<u64>) -> Result<()> {
//! pool.run(|tx| {
//!     let r = tx.read(p)?;
//!     *tx.write(p)? = 1; // a write while a read reference is alive
//!     assert_eq!(*r, 0);
//!     Ok(())
//! })
//! # }
//! ```
//! ```compile_fail
//! # use pisces::{Pool, PPtr, Result};
//! # fn f(pool: &Pool, p: PPtr<u128>) -> Result<()> {
//! // Over-aligned types cannot be stored (payloads are 8-aligned).
//! pool.run(|tx| Ok(*tx.read(p)?))?;
//! # Ok(()) }
//! # let _codegen: fn(&Pool, PPtr<u128>) -> Result<()> = f;
//! ```

use crate::engine::EngineThread;
use crate::{Error, PPtr, Result};
use bytemuck::Pod;
use rand::Rng;
use std::mem::{align_of, size_of};
use std::time::Duration;

/// A running transaction (see the module docs for its borrowing rules).
pub struct Tx<'h> {
    th: &'h mut dyn EngineThread,
    finished: bool,
}

impl Drop for Tx<'_> {
    fn drop(&mut self) {
        // Reached without `finish` only when the closure panicked: release the locks so
        // other threads are not blocked by a transaction that will never commit.
        if !self.finished {
            self.th.abort();
        }
    }
}

impl<'h> Tx<'h> {
    /// The version of `*p` in this transaction's snapshot.
    ///
    /// ```
    /// # use pisces::{Config, Pool, PPtr};
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let pool = Pool::create(dir.path().join("r.pool"), Config { size: 32 << 20, ..Config::default() }).unwrap();
    /// let root: PPtr<[u64; 2]> = pool.root().unwrap();
    /// let sum = pool.run(|tx| { let r = tx.read(root)?; Ok(r[0] + r[1]) }).unwrap();
    /// assert_eq!(sum, 0);
    /// ```
    #[inline]
    pub fn read<T: Pod>(&self, p: PPtr<T>) -> Result<&T> {
        const { assert!(align_of::<T>() <= 8, "pool objects are 8-byte aligned") };
        let ptr = self.th.read(p.offset(), size_of::<T>())?;
        // SAFETY: the engine validated `p` as an object of at least size_of::<T>() bytes
        // and returned an 8-aligned pointer to its snapshot version, which does not change
        // while `&self` is borrowed (module docs); `T: Pod` accepts any bytes.
        Ok(unsafe { &*(ptr as *const T) })
    }

    /// This transaction's private, writable version of `*p` (the object is locked
    /// until commit; a concurrent writer of it makes one of the two retry).
    ///
    /// ```
    /// # use pisces::{Config, Pool, PPtr};
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let pool = Pool::create(dir.path().join("w.pool"), Config { size: 32 << 20, ..Config::default() }).unwrap();
    /// let root: PPtr<u64> = pool.root().unwrap();
    /// pool.run(|tx| { *tx.write(root)? = 42; Ok(()) }).unwrap();
    /// assert_eq!(pool.run(|tx| Ok(*tx.read(root)?)).unwrap(), 42);
    /// ```
    #[inline]
    pub fn write<T: Pod>(&mut self, p: PPtr<T>) -> Result<&mut T> {
        const { assert!(align_of::<T>() <= 8, "pool objects are 8-byte aligned") };
        let ptr = self.th.write(p.offset(), size_of::<T>())?;
        // SAFETY: the engine returned this transaction's own copy of the object (at least
        // size_of::<T>() bytes, 8-aligned), which no other thread reads or writes before
        // commit; `&mut self` guarantees no other reference into it is alive.
        Ok(unsafe { &mut *(ptr as *mut T) })
    }

    /// Allocate a new object holding `value`. It becomes durable with the commit and
    /// is released if the transaction rolls back.
    ///
    /// ```
    /// # use pisces::{Config, Pool, PPtr};
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let pool = Pool::create(dir.path().join("a.pool"), Config { size: 32 << 20, ..Config::default() }).unwrap();
    /// let root: PPtr<PPtr<u64>> = pool.root().unwrap();
    /// pool.run(|tx| { let n = tx.alloc(7u64)?; *tx.write(root)? = n; Ok(()) }).unwrap();
    /// let v = pool.run(|tx| { let n = *tx.read(root)?; Ok(*tx.read(n)?) }).unwrap();
    /// assert_eq!(v, 7);
    /// ```
    pub fn alloc<T: Pod>(&mut self, value: T) -> Result<PPtr<T>> {
        const { assert!(align_of::<T>() <= 8, "pool objects are 8-byte aligned") };
        let off = self.th.alloc(size_of::<T>())?;
        let p = PPtr::from_offset(off);
        *self.write(p)? = value;
        Ok(p)
    }

    /// Free `*p` when the transaction commits. Using `p` afterwards is a logic error
    /// (never undefined behaviour: the block stays a valid object until reused).
    ///
    /// ```
    /// # use pisces::{Config, Pool, PPtr};
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let pool = Pool::create(dir.path().join("f.pool"), Config { size: 32 << 20, ..Config::default() }).unwrap();
    /// let p = pool.run(|tx| tx.alloc(1u32)).unwrap();
    /// pool.run(|tx| tx.free(p)).unwrap();
    /// ```
    pub fn free<T: Pod>(&mut self, p: PPtr<T>) -> Result<()> {
        self.th.free(p.offset())
    }

    /// Roll back now: returns the error `run` passes on to its caller.
    ///
    /// ```
    /// # use pisces::{Config, Pool, PPtr, Error};
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let pool = Pool::create(dir.path().join("u.pool"), Config { size: 32 << 20, ..Config::default() }).unwrap();
    /// let root: PPtr<u64> = pool.root().unwrap();
    /// let r: pisces::Result<()> = pool.run(|tx| { *tx.write(root)? = 5; Err(tx.abort("changed my mind")) });
    /// assert!(matches!(r, Err(Error::UserAbort(_))));
    /// assert_eq!(pool.run(|tx| Ok(*tx.read(root)?)).unwrap(), 0);
    /// ```
    pub fn abort(&self, why: impl Into<String>) -> Error {
        Error::UserAbort(why.into())
    }
}

/// Randomized exponential back-off between retries.
struct Backoff {
    limit_ns: u64,
}

impl Backoff {
    fn new() -> Self {
        Backoff { limit_ns: 256 }
    }
    fn wait(&mut self) {
        let ns = rand::thread_rng().gen_range(0..=self.limit_ns);
        self.limit_ns = (self.limit_ns * 2).min(1 << 20);
        if ns > 50_000 {
            std::thread::sleep(Duration::from_nanos(ns));
        } else {
            let until = std::time::Instant::now() + Duration::from_nanos(ns);
            while std::time::Instant::now() < until {
                std::hint::spin_loop();
            }
        }
    }
}

/// Counts of one thread handle's transactions.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TxStats {
    /// Transactions committed.
    pub commits: u64,
    /// Attempts rolled back by a conflict and retried.
    pub conflicts: u64,
    /// Transactions that ended in an error (user abort or other).
    pub failed: u64,
}

/// The retry loop behind `Pool::run` and `ThreadHandle::run`.
pub(crate) fn run_on<R>(
    th: &mut dyn EngineThread,
    stats: &mut TxStats,
    mut f: impl FnMut(&mut Tx<'_>) -> Result<R>,
) -> Result<R> {
    let mut backoff = Backoff::new();
    loop {
        th.begin();
        let mut tx = Tx {
            th: &mut *th,
            finished: false,
        };
        let r = f(&mut tx);
        tx.finished = true;
        drop(tx);
        match r {
            Ok(v) => match th.commit() {
                Ok(()) => {
                    stats.commits += 1;
                    return Ok(v);
                }
                Err(Error::Conflict) => {}
                Err(e) => {
                    stats.failed += 1;
                    return Err(e);
                }
            },
            Err(Error::Conflict) => th.abort(),
            Err(e) => {
                th.abort();
                stats.failed += 1;
                return Err(e);
            }
        }
        stats.conflicts += 1;
        th.after_abort();
        backoff.wait();
    }
}
