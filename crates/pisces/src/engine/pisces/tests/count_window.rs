//! A thread's counting transactions and group commit: consecutive inserts of one
//! thread add to different stripes of a container's element count, so none of them
//! writes an object its own earlier transaction still holds in the group-commit batch
//! (which would make it write that batch back, waiting for every older reader).

use crate::containers::count;
use crate::{Config, EngineOptions, Pool};
use std::sync::mpsc;
use std::time::Duration;

/// A reader runs while a writer commits `count::WINDOW` transactions, each adding 1
/// to one count (group commit of `count::WINDOW`: the batch fills only at the last).
/// Returns whether the writer's commits all returned while the reader ran, and the
/// count afterwards.
fn counts_beside_a_reader() -> (bool, usize) {
    let dir = tempfile::tempdir_in("/dev/shm").unwrap();
    let cfg = Config {
        size: 16 << 20,
        max_threads: 2,
        log_bytes_per_thread: 256 << 10,
        engine_options: EngineOptions::new().set("group_commit", count::WINDOW),
        ..Config::default()
    };
    let pool = Pool::create(dir.path().join("count.pool"), cfg).unwrap();
    let table = pool.run(count::create).unwrap();
    pool.sync().unwrap();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let (done_tx, done_rx) = mpsc::channel::<()>();
    let returned = std::thread::scope(|s| {
        let pool = &pool;
        let writer = s.spawn(move || {
            let mut h = pool.handle().unwrap();
            go_rx.recv().unwrap();
            for _ in 0..count::WINDOW {
                h.run(|tx| count::add(tx, table, 1)).unwrap();
            }
            done_tx.send(()).unwrap();
        });
        let mut h = pool.handle().unwrap();
        let returned = h
            .run(|tx| {
                assert_eq!(count::total(tx, table)?, 0);
                go_tx.send(()).unwrap();
                Ok(done_rx.recv_timeout(Duration::from_secs(5)).is_ok())
            })
            .unwrap();
        drop(h);
        writer.join().unwrap();
        returned
    });
    let total = pool.run(|tx| count::total(tx, table)).unwrap();
    (returned, total)
}

#[test]
fn consecutive_counts_of_a_thread_wait_for_no_reader() {
    let (returned, total) = counts_beside_a_reader();
    assert!(
        returned,
        "a counting transaction wrote back its own batch, waiting for the reader"
    );
    assert_eq!(total, count::WINDOW);
}
