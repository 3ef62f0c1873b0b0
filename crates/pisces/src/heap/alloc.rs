//! The transactional persistent allocator.
//!
//! IMPLEMENTATION PENDING (being written now); this file fixes the API engines use.
//!
//! Protocol (the engine sequences these steps inside its commit):
//! 1. `reserve` (volatile only) during the transaction;
//! 2. the engine logs `Alloc{block}` / `Free{block}` in the transaction's redo record;
//! 3. in write-back, `publish_alloc` / `publish_free` change the persistent state
//!    (bitmap bit or slab-table run) and flush it; the engine's fence makes it durable;
//! 4. recovery replays logged entries with `replay_alloc` / `replay_free` (idempotent),
//!    then `rebuild` reconstructs the volatile state from the persistent bitmaps;
//! 5. on abort, `unreserve` returns reservations; a freed block becomes reusable with
//!    `release` only after `publish_free` is durable and the engine's grace period says
//!    no snapshot can still see it.

use super::Heap;
use crate::Result;
use std::sync::Arc;

/// Bytes of the header word in front of every payload.
pub const HEADER: usize = 8;

/// A block of the heap: header word followed by payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Block {
    /// Offset of the header word.
    pub offset: u64,
    /// Size of the block in bytes, header included.
    pub size: u64,
}

impl Block {
    /// Offset of the payload (what a `PPtr` holds).
    pub fn payload(&self) -> u64 {
        self.offset + HEADER as u64
    }
    /// Bytes available for the payload.
    pub fn payload_len(&self) -> usize {
        self.size as usize - HEADER
    }
}

/// Usage of one size class (for `pisces info`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClassUsage {
    /// Block size of the class (header included); for large runs, 0.
    pub block_size: u64,
    /// Slabs formatted for this class.
    pub slabs: u64,
    /// Blocks allocated (persistent bit set).
    pub allocated: u64,
    /// Blocks in formatted slabs that are free.
    pub free: u64,
}

/// Per-thread volatile cache of free blocks; owned by an engine's thread state.
#[derive(Debug, Default)]
pub struct ThreadCache {}

/// The allocator's volatile state over one heap.
#[derive(Debug)]
pub struct Allocator {
    #[allow(dead_code)]
    heap: Arc<Heap>,
}

impl Allocator {
    /// Rebuild the volatile state from the persistent slab table and bitmaps.
    pub fn rebuild(_heap: Arc<Heap>) -> Result<Allocator> {
        unimplemented!("allocator pending")
    }
    /// Reserve a block whose payload holds `payload_len` bytes (volatile; not durable).
    pub fn reserve(&self, _cache: &mut ThreadCache, _payload_len: usize) -> Result<Block> {
        unimplemented!("allocator pending")
    }
    /// Give back a reservation that was never published (abort).
    pub fn unreserve(&self, _cache: &mut ThreadCache, _b: Block) {}
    /// Persistently mark `b` allocated and flush (the caller fences). Idempotent.
    pub fn publish_alloc(&self, _b: Block) {}
    /// Persistently mark `b` free and flush (the caller fences). Idempotent.
    pub fn publish_free(&self, _b: Block) {}
    /// Make a published-free block reusable (after the grace period).
    pub fn release(&self, _cache: &mut ThreadCache, _b: Block) {}
    /// The block whose payload starts at `payload_off`, if it is one (fast, geometric).
    pub fn block_at(&self, _payload_off: u64) -> Option<Block> {
        None
    }
    /// Recovery: persistent effect of `publish_alloc` (validates geometry).
    pub fn replay_alloc(_heap: &Heap, _b: Block) -> Result<()> {
        Ok(())
    }
    /// Recovery: persistent effect of `publish_free` (validates geometry).
    pub fn replay_free(_heap: &Heap, _b: Block) -> Result<()> {
        Ok(())
    }
}
