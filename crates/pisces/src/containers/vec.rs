//! [`PVec<T>`]: a persistent growable vector.
//!
//! # Layout
//! ```text
//! handle (8 bytes, Pod) ──► header { VEC_TAG << 48 | size_of::<T>(), len, capacity, buffer }
//! buffer: capacity × T (a separate block; none while the capacity is 0)
//! ```
//! The handle points at a header that stays where it is, so like the maps' handles it
//! can be copied and stored anywhere, and every operation takes `&self`. A push past
//! the capacity allocates a buffer of twice the capacity (at least 4), copies the
//! elements and frees the old buffer at commit, inside the transaction.
//!
//! # Snapshot isolation
//! Reads write nothing. Updates write what they change: `push`, `pop`, `truncate`
//! and `clear` the header (the length), `push` and `set` the buffer, a reallocation
//! the header and frees the old buffer (a free conflicts with a concurrent write of
//! the block, as a write does, so a concurrent `set` never lands in a freed buffer),
//! `destroy` frees both. So two
//! updates of the length meet on the header and two of one element on the buffer. A
//! `set` concurrent with a `truncate` or `pop` below its index may both commit: the
//! element it wrote is then past the end, as if the `set` ran first.
//!
//! # Damage
//! The header's tag, element size, `len <= capacity` and the buffer (null exactly when
//! the capacity is 0) are checked on every access, and the engine checks that the
//! buffer block holds what the header says before any element is read: a damaged pool
//! gives [`Error::Corrupt`], never a panic.

use super::bytes::{free_block, Owned};
use crate::{Error, PPtr, Pod, Result, Tx, TxAccess, Zeroable};
use std::fmt;
use std::marker::PhantomData;
use std::mem::{align_of, size_of};

/// The tag in the top 16 bits of a vector header's first word ("PV").
pub(crate) const VEC_TAG: u64 = 0x5056;
/// Words of a vector header.
pub(crate) const VEC_HEADER_WORDS: usize = 4;
/// The most elements a vector holds (its buffer stays below 2^48 bytes).
const MAX_BYTES: u64 = 1 << 48;

/// A persistent growable vector of `T` (an 8-byte handle to a header, like the maps).
///
/// ```
/// use pisces::{Config, PPtr, PVec, Pool};
/// # fn main() -> pisces::Result<()> {
/// # let dir = tempfile::tempdir().unwrap();
/// let pool = Pool::create(dir.path().join("v.pool"), Config::new().size(32 << 20))?;
/// let root: PPtr<PVec<u64>> = pool.root()?;
/// pool.run(|tx| {
///     let v = PVec::new(tx)?;
///     *tx.write(root)? = v;
///     for i in 0..10 {
///         v.push(tx, i * i)?; // grows by doubling, inside the transaction
///     }
///     v.extend_from_slice(tx, &[100, 121])?;
///     Ok(())
/// })?;
/// pool.run(|tx| {
///     let v = *tx.read(root)?;
///     assert_eq!(v.len(tx)?, 12);
///     assert_eq!(v.get(tx, 3)?, Some(9));
///     assert_eq!(v.as_slice(tx)?[10..], [100, 121]); // borrowed from the transaction
///     assert_eq!(v.iter(tx)?.sum::<u64>(), 285 + 221);
///     assert_eq!(v.pop(tx)?, Some(121));
///     v.set(tx, 0, 7)?;
///     v.truncate(tx, 2)?;
///     assert_eq!(v.to_vec(tx)?, [7, 1]);
///     Ok(())
/// })?;
/// # Ok(()) }
/// ```
#[repr(transparent)]
#[derive(Pod, Zeroable)]
pub struct PVec<T> {
    header: PPtr<[u64; VEC_HEADER_WORDS]>,
    _t: PhantomData<fn() -> T>,
}

impl<T> Clone for PVec<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for PVec<T> {}
impl<T> PartialEq for PVec<T> {
    fn eq(&self, o: &Self) -> bool {
        self.header == o.header
    }
}
impl<T> Eq for PVec<T> {}
impl<T> fmt::Debug for PVec<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PVec({:#x})", self.header.offset())
    }
}
impl<T> Default for PVec<T> {
    fn default() -> Self {
        Self::null()
    }
}

/// A validated header.
#[derive(Clone, Copy)]
struct Head {
    len: usize,
    cap: usize,
    buf: u64,
}

impl<T> PVec<T> {
    /// The null handle (what a zeroed root holds); every operation on it is an error.
    pub const fn null() -> Self {
        PVec {
            header: PPtr::null(),
            _t: PhantomData,
        }
    }

    /// True for the null handle.
    pub const fn is_null(self) -> bool {
        self.header.is_null()
    }

    /// Offset of the vector's header object (for tools).
    pub const fn offset(self) -> u64 {
        self.header.offset()
    }
}

impl<T: Pod> PVec<T> {
    const ELEM: usize = {
        assert!(size_of::<T>() > 0, "zero-sized elements are not supported");
        assert!(
            align_of::<T>() <= 8,
            "vector elements must have alignment at most 8 (pool objects are 8-byte aligned)"
        );
        size_of::<T>()
    };

    /// A new empty vector (allocates its header, no buffer).
    pub fn new<'h>(tx: &mut impl TxAccess<'h>) -> Result<Self> {
        let tx = tx.tx_mut();
        Self::with_capacity(tx, 0)
    }

    /// A new empty vector with room for `cap` elements.
    pub fn with_capacity<'h>(tx: &mut impl TxAccess<'h>, cap: usize) -> Result<Self> {
        let tx = tx.tx_mut();
        let buf = if cap == 0 {
            0
        } else {
            Self::alloc_buf(tx, cap)?
        };
        let header = tx.alloc([VEC_TAG << 48 | Self::ELEM as u64, 0, cap as u64, buf])?;
        Ok(PVec {
            header,
            _t: PhantomData,
        })
    }

    fn alloc_buf(tx: &mut Tx<'_>, cap: usize) -> Result<u64> {
        let bytes = (cap as u64)
            .checked_mul(Self::ELEM as u64)
            .filter(|&b| b < MAX_BYTES);
        let Some(bytes) = bytes else {
            return Err(Error::invalid_argument(format!(
                "a vector of {cap} elements of {} bytes is too large",
                Self::ELEM
            )));
        };
        Ok(tx.alloc_bytes(bytes as usize)?.offset())
    }

    fn corrupt(&self, what: impl fmt::Display) -> Error {
        Error::corrupt(format!("vector at {:#x}: {what}", self.header.offset()))
    }

    /// The header, validated.
    fn head(&self, tx: &Tx<'_>) -> Result<Head> {
        if self.header.is_null() {
            return Err(Error::invalid_pointer("null vector handle"));
        }
        let [tag, len, cap, buf] = *tx.read(self.header)?;
        if tag != VEC_TAG << 48 | Self::ELEM as u64 {
            return Err(Error::invalid_pointer(format!(
                "{:#x} is not a vector of {}-byte elements (first word {tag:#x})",
                self.header.offset(),
                Self::ELEM
            )));
        }
        if len > cap
            || cap.saturating_mul(Self::ELEM as u64) >= MAX_BYTES
            || (cap == 0) != (buf == 0)
        {
            return Err(self.corrupt(format_args!(
                "length {len}, capacity {cap}, buffer {buf:#x}"
            )));
        }
        Ok(Head {
            len: len as usize,
            cap: cap as usize,
            buf,
        })
    }

    /// The first `n` elements of the buffer (`n <= cap`).
    fn elems<'t>(&self, tx: &'t Tx<'_>, h: Head, n: usize) -> Result<&'t [T]> {
        if n == 0 {
            return Ok(&[]);
        }
        let bytes = match tx.read_bytes(PPtr::from_offset(h.buf), n * Self::ELEM) {
            Ok(b) => b,
            Err(Error::Conflict) => return Err(Error::Conflict),
            Err(e) => return Err(self.corrupt(format_args!("buffer: {e}"))),
        };
        bytemuck::try_cast_slice(bytes).map_err(|e| self.corrupt(format_args!("buffer: {e:?}")))
    }

    /// The first `n` elements of the buffer, writable (`n <= cap`).
    fn elems_mut<'t>(&self, tx: &'t mut Tx<'_>, h: Head, n: usize) -> Result<&'t mut [T]> {
        if n == 0 {
            return Ok(&mut []);
        }
        let bytes = tx.write_bytes(PPtr::from_offset(h.buf), n * Self::ELEM)?;
        bytemuck::try_cast_slice_mut(bytes).map_err(|e| {
            Error::corrupt(format!(
                "vector at {:#x}: buffer: {e:?}",
                self.header.offset()
            ))
        })
    }

    fn set_len(&self, tx: &mut Tx<'_>, len: usize) -> Result<()> {
        tx.write(self.header)?[1] = len as u64;
        Ok(())
    }

    /// Number of elements.
    pub fn len(&self, tx: &Tx<'_>) -> Result<usize> {
        Ok(self.head(tx)?.len)
    }

    /// True if the vector has no elements.
    pub fn is_empty(&self, tx: &Tx<'_>) -> Result<bool> {
        Ok(self.head(tx)?.len == 0)
    }

    /// Elements the buffer holds before the next push reallocates it.
    pub fn capacity(&self, tx: &Tx<'_>) -> Result<usize> {
        Ok(self.head(tx)?.cap)
    }

    /// The elements in this transaction's snapshot, borrowed from the transaction.
    pub fn as_slice<'t>(&self, tx: &'t Tx<'_>) -> Result<&'t [T]> {
        let h = self.head(tx)?;
        self.elems(tx, h, h.len)
    }

    /// An iterator over the elements, borrowed from the transaction.
    pub fn iter<'t>(&self, tx: &'t Tx<'_>) -> Result<std::slice::Iter<'t, T>> {
        Ok(self.as_slice(tx)?.iter())
    }

    /// An owned copy of the elements.
    pub fn to_vec(&self, tx: &Tx<'_>) -> Result<Vec<T>> {
        Ok(self.as_slice(tx)?.to_vec())
    }

    /// Element `i`, or `None` past the end.
    pub fn get(&self, tx: &Tx<'_>, i: usize) -> Result<Option<T>> {
        Ok(self.as_slice(tx)?.get(i).copied())
    }

    /// Replace element `i`; returns the old value. An index past the end is an
    /// [`Error::InvalidArgument`] (the vector is unchanged).
    pub fn set<'h>(&self, tx: &mut impl TxAccess<'h>, i: usize, v: T) -> Result<T> {
        let tx = tx.tx_mut();
        let h = self.head(tx)?;
        if i >= h.len {
            return Err(Error::invalid_argument(format!(
                "index {i} past the end of a vector of {} elements",
                h.len
            )));
        }
        Ok(std::mem::replace(&mut self.elems_mut(tx, h, i + 1)?[i], v))
    }

    /// Make room for at least `additional` more elements (reallocates to the larger of
    /// twice the capacity and what is needed).
    pub fn reserve<'h>(&self, tx: &mut impl TxAccess<'h>, additional: usize) -> Result<()> {
        let tx = tx.tx_mut();
        let h = self.head(tx)?;
        self.reserve_in(tx, h, additional).map(|_| ())
    }

    /// [`reserve`](Self::reserve) from a read header; returns the header after it.
    fn reserve_in(&self, tx: &mut Tx<'_>, h: Head, additional: usize) -> Result<Head> {
        let need = h
            .len
            .checked_add(additional)
            .ok_or_else(|| Error::invalid_argument("vector length overflows"))?;
        if need <= h.cap {
            return Ok(h);
        }
        let cap = need.max(h.cap.saturating_mul(2)).max(4);
        let buf = Self::alloc_buf(tx, cap)?;
        if h.len > 0 {
            // Through a copy: the old buffer is read from the transaction and the new
            // one written through it, which cannot be borrowed at once.
            let old = self.elems(tx, h, h.len)?.to_vec();
            let new = Head {
                len: h.len,
                cap,
                buf,
            };
            self.elems_mut(tx, new, h.len)?.copy_from_slice(&old);
        }
        if h.buf != 0 {
            free_block(tx, h.buf)?;
        }
        let w = tx.write(self.header)?;
        (w[2], w[3]) = (cap as u64, buf);
        Ok(Head {
            len: h.len,
            cap,
            buf,
        })
    }

    /// Append `v`.
    pub fn push<'h>(&self, tx: &mut impl TxAccess<'h>, v: T) -> Result<()> {
        let tx = tx.tx_mut();
        self.extend_from_slice(tx, std::slice::from_ref(&v))
    }

    /// Append the elements of `items`.
    pub fn extend_from_slice<'h>(&self, tx: &mut impl TxAccess<'h>, items: &[T]) -> Result<()> {
        let tx = tx.tx_mut();
        if items.is_empty() {
            return Ok(());
        }
        let h = self.head(tx)?;
        let h = self.reserve_in(tx, h, items.len())?;
        let n = h.len + items.len();
        self.elems_mut(tx, h, n)?[h.len..].copy_from_slice(items);
        self.set_len(tx, n)
    }

    /// Remove and return the last element.
    pub fn pop<'h>(&self, tx: &mut impl TxAccess<'h>) -> Result<Option<T>> {
        let tx = tx.tx_mut();
        let h = self.head(tx)?;
        if h.len == 0 {
            return Ok(None);
        }
        let v = self.elems(tx, h, h.len)?[h.len - 1];
        self.set_len(tx, h.len - 1)?;
        Ok(Some(v))
    }

    /// Keep the first `len` elements (nothing happens if there are not more). The
    /// capacity stays.
    pub fn truncate<'h>(&self, tx: &mut impl TxAccess<'h>, len: usize) -> Result<()> {
        let tx = tx.tx_mut();
        let h = self.head(tx)?;
        if len < h.len {
            self.set_len(tx, len)?;
        }
        Ok(())
    }

    /// Remove every element (the capacity stays).
    pub fn clear<'h>(&self, tx: &mut impl TxAccess<'h>) -> Result<()> {
        let tx = tx.tx_mut();
        self.truncate(tx, 0)
    }

    /// Call `f` with the offset of every object the vector itself owns (header and
    /// buffer; not what its elements own, see [`Owned`]).
    pub fn for_each_object(&self, tx: &Tx<'_>, mut f: impl FnMut(u64)) -> Result<()> {
        let h = self.head(tx)?;
        f(self.header.offset());
        if h.buf != 0 {
            f(h.buf);
        }
        Ok(())
    }

    /// Free the header and the buffer at commit (not what the elements own: for
    /// elements that own objects use [`Owned::free_owned`]). The handle and its copies
    /// must not be used afterwards.
    pub fn destroy<'h>(self, tx: &mut impl TxAccess<'h>) -> Result<()> {
        let tx = tx.tx_mut();
        let h = self.head(tx)?;
        if h.buf != 0 {
            free_block(tx, h.buf)?;
        }
        free_block(tx, self.header.offset())
    }
}

/// A vector owns its header, its buffer and what its elements own.
impl<T: Owned> Owned for PVec<T> {
    fn for_each_owned(&self, tx: &Tx<'_>, f: &mut dyn FnMut(u64)) -> Result<()> {
        if self.header.is_null() {
            return Ok(());
        }
        for x in self.as_slice(tx)? {
            x.for_each_owned(tx, f)?;
        }
        self.for_each_object(tx, f)
    }
}
