//! The rule of `reduce!(x, keep_failed)`; see [`super`]. It is `reduce!`'s
//! own Domain rule ([`ReduceInto`]): only the gathered type differs.

use super::{ParentOf, ReduceInto};
use crate::plan::domain::Domain;
use crate::plan::port::Port;
use crate::value::{Cause, Data};

/// `reduce!(x, keep_failed)`.
#[track_caller]
pub fn reduce_keep_failed<C, T>(x: Port<C, T>) -> Port<ParentOf<C>, Vec<Result<T, Cause>>>
where
    C: Domain,
    T: Data,
    C::Parent: ReduceInto<C>,
{
    <C::Parent as ReduceInto<C>>::reduce_keep_failed(x)
}
