//! The SP3 engine's options: early visibility (the paper) or its ablation. The protocol
//! steps a test removes are the engine's mutation points (`Sp3::MUTATIONS`), the places
//! where a test slows a thread down its hook points (`Sp3::HOOKS`).

use super::Sp3;
use crate::engine::options::{typed_options, BOOL};
use crate::engine::{EngineDef, EngineOptions};
use crate::Result;

/// The SP3 engine's options, typed: the keys of its [`EngineOptions`], which this
/// converts into (`From`) and is parsed from (`TryFrom<&EngineOptions>`, `FromStr`;
/// `Display` writes the same text).
///
/// ```
/// use pisces::{Config, EngineId, Sp3Options};
/// let o = Sp3Options { early_visibility: false };
/// assert_eq!(o.to_string(), "early_visibility=false");
/// assert_eq!("early_visibility=false".parse::<Sp3Options>().unwrap(), o);
/// assert_eq!("".parse::<Sp3Options>().unwrap(), Sp3Options::default());
/// let cfg = Config::default().engine(EngineId::Sp3).engine_options(o);
/// assert_eq!(Sp3Options::try_from(&cfg.engine_options).unwrap(), o);
/// let e = "early_visibility=no".parse::<Sp3Options>().unwrap_err();
/// assert!(e.to_string().contains(
///     "sp3 option `early_visibility`: expected `true` or `false`, got `no`"
/// ));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sp3Options {
    /// `early_visibility` (`true` or `false`; default `true`): a commit makes its
    /// versions visible before it persists its record (the paper), or only after
    /// (`false`, the ablation).
    pub early_visibility: bool,
}

impl Default for Sp3Options {
    fn default() -> Self {
        Sp3Options {
            early_visibility: true,
        }
    }
}

impl Sp3Options {
    /// Parse and validate `o` for engine `engine`.
    pub(crate) fn parse(engine: &str, o: &EngineOptions) -> Result<Sp3Options> {
        o.only(engine, &["early_visibility"])?;
        let d = Sp3Options::default();
        Ok(Sp3Options {
            early_visibility: o
                .typed(engine, "early_visibility", BOOL, |_| true)?
                .unwrap_or(d.early_visibility),
        })
    }
}

typed_options!(Sp3Options, Sp3::NAME);

impl From<Sp3Options> for EngineOptions {
    fn from(o: Sp3Options) -> EngineOptions {
        EngineOptions::new().set("early_visibility", o.early_visibility)
    }
}
