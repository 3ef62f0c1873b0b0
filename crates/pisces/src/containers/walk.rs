//! The cycle guard every link-following walk of the containers uses.
//!
//! A damaged pool may link a chain or the leaf list back onto itself; a walk that
//! trusted the links would run forever. [`Walk`] is Brent's cycle detection: it keeps
//! one remembered node and compares each next node with it, moving the remembered node
//! forward at power-of-two step counts. A cycle is found within a few times its length
//! plus the length of the path into it, for one comparison and one counter per step, and
//! is reported as [`Error::Corrupt`].

use crate::{Error, Result};

/// Brent's cycle detection over a walk along links (see the module docs).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Walk {
    what: &'static str,
    mark: u64,
    power: u64,
    steps: u64,
}

impl Walk {
    /// A walk of `what` (for the message) starting at node `start`.
    #[inline]
    pub(crate) fn new(what: &'static str, start: u64) -> Walk {
        Walk {
            what,
            mark: start,
            power: 1,
            steps: 0,
        }
    }

    /// Record a step to `next` (non-null); `Err(Corrupt)` if the links form a cycle.
    #[inline]
    pub(crate) fn step(&mut self, next: u64) -> Result<()> {
        if next == self.mark {
            return Err(cycle(self.what, next));
        }
        self.steps += 1;
        if self.steps == self.power {
            self.mark = next;
            self.power *= 2;
            self.steps = 0;
        }
        Ok(())
    }
}

#[cold]
fn cycle(what: &str, at: u64) -> Error {
    Error::corrupt(format!(
        "{what}: the links through the node at {at:#x} form a cycle"
    ))
}
