//! A vector for the large per-record tables recovery builds once (one entry per log
//! record: millions for a full log), backed by transparent huge pages where the
//! kernel offers them.
//!
//! Why: recovery writes each of these tables once, front to back, and every new 4 KiB
//! page costs a page fault (and, in a virtual machine, a nested one). Measured on a
//! 64 MiB log, first touches of these tables took about a sixth of recovery's CPU
//! time. Once a vector's buffer spans whole 2 MiB regions they are advised
//! `MADV_HUGEPAGE`, so one fault maps 2 MiB. The advice is a hint: where the kernel
//! has no transparent huge pages (or `madvise` mode is off, or not Linux) nothing
//! changes but the speed. Capacity doubles as with `Vec`; after each growth the new
//! buffer is advised.

use std::ops::Deref;

/// Bytes of a transparent huge page (x86-64 and most Linux targets).
const HUGE_PAGE: usize = 2 << 20;

/// A push-only vector whose large buffers are advised for huge pages.
#[derive(Debug)]
pub struct BulkVec<T> {
    v: Vec<T>,
}

impl<T> Default for BulkVec<T> {
    fn default() -> Self {
        BulkVec { v: Vec::new() }
    }
}

impl<T> BulkVec<T> {
    /// An empty vector with room for `n` elements (advised at once), or, if that
    /// much address space is refused (strict overcommit), with none.
    ///
    /// Recovery passes an upper bound of the records a log can hold: only the pages
    /// that pushes reach are ever touched, and no growth copies the table (a large
    /// `realloc` copies whenever the allocator serves it from its heap instead of
    /// `mremap`ping it).
    pub fn with_capacity(n: usize) -> Self {
        let mut v = Vec::new();
        if v.try_reserve_exact(n).is_ok() {
            advise_huge(v.as_ptr() as usize, v.capacity() * size_of::<T>());
        }
        BulkVec { v }
    }

    /// Append `x`.
    #[inline]
    pub fn push(&mut self, x: T) {
        if self.v.len() == self.v.capacity() {
            self.grow();
        }
        self.v.push(x);
    }

    /// Append every element of `xs`.
    pub fn extend(&mut self, xs: impl IntoIterator<Item = T>) {
        for x in xs {
            self.push(x);
        }
    }

    /// Append a copy of `xs` (one copy of the bytes, no per-element push).
    pub fn extend_from_slice(&mut self, xs: &[T])
    where
        T: Copy,
    {
        if self.v.capacity() - self.v.len() < xs.len() {
            self.v.reserve_exact(xs.len());
            advise_huge(self.v.as_ptr() as usize, self.v.capacity() * size_of::<T>());
        }
        self.v.extend_from_slice(xs);
    }

    /// Keep the first `len` elements.
    pub fn truncate(&mut self, len: usize) {
        self.v.truncate(len);
    }

    /// Reverse the order of the elements, in place.
    pub fn reverse(&mut self) {
        self.v.reverse();
    }

    /// The elements as a `Vec` (no copy).
    pub fn into_vec(self) -> Vec<T> {
        self.v
    }

    #[cold]
    fn grow(&mut self) {
        let want = (2 * self.v.capacity()).max(64);
        self.v.reserve_exact(want - self.v.len());
        advise_huge(self.v.as_ptr() as usize, self.v.capacity() * size_of::<T>());
    }
}

impl<T> Deref for BulkVec<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        &self.v
    }
}

impl<'a, T> IntoIterator for &'a BulkVec<T> {
    type Item = &'a T;
    type IntoIter = std::slice::Iter<'a, T>;
    fn into_iter(self) -> Self::IntoIter {
        self.v.iter()
    }
}

/// `n` zero words, advised for huge pages (a bitmap recovery sets bits of here and
/// there). The allocation is zeroed by the kernel, not written: pages no bit reaches
/// are never faulted in (with huge pages, never the 2 MiB regions no bit reaches).
pub(crate) fn zeroed_words(n: usize) -> Vec<u64> {
    let v = vec![0u64; n];
    advise_huge(v.as_ptr() as usize, n * size_of::<u64>());
    v
}

/// Advise the whole 2 MiB regions inside `addr..addr + len` for huge pages.
fn advise_huge(addr: usize, len: usize) {
    let start = addr.next_multiple_of(HUGE_PAGE);
    let end = (addr + len) & !(HUGE_PAGE - 1);
    if end <= start {
        return;
    }
    #[cfg(target_os = "linux")]
    // SAFETY: the range lies inside this vector's own buffer (whole 2 MiB regions of
    // it, so no other allocation shares them); MADV_HUGEPAGE changes no content and
    // no access rights, only how the kernel backs the pages. Its failure (no THP in
    // this kernel) is harmless and ignored.
    unsafe {
        libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pushes_keep_order_across_growth() {
        let mut v = BulkVec::default();
        for i in 0..1_000_000u64 {
            v.push(i);
        }
        assert_eq!(v.len(), 1_000_000);
        assert!(v.iter().enumerate().all(|(i, &x)| x == i as u64));
        let mut w = BulkVec::default();
        w.extend([3u8, 1, 2]);
        assert_eq!(&w[..], &[3, 1, 2]);
        w.extend_from_slice(&[7, 8]);
        assert_eq!(&w[..], &[3, 1, 2, 7, 8]);
    }
}
