//! The `pisces` command-line tool.
fn main() {}
