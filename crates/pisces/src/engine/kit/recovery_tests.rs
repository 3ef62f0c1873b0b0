//! Recovery edge cases: header words left by old runs, damaged logs (white-box: they
//! forge log records and header words through the kit).

use crate::engine::kit::cc::header_word::tag_of;
use crate::engine::kit::log::redo_log::{LogWriter, RecordBuilder};
use crate::heap::superblock::Superblock;
use crate::heap::{FormatParams, Heap};
use crate::medium::dram::DramMedium;
use crate::medium::Medium;
use crate::{Config, EngineOptions, Error, PPtr, Pool};
use std::sync::Arc;

fn small_cfg() -> Config {
    Config {
        size: 16 << 20,
        max_threads: 2,
        log_bytes_per_thread: 64 << 10,
        ..Config::default()
    }
}

fn rewrite_generation(path: &std::path::Path, generation: u64) {
    let mut bytes = std::fs::read(path).unwrap();
    for copy in 0..2 {
        let off = copy * 4096;
        let n = std::mem::size_of::<Superblock>();
        let mut sb: Superblock = bytemuck::pod_read_unaligned(&bytes[off..off + n]);
        sb.run_generation = generation;
        let sb = sb.seal();
        bytes[off..off + n].copy_from_slice(bytemuck::bytes_of(&sb));
    }
    std::fs::write(path, bytes).unwrap();
}

fn poke(path: &std::path::Path, off: u64, value: u64) {
    let mut bytes = std::fs::read(path).unwrap();
    bytes[off as usize..off as usize + 8].copy_from_slice(&value.to_le_bytes());
    std::fs::write(path, bytes).unwrap();
}

/// A header word left by a run whose tag equals the current run's (65535 runs ago)
/// must not be followed as a lock: opening at the wrap clears every header word.
#[test]
fn tag_wrap_clears_header_words_of_long_ago_runs() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("wrap.pool");
    let x = {
        let pool = Pool::create(&path, small_cfg()).unwrap();
        let root: PPtr<PPtr<u64>> = pool.root().unwrap();
        pool.run(|tx| {
            let x = tx.alloc(5u64)?;
            *tx.write(root)? = x;
            Ok(x)
        })
        .unwrap()
    };
    // The next open is run 0xFFFF, whose tag is that of run 0: plant a "lock" of that
    // tag pointing nowhere in x's header word.
    rewrite_generation(&path, 0xFFFE);
    poke(&path, x.offset() - 8, tag_of(0xFFFF) | 0x10);
    let pool = Pool::open(&path, small_cfg()).unwrap();
    assert_eq!(pool.heap().unwrap().generation(), 0xFFFF);
    assert_eq!(pool.run(|tx| Ok(*tx.read(x)?)).unwrap(), 5);
    pool.run(|tx| {
        *tx.write(x)? = 6;
        Ok(())
    })
    .unwrap();
    assert_eq!(pool.run(|tx| Ok(*tx.read(x)?)).unwrap(), 6);
}

/// When a slab is reused for another size class, its new header words sit on old
/// payload bytes; old bytes that look like a lock of the current run must not be
/// followed (the allocator zeroes header words when it formats a slab).
#[test]
fn reformatted_slab_has_no_lock_shaped_header_words() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("reformat.pool");
    let next_generation = {
        let pool = Pool::create(&path, small_cfg()).unwrap();
        let next = pool.heap().unwrap().generation() + 1;
        let mut h = pool.handle().unwrap();
        // Objects of one class, every payload word shaped like a lock of the next run.
        let fake = tag_of(next) | 0x10;
        let objs: Vec<PPtr<[u64; 13]>> = (0..2000)
            .map(|_| h.run(|tx| tx.alloc([fake; 13])).unwrap())
            .collect();
        for o in objs {
            h.run(|tx| tx.free(o)).unwrap();
        }
        next
    };
    // Reopen: empty slabs return to the free state; a different class reuses them.
    let pool = Pool::open(&path, small_cfg()).unwrap();
    assert_eq!(pool.heap().unwrap().generation(), next_generation);
    let mut h = pool.handle().unwrap();
    for i in 0..3000u64 {
        let p = h.run(|tx| tx.alloc([i; 5])).unwrap();
        assert_eq!(h.run(|tx| Ok(tx.read(p)?[4])).unwrap(), i);
    }
}

/// A log record with a valid checksum but an impossible target makes the pool refused
/// as corrupt — before any record is replayed, so the image is unchanged.
#[test]
fn damaged_log_is_refused_before_anything_is_written() {
    let size = 4 << 20;
    let sim = Arc::new(DramMedium::anonymous(size, 0, 0).unwrap());
    let heap = Heap::format(
        sim.clone(),
        FormatParams {
            engine_id: 1,
            max_threads: 2,
            log_bytes_per_thread: 64 << 10,
            regions: Default::default(),
        },
    )
    .unwrap();
    let l = *heap.layout();
    // Slot 0: a valid record (persistTS 5) writing a heap word.
    let mut good = RecordBuilder::default();
    good.word(l.heap_offset as u64 + 4096, 0xABCD);
    let mut w0 = LogWriter::new(l.log_offset(0), l.log_bytes_per_thread, 0);
    w0.append(&heap, good.bytes(), 5);
    // Slot 1: a later record writing outside the heap (into the superblock).
    let mut bad = RecordBuilder::default();
    bad.word(64, 0xDEAD);
    let mut w1 = LogWriter::new(l.log_offset(1), l.log_bytes_per_thread, 0);
    w1.append(&heap, bad.bytes(), 9);
    heap.fence();
    drop(heap);
    // Compare every byte of the image, flushed or not.
    let image = |m: &DramMedium| {
        // SAFETY: the medium's image is valid for `len()` bytes; no thread writes it
        // while we copy (the pool refused to open, nothing else uses the medium).
        unsafe { std::slice::from_raw_parts(m.base(), m.len()) }.to_vec()
    };
    let before = image(&sim);
    let opened = Pool::open_on(
        sim.clone(),
        Config {
            engine_options: EngineOptions::default(),
            ..small_cfg()
        },
    );
    assert!(
        matches!(opened, Err(Error::Corrupt(_))),
        "{:?}",
        opened.err()
    );
    assert!(image(&sim) == before, "a refused pool was written");
    let _ = sim.len();
}

/// A heap with 2 slots of 16 KiB logs, for the framing tests.
fn framing_heap() -> Heap {
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

/// Compact records read back exactly (short and long headers, wraps over many laps,
/// recycling), and take 16 header bytes where standard ones take 32.
#[test]
fn compact_framing_round_trips_over_many_laps() {
    use crate::engine::kit::log::redo_log::{parse_framed, Framing, COMPACT_HEADER_LEN};
    let heap = framing_heap();
    let l = *heap.layout();
    let (off, len) = (l.log_offset(0), l.log_bytes_per_thread);
    crate::engine::kit::log::redo_log::reset(&heap, off, 7);
    let mut w = LogWriter::framed(Framing::Compact, off, len, 7);
    let mut live: std::collections::VecDeque<(u64, Vec<u8>)> = Default::default();
    for i in 0..1500u64 {
        let mut r = RecordBuilder::default();
        r.op(0x4841_5348, &i.to_le_bytes().repeat(1 + (i % 5) as usize));
        let ts = (1 << 47) + i; // timestamps use the whole 48 bits
        while !w.fits(r.len()) {
            let (oldest, _) = live.pop_front().unwrap();
            w.recycle(&heap, u64::MAX, oldest + 1);
        }
        w.append(&heap, r.bytes(), ts);
        heap.fence();
        live.push_back((ts, r.bytes().to_vec()));
        let p = parse_framed(&heap, off, len, Framing::Compact);
        assert!(p.damage.is_none(), "{:?}", p.damage);
        let got: Vec<_> = p
            .records
            .iter()
            .map(|r| (r.persist_ts, r.entries.clone()))
            .collect();
        assert_eq!(got, Vec::from(live.clone()), "after record {i}");
        assert_eq!(p.next_seq, p.records.last().unwrap().seq + 1);
    }
    assert_eq!(Framing::Compact.header_len(24), COMPACT_HEADER_LEN);
    assert_eq!(
        Framing::Compact.header_len(0x3FFF * 8),
        COMPACT_HEADER_LEN + 8
    );
    // A record too long for the 14-bit length field takes the 24-byte header.
    let heap = framing_heap();
    let big_area = 64 << 10;
    let sim_heap = {
        let sim = Arc::new(DramMedium::anonymous(8 << 20, 0, 0).unwrap());
        Heap::format(
            sim,
            FormatParams {
                engine_id: 1,
                max_threads: 1,
                log_bytes_per_thread: 4 * big_area,
                regions: Default::default(),
            },
        )
        .unwrap()
    };
    drop(heap);
    let l = *sim_heap.layout();
    let mut w = LogWriter::framed(Framing::Compact, l.log_offset(0), l.log_bytes_per_thread, 0);
    let mut r = RecordBuilder::default();
    r.op(1, &vec![0x5A; 0x3FFF * 8]);
    w.append(&sim_heap, r.bytes(), 3);
    sim_heap.fence();
    let p = parse_framed(
        &sim_heap,
        l.log_offset(0),
        l.log_bytes_per_thread,
        Framing::Compact,
    );
    assert_eq!(p.records.len(), 1);
    assert_eq!(p.records[0].entries, r.bytes());
    assert_eq!(p.records[0].persist_ts, 3);
}

/// A compact record with any bit of its header or entries flipped is not read (torn
/// tail: the records before it are); a damaged record followed by a valid later one is
/// reported as damage, not taken for a torn tail.
#[test]
fn compact_framing_detects_torn_and_damaged_records() {
    use crate::engine::kit::log::redo_log::{parse_framed, Framing, RING_OFFSET};
    let heap = framing_heap();
    let l = *heap.layout();
    let (off, len) = (l.log_offset(0), l.log_bytes_per_thread);
    let mut w = LogWriter::framed(Framing::Compact, off, len, 0);
    let rec = |i: u64| {
        let mut r = RecordBuilder::default();
        r.op(9, &[i as u8; 16]);
        r
    };
    let r0 = rec(0);
    w.append(&heap, r0.bytes(), 10);
    let r1 = rec(1);
    w.append(&heap, r1.bytes(), 11);
    heap.fence();
    let rec_len = 16 + r0.len();
    let ring = off + RING_OFFSET;
    let flip = |at: usize, bit: u8| {
        let mut b = [0u8; 1];
        heap.read_bytes(at, &mut b);
        b[0] ^= 1 << bit;
        heap.write_bytes(at, &b);
    };
    // Every byte of the last record: flipping it drops that record only.
    for at in 0..rec_len {
        flip(ring + rec_len + at, (at % 8) as u8);
        let p = parse_framed(&heap, off, len, Framing::Compact);
        assert_eq!(p.records.len(), 1, "byte {at} of the last record flipped");
        assert!(p.damage.is_none());
        flip(ring + rec_len + at, (at % 8) as u8);
    }
    // Every byte of the first record: the valid second record proves damage.
    for at in 0..rec_len {
        flip(ring + at, (at % 8) as u8);
        let p = parse_framed(&heap, off, len, Framing::Compact);
        assert!(
            p.records.is_empty(),
            "byte {at} of the first record flipped"
        );
        assert!(p.damage.is_some(), "byte {at} of the first record flipped");
        flip(ring + at, (at % 8) as u8);
    }
    let p = parse_framed(&heap, off, len, Framing::Compact);
    assert_eq!(p.records.len(), 2);
    assert!(p.damage.is_none());
}

/// Over many laps of a small ring, in both framings: a clean log reports no damage
/// (stale records of earlier laps everywhere); any record of the live chain but the
/// last, or any wrap marker inside the chain, with a header byte flipped is damage;
/// the last record, or a wrap marker right before it (record and marker share a
/// fence), flipped is a torn tail. The damage look only reads from the stop to the
/// first valid record and from offset 0 on: this checks it finds later records wherever
/// the chain puts them (before the end of the ring, after a wrap, behind a damaged
/// marker's stale gap).
#[test]
fn damage_is_found_wherever_the_chain_continues() {
    use crate::engine::kit::log::redo_log::{parse_framed, reset, Framing, RING_OFFSET};
    for framing in [Framing::Standard, Framing::Compact] {
        let heap = framing_heap();
        let l = *heap.layout();
        let (off, len) = (l.log_offset(0), l.log_bytes_per_thread);
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
                // A header byte of the record (its sequence half in both framings).
                let seq_byte = match framing {
                    Framing::Standard => 16,
                    Framing::Compact => 4,
                };
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

/// Operation records read back exactly through the compact framing (arguments of
/// every length modulo 8, up to 31 blocks allocated or freed, small and large), take
/// 16 header bytes plus the padded arguments plus 8 per block (32 bytes for 16
/// argument bytes, 40 with one allocation), and a record that has no such form is
/// refused by the builder.
#[test]
fn operation_records_round_trip() {
    use crate::engine::kit::log::redo_log::{decode_op_record, parse_framed, Entry, Framing};
    use crate::heap::alloc::Block;
    let heap = framing_heap();
    let l = *heap.layout();
    let (off, len) = (l.log_offset(0), l.log_bytes_per_thread);
    let mut w = LogWriter::framed(Framing::Compact, off, len, 0);
    let mut r = RecordBuilder::default();
    let small = |i: u64| Block {
        offset: 0x10_0000 + 48 * i,
        size: 48,
    };
    let large = Block {
        offset: 0x40_0000,
        size: 2 << 16,
    };
    let mut want = Vec::new();
    for (i, nargs) in [16usize, 0, 1, 7, 8, 9, 15, 23, 100]
        .into_iter()
        .enumerate()
    {
        let args: Vec<u8> = (0..nargs).map(|k| (k * 7 + i) as u8 | 1).collect();
        let blocks: Vec<(bool, Block)> = (0..i as u64 * 3 % 32)
            .map(|k| (k % 3 != 1, if k == 5 { large } else { small(k) }))
            .collect();
        let tag = r.op_record(i as u8 * 15, &args, &blocks).unwrap();
        // One word per block, except that a small allocation right after a small
        // allocation of the block before it continues a run (one run word per run).
        let mut words = 0;
        let mut in_run = false;
        for (j, &(alloc, b)) in blocks.iter().enumerate() {
            let continues = j > 0 && alloc && b.is_small() && {
                let (palloc, p) = blocks[j - 1];
                palloc && p.size == b.size && p.offset + p.size == b.offset
            };
            if !continues {
                words += 1;
                in_run = false;
            } else if !in_run {
                words += 1;
                in_run = true;
            }
        }
        assert_eq!(r.len(), nargs.next_multiple_of(8) + 8 * words);
        w.append_op(&heap, r.bytes(), tag, 100 + i as u64);
        want.push((i as u8 * 15, args, blocks));
    }
    heap.fence();
    let p = parse_framed(&heap, off, len, Framing::Compact);
    assert!(p.damage.is_none());
    assert_eq!(p.records.len(), want.len());
    for (rec, (index, args, blocks)) in p.records.iter().zip(&want) {
        let op = decode_op_record(rec.op_tag.expect("an operation record"), &rec.entries).unwrap();
        assert_eq!(op.index, *index);
        assert_eq!(op.args, &args[..]);
        let got: Vec<(bool, Block)> = op
            .blocks
            .iter()
            .map(|e| match *e {
                Entry::Alloc(b) => (true, b),
                Entry::Free(b) => (false, b),
                ref e => panic!("{e:?}"),
            })
            .collect();
        assert_eq!(&got, blocks);
    }
    // Sizes: 16 + 16 for a hash remove's arguments (few zero bytes: not packed), + 8
    // per allocation; 16 zero bytes pack into 8 (length, two mask bytes, padding).
    let key = [0xA5u8; 16];
    assert!(r.op_record(0, &key, &[]).is_some());
    assert_eq!(16 + r.len(), 32);
    assert!(r.op_record(0, &key, &[(true, small(0))]).is_some());
    assert_eq!(16 + r.len(), 40);
    assert!(r.op_record(0, &[0; 16], &[]).is_some());
    assert_eq!(16 + r.len(), 24);
    // Consecutive allocations of one class: one word and a run word.
    let run: Vec<_> = (0..40).map(|k| (true, small(k))).collect();
    assert!(r.op_record(0, &key, &run).is_some());
    assert_eq!(16 + r.len(), 48);
    // No such form: too many block words, a block that does not pack.
    let many: Vec<_> = (0..32).map(|k| (true, small(2 * k))).collect();
    assert_eq!(r.op_record(0, &[0; 16], &many), None);
    assert!(r.bytes().is_empty());
    let odd = Block {
        offset: 8,
        size: 48,
    };
    assert_eq!(r.op_record(0, &[0; 16], &[(true, odd)]), None);
    assert!(r.bytes().is_empty());
}

/// Arguments with many zero bytes are packed (length, mask, nonzero bytes) when that
/// is shorter, and come back exactly; malformed packed sections are refused.
#[test]
fn operation_record_arguments_are_packed_and_unpacked() {
    use crate::engine::kit::log::redo_log::{decode_op_record, unpack_op_record, OP_ARGS_PACKED};
    use crate::heap::alloc::Block;
    let mut r = RecordBuilder::default();
    let b = Block {
        offset: 0x10_0010,
        size: 96,
    };
    // A TPC-C-like input: small integers in wide fields, unused lines zero.
    let mut args = vec![0u8; 144];
    for (i, a) in args.iter_mut().enumerate().take(90) {
        if i % 4 == 0 || i % 8 == 1 {
            *a = (i as u8).wrapping_mul(37) | 1;
        }
    }
    let tag = r.op_record(5, &args, &[(true, b)]).unwrap();
    assert_ne!(tag as u8 & OP_ARGS_PACKED, 0, "packed");
    assert!(r.len() < 144 + 8, "{} bytes", r.len());
    let (raw_tag, raw) = unpack_op_record(tag, r.bytes()).unwrap().unwrap();
    let op = decode_op_record(raw_tag, &raw).unwrap();
    assert_eq!((op.index, op.args), (5, &args[..]));
    assert_eq!(
        op.blocks,
        [crate::engine::kit::log::redo_log::Entry::Alloc(b)]
    );
    // Packed records are not decoded without unpacking; plain ones need none.
    assert!(decode_op_record(tag, r.bytes()).is_err());
    let dense = [7u8; 16];
    let tag = r.op_record(5, &dense, &[]).unwrap();
    assert_eq!(tag as u8 & OP_ARGS_PACKED, 0, "not shorter: not packed");
    assert!(unpack_op_record(tag, r.bytes()).unwrap().is_none());
    // Every length from 0 to 40, zero and nonzero bytes mixed, round trips.
    for n in 0..40usize {
        let a: Vec<u8> = (0..n)
            .map(|i| if i % 5 == 0 { i as u8 + 1 } else { 0 })
            .collect();
        let tag = r.op_record(1, &a, &[]).unwrap();
        let got = match unpack_op_record(tag, r.bytes()).unwrap() {
            Some((t, raw)) => decode_op_record(t, &raw).unwrap().args.to_vec(),
            None => decode_op_record(tag, r.bytes()).unwrap().args.to_vec(),
        };
        assert_eq!(got, a, "{n}");
    }
    // Indices 128 and above have no compact form.
    assert_eq!(r.op_record(128, &args, &[]), None);
    // Malformed packed sections: (section bytes, padding) with the packed flag.
    let tag = |pad: u16| u16::from(OP_ARGS_PACKED) | pad << 8;
    let section = |s: &[u8]| {
        let mut v = s.to_vec();
        let pad = v.len().next_multiple_of(8) - v.len();
        v.resize(v.len() + pad, 0);
        (v, pad as u16)
    };
    for (s, what) in [
        (&[3u8, 0, 0b101, 9, 9][..], "fine"),
        (&[3, 0, 0b101, 9][..], "one byte short"),
        (&[3, 0, 0b101, 9, 9, 9][..], "one byte too many"),
        (&[3, 0, 0b101, 9, 0][..], "a zero byte listed"),
        (&[3, 0, 0b1101, 9, 9, 9][..], "a mask bit past the length"),
        (&[9, 0, 0b1][..], "mask too short"),
        (&[3][..], "no length"),
    ] {
        let (v, pad) = section(s);
        let r = unpack_op_record(tag(pad), &v);
        assert_eq!(r.is_ok(), what == "fine", "{what}: {r:?}");
        if what == "fine" {
            let (t, raw) = r.unwrap().unwrap();
            assert_eq!(decode_op_record(t, &raw).unwrap().args, [9, 0, 9]);
        }
    }
}

/// Malformed operation records are refused with an error, never misread: block
/// counts or padding that do not fit the entries, nonzero padding, block words with
/// bit 63 set or no size class.
#[test]
fn malformed_operation_records_are_refused() {
    use crate::engine::kit::log::redo_log::decode_op_record;
    let tag = |index: u16, pad: u16, blocks: u16| index | pad << 8 | blocks << 11;
    let args = [1u8; 16];
    assert!(decode_op_record(tag(0, 0, 0), &args).is_ok());
    assert!(
        decode_op_record(tag(0, 0, 3), &args).is_err(),
        "blocks overrun"
    );
    assert!(decode_op_record(tag(0, 0, 0), &[0; 0]).is_ok());
    assert!(
        decode_op_record(tag(0, 1, 0), &[0; 0]).is_err(),
        "pad without args"
    );
    let mut padded = [0u8; 16];
    padded[..13].fill(9);
    assert_eq!(
        decode_op_record(tag(0, 3, 0), &padded).unwrap().args.len(),
        13
    );
    padded[14] = 1;
    assert!(
        decode_op_record(tag(0, 3, 0), &padded).is_err(),
        "nonzero padding"
    );
    let mut with_block = [0u8; 24];
    with_block[16..].copy_from_slice(&(1u64 << 63 | 1 << 6).to_le_bytes());
    assert!(
        decode_op_record(tag(0, 0, 1), &with_block).is_err(),
        "a run word first"
    );
    // Run words: after a small allocation only, 1..=4096 blocks.
    let two = |a: u64, b: u64| {
        let mut x = [0u8; 32];
        x[16..24].copy_from_slice(&a.to_le_bytes());
        x[24..].copy_from_slice(&b.to_le_bytes());
        x
    };
    let alloc48 = 1u64 << 6 | 2; // class 2 (48 bytes) at offset 16
    let rec = two(alloc48, 1 << 63 | 3);
    let op = decode_op_record(tag(0, 0, 2), &rec).unwrap();
    let offs: Vec<u64> = op
        .blocks
        .iter()
        .map(|e| match *e {
            crate::engine::kit::log::redo_log::Entry::Alloc(b) if b.size == 48 => b.offset,
            ref e => panic!("{e:?}"),
        })
        .collect();
    assert_eq!(offs, [16, 64, 112, 160]);
    for (a, b, what) in [
        (alloc48, 1u64 << 63, "a run of 0"),
        (alloc48, 1 << 63 | 4097, "a run of 4097"),
        (alloc48 | 1 << 62, 1 << 63 | 1, "a run after a free"),
        (1 << 63 | 1, 1 << 63 | 1, "a run after a run"),
    ] {
        assert!(
            decode_op_record(tag(0, 0, 2), &two(a, b)).is_err(),
            "{what}"
        );
    }
    let large = 1u64 << 46 | 1 << 14 | 63; // a large run of one slab
    assert!(
        decode_op_record(tag(0, 0, 2), &two(large, 1 << 63 | 1)).is_err(),
        "a run after a large block"
    );
    with_block[16..].copy_from_slice(&(1u64 << 6 | 40).to_le_bytes());
    assert!(
        decode_op_record(tag(0, 0, 1), &with_block).is_err(),
        "class 40"
    );
    with_block[16..].copy_from_slice(&(1u64 << 62 | 1 << 6 | 2).to_le_bytes());
    let op = decode_op_record(tag(7, 0, 1), &with_block).unwrap();
    assert_eq!(op.index, 7);
    assert!(
        matches!(op.blocks[..], [crate::engine::kit::log::redo_log::Entry::Free(b)] if b.offset == 16 && b.size == 48)
    );
}

/// A torn or damaged operation record is treated like any compact record: flipping
/// any bit of the last one drops it alone (torn tail), flipping any bit of the first
/// of two is reported as damage; a record from an earlier lap whose 16 stored
/// sequence bits match is not taken for the expected one (the checksum binds the
/// whole number).
#[test]
fn operation_records_torn_damaged_and_stale() {
    use crate::engine::kit::log::redo_log::{parse_framed, Framing, RING_OFFSET};
    use crate::heap::alloc::Block;
    let heap = framing_heap();
    let l = *heap.layout();
    let (off, len) = (l.log_offset(0), l.log_bytes_per_thread);
    let mut w = LogWriter::framed(Framing::Compact, off, len, 0);
    let mut r = RecordBuilder::default();
    let b = Block {
        offset: 0x10_0010,
        size: 96,
    };
    let tag = r.op_record(3, &[5; 16], &[(true, b)]).unwrap();
    w.append_op(&heap, r.bytes(), tag, 10);
    w.append_op(&heap, r.bytes(), tag, 11);
    heap.fence();
    let rec_len = 16 + r.len();
    assert_eq!(rec_len, 40);
    let ring = off + RING_OFFSET;
    let flip = |at: usize, bit: u8| {
        let mut x = [0u8; 1];
        heap.read_bytes(at, &mut x);
        x[0] ^= 1 << bit;
        heap.write_bytes(at, &x);
    };
    for at in 0..rec_len {
        for bit in [0u8, 5] {
            flip(ring + rec_len + at, bit);
            let p = parse_framed(&heap, off, len, Framing::Compact);
            assert_eq!(p.records.len(), 1, "byte {at} bit {bit} of the last record");
            assert!(p.damage.is_none());
            flip(ring + rec_len + at, bit);
            flip(ring + at, bit);
            let p = parse_framed(&heap, off, len, Framing::Compact);
            assert!(
                p.records.is_empty(),
                "byte {at} bit {bit} of the first record"
            );
            assert!(
                p.damage.is_some(),
                "byte {at} bit {bit} of the first record"
            );
            flip(ring + at, bit);
        }
    }
    // A stale record: sequence number 2^16 written where record 0 is expected (the
    // same 16 stored bits) is not read.
    crate::engine::kit::log::redo_log::reset(&heap, off, 0);
    heap.fence();
    let mut stale = LogWriter::framed(Framing::Compact, off, len, 1 << 16);
    stale.append_op(&heap, r.bytes(), tag, 12);
    heap.fence();
    let p = parse_framed(&heap, off, len, Framing::Compact);
    assert!(p.records.is_empty(), "a record of another lap was read");
}

/// Allocator changes written with `RecordBuilder::blocks` take 8 bytes each (plus 8
/// per run) and decode as the ALLOC and FREE entries they stand for, in order, with
/// blocks that do not pack written as ordinary entries between runs; a count that
/// overruns the record is an error.
#[test]
fn blocks_entries_round_trip() {
    use crate::engine::kit::log::redo_log::{decode, Entry};
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
/// record flushes only its own lines: `ceil(len / 64)`. A damaged record in the middle
/// of a line-aligned chain is still told from a torn tail.
#[test]
fn line_aligned_records_round_trip_and_flush_only_their_own_lines() {
    use crate::engine::kit::log::redo_log::parse;
    let heap = framing_heap();
    let l = *heap.layout();
    let (off, len) = (l.log_offset(0), l.log_bytes_per_thread);
    crate::engine::kit::log::redo_log::reset(&heap, off, 5);
    let mut w = LogWriter::new(off, len, 5).line_aligned();
    let mut live: std::collections::VecDeque<(u64, Vec<u8>)> = Default::default();
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
        w.append(&heap, r.bytes(), 100 + i);
        let lines = (crate::medium::counters::snapshot() - before).lines_flushed;
        let rec_len = crate::engine::kit::log::redo_log::HEADER_LEN + r.len();
        // (A wrap marker adds its own line.)
        assert!(
            lines == rec_len.div_ceil(64) as u64 || lines == rec_len.div_ceil(64) as u64 + 1,
            "record {i} of {rec_len} bytes flushed {lines} lines"
        );
        heap.fence();
        live.push_back((100 + i, r.bytes().to_vec()));
        let p = parse(&heap, off, len);
        assert!(p.damage.is_none(), "{:?}", p.damage);
        let got: Vec<_> = p
            .records
            .iter()
            .map(|r| (r.persist_ts, r.entries.clone()))
            .collect();
        assert_eq!(got, Vec::from(live.clone()), "after record {i}");
    }
    // Every live record starts on a line: find each one's header in the ring.
    let ring = off + crate::engine::kit::log::redo_log::RING_OFFSET;
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
    use crate::engine::kit::log::redo_log::parse;
    use crate::mutation::{self, Mutation};
    let heap = framing_heap();
    let l = *heap.layout();
    let (off, len) = (l.log_offset(0), l.log_bytes_per_thread);
    crate::engine::kit::log::redo_log::reset(&heap, off, 0);
    let mut w = LogWriter::new(off, len, 0).line_aligned();
    for i in 0..4u64 {
        let mut r = RecordBuilder::default();
        r.word(4096, i); // 48-byte records: a 16-byte gap after each
        w.append(&heap, r.bytes(), 1 + i);
    }
    heap.fence();
    let count = |m: Option<Mutation>| {
        // SAFETY: a mutation test; the switch changes only this parse (no pool runs).
        unsafe { mutation::set(m) };
        let n = parse(&heap, off, len).records.len();
        mutation::clear();
        n
    };
    assert_eq!(count(None), 4);
    assert_eq!(count(Some(Mutation::LogLineSkip)), 1);
}
