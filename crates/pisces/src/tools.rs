//! Internals for the workspace's own tools: the verification suites and the crash
//! simulator (`pisces-verify`), the benchmark harness (`pisces-bench`) and the
//! `pisces` command (`pisces-cli`). Compiled only with the `tools` feature, which those
//! crates enable; not part of the library's API and not covered by its compatibility
//! promise.
//!
//! * [`check`]: the offline checks behind `pisces check` / `pisces info`, and the redo
//!   records' framing constants the damage tests aim at;
//! * [`layout`], [`superblock`], [`ROOT_SLOT_OFFSET`]: where a pool keeps what;
//! * [`counters`], [`dram`], [`flush`], [`reserve`], [`create_file`],
//!   [`create_file_growable`], [`open_file`]: the media's instrumentation, the
//!   emulated-latency controls, the flush instructions, address-space reservations
//!   (the crash simulator maps its images with them) and the pool-file factory;
//! * [`shared_counts`]: the engines' writes to words several threads write (counted
//!   only with the `shared-counts` feature);
//! * [`containers`]: the containers' on-media constants.

/// Offline checks of a pool file (`pisces check`, `pisces info`).
pub mod check {
    pub use crate::check::*;
    pub use crate::engine::Inspection;
}

/// The pool's layout: superblock copies, engine area, logs, heap.
pub mod layout {
    pub use crate::heap::layout::*;
}

/// The superblock: the pool's format version, geometry, engine and root record.
pub mod superblock {
    pub use crate::heap::superblock::*;
}

pub use crate::heap::ROOT_SLOT_OFFSET;

/// Per-thread counters of flushed lines, fences and bytes written.
pub mod counters {
    pub use crate::medium::counters::*;
}

/// Counts of the writes to words several threads write (zero unless the crate is
/// built with the `shared-counts` feature).
pub mod shared_counts {
    pub use crate::engine::kit::shared_counts::{
        end_unit, this_thread, totals, SharedCounts, ENABLED,
    };
}

/// The DRAM medium and its emulated-latency controls.
pub mod dram {
    pub use crate::medium::dram::*;
}

/// The flush and fence instructions.
pub mod flush {
    pub use crate::medium::flush::*;
}

/// Address-space reservations that a growable mapping extends in place.
pub mod reserve {
    pub use crate::medium::reserve::*;
}

pub use crate::medium::open::{create_file, create_file_growable, open_file};

/// The containers' on-media constants.
pub mod containers {
    pub use crate::containers::btree::{INNER_TAG, LEAF_TAG, MAGIC as BTREE_MAGIC};
    pub use crate::containers::hashmap::{CHUNK, MAGIC as HASHMAP_MAGIC, MAX_BUCKETS};
}
