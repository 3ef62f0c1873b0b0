//! `HashMap<K, V>`: a persistent chained hash table (the paper's hash-table benchmark).
//!
//! # Layout
//! ```text
//! handle (8 bytes, Pod) ──► header [u64; 512]           read-only after `create`
//!                             0 magic  1 signature (size of K, V)  2 buckets
//!                             3 levels (1 or 2)  4 chunks  5 layout
//!                             6 count table (0: none)  7 what the values own (for `check --deep`)
//!                             8.. directory: 504 entries
//!     levels = 1: entry i ──► chunk i
//!     levels = 2: entry i ──► page [u64; 512] ──► chunks 512 i ..
//! chunk [u64; 32]: heads of 32 consecutive buckets (0 = empty bucket)
//! node: [next][key, padded to words][value, padded to words]
//! ```
//! A key hashes ([`stable_hash`] of its bytes) to bucket
//! `b = (hash * buckets) >> 64`, which lives in slot `b % 32` of chunk `b / 32`. Up to
//! 504 × 32 = 16 128 buckets the directory is in the header itself, so a lookup reads
//! header, chunk and chain; larger tables add one directory page read. The header,
//! pages and chunk pointers never change after `create`, so they are never written and
//! never conflict. The fixed 4 KiB header is the price of that one-read directory: a
//! map costs at least 4 KiB + 256 bytes, however small.
//!
//! Every access checks the header before it uses it (magic, signature, layout, and the
//! geometry words it computes with), and reads every object through `Tx::read`, which
//! validates the offset as a live block of the pool: a forged handle or a damaged
//! pool is an error, never a read outside the pool's objects. The header's words are
//! checked at every access, never remembered as checked: they change (a split writes
//! the bucket count, the levels and the directory; a program may write any word of
//! it), and nothing a read sees says that they did. The block's header word is no
//! version: an unlocked object's is the engine's "live" marker before and after a
//! write-back replaces its contents. The objects every
//! lookup of a map reads — the header, its directory pages, and the chunks (or a
//! grouped map's first groups) of a directory held in the header — are read through
//! the fast path's table of blocks found before (`Tx::read_again`): where each block
//! is in the allocator's geometry, which no run changes, is found once per engine
//! thread; that it is allocated and which version to read is checked at every read. A lookup skips the one
//! word it never reads (the chunk count); updates, iteration and `check` refuse a
//! header whose chunk count disagrees with its bucket count.
//!
//! Why chunks: the bucket heads are written when a bucket becomes empty or non-empty or
//! loses its first node. One object holding all heads would be copied whole on each of
//! those writes and would make all of them conflict with each other; a chunk of 32 heads
//! is 256 bytes, and two writers touch the same chunk only when their buckets are
//! within the same 32.
//!
//! New keys are appended at the *tail* of their chain: an insert must walk the whole
//! chain anyway to know the key is absent, and linking at the tail writes only the last
//! node (or the head, for an empty bucket), so inserts into different buckets of one
//! chunk do not conflict.
//!
//! With 8-byte keys and 64-byte values a node is 80 bytes, as in the paper's benchmark.
//! Keys are compared with `==`, which must agree with equality of their bytes (as std
//! requires `Hash` to agree with `Eq`); for integer and array keys it does.
//!
//! # Snapshot isolation (§5.1 of the paper)
//! Readers (`get`, `get_ref`, `for_each`, `len`) only read: they see one snapshot and
//! never conflict. Writers write every object whose content their correctness depends
//! on, so that SI's write-write conflicts exclude the anomalies:
//! * insert of an absent key writes the link it changes (the tail node's `next` or the
//!   bucket head). Two transactions inserting into the same bucket both write the same
//!   tail link, so they cannot both add the key (no duplicates), and a concurrent remove
//!   of that tail node writes it too.
//! * insert of a present key, `get_mut`: write the key's node. A concurrent remove of it
//!   writes that node as well.
//! * remove writes the predecessor link (node or bucket head) *and* the removed node,
//!   then frees it. Two removes of adjacent nodes conflict on the node between them (one
//!   writes it as predecessor, the other as the removed node), which is the anomaly of
//!   unlinking both neighbours from a stale snapshot; a remove and an update of the same
//!   node conflict, so no update is lost into a freed node.
//!
//! # Growth
//! A map made by [`HashMap::new`] or [`HashMap::with_buckets`] grows as it fills by
//! linear hashing (header word 5 = `"GROW.v1"`; 0 in fixed maps, whose layout is the
//! original one and still read as before; any other value is refused as `Corrupt`):
//! * addressing: with `n` buckets and `m` the largest power of two not above `n`, a key
//!   is in bucket `hash mod m`, or `hash mod 2m` if that bucket (below `n - m`) was
//!   already split;
//! * each chunk of a growable map has a 33rd word: the number of entries in its 32
//!   buckets, written by every insert and remove of a key in them. No counter is
//!   shared by all writers: two writers conflict on it only within one chunk;
//! * an insert whose chunk count says the map is above half an entry per bucket (`MAX_LOAD`) (the
//!   estimate is explained at `overloaded`) splits bucket `n - m` in the same
//!   transaction: its keys with hash bit `m` set move to the new bucket `n`; a new
//!   chunk is added every 32 buckets (the header directory turns into pages past 504
//!   chunks). Each step is part of a transaction, so a crash leaves the map before or
//!   after it, and `check` verifies the counts and every key's bucket under the grown
//!   geometry. Splits write the header: concurrent splits conflict with each other
//!   (not with lookups, or with inserts and removes that do not split).
//!
//! # Grouped layout (growable maps of small entries)
//! A growable map whose key and value fit in two words together (each padded to whole
//! words: `u64` to `u64`, a set of `u64` as `HashMap<u64, u8>`) is made in the grouped
//! layout instead (header word 5 = `"GROUP.v1"`): open addressing inside groups of 7
//! slots, linear hashing over the groups.
//! ```text
//! header (as above; `buckets` = groups) ── directory entry i ──► group: first of chain i
//! group [u64; 16]: tags (byte j: slot j's tag, 0 = empty; byte 7 unused)
//!                  next (the chain's next group, 0 = none)
//!                  7 slots: [key][value], each padded to words
//! ```
//! A key's hash gives its chain (linear hashing on the low bits, as above) and its tag
//! (the top 7 bits, with the high bit set). A lookup reads the header and the chain's
//! first group, compares the 7 tags with a few word operations, compares the keys of
//! the slots whose tag matches, and reads the chain's next group only if the key was
//! not found and there is one: two validated reads per lookup instead of the header,
//! the chunk and the chain's nodes. Entries are kept inline, so an insert or update
//! copies the group (128 bytes at most) where the chained layout copies a node; larger
//! entries stay in the chained layout for that reason.
//!
//! Writers (snapshot isolation, as above):
//! * insert of an absent key writes the chain's *first* group, wherever the key goes
//!   (the first free slot along the chain, or a new group linked from the last one,
//!   which is written too). Two inserts of one key therefore conflict even when their
//!   snapshots differ in which slot is free: one that saw a slot freed by a remove the
//!   other did not see would otherwise put the key into another group, and the key
//!   would be there twice;
//! * update (insert of a present key, `get_mut`) writes the key's group; remove writes
//!   it, clears the slot and, when that leaves a group other than the chain's first
//!   empty, writes its predecessor to unlink it and frees it. A chain never holds an
//!   empty group after its first; a remove and an insert into the group it empties
//!   conflict on that group.
//! * growth: an insert whose chain's count estimates the map above five entries per
//!   group (the chained layout's estimate, with the one chain as its sample) splits
//!   chain `n - m` into itself and chain `n`, rewriting every group of the old chain
//!   (and freeing those no longer needed) and writing the header, so any transaction
//!   that changes that chain from an older snapshot conflicts with the split. The
//!   estimate is noisy, so maps settle at about 2.8 entries per group, with about 1 %
//!   of the entries past a chain's first group. Keys whose hashes agree in their low
//!   bits stay in one chain whatever the splits; each insert into such a chain splits
//!   another (at most two per insert), as a chained map's chunk count does. `check`
//!   verifies every tag, every key's chain, and that no key is twice in a chain.
//!
//! [`HashMap::buckets`] of a grouped map counts groups. Up to 504 groups (about 1,400
//! entries) the directory is in the header, and a lookup reads the chain's first
//! group through the read fast path's table of blocks found before, as it reads the
//! header: the group's place in the allocator's geometry (slab, class, block start),
//! which no run changes, is then looked up once per engine thread instead of at every
//! lookup, while its header word (allocated, and the version to read) is still checked
//! at every read. Larger maps add a directory page read to every lookup, as chained
//! maps do past 16,128 buckets, and read their groups as any object (the table would
//! hold too few of them to pay). Such a group, read at random in a map too large for
//! the core's caches, spans three cache lines (its 136 bytes in a 160-byte block):
//! the lookup asks for all three as the read returns (`words::prefetch_lines`), so that
//! the slot its key is in arrives with the tags instead of after them. The directory
//! holds at most 504 × 512 groups; past that (about 700,000 entries) chains lengthen
//! instead.
//! Maps made by [`HashMap::fixed`] (a fixed bucket count) are always chained.
//!
//! # Size
//! One counter object written by every insert and remove would make every pair of
//! concurrent updates conflict, serialising all writers of the map. So a map keeps a
//! striped count instead (the `count` module, located by header word 6): an insert of
//! an absent key or a remove of a present one adds ±1 to its thread's stripe, one of 32
//! counter objects, in the same transaction, and [`HashMap::len`] sums the stripes:
//! O(1) in the map's size, and two writers on different threads do not conflict on
//! it. Header word 6 is written only by the map's creation (it was reserved, zero,
//! before the count existed): a map made before then keeps no count, and its `len`
//! walks the table (O(buckets + len)).
//!
//! Creating a map allocates all chunks in its transaction (about 10 bytes of log per bucket
//! without flush-diff); for very large tables raise `Config::log_bytes_per_thread`.

use crate::containers::count;
use crate::containers::hash::{bucket_in, stable_hash};
use crate::containers::walk::Walk;
use crate::containers::words::{self, Shape};
use crate::{Error, PPtr, Pod, Result, Tx, TxAccess, Zeroable};
use std::fmt;
use std::marker::PhantomData;
use std::mem::{align_of, size_of};

mod entry_map;
mod grouped;

type Header = [u64; HDR_WORDS];
type Page = [u64; PAGE];
type Chunk = [u64; CHUNK];
/// A growable map's chunk: the 32 heads, then the number of entries in its buckets.
type CountedChunk = [u64; CHUNK + 1];

/// What [`HashMap::lookup_header`] found the map to be: how a lookup reads it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Lookup {
    /// The grouped layout with its directory in the header (one level): the chain's
    /// first group is the header's directory entry of the chain.
    GroupedInHeader,
    /// The grouped layout with directory pages (two levels).
    GroupedPaged,
    /// The chained layout (fixed or growable).
    Chained,
}

/// The error of a directory index outside the header (`HashMap::chunk_of`).
#[cold]
#[inline(never)]
fn directory_outside_header() -> Error {
    Error::corrupt("hash map: bad geometry (a chunk outside the header's directory)")
}

/// The first word of every hash map header ("PSC.HMAP"): how tools recognise a map.
pub const MAGIC: u64 = u64::from_le_bytes(*b"PSC.HMAP");
const CHAIN: &str = "hash map chain";
const HDR_WORDS: usize = 512;
const H_MAGIC: usize = 0;
const H_SIG: usize = 1;
const H_BUCKETS: usize = 2;
const H_LEVELS: usize = 3;
const H_CHUNKS: usize = 4;
const H_GROW: usize = 5;
/// Offset of the element count's stripe table (0: a map made without a count).
pub(crate) const H_COUNT: usize = 6;
/// What the values own (`value_kind::value_kind`): written by `create`, read only by the
/// deep check (0 in maps made before the word was written: plain values).
pub(crate) const H_VALUES: usize = 7;
/// `H_GROW` of a growable map (0: fixed bucket count, the original layout).
const GROWABLE: u64 = u64::from_le_bytes(*b"GROW.v1\0");
/// The entries per bucket above which a growable map splits a bucket, as a fraction
/// (`MAX_LOAD.0 / MAX_LOAD.1`). Half an entry per bucket: a successful lookup then
/// walks about 1.25 nodes on average (1 + load / 2) instead of 1.5 at one per bucket,
/// for 8 more bytes of bucket array per two entries than at one per bucket.
const MAX_LOAD: (u64, u64) = (1, 2);
/// The most buckets one insert splits: enough for the bucket count to outgrow the
/// entry count by `1 / MAX_LOAD`.
const SPLITS_PER_INSERT: u64 = MAX_LOAD.1.div_ceil(MAX_LOAD.0);
/// The groups a grouped map made by [`HashMap::new`] starts with.
const INITIAL_GROUPS: usize = 4;
const H_DIR: usize = 8;
const DIR: usize = HDR_WORDS - H_DIR;
const PAGE: usize = 512;
/// Bucket heads per chunk object.
pub const CHUNK: usize = 32;
/// The most buckets a [`HashMap`] can have.
pub const MAX_BUCKETS: usize = DIR * PAGE * CHUNK;
/// The most groups a map in the grouped layout has (one directory entry each).
const MAX_GROUPS: usize = DIR * PAGE;
/// Header word 5 of a map in the grouped layout.
pub(crate) const GROUPED: u64 = u64::from_le_bytes(*b"GROUP.v1");
/// Slots per group of the grouped layout: each has a tag byte in the group's first
/// word, whose top byte is unused (always 0).
pub(crate) const GROUP_SLOTS: usize = 7;
/// The most words (key and value, each padded to words) an entry of a grouped map has:
/// a group is then at most 16 words, two cache lines, which every insert and update
/// of one of its entries copies.
pub(crate) const MAX_SLOT_WORDS: usize = 2;

/// A persistent hash map from `K` to `V`.
///
/// The handle is 8 bytes of plain data (a pointer to the map's header): store it in
/// your root object or in other persistent objects. All operations take the running
/// transaction, so they compose with anything else the transaction does: several map
/// operations and any other changes commit or roll back together. Every engine runs it.
///
/// * **Keys** are compared by `==`, which must agree with equality of their bytes (as
///   std asks `Hash` to agree with `Eq`); integers and arrays of them do. A key's bucket
///   comes from [`stable_hash`] of its bytes.
/// * **Growth**: [`HashMap::new`], [`HashMap::with_capacity`] and
///   [`HashMap::with_buckets`] make a map that grows as it fills (linear hashing: an
///   insert that finds its part of the map above the load limit splits one bucket, in
///   the same transaction). [`HashMap::fixed`] makes a map of a fixed bucket count, as
///   the paper's benchmark does. Maps whose key and value
///   fit in two 8-byte words together (`HashMap<u64, u64>`, a set as `HashMap<u64, u8>`)
///   keep entries inline in groups of 7 slots, so a lookup reads two objects; others
///   chain a node per entry.
/// * **Snapshot isolation**: reads (`get`, `get_ref`, `iter`, `for_each`, `len`) write
///   nothing and conflict with nothing. An update writes every object its correctness
///   depends on (the link it changes, the node it replaces or removes), so two
///   updates that would break the map's structure meet in a write-write conflict and
///   one retries. Application invariants that span several keys still need the usual
///   SI care (write what your decision depends on).
/// * **Costs**: a lookup reads the header, a bucket chunk or group, and the chain; it
///   copies nothing (`get_ref` borrows the value) and allocates nothing. The element
///   count is striped over 32 objects (two writers on different threads do not
///   conflict on it), so [`HashMap::len`] is O(1) in the map's size. A map costs at
///   least 4 KiB (its header holds the bucket directory) plus 2.3 KiB for the count.
/// * **Values that own blocks** ([`PBytes`](crate::PBytes), [`PString`](crate::PString),
///   [`PVec`](crate::PVec), other [`Owned`](crate::Owned) types): `insert` and `remove`
///   return the value they take out, and the caller owns it (the map cannot know
///   whether it was stored elsewhere too); [`insert_and_free`](Self::insert_and_free),
///   [`remove_and_free`](Self::remove_and_free) and
///   [`destroy_with_values`](Self::destroy_with_values) free what it owns.
/// * **Damage**: headers, node kinds and the key and value sizes are checked on every
///   access, and walks along chains detect cycles, so a damaged pool or a handle used
///   with other types is an [`Error`], never undefined behaviour; [`HashMap::check`]
///   verifies a whole map.
///
/// ```
/// use pisces::{Config, HashMap, Pool};
/// # fn main() -> pisces::Result<()> {
/// # let dir = tempfile::tempdir().unwrap();
/// let pool = Pool::create(dir.path().join("m.pool"), Config::default().size(32 << 20))?;
/// let root = pool.root::<HashMap<u64, [u8; 16]>>()?;
/// pool.run(|tx| {
///     let m = HashMap::with_capacity(tx, 1000)?;
///     *tx.write(root)? = m;
///     m.insert(tx, 7, *b"seven           ")?;
///     Ok(())
/// })?;
/// let m = pool.run(|tx| Ok(*tx.read(root)?))?;
/// assert_eq!(pool.run(|tx| m.get(tx, &7))?, Some(*b"seven           "));
/// # Ok(()) }
/// ```
///
/// # Limits
/// Keys and values are [`Pod`] types of alignment at most 8 (pool objects
/// are 8-byte aligned), neither zero-sized, and a node — a next pointer, the key and the
/// value, each padded to whole 8-byte words — is at most 16 KiB (2048 words). A map of
/// other types does not compile (the check runs when the code is built into a binary,
/// as `Tx::read` of an over-aligned type):
/// ```compile_fail,E0080
/// # use pisces::{HashMap, Result, Tx};
/// fn f(tx: &mut Tx<'_>) -> Result<()> {
///     let m = HashMap::<u128, u64>::new(tx)?; // u128 is 16-byte aligned
///     m.insert(tx, 1, 2)?;
///     Ok(())
/// }
/// let _codegen: fn(&mut Tx<'_>) -> Result<()> = f;
/// ```
/// ```compile_fail,E0080
/// # use pisces::{HashMap, Result, Tx};
/// fn f(tx: &Tx<'_>, m: HashMap<u64, u128>) -> Result<Option<u128>> {
///     m.get(tx, &1) // values too
/// }
/// let _codegen: fn(&Tx<'_>, HashMap<u64, u128>) -> Result<Option<u128>> = f;
/// ```
/// ```compile_fail,E0080
/// # use pisces::{HashMap, Result, Tx};
/// fn f(tx: &mut Tx<'_>) -> Result<HashMap<u64, [u64; 2048]>> {
///     HashMap::new(tx) // 1 + 1 + 2048 words: above the node limit
/// }
/// let _codegen: fn(&mut Tx<'_>) -> Result<HashMap<u64, [u64; 2048]>> = f;
/// ```
#[repr(transparent)]
#[derive(Pod, Zeroable)]
pub struct HashMap<K, V> {
    header: PPtr<Header>,
    _kv: PhantomData<fn() -> (K, V)>,
}

impl<K, V> Clone for HashMap<K, V> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<K, V> Copy for HashMap<K, V> {}
impl<K, V> PartialEq for HashMap<K, V> {
    fn eq(&self, o: &Self) -> bool {
        self.header == o.header
    }
}
impl<K, V> Eq for HashMap<K, V> {}
impl<K, V> fmt::Debug for HashMap<K, V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "HashMap({:#x})", self.header.offset())
    }
}
impl<K, V> Default for HashMap<K, V> {
    fn default() -> Self {
        Self::null()
    }
}

/// Shape facts found by [`HashMap::check`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MapStats {
    /// Buckets.
    pub buckets: usize,
    /// Buckets holding at least one entry.
    pub used_buckets: usize,
    /// Entries.
    pub entries: usize,
    /// Entries in the longest chain.
    pub longest_chain: usize,
}

/// Where a node is linked from.
#[derive(Clone, Copy)]
enum Link {
    /// Slot of a bucket head in a chunk.
    Head { chunk: u64, slot: usize },
    /// The `next` word of a node.
    Next(u64),
}

/// Result of a chain search: the key's node (0 if absent) and the link pointing to it
/// (or, when absent, the chain's last link).
pub struct Found {
    link: Link,
    node: u64,
    /// What an insert or remove counts with (`count`): the header's bucket count, the
    /// key's bucket and its chunk. (Read with the header the walk used: nothing an
    /// insert or remove writes before it counts changes them.)
    buckets: u64,
    bucket: u64,
    chunk: u64,
}

impl<K, V> HashMap<K, V> {
    /// The null handle (what a zeroed root holds); every operation on it is an error.
    pub const fn null() -> Self {
        HashMap {
            header: PPtr::null(),
            _kv: PhantomData,
        }
    }

    /// True for the null handle.
    pub const fn is_null(self) -> bool {
        self.header.is_null()
    }

    /// Offset of the map's header object (for tools).
    pub const fn offset(self) -> u64 {
        self.header.offset()
    }
}

impl<K: Pod + Eq, V: Pod> HashMap<K, V> {
    // Every node access goes through these (directly or through `NODE`, `SMALL`,
    // `GROUP`), so a map of an over-aligned type does not compile.
    const KW: usize = {
        assert!(
            align_of::<K>() <= words::MAX_ALIGN,
            "hash map keys must have alignment at most 8 (they are stored 8-byte aligned)"
        );
        words::words_for::<K>(1)
    };
    const VW: usize = {
        assert!(
            align_of::<V>() <= words::MAX_ALIGN,
            "hash map values must have alignment at most 8 (they are stored 8-byte aligned)"
        );
        words::words_for::<V>(1)
    };
    const KEY: usize = 1;
    const VAL: usize = 1 + Self::KW;
    const NODE: Shape = {
        assert!(size_of::<K>() > 0, "zero-sized keys are not supported");
        assert!(
            size_of::<V>() > 0,
            "zero-sized values are not supported (use u8)"
        );
        let s = Shape::new(1 + Self::KW + Self::VW);
        assert!(
            s.valid(),
            "hash map key and value exceed the 16 KiB node limit (2048 words)"
        );
        s
    };
    const SIG: u64 = size_of::<K>() as u64 | (size_of::<V>() as u64) << 32;
    /// Bytes of a node object (payload: next pointer, key and value, each padded to
    /// words; 80 for 8-byte keys and 64-byte values).
    pub const NODE_BYTES: usize = Self::NODE.size * 8;
    /// Most buckets a map can have (what its bucket directory holds).
    pub const MAX_BUCKETS: usize = MAX_BUCKETS;

    /// Create an empty map with `buckets` chains (1 ..= [`Self::MAX_BUCKETS`]) that it
    /// keeps for its whole life: it never grows, so chains lengthen as it fills (the
    /// paper's benchmark uses 10 000 buckets for 100 000 keys, 10 entries per chain).
    ///
    /// Choose it to reproduce that benchmark, or when the entry count is known and no
    /// insert may ever write the header (a growing map's split writes it, so two splits
    /// conflict). Otherwise choose [`HashMap::new`] or [`HashMap::with_capacity`]: they
    /// grow, keep chains short, and use the grouped layout for small entries.
    pub fn fixed<'h>(tx: &mut impl TxAccess<'h>, buckets: usize) -> Result<Self> {
        Self::create_with(tx.tx_mut(), buckets, false)
    }

    /// The former name of [`HashMap::fixed`].
    #[deprecated(
        note = "use `HashMap::fixed` (a fixed bucket count) or `HashMap::with_capacity` (grows)"
    )]
    pub fn create<'h>(tx: &mut impl TxAccess<'h>, buckets: usize) -> Result<Self> {
        Self::fixed(tx, buckets)
    }

    /// A growable map (as [`HashMap::new`]) sized for `capacity` entries: it fills to
    /// them at below its usual load, so with few splits on the way (the split test is
    /// a local estimate, and a chain or chunk that happens to fill early still splits:
    /// a few percent of the groups of a grouped map). As std's
    /// `HashMap::with_capacity`, a size to start from, never a limit: it grows past it.
    ///
    /// ```
    /// # use pisces::{Config, HashMap, Pool};
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let pool = Pool::create(dir.path().join("c.pool"), Config::default().size(32 << 20)).unwrap();
    /// let m = pool.run(|tx| HashMap::<u64, u64>::with_capacity(tx, 1000)).unwrap();
    /// let before = pool.run(|tx| m.buckets(tx)).unwrap();
    /// pool.run(|tx| { for k in 0..1000 { m.insert(tx, k, k)?; } Ok(()) }).unwrap();
    /// let after = pool.run(|tx| m.buckets(tx)).unwrap();
    /// assert!(after < before + before / 10, "{before} -> {after}"); // few splits on the way
    /// assert_eq!(pool.run(|tx| m.len(tx)).unwrap(), 1000);
    /// ```
    pub fn with_capacity<'h>(tx: &mut impl TxAccess<'h>, capacity: usize) -> Result<Self> {
        // A bucket count at which `capacity` entries stay clear of the split test's
        // threshold: a chained map splits when a chunk's 32 buckets estimate more than
        // `MAX_LOAD` entries per bucket, so at half that load a chunk splits only when
        // it holds twice its share; a grouped map splits when one chain estimates above
        // 5 per group, so at 2 per group only chains that hold three times their share.
        let buckets = if Self::SMALL {
            capacity.div_ceil(2)
        } else {
            (capacity as u128 * 2 * MAX_LOAD.1 as u128).div_ceil(MAX_LOAD.0 as u128) as usize
        };
        let tx = tx.tx_mut();
        if buckets == 0 {
            return Self::create_with(tx, Self::initial_buckets(), true);
        }
        Self::create_with(tx, buckets.min(MAX_BUCKETS), true)
    }

    /// The buckets (groups) of a map made by [`HashMap::new`].
    const fn initial_buckets() -> usize {
        if Self::SMALL {
            INITIAL_GROUPS
        } else {
            CHUNK
        }
    }

    /// Create an empty map that grows as it fills (no bucket count to choose): an insert
    /// that finds the map above its load limit splits a bucket in the same
    /// transaction, so there is no pause to rehash the whole map.
    ///
    /// ```
    /// # use pisces::{Config, HashMap, Pool};
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let pool = Pool::create(dir.path().join("g.pool"), Config::default().size(32 << 20)).unwrap();
    /// let m = pool.run(|tx| HashMap::<u64, u64>::new(tx)).unwrap();
    /// pool.run(|tx| { for k in 0..1000 { m.insert(tx, k, k)?; } Ok(()) }).unwrap();
    /// assert!(pool.run(|tx| m.buckets(tx)).unwrap() >= 1000 / 7); // groups of 7 slots
    /// assert_eq!(pool.run(|tx| m.get(tx, &999)).unwrap(), Some(999));
    /// ```
    pub fn new<'h>(tx: &mut impl TxAccess<'h>) -> Result<Self> {
        Self::create_with(tx.tx_mut(), Self::initial_buckets(), true)
    }

    /// A growable map (as [`HashMap::new`]) starting with `buckets` buckets: a hint
    /// that saves the splits while it fills, never a limit.
    pub fn with_buckets<'h>(tx: &mut impl TxAccess<'h>, buckets: usize) -> Result<Self> {
        Self::create_with(tx.tx_mut(), buckets, true)
    }

    fn create_with(tx: &mut Tx<'_>, buckets: usize, growable: bool) -> Result<Self> {
        let _ = Self::NODE;
        if buckets == 0 || buckets > MAX_BUCKETS {
            return Err(Error::invalid_config(format!(
                "a hash map needs 1 ..= {MAX_BUCKETS} buckets, not {buckets}"
            )));
        }
        // A grouped map's directory entries are its groups (a hint above the most
        // groups is taken as the most); a chained map's are chunks of 32 buckets.
        let grouped = growable && Self::SMALL;
        let (buckets, chunks) = if grouped {
            let groups = buckets.min(MAX_GROUPS);
            (groups, groups)
        } else {
            (buckets, buckets.div_ceil(CHUNK))
        };
        let mut hdr: Header = [0; HDR_WORDS];
        hdr[H_MAGIC] = MAGIC;
        hdr[H_SIG] = Self::SIG;
        hdr[H_VALUES] = crate::containers::value_kind::value_kind::<V>();
        hdr[H_BUCKETS] = buckets as u64;
        hdr[H_CHUNKS] = chunks as u64;
        hdr[H_GROW] = match (growable, grouped) {
            (_, true) => GROUPED,
            (true, false) => GROWABLE,
            (false, _) => 0,
        };
        let new_chunk = |tx: &mut Tx<'_>| -> Result<u64> {
            Ok(if grouped {
                words::alloc(tx, Self::GROUP, |_| Ok(()))?
            } else if growable {
                tx.alloc_zeroed::<CountedChunk>()?.offset()
            } else {
                tx.alloc_zeroed::<Chunk>()?.offset()
            })
        };
        if chunks <= DIR {
            hdr[H_LEVELS] = 1;
            for e in &mut hdr[H_DIR..H_DIR + chunks] {
                *e = new_chunk(tx)?;
            }
        } else {
            hdr[H_LEVELS] = 2;
            for (p, e) in hdr[H_DIR..H_DIR + chunks.div_ceil(PAGE)]
                .iter_mut()
                .enumerate()
            {
                let mut page: Page = [0; PAGE];
                let n = (chunks - p * PAGE).min(PAGE);
                for c in &mut page[..n] {
                    *c = new_chunk(tx)?;
                }
                *e = tx.alloc(page)?.offset();
            }
        }
        hdr[H_COUNT] = count::create(tx)?;
        Ok(HashMap {
            header: tx.alloc(hdr)?,
            _kv: PhantomData,
        })
    }

    /// The header, validated against this handle's types. Small enough to inline into
    /// every operation: the messages of its failures are built out of line.
    #[inline(always)]
    fn header<'t>(&self, tx: &'t Tx<'_>) -> Result<&'t Header> {
        Ok(self.header_layout(tx)?.0)
    }

    /// The header and its layout as a lookup needs them (`get_ref`): every word a
    /// lookup uses is checked (magic, signature, layout, the bucket count and the
    /// directory's levels against it), the chunk count (`H_CHUNKS`), which a lookup
    /// never reads, is not. Updates, iteration and `check` (and `check --deep`, which
    /// runs it) still refuse a header whose chunk count disagrees. (The bucket count
    /// and levels bound every directory index a lookup computes: `chunk_of`'s indexing
    /// stays inside the header and its pages.)
    ///
    /// The same conditions as [`HashMap::header_layout`]'s (but the chunk count), in
    /// the order a lookup of a small grouped map tests them cheapest: a grouped header
    /// with one level is valid exactly when `1 <= groups <= DIR` (one level is what
    /// that many groups have), and the answer says so ([`Lookup::GroupedInHeader`]),
    /// so that the lookup does not test the levels again; two levels need
    /// `DIR < groups <= MAX_GROUPS`.
    #[inline(always)]
    fn lookup_header<'t>(&self, tx: &'t Tx<'_>) -> Result<(&'t Header, Lookup)> {
        let h = self.read_header(tx)?;
        if h[H_MAGIC] != MAGIC || h[H_SIG] != Self::SIG {
            return Err(self.bad_header(h));
        }
        let (b, l, layout) = (h[H_BUCKETS], h[H_LEVELS], h[H_GROW]);
        if Self::SMALL && layout == GROUPED {
            // (`b - 1 < DIR`, wrapping: `1 <= b <= DIR` in one compare.)
            if l == 1 && b.wrapping_sub(1) < DIR as u64 {
                return Ok((h, Lookup::GroupedInHeader));
            }
            if l == 2 && b.wrapping_sub(DIR as u64 + 1) < (MAX_GROUPS - DIR) as u64 {
                return Ok((h, Lookup::GroupedPaged));
            }
            return Err(self.bad_header(h));
        }
        if layout != 0 && layout != GROWABLE {
            return Err(self.unknown_layout(h));
        }
        let chunks = b.div_ceil(CHUNK as u64);
        let levels = if chunks <= DIR as u64 { 1 } else { 2 };
        if b.wrapping_sub(1) < MAX_BUCKETS as u64 && l == levels {
            return Ok((h, Lookup::Chained));
        }
        Err(self.bad_header(h))
    }

    /// [`HashMap::header`] and whether the map is in the grouped layout. The grouped
    /// layout is tested first: it is every growable map of small entries, the maps
    /// whose lookups are cheapest and so feel these checks most.
    #[inline(always)]
    fn header_layout<'t>(&self, tx: &'t Tx<'_>) -> Result<(&'t Header, bool)> {
        let h = self.read_header(tx)?;
        if h[H_MAGIC] != MAGIC || h[H_SIG] != Self::SIG {
            return Err(self.bad_header(h));
        }
        let (b, l, c, layout) = (h[H_BUCKETS], h[H_LEVELS], h[H_CHUNKS], h[H_GROW]);
        // The levels the directory of `chunks` chunks has.
        let levels_for = |chunks: u64| if chunks <= DIR as u64 { 1 } else { 2 };
        // Each layout returns from its own branch, with its flag a constant the inlined
        // caller can test with this branch. (`b - 1 < max`, wrapping: `1 <= b <= max`
        // in one compare.) The levels are checked against the chunks the bucket count
        // implies, which are the ones an access indexes; the chunk count word must
        // equal them too.
        if Self::SMALL && layout == GROUPED {
            if b.wrapping_sub(1) < MAX_GROUPS as u64 && l == levels_for(b) && c == b {
                return Ok((h, true));
            }
        } else if layout == 0 || layout == GROWABLE {
            let chunks = b.div_ceil(CHUNK as u64);
            if b.wrapping_sub(1) < MAX_BUCKETS as u64 && l == levels_for(chunks) && c == chunks {
                return Ok((h, false));
            }
        } else {
            return Err(self.unknown_layout(h));
        }
        Err(self.bad_header(h))
    }

    /// The header object, not yet checked. The null handle is not tested before the
    /// read: offset 0 is no object of any pool, so its read fails as any forged
    /// offset's does (and never through the found-blocks table, whose empty entries
    /// match no read), and only then is the error said to be the null handle's.
    #[inline(always)]
    fn read_header<'t>(&self, tx: &'t Tx<'_>) -> Result<&'t Header> {
        match tx.read_again(self.header) {
            Ok(h) => Ok(h),
            Err(e) => Err(self.unreadable_header(e)),
        }
    }

    /// The error of a header read that failed with `e`.
    #[cold]
    #[inline(never)]
    fn unreadable_header(&self, e: Error) -> Error {
        if self.header.is_null() {
            return Error::invalid_pointer("null hash map handle");
        }
        e
    }

    /// The error for a header of a layout version this build does not know.
    #[cold]
    #[inline(never)]
    fn unknown_layout(&self, h: &Header) -> Error {
        if h[H_GROW] == GROUPED {
            return Error::corrupt(format!(
                "hash map at {:#x}: the grouped layout with {}-byte keys and {}-byte values (it holds entries of at most {} words)",
                self.header.offset(),
                size_of::<K>(),
                size_of::<V>(),
                MAX_SLOT_WORDS
            ));
        }
        Error::corrupt(format!(
            "hash map at {:#x}: unknown layout version {:#x} (written by a newer Pisces, or damaged)",
            self.header.offset(),
            h[H_GROW]
        ))
    }

    /// Why header `h` is not a valid one of a map of this handle's types.
    #[cold]
    #[inline(never)]
    fn bad_header(&self, h: &Header) -> Error {
        if h[H_MAGIC] == MAGIC && h[H_SIG] == Self::SIG {
            return Error::corrupt(format!(
                "hash map at {:#x}: bad geometry",
                self.header.offset()
            ));
        }
        if h[H_MAGIC] != MAGIC {
            return Error::invalid_pointer(format!(
                "{:#x} is not a hash map",
                self.header.offset()
            ));
        }
        Error::invalid_pointer(format!(
            "hash map at {:#x} was created for other key/value types ({} and {} bytes, not {} and {})",
            self.header.offset(),
            h[H_SIG] & 0xffff_ffff,
            h[H_SIG] >> 32,
            size_of::<K>(),
            size_of::<V>()
        ))
    }

    /// True if the map is in the grouped layout (validates the header).
    #[inline]
    fn is_grouped(&self, tx: &Tx<'_>) -> Result<bool> {
        Ok(self.header_layout(tx)?.1)
    }

    /// Offset of chunk `c` (validated `< chunks`; a grouped map's group `c`). The
    /// header's checks keep the directory index inside the header; were it not, the
    /// answer is an error, not a panic (and `get` costs no more than indexing here).
    #[inline(always)]
    fn chunk_of(tx: &Tx<'_>, h: &Header, c: usize) -> Result<u64> {
        let off = if h[H_LEVELS] == 1 {
            Self::dir_entry(h, c)?
        } else {
            // Through the found-blocks table, as the header: a map has at most 504
            // pages, each read by every lookup of its chunks.
            let page: &Page = tx.read_again(PPtr::from_offset(Self::dir_entry(h, c / PAGE)?))?;
            page[c % PAGE]
        };
        Ok(off)
    }

    /// Entry `i` of the header's directory (a chunk, a group, or a directory page, by
    /// the levels), or an error for an index outside the header.
    #[inline(always)]
    fn dir_entry(h: &Header, i: usize) -> Result<u64> {
        match h.get(H_DIR + i) {
            Some(&w) => Ok(w),
            None => Err(directory_outside_header()),
        }
    }

    /// `k`'s bucket under the header's geometry.
    #[inline]
    fn bucket_index(h: &Header, k: &K) -> u64 {
        bucket_in(
            stable_hash(bytemuck::bytes_of(k)),
            h[H_BUCKETS],
            h[H_GROW] == GROWABLE,
        )
    }

    #[inline]
    fn key(w: &[u64]) -> Result<&K> {
        words::elem(w, Self::KEY)
    }

    #[inline]
    fn val(w: &[u64]) -> Result<&V> {
        words::elem(w, Self::VAL)
    }

    /// Find `k`'s node and the link to it (reads only; `h`: the validated header).
    fn find(tx: &Tx<'_>, h: &Header, k: &K) -> Result<Found> {
        let bucket = Self::bucket_index(h, k);
        let (chunk, slot) = (
            Self::chunk_of(tx, h, bucket as usize / CHUNK)?,
            bucket as usize % CHUNK,
        );
        let mut found = Found {
            link: Link::Head { chunk, slot },
            node: 0,
            buckets: h[H_BUCKETS],
            bucket,
            chunk,
        };
        let mut cur = tx.read(PPtr::<Chunk>::from_offset(chunk))?[slot];
        let mut walk = Walk::new(CHAIN, cur);
        while cur != 0 {
            let w = words::read(tx, cur, Self::NODE)?;
            if Self::key(w)? == k {
                found.node = cur;
                return Ok(found);
            }
            found.link = Link::Next(cur);
            cur = w[0];
            if cur != 0 {
                walk.step(cur)?;
            }
        }
        Ok(found)
    }

    /// Point `link` at `to` (writes, and so locks, the object holding the link).
    fn set_link(tx: &mut Tx<'_>, link: Link, to: u64) -> Result<()> {
        match link {
            Link::Head { chunk, slot } => {
                tx.write(PPtr::<Chunk>::from_offset(chunk))?[slot] = to;
            }
            Link::Next(node) => words::write(tx, node, Self::NODE)?[0] = to,
        }
        Ok(())
    }

    /// A growable map: add `delta` to the entry count of the chunk of `f`'s key (an
    /// insert or remove of it in this transaction), then split one bucket if the count
    /// says the map is over its load. Fixed maps keep no counts (`growable` false).
    fn count(&self, tx: &mut Tx<'_>, growable: bool, f: &Found, delta: i64) -> Result<()> {
        if !growable {
            return Ok(());
        }
        let (n, b, chunk) = (f.buckets, f.bucket, f.chunk);
        let cw = tx.write(PPtr::<CountedChunk>::from_offset(chunk))?;
        let Some(count) = cw[CHUNK].checked_add_signed(delta) else {
            return Err(self.corrupt(format!(
                "chunk at {chunk:#x} counts fewer entries than it holds"
            )));
        };
        cw[CHUNK] = count;
        if delta > 0 {
            // Up to `SPLITS_PER_INSERT` splits while the estimate stays above the load
            // (one per insert could not keep a map below one entry per bucket).
            for n in n..n + SPLITS_PER_INSERT {
                let c = b / CHUNK as u64;
                let (lo, hi) = (c * CHUNK as u64, (c + 1) * CHUNK as u64);
                if n >= MAX_BUCKETS as u64 || !overloaded(n, lo, hi, count, MAX_LOAD) {
                    break;
                }
                self.split(tx)?;
            }
        }
        Ok(())
    }

    #[cold]
    fn corrupt(&self, m: String) -> Error {
        Error::corrupt(format!("hash map at {:#x}: {m}", self.offset()))
    }

    /// Linear hashing's step: split bucket `s = n - m` into `s` and the new bucket `n`
    /// (the keys whose hash has bit `m` set move), in the running transaction.
    ///
    /// Snapshot isolation: the split writes the header (so two splits conflict), both
    /// chunks, and *every* node of the old chain, even those whose link does not change.
    /// Any concurrent transaction that changes bucket `s` from an older snapshot writes
    /// one of those (an insert the tail node or the head, a remove the predecessor and
    /// the node, an update the node), so it conflicts with the split instead of adding a
    /// key to the wrong bucket or unlinking from a chain that no longer exists.
    fn split(&self, tx: &mut Tx<'_>) -> Result<()> {
        let (n, levels, chunks, src) = {
            let h = self.header(tx)?;
            let n = h[H_BUCKETS];
            let m = 1u64 << (63 - n.leading_zeros());
            let s = n - m;
            (
                n,
                h[H_LEVELS],
                h[H_CHUNKS],
                (s, Self::chunk_of(tx, h, s as usize / CHUNK)?),
            )
        };
        let m = 1u64 << (63 - n.leading_zeros());
        let (s, src_chunk) = src;
        // The old chain, in order, and where each node goes.
        let mut chain: Vec<(u64, bool)> = Vec::new();
        {
            let mut cur = tx.read(PPtr::<Chunk>::from_offset(src_chunk))?[s as usize % CHUNK];
            let mut walk = Walk::new(CHAIN, cur);
            while cur != 0 {
                let w = words::read(tx, cur, Self::NODE)?;
                let hash = stable_hash(bytemuck::bytes_of(Self::key(w)?));
                if hash & (m - 1) != s {
                    return Err(self.corrupt(format!(
                        "the node at {cur:#x} is in bucket {s}, but its key hashes to another bucket"
                    )));
                }
                chain.push((cur, hash & m != 0));
                cur = w[0];
                if cur != 0 {
                    walk.step(cur)?;
                }
            }
        }
        // The new bucket's chunk: a new one every 32 buckets.
        let dst_chunk = if n % CHUNK as u64 == 0 {
            debug_assert_eq!(n / CHUNK as u64, chunks);
            let c = tx.alloc_zeroed::<CountedChunk>()?.offset();
            self.add_chunk(tx, levels, chunks as usize, c)?;
            c
        } else {
            let h = self.header(tx)?;
            Self::chunk_of(tx, h, n as usize / CHUNK)?
        };
        let moved = chain.iter().filter(|e| e.1).count() as u64;
        let first = |go: bool| chain.iter().find(|e| e.1 == go).map_or(0, |e| e.0);
        {
            let c = tx.write(PPtr::<CountedChunk>::from_offset(src_chunk))?;
            c[s as usize % CHUNK] = first(false);
            c[CHUNK] = c[CHUNK].checked_sub(moved).ok_or_else(|| {
                self.corrupt(format!(
                    "chunk at {src_chunk:#x} counts fewer entries than it holds"
                ))
            })?;
        }
        {
            let c = tx.write(PPtr::<CountedChunk>::from_offset(dst_chunk))?;
            c[n as usize % CHUNK] = first(true);
            c[CHUNK] += moved;
        }
        for (i, &(node, go)) in chain.iter().enumerate() {
            let next = chain[i + 1..].iter().find(|e| e.1 == go).map_or(0, |e| e.0);
            words::write(tx, node, Self::NODE)?[0] = next;
        }
        let h = tx.write(self.header)?;
        h[H_BUCKETS] = n + 1;
        h[H_CHUNKS] = (n + 1).div_ceil(CHUNK as u64);
        Ok(())
    }

    /// Enter new chunk `c` (number `chunks`, the first past the current ones) in the
    /// directory: in the header while it holds at most `DIR` chunks; the step to
    /// `DIR + 1` moves the directory into page 0 (levels 1 → 2); after that a page is
    /// written, or a new page added every `PAGE` chunks.
    fn add_chunk(&self, tx: &mut Tx<'_>, levels: u64, chunks: usize, c: u64) -> Result<()> {
        if levels == 1 && chunks < DIR {
            tx.write(self.header)?[H_DIR + chunks] = c;
        } else if levels == 1 {
            let mut page: Page = [0; PAGE];
            {
                let h = self.header(tx)?;
                page[..DIR].copy_from_slice(&h[H_DIR..]);
            }
            page[DIR] = c;
            let p = tx.alloc(page)?.offset();
            let h = tx.write(self.header)?;
            h[H_DIR..].fill(0);
            h[H_DIR] = p;
            h[H_LEVELS] = 2;
        } else if chunks.is_multiple_of(PAGE) {
            let mut page: Page = [0; PAGE];
            page[0] = c;
            let p = tx.alloc(page)?.offset();
            tx.write(self.header)?[H_DIR + chunks / PAGE] = p;
        } else {
            let p = self.header(tx)?[H_DIR + chunks / PAGE];
            tx.write(PPtr::<Page>::from_offset(p))?[chunks % PAGE] = c;
        }
        Ok(())
    }

    /// A reference to `k`'s value in this transaction's snapshot, without copying it.
    /// (Inline: a lookup is small next to a call's register saves and its result
    /// passed through memory, and inlined the reads' fast path shares registers.)
    #[inline]
    pub fn get_ref<'t>(&self, tx: &'t Tx<'_>, k: &K) -> Result<Option<&'t V>> {
        let (h, kind) = self.lookup_header(tx)?;
        let hash = stable_hash(bytemuck::bytes_of(k));
        match kind {
            Lookup::GroupedInHeader => return Self::grouped_get::<true>(tx, h, hash, k),
            Lookup::GroupedPaged => return Self::grouped_get::<false>(tx, h, hash, k),
            Lookup::Chained => {}
        }
        let b = bucket_in(hash, h[H_BUCKETS], h[H_GROW] == GROWABLE) as usize;
        let slot = b % CHUNK;
        let mut cur = if h[H_LEVELS] == 1 {
            let chunk = Self::dir_entry(h, b / CHUNK)?;
            tx.read_again(PPtr::<Chunk>::from_offset(chunk))?[slot]
        } else {
            tx.read(PPtr::<Chunk>::from_offset(Self::chunk_of(
                tx,
                h,
                b / CHUNK,
            )?))?[slot]
        };
        let mut walk = Walk::new(CHAIN, cur);
        while cur != 0 {
            let w = words::read(tx, cur, Self::NODE)?;
            if Self::key(w)? == k {
                return Self::val(w).map(Some);
            }
            cur = w[0];
            if cur != 0 {
                walk.step(cur)?;
            }
        }
        Ok(None)
    }

    /// `k`'s value in this transaction's snapshot.
    pub fn get(&self, tx: &Tx<'_>, k: &K) -> Result<Option<V>> {
        Ok(self.get_ref(tx, k)?.copied())
    }

    /// True if `k` is in the map.
    pub fn contains_key(&self, tx: &Tx<'_>, k: &K) -> Result<bool> {
        Ok(self.get_ref(tx, k)?.is_some())
    }

    /// `k`'s value, writable in place: the change commits with the transaction. Writes
    /// (locks) only `k`'s node.
    pub fn get_mut<'t, 'h: 't>(
        &self,
        tx: &'t mut impl TxAccess<'h>,
        k: &K,
    ) -> Result<Option<&'t mut V>> {
        let tx = tx.tx_mut();
        let (h, grouped) = self.header_layout(tx)?;
        if grouped {
            let s = self.spot(tx, h, k)?;
            return self.grouped_get_mut(tx, s);
        }
        let node = Self::find(tx, h, k)?.node;
        if node == 0 {
            return Ok(None);
        }
        let w = words::write(tx, node, Self::NODE)?;
        words::elem_mut(w, Self::VAL).map(Some)
    }

    /// Insert or replace; returns the previous value of `k`.
    pub fn insert<'h>(&self, tx: &mut impl TxAccess<'h>, k: K, v: V) -> Result<Option<V>> {
        let tx = tx.tx_mut();
        let (h, grouped) = self.header_layout(tx)?;
        let counts = h[H_COUNT];
        if grouped {
            let s = self.spot(tx, h, &k)?;
            let old = self.grouped_insert(tx, s, k, v)?;
            if old.is_none() {
                Self::add_count(tx, counts, 1)?;
            }
            return Ok(old);
        }
        let f = Self::find(tx, h, &k)?;
        if f.node != 0 {
            let w = words::write(tx, f.node, Self::NODE)?;
            let slot: &mut V = words::elem_mut(w, Self::VAL)?;
            return Ok(Some(std::mem::replace(slot, v)));
        }
        self.chained_insert_new(tx, h[H_GROW] == GROWABLE, counts, &f, k, v)?;
        Ok(None)
    }

    /// Insert absent `k` where `f` (its search) says, into a chained map.
    fn chained_insert_new(
        &self,
        tx: &mut Tx<'_>,
        growable: bool,
        counts: u64,
        f: &Found,
        k: K,
        v: V,
    ) -> Result<u64> {
        let new = words::alloc(tx, Self::NODE, |w| {
            *words::elem_mut(w, Self::KEY)? = k;
            *words::elem_mut(w, Self::VAL)? = v;
            Ok(())
        })?;
        Self::set_link(tx, f.link, new)?;
        self.count(tx, growable, f, 1)?;
        Self::add_count(tx, counts, 1)?;
        Ok(new)
    }

    /// Add `delta` to the element count at `counts` (0: the map keeps none).
    #[inline]
    fn add_count(tx: &mut Tx<'_>, counts: u64, delta: i64) -> Result<()> {
        if counts != 0 {
            count::add(tx, counts, delta)?;
        }
        Ok(())
    }

    /// Remove `k`; returns its value. Frees the node.
    pub fn remove<'h>(&self, tx: &mut impl TxAccess<'h>, k: &K) -> Result<Option<V>> {
        let tx = tx.tx_mut();
        let (h, grouped) = self.header_layout(tx)?;
        let counts = h[H_COUNT];
        if grouped {
            let s = self.spot(tx, h, k)?;
            let old = self.grouped_remove(tx, s)?;
            if old.is_some() {
                Self::add_count(tx, counts, -1)?;
            }
            return Ok(old);
        }
        let growable = h[H_GROW] == GROWABLE;
        let f = Self::find(tx, h, k)?;
        let (link, node) = (f.link, f.node);
        if node == 0 {
            return Ok(None);
        }
        let (old, next) = {
            let w = words::read(tx, node, Self::NODE)?;
            (*Self::val(w)?, w[0])
        };
        Self::set_link(tx, link, next)?;
        // Lock the removed node too (§5.1): a concurrent update or unlink of it must
        // conflict with this transaction rather than be lost in a freed block.
        words::write(tx, node, Self::NODE)?;
        tx.free(PPtr::<u64>::from_offset(node))?;
        self.count(tx, growable, &f, -1)?;
        Self::add_count(tx, counts, -1)?;
        Ok(Some(old))
    }

    /// Key, value and next link of the node at `off` (for [`HashIter`]).
    pub(super) fn node<'t>(&self, tx: &'t Tx<'_>, off: u64) -> Result<(&'t K, &'t V, u64)> {
        let w = words::read(tx, off, Self::NODE)?;
        Ok((Self::key(w)?, Self::val(w)?, w[0]))
    }

    /// The first group of chain `c`, or `None` past the last chain, in a grouped map;
    /// `Err` if the map is not one (for [`HashIter`]).
    pub(super) fn chain_head(&self, tx: &Tx<'_>, c: u64) -> Result<Option<u64>> {
        let h = self.header(tx)?;
        if c >= h[H_BUCKETS] {
            return Ok(None);
        }
        Self::chunk_of(tx, h, c as usize).map(Some)
    }

    /// The bucket heads of chunk `c`, or `None` past the last chunk (for [`HashIter`]).
    pub(super) fn chunk_heads<'t>(&self, tx: &'t Tx<'_>, c: usize) -> Result<Option<&'t [u64]>> {
        let h = self.header(tx)?;
        if c >= h[H_CHUNKS] as usize {
            return Ok(None);
        }
        let chunk: &Chunk = tx.read(PPtr::from_offset(Self::chunk_of(tx, h, c)?))?;
        Ok(Some(&chunk[..]))
    }

    /// An iterator over every entry (bucket order, then chain order), borrowing keys and
    /// values from the transaction's snapshot. Each item is a `Result`: a damaged map
    /// (bad pointer, a chain that loops) yields one `Err` and ends.
    ///
    /// ```
    /// # use pisces::{Config, HashMap, Pool};
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let pool = Pool::create(dir.path().join("i.pool"), Config::default().size(32 << 20)).unwrap();
    /// let sum = pool.run(|tx| {
    ///     let m = HashMap::<u64, u64>::fixed(tx, 64)?;
    ///     for k in 1..=10 { m.insert(tx, k, k * k)?; }
    ///     let mut sum = 0;
    ///     for e in m.iter(tx) {
    ///         let (k, v) = e?;
    ///         sum += k + v;
    ///     }
    ///     Ok(sum)
    /// }).unwrap();
    /// assert_eq!(sum, 55 + 385);
    /// ```
    pub fn iter<'t, 'a>(&self, tx: &'t Tx<'a>) -> HashIter<'t, 'a, K, V> {
        HashIter::new(*self, tx)
    }

    /// Verify the map's invariants: the header, every chunk and node readable with the
    /// right shape, every key in the bucket its hash selects, no key twice in a chain,
    /// no node reached twice (a cycle, or two chains sharing nodes), no chunk shared,
    /// and the element count (if the map keeps one) equal to the entries. Returns [`Error::Corrupt`] describing the first violation. Reads only.
    pub fn check(&self, tx: &Tx<'_>) -> Result<MapStats> {
        let st = self.check_layout(tx)?;
        let counts = self.header(tx)?[H_COUNT];
        if counts != 0 {
            let counted = count::total(tx, counts)?;
            if counted != st.entries {
                return Err(self.corrupt(format!(
                    "the element count says {counted} entries, the buckets hold {}",
                    st.entries
                )));
            }
        }
        Ok(st)
    }

    /// [`HashMap::check`] without the element count.
    fn check_layout(&self, tx: &Tx<'_>) -> Result<MapStats> {
        let h = self.header(tx)?;
        if Self::SMALL && h[H_GROW] == GROUPED {
            return self.grouped_check(tx, h);
        }
        let buckets = h[H_BUCKETS];
        let growable = h[H_GROW] == GROWABLE;
        let bad = |m: String| Error::corrupt(format!("hash map at {:#x}: {m}", self.offset()));
        let mut st = MapStats {
            buckets: buckets as usize,
            ..MapStats::default()
        };
        let mut seen = std::collections::HashSet::new();
        for c in 0..h[H_CHUNKS] as usize {
            let off = Self::chunk_of(tx, h, c)?;
            if !seen.insert(off) {
                return Err(bad(format!("chunk {c} at {off:#x} is reached twice")));
            }
            let chunk: &Chunk = tx.read(PPtr::from_offset(off))?;
            let mut in_chunk = 0u64;
            for (slot, &head) in chunk.iter().enumerate() {
                let b = (c * CHUNK + slot) as u64;
                if b >= buckets {
                    if head != 0 {
                        return Err(bad(format!(
                            "bucket {b} past the last bucket holds a chain"
                        )));
                    }
                    continue;
                }
                let mut cur = head;
                let mut keys: Vec<&K> = Vec::new();
                while cur != 0 {
                    if !seen.insert(cur) {
                        return Err(bad(format!(
                            "the node at {cur:#x} (bucket {b}) is reached twice: the links form a cycle or join another chain"
                        )));
                    }
                    let w = words::read(tx, cur, Self::NODE)?;
                    let k = Self::key(w)?;
                    Self::val(w)?;
                    if bucket_in(stable_hash(bytemuck::bytes_of(k)), buckets, growable) != b {
                        return Err(bad(format!(
                            "the node at {cur:#x} is in bucket {b}, but its key hashes to another bucket"
                        )));
                    }
                    if keys.contains(&k) {
                        return Err(bad(format!(
                            "the key of the node at {cur:#x} appears twice in bucket {b}"
                        )));
                    }
                    keys.push(k);
                    cur = w[0];
                }
                st.entries += keys.len();
                in_chunk += keys.len() as u64;
                st.used_buckets += usize::from(!keys.is_empty());
                st.longest_chain = st.longest_chain.max(keys.len());
            }
            if growable {
                let counted = tx
                    .read(PPtr::<CountedChunk>::from_offset(off))
                    .map_err(|e| bad(format!("chunk {c} at {off:#x}: {e}")))?[CHUNK];
                if counted != in_chunk {
                    return Err(bad(format!(
                        "chunk {c} at {off:#x} counts {counted} entries but holds {in_chunk}"
                    )));
                }
            }
        }
        Ok(st)
    }

    /// Call `f` on every entry (bucket order, then chain order) until it returns false.
    pub fn for_each(&self, tx: &Tx<'_>, mut f: impl FnMut(&K, &V) -> bool) -> Result<()> {
        let h = self.header(tx)?;
        if Self::SMALL && h[H_GROW] == GROUPED {
            return self.grouped_for_each(tx, h, f);
        }
        for c in 0..h[H_CHUNKS] as usize {
            let chunk: &Chunk = tx.read(PPtr::from_offset(Self::chunk_of(tx, h, c)?))?;
            for &head in chunk {
                let mut cur = head;
                let mut walk = Walk::new(CHAIN, cur);
                while cur != 0 {
                    let w = words::read(tx, cur, Self::NODE)?;
                    if !f(Self::key(w)?, Self::val(w)?) {
                        return Ok(());
                    }
                    cur = w[0];
                    if cur != 0 {
                        walk.step(cur)?;
                    }
                }
            }
        }
        Ok(())
    }

    /// Number of entries. O(1) in the map's size: the sum of the striped count's 32
    /// stripes (two writers on different threads do not conflict on it); a map made
    /// before the count existed is counted by
    /// walking the table (O(buckets + len)).
    pub fn len(&self, tx: &Tx<'_>) -> Result<usize> {
        let counts = self.header(tx)?[H_COUNT];
        if counts != 0 {
            return count::total(tx, counts);
        }
        self.walk_len(tx)
    }

    /// The entries counted by walking the table.
    pub(crate) fn walk_len(&self, tx: &Tx<'_>) -> Result<usize> {
        let mut n = 0;
        self.for_each(tx, |_, _| {
            n += 1;
            true
        })?;
        Ok(n)
    }

    /// True if the map has no entries.
    pub fn is_empty(&self, tx: &Tx<'_>) -> Result<bool> {
        let mut empty = true;
        self.for_each(tx, |_, _| {
            empty = false;
            false
        })?;
        Ok(empty)
    }

    /// The number of buckets.
    pub fn buckets(&self, tx: &Tx<'_>) -> Result<usize> {
        Ok(self.header(tx)?[H_BUCKETS] as usize)
    }

    /// Call `f` with the offset of every persistent object the map owns (header,
    /// directory pages, chunks, nodes, then the element count's objects): for pool
    /// checkers and leak tests.
    pub fn for_each_object(&self, tx: &Tx<'_>, mut f: impl FnMut(u64)) -> Result<()> {
        self.for_each_table_object(tx, &mut f)?;
        let counts = self.header(tx)?[H_COUNT];
        if counts != 0 {
            count::for_each_object(tx, counts, f)?;
        }
        Ok(())
    }

    /// [`HashMap::for_each_object`] without the element count's objects: the header,
    /// directory pages, then chunks and nodes (or groups) in directory order.
    fn for_each_table_object(&self, tx: &Tx<'_>, mut f: impl FnMut(u64)) -> Result<()> {
        let h = self.header(tx)?;
        f(self.header.offset());
        if h[H_LEVELS] == 2 {
            for &p in &h[H_DIR..H_DIR + (h[H_CHUNKS] as usize).div_ceil(PAGE)] {
                f(p);
            }
        }
        if Self::SMALL && h[H_GROW] == GROUPED {
            return self.for_each_group(tx, h, |_, off, _| {
                f(off);
                Ok(true)
            });
        }
        for c in 0..h[H_CHUNKS] as usize {
            let off = Self::chunk_of(tx, h, c)?;
            f(off);
            for &head in tx.read(PPtr::<Chunk>::from_offset(off))? {
                let mut cur = head;
                let mut walk = Walk::new(CHAIN, cur);
                while cur != 0 {
                    f(cur);
                    cur = words::read(tx, cur, Self::NODE)?[0];
                    if cur != 0 {
                        walk.step(cur)?;
                    }
                }
            }
        }
        Ok(())
    }

    /// Free the whole map (every object [`for_each_object`](Self::for_each_object)
    /// lists). The handle and any copy of it must not be used afterwards. Such a use
    /// reads freed blocks: the header's magic word is cleared before it is freed, so it
    /// is usually an [`Error::InvalidPointer`], but an engine may drop writes to a block
    /// the same transaction frees (the freed map's entries are then read), and once the
    /// block is allocated again it holds whatever its new owner wrote.
    pub fn destroy<'h>(self, tx: &mut impl TxAccess<'h>) -> Result<()> {
        let tx = tx.tx_mut();
        let mut objs = Vec::new();
        self.for_each_object(tx, |o| objs.push(o))?;
        // Only the magic word: the rest of the header is not logged.
        *tx.write(PPtr::<u64>::from_offset(
            self.header.offset() + 8 * H_MAGIC as u64,
        ))? = 0;
        for o in objs {
            tx.free(PPtr::<u64>::from_offset(o))?;
        }
        Ok(())
    }
}

/// True if buckets `lo .. hi` holding `count` entries estimate the whole map of `n`
/// buckets above `load` entries per bucket (`load.0 / load.1`). Under linear hashing a
/// bucket that is split (below `s = n - m`, or at `m` and above) receives 1/(2m) of the
/// keys and one not yet split 1/m, so the buckets receive `(split + 2 unsplit) / 2m` of
/// them and the map holds about `count * 2m / (split + 2 unsplit)` entries.
///
/// The estimate is local (no counter shared by all writers) and noisy; buckets that
/// overestimate only trigger splits until `n` passes their estimate, so the table stays
/// within a small factor of the right size.
fn overloaded(n: u64, lo: u64, hi: u64, count: u64, load: (u64, u64)) -> bool {
    let m = 1u64 << (63 - n.leading_zeros());
    let s = n - m;
    let hi = hi.min(n);
    let split = (lo..hi).filter(|&b| b < s || b >= m).count() as u64;
    let unsplit = (hi - lo).saturating_sub(split);
    count as u128 * 2 * m as u128 * load.1 as u128
        > (n * load.0) as u128 * (split + 2 * unsplit) as u128
}

/// A grouped map's iteration state (for [`HashIter`]): the group being read and its
/// occupied slots not yet yielded.
struct GroupCursor<'t> {
    group: Option<&'t [u64]>,
    occupied: u64,
}

/// A key and value borrowed from a transaction's snapshot.
type KeyValue<'t, K, V> = (&'t K, &'t V);

impl<'t> GroupCursor<'t> {
    fn new() -> Self {
        GroupCursor {
            group: None,
            occupied: 0,
        }
    }

    /// Enter the group `w`.
    fn enter<K: Pod + Eq, V: Pod>(&mut self, w: &'t [u64]) {
        self.occupied = HashMap::<K, V>::occupied(w);
        self.group = Some(w);
    }

    /// The next entry of the current group, or `Ok(Err(next))` when it has none left
    /// (`next`: the chain's next group, 0 at its end or before the first group).
    fn next<K: Pod + Eq, V: Pod>(
        &mut self,
    ) -> Result<std::result::Result<KeyValue<'t, K, V>, u64>> {
        let Some(w) = self.group else {
            return Ok(Err(0));
        };
        if self.occupied == 0 {
            self.group = None;
            return Ok(Err(HashMap::<K, V>::next_group(w)));
        }
        let i = HashMap::<K, V>::lowest_slot(self.occupied);
        self.occupied &= self.occupied - 1;
        HashMap::<K, V>::slot(w, i).map(Ok)
    }
}

/// Entries of a [`HashMap`] in bucket order, then chain order (see
/// [`HashMap::iter`]).
///
/// ```
/// # use pisces::{Config, HashMap, Pool};
/// # let dir = tempfile::tempdir().unwrap();
/// # let pool = Pool::create(dir.path().join("d.pool"), Config::default().size(32 << 20)).unwrap();
/// pool.run(|tx| {
///     let m = HashMap::<u64, u64>::new(tx)?;
///     assert!(format!("{:?}", m.iter(tx)).starts_with("HashIter"));
///     Ok(())
/// }).unwrap();
/// ```
pub struct HashIter<'t, 'a, K, V> {
    map: HashMap<K, V>,
    tx: &'t Tx<'a>,
    /// Next chunk to read.
    chunk: usize,
    /// The current chunk's heads and the next slot in it.
    heads: Option<&'t [u64]>,
    slot: usize,
    /// Next node of the current chain (0: none).
    cur: u64,
    walk: Walk,
    done: bool,
    /// The map's layout (`None` until the first `next`) and, for a grouped map, the
    /// group being read (`chunk` is then the next chain).
    grouped: Option<bool>,
    cursor: GroupCursor<'t>,
}

impl<K, V> fmt::Debug for HashIter<'_, '_, K, V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HashIter")
            .field("map", &self.map)
            .field("chunk", &self.chunk)
            .field("done", &self.done)
            .finish_non_exhaustive()
    }
}

impl<'t, 'a, K: Pod + Eq, V: Pod> HashIter<'t, 'a, K, V> {
    pub(super) fn new(map: HashMap<K, V>, tx: &'t Tx<'a>) -> Self {
        HashIter {
            map,
            tx,
            chunk: 0,
            heads: None,
            slot: 0,
            cur: 0,
            walk: Walk::new("hash map chain", 0),
            done: false,
            grouped: None,
            cursor: GroupCursor::new(),
        }
    }

    fn fail(&mut self, e: Error) -> Option<Result<(&'t K, &'t V)>> {
        self.done = true;
        Some(Err(e))
    }

    /// `next` of a grouped map: the current group's entries, then the chain's next
    /// group, then the next chain.
    fn next_grouped(&mut self) -> Option<Result<(&'t K, &'t V)>> {
        loop {
            if self.done {
                return None;
            }
            let next = match self.cursor.next::<K, V>() {
                Ok(Ok(kv)) => return Some(Ok(kv)),
                Ok(Err(next)) => next,
                Err(e) => return self.fail(e),
            };
            let off = if next != 0 {
                if let Err(e) = self.walk.step(next) {
                    return self.fail(e);
                }
                next
            } else {
                match self.map.chain_head(self.tx, self.chunk as u64) {
                    Ok(Some(off)) => {
                        self.chunk += 1;
                        self.walk = Walk::new("hash map group chain", off);
                        off
                    }
                    Ok(None) => {
                        self.done = true;
                        return None;
                    }
                    Err(e) => return self.fail(e),
                }
            };
            match HashMap::<K, V>::group(self.tx, off) {
                Ok(w) => self.cursor.enter::<K, V>(w),
                Err(e) => return self.fail(e),
            }
        }
    }
}

impl<'t, 'a, K: Pod + Eq, V: Pod> Iterator for HashIter<'t, 'a, K, V> {
    type Item = Result<(&'t K, &'t V)>;

    fn next(&mut self) -> Option<Self::Item> {
        // Ended (at the last entry or after an error): checked before the layout,
        // which is unknown when the header failed validation and would be read again.
        if self.done {
            return None;
        }
        let grouped = match self.grouped {
            Some(g) => g,
            None => match self.map.is_grouped(self.tx) {
                Ok(g) => *self.grouped.insert(g),
                Err(e) => return self.fail(e),
            },
        };
        if grouped {
            return self.next_grouped();
        }
        loop {
            if self.done {
                return None;
            }
            if self.cur != 0 {
                let (k, v, next) = match self.map.node(self.tx, self.cur) {
                    Ok(x) => x,
                    Err(e) => return self.fail(e),
                };
                if next != 0 {
                    if let Err(e) = self.walk.step(next) {
                        return self.fail(e);
                    }
                }
                self.cur = next;
                return Some(Ok((k, v)));
            }
            match self.heads {
                Some(heads) if self.slot < heads.len() => {
                    let head = heads[self.slot];
                    self.slot += 1;
                    if head != 0 {
                        self.cur = head;
                        self.walk = Walk::new("hash map chain", head);
                    }
                }
                _ => match self.map.chunk_heads(self.tx, self.chunk) {
                    Ok(Some(heads)) => {
                        self.heads = Some(heads);
                        self.chunk += 1;
                        self.slot = 0;
                    }
                    Ok(None) => self.done = true,
                    Err(e) => return self.fail(e),
                },
            }
        }
    }
}
