//! LMDB (through heed) as a peer: one named database of byte-string keys (a `u64` key
//! as its 8 big-endian bytes) and byte-string values in an environment directory; the environment is opened with
//! LMDB's default flags, so a commit returns after an fdatasync of the data file.

use super::store::{failed, KvBytesWrite, KvStore, KvWrite};
use heed::types::Bytes;
use heed::{Database, Env, EnvOpenOptions, RwTxn};
use std::path::Path;

/// An LMDB environment with its one database.
pub struct LmdbStore {
    env: Env,
    db: Database<Bytes, Bytes>,
}

/// The peer's name on the command line and in reports.
pub(super) const NAME: &str = "lmdb";

fn err(what: &str, e: impl std::fmt::Display) -> String {
    failed(NAME, what, e)
}

impl LmdbStore {
    /// Create an environment in the fresh, existing directory `dir` with a map of
    /// `map_bytes`, and its database.
    pub fn create(dir: &Path, map_bytes: u64) -> Result<LmdbStore, String> {
        let map = usize::try_from(map_bytes)
            .map_err(|_| err("map size", "does not fit the address space"))?;
        // SAFETY: `EnvOpenOptions::open` is unsafe because the memory map is undefined
        // behaviour if the files are changed behind LMDB's back. `dir` is a fresh
        // directory under a unique name that only this store opens, once in this
        // process, with LMDB's default flags (its lock file is in use; no NO_LOCK,
        // NO_SYNC or NO_META_SYNC), and nothing else in the harness touches its files
        // until the store is dropped.
        let env = unsafe { EnvOpenOptions::new().map_size(map).max_dbs(1).open(dir) }
            .map_err(|e| err(&format!("opening {}", dir.display()), e))?;
        let mut txn = env.write_txn().map_err(|e| err("write_txn", e))?;
        let db = env
            .create_database(&mut txn, Some("kv"))
            .map_err(|e| err("create_database", e))?;
        txn.commit().map_err(|e| err("commit", e))?;
        Ok(LmdbStore { env, db })
    }
}

/// The database inside a write transaction.
struct Writer<'a, 'e> {
    db: Database<Bytes, Bytes>,
    txn: &'a mut RwTxn<'e>,
}

impl KvBytesWrite for Writer<'_, '_> {
    fn get(
        &mut self,
        k: &[u8],
        examine: &mut dyn FnMut(&[u8]) -> u64,
    ) -> Result<Option<u64>, String> {
        let v = self.db.get(self.txn, k).map_err(|e| err("get", e))?;
        Ok(v.map(examine))
    }

    fn insert(&mut self, k: &[u8], v: &[u8]) -> Result<(), String> {
        self.db.put(self.txn, k, v).map_err(|e| err("put", e))
    }
}

/// A `u64` key is its 8 big-endian bytes.
impl KvWrite for Writer<'_, '_> {
    fn get(
        &mut self,
        k: u64,
        examine: &mut dyn FnMut(&[u8]) -> u64,
    ) -> Result<Option<u64>, String> {
        KvBytesWrite::get(self, &k.to_be_bytes(), examine)
    }

    fn insert(&mut self, k: u64, v: &[u8]) -> Result<(), String> {
        KvBytesWrite::insert(self, &k.to_be_bytes(), v)
    }

    fn remove(&mut self, k: u64) -> Result<bool, String> {
        self.db
            .delete(self.txn, &k.to_be_bytes())
            .map_err(|e| err("delete", e))
    }
}

impl LmdbStore {
    /// One write transaction running `body` on the database, committed if it succeeds.
    fn write_with(
        &self,
        body: &mut dyn FnMut(&mut Writer<'_, '_>) -> Result<u64, String>,
    ) -> Result<u64, String> {
        let mut txn = self.env.write_txn().map_err(|e| err("write_txn", e))?;
        let out = body(&mut Writer {
            db: self.db,
            txn: &mut txn,
        })?;
        // On an error `txn` is dropped uncommitted: heed aborts it.
        txn.commit().map_err(|e| err("commit", e))?;
        Ok(out)
    }
}

impl KvStore for LmdbStore {
    fn read(&self, k: u64, examine: &mut dyn FnMut(&[u8]) -> u64) -> Result<Option<u64>, String> {
        self.read_bytes(&k.to_be_bytes(), examine)
    }

    fn write(
        &self,
        body: &mut dyn FnMut(&mut dyn KvWrite) -> Result<u64, String>,
    ) -> Result<u64, String> {
        self.write_with(&mut |w| body(w))
    }

    fn read_bytes(
        &self,
        k: &[u8],
        examine: &mut dyn FnMut(&[u8]) -> u64,
    ) -> Result<Option<u64>, String> {
        let txn = self.env.read_txn().map_err(|e| err("read_txn", e))?;
        let v = self.db.get(&txn, k).map_err(|e| err("get", e))?;
        Ok(v.map(examine))
    }

    fn write_bytes(
        &self,
        body: &mut dyn FnMut(&mut dyn KvBytesWrite) -> Result<u64, String>,
    ) -> Result<u64, String> {
        self.write_with(&mut |w| body(w))
    }
}
