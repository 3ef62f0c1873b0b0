//! Recovery (§III-D): rebuild the dependency DAG from the thread logs, drop what lost a
//! predecessor, replay the rest in topological order.
//!
//! 1. For each slot read `retired[s]` and parse its log from the persisted tail (the
//!    kit parser: valid, checksummed records in sequence order; a valid record later
//!    than where the parse stopped means damage, not a torn tail, and refuses the
//!    pool, since recovering without it would drop committed transactions). Records with
//!    lid ≤ `retired[s]` are home already (checkpoint invariant R) and are skipped.
//!    The parser hands each record over in place, borrowed from the mapping (no
//!    copy); it is decoded and validated right then, while its bytes are in cache,
//!    and the node keeps only what the later steps need (its lid, its entry bytes in
//!    the log, its dependency set, the replay parts it writes, whether it has
//!    allocator entries), so no record is decoded for validation again. With
//!    `recovery_threads > 1` the slots are parsed in parallel (slot s by thread s mod
//!    threads; each slot's parse depends on no other's) and put back in slot order.
//!    Every record is validated before anything is written. The per-record tables
//!    are reserved for the most records a log can hold and backed by huge pages
//!    (`kit::recovery::bulk_vec`): no growth copies them, and first touches fault per 2 MiB.
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
//! 3. Replay the kept nodes in topological order: data entries; flush every line
//!    they wrote, once (`dirty_lines`: a full log writes a hot line many times,
//!    and flushed it each time); allocator entries; **fence**. With
//!    `recovery_threads > 1` the data entries are partitioned by the `PART_BYTES`
//!    (4 KiB) chunk of the pool they write: every thread walks the whole topological
//!    order and applies the pieces of entries that fall into its own chunks (chunk
//!    number mod threads), flushes the lines it wrote once, then fences; a record
//!    whose entries touch none of its chunks (known from step 1) is skipped without
//!    being decoded. Each thread prefetches the home lines of the record
//!    [`PREFETCH_AHEAD`] places ahead (home writes land anywhere in the heap). Every byte is
//!    thus written by one thread, in topological order, so the result is serial
//!    replay's; and no thread waits for another until the end. (Partitioning by
//!    topological *level* instead needs a join per level, and a level holds at most
//!    one record per slot — every slot's records form a chain — so it would cost a
//!    join per record or two, more than the work between the joins.) Allocator entries
//!    are applied on one thread in topological order afterwards (they read-modify-write
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
use super::dirty_lines::DirtyLines;
use super::log;
use super::tid::{lid_of, slot_of};
use crate::engine::kit::log::redo_log::{self, Entry};
use crate::engine::kit::recovery::bulk_vec::BulkVec;
use crate::engine::kit::recovery::per_slot::per_slot;
use crate::engine::kit::recovery::prefetch::{prefetch, prefetch_home};
use crate::engine::kit::recovery::replay_parts::{entry_mask, Part, PART_BYTES};
use crate::engine::kit::validate::check_logged_write;
use crate::heap::alloc::Allocator;
use crate::heap::Heap;
use crate::{Error, Result};

crate::mutation::point! {
    /// Recovery replay does not flush the lines it wrote before its fence (they are then
    /// retired without being durable).
    pub(crate) static REPLAY_FLUSH = "replay-flush";
}

/// What recovery found and did (the counts are for tests and diagnostics).
#[derive(Debug, Clone, Default)]
#[allow(dead_code)]
pub(super) struct Recovered {
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

/// A live record: its lid and where its entries are, with what replay needs to know
/// without decoding them again. 24 bytes (a slice and a flag word would take 32):
/// there is one per record of a full log, millions, in memory recovery touches for
/// the first time (in a profiled run of the recovery benchmark, 256 MiB of log, the
/// kernel's zeroing of these tables' fresh pages was a quarter of recovery's CPU).
struct Node<'h> {
    lid: u64,
    /// Start of the kit entries (after the dependency prefix), in the log itself.
    at: std::ptr::NonNull<u8>,
    /// Bytes of the kit entries.
    len: u32,
    /// Bit p < [`MAX_PARTS`] set: a data entry writes into a chunk of replay part p
    /// (see [`Part`]); bit [`ALLOCS`]: the record holds allocator entries.
    flags: u32,
    log: std::marker::PhantomData<&'h [u8]>,
}

/// The flag bit of [`Node::flags`] for allocator entries.
const ALLOCS: u32 = 1 << 31;
const _: () = assert!(size_of::<Node<'static>>() == 24 && MAX_PARTS < 32);

// SAFETY: a node stands for the shared borrow `&'h [u8]` of its entries (made from
// one in `node`, handed back by `Node::entries` with the same lifetime), which may be
// sent to and shared between threads like any shared borrow of bytes.
unsafe impl Send for Node<'_> {}
// SAFETY: as above.
unsafe impl Sync for Node<'_> {}

impl<'h> Node<'h> {
    /// The kit entries, in the log.
    fn entries(&self) -> &'h [u8] {
        // SAFETY: `at` and `len` were taken from a `&'h [u8]` (see `node`), which
        // lives for 'h: the bytes are valid, and nobody writes them while it lives.
        unsafe { std::slice::from_raw_parts(self.at.as_ptr(), self.len as usize) }
    }
    /// The replay parts its data entries write (bit p: part p).
    fn parts(&self) -> u32 {
        self.flags & !ALLOCS
    }
    /// The record holds allocator entries.
    fn allocs(&self) -> bool {
        self.flags & ALLOCS != 0
    }
}

/// One slot's log, parsed and validated (step 1).
struct SlotLog<'h> {
    /// The live records (lid > `retired`), in lid order.
    nodes: BulkVec<Node<'h>>,
    /// Node i's dependency set is `deps[dep_at[i]..dep_at[i + 1]]`.
    deps: BulkVec<u64>,
    dep_at: BulkVec<usize>,
    /// The nodes' lids are consecutive (always, in a correct run): node i has lid
    /// `nodes[0].lid + i`, so a dependency's node is found without loading any node
    /// (a load that misses the cache: dependencies point anywhere back in a log).
    dense: bool,
    next_seq: u64,
}

/// A node, named by its slot and its index in the slot's list.
type NodeId = (u32, u32);

/// The DAG of one pool's logs (steps 1 and 2), computed without writing.
struct Dag<'h> {
    retired: Vec<u64>,
    slots: Vec<SlotLog<'h>>,
    /// Replay parts the nodes' `parts` masks are computed for.
    parts: usize,
    /// Kept nodes in a topological order.
    order: BulkVec<NodeId>,
    dropped: Vec<NodeId>,
    #[cfg_attr(not(feature = "tools"), allow(dead_code))] // read by the tools only
    cycles: usize,
}

impl<'h> Dag<'h> {
    fn node(&self, (s, i): NodeId) -> &Node<'h> {
        &self.slots[s as usize].nodes[i as usize]
    }
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

/// Decode and validate one record (dependency set appended to `deps`): every entry
/// names a place a transaction could have written, no dependency names a slot the
/// pool does not have. The record is decoded here, once, in the log; replay decodes
/// only what it applies.
fn node<'h>(
    heap: &Heap,
    lid: u64,
    bytes: &'h [u8],
    parts: usize,
    deps: &mut BulkVec<u64>,
) -> Result<Node<'h>> {
    let slots = heap.layout().max_threads;
    let rec = log::split(bytes)?;
    for d in rec.deps() {
        if slot_of(d) >= slots {
            return Err(Error::corrupt(format!("depends on slot {}", slot_of(d))));
        }
        deps.push(d);
    }
    let (mut mask, mut allocs) = (0u32, false);
    for e in redo_log::entries(rec.entries) {
        let e = e?;
        mask |= entry_mask(&e, parts);
        match e {
            Entry::Word { off, .. } => check_logged_write(heap, off, 8)?,
            Entry::Range { off, data } => check_logged_write(heap, off, data.len())?,
            Entry::Alloc(b) | Entry::Free(b) => {
                Allocator::check_block(heap, b)?;
                allocs = true;
            }
            Entry::Op { .. } => {
                return Err(Error::corrupt(
                    "an operation entry (TimeStone's) in an sp3 log",
                ))
            }
        }
    }
    let len = u32::try_from(rec.entries.len()).map_err(|_| {
        Error::corrupt(format!(
            "a record of {} bytes (recovery takes records below 4 GiB)",
            rec.entries.len()
        ))
    })?;
    Ok(Node {
        lid,
        at: std::ptr::NonNull::from(rec.entries).cast(),
        len,
        flags: mask | if allocs { ALLOCS } else { 0 },
        log: std::marker::PhantomData,
    })
}

/// Step 1 for one slot: walk its log in place (no copies), keep the records above
/// `retired`, decode and validate each while it is in cache.
fn parse_slot(heap: &Heap, slot: usize, retired: u64, parts: usize) -> Result<SlotLog<'_>> {
    let l = heap.layout();
    // Every record holds the dependency count, so this bounds the nodes too. Most
    // records depend on at most one other slot's; more deps grow the table.
    let bound = redo_log::max_records(l.log_bytes_per_thread);
    let mut out = SlotLog {
        nodes: BulkVec::with_capacity(bound),
        deps: BulkVec::with_capacity(bound),
        dep_at: BulkVec::with_capacity(bound + 1),
        dense: false,
        next_seq: 0,
    };
    out.dep_at.push(0);
    let mut failed = None;
    let walked = redo_log::walk(heap, l.log_offset(slot), l.log_bytes_per_thread, |rec| {
        if failed.is_some() || rec.persist_ts <= retired {
            return;
        }
        let lid = rec.persist_ts;
        if let Some(prev) = out.nodes.last() {
            if prev.lid >= lid {
                failed = Some(Error::corrupt(format!(
                        "log of thread slot {slot}: record {lid} follows record {} (logical ids must increase along a log)",
                        prev.lid
                    )));
                return;
            }
        }
        match node(heap, lid, rec.entries, parts, &mut out.deps) {
            Ok(n) => {
                out.nodes.push(n);
                out.dep_at.push(out.deps.len());
            }
            Err(e) => {
                failed = Some(Error::corrupt(format!(
                    "log record {lid} of thread slot {slot}: {e}"
                )))
            }
        }
    });
    if let Some(e) = failed {
        return Err(e);
    }
    if let Some(d) = walked.damage {
        // A valid record later than the stop: the stop is damage, not a torn tail,
        // and replaying up to it would silently drop committed transactions.
        return Err(Error::corrupt(format!("log of thread slot {slot}: {d}")));
    }
    out.next_seq = walked.next_seq;
    // Lids strictly increase along the list (checked above), so first and last lids
    // `len - 1` apart means every lid in between is there.
    out.dense = match (out.nodes.first(), out.nodes.last()) {
        (Some(a), Some(b)) => b.lid - a.lid == out.nodes.len() as u64 - 1,
        _ => true,
    };
    Ok(out)
}

/// Steps 1 and 2. With `threads > 1` the slots' logs are parsed in parallel (slot s
/// by thread s mod threads): each slot's parse is independent of the others', and
/// the results are put back in slot order before anything else looks at them.
/// Every record is validated before anything is written: damaged logs refuse the
/// pool (the lowest slot's error is reported).
fn build(heap: &Heap, threads: usize) -> Result<Dag<'_>> {
    let l = *heap.layout();
    let parts = threads.clamp(1, MAX_PARTS);
    let intent = load_intent(heap, l.max_threads);
    let retired: Vec<u64> = (0..l.max_threads)
        .map(|slot| {
            let r = load_retired(heap, slot)?;
            Ok(intent.as_ref().map_or(r, |t| r.max(t[slot])))
        })
        .collect::<Result<_>>()?;
    let slots = per_slot(threads, l.max_threads, |slot| {
        parse_slot(heap, slot, retired[slot], parts)
    })
    .into_iter()
    .collect::<Result<Vec<_>>>()?;
    // A slot's log starts right after its retired word: a log is truncated only after
    // the word that retires its records is durable. A later first record means the
    // word is lower than it was (damaged: zeroed), and replay would drop the slot's
    // records as if their predecessor were lost.
    for (slot, log) in slots.iter().enumerate() {
        if let Some(first) = log.nodes.first() {
            if first.lid > retired[slot] + 1 {
                return Err(Error::corrupt(format!(
                    "thread slot {slot}: its log starts at transaction {} but its retired word \
                     says {}: the records between are missing (the engine area is damaged)",
                    first.lid, retired[slot]
                )));
            }
        }
    }
    let (order, dropped, cycles) = topological_order(&slots, &retired);
    Ok(Dag {
        retired,
        slots,
        parts,
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
    slots: &[SlotLog<'_>],
    retired: &[u64],
) -> (BulkVec<NodeId>, Vec<NodeId>, usize) {
    let heads: Vec<u64> = slots
        .iter()
        .map(|l| l.nodes.first().map_or(0, |n| n.lid))
        .collect();
    let find = |s: usize, lid: u64| -> Option<usize> {
        let list = &slots[s].nodes;
        let guess = lid.checked_sub(heads[s])? as usize;
        if slots[s].dense {
            return (guess < list.len()).then_some(guess);
        }
        if list.get(guess).is_some_and(|n| n.lid == lid) {
            return Some(guess);
        }
        list.binary_search_by_key(&lid, |n| n.lid).ok()
    };
    let id = |s: usize, i: usize| (s as u32, i as u32);
    let mut next = vec![0usize; slots.len()];
    let mut doomed: Vec<Vec<bool>> = slots.iter().map(|l| vec![false; l.nodes.len()]).collect();
    let mut order = BulkVec::with_capacity(slots.iter().map(|l| l.nodes.len()).sum());
    let mut dropped = Vec::new();
    enum Head {
        Ready { doomed: bool },
        Waits,
    }
    loop {
        let mut progress = false;
        for (s, log) in slots.iter().enumerate() {
            let nodes = &log.nodes;
            while next[s] < nodes.len() {
                let i = next[s];
                let node = &nodes[i];
                // The same-slot predecessor: the previous node of this list, which was
                // taken before, or retired; anything else is missing.
                let same = node.lid - 1;
                let mut head = Head::Ready {
                    doomed: same > retired[s]
                        && !(i > 0 && nodes[i - 1].lid == same && !doomed[s][i - 1]),
                };
                for &d in &log.deps[log.dep_at[i]..log.dep_at[i + 1]] {
                    let (ds, dl) = (slot_of(d), lid_of(d));
                    if dl <= retired[ds] {
                        continue;
                    }
                    match find(ds, dl) {
                        None => head = Head::Ready { doomed: true },
                        Some(j) if j < next[ds] => {
                            if doomed[ds][j] {
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
                        doomed[s][i] = d;
                        if d {
                            dropped.push(id(s, i));
                        } else {
                            order.push(id(s, i));
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
    for (s, log) in slots.iter().enumerate() {
        cycles += log.nodes.len() - next[s];
        dropped.extend((next[s]..log.nodes.len()).map(|i| id(s, i)));
    }
    (order, dropped, cycles)
}

/// Most replay parts (the part bits of [`Node::flags`], below [`ALLOCS`]); more
/// recovery threads than this replay with this many.
const MAX_PARTS: usize = 31;

/// Write the pieces of `data` (to go at `off`) that fall into `part`'s chunks, and
/// mark their lines for the flush at the end of replay.
fn write_part(heap: &Heap, off: usize, data: &[u8], part: Part, dirty: &mut DirtyLines) {
    if part.count == 1 {
        heap.write_bytes(off, data);
        dirty.mark(off, data.len());
        return;
    }
    let (mut at, end) = (off, off + data.len());
    while at < end {
        let chunk = at / PART_BYTES;
        let stop = ((chunk + 1) * PART_BYTES).min(end);
        if part.owns(at as u64) {
            heap.write_bytes(at, &data[at - off..stop - off]);
            dirty.mark(at, stop - at);
        }
        at = stop;
    }
}

/// Apply the data entries of one record (validated by [`node`]) that fall into `part`.
fn apply_data(heap: &Heap, node: &Node<'_>, part: Part, dirty: &mut DirtyLines) {
    if !part.touched_by(node.parts()) {
        return;
    }
    for e in redo_log::entries(node.entries()) {
        match e.expect("validated") {
            Entry::Word { off, value } => {
                write_part(heap, off as usize, &value.to_le_bytes(), part, dirty)
            }
            Entry::Range { off, data } => write_part(heap, off as usize, data, part, dirty),
            // Validated before: sp3 records hold no operation entries.
            Entry::Alloc(_) | Entry::Free(_) | Entry::Op { .. } => {}
        }
    }
}

/// How many records ahead of the one it applies a replay thread prefetches the home
/// lines that record writes (and twice as far ahead, the record's bytes in the log).
/// Home writes land anywhere in the heap, so without it nearly every one waits for a
/// cache miss in turn; with it several misses are in flight at once.
const PREFETCH_AHEAD: usize = 8;

/// Prefetch the first line of every home location `node` writes in `part`, and the
/// log bytes of `later`.
fn prefetch_ahead(heap: &Heap, node: Option<&Node<'_>>, later: Option<&Node<'_>>, part: Part) {
    if let Some(n) = later {
        let entries = n.entries();
        prefetch(entries.as_ptr());
        prefetch(
            entries
                .as_ptr()
                .wrapping_add(entries.len().saturating_sub(1)),
        );
    }
    let Some(n) = node.filter(|n| part.touched_by(n.parts())) else {
        return;
    };
    for e in redo_log::entries(n.entries()) {
        let off = match e {
            Ok(Entry::Word { off, .. }) => off,
            Ok(Entry::Range { off, .. }) => off,
            _ => continue,
        };
        prefetch_home(heap, off as usize);
    }
}

/// Apply, in `order`, the data entries of the nodes that fall into `part`, prefetching
/// ahead; then flush each line written once (`dirty_lines`). The caller fences.
fn replay(heap: &Heap, dag: &Dag<'_>, part: Part) {
    let mut dirty = DirtyLines::new(heap.size());
    let at = |k: usize| dag.order.get(k).map(|&id| dag.node(id));
    for (k, &id) in dag.order.iter().enumerate() {
        prefetch_ahead(
            heap,
            at(k + PREFETCH_AHEAD),
            at(k + 2 * PREFETCH_AHEAD),
            part,
        );
        apply_data(heap, dag.node(id), part, &mut dirty);
    }
    if !crate::mutation::active!(REPLAY_FLUSH) {
        dirty.flush(heap);
    }
}

fn apply_alloc(heap: &Heap, node: &Node<'_>) -> Result<()> {
    if !node.allocs() {
        return Ok(());
    }
    for e in redo_log::entries(node.entries()) {
        match e.expect("validated") {
            Entry::Alloc(b) => Allocator::replay_alloc(heap, b)?,
            Entry::Free(b) => Allocator::replay_free(heap, b)?,
            _ => {}
        }
    }
    Ok(())
}

/// Run recovery on a pool nobody uses yet, parsing and replaying with up to `threads`
/// threads.
pub(super) fn recover(heap: &Heap, threads: usize) -> Result<Recovered> {
    let dag = build(heap, threads)?;
    let l = *heap.layout();
    // 3. Replay.
    if dag.parts == 1 || dag.order.len() < 2 {
        replay(heap, &dag, Part::ALL);
    } else {
        std::thread::scope(|sc| {
            for index in 0..dag.parts {
                let dag = &dag;
                sc.spawn(move || {
                    let part = Part {
                        index,
                        count: dag.parts,
                    };
                    replay(heap, dag, part);
                    // The simulator (and the hardware) order only this thread's
                    // flushes with its fence.
                    heap.fence();
                });
            }
        });
    }
    for &id in &dag.order {
        apply_alloc(heap, dag.node(id))?;
    }
    heap.fence();
    // 4. Retire what was replayed (and what a valid intent named), all at once.
    let mut last = dag.retired.clone();
    for &(s, i) in &dag.order {
        let lid = dag.node((s, i)).lid;
        let s = s as usize;
        last[s] = last[s].max(lid);
    }
    // A format 3 pool's plain words are rewritten encoded, through the intent like
    // any update of them (crash safe: both forms read back).
    let behind = crate::engine::kit::log::checked_word::legacy(heap)
        || (0..l.max_threads).any(|s| load_retired(heap, s).map_or(true, |r| r < last[s]));
    if behind {
        store_intent(heap, &last);
        heap.fence();
        for (slot, &target) in last.iter().enumerate() {
            store_retired(heap, slot, target);
        }
        heap.fence();
    }
    // 5. Empty logs (and the intent: the `retired` words hold its targets durably).
    // The nodes borrow the logs' rings; resetting writes only the tail words.
    if behind || load_intent(heap, l.max_threads).is_some() {
        clear_intent(heap, l.max_threads);
    }
    for (slot, log) in dag.slots.iter().enumerate() {
        redo_log::reset(heap, l.log_offset(slot), log.next_seq);
    }
    heap.fence();
    Ok(Recovered {
        next_lid: last.iter().map(|r| r + 1).collect(),
        next_seq: dag.slots.iter().map(|log| log.next_seq).collect(),
        replayed: dag.order.len(),
        dropped: dag.dropped.len(),
        dropped_ids: dag
            .dropped
            .iter()
            .map(|&(s, i)| (s as usize, dag.node((s, i)).lid))
            .collect(),
    })
}

/// Describe the logs of a pool nobody runs (`pisces info` / `check`); writes nothing.
#[cfg_attr(not(feature = "tools"), allow(dead_code))] // read by the tools only
pub(super) fn inspect(heap: &Heap) -> crate::engine::Inspection {
    let mut out = crate::engine::Inspection::default();
    match build(heap, 1) {
        Err(e) => out.problems.push(format!("log: {e}")),
        Ok(dag) => {
            let live: Vec<usize> = dag.slots.iter().map(|log| log.nodes.len()).collect();
            let busy: Vec<String> = live
                .iter()
                .enumerate()
                .filter(|(_, &c)| c > 0)
                .map(|(s, c)| format!("{s}:{c}"))
                .collect();
            out.lines.push(format!(
                "live records   {} (slot:count {})",
                live.iter().sum::<usize>(),
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
