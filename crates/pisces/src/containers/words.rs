//! Objects of a size computed from generic parameters, stored as `[u64; N]`.
//!
//! A node of `HashMap<K, V>` or `BTreeMap<K, V, F>` has a size that depends on `K`, `V`
//! and `F`, but `bytemuck` cannot derive `Pod` for a generic `repr(C)` struct (it cannot
//! prove the absence of padding), stable Rust has no `[u64; f(K, V, F)]` array types,
//! and this module may not use `unsafe`. So a node is an array of words, `[u64; S]`,
//! where `S` comes from a fixed *ladder* of sizes (every size up to 64 words, then steps
//! of 8 up to 512, then steps of 64 up to 2048). A [`Shape`] records the words a node
//! uses (`len`) and the ladder size it is stored as (`size`, the smallest ladder size
//! `>= len`); [`read`], [`write`](fn@write) and [`alloc`] dispatch on `size` to the one
//! `Tx::read::<[u64; S]>` that fits. Shapes are associated constants of the container
//! types, so in optimised builds the dispatch folds away and a node access costs what a
//! typed `tx.read` costs. Typed fields (keys, values) are viewed in place as `&[K]` /
//! `&V` through `bytemuck`'s checked casts ([`slice`](fn@slice), [`elem`]): nothing is copied.
//!
//! Every field starts on a word boundary and stored types have alignment at most 8 (a
//! compile-time check of `Tx::read`), so the casts always succeed for nodes this code
//! wrote; on a damaged pool they return [`Error::Corrupt`] instead of panicking.

use crate::{Error, PPtr, Result, Tx};
use bytemuck::Pod;
use std::mem::size_of;

/// Words used by a node and the ladder size it is stored as.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Shape {
    /// Words the layout uses.
    pub len: usize,
    /// Ladder size: the node is a `[u64; size]` object (0: too large, see `valid`).
    pub size: usize,
}

impl Shape {
    /// The shape of a node of `len` words.
    pub(super) const fn new(len: usize) -> Shape {
        let mut i = 0;
        while i < LADDER.len() {
            if LADDER[i] >= len {
                return Shape {
                    len,
                    size: LADDER[i],
                };
            }
            i += 1;
        }
        Shape { len, size: 0 }
    }

    /// True if nodes of this shape can be stored (at most [`MAX_WORDS`] words).
    pub(super) const fn valid(self) -> bool {
        self.size != 0 && self.len != 0
    }
}

/// The largest node, in words (16 KiB).
pub(crate) const MAX_WORDS: usize = 2048;

/// The largest alignment of a key or value: fields start on word boundaries of
/// objects that are themselves 8-byte aligned. The container types assert it at compile
/// time (as `Tx::read` does for every stored type).
pub(crate) const MAX_ALIGN: usize = 8;

fn bad_shape(s: Shape) -> Error {
    Error::invalid_argument(format!(
        "a container node of {} words exceeds the {MAX_WORDS}-word (16 KiB) limit",
        s.len
    ))
}

/// The error of a typed view of a type aligned above [`MAX_ALIGN`]: the container
/// types refuse such types at compile time, so only a view asked for by other code
/// reaches it; it is a misuse, not damage.
fn over_aligned<T>() -> Error {
    Error::invalid_argument(format!(
        "{} has alignment {}; container keys and values are stored at most {MAX_ALIGN}-byte aligned",
        std::any::type_name::<T>(),
        std::mem::align_of::<T>()
    ))
}

macro_rules! ladder {
    ($($n:literal)*) => {
        const LADDER: &[usize] = &[$($n),*];

        /// This transaction's snapshot of the node at `off`, as `s.len` words.
        ///
        /// Always inlined: every caller passes a shape that is a constant of its
        /// container type, so the match folds to the one arm of that size (otherwise
        /// a caller compiled in another crate may call the whole match, one generic
        /// read per size, on every node it visits).
        #[inline(always)]
        pub(crate) fn read<'t>(tx: &'t Tx<'_>, off: u64, s: Shape) -> Result<&'t [u64]> {
            read_found::<false>(tx, off, s)
        }

        /// [`read`] of a node read again and again (a tree's upper levels), through
        /// `Tx::read_again`. Always inlined, as `read`.
        #[inline(always)]
        pub(crate) fn read_again<'t>(tx: &'t Tx<'_>, off: u64, s: Shape) -> Result<&'t [u64]> {
            read_found::<true>(tx, off, s)
        }

        /// [`read`] (`FIND_AGAIN`: [`read_again`]).
        #[inline(always)]
        fn read_found<'t, const FIND_AGAIN: bool>(
            tx: &'t Tx<'_>,
            off: u64,
            s: Shape,
        ) -> Result<&'t [u64]> {
            match s.size {
                $($n => {
                    let a: &[u64; $n] = tx.read_found::<_, FIND_AGAIN>(PPtr::from_offset(off))?;
                    a.get(..s.len).ok_or_else(|| bad_shape(s))
                })*
                _ => Err(bad_shape(s)),
            }
        }

        /// This transaction's private, writable copy of the node at `off` (locks it).
        /// Always inlined, as `read`.
        #[inline(always)]
        pub(crate) fn write<'t>(tx: &'t mut Tx<'_>, off: u64, s: Shape) -> Result<&'t mut [u64]> {
            match s.size {
                $($n => {
                    let a: &mut [u64; $n] = tx.write(PPtr::from_offset(off))?;
                    a.get_mut(..s.len).ok_or_else(|| bad_shape(s))
                })*
                _ => Err(bad_shape(s)),
            }
        }

        /// Allocate a node of shape `s`, zeroed and then filled by `init`; returns its
        /// offset.
        #[inline]
        pub(crate) fn alloc(
            tx: &mut Tx<'_>,
            s: Shape,
            init: impl FnOnce(&mut [u64]) -> Result<()>,
        ) -> Result<u64> {
            match s.size {
                $($n => {
                    let mut a = [0u64; $n];
                    init(a.get_mut(..s.len).ok_or_else(|| bad_shape(s))?)?;
                    Ok(tx.alloc(a)?.offset())
                })*
                _ => Err(bad_shape(s)),
            }
        }
    };
}

ladder!(
    1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32
    33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61
    62 63 64 72 80 88 96 104 112 120 128 136 144 152 160 168 176 184 192 200 208 216 224
    232 240 248 256 264 272 280 288 296 304 312 320 328 336 344 352 360 368 376 384 392 400
    408 416 424 432 440 448 456 464 472 480 488 496 504 512 576 640 704 768 832 896 960
    1024 1088 1152 1216 1280 1344 1408 1472 1536 1600 1664 1728 1792 1856 1920 1984 2048
);

/// Words needed for `n` values of `T` packed back to back.
pub(crate) const fn words_for<T>(n: usize) -> usize {
    (n * size_of::<T>()).div_ceil(8)
}

pub(crate) fn corrupt(what: &str) -> Error {
    Error::corrupt(format!("container node: {what}"))
}

/// `n` values of `T` stored from word `at` on.
#[inline]
pub(crate) fn slice<T: Pod>(w: &[u64], at: usize, n: usize) -> Result<&[T]> {
    if std::mem::align_of::<T>() > MAX_ALIGN {
        return Err(over_aligned::<T>());
    }
    let bytes: &[u8] = bytemuck::cast_slice(w);
    let start = at * 8;
    bytes
        .get(start..start + n * size_of::<T>())
        .and_then(|b| bytemuck::try_cast_slice(b).ok())
        .ok_or_else(|| corrupt("field out of bounds"))
}

/// Mutable view of `n` values of `T` stored from word `at` on.
#[inline]
pub(crate) fn slice_mut<T: Pod>(w: &mut [u64], at: usize, n: usize) -> Result<&mut [T]> {
    if std::mem::align_of::<T>() > MAX_ALIGN {
        return Err(over_aligned::<T>());
    }
    let bytes: &mut [u8] = bytemuck::cast_slice_mut(w);
    let start = at * 8;
    bytes
        .get_mut(start..start + n * size_of::<T>())
        .and_then(|b| bytemuck::try_cast_slice_mut(b).ok())
        .ok_or_else(|| corrupt("field out of bounds"))
}

/// The `T` stored at word `at`.
#[inline]
pub(crate) fn elem<T: Pod>(w: &[u64], at: usize) -> Result<&T> {
    if std::mem::align_of::<T>() > MAX_ALIGN {
        return Err(over_aligned::<T>());
    }
    let bytes: &[u8] = bytemuck::cast_slice(w);
    let start = at * 8;
    bytes
        .get(start..start + size_of::<T>())
        .and_then(|b| bytemuck::try_from_bytes(b).ok())
        .ok_or_else(|| corrupt("field out of bounds"))
}

/// Ask for the cache lines of `w` (an object's words after its 8-byte header word)
/// that neither the read of its header word nor a look at its first word loads,
/// without waiting for them: for a node read at random (a large map's group, a
/// B+-tree leaf), whose later words a lookup reads after its first ones, so that its
/// lines arrive together instead of one miss after another. Only a hint
/// (`heap::prefetch`).
#[inline(always)]
pub(crate) fn prefetch_lines(w: &[u64]) {
    for i in further_line_words(w.len()) {
        crate::heap::prefetch(std::ptr::from_ref(&w[i]).cast());
    }
}

/// The words of a `len`-word object whose lines [`prefetch_lines`] asks for: one 64
/// bytes past the header word, so on the line after the header's whatever the
/// block's alignment (8 bytes), and every [`LINE_WORDS`] on, the line after that;
/// and the last word, whose line the steps of 64 bytes may stop short of.
#[inline(always)]
fn further_line_words(len: usize) -> impl Iterator<Item = usize> {
    let steps = (FIRST_FURTHER..len).step_by(LINE_WORDS);
    let last = (len > 0 && (len - 1) % LINE_WORDS != FIRST_FURTHER).then(|| len - 1);
    steps.chain(last)
}

/// The first word [`prefetch_lines`] asks for (word 7: 64 bytes past the header
/// word).
const FIRST_FURTHER: usize = 7;
/// Words in a cache line.
const LINE_WORDS: usize = 8;

/// Words `at .. at + n` of `w`.
#[inline(always)]
pub(crate) fn words_at(w: &[u64], at: usize, n: usize) -> Result<&[u64]> {
    w.get(at..at + n)
        .ok_or_else(|| corrupt("field out of bounds"))
}

/// The `T` stored at word `at`, mutable.
#[inline]
pub(crate) fn elem_mut<T: Pod>(w: &mut [u64], at: usize) -> Result<&mut T> {
    if std::mem::align_of::<T>() > MAX_ALIGN {
        return Err(over_aligned::<T>());
    }
    let bytes: &mut [u8] = bytemuck::cast_slice_mut(w);
    let start = at * 8;
    bytes
        .get_mut(start..start + size_of::<T>())
        .and_then(|b| bytemuck::try_from_bytes_mut(b).ok())
        .ok_or_else(|| corrupt("field out of bounds"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    /// The words `prefetch_lines` asks for reach every line of an object but those of
    /// its header word and its first word (which the read and the caller's first look
    /// load), and no line outside the object, at each 8-byte alignment of the header
    /// word in its line.
    #[test]
    fn prefetched_words_cover_the_lines_after_the_header() {
        for len in 1..=64usize {
            for header in (0..64u64).step_by(8) {
                // Byte addresses relative to a line boundary: the header word at
                // `header`, word i of the payload at `header + 8 + 8 i`.
                let line = |byte: u64| byte / 64;
                let end = header + 8 + 8 * len as u64;
                let wanted: BTreeSet<u64> = (line(header) + 1..=line(end - 1))
                    .filter(|&l| l != line(header + 8))
                    .collect();
                let asked: BTreeSet<u64> = further_line_words(len)
                    .map(|i| line(header + 8 + 8 * i as u64))
                    .collect();
                assert!(
                    wanted.is_subset(&asked),
                    "{len} words, header at {header}: lines {wanted:?}, asked {asked:?}"
                );
                assert!(
                    asked
                        .iter()
                        .all(|&l| l >= line(header) && l <= line(end - 1)),
                    "{len} words, header at {header}: asked {asked:?}, past the object"
                );
            }
        }
    }

    #[test]
    fn ladder_is_sorted_and_shapes_fit() {
        assert!(LADDER.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(*LADDER.last().unwrap(), MAX_WORDS);
        for len in 1..=MAX_WORDS {
            let s = Shape::new(len);
            assert!(s.valid() && s.size >= len && LADDER.contains(&s.size));
            // Waste is at most 1/8 above 64 words.
            assert!(len <= 64 && s.size == len || s.size - len < len / 8 + 1);
        }
        assert!(!Shape::new(MAX_WORDS + 1).valid());
        assert!(!Shape::new(0).valid());
    }

    #[test]
    fn typed_views() {
        let mut w = [0u64; 4];
        *elem_mut::<u32>(&mut w, 1).unwrap() = 7;
        slice_mut::<u16>(&mut w, 2, 5).unwrap()[4] = 9;
        assert_eq!(*elem::<u32>(&w, 1).unwrap(), 7);
        assert_eq!(slice::<u16>(&w, 2, 5).unwrap(), &[0, 0, 0, 0, 9]);
        assert!(slice::<u64>(&w, 2, 3).is_err());
        assert!(elem::<[u64; 2]>(&w, 3).is_err());
    }

    /// A view of an over-aligned type is a misuse named as such, not damage: also where
    /// the words happen to sit at an address the type's alignment accepts.
    #[test]
    fn over_aligned_views_are_invalid_arguments() {
        #[derive(Clone, Copy, Pod, bytemuck::Zeroable)]
        #[repr(C, align(16))]
        struct Wide([u64; 2]);
        #[repr(C, align(16))]
        struct Words([u64; 4]);
        let mut w = Words([0; 4]);
        let limit =
            |e: Error| matches!(&e, Error::InvalidArgument(m) if m.contains("8-byte aligned"));
        assert!(limit(elem::<Wide>(&w.0, 0).err().unwrap()));
        assert!(limit(elem_mut::<Wide>(&mut w.0, 2).err().unwrap()));
        assert!(limit(slice::<Wide>(&w.0, 0, 2).err().unwrap()));
        assert!(limit(slice_mut::<Wide>(&mut w.0, 0, 1).err().unwrap()));
    }
}
