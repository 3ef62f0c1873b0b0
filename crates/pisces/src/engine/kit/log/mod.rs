//! Persistent log formats: the redo log's records, rings and parser, and the words
//! that bound what recovery replays.

pub mod checked_word;
pub mod crc;
pub mod redo_log;
pub mod watermark;
