//! Corruption campaigns, each image checked, opened, read and updated **in a child
//! process** (this test binary re-executed with `PISCES_CORRUPTION_CHILD` set), under
//! a 10 s watchdog per image. Required everywhere: no panic, no signal, no hang
//! (errors are fine).
//!
//! * `corruption_campaign`: small filled pools (pisces, mvcc, undo; closed cleanly,
//!   copied while transactions run, and crash images of the simulator) damaged at
//!   random — bit flips, zeroed 4 KiB pages, truncation, runs of garbage, and records
//!   in the middle of a log. Every log damaged in the middle (not a torn tail) must be
//!   refused.
//! * `logs_and_metadata_damage_on_every_durable_engine`: every durable engine of the
//!   pool format (pisces, undo, mvcc, sp3, spht, timestone), pools with committed
//!   transactions (copied while open, closed cleanly, and crash images of the
//!   simulator), damaged only in the log regions or the engine area: random bytes,
//!   zeroed 4 KiB pages, single words and bytes of log records. Each image is refused,
//!   or opens to the state its undamaged base opens to (the hash map and the B+-tree,
//!   always changed together, agree, pass their checks and hold every transaction the
//!   base holds); a wrong or an older state fails the test.
//!
//! `cargo test -p pisces-verify --release --test corruption -- --nocapture` prints the
//! outcomes per class and the per-engine table. `PISCES_CORRUPTION_SCALE=4` runs four
//! times as many images; `PISCES_CORRUPTION_KEEP=DIR` keeps the failing images (and
//! the logs-and-metadata bases) in DIR for `pisces info` / `pisces check`;
//! `PISCES_CORRUPTION_ENGINES=spht,sp3` runs the logs-and-metadata class on those
//! engines only.

use pisces::tools::check::check_pool_deep;
use pisces::tools::check::{REDO_RECORD_HEADER as HEADER_LEN, REDO_RING_OFFSET as RING_OFFSET};
use pisces::{
    BTreeMap, Config, EngineId, EngineOptions, Error, HashMap, MediumKind, PPtr, Pod, Pool,
    Zeroable,
};
use pisces_verify::sim::{SimConfig, SimMedium};
use std::collections::BTreeMap as Counts;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

const SIZE: u64 = 512 << 10;
const CHILD_ENV: &str = "PISCES_CORRUPTION_CHILD";
/// A folder to keep the failing images in (unset: they are deleted).
const KEEP_ENV: &str = "PISCES_CORRUPTION_KEEP";

#[derive(Clone, Copy, Pod, Zeroable)]
#[repr(C)]
struct Root {
    count: u64,
    map: HashMap<u64, [u64; 3]>,
    tree: BTreeMap<u64, u64>,
}

fn cfg(engine: EngineId) -> Config {
    // The engine's defaults (for Pisces: flush-diff, group commit of 8).
    Config::default()
        .size(SIZE)
        .engine(engine)
        .max_threads(2)
        .log_bytes_per_thread(20 << 10)
        .engine_options(EngineOptions::new())
}

/// Deterministic xorshift64* (no dev-dependency needed).
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// Fill a pool: a hash map and a tree of `n` keys, some removed again, from two
/// thread handles (so both logs hold records). Returns the handles (still open).
fn fill(pool: &Pool, n: u64) -> Vec<pisces::ThreadHandle> {
    let root: PPtr<Root> = pool.root().unwrap();
    pool.run(|tx| {
        let map = HashMap::fixed(tx, 16)?;
        *tx.write(root)? = Root {
            count: 0,
            map,
            tree: BTreeMap::default(),
        };
        Ok(())
    })
    .unwrap();
    // The tree apart: both containers with their element counts exceed a small log.
    pool.run(|tx| {
        let tree = BTreeMap::new(tx)?;
        tx.write(root)?.tree = tree;
        Ok(())
    })
    .unwrap();
    let r = pool.run(|tx| Ok(*tx.read(root)?)).unwrap();
    let mut hs = vec![pool.handle().unwrap(), pool.handle().unwrap()];
    for k in 0..n {
        hs[(k % 2) as usize]
            .run(|tx| {
                r.map.insert(tx, k, [k; 3])?;
                r.tree.insert(tx, k * 7 % 1000, k)?;
                tx.write(root)?.count += 1;
                if k % 5 == 4 {
                    r.map.remove(tx, &(k - 2))?;
                    r.tree.remove(tx, &((k - 3) * 7 % 1000))?;
                }
                Ok(())
            })
            .unwrap();
    }
    hs
}

/// A base image: its bytes, engine, and name.
struct Base {
    name: String,
    engine: EngineId,
    bytes: Vec<u8>,
    /// Ring offsets (absolute) of log records that have a later record in their log:
    /// damaging one is not a torn tail.
    mid_records: Vec<(usize, usize)>,
}

fn layout_of(bytes: &[u8]) -> (usize, usize) {
    // (first log area offset, log bytes per thread) from the fixed geometry of `cfg`.
    let _ = bytes;
    (pisces::tools::layout::LOGS_OFFSET, 16 << 10)
}

/// Records (absolute offset, entry bytes) of every log that are followed by a later
/// record of the same log (Pisces log format, from the ring start of a fresh log).
fn mid_records(bytes: &[u8], threads: usize) -> Vec<(usize, usize)> {
    let (logs, per) = layout_of(bytes);
    let mut out = Vec::new();
    for slot in 0..threads {
        let ring = logs + slot * per + RING_OFFSET;
        let cap = per - RING_OFFSET;
        let tw = u64::from_le_bytes(bytes[logs + slot * per..][..8].try_into().unwrap());
        let mut pos = (tw >> 32) as usize;
        let mut recs = Vec::new();
        let mut seq: Option<u64> = None;
        for _ in 0..1000 {
            if pos + HEADER_LEN > cap {
                break;
            }
            let at = ring + pos;
            let magic = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap());
            let kind = u32::from_le_bytes(bytes[at + 4..at + 8].try_into().unwrap());
            let len = u32::from_le_bytes(bytes[at + 8..at + 12].try_into().unwrap()) as usize;
            let s = u64::from_le_bytes(bytes[at + 16..at + 24].try_into().unwrap());
            let in_seq = seq.is_none_or(|q| q + 1 == s)
                && (seq.is_some() || s & 0xFFFF_FFFF == tw & 0xFFFF_FFFF);
            // Kind 1: a record; kind 4: a line-aligned one (Pisces), after which the
            // next record starts at the next multiple of 64 of the ring.
            if magic != 0x5052_4543
                || !(kind == 1 || kind == 4)
                || !in_seq
                || pos + HEADER_LEN + len > cap
            {
                break;
            }
            seq = Some(s);
            recs.push((at, len));
            pos += HEADER_LEN + len;
            if kind == 4 {
                pos = pos.next_multiple_of(64);
            }
        }
        // Every record but the last: a later valid one follows it.
        if recs.len() >= 2 {
            out.extend_from_slice(&recs[..recs.len() - 1]);
        }
    }
    out
}

fn bases(dir: &Path) -> Vec<Base> {
    let mut out = Vec::new();
    for engine in [EngineId::Pisces, EngineId::Mvcc, EngineId::Undo] {
        // Closed cleanly.
        let p = dir.join(format!("{}-clean.pool", engine.name()));
        {
            let pool = Pool::create(&p, cfg(engine)).unwrap();
            drop(fill(&pool, 60));
        }
        out.push(Base {
            name: format!("{}/closed", engine.name()),
            engine,
            bytes: std::fs::read(&p).unwrap(),
            mid_records: Vec::new(),
        });
        // Copied while open, batches pending.
        let p = dir.join(format!("{}-live.pool", engine.name()));
        let pool = Pool::create(&p, cfg(engine)).unwrap();
        let hs = fill(&pool, 40);
        let bytes = std::fs::read(&p).unwrap();
        drop(hs);
        drop(pool);
        let mid = if engine == EngineId::Undo {
            Vec::new()
        } else {
            mid_records(&bytes, 2)
        };
        // The walk above must understand the engine's records, or "log-mid" tests
        // nothing for it.
        assert!(
            engine == EngineId::Undo || mid.len() >= 4,
            "{}: {} mid-log records found",
            engine.name(),
            mid.len()
        );
        out.push(Base {
            name: format!("{}/copied-open", engine.name()),
            engine,
            bytes,
            mid_records: mid,
        });
    }
    // Crash images of the simulator, taken while the transactions run.
    for seed in 1..=2u64 {
        let sim = Arc::new(SimMedium::new(SIZE as usize, SimConfig::default()).unwrap());
        let pool = Pool::create_on(sim.clone(), cfg(EngineId::Pisces)).unwrap();
        let hs = fill(&pool, 30 + 10 * seed);
        let bytes = sim.crash_image_now(seed);
        drop(hs);
        drop(pool);
        let mid = mid_records(&bytes, 2);
        out.push(Base {
            name: format!("pisces/sim-crash-{seed}"),
            engine: EngineId::Pisces,
            bytes,
            mid_records: mid,
        });
    }
    out
}

/// Where corruptions land: metadata regions are small, so they get as much weight as
/// the heap.
fn offset(rng: &mut Rng, len: usize) -> usize {
    let logs = pisces::tools::layout::LOGS_OFFSET;
    let regions = [
        (0, logs),                      // superblocks, engine area (watermark, root slot)
        (logs, logs + 2 * (16 << 10)),  // the two logs
        (logs + 2 * (16 << 10), 65536), // slab table
        (65536, 65536 + 4 * 65536),     // the first slabs of the heap
    ];
    let (a, b) = regions[rng.below(regions.len() as u64) as usize];
    (a + rng.below((b - a) as u64) as usize).min(len - 1)
}

const CLASSES: [&str; 5] = ["bitflip", "zero-page", "truncate", "garbage", "log-mid"];

/// Apply one corruption of class `c` to a copy of `base`; `None` if it does not apply.
fn corrupt(base: &Base, c: &str, rng: &mut Rng) -> Option<Vec<u8>> {
    let mut b = base.bytes.clone();
    let len = b.len();
    match c {
        "bitflip" => {
            for _ in 0..=rng.below(3) {
                let o = offset(rng, len);
                b[o] ^= 1 << rng.below(8);
            }
        }
        "zero-page" => {
            let o = offset(rng, len) & !4095;
            b[o..(o + 4096).min(len)].fill(0);
        }
        "truncate" => {
            let n = if rng.below(2) == 0 {
                rng.below(len as u64) as usize & !4095
            } else {
                rng.below(len as u64) as usize
            };
            b.truncate(n);
        }
        "garbage" => {
            let o = offset(rng, len);
            let n = (8 + rng.below(249) as usize).min(len - o);
            for x in &mut b[o..o + n] {
                *x = rng.next() as u8;
            }
        }
        "log-mid" => {
            if base.mid_records.is_empty() {
                return None;
            }
            let (at, elen) = base.mid_records[rng.below(base.mid_records.len() as u64) as usize];
            // A byte of the header (not the magic) or of the entries.
            let o = at + 4 + rng.below((HEADER_LEN - 4 + elen) as u64) as usize;
            b[o] ^= 1 << rng.below(8);
        }
        _ => unreachable!(),
    }
    Some(b)
}

/// One image for the child: index, engine, class, path.
struct Job {
    engine: EngineId,
    class: &'static str,
    base: usize,
    path: PathBuf,
    /// What was damaged, where (the logs-and-metadata class; empty otherwise).
    what: String,
}

/// The child's work on an image of class `class`: the campaign's check-open-use, or
/// the state oracle of the logs-and-metadata class.
fn mode_of(class: &str) -> &'static str {
    if META_CLASSES.contains(&class) || class == META_BASE {
        "oracle"
    } else {
        "use"
    }
}

#[derive(Default)]
struct Tally {
    /// class -> outcome -> count
    by_class: Counts<&'static str, Counts<String, usize>>,
    /// (class and region, engine) -> outcome -> count, for the logs-and-metadata
    /// classes
    by_engine: Counts<(String, &'static str), Counts<String, usize>>,
    /// base -> transactions in its state (the logs-and-metadata class)
    base_count: Counts<usize, u64>,
    failures: Vec<String>,
    total: usize,
}

/// Run `jobs[from..]` in a child process until it finishes them, dies or hangs;
/// returns the index to resume at and records outcomes.
fn run_child(jobs: &[Job], from: usize, list: &Path, tally: &mut Tally) -> usize {
    {
        let mut f = std::fs::File::create(list).unwrap();
        for (i, j) in jobs.iter().enumerate().skip(from) {
            writeln!(
                f,
                "{i} {} {} {}",
                j.engine.name(),
                mode_of(j.class),
                j.path.display()
            )
            .unwrap();
        }
    }
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["child_role", "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, list)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let out = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut current: Option<usize> = None;
    let mut next = from;
    let record = |tally: &mut Tally, i: usize, outcome: String| {
        let j = &jobs[i];
        let failed = tally.failures.len();
        tally.total += 1;
        let mut o = if mode_of(j.class) == "oracle" {
            outcome.split([' ', ':']).next().unwrap().to_string()
        } else {
            outcome.split(':').next().unwrap().to_string()
        };
        // A correct state's transaction count, against its base's.
        let count = outcome
            .strip_prefix("correct ")
            .and_then(|c| c.parse::<u64>().ok());
        if j.class == META_BASE {
            if let Some(c) = count {
                tally.base_count.insert(j.base, c);
            }
        }
        let base_count = tally.base_count.get(&j.base).copied();
        let meta = META_CLASSES.contains(&j.class);
        if meta && count.zip(base_count).is_some_and(|(c, b)| c < b) {
            o = "older".into();
        }
        *tally
            .by_class
            .entry(j.class)
            .or_default()
            .entry(o.clone())
            .or_default() += 1;
        let region = if j.what.contains("(engine area") {
            "engine area"
        } else {
            "logs"
        };
        if meta {
            *tally
                .by_engine
                .entry((format!("{}, {region}", j.class), j.engine.name()))
                .or_default()
                .entry(o.clone())
                .or_default() += 1;
        }
        let bad = o == "panic" || o == "signal" || o == "hang" || o == "died";
        let refused = o.starts_with("open-err") && outcome.contains("Corrupt");
        let meta_bad = match j.class {
            // Damage to the logs or the engine area that opens wrong, or loses
            // committed transactions silently ("older"; see the section's comment for
            // what is still allowed).
            c if META_CLASSES.contains(&c) => o == "WRONG" || o == "older",
            META_BASE => o != "correct",
            _ => false,
        };
        let line = format!(
            "image {i} ({}, base {}{}): {outcome}",
            j.class,
            j.base,
            if j.what.is_empty() {
                String::new()
            } else {
                format!(", {}", j.what)
            }
        );
        if bad || meta_bad || (j.class == "log-mid" && !refused) {
            tally.failures.push(line);
        }
        match std::env::var_os(KEEP_ENV) {
            // Failing images are kept for a look (`pisces info`, `pisces check`).
            Some(keep) if tally.failures.len() > failed => {
                let to = Path::new(&keep).join(format!("image{i}.pool"));
                let _ = std::fs::rename(&j.path, &to)
                    .or_else(|_| std::fs::copy(&j.path, &to).map(drop));
                let _ = std::fs::remove_file(&j.path);
            }
            _ => {
                let _ = std::fs::remove_file(&j.path);
            }
        }
    };
    loop {
        match rx.recv_timeout(Duration::from_secs(10)) {
            Ok(line) => {
                if let Some(i) = line.strip_prefix("BEGIN ") {
                    current = Some(i.trim().parse().unwrap());
                } else if let Some(rest) = line.strip_prefix("END ") {
                    let (i, outcome) = rest.split_once(' ').unwrap();
                    let i: usize = i.parse().unwrap();
                    record(tally, i, outcome.to_string());
                    current = None;
                    next = i + 1;
                }
            }
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                let _ = child.kill();
                let _ = child.wait();
                let i = current.unwrap_or(next);
                record(tally, i, "hang".into());
                return i + 1;
            }
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                let status = child.wait().unwrap();
                if let Some(i) = current {
                    use std::os::unix::process::ExitStatusExt;
                    let what = if let Some(sig) = status.signal() {
                        format!("signal: {sig}")
                    } else {
                        format!("died: {status}")
                    };
                    record(tally, i, what);
                    return i + 1;
                }
                return next.max(jobs.len());
            }
        }
    }
}

#[test]
fn corruption_campaign() {
    if std::env::var_os(CHILD_ENV).is_some() {
        return;
    }
    let t0 = std::time::Instant::now();
    let scale: usize = std::env::var("PISCES_CORRUPTION_SCALE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    let dir = tempfile::Builder::new()
        .prefix("pisces-corruption")
        .tempdir_in(if Path::new("/dev/shm").is_dir() {
            "/dev/shm"
        } else {
            "/tmp"
        })
        .unwrap();
    let bases = bases(dir.path());
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut tally = Tally::default();
    let per_class = 70 * scale; // per base, for the four generic classes
    let list = dir.path().join("jobs.txt");
    let mut batch = Vec::new();
    let mut n = 0;
    let flush = |batch: &mut Vec<Job>, tally: &mut Tally| {
        let mut from = 0;
        while from < batch.len() {
            from = run_child(batch, from, &list, tally);
        }
        batch.clear();
    };
    for (bi, base) in bases.iter().enumerate() {
        for class in CLASSES {
            let count = if class == "log-mid" {
                20 * scale
            } else {
                per_class
            };
            for _ in 0..count {
                let Some(bytes) = corrupt(base, class, &mut rng) else {
                    break;
                };
                let path = dir.path().join(format!("img{n}.pool"));
                n += 1;
                std::fs::write(&path, bytes).unwrap();
                batch.push(Job {
                    engine: base.engine,
                    class,
                    base: bi,
                    path,
                    what: String::new(),
                });
                if batch.len() == 200 {
                    flush(&mut batch, &mut tally);
                }
            }
        }
    }
    flush(&mut batch, &mut tally);
    println!(
        "corruption campaign: {} images from {} bases in {:.1} s",
        tally.total,
        bases.len(),
        t0.elapsed().as_secs_f64()
    );
    for (i, b) in bases.iter().enumerate() {
        println!(
            "  base {i}: {} ({} mid-log records)",
            b.name,
            b.mid_records.len()
        );
    }
    for (class, outcomes) in &tally.by_class {
        let total: usize = outcomes.values().sum();
        let parts: Vec<String> = outcomes.iter().map(|(o, n)| format!("{o} {n}")).collect();
        println!("  {class:<10} {total:>5}: {}", parts.join(", "));
    }
    assert!(tally.total >= 2000, "only {} corruptions", tally.total);
    assert!(
        tally.failures.is_empty(),
        "{} failures:\n{}",
        tally.failures.len(),
        tally.failures.join("\n")
    );
}

/// The child role: check, open, read and update every image listed in the file
/// `$PISCES_CORRUPTION_CHILD`, reporting `BEGIN i` / `END i outcome` on stdout.
#[test]
fn child_role() {
    let Some(list) = std::env::var_os(CHILD_ENV) else {
        return;
    };
    let text = std::fs::read_to_string(list).unwrap();
    let mut out = std::io::stdout();
    for line in text.lines() {
        let mut it = line.splitn(4, ' ');
        let (i, engine, mode, path) = (
            it.next().unwrap(),
            it.next().unwrap(),
            it.next().unwrap(),
            it.next().unwrap(),
        );
        let engine = EngineId::from_name(engine).unwrap();
        writeln!(out, "BEGIN {i}").unwrap();
        out.flush().unwrap();
        let path = PathBuf::from(path);
        let r = std::panic::catch_unwind(|| match mode {
            "oracle" => oracle_image(&path, engine),
            _ => use_image(&path, engine),
        });
        let outcome = match r {
            Ok(o) => o,
            Err(p) => {
                let msg = p
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| p.downcast_ref::<String>().cloned())
                    .unwrap_or_default();
                format!("panic: {}", msg.replace('\n', " "))
            }
        };
        writeln!(out, "END {i} {outcome}").unwrap();
        out.flush().unwrap();
    }
}

fn kind(e: &Error) -> String {
    format!("{e:?}")
        .split(['(', ' ', '{'])
        .next()
        .unwrap()
        .to_string()
}

/// Check, open, read everything, run a few transactions. The outcome: `ok`,
/// `open-err <kind>`, `use-err <kind>` (opened, then an operation failed).
fn use_image(path: &Path, engine: EngineId) -> String {
    let checked = match check_pool_deep(path, MediumKind::DRAM) {
        Ok(r) if r.is_ok() => "check-ok",
        Ok(_) => "check-problems",
        Err(_) => "check-err",
    };
    let pool = match Pool::open(path, cfg(engine)) {
        Ok(p) => p,
        Err(e) => return format!("open-err {}: ({checked}) {e}", kind(&e)),
    };
    let r = (|| -> pisces::Result<()> {
        let root: PPtr<Root> = pool.root()?;
        let r = pool.run(|tx| Ok(*tx.read(root)?))?;
        pool.run(|tx| {
            r.map.check(tx)?;
            r.map.len(tx)?;
            for e in r.map.iter(tx) {
                e?;
            }
            r.tree.len(tx)?;
            for e in r.tree.iter(tx) {
                e?;
            }
            r.tree.check(tx)?;
            Ok(())
        })?;
        for k in 0..6u64 {
            pool.run(|tx| {
                r.map.insert(tx, 10_000 + k, [k; 3])?;
                r.tree.insert(tx, 10_000 + k, k)?;
                r.map.remove(tx, &(k * 3))?;
                r.tree.remove(tx, &(k * 7))?;
                tx.write(root)?.count += 1;
                Ok(())
            })?;
        }
        pool.sync()
    })();
    match r {
        Ok(()) => format!("ok ({checked})"),
        Err(e) => format!("use-err {}: ({checked}) {e}", kind(&e)),
    }
}

// ---------------------------------------------------------------------------------
// Damage to the logs and the engine metadata only, on every durable engine.
//
// The heap is left alone: whatever an image opens to must be a state the committed
// transactions produced. The workload keeps a hash map and a B+-tree with the same
// keys (changed together in every transaction, which also counts itself in
// `MetaRoot::count`), so an image that opens is *correct* when both containers pass
// their own checks, hold the same keys, and equal the workload's state after `count`
// transactions (a prefix); anything else is *wrong*. A correct state with fewer
// transactions than its undamaged base is counted apart (*older*: committed
// transactions lost without an error, but no inconsistency). Refusing (an error from
// open or from use) is always allowed.
//
// Three classes of damage: random damage to written bytes (bit flips, garbage, a
// zeroed line; [`META_CLASS`]), a zeroed 4 KiB page of the logs or the engine area,
// where the checkpoint logs are ([`META_PAGE`]), and one written word of the logs
// replaced or one of its bytes changed ([`META_WORD`]), on four bases per engine: a
// copy of the open pool, a cleanly closed pool, and two crash images. Wrong and older
// states fail the test, in every class, on every engine: the words recovery trusts
// carry checks (the kit's watermark, SP3's `retired` words:
// `kit::log::checked_word`), the root slot has its record in the superblock, log
// records carry checksums, and a log's newest-record word (the kit's `redo_log`,
// stored about once per page of log) tells records lost with the page that holds a
// log's end (a zeroed page) from a torn tail, so such a loss is refused. A log's
// newest record can be lost unseen (it may be torn by a crash), and so can its
// newest few when smaller damage takes them and leaves older ones of their page; the
// workload's tail keeps each log's newest records off the containers (see
// [`meta_fill`]).
// ---------------------------------------------------------------------------------

/// The class: random damage to the bytes of the log regions and the engine area.
const META_CLASS: &str = "logs-meta";
/// The class: one 4 KiB page of the log regions or the engine area (where checkpoint
/// logs are) zeroed, one that holds written bytes.
const META_PAGE: &str = "page-zeroed";
/// The class: one written 8-byte word of the log regions replaced, or one byte of it
/// changed: damage inside records (most written words of a log are), not only at a
/// torn tail.
const META_WORD: &str = "record-word";
/// The damage classes judged by the state oracle.
const META_CLASSES: [&str; 3] = [META_CLASS, META_PAGE, META_WORD];
/// An undamaged base, opened with the same oracle (it must be correct).
const META_BASE: &str = "meta-base";

/// Every engine of this build that keeps a durable pool in the pool format (pmdk has
/// its own file format; volatile and bare are not durable).
const DURABLE: [EngineId; 6] = [
    EngineId::Pisces,
    EngineId::Undo,
    EngineId::Mvcc,
    EngineId::Sp3,
    EngineId::Spht,
    EngineId::Timestone,
];

/// Transactions of the logs-and-metadata workload.
const META_TXNS: u64 = 48;

fn meta_cfg(engine: EngineId) -> Config {
    // spht: the background replayer stays idle, so the logs keep the committed
    // transactions (a full log still replays).
    let options = if engine == EngineId::Spht {
        EngineOptions::new().set("replay_hold", "true")
    } else {
        EngineOptions::new()
    };
    cfg(engine)
        .log_bytes_per_thread(32 << 10)
        .engine_options(options)
}

/// The root of the logs-and-metadata workload.
#[derive(Clone, Copy, Pod, Zeroable)]
#[repr(C)]
struct MetaRoot {
    /// Transactions on the containers so far.
    count: u64,
    map: HashMap<u64, [u64; 3]>,
    tree: BTreeMap<u64, u64>,
    /// Written by the tail transactions of each thread handle (see [`meta_fill`]).
    tail: [u64; 2],
}

/// The key transaction `k` inserts (distinct for k < 1000).
fn meta_key(k: u64) -> u64 {
    k * 7 % 1000
}

/// Transaction `k` of the workload, on any handle.
fn meta_txn(
    tx: &mut pisces::Tx<'_>,
    root: PPtr<MetaRoot>,
    r: &MetaRoot,
    k: u64,
) -> pisces::Result<()> {
    let key = meta_key(k);
    r.map.insert(tx, key, [k; 3])?;
    r.tree.insert(tx, key, k)?;
    if k % 5 == 4 {
        let old = meta_key(k - 3);
        r.map.remove(tx, &old)?;
        r.tree.remove(tx, &old)?;
    }
    tx.write(root)?.count += 1;
    Ok(())
}

/// The tree the workload leaves after its first `count` transactions (key -> k; the
/// map holds [k; 3]).
fn meta_expected(count: u64) -> Counts<u64, u64> {
    let mut m = Counts::new();
    for k in 0..count {
        m.insert(meta_key(k), k);
        if k % 5 == 4 {
            m.remove(&meta_key(k - 3));
        }
    }
    m
}

/// Transactions at the end of the workload that touch neither container, alternating
/// between the two thread handles (each writes its handle's `MetaRoot::tail` word).
const META_TAIL: u64 = 4;

/// Run the workload on two thread handles (both logs hold records): the root, `n`
/// transactions on both containers, then [`META_TAIL`] tail transactions. Returns the
/// handles, still open, and the simulator's fence count where the tail starts
/// (`sim`: the medium, if one). With `stop_on_error`, an error (a crashed
/// simulator's medium may refuse writes) ends the run instead of failing it.
///
/// Why a tail: damage confined to a log's newest record cannot be told from a torn
/// tail (the kit's `redo_log` docs), and recovery rightly drops a torn record; if a
/// later transaction of another thread depended on it, no log-only check could see
/// the loss. The tail makes every log's newest record independent of the containers,
/// so the class measures what recovery can detect: damage before a log's end, and
/// damage to the engine's metadata.
fn meta_fill(
    pool: &Pool,
    n: u64,
    stop_on_error: bool,
    sim: Option<&SimMedium>,
) -> (Vec<pisces::ThreadHandle>, u64) {
    let root: PPtr<MetaRoot> = pool.root().unwrap();
    let made = pool
        .run(|tx| {
            let map = HashMap::fixed(tx, 16)?;
            *tx.write(root)? = MetaRoot {
                count: 0,
                map,
                tree: BTreeMap::default(),
                tail: [0; 2],
            };
            Ok(())
        })
        .and_then(|()| {
            // The tree apart: both containers with their element counts exceed a
            // small log.
            pool.run(|tx| {
                let tree = BTreeMap::new(tx)?;
                tx.write(root)?.tree = tree;
                Ok(())
            })
        });
    if made.is_err() && stop_on_error {
        return (Vec::new(), 0);
    }
    made.unwrap();
    let r = pool.run(|tx| Ok(*tx.read(root)?)).unwrap();
    let mut hs = vec![pool.handle().unwrap(), pool.handle().unwrap()];
    let mut tail_at = 0;
    for k in 0..n + META_TAIL {
        let h = (k % 2) as usize;
        if k == n {
            tail_at = sim.map_or(0, |s| s.fence_count());
        }
        let done = hs[h].run(|tx| {
            if k < n {
                meta_txn(tx, root, &r, k)
            } else {
                tx.write(root)?.tail[h] = k;
                Ok(())
            }
        });
        match done {
            Ok(()) => {}
            Err(_) if stop_on_error => break,
            Err(e) => panic!("transaction {k}: {e}"),
        }
    }
    (hs, tail_at)
}

/// The byte ranges of a pool the class may damage: the engine area and the log
/// regions (not the superblocks, the slab table or the heap).
fn meta_regions(pool: &Pool) -> Vec<(usize, usize)> {
    let l = pool.superblock().unwrap().layout().unwrap();
    let logs_end = l.logs_offset + l.max_threads * l.logs_per_thread * l.log_bytes_per_thread;
    vec![
        (pisces::tools::layout::ENGINE_AREA_OFFSET, l.logs_offset),
        (l.logs_offset, logs_end),
    ]
}

/// The bases of one engine: a file copied while the pool is open (transactions
/// pending in the logs), a simulator image of a crash right after the workload, and
/// one of a crash at a fence in the middle of its tail (for undo: a transaction in
/// flight).
fn meta_bases(dir: &Path, engine: EngineId) -> Vec<(Base, Vec<(usize, usize)>)> {
    let name = engine.name();
    let mut out = Vec::new();
    let p = dir.join(format!("{name}-meta-live.pool"));
    let pool = Pool::create(&p, meta_cfg(engine)).unwrap();
    let regions = meta_regions(&pool);
    let (hs, _) = meta_fill(&pool, META_TXNS, false, None);
    let bytes = std::fs::read(&p).unwrap();
    drop(hs);
    drop(pool);
    let base = |what: &str, bytes: Vec<u8>| Base {
        name: format!("{name}/{what}"),
        engine,
        bytes,
        mid_records: Vec::new(),
    };
    out.push((base("copied-open", bytes), regions.clone()));
    let p = dir.join(format!("{name}-meta-closed.pool"));
    let pool = Pool::create(&p, meta_cfg(engine)).unwrap();
    drop(meta_fill(&pool, META_TXNS, false, None));
    drop(pool);
    out.push((base("closed", std::fs::read(&p).unwrap()), regions.clone()));
    let sim = Arc::new(SimMedium::new(SIZE as usize, SimConfig::default()).unwrap());
    let pool = Pool::create_on(sim.clone(), meta_cfg(engine)).unwrap();
    let (hs, tail_at) = meta_fill(&pool, META_TXNS, false, Some(&sim));
    let end = sim.fence_count();
    out.push((
        base("sim-crash-end", sim.crash_image_now(1)),
        regions.clone(),
    ));
    drop(hs);
    drop(pool);
    let cfg = SimConfig::crash_at_fence(tail_at + (end - tail_at) / 2).with_seed(2);
    let sim = Arc::new(SimMedium::new(SIZE as usize, cfg).unwrap());
    let pool = Pool::create_on(sim.clone(), meta_cfg(engine)).unwrap();
    let (hs, _) = meta_fill(&pool, META_TXNS, true, Some(&sim));
    let image = sim.crash_image(2).unwrap_or_else(|| sim.crash_image_now(2));
    out.push((base("sim-crash-tail", image), regions));
    drop(hs);
    drop(pool);
    out
}

/// One damage of the class to a copy of `base`, inside `regions`: a few bit flips, a
/// run of garbage, or a zeroed cache line, at a written (nonzero) word where one is
/// found, so that most damage lands on records, head words and markers rather than
/// on unused log space.
fn meta_corrupt(base: &Base, regions: &[(usize, usize)], rng: &mut Rng) -> (Vec<u8>, String) {
    let mut b = base.bytes.clone();
    // The engine area is small: as much weight as all the logs.
    let ri = rng.below(regions.len() as u64) as usize;
    let (lo, hi) = regions[ri];
    let mut at = lo + (rng.below((hi - lo) as u64) as usize & !7);
    for _ in 0..64 {
        let o = lo + (rng.below((hi - lo) as u64) as usize & !7);
        if b[o..o + 8].iter().any(|&x| x != 0) {
            at = o;
            break;
        }
    }
    let what = match rng.below(4) {
        0 | 1 => {
            for _ in 0..=rng.below(3) {
                let o = at + rng.below(8) as usize;
                b[o] ^= 1 << rng.below(8);
            }
            "bits flipped in the word"
        }
        2 => {
            let n = (8 + rng.below(57) as usize).min(hi - at);
            for x in &mut b[at..at + n] {
                *x = rng.next() as u8;
            }
            "garbage from"
        }
        _ => {
            let line = at & !63;
            b[line.max(lo)..(line + 64).min(hi)].fill(0);
            "the line zeroed around"
        }
    };
    let region = if ri == 0 { "engine area" } else { "logs" };
    (b, format!("{what} at {at:#x} ({region} +{:#x})", at - lo))
}

/// A written (nonzero) 8-byte word of `b` in `lo..hi`, if one is found in a few tries.
fn written_word(b: &[u8], lo: usize, hi: usize, rng: &mut Rng) -> Option<usize> {
    (0..256)
        .map(|_| lo + (rng.below((hi - lo) as u64) as usize & !7))
        .find(|&o| b[o..o + 8].iter().any(|&x| x != 0))
}

/// One damage of class [`META_PAGE`]: a 4 KiB page of `regions` that holds a written
/// word, zeroed.
fn page_corrupt(base: &Base, regions: &[(usize, usize)], rng: &mut Rng) -> (Vec<u8>, String) {
    let mut b = base.bytes.clone();
    let ri = rng.below(regions.len() as u64) as usize;
    let (lo, hi) = regions[ri];
    let at = written_word(&b, lo, hi, rng).unwrap_or(lo);
    let page = (at & !4095).max(lo);
    b[page..(page + 4096).min(hi)].fill(0);
    let region = if ri == 0 { "engine area" } else { "logs" };
    (
        b,
        format!("the page zeroed at {page:#x} ({region} +{:#x})", page - lo),
    )
}

/// One damage of class [`META_WORD`]: a written word of the log regions replaced by
/// another nonzero value, or one of its bytes changed.
fn word_corrupt(base: &Base, regions: &[(usize, usize)], rng: &mut Rng) -> (Vec<u8>, String) {
    let mut b = base.bytes.clone();
    let (lo, hi) = regions[1];
    let at = written_word(&b, lo, hi, rng).unwrap_or(lo);
    let what = if rng.below(2) == 0 {
        let old = u64::from_le_bytes(b[at..at + 8].try_into().unwrap());
        let new = old ^ (rng.next() | 1);
        b[at..at + 8].copy_from_slice(&new.to_le_bytes());
        "the word replaced"
    } else {
        b[at + rng.below(8) as usize] ^= 1 + rng.below(255) as u8;
        "a byte of the word changed"
    };
    (b, format!("{what} at {at:#x} (logs +{:#x})", at - lo))
}

/// Open an image and judge its state: `refused ...` (open, a read or an update
/// failed), `correct` or `WRONG ...` (see the section's comment). After the state
/// is judged, a few more transactions run and the state is judged again.
fn oracle_image(path: &Path, engine: EngineId) -> String {
    let pool = match Pool::open(path, meta_cfg(engine)) {
        Ok(p) => p,
        Err(e) => return format!("refused open {}: {e}", kind(&e)),
    };
    // Some(count) of a correct state, or what is wrong.
    let judge = |after: u64| -> pisces::Result<Result<u64, String>> {
        let root: PPtr<MetaRoot> = pool.root()?;
        let r = pool.run(|tx| Ok(*tx.read(root)?))?;
        if after == 0 && bytemuck::bytes_of(&r).iter().all(|&b| b == 0) {
            // No root: the state before the workload's first transaction.
            return Ok(Ok(0));
        }
        pool.run(|tx| {
            // A container whose own check fails is a wrong state, not a refusal:
            // the engine opened it.
            if let Err(e) = r.map.check(tx) {
                return Ok(Err(format!("the map's check fails: {e}")));
            }
            if let Err(e) = r.tree.check(tx) {
                return Ok(Err(format!("the tree's check fails: {e}")));
            }
            let mut map = Counts::new();
            for e in r.map.iter(tx) {
                let (k, v) = e?;
                map.insert(*k, *v);
            }
            let mut tree = Counts::new();
            for e in r.tree.iter(tx) {
                let (k, v) = e?;
                tree.insert(*k, *v);
            }
            let map_keys: Vec<u64> = map.keys().copied().collect();
            let tree_keys: Vec<u64> = tree.keys().copied().collect();
            if map_keys != tree_keys {
                return Ok(Err(format!(
                    "map and tree keys differ ({} and {} keys, count {})",
                    map_keys.len(),
                    tree_keys.len(),
                    r.count
                )));
            }
            if after > 0 {
                // After the extra transactions only the key sets are compared.
                return Ok(Ok(r.count));
            }
            let want = meta_expected(r.count.min(1000));
            let map_as_tree: Counts<u64, u64> = map.iter().map(|(k, v)| (*k, v[0])).collect();
            if r.count > META_TXNS || tree != want || map_as_tree != want {
                return Ok(Err(format!(
                    "not the state after {} transactions ({} keys)",
                    r.count,
                    tree.len()
                )));
            }
            Ok(Ok(r.count))
        })
    };
    let r = (|| -> pisces::Result<Result<u64, String>> {
        let count = match judge(0)? {
            Ok(c) => c,
            wrong => return Ok(wrong),
        };
        if count == 0 {
            // An empty pool: nothing more to judge.
            return Ok(Ok(0));
        }
        let root: PPtr<MetaRoot> = pool.root()?;
        let r = pool.run(|tx| Ok(*tx.read(root)?))?;
        for k in 0..4u64 {
            pool.run(|tx| {
                r.map.insert(tx, 10_000 + k, [k; 3])?;
                r.tree.insert(tx, 10_000 + k, k)?;
                r.map.remove(tx, &meta_key(k))?;
                r.tree.remove(tx, &meta_key(k))?;
                Ok(())
            })?;
        }
        pool.sync()?;
        Ok(judge(1)?.map(|_| count))
    })();
    match r {
        Ok(Ok(count)) => format!("correct {count}"),
        Ok(Err(w)) => format!("WRONG: {w}"),
        Err(e) => format!("refused use {}: {e}", kind(&e)),
    }
}

#[test]
fn logs_and_metadata_damage_on_every_durable_engine() {
    if std::env::var_os(CHILD_ENV).is_some() {
        return;
    }
    let t0 = std::time::Instant::now();
    let scale: usize = std::env::var("PISCES_CORRUPTION_SCALE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    let dir = tempfile::Builder::new()
        .prefix("pisces-meta-damage")
        .tempdir_in(if Path::new("/dev/shm").is_dir() {
            "/dev/shm"
        } else {
            "/tmp"
        })
        .unwrap();
    let mut rng = Rng(0xD1B5_4A32_D192_ED03);
    let mut tally = Tally::default();
    let list = dir.path().join("jobs.txt");
    let mut jobs = Vec::new();
    let mut names = Vec::new();
    // Images per base and class (four bases per engine): about as many images as the
    // campaign ran when it had one class and three bases.
    let per_class = [
        (META_CLASS, 50 * scale),
        (META_PAGE, 13 * scale),
        (META_WORD, 12 * scale),
    ];
    let per_base: usize = per_class.iter().map(|c| c.1).sum();
    // `PISCES_CORRUPTION_ENGINES=spht,sp3` limits the campaign to those engines.
    let only = std::env::var("PISCES_CORRUPTION_ENGINES").ok();
    let chosen = |e: EngineId| {
        only.as_deref()
            .is_none_or(|l| l.split(',').any(|n| n == e.name()))
    };
    for engine in DURABLE.into_iter().filter(|&e| chosen(e)) {
        for (base, regions) in meta_bases(dir.path(), engine) {
            let bi = names.len();
            names.push(base.name.clone());
            if let Some(keep) = std::env::var_os(KEEP_ENV) {
                std::fs::write(Path::new(&keep).join(format!("base{bi}.pool")), &base.bytes)
                    .unwrap();
            }
            let mut push = |class, (bytes, what): (Vec<u8>, String)| {
                let path = dir.path().join(format!("meta{}.pool", jobs.len()));
                std::fs::write(&path, bytes).unwrap();
                jobs.push(Job {
                    engine,
                    class,
                    base: bi,
                    path,
                    what,
                });
            };
            push(META_BASE, (base.bytes.clone(), String::new()));
            for (class, n) in per_class {
                for _ in 0..n {
                    let damaged = match class {
                        META_PAGE => page_corrupt(&base, &regions, &mut rng),
                        META_WORD => word_corrupt(&base, &regions, &mut rng),
                        _ => meta_corrupt(&base, &regions, &mut rng),
                    };
                    push(class, damaged);
                }
            }
        }
    }
    let mut from = 0;
    while from < jobs.len() {
        from = run_child(&jobs, from, &list, &mut tally);
    }
    println!(
        "logs-and-metadata damage: {} images from {} bases in {:.1} s",
        tally.total,
        names.len(),
        t0.elapsed().as_secs_f64()
    );
    let rows = [
        (META_CLASS, "logs"),
        (META_CLASS, "engine area"),
        (META_PAGE, "logs"),
        (META_PAGE, "engine area"),
        (META_WORD, "logs"),
    ];
    for (class, region) in rows {
        let row = format!("{class}, {region}");
        println!("  {class}, damage in the {region}:");
        println!(
            "    {:<10} {:>7} {:>7} {:>7} {:>7}",
            "engine", "refused", "correct", "older", "WRONG"
        );
        for engine in DURABLE {
            let o = tally.by_engine.get(&(row.clone(), engine.name()));
            let n = |what: &str| o.and_then(|o| o.get(what)).copied().unwrap_or(0);
            println!(
                "    {:<10} {:>7} {:>7} {:>7} {:>7}",
                engine.name(),
                n("refused"),
                n("correct"),
                n("older"),
                n("WRONG")
            );
        }
    }
    assert_eq!(
        tally.total,
        names.len() * (per_base + 1),
        "images not judged"
    );
    assert!(
        tally.failures.is_empty(),
        "{} failures (an undamaged base must open correct; a damaged one must be refused \
         or correct, never wrong, and never panic or hang):\n{}",
        tally.failures.len(),
        tally.failures.join("\n")
    );
}
