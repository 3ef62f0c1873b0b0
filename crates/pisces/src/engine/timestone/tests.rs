//! Unit tests of the timestone engine.
