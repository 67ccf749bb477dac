//! rayorch: lineage-controlled multi-grain data-preparation pipelines.
//!
//! A pipeline changes its unit of work (a PDF becomes pages, a page becomes
//! lines); model stages batch children of many parents, and every result
//! returns to its own parent, in declared order, as soon as that parent is
//! complete.
//!
//! # Writing a pipeline
//! - Declare the levels with `#[derive(Domain)]` (`#[domain(parent = Pdf)]`
//!   for a child level); the Domain graph is checked by rustc.
//! - Write the model code as a [`Stage`] (blocking, e.g. candle or ONNX
//!   Runtime: one call per batch, one [`Outcome`] per input) or an
//!   [`AsyncStage`] (I/O, HTTP model servers), or wrap a closure with
//!   [`Call::map`].
//! - Configure each use of a stage as a [`Call`] (batch size, replicas,
//!   [`Recovery`], [`Reservation`], timeout) and put the Calls in a struct.
//! - Describe the graph in a `#[pipeline] impl` block's `forward` fn with
//!   [`expand!`], [`reduce!`], [`filter!`], [`broadcast!`]; `build_plan()`
//!   (from [`Pipeline`]) gives the [`Plan`] and typed [`Output`] handles.
//! - Run it with a [`Runner`] (window, observer, [`CancelHandle`]) over an
//!   iterator or a stream of `(key, value)` roots; each finished root reaches
//!   a [`sink`] at once as a [`RootOutcome`]; [`RunSummary`] says how it went.
//! - Test it deterministically with `rayorch::sim`, the seeded executor
//!   (feature `sim`).
//!
//! `use rayorch::prelude::*;` brings the names above. Executor authors find
//! the synchronous engine and the stage-erasure types in [`spi`].
//!
//! # Example
//! ```
//! use rayorch::prelude::*;
//!
//! #[derive(Domain)]
//! struct Doc;
//! #[derive(Domain)]
//! #[domain(parent = Doc)]
//! struct Page;
//!
//! struct Lengths {
//!     split: FnCall<String, Vec<String>>,
//!     len: FnCall<String, usize>,
//! }
//!
//! #[pipeline]
//! impl Lengths {
//!     fn forward(&self, docs: Port<Doc, String>) -> Port<Doc, Vec<usize>> {
//!         let page = expand!(self.split(docs) => Page);
//!         reduce!(self.len(page))
//!     }
//! }
//!
//! let p = Lengths {
//!     split: Call::map("split", |d: String| d.split('|').map(String::from).collect()),
//!     len: Call::map("len", |p: String| p.len()).batch_size(8),
//! };
//! let (plan, out) = p.build_plan().unwrap();
//! let mut got = Vec::new();
//! rayorch::Runner::new(&plan)
//!     .run([(0, "ab|c".to_string())], rayorch::sink::Callback(|o: &rayorch::RootOutcome| {
//!         got.push(o.get(out).present().unwrap());
//!     }))
//!     .unwrap();
//! assert_eq!(got, vec![vec![2, 1]]);
//! ```

/// `impl Domain`: a root Domain as written, a child Domain with
/// `#[domain(parent = ParentDomain)]`. A cycle of parents (`A` parent of
/// `B`, `B` parent of `A`) is a compile error at the `parent`. With a renamed
/// dependency, add `crate = ray`: `#[domain(parent = Pdf, crate = ray)]`.
///
/// ```
/// use rayorch::{Domain, DomainInfo};
///
/// #[derive(Domain)]
/// struct Pdf;
///
/// #[derive(Domain)]
/// #[domain(parent = Pdf)]
/// struct Page;
///
/// assert_eq!(DomainInfo::of::<Page>().parent(), Some(DomainInfo::of::<Pdf>()));
/// assert_eq!(<Page as Domain>::NAME, "Page");
/// ```
pub use rayorch_macros::Domain;
/// Turn a plain Rust `forward` function into a pipeline plan.
///
/// Put it on the impl block of a struct whose fields are `Call<_>`s. Inside
/// `forward`:
///
/// | write | means |
/// | --- | --- |
/// | `self.ocr(page)` | apply the Call in field `ocr` to one Port |
/// | `self.pair(a, b)` | a Call with several inputs, all Ports of one Domain; its stage takes `(A, B)` |
/// | `split!(self.detect(x))` | a Call whose stage returns `(A, B)`: one Port per field |
/// | `expand!(pages => Page)` | each element of a list becomes a child Entity of `Page` |
/// | `expand_aligned!((a, b) => Page)` | two lists of one parent become aligned children |
/// | `reduce!(x)` | gather a child Domain back into its parent, as a `Vec` in child order |
/// | `reduce!(x, members = m)` | only the children where `m` is present |
/// | `reduce!(x, keep_failed)` | keep the parent when children failed: `Vec<Result<T, Cause>>`, `Err(cause)` where a child failed |
/// | `reduce_aligned!((a, b))` | gather two child Ports, keeping children present in both |
/// | `filter!(x, mask)` | drop the Entities whose `bool` mask is `false` |
/// | `broadcast!(x, like = y)` | an ancestor's value, seen from each Entity of `y`'s Domain |
/// | `x.optional()` | a Call input that arrives as `None` instead of dropping the output |
///
/// `forward`'s parameters are the source Ports (one to three, all in the one
/// root Domain) and it returns a root-Domain Port or a tuple of them. The
/// signature stays as written, `forward` stays callable, and the macro adds
/// `impl rayorch::Pipeline` (`build_plan`). `self.m(..)` calls a method when
/// `m` is defined in the same impl block; elsewhere write `Self::m(self, ..)`.
///
/// Helper methods of the same impl block that take `&self` and take or
/// return a Port are rewritten like `forward`: `self.call(x)`, `expand!` and
/// `reduce!` work in them, and rustc checks their Domains. The cross-operation
/// checks (an `expand!` never reduced, an unused Port, ...) follow `forward`
/// only; what they cannot see there is a `PlanError` from `build_plan()` that
/// names the line of each operation involved.
///
/// `#[pipeline(crate = ray)]` names rayorch where the dependency is renamed
/// (`ray = { package = "rayorch", .. }`); `expand!` and the other operations
/// may then also be written `ray::expand!`.
///
/// Domain mistakes are compile errors at the offending token. Set
/// `RAYORCH_MACROS_DEBUG=1` (or the type's name) to print the expansion.
///
/// `build_plan()` gives the `Plan` and a typed handle per output; a `Runner`
/// runs it. (A pipeline's tests may run it under `rayorch::sim`, the seeded
/// executor: rayorch's `sim` feature.)
///
/// ```
/// use rayorch::prelude::*;
///
/// #[derive(Domain)]
/// struct Doc;
///
/// #[derive(Domain)]
/// #[domain(parent = Doc)]
/// struct Word;
///
/// struct WordLengths {
///     split: FnCall<String, Vec<String>>,
///     len: FnCall<String, usize>,
/// }
///
/// #[pipeline]
/// impl WordLengths {
///     fn forward(&self, docs: Port<Doc, String>) -> Port<Doc, Vec<usize>> {
///         let word = expand!(self.split(docs) => Word);
///         reduce!(self.len(word))
///     }
/// }
///
/// let p = WordLengths {
///     split: Call::map("split", |s: String| s.split(' ').map(String::from).collect::<Vec<_>>()),
///     len: Call::map("len", |w: String| w.len()),
/// };
/// let (plan, out) = p.build_plan().unwrap();
/// let mut got = Vec::new();
/// Runner::new(&plan)
///     .run([(0, "a bb ccc".to_string())], Callback(|o: &RootOutcome| got.push(o.get(out))))
///     .unwrap();
/// assert_eq!(got, vec![Item::Present(vec![1, 2, 3])]);
/// ```
pub use rayorch_macros::pipeline;
// Named one by one: a glob would also put the runtime's `#[doc(hidden)]`
// plumbing (the operators' type-level helpers) on this crate's front page.
// The macros reach that plumbing through `__private`.
#[cfg(feature = "sim")]
pub use rayorch_runtime::sim;
pub use rayorch_runtime::{
    AdmissionLive, Async, AsyncRecordStage, AsyncStage, BackendGauge, BatchDispatched, BatchFinished,
    BatchFn, BoxError, BoxFuture, Call, CallConfig, CallLive, CallMetrics, CancelHandle, Cause, ChildOf,
    DEFAULT_BACKPRESSURE, DEFAULT_WINDOW, DEFAULT_WINDOW_CHILDREN, Data, Domain, DomainCounts, EntityPath,
    FailedAttempt, FailureCount, FailureKind, FailureLevel, FnCall, Item, ItemKind, KeyBatchCount, Observer,
    Optional, Origin, Outcome, Output, Pipeline, Plan, PlanBuilder, PlanError, PlanErrors, Port, Progress,
    RecordCall, RecordPolicy, RecordResult, Records, Recovery, Reservation, RootDomain, RootOutcome,
    RunError, RunSummary, Runner, Stage, StageContext, StageResult, broadcast, domain, expand,
    expand_aligned, filter, journal, reduce, reduce_aligned, reduce_keep_failed, reduce_members, sink, spi,
};

// Type-level plumbing the operators' signatures name; users never write it.
// Hidden, as in the runtime, but at the root all the same: rustc names a
// trait in an error by a public path, and `Inputs<Pdf>` reads better than
// `rayorch::__private::Inputs<Pdf>`.
#[doc(hidden)]
pub use rayorch_runtime::{
    DescendantOf, DomainInfo, Here, InputPort, Inputs, NoParent, OutputSet, ParentSlot, PortRef, There,
};

/// Scale-out: one lineage owner and N worker processes over NATS JetStream
/// (the `dist` feature; NKey credentials and generated broker secrets with
/// `dist-nkeys`).
#[cfg(feature = "dist")]
pub use rayorch_dist as dist;

/// The names a pipeline author needs.
pub mod prelude {
    // `crate::expand` etc. name both the builder function and the `forward`
    // pseudo-macro of the same name. `no_inline`: the docs link each name to
    // its page instead of copying it (and the `domain` module) in here.
    #[doc(no_inline)]
    pub use crate::{broadcast, expand, expand_aligned, filter, reduce, reduce_aligned, split};
    #[doc(no_inline)]
    pub use rayorch_macros::{Domain, pipeline};
    #[doc(no_inline)]
    pub use rayorch_runtime::sink::Callback;
    #[doc(no_inline)]
    pub use rayorch_runtime::{
        Async, AsyncRecordStage, AsyncStage, Call, CancelHandle, Cause, Domain, FailureKind, FnCall, Item,
        Observer, Outcome, Pipeline, Plan, Port, RecordCall, RecordResult, Recovery, Reservation,
        RootOutcome, RunSummary, Runner, Stage, StageContext, StageResult, domain, reduce_keep_failed,
        reduce_members,
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
/// Present children are gathered in ordinal order, dropped ones are left
/// out, and any failed (or suppressed) child suppresses the parent.
///
/// `reduce!(x, keep_failed)` keeps a parent whose children partly failed: a
/// `Port<Child, T>` becomes a `Port<Parent, Vec<Result<T, Cause>>>` in which
/// a present child is `Ok(value)` and a Failed or Suppressed child is
/// `Err(cause)` at its ordinal position; dropped children are still left
/// out. The parent is decided once its Expansion and every child are
/// terminal; an Expansion that failed (the Call producing the list failed)
/// still suppresses the parent, and a dropped one drops it. It takes no
/// `members = ..`; the builder form is `rayorch::reduce_keep_failed(x)`.
///
/// ```
/// use rayorch::prelude::*;
///
/// #[derive(Domain)]
/// struct Doc;
/// #[derive(Domain)]
/// #[domain(parent = Doc)]
/// struct Page;
///
/// struct Ocr {
///     pages: FnCall<String, Vec<String>>,
///     ocr: FnCall<String, String>,
/// }
///
/// #[pipeline]
/// impl Ocr {
///     fn forward(&self, docs: Port<Doc, String>) -> Port<Doc, Vec<Result<String, rayorch::Cause>>> {
///         let page = expand!(self.pages(docs) => Page);
///         reduce!(self.ocr(page), keep_failed)
///     }
/// }
///
/// let p = Ocr {
///     pages: Call::map("pages", |d: String| d.split('|').map(String::from).collect()),
///     ocr: Call::per_record("ocr", |p: String| {
///         if p.is_empty() { Outcome::RecordFailure("blank page".into()) } else { Outcome::Ok(p.to_uppercase()) }
///     }),
/// };
/// let (plan, out) = p.build_plan().unwrap();
/// let mut got = Vec::new();
/// rayorch::Runner::new(&plan)
///     .run([(0, "ab||c".to_string())], rayorch::sink::Callback(|o: &rayorch::RootOutcome| {
///         got.extend(o.get(out).present().unwrap());
///     }))
///     .unwrap();
/// let texts: Vec<_> = got.into_iter().map(|r| r.map_err(|c| c.message().to_string())).collect();
/// assert_eq!(texts, vec![Ok("AB".into()), Err("blank page".into()), Ok("C".into())]);
/// ```
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

/// The README's code blocks, compiled and run as doctests so they cannot drift.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
