//! The sidecar of a pool shared by several processes: the file that holds the pool's
//! volatile shared state (a [`Region`]), and the locks on the pool file that say which
//! processes are attached and which thread slots they own.
//!
//! # Files and locks
//! The sidecar is a file on tmpfs, `/dev/shm/pisces-<pool uuid>`, mapped shared by every
//! attached process. It is never synced and never survives its pool's last close: it
//! holds what a process's memory would hold if the pool were opened by one process.
//!
//! The locks are open-file-description locks (`F_OFD_SETLK`) on bytes of the **pool
//! file**, taken through a descriptor of the pool file that the sidecar opens for
//! itself: byte 0 is the *attach byte*, byte `1 + s` the liveness byte of thread slot
//! `s`. OFD locks are released when the last descriptor of their description closes,
//! which a process's death does; they conflict between descriptions also inside one
//! process (two attaches in one process behave as two processes); and a lock converts
//! between read and write atomically.
//!
//! # Attaching
//! A process that attaches tries a write lock on the attach byte without waiting.
//! * Granted: no process is attached. It is the *initializer*: it truncates the sidecar
//!   (a new, zeroed state), the pool's open runs recovery as for an exclusive open and
//!   places the state, and [`Sidecar::ready`] writes the header (with `READY`) and
//!   converts the lock to a read lock, which lets joiners in.
//! * Refused: processes are attached. It takes a read lock, waiting (an initializer
//!   still building holds the write lock), and is a *joiner*: the header must name this
//!   pool, this build's layout and `READY`, and its state is found, not built. A
//!   header without `READY` (an initializer died while building) makes it let go and
//!   try again, when it may be the initializer itself.
//!
//! # Detaching
//! The last process to detach is the one whose conversion of the attach byte back to
//! a write lock succeeds ([`Sidecar::detach`]): it closes the pool as an exclusive
//! close does and clears `READY`. Two processes that detach at once may both fail to
//! convert: both then leave the pool open, which the next initializer recovers as after
//! a crash.

use crate::error::StopCause;
use crate::heap::alloc::Allocator;
use crate::heap::layout::Layout;
use crate::heap::layout::MAX_THREADS;
use crate::peers::{Peers, Recover, Recovery};
use crate::region::{InRegion, Placed, PlacedValue, Region};
use crate::{Error, Result};
use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed, Release};
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex, Weak};

/// The sidecar header's first word.
const MAGIC: u64 = u64::from_le_bytes(*b"PSCSIDE1");

/// The version of everything the sidecar holds: two builds with different layouts of
/// the shared state must never attach to one sidecar. Change it with any change to a
/// type that lives in a region or to the order of placements.
pub(crate) const LAYOUT_VERSION: u64 = 4;

/// `READY`: the initializer finished building the state.
const READY: u64 = 1;

/// How many times a joiner that finds no ready state starts over before it gives up.
const ATTACH_ATTEMPTS: usize = 100;

/// The sidecar's first placement.
#[repr(C)]
struct Header {
    magic: AtomicU64,
    layout_version: AtomicU64,
    /// The pool's UUID.
    uuid: [AtomicU64; 2],
    /// The pool file's device and inode.
    dev: AtomicU64,
    ino: AtomicU64,
    /// The run generation every attached process runs with.
    generation: AtomicU64,
    /// The engine and a hash of its options: a joiner with other ones is refused.
    engine: AtomicU64,
    options: AtomicU64,
    /// [`READY`] once the state is built; 0 before, and after the last detach.
    ready: AtomicU64,
    /// 0; once the pool is stopped by the death of slot `s`'s process
    /// ([`Peers::stop`]), `1 + s` in the low half and the code of its [`StopCause`]
    /// above.
    stopped: AtomicU64,
    /// The number of slot claims made: the source of the claims' tokens.
    claims: AtomicU64,
}

// SAFETY: atomics; zero is "not ready"; `repr(C)`.
unsafe impl InRegion for Header {}

/// Who built the state this process attached to (module docs, *Attaching*).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Role {
    Initializer,
    Joiner,
}

/// This process's attachment to a pool's sidecar (module docs).
pub(crate) struct Sidecar {
    region: Arc<Region>,
    watch: Arc<Watch>,
    path: PathBuf,
    role: Role,
}

/// The sidecar's header, its slots' owners and its locks: what the pool's waits ask
/// whether a peer died ([`Peers`]).
///
/// # Telling a dead slot
/// A process that claims slot `s` takes the lock on byte `1 + s`, then writes a token
/// (a number no other claim had) into `owners[s]`; one that detaches writes 0 there
/// before it lets go of its locks. So slot `s` is *dead* (claimed by a process that
/// ended without detaching) when `owners[s]` holds a token, no description holds the
/// byte's lock, and `owners[s]` still holds the same token: read before the lock's
/// probe and again after, the token tells a slot that was detached from, or detached
/// from and claimed again, in between (the token then changed) from one whose owner
/// died (the kernel released its lock, and nobody wrote its word). This process's own
/// slots are alive whatever the probe says (its own locks conflict with nothing).
///
/// # Recovering a dead slot
/// A dead slot reported here ([`Peers::report_dead`]) is recovered by a thread of this
/// process, one per slot at a time (`recovering`). The thread opens the pool file
/// again, a description of its own, and takes the slot's byte there: so one process
/// recovers the slot (the others find the byte held, and the slot alive), this
/// process's own claims conflict with the recovery as another process's would, and
/// closing the description at the end gives the byte up, whatever the outcome. A
/// recoverer that dies leaves the slot dead again, with its token, for the next one,
/// which finds what the first left in the slot's name as it would a death of the
/// slot's own thread.
/// The engine clears the slot's state; then the token goes (the slot is free to claim),
/// then the byte.
struct Watch {
    header: PlacedValue<Header>,
    /// Per slot: 0, or the token of the claim that owns it.
    owners: Placed<AtomicU64>,
    /// The pool file, opened by the sidecar: the description its locks belong to.
    locks: File,
    /// The slots this process claimed.
    own: Box<[AtomicBool]>,
    /// The slots a thread of this process is recovering. (Apart from the watch: a
    /// recovery thread clears its flag after it has let go of the watch, whose
    /// description of the pool file must be closed when the last process's close
    /// ends.)
    recovering: Arc<[AtomicBool]>,
    /// The engine that recovers dead slots (set once the engine is made).
    recover: Mutex<Option<Weak<dyn Recover>>>,
    /// This watch, for the recovery threads it starts.
    me: Weak<Watch>,
}

impl std::fmt::Debug for Sidecar {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sidecar")
            .field("path", &self.path)
            .field("role", &self.role)
            .finish()
    }
}

/// Bytes of the sidecar of a pool of geometry `layout`: the header, the allocator's
/// state, and what an engine that shares places (the `pisces` engine: its slots and the
/// arena of its copies, which takes most of it); and the least that serves (the arena
/// at its smallest), where a process may not map that much (an address-space limit, a
/// process under valgrind). Address space and a sparse file: only what is used takes
/// memory.
pub(crate) fn region_bytes(layout: &Layout) -> (usize, usize) {
    const HEADER_BYTES: usize = 4096 + 8 * MAX_THREADS;
    const ENGINE_BYTES: usize = (64 << 30) + (256 << 20);
    let fixed = HEADER_BYTES + Allocator::region_bytes(layout);
    (
        fixed + ENGINE_BYTES,
        fixed + crate::region::MIN_RESERVED_BYTES,
    )
}

/// The sidecar file of the pool with UUID `uuid`.
pub(crate) fn path_for(uuid: &[u8; 16]) -> PathBuf {
    let hex: String = uuid.iter().map(|b| format!("{b:02x}")).collect();
    Path::new("/dev/shm").join(format!("pisces-{hex}"))
}

impl Sidecar {
    /// Attach to the sidecar of the pool at `pool` (already open in this process,
    /// shared), whose UUID is `uuid`; an initializer makes the sidecar `reserve` bytes
    /// long, or a quarter of that as many times as its mapping is refused, down to
    /// `need` bytes
    /// long (its regions are placed in it).
    pub(crate) fn attach(
        pool: &Path,
        uuid: &[u8; 16],
        sidecar: &Path,
        reserve: usize,
        need: usize,
    ) -> Result<Sidecar> {
        let locks = OpenOptions::new()
            .read(true)
            .write(true)
            .open(pool)
            .map_err(|e| Error::io("opening the pool file for its locks", e))?;
        let meta = locks
            .metadata()
            .map_err(|e| Error::io("reading the pool file's metadata", e))?;
        for _ in 0..ATTACH_ATTEMPTS {
            if ofd_lock(&locks, 0, libc::F_WRLCK, false)? {
                return Self::initialize(locks, &meta, uuid, sidecar, reserve, need);
            }
            ofd_lock(&locks, 0, libc::F_RDLCK, true)?;
            match Self::join(&meta, uuid, sidecar)? {
                Some((region, header)) => {
                    return Self::made(region, header, locks, sidecar, Role::Joiner)
                }
                None => {
                    // Not ready: its initializer died building it. Let go, start over.
                    ofd_lock(&locks, 0, libc::F_UNLCK, false)?;
                    std::thread::yield_now();
                }
            }
        }
        Err(Error::invalid_config(format!(
            "the pool {} is open in another process, but its shared state in {} never \
             became ready here (is that process in another mount namespace, with another \
             /dev/shm?)",
            pool.display(),
            sidecar.display()
        )))
    }

    /// The initializer's attach: a new, zeroed sidecar.
    fn initialize(
        locks: File,
        meta: &std::fs::Metadata,
        uuid: &[u8; 16],
        sidecar: &Path,
        mut reserve: usize,
        need: usize,
    ) -> Result<Sidecar> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .mode(meta.permissions().mode() & 0o666)
            .open(sidecar)
            .map_err(|e| Error::io("creating the pool's shared state file", e))?;
        // Joiners map the whole file, whatever length it was given here.
        let region = loop {
            file.set_len(reserve as u64)
                .map_err(|e| Error::io("sizing the pool's shared state file", e))?;
            let f = file
                .try_clone()
                .map_err(|e| Error::io("opening the pool's shared state file", e))?;
            match Region::file(f, true) {
                Ok(r) => break r,
                Err(_) if reserve > need => reserve = (reserve / 4).max(need),
                Err(e) => return Err(e),
            }
        };
        let header = region.place_value(|h: &mut Header| {
            h.magic = AtomicU64::new(MAGIC);
            h.layout_version = AtomicU64::new(LAYOUT_VERSION);
            h.dev = AtomicU64::new(meta.dev());
            h.ino = AtomicU64::new(meta.ino());
            h.uuid = uuid_words(uuid).map(AtomicU64::new);
        })?;
        Self::made(region, header, locks, sidecar, Role::Initializer)
    }

    /// The attachment, once the header is placed: the owners placed after it, and the
    /// region watched by the pool's waits (`crate::peers`).
    fn made(
        region: Arc<Region>,
        header: PlacedValue<Header>,
        locks: File,
        sidecar: &Path,
        role: Role,
    ) -> Result<Sidecar> {
        let owners = region.place_as_found(MAX_THREADS)?;
        let flags = || (0..MAX_THREADS).map(|_| AtomicBool::new(false));
        let watch = Arc::new_cyclic(|me| Watch {
            header,
            owners,
            locks,
            own: flags().collect(),
            recovering: flags().collect(),
            recover: Mutex::new(None),
            me: me.clone(),
        });
        let peers: Arc<dyn Peers> = watch.clone();
        crate::peers::watch(
            region.ptr(0) as usize,
            region.reserved(),
            Arc::downgrade(&peers),
        );
        Ok(Sidecar {
            region,
            watch,
            path: sidecar.to_path_buf(),
            role,
        })
    }

    /// A joiner's attach, under the read lock: the region and its header if the state
    /// is ready; None if not (no initializer finished it).
    fn join(
        meta: &std::fs::Metadata,
        uuid: &[u8; 16],
        sidecar: &Path,
    ) -> Result<Option<(Arc<Region>, PlacedValue<Header>)>> {
        let file = match OpenOptions::new().read(true).write(true).open(sidecar) {
            Ok(f) => f,
            // The last process removed it as this one waited (the next attempt finds
            // no process attached), or the file is not visible here.
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(Error::io("opening the pool's shared state file", e)),
        };
        let region = Region::file(file, false)?;
        let header = region.place_value(|_: &mut Header| {})?;
        if header.ready.load(Acquire) != READY {
            return Ok(None);
        }
        let stopped = header.stopped.load(Acquire);
        if let Some(slot) = stopped_slot(stopped) {
            // The processes attached are stopping: this one waits for the next
            // initializer's recovery.
            let cause = StopCause::from_code((stopped >> 32) as u8);
            return Err(Error::PeerDied { slot, cause });
        }
        // Relaxed: written before READY, which was Acquired above.
        let theirs = [header.uuid[0].load(Relaxed), header.uuid[1].load(Relaxed)];
        if header.magic.load(Relaxed) != MAGIC
            || header.layout_version.load(Relaxed) != LAYOUT_VERSION
            || theirs != uuid_words(uuid)
            || header.dev.load(Relaxed) != meta.dev()
            || header.ino.load(Relaxed) != meta.ino()
        {
            return Err(Error::invalid_config(format!(
                "the pool's shared state file {} belongs to another pool or another build \
                 of the library (layout {} here)",
                sidecar.display(),
                LAYOUT_VERSION
            )));
        }
        Ok(Some((region, header)))
    }

    /// Whether this process built the state.
    pub(crate) fn role(&self) -> Role {
        self.role
    }

    /// The region the state is placed in.
    pub(crate) fn region(&self) -> &Arc<Region> {
        &self.region
    }

    /// The run generation the initializer chose (joiners run with it).
    pub(crate) fn generation(&self) -> u64 {
        // Relaxed: written before READY, which `join` Acquired.
        self.watch.header.generation.load(Relaxed)
    }

    /// Check a joiner's engine and options against the initializer's.
    pub(crate) fn check_engine(&self, engine: u32, options: &str) -> Result<()> {
        // Relaxed: as in `generation`.
        let (e, o) = (
            self.watch.header.engine.load(Relaxed),
            self.watch.header.options.load(Relaxed),
        );
        if e != u64::from(engine) || o != options_hash(options) {
            return Err(Error::invalid_config(
                "the pool is open in another process with other engine options; \
                 every process that shares a pool runs it with the same options",
            ));
        }
        Ok(())
    }

    /// The initializer's state is built: publish it and let joiners in.
    pub(crate) fn ready(&self, generation: u64, engine: u32, options: &str) -> Result<()> {
        debug_assert_eq!(self.role, Role::Initializer);
        let h = &self.watch.header;
        h.generation.store(generation, Relaxed);
        h.engine.store(u64::from(engine), Relaxed);
        h.options.store(options_hash(options), Relaxed);
        // Release: a joiner that Acquires READY sees the header and all the state
        // placed before it (the joiner's read lock comes after our conversion below,
        // which orders it too; the flag is what a joiner checks).
        h.ready.store(READY, Release);
        ofd_lock(&self.watch.locks, 0, libc::F_RDLCK, false).map(|_| ())
    }

    /// Claim thread slot `slot` for this process: true if its liveness byte was free
    /// and is now ours. A slot found free but still owned (its process died without
    /// detaching) is not claimed but reported for recovery ([`Peers::report_dead`]):
    /// false, or `Err(PeerDied)` if that stopped the pool.
    pub(crate) fn claim_slot(&self, slot: usize) -> Result<bool> {
        let w = &self.watch;
        if !ofd_lock(&w.locks, 1 + slot as u64, libc::F_WRLCK, false)? {
            return Ok(false);
        }
        // Acquire: pairs with the Release of a detach's clear (below, `detach_slots`)
        // and of a recovery's (`Watch::recover_slot`), which came before their unlock:
        // a slot given up reads 0 here.
        if w.owners[slot].load(Acquire) != 0 {
            // (The recovery takes the byte through a description of its own.)
            ofd_lock(&w.locks, 1 + slot as u64, libc::F_UNLCK, false)?;
            return match w.report_dead(slot as u32) {
                true => Ok(false),
                false => Err(self.died(w.stopped().unwrap_or(slot as u32))),
            };
        }
        // Relaxed: tokens need only be distinct.
        let token = w.header.claims.fetch_add(1, Relaxed) + 1;
        // Release: orders the token after our lock for a prober, which reads it before
        // and after its probe (`Watch::is_dead`).
        w.owners[slot].store(token, Release);
        w.own[slot].store(true, Relaxed);
        Ok(true)
    }

    /// This process detaches: its slots are no longer owned (before its locks go, so
    /// no prober takes them for dead: `Watch`).
    pub(crate) fn detach_slots(&self) {
        let w = &self.watch;
        for (own, owner) in w.own.iter().zip(w.owners.iter()) {
            if own.swap(false, Relaxed) {
                // Release: see `claim_slot`.
                owner.store(0, Release);
            }
        }
    }

    /// The slot whose process's death stopped the pool, if it has stopped.
    pub(crate) fn stopped(&self) -> Option<u32> {
        self.watch.stopped()
    }

    /// The error of a call that finds the pool stopped by slot `slot`'s death.
    pub(crate) fn died(&self, slot: u32) -> Error {
        crate::peers::died(Some(&*self.watch), slot)
    }

    /// Whether slot `slot`'s process died without giving it up ([`Peers::is_dead`]).
    pub(crate) fn is_dead(&self, slot: usize) -> bool {
        self.watch.is_dead(slot as u32)
    }

    /// Have dead slot `slot` recovered ([`Peers::report_dead`]).
    pub(crate) fn report_dead(&self, slot: usize) -> bool {
        self.watch.report_dead(slot as u32)
    }

    /// Wait until no thread of this process recovers a slot (a process that detaches
    /// lets its recoveries end first: the last one closes the pool).
    pub(crate) fn wait_for_recoveries(&self) {
        while self.watch.recovering.iter().any(|r| r.load(Acquire)) {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }

    /// Give up thread slot `slot` (claimed by this process). (A process gives its
    /// slots up all at once when it detaches: closing the description releases them.)
    #[cfg(test)]
    pub(crate) fn release_slot(&self, slot: usize) -> Result<()> {
        let w = &self.watch;
        w.own[slot].store(false, Relaxed);
        // Release: see `claim_slot`.
        w.owners[slot].store(0, Release);
        ofd_lock(&self.watch.locks, 1 + slot as u64, libc::F_UNLCK, false).map(|_| ())
    }

    /// Whether another process holds slot `slot` (a process holds a slot until it
    /// releases it or dies).
    pub(crate) fn slot_held_elsewhere(&self, slot: usize) -> Result<bool> {
        ofd_held(&self.watch.locks, 1 + slot as u64)
    }

    /// Start detaching: true if this process is the last one attached (it then holds
    /// the attach byte's write lock, so no one attaches until it has closed).
    pub(crate) fn detach_is_last(&self) -> Result<bool> {
        ofd_lock(&self.watch.locks, 0, libc::F_WRLCK, false)
    }

    /// The last process's close is done: the state is no longer ready, and its file
    /// is removed (the next process to attach makes a new one).
    pub(crate) fn retire(&self) {
        // Relaxed: the next attach is an initializer (the write lock we hold), which
        // rebuilds the whole file; a process waiting to join finds no file or this
        // value, and starts over.
        self.watch.header.ready.store(0, Relaxed);
        // An error leaves the file, which the next initializer truncates.
        let _ = std::fs::remove_file(&self.path);
    }
}

impl Peers for Watch {
    fn stopped(&self) -> Option<u32> {
        // Acquire: pairs with `stop`'s Release; nothing is read on its strength but
        // the slot.
        stopped_slot(self.header.stopped.load(Acquire))
    }

    fn stop_cause(&self) -> StopCause {
        // Relaxed: one word with the slot; a diagnostic.
        let word = self.header.stopped.load(Relaxed);
        match stopped_slot(word) {
            Some(_) => StopCause::from_code((word >> 32) as u8),
            None => StopCause::Recovery,
        }
    }

    fn is_dead(&self, slot: u32) -> bool {
        let s = slot as usize;
        if s >= self.owners.len() || self.own[s].load(Relaxed) {
            return false;
        }
        // Acquire: see `Sidecar::claim_slot`.
        let token = self.owners[s].load(Acquire);
        // An error of the probe counts as alive: a stop is never made up.
        token != 0
            && !ofd_held(&self.locks, 1 + slot as u64).unwrap_or(true)
            && self.owners[s].load(Acquire) == token
    }

    fn any_dead(&self) -> Option<u32> {
        (0..self.owners.len() as u32)
            // Relaxed: a hint of which slots to probe; `is_dead` reads again.
            .filter(|&s| self.owners[s as usize].load(Relaxed) != 0)
            .find(|&s| self.is_dead(s))
    }

    fn stop(&self, slot: u32, cause: StopCause) {
        // Release: pairs with `stopped`. A stop already made keeps its slot and cause.
        let word = (u64::from(slot) + 1) | u64::from(cause.code()) << 32;
        let _ = self
            .header
            .stopped
            .compare_exchange(0, word, Release, Relaxed);
    }

    fn report_dead(&self, slot: u32) -> bool {
        if self.stopped().is_some() {
            return false;
        }
        let Some(flag) = self.recovering.get(slot as usize) else {
            return false;
        };
        // AcqRel: one recovery per slot in this process; the clear at its end
        // Releases what it did.
        if flag.swap(true, AcqRel) {
            return true;
        }
        let (me, flags) = (self.me.clone(), self.recovering.clone());
        let started = std::thread::Builder::new()
            .name("pisces-recovery".into())
            .spawn(move || {
                if let Some(w) = me.upgrade() {
                    w.recover_slot(slot);
                }
                // Release: see above.
                flags[slot as usize].store(false, Release);
            });
        if started.is_err() {
            // No thread to recover it in: the others must not wait for ever.
            flag.store(false, Release);
            self.stop(slot, StopCause::Recovery);
            return false;
        }
        true
    }

    fn set_recover(&self, recover: Weak<dyn Recover>) {
        *self.recover.lock().unwrap_or_else(|e| e.into_inner()) = Some(recover);
    }
}

impl Watch {
    /// A recovery thread's work on dead slot `slot` (type docs, *Recovering a dead
    /// slot*): stop the pool if the engine cannot recover it.
    fn recover_slot(&self, slot: u32) {
        if let Recovery::Impossible(cause) = self.try_recover(slot) {
            self.stop(slot, cause);
        }
    }

    fn try_recover(&self, slot: u32) -> Recovery {
        let s = slot as usize;
        // A description of our own (type docs): opening the file again through its
        // descriptor makes a new one.
        let path = format!("/proc/self/fd/{}", self.locks.as_raw_fd());
        let Ok(mine) = OpenOptions::new().read(true).write(true).open(path) else {
            return Recovery::Impossible(StopCause::Recovery);
        };
        match ofd_lock(&mine, 1 + u64::from(slot), libc::F_WRLCK, false) {
            Ok(true) => {}
            // Another process recovers it (or the slot was claimed again).
            Ok(false) => return Recovery::Later,
            Err(_) => return Recovery::Impossible(StopCause::Recovery),
        }
        // Acquire: see `Sidecar::claim_slot`. Zero: given up after all (it detached
        // between the report and now).
        let token = self.owners[s].load(Acquire);
        if token == 0 {
            return Recovery::Done;
        }
        let recover = self
            .recover
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .and_then(Weak::upgrade);
        let Some(recover) = recover else {
            return Recovery::Impossible(StopCause::Recovery);
        };
        // A wait of the recovery that gives up: the pool stopped meanwhile (and keeps
        // the cause of that stop).
        let outcome = crate::peers::catch(|| recover.recover(slot))
            .unwrap_or(Recovery::Impossible(StopCause::Recovery));
        if outcome == Recovery::Done {
            // Release: the engine's state of the slot, given free, before a claimer
            // that Acquires the word's 0 (`Sidecar::claim_slot`).
            let _ = self.owners[s].compare_exchange(token, 0, Release, Relaxed);
        }
        // Closing `mine` gives the byte up.
        outcome
    }
}

/// For a reader of the pool file that must not see it change (the offline check): true,
/// with a read lock taken on the attach byte through `file`'s description (held until
/// it closes), if no process has the pool open shared; false if one has.
#[cfg_attr(not(feature = "tools"), allow(dead_code))] // the check is a tool
pub(crate) fn hold_out_attachers(file: &File) -> Result<bool> {
    if ofd_held(file, 0)? {
        return Ok(false);
    }
    ofd_lock(file, 0, libc::F_RDLCK, false)
}

/// The slot of a sidecar's `stopped` word (`1 + slot` in its low half; the cause's
/// code above), if the pool has stopped.
fn stopped_slot(word: u64) -> Option<u32> {
    (word as u32).checked_sub(1)
}

/// The pool's UUID as the header keeps it.
fn uuid_words(uuid: &[u8; 16]) -> [u64; 2] {
    let (a, b) = uuid.split_at(8);
    [a, b].map(|h| u64::from_le_bytes(h.try_into().expect("8 bytes")))
}

/// A hash of an engine's options, to compare them between processes.
fn options_hash(options: &str) -> u64 {
    u64::from(crc32c::crc32c(options.as_bytes())) | (options.len() as u64) << 32
}

/// Take (or convert, or release with `F_UNLCK`) the OFD lock of kind `kind` on byte
/// `byte` of `file`: true if granted; false if another description holds a conflicting
/// one and `wait` is false. With `wait`, blocks until granted.
fn ofd_lock(file: &File, byte: u64, kind: libc::c_int, wait: bool) -> Result<bool> {
    let mut fl = flock_for(byte, kind);
    let cmd = if wait {
        libc::F_OFD_SETLKW
    } else {
        libc::F_OFD_SETLK
    };
    loop {
        // SAFETY: `fl` is a valid, initialised `flock`; the descriptor is valid for the
        // call.
        let rc = unsafe { libc::fcntl(file.as_raw_fd(), cmd, &mut fl) };
        if rc == 0 {
            return Ok(true);
        }
        let e = io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EINTR) => continue,
            Some(libc::EAGAIN) | Some(libc::EACCES) if !wait => return Ok(false),
            _ => return Err(Error::io("locking a byte of the pool file", e)),
        }
    }
}

/// Whether a description other than this one holds a lock on byte `byte` of `file`.
fn ofd_held(file: &File, byte: u64) -> Result<bool> {
    let mut fl = flock_for(byte, libc::F_WRLCK);
    // SAFETY: as in `ofd_lock`.
    let rc = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_OFD_GETLK, &mut fl) };
    if rc != 0 {
        return Err(Error::io(
            "probing a lock on the pool file",
            io::Error::last_os_error(),
        ));
    }
    Ok(fl.l_type != libc::F_UNLCK as libc::c_short)
}

/// A `flock` record for one byte (OFD locks need `l_pid` 0).
fn flock_for(byte: u64, kind: libc::c_int) -> libc::flock {
    // SAFETY: `flock` is plain data; all-zero is a valid value.
    let mut fl: libc::flock = unsafe { std::mem::zeroed() };
    fl.l_type = kind as libc::c_short;
    fl.l_whence = libc::SEEK_SET as libc::c_short;
    fl.l_start = byte as libc::off_t;
    fl.l_len = 1;
    fl
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setup() -> (tempfile::TempDir, PathBuf, PathBuf, [u8; 16]) {
        let dir = tempfile::tempdir().unwrap();
        let pool = dir.path().join("p.pool");
        std::fs::write(&pool, vec![0u8; 8192]).unwrap();
        let uuid = *b"sidecar-test-id!";
        let side = dir.path().join("side");
        (dir, pool, side, uuid)
    }

    /// The first attach builds, the second waits for `ready` and finds the same state;
    /// the last to detach is told so.
    #[test]
    fn an_initializer_then_a_joiner_share_one_state() {
        let (_d, pool, side, uuid) = setup();
        let a = Sidecar::attach(&pool, &uuid, &side, 1 << 20, 1 << 20).unwrap();
        assert_eq!(a.role(), Role::Initializer);
        let word = a
            .region()
            .place_value(|w: &mut AtomicU64| *w = AtomicU64::new(7))
            .unwrap();
        a.ready(5, 1, "group_commit=8").unwrap();
        let b = Sidecar::attach(&pool, &uuid, &side, 1 << 20, 1 << 20).unwrap();
        assert_eq!((b.role(), b.generation()), (Role::Joiner, 5));
        b.check_engine(1, "group_commit=8").unwrap();
        assert!(b.check_engine(1, "group_commit=4").is_err());
        let seen = b
            .region()
            .place_value(|_: &mut AtomicU64| unreachable!())
            .unwrap();
        assert_eq!(seen.load(Relaxed), 7);
        seen.store(9, Relaxed);
        assert_eq!(word.load(Relaxed), 9, "one memory");
        // Slots: one owner at a time, seen from the other.
        assert!(a.claim_slot(3).unwrap());
        assert!(!b.claim_slot(3).unwrap());
        assert!(b.slot_held_elsewhere(3).unwrap());
        a.release_slot(3).unwrap();
        assert!(!b.slot_held_elsewhere(3).unwrap());
        assert!(b.claim_slot(3).unwrap());
        // Detaching: not the last while the other is attached.
        assert!(!a.detach_is_last().unwrap());
        drop(a);
        assert!(b.detach_is_last().unwrap());
        b.retire();
        assert!(!side.exists(), "the last close removes the sidecar");
    }

    /// A sidecar whose initializer never declared it ready is rebuilt by the next
    /// attach.
    #[test]
    fn a_state_never_made_ready_is_rebuilt() {
        let (_d, pool, side, uuid) = setup();
        let a = Sidecar::attach(&pool, &uuid, &side, 1 << 20, 1 << 20).unwrap();
        a.region()
            .place_value(|w: &mut AtomicU64| *w = AtomicU64::new(7))
            .unwrap();
        drop(a); // died before `ready`
        let b = Sidecar::attach(&pool, &uuid, &side, 1 << 20, 1 << 20).unwrap();
        assert_eq!(b.role(), Role::Initializer);
        let w = b.region().place_value(|_: &mut AtomicU64| {}).unwrap();
        assert_eq!(w.load(Relaxed), 0, "a new, zeroed state");
    }

    /// A sidecar of another pool is refused, never taken over.
    #[test]
    fn another_pools_sidecar_is_refused() {
        let (_d, pool, side, uuid) = setup();
        let a = Sidecar::attach(&pool, &uuid, &side, 1 << 20, 1 << 20).unwrap();
        a.ready(5, 1, "").unwrap();
        let other = *b"another-pool-id!";
        let e = Sidecar::attach(&pool, &other, &side, 1 << 20, 1 << 20).unwrap_err();
        assert!(e.to_string().contains("another pool"), "{e}");
    }
}
