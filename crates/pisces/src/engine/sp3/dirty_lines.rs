//! The cache lines a recovery replay wrote, so that each is flushed once, at the end.
//!
//! A full log writes the same home locations many times over (a hot object's line
//! once per record that writes it, and a log holds many more records than the pool
//! has hot lines). A flush per write costs a flush instruction per write, a miss at
//! the next write to the line on processors whose flush evicts it, and, on a medium
//! with emulated NVM latency, the latency of every flushed line.
//!
//! Replay instead marks each line it writes in a bitmap of the pool's lines
//! ([`DirtyLines::mark`]) and, when it has applied everything, flushes every marked
//! line once, in address order ([`DirtyLines::flush`]); the caller's fence follows.
//! What reaches the medium before that fence is the same as with a flush per write:
//! every line replay wrote, with its final contents. Nothing between the writes and
//! the fence depends on their durability (recovery retires the replayed records only
//! after the fence), so deferring the flushes changes no crash state that matters: a
//! crash before the fence replays everything again.
//!
//! The bitmap holds one bit per 64-byte line of the pool (2 KiB per MiB of pool);
//! it is zeroed memory from the allocator, so only its words replay touches are
//! faulted in.

use crate::heap::Heap;
use crate::medium::CACHE_LINE;

/// Lines per bitmap word.
const LINES_PER_WORD: usize = 64;

/// The set of cache lines of a pool written by a replay and not flushed yet.
#[derive(Debug)]
pub(super) struct DirtyLines {
    words: Vec<u64>,
}

impl DirtyLines {
    /// An empty set for a pool (or any range of offsets) of `len` bytes.
    pub(super) fn new(len: usize) -> Self {
        DirtyLines {
            words: vec![0; len.div_ceil(CACHE_LINE * LINES_PER_WORD)],
        }
    }

    /// Mark the lines of `off..off + len` written.
    ///
    /// # Panics
    /// If the range reaches past the length the set was made for (callers mark only
    /// validated writes into the pool).
    #[inline]
    pub(super) fn mark(&mut self, off: usize, len: usize) {
        if len == 0 {
            return;
        }
        let (first, last) = (off / CACHE_LINE, (off + len - 1) / CACHE_LINE);
        for line in first..=last {
            self.words[line / LINES_PER_WORD] |= 1 << (line % LINES_PER_WORD);
        }
    }

    /// Lines marked so far.
    #[cfg(test)]
    pub(super) fn count(&self) -> usize {
        self.words.iter().map(|w| w.count_ones() as usize).sum()
    }

    /// Flush every marked line once, in address order (runs of adjacent lines as one
    /// flush call), and empty the set. The caller fences.
    pub(super) fn flush(&mut self, heap: &Heap) {
        for (w, word) in self.words.iter_mut().enumerate() {
            let mut bits = std::mem::take(word);
            while bits != 0 {
                let start = bits.trailing_zeros() as usize;
                let run = (bits >> start).trailing_ones() as usize;
                let line = w * LINES_PER_WORD + start;
                heap.flush(line * CACHE_LINE, run * CACHE_LINE);
                // `run` ≤ 64 - start; a run up to bit 63 clears the word.
                bits = if start + run == LINES_PER_WORD {
                    0
                } else {
                    bits & !(((1u64 << run) - 1) << start)
                };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::medium::counters;
    use crate::medium::dram::DramMedium;
    use std::sync::Arc;

    #[test]
    fn marks_lines_and_flushes_each_once() {
        let mut d = DirtyLines::new(1 << 20);
        d.mark(0, 1);
        d.mark(8, 8); // the same line
        d.mark(63, 2); // lines 0 and 1
        d.mark(64 * 63, 64 * 3); // lines 63..66: across a bitmap word
        d.mark(5000, 0); // nothing
        d.mark((1 << 20) - 8, 8); // the last line
        assert_eq!(d.count(), 2 + 3 + 1);
        let m = Arc::new(DramMedium::anonymous(1 << 20, 0, 0).unwrap());
        let heap = Heap::format(
            m,
            crate::heap::FormatParams {
                engine_id: 1,
                max_threads: 1,
                log_bytes_per_thread: 64 << 10,
                regions: Default::default(),
            },
        )
        .unwrap();
        let before = counters::snapshot();
        d.flush(&heap);
        assert_eq!((counters::snapshot() - before).lines_flushed, 6);
        assert_eq!(d.count(), 0);
        // A full word (a run up to bit 63).
        d.mark(0, 64 * 64);
        assert_eq!(d.count(), 64);
        d.flush(&heap);
        assert_eq!(d.count(), 0);
    }
}
