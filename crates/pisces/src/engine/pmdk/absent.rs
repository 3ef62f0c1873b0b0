//! Without libpmemobj the engine cannot exist: its states are an uninhabited type, so
//! the registry's dispatch arms for it compile to nothing.

use crate::engine::{DurableToken, Engine, EngineThread};
use crate::heap::Heap;
use crate::tx_options::TxOptions;
use crate::Result;
use std::sync::Arc;

/// No value of this type exists.
pub(crate) enum Absent {}

impl Engine for Absent {
    type Thread = Absent;
    fn thread(&self, _slot: usize) -> Result<Absent> {
        match *self {}
    }
    fn quiesce(&self) {
        match *self {}
    }
    fn heap(&self) -> Option<&Arc<Heap>> {
        match *self {}
    }
}

impl EngineThread for Absent {
    fn begin(&mut self, _opts: &TxOptions) {
        match *self {}
    }
    fn read(&self, _off: u64, _len: usize) -> Result<*const u8> {
        match *self {}
    }
    fn write(&mut self, _off: u64, _len: usize) -> Result<*mut u8> {
        match *self {}
    }
    fn alloc(&mut self, _len: usize) -> Result<u64> {
        match *self {}
    }
    fn free(&mut self, _off: u64) -> Result<()> {
        match *self {}
    }
    fn commit(&mut self) -> Result<DurableToken> {
        match *self {}
    }
    fn abort(&mut self) {
        match *self {}
    }
    fn quiesce(&mut self) {
        match *self {}
    }
    fn slot(&self) -> usize {
        match *self {}
    }
}
