//! canopydb as a peer: one tree of byte-string keys (a `u64` key as its 8 big-endian
//! bytes) and byte-string values in a database directory, with canopydb's write-ahead log. Write transactions are its
//! concurrent ones (`begin_write_concurrent`): they run side by side under snapshot
//! isolation and validate at commit (optimistic concurrency control, write-write
//! conflicts detected per B+-tree page); one that fails validation
//! (`Error::WriteConflict`) is run again, and counted as a conflict. Every commit is
//! `commit_with(true)`: it returns after the log is written and fsynced (commits that
//! arrive together share one fsync), so a committed transaction survives a crash, as a
//! Pisces commit does. Read transactions see the last committed state.

use super::store::{failed, KvBytesWrite, KvStore, KvWrite};
use canopydb::{Database, DbOptions, EnvOptions, Tree};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

/// The one tree's name.
const TREE: &[u8] = b"kv";

/// A canopydb database with its tree.
pub struct CanopyStore {
    db: Database,
    /// Write transactions that failed validation and were run again.
    conflicts: AtomicU64,
}

/// The peer's name on the command line and in reports.
pub(super) const NAME: &str = "canopydb";

fn err(what: &str, e: impl std::fmt::Display) -> String {
    failed(NAME, what, e)
}

impl CanopyStore {
    /// Create a database in the fresh, existing directory `dir`, and its tree.
    pub fn create(dir: &Path) -> Result<CanopyStore, String> {
        let mut opts = DbOptions::new();
        // The log is on (its default) and every commit waits for its fsync.
        opts.use_wal = true;
        opts.default_commit_sync = true;
        let mut env = EnvOptions::new(dir);
        // Explicitly on: canopydb's default is off when it was compiled with
        // CANOPYDB_DISABLE_FSYNC_DEFAULT set.
        env.disable_fsync = false;
        let db = Database::with_options(env, opts)
            .map_err(|e| err(&format!("opening {}", dir.display()), e))?;
        let tx = db.begin_write().map_err(|e| err("begin_write", e))?;
        drop(
            tx.get_or_create_tree(TREE)
                .map_err(|e| err("create tree", e))?,
        );
        tx.commit_with(true).map_err(|e| err("commit", e))?;
        Ok(CanopyStore {
            db,
            conflicts: AtomicU64::new(0),
        })
    }
}

fn key(k: u64) -> [u8; 8] {
    k.to_be_bytes()
}

/// The tree inside a write transaction.
struct Writer<'a, 't>(&'a mut Tree<'t>);

impl KvBytesWrite for Writer<'_, '_> {
    fn get(
        &mut self,
        k: &[u8],
        examine: &mut dyn FnMut(&[u8]) -> u64,
    ) -> Result<Option<u64>, String> {
        let v = self.0.get(k).map_err(|e| err("get", e))?;
        Ok(v.map(|v| examine(&v)))
    }

    fn insert(&mut self, k: &[u8], v: &[u8]) -> Result<(), String> {
        self.0.insert(k, v).map_err(|e| err("insert", e))
    }
}

/// A `u64` key is its 8 big-endian bytes.
impl KvWrite for Writer<'_, '_> {
    fn get(
        &mut self,
        k: u64,
        examine: &mut dyn FnMut(&[u8]) -> u64,
    ) -> Result<Option<u64>, String> {
        KvBytesWrite::get(self, &key(k), examine)
    }

    fn insert(&mut self, k: u64, v: &[u8]) -> Result<(), String> {
        KvBytesWrite::insert(self, &key(k), v)
    }

    fn remove(&mut self, k: u64) -> Result<bool, String> {
        self.0.delete(&key(k)).map_err(|e| err("delete", e))
    }
}

impl CanopyStore {
    /// One concurrent write transaction running `body` on the tree, committed if it
    /// succeeds; run again while its commit fails validation.
    fn write_with(
        &self,
        body: &mut dyn FnMut(&mut Writer<'_, '_>) -> Result<u64, String>,
    ) -> Result<u64, String> {
        loop {
            let tx = self
                .db
                .begin_write_concurrent()
                .map_err(|e| err("begin_write_concurrent", e))?;
            let out = {
                let mut tree = tx
                    .get_or_create_tree(TREE)
                    .map_err(|e| err("get_or_create_tree", e))?;
                body(&mut Writer(&mut tree))?
                // On an error the transaction is dropped uncommitted: canopydb rolls it
                // back.
            };
            match tx.commit_with(true) {
                Ok(_) => return Ok(out),
                Err(canopydb::Error::WriteConflict) => {
                    // Relaxed: a statistic read after the workers stopped.
                    self.conflicts.fetch_add(1, Ordering::Relaxed);
                }
                Err(e) => return Err(err("commit", e)),
            }
        }
    }
}

impl KvStore for CanopyStore {
    fn read(&self, k: u64, examine: &mut dyn FnMut(&[u8]) -> u64) -> Result<Option<u64>, String> {
        self.read_bytes(&key(k), examine)
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
        let rx = self.db.begin_read().map_err(|e| err("begin_read", e))?;
        let tree = rx
            .get_tree(TREE)
            .map_err(|e| err("get_tree", e))?
            .ok_or_else(|| err("get_tree", "the tree is missing"))?;
        let v = tree.get(k).map_err(|e| err("get", e))?;
        Ok(v.map(|v| examine(&v)))
    }

    fn write_bytes(
        &self,
        body: &mut dyn FnMut(&mut dyn KvBytesWrite) -> Result<u64, String>,
    ) -> Result<u64, String> {
        self.write_with(&mut |w| body(w))
    }

    fn conflicts(&self) -> u64 {
        self.conflicts.load(Ordering::Relaxed)
    }
}
