//! One pool opened by several processes at once (`Sharing::Shared`, a preview of the
//! test tooling). Each open of a pool shared in this test binary stands for a process:
//! the sidecar's locks are open-file-description locks, which two opens conflict on
//! as two processes would.

use pisces::tools::Sharing;
use pisces::{Config, EngineId, Error, PPtr, Pool};
use std::sync::{Arc, Barrier};

fn cfg() -> Config {
    Config::default()
        .size(8 << 20)
        .max_threads(4)
        .log_bytes_per_thread(64 << 10)
}

fn shared() -> Config {
    cfg()
        .sharing(Sharing::Shared)
        .slot_wait(std::time::Duration::from_millis(20))
}

fn pool_path() -> (tempfile::TempDir, std::path::PathBuf) {
    let d = tempfile::tempdir_in("/dev/shm").unwrap();
    let p = d.path().join("pool");
    (d, p)
}

/// Shared opens coexist; an exclusive open is refused while any is open, and a shared
/// open while an exclusive one is; the last shared close lets an exclusive open in,
/// with every commit of both "processes" there.
#[test]
fn shared_and_exclusive_opens_exclude_each_other() {
    let (_d, p) = pool_path();
    drop(Pool::create(&p, cfg()).unwrap());
    let a = Pool::open(&p, shared()).unwrap();
    let b = Pool::open(&p, shared()).unwrap();
    assert!(matches!(
        Pool::open(&p, cfg()),
        Err(Error::AlreadyOpen(_) | Error::Locked(_))
    ));
    let root: PPtr<u64> = a.root().unwrap();
    assert_eq!(b.root::<u64>().unwrap(), root, "one root for both");
    a.run(|tx| {
        *tx.write(root)? += 1;
        Ok(())
    })
    .unwrap();
    b.run(|tx| {
        *tx.write(root)? += 10;
        Ok(())
    })
    .unwrap();
    assert_eq!(a.run(|tx| Ok(*tx.read(root)?)).unwrap(), 11);
    drop(a);
    assert!(Pool::open(&p, cfg()).is_err(), "b still has it");
    drop(b);
    let only = Pool::open(&p, cfg()).unwrap();
    assert_eq!(only.run(|tx| Ok(*tx.read(root)?)).unwrap(), 11);
    assert!(matches!(
        Pool::open(&p, shared()),
        Err(Error::AlreadyOpen(_) | Error::Locked(_))
    ));
}

/// Engines whose state cannot be shared refuse a shared open, saying why; a pool that
/// may grow is refused too.
#[test]
fn engines_that_cannot_share_refuse() {
    for engine in [
        EngineId::Mvcc,
        EngineId::Undo,
        EngineId::Sp3,
        EngineId::Spht,
    ] {
        let (_d, p) = pool_path();
        let e = Pool::create(&p, shared().engine(engine)).unwrap_err();
        let msg = e.to_string();
        assert!(
            matches!(e, Error::InvalidConfig(_)) && msg.contains("several processes"),
            "{engine}: {msg}"
        );
    }
    let (_d, p) = pool_path();
    let e = Pool::create(&p, shared().max_size(64 << 20)).unwrap_err();
    assert!(e.to_string().contains("grow"), "{e}");
}

/// Two "processes" move money between accounts at the same time, each with two
/// threads; every snapshot of each sees the total conserved, and the last close leaves
/// it conserved for the next exclusive open.
#[test]
fn two_processes_transfer_and_keep_the_total() {
    const ACCOUNTS: usize = 16;
    const TOTAL: u64 = 1600;
    let (_d, p) = pool_path();
    {
        let pool = Pool::create(&p, cfg()).unwrap();
        let root: PPtr<[u64; ACCOUNTS]> = pool.root().unwrap();
        pool.run(|tx| {
            *tx.write(root)? = [TOTAL / ACCOUNTS as u64; ACCOUNTS];
            Ok(())
        })
        .unwrap();
    }
    let pools: Vec<Pool> = (0..2).map(|_| Pool::open(&p, shared()).unwrap()).collect();
    let go = Arc::new(Barrier::new(4));
    std::thread::scope(|s| {
        for (i, pool) in pools.iter().flat_map(|p| [p, p]).enumerate() {
            let go = go.clone();
            s.spawn(move || {
                let root: PPtr<[u64; ACCOUNTS]> = pool.root().unwrap();
                go.wait();
                let mut x = 0x9e37_79b9_7f4a_7c15u64 ^ i as u64;
                for _ in 0..2000 {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    let (from, to) = ((x % 16) as usize, ((x >> 8) % 16) as usize);
                    pool.run(|tx| {
                        let a = tx.write(root)?;
                        if a[from] > 0 {
                            a[from] -= 1;
                            a[to] += 1;
                        }
                        Ok(())
                    })
                    .unwrap();
                    let sum: u64 = pool.read(|tx| Ok(tx.read(root)?.iter().sum())).unwrap();
                    assert_eq!(sum, TOTAL);
                }
            });
        }
    });
    drop(pools);
    let pool = Pool::open(&p, cfg()).unwrap();
    let root: PPtr<[u64; ACCOUNTS]> = pool.root().unwrap();
    let sum: u64 = pool.read(|tx| Ok(tx.read(root)?.iter().sum())).unwrap();
    assert_eq!(sum, TOTAL);
}

/// A process that closes gives its slots up: with one slot each, processes that come
/// after it take the slots it had, and their commits go on where its log ended.
#[test]
fn slots_pass_from_a_closed_process_to_the_next() {
    let (_d, p) = pool_path();
    drop(Pool::create(&p, cfg().max_threads(2)).unwrap());
    let keeper = Pool::open(&p, shared()).unwrap();
    let root: PPtr<u64> = keeper.root().unwrap();
    let mut h = keeper.handle().unwrap();
    for round in 1..=5u64 {
        let visitor = Pool::open(&p, shared()).unwrap();
        for _ in 0..50 {
            visitor
                .run(|tx| {
                    *tx.write(root)? += 1;
                    Ok(())
                })
                .unwrap();
        }
        let held = visitor.handle().unwrap();
        assert!(
            matches!(visitor.handle().map(|_| ()), Err(Error::TooManyThreads(_))),
            "both slots are taken"
        );
        drop(held);
        drop(visitor);
        // Through the handle: `keeper.read` would take the slot the visitor gave up.
        assert_eq!(h.read(|tx| Ok(*tx.read(root)?)).unwrap(), 50 * round);
    }
}
