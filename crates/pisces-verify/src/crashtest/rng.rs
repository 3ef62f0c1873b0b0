//! Deterministic mixing of seeds and indices.
//!
//! Every choice a campaign makes (which fence to crash at, which adversary seed, whether
//! to crash again during recovery, which operation a workload runs next) is a pure
//! function of a few integers, so that a state can be named by `(seed, index)` and
//! rebuilt later. [`mix`] is SplitMix64's finalizer applied to the pair.

/// SplitMix64's output function: a bijective, well-scrambled 64-bit hash.
pub fn splitmix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// A hash of the pair `(a, b)`; different pairs give unrelated values.
pub fn mix(a: u64, b: u64) -> u64 {
    splitmix(a ^ splitmix(b))
}

/// A value in `0..n` drawn from `(a, b)` (0 when `n` is 0).
pub fn below(a: u64, b: u64, n: u64) -> u64 {
    if n == 0 {
        0
    } else {
        mix(a, b) % n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mixing_is_deterministic_and_spreads() {
        assert_eq!(mix(1, 2), mix(1, 2));
        assert_ne!(mix(1, 2), mix(2, 1));
        let distinct: std::collections::BTreeSet<u64> =
            (0..1000).map(|i| below(7, i, 10)).collect();
        assert_eq!(distinct.len(), 10);
        assert_eq!(below(3, 4, 0), 0);
    }
}
