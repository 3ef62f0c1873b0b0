//! Version orders: the order in which each key's values were appended, inferred from
//! the reads.
//!
//! A read of a list `[a, b, c]` says that `a`, `b`, `c` were appended in that order and
//! were the first three. So within one epoch every read of a key must be a prefix of
//! the longest read of it, which is then the key's version order for that epoch (what
//! no read observed stays unordered, exactly as in Elle). Two reads where neither is a
//! prefix of the other are an *incompatible order*.
//!
//! Across a crash. Recovery keeps a prefix of each list: the values from earlier epochs
//! at the front of the longest read after the recovery (the *survivors*) must agree
//! with the order before it — either a prefix of it (the rest was lost) or an extension
//! by values nobody had read yet — and no value from an earlier epoch may follow one
//! appended after the recovery. A violation is a *crash order* anomaly. Which losses are
//! allowed is decided in `recovery.rs`; here the surviving prefix only becomes the
//! start of the next epoch's order (the longest read includes it), so ww edges run
//! from the last survivor to the first value appended after the recovery.

use super::anomaly::{Anomaly, Report};
use super::fasthash::FastMap;
use super::history::{Key, Op, Value};
use super::index::Index;

/// Version order of every key in every epoch.
#[derive(Debug, Default)]
pub struct Orders {
    by_key: FastMap<Key, Vec<Vec<Value>>>,
}

impl Orders {
    /// The order of `key` in `epoch` (empty if unknown).
    pub fn get(&self, key: Key, epoch: u32) -> &[Value] {
        self.by_key
            .get(&key)
            .and_then(|v| v.get(epoch as usize))
            .map_or(&[], |v| v.as_slice())
    }

    /// Every (key, epoch, order).
    pub fn iter(&self) -> impl Iterator<Item = (Key, u32, &[Value])> + '_ {
        self.by_key.iter().flat_map(|(k, es)| {
            es.iter()
                .enumerate()
                .map(move |(e, o)| (*k, e as u32, o.as_slice()))
        })
    }

    /// Where `value` sits in the order of `key` in `epoch`.
    pub fn position(&self, key: Key, epoch: u32, value: Value) -> Option<usize> {
        self.get(key, epoch).iter().position(|v| *v == value)
    }
}

fn is_prefix(short: &[Value], long: &[Value]) -> bool {
    short.len() <= long.len() && long[..short.len()] == *short
}

/// A read: (reader, list).
type Reading<'a> = (usize, &'a [Value]);

/// Infer the orders, reporting incompatible orders and crash-order anomalies.
pub fn infer(ix: &Index<'_>, report: &mut Report) -> Orders {
    let epochs = ix.max_epoch as usize + 1;
    // key -> epoch -> reads (reader, list)
    let mut reads: FastMap<Key, Vec<Vec<Reading<'_>>>> = FastMap::default();
    for (id, t) in ix.h.txns.iter().enumerate() {
        if !t.took_effect() {
            continue;
        }
        for op in &t.ops {
            if let Op::Read { key, list } = op {
                reads
                    .entry(*key)
                    .or_insert_with(|| vec![Vec::new(); epochs])[t.epoch as usize]
                    .push((id, list.as_slice()));
            }
        }
    }
    let mut orders = Orders::default();
    let mut keys: Vec<Key> = reads.keys().copied().collect();
    keys.sort_unstable();
    for key in keys {
        let per_epoch = &reads[&key];
        let mut order: Vec<Vec<Value>> = Vec::with_capacity(epochs);
        for (e, rs) in per_epoch.iter().enumerate() {
            let longest = rs
                .iter()
                .max_by_key(|(_, l)| l.len())
                .map_or(&[][..], |(_, l)| *l);
            if let Some((t, l)) = rs.iter().find(|(_, l)| !is_prefix(l, longest)) {
                let (lt, _) = rs
                    .iter()
                    .max_by_key(|(_, l)| l.len())
                    .copied()
                    .unwrap_or((*t, longest));
                report.add(Anomaly::IncompatibleOrder, || {
                    format!(
                        "key {key}, epoch {e}: T{t} read {l:?} but T{lt} read {longest:?}; \
                         neither is a prefix of the other"
                    )
                });
            }
            order.push(longest.to_vec());
        }
        for e in 1..epochs {
            check_survivors(ix, key, e as u32, &mut order, report);
        }
        orders.by_key.insert(key, order);
    }
    orders
}

/// Compare what survived recovery `e - 1 → e` with the order of epoch `e - 1`,
/// extending that order by survivors nobody had read before the crash.
fn check_survivors(
    ix: &Index<'_>,
    key: Key,
    e: u32,
    order: &mut [Vec<Value>],
    report: &mut Report,
) {
    let cur = &order[e as usize];
    let epoch_of = |v: &Value| ix.writer_on(key, *v).map(|w| ix.epoch(w.txn));
    let split = cur
        .iter()
        .position(|v| epoch_of(v).is_none_or(|we| we >= e))
        .unwrap_or(cur.len());
    if let Some(v) = cur[split..]
        .iter()
        .find(|v| epoch_of(v).is_some_and(|we| we < e))
    {
        let list = cur.clone();
        let v = *v;
        report.add(Anomaly::CrashOrder, || {
            format!(
                "key {key}, epoch {e}: read {list:?} has {v}, appended before a recovery, \
                 after a value appended since"
            )
        });
    }
    if cur.is_empty() {
        // Nothing read after the recovery: the survivors are unknown.
        return;
    }
    let survivors = cur[..split].to_vec();
    let before = &order[e as usize - 1];
    if is_prefix(&survivors, before) {
        return; // possibly some values lost: judged by recovery.rs
    }
    if is_prefix(before, &survivors) {
        order[e as usize - 1] = survivors;
        return;
    }
    let before = before.clone();
    report.add(Anomaly::CrashOrder, || {
        format!(
            "key {key}: after recovery {e} the list starts with {survivors:?}, which does not \
             agree with the order {before:?} read before it"
        )
    });
}
