//! Unit tests of the SP3 engine.
