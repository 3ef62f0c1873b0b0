//! Write sets: what a transaction does to each object it writes, allocates or frees.
//!
//! [`WriteKind`]: written, allocated, freed, or allocated and freed again (every engine
//! that defers allocator changes to its commit: pisces, mvcc, sp3, spht, timestone).

use crate::heap::alloc::Block;
use crate::{Error, Result};

/// What a transaction does to one object of its write set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WriteKind {
    /// An existing object written.
    Written,
    /// A block allocated by this transaction.
    Fresh(Block),
    /// An existing object freed (and perhaps written).
    Freed(Block),
    /// Allocated and freed again by this transaction.
    FreshFreed(Block),
}

impl WriteKind {
    /// The kind after the transaction frees the object at `off` (block `block`);
    /// freeing it twice is an error.
    pub(crate) fn freed(self, off: u64, block: Block) -> Result<WriteKind> {
        match self {
            WriteKind::Written => Ok(WriteKind::Freed(block)),
            WriteKind::Fresh(f) => Ok(WriteKind::FreshFreed(f)),
            WriteKind::Freed(_) | WriteKind::FreshFreed(_) => Err(Error::InvalidPointer(format!(
                "object {off:#x} freed twice"
            ))),
        }
    }
}
