//! The list-append workload: generates transactions, runs them on a real pool from
//! several threads, and records the history the checker judges.
//!
//! # Keys
//! `keys` key *slots* are active at a time; each holds a key id. Keys are numbered
//! from 0, and a slot's key is retired after `appends_per_key` appends have been
//! generated for it (at most [`LIST_CAPACITY`]) and replaced by the next unused id, so
//! reads stay short and every key's history stays small (Elle does the same). Since a
//! generated transaction commits at most once, no list ever overflows.
//!
//! # Several processes
//! Processes that open one pool shared run one workload each, configured with
//! `processes` and their own `process` index (see [`WorkloadConfig::process`]). Their
//! values are theirs alone: process `p` draws values from `p << 48` up, so the values of
//! the merged history ([`History::merge`]) are unique. Their keys are shared, and the
//! pool says which key is current, not a count kept by each process (which would let a
//! process that runs ahead leave the others behind on keys of their own): slot `s`
//! holds the keys `s`, `s + slots`, `s + 2 slots`, ... in turn, and a transaction that
//! reads or appends to slot `s` reads the slot's key it last knew of, in the
//! transaction, moving on to the next while the list holds `appends_per_key` values.
//! An append goes to that first list with room, which the same snapshot saw: no list
//! overflows, and the processes read and append to the same lists at the same time. The
//! look-up of an append is not recorded (the history shows a blind append, as with one
//! process); the look-up of a read is the read.
//!
//! # Transactions
//! * Default mix: 1 to `max_ops` micro-operations, each a read of a random slot's key
//!   or an append to one (half and half). A transaction that only reads runs as a
//!   snapshot (`ThreadHandle::read`) unless the run asks for an isolation level, and
//!   spins for `pause` between two of its reads, so that other threads commit
//!   meanwhile: a snapshot that then read their writes (a read skew) shows as a cycle.
//! * Write skew (`write_skew`): slots form pairs `(x, y)`; a transaction reads `x` and
//!   `y`, spins for `pause` (to make concurrent transactions overlap), and appends to
//!   one of the two. Two such transactions on one pair that overlap and append to
//!   different keys both commit under snapshot isolation and form the cycle
//!   `T1 -rw-> T2 -rw-> T1`: G2-item, allowed under SI, forbidden under serializability.
//!
//! # Recording
//! Each attempt of a transaction (the closure given to `run`, re-run after conflicts)
//! appends fresh values, drawn from one global counter, so a value names one attempt.
//! Every attempt but the last is recorded as aborted (if it appended anything: an
//! aborted attempt's reads carry no evidence). The last one is committed if `run`
//! returned `Ok` and the machine had not crashed by then, indeterminate if it had, and
//! aborted if `run` failed. A thread stops starting transactions once `crashed()` says
//! so. [`Workload::read_all`] reads every key used so far, the evidence the checker
//! needs after a recovery.

use super::history::{History, Key, Op, Outcome, Txn, Value};
use super::store::{Store, LIST_CAPACITY, MAX_KEYS};
use pisces::{Error, Pool, Result, Tx};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Workload parameters.
#[derive(Clone, Debug)]
pub struct WorkloadConfig {
    /// Threads running transactions (each needs a thread slot of the pool).
    pub threads: usize,
    /// Keys active at a time (write skew: rounded up to an even number, at least 2).
    pub keys: usize,
    /// Most micro-operations per transaction (default mix).
    pub max_ops: usize,
    /// Appends generated per key before it is retired (1 to [`LIST_CAPACITY`]).
    pub appends_per_key: usize,
    /// Run the write-skew workload instead of the default mix.
    pub write_skew: bool,
    /// Time spent between the reads and the append of the write-skew workload, and
    /// between the reads of a transaction of the default mix that only reads.
    pub pause: Duration,
    /// Seeds the generators.
    pub seed: u64,
    /// Processes running this workload on one pool at once (1 to 65536; above 1 the
    /// keys are looked up in the pool, see the module docs).
    pub processes: usize,
    /// This process's index, `0..processes`: it picks the process's values and seeds.
    pub process: usize,
    /// Options of the workload's transactions (e.g. an isolation level; `read_all`
    /// keeps the defaults).
    pub tx_options: pisces::TxOptions,
}

impl Default for WorkloadConfig {
    fn default() -> Self {
        WorkloadConfig {
            threads: 2,
            keys: 8,
            max_ops: 4,
            appends_per_key: LIST_CAPACITY,
            write_skew: false,
            pause: Duration::from_micros(20),
            seed: 0,
            processes: 1,
            process: 0,
            tx_options: pisces::TxOptions::default(),
        }
    }
}

/// One planned micro-operation (values are drawn per attempt).
#[derive(Clone, Copy, Debug)]
enum Planned {
    Read(Key),
    Append(Key),
    Pause,
    /// Several processes: read the current key of this slot.
    ReadSlot(usize),
    /// Several processes: append to the current key of this slot.
    AppendSlot(usize),
}

/// Whether `plan` reads and waits only (no append).
fn reads_only(plan: &[Planned]) -> bool {
    plan.iter()
        .all(|p| matches!(p, Planned::Read(_) | Planned::ReadSlot(_) | Planned::Pause))
}

/// `plan` with a pause between each two of its reads if it has reads only: a snapshot
/// then keeps reading while other threads commit, so one that read a later commit's
/// writes after its start (a read skew across its keys) shows in the history; back to
/// back, its reads leave a commit too little time to land between two of them.
fn paused_if_reads_only(plan: Vec<Planned>) -> Vec<Planned> {
    if !reads_only(&plan) || plan.len() < 2 {
        return plan;
    }
    let mut paused = Vec::with_capacity(2 * plan.len() - 1);
    for (i, p) in plan.into_iter().enumerate() {
        if i > 0 {
            paused.push(Planned::Pause);
        }
        paused.push(p);
    }
    paused
}

/// The active key slots.
#[derive(Debug)]
struct KeySpace {
    /// Per slot: (key, appends generated for it).
    slots: Vec<(Key, usize)>,
    next_key: Key,
    per_key: usize,
}

impl KeySpace {
    fn new(slots: usize, per_key: usize) -> Self {
        KeySpace {
            slots: (0..slots as u64).map(|k| (k, 0)).collect(),
            next_key: slots as u64,
            per_key,
        }
    }

    /// The key of `slot` for one more append, retiring the slot's key if it is full.
    fn append_key(&mut self, slot: usize) -> Result<Key> {
        let next = self.next_key;
        let per_key = self.per_key;
        let s = &mut self.slots[slot];
        if s.1 >= per_key {
            if next >= MAX_KEYS {
                return Err(Error::InvalidConfig(
                    format!(
                        "the workload used all {MAX_KEYS} keys of the list store; run fewer \
                         transactions or allow more appends per key"
                    )
                    .into(),
                ));
            }
            *s = (next, 0);
            self.next_key += 1;
        }
        s.1 += 1;
        Ok(s.0)
    }
}

/// The shift of a process index in the values it appends (each process has 2^48).
const PROCESS_VALUE_SHIFT: u32 = 48;

/// A list-append workload (see the module docs). Its key space and value counter
/// persist across [`run`](Self::run) calls, so one workload can continue on a
/// recovered pool.
#[derive(Debug)]
pub struct Workload {
    cfg: WorkloadConfig,
    keys: Mutex<KeySpace>,
    next_value: AtomicU64,
    /// Several processes: per slot, the generation of its key last seen (its key is
    /// `generation * slots + slot`).
    generations: Vec<AtomicU64>,
}

/// What a workload thread asks and tells as it runs: whether the run crashed (stop
/// now), and the journal of its attempts.
#[derive(Clone, Copy)]
struct Ends<'a> {
    crashed: &'a (dyn Fn() -> bool + Sync),
    journal: Option<&'a dyn Journal>,
}

/// What [`Workload::run_journaled`] reports as it runs: a process that may be killed
/// hands its history out as it goes, so that what a kill cut short is still known.
pub trait Journal: Sync {
    /// An attempt of thread `thread` whose operations (`ops`, with appends) ran and
    /// that now tries to commit: if its process is killed before
    /// [`Journal::resolved`] reports its transaction, it may have committed or not
    /// (indeterminate), and an earlier attempt of the same transaction reported here
    /// was aborted.
    fn attempt(&self, thread: usize, ops: &[Op]);
    /// The records of one transaction, once its outcome is known (its aborted attempts
    /// that appended, then the outcome; none for an aborted read-only one).
    fn resolved(&self, txns: &[Txn]);
}

impl Workload {
    /// A workload; fails on parameters out of range.
    pub fn new(cfg: WorkloadConfig) -> Result<Workload> {
        let bad = |m: String| Err(Error::InvalidConfig(m.into()));
        if cfg.threads == 0 {
            return bad("the workload needs at least one thread".into());
        }
        if cfg.keys == 0 || cfg.keys as u64 > MAX_KEYS / 2 {
            return bad(format!("keys must be between 1 and {}", MAX_KEYS / 2));
        }
        if cfg.max_ops == 0 || cfg.max_ops > 64 {
            return bad("max_ops must be between 1 and 64".into());
        }
        if cfg.appends_per_key == 0 || cfg.appends_per_key > LIST_CAPACITY {
            return bad(format!(
                "appends_per_key must be between 1 and {LIST_CAPACITY}"
            ));
        }
        if cfg.processes == 0 || cfg.processes > 1 << 16 {
            return bad("processes must be between 1 and 65536".into());
        }
        if cfg.process >= cfg.processes {
            return bad(format!(
                "process {} is not one of the {} processes",
                cfg.process, cfg.processes
            ));
        }
        let slots = if cfg.write_skew {
            cfg.keys.max(2).next_multiple_of(2)
        } else {
            cfg.keys
        };
        let per_key = cfg.appends_per_key;
        let first_value = ((cfg.process as u64) << PROCESS_VALUE_SHIFT) + 1;
        let generations = if cfg.processes > 1 {
            (0..slots).map(|_| AtomicU64::new(0)).collect()
        } else {
            Vec::new()
        };
        Ok(Workload {
            cfg,
            keys: Mutex::new(KeySpace::new(slots, per_key)),
            next_value: AtomicU64::new(first_value),
            generations,
        })
    }

    /// The process (its [`WorkloadConfig::process`]) whose workload appended `value`.
    pub fn process_of(value: Value) -> usize {
        (value >> PROCESS_VALUE_SHIFT) as usize
    }

    /// The parameters.
    pub fn config(&self) -> &WorkloadConfig {
        &self.cfg
    }

    /// Key ids handed out so far (keys `0..keys_used()`). With several processes: the
    /// keys up to the newest generation this process looked up; the most over all the
    /// processes covers every key used.
    pub fn keys_used(&self) -> u64 {
        let next_key = self.keys.lock().unwrap_or_else(|e| e.into_inner()).next_key;
        let slots = self.generations.len() as u64;
        match self
            .generations
            .iter()
            .map(|g| g.load(Ordering::Relaxed))
            .max()
        {
            Some(g) => ((g + 1) * slots).min(MAX_KEYS),
            None => next_key,
        }
    }

    /// Several processes: the current key of `slot` in `tx`'s snapshot and its list:
    /// the first of the slot's keys from the one last seen whose list has room.
    fn slot_key(&self, store: &Store, tx: &Tx<'_>, slot: usize) -> Result<(Key, Vec<Value>)> {
        let slots = self.generations.len() as u64;
        let generation = &self.generations[slot];
        loop {
            let g = generation.load(Ordering::Relaxed);
            let key = g * slots + slot as u64;
            if key >= MAX_KEYS {
                return Err(Error::InvalidConfig(
                    format!(
                        "the workload used all {MAX_KEYS} keys of the list store; run fewer \
                         transactions or allow more appends per key"
                    )
                    .into(),
                ));
            }
            let list = store.read(tx, key)?;
            if list.len() < self.cfg.appends_per_key {
                return Ok((key, list));
            }
            generation.fetch_max(g + 1, Ordering::Relaxed);
        }
    }

    /// Create the (empty) store on a fresh pool.
    pub fn setup(&self, pool: &Pool) -> Result<()> {
        Store::open(pool).map(|_| ())
    }

    fn plan(&self, rng: &mut StdRng) -> Result<Vec<Planned>> {
        if !self.generations.is_empty() {
            return Ok(self.plan_slots(rng));
        }
        let mut ks = self.keys.lock().unwrap_or_else(|e| e.into_inner());
        let n = ks.slots.len();
        if self.cfg.write_skew {
            let pair = rng.gen_range(0..n / 2);
            let side = rng.gen_range(0..2);
            let target = ks.append_key(2 * pair + side)?;
            let (x, y) = (ks.slots[2 * pair].0, ks.slots[2 * pair + 1].0);
            return Ok(vec![
                Planned::Read(x),
                Planned::Read(y),
                Planned::Pause,
                Planned::Append(target),
            ]);
        }
        let ops = rng.gen_range(1..=self.cfg.max_ops);
        let mut plan = Vec::with_capacity(ops);
        for _ in 0..ops {
            let slot = rng.gen_range(0..n);
            if rng.gen_bool(0.5) {
                plan.push(Planned::Read(ks.slots[slot].0));
            } else {
                plan.push(Planned::Append(ks.append_key(slot)?));
            }
        }
        Ok(paused_if_reads_only(plan))
    }

    /// [`Self::plan`] of several processes: slots, their keys looked up as the
    /// transaction runs.
    fn plan_slots(&self, rng: &mut StdRng) -> Vec<Planned> {
        let n = self.generations.len();
        if self.cfg.write_skew {
            let pair = rng.gen_range(0..n / 2);
            let side = rng.gen_range(0..2);
            return vec![
                Planned::ReadSlot(2 * pair),
                Planned::ReadSlot(2 * pair + 1),
                Planned::Pause,
                Planned::AppendSlot(2 * pair + side),
            ];
        }
        let ops = rng.gen_range(1..=self.cfg.max_ops);
        paused_if_reads_only(
            (0..ops)
                .map(|_| {
                    let slot = rng.gen_range(0..n);
                    if rng.gen_bool(0.5) {
                        Planned::ReadSlot(slot)
                    } else {
                        Planned::AppendSlot(slot)
                    }
                })
                .collect(),
        )
    }

    /// [`Self::execute`] of a plan of reads only, through a snapshot's `&Tx`.
    fn read_keys(
        &self,
        store: &Store,
        tx: &Tx<'_>,
        plan: &[Planned],
        ops: &mut Vec<Op>,
    ) -> Result<()> {
        for p in plan {
            match *p {
                Planned::Read(key) => {
                    let list = store.read(tx, key)?;
                    ops.push(Op::Read { key, list });
                }
                Planned::ReadSlot(slot) => {
                    let (key, list) = self.slot_key(store, tx, slot)?;
                    ops.push(Op::Read { key, list });
                }
                Planned::Pause => self.pause(),
                Planned::Append(_) | Planned::AppendSlot(_) => {}
            }
        }
        Ok(())
    }

    /// Wait `pause` (yielding, so the other threads commit meanwhile).
    fn pause(&self) {
        let t = Instant::now();
        while t.elapsed() < self.cfg.pause {
            std::thread::yield_now();
        }
    }

    fn execute(
        &self,
        store: &Store,
        tx: &mut Tx<'_>,
        plan: &[Planned],
        ops: &mut Vec<Op>,
    ) -> Result<()> {
        for p in plan {
            match *p {
                Planned::Read(_) | Planned::ReadSlot(_) => {
                    self.read_keys(store, tx, std::slice::from_ref(p), ops)?
                }
                Planned::AppendSlot(slot) => {
                    let (key, _) = self.slot_key(store, tx, slot)?;
                    let value: Value = self.next_value.fetch_add(1, Ordering::Relaxed);
                    ops.push(Op::Append { key, value });
                    store.append(tx, key, value)?;
                }
                Planned::Append(key) => {
                    let value: Value = self.next_value.fetch_add(1, Ordering::Relaxed);
                    // Recorded before it is tried: if the attempt aborts, the value is
                    // known to be an aborted one.
                    ops.push(Op::Append { key, value });
                    store.append(tx, key, value)?;
                }
                Planned::Pause => self.pause(),
            }
        }
        Ok(())
    }

    /// Run `txns` transactions (split over the threads) in epoch `epoch`. Threads stop
    /// early once `crashed()` returns true. Fails on an engine error other than a
    /// conflict (which `run` retries), e.g. a full pool.
    pub fn run(
        &self,
        pool: &Pool,
        epoch: u32,
        txns: usize,
        crashed: &(dyn Fn() -> bool + Sync),
    ) -> Result<History> {
        self.run_journaled(pool, epoch, txns, crashed, None)
    }

    /// [`Workload::run`], telling `journal` of every attempt that appends before it
    /// tries to commit, and of every transaction's records once they are known: what a
    /// process that may be killed hands out as it goes ([`Journal`]).
    ///
    /// A transaction that fails with `Error::PeerDied` (a pool shared by processes,
    /// stopped by the death of one: see `pisces::Sharing`) is recorded as
    /// indeterminate (its commit may have taken effect; the pool's next recovery keeps
    /// it or drops it whole), and its thread stops.
    pub fn run_journaled(
        &self,
        pool: &Pool,
        epoch: u32,
        txns: usize,
        crashed: &(dyn Fn() -> bool + Sync),
        journal: Option<&dyn Journal>,
    ) -> Result<History> {
        let store = Store::open(pool)?;
        let threads = self.cfg.threads;
        let results: Vec<Result<Vec<Txn>>> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..threads)
                .map(|t| {
                    let n = txns / threads + usize::from(t < txns % threads);
                    let store = &store;
                    let ends = Ends { crashed, journal };
                    s.spawn(move || self.thread_run(pool, store, t, epoch, n, ends))
                })
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join()
                        .unwrap_or_else(|_| Err(Error::abort("a workload thread panicked")))
                })
                .collect()
        });
        let mut h = History::new();
        for r in results {
            h.txns.extend(r?);
        }
        Ok(h)
    }

    fn thread_run(
        &self,
        pool: &Pool,
        store: &Store,
        thread: usize,
        epoch: u32,
        n: usize,
        Ends { crashed, journal }: Ends<'_>,
    ) -> Result<Vec<Txn>> {
        let mut h = pool.handle()?;
        let seed = self.cfg.seed
            ^ (u64::from(epoch) << 48)
            ^ (thread as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15)
            ^ (self.cfg.process as u64).wrapping_mul(0xD1B5_4A32_D192_ED03);
        let mut rng = StdRng::seed_from_u64(seed);
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            if crashed() {
                break;
            }
            let plan = self.plan(&mut rng)?;
            let mut attempts: Vec<Vec<Op>> = Vec::new();
            // A plan of reads only runs as a snapshot (`ThreadHandle::read`), the path
            // of read-only transactions, unless the run asks for an isolation level.
            let r = if reads_only(&plan) && self.cfg.tx_options.isolation.is_none() {
                h.read(|tx| {
                    let mut ops = Vec::with_capacity(plan.len());
                    let r = self.read_keys(store, tx, &plan, &mut ops);
                    attempts.push(ops);
                    r
                })
            } else {
                h.run_with(self.cfg.tx_options, |tx| {
                    let mut ops = Vec::with_capacity(plan.len());
                    let r = self.execute(store, tx, &plan, &mut ops);
                    if let (Ok(()), Some(j)) = (&r, journal) {
                        if ops.iter().any(|o| matches!(o, Op::Append { .. })) {
                            j.attempt(thread, &ops);
                        }
                    }
                    attempts.push(ops);
                    r
                })
            };
            let stopped = matches!(r, Err(Error::PeerDied { .. }));
            let last = match r {
                Ok(()) if crashed() => Outcome::Indeterminate,
                Ok(()) => Outcome::Committed,
                Err(_) if stopped => Outcome::Indeterminate,
                Err(_) => Outcome::Aborted,
            };
            let first_record = out.len();
            let k = attempts.len();
            for (i, ops) in attempts.into_iter().enumerate() {
                let outcome = if i + 1 == k { last } else { Outcome::Aborted };
                let appended = ops.iter().any(|o| matches!(o, Op::Append { .. }));
                if outcome == Outcome::Aborted && !appended {
                    continue;
                }
                out.push(Txn {
                    thread,
                    epoch,
                    outcome,
                    ops,
                });
            }
            if let Some(j) = journal {
                j.resolved(&out[first_record..]);
            }
            if let Err(e) = r {
                if crashed() || stopped {
                    break;
                }
                return Err(e);
            }
        }
        Ok(out)
    }

    /// Read every key used so far, in read-only transactions of 64 keys each, recorded
    /// as thread `threads` (one past the workload's threads) in epoch `epoch`.
    pub fn read_all(&self, pool: &Pool, epoch: u32) -> Result<History> {
        self.read_keys_below(pool, epoch, self.keys_used())
    }

    /// [`Self::read_all`] of keys `0..keys` (e.g. the most keys any of several
    /// processes used).
    pub fn read_keys_below(&self, pool: &Pool, epoch: u32, keys: u64) -> Result<History> {
        const BATCH: u64 = 64;
        let store = Store::open(pool)?;
        let mut h = pool.handle()?;
        let mut out = History::new();
        let mut first = 0;
        while first < keys {
            let last = (first + BATCH).min(keys);
            let ops = h.read(|tx| {
                (first..last)
                    .map(|key| {
                        Ok(Op::Read {
                            key,
                            list: store.read(tx, key)?,
                        })
                    })
                    .collect::<Result<Vec<Op>>>()
            })?;
            out.push(Txn {
                thread: self.cfg.threads,
                epoch,
                outcome: Outcome::Committed,
                ops,
            });
            first = last;
        }
        Ok(out)
    }
}
