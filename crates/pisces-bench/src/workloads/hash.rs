//! The hash-table data set (the paper's §5.2): `HashMap<u64, [u8; 64]>`, 8-byte keys,
//! 64-byte values, chained buckets.
//!
//! The key space is `0 .. 2N`; the `N` even keys are preloaded in a seeded random
//! order, so lookups and updates pick uniformly random keys of the whole space (about
//! half of the lookups hit). An update is the paper's insert/remove: it removes the key
//! if present and inserts it (with a 64-byte value) if absent, so the map's size is a
//! random walk pulled back to `N`. Changed bytes ([`INSERT_CHANGED`],
//! [`REMOVE_CHANGED`]): 80 for an insert (the new node's key and value, and the link
//! — bucket head or predecessor's `next` — that now points to it), 8 for a remove (the
//! link that skips the node). The new node's own `next` word (null) and the freed
//! node's bytes are not counted.
//!
//! The update is a registered operation ([`UPDATE_OP`], arguments: the map and the
//! key) on every engine, so engines that log operations instead of data (timestone)
//! persist only those 16 argument bytes at commit; the others run it as a closure.

use crate::workloads::anchor::Anchor;
use crate::workloads::OpRng;
use crate::workloads::{preload, preload_keys, read_only_op, DataSet, Sizes};
use pisces::{HashMap, Pod, Pool, ThreadHandle, Tx, Zeroable};
use std::cell::Cell;

/// Bytes an insert changes: key (8) and value (64) of the new node, and the 8-byte
/// link that points to it.
pub const INSERT_CHANGED: u64 = 80;
/// Bytes a remove changes: the 8-byte link that skips the removed node.
pub const REMOVE_CHANGED: u64 = 8;

/// Operation id of the insert-or-remove update.
pub const UPDATE_OP: u32 = 0x4841_5348; // "HASH"

/// Arguments of [`UPDATE_OP`].
#[derive(Clone, Copy, Pod, Zeroable)]
#[repr(C)]
struct UpdateArgs {
    map: HashTable,
    key: u64,
}

thread_local! {
    /// Bytes the last update on this thread changed (operations return no value: the
    /// operation leaves it here for the caller; a retried attempt overwrites it).
    static CHANGED: Cell<u64> = const { Cell::new(0) };
}

/// The update: remove `key` if present, else insert it. Deterministic (it depends on
/// its arguments and the pool only), as an operation must be.
fn update(tx: &mut Tx<'_>, a: &UpdateArgs) -> pisces::Result<()> {
    let changed = if a.map.remove(tx, &a.key)?.is_some() {
        REMOVE_CHANGED
    } else {
        a.map.insert(tx, a.key, value_of(a.key))?;
        INSERT_CHANGED
    };
    CHANGED.with(|c| c.set(changed));
    Ok(())
}

/// Hash table: 8-byte keys, 64-byte values (the paper's §5.2 parameters).
pub type HashTable = HashMap<u64, [u8; 64]>;

/// The hash-table data set (see the module docs).
pub struct HashBench {
    map: HashTable,
    key_space: u64,
}

/// The 64-byte value stored for key `k`.
pub fn value_of(k: u64) -> [u8; 64] {
    let mut v = [0u8; 64];
    for (i, c) in v.chunks_exact_mut(8).enumerate() {
        c.copy_from_slice(&(k ^ i as u64).to_le_bytes());
    }
    v
}

/// Pool bytes the data set needs at `sizes`, generously.
pub fn pool_bytes(sizes: &Sizes) -> u64 {
    512 * 2 * sizes.hash_pairs as u64
}

impl HashBench {
    /// Create the table on `pool` and preload it in batches.
    pub fn build(pool: &Pool, sizes: &Sizes, seed: u64) -> pisces::Result<Self> {
        let mut h = pool.handle()?;
        let keys = preload_keys(sizes.hash_pairs, seed);
        let buckets = sizes.hash_buckets;
        pool.register_op(UPDATE_OP, update)?;
        let map = h.run(|tx| HashTable::fixed(tx, buckets))?;
        preload(&mut h, &keys, |tx, k| {
            map.insert(tx, k, value_of(k))?;
            Ok(())
        })?;
        // `h` is dropped here: its pending group-commit write-backs are done before
        // the workers start.
        Ok(HashBench {
            map,
            key_space: 2 * keys.len().max(1) as u64,
        })
    }
}

impl HashBench {
    /// The data set published in `pool` by another process ([`Anchor`]): the table and
    /// its key space, the update registered with this pool.
    pub fn attach(pool: &Pool, a: &Anchor) -> pisces::Result<Self> {
        a.expect(UPDATE_OP, "hash table")?;
        pool.register_op(UPDATE_OP, update)?;
        Ok(HashBench {
            map: bytemuck::cast::<u64, HashTable>(a.handle),
            key_space: a.count,
        })
    }

    /// The table (the `capi` data set names it from C too).
    pub(crate) fn table(&self) -> HashTable {
        self.map
    }

    /// The key of the next operation: uniform over the whole key space.
    pub(crate) fn pick_key(&self, rng: &mut OpRng) -> u64 {
        crate::workloads::pick(rng, self.key_space)
    }
}

impl DataSet for HashBench {
    fn reopened(&self, pool: &Pool) -> pisces::Result<()> {
        pool.register_op(UPDATE_OP, update)
    }

    fn anchor(&self) -> Option<Anchor> {
        Some(Anchor::new(
            UPDATE_OP,
            bytemuck::cast::<HashTable, u64>(self.map),
            self.key_space,
        ))
    }

    fn op(
        &self,
        _worker: usize,
        h: &mut ThreadHandle,
        rng: &mut OpRng,
        update: bool,
    ) -> pisces::Result<u64> {
        let k = self.pick_key(rng);
        let m = self.map;
        if update {
            h.run_op_with(
                crate::workloads::update_options(),
                UPDATE_OP,
                &UpdateArgs { map: m, key: k },
            )?;
            Ok(CHANGED.with(Cell::get))
        } else {
            read_only_op(h, |tx| Ok(m.get_ref(tx, &k)?.map_or(0, |v| v[63])))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engines::Engine;
    use crate::testutil::file_pool;
    use rand::SeedableRng;

    const SMALL: Sizes = Sizes {
        hash_buckets: 64,
        hash_pairs: 500,
        ..Sizes::QUICK
    };

    /// Every engine of this build (pmdk where the build has it).
    #[test]
    fn hash_updates_insert_or_remove_and_report_changed_bytes() {
        if !Engine::PMDK.in_build() {
            println!("pmdk: skipped: pmdk not in this build");
        }
        for engine in Engine::available() {
            let name = engine.name();
            let (p, _dir) = file_pool(engine, 32 << 20, 2);
            let hb = HashBench::build(&p, &SMALL, 7).unwrap();
            let count = |p: &Pool| p.run(|tx| hb.map.len(tx)).unwrap() as i64;
            assert_eq!(count(&p), 500);
            assert_eq!(hb.key_space, 1000);
            let mut h = p.handle().unwrap();
            let mut rng = OpRng::seed_from_u64(3);
            let (mut ins, mut rem) = (0i64, 0i64);
            for _ in 0..400 {
                match hb.op(0, &mut h, &mut rng, true).unwrap() {
                    INSERT_CHANGED => ins += 1,
                    REMOVE_CHANGED => rem += 1,
                    other => panic!("{name}: changed {other} bytes"),
                }
                assert_eq!(hb.op(0, &mut h, &mut rng, false).unwrap(), 0);
            }
            drop(h);
            assert!(ins > 50 && rem > 50, "{name}: {ins} {rem}");
            assert_eq!(count(&p), 500 + ins - rem, "{name}");
            // Every key present is in the key space and has its value.
            p.run(|tx| {
                hb.map.for_each(tx, |k, v| {
                    assert!(*k < 1000);
                    assert_eq!(*v, value_of(*k));
                    true
                })
            })
            .unwrap();
        }
    }
}
