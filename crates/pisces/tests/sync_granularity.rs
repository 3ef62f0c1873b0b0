//! A durable write on the file medium costs the device the pages that changed, not the
//! page-cache folios around them.
//!
//! `msync` writes back whole folios, and read-ahead builds large ones on file systems
//! that support them: a pool read sequentially through its mapping, then changed in
//! one word and synced, would write a megabyte for eight bytes. The file medium maps
//! pools without read-ahead (`MADV_RANDOM`). This binary holds one test, so the
//! process's write counter (`write_bytes` of `/proc/self/io`) counts only it.
//!
//! On a kernel or file system without large folios, or where the target directory is
//! on tmpfs (which writes nothing), the test holds with or without the advice.

use pisces::medium::{FileMedium, Medium};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::fd::AsRawFd;

/// The pool file's length: large enough that read-ahead ramps up to large folios.
/// (With read-ahead and the usual 128 KiB window, folios of 64 KiB form here; a
/// longer sequential run, as a bench's preload makes, reaches a megabyte.)
const LEN: usize = 32 << 20;

/// Bytes this process has caused to be written to storage so far (Linux), or `None`
/// where the kernel does not say.
fn write_bytes() -> Option<u64> {
    let io = std::fs::read_to_string("/proc/self/io").ok()?;
    io.lines()
        .find_map(|l| l.strip_prefix("write_bytes: "))
        .and_then(|v| v.trim().parse().ok())
}

#[test]
fn a_one_word_sync_writes_pages_not_folios() {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("sync_granularity");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("pool");
    // A file whose blocks are written and clean, and not in the page cache: the
    // mapping's reads then come from the device, through read-ahead if it is on.
    {
        let mut f = File::create(&path).unwrap();
        let chunk = vec![0xa5u8; 1 << 20];
        for _ in 0..LEN / chunk.len() {
            f.write_all(&chunk).unwrap();
        }
        f.sync_all().unwrap();
        // SAFETY: a plain system call on a descriptor we own; advice only.
        unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    }
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .unwrap();
    let medium = FileMedium::from_file(file, LEN).unwrap();
    assert_eq!(medium.len(), LEN);
    // Read it all, in order, through the mapping.
    let mut sum = 0u64;
    for off in (0..LEN).step_by(512) {
        // SAFETY: `off` is inside the mapping and 8-byte aligned; no thread writes it.
        sum = sum.wrapping_add(unsafe { (medium.base().add(off) as *const u64).read() });
    }
    std::hint::black_box(sum);
    let Some(before) = write_bytes() else {
        eprintln!("no /proc/self/io here: nothing to measure");
        return;
    };
    // One word in the middle, made durable the way a commit makes its log durable.
    let off = LEN / 2 + 4096 + 64;
    // SAFETY: as above; this thread is the only one using the mapping.
    unsafe { (medium.base().add(off) as *mut u64).write(0x0123_4567_89ab_cdef) };
    medium.flush(off, 8);
    medium.fence();
    let written = write_bytes().unwrap() - before;
    assert!(
        written <= 16 << 10,
        "syncing one word wrote {written} bytes: the page cache held it in a large folio"
    );
    drop(medium);
    std::fs::remove_file(&path).unwrap();
}
