//! `BTreeMap<K, V, FANOUT>`: a persistent B+-tree (the paper's B+-tree benchmark and the
//! TPC-C / TATP tables).
//!
//! # Layout
//! ```text
//! handle (8 bytes, Pod) ──► header { magic, signature, root, height, key order }
//! inner node: [meta][keys: FANOUT-1 × K][children: FANOUT × u64]
//! leaf node:  [meta][next leaf][keys: FANOUT-1 × K][values: FANOUT-1 × V]
//! meta = kind tag << 32 | count (children of an inner node, entries of a leaf)
//! ```
//! `FANOUT` is the most children an inner node has; a leaf holds up to `FANOUT - 1`
//! entries. Each region starts on a word boundary, so with 8-byte keys and values and
//! `FANOUT = 16` both kinds of node are exactly 256 bytes, as in the paper's benchmark.
//! Nodes are stored as word arrays (see the `words` module: bytemuck cannot derive
//! `Pod` for a generic struct and this code uses no `unsafe`); keys and values are read
//! in place as `&[K]` / `&V`, so a lookup copies nothing but the value it returns.
//!
//! Child `i` of an inner node with keys `k[0..n-1]` holds the keys in
//! `[k[i-1], k[i])`; a lookup descends `height` inner levels (the header's height says
//! where the leaves are), binary-searching each node, then binary-searches the leaf.
//! Leaves are chained left to right by `next` for forward scans. There is no backward
//! link (it would make a split write the right neighbour too, one more conflict per
//! split), so a backward step ([`RangeIter::next_back`], [`BTreeMap::last_key_value`])
//! descends from the root toward the key it must stay below and backtracks to the left
//! past leaves that `remove` emptied: O(height) node reads per leaf, where a forward
//! step is one read.
//!
//! # Insertion
//! A full leaf splits in two and a separator (the right half's first key) goes up; a
//! full parent splits in turn, up to a new root (the only time the header is written).
//! The lower half stays in the old node and the new node goes to its right, so every
//! existing pointer to a node (parent slots, the left neighbour's `next`) stays valid.
//! An insert past the last key of a node (ascending keys, e.g. order ids) splits off a
//! nearly empty right node instead of halving, so sequential loads fill nodes fully.
//! A leaf that is full when a key goes into its upper half splits at that key: the new
//! key ends the left leaf and only the entries after it move right. Ascending inserts
//! into a key range that other keys follow (one district's order ids before the next
//! district's) then fill the left leaf and continue with append splits, instead of
//! halving the same leaf forever and leaving a trail of half-full leaves (each written
//! home with its empty half's worth of entries moved once more). A key in the lower
//! half splits the leaf in halves; either way the left leaf keeps at least half.
//! A split copies the old node into a temporary buffer (the only allocation on any
//! path besides `check`, `for_each_object` and `destroy`); lookups, scans and
//! non-splitting updates allocate nothing.
//!
//! # Deletion policy
//! `remove` deletes the entry from its leaf and does not rebalance: leaves may become
//! sparse or empty, inner nodes keep their separators, and the tree never shrinks in
//! height. Routing stays correct (separators still bound their subtrees), lookups and
//! scans skip empty leaves, and a later insert into the key range reuses the space.
//! Only [`BTreeMap::destroy`] frees nodes. (Merging would write both siblings and their
//! parent on every underflow, adding conflicts for a workload-dependent space gain.)
//!
//! # Snapshot isolation (§5.1 of the paper)
//! Readers traverse without writing. A writer writes every node it modifies: the leaf
//! for an insert, update or remove; on a split also the new node's parent (and each
//! ancestor that splits), and the header on a root split. This suffices:
//! * two writers of one leaf (same key or neighbouring keys) conflict on the leaf;
//! * a split changes the split node and its parent, so it conflicts with any other
//!   change of either, in particular with a concurrent split of a sibling (parent);
//! * a change that does not write a node never moves or reinterprets it: nodes are
//!   updated in place at stable addresses, a split keeps the lower half in place and
//!   never changes which node owns an existing key range except the split node's own,
//!   so a writer's routing decision (taken in its snapshot) stays valid in the final
//!   state, and the union of two non-conflicting transactions is a valid tree.
//!
//! Range scans see a snapshot; as always under SI, a decision based on a scan is
//! exposed to write skew unless the transaction writes what it depends on.
//!
//! # Element count
//! A tree made by [`BTreeMap::new`] keeps a striped count (the `count` module):
//! 32 counter objects, each insert of a new key or remove of a present one adds ±1 to
//! its thread's stripe in the same transaction, and [`BTreeMap::len`] sums the
//! stripes, so `len` is O(1) in the tree's size while two writers on different threads
//! never conflict on the count. The header records it: bit [`ORDER_COUNTED`] of the
//! key-order word says the header has a sixth word, the offset of the count's table. A
//! tree made before the count existed has neither; it stays readable and writable,
//! keeps no count, and its `len` walks the leaf chain (O(len / FANOUT)).

use super::count;
use super::entry::{sealed::EntryMap, Entry};
use super::key::TreeKey;
use super::walk::Walk;
use super::words::{self, Shape};
use crate::{Error, PPtr, Pod, Result, Tx, TxAccess, Zeroable};
use std::cmp::Ordering;
use std::fmt;
use std::marker::PhantomData;
use std::mem::{align_of, size_of};
use std::ops::{Bound, RangeBounds, RangeFull};

/// The first word of every B+-tree header ("PSC.BTRE"): how tools recognise a tree.
pub const MAGIC: u64 = u64::from_le_bytes(*b"PSC.BTRE");
/// Tag in the high half of a leaf's first word ("LEAF").
pub const LEAF_TAG: u64 = 0x4c45_4146;
/// Tag in the high half of an inner node's first word ("INNR").
pub const INNER_TAG: u64 = 0x494e_4e52;
const LEAF_CHAIN: &str = "B+-tree leaf chain";
/// Deepest tree accepted (a deeper one can only come from a damaged pool).
pub(crate) const MAX_HEIGHT: usize = 64;

/// High half of the header's key-order word ("KORD"); the low byte is one of the
/// `ORDER_*` codes. 0 (trees made before the word existed, or a key type whose order
/// an untyped reader cannot know): key order is checked only by [`BTreeMap::check`].
pub(crate) const ORDER_TAG: u64 = 0x4b4f_5244 << 32;
/// Keys are unsigned integers, little-endian (`u8` .. `u128`, `usize`).
pub(crate) const ORDER_UNSIGNED: u64 = 1;
/// Keys are signed integers, little-endian (`i8` .. `i128`, `isize`).
pub(crate) const ORDER_SIGNED: u64 = 2;
/// Keys are byte arrays (`[u8; N]`), ordered lexicographically.
pub(crate) const ORDER_BYTES: u64 = 3;
/// Keys are [`PBytes`](crate::PBytes) handles to blocks the tree owns, ordered
/// lexicographically by their bytes.
pub(crate) const ORDER_STRINGS: u64 = 4;
/// Keys are [`PString`](crate::PString) handles: as [`ORDER_STRINGS`], and UTF-8.
pub(crate) const ORDER_UTF8: u64 = 5;
/// A flag of the key-order word (outside its tag and code): the header is a
/// [`CountedHeader`], whose sixth word locates the tree's striped element count.
pub(crate) const ORDER_COUNTED: u64 = 1 << 16;

/// The key-order word for keys of type `K`: the order `K: Ord` has, when it is one of
/// the orders `pisces check --deep` knows how to read from bytes (module
/// `containers::deep`); 0 otherwise.
fn key_order_word<K>() -> u64 {
    let code = match std::any::type_name::<K>() {
        "u8" | "u16" | "u32" | "u64" | "u128" | "usize" => ORDER_UNSIGNED,
        "i8" | "i16" | "i32" | "i64" | "i128" | "isize" => ORDER_SIGNED,
        n if n.starts_with("[u8; ") => ORDER_BYTES,
        n if n == std::any::type_name::<crate::PBytes>() => ORDER_STRINGS,
        n if n == std::any::type_name::<crate::PString>() => ORDER_UTF8,
        _ => return 0,
    };
    ORDER_TAG | code
}

/// The header's key-order word: the key order code in the low byte, what the values
/// own (`value_kind::value_kind`) in the next, under [`ORDER_TAG`] when either is known.
fn order_word<K, V: 'static>() -> u64 {
    let values = super::value_kind::value_kind::<V>();
    match key_order_word::<K>() {
        0 if values == 0 => 0,
        w => ORDER_TAG | (w & 0xff) | values << 8,
    }
}

#[derive(Clone, Copy, Pod, Zeroable)]
#[repr(C)]
struct Header {
    magic: u64,
    sig: u64,
    root: u64,
    height: u64,
    /// The key-order word (see [`ORDER_TAG`]); fits in the header's block, whose
    /// payload was 40 bytes also before the word existed (zero there).
    order: u64,
}

/// The header of a tree with an element count (`ORDER_COUNTED` set in `order`).
#[derive(Clone, Copy, Pod, Zeroable)]
#[repr(C)]
struct CountedHeader {
    head: Header,
    /// Offset of the count's stripe table (module `count`).
    counts: u64,
}

/// A persistent ordered map (B+-tree) from `K` to `V` with inner nodes of up to
/// `FANOUT` children.
///
/// The handle is 8 bytes of plain data (a pointer to the tree's header): store it in
/// your root object or in other persistent objects. All operations take the running
/// transaction, so they compose with anything else the transaction does: several tree
/// operations and any other changes commit or roll back together. Every engine runs it.
///
/// * **Layout**: a leaf holds up to `FANOUT - 1` entries and links to the next leaf
///   for range scans ([`BTreeMap::range`], [`BTreeMap::iter`]); with 8-byte keys and
///   values and the default `FANOUT` of 16 a node is 256 bytes. Keys are ordered by
///   `Ord`.
/// * **Removal** deletes the entry from its leaf and does not rebalance: leaves may
///   become sparse, the tree never shrinks in height, and later inserts into the key
///   range reuse the room. Only [`BTreeMap::destroy`] frees nodes.
/// * **Snapshot isolation**: reads write nothing and conflict with nothing; an update
///   writes every node it changes (the leaf; on a split the new node's parent, and the
///   header when the root splits), so two updates that would break the tree's
///   structure meet in a write-write conflict and one retries. A decision taken on a
///   range scan is exposed to write skew unless the transaction writes what it
///   depends on.
/// * **Costs**: a lookup reads one node per level and copies nothing (`get_ref`
///   borrows the value); only a split allocates a buffer. [`BTreeMap::len`] is O(1):
///   the element count is striped over 32 objects, so two writers on different
///   threads do not conflict on it.
/// * **String keys**: `BTreeMap<PString, V>` and `BTreeMap<PBytes, V>` order keys by
///   their bytes, own them (copied in by [`insert_str`](Self::insert_str) /
///   [`insert_bytes`](Self::insert_bytes) only when new, freed by `remove` and
///   `destroy`), and take `&str` / `&[u8]` in lookups, `remove` and `range` (bounds as
///   `(Bound<&str>, Bound<&str>)`), without allocating (see [`TreeKey`]).
/// * **Values that own blocks** ([`PBytes`](crate::PBytes), [`PString`](crate::PString),
///   [`PVec`](crate::PVec), other [`Owned`](crate::Owned) types): `insert` and `remove`
///   return the value they take out, and the caller owns it (the map cannot know
///   whether it was stored elsewhere too); [`insert_and_free`](Self::insert_and_free),
///   [`remove_and_free`](Self::remove_and_free) and
///   [`destroy_with_values`](Self::destroy_with_values) free what it owns.
/// * **Damage**: headers, node kinds, counts and the key and value sizes are checked on
///   every access, descents are bounded by the height and the leaf walk detects cycles,
///   so a damaged pool or a handle used with other types is an [`Error`], never
///   undefined behaviour; [`BTreeMap::check`] verifies a whole tree.
///
/// ```
/// use pisces::{BTreeMap, Config, Pool};
/// # fn main() -> pisces::Result<()> {
/// # let dir = tempfile::tempdir().unwrap();
/// let pool = Pool::create(dir.path().join("t.pool"), Config::default().size(32 << 20))?;
/// let root = pool.root::<BTreeMap<u64, u64, 16>>()?;
/// pool.run(|tx| {
///     let t = BTreeMap::new(tx)?;
///     *tx.write(root)? = t;
///     for k in 0..100 {
///         t.insert(tx, k, k * k)?;
///     }
///     Ok(())
/// })?;
/// let t = pool.run(|tx| Ok(*tx.read(root)?))?;
/// let squares = pool.run(|tx| {
///     t.range(tx, 10..13).map(|e| e.map(|(k, v)| (*k, *v))).collect::<pisces::Result<Vec<_>>>()
/// })?;
/// assert_eq!(squares, [(10, 100), (11, 121), (12, 144)]);
/// let newest = pool.run(|tx| Ok(t.last_key_value(tx)?.map(|(k, _)| *k)))?;
/// assert_eq!(newest, Some(99));
/// assert_eq!(pool.run(|tx| t.len(tx))?, 100);
/// # Ok(()) }
/// ```
///
/// # Limits
/// Keys and values are [`Pod`] types of alignment at most 8 (pool objects
/// are 8-byte aligned), neither zero-sized; `FANOUT` is at least 3, and a node — a leaf
/// holds `FANOUT - 1` keys and values, an inner node `FANOUT - 1` keys and `FANOUT`
/// child pointers, each region padded to whole 8-byte words — is at most 16 KiB (2048
/// words). A tree of other types does not compile (the check runs when the code is built
/// into a binary, as `Tx::read` of an over-aligned type):
/// ```compile_fail,E0080
/// # use pisces::{BTreeMap, Result, Tx};
/// fn f(tx: &mut Tx<'_>) -> Result<()> {
///     let t = BTreeMap::<u128, u64>::new(tx)?; // u128 is 16-byte aligned
///     t.insert(tx, 1, 2)?;
///     Ok(())
/// }
/// let _codegen: fn(&mut Tx<'_>) -> Result<()> = f;
/// ```
/// ```compile_fail,E0080
/// # use pisces::{BTreeMap, Result, Tx};
/// fn f(tx: &Tx<'_>, t: BTreeMap<u64, u128>) -> Result<Option<u128>> {
///     t.get(tx, &1) // values too
/// }
/// let _codegen: fn(&Tx<'_>, BTreeMap<u64, u128>) -> Result<Option<u128>> = f;
/// ```
/// ```compile_fail,E0080
/// # use pisces::{BTreeMap, Result, Tx};
/// fn f(tx: &mut Tx<'_>) -> Result<BTreeMap<u64, [u64; 200]>> {
///     BTreeMap::new(tx) // 15 values of 200 words: above the node limit
/// }
/// let _codegen: fn(&mut Tx<'_>) -> Result<BTreeMap<u64, [u64; 200]>> = f;
/// ```
#[repr(transparent)]
#[derive(Pod, Zeroable)]
pub struct BTreeMap<K, V, const FANOUT: usize = 16> {
    header: PPtr<Header>,
    _kv: PhantomData<fn() -> (K, V)>,
}

impl<K, V, const F: usize> Clone for BTreeMap<K, V, F> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<K, V, const F: usize> Copy for BTreeMap<K, V, F> {}
impl<K, V, const F: usize> PartialEq for BTreeMap<K, V, F> {
    fn eq(&self, o: &Self) -> bool {
        self.header == o.header
    }
}
impl<K, V, const F: usize> Eq for BTreeMap<K, V, F> {}
impl<K, V, const F: usize> fmt::Debug for BTreeMap<K, V, F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "BTreeMap({:#x})", self.header.offset())
    }
}
impl<K, V, const F: usize> Default for BTreeMap<K, V, F> {
    fn default() -> Self {
        Self::null()
    }
}

/// Shape facts found by [`BTreeMap::check`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TreeStats {
    /// Inner levels above the leaves (0: the root is a leaf).
    pub height: usize,
    /// Inner nodes.
    pub inner_nodes: usize,
    /// Leaves.
    pub leaves: usize,
    /// Leaves without entries (left by `remove`).
    pub empty_leaves: usize,
    /// Entries.
    pub entries: usize,
}

impl<K, V, const F: usize> BTreeMap<K, V, F> {
    /// The null handle (what a zeroed root holds); every operation on it is an error.
    pub const fn null() -> Self {
        BTreeMap {
            header: PPtr::null(),
            _kv: PhantomData,
        }
    }

    /// True for the null handle.
    pub const fn is_null(self) -> bool {
        self.header.is_null()
    }

    /// Offset of the tree's header object (for tools).
    pub const fn offset(self) -> u64 {
        self.header.offset()
    }
}

/// Outcome of a backward search in a subtree.
enum Last {
    /// The leaf holding the last entry in range, and its entries up to that one.
    Found(u64, usize),
    /// Nothing in range here; the subtrees to the left may have some.
    NotHere,
    /// Nothing in range here or anywhere to the left.
    Done,
}

/// Where a scan starts in a leaf.
#[inline]
fn start_pos<K: TreeKey>(tx: &Tx<'_>, keys: &[K], b: Bound<&K::Query>) -> Result<usize> {
    match b {
        Bound::Unbounded => Ok(0),
        Bound::Included(lo) => K::partition(tx, keys, lo, false),
        Bound::Excluded(lo) => K::partition(tx, keys, lo, true),
    }
}

/// True if `k` is before the start bound.
#[inline]
fn below_start<K: TreeKey>(tx: &Tx<'_>, k: &K, b: Bound<&K::Query>) -> Result<bool> {
    Ok(match b {
        Bound::Unbounded => false,
        Bound::Included(lo) => K::cmp_query(tx, k, lo)? == Ordering::Less,
        Bound::Excluded(lo) => K::cmp_query(tx, k, lo)? != Ordering::Greater,
    })
}

/// True if `k` is beyond the end bound.
#[inline]
fn past_end<K: TreeKey>(tx: &Tx<'_>, k: &K, b: Bound<&K::Query>) -> Result<bool> {
    Ok(match b {
        Bound::Unbounded => false,
        Bound::Included(hi) => K::cmp_query(tx, k, hi)? == Ordering::Greater,
        Bound::Excluded(hi) => K::cmp_query(tx, k, hi)? != Ordering::Less,
    })
}

impl<K: TreeKey, V: Pod, const F: usize> BTreeMap<K, V, F> {
    /// Entries per leaf.
    const LCAP: usize = F - 1;
    // Every node access goes through `KW` (inner nodes) or `LEAF`, so a tree of an
    // over-aligned type does not compile.
    const KW: usize = {
        assert!(
            align_of::<K>() <= words::MAX_ALIGN,
            "B+-tree keys must have alignment at most 8 (they are stored 8-byte aligned)"
        );
        words::words_for::<K>(F - 1)
    };
    const L_NEXT: usize = 1;
    const L_KEYS: usize = 2;
    const L_VALS: usize = 2 + Self::KW;
    const I_KEYS: usize = 1;
    const I_KIDS: usize = 1 + Self::KW;
    const LEAF: Shape = {
        assert!(F >= 3, "FANOUT must be at least 3");
        assert!(size_of::<K>() > 0, "zero-sized keys are not supported");
        assert!(
            size_of::<V>() > 0,
            "zero-sized values are not supported (use u8)"
        );
        assert!(
            align_of::<V>() <= words::MAX_ALIGN,
            "B+-tree values must have alignment at most 8 (they are stored 8-byte aligned)"
        );
        let s = Shape::new(Self::L_VALS + words::words_for::<V>(F - 1));
        assert!(s.valid(), "leaf node exceeds the 16 KiB node limit");
        s
    };
    const INNER: Shape = {
        let s = Shape::new(Self::I_KIDS + F);
        assert!(s.valid(), "inner node exceeds the 16 KiB node limit");
        s
    };
    const SIG: u64 = size_of::<K>() as u64 | (size_of::<V>() as u64) << 24 | (F as u64) << 48;
    /// Bytes of a leaf object (payload; 256 for 8-byte keys and values at fanout 16).
    pub const LEAF_BYTES: usize = Self::LEAF.size * 8;
    /// Bytes of an inner node object (payload).
    pub const INNER_BYTES: usize = Self::INNER.size * 8;

    /// Create an empty tree (one empty leaf) with an element count, so [`len`](Self::len)
    /// is O(1) (the count is striped: see *Costs* on [`BTreeMap`]).
    pub fn new<'h>(tx: &mut impl TxAccess<'h>) -> Result<Self> {
        let tx = tx.tx_mut();
        let root = words::alloc(tx, Self::LEAF, |w| {
            w[0] = LEAF_TAG << 32;
            Ok(())
        })?;
        let _ = Self::INNER;
        let counts = count::create(tx)?;
        let header = tx.alloc(CountedHeader {
            head: Header {
                magic: MAGIC,
                sig: Self::SIG,
                root,
                height: 0,
                order: order_word::<K, V>() | ORDER_COUNTED,
            },
            counts,
        })?;
        Ok(BTreeMap {
            header: PPtr::from_offset(header.offset()),
            _kv: PhantomData,
        })
    }

    /// The former name of [`BTreeMap::new`].
    #[deprecated(note = "use `BTreeMap::new`, as for std's maps")]
    pub fn create<'h>(tx: &mut impl TxAccess<'h>) -> Result<Self> {
        Self::new(tx)
    }

    /// The offset of the tree's count table, or `None` for a tree made without one
    /// (`h`: its validated header).
    #[inline]
    fn counts(&self, tx: &Tx<'_>, h: &Header) -> Result<Option<u64>> {
        if h.order & ORDER_COUNTED == 0 {
            return Ok(None);
        }
        let c = tx.read(PPtr::<CountedHeader>::from_offset(self.header.offset()))?;
        Ok(Some(c.counts))
    }

    /// Add `delta` to the element count, if the tree keeps one.
    #[inline]
    fn add_count(&self, tx: &mut Tx<'_>, delta: i64) -> Result<()> {
        let h = self.header(tx)?;
        if let Some(table) = self.counts(tx, &h)? {
            count::add(tx, table, delta)?;
        }
        Ok(())
    }

    /// The header, validated against this handle's types.
    #[inline]
    fn header(&self, tx: &Tx<'_>) -> Result<Header> {
        if self.header.is_null() {
            return Err(Error::invalid_pointer("null B+-tree handle"));
        }
        let h = *tx.read_again(self.header)?;
        if h.magic != MAGIC {
            return Err(Error::invalid_pointer(format!(
                "{:#x} is not a B+-tree",
                self.header.offset()
            )));
        }
        if h.sig != Self::SIG {
            return Err(Error::invalid_pointer(format!(
                "B+-tree at {:#x} was created for other types or fanout ({} and {} bytes, fanout {}; not {} and {}, fanout {F})",
                self.header.offset(),
                h.sig & 0xff_ffff,
                (h.sig >> 24) & 0xff_ffff,
                h.sig >> 48,
                size_of::<K>(),
                size_of::<V>()
            )));
        }
        if h.height as usize > MAX_HEIGHT {
            return Err(Error::corrupt(format!(
                "B+-tree at {:#x}: height {}",
                self.header.offset(),
                h.height
            )));
        }
        Ok(h)
    }

    /// An inner node's words and child count, validated.
    #[inline]
    fn inner<'t>(tx: &'t Tx<'_>, off: u64) -> Result<(&'t [u64], usize)> {
        let w = words::read_again(tx, off, Self::INNER)?;
        let n = Self::count(w, INNER_TAG, F)?;
        if n == 0 {
            return Err(words::corrupt("inner node without children"));
        }
        Ok((w, n))
    }

    /// A leaf's words and entry count, validated.
    #[inline]
    fn leaf<'t>(tx: &'t Tx<'_>, off: u64) -> Result<(&'t [u64], usize)> {
        let w = words::read(tx, off, Self::LEAF)?;
        // A leaf spans several cache lines (five at fanout 16), which the key search
        // and the value read visit one after another.
        words::prefetch_lines(w);
        let n = Self::count(w, LEAF_TAG, Self::LCAP)?;
        Ok((w, n))
    }

    #[inline]
    fn count(w: &[u64], tag: u64, cap: usize) -> Result<usize> {
        let n = (w[0] & 0xffff_ffff) as usize;
        if w[0] >> 32 != tag || n > cap {
            return Err(words::corrupt(if w[0] >> 32 != tag {
                "wrong node kind"
            } else {
                "count above capacity"
            }));
        }
        Ok(n)
    }

    /// Child index for `k` in an inner node with `n` children.
    #[inline]
    fn route(tx: &Tx<'_>, w: &[u64], n: usize, k: &K::Query) -> Result<usize> {
        let keys = words::slice::<K>(w, Self::I_KEYS, n - 1)?;
        K::partition(tx, keys, k, true)
    }

    /// The leaf that holds `k` (or would).
    #[inline]
    fn find_leaf(&self, tx: &Tx<'_>, k: &K::Query) -> Result<u64> {
        let h = self.header(tx)?;
        let mut node = h.root;
        for _ in 0..h.height {
            let (w, n) = Self::inner(tx, node)?;
            node = w[Self::I_KIDS + Self::route(tx, w, n, k)?];
        }
        Ok(node)
    }

    /// A reference to `k`'s value in this transaction's snapshot, without copying it.
    pub fn get_ref<'t>(&self, tx: &'t Tx<'_>, k: &K::Query) -> Result<Option<&'t V>> {
        let (w, n) = Self::leaf(tx, self.find_leaf(tx, k)?)?;
        match K::search(tx, words::slice::<K>(w, Self::L_KEYS, n)?, k)? {
            Ok(i) => Ok(Some(&words::slice::<V>(w, Self::L_VALS, n)?[i])),
            Err(_) => Ok(None),
        }
    }

    /// `k`'s value in this transaction's snapshot.
    pub fn get(&self, tx: &Tx<'_>, k: &K::Query) -> Result<Option<V>> {
        Ok(self.get_ref(tx, k)?.copied())
    }

    /// True if `k` is in the tree.
    pub fn contains_key(&self, tx: &Tx<'_>, k: &K::Query) -> Result<bool> {
        Ok(self.get_ref(tx, k)?.is_some())
    }

    /// `k`'s value, writable in place: the change commits with the transaction. Writes
    /// (locks) only `k`'s leaf.
    pub fn get_mut<'t, 'h: 't>(
        &self,
        tx: &'t mut impl TxAccess<'h>,
        k: &K::Query,
    ) -> Result<Option<&'t mut V>> {
        let tx = tx.tx_mut();
        let leaf = self.find_leaf(tx, k)?;
        let (w, n) = Self::leaf(tx, leaf)?;
        let Ok(i) = K::search(tx, words::slice::<K>(w, Self::L_KEYS, n)?, k)? else {
            return Ok(None);
        };
        let w = words::write(tx, leaf, Self::LEAF)?;
        Ok(Some(&mut words::slice_mut::<V>(w, Self::L_VALS, n)?[i]))
    }

    /// Insert or replace; returns the previous value of `k`. (With byte string keys
    /// the tree owns `k`: if the key is there already, the stored key stays and `k` is
    /// freed, as `std` drops the key it does not store.)
    pub fn insert<'h>(&self, tx: &mut impl TxAccess<'h>, k: K, v: V) -> Result<Option<V>> {
        let tx = tx.tx_mut();
        let (old, stored) = K::with_query(tx, &k, |tx, q| self.insert_with(tx, q, |_| Ok(k), v))??;
        if !stored {
            k.release(tx)?;
        }
        Ok(old)
    }

    /// Insert or replace the value of the key `q`; `key` makes the key to store when
    /// it is new. Returns the previous value and whether `key` was called.
    #[inline]
    pub(super) fn insert_with(
        &self,
        tx: &mut Tx<'_>,
        q: &K::Query,
        key: impl FnOnce(&mut Tx<'_>) -> Result<K>,
        v: V,
    ) -> Result<(Option<V>, bool)> {
        let node = self.find_leaf(tx, q)?;
        let (n, pos) = {
            let (w, n) = Self::leaf(tx, node)?;
            match K::search(tx, words::slice::<K>(w, Self::L_KEYS, n)?, q)? {
                Ok(i) => {
                    let w = words::write(tx, node, Self::LEAF)?;
                    let slot = &mut words::slice_mut::<V>(w, Self::L_VALS, n)?[i];
                    return Ok((Some(std::mem::replace(slot, v)), false));
                }
                Err(i) => (n, i),
            }
        };
        let k = key(tx)?;
        self.insert_new(tx, node, n, pos, q, k, v)?;
        Ok((None, true))
    }

    /// Insert absent `k` (whose query form is `q`) at `pos` of leaf `node`, which has
    /// `n` entries; returns its value's slot when the leaf had room (`None`: it split).
    #[inline]
    #[allow(clippy::too_many_arguments)]
    fn insert_new<'t>(
        &self,
        tx: &'t mut Tx<'_>,
        node: u64,
        n: usize,
        pos: usize,
        q: &K::Query,
        k: K,
        v: V,
    ) -> Result<Option<&'t mut V>> {
        self.add_count(tx, 1)?;
        if n < Self::LCAP {
            let w = words::write(tx, node, Self::LEAF)?;
            w[0] += 1;
            let keys = words::slice_mut::<K>(w, Self::L_KEYS, n + 1)?;
            keys.copy_within(pos..n, pos + 1);
            keys[pos] = k;
            let vals = words::slice_mut::<V>(w, Self::L_VALS, n + 1)?;
            vals.copy_within(pos..n, pos + 1);
            vals[pos] = v;
            return Ok(Some(&mut vals[pos]));
        }
        self.insert_splitting(tx, node, pos, q, k, v)?;
        Ok(None)
    }

    /// `insert` into the full leaf `leaf` at `pos`: split it, and its parents as far as
    /// they are full, up to a new root. Out of line, with the path it needs: the common
    /// insert does not set up (or zero) a path array for the rare split.
    #[inline(never)]
    fn insert_splitting(
        &self,
        tx: &mut Tx<'_>,
        leaf: u64,
        pos: usize,
        q: &K::Query,
        k: K,
        v: V,
    ) -> Result<()> {
        let h = self.header(tx)?;
        // The descent again, remembering the path: the nodes `insert` read, as nothing
        // was written since.
        let mut path = [(0u64, 0usize); MAX_HEIGHT];
        let mut node = h.root;
        for p in path.iter_mut().take(h.height as usize) {
            let (w, n) = Self::inner(tx, node)?;
            let i = Self::route(tx, w, n, q)?;
            *p = (node, i);
            node = w[Self::I_KIDS + i];
        }
        if node != leaf {
            return Err(words::corrupt("the descent changed within one insert"));
        }
        let (sep, right) = Self::split_leaf(tx, node, pos, k, v)?;
        // An inner node's separator has a key of its own (byte string keys: a copy that
        // outlives the removal of the entry it equals).
        let mut carry = Some((K::separator(tx, &sep)?, right));
        for &(parent, i) in path[..h.height as usize].iter().rev() {
            let Some((sep, right)) = carry else { break };
            let (_, n) = Self::inner(tx, parent)?;
            if n < F {
                let w = words::write(tx, parent, Self::INNER)?;
                w[0] += 1;
                let keys = words::slice_mut::<K>(w, Self::I_KEYS, n)?;
                keys.copy_within(i..n - 1, i + 1);
                keys[i] = sep;
                let kids = &mut w[Self::I_KIDS..Self::I_KIDS + n + 1];
                kids.copy_within(i + 1..n, i + 2);
                kids[i + 1] = right;
                carry = None;
            } else {
                carry = Some(Self::split_inner(tx, parent, i, sep, right)?);
            }
        }
        if let Some((sep, right)) = carry {
            let old_root = h.root;
            let root = words::alloc(tx, Self::INNER, |w| {
                w[0] = INNER_TAG << 32 | 2;
                *words::elem_mut::<K>(w, Self::I_KEYS)? = sep;
                w[Self::I_KIDS] = old_root;
                w[Self::I_KIDS + 1] = right;
                Ok(())
            })?;
            let hw = tx.write(self.header)?;
            hw.root = root;
            hw.height += 1;
        }
        Ok(())
    }

    /// Split the full leaf `leaf` while inserting `(k, v)` at `pos`; returns the
    /// separator and the new right leaf.
    fn split_leaf(tx: &mut Tx<'_>, leaf: u64, pos: usize, k: K, v: V) -> Result<(K, u64)> {
        let old = Self::leaf(tx, leaf)?.0.to_vec();
        let (okeys, ovals) = (
            words::slice::<K>(&old, Self::L_KEYS, Self::LCAP)?,
            words::slice::<V>(&old, Self::L_VALS, Self::LCAP)?,
        );
        // Entry i of the merged sequence (old entries with the new one at `pos`).
        let entry = |i: usize| match i.cmp(&pos) {
            std::cmp::Ordering::Less => (okeys[i], ovals[i]),
            std::cmp::Ordering::Equal => (k, v),
            std::cmp::Ordering::Greater => (okeys[i - 1], ovals[i - 1]),
        };
        let total = Self::LCAP + 1;
        // Appending past the last key: keep the left leaf full (sequential loads).
        // Inserting in the upper half: split at the new key, which ends the left leaf,
        // and only the entries after it move (ascending keys inside a key range
        // followed by other keys, e.g. one district's order ids before the next
        // district's: the range's later inserts then go to the left leaf until it is
        // full and ends with the range, and append from there). Otherwise in halves.
        let left_n = if pos == Self::LCAP {
            Self::LCAP
        } else if pos >= total / 2 {
            pos + 1
        } else {
            total.div_ceil(2)
        };
        let right = words::alloc(tx, Self::LEAF, |w| {
            w[0] = LEAF_TAG << 32 | (total - left_n) as u64;
            w[Self::L_NEXT] = old[Self::L_NEXT];
            for j in 0..total - left_n {
                let (ek, ev) = entry(left_n + j);
                words::slice_mut::<K>(w, Self::L_KEYS, Self::LCAP)?[j] = ek;
                words::slice_mut::<V>(w, Self::L_VALS, Self::LCAP)?[j] = ev;
            }
            Ok(())
        })?;
        let w = words::write(tx, leaf, Self::LEAF)?;
        w[0] = LEAF_TAG << 32 | left_n as u64;
        w[Self::L_NEXT] = right;
        if pos < left_n {
            for i in pos..left_n {
                let (ek, ev) = entry(i);
                words::slice_mut::<K>(w, Self::L_KEYS, Self::LCAP)?[i] = ek;
                words::slice_mut::<V>(w, Self::L_VALS, Self::LCAP)?[i] = ev;
            }
        }
        Ok((entry(left_n).0, right))
    }

    /// Split the full inner node `node` while inserting separator `sep` and child
    /// `child` after child `i`; returns the separator pushed up and the new right node.
    fn split_inner(tx: &mut Tx<'_>, node: u64, i: usize, sep: K, child: u64) -> Result<(K, u64)> {
        let old = Self::inner(tx, node)?.0.to_vec();
        let okeys = words::slice::<K>(&old, Self::I_KEYS, F - 1)?;
        let okids = &old[Self::I_KIDS..Self::I_KIDS + F];
        // Merged keys (F of them) and children (F + 1).
        let key = |j: usize| match j.cmp(&i) {
            std::cmp::Ordering::Less => okeys[j],
            std::cmp::Ordering::Equal => sep,
            std::cmp::Ordering::Greater => okeys[j - 1],
        };
        let kid = |j: usize| match j.cmp(&(i + 1)) {
            std::cmp::Ordering::Less => okids[j],
            std::cmp::Ordering::Equal => child,
            std::cmp::Ordering::Greater => okids[j - 1],
        };
        // Children kept on the left; at least 2 on each side (F >= 3).
        let left_n = if i + 1 == F {
            F - 1
        } else {
            (F + 1).div_ceil(2)
        };
        let right_n = F + 1 - left_n;
        let right = words::alloc(tx, Self::INNER, |w| {
            w[0] = INNER_TAG << 32 | right_n as u64;
            for j in 0..right_n {
                w[Self::I_KIDS + j] = kid(left_n + j);
            }
            let keys = words::slice_mut::<K>(w, Self::I_KEYS, F - 1)?;
            for (j, slot) in keys.iter_mut().enumerate().take(right_n - 1) {
                *slot = key(left_n + j);
            }
            Ok(())
        })?;
        let w = words::write(tx, node, Self::INNER)?;
        w[0] = INNER_TAG << 32 | left_n as u64;
        for j in 0..left_n {
            w[Self::I_KIDS + j] = kid(j);
        }
        let keys = words::slice_mut::<K>(w, Self::I_KEYS, F - 1)?;
        for (j, slot) in keys.iter_mut().enumerate().take(left_n - 1) {
            *slot = key(j);
        }
        Ok((key(left_n - 1), right))
    }

    /// Remove `k`; returns its value. Writes only `k`'s leaf (see the deletion policy).
    /// (With byte string keys the stored key is freed.)
    pub fn remove<'h>(&self, tx: &mut impl TxAccess<'h>, k: &K::Query) -> Result<Option<V>> {
        let tx = tx.tx_mut();
        let leaf = self.find_leaf(tx, k)?;
        let (w, n) = Self::leaf(tx, leaf)?;
        let Ok(pos) = K::search(tx, words::slice::<K>(w, Self::L_KEYS, n)?, k)? else {
            return Ok(None);
        };
        let w = words::write(tx, leaf, Self::LEAF)?;
        w[0] -= 1;
        let keys = words::slice_mut::<K>(w, Self::L_KEYS, n)?;
        let old_key = keys[pos];
        keys.copy_within(pos + 1..n, pos);
        let vals = words::slice_mut::<V>(w, Self::L_VALS, n)?;
        let old = vals[pos];
        vals.copy_within(pos + 1..n, pos);
        self.add_count(tx, -1)?;
        old_key.release(tx)?;
        Ok(Some(old))
    }

    /// Call `f` on the entries with keys in `range`, in key order, until it returns
    /// false. Reads only. The callback form of [`range`](Self::range): it keeps the
    /// scan's state in registers across a leaf, where the iterator returns each entry
    /// through its `Option<Result<..>>`, and costs fewer instructions per entry.
    pub fn for_each_in<R: RangeBounds<K::Query>>(
        &self,
        tx: &Tx<'_>,
        range: R,
        mut f: impl FnMut(&K, &V) -> bool,
    ) -> Result<()> {
        let (start, end) = (range.start_bound(), range.end_bound());
        let mut node = self.seek(tx, start)?;
        let mut walk = Walk::new(LEAF_CHAIN, node);
        let mut first = true;
        while node != 0 {
            let (w, n) = Self::leaf(tx, node)?;
            let keys = words::slice::<K>(w, Self::L_KEYS, n)?;
            let vals = words::slice::<V>(w, Self::L_VALS, n)?;
            let from = if first {
                start_pos(tx, keys, start)?
            } else {
                0
            };
            first = false;
            for (k, v) in keys[from..].iter().zip(&vals[from..]) {
                if past_end(tx, k, end)? || !f(k, v) {
                    return Ok(());
                }
            }
            node = w[Self::L_NEXT];
            if node != 0 {
                walk.step(node)?;
            }
        }
        Ok(())
    }

    /// The leaf where a scan from `start` begins (descends `height` levels).
    fn seek(&self, tx: &Tx<'_>, start: Bound<&K::Query>) -> Result<u64> {
        let h = self.header(tx)?;
        let mut node = h.root;
        for _ in 0..h.height {
            let (w, n) = Self::inner(tx, node)?;
            let i = match start {
                Bound::Unbounded => 0,
                Bound::Included(lo) | Bound::Excluded(lo) => Self::route(tx, w, n, lo)?,
            };
            node = w[Self::I_KIDS + i];
        }
        Ok(node)
    }

    /// A leaf's keys, values and next-leaf link (for [`RangeIter`]).
    fn leaf_entries<'t>(tx: &'t Tx<'_>, off: u64) -> Result<(&'t [K], &'t [V], u64)> {
        let (w, n) = Self::leaf(tx, off)?;
        let keys = words::slice::<K>(w, Self::L_KEYS, n)?;
        let vals = words::slice::<V>(w, Self::L_VALS, n)?;
        Ok((keys, vals, w[Self::L_NEXT]))
    }

    /// A double-ended iterator over every entry in key order, borrowing keys and values
    /// from the transaction's snapshot (as std's `BTreeMap::iter`, see
    /// [`range`](Self::range)).
    ///
    /// ```
    /// # use pisces::{BTreeMap, Config, Pool};
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let pool = Pool::create(dir.path().join("t.pool"), Config::default().size(32 << 20)).unwrap();
    /// pool.run(|tx| {
    ///     let t = BTreeMap::<u64, u64>::new(tx)?;
    ///     for k in (0..100).rev() { t.insert(tx, k, 2 * k)?; }
    ///     let keys: Vec<u64> = t.iter(tx).map(|e| e.map(|(k, _)| *k)).collect::<Result<_, _>>()?;
    ///     assert_eq!(keys, (0..100).collect::<Vec<_>>());
    ///     let some: Vec<(u64, u64)> = t.range(tx, 10..13).map(|e| e.map(|(k, v)| (*k, *v))).collect::<Result<_, _>>()?;
    ///     assert_eq!(some, [(10, 20), (11, 22), (12, 24)]);
    ///     let down: Vec<u64> = t.range(tx, ..3).rev().map(|e| e.map(|(k, _)| *k)).collect::<Result<_, _>>()?;
    ///     assert_eq!(down, [2, 1, 0]);
    ///     Ok(())
    /// }).unwrap();
    /// ```
    pub fn iter<'t, 'a>(&self, tx: &'t Tx<'a>) -> RangeIter<'t, 'a, K, V, F, RangeFull> {
        RangeIter::new(*self, tx, ..)
    }

    /// A double-ended iterator over the entries with keys in `range`, in key order, as
    /// std's `BTreeMap::range`: `next` walks forward along the leaf chain (one node read
    /// per leaf), `next_back` backward (a descent from the root per leaf, O(height):
    /// leaves are only chained forward), and when the two ends meet each entry has been
    /// yielded exactly once. Each item is a `Result`: a damaged tree (bad pointer, a leaf
    /// chain that loops) yields one `Err` and ends. Reads only. Nothing is read before
    /// the first `next` or `next_back`.
    ///
    /// The iterator holds `range` (so bounds borrowed from elsewhere, as the `&str`
    /// bounds of a tree keyed by [`PString`](crate::PString), must outlive it):
    ///
    /// ```
    /// # use pisces::{BTreeMap, Config, PString, Pool};
    /// use std::ops::Bound;
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let pool = Pool::create(dir.path().join("t.pool"), Config::default().size(32 << 20)).unwrap();
    /// pool.run(|tx| {
    ///     let t = BTreeMap::<PString, u64>::new(tx)?;
    ///     for (i, w) in ["pear", "apple", "fig", "banana"].into_iter().enumerate() {
    ///         t.insert_str(tx, w, i as u64)?;
    ///     }
    ///     let mut from_b = Vec::new();
    ///     for e in t.range(tx, (Bound::Included("b"), Bound::Excluded("g"))).rev() {
    ///         let (k, v) = e?;
    ///         from_b.push((k.get(tx)?, *v));
    ///     }
    ///     assert_eq!(from_b, [("fig", 2), ("banana", 3)]);
    ///     Ok(())
    /// }).unwrap();
    /// ```
    pub fn range<'t, 'a, R: RangeBounds<K::Query>>(
        &self,
        tx: &'t Tx<'a>,
        range: R,
    ) -> RangeIter<'t, 'a, K, V, F, R> {
        RangeIter::new(*self, tx, range)
    }

    /// Call `f` on every entry in key order until it returns false.
    pub fn for_each(&self, tx: &Tx<'_>, f: impl FnMut(&K, &V) -> bool) -> Result<()> {
        self.for_each_in(tx, .., f)
    }

    /// The entry with the smallest key, as std's `BTreeMap::first_key_value` (for a
    /// range, `range(tx, r).next()`).
    pub fn first_key_value<'t>(&self, tx: &'t Tx<'_>) -> Result<Option<(&'t K, &'t V)>> {
        self.iter(tx).next().transpose()
    }

    /// The entry with the largest key, as std's `BTreeMap::last_key_value` (for a
    /// range, `range(tx, r).next_back()`, e.g. the largest key below `hi`). A descent
    /// from the root that backtracks past leaves `remove` emptied.
    pub fn last_key_value<'t>(&self, tx: &'t Tx<'_>) -> Result<Option<(&'t K, &'t V)>> {
        self.iter(tx).next_back().transpose()
    }

    /// The leaf holding the last entry with a key in `start..end`, and the number `j` of
    /// that leaf's entries up to and including it (`j > 0`); `None` if the range is
    /// empty. Leaves have no backward links, so this descends from the root toward the
    /// end bound and backtracks to the left, past leaves that `remove` emptied; it reads
    /// only.
    fn last_leaf(
        &self,
        tx: &Tx<'_>,
        start: Bound<&K::Query>,
        end: Bound<&K::Query>,
    ) -> Result<Option<(u64, usize)>> {
        let h = self.header(tx)?;
        match Self::last_rec(tx, h.root, h.height, start, end)? {
            Last::Found(leaf, j) => Ok(Some((leaf, j))),
            Last::Done | Last::NotHere => Ok(None),
        }
    }

    fn last_rec(
        tx: &Tx<'_>,
        node: u64,
        level: u64,
        start: Bound<&K::Query>,
        end: Bound<&K::Query>,
    ) -> Result<Last> {
        if level == 0 {
            let (w, n) = Self::leaf(tx, node)?;
            let keys = words::slice::<K>(w, Self::L_KEYS, n)?;
            // The keys not past the end: a prefix of the sorted keys.
            let j = match end {
                Bound::Unbounded => keys.len(),
                Bound::Included(hi) => K::partition(tx, keys, hi, true)?,
                Bound::Excluded(hi) => K::partition(tx, keys, hi, false)?,
            };
            if j == 0 {
                return Ok(Last::NotHere);
            }
            if below_start(tx, &keys[j - 1], start)? {
                return Ok(Last::Done);
            }
            return Ok(Last::Found(node, j));
        }
        let (w, n) = Self::inner(tx, node)?;
        let i = match end {
            Bound::Unbounded => n - 1,
            Bound::Included(hi) | Bound::Excluded(hi) => Self::route(tx, w, n, hi)?,
        };
        for c in (0..=i).rev() {
            match Self::last_rec(tx, w[Self::I_KIDS + c], level - 1, start, end)? {
                Last::NotHere => {}
                found_or_done => return Ok(found_or_done),
            }
            // Children left of `c` hold keys below separator c - 1: if that is at or
            // below the start bound, nothing further left is in range.
            if let (true, Bound::Included(lo) | Bound::Excluded(lo)) = (c > 0, start) {
                let sep = &words::slice::<K>(w, Self::I_KEYS, n - 1)?[c - 1];
                if K::cmp_query(tx, sep, lo)? != Ordering::Greater {
                    return Ok(Last::Done);
                }
            }
        }
        Ok(Last::NotHere)
    }

    /// Number of entries. O(1) in the tree's size for a tree made by
    /// [`new`](Self::new): the sum of its count's stripes (see *Costs* on
    /// [`BTreeMap`]); a tree made before the count existed is counted along the leaf chain
    /// (O(len / FANOUT) reads).
    pub fn len(&self, tx: &Tx<'_>) -> Result<usize> {
        let h = self.header(tx)?;
        if let Some(table) = self.counts(tx, &h)? {
            return count::total(tx, table);
        }
        self.walk_len(tx, &h)
    }

    /// The entries counted along the leaf chain (`h`: the validated header).
    fn walk_len(&self, tx: &Tx<'_>, h: &Header) -> Result<usize> {
        let mut node = h.root;
        for _ in 0..h.height {
            node = Self::inner(tx, node)?.0[Self::I_KIDS];
        }
        let mut total = 0;
        let mut walk = Walk::new(LEAF_CHAIN, node);
        while node != 0 {
            let (w, n) = Self::leaf(tx, node)?;
            total += n;
            node = w[Self::L_NEXT];
            if node != 0 {
                walk.step(node)?;
            }
        }
        Ok(total)
    }

    /// True if the tree has no entries.
    pub fn is_empty(&self, tx: &Tx<'_>) -> Result<bool> {
        Ok(self.first_key_value(tx)?.is_none())
    }

    /// Call `f` with the offset of every persistent object the tree owns (header,
    /// nodes and the blocks of byte string keys, then the element count's objects): for
    /// pool checkers and leak tests.
    pub fn for_each_object(&self, tx: &Tx<'_>, mut f: impl FnMut(u64)) -> Result<()> {
        let h = self.header(tx)?;
        f(self.header.offset());
        let mut stack = vec![(h.root, h.height)];
        // A damaged tree may share subtrees: every node once (else a walk could take
        // FANOUT^height steps).
        let mut seen = std::collections::HashSet::new();
        while let Some((node, level)) = stack.pop() {
            if !seen.insert(node) {
                return Err(Error::corrupt(format!(
                    "B+-tree at {:#x}: the node at {node:#x} is reached twice",
                    self.offset()
                )));
            }
            f(node);
            if level > 0 {
                let (w, n) = Self::inner(tx, node)?;
                for &c in &w[Self::I_KIDS..Self::I_KIDS + n] {
                    stack.push((c, level - 1));
                }
                if K::OUT_OF_LINE {
                    Self::owned_keys(words::slice::<K>(w, Self::I_KEYS, n - 1)?, &mut f);
                }
            } else if K::OUT_OF_LINE {
                let (w, n) = Self::leaf(tx, node)?;
                Self::owned_keys(words::slice::<K>(w, Self::L_KEYS, n)?, &mut f);
            }
        }
        if let Some(table) = self.counts(tx, &h)? {
            count::for_each_object(tx, table, f)?;
        }
        Ok(())
    }

    /// The blocks byte string keys own (entries' keys and separators).
    fn owned_keys(keys: &[K], f: &mut impl FnMut(u64)) {
        for k in keys {
            let b = k.owned_block();
            if b != 0 {
                f(b);
            }
        }
    }

    /// Free the whole tree (every object [`for_each_object`](Self::for_each_object)
    /// lists). The handle and any copy of it must not be used afterwards.
    pub fn destroy<'h>(self, tx: &mut impl TxAccess<'h>) -> Result<()> {
        let tx = tx.tx_mut();
        let mut objs = Vec::new();
        self.for_each_object(tx, |o| objs.push(o))?;
        for o in objs {
            tx.free(PPtr::<u64>::from_offset(o))?;
        }
        Ok(())
    }

    /// Verify the tree's invariants: node kinds and counts, keys strictly increasing
    /// within and across nodes, every key inside the bounds its ancestors' separators
    /// give, all leaves at the same depth, and the leaf chain visiting exactly the leaves
    /// in key order, and the element count (if the tree keeps one) equal to the entries.
    /// Returns [`Error::Corrupt`] describing the first violation.
    pub fn check(&self, tx: &Tx<'_>) -> Result<TreeStats>
    where
        K: fmt::Debug,
    {
        let lt = |a: &K, b: &K| -> Result<bool> { Ok(K::cmp_keys(tx, a, b)? == Ordering::Less) };
        let h = self.header(tx)?;
        let mut st = TreeStats {
            height: h.height as usize,
            ..TreeStats::default()
        };
        let bad = |m: String| Error::corrupt(format!("B+-tree: {m}"));
        // Depth-first, left to right: (node, level, lower bound, upper bound).
        let mut stack: Vec<(u64, u64, Option<K>, Option<K>)> = vec![(h.root, h.height, None, None)];
        let mut leaves = Vec::new();
        let mut last: Option<K> = None;
        let mut seen = std::collections::HashSet::new();
        while let Some((node, level, lo, hi)) = stack.pop() {
            if !seen.insert(node) {
                return Err(bad(format!("the node at {node:#x} is reached twice")));
            }
            let in_bounds = |k: &K| -> Result<bool> {
                Ok(match (&lo, &hi) {
                    (Some(l), _) if lt(k, l)? => false,
                    (_, Some(u)) => lt(k, u)?,
                    _ => true,
                })
            };
            if level == 0 {
                let (w, n) = Self::leaf(tx, node)?;
                let keys = words::slice::<K>(w, Self::L_KEYS, n)?;
                for k in keys {
                    if !in_bounds(k)? {
                        return Err(bad(format!("key {k:?} outside [{lo:?}, {hi:?})")));
                    }
                    if let Some(l) = &last {
                        if !lt(l, k)? {
                            return Err(bad(format!("key {k:?} after {last:?}")));
                        }
                    }
                    last = Some(*k);
                }
                st.leaves += 1;
                st.empty_leaves += usize::from(n == 0);
                st.entries += n;
                leaves.push(node);
                continue;
            }
            let (w, n) = Self::inner(tx, node)?;
            st.inner_nodes += 1;
            let keys = words::slice::<K>(w, Self::I_KEYS, n - 1)?;
            for j in 0..n - 1 {
                if !in_bounds(&keys[j])? || (j > 0 && !lt(&keys[j - 1], &keys[j])?) {
                    return Err(bad(format!(
                        "separators {keys:?} unordered or out of bounds"
                    )));
                }
            }
            for j in (0..n).rev() {
                let clo = if j == 0 { lo } else { Some(keys[j - 1]) };
                let chi = if j == n - 1 { hi } else { Some(keys[j]) };
                stack.push((w[Self::I_KIDS + j], level - 1, clo, chi));
            }
        }
        // The chain from the leftmost leaf visits exactly the leaves, in order.
        for (i, &leaf) in leaves.iter().enumerate() {
            let next = Self::leaf(tx, leaf)?.0[Self::L_NEXT];
            let want = leaves.get(i + 1).copied().unwrap_or(0);
            if next != want {
                return Err(bad(format!(
                    "leaf {leaf:#x} links to {next:#x}, not {want:#x}"
                )));
            }
        }
        if let Some(table) = self.counts(tx, &h)? {
            let counted = count::total(tx, table)?;
            if counted != st.entries {
                return Err(bad(format!(
                    "the element count says {counted} entries, the leaves hold {}",
                    st.entries
                )));
            }
        }
        Ok(st)
    }
}

/// The entry API, for keys that are their own query form (`Pod + Ord` keys).
impl<K: TreeKey<Query = K>, V: Pod, const F: usize> BTreeMap<K, V, F> {
    /// `k`'s place for insert-or-update with one search (see [`Entry`]). For keys
    /// compared in place (`Pod + Ord`); a byte string key the entry does not store
    /// would have no owner to free it.
    ///
    /// ```
    /// # use pisces::{BTreeMap, Config, Pool};
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let pool = Pool::create(dir.path().join("t.pool"), Config::default().size(32 << 20)).unwrap();
    /// pool.run(|tx| {
    ///     let t = BTreeMap::<u64, u64>::new(tx)?;
    ///     for k in [3, 1, 3, 3] {
    ///         t.entry(tx, k)?.and_modify(|n| *n += 1)?.or_insert(1)?;
    ///     }
    ///     assert_eq!((t.get(tx, &1)?, t.get(tx, &3)?), (Some(1), Some(3)));
    ///     Ok(())
    /// }).unwrap();
    /// ```
    pub fn entry<'t, 'h: 't>(
        &self,
        tx: &'t mut impl TxAccess<'h>,
        k: K,
    ) -> Result<Entry<'t, 'h, Self>> {
        let tx = tx.tx_mut();
        let leaf = self.find_leaf(tx, &k)?;
        let (w, n) = Self::leaf(tx, leaf)?;
        let at = match K::search(tx, words::slice::<K>(w, Self::L_KEYS, n)?, &k)? {
            Ok(i) => TreeSpot {
                leaf,
                i,
                found: true,
            },
            Err(i) => TreeSpot {
                leaf,
                i,
                found: false,
            },
        };
        Ok(Entry::new(tx, *self, k, at))
    }
}

/// A key's place in a tree, for [`Entry`]: its leaf and index (the insert position
/// when absent).
pub struct TreeSpot {
    leaf: u64,
    i: usize,
    found: bool,
}

impl<K: TreeKey<Query = K>, V: Pod, const F: usize> EntryMap for BTreeMap<K, V, F> {
    type Key = K;
    type Value = V;
    type At = TreeSpot;

    fn occupied(at: &TreeSpot) -> bool {
        at.found
    }

    fn value_mut<'t>(self, tx: &'t mut Tx<'_>, at: &TreeSpot) -> Result<&'t mut V> {
        let n = Self::leaf(tx, at.leaf)?.1;
        let w = words::write(tx, at.leaf, Self::LEAF)?;
        words::slice_mut::<V>(w, Self::L_VALS, n)?
            .get_mut(at.i)
            .ok_or_else(|| words::corrupt("an entry's leaf changed"))
    }

    fn insert_vacant<'t>(self, tx: &'t mut Tx<'_>, at: TreeSpot, k: K, v: V) -> Result<&'t mut V> {
        let n = Self::leaf(tx, at.leaf)?.1;
        // Two-step: a split moved the entry, so it is looked up again (rare).
        if n < Self::LCAP {
            return self
                .insert_new(tx, at.leaf, n, at.i, &k, k, v)?
                .ok_or_else(|| words::corrupt("a leaf with room split"));
        }
        self.insert_new(tx, at.leaf, n, at.i, &k, k, v)?;
        self.get_mut(tx, &k)?
            .ok_or_else(|| words::corrupt("an inserted key is missing"))
    }
}

/// Entries of a [`BTreeMap`] in key order within a range, from either end (see
/// [`BTreeMap::range`] and [`BTreeMap::iter`]). `R` is the range it was made with
/// (held for its bounds: `RangeFull` for `iter`).
///
/// Invariant: every entry yielded from the front has a key below every entry yielded
/// from the back. Each end remembers the last key it yielded and the other end stops
/// before it, so when the ends meet (in one leaf, or with empty leaves between them)
/// every entry in range is yielded exactly once.
pub struct RangeIter<'t, 'a, K, V, const F: usize, R = RangeFull> {
    tree: BTreeMap<K, V, F>,
    tx: &'t Tx<'a>,
    range: R,
    /// The forward position (`None`: not started).
    front: Option<Front<'t, K, V>>,
    /// The backward position (`None`: not started).
    back: Option<Back<'t, K, V>>,
    /// The last key yielded by `next` and by `next_back` (in the snapshot).
    front_key: Option<&'t K>,
    back_key: Option<&'t K>,
    done: bool,
}

/// The forward position: a leaf's entries, the next index in it, the next leaf.
struct Front<'t, K, V> {
    keys: &'t [K],
    vals: &'t [V],
    i: usize,
    next: u64,
    walk: Walk,
}

/// The backward position: a leaf's entries, of which `..j` are still to come.
struct Back<'t, K, V> {
    keys: &'t [K],
    vals: &'t [V],
    j: usize,
}

impl<K, V, const F: usize, R> fmt::Debug for RangeIter<'_, '_, K, V, F, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RangeIter")
            .field("tree", &self.tree)
            .field("front_started", &self.front.is_some())
            .field("back_started", &self.back.is_some())
            .field("done", &self.done)
            .finish_non_exhaustive()
    }
}

impl<'t, 'a, K: TreeKey, V: Pod, const F: usize, R: RangeBounds<K::Query>>
    RangeIter<'t, 'a, K, V, F, R>
{
    fn new(tree: BTreeMap<K, V, F>, tx: &'t Tx<'a>, range: R) -> Self {
        RangeIter {
            tree,
            tx,
            range,
            front: None,
            back: None,
            front_key: None,
            back_key: None,
            done: false,
        }
    }

    fn fail(&mut self, e: Error) -> Option<Result<(&'t K, &'t V)>> {
        self.done = true;
        Some(Err(e))
    }

    /// The front position at leaf `off`, its entries from index `from`.
    fn front_at(&self, off: u64, walk: Walk, from: usize) -> Result<Front<'t, K, V>> {
        let (keys, vals, next) = BTreeMap::<K, V, F>::leaf_entries(self.tx, off)?;
        Ok(Front {
            keys,
            vals,
            i: from.min(keys.len()),
            next,
            walk,
        })
    }

    /// The back position at the last entry with a key in `start..end` (`None`: none).
    fn back_before(&self, end: Bound<&K::Query>) -> Result<Option<Back<'t, K, V>>> {
        let Some((leaf, j)) = self
            .tree
            .last_leaf(self.tx, self.range.start_bound(), end)?
        else {
            return Ok(None);
        };
        let (keys, vals, _) = BTreeMap::<K, V, F>::leaf_entries(self.tx, leaf)?;
        if j > keys.len() {
            return Err(words::corrupt("the backward search's leaf changed"));
        }
        Ok(Some(Back { keys, vals, j }))
    }

    fn try_next(&mut self) -> Result<Option<(&'t K, &'t V)>> {
        let tx = self.tx;
        let front = match &mut self.front {
            Some(f) => f,
            None => {
                let start = self.range.start_bound();
                let leaf = self.tree.seek(tx, start)?;
                let keys = BTreeMap::<K, V, F>::leaf_entries(tx, leaf)?.0;
                let from = start_pos(tx, keys, start)?;
                let f = self.front_at(leaf, Walk::new(LEAF_CHAIN, leaf), from)?;
                self.front.insert(f)
            }
        };
        loop {
            if front.i < front.keys.len() {
                let (k, v) = (&front.keys[front.i], &front.vals[front.i]);
                if past_end(tx, k, self.range.end_bound())? {
                    return Ok(None);
                }
                if let Some(b) = self.back_key {
                    if K::cmp_keys(tx, k, b)? != Ordering::Less {
                        return Ok(None);
                    }
                }
                front.i += 1;
                self.front_key = Some(k);
                return Ok(Some((k, v)));
            }
            if front.next == 0 {
                return Ok(None);
            }
            let (next, mut walk) = (front.next, front.walk);
            walk.step(next)?;
            let (keys, vals, after) = BTreeMap::<K, V, F>::leaf_entries(tx, next)?;
            *front = Front {
                keys,
                vals,
                i: 0,
                next: after,
                walk,
            };
        }
    }

    fn try_next_back(&mut self) -> Result<Option<(&'t K, &'t V)>> {
        let tx = self.tx;
        let back = match &mut self.back {
            Some(b) if b.j > 0 => b,
            Some(_) => {
                // This leaf is used up, and its first entry was the last yielded:
                // the predecessor leaf is found by a descent below that key.
                let Some(below) = self.back_key else {
                    return Err(words::corrupt("backward scan without a position"));
                };
                let below = K::query(tx, below)?;
                match self.back_before(Bound::Excluded(below))? {
                    Some(b) => self.back.insert(b),
                    None => return Ok(None),
                }
            }
            None => match self.back_before(self.range.end_bound())? {
                Some(b) => self.back.insert(b),
                None => return Ok(None),
            },
        };
        let (k, v) = (&back.keys[back.j - 1], &back.vals[back.j - 1]);
        if below_start(tx, k, self.range.start_bound())? {
            return Ok(None);
        }
        if let Some(f) = self.front_key {
            if K::cmp_keys(tx, k, f)? != Ordering::Greater {
                return Ok(None);
            }
        }
        back.j -= 1;
        self.back_key = Some(k);
        Ok(Some((k, v)))
    }
}

impl<'t, 'a, K: TreeKey, V: Pod, const F: usize, R: RangeBounds<K::Query>> Iterator
    for RangeIter<'t, 'a, K, V, F, R>
{
    type Item = Result<(&'t K, &'t V)>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        match self.try_next() {
            Ok(Some(kv)) => Some(Ok(kv)),
            Ok(None) => {
                self.done = true;
                None
            }
            Err(e) => self.fail(e),
        }
    }
}

impl<'t, 'a, K: TreeKey, V: Pod, const F: usize, R: RangeBounds<K::Query>> DoubleEndedIterator
    for RangeIter<'t, 'a, K, V, F, R>
{
    fn next_back(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        match self.try_next_back() {
            Ok(Some(kv)) => Some(Ok(kv)),
            Ok(None) => {
                self.done = true;
                None
            }
            Err(e) => self.fail(e),
        }
    }
}

impl<'t, 'a, K: TreeKey, V: Pod, const F: usize, R: RangeBounds<K::Query>> std::iter::FusedIterator
    for RangeIter<'t, 'a, K, V, F, R>
{
}
