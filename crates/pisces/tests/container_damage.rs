//! Containers on a damaged pool: a chain or leaf list that loops is `Error::Corrupt`,
//! never a hang; `HashMap::check`; `check_pool_deep`; the entry iterators.

mod common;

use pisces::tools::check::{check_pool, check_pool_deep, Verdict};
use pisces::tools::containers::LEAF_TAG;
use pisces::{
    BTreeMap, Config, EngineOptions, Error, HashMap, MediumKind, PPtr, Pod, Pool, Zeroable,
};
use std::sync::mpsc;
use std::time::Duration;

/// Run `f` on another thread; panic if it does not finish within 10 s (a hang).
fn no_hang<R: Send + 'static>(what: &str, f: impl FnOnce() -> R + Send + 'static) -> R {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(Duration::from_secs(10))
        .unwrap_or_else(|_| panic!("{what}: hung (no result after 10 s)"))
}

fn corrupt<T: std::fmt::Debug>(r: pisces::Result<T>, what: &str) {
    match r {
        Err(Error::Corrupt(m)) => {
            assert!(m.contains("cycle") || m.contains("twice"), "{what}: {m}")
        }
        other => panic!("{what}: expected Corrupt, got {other:?}"),
    }
}

/// Word `i` of the object at `off`, through the transaction API.
fn word(pool: &Pool, off: u64, i: usize) -> u64 {
    pool.run(|tx| Ok(tx.read(PPtr::<[u64; 2]>::from_offset(off))?[i]))
        .unwrap()
}

fn set_word(pool: &Pool, off: u64, i: usize, v: u64) {
    pool.run(|tx| {
        tx.write(PPtr::<[u64; 2]>::from_offset(off))?[i] = v;
        Ok(())
    })
    .unwrap();
}

/// A one-bucket map of `n` keys whose last node links back to the first.
fn looping_map(pool: &Pool, n: u64) -> HashMap<u64, u64> {
    let m = pool
        .run(|tx| {
            let m = HashMap::<u64, u64>::fixed(tx, 1)?;
            for k in 0..n {
                m.insert(tx, k, k)?;
            }
            Ok(m)
        })
        .unwrap();
    let mut objs = Vec::new();
    pool.run(|tx| {
        objs.clear();
        m.for_each_object(tx, |o| objs.push(o))
    })
    .unwrap();
    // header, chunk, then the chain in order (then the element count's objects).
    let (first, last) = (objs[2], objs[1 + n as usize]);
    assert_eq!(word(pool, last, 0), 0);
    set_word(pool, last, 0, first);
    m
}

#[test]
fn a_looping_hash_chain_is_corrupt_not_a_hang() {
    for (engine, opts) in common::all_engines() {
        let pool = common::mem_pool_on(engine, 16 << 20, 2, opts.clone());
        let m = looping_map(&pool, 5);
        let p = pool.clone();
        no_hang("hash map walks", move || {
            corrupt(p.run(|tx| m.for_each(tx, |_, _| true)), "for_each");
            // `len` sums the element count: it reads no chain.
            assert_eq!(p.run(|tx| m.len(tx)).unwrap(), 5);
            corrupt(p.run(|tx| m.get(tx, &99)), "get of a missing key");
            corrupt(p.run(|tx| m.insert(tx, 99, 1)), "insert");
            corrupt(p.run(|tx| m.remove(tx, &99)), "remove");
            corrupt(
                p.run(|tx| m.iter(tx).try_for_each(|e| e.map(|_| ()))),
                "iter",
            );
            corrupt(p.run(|tx| m.check(tx)), "check");
            corrupt(p.run(|tx| m.for_each_object(tx, |_| ())), "for_each_object");
        });
        // Keys before the loop closes are still found.
        assert_eq!(pool.run(|tx| m.get(tx, &3)).unwrap(), Some(3), "{engine:?}");
    }
}

#[test]
fn a_looping_leaf_chain_is_corrupt_not_a_hang() {
    for (engine, opts) in common::all_engines() {
        let pool = common::mem_pool_on(engine, 16 << 20, 2, opts.clone());
        let t = pool
            .run(|tx| {
                let t = BTreeMap::<u64, u64>::new(tx)?;
                for k in 0..200 {
                    t.insert(tx, k, k)?;
                }
                Ok(t)
            })
            .unwrap();
        let mut objs = Vec::new();
        pool.run(|tx| {
            objs.clear();
            t.for_each_object(tx, |o| objs.push(o))
        })
        .unwrap();
        let leaves: Vec<u64> = objs
            .into_iter()
            .skip(1)
            .filter(|&o| word(&pool, o, 0) >> 32 == LEAF_TAG)
            .collect();
        assert!(leaves.len() > 3);
        // The last leaf of the chain links back to the first.
        let mut first = leaves[0];
        for &l in &leaves {
            if !leaves.iter().any(|&o| word(&pool, o, 1) == l) {
                first = l;
            }
        }
        let last = *leaves.iter().find(|&&l| word(&pool, l, 1) == 0).unwrap();
        set_word(&pool, last, 1, first);
        let p = pool.clone();
        no_hang("B+-tree walks", move || {
            corrupt(p.run(|tx| t.for_each(tx, |_, _| true)), "for_each");
            // `len` sums the element count: it reads no leaf.
            assert_eq!(p.run(|tx| t.len(tx)).unwrap(), 200);
            corrupt(p.run(|tx| t.for_each_in(tx, 5.., |_, _| true)), "range");
            corrupt(
                p.run(|tx| t.iter(tx).try_for_each(|e| e.map(|_| ()))),
                "iter",
            );
            match p.run(|tx| t.check(tx)) {
                Err(Error::Corrupt(_)) => {}
                r => panic!("check: expected Corrupt, got {r:?}"),
            }
        });
    }
}

#[test]
fn hash_map_check_reports_shape_and_misplaced_keys() {
    let pool = common::mem_pool(16 << 20, 2, EngineOptions::default());
    let m = pool
        .run(|tx| {
            let m = HashMap::<u64, u64>::fixed(tx, 64)?;
            for k in 0..500 {
                m.insert(tx, k, k)?;
            }
            Ok(m)
        })
        .unwrap();
    let st = pool.run(|tx| m.check(tx)).unwrap();
    assert_eq!((st.buckets, st.entries), (64, 500));
    assert!(st.used_buckets <= 64 && st.longest_chain >= 500 / 64);
    // A key changed in place (bypassing the map) is in the wrong bucket.
    let mut objs = Vec::new();
    pool.run(|tx| {
        objs.clear();
        m.for_each_object(tx, |o| objs.push(o))
    })
    .unwrap();
    // The header, two chunks and 500 nodes, then the element count's objects: the
    // last node listed.
    let node = objs[2 + 500];
    let k = word(&pool, node, 1);
    set_word(&pool, node, 1, k ^ 0x5555_0000);
    match pool.run(|tx| m.check(tx)) {
        Err(Error::Corrupt(msg)) => assert!(msg.contains("hashes to another bucket"), "{msg}"),
        r => panic!("expected Corrupt, got {r:?}"),
    }
}

#[test]
fn iterators_match_the_callbacks() {
    for (engine, opts) in common::all_engines() {
        let pool = common::mem_pool_on(engine, 16 << 20, 2, opts.clone());
        let (m, t) = pool
            .run(|tx| {
                let m = HashMap::<u64, [u64; 2]>::fixed(tx, 16)?;
                let t = BTreeMap::<u64, u64, 5>::new(tx)?;
                Ok((m, t))
            })
            .unwrap();
        let mut model = std::collections::BTreeMap::new();
        for k in (0..300u64).map(|i| (i * 7919) % 1000) {
            pool.run(|tx| {
                m.insert(tx, k, [k, k + 1])?;
                t.insert(tx, k, k * 3)?;
                Ok(())
            })
            .unwrap();
            model.insert(k, k * 3);
        }
        pool.run(|tx| {
            for k in (0..1000).step_by(3) {
                m.remove(tx, &k)?;
                t.remove(tx, &k)?;
            }
            Ok(())
        })
        .unwrap();
        model.retain(|k, _| k % 3 != 0);
        pool.run(|tx| {
            // Hash map: same entries as for_each, in the same order.
            let mut cb = Vec::new();
            m.for_each(tx, |k, v| {
                cb.push((*k, *v));
                true
            })?;
            let it: Vec<(u64, [u64; 2])> = m
                .iter(tx)
                .map(|e| e.map(|(k, v)| (*k, *v)))
                .collect::<pisces::Result<_>>()?;
            assert_eq!(it, cb, "{engine:?}");
            assert_eq!(it.len(), model.len());
            // Inside a transaction, after its own writes.
            m.insert(tx, 5000, [1, 2])?;
            assert_eq!(m.iter(tx).count(), model.len() + 1);
            // B+-tree: key order, and every kind of range.
            let all: Vec<(u64, u64)> = t
                .iter(tx)
                .map(|e| e.map(|(k, v)| (*k, *v)))
                .collect::<pisces::Result<_>>()?;
            assert_eq!(all, model.iter().map(|(k, v)| (*k, *v)).collect::<Vec<_>>());
            use std::ops::Bound::*;
            let ranges = [
                (Unbounded, Unbounded),
                (Included(100), Excluded(400)),
                (Excluded(100), Included(400)),
                (Included(999), Unbounded),
                (Unbounded, Excluded(0)),
                (Included(500), Included(500)),
                (Excluded(998), Unbounded),
            ];
            for r in ranges {
                let got: Vec<u64> = t
                    .range(tx, r)
                    .map(|e| e.map(|(k, _)| *k))
                    .collect::<pisces::Result<_>>()?;
                let want: Vec<u64> = model.range(r).map(|(k, _)| *k).collect();
                assert_eq!(got, want, "{engine:?} {r:?}");
            }
            // Stopping early and resuming is just the iterator protocol.
            let mut it = t.range(tx, 200..);
            let a = it.next().unwrap()?;
            let b = it.next().unwrap()?;
            assert!(a.0 < b.0 && *a.0 >= 200);
            Ok(())
        })
        .unwrap();
    }
}

#[derive(Clone, Copy, Pod, Zeroable)]
#[repr(C)]
struct Root {
    count: u64,
    map: HashMap<u64, u64>,
    tree: BTreeMap<u64, u64>,
    other: PPtr<u64>,
}

#[test]
fn deep_check_walks_the_containers_of_the_root() {
    let d = tempfile::tempdir_in("/dev/shm").unwrap();
    let p = d.path().join("deep.pool");
    let cfg = Config::default().size(16 << 20);
    let (map, _) = {
        let pool = Pool::create(&p, cfg.clone()).unwrap();
        let root: PPtr<Root> = pool.root().unwrap();
        pool.run(|tx| {
            let map = HashMap::fixed(tx, 8)?;
            let tree = BTreeMap::new(tx)?;
            for k in 0..100 {
                map.insert(tx, k, k)?;
                tree.insert(tx, k, k)?;
            }
            let other = tx.alloc(7u64)?;
            *tx.write(root)? = Root {
                count: 3,
                map,
                tree,
                other,
            };
            Ok(())
        })
        .unwrap();
        let r = pool.run(|tx| Ok(*tx.read(root)?)).unwrap();
        (r.map, r.tree)
    };
    let ok = check_pool_deep(&p, MediumKind::DRAM).unwrap();
    assert!(ok.is_ok(), "{ok}");
    let cs = ok.containers.clone().unwrap();
    assert_eq!(cs.len(), 2, "{cs:?}");
    assert!(
        cs[0].contains("hash map") && cs[0].contains("100 entries"),
        "{cs:?}"
    );
    assert!(
        cs[1].contains("B+-tree") && cs[1].contains("100 entries"),
        "{cs:?}"
    );
    // Damage one chain pointer so that a chain loops: plain check passes (it does not
    // walk containers), the deep check names the map.
    {
        let pool = Pool::open(&p, cfg.clone()).unwrap();
        let mut objs = Vec::new();
        pool.run(|tx| {
            objs.clear();
            map.for_each_object(tx, |o| objs.push(o))
        })
        .unwrap();
        // A node whose successor exists: point the successor back at it.
        let nodes = &objs[2..];
        let (a, b) = nodes
            .windows(2)
            .map(|w| (w[0], w[1]))
            .find(|&(a, b)| word(&pool, a, 0) == b)
            .expect("a chain of two");
        set_word(&pool, b, 0, a);
    }
    assert!(check_pool(&p, MediumKind::DRAM).unwrap().is_ok());
    let bad = no_hang("deep check", {
        let p = p.clone();
        move || check_pool_deep(&p, MediumKind::DRAM).unwrap()
    });
    assert!(!bad.is_ok());
    let text = bad.to_string();
    assert!(
        text.contains("hash map") && text.contains("reached twice"),
        "{text}"
    );
}

/// The deep check understands a grown map (linear-hashing addressing, chunk counts)
/// and reports a chunk count that disagrees with its chains.
#[test]
fn deep_check_understands_a_grown_map() {
    let d = tempfile::tempdir_in("/dev/shm").unwrap();
    let p = d.path().join("grown.pool");
    let cfg = Config::default().size(16 << 20);
    let map = {
        let pool = Pool::create(&p, cfg.clone()).unwrap();
        // Three-word entries: the chained layout (grouped maps have their own test).
        let root: PPtr<HashMap<u64, [u64; 2]>> = pool.root().unwrap();
        pool.run(|tx| {
            let map = HashMap::new(tx)?;
            for k in 0..2000 {
                map.insert(tx, k, [k; 2])?;
            }
            *tx.write(root)? = map;
            Ok(map)
        })
        .unwrap()
    };
    let ok = check_pool_deep(&p, MediumKind::DRAM).unwrap();
    assert!(ok.is_ok(), "{ok}");
    let cs = ok.containers.clone().unwrap();
    assert!(cs[0].contains("2000 entries"), "{cs:?}");
    {
        let pool = Pool::open(&p, cfg.clone()).unwrap();
        let chunk = pool
            .run(|tx| Ok(tx.read(PPtr::<[u64; 512]>::from_offset(map.offset()))?[8]))
            .unwrap();
        let c = PPtr::<[u64; 33]>::from_offset(chunk);
        pool.run(|tx| {
            tx.write(c)?[32] += 1;
            Ok(())
        })
        .unwrap();
    }
    let bad = check_pool_deep(&p, MediumKind::DRAM).unwrap();
    assert!(!bad.is_ok());
    assert!(bad.to_string().contains("counts"), "{bad}");
}

/// The deep check walks a map in the grouped layout, chains longer than one group
/// included, and reports a key copied into a second slot of its group.
#[test]
fn deep_check_understands_a_grouped_map() {
    let d = tempfile::tempdir_in("/dev/shm").unwrap();
    let p = d.path().join("grouped.pool");
    let cfg = Config::default().size(16 << 20);
    // Keys sharing their hash's low 16 bits share one chain: 20 of them need 3 groups.
    let low = |k: u64| pisces::stable_hash(&k.to_le_bytes()) & 0xffff;
    let chain: Vec<u64> = (0u64..).filter(|&k| low(k) == low(0)).take(20).collect();
    let first_group = {
        let pool = Pool::create(&p, cfg.clone()).unwrap();
        let root: PPtr<HashMap<u64, u64>> = pool.root().unwrap();
        pool.run(|tx| {
            let m = HashMap::new(tx)?;
            for k in chain.iter().copied().chain(1000..1100) {
                m.insert(tx, k, k)?;
            }
            *tx.write(root)? = m;
            // The first object after the header: group 0.
            let mut objects = Vec::new();
            m.for_each_object(tx, |o| objects.push(o))?;
            Ok(PPtr::<[u64; 16]>::from_offset(objects[1]))
        })
        .unwrap()
    };
    let ok = check_pool_deep(&p, MediumKind::DRAM).unwrap();
    assert!(ok.is_ok(), "{ok}");
    let cs = ok.containers.clone().unwrap();
    assert!(cs[0].contains("120 entries in"), "{cs:?}");
    assert!(!cs[0].contains("(0 overflow groups"), "{cs:?}");
    {
        let pool = Pool::open(&p, cfg.clone()).unwrap();
        pool.run(|tx| {
            let g = tx.write(first_group)?;
            let full = (0..7).find(|i| (g[0] >> (8 * i)) & 0x80 != 0).unwrap();
            let free = (0..7).find(|i| (g[0] >> (8 * i)) & 0x80 == 0).unwrap();
            g[0] |= ((g[0] >> (8 * full)) & 0xff) << (8 * free);
            g[2 + 2 * free] = g[2 + 2 * full];
            Ok(())
        })
        .unwrap();
    }
    let bad = check_pool_deep(&p, MediumKind::DRAM).unwrap();
    assert!(!bad.is_ok());
    assert!(bad.to_string().contains("appears twice"), "{bad}");
}

/// A root word that points at a freed block (a dangling pointer, or a container whose
/// header block was lost) is a deep-check problem; counters in the root are not.
#[test]
fn deep_check_reports_a_root_word_pointing_at_a_free_block() {
    let d = tempfile::tempdir_in("/dev/shm").unwrap();
    let p = d.path().join("dangling.pool");
    let cfg = Config::default().size(16 << 20);
    {
        let pool = Pool::create(&p, cfg.clone()).unwrap();
        let root: PPtr<Root> = pool.root().unwrap();
        pool.run(|tx| {
            let map = HashMap::fixed(tx, 8)?;
            let tree = BTreeMap::new(tx)?;
            let other = tx.alloc(7u64)?;
            // A neighbour in the same slab, so the slab stays in use after the free.
            tx.alloc(8u64)?;
            *tx.write(root)? = Root {
                count: 12345,
                map,
                tree,
                other,
            };
            Ok(())
        })
        .unwrap();
    }
    let ok = check_pool_deep(&p, MediumKind::DRAM).unwrap();
    assert!(ok.is_ok(), "{ok}");
    {
        let pool = Pool::open(&p, cfg).unwrap();
        let root: PPtr<Root> = pool.root().unwrap();
        pool.run(|tx| {
            let other = tx.read(root)?.other;
            tx.free(other)
        })
        .unwrap();
    }
    let bad = check_pool_deep(&p, MediumKind::DRAM).unwrap();
    assert!(!bad.is_ok(), "{bad}");
    assert!(bad.to_string().contains("a free block"), "{bad}");
}

/// Reads and writes word `i` of the 256-byte node at `off`.
fn node_word(pool: &Pool, off: u64, i: usize) -> u64 {
    pool.run(|tx| Ok(tx.read(PPtr::<[u64; 32]>::from_offset(off))?[i]))
        .unwrap()
}
fn set_node_word(pool: &Pool, off: u64, i: usize, v: u64) {
    pool.run(|tx| {
        tx.write(PPtr::<[u64; 32]>::from_offset(off))?[i] = v;
        Ok(())
    })
    .unwrap();
}

/// `check --deep` verifies a B+-tree's key order as `BTreeMap::check` does: keys out of
/// order in a leaf, and a key outside its parent's separators, are problems.
/// A new pool at `p` whose root holds a `BTreeMap` of the keys 0..100 (and a small map
/// and object beside it); returns the tree.
fn pool_with_a_tree(p: &std::path::Path, cfg: &Config) -> BTreeMap<u64, u64> {
    let pool = Pool::create(p, cfg.clone()).unwrap();
    let root: PPtr<Root> = pool.root().unwrap();
    pool.run(|tx| {
        let map = HashMap::fixed(tx, 8)?;
        let tree = BTreeMap::new(tx)?;
        for k in 0..100 {
            tree.insert(tx, k, k)?;
        }
        let other = tx.alloc(7u64)?;
        *tx.write(root)? = Root {
            count: 1,
            map,
            tree,
            other,
        };
        Ok(tree)
    })
    .unwrap()
}

/// The first leaf of the leaf chain (no left neighbour) among `objs` with at least two keys.
fn first_leaf(pool: &Pool, objs: &[u64]) -> u64 {
    objs.iter()
        .copied()
        .find(|&o| {
            let w = word(pool, o, 0);
            w >> 32 == LEAF_TAG && (w & 0xffff_ffff) >= 2 && node_word(pool, o, 2) == 0
        })
        .expect("the first leaf")
}

#[test]
fn deep_check_verifies_btree_key_order() {
    let d = tempfile::tempdir_in("/dev/shm").unwrap();
    let cfg = Config::default().size(16 << 20);
    for (case, damage) in [("swapped", 0), ("outside its separators", 1)] {
        let p = d.path().join(format!("order{damage}.pool"));
        let tree = pool_with_a_tree(&p, &cfg);
        assert!(check_pool_deep(&p, MediumKind::DRAM).unwrap().is_ok());
        {
            let pool = Pool::open(&p, cfg.clone()).unwrap();
            let mut objs = Vec::new();
            pool.run(|tx| {
                objs.clear();
                tree.for_each_object(tx, |o| objs.push(o))
            })
            .unwrap();
            // The first leaf of the chain with at least two keys.
            let leaf = first_leaf(&pool, &objs);
            if damage == 0 {
                let (a, b) = (node_word(&pool, leaf, 2), node_word(&pool, leaf, 3));
                set_node_word(&pool, leaf, 2, b);
                set_node_word(&pool, leaf, 3, a);
            } else {
                // The leaf's last key becomes larger than every key: still ascending
                // in its leaf, but beyond the separator that bounds the leaf.
                let n = (node_word(&pool, leaf, 0) & 0xffff_ffff) as usize;
                set_node_word(&pool, leaf, 2 + n - 1, 1_000_000);
            }
            let typed = pool.run(|tx| tree.check(tx));
            assert!(matches!(typed, Err(Error::Corrupt(_))), "{case}: {typed:?}");
        }
        let bad = check_pool_deep(&p, MediumKind::DRAM).unwrap();
        assert!(!bad.is_ok(), "{case}: {bad}");
        let text = bad.to_string();
        assert!(
            text.contains("B+-tree")
                && (text.contains("not in order") || text.contains("outside the range")),
            "{case}: {text}"
        );
    }
}

/// A B+-tree whose header records no key order (made by a build from before headers
/// recorded it; the word is zero) cannot have its key order checked without the key
/// type: the deep check's verdict is "not checked", with keys in order and out of
/// order alike, never OK; the typed check still finds the damage.
#[test]
fn deep_check_of_a_tree_without_key_order_is_not_checked() {
    let d = tempfile::tempdir_in("/dev/shm").unwrap();
    let p = d.path().join("oldtree.pool");
    let cfg = Config::default().size(16 << 20);
    let tree = pool_with_a_tree(&p, &cfg);
    assert_eq!(
        check_pool_deep(&p, MediumKind::DRAM).unwrap().verdict(),
        Verdict::Ok
    );
    // The header as an older build wrote it: word 4 (the key order) zero.
    {
        let pool = Pool::open(&p, cfg.clone()).unwrap();
        pool.run(|tx| {
            tx.write(PPtr::<[u64; 5]>::from_offset(tree.offset()))?[4] = 0;
            Ok(())
        })
        .unwrap();
    }
    let r = check_pool_deep(&p, MediumKind::DRAM).unwrap();
    assert_eq!(r.verdict(), Verdict::NotChecked, "{r}");
    assert!(!r.is_ok(), "{r}");
    assert!(
        r.unchecked.len() == 1
            && r.unchecked[0].contains("B+-tree")
            && r.unchecked[0].contains("key order"),
        "{r}"
    );
    // (The verdict after the path: a temporary directory's random name may hold "OK".)
    let summary = r.summary_line();
    let verdict = summary
        .strip_prefix(&format!("{}: ", p.display()))
        .unwrap_or(&summary);
    assert!(
        verdict.starts_with("not checked") && !verdict.contains("OK"),
        "{summary}"
    );
    assert!(r.to_string().contains("not checked: root word"), "{r}");
    // Two keys of the first leaf swapped: still "not checked" (the walk cannot see
    // it), not OK; the typed check sees it.
    {
        let pool = Pool::open(&p, cfg).unwrap();
        let mut objs = Vec::new();
        pool.run(|tx| {
            objs.clear();
            tree.for_each_object(tx, |o| objs.push(o))
        })
        .unwrap();
        let leaf = first_leaf(&pool, &objs);
        let (a, b) = (node_word(&pool, leaf, 2), node_word(&pool, leaf, 3));
        set_node_word(&pool, leaf, 2, b);
        set_node_word(&pool, leaf, 3, a);
        assert!(matches!(
            pool.run(|tx| tree.check(tx)),
            Err(Error::Corrupt(_))
        ));
    }
    let r = check_pool_deep(&p, MediumKind::DRAM).unwrap();
    assert_eq!(r.verdict(), Verdict::NotChecked, "{r}");
}

/// Word `i` (< 8) of a map's header, and writing it behind the map's back.
fn header_word(pool: &Pool, map: &HashMap<u64, u64>, i: usize) -> u64 {
    pool.run(|tx| Ok(tx.read(PPtr::<[u64; 8]>::from_offset(map.offset()))?[i]))
        .unwrap()
}

fn set_header_word(pool: &Pool, map: &HashMap<u64, u64>, i: usize, v: u64) {
    pool.run(|tx| {
        tx.write(PPtr::<[u64; 8]>::from_offset(map.offset()))?[i] = v;
        Ok(())
    })
    .unwrap();
}

/// A growable map of keys `0..n`, each holding `k + 1`.
fn map_of(pool: &Pool, n: u64) -> HashMap<u64, u64> {
    pool.run(|tx| {
        let m = HashMap::<u64, u64>::new(tx)?;
        for k in 0..n {
            m.insert(tx, k, k + 1)?;
        }
        Ok(m)
    })
    .unwrap()
}

/// A lookup checks every word of a map's header it uses (magic, signature, layout,
/// bucket count, levels) and not the chunk count (word 4), which it never reads: with
/// the chunk count disagreeing with the bucket count (word 2), lookups still answer
/// right, and `check` and updates refuse the map as corrupt; with a bucket count that
/// the levels (word 3) do not fit, or levels that do not fit the bucket count, a lookup
/// is refused too.
#[test]
fn a_lookup_checks_the_header_words_it_uses() {
    let pool = common::mem_pool(16 << 20, 2, EngineOptions::default());
    let m = map_of(&pool, 200);
    let (buckets, levels, chunks) = (
        header_word(&pool, &m, 2),
        header_word(&pool, &m, 3),
        header_word(&pool, &m, 4),
    );
    assert_eq!((levels, chunks), (1, buckets), "a small grouped map");

    set_header_word(&pool, &m, 4, chunks + 1);
    for k in 0..200 {
        assert_eq!(pool.read(|tx| m.get(tx, &k)).unwrap(), Some(k + 1));
    }
    match pool.run(|tx| m.check(tx)) {
        Err(Error::Corrupt(msg)) => assert!(msg.contains("geometry"), "{msg}"),
        r => panic!("check: expected Corrupt, got {r:?}"),
    }
    match pool.run(|tx| m.insert(tx, 7, 0)) {
        Err(Error::Corrupt(msg)) => assert!(msg.contains("geometry"), "{msg}"),
        r => panic!("insert: expected Corrupt, got {r:?}"),
    }
    set_header_word(&pool, &m, 4, chunks);

    // More groups than one directory level holds, the levels word still saying one.
    set_header_word(&pool, &m, 2, 100_000);
    match pool.read(|tx| m.get(tx, &1)) {
        Err(Error::Corrupt(msg)) => assert!(msg.contains("geometry"), "{msg}"),
        r => panic!("get: expected Corrupt, got {r:?}"),
    }
    set_header_word(&pool, &m, 2, buckets);
    assert_eq!(pool.run(|tx| m.check(tx)).unwrap().entries, 200);

    // The lookup's test of a small grouped map (one level, `1 <= groups <= 504`) takes
    // no other header: no groups, or two levels for groups that fit the header, or a
    // levels word of neither value, are each refused at every key.
    for (word, bad) in [(2, 0), (3, 2), (3, 0), (3, 3)] {
        set_header_word(&pool, &m, word, bad);
        for k in 0..200 {
            match pool.read(|tx| m.get(tx, &k)) {
                Err(Error::Corrupt(msg)) => assert!(msg.contains("geometry"), "{msg}"),
                r => panic!("get {k}, header word {word} = {bad}: expected Corrupt, got {r:?}"),
            }
        }
        set_header_word(&pool, &m, word, if word == 2 { buckets } else { levels });
    }
    assert_eq!(pool.run(|tx| m.check(tx)).unwrap().entries, 200);

    // A map whose directory is in pages (more groups than the header holds), its
    // levels word damaged to say the directory is in the header: the header's entries
    // are then pages, which a lookup must not read as groups. Every lookup is refused,
    // none answers from a page's words.
    let big = map_of(&pool, 3000);
    assert_eq!(header_word(&pool, &big, 3), 2, "a directory in pages");
    set_header_word(&pool, &big, 3, 1);
    for k in 0..3000 {
        match pool.read(|tx| big.get(tx, &k)) {
            Err(Error::Corrupt(msg)) => assert!(msg.contains("geometry"), "{msg}"),
            r => panic!("get {k} with a damaged levels word: expected Corrupt, got {r:?}"),
        }
    }
    set_header_word(&pool, &big, 3, 2);
    assert_eq!(pool.run(|tx| big.check(tx)).unwrap().entries, 3000);

    // The lookup's test of a grouped map with pages (two levels, `504 < groups <=
    // 504 * 512`): a levels word of another value, or a group count that fits the
    // header or exceeds the pages, is refused at every key.
    let big_buckets = header_word(&pool, &big, 2);
    for (word, bad) in [(3, 3), (3, 0), (2, 504), (2, 504 * 512 + 1)] {
        set_header_word(&pool, &big, word, bad);
        for k in 0..3000 {
            match pool.read(|tx| big.get(tx, &k)) {
                Err(Error::Corrupt(msg)) => assert!(msg.contains("geometry"), "{msg}"),
                r => panic!("get {k}, header word {word} = {bad}: expected Corrupt, got {r:?}"),
            }
        }
        set_header_word(&pool, &big, word, if word == 2 { big_buckets } else { 2 });
    }
    assert_eq!(pool.run(|tx| big.check(tx)).unwrap().entries, 3000);
}

/// A null map handle is refused on every engine, by every kind of access, with the
/// error that names it (a lookup does not test the handle before its header read: it
/// finds out from the read's failure).
#[test]
fn a_null_map_handle_is_refused_on_every_engine() {
    let dir = tempfile::tempdir_in("/dev/shm").unwrap();
    for &e in pisces::EngineId::ALL {
        if !e.available() {
            continue;
        }
        let path = dir.path().join(format!("{e:?}.pool"));
        let pool = Pool::create(&path, pisces::Config::default().size(16 << 20).engine(e)).unwrap();
        let small = HashMap::<u64, u64>::null();
        let large = HashMap::<u64, [u64; 8]>::null();
        let refused = |r: pisces::Result<()>, what: &str| match r {
            Err(Error::InvalidPointer(msg)) => assert!(msg.contains("null"), "{e:?} {what}: {msg}"),
            r => panic!("{e:?} {what}: expected InvalidPointer, got {r:?}"),
        };
        refused(pool.read(|tx| small.get(tx, &1).map(drop)), "grouped get");
        refused(pool.read(|tx| large.get(tx, &1).map(drop)), "chained get");
        refused(
            pool.run(|tx| small.get(tx, &1).map(drop)),
            "get in an update",
        );
        refused(pool.run(|tx| small.insert(tx, 1, 2).map(drop)), "insert");
        refused(pool.run(|tx| small.len(tx).map(drop)), "len");
    }
}
