//! The measurement shared by the `recovery` and `replay` workloads: a pool whose logs
//! a crash left full, and timed opens of copies of it.
//!
//! 1. A fresh pool under `/dev/shm` (the emulated DRAM medium, no added NVM latency)
//!    with [`FILL_THREADS`] thread slots, its logs sized by the [`FillSpec`] so that the
//!    fill below never reaches the point where the engine truncates them by itself
//!    (a checkpoint that writes home and retires, or spht's replayer, held for the
//!    fill). A hash table (`HashMap<u64, [u8; 64]>`, [`BUCKETS`] buckets, [`KEYS`]
//!    keys), and with [`FillSpec::btree`] a B+-tree of the same keys, is preloaded from
//!    one thread handle, which is then dropped: the engine retires (checkpoints) the
//!    preload, so the logs start empty.
//! 2. The fill: [`FILL_THREADS`] threads overwrite the value of a random key of their
//!    own residue class (key mod threads), one transaction each (alternating between
//!    the hash table and the B+-tree when there is one), until each thread's medium
//!    counter of bytes logged reaches its share of the target. Each thread remembers
//!    the last value it committed for each of its keys.
//! 3. The crash: while the fill's thread handles are still held (so no thread-exit
//!    checkpoint has run) and nothing runs, the pool file is copied. The copy is what a
//!    `kill -9` at that point leaves behind on a DAX file or `/dev/shm`: every store
//!    reached the file, nothing of the engine's close ran, the logs are full. The
//!    original pool is then closed and removed (untimed).
//! 4. For each open of the workload ([`OpenSpec`]): a fresh copy of the crash image,
//!    opened by the [`Opener`] (in the harness, a fresh child process:
//!    [`super::child`]), which times `Pool::open` (recovery: parse the logs, rebuild,
//!    replay, retire), closes it, and times a second open of the same file, as the
//!    fixed cost of opening a pool of this size without anything to replay. The harness
//!    then opens the recovered pool itself and checks every key of every fill thread
//!    against the last value it committed.

use super::child::{Opener, Timing};
use super::words;
use crate::engines::Engine;
use pisces::tools::counters;
use pisces::{BTreeMap, Config, EngineOptions, HashMap, MediumKind, Pool};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// Threads that fill the logs (and thread slots of the pool).
pub const FILL_THREADS: usize = 2;
/// Keys of the hash table (and B+-tree) the fill overwrites.
pub const KEYS: usize = 100_000;
/// Buckets of that hash table.
pub const BUCKETS: usize = 10_000;

type Table64 = HashMap<u64, [u8; 64]>;
type Tree64 = BTreeMap<u64, [u8; 64]>;

/// The value thread `t` writes to key `k` in its transaction number `seq`.
fn value(t: usize, k: u64, seq: u64) -> [u8; 64] {
    let mut v = [0u8; 64];
    v[..8].copy_from_slice(&(t as u64).to_le_bytes());
    v[8..16].copy_from_slice(&k.to_le_bytes());
    v[16..24].copy_from_slice(&seq.to_le_bytes());
    v
}

/// Removes a file when dropped (best effort: it may not exist).
pub(crate) struct Remove(pub(crate) PathBuf);

impl Drop for Remove {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// A fresh path in `dir` for a pool file of the measurement (`what`: its role).
pub(crate) fn unique(dir: &Path, what: &str) -> PathBuf {
    static N: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    // Relaxed: a counter that only needs to be unique.
    let n = N.fetch_add(1, Ordering::Relaxed);
    dir.join(format!(
        "pisces-bench-recovery-{}-{n}-{nanos}-{what}.pool",
        std::process::id()
    ))
}

/// The medium of every pool of the measurement: DRAM without emulated NVM latency.
pub(crate) fn plain_dram() -> MediumKind {
    MediumKind::Dram {
        write_latency_ns: 0,
        bandwidth_bytes_per_sec: 0,
    }
}

/// How the logs are filled (each workload of [`super::RecoveryWorkload`] has its own).
#[derive(Clone, Debug)]
pub(crate) struct FillSpec {
    /// The engine.
    pub engine: Engine,
    /// Engine options of the fill. Empty: the pool stays open from the preload on;
    /// else the preload's pool (default options) is closed, which leaves its logs
    /// empty, and reopened with these (spht: `replay_hold=true`).
    pub fill_options: EngineOptions,
    /// `log_bytes_per_thread` of the pool.
    pub log_per_thread: usize,
    /// A B+-tree of the same keys besides the hash table; the fill transactions
    /// alternate between the two.
    pub btree: bool,
    /// Fill threads (and thread slots of the pool).
    pub threads: usize,
    /// Instead of the hash table (and B+-tree): an array of words, each transaction
    /// writing some of them at random (`words`).
    pub words: Option<words::Shape>,
    /// Transactions to commit in all (0: fill the given bytes of log instead).
    pub txns: u64,
}

/// One timed open of a copy of the crash image.
#[derive(Clone, Debug)]
pub(crate) struct OpenSpec {
    /// Engine options of the open (and of the clean reopen).
    pub options: EngineOptions,
    /// `recovery_threads` of the open.
    pub threads: usize,
}

/// What the fill left: the crash image and what recovery must restore.
pub(crate) struct Filled {
    map: Option<Table64>,
    tree: Option<Tree64>,
    /// The word array's objects, and per fill thread the last transaction number of
    /// each word it owns (`words::owned`).
    words: Option<(Vec<words::Obj>, Vec<Vec<u32>>)>,
    shape: Option<words::Shape>,
    /// Per fill thread, per container (hash table, B+-tree): the last sequence number
    /// committed for each of its keys (0: none; the preloaded value is then expected).
    last: Vec<[Vec<u64>; 2]>,
    pub(crate) log_bytes: u64,
    pub(crate) transactions: u64,
}

/// What one fill thread leaves: the last sequence number per container and key, its
/// log bytes, its transactions, and its handle (held until the crash image is taken).
type FillThread = (Last, u64, u64, pisces::ThreadHandle);

/// Create the pool and preload the containers from one thread handle, which is then
/// dropped: the engine retires (checkpoints) the preload.
fn preload(spec: &FillSpec, path: &Path) -> Result<(Pool, Preloaded), String> {
    let heap = match spec.words {
        Some(shape) => shape.heap_bytes() + (64 << 20),
        None => {
            let tree = if spec.btree { 512 * 2 * KEYS as u64 } else { 0 };
            512 * 2 * KEYS as u64 + (128 << 20) + tree
        }
    };
    let size = (heap + (spec.threads * spec.log_per_thread) as u64).next_multiple_of(1 << 20);
    let cfg = spec
        .engine
        .config(size, spec.threads)
        .medium(plain_dram())
        .allow_volatile_medium(true);
    let cfg = cfg.log_bytes_per_thread(spec.log_per_thread);
    let pool = Pool::create(path, cfg).map_err(|e| format!("creating the pool: {e}"))?;
    let mut h = pool.handle().map_err(|e| e.to_string())?;
    let loaded = match spec.words {
        Some(shape) => Preloaded::Words(
            words::create(&mut h, shape).map_err(|e| format!("creating the word array: {e}"))?,
        ),
        None => {
            let (map, tree) = containers(spec, &mut h)?;
            Preloaded::Map(map, tree)
        }
    };
    drop(h);
    if spec.fill_options.is_empty() {
        return Ok((pool, loaded));
    }
    drop(pool);
    let cfg = Config::default()
        .medium(plain_dram())
        .allow_volatile_medium(true)
        .engine(spec.engine.id())
        .engine_options(spec.fill_options.clone());
    let pool = Pool::open(path, cfg).map_err(|e| format!("reopening for the fill: {e}"))?;
    Ok((pool, loaded))
}

/// What the preload built.
enum Preloaded {
    /// The hash table, and the B+-tree with [`FillSpec::btree`].
    Map(Table64, Option<Tree64>),
    /// The word array's objects ([`FillSpec::words`]).
    Words(Vec<words::Obj>),
}

/// Create and preload the hash table (and B+-tree) from `h`.
fn containers(
    spec: &FillSpec,
    h: &mut pisces::ThreadHandle,
) -> Result<(Table64, Option<Tree64>), String> {
    let (map, tree) = h
        .run(|tx| {
            let map = Table64::fixed(tx, BUCKETS)?;
            let tree = if spec.btree {
                Some(Tree64::new(tx)?)
            } else {
                None
            };
            Ok((map, tree))
        })
        .map_err(|e| format!("creating the containers: {e}"))?;
    for batch in (0..KEYS as u64).collect::<Vec<_>>().chunks(64) {
        h.run(|tx| {
            for &k in batch {
                map.insert(tx, k, value(usize::MAX, k, 0))?;
                if let Some(t) = &tree {
                    t.insert(tx, k, value(usize::MAX, k, 0))?;
                }
            }
            Ok(())
        })
        .map_err(|e| format!("preloading: {e}"))?;
    }
    Ok((map, tree))
}

/// Steps 1 to 3 of the module docs: a pool in `dir` filled with `log_bytes` of log
/// (or [`FillSpec::txns`] transactions), copied to `image` while the fill's handles
/// are held.
pub(crate) fn fill(
    spec: &FillSpec,
    dir: &Path,
    image: &Path,
    log_bytes: u64,
    seed: u64,
) -> Result<Filled, String> {
    let threads = spec.threads;
    // Each thread stops at its share of the log bytes, or of the transactions.
    let (per_thread, per_thread_txns) = if spec.txns > 0 {
        (u64::MAX, spec.txns.div_ceil(threads as u64))
    } else {
        (log_bytes.div_ceil(threads as u64), u64::MAX)
    };
    let path = unique(dir, "fill");
    let _remove = Remove(path.clone());
    let (pool, loaded) = preload(spec, &path)?;
    let handles = (0..threads)
        .map(|_| pool.handle())
        .collect::<pisces::Result<Vec<_>>>()
        .map_err(|e| format!("taking thread handles: {e}"))?;
    let (map, tree, objs) = match loaded {
        Preloaded::Map(map, tree) => (Some(map), tree, Vec::new()),
        Preloaded::Words(objs) => (None, None, objs),
    };
    let (map, tree, objs) = (&map, &tree, &objs);
    let outs: Vec<Result<FillThread, String>> = std::thread::scope(|s| {
        let workers: Vec<_> = handles
            .into_iter()
            .enumerate()
            .map(|(t, mut h)| {
                s.spawn(move || {
                    let mut rng = StdRng::seed_from_u64(seed ^ ((t as u64 + 1) * 0x9e37));
                    let before = counters::snapshot().bytes_logged;
                    let more = |seq: u64| {
                        seq < per_thread_txns
                            && counters::snapshot().bytes_logged - before < per_thread
                    };
                    let mut seq = 0u64;
                    let last = match (spec.words, map) {
                        (Some(shape), _) => {
                            let mut last = words::owned(shape, threads, t);
                            // Transaction numbers are kept in 32 bits.
                            while more(seq) && seq < u64::from(u32::MAX) {
                                seq += 1;
                                words::transaction(
                                    &mut h,
                                    objs,
                                    shape,
                                    (t, threads),
                                    seq as u32,
                                    &mut rng,
                                    &mut last,
                                )
                                .map_err(|e| format!("fill transaction: {e}"))?;
                            }
                            Last::Words(last)
                        }
                        (None, Some(map)) => {
                            let mine = KEYS.div_ceil(threads);
                            let mut last = [vec![0u64; mine], vec![0u64; mine]];
                            while more(seq) {
                                let i = rng.gen_range(0..mine);
                                let k = (i * threads + t) as u64;
                                if k >= KEYS as u64 {
                                    continue;
                                }
                                seq += 1;
                                // With a B+-tree, odd transactions update it, even ones
                                // the hash table.
                                let in_tree = tree.is_some() && seq % 2 == 1;
                                h.run(|tx| {
                                    let v = match tree {
                                        Some(t) if in_tree => t.get_mut(tx, &k)?,
                                        _ => map.get_mut(tx, &k)?,
                                    };
                                    let v = v.ok_or_else(|| {
                                        pisces::Error::Corrupt(format!("key {k} is missing").into())
                                    })?;
                                    *v = value(t, k, seq);
                                    Ok(())
                                })
                                .map_err(|e| format!("fill transaction: {e}"))?;
                                last[usize::from(in_tree)][i] = seq;
                            }
                            Last::Keys(last)
                        }
                        (None, None) => unreachable!("the preload built no container"),
                    };
                    let logged = counters::snapshot().bytes_logged - before;
                    Ok((last, logged, seq, h))
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|w| {
                w.join()
                    .unwrap_or_else(|_| Err("a fill thread panicked".into()))
            })
            .collect()
    });
    let mut filled = Filled {
        map: *map,
        tree: *tree,
        words: None,
        shape: spec.words,
        last: Vec::new(),
        log_bytes: 0,
        transactions: 0,
    };
    let mut word_last = Vec::new();
    let mut held = Vec::new();
    for o in outs {
        let (last, logged, txs, h) = o?;
        match last {
            Last::Keys(l) => filled.last.push(l),
            Last::Words(l) => word_last.push(l),
        }
        filled.log_bytes += logged;
        filled.transactions += txs;
        held.push(h);
    }
    if spec.words.is_some() {
        filled.words = Some((objs.clone(), word_last));
    }
    // The crash: the image as a kill -9 now would leave it.
    std::fs::copy(&path, image).map_err(|e| format!("copying the crash image: {e}"))?;
    drop(held);
    drop(pool);
    Ok(filled)
}

/// What one fill thread remembers of the values it committed.
enum Last {
    /// Per container (hash table, B+-tree), per key of its own: the last sequence
    /// number (0: none).
    Keys([Vec<u64>; 2]),
    /// Per word of its own: the last transaction number (`words::owned`).
    Words(Vec<u32>),
}

/// Check that the recovered containers hold every value the fill committed.
fn verify(pool: &Pool, f: &Filled) -> Result<(), String> {
    let mut h = pool.handle().map_err(|e| e.to_string())?;
    if let (Some((objs, last)), Some(shape)) = (&f.words, f.shape) {
        return words::verify(&mut h, objs, shape, last);
    }
    let threads = f.last.len();
    let map = f.map.as_ref().ok_or("the fill left no hash table")?;
    for (t, last) in f.last.iter().enumerate() {
        for (c, last) in last.iter().enumerate() {
            let tree = match (c, &f.tree) {
                (0, _) => None,
                (_, Some(tree)) => Some(tree),
                (_, None) => continue,
            };
            // Small transactions: an engine may revalidate its whole read set on each
            // read.
            for chunk in last.iter().enumerate().collect::<Vec<_>>().chunks(16) {
                h.run(|tx| {
                    for &(i, &seq) in chunk {
                        let k = (i * threads + t) as u64;
                        if k >= KEYS as u64 {
                            continue;
                        }
                        let want = if seq == 0 {
                            value(usize::MAX, k, 0)
                        } else {
                            value(t, k, seq)
                        };
                        let got = match tree {
                            Some(tree) => tree.get(tx, &k)?,
                            None => map.get(tx, &k)?,
                        };
                        if got != Some(want) {
                            return Err(pisces::Error::Corrupt(
                                format!(
                                    "key {k} of the {}: the recovered value is not the last \
                                     committed one",
                                    if tree.is_some() {
                                        "B+-tree"
                                    } else {
                                        "hash table"
                                    }
                                )
                                .into(),
                            ));
                        }
                    }
                    Ok(())
                })
                .map_err(|e| format!("after recovery: {e}"))?;
            }
        }
    }
    Ok(())
}

/// Fill `log_bytes` of log as `spec` says, crash, then have `opener` time each open
/// of `opens` on a fresh copy of the crash image (and a clean reopen), and check every
/// value. Returns the log bytes, the transactions, and one timing per open. Pool
/// files go to `dir` and are removed.
pub(crate) fn measure_opens(
    spec: &FillSpec,
    log_bytes: u64,
    seed: u64,
    dir: &Path,
    opens: &[OpenSpec],
    opener: &Opener,
) -> Result<(u64, u64, Vec<Timing>), String> {
    let image = unique(dir, "crash");
    let _remove_image = Remove(image.clone());
    let f = fill(spec, dir, &image, log_bytes, seed)?;
    let mut timings = Vec::new();
    for open in opens {
        let work = unique(dir, "recover");
        let _remove = Remove(work.clone());
        std::fs::copy(&image, &work).map_err(|e| format!("copying the crash image: {e}"))?;
        let timing = opener.open(&work, spec.engine.id(), open.threads, &open.options)?;
        // The opener recovered the pool and closed it: this open has nothing to
        // replay (untimed).
        let cfg = Config::default()
            .medium(plain_dram())
            .allow_volatile_medium(true)
            .engine(spec.engine.id())
            .engine_options(open.options.clone());
        let pool = Pool::open(&work, cfg).map_err(|e| format!("reopening to check: {e}"))?;
        verify(&pool, &f)?;
        drop(pool);
        timings.push(timing);
    }
    Ok((f.log_bytes, f.transactions, timings))
}
