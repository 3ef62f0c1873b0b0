//! The persistence domain through the API: every engine honours it through the
//! medium's flush, the configuration's choices are checked, the pool reports it.

use pisces::medium::{DramMedium, Medium};
use pisces::tools::counters;
use pisces::{Config, EngineId, Error, MediumKind, PPtr, PersistenceDomain, Pool};
use std::sync::Arc;

/// Lines written back and fences of `n` single-word transactions on a fresh pool of
/// `engine` under `domain` (counted on this thread: the transactions' own work).
fn cost(engine: EngineId, domain: PersistenceDomain, n: u64) -> counters::Counters {
    let d = tempfile::tempdir_in("/dev/shm").unwrap();
    let cfg = Config::default()
        .size(16 << 20)
        .engine(engine)
        .max_threads(2)
        .persistence_domain(domain);
    let pool = Pool::create(d.path().join("p"), cfg).unwrap();
    assert_eq!(pool.persistence_domain(), domain);
    let root: PPtr<[u64; 64]> = pool.root().unwrap();
    let mut h = pool.handle().unwrap();
    h.run(|tx| {
        tx.write(root)?[0] = 1;
        Ok(())
    })
    .unwrap();
    let before = counters::snapshot();
    for i in 0..n {
        h.run(|tx| {
            tx.write(root)?[(i % 64) as usize] += 1;
            Ok(())
        })
        .unwrap();
        h.wait_durable().unwrap();
    }
    let c = counters::snapshot() - before;
    let sum = h.run(|tx| Ok(tx.read(root)?.iter().sum::<u64>())).unwrap();
    assert_eq!(sum, n + 1, "{engine} under {domain}");
    c
}

/// Under eADR the engines issue the same fences and write back only what they stream
/// (log records through non-temporal stores, which the fence still completes): no
/// engine has a path of its own, the medium's flush does nothing.
#[test]
fn under_eadr_every_engine_keeps_its_fences_and_drops_its_write_backs() {
    for &engine in EngineId::ALL {
        if !engine.available() || !engine.is_durable() || engine.has_own_pool_format() {
            continue;
        }
        let adr = cost(engine, PersistenceDomain::Adr, 40);
        let eadr = cost(engine, PersistenceDomain::Eadr, 40);
        eprintln!(
            "{engine}: adr {} lines / {} fences, eadr {} lines / {} fences",
            adr.lines_flushed, adr.fences, eadr.lines_flushed, eadr.fences
        );
        assert!(adr.lines_flushed > 0, "{engine} flushes under adr");
        assert!(
            eadr.lines_flushed < adr.lines_flushed,
            "{engine}: eadr writes back {} lines, adr {}",
            eadr.lines_flushed,
            adr.lines_flushed
        );
        assert!(eadr.fences > 0, "{engine} keeps its fences under eadr");
    }
}

#[test]
fn a_given_medium_brings_its_domain_and_a_config_that_disagrees_is_refused() {
    let m = Arc::new(
        DramMedium::anonymous(16 << 20, 0, 0)
            .unwrap()
            .with_domain(PersistenceDomain::Eadr),
    );
    let cfg = Config::default().max_threads(2);
    let wrong = cfg.clone().persistence_domain(PersistenceDomain::Adr);
    assert!(matches!(
        Pool::create_on(m.clone(), wrong.clone()),
        Err(Error::InvalidConfig(_))
    ));
    let pool = Pool::create_on(m.clone(), cfg.clone()).unwrap();
    assert_eq!(pool.persistence_domain(), PersistenceDomain::Eadr);
    assert_eq!(pool.persistence_domain_warning(), None);
    drop(pool);
    assert!(matches!(
        Pool::open_on(m.clone(), wrong),
        Err(Error::InvalidConfig(_))
    ));
    let again = Pool::open_on(m.clone(), cfg).unwrap();
    assert_eq!(m.persistence_domain(), again.persistence_domain());
}

#[test]
fn the_file_medium_is_the_page_cache_and_refuses_eadr() {
    let d = tempfile::tempdir_in("/dev/shm").unwrap();
    let base = Config::default().size(16 << 20).medium(MediumKind::File);
    let refused = Pool::create(
        d.path().join("e"),
        base.clone().persistence_domain(PersistenceDomain::Eadr),
    );
    assert!(matches!(refused, Err(Error::InvalidConfig(m)) if m.contains("msync")));
    assert!(!d.path().join("e").exists());
    let pool = Pool::create(d.path().join("f"), base).unwrap();
    assert_eq!(pool.persistence_domain(), PersistenceDomain::PageCache);
}

/// The domain is not recorded: a pool created under eADR opens under ADR unless asked.
#[test]
fn the_domain_is_decided_at_each_open() {
    let d = tempfile::tempdir_in("/dev/shm").unwrap();
    let p = d.path().join("p");
    let cfg = Config::default().size(16 << 20);
    drop(Pool::create(&p, cfg.clone().persistence_domain(PersistenceDomain::Eadr)).unwrap());
    let pool = Pool::open(&p, cfg.clone()).unwrap();
    assert_eq!(pool.persistence_domain(), PersistenceDomain::Adr);
    drop(pool);
    let pool = Pool::open(&p, cfg.persistence_domain(PersistenceDomain::Eadr)).unwrap();
    assert_eq!(pool.persistence_domain(), PersistenceDomain::Eadr);
}

/// The superblock counts the opens that found the pool not closed cleanly.
#[test]
fn opens_after_an_unclean_close_are_counted() {
    use pisces_verify::sim::{Adversary, SimConfig, SimMedium};
    let cfg = Config::default()
        .max_threads(2)
        .log_bytes_per_thread(64 << 10);
    let sim = Arc::new(SimMedium::new(8 << 20, SimConfig::default()).unwrap());
    let pool = Pool::create_on(sim.clone(), cfg.clone()).unwrap();
    let sb = pool.superblock().unwrap();
    assert_eq!((sb.closed_cleanly(), sb.unclean_opens), (Some(false), 0));
    assert_eq!(sb.dirty_shutdowns(), None, "no NVDIMM behind a simulator");
    drop(pool);
    let closed = sim.crash_image_now_with(0, Adversary::DurableOnly).image;
    // Opened after a clean close, then the power fails with the pool open.
    let sim = Arc::new(SimMedium::from_image(closed, SimConfig::default()).unwrap());
    let pool = Pool::open_on(sim.clone(), cfg.clone()).unwrap();
    assert_eq!(pool.superblock().unwrap().unclean_opens, 0);
    let root: PPtr<u64> = pool.root().unwrap();
    pool.run(|tx| {
        *tx.write(root)? = 5;
        Ok(())
    })
    .unwrap();
    sim.crash_now();
    drop(pool);
    let crashed = sim.crash_image(0).unwrap();
    let sim = Arc::new(SimMedium::from_image(crashed, SimConfig::default()).unwrap());
    let pool = Pool::open_on(sim.clone(), cfg.clone()).unwrap();
    assert_eq!(pool.run(|tx| Ok(*tx.read(root)?)).unwrap(), 5);
    assert_eq!(pool.superblock().unwrap().unclean_opens, 1);
    drop(pool);
    // A clean close in between: the count stays.
    let closed = sim.crash_image_now_with(0, Adversary::DurableOnly).image;
    let sim = Arc::new(SimMedium::from_image(closed, SimConfig::default()).unwrap());
    let pool = Pool::open_on(sim, cfg).unwrap();
    assert_eq!(pool.superblock().unwrap().unclean_opens, 1);
}

/// Damage to either superblock copy does not change what the next open concludes
/// about the last close: after a clean close the open counts nothing, after a crash
/// with the pool open it counts one unclean open, whichever copy was lost.
#[test]
fn a_damaged_superblock_copy_keeps_the_close_state() {
    use pisces::tools::layout::SUPERBLOCK_SIZE;
    use pisces_verify::sim::{Adversary, SimConfig, SimMedium};
    let cfg = Config::default()
        .max_threads(2)
        .log_bytes_per_thread(64 << 10);
    let open = |image: Vec<u8>| {
        let sim = Arc::new(SimMedium::from_image(image, SimConfig::default()).unwrap());
        (Pool::open_on(sim.clone(), cfg.clone()).unwrap(), sim)
    };
    // A byte of the copy's uuid flipped: its checksum no longer matches.
    let damage = |mut image: Vec<u8>, copy: usize| {
        image[copy * SUPERBLOCK_SIZE + 20] ^= 0x40;
        image
    };
    let sim = Arc::new(SimMedium::new(8 << 20, SimConfig::default()).unwrap());
    let pool = Pool::create_on(sim.clone(), cfg.clone()).unwrap();
    let root: PPtr<u64> = pool.root().unwrap();
    drop(pool);
    let created = sim.crash_image_now_with(0, Adversary::DurableOnly).image;
    // Also after a later open and clean close (the copies' roles swapped).
    let (pool, sim) = open(created.clone());
    drop(pool);
    let reopened = sim.crash_image_now_with(0, Adversary::DurableOnly).image;
    for (when, closed) in [("created", created), ("reopened", reopened)] {
        for copy in 0..2 {
            let (pool, _) = open(damage(closed.clone(), copy));
            let sb = pool.superblock().unwrap();
            assert_eq!(
                sb.unclean_opens, 0,
                "{when}, copy {copy} damaged: clean close lost"
            );
            drop(pool);
            // The pool dies open: the open that follows counts it, whichever copy is lost.
            let (pool, sim) = open(closed.clone());
            pool.run(|tx| {
                *tx.write(root)? = 7;
                Ok(())
            })
            .unwrap();
            sim.crash_now();
            drop(pool);
            let crashed = sim.crash_image(0).unwrap();
            let (pool, _) = open(damage(crashed, copy));
            assert_eq!(pool.run(|tx| Ok(*tx.read(root)?)).unwrap(), 7);
            assert_eq!(
                pool.superblock().unwrap().unclean_opens,
                1,
                "{when}, copy {copy} damaged: an unclean shutdown read as clean"
            );
        }
    }
}

/// The medium follows the file system at every open: a pool forced onto the DRAM
/// medium on a disk (opt-in, with a warning) opens on the file medium when no medium is
/// named, and naming the DRAM medium again needs the opt-in again.
#[test]
fn the_medium_is_decided_at_every_open_by_the_file_system() {
    let d = tempfile::tempdir_in(std::env::temp_dir()).unwrap();
    if pisces::medium::FileSystem::of_path(d.path())
        .unwrap()
        .is_volatile()
    {
        eprintln!("the temporary directory is on tmpfs: nothing to check here");
        return;
    }
    let p = d.path().join("p");
    let small = Config::new().size(16 << 20).max_threads(2);
    let root = {
        let pool = Pool::create(
            &p,
            small
                .clone()
                .medium(MediumKind::DRAM)
                .allow_volatile_medium(true),
        )
        .unwrap();
        let du = pool.durability();
        assert_eq!(
            (du.medium(), du.survives()),
            (MediumKind::DRAM, pisces::Survives::ProcessCrash)
        );
        assert!(du.warning().is_some_and(|w| w.contains("power")), "{du}");
        let root: PPtr<u64> = pool.root().unwrap();
        pool.run(|tx| {
            *tx.write(root)? = 5;
            Ok(())
        })
        .unwrap();
        root
    };
    let pool = Pool::open(&p, small.clone()).unwrap();
    let du = pool.durability();
    assert_eq!(
        (du.medium(), du.domain(), du.survives(), du.warning()),
        (
            MediumKind::File,
            PersistenceDomain::PageCache,
            pisces::Survives::PowerLoss,
            None
        ),
        "{du}"
    );
    assert_eq!(pool.run(|tx| Ok(*tx.read(root)?)).unwrap(), 5);
    drop(pool);
    assert!(matches!(
        Pool::open(&p, small.medium(MediumKind::DRAM)),
        Err(Error::InvalidConfig(_))
    ));
}
