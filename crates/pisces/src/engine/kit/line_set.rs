//! The cache lines a batch of write-backs wrote, so that each is flushed once, after
//! the batch's last write to it.
//!
//! A group-commit batch writes home the changes of several transactions, and they
//! often share lines: allocations from one slab set bits in one bitmap word,
//! neighbouring objects share a line, a hot object is written by several transactions
//! of the batch. A flush per write flushes such a line once per write, and on a medium
//! with emulated NVM latency every flushed line costs that latency at the fence.
//!
//! The write-back instead adds each range it writes ([`LineSet::add`]) and, when every
//! write of the batch is done, flushes each distinct line once, in address order, runs
//! of adjacent lines as one flush call ([`LineSet::flush`]); the caller's fence
//! follows. What reaches the medium before that fence is what a flush per write gives:
//! every line the batch wrote, with its final contents. The order matters: a line
//! flushed at its first write and written again later in the batch would reach the
//! fence with the later write not written back.
//!
//! A batch writes a few dozen lines, so the set is a plain vector, sorted once at
//! [`LineSet::flush`] (cheaper than a lookup per add at this size); its capacity is
//! kept from batch to batch.

use crate::heap::Heap;
use crate::medium::CACHE_LINE;

/// The lines written by a write-back batch and not flushed yet (see the module docs).
#[derive(Debug, Default)]
pub struct LineSet {
    /// Line numbers (offset / 64), possibly repeated, in the order added.
    lines: Vec<usize>,
}

impl LineSet {
    /// Add the lines of `off..off + len`.
    #[inline]
    pub fn add(&mut self, off: usize, len: usize) {
        if len == 0 {
            return;
        }
        let (first, last) = (off / CACHE_LINE, (off + len - 1) / CACHE_LINE);
        self.lines.push(first);
        if last != first {
            self.lines.extend(first + 1..=last);
        }
    }

    /// True if the line holding `off` was added since the last flush (a linear look:
    /// for the mutation that flushes at the first write only).
    pub fn contains(&self, off: usize) -> bool {
        self.lines.contains(&(off / CACHE_LINE))
    }

    /// Empty the set without flushing.
    pub fn clear(&mut self) {
        self.lines.clear();
    }

    /// True if no line was added since the last flush.
    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.lines.is_empty()
    }

    /// Flush every line added (each once, runs of adjacent lines in one call) and
    /// empty the set. The caller fences.
    pub fn flush(&mut self, heap: &Heap) {
        self.for_each_run(|off, len| heap.flush(off, len));
    }

    /// Call `f(offset, len)` once per run of adjacent distinct lines, in address
    /// order, and empty the set.
    fn for_each_run(&mut self, mut f: impl FnMut(usize, usize)) {
        self.lines.sort_unstable();
        let mut run: Option<(usize, usize)> = None;
        for &l in &self.lines {
            run = match run {
                Some((start, end)) if l <= end + 1 => Some((start, end.max(l))),
                Some((start, end)) => {
                    f(start * CACHE_LINE, (end - start + 1) * CACHE_LINE);
                    Some((l, l))
                }
                None => Some((l, l)),
            };
        }
        if let Some((start, end)) = run {
            f(start * CACHE_LINE, (end - start + 1) * CACHE_LINE);
        }
        self.lines.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runs(s: &mut LineSet) -> Vec<(usize, usize)> {
        let mut v = Vec::new();
        s.for_each_run(|o, l| v.push((o, l)));
        v
    }

    #[test]
    fn each_line_once_and_adjacent_lines_in_one_run() {
        let mut s = LineSet::default();
        s.add(1000, 8); // line 15
        s.add(64 * 15 + 56, 16); // lines 15 and 16
        s.add(64 * 20, 64); // line 20
        s.add(64 * 3, 1); // line 3
        s.add(64 * 20 + 8, 8); // line 20 again
        s.add(0, 0); // nothing
        assert_eq!(
            runs(&mut s),
            vec![(64 * 3, 64), (64 * 15, 128), (64 * 20, 64)]
        );
        assert!(s.is_empty());
        assert_eq!(runs(&mut s), vec![]);
    }

    #[test]
    fn a_range_over_many_lines_is_one_run() {
        let mut s = LineSet::default();
        s.add(64 * 7 + 3, 64 * 4);
        s.add(64 * 8, 8);
        assert_eq!(runs(&mut s), vec![(64 * 7, 64 * 5)]);
    }
}
