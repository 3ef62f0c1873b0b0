//! The operation table and the OLog format word: what the compact OLog records need
//! in the engine area.
//!
//! # Operation table
//! An OLog operation record names its operation by a 7-bit index (the 32-bit ids do
//! not fit its 16-byte header; see [`super::olog`] on operation records). The
//! table maps indices to ids, persistently: slot `i` (8 bytes at [`TABLE_OFFSET`] +
//! 8 i) holds `1 << 32 | id`, or 0 while unused. Slots are taken in order and never
//! change once set, so the table only grows, and an index in a record means the same
//! id for the life of the pool.
//!
//! *Ordering invariant*: a slot is persisted (flushed and fenced) before the first
//! record naming its index is appended, so a durable record's index is always in the
//! durable table. A crash between the two leaves an unused entry: harmless. The slot
//! is one aligned 8-byte store, so it is never torn. An operation whose id finds no
//! free slot (more than [`SLOTS`] distinct ids in one pool) is logged with the
//! general entries (its id in an 8-byte entry word) instead.
//!
//! # Format word
//! [`FORMAT_OFFSET`] holds [`OLOG_FORMAT`]. Earlier builds wrote OLog records with a
//! 32-bit sequence field and no operation records, and left the word zero; this build
//! cannot read their logs (a record it cannot read would look torn and be dropped
//! silently), so a pool with a zero word is refused unless it has never committed
//! anything (every OLog tail word zero, no checkpoint, no CLog record), in which case
//! the word is written.

use crate::fasthash::FastMap;
use crate::heap::layout::ENGINE_AREA_OFFSET;
use crate::heap::Heap;
use crate::{Error, Result};
use std::sync::atomic::Ordering::{Acquire, Relaxed};
use std::sync::Mutex;

/// Offset of the OLog format word.
pub(super) const FORMAT_OFFSET: usize = ENGINE_AREA_OFFSET + 192;
/// The OLog format this build writes and reads: compact records with 16 sequence
/// bits and operation records with run words and packed arguments (format 2 had
/// neither, and 8-bit operation indices).
pub(super) const OLOG_FORMAT: u64 = 3;
/// Offset of the operation table.
pub(super) const TABLE_OFFSET: usize = ENGINE_AREA_OFFSET + 256;
/// Slots of the operation table (indices 0..=126: the record's index field has 8
/// bits, and its top bit says whether the arguments are packed).
pub(super) const SLOTS: usize = 127;
const USED: u64 = 1 << 32;

/// Check the format word of a pool being opened (module docs), writing it if the
/// pool is `fresh` (has never committed anything).
pub(super) fn check_format(heap: &Heap, fresh: bool) -> Result<()> {
    check_format_read_only(heap, fresh)?;
    // Acquire: open runs alone; any ordering would do.
    if heap.atomic_u64(FORMAT_OFFSET).load(Acquire) == 0 {
        // Relaxed: nobody else uses the pool yet; the persist makes it durable.
        heap.atomic_u64(FORMAT_OFFSET).store(OLOG_FORMAT, Relaxed);
        heap.persist(FORMAT_OFFSET, 8);
    }
    Ok(())
}

/// [`check_format`] without writing anything (`pisces info` / `check`).
pub(super) fn check_format_read_only(heap: &Heap, fresh: bool) -> Result<()> {
    // Acquire: inspection and open run alone; any ordering would do.
    match heap.atomic_u64(FORMAT_OFFSET).load(Acquire) {
        OLOG_FORMAT => Ok(()),
        0 if fresh => Ok(()),
        0 => Err(Error::corrupt(format!(
            "this timestone pool's operation log is in format 0: its format word in the \
             engine area is zero although the pool has been used, so the engine area is \
             damaged (or a build older than format 1 wrote it); this build reads format \
             {OLOG_FORMAT} only"
        ))),
        v => Err(Error::corrupt(format!(
            "this timestone pool's operation log is in format {v} (written by another \
             build), and this build reads format {OLOG_FORMAT} only: recreate the pool"
        ))),
    }
}

/// The operation table (module docs): volatile map and persistent slots.
pub(crate) struct OpTable {
    /// id → index, and the next free slot.
    inner: Mutex<(FastMap<u32, u8>, usize)>,
    /// index → id, for recovery.
    ids: Vec<u32>,
}

impl OpTable {
    /// Read the table of `heap`; `Err(Corrupt)` if it is not a sequence of used slots
    /// followed by unused ones, with distinct ids.
    pub(crate) fn load(heap: &Heap) -> Result<OpTable> {
        let mut map = FastMap::default();
        let mut ids = Vec::new();
        let mut end = None;
        for i in 0..SLOTS {
            // Acquire: open runs alone; any ordering would do.
            let w = heap.atomic_u64(TABLE_OFFSET + 8 * i).load(Acquire);
            let bad = |m: &str| {
                Err(Error::corrupt(format!(
                    "timestone operation table: slot {i} ({w:#x}) {m}"
                )))
            };
            match (w, end) {
                (0, _) => {
                    end.get_or_insert(i);
                }
                (_, Some(_)) => return bad("is used after an unused slot"),
                (w, None) if w >> 32 != 1 => return bad("is not an entry"),
                (w, None) => {
                    if map.insert(w as u32, i as u8).is_some() {
                        return bad("repeats an id");
                    }
                    ids.push(w as u32);
                }
            }
        }
        let next = end.unwrap_or(SLOTS);
        Ok(OpTable {
            inner: Mutex::new((map, next)),
            ids,
        })
    }

    /// The index of operation `id`, taking (and persisting) a slot the first time;
    /// `None` when the table is full.
    pub(crate) fn index_of(&self, heap: &Heap, id: u32) -> Option<u8> {
        let mut g = crate::engine::kit::shared_counts::lock(&self.inner);
        if let Some(&i) = g.0.get(&id) {
            return Some(i);
        }
        let i = g.1;
        if i >= SLOTS {
            return None;
        }
        // Relaxed: the slot is written under the mutex only; readers are recovery
        // (alone) and this thread; the persist (with its fence) orders it before the
        // record that names it (the invariant of the module docs).
        heap.atomic_u64(TABLE_OFFSET + 8 * i)
            .store(USED | u64::from(id), Relaxed);
        heap.persist(TABLE_OFFSET + 8 * i, 8);
        crate::medium::counters::add_bytes_metadata(8);
        g.0.insert(id, i as u8);
        g.1 = i + 1;
        Some(i as u8)
    }

    /// The id of index `i`, as loaded at open (recovery).
    pub(crate) fn id_at(&self, i: u8) -> Option<u32> {
        self.ids.get(usize::from(i)).copied()
    }
}
