//! The B+-tree set data set, after the set benchmarks of the published PTM peers: a
//! `BTreeMap<u64, u8, 16>` used as a set of `N` keys (the value is a one-byte
//! placeholder: the container has no zero-sized values).
//!
//! The `N` member keys are drawn from `0 .. 2N` (the peers use 1M keys drawn from 2M).
//! The operations are those of the hash-set data set ([`crate::workloads::set`], whose
//! [`MemberSetBench`] serves both): a read looks a member up, an update removes it and
//! adds it back in one transaction; changed bytes of an update: 16.

use crate::workloads::set::{set_container, MemberSetBench};
use pisces::BTreeMap;

/// A B+-tree set of 8-byte keys, fanout 16.
pub type TreeSet = BTreeMap<u64, u8, 16>;

/// The B+-tree set data set.
pub type TreeSetBench = MemberSetBench<TreeSet>;

/// Pool bytes a tree set of `keys` keys needs, generously.
pub fn pool_bytes(keys: usize) -> u64 {
    128 * keys as u64
}

set_container!(TreeSet, "tree-set", b"TSET", TreeSet::new);

#[cfg(test)]
mod tests {
    #[test]
    fn updates_keep_the_tree_set_and_reads_examine_their_result() {
        crate::workloads::set::tests::check_member_set::<super::TreeSet>(3000, 8, 900, 3);
    }
}
