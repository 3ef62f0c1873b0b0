//! Anomalies visible without the dependency graph: each read, each transaction, each
//! group of transactions that read the same version.
//!
//! Per read of a committed or indeterminate transaction (aborted attempts' reads are
//! not evidence: the attempt never took effect):
//! * **garbage read**: a value nobody appended to that key;
//! * **duplicate**: a value twice in the list (and, per history, a value appended
//!   twice);
//! * **G1a**: a value appended by an aborted attempt;
//! * **G1b**: a value `v` whose writer appended more values to the key after `v`, while
//!   the read does not contain the writer's last one — an intermediate state.
//!
//! Per transaction, **internal** consistency: a read must equal the transaction's
//! previous read of the key plus its own appends since; a first read must end with the
//! transaction's own earlier appends (see `index.rs`).
//!
//! **Lost update**: two transactions of one epoch whose external reads of a key saw the
//! same version (same list) and which both appended to that key. Under snapshot
//! isolation the second committer would have had to start after the first committed,
//! and so could not have read the older version.

use super::anomaly::{Anomaly, Report};
use super::fasthash::FastMap;
use super::history::{Key, Op, Outcome, TxnId, Value};
use super::index::{Index, Write};

/// Run every local check.
pub fn check(ix: &Index<'_>, report: &mut Report) {
    for v in &ix.duplicate_appends {
        report.add(Anomaly::Duplicate, || {
            format!("value {v} was appended twice")
        });
    }
    for (t, key, list, expect) in &ix.internal {
        report.add(Anomaly::Internal, || {
            format!("T{t} read key {key} as {list:?}, expected {expect} from its own operations")
        });
    }
    for (id, t) in ix.h.txns.iter().enumerate() {
        if !t.took_effect() {
            continue;
        }
        for op in &t.ops {
            if let Op::Read { key, list } = op {
                check_read(ix, id, *key, list, report);
            }
        }
    }
    lost_updates(ix, report);
}

fn check_read(ix: &Index<'_>, reader: TxnId, key: Key, list: &[Value], report: &mut Report) {
    let mut sorted = list.to_vec();
    sorted.sort_unstable();
    if let Some(w) = sorted.windows(2).find(|w| w[0] == w[1]) {
        let v = w[0];
        report.add(Anomaly::Duplicate, || {
            format!("T{reader} read key {key} as {list:?}: {v} appears twice")
        });
    }
    let writes: Vec<Option<Write>> = list.iter().map(|v| ix.writer_on(key, *v)).collect();
    let mut found = list.iter().zip(&writes);
    if let Some((v, _)) = found.find(|(_, w)| w.is_none()) {
        let other = ix.writer.get(v).map(|w| w.key);
        report.add(Anomaly::GarbageRead, || match other {
            Some(k) => format!(
                "T{reader} read key {key} as {list:?}: {v} was appended to key {k}, not {key}"
            ),
            None => format!("T{reader} read key {key} as {list:?}: nobody appended {v}"),
        });
    }
    let known = || {
        list.iter()
            .zip(&writes)
            .filter_map(|(v, w)| w.map(|w| (*v, w)))
            .filter(|(_, w)| w.txn != reader)
    };
    let outcome = |w: &Write| ix.h.txns[w.txn].outcome;
    if let Some((v, w)) = known().find(|(_, w)| outcome(w) == Outcome::Aborted) {
        report.add(Anomaly::G1a, || {
            format!(
                "T{reader} read key {key} as {list:?}: {v} was appended by T{} which aborted",
                w.txn
            )
        });
    }
    if let Some((v, w)) = known().find(|(v, w)| {
        outcome(w) != Outcome::Aborted
            && w.last_of_txn != *v
            && sorted.binary_search(&w.last_of_txn).is_err()
    }) {
        report.add(Anomaly::G1b, || {
            format!(
                "T{reader} read key {key} as {list:?}: it saw {v} but not {}, which T{} \
                 appended after it in the same transaction",
                w.last_of_txn, w.txn
            )
        });
    }
}

fn lost_updates(ix: &Index<'_>, report: &mut Report) {
    let mut groups: FastMap<(Key, u32, &[Value]), Vec<TxnId>> = FastMap::default();
    for r in &ix.ext_reads {
        if r.appended {
            groups
                .entry((r.key, ix.epoch(r.txn), r.list.as_slice()))
                .or_default()
                .push(r.txn);
        }
    }
    let mut found: Vec<_> = groups.into_iter().filter(|(_, t)| t.len() > 1).collect();
    found.sort_unstable();
    for ((key, epoch, list), txns) in found {
        report.add(Anomaly::LostUpdate, || {
            format!(
                "transactions {} of epoch {epoch} all read key {key} as {list:?} and all \
                 appended to it",
                txns.iter()
                    .map(|t| format!("T{t}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        });
    }
}
