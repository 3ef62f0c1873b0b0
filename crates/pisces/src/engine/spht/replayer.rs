//! The background log replayer (§3.3): applies durable transactions to the durable heap
//! following the links, then truncates the logs.
//!
//! One batch ([`run_batch`], under the `replay` mutex, by the background thread, by a
//! writer whose log is full, or by `quiesce`):
//! 1. D = the durable point (volatile mirror); nothing to do if D ≤ the last replayed
//!    timestamp.
//! 2. Collect the batch — every update transaction with `replayed < ts ≤ D`, oldest
//!    first:
//!    * `replay=backward`: the newest one has timestamp exactly D (a marker only ever
//!      holds the timestamp of an update transaction), in slot `D mod 2^slot_bits`;
//!      find it in that slot's log, then follow the **backward links** until a
//!      transaction already replayed (or the first of the run).
//!    * `replay=forward`: from the last replayed transaction (or the run's first),
//!      follow the **forward links** while the timestamps are ≤ D.
//!    * `replay=scan`: no link. Each slot's log is read from the replayer's head up
//!      to the slot's last linked record (published in its `SlotMeta::last` before
//!      its isPers; records past it may be half written and are never read), taking
//!      the records with `replayed < ts ≤ D`; the slots' lists are merged by
//!      timestamp (`order::merge_by_ts`).
//!
//!    The links needed exist: a transaction links itself to its predecessor (both
//!    directions) before it sets isPers, and the transaction whose timestamp is D
//!    waited for every smaller one to set isPers before the marker passed it (the
//!    Acquire load of the mirror makes their link stores visible).
//! 3. Apply it (`apply`: sharded, with the duplicate filter if `dup_filter=on`).
//! 4. Raise the global marker to the newest ts (flushed, durable with the apply's
//!    fence: a point record may be the only durable evidence of it), persist
//!    `replayed = newest ts`, then each slot's head word past its last
//!    replayed record (the newest record of the batch is kept: it is the cursor whose
//!    forward slot the next batch reads, and the link the backward walk stops at), fence; then tell the writers (`released_seq`) that the space is
//!    free, and hand the blocks the batch freed back to the allocator (a freed block is
//!    reused only once its free is durable in the heap image: the allocator's
//!    `reserve` checks the durable bitmap).

use super::apply;
use super::durability::{persist_replayed, MARKER_OFFSET};
use super::log::{self, RecordRef, LINK_BIT};
use super::options::SphtReplay;
use super::order::merge_by_ts;
use super::shared::SphtShared;
use crate::heap::alloc::ThreadCache;
use crate::Result;
use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed, Release};
use std::sync::Arc;
use std::time::Duration;

/// The replayer's position.
pub(crate) struct ReplayState {
    /// Link of the last replayed transaction of this run (0: none).
    pub cursor: u64,
    /// Per slot: ring offset and sequence number of the first unreplayed record.
    pub heads: Vec<(usize, u64)>,
    /// Allocator cache for freed blocks.
    pub cache: ThreadCache,
}

impl ReplayState {
    /// State after recovery (every log empty, next records at offset 0).
    pub(crate) fn new(next_seq: &[u64]) -> ReplayState {
        ReplayState {
            cursor: 0,
            heads: next_seq.iter().map(|&s| (0, s)).collect(),
            cache: ThreadCache::default(),
        }
    }
}

/// The record at ring offset `pos` of `slot`, skipping a wrap (marker or implicit).
fn record_at(sh: &SphtShared, slot: usize, mut pos: usize) -> RecordRef {
    let cap = log::Area::of(&sh.heap, slot).cap;
    if cap - pos < log::HEADER_LEN {
        pos = 0;
    }
    let r = RecordRef::read(&sh.heap, slot, pos);
    if r.is_wrap {
        return RecordRef::read(&sh.heap, slot, 0);
    }
    r
}

/// The batch to replay up to durable point `d` (oldest first). `Err` if the logs do
/// not hold what the protocol guarantees (a bug: the replayer stops, recovery decides).
fn collect(sh: &SphtShared, st: &ReplayState, d: u64) -> Result<Vec<RecordRef>> {
    let heap = &*sh.heap;
    let last = sh.replayed_ts.load(Relaxed);
    let mut out = Vec::new();
    match sh.opts.replay {
        SphtReplay::Backward => {
            let slot = sh.clock.slot_of(d);
            let (pos, mut seq) = st.heads[slot];
            let mut r = record_at(sh, slot, pos);
            loop {
                // The record at the head, or after the wrap marker there: the slot's
                // records follow each other in sequence-number order.
                if (r.seq != seq && r.seq != seq + 1) || r.ts > d {
                    return Err(crate::Error::corrupt(format!(
                        "spht replayer: thread slot {slot}'s log has no record with the \
                         durable timestamp {d} (record {} with timestamp {} where record {seq} \
                         was expected)",
                        r.seq, r.ts
                    )));
                }
                if r.ts == d {
                    break;
                }
                seq = r.seq + 1;
                r = record_at(sh, slot, r.end(heap).0);
            }
            loop {
                out.push(r);
                let b = r.back(heap);
                // The first unreplayed transaction's predecessor is the last replayed
                // one (the chain holds every update transaction): stop at its link
                // without reading it (only it is kept; older ones may be reused).
                if b == 0 || b == st.cursor {
                    break;
                }
                let (s, p) = log::unlink(b);
                r = RecordRef::read(heap, s, p);
                debug_assert!(
                    r.ts > last,
                    "spht replayer: backward chain passed the cursor"
                );
            }
            out.reverse();
        }
        SphtReplay::Scan => {
            let mut lists = Vec::with_capacity(sh.slots.len());
            for (slot, meta) in sh.slots.iter().enumerate() {
                // Acquire (inside `last`): the records up to the published one are
                // complete (written before it linked itself).
                let (last_ts, last_link) = meta.last();
                if last_ts <= last || last_link == 0 {
                    continue; // nothing unreplayed in this slot
                }
                let (_, end) = log::unlink(last_link);
                let (pos, mut seq) = st.heads[slot];
                let mut list = Vec::new();
                let mut r = record_at(sh, slot, pos);
                loop {
                    if r.seq != seq && r.seq != seq + 1 {
                        return Err(crate::Error::corrupt(format!(
                            "spht replayer: thread slot {slot}'s log has record {} where \
                             record {seq} was expected",
                            r.seq
                        )));
                    }
                    if r.ts > d {
                        break;
                    }
                    if r.ts > last {
                        list.push(r);
                    }
                    if r.pos == end {
                        break;
                    }
                    seq = r.seq + 1;
                    r = record_at(sh, slot, r.end(heap).0);
                }
                lists.push(list);
            }
            out = merge_by_ts(&lists, |r| r.ts, |r| *r).into_vec();
        }
        SphtReplay::Forward => {
            let mut next = if st.cursor == 0 {
                sh.genesis.load(Acquire)
            } else {
                let (s, p) = log::unlink(st.cursor);
                RecordRef::read(heap, s, p).fwd(heap)
            };
            while next & LINK_BIT != 0 {
                let (s, p) = log::unlink(next);
                let r = RecordRef::read(heap, s, p);
                if r.ts > d {
                    break;
                }
                out.push(r);
                next = r.fwd(heap);
            }
        }
    }
    Ok(out)
}

/// Apply one batch if the durable point is ahead of the durable heap. Returns true if
/// it applied something.
pub(super) fn run_batch(sh: &SphtShared, st: &mut ReplayState) -> Result<bool> {
    let d = sh.durable.load(Acquire);
    if d <= sh.replayed_ts.load(Relaxed) {
        return Ok(false);
    }
    let batch = collect(sh, st, d)?;
    let Some(newest) = batch.last().copied() else {
        return Ok(false);
    };
    let heap = &*sh.heap;
    // The global marker covers the batch before `replayed` does: a point record's
    // timestamp may be above every marker (the pool's durable point is then the
    // record, which the log is about to release). Flushed here, made durable by the
    // apply's fence, before `replayed` is persisted.
    let marker = heap.atomic_u64(MARKER_OFFSET);
    if marker.fetch_max(newest.ts, AcqRel) < newest.ts {
        heap.flush(MARKER_OFFSET, 8);
    }
    let (freed, stats) = apply::apply(heap, &batch, sh.opts.dup_filter, sh.opts.replayers)?;
    if !stats.allocator.is_empty() {
        // The bitmaps now show these allocations and frees (see `SphtShared::unreplayed`).
        crate::engine::kit::shared_counts::count_write(&sh.unreplayed); // the lock and the unlock: the workers lock it too
        crate::engine::kit::shared_counts::count_write(&sh.unreplayed);
        let mut pending = sh.unreplayed.lock().unwrap_or_else(|e| e.into_inner());
        if !pending.is_empty() {
            for off in &stats.allocator {
                pending.remove(off);
            }
        }
    }
    persist_replayed(heap, newest.ts);
    let mut touched = Vec::new();
    for r in &batch {
        st.heads[r.slot] = r.end(heap);
        touched.push(r.slot);
    }
    // The newest replayed record stays in its log (not released) until the next
    // batch: it is the cursor, whose forward link the next batch reads.
    st.heads[newest.slot] = (newest.pos, newest.seq);
    touched.sort_unstable();
    touched.dedup();
    for &s in &touched {
        let (pos, seq) = st.heads[s];
        log::set_head(heap, s, pos, seq);
    }
    heap.fence();
    for &s in &touched {
        // Release: the writer reuses the space only after our head word is durable.
        sh.released_seq[s].store(st.heads[s].1, Release);
    }
    st.cursor = newest.link();
    sh.replayed_ts.store(newest.ts, Release);
    for b in freed {
        sh.alloc.release(&mut st.cache, b);
    }
    sh.alloc.drain(&mut st.cache);
    sh.stats.batches.fetch_add(1, Relaxed);
    sh.stats.filtered.fetch_add(stats.filtered, Relaxed);
    sh.stats
        .applied
        .fetch_add(stats.applied.iter().sum::<u64>(), Relaxed);
    crate::engine::kit::shared_counts::end_unit(); // a batch is the replayer's unit of work
    Ok(true)
}

/// Replay until the durable heap is up to date with the durable point as read now.
pub(super) fn catch_up(sh: &SphtShared) {
    let mut st = sh.replay.lock().unwrap_or_else(|e| e.into_inner());
    while let Ok(true) = run_batch(sh, &mut st) {}
}

/// Wake the background replayer.
pub(super) fn kick(sh: &SphtShared) {
    // Release: pairs with `rest`'s Acquire swap (the flag only ends a rest early).
    sh.kicked.store(true, Release);
    if let Some(t) = sh.worker.get() {
        t.unpark();
    }
}

/// Rest for `pause` unless kicked or stopped. A park can return at once without a
/// kick: the scoped threads of a batch's shards unpark this thread when they end, and
/// an unpark that arrives before the park is kept for the next one.
fn rest(sh: &SphtShared, pause: Duration) {
    let until = std::time::Instant::now() + pause;
    loop {
        if sh.kicked.swap(false, Acquire) || sh.stop.load(Acquire) {
            return;
        }
        let now = std::time::Instant::now();
        if now >= until {
            return;
        }
        std::thread::park_timeout(until - now);
    }
}

/// How long the background replayer rests after a batch where a fence is a device
/// sync (the file medium): a batch costs three syncs whatever its size, so it replays
/// what that time gathered at once. A writer whose log is full wakes it (or replays
/// itself) sooner.
const DEVICE_SYNC_PAUSE: Duration = Duration::from_millis(20);

/// The background replayer's loop (idle with `replay_hold`: the writers, `quiesce`
/// and close still replay).
pub(super) fn background(sh: Arc<SphtShared>) {
    let pause = sh.heap.fence_is_device_sync().then_some(DEVICE_SYNC_PAUSE);
    while !sh.stop.load(Acquire) {
        if sh.opts.replay_hold {
            std::thread::park_timeout(Duration::from_millis(50));
            continue;
        }
        let did = {
            let mut st = sh.replay.lock().unwrap_or_else(|e| e.into_inner());
            match run_batch(&sh, &mut st) {
                Ok(did) => did,
                Err(e) => {
                    // A record the engine wrote cannot be decoded: a bug; stop replaying
                    // (recovery will report the log as corrupt).
                    eprintln!("spht replayer: {e}");
                    return;
                }
            }
        };
        match (did, pause) {
            (false, _) => std::thread::park_timeout(Duration::from_micros(500)),
            (true, Some(p)) => rest(&sh, p),
            (true, None) => {}
        }
    }
}
