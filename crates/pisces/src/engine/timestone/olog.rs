//! Timestone's operation log (OLog) format: the compact framing of its records and the
//! operation records' codec.
//!
//! # Compact framing
//! The OLog's records are a few dozen bytes each, so [`Compact`] frames them with a
//! 16-byte header instead of the kit's standard 32 bytes (the ring, wrap markers and
//! parser are the kit's redo log, [`crate::engine::kit::log::redo_log`]):
//!
//! ```text
//! word 0: crc32c (bits 0..32) | seq, low 16 bits (bits 32..48) | tag (bits 48..64)
//! word 1: kind (bits 0..2) | len / 8 (bits 2..16) | persistTS (bits 16..64)
//! [word 2: len in bytes, only when len / 8 does not fit in 14 bits (field = 0x3FFF)]
//! ```
//! The CRC32C covers the sequence number's low 32 bits (4 bytes, as if stored), the
//! header from byte 4 (sequence bits, tag, word 1, word 2) and the entries. The
//! header stores only 16 bits of the sequence number; the parser knows the other 16
//! (the tail word holds the low 32 bits of the first one, and the chain counts on), and
//! the checksum binds them: a record left from an earlier lap whose 16 stored bits
//! happen to match the expected number fails its checksum, as does any record out of
//! sequence modulo 2^32 (the bound the standard framing's low-32-bit tail word gives
//! too). The damage scan takes a record whose 16 bits are 1 to 2^15 − 1 ahead of the
//! expected number as that later number and believes it only if the checksum agrees.
//! There is no magic: the kind field (zero in zeroed memory) and the checksum decide
//! validity; persistTS must be below 2^48 ([`COMPACT_MAX_TS`]). Kind 3 (the kit's
//! `TAGGED`) is an operation record whose 16-bit tag describes its entries
//! ([`op_record`]); other records carry tag 0. Everything else — the ring, wrap
//! markers, the chain the parser follows, torn-tail and damage detection — is the
//! same as for standard records.
//!
//! # Operation records
//! A registered operation with its allocation script, in as few bytes as possible
//! (timestone's OLog writes one per commit):
//! ```text
//! header (16 B, kind 3): tag = operation index (bits 0..8) | padding bytes after
//!         the arguments (bits 8..11) | number of block words (bits 11..16)
//! entries: the argument bytes, zero-padded to 8 | block words, in order:
//!          bit 63 clear: one block, bit 62 = free (else alloc), bits 0..62 =
//!                        `Block::pack`
//!          bit 63 set:   a run, after a word allocating a small block b: the low
//!                        bits n (1..=4096) stand for n more allocations, of the
//!                        blocks of b's class at b + size, b + 2 size, … b + n size
//! ```
//! When it is shorter, the argument section is *packed* instead (bit 7 of the index
//! field set, so indices are 0..=127): the arguments' length (2 bytes), a mask of one
//! bit per argument byte (set: nonzero) and the nonzero bytes, zero-padded to 8. A
//! TPC-C new-order's 144-byte input (15 order lines of item number and quantity, up to
//! 10 used; small integers in 4-byte fields) takes about 64 bytes. A packed section
//! whose length, mask and bytes disagree, with mask bits past the length or a zero
//! among its bytes, makes the record malformed. Arguments with few zero bytes (a hash
//! update's key and map handle) stay as they are.
//!
//! 16 bytes of header plus 16 argument bytes is a 32-byte record; each allocation adds
//! 8, except that allocations of consecutive blocks of one class (a thread's
//! allocator cache hands blocks out in address order) take 16 bytes per run: a TPC-C
//! new-order's 10 order lines take 16 bytes, not 80. The operation index names the
//! operation in a table its engine keeps (the 32-bit ids themselves do not fit the
//! header). A record that does not fit this form (an index above 127, more than 31
//! block words, a block `Block::pack` cannot pack) is written with kind TX and the
//! general entries (the kit's `OP`, `ALLOC`, `FREE`) instead. A run word that follows
//! no small allocation, or names 0 or more than 4096 blocks, makes the record
//! malformed; the blocks it stands for are checked like any logged block by the
//! recovery that uses them.

use crate::engine::kit::log::crc::crc32c_of;
use crate::engine::kit::log::redo_log::{
    block_entry, Entry, Framing, HeaderBytes, RawHeader, RecordBuilder, BLOCK_FREE, HEADER_LEN,
};
use crate::heap::alloc::Block;
use crate::heap::layout::Layout;
use crate::heap::Heap;
use crate::{Error, Result};

crate::mutation::point! {
    /// An operation record's block words name the size class after the block's own (an
    /// encoding error of the compact operation record).
    pub(crate) static OP_BLOCK_CODE = "op-block-code";
    /// An operation record's run word counts one block fewer than the consecutive
    /// allocations it stands for.
    pub(crate) static OP_BLOCK_RUN = "op-block-run";
    /// Packing an operation record's arguments takes bytes equal to 1 for zero bytes
    /// (they are re-executed as 0).
    pub(crate) static ARGS_PACKING = "args-packing";
}

#[cfg(test)]
mod tests;

/// How OLog records are framed: the compact 16-byte header.
pub(super) const OLOG_FRAMING: Compact = Compact;

/// Bytes of one thread's OLog area (it starts at `Layout::log_offset(slot)` and spans
/// the slot's log regions, which are contiguous).
pub(super) fn olog_len(l: &Layout) -> usize {
    l.logs_per_thread * l.log_bytes_per_thread
}

/// The header's length field value meaning "length in word 2".
const COMPACT_LONG: u64 = 0x3FFF;
/// Header bytes of a record that is not long.
pub(super) const COMPACT_HEADER_LEN: usize = 16;
/// The largest persistTS a header holds.
pub(super) const COMPACT_MAX_TS: u64 = (1 << 48) - 1;
/// A block word with bit 63 set stands for the next `n` blocks (`n` = its low bits,
/// 1..=[`RUN_MAX`]) of the small class of the allocation before it, each allocated,
/// at that block's offset + 1, 2, … `n` times its size.
const BLOCK_RUN: u64 = 1 << 63;
/// Most blocks one run word stands for.
const RUN_MAX: usize = 4096;

/// The compact framing (module docs): a 16-byte header (24 bytes for records of
/// 128 KiB and more) holding 16 bits of the sequence number.
#[derive(Clone, Copy, Debug)]
pub(super) struct Compact;

impl Framing for Compact {
    const FULL_SEQ: bool = false;
    const MIN_HEADER: usize = COMPACT_HEADER_LEN;
    const TAGGED: bool = true;

    #[inline]
    fn header_len(self, len: usize) -> usize {
        if (len / 8) as u64 >= COMPACT_LONG {
            COMPACT_HEADER_LEN + 8
        } else {
            COMPACT_HEADER_LEN
        }
    }

    /// The kind field names a record (zeroed memory names none).
    #[inline]
    fn candidate(ring: &[u8], pos: usize) -> bool {
        (u64::from_le_bytes(ring[pos + 8..pos + 16].try_into().unwrap()) & 3) != 0
    }

    fn read_header(heap: &Heap, ring: usize, pos: usize, room: usize) -> Option<RawHeader> {
        if room < COMPACT_HEADER_LEN {
            return None;
        }
        let mut bytes = [0u8; HEADER_LEN];
        let u64at = |h: &[u8], i: usize| u64::from_le_bytes(h[i..i + 8].try_into().unwrap());
        heap.read_bytes(ring + pos, &mut bytes[..COMPACT_HEADER_LEN]);
        let (w0, w1) = (u64at(&bytes, 0), u64at(&bytes, 8));
        let kind = (w1 & 3) as u32;
        if kind == 0 {
            return None;
        }
        let words = (w1 >> 2) & COMPACT_LONG;
        let (len, hlen) = if words == COMPACT_LONG {
            if room < COMPACT_HEADER_LEN + 8 {
                return None;
            }
            heap.read_bytes(
                ring + pos + COMPACT_HEADER_LEN,
                &mut bytes[COMPACT_HEADER_LEN..COMPACT_HEADER_LEN + 8],
            );
            let len = usize::try_from(u64at(&bytes, 16)).unwrap_or(usize::MAX);
            (len, COMPACT_HEADER_LEN + 8)
        } else {
            (words as usize * 8, COMPACT_HEADER_LEN)
        };
        Some(RawHeader {
            kind,
            unfenced: 0,
            len,
            crc: w0 as u32,
            seq: (w0 >> 32) & 0xFFFF,
            tag: (w0 >> 48) as u16,
            pts: w1 >> 16,
            hlen,
            bytes,
        })
    }

    /// Only the low 32 bits of `seq` count.
    #[inline]
    fn checksum(h: &RawHeader, seq: u64, entries: &[u8]) -> u32 {
        compact_checksum(seq, &h.bytes[4..h.hlen], entries)
    }

    fn encode(self, kind: u32, tag: u16, seq: u64, persist_ts: u64, entries: &[u8]) -> HeaderBytes {
        debug_assert!(
            persist_ts <= COMPACT_MAX_TS,
            "persistTS {persist_ts} above 2^48"
        );
        let len = entries.len();
        let hlen = self.header_len(len);
        let words = if hlen > COMPACT_HEADER_LEN {
            COMPACT_LONG
        } else {
            (len / 8) as u64
        };
        let w1 = u64::from(kind) | words << 2 | (persist_ts & COMPACT_MAX_TS) << 16;
        let mut h = [0u8; HEADER_LEN];
        h[4..6].copy_from_slice(&(seq as u16).to_le_bytes());
        h[6..8].copy_from_slice(&tag.to_le_bytes());
        h[8..16].copy_from_slice(&w1.to_le_bytes());
        if hlen > COMPACT_HEADER_LEN {
            h[16..24].copy_from_slice(&(len as u64).to_le_bytes());
        }
        let crc = compact_checksum(seq, &h[4..hlen], entries);
        h[0..4].copy_from_slice(&crc.to_le_bytes());
        (h, hlen)
    }

    /// The 16 stored bits against the expected number's.
    #[inline]
    fn in_sequence(stored: u64, want: u64, _full: bool) -> bool {
        stored as u16 == want as u16
    }

    /// 16 stored bits: taken as the number within 2^15 of the expected one; the
    /// checksum, over the low 32 bits, decides whether that is right.
    #[inline]
    fn distance(stored: u64, expected: u64, _full: bool) -> (i64, u64) {
        let d = i64::from((stored as u16).wrapping_sub(expected as u16) as i16);
        (
            d,
            u64::from((expected as u32).wrapping_add(d as i32 as u32)),
        )
    }
}

/// CRC32C over the low 32 bits of `seq`, the header from its byte 4 and the entries.
fn compact_checksum(seq: u64, header_rest: &[u8], entries: &[u8]) -> u32 {
    // One pass over [seq low 32 bits | header from byte 4] and the entries.
    let mut head = [0u8; 4 + HEADER_LEN - 4];
    head[..4].copy_from_slice(&(seq as u32).to_le_bytes());
    head[4..4 + header_rest.len()].copy_from_slice(header_rest);
    crc32c_of(&head[..4 + header_rest.len()], entries)
}

/// Start a new record in `record` holding an operation record's entries (module
/// docs): the operation's `args` and its `blocks` (`true`: allocated, `false`:
/// freed), for operation index `index` of the engine's table. Returns the header tag
/// to append it with (`LogWriter::append_tagged`), or `None` (and leaves the
/// builder empty) when the record has no such form.
pub(super) fn op_record(
    record: &mut RecordBuilder,
    index: u8,
    args: &[u8],
    blocks: &[(bool, Block)],
) -> Option<u16> {
    let buf = record.bytes_mut();
    buf.clear();
    if index >= OP_ARGS_PACKED || args.len() > u16::MAX as usize {
        return None;
    }
    // The arguments as they are, or without their zero bytes when that is shorter.
    let raw_len = args.len().next_multiple_of(8);
    let packed = pack_args(args);
    let (index, section) = if packed.len().next_multiple_of(8) < raw_len {
        (index | OP_ARGS_PACKED, &packed[..])
    } else {
        (index, args)
    };
    let pad = section.len().next_multiple_of(8) - section.len();
    buf.extend_from_slice(section);
    buf.extend(std::iter::repeat_n(0u8, pad));
    let mut words = 0u16;
    let mut i = 0;
    while i < blocks.len() {
        let (alloc, b) = blocks[i];
        let Some(mut w) = b.pack() else {
            buf.clear();
            return None;
        };
        if crate::mutation::active!(OP_BLOCK_CODE) {
            // Mutation: the size code names the next class up.
            w += 1;
        }
        let w = if alloc { w } else { w | BLOCK_FREE };
        buf.extend_from_slice(&w.to_le_bytes());
        words += 1;
        // A run: the allocations right after it of the next blocks of its class.
        let mut run = 0;
        if alloc && b.is_small() {
            while i + 1 + run < blocks.len()
                && run < RUN_MAX
                && blocks[i + 1 + run]
                    == (
                        true,
                        Block {
                            offset: b.offset + (run as u64 + 1) * b.size,
                            size: b.size,
                        },
                    )
            {
                run += 1;
            }
        }
        if run > 0 {
            let logged = if crate::mutation::active!(OP_BLOCK_RUN) {
                // Mutation: the run word counts one block fewer than it stands for.
                run - 1
            } else {
                run
            };
            buf.extend_from_slice(&(BLOCK_RUN | logged as u64).to_le_bytes());
            words += 1;
        }
        i += 1 + run;
        if words > 31 {
            buf.clear();
            return None;
        }
    }
    Some(u16::from(index) | (pad as u16) << 8 | words << 11)
}

/// Operation records: bit 7 of the operation index field says the arguments are
/// packed ([`pack_args`]); indices are 0..=127.
pub(super) const OP_ARGS_PACKED: u8 = 0x80;

/// The packed form of operation arguments (module docs): their length (2 bytes,
/// little-endian), a mask with one bit per argument byte (set: nonzero), then the
/// nonzero bytes in order.
fn pack_args(args: &[u8]) -> Vec<u8> {
    let nonzero = |b: u8| {
        if crate::mutation::active!(ARGS_PACKING) {
            // Mutation: bytes equal to 1 are taken for zero bytes.
            b > 1
        } else {
            b != 0
        }
    };
    let mut out = Vec::with_capacity(2 + args.len().div_ceil(8) + args.len());
    out.extend_from_slice(&(args.len() as u16).to_le_bytes());
    for chunk in args.chunks(8) {
        let mut m = 0u8;
        for (j, &b) in chunk.iter().enumerate() {
            if nonzero(b) {
                m |= 1 << j;
            }
        }
        out.push(m);
    }
    out.extend(args.iter().copied().filter(|&b| nonzero(b)));
    out
}

/// The arguments of a packed argument section `p` (padding removed); `Err` names
/// what is malformed: a length that does not match the mask and bytes, mask bits past
/// the length, or a listed byte that is zero (each form has one encoding).
fn unpack_args(p: &[u8]) -> std::result::Result<Vec<u8>, String> {
    let (Some(&l0), Some(&l1)) = (p.first(), p.get(1)) else {
        return Err(format!("packed arguments of {} bytes", p.len()));
    };
    let len = usize::from(u16::from_le_bytes([l0, l1]));
    let masks = len.div_ceil(8);
    let Some(mask) = p.get(2..2 + masks) else {
        return Err(format!(
            "{len} packed argument bytes need a {masks}-byte mask"
        ));
    };
    if len % 8 != 0 && mask[masks - 1] >> (len % 8) != 0 {
        return Err("mask bits past the arguments".into());
    }
    let data = &p[2 + masks..];
    let n: usize = mask.iter().map(|m| m.count_ones() as usize).sum();
    if data.len() != n || data.contains(&0) {
        return Err(format!(
            "{} packed bytes for {n} mask bits, or a zero among them",
            data.len()
        ));
    }
    let mut args = vec![0u8; len];
    let mut next = data.iter();
    for (i, a) in args.iter_mut().enumerate() {
        if mask[i / 8] & (1 << (i % 8)) != 0 {
            *a = *next.next().expect("counted above");
        }
    }
    Ok(args)
}

/// An operation record's layout from its tag and entries: (argument padding, block
/// words, argument bytes with their padding), checked against the entries' length and
/// with the padding zero. `Err` names what is malformed.
fn op_record_layout(tag: u16, bytes: &[u8]) -> Result<(usize, usize, usize)> {
    let pad = usize::from(tag >> 8 & 7);
    let nblocks = usize::from(tag >> 11);
    let bad = |m: String| Err(Error::corrupt(format!("operation record: {m}")));
    let Some(padded) = bytes.len().checked_sub(8 * nblocks) else {
        return bad(format!(
            "{nblocks} block words in {} bytes of entries",
            bytes.len()
        ));
    };
    if !padded.is_multiple_of(8) || pad > padded {
        return bad(format!("{pad} padding bytes in {padded} argument bytes"));
    }
    if bytes[padded - pad..padded].iter().any(|&b| b != 0) {
        return bad("nonzero padding after the arguments".into());
    }
    Ok((pad, nblocks, padded))
}

/// An operation record whose arguments are packed ([`OP_ARGS_PACKED`]), in the form
/// with its arguments as they are: `Ok(None)` if they are not packed, else the tag and
/// entries to decode with [`decode_op_record`]. `Err` names what is malformed.
pub(super) fn unpack_op_record(tag: u16, bytes: &[u8]) -> Result<Option<(u16, Vec<u8>)>> {
    if tag as u8 & OP_ARGS_PACKED == 0 {
        return Ok(None);
    }
    let (pad, nblocks, padded) = op_record_layout(tag, bytes)?;
    let bad = |m: String| Err(Error::corrupt(format!("operation record: {m}")));
    let args = match unpack_args(&bytes[..padded - pad]) {
        Ok(a) => a,
        Err(m) => return bad(m),
    };
    let raw_pad = args.len().next_multiple_of(8) - args.len();
    let mut out = args;
    out.extend(std::iter::repeat_n(0u8, raw_pad));
    out.extend_from_slice(&bytes[padded..]);
    let raw_tag =
        u16::from(tag as u8 & !OP_ARGS_PACKED) | (raw_pad as u16) << 8 | (nblocks as u16) << 11;
    Ok(Some((raw_tag, out)))
}

/// An operation record's contents, decoded from its tag and entries (module docs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct OpRecord<'a> {
    /// Index of the operation in its engine's table.
    pub index: u8,
    /// The argument bytes.
    pub args: &'a [u8],
    /// The blocks, in order: `Entry::Alloc` or `Entry::Free`.
    pub blocks: Vec<Entry<'a>>,
}

/// Decode an operation record with header tag `tag`; `Err` names what is malformed.
pub(super) fn decode_op_record(tag: u16, bytes: &[u8]) -> Result<OpRecord<'_>> {
    let index = tag as u8;
    if index & OP_ARGS_PACKED != 0 {
        return Err(Error::corrupt(
            "operation record: packed arguments (unpack_op_record first)",
        ));
    }
    let (pad, nblocks, padded) = op_record_layout(tag, bytes)?;
    let bad = |m: String| Err(Error::corrupt(format!("operation record: {m}")));
    if pad > 0 && padded == 0 {
        return bad(format!("{pad} padding bytes in {padded} argument bytes"));
    }
    let args = &bytes[..padded - pad];
    let mut blocks = Vec::with_capacity(nblocks);
    // The word before a run word must be a small allocation (not a run itself).
    let mut run_base: Option<Block> = None;
    for w in bytes[padded..].chunks_exact(8) {
        let w = u64::from_le_bytes(w.try_into().unwrap());
        if w & BLOCK_RUN != 0 {
            let n = w & !BLOCK_RUN;
            let Some(b) = run_base.take() else {
                return bad(format!(
                    "run word {w:#x} does not follow a small allocation"
                ));
            };
            if n == 0 || n > RUN_MAX as u64 {
                return bad(format!("run word {w:#x} names {n} blocks"));
            }
            for k in 1..=n {
                blocks.push(Entry::Alloc(Block {
                    offset: b.offset + k * b.size,
                    size: b.size,
                }));
            }
            continue;
        }
        match block_entry(w) {
            Ok(e) => {
                run_base = match e {
                    Entry::Alloc(b) if b.is_small() => Some(b),
                    _ => None,
                };
                blocks.push(e);
            }
            Err(e) => return bad(e.to_string()),
        }
    }
    Ok(OpRecord {
        index,
        args,
        blocks,
    })
}
