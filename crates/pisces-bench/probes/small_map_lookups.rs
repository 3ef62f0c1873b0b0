//! What a one-lookup read-only transaction on a small map costs in the product's
//! `HashMap` against a bare read-path prototype of an open-addressed layout:
//! instructions per transaction under callgrind (load-independent).
//!
//! The prototype reads two objects per lookup: a header holding the group directory,
//! and one group of 7 slots whose one-byte tags (as in SwissTable) rule out all but the
//! matching slots with a few word operations. Only its read path and a bulk load exist
//! (no removal, no growth, no writers' conflict rules, no geometry checks), so it
//! bounds what such a layout's lookup can cost. The product's map is built as the
//! `set` data set builds it (`HashMap::<u64, u8>::new`: the grouped layout, which the
//! prototype was written to measure before it was built).
//!
//! ```sh
//! cargo build --release -p pisces-bench --example small_map_lookups
//! for n in 100000 200000; do
//!   valgrind --tool=callgrind --callgrind-out-file=/tmp/sml.$n \
//!     target/release/examples/small_map_lookups open 1000 $n
//! done
//! # (total Ir of the 200000 run - total Ir of the 100000 run) / 100000
//! ```
//!
//! `scripts/small-map-instructions` does this for every engine and both layouts.
//!
//! Arguments: layout (`product`: the product's `HashMap`; `open`: the prototype), keys,
//! lookups, engine (default `pisces`). Both layouts hold the same keys (drawn from `0 ..
//! 2 * keys`), are written home after the load (`Pool::write_back`, as the bench does
//! after its preload), look up the same sequence of members (one per transaction, as
//! the `set` data set does), and check every result; the setup is the same in two runs with
//! different lookup counts, so the difference of their totals over the difference of
//! the counts is the cost of one lookup transaction.

use pisces::{Config, EngineId, HashMap, MediumKind, PPtr, Pod, Pool, Tx, Zeroable};
use rand::{RngCore, SeedableRng};
use std::hint::black_box;
use std::process::ExitCode;

/// Slots per group: 7 keys and 7 values beside one word of tags fill 15 words.
const SLOTS: usize = 7;
/// Groups of the prototype's directory (a power of two).
const GROUPS: usize = 256;
const MAGIC: u64 = u64::from_le_bytes(*b"PROBE.OA");

/// The prototype's header: the magic, the group mask, one pointer per group.
#[derive(Clone, Copy, Pod, Zeroable)]
#[repr(C)]
struct Header {
    magic: u64,
    mask: u64,
    groups: [u64; GROUPS],
}

/// One group: a tag byte per slot (0: empty; else the hash's top 7 bits with the high
/// bit set), then the keys and the values.
#[derive(Clone, Copy, Pod, Zeroable)]
#[repr(C)]
struct Group {
    tags: u64,
    keys: [u64; SLOTS],
    vals: [u64; SLOTS],
}

fn hash(k: u64) -> u64 {
    // A multiply-fold of the key (the map's own hash is private to the library).
    let p = u128::from(k ^ 0xa076_1d64_78bd_642f) * 0xe703_7ed1_a0b4_28db;
    (p as u64) ^ (p >> 64) as u64
}

fn tag(h: u64) -> u64 {
    (h >> 57) | 0x80
}

/// Bytes of `word` (the low 7) equal to `t`: a set high bit in each matching byte
/// (SWAR; false positives are ruled out by the key compare).
fn matches(word: u64, t: u64) -> u64 {
    const LO: u64 = 0x0001_0101_0101_0101;
    const HI: u64 = 0x0080_8080_8080_8080;
    let x = (word ^ (t * LO)) & 0x00ff_ffff_ffff_ffff;
    x.wrapping_sub(LO) & !x & HI
}

fn open_create(tx: &mut Tx<'_>, keys: &[u64]) -> pisces::Result<PPtr<Header>> {
    let mut groups = vec![Group::zeroed(); GROUPS];
    for &k in keys {
        let h = hash(k);
        let mut g = (h as usize) & (GROUPS - 1);
        loop {
            let grp = &mut groups[g];
            if let Some(i) = (0..SLOTS).find(|&i| (grp.tags >> (8 * i)) & 0xff == 0) {
                grp.tags |= tag(h) << (8 * i);
                grp.keys[i] = k;
                grp.vals[i] = k ^ 1;
                break;
            }
            g = (g + 1) & (GROUPS - 1);
        }
    }
    let mut hdr = Header {
        magic: MAGIC,
        mask: (GROUPS - 1) as u64,
        groups: [0; GROUPS],
    };
    for (d, grp) in hdr.groups.iter_mut().zip(groups) {
        *d = tx.alloc(grp)?.offset();
    }
    tx.alloc(hdr)
}

/// The prototype's lookup: the header, then the key's group (and the next ones while
/// a group is full and holds no match).
#[inline]
fn open_get(tx: &Tx<'_>, hdr: PPtr<Header>, k: u64) -> pisces::Result<Option<u64>> {
    let h = tx.read(hdr)?;
    if h.magic != MAGIC {
        return Err(pisces::Error::InvalidPointer(
            "not a probe map".to_string().into(),
        ));
    }
    let hs = hash(k);
    let t = tag(hs);
    let mut g = hs & h.mask;
    for _ in 0..=h.mask {
        let off = *h
            .groups
            .get(g as usize)
            .ok_or_else(|| pisces::Error::Corrupt("group index".to_string().into()))?;
        let grp = tx.read(PPtr::<Group>::from_offset(off))?;
        let mut m = matches(grp.tags, t);
        while m != 0 {
            let i = (m.trailing_zeros() / 8) as usize;
            if grp.keys.get(i) == Some(&k) {
                return Ok(grp.vals.get(i).copied());
            }
            m &= m - 1;
        }
        if matches(grp.tags, 0) != 0 {
            return Ok(None);
        }
        g = (g + 1) & h.mask;
    }
    Ok(None)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: small_map_lookups product|open KEYS LOOKUPS [ENGINE]";
    let (Some(layout), Some(keys), Some(lookups)) = (
        args.first()
            .filter(|l| ["product", "open"].contains(&l.as_str())),
        args.get(1).and_then(|s| s.parse::<usize>().ok()),
        args.get(2).and_then(|s| s.parse::<u64>().ok()),
    ) else {
        eprintln!("{usage}");
        return ExitCode::from(2);
    };
    let engine = match args
        .get(3)
        .map_or(Some(EngineId::Pisces), |n| EngineId::from_name(n))
    {
        Some(e) if e.available() => e,
        _ => {
            eprintln!("{usage} (engine not in this build)");
            return ExitCode::from(2);
        }
    };
    if keys == 0 || keys > GROUPS * SLOTS * 3 / 4 {
        eprintln!(
            "{usage} (KEYS: 1 ..= {}, the prototype's fixed directory at 3/4 load)",
            GROUPS * SLOTS * 3 / 4
        );
        return ExitCode::from(2);
    }
    let dir = match tempfile::tempdir_in("/dev/shm") {
        Ok(d) => d,
        Err(e) => {
            eprintln!("temporary directory in /dev/shm: {e}");
            return ExitCode::from(1);
        }
    };
    let mut rng = rand::rngs::StdRng::seed_from_u64(42);
    let members: Vec<u64> = rand::seq::index::sample(&mut rng, 2 * keys, keys)
        .into_iter()
        .map(|k| k as u64)
        .collect();
    let run = || -> pisces::Result<()> {
        let pool = Pool::create(
            dir.path().join("probe.pool"),
            Config::default()
                .size(32 << 20)
                .medium(MediumKind::DRAM)
                .engine(engine)
                .max_threads(2),
        )?;
        let mut h = pool.handle()?;
        let mut ops = rand::rngs::SmallRng::seed_from_u64(7);
        let members = &members;
        let mut next = move || {
            let i = (u128::from(ops.next_u64()) * members.len() as u128) >> 64;
            members[i as usize]
        };
        if layout == "open" {
            let m = h.run(|tx| open_create(tx, members))?;
            pool.write_back()?;
            for _ in 0..lookups {
                let k = next();
                let v = h.run(|tx| open_get(tx, m, k))?;
                if v != Some(k ^ 1) {
                    return Err(pisces::Error::Corrupt(format!("key {k}: {v:?}").into()));
                }
                black_box(v);
            }
        } else {
            let m = h.run(|tx| HashMap::<u64, u8>::new(tx))?;
            for chunk in members.chunks(256) {
                h.run(|tx| {
                    for &k in chunk {
                        m.insert(tx, k, 1)?;
                    }
                    Ok(())
                })?;
            }
            pool.write_back()?;
            for _ in 0..lookups {
                let k = next();
                let v = h.run(|tx| m.get(tx, &k))?;
                if v != Some(1) {
                    return Err(pisces::Error::Corrupt(format!("key {k}: {v:?}").into()));
                }
                black_box(v);
            }
        }
        Ok(())
    };
    match run() {
        Ok(()) => {
            println!(
                "{lookups} lookups, {layout}, {keys} keys, {}",
                engine.name()
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("small_map_lookups: {e}");
            ExitCode::from(1)
        }
    }
}
