//! The objects C holds by pointer (`pisces_pool *`, `pisces_handle *`), kept in tables
//! the library can check, so that a closed object used again — a second close, a call
//! after close, a `pisces_tx` of a closed handle — is refused with `PISCES_ECLOSED`
//! instead of reading freed memory.
//!
//! # Design
//! The pointer C gets is not an address but a token: the object's slot index (plus
//! one, so never 0) in the low 32 bits and the slot's stamp in the high 32. A slot's
//! stamp is odd while it holds an object and is bumped at insert and at remove, so a
//! token names one object for good: after its object is removed, no later object of
//! the slot has its stamp (until the stamp wraps, after 2^31 objects in that slot).
//!
//! Slots live in chunks that are allocated on demand and never freed, so checking a
//! token reads only memory that stays allocated for the life of the process: the
//! chunk pointer, then the slot's stamp; the object is touched only if the stamp
//! matches. That is the hot path of every call that takes a handle (two Acquire loads
//! and a compare, no lock). Insert and remove take the table's mutex (open and close
//! only).
//!
//! A check protects against a closed object used *after* its close returned. A close
//! that runs while another thread still uses the object breaks the callers' contract,
//! as before: the other thread may hold a reference into the slot that the close
//! invalidates.

use std::cell::UnsafeCell;
use std::mem::MaybeUninit;
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use std::sync::atomic::{AtomicPtr, AtomicU32};
use std::sync::Mutex;

// A token is an index and a stamp of 32 bits each, carried in a pointer.
const _: () = assert!(usize::BITS == 64, "the C ABI needs 64-bit pointers");

/// Slots per chunk.
const CHUNK: usize = 256;
/// Chunks per table: at most `CHUNKS * CHUNK` (1 Mi) objects of a kind open at once.
const CHUNKS: usize = 4096;

struct Slot<T> {
    /// Odd: the slot holds an object; even: free.
    stamp: AtomicU32,
    value: UnsafeCell<MaybeUninit<T>>,
}

type Chunk<T> = [Slot<T>; CHUNK];

/// A table of objects named by tokens (module docs).
pub(crate) struct Table<T> {
    chunks: [AtomicPtr<Chunk<T>>; CHUNKS],
    /// Free slots and the number of slots ever used (insert and remove only).
    free: Mutex<(Vec<u32>, u32)>,
}

// SAFETY: the table hands out shared references to its objects on any thread
// (`get`), and moves them out on any thread (`remove`). Pools are `Send + Sync`; a
// handle is used by one thread at a time, which the C contract of every function
// taking one requires (a program that passes it to another thread synchronizes, as
// with a mutex or a join), so its non-`Sync` cells are never accessed from two
// threads at once, and its transaction state is ended on the thread that began it
// before it is removed (`pisces_handle_close` checks).
unsafe impl<T> Sync for Table<T> {}

/// Why a token was refused.
pub(crate) struct Closed;

impl<T> Table<T> {
    pub(crate) const fn new() -> Table<T> {
        Table {
            chunks: [const { AtomicPtr::new(std::ptr::null_mut()) }; CHUNKS],
            free: Mutex::new((Vec::new(), 0)),
        }
    }

    /// The slot at `index`, if its chunk exists.
    fn slot(&self, index: usize) -> Option<&Slot<T>> {
        let chunk = self.chunks.get(index / CHUNK)?.load(Acquire);
        // SAFETY: a non-null chunk pointer was stored (Release, after the chunk was
        // initialized) by `insert` from a leaked `Box`: it stays valid and initialized
        // for the life of the process, and is only ever accessed through shared
        // references (the stamps are atomics, the values in `UnsafeCell`s).
        unsafe { chunk.as_ref() }.map(|c| &c[index % CHUNK])
    }

    /// Store `value` in a free slot; its token.
    pub(crate) fn insert(&self, value: T) -> Result<usize, T> {
        let mut free = self.free.lock().unwrap_or_else(|e| e.into_inner());
        let index = match free.0.pop() {
            Some(i) => i as usize,
            None => {
                let i = free.1 as usize;
                if i >= CHUNK * CHUNKS {
                    return Err(value);
                }
                if i.is_multiple_of(CHUNK) {
                    let chunk: Box<Chunk<T>> = Box::new(std::array::from_fn(|_| Slot {
                        stamp: AtomicU32::new(0),
                        value: UnsafeCell::new(MaybeUninit::uninit()),
                    }));
                    // Release: a thread that loads the pointer (Acquire, `slot`) sees
                    // the chunk initialized.
                    self.chunks[i / CHUNK].store(Box::into_raw(chunk), Release);
                }
                free.1 += 1;
                i
            }
        };
        let Some(slot) = self.slot(index) else {
            unreachable!("the chunk of a used slot exists");
        };
        // SAFETY: the slot is free (its index came from the free list or is new), so
        // no token names it and no reference to its value exists; the mutex keeps
        // other inserts and removes away.
        unsafe { (*slot.value.get()).write(value) };
        let stamp = slot.stamp.load(Relaxed).wrapping_add(1);
        // Release: a thread that checks the token (Acquire in `get`) sees the value.
        slot.stamp.store(stamp, Release);
        Ok((stamp as usize) << 32 | (index + 1))
    }

    /// The object of `token`, or `Closed` if the token names none now (removed, never
    /// issued, or not a token at all).
    ///
    /// # Safety
    /// The object is not removed while the returned reference lives (the C contract:
    /// no close of an object while another call uses it).
    #[inline]
    pub(crate) unsafe fn get(&self, token: usize) -> Result<&T, Closed> {
        let (slot, _) = self.checked(token)?;
        // SAFETY: the stamp matched (Acquire, pairs with `insert`'s Release): the slot
        // holds an initialized object, which stays until `remove` (contract).
        Ok(unsafe { (*slot.value.get()).assume_init_ref() })
    }

    /// The slot `token` names and its stamp, if the slot holds that object now.
    #[inline]
    fn checked(&self, token: usize) -> Result<(&Slot<T>, u32), Closed> {
        let index = (token & 0xffff_ffff).wrapping_sub(1);
        let stamp = (token >> 32) as u32;
        let slot = self.slot(index).ok_or(Closed)?;
        // Acquire: pairs with `insert`'s Release (the value is initialized).
        if stamp & 1 == 0 || slot.stamp.load(Acquire) != stamp {
            return Err(Closed);
        }
        Ok((slot, stamp))
    }

    /// Take the object of `token` out of the table (then its token is refused for
    /// good).
    ///
    /// # Safety
    /// No reference from [`Table::get`] to the object is alive, and no call on another
    /// thread uses it meanwhile (the C contract of close).
    pub(crate) unsafe fn remove(&self, token: usize) -> Result<T, Closed> {
        let mut free = self.free.lock().unwrap_or_else(|e| e.into_inner());
        let (slot, stamp) = self.checked(token)?;
        // The token is refused from here on; the value is moved out below.
        slot.stamp.store(stamp.wrapping_add(1), Relaxed);
        // SAFETY: the stamp matched, so the value is initialized; no reference to it is
        // alive (contract), and the even stamp keeps `get` from making one; it is read
        // out once and the slot is then free.
        let value = unsafe { (*slot.value.get()).assume_init_read() };
        free.0.push((token & 0xffff_ffff) as u32 - 1);
        Ok(value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_names_one_object_for_good() {
        static T: Table<String> = Table::new();
        let a = T.insert("a".to_string()).ok().unwrap();
        // SAFETY: nothing removes the objects while the references live.
        unsafe {
            assert_eq!(T.get(a).ok().unwrap(), "a");
            assert_eq!(T.remove(a).ok().unwrap(), "a");
            assert!(T.get(a).is_err(), "a removed object");
            assert!(T.remove(a).is_err(), "removed twice");
            let b = T.insert("b".to_string()).ok().unwrap();
            assert_ne!(a, b, "the slot's next object has another token");
            assert!(T.get(a).is_err() && T.get(b).is_ok());
            for bad in [
                0,
                1,
                usize::MAX,
                0x1234_5678_9abc_def0,
                b ^ (1 << 33),
                b + 1,
            ] {
                assert!(T.get(bad).is_err(), "{bad:#x}");
            }
        }
    }
}
