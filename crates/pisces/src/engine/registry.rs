//! The engine registry: the one list of engines, and the enums that dispatch to them.
//!
//! Adding an engine = a folder under `engine/` implementing [`EngineDef`], and one line
//! in the `engines!` invocation below. The macro generates
//! * [`EngineId`], the public name of each engine (its discriminant is the id the
//!   superblock records), with names, summaries and isolation levels from the defs;
//! * `AnyEngine` / `AnyThread`, enums over the engines' pool and thread states, whose
//!   methods `match` on the variant: static dispatch that the compiler inlines into the
//!   transaction API (no `dyn` on the hot path);
//! * the factory functions `Pool` calls at create / open.

use super::{
    bare, mvcc, pisces, pmdk, sp3, spht, timestone, undo, DurableToken, Engine, EngineDef,
    EngineOptions, EngineThread, FastPath, Inspection, LentThread, OpenCtx, Storage,
};
use crate::heap::layout::Regions;
use crate::heap::Heap;
use crate::tx_options::{Isolation, TxOptions};
use crate::{Error, Result};
use std::path::Path;
use std::sync::Arc;

/// An engine's read, out of line (see `AnyThread::read_fn`): the thread, the offset
/// and length, and the flag a conflict sets (the `Tx`'s).
pub(crate) type ReadFn = fn(&AnyThread, u64, usize, &std::cell::Cell<bool>) -> Result<*const u8>;

/// The engine thread of an [`AnyThread`] whose variant is engine `Self`'s.
trait ThreadOf: EngineDef {
    fn thread_of(th: &AnyThread) -> Option<&Self::Thread>;
}

/// Engine `D`'s read (see `AnyThread::read_fn`).
#[inline(never)]
fn read_of<D: ThreadOf>(
    th: &AnyThread,
    off: u64,
    len: usize,
    conflicted: &std::cell::Cell<bool>,
) -> Result<*const u8> {
    #[cfg(test)]
    tests::READS_OF.with(|c| c.set(c.get() + 1));
    let r = match D::thread_of(th) {
        Some(t) => t.read(off, len),
        // Never taken while `read_fn` maps each variant to its own engine's function
        // (`tests::each_engine_reads_through_its_own_function`); correct regardless.
        None => {
            #[cfg(test)]
            tests::READS_MISROUTED.with(|c| c.set(c.get() + 1));
            th.read_dispatch(off, len)
        }
    };
    // The conflict noted here rather than by the caller, so that the caller's call of
    // this function is its last step (a jump).
    if let Err(Error::Conflict) = r {
        conflicted.set(true);
    }
    r
}

macro_rules! engines {
    ($( $(#[$doc:meta])* $variant:ident = $def:ty, )+) => {
        /// Identifies an engine: its name on the command line and in the C ABI, and the
        /// id the superblock records.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[repr(u32)]
        #[non_exhaustive]
        pub enum EngineId {
            $( $(#[$doc])* $variant = <$def as EngineDef>::ID, )+
        }

        impl EngineId {
            /// Every engine of the registry, in benchmark order (also those this build
            /// cannot run: see [`EngineId::available`]).
            pub const ALL: &'static [EngineId] = &[$( EngineId::$variant, )+];

            /// Stable name.
            pub fn name(self) -> &'static str {
                match self { $( EngineId::$variant => <$def as EngineDef>::NAME, )+ }
            }
            /// One line saying what the engine is.
            pub fn summary(self) -> &'static str {
                match self { $( EngineId::$variant => <$def as EngineDef>::SUMMARY, )+ }
            }
            /// The strongest isolation level the engine offers (weaker requests are
            /// accepted too).
            pub fn isolation(self) -> Isolation {
                match self { $( EngineId::$variant => <$def as EngineDef>::ISOLATION, )+ }
            }
            /// The isolation level of a transaction that asks for none
            /// ([`TxOptions::isolation`] `None`, and every [`Pool::read`](crate::Pool::read)):
            /// the engine's strongest ([`EngineId::isolation`]), except on an engine that
            /// offers several levels per transaction (`timestone`: snapshot isolation).
            ///
            /// ```
            /// use pisces::{EngineId, Isolation};
            /// assert_eq!(EngineId::Pisces.default_isolation(), Isolation::Snapshot);
            /// assert_eq!(EngineId::Timestone.isolation(), Isolation::Linearizable);
            /// assert_eq!(EngineId::Timestone.default_isolation(), Isolation::Snapshot);
            /// ```
            pub fn default_isolation(self) -> Isolation {
                match self { $( EngineId::$variant => <$def as EngineDef>::DEFAULT_ISOLATION, )+ }
            }
            /// Whether committed transactions survive a crash.
            pub fn is_durable(self) -> bool {
                match self { $( EngineId::$variant => <$def as EngineDef>::DURABLE, )+ }
            }
            /// From the id stored in a superblock.
            pub fn from_u32(id: u32) -> Option<EngineId> {
                $( if id == <$def as EngineDef>::ID { return Some(EngineId::$variant); } )+
                None
            }
            /// The option sets test campaigns cycle through (each ablation switch on
            /// and off; just the defaults for an engine without options).
            pub fn option_sets(self) -> Vec<EngineOptions> {
                match self { $( EngineId::$variant => <$def as EngineDef>::option_sets(), )+ }
            }
            /// The engine's mutation points (`EngineDef::MUTATIONS`): the protocol
            /// steps a mutation test can remove. Test builds only.
            #[cfg(feature = "mutation")]
            #[doc(hidden)]
            pub fn mutations(self) -> &'static [&'static crate::mutation::MutationPoint] {
                match self { $( EngineId::$variant => <$def as EngineDef>::MUTATIONS, )+ }
            }
            /// The engine's hook points (`EngineDef::HOOKS`): where a test can pause a
            /// thread or slow it down. Test builds only.
            #[cfg(feature = "mutation")]
            #[doc(hidden)]
            pub fn hooks(self) -> &'static [&'static crate::mutation::HookPoint] {
                match self { $( EngineId::$variant => <$def as EngineDef>::HOOKS, )+ }
            }
            /// Why the engine cannot run on a pool that grows, if it cannot.
            pub(crate) fn growth_refused(self) -> Option<&'static str> {
                match self { $( EngineId::$variant => <$def as EngineDef>::GROWTH_REFUSED, )+ }
            }
            /// Why the engine cannot run on a pool that several processes open at once
            /// ([`Sharing::Shared`](crate::Sharing::Shared)), if it cannot; `None` for
            /// the engines that share.
            ///
            /// ```
            /// use pisces::EngineId;
            /// assert!(EngineId::Pisces.sharing_refused().is_none());
            /// assert!(EngineId::Mvcc.sharing_refused().is_some());
            /// ```
            pub fn sharing_refused(self) -> Option<&'static str> {
                match self { $( EngineId::$variant => <$def as EngineDef>::SHARING_REFUSED, )+ }
            }
            pub(crate) fn storage(self) -> Storage {
                match self { $( EngineId::$variant => <$def as EngineDef>::STORAGE, )+ }
            }
            pub(crate) fn regions(self, ctx: &OpenCtx) -> Regions {
                match self { $( EngineId::$variant => <$def as EngineDef>::regions(ctx), )+ }
            }
            /// Describe and verify the engine's persistent state (tools; writes nothing).
            #[cfg_attr(not(feature = "tools"), allow(dead_code))] // read by the tools only
            pub(crate) fn inspect(self, heap: &Heap) -> Inspection {
                match self { $( EngineId::$variant => <$def as EngineDef>::inspect(heap), )+ }
            }
        }

        /// Pool-wide state of whichever engine runs the pool.
        pub(crate) enum AnyEngine {
            $( $variant(<$def as EngineDef>::Engine), )+
        }

        /// One thread's state of whichever engine runs the pool.
        ///
        /// `repr(u8)`: an explicit tag byte, so the dispatch in every transaction's
        /// begin and commit tests the engine with one compare of that byte (a niche
        /// layout would store the tag inside a field of a variant, which the dispatch
        /// would have to decode first).
        #[repr(u8)]
        pub(crate) enum AnyThread {
            $( $variant(<$def as EngineDef>::Thread), )+
        }

        $( impl ThreadOf for $def {
            #[inline(always)]
            fn thread_of(th: &AnyThread) -> Option<&Self::Thread> {
                match th {
                    AnyThread::$variant(t) => Some(t),
                    #[allow(unreachable_patterns)]
                    _ => None,
                }
            }
        } )+

        /// Open (recover) a pool of our format with engine `id`.
        pub(crate) fn open_heap(
            id: EngineId,
            heap: Arc<Heap>,
            opts: &EngineOptions,
            ctx: &OpenCtx,
        ) -> Result<AnyEngine> {
            match id {
                $( EngineId::$variant => Ok(AnyEngine::$variant(<$def as EngineDef>::open(heap, opts, ctx)?)), )+
            }
        }

        /// Create or open a pool in the engine's own file format.
        pub(crate) fn open_file(id: EngineId, path: &Path, ctx: &OpenCtx, create: bool) -> Result<AnyEngine> {
            match id {
                $( EngineId::$variant => Ok(AnyEngine::$variant(<$def as EngineDef>::open_file(path, ctx, create)?)), )+
            }
        }

        impl AnyEngine {
            pub(crate) fn id(&self) -> EngineId {
                match self { $( AnyEngine::$variant(_) => EngineId::$variant, )+ }
            }
            pub(crate) fn thread(&self, slot: usize) -> Result<AnyThread> {
                match self { $( AnyEngine::$variant(e) => Ok(AnyThread::$variant(e.thread(slot)?)), )+ }
            }
            pub(crate) fn quiesce(&self) {
                match self { $( AnyEngine::$variant(e) => e.quiesce(), )+ }
            }
            pub(crate) fn write_back_all(&self) {
                match self { $( AnyEngine::$variant(e) => e.write_back_all(), )+ }
            }
            pub(crate) fn close(&self) {
                match self { $( AnyEngine::$variant(e) => e.close(), )+ }
            }
            pub(crate) fn heap(&self) -> Option<&Arc<Heap>> {
                match self { $( AnyEngine::$variant(e) => e.heap(), )+ }
            }
            pub(crate) fn root_slot(&self) -> u64 {
                match self { $( AnyEngine::$variant(e) => e.root_slot(), )+ }
            }
            pub(crate) fn sync(&self) -> Result<()> {
                match self { $( AnyEngine::$variant(e) => e.sync(), )+ }
            }
            pub(crate) fn shutdown(&self) {
                match self { $( AnyEngine::$variant(e) => e.shutdown(), )+ }
            }
            pub(crate) fn abandoned_slot(&self, owned: &dyn Fn(usize) -> bool) -> Option<usize> {
                match self { $( AnyEngine::$variant(e) => e.abandoned_slot(owned), )+ }
            }
        }

        impl AnyThread {
            /// Run `f` on the thread state an engine lent (recovery's re-execution of
            /// an operation), as the variant of the engine that lent it, and put the
            /// state back into the engine's slot afterwards.
            // An engine left out of the build has an uninhabited thread type: its arm
            // ends at the `take` (it can never lend a thread), the rest is unreachable.
            #[allow(unreachable_code, unused_variables)]
            pub(crate) fn lend<R>(mut lent: LentThread<'_>, f: impl FnOnce(&mut AnyThread) -> R) -> R {
                $( if lent.engine() == <$def as EngineDef>::ID {
                    let slot = lent
                        .slot::<<$def as EngineDef>::Thread>()
                        .expect("LentThread::new pairs an engine's id with its thread type");
                    let mut any = AnyThread::$variant(slot.take().expect("a lent thread is in its slot"));
                    let r = f(&mut any);
                    if let AnyThread::$variant(t) = any {
                        *slot = Some(t);
                    }
                    return r;
                } )+
                unreachable!("LentThread::new takes the id of a registered engine")
            }
            #[inline]
            pub(crate) fn id(&self) -> EngineId {
                match self { $( AnyThread::$variant(_) => EngineId::$variant, )+ }
            }
            /// [`EngineThread::slot`].
            pub(crate) fn slot(&self) -> usize {
                match self { $( AnyThread::$variant(t) => t.slot(), )+ }
            }
            /// `begin`, then the new attempt's read fast path ([`FastPath::NONE`] if
            /// the engine has none): one dispatch for both, as every attempt of `run`
            /// needs both. The arms of the engines that declare
            /// [`EngineDef::INLINE_DISPATCH`] are inlined into `run` (a test of a
            /// constant: the other engines' tests compile to nothing here); the others
            /// are one call away (`begin_fast_dispatch`).
            #[inline(always)]
            pub(crate) fn begin_fast(&mut self, opts: &TxOptions) -> FastPath {
                // One `if let` per inlined engine, not a `match` with guards: for
                // the guards, the compiler tests "any other engine" first, a range
                // compare and a jump more on the inlined engines' path.
                $( if <$def as EngineDef>::INLINE_DISPATCH {
                    if let AnyThread::$variant(t) = self {
                        t.begin(opts);
                        return t.fast_reads();
                    }
                } )+
                self.begin_fast_dispatch(opts)
            }
            #[inline(never)]
            fn begin_fast_dispatch(&mut self, opts: &TxOptions) -> FastPath {
                match self {
                    $( AnyThread::$variant(t) => {
                        t.begin(opts);
                        t.fast_reads()
                    } )+
                }
            }
            /// `commit`, then (if `wait`) `wait_durable` on its token, in one dispatch.
            /// The outer error is the commit's (the attempt is rolled back), the inner
            /// one the wait's (the transaction committed). The arms of the engines that
            /// declare [`EngineDef::INLINE_DISPATCH`] are inlined, as in `begin_fast`.
            #[inline(always)]
            pub(crate) fn commit_then_wait(&mut self, wait: bool) -> Result<Result<()>> {
                $( if <$def as EngineDef>::INLINE_DISPATCH {
                    if let AnyThread::$variant(t) = self {
                        let token = t.commit()?;
                        return Ok(if wait { t.wait_durable(token) } else { Ok(()) });
                    }
                } )+
                self.commit_then_wait_dispatch(wait)
            }
            #[inline(never)]
            fn commit_then_wait_dispatch(&mut self, wait: bool) -> Result<Result<()>> {
                match self {
                    $( AnyThread::$variant(t) => {
                        let token = t.commit()?;
                        Ok(if wait { t.wait_durable(token) } else { Ok(()) })
                    } )+
                }
            }
            /// [`EngineThread::begin_snapshot`], inlined for the engines that declare
            /// [`EngineDef::INLINE_DISPATCH`] as in `begin_fast`.
            #[inline(always)]
            pub(crate) fn begin_snapshot(&mut self) -> FastPath {
                $( if <$def as EngineDef>::INLINE_DISPATCH {
                    if let AnyThread::$variant(t) = self {
                        return t.begin_snapshot();
                    }
                } )+
                self.begin_snapshot_dispatch()
            }
            #[inline(never)]
            fn begin_snapshot_dispatch(&mut self) -> FastPath {
                match self { $( AnyThread::$variant(t) => t.begin_snapshot(), )+ }
            }
            /// [`EngineThread::end_snapshot`], inlined as `begin_snapshot`.
            #[inline(always)]
            pub(crate) fn end_snapshot(&mut self, wait: bool) -> Result<Result<()>> {
                $( if <$def as EngineDef>::INLINE_DISPATCH {
                    if let AnyThread::$variant(t) = self {
                        return t.end_snapshot(wait);
                    }
                } )+
                self.end_snapshot_dispatch(wait)
            }
            #[inline(never)]
            fn end_snapshot_dispatch(&mut self, wait: bool) -> Result<Result<()>> {
                match self { $( AnyThread::$variant(t) => t.end_snapshot(wait), )+ }
            }
            /// This thread's engine's [`EngineThread::read`] as a function of its own
            /// (`read_of`, out of line, one engine's code): where `Tx::read_engine`
            /// jumps when the fast path declines a read, so that a read pays no
            /// `match` over every engine and a prologue sized for its engine's read
            /// alone. The engines of [`EngineDef::INLINE_DISPATCH`] are tested first,
            /// as in `begin_snapshot`: a compare and a direct jump for them, the table
            /// for the others.
            #[inline(always)]
            pub(crate) fn read_fn(&self) -> ReadFn {
                $( if <$def as EngineDef>::INLINE_DISPATCH {
                    if let AnyThread::$variant(_) = self {
                        return read_of::<$def>;
                    }
                } )+
                match self { $( AnyThread::$variant(_) => read_of::<$def>, )+ }
            }
            /// Any engine's read, by `match`: `read_of`'s fallback, never taken while
            /// `read_fn` maps each variant to its own engine's function.
            #[cold]
            #[inline(never)]
            fn read_dispatch(&self, off: u64, len: usize) -> Result<*const u8> {
                match self { $( AnyThread::$variant(t) => t.read(off, len), )+ }
            }
            pub(crate) fn ro_locked_reads(&self) -> u64 {
                match self { $( AnyThread::$variant(t) => t.ro_locked_reads(), )+ }
            }
            #[inline]
            pub(crate) fn write(&mut self, off: u64, len: usize) -> Result<*mut u8> {
                match self { $( AnyThread::$variant(t) => t.write(off, len), )+ }
            }
            #[inline]
            pub(crate) fn alloc(&mut self, len: usize) -> Result<u64> {
                match self { $( AnyThread::$variant(t) => t.alloc(len), )+ }
            }
            #[inline]
            pub(crate) fn set_nested(&mut self, nested: bool) {
                match self { $( AnyThread::$variant(t) => t.set_nested(nested), )+ }
            }
            #[inline]
            pub(crate) fn free(&mut self, off: u64) -> Result<()> {
                match self { $( AnyThread::$variant(t) => t.free(off), )+ }
            }
            #[inline]
            pub(crate) fn wait_durable(&mut self, token: DurableToken) -> Result<()> {
                match self { $( AnyThread::$variant(t) => t.wait_durable(token), )+ }
            }
            #[inline]
            pub(crate) fn abort(&mut self) {
                match self { $( AnyThread::$variant(t) => t.abort(), )+ }
            }
            pub(crate) fn set_operation(&mut self, op: Option<(u32, &[u8])>) {
                match self { $( AnyThread::$variant(t) => t.set_operation(op), )+ }
            }
            pub(crate) fn after_abort(&mut self) {
                match self { $( AnyThread::$variant(t) => t.after_abort(), )+ }
            }
            pub(crate) fn quiesce(&mut self) {
                match self { $( AnyThread::$variant(t) => t.quiesce(), )+ }
            }
        }
    };
}

engines! {
    /// Pisces (USENIX ATC 2019), the default: snapshot isolation, readers never wait.
    Pisces = pisces::Pisces,
    /// Baseline: undo logging with strict two-phase locking.
    Undo = undo::Undo,
    /// Baseline: the multi-version strawman of the Pisces paper's §2.2.
    Mvcc = mvcc::Mvcc,
    /// Peer: PMDK's libpmemobj through FFI (its own pool file); built with the `pmdk`
    /// feature where libpmemobj is found ([`EngineId::available`]).
    Pmdk = pmdk::Pmdk,
    /// Baseline: Pisces' concurrency control with no persistence (the upper bound).
    Volatile = pisces::Volatile,
    /// SP3: serializable OCC whose versions are visible before they persist.
    Sp3 = sp3::Sp3,
    /// SPHT: STM on a working snapshot, global durability marker, linked replay.
    Spht = spht::Spht,
    /// TimeStone (ASPLOS 2020): MVCC with TOC logging, operation re-execution in
    /// recovery, per-transaction isolation up to linearizable.
    Timestone = timestone::Timestone,
    /// Reference: no transactional instrumentation (the physical limit of read paths).
    Bare = bare::Bare,
}

impl EngineId {
    /// From a name given on the command line or in a config.
    ///
    /// ```
    /// use pisces::EngineId;
    /// assert_eq!(EngineId::from_name("undo"), Some(EngineId::Undo));
    /// assert_eq!(EngineId::from_name("nope"), None);
    /// ```
    pub fn from_name(name: &str) -> Option<EngineId> {
        Self::ALL.iter().copied().find(|e| e.name() == name)
    }
    /// Name for an id read from a pool, known or not.
    pub fn describe(id: u32) -> String {
        Self::from_u32(id).map_or_else(|| format!("unknown engine #{id}"), |e| e.name().to_string())
    }
    /// The engine's mutation points ([`EngineId::mutations`]) and, for an engine whose
    /// pool is the heap, the heap's: every point a test can activate for the engine.
    #[cfg(feature = "mutation")]
    fn mutation_points(self) -> impl Iterator<Item = &'static crate::mutation::MutationPoint> {
        let heap: &'static [&'static crate::mutation::MutationPoint] = match self.storage() {
            Storage::Heap => crate::heap::MUTATIONS,
            Storage::OwnFile => &[],
        };
        self.mutations().iter().chain(heap).copied()
    }
    /// The mutation point named `name` among the engine's ([`EngineId::mutations`]) and,
    /// for an engine whose pool is the heap, the heap's. Test builds only.
    #[cfg(feature = "mutation")]
    #[doc(hidden)]
    pub fn mutation(self, name: &str) -> Option<&'static crate::mutation::MutationPoint> {
        self.mutation_points().find(|p| p.name == name)
    }
    /// The hook point named `name` among the engine's ([`EngineId::hooks`]). Test
    /// builds only.
    #[cfg(feature = "mutation")]
    #[doc(hidden)]
    pub fn hook(self, name: &str) -> Option<&'static crate::mutation::HookPoint> {
        self.hooks().iter().copied().find(|p| p.name == name)
    }
    /// The names [`EngineId::mutation`] accepts, in order. Test builds only.
    #[cfg(feature = "mutation")]
    #[doc(hidden)]
    pub fn mutation_names(self) -> Vec<&'static str> {
        self.mutation_points().map(|p| p.name).collect()
    }
    /// Whether this build can run the engine (`pmdk` needs the `pmdk` feature and
    /// libpmemobj at build time).
    pub fn available(self) -> bool {
        self != EngineId::Pmdk || pmdk::AVAILABLE
    }
    /// Whether the engine keeps its pool in its own file format (`pmdk`): such pools are
    /// created and opened by path only, not on a [`crate::medium::Medium`].
    pub fn has_own_pool_format(self) -> bool {
        self.storage() == Storage::OwnFile
    }
    /// Whether transactions may ask for isolation level `level`.
    pub fn offers(self, level: Isolation) -> bool {
        level <= self.isolation()
    }
}

impl std::fmt::Display for EngineId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A name, or an error that lists the engines this build can run (not those left out
/// of it, such as `pmdk` without its feature).
///
/// ```
/// use pisces::EngineId;
/// assert_eq!("sp3".parse::<EngineId>().unwrap(), EngineId::Sp3);
/// let e = "nope".parse::<EngineId>().unwrap_err().to_string();
/// assert!(e.contains("unknown engine `nope` (engines: pisces, undo, mvcc, "), "{e}");
/// ```
impl std::str::FromStr for EngineId {
    type Err = crate::Error;
    fn from_str(s: &str) -> Result<EngineId> {
        EngineId::from_name(s).ok_or_else(|| {
            let names: Vec<&str> = EngineId::ALL
                .iter()
                .filter(|e| e.available())
                .map(|e| e.name())
                .collect();
            crate::Error::invalid_config(format!(
                "unknown engine `{s}` (engines: {})",
                names.join(", ")
            ))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::EngineId;
    use crate::{Config, Pool};
    use std::cell::Cell;

    thread_local! {
        /// Calls of `read_of` on this thread, and those whose variant was another
        /// engine's.
        pub(super) static READS_OF: Cell<u64> = const { Cell::new(0) };
        pub(super) static READS_MISROUTED: Cell<u64> = const { Cell::new(0) };
    }

    /// Every engine's reads that its fast path declines go through `read_of` of its own
    /// engine: `read_fn` maps each variant to its own function (an entry naming another
    /// engine's would still read correctly, through the fallback dispatch, so only
    /// these counts show it).
    #[test]
    fn each_engine_reads_through_its_own_function() {
        for &id in EngineId::ALL.iter().filter(|e| e.available()) {
            let dir = tempfile::tempdir_in("/dev/shm").unwrap();
            let cfg = Config::default()
                .engine(id)
                .size(8 << 20)
                .max_threads(2)
                .log_bytes_per_thread(256 << 10);
            let pool = Pool::create(dir.path().join("p.pool"), cfg).unwrap();
            // A large object (32 KiB): outside every engine's small-block fast path.
            let big = pool.run(|tx| tx.alloc([7u64; 4096])).unwrap();
            let before = READS_OF.with(Cell::get);
            let v = pool.run(|tx| Ok(tx.read(big)?[4095])).unwrap();
            assert_eq!(v, 7, "{id:?}");
            let v = pool.read(|tx| Ok(tx.read(big)?[0])).unwrap();
            assert_eq!(v, 7, "{id:?}");
            assert!(
                READS_OF.with(Cell::get) > before,
                "{id:?}: no read reached the engine's function"
            );
            assert_eq!(READS_MISROUTED.with(Cell::get), 0, "{id:?}");
        }
    }

    /// The unknown-engine error names exactly the engines of this build: run with and
    /// without `PISCES_NO_PMDK=1`, it sees `pmdk` listed only where it is built.
    #[test]
    fn unknown_engine_lists_the_engines_of_this_build() {
        let msg = "nope".parse::<EngineId>().unwrap_err().to_string();
        let list = msg
            .split_once("(engines: ")
            .and_then(|(_, rest)| rest.strip_suffix(')'))
            .unwrap_or_else(|| panic!("no engine list in: {msg}"));
        let listed: Vec<&str> = list.split(", ").collect();
        let built: Vec<&str> = EngineId::ALL
            .iter()
            .filter(|e| e.available())
            .map(|e| e.name())
            .collect();
        assert_eq!(listed, built, "{msg}");
        assert!(built.contains(&"pisces"));
        assert_eq!(built.contains(&"pmdk"), cfg!(pmdk));
    }
}
