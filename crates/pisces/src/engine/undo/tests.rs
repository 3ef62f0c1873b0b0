//! White-box tests of the `undo` engine's protocol: an undo entry is durable before
//! the in-place write it undoes, recovery rolls back what a crash left unfinished and
//! keeps what committed, abort restores (in memory and durably) and gives back its
//! allocations. They drive a thread state directly on a medium that keeps the image a
//! power failure would leave ([`Shadow`]), and recover copies of images.

use super::log::{parse, UndoEntry, K_DATA};
use super::shared::UndoEngine;
use super::thread::UndoThread;
use crate::engine::{Engine, EngineId, EngineThread};
use crate::heap::{FormatParams, Heap};
use crate::medium::dram::DramMedium;
use crate::medium::{Medium, MediumKind, CACHE_LINE};
use crate::tx_options::TxOptions;
use std::sync::{Arc, Mutex};

const POOL: usize = 8 << 20;

/// A DRAM medium that also keeps its durable image: a fence makes durable the lines
/// flushed since the previous fence, with their contents at the flush. The tests run
/// one thread, so "this thread's flushes" are all flushes.
struct Shadow {
    work: DramMedium,
    durable: Mutex<Vec<u8>>,
    flushed: Mutex<Vec<(usize, [u8; CACHE_LINE])>>,
}

impl Shadow {
    fn new(len: usize) -> Shadow {
        Shadow {
            work: DramMedium::anonymous(len, 0, 0).unwrap(),
            durable: Mutex::new(vec![0; len]),
            flushed: Mutex::new(Vec::new()),
        }
    }

    /// What a power failure now leaves when no line is written back on its own.
    fn durable_image(&self) -> Vec<u8> {
        self.durable.lock().unwrap().clone()
    }

    /// What a power failure now leaves when every line is written back: the working
    /// image.
    fn working_image(&self) -> Vec<u8> {
        // SAFETY: the mapping is `len()` bytes; no thread writes it while we copy
        // (the tests run one thread).
        unsafe { std::slice::from_raw_parts(self.base(), self.len()) }.to_vec()
    }
}

// SAFETY: `base` and `len` are the DRAM mapping's, which lives as long as `self`.
unsafe impl Medium for Shadow {
    fn kind(&self) -> MediumKind {
        MediumKind::DRAM
    }
    fn base(&self) -> *mut u8 {
        self.work.base()
    }
    fn len(&self) -> usize {
        self.work.len()
    }
    fn flush(&self, off: usize, len: usize) {
        let mut f = self.flushed.lock().unwrap();
        let first = off / CACHE_LINE * CACHE_LINE;
        for line in (first..off + len).step_by(CACHE_LINE) {
            let mut bytes = [0u8; CACHE_LINE];
            // SAFETY: a line of the image (the caller's range is inside it, and the
            // image is a whole number of lines).
            unsafe {
                std::ptr::copy_nonoverlapping(self.base().add(line), bytes.as_mut_ptr(), CACHE_LINE)
            };
            f.push((line, bytes));
        }
    }
    fn fence(&self) {
        let mut d = self.durable.lock().unwrap();
        for (line, bytes) in self.flushed.lock().unwrap().drain(..) {
            d[line..line + CACHE_LINE].copy_from_slice(&bytes);
        }
    }
}

/// A fresh `undo` pool on a [`Shadow`] medium.
fn engine() -> (Arc<Shadow>, UndoEngine) {
    let m = Arc::new(Shadow::new(POOL));
    let heap = Heap::format(
        m.clone(),
        FormatParams {
            engine_id: EngineId::Undo as u32,
            max_threads: 2,
            log_bytes_per_thread: 64 << 10,
            regions: Default::default(),
        },
    )
    .unwrap();
    (m, UndoEngine::open(Arc::new(heap)).unwrap())
}

/// A heap over a copy of `image` (nothing recovered yet).
fn heap_of(image: &[u8]) -> Heap {
    let m = Arc::new(DramMedium::anonymous(image.len(), 0, 0).unwrap());
    // SAFETY: the fresh mapping is `image.len()` bytes and nobody else uses it yet.
    unsafe { std::ptr::copy_nonoverlapping(image.as_ptr(), m.base(), image.len()) };
    Heap::open(m).unwrap()
}

/// The engine a restart on `image` opens (recovery included).
fn recover(image: &[u8]) -> UndoEngine {
    UndoEngine::open(Arc::new(heap_of(image))).unwrap()
}

/// The unfinished entries of slot 0's undo log in `image`.
fn unfinished_entries(image: &[u8]) -> Vec<UndoEntry> {
    let heap = heap_of(image);
    let l = *heap.layout();
    parse(&heap, l.log_offset(0), l.log_bytes_per_thread)
        .unwrap()
        .1
}

fn begin(t: &mut UndoThread) {
    t.begin(&TxOptions::default());
}

/// Store `v` into the object at `off` (in the running transaction).
fn put(t: &mut UndoThread, off: u64, v: u64) {
    let p = t.write(off, 8).unwrap();
    // SAFETY: the object's payload, at least 8 bytes, 8-aligned, locked by us.
    unsafe { (p as *mut u64).write(v) };
}

/// The value of the object at `off` (in the running transaction).
fn get(t: &UndoThread, off: u64) -> u64 {
    // SAFETY: the object's payload, at least 8 bytes, 8-aligned, locked by us.
    unsafe { (t.read(off, 8).unwrap() as *const u64).read() }
}

/// A new committed object holding `v`.
fn object(t: &mut UndoThread, v: u64) -> u64 {
    begin(t);
    let off = t.alloc(8).unwrap();
    put(t, off, v);
    t.commit().unwrap();
    off
}

/// The value at `off` in a fresh transaction of a thread of `e`.
fn value(e: &UndoEngine, off: u64) -> u64 {
    let mut t = e.thread(1).unwrap();
    begin(&mut t);
    let v = get(&t, off);
    t.commit().unwrap();
    v
}

/// When `write` hands out the pointer to home, the object's old contents are already
/// durable in the undo log: a crash right after the in-place store, even one whose line
/// reached persistent memory on its own, recovers the old value.
#[test]
fn the_undo_entry_is_durable_before_the_in_place_write() {
    let (m, e) = engine();
    let mut t = e.thread(0).unwrap();
    let off = object(&mut t, 7);
    begin(&mut t);
    let p = t.write(off, 8).unwrap();
    // Before the store: the entry is in the durable image.
    let entries = unfinished_entries(&m.durable_image());
    let data: Vec<_> = entries.iter().filter(|u| u.kind == K_DATA).collect();
    assert_eq!(
        data.len(),
        1,
        "no durable undo entry when home is handed out"
    );
    assert_eq!(data[0].off, off);
    assert_eq!(data[0].data, 7u64.to_le_bytes());
    // SAFETY: the object's payload, 8 bytes, 8-aligned, locked by us.
    unsafe { (p as *mut u64).write(9) };
    // A crash now, with the home line written back by the cache on its own.
    let mut image = m.durable_image();
    image[off as usize..off as usize + 8].copy_from_slice(&9u64.to_le_bytes());
    assert_eq!(value(&recover(&image), off), 7);
    t.abort();
}

/// Recovery rolls back a transaction a crash left unfinished — its in-place writes and
/// its allocations, even when all of them reached persistent memory — and keeps the
/// transactions that committed.
#[test]
fn recovery_rolls_back_the_unfinished_and_keeps_the_committed() {
    let (m, e) = engine();
    let mut t = e.thread(0).unwrap();
    let a = object(&mut t, 1);
    let b = object(&mut t, 2);
    begin(&mut t);
    put(&mut t, b, 20);
    t.commit().unwrap();
    // Committed, nothing after it: a crash keeps it.
    let r = recover(&m.working_image());
    assert_eq!(
        (value(&r, a), value(&r, b)),
        (1, 20),
        "a committed write lost"
    );
    drop(r);
    // Unfinished: a write in place and an allocation, everything written back.
    begin(&mut t);
    put(&mut t, a, 10);
    let c = t.alloc(8).unwrap();
    put(&mut t, c, 30);
    let image = m.working_image();
    let r = recover(&image);
    assert_eq!(
        (value(&r, a), value(&r, b)),
        (1, 20),
        "an unfinished write kept"
    );
    let alloc = &r.shared().alloc;
    assert_eq!(
        alloc.block_state(c).map(|(_, allocated)| allocated),
        Some(false),
        "an unfinished allocation kept"
    );
    t.abort();
}

/// Abort writes the old contents back, durably before its entries are finished (a
/// crash after it cannot leave the aborted value), and hands its allocations back.
#[test]
fn abort_restores_durably_and_gives_back_allocations() {
    let (m, e) = engine();
    let mut t = e.thread(0).unwrap();
    let a = object(&mut t, 1);
    begin(&mut t);
    put(&mut t, a, 2);
    let c = t.alloc(8).unwrap();
    // The cache writes the aborted value's line back on its own.
    e.shared().heap.persist(a as usize, 8);
    t.abort();
    assert_eq!(value(&e, a), 1, "abort left the aborted value");
    assert_eq!(
        e.shared()
            .alloc
            .block_state(c)
            .map(|(_, allocated)| allocated),
        Some(false),
        "abort published its allocation"
    );
    let r = recover(&m.durable_image());
    assert_eq!(
        value(&r, a),
        1,
        "a crash after the abort keeps the aborted value"
    );
    // The block went back to the thread's allocator cache: the next allocation of
    // its size gets it again.
    begin(&mut t);
    assert_eq!(
        t.alloc(8).unwrap(),
        c,
        "abort did not give its allocation back"
    );
    t.abort();
}
