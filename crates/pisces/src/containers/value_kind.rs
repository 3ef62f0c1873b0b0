//! What a container's values own, as a code in its header: `pisces check --deep`
//! knows no types, so a map or tree records at creation whether its values are byte
//! strings, strings or vectors, whose blocks the deep check then walks. (Its own file:
//! it names the byte string and the vector types, which name each other's building
//! blocks only one way.)

use super::bytes::{PBytes, PString};
use super::vec::PVec;

/// What a container's values are, recorded in its header for `pisces check --deep`
/// (which knows no types): plain data (0), or handles to blocks the values own.
pub(crate) const VALUE_PLAIN: u64 = 0;
/// Values are [`PBytes`] handles.
pub(crate) const VALUE_BYTES: u64 = 1;
/// Values are [`PString`] handles.
pub(crate) const VALUE_STRING: u64 = 2;
/// Values are [`PVec`] handles.
pub(crate) const VALUE_VEC: u64 = 3;

/// The value kind of `V` (one of the `VALUE_*` codes). A value type that holds such
/// handles among other fields (a `pod!` struct) is plain to the deep check: it has no
/// way to find the handles in it.
pub(crate) fn value_kind<V: 'static>() -> u64 {
    use std::any::{type_name, TypeId};
    let id = TypeId::of::<V>();
    if id == TypeId::of::<PBytes>() {
        VALUE_BYTES
    } else if id == TypeId::of::<PString>() {
        VALUE_STRING
    } else if type_name::<PVec<u8>>()
        .strip_suffix("u8>")
        .is_some_and(|p| type_name::<V>().starts_with(p))
    {
        VALUE_VEC
    } else {
        VALUE_PLAIN
    }
}
