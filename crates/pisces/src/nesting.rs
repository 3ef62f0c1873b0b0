//! Which transactions run on this thread: closure transactions of up to
//! `MAX_NESTED_POOLS` pools nested in each other, and the explicit transactions a
//! pool has open. A second transaction of a pool on a thread that runs one already
//! would wait for the first forever; this is how the API refuses it.

use crate::{Error, Result};
use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::thread::ThreadId;

/// Most pools with a closure transaction running on one thread at once (a transaction
/// of one pool may run a transaction of another inside it).
const MAX_NESTED_POOLS: usize = 4;

/// The closure transactions running on this thread (see `IN_TX`).
struct ActivePools {
    /// The closure transactions running (bits [`LEN_MASK`]), a nested transaction's
    /// give-up ([`GAVE_UP`]) and the explicit transactions this thread began that have
    /// not ended (from [`EXPLICIT_ONE`] up), in one word: the word is 0 exactly when
    /// this thread runs no transaction of any pool and has none open, which is all
    /// that the common transaction's guard tests ([`InTx::enter_idle`]).
    state: Cell<usize>,
    pools: [Cell<usize>; MAX_NESTED_POOLS],
}

/// The bits of [`ActivePools::state`] that count the closure transactions running.
const LEN_MASK: usize = 0xff;
/// [`ActivePools::state`]: a nested transaction gave up on a conflict that its
/// enclosing transaction may be the cause of (see [`InTx::gave_up_nested`]); the
/// enclosing `run` that sees it rolls its own attempt back and retries.
const GAVE_UP: usize = 0x100;
/// One explicit transaction in [`ActivePools::state`]: a closure transaction that
/// starts while one is open (any pool) runs nested in it.
const EXPLICIT_ONE: usize = 0x1_0000;

impl ActivePools {
    /// The closure transactions running.
    #[inline(always)]
    fn len(&self) -> usize {
        self.state.get() & LEN_MASK
    }

    /// Whether an explicit transaction this thread began has not ended.
    #[inline(always)]
    fn explicit_open(&self) -> bool {
        self.state.get() >= EXPLICIT_ONE
    }
}

thread_local! {
    /// Pools (by `PoolInner::id`) with a closure transaction running on this thread,
    /// innermost last: a second transaction of one of them would wait for the first (a
    /// grace period, a lock) forever. One thread-local of plain `Cell`s with a const
    /// initialiser: checked on every transaction, so it must cost a few instructions
    /// (one thread-local address, one word tested), not a `RefCell<Vec>`.
    /// Closure transactions end in reverse order of their start (scopes, also when
    /// unwinding), so the list never holds a transaction that is over. Explicit
    /// transactions, which a caller may leak (`mem::forget`), are registered with
    /// their pool instead ([`OpenExplicit`]) and only counted here.
    static IN_TX: ActivePools = const {
        ActivePools {
            state: Cell::new(0),
            pools: [const { Cell::new(0) }; MAX_NESTED_POOLS],
        }
    };
}

/// The explicit transactions of one pool that are open, with the thread that began
/// each (see `crate::explicit`). Kept with the pool, not in a thread-local: an explicit
/// transaction that is leaked stays registered only until its handle begins again or
/// is dropped ([`ThreadHandle`](crate::ThreadHandle) ends it then), and never concerns another pool.
#[derive(Debug, Default)]
pub(crate) struct OpenExplicit {
    /// How many are open: closure transactions read the list only when this is not 0.
    count: AtomicUsize,
    /// (thread, thread slot of the handle) of each open explicit transaction.
    list: Mutex<Vec<(ThreadId, usize)>>,
}

impl OpenExplicit {
    /// Whether the calling thread has an explicit transaction of this pool open.
    #[inline]
    pub(crate) fn on_this_thread(&self) -> bool {
        // Relaxed: a thread asks only about its own registrations, which program order
        // makes visible to it; another thread's entries never concern it, so missing
        // or seeing them late changes no answer.
        if self.count.load(Ordering::Relaxed) == 0 {
            return false;
        }
        self.on_this_thread_slow()
    }

    #[cold]
    fn on_this_thread_slow(&self) -> bool {
        let me = std::thread::current().id();
        self.list
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .any(|&(t, _)| t == me)
    }

    /// Register the explicit transaction of the handle on `slot`, begun on this thread.
    pub(crate) fn add(&self, slot: usize) {
        let mut l = self.list.lock().unwrap_or_else(|e| e.into_inner());
        l.push((std::thread::current().id(), slot));
        self.count.store(l.len(), Ordering::Relaxed);
        IN_TX.with(|t| t.state.set(t.state.get() + EXPLICIT_ONE));
    }

    /// End the registration of the handle on `slot`, begun by thread `began_on`.
    pub(crate) fn remove(&self, slot: usize, began_on: ThreadId) {
        let mut l = self.list.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(i) = l.iter().position(|&(_, s)| s == slot) {
            l.swap_remove(i);
        }
        self.count.store(l.len(), Ordering::Relaxed);
        drop(l);
        // The count of the thread that began it; a handle that moved to another thread
        // after its transaction was leaked cannot reach that thread's count, which then
        // stays raised: that thread's later transactions count as nested (bounded
        // retries), nothing worse.
        if began_on == std::thread::current().id() {
            IN_TX.with(|t| {
                if t.explicit_open() {
                    t.state.set(t.state.get() - EXPLICIT_ONE);
                }
            });
        }
    }
}

/// Marks this thread as inside a closure transaction of one pool while alive. Guards
/// are dropped in reverse order of creation (nested scopes, also when unwinding).
pub(crate) struct InTx {
    pool: usize,
    /// Another transaction (of another pool) was running on this thread when this one
    /// started.
    nested: bool,
}

impl InTx {
    /// Register a closure transaction of `pool` (its id and open explicit
    /// transactions); `Err(NestedTransaction)` if one of the same pool runs on this
    /// thread already.
    #[inline]
    pub(crate) fn enter(pool: usize, explicit: &OpenExplicit) -> Result<InTx> {
        if explicit.on_this_thread() {
            return Err(Error::NestedTransaction);
        }
        IN_TX.with(|t| {
            let len = t.len();
            if t.pools.iter().take(len).any(|p| p.get() == pool) {
                return Err(Error::NestedTransaction);
            }
            let Some(slot) = t.pools.get(len) else {
                return Err(too_many_pools());
            };
            slot.set(pool);
            // One more running; a give-up noted before this transaction started was
            // about another one.
            let state = t.state.get();
            t.state.set((state & !GAVE_UP) + 1);
            Ok(InTx {
                pool,
                nested: len > 0 || state >= EXPLICIT_ONE,
            })
        })
    }

    /// [`InTx::enter`] on a thread that runs no transaction and has none open (of any
    /// pool): the transaction is then neither refused nor nested, whatever `pool` and
    /// its open explicit transactions. `None` on any other thread, which asks
    /// [`InTx::enter`].
    ///
    /// Why the pool's list of open explicit transactions need not be asked: every
    /// registration in a list counts one in the state of the thread that made it
    /// (`OpenExplicit::add`), and a count goes down only when a registration of that
    /// thread ends (`OpenExplicit::remove`), so a thread whose count is 0 has no
    /// registration in any pool's list, which is what `on_this_thread` looks for.
    #[inline(always)]
    pub(crate) fn enter_idle(pool: usize) -> Option<InTx> {
        IN_TX.with(|t| {
            if t.state.get() != 0 {
                return None;
            }
            t.pools[0].set(pool);
            t.state.set(1);
            Some(InTx {
                pool,
                nested: false,
            })
        })
    }

    /// Whether any transaction (closure or explicit, any pool) runs on this thread.
    pub(crate) fn inside_any() -> bool {
        IN_TX.with(|t| t.len() > 0 || t.explicit_open())
    }

    /// Whether a closure transaction of `pool` runs on this thread.
    pub(crate) fn active(pool: usize) -> bool {
        IN_TX.with(|t| t.pools.iter().take(t.len()).any(|p| p.get() == pool))
    }

    /// Whether this transaction runs inside another one (of another pool) on this
    /// thread, which may hold what this one waits for.
    #[inline]
    pub(crate) fn nested(&self) -> bool {
        self.nested
    }

    /// Note that a nested transaction gave up on a conflict (it returns
    /// `Err(Conflict)` to the transaction around it).
    pub(crate) fn gave_up_nested() {
        IN_TX.with(|t| t.state.set(t.state.get() | GAVE_UP));
    }

    /// Whether a transaction nested in the current attempt gave up (and forget it).
    #[inline]
    pub(crate) fn take_nested_gave_up() -> bool {
        IN_TX.with(|t| {
            let state = t.state.get();
            t.state.set(state & !GAVE_UP);
            state & GAVE_UP != 0
        })
    }
}

/// The error of a transaction that would be the `MAX_NESTED_POOLS + 1`th on its thread.
/// Out of line: its message's formatting inside `enter`'s thread-local closure makes
/// the closure too large to inline, and `enter` runs on every transaction.
#[cold]
#[inline(never)]
fn too_many_pools() -> Error {
    Error::invalid_argument(format!(
        "more than {MAX_NESTED_POOLS} pools have a transaction running on this thread"
    ))
}

impl Drop for InTx {
    #[inline]
    fn drop(&mut self) {
        IN_TX.with(|t| {
            let len = t.len();
            debug_assert!(len > 0 && t.pools[len - 1].get() == self.pool);
            if len > 0 {
                t.state.set(t.state.get() - 1);
            }
        });
    }
}
