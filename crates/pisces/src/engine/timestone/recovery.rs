//! Recovery of a `timestone` pool: checkpoint + re-executed operations.
//!
//! 1. **CLog**: a valid CLog record newer than K_done is a checkpoint that crashed
//!    after its record was durable and maybe in the middle of its home writes: apply
//!    it again (idempotent), fence, persist K_done = its K (before anything else can
//!    overwrite the CLog). Home is now the state at K_done.
//! 2. **OLog**: parse every slot's OLog, keep the valid records with a commit
//!    timestamp above K_done, sort them by timestamp (timestamps are unique), and check
//!    them all before changing anything more: every operation id must be registered
//!    (the pool is opened with them in [`crate::Config::operations`]), every physical
//!    entry must target the heap.
//! 3. **Allocations**: mark every block the pending records allocated (their ALLOC
//!    entries) in the persistent bitmaps (idempotent), so the rebuilt allocator
//!    neither hands them out nor drops their slabs; frees wait for step 5.
//! 4. **Re-execution**, on one thread, in timestamp order, each record as one
//!    transaction through the normal engine path with the clock set so that it commits
//!    under its *original* timestamp: an operation record calls the registered
//!    function with its logged arguments, its allocations returning the logged blocks;
//!    a physical record writes its logged objects. No OLog records are written (the
//!    originals stay until step 6). Checkpoints may run in between (the TLog may pass
//!    its high-water mark): their K is an original timestamp, so K_done stays exact.
//! 5. **Final checkpoint** at K = the last re-executed timestamp: home now holds
//!    everything, allocator bits included, and K_done covers every record.
//! 6. Reset the OLogs (empty rings), fence. (The CLog record is covered by K_done.)
//!
//! A crash anywhere repeats the same steps on a state they produce again: step 1 and 3
//! are idempotent, step 4 changes only DRAM and checkpoints (each of which is a
//! complete, self-repairing unit advancing K_done to an original timestamp), so the
//! next recovery re-executes exactly the records above the K_done it finds.
//!
//! Why re-execution gives the original result: an operation runs serializable at
//! least (`Pool::run_op`), so it is equivalent to running alone at its commit
//! timestamp; re-executing in timestamp order on the state at K_done therefore
//! reproduces every operation's reads and writes. Physical records are absolute.

use super::clog;
use super::olog;
use super::optable::OpTable;
use super::shared::TimestoneShared;
use super::thread::TimestoneThread;
use crate::engine::kit::log::redo_log::{self as log, Entry};
use crate::engine::kit::validate::check_logged_write;
use crate::engine::{EngineThread, LentThread, Reexecute};
use crate::heap::alloc::{Allocator, Block};
use crate::heap::Heap;
use crate::tx_options::TxOptions;
use crate::{Error, Result};
use std::sync::Arc;

/// What the new run starts from.
pub(super) struct Recovered {
    /// K_done after recovery (every older commit is home).
    pub k_done: u64,
    /// Next OLog sequence number per slot.
    pub next_seq: Vec<u64>,
    /// Records re-executed.
    pub replayed: usize,
}

struct Pending {
    ts: u64,
    slot: usize,
    seq: u64,
    bytes: Vec<u8>,
    op_tag: Option<u16>,
}

/// Parse thread slot `slot`'s OLog (the kit's redo-log ring, in TimeStone's framing).
pub(super) fn parse_olog(heap: &Heap, slot: usize) -> log::ParsedLog {
    let l = heap.layout();
    log::parse_framed(
        heap,
        l.log_offset(slot),
        super::olog_len(l),
        super::OLOG_FRAMING,
    )
}

/// Run recovery (see the module docs) on a pool nobody uses yet.
pub(super) fn recover(heap: &Arc<Heap>, ops: &dyn Reexecute) -> Result<Recovered> {
    let l = *heap.layout();
    let clog_len = l.engine_area_size - 4096;
    // 1.
    let mut k_done = clog::recover(heap, clog_len)?;
    // 2.
    let mut next_seq = Vec::with_capacity(l.max_threads);
    let mut recs = Vec::new();
    for slot in 0..l.max_threads {
        let parsed = parse_olog(heap, slot);
        if let Some(d) = parsed.damage {
            return Err(Error::corrupt(format!("OLog of thread slot {slot}: {d}")));
        }
        next_seq.push(parsed.next_seq);
        for r in parsed.records {
            if r.persist_ts > k_done {
                // Packed arguments: decode them into the record's plain form.
                let (op_tag, bytes) = match r.op_tag {
                    Some(tag) => match olog::unpack_op_record(tag, &r.entries) {
                        Ok(Some((tag, bytes))) => (Some(tag), bytes),
                        Ok(None) => (Some(tag), r.entries),
                        Err(e) => {
                            return Err(Error::corrupt(format!(
                                "OLog record {} of thread slot {slot} (commit timestamp {}): {e}",
                                r.seq, r.persist_ts
                            )))
                        }
                    },
                    None => (None, r.entries),
                };
                recs.push(Pending {
                    ts: r.persist_ts,
                    slot,
                    seq: r.seq,
                    bytes,
                    op_tag,
                });
            }
        }
    }
    recs.sort_by_key(|r| r.ts);
    let table = OpTable::load(heap)?;
    let mut decoded = Vec::with_capacity(recs.len());
    for r in &recs {
        let what = |e: Error| {
            Error::corrupt(format!(
                "OLog record {} of thread slot {} (commit timestamp {}): {e}",
                r.seq, r.slot, r.ts
            ))
        };
        let entries = match r.op_tag {
            None => log::decode(&r.bytes).map_err(what)?,
            Some(tag) => {
                let op = olog::decode_op_record(tag, &r.bytes).map_err(what)?;
                let id = table.id_at(op.index).ok_or_else(|| {
                    what(Error::corrupt(format!(
                        "operation index {} is not in the operation table",
                        op.index
                    )))
                })?;
                let mut entries = vec![Entry::Op { id, data: op.args }];
                entries.extend(op.blocks);
                entries
            }
        };
        for (i, e) in entries.iter().enumerate() {
            match *e {
                Entry::Op { id, .. } if i == 0 => {
                    if !ops.registered(id) {
                        return Err(Error::invalid_config(format!(
                            "the pool must re-execute operation {id} (commit timestamp {}) \
                             but it is not registered: open the pool with every operation it ran \
                             in Config::operations",
                            r.ts
                        )));
                    }
                }
                Entry::Range { off, data } => {
                    check_logged_write(heap, off, data.len()).map_err(what)?;
                }
                Entry::Alloc(b) | Entry::Free(b) => {
                    Allocator::check_block(heap, b).map_err(what)?;
                }
                _ => return Err(what(Error::corrupt("malformed record"))),
            }
        }
        decoded.push((r.ts, entries));
    }
    let replayed = decoded.len();
    if !decoded.is_empty() {
        // 3.
        for (_, entries) in &decoded {
            for e in entries {
                if let Entry::Alloc(b) = *e {
                    Allocator::replay_alloc(heap, b)?;
                }
            }
        }
        heap.fence();
        // 4.
        let alloc = Arc::new(Allocator::rebuild_private(heap.clone())?);
        let sh = Arc::new(TimestoneShared::new(
            heap.clone(),
            alloc,
            k_done,
            k_done,
            next_seq.clone(),
            true,
            100,
            OpTable::load(heap)?,
        ));
        // `Some` between transactions: an operation's transaction borrows it
        // (`Reexecute::run`).
        let mut thread = Some(TimestoneThread::new(sh.clone(), 0));
        let mut last = k_done;
        for (ts, entries) in &decoded {
            sh.clock.advance_to(ts - 1);
            let fail = |e: Error| {
                Error::corrupt(format!(
                    "re-executing the transaction of commit timestamp {ts}: {e}"
                ))
            };
            if let Some(Entry::Op { id, data }) = entries.first() {
                let script: Vec<Block> = entries[1..]
                    .iter()
                    .filter_map(|e| match *e {
                        Entry::Alloc(b) | Entry::Free(b) => Some(b),
                        _ => None,
                    })
                    .collect();
                if let Some(t) = &mut thread {
                    t.set_script(script);
                }
                ops.run(LentThread::new::<super::Timestone>(&mut thread), *id, data)
                    .map_err(fail)?;
            } else if let Some(t) = &mut thread {
                t.begin(&TxOptions::default());
                if let Err(e) = t.replay_physical(entries) {
                    t.abort();
                    return Err(fail(e));
                }
                t.commit().map_err(fail)?;
            }
            if let Some(t) = &thread {
                if t.script_left() != 0 {
                    return Err(fail(Error::corrupt(
                        "it allocated fewer blocks than it did originally",
                    )));
                }
            }
            last = *ts;
        }
        // 5.
        sh.clock.advance_to(last);
        clog::checkpoint(&sh)?;
        drop(thread);
        k_done = k_done.max(TimestoneShared::load_k_done(heap));
    }
    // 6.
    for (slot, &seq) in next_seq.iter().enumerate() {
        log::reset(heap, l.log_offset(slot), seq);
    }
    heap.fence();
    Ok(Recovered {
        k_done,
        next_seq,
        replayed,
    })
}

/// Describe and check the persistent state of a pool nobody runs (`EngineDef::inspect`).
#[cfg_attr(not(feature = "tools"), allow(dead_code))] // read by the tools only
pub(super) fn inspect(heap: &Heap) -> crate::engine::Inspection {
    let l = *heap.layout();
    let mut problems = Vec::new();
    let never_committed = super::shared::never_committed(heap);
    if let Err(e) = super::optable::check_format_read_only(heap, never_committed) {
        problems.push(e.to_string());
    }
    let k_done = TimestoneShared::load_k_done(heap);
    let mut live = 0;
    for slot in 0..l.max_threads {
        let p = parse_olog(heap, slot);
        live += p.records.iter().filter(|r| r.persist_ts > k_done).count();
    }
    let pending_ckpt =
        clog::read_clog(heap, l.engine_area_size - 4096).is_some_and(|(k, _)| k > k_done);
    crate::engine::Inspection {
        lines: vec![
            format!("checkpoint K_done {k_done}"),
            format!("OLog records to re-execute {live}"),
            format!("interrupted checkpoint {pending_ckpt}"),
        ],
        problems,
    }
}
