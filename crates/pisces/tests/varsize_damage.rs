//! Variable-size values on a damaged pool: a byte string's length word that lost its
//! tag or says more than its block holds, a string that is not UTF-8, a vector header
//! whose length passes its capacity or whose capacity passes its buffer, a damaged key
//! of a string-keyed tree: each is `Error::Corrupt` (or an invalid pointer), never a
//! panic; and `check --deep` walks the blocks these values own and reports the damage.

use pisces::tools::check::{check_pool, check_pool_deep};
use pisces::{
    BTreeMap, Config, Error, HashMap, MediumKind, PBytes, PPtr, PString, PVec, Pod, Pool, Zeroable,
};

fn pool(dir: &tempfile::TempDir, name: &str) -> (Pool, std::path::PathBuf) {
    let p = dir.path().join(name);
    (
        Pool::create(&p, Config::default().size(16 << 20)).unwrap(),
        p,
    )
}

/// Overwrite word `i` of the object at `off`, through the transaction API.
fn set_word(pool: &Pool, off: u64, i: usize, v: u64) {
    pool.run(|tx| {
        let w = tx.write_bytes(PPtr::from_offset(off), 8 * (i + 1))?;
        w[8 * i..].copy_from_slice(&v.to_le_bytes());
        Ok(())
    })
    .unwrap();
}

/// Word `i` of the object at `off`.
fn word(pool: &Pool, off: u64, i: usize) -> u64 {
    pool.run(|tx| {
        let w = tx.read_bytes(PPtr::from_offset(off), 8 * (i + 1))?;
        Ok(u64::from_le_bytes(w[8 * i..].try_into().unwrap()))
    })
    .unwrap()
}

/// Open the closed pool at `p`, run `f` on it, close it (for the offline check).
fn reopen<R>(p: &std::path::Path, f: impl FnOnce(&Pool) -> R) -> R {
    let pool = Pool::open(p, Config::default().size(16 << 20)).unwrap();
    f(&pool)
}

#[track_caller]
fn corrupt<T: std::fmt::Debug>(r: pisces::Result<T>, needle: &str) {
    match r {
        Err(Error::Corrupt(m)) => assert!(m.contains(needle), "{m}"),
        other => panic!("expected Corrupt ({needle}), got {other:?}"),
    }
}

#[test]
fn a_damaged_length_word_is_an_error() {
    let d = tempfile::tempdir().unwrap();
    let (pool, _) = pool(&d, "len.pool");
    let s = pool.run(|tx| PString::new(tx, "hello, world")).unwrap();
    let good = word(&pool, s.offset(), 0);
    assert_eq!(good & 0xffff_ffff_ffff, 12);
    // The tag gone.
    set_word(&pool, s.offset(), 0, 12);
    corrupt(pool.run(|tx| s.to_string(tx)), "length word");
    corrupt(pool.run(|tx| s.len(tx)), "length word");
    // A length of 0 in a block (the empty string has none).
    set_word(&pool, s.offset(), 0, good & !0xffff_ffff_ffff);
    corrupt(
        pool.run(|tx| s.as_bytes(tx).map(|b| b.len())),
        "length word",
    );
    // Longer than the block, and the longest a length word holds.
    for len in [100, 1 << 20, (1 << 48) - 1] {
        set_word(&pool, s.offset(), 0, (good & !0xffff_ffff_ffff) | len);
        corrupt(pool.run(|tx| s.to_string(tx)), "more than its block holds");
    }
    set_word(&pool, s.offset(), 0, good);
    assert_eq!(pool.run(|tx| s.to_string(tx)).unwrap(), "hello, world");
    // A handle that is no object at all.
    let stray = PBytes::from_offset(s.offset() + 3);
    assert!(pool.run(|tx| stray.to_vec(tx)).is_err());
}

#[test]
fn a_string_that_is_not_utf8_is_an_error() {
    let d = tempfile::tempdir().unwrap();
    let (pool, _) = pool(&d, "utf8.pool");
    let s = pool.run(|tx| PString::new(tx, "abcdefgh")).unwrap();
    // Bytes 8.. of the block are the string's: make them "\xff\xfe..".
    set_word(&pool, s.offset(), 1, u64::from_le_bytes(*b"\xff\xfecdefgh"));
    corrupt(pool.run(|tx| s.to_string(tx)), "not UTF-8");
    corrupt(pool.run(|tx| s.get(tx).map(|x| x.len())), "not UTF-8");
    // The bytes are still readable as bytes.
    assert_eq!(
        pool.run(|tx| Ok(s.as_bytes(tx)?.to_vec())).unwrap(),
        b"\xff\xfecdefgh"
    );
}

#[test]
fn a_damaged_vector_header_is_an_error() {
    let d = tempfile::tempdir().unwrap();
    let (pool, _) = pool(&d, "vec.pool");
    let v = pool
        .run(|tx| {
            let v = PVec::<u64>::new(tx)?;
            v.extend_from_slice(tx, &[1, 2, 3, 4, 5])?;
            Ok(v)
        })
        .unwrap();
    let cap = word(&pool, v.offset(), 2);
    assert!(cap >= 5);
    // Length above the capacity.
    set_word(&pool, v.offset(), 1, cap + 1);
    corrupt(pool.run(|tx| v.len(tx)), "length");
    corrupt(pool.run(|tx| v.push(tx, 9)), "length");
    // A capacity the buffer does not hold: reads past the buffer are refused.
    set_word(&pool, v.offset(), 2, 1 << 20);
    set_word(&pool, v.offset(), 1, 1 << 20);
    corrupt(pool.run(|tx| v.as_slice(tx).map(|s| s.len())), "buffer");
    // A buffer pointer without a capacity.
    set_word(&pool, v.offset(), 2, 0);
    set_word(&pool, v.offset(), 1, 0);
    corrupt(pool.run(|tx| v.len(tx)), "buffer");
    // The null handle, and a handle used with another element type.
    let null = PVec::<u32>::null();
    assert!(matches!(
        pool.run(|tx| null.len(tx)),
        Err(Error::InvalidPointer(_))
    ));
    let wrong: PVec<u32> = bytemuck::cast(v);
    assert!(matches!(
        pool.run(|tx| wrong.len(tx)),
        Err(Error::InvalidPointer(_))
    ));
    // An index past the end is a misuse, not damage.
    let ok = pool.run(|tx| PVec::<u64>::new(tx)).unwrap();
    assert!(matches!(
        pool.run(|tx| ok.set(tx, 0, 1)),
        Err(Error::InvalidArgument(_))
    ));
}

#[test]
fn a_damaged_key_of_a_string_keyed_tree_is_an_error() {
    let d = tempfile::tempdir().unwrap();
    let (pool, _) = pool(&d, "key.pool");
    let t = pool
        .run(|tx| {
            let t = BTreeMap::<PString, u64, 4>::new(tx)?;
            for i in 0..40u64 {
                t.insert_str(tx, &format!("key {i:03}"), i)?;
            }
            Ok(t)
        })
        .unwrap();
    let mut keys = Vec::new();
    pool.run(|tx| {
        keys.clear();
        for e in t.iter(tx) {
            keys.push(e?.0.offset());
        }
        Ok(())
    })
    .unwrap();
    // Break every key's length word: lookups, inserts, scans and the check fail with
    // an error, never a panic.
    for &k in &keys {
        set_word(&pool, k, 0, 0xdead_beef);
    }
    corrupt(pool.run(|tx| t.get(tx, "key 007")), "length word");
    corrupt(pool.run(|tx| t.insert_str(tx, "key 100", 1)), "length word");
    corrupt(pool.run(|tx| t.remove(tx, "key 001")), "length word");
    corrupt(pool.run(|tx| t.check(tx)), "length word");
    let first = pool
        .run(|tx| Ok(t.iter(tx).next().map(|e| e.map(|(k, _)| *k))))
        .unwrap();
    let k = first.unwrap().unwrap();
    corrupt(pool.run(|tx| k.to_string(tx)), "length word");
}

pisces::pod! {
    struct Root {
        words: BTreeMap<PString, PBytes>,
        names: HashMap<u64, PString>,
        lists: BTreeMap<u64, PVec<u64>>,
    }
}

/// `check --deep` finds the blocks string keys, string values and vectors own, counts
/// them, and reports a damaged length word, a block owned twice, and a vector whose
/// buffer is smaller than its capacity.
#[test]
fn deep_check_walks_what_the_values_own() {
    let d = tempfile::tempdir().unwrap();
    let (pool, p) = pool(&d, "deep.pool");
    let root: PPtr<Root> = pool.root().unwrap();
    pool.run(|tx| {
        let words = BTreeMap::new(tx)?;
        let names = HashMap::new(tx)?;
        let lists = BTreeMap::new(tx)?;
        for i in 0..60u64 {
            let v = PBytes::new(tx, &i.to_le_bytes()[..(i % 8) as usize])?;
            words.insert_str(tx, &format!("word {i}"), v)?;
            let n = PString::new(tx, &format!("name {i}"))?;
            names.insert(tx, i, n)?;
        }
        for i in 0..5u64 {
            let v = PVec::new(tx)?;
            for j in 0..i * 3 {
                v.push(tx, j)?;
            }
            lists.insert(tx, i, v)?;
        }
        *tx.write(root)? = Root {
            words,
            names,
            lists,
        };
        Ok(())
    })
    .unwrap();
    let r = pool.run(|tx| Ok(*tx.read(root)?)).unwrap();
    drop(pool);
    let ok = check_pool_deep(&p, MediumKind::DRAM).unwrap();
    assert!(ok.is_ok(), "{ok}");
    let cs = ok.containers.clone().unwrap();
    assert_eq!(cs.len(), 3, "{cs:?}");
    assert!(
        cs[0].contains("string keys") && cs[0].contains("byte string values"),
        "{cs:?}"
    );
    assert!(
        cs[1].contains("string values") && cs[1].contains("60 byte string"),
        "{cs:?}"
    );
    assert!(cs[2].contains("vector values"), "{cs:?}");
    assert!(ok.unchecked.is_empty(), "{:?}", ok.unchecked);

    // A value's length word says more than its block holds.
    let (name7, good) = reopen(&p, |pool| {
        let n = pool.run(|tx| Ok(r.names.get(tx, &7)?.unwrap())).unwrap();
        let good = word(pool, n.offset(), 0);
        set_word(pool, n.offset(), 0, good + 1000);
        (n, good)
    });
    assert!(check_pool(&p, MediumKind::DRAM).unwrap().is_ok());
    let bad = check_pool_deep(&p, MediumKind::DRAM).unwrap();
    let text = bad.to_string();
    assert!(
        !bad.is_ok() && text.contains("hash map") && text.contains("says 1006 bytes"),
        "{text}"
    );
    reopen(&p, |pool| set_word(pool, name7.offset(), 0, good));

    // Two values sharing one block: owned twice.
    let n4 = reopen(&p, |pool| {
        pool.run(|tx| {
            let n3 = r.names.get(tx, &3)?.unwrap();
            Ok(std::mem::replace(r.names.get_mut(tx, &4)?.unwrap(), n3))
        })
        .unwrap()
    });
    let text = check_pool_deep(&p, MediumKind::DRAM).unwrap().to_string();
    assert!(
        text.contains("hash map") && text.contains("owned twice"),
        "{text}"
    );
    reopen(&p, |pool| {
        pool.run(|tx| {
            *r.names.get_mut(tx, &4)?.unwrap() = n4;
            Ok(())
        })
        .unwrap()
    });

    // A key's length word with its tag gone.
    let (k2, kw) = reopen(&p, |pool| {
        let k2 = pool
            .run(|tx| Ok(r.words.iter(tx).nth(1).unwrap()?.0.offset()))
            .unwrap();
        let kw = word(pool, k2, 0);
        set_word(pool, k2, 0, kw & 0xffff);
        (k2, kw)
    });
    let text = check_pool_deep(&p, MediumKind::DRAM).unwrap().to_string();
    assert!(
        text.contains("B+-tree") && text.contains("damaged length word"),
        "{text}"
    );
    reopen(&p, |pool| set_word(pool, k2, 0, kw));

    // A vector's capacity beyond its buffer.
    let (v4, cap) = reopen(&p, |pool| {
        let v4 = pool.run(|tx| Ok(r.lists.get(tx, &4)?.unwrap())).unwrap();
        let cap = word(pool, v4.offset(), 2);
        set_word(pool, v4.offset(), 2, cap * 100);
        (v4, cap)
    });
    let text = check_pool_deep(&p, MediumKind::DRAM).unwrap().to_string();
    assert!(
        text.contains("vector") && text.contains("its buffer has"),
        "{text}"
    );
    reopen(&p, |pool| set_word(pool, v4.offset(), 2, cap));
    assert!(check_pool_deep(&p, MediumKind::DRAM).unwrap().is_ok());
}

#[test]
fn handles_are_one_word_of_plain_data() {
    assert_eq!(std::mem::size_of::<PBytes>(), 8);
    assert_eq!(std::mem::size_of::<PString>(), 8);
    assert_eq!(std::mem::size_of::<PVec<[u8; 3]>>(), 8);
    fn pod<T: Pod + Zeroable>() {}
    pod::<PBytes>();
    pod::<PString>();
    pod::<PVec<u16>>();
    assert!(PString::default().is_empty());
}
