//! CRC32C (Castagnoli) of a record: a short header and its body, in one pass, with
//! the SSE4.2 `crc32` instruction where the processor has it.
//!
//! The value is the `crc32c` crate's (`crc32c_append(crc32c(head), body)`, the CRC of
//! `head` followed by `body`); only the way it is computed differs. The crate's call
//! per piece dispatches, finalises and takes its unaligned head and tail a byte at a
//! time, which on a record of a few dozen to a few hundred bytes is most of the work,
//! where the record's own words are a few dozen `crc32` instructions; every commit and
//! every record recovery reads are checksummed, two pieces each. Here both pieces go
//! through one loop over 8-byte words (the tail by 4 and 1 bytes), with one feature
//! check per record. Long
//! bodies (from [`LONG`] bytes) go to the crate, whose three interleaved streams are
//! faster there. Without SSE4.2 (or off x86-64) everything goes to the crate.

/// Bodies from this length are checksummed by the crate's interleaved code.
const LONG: usize = 1024;

/// The CRC32C of `head` followed by `body`.
#[inline]
pub(crate) fn crc32c_of(head: &[u8], body: &[u8]) -> u32 {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("sse4.2") {
        // SAFETY: the processor has SSE4.2 (checked just above).
        let state = unsafe { hw::update(!0, head) };
        if body.len() < LONG {
            // SAFETY: as above.
            return !unsafe { hw::update(state, body) };
        }
        return crc32c::crc32c_append(!state, body);
    }
    crc32c::crc32c_append(crc32c::crc32c(head), body)
}

#[cfg(target_arch = "x86_64")]
mod hw {
    use std::arch::x86_64::{_mm_crc32_u32, _mm_crc32_u64, _mm_crc32_u8};

    /// The CRC register after `bytes`, from register value `state` (not inverted:
    /// the caller inverts at the start and the end).
    ///
    /// # Safety
    /// The processor must support SSE4.2.
    #[target_feature(enable = "sse4.2")]
    #[inline]
    pub(super) unsafe fn update(state: u32, bytes: &[u8]) -> u32 {
        let mut words = bytes.chunks_exact(8);
        let mut s = u64::from(state);
        for w in &mut words {
            s = _mm_crc32_u64(s, u64::from_le_bytes(w.try_into().unwrap()));
        }
        let mut s = s as u32;
        let mut rest = words.remainder();
        if rest.len() >= 4 {
            s = _mm_crc32_u32(s, u32::from_le_bytes(rest[..4].try_into().unwrap()));
            rest = &rest[4..];
        }
        for &b in rest {
            s = _mm_crc32_u8(s, b);
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    #[test]
    fn equals_the_crate_for_every_split_and_length() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let mut buf = vec![0u8; 3 * LONG];
        rng.fill(&mut buf[..]);
        for len in (0..300).chain([LONG - 1, LONG, LONG + 13, 3 * LONG]) {
            for start in [0, 1, 3, 8] {
                let end = (start + len).min(buf.len());
                let all = &buf[start..end];
                let want = crc32c::crc32c(all);
                for cut in [0, 1, 4, 7, 8, 12, 28, all.len() / 2, all.len()] {
                    let cut = cut.min(all.len());
                    assert_eq!(
                        crc32c_of(&all[..cut], &all[cut..]),
                        want,
                        "len {} cut {cut}",
                        all.len()
                    );
                }
            }
        }
    }
}
