//! Concurrency control: the clock and grace periods of the timestamp engines, header
//! words and lock words, and the serial fallback of the optimistic engines.

pub(crate) mod clock;
pub(crate) mod fallback;
pub(crate) mod grace;
pub(crate) mod header_word;
pub(crate) mod two_phase;
