//! The engine's options (`key=value`, see [`crate::EngineOptions`]).
//!
//! * `marker=global|nvhtm` (default `global`): SPHT's single persistent global marker
//!   advanced by CAS with skipCAS (§3.1), or NV-HTM's sequential per-thread commit
//!   markers (the scheme of Fig. 1a) for comparison.
//! * `replay=backward|forward` (default `backward`): the replayer walks a batch through
//!   the backward links newest-first with a duplicate filter, or through the forward
//!   links oldest-first applying every write (§3.2, §3.3).
//! * `replayers=N` (default 2, 1..=16): background replay shards (threads), each
//!   applying the words of its address range.
//! * `clock=tsc|counter` (default `tsc` where the CPU has an invariant TSC, else
//!   `counter`): the commit clock (see `clock`).

use super::clock::ClockKind;
use crate::engine::EngineOptions;
use crate::{Error, Result};

/// Marker scheme.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MarkerMode {
    /// One global marker, CAS + skipCAS.
    Global,
    /// Sequential per-thread commit markers (NV-HTM).
    Nvhtm,
}

/// Replay direction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReplayMode {
    /// Newest first through backward links, duplicate filter.
    Backward,
    /// Oldest first through forward links, every write.
    Forward,
}

/// Parsed options.
#[derive(Clone, Copy, Debug)]
pub struct SphtOptions {
    /// Marker scheme.
    pub marker: MarkerMode,
    /// Replay direction.
    pub replay: ReplayMode,
    /// Replay shards.
    pub replayers: usize,
    /// Clock source.
    pub clock: ClockKind,
}

impl SphtOptions {
    /// Parse and validate.
    pub fn parse(engine: &str, o: &EngineOptions) -> Result<SphtOptions> {
        o.only(engine, &["marker", "replay", "replayers", "clock"])?;
        let bad = |k: &str, v: &str| {
            Error::InvalidConfig(format!(
                "the {engine} engine's option `{k}` cannot be `{v}`"
            ))
        };
        let marker = match o.get("marker").unwrap_or("global") {
            "global" => MarkerMode::Global,
            "nvhtm" => MarkerMode::Nvhtm,
            v => return Err(bad("marker", v)),
        };
        let replay = match o.get("replay").unwrap_or("backward") {
            "backward" => ReplayMode::Backward,
            "forward" => ReplayMode::Forward,
            v => return Err(bad("replay", v)),
        };
        let replayers: usize = o.parse_or(engine, "replayers", 2)?;
        if !(1..=16).contains(&replayers) {
            return Err(bad("replayers", &replayers.to_string()));
        }
        let tsc = ClockKind::tsc_available();
        let clock = match o.get("clock") {
            None if tsc => ClockKind::Tsc,
            None => ClockKind::Counter,
            Some("tsc") if tsc => ClockKind::Tsc,
            Some("tsc") => {
                return Err(Error::InvalidConfig(format!(
                    "the {engine} engine's option `clock=tsc`: this CPU has no invariant TSC"
                )))
            }
            Some("counter") => ClockKind::Counter,
            Some(v) => return Err(bad("clock", v)),
        };
        Ok(SphtOptions {
            marker,
            replay,
            replayers,
            clock,
        })
    }

    /// The option sets campaigns cycle through: the global marker (the default), NV-HTM
    /// markers, forward replay, and one replayer on the logical clock.
    pub fn option_sets() -> Vec<EngineOptions> {
        vec![
            EngineOptions::new().set("marker", "global"),
            EngineOptions::new().set("marker", "nvhtm"),
            EngineOptions::new().set("replay", "forward"),
            EngineOptions::new()
                .set("replayers", 1)
                .set("clock", "counter"),
        ]
    }
}
