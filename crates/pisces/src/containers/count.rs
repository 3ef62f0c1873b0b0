//! The striped element count of a container: `len` in O(1) of the container's size.
//!
//! One counter word written by every insert and remove would make every two
//! concurrent writers of a container conflict (snapshot isolation: two writers of one
//! object, and one of them retries). So the count is split into [`STRIPES`] counter
//! objects; a transaction adds its change to one of its thread's stripes, and `len`
//! sums all stripes.
//!
//! A thread slot owns a window of [`WINDOW`] consecutive stripes (slot `s` the
//! `s mod (STRIPES / WINDOW)`th: beyond `STRIPES / WINDOW` slots, windows are shared),
//! which its transactions write in turn, one per transaction. By slot, not by thread:
//! slots are unique among the processes that share a pool, where threads counted per
//! process would give the first thread of every process the same window, and their
//! every pair of counting transactions a conflict. One stripe per thread would
//! make each of a thread's counting transactions write the object its previous one
//! wrote: an engine that keeps a committed object locked until a batched write-back
//! (the `pisces` engine's group commit of up to 8 transactions) must then write its
//! batch back at every such transaction. In turn, a stripe is written again only
//! [`WINDOW`] transactions later, when such a batch has been written back.
//!
//! # Layout
//! ```text
//! table [u64; STRIPES]: the stripes' offsets
//! stripe [u64; STRIPE_WORDS]: word 0 the stripe's share of the count, the rest padding
//! ```
//! The engines detect write-write conflicts per object (the header word in front of
//! every object, or its version chain), so two threads on different stripes never
//! conflict on the count. A stripe is a cache line of payload so that neighbouring
//! stripes' home copies do not share a line either. A stripe's share is a wrapping
//! two's-complement number: a key inserted by one thread and removed by another adds
//! 1 to one stripe and -1 to another; only the sum is the count.
//!
//! Invariant: the sum of the stripes is the number of entries, in every committed
//! state: each insert of an absent key and each remove of a present one adds its ±1
//! in the same transaction as its change of the structure.

use crate::{Error, PPtr, Result, Tx};
use std::cell::Cell;

/// Counter objects per container.
pub(crate) const STRIPES: usize = 32;
/// Words per stripe object (word 0 is the count): 56 bytes of payload, which with
/// the object's 8-byte header fills a 64-byte line.
pub(crate) const STRIPE_WORDS: usize = 7;
type Table = [u64; STRIPES];
type Stripe = [u64; STRIPE_WORDS];

/// Stripes a thread writes in turn (at least the `pisces` engine's default group
/// commit, 8: see the module docs).
pub(crate) const WINDOW: usize = 8;

thread_local! {
    /// This thread's turn: which stripe of its slot's window its next count writes.
    static TURN: Cell<usize> = const { Cell::new(0) };
}

/// Allocate a zeroed count (table and stripes); returns the table's offset.
pub(crate) fn create(tx: &mut Tx<'_>) -> Result<u64> {
    let mut table: Table = [0; STRIPES];
    for s in &mut table {
        *s = tx.alloc_zeroed::<Stripe>()?.offset();
    }
    Ok(tx.alloc(table)?.offset())
}

/// Add `delta` to the count at `table`, in the transaction's stripe: this thread's
/// next one, chosen at the transaction's first count (writes that stripe only; the
/// transaction's later counts, in this container or another, use the same index, so
/// an update that removes and inserts writes one stripe object).
#[inline]
pub(crate) fn add(tx: &mut Tx<'_>, table: u64, delta: i64) -> Result<()> {
    let i = tx.count_stripe(|slot| {
        let t = TURN.get();
        TURN.set((t + 1) % WINDOW);
        (slot * WINDOW + t) % STRIPES
    });
    let stripe = tx.read(PPtr::<Table>::from_offset(table))?[i];
    let w = tx.write(PPtr::<Stripe>::from_offset(stripe))?;
    w[0] = w[0].wrapping_add_signed(delta);
    Ok(())
}

/// The count at `table`: the sum of its stripes (reads `STRIPES + 1` objects).
pub(crate) fn total(tx: &Tx<'_>, table: u64) -> Result<usize> {
    let t = tx.read(PPtr::<Table>::from_offset(table))?;
    let mut sum = 0u64;
    for &s in t {
        sum = sum.wrapping_add(tx.read(PPtr::<Stripe>::from_offset(s))?[0]);
    }
    usize::try_from(sum)
        .ok()
        .filter(|&n| n as u64 <= isize::MAX as u64)
        .ok_or_else(|| Error::corrupt(format!("the count at {table:#x} is negative")))
}

/// Call `f` with the table's and every stripe's offset (for `for_each_object`).
pub(crate) fn for_each_object(tx: &Tx<'_>, table: u64, mut f: impl FnMut(u64)) -> Result<()> {
    f(table);
    for &s in tx.read(PPtr::<Table>::from_offset(table))? {
        f(s);
    }
    Ok(())
}

// Windows tile the stripes: a thread's window never wraps into another's.
const _: () = assert!(STRIPES.is_multiple_of(WINDOW));
// A stripe index fits `Tx::count_stripe`'s byte.
const _: () = assert!(STRIPES < u8::MAX as usize);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::medium::DramMedium;
    use crate::{Config, Pool};
    use std::sync::Arc;

    /// The stripes' shares at `table`.
    fn shares(pool: &Pool, table: u64) -> Vec<u64> {
        pool.run(|tx| {
            let t = *tx.read(PPtr::<Table>::from_offset(table))?;
            t.iter()
                .map(|&s| Ok(tx.read(PPtr::<Stripe>::from_offset(s))?[0]))
                .collect()
        })
        .unwrap()
    }

    /// A transaction's counts all go to one stripe: two inserts and a remove write one
    /// stripe object, which holds their sum; the next transaction takes the thread's
    /// next stripe.
    #[test]
    fn a_transaction_counts_in_one_stripe() {
        let medium = Arc::new(DramMedium::anonymous(16 << 20, 0, 0).unwrap());
        let pool = Pool::create_on(medium, Config::default()).unwrap();
        let table = pool.run(create).unwrap();
        pool.run(|tx| {
            add(tx, table, 1)?;
            add(tx, table, 1)?;
            add(tx, table, -1)
        })
        .unwrap();
        let s = shares(&pool, table);
        assert_eq!(
            s.iter().filter(|&&v| v != 0).collect::<Vec<_>>(),
            [&1],
            "one stripe holds the transaction's sum: {s:?}"
        );
        pool.run(|tx| add(tx, table, 1)).unwrap();
        let t = shares(&pool, table);
        assert_eq!(t.iter().filter(|&&v| v == 1).count(), 2, "{t:?}");
        assert_eq!(pool.run(|tx| total(tx, table)).unwrap(), 2);
    }
}
