//! Validation of user offsets and of logged writes.
//!
//! Every engine validates a user's `PPtr` here before touching memory, so a bad pointer
//! is an error, never a wild access; recovery validates every logged write here before
//! applying it.

use crate::heap::alloc::{Allocator, Block, HEADER};
use crate::heap::{Heap, ROOT_SLOT_OFFSET};
use crate::{Error, Result};

/// Payload offset of the root slot, the one object outside the allocator's heap.
pub(crate) const ROOT_SLOT_PAYLOAD: u64 = (ROOT_SLOT_OFFSET + HEADER) as u64;

/// The offset engines hand out for the root slot
/// ([`Engine::root_slot`](crate::engine::Engine::root_slot), used by
/// `Pool::root` only): a capability, not the slot's real offset.
///
/// The root slot holds the root object's offset and size; a user who could write it
/// would break `Pool::root` for good. So the real payload offset
/// ([`ROOT_SLOT_PAYLOAD`]) is refused from users, and only this token reaches the slot:
/// bit 63 set (never an offset of a pool) and 51 random bits chosen once per process,
/// so a `PPtr` can only hold it if it came from the engine. Engines map it to the real
/// offset in [`locate_object`] and work with that (logs, indexes, home copies).
pub(crate) fn root_slot_token() -> u64 {
    static TOKEN: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *TOKEN.get_or_init(|| {
        use std::hash::{BuildHasher, Hasher};
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u64(std::process::id() as u64);
        let r = h.finish();
        (1 << 63) | (r & 0x7FFF_FFFF_FFFF_F000) | ROOT_SLOT_PAYLOAD
    })
}

/// `Ok` if a transaction runs (`active`): every call but `begin` needs one.
#[inline]
pub(crate) fn running(active: bool) -> Result<()> {
    if active {
        Ok(())
    } else {
        Err(no_transaction())
    }
}

#[cold]
fn no_transaction() -> Error {
    Error::invalid_pointer("no transaction is running on this thread")
}

/// Validate a user's object offset for an access of `len` bytes: returns the offset of
/// its header word and its payload length (a multiple of 8). Every engine calls this
/// before touching memory, so a bad `PPtr` is an error, never a wild access. The
/// payload the engine then uses is `header + 8` (for the root slot token, the slot's
/// real payload).
///
/// A geometrically valid block must also be *allocated*: its persistent bitmap bit (one
/// Acquire load, [`Allocator::block_state`]). Blocks whose bit is clear are the slow
/// path: the engine's `pending` says whether this transaction may still use the block
/// although the bit is clear (allocated by this transaction, or by a committed one whose
/// publication is pending, or freed by a transaction this snapshot does not see; the
/// engine decides from its own state). If it says no, the bit is read once more: the
/// engine's check (e.g. an Acquire load of a header word that a write-back just
/// cleared) may have ordered a concurrent `publish_alloc` before it.
#[inline]
pub(crate) fn locate_object(
    alloc: &Allocator,
    off: u64,
    len: usize,
    pending: impl FnOnce(Block) -> bool,
) -> Result<(u64, usize)> {
    if let Some((b, allocated)) = alloc.block_state(off) {
        if len > b.payload_len() {
            return Err(Error::invalid_pointer(format!(
                "object at {off:#x} has {} bytes, not {len}",
                b.payload_len()
            )));
        }
        if allocated || still_usable(alloc, b, pending) {
            return Ok((b.offset, b.payload_len() & !7));
        }
        return Err(not_allocated(off));
    }
    if off == root_slot_token() {
        if len <= 16 {
            return Ok((ROOT_SLOT_OFFSET as u64, 16));
        }
        return Err(Error::invalid_pointer(format!(
            "the root slot has 16 bytes, not {len}"
        )));
    }
    Err(not_an_object(off))
}

/// The slow path of the allocated check (see [`locate_object`]).
#[cold]
#[inline(never)]
fn still_usable(alloc: &Allocator, b: Block, pending: impl FnOnce(Block) -> bool) -> bool {
    pending(b) || alloc.block_state(b.payload()).is_some_and(|(_, a)| a)
}

#[cold]
fn not_allocated(off: u64) -> Error {
    Error::invalid_pointer(format!(
        "{off:#x} is not an allocated object (never allocated, or already freed)"
    ))
}

#[cold]
fn not_an_object(off: u64) -> Error {
    if off == ROOT_SLOT_PAYLOAD || off.wrapping_sub(ROOT_SLOT_PAYLOAD) < 16 {
        return Error::invalid_pointer(format!(
            "{off:#x} is inside the root slot, which only Pool::root may use"
        ));
    }
    Error::invalid_pointer(format!("{off:#x} is not an object of this pool"))
}

/// Re-check, after the engine locked the object, that block `b` is still allocated (or
/// `pending` vouches for it): a write-back that ran while the engine waited for the
/// lock may have published a free of it (a double free across transactions).
pub(crate) fn check_still_allocated(
    alloc: &Allocator,
    b: Block,
    pending: impl FnOnce(Block) -> bool,
) -> Result<()> {
    if alloc.block_state(b.payload()).is_some_and(|(_, a)| a) || pending(b) {
        Ok(())
    } else {
        Err(not_allocated(b.payload()))
    }
}

/// Validate a user's offset for `free`: the allocated block whose payload starts at
/// `off` (see [`locate_object`] for `pending`). The root slot is not a block and cannot
/// be freed, nor can the root object (`root_object`: the payload offset the root slot
/// holds in this transaction's snapshot, 0 if none): `Pool::root` would hand it out
/// again after its block is reused.
pub(crate) fn locate_block_to_free(
    alloc: &Allocator,
    off: u64,
    root_object: u64,
    pending: impl FnOnce(Block) -> bool,
) -> Result<Block> {
    if off == root_slot_token() {
        return Err(Error::invalid_pointer("the root slot cannot be freed"));
    }
    let Some((b, allocated)) = alloc.block_state(off) else {
        return Err(not_an_object(off));
    };
    if off == root_object {
        return Err(Error::invalid_pointer(format!(
            "{off:#x} is the root object, which cannot be freed (Pool::root hands it out)"
        )));
    }
    if allocated || still_usable(alloc, b, pending) {
        Ok(b)
    } else {
        Err(not_allocated(off))
    }
}

/// The root object's payload offset as the root slot reads through `read` (an engine's
/// own transactional read of the slot), or 0 if there is none yet.
pub(crate) fn root_object(read: impl FnOnce(u64, usize) -> Result<*const u8>) -> Result<u64> {
    let p = read(root_slot_token(), 16)?;
    // SAFETY: the engine's read returns a pointer valid for 16 bytes, 8-aligned (a
    // payload), unchanged while the transaction runs.
    Ok(unsafe { (p as *const u64).read() })
}

/// Check that a logged write of `len` bytes at `off` targets object payloads (the heap
/// or the root slot), 8-aligned: recovery refuses anything else as corruption.
pub(crate) fn check_logged_write(heap: &Heap, off: u64, len: usize) -> Result<()> {
    let l = heap.layout();
    let end = off.checked_add(len as u64);
    // The heap's current end: a pool that may grow has slabs in its geometry that do
    // not exist yet.
    let in_heap = end.is_some_and(|e| off >= l.heap_offset as u64 && e <= heap.heap_end() as u64);
    let in_root = end.is_some_and(|e| off >= ROOT_SLOT_PAYLOAD && e <= ROOT_SLOT_PAYLOAD + 16);
    if (in_heap || in_root) && off.is_multiple_of(8) {
        Ok(())
    } else {
        Err(Error::corrupt(format!(
            "log entry writes {len} bytes at {off:#x}, outside the heap"
        )))
    }
}
