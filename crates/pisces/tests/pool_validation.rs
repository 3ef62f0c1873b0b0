//! Bad input to `Pool::open` / `Pool::create`: each case gives its own `Error` variant,
//! never panics, and leaves the file's bytes exactly as they were.

use pisces::tools::layout::SUPERBLOCK_SIZE;
use pisces::tools::superblock::{Superblock, FORMAT_VERSION, MAGIC};
use pisces::{Config, Error, PPtr, Pool};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

const SIZE: u64 = 4 << 20;

fn cfg() -> Config {
    Config::default()
        .size(SIZE)
        .max_threads(2)
        .log_bytes_per_thread(64 << 10)
}

/// A closed pool with a root counter set to 41, in a fresh directory.
fn make_pool() -> (tempfile::TempDir, PathBuf) {
    let d = tempfile::tempdir_in("/dev/shm").unwrap();
    let p = d.path().join("pool");
    let pool = Pool::create(&p, cfg()).unwrap();
    let root: PPtr<u64> = pool.root().unwrap();
    pool.run(|tx| {
        *tx.write(root)? = 41;
        Ok(())
    })
    .unwrap();
    drop(pool);
    (d, p)
}

/// Length and CRC32C of the file's bytes (`None` if it does not exist).
fn fingerprint(p: &Path) -> Option<(usize, u32)> {
    std::fs::read(p).ok().map(|b| (b.len(), crc32c::crc32c(&b)))
}

/// Open `p`, expect an error, and check that the file did not change.
fn open_fails(p: &Path) -> Error {
    let before = fingerprint(p);
    let e = match Pool::open(p, cfg()) {
        Ok(_) => panic!("opening {} succeeded", p.display()),
        Err(e) => e,
    };
    assert_eq!(
        fingerprint(p),
        before,
        "a failed open changed the file ({e})"
    );
    assert!(!e.to_string().is_empty());
    e
}

fn read_sb(p: &Path, copy: usize) -> Superblock {
    let b = std::fs::read(p).unwrap();
    let off = copy * SUPERBLOCK_SIZE;
    bytemuck::pod_read_unaligned(&b[off..off + std::mem::size_of::<Superblock>()])
}

fn write_at(p: &Path, off: usize, bytes: &[u8]) {
    let mut b = std::fs::read(p).unwrap();
    b[off..off + bytes.len()].copy_from_slice(bytes);
    std::fs::write(p, b).unwrap();
}

/// The superblock checksum as the format defines it: CRC32C of every byte before the
/// checksum field, continued over the root record (the fields after the checksum and
/// its padding) when the pool has one.
fn format_checksum(sb: &Superblock) -> u32 {
    let bytes = bytemuck::bytes_of(sb);
    let body = crc32c::crc32c(&bytes[..std::mem::offset_of!(Superblock, checksum)]);
    if sb.root_offset == 0 && sb.root_tag == 0 {
        body
    } else {
        crc32c::crc32c_append(
            body,
            &bytes[std::mem::offset_of!(Superblock, root_offset)..],
        )
    }
}

/// Rewrite both superblock copies with `f` applied, checksums re-sealed.
fn rewrite_both(p: &Path, f: impl Fn(&mut Superblock)) {
    for copy in 0..2 {
        let mut sb = read_sb(p, copy);
        f(&mut sb);
        sb.checksum = format_checksum(&sb);
        assert_eq!(
            sb.checksum,
            sb.seal().checksum,
            "the format's checksum rule"
        );
        write_at(p, copy * SUPERBLOCK_SIZE, bytemuck::bytes_of(&sb));
    }
}

fn root_value(pool: &Pool) -> u64 {
    let root: PPtr<u64> = pool.root().unwrap();
    pool.run(|tx| Ok(*tx.read(root)?)).unwrap()
}

#[test]
fn a_good_pool_opens_and_keeps_its_data() {
    let (_d, p) = make_pool();
    let pool = Pool::open(&p, cfg()).unwrap();
    assert_eq!(root_value(&pool), 41);
    assert_eq!(pool.superblock().unwrap().magic, MAGIC);
    assert_eq!(pool.superblock().unwrap().format_version, FORMAT_VERSION);
}

#[test]
fn missing_file() {
    let d = tempfile::tempdir_in("/dev/shm").unwrap();
    let p = d.path().join("nothing-here");
    assert!(matches!(open_fails(&p), Error::NotFound(ref q) if **q == p));
    assert!(!p.exists(), "open must not create the file");
}

#[test]
fn path_is_a_directory() {
    let d = tempfile::tempdir_in("/dev/shm").unwrap();
    let sub = d.path().join("dir");
    std::fs::create_dir(&sub).unwrap();
    assert!(matches!(open_fails(&sub), Error::IsDirectory(_)));
    assert_eq!(std::fs::read_dir(&sub).unwrap().count(), 0);
    assert!(matches!(
        Pool::create(&sub, cfg()),
        Err(Error::AlreadyExists(_))
    ));
}

#[test]
fn file_too_small() {
    let d = tempfile::tempdir_in("/dev/shm").unwrap();
    let p = d.path().join("small");
    std::fs::write(&p, vec![0xabu8; 4096]).unwrap();
    match open_fails(&p) {
        Error::TooSmall(t) => {
            assert_eq!(t.len, 4096);
            assert!(t.min > 4096);
        }
        e => panic!("expected TooSmall, got {e:?}"),
    }
    let p = d.path().join("empty");
    std::fs::write(&p, b"").unwrap();
    assert!(matches!(open_fails(&p), Error::TooSmall(t) if t.len == 0));
}

#[test]
fn truncated_file() {
    let (_d, p) = make_pool();
    let f = std::fs::OpenOptions::new().write(true).open(&p).unwrap();
    f.set_len(SIZE - 3 * 4096).unwrap();
    drop(f);
    match open_fails(&p) {
        Error::SizeMismatch(m) => {
            assert_eq!(m.expected, SIZE);
            assert_eq!(m.actual, SIZE - 3 * 4096);
        }
        e => panic!("expected SizeMismatch, got {e:?}"),
    }
}

#[test]
fn wrong_magic() {
    let (_d, p) = make_pool();
    write_at(&p, 0, b"NOTAPOOL");
    write_at(&p, SUPERBLOCK_SIZE, b"NOTAPOOL");
    assert!(matches!(open_fails(&p), Error::BadMagic));
}

#[test]
fn zero_filled_file_is_not_a_pool() {
    let d = tempfile::tempdir_in("/dev/shm").unwrap();
    let p = d.path().join("zeros");
    std::fs::write(&p, vec![0u8; SIZE as usize]).unwrap();
    assert!(matches!(open_fails(&p), Error::BadMagic));
}

#[test]
fn unknown_format_version() {
    let (_d, p) = make_pool();
    rewrite_both(&p, |sb| sb.format_version = FORMAT_VERSION + 1);
    match open_fails(&p) {
        Error::UnsupportedVersion { found, supported } => {
            assert_eq!(found, FORMAT_VERSION + 1);
            assert_eq!(supported, FORMAT_VERSION);
        }
        e => panic!("expected UnsupportedVersion, got {e:?}"),
    }
}

#[test]
fn other_engine() {
    let (_d, p) = make_pool();
    rewrite_both(&p, |sb| sb.engine_id = 0x4242);
    match open_fails(&p) {
        Error::UnknownEngine(id) => assert_eq!(id, 0x4242),
        e => panic!("expected UnknownEngine, got {e:?}"),
    }
}

#[test]
fn checksum_mismatch() {
    let (_d, p) = make_pool();
    for copy in 0..2 {
        let mut sb = read_sb(&p, copy);
        sb.uuid[3] ^= 0x10; // not resealed
        write_at(&p, copy * SUPERBLOCK_SIZE, bytemuck::bytes_of(&sb));
    }
    match open_fails(&p) {
        Error::Corrupt(msg) => assert!(msg.contains("checksum"), "{msg}"),
        e => panic!("expected Corrupt (checksum), got {e:?}"),
    }
}

#[test]
fn size_in_superblock_differs_from_file_size() {
    let (_d, p) = make_pool();
    rewrite_both(&p, |sb| sb.pool_size = SIZE * 2);
    match open_fails(&p) {
        Error::SizeMismatch(m) => {
            assert_eq!(m.expected, SIZE * 2);
            assert_eq!(m.actual, SIZE);
        }
        e => panic!("expected SizeMismatch, got {e:?}"),
    }
}

#[test]
fn root_offset_out_of_range() {
    let (_d, p) = make_pool();
    rewrite_both(&p, |sb| sb.root_slot_offset = SIZE + 64);
    match open_fails(&p) {
        Error::Corrupt(msg) => assert!(msg.contains("root slot offset"), "{msg}"),
        e => panic!("expected Corrupt (root slot), got {e:?}"),
    }
}

#[test]
fn geometry_that_does_not_fit_the_file() {
    let (_d, p) = make_pool();
    rewrite_both(&p, |sb| sb.max_threads = 1000);
    match open_fails(&p) {
        Error::Corrupt(msg) => assert!(msg.contains("geometry"), "{msg}"),
        e => panic!("expected Corrupt (geometry), got {e:?}"),
    }
}

#[test]
fn read_only_file() {
    let (_d, p) = make_pool();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o444)).unwrap();
    // The library refuses by the permission bits, so this holds when run as root too.
    assert!(matches!(open_fails(&p), Error::ReadOnly(_)));
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
    assert_eq!(root_value(&Pool::open(&p, cfg()).unwrap()), 41);
}

#[test]
fn creating_over_an_existing_file() {
    let (_d, p) = make_pool();
    let before = fingerprint(&p);
    assert!(matches!(
        Pool::create(&p, cfg()),
        Err(Error::AlreadyExists(ref q)) if **q == p
    ));
    assert_eq!(fingerprint(&p), before);
    // Also an unrelated file, which must survive.
    let other = p.with_file_name("notes.txt");
    std::fs::write(&other, b"keep me").unwrap();
    assert!(matches!(
        Pool::create(&other, cfg()),
        Err(Error::AlreadyExists(_))
    ));
    assert_eq!(std::fs::read(&other).unwrap(), b"keep me");
}

/// Which copy is current: the valid one with the higher sequence number.
fn current_copy(p: &Path) -> usize {
    let (a, b) = (read_sb(p, 0), read_sb(p, 1));
    if b.seq > a.seq {
        1
    } else {
        0
    }
}

#[test]
fn torn_superblock_update_falls_back_to_the_other_copy() {
    let (_d, p) = make_pool();
    // Open once more: the open and the clean close each write a copy.
    drop(Pool::open(&p, cfg()).unwrap());
    let cur = current_copy(&p);
    let (newer, older) = (read_sb(&p, cur), read_sb(&p, 1 - cur));
    assert!(newer.seq > older.seq);
    assert_eq!(newer.closed_cleanly(), Some(true));

    // A crash while the newer copy was being written: the words from the checksum on
    // still hold the old bytes — x86 makes only 8-byte stores failure-atomic — so its
    // checksum fails.
    let cut = std::mem::offset_of!(Superblock, checksum);
    let mut torn = bytemuck::bytes_of(&newer).to_vec();
    torn[cut..].copy_from_slice(&bytemuck::bytes_of(&older)[cut..]);
    assert_ne!(torn, bytemuck::bytes_of(&older));
    write_at(&p, cur * SUPERBLOCK_SIZE, &torn);
    let pool = Pool::open(&p, cfg()).expect("falls back to the intact copy");
    let sb = pool.superblock().unwrap();
    assert_eq!(sb.uuid, older.uuid);
    assert_eq!(
        sb.run_generation,
        older.run_generation + 1,
        "the new generation follows the copy that was used"
    );
    assert_eq!(root_value(&pool), 41);
    drop(pool);

    // The open rewrote the torn copy: both copies are valid again.
    for copy in 0..2 {
        let sb = read_sb(&p, copy);
        assert_eq!(sb.checksum, format_checksum(&sb), "copy {copy}");
    }

    // The other way round: the older copy damaged, the newer one is used.
    drop(Pool::open(&p, cfg()).unwrap());
    let cur = current_copy(&p);
    let newer = read_sb(&p, cur);
    write_at(&p, (1 - cur) * SUPERBLOCK_SIZE + 40, &[0xee; 8]);
    let pool = Pool::open(&p, cfg()).unwrap();
    assert_eq!(
        pool.superblock().unwrap().run_generation,
        newer.run_generation + 1
    );
    assert_eq!(root_value(&pool), 41);
}

/// A build without libpmemobj still builds; a pmdk pool then says what is missing.
#[cfg(not(pmdk))]
#[test]
fn pmdk_engine_missing_from_the_build_is_a_clear_error() {
    let dir = tempfile::tempdir_in("/dev/shm").unwrap();
    let cfg = Config::default().engine(pisces::EngineId::Pmdk);
    match Pool::create(dir.path().join("p.pool"), cfg) {
        Err(Error::InvalidConfig(m)) => assert!(m.contains("libpmemobj-dev"), "{m}"),
        other => panic!("expected InvalidConfig, got {other:?}"),
    }
}

/// A root slot lost to damage (the engine area's first page zeroed, or a bit flipped
/// in the slot) is an error at open and a problem in `check`, on every durable engine
/// of this format; never a fresh empty root over unreachable objects.
#[test]
fn a_damaged_root_slot_is_refused_not_replaced() {
    use pisces::tools::check::check_pool_deep;
    use pisces::tools::layout::ENGINE_AREA_OFFSET;
    use pisces::{EngineId, MediumKind};
    let d = tempfile::tempdir_in("/dev/shm").unwrap();
    for &engine in EngineId::ALL
        .iter()
        .filter(|e| e.available() && e.is_durable() && !e.has_own_pool_format())
    {
        let p = d.path().join(format!("{engine}.pool"));
        let cfg = cfg().engine(engine);
        {
            let pool = Pool::create(&p, cfg.clone()).unwrap();
            let root: PPtr<[u64; 4]> = pool.root().unwrap();
            pool.run(|tx| {
                let n = tx.alloc(7u64)?;
                tx.write(root)?[0] = n.offset();
                Ok(())
            })
            .unwrap();
            // Home holds the root slot (timestone's close leaves its window, the
            // root's creation included, in the operation log: a flip of a home word
            // that recovery rewrites anyway would damage nothing).
            pool.write_back().unwrap();
        }
        let good = std::fs::read(&p).unwrap();
        for (what, damage) in [
            ("zeroed page", (ENGINE_AREA_OFFSET, None)),
            (
                "bit flip",
                (pisces::tools::ROOT_SLOT_OFFSET + 8, Some(0x10u8)),
            ),
        ] {
            let mut bytes = good.clone();
            match damage {
                (at, None) => bytes[at..at + 4096].fill(0),
                (at, Some(bit)) => bytes[at] ^= bit,
            }
            std::fs::write(&p, &bytes).unwrap();
            // The root slot, or (timestone) the engine-area word in front of it.
            let report = check_pool_deep(&p, MediumKind::DRAM).unwrap();
            assert!(
                report
                    .problems
                    .iter()
                    .any(|q| q.contains("root") || q.contains("engine area")),
                "{engine}, {what}: check found no root problem: {report}"
            );
            match Pool::open(&p, cfg.clone()) {
                Err(Error::Corrupt(m)) => assert!(
                    m.contains("root") || m.contains("engine area"),
                    "{engine}, {what}: {m}"
                ),
                Err(e) => panic!("{engine}, {what}: expected Corrupt, got {e}"),
                Ok(_) => panic!("{engine}, {what}: a damaged root slot was accepted"),
            }
        }
        // The undamaged pool still opens, with its root.
        std::fs::write(&p, &good).unwrap();
        let pool = Pool::open(&p, cfg).unwrap();
        let root: PPtr<[u64; 4]> = pool.root().unwrap();
        assert_ne!(pool.run(|tx| Ok(tx.read(root)?[0])).unwrap(), 0, "{engine}");
    }
}

/// A pool of format version 3 (no root record) opens, and the open records its root.
#[test]
fn a_format_3_pool_opens_and_gets_its_root_recorded() {
    let (_d, p) = make_pool();
    rewrite_both(&p, |sb| {
        sb.format_version = 3;
        sb.root_offset = 0;
        sb.root_tag = 0;
    });
    let pool = Pool::open(&p, cfg()).unwrap();
    assert_eq!(root_value(&pool), 41);
    let sb = pool.superblock().unwrap();
    assert_eq!(sb.format_version, FORMAT_VERSION);
    let root: PPtr<u64> = pool.root().unwrap();
    assert_eq!(sb.root_record().map(|r| r.0), Some(root.offset()));
}

/// Objects allocated in a pool without a root object cannot be reached from the pool
/// (what a lost root slot of a format-3 pool looks like too): `check` reports a
/// problem, not a warning beside an OK verdict.
#[test]
fn objects_without_a_root_are_a_check_problem() {
    let d = tempfile::tempdir_in("/dev/shm").unwrap();
    let p = d.path().join("pool");
    {
        let pool = Pool::create(&p, cfg()).unwrap();
        pool.run(|tx| tx.alloc(5u64).map(|_| ())).unwrap();
    }
    let r = pisces::tools::check::check_pool(&p, pisces::MediumKind::DRAM).unwrap();
    assert!(!r.is_ok(), "{r}");
    assert!(
        r.problems
            .iter()
            .any(|q| q.contains("1 object is allocated but the root slot is empty")),
        "{r}"
    );
}
