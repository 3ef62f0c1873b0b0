//! Pools that grow: filled past their initial size on every engine that runs on the
//! library's heap, reopened with their data; growth stops at the maximum with
//! `OutOfSpace`; engines that cannot follow a growth refuse it; two threads that hit the
//! end at once both succeed; `check` accepts a grown pool and a file that an
//! interrupted growth left longer than the pool.

use pisces::tools::check::check_pool;
use pisces::{Config, EngineId, Error, MediumKind, PPtr, Pool};
use std::path::Path;

const SIZE: u64 = 1 << 20;
const MAX: u64 = 16 << 20;
/// Words of one object: 4 KiB.
const WORDS: usize = 512;
type Obj = [u64; WORDS];

fn cfg(engine: EngineId, max: Option<u64>) -> Config {
    Config::default()
        .size(SIZE)
        .max_size(max)
        .engine(engine)
        .max_threads(2)
        .log_bytes_per_thread(64 << 10)
}

/// Engines on the library's heap that can use a pool that grows.
fn growable_engines() -> Vec<EngineId> {
    EngineId::ALL
        .iter()
        .copied()
        .filter(|e| e.available() && !matches!(e, EngineId::Spht | EngineId::Pmdk))
        .collect()
}

fn pattern(i: u64, k: usize) -> u64 {
    i.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ k as u64
}

/// Append `n` objects to the list at `root` (head, count), one per transaction.
fn append(pool: &Pool, root: PPtr<[u64; 2]>, n: u64) -> pisces::Result<()> {
    for _ in 0..n {
        pool.run(|tx| {
            let [head, count] = *tx.read(root)?;
            let mut o: Obj = [0; WORDS];
            o[0] = head;
            o[1] = count;
            for (k, w) in o.iter_mut().enumerate().skip(2) {
                *w = pattern(count, k);
            }
            let p = tx.alloc(o)?;
            *tx.write(root)? = [p.offset(), count + 1];
            Ok(())
        })?;
    }
    Ok(())
}

/// Walk the list and check every object; returns its length.
fn verify(pool: &Pool, root: PPtr<[u64; 2]>) -> u64 {
    pool.run(|tx| {
        let [mut head, count] = *tx.read(root)?;
        let mut seen = 0;
        while head != 0 {
            let o = tx.read(PPtr::<Obj>::from_offset(head))?;
            let i = count - 1 - seen;
            assert_eq!(o[1], i, "object {seen} from the head");
            for (k, &w) in o.iter().enumerate().skip(2) {
                assert_eq!(w, pattern(i, k), "word {k} of object {i}");
            }
            head = o[0];
            seen += 1;
        }
        assert_eq!(seen, count);
        Ok(count)
    })
    .unwrap()
}

fn file_len(p: &Path) -> u64 {
    std::fs::metadata(p).unwrap().len()
}

#[test]
fn every_engine_fills_a_pool_past_its_initial_size_and_reopens_it() {
    for engine in growable_engines() {
        let d = tempfile::tempdir_in("/dev/shm").unwrap();
        let p = d.path().join("g.pool");
        // About three times what the initial heap holds.
        let n = 3 * SIZE / (WORDS as u64 * 8);
        {
            let pool = Pool::create(&p, cfg(engine, Some(MAX))).unwrap();
            let root: PPtr<[u64; 2]> = pool.root().unwrap();
            append(&pool, root, n).unwrap_or_else(|e| panic!("{engine}: {e}"));
            assert_eq!(verify(&pool, root), n, "{engine}");
            let sb = pool.superblock().unwrap();
            assert!(sb.pool_size > SIZE, "{engine}: did not grow");
            assert_eq!(sb.max_size, MAX);
            assert!(file_len(&p) >= sb.pool_size, "{engine}");
        }
        let pool = Pool::open(&p, Config::default()).unwrap();
        let sb = pool.superblock().unwrap();
        assert!(
            sb.pool_size > SIZE,
            "{engine}: the grown size is not persisted"
        );
        assert_eq!(sb.max_size, MAX, "{engine}");
        let root: PPtr<[u64; 2]> = pool.root().unwrap();
        if engine.is_durable() {
            assert_eq!(verify(&pool, root), n, "{engine}: data after reopening");
            // And it keeps growing after the reopen.
            append(&pool, root, n).unwrap_or_else(|e| panic!("{engine}: {e}"));
            assert_eq!(verify(&pool, root), 2 * n, "{engine}");
            assert!(pool.superblock().unwrap().pool_size > sb.pool_size);
        }
        drop(pool);
        let r = check_pool(&p, MediumKind::DRAM).unwrap();
        assert!(r.is_ok(), "{engine}: {r}");
        let text = r.to_string();
        assert!(text.contains("maximum size"), "{text}");
        assert!(text.contains("grows when the heap is full"), "{text}");
    }
}

#[test]
fn growth_stops_at_the_maximum_with_out_of_space() {
    let d = tempfile::tempdir_in("/dev/shm").unwrap();
    let p = d.path().join("g.pool");
    let max = 3 << 20;
    let pool = Pool::create(&p, cfg(EngineId::Pisces, Some(max))).unwrap();
    let root: PPtr<[u64; 2]> = pool.root().unwrap();
    let err = append(&pool, root, max / 4096).unwrap_err();
    assert!(matches!(err, Error::OutOfSpace { .. }), "{err}");
    let sb = pool.superblock().unwrap();
    assert!(
        sb.pool_size <= max && sb.pool_size > max - (64 << 10),
        "{}",
        sb.pool_size
    );
    let n = verify(&pool, root);
    assert!(n * 4096 > 2 << 20, "only {n} objects before OutOfSpace");
    drop(pool);
    assert!(file_len(&p) <= max);
    let pool = Pool::open(&p, Config::default()).unwrap();
    let root: PPtr<[u64; 2]> = pool.root().unwrap();
    assert_eq!(verify(&pool, root), n);
    assert!(matches!(
        append(&pool, root, 1),
        Err(Error::OutOfSpace { .. })
    ));
}

#[test]
fn a_pool_without_a_maximum_does_not_grow() {
    let d = tempfile::tempdir_in("/dev/shm").unwrap();
    let p = d.path().join("g.pool");
    let pool = Pool::create(&p, cfg(EngineId::Pisces, None)).unwrap();
    let root: PPtr<[u64; 2]> = pool.root().unwrap();
    assert!(matches!(
        append(&pool, root, SIZE / 4096 + 1),
        Err(Error::OutOfSpace { .. })
    ));
    let sb = pool.superblock().unwrap();
    assert_eq!((sb.pool_size, sb.max_size), (SIZE, SIZE));
    drop(pool);
    assert_eq!(file_len(&p), SIZE);
}

#[test]
fn engines_that_cannot_follow_a_growth_refuse_it() {
    let d = tempfile::tempdir_in("/dev/shm").unwrap();
    for engine in [EngineId::Spht, EngineId::Pmdk] {
        if !engine.available() {
            continue;
        }
        let p = d.path().join(engine.name());
        match Pool::create(&p, cfg(engine, Some(MAX))) {
            Err(Error::InvalidConfig(m)) => {
                assert!(m.contains("cannot use a pool that grows"), "{m}")
            }
            other => panic!("{engine}: expected InvalidConfig, got {:?}", other.err()),
        }
        assert!(!p.exists(), "{engine}: a refused create leaves no file");
    }
    // Maximum sizes below the size or not page multiples.
    let bad = [0u64, SIZE - 4096, SIZE + 100];
    for max in bad {
        let p = d.path().join(format!("bad{max}"));
        assert!(
            matches!(
                Pool::create(&p, cfg(EngineId::Pisces, Some(max))),
                Err(Error::InvalidConfig(_))
            ),
            "max {max}"
        );
        assert!(!p.exists());
    }
}

#[test]
fn two_threads_hitting_the_end_at_once_both_get_space() {
    for engine in [EngineId::Pisces, EngineId::Mvcc, EngineId::Undo] {
        let d = tempfile::tempdir_in("/dev/shm").unwrap();
        let p = d.path().join("g.pool");
        let pool = Pool::create(&p, cfg(engine, Some(MAX))).unwrap();
        let per_thread = 2 * SIZE / 4096;
        // The list heads hang off the root object: every object is reachable.
        let root: PPtr<[PPtr<[u64; 2]>; 2]> = pool.root().unwrap();
        let roots: Vec<PPtr<[u64; 2]>> = (0..2)
            .map(|i| {
                pool.run(|tx| {
                    let head = tx.alloc([0u64; 2])?;
                    tx.write(root)?[i] = head;
                    Ok(head)
                })
                .unwrap()
            })
            .collect();
        std::thread::scope(|s| {
            for &r in &roots {
                let pool = pool.clone();
                s.spawn(move || append(&pool, r, per_thread).unwrap());
            }
        });
        for &r in &roots {
            assert_eq!(verify(&pool, r), per_thread, "{engine}");
        }
        let objects = pool.allocated_objects().unwrap();
        // The root, two list heads and every object: each exactly once.
        assert_eq!(objects.len() as u64, 3 + 2 * per_thread, "{engine}");
        let sb = pool.superblock().unwrap();
        assert!(
            sb.pool_size > SIZE && sb.pool_size <= 8 * SIZE,
            "{}",
            sb.pool_size
        );
        drop(pool);
        let r = check_pool(&p, MediumKind::DRAM).unwrap();
        assert!(r.is_ok(), "{engine}: {r}");
    }
}

#[test]
fn a_file_longer_than_the_pool_opens_and_is_reused() {
    let d = tempfile::tempdir_in("/dev/shm").unwrap();
    let p = d.path().join("g.pool");
    drop(Pool::create(&p, cfg(EngineId::Pisces, Some(MAX))).unwrap());
    // What a growth leaves when it crashes after extending the file and before the
    // superblock records the new size: a longer file, with garbage in the extra part.
    {
        use std::io::{Seek, SeekFrom, Write};
        let mut f = std::fs::OpenOptions::new().write(true).open(&p).unwrap();
        f.seek(SeekFrom::Start(SIZE)).unwrap();
        f.write_all(&vec![0xa5; 3 << 20]).unwrap();
    }
    let r = check_pool(&p, MediumKind::DRAM).unwrap();
    assert!(r.is_ok(), "{r}");
    assert!(
        r.warnings.iter().any(|w| w.contains("interrupted growth")),
        "{:?}",
        r.warnings
    );
    let pool = Pool::open(&p, Config::default()).unwrap();
    assert_eq!(pool.superblock().unwrap().pool_size, SIZE);
    let root: PPtr<[u64; 2]> = pool.root().unwrap();
    let n = 2 * SIZE / 4096;
    append(&pool, root, n).unwrap();
    assert_eq!(verify(&pool, root), n);
    drop(pool);
    let pool = Pool::open(&p, Config::default()).unwrap();
    let root: PPtr<[u64; 2]> = pool.root().unwrap();
    assert_eq!(verify(&pool, root), n);
    // A file longer than the maximum is refused.
    drop(pool);
    std::fs::OpenOptions::new()
        .write(true)
        .open(&p)
        .unwrap()
        .set_len(MAX + 4096)
        .unwrap();
    assert!(matches!(
        Pool::open(&p, Config::default()),
        Err(Error::SizeMismatch(_))
    ));
}

#[test]
fn file_and_anonymous_media_grow_too() {
    let d = tempfile::tempdir_in(std::env::temp_dir()).unwrap();
    let p = d.path().join("f.pool");
    let c = cfg(EngineId::Pisces, Some(4 << 20)).medium(MediumKind::File);
    {
        let pool = Pool::create(&p, c.clone()).unwrap();
        let root: PPtr<[u64; 2]> = pool.root().unwrap();
        append(&pool, root, 400).unwrap();
    }
    let pool = Pool::open(&p, c.clone()).unwrap();
    let root: PPtr<[u64; 2]> = pool.root().unwrap();
    assert_eq!(verify(&pool, root), 400);
    drop(pool);

    let m = std::sync::Arc::new(
        pisces::tools::dram::DramMedium::anonymous_growable(SIZE as usize, MAX as usize, 0, 0)
            .unwrap(),
    );
    let pool = Pool::create_on(m.clone(), cfg(EngineId::Pisces, Some(MAX))).unwrap();
    let root: PPtr<[u64; 2]> = pool.root().unwrap();
    append(&pool, root, 600).unwrap();
    assert_eq!(verify(&pool, root), 600);
    drop(pool);
    // A medium that reserves less than the maximum is refused at format time.
    let small = std::sync::Arc::new(
        pisces::tools::dram::DramMedium::anonymous(SIZE as usize, 0, 0).unwrap(),
    );
    assert!(matches!(
        Pool::create_on(small, cfg(EngineId::Pisces, Some(MAX))),
        Err(Error::MediumUnsupported(_))
    ));
}

/// Where a small file system is mounted for the test below (`.ci/run` mounts a 12 MiB
/// tmpfs and sets it; without it the test says so and passes).
const SMALL_FS_ENV: &str = "PISCES_SMALL_FS";

/// A file system that fills up while a pool grows (its maximum size is larger than the
/// free space): growth fails with `OutOfSpace`, never a signal or a lost transaction;
/// everything committed before is there after reopening, on every engine that grows.
#[test]
fn a_full_file_system_during_growth_is_out_of_space_and_loses_nothing() {
    let Some(dir) = std::env::var_os(SMALL_FS_ENV) else {
        println!("{SMALL_FS_ENV} is not set (a small mounted file system): skipped");
        return;
    };
    let dir = Path::new(&dir);
    for engine in growable_engines() {
        let p = dir.join(format!("{engine}-full.pool"));
        let _ = std::fs::remove_file(&p);
        let committed = {
            let pool = Pool::create(&p, cfg(engine, Some(1 << 30))).unwrap();
            let root: PPtr<[u64; 2]> = pool.root().unwrap();
            let err = append(&pool, root, 1 << 20).unwrap_err();
            assert!(
                matches!(err, Error::OutOfSpace { .. }),
                "{engine}: {err} ({err:?})"
            );
            let n = verify(&pool, root);
            assert!(n > 0, "{engine}");
            // Still usable: what fits in the pool as it is goes on committing.
            pool.run(|tx| Ok(*tx.read(root)?)).unwrap();
            n
        };
        if engine.is_durable() {
            let pool = Pool::open(&p, Config::default()).unwrap();
            let root: PPtr<[u64; 2]> = pool.root().unwrap();
            assert_eq!(verify(&pool, root), committed, "{engine}: after reopening");
            drop(pool);
            let r = check_pool(&p, MediumKind::DRAM).unwrap();
            assert!(r.is_ok(), "{engine}: {r}");
        }
        std::fs::remove_file(&p).unwrap();
    }
}
