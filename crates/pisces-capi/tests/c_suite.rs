//! Runs `ci.sh` (the C test suite, the bank example, a 3-kill crash loop) when a C
//! compiler is installed, so `cargo test --workspace` exercises the C side too.
//! Without `cc` the test says so and passes. The C suite must report every engine of
//! the library (`EngineId::ALL`): opened by name from C, or unavailable in this build.

use std::path::{Path, PathBuf};
use std::process::Command;

fn have_cc() -> bool {
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    Command::new(cc)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// The directory of the `libpisces.so` cargo built for this test run: `cargo test`
/// builds the library's cdylib into `deps/`, beside the test binary (without copying
/// it up to `target/<profile>/`, where an older one may lie).
fn own_lib_dir() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let dir = exe.parent()?.to_path_buf();
    dir.join("libpisces.so").exists().then_some(dir)
}

#[test]
fn c_suite_and_crash_loop() {
    if !have_cc() {
        eprintln!("no C compiler (cc): C test suite skipped");
        return;
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("ci.sh");
    let mut cmd = Command::new("bash");
    cmd.arg(&script);
    if let Some(dir) = own_lib_dir() {
        cmd.env("PISCES_LIB_DIR", dir);
    }
    let out = cmd.output().expect("run ci.sh");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("{stdout}");
    eprintln!("{stderr}");
    assert!(
        out.status.success(),
        "ci.sh failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
    assert!(
        stdout.contains("0 failed"),
        "the C suite did not report its results"
    );
    assert!(
        stdout.contains("invariant held"),
        "the crash loop did not finish"
    );
    // Every engine of the library is reachable from C by name: the C suite creates,
    // fills, closes and reopens a pool on each engine this build has (and reports the
    // others as unavailable).
    for e in pisces::EngineId::ALL {
        let want = if e.available() {
            vec!["engine", e.name(), "ok"]
        } else {
            vec!["engine", e.name(), "not", "available"]
        };
        assert!(
            stdout.lines().any(|l| l
                .split_whitespace()
                .take(want.len())
                .eq(want.iter().copied())),
            "the C suite did not report engine {} as {:?}",
            e.name(),
            want
        );
    }
}
