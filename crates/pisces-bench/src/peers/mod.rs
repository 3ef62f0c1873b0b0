//! The peers: key-value stores a Rust user would pick instead of a PTM for a
//! persistent, transactional map — [`redb`](redb_store), LMDB through
//! [`heed`](lmdb_store) and [`canopydb`](canopy_store). They are engines of this harness only (not of the library):
//! the harness drives them through their own APIs on their own files, and they run the
//! key-value data sets (`hash`, `set`, `ycsb`, `strmap`) with the same keys, values, operations
//! and request distribution as the library's engines, one operation per transaction.
//!
//! Durability, so that the comparison is fair: every write transaction of a peer is
//! durable when its commit returns, as a Pisces commit is. redb commits with
//! `Durability::Immediate` (its default: an fsync of the database file per commit);
//! LMDB with its default flags (neither `MDB_NOSYNC` nor `MDB_NOMETASYNC`: per commit
//! an fdatasync of the data file, then the meta page written through an `O_DSYNC`
//! descriptor); canopydb with its write-ahead log and
//! `commit_with(true)` (the log written and fsynced before the commit returns; commits
//! that arrive together share one fsync). Their files live under `/dev/shm` like the
//! pools, where an fsync is nearly free (tmpfs has nothing to write back), so the
//! figures show the stores' CPU cost, not a disk's; with `--dir` they live in that
//! directory on a real file system, beside the pools on the file medium, and their
//! commits cost what the device makes them cost ([`Peer::stated_syncs`]: the syncs of
//! a commit, read from their commit paths; the harness does not see their system
//! calls). No NVM write latency is emulated for them (they do
//! not write through the pool's medium), so they run at 0 ns only and their flush
//! counters are not reported.
//!
//! Concurrency is the stores' own: redb and LMDB allow one write transaction at a time
//! (a second writer blocks in `begin_write` / `write_txn` until the first commits);
//! canopydb runs write transactions concurrently under snapshot isolation and
//! validates them at commit (optimistic: one that conflicts is run again and counted
//! as a conflict). All three allow any number of concurrent read transactions, which
//! see the last committed state.
//!
//! A store is a [`KvStore`]: read-only transactions looking one key up, and write
//! transactions of inserts and removes ([`KvWrite`](store::KvWrite)); [`PeerBench`] runs the data
//! sets' operations on it.

mod bench;
mod canopy_store;
mod lmdb_store;
mod redb_store;
mod store;

pub use bench::PeerBench;
pub use store::KvStore;

use crate::workloads::kinds::DataKind;
use std::path::Path;

/// A peer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Peer {
    /// redb, durability `Immediate`.
    Redb,
    /// LMDB through heed, default (synchronous) commits.
    Lmdb,
    /// canopydb, concurrent (optimistic) write transactions, synchronous log commits.
    Canopy,
}

impl Peer {
    /// The peers, in benchmark order.
    pub const ALL: [Peer; 3] = [Peer::Redb, Peer::Lmdb, Peer::Canopy];

    /// Name on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Peer::Redb => redb_store::NAME,
            Peer::Lmdb => lmdb_store::NAME,
            Peer::Canopy => canopy_store::NAME,
        }
    }

    /// What each commit does to be durable (for the bench's header).
    pub fn durability(self) -> &'static str {
        match self {
            Peer::Redb => "redb Durability::Immediate (an fsync per commit)",
            Peer::Lmdb => {
                "lmdb default sync (an fdatasync and an O_DSYNC meta-page write per commit)"
            }
            Peer::Canopy => "canopydb commit_with(true) (its log fsynced per commit, shared by concurrent commits)",
        }
    }

    /// The device syncs of one commit as the store's commit path makes them, not
    /// measured (the harness does not see a store's system calls): the count, and where
    /// it comes from.
    pub fn stated_syncs(self) -> (&'static str, &'static str) {
        match self {
            // redb 2.x `PageManager::commit_inner`: the default 1-phase commit writes
            // the header and calls `sync_data` once (2-phase commit, off by default,
            // would add one).
            Peer::Redb => (
                "1",
                "redb: one fdatasync (its default 1-phase commit with Durability::Immediate)",
            ),
            // LMDB `mdb_txn_commit`: `mdb_env_sync` of the data pages, then
            // `mdb_env_write_meta` writes the meta page through the O_DSYNC descriptor
            // (neither MDB_NOSYNC nor MDB_NOMETASYNC is set).
            Peer::Lmdb => (
                "2",
                "lmdb: an fdatasync of the data pages, then the meta page written through \
                 an O_DSYNC descriptor",
            ),
            Peer::Canopy => (
                "<=1",
                "canopydb: one fsync of its write-ahead log, shared by the commits that \
                 arrive together; its checkpoints sync besides",
            ),
        }
    }

    /// How its write transactions run side by side (for the bench's header).
    pub fn writers(self) -> &'static str {
        match self {
            Peer::Redb | Peer::Lmdb => "one at a time",
            Peer::Canopy => "concurrent, optimistic (a conflict is run again)",
        }
    }

    /// True for the data sets a peer runs: the key-value ones (the bulk load too).
    pub fn runs(data: DataKind) -> bool {
        matches!(
            data,
            DataKind::Hash
                | DataKind::Set(_)
                | DataKind::Ycsb(_)
                | DataKind::StrMap(_)
                | DataKind::Bulk(_)
        )
    }

    /// Create an empty store in the fresh directory `dir` (LMDB reserves `map_bytes`
    /// of address space for its map; redb grows its file itself).
    pub fn create(self, dir: &Path, map_bytes: u64) -> Result<Box<dyn KvStore>, String> {
        std::fs::create_dir_all(dir)
            .map_err(|e| store::failed(self.name(), &format!("creating {}", dir.display()), e))?;
        Ok(match self {
            Peer::Redb => Box::new(redb_store::RedbStore::create(&dir.join("redb.db"))?),
            Peer::Lmdb => Box::new(lmdb_store::LmdbStore::create(dir, map_bytes)?),
            Peer::Canopy => Box::new(canopy_store::CanopyStore::create(dir)?),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every peer: reads see committed writes, a failed body rolls back, and the
    /// store is shared by threads (concurrent writers lose no update, concurrent
    /// readers).
    #[test]
    fn stores_commit_roll_back_and_share_between_threads() {
        for peer in Peer::ALL {
            let dir = tempfile::tempdir().unwrap();
            let s = peer.create(dir.path(), 64 << 20).unwrap();
            let name = peer.name();
            let sum = |v: &[u8]| v.iter().map(|&b| u64::from(b)).sum::<u64>();
            assert_eq!(s.read(7, &mut |v| sum(v)).unwrap(), None, "{name}");
            s.write(&mut |w| {
                w.insert(7, &[1, 2, 3])?;
                w.insert(8, &[5])?;
                Ok(0)
            })
            .unwrap();
            assert_eq!(s.read(7, &mut |v| sum(v)).unwrap(), Some(6), "{name}");
            // A failing body leaves nothing behind.
            let e = s
                .write(&mut |w| {
                    assert!(w.remove(7)?);
                    w.insert(9, &[9])?;
                    Err("stop".into())
                })
                .unwrap_err();
            assert_eq!(e, "stop");
            assert_eq!(s.read(7, &mut |v| sum(v)).unwrap(), Some(6), "{name}");
            assert_eq!(s.read(9, &mut |v| sum(v)).unwrap(), None, "{name}");
            // Removing an absent key says so; a transaction sees its own writes; a
            // replaced value is seen whole.
            let removed = s
                .write(&mut |w| {
                    let a = w.remove(100)?;
                    w.insert(8, &[10, 10])?;
                    assert_eq!(w.get(8, &mut |v| sum(v))?, Some(20));
                    Ok(u64::from(a))
                })
                .unwrap();
            assert_eq!(removed, 0, "{name}");
            assert_eq!(s.read(8, &mut |v| sum(v)).unwrap(), Some(20), "{name}");
            // Byte-string keys: their own transactions, the same guarantees.
            let long = [b'k'; 200];
            assert_eq!(s.read_bytes(b"user1", &mut |v| sum(v)).unwrap(), None);
            s.write_bytes(&mut |w| {
                w.insert(b"user1", &[1, 2])?;
                w.insert(&long, &[4])?;
                assert_eq!(w.get(b"user1", &mut |v| sum(v))?, Some(3));
                w.insert(b"user1", &[7; 300])?;
                Ok(0)
            })
            .unwrap();
            assert_eq!(s.read_bytes(b"user1", &mut |v| sum(v)).unwrap(), Some(2100));
            assert_eq!(s.read_bytes(&long, &mut |v| sum(v)).unwrap(), Some(4));
            assert_eq!(s.read_bytes(b"user", &mut |v| sum(v)).unwrap(), None);
            let e = s
                .write_bytes(&mut |w| {
                    w.insert(b"user1", &[0])?;
                    w.insert(b"user2", &[0])?;
                    Err("stop".into())
                })
                .unwrap_err();
            assert_eq!(e, "stop");
            assert_eq!(s.read_bytes(b"user1", &mut |v| sum(v)).unwrap(), Some(2100));
            assert_eq!(s.read_bytes(b"user2", &mut |v| sum(v)).unwrap(), None);
            // Two threads increment a counter record 200 times each: one writer at a
            // time, or a conflicting one run again, so no increment is lost.
            s.write(&mut |w| w.insert(1, &0u64.to_le_bytes()).map(|()| 0))
                .unwrap();
            std::thread::scope(|sc| {
                for _ in 0..2 {
                    sc.spawn(|| {
                        for _ in 0..200 {
                            s.write(&mut |w| {
                                let cur = w
                                    .get(1, &mut |v| u64::from_le_bytes(v.try_into().unwrap()))?
                                    .unwrap();
                                w.insert(1, &(cur + 1).to_le_bytes()).map(|()| 0)
                            })
                            .unwrap();
                        }
                    });
                }
            });
            let n = s
                .read(1, &mut |v| u64::from_le_bytes(v.try_into().unwrap()))
                .unwrap();
            assert_eq!(n, Some(400), "{name}");
        }
    }
}
