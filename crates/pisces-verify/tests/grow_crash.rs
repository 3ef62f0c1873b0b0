//! Crash consistency of pool growth on the crash simulator.
//!
//! A single thread appends 8 KiB objects to a list, one per transaction, on a pool that
//! starts small and may grow. A first run without a crash finds the transaction whose
//! allocation grows the pool; then the machine is crashed at every fence from the
//! transaction before it to two after it (the file extension, the superblock update,
//! the formatting of the first new slab, the commit of the first object in the new
//! region, and what follows), and each crash image (the adversary's extremes and random
//! choices) is recovered as a fresh process would:
//! * the pool opens, its superblock size is at most the image's length;
//! * every transaction acknowledged before the crash is present and intact (at most
//!   the one in flight more), and the allocator state is sound;
//! * the recovered pool grows again and keeps working.
//!
//! With the `mutation` feature the same campaign runs with the superblock's new size
//! made durable only when the first block of the new region is published (after its
//! transaction committed): it must find violations.

use pisces::medium::Medium;
use pisces::{Config, EngineId, PPtr, Pool};
use pisces_verify::sim::{Adversary, SimConfig, SimMedium};
use std::sync::Arc;

const SIZE: usize = 512 << 10;
const MAX: usize = 4 << 20;
const WORDS: usize = 1024;
type Obj = [u64; WORDS];

fn cfg(engine: EngineId) -> Config {
    Config::default()
        .size(SIZE as u64)
        .max_size(MAX as u64)
        .engine(engine)
        .max_threads(1)
        .log_bytes_per_thread(64 << 10)
}

fn pattern(i: u64, k: usize) -> u64 {
    i.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ k as u64
}

fn append_one(pool: &Pool, root: PPtr<[u64; 2]>) -> pisces::Result<()> {
    pool.run(|tx| {
        let [head, count] = *tx.read(root)?;
        let mut o: Obj = [0; WORDS];
        o[0] = head;
        o[1] = count;
        for (k, w) in o.iter_mut().enumerate().skip(2) {
            *w = pattern(count, k);
        }
        let p = tx.alloc(o)?;
        *tx.write(root)? = [p.offset(), count + 1];
        Ok(())
    })
}

/// The list's length if every object is intact, else what is wrong.
fn verify(pool: &Pool, root: PPtr<[u64; 2]>) -> Result<u64, String> {
    pool.run(|tx| {
        let [mut head, count] = *tx.read(root)?;
        let mut seen = 0;
        while head != 0 {
            let o = tx.read(PPtr::<Obj>::from_offset(head))?;
            let i = count.wrapping_sub(1 + seen);
            if o[1] != i
                || o.iter()
                    .enumerate()
                    .skip(2)
                    .any(|(k, &w)| w != pattern(i, k))
            {
                return Ok(Err(format!("object {i} at {head:#x} is damaged")));
            }
            head = o[0];
            seen += 1;
            if seen > count {
                break;
            }
        }
        Ok(if seen == count {
            Ok(count)
        } else {
            Err(format!("list of {count} objects has {seen}"))
        })
    })
    .map_err(|e| format!("reading the list: {e}"))?
}

/// Objects appended before the workload's crash-window transactions.
struct Run {
    /// Transactions acknowledged before the crash (all of them without one).
    acked: u64,
    /// Fence count before each transaction, and at the end.
    fences: Vec<u64>,
    /// Pool size after each transaction.
    sizes: Vec<u64>,
}

/// Create a pool on `sim` and append `n` objects; stops at the crash.
fn workload(sim: &Arc<SimMedium>, engine: EngineId, n: u64) -> Run {
    let medium: Arc<dyn Medium> = sim.clone();
    let mut run = Run {
        acked: 0,
        fences: Vec::new(),
        sizes: Vec::new(),
    };
    let Ok(pool) = Pool::create_on(medium, cfg(engine)) else {
        return run;
    };
    let Ok(root) = pool.root::<[u64; 2]>() else {
        return run;
    };
    for _ in 0..n {
        run.fences.push(sim.fence_count());
        if append_one(&pool, root).is_err() || sim.crashed() {
            return run;
        }
        run.acked += 1;
        run.sizes
            .push(pool.superblock().map_or(0, |sb| sb.pool_size));
    }
    run.fences.push(sim.fence_count());
    run
}

/// Recover `image` and check it against `acked`; `Err` describes a violation.
fn recover(image: Vec<u8>, acked: u64, grow_again: bool) -> Result<(), String> {
    let len = image.len();
    let sim = Arc::new(
        SimMedium::from_image(image, SimConfig::default().with_max_len(MAX))
            .map_err(|e| e.to_string())?,
    );
    let pool = Pool::open_on(sim, Config::default()).map_err(|e| format!("open: {e}"))?;
    let sb = pool.superblock().ok_or("no superblock")?;
    if sb.pool_size as usize > len {
        return Err(format!(
            "superblock size {} exceeds the image's {len} bytes",
            sb.pool_size
        ));
    }
    if acked == 0 {
        // The pool itself may not have been created durably yet.
        return Ok(());
    }
    let root: PPtr<[u64; 2]> = pool.root().map_err(|e| format!("root: {e}"))?;
    let n = verify(&pool, root)?;
    if n < acked || n > acked + 1 {
        return Err(format!("{n} objects after recovery, {acked} acknowledged"));
    }
    let objects = pool
        .allocated_objects()
        .map_err(|e| format!("allocator: {e}"))?;
    if objects.len() as u64 != n + 1 {
        return Err(format!(
            "{} allocated objects for a list of {n} and its root",
            objects.len()
        ));
    }
    // The recovered pool keeps working, and (when asked) grows again.
    let mut added = 0;
    loop {
        append_one(&pool, root).map_err(|e| format!("append after recovery: {e}"))?;
        added += 1;
        let size = pool.superblock().ok_or("no superblock")?.pool_size;
        if added >= 8 && (!grow_again || size > sb.pool_size) {
            break;
        }
        if added as usize > MAX / (WORDS * 8) {
            return Err("the recovered pool did not grow".into());
        }
    }
    let m = verify(&pool, root)?;
    if m != n + added {
        return Err(format!("{m} objects after appending {added} to {n}"));
    }
    Ok(())
}

/// Crash at every fence around the first growth; returns (states checked, violations).
fn campaign(engine: EngineId) -> (usize, Vec<String>) {
    // Enough transactions to outgrow the initial heap.
    let n = (2 * SIZE / (WORDS * 8)) as u64;
    let clean = Arc::new(SimMedium::new(SIZE, SimConfig::default().with_max_len(MAX)).unwrap());
    let run = workload(&clean, engine, n);
    assert_eq!(run.acked, n, "{engine}: the run without a crash failed");
    let grew = run
        .sizes
        .iter()
        .position(|&s| s > SIZE as u64)
        .unwrap_or_else(|| panic!("{engine}: the pool did not grow"));
    let from = run.fences[grew.saturating_sub(1)];
    let to = run.fences[(grew + 3).min(run.fences.len() - 1)];
    let mut states = 0;
    let mut violations = Vec::new();
    for f in from..to {
        let sim =
            Arc::new(SimMedium::new(SIZE, SimConfig::crash_at_fence(f).with_max_len(MAX)).unwrap());
        let r = workload(&sim, engine, n);
        if !sim.crashed() {
            continue;
        }
        let advs = [
            Adversary::DurableOnly,
            Adversary::AllWritten,
            Adversary::default(),
            Adversary::default(),
        ];
        for (seed, adv) in advs.into_iter().enumerate() {
            let img = sim.crash_image_with(seed as u64, adv).unwrap().image;
            states += 1;
            // Growing again costs a hundred transactions: once per crash point.
            if let Err(v) = recover(img, r.acked, adv == Adversary::DurableOnly) {
                violations.push(format!(
                    "{engine}, crash at fence {f} ({} acknowledged), {adv:?}: {v}",
                    r.acked
                ));
            }
        }
    }
    (states, violations)
}

/// The clean campaigns of every engine, then (with the `mutation` feature) the
/// mutated one in its scenario.
#[test]
fn crash_at_every_fence_of_a_growth() {
    for engine in [
        EngineId::Pisces,
        EngineId::Undo,
        EngineId::Mvcc,
        EngineId::Sp3,
        EngineId::Timestone,
    ] {
        let (states, violations) = campaign(engine);
        eprintln!(
            "{engine}: {states} crash states, {} violations",
            violations.len()
        );
        assert!(states >= 20, "{engine}: only {states} crash states");
        assert!(violations.is_empty(), "{violations:#?}");
    }
    #[cfg(feature = "mutation")]
    {
        let sc = pisces::mutation::Scenario::setup();
        // SAFETY: a mutation test: the run exists to show the removed step matters, and its
        // outcome is read only as that evidence (see `pisces::mutation::Scenario::set`).
        unsafe {
            sc.set(Some(
                EngineId::Pisces
                    .mutation("grow-size-late")
                    .expect("a point of the heap"),
            ))
        };
        let (states, violations) = campaign(EngineId::Pisces);
        drop(sc);
        eprintln!(
            "grow-size-late: {states} crash states, {} violations, e.g. {:?}",
            violations.len(),
            violations.last()
        );
        assert!(
            !violations.is_empty(),
            "making the grown size durable late was not detected"
        );
    }
}
