//! Waits for state that belongs to a process that died: a pool shared by several
//! processes recovers what a dead process left while the others run, and stops where
//! it cannot.
//!
//! # Why
//! In a pool that one process has open, every wait (a lock word, a grace period's
//! clock, a committer's critical section, the fallback word, log space) is for a
//! thread of that process, which ends only with the process. In a shared pool the state
//! waited for may be another process's, and that process may have been killed holding
//! it: the wait would never end. So a wait that lasts names, where it can, the thread
//! slot it waits for, and after [`PEER_CHECK`] asks whether that slot's process is gone
//! ([`Peers::is_dead`], answered by the kernel's lock on the slot's liveness byte,
//! which a process's death releases).
//!
//! # Recovery, or a stop
//! A dead slot is reported ([`Peers::report_dead`]), and the wait goes on. A thread of
//! the reporting process takes the slot's liveness byte (so that one process recovers
//! it) and asks the engine to recover it while the others run ([`Recover`]): roll back
//! the attempt it was running, finish its clock, write back its committed
//! transactions, empty its log, and give the slot free. The wait then ends as it would
//! have had the peer finished. What the engine cannot recover (a state no thread
//! leaves, such as a damaged log), it refuses ([`Recovery::Impossible`]), and the
//! slot *stops* the pool ([`Peers::stop`]): the state the dead process left is what a
//! crash leaves (its transactions' records are durable before they are visible; one
//! that was not visible still holds its objects' locks, so no survivor wrote them),
//! and the next open after every process has closed recovers it as after a crash.
//!
//! # Getting out of a wait
//! A wait that finds the pool stopped does not return (a lock wait has no guard to
//! return); it unwinds with a [`PeerDied`] payload ([`give_up`], through
//! `resume_unwind`, which prints nothing). The engine's thread catches it at the
//! entry of the call that waited ([`catch`]), forgets what the call was doing (no
//! rollback: restoring the attempt's objects could undo a transaction that other
//! processes already read), and fails that call and every later one with
//! [`Error::PeerDied`]. A build with `panic = "abort"` aborts
//! the process instead, which the other processes then see as one more dead peer.
//!
//! # Finding the pool of a wait
//! The waits are deep in code that knows no pool (a lock word, a clock), but every
//! word a shared pool's threads wait on lives in its sidecar's mapping. A shared pool
//! registers that mapping's address range and its [`Peers`] ([`watch`]); a wait that
//! lasts looks its word's address up ([`peers_at`]). A pool that one process has open
//! registers nothing, and its waits only read the clock now and then.

use crate::error::StopCause;
use crate::sync::spin_step;
use crate::Error;
use std::any::Any;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

/// How long a wait lasts before it asks whether the slot it waits for is dead, and
/// how often it asks again: the bound on how late a survivor sees a peer's death.
pub(crate) const PEER_CHECK: Duration = Duration::from_millis(1);

/// Rounds of a spin-wait between two readings of the clock.
const CLOCK_EVERY: u32 = 256;

/// The processes that share one pool, as a waiter in this process sees them.
pub(crate) trait Peers: Send + Sync {
    /// The slot whose process's death stopped the pool, if it has stopped.
    fn stopped(&self) -> Option<u32>;
    /// Whether thread slot `slot` is owned by a process that ended without giving it
    /// up. A slot of this process, or one no process owns, is not dead.
    fn is_dead(&self, slot: u32) -> bool;
    /// The lowest dead slot, if any (for a wait that cannot name its slot).
    fn any_dead(&self) -> Option<u32>;
    /// What the dead process of the stop was doing ([`StopCause::Recovery`] if the
    /// pool has not stopped).
    fn stop_cause(&self) -> StopCause;
    /// Stop the pool: `slot`'s process died, doing `cause`. The first stop's slot and
    /// cause are kept.
    fn stop(&self, slot: u32, cause: StopCause);
    /// `slot`'s process died (a waiter found it [dead](Peers::is_dead)): have it
    /// recovered (module docs, *Recovery, or a stop*). True while the waiter may wait
    /// on (its recovery is under way, here or in another process); false once the
    /// pool is stopped.
    fn report_dead(&self, slot: u32) -> bool;
    /// The engine that recovers this pool's dead slots.
    fn set_recover(&self, recover: Weak<dyn Recover>);
}

/// What an engine's recovery of a dead slot came to ([`Recover::recover`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Recovery {
    /// Nothing of the slot is left for anyone to wait on, and it may be claimed again.
    Done,
    /// What others wait on is released, but the slot's log cannot be emptied yet (the
    /// watermark is held by others' pending write-backs): try again later.
    Later,
    /// The slot's state cannot be recovered while others run: stop the pool.
    Impossible(StopCause),
}

/// An engine that recovers a dead slot of a shared pool while the others run.
pub(crate) trait Recover: Send + Sync {
    /// Recover slot `slot`, whose process died. The caller holds the slot's liveness
    /// byte (so it is the one recoverer) and runs in no transaction. A wait inside may
    /// give up ([`give_up`]); the caller catches it.
    fn recover(&self, slot: u32) -> Recovery;
}

/// The error of a call that found the pool stopped by the death of `slot`'s process.
pub(crate) fn died(peers: Option<&dyn Peers>, slot: u32) -> Error {
    Error::PeerDied {
        slot,
        cause: peers.map_or(StopCause::Recovery, |p| p.stop_cause()),
    }
}

/// The unwind payload of a wait that gave up ([`give_up`]): the dead slot.
pub(crate) struct PeerDied(pub(crate) u32);

/// Address ranges of the shared pools' mappings open in this process, and their peers.
type Watched = Vec<(usize, usize, Weak<dyn Peers>)>;

static WATCHED: Mutex<Watched> = Mutex::new(Vec::new());

/// Register the mapping `start .. start + len` of a shared pool's state, whose peers
/// are `peers`. The entry goes when `peers` is dropped (the mapping is unmapped only
/// after: `peers` holds it).
pub(crate) fn watch(start: usize, len: usize, peers: Weak<dyn Peers>) {
    let mut w = WATCHED.lock().unwrap_or_else(|e| e.into_inner());
    w.retain(|(_, _, p)| p.strong_count() > 0);
    w.push((start, len, peers));
}

/// The peers of the shared pool whose mapping holds `addr`, if any.
pub(crate) fn peers_at(addr: usize) -> Option<Arc<dyn Peers>> {
    let w = WATCHED.lock().unwrap_or_else(|e| e.into_inner());
    w.iter()
        .filter(|(start, len, _)| addr.wrapping_sub(*start) < *len)
        .find_map(|(_, _, p)| p.upgrade())
}

/// Leave the wait: the pool is stopped by the death of `slot`'s process.
#[cold]
#[inline(never)]
pub(crate) fn give_up(slot: u32) -> ! {
    std::panic::resume_unwind(Box::new(PeerDied(slot)))
}

/// A wait that has lasted [`PEER_CHECK`] on the word at `word`, held by thread slot
/// `holder` (`None`: the wait cannot tell which slot): give up if the pool of the word
/// is stopped; if the holder's process is dead, report it ([`Peers::report_dead`]) and
/// give up only if that stopped the pool. Returns otherwise, or if the word is not in
/// a shared pool's mapping.
#[cold]
#[inline(never)]
pub(crate) fn check(word: *const u8, holder: Option<u32>) {
    if let Some(peers) = peers_at(word as usize) {
        check_peers(&*peers, holder);
    }
}

/// [`check`] of a pool whose peers the caller knows.
#[cold]
#[inline(never)]
pub(crate) fn check_peers(peers: &dyn Peers, holder: Option<u32>) {
    if let Some(s) = peers.stopped() {
        give_up(s);
    }
    let dead = match holder {
        Some(h) => Some(h).filter(|&h| peers.is_dead(h)),
        None => peers.any_dead(),
    };
    if let Some(s) = dead {
        if !peers.report_dead(s) {
            give_up(peers.stopped().unwrap_or(s));
        }
    }
}

/// Run `f`, turning a wait's [`give_up`] inside it into `Err(slot)`; any other
/// unwind goes on.
pub(crate) fn catch<R>(f: impl FnOnce() -> R) -> std::result::Result<R, u32> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).map_err(peer_died)
}

/// The dead slot of an unwind's payload, or the unwind resumed.
fn peer_died(payload: Box<dyn Any + Send>) -> u32 {
    match payload.downcast::<PeerDied>() {
        Ok(p) => p.0,
        Err(other) => std::panic::resume_unwind(other),
    }
}

/// A spin-wait's state: [`spin_step`]'s rounds, and how long the wait has lasted, read
/// from the clock every [`CLOCK_EVERY`] rounds, for its [`check`] every
/// [`PEER_CHECK`].
pub(crate) struct Patience {
    round: u32,
    since: Option<Instant>,
}

impl Patience {
    pub(crate) const fn new() -> Patience {
        Patience {
            round: 0,
            since: None,
        }
    }

    /// One step of a wait for the word at `word`, held by `holder` (see [`check`]).
    #[inline]
    pub(crate) fn step(&mut self, word: *const u8, holder: Option<u32>) {
        spin_step(&mut self.round);
        #[cfg(not(loom))]
        if self.round.is_multiple_of(CLOCK_EVERY) {
            self.lasted(word, holder);
        }
        #[cfg(loom)]
        let _ = (word, holder);
    }

    /// Every [`CLOCK_EVERY`] rounds: [`check`] once the wait has lasted
    /// [`PEER_CHECK`] since it began or since the last check.
    #[cold]
    #[inline(never)]
    fn lasted(&mut self, word: *const u8, holder: Option<u32>) {
        let now = Instant::now();
        match self.since {
            None => self.since = Some(now),
            Some(t) if now.duration_since(t) >= PEER_CHECK => {
                self.since = Some(now);
                check(word, holder);
            }
            Some(_) => {}
        }
    }
}

/// Peers for tests: one slot dead, registered over a range of addresses.
#[cfg(all(test, not(loom)))]
pub(crate) struct OneDead {
    dead: u32,
    stopped: std::sync::atomic::AtomicU32,
}

#[cfg(all(test, not(loom)))]
impl OneDead {
    /// Peers whose slot `dead` is dead, watching `start .. start + len`; the entry
    /// lasts as long as the returned handle.
    pub(crate) fn watching(dead: u32, start: usize, len: usize) -> Arc<dyn Peers> {
        let peers: Arc<dyn Peers> = Arc::new(OneDead {
            dead,
            stopped: std::sync::atomic::AtomicU32::new(0),
        });
        watch(start, len, Arc::downgrade(&peers));
        peers
    }
}

#[cfg(all(test, not(loom)))]
impl Peers for OneDead {
    fn stopped(&self) -> Option<u32> {
        self.stopped
            .load(std::sync::atomic::Ordering::Relaxed)
            .checked_sub(1)
    }
    fn is_dead(&self, slot: u32) -> bool {
        slot == self.dead
    }
    fn any_dead(&self) -> Option<u32> {
        Some(self.dead)
    }
    fn stop_cause(&self) -> StopCause {
        StopCause::Recovery
    }
    fn stop(&self, slot: u32, _: StopCause) {
        use std::sync::atomic::Ordering::Relaxed;
        let _ = self.stopped.compare_exchange(0, slot + 1, Relaxed, Relaxed);
    }
    /// No engine recovers here: a dead slot stops the pool.
    fn report_dead(&self, slot: u32) -> bool {
        self.stop(slot, StopCause::Recovery);
        false
    }
    fn set_recover(&self, _: Weak<dyn Recover>) {}
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// A wait on a word of a watched mapping held by a live slot goes on; held by the
    /// dead one, it gives up within a few checks and stops the pool; after that, a
    /// wait for a live slot gives up too. A word outside every watched mapping never
    /// gives up.
    #[test]
    fn a_wait_for_a_dead_slot_gives_up_and_stops_the_pool() {
        let words = [0u64; 4];
        let start = words.as_ptr() as usize;
        let peers = OneDead::watching(3, start, std::mem::size_of_val(&words));
        let word = words[1..].as_ptr() as *const u8;
        let spin_for = |holder, d: Duration| {
            catch(|| {
                let until = Instant::now() + d;
                let mut p = Patience::new();
                while Instant::now() < until {
                    p.step(word, holder);
                }
            })
        };
        assert_eq!(spin_for(Some(1), Duration::from_millis(5)), Ok(()));
        assert_eq!(peers.stopped(), None);
        assert_eq!(spin_for(Some(3), Duration::from_secs(5)), Err(3));
        assert_eq!(peers.stopped(), Some(3));
        assert_eq!(spin_for(Some(1), Duration::from_secs(5)), Err(3));
        let elsewhere = [0u64; 1];
        let mut p = Patience::new();
        let until = Instant::now() + Duration::from_millis(5);
        while Instant::now() < until {
            p.step(elsewhere.as_ptr() as *const u8, Some(3));
        }
        drop(peers);
        assert!(peers_at(start).is_none(), "the entry goes with its peers");
    }

    /// Another unwind passes through `catch` unchanged.
    #[test]
    fn other_panics_pass_through() {
        let r = std::panic::catch_unwind(|| catch(|| std::panic::resume_unwind(Box::new(7u8))));
        assert_eq!(*r.unwrap_err().downcast::<u8>().unwrap(), 7);
    }
}
