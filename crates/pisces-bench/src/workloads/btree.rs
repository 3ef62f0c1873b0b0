//! The B+-tree data set (the paper's §5.2): `BTreeMap<u64, u64, 16>`, 256-byte nodes.
//!
//! The key space is `0 .. 2N`; the `N` even keys are preloaded in a seeded random
//! order, and lookups and updates pick uniformly random keys of the whole space. An
//! update is the paper's insert, which overwrites the value when the key exists:
//! changed bytes 8 for an overwrite, 16 for a new key. The tree grows during a run (by
//! at most `N` keys), as in the paper.

use crate::workloads::OpRng;
use crate::workloads::{preload, preload_keys, read_only_op, DataSet, Sizes};
use pisces::{BTreeMap, Pool, ThreadHandle};
use rand::Rng;

/// B+-tree: 8-byte keys and values, fanout 16, so nodes are 256 bytes (§5.2).
pub type Tree = BTreeMap<u64, u64, 16>;

/// The B+-tree data set (see the module docs).
pub struct TreeBench {
    tree: Tree,
    key_space: u64,
}

/// Pool bytes the data set needs at `sizes`, generously.
pub fn pool_bytes(sizes: &Sizes) -> u64 {
    256 * 2 * sizes.btree_keys as u64
}

impl TreeBench {
    /// Create the tree on `pool` and preload it in batches.
    pub fn build(pool: &Pool, sizes: &Sizes, seed: u64) -> pisces::Result<Self> {
        let mut h = pool.handle()?;
        let keys = preload_keys(sizes.btree_keys, seed);
        let tree = h.run(|tx| Tree::new(tx))?;
        preload(&mut h, &keys, |tx, k| {
            tree.insert(tx, k, !k)?;
            Ok(())
        })?;
        Ok(TreeBench {
            tree,
            key_space: 2 * keys.len().max(1) as u64,
        })
    }
}

impl DataSet for TreeBench {
    fn op(
        &self,
        _worker: usize,
        h: &mut ThreadHandle,
        rng: &mut OpRng,
        update: bool,
    ) -> pisces::Result<u64> {
        let k = rng.gen_range(0..self.key_space);
        let t = self.tree;
        if update {
            let v: u64 = rng.gen();
            h.run_with(crate::workloads::update_options(), |tx| {
                Ok(if t.insert(tx, k, v)?.is_some() { 8 } else { 16 })
            })
        } else {
            read_only_op(h, |tx| Ok(t.get_ref(tx, &k)?.copied()))
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
        btree_keys: 700,
        ..Sizes::QUICK
    };

    /// Every engine of this build (pmdk where the build has it).
    #[test]
    fn tree_updates_overwrite_or_insert() {
        if !Engine::PMDK.in_build() {
            println!("pmdk: skipped: pmdk not in this build");
        }
        for engine in Engine::available() {
            let name = engine.name();
            let (p, _dir) = file_pool(engine, 32 << 20, 2);
            let tb = TreeBench::build(&p, &SMALL, 9).unwrap();
            let count = |p: &Pool| p.run(|tx| tb.tree.len(tx)).unwrap();
            assert_eq!(count(&p), 700);
            let mut h = p.handle().unwrap();
            let mut rng = OpRng::seed_from_u64(4);
            let mut seen = [0usize; 2];
            for _ in 0..300 {
                match tb.op(0, &mut h, &mut rng, true).unwrap() {
                    8 => seen[0] += 1,
                    16 => seen[1] += 1,
                    other => panic!("{name}: changed {other} bytes"),
                }
                assert_eq!(tb.op(0, &mut h, &mut rng, false).unwrap(), 0);
            }
            drop(h);
            assert!(seen[0] > 50 && seen[1] > 50, "{name}: {seen:?}");
            assert_eq!(count(&p), 700 + seen[1], "{name}");
        }
    }
}
