//! Validation of user offsets and the write-set kinds that buffering engines share.
//!
//! Every engine validates a user's `PPtr` here before touching memory, so a bad pointer
//! is an error, never a wild access; recovery validates every logged write here before
//! applying it.

use crate::heap::alloc::{Allocator, Block, HEADER};
use crate::heap::{Heap, ROOT_SLOT_OFFSET};
use crate::{Error, Result};

/// Payload offset of the root slot, the one object outside the allocator's heap.
pub(crate) const ROOT_SLOT_PAYLOAD: u64 = (ROOT_SLOT_OFFSET + HEADER) as u64;

/// Validate a user's object offset for an access of `len` bytes: returns the offset of
/// its header word and its payload length (a multiple of 8). Every engine calls this
/// before touching memory, so a bad `PPtr` is an error, never a wild access.
#[inline]
pub(crate) fn locate_object(alloc: &Allocator, off: u64, len: usize) -> Result<(u64, usize)> {
    if off == ROOT_SLOT_PAYLOAD {
        if len <= 16 {
            return Ok((ROOT_SLOT_OFFSET as u64, 16));
        }
    } else if let Some(b) = alloc.block_at(off) {
        if len <= b.payload_len() {
            return Ok((b.offset, b.payload_len() & !7));
        }
        return Err(Error::InvalidPointer(format!(
            "object at {off:#x} has {} bytes, not {len}",
            b.payload_len()
        )));
    }
    Err(Error::InvalidPointer(format!(
        "{off:#x} is not an object of this pool"
    )))
}

/// Validate a user's offset for `free`: the block whose payload starts at `off`. The
/// root slot is not a block and cannot be freed.
pub(crate) fn locate_block_to_free(alloc: &Allocator, off: u64) -> Result<Block> {
    if off == ROOT_SLOT_PAYLOAD {
        return Err(Error::InvalidPointer(
            "the root slot cannot be freed".into(),
        ));
    }
    alloc
        .block_at(off)
        .ok_or_else(|| Error::InvalidPointer(format!("{off:#x} is not an object of this pool")))
}

/// What a transaction does to one object of its write set (the engines that buffer
/// writes: pisces, mvcc).
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

/// Check that a logged write of `len` bytes at `off` targets object payloads (the heap
/// or the root slot), 8-aligned: recovery refuses anything else as corruption.
pub(crate) fn check_logged_write(heap: &Heap, off: u64, len: usize) -> Result<()> {
    let l = heap.layout();
    let end = off.checked_add(len as u64);
    let in_heap = end.is_some_and(|e| off >= l.heap_offset as u64 && e <= l.heap_end() as u64);
    let in_root = end.is_some_and(|e| off >= ROOT_SLOT_PAYLOAD && e <= ROOT_SLOT_PAYLOAD + 16);
    if (in_heap || in_root) && off.is_multiple_of(8) {
        Ok(())
    } else {
        Err(Error::Corrupt(format!(
            "log entry writes {len} bytes at {off:#x}, outside the heap"
        )))
    }
}
