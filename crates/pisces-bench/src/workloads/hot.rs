//! The hot-key data set: a conflict-heavy mix on a small set of counters.
//!
//! [`HOT_KEYS`] (16) counters, each its own 64-byte object (one cache line, so two
//! counters never share a line and every conflict is a real one). An update reads
//! [`READS`] (4) distinct counters chosen uniformly at random and writes the first
//! [`WRITES`] (2) of them: the first gets the sum of the four plus one, the second is
//! incremented, and each written counter's write count (word 1) goes up by one. A
//! read-only transaction reads 4 distinct counters and sums them. Changed bytes per
//! update: 32 (two words in each of two objects).
//!
//! Why these sizes: with 2 threads each update holds 2 of 16 objects and reads 4, so a
//! concurrent update touches one of them with probability about 1 − (12/16 · 11/15 ·
//! 10/14 · 9/13) ≈ 73 %: nearly every pair of concurrent updates conflicts, while the
//! key set is large enough that the two threads are not simply serialised on one
//! object. This is the mix on which early visibility (a committed but not yet
//! persistent version is readable) should matter most: the next transaction on a hot
//! counter finds the previous writer's version unlocked while its log record is still
//! being persisted.

use crate::workloads::OpRng;
use crate::workloads::{read_only_op, DataSet};
use pisces::{PPtr, Pool, ThreadHandle};
use rand::seq::index::sample;

/// Counters in the hot set.
pub const HOT_KEYS: usize = 16;
/// Counters an update (and a read-only transaction) reads.
pub const READS: usize = 4;
/// Counters an update writes (the first of those it read).
pub const WRITES: usize = 2;
/// Bytes the program changes per update: two words in each written counter.
pub const CHANGED_BYTES: u64 = 16 * WRITES as u64;

/// One counter: word 0 is the value, word 1 counts the updates that wrote it; the rest
/// pads the object to a cache line.
type Counter = [u64; 8];

/// The hot-key data set (see the module docs).
pub struct HotBench {
    counters: Vec<PPtr<Counter>>,
}

/// Pool bytes the data set needs (the counters and the allocator's slabs).
pub fn pool_bytes() -> u64 {
    1 << 20
}

impl HotBench {
    /// Allocate the counters (all 0) in one transaction.
    pub fn build(pool: &Pool) -> pisces::Result<Self> {
        let mut h = pool.handle()?;
        let counters = h.run(|tx| {
            (0..HOT_KEYS)
                .map(|_| tx.alloc([0u64; 8]))
                .collect::<pisces::Result<Vec<_>>>()
        })?;
        Ok(HotBench { counters })
    }

    /// The sum of the counters' write counts (tests).
    #[cfg(test)]
    fn writes(&self, pool: &Pool) -> u64 {
        pool.run(|tx| {
            let mut s = 0u64;
            for &c in &self.counters {
                s += tx.read(c)?[1];
            }
            Ok(s)
        })
        .unwrap()
    }
}

impl DataSet for HotBench {
    fn op(
        &self,
        _worker: usize,
        h: &mut ThreadHandle,
        rng: &mut OpRng,
        update: bool,
    ) -> pisces::Result<u64> {
        let picked: Vec<PPtr<Counter>> = sample(rng, HOT_KEYS, READS)
            .into_iter()
            .map(|i| self.counters[i])
            .collect();
        if update {
            h.run_with(crate::workloads::update_options(), |tx| {
                let mut sum = 0u64;
                for &c in &picked {
                    sum = sum.wrapping_add(tx.read(c)?[0]);
                }
                let first = tx.write(picked[0])?;
                first[0] = sum.wrapping_add(1);
                first[1] += 1;
                let second = tx.write(picked[1])?;
                second[0] = second[0].wrapping_add(1);
                second[1] += 1;
                Ok(CHANGED_BYTES)
            })
        } else {
            read_only_op(h, |tx| {
                let mut sum = 0u64;
                for &c in &picked {
                    sum = sum.wrapping_add(tx.read(c)?[0]);
                }
                Ok(sum)
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engines::Engine;
    use crate::testutil::file_pool;
    use rand::SeedableRng;

    /// Every engine of this build runs the mix from two threads, and no update is lost:
    /// the write counts add up to 2 per committed update.
    #[test]
    fn every_engine_runs_the_hot_mix() {
        for engine in Engine::available() {
            let name = engine.name();
            let (p, _dir) = file_pool(engine, 32 << 20, 3);
            let hb = HotBench::build(&p).unwrap();
            assert_eq!(hb.writes(&p), 0, "{name}");
            std::thread::scope(|s| {
                for t in 0..2u64 {
                    let (p, hb) = (&p, &hb);
                    s.spawn(move || {
                        let mut h = p.handle().unwrap();
                        let mut rng = OpRng::seed_from_u64(t);
                        for i in 0..300 {
                            let changed = hb.op(t as usize, &mut h, &mut rng, i % 4 != 0);
                            assert!(matches!(changed, Ok(0 | CHANGED_BYTES)), "{name}");
                        }
                    });
                }
            });
            // 2 threads × 225 updates, 2 counters written by each.
            assert_eq!(hb.writes(&p), 900, "{name}");
        }
    }
}
