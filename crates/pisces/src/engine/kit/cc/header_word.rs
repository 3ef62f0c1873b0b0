//! Tagged header words: the 8-byte word in front of every object's payload.
//!
//! Engines keep per-object concurrency state there (Pisces' lock / pointer to the newer
//! copy, the two-phase-locking engines' reader-writer lock word). The word lives in the
//! pool, so a crash can leave it set. Its top 16 bits carry a tag derived from the run
//! generation (bumped at every open), so a word written by an earlier run reads as empty
//! without a heap scan; the low 48 bits are the engine's (a DRAM pointer fits).
//!
//! Invariants: the tag is never 0 (a zero word is always empty); a tag repeats only
//! every 65535 runs, and the run that reuses one clears every header word first
//! ([`tag_wraps`]).

/// The tag of run `generation` in the top 16 bits of a header word: 1..=0xFFFF,
/// never 0, so a zero word is always empty.
pub(crate) fn tag_of(generation: u64) -> u64 {
    (generation % 0xFFFF + 1) << 48
}

/// True if run `generation` reuses the tag of an earlier run (its words must be
/// cleared before use).
pub(crate) fn tag_wraps(generation: u64) -> bool {
    generation >= 0xFFFF && generation.is_multiple_of(0xFFFF)
}

/// Mask of the engine's part (a pointer or a count) of a header word.
pub(crate) const PTR_MASK: u64 = (1 << 48) - 1;

/// Mask of the tag.
pub(crate) const TAG_MASK: u64 = !PTR_MASK;
