//! Reader-writer lock words for the two-phase-locking engines (`undo`, `pmdk`).
//!
//! A lock word is `tag | EXCLUSIVE | owner` (one writer) or `tag | n` (`n` readers), or
//! anything whose tag is not the current run's, which reads as free: so locks left in
//! persistent memory by a crash need no clean-up (the tag is the run generation, as in
//! Pisces; an engine that clears its lock words at open passes tag 0).
//!
//! [`HeldLocks`] is one thread's set of held locks. Locks are taken on first access and
//! held until [`HeldLocks::release_all`] at commit or abort (strict 2PL). A lock that
//! cannot be taken at once fails with [`Error::Conflict`] (no-wait: no deadlock can
//! form); `run` retries after a randomized back-off. So readers do wait for writers —
//! that is what the baselines built on this are for.

use super::header_word::TAG_MASK;
use crate::engine::kit::shared_counts::count_write;
use crate::fasthash::FastMap;
use crate::{Error, Result};
use std::cell::RefCell;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::{AcqRel, Acquire, Release};

const EXCLUSIVE: u64 = 1 << 47;
const LOW_MASK: u64 = (1 << 47) - 1;

/// Entries a lock table keeps room for after `release_all` shrinks it.
const SMALL_TABLE: usize = 32;

/// How a lock is held.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    Shared,
    Exclusive,
}

/// The locks one thread holds, keyed by the lock word's offset.
pub(crate) struct HeldLocks {
    tag: u64,
    owner: u64,
    /// Interior mutability: engines lock from `read(&self)`.
    held: RefCell<FastMap<u64, Mode>>,
}

impl HeldLocks {
    /// Locks of thread `owner` in the run whose lock words carry `tag`.
    pub(crate) fn new(tag: u64, owner: usize) -> Self {
        HeldLocks {
            tag,
            owner: owner as u64 & LOW_MASK,
            held: RefCell::new(FastMap::default()),
        }
    }

    /// How this thread holds the lock at `key`, if it does.
    pub(crate) fn mode(&self, key: u64) -> Option<Mode> {
        self.held.borrow().get(&key).copied()
    }

    /// True if another thread holds the lock word `word` (at `key`) exclusively.
    #[cfg_attr(not(pmdk), allow(dead_code))] // only the pmdk engine asks
    pub(crate) fn held_by_another(&self, key: u64, word: &AtomicU64) -> bool {
        let h = word.load(Acquire);
        self.mode(key).is_none() && h & TAG_MASK == self.tag && h & EXCLUSIVE != 0
    }

    /// Take `mode` on the lock word `word` (at `key`), or upgrade shared to exclusive
    /// when this thread is the only reader. `Err(Conflict)` if another thread holds it.
    pub(crate) fn lock(&self, key: u64, word: &AtomicU64, mode: Mode) -> Result<()> {
        let held = self.mode(key);
        if held == Some(Mode::Exclusive) || (held == Some(Mode::Shared) && mode == Mode::Shared) {
            return Ok(());
        }
        let tag = self.tag;
        let h = word.load(Acquire);
        let cur = if h & TAG_MASK == tag {
            h & !TAG_MASK
        } else {
            0
        };
        let next = match (mode, held) {
            (Mode::Shared, _) if cur & EXCLUSIVE == 0 => tag | (cur + 1),
            (Mode::Exclusive, None) if cur == 0 => tag | EXCLUSIVE | self.owner,
            (Mode::Exclusive, Some(Mode::Shared)) if cur == 1 => tag | EXCLUSIVE | self.owner,
            _ => return Err(Error::Conflict),
        };
        // Acquire (on success) orders our reads of the object after the previous
        // holder's release, i.e. after its in-place writes.
        count_write(word);
        word.compare_exchange(h, next, AcqRel, Acquire)
            .map_err(|_| Error::Conflict)?;
        self.held.borrow_mut().insert(key, mode);
        Ok(())
    }

    /// Release every held lock; `word_of(key)` gives the lock word at `key`.
    pub(crate) fn release_all<'a>(&self, word_of: impl Fn(u64) -> &'a AtomicU64) {
        let mut held = self.held.borrow_mut();
        let count = held.len();
        for (key, mode) in held.drain() {
            let word = word_of(key);
            count_write(word);
            match mode {
                // Release: our in-place writes happen before the next holder's reads.
                Mode::Exclusive => word.store(0, Release),
                Mode::Shared => {
                    let mut h = word.load(Acquire);
                    loop {
                        let n = (h & !TAG_MASK).saturating_sub(1) & LOW_MASK;
                        let next = if n == 0 { 0 } else { self.tag | n };
                        // Release: our reads of the object happen before a writer
                        // that takes the lock next changes it.
                        match word.compare_exchange_weak(h, next, AcqRel, Acquire) {
                            Ok(_) => break,
                            Err(x) => {
                                // A retry is another write to the word.
                                count_write(word);
                                h = x;
                            }
                        }
                    }
                }
            }
        }
        // Draining costs the table's capacity, not its length: after one large
        // transaction (a preload) every later small one would pay for its table. Shrink
        // a table far larger than what this transaction needed.
        if held.capacity() > SMALL_TABLE && held.capacity() > 8 * count {
            held.shrink_to(SMALL_TABLE.max(2 * count));
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn readers_share_writers_exclude_and_foreign_tags_read_as_free() {
        let tag = 3 << 48;
        let w = AtomicU64::new(0);
        let (a, b) = (HeldLocks::new(tag, 1), HeldLocks::new(tag, 2));
        a.lock(8, &w, Mode::Shared).unwrap();
        b.lock(8, &w, Mode::Shared).unwrap();
        assert!(matches!(
            a.lock(8, &w, Mode::Exclusive),
            Err(Error::Conflict)
        ));
        b.release_all(|_| &w);
        a.lock(8, &w, Mode::Exclusive).unwrap(); // upgrade: the only reader
        assert!(matches!(b.lock(8, &w, Mode::Shared), Err(Error::Conflict)));
        assert!(b.held_by_another(8, &w) && !a.held_by_another(8, &w));
        a.release_all(|_| &w);
        assert_eq!(w.load(Acquire), 0);
        // A lock word left by an earlier run (another tag) is free.
        w.store((7 << 48) | EXCLUSIVE | 5, Release);
        b.lock(8, &w, Mode::Exclusive).unwrap();
        assert_eq!(b.mode(8), Some(Mode::Exclusive));
        b.release_all(|_| &w);
        assert_eq!(b.mode(8), None);
    }

    /// After one large transaction the table shrinks back at the next small one (its
    /// drain would otherwise cost the large capacity on every commit), and every lock
    /// is still released.
    #[test]
    fn the_table_shrinks_after_a_large_transaction() {
        let words: Vec<AtomicU64> = (0..1000).map(|_| AtomicU64::new(0)).collect();
        let a = HeldLocks::new(1 << 48, 1);
        for k in 0..1000u64 {
            a.lock(k, &words[k as usize], Mode::Shared).unwrap();
        }
        a.release_all(|k| &words[k as usize]);
        let large = a.held.borrow().capacity();
        assert!(large >= 1000);
        a.lock(3, &words[3], Mode::Exclusive).unwrap();
        a.release_all(|k| &words[k as usize]);
        assert!(a.held.borrow().capacity() <= 2 * SMALL_TABLE, "{large}");
        assert!(words.iter().all(|w| w.load(Acquire) == 0));
    }
}
