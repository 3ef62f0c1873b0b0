//! The grouped layout of [`HashMap`]: what a growable map of small entries (key and
//! value in at most [`MAX_SLOT_WORDS`] words) is made of. The parent module's docs,
//! *Grouped layout*, give the layout, the writers' rules and the growth; this file
//! holds its operations.

use super::{
    overloaded, HashMap, Header, GROUP_SLOTS as SLOTS, H_BUCKETS, H_CHUNKS, H_LEVELS,
    MAX_SLOT_WORDS, SPLITS_PER_INSERT,
};
use crate::containers::hash::{linear_bucket, stable_hash};
use crate::containers::walk::Walk;
use crate::containers::words::{self, Shape};
use crate::{PPtr, Pod, Result, Tx};
use std::collections::HashSet;

/// The entries per group above which an insert splits a group (`GROUP_LOAD.0 /
/// GROUP_LOAD.1`). The estimate behind it is one chain's count, and noisy, so maps
/// settle well below it: at about 2.8 entries per group, with about 1 % of the entries
/// in a chain's second group. A map of up to about 1,400 entries then keeps its
/// directory in the header (504 groups), and a lookup reads the header and one group.
const GROUP_LOAD: (u64, u64) = (5, 1);
const CHAIN: &str = "hash map group chain";
const T_TAGS: usize = 0;
const T_NEXT: usize = 1;
const T_SLOTS: usize = 2;
/// The low bit of each slot's tag byte.
const LO: u64 = 0x0001_0101_0101_0101;
/// The high bit of each slot's tag byte: set exactly in the occupied slots' tags.
const HI: u64 = 0x0080_8080_8080_8080;

/// The tag of a key with hash `hash`: its top 7 bits (the group comes from the low
/// bits), with the high bit set so no tag is 0 (an empty slot).
#[inline(always)]
fn tag_of(hash: u64) -> u64 {
    (hash >> 57) | 0x80
}

/// The high bit of every occupied slot whose tag may equal `tag`: all that do, and
/// possibly some above one that does (the SWAR zero-byte test's false positives, which
/// the key compare rules out).
///
/// A slot is a candidate only if its tag byte differs from `tag` in the low 7 bits at
/// most (`!x`'s high bit: the byte of `x` below 0x80), so its high bit is `tag`'s, set:
/// every candidate is occupied without a test of `tags` for it. The unused byte 7 is
/// not masked out of `x` either: a subtraction's borrows run upwards, so it changes
/// nothing below itself, and `HI` drops its own bit.
#[inline(always)]
fn candidates(tags: u64, tag: u64) -> u64 {
    debug_assert!(tag & 0x80 != 0);
    let x = tags ^ (tag * LO);
    x.wrapping_sub(LO) & !x & HI
}

/// The slot of the lowest high bit set in `bits`.
#[inline(always)]
fn slot_of(bits: u64) -> usize {
    (bits.trailing_zeros() / 8) as usize
}

/// An entry a split moves: its tag and its slot's words.
type SlotCopy = (u64, Vec<u64>);

/// `k`'s place in its chain, found by a walk (reads only).
pub struct Spot {
    hash: u64,
    /// The header's chain count when the walk read it (the insert's split test uses
    /// it: nothing before that test changes the header).
    buckets: u64,
    /// The chain: its index in the directory and its first group.
    chain: u64,
    head: u64,
    /// `k`'s group and slot, and the group before that group (0: it is the head).
    found: Option<(u64, usize)>,
    pred: u64,
    /// When `k` is absent: the first free slot along the chain, the chain's last group
    /// and its entries.
    free: Option<(u64, usize)>,
    last: u64,
    entries: u64,
}

impl Spot {
    /// True if the key was found.
    pub(super) fn is_found(&self) -> bool {
        self.found.is_some()
    }
}

impl<K: Pod + Eq, V: Pod> HashMap<K, V> {
    /// Words of one slot: the key, then the value.
    const SLOT_WORDS: usize = Self::KW + Self::VW;
    /// True if a growable map of these types uses the grouped layout.
    pub(super) const SMALL: bool = Self::SLOT_WORDS <= MAX_SLOT_WORDS;
    /// A group: tags, next group of the chain, slots.
    pub(super) const GROUP: Shape = Shape::new(T_SLOTS + SLOTS * Self::SLOT_WORDS);

    /// The first word of slot `i`.
    #[inline(always)]
    const fn slot_at(i: usize) -> usize {
        T_SLOTS + i * Self::SLOT_WORDS
    }

    /// The key and value in slot `i` of group `w`.
    #[inline(always)]
    pub(super) fn slot(w: &[u64], i: usize) -> Result<(&K, &V)> {
        let at = Self::slot_at(i);
        Ok((words::elem(w, at)?, words::elem(w, at + Self::KW)?))
    }

    /// The grouped lookup: the chain's first group, then the next ones while the key is
    /// not found (rare: the map splits groups long before they fill). `IN_HEADER`: the
    /// header's checks found the directory in the header (`Lookup::GroupedInHeader`);
    /// otherwise it has pages.
    #[inline(always)]
    pub(super) fn grouped_get<'t, const IN_HEADER: bool>(
        tx: &'t Tx<'_>,
        h: &Header,
        hash: u64,
        k: &K,
    ) -> Result<Option<&'t V>> {
        let tag = tag_of(hash);
        let chain = linear_bucket(hash, h[H_BUCKETS]) as usize;
        // The chain's first group. A map whose directory is in the header has at most
        // `DIR` groups, few enough for the fast path's table of blocks found before
        // (`Tx::read_again`): its first groups are then located once per engine
        // thread, not at every lookup. A larger map's groups would only evict each
        // other there, so they are read as any object.
        let (off, w) = if IN_HEADER {
            let off = Self::dir_entry(h, chain)?;
            (off, words::read_again(tx, off, Self::GROUP)?)
        } else {
            let off = Self::chunk_of(tx, h, chain)?;
            let w = words::read(tx, off, Self::GROUP)?;
            // A group read at random in a large map spans three cache lines (a
            // 160-byte block); its slots' keys and values are read after its tags.
            words::prefetch_lines(w);
            (off, w)
        };
        if let Some(v) = Self::group_get(w, tag, k)? {
            return Ok(Some(v));
        }
        match w[T_NEXT] {
            0 => Ok(None),
            next => Self::grouped_get_further(tx, off, next, tag, k),
        }
    }

    /// `k`'s value in group `w` (`tag`: its tag), if there.
    #[inline(always)]
    fn group_get<'t>(w: &'t [u64], tag: u64, k: &K) -> Result<Option<&'t V>> {
        let mut m = candidates(w[T_TAGS], tag);
        while m != 0 {
            let at = Self::slot_at(slot_of(m));
            let slot = words::words_at(w, at, Self::SLOT_WORDS)?;
            if words::elem::<K>(slot, 0)? == k {
                return words::elem(slot, Self::KW).map(Some);
            }
            m &= m - 1;
        }
        Ok(None)
    }

    /// [`HashMap::grouped_get`] past the chain's first group (`first`), from its next
    /// group `next`: out of line, as few lookups go there (the map splits a group long
    /// before it fills), and the cycle guard's state is then only set up by them.
    #[cold]
    #[inline(never)]
    fn grouped_get_further<'t>(
        tx: &'t Tx<'_>,
        first: u64,
        mut next: u64,
        tag: u64,
        k: &K,
    ) -> Result<Option<&'t V>> {
        let mut walk = Walk::new(CHAIN, first);
        loop {
            walk.step(next)?;
            let w = words::read(tx, next, Self::GROUP)?;
            if let Some(v) = Self::group_get(w, tag, k)? {
                return Ok(Some(v));
            }
            next = w[T_NEXT];
            if next == 0 {
                return Ok(None);
            }
        }
    }

    /// Where `k` is in its chain, or where an insert of it goes (`h`: the validated
    /// header).
    pub(super) fn spot(&self, tx: &Tx<'_>, h: &Header, k: &K) -> Result<Spot> {
        let hash = stable_hash(bytemuck::bytes_of(k));
        let tag = tag_of(hash);
        let chain = linear_bucket(hash, h[H_BUCKETS]);
        let head = Self::chunk_of(tx, h, chain as usize)?;
        let mut s = Spot {
            hash,
            buckets: h[H_BUCKETS],
            chain,
            head,
            found: None,
            pred: 0,
            free: None,
            last: head,
            entries: 0,
        };
        let (mut off, mut pred) = (head, 0);
        let mut walk = Walk::new(CHAIN, off);
        loop {
            let w = words::read(tx, off, Self::GROUP)?;
            let mut m = candidates(w[T_TAGS], tag);
            while m != 0 {
                let i = slot_of(m);
                if Self::slot(w, i)?.0 == k {
                    s.found = Some((off, i));
                    s.pred = pred;
                    return Ok(s);
                }
                m &= m - 1;
            }
            let free = !w[T_TAGS] & HI;
            if s.free.is_none() && free != 0 {
                s.free = Some((off, slot_of(free)));
            }
            s.entries += u64::from((w[T_TAGS] & HI).count_ones());
            s.last = off;
            let next = w[T_NEXT];
            if next == 0 {
                return Ok(s);
            }
            walk.step(next)?;
            (pred, off) = (off, next);
        }
    }

    /// Write `k` and `v` into free slot `i` of group `w`, tagged `tag`.
    fn fill(w: &mut [u64], i: usize, tag: u64, k: &K, v: &V) -> Result<()> {
        let at = Self::slot_at(i);
        *words::elem_mut(w, at)? = *k;
        *words::elem_mut(w, at + Self::KW)? = *v;
        w[T_TAGS] = (w[T_TAGS] & !(0xff << (8 * i))) | tag << (8 * i);
        Ok(())
    }

    /// `k`'s value, writable in place (writes `k`'s group), without consuming `s`.
    pub(super) fn grouped_slot_mut<'t>(
        &self,
        tx: &'t mut Tx<'_>,
        s: &Spot,
    ) -> Result<Option<&'t mut V>> {
        let Some((g, i)) = s.found else {
            return Ok(None);
        };
        let w = words::write(tx, g, Self::GROUP)?;
        words::elem_mut(w, Self::slot_at(i) + Self::KW).map(Some)
    }

    /// `k`'s value, writable in place (writes `k`'s group).
    pub(super) fn grouped_get_mut<'t>(
        &self,
        tx: &'t mut Tx<'_>,
        s: Spot,
    ) -> Result<Option<&'t mut V>> {
        let Some((g, i)) = s.found else {
            return Ok(None);
        };
        let w = words::write(tx, g, Self::GROUP)?;
        words::elem_mut(w, Self::slot_at(i) + Self::KW).map(Some)
    }

    /// Insert or replace (`s`: `k`'s spot).
    pub(super) fn grouped_insert(&self, tx: &mut Tx<'_>, s: Spot, k: K, v: V) -> Result<Option<V>> {
        if let Some((g, i)) = s.found {
            let w = words::write(tx, g, Self::GROUP)?;
            let slot: &mut V = words::elem_mut(w, Self::slot_at(i) + Self::KW)?;
            return Ok(Some(std::mem::replace(slot, v)));
        }
        // The chain's first group is written by every insert of an absent key, wherever
        // the key goes: two inserts of one key then conflict (module docs).
        words::write(tx, s.head, Self::GROUP)?;
        let tag = tag_of(s.hash);
        match s.free {
            Some((g, i)) => Self::fill(words::write(tx, g, Self::GROUP)?, i, tag, &k, &v)?,
            None => {
                let new = words::alloc(tx, Self::GROUP, |w| Self::fill(w, 0, tag, &k, &v))?;
                words::write(tx, s.last, Self::GROUP)?[T_NEXT] = new;
            }
        }
        for n in s.buckets..s.buckets + SPLITS_PER_INSERT {
            if n >= super::MAX_GROUPS as u64
                || !overloaded(n, s.chain, s.chain + 1, s.entries + 1, GROUP_LOAD)
            {
                break;
            }
            self.grouped_split(tx)?;
        }
        Ok(None)
    }

    /// Remove `k`: clear its slot; an overflow group left empty is unlinked and freed.
    pub(super) fn grouped_remove(&self, tx: &mut Tx<'_>, s: Spot) -> Result<Option<V>> {
        let Some((g, i)) = s.found else {
            return Ok(None);
        };
        let (old, empty, next) = {
            let w = words::write(tx, g, Self::GROUP)?;
            let at = Self::slot_at(i);
            let old = *words::elem::<V>(w, at + Self::KW)?;
            w[T_TAGS] &= !(0xff << (8 * i));
            w[at..at + Self::SLOT_WORDS].fill(0);
            (old, w[T_TAGS] & HI == 0, w[T_NEXT])
        };
        if empty && g != s.head {
            words::write(tx, s.pred, Self::GROUP)?[T_NEXT] = next;
            tx.free(PPtr::<u64>::from_offset(g))?;
        }
        Ok(Some(old))
    }

    /// Linear hashing's step on groups: split chain `s = n - m` into `s` and the new
    /// chain `n` (its entries whose hash has bit `m` set move), in the running
    /// transaction. Writes the header and every group of the old chain (those it frees
    /// too), so any transaction that changes chain `s` from an older snapshot conflicts
    /// with it: each writes one of them (module docs).
    fn grouped_split(&self, tx: &mut Tx<'_>) -> Result<()> {
        let (n, levels, head) = {
            let h = self.header(tx)?;
            let n = h[H_BUCKETS];
            let m = 1u64 << (63 - n.leading_zeros());
            (n, h[H_LEVELS], Self::chunk_of(tx, h, (n - m) as usize)?)
        };
        let m = 1u64 << (63 - n.leading_zeros());
        let s = n - m;
        let sw = Self::SLOT_WORDS;
        // The old chain's groups, and its entries (tag, slot words) by destination.
        let mut chain = Vec::new();
        let (mut stay, mut go): (Vec<SlotCopy>, Vec<SlotCopy>) = (vec![], vec![]);
        let mut off = head;
        let mut walk = Walk::new(CHAIN, off);
        loop {
            let w = words::read(tx, off, Self::GROUP)?;
            chain.push(off);
            let mut occupied = w[T_TAGS] & HI;
            while occupied != 0 {
                let i = slot_of(occupied);
                occupied &= occupied - 1;
                let hash = stable_hash(bytemuck::bytes_of(Self::slot(w, i)?.0));
                if linear_bucket(hash, n) != s {
                    return Err(self.corrupt(format!(
                        "the group at {off:#x} is in chain {s}, but the key of its slot {i} hashes to another chain"
                    )));
                }
                let e = (
                    tag_of(hash),
                    w[Self::slot_at(i)..Self::slot_at(i) + sw].to_vec(),
                );
                if hash & m != 0 {
                    go.push(e);
                } else {
                    stay.push(e);
                }
            }
            let next = w[T_NEXT];
            if next == 0 {
                break;
            }
            walk.step(next)?;
            off = next;
        }
        // Fill group `w` with entries `es` (at most SLOTS), linked to `next`.
        let fill = |w: &mut [u64], es: &[SlotCopy], next: u64| {
            w.fill(0);
            for (i, (tag, slot)) in es.iter().enumerate() {
                w[T_TAGS] |= tag << (8 * i);
                w[Self::slot_at(i)..Self::slot_at(i) + sw].copy_from_slice(slot);
            }
            w[T_NEXT] = next;
        };
        // The staying entries refill the old chain from its head; groups left over are
        // freed (written first, as every group of the chain is).
        let keep = stay.len().div_ceil(SLOTS).max(1);
        for (j, &g) in chain.iter().enumerate() {
            let es = stay
                .get(j * SLOTS..((j + 1) * SLOTS).min(stay.len()))
                .unwrap_or(&[]);
            let next = if j + 1 < keep { chain[j + 1] } else { 0 };
            fill(words::write(tx, g, Self::GROUP)?, es, next);
            if j >= keep {
                tx.free(PPtr::<u64>::from_offset(g))?;
            }
        }
        // The moving ones form the new chain, allocated from its end.
        let mut next = 0;
        for j in (0..go.len().div_ceil(SLOTS).max(1)).rev() {
            let es = &go[j * SLOTS..((j + 1) * SLOTS).min(go.len())];
            next = words::alloc(tx, Self::GROUP, |w| {
                fill(w, es, next);
                Ok(())
            })?;
        }
        self.add_chunk(tx, levels, n as usize, next)?;
        let h = tx.write(self.header)?;
        h[H_BUCKETS] = n + 1;
        h[H_CHUNKS] = n + 1;
        Ok(())
    }

    /// Call `f` with every group of every chain, in directory order: the chain's
    /// index, the group's offset and its words; stop when `f` returns false.
    pub(super) fn for_each_group<'t>(
        &self,
        tx: &'t Tx<'_>,
        h: &Header,
        mut f: impl FnMut(u64, u64, &'t [u64]) -> Result<bool>,
    ) -> Result<()> {
        for c in 0..h[H_BUCKETS] {
            let mut off = Self::chunk_of(tx, h, c as usize)?;
            let mut walk = Walk::new(CHAIN, off);
            loop {
                let w = words::read(tx, off, Self::GROUP)?;
                if !f(c, off, w)? {
                    return Ok(());
                }
                off = w[T_NEXT];
                if off == 0 {
                    break;
                }
                walk.step(off)?;
            }
        }
        Ok(())
    }

    /// Call `f` on every entry until it returns false.
    pub(super) fn grouped_for_each(
        &self,
        tx: &Tx<'_>,
        h: &Header,
        mut f: impl FnMut(&K, &V) -> bool,
    ) -> Result<()> {
        self.for_each_group(tx, h, |_, _, w| {
            let mut occupied = w[T_TAGS] & HI;
            while occupied != 0 {
                let (k, v) = Self::slot(w, slot_of(occupied))?;
                if !f(k, v) {
                    return Ok(false);
                }
                occupied &= occupied - 1;
            }
            Ok(true)
        })
    }

    /// [`HashMap::check`] of a grouped map: every group readable with the right shape
    /// and reached once, every tag byte empty or a tag, each occupied slot's tag and
    /// chain the ones its key's hash gives, no key twice in a chain, no empty group
    /// after a chain's first.
    pub(super) fn grouped_check(&self, tx: &Tx<'_>, h: &Header) -> Result<super::MapStats> {
        let mut st = super::MapStats {
            buckets: h[H_BUCKETS] as usize,
            ..super::MapStats::default()
        };
        let n = h[H_BUCKETS];
        let mut seen = HashSet::new();
        // The chain being walked: its index, its keys so far.
        let mut cur: (u64, Vec<K>) = (u64::MAX, Vec::new());
        let close = |st: &mut super::MapStats, keys: &[K]| {
            st.entries += keys.len();
            st.used_buckets += usize::from(!keys.is_empty());
            st.longest_chain = st.longest_chain.max(keys.len());
        };
        self.for_each_group(tx, h, |c, off, w| {
            if !seen.insert(off) {
                return Err(self.corrupt(format!(
                    "the group at {off:#x} (chain {c}) is reached twice: two chains share it"
                )));
            }
            let first = c != cur.0;
            if first {
                close(&mut st, &cur.1);
                cur = (c, Vec::new());
            }
            let tags = w[T_TAGS];
            let bad_tags = (0..8).any(|i| {
                let t = (tags >> (8 * i)) & 0xff;
                t != 0 && (i >= SLOTS || t & 0x80 == 0)
            });
            if bad_tags {
                return Err(self.corrupt(format!(
                    "the group at {off:#x} has tag word {tags:#x}: a byte is neither empty nor a tag"
                )));
            }
            if !first && tags == 0 {
                return Err(self.corrupt(format!(
                    "the group at {off:#x} (chain {c}) is empty but not its chain's first"
                )));
            }
            let mut occupied = tags & HI;
            while occupied != 0 {
                let i = slot_of(occupied);
                occupied &= occupied - 1;
                let k = *Self::slot(w, i)?.0;
                let hash = stable_hash(bytemuck::bytes_of(&k));
                if linear_bucket(hash, n) != c {
                    return Err(self.corrupt(format!(
                        "the key in slot {i} of the group at {off:#x} is in chain {c}, but hashes to another chain"
                    )));
                }
                if (tags >> (8 * i)) & 0xff != tag_of(hash) {
                    return Err(self.corrupt(format!(
                        "slot {i} of the group at {off:#x} has a tag its key does not hash to"
                    )));
                }
                if cur.1.contains(&k) {
                    return Err(self.corrupt(format!(
                        "the key in slot {i} of the group at {off:#x} appears twice in chain {c}"
                    )));
                }
                cur.1.push(k);
            }
            Ok(true)
        })?;
        close(&mut st, &cur.1);
        Ok(st)
    }

    /// The words of the group at `off` (for [`HashIter`](super::HashIter)).
    pub(super) fn group<'t>(tx: &'t Tx<'_>, off: u64) -> Result<&'t [u64]> {
        words::read(tx, off, Self::GROUP)
    }

    /// The high bit of each occupied slot's tag byte in group `w`.
    pub(super) fn occupied(w: &[u64]) -> u64 {
        w[T_TAGS] & HI
    }

    /// The next group of the chain after group `w` (0: none).
    pub(super) fn next_group(w: &[u64]) -> u64 {
        w[T_NEXT]
    }

    /// The slot of the lowest high bit set in `bits` (a mask of [`Self::occupied`]).
    pub(super) fn lowest_slot(bits: u64) -> usize {
        slot_of(bits)
    }
}

#[cfg(test)]
mod tests {
    use super::{candidates, tag_of, HI, SLOTS};

    /// `candidates` names every occupied slot whose tag is the key's, and only
    /// occupied slots of slots 0 ..= 6, whatever the other bytes hold (the unused byte
    /// 7 too, as a damaged group may have it).
    #[test]
    fn candidates_are_every_match_and_only_occupied_slots() {
        let mut seed = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for _ in 0..200_000 {
            let tag = tag_of(next());
            let mut tags = 0u64;
            for j in 0..8 {
                let r = next();
                let byte = match r % 6 {
                    0 => 0,
                    1 => tag,
                    2 => tag ^ 1,
                    3 => tag ^ 0x80,
                    4 => r >> 8 & 0xff,
                    _ => (r >> 8 & 0x7f) | 0x80,
                };
                tags |= byte << (8 * j);
            }
            let m = candidates(tags, tag);
            assert_eq!(m & !HI, 0, "{tags:#x} {tag:#x}");
            for j in 0..SLOTS {
                let byte = tags >> (8 * j) & 0xff;
                let bit = m >> (8 * j + 7) & 1 == 1;
                if byte == tag {
                    assert!(bit, "slot {j} matches: {tags:#x} {tag:#x}");
                }
                if bit {
                    assert_ne!(byte & 0x80, 0, "slot {j} empty: {tags:#x} {tag:#x}");
                }
            }
        }
    }
}
