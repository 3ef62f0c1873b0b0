//! The engines under test: the one module of the harness that names the library's
//! engine ids, engine options and the labels of engine configurations in reports
//! ([`labels`]), and the peers of [`crate::peers`].
//!
//! Everything else speaks of an [`Engine`] (which engine) and an [`EngineSpec`] (an
//! engine with options and a label in reports), and asks this module what an engine is
//! like: whether this build has it, whether it flushes through the medium (so the
//! emulated NVM latency and the flush counters see it), whether it persists at all,
//! which data sets it can run. When the library's engine registry or per-engine
//! options change, this is the file to adapt.
//!
//! An engine is either one of the library's engines (run on a Pisces pool through the
//! transaction API) or a peer: a key-value store a Rust user would pick instead of a
//! PTM (`redb`, `lmdb`, `canopydb`), run by the harness through its own API on its own files. The
//! peers are engines of this harness only, not of the library.

use crate::peers::Peer;
use crate::workloads::kinds::DataKind;
use pisces::{Config, EngineId, EngineOptions, MediumKind, PersistenceDomain};

/// An engine under test: one of the library's, or a peer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Engine(Kind);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Lib(EngineId),
    Peer(Peer),
}

/// Why `pmdk` is not in this build.
const PMDK_MISSING: &str = "this build has no pmdk engine: libpmemobj was not found when it \
     was built (install Debian's libpmemobj-dev, then `cargo clean -p pisces` and rebuild)";

impl Engine {
    /// Pisces, the engine the others are compared with.
    pub const PISCES: Engine = Engine(Kind::Lib(EngineId::Pisces));
    /// Baseline: undo logging with two-phase locking.
    pub const UNDO: Engine = Engine(Kind::Lib(EngineId::Undo));
    /// Baseline: the multi-version strawman.
    pub const MVCC: Engine = Engine(Kind::Lib(EngineId::Mvcc));
    /// Peer: PMDK's libpmemobj (only where the build found it).
    pub const PMDK: Engine = Engine(Kind::Lib(EngineId::Pmdk));
    /// Pisces' concurrency control without persistence (the upper bound).
    pub const VOLATILE: Engine = Engine(Kind::Lib(EngineId::Volatile));
    /// SP3: serializable OCC whose versions are visible before they persist.
    pub const SP3: Engine = Engine(Kind::Lib(EngineId::Sp3));
    /// Reference: the containers with no transactional instrumentation.
    pub const BARE: Engine = Engine(Kind::Lib(EngineId::Bare));
    /// Peer: the redb key-value store.
    pub const REDB: Engine = Engine(Kind::Peer(Peer::Redb));
    /// Peer: LMDB through heed.
    pub const LMDB: Engine = Engine(Kind::Peer(Peer::Lmdb));
    /// Peer: the canopydb key-value store.
    pub const CANOPYDB: Engine = Engine(Kind::Peer(Peer::Canopy));
    /// SPHT: STM on a working snapshot, global durability marker, linked replay.
    pub const SPHT: Engine = Engine(Kind::Lib(EngineId::Spht));

    /// Every engine: the library's (also those not in this build), then the peers.
    pub fn all() -> Vec<Engine> {
        let lib = EngineId::ALL.iter().copied().map(|e| Engine(Kind::Lib(e)));
        lib.chain(Engine::peers()).collect()
    }

    /// The library's engines of this build, in benchmark order: the default of
    /// `--engines` (the peers run when named).
    pub fn available() -> Vec<Engine> {
        EngineId::ALL
            .iter()
            .map(|&e| Engine(Kind::Lib(e)))
            .filter(|e| e.in_build())
            .collect()
    }

    /// The default of `--engines` in a `--dir` run (durable commits on a file system):
    /// the durable engines of the library in this build that flush through the pool's
    /// medium, then the peers. pmdk runs there when named: libpmemobj keeps its own
    /// file, which the harness cannot preload without a sync per persist (minutes for
    /// the hash table's preload).
    pub fn disk_defaults() -> Vec<Engine> {
        Engine::available()
            .into_iter()
            .filter(|e| e.persists() && e.flushes_through_medium())
            .chain(Engine::peers())
            .collect()
    }

    /// The peers, in benchmark order.
    pub fn peers() -> impl Iterator<Item = Engine> {
        Peer::ALL.iter().map(|&p| Engine(Kind::Peer(p)))
    }

    /// The peer, if this engine is one.
    pub fn peer(self) -> Option<Peer> {
        match self.0 {
            Kind::Peer(p) => Some(p),
            Kind::Lib(_) => None,
        }
    }

    /// True if this build has the engine (`pmdk` needs libpmemobj at build time; the
    /// peers are always built).
    pub fn in_build(self) -> bool {
        match self.0 {
            Kind::Lib(e) => e.available(),
            Kind::Peer(_) => true,
        }
    }

    /// Why an engine of the library is not in this build, if one is not.
    pub fn missing_note() -> Option<String> {
        (!Engine::PMDK.in_build()).then(|| format!("pmdk skipped: {PMDK_MISSING}"))
    }

    /// The engine's stable name (`pisces`, `undo`, ..., `redb`, `lmdb`, `canopydb`).
    pub fn name(self) -> &'static str {
        match self.0 {
            Kind::Lib(e) => e.name(),
            Kind::Peer(p) => p.name(),
        }
    }

    /// Parse an `--engines` item: a known engine that this build has.
    pub fn parse(s: &str) -> Result<Engine, String> {
        let s = s.trim();
        let e = Engine::all()
            .into_iter()
            .find(|e| e.name() == s)
            .ok_or_else(|| {
                let known: Vec<&str> = Engine::all().iter().map(|e| e.name()).collect();
                format!("unknown engine `{s}` (known engines: {})", known.join(", "))
            })?;
        if !e.in_build() {
            return Err(PMDK_MISSING.into());
        }
        Ok(e)
    }

    /// True for the in-house baselines Pisces' throughput target names: `undo`, `mvcc`
    /// and `pmdk` (where the build has it). The paper engines (`sp3`, `spht`,
    /// `timestone`) are durable too but are compared with Pisces separately, as
    /// information ([`Engine::is_paper_engine`]); the non-durable `volatile` and `bare`
    /// are references, the peers key-value stores with their own durability.
    pub fn is_baseline(self) -> bool {
        matches!(self, Engine::UNDO | Engine::MVCC | Engine::PMDK)
    }

    /// True for the engines of the other PTM papers (`sp3`, `spht`, `timestone`):
    /// durable, reported beside the target as informational ratios, not part of it.
    pub fn is_paper_engine(self) -> bool {
        matches!(
            self.id(),
            Some(EngineId::Sp3 | EngineId::Spht | EngineId::Timestone)
        )
    }

    /// False for an engine that never flushes (volatile, bare): the emulated NVM
    /// latency cannot change it.
    pub fn persists(self) -> bool {
        match self.0 {
            Kind::Lib(e) => e.is_durable(),
            Kind::Peer(_) => true,
        }
    }

    /// False for an engine that flushes by itself rather than through the pool's
    /// medium (pmdk, and the peers with their fsync): no NVM latency can be emulated
    /// for it, and the medium's flush, fence and log counters do not see its work.
    pub fn flushes_through_medium(self) -> bool {
        match self.0 {
            Kind::Lib(e) => !e.has_own_pool_format(),
            Kind::Peer(_) => false,
        }
    }

    /// True if the engine can run data set `data`: the library's engines run all of
    /// them, the peers (key-value stores of byte strings) the key-value ones.
    pub fn runs(self, data: DataKind) -> bool {
        self.peer().is_none() || Peer::runs(data)
    }

    /// The library engine's id, None for a peer.
    pub fn id(self) -> Option<EngineId> {
        match self.0 {
            Kind::Lib(e) => Some(e),
            Kind::Peer(_) => None,
        }
    }

    /// For the `recovery` workload: the `log_bytes_per_thread` with which a thread can
    /// append `fill` bytes of log records without the engine truncating its log by
    /// itself (a checkpoint that writes home and retires), or why the engine cannot
    /// leave that much log to a crash.
    pub fn log_size_for(self, fill: usize) -> Result<usize, &'static str> {
        let Some(id) = self.id() else {
            return Err("a key-value store, not a PTM with a log");
        };
        match id {
            // A commit starts a checkpoint once the log is more than half full: twice
            // the fill, plus room for the record that crosses the fill mark.
            EngineId::Sp3 => Ok((2 * fill + (2 << 20)).next_multiple_of(1 << 20)),
            EngineId::Pisces => Err("it writes back and truncates its log at every group \
                 commit (8 transactions), so a crash leaves at most a batch to replay"),
            EngineId::Undo | EngineId::Pmdk => {
                Err("undo logging: its log is truncated at every commit")
            }
            EngineId::Mvcc => Err("it writes every commit home before it returns, so its \
                 log is recycled as it goes"),
            EngineId::Spht => Err("its replayer truncates the log while it runs (the \
                 `replay` workload measures its replay, with the replayer held)"),
            EngineId::Timestone => Err("its checkpoints start when an operation log fills \
                 or the dirty bytes pass `checkpoint_pct` of its checkpoint-log budget; \
                 not sized for this workload yet"),
            EngineId::Volatile | EngineId::Bare => Err("it keeps no log (not durable)"),
            _ => Err("this workload does not know how to leave its log to a crash"),
        }
    }

    /// A pool configuration for this engine with default options: `size` bytes on
    /// plain emulated PM, `max_threads` thread slots (`engine` None for a peer, which
    /// has no pool).
    pub fn config(self, size: u64, max_threads: usize) -> Config {
        Config::default()
            .size(size)
            .engine(self.id())
            .max_threads(max_threads)
    }
}

/// The labels in reports of the engine configurations the plan measures besides the
/// engines with their default options (which are labelled by [`Engine::name`]).
pub mod labels {
    /// Pisces with flush whole (no flush-diff, no group commit): the breakdown's first
    /// step.
    pub const PISCES_WHOLE: &str = "pisces-whole";
    /// Pisces with flush-diff, no group commit: the breakdown's second step.
    pub const PISCES_DIFF: &str = "pisces-diff";
    /// SP3 without early visibility (`hot`).
    pub const SP3_NO_EV: &str = "sp3-no-ev";
    /// spht with NV-HTM's per-thread commit markers (`markers`).
    pub const SPHT_NVHTM: &str = "spht-nvhtm";
}

/// The label suffix of a configuration measured under eADR ([`EngineSpec::under`]).
pub const EADR_SUFFIX: &str = "@eadr";

/// The label suffix of a `--dir` run's read-only control measured on the DRAM medium
/// (`<engine>@dram`), which [`crate::report::medium_table`] pairs with the file medium's
/// row.
pub const DRAM_SUFFIX: &str = "@dram";

/// An engine configuration under test, with its label in reports.
#[derive(Clone, Debug)]
pub struct EngineSpec {
    /// Label in tables, CSV and plots (`pisces`, `undo`, `pisces-whole`, ...).
    pub label: String,
    /// The engine.
    pub engine: Engine,
    /// Its options.
    options: EngineOptions,
    /// The persistence domain its pool runs under (the DRAM medium emulates both).
    pub domain: PersistenceDomain,
}

impl EngineSpec {
    /// An engine with its default options, labelled by its name.
    pub fn plain(engine: Engine) -> Self {
        EngineSpec {
            label: engine.name().to_string(),
            engine,
            options: EngineOptions::default(),
            domain: PersistenceDomain::Adr,
        }
    }

    /// An engine with `options`, labelled `label`.
    pub fn with_options(engine: Engine, label: String, options: EngineOptions) -> Self {
        EngineSpec {
            label,
            engine,
            options,
            domain: PersistenceDomain::Adr,
        }
    }

    /// The same configuration under `domain`: labelled `<label>@eadr` under eADR (the
    /// label unchanged under ADR), so the reports' tables show it as a configuration
    /// of its own and [`crate::report::domain_table`] pairs the two.
    pub fn under(&self, domain: PersistenceDomain) -> Self {
        let label = match domain {
            PersistenceDomain::Eadr => format!("{}{EADR_SUFFIX}", self.label),
            _ => self.label.clone(),
        };
        EngineSpec {
            label,
            domain,
            ..self.clone()
        }
    }

    /// The same configuration under another label.
    pub fn relabelled(&self, label: String) -> Self {
        EngineSpec {
            label,
            ..self.clone()
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
            domain: PersistenceDomain::Adr,
        };
        [
            pisces(labels::PISCES_WHOLE, false),
            pisces(labels::PISCES_DIFF, true),
            EngineSpec::plain(Engine::PISCES),
        ]
    }

    /// The SP3 configurations of the conflict-heavy `hot` workload: the paper's early
    /// visibility (versions readable, locks released, before the log record persists)
    /// and the ablation that unlocks only after persisting.
    pub fn sp3_visibility() -> [EngineSpec; 2] {
        [
            EngineSpec::plain(Engine::SP3),
            EngineSpec {
                label: labels::SP3_NO_EV.into(),
                engine: Engine::SP3,
                options: pisces::EngineOptions::new().set("early_visibility", false),
                domain: PersistenceDomain::Adr,
            },
        ]
    }

    /// The marker ablation of the spht engine: NV-HTM's sequential per-thread commit
    /// markers (`marker=nvhtm`, the baseline of the SPHT paper's Fig. 1a), then SPHT's
    /// global marker with skipCAS (the engine's default).
    pub fn markers() -> [EngineSpec; 2] {
        [
            EngineSpec {
                label: labels::SPHT_NVHTM.into(),
                engine: Engine::SPHT,
                options: EngineOptions::new().set("marker", "nvhtm"),
                domain: PersistenceDomain::Adr,
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
        Config::default()
            .size(size)
            .medium(medium)
            // The measurement names its medium: the DRAM medium on a disk is how the
            // preload of a disk run skips msync (the file is fsynced after it).
            .allow_volatile_medium(matches!(medium, MediumKind::Dram { .. }))
            .engine(self.engine.id())
            .max_threads(max_threads)
            .log_bytes_per_thread(log_bytes_per_thread)
            .engine_options(self.options.clone())
            .persistence_domain(
                (self.domain == PersistenceDomain::Eadr).then_some(PersistenceDomain::Eadr),
            )
    }
}

/// spht's replay modes (`replay=`), in the order the `replay` workload measures them:
/// how recovery finds the logged transactions in timestamp order (following the
/// forward links, merging the per-thread logs by timestamp, following the backward
/// links).
pub const SPHT_REPLAY_MODES: [&str; 3] = ["forward", "scan", "backward"];

/// spht's options for one replay of the `replay` workload: the mode (one of
/// [`SPHT_REPLAY_MODES`]), the duplicate filter, and the replay threads.
pub fn spht_replay_options(mode: &str, dup_filter: bool, replayers: usize) -> EngineOptions {
    EngineOptions::new()
        .set("replay", mode)
        .set("dup_filter", if dup_filter { "on" } else { "off" })
        .set("replayers", replayers)
}

/// spht with its background replayer held (the `replay` workload's fill): every
/// durable transaction stays in the logs until the next open replays it.
pub fn spht_replayer_held() -> EngineOptions {
    EngineOptions::new().set("replay_hold", "true")
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
    fn peers_are_durable_key_value_engines_outside_the_library() {
        assert_eq!(Engine::parse("redb"), Ok(Engine::REDB));
        assert_eq!(Engine::parse(" lmdb"), Ok(Engine::LMDB));
        let all: Vec<_> = Engine::all().iter().map(|e| e.name()).collect();
        assert_eq!(Engine::parse("canopydb"), Ok(Engine::CANOPYDB));
        assert!(
            all.ends_with(&["bare", "redb", "lmdb", "canopydb"]),
            "{all:?}"
        );
        for e in [Engine::REDB, Engine::LMDB, Engine::CANOPYDB] {
            assert!(e.in_build() && e.persists(), "{e:?}");
            // Not an in-house baseline of the targets; no medium to emulate latency on.
            assert!(!e.is_baseline() && !e.flushes_through_medium(), "{e:?}");
            assert!(!Engine::available().contains(&e), "not a default");
            assert!(e.peer().is_some());
            assert!(e.config(1 << 20, 1).engine.is_none());
            for (data, runs) in [
                (DataKind::Hash, true),
                (DataKind::Set(10), true),
                (DataKind::Ycsb(10), true),
                (DataKind::StrMap(10), true),
                (DataKind::Bulk(10), true),
                (DataKind::Tree, false),
                (DataKind::TreeSet(10), false),
                (DataKind::Tpcc, false),
                (DataKind::Tatp, false),
            ] {
                assert_eq!(e.runs(data), runs, "{e:?} {data:?}");
                assert!(Engine::PISCES.runs(data));
            }
        }
        assert!(Engine::UNDO.is_baseline() && !Engine::BARE.is_baseline());
    }

    #[test]
    fn the_target_baselines_are_undo_mvcc_and_pmdk_only() {
        let names = |f: fn(Engine) -> bool| -> Vec<&str> {
            Engine::all()
                .into_iter()
                .filter(|&e| f(e))
                .map(|e| e.name())
                .collect()
        };
        assert_eq!(names(Engine::is_baseline), ["undo", "mvcc", "pmdk"]);
        assert_eq!(names(Engine::is_paper_engine), ["sp3", "spht", "timestone"]);
        // Every durable library engine other than pisces is one or the other.
        for e in Engine::all() {
            let durable_other = e != Engine::PISCES && e.peer().is_none() && e.persists();
            assert_eq!(
                durable_other,
                e.is_baseline() || e.is_paper_engine(),
                "{e:?}"
            );
        }
        assert!(Engine::PISCES.peer().is_none());
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
        let v = EngineSpec::sp3_visibility();
        assert_eq!(
            [v[0].label.as_str(), v[1].label.as_str()],
            ["sp3", "sp3-no-ev"]
        );
        assert!(v[0].options.is_empty());
        let c = v[1].config(1 << 30, MediumKind::DRAM, 3, 4 << 20);
        assert_eq!(c.engine_options.get("early_visibility"), Some("false"));
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
