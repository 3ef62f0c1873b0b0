//! The OLTP benchmarks: TPC-C new-order and TATP, on fanout-32 B+-tree tables.

pub mod tatp;
pub mod tpcc;
