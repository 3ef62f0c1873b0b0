//! The Pisces engine's options (also those of `volatile`): flush-diff and group commit,
//! typed, and their parsing from [`EngineOptions`].

use crate::engine::EngineOptions;
use crate::{Error, Result};

/// The Pisces engine's options (also those of `volatile`), typed.
///
/// ```
/// use pisces::{EngineOptions, PiscesOptions};
/// let o: EngineOptions = PiscesOptions { flush_diff: false, group_commit: 1 }.into();
/// assert_eq!(o.to_string(), "flush_diff=false,group_commit=1");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PiscesOptions {
    /// Log only changed words (flush-diff, §4) instead of whole objects.
    pub flush_diff: bool,
    /// Batch the write-back of up to this many transactions per thread (1 = off).
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
        let p = PiscesOptions {
            flush_diff: o.parse_or(engine, "flush_diff", d.flush_diff)?,
            group_commit: o.parse_or(engine, "group_commit", d.group_commit)?,
        };
        if p.group_commit == 0 || p.group_commit > 1024 {
            return Err(Error::InvalidConfig(format!(
                "group_commit must be 1..=1024 (1 = off), got {}",
                p.group_commit
            )));
        }
        Ok(p)
    }
}

impl From<PiscesOptions> for EngineOptions {
    fn from(p: PiscesOptions) -> EngineOptions {
        EngineOptions::new()
            .set("flush_diff", p.flush_diff)
            .set("group_commit", p.group_commit)
    }
}
