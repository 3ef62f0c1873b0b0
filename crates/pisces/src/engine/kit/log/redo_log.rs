//! Per-thread redo logs: record format, ring buffer, and the parser recovery uses.
//!
//! Each thread slot owns one log area of the pool:
//!
//! ```text
//! +0   tail word: (tail offset in ring: u32) << 32 | (low 32 bits of tail seq)
//! +8   newest-record word: the first sequence number some append took (its
//!      record's, or the wrap marker's in front of it), every item before it durable;
//!      a checked word (`checked_word`); zero: claims nothing (the log was made or
//!      reset since); see "The newest-record word" below
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
//! invalid or out of sequence: a thread writes record n+1 only after record n's fence
//! (outside an unfenced run, below), so nothing valid can follow an invalid record. Old
//! records from earlier laps of the ring have smaller sequence numbers and so end the
//! chain. Conversely, a valid record with a *later* sequence number anywhere in the ring
//! means the stop was not a torn tail but damage; the parser reports it
//! ([`ParsedLog::damage`]) and recovery refuses the pool.
//! Damage to the newest records, with nothing valid after them (a zeroed page that
//! holds a log's end), is caught by the newest-record word ("The newest-record word"
//! below). [`walk`] is the parser: it hands each valid record to its caller in place, borrowed from the
//! mapping (recovery decodes and replays records where they are, with no copy);
//! [`parse`] collects copies of them. The damage look goes from the stop to the first
//! valid record and from offset 0 to the first valid record (where later records
//! would be); it reads a record or two in the common cases.
//!
//! # The newest-record word
//! When the word names n, every item (record or wrap marker) before n is durable: the
//! writer stores the first sequence number an append takes (its record's, or that of
//! the wrap marker written with it), flushed with the append's own lines and fenced by
//! the same fence, and that append began only after every earlier one was fenced. So a
//! chain that ends before n is damage, not a torn tail; a chain that ends at n is a
//! torn newest append, as a crash may leave.
//!
//! The loss the word is for is a page: a lost page write or a zeroed page of the pool
//! that holds the log's end takes every item on it, with no later record left for the
//! parser's damage look to find. Such a loss is told from a torn tail when the word
//! names an item after the first one lost, the oldest live item on that page. So the
//! word is stored at an append that shares the page of the head (the page of the last
//! byte written) with an older live item the word does not cover yet: in the common
//! case the second append on each page, once per page of log, not per record; and at
//! [`LogWriter::recycle`], which persists the tail word on the same line anyway. A page
//! that holds only the newest append is lost as that append would be torn. Storing it
//! at every append (naming the newest) would also tell a loss smaller than a page that
//! takes the newest two or more records while older ones on the page stay (a zeroed
//! line across two records at the very end): at one more flushed line, the log
//! header's, in every update commit, for damage that lost writes of whole pages do not
//! cause. Damage before the log's end is found by the damage look either way. The
//! line is the log header's because the commit flushes no line outside the ring that
//! the word could share: the records' own lines are on the very page a loss takes.
//! What a stored word claims is the same whichever rule stored it, so the parser reads
//! the logs of builds that stored it at every append alike.
//!
//! # Unfenced runs
//! A commit whose durability is deferred appends its record without a fence
//! ([`LogWriter::append_unfenced`]); the records appended since the writer's last fence
//! form its *unfenced run*, which a crash may keep any part of (the page cache writes
//! pages back in any order). The standard framing's kind word counts, in its high half,
//! the items of the run before each record or wrap marker (0 outside a run), up to
//! [`MAX_UNFENCED`]. The parser's chain still stops at the run's first missing item, so
//! recovery keeps a prefix of the run, never a record after a lost one (a transaction
//! after its thread's earlier one, which it may have read). The damage look past the
//! stop takes a later record whose count reaches back to the stop's item or before it
//! as part of the same run, not as damage. The newest-record word never names an item
//! past the run's first one: it claims that every item before it is durable. A run ends
//! at the writer's own fence ([`LogWriter::fenced`], also inside `recycle`), or when
//! another thread flushes the run's bytes ([`LogWriter::unfenced_span`], published by
//! the engine) and fences. Records of a run left valid past the end of the chain carry
//! sequence numbers at most [`MAX_UNFENCED`] past the stop; recovery starts the next
//! run's sequence numbers beyond them, so the new chain can never run into one.
//!
//! When a record does not fit before the end of the ring, a `WRAP` marker (a header with
//! no entries, consuming a sequence number) is written at the head and the record goes
//! to offset 0. If fewer than 32 bytes remain, both sides wrap without a marker.
//!
//! # Framings
//! The header above is the [`Standard`] framing. A record's header is the one part of
//! the format a log may choose: a log is written and parsed with a [`Framing`], and an
//! engine may define its own (timestone's OLog frames its small records with a 16-byte
//! header whose sequence number is partial, `engine::timestone::olog`). Everything
//! else — the ring, wrap markers, the chain the parser follows, torn-tail and damage
//! detection — is the same for every framing. A framing may let records carry a
//! 16-bit tag ([`Framing::TAGGED`], [`LogWriter::append_tagged`]): such a record
//! (kind `TAGGED`) is handed to its reader with the tag, which says how its entries
//! are laid out.
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
//! argument length in bits 32..56 and the id in bits 0..32) and its argument bytes,
//! for engines that log operations (timestone's OLog); the redo-log engines' recovery
//! refuses it. `BLOCKS` (8 B + 8 per block; word 0 holds the count) is a run of
//! allocator changes packed one word each (`Block::pack`, bit 62 set for a free;
//! [`RecordBuilder::blocks`], timestone's CLog); it decodes as the ALLOC and FREE
//! entries it stands for.

use crate::engine::kit::log::crc::crc32c_of;
use crate::heap::alloc::Block;
use crate::heap::Heap;
use crate::medium::counters;
use crate::{Error, Result};
use std::collections::VecDeque;

crate::mutation::point! {
    /// Log records are accepted without a valid checksum.
    pub(crate) static CHECKSUM = "checksum";
    /// The log record is not flushed before its persistTS makes it count.
    pub(crate) static LOG_FLUSH = "log-flush";
    /// The parser does not skip the gap after a line-aligned record, so it stops there
    /// and recovery loses the records after it.
    pub(crate) static LOG_LINE_SKIP = "log-line-skip";
}

#[cfg(test)]
pub(crate) mod tests;

/// Record header size.
pub const HEADER_LEN: usize = 32;
/// Offset of the ring inside a log area.
pub const RING_OFFSET: usize = 64;
/// Offset of the newest-record word inside a log area (module docs).
const NEWEST_OFFSET: usize = 8;
/// The unit of loss the newest-record word is kept for: a page of the pool (module
/// docs, "The newest-record word").
const PAGE: usize = 4096;
const MAGIC: u32 = 0x5052_4543; // "PREC"
/// Record kind: a transaction's entries.
pub(crate) const KIND_TX: u32 = 1;
/// Record kind: a wrap marker (no entries; the chain goes on at ring offset 0).
pub(crate) const KIND_WRAP: u32 = 2;
/// Record kind: entries laid out as the record's header tag says (framings with
/// [`Framing::TAGGED`]; module docs, "Framings").
pub(crate) const KIND_TAGGED: u32 = 3;
/// Standard framing: a transaction record after which the next record starts at the
/// next multiple of 64 bytes of the ring (module docs, "Line-aligned records").
const KIND_TX_LINE: u32 = 4;
/// The kind word's low half holds the kind; the high half, in the standard framing,
/// the count of unfenced items before the record (module docs, "Unfenced runs").
const KIND_MASK: u32 = 0xFFFF;
/// The most items a log appends without a fence in a row ([`LogWriter::append_unfenced`]):
/// the writer's caller fences before it would append more. It bounds the sequence
/// numbers a crash can leave valid past the end of the recovered chain, which recovery
/// steps over ([`LogWriter::must_fence`], `kit::recovery::replay`).
pub(crate) const MAX_UNFENCED: u64 = 1024;
/// The alignment of line-aligned records (a cache line).
const LINE: usize = 64;
/// A packed block word (BLOCKS entries): the block is freed, not allocated.
pub(crate) const BLOCK_FREE: u64 = 1 << 62;

/// A record header as written: its bytes (the first `.1` of them).
pub(crate) type HeaderBytes = ([u8; HEADER_LEN], usize);

/// How a log frames its records: the layout of a record's header (module docs,
/// "Framings"). A value of the type names the framing where a function takes one.
pub(crate) trait Framing: Copy + std::fmt::Debug + 'static {
    /// Whether a header holds the whole sequence number. If not, it holds some low
    /// bits of it and its checksum covers the number's low 32 bits: the parser counts
    /// the chain on from the tail word, and sequence numbers are known modulo 2^32.
    const FULL_SEQ: bool;
    /// The smallest header: a ring position with less room left is skipped (wrap).
    const MIN_HEADER: usize;
    /// Whether records may carry a tag ([`LogWriter::append_tagged`]).
    const TAGGED: bool;
    /// Whether a header records how many items before it were appended without a
    /// fence ([`LogWriter::append_unfenced`]; module docs, "Unfenced runs").
    const UNFENCED_RUNS: bool = false;

    /// Header bytes of a record with `len` bytes of entries.
    fn header_len(self, len: usize) -> usize;

    /// A cheap look at the ring bytes `ring` at `pos` (at least [`Self::MIN_HEADER`]
    /// of them): false rules out a header there before it is decoded.
    fn candidate(ring: &[u8], pos: usize) -> bool;

    /// The header at ring position `pos` (the ring starts at pool offset `ring`) with
    /// `room` bytes left before the ring's end, if it can be one (its kind is one of
    /// the framing's and it fits); its length field is not checked yet.
    fn read_header(heap: &Heap, ring: usize, pos: usize, room: usize) -> Option<RawHeader>;

    /// The checksum a record with header `h` and `entries` must carry if it is the
    /// record of sequence number `seq`.
    fn checksum(h: &RawHeader, seq: u64, entries: &[u8]) -> u32;

    /// A header of record kind `kind` with tag `tag` (0 if untagged) for sequence
    /// number `seq`, persistTS `persist_ts` and `entries`: its bytes and length.
    fn encode(self, kind: u32, tag: u16, seq: u64, persist_ts: u64, entries: &[u8]) -> HeaderBytes;

    /// Whether a header's stored sequence number is the one expected, `want` (all of it
    /// if `full`, else its low 32 bits from the tail word).
    fn in_sequence(stored: u64, want: u64, full: bool) -> bool;

    /// How far a record's sequence number is from `expected` (positive: later), and
    /// the number itself, from what its header stores (`full`: the whole expected
    /// number is known, else only its low 32 bits).
    fn distance(stored: u64, expected: u64, full: bool) -> (i64, u64);
}

/// The standard framing: the 32-byte header with magic and full sequence number
/// (module docs).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Standard;

impl Framing for Standard {
    const FULL_SEQ: bool = true;
    const MIN_HEADER: usize = HEADER_LEN;
    const TAGGED: bool = false;
    const UNFENCED_RUNS: bool = true;

    #[inline]
    fn header_len(self, _len: usize) -> usize {
        HEADER_LEN
    }

    #[inline]
    fn candidate(ring: &[u8], pos: usize) -> bool {
        rd_word(&ring[pos..]) as u32 == MAGIC
    }

    fn read_header(heap: &Heap, ring: usize, pos: usize, room: usize) -> Option<RawHeader> {
        if room < HEADER_LEN {
            return None;
        }
        let mut bytes = [0u8; HEADER_LEN];
        heap.read_bytes(ring + pos, &mut bytes);
        let u32at = |i: usize| u32::from_le_bytes(bytes[i..i + 4].try_into().unwrap());
        let u64at = |i: usize| u64::from_le_bytes(bytes[i..i + 8].try_into().unwrap());
        let (magic, raw_kind) = (u32at(0), u32at(4));
        // The kind word's high half: the items before this one appended without a
        // fence (module docs, "Unfenced runs").
        let (kind, unfenced) = (raw_kind & KIND_MASK, raw_kind >> 16);
        if magic != MAGIC
            || !matches!(kind, KIND_TX | KIND_WRAP | KIND_TX_LINE)
            || u64::from(unfenced) > MAX_UNFENCED
        {
            return None;
        }
        Some(RawHeader {
            kind,
            unfenced: u64::from(unfenced),
            len: u32at(8) as usize,
            crc: u32at(12),
            seq: u64at(16),
            tag: 0,
            pts: u64at(24),
            hlen: HEADER_LEN,
            bytes,
        })
    }

    #[inline]
    fn checksum(h: &RawHeader, _seq: u64, entries: &[u8]) -> u32 {
        let raw_kind = h.kind | (h.unfenced as u32) << 16;
        checksum(raw_kind, h.len as u32, h.seq, h.pts, entries)
    }

    #[inline]
    fn encode(
        self,
        kind: u32,
        _tag: u16,
        seq: u64,
        persist_ts: u64,
        entries: &[u8],
    ) -> HeaderBytes {
        (
            encode_header(kind, entries.len() as u32, seq, persist_ts, entries),
            HEADER_LEN,
        )
    }

    #[inline]
    fn in_sequence(stored: u64, want: u64, full: bool) -> bool {
        if full {
            stored == want
        } else {
            stored & 0xFFFF_FFFF == want
        }
    }

    #[inline]
    fn distance(stored: u64, expected: u64, full: bool) -> (i64, u64) {
        if full {
            (stored.wrapping_sub(expected) as i64, stored)
        } else {
            (
                i64::from((stored as u32).wrapping_sub(expected as u32) as i32),
                stored,
            )
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
pub(crate) enum Entry<'a> {
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
pub(crate) struct RecordBuilder {
    buf: Vec<u8>,
}

impl RecordBuilder {
    /// Start a new record.
    pub(crate) fn clear(&mut self) {
        self.buf.clear();
    }
    /// Bytes of entries so far.
    pub(crate) fn len(&self) -> usize {
        self.buf.len()
    }
    fn words(&mut self, a: u64, b: u64) {
        self.buf.extend_from_slice(&a.to_le_bytes());
        self.buf.extend_from_slice(&b.to_le_bytes());
    }
    /// Append a WORD entry.
    pub(crate) fn word(&mut self, off: u64, value: u64) {
        self.words(E_WORD << 56 | off, value);
    }
    /// Append a RANGE entry.
    pub(crate) fn range(&mut self, off: u64, data: &[u8]) {
        self.words(E_RANGE << 56 | off, data.len() as u64);
        self.buf.extend_from_slice(data);
        let pad = data.len().next_multiple_of(8) - data.len();
        self.buf.extend(std::iter::repeat_n(0u8, pad));
    }
    /// Append an OP entry.
    pub(crate) fn op(&mut self, id: u32, data: &[u8]) {
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
    pub(crate) fn alloc(&mut self, b: Block) {
        self.words(E_ALLOC << 56 | b.offset, b.size);
    }
    /// Append a FREE entry.
    pub(crate) fn free(&mut self, b: Block) {
        self.words(E_FREE << 56 | b.offset, b.size);
    }
    /// Append allocator changes (`true`: ALLOC, `false`: FREE) in 8 bytes each: one
    /// BLOCKS entry (word `count`, then one packed word per block, as in operation
    /// records) for those `Block::pack` can pack, ALLOC / FREE entries for the
    /// others. Decoded as the ALLOC and FREE entries they stand for, in order.
    pub(crate) fn blocks(&mut self, changes: &[(bool, Block)]) {
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
    pub(crate) fn bytes(&self) -> &[u8] {
        &self.buf
    }

    /// The entry bytes, for entries of a format defined outside the kit (timestone's
    /// operation records): the caller appends whole 8-byte words.
    pub(crate) fn bytes_mut(&mut self) -> &mut Vec<u8> {
        &mut self.buf
    }
}

/// Decode the entries of a record; `Err` names the first malformed entry.
pub(crate) fn decode(bytes: &[u8]) -> Result<Vec<Entry<'_>>> {
    entries(bytes).collect()
}

/// The entries of a record one by one, without allocating (recovery decodes each
/// record in place, in the mapping); after an `Err` (the first malformed entry) the
/// iterator ends.
pub(crate) fn entries(bytes: &[u8]) -> Entries<'_> {
    Entries { bytes, blocks: &[] }
}

/// Iterator over the entries of a record ([`entries`]).
#[derive(Clone, Debug)]
pub(crate) struct Entries<'a> {
    bytes: &'a [u8],
    /// The packed block words of a BLOCKS entry not yet handed out.
    blocks: &'a [u8],
}

/// The ALLOC or FREE entry a packed block word (bit 62: free) stands for.
pub(crate) fn block_entry<'a>(w: u64) -> Result<Entry<'a>> {
    if w >> 63 != 0 {
        return Err(Error::corrupt(format!("block word {w:#x} has bit 63 set")));
    }
    let b = Block::unpack(w).map_err(Error::corrupt)?;
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
                return Err(Error::corrupt(format!(
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
                return Err(Error::corrupt(format!(
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
            return Err(Error::corrupt("truncated log entry"));
        }
        let (w0, w1) = (rd(0), rd(1));
        let off = w0 & OFF_MASK;
        let (e, used) = match w0 >> 56 {
            E_WORD => (Entry::Word { off, value: w1 }, 16),
            E_RANGE => {
                let len = usize::try_from(w1).unwrap_or(usize::MAX);
                let padded = len.checked_next_multiple_of(8).unwrap_or(usize::MAX);
                if padded > bytes.len() - 16 {
                    return Err(Error::corrupt(format!(
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
            k => return Err(Error::corrupt(format!("unknown log entry kind {k}"))),
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

/// A record header read from the ring, not yet checked against its entries
/// ([`Framing::read_header`]).
#[derive(Clone, Copy, Debug)]
pub(crate) struct RawHeader {
    /// Record kind (`KIND_*`).
    pub kind: u32,
    /// How many items (records and wrap markers) right before this one were appended
    /// without a fence when this one was appended (0 for framings without
    /// [`Framing::UNFENCED_RUNS`]).
    pub unfenced: u64,
    /// Entry bytes.
    pub len: usize,
    /// The stored checksum.
    pub crc: u32,
    /// The stored sequence number: all of it, or its low bits ([`Framing::FULL_SEQ`]).
    pub seq: u64,
    /// The header's tag (0 for untagged records).
    pub tag: u16,
    /// PersistTS.
    pub pts: u64,
    /// Header bytes.
    pub hlen: usize,
    /// The header as read (`hlen` bytes of it).
    pub bytes: [u8; HEADER_LEN],
}

fn checksum_ok(stored: u32, computed: u32) -> bool {
    stored == computed || crate::mutation::active!(CHECKSUM)
}

/// The most records (each at least a header and one entry word) a log area of
/// `area_len` bytes can hold at once: a bound for tables of one entry per record.
pub(crate) fn max_records(area_len: usize) -> usize {
    area_len.saturating_sub(RING_OFFSET) / (HEADER_LEN + 8)
}

/// Pack the tail word.
fn tail_word(tail: usize, seq: u64) -> u64 {
    (tail as u64) << 32 | (seq & 0xFFFF_FFFF)
}

/// A record found by the parser.
#[derive(Debug)]
pub(crate) struct ParsedRecord {
    /// Sequence number.
    pub seq: u64,
    /// Persist timestamp.
    pub persist_ts: u64,
    /// Entry bytes (copied out of the log).
    pub entries: Vec<u8>,
    /// A tagged record's header tag (kind `TAGGED`: timestone's operation records;
    /// `None`: general entries).
    pub op_tag: Option<u16>,
}

/// Result of parsing one slot's log.
#[derive(Debug)]
pub(crate) struct ParsedLog {
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
/// record (with its wrap marker, which shares its fence) can be partly durable —
/// except in an unfenced run (module docs), whose records count the items before them
/// that no fence covered: a later record whose count reaches the stop proves nothing,
/// and the look goes on past it (a record after the run's end, counting fewer, is
/// damage again). A valid
/// record *later* in sequence than the one expected at the stop proves that the
/// expected record was once complete: the stop is damage, and the later records would
/// be lost with it. Records of earlier laps and runs carry smaller sequence numbers and
/// prove nothing. The one exception is a wrap: the marker (expected seq e, at the end
/// of the ring) and record e+1 at offset 0 are flushed together and fenced once, so
/// record e+1 alone at offset 0, too long to have fitted after the marker's position,
/// with nothing after it, is a torn tail too; that record stays valid in the ring, so
/// the log goes on at e+2 ([`PastStop::TornWrapRecord`]).
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
/// Bytes of ring [`look_past_stop`] rules out at once when no position in them can
/// start a header.
const SKIP_SPAN: usize = 64;

fn look_past_stop<F: Framing>(heap: &Heap, ring: usize, cap: usize, stop: &Stop) -> PastStop {
    let ring_bytes = log_bytes(heap, ring, cap);
    // The first valid record starting in `from..to` (8-byte steps): (pos, record
    // length, sequence number, distance from the expected one).
    let first_valid = |from: usize, to: usize| -> Option<(usize, usize, u64, i64)> {
        // A cheap look at the words in place rules out most positions before a
        // header is decoded (a standard header starts with the magic).
        let candidate = |pos: usize| F::candidate(ring_bytes, pos);
        let mut pos = from;
        while pos < to && pos + F::MIN_HEADER <= cap {
            // Most of a ring past its end holds no header (zeroed or an old lap's
            // entries): rule out 8 positions at a time while none is a candidate
            // (the same positions the step below would rule out one by one).
            if pos + SKIP_SPAN <= to
                && pos + SKIP_SPAN + F::MIN_HEADER <= cap
                && !(0..SKIP_SPAN).step_by(8).any(|d| candidate(pos + d))
            {
                pos += SKIP_SPAN;
                continue;
            }
            if candidate(pos) {
                if let Some(h) = F::read_header(heap, ring, pos, cap - pos) {
                    if h.len % 8 == 0 && h.len <= cap - pos - h.hlen {
                        let entries = &ring_bytes[pos + h.hlen..pos + h.hlen + h.len];
                        let (d, seq) = F::distance(h.seq, stop.seq, stop.full);
                        if F::checksum(&h, seq, entries) == h.crc {
                            if d > 0 && h.unfenced as i64 >= d {
                                // A record of an unfenced run that began at or before
                                // the stop proves nothing about the stop's item: the
                                // crash may have kept any part of the run (module
                                // docs, "Unfenced runs"). The look goes on past it.
                                pos += h.hlen + h.len;
                                continue;
                            }
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
        format!(
            "the record expected at ring offset {:#x} (sequence number {}{}) is damaged, but a later record follows (sequence number {}{seq} at ring offset {pos:#x}): not a torn tail",
            stop.pos,
            if stop.full { "" } else { "low 32 bits " },
            if stop.full { stop.seq } else { stop.seq & 0xFFFF_FFFF },
            if F::FULL_SEQ { "" } else { "low 32 bits " },
        )
    };
    later_record_after_stop(stop.pos, cap, first_valid, damage)
}

/// What the look past the parser's stop found ([`later_record_after_stop`]).
#[derive(Debug)]
pub(crate) enum PastStop {
    /// No record later than the one expected at the stop: a clean end or a torn tail.
    Nothing,
    /// A torn wrap: the marker (expected sequence number e) is lost but its record
    /// e+1 is valid at offset 0. A torn tail, yet that record stays in the ring, so
    /// the log's next record must carry e+2 or later: a log reset to e would find
    /// e+1 at offset 0 on its next parse, a later record than the one it expects,
    /// and refuse it as damaged.
    TornWrapRecord,
    /// A later record follows a damaged one: what is wrong.
    Damage(String),
}

impl PastStop {
    /// The sequence number the log's next record must carry, given the one the
    /// parser expected at its stop (`expected`), or the damage.
    pub(crate) fn next_seq(self, expected: u64) -> std::result::Result<u64, String> {
        match self {
            PastStop::Nothing => Ok(expected),
            PastStop::TornWrapRecord => Ok(expected + 2),
            PastStop::Damage(d) => Err(d),
        }
    }
}

/// The look of [`look_past_stop`] (its docs say where later records can be), for any
/// record format: `first_valid(from, to)` is the format's first valid record starting
/// in `from..to` as (position, length, sequence number, its distance from the one
/// expected at the stop: positive means later); `damage(pos, seq)` words the finding.
/// Shared with spht's log, whose records have their own header.
pub(crate) fn later_record_after_stop(
    stop_pos: usize,
    cap: usize,
    first_valid: impl Fn(usize, usize) -> Option<(usize, usize, u64, i64)>,
    damage: impl Fn(usize, u64) -> String,
) -> PastStop {
    // Forward from the stop to the end of the ring: nothing later may be valid there.
    if let Some((pos, _, seq, d)) = first_valid(stop_pos, cap) {
        if d > 0 {
            return PastStop::Damage(damage(pos, seq));
        }
    }
    // On from offset 0, where the chain would continue after a wrap.
    let Some((pos, len, seq, d)) = first_valid(0, stop_pos) else {
        return PastStop::Nothing;
    };
    if d <= 0 {
        return PastStop::Nothing;
    }
    if pos == 0 && d == 1 && stop_pos > 0 && len > cap - stop_pos {
        // Record e+1 alone at offset 0 is the torn wrap's record, unless e+2 follows.
        return match first_valid(len, stop_pos) {
            Some((p2, _, s2, d2)) if d2 > 0 => PastStop::Damage(damage(p2, s2)),
            _ => PastStop::TornWrapRecord,
        };
    }
    PastStop::Damage(damage(pos, seq))
}

/// Parse the log of one slot from its persisted tail (recovery, `pisces info`),
/// copying each record's entries out of the log.
pub(crate) fn parse(heap: &Heap, area_off: usize, area_len: usize) -> ParsedLog {
    parse_framed(heap, area_off, area_len, Standard)
}

/// [`parse`] for a log written with `framing`. Where the headers hold partial
/// sequence numbers ([`Framing::FULL_SEQ`]) they are known modulo 2^32 only: the
/// records and `next_seq` carry the tail word's low 32 bits counted on (the writer
/// compares them modulo 2^32 too).
pub(crate) fn parse_framed<F: Framing>(
    heap: &Heap,
    area_off: usize,
    area_len: usize,
    framing: F,
) -> ParsedLog {
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
pub(crate) struct Record<'h> {
    /// Sequence number.
    pub seq: u64,
    /// Persist timestamp.
    pub persist_ts: u64,
    /// The entry bytes, in the log itself (no copy).
    pub entries: &'h [u8],
    /// A tagged record's header tag (kind `TAGGED`, whose entries the tag describes;
    /// `None`: general entries, [`entries`]).
    pub op_tag: Option<u16>,
}

/// Where [`walk`] ended.
#[derive(Debug)]
pub(crate) struct Walked {
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
pub(crate) fn walk<'h>(
    heap: &'h Heap,
    area_off: usize,
    area_len: usize,
    each: impl FnMut(Record<'h>),
) -> Walked {
    walk_framed(heap, area_off, area_len, Standard, each)
}

/// [`walk`] for a log written with `framing` (see [`parse_framed`] for partial
/// sequence numbers).
pub(crate) fn walk_framed<'h, F: Framing>(
    heap: &'h Heap,
    area_off: usize,
    area_len: usize,
    _framing: F,
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
        if cap - pos < F::MIN_HEADER {
            consumed += cap - pos;
            pos = 0;
        }
        let here = Stop {
            pos,
            seq: expected.unwrap_or(seq_lo),
            full: expected.is_some() && F::FULL_SEQ,
        };
        if consumed >= cap {
            stop = None;
            break;
        }
        stop = Some(here);
        let Some(h) = F::read_header(heap, ring_off, pos, cap - pos) else {
            break;
        };
        // The sequence number this record must carry: a standard header has the whole
        // number; a partial one continues the count started from the tail word.
        let want = expected.unwrap_or(seq_lo);
        let in_seq = F::in_sequence(h.seq, want, expected.is_some());
        if !in_seq || h.len % 8 != 0 || h.len > cap - pos - h.hlen {
            break;
        }
        let entries = &ring[pos + h.hlen..pos + h.hlen + h.len];
        if !checksum_ok(h.crc, F::checksum(&h, want, entries)) {
            break;
        }
        let seq = if F::FULL_SEQ { h.seq } else { want };
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
            op_tag: (h.kind == KIND_TAGGED).then_some(h.tag),
        });
        consumed += h.hlen + h.len;
        pos += h.hlen + h.len;
        if h.kind == KIND_TX_LINE && !crate::mutation::active!(LOG_LINE_SKIP) {
            // The gap up to the next line is not part of the chain (module docs).
            let next = pos.next_multiple_of(LINE).min(cap);
            consumed += next - pos;
            pos = next;
        }
        if pos == cap {
            pos = 0;
        }
    }
    match stop
        .map_or(PastStop::Nothing, |st| {
            look_past_stop::<F>(heap, ring_off, cap, &st)
        })
        .next_seq(next_seq)
    {
        Ok(next_seq) => Walked {
            next_seq,
            damage: newest_word_damage(heap, area_off, next_seq),
        },
        Err(d) => Walked {
            next_seq,
            damage: Some(d),
        },
    }
}

/// Reset a slot's log to empty, the next record carrying `next_seq` (recovery).
/// Flushes; the caller fences.
pub(crate) fn reset(heap: &Heap, area_off: usize, next_seq: u64) {
    heap.atomic_u64(area_off)
        .store(tail_word(0, next_seq), std::sync::atomic::Ordering::Release);
    // No record since the reset. (A word left naming an earlier record would claim
    // nothing wrong either: it is below `next_seq`.)
    heap.atomic_u64(area_off + NEWEST_OFFSET)
        .store(0, std::sync::atomic::Ordering::Release);
    heap.flush(area_off, 16);
}

/// Whether the chain the parser followed, which ends before `next_seq`, lacks a record
/// the newest-record word proves durable (module docs): `Some(what)` if so, or if the
/// word is damaged.
fn newest_word_damage(heap: &Heap, area_off: usize, next_seq: u64) -> Option<String> {
    let word = heap
        .atomic_u64(area_off + NEWEST_OFFSET)
        .load(std::sync::atomic::Ordering::Acquire);
    if word == 0 {
        return None;
    }
    let Some(newest) = super::checked_word::decode(word) else {
        return Some(format!(
            "the newest-record word {word:#018x} fails its check"
        ));
    };
    // Sequence numbers compare on their low 32 bits (the tail word keeps those): the
    // word may name `next_seq` (a torn newest record) but nothing above it.
    let ahead = (newest as u32).wrapping_sub(next_seq as u32);
    (ahead != 0 && ahead < 1 << 31).then(|| {
        format!(
            "the log ends before record {next_seq}, but its newest-record word names \
             {newest}: records the writer had made durable are lost"
        )
    })
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

/// The writer side of one slot's log (volatile bookkeeping of the ring), writing
/// records framed by `F`.
#[derive(Debug)]
pub(crate) struct LogWriter<F: Framing = Standard> {
    framing: F,
    /// Every record starts on a 64-byte boundary of the ring (module docs).
    line_aligned: bool,
    area_off: usize,
    cap: usize,
    head: usize,
    used: usize,
    next_seq: u64,
    live: VecDeque<LiveRecord>,
    /// What the newest-record word holds since this writer started (`None`: nothing
    /// stored yet; the word is zero after a reset).
    word: Option<u64>,
    /// The first sequence number of the newest append.
    newest_first: Option<u64>,
    /// The page (pool offset / [`PAGE`]) of the last byte the newest append wrote, and
    /// the sequence number of the oldest live item (record or wrap marker) of the chain
    /// on that page: the first item a loss of that page would take.
    head_page: Option<(usize, u64)>,
    /// The unfenced run (module docs, "Unfenced runs"): the first sequence number
    /// appended since this writer's caller last fenced, if an append since then was
    /// unfenced, and the ring offset of its first byte.
    unfenced_from: Option<(u64, usize)>,
}

impl LogWriter {
    /// Writer for an empty log (after recovery reset it) whose next record has `next_seq`.
    pub(crate) fn new(area_off: usize, area_len: usize, next_seq: u64) -> Self {
        Self::framed(Standard, area_off, area_len, next_seq)
    }

    /// This writer with every record starting on a 64-byte boundary of the ring
    /// (module docs, "Line-aligned records"; standard framing only). Call before the
    /// first append: the head is then at offset 0, a boundary.
    pub(crate) fn line_aligned(mut self) -> Self {
        assert!(
            self.head == 0 && self.cap.is_multiple_of(LINE),
            "line alignment set on a used log or a ring of {} bytes",
            self.cap
        );
        self.line_aligned = true;
        self
    }
}

impl<F: Framing> LogWriter<F> {
    /// [`LogWriter::new`] writing records with `framing` (read them back with
    /// [`parse_framed`] and the same framing).
    pub(crate) fn framed(framing: F, area_off: usize, area_len: usize, next_seq: u64) -> Self {
        LogWriter {
            framing,
            line_aligned: false,
            area_off,
            cap: area_len - RING_OFFSET,
            head: 0,
            used: 0,
            next_seq,
            live: VecDeque::new(),
            word: None,
            newest_first: None,
            head_page: None,
            unfenced_from: None,
        }
    }

    /// Largest record (header + entries) this log can ever hold.
    pub(crate) fn max_record(&self) -> usize {
        // Worst case a record needs its own size plus wrap waste; keep it simple and
        // safe: half the ring.
        self.cap / 2
    }

    /// Capacity of the ring.
    pub(crate) fn capacity(&self) -> usize {
        self.cap
    }

    /// Bytes in use.
    pub(crate) fn used(&self) -> usize {
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
    pub(crate) fn fits(&self, entries_len: usize) -> bool {
        let (fp, _) = self.footprint_at_head(self.framing.header_len(entries_len) + entries_len);
        self.used + fp <= self.cap
    }

    /// Write a record (header + `entries`) at the head and flush it (the caller fences
    /// once for the whole persist stage). Returns its sequence number. The caller has
    /// checked `fits`.
    pub(crate) fn append(&mut self, heap: &Heap, entries: &[u8], persist_ts: u64) -> u64 {
        self.append_kind(heap, KIND_TX, 0, entries, persist_ts, false)
    }

    /// [`LogWriter::append`] of a record its caller does not fence: it joins the
    /// unfenced run (module docs, "Unfenced runs"), which the caller ends by a fence of
    /// its own thread and [`LogWriter::fenced`], or another thread by flushing
    /// [`LogWriter::unfenced_span`] and fencing. Its lines are written with plain
    /// stores and flushed, so that a flush and fence by any thread persists them. The
    /// caller has checked `fits` and [`LogWriter::must_fence`].
    pub(crate) fn append_unfenced(&mut self, heap: &Heap, entries: &[u8], persist_ts: u64) -> u64 {
        assert!(
            F::UNFENCED_RUNS,
            "{:?} records carry no unfenced count",
            self.framing
        );
        debug_assert!(!self.must_fence());
        self.append_kind(heap, KIND_TX, 0, entries, persist_ts, true)
    }

    /// True if the unfenced run is as long as a run may get: the caller fences (and
    /// calls [`LogWriter::fenced`]) before its next append.
    pub(crate) fn must_fence(&self) -> bool {
        // An append takes up to two sequence numbers (a wrap marker and its record).
        self.unfenced_from
            .is_some_and(|(first, _)| self.next_seq + 2 - first > MAX_UNFENCED)
    }

    /// The caller fenced after its last append (its own thread's fence, or a sync of
    /// [`LogWriter::unfenced_span`] it knows of): the unfenced run is over.
    pub(crate) fn fenced(&mut self) {
        self.unfenced_from = None;
    }

    /// The unfenced run's place in the ring: the ring offsets of its first byte and of
    /// the head (where the next append starts), or None without a run. The run is the
    /// bytes from the first to the head, around the ring's end if the head is at or
    /// before the first (a run never fills the ring: its records are not recycled
    /// before they are fenced, and a record takes at most half of it).
    /// [`super::unfenced_run`] flushes them for another thread.
    pub(crate) fn unfenced_span(&self) -> Option<(usize, usize)> {
        self.unfenced_from.map(|(_, start)| (start, self.head))
    }

    /// Whether an unfenced run is open (appends since the last fence, one of them
    /// unfenced).
    #[inline]
    pub(crate) fn in_run(&self) -> bool {
        self.unfenced_from.is_some()
    }

    /// The sequence number the next append takes.
    pub(crate) fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// [`LogWriter::append`] for a tagged record: `entries` laid out as `tag` says
    /// (framings with [`Framing::TAGGED`] only).
    pub(crate) fn append_tagged(
        &mut self,
        heap: &Heap,
        entries: &[u8],
        tag: u16,
        persist_ts: u64,
    ) -> u64 {
        assert!(F::TAGGED, "{:?} records carry no tag", self.framing);
        self.append_kind(heap, KIND_TAGGED, tag, entries, persist_ts, false)
    }

    fn append_kind(
        &mut self,
        heap: &Heap,
        kind: u32,
        tag: u16,
        entries: &[u8],
        persist_ts: u64,
        unfenced: bool,
    ) -> u64 {
        let hlen = self.framing.header_len(entries.len());
        let rec_len = hlen + entries.len();
        let (footprint, wraps) = self.footprint_at_head(rec_len);
        debug_assert!(self.used + footprint <= self.cap);
        let ring = self.area_off + RING_OFFSET;
        let (mut parse_start, parse_seq) = (self.head, self.next_seq);
        // The first sequence number this append takes (its wrap marker's, if any).
        let first_seq = self.next_seq;
        // The run this append follows, if any: each item's header counts the items
        // before it since the run's first (module docs, "Unfenced runs").
        let run = self.unfenced_from.map(|(f, _)| f);
        let with_count = |kind: u32, s: u64| -> u32 {
            let n = run.map_or(0, |f| s - f);
            debug_assert!(n <= MAX_UNFENCED && (n == 0 || F::UNFENCED_RUNS));
            kind | (n as u32) << 16
        };
        // What the newest-record word names: every item before it is durable, so not
        // past the run's first item.
        let word_seq = run.unwrap_or(first_seq);
        if wraps {
            if self.cap - self.head >= F::MIN_HEADER {
                let marker = with_count(KIND_WRAP, self.next_seq);
                let (h, wlen) = self.framing.encode(marker, 0, self.next_seq, 0, &[]);
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
        let (h, _) = self
            .framing
            .encode(with_count(kind, seq), tag, seq, persist_ts, entries);
        if unfenced && run.is_none() {
            self.unfenced_from = Some((first_seq, parse_start));
        }
        let unflushed = crate::mutation::active!(LOG_FLUSH);
        // The pages this append touches: its first byte (the wrap marker's, if any, else
        // the record's) and the record's last byte.
        let first_byte = ring + parse_start;
        let last_page = (ring + self.head + rec_len - 1) / PAGE;
        let shared = self
            .head_page
            .filter(|&(page, _)| page == first_byte / PAGE)
            .map(|(_, oldest)| oldest);
        if self.line_aligned && !unflushed && !unfenced {
            // The record's lines are this log's alone (the gap up to the next boundary
            // is part of its footprint): stream them past the cache. (Not in an
            // unfenced run: streamed stores are completed only by this thread's own
            // fence, and another thread may be the one that persists the run.)
            heap.write_lines(ring + self.head, &[&h[..hlen], entries]);
        } else {
            heap.write_bytes(ring + self.head + hlen, entries);
            heap.write_bytes(ring + self.head, &h[..hlen]);
            if !unflushed {
                heap.flush(ring + self.head, rec_len);
            }
        }
        // The newest-record word, when this append shares the head's page with an
        // older live item the word does not cover yet (module docs, "The newest-record
        // word"); fenced with the record (and its wrap marker) by the caller's fence.
        if shared.is_some_and(|oldest| self.word.is_none_or(|w| w <= oldest)) {
            self.store_word(heap, word_seq);
            if !unflushed {
                heap.flush(self.area_off + NEWEST_OFFSET, 8);
            }
        }
        self.newest_first = Some(first_seq);
        self.head_page = Some(match shared {
            Some(oldest) if last_page == first_byte / PAGE => (last_page, oldest),
            // The record's last page holds no older item of the chain: a wrapped record
            // starts the ring's first page, other pages it reaches are its own.
            _ => (last_page, seq),
        });
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
    pub(crate) fn recycle(
        &mut self,
        heap: &Heap,
        written_back_seq: u64,
        durable_watermark: u64,
    ) -> usize {
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
        // The tail's line is persisted anyway: the newest-record word goes with it,
        // naming the newest append, and the head page's oldest live item is now at the
        // tail at the earliest (module docs, "The newest-record word").
        if let Some(first) = self.newest_first {
            // Not past an unfenced run's first item: the word may reach persistence
            // before the fence below does.
            let first = self.unfenced_from.map_or(first, |(f, _)| f.min(first));
            if self.word.is_none_or(|w| w < first) {
                self.store_word(heap, first);
            }
        }
        if let Some((_, oldest)) = &mut self.head_page {
            *oldest = (*oldest).max(seq);
        }
        // This thread's fence: it persists the unfenced run too.
        heap.persist(self.area_off, 16);
        self.fenced();
        freed
    }

    /// Store `first_seq` in the newest-record word (the caller flushes).
    fn store_word(&mut self, heap: &Heap, first_seq: u64) {
        heap.atomic_u64(self.area_off + NEWEST_OFFSET).store(
            super::checked_word::encode(first_seq),
            std::sync::atomic::Ordering::Release,
        );
        self.word = Some(first_seq);
    }
}
