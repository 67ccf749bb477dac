//! Ports and the structural operators over them.
//!
//! A [`Port<D, T>`] is the logical edge carrying one `T` (or a non-present
//! outcome) for every Entity of Domain `D`. The operators below only append to
//! the plan draft; the Domain rules are enforced twice: by the trait bounds
//! (compile time, with `on_unimplemented` messages) and again when the plan is
//! validated (so even type-erased misuse becomes a [`crate::PlanError`]).

use std::any::type_name;
use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;

use crate::plan::build::{self, Edge, NodeKind, PortRef};
use crate::plan::domain::{ChildOf, DescendantOf, Domain};
use crate::value::{Cause, Data, Value, Values, all_or_none, take_value};

/// The values of one Call or operator, for every Entity of Domain `D`.
pub struct Port<D, T> {
    r: PortRef,
    _types: PhantomData<fn() -> (D, T)>,
}

impl<D, T> Clone for Port<D, T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<D, T> Copy for Port<D, T> {}

impl<D: Domain, T> fmt::Debug for Port<D, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Port<{}, {}>#{}", D::NAME, type_name::<T>(), self.r.id)
    }
}

impl<D, T> Port<D, T> {
    pub(crate) fn from_id(id: u32) -> Self {
        Port {
            r: PortRef {
                id,
                build: build::current_build_id(),
            },
            _types: PhantomData,
        }
    }

    /// This Port's id within its plan.
    pub fn id(&self) -> u32 {
        self.r.id
    }

    pub(crate) fn port_ref(&self) -> PortRef {
        self.r
    }

    /// Use this Port as an optional Call input: a dropped Item arrives as
    /// `None` instead of dropping the Call's output.
    pub fn optional(self) -> Optional<D, T> {
        Optional { port: self }
    }
}

/// A Port used as an optional Call input (see [`Port::optional`]).
pub struct Optional<D, T> {
    port: Port<D, T>,
}

impl<D, T> Clone for Optional<D, T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<D, T> Copy for Optional<D, T> {}

/// One input Port of Domain `D` for a Call.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not an input Port of Domain `{D}`",
    label = "this input is in another Domain than the Call's other inputs",
    note = "all inputs of one Call must be Ports of the same Domain: `broadcast!` an ancestor value down, or `reduce!` child values up, first"
)]
pub trait InputPort<D> {
    /// What the stage receives for this input.
    type Value: Send + 'static;
    #[doc(hidden)]
    fn edge(&self) -> (PortRef, bool);
    #[doc(hidden)]
    fn read(v: Option<Value>) -> Option<Self::Value>;
}

impl<D: Domain, T: Data> InputPort<D> for Port<D, T> {
    type Value = T;
    fn edge(&self) -> (PortRef, bool) {
        (self.r, false)
    }
    fn read(v: Option<Value>) -> Option<T> {
        v.and_then(take_value::<T>)
    }
}

impl<D: Domain, T: Data> InputPort<D> for Optional<D, T> {
    type Value = Option<T>;
    fn edge(&self) -> (PortRef, bool) {
        (self.port.r, true)
    }
    fn read(v: Option<Value>) -> Option<Option<T>> {
        match v {
            None => Some(None),
            Some(v) => take_value::<T>(v).map(Some),
        }
    }
}

/// The input(s) of a Call: one Port, or a tuple of Ports of one Domain `D`.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be the input of a Call in Domain `{D}`",
    label = "expected a Port, an `.optional()` Port, or a tuple of Ports of one Domain",
    note = "a Call with several inputs takes Ports of one Domain, e.g. `call((pages, texts))`"
)]
pub trait Inputs<D> {
    /// What the stage receives per Grain.
    type Value: Send + 'static;
    #[doc(hidden)]
    fn edges(&self) -> Vec<(PortRef, bool)>;
    #[doc(hidden)]
    fn assemble(g: &mut std::vec::IntoIter<Option<Value>>) -> Option<Self::Value>;
}

impl<D: Domain, T: Data> Inputs<D> for Port<D, T> {
    type Value = T;
    fn edges(&self) -> Vec<(PortRef, bool)> {
        vec![InputPort::<D>::edge(self)]
    }
    fn assemble(g: &mut std::vec::IntoIter<Option<Value>>) -> Option<T> {
        <Self as InputPort<D>>::read(g.next()?)
    }
}

impl<D: Domain, T: Data> Inputs<D> for Optional<D, T> {
    type Value = Option<T>;
    fn edges(&self) -> Vec<(PortRef, bool)> {
        vec![InputPort::<D>::edge(self)]
    }
    fn assemble(g: &mut std::vec::IntoIter<Option<Value>>) -> Option<Option<T>> {
        <Self as InputPort<D>>::read(g.next()?)
    }
}

macro_rules! tuple_inputs {
    ($($name:ident),+) => {
        impl<D: Domain, $($name: InputPort<D>),+> Inputs<D> for ($($name,)+) {
            type Value = ($($name::Value,)+);
            #[expect(non_snake_case, reason = "the bindings are named after the tuple's type parameters")]
            fn edges(&self) -> Vec<(PortRef, bool)> {
                let ($($name,)+) = self;
                vec![$($name.edge()),+]
            }
            fn assemble(g: &mut std::vec::IntoIter<Option<Value>>) -> Option<Self::Value> {
                Some(($($name::read(g.next()?)?,)+))
            }
        }
    };
}
tuple_inputs!(A, B);
tuple_inputs!(A, B, C);
tuple_inputs!(A, B, C, E);

/// A stage output that splits into one Port per field.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be split into one Port per field",
    label = "`split!` needs a stage whose output is a tuple",
    note = "`split!(self.call(x))` works for stages returning a tuple of 2 or 3 values (`type Out = (A, B)`); for a single value, use `self.call(x)` without `split!`"
)]
pub trait OutputSet: Send + 'static {
    /// The Ports the split produces, in Domain `D`.
    type Ports<D>;
    #[doc(hidden)]
    fn arity() -> usize;
    #[doc(hidden)]
    fn split(self) -> Values;
    #[doc(hidden)]
    fn ports<D>(ids: &[u32]) -> Self::Ports<D>;
}

impl<A: Data> OutputSet for (A,) {
    type Ports<D> = Port<D, A>;
    fn arity() -> usize {
        1
    }
    fn split(self) -> Values {
        smallvec::smallvec![Arc::new(self.0) as Value]
    }
    fn ports<D>(ids: &[u32]) -> Port<D, A> {
        Port::from_id(ids[0])
    }
}

macro_rules! tuple_outputs {
    ($n:expr; $($name:ident $idx:tt),+) => {
        impl<$($name: Data),+> OutputSet for ($($name,)+) {
            type Ports<D> = ($(Port<D, $name>,)+);
            fn arity() -> usize {
                $n
            }
            fn split(self) -> Values {
                smallvec::smallvec![$(Arc::new(self.$idx) as Value),+]
            }
            fn ports<D>(ids: &[u32]) -> Self::Ports<D> {
                ($(Port::from_id(ids[$idx]),)+)
            }
        }
    };
}
tuple_outputs!(2; A 0, B 1);
tuple_outputs!(3; A 0, B 1, C 2);

fn split_list<I>(v: Value) -> Option<Vec<Value>>
where
    I: IntoIterator + Data,
    I::Item: Data,
{
    // A list an executor received already split (distributed refs).
    if let Some(items) = crate::plan::forward::pre_split(&v) {
        return Some(items);
    }
    let list: I = take_value::<I>(v)?;
    Some(list.into_iter().map(|x| Arc::new(x) as Value).collect())
}

/// The length of a list value without consuming it, for the list types
/// that know it (`Vec`, `VecDeque`, boxed slices); `None` for others, whose
/// lengths are then compared when the Expansion splits them.
fn list_len<I>(v: &Value) -> Option<usize>
where
    I: IntoIterator + Data,
    I::Item: Data,
{
    if let Some(l) = v.downcast_ref::<crate::plan::forward::ValueList>() {
        return Some(l.0.len());
    }
    if let Some(l) = v.downcast_ref::<Vec<I::Item>>() {
        return Some(l.len());
    }
    if let Some(l) = v.downcast_ref::<std::collections::VecDeque<I::Item>>() {
        return Some(l.len());
    }
    v.downcast_ref::<Box<[I::Item]>>().map(|l| l.len())
}

fn gather_list<T: Data>(vals: Vec<Value>) -> Option<Value> {
    let out = all_or_none(vals.len(), vals.into_iter().map(take_value::<T>))?;
    Some(Arc::new(out))
}

fn gather_kept<T: Data>(vals: Vec<Result<Value, Cause>>) -> Option<Value> {
    let n = vals.len();
    let out = all_or_none(
        n,
        vals.into_iter().map(|r| match r {
            Ok(v) => take_value::<T>(v).map(Ok),
            Err(c) => Some(Err(c)),
        }),
    )?;
    Some(Arc::new(out))
}

fn read_mask(v: &Value) -> Option<bool> {
    v.downcast_ref::<bool>().copied()
}

#[track_caller]
fn structural<D: Domain>(
    op: &str,
    refs: &[PortRef],
    kind: impl FnOnce(Vec<u32>) -> NodeKind,
    arity: usize,
) -> Vec<u32> {
    match build::resolve_inputs(refs, op) {
        Some(ids) => build::add_node::<D>(kind(ids), arity),
        None => vec![u32::MAX; arity],
    }
}

/// `expand!(x => C)`: each element of the parent's list becomes an ordered
/// child Entity of Domain `C`.
#[track_caller]
pub fn expand<C, P, I>(x: Port<P, I>) -> Port<C, I::Item>
where
    C: ChildOf<P>,
    P: Domain,
    I: IntoIterator + Data,
    I::Item: Data,
{
    let ids = structural::<C>(
        "expand",
        &[x.r],
        |ids| NodeKind::Expand {
            inputs: ids,
            split: vec![split_list::<I>],
            len: Vec::new(),
        },
        1,
    );
    Port::from_id(ids[0])
}

/// `expand_aligned!((a, b) => C)`: several lists of one parent become the
/// aligned values of one child set. Lists of different lengths are rejected
/// with a "cardinality mismatch" cause: when one Grain produced both, that
/// Grain ends Failed and nothing it produced is published; otherwise the
/// Expansion fails.
#[track_caller]
pub fn expand_aligned<C, P, A, B>(x: (Port<P, A>, Port<P, B>)) -> (Port<C, A::Item>, Port<C, B::Item>)
where
    C: ChildOf<P>,
    P: Domain,
    A: IntoIterator + Data,
    A::Item: Data,
    B: IntoIterator + Data,
    B::Item: Data,
{
    let ids = structural::<C>(
        "expand_aligned",
        &[x.0.r, x.1.r],
        |ids| NodeKind::Expand {
            inputs: ids,
            split: vec![split_list::<A>, split_list::<B>],
            len: vec![list_len::<A>, list_len::<B>],
        },
        2,
    );
    (Port::from_id(ids[0]), Port::from_id(ids[1]))
}

/// `reduce!(x)`: the parent-scoped ordered gather. Present children come in
/// ordinal order, dropped ones are left out, any failed child suppresses the
/// parent.
#[track_caller]
pub fn reduce<C, P, T>(x: Port<C, T>) -> Port<P, Vec<T>>
where
    C: ChildOf<P>,
    P: Domain,
    T: Data,
{
    reduce_impl(x, None)
}

/// `reduce!(x, members = m)`: as [`reduce`], but a child is a member only
/// where `m` is present as well (a dropped `m` leaves the child out).
#[track_caller]
pub fn reduce_members<C, P, T, M>(x: Port<C, T>, members: Port<C, M>) -> Port<P, Vec<T>>
where
    C: ChildOf<P>,
    P: Domain,
    T: Data,
{
    reduce_impl(x, Some(members.r))
}

#[track_caller]
fn reduce_impl<C, P, T>(x: Port<C, T>, members: Option<PortRef>) -> Port<P, Vec<T>>
where
    C: ChildOf<P>,
    P: Domain,
    T: Data,
{
    let mut refs = vec![x.r];
    refs.extend(members);
    let ids = structural::<P>(
        "reduce",
        &refs,
        |ids| NodeKind::Reduce {
            inputs: vec![ids[0]],
            members: ids.get(1).copied(),
            gather: vec![gather_list::<T>],
            keep_failed: None,
        },
        1,
    );
    Port::from_id(ids[0])
}

/// `reduce!(x, keep_failed)`: keeps a parent whose children partly
/// failed. Each child is gathered in ordinal order as `Ok(value)` when
/// present or `Err(cause)` when Failed or Suppressed; Dropped children are
/// left out. Child failures do not suppress the parent, which is decided
/// once its Expansion and every child are terminal. A failed Expansion
/// (its list's producer failed) still suppresses the parent, and a dropped
/// one drops it, as with [`reduce`].
#[track_caller]
pub fn reduce_keep_failed<C, P, T>(x: Port<C, T>) -> Port<P, Vec<Result<T, Cause>>>
where
    C: ChildOf<P>,
    P: Domain,
    T: Data,
{
    let ids = structural::<P>(
        "reduce",
        &[x.r],
        |ids| NodeKind::Reduce {
            inputs: ids,
            members: None,
            gather: Vec::new(),
            keep_failed: Some(gather_kept::<T>),
        },
        1,
    );
    Port::from_id(ids[0])
}

/// `reduce_aligned!((a, b), members = m)`: gathers several child Ports into
/// aligned parent lists: a child survives only where every input (and `m`,
/// when given) is present, so the lists always have equal lengths.
#[track_caller]
pub fn reduce_aligned<C, P, A, B, M>(
    x: (Port<C, A>, Port<C, B>),
    members: Option<Port<C, M>>,
) -> (Port<P, Vec<A>>, Port<P, Vec<B>>)
where
    C: ChildOf<P>,
    P: Domain,
    A: Data,
    B: Data,
{
    let mut refs = vec![x.0.r, x.1.r];
    refs.extend(members.map(|m| m.r));
    let ids = structural::<P>(
        "reduce_aligned",
        &refs,
        |ids| NodeKind::Reduce {
            inputs: vec![ids[0], ids[1]],
            members: ids.get(2).copied(),
            gather: vec![gather_list::<A>, gather_list::<B>],
            keep_failed: None,
        },
        2,
    );
    (Port::from_id(ids[0]), Port::from_id(ids[1]))
}

/// `filter!(x, keep)`: `false` drops the member; both Ports share a Domain.
#[track_caller]
pub fn filter<D: Domain, T: Data>(x: Port<D, T>, keep: Port<D, bool>) -> Port<D, T> {
    let ids = structural::<D>(
        "filter",
        &[x.r, keep.r],
        |ids| NodeKind::Filter {
            value: ids[0],
            mask: ids[1],
            read_mask,
        },
        1,
    );
    Port::from_id(ids[0])
}

/// `broadcast!(x, like = y)`: the ancestor's Item, visible in each
/// descendant Entity of `y`'s Domain.
#[track_caller]
pub fn broadcast<A, D, T, U, I>(x: Port<A, T>, like: Port<D, U>) -> Port<D, T>
where
    A: Domain,
    D: DescendantOf<A, I>,
    T: Data,
{
    let ids = structural::<D>(
        "broadcast",
        &[x.r, like.r],
        |ids| NodeKind::Broadcast {
            value: ids[0],
            like: ids[1],
        },
        1,
    );
    Port::from_id(ids[0])
}

pub(crate) fn edges_to(edges: Vec<(PortRef, bool)>, op: &str) -> Option<Vec<Edge>> {
    let refs: Vec<PortRef> = edges.iter().map(|e| e.0).collect();
    let ids = build::resolve_inputs(&refs, op)?;
    Some(
        ids.into_iter()
            .zip(edges)
            .map(|(port, (_, optional))| Edge { port, optional })
            .collect(),
    )
}
