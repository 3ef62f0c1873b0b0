//! The checker's hash maps: `rustc-hash`'s Fx hasher (keys are small integers chosen by
//! the workload, not by an adversary, so a fast non-DoS-resistant hash is right).

pub(crate) type FastMap<K, V> = rustc_hash::FxHashMap<K, V>;
pub(crate) type FastSet<K> = rustc_hash::FxHashSet<K>;
