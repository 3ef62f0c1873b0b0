//! `alloc`: allocation and free churn of varied sizes, large objects included.
//!
//! Each thread owns a table of [`SLOTS`] slots. Operation `i` of thread `t` picks a
//! slot and allocates an object into it (if empty), frees its object, or replaces it
//! (free and allocate in one transaction); some operations also allocate or free in a
//! second slot. Slot 0 holds large objects (17.6 KB and 28 KB payloads: whole-slab
//! runs, above the 16 KiB small classes), the others small ones of six sizes from
//! 8 bytes to 11 KB. Every object is filled with a pattern derived from a tag unique
//! to the operation that created it (first and last word, one word in 64, zeros
//! elsewhere), and the slot records the tag and size.
//!
//! The oracle reads every object and compares it word for word with its pattern (a
//! block handed out twice, or a torn or stale object, shows as a wrong word), compares
//! each thread's slots with the model after exactly its acknowledged operations, or
//! that plus some of those in doubt ([`Bounds`]), and requires the allocator's
//! persistent bitmaps to be exactly the reachable set: no leak (not even of a large
//! run) beyond what the recovered transactions hold, no reachable block free.
//!
//! The pool has 160 KiB logs: without flush-diff a new large object is logged whole
//! (its 64 KiB slab run), and a record may use half of a log.

use super::oracle::allocated_equals_reachable;
use super::rng::mix;
use super::workload::{match_threads, Bounds, Shape, Workload, MAX_THREADS};
use pisces::{Error, PPtr, Pod, Pool, Result, ThreadHandle, Tx, TxOptions, Zeroable};
use std::collections::BTreeSet;

/// Slots per thread. Slot 0 holds large objects.
pub const SLOTS: usize = 6;

/// Object payload sizes in 8-byte words. The last two are large (more than 16 KiB).
pub const SIZES: [usize; 8] = [1, 5, 30, 150, 700, 1400, 2200, 3500];
/// Index in [`SIZES`] of the first large size.
const FIRST_LARGE: usize = 6;

/// One slot: an object, its size (index in [`SIZES`] plus one; 0 = empty) and the tag
/// its content was made from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
#[repr(C)]
pub struct Slot {
    obj: u64,
    size: u64,
    tag: u64,
}

type Slots = [Slot; SLOTS];
type Root = [PPtr<Slots>; MAX_THREADS];

/// The allocation-churn workload (see the [module docs](self)).
#[derive(Clone, Copy, Debug, Default)]
pub struct AllocChurn;

/// What one operation does to one slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Action {
    /// Allocate an object of size index `.0` (the slot is empty).
    Alloc(usize),
    /// Free the slot's object.
    Free,
    /// Free the slot's object and allocate one of size index `.0` instead.
    Replace(usize),
}

/// Model of one slot: `(size index + 1, tag)`, `(0, 0)` when empty.
type ModelSlot = (u64, u64);

fn tag(t: usize, i: usize, slot: usize) -> u64 {
    (1 << 63) | (t as u64) << 48 | (i as u64) << 8 | slot as u64
}

/// The slot actions of operation `i` of thread `t`, given the thread's slots before it.
fn plan(t: usize, i: usize, slots: &[ModelSlot; SLOTS]) -> Vec<(usize, Action)> {
    let x = mix(t as u64 + 0xA110C, i as u64);
    let s = (x % SLOTS as u64) as usize;
    let size = |s: usize, r: u64| {
        if s == 0 {
            FIRST_LARGE + (r % (SIZES.len() - FIRST_LARGE) as u64) as usize
        } else {
            (r % FIRST_LARGE as u64) as usize
        }
    };
    let mut v = Vec::new();
    let new = size(s, x >> 20);
    v.push((
        s,
        if slots[s].0 == 0 {
            Action::Alloc(new)
        } else if (x >> 8).is_multiple_of(3) {
            Action::Free
        } else {
            Action::Replace(new)
        },
    ));
    if (x >> 12).is_multiple_of(4) {
        let s2 = 1 + ((x >> 16) % (SLOTS as u64 - 1)) as usize;
        if s2 != s {
            v.push((
                s2,
                if slots[s2].0 == 0 {
                    Action::Alloc(size(s2, x >> 32))
                } else {
                    Action::Free
                },
            ));
        }
    }
    v
}

/// Thread `t`'s slots after its first `c` operations.
fn slots_after(t: usize, c: usize) -> [ModelSlot; SLOTS] {
    let mut slots = [(0, 0); SLOTS];
    for i in 0..c {
        for (s, a) in plan(t, i, &slots) {
            slots[s] = match a {
                Action::Free => (0, 0),
                Action::Alloc(z) | Action::Replace(z) => (z as u64 + 1, tag(t, i, s)),
            };
        }
    }
    slots
}

/// Word `k` of an object of `n` words made from `tag`.
fn pattern(tag: u64, n: usize, k: usize) -> u64 {
    if k == 0 {
        tag
    } else if k == n - 1 {
        !tag
    } else if k.is_multiple_of(64) {
        tag.rotate_left((k / 64) as u32) ^ k as u64
    } else {
        0
    }
}

fn alloc_obj<const N: usize>(tx: &mut Tx<'_>, tag: u64) -> Result<u64> {
    let p = tx.alloc([0u64; N])?;
    let w = tx.write(p)?;
    for (k, x) in w.iter_mut().enumerate() {
        *x = pattern(tag, N, k);
    }
    Ok(p.offset())
}

/// `Ok(None)` if the object at `off` holds the pattern of `tag`, else the first wrong word.
fn verify_obj<const N: usize>(tx: &Tx<'_>, off: u64, tag: u64) -> Result<Option<String>> {
    let w = tx.read(PPtr::<[u64; N]>::from_offset(off))?;
    Ok(w.iter().enumerate().find_map(|(k, &x)| {
        let want = pattern(tag, N, k);
        (x != want).then(|| format!("word {k} of {N} is {x:#x}, not {want:#x}"))
    }))
}

/// Run `$f::<N>(args)` with `N` = `SIZES[$idx]`.
macro_rules! sized {
    ($idx:expr, $f:ident($($a:expr),*)) => {
        match $idx {
            0 => $f::<{ SIZES[0] }>($($a),*),
            1 => $f::<{ SIZES[1] }>($($a),*),
            2 => $f::<{ SIZES[2] }>($($a),*),
            3 => $f::<{ SIZES[3] }>($($a),*),
            4 => $f::<{ SIZES[4] }>($($a),*),
            5 => $f::<{ SIZES[5] }>($($a),*),
            6 => $f::<{ SIZES[6] }>($($a),*),
            _ => $f::<{ SIZES[7] }>($($a),*),
        }
    };
}

impl Workload for AllocChurn {
    fn name(&self) -> &'static str {
        "alloc"
    }

    fn describe(&self) -> &'static str {
        "allocation/free churn, 8 B to 28 KB objects (large runs included): contents intact, slots = acknowledged ops (plus any in doubt), bitmaps = reachable"
    }

    fn shape(&self, threads: usize, _ops: usize) -> Shape {
        // Without flush-diff the record of a transaction that allocates a large object
        // holds the whole slab run (64 KiB), and a record may use a third of a log (the
        // bound of spht; the other engines allow half). Then 512 KiB for the
        // superblock, slab table and small-class slabs, and per thread slot room for
        // its large objects (including ones awaiting reuse).
        let slots = threads.max(2) as u64;
        Shape {
            pool_size: (512 << 10) + slots * ((224 + 384) << 10),
            log_bytes: 224 << 10,
        }
    }

    fn setup(&self, pool: &Pool) -> Result<()> {
        let root: PPtr<Root> = pool.root()?;
        pool.run(|tx| {
            let mut r = [PPtr::null(); MAX_THREADS];
            for p in r.iter_mut() {
                *p = tx.alloc([Slot::zeroed(); SLOTS])?;
            }
            *tx.write(root)? = r;
            Ok(())
        })
    }

    fn root(&self, pool: &Pool) -> Result<u64> {
        Ok(pool.root::<Root>()?.offset())
    }

    fn op(
        &self,
        h: &mut ThreadHandle,
        root: u64,
        t: usize,
        i: usize,
        opts: TxOptions,
    ) -> Result<()> {
        let root: PPtr<Root> = PPtr::from_offset(root);
        h.run_with(opts, |tx| {
            let table = tx.read(root)?[t];
            let slots = *tx.read(table)?;
            let model = slots.map(|s| (s.size, s.tag));
            let mut new = slots;
            for (s, a) in plan(t, i, &model) {
                if matches!(a, Action::Free | Action::Replace(_)) {
                    tx.free(PPtr::<u64>::from_offset(slots[s].obj))?;
                    new[s] = Slot::zeroed();
                }
                if let Action::Alloc(z) | Action::Replace(z) = a {
                    let tg = tag(t, i, s);
                    new[s] = Slot {
                        obj: sized!(z, alloc_obj(tx, tg))?,
                        size: z as u64 + 1,
                        tag: tg,
                    };
                }
            }
            *tx.write(table)? = new;
            Ok(())
        })
    }

    fn check(&self, pool: &Pool, bounds: &[Bounds]) -> std::result::Result<Vec<usize>, String> {
        let root: PPtr<Root> = pool.root().map_err(|e| format!("root: {e}"))?;
        let (observed, reachable) = pool
            .run(|tx| {
                let tables = *tx.read(root)?;
                let mut reachable = BTreeSet::from([root.offset()]);
                let mut observed = Vec::new();
                for (t, table) in tables.into_iter().enumerate() {
                    if !reachable.insert(table.offset()) {
                        return Err(Error::abort(format!("slot table {t} reached twice")));
                    }
                    let slots = *tx.read(table)?;
                    for (s, sl) in slots.iter().enumerate() {
                        if sl.size == 0 {
                            continue;
                        }
                        let z = (sl.size - 1) as usize;
                        if z >= SIZES.len() {
                            return Err(Error::abort(format!(
                                "thread {t} slot {s}: size index {} out of range",
                                sl.size
                            )));
                        }
                        if !reachable.insert(sl.obj) {
                            return Err(Error::abort(format!(
                                "thread {t} slot {s}: object {:#x} reached twice",
                                sl.obj
                            )));
                        }
                        if let Some(w) = sized!(z, verify_obj(tx, sl.obj, sl.tag))? {
                            return Err(Error::abort(format!(
                                "thread {t} slot {s}: object {:#x} (tag {:#x}) damaged: {w}",
                                sl.obj, sl.tag
                            )));
                        }
                    }
                    observed.push(slots.map(|s| (s.size, s.tag)));
                }
                Ok((observed, reachable))
            })
            .map_err(|e| format!("reading the slots: {e}"))?;
        if let Some(t) = (bounds.len()..MAX_THREADS).find(|&t| observed[t].iter().any(|s| s.0 != 0))
        {
            return Err(format!(
                "slots of thread {t}, which never ran, are not empty"
            ));
        }
        let counts = match_threads(bounds, |t, c| {
            let want = slots_after(t, c);
            if observed[t] == want {
                Ok(())
            } else {
                Err(format!("slots {:?} are not {want:?}", observed[t]))
            }
        })?;
        allocated_equals_reachable(pool, &reachable)?;
        Ok(counts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_plan_churns_every_size_and_keeps_slot_zero_large() {
        let mut seen = BTreeSet::new();
        let mut slots = [(0, 0); SLOTS];
        let (mut frees, mut replaces, mut doubles) = (0, 0, 0);
        for i in 0..2000 {
            let p = plan(0, i, &slots);
            doubles += usize::from(p.len() == 2);
            for (s, a) in p {
                match a {
                    Action::Alloc(z) | Action::Replace(z) => {
                        assert_eq!(s == 0, z >= FIRST_LARGE, "slot {s} size {z}");
                        assert_eq!(matches!(a, Action::Alloc(_)), slots[s].0 == 0);
                        replaces += usize::from(matches!(a, Action::Replace(_)));
                        seen.insert(z);
                        slots[s] = (z as u64 + 1, tag(0, i, s));
                    }
                    Action::Free => {
                        assert_ne!(slots[s].0, 0);
                        frees += 1;
                        slots[s] = (0, 0);
                    }
                }
            }
        }
        assert_eq!(seen.len(), SIZES.len());
        assert!(frees > 100 && replaces > 100 && doubles > 100);
        assert_eq!(slots_after(0, 2000), slots);
        assert!(SIZES[FIRST_LARGE] * 8 > 16 << 10);
    }

    #[test]
    fn patterns_mark_both_ends() {
        assert_eq!(pattern(5, 1, 0), 5);
        assert_eq!(pattern(5, 3, 2), !5);
        assert_eq!(pattern(5, 200, 1), 0);
        assert_ne!(pattern(5, 200, 128), 0);
    }
}
