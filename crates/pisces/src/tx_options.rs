//! What a transaction asks for: its isolation level, when it is durable, whether it
//! only reads. A leaf: the engines and the transaction API both speak it.

/// How strongly a transaction is isolated from concurrent ones. Levels are ordered:
/// an engine that offers a level also accepts requests for weaker ones.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Isolation {
    /// Snapshot isolation: every read sees one committed snapshot taken at begin; two
    /// transactions that write the same object do not both commit. Write skew is
    /// possible.
    Snapshot,
    /// Serializable: the outcome equals some serial order of the committed
    /// transactions (no write skew).
    Serializable,
    /// Linearizable (strict serializable): serializable, and the order respects real
    /// time (a transaction sees every one that committed before it began).
    Linearizable,
}

impl std::fmt::Display for Isolation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Isolation::Snapshot => "snapshot",
            Isolation::Serializable => "serializable",
            Isolation::Linearizable => "linearizable",
        })
    }
}

/// When `run` returns relative to durability.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Durability {
    /// `run` returns after the transaction is durable (survives a crash).
    #[default]
    OnReturn,
    /// `run` returns once the transaction is visible; it becomes durable later, at the
    /// latest when [`crate::ThreadHandle::wait_durable`] or [`crate::Pool::sync`]
    /// returns. A crash before then may lose it, and with it the later transactions of
    /// its thread, never an earlier one; a transaction that read what it wrote, once
    /// durable, survives only with it. The `pisces` engine defers its record's
    /// persistence (on the file medium a thread's deferred commits then share one
    /// device sync); `sp3` and `spht` persist their record and defer the wait for what
    /// it depends on; on the others the commit is durable anyway and nothing changes.
    Deferred,
}

/// Options of one transaction.
///
/// ```
/// use pisces::{Isolation, TxOptions};
/// let o = TxOptions { read_only: true, ..TxOptions::default() };
/// assert_eq!(o.isolation, None); // the engine's own level
/// let strict = TxOptions::default().isolation(Isolation::Serializable);
/// assert_eq!(strict.isolation, Some(Isolation::Serializable));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct TxOptions {
    /// The transaction only reads: `write`, `alloc` and `free` are refused with
    /// [`Error::ReadOnlyTransaction`](crate::Error::ReadOnlyTransaction), and an engine may take a cheaper path.
    pub read_only: bool,
    /// The isolation level asked for; `None` = the engine's own
    /// ([`EngineId::default_isolation`](crate::EngineId::default_isolation)). A level the engine
    /// does not offer is refused with [`Error::IsolationUnsupported`](crate::Error::IsolationUnsupported).
    pub isolation: Option<Isolation>,
    /// When `run` returns.
    pub durability: Durability,
}

impl TxOptions {
    /// Read-only transactions.
    pub fn read_only() -> TxOptions {
        TxOptions {
            read_only: true,
            ..TxOptions::default()
        }
    }
    /// With isolation level `level`.
    pub fn isolation(self, level: Isolation) -> TxOptions {
        TxOptions {
            isolation: Some(level),
            ..self
        }
    }
    /// With durability `d`.
    pub fn durability(self, d: Durability) -> TxOptions {
        TxOptions {
            durability: d,
            ..self
        }
    }
}
