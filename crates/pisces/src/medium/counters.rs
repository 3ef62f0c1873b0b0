//! Per-thread persistence counters.
//!
//! Each thread counts the cache lines it flushed, the fences it issued, the bytes it
//! wrote to logs, the bytes it wrote to home locations, and the allocator metadata it
//! made durable (bitmap words, slab-table entries, the header words and bitmaps of
//! slabs it formatted). The counters are thread-local `Cell`s (no atomics, no sharing
//! on the hot path); a benchmark thread takes a [`snapshot`] before and after its work
//! and reports the difference.
//!
//! Write amplification, one definition for every engine ([`Counters::bytes_durable`]
//! divided by the bytes the program changed): bytes made durable — logs (redo, undo,
//! operation and checkpoint logs), write-back home, allocator metadata.
//!
//! One count is process-wide instead: the `msync` calls of the file medium
//! ([`msync_calls`]), each a durable write to the device. It is counted where the call
//! is made, whichever thread makes it (an engine's background thread too), so a
//! benchmark that runs one pool at a time reads the pool's total as the difference of
//! two readings. Only the file medium counts it: the other media pay nothing for it.

use std::cell::Cell;
use std::ops::Sub;
use std::sync::atomic::{AtomicU64, Ordering};

/// A snapshot of one thread's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(not(feature = "tools"), allow(dead_code))] // read by the tools only
pub struct Counters {
    /// Cache lines flushed.
    pub lines_flushed: u64,
    /// Fences issued.
    pub fences: u64,
    /// Bytes appended to logs.
    pub bytes_logged: u64,
    /// Bytes written to home locations (write-back).
    pub bytes_written_home: u64,
    /// Bytes of allocator metadata flushed (counted by the allocator, for every engine).
    pub bytes_metadata: u64,
}

impl Counters {
    /// Everything made durable: logs, write-back and allocator metadata (the numerator
    /// of write amplification).
    #[cfg_attr(not(feature = "tools"), allow(dead_code))] // read by the tools only
    pub fn bytes_durable(&self) -> u64 {
        self.bytes_logged + self.bytes_written_home + self.bytes_metadata
    }

    /// Add `o` to these counters (threads' counters into one total).
    #[cfg_attr(not(feature = "tools"), allow(dead_code))] // read by the tools only
    pub fn add(&mut self, o: Counters) {
        self.lines_flushed += o.lines_flushed;
        self.fences += o.fences;
        self.bytes_logged += o.bytes_logged;
        self.bytes_written_home += o.bytes_written_home;
        self.bytes_metadata += o.bytes_metadata;
    }
}

impl Sub for Counters {
    type Output = Counters;
    fn sub(self, rhs: Counters) -> Counters {
        Counters {
            lines_flushed: self.lines_flushed.wrapping_sub(rhs.lines_flushed),
            fences: self.fences.wrapping_sub(rhs.fences),
            bytes_logged: self.bytes_logged.wrapping_sub(rhs.bytes_logged),
            bytes_written_home: self.bytes_written_home.wrapping_sub(rhs.bytes_written_home),
            bytes_metadata: self.bytes_metadata.wrapping_sub(rhs.bytes_metadata),
        }
    }
}

thread_local! {
    static LINES: Cell<u64> = const { Cell::new(0) };
    static FENCES: Cell<u64> = const { Cell::new(0) };
    static LOGGED: Cell<u64> = const { Cell::new(0) };
    static HOME: Cell<u64> = const { Cell::new(0) };
    static META: Cell<u64> = const { Cell::new(0) };
}

fn bump(c: &'static std::thread::LocalKey<Cell<u64>>, n: u64) {
    c.with(|c| c.set(c.get().wrapping_add(n)));
}

/// Count `n` flushed cache lines on this thread.
pub fn add_lines_flushed(n: u64) {
    bump(&LINES, n);
}
/// Count one fence on this thread.
pub fn add_fence() {
    bump(&FENCES, 1);
}
/// Count `n` bytes appended to a log on this thread.
pub fn add_bytes_logged(n: u64) {
    bump(&LOGGED, n);
}
/// Count `n` bytes written to home locations on this thread.
pub fn add_bytes_written_home(n: u64) {
    bump(&HOME, n);
}

/// Count `n` bytes of allocator metadata flushed on this thread.
pub fn add_bytes_metadata(n: u64) {
    bump(&META, n);
}

/// `msync` calls made by the file medium in this process, every thread.
static MSYNCS: AtomicU64 = AtomicU64::new(0);

/// Count one `msync` call of the file medium (on any thread).
pub fn add_msync() {
    // Relaxed: a statistic read as a difference of two readings; no other memory is
    // published through it.
    MSYNCS.fetch_add(1, Ordering::Relaxed);
}

/// `msync` calls the file medium made so far in this process, on every thread (fences,
/// flushes made durable at once, `sync_all`).
#[cfg_attr(not(feature = "tools"), allow(dead_code))] // read by the tools only
pub fn msync_calls() -> u64 {
    // Relaxed: see `add_msync`.
    MSYNCS.load(Ordering::Relaxed)
}

/// This thread's counters now.
#[cfg_attr(not(feature = "tools"), allow(dead_code))] // read by the tools only
pub fn snapshot() -> Counters {
    Counters {
        lines_flushed: LINES.with(Cell::get),
        fences: FENCES.with(Cell::get),
        bytes_logged: LOGGED.with(Cell::get),
        bytes_written_home: HOME.with(Cell::get),
        bytes_metadata: META.with(Cell::get),
    }
}

/// Number of cache lines overlapping `off..off + len`.
#[cfg_attr(not(feature = "tools"), allow(dead_code))] // read by the tools only
pub fn lines_in(off: usize, len: usize) -> u64 {
    if len == 0 {
        return 0;
    }
    let first = off / super::CACHE_LINE;
    let last = (off + len - 1) / super::CACHE_LINE;
    (last - first + 1) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snapshots_subtract_per_thread() {
        let before = snapshot();
        add_lines_flushed(3);
        add_fence();
        add_bytes_logged(40);
        add_bytes_written_home(8);
        add_bytes_metadata(4);
        let d = snapshot() - before;
        assert_eq!(
            d,
            Counters {
                lines_flushed: 3,
                fences: 1,
                bytes_logged: 40,
                bytes_written_home: 8,
                bytes_metadata: 4
            }
        );
        assert_eq!(d.bytes_durable(), 52);
        // Another thread's counters are its own.
        let other = std::thread::spawn(snapshot).join().unwrap();
        assert_eq!(other, Counters::default());
    }

    #[test]
    fn msyncs_are_counted_for_the_process() {
        let before = msync_calls();
        std::thread::spawn(add_msync).join().unwrap();
        add_msync();
        // Other tests of this process may count too: at least these two.
        assert!(msync_calls() - before >= 2);
    }

    #[test]
    fn line_count() {
        assert_eq!(lines_in(0, 0), 0);
        assert_eq!(lines_in(0, 1), 1);
        assert_eq!(lines_in(63, 2), 2);
        assert_eq!(lines_in(64, 64), 1);
        assert_eq!(lines_in(10, 200), 4);
    }
}
