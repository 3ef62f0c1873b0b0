//! A lock word that names its holder: [`HolderLock`], and [`HolderMutex`], data
//! guarded by one.
//!
//! # The word
//! One `u32`: 0 when free; when held, bits 0..=30 hold `holder + 1` and bit 31
//! ([`SLEEPER`]) is set while a waiter may be asleep on the word. `holder` is a number
//! the locker passes in (within a pool, the id of the thread state that locks; once
//! pools are shared between processes, the thread slot's index), so that whoever finds
//! the lock held can tell who holds it ([`HolderLock::holder`]) and, later, whether that
//! holder is still alive. The word is plain data (no pointer, no process-local handle):
//! it can live in memory that several processes map.
//!
//! # Locking and waiting
//! Free to held is one compare-and-swap of 0 to `holder + 1`; unlocking is one swap to
//! 0, followed by a `FUTEX_WAKE` only if the swapped-out word had [`SLEEPER`] set, so
//! neither side makes a system call unless a waiter went to sleep. A waiter spins
//! briefly ([`SPIN_ROUNDS`]), yields the processor a few times ([`YIELD_ROUNDS`]), then
//! sets [`SLEEPER`] and sleeps on the word with `FUTEX_WAIT`, for at most
//! [`SLEEP_TIMEOUT`] at a time. The futex calls do not use `FUTEX_PRIVATE_FLAG`: a
//! private futex is keyed by the waiter's address space, and a waiter and a waker in
//! two processes that map the word would never meet.
//!
//! A waiter that slept takes the lock with [`SLEEPER`] set, whether or not other
//! waiters sleep: it cannot know, and its unlock must wake the next sleeper if there
//! is one (the unlock that woke it cleared the bit). At worst that costs one
//! `FUTEX_WAKE` that finds nobody.
//!
//! Nothing here depends on which thread unlocks: a guard may move to another thread
//! (the holder names a thread state, which may move between threads, not a thread).
//! There is no poisoning: a guard dropped during a panic unlocks, and the users (the
//! allocator) leave their data consistent before anything that could panic.
//!
//! Under `cfg(loom)` the futex is a model of the kernel's (a queue of sleepers behind a
//! lock, checked and appended to atomically, the waker dequeuing one) whose sleep
//! blocks without a timeout, so that a lost wake-up is a deadlock the model checker
//! reports, and the spinning and yielding rounds are skipped, so that every contended
//! lock goes through the sleeping protocol.

use crate::region::InRegion;
use crate::sync::AtomicU32;
use std::cell::UnsafeCell;
use std::marker::PhantomData;
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};

/// Bit 31 of the word: a waiter may be asleep on it, so unlocking must wake one.
const SLEEPER: u32 = 1 << 31;

/// The bits of the word that hold `holder + 1`.
const HOLDER_BITS: u32 = !SLEEPER;

/// Rounds of `spin_loop` a waiter spends looking for the word free before it yields:
/// enough for a critical section of a few hundred instructions on another core.
#[cfg(not(loom))]
const SPIN_ROUNDS: u32 = 100;

/// Rounds of `yield_now` after the spinning before a waiter sleeps: lets a holder that
/// shares the waiter's core (2 cores are easily oversubscribed) finish without a
/// futex round trip on either side.
#[cfg(not(loom))]
const YIELD_ROUNDS: u32 = 4;

/// The longest one sleep lasts before the waiter looks at the word again, whether or
/// not it was woken. It bounds how late a waiter notices a holder that will never
/// unlock (see [`HolderLock::wait_and_lock`]). (The loom model has no timeout.)
const SLEEP_TIMEOUT: std::time::Duration = std::time::Duration::from_millis(1);

/// A lock word that names its holder (see the module docs).
#[repr(C)]
pub(crate) struct HolderLock {
    word: AtomicU32,
    /// The model of the kernel's futex queue for this word.
    #[cfg(loom)]
    futex: futex::Queue,
}

/// Proof that a [`HolderLock`] is held; unlocks when dropped.
#[must_use = "the lock is released when the guard is dropped"]
pub(crate) struct HolderGuard<'a> {
    lock: &'a HolderLock,
}

impl HolderLock {
    /// The largest holder id: `holder + 1` must fit in the word's holder bits.
    pub(crate) const MAX_HOLDER: u32 = HOLDER_BITS - 1;

    /// A free lock.
    pub(crate) fn new() -> HolderLock {
        HolderLock {
            word: AtomicU32::new(0),
            #[cfg(loom)]
            futex: futex::Queue::default(),
        }
    }

    /// The word's value while `holder` holds the lock (and no waiter sleeps).
    #[inline(always)]
    fn held_by(holder: u32) -> u32 {
        assert!(
            holder <= Self::MAX_HOLDER,
            "holder id {holder} out of range"
        );
        holder + 1
    }

    /// Take the lock for `holder`, waiting while another holder has it.
    ///
    /// Not reentrant: a holder that locks a lock it holds waits forever.
    #[inline]
    pub(crate) fn lock(&self, holder: u32) -> HolderGuard<'_> {
        let me = Self::held_by(holder);
        // Acquire on success: pairs with the Release swap of the previous holder's
        // unlock, so that what it did under the lock happens before what this holder
        // does under it (without it, this holder could read guarded data older than
        // the last holder's writes). Relaxed on failure: nothing is read then.
        if self.word.compare_exchange(0, me, Acquire, Relaxed).is_err() {
            self.lock_contended(me);
        }
        HolderGuard { lock: self }
    }

    /// Take the lock for `holder` if it is free; `None` (and nothing changes) if it is
    /// held.
    #[inline]
    pub(crate) fn try_lock(&self, holder: u32) -> Option<HolderGuard<'_>> {
        let me = Self::held_by(holder);
        // Acquire on success, Relaxed on failure: as in `lock`.
        self.word
            .compare_exchange(0, me, Acquire, Relaxed)
            .ok()
            .map(|_| HolderGuard { lock: self })
    }

    /// Who holds the lock now (`None`: nobody). Racy: the answer may be stale by the
    /// time it is read; for diagnostics and for a waiter's liveness check of the
    /// holder, which look again anyway.
    pub(crate) fn holder(&self) -> Option<u32> {
        // Relaxed: the value is only reported, nothing is read on the strength of it.
        (self.word.load(Relaxed) & HOLDER_BITS).checked_sub(1)
    }

    /// The guard of the lock if `holder` holds it (None otherwise): for the one
    /// recoverer of a holder whose process died holding the lock, which goes on as that
    /// holder and unlocks when the guard drops. The dead holder will never unlock it.
    pub(crate) fn adopt(&self, holder: u32) -> Option<HolderGuard<'_>> {
        // Acquire: what the dead holder wrote under the lock happens before what the
        // recoverer reads under it (its process's stores are in the shared mapping).
        // (`then`, not `then_some`: a guard made and dropped would unlock.)
        ((self.word.load(Acquire) & HOLDER_BITS) == Self::held_by(holder))
            .then(|| HolderGuard { lock: self })
    }

    /// Release the lock if `holder` holds it; false (and nothing changes) otherwise. For
    /// the one recoverer of a holder whose process died holding the lock (it acts as
    /// that holder, and has made what the lock guards whole first): the dead holder
    /// will never unlock it.
    pub(crate) fn release_dead(&self, holder: u32) -> bool {
        // Relaxed: a lock held by a dead holder changes only by waiters setting
        // SLEEPER; the unlock below orders what the recoverer did under it.
        if (self.word.load(Relaxed) & HOLDER_BITS) != Self::held_by(holder) {
            return false;
        }
        self.unlock();
        true
    }

    /// [`HolderLock::lock`] with sleeps of at most `timeout` each instead of
    /// [`SLEEP_TIMEOUT`]: a test with a long timeout shows that a sleeper gets the lock
    /// because it was woken, not because its sleep ran out.
    #[cfg(all(test, not(loom)))]
    fn lock_with_timeout(&self, holder: u32, timeout: std::time::Duration) -> HolderGuard<'_> {
        let me = Self::held_by(holder);
        // Acquire on success: as in `lock`.
        if self.word.compare_exchange(0, me, Acquire, Relaxed).is_err() {
            self.wait_and_lock(me, timeout);
        }
        HolderGuard { lock: self }
    }

    /// The waiting path of [`HolderLock::lock`]: the word was not free.
    #[cold]
    #[inline(never)]
    fn lock_contended(&self, me: u32) {
        self.wait_and_lock(me, SLEEP_TIMEOUT);
    }

    /// Wait until the word is free and take it with `me` (`holder + 1`), sleeping at
    /// most `timeout` at a time.
    fn wait_and_lock(&self, me: u32, timeout: std::time::Duration) {
        #[cfg(not(loom))]
        for round in 0..SPIN_ROUNDS + YIELD_ROUNDS {
            // Relaxed: only a hint of when to try the compare-and-swap, which orders.
            if self.word.load(Relaxed) == 0
                // Acquire on success: as in `lock`.
                && self.word.compare_exchange(0, me, Acquire, Relaxed).is_ok()
            {
                return;
            }
            if round < SPIN_ROUNDS {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
        // When the sleeping began, then when the holder was last looked at.
        #[cfg(not(loom))]
        let mut waited: Option<std::time::Instant> = None;
        loop {
            // Relaxed: the compare-and-swaps below check the value they act on.
            let v = self.word.load(Relaxed);
            if v == 0 {
                // Taken with SLEEPER set: other waiters may sleep, and the unlock that
                // freed the word cleared the bit, so only this holder's unlock can
                // wake them. Acquire on success: as in `lock`.
                if self
                    .word
                    .compare_exchange(0, me | SLEEPER, Acquire, Relaxed)
                    .is_ok()
                {
                    return;
                }
                continue;
            }
            // Announce the sleep before sleeping. Relaxed: the bit carries no data; what
            // makes the holder's unlock see it is that both are read-modify-writes of
            // this one word (the unlock's swap either follows this one and returns the
            // bit, or precedes it and this one fails, the word being 0 then).
            if v & SLEEPER == 0
                && self
                    .word
                    .compare_exchange(v, v | SLEEPER, Relaxed, Relaxed)
                    .is_err()
            {
                continue;
            }
            // Sleeps only if the word still holds `v | SLEEPER` (checked atomically
            // with the sleep by the kernel): an unlock between the compare-and-swap
            // above and the sleep makes it return at once, so its wake is not lost.
            #[cfg(not(loom))]
            futex::wait(&self.word, v | SLEEPER, timeout);
            #[cfg(loom)]
            {
                let _ = timeout;
                self.futex.wait(&self.word, v | SLEEPER);
            }
            // The holder may belong to a process that died holding the lock (a word
            // in a shared pool's mapping), and would then never unlock: once the wait
            // has lasted `PEER_CHECK`, and then at most every `PEER_CHECK` (the sleep's
            // timeout gives the chance), look. Within one process a holder cannot die
            // without the waiter, and `check` finds no pool for the word.
            #[cfg(not(loom))]
            {
                let now = std::time::Instant::now();
                let since = *waited.get_or_insert(now);
                if now.duration_since(since) >= crate::peers::PEER_CHECK {
                    waited = Some(now);
                    // (A word that names no holder was unlocked meanwhile: nothing
                    // to ask about, the loop takes the lock.)
                    if let Some(holder) = (self.word.load(Relaxed) & HOLDER_BITS).checked_sub(1) {
                        crate::peers::check((&self.word as *const AtomicU32).cast(), Some(holder));
                    }
                }
            }
        }
    }

    /// Release the lock (its guard is being dropped), waking one sleeper if any may
    /// sleep.
    #[inline]
    fn unlock(&self) {
        // Release: pairs with the Acquire of the next holder's compare-and-swap (see
        // `lock`); without it the next holder could miss this holder's writes to the
        // guarded data.
        let prev = self.word.swap(0, Release);
        debug_assert_ne!(prev & HOLDER_BITS, 0, "unlock of a free lock");
        if prev & SLEEPER != 0 {
            self.wake_one();
        }
    }

    /// Wake one sleeper (out of line: the unlock fast path stays small). Finding none
    /// is fine: a waiter that set the bit but is not asleep yet finds the word changed
    /// when it tries to sleep, and a sleeper that timed out looks again by itself.
    #[cold]
    #[inline(never)]
    fn wake_one(&self) {
        #[cfg(not(loom))]
        futex::wake_one(&self.word);
        #[cfg(loom)]
        self.futex.wake_one();
    }
}

impl Default for HolderLock {
    fn default() -> HolderLock {
        HolderLock::new()
    }
}

impl std::fmt::Debug for HolderLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HolderLock")
            .field("holder", &self.holder())
            .finish()
    }
}

impl Drop for HolderGuard<'_> {
    #[inline]
    fn drop(&mut self) {
        self.lock.unlock();
    }
}

/// Data of type `T` under a [`HolderLock`] beside it: a mutex whose lock word names
/// its holder. `T` is reached only through a guard.
#[repr(C)]
pub(crate) struct HolderMutex<T> {
    lock: HolderLock,
    data: UnsafeCell<T>,
}

// SAFETY: a free lock is the word 0, and the word is all the lock holds outside the
// loom models (whose builds compile, but never place, region state); an
// `UnsafeCell<T>` adds nothing to `T`; both are `repr(C)`.
unsafe impl InRegion for HolderLock {}
// SAFETY: as above, for the lock and a `T` that may live in a region.
unsafe impl<T: InRegion> InRegion for HolderMutex<T> {}

// SAFETY: the data is only reached through a `HolderMutexGuard`, and a guard exists
// only while its lock is held, which one guard at a time can be: threads that share a
// `HolderMutex` thus touch `T` one at a time, each after the last one's unlock
// (Release/Acquire in `HolderLock`). As for `std::sync::Mutex`, that needs `T: Send`
// (the value is in effect handed from thread to thread), not `T: Sync`.
unsafe impl<T: Send> Sync for HolderMutex<T> {}

/// Access to the data of a [`HolderMutex`] while its lock is held; unlocks when
/// dropped.
#[must_use = "the lock is released when the guard is dropped"]
pub(crate) struct HolderMutexGuard<'a, T> {
    /// Kept for its drop, the unlock.
    _held: HolderGuard<'a>,
    data: &'a UnsafeCell<T>,
    /// The guard hands out `&mut T`: it is `Send` / `Sync` exactly when `&mut T` is.
    _data: PhantomData<&'a mut T>,
}

impl<T> HolderMutex<T> {
    /// `data`, unlocked. (The library's mutexes are placed in regions, zeroed: a free
    /// lock; the tests make their own.)
    #[cfg(test)]
    pub(crate) fn new(data: T) -> HolderMutex<T> {
        HolderMutex {
            lock: HolderLock::new(),
            data: UnsafeCell::new(data),
        }
    }

    /// Lock for `holder` (see [`HolderLock::lock`]).
    #[inline]
    pub(crate) fn lock(&self, holder: u32) -> HolderMutexGuard<'_, T> {
        self.guard(self.lock.lock(holder))
    }

    /// Lock for `holder` if free (see [`HolderLock::try_lock`]).
    #[cfg(test)]
    pub(crate) fn try_lock(&self, holder: u32) -> Option<HolderMutexGuard<'_, T>> {
        self.lock.try_lock(holder).map(|held| self.guard(held))
    }

    /// Who holds the lock now (see [`HolderLock::holder`]).
    #[cfg_attr(not(test), allow(dead_code))] // for diagnostics
    pub(crate) fn holder(&self) -> Option<u32> {
        self.lock.holder()
    }

    /// [`HolderLock::adopt`] of the mutex's lock: the guard of a dead holder's lock,
    /// for its one recoverer to make the data whole and then unlock.
    pub(crate) fn adopt(&self, holder: u32) -> Option<HolderMutexGuard<'_, T>> {
        self.lock.adopt(holder).map(|held| self.guard(held))
    }

    /// Lock for `holder` and return the held lock with the data's address, for a
    /// caller that makes its own view of the data: dereferencing the address is
    /// sound only while the returned guard lives, and only as the one reference.
    #[inline]
    pub(crate) fn lock_raw(&self, holder: u32) -> (HolderGuard<'_>, *mut T) {
        (self.lock.lock(holder), self.data.get())
    }

    /// [`HolderLock::adopt`] of the mutex's lock, with the data's address (as
    /// [`HolderMutex::lock_raw`]).
    pub(crate) fn adopt_raw(&self, holder: u32) -> Option<(HolderGuard<'_>, *mut T)> {
        Some((self.lock.adopt(holder)?, self.data.get()))
    }

    /// [`HolderMutex::lock_raw`] if the lock is free.
    #[inline]
    pub(crate) fn try_lock_raw(&self, holder: u32) -> Option<(HolderGuard<'_>, *mut T)> {
        Some((self.lock.try_lock(holder)?, self.data.get()))
    }

    /// The data, through a unique reference to the mutex (no lock needed).
    pub(crate) fn get_mut(&mut self) -> &mut T {
        self.data.get_mut()
    }

    #[inline(always)]
    fn guard<'a>(&'a self, held: HolderGuard<'a>) -> HolderMutexGuard<'a, T> {
        HolderMutexGuard {
            _held: held,
            data: &self.data,
            _data: PhantomData,
        }
    }
}

impl<T> std::fmt::Debug for HolderMutex<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The data is not shown: reading it would need the lock, and a `Debug` that
        // waits (or deadlocks when the caller holds the lock) is worse than none.
        f.debug_struct("HolderMutex")
            .field("holder", &self.lock.holder())
            .finish_non_exhaustive()
    }
}

impl<T> std::ops::Deref for HolderMutexGuard<'_, T> {
    type Target = T;
    #[inline(always)]
    fn deref(&self) -> &T {
        // SAFETY: `_held` proves the lock is held by this guard, so no other guard (the
        // only way to the data) exists until it is dropped; the borrow of `self` keeps
        // the reference from outliving it.
        unsafe { &*self.data.get() }
    }
}

impl<T> std::ops::DerefMut for HolderMutexGuard<'_, T> {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as in `deref`; the mutable borrow of `self` makes this the only
        // reference to the data while it lives.
        unsafe { &mut *self.data.get() }
    }
}

/// The futex calls on the word (Linux).
#[cfg(not(loom))]
mod futex {
    use std::sync::atomic::AtomicU32;
    use std::time::Duration;

    /// Sleep while `word` holds `expected`, at most `timeout`; returns early when
    /// woken, when the word does not hold `expected` (checked by the kernel atomically
    /// with going to sleep), on a signal, or spuriously: the caller looks again in
    /// every case.
    pub(super) fn wait(word: &AtomicU32, expected: u32, timeout: Duration) {
        let ts = libc::timespec {
            tv_sec: timeout.as_secs() as libc::time_t,
            tv_nsec: timeout.subsec_nanos() as libc::c_long,
        };
        // SAFETY: `word` is a live, 4-aligned `u32` (an `AtomicU32` has `u32`'s layout)
        // for the whole call, which only reads it; `ts` outlives the call; the last two
        // arguments are ignored by FUTEX_WAIT. The result (0, or EAGAIN, ETIMEDOUT,
        // EINTR) is ignored on purpose: the caller looks at the word again whatever it
        // is.
        unsafe {
            libc::syscall(
                libc::SYS_futex,
                word.as_ptr(),
                libc::FUTEX_WAIT,
                expected,
                &ts as *const libc::timespec,
                std::ptr::null::<u32>(),
                0u32,
            );
        }
    }

    /// Wake one thread (of any process) sleeping on `word`, if any; true if one was.
    pub(super) fn wake_one(word: &AtomicU32) -> bool {
        // SAFETY: `word` is a live, 4-aligned `u32`; FUTEX_WAKE reads only the address
        // (the kernel's key for the wait queue) and returns the number woken.
        unsafe { libc::syscall(libc::SYS_futex, word.as_ptr(), libc::FUTEX_WAKE, 1i32) > 0 }
    }
}

/// A model of the kernel's futex for loom: what FUTEX_WAIT and FUTEX_WAKE promise
/// each other, and nothing more.
///
/// A sleeper blocks on a loom condition variable rather than yielding in a loop: with
/// two sleepers, loom schedules two yielding threads against each other without end
/// (each yield makes the other runnable again), whereas a blocked thread is not
/// scheduled at all, and a sleeper that no wake reaches leaves the model deadlocked,
/// which loom reports.
#[cfg(loom)]
mod futex {
    use loom::sync::atomic::AtomicU32;
    use loom::sync::{Condvar, Mutex};
    use std::collections::VecDeque;
    use std::sync::atomic::Ordering::Relaxed;

    /// The sleepers on one word, by ticket, in the order they went to sleep. The mutex
    /// plays the kernel's hash-bucket lock.
    #[derive(Default)]
    pub(super) struct Queue {
        sleepers: Mutex<Sleepers>,
        woken: Condvar,
    }

    #[derive(Default)]
    struct Sleepers {
        next_ticket: u64,
        asleep: VecDeque<u64>,
    }

    impl Queue {
        /// FUTEX_WAIT without a timeout: under the bucket lock, sleep only if `word`
        /// holds `expected`; then sleep until a wake takes this sleeper off the queue.
        pub(super) fn wait(&self, word: &AtomicU32, expected: u32) {
            let mut q = self.sleepers.lock().unwrap();
            // Relaxed: as the kernel's read, under the bucket lock, which orders it
            // after the unlock of a waker that took the bucket lock first.
            if word.load(Relaxed) != expected {
                return;
            }
            let ticket = q.next_ticket;
            q.next_ticket += 1;
            q.asleep.push_back(ticket);
            while q.asleep.contains(&ticket) {
                q = self.woken.wait(q).unwrap();
            }
        }

        /// FUTEX_WAKE of one: take the oldest sleeper off the queue, if any, and wake
        /// it; true if there was one.
        pub(super) fn wake_one(&self) -> bool {
            let mut q = self.sleepers.lock().unwrap();
            if q.asleep.pop_front().is_none() {
                return false;
            }
            // All sleepers look; only the one taken off the queue returns.
            self.woken.notify_all();
            true
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    /// A counter that is not atomic: increments that overlap lose updates (a read and
    /// a write apart, with a yield between), so the final count shows whether the
    /// critical sections ever overlapped.
    struct Racy(u64);

    impl Racy {
        fn bump(&mut self) {
            let v = std::hint::black_box(self.0);
            if v.is_multiple_of(64) {
                std::thread::yield_now();
            }
            self.0 = std::hint::black_box(v + 1);
        }
    }

    /// Only the holder a lock names is adopted; asking as another holder, or of a free
    /// lock, changes nothing.
    #[test]
    fn only_the_named_holder_adopts_a_lock() {
        let l = HolderLock::new();
        assert!(l.adopt(3).is_none(), "a free lock");
        assert_eq!(l.holder(), None);
        std::mem::forget(l.lock(3));
        assert!(l.adopt(5).is_none(), "another holder's lock");
        assert_eq!(l.holder(), Some(3), "still held by its holder");
        drop(l.adopt(3).expect("the dead holder's lock"));
        assert_eq!(l.holder(), None, "unlocked by the adopter");
    }

    #[test]
    fn threads_hammering_the_lock_never_overlap() {
        const THREADS: u32 = 4;
        const ROUNDS: u64 = 20_000;
        let m = Arc::new(HolderMutex::new(Racy(0)));
        let inside = Arc::new(AtomicBool::new(false));
        let handles: Vec<_> = (0..THREADS)
            .map(|t| {
                let (m, inside) = (m.clone(), inside.clone());
                std::thread::spawn(move || {
                    for _ in 0..ROUNDS {
                        let mut g = m.lock(t);
                        assert!(!inside.swap(true, Relaxed), "two holders at once");
                        assert_eq!(m.holder(), Some(t), "the word names the holder");
                        g.bump();
                        inside.store(false, Relaxed);
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        assert_eq!(m.lock(0).0, THREADS as u64 * ROUNDS, "an update was lost");
        assert_eq!(m.holder(), None);
    }

    #[test]
    fn try_lock_fails_while_held_and_names_the_holder() {
        let m = HolderMutex::new(7u32);
        assert_eq!(m.holder(), None);
        let g = m.try_lock(3).expect("a free lock");
        assert_eq!(*g, 7);
        assert_eq!(m.holder(), Some(3));
        assert!(m.try_lock(4).is_none(), "taken while held");
        assert!(m.try_lock(3).is_none(), "not reentrant");
        assert_eq!(m.holder(), Some(3), "a failed try_lock changes nothing");
        let s = format!("{m:?}");
        assert!(s.contains("Some(3)"), "{s}");
        drop(g);
        assert_eq!(m.holder(), None);
        let mut g = m.try_lock(HolderLock::MAX_HOLDER).expect("free again");
        *g += 1;
        assert_eq!(m.holder(), Some(HolderLock::MAX_HOLDER));
        drop(g);
        assert_eq!(*m.lock(0), 8);
    }

    /// A waiter whose lock is held by a slot of a process that died (a word in a
    /// watched mapping, `crate::peers`) gives up after sleeping, naming the slot,
    /// instead of waiting for ever; a lock held by a live slot is waited for.
    #[test]
    fn a_waiter_gives_up_on_a_dead_holder() {
        let locks = [HolderLock::new(), HolderLock::new()];
        let at = |l: &HolderLock| std::ptr::from_ref(l) as usize;
        let len = std::mem::size_of::<HolderLock>();
        let _peers = [&locks[0], &locks[1]].map(|l| crate::peers::OneDead::watching(3, at(l), len));
        let held = locks[0].lock(3);
        let started = std::time::Instant::now();
        assert_eq!(
            crate::peers::catch(|| drop(locks[0].lock(1))).err(),
            Some(3)
        );
        assert!(started.elapsed() >= crate::peers::PEER_CHECK);
        drop(held);
        std::thread::scope(|s| {
            let held = locks[1].lock(2);
            let waiter = s.spawn(|| crate::peers::catch(|| drop(locks[1].lock(1))));
            // Long enough for the waiter to sleep and look at the holder many times.
            std::thread::sleep(std::time::Duration::from_millis(20));
            drop(held);
            assert_eq!(
                waiter.join().unwrap(),
                Ok(()),
                "a live holder is waited for"
            );
        });
    }

    #[test]
    #[should_panic(expected = "out of range")]
    fn holder_ids_beyond_the_word_are_refused() {
        let l = HolderLock::new();
        let _g = l.lock(HolderLock::MAX_HOLDER + 1);
    }

    /// The longest sleep of the waiters below: far longer than the tests take, so a
    /// waiter that gets the lock soon after the unlock was woken by it.
    const LONG_SLEEP: Duration = Duration::from_secs(30);
    /// How soon after the unlock a woken waiter must have the lock (generous: the
    /// machine may be loaded; a lost wake-up takes `LONG_SLEEP`).
    const PROMPT: Duration = Duration::from_secs(10);

    /// Wait until a waiter has announced its sleep on `lock` (the sleeper bit is set).
    fn until_a_sleeper(lock: &HolderLock) {
        let deadline = Instant::now() + PROMPT;
        while lock.word.load(Relaxed) & SLEEPER == 0 {
            assert!(Instant::now() < deadline, "no waiter went to sleep");
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// A waiter that outlasts the spinning and yielding sleeps on the futex, with the
    /// sleeper bit set, and the holder's unlock wakes it.
    #[test]
    fn a_sleeping_waiter_is_woken_by_the_unlock() {
        let lock = HolderLock::new();
        let held = lock.lock(1);
        let taken = std::thread::scope(|s| {
            let waiter = s.spawn(|| {
                let g = lock.lock_with_timeout(2, LONG_SLEEP);
                let taken = Instant::now();
                assert_eq!(lock.holder(), Some(2));
                // A waiter that slept takes the lock with the sleeper bit set.
                assert_ne!(
                    lock.word.load(Relaxed) & SLEEPER,
                    0,
                    "the waiter never slept"
                );
                drop(g);
                taken
            });
            until_a_sleeper(&lock);
            assert_eq!(
                lock.holder(),
                Some(1),
                "a sleeper does not change the holder"
            );
            // Held long enough for the waiter to be asleep in the kernel.
            std::thread::sleep(Duration::from_millis(20));
            let released = Instant::now();
            drop(held);
            waiter.join().unwrap().saturating_duration_since(released)
        });
        assert!(
            taken < PROMPT,
            "the unlock did not wake the sleeper: {taken:?}"
        );
        assert_eq!(lock.word.load(Relaxed), 0, "free, no sleeper left");
    }

    /// Of several sleepers, each unlock wakes the next: the one woken takes the lock
    /// with the sleeper bit, so that its own unlock wakes another.
    #[test]
    fn every_sleeper_is_woken_in_turn() {
        const WAITERS: u32 = 3;
        let lock = HolderLock::new();
        let held = lock.lock(0);
        let taken = std::thread::scope(|s| {
            let waiters: Vec<_> = (1..=WAITERS)
                .map(|t| {
                    let lock = &lock;
                    s.spawn(move || {
                        let g = lock.lock_with_timeout(t, LONG_SLEEP);
                        assert_eq!(lock.holder(), Some(t));
                        std::thread::sleep(Duration::from_millis(2));
                        drop(g);
                        Instant::now()
                    })
                })
                .collect();
            until_a_sleeper(&lock);
            // Time for the others to go to sleep too.
            std::thread::sleep(Duration::from_millis(50));
            let released = Instant::now();
            drop(held);
            waiters
                .into_iter()
                .map(|w| w.join().unwrap().saturating_duration_since(released))
                .max()
                .unwrap()
        });
        assert!(taken < PROMPT, "a sleeper was not woken: {taken:?}");
        assert_eq!(lock.word.load(Relaxed), 0, "free, no sleeper left");
    }

    /// The futex calls themselves: a wake on the word meets a sleeper on it.
    #[test]
    fn futex_wake_meets_futex_wait() {
        let word = AtomicU32::new(5);
        let slept = std::thread::scope(|s| {
            let sleeper = s.spawn(|| {
                let start = Instant::now();
                futex::wait(&word, 5, LONG_SLEEP);
                start.elapsed()
            });
            // A wake before the sleeper is queued finds nobody: wake until one is woken.
            let deadline = Instant::now() + PROMPT;
            while !futex::wake_one(&word) {
                assert!(Instant::now() < deadline, "the sleeper never slept");
                std::thread::sleep(Duration::from_millis(1));
            }
            sleeper.join().unwrap()
        });
        assert!(slept < PROMPT, "the sleeper was not woken: {slept:?}");
        assert!(!futex::wake_one(&word), "nobody sleeps now");
        // A word that does not hold the expected value: no sleep at all.
        let start = Instant::now();
        futex::wait(&word, 6, LONG_SLEEP);
        assert!(start.elapsed() < PROMPT);
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use loom::cell::UnsafeCell;
    use loom::sync::Arc;

    /// `threads` threads each take the lock once around a non-atomic increment and
    /// check that the word names them. Loom's cell reports two accesses that are not
    /// ordered one after the other: critical sections that overlap, or a handover
    /// without its Release/Acquire pair. The model ends only if every waiter is woken:
    /// a lost wake-up leaves a model sleeper blocked for good, a deadlock loom reports.
    fn excludes(threads: u32, preemption_bound: Option<usize>) {
        let mut model = loom::model::Builder::new();
        if preemption_bound.is_some() {
            model.preemption_bound = preemption_bound;
        }
        model.check(move || {
            let lock = Arc::new(HolderLock::new());
            let count = Arc::new(UnsafeCell::new(0u32));
            let handles: Vec<_> = (0..threads)
                .map(|t| {
                    let (lock, count) = (lock.clone(), count.clone());
                    loom::thread::spawn(move || {
                        let g = lock.lock(t);
                        assert_eq!(lock.holder(), Some(t), "the word names the holder");
                        // SAFETY: the lock is held; loom's cell checks that this access
                        // is ordered after every other one.
                        count.with_mut(|c| unsafe { *c += 1 });
                        drop(g);
                    })
                })
                .collect();
            for h in handles {
                h.join().unwrap();
            }
            // SAFETY: every thread joined; loom's cell checks the ordering.
            let n = count.with(|c| unsafe { *c });
            assert_eq!(n, threads, "an increment was lost");
            assert_eq!(lock.holder(), None);
        });
    }

    /// Two threads: exclusion, the handover of the data, and a woken sleeper.
    #[test]
    fn loom_holder_lock_excludes() {
        excludes(2, None);
    }

    /// Three threads, so that two may sleep at once: the one woken first must hand the
    /// sleeper bit on (bounded preemptions keep the model small).
    #[test]
    fn loom_holder_lock_wakes_every_sleeper() {
        excludes(3, Some(3));
    }
}
