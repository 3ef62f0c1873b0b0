//! The `pmdk` peer: PMDK's libpmemobj behind the engine trait, as its users run it.
//!
//! libpmemobj gives durability (undo-log transactions, its own pool file and
//! allocator) but no isolation: its users add locks. This engine does what such a user
//! would, with the same two-phase locking as the `undo` baseline, so that the peer is
//! measured on the same programs, containers and workloads as our engines:
//!
//! * **Pool.** `pmemobj_create` / `pmemobj_open` (layout `pisces-pmdk`); PMDK's
//!   recovery runs inside `pmemobj_open`. Object offsets (`PPtr`) are offsets in
//!   PMDK's pool, so a pointer is `pool base + offset`. Every object carries a 16-byte
//!   header before its payload whose first word is the payload length; the root slot
//!   lives in PMDK's root object.
//! * **Validation.** A pointer from the user is checked against a DRAM bitmap of
//!   object payload starts (one bit per 8 bytes, rebuilt at open by walking PMDK's
//!   object list), so a bad `PPtr` is an error, never a wild access. Bits are set when
//!   an object is allocated and cleared when its free commits — always while holding
//!   its lock, and for a free *before* PMDK can hand the block out again.
//! * **Isolation.** Strict two-phase locking with no-wait (see
//!   [`crate::engine::kit::cc::two_phase`]) on a DRAM table of striped reader-writer locks keyed
//!   by object offset. The locks are not in the objects: PMDK zeroes a reused block,
//!   which would wipe a lock a stale reader still holds. A lock taken on a pointer is
//!   re-validated afterwards, since the object may have been freed in between.
//! * **Durability.** A PMDK transaction is opened lazily by the first write, alloc or
//!   free (read-only transactions never enter libpmemobj): `pmemobj_tx_xadd_range_direct`
//!   snapshots the whole object before its first write (as the `undo` baseline does),
//!   allocations and frees go through `pmemobj_tx_xalloc` / `pmemobj_tx_xfree`, and
//!   commit is `pmemobj_tx_commit` + `pmemobj_tx_end`. The `NO_ABORT` flags keep a
//!   failing call from aborting behind our back; abort is `pmemobj_tx_abort`.
//! * **Threads.** A PMDK transaction belongs to the OS thread that began it: a
//!   transaction moved to another thread, or a second one begun on the same thread
//!   (nesting across pools or handles), is refused with an error.
//! * **Medium.** Like with like (DESIGN.md): on the emulated-DRAM medium kind the
//!   library runs with `PMEM_IS_PMEM_FORCE=1` (flushes with clwb/clflushopt, no msync);
//!   on the file kind without it (msync). libpmemobj reads that variable once per
//!   process, so the first pool opened decides and a later pool of the other kind is
//!   refused. It has no hook for emulated latency or bandwidth: those are refused too,
//!   and its flushes are not visible to our counters.
//!
//! The engine is built with the `pmdk` cargo feature (off by default) when the build
//! finds libpmemobj (Debian package `libpmemobj-dev`): `build.rs` then sets `cfg(pmdk)`
//! and the engine links the library. Otherwise the crate still builds, and opening a
//! `pmdk` pool fails with a message saying what to enable or install.
//!
//! # Under eADR
//! libpmemobj flushes by itself, out of the medium's sight, so the pool's persistence
//! domain does not reach it: the engine refuses `Config::persistence_domain(Eadr)`.
//! (libpmemobj has its own switch for persistent caches, `PMEM_NO_FLUSH=1`.)
//!
//! # Parts
//! * `ffi`: the libpmemobj functions and types the engine calls;
//! * `objects`: the DRAM side tables (object bitmap, lock stripes);
//! * `shared`: the open pool (`shared::PmdkEngine`), its creation and opening;
//! * `thread`: one thread's transactions;
//! * `absent`: the uninhabited states of a build without libpmemobj;
//! * no log and no recovery of its own (libpmemobj's undo log, recovered inside
//!   `pmemobj_open`), no options (the engine refuses any).

#[cfg(not(pmdk))]
mod absent;
#[cfg(pmdk)]
mod ffi;
#[cfg(pmdk)]
mod objects;
#[cfg(pmdk)]
mod shared;
#[cfg(pmdk)]
mod thread;

use crate::engine::{EngineDef, EngineOptions, OpenCtx, Storage};
use crate::heap::Heap;
use crate::tx_options::Isolation;
use crate::{Error, Result};
use std::path::Path;
use std::sync::Arc;

/// True if this build has the `pmdk` engine.
pub(crate) const AVAILABLE: bool = cfg!(pmdk);

/// Registry entry of the `pmdk` peer.
pub(crate) struct Pmdk;

#[cfg(pmdk)]
type PmdkEngine = shared::PmdkEngine;
#[cfg(pmdk)]
type PmdkThread = thread::PmdkThread;
#[cfg(not(pmdk))]
type PmdkEngine = absent::Absent;
#[cfg(not(pmdk))]
type PmdkThread = absent::Absent;

impl EngineDef for Pmdk {
    const ID: u32 = 5;
    const SHARING_REFUSED: Option<&'static str> =
        Some("libpmemobj keeps its own pool file and locks");
    const NAME: &'static str = "pmdk";
    const SUMMARY: &'static str =
        "peer: PMDK's libpmemobj through FFI (its own pool file, undo-log transactions, strict 2PL)";
    // Strict 2PL, as for `undo`.
    const ISOLATION: Isolation = Isolation::Linearizable;
    const STORAGE: Storage = Storage::OwnFile;
    const GROWTH_REFUSED: Option<&'static str> =
        Some("libpmemobj's pool file is not in this library's format and does not grow");
    type Engine = PmdkEngine;
    type Thread = PmdkThread;
    fn open(_heap: Arc<Heap>, _opts: &EngineOptions, _ctx: &OpenCtx) -> Result<PmdkEngine> {
        Err(Error::invalid_config(
            "the pmdk engine keeps its own pool file: use Pool::create / Pool::open with a path",
        ))
    }
    fn open_file(path: &Path, ctx: &OpenCtx, create: bool) -> Result<PmdkEngine> {
        ctx.options.only(Self::NAME, &[])?;
        #[cfg(pmdk)]
        {
            shared::PmdkEngine::start(path, ctx, create)
        }
        #[cfg(not(pmdk))]
        {
            let _ = (path, create);
            Err(Error::invalid_config(
                "this build has no pmdk engine: it needs the `pmdk` feature of the pisces \
                 crate and libpmemobj at build time (Debian package libpmemobj-dev)",
            ))
        }
    }
}
