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
    len: Cell<usize>,
    pools: [Cell<usize>; MAX_NESTED_POOLS],
    /// Explicit transactions this thread began that have not ended (any pool): a
    /// closure transaction that starts while one is open runs nested in it.
    explicit: Cell<usize>,
    /// A nested transaction gave up on a conflict that its enclosing transaction may
    /// be the cause of (see [`InTx::gave_up_nested`]); the enclosing `run` that sees
    /// it rolls its own attempt back and retries.
    nested_gave_up: Cell<bool>,
}

thread_local! {
    /// Pools (by `PoolInner::id`) with a closure transaction running on this thread,
    /// innermost last: a second transaction of one of them would wait for the first (a
    /// grace period, a lock) forever. One thread-local of plain `Cell`s with a const
    /// initialiser: checked on every transaction, so it must cost a few instructions
    /// (one thread-local address, no copy of the whole list), not a `RefCell<Vec>`.
    /// Closure transactions end in reverse order of their start (scopes, also when
    /// unwinding), so the list never holds a transaction that is over. Explicit
    /// transactions, which a caller may leak (`mem::forget`), are registered with
    /// their pool instead ([`OpenExplicit`]) and only counted here.
    static IN_TX: ActivePools = const {
        ActivePools {
            len: Cell::new(0),
            pools: [const { Cell::new(0) }; MAX_NESTED_POOLS],
            explicit: Cell::new(0),
            nested_gave_up: Cell::new(false),
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
        IN_TX.with(|t| t.explicit.set(t.explicit.get() + 1));
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
            IN_TX.with(|t| t.explicit.set(t.explicit.get().saturating_sub(1)));
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
            let len = t.len.get();
            if t.pools.iter().take(len).any(|p| p.get() == pool) {
                return Err(Error::NestedTransaction);
            }
            let Some(slot) = t.pools.get(len) else {
                return Err(too_many_pools());
            };
            slot.set(pool);
            t.len.set(len + 1);
            // A give-up noted before this transaction started was about another one.
            t.nested_gave_up.set(false);
            Ok(InTx {
                pool,
                nested: len > 0 || t.explicit.get() > 0,
            })
        })
    }

    /// Whether any transaction (closure or explicit, any pool) runs on this thread.
    pub(crate) fn inside_any() -> bool {
        IN_TX.with(|t| t.len.get() > 0 || t.explicit.get() > 0)
    }

    /// Whether a closure transaction of `pool` runs on this thread.
    pub(crate) fn active(pool: usize) -> bool {
        IN_TX.with(|t| t.pools.iter().take(t.len.get()).any(|p| p.get() == pool))
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
        IN_TX.with(|t| t.nested_gave_up.set(true));
    }

    /// Whether a transaction nested in the current attempt gave up (and forget it).
    #[inline]
    pub(crate) fn take_nested_gave_up() -> bool {
        IN_TX.with(|t| t.nested_gave_up.replace(false))
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
            let len = t.len.get();
            debug_assert!(len > 0 && t.pools[len - 1].get() == self.pool);
            t.len.set(len.saturating_sub(1));
        });
    }
}
