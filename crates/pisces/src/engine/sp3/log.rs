//! The SP3 log record: a kit redo record ([`crate::engine::kit::log::redo_log`]) whose
//! persistTS field holds the transaction's logical id and whose entry bytes start with
//! the dependency set (Algorithm 1, step 4: `Log.append(depSet)`).
//!
//! ```text
//! header (kit): magic | kind | len | crc32c | seq | persistTS = lid
//! entries:      n: u64 | n packed predecessor ids (other slots) | kit entries
//! ```
//!
//! The checksum covers the dependency set with the entries, so a record whose
//! dependency set did not fully persist is invalid as a whole. Same-slot predecessors
//! are not listed: they are implied by lid order (§III-C, condition 1).

#[cfg(test)]
use crate::engine::kit::log::redo_log::{self, Entry};
use crate::{Error, Result};

/// Bytes the dependency prefix of `n` ids takes.
pub(super) fn prefix_len(n: usize) -> usize {
    8 * (n + 1)
}

/// Encode `deps` followed by the kit entries `entries` into `out` (cleared first).
pub(super) fn encode(out: &mut Vec<u8>, deps: &[u64], entries: &[u8]) {
    out.clear();
    out.extend_from_slice(&(deps.len() as u64).to_le_bytes());
    for d in deps {
        out.extend_from_slice(&d.to_le_bytes());
    }
    out.extend_from_slice(entries);
}

/// A decoded record body.
#[cfg(test)]
#[derive(Debug)]
pub(super) struct Body<'a> {
    /// Predecessors in other slots (packed ids).
    pub deps: Vec<u64>,
    /// The kit entries.
    pub entries: Vec<Entry<'a>>,
}

/// Split a record's entry bytes into its dependency set and kit entries.
#[cfg(test)]
pub(super) fn decode(bytes: &[u8]) -> Result<Body<'_>> {
    let parts = split(bytes)?;
    Ok(Body {
        deps: parts.deps().collect(),
        entries: redo_log::decode(parts.entries)?,
    })
}

/// A record's bytes split into its dependency set and its kit entries, in place.
#[derive(Clone, Copy, Debug)]
pub(super) struct Parts<'a> {
    /// The dependency ids, 8 bytes each.
    deps: &'a [u8],
    /// The kit entries (decode with [`crate::engine::kit::log::redo_log::entries`]).
    pub entries: &'a [u8],
}

impl<'a> Parts<'a> {
    /// The dependency set (packed ids of predecessors in other slots).
    pub(super) fn deps(&self) -> impl Iterator<Item = u64> + 'a {
        self.deps
            .chunks_exact(8)
            .map(|w| u64::from_le_bytes(w.try_into().unwrap()))
    }
}

/// Split a record's entry bytes without decoding the entries (recovery decodes them
/// in the log, once).
pub(super) fn split(bytes: &[u8]) -> Result<Parts<'_>> {
    if bytes.len() < 8 {
        return Err(Error::corrupt("SP3 record without a dependency set"));
    }
    let n = u64::from_le_bytes(bytes[..8].try_into().unwrap());
    if n > (bytes.len() as u64 - 8) / 8 {
        return Err(Error::corrupt(format!(
            "SP3 record lists {n} dependencies in {} bytes",
            bytes.len()
        )));
    }
    let end = prefix_len(n as usize);
    Ok(Parts {
        deps: &bytes[8..end],
        entries: &bytes[end..],
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::kit::log::redo_log::RecordBuilder;

    #[test]
    fn records_round_trip_and_bad_prefixes_are_errors() {
        let mut b = RecordBuilder::default();
        b.word(4096, 7);
        let mut out = Vec::new();
        encode(&mut out, &[super::super::tid::pack(2, 5)], b.bytes());
        let body = decode(&out).unwrap();
        assert_eq!(body.deps, vec![super::super::tid::pack(2, 5)]);
        assert_eq!(
            body.entries,
            vec![Entry::Word {
                off: 4096,
                value: 7
            }]
        );
        assert!(decode(&[1, 2]).is_err());
        let mut bad = out.clone();
        bad[0] = 200;
        assert!(decode(&bad).is_err());
    }
}
