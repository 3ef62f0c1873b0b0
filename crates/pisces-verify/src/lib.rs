//! Verification tooling for the `pisces` library: how we know an engine is right.
//!
//! * [`sim`]: the crash simulator, a [`pisces::medium::Medium`] whose durable image
//!   receives a cache line only when it is flushed and fenced, and whose crash images
//!   let an adversary choose, per 8-byte word, among what may or may not have reached
//!   the medium;
//! * [`crashtest`]: crash-state exploration: workloads with oracles, run on the
//!   simulator, crashed at every fence (or at random ones), recovered and judged;
//! * [`sicheck`]: an Elle-style isolation checker for list-append histories.
//!
//! None of this is the library's user API: the `pisces` crate stays a small facade, and
//! this crate (used by the `pisces` tool's `crashtest` / `sicheck` commands and by the
//! test suites) builds on its public surface only.

#[cfg(test)]
mod cost;
pub mod crashtest;
pub mod sicheck;
pub mod sim;
pub mod testkit;

pub use sim::{Adversary, CrashImage, CrashInfo, CrashPoint, CrashStats, SimConfig, SimMedium};
