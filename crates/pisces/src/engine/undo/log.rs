//! The `undo` engine's log format: one log area per thread slot.
//!
//! ```text
//! word 0            commit marker: the last finished transaction's sequence number
//! from offset 64    entries: crc u32 | kind u32 | seq u64 | off u64 | len u64 |
//!                   data (len bytes, rounded up to 8; DATA entries only)
//! ```
//! Kinds: `DATA` (an object's old contents, `off` its payload), `ALLOC` / `FREE` (a
//! block: `off` its header word, `len` its size). The CRC32C covers the header from
//! `kind` and the data. Entries of one transaction carry its sequence number; those
//! at or below the commit marker are finished and ignored.
//!
//! Each entry is persisted before the in-place change it undoes, so a torn entry (it
//! fails its checksum and ends the parse) undoes nothing that happened.

use crate::heap::Heap;
use crate::{Error, Result};
use std::sync::atomic::Ordering::Acquire;

/// Bytes of an entry's header.
pub(super) const ENTRY_HDR: usize = 32;
/// Offset of the first entry in a log area (after the commit marker's line).
pub(super) const ENTRIES_OFFSET: usize = 64;
/// An object's old contents.
pub(super) const K_DATA: u32 = 1;
/// A block the transaction allocated.
pub(super) const K_ALLOC: u32 = 2;
/// A block the transaction freed.
pub(super) const K_FREE: u32 = 3;

/// A parsed undo entry.
#[derive(Debug)]
pub(super) struct UndoEntry {
    pub(super) kind: u32,
    pub(super) off: u64,
    pub(super) len: u64,
    pub(super) data: Vec<u8>,
}

/// The header of an entry of `kind` for transaction `seq` (its checksum over the
/// header and `data`).
pub(super) fn entry_header(
    kind: u32,
    seq: u64,
    off: u64,
    len: u64,
    data: &[u8],
) -> [u8; ENTRY_HDR] {
    let mut h = [0u8; ENTRY_HDR];
    h[0..4].copy_from_slice(&entry_crc(kind, seq, off, len, data).to_le_bytes());
    h[4..8].copy_from_slice(&kind.to_le_bytes());
    h[8..16].copy_from_slice(&seq.to_le_bytes());
    h[16..24].copy_from_slice(&off.to_le_bytes());
    h[24..32].copy_from_slice(&len.to_le_bytes());
    h
}

fn entry_crc(kind: u32, seq: u64, off: u64, len: u64, data: &[u8]) -> u32 {
    let mut h = [0u8; 28];
    h[0..4].copy_from_slice(&kind.to_le_bytes());
    h[4..12].copy_from_slice(&seq.to_le_bytes());
    h[12..20].copy_from_slice(&off.to_le_bytes());
    h[20..28].copy_from_slice(&len.to_le_bytes());
    crc32c::crc32c_append(crc32c::crc32c(&h), data)
}

/// Entries of slot `area`'s log newer than its commit marker (recovery, in log order),
/// or `Err(Corrupt)` if the parse stopped at a damaged entry that is not a torn tail.
///
/// Entries are appended in order, each persisted before the next is written, so at a
/// crash only the last one can be torn. A checksum-valid entry of an unfinished
/// transaction (sequence number above the commit marker) anywhere after the stop proves
/// the entry at the stop was complete once: undoing only the entries before it would
/// leave the later ones' in-place writes, so the pool is refused. Entries of finished
/// transactions (at or below the marker) left further on prove nothing.
pub(super) fn parse(heap: &Heap, area: usize, area_len: usize) -> Result<(u64, Vec<UndoEntry>)> {
    let committed = heap.atomic_u64(area).load(Acquire);
    let mut pos = ENTRIES_OFFSET;
    let mut out = Vec::new();
    let mut seq_of_tx = None;
    let stop = loop {
        if pos + ENTRY_HDR > area_len {
            break None;
        }
        let (crc, kind, seq, off, len) = read_header(heap, area + pos);
        if seq <= committed || seq_of_tx.is_some_and(|s| s != seq) {
            break Some(pos);
        }
        let dlen = if kind == K_DATA { len as usize } else { 0 };
        // Checked: a torn entry's length word is garbage, and a wrapped sum would pass
        // the bound and allocate `dlen` bytes.
        let end = dlen
            .checked_next_multiple_of(8)
            .and_then(|p| (pos + ENTRY_HDR).checked_add(p));
        if !(K_DATA..=K_FREE).contains(&kind) || end.is_none_or(|e| e > area_len) {
            break Some(pos);
        }
        let padded = dlen.next_multiple_of(8);
        let mut data = vec![0u8; dlen];
        heap.read_bytes(area + pos + ENTRY_HDR, &mut data);
        if crc != entry_crc(kind, seq, off, len, &data) {
            break Some(pos);
        }
        seq_of_tx = Some(seq);
        out.push(UndoEntry {
            kind,
            off,
            len,
            data,
        });
        pos += ENTRY_HDR + padded;
    };
    if let Some(at) = stop {
        if let Some(later) = later_entry(heap, area, area_len, at, committed) {
            return Err(Error::corrupt(format!(
                "undo log at {area:#x}: the entry at offset {at:#x} is damaged, but a later entry of an unfinished transaction follows at offset {later:#x}: not a torn tail"
            )));
        }
    }
    Ok((seq_of_tx.unwrap_or(committed), out))
}

/// The header fields of the entry at pool offset `at`: (crc, kind, seq, off, len).
fn read_header(heap: &Heap, at: usize) -> (u32, u32, u64, u64, u64) {
    let mut h = [0u8; ENTRY_HDR];
    heap.read_bytes(at, &mut h);
    let u32at = |i: usize| u32::from_le_bytes(h[i..i + 4].try_into().unwrap());
    let u64at = |i: usize| u64::from_le_bytes(h[i..i + 8].try_into().unwrap());
    (u32at(0), u32at(4), u64at(8), u64at(16), u64at(24))
}

/// Offset of a checksum-valid entry with a sequence number above `committed` after
/// `at` (see `parse`).
fn later_entry(
    heap: &Heap,
    area: usize,
    area_len: usize,
    at: usize,
    committed: u64,
) -> Option<usize> {
    let mut pos = at + 8;
    while pos + ENTRY_HDR <= area_len {
        let (crc, kind, seq, off, len) = read_header(heap, area + pos);
        if seq > committed && (K_DATA..=K_FREE).contains(&kind) {
            let dlen = if kind == K_DATA { len as usize } else { 0 };
            if dlen <= area_len - pos - ENTRY_HDR {
                let mut data = vec![0u8; dlen];
                heap.read_bytes(area + pos + ENTRY_HDR, &mut data);
                if crc == entry_crc(kind, seq, off, len, &data) {
                    return Some(pos);
                }
            }
        }
        pos += 8;
    }
    None
}
