//! The facts a report states about its run, read when the run starts: the command line,
//! the build commit, the machine and the load. (Formatting them is
//! [`crate::report::markdown`]'s; reading them is here, apart, because they are not a
//! function of anything the run measures.)

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
