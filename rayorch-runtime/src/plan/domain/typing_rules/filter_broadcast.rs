//! The rules of `filter!` and `broadcast!`; see [`super`].

use crate::plan::domain::{DescendantOf, Domain};
use crate::plan::port::Port;
use crate::value::Data;

// === filter! and broadcast! ===

same_domain_trait! {
    /// A `filter!` mask in the filtered Port's Domain `D`.
    #[diagnostic::on_unimplemented(
        message = "the `filter!` mask is in Domain `{Self}`, but the filtered Port is in `{D}`",
        label = "a `{Self}` Port",
        note = "compute the mask in `{D}`: bring an ancestor mask down with `broadcast!(mask, like = x)`, or apply the mask's Call to a `{D}` Port"
    )]
    MaskDomain
}

/// What a `filter!` mask carries.
#[diagnostic::on_unimplemented(
    message = "`filter!` needs a mask of `bool`, but this Port carries `{Self}`",
    label = "carries `{Self}`, not `bool`",
    note = "turn the value into a `bool` with a Call first (e.g. `Call::map(\"keep\", |x: T| ...)`): `true` keeps the Entity, `false` drops it"
)]
pub trait MaskValue: Sized {
    /// Identity on `bool`.
    #[track_caller]
    fn mask<D>(p: Port<D, Self>) -> Port<D, bool>;
}

#[diagnostic::do_not_recommend]
impl MaskValue for bool {
    #[track_caller]
    fn mask<D>(p: Port<D, bool>) -> Port<D, bool> {
        p
    }
}

/// `filter!(x, mask)`.
#[track_caller]
pub fn filter<D, T, Dm, M>(x: Port<D, T>, mask: Port<Dm, M>) -> Port<D, T>
where
    D: Domain,
    T: Data,
    Dm: MaskDomain<D>,
    M: MaskValue,
{
    crate::plan::port::filter(x, M::mask(Dm::cast(mask)))
}

/// `Self` (the broadcast value's Domain) is an ancestor of `D`.
#[diagnostic::on_unimplemented(
    message = "`broadcast!` copies a value down from an ancestor Domain, but `{Self}` is not an ancestor of `{D}`",
    label = "a `{Self}` Port",
    note = "broadcast a Port of a Domain above `{D}` (its parent, grandparent, ...); to bring values of child Entities up, use `reduce!`"
)]
pub trait BroadcastFrom<D, I>: Sized {
    /// The typed builder's `broadcast`.
    #[track_caller]
    fn broadcast<T: Data, U>(x: Port<Self, T>, like: Port<D, U>) -> Port<D, T>;
}

#[diagnostic::do_not_recommend]
impl<A: Domain, D: DescendantOf<A, I>, I> BroadcastFrom<D, I> for A {
    #[track_caller]
    fn broadcast<T: Data, U>(x: Port<A, T>, like: Port<D, U>) -> Port<D, T> {
        crate::plan::port::broadcast(x, like)
    }
}

/// `broadcast!(x, like = y)`.
#[track_caller]
pub fn broadcast<A, D, T, U, I>(x: Port<A, T>, like: Port<D, U>) -> Port<D, T>
where
    A: BroadcastFrom<D, I>,
    T: Data,
{
    A::broadcast(x, like)
}
