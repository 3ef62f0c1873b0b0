//! DRAM versions of objects: a version, an object's chain of versions, and the index
//! from objects to their chains (the multi-version engines).

pub mod version;
pub mod version_chain;
pub mod version_index;
