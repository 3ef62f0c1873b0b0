//! The Pisces engine's integration suite: its protocol paths through the public API
//! (`basic`), crash consistency on the crash simulator (`crash`), commits with deferred
//! durability (`deferred_durability`), group commit's partial write-back
//! (`deferred_write_back`), and, with the test-only `mutation`
//! feature, the mutation table that shows each protocol step is needed (`mutations`).
//! The engine's white-box tests are in `crates/pisces/src/engine/pisces/`; the
//! Hermitage cases (`hermitage.rs`), the isolation checker's engine histories
//! (`sicheck.rs`) and the log damage suite (`log_damage.rs`) run it too.
//!
//! `cargo test -p pisces-verify --release --test engine_pisces`; one part by its
//! module, e.g. `... --test engine_pisces crash::`. With `--features mutation` the
//! mutation evidence runs too (`mutations::`, `deferred_write_back::`), each test in a
//! `pisces::mutation::Scenario` that keeps the other tests' pools apart.

#[path = "../common/mod.rs"]
mod common;

mod basic;
mod crash;
mod deferred_durability;
mod deferred_write_back;
#[cfg(feature = "mutation")]
mod mutations;
