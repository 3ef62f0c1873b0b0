//! The containers' std-shaped API: double-ended ranges against std's `BTreeMap`, the
//! striped element count (after aborts, under concurrent writers, in `check`), `entry`,
//! and container calls inside an `ExplicitTx`.
mod common;

use pisces::tools::check::check_pool_deep;
use pisces::{BTreeMap, EngineOptions, Error, HashMap, Pod, Pool, TxOptions};
use proptest::prelude::*;
use std::collections::{BTreeMap as StdBTree, HashMap as StdHash};
use std::ops::Bound;
use std::sync::{Arc, Barrier};

fn pool() -> Pool {
    common::mem_pool(64 << 20, 4, EngineOptions::default())
}

/// A step taken on both a range iterator and std's: from the front or the back.
fn drive<K: Pod + Ord + std::fmt::Debug, V: Pod + PartialEq + std::fmt::Debug, const F: usize>(
    t: &BTreeMap<K, V, F>,
    tx: &pisces::Tx<'_>,
    model: &StdBTree<K, V>,
    r: (Bound<K>, Bound<K>),
    ends: &[bool],
) {
    let mut got = t.range(tx, r);
    let mut want = model.range(r);
    for (i, &back) in ends.iter().enumerate() {
        let (g, w) = if back {
            (got.next_back(), want.next_back())
        } else {
            (got.next(), want.next())
        };
        let g = g.map(|e| e.map(|(k, v)| (*k, *v)).unwrap());
        assert_eq!(g, w.map(|(k, v)| (*k, *v)), "step {i} ({back}) of {r:?}");
    }
    // Whatever is left, from the front: the same as std's (each entry once).
    let rest: Vec<(K, V)> = got.map(|e| e.map(|(k, v)| (*k, *v)).unwrap()).collect();
    let want_rest: Vec<(K, V)> = want.map(|(k, v)| (*k, *v)).collect();
    assert_eq!(rest, want_rest, "rest of {r:?}");
}

fn bound(kind: u8, k: u32) -> Bound<u32> {
    match kind % 3 {
        0 => Bound::Unbounded,
        1 => Bound::Included(k),
        _ => Bound::Excluded(k),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// `range` from both ends, in any interleaving, yields what std's `range` yields:
    /// in trees with many small leaves, some emptied by removes (the backward step
    /// must skip them), and with the ends meeting inside a leaf or across empty ones.
    #[test]
    fn ranges_from_both_ends_match_std(
        keys in prop::collection::vec(0u32..400, 0..300),
        removes in prop::collection::vec(0u32..400, 0..300),
        ranges in prop::collection::vec((any::<u8>(), 0u32..420, any::<u8>(), 0u32..420, prop::collection::vec(any::<bool>(), 0..40)), 1..12),
    ) {
        let pool = pool();
        let t = pool.run(|tx| BTreeMap::<u32, u64, 4>::new(tx)).unwrap();
        let mut model = StdBTree::new();
        pool.run(|tx| {
            for &k in &keys {
                t.insert(tx, k, u64::from(k) * 3)?;
            }
            for &k in &removes {
                t.remove(tx, &k)?;
            }
            Ok(())
        }).unwrap();
        for &k in &keys {
            model.insert(k, u64::from(k) * 3);
        }
        for k in &removes {
            model.remove(k);
        }
        pool.run(|tx| {
            for (sk, s, ek, e, ends) in &ranges {
                let r = (bound(*sk, *s), bound(*ek, *e));
                // std panics on a range whose start is after its end: skip those.
                let empty_ok = match r {
                    (Bound::Included(a) | Bound::Excluded(a), Bound::Included(b) | Bound::Excluded(b)) => {
                        a < b || (a == b && !matches!(r, (Bound::Excluded(_), Bound::Excluded(_))))
                    }
                    _ => true,
                };
                if empty_ok {
                    drive(&t, tx, &model, r, ends);
                }
            }
            // first/last, and the whole tree backward.
            assert_eq!(t.first_key_value(tx)?.map(|(k, v)| (*k, *v)), model.first_key_value().map(|(k, v)| (*k, *v)));
            assert_eq!(t.last_key_value(tx)?.map(|(k, v)| (*k, *v)), model.last_key_value().map(|(k, v)| (*k, *v)));
            let back: Vec<u32> = t.iter(tx).rev().map(|e| e.map(|(k, _)| *k)).collect::<pisces::Result<_>>()?;
            assert_eq!(back, model.keys().rev().copied().collect::<Vec<_>>());
            assert_eq!(t.len(tx)?, model.len());
            Ok(())
        }).unwrap();
    }
}

/// Alternating ends over a tree whose middle leaves were emptied: every entry once.
#[test]
fn alternating_ends_meet_once_across_empty_leaves() {
    let pool = pool();
    let t = pool.run(|tx| BTreeMap::<u64, u64, 4>::new(tx)).unwrap();
    pool.run(|tx| {
        for k in 0..200 {
            t.insert(tx, k, k)?;
        }
        for k in 20..180 {
            t.remove(tx, &k)?;
        }
        Ok(())
    })
    .unwrap();
    pool.run(|tx| {
        let mut it = t.iter(tx);
        let mut seen = Vec::new();
        loop {
            let f = it.next().transpose()?;
            let b = it.next_back().transpose()?;
            if f.is_none() && b.is_none() {
                break;
            }
            seen.extend(f.map(|e| *e.0));
            seen.extend(b.map(|e| *e.0));
        }
        seen.sort_unstable();
        let want: Vec<u64> = (0..20).chain(180..200).collect();
        assert_eq!(seen, want);
        assert!(it.next().is_none() && it.next_back().is_none());
        assert!(format!("{it:?}").starts_with("RangeIter"));
        Ok(())
    })
    .unwrap();
}

/// `len` follows inserts of new keys, replacements (no change), removes of present and
/// absent keys, and ignores transactions that roll back; `check` agrees.
#[test]
fn len_counts_commits_only() {
    for (engine, opts) in common::all_engines() {
        let pool = common::mem_pool_on(engine, 64 << 20, 2, opts);
        let (t, m, c) = pool
            .run(|tx| {
                Ok((
                    BTreeMap::<u64, u64, 5>::new(tx)?,
                    HashMap::<u64, u64>::new(tx)?,
                    HashMap::<u64, [u64; 4]>::fixed(tx, 16)?,
                ))
            })
            .unwrap();
        let lens = |pool: &Pool| {
            pool.run(|tx| Ok((t.len(tx)?, m.len(tx)?, c.len(tx)?)))
                .unwrap()
        };
        pool.run(|tx| {
            for k in 0..300 {
                t.insert(tx, k, k)?;
                m.insert(tx, k, k)?;
                c.insert(tx, k, [k; 4])?;
            }
            for k in 0..100 {
                t.insert(tx, k, 1)?; // replaced: no change
                m.insert(tx, k, 1)?;
                c.insert(tx, k, [1; 4])?;
            }
            Ok(())
        })
        .unwrap();
        assert_eq!(lens(&pool), (300, 300, 300), "{engine:?}");
        // Rolled back: neither the inserts nor the removes count.
        let r: pisces::Result<()> = pool.run(|tx| {
            for k in 1000..1100 {
                t.insert(tx, k, k)?;
                m.insert(tx, k, k)?;
                c.insert(tx, k, [k; 4])?;
            }
            for k in 0..50 {
                t.remove(tx, &k)?;
                m.remove(tx, &k)?;
                c.remove(tx, &k)?;
            }
            Err(tx.abort("no"))
        });
        assert!(r.is_err());
        assert_eq!(lens(&pool), (300, 300, 300), "{engine:?}");
        pool.run(|tx| {
            for k in (0..400).step_by(2) {
                t.remove(tx, &k)?; // 150 present, 50 absent
                m.remove(tx, &k)?;
                c.remove(tx, &k)?;
            }
            Ok(())
        })
        .unwrap();
        assert_eq!(lens(&pool), (150, 150, 150), "{engine:?}");
        pool.run(|tx| {
            assert_eq!(t.check(tx)?.entries, 150);
            assert_eq!(m.check(tx)?.entries, 150);
            assert_eq!(c.check(tx)?.entries, 150);
            Ok(())
        })
        .unwrap();
    }
}

/// Two transactions on two threads insert keys into different leaves (buckets) of one
/// container and commit in overlapping order: the count makes them touch no common
/// object, so neither conflicts. (With one counter word both would write it, and
/// under snapshot isolation one of them would fail.) Every engine that runs two
/// writers at once.
#[test]
fn disjoint_inserts_do_not_conflict_on_the_count() {
    for (engine, opts) in common::all_engines() {
        if engine == pisces::EngineId::Bare {
            // One writer at a time by design (a reader-writer gate): a second writer
            // waits for the first, which here waits for it.
            continue;
        }
        let pool = common::mem_pool_on(engine, 64 << 20, 3, opts);
        // A handle of its own, dropped before the test's transactions: a group-commit
        // engine writes its batch back then (until written back, what it wrote stays
        // locked, and a later writer of the same leaves would conflict with that).
        let mut h0 = pool.handle().unwrap();
        let (t, m) = h0
            .run(|tx| {
                let t = BTreeMap::<u64, u64>::new(tx)?;
                let m = HashMap::<u64, [u64; 4]>::fixed(tx, 1024)?;
                for k in 0..2000 {
                    t.insert(tx, 2 * k, k)?;
                }
                // Room in the first and last leaves: the inserts below split nothing.
                t.remove(tx, &2)?;
                t.remove(tx, &3996)?;
                Ok((t, m))
            })
            .unwrap();
        drop(h0);
        // Keys of two buckets in different chunks of the map.
        let bucket_of =
            |k: u64| ((pisces::stable_hash(&k.to_le_bytes()) as u128 * 1024) >> 64) as u64;
        let ka = 0u64;
        let kb = (1..)
            .find(|&k| bucket_of(k) / 32 != bucket_of(ka) / 32)
            .unwrap();
        // Both write before either commits: A writes, B writes, A commits, B commits.
        // (Deferred durability: a commit need not wait for the other, still running,
        // transaction, as a wait for durability may.)
        let wrote = Arc::new(Barrier::new(2));
        let committed = Arc::new(Barrier::new(2));
        let run = |tree_key: u64, map_key: u64, first: bool| {
            let (pool, wrote, committed) = (pool.clone(), wrote.clone(), committed.clone());
            std::thread::spawn(move || {
                let mut h = pool.handle().unwrap();
                if !first {
                    wrote.wait();
                }
                let opts = TxOptions::default().durability(pisces::Durability::Deferred);
                let mut x = h.begin(opts).unwrap();
                let wr = t
                    .insert(&mut x, tree_key, 1)
                    .and_then(|_| m.insert(&mut x, map_key, [1; 4]));
                if first {
                    wrote.wait();
                    committed.wait();
                    wr.and_then(|_| x.commit())
                } else {
                    committed.wait();
                    wr.and_then(|_| x.commit())
                }
            })
        };
        let a = run(2, ka, true);
        let b = run(3996, kb, false);
        let (ra, rb) = (a.join().unwrap(), b.join().unwrap());
        assert!(ra.is_ok() && rb.is_ok(), "{engine:?}: {ra:?} {rb:?}");
        pool.run(|tx| {
            assert_eq!(t.len(tx)?, 2000);
            assert_eq!(m.len(tx)?, 2);
            t.check(tx)?;
            m.check(tx)?;
            Ok(())
        })
        .unwrap();
    }
}

/// Concurrent inserts of disjoint keys on four threads: the count ends right, and the
/// conflicts the threads saw are reported (structural ones, e.g. two splits of one
/// parent, remain possible).
#[test]
fn concurrent_inserts_count_right() {
    let pool = pool();
    let (t, m) = pool
        .run(|tx| {
            Ok((
                BTreeMap::<u64, u64>::new(tx)?,
                HashMap::<u64, u64>::new(tx)?,
            ))
        })
        .unwrap();
    let threads: Vec<_> = (0..4u64)
        .map(|i| {
            let pool = pool.clone();
            std::thread::spawn(move || {
                let mut h = pool.handle().unwrap();
                for k in 0..500u64 {
                    let key = i << 32 | k;
                    h.run(|tx| {
                        t.insert(tx, key, k)?;
                        m.insert(tx, key, k)?;
                        Ok(())
                    })
                    .unwrap();
                }
                h.stats().conflicts
            })
        })
        .collect();
    let conflicts: u64 = threads.into_iter().map(|t| t.join().unwrap()).sum();
    eprintln!("conflicts in 2000 transactions: {conflicts}");
    pool.run(|tx| {
        assert_eq!(t.len(tx)?, 2000);
        assert_eq!(m.len(tx)?, 2000);
        t.check(tx)?;
        m.check(tx)?;
        Ok(())
    })
    .unwrap();
}

/// A container's `for_each_object`, type-erased.
type ObjectWalk<'a> = dyn Fn(&pisces::Tx<'_>, &mut dyn FnMut(u64)) -> pisces::Result<()> + 'a;

/// A count that disagrees with the entries is damage: `check` and `check --deep`
/// report it.
#[test]
fn a_wrong_count_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("count.pool");
    let cfg = pisces::Config::default().size(32 << 20);
    {
        let pool = Pool::create(&p, cfg.clone()).unwrap();
        let root = pool.root::<[u64; 2]>().unwrap();
        let (t, m) = pool
            .run(|tx| {
                let t = BTreeMap::<u64, u64>::new(tx)?;
                let m = HashMap::<u64, u64>::new(tx)?;
                for k in 0..50 {
                    t.insert(tx, k, k)?;
                    m.insert(tx, k, k)?;
                }
                *tx.write(root)? = [t.offset(), m.offset()];
                Ok((t, m))
            })
            .unwrap();
        // The last object each lists is a stripe of its count: one more there.
        let last = |each: &ObjectWalk<'_>| {
            let mut o = Vec::new();
            pool.run(|tx| {
                o.clear();
                each(tx, &mut |x| o.push(x))
            })
            .unwrap();
            *o.last().unwrap()
        };
        let stripes = [
            last(&|tx, f| t.for_each_object(tx, f)),
            last(&|tx, f| m.for_each_object(tx, f)),
        ];
        for stripe in stripes {
            pool.run(|tx| {
                tx.write(pisces::PPtr::<u64>::from_offset(stripe))
                    .map(|w| *w += 1)
            })
            .unwrap();
        }
        assert_eq!(pool.run(|tx| t.len(tx)).unwrap(), 51);
        match pool.run(|tx| t.check(tx)) {
            Err(Error::Corrupt(m)) => assert!(m.contains("element count says 51"), "{m}"),
            r => panic!("tree check: {r:?}"),
        }
        match pool.run(|tx| m.check(tx)) {
            Err(Error::Corrupt(m)) => assert!(m.contains("element count says 51"), "{m}"),
            r => panic!("map check: {r:?}"),
        }
    }
    let bad = check_pool_deep(&p, pisces::MediumKind::DRAM).unwrap();
    assert!(!bad.is_ok());
    let text = bad.to_string();
    assert_eq!(
        text.matches("the element count says 51 entries, the walk found 50")
            .count(),
        2,
        "{text}"
    );
}

/// A container made before the count existed (no count in its header) still works:
/// `len` walks it, updates keep no count, `check` passes.
#[test]
fn containers_without_a_count_still_work() {
    let pool = pool();
    let (t, m) = pool
        .run(|tx| {
            Ok((
                BTreeMap::<u64, u64>::new(tx)?,
                HashMap::<u64, u64>::fixed(tx, 8)?,
            ))
        })
        .unwrap();
    // Turn both headers into the earlier format: the tree's flag off, the map's word 6
    // zero (the count objects are leaked, which this test does not mind).
    pool.run(|tx| {
        let th = tx.write(pisces::PPtr::<[u64; 5]>::from_offset(t.offset()))?;
        th[4] &= !(1 << 16);
        let mh = tx.write(pisces::PPtr::<[u64; 8]>::from_offset(m.offset()))?;
        mh[6] = 0;
        Ok(())
    })
    .unwrap();
    pool.run(|tx| {
        for k in 0..100 {
            t.insert(tx, k, k)?;
            m.insert(tx, k, k)?;
        }
        t.remove(tx, &5)?;
        m.remove(tx, &5)?;
        t.entry(tx, 500)?.or_insert(1)?;
        m.entry(tx, 500)?.or_insert(1)?;
        Ok(())
    })
    .unwrap();
    pool.run(|tx| {
        assert_eq!((t.len(tx)?, m.len(tx)?), (100, 100));
        assert_eq!((t.check(tx)?.entries, m.check(tx)?.entries), (100, 100));
        Ok(())
    })
    .unwrap();
}

/// `entry(k).and_modify(f).or_insert(v)` against std's, on a tree (through splits), a
/// grouped map, a chained growable map and a fixed one.
#[test]
fn entry_matches_std() {
    let pool = pool();
    let (t, g, c, f) = pool
        .run(|tx| {
            Ok((
                BTreeMap::<u64, u64, 4>::new(tx)?,
                HashMap::<u64, u64>::new(tx)?,
                HashMap::<u64, [u64; 3]>::new(tx)?,
                HashMap::<u64, [u64; 3]>::fixed(tx, 4)?,
            ))
        })
        .unwrap();
    let mut model: StdHash<u64, u64> = StdHash::new();
    let mut x = 12345u64;
    for round in 0..20 {
        pool.run(|tx| {
            let mut y = x;
            for _ in 0..100 {
                y = y
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let k = (y >> 33) % 300;
                let occupied = t.entry(tx, k)?.is_occupied();
                assert_eq!(occupied, g.entry(tx, k)?.is_occupied());
                *t.entry(tx, k)?.and_modify(|v| *v += 1)?.or_insert(0)? += 10;
                g.entry(tx, k)?.and_modify(|v| *v += 11)?.or_insert(10)?;
                c.entry(tx, k)?
                    .and_modify(|v| v[0] += 11)?
                    .or_insert([10, k, k])?;
                f.entry(tx, k)?.and_modify(|v| v[0] += 11)?.or_default()?[1] = k;
            }
            Ok(())
        })
        .unwrap();
        for _ in 0..100 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let k = (x >> 33) % 300;
            model.entry(k).and_modify(|v| *v += 11).or_insert(10);
        }
        pool.run(|tx| {
            assert_eq!(t.len(tx)?, model.len(), "round {round}");
            assert_eq!(g.len(tx)?, model.len());
            assert_eq!(c.len(tx)?, model.len());
            assert_eq!(f.len(tx)?, model.len());
            for (k, &v) in &model {
                assert_eq!(t.get(tx, k)?, Some(v), "tree key {k}");
                assert_eq!(g.get(tx, k)?, Some(v), "grouped key {k}");
                assert_eq!(c.get(tx, k)?, Some([v, *k, *k]), "chained key {k}");
                let fv = f.get(tx, k)?.unwrap();
                assert_eq!((fv[0] + 10, fv[1]), (v, *k), "fixed key {k}");
            }
            t.check(tx)?;
            g.check(tx)?;
            c.check(tx)?;
            f.check(tx)?;
            Ok(())
        })
        .unwrap();
    }
    pool.run(|tx| {
        let e = t.entry(tx, 7)?;
        assert_eq!(*e.key(), 7);
        assert!(format!("{e:?}").starts_with("Entry"));
        Ok(())
    })
    .unwrap();
}

/// Container calls take an `ExplicitTx` directly; what it did rolls back with it.
#[test]
fn containers_take_an_explicit_transaction() {
    for (engine, opts) in common::all_engines() {
        let pool = common::mem_pool_on(engine, 64 << 20, 2, opts);
        let mut h = pool.handle().unwrap();
        let mut x = h.begin(TxOptions::default()).unwrap();
        let t = BTreeMap::<u64, u64>::new(&mut x).unwrap();
        let m = HashMap::<u64, u64>::with_capacity(&mut x, 100).unwrap();
        for k in 0..100 {
            t.insert(&mut x, k, k).unwrap();
            m.insert(&mut x, k, k).unwrap();
        }
        *t.get_mut(&mut x, &3).unwrap().unwrap() = 33;
        m.entry(&mut x, 3).unwrap().and_modify(|v| *v = 33).unwrap();
        assert_eq!(t.range(&x, 2..5).count(), 3);
        x.commit().unwrap();
        let mut x = h.begin(TxOptions::default()).unwrap();
        t.remove(&mut x, &3).unwrap();
        m.remove(&mut x, &3).unwrap();
        assert_eq!((t.len(&x).unwrap(), m.len(&x).unwrap()), (99, 99));
        x.abort();
        let x = h.begin(TxOptions::default()).unwrap();
        assert_eq!(
            (t.get(&x, &3).unwrap(), m.get(&x, &3).unwrap()),
            (Some(33), Some(33))
        );
        assert_eq!(
            (t.len(&x).unwrap(), m.len(&x).unwrap()),
            (100, 100),
            "{engine:?}"
        );
        x.commit().unwrap();
    }
}
