//! The CLog: checkpoints of the TLog into persistent memory, and their write-back home.
//!
//! # What a checkpoint is
//! A checkpoint at cut K makes home equal to the state after exactly the transactions
//! with commit timestamp ≤ K, and then persists `K_done = K`. Recovery starts from that
//! state and re-executes the OLog records with timestamps above K_done.
//!
//! # Protocol (one checkpoint at a time, under `TimestoneShared::ckpt`)
//! 1. **Cut.** Publish the checkpointer's snapshot K (`ckpt_clock`, the Pisces start
//!    protocol: versions it reads are not reclaimed), fence, and wait until no slot
//!    may have a commit in flight with timestamp ≤ K (`committing` at or below K: a
//!    lower bound of its timestamp, or `BOUND_UNKNOWN` while the bound is read; the
//!    committer's guard precedes its clock increment, so a commit with C ≤ K is seen).
//!    Every
//!    transaction with C ≤ K is then visible, durable in its OLog, and has put its
//!    items into the pending list. Then lower K to the oldest snapshot still reading
//!    (`TimestoneShared::oldest_snapshot`): readers may hold pointers into home
//!    (`tlog`, *The home word*). If that leaves K at K_done, there is nothing to do.
//! 2. **Collect.** Take the pending items with `ts ≤ K`. For each object, the newest
//!    item decides: a write → the version visible at K (the newest version no reader
//!    at or after K needs older than), a free → nothing is written home. Of a written
//!    object only the 8-byte words that differ from home go out (`changed_ranges`:
//!    home holds the state at K_done). Allocator changes are kept in timestamp order,
//!    one per block: its last one (`net_bit_changes`).
//! 3. **CLog record**: every other range and every allocator change, stamped K, in one checksummed
//!    record at the start of the CLog area (header: magic, K, length, CRC32C over K,
//!    length and entries; entries in the kit's redo-log entry format); flush,
//!    **fence**. The area holds one record: the previous one is obsolete once its
//!    K_done is durable, and a torn overwrite fails its checksum. *Ordering invariant: no object of the state at
//!    K_done is touched at home before this fence*, so a crash before it leaves that
//!    state at home and the torn record is ignored.
//!    Before the record, **fresh blocks home**: the ranges of blocks allocated since
//!    K_done, and their allocator bits, are written home, flushed and **fenced**, with
//!    no CLog copy or entry
//!    (`checkpoint`, step 3): such a block is not part of the state at K_done, so a crash
//!    before the record is durable loses nothing recovery needs. *Ordering
//!    invariant: they are durable before the CLog record is written* — sharing the
//!    record's fence would let a crash make the record durable without them.
//! 4. **Home**: write the ranges and bitmap bits, flush, **fence**.
//! 5. **K_done = K**, persist; mark clean the home words of the objects written whose
//!    newest version is the one home now holds (`mark_clean`). Then large blocks freed at or below K become reusable
//!    (their free is durable now), held small blocks freed at or below K become fresh
//!    (see *Reuse inside a window*), and the budget is given back.
//!
//! A crash between 3 and 5 is repaired by recovery, which re-applies a valid CLog
//! record whose K is above K_done (idempotent: absolute ranges, bit sets and clears)
//! and persists K_done = K before anything else touches the CLog.
//!
//! # Coalescing (write amplification)
//! An object updated by many transactions between two checkpoints is written to the
//! CLog and home once, with its newest value at K, and only in the words that changed
//! since K_done: that is what keeps bytes persisted per byte changed below one for
//! repeated small updates. A block allocated and freed between two checkpoints has
//! its contents never written and, outside recovery, no allocator change either (its
//! bit is clear at home and stays clear: `net_bit_changes`); one allocated and kept is
//! written once, home only. Allocator changes go into the record as the kit's BLOCKS
//! entry (8 bytes each) and home with each changed bitmap word written once
//! (`Allocator::replay_changes`): allocations handed out in address order from a
//! thread's cache share bitmap words.
//!
//! # Fresh allocations
//! The allocator bit of a fresh block (free at K_done, allocated at K) goes home with
//! its contents before the CLog record, and the record has no entry for it (8 bytes
//! per allocated block less). A crash before the record is durable leaves the bit
//! set at home for a block the state at K_done does not hold; recovery's step 3 sets
//! the bit of every block allocated by the records above K_done anyway, and the
//! operation that allocated this one is among them (its commit ≤ K is complete and
//! its OLog record is only recycled at K_done ≥ its timestamp), so the recovered
//! state is the same. A crash after the record is durable finds the bit home (the
//! fence), so re-applying the record completes the checkpoint. The `TsFreshBits`
//! mutation writes the bits after the record's fence instead, and the list crash
//! campaign then finds nodes reachable but not allocated.
//!
//! # Reuse inside a window
//! A small block freed by a commit is handed out again inside the same window, before
//! any checkpoint makes its free durable (`TimestoneShared::reuse`); large blocks (runs of
//! slabs, which the allocator may reformat) still wait for the checkpoint. Without
//! this, every remove's block waits for a checkpoint, so a long window makes the heap
//! grow by the blocks freed in it, and the frees waiting bound the window. Why it is
//! crash-safe:
//! * **When.** A freed block enters the reuse lists only once its commit is complete
//!   (OLog record durable, every smaller timestamp complete: after
//!   `TimestoneShared::wait_predecessors`). A commit that reuses it therefore has a larger
//!   timestamp, and its OLog record can never be durable without the free's: recovery
//!   re-executes the free before the reuse, on a state where the block is live with
//!   its old contents (the state at K_done) or already freed by an earlier
//!   re-executed record.
//! * **Where its contents go.** A block is *fresh* in a window — written straight
//!   home before the CLog record, with no CLog copy (step 3) — only if it is free in
//!   the state at K_done, that is, if its first allocator change since K_done is an
//!   allocation (`fresh_blocks`; a block live at K_done can only change by being
//!   freed first). A block live at K_done, freed and handed out again inside the
//!   window has an allocation as its *last* change but not its first: it is part of
//!   the state at K_done (recovery's re-executed operations read it, e.g. the pop
//!   that freed it reads its value), so its new contents go through the CLog like
//!   any object's, and only the words that differ from its old contents at home. The
//!   `TsReuseFresh` mutation (the last change decides) sends such a block home before
//!   the record, and the list campaign with windows of a few operations
//!   (`freed_blocks_reused_inside_a_window_survive_crashes` in the verification
//!   suite) then finds re-executed pops reading the appended value.
//! * **Allocator bits.** Absolute per block, last change wins (`net_bit_changes`); a
//!   free then an allocation leaves the bit set, as home already has it.
//! * **Recovery** allocates by the logged script only, so the reuse lists play no
//!   part in it (they are rebuilt empty; the allocator is rebuilt from the bitmaps).
//! * **Isolation.** A transaction is handed only blocks freed at or below its
//!   snapshot (each entry keeps its free's timestamp): for an older snapshot the block
//!   is still a live object (`thread`, *Blocks freed after the snapshot*).
//!
//! Which block is handed out (write amplification only; the rules above make every
//! choice safe), among those freed at or below the snapshot: first a *fresh* one (`Reuse::fresh`: allocated inside the window and
//! freed again — classified at its free from the pending allocation
//! (`push_items`) —, or freed at or below the last cut, or reserved and never
//! published), since it stays on the home-only path; then the allocator's; the *held*
//! ones (live at K_done, freed inside the window) only when the allocator has no free
//! block left, or first with the engine option `eager_reuse`. The held blocks are
//! bounded by the small blocks live at K_done, which bounds the heap growth a long
//! window causes.
//!
//! # Budget
//! The CLog area holds one record, so the pending items of one checkpoint must fit it.
//! Committers reserve the full encoded size of their items (`reserve_budget`: 16 +
//! length per object written, 16 per allocation or free) before they take their
//! timestamp, waiting for (or running) a checkpoint while the budget is exhausted.
//! When they push their items, an object that already has a pending write is not
//! charged again (the record holds one range per object) and the difference is given
//! back (`push_items`). A checkpoint gives back the charges of the objects it leaves
//! with no pending write. The high-water mark (`checkpoint_pct` of the budget)
//! therefore counts *distinct* dirty bytes: repeated updates of a hot set never
//! trigger a checkpoint by themselves (only a full OLog, large frees waiting for
//! reuse or the pool closing do). The budget is the CLog area (engine option `clog_mib`)
//! less 4 KiB: a larger area widens the window checkpoints coalesce over.
//! An operation whose writes alone exceed the budget fails with `TooLargeForLog`.

use super::shared::{TimestoneShared, CLOG_OFFSET, K_DONE_OFFSET};
use super::tlog::{self, Entry, Version};
use crate::engine::kit::changed_words::changed_word_runs;
use crate::engine::kit::log::redo_log::{self as log, RecordBuilder, HEADER_LEN};
use crate::engine::kit::validate::check_logged_write;
use crate::fasthash::FastMap;
use crate::heap::alloc::{Allocator, Block, ThreadCache};
use crate::heap::Heap;
use crate::medium::counters;
use crate::sync::{fence, spin_step};
use crate::{Error, Result};
use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed, SeqCst};

crate::mutation::point! {
    /// A checkpoint writes home before its CLog record is durable.
    pub(crate) static CHECKPOINT_ORDER = "checkpoint-order";
    /// A checkpoint's write-back of changed words loses the last changed span of each
    /// object.
    pub(crate) static CHECKPOINT_DIFF = "checkpoint-diff";
    /// The blocks a checkpoint writes home outside the CLog (allocated since the last
    /// one) share the CLog record's fence instead of being fenced before the record is
    /// written.
    pub(crate) static FRESH_FENCE = "fresh-fence";
    /// A checkpoint writes every block whose last change in its window is an allocation
    /// straight home before the CLog record (the fresh-block path), also one that was
    /// live at K_done, freed and handed out again inside the window.
    pub(crate) static REUSE_FRESH = "reuse-fresh";
    /// A checkpoint writes the allocator bits of fresh blocks (allocated since the last
    /// one), which have no CLog entry, after the CLog record's fence with the other home
    /// writes instead of before the record.
    pub(crate) static FRESH_BITS = "fresh-bits";
}

/// One thing a committed transaction left for the checkpoint.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Item {
    /// An object written (its newest version at the cut goes home).
    Write {
        /// Commit timestamp.
        ts: u64,
        /// Payload offset.
        off: u64,
        /// Payload length.
        len: usize,
        /// Its index entry (entries live as long as the engine).
        entry: *const Entry,
    },
    /// A block allocated.
    Alloc {
        /// Commit timestamp.
        ts: u64,
        /// The block.
        b: Block,
    },
    /// A block freed.
    Free {
        /// Commit timestamp.
        ts: u64,
        /// The block.
        b: Block,
    },
}

impl Item {
    fn ts(&self) -> u64 {
        match *self {
            Item::Write { ts, .. } | Item::Alloc { ts, .. } | Item::Free { ts, .. } => ts,
        }
    }
    /// Bytes this item may take in a CLog record.
    pub(crate) fn cost(&self) -> u64 {
        match *self {
            Item::Write { len, .. } => 16 + len as u64,
            _ => 16,
        }
    }
}

/// The pending list.
#[derive(Default)]
pub(crate) struct Pending {
    /// Items, in no particular order.
    pub items: Vec<Item>,
    /// Budget in use: the charges below, plus reservations not yet pushed.
    pub used: u64,
    /// Objects `(offset, length)` with pending writes, each charged once (16 + length)
    /// however often it is written before the checkpoint takes it: the record holds one
    /// range per object, so this is what coalescing saves.
    pub charged: FastMap<(u64, usize), ()>,
    /// Bytes of blocks freed by pending items (not reusable before a checkpoint).
    pub freed: u64,
    /// Blocks allocated (`true`) or freed by committed transactions whose checkpoint
    /// has not written the allocator's bitmaps yet, with the commit timestamp: object
    /// validation asks here for a block whose bit does not show the committed state.
    pub bits: FastMap<u64, (bool, u64)>,
}

// SAFETY: the entry pointers point into the index, which lives as long as the engine
// and is shared (`Entry: Sync`).
unsafe impl Send for Pending {}

/// The checkpointer's state.
#[derive(Default)]
pub(crate) struct CkptState {
    /// Cache for blocks whose free a checkpoint made durable.
    pub cache: ThreadCache,
}

const CLOG_MAGIC: u64 = 0x5453_434B_5054_0002; // "TSCKPT" v2 (BLOCKS entries)
/// Bytes of the CLog record header.
pub(super) const CLOG_HEADER: usize = 32;

fn clog_crc(k: u64, entries: &[u8]) -> u64 {
    let mut h = [0u8; 16];
    h[..8].copy_from_slice(&k.to_le_bytes());
    h[8..].copy_from_slice(&(entries.len() as u64).to_le_bytes());
    u64::from(crc32c::crc32c_append(crc32c::crc32c(&h), entries))
}

/// Write the CLog record of cut `k` and flush it (the caller fences).
fn write_clog(heap: &Heap, k: u64, entries: &[u8]) {
    let mut h = [0u8; CLOG_HEADER];
    h[0..8].copy_from_slice(&CLOG_MAGIC.to_le_bytes());
    h[8..16].copy_from_slice(&k.to_le_bytes());
    h[16..24].copy_from_slice(&(entries.len() as u64).to_le_bytes());
    h[24..32].copy_from_slice(&clog_crc(k, entries).to_le_bytes());
    heap.write_bytes(CLOG_OFFSET + CLOG_HEADER, entries);
    heap.write_bytes(CLOG_OFFSET, &h);
    heap.flush(CLOG_OFFSET, CLOG_HEADER + entries.len());
    counters::add_bytes_logged((CLOG_HEADER + entries.len()) as u64);
}

/// The valid CLog record, if any: (K, entries).
pub(super) fn read_clog(heap: &Heap, clog_len: usize) -> Option<(u64, Vec<u8>)> {
    let mut h = [0u8; CLOG_HEADER];
    heap.read_bytes(CLOG_OFFSET, &mut h);
    let w = |i: usize| u64::from_le_bytes(h[i * 8..i * 8 + 8].try_into().unwrap());
    let (magic, k, len, crc) = (w(0), w(1), w(2), w(3));
    if magic != CLOG_MAGIC || len > (clog_len - CLOG_HEADER) as u64 || len % 8 != 0 {
        return None;
    }
    let mut entries = vec![0u8; len as usize];
    heap.read_bytes(CLOG_OFFSET + CLOG_HEADER, &mut entries);
    (clog_crc(k, &entries) == crc).then_some((k, entries))
}

/// Reserve `cost` bytes of the checkpoint budget, checkpointing while it is full.
/// `Err(TooLargeForLog)` if one transaction alone exceeds it.
pub(super) fn reserve_budget(sh: &TimestoneShared, cost: u64) -> Result<()> {
    if cost > sh.budget {
        return Err(Error::TooLargeForLog(Box::new(
            crate::error::TooLargeForLog {
                needed: cost as usize + HEADER_LEN,
                capacity: sh.budget as usize + HEADER_LEN,
            },
        )));
    }
    loop {
        {
            let mut p = crate::engine::kit::shared_counts::lock(&sh.pending);
            if p.used + cost <= sh.budget {
                p.used += cost;
                return Ok(());
            }
        }
        checkpoint(sh)?;
    }
}

/// Give back a reservation that produced no items (an aborted commit).
pub(super) fn unreserve_budget(sh: &TimestoneShared, cost: u64) {
    let mut p = crate::engine::kit::shared_counts::lock(&sh.pending);
    p.used -= cost;
}

/// Push committed items whose full cost `reserved` was reserved: objects already
/// charged are not charged again, and the difference is given back.
///
/// Appends to `freed` each small block the items free, with `true` if it was
/// allocated inside the current window (a pending allocation above K_done: then it is
/// free in the state at K_done again, and stays fresh when reused).
pub(super) fn push_items(
    sh: &TimestoneShared,
    items: &[Item],
    reserved: u64,
    freed: &mut Vec<(Block, bool)>,
) {
    let k_done = sh.k_done.load(Acquire);
    let mut p = crate::engine::kit::shared_counts::lock(&sh.pending);
    let mut actual = 0;
    for it in items {
        if let Item::Free { b, .. } = *it {
            if b.is_small() {
                let fresh = p
                    .bits
                    .get(&b.offset)
                    .is_some_and(|&(alloc, ts)| alloc && ts > k_done);
                freed.push((b, fresh));
            }
        }
        match *it {
            Item::Write { off, len, .. } => {
                if p.charged.insert((off, len), ()).is_none() {
                    actual += it.cost();
                }
            }
            Item::Free { b, ts } => {
                if !b.is_small() {
                    p.freed += b.size;
                }
                sh.set_committed_state(&mut p, b, Some((false, ts)));
                actual += it.cost();
            }
            Item::Alloc { b, ts } => {
                sh.set_committed_state(&mut p, b, Some((true, ts)));
                actual += it.cost();
            }
        }
    }
    debug_assert!(actual <= reserved);
    p.used -= reserved - actual;
    p.items.extend_from_slice(items);
}

/// True if the pending items passed the high-water mark, or hold back freed blocks
/// past `TimestoneShared::freed_high_water` (freed space is reusable only after the checkpoint
/// that makes the free durable, and holding much of it back makes threads format fresh
/// slabs for small blocks, which starves large ones).
pub(super) fn above_high_water(sh: &TimestoneShared) -> bool {
    let p = crate::engine::kit::shared_counts::lock(&sh.pending);
    p.used >= sh.high_water || p.freed >= sh.freed_high_water
}

/// Per payload offset: the timestamp of the newest write or free at or below the cut,
/// and for a write its length and entry.
type Newest = (u64, Option<(usize, *const Entry)>);

/// Run one checkpoint (see the module docs); returns its cut K.
pub(super) fn checkpoint(sh: &TimestoneShared) -> Result<u64> {
    let mut st = crate::engine::kit::shared_counts::lock(&sh.ckpt);
    let _ = HEADER_LEN;
    let heap = &*sh.heap;
    // 1. Cut.
    // Any thread checkpoints: the checkpointer's slot has several writers.
    crate::engine::kit::shared_counts::count_write(&sh.ckpt_clock);
    crate::engine::kit::shared_counts::count_write(&sh.ckpt_clock);
    let k0 = sh.ckpt_clock.start(&sh.clock);
    fence(SeqCst);
    for s in &sh.slots {
        let mut round = 0;
        while s.committing.load(Acquire) <= k0 {
            spin_step(&mut round);
        }
    }
    // The cut is at or below every snapshot that may still read: a reader may hold a
    // pointer into home (`tlog`, *The home word*), so a version newer than its
    // snapshot must not go home while it runs. Re-publishing the checkpointer's
    // snapshot shows `STARTING` during the scan (committers then truncate nothing)
    // and then K itself, so the versions visible at K stay. A transaction the scan
    // misses began after every commit ≤ K0 was complete (the wait above precedes the
    // scan's fence), so its snapshot, a horizon, is at least K0 ≥ K.
    crate::engine::kit::shared_counts::count_write(&sh.ckpt_clock);
    crate::engine::kit::shared_counts::count_write(&sh.ckpt_clock);
    let k = sh
        .ckpt_clock
        .start_with(&sh.clock, |_| k0.min(sh.oldest_snapshot()));
    let k_done = sh.k_done.load(Acquire);
    if k <= k_done {
        // A snapshot at or below the last cut still reads: nothing can go home yet.
        crate::engine::kit::shared_counts::count_write(&sh.ckpt_clock);
        sh.ckpt_clock.finish();
        drop(st);
        std::thread::yield_now();
        return Ok(k_done);
    }
    // 2. Collect.
    let (mine, cost) = {
        let mut p = crate::engine::kit::shared_counts::lock(&sh.pending);
        let mut mine = Vec::new();
        let mut cost = 0;
        let mut freed = 0;
        p.items.retain(|it| {
            if it.ts() <= k {
                if !matches!(it, Item::Write { .. }) {
                    cost += it.cost();
                }
                if let Item::Free { b, .. } = it {
                    if !b.is_small() {
                        freed += b.size;
                    }
                }
                mine.push(*it);
                false
            } else {
                true
            }
        });
        // Objects with no write left after K stop being charged.
        let still: std::collections::HashSet<(u64, usize)> = p
            .items
            .iter()
            .filter_map(|it| match *it {
                Item::Write { off, len, .. } => Some((off, len)),
                _ => None,
            })
            .collect();
        for it in &mine {
            if let Item::Write { off, len, .. } = *it {
                if !still.contains(&(off, len)) && p.charged.remove(&(off, len)).is_some() {
                    cost += it.cost();
                }
            }
        }
        p.freed -= freed;
        (mine, cost)
    };
    // Per payload offset, the newest write or free decides.
    let mut last: FastMap<u64, Newest> = FastMap::default();
    let mut bits: Vec<(u64, bool, Block)> = Vec::new();
    for it in &mine {
        let (off, ts, w) = match *it {
            Item::Write {
                ts,
                off,
                len,
                entry,
            } => (off, ts, Some((len, entry))),
            Item::Free { ts, b } => {
                bits.push((ts, false, b));
                (b.payload(), ts, None)
            }
            Item::Alloc { ts, b } => {
                bits.push((ts, true, b));
                continue;
            }
        };
        let e = last.entry(off).or_insert((0, None));
        if ts >= e.0 {
            *e = (ts, w);
        }
    }
    bits.sort_by_key(|x| x.0);
    let mut rec = RecordBuilder::default();
    let mut offs: Vec<_> = last.into_iter().collect();
    offs.sort_by_key(|x| x.0);
    let net = net_bit_changes(&bits, sh.recovering);
    let fresh = fresh_blocks(&bits);
    let mut direct = RecordBuilder::default();
    let mut home = Vec::new();
    let mut written: Vec<(u64, *const Entry)> = Vec::with_capacity(offs.len());
    for (off, (_, w)) in offs {
        if let Some((len, entry)) = w {
            written.push((off, entry));
            // SAFETY: index entries live as long as the engine; the version visible at
            // K is kept alive by our published snapshot K and is immutable.
            let data = unsafe {
                let v = tlog::visible(&*entry, k);
                std::slice::from_raw_parts(Version::data(v), len.min(Version::len(v)))
            };
            let to = if fresh.contains(&off) {
                &mut direct
            } else {
                &mut rec
            };
            changed_ranges(heap, off, data, &mut home, to);
        }
    }
    // The allocations of fresh blocks go home with their contents, before the record
    // and without a CLog entry (see *Fresh allocations* in the module docs); every
    // other allocator change goes through the record.
    let late_fresh_bits = crate::mutation::active!(FRESH_BITS);
    let (fresh_allocs, net): (Vec<_>, Vec<_>) = net
        .into_iter()
        .partition(|&(alloc, b)| alloc && fresh.contains(&b.payload()));
    if late_fresh_bits {
        // Mutation: they go home after the record's fence, with no CLog entry.
    } else {
        direct.blocks(&fresh_allocs);
    }
    rec.blocks(&net);
    // 3. CLog record, fence.
    if CLOG_HEADER + rec.len() > sh.clog_len {
        // Cannot happen: the budget bounds the items (see the module docs).
        crate::engine::kit::shared_counts::count_write(&sh.ckpt_clock);
        sh.ckpt_clock.finish();
        return Err(Error::TooLargeForLog(Box::new(
            crate::error::TooLargeForLog {
                needed: rec.len() + CLOG_HEADER,
                capacity: sh.clog_len,
            },
        )));
    }
    // 3a. Fresh blocks straight home with their allocator bits, flushed and fenced
    // before the CLog record is written: a crash at the record's fence could make the
    // record durable without them, and recovery would then take the checkpoint as
    // complete.
    //
    // They need no CLog copy: such a block is not part of the state at K_done (its bit
    // is clear there, or set only by a recovery that is about to re-execute the
    // operation that allocated it), so a crash before the CLog record is durable
    // leaves that state intact, and recovery re-executes the operations that
    // allocated it into DRAM copies. The fence makes a valid record imply them home.
    let direct = log::decode(direct.bytes())?;
    if !direct.is_empty() {
        let home = apply(heap, &direct)?;
        crate::engine::kit::shared_counts::count_write(&sh.stats.home_bytes);
        sh.stats.home_bytes.fetch_add(home, Relaxed);
        if !crate::mutation::active!(FRESH_FENCE) {
            heap.fence();
        }
    }
    write_clog(heap, k, rec.bytes());
    crate::engine::kit::shared_counts::count_write(&sh.stats.clog_bytes);
    sh.stats
        .clog_bytes
        .fetch_add((rec.len() + CLOG_HEADER) as u64, Relaxed);
    let entries = log::decode(rec.bytes())?;
    let broken_order = crate::mutation::active!(CHECKPOINT_ORDER);
    if broken_order {
        // Mutation: home first, the CLog record's fence after it.
        let home = apply(heap, &entries)?;
        crate::engine::kit::shared_counts::count_write(&sh.stats.home_bytes);
        sh.stats.home_bytes.fetch_add(home, Relaxed);
    }
    heap.fence();
    // 4. Home.
    let home = if broken_order {
        0
    } else {
        apply(heap, &entries)?
    };
    if late_fresh_bits {
        Allocator::replay_changes(heap, &fresh_allocs)?;
    }
    crate::engine::kit::shared_counts::count_write(&sh.stats.home_bytes);
    sh.stats.home_bytes.fetch_add(home, Relaxed);
    heap.fence();
    // 5. K_done.
    persist_k_done(heap, k);
    crate::engine::kit::shared_counts::count_write(&sh.k_done);
    sh.k_done.fetch_max(k, AcqRel);
    mark_clean(sh, &written, k);
    crate::engine::kit::shared_counts::count_write(&sh.ckpt_clock);
    sh.ckpt_clock.finish();
    if !sh.recovering {
        // Large blocks only: small ones went to the reuse lists when their commit
        // completed (and may be in use again).
        for &(_, alloc, b) in &bits {
            if !alloc && !b.is_small() {
                sh.alloc.release(&mut st.cache, b);
            }
        }
        sh.alloc.drain(&mut st.cache);
        crate::engine::kit::shared_counts::lock(&sh.reuse).checkpointed(k);
    }
    {
        let mut p = crate::engine::kit::shared_counts::lock(&sh.pending);
        p.used -= cost;
        // The bitmaps show these now (unless a later commit changed the block again).
        // A free stays known while a snapshot older than it may run (for that snapshot
        // the object still exists: its versions are in DRAM); such an entry goes when
        // the block is allocated again (the allocation's entry replaces it).
        let oldest = sh.oldest_active(u64::MAX);
        for &(ts, allocated, b) in &bits {
            if p.bits.get(&b.offset).is_some_and(|&(_, t)| t <= ts) && (allocated || ts < oldest) {
                sh.set_committed_state(&mut p, b, None);
            }
        }
    }
    crate::engine::kit::shared_counts::count_write(&sh.stats.checkpoints);
    sh.stats.checkpoints.fetch_add(1, Relaxed);
    Ok(k)
}

/// After home holds the state at `k`: mark clean the home word of each object written
/// whose newest version is the one home now holds (`tlog`, *The home word*). Under the
/// chain's lock (taken as one more slot, without waiting: a committer holding it is
/// about to mark the word dirty anyway), so no commit can push or free in between;
/// `last_ts` equal to the head's timestamp rules out a free after it.
fn mark_clean(sh: &TimestoneShared, written: &[(u64, *const Entry)], k: u64) {
    let me = sh.slots.len();
    for &(off, entry) in written {
        let Some(word) = tlog::home_word(&sh.heap, off) else {
            continue;
        };
        // SAFETY: index entries live as long as the engine.
        let e = unsafe { &*entry };
        if !e.try_lock(me) {
            continue;
        }
        // SAFETY: the head is live while we hold the lock (only lock holders cut).
        let stamp = unsafe { Version::stamp(e.head()) };
        if let Some(x) = tlog::committed(stamp) {
            if x <= k && e.last_ts() == x {
                tlog::mark_clean(word, sh.home_tag, x);
            }
        }
        e.unlock();
    }
}

/// Append to `rec` the ranges of `new` (the object at payload offset `off` as of the
/// cut) that differ from its home bytes, compared in 8-byte words.
///
/// Sound because home holds exactly the state at K_done while a checkpoint collects
/// (invariant 1 of the engine; checkpoints are serialized): a word equal at home is
/// already the word of the state at K, and recovery's re-application of the record
/// (after a crash in step 4) writes the same ranges again. A fresh block is compared
/// against whatever its home bytes are; equal words are equal either way.
///
/// Two changed spans one word apart are merged: a separate range costs 16 bytes of
/// entry header in the CLog, the merged word 8 in the CLog and 8 at home. With that
/// rule the ranges of an object never take more than the whole object's range
/// (16 + length), which is what the budget reserved.
fn changed_ranges(heap: &Heap, off: u64, new: &[u8], home: &mut Vec<u8>, rec: &mut RecordBuilder) {
    debug_assert!(new.len().is_multiple_of(8));
    home.clear();
    home.resize(new.len(), 0);
    heap.read_bytes(off as usize, home);
    let mut spans: Vec<(usize, usize)> = Vec::new(); // word ranges [start, end)
    for (start, end) in changed_word_runs(new, home) {
        match spans.last_mut() {
            Some(last) if start - last.1 <= 1 => last.1 = end,
            _ => spans.push((start, end)),
        }
    }
    if crate::mutation::active!(CHECKPOINT_DIFF) {
        // Mutation: a boundary error that loses the last changed span of the object.
        spans.pop();
    }
    for (s, e) in spans {
        rec.range(off + 8 * s as u64, &new[s * 8..e * 8]);
    }
}

/// The allocator changes a checkpoint writes, from the committed ones in timestamp
/// order: per block only its last change (bit sets and clears are absolute). Order
/// among blocks is kept.
///
/// A block allocated and freed again since K_done (its first change here an
/// allocation, its last a free; reallocations in between included) is left out
/// entirely — no CLog entry, no bitmap write — unless `recovering`. Sound at run
/// time: its first change is an allocation, so it is free in the state at K_done and
/// its bit is clear at home (home holds that state), and clear is its state at K. An
/// operation above K may allocate it again (blocks are reused inside a window, see
/// *Reuse inside a window*), but re-executing that operation needs only a block free
/// at K, which it is (recovery marks the blocks of the records it re-executes
/// allocated itself). During recovery it is not left out: that marking may have set
/// its bit at home. A block live at K_done starts with a free, so it is never left
/// out: its last change (a free, or an allocation after a free) is written.
fn net_bit_changes(bits: &[(u64, bool, Block)], recovering: bool) -> Vec<(bool, Block)> {
    let mut span: FastMap<u64, (usize, usize)> = FastMap::default();
    for (i, &(_, _, b)) in bits.iter().enumerate() {
        span.entry(b.offset).or_insert((i, i)).1 = i;
    }
    bits.iter()
        .enumerate()
        .filter(|&(i, &(_, _, b))| {
            let (first, last) = span[&b.offset];
            let transient = bits[first].1 && !bits[last].1;
            last == i && (recovering || !transient)
        })
        .map(|(_, &(_, alloc, b))| (alloc, b))
        .collect()
}

/// Payloads of the blocks that are *fresh* in a checkpoint's window: free in the
/// state at K_done, written straight home before the CLog record (step 3). Those are
/// the blocks whose first allocator change since K_done (`bits`, in timestamp order)
/// is an allocation: a block live at K_done can only change by being freed first. A
/// block whose last change is an allocation but whose first is a free (freed and
/// handed out again inside the window) is part of the state at K_done, and its new
/// contents go through the CLog like any other object's.
fn fresh_blocks(bits: &[(u64, bool, Block)]) -> std::collections::HashSet<u64> {
    let mut first: FastMap<u64, bool> = FastMap::default();
    let mut last: FastMap<u64, bool> = FastMap::default();
    for &(_, alloc, b) in bits {
        first.entry(b.payload()).or_insert(alloc);
        last.insert(b.payload(), alloc);
    }
    if crate::mutation::active!(REUSE_FRESH) {
        // Mutation: the rule from before blocks were reused inside a window (the last
        // change decides), which sends a reused block live at K_done home early.
        return last
            .into_iter()
            .filter(|&(_, a)| a)
            .map(|(o, _)| o)
            .collect();
    }
    first
        .into_iter()
        .filter(|&(o, a)| a && last[&o])
        .map(|(o, _)| o)
        .collect()
}

/// Persist K_done = `k` (never lowered).
pub(super) fn persist_k_done(heap: &Heap, k: u64) {
    heap.atomic_u64(K_DONE_OFFSET).fetch_max(k, AcqRel);
    heap.persist(K_DONE_OFFSET, 8);
}

/// Check every entry of a CLog record before applying any.
pub(super) fn validate(heap: &Heap, entries: &[log::Entry<'_>]) -> Result<()> {
    for e in entries {
        match *e {
            log::Entry::Range { off, data } => check_logged_write(heap, off, data.len())?,
            log::Entry::Alloc(b) | log::Entry::Free(b) => Allocator::check_block(heap, b)?,
            _ => return Err(Error::corrupt("unexpected entry in a CLog record")),
        }
    }
    Ok(())
}

/// Write a checkpoint's entries home and flush them (the caller fences); returns the
/// bytes written home.
///
/// The allocator changes go out together ([`Allocator::replay_changes`]: each
/// bitmap word once, whatever number of its blocks changed), in their order; ranges
/// and bitmaps never share bytes, so their relative order does not matter.
pub(super) fn apply(heap: &Heap, entries: &[log::Entry<'_>]) -> Result<u64> {
    validate(heap, entries)?;
    let mut bytes = 0;
    let mut bits = Vec::new();
    for e in entries {
        match *e {
            log::Entry::Range { off, data } => {
                heap.write_bytes(off as usize, data);
                heap.flush(off as usize, data.len());
                counters::add_bytes_written_home(data.len() as u64);
                bytes += data.len() as u64;
            }
            log::Entry::Alloc(b) => bits.push((true, b)),
            log::Entry::Free(b) => bits.push((false, b)),
            _ => {}
        }
    }
    Allocator::replay_changes(heap, &bits)?;
    Ok(bytes)
}

/// Recovery step 1: re-apply a valid CLog record newer than K_done, then persist
/// K_done. Returns K_done after it.
pub(super) fn recover(heap: &Heap, clog_len: usize) -> Result<u64> {
    let k_done = TimestoneShared::load_k_done(heap);
    match read_clog(heap, clog_len) {
        Some((k, bytes)) if k > k_done => {
            let what = |e: Error| Error::corrupt(format!("CLog record of checkpoint {k}: {e}"));
            let entries = log::decode(&bytes).map_err(what)?;
            apply(heap, &entries).map_err(what)?;
            heap.fence();
            persist_k_done(heap, k);
            Ok(k)
        }
        _ => Ok(k_done),
    }
}
