//! `libpisces.so` / `libpisces.a`: the C interface of Pisces, declared in
//! `crates/pisces-capi/include/pisces.h`.
//!
//! All functions live in the `pisces-capi` crate; re-exporting them here makes this
//! crate's C library exports (a `cdylib` exports the `#[no_mangle]` functions of the
//! crates it links, a `staticlib` contains them).

pub use pisces_capi::*;
