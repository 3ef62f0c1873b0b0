//! Write sets: what a transaction does to each object it writes, allocates or frees.
//!
//! * [`WriteKind`]: written, allocated, freed, or allocated and freed again (every engine
//!   that defers allocator changes to its commit: pisces, mvcc, sp3, spht, timestone);
//! * [`WriteSet`] of [`WriteEntry`]s: the write set of the engines that keep one private
//!   DRAM copy per object, found through an index entry of their own (mvcc, sp3,
//!   timestone): the entries in order of first access and a map from payload offset to
//!   entry, and the redo record of whole objects ([`WriteSet::build_record`]).
//!
//! Pisces keeps its own entries (found through the object's header word, which links
//! the copy, with no index entry nor length of its own), and spht its own (copies of
//! whole words taken from a striped snapshot).

use crate::engine::kit::log::redo_log::RecordBuilder;
use crate::fasthash::FastMap;
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
            WriteKind::Freed(_) | WriteKind::FreshFreed(_) => Err(Error::invalid_pointer(format!(
                "object {off:#x} freed twice"
            ))),
        }
    }

    /// Allocated by this transaction (and perhaps freed again): its allocation bit is
    /// clear until the commit publishes it, and the block is this transaction's.
    #[inline]
    pub(crate) fn is_fresh(self) -> bool {
        matches!(self, WriteKind::Fresh(_) | WriteKind::FreshFreed(_))
    }
}

/// A private DRAM copy of an object's payload.
pub(crate) trait Payload {
    /// The payload bytes.
    ///
    /// # Safety
    /// `this` must point to a live copy.
    unsafe fn data(this: *const Self) -> *mut u8;
}

/// One object of a [`WriteSet`]: `V` is the engine's private copy, `E` its index entry
/// of the object (its lock), `X` what undoing the engine's lock needs (sp3: the
/// entry's version word before the lock; `()` for the others).
pub(crate) struct WriteEntry<V, E, X = ()> {
    /// Payload offset.
    pub(crate) off: u64,
    /// Payload bytes (a multiple of 8).
    pub(crate) len: usize,
    /// Private copy of `len` bytes (null for an object freed without being written).
    pub(crate) copy: *mut V,
    pub(crate) kind: WriteKind,
    /// The object's index entry, once the engine locked it (null before).
    pub(crate) entry: *const E,
    /// The engine's lock state before its lock (see the type's docs).
    pub(crate) prior: X,
}

impl<V, E, X: Default> WriteEntry<V, E, X> {
    /// An entry whose object is not locked yet.
    #[inline]
    pub(crate) fn new(off: u64, len: usize, copy: *mut V, kind: WriteKind) -> Self {
        WriteEntry {
            off,
            len,
            copy,
            kind,
            entry: std::ptr::null(),
            prior: X::default(),
        }
    }

    /// Block `b`, allocated by this transaction, with its zeroed private copy `copy`.
    #[inline]
    pub(crate) fn fresh(b: Block, copy: *mut V) -> Self {
        Self::new(b.payload(), b.payload_len() & !7, copy, WriteKind::Fresh(b))
    }

    /// The object of block `b`, freed (not written) by this transaction.
    #[inline]
    pub(crate) fn freed(b: Block) -> Self {
        Self::new(
            b.payload(),
            b.payload_len() & !7,
            std::ptr::null_mut(),
            WriteKind::Freed(b),
        )
    }
}

/// A transaction's write set (see the module docs): the entries in order of first
/// access (`Deref` to the slice) and the index from payload offset to entry.
pub(crate) struct WriteSet<V, E, X = ()> {
    /// The entries; an engine that takes them out (`std::mem::take`) puts the emptied
    /// vector back, to keep its capacity.
    pub(crate) list: Vec<WriteEntry<V, E, X>>,
    at: FastMap<u64, usize>,
}

impl<V, E, X> Default for WriteSet<V, E, X> {
    fn default() -> Self {
        WriteSet {
            list: Vec::new(),
            at: FastMap::default(),
        }
    }
}

impl<V, E, X> std::ops::Deref for WriteSet<V, E, X> {
    type Target = [WriteEntry<V, E, X>];
    #[inline]
    fn deref(&self) -> &Self::Target {
        &self.list
    }
}

impl<V, E, X> std::ops::DerefMut for WriteSet<V, E, X> {
    #[inline]
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.list
    }
}

impl<V, E, X> WriteSet<V, E, X> {
    /// The index of the entry of the object at payload offset `off`.
    #[inline]
    pub(crate) fn index_of(&self, off: u64) -> Option<usize> {
        self.at.get(&off).copied()
    }

    /// The entry of the object at payload offset `off`.
    #[inline]
    pub(crate) fn get(&self, off: u64) -> Option<&WriteEntry<V, E, X>> {
        self.index_of(off).map(|i| &self.list[i])
    }

    /// Add the entry of an object not in the set yet.
    #[inline]
    pub(crate) fn push(&mut self, e: WriteEntry<V, E, X>) {
        self.at.insert(e.off, self.list.len());
        self.list.push(e);
    }

    /// Take every entry out, emptying the set (its capacity stays).
    #[inline]
    pub(crate) fn drain(&mut self) -> std::vec::Drain<'_, WriteEntry<V, E, X>> {
        self.at.clear();
        self.list.drain(..)
    }

    /// Forget the index (the transaction ended; the engine has taken the entries out
    /// of `list`).
    #[inline]
    pub(crate) fn clear_index(&mut self) {
        self.at.clear();
    }

    /// Whether block `b` was allocated by this transaction (and perhaps freed again).
    #[inline]
    pub(crate) fn own_fresh(&self, b: Block) -> bool {
        self.index_of(b.payload())
            .is_some_and(|i| self.list[i].kind.is_fresh())
    }

    /// Whether the commit has nothing to publish: every entry was allocated and freed
    /// again (or there is none; a read-only transaction).
    #[inline]
    pub(crate) fn publishes_nothing(&self) -> bool {
        self.list
            .iter()
            .all(|w| matches!(w.kind, WriteKind::FreshFreed(_)))
    }
}

impl<V: Payload, E, X> WriteSet<V, E, X> {
    /// Encode the transaction's redo record into `record`, in write-set order: each
    /// written or allocated object whole (`ALLOC` before the `RANGE` of a fresh block),
    /// `FREE` for each freed one; blocks allocated and freed again leave nothing.
    pub(crate) fn build_record(&self, record: &mut RecordBuilder) {
        record.clear();
        for w in &self.list {
            match w.kind {
                WriteKind::Freed(b) => {
                    record.free(b);
                    continue;
                }
                WriteKind::FreshFreed(_) => continue,
                WriteKind::Fresh(b) => record.alloc(b),
                WriteKind::Written => {}
            }
            // SAFETY: written and fresh objects have a private copy of `len` bytes.
            let data = unsafe { std::slice::from_raw_parts(V::data(w.copy), w.len) };
            record.range(w.off, data);
        }
    }
}
