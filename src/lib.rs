//! rayorch: lineage-controlled multi-grain data-preparation pipelines.
//!
//! A pipeline changes its unit of work (a PDF becomes pages, a page becomes
//! lines); model stages batch children of many parents, and every result
//! returns to its own parent, in declared order, as soon as that parent is
//! complete. See the crate README for a quick start.

pub use rayorch_macros::{Domain, pipeline};
pub use rayorch_runtime::*;

/// The names a pipeline author needs.
pub mod prelude {
    // `crate::expand` etc. name both the builder function and the `forward`
    // pseudo-macro of the same name.
    pub use crate::{broadcast, expand, expand_aligned, filter, reduce, reduce_aligned, split};
    pub use rayorch_macros::{Domain, pipeline};
    pub use rayorch_runtime::sink::Callback;
    pub use rayorch_runtime::{
        Async, AsyncStage, Call, Cause, Domain, FnCall, Item, Outcome, Pipeline, Plan, Port, Recovery,
        Reservation, RootOutcome, Runner, Stage, StageContext, StageResult, domain, reduce_members,
    };
}

/// Paths the macros emit. Not a public API.
#[doc(hidden)]
pub mod __private {
    pub use rayorch_runtime::*;
}

// Placeholders for the operations `#[pipeline]` rewrites inside `forward`:
// they make the names resolve (and show up in docs), and anywhere else they
// stop the build with a message that says where they belong.

/// `expand!(x => Child)`: each element of `x`'s list becomes an ordered child Entity of `Child`.
///
/// Only inside a `#[pipeline]` impl block (`forward` and its helper methods), which rewrites it.
#[macro_export]
macro_rules! expand {
    ($($tokens:tt)*) => {
        ::core::compile_error!(
            "`expand!` only works in a `#[pipeline]` impl block (in `forward` or a method that takes or returns a Port), which rewrites it: add `#[pipeline]` above the `impl`; without the macro, build the plan with `rayorch::expand::<Child, _, _>(x)` inside `Plan::build`"
        )
    };
}

/// `expand_aligned!((a, b) => Child)`: two lists of one parent become aligned children.
///
/// Only inside a `#[pipeline]` impl block (`forward` and its helper methods), which rewrites it.
#[macro_export]
macro_rules! expand_aligned {
    ($($tokens:tt)*) => {
        ::core::compile_error!(
            "`expand_aligned!` only works in a `#[pipeline]` impl block (in `forward` or a method that takes or returns a Port), which rewrites it: add `#[pipeline]` above the `impl`; without the macro, build the plan with `rayorch::expand_aligned::<Child, _, _, _>((a, b))` inside `Plan::build`"
        )
    };
}

/// `reduce!(x)` or `reduce!(x, members = m)`: gather a child Domain into its parent, in child order.
///
/// Only inside a `#[pipeline]` impl block (`forward` and its helper methods), which rewrites it.
#[macro_export]
macro_rules! reduce {
    ($($tokens:tt)*) => {
        ::core::compile_error!(
            "`reduce!` only works in a `#[pipeline]` impl block (in `forward` or a method that takes or returns a Port), which rewrites it: add `#[pipeline]` above the `impl`; without the macro, build the plan with `rayorch::reduce(x)` inside `Plan::build`"
        )
    };
}

/// `reduce_aligned!((a, b))`: gather two child Ports into aligned parent lists.
///
/// Only inside a `#[pipeline]` impl block (`forward` and its helper methods), which rewrites it.
#[macro_export]
macro_rules! reduce_aligned {
    ($($tokens:tt)*) => {
        ::core::compile_error!(
            "`reduce_aligned!` only works in a `#[pipeline]` impl block (in `forward` or a method that takes or returns a Port), which rewrites it: add `#[pipeline]` above the `impl`; without the macro, build the plan with `rayorch::reduce_aligned((a, b), None::<rayorch::Port<_, ()>>)` inside `Plan::build`"
        )
    };
}

/// `filter!(x, mask)`: drop the Entities whose `bool` mask is `false`.
///
/// Only inside a `#[pipeline]` impl block (`forward` and its helper methods), which rewrites it.
#[macro_export]
macro_rules! filter {
    ($($tokens:tt)*) => {
        ::core::compile_error!(
            "`filter!` only works in a `#[pipeline]` impl block (in `forward` or a method that takes or returns a Port), which rewrites it: add `#[pipeline]` above the `impl`; without the macro, build the plan with `rayorch::filter(x, mask)` inside `Plan::build`"
        )
    };
}

/// `broadcast!(x, like = y)`: an ancestor's value, seen from each Entity of `y`'s Domain.
///
/// Only inside a `#[pipeline]` impl block (`forward` and its helper methods), which rewrites it.
#[macro_export]
macro_rules! broadcast {
    ($($tokens:tt)*) => {
        ::core::compile_error!(
            "`broadcast!` only works in a `#[pipeline]` impl block (in `forward` or a method that takes or returns a Port), which rewrites it: add `#[pipeline]` above the `impl`; without the macro, build the plan with `rayorch::broadcast(x, y)` inside `Plan::build`"
        )
    };
}

/// `let (a, b) = split!(self.call(x));`: one Port per field of a stage's tuple output.
///
/// Only inside a `#[pipeline]` impl block (`forward` and its helper methods), which rewrites it.
#[macro_export]
macro_rules! split {
    ($($tokens:tt)*) => {
        ::core::compile_error!(
            "`split!` only works in a `#[pipeline]` impl block (in `forward` or a method that takes or returns a Port), which rewrites it: add `#[pipeline]` above the `impl`; without the macro, build the plan with `call.apply_split(x)` inside `Plan::build`"
        )
    };
}
