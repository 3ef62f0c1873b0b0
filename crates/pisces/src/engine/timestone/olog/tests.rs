//! The OLog's format: compact records and operation records read back exactly, torn
//! and damaged ones told apart, malformed ones refused (white-box: they forge records
//! through the kit's writer and flip their bytes in place).

use super::{
    decode_op_record, op_record, unpack_op_record, Compact, COMPACT_HEADER_LEN, OP_ARGS_PACKED,
};
use crate::engine::kit::log::redo_log::tests::{
    chain_damage_is_found, framing_heap, read_back, slot0_log,
};
use crate::engine::kit::log::redo_log::{
    parse_framed, reset, Entry, Framing, LogWriter, RecordBuilder, RING_OFFSET,
};
use crate::heap::alloc::Block;
use crate::heap::{FormatParams, Heap};
use crate::medium::dram::DramMedium;
use std::sync::Arc;

/// Compact records read back exactly (short and long headers, wraps over many laps,
/// recycling), and take 16 header bytes where standard ones take 32.
#[test]
fn compact_framing_round_trips_over_many_laps() {
    let (heap, off, len) = slot0_log();
    reset(&heap, off, 7);
    let mut w = LogWriter::framed(Compact, off, len, 7);
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
        let p = parse_framed(&heap, off, len, Compact);
        assert!(p.damage.is_none(), "{:?}", p.damage);
        let got = read_back(&p);
        assert_eq!(got, Vec::from(live.clone()), "after record {i}");
        assert_eq!(p.next_seq, p.records.last().unwrap().seq + 1);
    }
    assert_eq!(Compact.header_len(24), COMPACT_HEADER_LEN);
    assert_eq!(Compact.header_len(0x3FFF * 8), COMPACT_HEADER_LEN + 8);
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
    let mut w = LogWriter::framed(Compact, l.log_offset(0), l.log_bytes_per_thread, 0);
    let mut r = RecordBuilder::default();
    r.op(1, &vec![0x5A; 0x3FFF * 8]);
    w.append(&sim_heap, r.bytes(), 3);
    sim_heap.fence();
    let p = parse_framed(&sim_heap, l.log_offset(0), l.log_bytes_per_thread, Compact);
    assert_eq!(p.records.len(), 1);
    assert_eq!(p.records[0].entries, r.bytes());
    assert_eq!(p.records[0].persist_ts, 3);
}

/// A compact record with any bit of its header or entries flipped is not read (torn
/// tail: the records before it are); a damaged record followed by a valid later one is
/// reported as damage, not taken for a torn tail.
#[test]
fn compact_framing_detects_torn_and_damaged_records() {
    let (heap, off, len) = slot0_log();
    let mut w = LogWriter::framed(Compact, off, len, 0);
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
        let p = parse_framed(&heap, off, len, Compact);
        assert_eq!(p.records.len(), 1, "byte {at} of the last record flipped");
        assert!(p.damage.is_none());
        flip(ring + rec_len + at, (at % 8) as u8);
    }
    // Every byte of the first record: the valid second record proves damage.
    for at in 0..rec_len {
        flip(ring + at, (at % 8) as u8);
        let p = parse_framed(&heap, off, len, Compact);
        assert!(
            p.records.is_empty(),
            "byte {at} of the first record flipped"
        );
        assert!(p.damage.is_some(), "byte {at} of the first record flipped");
        flip(ring + at, (at % 8) as u8);
    }
    let p = parse_framed(&heap, off, len, Compact);
    assert_eq!(p.records.len(), 2);
    assert!(p.damage.is_none());
}

/// [`chain_damage_is_found`] (the redo log's test of torn tails and damage wherever
/// the chain goes on) for compact records, whose 16 stored sequence bits start at
/// header byte 4.
#[test]
fn damage_is_found_wherever_the_compact_chain_continues() {
    chain_damage_is_found(Compact, 4);
}

/// Operation records read back exactly through the compact framing (arguments of
/// every length modulo 8, up to 31 blocks allocated or freed, small and large), take
/// 16 header bytes plus the padded arguments plus 8 per block (32 bytes for 16
/// argument bytes, 40 with one allocation), and a record that has no such form is
/// refused by the builder.
#[test]
fn operation_records_round_trip() {
    let (heap, off, len) = slot0_log();
    let mut w = LogWriter::framed(Compact, off, len, 0);
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
        let tag = op_record(&mut r, i as u8 * 15, &args, &blocks).unwrap();
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
        w.append_tagged(&heap, r.bytes(), tag, 100 + i as u64);
        want.push((i as u8 * 15, args, blocks));
    }
    heap.fence();
    let p = parse_framed(&heap, off, len, Compact);
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
    assert!(op_record(&mut r, 0, &key, &[]).is_some());
    assert_eq!(16 + r.len(), 32);
    assert!(op_record(&mut r, 0, &key, &[(true, small(0))]).is_some());
    assert_eq!(16 + r.len(), 40);
    assert!(op_record(&mut r, 0, &[0; 16], &[]).is_some());
    assert_eq!(16 + r.len(), 24);
    // Consecutive allocations of one class: one word and a run word.
    let run: Vec<_> = (0..40).map(|k| (true, small(k))).collect();
    assert!(op_record(&mut r, 0, &key, &run).is_some());
    assert_eq!(16 + r.len(), 48);
    // No such form: too many block words, a block that does not pack.
    let many: Vec<_> = (0..32).map(|k| (true, small(2 * k))).collect();
    assert_eq!(op_record(&mut r, 0, &[0; 16], &many), None);
    assert!(r.bytes().is_empty());
    let odd = Block {
        offset: 8,
        size: 48,
    };
    assert_eq!(op_record(&mut r, 0, &[0; 16], &[(true, odd)]), None);
    assert!(r.bytes().is_empty());
}

/// Arguments with many zero bytes are packed (length, mask, nonzero bytes) when that
/// is shorter, and come back exactly; malformed packed sections are refused.
#[test]
fn operation_record_arguments_are_packed_and_unpacked() {
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
    let tag = op_record(&mut r, 5, &args, &[(true, b)]).unwrap();
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
    let tag = op_record(&mut r, 5, &dense, &[]).unwrap();
    assert_eq!(tag as u8 & OP_ARGS_PACKED, 0, "not shorter: not packed");
    assert!(unpack_op_record(tag, r.bytes()).unwrap().is_none());
    // Every length from 0 to 40, zero and nonzero bytes mixed, round trips.
    for n in 0..40usize {
        let a: Vec<u8> = (0..n)
            .map(|i| if i % 5 == 0 { i as u8 + 1 } else { 0 })
            .collect();
        let tag = op_record(&mut r, 1, &a, &[]).unwrap();
        let got = match unpack_op_record(tag, r.bytes()).unwrap() {
            Some((t, raw)) => decode_op_record(t, &raw).unwrap().args.to_vec(),
            None => decode_op_record(tag, r.bytes()).unwrap().args.to_vec(),
        };
        assert_eq!(got, a, "{n}");
    }
    // Indices 128 and above have no compact form.
    assert_eq!(op_record(&mut r, 128, &args, &[]), None);
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
    let (heap, off, len) = slot0_log();
    let mut w = LogWriter::framed(Compact, off, len, 0);
    let mut r = RecordBuilder::default();
    let b = Block {
        offset: 0x10_0010,
        size: 96,
    };
    let tag = op_record(&mut r, 3, &[5; 16], &[(true, b)]).unwrap();
    w.append_tagged(&heap, r.bytes(), tag, 10);
    w.append_tagged(&heap, r.bytes(), tag, 11);
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
            let p = parse_framed(&heap, off, len, Compact);
            assert_eq!(p.records.len(), 1, "byte {at} bit {bit} of the last record");
            assert!(p.damage.is_none());
            flip(ring + rec_len + at, bit);
            flip(ring + at, bit);
            let p = parse_framed(&heap, off, len, Compact);
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
    reset(&heap, off, 0);
    heap.fence();
    let mut stale = LogWriter::framed(Compact, off, len, 1 << 16);
    stale.append_tagged(&heap, r.bytes(), tag, 12);
    heap.fence();
    let p = parse_framed(&heap, off, len, Compact);
    assert!(p.records.is_empty(), "a record of another lap was read");
}
