//! rayorch: lineage-controlled multi-grain data-preparation pipelines.
//!
//! A pipeline changes its unit of work (a PDF becomes pages, a page becomes
//! lines); model stages batch children of many parents, and every result
//! returns to its own parent, in declared order, as soon as that parent is
//! complete. See the crate README for a quick start.

pub use rayorch_runtime::*;

/// The names a pipeline author needs.
pub mod prelude {
    pub use rayorch_runtime::{
        Call, Cause, Domain, Item, Outcome, Plan, Port, Recovery, Reservation, Stage, StageResult, broadcast,
        domain, expand, expand_aligned, filter, reduce, reduce_aligned, reduce_members,
    };
}

/// Paths the macros emit. Not a public API.
#[doc(hidden)]
pub mod __private {
    pub use rayorch_runtime::*;
}
