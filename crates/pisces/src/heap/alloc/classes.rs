//! Size classes and slab kinds: the fixed geometry of small slabs and the encoding of
//! slab table entries.

use crate::heap::layout::SLAB_SIZE;

/// Bytes of the header word in front of every payload.
pub(crate) const HEADER: usize = 8;

/// Block sizes (header included) of the small size classes.
///
/// Up to 3584 bytes: four classes per doubling, multiples of 16. Above that the sizes
/// are fitted to the slab, `floor((SLAB_SIZE - 64) / k)` rounded down to 16 for
/// k = 16, 14, 12, 10, 8, 7, 6, 5, 4 blocks per slab, so that the big classes waste at
/// most a few hundred bytes per slab (a 4096-byte class would waste 4 KiB, a 16384-byte
/// class a quarter of the slab). The largest class holds a 16360-byte payload; anything
/// larger is a large run of whole slabs.
pub(crate) const CLASS_SIZES: [u32; NCLASSES] = [
    16, 32, 48, 64, 80, 96, 112, 128, // 16-byte steps
    160, 192, 224, 256, 320, 384, 448, 512, // 4 per doubling
    640, 768, 896, 1024, 1280, 1536, 1792, 2048, 2560, 3072, 3584, //
    4080, 4672, 5456, 6544, 8176, 9344, 10912, 13088, 16368, // fitted to the slab
];

/// Number of small size classes.
pub(crate) const NCLASSES: usize = 36;

/// Largest small block size (header included).
pub(crate) const MAX_SMALL: usize = CLASS_SIZES[NCLASSES - 1] as usize;

/// Geometry of one small class inside a slab.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Class {
    /// Block size, header included.
    pub size: u32,
    /// Offset of the first block from the slab start: the bitmap rounded up to 64 bytes.
    pub data_start: u32,
    /// Blocks per slab.
    pub nblocks: u32,
    /// Blocks a thread cache takes from the free bitmaps at once (of one slab).
    pub batch: u32,
    /// `floor(2^32 / size) + 1`: `(d * recip) >> 32 == d / size` for every offset `d`
    /// inside a slab ([`Class::index_of`]), so pointer validation needs no division.
    pub recip: u64,
}

impl Class {
    /// Number of meaningful bitmap words (`ceil(nblocks / 64)`); the words after them,
    /// up to `data_start`, are padding and must stay zero.
    pub(super) const fn used_words(&self) -> usize {
        (self.nblocks as usize).div_ceil(64)
    }
    /// Number of bitmap words including padding.
    pub(super) const fn all_words(&self) -> usize {
        self.data_start as usize / 8
    }
    /// The block index of byte `d` of the data area if a block starts exactly there
    /// (`d % size == 0` and the index is below `nblocks`), else `None`.
    ///
    /// Exact without a division: with `recip = floor(2^32 / size) + 1 = (2^32 + e) / size`
    /// (`0 < e <= size`), `d * recip / 2^32 = d / size + d * e / (size * 2^32)`, and the
    /// error term is below `1 / size` because `d * e < 2^16 * 2^14 < 2^32` (slabs are
    /// 64 KiB, blocks at most 16 KiB), so the floor is `d / size`; `tests` checks every
    /// offset of every class as well.
    #[inline(always)]
    pub(super) fn index_of(&self, d: u32) -> Option<u32> {
        let index = ((d as u64 * self.recip) >> 32) as u32;
        (index * self.size == d && index < self.nblocks).then_some(index)
    }
}

const fn bitmap_bytes(nblocks: usize) -> usize {
    nblocks.div_ceil(64) * 8
}

const fn round64(x: usize) -> usize {
    x.div_ceil(64) * 64
}

const fn class_geometry(size: usize) -> Class {
    let mut n = SLAB_SIZE / size;
    while round64(bitmap_bytes(n)) + n * size > SLAB_SIZE {
        n -= 1;
    }
    // About 32 KiB per batch, at least 2 and at most 64 blocks.
    let mut batch = (32 * 1024) / size;
    if batch < 2 {
        batch = 2;
    }
    if batch > 64 {
        batch = 64;
    }
    Class {
        size: size as u32,
        data_start: round64(bitmap_bytes(n)) as u32,
        nblocks: n as u32,
        batch: batch as u32,
        recip: (1u64 << 32) / size as u64 + 1,
    }
}

const fn all_classes() -> [Class; NCLASSES] {
    let mut out = [Class {
        size: 0,
        data_start: 0,
        nblocks: 0,
        batch: 0,
        recip: 0,
    }; NCLASSES];
    let mut i = 0;
    while i < NCLASSES {
        out[i] = class_geometry(CLASS_SIZES[i] as usize);
        i += 1;
    }
    out
}

/// Geometry of every class, computed at compile time.
pub(crate) static CLASSES: [Class; NCLASSES] = CLASSES_CONST;
const CLASSES_CONST: [Class; NCLASSES] = all_classes();

const LOOKUP_LEN: usize = MAX_SMALL / 16 + 1;

const fn build_lookup() -> [u8; LOOKUP_LEN] {
    let mut out = [0u8; LOOKUP_LEN];
    let mut i = 0;
    let mut c = 0;
    while i < LOOKUP_LEN {
        while (CLASS_SIZES[c] as usize) < i * 16 {
            c += 1;
        }
        out[i] = c as u8;
        i += 1;
    }
    out
}

/// `LOOKUP[ceil(size / 16)]` is the smallest class whose blocks hold `size` bytes.
static LOOKUP: [u8; LOOKUP_LEN] = build_lookup();

/// The smallest class whose block size is at least `block_size`, or `None` if the
/// block must be a large run.
#[inline]
pub(crate) fn class_for(block_size: usize) -> Option<usize> {
    LOOKUP.get(block_size.div_ceil(16)).map(|&c| c as usize)
}

/// The class whose block size is exactly `size`.
pub(crate) fn class_of_size(size: u64) -> Option<usize> {
    let c = class_for(usize::try_from(size).ok()?)?;
    (CLASSES[c].size as u64 == size).then_some(c)
}

/// Mask of the kind bits of a slab table entry.
const KIND_MASK: u32 = 0xF000_0000;
/// Mask of the argument bits of a slab table entry.
pub(crate) const ARG_MASK: u32 = 0x0FFF_FFFF;
const TAG_SMALL: u32 = 0x1000_0000;
const TAG_HEAD: u32 = 0x2000_0000;
const TAG_CONT: u32 = 0x3000_0000;

/// A decoded slab table entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Not in use.
    Free,
    /// Formatted for small class `c`.
    Small(usize),
    /// First slab of a large run of `n` slabs.
    Head(usize),
    /// Slab number `k` (1-based from the head) of a large run.
    Cont(usize),
}

impl Kind {
    /// Decode a slab table entry; `None` if it is not a valid entry.
    pub(super) fn decode(e: u32) -> Option<Kind> {
        let arg = (e & ARG_MASK) as usize;
        match e & KIND_MASK {
            0 if arg == 0 => Some(Kind::Free),
            TAG_SMALL if arg < NCLASSES => Some(Kind::Small(arg)),
            TAG_HEAD if arg >= 1 => Some(Kind::Head(arg)),
            TAG_CONT if arg >= 1 => Some(Kind::Cont(arg)),
            _ => None,
        }
    }
    /// Encode as a slab table entry. Arguments must fit in [`ARG_MASK`].
    pub(super) fn encode(self) -> u32 {
        let (tag, arg) = match self {
            Kind::Free => (0, 0),
            Kind::Small(c) => (TAG_SMALL, c),
            Kind::Head(n) => (TAG_HEAD, n),
            Kind::Cont(k) => (TAG_CONT, k),
        };
        debug_assert!(arg <= ARG_MASK as usize);
        tag | (arg as u32 & ARG_MASK)
    }
}

/// The read fast path's view of one class: what [`SmallBlocks`] needs to validate a
/// payload offset, packed into 8 bytes so that a table entry is one scaled index
/// (`recip` fits 32 bits because blocks are at least 16 bytes; `data_start` and
/// `nblocks` fit 16 bits because slabs are 64 KiB).
///
/// [`SmallBlocks`]: super::SmallBlocks
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C, align(8))]
pub(crate) struct FastClass {
    /// [`Class::recip`].
    pub recip: u32,
    /// [`Class::data_start`].
    pub data_start: u16,
    /// [`Class::nblocks`].
    pub nblocks: u16,
}

impl FastClass {
    /// The block index of slab offset `in_slab` (`< SLAB_SIZE`) if a block starts
    /// exactly there, else `None`, with one multiply: with `d = in_slab - data_start`,
    /// `d` is a multiple of `size` exactly when the low 32 bits of `d * recip` are below
    /// `recip`, and the high half is `d / size`.
    ///
    /// Why: write `d = q * size + r` (`0 <= r < size`) and `size * recip = 2^32 + e`
    /// (`0 < e <= size`). Then `d * recip = q * 2^32 + (q * e + r * recip)`, and the
    /// bracket is below 2^32 because `q * e + r * recip <= q * size + (size - 1) * recip
    /// = d - r + 2^32 + e - recip` and `d + e < 2^17 < recip` (slabs are 64 KiB, blocks
    /// at most 16 KiB, so `recip > 2^18`). So the high half is `q` and the low half is
    /// `q * e + r * recip`: below `recip` if `r = 0` (as `q * e < 2^17`), at least
    /// `recip` otherwise. `tests` checks every offset of every class as well.
    ///
    /// An offset before the data area wraps to `d >= 2^32 - SLAB_SIZE`, whose quotient
    /// `d * recip >> 32 >= d / size > 2^32 / 2^14 - 4 > 2^16` is above every `nblocks`,
    /// so the subtraction needs no test of its own; the product fits 64 bits (`recip <
    /// 2^29`).
    #[inline(always)]
    pub(super) fn block_index(&self, in_slab: u32) -> Option<u32> {
        let p = u64::from(in_slab.wrapping_sub(u32::from(self.data_start))) * u64::from(self.recip);
        let index = (p >> 32) as u32;
        ((p as u32) < self.recip && index < u32::from(self.nblocks)).then_some(index)
    }
}

const fn fast_classes() -> [FastClass; NCLASSES] {
    let mut out = [FastClass {
        recip: 0,
        data_start: 0,
        nblocks: 0,
    }; NCLASSES];
    let mut i = 0;
    while i < NCLASSES {
        let c = CLASSES_CONST[i];
        assert!(c.recip < 1 << 32 && c.data_start < 1 << 16 && c.nblocks < 1 << 16);
        out[i] = FastClass {
            recip: c.recip as u32,
            data_start: c.data_start as u16,
            nblocks: c.nblocks as u16,
        };
        i += 1;
    }
    out
}

/// [`FastClass`] of every class, by class number. A `const`, not a `static`: each use
/// site gets its own copy addressed relative to the code, where a `static` of this crate
/// used from another one is reached through the global offset table (one more load).
pub(crate) const FAST_CLASSES: [FastClass; NCLASSES] = fast_classes();

/// The smallest class whose blocks hold a `len`-byte payload ([`NCLASSES`] if none
/// does). Classes grow with their number, so "class `c` holds `len` bytes" is `c >=
/// min_class(len)`: the read fast path folds the length check into the class decode.
pub(crate) const fn min_class(len: usize) -> u32 {
    let mut c = 0;
    while c < NCLASSES && (CLASS_SIZES[c] as usize) < len.saturating_add(HEADER) {
        c += 1;
    }
    c as u32
}

/// The class of a slab table entry if it is a valid small-class entry whose blocks
/// hold at least the payload of class `min` ([`min_class`]), in one compare:
/// `e - (TAG_SMALL + min) < NCLASSES - min` holds exactly when the kind bits are
/// TAG_SMALL and the argument is in `min..NCLASSES` (`NCLASSES < 2^28`, so the
/// subtraction cannot carry into or borrow from the kind bits and stay small;
/// `min <= NCLASSES`, so an impossible length makes the bound 0 and refuses all).
#[inline(always)]
pub(crate) fn small_class_at_least(e: u32, min: u32) -> Option<usize> {
    let c = e.wrapping_sub(TAG_SMALL + min);
    // `then_some` evaluates its argument on every call: wrapping, as `c` is huge
    // exactly when the entry is refused.
    (c < NCLASSES as u32 - min).then_some(c.wrapping_add(min) as usize)
}

/// Human-readable description of a raw slab table entry (for error messages).
pub(crate) fn describe(e: u32) -> String {
    match Kind::decode(e) {
        Some(Kind::Free) => "free (0x00000000)".into(),
        Some(Kind::Small(c)) => format!(
            "small class {c} ({}-byte blocks, {e:#010x})",
            CLASSES[c].size
        ),
        Some(Kind::Head(n)) => format!("head of a {n}-slab large run ({e:#010x})"),
        Some(Kind::Cont(k)) => format!("continuation {k} of a large run ({e:#010x})"),
        None => format!("invalid entry {e:#010x}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The reciprocal gives the exact block index (or none) for every offset of every
    /// class, as a division would.
    #[test]
    fn index_of_agrees_with_division_everywhere() {
        for cl in &CLASSES {
            for d in 0..SLAB_SIZE as u32 {
                let want = (d % cl.size == 0 && d / cl.size < cl.nblocks).then_some(d / cl.size);
                assert_eq!(cl.index_of(d), want, "class {} offset {d}", cl.size);
            }
        }
    }

    /// The fast table's index (with the data start folded in) agrees with division for
    /// every offset of every slab and every class, including the bitmap area.
    #[test]
    fn fast_block_index_agrees_with_division_everywhere() {
        for (cl, f) in CLASSES.iter().zip(&FAST_CLASSES) {
            for o in 0..SLAB_SIZE as u32 {
                let want = o.checked_sub(cl.data_start).and_then(|d| {
                    (d % cl.size == 0 && d / cl.size < cl.nblocks).then_some(d / cl.size)
                });
                assert_eq!(f.block_index(o), want, "class {} slab offset {o}", cl.size);
            }
        }
    }

    /// The combined decode and length check accepts exactly small entries of classes
    /// whose payload holds `len` bytes.
    #[test]
    fn small_class_at_least_agrees_with_decode_and_size() {
        let mut entries: Vec<u32> = Vec::new();
        for tag in 0..16u32 {
            for arg in (0..64u32).chain([ARG_MASK - 1, ARG_MASK]) {
                entries.push(tag << 28 | arg);
            }
        }
        entries.extend([u32::MAX, 0, TAG_SMALL - 1]);
        for len in (0..=MAX_SMALL + 16).chain([usize::MAX]) {
            let min = min_class(len);
            for &e in &entries {
                let want = match Kind::decode(e) {
                    Some(Kind::Small(c)) if CLASSES[c].size as usize - 8 >= len => Some(c),
                    _ => None,
                };
                assert_eq!(
                    small_class_at_least(e, min),
                    want,
                    "entry {e:#010x} len {len}"
                );
            }
        }
    }
}
