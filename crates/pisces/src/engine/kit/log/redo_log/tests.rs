//! The redo log's format: records read back as written over many laps of the ring,
//! torn tails told from damage wherever the chain goes on, BLOCKS entries and packed
//! blocks, line-aligned records (white-box: they forge records through the writer and
//! flip their bytes in place).

use super::{
    parse_framed, reset, Framing, LogWriter, ParsedLog, RecordBuilder, Standard, RING_OFFSET,
};
use crate::heap::{FormatParams, Heap};
use crate::medium::dram::DramMedium;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// A framing test's heap and its slot 0's log: its offset and length.
pub(crate) fn slot0_log() -> (Heap, usize, usize) {
    let heap = framing_heap();
    let l = *heap.layout();
    (heap, l.log_offset(0), l.log_bytes_per_thread)
}

/// The persistTS and entries of each record parsed, in order.
pub(crate) fn read_back(p: &ParsedLog) -> Vec<(u64, Vec<u8>)> {
    p.records
        .iter()
        .map(|r| (r.persist_ts, r.entries.clone()))
        .collect()
}

/// A heap with 2 slots of 16 KiB logs, for the framing tests.
pub(crate) fn framing_heap() -> Heap {
    let sim = Arc::new(DramMedium::anonymous(4 << 20, 0, 0).unwrap());
    Heap::format(
        sim,
        FormatParams {
            engine_id: 1,
            max_threads: 2,
            log_bytes_per_thread: 16 << 10,
            regions: Default::default(),
        },
    )
    .unwrap()
}

/// Over many laps of a small ring: a clean log reports no damage
/// (stale records of earlier laps everywhere); any record of the live chain but the
/// last, or any wrap marker inside the chain, with a header byte flipped is damage;
/// the last record, or a wrap marker right before it (record and marker share a
/// fence), flipped is a torn tail. The damage look only reads from the stop to the
/// first valid record and from offset 0 on: this checks it finds later records wherever
/// the chain puts them (before the end of the ring, after a wrap, behind a damaged
/// marker's stale gap).
#[test]
fn damage_is_found_wherever_the_chain_continues() {
    // The sequence number's first byte in a standard header.
    chain_damage_is_found(Standard, 16);
}

/// The body of [`damage_is_found_wherever_the_chain_continues`] for records framed by
/// `framing`, whose header holds (part of) the sequence number at byte `seq_byte`.
pub(crate) fn chain_damage_is_found<F: Framing>(framing: F, seq_byte: usize) {
    {
        let (heap, off, len) = slot0_log();
        let cap = len - RING_OFFSET;
        let ring = off + RING_OFFSET;
        reset(&heap, off, 3);
        let mut w = LogWriter::framed(framing, off, len, 3);
        // (persist ts, ring offset of the record, ring offset of the wrap marker
        // written just before it)
        let mut live: std::collections::VecDeque<(u64, usize, Option<usize>)> = Default::default();
        let mut head = 0usize;
        let min_header = framing.header_len(8);
        let flip = |at: usize| {
            let mut b = [0u8; 1];
            heap.read_bytes(ring + at, &mut b);
            b[0] ^= 0x04;
            heap.write_bytes(ring + at, &b);
        };
        let (mut damaged, mut torn) = (0, 0);
        for i in 0..700u64 {
            let mut r = RecordBuilder::default();
            r.op(7, &i.to_le_bytes().repeat(1 + (i % 7) as usize * 5));
            while !w.fits(r.len()) {
                let (oldest, ..) = live.pop_front().unwrap();
                w.recycle(&heap, u64::MAX, oldest + 1);
            }
            // Where the writer puts it (its placement rule, mirrored).
            let rec_len = framing.header_len(r.len()) + r.len();
            let mut marker = None;
            if rec_len > cap - head {
                if cap - head >= min_header {
                    marker = Some(head);
                }
                head = 0;
            }
            live.push_back((100 + i, head, marker));
            head = (head + rec_len) % cap;
            w.append(&heap, r.bytes(), 100 + i);
            heap.fence();
            let p = parse_framed(&heap, off, len, framing);
            assert!(
                p.damage.is_none(),
                "{framing:?} clean, record {i}: {:?}",
                p.damage
            );
            assert_eq!(p.records.len(), live.len(), "{framing:?} record {i}");
            if i % 5 != 0 {
                continue;
            }
            let n = live.len();
            for (j, &(_, pos, marker)) in live.iter().enumerate() {
                // A header byte of the record (in its sequence number).
                let mut cases = vec![(pos + seq_byte, j + 1 == n)];
                if let Some(m) = marker {
                    // The marker before the chain's first record is where the parse
                    // starts; before any other it sits inside the chain.
                    cases.push((m + seq_byte, j + 1 == n));
                }
                for (at, is_tail) in cases {
                    flip(at);
                    let p = parse_framed(&heap, off, len, framing);
                    if is_tail {
                        assert!(
                            p.damage.is_none(),
                            "{framing:?} record {i}: the tail (live {j}) flipped: {:?}",
                            p.damage
                        );
                        // Recovery resets the log to what the parse says comes next;
                        // the reset log must parse clean and empty, though the torn
                        // tail's bytes (a torn wrap's record among them) stay in the
                        // ring: a crash before the next append reopens it.
                        let tail_word = heap.atomic_u64(off).load(Ordering::Relaxed);
                        reset(&heap, off, p.next_seq);
                        let again = parse_framed(&heap, off, len, framing);
                        assert!(
                            again.damage.is_none() && again.records.is_empty(),
                            "{framing:?} record {i}: the log reset after a torn tail (live {j}) flipped: {:?}, {} records",
                            again.damage,
                            again.records.len()
                        );
                        heap.atomic_u64(off).store(tail_word, Ordering::Relaxed);
                        torn += 1;
                    } else {
                        assert!(
                            p.damage.is_some(),
                            "{framing:?} record {i}: live record {j} of {n} flipped (at {at:#x}) was taken for a torn tail"
                        );
                        damaged += 1;
                    }
                    flip(at);
                }
            }
        }
        assert!(
            damaged > 1000 && torn > 100,
            "{framing:?}: {damaged} {torn}"
        );
    }
}

/// Every block a heap can hold packs into one word and back: each small class at
/// offsets across the 16-byte grid, large runs of several lengths; sizes and offsets
/// no block has do not pack, and words no block packs to are refused.
#[test]
fn blocks_pack_into_one_word_and_back() {
    use crate::heap::alloc::{Allocator, Block};
    use crate::heap::layout::SLAB_SIZE;
    let mut sizes: Vec<u64> = (0..20_000).filter_map(Allocator::block_size_for).collect();
    sizes.dedup();
    assert!(sizes.len() > 30, "{} sizes", sizes.len());
    for &size in &sizes {
        for offset in [16u64, 4096 + 48, (1 << 40) + 16, 0x7F_FFF0] {
            let b = Block { offset, size };
            let w = b.pack().unwrap_or_else(|| panic!("{b:?} does not pack"));
            assert_eq!(w >> 62, 0, "{b:?}");
            assert_eq!(Block::unpack(w), Ok(b));
            assert_eq!(Block::unpack(w | 3 << 62), Ok(b), "bits 62, 63 ignored");
        }
    }
    for n in [1u64, 2, 17, 65_535] {
        let b = Block {
            offset: 3 << 20,
            size: n * SLAB_SIZE as u64,
        };
        assert_eq!(Block::unpack(b.pack().unwrap()), Ok(b));
    }
    let no = [
        Block {
            offset: 8,
            size: 32,
        }, // misaligned
        Block {
            offset: 16,
            size: 40,
        }, // no class of that size
        Block {
            offset: 16,
            size: 3 * SLAB_SIZE as u64 / 2,
        },
        Block {
            offset: 1 << 44,
            size: SLAB_SIZE as u64,
        }, // too far for a large run
        Block {
            offset: 0,
            size: (1 << 16) * SLAB_SIZE as u64,
        }, // run too long
    ];
    for b in no {
        assert_eq!(b.pack(), None, "{b:?}");
    }
    assert!(Block::unpack(40).is_err(), "code 40 is no class");
    assert!(Block::unpack(63).is_err(), "a large run of 0 slabs");
}

/// Allocator changes written with `RecordBuilder::blocks` take 8 bytes each (plus 8
/// per run) and decode as the ALLOC and FREE entries they stand for, in order, with
/// blocks that do not pack written as ordinary entries between runs; a count that
/// overruns the record is an error.
#[test]
fn blocks_entries_round_trip() {
    use super::{decode, Entry};
    use crate::heap::alloc::Block;
    let b = |i: u64| Block {
        offset: 0x2_0000 + 64 * i,
        size: 64,
    };
    let odd = Block {
        offset: 8,
        size: 64,
    }; // does not pack
    let mut r = RecordBuilder::default();
    r.range(0x100, &[1; 8]);
    let changes = [
        (true, b(0)),
        (false, b(1)),
        (true, odd),
        (false, b(2)),
        (false, odd),
    ];
    r.blocks(&changes);
    assert_eq!(r.len(), 24 + (8 + 16) + 16 + (8 + 8) + 16);
    let got = decode(r.bytes()).unwrap();
    let want: Vec<Entry> = std::iter::once(Entry::Range {
        off: 0x100,
        data: &[1; 8],
    })
    .chain(
        changes
            .iter()
            .map(|&(a, b)| if a { Entry::Alloc(b) } else { Entry::Free(b) }),
    )
    .collect();
    assert_eq!(got, want);
    let mut r = RecordBuilder::default();
    r.blocks(&(0..100).map(|i| (i % 2 == 0, b(i))).collect::<Vec<_>>());
    assert_eq!(r.len(), 8 + 800);
    assert_eq!(decode(r.bytes()).unwrap().len(), 100);
    assert!(decode(&r.bytes()[..r.len() - 8]).is_err(), "count overruns");
    let mut e = RecordBuilder::default();
    e.blocks(&[]);
    assert!(e.bytes().is_empty());
}

/// Line-aligned records read back exactly over many laps of the ring (wraps with and
/// without markers, recycling), each starts on a 64-byte boundary of the pool, and a
/// record flushes only its own lines: `ceil(len / 64)`, a wrap marker's line, and the
/// log's header line (the newest-record word) at most once per page of log the head
/// enters. A damaged record in the middle of a line-aligned chain is still told from a
/// torn tail.
#[test]
fn line_aligned_records_round_trip_and_flush_only_their_own_lines() {
    use super::parse;
    let (heap, off, len) = slot0_log();
    reset(&heap, off, 5);
    let mut w = LogWriter::new(off, len, 5).line_aligned();
    let mut live: std::collections::VecDeque<(u64, Vec<u8>)> = Default::default();
    // Lines flushed beyond the records' own, and the pages the head entered.
    let (mut extra, mut pages) = (0u64, 0u64);
    for i in 0..1200u64 {
        let mut r = RecordBuilder::default();
        // 16 to 16 + 8 * 13 bytes of data: records of 64 to 168 bytes, so the
        // unaligned ends vary and the ring wraps at many different places.
        r.range(4096 + 8 * i, &i.to_le_bytes().repeat(2 + (i % 14) as usize));
        while !w.fits(r.len()) {
            let (oldest, _) = live.pop_front().unwrap();
            w.recycle(&heap, u64::MAX, oldest + 1);
        }
        let before = crate::medium::counters::snapshot();
        let head_page = (off + RING_OFFSET + w.head) / super::PAGE;
        w.append(&heap, r.bytes(), 100 + i);
        let lines = (crate::medium::counters::snapshot() - before).lines_flushed;
        let rec_len = super::HEADER_LEN + r.len();
        let own = rec_len.div_ceil(64) as u64;
        // A wrap marker adds its line; the newest-record word the header line.
        assert!(
            (own..=own + 2).contains(&lines),
            "record {i} of {rec_len} bytes flushed {lines} lines"
        );
        extra += lines - own;
        let wrapped = w.head < rec_len;
        if wrapped || (off + RING_OFFSET + w.head - 1) / super::PAGE != head_page {
            pages += 1;
        }
        heap.fence();
        live.push_back((100 + i, r.bytes().to_vec()));
        let p = parse(&heap, off, len);
        assert!(p.damage.is_none(), "{:?}", p.damage);
        let got = read_back(&p);
        assert_eq!(got, Vec::from(live.clone()), "after record {i}");
    }
    // Markers and word stores: about two per page entered (a word store per page, a
    // marker per lap), not one per record.
    assert!(
        extra <= 2 * pages + 2,
        "{extra} lines beyond the records' own over {pages} pages of log"
    );
    // Every live record starts on a line: find each one's header in the ring.
    let ring = off + RING_OFFSET;
    assert_eq!(ring % 64, 0);
    let mut starts = 0;
    for pos in (ring..off + len).step_by(8) {
        let mut w = [0u8; 8];
        heap.read_bytes(pos, &mut w);
        // magic "PREC" and kind 4 (TX_LINE)
        if u32::from_le_bytes(w[..4].try_into().unwrap()) == 0x5052_4543
            && u32::from_le_bytes(w[4..].try_into().unwrap()) == 4
        {
            assert_eq!(pos % 64, 0, "a line-aligned record at {pos:#x}");
            starts += 1;
        }
    }
    assert!(
        starts >= live.len(),
        "{starts} record headers for {} live",
        live.len()
    );
    // Damage to a record with later ones after it: refused, not a torn tail.
    let p = parse(&heap, off, len);
    let n = p.records.len();
    assert!(n > 3);
    let target = p.records[n - 3].seq;
    let mut pos = ring;
    let mut found = None;
    while pos < off + len {
        let mut h = [0u8; 24];
        heap.read_bytes(pos, &mut h);
        if u32::from_le_bytes(h[..4].try_into().unwrap()) == 0x5052_4543
            && u64::from_le_bytes(h[16..24].try_into().unwrap()) == target
        {
            found = Some(pos);
            break;
        }
        pos += 64;
    }
    let at = found.expect("the record's header on a line");
    let mut b = [0u8; 1];
    heap.read_bytes(at + 40, &mut b);
    heap.write_bytes(at + 40, &[b[0] ^ 1]);
    let p = parse(&heap, off, len);
    assert!(
        p.damage.is_some(),
        "damage in a line-aligned chain not found"
    );
}

/// Mutation evidence for the parser's step over the gap after a line-aligned record:
/// without it the parser stops at the gap and loses every later record.
#[cfg(feature = "mutation")]
#[test]
fn line_aligned_parser_must_skip_the_gap() {
    use super::parse;
    use crate::mutation::MutationPoint;
    let sc = crate::mutation::Scenario::setup();
    let (heap, off, len) = slot0_log();
    reset(&heap, off, 0);
    let mut w = LogWriter::new(off, len, 0).line_aligned();
    for i in 0..4u64 {
        let mut r = RecordBuilder::default();
        r.word(4096, i); // 48-byte records: a 16-byte gap after each
        w.append(&heap, r.bytes(), 1 + i);
    }
    heap.fence();
    let count = |m: Option<&'static MutationPoint>| {
        // SAFETY: a mutation test: the run exists to show the removed step matters, and
        // its outcome is read only as that evidence (see
        // `pisces::mutation::Scenario::set`); the switch changes only this parse.
        unsafe { sc.set(m) };
        let n = parse(&heap, off, len).records.len();
        sc.clear();
        n
    };
    assert_eq!(count(None), 4);
    assert_eq!(count(Some(&super::LOG_LINE_SKIP)), 1);
}

/// The newest-record word (module docs): losing every record of the page that holds
/// the log's end (a zeroed page, a lost page write) is damage, also when the first
/// record lost started on the page before; a page that holds only the newest record
/// lost is a torn tail; a torn newest record is not damage; a damaged word is; a zero
/// word (a log reset, or written by a build without the word) claims nothing. And the
/// word is stored about once per page, not per record.
#[test]
fn lost_records_at_the_end_of_the_chain_are_damage() {
    use super::{parse, PAGE};
    let (heap, off, len) = slot0_log();
    let ring = off + RING_OFFSET;
    reset(&heap, off, 1);
    let mut w = LogWriter::new(off, len, 1);
    // Records of 32 + 16 + 200 bytes: the third page of the area is entered by a
    // record that starts on the second and ends on the third.
    let mut at = Vec::new();
    let mut i = 0u64;
    let mut word_stores = 0;
    let page3 = (off / PAGE + 2) * PAGE;
    let mut append = |w: &mut LogWriter, at: &mut Vec<usize>| {
        let mut r = RecordBuilder::default();
        r.range(4096 + 8 * i, &[i as u8; 200]);
        at.push(ring + w.head);
        let word = heap
            .atomic_u64(off + super::NEWEST_OFFSET)
            .load(Ordering::Relaxed);
        w.append(&heap, r.bytes(), 100 + i);
        heap.fence();
        if heap
            .atomic_u64(off + super::NEWEST_OFFSET)
            .load(Ordering::Relaxed)
            != word
        {
            word_stores += 1;
        }
        i += 1;
    };
    while ring + w.head < page3 {
        append(&mut w, &mut at);
    }
    // The newest record alone reaches the third page (it straddles): losing the page
    // loses the newest record only, as a crash may.
    let straddler = at.len() - 1;
    assert!(at[straddler] < page3 && ring + w.head > page3);
    let saved = |from: usize, to: usize| {
        let mut b = vec![0u8; to - from];
        heap.read_bytes(from, &mut b);
        b
    };
    let page = saved(page3, page3 + PAGE);
    heap.write_bytes(page3, &vec![0u8; PAGE]);
    let p = parse(&heap, off, len);
    assert!(p.damage.is_none(), "{:?}", p.damage);
    assert_eq!(p.records.len(), straddler);
    heap.write_bytes(page3, &page);
    // Three records more on the third page: losing the page now loses four records.
    for _ in 0..3 {
        append(&mut w, &mut at);
    }
    assert!(ring + w.head < page3 + PAGE);
    let page = saved(page3, page3 + PAGE);
    heap.write_bytes(page3, &vec![0u8; PAGE]);
    let p = parse(&heap, off, len);
    assert!(p.damage.is_some(), "a lost page at the log's end not found");
    heap.write_bytes(page3, &page);
    // The newest record torn: a crash may leave that.
    let newest = *at.last().unwrap();
    let tail = saved(newest, ring + w.head);
    heap.write_bytes(newest, &vec![0u8; tail.len()]);
    let p = parse(&heap, off, len);
    assert!(p.damage.is_none(), "{:?}", p.damage);
    assert_eq!(p.records.len(), at.len() - 1);
    heap.write_bytes(newest, &tail);
    assert!(parse(&heap, off, len).damage.is_none());
    // A damaged word.
    let word = off + super::NEWEST_OFFSET;
    let good = saved(word, word + 8);
    heap.write_bytes(word, &[good[0] ^ 4]);
    assert!(parse(&heap, off, len).damage.is_some());
    // A zero word claims nothing.
    heap.write_bytes(word, &[0u8; 8]);
    heap.write_bytes(page3, &vec![0u8; PAGE]);
    let p = parse(&heap, off, len);
    assert!(p.damage.is_none(), "{:?}", p.damage);
    assert_eq!(p.records.len(), straddler);
    // One store per page the head entered with a record after the first.
    assert!(
        word_stores <= 3,
        "{word_stores} word stores for {} records",
        at.len()
    );
}

/// A wrap marker and the record after it share the append's fence, and the
/// newest-record word names the marker: a crash that keeps the word but tears the
/// marker and the record is a torn tail, not damage.
#[test]
fn a_torn_wrap_marker_under_a_durable_newest_word_is_not_damage() {
    use super::parse;
    let (heap, off, len) = slot0_log();
    reset(&heap, off, 1);
    let mut w = LogWriter::new(off, len, 1);
    let ring = off + RING_OFFSET;
    let record = |i: u64| {
        let mut r = RecordBuilder::default();
        r.range(4096 + 8 * i, &[i as u8; 200]);
        r
    };
    let mut i = 0;
    // Fill until the next record wraps with a marker.
    loop {
        let r = record(i);
        let rec = super::HEADER_LEN + r.len();
        if w.cap - w.head < rec && w.cap - w.head >= super::HEADER_LEN {
            break;
        }
        w.append(&heap, r.bytes(), 100 + i);
        heap.fence();
        i += 1;
    }
    let before_marker = parse(&heap, off, len).records.len();
    let marker_at = w.head;
    let mut old = [0u8; super::HEADER_LEN];
    heap.read_bytes(ring + marker_at, &mut old);
    // Recycle everything at offset 0 so the record fits there.
    w.recycle(&heap, u64::MAX, u64::MAX);
    let kept = parse(&heap, off, len).records.len();
    assert_eq!(kept, 0, "{before_marker} records recycled");
    let r = record(i);
    let mut old_first = vec![0u8; super::HEADER_LEN + r.len()];
    heap.read_bytes(ring, &mut old_first);
    w.append(&heap, r.bytes(), 100 + i);
    heap.fence();
    assert_eq!(parse(&heap, off, len).records.len(), 1);
    // The marker and the record torn (their old bytes back), the word durable.
    heap.write_bytes(ring + marker_at, &old);
    heap.write_bytes(ring, &old_first);
    let p = parse(&heap, off, len);
    assert!(p.damage.is_none(), "{:?}", p.damage);
}

/// An unfenced run (deferred durability) may lose any of its records at a crash: the
/// chain stops at the first one lost, and the run's later records are not damage. A
/// lost record before the run, or inside a run that a later fence covered, still is.
/// The newest-record word never names an item past the run's first one.
#[test]
fn an_unfenced_run_may_lose_any_of_its_records() {
    use super::{parse, NEWEST_OFFSET};
    use crate::engine::kit::log::checked_word;
    let (heap, off, len) = slot0_log();
    let ring = off + RING_OFFSET;
    reset(&heap, off, 1);
    let mut w = LogWriter::new(off, len, 1);
    let record = |i: u64| {
        let mut r = RecordBuilder::default();
        r.range(4096 + 8 * i, &[i as u8; 200]);
        r
    };
    let mut at = Vec::new();
    for i in 0..2 {
        at.push(ring + w.head);
        w.append(&heap, record(i).bytes(), 100 + i);
        heap.fence();
    }
    let run_first = w.next_seq();
    // Enough records to cross pages, where the writer stores the newest-record word.
    for i in 2..40 {
        at.push(ring + w.head);
        w.append_unfenced(&heap, record(i).bytes(), 100 + i);
    }
    assert!(w.in_run());
    let word = heap.atomic_u64(off + NEWEST_OFFSET).load(Ordering::Relaxed);
    let named = checked_word::decode(word).expect("the word was stored");
    assert!(
        named <= run_first,
        "the word names {named}, past the run's first {run_first}"
    );
    let lose = |k: usize| {
        let mut b = [0u8; super::HEADER_LEN];
        heap.read_bytes(at[k], &mut b);
        heap.write_bytes(at[k], &[0u8; super::HEADER_LEN]);
        b
    };
    // A record inside the run lost: the chain ends before it, no damage.
    for k in [2, 7, 39] {
        let saved = lose(k);
        let p = parse(&heap, off, len);
        assert!(p.damage.is_none(), "record {k}: {:?}", p.damage);
        assert_eq!(p.records.len(), k, "record {k} lost");
        heap.write_bytes(at[k], &saved);
    }
    // A fenced record before the run lost, the run's records valid: damage.
    let saved = lose(1);
    assert!(
        parse(&heap, off, len).damage.is_some(),
        "a lost fenced record"
    );
    heap.write_bytes(at[1], &saved);
    // The run ended by a fence, then a record appended after it: a lost record of the
    // run is now damage (the fence made it durable), found past the run's records.
    heap.fence();
    w.fenced();
    assert!(!w.in_run());
    w.append(&heap, record(40).bytes(), 140);
    heap.fence();
    let saved = lose(7);
    assert!(
        parse(&heap, off, len).damage.is_some(),
        "a lost record of a fenced run"
    );
    heap.write_bytes(at[7], &saved);
    let p = parse(&heap, off, len);
    assert!(p.damage.is_none(), "{:?}", p.damage);
    assert_eq!(p.records.len(), 41);
}
