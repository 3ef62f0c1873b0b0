//! The `pisces` binary, run as a user would: exit codes, stdout, stderr.

use pisces::tools::layout::SUPERBLOCK_SIZE;
use pisces::{Config, PPtr, Pool};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

/// Run the binary; every run must exit normally, without a panic message.
fn pisces(args: &[&str]) -> Run {
    let o: Output = Command::new(env!("CARGO_BIN_EXE_pisces"))
        .args(args)
        .output()
        .expect("the binary runs");
    let r = Run {
        code: o.status.code().expect("exited, not killed by a signal"),
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
    };
    assert!(
        !r.stderr.contains("panicked") && !r.stdout.contains("panicked"),
        "pisces {args:?} panicked:\n{}",
        r.stderr
    );
    r
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Create a small pool with the tool itself.
fn create_small(dir: &Path, name: &str) -> PathBuf {
    let p = dir.join(name);
    let r = pisces(&[
        "create",
        s(&p),
        "--size",
        "8M",
        "--threads",
        "2",
        "--log-bytes",
        "64K",
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    p
}

fn flip_byte(p: &Path, off: usize) {
    let mut b = std::fs::read(p).unwrap();
    b[off] ^= 0x5a;
    std::fs::write(p, b).unwrap();
}

#[test]
fn create_info_check() {
    let d = tempfile::tempdir().unwrap();
    let p = create_small(d.path(), "a.pool");
    assert_eq!(std::fs::metadata(&p).unwrap().len(), 8 << 20);

    let r = pisces(&["info", s(&p)]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    for want in [
        "magic          ok",
        "format version 7",
        "engine         pisces (id 1)",
        "pool size      8388608 bytes",
        "run generation 1",
        "last close     clean",
        "unclean opens  0",
        "persistence domain adr on dax",
        "thread slots   2 (a redo log of 64.0 KiB each)",
        "free slabs     125",
        "watermark",
        "live records   0 (per slot: 0 0)",
        "problems: none",
    ] {
        assert!(
            r.stdout.contains(want),
            "missing `{want}` in:\n{}",
            r.stdout
        );
    }

    let r = pisces(&["check", s(&p)]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert_eq!(r.stdout.lines().count(), 1, "{}", r.stdout);
    assert!(r.stdout.contains(": OK ("), "{}", r.stdout);
    assert!(r.stderr.is_empty(), "{}", r.stderr);
}

#[test]
fn info_shows_usage_of_a_populated_pool() {
    let d = tempfile::tempdir().unwrap();
    let p = create_small(d.path(), "u.pool");
    let pool = Pool::open(&p, Config::default()).unwrap();
    let root: PPtr<[PPtr<[u64; 10]>; 8]> = pool.root().unwrap();
    pool.run(|tx| {
        for i in 0..8 {
            let n = tx.alloc([i as u64; 10])?;
            tx.write(root)?[i] = n;
        }
        Ok(())
    })
    .unwrap();
    drop(pool);
    let r = pisces(&["info", s(&p)]);
    assert_eq!(r.code, 0, "{}", r.stdout);
    // 8 objects of 88 bytes (96-byte class) and the 64-byte root (80-byte class).
    assert!(
        r.stdout.contains("allocated      9 objects"),
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains("run generation 2"), "{}", r.stdout);
    let line96 = r
        .stdout
        .lines()
        .find(|l| l.trim_start().starts_with("96 "))
        .unwrap_or_else(|| panic!("no 96-byte class line in:\n{}", r.stdout));
    let cols: Vec<&str> = line96.split_whitespace().collect();
    assert_eq!(cols[..3], ["96", "1", "8"], "{line96}");
    assert!(pisces(&["check", s(&p)]).code == 0);
}

#[test]
fn both_superblock_copies_corrupt_is_reported_with_exit_1() {
    let d = tempfile::tempdir().unwrap();
    let p = create_small(d.path(), "c.pool");
    flip_byte(&p, 20); // in copy A's uuid
    flip_byte(&p, SUPERBLOCK_SIZE + 20); // in copy B's uuid
    let before = std::fs::read(&p).unwrap();
    let r = pisces(&["check", s(&p)]);
    assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("problems: 3"), "{}", r.stdout);
    assert!(r.stdout.contains("no usable superblock"), "{}", r.stdout);
    assert!(
        r.stdout.contains("superblock copy A: checksum mismatch")
            && r.stdout.contains("superblock copy B: checksum mismatch"),
        "{}",
        r.stdout
    );
    assert!(r.stderr.contains("is not consistent"), "{}", r.stderr);
    assert!(
        std::fs::read(&p).unwrap() == before,
        "check wrote to the file"
    );
    // info says the same, with exit 1 too.
    let r = pisces(&["info", s(&p)]);
    assert_eq!(r.code, 1);
    assert!(r.stdout.contains("checksum mismatch"), "{}", r.stdout);
}

#[test]
fn one_torn_superblock_copy_is_a_warning() {
    let d = tempfile::tempdir().unwrap();
    let p = create_small(d.path(), "t.pool");
    flip_byte(&p, SUPERBLOCK_SIZE + 40);
    let r = pisces(&["check", s(&p)]);
    assert_eq!(r.code, 0, "{}", r.stdout);
    assert!(r.stdout.contains(": OK ("), "{}", r.stdout);
    assert!(
        r.stdout.contains("warning: superblock copy B is unusable"),
        "{}",
        r.stdout
    );
}

#[test]
fn truncated_pool_and_broken_slab_table_are_reported() {
    let d = tempfile::tempdir().unwrap();
    let p = create_small(d.path(), "t.pool");
    let f = std::fs::OpenOptions::new().write(true).open(&p).unwrap();
    f.set_len((8 << 20) - 3 * 4096).unwrap();
    drop(f);
    let r = pisces(&["check", s(&p)]);
    assert_eq!(r.code, 1, "{}", r.stdout);
    assert!(r.stdout.contains("truncated"), "{}", r.stdout);

    let p = create_small(d.path(), "s.pool");
    let l =
        pisces::tools::layout::Layout::compute(8 << 20, 2, 64 << 10, Default::default()).unwrap();
    let mut b = std::fs::read(&p).unwrap();
    let off = l.slab_table_offset + 4 * 7;
    b[off..off + 4].copy_from_slice(&0x3000_0002u32.to_ne_bytes());
    std::fs::write(&p, b).unwrap();
    let r = pisces(&["check", s(&p)]);
    assert_eq!(r.code, 1, "{}", r.stdout);
    assert!(r.stdout.contains("allocator: slab 7"), "{}", r.stdout);
}

#[test]
fn missing_file_directory_and_open_pool_exit_2() {
    let d = tempfile::tempdir().unwrap();
    let missing = d.path().join("missing.pool");
    for cmd in ["check", "info"] {
        let r = pisces(&[cmd, s(&missing)]);
        assert_eq!(r.code, 2, "{cmd}");
        assert!(r.stderr.contains("does not exist"), "{}", r.stderr);
        assert!(r.stdout.is_empty(), "{}", r.stdout);
        let r = pisces(&[cmd, s(d.path())]);
        assert_eq!(r.code, 2, "{cmd}");
        assert!(r.stderr.contains("is a directory"), "{}", r.stderr);
    }
    assert!(!missing.exists());

    let p = create_small(d.path(), "o.pool");
    let pool = Pool::open(&p, Config::default()).unwrap();
    let r = pisces(&["check", s(&p)]);
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("already open"), "{}", r.stderr);
    drop(pool);
    // The lock belongs to the open file description. A child that another test of this
    // binary is spawning at this moment holds a copy of every descriptor until its
    // exec closes them (close-on-exec), so the lock can outlive `drop` for that long.
    let mut r = pisces(&["check", s(&p)]);
    for _ in 0..50 {
        if !(r.code == 2 && r.stderr.contains("already open")) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
        r = pisces(&["check", s(&p)]);
    }
    assert_eq!(r.code, 0, "{}", r.stderr);
}

#[test]
fn create_errors_exit_2_with_a_message() {
    let d = tempfile::tempdir().unwrap();
    let p = create_small(d.path(), "e.pool");
    let before = std::fs::read(&p).unwrap();
    let r = pisces(&["create", s(&p)]);
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("already exists"), "{}", r.stderr);
    assert!(std::fs::read(&p).unwrap() == before);

    let q = d.path().join("q.pool");
    for (args, want) in [
        (vec!["--size", "12Q"], "unknown size suffix"),
        (vec!["--size", "100K"], "below the minimum"),
        (vec!["--size", "8M", "--threads", "0"], "max_threads"),
        (
            vec!["--size", "8M", "--log-bytes", "1000"],
            "log_bytes_per_thread",
        ),
        (vec!["--engine", "nosuch"], "unknown engine"),
        (vec!["--medium", "tape"], "invalid value"),
    ] {
        let mut a = vec!["create", s(&q)];
        a.extend(args.iter().copied());
        let r = pisces(&a);
        assert_eq!(r.code, 2, "{a:?}");
        assert!(r.stderr.contains(want), "{a:?}: {}", r.stderr);
        assert!(!q.exists(), "{a:?} left a file behind");
    }
    let r = pisces(&["frobnicate"]);
    assert_eq!(r.code, 2);
    // The benchmark is its own binary: neither a subcommand nor the default here.
    for args in [&["bench"][..], &["--seconds", "1"][..]] {
        let r = pisces(args);
        assert_eq!(r.code, 2, "{args:?}: {}{}", r.stdout, r.stderr);
    }
    // No subcommand: the help (on stderr, as a usage error), naming the benchmark binary.
    let r = pisces(&[]);
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("Usage: pisces"), "{}", r.stderr);
    assert!(r.stderr.contains("pisces-bench"), "{}", r.stderr);
    let r = pisces(&["--help"]);
    assert_eq!(r.code, 0);
    for sub in ["create", "check", "smoke", "crashtest", "sicheck"] {
        assert!(r.stdout.contains(sub), "no `{sub}` in:\n{}", r.stdout);
    }
}

#[test]
fn smoke_runs_and_cleans_up() {
    let r = pisces(&["smoke", "--seconds", "0.2"]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    for want in [
        "committed tx/s",
        "total ok: yes",
        "no emulated NVM latency",
        "The engine comparison is `pisces-bench`",
        ": OK (",
    ] {
        assert!(
            r.stdout.contains(want),
            "missing `{want}` in:\n{}",
            r.stdout
        );
    }
    // One table row per thread count, with a positive rate and clean audits.
    for threads in ["1", "2"] {
        let row = r
            .stdout
            .lines()
            .find(|l| l.split_whitespace().next() == Some(threads))
            .unwrap_or_else(|| panic!("no row for {threads} threads:\n{}", r.stdout));
        let cols: Vec<&str> = row.split_whitespace().collect();
        assert!(cols[1].parse::<f64>().unwrap() > 0.0, "{row}");
        assert_eq!(cols[5], "ok", "{row}");
    }
    let removed = r
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("pool file removed: "))
        .expect("the job names the pool it removed");
    assert!(!Path::new(removed).exists(), "{removed} still exists");
    assert_eq!(pisces(&["smoke", "--seconds", "0"]).code, 2);
}

#[test]
fn check_deep_finds_a_looping_hash_chain() {
    use pisces::HashMap;
    let d = tempfile::tempdir().unwrap();
    let p = create_small(d.path(), "deep.pool");
    let cfg = Config::default()
        .size(8 << 20)
        .max_threads(2)
        .log_bytes_per_thread(64 << 10);
    {
        let pool = Pool::open(&p, cfg.clone()).unwrap();
        let root: PPtr<HashMap<u64, u64>> = pool.root().unwrap();
        let m = pool
            .run(|tx| {
                let m = HashMap::fixed(tx, 1)?;
                for k in 0..4 {
                    m.insert(tx, k, k)?;
                }
                *tx.write(root)? = m;
                Ok(m)
            })
            .unwrap();
        let r = pisces(&["check", "--deep", s(&p)]);
        assert_eq!(r.code, 2, "the pool is open: refused");
        let mut objs = Vec::new();
        pool.run(|tx| {
            objs.clear();
            m.for_each_object(tx, |o| objs.push(o))
        })
        .unwrap();
        // The last node of the (single) chain links back to the first. The objects:
        // the header, the chunk, the four nodes, then the element count's.
        let (first, last) = (objs[2], objs[5]);
        pool.run(|tx| tx.write(PPtr::<u64>::from_offset(last)).map(|w| *w = first))
            .unwrap();
    }
    let plain = pisces(&["check", s(&p)]);
    assert_eq!(plain.code, 0, "{}", plain.stdout);
    let r = pisces(&["check", "--deep", s(&p)]);
    assert_eq!(r.code, 1, "{}", r.stdout);
    assert!(
        r.stdout.contains("hash map") && r.stdout.contains("reached twice"),
        "{}",
        r.stdout
    );
}

/// `check --deep` on a B+-tree whose header records no key order (as trees made by
/// older builds have it) cannot verify key order: it says "not checked" and exits 3,
/// with keys in order or not; never OK with exit 0.
#[test]
fn check_deep_of_a_tree_without_key_order_is_not_checked() {
    use pisces::BTreeMap;
    let d = tempfile::tempdir().unwrap();
    let p = create_small(d.path(), "oldtree.pool");
    let cfg = Config::default()
        .size(8 << 20)
        .max_threads(2)
        .log_bytes_per_thread(64 << 10);
    {
        let pool = Pool::open(&p, cfg).unwrap();
        let root: PPtr<BTreeMap<u64, u64>> = pool.root().unwrap();
        pool.run(|tx| {
            let t = BTreeMap::new(tx)?;
            for k in 0..40 {
                t.insert(tx, k, k)?;
            }
            *tx.write(root)? = t;
            Ok(())
        })
        .unwrap();
        let ok = pisces(&["check", "--deep", s(&p)]);
        assert_eq!(ok.code, 2, "open: refused");
        let t = pool.run(|tx| Ok(*tx.read(root)?)).unwrap();
        pool.run(|tx| {
            tx.write(PPtr::<[u64; 5]>::from_offset(t.offset()))?[4] = 0;
            Ok(())
        })
        .unwrap();
    }
    let plain = pisces(&["check", s(&p)]);
    assert_eq!(plain.code, 0, "{}{}", plain.stdout, plain.stderr);
    let r = pisces(&["check", "--deep", s(&p)]);
    assert_eq!(r.code, 3, "{}{}", r.stdout, r.stderr);
    assert!(
        r.stdout.contains(": not checked:") && !r.stdout.contains(": OK"),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout.contains("not checked: root word 0: B+-tree") && r.stdout.contains("key order"),
        "{}",
        r.stdout
    );
    assert!(
        r.stderr.contains("could not be checked completely"),
        "{}",
        r.stderr
    );
    let help = pisces(&["--help"]);
    assert!(help.stdout.contains("3 not checked"), "{}", help.stdout);
}

/// A format-3 pool (no root record in the superblock) whose root slot was zeroed
/// while objects are allocated: `check` fails (exit 1) — nothing leads to them.
#[test]
fn check_fails_on_an_empty_root_slot_beside_objects() {
    use pisces::tools::superblock::Superblock;
    let d = tempfile::tempdir().unwrap();
    let p = create_small(d.path(), "noroot.pool");
    let cfg = Config::default()
        .size(8 << 20)
        .max_threads(2)
        .log_bytes_per_thread(64 << 10);
    {
        let pool = Pool::open(&p, cfg).unwrap();
        let root: PPtr<[PPtr<u64>; 4]> = pool.root().unwrap();
        pool.run(|tx| {
            for i in 0..4 {
                let n = tx.alloc(i as u64)?;
                tx.write(root)?[i] = n;
            }
            Ok(())
        })
        .unwrap();
    }
    let mut bytes = std::fs::read(&p).unwrap();
    let len = std::mem::size_of::<Superblock>();
    for copy in 0..2 {
        let at = copy * SUPERBLOCK_SIZE;
        let sb: Superblock = bytemuck::pod_read_unaligned(&bytes[at..at + len]);
        let old = Superblock {
            format_version: 3,
            root_offset: 0,
            root_tag: 0,
            open_state: 0,
            unclean_opens: 0,
            dirty_shutdowns_seen: 0,
            ..sb
        }
        .seal();
        bytes[at..at + len].copy_from_slice(bytemuck::bytes_of(&old));
    }
    std::fs::write(&p, &bytes).unwrap();
    let r = pisces(&["check", s(&p)]);
    assert_eq!(r.code, 0, "undamaged: {}{}", r.stdout, r.stderr);
    // The root slot's payload (offset and size words): 8 bytes past the slot's header.
    let slot = pisces::tools::ROOT_SLOT_OFFSET + 8;
    bytes[slot..slot + 16].fill(0);
    std::fs::write(&p, &bytes).unwrap();
    let r = pisces(&["check", s(&p)]);
    assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
    assert!(
        r.stdout
            .contains("5 objects are allocated but the root slot is empty"),
        "{}",
        r.stdout
    );
}

#[test]
fn create_and_info_say_which_medium_a_path_gets_and_what_a_commit_survives() {
    let shm = tempfile::tempdir_in("/dev/shm").unwrap();
    let p = shm.path().join("m.pool");
    let r = pisces(&[
        "create",
        s(&p),
        "--size",
        "8M",
        "--threads",
        "2",
        "--log-bytes",
        "64K",
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("medium dram"), "{}", r.stdout);
    assert!(
        r.stdout
            .contains("survives process crashes, not power loss or reboot"),
        "{}",
        r.stdout
    );
    let r = pisces(&["info", s(&p)]);
    assert!(
        r.stdout.contains("medium dram when none is named"),
        "{}",
        r.stdout
    );

    // On a file system that outlives power loss: the file medium, unless the DRAM
    // medium is forced, which needs the opt-in and warns.
    let disk = tempfile::tempdir_in(std::env::temp_dir()).unwrap();
    let on_disk = !pisces::medium::FileSystem::of_path(disk.path())
        .unwrap()
        .is_volatile();
    if !on_disk {
        eprintln!("the temporary directory is on tmpfs: skipping the disk half");
        return;
    }
    let q = disk.path().join("d.pool");
    let small = ["--size", "8M", "--threads", "2", "--log-bytes", "64K"];
    let r = pisces(&[&["create", s(&q)][..], &small].concat());
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("medium file"), "{}", r.stdout);
    assert!(
        r.stdout.contains("survives process crashes and power loss"),
        "{}",
        r.stdout
    );
    let r = pisces(&["info", s(&q)]);
    assert!(
        r.stdout.contains("medium file when none is named"),
        "{}",
        r.stdout
    );
    let v = disk.path().join("v.pool");
    let r = pisces(&[&["create", s(&v), "--medium", "dram"][..], &small].concat());
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("--allow-volatile"), "{}", r.stderr);
    assert!(!v.exists());
    let r = pisces(
        &[
            &["create", s(&v), "--medium", "dram", "--allow-volatile"][..],
            &small,
        ]
        .concat(),
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stderr.contains("warning: the dram medium on"),
        "{}",
        r.stderr
    );
}

#[test]
fn sicheck_passes_engine_options_and_refuses_unknown_ones() {
    let r = pisces(&[
        "sicheck",
        "--engine",
        "spht",
        "--isolation",
        "serializable",
        "--engine-options",
        "points=on",
        "--txns",
        "500",
    ]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!(
        r.stdout
            .ends_with("transactions: 500, forbidden anomalies: 0, write skew: 0\n"),
        "{}",
        r.stdout
    );
    let r = pisces(&["sicheck", "--engine", "spht", "--engine-options", "bogus=1"]);
    assert_eq!(r.code, 2, "{}{}", r.stdout, r.stderr);
    assert!(
        r.stderr.contains("the spht engine has no option `bogus`"),
        "{}",
        r.stderr
    );
    let r = pisces(&["sicheck", "--engine-options", "points"]);
    assert_eq!(r.code, 2, "{}{}", r.stdout, r.stderr);
    assert!(r.stderr.contains("is not key=value"), "{}", r.stderr);
}

/// `sicheck --processes --kills`: three processes, three of them killed while they run
/// and replaced; the merged history (a killed process's transaction in flight
/// indeterminate) has no forbidden anomaly.
#[test]
fn sicheck_kills_processes_and_checks_the_merged_history() {
    let r = pisces(&[
        "sicheck",
        "--processes",
        "3",
        "--threads",
        "2",
        "--txns",
        "60000",
        "--keys",
        "8",
        "--kills",
        "3",
    ]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!(
        r.stdout.contains("3 processes killed and replaced"),
        "{}",
        r.stdout
    );
    let last = r.stdout.lines().last().unwrap();
    assert!(last.contains("forbidden anomalies: 0,"), "{}", r.stdout);
    let r = pisces(&["sicheck", "--kills", "3"]);
    assert_eq!(r.code, 2, "{}{}", r.stdout, r.stderr);
    assert!(r.stderr.contains("--processes 2 or more"), "{}", r.stderr);
}

/// `sicheck --processes`: the workload in two processes of two threads on one shared
/// pool, their histories checked as one; engines that cannot share are refused.
#[test]
fn sicheck_runs_processes_on_one_pool() {
    let r = pisces(&[
        "sicheck",
        "--processes",
        "2",
        "--threads",
        "2",
        "--txns",
        "400",
        "--keys",
        "4",
    ]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!(
        r.stdout.contains("on 2 processes of 2 threads")
            && r.stdout.contains("2 processes recorded"),
        "{}",
        r.stdout
    );
    // The 400 transactions and the read of every key after the processes.
    let last = r.stdout.lines().last().unwrap();
    assert!(
        last.starts_with("transactions: 40") && last.contains("forbidden anomalies: 0,"),
        "{}",
        r.stdout
    );
    // Shares of one and two transactions.
    let r = pisces(&[
        "sicheck",
        "--processes",
        "3",
        "--threads",
        "1",
        "--txns",
        "4",
    ]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let r = pisces(&["sicheck", "--processes", "3", "--txns", "2"]);
    assert_eq!(r.code, 2, "{}{}", r.stdout, r.stderr);
    let r = pisces(&["sicheck", "--processes", "2", "--engine", "mvcc"]);
    assert_eq!(r.code, 2, "{}{}", r.stdout, r.stderr);
    assert!(r.stderr.contains("several processes"), "{}", r.stderr);
}

/// The processes depend on each other in the checked history: with one thread each,
/// every cycle spans both processes, and the write-skew workload shows them (allowed
/// under snapshot isolation, exit 0; forbidden under serializability, exit 1).
#[test]
fn sicheck_sees_write_skew_between_processes() {
    let run = |isolation: &str, seed: u64| {
        pisces(&[
            "sicheck",
            "--processes",
            "2",
            "--threads",
            "1",
            "--write-skew",
            "--keys",
            "2",
            "--pause-us",
            "50",
            "--txns",
            "300",
            "--isolation",
            isolation,
            "--seed",
            &seed.to_string(),
        ])
    };
    let r = run("si", 0);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let found = (0..5).any(|seed| {
        let r = run("serializable", seed);
        assert!(r.code == 0 || r.code == 1, "{}{}", r.stdout, r.stderr);
        r.code == 1
    });
    assert!(
        found,
        "serializable must reject write skew between the processes"
    );
}
