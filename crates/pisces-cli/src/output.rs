//! The tool's output: stdout and stderr writes that ignore errors (a closed pipe must
//! not panic the tool).

use std::io::Write;

/// Write to stdout, ignoring errors.
pub(crate) fn out(s: &str) {
    let mut o = std::io::stdout().lock();
    let _ = o.write_all(s.as_bytes());
    let _ = o.flush();
}

/// Write a line to stderr, ignoring errors.
pub(crate) fn err(s: &str) {
    let _ = writeln!(std::io::stderr().lock(), "{s}");
}
