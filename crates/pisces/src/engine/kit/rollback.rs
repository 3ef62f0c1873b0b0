//! Rolling back a thread's running transaction: the glue of `begin` and `abort` that
//! the engines keeping a running flag share.

/// A thread state whose running transaction, if any, can be rolled back.
pub(crate) trait Rollback {
    /// Whether a transaction runs.
    fn is_running(&self) -> bool;

    /// Undo the running transaction (nothing of it stays visible or takes effect) and
    /// end it. Called only while one runs.
    fn rollback(&mut self);

    /// Roll back the running transaction, if one runs: `EngineThread::abort`, and
    /// `begin` on a thread whose last transaction was left running.
    #[inline]
    fn abort_running(&mut self) {
        if self.is_running() {
            self.rollback();
        }
    }
}
