//! Cache-line write-back and store fences.
//!
//! The best available instruction is chosen once, from CPUID, the first time it is
//! needed: `clwb` (writes back, keeps the line cached), else `clflushopt` (writes back
//! and invalidates, weakly ordered), else `clflush` (strongly ordered, slowest). The
//! fence is `sfence`, which orders the weakly-ordered `clwb`/`clflushopt` before later
//! stores and completes them. On targets other than x86-64 there is no user-level
//! write-back instruction; flushing is a no-op and the fence is a SeqCst fence (such a
//! target can run the DRAM, file and simulated media, not real persistent memory).

use super::CACHE_LINE;
use std::sync::OnceLock;

/// The write-back instruction in use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlushInstr {
    /// `clwb`.
    Clwb,
    /// `clflushopt`.
    ClflushOpt,
    /// `clflush`.
    Clflush,
    /// No instruction (non-x86 targets).
    None,
}

impl FlushInstr {
    /// Lower-case instruction name.
    pub fn name(self) -> &'static str {
        match self {
            FlushInstr::Clwb => "clwb",
            FlushInstr::ClflushOpt => "clflushopt",
            FlushInstr::Clflush => "clflush",
            FlushInstr::None => "none",
        }
    }
}

#[cfg(target_arch = "x86_64")]
fn detect() -> FlushInstr {
    use std::arch::x86_64::{__cpuid, __cpuid_count};
    // SAFETY: CPUID is available on every x86-64 processor. (Newer compilers declare
    // `__cpuid` safe; the block keeps the code building on the MSRV, where it is not.)
    #[allow(unused_unsafe)]
    let max_leaf = unsafe { __cpuid(0) }.eax;
    if max_leaf >= 7 {
        // SAFETY: leaf 7 exists (checked above).
        #[allow(unused_unsafe)]
        let ebx = unsafe { __cpuid_count(7, 0) }.ebx;
        if ebx & (1 << 24) != 0 {
            return FlushInstr::Clwb;
        }
        if ebx & (1 << 23) != 0 {
            return FlushInstr::ClflushOpt;
        }
    }
    FlushInstr::Clflush
}

#[cfg(not(target_arch = "x86_64"))]
fn detect() -> FlushInstr {
    FlushInstr::None
}

/// The instruction chosen for this machine.
pub fn instruction() -> FlushInstr {
    static CHOSEN: OnceLock<FlushInstr> = OnceLock::new();
    *CHOSEN.get_or_init(detect)
}

/// Write back every cache line overlapping `[addr, addr + len)`. Returns the number of
/// lines flushed.
///
/// # Safety
/// The range must be mapped (it need not be writable by Rust references).
#[inline]
pub unsafe fn flush_range(addr: *const u8, len: usize) -> u64 {
    if len == 0 {
        return 0;
    }
    let start = addr as usize & !(CACHE_LINE - 1);
    let end = addr as usize + len;
    let instr = instruction();
    let mut line = start;
    let mut n = 0;
    while line < end {
        // SAFETY: `line` is within a cache line of the caller's mapped range, and the
        // range is mapped (caller's contract); these instructions only write back.
        unsafe { flush_line(instr, line as *const u8) };
        line += CACHE_LINE;
        n += 1;
    }
    n
}

#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn flush_line(instr: FlushInstr, p: *const u8) {
    // SAFETY: the caller passes an address inside a mapped line; the instruction chosen
    // was reported by CPUID.
    unsafe {
        match instr {
            FlushInstr::Clwb => {
                std::arch::asm!("clwb [{0}]", in(reg) p, options(nostack, preserves_flags))
            }
            FlushInstr::ClflushOpt => {
                std::arch::asm!("clflushopt [{0}]", in(reg) p, options(nostack, preserves_flags))
            }
            FlushInstr::Clflush | FlushInstr::None => std::arch::x86_64::_mm_clflush(p),
        }
    }
}

#[cfg(not(target_arch = "x86_64"))]
#[inline(always)]
unsafe fn flush_line(_instr: FlushInstr, _p: *const u8) {}

/// Store fence: orders and completes earlier write-backs of this thread.
#[inline]
pub fn sfence() {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `sfence` has no preconditions on x86-64.
    unsafe {
        std::arch::x86_64::_mm_sfence()
    };
    #[cfg(not(target_arch = "x86_64"))]
    std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flushes_every_overlapping_line() {
        let buf = vec![0u8; 1024];
        let p = buf.as_ptr();
        // SAFETY: the ranges are inside `buf`.
        unsafe {
            let aligned = (p as usize).next_multiple_of(64) as *const u8;
            assert_eq!(flush_range(aligned, 64), 1);
            assert_eq!(flush_range(aligned.add(63), 2), 2);
            assert_eq!(flush_range(aligned, 0), 0);
            assert_eq!(flush_range(aligned.add(1), 128), 3);
        }
        sfence();
        assert_ne!(instruction(), FlushInstr::None);
    }
}
