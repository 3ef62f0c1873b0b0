//! The facts a report states about its run, read when the run starts: the command line,
//! the build commit, the machine and the load. (Formatting them is
//! [`crate::report::markdown`]'s; reading them is here, apart, because they are not a
//! function of anything the run measures.)

use std::path::Path;
use std::process::Command;

/// The 1, 5 and 15 minute load averages (other work on the machine skews results).
pub fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|| "unknown".into())
}

/// The command line as a user types it: the program as `pisces-bench`, arguments with
/// spaces or quotes in single quotes.
pub fn command_line() -> String {
    let mut words = vec!["pisces-bench".to_string()];
    for a in std::env::args_os().skip(1) {
        let a = a.to_string_lossy().into_owned();
        if a.is_empty()
            || a.chars()
                .any(|c| c.is_whitespace() || "'\"$`\\|&;<>()*?".contains(c))
        {
            words.push(format!("'{}'", a.replace('\'', "'\\''")));
        } else {
            words.push(a);
        }
    }
    words.join(" ")
}

/// The commit of the source tree this binary was built from, read with `git` at run
/// time in the crate's source directory (a clone has git; a build from a tarball says
/// it does not know). Uncommitted changes to tracked files are said too: the binary may
/// then not be that commit. `cargo run` rebuilds before it runs, so the tree and the
/// binary agree there.
pub fn build_commit() -> String {
    let dir = env!("CARGO_MANIFEST_DIR");
    let git = |args: &[&str]| -> Option<String> {
        let out = Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(args)
            .output()
            .ok()?;
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
    };
    match git(&["rev-parse", "--short=12", "HEAD"]) {
        Some(c) if !c.is_empty() => {
            let dirty = git(&["status", "--porcelain", "--untracked-files=no"])
                .is_some_and(|s| !s.is_empty());
            if dirty {
                format!("commit {c} with uncommitted changes")
            } else {
                format!("commit {c}")
            }
        }
        _ => "unknown (no git repository at the source directory)".into(),
    }
}

/// The first value of `key` in a `key : value` file such as `/proc/cpuinfo`.
fn proc_field(file: &str, key: &str) -> Option<String> {
    let text = std::fs::read_to_string(file).ok()?;
    text.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        (k.trim() == key).then(|| v.trim().to_string())
    })
}

/// CPU model, the CPUs this process may use, memory, operating system and kernel.
pub fn machine() -> String {
    let cpu = proc_field("/proc/cpuinfo", "model name").unwrap_or_else(|| "unknown CPU".into());
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let mem = proc_field("/proc/meminfo", "MemTotal")
        .and_then(|v| v.trim_end_matches("kB").trim().parse::<u64>().ok())
        .map(|kib| format!(", {:.0} GiB", kib as f64 / (1024.0 * 1024.0)))
        .unwrap_or_default();
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|k| format!("Linux {}", k.trim()))
        .unwrap_or_else(|_| std::env::consts::OS.to_string());
    format!("{cpu}, {cores} CPUs available{mem}, {kernel}")
}

/// One line of `/proc/self/mountinfo`: the fields a report names.
#[derive(Debug, PartialEq, Eq)]
struct Mount {
    /// `major:minor` of the device (`st_dev` of the files on it).
    dev: String,
    /// Where it is mounted.
    point: String,
    /// Mount options.
    options: String,
    /// File-system type (`ext4`, `xfs`, `tmpfs`, ...).
    fs_type: String,
    /// The mounted source (`/dev/nvme0n1p2`, or a name such as `tmpfs`).
    source: String,
}

/// `s` with mountinfo's octal escapes (`\040` for a space, ...) decoded.
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let code = (b[i] == b'\\')
            .then(|| std::str::from_utf8(b.get(i + 1..i + 4)?).ok())
            .flatten()
            .and_then(|o| u8::from_str_radix(o, 8).ok());
        match code {
            Some(c) => {
                out.push(c);
                i += 4;
            }
            None => {
                out.push(b[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The mounts of `mountinfo` text (lines it cannot read are left out).
fn mounts(mountinfo: &str) -> Vec<Mount> {
    mountinfo
        .lines()
        .filter_map(|l| {
            let (before, after) = l.split_once(" - ")?;
            let f: Vec<&str> = before.split(' ').collect();
            let a: Vec<&str> = after.split(' ').collect();
            Some(Mount {
                dev: (*f.get(2)?).to_string(),
                point: unescape(f.get(4)?),
                options: (*f.get(5)?).to_string(),
                fs_type: (*a.first()?).to_string(),
                source: unescape(a.get(1)?),
            })
        })
        .collect()
}

/// The mount holding the file `path` on device `dev` (`major:minor`): of the mounts of
/// that device, the one whose mount point is the longest prefix of `path` (a device
/// mounted in several places, bind mounts included, is named where `path` is).
fn mount_of<'a>(all: &'a [Mount], path: &Path, dev: &str) -> Option<&'a Mount> {
    all.iter()
        .filter(|m| m.dev == dev && path.starts_with(&m.point))
        .max_by_key(|m| m.point.len())
}

/// Linux's `major:minor` of a `st_dev` (glibc's `gnu_dev_major` / `gnu_dev_minor`).
fn major_minor(dev: u64) -> String {
    let major = ((dev >> 8) & 0xfff) | ((dev >> 32) & !0xfff);
    let minor = (dev & 0xff) | ((dev >> 12) & !0xff);
    format!("{major}:{minor}")
}

/// The file system and the device `dir` is on, for a report's header: the type, the
/// mounted source and device number, whether the block device says it is rotational,
/// the mount point and its options (from `/proc/self/mountinfo` and `/sys/dev/block`).
pub fn file_system(dir: &Path) -> String {
    use std::os::unix::fs::MetadataExt;
    let path = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    let dev = match std::fs::metadata(&path) {
        Ok(m) => major_minor(m.dev()),
        Err(e) => return format!("unknown ({}: {e})", path.display()),
    };
    let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let all = mounts(&info);
    let Some(m) = mount_of(&all, &path, &dev) else {
        return format!("unknown (device {dev}: not in /proc/self/mountinfo)");
    };
    let sys = Path::new("/sys/dev/block").join(&dev);
    // A partition has no queue of its own: its disk's is one directory up.
    let rotational = [
        sys.join("queue/rotational"),
        sys.join("../queue/rotational"),
    ]
    .iter()
    .find_map(|p| std::fs::read_to_string(p).ok())
    .map(|r| match r.trim() {
        "0" => ", non-rotational",
        "1" => ", rotational",
        _ => "",
    })
    .unwrap_or("");
    format!(
        "{} on {} (device {dev}{rotational}), mounted at {} ({})",
        m.fs_type, m.source, m.point, m.options
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mount_of_a_path_is_its_devices_longest_mount_point() {
        let info = "\
27 1 254:0 / / rw,relatime - ext4 /dev/vda rw,discard
25 24 0:23 / /dev/shm rw,relatime - tmpfs tmpfs rw,size=24731184k
40 27 254:0 /data /srv/my\\040data rw,noatime shared:5 - ext4 /dev/vda rw
41 27 259:2 / /mnt/fast rw - xfs /dev/nvme0n1p2 rw,attr2
bad line
";
        let all = mounts(info);
        assert_eq!(all.len(), 4);
        assert_eq!(all[2].point, "/srv/my data");
        let at = |p: &str, dev: &str| mount_of(&all, Path::new(p), dev).map(|m| &m.point);
        assert_eq!(at("/tmp/x", "254:0").unwrap(), "/");
        assert_eq!(at("/srv/my data/x", "254:0").unwrap(), "/srv/my data");
        assert_eq!(at("/dev/shm/p", "0:23").unwrap(), "/dev/shm");
        let xfs = mount_of(&all, Path::new("/mnt/fast/b"), "259:2").unwrap();
        assert_eq!(
            (xfs.fs_type.as_str(), xfs.source.as_str()),
            ("xfs", "/dev/nvme0n1p2")
        );
        assert!(at("/mnt/fast/b", "254:0").is_some_and(|p| p == "/"));
        assert!(at("/x", "8:1").is_none());
        // glibc's encoding: major 259, minor 2; major 8, minor 300.
        assert_eq!(major_minor((259 << 8) | 2), "259:2");
        assert_eq!(
            major_minor((8 << 8) | (300 & 0xff) | ((300 & !0xff) << 12)),
            "8:300"
        );
    }

    #[test]
    fn the_file_system_of_the_temporary_directory_is_named() {
        let d = tempfile::tempdir().unwrap();
        let fs = file_system(d.path());
        assert!(!fs.starts_with("unknown"), "{fs}");
        let missing = file_system(&d.path().join("missing"));
        assert!(missing.starts_with("unknown"), "{missing}");
    }
}
