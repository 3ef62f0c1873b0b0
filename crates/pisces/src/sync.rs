//! Atomics shim: `std` normally, `loom` under `cfg(loom)` so the model checker explores
//! the interleavings of the exact protocol code the engine runs.

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{fence, AtomicBool, AtomicU32, AtomicU64};
#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{fence, AtomicBool, AtomicU32, AtomicU64};

/// One step of a spin-wait: under loom, yield so the model can schedule the thread being
/// waited for; otherwise a pause, and after many rounds the OS scheduler (2 cores are
/// easily oversubscribed, and the awaited thread may be descheduled).
#[inline]
pub(crate) fn spin_step(round: &mut u32) {
    #[cfg(loom)]
    {
        let _ = round;
        loom::thread::yield_now();
    }
    #[cfg(not(loom))]
    {
        *round += 1;
        if *round < 64 {
            std::hint::spin_loop();
        } else {
            std::thread::yield_now();
        }
    }
}
