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
//! [`parse`] collects copies of them. The damage scan reads the whole ring, so
//! [`walk`] does it only when asked ([`DamageScan`]).
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
//! word 0: crc32c (bits 0..32) | seq, low 32 bits (bits 32..64)
//! word 1: kind (bits 0..2) | len / 8 (bits 2..16) | persistTS (bits 16..64)
//! [word 2: len in bytes, only when len / 8 does not fit in 14 bits (field = 0x3FFF)]
//! ```
//! The CRC32C covers the header from byte 4 (sequence half, word 1, word 2) and the
//! entries. There is no magic: the kind field (zero in zeroed memory) and the checksum
//! decide validity. Sequence numbers are compared modulo 2^32 (the tail word holds the
//! same low 32 bits), and persistTS must be below 2^48. Everything else — the ring,
//! wrap markers, the chain the parser follows, torn-tail and damage detection — is the
//! same as for standard records.
//!
//! Entries: word 0 = `kind << 56 | offset`, word 1 = value / length / block size.
//! `WORD` (16 B) writes one 8-byte value; `RANGE` (16 B + data rounded up to 8) writes
//! bytes; `ALLOC` / `FREE` name a heap block (offset of its header word, block size);
//! `OP` (8 B + data rounded up to 8) names a registered operation (word 0 holds the
//! argument length in bits 32..56 and the id in bits 0..32) and its argument bytes, for engines that log operations (timestone's OLog);
//! the redo-log engines' recovery refuses it.

use super::crc::crc32c_of;
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
    /// The encoded entries.
    pub fn bytes(&self) -> &[u8] {
        &self.buf
    }
}

/// Decode the entries of a record; `Err` names the first malformed entry.
pub fn decode(bytes: &[u8]) -> Result<Vec<Entry<'_>>> {
    entries(bytes).collect()
}

/// The entries of a record one by one, without allocating (recovery decodes each
/// record in place, in the mapping); after an `Err` (the first malformed entry) the
/// iterator ends.
pub fn entries(bytes: &[u8]) -> Entries<'_> {
    Entries { bytes }
}

/// Iterator over the entries of a record ([`entries`]).
#[derive(Clone, Debug)]
pub struct Entries<'a> {
    bytes: &'a [u8],
}

impl<'a> Entries<'a> {
    fn next_entry(&mut self) -> Result<Entry<'a>> {
        let bytes = self.bytes;
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
        if self.bytes.is_empty() {
            return None;
        }
        let e = self.next_entry();
        if e.is_err() {
            self.bytes = &[];
        }
        Some(e)
    }
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
    /// Full sequence number (standard) or its low 32 bits (compact).
    seq: u64,
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
            if magic != MAGIC || (kind != KIND_TX && kind != KIND_WRAP) {
                return None;
            }
            Some(RawHeader {
                kind,
                len: u32at(&bytes, 8) as usize,
                crc: u32at(&bytes, 12),
                seq: u64at(&bytes, 16),
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
            if kind != KIND_TX && kind != KIND_WRAP {
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
                seq: w0 >> 32,
                pts: w1 >> 16,
                hlen,
                bytes,
            })
        }
    }
}

/// The checksum a record with header `h` and `entries` must carry.
fn header_checksum(framing: Framing, h: &RawHeader, entries: &[u8]) -> u32 {
    match framing {
        Framing::Standard => checksum(h.kind, h.len as u32, h.seq, h.pts, entries),
        Framing::Compact => crc32c_of(&h.bytes[4..h.hlen], entries),
    }
}

/// Encode a header in `framing`; returns the bytes and the header length.
fn encode_framed(
    framing: Framing,
    kind: u32,
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
            h[4..8].copy_from_slice(&(seq as u32).to_le_bytes());
            h[8..16].copy_from_slice(&w1.to_le_bytes());
            if hlen > COMPACT_HEADER_LEN {
                h[16..24].copy_from_slice(&(len as u64).to_le_bytes());
            }
            let crc = crc32c_of(&h[4..hlen], entries);
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
/// record (with its wrap marker, which shares its fence) can be partly durable. Any
/// valid record *later* in sequence than the one expected at the stop, anywhere in the
/// ring, proves that the expected record was once complete: the stop is damage, and
/// the later records would be lost with it. Records of earlier laps and runs carry
/// smaller sequence numbers and prove nothing. The one exception is a wrap: the marker
/// (expected seq e, at the end of the ring) and record e+1 at offset 0 are flushed
/// together and fenced once, so record e+1 alone at offset 0, too long to have fitted
/// after the marker's position, with nothing after it, is a torn tail too.
fn damage_after(
    heap: &Heap,
    ring: usize,
    cap: usize,
    stop: &Stop,
    framing: Framing,
) -> Option<String> {
    let later = |seq: u64| -> Option<u64> {
        if stop.full {
            (seq > stop.seq).then(|| seq - stop.seq)
        } else {
            let d = (seq as u32).wrapping_sub(stop.seq as u32);
            (d != 0 && d < 1 << 31).then_some(d as u64)
        }
    };
    let mut found: Vec<(usize, u64, u64, usize)> = Vec::new(); // (pos, seq, distance, len)
    let ring_bytes = log_bytes(heap, ring, cap);
    let mut pos = 0;
    while pos + framing.min_header() <= cap {
        if let Some(h) = read_header(heap, ring, pos, cap - pos, framing) {
            if h.len % 8 == 0 && h.len <= cap - pos - h.hlen {
                if let Some(d) = later(h.seq) {
                    let entries = &ring_bytes[pos + h.hlen..pos + h.hlen + h.len];
                    if header_checksum(framing, &h, entries) == h.crc {
                        found.push((pos, h.seq, d, h.hlen + h.len));
                    }
                }
            }
        }
        pos += 8;
    }
    if found.is_empty() {
        return None;
    }
    if let [(0, _, 1, rec_len)] = found[..] {
        if stop.pos > 0 && rec_len > cap - stop.pos {
            return None; // a torn wrap marker with its record
        }
    }
    let (p, seq, ..) = found[0];
    Some(format!(
        "the record expected at ring offset {:#x} (sequence number {}{}) is damaged, but {} later record(s) follow (e.g. sequence number {seq} at ring offset {p:#x}): not a torn tail",
        stop.pos,
        if stop.full { "" } else { "low 32 bits " },
        if stop.full { stop.seq } else { stop.seq & 0xFFFF_FFFF },
        found.len(),
    ))
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
    let end = walk_framed(heap, area_off, area_len, framing, DamageScan::Yes, |r| {
        records.push(ParsedRecord {
            seq: r.seq,
            persist_ts: r.persist_ts,
            entries: r.entries.to_vec(),
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
}

/// Whether [`walk`] looks, after the last valid record, for later valid records that
/// would prove the stop to be damage rather than a torn tail ([`ParsedLog::damage`]).
/// The look reads the whole ring.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DamageScan {
    /// Look (the redo-log engines' recovery and inspection refuse damaged logs).
    Yes,
    /// Do not look: [`Walked::damage`] is `None`.
    No,
}

/// Where [`walk`] ended.
#[derive(Debug)]
pub struct Walked {
    /// Sequence number the next record should carry.
    pub next_seq: u64,
    /// Damage that is not a torn tail (only with [`DamageScan::Yes`]).
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
    scan: DamageScan,
    each: impl FnMut(Record<'h>),
) -> Walked {
    walk_framed(heap, area_off, area_len, Framing::Standard, scan, each)
}

/// [`walk`] for a log written with `framing` (see [`parse_framed`] for compact
/// sequence numbers).
pub fn walk_framed<'h>(
    heap: &'h Heap,
    area_off: usize,
    area_len: usize,
    framing: Framing,
    scan: DamageScan,
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
        let in_seq = match expected {
            None => h.seq & 0xFFFF_FFFF == seq_lo,
            Some(e) if standard => h.seq == e,
            Some(e) => h.seq as u32 == e as u32,
        };
        if !in_seq || h.len % 8 != 0 || h.len > cap - pos - h.hlen {
            break;
        }
        let entries = &ring[pos + h.hlen..pos + h.hlen + h.len];
        if !checksum_ok(h.crc, header_checksum(framing, &h, entries)) {
            break;
        }
        // The full sequence number: a standard header has it; a compact one continues
        // the count started from the tail word.
        let seq = match expected {
            Some(e) if !standard => e,
            _ => h.seq,
        };
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
        });
        consumed += h.hlen + h.len;
        pos += h.hlen + h.len;
        if pos == cap {
            pos = 0;
        }
    }
    let damage = match scan {
        DamageScan::Yes => stop.and_then(|st| damage_after(heap, ring_off, cap, &st, framing)),
        DamageScan::No => None,
    };
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
            area_off,
            cap: area_len - RING_OFFSET,
            head: 0,
            used: 0,
            next_seq,
            live: VecDeque::new(),
        }
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

    fn footprint_at_head(&self, rec_len: usize) -> (usize, bool) {
        let rem = self.cap - self.head;
        if rec_len <= rem {
            (rec_len, false)
        } else {
            (rem + rec_len, true)
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
        let hlen = self.framing.header_len(entries.len());
        let rec_len = hlen + entries.len();
        let (footprint, wraps) = self.footprint_at_head(rec_len);
        debug_assert!(self.used + footprint <= self.cap);
        let ring = self.area_off + RING_OFFSET;
        let (mut parse_start, parse_seq) = (self.head, self.next_seq);
        if wraps {
            if self.cap - self.head >= self.framing.min_header() {
                let (h, wlen) = encode_framed(self.framing, KIND_WRAP, self.next_seq, 0, &[]);
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
        let (h, _) = encode_framed(self.framing, KIND_TX, seq, persist_ts, entries);
        heap.write_bytes(ring + self.head + hlen, entries);
        heap.write_bytes(ring + self.head, &h[..hlen]);
        if !crate::mutation::active(crate::mutation::Mutation::LogFlush) {
            heap.flush(ring + self.head, rec_len);
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
