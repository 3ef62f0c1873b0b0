//! The SP3 engine's options: early visibility (the paper) or its ablation, and the test
//! hook of test and mutation builds (a delay between visibility and persistence). The
//! protocol steps a test removes are the engine's mutation points (`Sp3::MUTATIONS`).

use super::Sp3;
use crate::engine::{EngineDef, EngineOptions};
use crate::Result;

/// The SP3 engine's options.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Sp3Options {
    /// Unlock before persisting (the paper) or after (ablation).
    pub early_visibility: bool,
    /// Test hook (`persist_delay_ms`, only in builds with `cfg(test)` or the `mutation`
    /// feature): slot 0 sleeps this long between visibility and persistence, so tests
    /// can act inside that window.
    pub(crate) persist_delay_ms: u64,
}

impl Sp3Options {
    pub(super) fn parse(o: &EngineOptions) -> Result<Sp3Options> {
        let keys: &[&str] = if cfg!(any(test, feature = "mutation")) {
            &["early_visibility", "persist_delay_ms"]
        } else {
            &["early_visibility"]
        };
        o.only(Sp3::NAME, keys)?;
        Ok(Sp3Options {
            early_visibility: o.parse_or(Sp3::NAME, "early_visibility", true)?,
            persist_delay_ms: o.parse_or(Sp3::NAME, "persist_delay_ms", 0)?,
        })
    }
}
