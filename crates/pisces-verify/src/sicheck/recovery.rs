//! Durability across crashes: what a recovery must keep.
//!
//! A history spanning crashes has epochs; the recovery between epoch `e` and `e + 1` is
//! a point that every transaction of epoch `e + 1` follows (the graph carries this as
//! real-time edges through a recovery node, see `checker.rs`). What must survive it:
//!
//! * **Durable transactions**: every committed (acknowledged) transaction, and, closing
//!   over reads within an epoch, every transaction a durable one read from before the
//!   crash (a durable state that depends on a value must contain the value). Each append of a durable transaction
//!   of epoch `e` must be in every read of its key in every epoch after `e`; a
//!   missing one is a **lost write**.
//! * **Indeterminate transactions** that are not durable may be lost, but only
//!   atomically: if any of its appends is observed after the recovery, all of them
//!   must be in every later read of their keys; otherwise it is a **partial
//!   recovery**.
//!
//! Only reads are evidence: a key nobody reads after a recovery says nothing. The
//! `sicheck` workload therefore reads every key once after each recovery.

use super::anomaly::{Anomaly, Report};
use super::fasthash::FastMap;
use super::history::{Key, Op, Outcome, TxnId, Value};
use super::index::Index;

/// A read: (epoch, reader, list).
type LaterRead<'a> = (u32, TxnId, &'a [Value]);

/// Run the checks (nothing to do without a crash).
pub fn check(ix: &Index<'_>, report: &mut Report) {
    if ix.max_epoch == 0 {
        return;
    }
    let h = ix.h;
    // Reads of each key by transactions that took effect: (epoch, reader, list).
    let mut reads: FastMap<Key, Vec<LaterRead<'_>>> = FastMap::default();
    for (id, t) in h.txns.iter().enumerate() {
        if !t.took_effect() {
            continue;
        }
        for op in &t.ops {
            if let Op::Read { key, list } = op {
                reads
                    .entry(*key)
                    .or_default()
                    .push((t.epoch, id, list.as_slice()));
            }
        }
    }
    // Durable: committed, closed over read-from within an epoch (a read after a
    // recovery shows presence, judged below, not a need).
    let mut durable = vec![false; h.txns.len()];
    let mut work: Vec<TxnId> = Vec::new();
    for (id, t) in h.txns.iter().enumerate() {
        if t.outcome == Outcome::Committed {
            durable[id] = true;
            work.push(id);
        }
    }
    while let Some(id) = work.pop() {
        for op in &h.txns[id].ops {
            if let Op::Read { key, list } = op {
                for v in list {
                    if let Some(w) = ix.writer_on(*key, *v) {
                        let same_epoch = h.txns[w.txn].epoch == h.txns[id].epoch;
                        if same_epoch && !durable[w.txn] && h.txns[w.txn].took_effect() {
                            durable[w.txn] = true;
                            work.push(w.txn);
                        }
                    }
                }
            }
        }
    }
    // A later read of `key` that lacks `value`, if any.
    let missing = |txn: TxnId, key: Key, value: Value| {
        let e = h.txns[txn].epoch;
        reads.get(&key).and_then(|rs| {
            rs.iter()
                .find(|(re, _, l)| *re > e && !l.contains(&value))
                .map(|(re, r, l)| (*re, *r, l.to_vec()))
        })
    };
    let observed_later = |txn: TxnId, key: Key, value: Value| {
        let e = h.txns[txn].epoch;
        reads
            .get(&key)
            .is_some_and(|rs| rs.iter().any(|(re, _, l)| *re > e && l.contains(&value)))
    };
    for (id, t) in h.txns.iter().enumerate() {
        if !t.took_effect() {
            continue;
        }
        if durable[id] {
            let mut lost: Vec<Key> = Vec::new();
            for (key, value) in t.appends() {
                if lost.contains(&key) {
                    continue;
                }
                if let Some((re, r, l)) = missing(id, key, value) {
                    lost.push(key);
                    let why = if t.outcome == Outcome::Committed {
                        "acknowledged"
                    } else {
                        "read by a durable transaction"
                    };
                    report.add(Anomaly::LostWrite, || {
                        format!(
                            "T{id} (epoch {}, {why}) appended {value} to key {key}, but T{r} \
                             read it as {l:?} in epoch {re}",
                            t.epoch
                        )
                    });
                }
            }
        } else if t.appends().any(|(k, v)| observed_later(id, k, v)) {
            if let Some((key, value, (re, r, l))) = t
                .appends()
                .find_map(|(k, v)| missing(id, k, v).map(|m| (k, v, m)))
            {
                report.add(Anomaly::PartialRecovery, || {
                    format!(
                        "indeterminate T{id} (epoch {}) is partly present after recovery: \
                         T{r} read key {key} as {l:?} in epoch {re}, without its {value}",
                        t.epoch
                    )
                });
            }
        }
    }
}
