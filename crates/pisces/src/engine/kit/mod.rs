//! The engine kit: building blocks that several engines share.
//!
//! An engine composes these instead of importing another engine's modules:
//! * [`bulk_vec`]: push-only vectors for recovery's per-record tables (huge pages);
//! * [`changed_words`]: runs of words where a new version differs from home;
//! * [`crc`]: CRC32C of a record's header and body in one pass (SSE4.2);
//! * [`dirty_lines`]: the cache lines a recovery replay wrote, flushed once each;
//! * [`clock`]: the global timestamp counter and per-slot published start timestamps;
//! * [`fallback`]: the serial fallback that bounds the attempts of a transaction
//!   that keeps aborting (the single-version optimistic engines);
//! * [`grace`]: grace periods (wait for readers older than a timestamp);
//! * [`header_word`]: run-generation tags of the per-object header word;
//! * [`redo_log`]: checksummed redo records in per-thread ring buffers, and their parser;
//! * [`per_slot`]: recovery's parse of the slots' logs on several threads;
//! * [`replay_parts`]: parallel replay's partition of the pool into chunks per thread;
//! * [`replay`]: recovery of the redo-log engines (replay in timestamp order);
//! * [`watermark`]: the persistent recycle watermark of the redo logs;
//! * [`two_phase`]: reader-writer lock words and a thread's held-lock set (strict 2PL);
//! * [`prefetch`]: prefetch hints for the home lines a replay will write;
//! * [`objects`]: validation of user offsets and logged writes; write-set kinds;
//! * [`version`]: a DRAM version of an object (stamp, next older version, payload);
//! * [`version_chain`]: an object's versions newest first, its commit lock and last
//!   commit timestamp, visibility and truncation (the multi-version engines);
//! * [`version_index`]: the sharded DRAM map from objects to their chains.

pub mod bulk_vec;
pub mod changed_words;
pub mod checked_word;
pub mod clock;
pub mod crc;
pub mod dirty_lines;
pub mod fallback;
pub mod grace;
pub mod header_word;
pub mod objects;
pub mod per_slot;
pub mod prefetch;
pub mod redo_log;
pub mod replay;
pub mod replay_parts;
pub mod two_phase;
pub mod version;
pub mod version_chain;
pub mod version_index;
pub mod watermark;

#[cfg(test)]
mod recovery_tests;
