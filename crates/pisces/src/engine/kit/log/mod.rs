//! Persistent log formats: the redo log's records, rings and parser, and the words
//! that bound what recovery replays.

pub(crate) mod checked_word;
pub(crate) mod crc;
pub(crate) mod lazy_home;
pub(crate) mod magic_scan;
pub(crate) mod redo_log;
pub(crate) mod unfenced_run;
pub(crate) mod watermark;
