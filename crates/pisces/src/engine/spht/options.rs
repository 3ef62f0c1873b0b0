//! The engine's options (`key=value`, see [`crate::EngineOptions`]).
//!
//! * `marker=global|nvhtm` (default `global`): SPHT's single persistent global marker
//!   advanced by CAS with skipCAS (§3.1), or NV-HTM's sequential per-thread commit
//!   markers (the scheme of Fig. 1a) for comparison.
//! * `replay=backward|forward|scan` (default `backward`): how a batch of durable
//!   transactions is found, oldest first: through the backward links from the newest
//!   one, through the forward links from the last replayed one (§3.2, §3.3), or by
//!   scanning the per-thread logs and merging them by commit timestamp (no link
//!   followed: the baseline the links are measured against). Recovery on open finds
//!   its records the same way (see `recovery`).
//! * `dup_filter=on|off` (default `on` with `replay=backward`, else `off`): apply a
//!   batch newest transaction first, writing each word only once (its newest value:
//!   the duplicate filter), or oldest first, writing every logged word. Any
//!   combination with `replay` is correct; the paper pairs the filter with backward
//!   replay.
//! * `replay_hold=true|false` (default `false`): the background replayer stays idle,
//!   so the durable transactions build up in the logs (the replay benchmark fills the
//!   logs this way). Replay still runs when a log is full, when an allocation finds
//!   no free block, at `quiesce` and close, and at recovery: holding never blocks a
//!   writer for good.
//! * `replayers=N` (default 2, 1..=16): background replay shards (threads), each
//!   applying the words of its address range.
//! * `clock=tsc|counter` (default `tsc` where the CPU has an invariant TSC, else
//!   `counter`): the commit clock (see `clock`).

use super::clock::ClockKind;
use crate::engine::EngineOptions;
use crate::{Error, Result};

/// Marker scheme.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum MarkerMode {
    /// One global marker, CAS + skipCAS.
    Global,
    /// Sequential per-thread commit markers (NV-HTM).
    Nvhtm,
}

/// Replay direction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ReplayMode {
    /// Newest first through backward links, duplicate filter.
    Backward,
    /// Oldest first through forward links.
    Forward,
    /// Per-thread logs merged by commit timestamp, no link followed.
    Scan,
}

/// Parsed options.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SphtOptions {
    /// Marker scheme.
    pub marker: MarkerMode,
    /// Replay direction.
    pub replay: ReplayMode,
    /// Apply newest first with the duplicate filter (else oldest first, every word).
    pub dup_filter: bool,
    /// The background replayer stays idle.
    pub replay_hold: bool,
    /// Replay shards.
    pub replayers: usize,
    /// Clock source.
    pub clock: ClockKind,
}

impl SphtOptions {
    /// Parse and validate.
    pub(crate) fn parse(engine: &str, o: &EngineOptions) -> Result<SphtOptions> {
        o.only(
            engine,
            &[
                "marker",
                "replay",
                "dup_filter",
                "replay_hold",
                "replayers",
                "clock",
            ],
        )?;
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
            "scan" => ReplayMode::Scan,
            v => return Err(bad("replay", v)),
        };
        let dup_filter = match o.get("dup_filter") {
            None => replay == ReplayMode::Backward,
            Some("on") => true,
            Some("off") => false,
            Some(v) => return Err(bad("dup_filter", v)),
        };
        let replay_hold = match o.get("replay_hold").unwrap_or("false") {
            "true" => true,
            "false" => false,
            v => return Err(bad("replay_hold", v)),
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
            dup_filter,
            replay_hold,
            replayers,
            clock,
        })
    }

    /// The option sets campaigns cycle through: the global marker (the default), NV-HTM
    /// markers, forward replay, scan replay with the duplicate filter, and one
    /// replayer on the logical clock.
    pub(crate) fn option_sets() -> Vec<EngineOptions> {
        vec![
            EngineOptions::new().set("marker", "global"),
            EngineOptions::new().set("marker", "nvhtm"),
            EngineOptions::new().set("replay", "forward"),
            EngineOptions::new()
                .set("replay", "scan")
                .set("dup_filter", "on"),
            EngineOptions::new()
                .set("replayers", 1)
                .set("clock", "counter"),
        ]
    }
}
