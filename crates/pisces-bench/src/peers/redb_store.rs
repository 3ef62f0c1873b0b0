//! redb as a peer: one table of `u64` keys and byte-string values, and one of
//! byte-string keys and values for the data sets keyed by strings, in one database
//! file (redb types a table by its key, and its `u64` keys compare as integers); every write transaction commits with `Durability::Immediate` (set explicitly,
//! though it is redb's default): the commit returns after an fsync of the file.

use super::store::{failed, KvBytesWrite, KvStore, KvWrite};
use redb::{Database, Durability, ReadableTable, TableDefinition};
use std::path::Path;

/// The table of `u64` keys.
const TABLE: TableDefinition<u64, &[u8]> = TableDefinition::new("kv");
/// The table of byte-string keys.
const BYTES_TABLE: TableDefinition<&[u8], &[u8]> = TableDefinition::new("kv-bytes");

/// A redb database with the table.
pub struct RedbStore {
    db: Database,
}

/// The peer's name on the command line and in reports.
pub(super) const NAME: &str = "redb";

fn err(what: &str, e: impl std::fmt::Display) -> String {
    failed(NAME, what, e)
}

impl RedbStore {
    /// Create the database file `path` (which must not exist) and its tables.
    pub fn create(path: &Path) -> Result<RedbStore, String> {
        let db =
            Database::create(path).map_err(|e| err(&format!("creating {}", path.display()), e))?;
        let store = RedbStore { db };
        store.write(&mut |_| Ok(0))?;
        store.write_bytes(&mut |_| Ok(0))?;
        Ok(store)
    }

    /// One write transaction running `body` on the table `def`, committed durably if
    /// it succeeds.
    fn write_table<K: redb::Key + 'static, R>(
        &self,
        def: TableDefinition<K, &'static [u8]>,
        body: impl FnOnce(&mut redb::Table<'_, K, &'static [u8]>) -> Result<R, String>,
    ) -> Result<R, String> {
        let mut txn = self.db.begin_write().map_err(|e| err("begin_write", e))?;
        txn.set_durability(Durability::Immediate);
        let out = {
            let mut table = txn.open_table(def).map_err(|e| err("open_table", e))?;
            body(&mut table)?
            // On an error the transaction is dropped uncommitted: redb aborts it.
        };
        txn.commit().map_err(|e| err("commit", e))?;
        Ok(out)
    }
}

/// The table inside a write transaction.
struct Writer<'a, 't>(&'a mut redb::Table<'t, u64, &'static [u8]>);

impl KvWrite for Writer<'_, '_> {
    fn get(
        &mut self,
        k: u64,
        examine: &mut dyn FnMut(&[u8]) -> u64,
    ) -> Result<Option<u64>, String> {
        let v = self.0.get(k).map_err(|e| err("get", e))?;
        Ok(v.map(|g| examine(g.value())))
    }

    fn insert(&mut self, k: u64, v: &[u8]) -> Result<(), String> {
        self.0.insert(k, v).map_err(|e| err("insert", e))?;
        Ok(())
    }

    fn remove(&mut self, k: u64) -> Result<bool, String> {
        let old = self.0.remove(k).map_err(|e| err("remove", e))?;
        Ok(old.is_some())
    }
}

/// The byte-keyed table inside a write transaction.
struct BytesWriter<'a, 't>(&'a mut redb::Table<'t, &'static [u8], &'static [u8]>);

impl KvBytesWrite for BytesWriter<'_, '_> {
    fn get(
        &mut self,
        k: &[u8],
        examine: &mut dyn FnMut(&[u8]) -> u64,
    ) -> Result<Option<u64>, String> {
        let v = self.0.get(k).map_err(|e| err("get", e))?;
        Ok(v.map(|g| examine(g.value())))
    }

    fn insert(&mut self, k: &[u8], v: &[u8]) -> Result<(), String> {
        self.0.insert(k, v).map_err(|e| err("insert", e))?;
        Ok(())
    }
}

impl KvStore for RedbStore {
    fn read(&self, k: u64, examine: &mut dyn FnMut(&[u8]) -> u64) -> Result<Option<u64>, String> {
        let txn = self.db.begin_read().map_err(|e| err("begin_read", e))?;
        let table = txn.open_table(TABLE).map_err(|e| err("open_table", e))?;
        let v = table.get(k).map_err(|e| err("get", e))?;
        Ok(v.map(|g| examine(g.value())))
    }

    fn write(
        &self,
        body: &mut dyn FnMut(&mut dyn KvWrite) -> Result<u64, String>,
    ) -> Result<u64, String> {
        self.write_table(TABLE, |t| body(&mut Writer(t)))
    }

    fn read_bytes(
        &self,
        k: &[u8],
        examine: &mut dyn FnMut(&[u8]) -> u64,
    ) -> Result<Option<u64>, String> {
        let txn = self.db.begin_read().map_err(|e| err("begin_read", e))?;
        let table = txn
            .open_table(BYTES_TABLE)
            .map_err(|e| err("open_table", e))?;
        let v = table.get(k).map_err(|e| err("get", e))?;
        Ok(v.map(|g| examine(g.value())))
    }

    fn write_bytes(
        &self,
        body: &mut dyn FnMut(&mut dyn KvBytesWrite) -> Result<u64, String>,
    ) -> Result<u64, String> {
        self.write_table(BYTES_TABLE, |t| body(&mut BytesWriter(t)))
    }
}
