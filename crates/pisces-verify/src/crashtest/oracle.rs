//! The allocator oracle: the persistent bitmaps must hold exactly the reachable objects.
//!
//! After recovery every transaction is either complete or absent, so an object is
//! allocated in the persistent state if and only if the recovered structure reaches it:
//! * allocated but unreachable is a **leak** (an allocation of a transaction that did
//!   not survive, or a free that was lost);
//! * reachable but not allocated is a **dangling** object: free space that the next
//!   allocation would hand out while it is still in use.
//!
//! Both are violations. The persistent allocator state itself must also be sound (slab
//! table entries, large runs, bitmap padding), which
//! `Pool::allocated_objects` verifies before listing anything.

use pisces::Pool;
use std::collections::BTreeSet;

/// Payload offsets of every allocated block of the persistent state, or what is wrong
/// with that state.
pub fn allocated(pool: &Pool) -> Result<BTreeSet<u64>, String> {
    let objects = pool
        .allocated_objects()
        .map_err(|e| format!("allocator state is not sound: {e}"))?;
    Ok(objects.into_iter().collect())
}

/// `Ok` if the allocated blocks are exactly `reachable` (payload offsets, the root
/// object included).
pub fn allocated_equals_reachable(pool: &Pool, reachable: &BTreeSet<u64>) -> Result<(), String> {
    let alloc = allocated(pool)?;
    if &alloc == reachable {
        return Ok(());
    }
    let leaked: Vec<String> = alloc
        .difference(reachable)
        .map(|o| format!("{o:#x}"))
        .collect();
    let dangling: Vec<String> = reachable
        .difference(&alloc)
        .map(|o| format!("{o:#x}"))
        .collect();
    Err(format!(
        "allocator bitmaps disagree with reachability: {} leaked (allocated, unreachable) [{}], {} reachable but free [{}]",
        leaked.len(),
        short(&leaked),
        dangling.len(),
        short(&dangling)
    ))
}

/// At most a few items of a list, for messages.
fn short(v: &[String]) -> String {
    const MAX: usize = 8;
    if v.len() <= MAX {
        v.join(", ")
    } else {
        format!("{}, ... ({} more)", v[..MAX].join(", "), v.len() - MAX)
    }
}
