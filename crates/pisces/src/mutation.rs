//! Mutation points: each names one protocol step that a test can remove, so that the
//! test guarding the step is shown to fail without it; and hook points: places where a
//! test can pause a thread or slow it down, to act inside a window of the protocol.
//!
//! A point is declared with `point!` in the module that owns the step (an engine's
//! folder, `engine/kit/...` for a step of a shared part, `heap` for the heap's), and
//! the step checks it with `active!`. Each engine lists the points of its protocol in
//! `EngineDef::MUTATIONS` (kit points it runs through included); the registry makes
//! that list `EngineId::mutations()` (with the heap's points for engines on the common
//! pool format) and looks a point up by name with `EngineId::mutation`. No list here
//! names the engines' steps: adding an engine or a point edits no shared file. Hook
//! points are declared with `hook_point!`, reached with `hook!`, and listed in
//! `EngineDef::HOOKS` (`EngineId::hook` finds one by name).
//!
//! Everything but the macros is compiled only with the `mutation` cargo feature,
//! which is for tests: without it, `active!` expands to `false` and names no point,
//! `hook!` to nothing, and `point!`/`hook_point!` declare nothing, so a release build
//! holds no trace of them. With it, points are switched on only inside a `Scenario`
//! (one at a time in the process), which switches every point off when it ends, panic
//! included, and which waits for the heaps opened outside it to close: a test that is
//! not in the scenario never runs a pool while a point is on.

/// Declares mutation points: `point! { /// what removing the step does
/// pub(crate) static NAME = "name"; ... }`. Each doc comment is also its point's
/// `MutationPoint::doc`. Without the `mutation` feature it declares nothing.
macro_rules! point {
    ($($(#[doc = $doc:literal])+ $vis:vis static $id:ident = $name:literal;)+) => {
        $(
            $(#[doc = $doc])+
            #[cfg(feature = "mutation")]
            $vis static $id: $crate::mutation::MutationPoint = $crate::mutation::MutationPoint {
                name: $name,
                doc: concat!($($doc, "\n"),+),
            };
        )+
    };
}
pub(crate) use point;

/// True if the mutation point (a path to a `point!` static), or one of several, is
/// active; `false` without the `mutation` feature, where the points do not exist.
macro_rules! active {
    ($($point:path),+ $(,)?) => {{
        #[cfg(feature = "mutation")]
        {
            $crate::mutation::any_active(&[$(&$point),+])
        }
        #[cfg(not(feature = "mutation"))]
        {
            false
        }
    }};
}
pub(crate) use active;

/// Declares hook points: `hook_point! { /// what a test can do there
/// pub(crate) static NAME = "name"; ... }`. Without the `mutation` feature it declares
/// nothing.
macro_rules! hook_point {
    ($($(#[doc = $doc:literal])+ $vis:vis static $id:ident = $name:literal;)+) => {
        $(
            $(#[doc = $doc])+
            #[cfg(feature = "mutation")]
            $vis static $id: $crate::mutation::HookPoint = $crate::mutation::HookPoint {
                name: $name,
                doc: concat!($($doc, "\n"),+),
            };
        )+
    };
}
pub(crate) use hook_point;

/// Reaches the hook point (a path to a `hook_point!` static) on behalf of `slot`: runs
/// the scenario's action for the point and the slot, if any (see `Scenario::pause`,
/// `Scenario::sleep`). Nothing without the `mutation` feature (`slot` is not even
/// evaluated).
macro_rules! hook {
    ($point:path, $slot:expr) => {{
        #[cfg(feature = "mutation")]
        {
            $crate::mutation::reach(&$point, $slot)
        }
    }};
}
pub(crate) use hook;

#[cfg(feature = "mutation")]
pub use points::*;

#[cfg(feature = "mutation")]
mod points {
    use std::cell::Cell;
    use std::marker::PhantomData;
    use std::sync::atomic::{AtomicBool, AtomicPtr, Ordering};
    use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
    use std::thread::ThreadId;
    use std::time::Duration;

    /// One protocol step that a test can remove. Identified by its address: declare
    /// each as a `static` (with `point!`), never as a `const`, which would make copies.
    #[derive(Debug)]
    pub struct MutationPoint {
        /// Its name on the command line (`pisces crashtest --mutation NAME`), unique
        /// among the points of one engine.
        pub name: &'static str,
        /// What removing the step does (the declaration's doc comment).
        pub doc: &'static str,
    }

    impl PartialEq for MutationPoint {
        fn eq(&self, other: &MutationPoint) -> bool {
            std::ptr::eq(self, other)
        }
    }
    impl Eq for MutationPoint {}

    /// A place in the protocol where a test can pause a thread or slow it down (see
    /// [`Scenario::pause`], [`Scenario::sleep`]); it removes no step. Identified by its
    /// address, like [`MutationPoint`].
    #[derive(Debug)]
    pub struct HookPoint {
        /// Its name (`EngineId::hook`), unique among the hook points of one engine.
        pub name: &'static str,
        /// Where it is and what a test does there (the declaration's doc comment).
        pub doc: &'static str,
    }

    /// The active point, null for none. Relaxed everywhere: the switch is set while no
    /// pool is in use (see [`Scenario::set`]) and orders nothing; a step reads it as a
    /// flag.
    static ACTIVE: AtomicPtr<MutationPoint> = AtomicPtr::new(std::ptr::null_mut());

    /// True if one of `points` is the active one (what `active!` expands to): one
    /// load of the switch, compared with each.
    #[inline(always)]
    pub fn any_active(points: &[&'static MutationPoint]) -> bool {
        let active = ACTIVE.load(Ordering::Relaxed);
        points.iter().any(|&p| std::ptr::eq(active, p))
    }

    fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
        // No code panics while holding these locks with their state half changed; a
        // poisoned lock (a panic elsewhere in the holder) still holds a consistent state.
        m.lock().unwrap_or_else(PoisonError::into_inner)
    }

    // ---------------------------------------------------------------------------
    // The gate between scenarios and the heaps opened outside them.

    /// Who may run: at most one scenario, and the heaps open outside it.
    struct Gate {
        /// The running scenario's id, 0 for none.
        scenario: u64,
        /// The id the next scenario takes.
        next_id: u64,
        /// Guards taken outside any scenario and held, per thread that took them.
        outside: Vec<(ThreadId, usize)>,
        /// Guards taken inside the running scenario and held.
        inside: usize,
        /// Guards taken inside a scenario that has ended, still held (a pool that
        /// outlived its scenario, or one that a background thread drops late).
        lingering: usize,
    }

    impl Gate {
        /// Whether a scenario may start: none running, no guard held outside one.
        fn free(&self) -> bool {
            self.scenario == 0 && self.outside.is_empty() && self.lingering == 0
        }
    }

    fn add_one(counts: &mut Vec<(ThreadId, usize)>, thread: ThreadId) {
        match counts.iter_mut().find(|(t, _)| *t == thread) {
            Some((_, c)) => *c += 1,
            None => counts.push((thread, 1)),
        }
    }

    fn remove_one(counts: &mut Vec<(ThreadId, usize)>, thread: ThreadId) {
        let i = counts
            .iter()
            .position(|(t, _)| *t == thread)
            .expect("a guard is counted under the thread that took it");
        counts[i].1 -= 1;
        if counts[i].1 == 0 {
            counts.swap_remove(i);
        }
    }

    static GATE: Mutex<Gate> = Mutex::new(Gate {
        scenario: 0,
        next_id: 1,
        outside: Vec::new(),
        inside: 0,
        lingering: 0,
    });
    /// Signalled when a scenario ends or a guard outside it is dropped.
    static GATE_CHANGED: Condvar = Condvar::new();

    thread_local! {
        /// The scenario this thread runs in (its own, or one it entered with
        /// [`ScenarioRef::enter`]), 0 for none. A stale id (the scenario ended) counts
        /// as none: the gate compares it with the running one.
        static MEMBER_OF: Cell<u64> = const { Cell::new(0) };
    }

    /// Keeps scenarios out while alive: every heap holds one for its lifetime, taken
    /// when it is formatted or opened, and a test that runs protocol code without a
    /// heap (a loom model) takes one itself. Taken on a thread in the running scenario
    /// it lets the scenario run (its pools are the scenario's); taken elsewhere it
    /// waits for the running scenario to end, and the next scenario waits for it to be
    /// dropped. Guards never wait for a scenario that is only waiting, so a thread may
    /// open a second pool while holding one.
    #[derive(Debug)]
    pub struct Unmutated {
        thread: ThreadId,
        /// The scenario it was taken in, 0 for none.
        inside: u64,
        /// Set once the guard has let scenarios in ([`Unmutated::release`]).
        released: AtomicBool,
    }

    impl Unmutated {
        /// Take a guard (see the type), waiting for a scenario of another test to end.
        pub fn hold() -> Unmutated {
            let thread = std::thread::current().id();
            let member = MEMBER_OF.with(Cell::get);
            let mut g = lock(&GATE);
            if member != 0 && g.scenario == member {
                g.inside += 1;
                return Unmutated {
                    thread,
                    inside: member,
                    released: AtomicBool::new(false),
                };
            }
            while g.scenario != 0 {
                g = GATE_CHANGED.wait(g).unwrap_or_else(PoisonError::into_inner);
            }
            add_one(&mut g.outside, thread);
            Unmutated {
                thread,
                inside: 0,
                released: AtomicBool::new(false),
            }
        }

        /// Let scenarios in before the guard is dropped: for a pool that a test leaks
        /// on purpose (a simulated crash, `Pool::forget_as_crash`), which is never
        /// dropped. Later calls, and the drop, do nothing.
        pub fn release(&self) {
            // Relaxed: the gate's mutex orders the count's update; the swap only makes
            // the release happen once.
            if self.released.swap(true, Ordering::Relaxed) {
                return;
            }
            let mut g = lock(&GATE);
            if self.inside == 0 {
                remove_one(&mut g.outside, self.thread);
            } else if g.scenario == self.inside {
                g.inside -= 1;
                return;
            } else {
                g.lingering -= 1;
            }
            if g.free() {
                GATE_CHANGED.notify_all();
            }
        }
    }

    impl Drop for Unmutated {
        fn drop(&mut self) {
            self.release();
        }
    }

    // ---------------------------------------------------------------------------
    // Scenarios.

    /// A test's exclusive use of the mutation points. While it lives no heap opened
    /// outside it is open (it waits for them at [`Scenario::setup`], and heaps opened
    /// elsewhere wait for it to end); the test switches points on with its methods.
    /// Dropping it, on a panic too, switches every point off (and releases every
    /// pause); a heap opened inside it and still open then counts as opened outside
    /// (the next scenario waits for it).
    ///
    /// Pools are opened on the scenario's thread, or on threads that
    /// [`ScenarioRef::enter`] it (a pool opened on another thread waits for the scenario
    /// to end). Take the scenario before opening any pool on its thread: setup panics
    /// if the thread holds a heap opened outside a scenario, which it would wait for
    /// forever. A heap of an ended scenario still open (dropped late by a background
    /// thread, say) keeps the next scenario waiting, without a panic.
    #[derive(Debug)]
    pub struct Scenario {
        id: u64,
        /// Not `Send`: it ends on the thread it marked as its own.
        _thread_bound: PhantomData<*const ()>,
    }

    impl Scenario {
        /// Start a scenario with every point off: waits for the running scenario (of
        /// another test) to end and for every heap opened outside a scenario to close.
        ///
        /// # Panics
        /// If this thread is in a scenario already, or holds a heap (an [`Unmutated`])
        /// taken outside a scenario.
        pub fn setup() -> Scenario {
            let thread = std::thread::current().id();
            let member = MEMBER_OF.with(Cell::get);
            let mut g = lock(&GATE);
            if member != 0 && g.scenario == member {
                drop(g);
                panic!("mutation::Scenario::setup: this thread is in a scenario already");
            }
            if let Some(&(_, n)) = g.outside.iter().find(|(t, _)| *t == thread) {
                drop(g);
                panic!(
                    "mutation::Scenario::setup: this thread holds {n} heap(s) (pools) opened \
                     outside a scenario; the scenario would wait for them to close forever. \
                     Set the scenario up before opening the pool."
                );
            }
            while !g.free() {
                g = GATE_CHANGED.wait(g).unwrap_or_else(PoisonError::into_inner);
            }
            let id = g.next_id;
            g.next_id += 1;
            g.scenario = id;
            drop(g);
            MEMBER_OF.with(|m| m.set(id));
            Scenario {
                id,
                _thread_bound: PhantomData,
            }
        }

        /// Activate mutation point `point`, or none (`None`): at most one point is
        /// active at a time. The points of an engine are `EngineId::mutations()`;
        /// `EngineId::mutation` finds one by name.
        ///
        /// # Safety
        /// A mutation removes a step of an engine's protocol on purpose, so that a test
        /// can show the step matters. Without it the engine may let a reader use memory
        /// that is being freed or overwritten, or two threads write the same memory
        /// without order: undefined behaviour in the running program, not only a wrong
        /// result. Activate a mutation only in mutation tests, whose outcome is read as
        /// evidence about the protocol, never in a program whose data matters. Switch
        /// it while none of the scenario's pools is in use: the switch is process-wide
        /// and takes effect in the middle of a protocol step.
        pub unsafe fn set(&self, point: Option<&'static MutationPoint>) {
            let p = point.map_or(std::ptr::null_mut(), |p| {
                (p as *const MutationPoint).cast_mut()
            });
            ACTIVE.store(p, Ordering::Relaxed);
        }

        /// Switch every point off: no mutation, no hook action (a paused thread goes
        /// on).
        pub fn clear(&self) {
            all_off();
        }

        /// From now on, every time `slot` reaches `point`, it sleeps for `d` first.
        pub fn sleep(&self, point: &'static HookPoint, slot: usize, d: Duration) {
            arm(point, slot, Action::Sleep(d));
        }

        /// The next time `slot` reaches `point`, it waits there until the returned
        /// [`Pause`] is released or dropped (or the scenario ends).
        pub fn pause(&self, point: &'static HookPoint, slot: usize) -> Pause {
            let state = Arc::new(PauseState::default());
            arm(point, slot, Action::Pause(state.clone()));
            Pause { state }
        }

        /// A handle other threads use to run in this scenario ([`ScenarioRef::enter`]).
        pub fn share(&self) -> ScenarioRef {
            ScenarioRef { id: self.id }
        }
    }

    impl Drop for Scenario {
        fn drop(&mut self) {
            all_off();
            let mut g = lock(&GATE);
            debug_assert_eq!(g.scenario, self.id);
            // The scenario's heaps still open now keep the next scenario out.
            g.lingering += std::mem::take(&mut g.inside);
            g.scenario = 0;
            GATE_CHANGED.notify_all();
            drop(g);
            MEMBER_OF.with(|m| m.set(0));
        }
    }

    /// The scenario this thread runs in, if any: what a function that spawns threads
    /// which open pools passes to them ([`ScenarioRef::enter`]).
    pub fn current_scenario() -> Option<ScenarioRef> {
        let member = MEMBER_OF.with(Cell::get);
        (member != 0 && lock(&GATE).scenario == member).then_some(ScenarioRef { id: member })
    }

    /// A scenario, for other threads to run in ([`Scenario::share`],
    /// [`current_scenario`]).
    #[derive(Clone, Copy, Debug)]
    pub struct ScenarioRef {
        id: u64,
    }

    impl ScenarioRef {
        /// Run this thread in the scenario while the returned guard lives: the pools
        /// it opens are the scenario's.
        ///
        /// # Panics
        /// If the scenario has ended.
        pub fn enter(self) -> Member {
            assert!(
                lock(&GATE).scenario == self.id,
                "mutation::ScenarioRef::enter: the scenario has ended"
            );
            let previous = MEMBER_OF.with(|m| m.replace(self.id));
            Member {
                previous,
                _thread_bound: PhantomData,
            }
        }
    }

    /// A thread's membership of a scenario ([`ScenarioRef::enter`]).
    #[derive(Debug)]
    pub struct Member {
        previous: u64,
        /// Not `Send`: it marks the thread that entered.
        _thread_bound: PhantomData<*const ()>,
    }

    impl Drop for Member {
        fn drop(&mut self) {
            MEMBER_OF.with(|m| m.set(self.previous));
        }
    }

    // ---------------------------------------------------------------------------
    // Hook actions.

    enum Action {
        Sleep(Duration),
        Pause(Arc<PauseState>),
    }

    struct Hook {
        point: &'static HookPoint,
        slot: usize,
        action: Action,
    }

    /// The armed hooks.
    static HOOKS: Mutex<Vec<Hook>> = Mutex::new(Vec::new());
    /// Whether any hook is armed: lets `hook!` skip the lock. Relaxed: a test arms
    /// its hooks before it starts the threads that reach them (the spawn or the
    /// transaction's start orders that), and a reader that sees `true` reads the
    /// table under its lock.
    static ARMED: AtomicBool = AtomicBool::new(false);

    fn arm(point: &'static HookPoint, slot: usize, action: Action) {
        let mut hooks = lock(&HOOKS);
        hooks.retain(|h| !(std::ptr::eq(h.point, point) && h.slot == slot));
        hooks.push(Hook {
            point,
            slot,
            action,
        });
        ARMED.store(true, Ordering::Relaxed);
    }

    fn all_off() {
        ACTIVE.store(std::ptr::null_mut(), Ordering::Relaxed);
        let mut hooks = lock(&HOOKS);
        ARMED.store(false, Ordering::Relaxed);
        for h in hooks.drain(..) {
            if let Action::Pause(p) = h.action {
                p.release();
            }
        }
    }

    /// Whether any hook action is armed (the tests of the scenario's end).
    #[cfg(test)]
    pub(super) fn any_hook_armed() -> bool {
        !lock(&HOOKS).is_empty()
    }

    /// What `hook!` expands to: `slot` reached `point`; run the armed action, if any.
    pub fn reach(point: &'static HookPoint, slot: usize) {
        if !ARMED.load(Ordering::Relaxed) {
            return;
        }
        let action = {
            let hooks = lock(&HOOKS);
            let Some(h) = hooks
                .iter()
                .find(|h| std::ptr::eq(h.point, point) && h.slot == slot)
            else {
                return;
            };
            // A pause stays in the table after it is reached, so that the scenario's
            // end releases it.
            match &h.action {
                Action::Sleep(d) => Action::Sleep(*d),
                Action::Pause(p) => Action::Pause(p.clone()),
            }
        };
        match action {
            Action::Sleep(d) => std::thread::sleep(d),
            Action::Pause(p) => p.hold(),
        }
    }

    #[derive(Default)]
    struct PauseState {
        /// (reached, released).
        state: Mutex<(bool, bool)>,
        changed: Condvar,
    }

    impl PauseState {
        /// Hold the first thread that comes, until released; later ones go on.
        fn hold(&self) {
            let mut s = lock(&self.state);
            if s.0 {
                return;
            }
            s.0 = true;
            self.changed.notify_all();
            while !s.1 {
                s = self.changed.wait(s).unwrap_or_else(PoisonError::into_inner);
            }
        }

        fn release(&self) {
            lock(&self.state).1 = true;
            self.changed.notify_all();
        }
    }

    /// A pause armed with [`Scenario::pause`]: the thread that reaches its point waits
    /// until [`Pause::release`], the pause's drop, or the scenario's end.
    pub struct Pause {
        state: Arc<PauseState>,
    }

    impl Pause {
        /// Whether a thread has reached the point (it waits there until released).
        pub fn reached(&self) -> bool {
            lock(&self.state.state).0
        }

        /// Let the paused thread go on (and a thread that reaches the point later not
        /// wait).
        pub fn release(&self) {
            self.state.release();
        }
    }

    impl Drop for Pause {
        fn drop(&mut self) {
            self.release();
        }
    }

    impl std::fmt::Debug for Pause {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            let (reached, released) = *lock(&self.state.state);
            f.debug_struct("Pause")
                .field("reached", &reached)
                .field("released", &released)
                .finish()
        }
    }
}

/// The scenario's own guarantees: its points end with it (panic included), pools
/// outside it never run while a point is on, misuse panics instead of hanging.
#[cfg(all(test, feature = "mutation"))]
mod tests {
    use super::{Scenario, Unmutated};
    use crate::engine::kit::log::redo_log::tests::framing_heap;
    use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
    use std::time::Duration;

    point! {
        /// A step of no protocol, switched by these tests only.
        static STEP = "test-step";
    }
    hook_point! {
        /// A place in no protocol, reached by these tests only.
        static PLACE = "test-place";
    }

    fn step_active() -> bool {
        active!(STEP)
    }

    /// How long a test gives a thread to do what it must not (take a scenario, open a
    /// pool) before it checks that it has not.
    const GRACE: Duration = Duration::from_millis(200);

    #[test]
    fn a_panic_in_a_scenario_switches_its_points_off() {
        // On another thread: the panic unwinds through the scenario.
        let held = std::thread::spawn(|| {
            let sc = Scenario::setup();
            // SAFETY: STEP removes nothing (no code checks it but these tests).
            unsafe { sc.set(Some(&STEP)) };
            sc.sleep(&PLACE, 0, Duration::from_secs(3600));
            assert!(step_active());
            panic!("a test failing with its point on");
        })
        .join();
        assert!(held.is_err());
        // The next scenario finds nothing on (and is not kept out).
        let sc = Scenario::setup();
        assert!(!step_active(), "the panicking test's point leaked");
        assert!(!super::any_hook_armed(), "the panicking test's hook leaked");
        drop(sc);
        // On this thread, caught: the thread can take a scenario again afterwards.
        let caught = std::panic::catch_unwind(|| {
            let sc = Scenario::setup();
            // SAFETY: as above.
            unsafe { sc.set(Some(&STEP)) };
            panic!("a test failing with its point on");
        });
        assert!(caught.is_err());
        let _sc = Scenario::setup();
        assert!(!step_active(), "the caught test's point leaked");
    }

    #[test]
    fn a_pool_outside_a_scenario_never_runs_while_its_point_is_on() {
        // A pool opened first keeps the scenario out until it closes.
        let heap = framing_heap();
        let closed = AtomicBool::new(false);
        std::thread::scope(|s| {
            let scenario = s.spawn(|| {
                let sc = Scenario::setup();
                assert!(
                    closed.load(SeqCst),
                    "the scenario started beside an open pool"
                );
                // SAFETY: as above.
                unsafe { sc.set(Some(&STEP)) };
                std::thread::sleep(GRACE);
                assert!(step_active());
            });
            for _ in 0..20 {
                assert!(!step_active(), "a point went on under an open pool");
                std::thread::sleep(GRACE / 20);
            }
            closed.store(true, SeqCst);
            drop(heap);
            scenario.join().unwrap();
        });
        // A pool opened while a scenario runs waits for it to end.
        let sc = Scenario::setup();
        // SAFETY: as above.
        unsafe { sc.set(Some(&STEP)) };
        let ended = AtomicBool::new(false);
        std::thread::scope(|s| {
            let pool = s.spawn(|| {
                let heap = framing_heap();
                assert!(
                    ended.load(SeqCst),
                    "a pool opened inside another test's scenario"
                );
                assert!(!step_active(), "a pool runs with another test's point on");
                drop(heap);
            });
            std::thread::sleep(GRACE);
            ended.store(true, SeqCst);
            drop(sc);
            pool.join().unwrap();
        });
    }

    #[test]
    fn the_scenario_s_threads_open_pools_inside_it() {
        let sc = Scenario::setup();
        let shared = sc.share();
        // Entered: no wait (it would never end: the scenario waits for the join).
        std::thread::scope(|s| {
            s.spawn(move || {
                let _in = shared.enter();
                drop(framing_heap());
            });
        });
        // A pool of the scenario that outlives it keeps the next scenario out.
        let heap = framing_heap();
        drop(sc);
        let closed = AtomicBool::new(false);
        std::thread::scope(|s| {
            let next = s.spawn(|| {
                let _sc = Scenario::setup();
                assert!(
                    closed.load(SeqCst),
                    "a scenario started beside an open pool"
                );
            });
            std::thread::sleep(GRACE);
            closed.store(true, SeqCst);
            drop(heap);
            next.join().unwrap();
        });
    }

    #[test]
    fn a_pause_holds_its_slot_until_released_or_the_scenario_ends() {
        let sc = Scenario::setup();
        let pause = sc.pause(&PLACE, 1);
        let passed = AtomicBool::new(false);
        std::thread::scope(|s| {
            // Another slot is not held.
            s.spawn(|| hook!(PLACE, 0)).join().unwrap();
            let t = s.spawn(|| {
                hook!(PLACE, 1);
                passed.store(true, SeqCst);
            });
            while !pause.reached() {
                std::thread::yield_now();
            }
            std::thread::sleep(GRACE);
            assert!(!passed.load(SeqCst), "the paused slot went on");
            pause.release();
            t.join().unwrap();
        });
        // Armed again, and left held when the scenario ends: the end lets it go.
        let pause = sc.pause(&PLACE, 1);
        std::thread::scope(|s| {
            let t = s.spawn(|| hook!(PLACE, 1));
            while !pause.reached() {
                std::thread::yield_now();
            }
            drop(sc);
            t.join().unwrap();
        });
    }

    #[test]
    fn misuse_panics_instead_of_waiting_forever() {
        let opened_first = std::panic::catch_unwind(|| {
            let _heap = Unmutated::hold();
            Scenario::setup()
        })
        .expect_err("a scenario taken with a pool open on its thread");
        let text = opened_first.downcast_ref::<String>().expect("a message");
        assert!(text.contains("outside a scenario"), "{text}");
        let nested = std::panic::catch_unwind(|| {
            let _sc = Scenario::setup();
            Scenario::setup()
        })
        .expect_err("a scenario inside a scenario");
        let text = nested.downcast_ref::<&str>().expect("a message");
        assert!(text.contains("in a scenario already"), "{text}");
        let ended = {
            let sc = Scenario::setup();
            sc.share()
        };
        let stale =
            std::panic::catch_unwind(|| ended.enter()).expect_err("entering an ended scenario");
        let text = stale.downcast_ref::<&str>().expect("a message");
        assert!(text.contains("has ended"), "{text}");
    }
}
