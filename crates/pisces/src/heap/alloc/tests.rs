use super::classes::{class_for, Kind, CLASSES, CLASS_SIZES, MAX_SMALL, NCLASSES};
use super::*;
use crate::heap::FormatParams;
use crate::medium::dram::DramMedium;
use std::collections::{BTreeSet, HashSet};

fn heap_of(len: usize) -> Arc<Heap> {
    let m = DramMedium::anonymous(len, 0, 0).unwrap();
    Arc::new(
        Heap::format(
            Arc::new(m),
            FormatParams {
                engine_id: 1,
                max_threads: 4,
                log_bytes_per_thread: 64 << 10,
                regions: Default::default(),
            },
        )
        .unwrap(),
    )
}

fn allocated(heap: &Heap) -> BTreeSet<Block> {
    let mut s = BTreeSet::new();
    Allocator::for_each_allocated(heap, |b| assert!(s.insert(b), "{b:?} twice")).unwrap();
    s
}

fn set_entry(heap: &Heap, slab: usize, e: u32) {
    let off = heap.layout().slab_table_offset + 4 * slab;
    heap.write_bytes(off, &e.to_le_bytes());
}

fn corrupt_msg<T: std::fmt::Debug>(r: Result<T>) -> String {
    match r {
        Err(Error::Corrupt(m)) => *m,
        other => panic!("expected Corrupt, got {other:?}"),
    }
}

fn reserve_publish(a: &Allocator, c: &mut ThreadCache, len: usize) -> Block {
    let b = a.reserve(c, len).unwrap();
    a.publish_alloc(b);
    b
}

#[test]
fn class_table_is_sound() {
    for w in CLASS_SIZES.windows(2) {
        assert!(w[0] < w[1]);
    }
    for (c, cl) in CLASSES.iter().enumerate() {
        assert_eq!(cl.size, CLASS_SIZES[c]);
        assert_eq!(cl.size % 16, 0);
        assert_eq!(cl.data_start % 64, 0);
        assert!(cl.nblocks as usize <= cl.used_words() * 64);
        assert!(cl.used_words() <= cl.all_words());
        let end = cl.data_start as usize + cl.nblocks as usize * cl.size as usize;
        assert!(end <= SLAB_SIZE, "class {c} overflows the slab");
        // No room for one more block.
        let more = classes::CLASSES[c].nblocks as usize + 1;
        assert!(more.div_ceil(64) * 8 + more * cl.size as usize > SLAB_SIZE - 63);
        assert!(cl.batch >= 2 && cl.batch <= 64);
        assert_ne!(cl.size as usize % SLAB_SIZE, 0);
    }
    // The fitted classes waste little.
    for &s in &CLASS_SIZES[27..] {
        let c = class_for(s as usize).unwrap();
        let cl = &CLASSES[c];
        let waste = SLAB_SIZE - cl.data_start as usize - cl.nblocks as usize * cl.size as usize;
        assert!(waste < 1024, "class {s} wastes {waste}");
    }
    for size in 1..=MAX_SMALL {
        let c = class_for(size).unwrap();
        assert!(CLASSES[c].size as usize >= size);
        assert!(c == 0 || (CLASSES[c - 1].size as usize) < size);
    }
    assert_eq!(class_for(MAX_SMALL + 1), None);
    assert_eq!(class_for(usize::MAX), None);
    for k in [
        Kind::Free,
        Kind::Small(0),
        Kind::Small(NCLASSES - 1),
        Kind::Head(1),
        Kind::Head(77),
        Kind::Cont(5),
    ] {
        assert_eq!(Kind::decode(k.encode()), Some(k));
    }
    for bad in [
        0x1000_0000 | NCLASSES as u32,
        0x2000_0000,
        0x3000_0000,
        0x4000_0000,
        0x0000_0001,
        0xFFFF_FFFF,
    ] {
        assert_eq!(Kind::decode(bad), None, "{bad:#x}");
    }
}

#[test]
fn reserve_publish_rebuild_round_trip() {
    let heap = heap_of(8 << 20);
    let a = Allocator::rebuild_private(heap.clone()).unwrap();
    let mut c = ThreadCache::default();
    let mut published = BTreeSet::new();
    let mut unpublished = Vec::new();
    for i in 0..40 {
        let b = a.reserve(&mut c, 100).unwrap();
        if i % 2 == 0 {
            a.publish_alloc(b);
            published.insert(b);
        } else {
            unpublished.push(b);
        }
    }
    let big_pub = reserve_publish(&a, &mut c, 3 * SLAB_SIZE);
    published.insert(big_pub);
    let big_unpub = a.reserve(&mut c, 2 * SLAB_SIZE - 100).unwrap();
    assert_eq!(big_unpub.size, 2 * SLAB_SIZE as u64);
    heap.fence();
    for b in &published {
        assert!(a.is_allocated(*b));
    }
    for b in &unpublished {
        assert!(!a.is_allocated(*b));
    }
    assert!(!a.is_allocated(big_unpub));
    drop(a);

    // "Crash": the volatile state is gone; rebuild from the pool.
    let a = Allocator::rebuild_private(heap.clone()).unwrap();
    assert_eq!(allocated(&heap), published);
    for b in &published {
        assert!(a.is_allocated(*b));
        assert_eq!(a.block_at(b.payload()), Some(*b));
    }
    // The same cache is bound to the old allocator: it must not hand out its blocks.
    assert!(!c.is_empty());
    let class = class_for(108).unwrap();
    let free_in_slab = CLASSES[class].nblocks as usize - 20;
    let again: HashSet<Block> = (0..free_in_slab)
        .map(|_| a.reserve(&mut c, 100).unwrap())
        .collect();
    assert_eq!(again.len(), free_in_slab);
    for b in &unpublished {
        assert!(
            again.contains(b),
            "unpublished {b:?} did not come back free"
        );
    }
    for b in &published {
        assert!(!again.contains(b));
    }
    // The unpublished large run is free again (first fit finds it).
    let big = a.reserve(&mut c, 2 * SLAB_SIZE - 100).unwrap();
    assert_eq!(big, big_unpub);
}

#[test]
fn freed_blocks_are_reused() {
    let heap = heap_of(8 << 20);
    let a = Allocator::rebuild_private(heap.clone()).unwrap();
    let mut c = ThreadCache::default();
    let b = reserve_publish(&a, &mut c, 40);
    let _other = reserve_publish(&a, &mut c, 40);
    heap.fence();
    a.publish_free(b);
    heap.fence();
    assert!(!a.is_allocated(b));
    a.release(&mut c, b);
    assert_eq!(
        a.reserve(&mut c, 40).unwrap(),
        b,
        "LIFO reuse from the cache"
    );

    // Release from another thread's cache, drained back to the free bitmaps.
    a.publish_alloc(b);
    a.publish_free(b);
    let mut c2 = ThreadCache::default();
    a.release(&mut c2, b);
    assert_eq!(c2.len(), 1);
    a.drain(&mut c2);
    assert!(c2.is_empty());
    assert!(a.free_bit_blocks().contains(&b.offset));

    // Large runs.
    let l = reserve_publish(&a, &mut c, SLAB_SIZE * 2);
    heap.fence();
    assert!(a.is_allocated(l));
    a.publish_free(l);
    heap.fence();
    assert!(!a.is_allocated(l));
    assert_eq!(a.block_at(l.payload()), Some(l), "visible until released");
    a.release(&mut c, l);
    assert_eq!(a.block_at(l.payload()), None);
    assert_eq!(a.reserve(&mut c, SLAB_SIZE * 2).unwrap(), l);
    // Unreserve returns a run too.
    let l2 = a.reserve(&mut c, 1).unwrap();
    a.unreserve(&mut c, l2);
    assert_eq!(a.reserve(&mut c, 1).unwrap(), l2);
}

#[test]
fn every_class_and_large_objects() {
    let heap = heap_of(16 << 20);
    let a = Allocator::rebuild_private(heap.clone()).unwrap();
    let mut c = ThreadCache::default();
    let mut blocks = Vec::new();
    for (i, cl) in CLASSES.iter().enumerate() {
        let exact = cl.size as usize - HEADER;
        let b = reserve_publish(&a, &mut c, exact);
        assert_eq!(b.size, cl.size as u64);
        assert_eq!(b.payload_len(), exact);
        assert_eq!(b.offset % 16, 0);
        assert_eq!(Allocator::block_size_for(exact), Some(cl.size as u64));
        let over = reserve_publish(&a, &mut c, exact + 1);
        let want = CLASSES
            .get(i + 1)
            .map_or(SLAB_SIZE as u64, |n| n.size as u64);
        assert_eq!(over.size, want);
        blocks.push(b);
        blocks.push(over);
    }
    let zero = reserve_publish(&a, &mut c, 0);
    assert_eq!(zero.size, 16);
    blocks.push(zero);
    for (len, slabs) in [
        (MAX_SMALL - HEADER + 1, 1),
        (SLAB_SIZE - HEADER, 1),
        (SLAB_SIZE - HEADER + 1, 2),
        (5 * SLAB_SIZE, 6),
    ] {
        let b = reserve_publish(&a, &mut c, len);
        assert_eq!(b.size, (slabs * SLAB_SIZE) as u64);
        assert_eq!(b.offset % SLAB_SIZE as u64, 0);
        blocks.push(b);
    }
    heap.fence();
    // Fill every payload with its own byte, then check nothing overlapped.
    for (i, b) in blocks.iter().enumerate() {
        assert_eq!(a.block_at(b.payload()), Some(*b));
        heap.write_bytes(b.payload() as usize, &vec![i as u8; b.payload_len()]);
    }
    for (i, b) in blocks.iter().enumerate() {
        let mut buf = vec![0; b.payload_len()];
        heap.read_bytes(b.payload() as usize, &mut buf);
        assert!(buf.iter().all(|&x| x == i as u8), "block {b:?} overwritten");
    }
    let want: BTreeSet<Block> = blocks.iter().copied().collect();
    assert_eq!(allocated(&heap), want);
    assert!(Allocator::check(&heap).is_empty());
    drop(a);
    let a = Allocator::rebuild_private(heap.clone()).unwrap();
    for b in &blocks {
        assert!(a.is_allocated(*b));
    }
}

#[test]
fn block_at_accepts_exactly_block_starts() {
    let heap = heap_of(8 << 20);
    let a = Allocator::rebuild_private(heap.clone()).unwrap();
    let mut c = ThreadCache::default();
    let b = a.reserve(&mut c, 40).unwrap(); // class 48
    assert_eq!(b.size, 48);
    let l = heap.layout();
    let slab_start = b.offset - (b.offset - l.heap_offset as u64) % SLAB_SIZE as u64;
    let cl = &CLASSES[class_for(48).unwrap()];
    assert_eq!(a.block_at(b.payload()), Some(b));
    // Every block start of the slab, reserved or not, is a block.
    let last = slab_start + cl.data_start as u64 + (cl.nblocks as u64 - 1) * 48;
    assert_eq!(
        a.block_at(last + 8),
        Some(Block {
            offset: last,
            size: 48
        })
    );
    // Past the last block (the slack at the end of the slab).
    assert!(last + 48 + 8 < slab_start + SLAB_SIZE as u64);
    assert_eq!(a.block_at(last + 48 + 8), None);
    assert_eq!(a.block_at(b.payload() + 16), None, "middle of a block");
    assert_eq!(a.block_at(b.payload() + 40), None, "next block's header");
    assert_eq!(a.block_at(b.offset), None, "header offset");
    assert_eq!(a.block_at(b.payload() + 1), None, "unaligned");
    assert_eq!(a.block_at(slab_start + 8), None, "bitmap");
    assert_eq!(
        a.block_at(slab_start + 8 + SLAB_SIZE as u64),
        None,
        "free slab"
    );
    assert_eq!(a.block_at(0), None);
    assert_eq!(a.block_at(8), None);
    assert_eq!(a.block_at(l.heap_offset as u64), None);
    assert_eq!(a.block_at(l.heap_end() as u64 + 8), None, "out of heap");
    assert_eq!(a.block_at(u64::MAX), None);
    assert_eq!(a.block_at(u64::MAX - 7), None);
    let big = a.reserve(&mut c, SLAB_SIZE * 2).unwrap();
    assert_eq!(a.block_at(big.payload()), Some(big), "reserved run head");
    assert_eq!(a.block_at(big.payload() + 16), None);
    assert_eq!(
        a.block_at(big.payload() + SLAB_SIZE as u64),
        None,
        "continuation"
    );
    a.unreserve(&mut c, big);
    assert_eq!(a.block_at(big.payload()), None, "unreserved run");
}

#[test]
fn small_pool_runs_out_of_space_and_recovers() {
    let heap = heap_of(2 << 20);
    let slabs = heap.layout().slab_count;
    let a = Allocator::rebuild_private(heap.clone()).unwrap();
    let mut c = ThreadCache::default();
    assert_eq!(a.free_bytes(), (slabs * SLAB_SIZE) as u64);
    assert!(matches!(
        a.reserve(&mut c, usize::MAX),
        Err(Error::OutOfSpace { requested }) if requested == usize::MAX
    ));
    assert!(matches!(
        a.reserve(&mut c, heap.layout().heap_end()),
        Err(Error::OutOfSpace { .. })
    ));
    let mut blocks = Vec::new();
    let err = loop {
        match a.reserve(&mut c, 1000) {
            Ok(b) => {
                a.publish_alloc(b);
                blocks.push(b);
            }
            Err(e) => break e,
        }
    };
    heap.fence();
    assert!(
        matches!(err, Error::OutOfSpace { requested: 1000 }),
        "{err}"
    );
    let per_slab = CLASSES[class_for(1008).unwrap()].nblocks as usize;
    assert_eq!(blocks.len(), slabs * per_slab);
    assert!(matches!(
        a.reserve(&mut c, SLAB_SIZE),
        Err(Error::OutOfSpace { .. })
    ));
    // Other classes have no slab left either.
    assert!(a.reserve(&mut c, 10).is_err());
    let victim = blocks[blocks.len() / 2];
    a.publish_free(victim);
    heap.fence();
    a.release(&mut c, victim);
    assert_eq!(a.reserve(&mut c, 1000).unwrap(), victim);
    assert!(a.reserve(&mut c, 1000).is_err());

    // The same with large runs, after a restart with everything freed.
    for b in &blocks {
        a.publish_free(*b);
    }
    heap.fence();
    drop(a);
    let a = Allocator::rebuild_private(heap.clone()).unwrap();
    assert_eq!(
        a.free_bytes(),
        (slabs * SLAB_SIZE) as u64,
        "empty slabs were freed"
    );
    let mut c = ThreadCache::default();
    let runs: Vec<Block> = (0..slabs)
        .map(|_| reserve_publish(&a, &mut c, SLAB_SIZE - 8))
        .collect();
    assert!(matches!(
        a.reserve(&mut c, 1),
        Err(Error::OutOfSpace { requested: 1 })
    ));
    a.publish_free(runs[3]);
    a.release(&mut c, runs[3]);
    // The freed slab is formatted for the smallest class.
    let b = a.reserve(&mut c, 1).unwrap();
    assert_eq!(b.offset - b.offset % SLAB_SIZE as u64, runs[3].offset);
}

#[test]
fn replay_is_idempotent_and_validates_geometry() {
    let heap = heap_of(8 << 20);
    let hl = *heap.layout();
    let base = hl.heap_offset as u64;
    let small = Block {
        offset: base + CLASSES[1].data_start as u64 + 32 * 5,
        size: 32,
    };
    let large = Block {
        offset: base + 2 * SLAB_SIZE as u64,
        size: 3 * SLAB_SIZE as u64,
    };
    for _ in 0..2 {
        Allocator::replay_alloc(&heap, small).unwrap();
        Allocator::replay_alloc(&heap, large).unwrap();
    }
    heap.fence();
    assert_eq!(allocated(&heap), [small, large].into_iter().collect());
    let a = Allocator::rebuild_private(heap.clone()).unwrap();
    assert!(a.is_allocated(small) && a.is_allocated(large));
    assert_eq!(a.block_at(small.payload()), Some(small));
    drop(a);
    for _ in 0..2 {
        Allocator::replay_free(&heap, small).unwrap();
        Allocator::replay_free(&heap, large).unwrap();
    }
    assert!(allocated(&heap).is_empty());
    assert!(Allocator::check(&heap).is_empty());

    let bad = [
        Block {
            offset: small.offset + 8,
            size: 32,
        },
        Block {
            offset: base + 8,
            size: 32,
        }, // inside the bitmap
        Block {
            offset: small.offset,
            size: 40,
        }, // not a class
        Block {
            offset: small.offset,
            size: 0,
        },
        Block {
            offset: 4096,
            size: 32,
        }, // before the heap
        Block {
            offset: hl.heap_end() as u64,
            size: 32,
        },
        Block {
            offset: u64::MAX - 16,
            size: 32,
        },
        Block {
            offset: base + 64,
            size: SLAB_SIZE as u64,
        }, // run not at a slab start
        Block {
            offset: hl.slab_offset(hl.slab_count - 1) as u64,
            size: 2 * SLAB_SIZE as u64,
        }, // run past the end
        Block {
            offset: base,
            size: u64::MAX - (u64::MAX % SLAB_SIZE as u64),
        },
    ];
    for b in bad {
        let m = corrupt_msg(Allocator::replay_alloc(&heap, b));
        assert!(m.contains("replaying"), "{m}");
        corrupt_msg(Allocator::replay_free(&heap, b));
    }
    // A small block in a slab of another class.
    Allocator::replay_alloc(&heap, small).unwrap();
    let other = Block {
        offset: base + CLASSES[2].data_start as u64,
        size: 48,
    };
    let m = corrupt_msg(Allocator::replay_alloc(&heap, other));
    assert!(m.contains("not class 2"), "{m}");
    corrupt_msg(Allocator::replay_free(&heap, other));
    assert!(Allocator::check(&heap).is_empty(), "nothing was written");
}

/// Replaying a ts-ordered suffix over a later state (a large run freed, its slab
/// formatted for a small class and used) converges to that state.
#[test]
fn replay_of_a_suffix_converges() {
    let heap = heap_of(8 << 20);
    let a = Allocator::rebuild_private(heap.clone()).unwrap();
    let mut c = ThreadCache::default();
    let mut ops: Vec<(bool, Block)> = Vec::new();
    let run = reserve_publish(&a, &mut c, 3 * SLAB_SIZE);
    ops.push((true, run));
    a.publish_free(run);
    ops.push((false, run));
    heap.fence();
    a.release(&mut c, run);
    // Formats the run's first slab for class 64.
    let x = reserve_publish(&a, &mut c, 50);
    let y = reserve_publish(&a, &mut c, 50);
    ops.push((true, x));
    ops.push((true, y));
    a.publish_free(x);
    ops.push((false, x));
    let z = reserve_publish(&a, &mut c, 2 * SLAB_SIZE - 8); // the rest of the old run
    ops.push((true, z));
    heap.fence();
    assert_eq!(x.offset / SLAB_SIZE as u64, run.offset / SLAB_SIZE as u64);
    assert_eq!(z.offset, run.offset + SLAB_SIZE as u64);
    let before = allocated(&heap);
    assert_eq!(before, [y, z].into_iter().collect());
    drop(a);
    for round in 0..2 {
        for &(alloc, b) in &ops {
            if alloc {
                Allocator::replay_alloc(&heap, b).unwrap();
            } else {
                Allocator::replay_free(&heap, b).unwrap();
            }
        }
        heap.fence();
        assert_eq!(allocated(&heap), before, "round {round}");
        // Rebuild (which may free empty slabs) and replay again.
        Allocator::rebuild_private(heap.clone()).unwrap();
    }
}

#[test]
fn rebuild_rejects_corrupt_slab_table() {
    let heap = heap_of(8 << 20);
    set_entry(&heap, 3, 0x4000_0007);
    let m = corrupt_msg(Allocator::rebuild_private(heap.clone()));
    assert!(m.contains("slab 3") && m.contains("0x40000007"), "{m}");
    corrupt_msg(Allocator::for_each_allocated(&heap, |_| {}));

    // A run whose second continuation is missing.
    set_entry(&heap, 3, 0);
    set_entry(&heap, 5, Kind::Head(3).encode());
    set_entry(&heap, 6, Kind::Cont(1).encode());
    let m = corrupt_msg(Allocator::rebuild_private(heap.clone()));
    assert!(
        m.contains("slab 7") && m.contains("headed by slab 5"),
        "{m}"
    );
    // Misnumbered continuation.
    set_entry(&heap, 7, Kind::Cont(1).encode());
    let m = corrupt_msg(Allocator::rebuild_private(heap.clone()));
    assert!(m.contains("slab 7") && m.contains("continuation 2"), "{m}");
    set_entry(&heap, 7, Kind::Cont(2).encode());
    Allocator::rebuild_private(heap.clone()).unwrap();

    // Orphan continuation.
    set_entry(&heap, 9, Kind::Cont(1).encode());
    let m = corrupt_msg(Allocator::rebuild_private(heap.clone()));
    assert!(m.contains("slab 9") && m.contains("without a head"), "{m}");
    set_entry(&heap, 9, 0);

    // A run longer than the heap.
    let last = heap.layout().slab_count - 2;
    set_entry(&heap, last, Kind::Head(5).encode());
    let m = corrupt_msg(Allocator::rebuild_private(heap.clone()));
    assert!(
        m.contains(&format!("slab {last}")) && m.contains("only 2"),
        "{m}"
    );
    set_entry(&heap, last, 0);

    // Bits past the last block of a small slab.
    let c48 = class_for(48).unwrap();
    set_entry(&heap, 12, Kind::Small(c48).encode());
    let cl = &CLASSES[c48];
    let w = cl.used_words() - 1;
    heap.atomic_u64(heap.layout().slab_offset(12) + 8 * w)
        .store(1 << 63, Ordering::Relaxed);
    let m = corrupt_msg(Allocator::rebuild_private(heap.clone()));
    assert!(
        m.contains("slab 12") && m.contains("past the last block"),
        "{m}"
    );
}

#[test]
fn check_reports_every_problem() {
    let heap = heap_of(8 << 20);
    {
        let a = Allocator::rebuild_private(heap.clone()).unwrap();
        let mut c = ThreadCache::default();
        reserve_publish(&a, &mut c, 100);
        reserve_publish(&a, &mut c, 2 * SLAB_SIZE);
        heap.fence();
    }
    assert!(Allocator::check(&heap).is_empty());
    set_entry(&heap, 10, 0x1000_0000 | NCLASSES as u32);
    set_entry(&heap, 20, Kind::Cont(4).encode());
    let problems = Allocator::check(&heap);
    assert_eq!(problems.len(), 2, "{problems:?}");
    assert!(problems[0].contains("slab 10"), "{problems:?}");
    assert!(problems[1].contains("slab 20"), "{problems:?}");
    let m = corrupt_msg(Allocator::rebuild_private(heap.clone()));
    assert!(m.contains("1 more problem"), "{m}");
}

#[test]
fn usage_and_free_bytes() {
    let heap = heap_of(8 << 20);
    let slabs = heap.layout().slab_count as u64;
    let a = Allocator::rebuild_private(heap.clone()).unwrap();
    let mut c = ThreadCache::default();
    let b = reserve_publish(&a, &mut c, 100);
    let r = reserve_publish(&a, &mut c, 2 * SLAB_SIZE - HEADER);
    heap.fence();
    let class = class_for(b.size as usize).unwrap();
    let n = CLASSES[class].nblocks as u64;
    let u = a.usage();
    assert_eq!(u.len(), NCLASSES + 1);
    assert_eq!(
        u[class],
        ClassUsage {
            block_size: b.size,
            slabs: 1,
            allocated: 1,
            free: n - 1
        }
    );
    assert_eq!(
        u[NCLASSES],
        ClassUsage {
            block_size: 0,
            slabs: 2,
            allocated: 1,
            free: slabs - 3
        }
    );
    assert_eq!(
        a.free_bytes(),
        (slabs - 3) * SLAB_SIZE as u64 + (n - 1) * b.size
    );
    a.publish_free(r);
    assert_eq!(
        a.free_bytes(),
        (slabs - 1) * SLAB_SIZE as u64 + (n - 1) * b.size
    );
}

#[test]
fn rebuild_frees_empty_slabs() {
    let heap = heap_of(4 << 20);
    let a = Allocator::rebuild_private(heap.clone()).unwrap();
    let mut c = ThreadCache::default();
    let b = a.reserve(&mut c, 200).unwrap(); // formats a slab, never published
    let slab = ((b.offset as usize) - heap.layout().heap_offset) / SLAB_SIZE;
    assert_ne!(pmem::read_entry(&heap, slab), 0, "formatting is persistent");
    drop(a);
    let a = Allocator::rebuild_private(heap.clone()).unwrap();
    assert_eq!(pmem::read_entry(&heap, slab), 0);
    assert_eq!(a.block_at(b.payload()), None);
}

#[test]
fn thread_cache_moves_and_allocator_is_shared() {
    fn send<T: Send>() {}
    fn sync<T: Send + Sync>() {}
    send::<ThreadCache>();
    sync::<Allocator>();
}

#[test]
fn concurrent_reserve_publish_free_never_hands_out_a_block_twice() {
    use rand::{Rng, SeedableRng};
    let heap = heap_of(16 << 20);
    let a = Arc::new(Allocator::rebuild_private(heap.clone()).unwrap());
    let live: Arc<std::sync::Mutex<HashSet<u64>>> = Arc::default();
    let threads: Vec<_> = (0..4u64)
        .map(|t| {
            let (a, heap, live) = (a.clone(), heap.clone(), live.clone());
            std::thread::spawn(move || {
                let mut rng = rand::rngs::StdRng::seed_from_u64(t);
                let mut cache = ThreadCache::default();
                let mut mine: Vec<Block> = Vec::new();
                for i in 0..4000 {
                    if mine.len() < 200 && rng.gen_bool(0.6) {
                        let len = if i % 97 == 0 {
                            rng.gen_range(MAX_SMALL..3 * SLAB_SIZE)
                        } else {
                            rng.gen_range(0..600)
                        };
                        let b = match a.reserve(&mut cache, len) {
                            Ok(b) => b,
                            Err(Error::OutOfSpace { .. }) => continue,
                            Err(e) => panic!("{e}"),
                        };
                        assert!(b.payload_len() >= len);
                        assert_eq!(a.block_at(b.payload()), Some(b));
                        assert!(
                            live.lock().unwrap().insert(b.offset),
                            "{b:?} handed out twice"
                        );
                        // Write the payload's first word: overlaps would show up below.
                        heap.atomic_u64(b.payload() as usize)
                            .store(b.offset, Ordering::Relaxed);
                        if rng.gen_bool(0.2) {
                            assert!(live.lock().unwrap().remove(&b.offset));
                            a.unreserve(&mut cache, b);
                            continue;
                        }
                        a.publish_alloc(b);
                        heap.fence();
                        mine.push(b);
                    } else if !mine.is_empty() {
                        let b = mine.swap_remove(rng.gen_range(0..mine.len()));
                        assert_eq!(
                            heap.atomic_u64(b.payload() as usize)
                                .load(Ordering::Relaxed),
                            b.offset
                        );
                        assert!(a.is_allocated(b));
                        a.publish_free(b);
                        heap.fence();
                        assert!(live.lock().unwrap().remove(&b.offset));
                        a.release(&mut cache, b);
                    }
                }
                a.drain(&mut cache);
                assert!(cache.is_empty());
                mine
            })
        })
        .collect();
    let mut expect = BTreeSet::new();
    for t in threads {
        expect.extend(t.join().unwrap());
    }
    assert_eq!(allocated(&heap), expect);
    assert_eq!(live.lock().unwrap().len(), expect.len());
    assert!(Allocator::check(&heap).is_empty());
    drop(a);
    let a = Allocator::rebuild_private(heap.clone()).unwrap();
    for b in &expect {
        assert!(a.is_allocated(*b));
    }
}

fn growable_heap(len: usize, max: usize) -> Arc<Heap> {
    let m = DramMedium::anonymous_growable(len, max, 0, 0).unwrap();
    Arc::new(
        Heap::format_growable(
            Arc::new(m),
            FormatParams {
                engine_id: 1,
                max_threads: 1,
                log_bytes_per_thread: 64 << 10,
                regions: Default::default(),
            },
            max as u64,
        )
        .unwrap(),
    )
}

/// Reserve and publish whole-slab blocks until the heap is full at its current size
/// (the allocator would grow on the next one).
fn fill_present(a: &Allocator, heap: &Heap) {
    let mut c = ThreadCache::default();
    let n = a.slabs.lock(NO_CACHE_HOLDER).nfree();
    for _ in 0..n {
        reserve_publish(a, &mut c, SLAB_SIZE - HEADER);
    }
    assert_eq!(a.slabs.lock(NO_CACHE_HOLDER).nfree(), 0);
    assert!(heap.slabs_present() < heap.layout().slab_count);
}

#[test]
fn threads_that_hit_the_end_at_once_grow_the_heap_once() {
    for round in 0..20 {
        let heap = growable_heap(1 << 20, 64 << 20);
        let a = Allocator::rebuild_private(heap.clone()).unwrap();
        fill_present(&a, &heap);
        let (size0, seq0) = (heap.size(), heap.superblock().seq);
        // Hold the growth lock while both threads find no free slab, so that both wait
        // for it (given a moment to get there) and the second finds the first's growth.
        let held = a.words.grow_lock.lock(NO_CACHE_HOLDER);
        let blocks: Vec<Block> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..2)
                .map(|_| {
                    s.spawn(|| {
                        let mut c = ThreadCache::default();
                        reserve_publish(&a, &mut c, SLAB_SIZE - HEADER)
                    })
                })
                .collect();
            std::thread::sleep(std::time::Duration::from_millis(if round < 3 {
                200
            } else {
                5
            }));
            drop(held);
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert_ne!(blocks[0], blocks[1]);
        // Doubling gives both threads a slab: exactly one growth, one superblock write.
        let seq = heap.superblock().seq;
        assert_eq!(seq, seq0 + 1, "round {round}: {} growths", seq - seq0);
        assert!(heap.size() > size0);
        assert_eq!(heap.superblock().pool_size as usize, heap.size());
        for b in &blocks {
            assert!(b.offset as usize >= size0, "{b:?} is not in the new region");
            assert!(a.is_allocated(*b));
        }
    }
}

#[test]
fn growth_is_refused_at_the_maximum_and_slabs_past_the_end_are_checked() {
    let heap = growable_heap(1 << 20, 2 << 20);
    let a = Allocator::rebuild_private(heap.clone()).unwrap();
    let mut c = ThreadCache::default();
    let mut n = 0;
    loop {
        match a.reserve(&mut c, SLAB_SIZE - HEADER) {
            Ok(b) => {
                a.publish_alloc(b);
                n += 1;
            }
            Err(Error::OutOfSpace { .. }) => break,
            Err(e) => panic!("{e}"),
        }
    }
    assert_eq!(heap.slabs_present(), heap.layout().slab_count);
    assert_eq!(n, heap.layout().slab_count);
    assert!(heap.size() as u64 <= heap.layout().max_size);
    heap.fence();
    assert!(Allocator::check(&heap).is_empty());

    // On a heap that has not grown, a slab past the end must be free; a logged block
    // there is refused by recovery.
    let heap = growable_heap(1 << 20, 4 << 20);
    let present = heap.slabs_present();
    assert!(present < heap.layout().slab_count);
    let past = Block {
        offset: heap.layout().slab_offset(present) as u64,
        size: SLAB_SIZE as u64,
    };
    assert!(corrupt_msg(Allocator::check_block(&heap, past)).contains("past the end"));
    assert!(corrupt_msg(Allocator::replay_alloc(&heap, past)).contains("past the end"));
    set_entry(&heap, present, Kind::Small(0).encode());
    let problems = Allocator::check(&heap);
    assert!(
        problems
            .iter()
            .any(|p| p.contains("past the end of the pool")),
        "{problems:?}"
    );
    assert!(Allocator::rebuild_private(heap).is_err());
}

/// Every block of every formatted small slab (offsets).
fn formatted_blocks(a: &Allocator) -> BTreeSet<u64> {
    let mut out = BTreeSet::new();
    for (slab, k) in a.kinds.iter().enumerate() {
        if let Some(Kind::Small(class)) = Kind::decode(k.load(Ordering::Relaxed)) {
            for index in 0..CLASSES[class].nblocks as usize {
                let b = pmem::block_of(a.heap.layout(), pmem::Loc::Small { slab, class, index });
                out.insert(b.offset);
            }
        }
    }
    out
}

#[test]
fn a_block_given_back_twice_leaves_its_bit_as_it_was() {
    let heap = heap_of(4 << 20);
    let a = Allocator::rebuild_private(heap.clone()).unwrap();
    let mut c = ThreadCache::default();
    let b = a.reserve(&mut c, 40).unwrap();
    let Ok(pmem::Loc::Small { slab, class, index }) = pmem::locate(heap.layout(), b) else {
        panic!("{b:?} is not small");
    };
    assert!(
        !a.free_bit_blocks().contains(&b.offset),
        "a reserved block's bit is clear"
    );
    assert!(
        a.free.lock(class, NO_CACHE_HOLDER).give(slab, index),
        "the first give-back sets the bit"
    );
    let before = a.free_bit_blocks();
    assert!(before.contains(&b.offset));
    assert!(
        !a.free.lock(class, NO_CACHE_HOLDER).give(slab, index),
        "the second one is refused"
    );
    assert_eq!(a.free_bit_blocks(), before, "and changes nothing");
}

#[test]
#[cfg(debug_assertions)]
#[should_panic(expected = "given back twice")]
fn a_block_released_twice_is_caught() {
    let heap = heap_of(4 << 20);
    let a = Allocator::rebuild_private(heap.clone()).unwrap();
    let mut c = ThreadCache::default();
    let b = reserve_publish(&a, &mut c, 40);
    a.publish_free(b);
    heap.fence();
    let mut other = ThreadCache::default();
    a.release(&mut other, b);
    a.drain(&mut other);
    // The block is free in the bitmap now: a second release is a double free.
    a.release(&mut c, b);
}

#[test]
fn free_bits_and_caches_hold_every_block_once() {
    use rand::{Rng, SeedableRng};
    let heap = heap_of(4 << 20);
    let a = Allocator::rebuild_private(heap.clone()).unwrap();
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let mut caches: Vec<ThreadCache> = (0..3).map(|_| ThreadCache::default()).collect();
    // Reserved blocks, per cache.
    let mut held: Vec<Vec<Block>> = vec![Vec::new(); 3];
    let lens = [0, 40, 500, 3000];
    for step in 0..6000 {
        let t = rng.gen_range(0..3);
        match rng.gen_range(0..100) {
            0..=54 => {
                let len = lens[rng.gen_range(0..lens.len())];
                let b = match a.reserve(&mut caches[t], len) {
                    Ok(b) => b,
                    Err(Error::OutOfSpace { .. }) => continue,
                    Err(e) => panic!("{e}"),
                };
                for (u, h) in held.iter().enumerate() {
                    assert!(!h.contains(&b), "step {step}: {b:?} reserved by {u} too");
                }
                for (u, cache) in caches.iter().enumerate() {
                    let in_cache = cache.lists.iter().any(|l| l.contains(&b.offset));
                    assert!(!in_cache, "step {step}: {b:?} still in cache {u}");
                }
                held[t].push(b);
            }
            55..=94 if !held[t].is_empty() => {
                let i = rng.gen_range(0..held[t].len());
                let b = held[t].swap_remove(i);
                // Give it back through any cache (a block freed by another thread).
                let u = rng.gen_range(0..3);
                a.unreserve(&mut caches[u], b);
            }
            95..=97 => a.drain(&mut caches[t]),
            _ => {
                // Under pressure, blocks given back go straight to the bitmaps.
                let p = a.words.pressure.load(Ordering::Relaxed);
                a.words.pressure.store(!p, Ordering::Relaxed);
            }
        }
        if step % 200 == 0 {
            // Every block of a formatted slab is in exactly one place: the bitmaps, a
            // cache, or a reservation (nothing is published here).
            let bits = a.free_bit_blocks();
            let mut seen = bits.clone();
            let elsewhere = caches
                .iter()
                .flat_map(|c| c.lists.iter().flatten().copied())
                .chain(
                    held.iter()
                        .flatten()
                        .filter(|b| b.size < SLAB_SIZE as u64)
                        .map(|b| b.offset),
                );
            for off in elsewhere {
                assert!(
                    seen.insert(off),
                    "step {step}: block at {off:#x} in two places"
                );
            }
            assert_eq!(seen, formatted_blocks(&a), "step {step}");
        }
    }
}

#[test]
fn rebuild_sets_the_free_bits_of_the_persistent_free_blocks() {
    use rand::{Rng, SeedableRng};
    let heap = heap_of(8 << 20);
    let a = Allocator::rebuild_private(heap.clone()).unwrap();
    let mut rng = rand::rngs::StdRng::seed_from_u64(11);
    let mut c = ThreadCache::default();
    let mut live = Vec::new();
    for _ in 0..3000 {
        if live.is_empty() || rng.gen_bool(0.6) {
            live.push(reserve_publish(&a, &mut c, rng.gen_range(0..2000)));
        } else {
            let b: Block = live.swap_remove(rng.gen_range(0..live.len()));
            a.publish_free(b);
            a.release(&mut c, b);
        }
    }
    heap.fence();
    drop(a);
    let a = Allocator::rebuild_private(heap.clone()).unwrap();
    let allocated: BTreeSet<u64> = allocated(&heap).iter().map(|b| b.offset).collect();
    let expect: BTreeSet<u64> = formatted_blocks(&a)
        .difference(&allocated)
        .copied()
        .collect();
    assert!(!expect.is_empty());
    assert_eq!(a.free_bit_blocks(), expect);
}

#[test]
fn lock_words_name_the_cache_that_holds_them() {
    let a = Allocator::rebuild_private(heap_of(8 << 20)).unwrap();
    let (mut c1, mut c2) = (ThreadCache::default(), ThreadCache::default());
    let small = a.reserve(&mut c1, 100).unwrap();
    // A large reservation binds the cache too (its slab lock is taken for it).
    let large = a.reserve(&mut c2, 2 * SLAB_SIZE).unwrap();
    assert_eq!(large.size as usize, 3 * SLAB_SIZE);
    assert_ne!(c1.holder, c2.holder, "two caches of one allocator, two ids");
    assert!(c1.holder < NO_CACHE_HOLDER && c2.holder < NO_CACHE_HOLDER);
    let class = class_for(100 + HEADER).unwrap();
    let none_held = |a: &Allocator| {
        (0..NCLASSES).all(|c| a.free.holder(c).is_none())
            && a.slabs.holder().is_none()
            && a.words.grow_lock.holder().is_none()
    };
    assert!(none_held(&a), "every lock is released after use");
    {
        let bits = a.free.lock(class, c1.holder);
        assert_eq!(a.free.holder(class), Some(c1.holder));
        assert!(!bits.is_empty(), "the class has free bits after a refill");
        let slabs = a.slabs.lock(c2.holder);
        assert_eq!(a.slabs.holder(), Some(c2.holder));
        assert!(
            format!("{:?}", a.slabs).contains(&format!("Some({})", c2.holder)),
            "Debug names the holder"
        );
        drop(slabs);
        // Another thread finds the class lock taken and waits for it.
        std::thread::scope(|s| {
            let waiter = s.spawn(|| {
                let mut c3 = ThreadCache::default();
                let b = a.reserve(&mut c3, 100).unwrap();
                a.unreserve(&mut c3, b);
                a.drain(&mut c3);
                c3.holder
            });
            std::thread::sleep(std::time::Duration::from_millis(20));
            assert!(!waiter.is_finished(), "the refill waits for the class lock");
            assert_eq!(a.free.holder(class), Some(c1.holder));
            drop(bits);
            let h3 = waiter.join().unwrap();
            assert!(h3 != c1.holder && h3 != c2.holder);
        });
    }
    assert!(none_held(&a));
    // The ids restart for another allocator: a cache that binds to it gets a new one.
    let b = Allocator::rebuild_private(heap_of(8 << 20)).unwrap();
    let mut c4 = ThreadCache::default();
    let other = b.reserve(&mut c4, 100).unwrap();
    assert_eq!(c4.holder, 0, "the first cache of an allocator");
    b.unreserve(&mut c4, other);
    a.unreserve(&mut c1, small);
    a.unreserve(&mut c2, large);
    a.drain(&mut c1);
    a.drain(&mut c2);
    assert!(none_held(&a));
    assert!(format!("{a:?}").contains("free_slabs"));
}

/// The cache of a thread slot names the slot in the allocator's lock words (what
/// another process can test for liveness), whichever allocator it binds to; other
/// caches get an id from the allocator.
#[test]
fn a_slots_cache_names_its_slot_in_the_allocators_locks() {
    let mut c = ThreadCache::for_slot(3);
    for _ in 0..2 {
        let a = Allocator::rebuild_private(heap_of(8 << 20)).unwrap();
        reserve_publish(&a, &mut c, 64);
        assert_eq!(c.holder(), 3, "binding keeps the slot");
        let mut d = ThreadCache::default();
        reserve_publish(&a, &mut d, 64);
        assert_eq!(d.holder(), 0, "the allocator's first id");
    }
}

/// A thread slot's cached blocks live in the allocator's region: when the cache's
/// memory is gone with its process, a new cache of the same slot (the thread that
/// recovers the slot) finds them, and draining it gives them back to the heap.
#[test]
fn a_dead_slots_cached_blocks_are_given_back_by_a_new_cache_of_its_slot() {
    let a = Allocator::rebuild_private(heap_of(4 << 20)).unwrap();
    let mut dead = ThreadCache::for_slot(3);
    let taken: Vec<Block> = (0..100)
        .map(|_| a.reserve(&mut dead, 64).unwrap())
        .collect();
    for b in taken {
        a.unreserve(&mut dead, b);
    }
    // Its process died: the cache's own memory is gone, its blocks given back by no one.
    drop(dead);
    let fill = |c: &mut ThreadCache| {
        let mut got = Vec::new();
        while let Ok(b) = a.reserve(c, 64) {
            got.push(b);
        }
        let n = got.len();
        for b in got {
            a.unreserve(c, b);
        }
        a.drain(c);
        n
    };
    let mut other = ThreadCache::for_slot(1);
    let without = fill(&mut other);
    let mut recoverer = ThreadCache::for_slot(3);
    a.drain(&mut recoverer);
    let with = fill(&mut other);
    assert!(
        with > without,
        "{with} blocks after the drain, {without} before"
    );
    assert_eq!(fill(&mut other), with, "nothing more comes back");
}

/// A holder that died growing the heap, at each step of the growth (before it, the
/// superblock written, the size raised): the recoverer's `release_dead` leaves the
/// heap at the recorded size with every slab of the growth free exactly once, and the
/// growth lock free; also when it died inserting the growth's slabs into the free-slab
/// set, one of them free and not yet counted.
#[test]
fn a_growth_whose_holder_died_is_finished_from_the_superblock() {
    const DEAD: u32 = 3;
    for step in 0..4 {
        let heap = growable_heap(1 << 20, 64 << 20);
        let a = Allocator::rebuild_private(heap.clone()).unwrap();
        fill_present(&a, &heap);
        let size0 = heap.size();
        // The dead holder's growth, up to `step` (`take_slabs`' order).
        std::mem::forget(a.words.grow_lock.lock(DEAD));
        a.words.growing_from.store(size0 as u64, Ordering::Relaxed);
        let mut grown = 0..0;
        if step >= 1 {
            grown = heap.grow(1, DEAD).unwrap().unwrap();
            if step == 1 {
                // Died between the superblock write and the raise of the size.
                heap.len.set_for_test(size0);
            }
        }
        if step == 3 {
            // Died inserting the growth's slabs: the first free, not yet counted.
            let mut free = a.slabs.lock(DEAD);
            free.set_free_uncounted(heap.layout().slabs_at(size0 as u64));
            std::mem::forget(free);
        }
        a.release_dead(DEAD);
        assert_eq!(a.slabs.holder(), None, "step {step}: the free-slab lock");
        assert_eq!(a.words.grow_lock.holder(), None, "step {step}: the lock");
        assert_eq!(a.words.growing_from.load(Ordering::Relaxed), 0);
        assert_eq!(
            heap.size() as u64,
            heap.superblock().pool_size,
            "step {step}"
        );
        assert_eq!(
            a.slabs.lock(NO_CACHE_HOLDER).nfree(),
            grown.len(),
            "step {step}: the growth's slabs, free once"
        );
        // The next growth starts from there.
        let mut c = ThreadCache::default();
        let b = reserve_publish(&a, &mut c, SLAB_SIZE - HEADER);
        assert!(b.offset as usize >= size0, "step {step}: {b:?}");
    }
}

/// A holder that died holding a class lock with the class's list broken (here, every
/// slab unreachable): the recoverer's `release_dead` lists again exactly the slabs
/// with a free bit, and frees the lock; the free blocks are the same.
#[test]
fn a_class_list_whose_holder_died_is_made_again_from_the_bits() {
    const DEAD: u32 = 3;
    let heap = heap_of(8 << 20);
    let a = Allocator::rebuild_private(heap.clone()).unwrap();
    let mut c = ThreadCache::default();
    for _ in 0..300 {
        reserve_publish(&a, &mut c, 100);
    }
    a.drain(&mut c);
    let before = a.free_bit_blocks();
    let class = (0..NCLASSES)
        .find(|&k| CLASSES[k].size >= 100)
        .expect("a class of 100 bytes");
    let mut bits = a.free.lock(class, DEAD);
    assert!(!bits.is_empty());
    bits.lose_list();
    std::mem::forget(bits);
    a.release_dead(DEAD);
    assert_eq!(a.free.holder(class), None, "the class lock");
    assert_eq!(a.free_bit_blocks(), before, "the free blocks, listed again");
    let b = reserve_publish(&a, &mut c, 100);
    assert!(
        before.contains(&b.offset),
        "{b:?} comes from the listed bits"
    );
}
