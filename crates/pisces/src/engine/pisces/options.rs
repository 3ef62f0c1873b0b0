//! The Pisces engine's options (also those of `volatile`): flush-diff and group commit,
//! typed, and their parsing from [`EngineOptions`].

use crate::engine::options::{typed_options, BOOL};
use crate::engine::EngineOptions;
use crate::Result;

/// The Pisces engine's options (also those of `volatile`), typed: the keys of its
/// [`EngineOptions`], which this converts into (`From`) and is parsed from
/// (`TryFrom<&EngineOptions>`, `FromStr`; `Display` writes the same text).
///
/// ```
/// use pisces::{Config, EngineId, EngineOptions, PiscesOptions};
/// let o = PiscesOptions { flush_diff: false, group_commit: 1 };
/// assert_eq!(o.to_string(), "flush_diff=false,group_commit=1");
/// assert_eq!("group_commit=1,flush_diff=false".parse::<PiscesOptions>().unwrap(), o);
/// let cfg = Config::default().engine(EngineId::Pisces).engine_options(o);
/// assert_eq!(PiscesOptions::try_from(&cfg.engine_options).unwrap(), o);
/// // A bad value names the form the key takes.
/// let e = "group_commit=0".parse::<PiscesOptions>().unwrap_err();
/// assert!(e.to_string().contains("pisces option `group_commit`: expected an integer 1..=1024 (1 = off), got `0`"));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PiscesOptions {
    /// `flush_diff` (`true` or `false`; default `true`): log only the words a
    /// transaction changed (flush-diff, §4), not whole objects.
    pub flush_diff: bool,
    /// `group_commit` (1..=1024; default 8): batch the write-back of up to this many
    /// transactions per thread (1 = off).
    pub group_commit: usize,
}

impl Default for PiscesOptions {
    fn default() -> Self {
        PiscesOptions {
            flush_diff: true,
            group_commit: 8,
        }
    }
}

/// The range of `group_commit`.
const GROUP_COMMIT: std::ops::RangeInclusive<usize> = 1..=1024;

impl PiscesOptions {
    /// Flush-diff on and off, group commit off (1) and on (8).
    pub(crate) fn ablations() -> Vec<EngineOptions> {
        let mut v = Vec::new();
        for flush_diff in [true, false] {
            for group_commit in [1, 8] {
                v.push(
                    PiscesOptions {
                        flush_diff,
                        group_commit,
                    }
                    .into(),
                );
            }
        }
        v
    }

    /// The keys this engine understands.
    pub(crate) const KEYS: [&'static str; 2] = ["flush_diff", "group_commit"];

    /// Parse and validate `o` for engine `engine` (pisces or volatile).
    pub(crate) fn parse(engine: &str, o: &EngineOptions) -> Result<PiscesOptions> {
        o.only(engine, &Self::KEYS)?;
        let d = PiscesOptions::default();
        let group_commit = o.typed(
            engine,
            "group_commit",
            "an integer 1..=1024 (1 = off)",
            |n| GROUP_COMMIT.contains(n),
        )?;
        Ok(PiscesOptions {
            flush_diff: o
                .typed(engine, "flush_diff", BOOL, |_| true)?
                .unwrap_or(d.flush_diff),
            group_commit: group_commit.unwrap_or(d.group_commit),
        })
    }
}

typed_options!(PiscesOptions, "pisces");

impl From<PiscesOptions> for EngineOptions {
    fn from(p: PiscesOptions) -> EngineOptions {
        EngineOptions::new()
            .set("flush_diff", p.flush_diff)
            .set("group_commit", p.group_commit)
    }
}
