//! Decides whether the `pmdk` engine is built: with the `pmdk` feature (off by default;
//! the workspace's tools ask for it) and libpmemobj present, it sets `cfg(pmdk)` and
//! the engine links libpmemobj; where the feature was asked for and the library is
//! missing, the build still succeeds, says so in a warning, and the engine refuses to
//! start with a message naming the package to install. `PISCES_NO_PMDK=1` leaves the
//! engine out even where the library is installed, silently: it is asked for.
//! A build without the feature prints nothing.

use std::path::Path;
use std::process::Command;

/// Where Debian and most distributions put the linkable library.
const LIB_DIRS: [&str; 5] = [
    "/usr/lib/x86_64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu",
    "/usr/lib64",
    "/usr/lib",
    "/usr/local/lib",
];

fn libpmemobj_found() -> bool {
    let by_pkg_config = Command::new("pkg-config")
        .args(["--exists", "libpmemobj"])
        .status()
        .is_ok_and(|s| s.success());
    by_pkg_config
        || LIB_DIRS
            .iter()
            .any(|d| Path::new(d).join("libpmemobj.so").exists())
}

fn main() {
    println!("cargo::rustc-check-cfg=cfg(pmdk)");
    println!("cargo::rerun-if-changed=build.rs");
    // Removing or updating the library must re-run this script. (A path that does
    // not exist would re-run it on every build, so absent ones are not listed.)
    for d in LIB_DIRS {
        let lib = Path::new(d).join("libpmemobj.so");
        if lib.exists() {
            println!("cargo::rerun-if-changed={}", lib.display());
        }
    }
    println!("cargo::rerun-if-env-changed=PISCES_NO_PMDK");
    if std::env::var_os("CARGO_FEATURE_PMDK").is_none() {
        return;
    }
    // `PISCES_NO_PMDK=1` builds as a machine without libpmemobj would (CI runs the
    // tests that way too, so a fresh machine's build is checked where the library is
    // installed).
    if std::env::var_os("PISCES_NO_PMDK").is_some_and(|v| !v.is_empty() && v != "0") {
        return;
    }
    if libpmemobj_found() {
        println!("cargo::rustc-cfg=pmdk");
    } else {
        println!(
            "cargo::warning=libpmemobj not found: the pmdk engine is left out of this \
             build (install Debian's libpmemobj-dev, then `cargo clean -p pisces` and rebuild)"
        );
    }
}
