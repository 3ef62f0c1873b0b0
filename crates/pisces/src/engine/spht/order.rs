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

/// The records of `lists` in the order of the forward links, from the oldest one;
/// `None` if a link is missing or names another record than the merge would take.
pub fn follow_forward(heap: &Heap, lists: &[BulkVec<LogRec>]) -> Option<BulkVec<LogRec>> {
    let total: usize = lists.iter().map(|l| l.len()).sum();
    let mut out = BulkVec::with_capacity(total);
    let Some((first_slot, mut cur)) = lists
        .iter()
        .enumerate()
        .filter_map(|(s, l)| l.first().map(|&r| (s, r)))
        .min_by_key(|(_, r)| r.ts(heap))
    else {
        return Some(out);
    };
    let mut cur_ts = cur.ts(heap);
    let mut taken = vec![0usize; lists.len()];
    taken[first_slot] = 1;
    out.push(cur);
    while out.len() < total {
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
