//! The report directory: `--out`, or a fresh `target/bench/<UTC time>` in the
//! workspace the binary was built in.

use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

/// Year, month, day, hour, minute, second in UTC for `secs` since the epoch.
fn utc_civil(secs: u64) -> (i64, i64, i64, u64, u64, u64) {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d, rem / 3600, rem / 60 % 60, rem % 60)
}

/// `YYYYMMDD-HHMMSS` in UTC for `secs` since the epoch.
fn utc_stamp(secs: u64) -> String {
    let (y, m, d, hh, mm, ss) = utc_civil(secs);
    format!("{y:04}{m:02}{d:02}-{hh:02}{mm:02}{ss:02}")
}

/// `YYYY-MM-DD HH:MM:SS UTC` for `secs` since the epoch.
pub fn utc_datetime(secs: u64) -> String {
    let (y, m, d, hh, mm, ss) = utc_civil(secs);
    format!("{y:04}-{m:02}-{d:02} {hh:02}:{mm:02}:{ss:02} UTC")
}

/// The default report directory: `<target>/bench/<UTC timestamp>` where `<target>` is
/// the cargo target directory the binary was built in (so `cargo run` reports land in
/// the workspace's `target/`), else `./pisces-bench/<timestamp>`.
fn default_out_dir() -> PathBuf {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let base = std::env::current_exe()
        .ok()
        .and_then(|exe| {
            exe.ancestors()
                .find(|p| p.file_name().is_some_and(|n| n == "target"))
                .map(|t| t.join("bench"))
        })
        .unwrap_or_else(|| PathBuf::from("pisces-bench"));
    base.join(utc_stamp(secs))
}

/// Create the report directory (a fresh one when defaulted).
pub fn make_out_dir(given: Option<&Path>) -> Result<PathBuf, String> {
    let dir = match given {
        Some(d) => {
            std::fs::create_dir_all(d)
                .map_err(|e| format!("cannot create the report directory {}: {e}", d.display()))?;
            d.to_path_buf()
        }
        None => {
            let base = default_out_dir();
            let parent = base.parent().map(Path::to_path_buf).unwrap_or_default();
            std::fs::create_dir_all(&parent).map_err(|e| {
                format!(
                    "cannot create the report directory {}: {e}",
                    parent.display()
                )
            })?;
            let mut n = 1;
            loop {
                let d = if n == 1 {
                    base.clone()
                } else {
                    PathBuf::from(format!("{}-{n}", base.display()))
                };
                match std::fs::create_dir(&d) {
                    Ok(()) => break d,
                    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && n < 100 => n += 1,
                    Err(e) => {
                        return Err(format!(
                            "cannot create the report directory {}: {e}",
                            d.display()
                        ))
                    }
                }
            }
        }
    };
    Ok(std::fs::canonicalize(&dir).unwrap_or(dir))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_stamps() {
        assert_eq!(utc_stamp(0), "19700101-000000");
        assert_eq!(utc_stamp(951_782_400), "20000229-000000");
        assert_eq!(utc_stamp(1_767_225_599), "20251231-235959");
        assert_eq!(utc_stamp(1_778_592_896), "20260512-133456");
        assert_eq!(utc_datetime(1_778_592_896), "2026-05-12 13:34:56 UTC");
    }

    #[test]
    fn default_report_directories_are_fresh() {
        let d = tempfile::tempdir().unwrap();
        let given = d.path().join("a/b");
        assert_eq!(
            make_out_dir(Some(&given)).unwrap(),
            std::fs::canonicalize(&given).unwrap()
        );
        // An existing directory is fine when given explicitly.
        assert!(make_out_dir(Some(&given)).is_ok());
        let file = d.path().join("f");
        std::fs::write(&file, b"x").unwrap();
        assert!(make_out_dir(Some(&file.join("sub")))
            .unwrap_err()
            .contains("cannot create"));
        assert!(default_out_dir().to_string_lossy().contains("bench"));
    }
}
