//! The persistent half of the allocator: slab table entries, bitmaps, block geometry,
//! validation of a pool's allocator state, and the persistent steps shared by the
//! runtime (`publish_*`, slab formatting) and recovery (`replay_*`).
//!
//! Orderings. Slab table entries and bitmap words are read and written only through
//! atomics, so concurrent access is never a data race. Their persistent meaning is
//! ordered by flushes and fences, not by the memory model, and the volatile hand-off of
//! blocks between threads goes through mutexes or the engine's own synchronization;
//! hence most accesses here are `Relaxed` and each says why that is enough.

use super::classes::{describe, Kind, ARG_MASK, CLASSES};
use super::Block;
use crate::heap::layout::{Layout, SLAB_SIZE};
use crate::heap::Heap;
use crate::medium::counters;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

const _: () = assert!(SLAB_SIZE.is_power_of_two());

/// Where a block lives, by geometry alone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Loc {
    /// Block `index` of slab `slab`, formatted (or to be) for class `class`.
    Small {
        slab: usize,
        class: usize,
        index: usize,
    },
    /// A large run of `n` slabs starting at slab `head`.
    Large { head: usize, n: usize },
}

/// Validate the geometry of `b` (as read from a log or handed in by an engine) and say
/// where it lives. The message says what is wrong.
pub(crate) fn locate(layout: &Layout, b: Block) -> Result<Loc, String> {
    let what = || format!("block at {:#x} of {} bytes", b.offset, b.size);
    let heap_start = layout.heap_offset as u64;
    let heap_end = layout.heap_end() as u64;
    if b.offset < heap_start || b.offset >= heap_end {
        return Err(format!(
            "{} is outside the heap ({heap_start:#x}..{heap_end:#x})",
            what()
        ));
    }
    let rel = b.offset - heap_start;
    let slab = (rel / SLAB_SIZE as u64) as usize;
    let within = rel % SLAB_SIZE as u64;
    if let Some(class) = super::classes::class_of_size(b.size) {
        let cl = &CLASSES[class];
        let data = within.checked_sub(cl.data_start as u64);
        match data {
            Some(d) if d % cl.size as u64 == 0 && d / (cl.size as u64) < cl.nblocks as u64 => {
                Ok(Loc::Small {
                    slab,
                    class,
                    index: (d / cl.size as u64) as usize,
                })
            }
            _ => Err(format!(
                "{} is not a block start of a class-{class} slab (offset {within:#x} in slab {slab})",
                what()
            )),
        }
    } else if b.size != 0 && b.size & (SLAB_SIZE as u64 - 1) == 0 {
        // (A whole number of slabs: SLAB_SIZE is a power of two, asserted below.)
        let n = b.size / SLAB_SIZE as u64;
        if within != 0 {
            return Err(format!("{} is a large run not starting at a slab", what()));
        }
        if n > ARG_MASK as u64 || slab as u64 + n > layout.slab_count as u64 {
            return Err(format!(
                "{} is a large run of {n} slabs from slab {slab}, past the last slab ({})",
                what(),
                layout.slab_count
            ));
        }
        Ok(Loc::Large {
            head: slab,
            n: n as usize,
        })
    } else {
        Err(format!(
            "{} has a size that is neither a size class nor a whole number of slabs",
            what()
        ))
    }
}

/// As [`locate`], and the block must lie in the slabs that exist at the heap's current
/// size (a pool that grows has slab table entries for slabs it does not have yet).
pub(crate) fn locate_present(heap: &Heap, b: Block) -> Result<Loc, String> {
    let loc = locate(heap.layout(), b)?;
    let (first, n) = match loc {
        Loc::Small { slab, .. } => (slab, 1),
        Loc::Large { head, n } => (head, n),
    };
    let present = heap.slabs_present();
    if first + n > present {
        return Err(format!(
            "block at {:#x} of {} bytes lies past the end of the pool ({} bytes, {present} slabs)",
            b.offset,
            b.size,
            heap.size()
        ));
    }
    Ok(loc)
}

/// The block at `loc` (inverse of [`locate`]).
pub(crate) fn block_of(layout: &Layout, loc: Loc) -> Block {
    match loc {
        Loc::Small { slab, class, index } => {
            let cl = &CLASSES[class];
            Block {
                offset: (layout.slab_offset(slab)
                    + cl.data_start as usize
                    + index * cl.size as usize) as u64,
                size: cl.size as u64,
            }
        }
        Loc::Large { head, n } => Block {
            offset: layout.slab_offset(head) as u64,
            size: (n * SLAB_SIZE) as u64,
        },
    }
}

/// Offset of slab `i`'s table entry.
fn entry_offset(heap: &Heap, i: usize) -> usize {
    heap.layout().slab_table_offset + 4 * i
}

/// Slab `i`'s persistent table entry as an atomic.
///
/// # Panics
/// If `i` is not a slab of this heap (a bug in this module: every caller derives `i`
/// from a validated layout).
pub(crate) fn entry(heap: &Heap, i: usize) -> &AtomicU32 {
    assert!(i < heap.layout().slab_count, "slab {i} out of range");
    let off = entry_offset(heap, i);
    assert!(heap.in_bounds(off, 4));
    // SAFETY: `off` is inside the image (asserted) and 4-aligned (the table starts on a
    // page and the image base is page aligned); the image lives as long as `heap`, and
    // slab table entries are only ever accessed through this atomic view.
    unsafe { &*(heap.ptr(off) as *const AtomicU32) }
}

/// Read slab `i`'s table entry.
pub(crate) fn read_entry(heap: &Heap, i: usize) -> u32 {
    // Relaxed: an entry changes only in a transition owned by one thread (formatting
    // under the slab lock, publish of a reserved run) or in single-threaded recovery;
    // concurrent readers are statistics (usage, is_allocated) that need no ordering with
    // other memory.
    entry(heap, i).load(Ordering::Relaxed)
}

/// Store slab `i`'s table entry (not flushed).
fn store_entry(heap: &Heap, i: usize, kind: Kind) {
    // Relaxed: see `read_entry`; durability order is the caller's flush + fence.
    entry(heap, i).store(kind.encode(), Ordering::Relaxed)
}

/// Bitmap word `w` of slab `slab`.
pub(crate) fn bitmap_word(heap: &Heap, slab: usize, w: usize) -> &AtomicU64 {
    heap.atomic_u64(heap.layout().slab_offset(slab) + 8 * w)
}

/// Mask of the bits of bitmap word `w` that stand for blocks of class `c`.
pub(crate) fn valid_mask(class: usize, w: usize) -> u64 {
    let n = CLASSES[class].nblocks as usize;
    let lo = w * 64;
    if lo >= n {
        0
    } else if n - lo >= 64 {
        !0
    } else {
        (1u64 << (n - lo)) - 1
    }
}

/// Format slab `slab` for class `class` and make it durable: zero the bitmap and the
/// header word of every block and persist them, then set and persist the table entry.
/// The header words are left alone on a heap whose engine keeps nothing in them
/// ([`Heap::set_header_words_unused`]).
/// A crash in between leaves either a free slab or a formatted, empty one; both hold
/// nothing.
///
/// The header words must be zeroed because they sit where the slab's previous geometry
/// may have kept payload bytes or a bitmap: an engine reads a header word as a lock,
/// and old bytes that happened to look like one of this run's locks would be followed
/// as a pointer.
pub(crate) fn format_small(heap: &Heap, slab: usize, class: usize) {
    format_small_slabs(heap, &[slab], class);
}

/// [`format_small`] for several slabs of one class at once, with the same two fences
/// for all of them: every slab's bitmap and header words first, then every entry.
pub(crate) fn format_small_slabs(heap: &Heap, slabs: &[usize], class: usize) {
    let cl = &CLASSES[class];
    for &slab in slabs {
        for w in 0..cl.all_words() {
            // Relaxed: nobody else can reach this slab yet (it was just taken from the
            // free set, or recovery is single-threaded); the fence below orders it
            // durably before the entry.
            bitmap_word(heap, slab, w).store(0, Ordering::Relaxed);
        }
        let headers = if heap.header_words_used() {
            clear_headers(heap, slab, class);
            8 * cl.nblocks as u64
        } else {
            0
        };
        heap.flush(heap.layout().slab_offset(slab), cl.data_start as usize);
        counters::add_bytes_metadata(cl.data_start as u64 + headers + 4);
    }
    heap.fence();
    for &slab in slabs {
        store_entry(heap, slab, Kind::Small(class));
        heap.flush(entry_offset(heap, slab), 4);
    }
    // Fenced here, not by the engine: the blocks of these slabs may be published by
    // other threads, whose fences do not cover this thread's flush.
    heap.fence();
}

/// Zero the header word of every block of small slab `slab` (class `class`) and flush
/// them; the caller fences. Only for a slab no thread can reach (being formatted, or
/// recovery).
pub(crate) fn clear_headers(heap: &Heap, slab: usize, class: usize) {
    let cl = &CLASSES[class];
    let base = heap.layout().slab_offset(slab) + cl.data_start as usize;
    for i in 0..cl.nblocks as usize {
        let off = base + i * cl.size as usize;
        // Relaxed: see the caller; the caller's fence makes it durable.
        heap.atomic_u64(off).store(0, Ordering::Relaxed);
        heap.flush(off, 8);
    }
}

/// Set (or clear) the bit of block `index` of `slab`; returns the range `(offset,
/// len)` of its word, which the caller flushes now or later (before its fence).
#[must_use = "the word must be flushed to become durable"]
pub(crate) fn set_bit(heap: &Heap, slab: usize, index: usize, allocated: bool) -> (usize, usize) {
    let word = bitmap_word(heap, slab, index / 64);
    let bit = 1u64 << (index % 64);
    // Relaxed: several threads publish into one slab, and read-modify-writes of one word
    // are totally ordered, so no thread loses another's bit. The caller's flush follows
    // the RMW in program order and write-back instructions are ordered after older stores to
    // the same line, so the flushed line holds this bit; the engine's fence orders it.
    // Release: pairs with the Acquire load of `Allocator::block_state`, so a thread that
    // sees the new bit also sees what the publisher wrote before (free on x86, where
    // every RMW is a full barrier).
    if allocated {
        word.fetch_or(bit, Ordering::Release);
    } else {
        word.fetch_and(!bit, Ordering::Release);
    }
    counters::add_bytes_metadata(8);
    (heap.layout().slab_offset(slab) + 8 * (index / 64), 8)
}

/// Set the bits `set` and clear the bits `clear` (disjoint) of bitmap word `w` of
/// `slab`, and flush the word once (the caller fences).
pub(crate) fn set_word_bits(heap: &Heap, slab: usize, w: usize, set: u64, clear: u64) {
    debug_assert_eq!(set & clear, 0);
    let word = bitmap_word(heap, slab, w);
    // Relaxed / Release and the flush: as in `set_bit`.
    if set != 0 {
        word.fetch_or(set, Ordering::Release);
    }
    if clear != 0 {
        word.fetch_and(!clear, Ordering::Release);
    }
    heap.flush(heap.layout().slab_offset(slab) + 8 * w, 8);
    counters::add_bytes_metadata(8);
}

/// The persistent bit of block `index` of `slab`.
pub(crate) fn bit(heap: &Heap, slab: usize, index: usize) -> bool {
    // Relaxed: a consistency check or a statistic; a block whose bit matters to the
    // caller was handed over through a mutex or the engine's synchronization, which
    // orders the RMW that changed it before this load.
    bitmap_word(heap, slab, index / 64).load(Ordering::Relaxed) & (1u64 << (index % 64)) != 0
}

/// Write a large run's table entries, allocated or free; returns their range `(offset,
/// len)`, which the caller flushes now or later (before its fence). Allocation writes
/// the continuations first and the head last; freeing clears the head first. The
/// engine's fence makes them durable together; a torn run after a crash is repaired by
/// replaying the logged operation.
#[must_use = "the entries must be flushed to become durable"]
pub(crate) fn write_run(heap: &Heap, head: usize, n: usize, allocated: bool) -> (usize, usize) {
    if allocated {
        for k in 1..n {
            store_entry(heap, head + k, Kind::Cont(k));
        }
        // Release: pairs with the Acquire in `Allocator::block_state` (as `set_bit`).
        entry(heap, head).store(Kind::Head(n).encode(), Ordering::Release);
    } else {
        entry(heap, head).store(Kind::Free.encode(), Ordering::Release);
        for k in 1..n {
            store_entry(heap, head + k, Kind::Free);
        }
    }
    counters::add_bytes_metadata(4 * n as u64);
    (entry_offset(heap, head), 4 * n)
}

/// True if every word of `slab`'s bitmap (class `class`) is zero.
pub(crate) fn bitmap_empty(heap: &Heap, slab: usize, class: usize) -> bool {
    // Relaxed load inside: see `bit`.
    (0..CLASSES[class].all_words()).all(|w| bitmap_word(heap, slab, w).load(Ordering::Relaxed) == 0)
}

#[cfg(test)]
/// Count allocated blocks of a small slab (valid bits only).
pub(crate) fn count_allocated(heap: &Heap, slab: usize, class: usize) -> u64 {
    (0..CLASSES[class].used_words())
        .map(|w| {
            // Relaxed: a statistic (see `bit`).
            let word = bitmap_word(heap, slab, w).load(Ordering::Relaxed);
            (word & valid_mask(class, w)).count_ones() as u64
        })
        .sum()
}

/// Call `f(index, allocated)` for every block of a small slab.
pub(crate) fn for_each_block(
    heap: &Heap,
    slab: usize,
    class: usize,
    mut f: impl FnMut(usize, bool),
) {
    let n = CLASSES[class].nblocks as usize;
    for w in 0..CLASSES[class].used_words() {
        // Relaxed: callers run single-threaded (recovery, checks) or want a statistic.
        let word = bitmap_word(heap, slab, w).load(Ordering::Relaxed);
        for i in w * 64..n.min(w * 64 + 64) {
            f(i, word & (1 << (i % 64)) != 0);
        }
    }
}

/// Read and validate the whole persistent allocator state: every slab table entry,
/// every large run, and the padding bits of every small slab's bitmap. Returns the raw
/// entries of the slabs that exist at the current size and the list of problems (empty
/// if the state is sound).
pub(crate) fn scan(heap: &Heap) -> (Vec<u32>, Vec<String>) {
    let layout = heap.layout();
    // Slabs past the current size do not exist yet: their entries must be free (a
    // growth makes the new size durable before any of them is used), and their bitmaps
    // are not read.
    let count = heap.slabs_present();
    let mut problems = Vec::new();
    for i in count..layout.slab_count {
        let e = read_entry(heap, i);
        if e != Kind::Free.encode() {
            problems.push(format!(
                "slab {i} (offset {:#x}) lies past the end of the pool ({} bytes) but the slab table says {}",
                layout.slab_offset(i),
                heap.size(),
                describe(e)
            ));
        }
    }
    let entries: Vec<u32> = (0..count).map(|i| read_entry(heap, i)).collect();
    let at = |i: usize| format!("slab {i} (offset {:#x})", layout.slab_offset(i));
    // The run being walked: (head, length).
    let mut run: Option<(usize, usize)> = None;
    for (i, &e) in entries.iter().enumerate() {
        if let Some((h, n)) = run {
            if i >= h + n {
                run = None;
            }
        }
        let kind = Kind::decode(e);
        if let Some((h, n)) = run {
            if kind != Some(Kind::Cont(i - h)) {
                problems.push(format!(
                    "{}: the large run of {n} slabs headed by slab {h} needs continuation {} here, but the slab table says {}",
                    at(i),
                    i - h,
                    describe(e)
                ));
            }
            continue;
        }
        match kind {
            None => problems.push(format!(
                "{}: slab table entry {e:#010x} is not a valid slab kind",
                at(i)
            )),
            Some(Kind::Free) => {}
            Some(Kind::Small(c)) => {
                for w in 0..CLASSES[c].all_words() {
                    // Relaxed: validation runs single-threaded or reports a snapshot.
                    let word = bitmap_word(heap, i, w).load(Ordering::Relaxed);
                    let stray = word & !valid_mask(c, w);
                    if stray != 0 {
                        problems.push(format!(
                            "{}: bitmap word {w} of a class-{c} slab ({} blocks of {} bytes) has bits {stray:#018x} set past the last block",
                            at(i),
                            CLASSES[c].nblocks,
                            CLASSES[c].size
                        ));
                    }
                }
            }
            Some(Kind::Head(n)) => {
                if n > count - i {
                    problems.push(format!(
                        "{}: head of a large run of {n} slabs, but only {} slabs remain in the heap",
                        at(i),
                        count - i
                    ));
                } else {
                    run = Some((i, n));
                }
            }
            Some(Kind::Cont(k)) => problems.push(format!(
                "{}: continuation {k} of a large run without a head (slab table entry {e:#010x})",
                at(i)
            )),
        }
    }
    (entries, problems)
}

/// Summarize a non-empty problem list as one error message.
pub(crate) fn summarize(problems: &[String]) -> String {
    match problems {
        [] => "allocator state is sound".into(),
        [one] => format!("allocator: {one}"),
        [first, rest @ ..] => format!(
            "allocator: {first} (and {} more problems; `pisces check` lists them all)",
            rest.len()
        ),
    }
}
