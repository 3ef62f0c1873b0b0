//! Mutation points: each names one protocol step that a test can remove, so that the
//! test guarding the step is shown to fail without it.
//!
//! A point is declared with `point!` in the module that owns the step (an engine's
//! folder, `engine/kit/...` for a step of a shared part, `heap` for the heap's), and
//! the step checks it with `active!`. Each engine lists the points of its protocol in
//! `EngineDef::MUTATIONS` (kit points it runs through included); the registry makes
//! that list `EngineId::mutations()` (with the heap's points for engines on the common
//! pool format) and looks a point up by name with `EngineId::mutation`. No list here
//! names the engines' steps: adding an engine or a point edits no shared file.
//!
//! Everything but the two macros is compiled only with the `mutation` cargo feature,
//! which is for tests: without it, `active!` expands to `false` and names no point,
//! and `point!` declares nothing, so a release build holds no trace of them. With
//! it, at most one point is active at a time, chosen at run time with [`set`].

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

#[cfg(feature = "mutation")]
pub use points::*;

#[cfg(feature = "mutation")]
mod points {
    use std::sync::atomic::{AtomicPtr, Ordering};

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

    /// The active point, null for none. Relaxed everywhere: the switch is set while no
    /// pool is in use (see [`set`]) and orders nothing; a step reads it as a flag.
    static ACTIVE: AtomicPtr<MutationPoint> = AtomicPtr::new(std::ptr::null_mut());

    /// True if one of `points` is the active one (what `active!` expands to): one
    /// load of the switch, compared with each.
    #[inline(always)]
    pub fn any_active(points: &[&'static MutationPoint]) -> bool {
        let active = ACTIVE.load(Ordering::Relaxed);
        points.iter().any(|&p| std::ptr::eq(active, p))
    }

    /// Activate mutation point `point`, or none (`None`, the same as [`clear`]). The
    /// points of an engine are `EngineId::mutations()`; `EngineId::mutation` finds one
    /// by name.
    ///
    /// # Safety
    /// A mutation removes a step of an engine's protocol on purpose, so that a test can
    /// show the step matters. Without it the engine may let a reader use memory that is
    /// being freed or overwritten, or two threads write the same memory without order:
    /// undefined behaviour in the running program, not only a wrong result. Activate a
    /// mutation only in mutation tests, whose outcome is read as evidence about the
    /// protocol, never in a program whose data matters. Switch it while no pool is in
    /// use: the switch is process-wide and takes effect in the middle of a protocol step.
    pub unsafe fn set(point: Option<&'static MutationPoint>) {
        let p = point.map_or(std::ptr::null_mut(), |p| {
            (p as *const MutationPoint).cast_mut()
        });
        ACTIVE.store(p, Ordering::Relaxed);
    }

    /// Deactivate any mutation: every protocol step runs again.
    pub fn clear() {
        // SAFETY: with no mutation active no protocol step is removed (see `set`).
        unsafe { set(None) }
    }
}
