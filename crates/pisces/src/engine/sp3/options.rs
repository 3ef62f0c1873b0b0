//! The SP3 engine's options: early visibility (the paper) or its ablation, and the test
//! hooks of test and mutation builds (a protocol step removed, a delay between
//! visibility and persistence).

use super::Sp3;
use crate::engine::{EngineDef, EngineOptions};
use crate::Result;

/// A protocol step that a test removes on purpose (option `inject_bug`, only in builds
/// with `cfg(test)` or the `mutation` feature) to show that the test guarding the step
/// fails without it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum InjectedBug {
    /// None: the real protocol.
    None,
    /// Commit does not validate the read set (step 1), nor does a read.
    SkipValidation,
    /// `wait_durable` does not wait for predecessors (step 5).
    NoDependencyWait,
    /// The checkpoint writes home and retires before the predecessors are retired.
    HomeBeforePredecessors,
    /// Records carry no dependency set (step 2).
    NoDependencies,
}

impl std::str::FromStr for InjectedBug {
    type Err = ();
    fn from_str(s: &str) -> std::result::Result<InjectedBug, ()> {
        Ok(match s {
            "none" => InjectedBug::None,
            "skip_validation" => InjectedBug::SkipValidation,
            "no_dependency_wait" => InjectedBug::NoDependencyWait,
            "home_before_predecessors" => InjectedBug::HomeBeforePredecessors,
            "no_dependencies" => InjectedBug::NoDependencies,
            _ => return Err(()),
        })
    }
}

/// The SP3 engine's options.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Sp3Options {
    /// Unlock before persisting (the paper) or after (ablation).
    pub early_visibility: bool,
    pub(crate) bug: InjectedBug,
    /// Test hook (`persist_delay_ms`, same builds as `inject_bug`): slot 0 sleeps this
    /// long between visibility and persistence, so tests can act inside that window.
    pub(crate) persist_delay_ms: u64,
}

impl Sp3Options {
    pub(super) fn parse(o: &EngineOptions) -> Result<Sp3Options> {
        let keys: &[&str] = if cfg!(any(test, feature = "mutation")) {
            &["early_visibility", "inject_bug", "persist_delay_ms"]
        } else {
            &["early_visibility"]
        };
        o.only(Sp3::NAME, keys)?;
        Ok(Sp3Options {
            early_visibility: o.parse_or(Sp3::NAME, "early_visibility", true)?,
            bug: o.parse_or(Sp3::NAME, "inject_bug", InjectedBug::None)?,
            persist_delay_ms: o.parse_or(Sp3::NAME, "persist_delay_ms", 0)?,
        })
    }
}
