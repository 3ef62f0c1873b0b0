//! Engine options: a list of `key=value` settings that the chosen engine parses.
//!
//! Each engine has its own knobs (Pisces: flush-diff and group commit; others: their
//! ablation switches), so the pool configuration carries them as text and the engine
//! validates them when the pool opens: an unknown key or a bad value is
//! [`Error::InvalidConfig`] naming the engine's keys. The same text form works on the
//! command line (`--engine-opt group_commit=1`) and through the C ABI. Each engine
//! with options has a typed form of them ([`PiscesOptions`](crate::PiscesOptions),
//! [`Sp3Options`](crate::Sp3Options), [`SphtOptions`](crate::SphtOptions),
//! [`TimestoneOptions`](crate::TimestoneOptions)) that converts into this text and is
//! parsed from it; the engine parses the text into its typed form when the pool opens.
//! Each engine's options type and its parsing live in its folder
//! (`<engine>/options.rs`).

use crate::{Error, Result};
use std::fmt;
use std::str::FromStr;

/// `key=value` settings for the pool's engine. Empty = the engine's defaults.
///
/// Each engine has its own knobs (Pisces: flush-diff and group commit; others: their
/// ablation switches), so the configuration carries them as text and the engine
/// checks them when the pool is created or opened: an unknown key or a bad value is
/// [`Error::InvalidConfig`] naming the engine's keys. The same text works on the
/// command line (`pisces create --engine-opt group_commit=1`) and through the C
/// interface. Each engine with options has a typed form of them that converts into
/// this text and back ([`PiscesOptions`](crate::PiscesOptions),
/// [`Sp3Options`](crate::Sp3Options), [`SphtOptions`](crate::SphtOptions),
/// [`TimestoneOptions`](crate::TimestoneOptions)); its fields document the keys. A
/// bad value is an error naming the form the key takes.
///
/// ```
/// use pisces::EngineOptions;
/// let o: EngineOptions = "group_commit=1,flush_diff=false".parse().unwrap();
/// assert_eq!(o.get("group_commit"), Some("1"));
/// assert_eq!(o.to_string(), "group_commit=1,flush_diff=false");
/// assert_eq!(EngineOptions::new().set("group_commit", 4).get("group_commit"), Some("4"));
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EngineOptions {
    entries: Vec<(String, String)>,
}

impl EngineOptions {
    /// No settings: every engine's defaults.
    pub fn new() -> Self {
        Self::default()
    }
    /// With `key` set to `value` (replacing an earlier value of `key`).
    pub fn set(mut self, key: &str, value: impl fmt::Display) -> Self {
        let value = value.to_string();
        match self.entries.iter_mut().find(|(k, _)| k == key) {
            Some(e) => e.1 = value,
            None => self.entries.push((key.to_string(), value)),
        }
        self
    }
    /// The value of `key`, if set.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.entries
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
    /// True if nothing is set.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
    /// Check that every key is one of `known` (an engine calls this first).
    pub(crate) fn only(&self, engine: &str, known: &[&str]) -> Result<()> {
        for (k, _) in &self.entries {
            if !known.contains(&k.as_str()) {
                return Err(Error::invalid_config(format!(
                    "the {engine} engine has no option `{k}` (it has: {})",
                    if known.is_empty() {
                        "none".to_string()
                    } else {
                        known.join(", ")
                    }
                )));
            }
        }
        Ok(())
    }
    /// The value of `key` parsed as `T` (`None` when unset). A value that does not
    /// parse, or that `valid` rejects, is [`Error::InvalidConfig`] naming the form
    /// the key takes (`expected`, e.g. "an integer 1..=16").
    pub(crate) fn typed<T: FromStr>(
        &self,
        engine: &str,
        key: &str,
        expected: &str,
        valid: impl Fn(&T) -> bool,
    ) -> Result<Option<T>> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => match v.parse::<T>() {
                Ok(t) if valid(&t) => Ok(Some(t)),
                _ => Err(bad_value(engine, key, expected, v)),
            },
        }
    }

    /// The value of `key` as one of `choices` (`(text, value)` pairs; `None` when
    /// unset); any other text is an error listing them.
    pub(crate) fn choice<T: Copy>(
        &self,
        engine: &str,
        key: &str,
        choices: &[(&str, T)],
    ) -> Result<Option<T>> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => match choices.iter().find(|(name, _)| *name == v) {
                Some(&(_, t)) => Ok(Some(t)),
                None => {
                    let names: Vec<String> = choices
                        .iter()
                        .map(|(name, _)| format!("`{name}`"))
                        .collect();
                    Err(bad_value(engine, key, &one_of(&names), v))
                }
            },
        }
    }
}

/// "`a`, `b` or `c`".
fn one_of(names: &[String]) -> String {
    match names {
        [] => "nothing".into(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} or {last}", init.join(", ")),
    }
}

/// The error for `key=got` of `engine`'s options: what the key takes instead.
pub(crate) fn bad_value(engine: &str, key: &str, expected: &str, got: &str) -> Error {
    Error::invalid_config(format!(
        "{engine} option `{key}`: expected {expected}, got `{got}`"
    ))
}

/// The text form of a boolean option's expected value.
pub(crate) const BOOL: &str = "`true` or `false`";

impl fmt::Display for EngineOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (k, v)) in self.entries.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{k}={v}")?;
        }
        Ok(())
    }
}

impl FromStr for EngineOptions {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        let mut o = EngineOptions::new();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (k, v) = part.split_once('=').ok_or_else(|| {
                Error::invalid_config(format!("engine option `{part}` is not key=value"))
            })?;
            if k.trim().is_empty() {
                return Err(Error::invalid_config(format!(
                    "engine option `{part}` has no key"
                )));
            }
            o = o.set(k.trim(), v.trim());
        }
        Ok(o)
    }
}

/// The conversions every typed options struct has, from its `parse(engine, &EngineOptions)`
/// and its engine's name: `TryFrom<&EngineOptions>`, `FromStr` (the `key=value` text)
/// and `Display` (the same text, every field written).
macro_rules! typed_options {
    ($t:ty, $engine:expr) => {
        impl TryFrom<&$crate::engine::EngineOptions> for $t {
            type Error = $crate::Error;
            fn try_from(o: &$crate::engine::EngineOptions) -> $crate::Result<$t> {
                <$t>::parse($engine, o)
            }
        }
        impl std::str::FromStr for $t {
            type Err = $crate::Error;
            fn from_str(s: &str) -> $crate::Result<$t> {
                <$t>::try_from(&s.parse::<$crate::engine::EngineOptions>()?)
            }
        }
        impl std::fmt::Display for $t {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                std::fmt::Display::fmt(&$crate::engine::EngineOptions::from(*self), f)
            }
        }
    };
}
pub(crate) use typed_options;

#[cfg(test)]
mod tests {
    use crate::{
        EngineOptions, PiscesOptions, Sp3Options, SphtClock, SphtMarker, SphtOptions, SphtReplay,
        TimestoneOptions,
    };
    use std::fmt::{Debug, Display};
    use std::str::FromStr;

    /// `v` written as text and parsed back is `v`, and so through `EngineOptions`.
    fn round_trips<T>(v: T)
    where
        T: Copy + PartialEq + Debug + Display + FromStr<Err = crate::Error>,
        T: for<'a> TryFrom<&'a EngineOptions, Error = crate::Error>,
        EngineOptions: From<T>,
    {
        let text = v.to_string();
        assert_eq!(text.parse::<T>().unwrap(), v, "{text}");
        let o = EngineOptions::from(v);
        assert_eq!(o.to_string(), text);
        assert_eq!(T::try_from(&o).unwrap(), v, "{text}");
        assert_eq!(
            T::try_from(&text.parse::<EngineOptions>().unwrap()).unwrap(),
            v
        );
    }

    /// `text` does not parse as `T`, with an error that contains `message`.
    fn refused<T: FromStr<Err = crate::Error> + Debug>(text: &str, message: &str) {
        let e = text.parse::<T>().unwrap_err();
        assert!(
            e.to_string().contains(message),
            "`{text}`: {e} (wanted {message})"
        );
    }

    #[test]
    fn pisces_options_round_trip_and_name_the_expected_form() {
        round_trips(PiscesOptions::default());
        for flush_diff in [true, false] {
            for group_commit in [1, 8, 1024] {
                round_trips(PiscesOptions {
                    flush_diff,
                    group_commit,
                });
            }
        }
        assert_eq!(
            "group_commit=3".parse::<PiscesOptions>().unwrap(),
            PiscesOptions {
                group_commit: 3,
                ..Default::default()
            }
        );
        refused::<PiscesOptions>(
            "flush_diff=yes",
            "pisces option `flush_diff`: expected `true` or `false`, got `yes`",
        );
        for bad in ["0", "1025", "-1", "abc"] {
            refused::<PiscesOptions>(
                &format!("group_commit={bad}"),
                &format!(
                    "pisces option `group_commit`: expected an integer 1..=1024 (1 = off), got `{bad}`"
                ),
            );
        }
        refused::<PiscesOptions>(
            "group=1",
            "the pisces engine has no option `group` (it has: flush_diff, group_commit)",
        );
    }

    #[test]
    fn sp3_options_round_trip_and_name_the_expected_form() {
        round_trips(Sp3Options::default());
        round_trips(Sp3Options {
            early_visibility: false,
        });
        assert!(Sp3Options::default().early_visibility);
        refused::<Sp3Options>(
            "early_visibility=1",
            "sp3 option `early_visibility`: expected `true` or `false`, got `1`",
        );
        refused::<Sp3Options>("marker=global", "the sp3 engine has no option `marker`");
    }

    #[test]
    fn spht_options_round_trip_and_name_the_expected_form() {
        round_trips(SphtOptions::default());
        for marker in [SphtMarker::Global, SphtMarker::Nvhtm] {
            for replay in [SphtReplay::Backward, SphtReplay::Forward, SphtReplay::Scan] {
                for dup_filter in [None, Some(true), Some(false)] {
                    for clock in [None, Some(SphtClock::Tsc), Some(SphtClock::Counter)] {
                        round_trips(SphtOptions {
                            marker,
                            replay,
                            dup_filter,
                            replay_hold: replay == SphtReplay::Scan,
                            replayers: 1 + marker as usize * 15,
                            clock,
                            points: dup_filter.map(|f| f == (clock == Some(SphtClock::Tsc))),
                        });
                    }
                }
            }
        }
        // Unset keys keep their defaults (`None`: resolved at open).
        assert_eq!(
            "replay=forward".parse::<SphtOptions>().unwrap(),
            SphtOptions {
                replay: SphtReplay::Forward,
                ..Default::default()
            }
        );
        refused::<SphtOptions>(
            "marker=local",
            "spht option `marker`: expected `global` or `nvhtm`, got `local`",
        );
        refused::<SphtOptions>(
            "replay=up",
            "spht option `replay`: expected `backward`, `forward` or `scan`, got `up`",
        );
        refused::<SphtOptions>(
            "dup_filter=true",
            "spht option `dup_filter`: expected `on` or `off`, got `true`",
        );
        refused::<SphtOptions>(
            "replay_hold=on",
            "spht option `replay_hold`: expected `true` or `false`, got `on`",
        );
        for bad in ["0", "17", "two"] {
            refused::<SphtOptions>(
                &format!("replayers={bad}"),
                &format!("spht option `replayers`: expected an integer 1..=16, got `{bad}`"),
            );
        }
        refused::<SphtOptions>(
            "clock=wall",
            "spht option `clock`: expected `tsc` or `counter`, got `wall`",
        );
    }

    #[test]
    fn timestone_options_round_trip_and_name_the_expected_form() {
        round_trips(TimestoneOptions::default());
        for checkpoint_pct in [1, 90, 100] {
            for clog_mib in [None, Some(0), Some(63)] {
                for olog_regions in [None, Some(1), Some(8)] {
                    round_trips(TimestoneOptions {
                        checkpoint_pct,
                        clog_mib,
                        olog_regions,
                        eager_reuse: clog_mib.is_some(),
                    });
                }
            }
        }
        for bad in ["0", "101", "ninety"] {
            refused::<TimestoneOptions>(
                &format!("checkpoint_pct={bad}"),
                &format!(
                    "timestone option `checkpoint_pct`: expected a percentage 1..=100, got `{bad}`"
                ),
            );
        }
        refused::<TimestoneOptions>(
            "clog_mib=4M",
            "timestone option `clog_mib`: expected a size in MiB 0..=63 (0: the smallest), got `4M`",
        );
        refused::<TimestoneOptions>(
            "olog_regions=9",
            "timestone option `olog_regions`: expected an integer 1..=8, got `9`",
        );
        refused::<TimestoneOptions>(
            "eager_reuse=maybe",
            "timestone option `eager_reuse`: expected `true` or `false`, got `maybe`",
        );
    }

    /// What the engines take at open is what the typed forms parse: a bad value is
    /// refused by the pool's open with the same message.
    #[test]
    fn a_pool_open_refuses_a_bad_value_with_the_typed_message() {
        use crate::{Config, EngineId, Pool};
        for (engine, opts, message) in [
            (
                EngineId::Spht,
                "replayers=abc",
                "spht option `replayers`: expected an integer 1..=16, got `abc`",
            ),
            (
                EngineId::Sp3,
                "early_visibility=off",
                "sp3 option `early_visibility`: expected `true` or `false`, got `off`",
            ),
            (
                EngineId::Timestone,
                "checkpoint_pct=0",
                "timestone option `checkpoint_pct`: expected a percentage 1..=100, got `0`",
            ),
            (
                EngineId::Volatile,
                "group_commit=0",
                "volatile option `group_commit`: expected an integer 1..=1024 (1 = off), got `0`",
            ),
        ] {
            let cfg = Config::default()
                .size(8 << 20)
                .max_threads(2)
                .log_bytes_per_thread(64 << 10)
                .engine(engine)
                .engine_options(opts.parse::<EngineOptions>().unwrap());
            let medium = std::sync::Arc::new(
                crate::medium::dram::DramMedium::anonymous(8 << 20, 0, 0).unwrap(),
            );
            let e = match Pool::create_on(medium, cfg) {
                Ok(_) => panic!("{opts} accepted"),
                Err(e) => e,
            };
            assert!(e.to_string().contains(message), "{e}");
        }
    }
}
