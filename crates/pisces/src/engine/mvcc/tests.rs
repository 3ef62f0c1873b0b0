//! Unit tests of the `mvcc` engine's internals (the behavioural, container, crash and
//! isolation suites run it through the public API, see `tests/`).

use super::shared::MvccEngine;
use super::thread::MvccThread;
use crate::engine::{Engine, EngineId, EngineThread};
use crate::heap::{FormatParams, Heap};
use crate::tx_options::TxOptions;
use std::sync::Arc;

fn engine() -> MvccEngine {
    let heap = Heap::format_dram(
        8 << 20,
        FormatParams {
            engine_id: EngineId::Mvcc as u32,
            max_threads: 2,
            log_bytes_per_thread: 64 << 10,
            regions: Default::default(),
        },
    );
    MvccEngine::open(Arc::new(heap)).unwrap()
}

fn put(th: &mut MvccThread, off: u64, v: u64) {
    th.begin(&TxOptions::default());
    let p = th.write(off, 8).unwrap();
    // SAFETY: our private copy of at least 8 bytes, 8-aligned.
    unsafe { (p as *mut u64).write(v) };
    th.commit().unwrap();
}

fn get(th: &MvccThread, off: u64) -> u64 {
    // SAFETY: a version of at least 8 bytes, 8-aligned, valid while the transaction runs.
    unsafe { (th.read(off, 8).unwrap() as *const u64).read() }
}

/// Many updates of one object keep one version when no snapshot is older; a long
/// snapshot pins its version (the pointer it got stays valid and unchanged while the
/// chain grows above it), and once it ends, the next update frees everything but the
/// newest version.
#[test]
fn versions_are_reclaimed_below_the_oldest_snapshot() {
    let e = engine();
    let mut w = e.thread(0).unwrap();
    let mut r = e.thread(1).unwrap();
    w.begin(&TxOptions::default());
    let off = w.alloc(64).unwrap();
    w.commit().unwrap();
    assert_eq!(e.live_versions(), 1, "the new object's version only");
    for i in 0..20_000 {
        put(&mut w, off, i);
    }
    assert_eq!(e.live_versions(), 1, "versions piled up without any reader");

    r.begin(&TxOptions::default());
    let pinned = r.read(off, 8).unwrap() as *const u64;
    // SAFETY: valid until `r`'s transaction ends (engine contract).
    assert_eq!(unsafe { pinned.read() }, 19_999);
    for i in 0..1_000 {
        put(&mut w, off, 100_000 + i);
    }
    // SAFETY: as above; the transaction still runs.
    let still = unsafe { pinned.read() };
    assert_eq!(still, 19_999, "a snapshot's version changed");
    assert_eq!(get(&r, off), 19_999);
    assert!(e.live_versions() >= 2 && e.live_versions() <= 1_001);
    r.commit().unwrap();

    put(&mut w, off, 7);
    assert_eq!(
        e.live_versions(),
        1,
        "versions not reclaimed after the snapshot ended"
    );
    r.begin(&TxOptions::default());
    assert_eq!(get(&r, off), 7);
    r.commit().unwrap();
}

/// A snapshot sees the newest version at or below its start, also several versions
/// back, and its own writes over it.
#[test]
fn snapshots_pick_the_right_version_from_the_chain() {
    let e = engine();
    let mut w = e.thread(0).unwrap();
    let mut r = e.thread(1).unwrap();
    w.begin(&TxOptions::default());
    let off = w.alloc(8).unwrap();
    w.commit().unwrap();
    put(&mut w, off, 1);
    r.begin(&TxOptions::default());
    for v in 2..10 {
        put(&mut w, off, v);
    }
    assert_eq!(get(&r, off), 1);
    let p = r.write(off, 8).unwrap();
    // SAFETY: our private copy.
    unsafe { (p as *mut u64).write(50) };
    assert_eq!(get(&r, off), 50);
    // First committer wins: the object changed since the snapshot.
    assert!(matches!(r.commit(), Err(crate::Error::Conflict)));
    r.begin(&TxOptions::default());
    assert_eq!(get(&r, off), 9);
    r.commit().unwrap();
}
