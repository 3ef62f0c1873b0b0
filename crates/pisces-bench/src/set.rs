//! The hash-set data set, after the set benchmarks of the published PTM peers: a
//! `HashMap<u64, u8>` used as a set of `N` keys (the value is a one-byte placeholder:
//! the container has no zero-sized values). The map grows as it is preloaded
//! (`HashMap::new`): no bucket count is chosen by hand.
//!
//! The `N` member keys are drawn from `0 .. 2N` and preloaded in a random order. Every
//! operation picks one member uniformly: a read looks it up, an update removes it and
//! adds it back in the same transaction, so the set keeps its size and every operation
//! finds its key. A member found missing is reported as an error (so every lookup
//! result is examined, and passed through [`black_box`] as well). Changed bytes of an
//! update: 16 (the key removed and the key added; the placeholder byte is not counted).

use crate::dataset::{missing_member, preload, sample_keys, DataSet, SET_UPDATE_BYTES};
use pisces::{HashMap, Pool, ThreadHandle};
use rand::rngs::StdRng;
use rand::Rng;
use std::hint::black_box;

/// A hash set of 8-byte keys.
pub type Set = HashMap<u64, u8>;

/// The placeholder value of every member.
pub const MEMBER: u8 = 1;

/// The hash-set data set (see the module docs).
pub struct SetBench {
    set: Set,
    members: Vec<u64>,
}

/// Pool bytes a set of `keys` keys needs, generously.
pub fn pool_bytes(keys: usize) -> u64 {
    256 * keys as u64
}

impl SetBench {
    /// Create a set of `keys` keys on `pool` and preload it in batches.
    pub fn build(pool: &Pool, keys: usize, seed: u64) -> pisces::Result<Self> {
        let members = sample_keys(keys, 2 * keys as u64, seed);
        let mut h = pool.handle()?;
        let set = h.run(Set::new)?;
        preload(&mut h, &members, |tx, k| {
            set.insert(tx, k, MEMBER)?;
            Ok(())
        })?;
        Ok(SetBench { set, members })
    }
}

impl DataSet for SetBench {
    fn op(
        &self,
        _worker: usize,
        h: &mut ThreadHandle,
        rng: &mut StdRng,
        update: bool,
    ) -> pisces::Result<u64> {
        let Some(&k) = self
            .members
            .get(rng.gen_range(0..self.members.len().max(1)))
        else {
            return Ok(0);
        };
        let s = self.set;
        if update {
            h.run(|tx| {
                s.remove(tx, &k)?.ok_or_else(|| missing_member("set", k))?;
                s.insert(tx, k, MEMBER)?;
                Ok(SET_UPDATE_BYTES)
            })
        } else {
            let v = h.run(|tx| {
                s.get_ref(tx, &k)?
                    .copied()
                    .ok_or_else(|| missing_member("set", k))
            })?;
            black_box(v);
            Ok(0)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engines::Engine;
    use crate::testutil::file_pool;
    use rand::SeedableRng;

    #[test]
    fn updates_keep_the_set_and_reads_examine_their_result() {
        if !Engine::PMDK.in_build() {
            println!("pmdk: skipped: pmdk not in this build");
        }
        for engine in Engine::available() {
            let name = engine.name();
            let (p, _dir) = file_pool(engine, 32 << 20, 2);
            let sb = SetBench::build(&p, 1000, 5).unwrap();
            let contents = |p: &Pool| {
                let mut v = Vec::new();
                p.run(|tx| {
                    sb.set.for_each(tx, |k, m| {
                        assert_eq!(*m, MEMBER);
                        v.push(*k);
                        true
                    })
                })
                .unwrap();
                v.sort_unstable();
                v
            };
            let mut want = sb.members.clone();
            want.sort_unstable();
            assert_eq!(contents(&p), want, "{name}: preloaded members");
            assert!(want.iter().all(|&k| k < 2000));
            let mut h = p.handle().unwrap();
            let mut rng = StdRng::seed_from_u64(1);
            for i in 0..600 {
                let changed = sb.op(0, &mut h, &mut rng, i % 2 == 0).unwrap();
                assert_eq!(changed, if i % 2 == 0 { SET_UPDATE_BYTES } else { 0 });
            }
            drop(h);
            assert_eq!(contents(&p), want, "{name}: updates keep the set");
            // A lookup whose key is gone is an error: its result is examined.
            p.run(|tx| sb.set.remove(tx, &sb.members[0]).map(|_| ()))
                .unwrap();
            let mut h = p.handle().unwrap();
            let e = (0..100_000)
                .find_map(|_| sb.op(0, &mut h, &mut rng, false).err())
                .expect("the missing member was never looked up");
            assert!(e.to_string().contains("is missing"), "{name}: {e}");
        }
    }
}
