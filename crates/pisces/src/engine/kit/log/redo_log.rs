//! Per-thread redo logs: record format, ring buffer, and the parser recovery uses.
//!
//! Each thread slot owns one log area of the pool:
//!
//! ```text
//! +0   tail word: (tail offset in ring: u32) << 32 | (low 32 bits of tail seq)
//! +64  ring of records, each 8-byte aligned:
//!      header (32 B): magic u32 | kind u32 | len u32 | crc32c u32 | seq u64 | persistTS u64
//!      entries (len bytes)
//! ```
//!
//! A record is valid when its magic, length and CRC32C (over the header without the crc
//! field, plus the entries) check out. The checksum is what lets the persist stage use
//! one fence instead of the paper's two (lines 37-41): a record whose bytes did not all
//! reach persistence fails its checksum and is ignored, exactly like a record whose
//! persistTS did not.
//!
//! Records are appended in sequence-number order. Recovery parses from the persisted
//! tail, following consecutive sequence numbers, and stops at the first record that is
//! invalid or out of sequence: a thread writes record n+1 only after record n's fence, so
//! nothing valid can follow an invalid record. Old records from earlier laps of the ring
//! have smaller sequence numbers and so end the chain. Conversely, a valid record with a
//! *later* sequence number anywhere in the ring means the stop was not a torn tail but
//! damage; the parser reports it ([`ParsedLog::damage`]) and recovery refuses the pool.
//! (Damage to the newest record itself cannot be told from a torn tail.) [`walk`] is
//! the parser: it hands each valid record to its caller in place, borrowed from the
//! mapping (recovery decodes and replays records where they are, with no copy);
//! [`parse`] collects copies of them. The damage look goes from the stop to the first
//! valid record and from offset 0 to the first valid record (where later records
//! would be); it reads a record or two in the common cases.
//!
//! When a record does not fit before the end of the ring, a `WRAP` marker (a header with
//! no entries, consuming a sequence number) is written at the head and the record goes
//! to offset 0. If fewer than 32 bytes remain, both sides wrap without a marker.
//!
//! # Compact framing
//! A log opened with [`Framing::Compact`] (timestone's OLog, whose records are a few
//! dozen bytes each) frames records with a 16-byte header instead:
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
//! validity; persistTS must be below 2^48. Kind 3 (`OP`, compact framing only) is an
//! operation record whose 16-bit tag describes its entries ([`RecordBuilder::op_record`]);
//! other records carry tag 0. Everything else — the ring, wrap markers, the chain the
//! parser follows, torn-tail and damage detection — is the same as for standard
//! records.
//!
//! # Operation records (compact framing)
//! A registered operation with its allocation script, in as few bytes as possible
//! (timestone's OLog writes one per commit):
//! ```text
//! header (16 B, kind OP): tag = operation index (bits 0..8) | padding bytes after
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
//! general entries below instead. A run word that follows no small allocation, or
//! names 0 or more than 4096 blocks, makes the record malformed; the blocks it
//! stands for are checked like any logged block by the recovery that uses them.
//!
//! # Line-aligned records
//! A log opened with [`LogWriter::line_aligned`] (standard framing) starts every
//! record on a 64-byte boundary of the ring (the ring itself starts on one, as log
//! areas are whole pages): its records carry kind `TX_LINE` instead of `TX`, which
//! tells the parser that the next record starts at the next multiple of 64 after this
//! one (or at offset 0 if that is the ring's end). The bytes skipped are zeroed.
//! A record then never shares its first cache line with the record before it, which
//! was flushed and fenced already: it flushes `ceil(len / 64)` lines instead of one
//! more in most cases, and on a medium with NVM latency each flushed line costs it.
//! The price is ring space (up to 56 bytes per record), so the ring is recycled a
//! little more often. Its lines being its own, such a record is written whole lines
//! at a time with [`Heap::write_lines`], which on DRAM and DAX media stores them with
//! non-temporal stores instead of stores and `clwb` (no read for ownership, no
//! write-back; the same fence completes them): the persist stage's fence, the largest
//! part of a small update's commit, gets shorter.
//!
//! Entries: word 0 = `kind << 56 | offset`, word 1 = value / length / block size.
//! `WORD` (16 B) writes one 8-byte value; `RANGE` (16 B + data rounded up to 8) writes
//! bytes; `ALLOC` / `FREE` name a heap block (offset of its header word, block size);
//! `OP` (8 B + data rounded up to 8) names a registered operation (word 0 holds the
//! argument length in bits 32..56 and the id in bits 0..32) and its argument bytes, for engines that log operations (timestone's OLog);
//! the redo-log engines' recovery refuses it. `BLOCKS` (8 B + 8 per block; word 0
//! holds the count) is a run of allocator changes packed one word each as in
//! operation records ([`RecordBuilder::blocks`], timestone's CLog); it decodes as the
//! ALLOC and FREE entries it stands for.

use crate::engine::kit::log::crc::crc32c_of;
use crate::heap::alloc::Block;
use crate::heap::Heap;
use crate::medium::counters;
use crate::{Error, Result};
use std::collections::VecDeque;

/// Record header size.
pub const HEADER_LEN: usize = 32;
/// Offset of the ring inside a log area.
pub const RING_OFFSET: usize = 64;
const MAGIC: u32 = 0x5052_4543; // "PREC"
const KIND_TX: u32 = 1;
const KIND_WRAP: u32 = 2;
/// Compact framing: an operation record (module docs).
const KIND_OP: u32 = 3;
/// Standard framing: a transaction record after which the next record starts at the
/// next multiple of 64 bytes of the ring (module docs, "Line-aligned records").
const KIND_TX_LINE: u32 = 4;
/// The alignment of line-aligned records (a cache line).
const LINE: usize = 64;
/// Operation records: the free flag of a block word.
const BLOCK_FREE: u64 = 1 << 62;
/// Operation records: a word with bit 63 set stands for the next `n` blocks
/// (`n` = its low bits, 1..=[`RUN_MAX`]) of the small class of the allocation before
/// it, each allocated, at that block's offset + 1, 2, … `n` times its size.
const BLOCK_RUN: u64 = 1 << 63;
/// Most blocks one run word stands for.
const RUN_MAX: usize = 4096;
/// Compact framing: the header's length field value meaning "length in word 2".
const COMPACT_LONG: u64 = 0x3FFF;
/// Compact framing: header bytes of a record that is not long.
pub const COMPACT_HEADER_LEN: usize = 16;
/// Compact framing: the largest persistTS a header holds.
pub const COMPACT_MAX_TS: u64 = (1 << 48) - 1;

/// How a log frames its records (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Framing {
    /// The 32-byte header with magic and full sequence number.
    Standard,
    /// The 16-byte header (24 bytes for records of 128 KiB and more).
    Compact,
}

impl Framing {
    /// Header bytes of a record with `len` bytes of entries.
    pub fn header_len(self, len: usize) -> usize {
        match self {
            Framing::Standard => HEADER_LEN,
            Framing::Compact if (len / 8) as u64 >= COMPACT_LONG => COMPACT_HEADER_LEN + 8,
            Framing::Compact => COMPACT_HEADER_LEN,
        }
    }

    /// The smallest header: a ring position with less room left is skipped (wrap).
    fn min_header(self) -> usize {
        match self {
            Framing::Standard => HEADER_LEN,
            Framing::Compact => COMPACT_HEADER_LEN,
        }
    }
}

const E_WORD: u64 = 1;
const E_RANGE: u64 = 2;
const E_ALLOC: u64 = 3;
const E_FREE: u64 = 4;
const E_OP: u64 = 5;
const E_BLOCKS: u64 = 6;
const OFF_MASK: u64 = (1 << 56) - 1;

/// One decoded log entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Entry<'a> {
    /// Write `value` at pool offset `off` (8-aligned).
    Word {
        /// Target offset.
        off: u64,
        /// Value.
        value: u64,
    },
    /// Write `data` at pool offset `off`.
    Range {
        /// Target offset.
        off: u64,
        /// Bytes.
        data: &'a [u8],
    },
    /// Mark `block` allocated.
    Alloc(Block),
    /// Mark `block` free.
    Free(Block),
    /// Re-execute registered operation `id` with argument bytes `data`.
    Op {
        /// Operation id.
        id: u32,
        /// Argument bytes.
        data: &'a [u8],
    },
}

/// Builds the entries of one record in DRAM.
#[derive(Debug, Default)]
pub struct RecordBuilder {
    buf: Vec<u8>,
}

impl RecordBuilder {
    /// Start a new record.
    pub fn clear(&mut self) {
        self.buf.clear();
    }
    /// Bytes of entries so far.
    pub fn len(&self) -> usize {
        self.buf.len()
    }
    fn words(&mut self, a: u64, b: u64) {
        self.buf.extend_from_slice(&a.to_le_bytes());
        self.buf.extend_from_slice(&b.to_le_bytes());
    }
    /// Append a WORD entry.
    pub fn word(&mut self, off: u64, value: u64) {
        self.words(E_WORD << 56 | off, value);
    }
    /// Append a RANGE entry.
    pub fn range(&mut self, off: u64, data: &[u8]) {
        self.words(E_RANGE << 56 | off, data.len() as u64);
        self.buf.extend_from_slice(data);
        let pad = data.len().next_multiple_of(8) - data.len();
        self.buf.extend(std::iter::repeat_n(0u8, pad));
    }
    /// Append an OP entry.
    pub fn op(&mut self, id: u32, data: &[u8]) {
        assert!(
            data.len() < 1 << 24,
            "operation arguments of {} bytes",
            data.len()
        );
        let w0 = E_OP << 56 | (data.len() as u64) << 32 | u64::from(id);
        self.buf.extend_from_slice(&w0.to_le_bytes());
        self.buf.extend_from_slice(data);
        let pad = data.len().next_multiple_of(8) - data.len();
        self.buf.extend(std::iter::repeat_n(0u8, pad));
    }
    /// Append an ALLOC entry.
    pub fn alloc(&mut self, b: Block) {
        self.words(E_ALLOC << 56 | b.offset, b.size);
    }
    /// Append a FREE entry.
    pub fn free(&mut self, b: Block) {
        self.words(E_FREE << 56 | b.offset, b.size);
    }
    /// Append allocator changes (`true`: ALLOC, `false`: FREE) in 8 bytes each: one
    /// BLOCKS entry (word `count`, then one packed word per block, as in operation
    /// records) for those `Block::pack` can pack, ALLOC / FREE entries for the
    /// others. Decoded as the ALLOC and FREE entries they stand for, in order.
    pub fn blocks(&mut self, changes: &[(bool, Block)]) {
        let start = self.buf.len();
        self.buf.extend_from_slice(&(E_BLOCKS << 56).to_le_bytes());
        let mut n = 0u64;
        for (i, &(alloc, b)) in changes.iter().enumerate() {
            match b.pack() {
                Some(w) => {
                    let w = if alloc { w } else { w | BLOCK_FREE };
                    self.buf.extend_from_slice(&w.to_le_bytes());
                    n += 1;
                }
                None => {
                    // Ends this BLOCKS entry; the next pack starts another.
                    self.finish_blocks(start, n);
                    if alloc {
                        self.alloc(b);
                    } else {
                        self.free(b);
                    }
                    return self.blocks(&changes[i + 1..]);
                }
            }
        }
        self.finish_blocks(start, n);
    }
    /// Fill in the count of the BLOCKS entry at `start`, or drop it if empty.
    fn finish_blocks(&mut self, start: usize, n: u64) {
        if n == 0 {
            self.buf.truncate(start);
        } else {
            self.buf[start..start + 8].copy_from_slice(&(E_BLOCKS << 56 | n).to_le_bytes());
        }
    }
    /// The encoded entries.
    pub fn bytes(&self) -> &[u8] {
        &self.buf
    }

    /// Start a new record holding an operation record's entries (module docs): the
    /// operation's `args` and its `blocks` (`true`: allocated, `false`: freed), for
    /// operation index `index` of its engine's table. Returns the header tag to
    /// append it with ([`LogWriter::append_op`]), or `None` (and leaves the builder
    /// empty) when the record has no such form.
    pub fn op_record(&mut self, index: u8, args: &[u8], blocks: &[(bool, Block)]) -> Option<u16> {
        self.buf.clear();
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
        self.buf.extend_from_slice(section);
        self.buf.extend(std::iter::repeat_n(0u8, pad));
        let mut words = 0u16;
        let mut i = 0;
        while i < blocks.len() {
            let (alloc, b) = blocks[i];
            let Some(mut w) = b.pack() else {
                self.buf.clear();
                return None;
            };
            if crate::mutation::active(crate::mutation::Mutation::TsOpBlockCode) {
                // Mutation: the size code names the next class up.
                w += 1;
            }
            let w = if alloc { w } else { w | BLOCK_FREE };
            self.buf.extend_from_slice(&w.to_le_bytes());
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
                let logged = if crate::mutation::active(crate::mutation::Mutation::TsOpBlockRun) {
                    // Mutation: the run word counts one block fewer than it stands for.
                    run - 1
                } else {
                    run
                };
                self.buf
                    .extend_from_slice(&(BLOCK_RUN | logged as u64).to_le_bytes());
                words += 1;
            }
            i += 1 + run;
            if words > 31 {
                self.buf.clear();
                return None;
            }
        }
        Some(u16::from(index) | (pad as u16) << 8 | words << 11)
    }
}

/// Operation records: bit 7 of the operation index field says the arguments are
/// packed ([`pack_args`]); indices are 0..=127.
pub const OP_ARGS_PACKED: u8 = 0x80;

/// The packed form of operation arguments (module docs): their length (2 bytes,
/// little-endian), a mask with one bit per argument byte (set: nonzero), then the
/// nonzero bytes in order.
fn pack_args(args: &[u8]) -> Vec<u8> {
    let nonzero = |b: u8| {
        if crate::mutation::active(crate::mutation::Mutation::TsArgsPacking) {
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
    let bad = |m: String| Err(Error::Corrupt(format!("operation record: {m}")));
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
pub fn unpack_op_record(tag: u16, bytes: &[u8]) -> Result<Option<(u16, Vec<u8>)>> {
    if tag as u8 & OP_ARGS_PACKED == 0 {
        return Ok(None);
    }
    let (pad, nblocks, padded) = op_record_layout(tag, bytes)?;
    let bad = |m: String| Err(Error::Corrupt(format!("operation record: {m}")));
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
pub struct OpRecord<'a> {
    /// Index of the operation in its engine's table.
    pub index: u8,
    /// The argument bytes.
    pub args: &'a [u8],
    /// The blocks, in order: `Entry::Alloc` or `Entry::Free`.
    pub blocks: Vec<Entry<'a>>,
}

/// Decode an operation record with header tag `tag`; `Err` names what is malformed.
pub fn decode_op_record(tag: u16, bytes: &[u8]) -> Result<OpRecord<'_>> {
    let index = tag as u8;
    if index & OP_ARGS_PACKED != 0 {
        return Err(Error::Corrupt(
            "operation record: packed arguments (unpack_op_record first)".into(),
        ));
    }
    let (pad, nblocks, padded) = op_record_layout(tag, bytes)?;
    let bad = |m: String| Err(Error::Corrupt(format!("operation record: {m}")));
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

/// Decode the entries of a record; `Err` names the first malformed entry.
pub fn decode(bytes: &[u8]) -> Result<Vec<Entry<'_>>> {
    entries(bytes).collect()
}

/// The entries of a record one by one, without allocating (recovery decodes each
/// record in place, in the mapping); after an `Err` (the first malformed entry) the
/// iterator ends.
pub fn entries(bytes: &[u8]) -> Entries<'_> {
    Entries { bytes, blocks: &[] }
}

/// Iterator over the entries of a record ([`entries`]).
#[derive(Clone, Debug)]
pub struct Entries<'a> {
    bytes: &'a [u8],
    /// The packed block words of a BLOCKS entry not yet handed out.
    blocks: &'a [u8],
}

/// The ALLOC or FREE entry a packed block word (bit 62: free) stands for.
fn block_entry<'a>(w: u64) -> Result<Entry<'a>> {
    if w >> 63 != 0 {
        return Err(Error::Corrupt(format!("block word {w:#x} has bit 63 set")));
    }
    let b = Block::unpack(w).map_err(Error::Corrupt)?;
    Ok(if w & BLOCK_FREE != 0 {
        Entry::Free(b)
    } else {
        Entry::Alloc(b)
    })
}

impl<'a> Entries<'a> {
    fn next_entry(&mut self) -> Result<Entry<'a>> {
        if let Some((w, rest)) = self.blocks.split_first_chunk::<8>() {
            self.blocks = rest;
            return block_entry(u64::from_le_bytes(*w));
        }
        let bytes = self.bytes;
        if bytes.len() >= 8 && rd_word(bytes) >> 56 == E_BLOCKS {
            let n = (rd_word(bytes) & OFF_MASK) as usize;
            if n == 0 || n > (bytes.len() - 8) / 8 {
                return Err(Error::Corrupt(format!(
                    "log blocks entry of {n} blocks overruns its record"
                )));
            }
            self.blocks = &bytes[8..8 + 8 * n];
            self.bytes = &bytes[8 + 8 * n..];
            return self.next_entry();
        }
        let rd = |i: usize| u64::from_le_bytes(bytes[i * 8..i * 8 + 8].try_into().unwrap());
        if bytes.len() >= 8 && rd(0) >> 56 == E_OP {
            let w0 = rd(0);
            let len = ((w0 >> 32) & 0xFF_FFFF) as usize;
            let padded = len.next_multiple_of(8);
            if padded > bytes.len() - 8 {
                return Err(Error::Corrupt(format!(
                    "log operation entry of {len} bytes overruns its record"
                )));
            }
            self.bytes = &bytes[8 + padded..];
            return Ok(Entry::Op {
                id: w0 as u32,
                data: &bytes[8..8 + len],
            });
        }
        if bytes.len() < 16 {
            return Err(Error::Corrupt("truncated log entry".into()));
        }
        let (w0, w1) = (rd(0), rd(1));
        let off = w0 & OFF_MASK;
        let (e, used) = match w0 >> 56 {
            E_WORD => (Entry::Word { off, value: w1 }, 16),
            E_RANGE => {
                let len = usize::try_from(w1).unwrap_or(usize::MAX);
                let padded = len.checked_next_multiple_of(8).unwrap_or(usize::MAX);
                if padded > bytes.len() - 16 {
                    return Err(Error::Corrupt(format!(
                        "log range entry of {len} bytes overruns its record"
                    )));
                }
                let data = &bytes[16..16 + len];
                (Entry::Range { off, data }, 16 + padded)
            }
            E_ALLOC => (
                Entry::Alloc(Block {
                    offset: off,
                    size: w1,
                }),
                16,
            ),
            E_FREE => (
                Entry::Free(Block {
                    offset: off,
                    size: w1,
                }),
                16,
            ),
            k => return Err(Error::Corrupt(format!("unknown log entry kind {k}"))),
        };
        self.bytes = &bytes[used..];
        Ok(e)
    }
}

impl<'a> Iterator for Entries<'a> {
    type Item = Result<Entry<'a>>;
    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        if self.bytes.is_empty() && self.blocks.is_empty() {
            return None;
        }
        let e = self.next_entry();
        if e.is_err() {
            self.bytes = &[];
            self.blocks = &[];
        }
        Some(e)
    }
}

fn rd_word(bytes: &[u8]) -> u64 {
    u64::from_le_bytes(bytes[..8].try_into().unwrap())
}

fn checksum(kind: u32, len: u32, seq: u64, persist_ts: u64, entries: &[u8]) -> u32 {
    let mut h = [0u8; 28];
    h[0..4].copy_from_slice(&MAGIC.to_le_bytes());
    h[4..8].copy_from_slice(&kind.to_le_bytes());
    h[8..12].copy_from_slice(&len.to_le_bytes());
    h[12..20].copy_from_slice(&seq.to_le_bytes());
    h[20..28].copy_from_slice(&persist_ts.to_le_bytes());
    crc32c_of(&h, entries)
}

fn encode_header(
    kind: u32,
    len: u32,
    seq: u64,
    persist_ts: u64,
    entries: &[u8],
) -> [u8; HEADER_LEN] {
    let mut h = [0u8; HEADER_LEN];
    h[0..4].copy_from_slice(&MAGIC.to_le_bytes());
    h[4..8].copy_from_slice(&kind.to_le_bytes());
    h[8..12].copy_from_slice(&len.to_le_bytes());
    h[12..16].copy_from_slice(&checksum(kind, len, seq, persist_ts, entries).to_le_bytes());
    h[16..24].copy_from_slice(&seq.to_le_bytes());
    h[24..32].copy_from_slice(&persist_ts.to_le_bytes());
    h
}

/// A record header read from the ring, not yet checked against its entries.
struct RawHeader {
    kind: u32,
    len: usize,
    crc: u32,
    /// Full sequence number (standard) or its low 16 bits (compact).
    seq: u64,
    /// Compact: the header's tag (0 for standard records).
    tag: u16,
    pts: u64,
    /// Header bytes.
    hlen: usize,
    bytes: [u8; HEADER_LEN],
}

/// The header at ring position `pos` with `room` bytes left before the ring's end, if
/// it can be one (magic or kind, and it fits); its length field is not checked yet.
fn read_header(
    heap: &Heap,
    ring: usize,
    pos: usize,
    room: usize,
    framing: Framing,
) -> Option<RawHeader> {
    let mut bytes = [0u8; HEADER_LEN];
    let u32at = |h: &[u8], i: usize| u32::from_le_bytes(h[i..i + 4].try_into().unwrap());
    let u64at = |h: &[u8], i: usize| u64::from_le_bytes(h[i..i + 8].try_into().unwrap());
    match framing {
        Framing::Standard => {
            if room < HEADER_LEN {
                return None;
            }
            heap.read_bytes(ring + pos, &mut bytes);
            let (magic, kind) = (u32at(&bytes, 0), u32at(&bytes, 4));
            if magic != MAGIC || !matches!(kind, KIND_TX | KIND_WRAP | KIND_TX_LINE) {
                return None;
            }
            Some(RawHeader {
                kind,
                len: u32at(&bytes, 8) as usize,
                crc: u32at(&bytes, 12),
                seq: u64at(&bytes, 16),
                tag: 0,
                pts: u64at(&bytes, 24),
                hlen: HEADER_LEN,
                bytes,
            })
        }
        Framing::Compact => {
            if room < COMPACT_HEADER_LEN {
                return None;
            }
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
                len,
                crc: w0 as u32,
                seq: (w0 >> 32) & 0xFFFF,
                tag: (w0 >> 48) as u16,
                pts: w1 >> 16,
                hlen,
                bytes,
            })
        }
    }
}

/// The checksum a record with header `h` and `entries` must carry if it is the
/// record of sequence number `seq` (compact framing: only its low 32 bits count; the
/// standard header holds the whole number).
fn header_checksum(framing: Framing, h: &RawHeader, seq: u64, entries: &[u8]) -> u32 {
    match framing {
        Framing::Standard => checksum(h.kind, h.len as u32, h.seq, h.pts, entries),
        Framing::Compact => compact_checksum(seq, &h.bytes[4..h.hlen], entries),
    }
}

/// Compact framing: CRC32C over the low 32 bits of `seq`, the header from its byte 4
/// and the entries.
fn compact_checksum(seq: u64, header_rest: &[u8], entries: &[u8]) -> u32 {
    // One pass over [seq low 32 bits | header from byte 4] and the entries.
    let mut head = [0u8; 4 + HEADER_LEN - 4];
    head[..4].copy_from_slice(&(seq as u32).to_le_bytes());
    head[4..4 + header_rest.len()].copy_from_slice(header_rest);
    crc32c_of(&head[..4 + header_rest.len()], entries)
}

/// Encode a header in `framing`; returns the bytes and the header length.
fn encode_framed(
    framing: Framing,
    kind: u32,
    tag: u16,
    seq: u64,
    persist_ts: u64,
    entries: &[u8],
) -> ([u8; HEADER_LEN], usize) {
    match framing {
        Framing::Standard => (
            encode_header(kind, entries.len() as u32, seq, persist_ts, entries),
            HEADER_LEN,
        ),
        Framing::Compact => {
            debug_assert!(
                persist_ts <= COMPACT_MAX_TS,
                "persistTS {persist_ts} above 2^48"
            );
            let len = entries.len();
            let hlen = framing.header_len(len);
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
    }
}

fn checksum_ok(stored: u32, computed: u32) -> bool {
    stored == computed || crate::mutation::active(crate::mutation::Mutation::Checksum)
}

/// The most records (each at least a header and one entry word) a log area of
/// `area_len` bytes can hold at once: a bound for tables of one entry per record.
pub fn max_records(area_len: usize) -> usize {
    area_len.saturating_sub(RING_OFFSET) / (HEADER_LEN + 8)
}

/// Pack the tail word.
fn tail_word(tail: usize, seq: u64) -> u64 {
    (tail as u64) << 32 | (seq & 0xFFFF_FFFF)
}

/// A record found by the parser.
#[derive(Debug)]
pub struct ParsedRecord {
    /// Sequence number.
    pub seq: u64,
    /// Persist timestamp.
    pub persist_ts: u64,
    /// Entry bytes (copied out of the log).
    pub entries: Vec<u8>,
    /// An operation record's header tag (compact framing; `None`: general entries).
    pub op_tag: Option<u16>,
}

/// Result of parsing one slot's log.
#[derive(Debug)]
pub struct ParsedLog {
    /// Valid records in order.
    pub records: Vec<ParsedRecord>,
    /// Sequence number the next record should carry.
    pub next_seq: u64,
    /// Damage that is not a torn tail (see [`parse`]): what is wrong, for an
    /// `Error::Corrupt`. Recovery refuses the pool when it is set.
    pub damage: Option<String>,
}

/// Where the parser stopped: the ring offset and the sequence number it expected there
/// (`full`: the whole number is known; otherwise only its low 32 bits, from the tail
/// word).
struct Stop {
    pos: usize,
    seq: u64,
    full: bool,
}

/// Tell a torn tail from damage after the parser stopped at `stop`.
///
/// A thread writes record n+1 only after record n's fence, so at a crash only the last
/// record (with its wrap marker, which shares its fence) can be partly durable. A valid
/// record *later* in sequence than the one expected at the stop proves that the
/// expected record was once complete: the stop is damage, and the later records would
/// be lost with it. Records of earlier laps and runs carry smaller sequence numbers and
/// prove nothing. The one exception is a wrap: the marker (expected seq e, at the end
/// of the ring) and record e+1 at offset 0 are flushed together and fenced once, so
/// record e+1 alone at offset 0, too long to have fitted after the marker's position,
/// with nothing after it, is a torn tail too.
///
/// Where later records can be: a thread appends contiguously, so records e+1, e+2, ..
/// would follow the stop position p up to the end of the ring and go on from offset 0
/// (after a wrap marker, the bytes from the marker's header to the end of the ring are
/// not written and keep stale records). So the look goes forward from p to the first
/// valid record; one of an earlier lap there means the chain did not reach that far
/// (it would have overwritten it) or that the rest of the ring is a wrap marker's gap,
/// so the look then goes on from offset 0, again to the first valid record. A later
/// record found either way is damage. This reads a record or two in the common cases
/// (a clean log: the stop is at a stale record; a crash in a full ring) instead of the
/// whole ring; it finds damage unless every later record is damaged too, which no
/// scan could tell from a torn tail, or bytes inside a damaged record's entries happen
/// to form a valid record of an earlier lap (user data would have to carry a valid
/// header and checksum).
/// Bytes of ring [`damage_after`] rules out at once when no position in them can
/// start a header.
const SKIP_SPAN: usize = 64;

fn damage_after(
    heap: &Heap,
    ring: usize,
    cap: usize,
    stop: &Stop,
    framing: Framing,
) -> Option<String> {
    // How far a record's sequence number is from the expected one (positive: later),
    // and the number itself, from what its header stores.
    let distance = |stored: u64| -> (i64, u64) {
        match framing {
            // 16 stored bits: taken as the number within 2^15 of the expected one;
            // the checksum, over the low 32 bits, decides whether that is right.
            Framing::Compact => {
                let d = i64::from((stored as u16).wrapping_sub(stop.seq as u16) as i16);
                (
                    d,
                    u64::from((stop.seq as u32).wrapping_add(d as i32 as u32)),
                )
            }
            Framing::Standard if stop.full => (stored.wrapping_sub(stop.seq) as i64, stored),
            Framing::Standard => (
                i64::from((stored as u32).wrapping_sub(stop.seq as u32) as i32),
                stored,
            ),
        }
    };
    let ring_bytes = log_bytes(heap, ring, cap);
    // The first valid record starting in `from..to` (8-byte steps): (pos, record
    // length, sequence number, distance from the expected one).
    let first_valid = |from: usize, to: usize| -> Option<(usize, usize, u64, i64)> {
        let word = |i: usize| u64::from_le_bytes(ring_bytes[i..i + 8].try_into().unwrap());
        // A cheap look at the words in place rules out most positions before a
        // header is decoded: a standard header starts with the magic, a compact one's
        // kind field names a record (zeroed memory names none).
        let candidate = |pos: usize| match framing {
            Framing::Standard => word(pos) as u32 == MAGIC,
            Framing::Compact => (word(pos + 8) & 3) != 0,
        };
        let mut pos = from;
        while pos < to && pos + framing.min_header() <= cap {
            // Most of a ring past its end holds no header (zeroed or an old lap's
            // entries): rule out 8 positions at a time while none is a candidate
            // (the same positions the step below would rule out one by one).
            if pos + SKIP_SPAN <= to
                && pos + SKIP_SPAN + framing.min_header() <= cap
                && !(0..SKIP_SPAN).step_by(8).any(|d| candidate(pos + d))
            {
                pos += SKIP_SPAN;
                continue;
            }
            if candidate(pos) {
                if let Some(h) = read_header(heap, ring, pos, cap - pos, framing) {
                    if h.len % 8 == 0 && h.len <= cap - pos - h.hlen {
                        let entries = &ring_bytes[pos + h.hlen..pos + h.hlen + h.len];
                        let (d, seq) = distance(h.seq);
                        if header_checksum(framing, &h, seq, entries) == h.crc {
                            return Some((pos, h.hlen + h.len, seq, d));
                        }
                    }
                }
            }
            pos += 8;
        }
        None
    };
    let damage = |pos: usize, seq: u64| {
        Some(format!(
            "the record expected at ring offset {:#x} (sequence number {}{}) is damaged, but a later record follows (sequence number {}{seq} at ring offset {pos:#x}): not a torn tail",
            stop.pos,
            if stop.full { "" } else { "low 32 bits " },
            if stop.full { stop.seq } else { stop.seq & 0xFFFF_FFFF },
            if framing == Framing::Compact { "low 32 bits " } else { "" },
        ))
    };
    later_record_after_stop(stop.pos, cap, first_valid, damage)
}

/// The look of [`damage_after`] (its docs say where later records can be), for any
/// record format: `first_valid(from, to)` is the format's first valid record starting
/// in `from..to` as (position, length, sequence number, its distance from the one
/// expected at the stop: positive means later); `damage(pos, seq)` words the finding.
/// Shared with spht's log, whose records have their own header.
pub(crate) fn later_record_after_stop(
    stop_pos: usize,
    cap: usize,
    first_valid: impl Fn(usize, usize) -> Option<(usize, usize, u64, i64)>,
    damage: impl Fn(usize, u64) -> Option<String>,
) -> Option<String> {
    // Forward from the stop to the end of the ring: nothing later may be valid there.
    if let Some((pos, _, seq, d)) = first_valid(stop_pos, cap) {
        if d > 0 {
            return damage(pos, seq);
        }
    }
    // On from offset 0, where the chain would continue after a wrap.
    let (pos, len, seq, d) = first_valid(0, stop_pos)?;
    if d <= 0 {
        return None;
    }
    if pos == 0 && d == 1 && stop_pos > 0 && len > cap - stop_pos {
        // Record e+1 alone at offset 0 is the torn wrap's record, unless e+2 follows.
        return match first_valid(len, stop_pos) {
            Some((p2, _, s2, d2)) if d2 > 0 => damage(p2, s2),
            _ => None,
        };
    }
    damage(pos, seq)
}

/// Parse the log of one slot from its persisted tail (recovery, `pisces info`),
/// copying each record's entries out of the log.
pub fn parse(heap: &Heap, area_off: usize, area_len: usize) -> ParsedLog {
    parse_framed(heap, area_off, area_len, Framing::Standard)
}

/// [`parse`] for a log written with `framing`. Compact sequence numbers are known
/// modulo 2^32 only: the records and `next_seq` carry the tail word's low 32 bits
/// counted on (the writer compares them modulo 2^32 too).
pub fn parse_framed(heap: &Heap, area_off: usize, area_len: usize, framing: Framing) -> ParsedLog {
    let mut records = Vec::new();
    let end = walk_framed(heap, area_off, area_len, framing, |r| {
        records.push(ParsedRecord {
            seq: r.seq,
            persist_ts: r.persist_ts,
            entries: r.entries.to_vec(),
            op_tag: r.op_tag,
        })
    });
    ParsedLog {
        records,
        next_seq: end.next_seq,
        damage: end.damage,
    }
}

/// A valid record found by [`walk`], its entries borrowed from the pool's mapping.
#[derive(Debug, Clone, Copy)]
pub struct Record<'h> {
    /// Sequence number.
    pub seq: u64,
    /// Persist timestamp.
    pub persist_ts: u64,
    /// The entry bytes, in the log itself (no copy).
    pub entries: &'h [u8],
    /// An operation record's header tag (compact framing; `None`: general entries,
    /// [`entries`]; `Some`: [`decode_op_record`]).
    pub op_tag: Option<u16>,
}

/// Where [`walk`] ended.
#[derive(Debug)]
pub struct Walked {
    /// Sequence number the next record should carry.
    pub next_seq: u64,
    /// Damage that is not a torn tail.
    pub damage: Option<String>,
}

/// The bytes `off..off + len` of a log area, borrowed from the mapping.
///
/// The caller guarantees what every parser entry point requires: no thread appends to
/// or recycles this log while the borrow lives (recovery before any thread runs, or
/// inspection of a pool nobody runs).
fn log_bytes(heap: &Heap, off: usize, len: usize) -> &[u8] {
    assert!(heap.in_bounds(off, len), "log bytes outside the pool");
    // SAFETY: in bounds (asserted), and the mapping lives as long as `heap`; nobody
    // writes a log area while it is parsed (the contract above, the same one
    // `Heap::read_bytes` relies on), so the shared borrow aliases no write.
    unsafe { std::slice::from_raw_parts(heap.ptr(off), len) }
}

/// Parse the log of one slot from its persisted tail and hand each valid record, in
/// sequence order, to `each`, its entries borrowed from the mapping (no copy: recovery
/// decodes and replays them in place). Call only on a log no thread is writing
/// (recovery, inspection); the borrowed entries stay valid while the log is not
/// written (recovery replays into the heap, then resets only the tail word).
pub fn walk<'h>(
    heap: &'h Heap,
    area_off: usize,
    area_len: usize,
    each: impl FnMut(Record<'h>),
) -> Walked {
    walk_framed(heap, area_off, area_len, Framing::Standard, each)
}

/// [`walk`] for a log written with `framing` (see [`parse_framed`] for compact
/// sequence numbers).
pub fn walk_framed<'h>(
    heap: &'h Heap,
    area_off: usize,
    area_len: usize,
    framing: Framing,
    mut each: impl FnMut(Record<'h>),
) -> Walked {
    let cap = area_len - RING_OFFSET;
    let ring_off = area_off + RING_OFFSET;
    let ring = log_bytes(heap, ring_off, cap);
    let tw = heap
        .atomic_u64(area_off)
        .load(std::sync::atomic::Ordering::Acquire);
    let mut pos = (tw >> 32) as usize;
    let seq_lo = tw & 0xFFFF_FFFF;
    let mut expected: Option<u64> = None;
    let mut consumed = 0usize;
    let mut next_seq = seq_lo;
    let standard = framing == Framing::Standard;
    if pos >= cap || !pos.is_multiple_of(8) {
        // The tail word is one 8-byte store: it cannot be torn, only damaged.
        return Walked {
            next_seq,
            damage: Some(format!(
                "the tail word {tw:#018x} points at ring offset {pos:#x}, outside the {cap}-byte ring or unaligned"
            )),
        };
    }
    let mut stop;
    loop {
        if cap - pos < framing.min_header() {
            consumed += cap - pos;
            pos = 0;
        }
        let here = Stop {
            pos,
            seq: expected.unwrap_or(seq_lo),
            full: expected.is_some() && standard,
        };
        if consumed >= cap {
            stop = None;
            break;
        }
        stop = Some(here);
        let Some(h) = read_header(heap, ring_off, pos, cap - pos, framing) else {
            break;
        };
        // The sequence number this record must carry: a standard header has the whole
        // number; a compact one continues the count started from the tail word.
        let want = expected.unwrap_or(seq_lo);
        let in_seq = match expected {
            None if standard => h.seq & 0xFFFF_FFFF == seq_lo,
            Some(e) if standard => h.seq == e,
            _ => h.seq as u16 == want as u16,
        };
        if !in_seq || h.len % 8 != 0 || h.len > cap - pos - h.hlen {
            break;
        }
        let entries = &ring[pos + h.hlen..pos + h.hlen + h.len];
        if !checksum_ok(h.crc, header_checksum(framing, &h, want, entries)) {
            break;
        }
        let seq = if standard { h.seq } else { want };
        expected = Some(seq + 1);
        next_seq = seq + 1;
        if h.kind == KIND_WRAP {
            consumed += cap - pos;
            pos = 0;
            continue;
        }
        each(Record {
            seq,
            persist_ts: h.pts,
            entries,
            op_tag: (h.kind == KIND_OP).then_some(h.tag),
        });
        consumed += h.hlen + h.len;
        pos += h.hlen + h.len;
        if h.kind == KIND_TX_LINE
            && !crate::mutation::active(crate::mutation::Mutation::LogLineSkip)
        {
            // The gap up to the next line is not part of the chain (module docs).
            let next = pos.next_multiple_of(LINE).min(cap);
            consumed += next - pos;
            pos = next;
        }
        if pos == cap {
            pos = 0;
        }
    }
    let damage = stop.and_then(|st| damage_after(heap, ring_off, cap, &st, framing));
    Walked { next_seq, damage }
}

/// Reset a slot's log to empty, the next record carrying `next_seq` (recovery).
/// Flushes; the caller fences.
pub fn reset(heap: &Heap, area_off: usize, next_seq: u64) {
    heap.atomic_u64(area_off)
        .store(tail_word(0, next_seq), std::sync::atomic::Ordering::Release);
    heap.flush(area_off, 8);
}

/// A record in the ring not yet recycled.
#[derive(Clone, Copy, Debug)]
struct LiveRecord {
    /// Where the parser must start to reach this record: the record itself, or the wrap
    /// marker in front of it.
    parse_start: usize,
    /// Sequence number at `parse_start`.
    parse_seq: u64,
    /// Bytes this record occupies, including wrap waste in front of it.
    footprint: usize,
    seq: u64,
    persist_ts: u64,
}

/// The writer side of one slot's log (volatile bookkeeping of the ring).
#[derive(Debug)]
pub struct LogWriter {
    framing: Framing,
    /// Every record starts on a 64-byte boundary of the ring (module docs).
    line_aligned: bool,
    area_off: usize,
    cap: usize,
    head: usize,
    used: usize,
    next_seq: u64,
    live: VecDeque<LiveRecord>,
}

impl LogWriter {
    /// Writer for an empty log (after recovery reset it) whose next record has `next_seq`.
    pub fn new(area_off: usize, area_len: usize, next_seq: u64) -> Self {
        Self::framed(Framing::Standard, area_off, area_len, next_seq)
    }

    /// [`LogWriter::new`] writing records with `framing` (read them back with
    /// [`parse_framed`] and the same framing).
    pub fn framed(framing: Framing, area_off: usize, area_len: usize, next_seq: u64) -> Self {
        LogWriter {
            framing,
            line_aligned: false,
            area_off,
            cap: area_len - RING_OFFSET,
            head: 0,
            used: 0,
            next_seq,
            live: VecDeque::new(),
        }
    }

    /// This writer with every record starting on a 64-byte boundary of the ring
    /// (module docs, "Line-aligned records"; standard framing only). Call before the
    /// first append: the head is then at offset 0, a boundary.
    pub fn line_aligned(mut self) -> Self {
        assert_eq!(
            self.framing,
            Framing::Standard,
            "line-aligned records need the standard framing"
        );
        assert!(
            self.head == 0 && self.cap.is_multiple_of(LINE),
            "line alignment set on a used log or a ring of {} bytes",
            self.cap
        );
        self.line_aligned = true;
        self
    }

    /// Largest record (header + entries) this log can ever hold.
    pub fn max_record(&self) -> usize {
        // Worst case a record needs its own size plus wrap waste; keep it simple and
        // safe: half the ring.
        self.cap / 2
    }

    /// Capacity of the ring.
    pub fn capacity(&self) -> usize {
        self.cap
    }

    /// Bytes in use.
    pub fn used(&self) -> usize {
        self.used
    }

    /// Ring bytes a record of `rec_len` bytes takes at the head, wrap waste in front
    /// of it and (line-aligned) the gap after it included, and whether it wraps.
    fn footprint_at_head(&self, rec_len: usize) -> (usize, bool) {
        let rem = self.cap - self.head;
        // Line-aligned: the head and the ring's end are on boundaries, so the gap
        // after a record that fits also fits.
        let taken = if self.line_aligned {
            rec_len.next_multiple_of(LINE)
        } else {
            rec_len
        };
        if rec_len <= rem {
            (taken, false)
        } else {
            (rem + taken, true)
        }
    }

    /// True if a record with `entries_len` bytes of entries fits now.
    pub fn fits(&self, entries_len: usize) -> bool {
        let (fp, _) = self.footprint_at_head(self.framing.header_len(entries_len) + entries_len);
        self.used + fp <= self.cap
    }

    /// Write a record (header + `entries`) at the head and flush it (the caller fences
    /// once for the whole persist stage). Returns its sequence number. The caller has
    /// checked `fits`.
    pub fn append(&mut self, heap: &Heap, entries: &[u8], persist_ts: u64) -> u64 {
        self.append_kind(heap, KIND_TX, 0, entries, persist_ts)
    }

    /// [`LogWriter::append`] for an operation record built by
    /// [`RecordBuilder::op_record`], with the tag it returned (compact framing only).
    pub fn append_op(&mut self, heap: &Heap, entries: &[u8], tag: u16, persist_ts: u64) -> u64 {
        assert_eq!(
            self.framing,
            Framing::Compact,
            "operation records need the compact framing"
        );
        self.append_kind(heap, KIND_OP, tag, entries, persist_ts)
    }

    fn append_kind(
        &mut self,
        heap: &Heap,
        kind: u32,
        tag: u16,
        entries: &[u8],
        persist_ts: u64,
    ) -> u64 {
        let hlen = self.framing.header_len(entries.len());
        let rec_len = hlen + entries.len();
        let (footprint, wraps) = self.footprint_at_head(rec_len);
        debug_assert!(self.used + footprint <= self.cap);
        let ring = self.area_off + RING_OFFSET;
        let (mut parse_start, parse_seq) = (self.head, self.next_seq);
        if wraps {
            if self.cap - self.head >= self.framing.min_header() {
                let (h, wlen) = encode_framed(self.framing, KIND_WRAP, 0, self.next_seq, 0, &[]);
                heap.write_bytes(ring + self.head, &h[..wlen]);
                heap.flush(ring + self.head, wlen);
                self.next_seq += 1;
            } else {
                parse_start = 0;
            }
            self.head = 0;
        }
        let seq = self.next_seq;
        self.next_seq += 1;
        let kind = if self.line_aligned && kind == KIND_TX {
            KIND_TX_LINE
        } else {
            kind
        };
        let (h, _) = encode_framed(self.framing, kind, tag, seq, persist_ts, entries);
        let unflushed = crate::mutation::active(crate::mutation::Mutation::LogFlush);
        if self.line_aligned && !unflushed {
            // The record's lines are this log's alone (the gap up to the next boundary
            // is part of its footprint): stream them past the cache.
            heap.write_lines(ring + self.head, &[&h[..hlen], entries]);
        } else {
            heap.write_bytes(ring + self.head + hlen, entries);
            heap.write_bytes(ring + self.head, &h[..hlen]);
            if !unflushed {
                heap.flush(ring + self.head, rec_len);
            }
        }
        counters::add_bytes_logged(rec_len as u64);
        self.live.push_back(LiveRecord {
            parse_start,
            parse_seq,
            footprint,
            seq,
            persist_ts,
        });
        self.used += footprint;
        self.head += rec_len;
        if self.line_aligned {
            self.head = self.head.next_multiple_of(LINE).min(self.cap);
        }
        if self.head == self.cap {
            self.head = 0;
        }
        seq
    }

    /// Drop the records that are written back (`seq <= written_back_seq`) and below the
    /// durable watermark, then persist the new tail. Returns the bytes reclaimed.
    pub fn recycle(&mut self, heap: &Heap, written_back_seq: u64, durable_watermark: u64) -> usize {
        let mut freed = 0;
        while let Some(r) = self.live.front() {
            if r.seq > written_back_seq || r.persist_ts >= durable_watermark {
                break;
            }
            freed += r.footprint;
            self.live.pop_front();
        }
        if freed == 0 {
            return 0;
        }
        self.used -= freed;
        let (tail, seq) = match self.live.front() {
            Some(r) => (r.parse_start, r.parse_seq),
            None => (self.head, self.next_seq),
        };
        heap.atomic_u64(self.area_off)
            .store(tail_word(tail, seq), std::sync::atomic::Ordering::Release);
        heap.persist(self.area_off, 8);
        freed
    }
}
