//! Corruption campaign: small filled pools (pisces, mvcc, undo; closed cleanly, copied
//! while transactions run, and crash images of the simulator) damaged at random — bit
//! flips, zeroed 4 KiB pages, truncation, runs of garbage, and records in the middle of
//! a log — then checked, opened, read and updated **in a child process** (this test
//! binary re-executed with `PISCES_CORRUPTION_CHILD` set), under a 10 s watchdog per
//! image. Required: no panic, no signal, no hang (errors are fine), and every log
//! damaged in the middle (not a torn tail) refused.
//!
//! `cargo test -p pisces --release --test corruption -- --nocapture` prints the
//! outcomes per class. `PISCES_CORRUPTION_SCALE=4` runs four times as many images.

use pisces::check::check_pool_deep;
use pisces::check::{REDO_RECORD_HEADER as HEADER_LEN, REDO_RING_OFFSET as RING_OFFSET};
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

#[derive(Clone, Copy, Pod, Zeroable)]
#[repr(C)]
struct Root {
    count: u64,
    map: HashMap<u64, [u64; 3]>,
    tree: BTreeMap<u64, u64>,
}

fn cfg(engine: EngineId) -> Config {
    Config {
        size: SIZE,
        engine: Some(engine),
        max_threads: 2,
        log_bytes_per_thread: 16 << 10,
        // The engine's defaults (for Pisces: flush-diff, group commit of 8).
        engine_options: EngineOptions::new(),
        ..Config::default()
    }
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
        let map = HashMap::create(tx, 16)?;
        let tree = BTreeMap::create(tx)?;
        *tx.write(root)? = Root {
            count: 0,
            map,
            tree,
        };
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
    (pisces::heap::layout::LOGS_OFFSET, 16 << 10)
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
    let logs = pisces::heap::layout::LOGS_OFFSET;
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
}

#[derive(Default)]
struct Tally {
    /// class -> outcome -> count
    by_class: Counts<&'static str, Counts<String, usize>>,
    failures: Vec<String>,
    total: usize,
}

/// Run `jobs[from..]` in a child process until it finishes them, dies or hangs;
/// returns the index to resume at and records outcomes.
fn run_child(jobs: &[Job], from: usize, list: &Path, tally: &mut Tally) -> usize {
    {
        let mut f = std::fs::File::create(list).unwrap();
        for (i, j) in jobs.iter().enumerate().skip(from) {
            writeln!(f, "{i} {} {}", j.engine.name(), j.path.display()).unwrap();
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
        tally.total += 1;
        let o = outcome.split(':').next().unwrap().to_string();
        *tally
            .by_class
            .entry(j.class)
            .or_default()
            .entry(o.clone())
            .or_default() += 1;
        let bad = o == "panic" || o == "signal" || o == "hang" || o == "died";
        let refused = o.starts_with("open-err") && outcome.contains("Corrupt");
        if bad || (j.class == "log-mid" && !refused) {
            tally.failures.push(format!(
                "image {i} ({}, base {}): {outcome}",
                j.class, j.base
            ));
        }
        let _ = std::fs::remove_file(&j.path);
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
        let mut it = line.splitn(3, ' ');
        let (i, engine, path) = (it.next().unwrap(), it.next().unwrap(), it.next().unwrap());
        let engine = EngineId::from_name(engine).unwrap();
        writeln!(out, "BEGIN {i}").unwrap();
        out.flush().unwrap();
        let path = PathBuf::from(path);
        let r = std::panic::catch_unwind(|| use_image(&path, engine));
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
