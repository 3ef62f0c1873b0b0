//! Concurrency control: the clock and grace periods of the timestamp engines, header
//! words and lock words, and the serial fallback of the optimistic engines.

pub mod clock;
pub mod fallback;
pub mod grace;
pub mod header_word;
pub mod two_phase;
