//! Counts of the writes to words that several threads write: a proxy for how an
//! engine scales past the cores a machine has.
//!
//! A store or an atomic read-modify-write to a word that more than one thread writes
//! (a global clock, a lock word, a marker, a shared counter) takes that word's cache
//! line exclusive; when several cores do it, the line moves between them and each
//! such write costs a coherence miss. How many of these writes a committed
//! transaction makes, and on how many distinct lines, bounds how the engine scales at
//! core counts where every such write misses. A word that only its owner writes (a
//! thread slot's published start timestamp, read by the others' scans) is not
//! counted: its line stays in the owner's cache between the readers' looks.
//!
//! The engines call [`count_write`] beside each such write (the kit's clock, lock and
//! version primitives, and each engine's own shared words). Without the crate's
//! `shared-counts` feature [`count_write`] and [`end_unit`] are empty inline functions:
//! the library pays nothing. With it, each thread counts in its own block (no shared
//! write of its own) and [`totals`] sums every thread's block, live or exited.
//!
//! Distinct lines are counted per unit of work: a line counts once between two calls
//! of [`end_unit`] on the thread that writes it. A benchmark worker ends a unit after
//! each transaction it completes (its aborted attempts included); a background thread
//! of an engine ends one after each batch it processes.

use std::sync::{Mutex, MutexGuard};

/// True if this build counts (the `shared-counts` feature).
#[cfg_attr(not(feature = "tools"), allow(dead_code))] // read by the tools only
pub const ENABLED: bool = cfg!(feature = "shared-counts");

/// Writes to shared words and the distinct lines they hit.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(not(feature = "tools"), allow(dead_code))] // read by the tools only
pub struct SharedCounts {
    /// Stores and atomic read-modify-writes to words several threads write.
    pub writes: u64,
    /// Distinct cache lines those writes hit, per unit of work ([`end_unit`]).
    pub lines: u64,
}

impl std::ops::Sub for SharedCounts {
    type Output = SharedCounts;
    fn sub(self, rhs: SharedCounts) -> SharedCounts {
        SharedCounts {
            writes: self.writes.wrapping_sub(rhs.writes),
            lines: self.lines.wrapping_sub(rhs.lines),
        }
    }
}

/// Count one store or atomic read-modify-write (successful or not: a failed
/// compare-and-swap takes the line exclusive too) to the shared word `word`.
#[inline(always)]
pub(crate) fn count_write<T: ?Sized>(word: &T) {
    #[cfg(feature = "shared-counts")]
    counting::write(std::ptr::from_ref(word).cast::<u8>() as usize);
    #[cfg(not(feature = "shared-counts"))]
    let _ = word;
}

/// Lock `m`, counting the lock's read-modify-write of its state word and the unlock's
/// store as two writes to a shared word. A poisoned mutex is taken as it is: the
/// callers' data stays consistent when a holder panics (each caller's own argument).
#[inline]
pub(crate) fn lock<T: ?Sized>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    count_write(m);
    count_write(m);
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// End this thread's unit of work: a line it writes next counts as a new one.
#[inline(always)]
pub fn end_unit() {
    #[cfg(feature = "shared-counts")]
    counting::end_unit();
}

/// Every thread's counts so far (threads that exited included). Zero without the
/// `shared-counts` feature.
#[cfg_attr(not(feature = "tools"), allow(dead_code))] // read by the tools only
pub fn totals() -> SharedCounts {
    #[cfg(feature = "shared-counts")]
    return counting::totals();
    #[cfg(not(feature = "shared-counts"))]
    SharedCounts::default()
}

/// This thread's counts so far. Zero without the `shared-counts` feature.
#[cfg_attr(not(feature = "tools"), allow(dead_code))] // read by the tools only
pub fn this_thread() -> SharedCounts {
    #[cfg(feature = "shared-counts")]
    return counting::this_thread();
    #[cfg(not(feature = "shared-counts"))]
    SharedCounts::default()
}

#[cfg(feature = "shared-counts")]
mod counting {
    use super::SharedCounts;
    use crate::medium::CACHE_LINE;
    use std::cell::RefCell;
    use std::sync::atomic::AtomicU64;
    use std::sync::atomic::Ordering::Relaxed;
    use std::sync::{Arc, Mutex, MutexGuard};

    /// Lines a unit remembers; a unit that writes more starts over (and counts the
    /// lines it writes again as new ones).
    const OPEN_LINES: usize = 64;

    /// One thread's counts. Only the owner writes them (a load and a store, no
    /// read-modify-write: the counting adds no shared write of its own); Relaxed: the
    /// readers in `totals` want a value, nothing is published through it.
    #[derive(Default)]
    struct Block {
        writes: AtomicU64,
        lines: AtomicU64,
    }

    impl Block {
        fn get(&self) -> SharedCounts {
            SharedCounts {
                writes: self.writes.load(Relaxed),
                lines: self.lines.load(Relaxed),
            }
        }
    }

    /// The live threads' blocks and the sum of the exited threads'.
    struct Registry {
        live: Vec<Arc<Block>>,
        exited: SharedCounts,
    }

    static REGISTRY: Mutex<Registry> = Mutex::new(Registry {
        live: Vec::new(),
        exited: SharedCounts {
            writes: 0,
            lines: 0,
        },
    });

    fn registry() -> MutexGuard<'static, Registry> {
        REGISTRY.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A thread's block and the lines of its current unit.
    struct Local {
        block: Arc<Block>,
        open: [usize; OPEN_LINES],
        open_len: usize,
    }

    impl Local {
        fn register() -> Local {
            let block = Arc::new(Block::default());
            registry().live.push(Arc::clone(&block));
            Local {
                block,
                open: [0; OPEN_LINES],
                open_len: 0,
            }
        }
    }

    impl Drop for Local {
        /// Move the exited thread's counts into `exited` under the registry's lock, so
        /// that `totals` sees them exactly once.
        fn drop(&mut self) {
            let mut r = registry();
            let mine = self.block.get();
            r.exited.writes += mine.writes;
            r.exited.lines += mine.lines;
            r.live.retain(|b| !Arc::ptr_eq(b, &self.block));
        }
    }

    thread_local! {
        static LOCAL: RefCell<Local> = RefCell::new(Local::register());
    }

    fn bump(c: &AtomicU64) {
        c.store(c.load(Relaxed) + 1, Relaxed);
    }

    pub(super) fn write(addr: usize) {
        let line = addr / CACHE_LINE;
        // A write from another thread-local's destructor after ours is gone is not
        // counted.
        let _ = LOCAL.try_with(|l| {
            let mut l = l.borrow_mut();
            bump(&l.block.writes);
            let n = l.open_len;
            if l.open[..n].contains(&line) {
                return;
            }
            if n == OPEN_LINES {
                l.open_len = 0;
            }
            let n = l.open_len;
            l.open[n] = line;
            l.open_len = n + 1;
            bump(&l.block.lines);
        });
    }

    pub(super) fn end_unit() {
        let _ = LOCAL.try_with(|l| l.borrow_mut().open_len = 0);
    }

    pub(super) fn totals() -> SharedCounts {
        let r = registry();
        r.live.iter().fold(r.exited, |acc, b| {
            let c = b.get();
            SharedCounts {
                writes: acc.writes + c.writes,
                lines: acc.lines + c.lines,
            }
        })
    }

    pub(super) fn this_thread() -> SharedCounts {
        LOCAL
            .try_with(|l| l.borrow().block.get())
            .unwrap_or_default()
    }
}

#[cfg(all(test, feature = "shared-counts"))]
mod tests {
    use super::*;
    use crate::{Config, EngineId, EngineOptions, PPtr, Pool};
    use std::sync::atomic::AtomicU64;

    /// Words on one line count once per unit, a new unit counts them again, and an
    /// exited thread's counts stay in the totals.
    #[test]
    fn lines_count_once_per_unit_and_exited_threads_stay_counted() {
        #[repr(align(64))]
        struct Line([AtomicU64; 8]);
        let (a, b) = (Line(Default::default()), Line(Default::default()));
        end_unit();
        let before = this_thread();
        count_write(&a.0[0]);
        count_write(&a.0[7]);
        count_write(&b.0[3]);
        count_write(&a.0[1]);
        assert_eq!(
            this_thread() - before,
            SharedCounts {
                writes: 4,
                lines: 2
            }
        );
        end_unit();
        count_write(&a.0[2]);
        assert_eq!(
            this_thread() - before,
            SharedCounts {
                writes: 5,
                lines: 3
            }
        );
        let other = std::thread::spawn(|| {
            let l = Line(Default::default());
            count_write(&l.0[0]);
            count_write(&l.0[1]);
            this_thread()
        })
        .join()
        .unwrap();
        assert_eq!(
            other,
            SharedCounts {
                writes: 2,
                lines: 1
            }
        );
        // Other tests count concurrently: the totals grow by at least ours.
        let t = totals();
        assert!(t.writes >= 7 && t.lines >= 4, "{t:?}");
    }

    /// A pool of `engine` with one `u64` object, group commit off where the engine has
    /// it (every commit writes back on the committing thread).
    fn pool(engine: EngineId, dir: &tempfile::TempDir) -> (Pool, PPtr<u64>) {
        let opts = match engine {
            EngineId::Pisces | EngineId::Volatile => EngineOptions::new().set("group_commit", 1),
            _ => EngineOptions::new(),
        };
        let cfg = Config {
            size: 16 << 20,
            max_threads: 2,
            log_bytes_per_thread: 256 << 10,
            engine_options: opts,
            ..Config::default()
        }
        .engine(engine);
        let pool = Pool::create(dir.path().join("counts.pool"), cfg).unwrap();
        let x = pool.run(|tx| tx.alloc(0u64)).unwrap();
        pool.sync().unwrap();
        (pool, x)
    }

    fn increment(tx: &mut crate::Tx<'_>, x: PPtr<u64>) -> crate::Result<()> {
        *tx.write(x)? += 1;
        Ok(())
    }

    /// What one read-only and one update transaction of one object write to shared
    /// words, counted on this thread (the engines below have no background thread).
    fn counts(engine: EngineId) -> (SharedCounts, SharedCounts) {
        let dir = tempfile::tempdir_in("/dev/shm").unwrap();
        let (pool, x) = pool(engine, &dir);
        let mut h = pool.handle().unwrap();
        // Warm up: the first transactions of a handle may mark objects live.
        for _ in 0..3 {
            h.run(|tx| Ok(*tx.read(x)?)).unwrap();
            h.run(|tx| increment(tx, x)).unwrap();
        }
        end_unit();
        let t0 = this_thread();
        h.run(|tx| Ok(*tx.read(x)?)).unwrap();
        end_unit();
        let t1 = this_thread();
        h.run(|tx| increment(tx, x)).unwrap();
        end_unit();
        let t2 = this_thread();
        (t1 - t0, t2 - t1)
    }

    /// Pisces (group commit off), one object: a read-only transaction writes no shared
    /// word; an update writes 8: the object's header word (lock, and the unlock after
    /// write-back), `globalTS` (the commit's increment), its slot's batch lock (lock and
    /// unlock), `pending_min` (lowered at commit, reset after write-back) and `wb_seq`.
    /// Lines: the header's, the clock's, and the slot's (one or two: the batch lock and
    /// the two words may straddle a line boundary).
    #[test]
    fn a_pisces_update_writes_the_clock_the_header_and_its_slot() {
        let (ro, upd) = counts(EngineId::Pisces);
        assert_eq!(ro, SharedCounts::default());
        assert_eq!(upd.writes, 8, "{upd:?}");
        assert!((3..=4).contains(&upd.lines), "{upd:?}");
    }

    /// Undo (strict 2PL): a reader takes and releases a shared lock on the object's
    /// lock word, a writer an exclusive one: 2 writes on 1 line each.
    #[test]
    fn two_phase_locking_writes_the_lock_word_for_readers_too() {
        let (ro, upd) = counts(EngineId::Undo);
        assert_eq!(
            ro,
            SharedCounts {
                writes: 2,
                lines: 1
            }
        );
        assert_eq!(
            upd,
            SharedCounts {
                writes: 2,
                lines: 1
            }
        );
    }

    /// Bare (a single-writer gate): readers write only their own slot (not counted); a
    /// writer takes and gives back the gate's writer word.
    #[test]
    fn bare_writers_take_the_gate_and_readers_write_nothing_shared() {
        let (ro, upd) = counts(EngineId::Bare);
        assert_eq!(ro, SharedCounts::default());
        assert_eq!(
            upd,
            SharedCounts {
                writes: 2,
                lines: 1
            }
        );
    }
}
