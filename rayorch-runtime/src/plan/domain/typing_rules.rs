//! The Domain typing rules `#[pipeline]` checks at compile time, one trait per rule.
//!
//! Each trait below is a rule a pipeline must follow; its error message is the
//! text rustc prints when `forward` breaks it. The functions are what the
//! macro rewrites each operation into; they are public so that rustc can name
//! them in an error (`required by a bound in inputs2`), not to be called.
//!
//! The macro rewrites each operation in `forward` into a call to one of the
//! functions below, spanned at the token the user would have to change. Each
//! function forwards to the typed builder ([`crate::expand`], [`crate::Call::apply`],
//! ...) but states its requirement through a trait of this module, so that a
//! mistake becomes *one* `E0277` whose text is the trait's
//! `#[diagnostic::on_unimplemented]` message: it names both Domains (or both
//! types) and says what to write instead. rustc points at the argument whose
//! type breaks the bound, so each requirement is phrased on the argument the
//! user should change.
//!
//! Three rules keep that to one error per mistake:
//! - A relation is a trait implemented by unification only
//!   (`impl<D: Domain> SameCallDomain<D> for D`): a blanket impl whose
//!   where-clause fails makes rustc report that where-clause (or a projection
//!   mismatch) instead of our message.
//! - A check whose failure would make a later call fail again is a
//!   *pass-through*: it returns its input as an associated type of the failing
//!   trait (`Same<X> = X`). When the trait is not implemented that type is an
//!   error type, and rustc stays silent about everything built on it.
//! - No generated `let` holds a checked value: a binding of an error type is
//!   reported a second time, at the binding.
//!
//! Nothing here adds behaviour: with the bounds satisfied every function is the
//! builder call it wraps. Every function is `#[track_caller]`, down to the
//! builder: a node records where the user wrote its operation (the macro
//! spans each call at the user's token), and a plan error names that line.

#![expect(
    clippy::type_complexity,
    reason = "each check returns one Port type per input or output it passes on"
)]

use std::marker::PhantomData;

use crate::plan::call::Call;
use crate::plan::domain::{Domain, NoParent};
use crate::plan::port::{Inputs, Optional, OutputSet, Port};
use crate::stage::Assemble;
use crate::stage::StageKind;
use crate::value::{Cause, Data, Value};

mod roots;
pub use roots::*;

/// Declares a Domain-equality trait: implemented only for `D` itself, with a
/// cast of a Port into `D` (identity) for the generic function that checks it.
macro_rules! same_domain_trait {
    ($(#[$meta:meta])* $name:ident) => {
        $(#[$meta])*
        pub trait $name<D> {
            /// Identity: `Self` is `D`.
            #[track_caller]
            fn cast<T>(p: Port<Self, T>) -> Port<D, T>
            where
                Self: Sized;
        }

        #[diagnostic::do_not_recommend]
        impl<D: Domain> $name<D> for D {
            #[track_caller]
            fn cast<T>(p: Port<D, T>) -> Port<D, T> {
                p
            }
        }
    };
}

// === Calls ===

/// A struct field that `self.field(ports)` can apply inside `forward`.
#[diagnostic::on_unimplemented(
    message = "this field is a `{Self}`, not a `Call<_>`, so `#[pipeline]` cannot apply it",
    label = "not a `Call<_>`",
    note = "inside `forward`, `self.name(port)` applies the Call stored in field `name`: declare that field as `Call<YourStage>` (e.g. `Call::map(\"name\", f)`); to call a method instead, write `Self::name(self, port)`"
)]
pub trait CallField {
    /// The Call's stage.
    type Stage: StageKind;
    /// The pass-through type of [`call_field`].
    type Same<X>;
    /// Identity.
    #[track_caller]
    fn same<X>(x: X) -> Self::Same<X>;
}

#[diagnostic::do_not_recommend]
impl<S: StageKind> CallField for Call<S> {
    type Stage = S;
    type Same<X> = X;
    #[track_caller]
    fn same<X>(x: X) -> X {
        x
    }
}

/// The input type of a Call field's stage.
pub type StageIn<C> = <<C as CallField>::Stage as StageKind>::In;

/// `self.field` in `self.field(...)`: the field must be a `Call<_>`.
#[track_caller]
pub fn call_field<C: CallField>(field: &C) -> C::Same<&C> {
    C::same(field)
}

/// What a Call input may be: a Port or an `.optional()` Port.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a Port, so it cannot be a Call input",
    label = "not a Port",
    note = "pass a Port made inside `forward` (a source parameter, a Call's result, or an `expand!`/`reduce!`/`filter!`/`broadcast!`), or `port.optional()`"
)]
pub trait CallInput: Sized {
    /// The Domain the input lives in.
    type Domain;
    /// The same input, typed in Domain `D`.
    type In<D>;
    /// Identity.
    #[track_caller]
    fn same(self) -> Self::In<Self::Domain>;
}

#[diagnostic::do_not_recommend]
impl<Dp, T> CallInput for Port<Dp, T> {
    type Domain = Dp;
    type In<D> = Port<D, T>;
    #[track_caller]
    fn same(self) -> Port<Dp, T> {
        self
    }
}

#[diagnostic::do_not_recommend]
impl<Dp, T> CallInput for Optional<Dp, T> {
    type Domain = Dp;
    type In<D> = Optional<D, T>;
    #[track_caller]
    fn same(self) -> Optional<Dp, T> {
        self
    }
}

/// A later Call input's Domain `Self`, which must be the first input's `D`.
#[diagnostic::on_unimplemented(
    message = "this Call input is in Domain `{Self}`, but the Call's first input is in `{D}`",
    label = "a `{Self}` Port",
    note = "all inputs of one Call are Ports of one Domain: bring an ancestor value down with `broadcast!(x, like = y)`, or gather child values up with `reduce!(x)`, before the Call"
)]
pub trait SameCallDomain<D> {
    /// `D`; an error type when the Domains differ, so that the Call's
    /// result (in no Domain) reports nothing further.
    type Target;
    /// Identity: a later input, in `Target`.
    #[track_caller]
    fn later<P: CallInput<Domain = Self>>(p: P) -> P::In<Self::Target>;
    /// Identity: the first input, in `Target`.
    #[track_caller]
    fn first<P: CallInput<Domain = D>>(p: P) -> P::In<Self::Target>;
}

#[diagnostic::do_not_recommend]
impl<D: Domain> SameCallDomain<D> for D {
    type Target = D;
    #[track_caller]
    fn later<P: CallInput<Domain = D>>(p: P) -> P::In<D> {
        p.same()
    }
    #[track_caller]
    fn first<P: CallInput<Domain = D>>(p: P) -> P::In<D> {
        p.same()
    }
}

/// The Domain a Call with first input `A` and later input `B` runs in.
type CallDomain<A, B> = <<B as CallInput>::Domain as SameCallDomain<<A as CallInput>::Domain>>::Target;

/// `self.call(a, b)`: the inputs as one tuple, typed in the Call's Domain.
#[track_caller]
pub fn inputs2<A, B>(a: A, b: B) -> (A::In<CallDomain<A, B>>, B::In<CallDomain<A, B>>)
where
    A: CallInput,
    B: CallInput,
    B::Domain: SameCallDomain<A::Domain>,
{
    (
        <B::Domain as SameCallDomain<A::Domain>>::first(a),
        <B::Domain as SameCallDomain<A::Domain>>::later(b),
    )
}

// With three or four inputs the first one takes the second one's check: a
// mismatch in the third or fourth is reported just the same, but the Call's
// result may then be checked once more downstream.

/// `self.call(a, b, c)`; see [`inputs2`].
#[track_caller]
pub fn inputs3<A, B, C>(
    a: A,
    b: B,
    c: C,
) -> (
    A::In<CallDomain<A, B>>,
    B::In<CallDomain<A, B>>,
    C::In<CallDomain<A, C>>,
)
where
    A: CallInput,
    B: CallInput,
    C: CallInput,
    B::Domain: SameCallDomain<A::Domain>,
    C::Domain: SameCallDomain<A::Domain>,
{
    (
        <B::Domain as SameCallDomain<A::Domain>>::first(a),
        <B::Domain as SameCallDomain<A::Domain>>::later(b),
        <C::Domain as SameCallDomain<A::Domain>>::later(c),
    )
}

/// `self.call(a, b, c, d)`; see [`inputs2`].
#[track_caller]
pub fn inputs4<A, B, C, E>(
    a: A,
    b: B,
    c: C,
    e: E,
) -> (
    A::In<CallDomain<A, B>>,
    B::In<CallDomain<A, B>>,
    C::In<CallDomain<A, C>>,
    E::In<CallDomain<A, E>>,
)
where
    A: CallInput,
    B: CallInput,
    C: CallInput,
    E: CallInput,
    B::Domain: SameCallDomain<A::Domain>,
    C::Domain: SameCallDomain<A::Domain>,
    E::Domain: SameCallDomain<A::Domain>,
{
    (
        <B::Domain as SameCallDomain<A::Domain>>::first(a),
        <B::Domain as SameCallDomain<A::Domain>>::later(b),
        <C::Domain as SameCallDomain<A::Domain>>::later(c),
        <E::Domain as SameCallDomain<A::Domain>>::later(e),
    )
}
/// A stage input type `In` that a Port value `Self` can be passed as.
#[diagnostic::on_unimplemented(
    message = "this Call's stage takes `{In}`, but its input carries `{Self}`",
    label = "carries `{Self}`",
    note = "give the Call a Port of `{In}`: several inputs arrive as one tuple in argument order and an `.optional()` input as `Option<T>`; `expand!` turns a list into child values, `reduce!` gathers children into a `Vec`"
)]
pub trait StageTakes<In> {
    /// Identity.
    #[track_caller]
    fn take(self) -> In;
}

#[diagnostic::do_not_recommend]
impl<T> StageTakes<T> for T {
    #[track_caller]
    fn take(self) -> T {
        self
    }
}

/// A Call's inputs whose values its stage takes, with the function that
/// reads them as the stage's input. Returned by [`stage_input`] and
/// [`stage_inputs`] whether or not their check passed: a concrete type, so
/// that [`apply`] adds no second error about the same values.
pub struct Checked<I, In> {
    inputs: I,
    assemble: Assemble<In>,
}

fn assemble_taken<D, I: Inputs<D>, In>(g: &mut std::vec::IntoIter<Option<Value>>) -> Option<In>
where
    I::Value: StageTakes<In>,
{
    I::assemble(g).map(StageTakes::take)
}

/// `self.call(x)`: `x`'s value is the stage's input type; reported at `x`.
#[track_caller]
pub fn stage_input<C, D, I>(_field: &C, inputs: I) -> Checked<I, StageIn<C>>
where
    C: CallField,
    D: Domain,
    I: Inputs<D>,
    I::Value: StageTakes<StageIn<C>>,
{
    Checked {
        inputs,
        assemble: assemble_taken::<D, I, StageIn<C>>,
    }
}

/// [`StageTakes`] seen from the stage: `Self` is the stage's input type.
#[diagnostic::on_unimplemented(
    message = "this Call's stage takes `{Self}`, but its inputs carry `{V}`",
    label = "takes `{Self}`",
    note = "give the Call Ports whose values form `{Self}`, one Port per tuple field in order (an `.optional()` input arrives as `Option<T>`), or change the stage's input type"
)]
pub trait StageAccepts<V>: Sized {
    /// Identity.
    #[track_caller]
    fn accept(v: V) -> Self;
}

#[diagnostic::do_not_recommend]
impl<T> StageAccepts<T> for T {
    #[track_caller]
    fn accept(v: T) -> T {
        v
    }
}

/// A second impl of [`StageAccepts`] for every type, never usable: with two
/// candidates rustc waits until the inputs' value type is known and then
/// reports the trait's message, where one candidate would make it equate the
/// two types early and report a bare projection mismatch.
#[doc(hidden)]
pub struct Undecided<T>(std::convert::Infallible, PhantomData<T>);

#[diagnostic::do_not_recommend]
impl<T> StageAccepts<Undecided<T>> for T {
    #[track_caller]
    fn accept(v: Undecided<T>) -> T {
        match v.0 {}
    }
}

fn assemble_accepted<D, I: Inputs<D>, In>(g: &mut std::vec::IntoIter<Option<Value>>) -> Option<In>
where
    In: StageAccepts<I::Value>,
{
    I::assemble(g).map(In::accept)
}

/// `self.call(a, b)`: the inputs' values form the stage's input type;
/// reported at the Call's field, since no single input is the wrong one.
#[track_caller]
pub fn stage_inputs<C, D, I>(_field: &C, inputs: I) -> Checked<I, StageIn<C>>
where
    C: CallField,
    D: Domain,
    I: Inputs<D>,
    StageIn<C>: StageAccepts<I::Value>,
{
    Checked {
        inputs,
        assemble: assemble_accepted::<D, I, StageIn<C>>,
    }
}

/// `self.call(a)` / `self.call(a, b)`: apply a Call.
#[track_caller]
pub fn apply<S, D, I>(call: &Call<S>, inputs: Checked<I, S::In>) -> Port<D, S::Out>
where
    S: StageKind,
    S::Out: Data,
    D: Domain,
    I: Inputs<D>,
{
    call.apply_assembled(inputs.inputs, inputs.assemble)
}

/// A stage output that `split!` can turn into one Port per field.
#[diagnostic::on_unimplemented(
    message = "`split!` needs a stage whose output is a tuple, but this stage returns `{Self}`",
    label = "returns `{Self}`",
    note = "drop `split!` to get one Port of `{Self}`, or make the stage return a tuple `(A, B)` or `(A, B, C)`"
)]
pub trait SplitOutput: OutputSet {}

#[diagnostic::do_not_recommend]
impl<A: Data, B: Data> SplitOutput for (A, B) {}
#[diagnostic::do_not_recommend]
impl<A: Data, B: Data, C: Data> SplitOutput for (A, B, C) {}

/// `split!(self.call(a))`: apply a Call whose stage returns a tuple.
#[track_caller]
pub fn apply_split<S, D, I>(call: &Call<S>, inputs: Checked<I, S::In>) -> <S::Out as OutputSet>::Ports<D>
where
    S: StageKind,
    S::Out: SplitOutput,
    D: Domain,
    I: Inputs<D>,
{
    call.apply_split_assembled(inputs.inputs, inputs.assemble)
}

// === expand! ===

/// A Port value `expand!` can split into child Entities.
#[diagnostic::on_unimplemented(
    message = "`expand!` needs a Port of a list, but this Port carries `{Self}`",
    label = "not a list",
    note = "expand a Port of `Vec<T>` (or any `IntoIterator` of `Clone + Send + Sync` items): each element becomes one child Entity, in order"
)]
pub trait ExpandList: Data {
    /// One child's value.
    type Item: Data;
    /// `Self`, as a list. Not a supertrait: rustc would then check
    /// `IntoIterator` first and report it with the standard library's text.
    type List: IntoIterator<Item = Self::Item> + Data;
    /// Identity.
    #[track_caller]
    fn list<P>(x: Port<P, Self>) -> Port<P, Self::List>;
}

#[diagnostic::do_not_recommend]
impl<I> ExpandList for I
where
    I: IntoIterator + Data,
    I::Item: Data,
{
    type Item = I::Item;
    type List = I;
    #[track_caller]
    fn list<P>(x: Port<P, I>) -> Port<P, I> {
        x
    }
}

/// `C`'s parent is `Self`, which must be the input's Domain `P`.
#[diagnostic::on_unimplemented(
    message = "`expand!` cannot enter `{C}` from a `{P}` Port: `{C}` is not a child Domain of `{P}`",
    label = "not a child Domain of `{P}`",
    note = "the parent Domain of `{C}` is `{Self}`: expand a `{Self}` Port into `{C}`, or enter a Domain declared with `#[domain(parent = {P})]`"
)]
pub trait ExpandFrom<C, P> {
    /// `C`; an error type when `C` is not a child of `P`.
    type Child;
    /// The typed builder's `expand`.
    #[track_caller]
    fn expand<I: ExpandList>(x: Port<P, I>) -> Port<Self::Child, I::Item>;
    /// The typed builder's `expand_aligned`.
    #[track_caller]
    fn expand_aligned<A: ExpandList, B: ExpandList>(
        a: Port<P, A>,
        b: Port<P, B>,
    ) -> (Port<Self::Child, A::Item>, Port<Self::Child, B::Item>);
}

#[diagnostic::do_not_recommend]
impl<C: Domain<Parent = P>, P: Domain> ExpandFrom<C, P> for P {
    type Child = C;
    #[track_caller]
    fn expand<I: ExpandList>(x: Port<P, I>) -> Port<C, I::Item> {
        crate::plan::port::expand::<C, P, I::List>(I::list(x))
    }
    #[track_caller]
    fn expand_aligned<A: ExpandList, B: ExpandList>(
        a: Port<P, A>,
        b: Port<P, B>,
    ) -> (Port<C, A::Item>, Port<C, B::Item>) {
        crate::plan::port::expand_aligned::<C, P, A::List, B::List>((A::list(a), B::list(b)))
    }
}

/// The Domain `expand!` from `P` into `C` lands in.
pub type ChildOf<C, P> = <<C as Domain>::Parent as ExpandFrom<C, P>>::Child;

/// `expand!` from a `P` Port. The macro takes `P` from a reference to the
/// input first, so that rustc knows it before checking the child: inferred
/// together, rustc would take `P` from the child's declared parent and report
/// a type mismatch instead of our message.
pub struct Expansion<P>(PhantomData<fn() -> P>);

/// The Domain of `expand!`'s input.
#[track_caller]
pub fn expansion<P, I>(_input: &Port<P, I>) -> Expansion<P> {
    Expansion(PhantomData)
}

// The child comes as an argument (`PhantomData<C>`) so that a wrong child is
// reported at the user's `C`, and the list type is a parameter of the method,
// not of `Expansion`: a bound on the receiver's own parameters would turn a
// non-list into "method exists but its trait bounds were not satisfied".
impl<P> Expansion<P> {
    /// `expand!(x => C)`.
    #[track_caller]
    pub fn into_child<C, I, T>(self, _child: PhantomData<C>, x: Port<P, I>) -> Port<ChildOf<C, P>, T>
    where
        I: ExpandList<Item = T>,
        C: Domain,
        C::Parent: ExpandFrom<C, P>,
    {
        <C::Parent as ExpandFrom<C, P>>::expand(x)
    }

    /// `expand_aligned!((a, b) => C)`.
    #[track_caller]
    pub fn into_children<C, Pb, A, B, Ta, Tb>(
        self,
        _child: PhantomData<C>,
        a: Port<P, A>,
        b: Port<Pb, B>,
    ) -> (Port<ChildOf<C, P>, Ta>, Port<ChildOf<C, P>, Tb>)
    where
        A: ExpandList<Item = Ta>,
        B: ExpandList<Item = Tb>,
        Pb: AlignedDomain<P>,
        C: Domain,
        C::Parent: ExpandFrom<C, P>,
    {
        <C::Parent as ExpandFrom<C, P>>::expand_aligned(a, Pb::cast(b))
    }
}

same_domain_trait! {
    /// The second Port of an aligned operation, in the first one's Domain `D`.
    #[diagnostic::on_unimplemented(
        message = "aligned Ports must share one Domain, but this one is in `{Self}` and the first is in `{D}`",
        label = "a `{Self}` Port",
        note = "`expand_aligned!`/`reduce_aligned!` pair up values of the same Entities: pass two Ports of `{D}`"
    )]
    AlignedDomain
}

// === reduce! ===

/// `Self` is the parent of the reduced Domain `C` (fails for a root `C`).
#[diagnostic::on_unimplemented(
    message = "`reduce!` gathers a child Domain into its parent, but `{C}` is a root Domain",
    label = "a Port of root Domain `{C}`",
    note = "`reduce!` a Port made after an `expand!(x => Child)`; a root-Domain Port already holds one value per root and needs no `reduce!`"
)]
pub trait ReduceInto<C> {
    /// The parent Domain (`Self`).
    type Parent;
    /// The typed builder's `reduce`.
    #[track_caller]
    fn reduce<T: Data>(x: Port<C, T>) -> Port<Self::Parent, Vec<T>>;
    /// The typed builder's `reduce_members`.
    #[track_caller]
    fn reduce_members<T: Data, M>(x: Port<C, T>, members: Port<C, M>) -> Port<Self::Parent, Vec<T>>;
    /// The typed builder's `reduce_aligned`.
    #[track_caller]
    fn reduce_aligned<A: Data, B: Data, M>(
        x: (Port<C, A>, Port<C, B>),
        members: Option<Port<C, M>>,
    ) -> (Port<Self::Parent, Vec<A>>, Port<Self::Parent, Vec<B>>);
    /// The typed builder's `reduce_keep_failed`.
    #[track_caller]
    fn reduce_keep_failed<T: Data>(x: Port<C, T>) -> Port<Self::Parent, Vec<Result<T, Cause>>>;
}

#[diagnostic::do_not_recommend]
impl<C: Domain<Parent = P>, P: Domain> ReduceInto<C> for P {
    type Parent = P;
    #[track_caller]
    fn reduce<T: Data>(x: Port<C, T>) -> Port<P, Vec<T>> {
        crate::plan::port::reduce(x)
    }
    #[track_caller]
    fn reduce_members<T: Data, M>(x: Port<C, T>, members: Port<C, M>) -> Port<P, Vec<T>> {
        crate::plan::port::reduce_members(x, members)
    }
    #[track_caller]
    fn reduce_aligned<A: Data, B: Data, M>(
        x: (Port<C, A>, Port<C, B>),
        members: Option<Port<C, M>>,
    ) -> (Port<P, Vec<A>>, Port<P, Vec<B>>) {
        crate::plan::port::reduce_aligned(x, members)
    }
    #[track_caller]
    fn reduce_keep_failed<T: Data>(x: Port<C, T>) -> Port<P, Vec<Result<T, Cause>>> {
        crate::plan::port::reduce_keep_failed(x)
    }
}

/// Why `reduce!` of a root Domain's Port has no parent Domain: implemented by
/// no type, so `ParentOf<Root>` is an error type and nothing built on the
/// reduced Port reports again.
#[diagnostic::on_unimplemented(
    message = "`reduce!` gathers a child Domain into its parent, but `{Self}` is a root Domain",
    label = "a Port of root Domain `{Self}`",
    note = "`reduce!` a Port made after an `expand!(x => Child)`; a root-Domain Port already holds one value per root and needs no `reduce!`"
)]
pub trait RootHasNoParent {
    /// Never named successfully.
    type Parent;
}

#[diagnostic::do_not_recommend]
impl<C: RootHasNoParent> ReduceInto<C> for NoParent {
    type Parent = C::Parent;
    #[track_caller]
    fn reduce<T: Data>(_: Port<C, T>) -> Port<Self::Parent, Vec<T>> {
        unreachable!("no type implements RootHasNoParent")
    }
    #[track_caller]
    fn reduce_members<T: Data, M>(_: Port<C, T>, _: Port<C, M>) -> Port<Self::Parent, Vec<T>> {
        unreachable!("no type implements RootHasNoParent")
    }
    #[track_caller]
    fn reduce_aligned<A: Data, B: Data, M>(
        _: (Port<C, A>, Port<C, B>),
        _: Option<Port<C, M>>,
    ) -> (Port<Self::Parent, Vec<A>>, Port<Self::Parent, Vec<B>>) {
        unreachable!("no type implements RootHasNoParent")
    }
    #[track_caller]
    fn reduce_keep_failed<T: Data>(_: Port<C, T>) -> Port<Self::Parent, Vec<Result<T, Cause>>> {
        unreachable!("no type implements RootHasNoParent")
    }
}

/// The Domain `reduce!` of a `C` Port lands in.
pub type ParentOf<C> = <<C as Domain>::Parent as ReduceInto<C>>::Parent;

/// `reduce!(x)`.
#[track_caller]
pub fn reduce<C, T>(x: Port<C, T>) -> Port<ParentOf<C>, Vec<T>>
where
    C: Domain,
    T: Data,
    C::Parent: ReduceInto<C>,
{
    <C::Parent as ReduceInto<C>>::reduce(x)
}

same_domain_trait! {
    /// `reduce!` members in the reduced Port's Domain `D`.
    #[diagnostic::on_unimplemented(
        message = "`reduce!` members are in Domain `{Self}`, but the reduced Port is in `{D}`",
        label = "a `{Self}` Port",
        note = "`members = m` selects which `{D}` Entities are gathered: pass a Port of `{D}`"
    )]
    MembersDomain
}

/// `reduce!(x, members = m)`.
#[track_caller]
pub fn reduce_members<C, T, Cm, M>(x: Port<C, T>, members: Port<Cm, M>) -> Port<ParentOf<C>, Vec<T>>
where
    C: Domain,
    T: Data,
    C::Parent: ReduceInto<C>,
    Cm: MembersDomain<C>,
{
    <C::Parent as ReduceInto<C>>::reduce_members(x, Cm::cast(members))
}

/// `reduce_aligned!((a, b))`.
#[track_caller]
pub fn reduce_aligned<C, Cb, A, B>(
    a: Port<C, A>,
    b: Port<Cb, B>,
) -> (Port<ParentOf<C>, Vec<A>>, Port<ParentOf<C>, Vec<B>>)
where
    C: Domain,
    A: Data,
    B: Data,
    C::Parent: ReduceInto<C>,
    Cb: AlignedDomain<C>,
{
    <C::Parent as ReduceInto<C>>::reduce_aligned::<A, B, ()>((a, Cb::cast(b)), None)
}

/// `reduce_aligned!((a, b), members = m)`.
#[track_caller]
pub fn reduce_aligned_members<C, Cb, Cm, A, B, M>(
    a: Port<C, A>,
    b: Port<Cb, B>,
    members: Port<Cm, M>,
) -> (Port<ParentOf<C>, Vec<A>>, Port<ParentOf<C>, Vec<B>>)
where
    C: Domain,
    A: Data,
    B: Data,
    C::Parent: ReduceInto<C>,
    Cb: AlignedDomain<C>,
    Cm: MembersDomain<C>,
{
    <C::Parent as ReduceInto<C>>::reduce_aligned((a, Cb::cast(b)), Some(Cm::cast(members)))
}

// `filter!` and `broadcast!`: after `same_domain_trait!`, which they use.
mod filter_broadcast;
pub use filter_broadcast::*;
mod keep_failed;
pub use keep_failed::*;
