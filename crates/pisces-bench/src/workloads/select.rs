//! The workloads of `pisces-bench`: what `--workloads` selects ([`WorkloadKind`]),
//! their names in reports (with the latency sweep's control, [`LATENCY_CONTROL`], and
//! the label suffix of the measurements through the C interface, [`C_SUFFIX`]), the
//! default lists and the fixed mixes of some of them.
//!
//! A workload is a way of measuring (which engines, mixes, latencies and threads, see
//! [`crate::cli::plan`]) on one of the data sets of [`crate::workloads::kinds`].

use clap::ValueEnum;

/// A workload of `pisces-bench`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, ValueEnum)]
pub enum WorkloadKind {
    /// Hash table (10K buckets, 8-byte keys, 64-byte values), lookups and insert/remove.
    Hash,
    /// B+-tree (fanout 16, 256-byte nodes), lookups and inserts/overwrites.
    Btree,
    /// Read-only latency percentiles vs emulated NVM write latency (hash table, every
    /// thread mixing lookups and updates, as in the paper's Fig 9c).
    Latency,
    /// The same sweep with a dedicated reader: thread 0 only looks up, the other
    /// threads only update (not in the default list).
    LatencySplit,
    /// Pisces' optimisations one by one on the hash table: flush whole, flush-diff,
    /// flush-diff + group commit.
    Breakdown,
    /// TPC-C new-order, one warehouse per worker thread, fanout-32 B+-tree tables
    /// (scaled down; in `--full`, not in the quick default).
    Tpcc,
    /// TATP, fanout-32 B+-tree tables, the standard 80 % read-only mix (in `--full`,
    /// not in the quick default).
    Tatp,
    /// Hash set of u64 keys (the PTM peers' set benchmark): lookups, and remove + add
    /// back of a member in one transaction; one measurement per `--set-keys` size (in the
    /// quick default in a reduced form, not in `--full`'s).
    Set,
    /// B+-tree set of u64 keys drawn from twice as many: the same operations; one
    /// measurement per `--tree-set-keys` size (not in the default lists).
    TreeSet,
    /// Conflict-heavy: every transaction reads 4 and updates 2 of 16 hot counters, on
    /// 2+ threads, over the latency sweep; sp3 also runs without early visibility
    /// (`sp3-no-ev`) (not in the default lists).
    Hot,
    /// Recovery time and log replay throughput: fill the logs without checkpointing,
    /// crash, time the reopen with 1 and 2 recovery threads (slow; not in the default
    /// lists).
    Recovery,
    /// The hash table's operations issued from C through the C interface
    /// (`pisces_run`), each engine measured beside the same operations in Rust (not in
    /// the default lists).
    Capi,
    /// YCSB-style key-value mix: 100K records, 8-byte keys, 64-byte values, zipfian
    /// requests (0.99); A = 50 % updates, B = 5 %, C = read-only (not in the default
    /// lists).
    Ycsb,
    /// String-keyed map: 100K records, byte-string keys (`user` + 10 digits) and values
    /// of 16..=512 bytes, zipfian requests as ycsb's; a read fetches a value, an update
    /// replaces one whole (50 % updates unless --update-pct) (not in the default lists).
    Strmap,
    /// SPHT's durability marker against NV-HTM's sequential per-thread commit markers
    /// (the spht engine's `marker` ablation) on the hash table, at 0 and 1000 ns
    /// emulated latency (not in the default lists).
    Markers,
    /// spht's log replay throughput: logs of `--replay-log-mib` left to a crash with
    /// the replayer held, then the replay (recovery on open) timed per replay mode,
    /// duplicate filter and thread count (slow; not in the default lists).
    Replay,
    /// Bulk load: one writer inserting 10 keys per transaction into an empty table of
    /// 100K keys (8-byte keys, 64-byte values), every transaction an update (in the
    /// --dir default, else only when named).
    Bulk,
}

/// `update_pct` of TPC-C: every new-order is read-write.
pub const TPCC_UPDATE_PCT: u32 = 100;
/// `update_pct` of TATP: its standard mix has 20 % read-write transactions.
pub const TATP_UPDATE_PCT: u32 = 20;
/// `update_pct` of `hot`: every transaction updates.
pub const HOT_UPDATE_PCT: u32 = 100;
/// Default update mixes of `set` and `tree-set` (the peers' 1, 10 and 100 %).
pub const SET_MIXES: [u32; 3] = [1, 10, 100];

/// The workloads of `--quick` (the main job) when `--workloads` is not given. The
/// sets run there in a reduced form (the engines, threads and mixes of
/// [`crate::cli::args`]'s `MAIN_SET_*`) so that the main job's time does not grow.
pub const QUICK: [WorkloadKind; 6] = [
    WorkloadKind::Hash,
    WorkloadKind::Btree,
    WorkloadKind::Latency,
    WorkloadKind::Breakdown,
    WorkloadKind::Set,
    WorkloadKind::TreeSet,
];
/// The workloads of `--full` when `--workloads` is not given.
pub const FULL: [WorkloadKind; 6] = [
    WorkloadKind::Hash,
    WorkloadKind::Btree,
    WorkloadKind::Latency,
    WorkloadKind::Breakdown,
    WorkloadKind::Tpcc,
    WorkloadKind::Tatp,
];

/// The workloads of a `--dir` run (durable commits on a file system) when
/// `--workloads` is not given: the hash table and YCSB's A mix, and the bulk load.
pub const DISK: [WorkloadKind; 3] = [WorkloadKind::Hash, WorkloadKind::Ycsb, WorkloadKind::Bulk];
/// The hash table's update mix of a `--dir` run unless `--update-pct` is given.
pub const DISK_HASH_MIXES: [u32; 1] = [20];
/// The YCSB mix of a `--dir` run unless `--update-pct` is given: A (50 % updates).
pub const DISK_YCSB_MIXES: [u32; 1] = [50];

/// Suffix of the label of an engine measured through the C interface.
pub const C_SUFFIX: &str = "-c";

/// The workload name of the latency sweep's control: the `latency` mix at the sweep's
/// largest emulated NVM latency with every wait paid after the transaction instead of
/// inside it ([`Spec::waits_outside`](crate::measure::Spec::waits_outside)). Its
/// lookups are spaced by the same waits as the sweep's, and no engine holds anything
/// during them: what the sweep's read-only tail has beyond the control's is the
/// engine's doing; what the control has beyond 0 ns is the time between a thread's
/// lookups.
pub const LATENCY_CONTROL: &str = "latency-waits-outside";

impl WorkloadKind {
    /// Name on the command line and, for workloads of one size, in reports.
    pub fn name(self) -> &'static str {
        match self {
            WorkloadKind::Hash => "hash",
            WorkloadKind::Btree => "btree",
            WorkloadKind::Latency => "latency",
            WorkloadKind::LatencySplit => "latency-split",
            WorkloadKind::Breakdown => "breakdown",
            WorkloadKind::Tpcc => "tpcc",
            WorkloadKind::Tatp => "tatp",
            WorkloadKind::Set => "set",
            WorkloadKind::TreeSet => "tree-set",
            WorkloadKind::Hot => "hot",
            WorkloadKind::Recovery => "recovery",
            WorkloadKind::Capi => "capi",
            WorkloadKind::Ycsb => "ycsb",
            WorkloadKind::Strmap => "strmap",
            WorkloadKind::Markers => "markers",
            WorkloadKind::Replay => "replay",
            WorkloadKind::Bulk => "bulk",
        }
    }

    /// Name in reports of this workload run on `keys` keys (`set-1k`, `tree-set-1m`):
    /// the set workloads are measured at several sizes, each its own table and plot.
    pub fn sized_name(self, keys: usize) -> String {
        let n = match keys {
            n if n >= 1_000_000 && n % 1_000_000 == 0 => format!("{}m", n / 1_000_000),
            n if n >= 1000 && n % 1000 == 0 => format!("{}k", n / 1000),
            n => n.to_string(),
        };
        format!("{}-{n}", self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_match_the_command_line_values() {
        for w in WorkloadKind::value_variants() {
            let v = w.to_possible_value().unwrap();
            assert_eq!(v.get_name(), w.name());
        }
        assert_eq!(WorkloadKind::Set.sized_name(1000), "set-1k");
        assert_eq!(WorkloadKind::TreeSet.sized_name(1_000_000), "tree-set-1m");
        assert_eq!(WorkloadKind::Set.sized_name(1500), "set-1500");
        assert!(QUICK.contains(&WorkloadKind::Set) && QUICK.contains(&WorkloadKind::TreeSet));
        assert!(!FULL.contains(&WorkloadKind::Set) && !FULL.contains(&WorkloadKind::TreeSet));
    }
}
