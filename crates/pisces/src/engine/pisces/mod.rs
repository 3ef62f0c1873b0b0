//! The Pisces engine (being written).
