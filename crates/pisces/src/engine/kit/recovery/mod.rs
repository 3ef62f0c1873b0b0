//! Recovery: the redo-log engines' replay, and the parts the engines with their own
//! replay share (the parallel parse and partition, prefetch, per-record tables).

pub(crate) mod bulk_vec;
pub(crate) mod per_slot;
pub(crate) mod prefetch;
pub(crate) mod replay;
pub(crate) mod replay_parts;
