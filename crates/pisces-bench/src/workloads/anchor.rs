//! How a data set is found again from its pool alone: the [`Anchor`], a record in the
//! pool's root object.
//!
//! A measurement with several processes ([`crate::measure::processes`]) builds and
//! preloads its data set in the harness's process, which then closes the pool; the
//! worker processes open the pool themselves and have nothing of that process's memory.
//! What a data set holds besides the pool's bytes is small: the handle of its container
//! (8 bytes, an offset in the pool) and a count (the hash table's key space, a set's
//! number of members). The harness writes both into the pool's root object as an
//! [`Anchor`] after the preload ([`Anchor::publish`]); a worker reads it back
//! ([`Anchor::find`]) and rebuilds its view of the data set from it
//! ([`crate::workloads::kinds::DataKind::attach`]): the hash table from the handle and
//! the key space; a set from the handle, its members read back from the container (one
//! read-only transaction) and checked against the count. A data set's operations that
//! are registered with a pool (the updates) are registered again by each process, as
//! for a reopened pool ([`crate::workloads::DataSet::reopened`]).
//!
//! Only the data sets that say where they are ([`crate::workloads::DataSet::anchor`]:
//! the hash table and the sets) can be measured with several processes.

use pisces::{Error, PPtr, Pod, Pool, Zeroable};

/// The first word of an [`Anchor`]: `PBENCHDS`.
pub const ANCHOR_MAGIC: u64 = u64::from_be_bytes(*b"PBENCHDS");

/// Where a data set is in its pool: the pool's root object (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
#[repr(C)]
pub struct Anchor {
    /// [`ANCHOR_MAGIC`] once published (a zeroed root is no anchor).
    pub magic: u64,
    /// Which data set: the operation id of its update (the hash table's
    /// [`crate::workloads::hash::UPDATE_OP`], a set container's `UPDATE_OP`).
    pub kind: u64,
    /// The container's handle (its 8 bytes: the offset of its header).
    pub handle: u64,
    /// The hash table's key space; a set's number of members.
    pub count: u64,
}

impl Anchor {
    /// The anchor of a data set of kind `kind` (its update's operation id) whose
    /// container has the handle `handle`.
    pub fn new(kind: u32, handle: u64, count: u64) -> Anchor {
        Anchor {
            magic: ANCHOR_MAGIC,
            kind: u64::from(kind),
            handle,
            count,
        }
    }

    /// Write this anchor into `pool`'s root object (created if the pool has none).
    pub fn publish(self, pool: &Pool) -> pisces::Result<()> {
        let root: PPtr<Anchor> = pool.root()?;
        pool.run(|tx| {
            *tx.write(root)? = self;
            Ok(())
        })
    }

    /// The anchor published in `pool`'s root object; an error if there is none.
    pub fn find(pool: &Pool) -> pisces::Result<Anchor> {
        let root: PPtr<Anchor> = pool.root()?;
        let a = pool.read(|tx| Ok(*tx.read(root)?))?;
        if a.magic != ANCHOR_MAGIC {
            return Err(Error::Corrupt(
                "the pool's root holds no data set of the benchmark (no anchor)"
                    .to_string()
                    .into(),
            ));
        }
        Ok(a)
    }

    /// `Ok` if this anchor names a data set of kind `kind` (its update's operation id).
    pub fn expect(&self, kind: u32, name: &str) -> pisces::Result<()> {
        if self.kind == u64::from(kind) {
            Ok(())
        } else {
            Err(Error::Corrupt(
                format!(
                    "the pool's data set is not a {name} (anchor kind {:#x}, not {kind:#x})",
                    self.kind
                )
                .into(),
            ))
        }
    }
}
