//! Prefetch hints for replay: the home lines a record will write, requested some
//! records before it is applied.
//!
//! A replay writes its records' values to home locations anywhere in the heap, in log
//! order. Without a hint nearly every write waits for its line's cache miss in turn;
//! with the lines requested a few records ahead, several misses are in flight at
//! once. A hint never faults and changes nothing the program can
//! observe, so a wrong or stale address costs at most a wasted memory access.

pub(crate) use crate::heap::prefetch;
use crate::heap::Heap;

/// Hint the processor to bring the line of pool offset `off` into its caches (nothing
/// for an offset outside the pool).
#[inline(always)]
pub(crate) fn prefetch_home(heap: &Heap, off: usize) {
    if heap.in_bounds(off, 1) {
        // SAFETY: `off` is inside the image (checked above); the pointer is only
        // passed to a prefetch hint, never dereferenced.
        prefetch(unsafe { heap.ptr(off) });
    }
}
