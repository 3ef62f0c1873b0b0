//! Variable-size values: byte strings ([`PBytes`]), UTF-8 strings ([`PString`]), and
//! the [`Owned`] trait of values that own pool objects.
//!
//! # Layout
//! ```text
//! handle (8 bytes, Pod): the payload offset of the string's block, 0 for ""
//! block: [length word: BYTES_TAG << 48 | len][len bytes]
//! ```
//! The string owns its length: the handle is one word, so it fits wherever a
//! [`PPtr`] does (a field of a `pod!` struct, a map's key or value). A non-empty
//! string is never stored with length 0, so the null handle is the only empty string
//! and making one allocates nothing.
//!
//! # Damage
//! Every read checks the length word: its tag, a length of at least 1, and that the
//! block holds the word and `len` bytes (the engine validates the object's size before
//! any byte is read). A [`PString`]'s bytes are checked to be UTF-8 on every read. A
//! damaged pool gives [`Error::Corrupt`], never a panic or
//! undefined behaviour.
//!
//! # Ownership
//! A handle is a plain value: copying it copies the pointer, not the bytes. Whoever
//! holds the handle that is stored owns the block and frees it with `free` (or
//! through [`Owned`], which the maps use to free the values they drop). Replacing the
//! contents with `set` may move the bytes to a new block and update the handle: store
//! the handle back where it came from.

use crate::{Error, PPtr, Pod, Result, Tx, TxAccess, Zeroable};
use std::cmp::Ordering;
use std::fmt;

/// The tag in the top 16 bits of a byte string's length word ("PB").
pub(crate) const BYTES_TAG: u64 = 0x5042;
/// Bits of the length in the length word.
pub(crate) const LEN_BITS: u32 = 48;
const LEN_MASK: u64 = (1 << LEN_BITS) - 1;

/// A persistent byte string: an 8-byte [`Pod`] handle to a block that holds the
/// length (a tagged word, checked at every read) and the bytes. The null handle is
/// the empty string and owns no block.
///
/// ```
/// use pisces::{Config, PBytes, PPtr, Pool};
/// # fn main() -> pisces::Result<()> {
/// # let dir = tempfile::tempdir().unwrap();
/// let pool = Pool::create(dir.path().join("b.pool"), Config::new().size(32 << 20))?;
/// let root: PPtr<PBytes> = pool.root()?;
/// pool.run(|tx| {
///     let b = PBytes::new(tx, b"\x00\xffbytes")?;
///     *tx.write(root)? = b;
///     Ok(())
/// })?;
/// let copy = pool.run(|tx| {
///     let b = *tx.read(root)?;
///     assert_eq!(b.len(tx)?, 7);
///     assert_eq!(&b.get(tx)?[2..], b"bytes"); // borrowed from the transaction
///     b.to_vec(tx)
/// })?;
/// assert_eq!(copy, b"\x00\xffbytes");
/// pool.run(|tx| {
///     let mut b = *tx.read(root)?;
///     b.set(tx, b"longer than before")?; // may move the bytes: store the handle back
///     *tx.write(root)? = b;
///     Ok(())
/// })?;
/// pool.run(|tx| {
///     let b = std::mem::take(tx.write(root)?);
///     b.free(tx) // freed at commit
/// })?;
/// # Ok(()) }
/// ```
#[repr(transparent)]
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default, Pod, Zeroable)]
pub struct PBytes {
    off: u64,
}

impl fmt::Debug for PBytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PBytes({:#x})", self.off)
    }
}

fn damaged(off: u64, what: impl fmt::Display) -> Error {
    Error::corrupt(format!("byte string at {off:#x}: {what}"))
}

impl PBytes {
    /// The empty byte string (the null handle; no block).
    pub const EMPTY: PBytes = PBytes { off: 0 };

    /// A new byte string holding a copy of `bytes` (no allocation when it is empty).
    /// It becomes durable with the commit and is released if the transaction rolls
    /// back.
    pub fn new<'h>(tx: &mut impl TxAccess<'h>, bytes: &[u8]) -> Result<PBytes> {
        let tx = tx.tx_mut();
        if bytes.is_empty() {
            return Ok(Self::EMPTY);
        }
        let len = bytes.len() as u64;
        if len > LEN_MASK {
            return Err(Error::invalid_argument(format!(
                "a byte string of {len} bytes is longer than the {LEN_MASK} a length word holds"
            )));
        }
        let p = tx.alloc_bytes(8 + bytes.len())?;
        let w = tx.write_bytes(p, 8 + bytes.len())?;
        w[..8].copy_from_slice(&(BYTES_TAG << LEN_BITS | len).to_le_bytes());
        w[8..].copy_from_slice(bytes);
        Ok(PBytes { off: p.offset() })
    }

    /// The handle of the block at payload offset `off` (0: the empty string). A wrong
    /// offset is not undefined behaviour: every read validates it.
    pub const fn from_offset(off: u64) -> PBytes {
        PBytes { off }
    }

    /// The payload offset of the string's block (0 for the empty string).
    pub const fn offset(self) -> u64 {
        self.off
    }

    /// True for the empty string (the null handle: a non-empty string is never stored
    /// with length 0).
    pub const fn is_empty(self) -> bool {
        self.off == 0
    }

    /// The length in bytes (reads and checks the length word).
    pub fn len(self, tx: &Tx<'_>) -> Result<usize> {
        Ok(self.get(tx)?.len())
    }

    /// The bytes in this transaction's snapshot, borrowed from the transaction (no
    /// copy).
    pub fn get<'t>(self, tx: &'t Tx<'_>) -> Result<&'t [u8]> {
        if self.off == 0 {
            return Ok(&[]);
        }
        let word = *tx.read(PPtr::<u64>::from_offset(self.off))?;
        let len = word & LEN_MASK;
        if word >> LEN_BITS != BYTES_TAG || len == 0 {
            return Err(damaged(
                self.off,
                format_args!("the length word {word:#x} is damaged"),
            ));
        }
        match tx.read_bytes(PPtr::from_offset(self.off), 8 + len as usize) {
            Ok(b) => Ok(&b[8..]),
            Err(Error::Conflict) => Err(Error::Conflict),
            Err(e) => Err(damaged(
                self.off,
                format_args!("the length word says {len} bytes, more than its block holds ({e})"),
            )),
        }
    }

    /// An owned copy of the bytes.
    pub fn to_vec(self, tx: &Tx<'_>) -> Result<Vec<u8>> {
        Ok(self.get(tx)?.to_vec())
    }

    /// Replace the contents with `bytes`: in place when the length is the same,
    /// otherwise in a new block (the old one is freed at commit, the handle updated).
    /// Store the handle back where it came from.
    pub fn set<'h>(&mut self, tx: &mut impl TxAccess<'h>, bytes: &[u8]) -> Result<()> {
        let tx = tx.tx_mut();
        if self.off != 0 && self.get(tx)?.len() == bytes.len() {
            let w = tx.write_bytes(PPtr::from_offset(self.off), 8 + bytes.len())?;
            w[8..].copy_from_slice(bytes);
            return Ok(());
        }
        let new = PBytes::new(tx, bytes)?;
        self.free(tx)?;
        *self = new;
        Ok(())
    }

    /// Free the block when the transaction commits (nothing for the empty string).
    /// Neither this handle nor a copy of it may be used afterwards.
    pub fn free<'h>(self, tx: &mut impl TxAccess<'h>) -> Result<()> {
        let tx = tx.tx_mut();
        if self.off == 0 {
            return Ok(());
        }
        free_block(tx, self.off)
    }

    /// Compare the stored bytes with `q` (lexicographic, as `[u8]`'s `Ord`).
    pub(crate) fn cmp_bytes(self, tx: &Tx<'_>, q: &[u8]) -> Result<Ordering> {
        Ok(self.get(tx)?.cmp(q))
    }
}

/// A persistent UTF-8 string: a [`PBytes`] whose bytes are UTF-8, checked on every
/// read (a damaged pool gives [`Error::Corrupt`]).
///
/// ```
/// use pisces::{Config, PPtr, PString, Pool};
///
/// pisces::pod! {
///     /// A user's record with a name of any length.
///     struct User { id: u64, name: PString }
/// }
///
/// # fn main() -> pisces::Result<()> {
/// # let dir = tempfile::tempdir().unwrap();
/// let pool = Pool::create(dir.path().join("s.pool"), Config::new().size(32 << 20))?;
/// let root: PPtr<User> = pool.root()?;
/// pool.run(|tx| {
///     let name = PString::new(tx, "Ada Lovelace")?;
///     *tx.write(root)? = User { id: 1, name };
///     Ok(())
/// })?;
/// let name = pool.run(|tx| {
///     let u = *tx.read(root)?;
///     assert!(u.name.get(tx)?.starts_with("Ada")); // a &str borrowed from the transaction
///     u.name.to_string(tx)
/// })?;
/// assert_eq!(name, "Ada Lovelace");
/// # Ok(()) }
/// ```
#[repr(transparent)]
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default, Pod, Zeroable)]
pub struct PString {
    bytes: PBytes,
}

impl fmt::Debug for PString {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PString({:#x})", self.bytes.off)
    }
}

impl PString {
    /// The empty string (the null handle; no block).
    pub const EMPTY: PString = PString {
        bytes: PBytes::EMPTY,
    };

    /// A new string holding a copy of `s` (no allocation when it is empty).
    pub fn new<'h>(tx: &mut impl TxAccess<'h>, s: &str) -> Result<PString> {
        let tx = tx.tx_mut();
        Ok(PString {
            bytes: PBytes::new(tx, s.as_bytes())?,
        })
    }

    /// The handle of the block at payload offset `off` (0: the empty string).
    pub const fn from_offset(off: u64) -> PString {
        PString {
            bytes: PBytes::from_offset(off),
        }
    }

    /// The payload offset of the string's block (0 for the empty string).
    pub const fn offset(self) -> u64 {
        self.bytes.off
    }

    /// True for the empty string.
    pub const fn is_empty(self) -> bool {
        self.bytes.is_empty()
    }

    /// The length in bytes.
    pub fn len(self, tx: &Tx<'_>) -> Result<usize> {
        self.bytes.len(tx)
    }

    /// The string in this transaction's snapshot, borrowed from the transaction.
    pub fn get<'t>(self, tx: &'t Tx<'_>) -> Result<&'t str> {
        let b = self.bytes.get(tx)?;
        std::str::from_utf8(b).map_err(|e| damaged(self.bytes.off, format_args!("not UTF-8 ({e})")))
    }

    /// The bytes (not checked to be UTF-8).
    pub fn as_bytes<'t>(self, tx: &'t Tx<'_>) -> Result<&'t [u8]> {
        self.bytes.get(tx)
    }

    /// An owned copy.
    pub fn to_string(self, tx: &Tx<'_>) -> Result<String> {
        Ok(self.get(tx)?.to_owned())
    }

    /// Replace the contents with `s` (see [`PBytes::set`]): store the handle back.
    pub fn set<'h>(&mut self, tx: &mut impl TxAccess<'h>, s: &str) -> Result<()> {
        let tx = tx.tx_mut();
        self.bytes.set(tx, s.as_bytes())
    }

    /// Free the block when the transaction commits (nothing for the empty string).
    pub fn free<'h>(self, tx: &mut impl TxAccess<'h>) -> Result<()> {
        let tx = tx.tx_mut();
        self.bytes.free(tx)
    }

    /// The same block as a byte string.
    pub const fn as_pbytes(self) -> PBytes {
        self.bytes
    }
}

/// Free the block at `off` at commit. Every engine's `free` conflicts with a
/// concurrent transaction that writes the block (an in-place `set` of the same length,
/// a vector element), as a write would, so such a change never lands in a freed block
/// (`tests/varsize.rs` checks it for strings on every engine).
pub(crate) fn free_block(tx: &mut Tx<'_>, off: u64) -> Result<()> {
    tx.free(PPtr::<u8>::from_offset(off))
}

/// A [`Pod`] value that may own pool objects: what a map frees with the values it
/// drops ([`HashMap::remove_and_free`](crate::HashMap::remove_and_free),
/// [`BTreeMap::destroy_with_values`](crate::BTreeMap::destroy_with_values), ...).
///
/// [`PBytes`], [`PString`] and [`PVec`](crate::PVec) own their blocks; numbers own
/// nothing, and a [`PPtr`] or a container handle is a reference, not an owner (like a
/// raw pointer: freeing it is its owner's business).
///
/// # Who frees a value
/// A map stores any `Pod` value and cannot tell a value that owns blocks from one that
/// does not, so its plain `insert` and `remove` hand the value they take out back to
/// the caller, who owns it from then on (it may be stored elsewhere, so the map must
/// not free it), and `destroy` frees the map's own objects only. For maps of `Owned`
/// values, `insert_and_free`, `remove_and_free` and `destroy_with_values` free what
/// the values they drop own, at commit. A value dropped by a plain method and neither
/// stored again nor freed is a leak (the pool keeps the block). Keys of a
/// [`BTreeMap`](crate::BTreeMap) keyed by `PBytes` or `PString` are always owned by the
/// tree.
///
/// Implement it for your own value types that hold owned fields:
///
/// ```
/// use pisces::{Owned, PString, Result, Tx};
///
/// pisces::pod! {
///     struct Item { due: u64, title: PString }
/// }
///
/// impl Owned for Item {
///     fn for_each_owned(&self, tx: &Tx<'_>, f: &mut dyn FnMut(u64)) -> Result<()> {
///         self.title.for_each_owned(tx, f)
///     }
/// }
/// ```
pub trait Owned: Pod {
    /// Call `f` with the payload offset of every pool object this value owns (for
    /// freeing, checkers and leak tests).
    fn for_each_owned(&self, tx: &Tx<'_>, f: &mut dyn FnMut(u64)) -> Result<()>;

    /// Free every pool object this value owns, at commit. The value must not be used
    /// afterwards.
    fn free_owned(self, tx: &mut Tx<'_>) -> Result<()> {
        let mut objs = Vec::new();
        self.for_each_owned(tx, &mut |o| objs.push(o))?;
        for o in objs {
            free_block(tx, o)?;
        }
        Ok(())
    }
}

impl Owned for PBytes {
    fn for_each_owned(&self, _tx: &Tx<'_>, f: &mut dyn FnMut(u64)) -> Result<()> {
        if self.off != 0 {
            f(self.off);
        }
        Ok(())
    }
}

impl Owned for PString {
    fn for_each_owned(&self, tx: &Tx<'_>, f: &mut dyn FnMut(u64)) -> Result<()> {
        self.bytes.for_each_owned(tx, f)
    }
}

/// Plain data owns nothing.
macro_rules! owns_nothing {
    ($($t:ty),*) => {$(
        impl Owned for $t {
            #[inline]
            fn for_each_owned(&self, _tx: &Tx<'_>, _f: &mut dyn FnMut(u64)) -> Result<()> {
                Ok(())
            }
            #[inline]
            fn free_owned(self, _tx: &mut Tx<'_>) -> Result<()> {
                Ok(())
            }
        }
    )*};
}
owns_nothing!(u8, u16, u32, u64, u128, usize, i8, i16, i32, i64, i128, isize, f32, f64);

impl<T: 'static> Owned for PPtr<T> {
    /// A pointer refers to an object; it does not own it.
    fn for_each_owned(&self, _tx: &Tx<'_>, _f: &mut dyn FnMut(u64)) -> Result<()> {
        Ok(())
    }
    fn free_owned(self, _tx: &mut Tx<'_>) -> Result<()> {
        Ok(())
    }
}

impl<T: Owned, const N: usize> Owned for [T; N]
where
    [T; N]: Pod,
{
    fn for_each_owned(&self, tx: &Tx<'_>, f: &mut dyn FnMut(u64)) -> Result<()> {
        self.iter().try_for_each(|x| x.for_each_owned(tx, f))
    }
}
