//! DRAM versions of objects: a version, an object's chain of versions, and the index
//! from objects to their chains (the multi-version engines).

pub(crate) mod version;
pub(crate) mod version_chain;
pub(crate) mod version_index;
