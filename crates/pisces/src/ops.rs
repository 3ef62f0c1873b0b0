//! Registered operations: deterministic transaction functions under stable ids
//! ([`Operations`], whose documentation states the rules).

use crate::engine::registry::AnyThread;
use crate::engine::{LentThread, Reexecute};
use crate::tx::{run_on, Tx, TxStats};
use crate::tx_options::TxOptions;
use crate::{Error, Result};
use bytemuck::Pod;
use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

/// An operation as the engine calls it: the transaction and the argument bytes.
pub(crate) type OpFn = dyn Fn(&mut Tx<'_>, &[u8]) -> Result<()> + Send + Sync;

struct Registered {
    f: Arc<OpFn>,
    arg_size: usize,
    arg_type: &'static str,
}

/// A registry of operations (cheap to clone: clones share one registry).
///
/// An engine that logs *operations* instead of data (`timestone`) persists, at commit,
/// only the operation's id and its argument bytes; recovery re-executes the operations
/// that the last checkpoint does not cover. For that, recovery must know the functions:
/// **register them before the pool opens** and give them to [`Pool::open`](crate::Pool::open) in
/// [`Config::operations`](crate::Config::operations) (and to [`Pool::create`](crate::Pool::create)). A pool
/// with operations left to re-execute refuses to open without them
/// ([`Error::InvalidConfig`] naming the missing id). Operations registered later with
/// [`Pool::register_op`](crate::Pool::register_op) run fine but must be in the registry of the next open too.
///
/// Rules for an operation:
/// * deterministic: its effects depend only on its arguments and what it reads in the
///   pool (no clocks, random numbers, thread ids, or state outside the pool);
/// * its argument type is [`Pod`] (copied as bytes into the log); pointers (`PPtr`) in
///   arguments are fine;
/// * the same id must keep meaning the same function across runs.
///
/// Every engine runs operations (the others simply execute them as closures).
/// `run_op` asks for serializable isolation where the engine offers it: re-execution in
/// commit order reproduces an operation only if its reads were still current at its
/// commit.
///
/// ```
/// use pisces::{Config, EngineId, Operations, Pool, PPtr};
/// let ops = Operations::new();
/// ops.register(1, |tx, counter: &PPtr<u64>| {
///     *tx.write(*counter)? += 1;
///     Ok(())
/// }).unwrap();
/// let dir = tempfile::tempdir().unwrap();
/// let path = dir.path().join("ops.pool");
/// let cfg = Config::new().size(32 << 20).engine(EngineId::Timestone).operations(ops);
/// let pool = Pool::create(&path, cfg.clone()).unwrap();
/// let counter: PPtr<u64> = pool.root().unwrap();
/// pool.run_op(1, &counter).unwrap();
/// drop(pool);
/// let pool = Pool::open(&path, cfg).unwrap();
/// assert_eq!(pool.run(|tx| Ok(*tx.read(counter)?)).unwrap(), 1);
/// ```
///
/// A `BTreeMap`: a program registers a handful of operations, and finding one among
/// them by comparisons is cheaper than hashing the id on every `run_op`.
#[derive(Clone, Default)]
pub struct Operations {
    map: Arc<RwLock<BTreeMap<u32, Registered>>>,
}

impl std::fmt::Debug for Operations {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ids: Vec<u32> = self.read().keys().copied().collect();
        f.debug_struct("Operations").field("ids", &ids).finish()
    }
}

impl Operations {
    /// An empty registry.
    pub fn new() -> Operations {
        Operations::default()
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<u32, Registered>> {
        self.map.read().unwrap_or_else(|e| e.into_inner())
    }

    /// Register `f` under `id` with arguments of type `A`. An id already taken is an
    /// error ([`Error::InvalidArgument`]).
    pub fn register<A: Pod>(
        &self,
        id: u32,
        f: impl Fn(&mut Tx<'_>, &A) -> Result<()> + Send + Sync + 'static,
    ) -> Result<()> {
        let mut m = self.map.write().unwrap_or_else(|e| e.into_inner());
        if m.contains_key(&id) {
            return Err(Error::invalid_argument(format!(
                "operation id {id} is registered already"
            )));
        }
        let size = std::mem::size_of::<A>();
        let g = move |tx: &mut Tx<'_>, bytes: &[u8]| -> Result<()> {
            if bytes.len() != size {
                return Err(Error::corrupt(format!(
                    "operation arguments of {} bytes, expected {size}",
                    bytes.len()
                )));
            }
            let a: A = bytemuck::pod_read_unaligned(bytes);
            f(tx, &a)
        };
        m.insert(
            id,
            Registered {
                f: Arc::new(g),
                arg_size: size,
                arg_type: std::any::type_name::<A>(),
            },
        );
        Ok(())
    }

    /// The function registered under `id`.
    pub(crate) fn get(&self, id: u32) -> Option<Arc<OpFn>> {
        self.read().get(&id).map(|r| r.f.clone())
    }

    pub(crate) fn checked<A: Pod>(&self, id: u32) -> Result<Arc<OpFn>> {
        let m = self.read();
        let r = m
            .get(&id)
            .ok_or_else(|| Error::invalid_argument(format!("no operation registered as {id}")))?;
        if r.arg_size != std::mem::size_of::<A>() {
            return Err(Error::invalid_argument(format!(
                "operation {id} takes {} ({} bytes), not {}",
                r.arg_type,
                r.arg_size,
                std::any::type_name::<A>()
            )));
        }
        Ok(r.f.clone())
    }
}

/// Recovery re-executes a logged operation as one transaction with default options,
/// through the same path as `Pool::run_op`.
impl Reexecute for Operations {
    fn registered(&self, id: u32) -> bool {
        self.get(id).is_some()
    }
    fn run(&self, thread: LentThread<'_>, id: u32, args: &[u8]) -> Result<()> {
        let f = self
            .get(id)
            .ok_or_else(|| Error::invalid_argument(format!("no operation registered as {id}")))?;
        AnyThread::lend(thread, |th| {
            run_on(
                th,
                &mut TxStats::default(),
                &TxOptions::default(),
                false,
                |tx| f(tx, args),
            )
        })
    }
}
