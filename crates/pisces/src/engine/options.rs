//! Engine options: a list of `key=value` settings that the chosen engine parses.
//!
//! Each engine has its own knobs (Pisces: flush-diff and group commit; others: their
//! ablation switches), so the pool configuration carries them as text and the engine
//! validates them when the pool opens: an unknown key or a bad value is
//! [`Error::InvalidConfig`] naming the engine's keys. The same text form works on the
//! command line (`--engine-opt group_commit=1`) and through the C ABI. Typed builders
//! such as [`PiscesOptions`](crate::PiscesOptions) convert into it. Each engine's own
//! options type and its parsing live in its folder (`<engine>/options.rs`).

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
/// interface; typed builders such as [`PiscesOptions`](crate::PiscesOptions) convert
/// into it. Each engine's keys are listed on its page in the repository's
/// `docs/engines/`.
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
                return Err(Error::InvalidConfig(format!(
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
    /// The value of `key` parsed as `T`, or `default` when unset.
    pub(crate) fn parse_or<T: FromStr>(&self, engine: &str, key: &str, default: T) -> Result<T> {
        match self.get(key) {
            None => Ok(default),
            Some(v) => v.parse().map_err(|_| {
                Error::InvalidConfig(format!(
                    "the {engine} engine's option `{key}` cannot be `{v}`"
                ))
            }),
        }
    }
}

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
                Error::InvalidConfig(format!("engine option `{part}` is not key=value"))
            })?;
            if k.trim().is_empty() {
                return Err(Error::InvalidConfig(format!(
                    "engine option `{part}` has no key"
                )));
            }
            o = o.set(k.trim(), v.trim());
        }
        Ok(o)
    }
}
