//! The rules for a pipeline's sources and outputs (root-Domain Ports) and
//! for `#[domain(parent = P)]`; see [`super`]. `#[pipeline]` calls
//! `<Parent as SourceRoot<D>>::source` by its trait path: rustc then reports
//! a child-Domain source without a note pointing into this file.

use crate::plan::domain::{Domain, NoParent};
use crate::plan::port::{OutputSet, Port};
use crate::plan::{Output, PlanBuilder};
use crate::value::Data;

// === sources and outputs ===

/// `Self` (the output Domain's parent) is `NoParent`: outputs are root Ports.
#[diagnostic::on_unimplemented(
    message = "`forward` returns a Port in `{D}`, a child Domain of `{Self}`",
    label = "a `{D}` Port",
    note = "a pipeline's outputs live in its root Domain: `reduce!` the `{D}` Port (once per level) and return the root-Domain Port"
)]
pub trait OutputRoot<D> {
    /// The builder's `output`.
    #[track_caller]
    fn output<T: Data>(b: &mut PlanBuilder, p: Port<D, T>) -> Output<T>;
}

#[diagnostic::do_not_recommend]
impl<D: Domain<Parent = NoParent>> OutputRoot<D> for NoParent {
    #[track_caller]
    fn output<T: Data>(b: &mut PlanBuilder, p: Port<D, T>) -> Output<T> {
        b.output(p)
    }
}

/// `Self` (the source Domain's parent) is `NoParent`: sources are root Ports.
#[diagnostic::on_unimplemented(
    message = "`forward` takes a source Port in `{D}`, a child Domain of `{Self}`",
    label = "a `{D}` source",
    note = "a pipeline's sources live in its root Domain: take the source there and `expand!` it down to `{D}`"
)]
pub trait SourceRoot<D> {
    /// The builder's `source`.
    #[track_caller]
    fn source<T: Data>(b: &mut PlanBuilder) -> Port<D, T>;
    /// The builder's `sources`.
    #[track_caller]
    fn sources<T: OutputSet + Data>(b: &mut PlanBuilder) -> T::Ports<D>;
}

#[diagnostic::do_not_recommend]
impl<D: Domain<Parent = NoParent>> SourceRoot<D> for NoParent {
    #[track_caller]
    fn source<T: Data>(b: &mut PlanBuilder) -> Port<D, T> {
        b.source::<D, T>()
    }
    #[track_caller]
    fn sources<T: OutputSet + Data>(b: &mut PlanBuilder) -> T::Ports<D> {
        b.sources::<D, T>()
    }
}

// === #[derive(Domain)] ===

/// A type named in `#[domain(parent = P)]`.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a rayorch Domain, so it cannot be a parent Domain",
    label = "not a Domain",
    note = "a parent Domain is a marker type of your crate declared with `#[derive(Domain)]` (`#[derive(Domain)] struct Pdf;`): name one in `#[domain(parent = ...)]`"
)]
pub trait DomainParent {
    /// `Self`.
    type Slot: crate::plan::domain::ParentSlot;
}

#[diagnostic::do_not_recommend]
impl<D: Domain> DomainParent for D {
    type Slot = D;
}
