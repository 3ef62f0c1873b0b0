//! A pool is open once: a second open in this process or in another one is refused
//! with an error that says which.
//!
//! A binary of its own: it spawns a process that takes the pool's lock, and a child
//! between its fork and its exec holds a copy of every descriptor of this process —
//! the lock of any pool another test of the same binary just closed, which would then
//! refuse that test's next open.

use pisces::{Config, Error, PPtr, Pool};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Held by each test that spawns processes: a child between its fork and its exec
/// holds the locks of the pools this process has open, so no other test of this
/// binary opens or closes a pool while one spawns.
static SPAWNING: Mutex<()> = Mutex::new(());

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
    let _spawning = SPAWNING.lock().unwrap_or_else(|e| e.into_inner());
    let d = tempfile::tempdir_in("/dev/shm").unwrap();
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
            assert_eq!(*q, p);
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

/// The pool the children of `open_or_create_race` share (set only in them).
const RACE_POOL: &str = "PISCES_TEST_RACE_POOL";
const RACERS: u64 = 4;

/// Processes that call `Pool::open_or_create` on one new path at once: one creates the
/// pool, the others open it (retrying while it is open elsewhere, the documented
/// `Locked`), and every one's increment of the root is kept, so none formatted the pool
/// over another's.
#[test]
fn open_or_create_race() {
    let _spawning = SPAWNING.lock().unwrap_or_else(|e| e.into_inner());
    let d = tempfile::tempdir_in("/dev/shm").unwrap();
    let p = d.path().join("raced.pool");
    let exe = std::env::current_exe().unwrap();
    let children: Vec<_> = (0..RACERS)
        .map(|_| {
            std::process::Command::new(&exe)
                .args([
                    "--exact",
                    "open_or_create_racer",
                    "--ignored",
                    "--test-threads=1",
                ])
                .env(RACE_POOL, &p)
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    // Start them together: each says it is ready, then spins until `go` exists.
    let t0 = Instant::now();
    while std::fs::read_dir(d.path()).unwrap().count() < RACERS as usize {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "racers did not start"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    std::fs::File::create(d.path().join("go")).unwrap();
    for c in children {
        let out = c.wait_with_output().unwrap();
        assert!(
            out.status.success() && String::from_utf8_lossy(&out.stdout).contains("1 passed"),
            "a racer failed: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    assert_eq!(root_value(&Pool::open(&p, cfg()).unwrap()), RACERS);
}

/// One racer of `open_or_create_race`, run in a child process of it.
#[test]
#[ignore = "a child process of open_or_create_race"]
fn open_or_create_racer() {
    let p =
        std::path::PathBuf::from(std::env::var_os(RACE_POOL).expect("run by open_or_create_race"));
    let dir = p.parent().unwrap();
    std::fs::File::create(dir.join(format!("ready-{}", std::process::id()))).unwrap();
    let t0 = Instant::now();
    while !dir.join("go").exists() {
        assert!(t0.elapsed() < Duration::from_secs(60), "no go");
        std::hint::spin_loop();
    }
    let pool = loop {
        match Pool::open_or_create(&p, cfg()) {
            Ok(pool) => break pool,
            Err(Error::Locked(_)) if t0.elapsed() < Duration::from_secs(60) => {
                std::thread::sleep(Duration::from_millis(1))
            }
            Err(e) => panic!("open_or_create: {e}"),
        }
    };
    let root: PPtr<u64> = pool.root().unwrap();
    pool.run(|tx| {
        *tx.write(root)? += 1;
        Ok(())
    })
    .unwrap();
}
