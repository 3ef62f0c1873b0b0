//! Group commit's write-back that does not wait for the grace period writes back part
//! of a batch: the transactions still waiting must keep the watermark below their
//! persistTS, or recovery would ignore their records after a crash.
//!
//! `cargo test -p pisces-verify --release --test engine_pisces deferred_write_back::`;
//! with `--features mutation` also the evidence that the test catches the bug.

use pisces::{Config, EngineOptions, PPtr, Pool};
use pisces_verify::sim::{Adversary, SimConfig, SimMedium};
use std::sync::{mpsc, Arc};

/// A small pool with small logs (so that one thread's updates recycle its log soon).
fn cfg(opts: EngineOptions) -> Config {
    Config::default()
        .size(1 << 20)
        .max_threads(2)
        .log_bytes_per_thread(16 << 10)
        .engine_options(opts)
}

/// Thread slot A commits `a = 1` and then, while a reader on slot B runs a
/// transaction that started between the two, `b = 2`: with group commit of 2 the
/// batch is full, `a = 1` is written back and `b = 2` waits (younger than the
/// reader). Slot B then commits enough other updates to recycle its log (raising the
/// persistent watermark), and the pool crashes. Returns `b` after recovery (2 if the
/// committed update survived).
fn pending_update_after_crash() -> u64 {
    let opts = EngineOptions::new().set("group_commit", 2);
    let sim = Arc::new(SimMedium::new(1 << 20, SimConfig::default()).unwrap());
    let pool = Pool::create_on(sim.clone(), cfg(opts.clone())).unwrap();
    let root: PPtr<[PPtr<u64>; 3]> = pool.root().unwrap();
    let [a, b, c] = pool
        .run(|tx| {
            let abc = [tx.alloc(0u64)?, tx.alloc(0u64)?, tx.alloc(0u64)?];
            *tx.write(root)? = abc;
            Ok(abc)
        })
        .unwrap();
    pool.sync().unwrap();
    let mut ha = pool.handle().unwrap();
    let hb = pool.handle().unwrap();
    ha.run(|tx| {
        *tx.write(a)? = 1;
        Ok(())
    })
    .unwrap();
    let (ready_tx, ready_rx) = mpsc::channel::<()>();
    let (done_tx, done_rx) = mpsc::channel::<()>();
    let reader = std::thread::spawn(move || {
        let mut hb = hb;
        hb.run(|tx| {
            assert_eq!(*tx.read(a)?, 1);
            ready_tx.send(()).unwrap();
            done_rx.recv().unwrap();
            assert_eq!(*tx.read(b)?, 0, "the reader's snapshot");
            Ok(())
        })
        .unwrap();
        hb
    });
    ready_rx.recv().unwrap();
    ha.run(|tx| {
        *tx.write(b)? = 2;
        Ok(())
    })
    .unwrap();
    done_tx.send(()).unwrap();
    let mut hb = reader.join().unwrap();
    for i in 0..3000 {
        hb.run(|tx| {
            *tx.write(c)? = i;
            Ok(())
        })
        .unwrap();
    }
    let image = sim.crash_image_now_with(0, Adversary::DurableOnly).image;
    drop((ha, hb, pool));
    let sim = Arc::new(SimMedium::from_image(image, SimConfig::default()).unwrap());
    let pool = Pool::open_on(sim, cfg(opts)).unwrap();
    pool.run(|tx| Ok(*tx.read(b)?)).unwrap()
}

#[test]
fn a_partly_written_back_batch_keeps_the_watermark_below_its_waiting_records() {
    assert_eq!(
        pending_update_after_crash(),
        2,
        "a committed update was lost"
    );
}

/// Mutation evidence: if a partial write-back cleared `pending_min`, the watermark
/// would pass the waiting record and recovery would drop it.
#[cfg(feature = "mutation")]
#[test]
fn the_waiting_records_bound_is_needed() {
    let sc = pisces::mutation::Scenario::setup();
    // SAFETY: a mutation test: the run exists to show the removed step matters, and its
    // outcome is read only as that evidence (see `pisces::mutation::Scenario::set`).
    unsafe {
        sc.set(Some(
            pisces::EngineId::Pisces
                .mutation("partial-write-back-clears-pending")
                .expect("a point of the engine"),
        ))
    };
    assert_ne!(
        pending_update_after_crash(),
        2,
        "the mutation went unnoticed"
    );
}
