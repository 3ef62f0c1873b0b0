//! `PPtr<T>`: a typed pointer into a pool that survives remapping.
//!
//! A `PPtr` is the offset of an object's payload from the pool base. The pool may map at
//! another address next run, so nothing in the pool holds a virtual address. Offset 0
//! is never a payload (the superblock lives there), so it serves as null.
//! Every object has an 8-byte header word immediately in front of its payload.

use bytemuck::{Pod, Zeroable};
use std::fmt;
use std::marker::PhantomData;

/// A persistent pointer to a `T` in a pool (an offset; 0 is null).
#[repr(transparent)]
pub struct PPtr<T> {
    off: u64,
    _t: PhantomData<fn() -> T>,
}

impl<T> PPtr<T> {
    /// The null pointer.
    pub const fn null() -> Self {
        PPtr {
            off: 0,
            _t: PhantomData,
        }
    }
    /// A pointer from a raw payload offset. Using a wrong offset is not undefined
    /// behaviour: the transaction API validates every pointer before use.
    pub const fn from_offset(off: u64) -> Self {
        PPtr {
            off,
            _t: PhantomData,
        }
    }
    /// The payload offset.
    pub const fn offset(self) -> u64 {
        self.off
    }
    /// True for the null pointer.
    pub const fn is_null(self) -> bool {
        self.off == 0
    }
    /// The same offset viewed as another type.
    pub const fn cast<U>(self) -> PPtr<U> {
        PPtr::from_offset(self.off)
    }
}

impl<T> Clone for PPtr<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for PPtr<T> {}
impl<T> PartialEq for PPtr<T> {
    fn eq(&self, o: &Self) -> bool {
        self.off == o.off
    }
}
impl<T> Eq for PPtr<T> {}
impl<T> std::hash::Hash for PPtr<T> {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        self.off.hash(h)
    }
}
impl<T> Default for PPtr<T> {
    fn default() -> Self {
        Self::null()
    }
}
impl<T> fmt::Debug for PPtr<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PPtr({:#x})", self.off)
    }
}

// SAFETY: `PPtr<T>` is `repr(transparent)` over a `u64` (PhantomData is a ZST), has no
// padding, and every bit pattern is a valid value (an offset).
unsafe impl<T: 'static> Zeroable for PPtr<T> {}
// SAFETY: as above; `PPtr<T>` is `Copy` for every `T` and holds no references.
unsafe impl<T: 'static> Pod for PPtr<T> {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pptr_is_plain_data() {
        #[derive(Clone, Copy, Pod, Zeroable)]
        #[repr(C)]
        struct Node {
            key: u64,
            next: PPtr<Node>,
        }
        let n = Node {
            key: 7,
            next: PPtr::from_offset(4096),
        };
        let bytes = bytemuck::bytes_of(&n);
        let back: Node = bytemuck::pod_read_unaligned(bytes);
        assert_eq!(back.next.offset(), 4096);
        assert!(PPtr::<Node>::null().is_null());
        assert_eq!(std::mem::size_of::<PPtr<Node>>(), 8);
    }
}
