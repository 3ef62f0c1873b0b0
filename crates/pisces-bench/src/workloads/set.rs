//! The hash-set data set, after the set benchmarks of the published PTM peers: a
//! `HashMap<u64, u8>` used as a set of `N` keys (the value is a one-byte placeholder:
//! the container has no zero-sized values). The map grows as it is preloaded
//! (`HashMap::new`): no bucket count is chosen by hand.
//!
//! The `N` member keys are drawn from `0 .. 2N` and preloaded in a random order. Every
//! operation picks one member uniformly: a read looks it up, an update removes it and
//! adds it back in the same transaction, so the set keeps its size and every operation
//! finds its key. A member found missing is reported as an error (so every lookup
//! result is examined, and kept alive by [`read_only_op`] as well). Changed bytes of an
//! update: 16 (the key removed and the key added; the placeholder byte is not counted).
//! The update is a registered operation ([`SetContainer::UPDATE_OP`], arguments: the
//! container and the key) on every engine, as the hash table's is, so engines that log
//! operations (timestone) persist its 16 argument bytes at commit rather than the
//! objects it writes; the others run it as a closure.
//!
//! [`MemberSetBench`] is that data set over any [`SetContainer`]; the `tree-set` data
//! set ([`crate::workloads::tree_set`]) is the same over a B+-tree.

use crate::workloads::anchor::Anchor;
use crate::workloads::OpRng;
use crate::workloads::{
    missing_member, pick, preload, read_only_op, sample_keys, DataSet, SET_UPDATE_BYTES,
};
use pisces::{HashMap, Pod, Pool, ThreadHandle, Tx, Zeroable};

/// A hash set of 8-byte keys.
pub type Set = HashMap<u64, u8>;

/// The placeholder value of every member.
pub const MEMBER: u8 = 1;

/// A persistent map of `u64` keys to the placeholder byte, used as a set.
pub trait SetContainer: Pod + Send + Sync + 'static {
    /// The data set's name in errors (`set`, `tree-set`).
    const NAME: &'static str;
    /// Operation id of the update (remove a member and add it back).
    const UPDATE_OP: u32;
    /// An empty container.
    fn create(tx: &mut Tx<'_>) -> pisces::Result<Self>;
    /// Add `k` (with [`MEMBER`]).
    fn add(&self, tx: &mut Tx<'_>, k: u64) -> pisces::Result<()>;
    /// Remove `k`; `None` if it was absent.
    fn take(&self, tx: &mut Tx<'_>, k: u64) -> pisces::Result<Option<u8>>;
    /// The value stored under `k`.
    fn find(&self, tx: &Tx<'_>, k: u64) -> pisces::Result<Option<u8>>;
    /// Every key, in the container's order (a process that attaches to the data set
    /// reads its members back).
    fn keys(&self, tx: &Tx<'_>) -> pisces::Result<Vec<u64>>;
    /// Every (key, value) pair (the data set's test).
    #[cfg(test)]
    fn pairs(&self, tx: &Tx<'_>) -> pisces::Result<Vec<(u64, u8)>>;
    /// The container's own structural check (the data set's test).
    #[cfg(test)]
    fn verify(&self, tx: &Tx<'_>) -> pisces::Result<()>;
}

/// `impl SetContainer` for a map type of `u64` keys and `u8` values whose methods
/// have the containers' names (`insert`, `remove`, `get_ref`, `for_each`, `check`),
/// with its data-set name and its constructor.
macro_rules! set_container {
    ($map:ty, $name:literal, $op:literal, $create:path) => {
        impl $crate::workloads::set::SetContainer for $map {
            const NAME: &'static str = $name;
            const UPDATE_OP: u32 = u32::from_be_bytes(*$op);
            fn create(tx: &mut pisces::Tx<'_>) -> pisces::Result<Self> {
                $create(tx)
            }
            fn add(&self, tx: &mut pisces::Tx<'_>, k: u64) -> pisces::Result<()> {
                self.insert(tx, k, $crate::workloads::set::MEMBER)
                    .map(|_| ())
            }
            fn take(&self, tx: &mut pisces::Tx<'_>, k: u64) -> pisces::Result<Option<u8>> {
                self.remove(tx, &k)
            }
            #[inline]
            fn find(&self, tx: &pisces::Tx<'_>, k: u64) -> pisces::Result<Option<u8>> {
                Ok(self.get_ref(tx, &k)?.copied())
            }
            fn keys(&self, tx: &pisces::Tx<'_>) -> pisces::Result<Vec<u64>> {
                let mut v = Vec::new();
                self.for_each(tx, |k, _| {
                    v.push(*k);
                    true
                })?;
                Ok(v)
            }
            #[cfg(test)]
            fn pairs(&self, tx: &pisces::Tx<'_>) -> pisces::Result<Vec<(u64, u8)>> {
                let mut v = Vec::new();
                self.for_each(tx, |k, m| {
                    v.push((*k, *m));
                    true
                })?;
                Ok(v)
            }
            #[cfg(test)]
            fn verify(&self, tx: &pisces::Tx<'_>) -> pisces::Result<()> {
                self.check(tx).map(|_| ())
            }
        }
    };
}
pub(crate) use set_container;

set_container!(Set, "set", b"SETU", Set::new);

/// Arguments of a set's update: the container (its 8-byte handle) and the member.
#[derive(Clone, Copy, Pod, Zeroable)]
#[repr(C)]
struct UpdateArgs {
    set: u64,
    key: u64,
}

/// The update: remove member `key` and add it back. Deterministic (it depends on its
/// arguments and the pool only), as an operation must be.
fn update<S: SetContainer>(tx: &mut Tx<'_>, a: &UpdateArgs) -> pisces::Result<()> {
    let s: S = bytemuck::cast(a.set);
    s.take(tx, a.key)?
        .ok_or_else(|| missing_member(S::NAME, a.key))?;
    s.add(tx, a.key)
}

/// A set data set over the container `S` (see the module docs).
pub struct MemberSetBench<S> {
    set: S,
    members: Vec<u64>,
}

/// The hash-set data set.
pub type SetBench = MemberSetBench<Set>;

/// Pool bytes a set of `keys` keys needs, generously.
pub fn pool_bytes(keys: usize) -> u64 {
    256 * keys as u64
}

impl<S: SetContainer> MemberSetBench<S> {
    /// Create a set of `keys` keys on `pool` and preload it in batches.
    pub fn build(pool: &Pool, keys: usize, seed: u64) -> pisces::Result<Self> {
        let members = sample_keys(keys, 2 * keys as u64, seed);
        let mut h = pool.handle()?;
        pool.register_op(S::UPDATE_OP, update::<S>)?;
        let set = h.run(S::create)?;
        preload(&mut h, &members, |tx, k| set.add(tx, k))?;
        Ok(MemberSetBench { set, members })
    }

    /// The set published in `pool` by another process ([`Anchor`]): the container, and
    /// its members read back from it in ascending order (one read-only transaction;
    /// they must be as many as when it was published), the update registered with this
    /// pool. The order of the members is not the preload's: each operation picks one
    /// uniformly, so the mix is the same.
    pub fn attach(pool: &Pool, a: &Anchor) -> pisces::Result<Self> {
        a.expect(S::UPDATE_OP, S::NAME)?;
        pool.register_op(S::UPDATE_OP, update::<S>)?;
        let set: S = bytemuck::cast(a.handle);
        let mut members = pool.read(|tx| set.keys(tx))?;
        members.sort_unstable();
        if members.len() as u64 != a.count {
            return Err(pisces::Error::Corrupt(
                format!(
                    "{}: {} members in the pool, {} published",
                    S::NAME,
                    members.len(),
                    a.count
                )
                .into(),
            ));
        }
        Ok(MemberSetBench { set, members })
    }
}

impl<S: SetContainer> DataSet for MemberSetBench<S> {
    fn anchor(&self) -> Option<Anchor> {
        Some(Anchor::new(
            S::UPDATE_OP,
            bytemuck::cast::<S, u64>(self.set),
            self.members.len() as u64,
        ))
    }

    fn op(
        &self,
        _worker: usize,
        h: &mut ThreadHandle,
        rng: &mut OpRng,
        update: bool,
    ) -> pisces::Result<u64> {
        let Some(&k) = self
            .members
            .get(pick(rng, self.members.len() as u64) as usize)
        else {
            return Ok(0);
        };
        let s = self.set;
        if update {
            let set = bytemuck::cast::<S, u64>(s);
            h.run_op_with(
                crate::workloads::update_options(),
                S::UPDATE_OP,
                &UpdateArgs { set, key: k },
            )?;
            Ok(SET_UPDATE_BYTES)
        } else {
            read_only_op(h, |tx| {
                s.find(tx, k)?.ok_or_else(|| missing_member(S::NAME, k))
            })
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::engines::Engine;
    use crate::testutil::file_pool;
    use rand::SeedableRng;

    /// The data set's test on every engine of the build: the preload holds exactly the
    /// members, `ops` operations (every `every`-th an update) keep them and report their
    /// changed bytes, and a lookup of a member removed behind the data set's back is an
    /// error.
    pub(crate) fn check_member_set<S: SetContainer>(
        keys: usize,
        seed: u64,
        ops: usize,
        every: usize,
    ) {
        if !Engine::PMDK.in_build() {
            println!("pmdk: skipped: pmdk not in this build");
        }
        for engine in Engine::available() {
            let name = engine.name();
            let (p, _dir) = file_pool(engine, 32 << 20, 2);
            let sb = MemberSetBench::<S>::build(&p, keys, seed).unwrap();
            let contents = |p: &Pool| {
                let pairs = p.run(|tx| sb.set.pairs(tx)).unwrap();
                assert!(pairs.iter().all(|&(_, m)| m == MEMBER), "{name}");
                let mut v: Vec<u64> = pairs.into_iter().map(|(k, _)| k).collect();
                v.sort_unstable();
                v
            };
            let mut want = sb.members.clone();
            want.sort_unstable();
            assert_eq!(contents(&p), want, "{name}: preloaded members");
            assert!(want.iter().all(|&k| k < 2 * keys as u64));
            let mut h = p.handle().unwrap();
            let mut rng = OpRng::seed_from_u64(seed + 1);
            for i in 0..ops {
                let update = i % every == 0;
                let changed = sb.op(0, &mut h, &mut rng, update).unwrap();
                assert_eq!(changed, if update { SET_UPDATE_BYTES } else { 0 });
            }
            drop(h);
            assert_eq!(contents(&p), want, "{name}: updates keep the set");
            p.run(|tx| sb.set.verify(tx)).unwrap();
            // A lookup whose key is gone is an error: its result is examined.
            p.run(|tx| sb.set.take(tx, sb.members[0]).map(|_| ()))
                .unwrap();
            let mut h = p.handle().unwrap();
            let e = (0..100_000)
                .find_map(|_| sb.op(0, &mut h, &mut rng, false).err())
                .expect("the missing member was never looked up");
            assert!(e.to_string().contains("is missing"), "{name}: {e}");
        }
    }

    #[test]
    fn updates_keep_the_set_and_reads_examine_their_result() {
        check_member_set::<Set>(1000, 5, 600, 2);
    }
}
