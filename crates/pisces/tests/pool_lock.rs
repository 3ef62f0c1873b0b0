//! A pool is open once: a second open in this process or in another one is refused
//! with an error that says which.
//!
//! A binary of its own: it spawns a process that takes the pool's lock, and a child
//! between its fork and its exec holds a copy of every descriptor of this process —
//! the lock of any pool another test of the same binary just closed, which would then
//! refuse that test's next open.

use pisces::{Config, Error, PPtr, Pool};

fn cfg() -> Config {
    Config::default()
        .size(4 << 20)
        .max_threads(2)
        .log_bytes_per_thread(64 << 10)
}

fn root_value(pool: &Pool) -> u64 {
    let root: PPtr<u64> = pool.root().unwrap();
    pool.run(|tx| Ok(*tx.read(root)?)).unwrap()
}

#[test]
fn pool_already_open() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("pool");
    {
        let pool = Pool::create(&p, cfg()).unwrap();
        let root: PPtr<u64> = pool.root().unwrap();
        pool.run(|tx| {
            *tx.write(root)? = 41;
            Ok(())
        })
        .unwrap();
    }
    let first = Pool::open(&p, cfg()).unwrap();
    first.sync().unwrap();
    // The same process: the message says so.
    match Pool::open(&p, cfg()) {
        Err(Error::AlreadyOpen(q)) => {
            assert_eq!(q, p);
            let msg = Error::AlreadyOpen(q).to_string();
            assert!(msg.contains("in this process"), "{msg}");
        }
        other => panic!("expected AlreadyOpen, got {:?}", other.map(|_| ())),
    }
    assert_eq!(root_value(&first), 41);
    drop(first);
    // Another process holding the lock (flock(1) from util-linux, if present): Locked,
    // and the message says "another process".
    if let Ok(mut child) = std::process::Command::new("flock")
        .arg(&p)
        .args(["sleep", "3"])
        .spawn()
    {
        let t0 = std::time::Instant::now();
        let mut seen = None;
        while t0.elapsed() < std::time::Duration::from_secs(2) {
            match Pool::open(&p, cfg()) {
                Err(e) => {
                    seen = Some(e);
                    break;
                }
                Ok(pool) => drop(pool),
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let _ = child.wait();
        match seen {
            Some(e @ Error::Locked(_)) => {
                assert!(e.to_string().contains("another process"), "{e}")
            }
            other => panic!("expected Locked while flock(1) holds the pool, got {other:?}"),
        }
    }
    let first = Pool::open(&p, cfg()).unwrap();
    // The first handle is unaffected, and the pool opens again once it is closed.
    assert_eq!(root_value(&first), 41);
    drop(first);
    assert_eq!(root_value(&Pool::open(&p, cfg()).unwrap()), 41);
}
