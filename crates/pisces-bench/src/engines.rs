//! The engines under test: the one module of the harness that names the library's
//! engine ids and engine options.
//!
//! Everything else speaks of an [`Engine`] (which engine) and an [`EngineSpec`] (an
//! engine with options and a label in reports), and asks this module what an engine is
//! like: whether this build has it, whether it flushes through the medium (so the
//! emulated NVM latency and the flush counters see it), whether it persists at all.
//! When the library's engine registry or per-engine options change, this is the file
//! to adapt.

use pisces::{Config, EngineId, EngineOptions, MediumKind};

/// An engine of the library.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Engine(EngineId);

/// Why `pmdk` is not in this build.
const PMDK_MISSING: &str = "this build has no pmdk engine: libpmemobj was not found when it \
     was built (install Debian's libpmemobj-dev, then `cargo clean -p pisces` and rebuild)";

impl Engine {
    /// Pisces, the engine the others are compared with.
    pub const PISCES: Engine = Engine(EngineId::Pisces);
    /// Baseline: undo logging with two-phase locking.
    pub const UNDO: Engine = Engine(EngineId::Undo);
    /// Baseline: the multi-version strawman.
    pub const MVCC: Engine = Engine(EngineId::Mvcc);
    /// Peer: PMDK's libpmemobj (only where the build found it).
    pub const PMDK: Engine = Engine(EngineId::Pmdk);
    /// Pisces' concurrency control without persistence (the upper bound).
    pub const VOLATILE: Engine = Engine(EngineId::Volatile);
    /// SPHT: STM on a working snapshot, global durability marker, linked replay.
    pub const SPHT: Engine = Engine(EngineId::Spht);

    /// Every engine of the library, in benchmark order (also those not in this build).
    pub fn all() -> Vec<Engine> {
        EngineId::ALL.iter().copied().map(Engine).collect()
    }

    /// The engines of this build, in benchmark order: the default of `--engines`.
    pub fn available() -> Vec<Engine> {
        Engine::all().into_iter().filter(|e| e.in_build()).collect()
    }

    /// True if this build has the engine (`pmdk` needs libpmemobj at build time).
    pub fn in_build(self) -> bool {
        self.0.available()
    }

    /// Why an engine of the library is not in this build, if one is not.
    pub fn missing_note() -> Option<String> {
        (!Engine::PMDK.in_build()).then(|| format!("pmdk skipped: {PMDK_MISSING}"))
    }

    /// The engine's stable name (`pisces`, `undo`, ...).
    pub fn name(self) -> &'static str {
        self.0.name()
    }

    /// Parse an `--engines` item: a known engine that this build has.
    pub fn parse(s: &str) -> Result<Engine, String> {
        let e = EngineId::from_name(s.trim()).map(Engine).ok_or_else(|| {
            let known: Vec<&str> = Engine::all().iter().map(|e| e.name()).collect();
            format!("unknown engine `{s}` (known engines: {})", known.join(", "))
        })?;
        if !e.in_build() {
            return Err(PMDK_MISSING.into());
        }
        Ok(e)
    }

    /// True for the engines Pisces' targets compare against: the durable ones other than
    /// Pisces itself (the non-durable `volatile` and `bare` are references, not
    /// baselines).
    pub fn is_baseline(self) -> bool {
        self != Engine::PISCES && self.persists()
    }

    /// False for an engine that never flushes (volatile): the emulated NVM latency
    /// cannot change it.
    pub fn persists(self) -> bool {
        self.0.is_durable()
    }

    /// False for an engine that flushes by itself rather than through the pool's
    /// medium (pmdk): no NVM latency can be emulated for it, and the medium's flush,
    /// fence and log counters do not see its work.
    pub fn flushes_through_medium(self) -> bool {
        !self.0.has_own_pool_format()
    }

    /// A pool configuration for this engine with default options: `size` bytes on
    /// plain emulated PM, `max_threads` thread slots.
    pub fn config(self, size: u64, max_threads: usize) -> Config {
        Config {
            size,
            engine: Some(self.0),
            max_threads,
            ..Config::default()
        }
    }
}

/// An engine configuration under test, with its label in reports.
#[derive(Clone, Debug)]
pub struct EngineSpec {
    /// Label in tables, CSV and plots (`pisces`, `undo`, `pisces-whole`, ...).
    pub label: String,
    /// The engine.
    pub engine: Engine,
    /// Its options.
    options: EngineOptions,
}

impl EngineSpec {
    /// An engine with its default options, labelled by its name.
    pub fn plain(engine: Engine) -> Self {
        EngineSpec {
            label: engine.name().to_string(),
            engine,
            options: EngineOptions::default(),
        }
    }

    /// The Pisces configurations of the breakdown (paper Fig 9a): flush whole (no
    /// flush-diff, no group commit), flush-diff, and flush-diff with the default group
    /// commit.
    pub fn breakdown() -> [EngineSpec; 3] {
        let pisces = |label: &str, flush_diff| EngineSpec {
            label: label.into(),
            engine: Engine::PISCES,
            options: pisces::PiscesOptions {
                flush_diff,
                group_commit: 1,
            }
            .into(),
        };
        [
            pisces("pisces-whole", false),
            pisces("pisces-diff", true),
            EngineSpec::plain(Engine::PISCES),
        ]
    }

    /// The marker ablation of the spht engine: NV-HTM's sequential per-thread commit
    /// markers (`marker=nvhtm`, the baseline of the SPHT paper's Fig. 1a), then SPHT's
    /// global marker with skipCAS (the engine's default).
    pub fn markers() -> [EngineSpec; 2] {
        [
            EngineSpec {
                label: "spht-nvhtm".into(),
                engine: Engine::SPHT,
                options: EngineOptions::new().set("marker", "nvhtm"),
            },
            EngineSpec::plain(Engine::SPHT),
        ]
    }

    /// The engine options (as given, without the engine's defaults).
    pub fn options(&self) -> &EngineOptions {
        &self.options
    }

    /// The pool configuration of a measurement with this engine and its options.
    pub fn config(
        &self,
        size: u64,
        medium: MediumKind,
        max_threads: usize,
        log_bytes_per_thread: usize,
    ) -> Config {
        Config {
            size,
            medium,
            engine: Some(self.engine.0),
            max_threads,
            log_bytes_per_thread,
            engine_options: self.options.clone(),
            ..Config::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_build_decides_which_engines_are_available() {
        let names: Vec<_> = Engine::available().iter().map(|e| e.name()).collect();
        let want: Vec<_> = EngineId::ALL
            .iter()
            .filter(|e| e.available())
            .map(|e| e.name())
            .collect();
        assert_eq!(names, want);
        assert!(names.starts_with(&["pisces", "undo", "mvcc"]));
        assert_eq!(Engine::missing_note().is_none(), Engine::PMDK.in_build());
        assert_eq!(Engine::parse(" undo "), Ok(Engine::UNDO));
        assert!(Engine::parse("nosuch")
            .unwrap_err()
            .contains("known engines: pisces, undo, mvcc, pmdk"));
        if !Engine::PMDK.in_build() {
            assert!(Engine::parse("pmdk")
                .unwrap_err()
                .contains("libpmemobj-dev"));
        }
    }

    #[test]
    fn breakdown_labels_and_options() {
        let b = EngineSpec::breakdown();
        let labels: Vec<_> = b.iter().map(|s| s.label.as_str()).collect();
        assert_eq!(labels, ["pisces-whole", "pisces-diff", "pisces"]);
        assert!(b.iter().all(|s| s.engine == Engine::PISCES));
        let c = b[0].config(1 << 30, MediumKind::DRAM, 3, 4 << 20);
        assert_eq!(c.engine_options.get("flush_diff"), Some("false"));
        assert_eq!(c.engine_options.get("group_commit"), Some("1"));
        // The default configuration runs the engine's own defaults.
        assert!(b[2].options.is_empty());
    }

    #[test]
    fn marker_ablation_labels_and_options() {
        let m = EngineSpec::markers();
        let labels: Vec<_> = m.iter().map(|s| s.label.as_str()).collect();
        assert_eq!(labels, ["spht-nvhtm", "spht"]);
        assert!(m.iter().all(|s| s.engine == Engine::SPHT));
        let c = m[0].config(1 << 30, MediumKind::DRAM, 3, 4 << 20);
        assert_eq!(c.engine_options.get("marker"), Some("nvhtm"));
        assert!(m[1].options.is_empty());
    }
}
