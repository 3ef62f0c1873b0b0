//! Recovery (§III-D): rebuild the dependency DAG from the thread logs, drop what lost a
//! predecessor, replay the rest in topological order.
//!
//! 1. For each slot read `retired[s]` and parse its log from the persisted tail (the
//!    kit parser: valid, checksummed records in sequence order). Records with
//!    lid ≤ `retired[s]` are home already (checkpoint invariant R) and are skipped.
//! 2. Nodes are the remaining records; edges: (s, l-1) → (s, l) (same slot, lid
//!    order), and d → (s, l) for each d in its dependency set. A predecessor is
//!    *satisfied* if it is retired (lid ≤ `retired` of its slot) or a node that is
//!    kept; a node with a predecessor that is neither (missing: its record did not
//!    persist) is dropped, and so, transitively, is everything after it. The order is
//!    found by merging the slots' lid-ordered lists (see `topological_order`), which
//!    reads the logs front to back instead of hashing every edge: with a hashed graph
//!    (a map from id to node, successor lists, Kahn's algorithm) recovery of a 32 MiB
//!    log took 0.31 s of CPU, most of it cache misses in the map and the lists; with
//!    the merge, 0.13 s. A cycle cannot
//!    come from a correct run; its nodes are dropped and reported.
//! 3. Replay the kept nodes in topological order: data entries, flush; allocator
//!    entries; **fence**. With `recovery_threads > 1` the data entries are partitioned
//!    by the [`PART_BYTES`] (4 KiB) chunk of the pool they write: every thread walks
//!    the whole topological order and applies the pieces of entries that fall into its
//!    own chunks (chunk number mod threads), flushing them, then fences. Every byte is
//!    thus written by one thread, in topological order, so the result is serial
//!    replay's; and no thread waits for another until the end. (Partitioning by
//!    topological *level* instead needs a join per level, and a level holds at most
//!    one record per slot — every slot's records form a chain — so it would cost a
//!    join per record or two: measured, slower than one thread.) Allocator entries are
//!    applied on one thread in topological order afterwards (they read-modify-write
//!    shared bitmap words and may format a slab).
//! 4. Raise every `retired[s]` to the slot's last kept lid *at once*: write the targets
//!    as an intent record (checksummed), **fence**; store the `retired` words,
//!    **fence**; clear the intent.
//! 5. Reset every log to empty (next sequence numbers kept); **fence**.
//!
//! Why step 4 needs the intent: the `retired` words of several slots flushed under one
//! fence may persist in any subset, and a slot retired without its predecessors breaks
//! invariant R (found by `crashes_during_recovery_keep_the_drop_decision`: slot 1's
//! word persisted, slot 0's did not, and the next recovery replayed slot 0's older
//! record over slot 1's newer value). The runtime checkpoint avoids this by rounds
//! (no record of a round depends on another slot's record of the same round); here
//! every kept record is durably home after step 3, so one all-or-nothing switch
//! suffices. Step 1 applies a valid intent record it finds (the previous recovery
//! replayed everything it names), so `retired` means "at least the intent's targets".
//!
//! Idempotent: a crash before step 4's first fence replays the same nodes again
//! (absolute values; set / clear bits); after it, the intent completes the switch. The
//! dropped records are dropped again — a node is dropped because some ancestor is
//! missing, and retiring *kept* records never makes a missing record satisfied. After
//! step 5 the dropped records are gone (the next run numbers its slot's transactions
//! from `retired[s] + 1`, so the numbers of dropped records are reused, and nothing can
//! refer to the dropped ones any more).

use super::checkpoint::{intent_len, intent_offset, load_retired, store_retired};
use super::record;
use super::tid::{lid_of, slot_of};
use crate::engine::kit::objects::check_logged_write;
use crate::engine::kit::redo_log::{self as log, Entry};
use crate::heap::alloc::Allocator;
use crate::heap::Heap;
use crate::{Error, Result};

/// What recovery found and did (the counts are for tests and diagnostics).
#[derive(Debug, Clone, Default)]
#[allow(dead_code)]
pub struct Recovered {
    /// Next lid of each slot.
    pub next_lid: Vec<u64>,
    /// Next log sequence number of each slot.
    pub next_seq: Vec<u64>,
    /// Records replayed.
    pub replayed: usize,
    /// Records dropped (a predecessor missing or dropped).
    pub dropped: usize,
    /// (slot, lid) of the dropped records (tests, `inspect`).
    pub dropped_ids: Vec<(usize, u64)>,
}

struct Node {
    slot: usize,
    lid: u64,
    body: Vec<u8>,
}

/// The DAG of one pool's logs (steps 1 and 2), computed without writing.
struct Dag {
    retired: Vec<u64>,
    next_seq: Vec<u64>,
    /// Every live record, slot by slot, each slot's in lid order.
    nodes: Vec<Node>,
    /// Kept nodes (indices into `nodes`) in a topological order.
    order: Vec<usize>,
    dropped: Vec<usize>,
    cycles: usize,
}

const INTENT_MAGIC: u64 = 0x5350_3349; // "SP3I"

/// The targets of a valid intent record, if there is one.
fn load_intent(heap: &Heap, slots: usize) -> Option<Vec<u64>> {
    let off = intent_offset(slots);
    let mut bytes = vec![0u8; intent_len(slots)];
    heap.read_bytes(off, &mut bytes);
    let header = u64::from_le_bytes(bytes[..8].try_into().unwrap());
    let crc = crc32c::crc32c(&bytes[8..]) as u64;
    (header == INTENT_MAGIC << 32 | crc).then(|| {
        bytes[8..]
            .chunks_exact(8)
            .map(|w| u64::from_le_bytes(w.try_into().unwrap()))
            .collect()
    })
}

/// Write a valid intent record naming `targets` and flush it (the caller fences).
fn store_intent(heap: &Heap, targets: &[u64]) {
    let off = intent_offset(targets.len());
    let mut body = Vec::with_capacity(8 * targets.len());
    for t in targets {
        body.extend_from_slice(&t.to_le_bytes());
    }
    heap.write_bytes(off + 8, &body);
    let header = INTENT_MAGIC << 32 | crc32c::crc32c(&body) as u64;
    heap.write_bytes(off, &header.to_le_bytes());
    heap.flush(off, intent_len(targets.len()));
}

/// Invalidate the intent record and flush (the caller fences).
fn clear_intent(heap: &Heap, slots: usize) {
    let off = intent_offset(slots);
    heap.write_bytes(off, &0u64.to_le_bytes());
    heap.flush(off, 8);
}

fn build(heap: &Heap) -> Result<Dag> {
    let l = *heap.layout();
    let mut retired = Vec::with_capacity(l.max_threads);
    let mut next_seq = Vec::with_capacity(l.max_threads);
    let mut nodes = Vec::new();
    // Slot s's nodes are `nodes[first[s]..first[s + 1]]`.
    let mut first = Vec::with_capacity(l.max_threads + 1);
    let intent = load_intent(heap, l.max_threads);
    for slot in 0..l.max_threads {
        let mut r = load_retired(heap, slot);
        if let Some(t) = &intent {
            r = r.max(t[slot]);
        }
        retired.push(r);
        let parsed = log::parse(heap, l.log_offset(slot), l.log_bytes_per_thread);
        next_seq.push(parsed.next_seq);
        first.push(nodes.len());
        for rec in parsed.records {
            if rec.persist_ts > r {
                if let Some(prev) = nodes.last().filter(|p: &&Node| p.slot == slot) {
                    if prev.lid >= rec.persist_ts {
                        return Err(Error::Corrupt(format!(
                            "log of thread slot {slot}: record {} follows record {} (logical ids must increase along a log)",
                            rec.persist_ts, prev.lid
                        )));
                    }
                }
                nodes.push(Node {
                    slot,
                    lid: rec.persist_ts,
                    body: rec.entries,
                });
            }
        }
    }
    first.push(nodes.len());
    // Validate every record before anything is written: damaged logs refuse the pool.
    // The dependency sets are kept, flat: node i's are `deps[dep_at[i]..dep_at[i + 1]]`.
    let mut deps: Vec<u64> = Vec::new();
    let mut dep_at = Vec::with_capacity(nodes.len() + 1);
    for n in &nodes {
        let corrupt = |e: Error| {
            Error::Corrupt(format!(
                "log record {} of thread slot {}: {e}",
                n.lid, n.slot
            ))
        };
        let body = record::decode(&n.body).map_err(corrupt)?;
        for e in &body.entries {
            match *e {
                Entry::Word { off, .. } => check_logged_write(heap, off, 8),
                Entry::Range { off, data } => check_logged_write(heap, off, data.len()),
                Entry::Alloc(b) | Entry::Free(b) => Allocator::check_block(heap, b),
                Entry::Op { .. } => Err(Error::Corrupt(
                    "an operation entry (TimeStone's) in an sp3 log".into(),
                )),
            }
            .map_err(corrupt)?;
        }
        for &d in &body.deps {
            if slot_of(d) >= l.max_threads {
                return Err(Error::Corrupt(format!(
                    "log record {} of thread slot {} depends on slot {}",
                    n.lid,
                    n.slot,
                    slot_of(d)
                )));
            }
        }
        dep_at.push(deps.len());
        deps.extend_from_slice(&body.deps);
    }
    dep_at.push(deps.len());
    let (order, dropped, cycles) = topological_order(&nodes, &first, &retired, &deps, &dep_at);
    Ok(Dag {
        retired,
        next_seq,
        nodes,
        order,
        dropped,
        cycles,
    })
}

/// Step 2 without an explicit graph: a merge of the slots' lid-ordered node lists.
///
/// Every edge into a node comes from its slot's previous lid or from its dependency
/// set, so a slot's nodes can only be taken in lid order, and the head of a slot can
/// be taken once each of its dependencies is retired, taken, or known lost. Sweeps
/// over the slots take every head that is ready until a sweep takes nothing; what is
/// left waits on itself (a cycle, impossible in a correct run) and is dropped. A node
/// is dropped ("doomed") if a predecessor is missing (not retired, no record) or was
/// dropped; within a slot that makes every later node doomed too. Each slot's list is
/// read front to back and a dependency is found by its lid's distance from the slot's
/// first lid (lids of a slot are consecutive in a correct run; a binary search covers
/// gaps), so the build touches memory in log order instead of hashing every edge.
fn topological_order(
    nodes: &[Node],
    first: &[usize],
    retired: &[u64],
    deps: &[u64],
    dep_at: &[usize],
) -> (Vec<usize>, Vec<usize>, usize) {
    let slots = retired.len();
    let find = |s: usize, lid: u64| -> Option<usize> {
        let list = &nodes[first[s]..first[s + 1]];
        let head = list.first()?.lid;
        let guess = lid.checked_sub(head)? as usize;
        if list.get(guess).is_some_and(|n| n.lid == lid) {
            return Some(first[s] + guess);
        }
        list.binary_search_by_key(&lid, |n| n.lid)
            .ok()
            .map(|i| first[s] + i)
    };
    let mut next: Vec<usize> = first[..slots].to_vec();
    let mut doomed = vec![false; nodes.len()];
    let mut order = Vec::with_capacity(nodes.len());
    let mut dropped = Vec::new();
    enum Head {
        Ready { doomed: bool },
        Waits,
    }
    loop {
        let mut progress = false;
        for s in 0..slots {
            while next[s] < first[s + 1] {
                let i = next[s];
                let node = &nodes[i];
                // The same-slot predecessor: the previous node of this list, which was
                // taken before, or retired; anything else is missing.
                let same = node.lid - 1;
                let mut head = Head::Ready {
                    doomed: same > retired[s]
                        && !(i > first[s] && nodes[i - 1].lid == same && !doomed[i - 1]),
                };
                for &d in &deps[dep_at[i]..dep_at[i + 1]] {
                    let (ds, dl) = (slot_of(d), lid_of(d));
                    if dl <= retired[ds] {
                        continue;
                    }
                    match find(ds, dl) {
                        None => head = Head::Ready { doomed: true },
                        Some(j) if j < next[ds] => {
                            if doomed[j] {
                                head = Head::Ready { doomed: true };
                            }
                        }
                        Some(_) => {
                            head = Head::Waits;
                            break;
                        }
                    }
                }
                match head {
                    Head::Waits => break,
                    Head::Ready { doomed: d } => {
                        doomed[i] = d;
                        if d {
                            dropped.push(i);
                        } else {
                            order.push(i);
                        }
                        next[s] += 1;
                        progress = true;
                    }
                }
            }
        }
        if !progress {
            break;
        }
    }
    let mut cycles = 0;
    for s in 0..slots {
        cycles += first[s + 1] - next[s];
        dropped.extend(next[s]..first[s + 1]);
    }
    (order, dropped, cycles)
}

/// Bytes of the chunks by which parallel replay partitions the pool.
pub const PART_BYTES: usize = 4096;

/// The share of the pool one replay thread writes: the chunks whose number mod
/// `count` is `index`.
#[derive(Clone, Copy, Debug)]
struct Part {
    index: usize,
    count: usize,
}

impl Part {
    /// Every chunk (serial replay).
    const ALL: Part = Part { index: 0, count: 1 };
}

/// Write the pieces of `data` (to go at `off`) that fall into `part`'s chunks, and
/// flush them.
fn write_part(heap: &Heap, off: usize, data: &[u8], part: Part) {
    if part.count == 1 {
        heap.write_bytes(off, data);
        heap.flush(off, data.len());
        return;
    }
    let (mut at, end) = (off, off + data.len());
    while at < end {
        let chunk = at / PART_BYTES;
        let stop = ((chunk + 1) * PART_BYTES).min(end);
        if chunk % part.count == part.index {
            heap.write_bytes(at, &data[at - off..stop - off]);
            heap.flush(at, stop - at);
        }
        at = stop;
    }
}

fn apply_data(heap: &Heap, body: &[u8], part: Part) {
    for e in record::decode(body).expect("validated").entries {
        match e {
            Entry::Word { off, value } => {
                write_part(heap, off as usize, &value.to_le_bytes(), part)
            }
            Entry::Range { off, data } => write_part(heap, off as usize, data, part),
            // Validated before: sp3 records hold no operation entries.
            Entry::Alloc(_) | Entry::Free(_) | Entry::Op { .. } => {}
        }
    }
}

fn apply_alloc(heap: &Heap, body: &[u8]) -> Result<()> {
    for e in record::decode(body).expect("validated").entries {
        match e {
            Entry::Alloc(b) => Allocator::replay_alloc(heap, b)?,
            Entry::Free(b) => Allocator::replay_free(heap, b)?,
            _ => {}
        }
    }
    Ok(())
}

/// Run recovery on a pool nobody uses yet, replaying with up to `threads` threads.
pub fn recover(heap: &Heap, threads: usize) -> Result<Recovered> {
    let dag = build(heap)?;
    let l = *heap.layout();
    // 3. Replay.
    let workers = threads.min(dag.order.len()).max(1);
    if workers == 1 {
        for &i in &dag.order {
            apply_data(heap, &dag.nodes[i].body, Part::ALL);
        }
    } else {
        std::thread::scope(|sc| {
            for index in 0..workers {
                let dag = &dag;
                sc.spawn(move || {
                    let part = Part {
                        index,
                        count: workers,
                    };
                    for &i in &dag.order {
                        apply_data(heap, &dag.nodes[i].body, part);
                    }
                    // The simulator (and the hardware) order only this thread's
                    // flushes with its fence.
                    heap.fence();
                });
            }
        });
    }
    for &i in &dag.order {
        apply_alloc(heap, &dag.nodes[i].body)?;
    }
    heap.fence();
    // 4. Retire what was replayed (and what a valid intent named), all at once.
    let mut last = dag.retired.clone();
    for &i in &dag.order {
        let n = &dag.nodes[i];
        last[n.slot] = last[n.slot].max(n.lid);
    }
    let behind = (0..l.max_threads).any(|s| load_retired(heap, s) < last[s]);
    if behind {
        store_intent(heap, &last);
        heap.fence();
        for (slot, &target) in last.iter().enumerate() {
            store_retired(heap, slot, target);
        }
        heap.fence();
    }
    // 5. Empty logs (and the intent: the `retired` words hold its targets durably).
    if behind || load_intent(heap, l.max_threads).is_some() {
        clear_intent(heap, l.max_threads);
    }
    for (slot, &seq) in dag.next_seq.iter().enumerate() {
        log::reset(heap, l.log_offset(slot), seq);
    }
    heap.fence();
    Ok(Recovered {
        next_lid: last.iter().map(|r| r + 1).collect(),
        next_seq: dag.next_seq.clone(),
        replayed: dag.order.len(),
        dropped: dag.dropped.len(),
        dropped_ids: dag
            .dropped
            .iter()
            .map(|&i| (dag.nodes[i].slot, dag.nodes[i].lid))
            .collect(),
    })
}

/// Describe the logs of a pool nobody runs (`pisces info` / `check`); writes nothing.
pub fn inspect(heap: &Heap) -> crate::engine::Inspection {
    let mut out = crate::engine::Inspection::default();
    match build(heap) {
        Err(e) => out.problems.push(format!("log: {e}")),
        Ok(dag) => {
            let mut live = vec![0usize; dag.retired.len()];
            for n in &dag.nodes {
                live[n.slot] += 1;
            }
            let busy: Vec<String> = live
                .iter()
                .enumerate()
                .filter(|(_, &c)| c > 0)
                .map(|(s, c)| format!("{s}:{c}"))
                .collect();
            out.lines.push(format!(
                "live records   {} (slot:count {})",
                dag.nodes.len(),
                if busy.is_empty() {
                    "-".into()
                } else {
                    busy.join(" ")
                }
            ));
            out.lines.push(format!(
                "recovery would replay {} and drop {} (predecessor lost)",
                dag.order.len(),
                dag.dropped.len()
            ));
            let retired: Vec<String> = dag
                .retired
                .iter()
                .enumerate()
                .filter(|(_, &r)| r > 0)
                .map(|(s, r)| format!("{s}:{r}"))
                .collect();
            out.lines.push(format!(
                "retired lids   {}",
                if retired.is_empty() {
                    "-".into()
                } else {
                    retired.join(" ")
                }
            ));
            if load_intent(heap, heap.layout().max_threads).is_some() {
                out.lines.push(
                    "recovery intent pending (a recovery crashed after its replay; the next completes it)".into(),
                );
            }
            if dag.cycles > 0 {
                out.problems.push(format!(
                    "log: {} records form a dependency cycle (impossible in a correct run)",
                    dag.cycles
                ));
            }
        }
    }
    out
}
