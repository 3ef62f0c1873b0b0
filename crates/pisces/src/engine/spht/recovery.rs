//! Recovery on open: the same replay as the background replayer, on every record the
//! crash left durable.
//!
//! 1. The markers' durable point (`max(pmarker, slot markers)`), R = the `replayed`
//!    word. Either at or above `clock::TS_LIMIT` is damage (no run writes one): refused.
//! 2. Parse every slot's log from its persisted head (`log::walk`); keep the records
//!    with `R < ts`. D = the durable point: the largest of the markers', the newest
//!    valid point record's timestamp and the newest valid conditional point's whose
//!    every named timestamp is a kept record's or at most R (`log`, *Point records*,
//!    *Conditional points*). Records above D are
//!    then dropped (the end of each slot's list: timestamps grow along a log): they
//!    belong to transactions whose commit never returned (a transaction returns only
//!    once a marker or a point record covers it); records up to R are already applied.
//!    Only records up to D vouch for their forward links (`log::LinkCheck`): a record
//!    above it may link into a log whose head word a crashed earlier recovery already
//!    reset. Each kept record is decoded and
//!    validated right after its checksum, while its bytes are in the cache (every
//!    entry must name a place a transaction could have written), and noted as holding
//!    allocator entries or not and with the replay parts its words fall in (step 4).
//!    With `OpenCtx::recovery_threads > 1` the slots are parsed in parallel
//!    (`kit::recovery::per_slot`: slot s by thread s mod threads, results back in slot order).
//!    **Decision:** a damaged record followed by a valid later one of its log is
//!    refused (`log::walk`: not a torn tail; replaying the other slots without that
//!    log's later records would build a state no sequence of transactions produced);
//!    an invalid last record is a torn tail and ends the log — unless a kept record's
//!    forward link names a record past where its log's walk stopped: a record is
//!    linked only once its fence passed, so that record was complete and is damaged
//!    (`log::LinkCheck`: refused). Nothing is written
//!    before every slot is parsed: a damaged pool is refused unchanged, with the
//!    lowest slot's error.
//! 3. Order them by timestamp, the way the `replay` option says (`order`):
//!    `scan` merges the slots' lists by timestamp; `forward` and `backward` follow the
//!    links, checked against those lists. **Decision:** a link is trusted only if it
//!    names the next record the merge would take. At run time the links of every
//!    transaction up to the durable point exist (see `replayer`), but a crash can
//!    persist the marker CASed by a larger transaction before a smaller one's link
//!    reached the medium (links are written after the record's fence and are not on
//!    the durability path); the checksummed timestamps always are. If a walk finds a
//!    link missing, recovery merges instead (same result, one more pass). With
//!    `OpenCtx::recovery_threads > 1` each way runs in parts, cut by timestamp, one per
//!    thread (`order`).
//!    **Tables.** A full log holds millions of records, so every table is 8 bytes per
//!    record (`log::LogRec`: the header's pool offset, the replay parts and the
//!    allocator flag; length and timestamp are read from the header again), reserved
//!    once and backed by huge pages (`kit::recovery::bulk_vec`): the per-slot lists and the
//!    ordered batch.
//! 4. Apply them with `apply` — the replayer's code, with the dense (bitmap)
//!    tracking: allocator entries in order (only the records noted in step 2 are
//!    decoded for them; with none noted, that pass over the batch, on one thread
//!    before the shards start, is skipped), data words on `OpenCtx::recovery_threads` shards (at most
//!    `LogRec::MAX_PARTS`), newest first with the duplicate filter or oldest first, as
//!    the `dup_filter` option says. A shard skips, unread, the records whose parts
//!    (noted in step 2) do not include its own: a full log is mostly one-word records,
//!    and when every shard decoded every record, two shards took longer than one.
//! 5. If a point record set D, persist the global marker at D first (the replayed word
//!    never passes the markers: step 1's check); persist `replayed = max(R, D)`, then
//!    reset every log (head at 0, next sequence number) and fence. A crash anywhere repeats the same steps over the same records.
//!
//! The new run's clock starts above every timestamp seen (D, R and every record), so
//! its records sort after everything here.

use super::apply::{self, Tracking};
use super::clock::{slot_of_ts, TS_LIMIT};
use super::durability::{
    durable_point, persist_replayed, replayed, slot_marker_offset, MARKER_OFFSET,
};
use super::log;
use super::log::LogRec;
use super::options::{SphtReplay, SphtSettings};
use super::order;
use crate::engine::kit::log::redo_log::{self, decode, Entry};
use crate::engine::kit::recovery::bulk_vec::BulkVec;
use crate::engine::kit::recovery::per_slot::per_slot;
use crate::engine::kit::recovery::replay_parts::entry_mask;
use crate::engine::kit::validate::check_logged_write;
use crate::heap::alloc::Allocator;
use crate::heap::Heap;
use crate::{Error, Result};
use std::sync::atomic::Ordering::{AcqRel, Acquire};

crate::mutation::point! {
    /// Recovery's validation pass notes no record as holding allocator entries, so the
    /// allocator pass of its replay skips every record.
    pub(crate) static RECOVERY_ALLOC_FLAGS = "recovery-alloc-flags";
    /// Recovery's parse validates only the first entry of each record.
    pub(crate) static PARSE_VALIDATION = "parse-validation";
    /// Recovery counts a conditional point in the durable point without checking the
    /// records it names.
    pub(crate) static CONDITIONAL_DEPS = "conditional-deps";
}

/// The durable point: the largest of `markers`, the timestamps of `points` and those
/// of the conditional points `conditional` (timestamp, the timestamps it names) whose
/// every named timestamp is at most `r` (replayed: its record was durable) or `held`
/// (a valid record of the logs). One pass suffices: a conditional point names every
/// transaction with a smaller timestamp that was not persistent when it was appended
/// (every other one was durable by then), so a named record's own dependencies are
/// not needed.
fn durable_point_of(
    markers: u64,
    r: u64,
    points: impl Iterator<Item = u64>,
    conditional: &[(u64, Vec<u64>)],
    held: impl Fn(u64) -> bool,
) -> u64 {
    let unchecked = crate::mutation::active!(CONDITIONAL_DEPS);
    let d = points.fold(markers, u64::max);
    conditional
        .iter()
        .filter(|(ts, deps)| *ts > d && (unchecked || deps.iter().all(|&t| t <= r || held(t))))
        .map(|&(ts, _)| ts)
        .fold(d, u64::max)
}

/// What recovery found.
#[derive(Debug, Clone)]
pub(super) struct Recovered {
    /// Largest timestamp in the pool (markers, progress, records).
    pub max_ts: u64,
    /// Next sequence number of each slot's log.
    pub next_seq: Vec<u64>,
    /// The `replayed` word after recovery.
    pub replayed_ts: u64,
    /// Records replayed.
    pub replayed_records: usize,
    /// The records were ordered by the links the `replay` option names (false: merged
    /// by timestamp, by option or because a link was missing).
    pub followed_links: bool,
}

/// Check that every entry names a place a transaction could have written. Returns
/// whether any is an allocator entry.
#[cfg_attr(not(feature = "tools"), allow(dead_code))] // read by the tools only
fn validate(heap: &Heap, entries: &[Entry<'_>]) -> Result<bool> {
    let mut allocates = false;
    for e in entries {
        allocates |= validate_entry(heap, e)?;
    }
    Ok(allocates)
}

/// [`validate`] for one entry.
#[inline]
fn validate_entry(heap: &Heap, e: &Entry<'_>) -> Result<bool> {
    match *e {
        Entry::Word { off, .. } => check_logged_write(heap, off, 8).map(|()| false),
        Entry::Range { off, data } => check_logged_write(heap, off, data.len()).map(|()| false),
        Entry::Alloc(b) | Entry::Free(b) => Allocator::check_block(heap, b).map(|()| true),
        Entry::Op { .. } => Err(Error::corrupt(
            "an operation entry (TimeStone's) in an spht log",
        )),
    }
}

/// Decode and validate a record's entry bytes in place. Returns whether any is an
/// allocator entry, and the replay parts (of `parts`) its data entries write.
fn validate_bytes(heap: &Heap, bytes: &[u8], parts: usize) -> Result<(bool, u32)> {
    let mut allocates = false;
    let mut mask = 0;
    let first_only = crate::mutation::active!(PARSE_VALIDATION);
    for (i, e) in redo_log::entries(bytes).enumerate() {
        let e = e?;
        if i > 0 && first_only {
            continue;
        }
        allocates |= validate_entry(heap, &e)?;
        mask |= entry_mask(&e, parts);
    }
    Ok((allocates, mask))
}

/// One slot's log, parsed (step 2).
struct SlotLog {
    /// Its records with `R < ts`, in log order (those above D dropped after the parse).
    records: BulkVec<LogRec>,
    /// The largest timestamp of a point record in it (0: none).
    max_point: u64,
    /// Its conditional points with `R < ts`: (timestamp, the timestamps it names).
    conditional: Vec<(u64, Vec<u64>)>,
    /// How far its walk read.
    walked: log::Walked,
    /// The forward links of its kept records (`log::LinkCheck`).
    links: log::LinkCheck,
    /// The largest timestamp of any record in it.
    max_ts: u64,
    /// Which of the markers (the global one, the slot's own) a record of it carries.
    holds: MarkerRecords,
    /// A kept record of it is noted as holding allocator entries.
    allocating: bool,
}

/// Whether a slot's log holds the record a marker names.
#[derive(Clone, Copy, Default)]
struct MarkerRecords {
    global: bool,
    own: bool,
}

/// Parse and validate slot `slot`'s log in one pass, keeping the records with
/// `r < ts`: each record is decoded and its entries checked right after its
/// checksum, while its bytes are in the cache, and noted with the replay parts (of
/// `parts`) it writes.
fn parse_slot(heap: &Heap, slot: usize, (r, markers): (u64, u64), parts: usize) -> Result<SlotLog> {
    let (global, own) = (
        heap.atomic_u64(MARKER_OFFSET).load(Acquire),
        heap.atomic_u64(slot_marker_offset(slot)).load(Acquire),
    );
    let mut holds = MarkerRecords::default();
    let no_alloc_flags = crate::mutation::active!(RECOVERY_ALLOC_FLAGS);
    // At most one record per header's worth of ring: reserved once (address space
    // only; the pages the pushes reach are touched, as huge pages).
    let mut records = BulkVec::with_capacity(log::Area::of(heap, slot).cap / log::HEADER_LEN + 1);
    let (mut max_ts, mut max_point) = (0, 0);
    let mut conditional = Vec::new();
    let mut links = log::LinkCheck::new(heap);
    let mut allocating = false;
    let walked = log::walk(heap, slot, |rec, bytes| {
        max_ts = max_ts.max(rec.ts);
        holds.global |= rec.ts == global;
        holds.own |= rec.ts == own;
        if rec.ts <= r {
            return Ok(());
        }
        match rec.standing {
            log::Standing::Point => max_point = max_point.max(rec.ts),
            log::Standing::Conditional => conditional.push((rec.ts, rec.deps(heap))),
            log::Standing::ByMarker => {}
        }
        // The links of records above the markers are noted once the durable point is
        // known (`recover`): a record above it never counts as durable evidence.
        if rec.ts <= markers {
            links.note(heap, rec)?;
        }
        let (allocates, mask) = validate_bytes(heap, bytes, parts).map_err(|e| {
            Error::corrupt(format!(
                "spht log record {} of thread slot {slot}: {e}",
                rec.seq
            ))
        })?;
        let allocates = allocates && !no_alloc_flags;
        allocating |= allocates;
        records.push(LogRec::new(heap, slot, rec.pos, allocates, mask));
        Ok(())
    })?;
    Ok(SlotLog {
        records,
        max_point,
        conditional,
        walked,
        links,
        max_ts,
        holds,
        allocating,
    })
}

/// Refuse markers that no run left: the durable point below the replay progress
/// (`replayed` is raised only to durable timestamps, and recovery raises it to the
/// durable point), or a marker above the replay progress whose record is not in its
/// log. A marker is only ever set to the timestamp of a record already durable in its
/// log (the global marker: the CAS winner's own; a slot's: its own last record), and a
/// record above `replayed` is not replayed, so its space was never released. The
/// markers are single words on the commit path, with no checksum or copy; this check
/// is their protection: damage that keeps the durable point at or above `replayed`
/// and still names a record of the log goes unseen, as does a global marker zeroed
/// before the first replay (`replayed` still 0).
fn check_markers(heap: &Heap, slots: &[SlotLog], d: u64, r: u64) -> Result<()> {
    if d < r {
        return Err(Error::corrupt(format!(
            "spht engine area: the durable point {d} (the markers) is below the replayed word {r}"
        )));
    }
    let global = heap.atomic_u64(MARKER_OFFSET).load(Acquire);
    if global > r && !slots.iter().any(|s| s.holds.global) {
        return Err(Error::corrupt(format!(
            "spht engine area: the global marker {global} names no record of the logs (every marker is a durable record's timestamp)"
        )));
    }
    for (slot, s) in slots.iter().enumerate() {
        let own = heap.atomic_u64(slot_marker_offset(slot)).load(Acquire);
        if own > r && !s.holds.own {
            return Err(Error::corrupt(format!(
                "spht engine area: thread slot {slot}'s marker {own} names no record of its log (every marker is a durable record's timestamp)"
            )));
        }
    }
    Ok(())
}

/// Refuse a durable point or `replayed` word no run could have written: every
/// timestamp is below `clock::TS_LIMIT` (the clock never issues one at or above it,
/// and the top bits of a published word are flags), so a larger marker is damage. The
/// new run's clock starts above these words: left unchecked, one would make the
/// first commit find the timestamp space exhausted.
fn check_timestamp_words(d: u64, r: u64) -> Result<()> {
    for (what, v) in [("durable point (the markers)", d), ("replayed word", r)] {
        if v >= TS_LIMIT {
            return Err(Error::corrupt(format!(
                "spht engine area: the {what} holds {v:#x}, not a timestamp (all are below {TS_LIMIT:#x})"
            )));
        }
    }
    Ok(())
}

/// Run recovery on a pool nobody uses yet, with the replay options `opts` and
/// `threads` threads (parse and apply).
pub(super) fn recover(heap: &Heap, opts: &SphtSettings, threads: usize) -> Result<Recovered> {
    let n = heap.layout().max_threads;
    let markers = durable_point(heap);
    let r = replayed(heap);
    check_timestamp_words(markers, r)?;
    let parts = threads.clamp(1, LogRec::MAX_PARTS);
    // Nothing is written before every slot is parsed, so a damaged pool is refused
    // unchanged (the lowest slot's error is reported).
    let mut slots = per_slot(threads, n, |slot| {
        parse_slot(heap, slot, (r, markers), parts)
    })
    .into_iter()
    .collect::<Result<Vec<_>>>()?;
    let conditional: Vec<(u64, Vec<u64>)> = slots
        .iter_mut()
        .flat_map(|s| std::mem::take(&mut s.conditional))
        .collect();
    let d = durable_point_of(
        markers,
        r,
        slots.iter().map(|s| s.max_point),
        &conditional,
        |t| {
            // Timestamps grow along a log: a binary search of the named slot's records.
            slots.get(slot_of_ts(t, n)).is_some_and(|s| {
                let i = s.records.partition_point(|rec| rec.ts(heap) < t);
                s.records.get(i).is_some_and(|rec| rec.ts(heap) == t)
            })
        },
    );
    drop(conditional);
    for (slot, s) in slots.iter_mut().enumerate() {
        // Timestamps grow along a log: the records above D are its end (found by a
        // binary search reading a few headers); those above the markers and up to D
        // (covered by a point record) have their links noted now.
        let keep = s.records.partition_point(|rec| rec.ts(heap) <= d);
        s.records.truncate(keep);
        let covered = s.records.partition_point(|rec| rec.ts(heap) <= markers);
        for &rec in &s.records[covered..] {
            s.links.note_kept(heap, slot, rec)?;
        }
    }
    let walked: Vec<log::Walked> = slots.iter().map(|s| s.walked).collect();
    let mut links = log::LinkCheck::new(heap);
    for s in &slots {
        links.merge(&s.links);
    }
    links.check(&walked)?;
    check_markers(heap, &slots, markers, r)?;
    let max_ts = slots.iter().map(|s| s.max_ts).fold(d.max(r), u64::max);
    let next_seq: Vec<u64> = walked.iter().map(|w| w.next_seq).collect();
    let allocating = slots.iter().any(|s| s.allocating);
    let lists: Vec<BulkVec<LogRec>> = slots.into_iter().map(|s| s.records).collect();
    let followed = match opts.replay {
        SphtReplay::Scan => None,
        SphtReplay::Forward => order::follow_forward(heap, &lists, parts),
        SphtReplay::Backward => order::follow_backward(heap, &lists, parts),
    };
    let followed_links = followed.is_some();
    let records = followed.unwrap_or_else(|| order::merge_parts(heap, &lists, parts));
    drop(lists);
    if !records.is_empty() {
        // Dense tracking: the batch is every durable record (see `apply::Tracking`).
        apply::apply_marked(
            heap,
            &records,
            opts.dup_filter,
            parts,
            Tracking::Dense,
            allocating.then_some(|i: usize| records[i].allocates()),
        )?;
    }
    let replayed_ts = r.max(d);
    if d > markers {
        // A point record is the durable point: the marker takes it over before the
        // replayed word passes the old markers (and before the logs are reset).
        heap.atomic_u64(MARKER_OFFSET).fetch_max(d, AcqRel);
        heap.persist(MARKER_OFFSET, 8);
    }
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
        replayed_records: records.len(),
        followed_links,
    })
}

/// Live records and markers, for `pisces info` / `check` (writes nothing).
#[cfg_attr(not(feature = "tools"), allow(dead_code))] // read by the tools only
pub(super) fn inspect(heap: &Heap) -> crate::engine::Inspection {
    let n = heap.layout().max_threads;
    let r = replayed(heap);
    // The markers' durable point, or the newest point record's (`recover`, step 2).
    let parsed: Vec<_> = (0..n).map(|slot| log::parse(heap, slot)).collect();
    let live = || {
        parsed
            .iter()
            .flat_map(|(recs, _)| recs.iter())
            .filter(|p| p.ts > r)
    };
    let conditional: Vec<(u64, Vec<u64>)> = live()
        .filter(|p| p.standing == log::Standing::Conditional)
        .map(|p| (p.ts, p.deps(heap)))
        .collect();
    let valid: std::collections::HashSet<u64> = if conditional.is_empty() {
        Default::default()
    } else {
        live().map(|p| p.ts).collect()
    };
    let d = durable_point_of(
        durable_point(heap),
        r,
        live()
            .filter(|p| p.standing == log::Standing::Point)
            .map(|p| p.ts),
        &conditional,
        |t| valid.contains(&t),
    );
    let mut lines = vec![format!("durable point  {d}"), format!("replayed up to {r}")];
    let mut problems = Vec::new();
    let mut per_slot = Vec::new();
    let mut pending = 0;
    let mut links = log::LinkCheck::new(heap);
    let mut walks = Vec::new();
    for (slot, (recs, walked)) in parsed.into_iter().enumerate() {
        match walked {
            Ok(w) => walks.push(w),
            Err(e) => problems.push(format!("log: {e}")),
        }
        let mut live = 0;
        for p in &recs {
            if p.ts <= r {
                continue;
            }
            live += 1;
            if p.ts <= d {
                pending += 1;
                if let Err(e) = links.note(heap, p) {
                    problems.push(format!("log: {e}"));
                }
            }
            if let Err(e) = decode(p.entries(heap)).and_then(|e| validate(heap, &e).map(drop)) {
                problems.push(format!("log: slot {slot} record {}: {e}", p.seq));
            }
        }
        per_slot.push(live.to_string());
    }
    if walks.len() == n {
        if let Err(e) = links.check(&walks) {
            problems.push(format!("log: {e}"));
        }
    }
    lines.push(format!(
        "live records   {} durable, unreplayed (per slot: {})",
        pending,
        per_slot.join(" ")
    ));
    crate::engine::Inspection { lines, problems }
}
