//! Unit tests of the timestone engine: version visibility by stamp, truncation, the
//! CLog record's checksum, checkpoint coalescing, and recovery's re-execution count.

use super::tlog::{truncate, visible, Entry, Version, ABORTED, COMMITTING, PENDING, UNDURABLE};
use crate::medium::dram::DramMedium;
use crate::{Config, EngineId, Error, Operations, PPtr, Pool};
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

fn version(live: &AtomicU64, v: u64) -> *mut Version {
    // SAFETY: 8 bytes from a live u64.
    unsafe { Version::new(8, Some(&v as *const u64 as *const u8), live) }
}

fn value(v: *const Version) -> u64 {
    // SAFETY: live versions of 8 bytes in these tests.
    unsafe { *(Version::data(v) as *const u64) }
}

/// Build a chain base(0) ← v(ts) for each (value, stamp), newest last.
fn chain(live: &AtomicU64, vs: &[(u64, u64)]) -> Entry {
    // SAFETY: fresh versions owned by the test; pushes happen as the only "lock holder".
    unsafe {
        let e = Entry::new(version(live, 100));
        for &(val, stamp) in vs {
            let v = version(live, val);
            e.push(v, PENDING);
            Version::set_stamp(v, stamp);
        }
        e
    }
}

#[test]
fn visibility_follows_stamps() {
    let live = AtomicU64::new(0);
    let e = chain(&live, &[(1, 5), (2, ABORTED), (3, 9), (4, PENDING)]);
    // PENDING and ABORTED are skipped; committed versions by timestamp.
    assert_eq!(value(visible(&e, 100)), 3);
    assert_eq!(value(visible(&e, 9)), 3);
    assert_eq!(value(visible(&e, 8)), 1);
    assert_eq!(value(visible(&e, 5)), 1);
    assert_eq!(value(visible(&e, 4)), 100);
    assert_eq!(value(visible(&e, 0)), 100);
    // An undurable version above the snapshot is skipped without waiting.
    let e2 = chain(&live, &[(7, 20 | UNDURABLE)]);
    assert_eq!(value(visible(&e2, 19)), 100);
    let mut e = e;
    let mut e2 = e2;
    // SAFETY: nobody else holds them.
    unsafe {
        e.destroy(&live);
        e2.destroy(&live);
    }
    assert_eq!(live.into_inner(), 0);
}

/// Readers never wait: pending, committing and aborted versions are skipped at once
/// (snapshots are horizons, so they all belong to commits above the snapshot).
#[test]
fn readers_skip_incomplete_versions_without_waiting() {
    let live = AtomicU64::new(0);
    for stamp in [PENDING, COMMITTING, ABORTED, 50 | UNDURABLE] {
        let mut e = chain(&live, &[(1, 5), (2, stamp)]);
        assert_eq!(value(visible(&e, 40)), 1, "stamp {stamp:#x}");
        // SAFETY: test-owned.
        unsafe { e.destroy(&live) };
    }
}

#[test]
fn truncation_keeps_the_keeper_and_newer() {
    let live = AtomicU64::new(0);
    let e = chain(&live, &[(1, 5), (2, 9), (3, ABORTED), (4, 12)]);
    assert_eq!(e.versions(), 5);
    // Keeper for oldest = 10 is the version at 9; the one at 5 and the base go.
    // SAFETY: single-threaded test.
    let freed = unsafe { truncate(&e, 10, &live) };
    assert_eq!(freed, 2);
    assert_eq!(e.versions(), 3);
    assert_eq!(value(visible(&e, 10)), 2);
    assert_eq!(value(visible(&e, 12)), 4);
    let mut e = e;
    // SAFETY: test-owned.
    unsafe { e.destroy(&live) };
    assert_eq!(live.into_inner(), 0);
}

fn pool(opts: &str) -> Pool {
    let m = DramMedium::anonymous(16 << 20, 0, 0).unwrap();
    Pool::create_on(
        Arc::new(m),
        Config {
            size: 16 << 20,
            engine: Some(EngineId::Timestone),
            max_threads: 2,
            log_bytes_per_thread: 64 << 10,
            engine_options: opts.parse().unwrap(),
            ..Config::default()
        },
    )
    .unwrap()
}

fn engine(p: &Pool) -> &super::TimestoneEngine {
    match p.engine_ref() {
        crate::engine::registry::AnyEngine::Timestone(e) => e,
        _ => unreachable!(),
    }
}

/// Many updates of one object between checkpoints reach the CLog and home once each.
#[test]
fn checkpoints_coalesce_repeated_updates() {
    let p = pool("");
    let n: PPtr<u64> = p.root().unwrap();
    let mut h = p.handle().unwrap();
    for i in 0..1000u64 {
        h.run(|tx| {
            *tx.write(n)? = i;
            Ok(())
        })
        .unwrap();
    }
    drop(h);
    let sh = engine(&p).shared().clone();
    let before = sh
        .stats
        .home_bytes
        .load(std::sync::atomic::Ordering::Relaxed);
    p.allocated_objects().unwrap(); // quiesce: a checkpoint
    let home = sh
        .stats
        .home_bytes
        .load(std::sync::atomic::Ordering::Relaxed)
        - before;
    assert!(
        home <= 16 * 2,
        "{home} bytes written home for one 16-byte root"
    );
    // The CLog record is valid and covered by K_done.
    let (k, _) = super::clog::read_clog(&sh.heap, sh.clog_len).unwrap();
    assert_eq!(k, super::shared::Shared::load_k_done(&sh.heap));
    // A torn record (one byte changed) fails its checksum.
    let off = super::shared::CLOG_OFFSET + super::clog::CLOG_HEADER;
    let mut b = [0u8; 1];
    sh.heap.read_bytes(off, &mut b);
    sh.heap.write_bytes(off, &[b[0] ^ 1]);
    assert!(super::clog::read_clog(&sh.heap, sh.clog_len).is_none());
}

/// After a crash with operations above the checkpoint, recovery re-executes exactly
/// those (the engine counts them), and a clean close leaves nothing to re-execute.
#[test]
fn recovery_re_executes_the_operations_above_the_checkpoint() {
    let ops = Operations::new();
    ops.register(1, |tx, c: &PPtr<u64>| {
        *tx.write(*c)? += 1;
        Ok(())
    })
    .unwrap();
    let m = Arc::new(DramMedium::anonymous(16 << 20, 0, 0).unwrap());
    let cfg = Config {
        size: 16 << 20,
        engine: Some(EngineId::Timestone),
        max_threads: 2,
        log_bytes_per_thread: 64 << 10,
        ..Config::default()
    };
    let p = Pool::create_on_with_ops(m.clone(), cfg.clone(), &ops).unwrap();
    let c: PPtr<u64> = p.root().unwrap();
    p.allocated_objects().unwrap(); // checkpoint: the root is home
    for _ in 0..25 {
        p.run_op(1, &c).unwrap();
    }
    // "Crash": reopen the same memory without closing (the pool is leaked).
    std::mem::forget(p);
    let p = Pool::open_on_with_ops(m.clone(), cfg.clone(), &ops).unwrap();
    assert_eq!(engine(&p).replayed, 25);
    assert_eq!(p.run(|tx| Ok(*tx.read(c)?)).unwrap(), 25);
    drop(p);
    let p = Pool::open_on_with_ops(m, cfg, &ops).unwrap();
    assert_eq!(engine(&p).replayed, 0);
    assert_eq!(p.run(|tx| Ok(*tx.read(c)?)).unwrap(), 25);
}

/// An OLog spanning several log regions (`olog_regions`) holds that many times the
/// records before it forces a checkpoint, and recovery reads it across the regions'
/// boundaries; out-of-range window options are refused.
#[test]
fn olog_regions_widen_the_window_and_recover() {
    let ops = Operations::new();
    ops.register(1, |tx, c: &PPtr<u64>| {
        *tx.write(*c)? += 1;
        Ok(())
    })
    .unwrap();
    let cfg = |opts: &str| Config {
        size: 16 << 20,
        engine: Some(EngineId::Timestone),
        max_threads: 2,
        log_bytes_per_thread: 16 << 10,
        engine_options: opts.parse().unwrap(),
        ..Config::default()
    };
    let mut checkpoints = Vec::new();
    for regions in [1, 3] {
        let m = Arc::new(DramMedium::anonymous(16 << 20, 0, 0).unwrap());
        let c = cfg(&format!("olog_regions={regions},clog_mib=1"));
        let p = Pool::create_on_with_ops(m.clone(), c.clone(), &ops).unwrap();
        let n: PPtr<u64> = p.root().unwrap();
        p.allocated_objects().unwrap(); // checkpoint: the root is home
        let sh = engine(&p).shared().clone();
        let before = sh
            .stats
            .checkpoints
            .load(std::sync::atomic::Ordering::Relaxed);
        for _ in 0..2000 {
            p.run_op(1, &n).unwrap();
        }
        checkpoints.push(
            sh.stats
                .checkpoints
                .load(std::sync::atomic::Ordering::Relaxed)
                - before,
        );
        drop(sh);
        std::mem::forget(p); // crash
        let p = Pool::open_on_with_ops(m, c, &ops).unwrap();
        assert!(
            engine(&p).replayed > 0,
            "{regions} regions: nothing re-executed"
        );
        assert_eq!(
            p.run(|tx| Ok(*tx.read(n)?)).unwrap(),
            2000,
            "{regions} regions"
        );
    }
    // 2000 records of 32 bytes: a 16 KiB OLog fills every ~500, one of 48 KiB every ~1500.
    assert!(
        checkpoints[1] < checkpoints[0],
        "checkpoints with 1 and 3 OLog regions: {checkpoints:?}"
    );
    for bad in [
        "olog_regions=0",
        "olog_regions=9",
        "clog_mib=0",
        "clog_mib=64",
    ] {
        let m = Arc::new(DramMedium::anonymous(16 << 20, 0, 0).unwrap());
        assert!(
            matches!(
                Pool::create_on(m, cfg(bad)),
                Err(crate::Error::InvalidConfig(_))
            ),
            "{bad} accepted"
        );
    }
}

/// A commit whose timestamp would not fit the compact OLog header's 48 bits is refused
/// with an error and rolled back; the commit just below the limit is fine.
#[test]
fn a_commit_timestamp_past_48_bits_is_refused() {
    let p = pool("");
    let n: PPtr<u64> = p.root().unwrap();
    let clock = &engine(&p).shared().clock;
    clock.advance_to(crate::engine::kit::redo_log::COMPACT_MAX_TS - 1);
    let mut h = p.handle().unwrap();
    h.run(|tx| {
        *tx.write(n)? = 7;
        Ok(())
    })
    .unwrap();
    let r = h.run(|tx| {
        *tx.write(n)? = 8;
        Ok(())
    });
    assert!(
        matches!(&r, Err(Error::Corrupt(m)) if m.contains("48 bits")),
        "{r:?}"
    );
    assert_eq!(h.run(|tx| Ok(*tx.read(n)?)).unwrap(), 7);
}
