//! Applying a batch of durable transactions to the durable heap (§3.3), shared by the
//! background replayer and recovery.
//!
//! * **Sharding.** The heap is cut into 4 KiB chunks strided over the shards: chunk
//!   `c` belongs to shard `c % shards` (`kit::recovery::replay_parts`; the paper's
//!   policy without its NUMA placement). Every shard scans the whole batch
//!   and applies only the words of its chunks, so shards write disjoint memory and
//!   need no synchronization; each flushes and fences its own writes. A record that
//!   says which shards it writes ([`LoggedRecord::parts`]: recovery's records, whose
//!   parse noted it) is skipped unread by the others. Shard 0 runs on the calling
//!   thread, the others on scoped threads.
//! * **With the duplicate filter** (`dup_filter=on`, the default of backward replay):
//!   the batch is walked newest transaction first, entries last first, and a word is
//!   applied only the first time the shard meets it. Every word ends with its newest
//!   value, written once. How a shard remembers the words it met ([`Tracking`]): the
//!   background replayer's batches use a set of word offsets (memory in proportion to
//!   the batch); recovery, whose batch is every durable record, uses the paper's
//!   bitmap, one bit per word of the pool (a test-and-set, where the set cost a hash
//!   lookup and a cache miss per word), allocated zeroed on huge pages so only the
//!   regions the batch reaches are ever touched. The lines to flush are kept the same
//!   way: a list sorted at the end, or one bit per line.
//! * **Without it** (`dup_filter=off`): oldest first, every write applied.
//! * **A pipeline of hints.** Home writes land anywhere in the heap and recovery's
//!   records come from a log far larger than the caches, so a shard works on several
//!   records at once: record `j + 2 AHEAD + LOG_AHEAD`'s log bytes are prefetched,
//!   record `j + 2 AHEAD` is decoded into a ring of entry buffers (and its home lines
//!   prefetched, or, with a dense filter, its filter bits), record `j + AHEAD` has the
//!   home lines of its words not met yet prefetched (dense filter), and record `j` is
//!   applied (`kit::recovery::prefetch`, shared with `sp3`). Without the hints each write waited
//!   for its cache miss in turn. Each record is decoded once by every shard it has
//!   words for (by every shard, when its parts are not known).
//!
//! How the batch was found (backward links, forward links, timestamp scan) does not
//! matter here: it arrives oldest first either way.
//! * **Allocator entries** are applied by the coordinator, oldest first, never filtered:
//!   an allocation and a later free of overlapping blocks (a large run, then a small
//!   slab in its place) must keep their order (see `heap::alloc`, Recovery). The
//!   coordinator decodes only the records its caller says may hold them
//!   ([`apply_marked`]: recovery knows which do from its validation pass, so a log of
//!   data-only records is decoded once here, by the shards, not twice).
//!
//! A crash in the middle leaves some words newer than others; the batch's records stay
//! in the logs until the `replayed` word passes them, so recovery applies the whole
//! batch again (absolute values: idempotent).

use super::log::{LogRec, RecordRef};
use crate::engine::kit::log::redo_log::{self, Entry};
use crate::engine::kit::recovery::bulk_vec::zeroed_words;
use crate::engine::kit::recovery::prefetch::prefetch_home;
use crate::engine::kit::recovery::replay_parts::Part;
use crate::heap::alloc::{Allocator, Block};
use crate::heap::Heap;
use crate::Result;
use std::sync::atomic::Ordering::Relaxed;

crate::mutation::point! {
    /// Every replay shard applies every word, not only those of its chunks.
    pub(crate) static SHARD_FILTER = "shard-filter";
    /// Backward replay applies every write (no duplicate filter), so the oldest value of
    /// a word wins.
    pub(crate) static DUPLICATE_FILTER = "duplicate-filter";
    /// The dense duplicate filter of recovery's replay keeps one bit per cache line
    /// instead of one per word, so the older writes of a line's other words are taken for
    /// duplicates and skipped.
    pub(crate) static DENSE_FILTER_UNIT = "dense-filter-unit";
}

/// How many records ahead of the one it applies a shard decodes (and prefetches the
/// home lines of).
const AHEAD: usize = 8;

/// How many records ahead of the one it decodes a shard prefetches the record's own
/// bytes (recovery reads its records from a log far larger than the caches, in an
/// order that interleaves the slots' logs).
const LOG_AHEAD: usize = 8;

/// How a shard remembers the words it wrote (the duplicate filter) and the lines it
/// must flush.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Tracking {
    /// A hash set of word offsets and a list of lines, sorted at the end: memory in
    /// proportion to the batch (the background replayer's small batches).
    Sparse,
    /// One bit per word and one bit per line of the whole pool (the paper's bitmap):
    /// a test-and-set instead of a hash lookup, no sort; the bitmaps are allocated
    /// zeroed and the kernel maps only the pages the batch touches (recovery, whose
    /// batch is every durable record: millions of words).
    Dense,
}

/// A bitmap over the pool: bit `i` stands for unit `i` (`1 << shift` bytes) of the pool.
struct PoolBits {
    words: Vec<u64>,
    shift: u32,
}

impl PoolBits {
    fn new(pool_bytes: usize, shift: u32) -> PoolBits {
        PoolBits {
            words: zeroed_words((pool_bytes >> shift).div_ceil(64)),
            shift,
        }
    }
    /// Set the bit of pool offset `off`; true if it was set already.
    #[inline]
    fn test_and_set(&mut self, off: u64) -> bool {
        let i = (off >> self.shift) as usize;
        let (w, b) = (i / 64, 1u64 << (i % 64));
        let was = self.words[w] & b != 0;
        self.words[w] |= b;
        was
    }
    /// Is the bit of pool offset `off` set?
    #[inline]
    fn test(&self, off: u64) -> bool {
        let i = (off >> self.shift) as usize;
        self.words[i / 64] & (1 << (i % 64)) != 0
    }
    /// Hint the processor to fetch the word holding the bit of `off`.
    #[inline]
    fn prefetch(&self, off: u64) {
        if let Some(w) = self.words.get((off >> self.shift) as usize / 64) {
            crate::engine::kit::recovery::prefetch::prefetch((w as *const u64).cast());
        }
    }
    /// The pool offsets of the set bits, in order.
    fn for_each(&self, mut f: impl FnMut(usize)) {
        for (w, &bits) in self.words.iter().enumerate() {
            let mut b = bits;
            while b != 0 {
                let i = 64 * w + b.trailing_zeros() as usize;
                f(i << self.shift);
                b &= b - 1;
            }
        }
    }
}

/// A shard's record of the words it wrote and the lines to flush (see [`Tracking`]).
enum Written {
    Sparse {
        seen: crate::fasthash::FastMap<u64, ()>,
        lines: Vec<usize>,
    },
    Dense {
        seen: PoolBits,
        lines: PoolBits,
    },
}

impl Written {
    fn new(heap: &Heap, tracking: Tracking) -> Written {
        match tracking {
            Tracking::Sparse => Written::Sparse {
                seen: Default::default(),
                lines: Vec::new(),
            },
            Tracking::Dense => {
                let word_shift = if crate::mutation::active!(DENSE_FILTER_UNIT) {
                    // Mutation: one bit per line, not per word.
                    6
                } else {
                    3
                };
                Written::Dense {
                    seen: PoolBits::new(heap.size(), word_shift),
                    lines: PoolBits::new(heap.size(), 6),
                }
            }
        }
    }
    /// Note word `off` as met; true if it was met before (the filter skips it).
    #[inline]
    fn seen_before(&mut self, off: u64) -> bool {
        match self {
            Written::Sparse { seen, .. } => seen.insert(off, ()).is_some(),
            Written::Dense { seen, .. } => seen.test_and_set(off),
        }
    }
    /// Was word `off` met already (a later record of the walk will be filtered)?
    #[inline]
    fn met(&self, off: u64) -> bool {
        match self {
            Written::Sparse { .. } => false,
            Written::Dense { seen, .. } => seen.test(off),
        }
    }
    /// Is this the dense (bitmap) tracking?
    #[inline]
    fn is_dense(&self) -> bool {
        matches!(self, Written::Dense { .. })
    }
    /// Hint the processor to fetch the filter's bit of word `off` (dense tracking).
    #[inline]
    fn prefetch_seen(&self, off: u64) {
        if let Written::Dense { seen, .. } = self {
            seen.prefetch(off);
        }
    }
    /// Note the line of word `off` as written.
    #[inline]
    fn line(&mut self, off: u64) {
        let line = off as usize & !63;
        match self {
            // Consecutive words mostly share a line: keep the list short before the
            // sort.
            Written::Sparse { lines, .. } => {
                if lines.last() != Some(&line) {
                    lines.push(line);
                }
            }
            Written::Dense { lines, .. } => {
                lines.test_and_set(line as u64);
            }
        }
    }
    /// Flush every line written (the caller fences).
    fn flush(self, heap: &Heap) {
        match self {
            Written::Sparse { mut lines, .. } => {
                lines.sort_unstable();
                lines.dedup();
                for l in lines {
                    heap.flush(l, 64);
                }
            }
            Written::Dense { lines, .. } => lines.for_each(|l| heap.flush(l, 64)),
        }
    }
}

/// What applying a batch did (tests and `info`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct ApplyStats {
    /// Words written, per shard.
    pub applied: Vec<u64>,
    /// Words skipped by the duplicate filter.
    pub filtered: u64,
    /// Offsets of the blocks the batch's allocator entries named, oldest first.
    pub allocator: Vec<u64>,
}

/// A transaction's record as `apply` reads it: its entries are decoded when they are
/// applied (a record in a log, read in place: nothing is copied or kept per record),
/// or given (tests).
pub(super) trait LoggedRecord: Sync {
    /// Append its entries to `out`; `Err` names the first malformed one.
    fn entries_into<'s>(&'s self, heap: &'s Heap, out: &mut Vec<Entry<'s>>) -> Result<()>;
    /// Hint the processor to fetch the record's bytes (it is decoded soon).
    #[inline]
    fn prefetch(&self, _heap: &Heap) {}
    /// The shards its data words fall in (bit k: shard k of the batch's shard count),
    /// if known without decoding it; `None`: every shard decodes it.
    #[inline]
    fn parts(&self) -> Option<u32> {
        None
    }
}

impl LoggedRecord for RecordRef {
    fn entries_into<'s>(&'s self, heap: &'s Heap, out: &mut Vec<Entry<'s>>) -> Result<()> {
        for e in redo_log::entries(self.entries(heap)) {
            out.push(e?);
        }
        Ok(())
    }
}

impl LoggedRecord for LogRec {
    fn entries_into<'s>(&'s self, heap: &'s Heap, out: &mut Vec<Entry<'s>>) -> Result<()> {
        for e in redo_log::entries(LogRec::entries(*self, heap)) {
            out.push(e?);
        }
        Ok(())
    }
    #[inline]
    fn prefetch(&self, heap: &Heap) {
        // Header and first entry (a record is 64 bytes and more, rarely line-aligned).
        prefetch_home(heap, self.off());
        prefetch_home(heap, self.off() + 64);
    }
    #[inline]
    fn parts(&self) -> Option<u32> {
        Some(LogRec::parts(*self))
    }
}

impl LoggedRecord for Vec<Entry<'_>> {
    fn entries_into<'s>(&'s self, _: &'s Heap, out: &mut Vec<Entry<'s>>) -> Result<()> {
        out.extend(self.iter().cloned());
        Ok(())
    }
}

/// The `i`-th 8-byte word of a range's data (the last one zero-padded).
#[inline]
fn range_word(data: &[u8], i: usize) -> u64 {
    let start = 8 * i;
    match data.get(start..start + 8) {
        Some(w) => u64::from_le_bytes(w.try_into().expect("8 bytes")),
        None => {
            let mut w = [0u8; 8];
            w[..data.len() - start].copy_from_slice(&data[start..]);
            u64::from_le_bytes(w)
        }
    }
}

/// Call `f` on every (offset, value) word of one entry, in order or (with `rev`)
/// last word first. Allocator and operation entries have no words here (operation
/// entries are TimeStone's; recovery refuses them in spht logs).
#[inline]
fn entry_words<F: FnMut(u64, u64)>(e: &Entry<'_>, rev: bool, f: &mut F) {
    match *e {
        Entry::Word { off, value } => f(off, value),
        Entry::Range { off, data } => {
            let n = data.len().div_ceil(8);
            if rev {
                for i in (0..n).rev() {
                    f(off + 8 * i as u64, range_word(data, i));
                }
            } else {
                for i in 0..n {
                    f(off + 8 * i as u64, range_word(data, i));
                }
            }
        }
        Entry::Alloc(_) | Entry::Free(_) | Entry::Op { .. } => {}
    }
}

/// Call `f` on every word of an entry list, in entry order or (with `rev`) last word
/// first.
#[inline]
fn for_each_word<F: FnMut(u64, u64)>(entries: &[Entry<'_>], rev: bool, mut f: F) {
    if rev {
        for e in entries.iter().rev() {
            entry_words(e, true, &mut f);
        }
    } else {
        for e in entries {
            entry_words(e, false, &mut f);
        }
    }
}

/// Decode `rec` (if any) into `buf` and hint the lines its words `mine` says the shard
/// writes will need: with a dense duplicate filter the filter's bitmap words (whether
/// a word is written at all is known only once they are read: [`hint_homes`]), else
/// the home lines. The caller validated every record: no error here.
#[inline]
fn decode_ahead<'s, R: LoggedRecord>(
    heap: &'s Heap,
    rec: Option<&'s R>,
    buf: &mut Vec<Entry<'s>>,
    mine: &impl Fn(u64) -> bool,
    written: &Written,
    filter: bool,
) {
    buf.clear();
    let Some(rec) = rec else {
        return;
    };
    let _ = rec.entries_into(heap, buf);
    let dense_filter = filter && written.is_dense();
    for e in buf.iter() {
        if let Entry::Word { off, .. } | Entry::Range { off, .. } = *e {
            if !mine(off) {
                continue;
            }
            if dense_filter {
                written.prefetch_seen(off);
            } else {
                prefetch_home(heap, off as usize);
            }
        }
    }
}

/// The second hint of a dense duplicate filter, [`AHEAD`] records after the decoding
/// hinted the bitmap: prefetch the home lines of the words of `buf` not met yet (a word
/// met already is filtered: its line is not needed).
#[inline]
fn hint_homes(heap: &Heap, buf: &[Entry<'_>], mine: &impl Fn(u64) -> bool, written: &Written) {
    for e in buf {
        if let Entry::Word { off, .. } | Entry::Range { off, .. } = *e {
            if mine(off) && !written.met(off) {
                prefetch_home(heap, off as usize);
            }
        }
    }
}

/// Apply shard `shard`'s words of `batch` (oldest transaction first) and make them
/// durable, remembering what it wrote as `tracking` says. Returns (words written,
/// words filtered).
pub(super) fn apply_shard<R: LoggedRecord>(
    heap: &Heap,
    batch: &[R],
    filter: bool,
    shards: usize,
    shard: usize,
    tracking: Tracking,
) -> (u64, u64) {
    let mut written = Written::new(heap, tracking);
    let (mut applied, mut filtered) = (0u64, 0u64);
    let all_shards = crate::mutation::active!(SHARD_FILTER);
    let part = Part {
        index: shard,
        count: shards,
    };
    let mine = |off: u64| all_shards || part.owns(off);
    let no_filter = crate::mutation::active!(DUPLICATE_FILTER);
    // The records in the order they are applied (newest first with the filter),
    // without those known to have nothing for this shard.
    let n = batch.len();
    let records = (0..n)
        .map(|j| if filter { &batch[n - 1 - j] } else { &batch[j] })
        .filter(|r| all_shards || r.parts().is_none_or(|m| part.touched_by(m)));
    // A pipeline over them: record `j + DECODE + LOG_AHEAD`'s log bytes are
    // prefetched, record `j + DECODE` is decoded (and its filter bits or home lines
    // hinted), record `j + AHEAD` has its home lines hinted (dense filter), record `j`
    // is applied. The ring holds the decoded records `j .. j + DECODE`; `decoded`
    // counts the records decoded so far.
    const DECODE: usize = 2 * AHEAD;
    let dense_filter = filter && written.is_dense();
    let mut to_prefetch = records.clone();
    let mut to_decode = records;
    let mut ring: Vec<Vec<Entry<'_>>> = (0..DECODE).map(|_| Vec::new()).collect();
    for r in to_prefetch.by_ref().take(DECODE + LOG_AHEAD) {
        r.prefetch(heap);
    }
    let mut decoded = 0;
    for buf in ring.iter_mut() {
        let r = to_decode.next();
        decoded += usize::from(r.is_some());
        decode_ahead(heap, r, buf, &mine, &written, filter);
    }
    if dense_filter {
        // Records 0 .. AHEAD: the loop hints the later ones, each AHEAD steps early.
        for buf in &ring[..AHEAD] {
            hint_homes(heap, buf, &mine, &written);
        }
    }
    let mut j = 0;
    while j < decoded {
        // Record `j` was decoded into this buffer `DECODE` records ago.
        let buf = &mut ring[j % DECODE];
        let mut write = |off: u64, value: u64, written: &mut Written| {
            // Relaxed: only replay writes these words of the durable heap; the fence
            // below orders their durability.
            heap.atomic_u64(off as usize).store(value, Relaxed);
            written.line(off);
            applied += 1;
        };
        if filter {
            for_each_word(buf, true, |off, value| {
                if !mine(off) {
                    return;
                }
                if written.seen_before(off) && !no_filter {
                    filtered += 1;
                    return;
                }
                write(off, value, &mut written);
            });
        } else {
            for_each_word(buf, false, |off, value| {
                if mine(off) {
                    write(off, value, &mut written);
                }
            });
        }
        if let Some(r) = to_prefetch.next() {
            r.prefetch(heap);
        }
        let r = to_decode.next();
        decoded += usize::from(r.is_some());
        decode_ahead(heap, r, buf, &mine, &written, filter);
        if dense_filter {
            hint_homes(heap, &ring[(j + AHEAD) % DECODE], &mine, &written);
        }
        j += 1;
    }
    written.flush(heap);
    heap.fence();
    (applied, filtered)
}

/// Apply a batch (oldest transaction first): allocator entries on this thread, data
/// words on `shards` shards. Everything is durable when it returns. Returns the blocks
/// the batch freed, and statistics.
pub(super) fn apply<R: LoggedRecord>(
    heap: &Heap,
    batch: &[R],
    filter: bool,
    shards: usize,
) -> Result<(Vec<Block>, ApplyStats)> {
    apply_marked(
        heap,
        batch,
        filter,
        shards,
        Tracking::Sparse,
        Some(|_| true),
    )
}

/// [`apply`] with the shards' `tracking`, where `may_allocate(i)` is false only for
/// records `batch[i]` known to hold no allocator entry (the coordinator skips them
/// undecoded), and `None` says that no record holds one (the coordinator's pass over
/// the batch, on one thread before the shards start, is skipped). Records that know
/// their shards ([`LoggedRecord::parts`]) must know them for `shards` shards.
pub(super) fn apply_marked<R: LoggedRecord>(
    heap: &Heap,
    batch: &[R],
    filter: bool,
    shards: usize,
    tracking: Tracking,
    may_allocate: Option<impl Fn(usize) -> bool>,
) -> Result<(Vec<Block>, ApplyStats)> {
    let shards = shards.max(1);
    let mut freed = Vec::new();
    let mut allocator = Vec::new();
    let mut buf = Vec::new();
    if let Some(may_allocate) = may_allocate {
        for (i, rec) in batch.iter().enumerate() {
            if !may_allocate(i) {
                continue;
            }
            buf.clear();
            rec.entries_into(heap, &mut buf)?;
            for e in &buf {
                match *e {
                    Entry::Alloc(b) => {
                        Allocator::replay_alloc(heap, b)?;
                        allocator.push(b.offset);
                    }
                    Entry::Free(b) => {
                        Allocator::replay_free(heap, b)?;
                        freed.push(b);
                        allocator.push(b.offset);
                    }
                    _ => {}
                }
            }
        }
    }
    heap.fence();
    let mut stats = ApplyStats {
        applied: vec![0; shards],
        filtered: 0,
        allocator,
    };
    if shards == 1 {
        let (a, f) = apply_shard(heap, batch, filter, 1, 0, tracking);
        stats.applied[0] = a;
        stats.filtered = f;
    } else {
        let results: Vec<(u64, u64)> = std::thread::scope(|s| {
            let hs: Vec<_> = (1..shards)
                .map(|k| s.spawn(move || apply_shard(heap, batch, filter, shards, k, tracking)))
                .collect();
            let mut r = vec![apply_shard(heap, batch, filter, shards, 0, tracking)];
            r.extend(
                hs.into_iter()
                    .map(|h| h.join().expect("replay shard panicked")),
            );
            r
        });
        for (k, (a, f)) in results.into_iter().enumerate() {
            stats.applied[k] = a;
            stats.filtered += f;
        }
    }
    Ok((freed, stats))
}
