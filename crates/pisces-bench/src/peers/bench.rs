//! The key-value data sets on a peer: the same keys, values and operations as the
//! library's [`hash`], [`set`], [`ycsb`], [`strmap`] and [`bulk`] data sets (see their
//! docs), one operation per transaction of the store.

use super::{KvStore, Peer};
use crate::workloads::bulk::BulkOrder;
use crate::workloads::kinds::DataKind;
use crate::workloads::strmap::{self, MAX_VALUE};
use crate::workloads::ycsb::{self, KeyChooser, YCSB_UPDATE_BYTES};
use crate::workloads::OpRng;
use crate::workloads::{hash, set};
use crate::workloads::{preload_keys, sample_keys, Sizes, PRELOAD_BATCH, SET_UPDATE_BYTES};
use rand::Rng;
use std::hint::black_box;
use std::path::Path;

/// Which data set, with what its operations need.
enum Load {
    /// The hash table: keys `0 .. key_space`, half of them present.
    Hash { key_space: u64 },
    /// The hash set: its members.
    Set { members: Vec<u64> },
    /// The YCSB table: its keys and request distribution.
    Ycsb(KeyChooser),
    /// The string-keyed map: its records' request distribution, their count and the
    /// seed of their preloaded values.
    StrMap {
        keys: KeyChooser,
        len: usize,
        seed: u64,
    },
    /// The bulk load: the order of its keys and the cursor into it.
    Bulk(BulkOrder),
}

/// A preloaded key-value data set on a peer, shared by the workers.
pub struct PeerBench {
    store: Box<dyn KvStore>,
    load: Load,
    name: &'static str,
}

/// The last byte of a value (what a hash-table lookup examines).
fn last_byte(v: &[u8]) -> u64 {
    v.last().map_or(0, |&b| u64::from(b))
}

impl PeerBench {
    /// Create `peer`'s store in the fresh directory `dir` and preload data set `data`
    /// in batches of [`PRELOAD_BATCH`] keys per transaction. `map_bytes`: the room LMDB
    /// maps.
    pub fn build(
        peer: Peer,
        dir: &Path,
        data: DataKind,
        sizes: &Sizes,
        seed: u64,
        map_bytes: u64,
    ) -> Result<PeerBench, String> {
        let store = peer.create(dir, map_bytes)?;
        let preload = |pairs: &mut dyn Iterator<Item = (u64, Vec<u8>)>| {
            let pairs: Vec<(u64, Vec<u8>)> = pairs.collect();
            for batch in pairs.chunks(PRELOAD_BATCH) {
                store.write(&mut |w| {
                    for (k, v) in batch {
                        w.insert(*k, v)?;
                    }
                    Ok(0)
                })?;
            }
            Ok::<(), String>(())
        };
        let load = match data {
            DataKind::Hash => {
                let keys = preload_keys(sizes.hash_pairs, seed);
                preload(&mut keys.iter().map(|&k| (k, hash::value_of(k).to_vec())))?;
                Load::Hash {
                    key_space: 2 * keys.len().max(1) as u64,
                }
            }
            DataKind::Set(n) => {
                let members = sample_keys(n, 2 * n as u64, seed);
                preload(&mut members.iter().map(|&k| (k, vec![set::MEMBER])))?;
                Load::Set { members }
            }
            DataKind::Ycsb(n) => {
                let chooser = KeyChooser::new(n, seed);
                let order = chooser.preload_order(seed);
                preload(&mut order.iter().map(|&k| (k, ycsb::initial_value(k).to_vec())))?;
                Load::Ycsb(chooser)
            }
            DataKind::StrMap(n) => {
                let chooser = KeyChooser::new(n, seed);
                let stamp = strmap::preload_stamp(seed);
                let mut buf = [0u8; MAX_VALUE];
                for batch in chooser.preload_order(seed).chunks(PRELOAD_BATCH) {
                    store.write_bytes(&mut |w| {
                        for &id in batch {
                            let len = strmap::value_of(id, stamp, &mut buf);
                            w.insert(&strmap::key_of(id), &buf[..len])?;
                        }
                        Ok(0)
                    })?;
                }
                Load::StrMap {
                    keys: chooser,
                    len: n,
                    seed,
                }
            }
            DataKind::Bulk(n) => Load::Bulk(BulkOrder::new(n, seed)),
            other => {
                return Err(format!(
                    "{} runs only the key-value data sets (hash, set, ycsb, strmap, bulk), not {other:?}",
                    peer.name()
                ))
            }
        };
        Ok(PeerBench {
            store,
            load,
            name: peer.name(),
        })
    }

    /// Run one transaction: a read, or an update if `update`. Returns the bytes the
    /// program changed (0 for a read), as the library's data sets do.
    pub fn op(&self, rng: &mut OpRng, update: bool) -> Result<u64, String> {
        let s = self.store.as_ref();
        let missing = |what: &str, k: u64| format!("{}: {what} {k} is missing", self.name);
        match &self.load {
            Load::Hash { key_space } => {
                let k = rng.gen_range(0..*key_space);
                if update {
                    s.write(&mut |w| {
                        if w.remove(k)? {
                            Ok(8)
                        } else {
                            w.insert(k, &hash::value_of(k))?;
                            Ok(72)
                        }
                    })
                } else {
                    black_box(s.read(k, &mut last_byte)?);
                    Ok(0)
                }
            }
            Load::Set { members } => {
                let Some(&k) = members.get(rng.gen_range(0..members.len().max(1))) else {
                    return Ok(0);
                };
                if update {
                    s.write(&mut |w| {
                        if !w.remove(k)? {
                            return Err(missing("set: member key", k));
                        }
                        w.insert(k, &[set::MEMBER])?;
                        Ok(SET_UPDATE_BYTES)
                    })
                } else {
                    let v = s
                        .read(k, &mut last_byte)?
                        .ok_or_else(|| missing("set: member key", k))?;
                    black_box(v);
                    Ok(0)
                }
            }
            Load::Ycsb(keys) => {
                let k = keys.pick(rng);
                if update {
                    let v = ycsb::fresh_value(k, rng.gen());
                    s.write(&mut |w| w.insert(k, &v).map(|()| YCSB_UPDATE_BYTES))
                } else {
                    let sum = s
                        .read(k, &mut |v| ycsb::examine(v))?
                        .ok_or_else(|| missing("ycsb: record", k))?;
                    black_box(sum);
                    Ok(0)
                }
            }
            Load::StrMap { keys, .. } => {
                let id = keys.pick(rng);
                let key = strmap::key_of(id);
                if update {
                    let mut buf = [0u8; MAX_VALUE];
                    let len = strmap::value_of(id, rng.gen(), &mut buf);
                    s.write_bytes(&mut |w| w.insert(&key, &buf[..len]).map(|()| len as u64))
                } else {
                    let sum = s
                        .read_bytes(&key, &mut |v| strmap::examine(v))?
                        .ok_or_else(|| missing("strmap: record", id))?;
                    black_box(sum);
                    Ok(0)
                }
            }
            Load::Bulk(order) => {
                let (batch, first) = order.next_batch();
                s.write(&mut |w| {
                    for &k in batch {
                        w.insert(k, &hash::value_of(k))?;
                    }
                    Ok(BulkOrder::changed(batch.len(), first))
                })
            }
        }
    }

    /// Read the data set back once the workers have stopped, where the data set says
    /// what its contents must be (the string-keyed map: every record present with a
    /// whole value of its own); Ok for the others.
    pub fn final_check(&self) -> Result<(), String> {
        match &self.load {
            Load::StrMap { len, seed, .. } => {
                strmap::check_records(*len, *seed, |k, f| self.store.read_bytes(k, f)).map(|_| ())
            }
            _ => Ok(()),
        }
    }

    /// Write transactions the store ran again after a conflict at commit.
    pub fn conflicts(&self) -> u64 {
        self.store.conflicts()
    }

    /// The store (for tests).
    #[cfg(test)]
    fn store(&self) -> &dyn KvStore {
        self.store.as_ref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workloads::bulk;
    use rand::SeedableRng;

    const SMALL: Sizes = Sizes {
        hash_pairs: 500,
        ..Sizes::QUICK
    };

    fn count(b: &PeerBench, keys: impl Iterator<Item = u64>) -> usize {
        keys.filter(|&k| b.store().read(k, &mut |_| 0).unwrap().is_some())
            .count()
    }

    #[test]
    fn peers_run_the_key_value_data_sets_like_the_library() {
        for peer in Peer::ALL {
            let name = peer.name();
            let mut rng = OpRng::seed_from_u64(4);
            // hash: insert or remove, changed bytes as the library's.
            let dir = tempfile::tempdir().unwrap();
            let b =
                PeerBench::build(peer, dir.path(), DataKind::Hash, &SMALL, 7, 64 << 20).unwrap();
            assert_eq!(count(&b, 0..1000), 500, "{name}");
            let (mut ins, mut rem) = (0i64, 0i64);
            for _ in 0..300 {
                match b.op(&mut rng, true).unwrap() {
                    72 => ins += 1,
                    8 => rem += 1,
                    other => panic!("{name}: changed {other}"),
                }
                assert_eq!(b.op(&mut rng, false).unwrap(), 0);
            }
            assert!(ins > 30 && rem > 30, "{name}: {ins} {rem}");
            assert_eq!(count(&b, 0..1000) as i64, 500 + ins - rem, "{name}");
            drop(b);
            // set: members stay; a missing member is an error on read and update.
            let dir = tempfile::tempdir().unwrap();
            let b = PeerBench::build(peer, dir.path(), DataKind::Set(300), &SMALL, 7, 64 << 20)
                .unwrap();
            for i in 0..300 {
                let c = b.op(&mut rng, i % 3 == 0).unwrap();
                assert_eq!(c, if i % 3 == 0 { SET_UPDATE_BYTES } else { 0 });
            }
            assert_eq!(count(&b, 0..600), 300, "{name}");
            let Load::Set { members } = &b.load else {
                unreachable!()
            };
            let gone = members[0];
            b.store().write(&mut |w| w.remove(gone).map(|_| 0)).unwrap();
            for update in [false, true] {
                let e = (0..100_000)
                    .find_map(|_| b.op(&mut rng, update).err())
                    .expect("the missing member was never picked");
                assert!(e.contains("is missing"), "{name}: {e}");
            }
            drop(b);
            // ycsb: updates overwrite records with fresh values, reads find them all.
            let dir = tempfile::tempdir().unwrap();
            let b = PeerBench::build(peer, dir.path(), DataKind::Ycsb(1000), &SMALL, 7, 64 << 20)
                .unwrap();
            for i in 0..200 {
                let c = b.op(&mut rng, i % 2 == 0).unwrap();
                assert_eq!(c, if i % 2 == 0 { YCSB_UPDATE_BYTES } else { 0 });
            }
            let fresh = (0..1000u64)
                .filter(|&k| {
                    let init = ycsb::examine(&ycsb::initial_value(k));
                    b.store()
                        .read(k, &mut |v| {
                            assert_eq!(v.len(), 64);
                            ycsb::examine(v)
                        })
                        .unwrap()
                        .unwrap()
                        != init
                })
                .count();
            assert!((10..=100).contains(&fresh), "{name}: {fresh}");
            drop(b);
            // strmap: whole values replaced under byte-string keys; the final check
            // reads every record back and fails on a value that is not its own.
            let dir = tempfile::tempdir().unwrap();
            let b = PeerBench::build(
                peer,
                dir.path(),
                DataKind::StrMap(1000),
                &SMALL,
                7,
                64 << 20,
            )
            .unwrap();
            b.final_check().unwrap();
            for i in 0..200 {
                let c = b.op(&mut rng, i % 2 == 0).unwrap();
                if i % 2 == 0 {
                    assert!((16..=512).contains(&c), "{name}: {c}");
                } else {
                    assert_eq!(c, 0, "{name}");
                }
            }
            b.final_check().unwrap();
            let updated =
                strmap::check_records(1000, 7, |k, f| b.store().read_bytes(k, f)).unwrap();
            assert!((10..=100).contains(&updated), "{name}: {updated}");
            b.store()
                .write_bytes(&mut |w| w.insert(&strmap::key_of(5), &[0; 20]).map(|()| 0))
                .unwrap();
            let e = b.final_check().unwrap_err();
            assert!(e.contains("record 5 holds a value"), "{name}: {e}");
            drop(b);
            // bulk: batches of inserts into an empty table, every key once per pass.
            let dir = tempfile::tempdir().unwrap();
            let b = PeerBench::build(peer, dir.path(), DataKind::Bulk(35), &SMALL, 7, 64 << 20)
                .unwrap();
            assert_eq!(count(&b, 0..35), 0, "{name}");
            let changed: Vec<u64> = (0..5).map(|_| b.op(&mut rng, true).unwrap()).collect();
            let full = bulk::BULK_BATCH as u64;
            assert_eq!(
                changed,
                [
                    full * hash::INSERT_CHANGED,
                    full * hash::INSERT_CHANGED,
                    full * hash::INSERT_CHANGED,
                    5 * hash::INSERT_CHANGED,
                    full * bulk::REPLACE_CHANGED
                ],
                "{name}"
            );
            assert_eq!(count(&b, 0..100), 35, "{name}");
            // The tree data sets are not theirs.
            let dir = tempfile::tempdir().unwrap();
            let e = PeerBench::build(peer, dir.path(), DataKind::Tree, &SMALL, 7, 64 << 20)
                .err()
                .unwrap();
            assert!(e.contains("key-value"), "{name}: {e}");
        }
    }
}
