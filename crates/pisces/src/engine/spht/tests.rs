//! Unit tests of the `spht` protocol paths (the behavioural, container, crash and
//! isolation suites run the engine through the public API). Each test here fails when
//! its path is broken (see the commit messages for the injected bugs).

use super::apply::{apply, apply_marked, Tracking};
use super::durability::{self, MARKER_OFFSET};
use super::log::{self, RecordRef, Standing, LINK_BIT};
use super::options::SphtSettings;
use super::shared::SphtEngine;
use super::thread::SphtThread;
use crate::engine::kit::log::redo_log::Entry;
use crate::engine::kit::recovery::replay_parts::part_of;
use crate::engine::{DurableToken, Engine, EngineId, EngineOptions, EngineThread, OpenCtx};
use crate::heap::{FormatParams, Heap};
use crate::medium::dram::DramMedium;
use crate::tx_options::TxOptions;
use std::sync::atomic::Ordering::{Acquire, Relaxed, SeqCst};
use std::sync::Arc;
use std::time::Duration;

fn engine_with(opts: EngineOptions, threads: usize) -> SphtEngine {
    engine_with_log(opts, threads, 64 << 10)
}

fn engine_with_log(opts: EngineOptions, threads: usize, log_bytes: usize) -> SphtEngine {
    let heap = Heap::format_dram(
        16 << 20,
        FormatParams {
            engine_id: EngineId::Spht as u32,
            max_threads: threads,
            log_bytes_per_thread: log_bytes,
            regions: crate::engine::Regions {
                logs_per_thread: 1,
                engine_area_bytes: durability::engine_area_bytes(threads),
            },
        },
    );
    let o = SphtSettings::parse("spht", &opts).unwrap();
    SphtEngine::open(
        Arc::new(heap),
        o,
        &OpenCtx {
            recovery_threads: 1,
            ..OpenCtx::default()
        },
    )
    .unwrap()
}

fn engine() -> SphtEngine {
    engine_with(EngineOptions::new().set("clock", "counter"), 4)
}

fn alloc(th: &mut SphtThread, n: usize) -> u64 {
    th.begin(&TxOptions::default());
    let off = th.alloc(8 * n).unwrap();
    let tok = th.commit().unwrap();
    th.wait_durable(tok).unwrap();
    off
}

/// Write `v` at `off`, retrying on conflicts (concurrent tests).
fn put(th: &mut SphtThread, off: u64, v: u64) -> DurableToken {
    loop {
        th.begin(&TxOptions::default());
        let r = th.write(off, 8).and_then(|p| {
            // SAFETY: our private copy of at least 8 bytes, 8-aligned.
            unsafe { (p as *mut u64).write(v) };
            th.commit()
        });
        match r {
            Ok(tok) => return tok,
            Err(crate::Error::Conflict) => th.abort(),
            Err(e) => panic!("put: {e}"),
        }
    }
}

/// Write `v` into word `w` of the 4-word object at `obj`, retrying on conflicts.
fn put_word(th: &mut SphtThread, obj: u64, w: u64, v: u64) {
    loop {
        th.begin(&TxOptions::default());
        let r = th.write(obj, 32).and_then(|p| {
            // SAFETY: our private copy of the object's 32 bytes, 8-aligned.
            unsafe { (p as *mut u64).add(w as usize).write(v) };
            th.commit()
        });
        match r {
            Ok(_) => return,
            Err(crate::Error::Conflict) => th.abort(),
            Err(e) => panic!("put_word: {e}"),
        }
    }
}

fn get(th: &mut SphtThread, off: u64) -> u64 {
    th.begin(&TxOptions::default());
    let v = word(th, off);
    th.commit().unwrap();
    v
}

/// The first word of the object at `off`, read in `th`'s running transaction.
fn word(th: &SphtThread, off: u64) -> u64 {
    // SAFETY: a copy of at least 8 bytes, 8-aligned, valid while the transaction runs.
    unsafe { (th.read(off, 8).unwrap() as *const u64).read() }
}

#[cfg(feature = "mutation")] // used by the tests that pause a commit
fn wait_until(what: &str, f: impl Fn() -> bool) {
    let t = std::time::Instant::now();
    while !f() {
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "timed out waiting for {what}"
        );
        std::thread::yield_now();
    }
}

/// Every committed update transaction, in link order from the run's first: forward
/// links and backward links describe the same chain, in increasing timestamps.
fn chain(e: &SphtEngine) -> Vec<u64> {
    let sh = e.shared();
    let heap = &*sh.heap;
    let mut out = Vec::new();
    let mut next = sh.genesis.load(Acquire);
    let mut prev_link = 0;
    while next & LINK_BIT != 0 {
        let (s, p) = log::unlink(next);
        let r = RecordRef::read(heap, s, p);
        assert_eq!(
            r.back(heap),
            prev_link,
            "backward link of ts {} is wrong",
            r.ts
        );
        if let Some(&last) = out.last() {
            assert!(r.ts > last, "link order is not timestamp order");
        }
        out.push(r.ts);
        prev_link = r.link();
        next = r.fwd(heap);
    }
    out
}

/// Link test: the forward and backward chains hold every update transaction of every
/// thread, in timestamp order, with concurrent committers.
#[test]
fn links_chain_every_update_transaction_in_timestamp_order() {
    for clock in ["counter", "tsc"] {
        if clock == "tsc" && !super::clock::ClockKind::tsc_available() {
            continue;
        }
        let e = Arc::new(engine_with(EngineOptions::new().set("clock", clock), 4));
        let mut t0 = e.thread(0).unwrap();
        let offs: Vec<u64> = (0..4).map(|_| alloc(&mut t0, 1)).collect();
        drop(t0);
        let tss = std::sync::Mutex::new(Vec::new());
        std::thread::scope(|s| {
            for t in 0..3usize {
                let (e, offs, tss) = (&e, &offs, &tss);
                s.spawn(move || {
                    let mut th = e.thread(t).unwrap();
                    for i in 0..300u64 {
                        let tok = put(&mut th, offs[(t + i as usize) % 4], i);
                        tss.lock().unwrap().push(tok.0);
                    }
                });
            }
        });
        let c = chain(&e);
        let mut want = tss.into_inner().unwrap();
        want.sort_unstable();
        // The 4 allocations come first in the chain.
        assert_eq!(
            c.len(),
            want.len() + 4,
            "the chain misses transactions ({clock})"
        );
        assert_eq!(
            &c[4..],
            &want[..],
            "the chain is not every commit in ts order"
        );
    }
}

/// Wait test: a transaction with a larger timestamp is not durable (its commit does
/// not even return) while one with a smaller timestamp has not flushed its log.
#[cfg(feature = "mutation")] // the `before-log` hook point
#[test]
fn commit_waits_for_smaller_timestamps_to_persist() {
    let sc = crate::mutation::Scenario::setup();
    let e = Arc::new(engine());
    let sh = e.shared().clone();
    let (mut a, mut b) = (e.thread(0).unwrap(), e.thread(1).unwrap());
    let x = alloc(&mut a, 1);
    let y = alloc(&mut b, 1);
    std::thread::scope(|s| {
        // Armed in the scope: a panic here drops it (letting A go) before the scope
        // joins A.
        let hold_a = sc.pause(&super::thread::BEFORE_LOG, 0);
        let ha = s.spawn(move || {
            let tok = put(&mut a, x, 1);
            a.wait_durable(tok).unwrap();
            tok
        });
        wait_until("A to be held", || hold_a.reached());
        let hb = s.spawn(move || {
            let tok = put(&mut b, y, 2);
            b.wait_durable(tok).unwrap();
            tok
        });
        std::thread::sleep(Duration::from_millis(200));
        let d = sh.durable.load(SeqCst);
        let done = hb.is_finished();
        hold_a.release();
        let (ta, tb) = (ha.join().unwrap(), hb.join().unwrap());
        assert!(ta.0 < tb.0);
        assert!(
            !done && d < tb.0,
            "B (ts {}) became durable (point {d}) while A (ts {}) had not flushed its log",
            tb.0,
            ta.0
        );
        assert!(sh.stats.waited.load(Relaxed) >= 1);
    });
    assert!(sh.durable.load(SeqCst) >= sh.slots[1].last().0);
}

/// skipCAS test: a committer that sees an update transaction with a larger timestamp
/// leaves the marker to it; a lone committer CASes it itself.
#[cfg(feature = "mutation")] // the `before-log` hook point
#[test]
fn skip_cas_delegates_the_marker_to_a_larger_update() {
    let sc = crate::mutation::Scenario::setup();
    let e = Arc::new(engine());
    let sh = e.shared().clone();
    let (mut a, mut b) = (e.thread(0).unwrap(), e.thread(1).unwrap());
    let x = alloc(&mut a, 1);
    let y = alloc(&mut b, 1);
    // Alone: CAS, no skip.
    let (cas0, skip0) = (sh.stats.cas.load(SeqCst), sh.stats.skipped.load(SeqCst));
    let tok = put(&mut a, x, 7);
    a.wait_durable(tok).unwrap();
    assert_eq!(
        sh.stats.cas.load(SeqCst),
        cas0 + 1,
        "a lone commit must CAS the marker"
    );
    assert_eq!(sh.stats.skipped.load(SeqCst), skip0);
    // A (smaller ts) held before its log; B (larger) commits and waits for A; A then
    // sees B as an update transaction with a larger timestamp and skips the CAS. B is
    // held before its marker update, so A's durability must come from B's CAS.
    std::thread::scope(|s| {
        let hold_a = sc.pause(&super::thread::BEFORE_LOG, 0);
        let ha = s.spawn(move || put(&mut a, x, 8).0);
        wait_until("A to be held", || hold_a.reached());
        let hb = s.spawn(move || {
            let tok = put(&mut b, y, 9);
            b.wait_durable(tok).unwrap();
            tok.0
        });
        // UPD without PERS: B is past its validation, waiting for A (an idle slot
        // keeps the UPD bit of its last commit, with PERS).
        wait_until("B to be waiting for A", || {
            sh.slots[1].vts.load(SeqCst) & (durability::UPD | durability::PERS) == durability::UPD
        });
        hold_a.release();
        let ta = ha.join().unwrap();
        let tb = hb.join().unwrap();
        assert!(ta < tb);
        assert_eq!(
            sh.stats.skipped.load(SeqCst),
            skip0 + 1,
            "A did not skip its CAS though B (larger, update) was committing"
        );
        assert_eq!(sh.stats.cas.load(SeqCst), cas0 + 2, "exactly B CASed");
        assert!(sh.heap.atomic_u64(MARKER_OFFSET).load(SeqCst) >= tb);
    });
}

/// skipCAS condition: a larger timestamp that is not an update transaction's (a lower
/// bound published in steps 2-5, by a committer that may still abort) is no delegate:
/// the committer CASes the marker itself, so its commit is durable when it returns.
fn skip_cas_ignores_a_larger_lower_bound() {
    let e = engine();
    let sh = e.shared().clone();
    let mut a = e.thread(0).unwrap();
    let x = alloc(&mut a, 1);
    // Slot 1 (no thread) shows a lower bound far above A's coming timestamp, with
    // neither isUpd nor isPers.
    let idle = sh.slots[1].vts.load(SeqCst);
    sh.slots[1].vts.store(1 << 60, SeqCst);
    let tok = put(&mut a, x, 1);
    let covered = sh.durable.load(SeqCst) >= tok.0;
    // Slot 1's transaction aborts; A's next commit covers the first either way (so a
    // failure here does not hang in the thread's drop).
    sh.slots[1].vts.store(idle, SeqCst);
    let tok2 = put(&mut a, x, 2);
    a.wait_durable(tok2).unwrap();
    assert!(
        covered,
        "A skipped its CAS for a transaction that is not an update: not durable when its commit returned"
    );
}

#[test]
fn skip_cas_needs_an_update_transaction() {
    skip_cas_ignores_a_larger_lower_bound();
}

/// Duplicate filter: backward replay writes each word once, with its newest value.
#[test]
fn backward_replay_filters_duplicates_and_keeps_the_newest_value() {
    let e = engine();
    let heap = &*e.shared().heap;
    let base = heap.layout().heap_offset as u64;
    let batch: Vec<Vec<Entry<'_>>> = (0..10u64)
        .map(|t| {
            (0..4u64)
                .map(|w| Entry::Word {
                    off: base + 8 * w,
                    value: 100 * t + w,
                })
                .collect()
        })
        .collect();
    for shards in [1, 2] {
        let (_, st) = apply(heap, &batch, true, shards).unwrap();
        for w in 0..4u64 {
            assert_eq!(
                heap.atomic_u64((base + 8 * w) as usize).load(Relaxed),
                900 + w,
                "word {w} does not hold the newest value"
            );
        }
        assert_eq!(st.applied.iter().sum::<u64>(), 4, "each word written once");
        assert_eq!(st.filtered, 36);
    }
    let (_, st) = apply(heap, &batch, false, 1).unwrap();
    assert_eq!(st.applied[0], 40);
    assert_eq!(heap.atomic_u64(base as usize).load(Relaxed), 900);
    // The same with recovery's dense (bitmap) tracking.
    for shards in [1, 2] {
        for w in 0..4u64 {
            heap.atomic_u64((base + 8 * w) as usize).store(0, Relaxed);
        }
        let (_, st) =
            apply_marked(heap, &batch, true, shards, Tracking::Dense, Some(|_| true)).unwrap();
        for w in 0..4u64 {
            assert_eq!(
                heap.atomic_u64((base + 8 * w) as usize).load(Relaxed),
                900 + w,
                "word {w} does not hold the newest value (dense filter)"
            );
        }
        assert_eq!(st.applied.iter().sum::<u64>(), 4, "each word written once");
        assert_eq!(st.filtered, 36);
    }
}

/// Shard filter: every word is applied by exactly the shard owning its 4 KiB chunk.
#[test]
fn shards_apply_exactly_their_chunks() {
    let e = engine();
    let heap = &*e.shared().heap;
    let base = heap.layout().heap_offset as u64;
    let offs: Vec<u64> = (0..64u64).map(|i| base + i * 1032).collect();
    let data: Vec<u64> = offs.iter().map(|o| o ^ 0x5a5a).collect();
    let batch = vec![offs
        .iter()
        .zip(&data)
        .map(|(&off, &value)| Entry::Word { off, value })
        .collect::<Vec<_>>()];
    for filter in [true, false] {
        for shards in [1usize, 2, 3] {
            for &o in &offs {
                heap.atomic_u64(o as usize).store(0, Relaxed);
            }
            let (_, st) = apply(heap, &batch, filter, shards).unwrap();
            for k in 0..shards {
                let want = offs.iter().filter(|&&o| part_of(o, shards) == k).count() as u64;
                assert_eq!(
                    st.applied[k], want,
                    "shard {k} of {shards} applied other words"
                );
            }
            for (&o, &v) in offs.iter().zip(&data) {
                assert_eq!(
                    heap.atomic_u64(o as usize).load(Relaxed),
                    v,
                    "word {o:#x} lost"
                );
            }
        }
    }
}

/// The replayer brings the durable heap to the working snapshot's values, through
/// both replay directions and both marker schemes, with log wrap-around.
#[test]
fn replay_makes_the_durable_heap_equal_the_snapshot() {
    for opts in SphtSettings::option_sets() {
        let e = engine_with(opts.clone(), 2);
        let mut th = e.thread(0).unwrap();
        let objs: Vec<u64> = (0..16).map(|_| alloc(&mut th, 4)).collect();
        for i in 0..3000u64 {
            let off = objs[(i * 7 % 16) as usize];
            th.begin(&TxOptions::default());
            let p = th.write(off, 32).unwrap() as *mut u64;
            // SAFETY: our private copy of 32 bytes.
            unsafe { p.add((i % 4) as usize).write(i) };
            let tok = th.commit().unwrap();
            th.wait_durable(tok).unwrap();
        }
        drop(th);
        e.quiesce();
        let sh = e.shared();
        for &o in &objs {
            for w in 0..4u64 {
                let off = o + 8 * w;
                assert_eq!(
                    sh.heap.atomic_u64(off as usize).load(Relaxed),
                    sh.ws.word(off).load(Relaxed),
                    "durable heap differs at {off:#x} ({opts})"
                );
            }
        }
        assert!(sh.stats.batches.load(Relaxed) > 0);
        if opts.get("replay").is_none() {
            assert!(
                sh.stats.filtered.load(Relaxed) > 0,
                "no duplicate filtered ({opts})"
            );
        }
    }
}

/// A read-only transaction's token waits for the writers it read from.
#[test]
fn read_only_token_covers_what_it_read() {
    let e = engine();
    let mut a = e.thread(0).unwrap();
    let x = alloc(&mut a, 1);
    let tok = put(&mut a, x, 5);
    a.begin(&TxOptions::default());
    assert_eq!(word(&a, x), 5);
    let rtok = a.commit().unwrap();
    assert_eq!(rtok, tok, "the reader's token is its writer's timestamp");
    a.wait_durable(rtok).unwrap();
    assert_eq!(get(&mut a, x), 5);
}

/// A kept read copy (`CopyCache`) is handed out again only while its object's stripe
/// has the version it was taken at: a read after another thread's commit sees the new
/// value, on every read path (small blocks and large runs).
#[test]
fn a_kept_copy_is_not_handed_out_after_its_object_changed() {
    // Logs that hold a large run's allocation record.
    let e = engine_with_log(EngineOptions::new().set("clock", "counter"), 4, 512 << 10);
    let mut a = e.thread(0).unwrap();
    let mut b = e.thread(1).unwrap();
    // (2100 words: a large run, beyond the small classes.)
    for words in [1, 2100] {
        let x = alloc(&mut a, words);
        put(&mut a, x, 5);
        assert_eq!(get(&mut a, x), 5);
        assert_eq!(get(&mut a, x), 5, "read from the kept copy");
        put(&mut b, x, 6);
        assert_eq!(get(&mut a, x), 6, "{words}-word object: a stale kept copy");
    }
}

/// Copies a transaction was handed stay unchanged until it ends, although later reads
/// of that transaction fill the cache set they live in (two objects of one set) and
/// need new chunks of the per-transaction copies (many objects).
#[test]
fn copies_handed_out_stay_unchanged_while_the_transaction_runs() {
    use super::read_copies::CopyCache;
    let e = engine();
    let mut a = e.thread(0).unwrap();
    // Enough objects that many share a cache set (their copies then go into the
    // chunks, several of them), and at least one shares the first one's.
    let mut objs: Vec<u64> = Vec::new();
    let same_set = |o: u64, p: u64| CopyCache::set_of(o - 8) == CopyCache::set_of(p - 8);
    while objs.len() < 12_000 || !objs[1..].iter().any(|&o| same_set(o, objs[0])) {
        objs.push(alloc(&mut a, 8));
    }
    let first = objs[0];
    let twin = *objs[1..].iter().find(|&&o| same_set(o, first)).unwrap();
    for (k, &o) in objs.iter().enumerate() {
        put(&mut a, o, 1000 + k as u64);
    }
    let mut order = vec![first, twin];
    order.extend(objs.iter().copied().filter(|&o| o != first && o != twin));
    for round in 0..2 {
        a.begin(&TxOptions::default());
        let held: Vec<(u64, *const u64)> = order
            .iter()
            .map(|&o| (o, a.read(o, 64).unwrap() as *const u64))
            .collect();
        for &(o, p) in &held {
            let k = objs.iter().position(|&x| x == o).unwrap() as u64;
            // SAFETY: a copy of 64 readable bytes, valid while the transaction runs.
            let v = unsafe { p.read() };
            assert_eq!(v, 1000 + k, "round {round}: copy of {o:#x} changed");
        }
        a.commit().unwrap();
    }
}

/// The read fast path finds only allocated objects that hold the bytes asked for: a
/// freed object (its free replayed) and a read longer than the object are refused as
/// `locate_object` refuses them.
#[test]
fn the_read_fast_path_refuses_freed_objects_and_long_reads() {
    let e = engine();
    let mut a = e.thread(0).unwrap();
    let x = alloc(&mut a, 1);
    put(&mut a, x, 5);
    // Replay sets the allocation bit: reads of `x` take the fast path from now on
    // (before, `locate_object` answers for a block whose allocation is pending).
    e.quiesce();
    assert!(e.shared().alloc.block_state(x).unwrap().1);
    a.begin(&TxOptions::default());
    assert!(
        matches!(a.read(x, 4096), Err(crate::Error::InvalidPointer(_))),
        "a 4096-byte read of an 8-byte object"
    );
    a.abort();
    assert_eq!(get(&mut a, x), 5);
    a.begin(&TxOptions::default());
    a.free(x).unwrap();
    let tok = a.commit().unwrap();
    a.wait_durable(tok).unwrap();
    // Replay applies the free: its allocation bit is cleared.
    e.quiesce();
    assert!(!e.shared().alloc.block_state(x).unwrap().1);
    a.begin(&TxOptions::default());
    assert!(
        matches!(a.read(x, 8), Err(crate::Error::InvalidPointer(_))),
        "a read of a freed object"
    );
    a.abort();
}

/// Every read of the inline read path joins the read set, the kept copy handed out
/// again as well as a new copy: a transaction that read an object, then wrote another
/// one, does not commit after another thread's commit changed what it read. Also after
/// a snapshot, whose reads join no read set.
#[test]
fn the_read_fast_path_reads_join_the_read_set() {
    let e = engine();
    let mut a = e.thread(0).unwrap();
    let mut b = e.thread(1).unwrap();
    let (x, z) = (alloc(&mut a, 1), alloc(&mut a, 1));
    put(&mut a, x, 5);
    // Replay sets the allocation bits: reads take the inline path from now on.
    e.quiesce();
    // A kept copy of `x`: its cache set's buffer holds the object from now on, and the
    // read set has room (the inline path neither grows a buffer nor the read set).
    assert_eq!(get(&mut a, x), 5);
    // A snapshot before (it keeps no read set; the attempts below must).
    a.begin_snapshot();
    assert_eq!(word(&a, x), 5);
    a.end_snapshot(false).unwrap().unwrap();
    let mut committed = Vec::new();
    // First the kept copy handed out again; then, `x` changed by the first round, a
    // new copy into the same buffer.
    for kept in [true, false] {
        a.begin(&TxOptions::default());
        assert_eq!(word(&a, x), 5);
        put(&mut b, x, 6);
        put(&mut b, x, 5);
        let w = a.write(z, 8).unwrap();
        // SAFETY: our private copy of 8 bytes.
        unsafe { (w as *mut u64).write(1) };
        match a.commit() {
            Err(crate::Error::Conflict) => a.abort(),
            Ok(_) => committed.push(kept),
            Err(e) => panic!("{e}"),
        }
    }
    assert!(
        committed.is_empty(),
        "committed after the object read changed (kept copy: {committed:?})"
    );
}

/// A snapshot keeps no read set: its reads are consistent because each refuses a
/// version at or after its read version. A snapshot that read `x` does not then read
/// the `y` of a commit that changed both after it began (a read skew), whether `y`'s
/// copy is kept (the inline path's hit) or new.
#[test]
fn a_snapshot_refuses_what_a_later_commit_wrote() {
    let e = engine();
    let mut a = e.thread(0).unwrap();
    let mut b = e.thread(1).unwrap();
    let (x, y) = (alloc(&mut a, 1), alloc(&mut a, 1));
    put(&mut a, x, 1);
    put(&mut a, y, 1);
    e.quiesce();
    for kept in [true, false] {
        if kept {
            // A kept copy of `y` at its current version.
            assert_eq!(get(&mut a, y), get(&mut b, x));
        }
        a.begin_snapshot();
        let vx = word(&a, x);
        b.begin(&TxOptions::default());
        for o in [x, y] {
            // SAFETY: our private copy of 8 bytes.
            unsafe { (b.write(o, 8).unwrap() as *mut u64).write(vx + 1) };
        }
        b.commit().unwrap();
        let r = a.read(y, 8);
        assert!(
            matches!(r, Err(crate::Error::Conflict)),
            "a snapshot read what a commit after its begin wrote (kept copy: {kept})"
        );
        a.abort();
    }
}

/// A snapshot keeps no read set, and still tells a stale pointer from a bad one: an
/// object it could read as of its read version that a later commit freed (the free
/// replayed, so its allocation bit is clear) is a conflict, and `run` retries; an
/// offset that was never an object is the error.
#[test]
fn a_snapshot_answers_a_freed_object_with_a_conflict() {
    let e = engine();
    let mut a = e.thread(0).unwrap();
    let mut b = e.thread(1).unwrap();
    let (x, y) = (alloc(&mut a, 1), alloc(&mut a, 1));
    put(&mut a, x, y);
    put(&mut a, y, 5);
    e.quiesce();
    a.begin_snapshot();
    let p = word(&a, x);
    assert_eq!(p, y);
    // Another thread unlinks and frees `y`; replay clears its allocation bit.
    b.begin(&TxOptions::default());
    // SAFETY: our private copy of 8 bytes.
    unsafe { (b.write(x, 8).unwrap() as *mut u64).write(0) };
    b.free(y).unwrap();
    let tok = b.commit().unwrap();
    b.wait_durable(tok).unwrap();
    e.quiesce();
    assert!(!e.shared().alloc.block_state(y).unwrap().1);
    assert!(
        matches!(a.read(p, 8), Err(crate::Error::Conflict)),
        "a snapshot's read of an object freed after its read version"
    );
    a.abort();
    // A new snapshot reads the unlinked state; an offset never allocated is an error.
    a.begin_snapshot();
    assert_eq!(word(&a, x), 0);
    assert!(
        matches!(a.read(y, 8), Err(crate::Error::InvalidPointer(_))),
        "a snapshot's read of an object freed before its read version"
    );
    a.abort();
    a.begin_snapshot();
    assert!(
        matches!(
            a.read(y + (1 << 20), 8),
            Err(crate::Error::InvalidPointer(_))
        ),
        "a snapshot's read of an offset that was never an object"
    );
    a.end_snapshot(true).unwrap().unwrap();
}

/// The kept-copy lookup, which locates nothing, hands out only what a located read
/// would: not more bytes than the kept copy holds (a read longer than the object is
/// refused), not an empty entry (for the offset whose header offset is the empty mark),
/// and not the root slot's payload by its own offset (a user may only read it through
/// the root token; its copy is not kept).
#[test]
fn the_kept_copy_lookup_hands_out_only_located_objects() {
    use crate::engine::kit::validate::{root_slot_token, ROOT_SLOT_PAYLOAD};
    let e = engine();
    let mut a = e.thread(0).unwrap();
    let x = alloc(&mut a, 1);
    put(&mut a, x, 5);
    e.quiesce();
    assert_eq!(get(&mut a, x), 5);
    assert_eq!(get(&mut a, x), 5, "read from the kept copy");
    a.begin(&TxOptions::default());
    assert!(
        matches!(a.read(x, 4096), Err(crate::Error::InvalidPointer(_))),
        "a 4096-byte read of an 8-byte object with a kept copy"
    );
    a.abort();
    // The offset whose header offset is an empty entry's mark (no object's header is
    // there): an empty entry matches it on no path.
    a.begin(&TxOptions::default());
    assert!(
        matches!(a.read(7, 0), Err(crate::Error::InvalidPointer(_))),
        "a read at the offset of the empty entries' mark"
    );
    a.abort();
    for _ in 0..2 {
        a.begin(&TxOptions::default());
        a.read(root_slot_token(), 16).unwrap();
        assert!(
            matches!(
                a.read(ROOT_SLOT_PAYLOAD, 8),
                Err(crate::Error::InvalidPointer(_))
            ),
            "the root slot's payload read by its offset"
        );
        a.commit().unwrap();
    }
}

/// On a pool file the working snapshot is a copy-on-write (`MAP_PRIVATE`) mapping:
/// commits change it and not the file until the replayer applies them; the file then
/// holds the committed values, and a reopened pool reads them.
#[test]
fn file_pools_get_a_copy_on_write_snapshot() {
    use crate::medium::open::create_file;
    use crate::medium::MediumKind;
    let dir = tempfile::tempdir_in("/dev/shm").unwrap();
    let path = dir.path().join("spht.pool");
    let m = create_file(&path, 8 << 20, MediumKind::DRAM).unwrap();
    let heap = Arc::new(
        Heap::format(
            m,
            FormatParams {
                engine_id: EngineId::Spht as u32,
                max_threads: 2,
                log_bytes_per_thread: 64 << 10,
                regions: crate::engine::Regions {
                    logs_per_thread: 1,
                    engine_area_bytes: durability::engine_area_bytes(2),
                },
            },
        )
        .unwrap(),
    );
    let opts = SphtSettings::parse("spht", &EngineOptions::new()).unwrap();
    let ctx = OpenCtx {
        recovery_threads: 1,
        ..OpenCtx::default()
    };
    let e = SphtEngine::open(heap.clone(), opts, &ctx).unwrap();
    assert!(e.shared().ws.copy_on_write);
    let mut th = e.thread(0).unwrap();
    let x = alloc(&mut th, 1);
    let tok = put(&mut th, x, 0xfeed);
    th.wait_durable(tok).unwrap();
    assert_eq!(e.shared().ws.word(x).load(Relaxed), 0xfeed);
    drop(th);
    e.quiesce();
    assert_eq!(
        heap.atomic_u64(x as usize).load(Relaxed),
        0xfeed,
        "not replayed"
    );
    drop(e);
    drop(heap);
    let heap = Arc::new(
        Heap::open(crate::heap::superblock::open_pool_file(&path, MediumKind::DRAM).unwrap())
            .unwrap(),
    );
    let e = SphtEngine::open(heap, opts, &ctx).unwrap();
    let mut th = e.thread(1).unwrap();
    assert_eq!(get(&mut th, x), 0xfeed);
}

/// Log space: a lone writer whose log holds only the replayer's cursor (kept until the
/// next batch) still fits a record of the largest accepted size, wherever the cursor
/// sits in the ring, wrapped or not. Fillers of many sizes put the cursor at many
/// offsets. Fails with records of up to half the ring (a cursor in the middle leaves
/// less than that on both sides), and with a wrap's skipped space counted as used
/// while the record after it is live (the bug that stalled the `alloc` crash
/// campaigns: the writer waited for a batch only another thread's commit could start).
#[test]
fn a_log_holding_only_the_cursor_fits_the_largest_record() {
    let m = Arc::new(DramMedium::anonymous(4 << 20, 0, 0).unwrap());
    let heap = Heap::format(
        m,
        FormatParams {
            engine_id: EngineId::Spht as u32,
            max_threads: 1,
            log_bytes_per_thread: 64 << 10,
            regions: crate::engine::Regions {
                logs_per_thread: 1,
                engine_area_bytes: durability::engine_area_bytes(1),
            },
        },
    )
    .unwrap();
    let mut w = log::LogWriter::new(&heap, 0, 1);
    let max = w.max_record() - log::HEADER_LEN;
    let big = vec![0u8; max];
    let mut checked = 0;
    for filler in (0..max).step_by(520) {
        let filler = vec![0u8; filler];
        for bytes in [&filler, &big, &big] {
            assert!(
                w.fits(bytes.len()),
                "a record does not fit an almost empty log"
            );
            w.append(&heap, bytes, 1, Standing::ByMarker, &[]);
            // The replayer releases everything but the newest record (its cursor).
            let newest = w.next_seq() - 1;
            w.reclaim(newest);
            assert_eq!(w.live_records(), 1);
            assert!(
                w.fits(max),
                "only the cursor is live, yet the largest record does not fit ({w:?})"
            );
            checked += 1;
        }
    }
    assert!(checked > 100);
}

/// The pool's bytes as a crash right now could leave them: every store so far (any of
/// them may have reached the medium by eviction). Word by word through atomics, as
/// other threads may be storing.
fn crash_image(heap: &Heap) -> Vec<u64> {
    (0..heap.medium().len() / 8)
        .map(|i| heap.atomic_u64(8 * i).load(SeqCst))
        .collect()
}

/// Recover a crash image as a new process would (recovery runs in `open`).
#[cfg(feature = "mutation")] // used by the dependent-commit crash only
fn recover_image(image: &[u64]) -> SphtEngine {
    recover_image_with(image, EngineOptions::new().set("clock", "counter"), 1)
}

/// Recover a crash image with options `opts` on `shards` recovery threads.
fn recover_image_with(image: &[u64], opts: EngineOptions, shards: usize) -> SphtEngine {
    let len = image.len() * 8;
    let m = Arc::new(DramMedium::anonymous(len, 0, 0).unwrap());
    // SAFETY: the fresh mapping is `len` bytes and nobody else uses it yet.
    unsafe {
        std::ptr::copy_nonoverlapping(
            image.as_ptr() as *const u8,
            crate::medium::Medium::base(&*m),
            len,
        )
    };
    let heap = Heap::open(m).unwrap();
    let o = SphtSettings::parse("spht", &opts).unwrap();
    SphtEngine::open(
        Arc::new(heap),
        o,
        &OpenCtx {
            recovery_threads: shards,
            ..OpenCtx::default()
        },
    )
    .unwrap()
}

/// A durable transaction of `t` that reads the word at `from` and writes it plus one at
/// `to`, retried on conflicts.
#[cfg(feature = "mutation")]
fn put_successor(t: &mut SphtThread, from: u64, to: u64) {
    loop {
        t.begin(&TxOptions::default());
        let r = t.read(from, 8).and_then(|p| {
            // SAFETY: a copy of 8 bytes, valid while the transaction runs.
            let v = unsafe { (p as *const u64).read() };
            let q = t.write(to, 8)?;
            // SAFETY: our private copy of 8 bytes.
            unsafe { (q as *mut u64).write(v + 1) };
            t.commit()
        });
        match r {
            Ok(tok) => {
                t.wait_durable(tok).unwrap();
                return;
            }
            Err(crate::Error::Conflict) => t.abort(),
            Err(e) => panic!("{e}"),
        }
    }
}

/// Crash test of the wait on smaller timestamps (§3.1): A writes x = 1 and is held
/// after its write-back, before its log record; B reads x and writes y = x + 1. A crash
/// while A is held must not recover y = 2 without x = 1 (B depends on A). Returns the
/// recovered (x, y). A is held with the `before-log` hook point of scenario `sc`.
#[cfg(feature = "mutation")]
fn dependent_commit_crash(sc: &crate::mutation::Scenario, points: bool) -> (u64, u64) {
    let opts = EngineOptions::new()
        .set("clock", "counter")
        .set("points", if points { "on" } else { "off" });
    let e = Arc::new(engine_with(opts, 2));
    let sh = e.shared().clone();
    let (mut a, mut b) = (e.thread(0).unwrap(), e.thread(1).unwrap());
    let x = alloc(&mut a, 1);
    let y = alloc(&mut b, 1);
    e.quiesce();
    let image = std::thread::scope(|s| {
        let hold_a = sc.pause(&super::thread::BEFORE_LOG, 0);
        let ha = s.spawn(move || put(&mut a, x, 1));
        wait_until("A to be held", || hold_a.reached());
        let hb = s.spawn(move || put_successor(&mut b, x, y));
        // B's commit returns at once without the wait; with it, B waits for A.
        let t = std::time::Instant::now();
        while !hb.is_finished() && t.elapsed() < Duration::from_millis(300) {
            std::thread::sleep(Duration::from_millis(5));
        }
        let image = crash_image(&sh.heap);
        hold_a.release();
        ha.join().unwrap();
        hb.join().unwrap();
        image
    });
    drop(e);
    let r = recover_image(&image);
    let mut th = r.thread(0).unwrap();
    (get(&mut th, x), get(&mut th, y))
}

#[cfg(feature = "mutation")] // the `before-log` hook point
#[test]
fn a_crash_never_recovers_a_transaction_without_one_it_read_from() {
    // With point records, B finds A not persistent: its record is no point, and it
    // waits for A as without them.
    for points in [false, true] {
        let (x, y) = dependent_commit_crash(&crate::mutation::Scenario::setup(), points);
        assert!(
            y == 0 || (x == 1 && y == 2),
            "points {points}: recovered y = {y} (B read x = 1) but x = {x}: B is durable without A"
        );
    }
}

/// The dependent-commit crash with mutation point `m` switched on (`points`: point
/// records on): the recovered (x, y).
#[cfg(feature = "mutation")]
fn dependent_commit_crash_without(
    m: &'static crate::mutation::MutationPoint,
    points: bool,
) -> (u64, u64) {
    let sc = crate::mutation::Scenario::setup();
    // SAFETY: a mutation test: the run exists to show the removed step matters, and its
    // outcome is read only as that evidence (see `pisces::mutation::Scenario::set`).
    unsafe { sc.set(Some(m)) };
    dependent_commit_crash(&sc, points)
}

/// Mutation evidence: a record written as a point without the check that every
/// smaller timestamp is persistent makes B durable without A in the same crash.
#[cfg(feature = "mutation")]
#[test]
fn mutation_spht_point_check_is_caught_by_the_dependent_commit_crash() {
    assert_eq!(
        dependent_commit_crash_without(&super::thread::POINT_CHECK, true),
        (0, 2),
        "with the point check removed, B (y = 2) should be durable without A (x = 1)"
    );
}

/// Mutation evidence: a recovery that counts a conditional point without checking the
/// records it names makes B durable without A in the same crash (with point records B
/// finds A visible and not persistent, and names it).
#[cfg(feature = "mutation")]
#[test]
fn mutation_spht_conditional_deps_is_caught_by_the_dependent_commit_crash() {
    assert_eq!(
        dependent_commit_crash_without(&super::recovery::CONDITIONAL_DEPS, true),
        (0, 2),
        "with the dependency check removed, B (y = 2) should be durable without A (x = 1)"
    );
}

/// Conditional points: A's record is durable (a point) and A is held before it sets
/// isPers; B reads A's write, finds A visible and not persistent, and appends a
/// conditional point naming A. A crash with both records durable and no marker written
/// (the replayer held) recovers both from the two records alone: B's record counts as
/// a durable point because the record it names is valid. A recovery that counted only
/// markers and point records would drop B.
#[cfg(feature = "mutation")] // the `after-log` hook point
#[test]
fn a_conditional_point_is_durable_once_the_records_it_names_are() {
    let sc = crate::mutation::Scenario::setup();
    let opts = EngineOptions::new()
        .set("clock", "counter")
        .set("points", "on")
        .set("replay_hold", true);
    let e = Arc::new(engine_with(opts, 2));
    let sh = e.shared().clone();
    let (mut a, mut b) = (e.thread(0).unwrap(), e.thread(1).unwrap());
    let x = alloc(&mut a, 1);
    let y = alloc(&mut b, 1);
    e.quiesce();
    let marker_before = sh.heap.atomic_u64(MARKER_OFFSET).load(SeqCst);
    let image = std::thread::scope(|s| {
        let hold_a = sc.pause(&super::thread::AFTER_LOG, 0);
        let ha = s.spawn(move || put(&mut a, x, 1));
        wait_until("A to be held", || hold_a.reached());
        let hold_b = sc.pause(&super::thread::AFTER_LOG, 1);
        let hb = s.spawn(move || put_successor(&mut b, x, y));
        wait_until("B to be held", || hold_b.reached());
        let image = crash_image(&sh.heap);
        hold_a.release();
        hold_b.release();
        ha.join().unwrap();
        hb.join().unwrap();
        image
    });
    assert_eq!(
        sh.stats.conditional.load(Relaxed),
        1,
        "B's record was not a conditional point"
    );
    assert_eq!(sh.stats.cas.load(Relaxed), 0, "a marker was written");
    drop(e);
    assert_eq!(
        image[MARKER_OFFSET / 8],
        marker_before,
        "the marker was raised"
    );
    // `pisces info` (inspect) counts it too: the durable point is the newest record's.
    let (_, opened) = open_damaged_image(&image, |h| {
        let newest = (0..2)
            .flat_map(|s| log::parse(h, s).0)
            .map(|r| r.ts)
            .max()
            .unwrap();
        let lines = super::recovery::inspect(h).lines;
        assert!(
            lines.contains(&format!("durable point  {newest}")),
            "inspect did not count the conditional point: {lines:?}"
        );
    });
    drop(opened.unwrap());
    let r = recover_image(&image);
    let mut th = r.thread(0).unwrap();
    assert_eq!(
        (get(&mut th, x), get(&mut th, y)),
        (1, 2),
        "the conditional point naming a valid record was not counted durable"
    );
}

/// Mutation evidence: with the wait removed, the same crash recovers B without A.
#[cfg(feature = "mutation")]
#[test]
fn mutation_spht_wait_is_caught_by_the_dependent_commit_crash() {
    assert_eq!(
        dependent_commit_crash_without(&super::thread::WAIT, false),
        (0, 2),
        "with the wait removed, B (y = 2) should be durable without A (x = 1)"
    );
}

/// Log space: a wrap marker stays in place until the replayer has passed it. The
/// replayer's head (and the persisted head word recovery parses from) can name the
/// position where the writer later puts a wrap marker; the record after the wrap is
/// then found only through that marker. Writing over it while the record after it is
/// unreplayed (the space it skipped counted as free) made the replayer read a later
/// record or zeros there ("no record with the durable timestamp", seen in the `alloc`
/// crash campaigns on two threads) and made recovery stop parsing early.
#[test]
fn a_wrap_marker_is_not_overwritten_before_the_replayer_passes_it() {
    let m = Arc::new(DramMedium::anonymous(4 << 20, 0, 0).unwrap());
    let heap = Heap::format(
        m,
        FormatParams {
            engine_id: EngineId::Spht as u32,
            max_threads: 1,
            log_bytes_per_thread: 64 << 10,
            regions: crate::engine::Regions {
                logs_per_thread: 1,
                engine_area_bytes: durability::engine_area_bytes(1),
            },
        },
    )
    .unwrap();
    let mut w = log::LogWriter::new(&heap, 0, 1);
    let cap = log::Area::of(&heap, 0).cap;
    // Records a little under the largest: the last one ends short of the ring's end,
    // with room for a wrap marker after it.
    let big = vec![0u8; w.max_record() - log::HEADER_LEN - 2048];
    // Fill the ring until the next big record no longer fits before the end.
    let mut end = 0;
    while cap - end >= log::HEADER_LEN + big.len() {
        end = w.append(&heap, &big, 1, Standing::ByMarker, &[]) + log::HEADER_LEN + big.len();
    }
    // The replayer applies everything: its head is the writer's head.
    let wrap_seq = w.next_seq();
    w.reclaim(wrap_seq);
    log::set_head(&heap, 0, end, wrap_seq);
    // A big record wraps (marker at `end`), then small ones fill the log while the
    // replayer is away.
    assert!(w.fits(big.len()));
    assert_eq!(
        w.append(&heap, &big, 2, Standing::ByMarker, &[]),
        0,
        "the record after the wrap"
    );
    let small = vec![0u8; 1000];
    let mut appended = 1;
    while w.fits(small.len()) {
        w.append(&heap, &small, 3, Standing::ByMarker, &[]);
        appended += 1;
        assert!(appended < 1000, "the log never fills");
    }
    assert!(cap - end >= log::HEADER_LEN);
    let r = RecordRef::read(&heap, 0, end);
    assert!(
        r.is_wrap && r.seq == wrap_seq,
        "the wrap marker at {end} was overwritten ({r:?})"
    );
    let (parsed, _) = log::parse(&heap, 0);
    assert_eq!(
        parsed.len(),
        appended,
        "recovery parsing from the head word misses records after the wrap"
    );
}

/// Every replay option combination: how the batch is found, whether the duplicate
/// filter applies it, and the number of shards.
fn replay_option_combinations() -> Vec<EngineOptions> {
    let mut v = Vec::new();
    for replay in ["backward", "forward", "scan"] {
        for filter in ["on", "off"] {
            for replayers in [1, 2] {
                v.push(
                    EngineOptions::new()
                        .set("clock", "counter")
                        .set("replay", replay)
                        .set("dup_filter", filter)
                        .set("replayers", replayers),
                );
            }
        }
    }
    v
}

/// Two threads overwrite the words of 8 shared objects (4 words each, conflicts
/// retried) `txns` times each; returns the objects.
fn two_writers(e: &SphtEngine, txns: u64) -> Vec<u64> {
    let mut th = e.thread(0).unwrap();
    let objs: Vec<u64> = (0..8).map(|_| alloc(&mut th, 4)).collect();
    drop(th);
    std::thread::scope(|s| {
        for t in 0..2u64 {
            let objs = &objs;
            s.spawn(move || {
                let mut th = e.thread(t as usize).unwrap();
                for i in 0..txns {
                    // Both threads write the same sequence of words.
                    put_word(&mut th, objs[(i % 8) as usize], (i / 8) % 4, (t << 32) | i);
                }
            });
        }
    });
    objs
}

/// Two thread slots, driven alternately from this thread, overwrite the words of 8
/// shared objects `txns` times each: their records interleave in timestamp order
/// (deterministically, unlike [`two_writers`]). Returns the objects.
fn interleaved_writers(e: &SphtEngine, txns: u64) -> Vec<u64> {
    let mut ths = [e.thread(0).unwrap(), e.thread(1).unwrap()];
    let objs: Vec<u64> = (0..8).map(|_| alloc(&mut ths[0], 4)).collect();
    for i in 0..txns {
        // Both slots write the same word in turn, which one first alternating: the
        // newer value must win, and it is either slot's.
        for t in [i % 2, 1 - i % 2] {
            let th = &mut ths[t as usize];
            put_word(th, objs[(i % 8) as usize], (i / 8) % 4, (t << 32) | i);
        }
    }
    objs
}

/// The words of `objs` in the durable heap equal the working snapshot's.
fn assert_durable_equals_snapshot(e: &SphtEngine, objs: &[u64], what: &str) {
    let sh = e.shared();
    for &o in objs {
        for w in 0..4u64 {
            let off = o + 8 * w;
            assert_eq!(
                sh.heap.atomic_u64(off as usize).load(Relaxed),
                sh.ws.word(off).load(Relaxed),
                "durable heap differs at {off:#x} ({what})"
            );
        }
    }
}

/// Run-time replay in every mode (backward links, forward links, timestamp scan),
/// with and without the duplicate filter, on 1 and 2 shards: with two threads
/// committing concurrently to the same words, the durable heap ends equal to the
/// working snapshot. The scan mode is caught by the `SphtScanMerge` mutation.
#[test]
fn every_replay_mode_makes_the_durable_heap_equal_the_snapshot() {
    for opts in replay_option_combinations() {
        let e = engine_with(opts.clone(), 2);
        let objs = two_writers(&e, 1500);
        e.quiesce();
        assert_durable_equals_snapshot(&e, &objs, &opts.to_string());
        let sh = e.shared();
        assert!(sh.stats.batches.load(Relaxed) > 0);
        let filtered = sh.stats.filtered.load(Relaxed);
        if opts.get("dup_filter") == Some("on") {
            assert!(filtered > 0, "no duplicate filtered ({opts})");
        } else {
            assert_eq!(filtered, 0, "the filter ran although off ({opts})");
        }
    }
}

/// `replay_hold=true`: the background replayer leaves the durable transactions in the
/// logs (nothing replayed while the logs have room), and `quiesce` replays them all.
#[test]
fn replay_hold_keeps_the_log_until_quiesce() {
    for replay in ["backward", "forward", "scan"] {
        let opts = EngineOptions::new()
            .set("clock", "counter")
            .set("replay", replay)
            .set("replay_hold", "true");
        let e = engine_with(opts.clone(), 2);
        // 2 x 100 records of about 100 bytes: well inside two 64 KiB logs.
        let objs = interleaved_writers(&e, 100);
        std::thread::sleep(Duration::from_millis(20));
        let sh = e.shared();
        assert_eq!(
            sh.stats.batches.load(Relaxed),
            0,
            "the held replayer replayed ({opts})"
        );
        assert!(sh.replayed_ts.load(Acquire) < sh.durable.load(Acquire));
        e.quiesce();
        assert_durable_equals_snapshot(&e, &objs, &opts.to_string());
    }
}

/// With the replayer held and logs of 64 KiB, writers fill their logs: a full log
/// still gets replayed (the writer runs the replayer) and nothing is lost.
#[test]
fn replay_hold_never_blocks_a_full_log() {
    let opts = EngineOptions::new()
        .set("clock", "counter")
        .set("replay", "scan")
        .set("replay_hold", "true");
    let e = engine_with(opts, 2);
    let objs = two_writers(&e, 3000);
    assert!(e.shared().stats.batches.load(Relaxed) > 0);
    e.quiesce();
    assert_durable_equals_snapshot(&e, &objs, "held, full logs");
}

/// Recovery in every mode: a crash image whose logs hold every transaction (the
/// replayer held) recovers to the committed values with each option combination;
/// the link modes order the records by their links (checked against the timestamps),
/// the scan merges.
#[test]
fn recovery_replays_a_held_log_in_every_mode() {
    let e = engine_with(
        EngineOptions::new()
            .set("clock", "counter")
            .set("replay_hold", "true"),
        2,
    );
    let objs = interleaved_writers(&e, 120);
    let sh = e.shared();
    let want: Vec<u64> = objs
        .iter()
        .flat_map(|&o| (0..4u64).map(move |w| o + 8 * w))
        .map(|off| sh.ws.word(off).load(Relaxed))
        .collect();
    let image = crash_image(&sh.heap);
    drop(e);
    for opts in replay_option_combinations() {
        for shards in [1, 2] {
            let r = recover_image_with(&image, opts.clone(), shards);
            let rs = r.shared();
            assert_eq!(
                rs.stats.recovered_records.load(Relaxed),
                8 + 240,
                "records replayed ({opts})"
            );
            assert_eq!(
                rs.stats.recovery_followed_links.load(Relaxed),
                opts.get("replay") != Some("scan"),
                "order source ({opts})"
            );
            let got: Vec<u64> = objs
                .iter()
                .flat_map(|&o| (0..4u64).map(move |w| o + 8 * w))
                .map(|off| rs.heap.atomic_u64(off as usize).load(Relaxed))
                .collect();
            assert_eq!(got, want, "recovered values ({opts}, {shards} shards)");
        }
    }
}

/// Recovery replays the allocations of a held log (the records it notes as holding
/// allocator entries, the only ones its allocator pass decodes): after recovery the
/// allocator hands out none of the blocks the log allocated, in every mode and with
/// 1 and 2 recovery threads.
#[test]
fn recovery_replays_the_allocations_of_a_held_log() {
    let e = engine_with(
        EngineOptions::new()
            .set("clock", "counter")
            .set("replay_hold", "true"),
        2,
    );
    // Allocations between data-only records: 8 objects, then writes, then 8 more.
    let mut objs = interleaved_writers(&e, 40);
    let mut th = e.thread(0).unwrap();
    objs.extend((0..8).map(|_| alloc(&mut th, 4)));
    drop(th);
    let image = crash_image(&e.shared().heap);
    drop(e);
    for opts in replay_option_combinations() {
        for shards in [1, 2] {
            let r = recover_image_with(&image, opts.clone(), shards);
            let mut th = r.thread(0).unwrap();
            for _ in 0..64 {
                let fresh = alloc(&mut th, 4);
                assert!(
                    !objs.contains(&fresh),
                    "block {fresh:#x}, allocated by a logged transaction, handed out \
                     again after recovery ({opts}, {shards} shards)"
                );
            }
        }
    }
}

/// Write `n` words into the object at `obj`, word `k` = `v + k`, retrying on
/// conflicts (every word changes: the record holds one range entry).
fn put_range(th: &mut SphtThread, obj: u64, n: usize, v: u64) {
    loop {
        th.begin(&TxOptions::default());
        let r = th.write(obj, 8 * n).and_then(|p| {
            for k in 0..n {
                // SAFETY: our private copy of the object's `8 * n` bytes, 8-aligned.
                unsafe { (p as *mut u64).add(k).write(v + k as u64) };
            }
            th.commit()
        });
        match r {
            Ok(_) => return,
            Err(crate::Error::Conflict) => th.abort(),
            Err(e) => panic!("put_range: {e}"),
        }
    }
}

/// Parallel recovery: three slots' held logs whose records write ranges across 4 KiB
/// chunk boundaries (the replay parts' unit) recover to the committed values with 1, 2
/// and 3 recovery threads in every mode, and the link modes still follow the links
/// (each slot's parsed log is taken for its own slot). A replay thread that skipped a
/// record writing into its chunks beyond the record's first chunk would leave old
/// words; logs put back in the wrong slot order would break the links' check.
#[test]
fn parallel_recovery_replays_ranges_across_chunks() {
    let e = engine_with(
        EngineOptions::new()
            .set("clock", "counter")
            .set("replay_hold", "true"),
        3,
    );
    const WORDS: usize = 1280; // 10 KiB: every range spans three or four chunks.
    let mut ths: Vec<SphtThread> = (0..3).map(|s| e.thread(s).unwrap()).collect();
    let big = alloc(&mut ths[0], WORDS);
    let small: Vec<u64> = (0..4).map(|_| alloc(&mut ths[1], 4)).collect();
    for i in 0..24u64 {
        // Slots 1 and 2 write the big object (slot 2's log is parsed by the first
        // thread with two threads, slot 1's by the second); slot 0 small words.
        put_range(&mut ths[1 + (i % 2) as usize], big, WORDS, i << 32);
        put_word(
            &mut ths[(i % 3) as usize],
            small[(i % 4) as usize],
            i % 4,
            i,
        );
    }
    drop(ths);
    let sh = e.shared();
    let offs: Vec<u64> = (0..WORDS as u64)
        .map(|k| big + 8 * k)
        .chain(
            small
                .iter()
                .flat_map(|&o| (0..4u64).map(move |w| o + 8 * w)),
        )
        .collect();
    let want: Vec<u64> = offs.iter().map(|&o| sh.ws.word(o).load(Relaxed)).collect();
    let image = crash_image(&sh.heap);
    drop(e);
    for opts in replay_option_combinations() {
        for shards in [1, 2, 3] {
            let r = recover_image_with(&image, opts.clone(), shards);
            let rs = r.shared();
            assert_eq!(
                rs.stats.recovery_followed_links.load(Relaxed),
                opts.get("replay") != Some("scan"),
                "order source ({opts}, {shards} threads)"
            );
            let got: Vec<u64> = offs
                .iter()
                .map(|&o| rs.heap.atomic_u64(o as usize).load(Relaxed))
                .collect();
            assert!(got == want, "recovered values ({opts}, {shards} threads)");
        }
    }
}

/// The orders found on several threads (the records cut into parts by timestamp,
/// each part ordered on its own thread, the parts joined where one ends at the next
/// one's first record) are the one-thread order, the timestamp merge's; a wrong
/// forward link in any record but the newest, or a wrong backward link in any record
/// but the oldest, fails the link walk with every thread count, the links that join
/// two parts included.
#[test]
fn orders_on_several_threads_check_every_link() {
    use super::order::{follow_backward, follow_forward, merge_by_ts, merge_parts};
    use crate::engine::kit::recovery::bulk_vec::BulkVec;
    let e = engine_with(
        EngineOptions::new()
            .set("clock", "counter")
            .set("replay_hold", "true"),
        2,
    );
    interleaved_writers(&e, 60);
    let sh = e.shared();
    let heap = &sh.heap;
    let mut where_ = std::collections::HashMap::new();
    let lists: Vec<BulkVec<log::LogRec>> = (0..2)
        .map(|s| {
            let (recs, walked) = log::parse(heap, s);
            walked.unwrap();
            let mut l = BulkVec::default();
            for r in recs {
                let rec = log::LogRec::new(heap, s, r.pos, false, 1);
                where_.insert(rec.off(), r);
                l.push(rec);
            }
            l
        })
        .collect();
    let merged = merge_by_ts(&lists, |r| r.ts(heap), |r| *r);
    assert!(merged.len() >= 100);
    for threads in 1..=4 {
        let got = follow_forward(heap, &lists, threads).expect("every forward link is there");
        assert!(
            got[..] == merged[..],
            "{threads} threads: forward, not the merge's order"
        );
        let got = follow_backward(heap, &lists, threads).expect("every backward link is there");
        assert!(
            got[..] == merged[..],
            "{threads} threads: backward, not the merge's order"
        );
        let got = merge_parts(heap, &lists, threads);
        assert!(
            got[..] == merged[..],
            "{threads} threads: merged in parts, another order"
        );
    }
    let (oldest, newest) = (merged[0], *merged.last().unwrap());
    for rec in merged.iter() {
        let r = where_[&rec.off()];
        for (slot, end, name) in [
            (log::FWD, newest, "forward"),
            (log::BACK, oldest, "backward"),
        ] {
            let kept = heap
                .atomic_u64(log::Area::of(heap, r.slot).at(r.pos) + slot)
                .load(SeqCst);
            log::set_link(heap, r.slot, r.pos, slot, r.link());
            let found: Vec<bool> = (1..=4)
                .map(|threads| {
                    if slot == log::FWD {
                        follow_forward(heap, &lists, threads).is_some()
                    } else {
                        follow_backward(heap, &lists, threads).is_some()
                    }
                })
                .collect();
            // Restored before any assertion: the engine's replay at close follows the
            // links unchecked.
            log::set_link(heap, r.slot, r.pos, slot, kept);
            for (threads, found) in (1..=4).zip(found) {
                assert_eq!(
                    found,
                    *rec == end,
                    "{threads} threads, a wrong {name} link in record {} of slot {}",
                    r.seq,
                    r.slot
                );
            }
        }
    }
}

/// Recovery does not trust a link that names another record: with one forward link
/// pointing back at its own record, forward recovery merges by timestamp instead and
/// still recovers the committed values.
#[test]
fn recovery_merges_when_a_link_is_wrong() {
    let e = engine_with(
        EngineOptions::new()
            .set("clock", "counter")
            .set("replay_hold", "true"),
        2,
    );
    let objs = two_writers(&e, 60);
    let sh = e.shared();
    let want: Vec<u64> = objs.iter().map(|&o| sh.ws.word(o).load(Relaxed)).collect();
    // The tenth record of slot 1: make its forward link name itself.
    let (recs, _) = log::parse(&sh.heap, 1);
    let r = recs[10];
    log::set_link(&sh.heap, r.slot, r.pos, log::FWD, r.link());
    let image = crash_image(&sh.heap);
    drop(e);
    let r = recover_image_with(
        &image,
        EngineOptions::new()
            .set("clock", "counter")
            .set("replay", "forward"),
        1,
    );
    let rs = r.shared();
    assert!(!rs.stats.recovery_followed_links.load(Relaxed));
    let got: Vec<u64> = objs
        .iter()
        .map(|&o| rs.heap.atomic_u64(o as usize).load(Relaxed))
        .collect();
    assert_eq!(got, want);
}

/// Runs `test` in scenario `sc` with mutation `m` active; true if it failed.
#[cfg(feature = "mutation")]
fn fails_under(
    sc: &crate::mutation::Scenario,
    m: &'static crate::mutation::MutationPoint,
    test: fn(),
) -> bool {
    // SAFETY: a mutation test: the run exists to show the removed step matters, and its
    // outcome is read only as that evidence (see `pisces::mutation::Scenario::set`).
    unsafe { sc.set(Some(m)) };
    let r = std::panic::catch_unwind(test);
    sc.clear();
    r.is_err()
}

/// Recovery validates every entry of every record before it writes anything: a
/// checksum-valid record whose second entry names an unaligned word makes it refuse
/// the pool, which is left unchanged (the first transaction's value is not replayed
/// either).
#[test]
fn recovery_refuses_a_record_with_a_bad_later_entry_unchanged() {
    let e = engine_with(
        EngineOptions::new()
            .set("clock", "counter")
            .set("replay_hold", "true"),
        2,
    );
    let mut th = e.thread(0).unwrap();
    let (a, b) = (alloc(&mut th, 4), alloc(&mut th, 4));
    put(&mut th, a, 5);
    th.begin(&TxOptions::default());
    for (off, v) in [(a, 1u64), (b, 2)] {
        let p = th.write(off, 8).unwrap();
        // SAFETY: our private copy of at least 8 bytes, 8-aligned.
        unsafe { (p as *mut u64).write(v) };
    }
    let tok = th.commit().unwrap();
    th.wait_durable(tok).unwrap();
    drop(th);
    let sh = e.shared();
    let heap = &sh.heap;
    let (recs, _) = log::parse(heap, 0);
    let last = *recs.last().unwrap();
    // The entry word naming `b` (a WORD or RANGE entry: kind in the top byte) now
    // names an unaligned place (no transaction writes one).
    let bytes = last.entries(heap);
    let at = (0..bytes.len() / 8)
        .find(|&i| {
            let w = u64::from_le_bytes(bytes[8 * i..8 * i + 8].try_into().unwrap());
            w & ((1 << 56) - 1) == b && matches!(w >> 56, 1 | 2)
        })
        .expect("the record names b");
    assert!(at > 0, "b's entry is not the record's first");
    let w = u64::from_le_bytes(bytes[8 * at..8 * at + 8].try_into().unwrap());
    let bad = w + 4;
    let entry_off = log::Area::of(heap, 0).at(last.pos) + log::HEADER_LEN + 8 * at;
    let image = crash_image(heap);
    // Closing replays the held log: damage the copy, not this pool.
    drop(e);
    let len = image.len() * 8;
    let m = Arc::new(DramMedium::anonymous(len, 0, 0).unwrap());
    // SAFETY: the fresh mapping is `len` bytes and nobody else uses it yet.
    unsafe {
        std::ptr::copy_nonoverlapping(
            image.as_ptr() as *const u8,
            crate::medium::Medium::base(&*m),
            len,
        )
    };
    let heap = Arc::new(Heap::open(m.clone()).unwrap());
    heap.write_bytes(entry_off, &bad.to_le_bytes());
    log::reseal(&heap, 0, last.pos);
    let image = crash_image(&heap);
    let o = SphtSettings::parse("spht", &EngineOptions::new().set("clock", "counter")).unwrap();
    let r = SphtEngine::open(
        heap.clone(),
        o,
        &OpenCtx {
            recovery_threads: 1,
            ..OpenCtx::default()
        },
    );
    assert!(
        matches!(r, Err(crate::Error::Corrupt(_))),
        "recovery accepted a record writing an unaligned word"
    );
    let after = crash_image(&heap);
    assert!(after == image, "a refused pool was changed");
}

/// A crash image of a held log on two slots: slot 0 commits `a = 1..=6` in six
/// transactions, then slot 1 sets `b = 7` (a later timestamp than all of them).
/// Returns (image, a, b, slot 0's records).
fn two_slot_held_image() -> (Vec<u64>, u64, u64, Vec<RecordRef>) {
    let e = engine_with(
        EngineOptions::new()
            .set("clock", "counter")
            .set("replay_hold", "true"),
        2,
    );
    let (mut t0, mut t1) = (e.thread(0).unwrap(), e.thread(1).unwrap());
    let (a, b) = (alloc(&mut t0, 1), alloc(&mut t1, 1));
    e.quiesce();
    for v in 1..=6 {
        let tok = put(&mut t0, a, v);
        t0.wait_durable(tok).unwrap();
    }
    let tok = put(&mut t1, b, 7);
    t1.wait_durable(tok).unwrap();
    drop((t0, t1));
    let sh = e.shared();
    let (recs, walked) = log::parse(&sh.heap, 0);
    walked.unwrap();
    let image = crash_image(&sh.heap);
    (image, a, b, recs)
}

/// Open a crash image as a new process would, with damage `hurt` done to it first:
/// the heap, and what the open returned.
fn open_damaged_image(
    image: &[u64],
    hurt: impl FnOnce(&Heap),
) -> (Arc<Heap>, crate::Result<SphtEngine>) {
    let len = image.len() * 8;
    let m = Arc::new(DramMedium::anonymous(len, 0, 0).unwrap());
    // SAFETY: the fresh mapping is `len` bytes and nobody else uses it yet.
    unsafe {
        std::ptr::copy_nonoverlapping(
            image.as_ptr() as *const u8,
            crate::medium::Medium::base(&*m),
            len,
        )
    };
    let heap = Arc::new(Heap::open(m).unwrap());
    hurt(&heap);
    let o = SphtSettings::parse("spht", &EngineOptions::new().set("clock", "counter")).unwrap();
    let r = SphtEngine::open(
        heap.clone(),
        o,
        &OpenCtx {
            recovery_threads: 1,
            ..OpenCtx::default()
        },
    );
    (heap, r)
}

/// Flip a bit of the first entry word of `rec`: its checksum fails.
fn damage_entries(heap: &Heap, rec: &RecordRef) {
    let off = log::Area::of(heap, rec.slot).at(rec.pos) + log::HEADER_LEN;
    let mut w = [0u8; 8];
    heap.read_bytes(off, &mut w);
    w[0] ^= 1;
    heap.write_bytes(off, &w);
}

/// A damaged record followed by valid later records of its log is damage, not a torn
/// tail: recovery refuses the pool (naming the slot) and leaves it unchanged, instead
/// of replaying slot 1's later transaction over a slot 0 cut short.
#[test]
fn recovery_refuses_a_damaged_record_followed_by_a_valid_one() {
    let (image, _, _, recs) = two_slot_held_image();
    let mid = recs[recs.len() - 3];
    let mut before = Vec::new();
    let (heap, r) = open_damaged_image(&image, |h| {
        damage_entries(h, &mid);
        before = crash_image(h);
    });
    match r {
        Err(crate::Error::Corrupt(m)) => assert!(
            m.contains("thread slot 0") && m.contains("a later record follows"),
            "unclear refusal: {m}"
        ),
        Err(e) => panic!("refused with the wrong error: {e}"),
        Ok(_) => panic!("recovery accepted a log damaged before its last record"),
    }
    assert!(crash_image(&heap) == before, "a refused pool was changed");
}

/// The look for a later record reads past a long stretch of zero bytes: a damaged
/// record whose entries are kilobytes of zeros, with a valid record after it, is
/// refused. Zero bytes are what most of a ring past its chain holds, and the look
/// rules them out a block at a time (`kit::log::magic_scan`); the later record's
/// header lands at a different 8-byte step of a block for each size.
#[test]
fn recovery_refuses_a_damaged_record_followed_by_zeros_and_a_valid_one() {
    for words in [512usize, 513, 515, 518] {
        let e = engine_with(
            EngineOptions::new()
                .set("clock", "counter")
                .set("replay_hold", "true"),
            1,
        );
        let mut th = e.thread(0).unwrap();
        let small = alloc(&mut th, 1);
        // A new block's record holds its whole payload.
        th.begin(&TxOptions::default());
        let big = th.alloc(8 * words).unwrap();
        let p = th.write(big, 8 * words).unwrap();
        // SAFETY: our private copy of the object's `8 * words` bytes.
        unsafe { std::ptr::write_bytes(p, 0, 8 * words) };
        let tok = th.commit().unwrap();
        th.wait_durable(tok).unwrap();
        let tok = put(&mut th, small, 9);
        th.wait_durable(tok).unwrap();
        drop(th);
        let sh = e.shared();
        let (recs, walked) = log::parse(&sh.heap, 0);
        walked.unwrap();
        let zeros = recs[recs.len() - 2];
        assert!(zeros.len >= 8 * words, "the record holds the zeros");
        let image = crash_image(&sh.heap);
        let (_, r) = open_damaged_image(&image, |h| damage_entries(h, &zeros));
        assert!(
            matches!(&r, Err(crate::Error::Corrupt(m)) if m.contains("a later record follows")),
            "recovery accepted a log damaged before {} zero bytes and a valid record: {:?}",
            8 * words,
            r.as_ref().err()
        );
    }
}

/// A log's damaged last record reads as a torn tail, but a durable record of the other
/// log holds a forward link to it (slot 0's last transaction precedes slot 1's): a
/// record is linked only after its fence, so it was complete, and recovery refuses the
/// pool instead of dropping an acknowledged transaction.
#[test]
fn recovery_refuses_a_damaged_last_record_that_a_durable_link_names() {
    let (image, _, _, _) = two_slot_held_image();
    let mut before = Vec::new();
    let (heap, r) = open_damaged_image(&image, |h| {
        let (recs, walked) = log::parse(h, 1);
        walked.unwrap();
        let last = *recs.last().unwrap();
        damage_entries(h, &last);
        // Alone, the damage reads as a torn tail: the walk ends without an error.
        let (after, walked) = log::parse(h, 1);
        walked.unwrap();
        assert_eq!(after.len(), recs.len() - 1);
        before = crash_image(h);
    });
    match r {
        Err(crate::Error::Corrupt(m)) => assert!(
            m.contains("thread slot 1") && m.contains("links to it"),
            "unclear refusal: {m}"
        ),
        Err(e) => panic!("refused with the wrong error: {e}"),
        Ok(_) => panic!("recovery dropped a linked, acknowledged record as a torn tail"),
    }
    assert!(crash_image(&heap) == before, "a refused pool was changed");
}

/// One thread under replay hold commits `obj = v` for v = 0, 1, .. until `pick` (the
/// log's records, its ring's size, v) chooses a moment of its log: the crash image
/// of that moment, `obj`, and what `pick` returned.
fn held_log_until<T>(
    mut pick: impl FnMut(&[RecordRef], usize, u64) -> Option<T>,
) -> (Vec<u64>, u64, T) {
    let e = engine_with(
        EngineOptions::new()
            .set("clock", "counter")
            .set("replay_hold", "true"),
        1,
    );
    let mut th = e.thread(0).unwrap();
    let obj = alloc(&mut th, 1);
    let sh = e.shared();
    let cap = log::Area::of(&sh.heap, 0).cap;
    for v in 0..100_000u64 {
        let tok = put(&mut th, obj, v);
        th.wait_durable(tok).unwrap();
        // A full log replays while this thread commits: parse between commits.
        let (recs, walked) = log::parse(&sh.heap, 0);
        walked.unwrap();
        if let Some(t) = pick(&recs, cap, v) {
            return (crash_image(&sh.heap), obj, t);
        }
    }
    panic!("the log never reached the state the test needs");
}

/// The look for later records goes on from offset 0 after a wrap of the ring: a
/// damaged wrap marker (or, where the ring's end was too short for one, the last
/// record before the wrap), with the log's later records at the start of the ring, is
/// refused too, although the first of them alone would pass for the torn wrap's own
/// record.
#[test]
fn recovery_refuses_a_damaged_record_before_a_wrap() {
    let (image, _, before_wrap) = held_log_until(|recs, _, _| {
        let wrap = recs.windows(2).position(|p| p[1].pos < p[0].pos);
        wrap.filter(|&w| recs.len() - w >= 3).map(|w| recs[w])
    });
    let (_, r) = open_damaged_image(&image, |h| {
        let a = log::Area::of(h, 0);
        let marker = before_wrap.pos + log::HEADER_LEN + before_wrap.len;
        if a.cap - marker >= log::HEADER_LEN {
            // A byte of the wrap marker's checksum.
            let mut b = [0u8; 1];
            h.read_bytes(a.at(marker) + 8, &mut b);
            h.write_bytes(a.at(marker) + 8, &[b[0] ^ 1]);
        } else {
            damage_entries(h, &before_wrap);
        }
    });
    assert!(
        matches!(&r, Err(crate::Error::Corrupt(m)) if m.contains("a later record follows")),
        "recovery accepted a log damaged before a wrap: {:?}",
        r.as_ref().err()
    );
}

/// A torn wrap (the marker lost, the record after it whole at offset 0) is a torn
/// tail, and that record stays in the ring: the recovered log must go on past its
/// sequence number, or the next recovery (a crash before the thread's next record)
/// finds it at offset 0, later than the record the head expects there, and refuses
/// the pool as damaged.
#[test]
fn a_torn_wrap_record_does_not_fail_the_next_recovery() {
    let (image, obj, (marker, before, v)) = held_log_until(|recs, cap, v| {
        let [.., before, last] = recs[..] else {
            return None;
        };
        let marker = before.pos + log::HEADER_LEN + before.len;
        (last.pos == 0 && marker > 0 && cap - marker >= log::HEADER_LEN)
            .then_some((marker, before, v))
    });
    let (heap, r) = open_damaged_image(&image, |h| {
        // A byte of the wrap marker's checksum: the marker is torn, its record whole.
        let a = log::Area::of(h, 0);
        let mut b = [0u8; 1];
        h.read_bytes(a.at(marker) + 8, &mut b);
        h.write_bytes(a.at(marker) + 8, &[b[0] ^ 1]);
        // What a crash before the record's fence leaves besides (see
        // `recovery_ignores_a_torn_last_record`): the predecessor's forward slot still
        // its own timestamp, the global marker at the predecessor.
        log::set_link(h, 0, before.pos, log::FWD, before.ts);
        h.atomic_u64(MARKER_OFFSET).store(before.ts, SeqCst);
    });
    let e = r.expect("a torn wrap refused");
    let mut th = e.thread(0).unwrap();
    assert_eq!(
        get(&mut th, obj),
        v - 1,
        "the torn wrap's record was replayed"
    );
    drop(th);
    // A crash right after that recovery: the same log, recovered again.
    let (_, r) = open_damaged_image(&crash_image(&heap), |_| {});
    let e = r.expect("the log recovered after a torn wrap refused on the next recovery");
    let mut th = e.thread(0).unwrap();
    assert_eq!(get(&mut th, obj), v - 1);
}

/// A damaged last record that no durable record links to is a torn tail: recovery
/// ignores it and opens the pool. The image is the one a crash before the run's last
/// record (slot 1's `b = 7`) reached its fence leaves: the record torn, its
/// predecessor (slot 0's last record) still holding its own timestamp in its forward
/// slot, since the link is stored only after the fence, and the global marker at the
/// predecessor's timestamp (it passes a transaction only after its record's fence).
#[test]
fn recovery_ignores_a_torn_last_record() {
    let (image, a, b, recs) = two_slot_held_image();
    let pred = *recs.last().unwrap();
    let (_, r) = open_damaged_image(&image, |h| {
        let (slot1, walked) = log::parse(h, 1);
        walked.unwrap();
        damage_entries(h, slot1.last().unwrap());
        log::set_link(h, 0, pred.pos, log::FWD, pred.ts);
        h.atomic_u64(MARKER_OFFSET).store(pred.ts, SeqCst);
    });
    let e = r.expect("a torn last record refused");
    let mut th = e.thread(0).unwrap();
    assert_eq!(get(&mut th, a), 6, "more than the torn record was lost");
    assert_eq!(get(&mut th, b), 0, "the torn record was replayed");
}

/// The markers are checked against the logs: a global marker above the replay
/// progress that names no record of any log (every marker is the timestamp of a
/// durable record, not yet released while above `replayed`) is refused, and so is a
/// `replayed` word above the durable point. Left unchecked, the first would replay
/// transactions whose commit never returned as durable, and a lowered marker of the
/// second kind would drop acknowledged ones.
#[test]
fn recovery_refuses_markers_that_name_no_record() {
    let (image, _, _, recs) = two_slot_held_image();
    let top = recs.iter().map(|r| r.ts).max().unwrap();
    let (_, r) = open_damaged_image(&image, |h| {
        let (slot1, _) = log::parse(h, 1);
        let newest = top.max(slot1.iter().map(|r| r.ts).max().unwrap());
        h.atomic_u64(MARKER_OFFSET).store(newest + 7, SeqCst);
    });
    assert!(
        matches!(&r, Err(crate::Error::Corrupt(m)) if m.contains("names no record")),
        "recovery accepted a global marker naming no record: {:?}",
        r.as_ref().err()
    );
    let (_, r) = open_damaged_image(&image, |h| {
        let d = h.atomic_u64(MARKER_OFFSET).load(SeqCst);
        h.atomic_u64(durability::REPLAYED_OFFSET)
            .store(d + 1, SeqCst);
    });
    assert!(
        matches!(&r, Err(crate::Error::Corrupt(m)) if m.contains("below the replayed word")),
        "recovery accepted a durable point below the replay progress: {:?}",
        r.as_ref().err()
    );
    // The undamaged image opens.
    let (_, r) = open_damaged_image(&image, |_| {});
    r.expect("the undamaged image refused");
}

/// A head word naming a place outside its ring (one 8-byte store: damage, never torn)
/// is refused, not read as an empty log.
#[test]
fn recovery_refuses_a_head_word_outside_the_ring() {
    let (image, _, _, _) = two_slot_held_image();
    let (_, r) = open_damaged_image(&image, |h| {
        let a = log::Area::of(h, 0);
        h.atomic_u64(a.off).store((a.cap as u64 + 64) << 32, SeqCst);
    });
    assert!(
        matches!(&r, Err(crate::Error::Corrupt(m)) if m.contains("head word")),
        "recovery accepted a head word outside the ring: {:?}",
        r.as_ref().err()
    );
}

/// A global marker above every timestamp a run can issue (damage: garbage in the
/// engine area) is refused at open, naming the word, instead of starting the new
/// run's clock above it, where the first commit would find the timestamp space
/// exhausted.
#[test]
fn recovery_refuses_a_marker_above_every_timestamp() {
    let (image, a, _, _) = two_slot_held_image();
    let (_, r) = open_damaged_image(&image, |h| {
        h.atomic_u64(MARKER_OFFSET).store(u64::MAX >> 1, SeqCst);
    });
    match r {
        Err(crate::Error::Corrupt(m)) => assert!(m.contains("durable point"), "{m}"),
        Err(e) => panic!("refused with the wrong error: {e}"),
        Ok(e) => {
            let mut th = e.thread(0).unwrap();
            let tok = put(&mut th, a, 9);
            th.wait_durable(tok).unwrap();
            panic!("recovery accepted a marker above every timestamp");
        }
    }
}

/// Mutation evidence, one row per mutation point of the engine (`Spht::MUTATIONS`, which
/// this test iterates): the removed step, and the tests that fail without it (each
/// test passes with the step in place). A point without a row fails the test.
#[cfg(feature = "mutation")]
#[test]
fn every_spht_mutation_is_caught() {
    use super::{apply, order, recovery, thread};
    use crate::engine::kit::recovery::{per_slot, replay_parts};
    use crate::engine::EngineDef;
    use crate::mutation::MutationPoint;
    /// The point, what it breaks, the tests that must fail with it.
    type Row = (&'static MutationPoint, &'static str, &'static [fn()]);
    let rows: [Row; 11] = [
        (
            &thread::SKIP_CAS,
            "skipCAS delegating to a larger lower bound leaves a returned commit not durable",
            &[skip_cas_ignores_a_larger_lower_bound],
        ),
        (
            &thread::FORWARD_LINK,
            "without the forward link update the chain breaks",
            &[links_chain_every_update_transaction_in_timestamp_order],
        ),
        (
            &recovery::RECOVERY_ALLOC_FLAGS,
            "recovery noting no record as holding allocator entries skips their \
             allocations: the allocator hands the blocks out again",
            &[recovery_replays_the_allocations_of_a_held_log],
        ),
        (
            &recovery::PARSE_VALIDATION,
            "a parse validating only a record's first entry replays the good entries of \
             a damaged pool",
            &[recovery_refuses_a_record_with_a_bad_later_entry_unchanged],
        ),
        (
            &apply::DENSE_FILTER_UNIT,
            "a dense duplicate filter with one bit per line takes the other words of a \
             line for duplicates: old values stay",
            &[
                recovery_replays_a_held_log_in_every_mode,
                backward_replay_filters_duplicates_and_keeps_the_newest_value,
            ],
        ),
        (
            &apply::SHARD_FILTER,
            "shards applying every word",
            &[shards_apply_exactly_their_chunks],
        ),
        (
            &replay_parts::REPLAY_PART_MASK,
            "a record marked only for the replay part of its first chunk: a parallel \
             replay thread skips its own chunks' words beyond it",
            &[parallel_recovery_replays_ranges_across_chunks],
        ),
        (
            &per_slot::PARSE_SLOT_ORDER,
            "slots' logs not put back in slot order after a parallel parse",
            &[parallel_recovery_replays_ranges_across_chunks],
        ),
        (
            &apply::DUPLICATE_FILTER,
            "backward replay without the duplicate filter leaves old values",
            &[backward_replay_filters_duplicates_and_keeps_the_newest_value],
        ),
        (
            &order::SCAN_MERGE,
            "a scan that does not merge the slots' logs by timestamp leaves older values, \
             at run time (a held log replayed in one batch) and at recovery",
            &[
                replay_hold_keeps_the_log_until_quiesce,
                recovery_replays_a_held_log_in_every_mode,
            ],
        ),
        (
            &log::CHECKSUM,
            "a parse that accepts records whose checksum fails replays a damaged record",
            &[
                recovery_refuses_a_damaged_record_followed_by_a_valid_one,
                recovery_refuses_a_damaged_record_before_a_wrap,
            ],
        ),
    ];
    // Points whose evidence is elsewhere, with where.
    let elsewhere: [(&MutationPoint, &str); 4] = [
        (
            &recovery::CONDITIONAL_DEPS,
            "`mutation_spht_conditional_deps_is_caught_by_the_dependent_commit_crash` (its \
             crash pauses a commit in this test's scenario)",
        ),
        (
            &thread::POINT_CHECK,
            "`mutation_spht_point_check_is_caught_by_the_dependent_commit_crash` (its \
             crash pauses a commit in this test's scenario)",
        ),
        (
            &log::LOG_FLUSH,
            "the crash simulator: `cargo test -p pisces-cli --features mutation --test crashtest spht`",
        ),
        (
            &thread::WAIT,
            "`mutation_spht_wait_is_caught_by_the_dependent_commit_crash` (its crash \
             pauses a commit in this test's scenario)",
        ),
    ];
    for p in <super::Spht as EngineDef>::MUTATIONS {
        let rows_of = rows.iter().filter(|r| std::ptr::eq(r.0, *p)).count();
        let noted = elsewhere.iter().any(|e| std::ptr::eq(e.0, *p));
        assert!(rows_of == 1 || noted, "mutation point `{}`: no row", p.name);
    }
    let sc = crate::mutation::Scenario::setup();
    let mut missed = Vec::new();
    for (m, what, tests) in rows {
        for (i, &test) in tests.iter().enumerate() {
            if !fails_under(&sc, m, test) {
                missed.push(format!("{} (test {i} of its row): {what}", m.name));
            }
        }
    }
    assert!(missed.is_empty(), "mutations no test caught: {missed:#?}");
}

/// Point records: on one thread every commit finds nothing older to wait for, so its
/// record is a point and no marker is written. A crash with the replayer held (the
/// markers never raised) recovers every commit from the point records alone, and the
/// recovered pool's global marker takes over the durable point. A recovery that
/// counted only the markers would drop them all.
#[test]
fn point_records_are_durable_points_without_a_marker() {
    let opts = EngineOptions::new()
        .set("clock", "counter")
        .set("points", "on")
        .set("replay_hold", true);
    let e = engine_with(opts, 2);
    let sh = e.shared().clone();
    let mut th = e.thread(0).unwrap();
    let x = alloc(&mut th, 1);
    for v in 1..=5 {
        let tok = put(&mut th, x, v);
        th.wait_durable(tok).unwrap();
    }
    assert!(
        sh.stats.points.load(Relaxed) >= 6,
        "commits wrote no point record"
    );
    assert_eq!(
        sh.stats.cas.load(Relaxed),
        0,
        "a point commit wrote the marker"
    );
    let image = crash_image(&sh.heap);
    drop(th);
    let before = image[MARKER_OFFSET / 8];
    assert_eq!(before, 0, "the marker was raised");
    let r = recover_image_with(&image, EngineOptions::new().set("clock", "counter"), 1);
    let mut th = r.thread(0).unwrap();
    assert_eq!(
        get(&mut th, x),
        5,
        "a commit covered only by point records was lost"
    );
    let heap = &r.shared().heap;
    assert!(
        heap.atomic_u64(MARKER_OFFSET).load(SeqCst) > 0,
        "recovery left the durable point to the point records it reset"
    );
}

/// A recovery that crashed after persisting its `replayed` word and resetting one log's
/// head word (slot 1's here) but not the other's leaves records above the durable
/// point in the other log (slot 0's last) whose forward links name records of the
/// reset log. Such a record is no durable evidence: the next recovery drops it without
/// checking its link, instead of refusing the pool as damaged ("not a torn tail").
#[test]
fn records_above_the_durable_point_do_not_vouch_for_their_links() {
    let (image, _, _, recs) = two_slot_held_image();
    let (x, y) = (recs[recs.len() - 2], recs[recs.len() - 1]);
    let (heap, r) = open_damaged_image(&image, |h| {
        let (slot1, _) = log::parse(h, 1);
        let z = *slot1.last().unwrap();
        assert!(
            z.ts > y.ts && y.fwd(h) == z.link(),
            "slot 0's last record links to slot 1's"
        );
        // The first recovery's durable point was `x`: it persisted that as the marker
        // and as `replayed`, then reset slot 1's head word before the crash.
        h.atomic_u64(MARKER_OFFSET).store(x.ts, SeqCst);
        h.atomic_u64(durability::REPLAYED_OFFSET)
            .store(x.ts, SeqCst);
        log::set_head(h, 1, 0, z.seq + 1);
    });
    assert!(r.is_ok(), "recovery refused the pool: {:?}", r.err());
    assert_eq!(
        durability::replayed(&heap),
        x.ts,
        "a record above the durable point was replayed"
    );
}
