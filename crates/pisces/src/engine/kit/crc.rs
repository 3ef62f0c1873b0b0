//! CRC32C (Castagnoli) of log records, for the commit path.
//!
//! The same values as the `crc32c` crate (and any other CRC32C: initial value and
//! final xor all ones, reflected), computed with the SSE4.2 `crc32` instruction, eight
//! bytes per instruction, where the CPU has it, and with the crate elsewhere.
//!
//! Why not the crate alone: a redo record is a header of a few dozen bytes and a few
//! hundred bytes of entries, and the crate's per-call set-up (CPU feature check,
//! alignment prologue, the three-way interleaving it uses for long inputs) cost more
//! than the checksum itself at that size — about 140 instructions per call on the
//! Pisces commit path, two calls per record (header, then entries), measured with
//! callgrind. One pass of `crc32` over both parts costs one instruction and a little
//! loop overhead per eight bytes. Long inputs (recovery's checks of big records) are
//! latency-bound on the one dependency chain; they still go through here, which is
//! correct, and recovery's speed is measured separately.

/// CRC32C of `head` followed by `data` (the bytes concatenated): a record's header
/// fields and its entries without copying them together.
#[inline]
pub fn crc32c_of(head: &[u8], data: &[u8]) -> u32 {
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("sse4.2") {
        // SAFETY: the CPU has SSE4.2 (checked just now).
        return unsafe { hw::crc32c_of(head, data) };
    }
    crc32c::crc32c_append(crc32c::crc32c(head), data)
}

#[cfg(target_arch = "x86_64")]
mod hw {
    use std::arch::x86_64::{_mm_crc32_u64, _mm_crc32_u8};

    /// Continue the (pre-inverted) CRC state `c` over `bytes`.
    #[target_feature(enable = "sse4.2")]
    fn update(mut c: u64, bytes: &[u8]) -> u64 {
        let mut words = bytes.chunks_exact(8);
        for w in &mut words {
            // Little-endian: the instruction consumes the low byte first, as the
            // byte-wise definition consumes the first byte.
            c = _mm_crc32_u64(c, u64::from_le_bytes(w.try_into().expect("8 bytes")));
        }
        let mut c = c as u32;
        for &b in words.remainder() {
            c = _mm_crc32_u8(c, b);
        }
        u64::from(c)
    }

    /// See [`super::crc32c_of`].
    #[target_feature(enable = "sse4.2")]
    pub(super) fn crc32c_of(head: &[u8], data: &[u8]) -> u32 {
        !(update(update(u64::from(u32::MAX), head), data) as u32)
    }
}

#[cfg(test)]
mod tests {
    use super::crc32c_of;

    /// Every split of inputs of every length up to 80 bytes (and a few long ones),
    /// against the reference crate: the checksum of a record must not depend on which
    /// implementation wrote or checks it (recovery of a pool written on another CPU).
    #[test]
    fn equals_the_reference_crc32c_for_every_split() {
        let bytes: Vec<u8> = (0..4200u32)
            .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
            .collect();
        for len in (0..=80).chain([255, 256, 257, 1000, 4099]) {
            let all = &bytes[..len];
            let want = crc32c::crc32c(all);
            for split in 0..=len.min(40) {
                let (h, d) = all.split_at(split);
                assert_eq!(crc32c_of(h, d), want, "len {len} split {split}");
            }
        }
        // A known value: CRC32C("123456789") = 0xE3069283.
        assert_eq!(crc32c_of(b"1234", b"56789"), 0xE306_9283);
    }
}
