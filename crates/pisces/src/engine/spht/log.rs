//! Per-thread persistent redo logs with link slots (§3.1, §3.2).
//!
//! Each thread slot owns one log area of the pool:
//!
//! ```text
//! +0   head word: (ring offset of the oldest unreplayed record: u32) << 32 | (its seq: low 32 bits)
//! +64  ring of records, 8-byte aligned, never straddling the end:
//!      header (48 B): magic u32 | len u32 | crc32c u32 | kind u32 | seq u64 | ts u64
//!                     | forward link u64 | backward link u64
//!      kind: 1 a transaction, 3 a transaction that is a durable point of its own
//!            (below), 4 a conditional point (below), 2 a wrap marker
//!      body (len bytes): kind 4 only: the dependency count n (u64) and n timestamps
//!                        (u64 each); then the kit's redo entries
//!                        (`kit::log::redo_log::RecordBuilder`)
//! ```
//!
//! * The checksum covers magic, len, kind, seq, ts and the body — not the two link
//!   slots, which are written after the record (by this transaction's successor, and by
//!   the transaction itself once it knows its predecessor). A record whose bytes did not
//!   all reach persistence fails its checksum and is ignored.
//! * Records are appended in sequence-number order; parsing from the head follows
//!   consecutive numbers and stops at the first invalid or out-of-sequence record
//!   (an old lap of the ring has smaller numbers). Only the last record can be torn
//!   (a thread appends a record after its previous one's fence), so a valid record
//!   *later* in sequence than the one expected at the stop means damage, not a torn
//!   tail: the parse refuses the log (`Error::Corrupt`), as the kit's does. A record that does not fit before
//!   the end is preceded by a `WRAP` marker (or, if fewer than 48 bytes remain, an
//!   implicit wrap) and goes to offset 0 — the kit's scheme.
//! * **Link slots** (§3.2). The forward slot first holds the record's own timestamp
//!   (bit 63 clear: "stable timestamp", line 12 of Alg. 2) and later a [`link`] to the
//!   next transaction in timestamp order (bit 63 set). The backward slot holds a link to
//!   the previous transaction (0: none, the first of the run). Links are stored with
//!   Release and read with Acquire; they are flushed (except, where a fence is a device
//!   sync, a forward link into another slot's log: `thread`, step 9) but nothing relies
//!   on their durability: recovery orders records by their checksummed timestamps.
//! * **Point records** (the file medium). A transaction that found, before appending,
//!   every update transaction with a smaller timestamp persistent (the check of commit
//!   step 8, done ahead) writes its record as a *point*: once the record is valid,
//!   every transaction up to its timestamp is durable, so recovery counts its
//!   timestamp in the durable point as it counts a marker's, and the commit needs no
//!   marker write (`thread`, *Point records*). The kind is checksummed like the rest.
//! * **Conditional points** (kind 4). A transaction that found every older update
//!   transaction persistent except some that were already visible (their final
//!   timestamps published, their records certain to be appended) names those
//!   timestamps, at most [`MAX_DEPS`], in its record. Once the record is valid it is a
//!   durable point if every timestamp it names is: the timestamp of a valid record of
//!   the logs, or at or below the replay progress (`recovery`). Format 6 and later:
//!   a build that does not know kind 4 refuses such pools by their format version.
//! * The head word is written only by the replayer, after the records before it are
//!   applied durably; the writer reuses space only after the replayer says so
//!   (`released_seq`), so a record, or a wrap marker, is never overwritten while the
//!   replayer or recovery could need it (a wrap marker counts as live like a record:
//!   see [`LogWriter::fits`]).

use crate::engine::kit::log::magic_scan;
use crate::engine::kit::log::redo_log::PastStop;
use crate::engine::kit::recovery::prefetch::prefetch_home;
use crate::heap::Heap;
use crate::medium::counters;
use std::collections::VecDeque;
use std::sync::atomic::Ordering::{Acquire, Release};

crate::mutation::point! {
    /// Records are accepted without a valid checksum.
    pub(crate) static CHECKSUM = "checksum";
    /// A record is not flushed before the commit that wrote it counts as persisted.
    pub(crate) static LOG_FLUSH = "log-flush";
}

/// Record header size.
pub(super) const HEADER_LEN: usize = 48;
/// Offset of the ring in a log area.
pub(super) const RING_OFFSET: usize = 64;
const MAGIC: u32 = 0x5350_4854; // "SPHT"
const KIND_TX: u32 = 1;
const KIND_WRAP: u32 = 2;
/// A transaction record that is a durable point of its own (module docs).
const KIND_TX_POINT: u32 = 3;
/// A transaction record that is a durable point once the records it names are valid
/// (module docs).
const KIND_TX_COND: u32 = 4;
/// Most timestamps a conditional point names: a commit blocked by more takes the
/// marker path.
pub(super) const MAX_DEPS: usize = 16;
/// Bytes a conditional point's dependency list may add to a record.
pub(super) const MAX_DEPS_BYTES: usize = 8 + 8 * MAX_DEPS;
/// Offset of the forward link slot in a record.
pub(super) const FWD: usize = 32;
/// Offset of the backward link slot in a record.
pub(super) const BACK: usize = 40;
/// Bit 63 of a link slot: the slot holds a link, not a timestamp.
pub(super) const LINK_BIT: u64 = 1 << 63;

/// A link word naming the record at ring offset `pos` of slot `slot`.
#[inline]
pub(super) fn link(slot: usize, pos: usize) -> u64 {
    LINK_BIT | (slot as u64) << 32 | pos as u64
}

/// The (slot, ring offset) a link word names.
#[inline]
pub(super) fn unlink(l: u64) -> (usize, usize) {
    (((l & !LINK_BIT) >> 32) as usize, (l & 0xFFFF_FFFF) as usize)
}

fn checksum(len: u32, kind: u32, seq: u64, ts: u64, body: &[u8]) -> u32 {
    checksum_parts(len, kind, seq, ts, &[], body)
}

/// [`checksum`] of a body given in two pieces (a conditional point's dependency list,
/// then its entries).
fn checksum_parts(len: u32, kind: u32, seq: u64, ts: u64, deps: &[u8], entries: &[u8]) -> u32 {
    let mut h = [0u8; 28];
    h[0..4].copy_from_slice(&MAGIC.to_le_bytes());
    h[4..8].copy_from_slice(&len.to_le_bytes());
    h[8..12].copy_from_slice(&kind.to_le_bytes());
    h[12..20].copy_from_slice(&seq.to_le_bytes());
    h[20..28].copy_from_slice(&ts.to_le_bytes());
    // One pass over both pieces (the crate's value): recovery checksums every record.
    if deps.is_empty() {
        return crate::engine::kit::log::crc::crc32c_of(&h, entries);
    }
    let head = crate::engine::kit::log::crc::crc32c_of(&h, deps);
    crc32c::crc32c_append(head, entries)
}

fn header(kind: u32, seq: u64, ts: u64, deps: &[u8], entries: &[u8]) -> [u8; HEADER_LEN] {
    let len = (deps.len() + entries.len()) as u32;
    let mut h = [0u8; HEADER_LEN];
    h[0..4].copy_from_slice(&MAGIC.to_le_bytes());
    h[4..8].copy_from_slice(&len.to_le_bytes());
    h[8..12].copy_from_slice(&checksum_parts(len, kind, seq, ts, deps, entries).to_le_bytes());
    h[12..16].copy_from_slice(&kind.to_le_bytes());
    h[16..24].copy_from_slice(&seq.to_le_bytes());
    h[24..32].copy_from_slice(&ts.to_le_bytes());
    h[32..40].copy_from_slice(&ts.to_le_bytes()); // forward slot: own timestamp
    h
}

/// Where a slot's log lives.
#[derive(Clone, Copy, Debug)]
pub(super) struct Area {
    /// Offset of the log area.
    pub off: usize,
    /// Bytes of the ring.
    pub cap: usize,
}

impl Area {
    /// The log area of `slot`.
    pub(super) fn of(heap: &Heap, slot: usize) -> Area {
        let l = heap.layout();
        Area {
            off: l.log_offset(slot),
            cap: l.log_bytes_per_thread - RING_OFFSET,
        }
    }
    /// Pool offset of ring offset `pos`.
    #[inline]
    pub(super) fn at(&self, pos: usize) -> usize {
        self.off + RING_OFFSET + pos
    }
}

/// How a transaction record stands toward the durable point (its kind).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Standing {
    /// Durable once a marker covers its timestamp (kind 1).
    ByMarker,
    /// A durable point of its own once valid (kind 3).
    Point,
    /// A durable point once valid if every timestamp it names is (kind 4).
    Conditional,
}

impl Standing {
    fn kind(self) -> u32 {
        match self {
            Standing::ByMarker => KIND_TX,
            Standing::Point => KIND_TX_POINT,
            Standing::Conditional => KIND_TX_COND,
        }
    }
    fn of_kind(kind: u32) -> Standing {
        match kind {
            KIND_TX_POINT => Standing::Point,
            KIND_TX_COND => Standing::Conditional,
            _ => Standing::ByMarker,
        }
    }
}

/// Bytes of a conditional point's dependency list (count word and timestamps) for a
/// count word `n` read from a body of `len` bytes; `None` if no run writes it.
fn deps_prefix(n: u64, len: usize) -> Option<usize> {
    let n = usize::try_from(n).ok().filter(|&n| n <= MAX_DEPS)?;
    let bytes = 8 + 8 * n;
    (bytes <= len).then_some(bytes)
}

/// A record in a live log, read in place (the writer does not reuse its space before
/// the replayer releases it).
#[derive(Clone, Copy, Debug)]
pub(super) struct RecordRef {
    /// Slot.
    pub slot: usize,
    /// Ring offset.
    pub pos: usize,
    /// Sequence number.
    pub seq: u64,
    /// Timestamp.
    pub ts: u64,
    /// Body bytes (a conditional point's dependency list, then the entries).
    pub len: usize,
    /// Bytes of the body before the entries (a conditional point's dependency list).
    pub skip: usize,
    /// A wrap marker, not a transaction.
    pub is_wrap: bool,
    /// How the record stands toward the durable point.
    pub standing: Standing,
}

impl RecordRef {
    /// Read the header of the record at `pos` of `slot` (a record the caller knows is
    /// complete: reached through a link, or a published position).
    pub(super) fn read(heap: &Heap, slot: usize, pos: usize) -> RecordRef {
        let a = Area::of(heap, slot);
        let mut h = [0u8; 32];
        heap.read_bytes(a.at(pos), &mut h);
        let u32at = |i: usize| u32::from_le_bytes(h[i..i + 4].try_into().unwrap());
        let u64at = |i: usize| u64::from_le_bytes(h[i..i + 8].try_into().unwrap());
        let (len, kind) = (u32at(4) as usize, u32at(12));
        let standing = Standing::of_kind(kind);
        let skip = if standing == Standing::Conditional {
            let mut n = [0u8; 8];
            heap.read_bytes(a.at(pos) + HEADER_LEN, &mut n);
            deps_prefix(u64::from_le_bytes(n), len).unwrap_or(len)
        } else {
            0
        };
        RecordRef {
            slot,
            pos,
            seq: u64at(16),
            ts: u64at(24),
            len,
            skip,
            is_wrap: kind == KIND_WRAP,
            standing,
        }
    }
    /// The timestamps a conditional point names (none for other records).
    pub(super) fn deps(&self, heap: &Heap) -> Vec<u64> {
        let at = Area::of(heap, self.slot).at(self.pos) + HEADER_LEN + 8;
        let mut b = vec![0u8; self.skip.saturating_sub(8)];
        heap.read_bytes(at, &mut b);
        b.chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
            .collect()
    }
    /// Its link word.
    pub(super) fn link(&self) -> u64 {
        link(self.slot, self.pos)
    }
    /// The entry bytes, in place.
    pub(super) fn entries<'h>(&self, heap: &'h Heap) -> &'h [u8] {
        let a = Area::of(heap, self.slot);
        let off = a.at(self.pos) + HEADER_LEN + self.skip;
        let len = self.len - self.skip;
        assert!(heap.in_bounds(off, len));
        // SAFETY: in bounds; the bytes were written before the record was published
        // and are not rewritten before the replayer releases the record.
        unsafe { std::slice::from_raw_parts(heap.ptr(off), len) }
    }
    /// The forward link slot.
    pub(super) fn fwd(&self, heap: &Heap) -> u64 {
        heap.atomic_u64(Area::of(heap, self.slot).at(self.pos) + FWD)
            .load(Acquire)
    }
    /// The backward link slot.
    pub(super) fn back(&self, heap: &Heap) -> u64 {
        heap.atomic_u64(Area::of(heap, self.slot).at(self.pos) + BACK)
            .load(Acquire)
    }
    /// Ring offset just past this record, and the sequence number that follows.
    pub(super) fn end(&self, heap: &Heap) -> (usize, u64) {
        let cap = Area::of(heap, self.slot).cap;
        let mut e = self.pos + HEADER_LEN + self.len;
        if e == cap {
            e = 0;
        }
        (e, self.seq + 1)
    }
}

/// Store link `l` into slot `which` (`FWD` / `BACK`) of the record at `pos` of `slot`,
/// and flush it (the caller fences with its next fence).
pub(super) fn set_link(heap: &Heap, slot: usize, pos: usize, which: usize, l: u64) {
    store_link(heap, slot, pos, which, l);
    heap.flush(Area::of(heap, slot).at(pos) + which, 8);
}

/// [`set_link`] without the flush: the link reaches the medium with its page, whenever
/// that is written back (nothing relies on a link's durability: module docs).
pub(super) fn store_link(heap: &Heap, slot: usize, pos: usize, which: usize, l: u64) {
    let off = Area::of(heap, slot).at(pos) + which;
    // A forward link goes into the predecessor's record, in another slot's log.
    (which == FWD).then(|| crate::engine::kit::shared_counts::count_write(heap.atomic_u64(off)));
    heap.atomic_u64(off).store(l, Release);
}

/// Persist slot `slot`'s head word: the oldest record recovery must consider is at
/// ring offset `pos` with sequence number `seq`. Flushes; the caller fences.
pub(super) fn set_head(heap: &Heap, slot: usize, pos: usize, seq: u64) {
    let a = Area::of(heap, slot);
    heap.atomic_u64(a.off)
        .store((pos as u64) << 32 | (seq & 0xFFFF_FFFF), Release);
    heap.flush(a.off, 8);
}

/// Parse slot `slot`'s log from its persisted head: valid records in order (read in
/// place, checksums checked), and what [`walk`] returned: how far the valid records
/// reach, or the damage that ended the parse (the records before it are still listed).
/// Nobody else may append to or release the log meanwhile.
#[cfg_attr(not(feature = "tools"), allow(dead_code))] // read by the tools only
pub(super) fn parse(heap: &Heap, slot: usize) -> (Vec<RecordRef>, crate::Result<Walked>) {
    let mut out = Vec::new();
    let walked = walk(heap, slot, |rec, _| {
        out.push(*rec);
        Ok(())
    });
    (out, walked)
}

/// How far [`walk`] read a log.
#[derive(Clone, Copy, Debug)]
pub(super) struct Walked {
    /// The sequence number the log's next record must carry.
    pub next_seq: u64,
    /// Ring bytes from the head word's offset to the end of the last valid record,
    /// wrap gaps included: a record at ring offset `pos` was parsed only if
    /// [`ring_distance`] from the head to `pos` is below this.
    pub used: usize,
}

/// Ring bytes from ring offset `from` forward to ring offset `to` in a ring of `cap`
/// bytes.
#[inline]
pub(super) fn ring_distance(cap: usize, from: usize, to: usize) -> usize {
    (to + cap - from) % cap
}

/// The ring offset of the oldest record a slot's persisted head word names.
pub(super) fn head_pos(heap: &Heap, slot: usize) -> usize {
    (heap.atomic_u64(Area::of(heap, slot).off).load(Acquire) >> 32) as usize
}

/// Forward links as evidence: a record whose successor's link it holds was complete.
///
/// A transaction stores its link into its predecessor's forward slot only after its
/// own record's fence (commit steps 7 and 9), and a record's forward slot holds its own
/// timestamp until then (written with the record, one fence). So a valid record whose
/// forward slot holds a link proves the named record was once complete and durable.
/// If the predecessor is durable and not yet replayed (`replayed < ts <= durable
/// point`), its successor is not replayed either, so its space was never released: it
/// must be among the records its log's walk parsed. A link naming a record the walk did
/// not reach is damage that a torn-tail reading of that log would turn into silent
/// loss (the log's last records gone while the other logs' later records replay).
///
/// Records above the durable point prove nothing (a recovery that crashed after it
/// persisted `replayed` may have reset some logs and not others); records up to
/// `replayed` are applied, and their successors may be released.
pub(super) struct LinkCheck {
    cap: usize,
    heads: Vec<usize>,
    /// Per slot: the farthest record a checked link names, as (ring distance from the
    /// head, its ring offset, the linking record's slot and sequence number).
    farthest: Vec<Option<(usize, usize, usize, u64)>>,
}

impl LinkCheck {
    /// A check of the links into every slot's log, from their persisted head words.
    pub(super) fn new(heap: &Heap) -> LinkCheck {
        let n = heap.layout().max_threads;
        LinkCheck {
            cap: Area::of(heap, 0).cap,
            heads: (0..n).map(|s| head_pos(heap, s)).collect(),
            farthest: vec![None; n],
        }
    }

    /// Note the forward slot of `rec`, a valid, durable, not yet replayed record.
    /// A link word no run could have written (a slot or ring offset out of range) is
    /// damage.
    pub(super) fn note(&mut self, heap: &Heap, rec: &RecordRef) -> crate::Result<()> {
        self.note_fwd(rec.fwd(heap), rec.slot, rec.seq)
    }

    /// [`LinkCheck::note`] for a record of slot `slot` kept by a parse.
    pub(super) fn note_kept(&mut self, heap: &Heap, slot: usize, rec: LogRec) -> crate::Result<()> {
        self.note_fwd(rec.fwd(heap), slot, rec.seq(heap))
    }

    /// Note forward slot value `fwd` of record `seq` of slot `from`.
    fn note_fwd(&mut self, fwd: u64, from: usize, seq: u64) -> crate::Result<()> {
        if fwd & LINK_BIT == 0 {
            return Ok(());
        }
        let (slot, pos) = unlink(fwd);
        if slot >= self.heads.len() || pos + HEADER_LEN > self.cap || !pos.is_multiple_of(8) {
            return Err(crate::Error::corrupt(format!(
                "spht log record {seq} of thread slot {from}: its forward link {fwd:#018x} names no record of a log"
            )));
        }
        let dist = ring_distance(self.cap, self.heads[slot], pos);
        if self.farthest[slot].is_none_or(|(d, ..)| dist > d) {
            self.farthest[slot] = Some((dist, pos, from, seq));
        }
        Ok(())
    }

    /// Add the links another walk noted.
    pub(super) fn merge(&mut self, other: &LinkCheck) {
        for (mine, theirs) in self.farthest.iter_mut().zip(&other.farthest) {
            if let Some(t) = *theirs {
                if mine.is_none_or(|(d, ..)| t.0 > d) {
                    *mine = Some(t);
                }
            }
        }
    }

    /// Refuse a log whose walk (`used`, per slot) stopped before a record a noted link
    /// names.
    pub(super) fn check(&self, walked: &[Walked]) -> crate::Result<()> {
        for (slot, (far, w)) in self.farthest.iter().zip(walked).enumerate() {
            if let Some((dist, pos, from_slot, from_seq)) = *far {
                if dist >= w.used {
                    return Err(crate::Error::corrupt(format!(
                        "spht log of thread slot {slot}: the record at ring offset {pos:#x} is damaged or missing, but durable record {from_seq} of thread slot {from_slot} links to it (a record is linked only once complete): not a torn tail"
                    )));
                }
            }
        }
        Ok(())
    }
}

/// A record header whose magic, kind and length (8-aligned, inside the ring) can be a
/// record's, with its entry bytes and whether its checksum matches.
struct Header<'h> {
    kind: u32,
    seq: u64,
    ts: u64,
    /// The whole body (what the length covers).
    body_len: usize,
    /// Bytes of the body before the entries (a conditional point's dependency list).
    skip: usize,
    entries: &'h [u8],
    crc_ok: bool,
}

/// Read the header at ring offset `pos` of `ring` (the caller checked that a header
/// fits before the end). `None` if its magic, kind or length cannot be a record's.
fn read_header(ring: &[u8], pos: usize) -> Option<Header<'_>> {
    let h = &ring[pos..pos + HEADER_LEN];
    let u32at = |i: usize| u32::from_le_bytes(h[i..i + 4].try_into().unwrap());
    let u64at = |i: usize| u64::from_le_bytes(h[i..i + 8].try_into().unwrap());
    let (magic, len, crc, kind, seq, ts) = (
        u32at(0),
        u32at(4) as usize,
        u32at(8),
        u32at(12),
        u64at(16),
        u64at(24),
    );
    if magic != MAGIC || !matches!(kind, KIND_TX | KIND_WRAP | KIND_TX_POINT | KIND_TX_COND) {
        return None;
    }
    if !len.is_multiple_of(8) || len > ring.len() - pos - HEADER_LEN {
        return None;
    }
    let body = &ring[pos + HEADER_LEN..pos + HEADER_LEN + len];
    let skip = if kind == KIND_TX_COND {
        let n = u64::from_le_bytes(body.get(..8)?.try_into().unwrap());
        deps_prefix(n, len)?
    } else {
        0
    };
    Some(Header {
        kind,
        seq,
        ts,
        body_len: len,
        skip,
        entries: &body[skip..],
        crc_ok: crc == checksum(len as u32, kind, seq, ts, body),
    })
}

/// The ring of a log area, borrowed from the mapping. The caller guarantees what
/// [`walk`] requires: nobody appends to or releases the log while the borrow lives.
fn ring_bytes<'h>(heap: &'h Heap, a: &Area) -> &'h [u8] {
    let off = a.at(0);
    assert!(heap.in_bounds(off, a.cap), "spht log ring outside the pool");
    // SAFETY: in bounds (asserted) and the mapping lives as long as `heap`; nobody
    // writes the log while it is parsed (the caller's contract), so the shared borrow
    // aliases no write.
    unsafe { std::slice::from_raw_parts(heap.ptr(off), a.cap) }
}

/// Where [`walk`] stopped at an invalid record: its ring offset and the sequence
/// number expected there (`full`: the whole number is known; otherwise only its low
/// 32 bits, from the head word).
struct Stop {
    pos: usize,
    seq: u64,
    full: bool,
}

/// Tell a torn tail from damage after [`walk`] stopped at `stop` (the kit's rule, see
/// `kit::log::redo_log`, for this log's records).
///
/// A thread appends record n+1 only after record n's fence (its commit waits for its
/// record to persist), so at a crash only the last record, with the wrap marker before
/// it (flushed with it, one fence), can be partly durable. A valid record *later* in
/// sequence than the one expected at the stop proves that the expected record was once
/// complete: the stop is damage, and replaying the other slots without this one's
/// later records would build a state no sequence of transactions produced. Records of
/// earlier laps and runs carry smaller sequence numbers (recovery resets the head to
/// offset 0 with the next number; the writer reuses space only after the replayer's
/// head word passed it) and prove nothing.
///
/// Where later records can be: from the stop to the end of the ring, then from offset
/// 0 (after a wrap). Each look goes to the first valid record only: an earlier lap's
/// record there means the chain never reached it (it would have overwritten it), or
/// that the rest of the ring is a wrap marker's gap. Record e+1 alone at offset 0, too
/// long to have fitted after the stop, with nothing after it, is the torn wrap's own
/// record: a torn tail, after which the log goes on at e+2 (the record stays in the
/// ring; see `PastStop`). Damage goes unseen only if every later record is damaged too
/// (no scan could tell that from a torn tail).
fn look_past_stop(ring: &[u8], stop: &Stop) -> PastStop {
    let cap = ring.len();
    let distance = |seq: u64| -> i64 {
        if stop.full {
            seq.wrapping_sub(stop.seq) as i64
        } else {
            i64::from((seq as u32).wrapping_sub(stop.seq as u32) as i32)
        }
    };
    // The first valid record starting in `from..to`: (pos, record length, seq,
    // distance from the expected one).
    let first_valid = |from: usize, to: usize| -> Option<(usize, usize, u64, i64)> {
        // Only positions with room for a whole header before the ring's end.
        let end = to.min((cap + 1).saturating_sub(HEADER_LEN));
        let mut pos = from;
        // The magic rules out most positions before a header is decoded, a block of
        // them at a time (most of a ring past its chain is zero or an old lap's
        // entries).
        while let Some(at) = magic_scan::next_magic(ring, pos, end, MAGIC) {
            if let Some(h) = read_header(ring, at) {
                if h.crc_ok {
                    return Some((at, HEADER_LEN + h.body_len, h.seq, distance(h.seq)));
                }
            }
            pos = at + 8;
        }
        None
    };
    let damage = |pos: usize, seq: u64| {
        format!(
            "the record expected at ring offset {:#x} (sequence number {}{}) is damaged, but a later record follows (sequence number {seq} at ring offset {pos:#x}): not a torn tail",
            stop.pos,
            if stop.full { "" } else { "low 32 bits " },
            if stop.full { stop.seq } else { stop.seq & 0xFFFF_FFFF },
        )
    };
    crate::engine::kit::log::redo_log::later_record_after_stop(stop.pos, cap, first_valid, damage)
}

/// [`parse`] without a list: hand each valid transaction record, with its entry bytes
/// (in place, just checksummed, so still in the cache), to `each`, in sequence order,
/// and return the sequence number the next record must carry. Stops at the first
/// error `each` returns. A torn tail (the last record, partly persisted at a crash)
/// ends the log; an invalid record followed by a valid later one, or a head word
/// outside the ring, is damage: `Error::Corrupt`, naming the slot and the record.
/// Nobody else may append to or release the log meanwhile.
pub(super) fn walk<'h>(
    heap: &'h Heap,
    slot: usize,
    mut each: impl FnMut(&RecordRef, &'h [u8]) -> crate::Result<()>,
) -> crate::Result<Walked> {
    let a = Area::of(heap, slot);
    let ring = ring_bytes(heap, &a);
    let hw = heap.atomic_u64(a.off).load(Acquire);
    let mut pos = (hw >> 32) as usize;
    let seq_lo = hw & 0xFFFF_FFFF;
    let mut expected: Option<u64> = None;
    let mut next_seq = seq_lo;
    let mut consumed = 0usize;
    if pos >= a.cap || !pos.is_multiple_of(8) {
        // One 8-byte store writes the head word: it cannot be torn, only damaged.
        return Err(crate::Error::corrupt(format!(
            "spht log of thread slot {slot}: the head word {hw:#018x} points at ring offset {pos:#x}, outside the {}-byte ring or unaligned",
            a.cap
        )));
    }
    let stop = loop {
        if a.cap - pos < HEADER_LEN {
            consumed += a.cap - pos;
            pos = 0;
        }
        if consumed >= a.cap {
            break None;
        }
        let here = Stop {
            pos,
            seq: expected.unwrap_or(seq_lo),
            full: expected.is_some(),
        };
        // The log is read once, front to back, and is far larger than the caches: ask
        // for the lines a few records ahead (the hardware's stream prefetch stops at
        // each 4 KiB page).
        if pos + WALK_PREFETCH < a.cap {
            prefetch_home(heap, a.at(pos + WALK_PREFETCH));
        }
        let Some(h) = read_header(ring, pos) else {
            break Some(here);
        };
        let in_seq = match expected {
            None => h.seq & 0xFFFF_FFFF == seq_lo,
            Some(e) => h.seq == e,
        };
        if !in_seq {
            break Some(here);
        }
        let ok = h.crc_ok || crate::mutation::active!(CHECKSUM);
        if !ok {
            break Some(here);
        }
        let (seq, len) = (h.seq, h.body_len);
        expected = Some(seq + 1);
        next_seq = seq + 1;
        if h.kind == KIND_WRAP {
            consumed += a.cap - pos;
            pos = 0;
            continue;
        }
        let rec = RecordRef {
            slot,
            pos,
            seq,
            ts: h.ts,
            len,
            skip: h.skip,
            is_wrap: false,
            standing: Standing::of_kind(h.kind),
        };
        // In place: the caller has the pool to itself (recovery, inspection).
        each(&rec, h.entries)?;
        consumed += HEADER_LEN + len;
        pos += HEADER_LEN + len;
        if pos == a.cap {
            pos = 0;
        }
    };
    if let Some(stop) = stop {
        next_seq = look_past_stop(ring, &stop)
            .next_seq(next_seq)
            .map_err(|d| crate::Error::corrupt(format!("spht log of thread slot {slot}: {d}")))?;
    }
    Ok(Walked {
        next_seq,
        used: consumed.min(a.cap),
    })
}

/// Recompute the checksum of the transaction record at ring offset `pos` of `slot`
/// after a test changed its entries (a damage the checksum cannot see).
#[cfg(test)]
pub(super) fn reseal(heap: &Heap, slot: usize, pos: usize) {
    let r = RecordRef::read(heap, slot, pos);
    let off = Area::of(heap, slot).at(pos) + HEADER_LEN;
    let mut body = vec![0u8; r.len];
    heap.read_bytes(off, &mut body);
    let c = checksum(r.len as u32, r.standing.kind(), r.seq, r.ts, &body);
    heap.write_bytes(Area::of(heap, slot).at(pos) + 8, &c.to_le_bytes());
}

/// How far ahead of the record it checks [`walk`] prefetches the log.
const WALK_PREFETCH: usize = 1024;

/// A parsed record in 8 bytes (recovery's tables: millions of them): the pool offset
/// of its header (bits 0..48), the replay parts its data entries write (bits 48..63,
/// see `kit::recovery::replay_parts`), and in bit 63 whether it holds allocator entries. Its
/// length and timestamp stay in the log, read again from the header when needed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct LogRec(u64);

/// Bit 63 of a [`LogRec`]: the record holds allocator entries.
const ALLOCATES: u64 = 1 << 63;
/// Where a [`LogRec`]'s replay parts start.
const PARTS_SHIFT: u32 = 48;
/// The pool-offset bits of a [`LogRec`].
const OFF_MASK: u64 = (1 << PARTS_SHIFT) - 1;

impl LogRec {
    /// Most replay parts a record can name (the bits between the offset and
    /// [`ALLOCATES`]); recovery with more threads replays with this many.
    pub(super) const MAX_PARTS: usize = 15;

    /// The record at ring offset `pos` of `slot`; `allocates`: it holds allocator
    /// entries; `parts`: the replay parts its data entries write (bit p: part p, for
    /// at most [`LogRec::MAX_PARTS`] parts).
    pub(super) fn new(heap: &Heap, slot: usize, pos: usize, allocates: bool, parts: u32) -> LogRec {
        let off = Area::of(heap, slot).at(pos) as u64;
        // A pool is far below 2^48 bytes (the address space of a process).
        assert!(off <= OFF_MASK && parts < 1 << Self::MAX_PARTS);
        let parts = u64::from(parts) << PARTS_SHIFT;
        LogRec(off | parts | if allocates { ALLOCATES } else { 0 })
    }
    /// Pool offset of its header.
    #[inline]
    pub(super) fn off(self) -> usize {
        (self.0 & OFF_MASK) as usize
    }
    /// It holds allocator entries.
    #[inline]
    pub(super) fn allocates(self) -> bool {
        self.0 & ALLOCATES != 0
    }
    /// The replay parts its data entries write (bit p: part p).
    #[inline]
    pub(super) fn parts(self) -> u32 {
        ((self.0 & !ALLOCATES) >> PARTS_SHIFT) as u32
    }
    /// Its sequence number (from the header).
    pub(super) fn seq(self, heap: &Heap) -> u64 {
        let mut b = [0u8; 8];
        heap.read_bytes(self.off() + 16, &mut b);
        u64::from_le_bytes(b)
    }
    /// Its timestamp (from the header: the same line as its links).
    #[inline]
    pub(super) fn ts(self, heap: &Heap) -> u64 {
        let mut b = [0u8; 8];
        heap.read_bytes(self.off() + 24, &mut b);
        u64::from_le_bytes(b)
    }
    /// Its forward link slot.
    pub(super) fn fwd(self, heap: &Heap) -> u64 {
        heap.atomic_u64(self.off() + FWD).load(Acquire)
    }
    /// Its backward link slot.
    pub(super) fn back(self, heap: &Heap) -> u64 {
        heap.atomic_u64(self.off() + BACK).load(Acquire)
    }
    /// The entry bytes, in place (a record [`walk`] returned, in a log nobody writes).
    #[inline]
    pub(super) fn entries(self, heap: &Heap) -> &[u8] {
        let mut b = [0u8; 16];
        heap.read_bytes(self.off() + 4, &mut b[..12]);
        let len = u32::from_le_bytes(b[0..4].try_into().unwrap()) as usize;
        let mut skip = 0;
        if u32::from_le_bytes(b[8..12].try_into().unwrap()) == KIND_TX_COND {
            heap.read_bytes(self.off() + HEADER_LEN, &mut b[..8]);
            // The parse accepted the record, so its count fits the body.
            skip = deps_prefix(u64::from_le_bytes(b[..8].try_into().unwrap()), len).unwrap_or(len);
        }
        let (off, len) = (self.off() + HEADER_LEN + skip, len - skip);
        assert!(heap.in_bounds(off, len));
        // SAFETY: in bounds; the bytes were checksummed by the parse and are not
        // rewritten while recovery (the only user) runs.
        unsafe { std::slice::from_raw_parts(heap.ptr(off), len) }
    }
}

/// The writer side of one slot's log.
#[derive(Debug)]
pub(crate) struct LogWriter {
    slot: usize,
    area: Area,
    head: usize,
    next_seq: u64,
    /// Records and wrap markers not yet released by the replayer: (seq, ring offset),
    /// oldest first.
    live: VecDeque<(u64, usize)>,
}

impl LogWriter {
    /// Writer of an empty log (recovery reset it) whose next record has `next_seq`.
    pub(crate) fn new(heap: &Heap, slot: usize, next_seq: u64) -> LogWriter {
        LogWriter {
            slot,
            area: Area::of(heap, slot),
            head: 0,
            next_seq,
            live: VecDeque::new(),
        }
    }

    /// Largest record (header + entries) this log accepts: a third of the ring.
    ///
    /// The replayer keeps its cursor (the newest replayed record) until the next batch,
    /// so a writer whose log holds nothing else must still fit its record, with no other
    /// thread committing. With records of at most a third, it does: the cursor takes at
    /// most a third (plus a wrap waste smaller than itself when it sits at offset 0),
    /// so either the space after it or the space before it holds another third. With
    /// half, a cursor in the middle of the ring left neither, and the writer waited
    /// for a batch that only another thread's commit could start.
    pub(crate) fn max_record(&self) -> usize {
        self.area.cap / 3
    }

    /// True if a record of `entries_len` entry bytes fits now: the live records and
    /// wrap markers occupy the ring from the oldest one's offset (`tail`) to `head`; a
    /// record goes at `head` if it fits before the end, else at offset 0 (after a wrap),
    /// and must not reach `tail`. A wrap marker is live until the replayer releases its
    /// sequence number: the replayer's head, and the head word recovery parses from,
    /// can name it, and the record after it is reached only through it. (Once the
    /// marker is released the space it skipped is free again, even while the record
    /// after it is live: releasing up to a record releases the marker before it.)
    pub(crate) fn fits(&self, entries_len: usize) -> bool {
        let rec_len = HEADER_LEN + entries_len;
        let (cap, head) = (self.area.cap, self.head);
        match self.live.front() {
            None => rec_len <= cap,
            Some(&(_, tail)) if head > tail => rec_len <= cap - head || rec_len <= tail,
            Some(&(_, tail)) if head < tail => head + rec_len <= tail,
            // head == tail with live records: the ring is exactly full.
            Some(_) => false,
        }
    }

    /// Release the records the replayer applied (`seq < released_seq`).
    pub(crate) fn reclaim(&mut self, released_seq: u64) {
        while let Some(&(seq, _)) = self.live.front() {
            if seq >= released_seq {
                break;
            }
            self.live.pop_front();
        }
    }

    /// Sequence number of the next record (tests).
    #[cfg(test)]
    pub(crate) fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// Records and wrap markers not yet released (tests).
    #[cfg(test)]
    pub(crate) fn live_records(&self) -> usize {
        self.live.len()
    }

    /// Append a record with timestamp `ts` (the caller checked `fits` for the entries
    /// and [`MAX_DEPS_BYTES`]) standing as `standing` (module docs), naming `deps` if it
    /// is a conditional point, and flush it (the caller fences). Returns its ring
    /// offset.
    pub(crate) fn append(
        &mut self,
        heap: &Heap,
        entries: &[u8],
        ts: u64,
        standing: Standing,
        deps: &[u64],
    ) -> usize {
        debug_assert_eq!(standing == Standing::Conditional, !deps.is_empty());
        debug_assert!(deps.len() <= MAX_DEPS);
        let mut prefix = [0u8; MAX_DEPS_BYTES];
        let prefix_len = if deps.is_empty() {
            0
        } else {
            8 + 8 * deps.len()
        };
        prefix[..8].copy_from_slice(&(deps.len() as u64).to_le_bytes());
        for (i, d) in deps.iter().enumerate() {
            prefix[8 + 8 * i..16 + 8 * i].copy_from_slice(&d.to_le_bytes());
        }
        let prefix = &prefix[..prefix_len];
        let rec_len = HEADER_LEN + prefix_len + entries.len();
        debug_assert!(self.fits(prefix_len + entries.len()));
        if rec_len > self.area.cap - self.head {
            if self.area.cap - self.head >= HEADER_LEN {
                let h = header(KIND_WRAP, self.next_seq, 0, &[], &[]);
                heap.write_bytes(self.area.at(self.head), &h);
                heap.flush(self.area.at(self.head), HEADER_LEN);
                self.live.push_back((self.next_seq, self.head));
                self.next_seq += 1;
            }
            self.head = 0;
        }
        let seq = self.next_seq;
        self.next_seq += 1;
        let pos = self.head;
        let at = self.area.at(pos);
        heap.write_bytes(at + HEADER_LEN, prefix);
        heap.write_bytes(at + HEADER_LEN + prefix_len, entries);
        // The link slots are atomics (others read them): write the header's first 32
        // bytes plainly, then the two slots atomically.
        let h = header(standing.kind(), seq, ts, prefix, entries);
        heap.write_bytes(at, &h[..32]);
        heap.atomic_u64(at + FWD).store(ts, Release);
        heap.atomic_u64(at + BACK).store(0, Release);
        if !crate::mutation::active!(LOG_FLUSH) {
            heap.flush(at, rec_len);
        }
        counters::add_bytes_logged(rec_len as u64);
        self.live.push_back((seq, pos));
        self.head += rec_len;
        if self.head == self.area.cap {
            self.head = 0;
        }
        let _ = self.slot;
        pos
    }
}
