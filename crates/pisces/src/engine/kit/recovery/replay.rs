//! Recovery (§3.4): replay the durable redo records in persistTS order.
//!
//! 1. Read the watermark W; parse every slot's log from its persisted tail; keep the
//!    valid records with persistTS ≥ W (records below W are written back already). A
//!    log damaged other than by a torn tail (see `log::parse`) refuses the pool with
//!    `Error::Corrupt` naming the slot and record, before anything is written.
//! 2. Replay them in persistTS order (ties between slots in any order: transactions
//!    with equal persistTS are independent), each entry validated before it is
//!    applied; flush; fence.
//! 3. Raise W past every replayed record and persist it: this one 8-byte store retires
//!    all records at once, so a crash in step 4 cannot replay only part of them.
//! 4. Reset every log to empty, its next sequence number past any an unfenced run may
//!    have left valid beyond the chain (`log`, "Unfenced runs"), and persist.
//!
//! A crash anywhere re-runs the same steps: before step 3 the same records replay
//! again over the same home locations (idempotent: each entry writes absolute values,
//! allocator entries set or clear bits); after it, nothing replays.

use crate::engine::kit::log::redo_log::{self as log, Entry};
use crate::heap::alloc::Allocator;
use crate::heap::Heap;
use crate::{Error, Result};

/// What recovery found and did.
#[derive(Debug, Clone, Default)]
pub(crate) struct Recovered {
    /// Where globalTS starts in the new run.
    pub clock_start: u64,
    /// Next log sequence number of each slot.
    pub next_seq: Vec<u64>,
}

fn check_target(heap: &Heap, off: u64, len: usize) -> Result<()> {
    crate::engine::kit::validate::check_logged_write(heap, off, len)
}

/// Check that every entry of a record names a place a transaction could have written.
fn validate(heap: &Heap, entries: &[Entry<'_>]) -> Result<()> {
    for e in entries {
        match *e {
            Entry::Word { off, .. } => check_target(heap, off, 8)?,
            Entry::Range { off, data } => check_target(heap, off, data.len())?,
            Entry::Alloc(b) | Entry::Free(b) => Allocator::check_block(heap, b)?,
            Entry::Op { id, .. } => {
                return Err(Error::corrupt(format!(
                    "operation entry (id {id}) in a redo log"
                )))
            }
        }
    }
    Ok(())
}

/// Apply one record's entries (validated) and flush what they touch.
fn apply(heap: &Heap, entries: &[Entry<'_>]) -> Result<()> {
    for e in entries {
        match *e {
            Entry::Word { off, value } => {
                check_target(heap, off, 8)?;
                heap.write_bytes(off as usize, &value.to_le_bytes());
                heap.flush(off as usize, 8);
            }
            Entry::Range { off, data } => {
                check_target(heap, off, data.len())?;
                heap.write_bytes(off as usize, data);
                heap.flush(off as usize, data.len());
            }
            Entry::Alloc(b) => Allocator::replay_alloc(heap, b)?,
            Entry::Free(b) => Allocator::replay_free(heap, b)?,
            Entry::Op { id, .. } => {
                return Err(Error::corrupt(format!(
                    "operation entry (id {id}) in a redo log"
                )))
            }
        }
    }
    Ok(())
}

/// Run recovery on a pool nobody else uses yet.
pub(crate) fn recover(heap: &Heap) -> Result<Recovered> {
    let l = *heap.layout();
    let stored = crate::engine::kit::log::watermark::load(heap)?;
    let w = stored.unwrap_or(0);
    let mut records = Vec::new();
    let mut next_seq = Vec::with_capacity(l.max_threads);
    for slot in 0..l.max_threads {
        let parsed = log::parse(heap, l.log_offset(slot), l.log_bytes_per_thread);
        if let Some(d) = parsed.damage {
            // Replaying the other threads' records without this thread's later ones
            // would lose committed transactions silently: refuse, unchanged.
            return Err(Error::corrupt(format!("log of thread slot {slot}: {d}")));
        }
        // Past every sequence number an unfenced run may have left valid beyond the
        // chain's end (`log`, "Unfenced runs"): the new chain never meets one.
        next_seq.push(parsed.next_seq + log::MAX_UNFENCED + 1);
        for r in parsed.records {
            if r.persist_ts >= w {
                records.push((r.persist_ts, slot, r.seq, r.entries));
            }
        }
    }
    if stored.is_none() && (!records.is_empty() || heap.superblock().root_record().is_some()) {
        // Every recovery leaves the watermark at 1 or more, and every pool that holds
        // something has been recovered once (at its creation): a zero word is damage.
        return Err(Error::corrupt(
            "the log watermark word in the engine area is zero in a pool that holds data (damaged)",
        ));
    }
    records.sort_by_key(|r| (r.0, r.1, r.2));
    // Validate every record before writing anything: a pool whose logs are damaged is
    // refused unchanged.
    let mut decoded = Vec::with_capacity(records.len());
    for (pts, slot, seq, bytes) in &records {
        let entries = log::decode(bytes)
            .and_then(|entries| validate(heap, &entries).map(|()| entries))
            .map_err(|e| Error::corrupt(format!("log record {seq} of thread slot {slot}: {e}")))?;
        decoded.push((*pts, entries));
    }
    let mut new_w = w;
    for (pts, entries) in &decoded {
        apply(heap, entries)?;
        new_w = new_w.max(pts + 1);
    }
    heap.fence();
    new_w = new_w.max(1);
    // Always written: a format 3 pool's plain word becomes an encoded one.
    crate::engine::kit::log::watermark::set(heap, new_w);
    for (slot, &seq) in next_seq.iter().enumerate() {
        log::reset(heap, l.log_offset(slot), seq);
    }
    heap.fence();
    Ok(Recovered {
        clock_start: new_w,
        next_seq,
    })
}

/// Per-slot log summary (for `pisces info` / `check`): valid records, and problems.
#[derive(Debug, Clone, Default)]
#[cfg_attr(not(feature = "tools"), allow(dead_code))] // read by the tools only
pub(crate) struct LogState {
    /// Valid records at or above the watermark, per slot.
    pub live_records: Vec<usize>,
    /// Watermark.
    pub watermark: u64,
    /// Problems found: malformed entries inside checksum-valid records, and damage that
    /// is not a torn tail (a bad record followed by later valid ones, a bad tail word).
    pub problems: Vec<String>,
}

/// Inspect the logs without changing anything.
#[cfg_attr(not(feature = "tools"), allow(dead_code))] // read by the tools only
pub(crate) fn inspect(heap: &Heap) -> LogState {
    let l = *heap.layout();
    let mut st = LogState::default();
    match crate::engine::kit::log::watermark::load(heap) {
        Ok(w) => st.watermark = w.unwrap_or(0),
        Err(e) => st.problems.push(e.to_string()),
    }
    for slot in 0..l.max_threads {
        let parsed = log::parse(heap, l.log_offset(slot), l.log_bytes_per_thread);
        if let Some(d) = &parsed.damage {
            st.problems.push(format!("slot {slot}: {d}"));
        }
        let mut live = 0;
        for r in &parsed.records {
            if r.persist_ts < st.watermark {
                continue;
            }
            live += 1;
            match log::decode(&r.entries) {
                Ok(entries) => {
                    for e in entries {
                        let bad = match e {
                            Entry::Word { off, .. } => check_target(heap, off, 8).err(),
                            Entry::Range { off, data } => check_target(heap, off, data.len()).err(),
                            _ => None,
                        };
                        if let Some(e) = bad {
                            st.problems
                                .push(format!("slot {slot} record {}: {e}", r.seq));
                        }
                    }
                }
                Err(e) => st
                    .problems
                    .push(format!("slot {slot} record {}: {e}", r.seq)),
            }
        }
        st.live_records.push(live);
    }
    st
}

/// [`inspect`] as the engine seam reports it (`pisces info` / `check`), for the engines
/// that keep their commits in the kit's redo logs (pisces, mvcc).
#[cfg_attr(not(feature = "tools"), allow(dead_code))] // read by the tools only
pub(crate) fn inspect_redo_logs(heap: &Heap) -> crate::engine::Inspection {
    let st = inspect(heap);
    let live: Vec<String> = st.live_records.iter().map(|n| n.to_string()).collect();
    crate::engine::Inspection {
        lines: vec![
            format!("log watermark  {}", st.watermark),
            format!(
                "live records   {} (per slot: {})",
                st.live_records.iter().sum::<usize>(),
                live.join(" ")
            ),
        ],
        problems: st.problems.iter().map(|p| format!("log: {p}")).collect(),
    }
}

#[cfg(test)]
mod tests {
    use crate::engine::kit::log::redo_log::{LogWriter, RecordBuilder};
    use crate::heap::{FormatParams, Heap};
    use crate::medium::dram::DramMedium;
    use crate::medium::Medium;
    use crate::{Config, EngineOptions, Error, Pool};
    use std::sync::Arc;

    fn small_cfg() -> Config {
        Config {
            size: 16 << 20,
            max_threads: 2,
            log_bytes_per_thread: 64 << 10,
            ..Config::default()
        }
    }

    /// A log record with a valid checksum but an impossible target makes the pool refused
    /// as corrupt — before any record is replayed, so the image is unchanged.
    #[test]
    fn damaged_log_is_refused_before_anything_is_written() {
        let size = 4 << 20;
        let sim = Arc::new(DramMedium::anonymous(size, 0, 0).unwrap());
        let heap = Heap::format(
            sim.clone(),
            FormatParams {
                engine_id: 1,
                max_threads: 2,
                log_bytes_per_thread: 64 << 10,
                regions: Default::default(),
            },
        )
        .unwrap();
        let l = *heap.layout();
        // Slot 0: a valid record (persistTS 5) writing a heap word.
        let mut good = RecordBuilder::default();
        good.word(l.heap_offset as u64 + 4096, 0xABCD);
        let mut w0 = LogWriter::new(l.log_offset(0), l.log_bytes_per_thread, 0);
        w0.append(&heap, good.bytes(), 5);
        // Slot 1: a later record writing outside the heap (into the superblock).
        let mut bad = RecordBuilder::default();
        bad.word(64, 0xDEAD);
        let mut w1 = LogWriter::new(l.log_offset(1), l.log_bytes_per_thread, 0);
        w1.append(&heap, bad.bytes(), 9);
        heap.fence();
        drop(heap);
        // Compare every byte of the image, flushed or not.
        let image = |m: &DramMedium| {
            // SAFETY: the medium's image is valid for `len()` bytes; no thread writes it
            // while we copy (the pool refused to open, nothing else uses the medium).
            unsafe { std::slice::from_raw_parts(m.base(), m.len()) }.to_vec()
        };
        let before = image(&sim);
        let opened = Pool::open_on(
            sim.clone(),
            Config {
                engine_options: EngineOptions::default(),
                ..small_cfg()
            },
        );
        assert!(
            matches!(opened, Err(Error::Corrupt(_))),
            "{:?}",
            opened.err()
        );
        assert!(image(&sim) == before, "a refused pool was written");
        let _ = sim.len();
    }
}
