//! The `mvcc` baseline: the multi-version strawman of the Pisces paper (§2.2), the
//! design Pisces' dual-version concurrency control improves on (Fig. 9b: its reads are
//! about 2× slower than Pisces').
//!
//! # The algorithm
//! * Every object has a list of versions, newest first, each stamped with the commit
//!   timestamp of the transaction that wrote it ([`version`]). The lists live in DRAM
//!   and are found through an index from the object's offset (the kit's
//!   [`crate::engine::kit::versions::version_index`]): the read
//!   indirection the paper measures.
//! * A transaction takes its start timestamp S from a global clock. A read looks the
//!   object up, and walks its list to the newest version with `ts ≤ S`.
//! * Writes go to private DRAM copies (the write set). Commit ([`thread`]): lock every
//!   written object, abort if one of them was committed after S (first committer
//!   wins), take the commit timestamp C, persist the redo record stamped with C
//!   (flush + fence), publish the copies as versions with timestamp C, write the
//!   objects home in persistent memory (flush + fence), release the locks.
//! * A reader that finds an object locked waits until it is released: the committer
//!   may publish a version with `C ≤ S`. This is the blocking the paper criticises —
//!   a read can wait for two persistence fences of another thread — and it is kept.
//!
//! # Invariants
//! 1. Published versions are immutable; a pointer returned by `read` is a version
//!    visible to the transaction, which is not freed before the transaction ends
//!    (versions are reclaimed only below the newest version every running snapshot
//!    can see, see [`version`]), so it stays valid and unchanged as the
//!    [`crate::engine`] contract requires. Own writes are read from the private copy.
//! 2. Home (the persistent copy) always equals the head of the object's list outside a
//!    commit, and is written only under the object's lock. Readers never read home,
//!    except to create the first version of an object no one has committed to in this
//!    run (then nobody writes home, see [`crate::engine::kit::versions::version_index`]).
//! 3. A log record is durable before its versions are published, so no transaction
//!    can see (and build on) a transaction that a crash would lose.
//! 4. Recovery sees only home and the logs.
//!
//! # Persistence: reused from Pisces
//! The redo log ([`crate::engine::kit::log::redo_log`]: per-thread rings of checksummed
//! records), its recycling watermark, and recovery ([`crate::engine::kit::recovery::replay`]:
//! replay valid records in persistTS order) are Pisces', from the kit: the engine has
//! no log or recovery of its own. A record's persistTS is the
//! commit timestamp: two records that write one object were committed in lock order,
//! so in timestamp order. The pool format is Pisces' (same log areas, watermark word).
//! On the file medium the home writes of step 7 are synced lazily, as Pisces' are
//! (the kit's [`lazy_home`](crate::engine::kit::log::lazy_home); [`shared`], *Lazy
//! home sync*): a commit then costs one device sync, its record's.
//!
//! # Departures from the paper, and why
//! * Records hold whole objects, never changed words only (the strawman has no
//!   flush-diff), and every update transaction writes home itself (no group commit):
//!   [`crate::EngineOptions`] do not apply.
//! * Locks are taken at commit with no waiting: a taken lock aborts the committer and
//!   `run` retries, as in the `undo` baseline. The paper does not say how a committer
//!   waits; waiting in commit while holding locks would make readers wait longer.
//! * The ww check uses the timestamp of the object's last commit, which also counts
//!   frees (a free publishes no version), so a write and a free of one object conflict.
//! * A transaction that frees objects waits, after its commit, until no older snapshot
//!   runs before the blocks become reusable (Pisces' grace period, only for frees): a
//!   reused block must not be reallocated while a snapshot may still read it. The
//!   paper does not discuss memory reuse. Readers and other committers never wait
//!   for this.
//! * The first access to an object in a run copies its home bytes into DRAM as its
//!   version 0: readers never read persistent memory in this engine.

//!
//! # Under eADR
//! The medium's flush writes nothing back; both fences of an update stay: the redo
//! record's (streamed with non-temporal stores, which the persistent caches do not
//! hold, completed before the versions are published) and the home write's (drained
//! before the locks are released and the log space can be recycled). Flush-diff, which
//! the engine keeps from Pisces, saves logged bytes under both domains and written-back
//! lines only under ADR.
//!
//! # Parts
//! * [`shared`]: pool-wide state (clock, slots, version index, watermark;
//!   [`shared::MvccEngine`]);
//! * [`thread`]: one thread's transactions and the strawman's commit;
//! * [`version`]: what a version's stamp means on an `mvcc` chain;
//! * the log and recovery are the kit's (above); no options (the engine refuses any).

mod shared;
mod thread;
mod version;

#[cfg(test)]
mod tests;

use crate::engine::kit::recovery::replay;
use crate::engine::{EngineDef, EngineOptions, Inspection, OpenCtx};
use crate::heap::Heap;
use crate::tx_options::Isolation;
use crate::Result;
use shared::MvccEngine;
use std::sync::Arc;
use thread::MvccThread;

/// Registry entry of the `mvcc` baseline.
pub(crate) struct Mvcc;

impl EngineDef for Mvcc {
    const ID: u32 = 3;
    const SHARING_REFUSED: Option<&'static str> = Some(
        "newer versions live only in the memory of the process that committed them, and readers do not read home",
    );
    const NAME: &'static str = "mvcc";
    const SUMMARY: &'static str =
        "baseline: the Pisces paper's multi-version strawman (version chains, blocking reads)";
    const ISOLATION: Isolation = Isolation::Snapshot;
    #[cfg(feature = "mutation")]
    const MUTATIONS: &'static [&'static crate::mutation::MutationPoint] =
        &[&crate::engine::kit::log::lazy_home::HOME_SYNC_SKIPPED];
    type Engine = MvccEngine;
    type Thread = MvccThread;
    fn open(heap: Arc<Heap>, opts: &EngineOptions, _ctx: &OpenCtx) -> Result<MvccEngine> {
        opts.only(Self::NAME, &[])?;
        MvccEngine::open(heap)
    }
    fn inspect(heap: &Heap) -> Inspection {
        replay::inspect_redo_logs(heap)
    }
}
