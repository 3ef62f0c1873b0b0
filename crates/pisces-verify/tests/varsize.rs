//! Variable-size values (`PBytes`, `PString`, `PVec`) and byte string keys through the
//! public API: model-based tests against std's `BTreeMap<String, Vec<u8>>`,
//! `HashMap<u64, String>` and `Vec<u64>` through random operations and user aborts on
//! every engine, each ending with a leak check (the objects allocated since the start
//! are exactly those the structure lists, its values' blocks included).
//!
//! Self-contained (no `common` module).

use pisces::medium::DramMedium;
use pisces::{
    BTreeMap, Config, EngineId, EngineOptions, Error, HashMap, PBytes, PString, PVec, Pool,
};
use proptest::prelude::*;
use std::collections::{BTreeMap as StdBTree, BTreeSet, HashMap as StdHash};
use std::ops::Bound;
use std::sync::Arc;

type Setup = (EngineId, EngineOptions);

fn setups() -> Vec<Setup> {
    pisces_verify::testkit::all_engines()
}

fn engines() -> usize {
    setups().len()
}

fn mem_pool((engine, opts): Setup) -> Pool {
    let size = 16u64 << 20;
    let m = DramMedium::anonymous(size as usize, 0, 0).unwrap();
    Pool::create_on(
        Arc::new(m),
        Config::default()
            .size(size)
            .engine(engine)
            .max_threads(1)
            .log_bytes_per_thread(1 << 20)
            .engine_options(opts),
    )
    .unwrap()
}

fn allocated(pool: &Pool) -> BTreeSet<u64> {
    pool.allocated_objects().unwrap().into_iter().collect()
}

/// The objects allocated since `base` are exactly `listed` (no leak, nothing freed
/// that is still listed), and nothing is listed twice.
fn no_leaks(pool: &Pool, base: &BTreeSet<u64>, listed: Vec<u64>) {
    let set: BTreeSet<u64> = listed.iter().copied().collect();
    assert_eq!(set.len(), listed.len(), "an object is listed twice");
    let now = allocated(pool);
    let new: BTreeSet<u64> = now.difference(base).copied().collect();
    assert_eq!(new, set, "allocated since the start vs listed");
}

// ------------------------------------------------------------- string-keyed tree

#[derive(Clone, Debug)]
enum TreeOp {
    /// `insert_str`, freeing the replaced value.
    Insert(String, Vec<u8>),
    /// `insert` of a key handle made by the caller (the tree frees it when the key is
    /// there already), the replaced value returned and freed by the caller.
    InsertHandle(String, Vec<u8>),
    Remove(String),
    Get(String),
    /// Replace the stored value's bytes in place through `PBytes::set` and `get_mut`.
    Set(String, Vec<u8>),
    Range(String, String, u8),
}

fn key() -> impl Strategy<Value = String> {
    // A small alphabet and short keys: many shared prefixes, empty keys, prefixes of
    // each other, and non-ASCII UTF-8.
    "[ab\u{e9}]{0,5}"
}

fn value() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(any::<u8>(), 0..40)
}

fn tree_op() -> impl Strategy<Value = TreeOp> {
    prop_oneof![
        4 => (key(), value()).prop_map(|(k, v)| TreeOp::Insert(k, v)),
        1 => (key(), value()).prop_map(|(k, v)| TreeOp::InsertHandle(k, v)),
        2 => key().prop_map(TreeOp::Remove),
        1 => key().prop_map(TreeOp::Get),
        1 => (key(), value()).prop_map(|(k, v)| TreeOp::Set(k, v)),
        1 => (key(), key(), 0..4u8).prop_map(|(a, b, m)| {
            let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
            TreeOp::Range(lo, hi, m)
        }),
    ]
}

fn batches<O: std::fmt::Debug>(
    op: impl Strategy<Value = O>,
    ops: usize,
) -> impl Strategy<Value = Vec<(Vec<O>, bool)>> {
    prop::collection::vec(
        (
            prop::collection::vec(op, 1..ops),
            prop::bool::weighted(0.15),
        ),
        1..20,
    )
}

fn str_bounds<'a>(lo: &'a str, hi: &'a str, mode: u8) -> (Bound<&'a str>, Bound<&'a str>) {
    match mode {
        0 => (Bound::Included(lo), Bound::Excluded(hi)),
        1 => (Bound::Included(lo), Bound::Included(hi)),
        2 => (Bound::Excluded(lo), Bound::Unbounded),
        _ => (Bound::Unbounded, Bound::Included(hi)),
    }
}

type Tree = BTreeMap<PString, PBytes, 4>;

fn tree_entries(tx: &pisces::Tx<'_>, t: Tree) -> pisces::Result<Vec<(String, Vec<u8>)>> {
    let mut v = Vec::new();
    for e in t.iter(tx) {
        let (k, val) = e?;
        v.push((k.to_string(tx)?, val.to_vec(tx)?));
    }
    Ok(v)
}

fn run_string_tree(batches: &[(Vec<TreeOp>, bool)], setup: Setup) {
    let pool = mem_pool(setup);
    let base = allocated(&pool);
    let t = pool.run(|tx| Tree::new(tx)).unwrap();
    let mut model: StdBTree<String, Vec<u8>> = StdBTree::new();
    for (ops, abort) in batches {
        let r = pool.run(|tx| {
            let mut md = model.clone();
            for o in ops {
                match o {
                    TreeOp::Insert(k, v) => {
                        let h = PBytes::new(tx, v)?;
                        let old = t.insert_str(tx, k, h)?;
                        assert_eq!(old.is_some(), md.insert(k.clone(), v.clone()).is_some());
                        if let Some(old) = old {
                            old.free(tx)?;
                        }
                    }
                    TreeOp::InsertHandle(k, v) => {
                        let (kh, vh) = (PString::new(tx, k)?, PBytes::new(tx, v)?);
                        let old = md.insert(k.clone(), v.clone());
                        let replaced = t.insert_and_free(tx, kh, vh)?;
                        assert_eq!(replaced, old.is_some());
                    }
                    TreeOp::Remove(k) => {
                        assert_eq!(t.remove_and_free(tx, k.as_str())?, md.remove(k).is_some());
                    }
                    TreeOp::Get(k) => {
                        let got = match t.get(tx, k.as_str())? {
                            Some(h) => Some(h.to_vec(tx)?),
                            None => None,
                        };
                        assert_eq!(got.as_ref(), md.get(k));
                        assert_eq!(t.contains_key(tx, k.as_str())?, md.contains_key(k));
                    }
                    TreeOp::Set(k, v) => {
                        if let Some(mut h) = t.get(tx, k.as_str())? {
                            h.set(tx, v)?;
                            *t.get_mut(tx, k.as_str())?.unwrap() = h;
                            md.insert(k.clone(), v.clone());
                        } else {
                            assert!(!md.contains_key(k));
                        }
                    }
                    TreeOp::Range(lo, hi, mode) => {
                        let b = str_bounds(lo, hi, *mode);
                        let mut got = Vec::new();
                        let mut err = Ok(());
                        t.for_each_in(tx, b, |k, v| {
                            match (k.to_string(tx), v.to_vec(tx)) {
                                (Ok(k), Ok(v)) => got.push((k, v)),
                                (Err(e), _) | (_, Err(e)) => err = Err(e),
                            }
                            err.is_ok()
                        })?;
                        err?;
                        let want: Vec<(String, Vec<u8>)> = md
                            .range::<str, _>(b)
                            .map(|(k, v)| (k.clone(), v.clone()))
                            .collect();
                        assert_eq!(got, want, "{b:?}");
                        let mut back = Vec::new();
                        for e in t.range(tx, b).rev() {
                            let (k, v) = e?;
                            back.push((k.to_string(tx)?, v.to_vec(tx)?));
                        }
                        back.reverse();
                        assert_eq!(back, want, "{b:?} backward");
                        let first = t
                            .range(tx, b)
                            .next()
                            .transpose()?
                            .map(|(k, _)| k.to_string(tx))
                            .transpose()?;
                        assert_eq!(first.as_ref(), want.first().map(|e| &e.0), "{b:?}");
                        let last = t
                            .range(tx, b)
                            .next_back()
                            .transpose()?
                            .map(|(k, _)| k.to_string(tx))
                            .transpose()?;
                        assert_eq!(last.as_ref(), want.last().map(|e| &e.0), "{b:?}");
                    }
                }
            }
            assert_eq!(t.check(tx)?.entries, md.len());
            assert_eq!(t.len(tx)?, md.len());
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
    let got = pool.run(|tx| tree_entries(tx, t)).unwrap();
    assert_eq!(got, model.clone().into_iter().collect::<Vec<_>>());
    // Nodes, keys, separators and values: everything allocated, nothing more.
    let mut listed = Vec::new();
    pool.run(|tx| {
        listed.clear();
        t.for_each_object_with_values(tx, |o| listed.push(o))
    })
    .unwrap();
    no_leaks(&pool, &base, listed);
    pool.run(|tx| t.destroy_with_values(tx)).unwrap();
    no_leaks(&pool, &base, Vec::new());
}

// ------------------------------------------------------------- string-valued hash map

#[derive(Clone, Debug)]
enum MapOp {
    Insert(u64, String),
    Remove(u64),
    Get(u64),
}

fn map_op() -> impl Strategy<Value = MapOp> {
    prop_oneof![
        3 => (0..24u64, ".{0,20}").prop_map(|(k, v)| MapOp::Insert(k, v)),
        2 => (0..24u64).prop_map(MapOp::Remove),
        1 => (0..24u64).prop_map(MapOp::Get),
    ]
}

fn run_string_map(batches: &[(Vec<MapOp>, bool)], setup: Setup) {
    let pool = mem_pool(setup);
    let base = allocated(&pool);
    let m = pool.run(|tx| HashMap::<u64, PString>::new(tx)).unwrap();
    let mut model: StdHash<u64, String> = StdHash::new();
    for (ops, abort) in batches {
        let r = pool.run(|tx| {
            let mut md = model.clone();
            for o in ops {
                match o {
                    MapOp::Insert(k, v) => {
                        let h = PString::new(tx, v)?;
                        assert_eq!(
                            m.insert_and_free(tx, *k, h)?,
                            md.insert(*k, v.clone()).is_some()
                        );
                    }
                    MapOp::Remove(k) => {
                        assert_eq!(m.remove_and_free(tx, k)?, md.remove(k).is_some());
                    }
                    MapOp::Get(k) => {
                        let got = m.get(tx, k)?.map(|s| s.to_string(tx)).transpose()?;
                        assert_eq!(got.as_ref(), md.get(k));
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
    let mut listed = Vec::new();
    pool.run(|tx| {
        listed.clear();
        m.for_each_object_with_values(tx, |o| listed.push(o))
    })
    .unwrap();
    no_leaks(&pool, &base, listed);
    pool.run(|tx| m.destroy_with_values(tx)).unwrap();
    no_leaks(&pool, &base, Vec::new());
}

// ------------------------------------------------------------- vector

#[derive(Clone, Debug)]
enum VecOp {
    Push(u64),
    Pop,
    Set(usize, u64),
    Get(usize),
    Truncate(usize),
    Extend(Vec<u64>),
    Clear,
    Reserve(usize),
}

fn vec_op() -> impl Strategy<Value = VecOp> {
    prop_oneof![
        5 => any::<u64>().prop_map(VecOp::Push),
        2 => Just(VecOp::Pop),
        2 => (0..40usize, any::<u64>()).prop_map(|(i, v)| VecOp::Set(i, v)),
        2 => (0..40usize).prop_map(VecOp::Get),
        1 => (0..40usize).prop_map(VecOp::Truncate),
        2 => prop::collection::vec(any::<u64>(), 0..20).prop_map(VecOp::Extend),
        1 => Just(VecOp::Clear),
        1 => (0..50usize).prop_map(VecOp::Reserve),
    ]
}

fn run_vec(batches: &[(Vec<VecOp>, bool)], setup: Setup, initial: usize) {
    let pool = mem_pool(setup);
    let base = allocated(&pool);
    let v = pool
        .run(|tx| PVec::<u64>::with_capacity(tx, initial))
        .unwrap();
    let mut model: Vec<u64> = Vec::new();
    for (ops, abort) in batches {
        let r = pool.run(|tx| {
            let mut md = model.clone();
            for o in ops {
                match o {
                    VecOp::Push(x) => {
                        v.push(tx, *x)?;
                        md.push(*x);
                    }
                    VecOp::Pop => assert_eq!(v.pop(tx)?, md.pop()),
                    VecOp::Set(i, x) => match v.set(tx, *i, *x) {
                        Ok(old) => assert_eq!(old, std::mem::replace(&mut md[*i], *x)),
                        Err(Error::InvalidArgument(_)) => assert!(*i >= md.len()),
                        Err(e) => return Err(e),
                    },
                    VecOp::Get(i) => assert_eq!(v.get(tx, *i)?, md.get(*i).copied()),
                    VecOp::Truncate(n) => {
                        v.truncate(tx, *n)?;
                        md.truncate(*n);
                    }
                    VecOp::Extend(xs) => {
                        v.extend_from_slice(tx, xs)?;
                        md.extend_from_slice(xs);
                    }
                    VecOp::Clear => {
                        v.clear(tx)?;
                        md.clear();
                    }
                    VecOp::Reserve(n) => {
                        v.reserve(tx, *n)?;
                        assert!(v.capacity(tx)? >= md.len() + n);
                    }
                }
                assert_eq!(v.len(tx)?, md.len());
                assert!(v.capacity(tx)? >= md.len());
            }
            assert_eq!(v.as_slice(tx)?, &md[..]);
            assert_eq!(v.iter(tx)?.copied().collect::<Vec<_>>(), md);
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
    assert_eq!(pool.run(|tx| v.to_vec(tx)).unwrap(), model);
    let mut listed = Vec::new();
    pool.run(|tx| {
        listed.clear();
        v.for_each_object(tx, |o| listed.push(o))
    })
    .unwrap();
    no_leaks(&pool, &base, listed);
    pool.run(|tx| v.destroy(tx)).unwrap();
    no_leaks(&pool, &base, Vec::new());
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn string_keyed_tree_matches_std(b in batches(tree_op(), 16), e in 0..engines()) {
        run_string_tree(&b, setups()[e].clone());
    }

    #[test]
    fn string_valued_hash_map_matches_std(b in batches(map_op(), 12), e in 0..engines()) {
        run_string_map(&b, setups()[e].clone());
    }

    #[test]
    fn vector_matches_std(b in batches(vec_op(), 12), e in 0..engines(), initial in 0..6usize) {
        run_vec(&b, setups()[e].clone(), initial);
    }
}

/// Many keys of one long shared prefix: splits at every level copy separators, and
/// removing every key frees keys whose copies stay as separators.
#[test]
fn long_keys_split_and_drain_without_leaks() {
    let pool = mem_pool(setups()[0].clone());
    let base = allocated(&pool);
    let t = pool.run(|tx| BTreeMap::<PBytes, u64, 3>::new(tx)).unwrap();
    let key = |i: u64| {
        let mut k = vec![b'k'; 300];
        k.extend_from_slice(format!("{:05}", (i * 7919) % 500).as_bytes());
        k
    };
    pool.run(|tx| {
        for i in 0..500 {
            assert_eq!(t.insert_bytes(tx, &key(i), i)?, None);
        }
        let st = t.check(tx)?;
        assert!(st.height >= 4, "{st:?}");
        assert_eq!(st.entries, 500);
        Ok(())
    })
    .unwrap();
    pool.run(|tx| {
        for i in (0..500).step_by(2) {
            assert_eq!(t.remove(tx, &key(i))?, Some(i));
        }
        Ok(())
    })
    .unwrap();
    let mut listed = Vec::new();
    pool.run(|tx| {
        assert_eq!(t.len(tx)?, 250);
        for i in 0..500 {
            assert_eq!(t.get(tx, &key(i))?, (i % 2 == 1).then_some(i));
        }
        listed.clear();
        t.for_each_object(tx, |o| listed.push(o))
    })
    .unwrap();
    no_leaks(&pool, &base, listed);
    pool.run(|tx| t.destroy(tx)).unwrap();
    no_leaks(&pool, &base, Vec::new());
}

/// A string changed in place by one transaction and freed by a concurrent one: they
/// conflict (a free conflicts with a write of the block), so the change never lands
/// in a block freed by a transaction that committed while the change was pending. On
/// every engine: if the free commits while the change is still uncommitted, the
/// change must not commit. (An engine whose locks wait lets the free wait for the change's commit
/// instead: then the two are serial, which is fine.)
#[test]
fn an_in_place_change_and_a_free_of_one_string_conflict() {
    use pisces::TxOptions;
    use std::sync::{mpsc, Barrier};
    use std::time::Duration;
    for setup in setups() {
        let name = format!("{} {:?}", setup.0, setup.1);
        let pool = {
            let size = 16u64 << 20;
            let m = DramMedium::anonymous(size as usize, 0, 0).unwrap();
            Pool::create_on(
                Arc::new(m),
                Config::default()
                    .size(size)
                    .engine(setup.0)
                    .max_threads(2)
                    .engine_options(setup.1.clone()),
            )
            .unwrap()
        };
        let s = pool.run(|tx| PString::new(tx, "sixteen bytes!!!")).unwrap();
        let written = Barrier::new(2);
        let (freed_tx, freed_rx) = mpsc::channel();
        let (change, free_first) = std::thread::scope(|sc| {
            let (pool, written, name) = (&pool, &written, &name);
            let a = sc.spawn(move || {
                let mut h = pool.handle().unwrap();
                let mut t = h.begin(TxOptions::default()).unwrap();
                let w = t.with_tx(|tx| {
                    let mut w = s;
                    w.set(tx, "SIXTEEN BYTES!!!")?;
                    Ok::<_, Error>(w)
                });
                written.wait();
                // The free's outcome, if it ended while this change was pending.
                let free_first = freed_rx.recv_timeout(Duration::from_millis(500)).ok();
                let committed = match w {
                    Ok(w) => {
                        assert_eq!(w, s, "{name}: a change of the same length is in place");
                        t.commit().is_ok()
                    }
                    Err(_) => false,
                };
                (committed, free_first)
            });
            sc.spawn(move || {
                written.wait();
                let mut h = pool.handle().unwrap();
                let r = h.begin(TxOptions::default()).and_then(|mut t| {
                    t.with_tx(|tx| s.free(tx))?;
                    t.commit()
                });
                let _ = freed_tx.send(r.is_ok());
            });
            a.join().unwrap()
        });
        assert!(
            !(change && free_first == Some(true)),
            "{name}: the free committed while the change was pending, and the change committed too"
        );
    }
}
