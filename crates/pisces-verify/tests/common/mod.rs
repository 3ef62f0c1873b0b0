//! Helpers shared by the integration tests (each test binary uses a part of them).
#![allow(dead_code, unused_imports)]

pub use pisces_verify::testkit::*;

pub mod crash;
