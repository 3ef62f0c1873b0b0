//! Transactions: typed, borrow-checked access to persistent objects ([`Tx`], whose
//! documentation states why the API is sound).

use crate::engine::registry::AnyThread;
use crate::engine::{FastPath, FastReads};
use crate::nesting::InTx;
use crate::tx_options::{Durability, TxOptions};
use crate::{Error, PPtr, Result};
use bytemuck::Pod;
use rand::Rng;
use std::mem::{align_of, size_of};
use std::time::Duration;

/// A running transaction: the `&mut Tx` that [`Pool::run`](crate::Pool::run) and its
/// siblings hand to their closure. Reads, writes, allocations and frees of persistent
/// objects go through it; the transaction commits when the closure returns `Ok` and rolls
/// back when it returns `Err` (and `run` retries it on [`Error::Conflict`]).
///
/// ```
/// use pisces::{Config, Pool, PPtr};
///
/// pisces::pod! {
///     struct Node { value: u64, next: PPtr<Node> }
/// }
///
/// # fn main() -> pisces::Result<()> {
/// # let dir = tempfile::tempdir().unwrap();
/// let pool = Pool::create(dir.path().join("tx.pool"), Config::new().size(32 << 20))?;
/// let head: PPtr<PPtr<Node>> = pool.root()?;
/// pool.run(|tx| {
///     let old = *tx.read(head)?;
///     let n = tx.alloc(Node { value: 7, next: old })?;   // a new object
///     *tx.write(head)? = n;                               // link it
///     Ok(())
/// })?;
/// let first = pool.run(|tx| {
///     let n = *tx.read(head)?;
///     Ok(tx.read(n)?.value)
/// })?;
/// assert_eq!(first, 7);
/// pool.run(|tx| {
///     let n = *tx.read(head)?;
///     let next = tx.read(n)?.next;
///     *tx.write(head)? = next;
///     tx.free(n)                                          // freed at commit
/// })?;
/// # Ok(()) }
/// ```
///
///
///  # Why the API is sound
///  The scheme is "borrows scoped by `&mut self`":
///  * [`Tx::read`] takes `&self` and returns `&T` living as long as that borrow; any
///    number of reads may be alive together.
///  * [`Tx::write`], [`Tx::alloc`] and [`Tx::free`] take `&mut self`, so no reference
///    from an earlier `read` or `write` is alive when they run. That is what lets the
///    engine do anything inside them — create a copy of an object that was just read
///    from home, write back this thread's own pending group-commit batch, recycle log
///    space — without invalidating memory behind a live reference, and it makes two
///    live `&mut` to one object, or a `&` next to a `&mut` of the same copy, impossible.
///  * `Tx` only exists inside the closure given to `run`; the closure's result type
///    cannot borrow from it, so no reference outlives the transaction.
///  * While a transaction runs, the memory behind a `&T` does not change: a home object
///    is overwritten only after a grace period that waits for every transaction that
///    started before the writer's commit, and copies are reclaimed only after a later
///    grace period.
///  * Stored types are `bytemuck::Pod` (any bit pattern valid, no padding, no
///    references) with alignment at most 8 (checked at compile time), so reading any
///    pool bytes as `T` is defined behaviour; every pointer is validated against the
///    allocator's geometry before use.
///
///  Values are `Copy`, so the usual pattern for using two objects at once is to copy
///  one out: `let a = *tx.read(x)?; tx.write(y)?.v = a.v;`.
///
///  Misuse is a compile error:
///  ```compile_fail
///  # use pisces::{Pool, PPtr, Result};
///  # fn f(pool: &Pool, p: PPtr<u64>) -> Result<()> {
///  // A reference cannot escape the transaction.
///  let r: &u64 = pool.run(|tx| tx.read(p))?;
///  # Ok(()) }
///  ```
///  ```compile_fail
///  # use pisces::{Pool, PPtr, Result};
///  # fn f(pool: &Pool, p: PPtr<u64>) -> Result<()> {
///  pool.run(|tx| {
///      let a = tx.write(p)?;
///      let b = tx.write(p)?; // two live &mut to one object
///      *a += *b;
///      Ok(())
///  })
///  # }
///  ```
///  ```compile_fail
///  # use pisces::{Pool, PPtr, Result};
///  # fn f(pool: &Pool, p: PPtr<u64>) -> Result<()> {
///  pool.run(|tx| {
///      let r = tx.read(p)?;
///      *tx.write(p)? = 1; // a write while a read reference is alive
///      assert_eq!(*r, 0);
///      Ok(())
///  })
///  # }
///  ```
///  ```compile_fail
///  # use pisces::{Pool, PPtr, Result};
///  # fn f(pool: &Pool, p: PPtr<u128>) -> Result<()> {
///  // Over-aligned types cannot be stored (payloads are 8-aligned).
///  pool.run(|tx| Ok(*tx.read(p)?))?;
///  # Ok(()) }
///  # let _codegen: fn(&Pool, PPtr<u128>) -> Result<()> = f;
///  ```
pub struct Tx<'h> {
    th: &'h mut AnyThread,
    /// The engine's read fast path for this attempt ([`FastPath::NONE`]: every read
    /// asks the engine). Not an `Option`: a read tests nothing before using it. A
    /// pointer, not the value: beginning a transaction hands out one word.
    fast: FastPath,
    finished: bool,
    read_only: bool,
    /// An engine call of this attempt failed with a conflict: the attempt is retried
    /// whatever error the closure turned it into.
    conflicted: std::cell::Cell<bool>,
    /// The stripe of the containers' element counts this attempt adds to
    /// ([`NO_STRIPE`]: none chosen yet; see [`Tx::count_stripe`]).
    count_stripe: std::cell::Cell<u8>,
}

/// [`Tx::count_stripe`] before the attempt's first count.
const NO_STRIPE: u8 = u8::MAX;

impl std::fmt::Debug for Tx<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tx")
            .field("engine", &self.th.id())
            .field("read_only", &self.read_only)
            .finish_non_exhaustive()
    }
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
    /// # let pool = Pool::create(dir.path().join("r.pool"), Config::default().size(32 << 20)).unwrap();
    /// let root: PPtr<[u64; 2]> = pool.root().unwrap();
    /// let sum = pool.run(|tx| { let r = tx.read(root)?; Ok(r[0] + r[1]) }).unwrap();
    /// assert_eq!(sum, 0);
    /// ```
    #[inline(always)]
    pub fn read<T: Pod>(&self, p: PPtr<T>) -> Result<&T> {
        const { assert!(align_of::<T>() <= 8, "pool objects are 8-byte aligned") };
        // (A `match` on the inlined fast path, not `Option` combinators: a closure there
        // was compiled out of line, one call and a copy of `fast` per read.)
        // The smallest class holding a `T`: a compile-time constant per type, so the
        // length check is part of the fast path's class compare.
        self.read_found::<T, false>(p)
    }

    /// The attempt's read fast path (tests of the path itself).
    #[cfg(test)]
    pub(crate) fn fast_reads(&self) -> &FastReads {
        self.fast.get()
    }

    /// [`Tx::read`] of an object read again and again (a container's header): the
    /// fast path remembers where it found it (`FastReads::read`'s `FIND_AGAIN`).
    #[inline(always)]
    pub(crate) fn read_again<T: Pod>(&self, p: PPtr<T>) -> Result<&T> {
        self.read_found::<T, true>(p)
    }

    /// [`Tx::read`] (`FIND_AGAIN`: [`Tx::read_again`]).
    #[inline(always)]
    pub(crate) fn read_found<T: Pod, const FIND_AGAIN: bool>(&self, p: PPtr<T>) -> Result<&T> {
        const { assert!(align_of::<T>() <= 8, "pool objects are 8-byte aligned") };
        // (A `match` on the inlined fast path, not `Option` combinators: a closure there
        // was compiled out of line, one call and a copy of `fast` per read.)
        // The smallest class holding a `T`: a compile-time constant per type, so the
        // length check is part of the fast path's class compare.
        let min_class = const { FastReads::min_class(size_of::<T>()) };
        let ptr = match self.fast.get().read::<FIND_AGAIN>(p.offset(), min_class) {
            Some(ptr) => ptr,
            None => self.read_engine(p.offset(), size_of::<T>())?,
        };
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
    /// # let pool = Pool::create(dir.path().join("w.pool"), Config::default().size(32 << 20)).unwrap();
    /// let root: PPtr<u64> = pool.root().unwrap();
    /// pool.run(|tx| { *tx.write(root)? = 42; Ok(()) }).unwrap();
    /// assert_eq!(pool.run(|tx| Ok(*tx.read(root)?)).unwrap(), 42);
    /// ```
    #[inline]
    pub fn write<T: Pod>(&mut self, p: PPtr<T>) -> Result<&mut T> {
        const { assert!(align_of::<T>() <= 8, "pool objects are 8-byte aligned") };
        self.check_writable()?;
        self.fast.wrote();
        let r = self.th.write(p.offset(), size_of::<T>());
        let ptr = self.seen(r)?;
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
    /// # let pool = Pool::create(dir.path().join("a.pool"), Config::default().size(32 << 20)).unwrap();
    /// let root: PPtr<PPtr<u64>> = pool.root().unwrap();
    /// pool.run(|tx| { let n = tx.alloc(7u64)?; *tx.write(root)? = n; Ok(()) }).unwrap();
    /// let v = pool.run(|tx| { let n = *tx.read(root)?; Ok(*tx.read(n)?) }).unwrap();
    /// assert_eq!(v, 7);
    /// ```
    pub fn alloc<T: Pod>(&mut self, value: T) -> Result<PPtr<T>> {
        let p = self.alloc_zeroed::<T>()?;
        *self.write(p)? = value;
        Ok(p)
    }

    /// Allocate a new zeroed object of type `T` (no value is built on the stack: for
    /// large objects).
    ///
    /// ```
    /// # use pisces::{Config, Pool, PPtr};
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let pool = Pool::create(dir.path().join("z.pool"), Config::default().size(32 << 20)).unwrap();
    /// let big = pool.run(|tx| tx.alloc_zeroed::<[u64; 4096]>()).unwrap();
    /// assert_eq!(pool.run(|tx| Ok(tx.read(big)?[4095])).unwrap(), 0);
    /// ```
    pub fn alloc_zeroed<T: Pod>(&mut self) -> Result<PPtr<T>> {
        const { assert!(align_of::<T>() <= 8, "pool objects are 8-byte aligned") };
        self.check_writable()?;
        let r = self.th.alloc(size_of::<T>().max(1));
        let off = self.seen(r)?;
        Ok(PPtr::from_offset(off))
    }

    /// Allocate a zeroed byte array of `len` bytes chosen at run time. Read and write it
    /// with [`Tx::read_bytes`] / [`Tx::write_bytes`].
    ///
    /// ```
    /// # use pisces::{Config, Pool};
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let pool = Pool::create(dir.path().join("b.pool"), Config::default().size(32 << 20)).unwrap();
    /// let n = 100;
    /// let blob = pool.run(|tx| {
    ///     let b = tx.alloc_bytes(n)?;
    ///     tx.write_bytes(b, n)?[..5].copy_from_slice(b"hello");
    ///     Ok(b)
    /// }).unwrap();
    /// let first = pool.run(|tx| Ok(tx.read_bytes(blob, n)?[..5].to_vec())).unwrap();
    /// assert_eq!(first, b"hello");
    /// ```
    pub fn alloc_bytes(&mut self, len: usize) -> Result<PPtr<u8>> {
        self.check_writable()?;
        if len == 0 {
            return Err(Error::invalid_argument("cannot allocate 0 bytes"));
        }
        let r = self.th.alloc(len);
        let off = self.seen(r)?;
        Ok(PPtr::from_offset(off))
    }

    /// The first `len` bytes of the object at `p` in this transaction's snapshot.
    pub fn read_bytes(&self, p: PPtr<u8>, len: usize) -> Result<&[u8]> {
        let ptr = match self
            .fast
            .get()
            .read::<false>(p.offset(), FastReads::min_class(len))
        {
            Some(ptr) => ptr,
            None => self.read_engine(p.offset(), len)?,
        };
        // SAFETY: the engine validated `p` as an object of at least `len` bytes and
        // returned a pointer to its snapshot version, unchanged while `&self` is
        // borrowed (module docs); bytes have no invalid values.
        Ok(unsafe { std::slice::from_raw_parts(ptr, len) })
    }

    /// This transaction's writable version of the first `len` bytes of the object at `p`.
    pub fn write_bytes(&mut self, p: PPtr<u8>, len: usize) -> Result<&mut [u8]> {
        self.check_writable()?;
        self.fast.wrote();
        let r = self.th.write(p.offset(), len);
        let ptr = self.seen(r)?;
        // SAFETY: the engine returned this transaction's own copy of at least `len`
        // bytes, which no other thread touches before commit; `&mut self` rules out any
        // other live reference into it.
        Ok(unsafe { std::slice::from_raw_parts_mut(ptr, len) })
    }

    /// Begin an attempt with `opts` for an explicit transaction (`crate::explicit`):
    /// a snapshot ([`is_snapshot`]) or a transaction that may write, as `run_on` begins
    /// its own.
    pub(crate) fn begin(th: &'h mut AnyThread, opts: &TxOptions) -> Tx<'h> {
        let fast = if is_snapshot(opts) {
            th.begin_snapshot()
        } else {
            th.begin_fast(opts)
        };
        let read_only = opts.read_only;
        Tx {
            th,
            fast,
            finished: false,
            read_only,
            conflicted: std::cell::Cell::new(false),
            count_stripe: std::cell::Cell::new(NO_STRIPE),
        }
    }

    /// End the attempt's access phase (no rollback on drop any more); whether an
    /// access conflicted. The caller commits or aborts through [`Tx::thread`].
    pub(crate) fn finish(&mut self) -> bool {
        self.finished = true;
        self.conflicted.get()
    }

    /// The engine's thread state, for ending the attempt after [`Tx::finish`].
    pub(crate) fn thread(&mut self) -> &mut AnyThread {
        self.th
    }

    /// This attempt runs registered operation `id` with `args` (`Pool::run_op`).
    pub(crate) fn set_operation(&mut self, id: u32, args: &[u8]) {
        self.th.set_operation(Some((id, args)));
    }

    /// The stripe of the containers' element counts this attempt adds to: `pick(slot)`
    /// at its first count (`slot`: the attempt's thread slot), the same one after that,
    /// so that an attempt that inserts and removes (in one container or several) writes
    /// one stripe object per container, not one per change (`containers::count`).
    /// `pick` returns less than 255.
    #[inline]
    pub(crate) fn count_stripe(&self, pick: impl FnOnce(usize) -> usize) -> usize {
        let s = self.count_stripe.get();
        if s != NO_STRIPE {
            return usize::from(s);
        }
        let s = pick(self.th.slot());
        debug_assert!(s < usize::from(NO_STRIPE));
        self.count_stripe.set(s as u8);
        s
    }

    /// A read the fast path declined: the engine's full read, through the engine's own
    /// out-of-line function (`AnyThread::read_fn`, which notes a conflict itself), so
    /// this function is a jump there: a read pays no dispatch of its own and no
    /// prologue sized for every engine's read, and the callers' code stays one call.
    #[inline(never)]
    fn read_engine(&self, off: u64, len: usize) -> Result<*const u8> {
        (self.th.read_fn())(self.th, off, len, &self.conflicted)
    }

    /// Ask for this attempt to be rolled back and the transaction run again, as after a
    /// conflict (and counted as one in [`TxStats`]): return the error
    /// this gives from the closure. For closures that detect a conflict of their own
    /// (a foreign-language callback that returns its conflict code).
    pub fn retry(&self) -> Error {
        self.conflicted.set(true);
        Error::Conflict
    }

    /// Note a conflict on its way out.
    #[inline]
    fn seen<T>(&self, r: Result<T>) -> Result<T> {
        if let Err(Error::Conflict) = r {
            self.conflicted.set(true);
        }
        r
    }

    #[inline]
    fn check_writable(&self) -> Result<()> {
        if self.read_only {
            Err(Error::ReadOnlyTransaction)
        } else {
            Ok(())
        }
    }

    /// Free `*p` when the transaction commits. Using `p` afterwards is a logic error
    /// (never undefined behaviour: the block stays a valid object until reused).
    ///
    /// ```
    /// # use pisces::{Config, Pool, PPtr};
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let pool = Pool::create(dir.path().join("f.pool"), Config::default().size(32 << 20)).unwrap();
    /// let p = pool.run(|tx| tx.alloc(1u32)).unwrap();
    /// pool.run(|tx| tx.free(p)).unwrap();
    /// ```
    pub fn free<T: Pod>(&mut self, p: PPtr<T>) -> Result<()> {
        self.check_writable()?;
        self.fast.wrote();
        let r = self.th.free(p.offset());
        self.seen(r)
    }

    /// Roll back now: returns the error `run` passes on to its caller.
    ///
    /// ```
    /// # use pisces::{Config, Pool, PPtr, Error};
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let pool = Pool::create(dir.path().join("u.pool"), Config::default().size(32 << 20)).unwrap();
    /// let root: PPtr<u64> = pool.root().unwrap();
    /// let r: pisces::Result<()> = pool.run(|tx| { *tx.write(root)? = 5; Err(tx.abort("changed my mind")) });
    /// assert!(matches!(r, Err(Error::UserAbort(_))));
    /// assert_eq!(pool.run(|tx| Ok(*tx.read(root)?)).unwrap(), 0);
    /// ```
    pub fn abort(&self, why: impl Into<String>) -> Error {
        Error::abort(why)
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
    /// Reads in the committed read-only transactions that met an object still locked
    /// by another writer (not yet committed, or committed but not yet written back),
    /// so the reader chose between that writer's copy and home: the copy path. Readers
    /// never wait for the writer. Counted by the `pisces` engine; 0 elsewhere.
    pub ro_locked_reads: u64,
}

/// Conflict retries of a transaction that runs inside a transaction of another pool
/// (`nested` in [`run_on`]) before it gives up with `Err(Conflict)`. What it conflicts
/// with may be held by a transaction that waits, inside its own thread's transaction,
/// for something the enclosing transaction holds (two threads nesting two pools in
/// opposite order): retrying forever would wait forever. Giving up hands the conflict
/// to the enclosing transaction, whose `run` rolls back, backs off and retries, which
/// releases what it held. With the back-off's growth this is some tens of
/// milliseconds of retrying.
pub(crate) const NESTED_RETRIES: u32 = 32;

/// The retry loop behind `Pool::run` and `ThreadHandle::run`.
///
/// `nested`: another transaction (of another pool) runs around this one on this
/// thread; conflicts are then retried at most [`NESTED_RETRIES`] times. An `Err` from
/// `f` after a transaction nested in it gave up that way is a conflict of this
/// attempt: rolled back and retried (bounded in turn if this one is nested).
///
/// A panic in `f` unwinds through here: `Tx`'s drop rolls the attempt back, and the
/// caller's guard gives the thread state back to the pool.
#[inline]
pub(crate) fn run_on<R, E: From<Error>>(
    th: &mut AnyThread,
    stats: &mut TxStats,
    opts: &TxOptions,
    nested: bool,
    f: impl FnMut(&mut Tx<'_>) -> std::result::Result<R, E>,
) -> std::result::Result<R, E> {
    if nested {
        return run_nested(th, stats, opts, f);
    }
    attempts(th, stats, opts, false, f)
}

/// The loop behind `Pool::read` and `ThreadHandle::read`: [`run_on`] of a read-only
/// transaction at the engine's own isolation level, durable on return. `f` gets `&Tx`,
/// through which nothing can be written, allocated or freed.
#[inline]
pub(crate) fn read_on<R, E: From<Error>>(
    th: &mut AnyThread,
    stats: &mut TxStats,
    nested: bool,
    mut f: impl FnMut(&Tx<'_>) -> std::result::Result<R, E>,
) -> std::result::Result<R, E> {
    const SNAPSHOT: TxOptions = TxOptions {
        read_only: true,
        isolation: None,
        durability: Durability::OnReturn,
    };
    let mut f = |tx: &mut Tx<'_>| f(tx);
    if !nested {
        // The first attempt in line, the retries (a conflict, `Tx::retry`) out of it:
        // on engines whose snapshots never conflict only a closure that asks for a
        // retry reaches them.
        if let Some(r) = attempt(th, stats, true, &SNAPSHOT, true, &mut f) {
            return r;
        }
        stats.conflicts += 1;
        th.after_abort();
    }
    retry_snapshot(th, stats, &SNAPSHOT, nested, f)
}

/// The attempts of [`read_on`] after its first, and all of a nested one's.
#[cold]
#[inline(never)]
fn retry_snapshot<R, E: From<Error>>(
    th: &mut AnyThread,
    stats: &mut TxStats,
    opts: &TxOptions,
    nested: bool,
    f: impl FnMut(&mut Tx<'_>) -> std::result::Result<R, E>,
) -> std::result::Result<R, E> {
    run_on(th, stats, opts, nested, f)
}

/// [`run_on`] of a nested transaction: the engine knows it for the attempts (and
/// forgets it after them, also when `f` panics).
#[cold]
#[inline(never)]
fn run_nested<R, E: From<Error>>(
    th: &mut AnyThread,
    stats: &mut TxStats,
    opts: &TxOptions,
    f: impl FnMut(&mut Tx<'_>) -> std::result::Result<R, E>,
) -> std::result::Result<R, E> {
    struct Nested<'a>(&'a mut AnyThread);
    impl Drop for Nested<'_> {
        fn drop(&mut self) {
            self.0.set_nested(false);
        }
    }
    th.set_nested(true);
    let g = Nested(th);
    attempts(&mut *g.0, stats, opts, true, f)
}

/// The retry loop of [`run_on`].
#[inline]
fn attempts<R, E: From<Error>>(
    th: &mut AnyThread,
    stats: &mut TxStats,
    opts: &TxOptions,
    nested: bool,
    mut f: impl FnMut(&mut Tx<'_>) -> std::result::Result<R, E>,
) -> std::result::Result<R, E> {
    if let Some(level) = opts.isolation {
        let engine = th.id();
        if !engine.offers(level) {
            return Err(Error::IsolationUnsupported(Box::new(
                crate::error::IsolationUnsupported {
                    engine: engine.name(),
                    requested: level,
                    offered: engine.isolation(),
                },
            ))
            .into());
        }
    }
    let snapshot = is_snapshot(opts);
    let wait = opts.durability == Durability::OnReturn;
    let mut backoff = Backoff::new();
    let mut retries = 0u32;
    loop {
        if let Some(r) = attempt(th, stats, snapshot, opts, wait, &mut f) {
            return r;
        }
        stats.conflicts += 1;
        th.after_abort();
        if nested {
            retries += 1;
            if retries >= NESTED_RETRIES {
                InTx::gave_up_nested();
                return Err(Error::Conflict.into());
            }
        }
        backoff.wait();
    }
}

/// Whether a transaction with `opts` runs as a snapshot: read-only at the engine's own
/// isolation level, begun and ended by the engine's read-only calls
/// (`EngineThread::begin_snapshot`, `end_snapshot`), which skip what only an attempt
/// that may write needs.
#[inline(always)]
pub(crate) fn is_snapshot(opts: &TxOptions) -> bool {
    opts.read_only && opts.isolation.is_none()
}

/// The end of an attempt whose closure returned `Ok`: the engine's commit (of a
/// snapshot, if `snapshot`), then, if `wait`, its wait for durability. The outer error
/// is the commit's (the attempt was rolled back), the inner one the wait's.
#[inline(always)]
pub(crate) fn commit_attempt(th: &mut AnyThread, snapshot: bool, wait: bool) -> Result<Result<()>> {
    if snapshot {
        th.end_snapshot(wait)
    } else {
        th.commit_then_wait(wait)
    }
}

/// One attempt of `f`: its result once it committed or failed for good (counted in
/// `stats`), or `None` when it was rolled back to be retried (a conflict, or a
/// transaction nested in it that gave up on one).
#[inline(always)]
fn attempt<R, E: From<Error>>(
    th: &mut AnyThread,
    stats: &mut TxStats,
    snapshot: bool,
    opts: &TxOptions,
    wait: bool,
    f: &mut impl FnMut(&mut Tx<'_>) -> std::result::Result<R, E>,
) -> Option<std::result::Result<R, E>> {
    // `fast` first: built in place, before `th` is lent to the `Tx`.
    let fast = if snapshot {
        th.begin_snapshot()
    } else {
        th.begin_fast(opts)
    };
    let mut tx = Tx {
        fast,
        th: &mut *th,
        finished: false,
        read_only: opts.read_only,
        conflicted: std::cell::Cell::new(false),
        count_stripe: std::cell::Cell::new(NO_STRIPE),
    };
    let r = f(&mut tx);
    let conflicted = tx.conflicted.get();
    // The attempt's access phase is over: no rollback on drop. `Tx` owns nothing
    // (borrows and plain values), so forgetting it is its drop minus the `finished`
    // test, without an out-of-line drop call.
    std::mem::forget(tx);
    match r {
        // The closure swallowed a conflict: its attempt may have seen an inconsistent
        // state, so it is rolled back and retried, never committed.
        _ if conflicted => {
            th.abort();
            None
        }
        Ok(v) => match commit_attempt(th, snapshot, wait) {
            Ok(Ok(())) => {
                stats.commits += 1;
                Some(Ok(v))
            }
            Ok(Err(e)) => {
                stats.failed += 1;
                Some(Err(e.into()))
            }
            Err(Error::Conflict) => None,
            Err(e) => {
                stats.failed += 1;
                Some(Err(e.into()))
            }
        },
        Err(e) => {
            th.abort();
            if InTx::take_nested_gave_up() {
                // A transaction nested in this attempt gave up on a conflict this
                // attempt may cause: retry it, releasing what it held.
                return None;
            }
            stats.failed += 1;
            Some(Err(e))
        }
    }
}

/// A running transaction that the containers' updating operations accept: [`Tx`]
/// (closure transactions) and [`ExplicitTx`](crate::ExplicitTx) (begun and committed
/// by hand), so `map.insert(&mut explicit, k, v)` needs no [`ExplicitTx::with_tx`](crate::ExplicitTx::with_tx)
/// around it. Reading operations take `&Tx`, which `&ExplicitTx` dereferences to.
///
/// The trait is sealed and has no methods a user can call: it gives the containers the
/// `&mut Tx` inside an `ExplicitTx` without handing it to the user, who could otherwise
/// `std::mem::swap` the `Tx` of two explicit transactions (each would then commit or
/// roll back the other's attempt, count it in its own handle's statistics and wait for
/// durability by the other's options).
///
/// ```compile_fail
/// # use pisces::{ExplicitTx, TxAccess};
/// fn steal<'h>(a: &mut ExplicitTx<'h>, b: &mut ExplicitTx<'h>) {
///     std::mem::swap(a.tx_mut(), b.tx_mut()); // no such method for users
/// }
/// ```
pub trait TxAccess<'h>: sealed::TxMut<'h> {}

pub(crate) mod sealed {
    /// The crate-private half of [`TxAccess`](super::TxAccess): a user cannot name
    /// this trait, so cannot call its method.
    pub trait TxMut<'h> {
        /// The transaction, writable.
        fn tx_mut(&mut self) -> &mut super::Tx<'h>;
    }
}

impl<'h> sealed::TxMut<'h> for Tx<'h> {
    #[inline(always)]
    fn tx_mut(&mut self) -> &mut Tx<'h> {
        self
    }
}
impl<'h> TxAccess<'h> for Tx<'h> {}
