//! A block of the heap (header word and payload) and its one-word packed form.

use super::classes::{class_for, CLASSES, HEADER, MAX_SMALL, NCLASSES};
use crate::heap::layout::SLAB_SIZE;

/// [`Block::pack`]'s size code of a large run (above every class index).
const PACK_LARGE: u64 = 63;
const _: () = assert!((NCLASSES as u64) < PACK_LARGE);

/// A block of the heap: header word followed by payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct Block {
    /// Offset of the header word.
    pub offset: u64,
    /// Size of the block in bytes, header included.
    pub size: u64,
}

impl Block {
    /// Offset of the payload (what a `PPtr` holds).
    pub(crate) fn payload(&self) -> u64 {
        self.offset + HEADER as u64
    }
    /// Bytes available for the payload.
    pub(crate) fn payload_len(&self) -> usize {
        self.size as usize - HEADER
    }
    /// True for a block of a small class (a large block is a run of whole slabs, all
    /// bigger than the largest class). A small slab keeps its class for the whole
    /// run, so the word at a small block's header position stays its header word.
    #[inline]
    pub(crate) fn is_small(&self) -> bool {
        self.size <= MAX_SMALL as u64
    }

    /// The block in the 62 low bits of one word (logs that name many blocks, such as
    /// timestone's operation records), or `None` if it has no such form (a size that
    /// is neither a class size nor whole slabs, or an offset or run too large):
    ///
    /// ```text
    /// bits 0..6   size code: 0..=35 the small class of that index, 63 a large run
    /// small:      bits 6..62  offset / 16   (block starts are 16-byte aligned)
    /// large:      bits 6..46  offset / 16,  bits 46..62 the run's slabs (1..65535)
    /// ```
    /// Unambiguous: the code alone tells small from large, a class index gives
    /// exactly one size, and offsets are multiples of 16, stored exactly; every
    /// other code is refused by [`Block::unpack`]. Bits 62 and 63 stay clear for the
    /// caller.
    pub(crate) fn pack(&self) -> Option<u64> {
        if !self.offset.is_multiple_of(16) {
            return None;
        }
        let off16 = self.offset >> 4;
        match usize::try_from(self.size).ok().and_then(class_for) {
            Some(c) if CLASSES[c].size as u64 == self.size => {
                (off16 < 1 << 56).then_some(off16 << 6 | c as u64)
            }
            _ => {
                let n = self.size / SLAB_SIZE as u64;
                let whole = self.size.is_multiple_of(SLAB_SIZE as u64);
                (whole && (1..1 << 16).contains(&n) && off16 < 1 << 40)
                    .then_some(n << 46 | off16 << 6 | PACK_LARGE)
            }
        }
    }

    /// The block [`Block::pack`] packed into `w` (bits 62 and 63 ignored); `Err` names
    /// what is wrong with a word that no block packs to.
    pub(crate) fn unpack(w: u64) -> std::result::Result<Block, String> {
        let w = w & ((1 << 62) - 1);
        let code = w & 63;
        if code == PACK_LARGE {
            let n = w >> 46;
            let offset = ((w >> 6) & ((1 << 40) - 1)) << 4;
            if n == 0 {
                return Err(format!("packed block {w:#x}: a large run of 0 slabs"));
            }
            return Ok(Block {
                offset,
                size: n * SLAB_SIZE as u64,
            });
        }
        match CLASSES.get(code as usize) {
            Some(cl) => Ok(Block {
                offset: (w >> 6) << 4,
                size: cl.size as u64,
            }),
            None => Err(format!("packed block {w:#x}: no size class {code}")),
        }
    }
}
