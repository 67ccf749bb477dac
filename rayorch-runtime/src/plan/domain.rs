//! Domains: the levels of a pipeline's hierarchy, as Rust types.
//!
//! A Domain is a zero-sized marker type (`Pdf`, `Page`). Each one names its
//! parent through [`Domain::Parent`]; root Domains use [`NoParent`]. The parent
//! relation is what the type checker uses to reject Domain mistakes:
//! [`ChildOf`] for `expand`/`reduce`, [`DescendantOf`] for `broadcast`.
//! Both are blanket-implemented from `Parent`, so a user only ever writes the
//! `Domain` impl (or `#[derive(Domain)]`).

use std::any::TypeId;
use std::marker::PhantomData;

pub mod typing_rules;

/// A level of the hierarchy: a finite, acyclic tree of Domains.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a rayorch Domain",
    label = "not a Domain",
    note = "a Domain is a marker type of your crate declared with `#[derive(Domain)]` (`#[derive(Domain)] struct Page;`, with `#[domain(parent = P)]` for a child Domain); use it in `Port<Domain, Value>` and `expand!(x => Domain)`"
)]
pub trait Domain: Send + Sync + 'static {
    /// The immediate parent Domain, or [`NoParent`] for a root Domain.
    type Parent: ParentSlot;
    /// The name shown in errors, logs and entity paths.
    const NAME: &'static str;
}

/// The `Parent` of a root Domain.
#[derive(Debug, Clone, Copy)]
pub enum NoParent {}

/// What may stand in [`Domain::Parent`]: another Domain or [`NoParent`].
pub trait ParentSlot: 'static {
    /// The parent's runtime description, `None` at a root.
    fn info() -> Option<DomainInfo>;
}

impl ParentSlot for NoParent {
    fn info() -> Option<DomainInfo> {
        None
    }
}

impl<D: Domain> ParentSlot for D {
    fn info() -> Option<DomainInfo> {
        Some(DomainInfo::of::<D>())
    }
}

/// `Self` is the immediate child Domain of `P`.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a child Domain of `{P}`",
    label = "`{Self}` does not declare `{P}` as its parent",
    note = "`expand!` enters a Domain whose parent is the input's Domain and `reduce!` returns to it: declare `#[domain(parent = {P})]` on `{Self}`, or expand from the Domain `{Self}` really belongs to"
)]
pub trait ChildOf<P: Domain>: Domain {}

impl<C, P> ChildOf<P> for C
where
    C: Domain<Parent = P>,
    P: Domain,
{
}

/// A root Domain: one without a parent.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a root Domain",
    label = "a pipeline's sources and results live in its root Domain",
    note = "`reduce!` every child-Domain Port back to the root before returning it"
)]
pub trait RootDomain: Domain {}

impl<D: Domain<Parent = NoParent>> RootDomain for D {}

/// Path marker: `A` is the immediate parent.
pub struct Here;
/// Path marker: `A` is an ancestor of the parent.
pub struct There<I>(PhantomData<I>);

/// `Self` lies strictly below the ancestor Domain `A`; `I` is the inferred path.
#[diagnostic::on_unimplemented(
    message = "`{A}` is not an ancestor Domain of `{Self}`",
    label = "`broadcast!` copies a value down the hierarchy, from an ancestor to its descendants",
    note = "broadcast from a Domain above `{Self}` (its parent, grandparent, ...); to bring child values up, use `reduce!`"
)]
pub trait DescendantOf<A: Domain, I>: Domain {}

impl<D, A> DescendantOf<A, Here> for D
where
    D: Domain<Parent = A>,
    A: Domain,
{
}

impl<D, A, I> DescendantOf<A, There<I>> for D
where
    D: Domain,
    D::Parent: DescendantOf<A, I>,
    A: Domain,
{
}

/// `Self` is not its own ancestor: its parents lead to a root Domain.
///
/// `#[derive(Domain)]` and [`domain!`](crate::domain!) check it where a child
/// Domain is declared (`<Parent as Acyclic>::CHECKED`), so that a cycle
/// (`A` parent of `B`, `B` parent of `A`) is a compile error there rather
/// than a plan that can never be built. The walk is bounded: a chain of more
/// than 32 Domains counts as a cycle.
#[diagnostic::on_unimplemented(
    message = "the Domain `{Self}` is its own ancestor: Domains form a tree",
    label = "this parent leads back to `{Self}`",
    note = "follow `#[domain(parent = ...)]` up from `{Self}`: one of the Domains on the way names a Domain below it as its parent; make the top of the hierarchy a root Domain, with no `parent`"
)]
pub trait Acyclic {
    /// Naming this constant checks the bound.
    const CHECKED: () = ();
}

#[diagnostic::do_not_recommend]
impl<D: Domain + RootWithin<Fuel>> Acyclic for D {}

/// One more step allowed up the parent chain.
pub struct Step<F>(PhantomData<F>);
/// No step left.
pub enum NoStep {}

/// 32 steps: deeper hierarchies than any pipeline needs.
type Fuel = Step<Step<Step<Step<Step<Step<Step<Step<Step<Step<Step<Step<Step<Step<Step<Step<Step<Step<Step<Step<
    Step<Step<Step<Step<Step<Step<Step<Step<Step<Step<Step<Step<NoStep>>>>>>>>>>>>>>>>>>>>>>>>>>>>>>>>;

/// `Self`'s parent chain reaches a root in the steps `F` allows.
pub trait RootWithin<F> {}

impl<F> RootWithin<F> for NoParent {}

impl<D: Domain, F> RootWithin<Step<F>> for D where D::Parent: RootWithin<F> {}

/// The runtime description of a Domain type.
#[derive(Debug, Clone, Copy)]
pub struct DomainInfo {
    /// The Domain's type identity.
    pub id: TypeId,
    /// Its display name.
    pub name: &'static str,
    parent: fn() -> Option<DomainInfo>,
}

impl PartialEq for DomainInfo {
    fn eq(&self, other: &Self) -> bool {
        self.id == other.id
    }
}
impl Eq for DomainInfo {}

impl DomainInfo {
    /// Describe the Domain type `D`.
    pub fn of<D: Domain>() -> DomainInfo {
        DomainInfo {
            id: TypeId::of::<D>(),
            name: D::NAME,
            parent: <D::Parent as ParentSlot>::info,
        }
    }

    /// The parent Domain, `None` for a root.
    pub fn parent(&self) -> Option<DomainInfo> {
        (self.parent)()
    }
}

/// Declare Domain marker types without the derive macro
/// (`#[derive(Domain)]`, with `#[domain(parent = Doc)]` for a child, is the
/// form a `#[pipeline]` uses).
///
/// ```
/// rayorch::domain!(Doc);
/// rayorch::domain!(Page: Doc);
/// fn needs_child<C: rayorch::ChildOf<P>, P: rayorch::Domain>() {}
/// needs_child::<Page, Doc>();
/// ```
#[macro_export]
macro_rules! domain {
    ($(#[$m:meta])* $vis:vis $name:ident) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy)]
        $vis struct $name;
        #[diagnostic::do_not_recommend]
        impl $crate::Domain for $name {
            type Parent = $crate::NoParent;
            const NAME: &'static str = stringify!($name);
        }
    };
    ($(#[$m:meta])* $vis:vis $name:ident : $parent:ty) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy)]
        $vis struct $name;
        #[diagnostic::do_not_recommend]
        impl $crate::Domain for $name {
            type Parent = $parent;
            const NAME: &'static str = stringify!($name);
        }
        const _: () = <$parent as $crate::domain::Acyclic>::CHECKED;
    };
}
