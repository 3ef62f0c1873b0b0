//! What the harness drives a peer through: a store of `u64` keys and byte-string
//! values ([`KvStore`]) and the operations of its write transactions ([`KvWrite`]);
//! beside them, byte-string keys ([`KvStore::read_bytes`], [`KvStore::write_bytes`],
//! [`KvBytesWrite`]) for the data sets keyed by strings. A data set uses one key form
//! only; a store keeps the two apart where its tables are typed by key (redb) and in
//! one table where its keys are bytes anyway (LMDB, canopydb: a `u64` key is its 8
//! big-endian bytes there).

/// A persistent key-value store of `u64` keys and byte-string values.
pub trait KvStore: Send + Sync {
    /// One read-only transaction: look `k` up and, if present, give its value to
    /// `examine`, whose result is returned.
    fn read(&self, k: u64, examine: &mut dyn FnMut(&[u8]) -> u64) -> Result<Option<u64>, String>;

    /// One write transaction running `body`, committed durably if `body` succeeds and
    /// rolled back if it fails. Returns what `body` returned.
    fn write(
        &self,
        body: &mut dyn FnMut(&mut dyn KvWrite) -> Result<u64, String>,
    ) -> Result<u64, String>;

    /// [`read`](Self::read) with a byte-string key.
    fn read_bytes(
        &self,
        k: &[u8],
        examine: &mut dyn FnMut(&[u8]) -> u64,
    ) -> Result<Option<u64>, String>;

    /// [`write`](Self::write) with byte-string keys.
    fn write_bytes(
        &self,
        body: &mut dyn FnMut(&mut dyn KvBytesWrite) -> Result<u64, String>,
    ) -> Result<u64, String>;

    /// Write transactions that failed at commit and were run again (0 for a store
    /// whose writers wait for each other instead).
    fn conflicts(&self) -> u64 {
        0
    }
}

/// The operations of a write transaction.
pub trait KvWrite {
    /// Look `k` up in this transaction (its own writes included) and, if present, give
    /// its value to `examine`, whose result is returned.
    fn get(&mut self, k: u64, examine: &mut dyn FnMut(&[u8]) -> u64)
        -> Result<Option<u64>, String>;
    /// Insert `k` with value `v`, replacing any value it had.
    fn insert(&mut self, k: u64, v: &[u8]) -> Result<(), String>;
    /// Remove `k`; true if it was present.
    fn remove(&mut self, k: u64) -> Result<bool, String>;
}

/// The operations of a write transaction with byte-string keys.
pub trait KvBytesWrite {
    /// Look `k` up in this transaction (its own writes included) and, if present, give
    /// its value to `examine`, whose result is returned.
    fn get(
        &mut self,
        k: &[u8],
        examine: &mut dyn FnMut(&[u8]) -> u64,
    ) -> Result<Option<u64>, String>;
    /// Insert `k` with value `v`, replacing any value it had.
    fn insert(&mut self, k: &[u8], v: &[u8]) -> Result<(), String>;
}

/// `e` as the error text of a peer's operation.
pub(super) fn failed(peer: &str, what: &str, e: impl std::fmt::Display) -> String {
    format!("{peer}: {what}: {e}")
}
