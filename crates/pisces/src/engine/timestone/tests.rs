//! Unit tests of the timestone engine: version visibility by stamp, truncation, the
//! CLog record's checksum, checkpoint coalescing, and recovery's re-execution count.

use super::tlog::{truncate, visible, Entry, Version, ABORTED, COMMITTING, PENDING, UNDURABLE};
use crate::engine::kit::versions::version::LiveCount;
use crate::heap::alloc::{Block, HEADER};
use crate::medium::dram::DramMedium;
use crate::{Config, EngineId, Error, Operations, PPtr, Pool};
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

fn version(live: &LiveCount, v: u64) -> *mut Version {
    // SAFETY: 8 bytes from a live u64.
    unsafe { Version::new(8, Some(&v as *const u64 as *const u8), live) }
}

fn value(v: *const Version) -> u64 {
    // SAFETY: live versions of 8 bytes in these tests.
    unsafe { *(Version::data(v) as *const u64) }
}

/// Build a chain base(0) ← v(ts) for each (value, stamp), newest last.
fn chain(live: &LiveCount, vs: &[(u64, u64)]) -> Entry {
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
    let live = LiveCount::default();
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
    assert_eq!(live.get(), 0);
}

/// Readers never wait: pending, committing and aborted versions are skipped at once
/// (snapshots are horizons, so they all belong to commits above the snapshot).
#[test]
fn readers_skip_incomplete_versions_without_waiting() {
    let live = LiveCount::default();
    for stamp in [PENDING, COMMITTING, ABORTED, 50 | UNDURABLE] {
        let mut e = chain(&live, &[(1, 5), (2, stamp)]);
        assert_eq!(value(visible(&e, 40)), 1, "stamp {stamp:#x}");
        // SAFETY: test-owned.
        unsafe { e.destroy(&live) };
    }
}

#[test]
fn truncation_keeps_the_keeper_and_newer() {
    let live = LiveCount::default();
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
    assert_eq!(live.get(), 0);
}

/// The tests' pool configuration: 16 MiB, 2 thread slots of 64 KiB logs, `opts`.
fn test_cfg(opts: &str) -> Config {
    Config {
        size: 16 << 20,
        engine: Some(EngineId::Timestone),
        max_threads: 2,
        log_bytes_per_thread: 64 << 10,
        engine_options: opts.parse().unwrap(),
        ..Config::default()
    }
}

/// A fresh medium of the tests' pool size.
fn test_medium() -> Arc<DramMedium> {
    Arc::new(DramMedium::anonymous(16 << 20, 0, 0).unwrap())
}

fn pool(opts: &str) -> Pool {
    Pool::create_on(test_medium(), test_cfg(opts)).unwrap()
}

fn engine(p: &Pool) -> &super::shared::TimestoneEngine {
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
    assert_eq!(k, super::shared::TimestoneShared::load_k_done(&sh.heap));
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
    let m = test_medium();
    let cfg = test_cfg("");
    let p = Pool::create_on(
        m.clone(),
        Config {
            operations: ops.clone(),
            ..cfg.clone()
        },
    )
    .unwrap();
    let c: PPtr<u64> = p.root().unwrap();
    p.allocated_objects().unwrap(); // checkpoint: the root is home
    for _ in 0..25 {
        p.run_op(1, &c).unwrap();
    }
    // "Crash": reopen the same memory without closing (the pool is leaked).
    p.forget_as_crash();
    let p = Pool::open_on(
        m.clone(),
        Config {
            operations: ops.clone(),
            ..cfg.clone()
        },
    )
    .unwrap();
    assert_eq!(engine(&p).replayed, 25);
    assert_eq!(p.run(|tx| Ok(*tx.read(c)?)).unwrap(), 25);
    drop(p);
    let p = Pool::open_on(
        m,
        Config {
            operations: ops.clone(),
            ..cfg
        },
    )
    .unwrap();
    assert_eq!(engine(&p).replayed, 0);
    assert_eq!(p.run(|tx| Ok(*tx.read(c)?)).unwrap(), 25);
}

/// Allocate a node filled with `fill` into `*slot`, or free the node it holds (the
/// operations of the re-execution tests).
fn toggle_node(tx: &mut crate::Tx<'_>, slot: &mut PPtr<[u64; 4]>, fill: u64) -> crate::Result<()> {
    if slot.is_null() {
        *slot = tx.alloc([fill; 4])?;
    } else {
        tx.free(*slot)?;
        *slot = PPtr::null();
    }
    Ok(())
}

/// A clean close checkpoints the window and empties the OLogs: the next open
/// re-executes nothing, the allocator's bitmaps at home list exactly the live objects,
/// and the pool keeps working on top of that state.
#[test]
fn a_clean_close_checkpoints_and_empties_the_olog() {
    #[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
    #[repr(C)]
    struct Args {
        root: PPtr<[PPtr<[u64; 4]>; 8]>,
        slot: u64,
    }
    let ops = Operations::new();
    // Allocate a node into the slot, or free the node it holds.
    ops.register(3, |tx, a: &Args| {
        let mut r = *tx.read(a.root)?;
        toggle_node(tx, &mut r[a.slot as usize], a.slot * 10)?;
        *tx.write(a.root)? = r;
        Ok(())
    })
    .unwrap();
    let m = test_medium();
    let cfg = Config {
        operations: ops.clone(),
        ..test_cfg("")
    };
    let open = || Pool::open_on(m.clone(), cfg.clone()).unwrap();
    let p = Pool::create_on(m.clone(), cfg.clone()).unwrap();
    let root: PPtr<[PPtr<[u64; 4]>; 8]> = p.root().unwrap();
    p.write_back().unwrap(); // the root home: re-execution starts after it
    let contents = |p: &Pool| {
        p.run(|tx| {
            let r = *tx.read(root)?;
            r.iter()
                .map(|s| (!s.is_null()).then(|| tx.read(*s).copied()).transpose())
                .collect::<crate::Result<Vec<_>>>()
        })
        .unwrap()
    };
    let mut want = vec![None; 8];
    let mut flip = |p: &Pool, slots: &[u64]| {
        for &slot in slots {
            p.run_op(3, &Args { root, slot }).unwrap();
            let w = &mut want[slot as usize];
            *w = if w.is_some() {
                None
            } else {
                Some([slot * 10; 4])
            };
        }
        want.clone()
    };
    let w = flip(&p, &[1, 2, 3, 2, 5]);
    drop(p); // a clean close
    let p = open();
    assert_eq!(
        engine(&p).replayed,
        0,
        "the close left records to re-execute"
    );
    assert_eq!(contents(&p), w);
    for slot in 0..2 {
        let parsed = super::recovery::parse_olog(p.heap().unwrap(), slot);
        assert!(
            parsed.records.is_empty(),
            "slot {slot}: the OLog is not empty"
        );
    }
    let w = flip(&p, &[1, 4, 6]);
    drop(p);
    let p = open();
    assert_eq!(engine(&p).replayed, 0);
    assert_eq!(contents(&p), w);
    // Nothing is pending: the write-back finds the bitmaps as the close left them.
    let mut listed = p.allocated_objects().unwrap();
    listed.sort_unstable();
    let mut live: Vec<u64> = p
        .run(|tx| {
            Ok(tx
                .read(root)?
                .iter()
                .filter(|s| !s.is_null())
                .map(|s| s.offset())
                .collect::<Vec<_>>())
        })
        .unwrap();
    live.push(root.offset());
    live.sort_unstable();
    assert_eq!(listed, live, "the allocator's bitmaps after write_back");
    drop(p);
    let p = open();
    assert_eq!(engine(&p).replayed, 0);
    assert_eq!(contents(&p), w);
}

/// After a clean close the committed state is at home, not only in log records: the
/// root's home bytes hold the last commit, and zeroing any one 4 KiB page of the OLogs
/// (or all of them) loses nothing.
#[test]
fn a_clean_close_leaves_nothing_only_in_the_olog() {
    use crate::medium::Medium;
    let m = test_medium();
    let cfg = test_cfg("");
    let p = Pool::create_on(m.clone(), cfg.clone()).unwrap();
    let root: PPtr<[u64; 4]> = p.root().unwrap();
    for i in 1..=20u64 {
        p.run(|tx| {
            *tx.write(root)? = [i, i * 2, i * 3, !i];
            Ok(())
        })
        .unwrap();
    }
    let want = [20, 40, 60, !20];
    let l = *p.heap().unwrap().layout();
    let home = root.offset() as usize;
    drop(p); // a clean close
    let image = || {
        // SAFETY: no pool is open on the medium; the range is inside it.
        unsafe { std::slice::from_raw_parts(m.base(), m.len()) }.to_vec()
    };
    let closed = image();
    assert_eq!(
        bytemuck::cast_slice::<u8, u64>(&closed[home..home + 32]),
        &want,
        "the root's home bytes after a clean close"
    );
    let olog_pages: Vec<usize> = (0..l.max_threads)
        .flat_map(|slot| {
            let at = l.log_offset(slot);
            (at..at + super::olog_len(&l)).step_by(4096)
        })
        .collect();
    let restore = |zeroed: &[usize]| {
        let mut b = closed.clone();
        for &page in zeroed {
            b[page..page + 4096].fill(0);
        }
        // SAFETY: no pool is open on the medium; `b` is as long as it.
        unsafe { std::ptr::copy_nonoverlapping(b.as_ptr(), m.base(), b.len()) };
    };
    for zeroed in olog_pages
        .iter()
        .map(std::slice::from_ref)
        .chain([olog_pages.as_slice()])
    {
        restore(zeroed);
        let p = Pool::open_on(m.clone(), cfg.clone()).unwrap();
        assert_eq!(
            p.run(|tx| Ok(*tx.read(root)?)).unwrap(),
            want,
            "OLog pages {zeroed:x?} zeroed"
        );
        drop(p);
    }
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
        let p = Pool::create_on(
            m.clone(),
            Config {
                operations: ops.clone(),
                ..c.clone()
            },
        )
        .unwrap();
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
        p.forget_as_crash(); // crash
        let p = Pool::open_on(
            m,
            Config {
                operations: ops.clone(),
                ..c
            },
        )
        .unwrap();
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
    // `clog_mib=0` is the smallest CLog (half a thread log and 8 KiB, page-aligned);
    // the default is a quarter of the pool.
    let area = |opts: &str| {
        let m = Arc::new(DramMedium::anonymous(16 << 20, 0, 0).unwrap());
        let p = Pool::create_on(m, cfg(opts)).unwrap();
        p.heap().unwrap().layout().engine_area_size
    };
    assert_eq!(area("clog_mib=0"), 4096 + (8 << 10) + 8192);
    assert_eq!(area(""), 4096 + (4 << 20));
    for bad in ["olog_regions=0", "olog_regions=9", "clog_mib=64"] {
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
    clock.advance_to(super::olog::COMPACT_MAX_TS - 1);
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

/// A registered operation with 16 argument bytes, packed into 8, takes a 24-byte OLog
/// record, 32 with one allocation (the compact operation record: 16-byte header,
/// arguments, 8 bytes per block or per run of consecutive blocks plus a run word). After a crash,
/// recovery re-executes them all, their allocations returning the logged blocks
/// (runs included).
#[test]
fn operation_records_are_compact_and_re_execute_with_their_allocations() {
    #[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
    #[repr(C)]
    struct Args {
        root: PPtr<[PPtr<[u64; 4]>; 40]>,
        slot: u64,
    }
    let ops = Operations::new();
    // Slot < 40: allocate a node into it, or free the node it holds. Slot 99: fill
    // the empty slots with new nodes (38 allocations below).
    ops.register(7, |tx, a: &Args| {
        let mut r = *tx.read(a.root)?;
        if a.slot == 99 {
            for (i, s) in r.iter_mut().enumerate().filter(|(_, s)| s.is_null()) {
                *s = tx.alloc([i as u64; 4])?;
            }
        } else {
            toggle_node(tx, &mut r[a.slot as usize], a.slot)?;
        }
        *tx.write(a.root)? = r;
        Ok(())
    })
    .unwrap();
    let m = test_medium();
    let cfg = test_cfg("");
    let p = Pool::create_on(
        m.clone(),
        Config {
            operations: ops.clone(),
            ..cfg.clone()
        },
    )
    .unwrap();
    let root: PPtr<[PPtr<[u64; 4]>; 40]> = p.root().unwrap();
    p.allocated_objects().unwrap(); // checkpoint
    let sh = engine(&p).shared().clone();
    let olog = || sh.stats.olog_bytes();
    let mut sizes = Vec::new();
    for slot in [3u64, 3, 5, 6, 99] {
        let before = olog();
        p.run_op(7, &Args { root, slot }).unwrap();
        sizes.push(olog() - before);
    }
    // The 16 argument bytes (a root offset and a small slot number) pack into 8.
    // Allocate (32), free (24: frees are not logged, re-execution repeats them),
    // allocate, allocate; 38 blocks handed out in address order by the thread's
    // cache: one block word and a run word (16 + 8 + 16).
    assert_eq!(sizes, [32, 24, 32, 32, 40]);
    p.allocated_objects().unwrap(); // a checkpoint: re-execution starts after it
    for slot in [1u64, 2, 3, 4, 99, 1, 2, 1] {
        p.run_op(7, &Args { root, slot }).unwrap();
    }
    let contents = |p: &Pool| {
        p.run(|tx| {
            let r = *tx.read(root)?;
            r.iter()
                .map(|s| {
                    Ok((
                        s.offset(),
                        if s.is_null() {
                            None
                        } else {
                            Some(*tx.read(*s)?)
                        },
                    ))
                })
                .collect::<crate::Result<Vec<_>>>()
        })
        .unwrap()
    };
    let want = contents(&p);
    drop(sh);
    p.forget_as_crash(); // crash
    let p = Pool::open_on(
        m,
        Config {
            operations: ops.clone(),
            ..cfg
        },
    )
    .unwrap();
    assert_eq!(engine(&p).replayed, 8);
    assert_eq!(
        contents(&p),
        want,
        "same blocks, same contents after re-execution"
    );
    let mut objects: Vec<u64> = want.iter().map(|w| w.0).filter(|&o| o != 0).collect();
    objects.push(root.offset());
    objects.sort_unstable();
    assert_eq!(
        p.allocated_objects().unwrap(),
        objects,
        "no leak, nothing lost"
    );
}

/// Mutation evidence for the run words of operation records: a run word that stands
/// for one block fewer than were allocated makes the re-executed operation's
/// allocations disagree with its script, and the test above fails (recovery refuses
/// the pool). `cargo test -p pisces --release --features mutation --lib
/// run_word_mutation`.
#[cfg(feature = "mutation")]
#[test]
fn run_word_mutation_breaks_re_execution() {
    let sc = crate::mutation::Scenario::setup();
    // SAFETY: a mutation test: the run exists to show the removed step matters, and its
    // outcome is read only as that evidence (see `pisces::mutation::Scenario::set`).
    unsafe { sc.set(Some(&super::olog::OP_BLOCK_RUN)) };
    let r = std::panic::catch_unwind(
        operation_records_are_compact_and_re_execute_with_their_allocations,
    );
    drop(sc);
    assert!(r.is_err(), "op-block-run went unnoticed");
}

/// A pool whose OLog format word is not this build's is refused with an error that
/// says so, unless it never committed anything (then the word is written).
#[test]
fn a_pool_of_another_olog_format_is_refused() {
    let m = test_medium();
    let cfg = test_cfg("");
    let p = Pool::create_on(m.clone(), cfg.clone()).unwrap();
    let heap = engine(&p).shared().heap.clone();
    let word = |heap: &crate::heap::Heap| {
        heap.atomic_u64(super::optable::FORMAT_OFFSET)
            .load(std::sync::atomic::Ordering::Relaxed)
    };
    assert_eq!(word(&heap), super::optable::OLOG_FORMAT);
    let n: PPtr<u64> = p.root().unwrap();
    p.run(|tx| {
        *tx.write(n)? = 5;
        Ok(())
    })
    .unwrap();
    drop(p);
    for v in [0, 1, 2, 4] {
        heap.atomic_u64(super::optable::FORMAT_OFFSET)
            .store(v, std::sync::atomic::Ordering::Relaxed);
        let e = Pool::open_on(m.clone(), cfg.clone())
            .map(|_| ())
            .unwrap_err();
        assert!(
            e.to_string().contains("operation log is in format"),
            "{v}: {e}"
        );
    }
    heap.atomic_u64(super::optable::FORMAT_OFFSET).store(
        super::optable::OLOG_FORMAT,
        std::sync::atomic::Ordering::Relaxed,
    );
    let p = Pool::open_on(m, cfg).unwrap();
    assert_eq!(p.run(|tx| Ok(*tx.read(n)?)).unwrap(), 5);
}

/// A checkpoint writes each allocator bitmap word once, however many of its blocks
/// were allocated, and nothing for blocks allocated and freed again since the last
/// checkpoint.
#[test]
fn checkpoints_write_each_bitmap_word_once() {
    let p = pool("");
    let root: PPtr<[PPtr<u64>; 48]> = p.root().unwrap();
    p.allocated_objects().unwrap();
    let objs = p
        .run(|tx| {
            let mut r = [PPtr::null(); 48];
            for o in r.iter_mut() {
                *o = tx.alloc(7u64)?;
            }
            *tx.write(root)? = r;
            Ok(r)
        })
        .unwrap();
    // The first checkpoint after the allocations: 48 blocks of one class, handed out in
    // address order from one slab, span at most 2 bitmap words.
    let before = crate::medium::counters::snapshot();
    p.allocated_objects().unwrap();
    let meta = (crate::medium::counters::snapshot() - before).bytes_metadata;
    assert!(
        meta <= 16,
        "{meta} bytes of allocator metadata for 48 blocks"
    );
    // Allocated and freed within one window: no allocator write at all.
    for _ in 0..20 {
        let t = p.run(|tx| tx.alloc(1u64)).unwrap();
        p.run(|tx| tx.free(t)).unwrap();
    }
    let before = crate::medium::counters::snapshot();
    p.allocated_objects().unwrap();
    let meta = (crate::medium::counters::snapshot() - before).bytes_metadata;
    assert_eq!(
        meta, 0,
        "bytes of allocator metadata for blocks that came and went"
    );
    let mut want: Vec<u64> = objs.iter().map(|o| o.offset()).collect();
    want.push(root.offset());
    want.sort_unstable();
    assert_eq!(p.allocated_objects().unwrap(), want);
}

/// A block freed by a commit after a transaction's snapshot is still a live object for
/// that snapshot, so the reuse lists must not hand it to the transaction: the
/// transaction may follow a pointer to it at any time, and would find its own new
/// object there. The transaction gets another block, its write through the stale
/// pointer conflicts with the free (first committer wins), and the retry, whose
/// snapshot sees the free, appends at the new tail.
///
/// Construction (a list of one node, as a hash chain): B reads `head → P`; A unlinks
/// and frees P and completes, so P enters the reuse lists; B then allocates a node of
/// P's size, reads P through the pointer its snapshot holds, and links the new node
/// behind P, the tail as its snapshot sees it.
struct StaleAppend {
    /// The list's values at the end.
    values: Vec<u64>,
    /// Attempts of B's transaction.
    attempts: u64,
    /// B's first attempt was handed P.
    got_freed_block: bool,
    /// What B's first attempt read through its pointer to P, after its allocation.
    stale_read: [u64; 2],
}

fn append_behind_a_freed_node() -> StaleAppend {
    use std::sync::atomic::Ordering::Relaxed;
    use std::sync::Barrier;
    use std::sync::Mutex;
    let p = pool("");
    let head: PPtr<PPtr<[u64; 2]>> = p.root().unwrap();
    let first = p
        .run(|tx| {
            let n = tx.alloc([0u64, 1])?;
            *tx.write(head)? = n;
            Ok(n)
        })
        .unwrap();
    let attempts = AtomicU64::new(0);
    let first_attempt_saw = Mutex::new(None);
    let (freed, go_on) = (Barrier::new(2), Barrier::new(2));
    std::thread::scope(|s| {
        s.spawn(|| {
            let mut h = p.handle().unwrap();
            h.run(|tx| {
                let first_attempt = attempts.fetch_add(1, Relaxed) == 0;
                // Append 7 at the tail of the list as this snapshot sees it.
                let mut tail = PPtr::null();
                let mut cur = *tx.read(head)?;
                while !cur.is_null() {
                    tail = cur;
                    cur = PPtr::from_offset(tx.read(cur)?[0]);
                }
                if first_attempt {
                    freed.wait();
                    go_on.wait();
                }
                let n = tx.alloc([0u64, 7])?;
                if first_attempt {
                    *first_attempt_saw.lock().unwrap() = Some((n == first, *tx.read(first)?));
                }
                if tail.is_null() {
                    *tx.write(head)? = n;
                } else {
                    tx.write(tail)?[0] = n.offset();
                }
                Ok(())
            })
            .unwrap();
        });
        s.spawn(|| {
            let mut h = p.handle().unwrap();
            freed.wait();
            h.run(|tx| {
                let n = *tx.read(head)?;
                *tx.write(head)? = PPtr::from_offset(tx.read(n)?[0]);
                tx.free(n)
            })
            .unwrap();
            go_on.wait();
        });
    });
    let values = p
        .run(|tx| {
            let mut v = Vec::new();
            let mut cur = *tx.read(head)?;
            while !cur.is_null() && v.len() < 10 {
                let n = *tx.read(cur)?;
                v.push(n[1]);
                cur = PPtr::from_offset(n[0]);
            }
            Ok(v)
        })
        .unwrap();
    let (got_freed_block, stale_read) = first_attempt_saw
        .into_inner()
        .unwrap()
        .expect("the first attempt reached its allocation");
    StaleAppend {
        values,
        attempts: attempts.load(Relaxed),
        got_freed_block,
        stale_read,
    }
}

#[test]
fn a_block_freed_after_the_snapshot_is_not_handed_to_it() {
    let r = append_behind_a_freed_node();
    assert!(!r.got_freed_block, "the freed block was handed out");
    assert_eq!(r.stale_read, [0, 1], "the snapshot's node changed under it");
    assert_eq!(
        r.values,
        vec![7],
        "the append was lost into the freed block"
    );
    assert_eq!(
        r.attempts, 2,
        "one conflict, then a snapshot that sees the free"
    );
}

/// Mutation evidence: with the rule lifted, B's first attempt is handed P and reads
/// its own new node where its snapshot has P.
#[cfg(feature = "mutation")]
#[test]
fn mutation_ts_reuse_after_snapshot_shows_the_new_object() {
    let sc = crate::mutation::Scenario::setup();
    // SAFETY: a mutation test: the run exists to show the removed step matters, and its
    // outcome is read only as that evidence (see `pisces::mutation::Scenario::set`).
    unsafe { sc.set(Some(&super::shared::REUSE_AFTER_SNAPSHOT)) };
    let r = std::panic::catch_unwind(append_behind_a_freed_node);
    drop(sc);
    let r = r.expect("the run itself failed");
    assert!(r.got_freed_block, "the freed block should be handed out");
    assert_eq!(r.stale_read, [0, 7], "the snapshot should see the new node");
}

/// The home-word read path (`tlog`, *The home word*): a pool whose object `A` (four
/// words of `1`) is checkpointed, so its word is clean and its bit set at home; and a
/// second object `B` to write.
fn clean_object(p: &Pool) -> (PPtr<[u64; 4]>, PPtr<[u64; 4]>) {
    let (a, b) = p
        .run(|tx| Ok((tx.alloc([1u64; 4])?, tx.alloc([0u64; 4])?)))
        .unwrap();
    p.allocated_objects().unwrap(); // quiesce: a checkpoint writes them home
    (a, b)
}

/// True if `ptr` points into the pool's image (a home read, not a DRAM version).
fn is_home(p: &Pool, ptr: *const u8) -> bool {
    let heap = &engine(p).shared().heap;
    let base = heap.base() as usize;
    (base..base + heap.size()).contains(&(ptr as usize))
}

/// A snapshot reading an object at home keeps its version while a commit changes the
/// object and a checkpoint runs: the cut stays at or below the running snapshots, so
/// the newer version does not go home under the reader (`clog::checkpoint`, step 1).
#[test]
fn a_reader_at_home_keeps_its_version_across_a_checkpoint() {
    use std::sync::Barrier;
    let p = pool("");
    let (a, _) = clean_object(&p);
    let sh = engine(&p).shared().clone();
    let (read, changed) = (Barrier::new(2), Barrier::new(2));
    let seen = std::thread::scope(|s| {
        let r = s.spawn(|| {
            let mut h = p.handle().unwrap();
            let mut first = true;
            h.run(|tx| {
                let v = tx.read(a)?;
                let home = is_home(&p, v as *const _ as *const u8);
                let before = v[0];
                if std::mem::take(&mut first) {
                    read.wait();
                    changed.wait();
                }
                // A volatile load: the compiler may not reuse `before` for a shared
                // reference, so the test sees what home holds now.
                // SAFETY: `v` is a live reference to 8-aligned `u64`s.
                let now = unsafe { std::ptr::read_volatile(&v[0]) };
                Ok((home, before, now))
            })
            .unwrap()
        });
        read.wait();
        p.run(|tx| {
            tx.write(a)?[0] = 2;
            Ok(())
        })
        .unwrap();
        super::clog::checkpoint(&sh).unwrap();
        changed.wait();
        r.join().unwrap()
    });
    assert!(seen.0, "the read did not take the home path");
    assert_eq!(
        (seen.1, seen.2),
        (1, 1),
        "the snapshot's version changed under it"
    );
    // The commit is not lost: the next checkpoint takes it home.
    assert_eq!(p.run(|tx| Ok(tx.read(a)?[0])).unwrap(), 2);
}

/// A clean word whose version is above the reader's snapshot sends it to the chain:
/// the race of a transaction that begins while a checkpoint cleans (forced here by
/// writing home and cleaning the word by hand), on the inlined path (snapshot
/// isolation) and on the engine's `read` (serializable).
#[test]
fn a_clean_word_above_the_snapshot_is_not_read_home() {
    use crate::tx_options::{Isolation, TxOptions};
    use std::sync::Barrier;
    for iso in [Isolation::Snapshot, Isolation::Serializable] {
        let p = pool("");
        let (a, _) = clean_object(&p);
        let sh = engine(&p).shared().clone();
        let (begun, cleaned) = (Barrier::new(2), Barrier::new(2));
        let seen = std::thread::scope(|s| {
            let r = s.spawn(|| {
                let mut h = p.handle().unwrap();
                let mut first = true;
                h.run_with(TxOptions::default().isolation(iso), |tx| {
                    if std::mem::take(&mut first) {
                        begun.wait();
                        cleaned.wait();
                    }
                    Ok(tx.read(a)?[0])
                })
                .unwrap()
            });
            begun.wait();
            p.run(|tx| {
                tx.write(a)?[0] = 2;
                Ok(())
            })
            .unwrap();
            // What a checkpoint at the commit's timestamp does: home, then the word.
            let c = sh.clock.now();
            let off = a.offset() as usize;
            sh.heap.write_bytes(off, &2u64.to_ne_bytes());
            let w = super::tlog::home_word(&sh.heap, a.offset()).unwrap();
            super::tlog::mark_clean(w, sh.home_tag, c);
            cleaned.wait();
            r.join().unwrap()
        });
        assert_eq!(
            seen, 1,
            "{iso:?}: a snapshot read a version committed after it"
        );
    }
}

/// A commit marks the words of the objects it writes dirty: a later snapshot reads the
/// new version (from its chain), not the old one still at home.
#[test]
fn a_commit_sends_later_readers_to_the_chain() {
    let p = pool("");
    let (a, _) = clean_object(&p);
    p.run(|tx| {
        tx.write(a)?[0] = 2;
        Ok(())
    })
    .unwrap();
    let (v, home) = p
        .run(|tx| {
            let r = tx.read(a)?;
            Ok((r[0], is_home(&p, r as *const _ as *const u8)))
        })
        .unwrap();
    assert_eq!(
        v, 2,
        "a snapshot after the commit read the old home version"
    );
    assert!(!home);
    // After a checkpoint, home is current and clean again: the home path.
    p.allocated_objects().unwrap();
    let (v, home) = p
        .run(|tx| {
            let r = tx.read(a)?;
            Ok((r[0], is_home(&p, r as *const _ as *const u8)))
        })
        .unwrap();
    assert_eq!(v, 2);
    assert!(home, "a checkpointed object is not read at home");
}

/// A small object's chain is found in the version index's direct table once its first
/// access made it: the chain the shards hold, one per block, so two objects of one slab
/// read their own versions; a chain of another length at the same offset is not the
/// table's.
#[test]
fn the_direct_table_finds_each_small_blocks_own_chain() {
    let p = pool("");
    let (a, b) = clean_object(&p);
    p.run(|tx| {
        tx.write(a)?[0] = 2;
        tx.write(b)?[0] = 3;
        Ok(())
    })
    .unwrap();
    let read = || p.run(|tx| Ok((tx.read(a)?[0], tx.read(b)?[0]))).unwrap();
    assert_eq!(read(), (2, 3));
    let sh = engine(&p).shared();
    let plen = sh.alloc.small_slot(a.offset(), 0).unwrap().payload_len as usize;
    assert!(sh.index.in_small_table(a.offset(), plen));
    assert!(sh.index.in_small_table(b.offset(), plen));
    assert!(!sh.index.in_small_table(a.offset(), plen - 8));
    let ca = sh.index.get(a.offset(), plen).unwrap() as *const _;
    let cb = sh.index.get(b.offset(), plen).unwrap() as *const _;
    assert_ne!(ca, cb);
    // SAFETY: `a` is a live object of the pool with `plen` payload bytes.
    let again = unsafe {
        sh.index
            .get_or_create(a.offset(), plen, &sh.heap, &sh.alloc)
    };
    assert_eq!(again as *const _, ca);
    // Twice more through the table, the values still each object's own.
    p.run(|tx| {
        tx.write(b)?[0] = 4;
        Ok(())
    })
    .unwrap();
    assert_eq!(read(), (2, 4));
}

/// The inlined path ends at the transaction's first write: its own writes are in a
/// private copy that home does not show.
#[test]
fn a_transaction_reads_its_own_write() {
    let p = pool("");
    let (a, b) = clean_object(&p);
    let v = p
        .run(|tx| {
            tx.write(a)?[0] = 5;
            tx.write(b)?[1] = 6;
            Ok((tx.read(a)?[0], tx.read(b)?[1]))
        })
        .unwrap();
    assert_eq!(v, (5, 6));
}

/// A serializable transaction that read an object at home aborts if a commit changed
/// the object after its snapshot (the home word it saw is gone), and its retry sees
/// the change.
#[test]
fn serializable_validation_covers_home_reads() {
    use crate::tx_options::{Isolation, TxOptions};
    use std::sync::atomic::Ordering::Relaxed;
    use std::sync::Barrier;
    let p = pool("");
    let (a, b) = clean_object(&p);
    let attempts = AtomicU64::new(0);
    let (read, changed) = (Barrier::new(2), Barrier::new(2));
    std::thread::scope(|s| {
        s.spawn(|| {
            let mut h = p.handle().unwrap();
            h.run_with(
                TxOptions::default().isolation(Isolation::Serializable),
                |tx| {
                    let v = tx.read(a)?[0];
                    if attempts.fetch_add(1, Relaxed) == 0 {
                        read.wait();
                        changed.wait();
                    }
                    tx.write(b)?[0] = v;
                    Ok(())
                },
            )
            .unwrap();
        });
        read.wait();
        p.run(|tx| {
            tx.write(a)?[0] = 2;
            Ok(())
        })
        .unwrap();
        changed.wait();
    });
    assert_eq!(
        attempts.load(Relaxed),
        2,
        "the stale home read was not caught"
    );
    assert_eq!(p.run(|tx| Ok(tx.read(b)?[0])).unwrap(), 2);
}

/// The committed allocation state of small blocks is read without the pending lock,
/// from a word per block that follows `Pending::bits`: objects that commits allocated
/// are readable before a checkpoint sets their bits, and at every step the words say
/// what the map says, for each block the transactions allocated or freed.
#[test]
fn the_committed_state_of_small_blocks_follows_the_pending_map() {
    let p = pool("");
    let sh = engine(&p).shared().clone();
    let mut live: Vec<PPtr<[u64; 4]>> = Vec::new();
    let mut touched: Vec<Block> = Vec::new();
    let block = |ptr: PPtr<[u64; 4]>| {
        let s = sh.alloc.small_slot(ptr.offset(), 0).unwrap();
        Block {
            offset: ptr.offset() - HEADER as u64,
            size: (s.payload_len as usize + HEADER) as u64,
        }
    };
    let agree = |touched: &[Block]| {
        for &b in touched {
            let map = sh.pending.lock().unwrap().bits.get(&b.offset).copied();
            assert_eq!(sh.committed_state(b), map, "block at {:#x}", b.offset);
        }
    };
    for round in 0..6u64 {
        for i in 0..20u64 {
            let q = p.run(|tx| tx.alloc([round, i, 0, 0])).unwrap();
            touched.push(block(q));
            live.push(q);
        }
        // Readable at once: their bits are clear until a checkpoint.
        for &q in &live {
            assert!(p.run(|tx| Ok(tx.read(q)?[1])).unwrap() < 20);
        }
        for q in live.drain(..10) {
            p.run(|tx| tx.free(q)).unwrap();
        }
        agree(&touched);
        // (What the test is about: states the checkpoint has not written yet.)
        assert!(touched
            .iter()
            .any(|&b| sh.pending.lock().unwrap().bits.contains_key(&b.offset)));
        if round % 2 == 1 {
            p.allocated_objects().unwrap(); // quiesce: a checkpoint
            agree(&touched);
        }
    }
}

/// A large allocation that finds the heap full while the free that would make room
/// was committed after its snapshot: no checkpoint may cut past that snapshot, so the
/// block stays unreleased while the attempt runs. The attempt restarts with a newer
/// snapshot (one conflict), whose checkpoint releases the block, instead of reporting
/// the pool full. With nothing committed after its snapshot, a full heap is reported.
#[test]
fn a_full_heap_restarts_an_allocation_that_a_later_free_makes_room_for() {
    use std::sync::atomic::Ordering::Relaxed;
    use std::sync::Barrier;
    /// A 32 KiB payload: a run of one slab.
    type Big = [u64; 4096];
    let p = pool("");
    let mut big: Vec<PPtr<Big>> = Vec::new();
    loop {
        match p.run(|tx| tx.alloc([0u64; 4096])) {
            Ok(b) => big.push(b),
            Err(Error::OutOfSpace { .. }) => break,
            Err(e) => panic!("filling the heap: {e}"),
        }
    }
    assert!(big.len() > 100, "{} large blocks fit", big.len());
    let victim = big.pop().unwrap();
    let attempts = AtomicU64::new(0);
    let (started, freed) = (Barrier::new(2), Barrier::new(2));
    let got = std::thread::scope(|s| {
        let a = s.spawn(|| {
            let mut h = p.handle().unwrap();
            h.run(|tx| {
                if attempts.fetch_add(1, Relaxed) == 0 {
                    started.wait();
                    freed.wait();
                }
                tx.alloc([1u64; 4096])
            })
        });
        s.spawn(|| {
            let mut h = p.handle().unwrap();
            started.wait();
            h.run(|tx| tx.free(victim)).unwrap();
            freed.wait();
        });
        a.join().unwrap()
    });
    let got = got.expect("the freed block was not found");
    assert_eq!(
        attempts.load(Relaxed),
        2,
        "one conflict, then the allocation"
    );
    assert_eq!(
        got.offset(),
        victim.offset(),
        "the only free run is the freed one"
    );
    assert!(matches!(
        p.run(|tx| tx.alloc([0u64; 4096])),
        Err(Error::OutOfSpace { .. })
    ));
}

/// The restart above cannot loop while other threads keep committing: after a few
/// conflicts the allocating transaction takes the fallback word, the others wait, no
/// commit follows its snapshot any more, and a heap that is really full is reported.
#[test]
fn a_full_heap_is_reported_while_other_threads_commit() {
    use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
    use std::time::{Duration, Instant};
    let p = pool("");
    let counter: PPtr<u64> = p.root().unwrap();
    let mut big = 0;
    while p.run(|tx| tx.alloc([0u64; 4096])).is_ok() {
        big += 1;
    }
    assert!(big > 100, "{big} large blocks fit");
    let stop = AtomicBool::new(false);
    let (result, took) = std::thread::scope(|s| {
        s.spawn(|| {
            let mut h = p.handle().unwrap();
            // Bounded, so a livelock shows as a slow allocation rather than a hang.
            let deadline = Instant::now() + Duration::from_secs(20);
            while !stop.load(Relaxed) && Instant::now() < deadline {
                h.run(|tx| {
                    *tx.write(counter)? += 1;
                    Ok(())
                })
                .unwrap();
            }
        });
        let mut h = p.handle().unwrap();
        let t = Instant::now();
        let r = h.run(|tx| tx.alloc([0u64; 4096]));
        let took = t.elapsed();
        stop.store(true, Relaxed);
        (r, took)
    });
    assert!(
        matches!(result, Err(Error::OutOfSpace { .. })),
        "{:?}",
        result.map(|b| b.offset())
    );
    assert!(
        took < Duration::from_secs(10),
        "the allocation took {took:?}"
    );
}
