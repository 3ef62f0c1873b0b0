//! [`pod!`](crate::pod!): plain-data structs declared with `pisces` alone.
//!
//! `bytemuck`'s derive macros, which the root re-exports with its traits, expand to
//! paths that start with `::bytemuck`, so they compile only in a crate that depends
//! on `bytemuck` itself. `pod!` checks what the derive of `Pod` checks and implements
//! the traits through `$crate`, so a crate whose one dependency is `pisces` can declare
//! its pool objects.

/// Declares structs that can be stored in a pool: each gets `#[repr(C)]`,
/// `#[derive(Clone, Copy)]` and implementations of [`Pod`](crate::Pod) and
/// [`Zeroable`](crate::Zeroable), with the checks `#[derive(bytemuck::Pod)]` makes,
/// from a crate that depends on `pisces` alone. Other attributes (documentation,
/// more derives) are kept; the macro sets `repr(C)` and derives `Clone` and `Copy`
/// itself, so do not write those.
///
/// ```
/// use pisces::{Config, PPtr, Pool};
///
/// pisces::pod! {
///     /// An account: a balance and the next account of a list.
///     #[derive(Debug, PartialEq)]
///     pub struct Account {
///         pub balance: u64,
///         pub next: PPtr<Account>,
///     }
///
///     /// Tuple structs too.
///     pub struct Pair(pub u32, pub u32);
/// }
///
/// # fn main() -> pisces::Result<()> {
/// # let dir = tempfile::tempdir().unwrap();
/// let pool = Pool::create(dir.path().join("pod.pool"), Config::new().size(32 << 20))?;
/// let root: PPtr<Account> = pool.root()?;
/// pool.run(|tx| {
///     tx.write(root)?.balance = 100;
///     Ok(())
/// })?;
/// let a = pool.run(|tx| Ok(*tx.read(root)?))?;
/// assert_eq!(a, Account { balance: 100, next: PPtr::null() });
/// assert_eq!(std::mem::size_of::<Pair>(), 8);
/// # Ok(()) }
/// ```
///
/// Every field must be `Pod` itself (numbers, arrays of them, [`PPtr`](crate::PPtr)s,
/// container handles, other `pod!` structs):
/// ```compile_fail,E0277
/// pisces::pod! {
///     pub struct Named { pub len: u64, pub name: &'static str }
/// }
/// ```
/// and the fields must fill the struct, without padding (bytes no field owns would
/// be stored and read uninitialised): order them largest alignment first, or add an
/// explicit filler field.
/// ```compile_fail,E0080
/// pisces::pod! {
///     pub struct Padded { pub flag: u8, pub value: u64 } // 7 bytes of padding
/// }
/// ```
/// Generic structs are not accepted (the checks need concrete field types).
#[macro_export]
macro_rules! pod {
    () => {};
    (
        $(#[$attr:meta])*
        $vis:vis struct $name:ident {
            $( $(#[$field_attr:meta])* $field_vis:vis $field:ident : $ty:ty ),* $(,)?
        }
        $($rest:tt)*
    ) => {
        $(#[$attr])*
        #[repr(C)]
        #[derive(Clone, Copy)]
        $vis struct $name {
            $( $(#[$field_attr])* $field_vis $field : $ty ),*
        }
        $crate::__pod_impls!($name; $($ty),*);
        $crate::pod! { $($rest)* }
    };
    (
        $(#[$attr:meta])*
        $vis:vis struct $name:ident (
            $( $(#[$field_attr:meta])* $field_vis:vis $ty:ty ),* $(,)?
        );
        $($rest:tt)*
    ) => {
        $(#[$attr])*
        #[repr(C)]
        #[derive(Clone, Copy)]
        $vis struct $name (
            $( $(#[$field_attr])* $field_vis $ty ),*
        );
        $crate::__pod_impls!($name; $($ty),*);
        $crate::pod! { $($rest)* }
    };
}

/// The checks and trait implementations of [`pod!`] for one struct (not API).
#[doc(hidden)]
#[macro_export]
macro_rules! __pod_impls {
    ($name:ident; $($ty:ty),*) => {
        // Every field is `Pod`: a type check that is never run.
        const _: fn() = || {
            #[allow(dead_code)] // a struct without fields calls it never
            fn field_is_pod<T: $crate::Pod>() {}
            $( field_is_pod::<$ty>(); )*
        };
        // No padding: under `repr(C)` the fields fill the struct exactly when their
        // sizes add up to its size.
        const _: () = ::core::assert!(
            ::core::mem::size_of::<$name>() == 0 $( + ::core::mem::size_of::<$ty>() )*,
            ::core::concat!(
                "pisces::pod!: `",
                ::core::stringify!($name),
                "` has padding bytes; order its fields largest alignment first or add a filler field"
            )
        );
        // SAFETY: every field is `Pod` (checked above), so all-zero bytes are a valid
        // value of each field, and the struct has no bytes outside its fields (no
        // padding, checked above).
        unsafe impl $crate::Zeroable for $name {}
        // SAFETY: `repr(C)` with `Pod` fields and no padding (checked above): every bit
        // pattern is a valid value, no byte is uninitialised, there is no interior
        // mutability and no reference (fields are `Pod`); `Copy` is derived, and a
        // non-generic struct of `'static` fields is `'static`.
        unsafe impl $crate::Pod for $name {}
    };
}

#[cfg(test)]
mod tests {
    crate::pod! {
        struct Empty {}
        struct Nested {
            inner: Inner,
            tail: [u16; 4],
        }
        struct Inner(u32, u32);
    }

    #[test]
    fn zeroed_and_cast_values_keep_their_fields() {
        let n: Nested = bytemuck::Zeroable::zeroed();
        assert_eq!((n.inner.0, n.inner.1, n.tail), (0, 0, [0; 4]));
        let bytes: [u8; 16] = *b"\x01\0\0\0\x02\0\0\0\x03\0\x04\0\x05\0\x06\0";
        let m: Nested = bytemuck::pod_read_unaligned(&bytes);
        assert_eq!((m.inner.0, m.inner.1, m.tail), (1, 2, [3, 4, 5, 6]));
        assert_eq!(std::mem::size_of::<Empty>(), 0);
        let _: Empty = bytemuck::Zeroable::zeroed();
    }
}
