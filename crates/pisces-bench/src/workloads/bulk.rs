//! The bulk-load data set: a writer filling an empty key-value table, [`BULK_BATCH`]
//! inserts per transaction, over [`BULK_KEYS`] keys in a seeded random order (8-byte
//! keys, 64-byte values: the hash table's). Every operation is an update (`update_pct`
//! 100): the workers take the next batch of the order from a shared cursor, so each
//! key is inserted once per pass. A run that gets through the whole order starts it
//! again, and its inserts then replace the values the first pass wrote (changed
//! bytes: the value, 64, instead of a new pair's 80). Nothing is preloaded.
//!
//! It measures what a program loading data pays per durable commit: a commit of
//! several inserts, the shape of an import or an ingest loop. The library's engines
//! run it on [`HashMap`] (one bucket per key); the peers on their own tables with the
//! same order ([`BulkOrder`]).

use crate::workloads::hash::{value_of, INSERT_CHANGED};
use crate::workloads::{preload_keys, DataSet, OpRng};
use pisces::tools::containers::MAX_BUCKETS;
use pisces::{HashMap, Pool, ThreadHandle};
use std::sync::atomic::{AtomicU64, Ordering};

/// Keys of the load.
pub const BULK_KEYS: usize = 100_000;
/// Inserts per transaction.
pub const BULK_BATCH: usize = 10;
/// `update_pct` of the load: every transaction writes.
pub const BULK_UPDATE_PCT: u32 = 100;
/// Bytes an insert that replaces a value changes: the value.
pub const REPLACE_CHANGED: u64 = 64;

/// The table of the library's engines.
pub type Table = HashMap<u64, [u8; 64]>;

/// The order of the keys and the cursor into it, shared by the workers (and by the
/// peers' version of the data set).
#[derive(Debug)]
pub struct BulkOrder {
    keys: Vec<u64>,
    /// Batches taken so far, every pass.
    next: AtomicU64,
}

impl BulkOrder {
    /// `n` keys (`0 .. n`, `n >= 1`) in a seeded random order.
    pub fn new(n: usize, seed: u64) -> BulkOrder {
        BulkOrder {
            keys: preload_keys(n.max(1), seed)
                .into_iter()
                .map(|k| k / 2)
                .collect(),
            next: AtomicU64::new(0),
        }
    }

    /// The keys of the next batch (up to [`BULK_BATCH`]; the last of a pass may be
    /// shorter), and whether they are inserted for the first time (the first pass).
    pub fn next_batch(&self) -> (&[u64], bool) {
        // Relaxed: the cursor only hands out distinct batch numbers; the keys are
        // immutable and the table's transactions order the inserts.
        let b = self.next.fetch_add(1, Ordering::Relaxed);
        let per_pass = self.keys.len().div_ceil(BULK_BATCH) as u64;
        let start = (b % per_pass) as usize * BULK_BATCH;
        let end = (start + BULK_BATCH).min(self.keys.len());
        (&self.keys[start..end], b < per_pass)
    }

    /// Keys of the load.
    pub fn key_count(&self) -> usize {
        self.keys.len()
    }

    /// Bytes a batch of `n` inserts changes: new pairs on the first pass, replaced
    /// values after it.
    pub fn changed(n: usize, first_pass: bool) -> u64 {
        n as u64
            * if first_pass {
                INSERT_CHANGED
            } else {
                REPLACE_CHANGED
            }
    }
}

/// Pool bytes the load of `keys` keys needs, generously (as the hash table's).
pub fn pool_bytes(keys: usize) -> u64 {
    1024 * keys as u64
}

/// The bulk load on the library's [`HashMap`] (see the module docs).
pub struct BulkBench {
    table: Table,
    order: BulkOrder,
}

impl BulkBench {
    /// Create the empty table for `keys` keys on `pool`.
    pub fn build(pool: &Pool, keys: usize, seed: u64) -> pisces::Result<Self> {
        let order = BulkOrder::new(keys, seed);
        let buckets = order.key_count().clamp(1, MAX_BUCKETS);
        let table = pool.run(|tx| Table::fixed(tx, buckets))?;
        Ok(BulkBench { table, order })
    }
}

impl DataSet for BulkBench {
    fn op(
        &self,
        _worker: usize,
        h: &mut ThreadHandle,
        _rng: &mut OpRng,
        _update: bool,
    ) -> pisces::Result<u64> {
        let (batch, first) = self.order.next_batch();
        let t = self.table;
        h.run_with(crate::workloads::update_options(), |tx| {
            for &k in batch {
                t.insert(tx, k, value_of(k))?;
            }
            Ok(BulkOrder::changed(batch.len(), first))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engines::Engine;
    use crate::testutil::file_pool;
    use rand::SeedableRng;

    #[test]
    fn batches_cover_every_key_once_per_pass() {
        let o = BulkOrder::new(25, 3);
        let mut seen = Vec::new();
        let mut firsts = Vec::new();
        for _ in 0..3 {
            let (b, first) = o.next_batch();
            seen.extend_from_slice(b);
            firsts.push(first);
        }
        seen.sort_unstable();
        assert_eq!(seen, (0..25).collect::<Vec<u64>>());
        assert_eq!(firsts, [true, true, true]);
        let (b, first) = o.next_batch();
        assert_eq!((b.len(), first), (BULK_BATCH, false), "a second pass");
        assert_ne!(
            BulkOrder::new(25, 4).keys,
            o.keys,
            "the order depends on the seed"
        );
    }

    #[test]
    fn the_load_fills_the_table_then_replaces_values() {
        let (p, _dir) = file_pool(Engine::PISCES, 32 << 20, 2);
        let b = BulkBench::build(&p, 95, 5).unwrap();
        let mut h = p.handle().unwrap();
        let mut rng = OpRng::seed_from_u64(1);
        let mut changed = Vec::new();
        for _ in 0..12 {
            changed.push(b.op(0, &mut h, &mut rng, true).unwrap());
        }
        drop(h);
        // 10 batches in a pass of 95 keys: nine of 10, one of 5; then replacements.
        assert_eq!(changed[..9], [10 * INSERT_CHANGED; 9]);
        assert_eq!(changed[9], 5 * INSERT_CHANGED);
        assert_eq!(changed[10..], [10 * REPLACE_CHANGED; 2]);
        assert_eq!(p.run(|tx| b.table.len(tx)).unwrap(), 95);
        for k in 0..95u64 {
            let v = p.run(|tx| b.table.get(tx, &k)).unwrap();
            assert_eq!(v, Some(value_of(k)), "key {k}");
        }
    }
}
