//! The engine kit: building blocks that several engines share.
//!
//! An engine composes these instead of importing another engine's modules. Grouped by
//! concern (users in parentheses):
//! * [`log`], persistent log formats:
//!   * [`log::redo_log`]: checksummed redo records in per-thread ring buffers and
//!     their parser, generic over the records' header framing (pisces, mvcc, sp3, and
//!     timestone with its own framing; spht writes the entries and shares the damage
//!     look under its own record header);
//!   * [`log::crc`]: CRC32C of a record's header and body in one pass (the redo log,
//!     spht's log);
//!   * [`log::watermark`]: the persistent recycle watermark of the redo logs (pisces,
//!     mvcc);
//!   * [`log::checked_word`]: monotone persistent words that carry their own check
//!     (the watermark, sp3's `retired` words);
//! * [`recovery`], replay after a crash:
//!   * [`recovery::replay`]: recovery of the redo-log engines, replay in timestamp
//!     order (pisces, mvcc);
//!   * [`recovery::per_slot`]: the parse of the slots' logs on several threads (sp3,
//!     spht);
//!   * [`recovery::replay_parts`]: parallel replay's partition of the pool into chunks
//!     per thread (sp3, spht);
//!   * [`recovery::prefetch`]: prefetch hints for the home lines a replay will write
//!     (sp3, spht);
//!   * [`recovery::bulk_vec`]: push-only vectors for recovery's per-record tables
//!     (sp3, spht);
//! * [`cc`], concurrency control:
//!   * [`cc::clock`]: the global timestamp counter and per-slot published start
//!     timestamps (pisces, mvcc, sp3, timestone), and the slot with a commit guard
//!     (mvcc, timestone);
//!   * [`cc::grace`]: grace periods, waits for readers older than a timestamp (pisces,
//!     mvcc, sp3);
//!   * [`cc::header_word`]: run-generation tags of the per-object header word (pisces,
//!     undo, and the lock words of [`cc::two_phase`]);
//!   * [`cc::two_phase`]: reader-writer lock words and a thread's held-lock set, strict
//!     2PL (undo, pmdk);
//!   * [`cc::fallback`]: the serial fallback that bounds the attempts of a transaction
//!     that keeps aborting (sp3, spht, pisces, mvcc, timestone);
//! * [`versions`], DRAM versions of objects:
//!   * [`versions::version`]: a DRAM version of an object (stamp, next older version,
//!     payload) (mvcc, timestone), and the allocation of a header and a payload copy
//!     that sp3's versions (a length word and the payload) are made of too;
//!   * [`versions::version_chain`]: an object's versions newest first, its commit lock
//!     and last commit timestamp, visibility and truncation (mvcc, timestone);
//!   * [`versions::version_index`]: the sharded DRAM map from objects to their chains,
//!     with a direct table for small blocks (mvcc, timestone);
//! * the rest:
//!   * [`validate`]: validation of user offsets and of logged writes (every engine
//!     but pmdk, which validates against its own pool's objects; pmdk too for the
//!     running-transaction check);
//!   * [`slab_table`]: a direct table from small blocks to their DRAM metadata, no
//!     search and no lock (sp3's index, the version index);
//!   * [`fast_reads`]: the read fast path `Tx::read` inlines (pisces, bare, timestone);
//!   * [`write_set`]: what a transaction does to each object (pisces, mvcc, sp3, spht,
//!     timestone), and the write set of private copies with its redo record (mvcc,
//!     sp3, timestone);
//!   * [`rollback`]: rolling back a running transaction in `begin` and `abort` (mvcc,
//!     pmdk, sp3, spht, timestone, undo);
//!   * [`changed_words`]: runs of words where a new version differs from home (pisces,
//!     timestone);
//!   * [`shared_counts`]: counts of the writes to words several threads write, compiled
//!     in only with the `shared-counts` feature (every engine).

pub(crate) mod cc;
pub(crate) mod changed_words;
pub(crate) mod fast_reads;
pub(crate) mod log;
pub(crate) mod recovery;
pub(crate) mod rollback;
pub(crate) mod shared_counts;
pub(crate) mod slab_table;
pub(crate) mod validate;
pub(crate) mod versions;
pub(crate) mod write_set;
