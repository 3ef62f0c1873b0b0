//! Recovery: the redo-log engines' replay, and the parts the engines with their own
//! replay share (the parallel parse and partition, prefetch, per-record tables).

pub mod bulk_vec;
pub mod per_slot;
pub mod prefetch;
pub mod replay;
pub mod replay_parts;
