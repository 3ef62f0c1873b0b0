//! The persistent containers (`HashMap`, `BTreeMap`) through the public API: model-based
//! tests against std's maps, many B+-tree splits, composition with other objects in one
//! transaction, user aborts, two threads on disjoint and overlapping keys, and crashes at
//! every fence on the crash simulator.
//!
//! Self-contained (no `common` module) so that changes to the shared test helpers do not
//! affect it.

use pisces::medium::DramMedium;
use pisces::{
    BTreeMap, Config, EngineId, EngineOptions, Error, HashMap, PPtr, Pod, Pool, Zeroable,
};
use pisces_verify::sim::{Adversary, SimConfig, SimMedium};
use proptest::prelude::*;
use std::collections::{BTreeMap as StdBTree, BTreeSet, HashMap as StdHash};
use std::ops::{Bound, RangeBounds};
use std::sync::{Arc, Barrier, Mutex};

/// The first entry of `t` in `r`, copied (std's `range(r).next()`).
fn first_in<K: Pod + Ord, V: Pod, const F: usize>(
    t: &BTreeMap<K, V, F>,
    tx: &pisces::Tx<'_>,
    r: impl RangeBounds<K>,
) -> pisces::Result<Option<(K, V)>> {
    Ok(t.range(tx, r).next().transpose()?.map(|(k, v)| (*k, *v)))
}

/// The last entry of `t` in `r`, copied (std's `range(r).next_back()`).
fn last_in<K: Pod + Ord, V: Pod, const F: usize>(
    t: &BTreeMap<K, V, F>,
    tx: &pisces::Tx<'_>,
    r: impl RangeBounds<K>,
) -> pisces::Result<Option<(K, V)>> {
    Ok(t.range(tx, r)
        .next_back()
        .transpose()?
        .map(|(k, v)| (*k, *v)))
}

/// The objects of a container's element count: its table and 32 stripes.
const COUNT_OBJECTS: usize = 1 + 32;

/// An engine and its options.
type Setup = (EngineId, EngineOptions);

fn pisces() -> Setup {
    (EngineId::Pisces, pisces::PiscesOptions::default().into())
}

/// The engines (and their option sets) the behavioural tests run on: the containers
/// use only the transaction API, so they must work on each engine of the registry.
fn setups() -> Vec<Setup> {
    pisces_verify::testkit::all_engines()
}

fn mem_pool((engine, opts): Setup, size: u64, threads: usize) -> Pool {
    let m = DramMedium::anonymous(size as usize, 0, 0).unwrap();
    Pool::create_on(
        Arc::new(m),
        Config::default()
            .size(size)
            .engine(engine)
            .max_threads(threads)
            .log_bytes_per_thread(1 << 20)
            .engine_options(opts.clone()),
    )
    .unwrap()
}

/// Payload offsets of all allocated blocks (after pending group-commit write-backs,
/// which publish allocations and frees, are done).
fn allocated(pool: &Pool) -> BTreeSet<u64> {
    pool.allocated_objects().unwrap().into_iter().collect()
}

type Val64 = [u64; 8];

fn val64(x: u64) -> Val64 {
    [x, x ^ 1, x ^ 2, x ^ 3, x ^ 4, x ^ 5, x ^ 6, !x]
}

#[derive(Clone, Copy, Pod, Zeroable)]
#[repr(C)]
struct Root {
    map: HashMap<u64, Val64>,
    tree: BTreeMap<u64, u64, 4>,
    counter: u64,
}

fn root_objects(pool: &Pool, root: PPtr<Root>) -> BTreeSet<u64> {
    pool.run(|tx| {
        let r = *tx.read(root)?;
        let mut s = BTreeSet::from([root.offset()]);
        let mut dup = false;
        r.map.for_each_object(tx, |o| dup |= !s.insert(o))?;
        r.tree.for_each_object(tx, |o| dup |= !s.insert(o))?;
        assert!(!dup, "an object is reachable twice");
        Ok(s)
    })
    .unwrap()
}

// ------------------------------------------------------------------ basics

#[test]
fn hashmap_basic_operations_and_destroy() {
    let pool = mem_pool(pisces(), 16 << 20, 1);
    let root: PPtr<HashMap<u64, Val64>> = pool.root().unwrap();
    let before = allocated(&pool);
    let m = pool
        .run(|tx| {
            let m = HashMap::fixed(tx, 7)?;
            *tx.write(root)? = m;
            Ok(m)
        })
        .unwrap();
    assert_eq!(std::mem::size_of::<HashMap<u64, Val64>>(), 8);
    pool.run(|tx| {
        assert_eq!(m.buckets(tx)?, 7);
        assert!(m.is_empty(tx)?);
        for k in 0..100 {
            assert_eq!(m.insert(tx, k, val64(k))?, None);
        }
        assert_eq!(m.insert(tx, 5, val64(500))?, Some(val64(5)));
        assert_eq!(m.get(tx, &5)?, Some(val64(500)));
        assert_eq!(m.get_ref(tx, &6)?, Some(&val64(6)));
        assert_eq!(m.get(tx, &100)?, None);
        assert!(m.contains_key(tx, &99)? && !m.contains_key(tx, &1000)?);
        if let Some(v) = m.get_mut(tx, &7)? {
            v[0] = 777;
        }
        assert!(m.get_mut(tx, &1000)?.is_none());
        assert_eq!(m.get(tx, &7)?.unwrap()[0], 777);
        assert_eq!(m.remove(tx, &8)?, Some(val64(8)));
        assert_eq!(m.remove(tx, &8)?, None);
        assert_eq!(m.len(tx)?, 99);
        Ok(())
    })
    .unwrap();
    // Committed, and visible to a later transaction.
    let (len, sum) = pool
        .run(|tx| {
            let mut sum = 0;
            m.for_each(tx, |k, v| {
                assert!(*k == 5 || *k == 7 || v == &val64(*k));
                sum += k;
                true
            })?;
            Ok((m.len(tx)?, sum))
        })
        .unwrap();
    assert_eq!((len, sum), (99, (0..100).sum::<u64>() - 8));
    // Early stop.
    let mut seen = 0;
    pool.run(|tx| {
        seen = 0;
        m.for_each(tx, |_, _| {
            seen += 1;
            seen < 10
        })
    })
    .unwrap();
    assert_eq!(seen, 10);
    // Objects: header + 1 chunk + 99 nodes + the count (a table and its stripes);
    // destroy frees exactly those.
    let mut objs = BTreeSet::new();
    pool.run(|tx| m.for_each_object(tx, |o| assert!(objs.insert(o))))
        .unwrap();
    assert_eq!(objs.len(), 1 + 1 + 99 + COUNT_OBJECTS);
    assert_eq!(
        allocated(&pool),
        before.union(&objs).copied().collect::<BTreeSet<_>>()
    );
    pool.run(|tx| m.destroy(tx)).unwrap();
    assert_eq!(allocated(&pool), before);
}

#[test]
fn hashmap_bad_handles_and_arguments_are_errors() {
    let pool = mem_pool(pisces(), 16 << 20, 1);
    for b in [0, pisces::tools::containers::MAX_BUCKETS + 1] {
        let r = pool.run(|tx| HashMap::<u64, u64>::fixed(tx, b));
        assert!(matches!(r, Err(Error::InvalidConfig(_))), "{b}");
    }
    let null = HashMap::<u64, u64>::null();
    assert!(null.is_null());
    assert!(matches!(
        pool.run(|tx| null.get(tx, &1)),
        Err(Error::InvalidPointer(_))
    ));
    let m = pool.run(|tx| HashMap::<u64, u64>::fixed(tx, 4)).unwrap();
    // The same header seen with other types, or as a B+-tree, is refused.
    let wrong: HashMap<u32, u64> = bytemuck::cast(m);
    assert!(matches!(
        pool.run(|tx| wrong.get(tx, &1)),
        Err(Error::InvalidPointer(_))
    ));
    let tree: BTreeMap<u64, u64> = bytemuck::cast(m);
    assert!(matches!(
        pool.run(|tx| tree.get(tx, &1)),
        Err(Error::InvalidPointer(_))
    ));
    let garbage: HashMap<u64, u64> = bytemuck::cast(12345u64);
    assert!(matches!(
        pool.run(|tx| garbage.insert(tx, 1, 1)),
        Err(Error::InvalidPointer(_))
    ));
}

/// The items an iterator yields before it ends, at most `cap` (so that an iterator that
/// never ends fails the test instead of hanging it).
fn first_items<T>(
    it: impl Iterator<Item = pisces::Result<T>>,
    cap: usize,
) -> Vec<Result<(), Error>> {
    it.take(cap).map(|e| e.map(|_| ())).collect()
}

/// Makes a map in a transaction.
type MakeU64Map = fn(&mut pisces::Tx<'_>) -> pisces::Result<HashMap<u64, u64>>;

/// An iterator over a map whose header fails validation (a null map, the header read
/// with other key/value types, a B+-tree read as a hash map, a destroyed map) yields one
/// `Err` and ends, on every engine and for both layouts (fixed buckets: chained;
/// growable: grouped), so `count`, `collect` and loops that skip errors return.
#[test]
fn hashmap_iterator_over_an_invalid_header_yields_one_error_and_ends() {
    let mut destroyed_invalid = 0;
    for setup in setups() {
        let name = setup.0.name();
        let pool = mem_pool(setup, 16 << 20, 1);
        let made: [(&str, MakeU64Map); 2] = [
            ("fixed", |tx| HashMap::fixed(tx, 4)),
            ("growable", |tx| HashMap::new(tx)),
        ];
        for (layout, make) in made {
            let (m, tree, gone) = pool
                .run(|tx| {
                    let m = make(tx)?;
                    let gone = make(tx)?;
                    for k in 0..20 {
                        m.insert(tx, k, k)?;
                        gone.insert(tx, k, k)?;
                    }
                    let tree = BTreeMap::<u64, u64>::new(tx)?;
                    tree.insert(tx, 1, 1)?;
                    Ok((m, tree, gone))
                })
                .unwrap();
            pool.run(|tx| gone.destroy(tx)).unwrap();
            let gone_invalid = pool
                .run(|tx| {
                    assert_eq!(first_items(m.iter(tx), 100).len(), 20);
                    let other_key: HashMap<u32, u64> = bytemuck::cast(m);
                    let other_value: HashMap<u64, [u64; 2]> = bytemuck::cast(m);
                    let mut cases = vec![
                        ("null", first_items(HashMap::<u64, u64>::null().iter(tx), 3)),
                        ("other key type", first_items(other_key.iter(tx), 3)),
                        ("other value type", first_items(other_value.iter(tx), 3)),
                        (
                            "a B+-tree",
                            first_items(bytemuck::cast::<_, HashMap<u64, u64>>(tree).iter(tx), 3),
                        ),
                    ];
                    // A destroyed map's header is invalid unless the engine dropped the
                    // write clearing its magic word (see `destroy`); its entries are then
                    // read, all of them.
                    let gone_invalid = gone.len(tx).is_err();
                    if gone_invalid {
                        cases.push(("destroyed", first_items(gone.iter(tx), 3)));
                    } else {
                        let items = first_items(gone.iter(tx), 100);
                        assert!(
                            items.len() == 20 && items.iter().all(|e| e.is_ok()),
                            "{name}, {layout}, destroyed: {items:?}"
                        );
                    }
                    for (case, items) in cases {
                        assert!(
                            items.len() == 1 && items[0].is_err(),
                            "{name}, {layout}, {case}: {items:?}"
                        );
                    }
                    // An error-skipping loop returns.
                    assert_eq!(other_value.iter(tx).filter_map(|e| e.ok()).count(), 0);
                    Ok(gone_invalid)
                })
                .unwrap();
            destroyed_invalid += usize::from(gone_invalid);
        }
    }
    assert!(
        destroyed_invalid > 0,
        "no engine reads a destroyed map as invalid"
    );
}

#[test]
fn hashmap_with_two_level_directory() {
    // More than 504 chunks: the directory moves to pages of 512 chunks; 513 chunks
    // need two pages.
    let pool = mem_pool(pisces(), 64 << 20, 1);
    let buckets = 512 * 32 + 5;
    let m = pool
        .run(|tx| HashMap::<u32, u32>::fixed(tx, buckets))
        .unwrap();
    for chunk in (0..20_000u32).collect::<Vec<_>>().chunks(2000) {
        pool.run(|tx| {
            for &k in chunk {
                m.insert(tx, k, k * 3)?;
            }
            Ok(())
        })
        .unwrap();
    }
    pool.run(|tx| {
        assert_eq!(m.buckets(tx)?, buckets);
        assert_eq!(m.len(tx)?, 20_000);
        for k in (0..20_000).step_by(97) {
            assert_eq!(m.get(tx, &k)?, Some(k * 3));
        }
        let mut objs = 0;
        m.for_each_object(tx, |_| objs += 1)?;
        // header + 2 pages + 513 chunks + nodes + the count
        assert_eq!(objs, 1 + 2 + 513 + 20_000 + COUNT_OBJECTS);
        Ok(())
    })
    .unwrap();
}

#[test]
fn btree_basic_operations_and_destroy() {
    let pool = mem_pool(pisces(), 16 << 20, 1);
    let before = allocated(&pool);
    let t = pool.run(|tx| BTreeMap::<u64, u64, 4>::new(tx)).unwrap();
    assert_eq!(std::mem::size_of::<BTreeMap<u64, u64, 4>>(), 8);
    pool.run(|tx| {
        assert!(t.is_empty(tx)?);
        assert_eq!(first_in(&t, tx, ..)?, None);
        for k in (0..200).rev() {
            assert_eq!(t.insert(tx, k * 2, k)?, None);
        }
        assert_eq!(t.insert(tx, 10, 1000)?, Some(5));
        assert_eq!(t.get(tx, &10)?, Some(1000));
        assert_eq!(t.get(tx, &11)?, None);
        assert_eq!(t.get_ref(tx, &12)?, Some(&6));
        *t.get_mut(tx, &14)?.unwrap() += 1;
        assert!(t.get_mut(tx, &15)?.is_none());
        assert_eq!(t.get(tx, &14)?, Some(8));
        assert_eq!(t.remove(tx, &16)?, Some(8));
        assert_eq!(t.remove(tx, &16)?, None);
        assert_eq!(t.len(tx)?, 199);
        assert_eq!(first_in(&t, tx, 15..)?, Some((18, 9)));
        assert_eq!(
            first_in(&t, tx, (Bound::Excluded(18), Bound::Unbounded))?,
            Some((20, 10))
        );
        let st = t.check(tx)?;
        assert_eq!(st.entries, 199);
        assert!(st.height >= 3, "{st:?}");
        Ok(())
    })
    .unwrap();
    let mut objs = BTreeSet::new();
    pool.run(|tx| t.for_each_object(tx, |o| assert!(objs.insert(o))))
        .unwrap();
    let st = pool.run(|tx| t.check(tx)).unwrap();
    assert_eq!(objs.len(), 1 + st.leaves + st.inner_nodes + COUNT_OBJECTS);
    assert_eq!(
        allocated(&pool),
        before.union(&objs).copied().collect::<BTreeSet<_>>()
    );
    pool.run(|tx| t.destroy(tx)).unwrap();
    assert_eq!(allocated(&pool), before);
}

#[test]
fn btree_node_sizes_match_the_paper() {
    // Fanout 16 with 8-byte keys and values: 256-byte nodes (a 320-byte block with its
    // header in the Pisces allocator); 32 for the TPC-C tables: 512 bytes. The hash
    // benchmark's nodes (8-byte key, 64-byte value): 80 bytes.
    assert_eq!(BTreeMap::<u64, u64, 16>::LEAF_BYTES, 256);
    assert_eq!(BTreeMap::<u64, u64, 16>::INNER_BYTES, 256);
    assert_eq!(BTreeMap::<u64, u64, 32>::LEAF_BYTES, 512);
    assert_eq!(BTreeMap::<u64, u64, 32>::INNER_BYTES, 512);
    assert_eq!(BTreeMap::<u32, [u8; 5], 5>::LEAF_BYTES, 16 + 16 + 24);
    assert_eq!(HashMap::<u64, Val64>::NODE_BYTES, 80);
    assert_eq!(HashMap::<[u8; 3], u16>::NODE_BYTES, 24);
    let pool = mem_pool(pisces(), 16 << 20, 1);
    let t = pool.run(|tx| BTreeMap::<u64, u64, 16>::new(tx)).unwrap();
    let root_leaf = pool
        .run(|tx| {
            let mut v = Vec::new();
            t.for_each_object(tx, |o| v.push(o))?;
            Ok(v[1])
        })
        .unwrap();
    pool.run(|tx| {
        tx.read(PPtr::<[u64; 32]>::from_offset(root_leaf))?;
        Ok(())
    })
    .unwrap();
    // 15 entries per leaf: 15 inserts fit, the 16th splits.
    pool.run(|tx| {
        for k in 0..15 {
            t.insert(tx, k, k)?;
        }
        assert_eq!(t.check(tx)?.leaves, 1);
        t.insert(tx, 15, 15)?;
        assert_eq!(t.check(tx)?.leaves, 2);
        Ok(())
    })
    .unwrap();
}

// ------------------------------------------------------------------ model tests

#[derive(Clone, Debug)]
enum Op {
    Insert(u64, u64),
    Remove(u64),
    Get(u64),
    Add(u64, u64),
    Range(u64, u64, u8),
}

fn op(keys: u64) -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..keys, any::<u64>()).prop_map(|(k, v)| Op::Insert(k, v)),
        2 => (0..keys).prop_map(Op::Remove),
        1 => (0..keys).prop_map(Op::Get),
        1 => (0..keys, 0..100u64).prop_map(|(k, d)| Op::Add(k, d)),
        1 => (0..keys, 0..keys, 0..4u8).prop_map(|(a, b, m)| Op::Range(a.min(b), a.max(b), m)),
    ]
}

/// Batches of operations, each one transaction; a batch with `true` ends in a user
/// abort, which must leave no trace.
fn batches(keys: u64) -> impl Strategy<Value = Vec<(Vec<Op>, bool)>> {
    prop::collection::vec(
        (
            prop::collection::vec(op(keys), 1..12),
            prop::bool::weighted(0.15),
        ),
        1..25,
    )
}

fn bounds(lo: u64, hi: u64, mode: u8) -> (Bound<u64>, Bound<u64>) {
    match mode {
        0 => (Bound::Included(lo), Bound::Excluded(hi)),
        1 => (Bound::Included(lo), Bound::Included(hi)),
        2 => (Bound::Excluded(lo), Bound::Unbounded),
        _ => (Bound::Unbounded, Bound::Included(hi)),
    }
}

fn run_hash_model(buckets: usize, batches: &[(Vec<Op>, bool)], setup: Setup, growable: bool) {
    let pool = mem_pool(setup.clone(), 8 << 20, 1);
    let base = allocated(&pool);
    let m = pool
        .run(|tx| {
            if growable {
                HashMap::<u64, u64>::with_buckets(tx, buckets)
            } else {
                HashMap::<u64, u64>::fixed(tx, buckets)
            }
        })
        .unwrap();
    let mut model: StdHash<u64, u64> = StdHash::new();
    for (ops, abort) in batches {
        let r = pool.run(|tx| {
            let mut md = model.clone();
            for o in ops {
                match *o {
                    Op::Insert(k, v) => assert_eq!(m.insert(tx, k, v)?, md.insert(k, v)),
                    Op::Remove(k) => assert_eq!(m.remove(tx, &k)?, md.remove(&k)),
                    Op::Get(k) => assert_eq!(m.get(tx, &k)?, md.get(&k).copied()),
                    Op::Add(k, d) => {
                        let got = m.get_mut(tx, &k)?.map(|v| {
                            *v = v.wrapping_add(d);
                            *v
                        });
                        let want = md.get_mut(&k).map(|v| {
                            *v = v.wrapping_add(d);
                            *v
                        });
                        assert_eq!(got, want);
                    }
                    Op::Range(..) => {
                        let mut all = StdHash::new();
                        m.for_each(tx, |k, v| all.insert(*k, *v).is_none())?;
                        assert_eq!(all, md);
                    }
                }
            }
            assert_eq!(m.len(tx)?, md.len());
            if *abort {
                return Err(tx.abort("model abort"));
            }
            Ok(md)
        });
        match r {
            Ok(md) => model = md,
            Err(Error::UserAbort(_)) => assert!(*abort),
            Err(e) => panic!("{e}"),
        }
    }
    let got = pool
        .run(|tx| {
            let mut all = StdHash::new();
            m.for_each(tx, |k, v| all.insert(*k, *v).is_none())?;
            Ok(all)
        })
        .unwrap();
    assert_eq!(got, model);
    let (stats, grown) = pool.run(|tx| Ok((m.check(tx)?, m.buckets(tx)?))).unwrap();
    assert_eq!(stats.entries, model.len());
    if !growable {
        assert_eq!(grown, buckets);
    }
    if growable {
        // `u64` to `u64` grows in the grouped layout. No leaks: every object allocated
        // since `base` is one the map lists (header, pages, the chains' groups), and
        // each group holds at most 7 entries.
        let mut owned = BTreeSet::new();
        pool.run(|tx| m.for_each_object(tx, |o| assert!(owned.insert(o), "{o:#x} twice")))
            .unwrap();
        let now = allocated(&pool);
        assert_eq!(
            now.difference(&base).copied().collect::<BTreeSet<_>>(),
            owned
        );
        assert!(owned.len() > model.len() / 7);
    } else {
        // No leaks: allocated = base + header + chunks + one node per entry + count.
        let chunks = grown.div_ceil(32) + usize::from(grown > 32 * 504) * grown.div_ceil(32 * 512);
        assert_eq!(
            allocated(&pool).len(),
            base.len() + 1 + chunks + model.len() + COUNT_OBJECTS
        );
    }
}

fn run_tree_model<const F: usize>(batches: &[(Vec<Op>, bool)], setup: Setup) {
    let pool = mem_pool(setup.clone(), 8 << 20, 1);
    let t = pool.run(|tx| BTreeMap::<u64, u64, F>::new(tx)).unwrap();
    let mut model: StdBTree<u64, u64> = StdBTree::new();
    for (ops, abort) in batches {
        let r = pool.run(|tx| {
            let mut md = model.clone();
            for o in ops {
                match *o {
                    Op::Insert(k, v) => assert_eq!(t.insert(tx, k, v)?, md.insert(k, v)),
                    Op::Remove(k) => assert_eq!(t.remove(tx, &k)?, md.remove(&k)),
                    Op::Get(k) => assert_eq!(t.get(tx, &k)?, md.get(&k).copied()),
                    Op::Add(k, d) => {
                        let got = t.get_mut(tx, &k)?.map(|v| {
                            *v = v.wrapping_add(d);
                            *v
                        });
                        let want = md.get_mut(&k).map(|v| {
                            *v = v.wrapping_add(d);
                            *v
                        });
                        assert_eq!(got, want);
                    }
                    Op::Range(lo, hi, mode) => {
                        let b = bounds(lo, hi, mode);
                        let mut got = Vec::new();
                        t.for_each_in(tx, b, |k, v| {
                            got.push((*k, *v));
                            true
                        })?;
                        let want: Vec<_> = md.range(b).map(|(k, v)| (*k, *v)).collect();
                        assert_eq!(got, want, "{b:?}");
                        assert_eq!(first_in(&t, tx, b)?, want.first().copied(), "{b:?}");
                        assert_eq!(last_in(&t, tx, b)?, want.last().copied(), "{b:?}");
                    }
                }
            }
            assert_eq!(t.check(tx)?.entries, md.len());
            if *abort {
                return Err(tx.abort("model abort"));
            }
            Ok(md)
        });
        match r {
            Ok(md) => model = md,
            Err(Error::UserAbort(_)) => assert!(*abort),
            Err(e) => panic!("{e}"),
        }
    }
    let got = pool
        .run(|tx| {
            t.check(tx)?;
            let mut v = Vec::new();
            t.for_each(tx, |k, val| {
                v.push((*k, *val));
                true
            })?;
            Ok(v)
        })
        .unwrap();
    assert_eq!(got, model.into_iter().collect::<Vec<_>>());
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn hashmap_matches_std(buckets in 1usize..70, b in batches(48), e in 0..4usize) {
        run_hash_model(buckets, &b, setups()[e].clone(), false);
    }

    #[test]
    fn growable_hashmap_matches_std(buckets in 1usize..6, b in batches(48), e in 0..4usize) {
        run_hash_model(buckets, &b, setups()[e].clone(), true);
    }

    #[test]
    fn btree_fanout_3_matches_std(b in batches(64), e in 0..4usize) {
        run_tree_model::<3>(&b, setups()[e].clone());
    }

    #[test]
    fn btree_fanout_4_matches_std(b in batches(200), e in 0..4usize) {
        run_tree_model::<4>(&b, setups()[e].clone());
    }

    #[test]
    fn btree_fanout_16_matches_std(b in batches(400)) {
        run_tree_model::<16>(&b, pisces());
    }
}

/// Odd key and value sizes and alignments (3-byte keys, 2-byte values; 4-byte keys,
/// 5-byte values) against the model.
#[test]
fn odd_sized_keys_and_values() {
    let pool = mem_pool(pisces(), 16 << 20, 1);
    let (m, t) = pool
        .run(|tx| {
            Ok((
                HashMap::<[u8; 3], u16>::fixed(tx, 5)?,
                BTreeMap::<i32, [u8; 5], 5>::new(tx)?,
            ))
        })
        .unwrap();
    let mut hm = StdHash::new();
    let mut bm = StdBTree::new();
    let mut x = 7u64;
    for round in 0..30 {
        pool.run(|tx| {
            let mut x2 = x;
            for _ in 0..50 {
                x2 = x2
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let k = (x2 >> 40) as u8 % 40;
                let hk = [k, k.wrapping_mul(3), 1];
                let tk = (x2 >> 20) as i32 % 300 - 150;
                let tv = [k; 5];
                if x2.is_multiple_of(3) {
                    m.remove(tx, &hk)?;
                    t.remove(tx, &tk)?;
                } else {
                    m.insert(tx, hk, u16::from(k) * 100 + round)?;
                    t.insert(tx, tk, tv)?;
                }
            }
            Ok(())
        })
        .unwrap();
        for _ in 0..50 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let k = (x >> 40) as u8 % 40;
            let hk = [k, k.wrapping_mul(3), 1];
            let tk = (x >> 20) as i32 % 300 - 150;
            if x.is_multiple_of(3) {
                hm.remove(&hk);
                bm.remove(&tk);
            } else {
                hm.insert(hk, u16::from(k) * 100 + round);
                bm.insert(tk, [k; 5]);
            }
        }
    }
    pool.run(|tx| {
        let mut got = StdHash::new();
        m.for_each(tx, |k, v| got.insert(*k, *v).is_none())?;
        assert_eq!(got, hm);
        let mut v = Vec::new();
        t.for_each_in(tx, -500..500, |k, val| {
            v.push((*k, *val));
            true
        })?;
        assert_eq!(v, bm.clone().into_iter().collect::<Vec<_>>());
        t.check(tx)?;
        Ok(())
    })
    .unwrap();
}

// ------------------------------------------------------------------ many splits

#[test]
fn btree_twenty_thousand_keys_fanout_16() {
    let pool = mem_pool(pisces(), 64 << 20, 1);
    let t = pool.run(|tx| BTreeMap::<u64, u64, 16>::new(tx)).unwrap();
    const N: u64 = 20_000;
    // A permutation of 0..N.
    let keys: Vec<u64> = (0..N).map(|i| (i * 7_919) % N).collect();
    let mut h = pool.handle().unwrap();
    for chunk in keys.chunks(500) {
        h.run(|tx| {
            for &k in chunk {
                assert_eq!(t.insert(tx, k, k * 10)?, None);
            }
            Ok(())
        })
        .unwrap();
    }
    let st = h.run(|tx| t.check(tx)).unwrap();
    assert_eq!(st.entries, N as usize);
    assert!(st.height >= 3 && st.leaves >= (N as usize) / 15, "{st:?}");
    // Full scan in order, and sub-ranges of every bound kind.
    h.run(|tx| {
        let mut next = 0;
        t.for_each_in(tx, .., |k, v| {
            assert_eq!((*k, *v), (next, next * 10));
            next += 1;
            true
        })?;
        assert_eq!(next, N);
        assert_eq!(t.len(tx)?, N as usize);
        for (lo, hi) in [(0, 0), (5, 6), (1234, 5678), (N - 3, N + 10)] {
            let mut v = Vec::new();
            t.for_each_in(tx, lo..hi, |k, _| {
                v.push(*k);
                true
            })?;
            assert_eq!(v, (lo..hi.min(N)).collect::<Vec<_>>());
            v.clear();
            t.for_each_in(tx, (Bound::Excluded(lo), Bound::Included(hi)), |k, _| {
                v.push(*k);
                true
            })?;
            assert_eq!(v, (lo + 1..(hi + 1).min(N)).collect::<Vec<_>>());
        }
        Ok(())
    })
    .unwrap();
    // Remove two thirds; leaves go sparse or empty, and everything still works.
    for chunk in keys.chunks(1000) {
        h.run(|tx| {
            for &k in chunk.iter().filter(|k| *k % 3 != 0) {
                assert_eq!(t.remove(tx, &k)?, Some(k * 10));
            }
            Ok(())
        })
        .unwrap();
    }
    h.run(|tx| {
        let st = t.check(tx)?;
        assert_eq!(st.entries, N.div_ceil(3) as usize);
        assert!(st.empty_leaves > 0, "{st:?}");
        let mut v = Vec::new();
        t.for_each(tx, |k, _| {
            v.push(*k);
            true
        })?;
        assert_eq!(v, (0..N).step_by(3).collect::<Vec<_>>());
        assert_eq!(t.get(tx, &3)?, Some(30));
        assert_eq!(t.get(tx, &4)?, None);
        // Backward search across sparse and empty leaves.
        for hi in [0, 1, 3, 4, 100, 5_000, 12_346, N, N + 5] {
            let want = (0..hi.min(N)).rev().find(|k| k % 3 == 0);
            assert_eq!(last_in(&t, tx, ..hi)?, want.map(|k| (k, k * 10)), "..{hi}");
            assert_eq!(last_in(&t, tx, 4..=5)?, None);
            assert_eq!(first_in(&t, tx, 4..=5)?, None);
            assert_eq!(
                last_in(&t, tx, (Bound::Excluded(hi), Bound::Unbounded))?,
                (hi < N - 1).then_some(((N - 1) / 3 * 3, (N - 1) / 3 * 30))
            );
        }
        // Reinsert into the emptied ranges.
        for k in (1..N).step_by(3).take(2000) {
            t.insert(tx, k, 1)?;
        }
        t.check(tx)?;
        Ok(())
    })
    .unwrap();
}

#[test]
fn btree_sequential_inserts_fill_nodes() {
    let pool = mem_pool(pisces(), 64 << 20, 1);
    let t = pool.run(|tx| BTreeMap::<u64, u64, 16>::new(tx)).unwrap();
    const N: u64 = 15 * 1000;
    for chunk in (0..N).collect::<Vec<_>>().chunks(1000) {
        pool.run(|tx| {
            for &k in chunk {
                t.insert(tx, k, k)?;
            }
            Ok(())
        })
        .unwrap();
    }
    let st = pool.run(|tx| t.check(tx)).unwrap();
    // Appending keeps leaves full: 15 entries each.
    assert_eq!(st.leaves, 1000, "{st:?}");
    assert_eq!(st.entries, N as usize);
}

/// Ascending keys inside key ranges that other keys follow (TPC-C's orders: each
/// district's new order ids go between its last order and the next district's
/// first): leaves fill up, because a full leaf splits at a key in its upper half
/// instead of halving. Random keys keep leaves at least about half full.
#[test]
fn btree_ascending_runs_between_other_keys_fill_nodes() {
    let pool = mem_pool(pisces(), 64 << 20, 1);
    let t = pool.run(|tx| BTreeMap::<u64, u64, 16>::new(tx)).unwrap();
    const RANGES: u64 = 10;
    // Preload 100 keys per range, in order, then append 1 500 per range, the ranges
    // taking turns as a pseudo-random sequence picks them.
    let preload: Vec<u64> = (0..RANGES)
        .flat_map(|r| (0..100).map(move |i| r << 32 | i))
        .collect();
    pool.run(|tx| {
        for &k in &preload {
            t.insert(tx, k, k)?;
        }
        Ok(())
    })
    .unwrap();
    let mut next = [100u64; RANGES as usize];
    let mut x = 12345u64;
    for _ in 0..15 {
        pool.run(|tx| {
            for _ in 0..1000 {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let r = (x >> 33) % RANGES;
                let k = r << 32 | next[r as usize];
                next[r as usize] += 1;
                t.insert(tx, k, k)?;
            }
            Ok(())
        })
        .unwrap();
    }
    let st = pool.run(|tx| t.check(tx)).unwrap();
    assert_eq!(st.entries, 16_000, "{st:?}");
    // Full leaves hold 15 entries: about 1 067 leaves, plus a partly filled one per
    // range boundary. Halving splits would leave them about half full (about 2 000).
    assert!(st.leaves <= 16_000 / 15 + 4 * RANGES as usize, "{st:?}");

    // Random keys: every leaf keeps at least half of a full one on average.
    let t = pool.run(|tx| BTreeMap::<u64, u64, 16>::new(tx)).unwrap();
    for _ in 0..16 {
        pool.run(|tx| {
            for _ in 0..1000 {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                t.insert(tx, x >> 20, 0)?;
            }
            Ok(())
        })
        .unwrap();
    }
    let st = pool.run(|tx| t.check(tx)).unwrap();
    eprintln!("random keys: {st:?}");
    assert!(st.leaves * 15 / 2 <= st.entries, "{st:?}");
}

// ------------------------------------------------------------------ composition

#[test]
fn containers_compose_with_other_objects_and_roll_back_on_abort() {
    for setup in setups() {
        let pool = mem_pool(setup.clone(), 16 << 20, 1);
        let root: PPtr<Root> = pool.root().unwrap();
        pool.run(|tx| {
            let map = HashMap::fixed(tx, 16)?;
            let tree = BTreeMap::new(tx)?;
            *tx.write(root)? = Root {
                map,
                tree,
                counter: 0,
            };
            Ok(())
        })
        .unwrap();
        let r = pool.run(|tx| Ok(*tx.read(root)?)).unwrap();
        // One transaction: both containers and a plain object.
        pool.run(|tx| {
            for k in 0..50 {
                r.map.insert(tx, k, val64(k))?;
                r.tree.insert(tx, k, k + 1)?;
                tx.write(root)?.counter += 1;
            }
            Ok(())
        })
        .unwrap();
        let objs = root_objects(&pool, root);
        let alloc = allocated(&pool);
        // A user abort after changing everything leaves no trace, not even allocations.
        let res: pisces::Result<()> = pool.run(|tx| {
            for k in 0..50 {
                r.map.remove(tx, &k)?;
                r.tree.insert(tx, k + 1000, 0)?;
                *r.tree.get_mut(tx, &k)?.unwrap() = 0;
            }
            r.map.insert(tx, 999, val64(1))?;
            tx.write(root)?.counter = 0;
            assert_eq!(r.map.len(tx)?, 1);
            Err(tx.abort("no"))
        });
        assert!(matches!(res, Err(Error::UserAbort(_))));
        // An error from a container operation aborts the same way.
        let res: pisces::Result<()> = pool.run(|tx| {
            r.tree.insert(tx, 5000, 1)?;
            HashMap::<u64, u64>::null().get(tx, &1)?;
            Ok(())
        });
        assert!(matches!(res, Err(Error::InvalidPointer(_))));
        pool.run(|tx| {
            assert_eq!(tx.read(root)?.counter, 50);
            assert_eq!(r.map.len(tx)?, 50);
            assert_eq!(r.tree.len(tx)?, 50);
            assert_eq!(r.tree.get(tx, &5000)?, None);
            for k in 0..50 {
                assert_eq!(r.map.get(tx, &k)?, Some(val64(k)));
                assert_eq!(r.tree.get(tx, &k)?, Some(k + 1));
            }
            Ok(())
        })
        .unwrap();
        assert_eq!(root_objects(&pool, root), objs);
        assert_eq!(allocated(&pool), alloc);
    }
}

// ------------------------------------------------------------------ two threads

fn two_thread_pool(setup: Setup) -> (Pool, PPtr<Root>, Root) {
    two_thread_pool_with(setup, false)
}

fn two_thread_pool_with(setup: Setup, growable: bool) -> (Pool, PPtr<Root>, Root) {
    let pool = mem_pool(setup.clone(), 64 << 20, 3);
    let root: PPtr<Root> = pool.root().unwrap();
    let r = pool
        .run(|tx| {
            let r = Root {
                map: if growable {
                    HashMap::with_buckets(tx, 1)?
                } else {
                    HashMap::fixed(tx, 64)?
                },
                tree: BTreeMap::new(tx)?,
                counter: 0,
            };
            *tx.write(root)? = r;
            Ok(r)
        })
        .unwrap();
    (pool, root, r)
}

fn contents(pool: &Pool, r: Root) -> (StdBTree<u64, Val64>, Vec<(u64, u64)>) {
    pool.run(|tx| {
        let mut m = StdBTree::new();
        r.map.for_each(tx, |k, v| m.insert(*k, *v).is_none())?;
        assert_eq!(m.len(), r.map.len(tx)?, "duplicate keys");
        r.tree.check(tx)?;
        let mut t = Vec::new();
        r.tree.for_each(tx, |k, v| {
            t.push((*k, *v));
            true
        })?;
        Ok((m, t))
    })
    .unwrap()
}

#[test]
fn two_threads_disjoint_keys() {
    two_threads_disjoint_keys_on(false);
}

/// Two threads insert into (and remove from) one growable map that starts with a single
/// bucket: the splits run concurrently with the other thread's inserts and removes.
#[test]
fn two_threads_grow_one_map() {
    two_threads_disjoint_keys_on(true);
}

fn two_threads_disjoint_keys_on(growable: bool) {
    for setup in setups() {
        let (pool, root, r) = two_thread_pool_with(setup, growable);
        const N: u64 = 1500;
        let barrier = Barrier::new(2);
        std::thread::scope(|s| {
            for t in 0..2u64 {
                let (pool, barrier) = (pool.clone(), &barrier);
                s.spawn(move || {
                    let mut h = pool.handle().unwrap();
                    barrier.wait();
                    for i in 0..N {
                        let k = i * 2 + t;
                        h.run(|tx| {
                            r.map.insert(tx, k, val64(k))?;
                            r.tree.insert(tx, k, k)?;
                            Ok(())
                        })
                        .unwrap();
                        // Remove every third key again, a little later.
                        if i >= 5 && (i - 5) % 3 == 0 {
                            let old = (i - 5) * 2 + t;
                            h.run(|tx| {
                                assert_eq!(r.map.remove(tx, &old)?, Some(val64(old)));
                                assert_eq!(r.tree.remove(tx, &old)?, Some(old));
                                Ok(())
                            })
                            .unwrap();
                        }
                    }
                });
            }
        });
        let kept: Vec<u64> = (0..N)
            .filter(|i| !(*i + 5 < N && i % 3 == 0))
            .flat_map(|i| [i * 2, i * 2 + 1])
            .collect();
        let (m, t) = contents(&pool, r);
        assert_eq!(m.keys().copied().collect::<Vec<_>>(), kept);
        assert!(m.iter().all(|(k, v)| *v == val64(*k)));
        assert_eq!(t, kept.iter().map(|&k| (k, k)).collect::<Vec<_>>());
        assert_eq!(allocated(&pool), root_objects(&pool, root));
        let (stats, buckets) = pool
            .run(|tx| Ok((r.map.check(tx)?, r.map.buckets(tx)?)))
            .unwrap();
        assert_eq!(stats.entries, kept.len());
        if growable {
            // Grown to about one bucket per entry (a local estimate: within 2x).
            assert!(
                buckets >= kept.len() / 2 && buckets <= 2 * kept.len(),
                "{buckets} buckets for {} entries",
                kept.len()
            );
        }
    }
}

#[test]
fn two_threads_overlapping_keys_no_lost_update_no_double_remove() {
    for setup in setups() {
        let (pool, root, r) = two_thread_pool(setup);
        const KEYS: u64 = 40;
        const ROUNDS: u64 = 60;
        // Both threads go through the same keys in the same order, started together by a
        // barrier, so that they hit the same key at the same time as often as possible.
        let barrier = Barrier::new(2);
        // Phase 1: both threads insert the same absent keys; exactly one insert per key
        // finds it absent.
        let fresh: u64 = std::thread::scope(|s| {
            let hs: Vec<_> = (0..2u64)
                .map(|_| {
                    let (pool, barrier) = (pool.clone(), &barrier);
                    s.spawn(move || {
                        let mut h = pool.handle().unwrap();
                        barrier.wait();
                        let mut fresh = 0;
                        for k in 0..KEYS {
                            fresh += h
                                .run(|tx| {
                                    let a = r.map.insert(tx, k, val64(0))?.is_none();
                                    let b = r.tree.insert(tx, k, 0)?.is_none();
                                    assert_eq!(a, b);
                                    Ok(u64::from(a))
                                })
                                .unwrap();
                        }
                        fresh
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).sum()
        });
        assert_eq!(fresh, KEYS);
        // Phase 2: read-modify-write increments on the same keys from both threads (get
        // then insert in the map, get_mut in the tree): no update may be lost.
        std::thread::scope(|s| {
            for _ in 0..2 {
                let (pool, barrier) = (pool.clone(), &barrier);
                s.spawn(move || {
                    let mut h = pool.handle().unwrap();
                    barrier.wait();
                    for round in 0..ROUNDS {
                        let k = (round * 7) % KEYS;
                        h.run(|tx| {
                            let v = r.map.get(tx, &k)?.unwrap();
                            r.map.insert(tx, k, val64(v[0] + 1))?;
                            *r.tree.get_mut(tx, &k)?.unwrap() += 1;
                            Ok(())
                        })
                        .unwrap();
                    }
                });
            }
        });
        let (m, t) = contents(&pool, r);
        let total: u64 = m.values().map(|v| v[0]).sum();
        assert_eq!(total, 2 * ROUNDS);
        assert!(m.iter().all(|(_, v)| *v == val64(v[0])));
        assert_eq!(t.iter().map(|(_, v)| v).sum::<u64>(), 2 * ROUNDS);
        for (k, v) in &t {
            assert_eq!(m[k][0], *v);
        }
        // Phase 3: both threads remove every key: each key is removed exactly once.
        let removed: u64 = std::thread::scope(|s| {
            let hs: Vec<_> = (0..2u64)
                .map(|_| {
                    let (pool, barrier) = (pool.clone(), &barrier);
                    s.spawn(move || {
                        let mut h = pool.handle().unwrap();
                        barrier.wait();
                        let mut removed = 0;
                        for k in 0..KEYS {
                            removed += h
                                .run(|tx| {
                                    let a = r.map.remove(tx, &k)?.is_some();
                                    let b = r.tree.remove(tx, &k)?.is_some();
                                    assert_eq!(a, b);
                                    Ok(u64::from(a))
                                })
                                .unwrap();
                        }
                        removed
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).sum()
        });
        assert_eq!(removed, KEYS);
        let (m, t) = contents(&pool, r);
        assert!(m.is_empty() && t.is_empty());
        // Every node was freed exactly once: only the skeletons remain.
        assert_eq!(allocated(&pool), root_objects(&pool, root));
    }
}

/// Neighbouring nodes in one chain removed concurrently (the §5.1 anomaly: unlinking
/// both neighbours from a stale snapshot would resurrect one of them) — one bucket, so
/// every remove touches a neighbour of another.
#[test]
fn two_threads_adjacent_removes_in_one_chain() {
    const KEYS: u64 = 64;
    const ROUNDS: u64 = 30;
    for setup in setups() {
        let pool = mem_pool(setup.clone(), 16 << 20, 3);
        let m = pool.run(|tx| HashMap::<u64, u64>::fixed(tx, 1)).unwrap();
        let barrier = Barrier::new(2);
        // Failures are recorded, not asserted in the threads: a panicking thread would
        // leave the other waiting at the barrier.
        let failures = Mutex::new(Vec::new());
        std::thread::scope(|s| {
            for t in 0..2u64 {
                let (pool, barrier, failures) = (pool.clone(), &barrier, &failures);
                s.spawn(move || {
                    let mut h = pool.handle().unwrap();
                    let fail = |e: String| failures.lock().unwrap().push(e);
                    for round in 0..ROUNDS {
                        if t == 0 {
                            h.run(|tx| {
                                for k in 0..KEYS {
                                    m.insert(tx, k, round)?;
                                }
                                Ok(())
                            })
                            .unwrap_or_else(|e| fail(format!("insert: {e}")));
                        }
                        barrier.wait();
                        // In lockstep: thread 0 removes k while thread 1 removes k + 1.
                        for k in (t..KEYS).step_by(2) {
                            match h.run(|tx| m.remove(tx, &k)) {
                                Ok(Some(v)) if v == round => {}
                                r => fail(format!("round {round}: remove {k}: {r:?}")),
                            }
                        }
                        barrier.wait();
                        if t == 0 {
                            match h.run(|tx| m.len(tx)) {
                                Ok(0) => {}
                                r => fail(format!("round {round}: left after removing all: {r:?}")),
                            }
                        }
                    }
                });
            }
        });
        let failures = failures.into_inner().unwrap();
        assert!(failures.is_empty(), "{setup:?}: {failures:#?}");
    }
}

// ------------------------------------------------------------------ crashes

const CRASH_POOL: u64 = 1 << 20;

fn crash_cfg((engine, opts): Setup) -> Config {
    Config::default()
        .size(CRASH_POOL)
        .engine(engine)
        .max_threads(2)
        // Room for the transaction that makes both containers (their element counts
        // included) on every engine, whose log may be split among its parts.
        .log_bytes_per_thread(64 << 10)
        .engine_options(opts.clone())
}

#[derive(Clone, Copy, Pod, Zeroable)]
#[repr(C)]
struct CrashRoot {
    map: HashMap<u64, [u64; 3]>,
    tree: BTreeMap<u64, u64, 4>,
}

/// Operation `i`: insert key `k` with a value that depends on `i`; every third
/// operation instead removes the key inserted two operations earlier (still present).
fn crash_op(i: usize) -> (u64, Option<u64>) {
    let key = |i: usize| (i as u64 * 11) % 17;
    if i % 3 == 2 {
        (key(i - 2), None)
    } else {
        (key(i), Some(i as u64 + 1))
    }
}

fn crash_model(n: usize) -> StdBTree<u64, u64> {
    let mut m = StdBTree::new();
    for i in 0..n {
        match crash_op(i) {
            (k, Some(v)) => m.insert(k, v),
            (k, None) => m.remove(&k),
        };
    }
    m
}

fn crash_run(pool: &Pool, sim: &SimMedium, n: usize) -> usize {
    let root: PPtr<CrashRoot> = pool.root().unwrap();
    let r = pool.run(|tx| Ok(*tx.read(root)?)).unwrap();
    let mut h = pool.handle().unwrap();
    let mut acked = 0;
    for i in 0..n {
        if sim.crashed() {
            break;
        }
        let (k, v) = crash_op(i);
        let res = h.run(|tx| {
            match v {
                Some(v) => {
                    r.map.insert(tx, k, [v, k, !v])?;
                    r.tree.insert(tx, k, v)?;
                }
                None => {
                    r.map.remove(tx, &k)?;
                    r.tree.remove(tx, &k)?;
                }
            }
            Ok(())
        });
        if res.is_err() || sim.crashed() {
            break;
        }
        acked += 1;
    }
    acked
}

fn crash_check(pool: &Pool, acked: usize, n: usize) -> Result<(), String> {
    let root: PPtr<CrashRoot> = pool.root().map_err(|e| e.to_string())?;
    let (m, t, objs) = pool
        .run(|tx| {
            let r = *tx.read(root)?;
            let mut m = StdBTree::new();
            let mut torn = false;
            r.map.for_each(tx, |k, v| {
                torn |= v[1] != *k || v[2] != !v[0];
                m.insert(*k, v[0]);
                true
            })?;
            if torn {
                return Err(Error::abort("torn hash map value"));
            }
            r.map.check(tx)?;
            r.tree.check(tx)?;
            let mut t = StdBTree::new();
            r.tree.for_each(tx, |k, v| t.insert(*k, *v).is_none())?;
            let mut objs = BTreeSet::from([root.offset()]);
            r.map.for_each_object(tx, |o| {
                objs.insert(o);
            })?;
            r.tree.for_each_object(tx, |o| {
                objs.insert(o);
            })?;
            Ok((m, t, objs))
        })
        .map_err(|e| format!("reading the recovered containers: {e}"))?;
    if m != t {
        return Err(format!(
            "map {m:?} and tree {t:?} differ (torn transaction)"
        ));
    }
    let ok = (acked..=(acked + 1).min(n)).any(|c| crash_model(c) == m);
    if !ok {
        return Err(format!(
            "recovered {m:?} is the state after neither {acked} nor {} operations",
            acked + 1
        ));
    }
    let alloc = allocated(pool);
    if alloc != objs {
        return Err(format!(
            "allocator has {} blocks, the containers reach {} (leak or dangling)",
            alloc.len(),
            objs.len()
        ));
    }
    Ok(())
}

/// Crash at every fence of a short single-thread run of inserts and removes applied to
/// both containers in one transaction each; every recovered image must hold exactly
/// the acknowledged operations (or one more), consistent containers, and no leaked or
/// dangling blocks.
#[test]
fn crash_at_every_fence() {
    crash_at_every_fence_with(|tx| HashMap::fixed(tx, 4));
}

/// As `crash_at_every_fence`, with a growable map that starts with one bucket: the
/// crashes hit bucket splits, chunk additions and count updates.
#[test]
fn crash_at_every_fence_while_growing() {
    crash_at_every_fence_with(|tx| HashMap::with_buckets(tx, 1));
}

/// How a crash test makes its map.
type MakeMap = fn(&mut pisces::Tx<'_>) -> pisces::Result<HashMap<u64, [u64; 3]>>;

fn crash_at_every_fence_with(make_map: MakeMap) {
    const N: usize = 24;
    // Every persistent engine (the volatile baseline promises nothing after a crash).
    for opts in setups().into_iter().filter(|s| s.0.is_durable()) {
        let sim = Arc::new(SimMedium::new(CRASH_POOL as usize, SimConfig::default()).unwrap());
        let pool = Pool::create_on(sim.clone(), crash_cfg(opts.clone())).unwrap();
        let root: PPtr<CrashRoot> = pool.root().unwrap();
        pool.run(|tx| {
            *tx.write(root)? = CrashRoot {
                map: make_map(tx)?,
                tree: BTreeMap::new(tx)?,
            };
            Ok(())
        })
        .unwrap();
        drop(pool);
        let image = sim.crash_image_now_with(0, Adversary::DurableOnly).image;
        // Learn the number of fences of a full run.
        let sim = Arc::new(SimMedium::from_image(image.clone(), SimConfig::default()).unwrap());
        let pool = Pool::open_on(sim.clone(), crash_cfg(opts.clone())).unwrap();
        assert_eq!(crash_run(&pool, &sim, N), N);
        crash_check(&pool, N, N).unwrap();
        drop(pool);
        let fences = sim.fence_count();
        assert!(fences >= N as u64, "{fences} fences");
        let mut states = 0;
        let mut failures = Vec::new();
        for f in 0..fences {
            let sim = Arc::new(
                SimMedium::from_image(image.clone(), SimConfig::crash_at_fence(f).with_seed(f))
                    .unwrap(),
            );
            let Ok(pool) = Pool::open_on(sim.clone(), crash_cfg(opts.clone())) else {
                continue; // crashed while opening (recovery of the clean image)
            };
            let acked = crash_run(&pool, &sim, N);
            drop(pool);
            if !sim.crashed() {
                continue;
            }
            for seed in 0..2 {
                let img = sim.crash_image(seed).unwrap();
                let booted = Arc::new(SimMedium::from_image(img, SimConfig::default()).unwrap());
                let r = Pool::open_on(booted, crash_cfg(opts.clone()))
                    .map_err(|e| format!("recovery: {e}"))
                    .and_then(|p| crash_check(&p, acked, N));
                states += 1;
                if let Err(e) = r {
                    failures.push(format!("{opts:?} fence {f} seed {seed}: {e}"));
                }
            }
        }
        eprintln!("{opts:?}: {fences} fences, {states} crash states checked");
        assert!(failures.is_empty(), "{failures:#?}");
        assert!(states as u64 >= fences, "only {states} states");
    }
}

/// A grown map survives a clean close and reopen, and damage to its growth state is an
/// error (`Corrupt`), never a hang or a wrong answer.
/// Entries of the maps [`grown_and_reopened`] makes: enough to pass the header's
/// directory (504 entries) in either layout.
const GROWN: u64 = 20_000;

/// A growable map of [`GROWN`] entries (`value(k)` for key `k`, keys `0 .. GROWN`), filled in batches on the
/// crash simulator, then reopened from a crash image of its durable state: the same
/// entries, geometry and check result before and after. Returns the reopened pool, the
/// map and its bucket (or group) count.
fn grown_and_reopened<V: Pod + Eq + std::fmt::Debug>(
    value: impl Fn(u64) -> V,
) -> (Pool, HashMap<u64, V>, usize) {
    let (engine, opts) = pisces();
    let sim = Arc::new(SimMedium::new(16 << 20, SimConfig::default()).unwrap());
    let cfg = Config::default()
        .size(16 << 20)
        .engine(engine)
        .max_threads(2)
        .log_bytes_per_thread(1 << 20)
        .engine_options(opts);
    let pool = Pool::create_on(sim.clone(), cfg.clone()).unwrap();
    let root: PPtr<HashMap<u64, V>> = pool.root().unwrap();
    pool.run(|tx| {
        let m = HashMap::new(tx)?;
        *tx.write(root)? = m;
        Ok(())
    })
    .unwrap();
    let m = pool.run(|tx| Ok(*tx.read(root)?)).unwrap();
    for batch in (0..GROWN).collect::<Vec<_>>().chunks(500) {
        pool.run(|tx| {
            for &k in batch {
                m.insert(tx, k, value(k))?;
            }
            Ok(())
        })
        .unwrap();
    }
    let before = pool.run(|tx| Ok((m.check(tx)?, m.buckets(tx)?))).unwrap();
    assert_eq!(before.0.entries, GROWN as usize);
    drop(pool);
    let image = sim.crash_image_now_with(0, Adversary::DurableOnly).image;
    let sim = Arc::new(SimMedium::from_image(image, SimConfig::default()).unwrap());
    let pool = Pool::open_on(sim, cfg).unwrap();
    let after = pool.run(|tx| Ok((m.check(tx)?, m.buckets(tx)?))).unwrap();
    assert_eq!(after, before);
    for k in (0..GROWN).step_by(97) {
        assert_eq!(pool.run(|tx| m.get(tx, &k)).unwrap(), Some(value(k)));
    }
    assert_eq!(pool.run(|tx| m.get(tx, &GROWN)).unwrap(), None);
    (pool, m, before.1)
}

/// A map whose header names a layout version this build does not know is refused as
/// `Corrupt`, not misread.
fn unknown_layout_is_refused<V: Pod + Eq + std::fmt::Debug>(pool: &Pool, m: HashMap<u64, V>) {
    let hdr = PPtr::<[u64; 512]>::from_offset(m.offset());
    pool.run(|tx| {
        tx.write(hdr)?[5] = 7;
        Ok(())
    })
    .unwrap();
    let e = pool.run(|tx| m.get(tx, &1)).unwrap_err();
    assert!(matches!(e, Error::Corrupt(_)), "{e}");
}

#[test]
fn grown_map_reopens_and_damage_is_corrupt() {
    // Three-word entries: the chained layout (the grouped one has its own test).
    let (pool, m, buckets) = grown_and_reopened(|k| [k * 3; 2]);
    assert!(
        buckets > 32 * 504,
        "{buckets} buckets: the directory is in pages"
    );
    // A count that disagrees with the chain: `check` says Corrupt.
    let hdr = PPtr::<[u64; 512]>::from_offset(m.offset());
    let chunk0 = pool
        .run(|tx| {
            let h = *tx.read(hdr)?;
            let page = *tx.read(PPtr::<[u64; 512]>::from_offset(h[8]))?;
            Ok(page[0])
        })
        .unwrap();
    let count = PPtr::<[u64; 33]>::from_offset(chunk0);
    pool.run(|tx| {
        tx.write(count)?[32] += 1;
        Ok(())
    })
    .unwrap();
    assert!(matches!(pool.run(|tx| m.check(tx)), Err(Error::Corrupt(_))));
    pool.run(|tx| {
        tx.write(count)?[32] = 0;
        Ok(())
    })
    .unwrap();
    // Removing a key of that chunk would take its count below zero: the removes of
    // keys in other chunks succeed, the first one in chunk 0 is `Corrupt`.
    let first_err = (0..GROWN)
        .map(|k| pool.run(|tx| m.remove(tx, &k)))
        .find_map(|r| r.err())
        .expect("no key of chunk 0 was removed");
    assert!(matches!(first_err, Error::Corrupt(_)), "{first_err}");
    // An unknown layout version is refused, not misread.
    unknown_layout_is_refused(&pool, m);
}

// ------------------------------------------------------------------ grouped layout

/// Header word 5 of a map made in the grouped layout (the module docs of `HashMap`).
const GROUPED: u64 = u64::from_le_bytes(*b"GROUP.v1");

/// The layout word of map `m`'s header.
fn layout_word(pool: &Pool, m: u64) -> u64 {
    pool.run(|tx| Ok(tx.read(PPtr::<[u64; 512]>::from_offset(m))?[5]))
        .unwrap()
}

/// `n` distinct keys whose hashes agree in their low 16 bits: in a grouped map of up
/// to 65,536 groups they share one chain, so that chain outgrows its first group.
fn colliding_keys(n: usize) -> Vec<u64> {
    let low = |k: u64| pisces::stable_hash(&k.to_le_bytes()) & 0xffff;
    let target = low(0);
    (0u64..).filter(|&k| low(k) == target).take(n).collect()
}

#[test]
fn growable_maps_of_small_entries_are_grouped() {
    let pool = mem_pool(pisces(), 8 << 20, 1);
    let small = pool.run(|tx| HashMap::<u64, u64>::new(tx)).unwrap();
    let set = pool
        .run(|tx| HashMap::<u64, u8>::with_buckets(tx, 10))
        .unwrap();
    let wide = pool.run(|tx| HashMap::<u64, [u64; 2]>::new(tx)).unwrap();
    let fixed = pool.run(|tx| HashMap::<u64, u64>::fixed(tx, 10)).unwrap();
    assert_eq!(layout_word(&pool, small.offset()), GROUPED);
    assert_eq!(layout_word(&pool, set.offset()), GROUPED);
    assert_eq!(
        layout_word(&pool, wide.offset()),
        u64::from_le_bytes(*b"GROW.v1\0")
    );
    assert_eq!(layout_word(&pool, fixed.offset()), 0);
    assert_eq!(
        pool.run(|tx| set.buckets(tx)).unwrap(),
        10,
        "groups, as asked"
    );
}

/// A chain longer than one group (keys that collide in every geometry the test
/// reaches) beside ordinary keys, changed against a model on every engine: inserts
/// into the first free slot along the chain, removes that empty a later group (which
/// is unlinked and freed), updates in place; iteration, `check` and the objects the
/// map lists agree with the model and the allocator after each batch.
#[test]
fn grouped_chain_longer_than_a_group_matches_a_model() {
    let chain = colliding_keys(30);
    for setup in setups() {
        let pool = mem_pool(setup.clone(), 16 << 20, 1);
        let base = allocated(&pool);
        let m = pool
            .run(|tx| HashMap::<u64, u64>::with_buckets(tx, 1))
            .unwrap();
        let mut model = StdHash::new();
        let others: Vec<u64> = (1..200u64).map(|k| k * 7919).collect();
        let batches: Vec<Vec<(u64, Option<u64>)>> = vec![
            chain.iter().map(|&k| (k, Some(k))).collect(),
            others.iter().map(|&k| (k, Some(k + 1))).collect(),
            // From the end of the chain (its last groups), then from the start.
            chain[20..].iter().rev().map(|&k| (k, None)).collect(),
            chain[..8].iter().map(|&k| (k, None)).collect(),
            chain.iter().map(|&k| (k, Some(k ^ 5))).collect(),
            chain.iter().step_by(2).map(|&k| (k, None)).collect(),
        ];
        for batch in &batches {
            pool.run(|tx| {
                for &(k, v) in batch {
                    let got = match v {
                        Some(v) => m.insert(tx, k, v)?,
                        None => m.remove(tx, &k)?,
                    };
                    let want = match v {
                        Some(v) => model.insert(k, v),
                        None => model.remove(&k),
                    };
                    assert_eq!(got, want, "{setup:?} key {k}");
                }
                Ok(())
            })
            .unwrap();
            for &k in chain.iter().chain(&others) {
                assert_eq!(
                    pool.run(|tx| m.get(tx, &k)).unwrap(),
                    model.get(&k).copied()
                );
            }
            let (stats, listed, iterated) = pool
                .run(|tx| {
                    let mut listed = BTreeSet::new();
                    m.for_each_object(tx, |o| assert!(listed.insert(o), "{o:#x} twice"))?;
                    let mut iterated = StdHash::new();
                    for e in m.iter(tx) {
                        let (k, v) = e?;
                        assert!(iterated.insert(*k, *v).is_none(), "{k} twice");
                    }
                    Ok((m.check(tx)?, listed, iterated))
                })
                .unwrap();
            assert_eq!(iterated, model);
            assert_eq!(stats.entries, model.len());
            let now = allocated(&pool);
            assert_eq!(
                now.difference(&base).copied().collect::<BTreeSet<_>>(),
                listed
            );
        }
        // The colliding keys still in the map need more than one group.
        let longest = pool.run(|tx| Ok(m.check(tx)?.longest_chain)).unwrap();
        assert!(longest > 7, "{setup:?}: longest chain {longest}");
        pool.run(|tx| {
            *m.get_mut(tx, &chain[1])?.expect("present") = 77;
            Ok(())
        })
        .unwrap();
        assert_eq!(pool.run(|tx| m.get(tx, &chain[1])).unwrap(), Some(77));
    }
}

/// The chain of a key with hash `hash` in a grouped map of `n` groups (linear hashing,
/// as `HashMap`'s module docs give it).
fn chain_of(hash: u64, n: u64) -> u64 {
    let m = 1u64 << (63 - n.leading_zeros());
    let b = hash & (m - 1);
    if b < n - m {
        hash & (2 * m - 1)
    } else {
        b
    }
}

/// A grouped map starting with `groups` groups, holding `keys` (one chain's worth of
/// colliding keys, inserted in one transaction), and its group count after them.
fn grouped_with(pool: &Pool, groups: usize, keys: &[u64]) -> (HashMap<u64, u64>, u64) {
    let m = pool
        .run(|tx| HashMap::<u64, u64>::with_buckets(tx, groups))
        .unwrap();
    pool.run(|tx| {
        for &k in keys {
            m.insert(tx, k, 1)?;
        }
        Ok(())
    })
    .unwrap();
    (m, pool.run(|tx| m.buckets(tx)).unwrap() as u64)
}

/// Two inserts of one absent key whose snapshots disagree on where the first free
/// slot of its chain is: the earlier snapshot sees the chain's first group full (and
/// a free slot in the second), the later one sees slots of the first group freed by
/// removes in its own transaction. Each would put the key in a different group; the
/// insert rule (write the chain's first group) makes them conflict instead, so the
/// key is in the map once.
///
/// The geometry is chosen so that nothing else makes them conflict: the later
/// transaction's chain stays below the split threshold, and the split the earlier
/// one's insert makes is of another chain. The earlier transaction holds its
/// snapshot while the later one commits; it waits for the later one's effect to be
/// visible to a third thread, not for its `run` to return (an engine's commit may wait
/// for older transactions to end).
#[test]
fn grouped_inserts_of_one_key_from_different_snapshots_conflict() {
    let chain = colliding_keys(9);
    let (keys, x) = (&chain[..8], chain[8]);
    let hash = pisces::stable_hash(&x.to_le_bytes());
    // A starting group count after which the chain is one not yet split this round
    // (`s < chain < m`): the split an insert makes (of chain `s`) is of another chain,
    // and a chain of 3 entries is below the threshold. The layout is the same on
    // every engine (one thread), so it is found once.
    let start = (1..1024)
        .find(|&g| {
            let (_, n) = grouped_with(&mem_pool(pisces(), 4 << 20, 1), g, keys);
            let m = 1u64 << (63 - n.leading_zeros());
            let c = chain_of(hash, n);
            n - m < c && c < m
        })
        .expect("a starting group count with the chain unsplit");
    for setup in setups() {
        if setup.0 == EngineId::Bare {
            // No transaction runs beside a writer there, so the earlier snapshot
            // cannot be held while the later transaction commits.
            continue;
        }
        let pool = mem_pool(setup.clone(), 16 << 20, 3);
        let marker: PPtr<u64> = pool.root().unwrap();
        // Eight keys of one chain: seven fill its first group, one starts a second.
        let (m, _) = grouped_with(&pool, start, keys);
        let order: Vec<u64> = pool
            .run(|tx| m.iter(tx).map(|e| e.map(|(k, _)| *k)).collect())
            .unwrap();
        assert_eq!(order.len(), 8);
        let began = Barrier::new(3);
        let go = Barrier::new(2);
        let seen = std::thread::scope(|s| {
            s.spawn(|| {
                let mut h = pool.handle().unwrap();
                let mut first = true;
                h.run(|tx| {
                    // Fix the snapshot (a read of an object nobody else touches), then
                    // let the other transaction commit before inserting.
                    tx.read(marker)?;
                    if std::mem::take(&mut first) {
                        began.wait();
                        go.wait();
                    }
                    m.insert(tx, x, 2).map(|_| ())
                })
                .unwrap();
            });
            s.spawn(|| {
                began.wait();
                pool.run(|tx| {
                    for k in &order[..6] {
                        m.remove(tx, k)?;
                    }
                    m.insert(tx, x, 3).map(|_| ())
                })
                .unwrap();
            });
            began.wait();
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
            let mut seen = false;
            while !seen && std::time::Instant::now() < deadline {
                seen = pool.run(|tx| m.get(tx, &x)).unwrap().is_some();
            }
            go.wait();
            seen
        });
        assert!(seen, "{setup:?}: the second insert never became visible");
        let (stats, copies) = pool
            .run(|tx| {
                let mut copies = 0;
                m.for_each(tx, |k, _| {
                    copies += usize::from(*k == x);
                    true
                })?;
                Ok((m.check(tx), copies))
            })
            .unwrap();
        assert_eq!(copies, 1, "{setup:?}: the key is in the map {copies} times");
        assert_eq!(stats.unwrap().entries, 3, "{setup:?}");
        assert_eq!(pool.run(|tx| m.get(tx, &x)).unwrap(), Some(2), "{setup:?}");
    }
}

/// Two threads grow one grouped map from a single group, inserting and removing
/// disjoint keys: splits run beside the other thread's inserts and removes.
#[test]
fn two_threads_grow_one_grouped_map() {
    for setup in setups() {
        let pool = mem_pool(setup.clone(), 32 << 20, 3);
        let m = pool
            .run(|tx| HashMap::<u64, u64>::with_buckets(tx, 1))
            .unwrap();
        const N: u64 = 1500;
        std::thread::scope(|s| {
            for t in 0..2u64 {
                let pool = &pool;
                s.spawn(move || {
                    let mut h = pool.handle().unwrap();
                    for i in 0..N {
                        let k = i * 2 + t;
                        h.run(|tx| m.insert(tx, k, k + 1).map(|_| ())).unwrap();
                        if i % 3 == 0 {
                            h.run(|tx| m.remove(tx, &(k / 2 * 2 + t)).map(|_| ()))
                                .unwrap();
                        }
                    }
                });
            }
        });
        let want: StdHash<u64, u64> = (0..2 * N)
            .filter(|k| (k / 2) % 3 != 0)
            .map(|k| (k, k + 1))
            .collect();
        let (stats, got) = pool
            .run(|tx| {
                let mut got = StdHash::new();
                m.for_each(tx, |k, v| got.insert(*k, *v).is_none())?;
                Ok((m.check(tx)?, got))
            })
            .unwrap();
        assert_eq!(got, want, "{setup:?}");
        assert_eq!(stats.entries, want.len());
        assert!(stats.buckets > 64, "{setup:?}: {} groups", stats.buckets);
    }
}

#[test]
fn grouped_map_reopens_and_damage_is_corrupt() {
    let (pool, m, groups) = grown_and_reopened(|k| k * 3);
    assert!(groups > 504, "{groups} groups: the directory is in pages");
    // Group 0 (the directory is in pages now).
    let hdr = PPtr::<[u64; 512]>::from_offset(m.offset());
    let group0 = pool
        .run(|tx| {
            let h = *tx.read(hdr)?;
            let page = *tx.read(PPtr::<[u64; 512]>::from_offset(h[8]))?;
            Ok(PPtr::<[u64; 16]>::from_offset(page[0]))
        })
        .unwrap();
    let g = pool.run(|tx| Ok(*tx.read(group0)?)).unwrap();
    let slot = (0..7)
        .find(|i| (g[0] >> (8 * i)) & 0x80 != 0)
        .expect("group 0 holds a key");
    let key = g[2 + 2 * slot];
    let damage = |f: &dyn Fn(&mut [u64; 16])| {
        pool.run(|tx| {
            f(tx.write(group0)?);
            Ok(())
        })
        .unwrap();
        let e = pool.run(|tx| m.check(tx)).unwrap_err();
        assert!(matches!(e, Error::Corrupt(_)), "{e}");
        pool.run(|tx| {
            *tx.write(group0)? = g;
            Ok(())
        })
        .unwrap();
        assert!(pool.run(|tx| m.check(tx)).is_ok());
    };
    // A wrong tag: the key is not found (never a wrong value), and `check` says so.
    damage(&|w| w[0] ^= 1 << (8 * slot));
    pool.run(|tx| {
        tx.write(group0)?[0] ^= 1 << (8 * slot);
        Ok(())
    })
    .unwrap();
    assert_eq!(pool.run(|tx| m.get(tx, &key)).unwrap(), None);
    pool.run(|tx| {
        *tx.write(group0)? = g;
        Ok(())
    })
    .unwrap();
    assert_eq!(pool.run(|tx| m.get(tx, &key)).unwrap(), Some(key * 3));
    // A tag in the unused byte; a key of another chain; a key twice.
    damage(&|w| w[0] |= 0x80 << 56);
    damage(&|w| w[2 + 2 * slot] = key.wrapping_add(1));
    let free = (0..7)
        .find(|i| (g[0] >> (8 * i)) & 0x80 == 0)
        .expect("a free slot");
    damage(&|w| {
        w[0] |= ((w[0] >> (8 * slot)) & 0xff) << (8 * free);
        w[2 + 2 * free] = w[2 + 2 * slot];
    });
    // A chain that loops back on its first group.
    damage(&|w| w[1] = group0.offset());
    // More groups than the directory can hold: refused, never an index past it.
    let h = pool.run(|tx| Ok(*tx.read(hdr)?)).unwrap();
    for groups in [504 * 512 + 1, u64::MAX] {
        pool.run(|tx| {
            let w = tx.write(hdr)?;
            (w[2], w[4]) = (groups, groups);
            Ok(())
        })
        .unwrap();
        let e = pool.run(|tx| m.get(tx, &1)).unwrap_err();
        assert!(matches!(e, Error::Corrupt(_)), "{e}");
    }
    // No groups; a directory in the header that the level count says is in pages:
    // each refused by a lookup. A chunk count that is not the group count: a lookup,
    // which never reads it, still answers; `check` and an update refuse the map.
    type Damage<'a> = &'a dyn Fn(&mut [u64; 512]);
    let damaged_headers: [Damage; 3] = [&|w| (w[2], w[4]) = (0, 0), &|w| w[3] = 1, &|w| w[4] += 1];
    for (i, damage) in damaged_headers.into_iter().enumerate() {
        pool.run(|tx| {
            let w = tx.write(hdr)?;
            *w = h;
            damage(w);
            Ok(())
        })
        .unwrap();
        if i < 2 {
            let e = pool.run(|tx| m.get(tx, &1)).unwrap_err();
            assert!(matches!(e, Error::Corrupt(_)), "{e}");
        } else {
            assert_eq!(pool.run(|tx| m.get(tx, &key)).unwrap(), Some(key * 3));
            let e = pool.run(|tx| m.check(tx)).unwrap_err();
            assert!(matches!(e, Error::Corrupt(_)), "{e}");
            let e = pool.run(|tx| m.insert(tx, key, 0)).unwrap_err();
            assert!(matches!(e, Error::Corrupt(_)), "{e}");
        }
    }
    pool.run(|tx| {
        *tx.write(hdr)? = h;
        Ok(())
    })
    .unwrap();
    // An unknown layout version is refused, not misread; the grouped layout under
    // other types is refused by the signature.
    let wide: HashMap<u64, [u64; 2]> = bytemuck::cast(m);
    assert!(matches!(
        pool.run(|tx| wide.get(tx, &1)),
        Err(Error::InvalidPointer(_))
    ));
    unknown_layout_is_refused(&pool, m);
}

/// Seeded batches of 100 inserts, removes and lookups, one transaction each (every
/// seventh ends in a user abort), on a grouped map made by [`HashMap::new`] on every
/// engine: each batch commits (or aborts) as the model says, and the map equals the
/// model after each. Many batches free and allocate groups in one window, so an
/// engine that reuses freed blocks inside a window is driven through that reuse
/// across many commits.
#[test]
fn grouped_map_seeded_batches_match_a_model_on_every_engine() {
    use rand::{rngs::StdRng, Rng, SeedableRng};
    for setup in setups() {
        let name = setup.0.name();
        let pool = mem_pool(setup.clone(), 8 << 20, 1);
        let m = pool.run(|tx| HashMap::<u64, u64>::new(tx)).unwrap();
        let mut model: StdHash<u64, u64> = StdHash::new();
        let mut rng = StdRng::seed_from_u64(0x5eed_6a7c);
        for batch in 0..120 {
            let ops: Vec<(u8, u64, u64)> = (0..100)
                .map(|_| {
                    (
                        rng.gen_range(0..3u8),
                        rng.gen_range(0..20_000u64),
                        rng.gen(),
                    )
                })
                .collect();
            let abort = batch % 7 == 6;
            let r = pool.run(|tx| {
                let mut md = model.clone();
                for &(kind, k, v) in &ops {
                    match kind {
                        0 => assert_eq!(m.insert(tx, k, v)?, md.insert(k, v), "{name}"),
                        1 => assert_eq!(m.remove(tx, &k)?, md.remove(&k), "{name}"),
                        _ => assert_eq!(m.get(tx, &k)?, md.get(&k).copied(), "{name}"),
                    }
                }
                if abort {
                    return Err(tx.abort("model abort"));
                }
                Ok(md)
            });
            match r {
                Ok(md) => model = md,
                Err(Error::UserAbort(_)) => assert!(abort),
                Err(e) => panic!("{name} {:?}: batch {batch}: {e}", setup.1),
            }
            let got = pool
                .run(|tx| {
                    let mut all = StdHash::new();
                    m.for_each(tx, |k, v| all.insert(*k, *v).is_none())?;
                    Ok(all)
                })
                .unwrap();
            assert_eq!(got, model, "{name}: batch {batch}");
        }
        assert_eq!(
            pool.run(|tx| m.check(tx)).unwrap().entries,
            model.len(),
            "{name}"
        );
    }
}

/// Lookups of a grouped map on one handle while it grows from a directory in its
/// header (whose first groups the read fast path's table of found blocks locates once
/// per engine thread) to directory pages (whose groups it reads as any object), on
/// every engine: every key present is found with its value and every absent key is
/// not, at every size; once the map is destroyed and its groups' blocks reused, a
/// lookup through the old handle never answers with a value the map did not hold.
#[test]
fn grouped_lookups_as_the_directory_moves_to_pages() {
    const KEYS: u64 = 2_400;
    for setup in setups() {
        let name = setup.0.name();
        let pool = mem_pool(setup.clone(), 32 << 20, 1);
        let mut h = pool.handle().unwrap();
        let m = h.run(|tx| HashMap::<u64, u64>::new(tx)).unwrap();
        let mut levels_seen = BTreeSet::new();
        for batch in (0..KEYS).collect::<Vec<_>>().chunks(300) {
            h.run(|tx| {
                for &k in batch {
                    m.insert(tx, 2 * k, k ^ 0x5a5a)?;
                }
                Ok(())
            })
            .unwrap();
            let inserted = batch[batch.len() - 1] + 1;
            levels_seen.insert(
                h.read(|tx| Ok(tx.read(PPtr::<[u64; 512]>::from_offset(m.offset()))?[3]))
                    .unwrap(),
            );
            for k in 0..KEYS {
                let got = h.read(|tx| m.get(tx, &(2 * k))).unwrap();
                let want = (k < inserted).then_some(k ^ 0x5a5a);
                assert_eq!(got, want, "{name}: key {} of {inserted}", 2 * k);
                let absent = h.read(|tx| m.get(tx, &(2 * k + 1))).unwrap();
                assert_eq!(absent, None, "{name}: key {} of {inserted}", 2 * k + 1);
            }
        }
        assert_eq!(levels_seen, BTreeSet::from([1, 2]), "{name}");
        h.run(|tx| m.destroy(tx)).unwrap();
        // The groups' blocks, reused by objects of their size holding other words.
        for batch in 0..10u64 {
            h.run(|tx| {
                for i in 0..200 {
                    tx.alloc([u64::MAX - 200 * batch - i; 16])?;
                }
                Ok(())
            })
            .unwrap();
        }
        // (An engine that reuses a freed block only later may still answer from it,
        // with what it held: a logic error of the caller's, never a value it did not
        // hold.)
        for k in [0, 2, 4, 1_000, 2 * KEYS - 2] {
            let r = h.read(|tx| m.get(tx, &k));
            assert!(
                match &r {
                    Err(_) | Ok(None) => true,
                    Ok(Some(v)) => *v == (k / 2) ^ 0x5a5a,
                },
                "{name}: key {k} after destroy: {r:?}"
            );
        }
    }
}

/// Lookups of chained maps on one handle, on every engine: with the directory in the
/// header (whose chunks the read fast path's table of found blocks locates once per
/// engine thread) and with directory pages (read through that table, their chunks
/// read as any object). Every key present is found with its value, every absent key
/// is not.
#[test]
fn chained_lookups_with_and_without_directory_pages() {
    const KEYS: u64 = 3_000;
    for setup in setups() {
        let name = setup.0.name();
        let pool = mem_pool(setup.clone(), 32 << 20, 1);
        let mut h = pool.handle().unwrap();
        let maps = [
            h.run(|tx| HashMap::<u64, [u64; 2]>::new(tx)).unwrap(),
            h.run(|tx| HashMap::<u64, [u64; 2]>::fixed(tx, 10_000))
                .unwrap(),
            h.run(|tx| HashMap::<u64, [u64; 2]>::fixed(tx, 16_500))
                .unwrap(),
        ];
        let levels: Vec<u64> = maps
            .iter()
            .map(|m| {
                h.read(|tx| Ok(tx.read(PPtr::<[u64; 512]>::from_offset(m.offset()))?[3]))
                    .unwrap()
            })
            .collect();
        assert_eq!(levels, [1, 1, 2], "{name}");
        for batch in (0..KEYS).collect::<Vec<_>>().chunks(250) {
            h.run(|tx| {
                for &k in batch {
                    for m in &maps {
                        m.insert(tx, 3 * k, [k, !k])?;
                    }
                }
                Ok(())
            })
            .unwrap();
            let inserted = batch[batch.len() - 1] + 1;
            for (i, m) in maps.iter().enumerate() {
                for k in 0..KEYS {
                    let got = h.read(|tx| m.get(tx, &(3 * k))).unwrap();
                    let want = (k < inserted).then_some([k, !k]);
                    assert_eq!(got, want, "{name}: map {i} key {} of {inserted}", 3 * k);
                    let absent = h.read(|tx| m.get(tx, &(3 * k + 1))).unwrap();
                    assert_eq!(absent, None, "{name}: map {i} key {}", 3 * k + 1);
                }
            }
        }
    }
}
