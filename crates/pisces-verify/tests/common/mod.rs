//! Helpers shared by the integration tests.
#![allow(dead_code)]

pub use pisces_verify::testkit::*;

pub mod crash;
