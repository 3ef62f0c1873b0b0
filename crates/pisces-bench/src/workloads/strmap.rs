//! The string-keyed data set: a map of [`STRMAP_KEYS`] records whose keys are byte
//! strings (`user` and a zero-padded decimal id, YCSB's form: [`key_of`]) and whose
//! values are byte strings of [`MIN_VALUE`] to [`MAX_VALUE`] bytes, read and replaced
//! whole, one record per transaction, with YCSB's request distribution (the zipfian
//! [`KeyChooser`] of [`crate::workloads::ycsb`], hot records scattered). The update
//! share is the mix's (`--update-pct`; 50 % by default, YCSB's A).
//!
//! A value is a function of its key and a stamp ([`value_of`]): its first 8 bytes are
//! the stamp, its length and the rest follow from key and stamp. The preload stamps
//! every record with one stamp derived from the seed, so every engine and peer holds the
//! same bytes; an update writes a fresh stamp from the worker's RNG, so it replaces a
//! value with one of another length (almost always: 497 lengths), and the old value's
//! block is freed. A read fetches the value and examines every byte ([`examine`]). A
//! record found missing is an error. Changed bytes of an update: the new value's length.
//!
//! The library's engines run it on `BTreeMap<PBytes, PBytes>` (the tree owns its keys;
//! an update stores a new value block under the key and frees the old one in the same
//! transaction); the peers of [`crate::peers`] store the same keys and values in their
//! own byte-keyed tables. After a measurement [`check_records`] reads every record back:
//! each key is present and holds a whole value of its own (one [`value_of`] its key and
//! stamp give), so a torn or misplaced value fails the measurement.

use crate::workloads::ycsb::KeyChooser;
use crate::workloads::{preload, read_only_op, DataSet, OpRng};
use pisces::{BTreeMap, Error, PBytes, Pool, ThreadHandle};
use rand::Rng;

/// Records of the map (YCSB's usual scaled-down record count, as the `ycsb` set).
pub const STRMAP_KEYS: usize = 100_000;
/// Update mixes of the data set unless `--update-pct` is given: YCSB's A.
pub const STRMAP_MIXES: [u32; 1] = [50];
/// The shortest value (its stamp and 8 more bytes).
pub const MIN_VALUE: usize = 16;
/// The longest value.
pub const MAX_VALUE: usize = 512;
/// Bytes of a key: `user` and 10 decimal digits.
pub const KEY_BYTES: usize = 14;

/// The map of the library's engines.
pub type Table = BTreeMap<PBytes, PBytes>;

/// A record's key.
pub type Key = [u8; KEY_BYTES];

/// The key of record `id`: `user` and `id` in 10 zero-padded decimal digits (ids below
/// 10^10), so the keys' byte order is the ids' order.
pub fn key_of(id: u64) -> Key {
    let mut k = *b"user0000000000";
    let mut n = id;
    for d in k[4..].iter_mut().rev() {
        *d = b'0' + (n % 10) as u8;
        n /= 10;
    }
    k
}

/// A 64-bit mix of `x` (splitmix64's finaliser): neighbouring inputs give unrelated
/// outputs.
fn mix(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// The stamp of every preloaded value under `seed`.
pub fn preload_stamp(seed: u64) -> u64 {
    mix(seed ^ 0x5742_4d41_5053_5452)
}

/// The length of record `id`'s value under `stamp`: `MIN_VALUE ..= MAX_VALUE`.
pub fn value_len(id: u64, stamp: u64) -> usize {
    let span = (MAX_VALUE - MIN_VALUE + 1) as u64;
    MIN_VALUE + (mix(id ^ mix(stamp)) % span) as usize
}

/// Record `id`'s value under `stamp`, written into `buf`; returns its length. The
/// first 8 bytes are the stamp (little-endian), the rest a function of id and stamp.
pub fn value_of(id: u64, stamp: u64, buf: &mut [u8; MAX_VALUE]) -> usize {
    let len = value_len(id, stamp);
    buf[..8].copy_from_slice(&stamp.to_le_bytes());
    let base = mix(id.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ stamp);
    for (i, c) in buf[8..len].chunks_mut(8).enumerate() {
        let w = mix(base.wrapping_add(i as u64)).to_le_bytes();
        c.copy_from_slice(&w[..c.len()]);
    }
    len
}

/// What a read makes of a value: a sum of its bytes, so every byte is loaded.
pub fn examine(v: &[u8]) -> u64 {
    v.iter().map(|&b| u64::from(b)).sum()
}

/// Whether `v` is a whole value of record `id`: the one its stamp (its first 8 bytes)
/// gives, length and bytes.
pub fn is_value_of(id: u64, v: &[u8]) -> bool {
    let Some(stamp) = v.get(..8) else {
        return false;
    };
    let stamp = u64::from_le_bytes(stamp.try_into().expect("8 bytes"));
    let mut want = [0u8; MAX_VALUE];
    let len = value_of(id, stamp, &mut want);
    v == &want[..len]
}

/// The error of a record found missing.
pub fn missing_record(id: u64) -> Error {
    Error::Corrupt(format!("strmap: record {id} is missing").into())
}

/// Check records `0 .. n` through `read(key, examine)` (the value of the key, given to
/// `examine`, whose result is returned; `None` if the key is absent): every record is
/// present and holds a whole value of its own. Returns how many hold a value other
/// than their preloaded one (the records updated).
pub fn check_records<E: std::fmt::Display>(
    n: usize,
    seed: u64,
    mut read: impl FnMut(&[u8], &mut dyn FnMut(&[u8]) -> u64) -> Result<Option<u64>, E>,
) -> Result<usize, String> {
    let first = preload_stamp(seed);
    let mut updated = 0;
    for id in 0..n as u64 {
        // 0: not its own value; 1: the preloaded one; 2: an update's.
        let verdict = read(&key_of(id), &mut |v| {
            if !is_value_of(id, v) {
                0
            } else if v[..8] == first.to_le_bytes() {
                1
            } else {
                2
            }
        })
        .map_err(|e| format!("strmap: reading record {id}: {e}"))?;
        match verdict {
            None => return Err(missing_record(id).to_string()),
            Some(0) => {
                return Err(format!(
                    "strmap: record {id} holds a value that is not one of its own"
                ))
            }
            Some(2) => updated += 1,
            Some(_) => {}
        }
    }
    Ok(updated)
}

/// Pool bytes the map of `keys` records needs, generously: a key block, a value block
/// of up to [`MAX_VALUE`] bytes, a share of the tree's nodes and separators, and the
/// blocks the updates of a measurement allocate before the old ones are reused.
pub fn pool_bytes(keys: usize) -> u64 {
    2048 * keys as u64
}

/// The string-keyed data set on the library's [`BTreeMap`] (see the module docs).
pub struct StrMapBench {
    table: Table,
    keys: KeyChooser,
    len: usize,
    seed: u64,
}

impl StrMapBench {
    /// Create the map of `keys` records on `pool` and preload it in batches.
    pub fn build(pool: &Pool, keys: usize, seed: u64) -> pisces::Result<Self> {
        let chooser = KeyChooser::new(keys, seed);
        let stamp = preload_stamp(seed);
        let mut h = pool.handle()?;
        let table = h.run(|tx| Table::new(tx))?;
        let mut buf = [0u8; MAX_VALUE];
        preload(&mut h, &chooser.preload_order(seed), |tx, id| {
            let len = value_of(id, stamp, &mut buf);
            let v = PBytes::new(tx, &buf[..len])?;
            match table.insert_bytes(tx, &key_of(id), v)? {
                None => Ok(()),
                Some(_) => Err(Error::Corrupt(
                    format!("strmap: record {id} was preloaded twice").into(),
                )),
            }
        })?;
        Ok(StrMapBench {
            table,
            keys: chooser,
            len: keys,
            seed,
        })
    }
}

impl DataSet for StrMapBench {
    fn op(
        &self,
        _worker: usize,
        h: &mut ThreadHandle,
        rng: &mut OpRng,
        update: bool,
    ) -> pisces::Result<u64> {
        let id = self.keys.pick(rng);
        let key = key_of(id);
        let t = self.table;
        if update {
            let mut buf = [0u8; MAX_VALUE];
            let len = value_of(id, rng.gen(), &mut buf);
            let v = &buf[..len];
            h.run_with(crate::workloads::update_options(), |tx| {
                let new = PBytes::new(tx, v)?;
                let old = t
                    .insert_bytes(tx, &key, new)?
                    .ok_or_else(|| missing_record(id))?;
                // The replaced value's block goes with the transaction's commit.
                old.free(tx)?;
                Ok(len as u64)
            })
        } else {
            read_only_op(h, |tx| {
                let v = t.get(tx, &key)?.ok_or_else(|| missing_record(id))?;
                Ok(examine(v.get(tx)?))
            })
        }
    }

    fn final_check(&self, pool: &Pool) -> Result<(), String> {
        let t = self.table;
        pool.run(|tx| {
            t.check(tx)?;
            let len = t.len(tx)?;
            if len != self.len {
                return Err(Error::Corrupt(
                    format!("strmap: {len} records, not {}", self.len).into(),
                ));
            }
            check_records(self.len, self.seed, |k, examine| {
                t.get(tx, k)?.map(|v| v.get(tx).map(examine)).transpose()
            })
            .map_err(|m| Error::Corrupt(m.into()))
        })
        .map(|_| ())
        .map_err(|e| e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engines::Engine;
    use crate::testutil::file_pool;
    use rand::SeedableRng;

    #[test]
    fn keys_order_as_ids_and_values_are_their_keys_and_stamps() {
        assert_eq!(&key_of(0), b"user0000000000");
        assert_eq!(&key_of(1234), b"user0000001234");
        assert!(key_of(99) < key_of(100));
        let mut buf = [0u8; MAX_VALUE];
        let mut lens = std::collections::BTreeSet::new();
        for id in 0..2000 {
            let len = value_of(id, 7, &mut buf);
            assert!((MIN_VALUE..=MAX_VALUE).contains(&len));
            lens.insert(len);
            assert!(is_value_of(id, &buf[..len]));
            assert!(!is_value_of(id + 1, &buf[..len]), "another record's value");
            assert!(!is_value_of(id, &buf[..len - 1]), "a cut value");
            let mut other = buf;
            other[len - 1] ^= 1;
            assert!(!is_value_of(id, &other[..len]), "a changed byte");
        }
        assert!(
            lens.len() > 400,
            "lengths spread over the range: {}",
            lens.len()
        );
        assert!(!is_value_of(0, &[1, 2, 3]));
    }

    #[test]
    fn updates_replace_values_and_the_final_check_sees_them() {
        if !Engine::PMDK.in_build() {
            println!("pmdk: skipped: pmdk not in this build");
        }
        for engine in Engine::available() {
            let name = engine.name();
            let (p, _dir) = file_pool(engine, 64 << 20, 2);
            let sb = StrMapBench::build(&p, 1000, 5).unwrap();
            assert_eq!(p.run(|tx| sb.table.len(tx)).unwrap(), 1000, "{name}");
            sb.final_check(&p).unwrap();
            let others = p.allocated_objects().map_or(0, |all| {
                let reached = p
                    .run(|tx| {
                        let mut n = 0usize;
                        sb.table.for_each_object_with_values(tx, |_| n += 1)?;
                        Ok(n)
                    })
                    .unwrap();
                all.len() - reached
            });
            let mut h = p.handle().unwrap();
            let mut rng = OpRng::seed_from_u64(1);
            for i in 0..400 {
                let changed = sb.op(0, &mut h, &mut rng, i % 2 == 0).unwrap();
                if i % 2 == 0 {
                    assert!((MIN_VALUE as u64..=MAX_VALUE as u64).contains(&changed));
                } else {
                    assert_eq!(changed, 0, "{name}");
                }
            }
            drop(h);
            sb.final_check(&p).unwrap();
            let updated = p
                .run(|tx| {
                    let t = sb.table;
                    check_records(1000, 5, |k, f| {
                        t.get(tx, k)?.map(|v| v.get(tx).map(f)).transpose()
                    })
                    .map_err(|m| Error::Corrupt(m.into()))
                })
                .unwrap();
            assert!((20..=200).contains(&updated), "{name}: {updated}");
            // The replaced values' blocks were freed: the blocks the pool holds beyond
            // those the tree reaches (its nodes, keys, separators and values) are as
            // many as after the preload (pmdk keeps its own allocator: no list).
            if let Ok(after) = p.allocated_objects() {
                let reached = p
                    .run(|tx| {
                        let mut n = 0usize;
                        sb.table.for_each_object_with_values(tx, |_| n += 1)?;
                        Ok(n)
                    })
                    .unwrap();
                assert_eq!(
                    after.len() - reached,
                    others,
                    "{name}: a replaced value leaked"
                );
            }
            // A record whose value is not its own fails the check.
            p.run(|tx| {
                let v = PBytes::new(tx, b"0123456789abcdef")?;
                let old = sb.table.insert_bytes(tx, &key_of(3), v)?.unwrap();
                old.free(tx)
            })
            .unwrap();
            let e = sb.final_check(&p).unwrap_err();
            assert!(e.contains("record 3 holds a value"), "{name}: {e}");
            // A missing record is an error of the check and of a read that picks it.
            let hot = sb.keys.pick(&mut OpRng::seed_from_u64(0));
            p.run(|tx| sb.table.remove_and_free(tx, &key_of(hot)).map(|_| ()))
                .unwrap();
            let e = sb.final_check(&p).unwrap_err();
            assert!(e.contains("records, not 1000"), "{name}: {e}");
            let mut h = p.handle().unwrap();
            let e = (0..10_000)
                .find_map(|_| sb.op(0, &mut h, &mut rng, false).err())
                .expect("the hot record was never read");
            assert!(e.to_string().contains("is missing"), "{name}: {e}");
        }
    }
}
