//! DRAM-backed medium with emulated NVM write latency.
//!
//! The image is a `MAP_SHARED` mapping of a file (by default under `/dev/shm`) or an
//! anonymous mapping, inside a reservation of the pool's maximum size so that it can
//! grow in place ([`super::reserve`]). Flushes execute the real write-back instructions; persistence is
//! what DRAM gives (none across power loss), so this medium measures the *cost* of a
//! persistence protocol, as the papers' NVM emulators do: every flushed cache line adds
//! `write_latency_ns`, charged by spinning at the thread's next fence (plus, with a
//! bandwidth cap, 64 bytes / cap per line).
//!
//! The charge is kept per thread in a thread-local counter of lines flushed since the
//! thread's last fence, shared by all DRAM media of the thread: a thread that flushes
//! on one pool and fences on another pays at the second. Engines never interleave two
//! pools within a commit, so this only matters for contrived programs.
//!
//! The medium takes a persistence domain ([`DramMedium::with_domain`]): under
//! [`PersistenceDomain::Eadr`] `flush` executes no write-back and charges no latency
//! (a store to a persistent cache is durable once visible, and the NVM write happens
//! at a later eviction, off the program's path), while streamed lines
//! ([`Medium::write_lines`]) still go to the medium and are charged at the fence. So
//! one machine measures what a protocol costs under both domains.
//!
//! A benchmark control can move the charge out of the engine: after
//! [`defer_emulated_waits`]`(true)` a fence of this thread adds its charge to a debt
//! instead of spinning, and [`pay_deferred_waits`] spins the debt off later, between two
//! transactions. The waits are the same in number and length, but nothing the engine
//! holds during them (locks, a snapshot, a batch awaiting its write-back) is held any
//! longer: comparing the two separates what a wait inside a commit does to other
//! transactions from what the time between a thread's transactions does anyway.

use super::counters::{add_fence, add_lines_flushed};
use super::flush::{flush_range, sfence, stream_lines};
use super::locked_file::LockedFile;
use super::reserve::{extend_file, Backing, Mapping};
use super::{checked_line_write, Medium, MediumKind, PersistenceDomain, CACHE_LINE};
use crate::{Error, Result};
use std::cell::Cell;
use std::time::{Duration, Instant};

thread_local! {
    static UNCHARGED_LINES: Cell<u64> = const { Cell::new(0) };
    /// Some(ns owed) while this thread's waits are deferred ([`defer_emulated_waits`]).
    static DEFERRED_NS: Cell<Option<u64>> = const { Cell::new(None) };
}

/// Whether this thread's fences defer their emulated NVM wait (module docs) instead of
/// spinning it at once. Turning deferral off drops any unpaid debt.
#[cfg_attr(not(feature = "tools"), allow(dead_code))] // read by the tools only
pub fn defer_emulated_waits(on: bool) {
    DEFERRED_NS.with(|d| d.set(on.then_some(0)));
}

/// Spin off the emulated waits this thread deferred since the last call (none unless
/// [`defer_emulated_waits`] is on); returns how long that was, in ns.
#[cfg_attr(not(feature = "tools"), allow(dead_code))] // read by the tools only
pub fn pay_deferred_waits() -> u64 {
    let ns = DEFERRED_NS.with(|d| match d.get() {
        Some(owed) => {
            d.set(Some(0));
            owed
        }
        None => 0,
    });
    spin_for(ns);
    ns
}

/// Busy-wait `ns` nanoseconds (the emulated NVM's wait: a sleep would give up the CPU
/// and wake late).
fn spin_for(ns: u64) {
    if ns == 0 {
        return;
    }
    let until = Instant::now() + Duration::from_nanos(ns);
    while Instant::now() < until {
        std::hint::spin_loop();
    }
}

/// A DRAM medium (file-backed or anonymous).
pub struct DramMedium {
    map: Mapping,
    latency_ns: u64,
    bandwidth: u64,
    domain: PersistenceDomain,
    // Keeps the advisory lock (and the file) alive as long as the mapping.
    _file: Option<LockedFile>,
}

impl std::fmt::Debug for DramMedium {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DramMedium")
            .field("len", &self.map.len())
            .field("latency_ns", &self.latency_ns)
            .field("domain", &self.domain)
            .finish()
    }
}

impl DramMedium {
    /// An anonymous (process-private, zeroed) image of `len` bytes: for tests and
    /// benchmarks that need no file.
    pub fn anonymous(
        len: usize,
        write_latency_ns: u64,
        bandwidth_bytes_per_sec: u64,
    ) -> Result<Self> {
        Self::anonymous_growable(len, len, write_latency_ns, bandwidth_bytes_per_sec)
    }

    /// An anonymous image of `len` bytes that can grow to `max_len` bytes in place.
    pub fn anonymous_growable(
        len: usize,
        max_len: usize,
        write_latency_ns: u64,
        bandwidth_bytes_per_sec: u64,
    ) -> Result<Self> {
        let map = Mapping::new_raw(None, len, max_len, Backing::Anonymous)
            .map_err(|e| Error::io("mapping anonymous memory", e))?;
        Ok(DramMedium {
            map,
            latency_ns: write_latency_ns,
            bandwidth: bandwidth_bytes_per_sec,
            domain: PersistenceDomain::Adr,
            _file: None,
        })
    }

    /// Map an opened (and locked) pool file `MAP_SHARED`, inside a reservation of
    /// `max_len` bytes (at least the file's length).
    pub fn from_file(
        file: std::fs::File,
        max_len: usize,
        write_latency_ns: u64,
        bandwidth_bytes_per_sec: u64,
    ) -> Result<Self> {
        let len = super::reserve::map_len(&file)?;
        // The file is a regular pool file held under an exclusive advisory lock for the
        // life of the mapping, so no cooperating process resizes or maps it.
        let map = Mapping::new(Some(&file), len, max_len, Backing::Shared)?;
        Ok(DramMedium {
            map,
            latency_ns: write_latency_ns,
            bandwidth: bandwidth_bytes_per_sec,
            domain: PersistenceDomain::Adr,
            _file: Some(LockedFile::new(file)),
        })
    }

    /// The same medium under `domain` ([`PersistenceDomain::Adr`] by default;
    /// [`PersistenceDomain::PageCache`] is the file medium's and reads as ADR here).
    pub fn with_domain(mut self, domain: PersistenceDomain) -> Self {
        self.domain = match domain {
            PersistenceDomain::Eadr => PersistenceDomain::Eadr,
            PersistenceDomain::Adr | PersistenceDomain::PageCache => PersistenceDomain::Adr,
        };
        self
    }

    /// Count `n` lines whose write-back this thread started (flushed or streamed); with
    /// an emulated latency or bandwidth, its next fence is charged for them.
    #[inline]
    fn count_flushed(&self, n: u64) {
        add_lines_flushed(n);
        if self.latency_ns != 0 || self.bandwidth != 0 {
            UNCHARGED_LINES.with(|c| c.set(c.get() + n));
        }
    }

    fn charge(&self, lines: u64) {
        let mut ns = lines.saturating_mul(self.latency_ns);
        // Bandwidth 0 means "no cap": `checked_div` yields None then.
        if let Some(bw_ns) = lines
            .saturating_mul(CACHE_LINE as u64 * 1_000_000_000)
            .checked_div(self.bandwidth)
        {
            ns = ns.saturating_add(bw_ns);
        }
        let deferred = DEFERRED_NS.with(|d| match d.get() {
            Some(owed) => {
                d.set(Some(owed.saturating_add(ns)));
                true
            }
            None => false,
        });
        if !deferred {
            spin_for(ns);
        }
    }
}

// SAFETY: `base()` is the start of a mapping of `len()` bytes (page aligned) owned by
// this value and unmapped only when it is dropped; the persistence primitives follow
// the trait contract.
unsafe impl Medium for DramMedium {
    fn file(&self) -> Option<&std::fs::File> {
        self._file.as_deref()
    }
    fn persistence_domain(&self) -> PersistenceDomain {
        self.domain
    }
    fn kind(&self) -> MediumKind {
        MediumKind::Dram {
            write_latency_ns: self.latency_ns,
            bandwidth_bytes_per_sec: self.bandwidth,
        }
    }
    fn base(&self) -> *mut u8 {
        self.map.base()
    }
    fn len(&self) -> usize {
        self.map.len()
    }
    fn max_len(&self) -> usize {
        self.map.reserved()
    }
    fn grow(&self, new_len: usize) -> Result<()> {
        if let Some(f) = self._file.as_deref() {
            extend_file(f, new_len as u64)
                .map_err(|e| Error::io(format!("extending the pool file to {new_len} bytes"), e))?;
        }
        self.map
            .extend(self._file.as_deref(), new_len)
            .map_err(|e| Error::io("mapping the grown part of the pool", e))
    }
    unsafe fn follow_len(
        &self,
        word: std::ptr::NonNull<std::sync::atomic::AtomicUsize>,
        owner: std::sync::Arc<dyn Send + Sync>,
    ) -> Result<()> {
        let Some(f) = self._file.as_deref() else {
            return Err(Error::medium_unsupported(
                "a dram medium without a file cannot be shared with other processes",
            ));
        };
        // SAFETY: the caller's contract is the mapping's.
        unsafe { self.map.follow_len(f, word, owner) }
            .map_err(|e| Error::io("mapping the pool for the growth of other processes", e))
    }
    #[inline]
    fn flush(&self, off: usize, len: usize) {
        assert!(self.map.covers(off, len));
        if self.domain == PersistenceDomain::Eadr {
            // The caches are persistent: nothing to write back, nothing to charge.
            return;
        }
        // SAFETY: the range is inside the mapping (asserted).
        let n = unsafe { flush_range(self.map.base().add(off), len) };
        self.count_flushed(n);
    }
    fn write_lines(&self, off: usize, parts: &[&[u8]]) {
        checked_line_write(off, parts, |o, l| self.map.covers(o, l));
        // SAFETY: the lines are inside the mapping (asserted; the base is page aligned,
        // so `off` is a line boundary of memory too); the caller has them to itself.
        let n = unsafe { stream_lines(self.map.base().add(off), parts) };
        self.count_flushed(n);
    }
    #[inline]
    fn fence(&self) {
        sfence();
        add_fence();
        if self.latency_ns != 0 || self.bandwidth != 0 {
            let lines = UNCHARGED_LINES.with(|c| c.replace(0));
            self.charge(lines);
        }
    }
    fn sync_all(&self) -> Result<()> {
        if self._file.is_some() {
            self.map
                .msync(0, self.map.len())
                .map_err(|e| Error::io("msync of pool", e))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn anonymous_image_is_zeroed_writable_and_counts_flushes() {
        let m = DramMedium::anonymous(1 << 16, 0, 0).unwrap();
        assert_eq!(m.len(), 1 << 16);
        assert_eq!(m.base() as usize % 4096, 0);
        // SAFETY: offset 100 is inside the image.
        unsafe { *m.base().add(100) = 7 };
        let before = crate::medium::counters::snapshot();
        m.persist(64, 200);
        let d = crate::medium::counters::snapshot() - before;
        assert_eq!(d.lines_flushed, 4);
        assert_eq!(d.fences, 1);
    }

    #[test]
    fn line_writes_land_zero_padded_and_count_as_flushed_lines() {
        let m = DramMedium::anonymous(1 << 16, 0, 0).unwrap();
        // SAFETY: offsets 128..320 are inside the image.
        unsafe { std::ptr::write_bytes(m.base().add(128), 0xAA, 192) };
        let before = crate::medium::counters::snapshot();
        m.write_lines(128, &[&[1; 32], &[2; 40]]);
        m.fence();
        let d = crate::medium::counters::snapshot() - before;
        assert_eq!((d.lines_flushed, d.fences), (2, 1));
        // SAFETY: as above; no other thread writes the image.
        let got = unsafe { std::slice::from_raw_parts(m.base().add(128), 192) };
        assert!(got[..32].iter().all(|&b| b == 1));
        assert!(got[32..72].iter().all(|&b| b == 2));
        assert!(
            got[72..128].iter().all(|&b| b == 0),
            "the last line is zero-padded"
        );
        assert!(
            got[128..].iter().all(|&b| b == 0xAA),
            "the line after is untouched"
        );
    }

    #[test]
    #[should_panic(expected = "outside the image")]
    fn line_writes_off_a_line_boundary_are_refused() {
        let m = DramMedium::anonymous(1 << 16, 0, 0).unwrap();
        m.write_lines(8, &[&[1; 8]]);
    }

    #[test]
    fn under_eadr_flush_writes_nothing_back_and_the_fence_stays() {
        let m = DramMedium::anonymous(1 << 16, 20_000, 0)
            .unwrap()
            .with_domain(PersistenceDomain::Eadr);
        assert_eq!(m.persistence_domain(), PersistenceDomain::Eadr);
        let before = crate::medium::counters::snapshot();
        m.flush(0, 64 * 50);
        let t = Instant::now();
        m.fence();
        assert!(
            t.elapsed() < Duration::from_micros(1000),
            "no write-back charged"
        );
        m.write_lines(0, &[&[1; 64]]);
        m.fence();
        let d = crate::medium::counters::snapshot() - before;
        assert_eq!(
            (d.lines_flushed, d.fences),
            (1, 2),
            "only the streamed line is written back; both fences remain"
        );
    }

    #[test]
    fn emulated_latency_is_charged_at_the_fence() {
        let m = DramMedium::anonymous(1 << 16, 20_000, 0).unwrap();
        m.flush(0, 64 * 50); // 50 lines x 20 us = 1 ms
        let t = Instant::now();
        m.fence();
        assert!(t.elapsed() >= Duration::from_micros(1000));
        let t = Instant::now();
        m.fence(); // nothing pending: no charge
        assert!(t.elapsed() < Duration::from_micros(1000));
    }

    #[test]
    fn deferred_waits_are_owed_by_the_fence_and_paid_later() {
        let m = DramMedium::anonymous(1 << 16, 20_000, 0).unwrap();
        defer_emulated_waits(true);
        m.flush(0, 64 * 50); // 50 lines x 20 us
        m.fence();
        m.flush(0, 64 * 2);
        m.fence();
        assert_eq!(pay_deferred_waits(), 52 * 20_000, "both fences' waits owed");
        assert_eq!(pay_deferred_waits(), 0, "paid once");
        m.flush(0, 64);
        m.fence();
        defer_emulated_waits(false); // an unpaid debt is dropped
        assert_eq!(pay_deferred_waits(), 0);
        m.flush(0, 64);
        m.fence(); // charged at the fence again: nothing owed afterwards
        assert_eq!(pay_deferred_waits(), 0);
    }
}
