//! The engine's options: typed ([`SphtOptions`], whose fields document each key) and
//! as `key=value` text ([`crate::EngineOptions`]); what an open uses, with the
//! defaults that depend on other keys or on the CPU resolved ([`SphtSettings`]).

use super::clock::ClockKind;
use crate::engine::options::{typed_options, BOOL};
use crate::engine::EngineOptions;
use crate::{Error, Result};

/// SPHT's durability marker scheme (option `marker`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SphtMarker {
    /// `global`: SPHT's single persistent global marker, advanced by CAS with skipCAS
    /// (§3.1).
    Global,
    /// `nvhtm`: NV-HTM's sequential per-thread commit markers (the scheme of Fig. 1a),
    /// for comparison.
    Nvhtm,
}

/// How SPHT finds a batch of durable transactions, oldest first (option `replay`);
/// recovery on open finds its records the same way.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SphtReplay {
    /// `backward`: through the backward links from the newest one (§3.2).
    Backward,
    /// `forward`: through the forward links from the last replayed one (§3.3).
    Forward,
    /// `scan`: by scanning the per-thread logs and merging them by commit timestamp (no
    /// link followed: the baseline the links are measured against).
    Scan,
}

/// SPHT's commit clock (option `clock`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SphtClock {
    /// `tsc`: the CPU's invariant time-stamp counter (an open refuses it on a CPU
    /// without one).
    Tsc,
    /// `counter`: a logical counter.
    Counter,
}

const MARKERS: [(&str, SphtMarker); 2] =
    [("global", SphtMarker::Global), ("nvhtm", SphtMarker::Nvhtm)];
const REPLAYS: [(&str, SphtReplay); 3] = [
    ("backward", SphtReplay::Backward),
    ("forward", SphtReplay::Forward),
    ("scan", SphtReplay::Scan),
];
const CLOCKS: [(&str, SphtClock); 2] = [("tsc", SphtClock::Tsc), ("counter", SphtClock::Counter)];
const ON_OFF: [(&str, bool); 2] = [("on", true), ("off", false)];
/// The range of `replayers`.
const REPLAYERS: std::ops::RangeInclusive<usize> = 1..=16;
const KEYS: [&str; 7] = [
    "marker",
    "replay",
    "dup_filter",
    "replay_hold",
    "replayers",
    "clock",
    "points",
];

/// The SPHT engine's options, typed: the keys of its [`EngineOptions`], which this
/// converts into (`From`; a `None` field writes no key) and is parsed from
/// (`TryFrom<&EngineOptions>`, `FromStr`; `Display` writes the same text).
///
/// ```
/// use pisces::{Config, EngineId, SphtClock, SphtMarker, SphtOptions, SphtReplay};
/// let o = SphtOptions {
///     replay: SphtReplay::Scan,
///     dup_filter: Some(true),
///     clock: Some(SphtClock::Counter),
///     ..SphtOptions::default()
/// };
/// assert_eq!(
///     o.to_string(),
///     "marker=global,replay=scan,dup_filter=on,replay_hold=false,replayers=2,clock=counter"
/// );
/// assert_eq!(o.to_string().parse::<SphtOptions>().unwrap(), o);
/// assert_eq!("marker=nvhtm".parse::<SphtOptions>().unwrap().marker, SphtMarker::Nvhtm);
/// let cfg = Config::default().engine(EngineId::Spht).engine_options(o);
/// assert_eq!(SphtOptions::try_from(&cfg.engine_options).unwrap(), o);
/// let e = "replayers=abc".parse::<SphtOptions>().unwrap_err();
/// assert!(e.to_string().contains("spht option `replayers`: expected an integer 1..=16, got `abc`"));
/// let e = "replay=sideways".parse::<SphtOptions>().unwrap_err();
/// assert!(e.to_string().contains(
///     "spht option `replay`: expected `backward`, `forward` or `scan`, got `sideways`"
/// ));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SphtOptions {
    /// `marker` (`global` or `nvhtm`; default `global`): the durability marker scheme.
    pub marker: SphtMarker,
    /// `replay` (`backward`, `forward` or `scan`; default `backward`): how a batch of
    /// durable transactions is found.
    pub replay: SphtReplay,
    /// `dup_filter` (`on` or `off`; `None`, the default: `on` with backward replay,
    /// else `off`): apply a batch newest transaction first, writing each word only once
    /// (its newest value), or oldest first, writing every logged word. Any combination
    /// with `replay` is correct; the paper pairs the filter with backward replay.
    pub dup_filter: Option<bool>,
    /// `replay_hold` (`true` or `false`; default `false`): the background replayer
    /// stays idle, so durable transactions build up in the logs. Replay still runs
    /// when a log is full, when an allocation finds no free block, at `quiesce` and
    /// close, and at recovery: holding never blocks a writer for good.
    pub replay_hold: bool,
    /// `replayers` (1..=16; default 2): background replay shards (threads), each
    /// applying the words of its address range.
    pub replayers: usize,
    /// `clock` (`tsc` or `counter`; `None`, the default: `tsc` where the CPU has an
    /// invariant TSC, else `counter`): the commit clock.
    pub clock: Option<SphtClock>,
    /// `points` (`on` or `off`; `None`, the default: `on` where the medium's fence is a
    /// device sync, the file medium, else `off`): a commit that finds every update
    /// transaction with a smaller timestamp already persistent writes its log record as
    /// a durable point of its own and skips the marker's write, so it makes one device
    /// sync instead of two; one that finds older ones not yet persistent but already
    /// visible names them in its record (a conditional point: durable once they are)
    /// and skips the marker too. Either setting is correct on every medium.
    pub points: Option<bool>,
}

impl Default for SphtOptions {
    fn default() -> Self {
        SphtOptions {
            marker: SphtMarker::Global,
            replay: SphtReplay::Backward,
            dup_filter: None,
            replay_hold: false,
            replayers: 2,
            clock: None,
            points: None,
        }
    }
}

impl SphtOptions {
    /// Parse and validate `o` for engine `engine` (unknown keys, forms, ranges).
    pub(crate) fn parse(engine: &str, o: &EngineOptions) -> Result<SphtOptions> {
        o.only(engine, &KEYS)?;
        let d = SphtOptions::default();
        Ok(SphtOptions {
            marker: o.choice(engine, "marker", &MARKERS)?.unwrap_or(d.marker),
            replay: o.choice(engine, "replay", &REPLAYS)?.unwrap_or(d.replay),
            dup_filter: o.choice(engine, "dup_filter", &ON_OFF)?,
            replay_hold: o
                .typed(engine, "replay_hold", BOOL, |_| true)?
                .unwrap_or(d.replay_hold),
            replayers: o
                .typed(engine, "replayers", "an integer 1..=16", |n| {
                    REPLAYERS.contains(n)
                })?
                .unwrap_or(d.replayers),
            clock: o.choice(engine, "clock", &CLOCKS)?,
            points: o.choice(engine, "points", &ON_OFF)?,
        })
    }
}

typed_options!(SphtOptions, "spht");

/// The text of `value` among `choices`.
fn name_of<T: PartialEq>(choices: &[(&'static str, T)], value: T) -> &'static str {
    choices
        .iter()
        .find(|(_, v)| *v == value)
        .map(|(name, _)| *name)
        .expect("every value has a name")
}

impl From<SphtOptions> for EngineOptions {
    fn from(o: SphtOptions) -> EngineOptions {
        let mut e = EngineOptions::new()
            .set("marker", name_of(&MARKERS, o.marker))
            .set("replay", name_of(&REPLAYS, o.replay));
        if let Some(f) = o.dup_filter {
            e = e.set("dup_filter", name_of(&ON_OFF, f));
        }
        e = e
            .set("replay_hold", o.replay_hold)
            .set("replayers", o.replayers);
        if let Some(c) = o.clock {
            e = e.set("clock", name_of(&CLOCKS, c));
        }
        if let Some(p) = o.points {
            e = e.set("points", name_of(&ON_OFF, p));
        }
        e
    }
}

/// What an open uses: [`SphtOptions`] with the defaults that depend on other keys or
/// on the CPU resolved.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SphtSettings {
    /// Marker scheme.
    pub marker: SphtMarker,
    /// Replay direction.
    pub replay: SphtReplay,
    /// Apply newest first with the duplicate filter (else oldest first, every word).
    pub dup_filter: bool,
    /// The background replayer stays idle.
    pub replay_hold: bool,
    /// Replay shards.
    pub replayers: usize,
    /// Clock source.
    pub clock: ClockKind,
    /// Point records: `None` until the open resolves it against the medium.
    pub points: Option<bool>,
}

impl SphtSettings {
    /// Parse, validate and resolve.
    pub(crate) fn parse(engine: &str, o: &EngineOptions) -> Result<SphtSettings> {
        let t = SphtOptions::parse(engine, o)?;
        let tsc = ClockKind::tsc_available();
        let clock = match t.clock {
            None if tsc => ClockKind::Tsc,
            None | Some(SphtClock::Counter) => ClockKind::Counter,
            Some(SphtClock::Tsc) if tsc => ClockKind::Tsc,
            Some(SphtClock::Tsc) => {
                return Err(Error::invalid_config(format!(
                    "{engine} option `clock`: `tsc`, but this CPU has no invariant TSC"
                )))
            }
        };
        Ok(SphtSettings {
            marker: t.marker,
            replay: t.replay,
            dup_filter: t.dup_filter.unwrap_or(t.replay == SphtReplay::Backward),
            replay_hold: t.replay_hold,
            replayers: t.replayers,
            clock,
            points: t.points,
        })
    }

    /// The option sets campaigns cycle through: the global marker (the default), NV-HTM
    /// markers, forward replay, scan replay with the duplicate filter, one replayer on
    /// the logical clock, and point records (with each marker scheme) whatever the
    /// medium.
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
            EngineOptions::new().set("points", "on"),
            EngineOptions::new()
                .set("points", "on")
                .set("marker", "nvhtm"),
        ]
    }
}
