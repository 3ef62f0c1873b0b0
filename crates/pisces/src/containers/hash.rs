//! The persistent hash function of [`HashMap`](super::HashMap).
//!
//! A key's bucket is stored implicitly in the pool (the node sits in that bucket's
//! chain), so the hash is part of the pool format: it must give the same value in every
//! process, on every run, in every build. It therefore has no random seed (unlike std's
//! SipHash `RandomState`) and must never change; `tests::golden_values` pins it.
//!
//! Construction (wyhash-style): the key's bytes are read as little-endian 64-bit words
//! (the last one zero-padded); each word is folded in with a 64×64→128-bit multiply whose
//! halves are xored ("folded multiply"), and a final folded multiply with the length
//! avalanches every input bit into the high bits. The bucket index is then taken from the
//! high bits by a multiply-shift (`(h * buckets) >> 64`), which needs no division and
//! works for any bucket count. For an 8-byte key this is two multiplies.

const P0: u64 = 0xa076_1d64_78bd_642f;
const P1: u64 = 0xe703_7ed1_a0b4_28db;
const P2: u64 = 0x8ebc_6af0_9c88_c6e3;

#[inline(always)]
fn fold_mul(a: u64, b: u64) -> u64 {
    let r = (a as u128).wrapping_mul(b as u128);
    (r as u64) ^ ((r >> 64) as u64)
}

/// The stable 64-bit hash of `bytes`: the hash [`HashMap`](crate::HashMap) puts a key
/// (its bytes) in a bucket with.
///
/// A key's bucket is kept implicitly in the pool (its node sits in that bucket's
/// chain), so the hash is part of the pool format: it gives the same value in every
/// process, on every run, in every build and on every machine, has no random seed
/// (unlike std's `RandomState`), and will not change. It is not a keyed hash: keys an
/// adversary chooses can all land in one bucket.
///
/// Construction (wyhash-style): the bytes are read as little-endian 64-bit words (the
/// last one zero-padded); each word is folded in with a 64×64→128-bit multiply whose
/// halves are xored, and a final such multiply with the length spreads every input bit
/// into the high bits. For an 8-byte key that is two multiplies.
///
/// ```
/// use pisces::stable_hash;
/// assert_eq!(stable_hash(&1u64.to_le_bytes()), 0x5bbe_cd98_ef0a_833a);
/// assert_ne!(stable_hash(&[0; 3]), stable_hash(&[0; 4]));
/// ```
#[inline]
pub fn stable_hash(bytes: &[u8]) -> u64 {
    let mut h = P0;
    let mut words = bytes.chunks_exact(8);
    for c in &mut words {
        let w = <[u8; 8]>::try_from(c).map_or(0, u64::from_le_bytes);
        h = fold_mul(h ^ w, P1);
    }
    let rest = words.remainder();
    if !rest.is_empty() {
        let mut b = [0u8; 8];
        b[..rest.len()].copy_from_slice(rest);
        h = fold_mul(h ^ u64::from_le_bytes(b), P1);
    }
    fold_mul(h ^ bytes.len() as u64, P2)
}

/// Bucket of a hash among `buckets` (multiply-shift on the high bits).
#[inline(always)]
pub(crate) fn bucket_of(hash: u64, buckets: u64) -> u64 {
    ((hash as u128 * buckets as u128) >> 64) as u64
}

/// Bucket of a hash in a growable map of `buckets` buckets (linear hashing on the low
/// bits): with `m` the largest power of two not above `buckets`, buckets `0 .. s` (where
/// `s = buckets - m`) have been split into themselves and `m .. m + s`, so a hash whose
/// low bits select a split bucket takes one more bit.
#[inline(always)]
pub(crate) fn linear_bucket(hash: u64, buckets: u64) -> u64 {
    debug_assert!(buckets >= 1);
    let m = 1u64 << (63 - buckets.leading_zeros());
    let b = hash & (m - 1);
    if b < buckets - m {
        hash & (2 * m - 1)
    } else {
        b
    }
}

/// The bucket of a hash: multiply-shift for fixed maps, linear hashing for growable ones.
#[inline(always)]
pub(crate) fn bucket_in(hash: u64, buckets: u64, growable: bool) -> u64 {
    if growable {
        linear_bucket(hash, buckets)
    } else {
        bucket_of(hash, buckets)
    }
}

#[cfg(test)]
mod tests {
    /// Splitting bucket `s` moves exactly the keys whose next bit is set to `s + m`,
    /// and no other key changes bucket.
    #[test]
    fn linear_split_moves_only_the_split_bucket() {
        for n in 1..300u64 {
            let m = 1u64 << (63 - n.leading_zeros());
            let s = n - m;
            for k in 0..2000u64 {
                let h = stable_hash(&k.to_le_bytes());
                let (before, after) = (linear_bucket(h, n), linear_bucket(h, n + 1));
                assert!(before < n && after < n + 1);
                if before != s {
                    assert_eq!(before, after, "n {n} key {k}");
                } else {
                    assert!(after == s || after == n, "n {n} key {k}");
                }
            }
        }
    }

    use super::*;

    /// The hash is part of the pool format: these values must never change.
    #[test]
    fn golden_values() {
        let got = [
            stable_hash(&[]),
            stable_hash(&0u64.to_le_bytes()),
            stable_hash(&1u64.to_le_bytes()),
            stable_hash(&42u32.to_le_bytes()),
            stable_hash(b"pisces persistent"),
        ];
        let want: [u64; 5] = [
            0xe28f_2b20_61a2_b984,
            0x2f4f_b771_cd7d_64ff,
            0x5bbe_cd98_ef0a_833a,
            0x266d_79a4_069e_2001,
            0x294c_5eed_8ea3_aca2,
        ];
        assert_eq!(got, want, "{got:#018x?}");
    }

    #[test]
    fn spreads_sequential_keys_evenly() {
        let buckets = 1000u64;
        let mut count = vec![0u32; buckets as usize];
        for k in 0..100_000u64 {
            count[bucket_of(stable_hash(&k.to_le_bytes()), buckets) as usize] += 1;
        }
        // Mean 100; a decent hash keeps every bucket well within 50..160.
        let (min, max) = (count.iter().min().unwrap(), count.iter().max().unwrap());
        assert!(*min > 50 && *max < 160, "min {min} max {max}");
        // Different lengths of zero bytes hash differently.
        assert_ne!(stable_hash(&[0u8; 3]), stable_hash(&[0u8; 4]));
    }
}
