//! The order of a batch of durable transactions (oldest first), found three ways
//! (`replay=` option): following the forward links, following the backward links, or
//! scanning the per-thread logs and merging them by commit timestamp.
//!
//! * [`merge_by_ts`]: the scan. Each thread's log holds its transactions in timestamp
//!   order (a thread's commit timestamps increase), so the batch is a k-way merge of
//!   the per-slot lists (a heap of the slots' next timestamps: O(n log k)). It reads
//!   every log's records but no link.
//! * [`follow_forward`], [`follow_backward`]: the link walks over records that recovery
//!   parsed. The run-time replayer follows the links without checks (the protocol
//!   guarantees them up to the durable point, see `replayer`); after a crash a link may
//!   be missing (links are not on the durability path, see `recovery`), so these walks
//!   accept a link only if it names the next record of its slot not yet taken, with a
//!   larger (forward) or smaller (backward) timestamp, and succeed only if they take
//!   every record. Then the result is exactly the merge's order; otherwise they
//!   return `None` and recovery merges.
//! * **On several threads** (recovery): the records are cut into parts by timestamp
//!   ([`cuts`]: binary searches in the lists) and each part is ordered on a thread of
//!   its own, the same way; a link walk's parts are joined only where the links join
//!   them ([`follow_forward`], [`follow_backward`]), the merge's in order
//!   ([`merge_parts`]). On one thread, the order would be a step between the parallel
//!   parse and the parallel replay that the other threads wait for.

use super::log::{self, LogRec, LINK_BIT};
use crate::engine::kit::recovery::bulk_vec::BulkVec;
use crate::engine::kit::recovery::per_slot::per_slot;
use crate::engine::kit::recovery::prefetch::prefetch_home;
use crate::heap::Heap;
use std::cmp::Reverse;
use std::ops::Deref;

crate::mutation::point! {
    /// Scan replay takes the slots' logs one after the other instead of merging them by
    /// timestamp.
    pub(crate) static SCAN_MERGE = "scan-merge";
}

/// How many records of a slot ahead of the one a link walk takes it prefetches.
const WALK_AHEAD: usize = 8;
use std::collections::BinaryHeap;

/// The records of `lists` (one list per slot, each in timestamp order, `ts` their
/// timestamps), merged into one list in timestamp order, each record mapped by `out`.
pub(super) fn merge_by_ts<T, O, L: Deref<Target = [T]>>(
    lists: &[L],
    ts: impl Fn(&T) -> u64,
    out_of: impl Fn(&T) -> O,
) -> BulkVec<O> {
    let total = lists.iter().map(|l| l.len()).sum();
    let mut out = BulkVec::with_capacity(total);
    if crate::mutation::active!(SCAN_MERGE) {
        // The slots' lists one after the other (the one holding the newest record
        // last, so that the replayer still reaches the durable point).
        let mut ls: Vec<&L> = lists.iter().filter(|l| !l.is_empty()).collect();
        ls.sort_by_key(|l| l.last().map_or(0, &ts));
        for l in ls {
            out.extend(l.iter().map(&out_of));
        }
        return out;
    }
    let mut next = vec![0usize; lists.len()];
    let mut heads: BinaryHeap<Reverse<(u64, usize)>> = lists
        .iter()
        .enumerate()
        .filter_map(|(s, l)| l.first().map(|r| Reverse((ts(r), s))))
        .collect();
    while let Some(Reverse((_, s))) = heads.pop() {
        let l = &lists[s];
        // Take the run of this slot's records below the other slots' next one (one
        // heap operation per run, not per record: a slot's records often follow each
        // other).
        let bound = heads.peek().map_or(u64::MAX, |Reverse((t, _))| *t);
        while let Some(r) = l.get(next[s]) {
            let t = ts(r);
            if t > bound {
                heads.push(Reverse((t, s)));
                break;
            }
            out.push(out_of(r));
            next[s] += 1;
        }
    }
    out
}

/// Does link word `l` name record `r`?
fn names(heap: &Heap, l: u64, r: LogRec) -> bool {
    let (s, p) = log::unlink(l);
    s < heap.layout().max_threads && log::Area::of(heap, s).at(p) == r.off()
}

/// Fewest records per part of an order found on several threads (fewer records are
/// ordered on one thread).
const MIN_PART: usize = 16;

/// Per-slot record counts that cut `lists` (`total` records) into `parts` parts by
/// timestamp, so that several threads can order the parts at once: cut `i` (of
/// `1..parts`) counts, per slot, the records older than `t_i`, the smallest timestamp
/// of a record with at least `i / parts` of the records older than it. Each list is
/// in timestamp order: binary searches on the timestamps in the headers, a few
/// hundred reads. `None` if the cuts do not leave every part non-empty (too few
/// records, or equal timestamps).
fn cuts(
    heap: &Heap,
    lists: &[BulkVec<LogRec>],
    parts: usize,
    total: usize,
) -> Option<Vec<Vec<usize>>> {
    if parts < 2 || total < parts * MIN_PART {
        return None;
    }
    let older = |ts: u64| -> Vec<usize> {
        lists
            .iter()
            .map(|l| l.partition_point(|r| r.ts(heap) < ts))
            .collect()
    };
    let newest = lists
        .iter()
        .filter_map(|l| l.last())
        .map(|r| r.ts(heap))
        .max()?;
    let mut cuts: Vec<Vec<usize>> = Vec::with_capacity(parts - 1);
    let mut below = 0;
    for i in 1..parts {
        let want = total * i / parts;
        // The smallest timestamp `t` with `want` records older than it.
        let (mut lo, mut hi) = (0u64, newest + 1);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if older(mid).iter().sum::<usize>() >= want {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        // The oldest record from `t` on: the cut goes just before it.
        let at = older(lo);
        let first = lists
            .iter()
            .zip(&at)
            .filter_map(|(l, &k)| l.get(k))
            .map(|r| r.ts(heap))
            .min()?;
        let cut = older(first);
        let n: usize = cut.iter().sum();
        if n <= below || n >= total {
            return None;
        }
        below = n;
        cuts.push(cut);
    }
    Some(cuts)
}

/// The bounds of each part that `cuts` leave, per slot: (first record, record past
/// the last).
fn part_bounds(lists: &[BulkVec<LogRec>], cuts: &[Vec<usize>]) -> Vec<(Vec<usize>, Vec<usize>)> {
    let zero = vec![0; lists.len()];
    let lens: Vec<usize> = lists.iter().map(|l| l.len()).collect();
    let mut bounds = Vec::with_capacity(cuts.len() + 1);
    let mut lo = zero;
    for c in cuts.iter().chain(std::iter::once(&lens)) {
        bounds.push((lo, c.clone()));
        lo = c.clone();
    }
    bounds
}

/// Walk the forward links from `first` (of `slot`), the next record of its slot with
/// `taken` (per slot) records taken before it, taking `count` records in all into
/// `out`. Returns the last record taken, its timestamp and the per-slot counts of
/// records taken; `None` if a link is missing or names another record than the next
/// of its slot not taken yet, with a larger timestamp.
fn walk_forward(
    heap: &Heap,
    lists: &[BulkVec<LogRec>],
    (first, slot): (LogRec, usize),
    mut taken: Vec<usize>,
    count: usize,
    out: &mut BulkVec<LogRec>,
) -> Option<(LogRec, u64, Vec<usize>)> {
    taken[slot] += 1;
    let mut cur = first;
    let mut cur_ts = cur.ts(heap);
    out.push(cur);
    for _ in 1..count {
        let l = cur.fwd(heap);
        if l & LINK_BIT == 0 {
            return None;
        }
        let (s, _) = log::unlink(l);
        let next = *lists.get(s)?.get(taken[s])?;
        let next_ts = next.ts(heap);
        if !names(heap, l, next) || next_ts <= cur_ts {
            return None;
        }
        taken[s] += 1;
        if let Some(p) = lists[s].get(taken[s] + WALK_AHEAD) {
            prefetch_home(heap, p.off());
        }
        out.push(next);
        (cur, cur_ts) = (next, next_ts);
    }
    Some((cur, cur_ts, taken))
}

/// Walk the backward links from `last` (of `slot`), the last record of its slot not
/// taken with `left` (per slot) records not taken, taking `count` records in all into
/// `out`, newest first. Returns the oldest record taken, its timestamp and the
/// per-slot counts of records not taken; `None` if a link is missing or names another
/// record than the newest of its slot not taken yet, with a smaller timestamp.
fn walk_backward(
    heap: &Heap,
    lists: &[BulkVec<LogRec>],
    (last, slot): (LogRec, usize),
    mut left: Vec<usize>,
    count: usize,
    out: &mut BulkVec<LogRec>,
) -> Option<(LogRec, u64, Vec<usize>)> {
    left[slot] -= 1;
    let mut cur = last;
    let mut cur_ts = cur.ts(heap);
    out.push(cur);
    for _ in 1..count {
        let l = cur.back(heap);
        if l & LINK_BIT == 0 {
            return None;
        }
        let (s, _) = log::unlink(l);
        let k = left.get(s)?.checked_sub(1)?;
        let prev = lists[s][k];
        let prev_ts = prev.ts(heap);
        if !names(heap, l, prev) || prev_ts >= cur_ts {
            return None;
        }
        left[s] = k;
        // The walk reads each record's link from the log (far larger than the
        // caches): fetch this slot's next records ahead.
        if let Some(p) = k.checked_sub(WALK_AHEAD).map(|i| lists[s][i]) {
            prefetch_home(heap, p.off());
        }
        out.push(prev);
        (cur, cur_ts) = (prev, prev_ts);
    }
    Some((cur, cur_ts, left))
}

/// The oldest record (`newest`: the newest) among the records `lo..hi` of each slot,
/// and its slot.
fn end_record(
    heap: &Heap,
    lists: &[BulkVec<LogRec>],
    (lo, hi): &(Vec<usize>, Vec<usize>),
    newest: bool,
) -> Option<(LogRec, usize)> {
    let ends = lists.iter().enumerate().filter(|&(s, _)| lo[s] < hi[s]);
    let ends = ends.map(|(s, l)| (if newest { l[hi[s] - 1] } else { l[lo[s]] }, s));
    if newest {
        ends.max_by_key(|(r, _)| r.ts(heap))
    } else {
        ends.min_by_key(|(r, _)| r.ts(heap))
    }
}

/// Each part's records in order (`order(i, bounds, out)` into `out`, `None` if it
/// fails), on a thread of its own, joined into one list if `joins(i, ends)` accepts
/// every boundary between part `i` and part `i + 1`.
fn by_parts<E: Send>(
    total: usize,
    bounds: &[(Vec<usize>, Vec<usize>)],
    order: impl Fn(usize, &mut BulkVec<LogRec>) -> Option<E> + Sync,
    joins: impl Fn(usize, &E, &E) -> bool,
) -> Option<BulkVec<LogRec>> {
    let count = |i: usize| -> usize {
        let (lo, hi) = &bounds[i];
        hi.iter().sum::<usize>() - lo.iter().sum::<usize>()
    };
    let mut parts = per_slot(bounds.len(), bounds.len(), |i| {
        // The first part's list becomes the whole one: room for every record.
        let mut out = BulkVec::with_capacity(if i == 0 { total } else { count(i) });
        order(i, &mut out).map(|e| (e, out))
    })
    .into_iter();
    let (mut end, mut out) = parts.next()??;
    for (i, part) in parts.enumerate() {
        let (next_end, next) = part?;
        if !joins(i, &end, &next_end) {
            return None;
        }
        out.extend_from_slice(&next);
        end = next_end;
    }
    Some(out)
}

/// The records of `lists` in the order of the forward links, from the oldest one;
/// `None` if a link is missing or names another record than the merge would take.
///
/// With `threads > 1` the records are cut into parts by timestamp ([`cuts`]); each
/// part's walk runs on its own thread from its oldest record, with the same checks,
/// and the parts are joined only if each one ends where the next begins: its last
/// record links to the next part's first one (with a larger timestamp), and it took
/// exactly the records of every slot that the next part counts as before it. Then
/// every record is taken once, each the next of its slot, in increasing timestamp
/// order: the one walk's result.
pub(super) fn follow_forward(
    heap: &Heap,
    lists: &[BulkVec<LogRec>],
    threads: usize,
) -> Option<BulkVec<LogRec>> {
    let total: usize = lists.iter().map(|l| l.len()).sum();
    let cuts = cuts(heap, lists, threads, total).unwrap_or_default();
    let bounds = part_bounds(lists, &cuts);
    let Some(first) = end_record(heap, lists, &bounds[0], false) else {
        return Some(BulkVec::with_capacity(0));
    };
    let starts: Vec<(LogRec, usize)> = std::iter::once(Some(first))
        .chain(
            bounds[1..]
                .iter()
                .map(|b| end_record(heap, lists, b, false)),
        )
        .collect::<Option<_>>()?;
    by_parts(
        total,
        &bounds,
        |i, out| {
            let (lo, hi) = &bounds[i];
            let count = hi.iter().sum::<usize>() - lo.iter().sum::<usize>();
            walk_forward(heap, lists, starts[i], lo.clone(), count, out)
        },
        |i, (last, last_ts, taken), _| {
            let (next, slot) = starts[i + 1];
            let l = last.fwd(heap);
            l & LINK_BIT != 0
                && log::unlink(l).0 == slot
                && names(heap, l, next)
                && next.ts(heap) > *last_ts
                && *taken == bounds[i + 1].0
        },
    )
}

/// The records of `lists` in the order of the backward links from the newest one,
/// returned oldest first; `None` if a link is missing or names another record than
/// the merge would take.
///
/// With `threads > 1`, as [`follow_forward`]: each part's walk runs from its newest
/// record, and the parts are joined only if the oldest record of each part after the
/// first links back to the newest of the part before it (with a smaller timestamp),
/// and left exactly the records of every slot that the part before it holds.
pub(super) fn follow_backward(
    heap: &Heap,
    lists: &[BulkVec<LogRec>],
    threads: usize,
) -> Option<BulkVec<LogRec>> {
    let total: usize = lists.iter().map(|l| l.len()).sum();
    let cuts = cuts(heap, lists, threads, total).unwrap_or_default();
    let bounds = part_bounds(lists, &cuts);
    let Some(last) = end_record(heap, lists, &bounds[bounds.len() - 1], true) else {
        return Some(BulkVec::with_capacity(0));
    };
    let starts: Vec<(LogRec, usize)> = bounds[..bounds.len() - 1]
        .iter()
        .map(|b| end_record(heap, lists, b, true))
        .chain(std::iter::once(Some(last)))
        .collect::<Option<_>>()?;
    by_parts(
        total,
        &bounds,
        |i, out| {
            let (lo, hi) = &bounds[i];
            let count = hi.iter().sum::<usize>() - lo.iter().sum::<usize>();
            let end = walk_backward(heap, lists, starts[i], hi.clone(), count, out)?;
            out.reverse();
            Some(end)
        },
        |i, _, (oldest, oldest_ts, left)| {
            let (prev, slot) = starts[i];
            let l = oldest.back(heap);
            l & LINK_BIT != 0
                && log::unlink(l).0 == slot
                && names(heap, l, prev)
                && prev.ts(heap) < *oldest_ts
                && *left == bounds[i + 1].0
        },
    )
}

/// [`merge_by_ts`] of recovery's lists on up to `threads` threads: the records cut
/// into parts by timestamp ([`cuts`]), each part merged on its own thread, the parts
/// joined in order (every record of a part is older than every record of the next).
pub(super) fn merge_parts(
    heap: &Heap,
    lists: &[BulkVec<LogRec>],
    threads: usize,
) -> BulkVec<LogRec> {
    let total: usize = lists.iter().map(|l| l.len()).sum();
    let Some(cuts) = cuts(heap, lists, threads, total) else {
        return merge_by_ts(lists, |r| r.ts(heap), |r| *r);
    };
    let bounds = part_bounds(lists, &cuts);
    by_parts(
        total,
        &bounds,
        |i, out| {
            let (lo, hi) = &bounds[i];
            let sub: Vec<&[LogRec]> = lists
                .iter()
                .enumerate()
                .map(|(s, l)| &l[lo[s]..hi[s]])
                .collect();
            out.extend_from_slice(&merge_by_ts(&sub, |r| r.ts(heap), |r| *r));
            Some(())
        },
        |_, _, _| true,
    )
    .expect("every part merges")
}
