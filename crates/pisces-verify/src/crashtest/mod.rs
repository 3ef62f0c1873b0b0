//! Crash-state exploration: run a workload on the crash simulator, lose power at
//! chosen fences, recover every crash image as a fresh process would, and check the
//! recovered state with an oracle that knows nothing of the engine.
//!
//! This is the library behind `pisces crashtest` and the crash tests. The pieces:
//! * [`Workload`] ([`workload`]): deterministic per-thread operations and an oracle.
//!   Five are run by `all` ([`workloads`]): `bank` (transfers; total conserved,
//!   exact acknowledged prefix), `list` (sorted-list insert/delete), `alloc`
//!   (allocation and free churn of 8 B to 28 KB objects, large runs included),
//!   `hashmap` and `btree` (upserts and removes on the public
//!   [containers](pisces::HashMap) through the [`KvStore`] trait); two more
//!   ([`EXTRA_WORKLOADS`]) run the same operations on small engine-test structures.
//!   Each checks that the allocator's persistent bitmaps hold exactly the reachable
//!   objects ([`oracle`]).
//! * [`Settings`] and [`Plan`] ([`plan`]): which fences to crash at (every fence in
//!   [`Mode::Exhaustive`], random ones otherwise), with which adversary, how many
//!   images per crash, which states crash again during recovery, how the operations'
//!   durability is awaited. Every state has an index from which all its choices follow.
//! * [`machine`]: boot a simulated machine from an image, run until the crash,
//!   recover (possibly crashing during recovery and recovering again).
//! * [`state`]: judge one crash image — recover, check, run a few more operations on
//!   the recovered pool, check again.
//! * [`campaign`]: rounds in parallel, a [`Report`] of states checked and violations
//!   (with crash images of the first few), and [`reproduce`] for one state.
//!
//! The oracle's rule: after a crash, each thread's operations are present as a prefix,
//! none in part, and the prefix holds every *acknowledged* operation. By default an
//! operation commits with [`Durability::OnReturn`](pisces::Durability::OnReturn) and is
//! acknowledged when its commit returned before the power failed; at most one more (the
//! one in flight) may be present. With [`Settings::deferred`] = N, operations commit
//! with [`Durability::Deferred`](pisces::Durability::Deferred) and each thread calls
//! `wait_durable` after every N operations and after its last: an operation is
//! acknowledged only when such a wait, started after its commit returned, returned
//! before the power failed, and any prefix of those committed since (and of the one in
//! flight) may be present. The structures' shapes and the allocator must be sound.
//!
//! ```
//! use pisces_verify::crashtest::{run_campaign, workload_by_name, Mode, Settings};
//! let w = workload_by_name("bank").unwrap();
//! let settings = Settings {
//!     ops: 6,
//!     mode: Mode::Random { states: 8 },
//!     ..Settings::default()
//! };
//! let report = run_campaign(w.as_ref(), &settings, &|_, _| {});
//! assert!(report.states >= 8);
//! assert_eq!(report.violation_count, 0, "{:?}", report.violations);
//! ```

pub mod alloc;
pub mod bank;
pub mod bucket_map;
pub mod campaign;
pub mod kv;
pub mod list;
pub mod machine;
pub mod oracle;
pub mod plan;
pub mod public_maps;
pub mod rng;
pub mod sorted_tree;
pub mod state;
pub mod string_map;
#[cfg(test)]
mod tests;
pub mod workload;

pub use campaign::{reproduce, run_campaign, run_plan, Report, Violation};
pub use kv::{KvStore, KvWorkload, Scan};
pub use plan::{Mode, Plan, Settings};
pub use workload::{Bounds, Shape, Workload, MAX_THREADS};

/// Names of the workloads `all` runs, in order.
pub const WORKLOADS: [&str; 5] = ["bank", "list", "alloc", "hashmap", "btree"];

/// More workloads, selectable by name: the engine-test structures that stood in for
/// the public containers before those existed (no container code involved, so a
/// violation they show is the engine's).
pub const EXTRA_WORKLOADS: [&str; 3] = ["bucket-map", "sorted-tree", "strmap"];

/// The workload called `name`, if there is one (see [`WORKLOADS`] and
/// [`EXTRA_WORKLOADS`]).
pub fn workload_by_name(name: &str) -> Option<Box<dyn Workload>> {
    Some(match name {
        "bank" => Box::new(bank::Bank),
        "list" => Box::new(list::List),
        "alloc" => Box::new(alloc::AllocChurn),
        "hashmap" => Box::new(KvWorkload::new(
            "hashmap",
            "upsert/remove on the public HashMap (grouped layout, growing from one group): entries = acknowledged ops (plus any in doubt), bitmaps = its objects",
            public_maps::PublicHashMap,
        )),
        "btree" => Box::new(KvWorkload::new(
            "btree",
            "upsert/remove on the public BTreeMap (fanout 16): tree invariants, entries = acknowledged ops (plus any in doubt), bitmaps = its nodes",
            public_maps::PublicBTree,
        )),
        "strmap" => Box::new(KvWorkload::new(
            "strmap",
            "upsert/remove on a BTreeMap<PString, PBytes> (fanout 4): string keys and values of several sizes decode, tree invariants, entries = acknowledged ops (plus any in doubt), bitmaps = nodes, keys, separators and values",
            string_map::StringMap,
        )),
        "bucket-map" => Box::new(KvWorkload::new(
            "bucket-map",
            "upsert/remove on an engine-test hash map (buckets of chained nodes): shape valid, keys = acknowledged ops (plus any in doubt), bitmaps = nodes",
            bucket_map::BucketMap,
        )),
        "sorted-tree" => Box::new(KvWorkload::new(
            "sorted-tree",
            "upsert/remove on an engine-test ordered map (directory of sorted leaves, split and merge): shape valid, keys = acknowledged ops (plus any in doubt), bitmaps = nodes",
            sorted_tree::SortedTree,
        )),
        _ => return None,
    })
}

/// The workloads `all` runs.
pub fn workloads() -> Vec<Box<dyn Workload>> {
    WORKLOADS
        .iter()
        .filter_map(|n| workload_by_name(n))
        .collect()
}
