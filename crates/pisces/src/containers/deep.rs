//! Walking the public containers of a pool without knowing their types: what
//! `pisces check --deep` runs (through [`crate::check::check_pool_deep`]).
//!
//! # How containers are recognised
//! Every word of the root object is a candidate handle. A word that is the payload
//! offset of an allocated heap block whose first word is a container magic
//! ([`hashmap::MAGIC`](super::hashmap::MAGIC), [`btree::MAGIC`](super::btree::MAGIC)) is
//! taken as a container; its signature word gives the key and value sizes (and the
//! tree's fanout), which fix every node's layout. Limits: containers reachable only
//! through other objects (a list of maps, a map stored as another map's value) are not
//! found, and a user object that happens to start with a magic word is walked as a
//! container (and probably reported as damaged).
//!
//! # What is checked (reading the recovered heap directly, never through an engine)
//! * hash map: the header geometry, every directory page and chunk, every chain: each
//!   node an allocated block of the node's size, each key in the bucket its hash
//!   selects, no node reached twice (a cycle or two chains joined), no chunk shared;
//! * B+-tree: the height bound, node kinds and counts, all leaves at the same depth,
//!   no node reached twice, the leaf chain visiting exactly the leaves in order; and,
//!   for trees whose header records the key order (integer and byte-array keys, see
//!   the tree's `ORDER_TAG`), key order: each node's keys strictly ascending, every
//!   key of a subtree inside the range its parent's separators give it, and the keys
//!   ascending along the leaf chain — what [`BTreeMap::check`](super::BTreeMap::check)
//!   verifies with the types. A tree whose header records no key order (made before
//!   the word existed, or keyed by a type whose order cannot be read from its bytes)
//!   is walked without it, and the report says its key order was not checked
//!   ([`DeepReport::unchecked`]): the verdict of such a check is "not checked", never OK.
//! * both: a container that keeps an element count (the `count` module; a hash map's
//!   header word 6, a tree's sixth header word when its order word has
//!   `ORDER_COUNTED`): the table and every stripe allocated blocks of their size, and
//!   the stripes' sum equal to the entries the walk found. Containers made before the
//!   count existed have none, and nothing is compared.
//!
//! * blocks owned by keys and values: a tree keyed by byte strings (its key-order word
//!   says so) has each key's and separator's block checked and compared by its bytes;
//!   a map or tree whose header records that its values are byte strings, strings or
//!   vectors (the hash map's header word 7, the byte above a tree's key-order code) has
//!   each value's block checked: a byte string's length word (tag, non-zero length,
//!   within its block), a string's UTF-8, a vector's header (tag, length within the
//!   capacity) and a buffer block holding the capacity; and no block owned twice.
//!   Values of other types that hold such handles among other fields (a `pod!`
//!   struct) are plain bytes to this walk.
//!
//! A root word that is the payload offset of a heap block which is not allocated is a
//! problem too: a dangling pointer, or a container whose header block was freed or lost
//! (everything it held is unreachable). Words that are no block's payload offset
//! (counters, flags) are not pointers and are left alone. That includes a word inside
//! a slab that holds no blocks at all (a free slab has no block geometry, so a
//! pointer into one cannot be told from a counter whose value lands there). A
//! container whose header's whole slab was freed or lost is therefore not reported
//! by this walk: a limit of the check, since it has no types to tell pointers from
//! values.
//!
//! Every walk is bounded: a node is visited at most once.

use super::btree::{
    INNER_TAG, LEAF_TAG, MAGIC as BTREE_MAGIC, ORDER_BYTES, ORDER_COUNTED, ORDER_SIGNED,
    ORDER_STRINGS, ORDER_TAG, ORDER_UNSIGNED, ORDER_UTF8,
};
use super::bytes::{BYTES_TAG, LEN_BITS};
use super::count;
use super::hash::linear_bucket;
use super::hash::{bucket_in, stable_hash};
use super::hashmap::{
    GROUPED, GROUP_SLOTS, H_COUNT, H_VALUES, MAGIC as HASH_MAGIC, MAX_SLOT_WORDS,
};
use super::value_kind::{VALUE_BYTES, VALUE_PLAIN, VALUE_STRING, VALUE_VEC};
use super::vec::{VEC_HEADER_WORDS, VEC_TAG};
use super::words::Shape;
use crate::heap::alloc::Allocator;
use crate::heap::Heap;
use std::cmp::Ordering;
use std::collections::HashSet;

/// What a deep walk found: one line per container, and the problems.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct DeepReport {
    /// One line per container found ("root word 2: hash map at 0x..: ...").
    pub containers: Vec<String>,
    /// Problems, each naming the container.
    pub problems: Vec<String>,
    /// What the walk could not verify, each naming the container (a tree's key order
    /// when its header does not record how keys compare).
    pub unchecked: Vec<String>,
}

/// Reads objects of the recovered heap, validated as allocated blocks.
struct Objects<'h> {
    heap: &'h Heap,
    alloc: &'h Allocator,
}

impl Objects<'_> {
    /// The first `words` words of the object at `off`, if it is an allocated block
    /// with at least that many payload bytes.
    fn words(&self, off: u64, words: usize) -> Result<Vec<u64>, String> {
        let b = self
            .alloc
            .block_at(off)
            .ok_or_else(|| format!("{off:#x} is not an object of this pool"))?;
        if !self.alloc.is_allocated(b) {
            return Err(format!("{off:#x} is a free block"));
        }
        if b.payload_len() < 8 * words {
            return Err(format!(
                "the object at {off:#x} has {} bytes, not {}",
                b.payload_len(),
                8 * words
            ));
        }
        let mut bytes = vec![0u8; 8 * words];
        self.heap.read_bytes(off as usize, &mut bytes);
        Ok(bytes
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
            .collect())
    }

    /// The first word of the object at `off`, if it is an allocated object.
    fn magic(&self, off: u64) -> Option<u64> {
        self.words(off, 1).ok().map(|w| w[0])
    }

    /// The bytes of the byte string at `off` (0: empty), its length word checked
    /// against its block; with `utf8`, checked to be UTF-8 too.
    fn string(&self, off: u64, utf8: bool) -> Result<Vec<u8>, String> {
        if off == 0 {
            return Ok(Vec::new());
        }
        let word = self
            .words(off, 1)
            .map_err(|e| format!("byte string: {e}"))?[0];
        let len = word & ((1 << LEN_BITS) - 1);
        if word >> LEN_BITS != BYTES_TAG || len == 0 {
            return Err(format!(
                "the byte string at {off:#x} has a damaged length word {word:#x}"
            ));
        }
        let b = self
            .alloc
            .block_at(off)
            .ok_or_else(|| format!("{off:#x} is not an object of this pool"))?;
        if (b.payload_len() as u64) < 8 + len {
            return Err(format!(
                "the byte string at {off:#x} says {len} bytes, but its block holds {}",
                b.payload_len()
            ));
        }
        let mut bytes = vec![0u8; 8 + len as usize];
        self.heap.read_bytes(off as usize, &mut bytes);
        bytes.drain(..8);
        if utf8 && std::str::from_utf8(&bytes).is_err() {
            return Err(format!("the string at {off:#x} is not UTF-8"));
        }
        Ok(bytes)
    }

    /// The blocks of the vector at `off` (header, buffer if any), checked: the tag, the
    /// length within the capacity, a buffer block of at least the capacity.
    fn vec(&self, off: u64) -> Result<Vec<u64>, String> {
        let w = self
            .words(off, VEC_HEADER_WORDS)
            .map_err(|e| format!("vector: {e}"))?;
        let (elem, len, cap, buf) = (w[0] & 0xffff_ffff, w[1], w[2], w[3]);
        if w[0] >> 48 != VEC_TAG || elem == 0 || len > cap || (cap == 0) != (buf == 0) {
            return Err(format!(
                "the vector at {off:#x} has a damaged header {:#x?}",
                &w[..]
            ));
        }
        if cap == 0 {
            return Ok(vec![off]);
        }
        let need = cap
            .checked_mul(elem)
            .ok_or_else(|| format!("the vector at {off:#x} has capacity {cap}"))?;
        let b = self
            .alloc
            .block_at(buf)
            .filter(|b| self.alloc.is_allocated(*b))
            .ok_or_else(|| {
                format!("the vector at {off:#x} has buffer {buf:#x}, not an allocated object")
            })?;
        if (b.payload_len() as u64) < need {
            return Err(format!(
                "the vector at {off:#x} holds {cap} elements of {elem} bytes, but its buffer has {} bytes",
                b.payload_len()
            ));
        }
        Ok(vec![off, buf])
    }

    /// Check the value handle `v` of a container whose values are of kind `kind`
    /// (`bytes::VALUE_*`); each block it owns must be owned once (`seen`). Returns the
    /// number of blocks.
    fn owned_value(&self, kind: u64, v: u64, seen: &mut HashSet<u64>) -> Result<usize, String> {
        let blocks = match kind {
            VALUE_PLAIN => return Ok(0),
            VALUE_BYTES | VALUE_STRING => {
                self.string(v, kind == VALUE_STRING)?;
                if v == 0 {
                    return Ok(0);
                }
                vec![v]
            }
            VALUE_VEC => self.vec(v)?,
            k => return Err(format!("unknown value kind {k}")),
        };
        for &b in &blocks {
            if !seen.insert(b) {
                return Err(format!("the block at {b:#x} is owned twice"));
            }
        }
        Ok(blocks.len())
    }
}

/// The value kind's name, for the summary lines.
fn value_kind_name(kind: u64) -> &'static str {
    match kind {
        VALUE_BYTES => ", byte string values",
        VALUE_STRING => ", string values",
        VALUE_VEC => ", vector values",
        _ => "",
    }
}

/// The value kind of a container whose values are `vs` bytes: a handle is one word.
fn checked_kind(kind: u64, vs: u64) -> Result<u64, String> {
    if kind != VALUE_PLAIN && vs != 8 {
        return Err(format!(
            "the header says the values are handles (kind {kind}), but they are {vs} bytes"
        ));
    }
    Ok(kind)
}

fn words_for(bytes: u64) -> usize {
    bytes.div_ceil(8) as usize
}

/// Walk every container whose handle is a word of the root object (`root`, `size`
/// bytes; 0 = no root). The heap must be the recovered state, not in use.
pub(crate) fn check_root_containers(
    heap: &Heap,
    alloc: &Allocator,
    root: u64,
    size: u64,
) -> DeepReport {
    let mut r = DeepReport::default();
    if root == 0 {
        return r;
    }
    let objs = Objects { heap, alloc };
    let root_words = match objs.words(root, (size / 8) as usize) {
        Ok(w) => w,
        Err(e) => {
            r.problems.push(format!("root object: {e}"));
            return r;
        }
    };
    for (i, &w) in root_words.iter().enumerate() {
        if w == 0 || w == root {
            continue;
        }
        let name = |kind: &str| format!("root word {i}: {kind} at {w:#x}");
        match objs.magic(w) {
            Some(HASH_MAGIC) => match hash_map(&objs, w) {
                Ok(line) => r.containers.push(format!("{}: {line}", name("hash map"))),
                Err(e) => {
                    r.containers.push(format!("{}: DAMAGED", name("hash map")));
                    r.problems.push(format!("{}: {e}", name("hash map")));
                }
            },
            Some(BTREE_MAGIC) => match btree(&objs, w) {
                Ok((line, ordered)) => {
                    r.containers.push(format!("{}: {line}", name("B+-tree")));
                    if !ordered {
                        r.unchecked.push(format!(
                            "{}: key order (the tree's header records no key order: a tree made by a build from before headers recorded it, or keys of a type whose order cannot be read from bytes; `BTreeMap::check` verifies it with the key type)",
                            name("B+-tree")
                        ));
                    }
                }
                Err(e) => {
                    r.containers.push(format!("{}: DAMAGED", name("B+-tree")));
                    r.problems.push(format!("{}: {e}", name("B+-tree")));
                }
            },
            Some(_) => {}
            None => {
                if let Some(b) = alloc.block_at(w) {
                    if !alloc.is_allocated(b) {
                        r.problems.push(format!(
                            "root word {i} points at {w:#x}, a free block: a dangling pointer, or a container whose header was lost"
                        ));
                    }
                }
            }
        }
    }
    r
}

const HDR_WORDS: usize = 512;
const H_DIR: usize = 8;
const DIR: u64 = (HDR_WORDS - H_DIR) as u64;
const PAGE: usize = 512;
const CHUNK: usize = 32;
/// Header word 5 of a growable map (see the hash map's module docs).
const GROWABLE: u64 = u64::from_le_bytes(*b"GROW.v1\0");

/// Walk the hash map whose header is at `at`, and compare its element count (if it
/// keeps one) with the entries found: its summary line.
fn hash_map(objs: &Objects<'_>, at: u64) -> Result<String, String> {
    let mut seen = HashSet::new();
    let (line, entries) = hash_map_entries(objs, at, &mut seen)?;
    let table = objs.words(at, HDR_WORDS)?[H_COUNT];
    if table != 0 {
        check_count(objs, table, entries, &mut seen)?;
    }
    Ok(line)
}

/// The sum of the striped element count whose table is at `table` (see the `count`
/// module) equals `entries`, and its objects are reached once.
fn check_count(
    objs: &Objects<'_>,
    table: u64,
    entries: usize,
    seen: &mut HashSet<u64>,
) -> Result<(), String> {
    let t = objs
        .words(table, count::STRIPES)
        .map_err(|e| format!("element count table: {e}"))?;
    if !seen.insert(table) {
        return Err(format!(
            "the element count table at {table:#x} is reached twice"
        ));
    }
    let mut sum = 0u64;
    for &s in &t {
        let w = objs
            .words(s, count::STRIPE_WORDS)
            .map_err(|e| format!("element count stripe: {e}"))?;
        if !seen.insert(s) {
            return Err(format!(
                "the element count stripe at {s:#x} is reached twice"
            ));
        }
        sum = sum.wrapping_add(w[0]);
    }
    if sum != entries as u64 {
        return Err(format!(
            "the element count says {} entries, the walk found {entries}",
            sum as i64
        ));
    }
    Ok(())
}

/// [`hash_map`]'s walk: its summary line and the entries it found.
fn hash_map_entries(
    objs: &Objects<'_>,
    at: u64,
    seen: &mut HashSet<u64>,
) -> Result<(String, usize), String> {
    let h = objs.words(at, HDR_WORDS)?;
    let (sig, buckets, levels, chunks) = (h[1], h[2], h[3], h[4]);
    let (ks, vs) = (sig & 0xffff_ffff, sig >> 32);
    let (growable, grouped) = match h[5] {
        0 => (false, false),
        GROWABLE => (true, false),
        GROUPED => (true, true),
        v => return Err(format!("unknown layout version {v:#x}")),
    };
    let per_entry = if grouped { 1 } else { CHUNK as u64 };
    if buckets == 0
        || buckets > DIR * PAGE as u64 * per_entry
        || chunks != buckets.div_ceil(per_entry)
        || levels != if chunks <= DIR { 1 } else { 2 }
    {
        return Err(format!(
            "bad geometry ({buckets} buckets, {chunks} directory entries, {levels} levels)"
        ));
    }
    let node = Shape::new(1 + words_for(ks) + words_for(vs));
    if ks == 0 || vs == 0 || !node.valid() {
        return Err(format!("bad signature: {ks}-byte keys, {vs}-byte values"));
    }
    let kind = checked_kind(h[H_VALUES], vs)?;
    let mut owned = 0usize;
    let mut pages = std::collections::HashMap::new();
    let mut entry = |seen: &mut HashSet<u64>, c: usize| -> Result<u64, String> {
        if levels == 1 {
            return Ok(h[H_DIR + c]);
        }
        let p = h[H_DIR + c / PAGE];
        if let std::collections::hash_map::Entry::Vacant(e) = pages.entry(p) {
            let page = objs
                .words(p, PAGE)
                .map_err(|e| format!("directory page {}: {e}", c / PAGE))?;
            if !seen.insert(p) {
                return Err(format!("directory page at {p:#x} is reached twice"));
            }
            e.insert(page);
        }
        Ok(pages[&p][c % PAGE])
    };
    if grouped {
        let heads = (0..chunks as usize)
            .map(|c| entry(seen, c))
            .collect::<Result<Vec<u64>, String>>()?;
        return grouped_map(objs, (ks, vs, kind), &heads, seen);
    }
    let (mut entries, mut longest) = (0usize, 0usize);
    for c in 0..chunks as usize {
        let off = entry(seen, c)?;
        let chunk = objs
            .words(off, CHUNK + usize::from(growable))
            .map_err(|e| format!("chunk {c}: {e}"))?;
        let mut in_chunk = 0u64;
        if !seen.insert(off) {
            return Err(format!("chunk {c} at {off:#x} is reached twice"));
        }
        for (slot, &head) in chunk[..CHUNK].iter().enumerate() {
            let b = (c * CHUNK + slot) as u64;
            let mut cur = head;
            let mut len = 0;
            while cur != 0 {
                if b >= buckets {
                    return Err(format!("bucket {b} past the last bucket holds a chain"));
                }
                if !seen.insert(cur) {
                    return Err(format!(
                        "bucket {b}: the node at {cur:#x} is reached twice (the links form a cycle or join another chain)"
                    ));
                }
                let w = objs
                    .words(cur, node.len)
                    .map_err(|e| format!("bucket {b}: node: {e}"))?;
                let key: Vec<u8> = w[1..1 + words_for(ks)]
                    .iter()
                    .flat_map(|x| x.to_le_bytes())
                    .take(ks as usize)
                    .collect();
                if bucket_in(stable_hash(&key), buckets, growable) != b {
                    return Err(format!(
                        "the node at {cur:#x} is in bucket {b}, but its key hashes to another bucket"
                    ));
                }
                owned += objs
                    .owned_value(kind, w[1 + words_for(ks)], seen)
                    .map_err(|e| format!("bucket {b}: the value of the node at {cur:#x}: {e}"))?;
                len += 1;
                cur = w[0];
            }
            entries += len;
            in_chunk += len as u64;
            longest = longest.max(len);
        }
        if growable && chunk[CHUNK] != in_chunk {
            return Err(format!(
                "chunk {c} counts {} entries but holds {in_chunk}",
                chunk[CHUNK]
            ));
        }
    }
    Ok((
        format!(
            "{entries} entries in {buckets} buckets (longest chain {longest}), {ks}-byte keys, {vs}-byte values{}{}",
            value_kind_name(kind),
            owned_blocks(owned)
        ),
        entries,
    ))
}

/// The chains of a hash map in the grouped layout (`heads`: each chain's first group,
/// in directory order): every group an allocated block of the group's size, reached
/// once, its tag bytes empty or tags, each occupied slot's key in the chain its hash
/// selects under the map's geometry and tagged with its hash's tag, no key twice in a
/// chain, no empty group after a chain's first.
fn grouped_map(
    objs: &Objects<'_>,
    (ks, vs, kind): (u64, u64, u64),
    heads: &[u64],
    seen: &mut HashSet<u64>,
) -> Result<(String, usize), String> {
    let (kw, sw) = (words_for(ks), words_for(ks) + words_for(vs));
    if sw > MAX_SLOT_WORDS {
        return Err(format!(
            "the grouped layout with {ks}-byte keys and {vs}-byte values (it holds entries of at most {MAX_SLOT_WORDS} words)"
        ));
    }
    let n = heads.len() as u64;
    let group_words = 2 + GROUP_SLOTS * sw;
    let (mut entries, mut longest, mut overflow, mut owned) = (0usize, 0usize, 0usize, 0usize);
    for (c, &head) in heads.iter().enumerate() {
        let mut keys: Vec<Vec<u8>> = Vec::new();
        let mut off = head;
        let mut first = true;
        while off != 0 {
            if !seen.insert(off) {
                return Err(format!(
                    "chain {c}: the group at {off:#x} is reached twice (the links form a cycle or join another chain)"
                ));
            }
            let w = objs
                .words(off, group_words)
                .map_err(|e| format!("chain {c}: group: {e}"))?;
            let tags = w[0];
            if !first && tags == 0 {
                return Err(format!(
                    "chain {c}: the group at {off:#x} is empty but not the chain's first"
                ));
            }
            overflow += usize::from(!first);
            for i in 0..8 {
                let t = (tags >> (8 * i)) & 0xff;
                if t == 0 {
                    continue;
                }
                if i >= GROUP_SLOTS || t & 0x80 == 0 {
                    return Err(format!(
                        "chain {c}: the group at {off:#x} has tag word {tags:#x}: a byte is neither empty nor a tag"
                    ));
                }
                let at = 2 + i * sw;
                let key: Vec<u8> = w[at..at + kw]
                    .iter()
                    .flat_map(|x| x.to_le_bytes())
                    .take(ks as usize)
                    .collect();
                let hash = stable_hash(&key);
                if linear_bucket(hash, n) != c as u64 {
                    return Err(format!(
                        "the key in slot {i} of the group at {off:#x} is in chain {c}, but hashes to another chain"
                    ));
                }
                if t != (hash >> 57) | 0x80 {
                    return Err(format!(
                        "slot {i} of the group at {off:#x} has a tag its key does not hash to"
                    ));
                }
                if keys.contains(&key) {
                    return Err(format!(
                        "the key in slot {i} of the group at {off:#x} appears twice in chain {c}"
                    ));
                }
                owned += objs.owned_value(kind, w[at + kw], seen).map_err(|e| {
                    format!("chain {c}: the value in slot {i} of the group at {off:#x}: {e}")
                })?;
                keys.push(key);
            }
            first = false;
            off = w[1];
        }
        entries += keys.len();
        longest = longest.max(keys.len());
    }
    Ok((
        format!(
            "{entries} entries in {n} groups of {GROUP_SLOTS} slots ({overflow} overflow groups, longest chain {longest} entries), {ks}-byte keys, {vs}-byte values{}{}",
            value_kind_name(kind),
            owned_blocks(owned)
        ),
        entries,
    ))
}

const MAX_HEIGHT: u64 = 64;

/// How keys of `len` bytes compare, from the tree's key-order word.
#[derive(Clone, Copy)]
enum KeyOrder {
    Unsigned,
    Signed,
    Bytes,
    /// Keys are handles of byte strings the tree owns (UTF-8 ones with `utf8`),
    /// compared by their bytes (the keys `key_at` gives are those bytes).
    Strings {
        utf8: bool,
    },
}

impl KeyOrder {
    fn from_word(w: u64) -> Option<KeyOrder> {
        if w & !0xffff & !ORDER_COUNTED != ORDER_TAG {
            return None;
        }
        match w & 0xff {
            ORDER_UNSIGNED => Some(KeyOrder::Unsigned),
            ORDER_SIGNED => Some(KeyOrder::Signed),
            ORDER_BYTES => Some(KeyOrder::Bytes),
            ORDER_STRINGS => Some(KeyOrder::Strings { utf8: false }),
            ORDER_UTF8 => Some(KeyOrder::Strings { utf8: true }),
            _ => None,
        }
    }

    /// What the values own, from the same word (0: plain, or no word).
    fn value_kind(w: u64) -> u64 {
        if w & !0xffff & !ORDER_COUNTED != ORDER_TAG {
            return VALUE_PLAIN;
        }
        (w >> 8) & 0xff
    }

    fn cmp(self, a: &[u8], b: &[u8]) -> Ordering {
        match self {
            KeyOrder::Bytes | KeyOrder::Strings { .. } => a.cmp(b),
            // Little-endian integers: compare from the most significant byte; a signed
            // one's top bit flipped makes two's complement order unsigned order.
            KeyOrder::Unsigned | KeyOrder::Signed => {
                let flip = |x: u8, i: usize| {
                    if matches!(self, KeyOrder::Signed) && i == a.len() - 1 {
                        x ^ 0x80
                    } else {
                        x
                    }
                };
                for i in (0..a.len()).rev() {
                    match flip(a[i], i).cmp(&flip(b[i], i)) {
                        Ordering::Equal => {}
                        o => return o,
                    }
                }
                Ordering::Equal
            }
        }
    }
}

/// The summary's count of blocks the values own.
fn owned_blocks(n: usize) -> String {
    if n == 0 {
        String::new()
    } else {
        format!(" ({n} byte string and vector blocks)")
    }
}

/// A bound on a subtree's keys (a separator's bytes), or none.
type KeyBound = Option<Vec<u8>>;

/// Key `j` of a node whose keys start at word `first` (`ks` bytes each).
fn key_at(w: &[u64], first: usize, ks: usize, j: usize) -> Vec<u8> {
    let bytes: Vec<u8> = w[first..].iter().flat_map(|x| x.to_le_bytes()).collect();
    bytes[j * ks..(j + 1) * ks].to_vec()
}

/// Walk the tree whose header is at `at`: its summary line, and whether key order was
/// verified (the header records a key order this walk can read).
fn btree(objs: &Objects<'_>, at: u64) -> Result<(String, bool), String> {
    let h = objs.words(at, 5).or_else(|_| objs.words(at, 4))?;
    let (sig, root, height) = (h[1], h[2], h[3]);
    let order = h.get(4).copied().and_then(KeyOrder::from_word);
    // A counted tree's header has a sixth word: the element count's table.
    let counts = match h.get(4) {
        Some(w) if w & ORDER_COUNTED != 0 => Some(objs.words(at, 6)?[5]),
        _ => None,
    };
    let kind = h.get(4).copied().map_or(VALUE_PLAIN, KeyOrder::value_kind);
    let (ks, vs, f) = (
        sig & 0xff_ffff,
        (sig >> 24) & 0xff_ffff,
        (sig >> 48) as usize,
    );
    if height > MAX_HEIGHT {
        return Err(format!("height {height}"));
    }
    if ks == 0 || vs == 0 || f < 3 {
        return Err(format!(
            "bad signature: {ks}-byte keys, {vs}-byte values, fanout {f}"
        ));
    }
    let kw = words_for(ks * (f as u64 - 1));
    let leaf = Shape::new(2 + kw + words_for(vs * (f as u64 - 1)));
    let inner = Shape::new(1 + kw + f);
    if !leaf.valid() || !inner.valid() {
        return Err(format!("nodes of fanout {f} exceed the node size limit"));
    }
    let i_kids = 1 + kw;
    let ksz = ks as usize;
    let kind = checked_kind(kind, vs)?;
    let strings = match order {
        Some(KeyOrder::Strings { utf8 }) if ks == 8 => Some(utf8),
        Some(KeyOrder::Strings { .. }) => {
            return Err(format!(
                "the header says the keys are byte strings, but they are {ks} bytes"
            ))
        }
        _ => None,
    };
    // Blocks owned by keys (byte string keys and separators) and values: each once.
    let owned_seen = std::cell::RefCell::new(HashSet::new());
    // Key `j` of a node as the bytes its order compares: a byte string key's bytes.
    let key = |w: &[u64], first: usize, j: usize| -> Result<Vec<u8>, String> {
        let k = key_at(w, first, ksz, j);
        let Some(utf8) = strings else { return Ok(k) };
        let off = u64::from_le_bytes(k[..8].try_into().expect("8-byte key"));
        if off != 0 && !owned_seen.borrow_mut().insert(off) {
            return Err(format!("the key block at {off:#x} is owned twice"));
        }
        objs.string(off, utf8).map_err(|e| format!("key: {e}"))
    };
    // Keys of a node strictly ascending and inside [lo, hi) (bounds from the parents).
    let in_order = |w: &[u64],
                    first: usize,
                    n: usize,
                    lo: &Option<Vec<u8>>,
                    hi: &Option<Vec<u8>>,
                    node: u64|
     -> Result<(), String> {
        let Some(ord) = order else { return Ok(()) };
        let mut prev: Option<Vec<u8>> = None;
        for j in 0..n {
            let k = key(w, first, j).map_err(|e| format!("the node at {node:#x}: {e}"))?;
            if prev
                .as_ref()
                .is_some_and(|p| ord.cmp(p, &k) != Ordering::Less)
            {
                return Err(format!(
                    "the keys of the node at {node:#x} are not in order (key {j})"
                ));
            }
            if lo
                .as_ref()
                .is_some_and(|l| ord.cmp(&k, l) == Ordering::Less)
                || hi
                    .as_ref()
                    .is_some_and(|h| ord.cmp(&k, h) != Ordering::Less)
            {
                return Err(format!(
                    "key {j} of the node at {node:#x} is outside the range its parent's separators give it"
                ));
            }
            prev = Some(k);
        }
        Ok(())
    };
    // A separator's bytes again (its block was counted by `in_order`).
    let separator = |w: &[u64], j: usize| -> Result<Vec<u8>, String> {
        let k = key_at(w, 1, ksz, j);
        match strings {
            None => Ok(k),
            Some(utf8) => objs.string(
                u64::from_le_bytes(k[..8].try_into().expect("8-byte key")),
                utf8,
            ),
        }
    };
    let mut stack: Vec<(u64, u64, KeyBound, KeyBound)> = vec![(root, height, None, None)];
    let mut seen = HashSet::new();
    let mut leaves = Vec::new();
    let (mut entries, mut inners) = (0usize, 0usize);
    while let Some((node, level, lo, hi)) = stack.pop() {
        if !seen.insert(node) {
            return Err(format!("the node at {node:#x} is reached twice"));
        }
        let shape = if level == 0 { leaf } else { inner };
        let w = objs
            .words(node, shape.len)
            .map_err(|e| format!("node at level {level}: {e}"))?;
        let (tag, n) = (w[0] >> 32, (w[0] & 0xffff_ffff) as usize);
        if level == 0 {
            if tag != LEAF_TAG || n > f - 1 {
                return Err(format!("the leaf at {node:#x} has header {:#x}", w[0]));
            }
            in_order(&w, 2, n, &lo, &hi, node)?;
            for j in 0..n {
                objs.owned_value(kind, w[2 + kw + j], &mut owned_seen.borrow_mut())
                    .map_err(|e| format!("the value of entry {j} of the leaf at {node:#x}: {e}"))?;
            }
            entries += n;
            leaves.push((node, w[1]));
        } else {
            if tag != INNER_TAG || n == 0 || n > f {
                return Err(format!(
                    "the inner node at {node:#x} (level {level}) has header {:#x}",
                    w[0]
                ));
            }
            in_order(&w, 1, n - 1, &lo, &hi, node)?;
            inners += 1;
            for j in (0..n).rev() {
                // Child j holds the keys in [key j-1, key j).
                let (clo, chi) = if order.is_some() {
                    (
                        if j == 0 {
                            lo.clone()
                        } else {
                            Some(separator(&w, j - 1)?)
                        },
                        if j == n - 1 {
                            hi.clone()
                        } else {
                            Some(separator(&w, j)?)
                        },
                    )
                } else {
                    (None, None)
                };
                stack.push((w[i_kids + j], level - 1, clo, chi));
            }
        }
    }
    for (i, &(leaf, next)) in leaves.iter().enumerate() {
        let want = leaves.get(i + 1).map_or(0, |l| l.0);
        if next != want {
            return Err(format!(
                "the leaf at {leaf:#x} links to {next:#x}, not {want:#x}"
            ));
        }
    }
    if let Some(table) = counts {
        check_count(objs, table, entries, &mut HashSet::new())?;
    }
    let line = format!(
        "{entries} entries, height {height}, {inners} inner nodes, {} leaves, {}, {vs}-byte values{}, fanout {f}{}{}",
        leaves.len(),
        match strings {
            Some(true) => "string keys".to_string(),
            Some(false) => "byte string keys".to_string(),
            None => format!("{ks}-byte keys"),
        },
        value_kind_name(kind),
        if order.is_some() { "" } else { ", key order not checked" },
        owned_blocks(owned_seen.borrow().len())
    );
    Ok((line, order.is_some()))
}
