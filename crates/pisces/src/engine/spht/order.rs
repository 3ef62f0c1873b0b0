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
//!   return `None` and recovery merges. With several recovery threads the forward
//!   walk is cut into stretches at timestamps found by binary search in the lists,
//!   walked in parallel, and joined only where each stretch ends at the next one's
//!   first record ([`follow_forward`]): the order is otherwise one thread's work,
//!   between the parallel parse and the parallel replay.

use super::log::{self, LogRec, LINK_BIT};
use crate::engine::kit::recovery::bulk_vec::BulkVec;
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
pub fn merge_by_ts<T, O, L: Deref<Target = [T]>>(
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

/// Fewest records per stretch of a link walk on several threads (fewer records are
/// walked on one thread).
const MIN_STRETCH: usize = 16;

/// A stretch of the forward link walk, where one thread starts walking.
struct Stretch {
    /// Its first record, and that record's slot.
    first: LogRec,
    slot: usize,
    /// Per slot: the records the walk has taken once it took `first` (the records
    /// before the stretch, and `first`).
    taken: Vec<usize>,
    /// Records of the whole walk before `first`.
    before: usize,
}

/// Where stretches `1..parts` of a forward walk over `lists` (`total` records) start:
/// stretch `i` at the oldest record of timestamp at least `t_i`, the smallest
/// timestamp with `i / parts` of the records older than it, each with the records of
/// every list older than it (each list is in timestamp order: binary searches on the
/// timestamps in the headers, a few hundred reads). `None` if they do not cut the
/// walk into non-empty stretches in increasing timestamp order (the walk then runs as
/// one stretch).
fn stretch_starts(
    heap: &Heap,
    lists: &[BulkVec<LogRec>],
    parts: usize,
    total: usize,
) -> Option<Vec<Stretch>> {
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
    let mut starts: Vec<Stretch> = Vec::with_capacity(parts - 1);
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
        let at = older(lo);
        let (slot, first) = lists
            .iter()
            .zip(&at)
            .enumerate()
            .filter_map(|(s, (l, &k))| l.get(k).map(|&r| (s, r)))
            .min_by_key(|(_, r)| r.ts(heap))?;
        let mut taken = older(first.ts(heap));
        let before: usize = taken.iter().sum();
        if lists[slot].get(taken[slot]) != Some(&first)
            || before <= starts.last().map_or(0, |p| p.before)
        {
            return None;
        }
        taken[slot] += 1;
        starts.push(Stretch {
            first,
            slot,
            taken,
            before,
        });
    }
    Some(starts)
}

/// Walk the forward links from the first record of `st`, taking `count` records in
/// all into `out`. Returns the last record taken, its timestamp and the per-slot
/// counts of records taken; `None` if a link is missing or names another record than
/// the next of its slot not taken yet, with a larger timestamp.
fn walk_stretch(
    heap: &Heap,
    lists: &[BulkVec<LogRec>],
    st: &Stretch,
    count: usize,
    out: &mut BulkVec<LogRec>,
) -> Option<(LogRec, u64, Vec<usize>)> {
    let mut taken = st.taken.clone();
    let mut cur = st.first;
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

/// The records of `lists` in the order of the forward links, from the oldest one;
/// `None` if a link is missing or names another record than the merge would take.
///
/// With `threads > 1` the walk is cut into stretches ([`stretch_starts`]), each walked
/// on its own thread with the same checks, and the stretches are joined only if each
/// one ends where the next begins: its last record links to the next one's first
/// (with a larger timestamp), and it took exactly the records of every slot that the
/// next one counts as taken before it. Then every record is taken once, each the next
/// of its slot, in increasing timestamp order: the one walk's result.
pub fn follow_forward(
    heap: &Heap,
    lists: &[BulkVec<LogRec>],
    threads: usize,
) -> Option<BulkVec<LogRec>> {
    let total: usize = lists.iter().map(|l| l.len()).sum();
    let Some((first_slot, first)) = lists
        .iter()
        .enumerate()
        .filter_map(|(s, l)| l.first().map(|&r| (s, r)))
        .min_by_key(|(_, r)| r.ts(heap))
    else {
        return Some(BulkVec::with_capacity(0));
    };
    let mut taken = vec![0usize; lists.len()];
    taken[first_slot] = 1;
    let mut stretches = vec![Stretch {
        first,
        slot: first_slot,
        taken,
        before: 0,
    }];
    let parts = threads.clamp(1, (total / MIN_STRETCH).max(1));
    if parts > 1 {
        stretches.extend(stretch_starts(heap, lists, parts, total).unwrap_or_default());
    }
    let count = |i: usize| stretches.get(i + 1).map_or(total, |n| n.before) - stretches[i].before;
    let mut out = BulkVec::with_capacity(total);
    if stretches.len() == 1 {
        walk_stretch(heap, lists, &stretches[0], total, &mut out)?;
        return Some(out);
    }
    let (head, rest) = std::thread::scope(|sc| {
        let (stretches, count) = (&stretches, &count);
        let others: Vec<_> = (1..stretches.len())
            .map(|i| {
                sc.spawn(move || {
                    let mut part = BulkVec::with_capacity(count(i));
                    let end = walk_stretch(heap, lists, &stretches[i], count(i), &mut part);
                    (end, part)
                })
            })
            .collect();
        let head = walk_stretch(heap, lists, &stretches[0], count(0), &mut out);
        let rest: Vec<_> = others
            .into_iter()
            .map(|o| o.join().expect("a recovery link walk panicked"))
            .collect();
        (head, rest)
    });
    let mut end = head?;
    for (next, (next_end, part)) in stretches[1..].iter().zip(rest) {
        let (last, last_ts, mut taken) = end;
        taken[next.slot] += 1;
        let l = last.fwd(heap);
        let joins = l & LINK_BIT != 0
            && log::unlink(l).0 == next.slot
            && names(heap, l, next.first)
            && next.first.ts(heap) > last_ts
            && taken == next.taken;
        if !joins {
            return None;
        }
        out.extend_from_slice(&part);
        end = next_end?;
    }
    Some(out)
}

/// The records of `lists` in the order of the backward links from the newest one,
/// returned oldest first; `None` if a link is missing or names another record than
/// the merge would take.
pub fn follow_backward(heap: &Heap, lists: &[BulkVec<LogRec>]) -> Option<BulkVec<LogRec>> {
    let total: usize = lists.iter().map(|l| l.len()).sum();
    let mut out = BulkVec::with_capacity(total);
    let Some((last_slot, mut cur)) = lists
        .iter()
        .enumerate()
        .filter_map(|(s, l)| l.last().map(|&r| (s, r)))
        .max_by_key(|(_, r)| r.ts(heap))
    else {
        return Some(out);
    };
    let mut cur_ts = cur.ts(heap);
    // Per slot: how many of its records are not taken yet (the next one to take is
    // the one before that count).
    let mut left: Vec<usize> = lists.iter().map(|l| l.len()).collect();
    left[last_slot] -= 1;
    out.push(cur);
    while out.len() < total {
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
    out.reverse();
    Some(out)
}
