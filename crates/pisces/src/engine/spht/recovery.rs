//! Recovery on open: the same replay as the background replayer, on every record the
//! crash left durable.
//!
//! 1. D = the durable point (`max(pmarker, slot markers)`), R = the `replayed` word.
//! 2. Parse every slot's log from its persisted head; keep the records with
//!    `R < ts ≤ D`. Records above D belong to transactions whose commit never returned
//!    (a transaction returns only once the marker covers it) and are dropped; records
//!    up to R are already applied.
//! 3. Order them by timestamp. **Decision:** recovery sorts instead of following the
//!    links. At run time the links of every transaction up to the durable point exist
//!    (see `replayer`), but a crash can persist the marker CASed by a larger transaction
//!    before a smaller one's link reached the medium (links are written after the
//!    record's fence and are not on the durability path); the checksummed timestamps
//!    always are. Sorting costs O(n log n) once per open.
//! 4. Decode and validate every entry before writing anything (a damaged pool is
//!    refused unchanged), then apply them with `apply` — the replayer's code: allocator
//!    entries in order, data words on `OpenCtx::recovery_threads` shards, backward with
//!    the duplicate filter or forward, as the pool's options say.
//! 5. Persist `replayed = max(R, D)`, then reset every log (head at 0, next sequence
//!    number) and fence. A crash anywhere repeats the same steps over the same records.
//!
//! The new run's clock starts above every timestamp seen (D, R and every record), so
//! its records sort after everything here.

use super::apply;
use super::durability::{durable_point, persist_replayed, replayed};
use super::log;
use super::options::ReplayMode;
use crate::engine::kit::objects::check_logged_write;
use crate::engine::kit::redo_log::{decode, Entry};
use crate::heap::alloc::Allocator;
use crate::heap::Heap;
use crate::{Error, Result};

/// What recovery found.
#[derive(Debug, Clone)]
pub struct Recovered {
    /// Largest timestamp in the pool (markers, progress, records).
    pub max_ts: u64,
    /// Next sequence number of each slot's log.
    pub next_seq: Vec<u64>,
    /// The `replayed` word after recovery.
    pub replayed_ts: u64,
}

fn validate(heap: &Heap, entries: &[Entry<'_>]) -> Result<()> {
    for e in entries {
        match *e {
            Entry::Word { off, .. } => check_logged_write(heap, off, 8)?,
            Entry::Range { off, data } => check_logged_write(heap, off, data.len())?,
            Entry::Alloc(b) | Entry::Free(b) => Allocator::check_block(heap, b)?,
            Entry::Op { .. } => {
                return Err(Error::Corrupt(
                    "an operation entry (TimeStone's) in an spht log".into(),
                ))
            }
        }
    }
    Ok(())
}

/// Run recovery on a pool nobody uses yet.
pub fn recover(heap: &Heap, mode: ReplayMode, shards: usize) -> Result<Recovered> {
    let n = heap.layout().max_threads;
    let d = durable_point(heap);
    let r = replayed(heap);
    let mut max_ts = d.max(r);
    let mut records = Vec::new();
    let mut next_seq = Vec::with_capacity(n);
    for slot in 0..n {
        let (recs, next) = log::parse(heap, slot);
        next_seq.push(next);
        for p in recs {
            max_ts = max_ts.max(p.ts);
            if p.ts > r && p.ts <= d {
                records.push((p.ts, slot, p.seq, p.entries));
            }
        }
    }
    records.sort_by_key(|x| x.0);
    let mut batch = Vec::with_capacity(records.len());
    for (_, slot, seq, bytes) in &records {
        let entries = decode(bytes)
            .and_then(|e| validate(heap, &e).map(|()| e))
            .map_err(|e| {
                Error::Corrupt(format!("spht log record {seq} of thread slot {slot}: {e}"))
            })?;
        batch.push(entries);
    }
    if !batch.is_empty() {
        apply::apply(heap, &batch, mode, shards)?;
    }
    let replayed_ts = r.max(d);
    if d > r {
        persist_replayed(heap, d);
    }
    for (slot, &seq) in next_seq.iter().enumerate() {
        log::set_head(heap, slot, 0, seq);
    }
    heap.fence();
    Ok(Recovered {
        max_ts,
        next_seq,
        replayed_ts,
    })
}

/// Live records and markers, for `pisces info` / `check` (writes nothing).
pub fn inspect(heap: &Heap) -> crate::engine::Inspection {
    let n = heap.layout().max_threads;
    let d = durable_point(heap);
    let r = replayed(heap);
    let mut lines = vec![format!("durable point  {d}"), format!("replayed up to {r}")];
    let mut problems = Vec::new();
    let mut per_slot = Vec::new();
    let mut pending = 0;
    for slot in 0..n {
        let (recs, _) = log::parse(heap, slot);
        let mut live = 0;
        for p in &recs {
            if p.ts <= r {
                continue;
            }
            live += 1;
            if p.ts <= d {
                pending += 1;
            }
            if let Err(e) = decode(&p.entries).and_then(|e| validate(heap, &e)) {
                problems.push(format!("log: slot {slot} record {}: {e}", p.seq));
            }
        }
        per_slot.push(live.to_string());
    }
    lines.push(format!(
        "live records   {} durable, unreplayed (per slot: {})",
        pending,
        per_slot.join(" ")
    ));
    crate::engine::Inspection { lines, problems }
}
