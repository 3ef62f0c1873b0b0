//! The crash simulator: a medium that knows which bytes a power failure could keep.
//!
//! [`SimMedium`] has two images:
//!
//! * the **working image**, an anonymous zeroed mapping that the engine reads and writes
//!   directly through [`Medium::base`], exactly as it would a mapped pool file (the
//!   processor's caches plus memory, as the running program sees them);
//! * the **durable image**, a `Vec<u8>` standing for what persistent memory holds. It
//!   changes only at a fence: when a thread fences, every cache line *that thread*
//!   flushed since its previous fence is written to the durable image (x86 `sfence`
//!   orders only the issuing thread's `clwb`/`clflushopt`).
//!
//! What a fence writes is the line's content **at the time of the flush**, not at the
//! time of the fence. On x86 a `clwb` is ordered after older stores to its line but not
//! after younger ones, so a store between the flush and the fence may or may not be in
//! the written-back line. The simulator takes the flush-time content (a thread that
//! stores into a line after flushing it has to flush it again to be sure) and leaves
//! the younger store in the working image, where the adversary below may still let it
//! reach the durable image as an eviction. Both hardware outcomes are therefore
//! reachable. A write-back never makes a line older: when two threads flushed the same
//! line, the later flush's content wins whichever thread fences first (each durable
//! line remembers the event number of the flush it came from).
//!
//! All flushes and fences of all threads are serialized by one mutex and numbered
//! globally (flushes and fences separately, from 0). [`SimConfig::crash_at`] names the
//! event to crash *instead of*: `CrashPoint::Fence(n)` crashes in place of the n-th
//! fence, so the durable image holds exactly what the first n fences made durable. At
//! the crash, under the mutex, the simulator captures the durable image, a copy of the
//! working image (read with relaxed 8-byte atomic loads, since other threads may be
//! storing) and the lines flushed but not yet fenced. From then on
//! [`SimMedium::crashed`] is true and every flush and fence is a no-op that never touches
//! the durable image: the state is frozen at one global point, and other threads keep
//! running until they notice `crashed()` and stop.
//!
//! # Crash images
//! [`SimMedium::crash_image`] builds the bytes a power failure at the crash point could
//! leave: the durable image, plus, for every 8-byte word where the captured working
//! image differs from it, an [`Adversary`]'s choice of whether the newer value made it.
//! Words are decided independently, since x86 guarantees failure atomicity only for
//! aligned 8-byte stores. Two kinds of words are offered:
//!
//! * words of lines **flushed but not fenced**: the write-back may or may not have
//!   completed (probability `p_keep_flushed`). If the line was stored to again after
//!   the flush, the kept value is either the flush-time value or the latest one;
//! * words of lines **written but never flushed**: the cache may evict any dirty line
//!   at any time (probability `p_keep_unflushed`).
//!
//! The adversary is seeded ([`SimConfig::seed`] together with the `seed` argument) and
//! deterministic: the same crash state and seeds give the same image, so a failing
//! case can be replayed. [`SimMedium::crash_image_now`] builds such an image for a
//! power failure *now*, without stopping the machine.
//!
//! [`SimMedium::from_image`] boots a new simulated machine from a crash image, so that
//! recovery runs on it as a fresh process would after the power came back, and can be
//! crashed in turn. [`SimMedium::fence_count`] and [`SimMedium::flush_count`] let a test
//! run a workload once, learn how many fences it issues, and re-run it crashing at each.
//!
//! # eADR
//! With [`SimConfig::domain`] [`PersistenceDomain::Eadr`] the simulated machine has
//! persistent caches: a store is durable once it is visible, so the crash image starts
//! from the working image, and `flush` writes nothing back (it counts no flushed
//! lines). What a crash may still lose is what a core had not made visible yet: a
//! suffix, in program order, of each thread's stores since its last fence (the fence
//! drains the store buffer). The simulator does not see stores, only the calls a
//! thread makes, so it takes a thread's `flush` calls since its last fence as the
//! points of its program order: flush `i` says "this thread's stores to these lines
//! so far", and the simulator keeps the lines' content at that moment. At the crash
//! the adversary picks, per thread, how many of those flushes survive (a prefix:
//! none with [`Adversary::DurableOnly`], all with [`Adversary::AllWritten`], uniformly
//! with `Random`); a line some thread flushed since its fence takes the content of the
//! newest surviving flush of it (of any thread), or the durable line when none
//! survives, or its latest content when a thread that flushed it lost nothing.
//! Streamed lines ([`Medium::write_lines`], non-temporal stores) bypass the caches:
//! they are pending until the thread's fence and decided per word, as flushed lines
//! are under ADR. A fence makes durable the latest content of every line the thread
//! flushed since its previous fence, and its streamed lines.
//!
//! Every state this builds is one the ADR adversary can build too (it keeps any subset
//! of the words not fenced), except intermediate flush-time contents of a line flushed
//! twice since a fence; what eADR adds is certainty: a store without its flush is
//! durable, always, where under ADR it is durable only if the adversary evicts it.
//!
//! # The page cache (the file medium)
//! With [`SimConfig::domain`] [`PersistenceDomain::PageCache`] the simulated machine
//! is an ordinary file mapped from the page cache, as the file medium
//! ([`pisces::medium::FileMedium`]) maps it. A fence persists nothing by itself and a
//! flush writes nothing back: `msync` of a page range is the only persist point, and
//! what a fence `msync`s is decided by the file medium's own bookkeeping
//! ([`PageTracker`]: the pages the fencing thread flushed since its last fence, near
//! ranges merged; [`GroupSync`]: one thread's `msync` serving the fences of others
//! that wait), run unchanged here, so a bug in it shows as lost data. An `msync`
//! makes durable the pages' content at that moment (not at flush time: the page
//! cache holds one copy). At the crash, every dirty page (its working content
//! differs from the durable one) may have been written back by the kernel at any time:
//! the adversary leaves it (probability `1 - p_keep_unflushed`), or takes its latest
//! content whole (three in four of the rest), or torn at 512-byte sectors (each
//! differing sector independently). Whether a thread flushed the page does not matter:
//! the kernel writes back dirty pages when it likes.
//!
//! Every state this builds is one the ADR adversary could build too (it keeps any
//! subset of the undecided words); what the model adds is that the persist points are
//! the file medium's `msync`s rather than the engine's fences.
//!
//! # Limitations
//! * A word's intermediate values are not offered: only its durable value, its value
//!   in a pending write-back, and its latest value. A word stored three times between
//!   two durable points can come back with the first or the last store, never the
//!   second (unless that was the one a flush captured).
//! * When several threads have the same line flushed and unfenced, only the most
//!   recent flush's content is offered as the pending write-back.
//! * eADR: a store no flush covers is kept as visible. A line whose flush is lost
//!   reverts whole to its durable content, which also drops stores to it that another
//!   thread made and fenced without flushing it (a state ADR reaches as well).
//! * Serializing every flush and fence under one mutex changes the timing of a
//!   multi-threaded program. The simulator checks crash consistency, not races.
//! * The working image captured at the crash is read word by word while other threads
//!   may still be storing; a store racing with the capture may or may not be in it.
//!   Such a store was not yet followed by a fence of its thread, so it is among the
//!   words the adversary decides independently anyway; a store that a thread makes
//!   *after* one of its flushes or fences became a no-op is never captured.

use pisces::medium::{GroupSync, Medium, MediumKind, PageTracker, PersistenceDomain, CACHE_LINE};
use pisces::tools::counters::{add_fence, add_lines_flushed, lines_in};
use pisces::tools::reserve::{Backing, Mapping};
use pisces::{Error, Result};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::ThreadId;

/// Bytes in a word: the unit of failure atomicity.
const WORD: usize = 8;
/// Words in a cache line.
const LINE_WORDS: usize = CACHE_LINE / WORD;
/// A page of the page cache: the unit the kernel writes back.
const PAGE: usize = 4096;
/// A disk sector: what a page write torn by a power failure is made of.
const SECTOR: usize = 512;

/// Where the simulated machine loses power.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum CrashPoint {
    /// Never (crash images can still be taken with [`SimMedium::crash_image_now`] or
    /// after [`SimMedium::crash_now`]).
    #[default]
    Never,
    /// Instead of executing the n-th fence (from 0, counted across all threads).
    Fence(u64),
    /// Instead of executing the n-th flush call (from 0, counted across all threads).
    Flush(u64),
}

/// How a crash image resolves the words that are not known to be durable.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Adversary {
    /// Only what fences made durable: every pending write-back and every dirty line is
    /// lost. The smallest image.
    DurableOnly,
    /// Each word independently: a word of a flushed-but-unfenced line keeps its newer
    /// value with probability `p_keep_flushed`, a word of a never-flushed dirty line
    /// (evicted by the cache) with probability `p_keep_unflushed`.
    Random {
        /// Probability that a word of a flushed, unfenced line reached the medium.
        p_keep_flushed: f64,
        /// Probability that a word of a never-flushed dirty line reached the medium.
        p_keep_unflushed: f64,
    },
    /// Every written word reached the medium with its latest value (as if the whole
    /// cache were written back just before the power failed).
    AllWritten,
}

impl Default for Adversary {
    /// `Random { 0.5, 0.5 }`: every subset of the undecided words is equally likely.
    fn default() -> Self {
        Adversary::Random {
            p_keep_flushed: 0.5,
            p_keep_unflushed: 0.5,
        }
    }
}

impl Adversary {
    fn validate(&self) -> Result<()> {
        if let Adversary::Random {
            p_keep_flushed,
            p_keep_unflushed,
        } = *self
        {
            for (name, p) in [
                ("p_keep_flushed", p_keep_flushed),
                ("p_keep_unflushed", p_keep_unflushed),
            ] {
                if !(0.0..=1.0).contains(&p) {
                    return Err(Error::InvalidConfig(
                        format!("adversary {name} = {p} is not a probability in [0, 1]").into(),
                    ));
                }
            }
        }
        Ok(())
    }

    /// The probabilities in `[0, 1]` (NaN counts as 0), so that drawing never panics.
    fn sanitized(self) -> Self {
        let clamp = |p: f64| if p.is_nan() { 0.0 } else { p.clamp(0.0, 1.0) };
        match self {
            Adversary::Random {
                p_keep_flushed,
                p_keep_unflushed,
            } => Adversary::Random {
                p_keep_flushed: clamp(p_keep_flushed),
                p_keep_unflushed: clamp(p_keep_unflushed),
            },
            other => other,
        }
    }
}

/// Configuration of a simulated machine.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct SimConfig {
    /// Where to crash.
    pub crash_at: CrashPoint,
    /// Seeds the adversary, together with the `seed` argument of the crash-image
    /// methods: the configuration seed names the run, the argument enumerates images of
    /// one crash.
    pub seed: u64,
    /// The adversary used by [`SimMedium::crash_image`] and
    /// [`SimMedium::crash_image_now`].
    pub adversary: Adversary,
    /// Bytes the image may grow to ([`Medium::grow`]); 0 or less than the image: it
    /// cannot grow.
    pub max_len: usize,
    /// The persistence domain of the simulated machine (see the module docs' eADR and
    /// page-cache sections).
    pub domain: PersistenceDomain,
}

impl SimConfig {
    /// Crash instead of the n-th fence.
    pub fn crash_at_fence(n: u64) -> Self {
        SimConfig {
            crash_at: CrashPoint::Fence(n),
            ..Self::default()
        }
    }
    /// Crash instead of the n-th flush.
    pub fn crash_at_flush(n: u64) -> Self {
        SimConfig {
            crash_at: CrashPoint::Flush(n),
            ..Self::default()
        }
    }
    /// The same configuration with another seed.
    pub fn with_seed(self, seed: u64) -> Self {
        SimConfig { seed, ..self }
    }
    /// The same configuration with another adversary.
    pub fn with_adversary(self, adversary: Adversary) -> Self {
        SimConfig { adversary, ..self }
    }
    /// The same configuration on a machine of persistence domain `domain`.
    pub fn with_domain(self, domain: PersistenceDomain) -> Self {
        SimConfig { domain, ..self }
    }
    /// The same configuration for an image that may grow to `max_len` bytes.
    pub fn with_max_len(self, max_len: usize) -> Self {
        SimConfig { max_len, ..self }
    }
}

/// What the adversary decided while building one crash image.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CrashStats {
    /// Lines flushed but not fenced at the crash.
    pub lines_flushed_unfenced: u64,
    /// Words of flushed-unfenced lines whose newer value was kept.
    pub words_flushed_unfenced_kept: u64,
    /// ... of which kept the flush-time value, older than the word's latest value.
    pub words_flushed_older_value_kept: u64,
    /// Words of flushed-unfenced lines left at their durable value.
    pub words_flushed_unfenced_dropped: u64,
    /// Words of never-flushed dirty lines whose newer value was kept (evicted).
    pub words_unflushed_kept: u64,
    /// Words of never-flushed dirty lines left at their durable value.
    pub words_unflushed_dropped: u64,
    /// eADR: flushes (points of a thread's program order since its fence) whose stores
    /// were lost.
    pub flushes_lost: u64,
    /// eADR: flushes since a fence whose stores survived.
    pub flushes_kept: u64,
    /// Page cache: dirty pages (content newer than the durable one) at the crash.
    pub pages_dirty: u64,
    /// Page cache: dirty pages written back whole.
    pub pages_written: u64,
    /// Page cache: dirty pages written back torn (some sectors only).
    pub pages_torn: u64,
}

/// A crash image and the choices that made it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CrashImage {
    /// The bytes a fresh process would find in the pool.
    pub image: Vec<u8>,
    /// The adversary's choices.
    pub stats: CrashStats,
}

/// When a crash happened, in events executed before it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CrashInfo {
    /// Fences executed before the crash.
    pub fences_before: u64,
    /// Flush calls executed before the crash.
    pub flushes_before: u64,
}

/// One thread's pending write-back of one line: the line at flush time.
#[derive(Clone, Copy, Debug)]
struct Pending {
    /// Global event number of the flush.
    version: u64,
    words: [u64; LINE_WORDS],
}

/// eADR: one flush of a thread since its last fence, a point of its program order:
/// the lines it names, with their content then.
#[derive(Clone, Debug)]
struct Group {
    /// Global event number of the flush.
    version: u64,
    lines: Vec<(usize, [u64; LINE_WORDS])>,
}

/// A crash state: everything a crash image is built from.
struct Frozen {
    info: CrashInfo,
    durable: Vec<u8>,
    working: Vec<u8>,
    /// Lines flushed but not fenced, with the content of the pending write-back when it
    /// is newer than the durable line.
    unfenced: BTreeMap<usize, Option<[u64; LINE_WORDS]>>,
    /// eADR: each thread's flushes since its last fence, in program order (threads
    /// ordered by their first such flush, so images are deterministic).
    groups: Vec<Vec<Group>>,
}

struct State {
    durable: Vec<u8>,
    /// Per line: event number of the flush whose content the durable line holds.
    line_version: Vec<u64>,
    /// Per thread: lines flushed since that thread's last fence.
    pending: HashMap<ThreadId, HashMap<usize, Pending>>,
    /// eADR: per thread, its flushes since its last fence.
    groups: HashMap<ThreadId, Vec<Group>>,
    flushes: u64,
    fences: u64,
    /// Flushes + fences: numbers the flush snapshots.
    events: u64,
    /// Set once, at the crash.
    frozen: Option<Arc<Frozen>>,
}

/// The crash-simulating medium. See the [module documentation](self).
///
/// Use it as `Arc<dyn Medium>` for the engine while the test keeps an `Arc<SimMedium>`
/// to query the crash state:
/// ```
/// # use std::sync::Arc;
/// # use pisces::medium::Medium;
/// use pisces_verify::sim::{SimConfig, SimMedium};
/// let sim = Arc::new(SimMedium::new(1 << 16, SimConfig::crash_at_fence(1)).unwrap());
/// let medium: Arc<dyn Medium> = sim.clone();
/// medium.persist(0, 8);
/// medium.persist(64, 8); // the crash happens instead of this fence
/// assert!(sim.crashed());
/// let image = sim.crash_image(0).unwrap();
/// assert_eq!(image.len(), 1 << 16);
/// ```
pub struct SimMedium {
    work: Mapping,
    cfg: SimConfig,
    /// Page cache: the file medium's record of what each thread's fence msyncs.
    pages: PageTracker,
    /// The file medium's cross-thread group commit of its `msync`s (page cache).
    group: GroupSync,
    /// Mirrors `State::frozen.is_some()` for the lock-free `crashed()` and fast paths.
    crashed: AtomicBool,
    state: Mutex<State>,
}

impl std::fmt::Debug for SimMedium {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimMedium")
            .field("len", &self.work.len())
            .field("cfg", &self.cfg)
            .field("crashed", &self.crashed())
            .finish()
    }
}

impl SimMedium {
    /// A fresh machine with a zeroed image of `len` bytes (a positive multiple of 64).
    pub fn new(len: usize, cfg: SimConfig) -> Result<Self> {
        Self::check(len, &cfg)?;
        let work = Mapping::new(None, len, cfg.max_len.max(len), Backing::Anonymous)?;
        Ok(Self::with_images(work, vec![0; len], cfg))
    }

    /// A machine booted from `image` (typically a crash image): both its durable and its
    /// working image start as `image`, as for a fresh process mapping the pool after a
    /// power failure. It can be crashed again by `cfg`.
    pub fn from_image(image: Vec<u8>, cfg: SimConfig) -> Result<Self> {
        Self::check(image.len(), &cfg)?;
        let work = Mapping::new(
            None,
            image.len(),
            cfg.max_len.max(image.len()),
            Backing::Anonymous,
        )?;
        // SAFETY: the mapping's usable part is `image.len()` bytes, fresh and not
        // shared with any other thread yet.
        unsafe { std::ptr::copy_nonoverlapping(image.as_ptr(), work.base(), image.len()) };
        Ok(Self::with_images(work, image, cfg))
    }

    fn check(len: usize, cfg: &SimConfig) -> Result<()> {
        if len == 0 || len & (CACHE_LINE - 1) != 0 {
            return Err(Error::InvalidConfig(
                format!("simulated image size {len} is not a positive multiple of {CACHE_LINE}")
                    .into(),
            ));
        }
        cfg.adversary.validate()
    }

    fn with_images(work: Mapping, durable: Vec<u8>, cfg: SimConfig) -> Self {
        let lines = durable.len() / CACHE_LINE;
        SimMedium {
            work,
            cfg,
            pages: PageTracker::new(),
            group: GroupSync::new(),
            crashed: AtomicBool::new(false),
            state: Mutex::new(State {
                durable,
                line_version: vec![0; lines],
                pending: HashMap::new(),
                groups: HashMap::new(),
                flushes: 0,
                fences: 0,
                events: 0,
                frozen: None,
            }),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &SimConfig {
        &self.cfg
    }

    /// Fences executed so far (after a crash: before it).
    pub fn fence_count(&self) -> u64 {
        self.lock().fences
    }

    /// Flush calls executed so far (after a crash: before it).
    pub fn flush_count(&self) -> u64 {
        self.lock().flushes
    }

    /// When the crash happened, if it has.
    pub fn crash_info(&self) -> Option<CrashInfo> {
        self.lock().frozen.as_ref().map(|f| f.info)
    }

    /// Crash now, between two events. Returns false if the machine had already crashed.
    pub fn crash_now(&self) -> bool {
        let mut st = self.lock();
        if st.frozen.is_some() {
            return false;
        }
        self.crash_locked(&mut st);
        true
    }

    /// A copy of the durable image (after a crash: as frozen by the crash).
    pub fn durable_image(&self) -> Vec<u8> {
        let st = self.lock();
        match &st.frozen {
            Some(f) => f.durable.clone(),
            None => st.durable.clone(),
        }
    }

    /// After a crash, an image the power failure could have left, chosen by the
    /// configured adversary with `seed`. `None` if the machine has not crashed.
    pub fn crash_image(&self, seed: u64) -> Option<Vec<u8>> {
        self.crash_image_with(seed, self.cfg.adversary)
            .map(|c| c.image)
    }

    /// As [`crash_image`](Self::crash_image) with an explicit adversary, plus the
    /// statistics of its choices. Probabilities outside `[0, 1]` are clamped.
    pub fn crash_image_with(&self, seed: u64, adversary: Adversary) -> Option<CrashImage> {
        let frozen = self.lock().frozen.clone()?;
        Some(self.build(&frozen, seed, adversary))
    }

    /// An image a power failure *now* could leave, without stopping the machine (after a
    /// crash: an image of that crash).
    pub fn crash_image_now(&self, seed: u64) -> Vec<u8> {
        self.crash_image_now_with(seed, self.cfg.adversary).image
    }

    /// As [`crash_image_now`](Self::crash_image_now) with an explicit adversary, plus
    /// the statistics of its choices.
    pub fn crash_image_now_with(&self, seed: u64, adversary: Adversary) -> CrashImage {
        let frozen = {
            let st = self.lock();
            match &st.frozen {
                Some(f) => Arc::clone(f),
                None => Arc::new(self.capture(&st, st.durable.clone())),
            }
        };
        self.build(&frozen, seed, adversary)
    }

    /// A flush (`streamed`: the lines of a `write_lines`) of `off..off + len`: an
    /// event, and a crash point.
    fn written_back(&self, off: usize, len: usize, streamed: bool) {
        assert!(off.checked_add(len).is_some_and(|e| e <= self.work.len()));
        // Acquire: see `crash_locked`. The authoritative check is under the lock below.
        if self.crashed.load(Ordering::Acquire) {
            return;
        }
        let mut st = self.lock();
        if st.frozen.is_some() {
            return;
        }
        if self.cfg.crash_at == CrashPoint::Flush(st.flushes) {
            self.crash_locked(&mut st);
            return;
        }
        st.flushes += 1;
        st.events += 1;
        let eadr = self.cfg.domain == PersistenceDomain::Eadr;
        if !eadr || streamed {
            add_lines_flushed(lines_in(off, len));
        }
        if self.cfg.domain == PersistenceDomain::PageCache {
            // As the file medium's flush: the pages are recorded for this thread's
            // fence (streamed lines too: the file medium copies and flushes them).
            if let Some((start, len)) = self.pages.flushed(off, len, self.work.len()) {
                Self::msync_locked(&self.work, &mut st, start, len);
            }
            return;
        }
        if len == 0 {
            return;
        }
        let version = st.events;
        let first = off / CACHE_LINE;
        let last = (off + len - 1) / CACHE_LINE;
        let me = std::thread::current().id();
        if eadr && !streamed {
            let lines = (first..=last).map(|l| (l, self.load_line(l))).collect();
            st.groups
                .entry(me)
                .or_default()
                .push(Group { version, lines });
            return;
        }
        let lines = st.pending.entry(me).or_default();
        for l in first..=last {
            // A later flush of the same line by this thread replaces the earlier one:
            // its write-back carries at least the earlier content.
            lines.insert(
                l,
                Pending {
                    version,
                    words: self.load_line(l),
                },
            );
        }
    }

    /// Page cache: `msync(off, len)`, the only persist point: the current content of
    /// every page overlapping the range becomes durable (the kernel syncs whole
    /// pages). Called with the lock held.
    /// A fence (`commit`: a commit fence, grouped with other threads' on the page
    /// cache, as the file medium groups them).
    fn fence_as(&self, commit: bool) {
        // Acquire: see `crash_locked`. The authoritative check is under the lock below.
        if self.crashed.load(Ordering::Acquire) {
            return;
        }
        let mut st = self.lock();
        if st.frozen.is_some() {
            return;
        }
        if self.cfg.crash_at == CrashPoint::Fence(st.fences) {
            self.crash_locked(&mut st);
            return;
        }
        st.fences += 1;
        st.events += 1;
        add_fence();
        if self.cfg.domain == PersistenceDomain::PageCache {
            if !commit {
                // The file medium's fence: msync what this thread flushed since its last.
                self.pages
                    .fence(|start, len| Self::msync_locked(&self.work, &mut st, start, len));
                return;
            }
            // Its commit fence: the same through its group commit (another thread's
            // commit fence may sync it). Outside the lock, as a fence may wait for
            // another's sync.
            let ranges = self.pages.take();
            drop(st);
            self.group.fence(ranges, |start, len| {
                let mut st = self.lock();
                // After the crash nothing more becomes durable.
                if st.frozen.is_none() {
                    Self::msync_locked(&self.work, &mut st, start, len);
                }
            });
            return;
        }
        let now = st.events;
        let State {
            durable,
            line_version,
            pending,
            groups,
            ..
        } = &mut *st;
        let me = std::thread::current().id();
        let lines = pending.remove(&me).unwrap_or_default();
        // eADR: the fence drains the store buffer; every line this thread flushed since
        // its last fence is durable with its content now.
        let drained: BTreeSet<usize> = groups
            .remove(&me)
            .unwrap_or_default()
            .iter()
            .flat_map(|g| g.lines.iter().map(|&(l, _)| l))
            .collect();
        for l in drained {
            line_version[l] = now;
            let words = self.load_line(l);
            for (w, v) in words.iter().enumerate() {
                let o = l * CACHE_LINE + w * WORD;
                durable[o..o + WORD].copy_from_slice(&v.to_ne_bytes());
            }
        }
        for (l, p) in lines {
            if p.version > line_version[l] {
                line_version[l] = p.version;
                for (w, v) in p.words.iter().enumerate() {
                    let o = l * CACHE_LINE + w * WORD;
                    durable[o..o + WORD].copy_from_slice(&v.to_ne_bytes());
                }
            }
        }
    }

    fn msync_locked(work: &Mapping, st: &mut State, off: usize, len: usize) {
        if len == 0 {
            return;
        }
        let start = off & !(PAGE - 1);
        let end = (off + len).next_multiple_of(PAGE).min(st.durable.len());
        copy_words(
            words_of(work, start / WORD..end / WORD),
            &mut st.durable[start..end],
        );
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // No code path panics while holding the lock with the state half-updated, so
        // a poisoned lock (a panic elsewhere in a test thread) still guards valid state.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Load word `i` of the working image.
    #[inline]
    fn load_word(&self, i: usize) -> u64 {
        load_word_of(&self.work, i)
    }

    fn load_line(&self, line: usize) -> [u64; LINE_WORDS] {
        std::array::from_fn(|w| self.load_word(line * LINE_WORDS + w))
    }

    /// Copy of the working image, word by word.
    fn read_working(&self) -> Vec<u8> {
        let mut out = vec![0u8; self.work.len()];
        copy_words(words_of(&self.work, 0..self.work.len() / WORD), &mut out);
        out
    }

    /// A crash state taken now (under the lock), with `durable` as its durable image.
    fn capture(&self, st: &State, durable: Vec<u8>) -> Frozen {
        let working = self.read_working();
        let mut unfenced: BTreeMap<usize, Option<Pending>> = BTreeMap::new();
        for lines in st.pending.values() {
            for (&l, p) in lines {
                let slot = unfenced.entry(l).or_insert(None);
                // Newest pending write-back of the line, and only if it is newer than the
                // durable line (a write-back never makes a line older).
                let newer_than_slot = match slot {
                    Some(q) => q.version < p.version,
                    None => true,
                };
                if p.version > st.line_version[l] && newer_than_slot {
                    *slot = Some(*p);
                }
            }
        }
        // A flush's content older than the durable line (another thread's fence wrote a
        // newer one since) is never offered: a crash does not make a line older.
        let mut groups: Vec<Vec<Group>> = st
            .groups
            .values()
            .filter(|g| !g.is_empty())
            .map(|gs| {
                gs.iter()
                    .map(|g| Group {
                        version: g.version,
                        lines: g
                            .lines
                            .iter()
                            .filter(|&&(l, _)| g.version > st.line_version[l])
                            .copied()
                            .collect(),
                    })
                    .collect()
            })
            .collect();
        groups.sort_by_key(|g| g[0].version);
        Frozen {
            info: CrashInfo {
                fences_before: st.fences,
                flushes_before: st.flushes,
            },
            durable,
            working,
            unfenced: unfenced
                .into_iter()
                .map(|(l, p)| (l, p.map(|p| p.words)))
                .collect(),
            groups,
        }
    }

    /// Crash here: freeze the state. Called with the lock held.
    fn crash_locked(&self, st: &mut State) {
        let durable = std::mem::take(&mut st.durable);
        let frozen = self.capture(st, durable);
        st.pending.clear();
        st.groups.clear();
        st.frozen = Some(Arc::new(frozen));
        // Release, and only after the capture above is complete: a thread that observes
        // `crashed()` (Acquire) — including the lock-free fast paths of flush and fence —
        // then stores only after the capture has read the working image. This closes the
        // race in which a store a program issues after a fence that was already a no-op
        // would leak into the crash image without what that fence should have persisted.
        self.crashed.store(true, Ordering::Release);
    }

    fn build(&self, fz: &Frozen, seed: u64, adversary: Adversary) -> CrashImage {
        let mut key = [0u8; 32];
        key[..8].copy_from_slice(&self.cfg.seed.to_le_bytes());
        key[8..16].copy_from_slice(&seed.to_le_bytes());
        if self.cfg.domain == PersistenceDomain::Eadr {
            return build_eadr(fz, adversary.sanitized(), StdRng::from_seed(key));
        }
        if self.cfg.domain == PersistenceDomain::PageCache {
            return build_page_cache(fz, adversary.sanitized(), StdRng::from_seed(key));
        }
        let mut d = Decider {
            fz,
            adversary: adversary.sanitized(),
            rng: StdRng::from_seed(key),
            image: fz.durable.clone(),
            stats: CrashStats {
                lines_flushed_unfenced: fz.unfenced.len() as u64,
                ..CrashStats::default()
            },
        };
        let mut unfenced = fz.unfenced.iter().peekable();
        let lines = fz.durable.len() / CACHE_LINE;
        // Whole blocks that are clean and have no pending write-back are skipped with
        // one long comparison, far cheaper than one per line. Skipped lines draw no
        // randomness, so the image is the same as when deciding line by line.
        const BLOCK_LINES: usize = 64;
        let mut line = 0;
        while line < lines {
            if line % BLOCK_LINES == 0 {
                let end = (line + BLOCK_LINES).min(lines);
                let bytes = line * CACHE_LINE..end * CACHE_LINE;
                let pending_in_block = matches!(unfenced.peek(), Some(&(&l, _)) if l < end);
                if !pending_in_block && fz.working[bytes.clone()] == fz.durable[bytes] {
                    line = end;
                    continue;
                }
            }
            match unfenced.peek() {
                Some(&(&l, snapshot)) if l == line => {
                    d.flushed_line(line, *snapshot);
                    unfenced.next();
                }
                _ => d.unflushed_line(line),
            }
            line += 1;
        }
        CrashImage {
            image: d.image,
            stats: d.stats,
        }
    }
}

/// Words `range` of the working image `work`, as atomics (see [`load_word_of`]).
fn words_of(work: &Mapping, range: std::ops::Range<usize>) -> &[AtomicU64] {
    assert!(range.start <= range.end && range.end <= work.len() / WORD);
    // SAFETY: the range lies inside the mapping (asserted), which is page aligned and
    // lives as long as `work`, so the pointer is valid and 8-byte aligned for `len`
    // words; `AtomicU64` has the layout of `u64`. Other threads may store to these
    // words concurrently, which relaxed atomic loads tolerate (see `load_word_of`).
    unsafe {
        std::slice::from_raw_parts(
            work.base().add(range.start * WORD) as *const AtomicU64,
            range.end - range.start,
        )
    }
}

/// Copy `words` into `dst` (8 bytes each), with relaxed loads. Words that already hold
/// the value are not stored: most of a synced range is clean, and reading is cheaper.
fn copy_words(words: &[AtomicU64], dst: &mut [u8]) {
    debug_assert_eq!(dst.len(), words.len() * WORD);
    for (d, w) in dst.chunks_exact_mut(WORD).zip(words) {
        let v = w.load(Ordering::Relaxed).to_ne_bytes();
        if *d != v {
            d.copy_from_slice(&v);
        }
    }
}

/// Load word `i` of the working image `work`.
#[inline]
fn load_word_of(work: &Mapping, i: usize) -> u64 {
    debug_assert!(i < work.len() / WORD);
    // SAFETY: `i` is a word index inside the mapping, which is page aligned, so the
    // pointer is valid and 8-byte aligned for the medium's lifetime. Other threads may
    // store to this word concurrently (that is what the engine does with the image); a
    // relaxed atomic load is the access that tolerates it, and on every supported
    // target an aligned 8-byte load is single-copy atomic, matching the 8-byte failure
    // atomicity the simulator models.
    let a = unsafe { AtomicU64::from_ptr(work.base().add(i * WORD) as *mut u64) };
    a.load(Ordering::Relaxed)
}

/// A page-cache crash image (module docs, page cache): the durable image, and each
/// dirty page left, written back whole, or torn at sectors.
fn build_page_cache(fz: &Frozen, adversary: Adversary, mut rng: StdRng) -> CrashImage {
    let mut image = fz.durable.clone();
    let mut stats = CrashStats::default();
    let len = fz.durable.len();
    for start in (0..len).step_by(PAGE) {
        let page = start..(start + PAGE).min(len);
        if fz.working[page.clone()] == fz.durable[page.clone()] {
            continue;
        }
        stats.pages_dirty += 1;
        let (written, whole) = match adversary {
            Adversary::DurableOnly => (false, false),
            Adversary::AllWritten => (true, true),
            Adversary::Random {
                p_keep_unflushed, ..
            } => {
                let written = rng.gen_bool(p_keep_unflushed);
                (written, written && rng.gen_bool(0.75))
            }
        };
        if !written {
            stats.words_unflushed_dropped += differing_words(fz, page) as u64;
            continue;
        }
        if whole {
            stats.pages_written += 1;
            stats.words_unflushed_kept += differing_words(fz, page.clone()) as u64;
            image[page.clone()].copy_from_slice(&fz.working[page]);
            continue;
        }
        stats.pages_torn += 1;
        for sector in page.clone().step_by(SECTOR) {
            let r = sector..(sector + SECTOR).min(page.end);
            if fz.working[r.clone()] == fz.durable[r.clone()] {
                continue;
            }
            let n = differing_words(fz, r.clone()) as u64;
            if rng.gen_bool(0.5) {
                stats.words_unflushed_kept += n;
                image[r.clone()].copy_from_slice(&fz.working[r]);
            } else {
                stats.words_unflushed_dropped += n;
            }
        }
    }
    CrashImage { image, stats }
}

/// Words of the byte range `r` whose working and durable contents differ.
fn differing_words(fz: &Frozen, r: std::ops::Range<usize>) -> usize {
    fz.working[r.clone()]
        .chunks_exact(WORD)
        .zip(fz.durable[r].chunks_exact(WORD))
        .filter(|(a, b)| a != b)
        .count()
}

/// A surviving flush's offer for a line: its event number and its content (`None`: the
/// line's latest content, offered by a thread that lost nothing).
type Offer = (u64, Option<[u64; LINE_WORDS]>);

/// An eADR crash image (module docs, eADR): the visible stores, less a suffix of each
/// thread's flushes since its fence; streamed lines decided per word.
fn build_eadr(fz: &Frozen, adversary: Adversary, rng: StdRng) -> CrashImage {
    // Per line some thread flushed since its fence: the newest surviving content
    // (version, words; `None` words: the latest, from a thread that lost nothing).
    let mut covered: BTreeMap<usize, Option<Offer>> = BTreeMap::new();
    let mut d = Decider {
        fz,
        adversary,
        rng,
        image: fz.working.clone(),
        stats: CrashStats::default(),
    };
    for groups in &fz.groups {
        let n = groups.len();
        let cut = match d.adversary {
            Adversary::DurableOnly => 0,
            Adversary::AllWritten => n,
            Adversary::Random { .. } => d.rng.gen_range(0..=n),
        };
        d.stats.flushes_kept += cut as u64;
        d.stats.flushes_lost += (n - cut) as u64;
        for (i, g) in groups.iter().enumerate() {
            for &(l, words) in &g.lines {
                let slot = covered.entry(l).or_insert(None);
                let offer = if cut == n {
                    Some((u64::MAX, None))
                } else if i < cut {
                    Some((g.version, Some(words)))
                } else {
                    None
                };
                if let Some(o) = offer {
                    if slot.is_none_or(|(v, _)| v < o.0) {
                        *slot = Some(o);
                    }
                }
            }
        }
    }
    for (&l, choice) in &covered {
        let r = l * CACHE_LINE..(l + 1) * CACHE_LINE;
        match choice {
            Some((_, None)) => {}
            Some((_, Some(words))) => {
                for (w, v) in words.iter().enumerate() {
                    d.set(l * LINE_WORDS + w, *v);
                }
            }
            None => d.image[r.clone()].copy_from_slice(&fz.durable[r]),
        }
    }
    // Streamed lines not covered by a flush: pending until the fence, as under ADR.
    for (&l, snapshot) in &fz.unfenced {
        if covered.contains_key(&l) {
            continue;
        }
        let r = l * CACHE_LINE..(l + 1) * CACHE_LINE;
        d.image[r.clone()].copy_from_slice(&fz.durable[r]);
        d.flushed_line(l, *snapshot);
    }
    d.stats.lines_flushed_unfenced = fz.unfenced.len() as u64;
    // Every other word that differs is a visible store: it survives.
    let decided: BTreeSet<usize> = covered.keys().chain(fz.unfenced.keys()).copied().collect();
    let lines = fz.durable.len() / CACHE_LINE;
    let mut l = 0;
    while l < lines {
        // Whole clean blocks are skipped with one comparison.
        const BLOCK_LINES: usize = 64;
        let end = (l + BLOCK_LINES).min(lines);
        let block = l * CACHE_LINE..end * CACHE_LINE;
        if l % BLOCK_LINES == 0 && fz.working[block.clone()] == fz.durable[block] {
            l = end;
            continue;
        }
        let r = l * CACHE_LINE..(l + 1) * CACHE_LINE;
        if decided.contains(&l) || fz.working[r.clone()] == fz.durable[r] {
            l += 1;
            continue;
        }
        for i in l * LINE_WORDS..(l + 1) * LINE_WORDS {
            if Decider::word(&fz.working, i) != Decider::word(&fz.durable, i) {
                d.stats.words_unflushed_kept += 1;
            }
        }
        l += 1;
    }
    CrashImage {
        image: d.image,
        stats: d.stats,
    }
}

/// The adversary at work on one crash image.
struct Decider<'a> {
    fz: &'a Frozen,
    adversary: Adversary,
    rng: StdRng,
    image: Vec<u8>,
    stats: CrashStats,
}

impl Decider<'_> {
    fn word(img: &[u8], i: usize) -> u64 {
        let mut b = [0u8; WORD];
        b.copy_from_slice(&img[i * WORD..(i + 1) * WORD]);
        u64::from_ne_bytes(b)
    }

    fn set(&mut self, i: usize, v: u64) {
        self.image[i * WORD..(i + 1) * WORD].copy_from_slice(&v.to_ne_bytes());
    }

    /// Whether a newer value survives. Draws only for a real choice, so `DurableOnly`
    /// and `AllWritten` consume no randomness.
    fn keep(&mut self, flushed: bool) -> bool {
        match self.adversary {
            Adversary::DurableOnly => false,
            Adversary::AllWritten => true,
            Adversary::Random {
                p_keep_flushed,
                p_keep_unflushed,
            } => self.rng.gen_bool(if flushed {
                p_keep_flushed
            } else {
                p_keep_unflushed
            }),
        }
    }

    /// A dirty line nobody flushed: each differing word may have been evicted.
    fn unflushed_line(&mut self, line: usize) {
        let range = line * CACHE_LINE..(line + 1) * CACHE_LINE;
        if self.fz.working[range.clone()] == self.fz.durable[range] {
            return;
        }
        for i in line * LINE_WORDS..(line + 1) * LINE_WORDS {
            let (durable, latest) = (
                Self::word(&self.fz.durable, i),
                Self::word(&self.fz.working, i),
            );
            if durable == latest {
                continue;
            }
            if self.keep(false) {
                self.set(i, latest);
                self.stats.words_unflushed_kept += 1;
            } else {
                self.stats.words_unflushed_dropped += 1;
            }
        }
    }

    /// A line flushed but not fenced, with the content of its pending write-back when
    /// that is newer than the durable line.
    fn flushed_line(&mut self, line: usize, snapshot: Option<[u64; LINE_WORDS]>) {
        for w in 0..LINE_WORDS {
            let i = line * LINE_WORDS + w;
            let (durable, latest) = (
                Self::word(&self.fz.durable, i),
                Self::word(&self.fz.working, i),
            );
            // The flush-time value, if it is a third candidate.
            let older = snapshot
                .map(|s| s[w])
                .filter(|&s| s != durable && s != latest);
            if durable == latest && older.is_none() {
                continue;
            }
            if !self.keep(true) {
                self.stats.words_flushed_unfenced_dropped += 1;
                continue;
            }
            self.stats.words_flushed_unfenced_kept += 1;
            // Kept: the write-back carried the flush-time value, or a later one reached
            // the medium (eviction after a younger store). Choose when they differ.
            let take_older = match older {
                None => false,
                Some(_) if durable == latest => true,
                Some(_) => {
                    matches!(self.adversary, Adversary::Random { .. }) && self.rng.gen_bool(0.5)
                }
            };
            match older {
                Some(v) if take_older => {
                    self.set(i, v);
                    self.stats.words_flushed_older_value_kept += 1;
                }
                _ => self.set(i, latest),
            }
        }
    }
}

// SAFETY: `base()` is the start of a mapping of `len()` bytes (page aligned) owned by
// this value and unmapped only when it is dropped; the persistence primitives follow
// the trait contract.
unsafe impl Medium for SimMedium {
    fn kind(&self) -> MediumKind {
        MediumKind::Custom
    }
    fn persistence_domain(&self) -> PersistenceDomain {
        self.cfg.domain
    }
    fn base(&self) -> *mut u8 {
        self.work.base()
    }
    fn len(&self) -> usize {
        self.work.len()
    }
    fn max_len(&self) -> usize {
        self.work.reserved()
    }
    /// Extends the working image and, unless the machine has crashed, the durable one
    /// at once: as a file extended and `fdatasync`ed, the new length (zero-filled) is
    /// durable when `grow` returns, and a crash before it keeps the old length. Not a
    /// crash point itself (the fences around it are).
    fn grow(&self, new_len: usize) -> Result<()> {
        if !new_len.is_multiple_of(CACHE_LINE) {
            return Err(Error::InvalidConfig(
                format!("simulated image size {new_len} is not a multiple of {CACHE_LINE}").into(),
            ));
        }
        let mut st = self.lock();
        self.work
            .extend(None, new_len)
            .map_err(|e| Error::io("growing the simulated image", e))?;
        if st.frozen.is_none() && st.durable.len() < new_len {
            st.durable.resize(new_len, 0);
            st.line_version.resize(new_len / CACHE_LINE, 0);
        }
        Ok(())
    }
    fn flush(&self, off: usize, len: usize) {
        self.written_back(off, len, false);
    }
    /// The copy, then the lines are pending until this thread's fence (as flushed
    /// lines under ADR; under eADR too, since non-temporal stores bypass the caches).
    fn write_lines(&self, off: usize, parts: &[&[u8]]) {
        let len: usize = parts.iter().map(|p| p.len()).sum();
        let end = off + len.next_multiple_of(CACHE_LINE);
        assert!(
            off.is_multiple_of(CACHE_LINE) && end <= self.work.len(),
            "line write of {len} bytes at {off:#x} outside the image"
        );
        let pad = [0u8; CACHE_LINE];
        let mut at = off;
        for part in parts.iter().copied().chain([&pad[..end - off - len]]) {
            // SAFETY: `at .. at + part.len()` is inside the image (asserted: the parts
            // and the padding end at `end`); the caller has these lines to itself.
            unsafe {
                std::ptr::copy_nonoverlapping(part.as_ptr(), self.work.base().add(at), part.len())
            };
            at += part.len();
        }
        self.written_back(off, len, true);
    }
    fn fence(&self) {
        self.fence_as(false)
    }
    fn commit_fence(&self) {
        self.fence_as(true)
    }
    fn sync_all(&self) -> Result<()> {
        if self.crashed() {
            return Err(Error::Crashed);
        }
        self.persist(0, self.len());
        if self.crashed() {
            return Err(Error::Crashed);
        }
        Ok(())
    }
}

impl SimMedium {
    /// True once the simulated crash has happened: work after it is lost.
    pub fn crashed(&self) -> bool {
        // Acquire: pairs with the Release in `crash_locked` (see there).
        self.crashed.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LEN: usize = 1 << 16;

    fn sim(cfg: SimConfig) -> Arc<SimMedium> {
        Arc::new(SimMedium::new(LEN, cfg).unwrap())
    }

    fn store(m: &dyn Medium, off: usize, v: u64) {
        assert!(off + WORD <= m.len() && off & (WORD - 1) == 0);
        // SAFETY: in bounds and aligned (asserted); atomic, since the simulator may read
        // the word concurrently.
        unsafe { AtomicU64::from_ptr(m.base().add(off) as *mut u64) }.store(v, Ordering::Relaxed);
    }

    fn word(img: &[u8], off: usize) -> u64 {
        u64::from_ne_bytes(img[off..off + WORD].try_into().unwrap())
    }

    fn random() -> Adversary {
        Adversary::default()
    }

    #[test]
    fn flush_then_fence_makes_the_line_durable() {
        let s = sim(SimConfig::default());
        store(&*s, 64, 11);
        store(&*s, 120, 12);
        assert_eq!(word(&s.durable_image(), 64), 0);
        s.flush(64, 8);
        assert_eq!(
            word(&s.durable_image(), 64),
            0,
            "flush alone is not durable"
        );
        s.fence();
        let d = s.durable_image();
        assert_eq!(
            (word(&d, 64), word(&d, 120)),
            (11, 12),
            "whole line written back"
        );
        let img = s.crash_image_now_with(0, Adversary::DurableOnly);
        assert_eq!(word(&img.image, 64), 11);
        assert_eq!(img.stats, CrashStats::default());
        assert!(!s.crashed());
        assert_eq!((s.flush_count(), s.fence_count()), (1, 1));
    }

    #[test]
    fn flushed_but_unfenced_is_not_durable_yet_may_survive() {
        let s = sim(SimConfig::default());
        store(&*s, 128, 5);
        s.flush(128, 8);
        assert!(s.crash_image(0).is_none(), "no crash yet");
        assert!(s.crash_now());
        assert!(s.crashed());
        let only = s.crash_image_with(0, Adversary::DurableOnly).unwrap();
        assert_eq!(word(&only.image, 128), 0);
        assert_eq!(only.stats.lines_flushed_unfenced, 1);
        assert_eq!(only.stats.words_flushed_unfenced_dropped, 1);
        let all = s.crash_image_with(0, Adversary::AllWritten).unwrap();
        assert_eq!(word(&all.image, 128), 5);
        assert_eq!(all.stats.words_flushed_unfenced_kept, 1);
        let seen: std::collections::BTreeSet<u64> = (0..64)
            .map(|seed| word(&s.crash_image(seed).unwrap(), 128))
            .collect();
        assert_eq!(seen, [0, 5].into(), "Random keeps it for some seeds only");
    }

    #[test]
    fn a_never_flushed_write_can_be_evicted() {
        let s = sim(SimConfig::default());
        store(&*s, 4096, 9);
        s.crash_now();
        let only = s.crash_image_with(1, Adversary::DurableOnly).unwrap();
        assert_eq!(word(&only.image, 4096), 0);
        assert_eq!(only.stats.words_unflushed_dropped, 1);
        assert_eq!(only.stats.lines_flushed_unfenced, 0);
        let all = s.crash_image_with(1, Adversary::AllWritten).unwrap();
        assert_eq!(word(&all.image, 4096), 9);
        assert_eq!(all.stats.words_unflushed_kept, 1);
        let (mut kept, mut dropped) = (0, 0);
        for seed in 0..64 {
            let c = s.crash_image_with(seed, random()).unwrap();
            kept += c.stats.words_unflushed_kept;
            dropped += c.stats.words_unflushed_dropped;
            assert_eq!(word(&c.image, 4096) == 9, c.stats.words_unflushed_kept == 1);
        }
        assert!(kept > 0 && dropped > 0, "kept {kept} dropped {dropped}");
    }

    #[test]
    fn words_of_one_line_are_chosen_independently() {
        let s = sim(SimConfig::default().with_seed(7));
        for i in 0..64 * LINE_WORDS {
            store(&*s, i * WORD, i as u64 + 1);
        }
        s.flush(0, 32 * CACHE_LINE); // half the lines flushed, none fenced
        s.crash_now();
        let c = s.crash_image_with(3, random()).unwrap();
        let st = c.stats;
        assert_eq!(st.lines_flushed_unfenced, 32);
        assert_eq!(
            st.words_flushed_unfenced_kept + st.words_flushed_unfenced_dropped,
            32 * 8
        );
        assert_eq!(st.words_unflushed_kept + st.words_unflushed_dropped, 32 * 8);
        assert!(st.words_flushed_unfenced_kept > 0 && st.words_flushed_unfenced_dropped > 0);
        assert!(st.words_unflushed_kept > 0 && st.words_unflushed_dropped > 0);
        // Some line is torn: part of its words kept, part dropped.
        let torn = (0..64).filter(|l| {
            let kept = (0..LINE_WORDS)
                .filter(|w| word(&c.image, (l * LINE_WORDS + w) * WORD) != 0)
                .count();
            kept > 0 && kept < LINE_WORDS
        });
        assert!(torn.count() > 0);
        // Every word is its durable value (0) or its written value.
        for i in 0..64 * LINE_WORDS {
            let v = word(&c.image, i * WORD);
            assert!(v == 0 || v == i as u64 + 1);
        }
    }

    #[test]
    fn another_threads_fence_does_not_persist_this_threads_flush() {
        let s = sim(SimConfig::default());
        store(&*s, 256, 1);
        s.flush(256, 8);
        let t = Arc::clone(&s);
        std::thread::spawn(move || t.fence()).join().unwrap();
        assert_eq!(word(&s.durable_image(), 256), 0);
        s.fence();
        assert_eq!(word(&s.durable_image(), 256), 1);

        // But a thread that flushes the line itself and fences does persist it.
        store(&*s, 256, 2);
        let t = Arc::clone(&s);
        std::thread::spawn(move || t.persist(256, 8))
            .join()
            .unwrap();
        assert_eq!(word(&s.durable_image(), 256), 2);
    }

    #[test]
    fn the_fence_writes_back_the_flush_time_content() {
        let s = sim(SimConfig::default());
        store(&*s, 512, 1);
        s.flush(512, 8);
        store(&*s, 512, 2); // younger than the flush: not covered by it
        s.fence();
        assert_eq!(word(&s.durable_image(), 512), 1);
        // The younger store is an ordinary dirty word: it may be evicted or not.
        s.crash_now();
        assert_eq!(
            word(
                &s.crash_image_with(0, Adversary::AllWritten).unwrap().image,
                512
            ),
            2
        );
        assert_eq!(
            word(
                &s.crash_image_with(0, Adversary::DurableOnly).unwrap().image,
                512
            ),
            1
        );
    }

    #[test]
    fn an_unfenced_write_back_offers_its_flush_time_value_too() {
        let s = sim(SimConfig::default());
        store(&*s, 768, 1);
        s.flush(768, 8);
        store(&*s, 768, 2);
        s.crash_now();
        let mut seen = std::collections::BTreeSet::new();
        let mut older = 0;
        for seed in 0..200 {
            let c = s.crash_image_with(seed, random()).unwrap();
            seen.insert(word(&c.image, 768));
            older += c.stats.words_flushed_older_value_kept;
        }
        assert_eq!(seen, [0, 1, 2].into());
        assert!(older > 0);
    }

    #[test]
    fn a_write_back_never_makes_a_line_older() {
        let s = sim(SimConfig::default());
        store(&*s, 0, 1);
        s.flush(0, 8); // this thread: content 1
        store(&*s, 0, 2);
        let t = Arc::clone(&s);
        std::thread::spawn(move || t.persist(0, 8)).join().unwrap(); // content 2, durable
        assert_eq!(word(&s.durable_image(), 0), 2);
        s.fence(); // the older write-back must not overwrite 2 with 1
        assert_eq!(word(&s.durable_image(), 0), 2);
    }

    #[test]
    fn crash_at_fence_freezes_the_durable_image() {
        let s = sim(SimConfig::crash_at_fence(2));
        let m: Arc<dyn Medium> = s.clone();
        for (i, off) in [0usize, 64, 128, 192].into_iter().enumerate() {
            store(&*m, off, 100 + i as u64);
            m.persist(off, 8);
            assert_eq!(s.crashed(), i >= 2, "after persist {i}");
        }
        store(&*m, 256, 999); // after the crash
        assert_eq!(s.fence_count(), 2);
        assert_eq!(s.flush_count(), 3, "the third flush ran, its fence did not");
        assert_eq!(
            s.crash_info(),
            Some(CrashInfo {
                fences_before: 2,
                flushes_before: 3
            })
        );
        let d = s.durable_image();
        assert_eq!(
            [0, 64, 128, 192].map(|o| word(&d, o)),
            [100, 101, 0, 0],
            "later persists are not durable"
        );
        let all = s.crash_image_with(0, Adversary::AllWritten).unwrap();
        assert_eq!(
            [0, 64, 128, 192, 256].map(|o| word(&all.image, o)),
            [100, 101, 102, 0, 0],
            "the crashed fence's line was flushed; nothing after the crash exists"
        );
        assert_eq!(all.stats.lines_flushed_unfenced, 1);
        assert!(matches!(m.sync_all(), Err(Error::Crashed)));
        assert!(!s.crash_now(), "already crashed");
        assert_eq!(s.crash_image_now(5), s.crash_image(5).unwrap());
    }

    #[test]
    fn crash_at_flush_drops_that_flush() {
        let s = sim(SimConfig::crash_at_flush(1));
        store(&*s, 0, 1);
        s.persist(0, 8);
        store(&*s, 64, 2);
        s.persist(64, 8); // crashes at its flush
        assert!(s.crashed());
        assert_eq!((s.flush_count(), s.fence_count()), (1, 1));
        let c = s.crash_image_with(0, Adversary::DurableOnly).unwrap();
        assert_eq!((word(&c.image, 0), word(&c.image, 64)), (1, 0));
        assert_eq!(c.stats.lines_flushed_unfenced, 0);
        assert_eq!(
            c.stats.words_unflushed_dropped, 1,
            "an unflushed dirty word"
        );
    }

    fn scripted_run(cfg: SimConfig) -> Arc<SimMedium> {
        let s = sim(cfg);
        for i in 0..40u64 {
            let off = (i as usize * 7 % 200) * WORD;
            store(&*s, off, i * 3 + 1);
            if i % 3 == 0 {
                s.flush(off, 8);
            }
            if i % 5 == 0 {
                s.fence();
            }
        }
        s
    }

    #[test]
    fn crash_images_are_deterministic() {
        let cfg = SimConfig::crash_at_fence(5).with_seed(42);
        let a = scripted_run(cfg);
        let b = scripted_run(cfg);
        assert!(a.crashed() && b.crashed());
        for seed in 0..5 {
            assert_eq!(
                a.crash_image_with(seed, random()),
                b.crash_image_with(seed, random())
            );
        }
        let images: std::collections::HashSet<Vec<u8>> =
            (0..20).map(|seed| a.crash_image(seed).unwrap()).collect();
        assert!(images.len() > 1, "different seeds give different images");
        // The configuration seed takes part too.
        let c = scripted_run(cfg.with_seed(43));
        assert!((0..20).any(|seed| c.crash_image(seed) != a.crash_image(seed)));
    }

    #[test]
    fn a_machine_booted_from_a_crash_image_starts_from_it_and_can_crash_again() {
        let s = sim(SimConfig::crash_at_fence(3));
        for i in 0..10u64 {
            store(&*s, i as usize * 64, i + 1);
            s.persist(i as usize * 64, 8);
        }
        let image = s.crash_image(1).unwrap();
        let r =
            Arc::new(SimMedium::from_image(image.clone(), SimConfig::crash_at_fence(1)).unwrap());
        assert_eq!(r.durable_image(), image);
        // SAFETY: the image is `len` initialized bytes at `base`, and no thread writes it.
        let working = unsafe { std::slice::from_raw_parts(r.base(), r.len()) };
        assert_eq!(working, &image[..]);
        assert_eq!(
            r.crash_image_now_with(0, Adversary::AllWritten).image,
            image
        );
        // Recovery writes, persists, and crashes again at its second fence.
        store(&*r, 64 * 20, 77);
        r.persist(64 * 20, 8);
        store(&*r, 64 * 21, 78);
        r.persist(64 * 21, 8);
        assert!(r.crashed());
        let again = r.crash_image_with(0, Adversary::DurableOnly).unwrap().image;
        assert_eq!(word(&again, 64 * 20), 77);
        assert_eq!(word(&again, 64 * 21), 0);
        assert_eq!(again[..64 * 20], image[..64 * 20]);
    }

    #[test]
    fn enumerating_every_fence_checks_a_protocol() {
        // Data words at 0.., a commit counter in its own line at 4096. Correct protocol:
        // persist the data, then persist the counter. Buggy: persist both together.
        fn workload(m: &SimMedium, correct: bool) {
            for i in 0..6usize {
                store(m, i * WORD, i as u64 + 1);
                if correct {
                    m.persist(i * WORD, WORD);
                }
                store(m, 4096, i as u64 + 1);
                if correct {
                    m.persist(4096, WORD);
                } else {
                    m.flush(i * WORD, WORD);
                    m.persist(4096, WORD);
                }
                if m.crashed() {
                    return;
                }
            }
        }
        fn consistent(img: &[u8]) -> bool {
            let committed = word(img, 4096) as usize;
            (0..committed).all(|i| word(img, i * WORD) == i as u64 + 1)
        }
        for correct in [true, false] {
            let probe = sim(SimConfig::default());
            workload(&probe, correct);
            let fences = probe.fence_count();
            assert_eq!(fences, if correct { 12 } else { 6 });
            let mut violations = 0;
            for k in 0..fences {
                let s = sim(SimConfig::crash_at_fence(k));
                workload(&s, correct);
                assert!(s.crashed());
                assert_eq!(s.fence_count(), k);
                for seed in 0..32 {
                    if !consistent(&s.crash_image(seed).unwrap()) {
                        violations += 1;
                    }
                }
            }
            if correct {
                assert_eq!(violations, 0, "no false alarms on a correct protocol");
            } else {
                assert!(violations > 0, "the reordering bug is found");
            }
        }
    }

    #[test]
    fn threads_persisting_concurrently_stop_cleanly_at_the_crash() {
        const THREADS: usize = 4;
        let s = sim(SimConfig::crash_at_fence(500).with_seed(9));
        let m: Arc<SimMedium> = s.clone();
        let handles: Vec<_> = (0..THREADS)
            .map(|t| {
                let m = Arc::clone(&m);
                std::thread::spawn(move || {
                    let off = t * 4 * CACHE_LINE;
                    let (mut written, mut confirmed) = (0u64, 0u64);
                    while !m.crashed() {
                        written += 1;
                        store(&*m, off, written);
                        m.persist(off, WORD);
                        // Not crashed after the persist returned: its fence ran before
                        // the crash, so `written` is durable.
                        if !m.crashed() {
                            confirmed = written;
                        }
                    }
                    (off, confirmed, written)
                })
            })
            .collect();
        let results: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        assert!(s.crashed());
        assert_eq!(s.fence_count(), 500);
        let durable = s.durable_image();
        for seed in 0..8 {
            let img = s.crash_image(seed).unwrap();
            for &(off, confirmed, written) in &results {
                let d = word(&durable, off);
                assert!(d >= confirmed && d <= written, "{d} {confirmed} {written}");
                let v = word(&img, off);
                assert!(
                    v >= d && v <= written,
                    "{v} vs durable {d}, written {written}"
                );
            }
        }
        assert!(results.iter().map(|r| r.1).sum::<u64>() > 0);
    }

    #[test]
    fn invalid_configurations_are_errors() {
        for len in [0, 100, 4095] {
            assert!(matches!(
                SimMedium::new(len, SimConfig::default()),
                Err(Error::InvalidConfig(_))
            ));
        }
        for p in [-0.1, 1.5, f64::NAN] {
            let cfg = SimConfig::default().with_adversary(Adversary::Random {
                p_keep_flushed: p,
                p_keep_unflushed: 0.5,
            });
            assert!(matches!(
                SimMedium::new(4096, cfg),
                Err(Error::InvalidConfig(_))
            ));
            assert!(SimMedium::from_image(vec![0; 4096], cfg).is_err());
        }
        assert!(SimMedium::from_image(vec![0; 100], SimConfig::default()).is_err());
        // An out-of-range adversary passed directly is clamped, not a panic.
        let s = sim(SimConfig::default());
        store(&*s, 0, 1);
        let c = s.crash_image_now_with(
            0,
            Adversary::Random {
                p_keep_flushed: 7.0,
                p_keep_unflushed: f64::NAN,
            },
        );
        assert_eq!(c.stats.words_unflushed_dropped, 1);
    }

    fn page_cache(cfg: SimConfig) -> Arc<SimMedium> {
        sim(cfg.with_domain(PersistenceDomain::PageCache))
    }

    #[test]
    fn in_the_page_cache_only_the_fence_msync_persists_and_it_takes_the_page_now() {
        let s = page_cache(SimConfig::default());
        assert_eq!(s.persistence_domain(), PersistenceDomain::PageCache);
        store(&*s, 64, 1);
        s.flush(64, 8);
        // A store after the flush, in the same page, and one in another page nobody
        // flushed.
        store(&*s, 128, 2);
        store(&*s, 3 * PAGE, 3);
        // Flushed, not fenced: nothing durable.
        assert_eq!(word(&s.durable_image(), 64), 0);
        // Another thread's fence does not msync this thread's pages.
        let t = Arc::clone(&s);
        std::thread::spawn(move || t.fence()).join().unwrap();
        assert_eq!(word(&s.durable_image(), 64), 0);
        // A fence with nothing flushed persists nothing.
        let u = page_cache(SimConfig::default());
        store(&*u, 64, 9);
        u.fence();
        assert_eq!(word(&u.durable_image(), 64), 0);
        // This thread's fence: the whole page as it is now, the later store included;
        // the page nobody flushed stays dirty.
        s.fence();
        let d = s.durable_image();
        assert_eq!((word(&d, 64), word(&d, 128), word(&d, 3 * PAGE)), (1, 2, 0));
        s.crash_now();
        let img = s.crash_image_with(0, Adversary::DurableOnly).unwrap();
        assert_eq!(word(&img.image, 3 * PAGE), 0);
        assert_eq!(img.stats.pages_dirty, 1);
        let all = s.crash_image_with(0, Adversary::AllWritten).unwrap();
        assert_eq!(
            word(&all.image, 3 * PAGE),
            3,
            "the kernel may write it back"
        );
    }

    #[test]
    fn in_the_page_cache_a_flush_across_a_page_boundary_msyncs_both_pages() {
        let s = page_cache(SimConfig::default());
        store(&*s, PAGE - 8, 1);
        store(&*s, PAGE, 2);
        s.persist(PAGE - 8, 16);
        let d = s.durable_image();
        assert_eq!((word(&d, PAGE - 8), word(&d, PAGE)), (1, 2));
    }

    #[test]
    fn the_kernel_writes_back_dirty_pages_whole_or_torn_at_sectors() {
        // Every word of page 1 dirty: sector 0 holds words 0..64 of the page.
        let s = page_cache(SimConfig::default().with_seed(5));
        for w in 0..PAGE / WORD {
            store(&*s, PAGE + w * WORD, w as u64 + 1);
        }
        s.crash_now();
        let (mut whole, mut torn, mut left) = (0, 0, 0);
        for seed in 0..400 {
            let c = s.crash_image_with(seed, random()).unwrap();
            let page = &c.image[PAGE..2 * PAGE];
            // Each sector is all old or all new: never torn inside a sector.
            let kept: Vec<bool> = page
                .chunks_exact(SECTOR)
                .map(|sec| {
                    let new = sec
                        .chunks_exact(WORD)
                        .all(|w| u64::from_ne_bytes(w.try_into().unwrap()) != 0);
                    let old = sec.iter().all(|&b| b == 0);
                    assert!(new || old, "seed {seed}: a sector torn inside");
                    new
                })
                .collect();
            match kept.iter().filter(|&&k| k).count() {
                0 => left += 1,
                n if n == kept.len() => whole += 1,
                _ => torn += 1,
            }
            assert_eq!(c.stats.pages_dirty, 1);
        }
        assert!(
            whole > 50 && torn > 20 && left > 50,
            "{whole} {torn} {left}"
        );
    }

    fn eadr(cfg: SimConfig) -> Arc<SimMedium> {
        sim(cfg.with_domain(PersistenceDomain::Eadr))
    }

    #[test]
    fn under_eadr_a_visible_store_is_durable_without_its_flush() {
        for fenced in [true, false] {
            let (a, e) = (sim(SimConfig::default()), eadr(SimConfig::default()));
            for s in [&a, &e] {
                store(&**s, 64, 7);
                if fenced {
                    s.fence();
                }
                s.crash_now();
            }
            let only = |s: &SimMedium| {
                word(
                    &s.crash_image_with(0, Adversary::DurableOnly).unwrap().image,
                    64,
                )
            };
            assert_eq!(only(&a), 0, "adr: never written back");
            assert_eq!(only(&e), 7, "eadr: visible, so durable");
        }
        let e = eadr(SimConfig::default());
        assert_eq!(e.persistence_domain(), PersistenceDomain::Eadr);
        let before = pisces::tools::counters::snapshot();
        e.persist(0, 256);
        let d = pisces::tools::counters::snapshot() - before;
        assert_eq!(
            (d.lines_flushed, d.fences),
            (0, 1),
            "eadr writes nothing back"
        );
    }

    #[test]
    fn under_eadr_a_suffix_of_a_threads_flushes_since_its_fence_is_lost_in_program_order() {
        let s = eadr(SimConfig::default().with_seed(3));
        store(&*s, 0, 100);
        s.flush(0, 8);
        s.fence(); // durable from here on
        store(&*s, 64, 1);
        s.flush(64, 8);
        store(&*s, 128, 2);
        s.flush(128, 8);
        s.crash_now();
        let pair = |img: &[u8]| (word(img, 0), word(img, 64), word(img, 128));
        let only = s.crash_image_with(0, Adversary::DurableOnly).unwrap();
        assert_eq!(pair(&only.image), (100, 0, 0));
        assert_eq!((only.stats.flushes_lost, only.stats.flushes_kept), (2, 0));
        let all = s.crash_image_with(0, Adversary::AllWritten).unwrap();
        assert_eq!(pair(&all.image), (100, 1, 2));
        let seen: std::collections::BTreeSet<_> = (0..64)
            .map(|seed| pair(&s.crash_image(seed).unwrap()))
            .collect();
        assert_eq!(
            seen,
            [(100, 0, 0), (100, 1, 0), (100, 1, 2)].into(),
            "a prefix survives: never the later store without the earlier one"
        );
    }

    #[test]
    fn under_eadr_streamed_lines_need_the_fence() {
        for fenced in [false, true] {
            let s = eadr(SimConfig::default());
            s.write_lines(128, &[&5u64.to_ne_bytes()]);
            if fenced {
                s.fence();
            }
            s.crash_now();
            let c = s.crash_image_with(0, Adversary::DurableOnly).unwrap();
            assert_eq!(word(&c.image, 128), if fenced { 5 } else { 0 });
            assert_eq!(c.stats.lines_flushed_unfenced, u64::from(!fenced));
        }
    }

    /// A protocol that counts on "not flushed yet = not durable": an update written in
    /// place and taken back before anything flushed it (an abort). Under ADR the
    /// durable image never holds the aborted value unless the cache happens to evict
    /// it; under eADR the store is durable the moment it is made. `undo_logged` is the
    /// sound version: the old value is logged and fenced before the in-place write,
    /// and recovery rolls back from the log.
    fn speculative_update(s: &SimMedium, undo_logged: bool) {
        const DATA: usize = 0;
        const LOG: usize = 4096; // [valid, old value]
        const OTHER: usize = 8192;
        for v in 1..=3u64 {
            // Commit v: in place, persisted.
            store(s, DATA, v);
            s.persist(DATA, 8);
            // A transaction writes v + 100 in place, then aborts.
            if undo_logged {
                store(s, LOG + 8, v);
                store(s, LOG, 1);
                s.persist(LOG, 16);
            }
            store(s, DATA, v + 100);
            // Unrelated durable work of the same thread (a fence: a crash point).
            store(s, OTHER, v);
            s.persist(OTHER, 8);
            // The abort puts the committed value back.
            store(s, DATA, v);
            if undo_logged {
                s.persist(DATA, 8);
                store(s, LOG, 0);
                s.persist(LOG, 8);
            }
        }
    }

    /// The recovered value of DATA is a committed one (1..=3), never an aborted one.
    fn recovered_is_committed(img: &[u8]) -> bool {
        let data = if word(img, 4096) == 1 {
            word(img, 4104)
        } else {
            word(img, 0)
        };
        data <= 3
    }

    /// Crash `speculative_update` at every fence, `images` images each; returns the
    /// states whose recovered value is an aborted one.
    fn violations(domain: PersistenceDomain, adversary: Adversary, undo_logged: bool) -> usize {
        let probe = sim(SimConfig::default());
        speculative_update(&probe, undo_logged);
        let fences = probe.fence_count();
        let mut bad = 0;
        for f in 0..fences {
            let s = sim(SimConfig::crash_at_fence(f)
                .with_seed(f)
                .with_domain(domain));
            speculative_update(&s, undo_logged);
            assert!(s.crashed());
            for seed in 0..16 {
                let c = s.crash_image_with(seed, adversary).unwrap();
                bad += usize::from(!recovered_is_committed(&c.image));
            }
        }
        bad
    }

    #[test]
    fn an_abort_that_relies_on_unflushed_stores_being_lost_is_caught_under_eadr() {
        use PersistenceDomain::{Adr, Eadr};
        // The bug: invisible to the ADR model of what fences made durable, caught
        // under eADR at every crash between the in-place write and the abort.
        assert_eq!(violations(Adr, Adversary::DurableOnly, false), 0);
        assert!(violations(Eadr, Adversary::DurableOnly, false) > 0);
        assert!(violations(Eadr, random(), false) > 0);
        // The sound protocol passes both models, whatever the adversary keeps.
        for adversary in [Adversary::DurableOnly, random(), Adversary::AllWritten] {
            assert_eq!(violations(Adr, adversary, true), 0, "adr {adversary:?}");
            assert_eq!(violations(Eadr, adversary, true), 0, "eadr {adversary:?}");
        }
    }

    #[test]
    fn counters_and_kind() {
        let s = sim(SimConfig::default());
        assert_eq!(s.kind(), MediumKind::Custom);
        assert_eq!(s.base() as usize % 4096, 0);
        let before = pisces::tools::counters::snapshot();
        s.persist(64, 200);
        let d = pisces::tools::counters::snapshot() - before;
        assert_eq!((d.lines_flushed, d.fences), (4, 1));
        s.sync_all().unwrap();
        assert_eq!(s.fence_count(), 2);
    }
}
