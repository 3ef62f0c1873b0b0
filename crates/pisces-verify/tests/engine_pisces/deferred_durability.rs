//! Deferred durability (`Durability::Deferred`) on the crash simulator: a thread's
//! deferred commits survive a crash as a prefix, and all of them once `wait_durable`
//! returned; a transaction that read a deferred commit's writes never survives without
//! it; a write-back never puts a deferred commit's writes home before its record is
//! durable. With the `mutation` feature, removing either of the two syncs that the last
//! two rules need is caught here.

use pisces::{Config, Durability, EngineId, EngineOptions, PPtr, PersistenceDomain, Pool};
use pisces::{ThreadHandle, TxOptions};
use pisces_verify::sim::{Adversary, SimConfig, SimMedium};
use std::sync::Arc;

fn deferred() -> TxOptions {
    TxOptions::default().durability(Durability::Deferred)
}

fn sim_cfg(domain: PersistenceDomain) -> SimConfig {
    SimConfig {
        domain,
        ..SimConfig::default()
    }
}

/// Two thread slots, 64 KiB logs, group commit of 8.
fn cfg() -> Config {
    Config::default()
        .size(8 << 20)
        .engine(EngineId::Pisces)
        .max_threads(2)
        .log_bytes_per_thread(64 << 10)
        .engine_options(EngineOptions::new().set("group_commit", 8))
}

fn sim_pool(domain: PersistenceDomain) -> (Arc<SimMedium>, Pool) {
    let sim = Arc::new(SimMedium::new(8 << 20, sim_cfg(domain)).unwrap());
    let pool = Pool::create_on(sim.clone(), cfg()).unwrap();
    (sim, pool)
}

fn reboot(image: Vec<u8>, domain: PersistenceDomain) -> Pool {
    let m = SimMedium::from_image(image, sim_cfg(domain)).unwrap();
    Pool::open_on(Arc::new(m), cfg()).unwrap()
}

const DOMAINS: [PersistenceDomain; 2] = [PersistenceDomain::Adr, PersistenceDomain::PageCache];

/// Commit `i` (from 0) of the prefix test sets `marks[i] = i + 1` and `count = i + 1`.
type Marks = [u64; 33];

/// What a recovered `Marks` holds if it is a prefix of the commits: their count.
fn prefix_of(m: &Marks) -> Result<u64, String> {
    let count = m[32];
    for (i, &v) in m[..32].iter().enumerate() {
        let want = if (i as u64) < count { i as u64 + 1 } else { 0 };
        if v != want {
            return Err(format!("count {count} but marks {:?}", &m[..32]));
        }
    }
    Ok(count)
}

/// A thread's deferred commits: before its wait, a crash keeps a prefix of them (any
/// prefix, whatever the adversary keeps of the unfenced records); after it, all.
#[test]
fn deferred_commits_survive_as_a_prefix_and_whole_after_the_wait() {
    for domain in DOMAINS {
        let (sim, pool) = sim_pool(domain);
        let root: PPtr<Marks> = pool.root().unwrap();
        let mut h = pool.handle().unwrap();
        for i in 0..20u64 {
            h.run_with(deferred(), |tx| {
                let m = tx.write(root)?;
                m[i as usize] = i + 1;
                m[32] = i + 1;
                Ok(())
            })
            .unwrap();
        }
        let mut counts = std::collections::BTreeSet::new();
        for seed in 0..24 {
            let image = sim.crash_image_now_with(seed, Adversary::default()).image;
            let p = reboot(image, domain);
            let m = p.run(|tx| Ok(*tx.read(root)?)).unwrap();
            counts.insert(prefix_of(&m).unwrap_or_else(|e| panic!("{domain:?}: {e}")));
        }
        h.wait_durable().unwrap();
        let image = sim.crash_image_now_with(0, Adversary::DurableOnly).image;
        let p = reboot(image, domain);
        let m = p.run(|tx| Ok(*tx.read(root)?)).unwrap();
        assert_eq!(prefix_of(&m), Ok(20), "{domain:?}");
        // Not every image kept everything: the commits were not durable on return.
        assert!(counts.iter().any(|&c| c < 20), "{domain:?}: {counts:?}");
        drop((h, pool));
    }
}

/// Slot 0 commits x = 1 with durability deferred (no wait); slot 1 reads it and
/// commits y = x + 1 (durable on return), then the power fails keeping only what was
/// made durable. Returns (x, y) recovered: (1, 2) is right, (0, 2) a dependent that
/// survived without what it read.
fn dependent_of_a_deferred_commit() -> (u64, u64) {
    let (sim, pool) = sim_pool(PersistenceDomain::Adr);
    let root: PPtr<[PPtr<u64>; 2]> = pool.root().unwrap();
    let mut h0 = pool.handle().unwrap();
    let mut h1 = pool.handle().unwrap();
    let [x, y] = h0
        .run(|tx| {
            let xy = [tx.alloc(0u64)?, tx.alloc(0u64)?];
            *tx.write(root)? = xy;
            Ok(xy)
        })
        .unwrap();
    // Written home: the dependent's write of y then meets no lock of slot 0 (whose
    // help would write slot 0's batch back, making its record durable anyway).
    pool.sync().unwrap();
    // On a thread of its own: the simulator's fences persist what their own thread
    // flushed, as the hardware's do.
    std::thread::scope(|s| {
        s.spawn(|| {
            h0.run_with(deferred(), |tx| {
                *tx.write(x)? = 1;
                Ok(())
            })
            .unwrap();
        });
    });
    h1.run(|tx| {
        *tx.write(y)? = *tx.read(x)? + 1;
        Ok(())
    })
    .unwrap();
    let image = sim.crash_image_now_with(0, Adversary::DurableOnly).image;
    drop((h0, h1, pool));
    let p = reboot(image, PersistenceDomain::Adr);
    p.run(|tx| Ok((*tx.read(x)?, *tx.read(y)?))).unwrap()
}

#[test]
fn a_dependent_of_a_deferred_commit_makes_it_durable_first() {
    assert_eq!(dependent_of_a_deferred_commit(), (1, 2));
}

/// A snapshot that returns as durable after reading another slot's deferred commit:
/// what it returned survives. (Its wait has no mutation point; removing it, once, made
/// this test fail.)
#[test]
fn a_durable_read_of_a_deferred_commit_waits_for_it() {
    for domain in DOMAINS {
        let (sim, pool) = sim_pool(domain);
        let root: PPtr<u64> = pool.root().unwrap();
        let mut h0 = pool.handle().unwrap();
        let mut h1: ThreadHandle = pool.handle().unwrap();
        // On a thread of its own (see `dependent_of_a_deferred_commit`).
        std::thread::scope(|s| {
            s.spawn(|| {
                h0.run_with(deferred(), |tx| {
                    *tx.write(root)? = 7;
                    Ok(())
                })
                .unwrap();
            });
        });
        assert_eq!(h1.read(|tx| Ok(*tx.read(root)?)).unwrap(), 7);
        let image = sim.crash_image_now_with(0, Adversary::DurableOnly).image;
        drop((h0, h1, pool));
        let p = reboot(image, domain);
        assert_eq!(p.run(|tx| Ok(*tx.read(root)?)).unwrap(), 7, "{domain:?}");
    }
}

/// Two objects on different pages, written by one deferred commit, then seven more
/// deferred commits elsewhere, so that group commit writes the batch back (home
/// writes that the page cache may write back page by page). Over crash images of the
/// page-cache model, counts those that recovered the two objects disagreeing: a
/// write-back that put them home before their record was durable.
fn torn_write_backs() -> usize {
    let domain = PersistenceDomain::PageCache;
    let (sim, pool) = sim_pool(domain);
    type Big = [u64; 600];
    let root: PPtr<[PPtr<Big>; 3]> = pool.root().unwrap();
    let mut h = pool.handle().unwrap();
    let [a, b, c] = h
        .run(|tx| {
            let abc = [
                tx.alloc([0u64; 600])?,
                tx.alloc([0u64; 600])?,
                tx.alloc([0u64; 600])?,
            ];
            *tx.write(root)? = abc;
            Ok(abc)
        })
        .unwrap();
    assert_ne!(a.offset() / 4096, b.offset() / 4096);
    h.run_with(deferred(), |tx| {
        tx.write(a)?[0] = 1;
        tx.write(b)?[0] = 1;
        Ok(())
    })
    .unwrap();
    for i in 0..7 {
        h.run_with(deferred(), |tx| {
            tx.write(c)?[0] = i;
            Ok(())
        })
        .unwrap();
    }
    let mut torn = 0;
    for seed in 0..32 {
        let image = sim.crash_image_now_with(seed, Adversary::default()).image;
        let p = reboot(image, domain);
        let (x, y) = p.run(|tx| Ok((tx.read(a)?[0], tx.read(b)?[0]))).unwrap();
        torn += usize::from(x != y);
    }
    drop((h, pool));
    torn
}

#[test]
fn a_write_back_puts_a_deferred_commit_home_only_after_its_record() {
    assert_eq!(torn_write_backs(), 0);
}

#[cfg(feature = "mutation")]
#[test]
fn removing_either_deferred_sync_is_caught() {
    let sc = pisces::mutation::Scenario::setup();
    let point = |name: &str| {
        *EngineId::Pisces
            .mutations()
            .iter()
            .find(|p| p.name == name)
            .expect("a mutation point of the engine")
    };
    // SAFETY: a mutation test: the run exists to show the removed step matters, and its
    // outcome is read only as that evidence (see `pisces::mutation::Scenario::set`).
    unsafe { sc.set(Some(point("unfenced-dependency"))) };
    assert_eq!(dependent_of_a_deferred_commit(), (0, 2));
    sc.clear();
    // SAFETY: as above.
    unsafe { sc.set(Some(point("unfenced-write-back"))) };
    let torn = torn_write_backs();
    sc.clear();
    assert!(
        torn > 0,
        "a write-back before the record's sync not detected"
    );
}
