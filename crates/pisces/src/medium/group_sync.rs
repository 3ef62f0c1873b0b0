//! Group commit of `msync` across threads: the file medium's commit fence
//! ([`Medium::commit_fence`](super::Medium::commit_fence)).
//!
//! On the file medium a fence is an `msync` of the pages its thread flushed, and an
//! `msync` costs about the same for one page as for a few (the device's cache flush
//! dominates), so commit fences of concurrent threads share one call: a fence queues
//! its ranges, and one thread at a time (the leader) takes every queued range, syncs them
//! in as few calls as the ranges allow, and releases every fence it covered.
//!
//! # Guarantee
//! A fence returns only after an `msync` that *started after its ranges were queued*
//! has returned, over ranges containing them: either its own (it led the round) or a
//! leader's that took its ranges from the queue. Queuing and taking happen under the
//! state's mutex, so every store the fencing thread made before queuing is visible in
//! the shared pages when the leader's `msync` reads them. The round number `done` is
//! raised only after the `msync` calls return, and a fence waits until `done` reaches
//! its own ticket.
//!
//! # Waiting for a companion
//! Plain leader/follower batching merges nothing at two threads: while one thread
//! syncs, the other queues and then leads the next round alone, and the two alternate
//! one commit per `msync`. So a new leader first waits for the threads that fenced
//! recently (within a few `msync` durations) and are not queued yet, at most one
//! `msync` duration ([`MAX_WAIT`] at most): each round then carries every active
//! thread's commit. A thread fencing alone never waits (no other thread fenced
//! recently), so single-threaded commits pay only the mutex.
//!
//! Only commit fences are grouped. A fence that orders a thread's own writes (an undo
//! entry before its in-place write, a watermark before log reuse) would pay the wait
//! several times per commit, and queueing every fence behind one sync at a time loses
//! the file system's own batching of concurrent syncs (its journal commits them
//! together); such fences `msync` at once, as before. An engine calls the commit fence
//! where what it syncs lies together (the `pisces` engine's log records, its home writes
//! being synced lazily): a round bridges the gaps between its threads' ranges, and
//! bridged dirty pages are written in the commit's time. The `mvcc` and `sp3` engines'
//! durability fences, grouped, measured slower than plain ones even on one thread, so
//! they stay plain.

use super::PAGE;
use std::sync::atomic::Ordering::{AcqRel, Acquire, Release};
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::thread::ThreadId;
use std::time::{Duration, Instant};

/// Page-aligned byte ranges `(start, end)`.
pub type PageRanges = Vec<(usize, usize)>;

/// The longest a leader waits for companions: bounds the latency a thread that
/// stopped fencing (or fences rarely) can add to another's commit.
pub(crate) const MAX_WAIT: Duration = Duration::from_micros(500);

/// A thread counts as fencing recently if its last fence is at most this many `msync`
/// durations old (and at least [`RECENT_MIN`]).
const RECENT_SYNCS: u32 = 4;
const RECENT_MIN: Duration = Duration::from_micros(200);

/// The ranges of one round closer than this are synced by one call: every call may end
/// in a device cache flush, while `msync` finds the dirty pages of a range through the
/// page cache's dirty tags, so the clean pages it bridges cost little. A commit fence
/// syncs log records, and the threads' logs lie side by side: the gap bridges the logs
/// of many threads (of several MiB each). Bridged dirty pages are written back early:
/// more durable than required, never less.
pub(crate) const ROUND_GAP: usize = 64 << 20;

/// Cross-thread group commit of `msync`: the file medium's commit fence, which the
/// crash simulator's page-cache model runs too. A fence queues its thread's page ranges, and
/// one thread at a time syncs every queued range; a fence returns only after a sync
/// that started after its ranges were queued has returned over them. A thread that
/// starts a round first waits, at most one sync's length, for the threads that fenced
/// recently, so that concurrent committers share one sync.
#[derive(Debug, Default)]
pub struct GroupSync {
    state: Mutex<State>,
    /// The last ticket handed out (one per fence with ranges); stored under `state`.
    issued: AtomicU64,
    /// Every ticket up to `done` is durable: its round's `msync` calls returned.
    done: AtomicU64,
    /// A thread leads a round (waits for companions or syncs).
    leading: AtomicBool,
    /// Signalled, under `state`, when a round ends: for the fences waiting for one.
    round_ended: Condvar,
}

#[derive(Debug, Default)]
struct State {
    /// Ranges of the fences queued for the next round.
    queued: PageRanges,
    /// The threads with a fence in `queued`.
    queued_by: Vec<ThreadId>,
    /// When each thread that fenced last queued a fence.
    recent: Vec<(ThreadId, Instant)>,
    /// How long the last round's `msync` calls took.
    last_sync: Duration,
    /// Rounds synced, and rounds whose leader waited for a companion (statistics).
    rounds: u64,
    waited: u64,
}

impl State {
    /// How long ago a fence counts as recent.
    fn recent_window(&self) -> Duration {
        (self.last_sync * RECENT_SYNCS).max(RECENT_MIN)
    }

    /// Record that `me` fenced at `now`; forget threads idle for long.
    fn note(&mut self, me: ThreadId, now: Instant) {
        let keep = self.recent_window() * 8;
        self.recent
            .retain(|&(t, at)| t != me && now.saturating_duration_since(at) <= keep);
        self.recent.push((me, now));
    }

    /// Threads other than `me` that fenced recently and have no fence queued.
    fn expected(&self, me: ThreadId, now: Instant) -> bool {
        let window = self.recent_window();
        self.recent.iter().any(|&(t, at)| {
            t != me && now.saturating_duration_since(at) <= window && !self.queued_by.contains(&t)
        })
    }
}

impl GroupSync {
    /// A group with nothing queued.
    pub fn new() -> GroupSync {
        GroupSync::default()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // Nothing in `State` is left half-updated by a panic (an `msync` closure runs
        // outside the lock).
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Make `ranges` (page-aligned, the calling thread's flushed pages) durable with
    /// `msync(start, len)`, sharing the call with concurrent fences (module docs).
    ///
    /// A fence that waits for a round to cover it sleeps at once, without polling:
    /// the round's leader sleeps in `msync` until the device's completion interrupt
    /// wakes it, and a poller keeping a processor busy for the whole sync makes that
    /// wake-up a remote one (to the leader's processor instead of the idle one that
    /// took the interrupt), which the leader then pays at every round. A leader does
    /// poll for its companions (below): they are running their transactions, and it
    /// has not begun its sync yet.
    pub fn fence(&self, ranges: PageRanges, mut msync: impl FnMut(usize, usize)) {
        if ranges.is_empty() {
            return;
        }
        let me = std::thread::current().id();
        let arrived = Instant::now();
        let ticket = {
            let mut st = self.lock();
            st.note(me, arrived);
            st.queued.extend(ranges);
            st.queued_by.push(me);
            // Release: a leader polling `issued` for companions then locks `state`,
            // which orders it after this queueing anyway; Relaxed would do, Release
            // states the pairing.
            self.issued.fetch_add(1, Release) + 1
        };
        // Wait until a round covers this ticket, or lead one.
        loop {
            // Acquire: pairs with the leader's Release store after its `msync` calls
            // returned, the point at which this fence's pages are durable.
            if self.done.load(Acquire) >= ticket {
                return;
            }
            // AcqRel: the previous leader's Release store of `false` follows its
            // `done` store, so a new leader sees `done` current.
            if self
                .leading
                .compare_exchange(false, true, AcqRel, Acquire)
                .is_ok()
            {
                if self.done.load(Acquire) >= ticket {
                    self.end_leading();
                    return;
                }
                break;
            }
            let st = self.lock();
            // Checked under the lock that `end_leading` notifies under: no lost wake-up.
            if self.done.load(Acquire) < ticket && self.leading.load(Acquire) {
                drop(self.round_ended.wait(st).unwrap_or_else(|p| p.into_inner()));
            }
        }
        // Lead this round. First wait for the threads that fence alongside us, for at
        // most one round's length from now.
        let deadline = Instant::now() + self.lock().last_sync.min(MAX_WAIT);
        let mut waited = false;
        loop {
            let seen = self.issued.load(Acquire);
            {
                let mut st = self.lock();
                let now = Instant::now();
                if now >= deadline || !st.expected(me, now) {
                    break;
                }
                if !waited {
                    waited = true;
                    st.waited += 1;
                }
            }
            while self.issued.load(Acquire) == seen && Instant::now() < deadline {
                std::thread::yield_now();
            }
        }
        let (mut round, upto) = {
            let mut st = self.lock();
            st.queued_by.clear();
            (std::mem::take(&mut st.queued), self.issued.load(Acquire))
        };
        // Whatever happens in `msync` (it may panic), the round ends and waiters go on.
        struct EndRound<'a> {
            group: &'a GroupSync,
            upto: u64,
            started: Instant,
        }
        impl Drop for EndRound<'_> {
            fn drop(&mut self) {
                {
                    let mut st = self.group.lock();
                    st.last_sync = self.started.elapsed();
                    st.rounds += 1;
                }
                // Release: see the Acquire loads in `fence`.
                self.group.done.fetch_max(self.upto, Release);
                self.group.end_leading();
            }
        }
        let end = EndRound {
            group: self,
            upto,
            started: Instant::now(),
        };
        coalesce(&mut round, ROUND_GAP);
        for (s, e) in round {
            msync(s, e - s);
        }
        drop(end);
    }

    /// Give up leading and wake the fences that sleep.
    fn end_leading(&self) {
        // Release: see the compare-exchange in `fence`.
        self.leading.store(false, Release);
        let _st = self.lock();
        self.round_ended.notify_all();
    }

    /// Rounds synced so far, and how many of them waited for a companion.
    #[cfg(test)]
    fn rounds(&self) -> (u64, u64) {
        let st = self.lock();
        (st.rounds, st.waited)
    }
}

/// Sort `ranges` and merge those that overlap or are at most `gap` bytes apart.
pub(crate) fn coalesce(ranges: &mut PageRanges, gap: usize) {
    ranges.sort_unstable();
    let mut out: PageRanges = Vec::with_capacity(ranges.len());
    for &r in ranges.iter() {
        match out.last_mut() {
            Some(last) if r.0 <= last.1.saturating_add(gap) => last.1 = last.1.max(r.1),
            _ => out.push(r),
        }
    }
    *ranges = out;
}

#[allow(dead_code)]
const _: () = assert!(ROUND_GAP.is_multiple_of(PAGE));

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
    use std::sync::Arc;

    /// A fence returns only after an msync that started after it queued covered its
    /// range; meanwhile concurrent fences share calls.
    #[test]
    fn a_fence_returns_after_a_sync_that_covers_it_and_threads_share_syncs() {
        let g = Arc::new(GroupSync::new());
        // Per page: the highest "written" generation, and the generation an msync has
        // made durable.
        const THREADS: usize = 4;
        const FENCES: u64 = 300;
        let written: Arc<Vec<AtomicU64>> =
            Arc::new((0..THREADS).map(|_| AtomicU64::new(0)).collect());
        let durable: Arc<Vec<AtomicU64>> =
            Arc::new((0..THREADS).map(|_| AtomicU64::new(0)).collect());
        let calls = Arc::new(AtomicU64::new(0));
        let in_sync = Arc::new(AtomicBool::new(false));
        let hs: Vec<_> = (0..THREADS)
            .map(|t| {
                let (g, written, durable, calls, in_sync) = (
                    g.clone(),
                    written.clone(),
                    durable.clone(),
                    calls.clone(),
                    in_sync.clone(),
                );
                std::thread::spawn(move || {
                    for gen in 1..=FENCES {
                        written[t].store(gen, SeqCst);
                        g.fence(vec![(t * PAGE, (t + 1) * PAGE)], |s, l| {
                            assert!(!in_sync.swap(true, SeqCst), "one leader at a time");
                            calls.fetch_add(1, SeqCst);
                            std::thread::sleep(Duration::from_micros(50));
                            // The sync captures every covered page's content now.
                            for p in s / PAGE..(s + l) / PAGE {
                                durable[p].fetch_max(written[p].load(SeqCst), SeqCst);
                            }
                            in_sync.store(false, SeqCst);
                        });
                        assert!(
                            durable[t].load(SeqCst) >= gen,
                            "thread {t}'s fence {gen} returned before its page was synced"
                        );
                    }
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
        let total = THREADS as u64 * FENCES;
        let (rounds, _) = g.rounds();
        assert!(
            rounds * 10 < total * 6,
            "{rounds} rounds for {total} fences of {THREADS} concurrent threads"
        );
        assert!(calls.load(SeqCst) >= rounds);
    }

    /// A thread alone never waits for a companion, and two threads merge their fences
    /// (the alternating pattern of plain leader/follower batching takes one round per
    /// fence).
    #[test]
    fn two_threads_share_rounds_and_one_thread_does_not_wait() {
        let g = GroupSync::new();
        for _ in 0..20 {
            g.fence(vec![(0, PAGE)], |_, _| {
                std::thread::sleep(Duration::from_micros(100))
            });
        }
        assert_eq!(g.rounds(), (20, 0), "a thread alone waited for a companion");

        // Without the companion wait the two threads alternate: 200 rounds every time.
        // With it most rounds carry both; a machine busy enough to delay a thread's
        // 200 us of work past the wait can spoil one attempt, so three are allowed.
        let mut seen = vec![];
        for _ in 0..3 {
            let g = GroupSync::new();
            std::thread::scope(|s| {
                for t in 0..2usize {
                    let g = &g;
                    s.spawn(move || {
                        for _ in 0..100 {
                            // A transaction's work, then its commit's fence.
                            std::thread::sleep(Duration::from_micros(200));
                            g.fence(vec![(t * PAGE, (t + 1) * PAGE)], |_, _| {
                                std::thread::sleep(Duration::from_millis(1))
                            });
                        }
                    });
                }
            });
            let (rounds, _) = g.rounds();
            if rounds < 150 {
                return;
            }
            seen.push(rounds);
        }
        panic!("{seen:?} rounds for 200 fences of 2 threads");
    }

    #[test]
    fn a_round_syncs_near_ranges_in_one_call_and_far_ones_apart() {
        let g = GroupSync::new();
        let mut got = vec![];
        g.fence(
            vec![
                (0, PAGE),
                (ROUND_GAP, ROUND_GAP + PAGE),
                (3 * ROUND_GAP, 3 * ROUND_GAP + PAGE),
            ],
            |s, l| got.push((s, l)),
        );
        assert_eq!(got, vec![(0, ROUND_GAP + PAGE), (3 * ROUND_GAP, PAGE)],);
        let mut none = 0;
        g.fence(vec![], |_, _| none += 1);
        assert_eq!(none, 0, "a fence with nothing flushed syncs nothing");
    }
}
