//! The `replay` workload's word fill (`--replay-writes N`): the setting of the SPHT
//! paper's replay figure (its Fig. 6), where every transaction writes N random words of
//! a heap of a given size, so that the logs of many threads replay into a heap much
//! smaller than them (many writes to each word: the duplicate filter's case) or as
//! large as them.
//!
//! The heap is an array of `heap_bytes / 8` words, held as objects of [`OBJ_WORDS`]
//! words (512 bytes: a write copies its object into the transaction, and a commit
//! logs only the words it changed, one 16-byte entry each). Fill thread `t` of `T`
//! owns the words `k` with `k mod T = t`, so that the last value of every word is
//! known to the thread that wrote it: word `k`'s value is [`value`] of its owner and
//! the owner's transaction number, or 0 if it was never written.

use pisces::{PPtr, ThreadHandle, Tx};
use rand::rngs::StdRng;
use rand::Rng;

/// Words per object of the array.
pub const OBJ_WORDS: usize = 64;
/// Objects allocated per transaction while the array is built.
const ALLOC_BATCH: usize = 256;

/// One object of the array.
pub type Obj = PPtr<[u64; OBJ_WORDS]>;

/// The shape of the fill: the heap's words and the writes of each transaction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shape {
    /// Words of the array (the key space).
    pub words: usize,
    /// Words written per transaction.
    pub writes: usize,
}

impl Shape {
    /// A heap of `heap_bytes` bytes of words, `writes` writes per transaction.
    pub fn new(heap_bytes: u64, writes: usize) -> Shape {
        Shape {
            words: (heap_bytes / 8).max(OBJ_WORDS as u64) as usize,
            writes: writes.max(1),
        }
    }
    /// Objects of the array.
    pub fn objects(self) -> usize {
        self.words.div_ceil(OBJ_WORDS)
    }
    /// Log bytes of one transaction: the record header and one word entry per write
    /// (an upper bound: two writes to one word log one entry).
    pub fn record_bytes(self) -> usize {
        48 + 16 * self.writes
    }
    /// Pool bytes the array takes: each object with its allocator header, rounded to
    /// the allocator's class (twice the payload is a bound).
    pub fn heap_bytes(self) -> u64 {
        2 * (self.objects() * OBJ_WORDS * 8) as u64
    }
}

/// The value fill thread `t` writes in its transaction number `seq` (from 1).
pub fn value(t: usize, seq: u32) -> u64 {
    (t as u64 + 1) << 40 | u64::from(seq)
}

/// Build the array (zeroed), [`ALLOC_BATCH`] objects per transaction.
pub fn create(h: &mut ThreadHandle, shape: Shape) -> pisces::Result<Vec<Obj>> {
    let mut objs = Vec::with_capacity(shape.objects());
    while objs.len() < shape.objects() {
        let n = ALLOC_BATCH.min(shape.objects() - objs.len());
        let batch = h.run(|tx| {
            (0..n)
                .map(|_| tx.alloc_zeroed::<[u64; OBJ_WORDS]>())
                .collect::<pisces::Result<Vec<_>>>()
        })?;
        objs.extend(batch);
    }
    Ok(objs)
}

/// Fill thread `t` of `threads`: its words' last transaction numbers (index `i` is
/// word `i * threads + t`; 0: never written).
pub fn owned(shape: Shape, threads: usize, t: usize) -> Vec<u32> {
    vec![0; shape.words.saturating_sub(t).div_ceil(threads)]
}

/// One transaction of fill thread `t` (of `threads`), number `seq`: `shape.writes`
/// random words of its own set to [`value`]; `last` (see [`owned`]) notes them once it
/// committed.
pub fn transaction(
    h: &mut ThreadHandle,
    objs: &[Obj],
    shape: Shape,
    (t, threads): (usize, usize),
    seq: u32,
    rng: &mut StdRng,
    last: &mut [u32],
) -> pisces::Result<()> {
    let picked: Vec<usize> = (0..shape.writes)
        .map(|_| rng.gen_range(0..last.len()))
        .collect();
    let v = value(t, seq);
    h.run(|tx| {
        for &i in &picked {
            let k = i * threads + t;
            tx.write(objs[k / OBJ_WORDS])?[k % OBJ_WORDS] = v;
        }
        Ok(())
    })?;
    for i in picked {
        last[i] = seq;
    }
    Ok(())
}

/// Check every word of the array against the last value its owner committed
/// (`last[t]`: fill thread `t`'s [`owned`] list).
pub fn verify(
    h: &mut ThreadHandle,
    objs: &[Obj],
    shape: Shape,
    last: &[Vec<u32>],
) -> Result<(), String> {
    let threads = last.len();
    // A few objects per transaction: an engine may revalidate its read set on each read.
    for (c, chunk) in objs.chunks(16).enumerate() {
        h.run(|tx: &mut Tx<'_>| {
            for (j, &o) in chunk.iter().enumerate() {
                let words = tx.read(o)?;
                for (w, &got) in words.iter().enumerate() {
                    let k = (c * 16 + j) * OBJ_WORDS + w;
                    if k >= shape.words {
                        break;
                    }
                    let (t, i) = (k % threads, k / threads);
                    let want = match last[t][i] {
                        0 => 0,
                        seq => value(t, seq),
                    };
                    if got != want {
                        return Err(pisces::Error::Corrupt(
                            format!(
                                "word {k} of the array: the recovered value {got:#x} is not the \
                                 last committed one ({want:#x})"
                            )
                            .into(),
                        ));
                    }
                }
            }
            Ok(())
        })
        .map_err(|e| format!("after recovery: {e}"))?;
    }
    Ok(())
}
