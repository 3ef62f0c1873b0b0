//! The SP3 engine's options: early visibility (the paper) or its ablation. The protocol
//! steps a test removes are the engine's mutation points (`Sp3::MUTATIONS`), the places
//! where a test slows a thread down its hook points (`Sp3::HOOKS`).

use super::Sp3;
use crate::engine::{EngineDef, EngineOptions};
use crate::Result;

/// The SP3 engine's options.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Sp3Options {
    /// Unlock before persisting (the paper) or after (ablation).
    pub early_visibility: bool,
}

impl Sp3Options {
    pub(super) fn parse(o: &EngineOptions) -> Result<Sp3Options> {
        o.only(Sp3::NAME, &["early_visibility"])?;
        Ok(Sp3Options {
            early_visibility: o.parse_or(Sp3::NAME, "early_visibility", true)?,
        })
    }
}
