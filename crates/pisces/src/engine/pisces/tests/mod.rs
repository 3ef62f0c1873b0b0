//! White-box tests of the Pisces engine (the behavioural, container, crash and
//! isolation suites run it through the public API; the loom model of the commit
//! protocol is in `protocol`):
//! * [`attempts`]: every attempt of a slot's table is held in one place at a time, and
//!   a slot whose attempts are all in its batch waits for them or, nested, refuses to
//!   write; the batch's lock names the slot that holds it;
//! * [`count_window`]: consecutive counting transactions of a thread leave its
//!   group-commit batch alone;
//! * [`deferred`]: group commit's write-back that does not wait keeps readers'
//!   snapshots and holds the watermark;
//! * [`live`]: the live and freed markers in header words, and header words left by
//!   old runs;
//! * [`locked_read`]: the count of reads that met another writer's lock.

mod attempts;
mod count_window;
mod deferred;
mod live;
mod locked_read;
