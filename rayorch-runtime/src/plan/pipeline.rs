//! The `Pipeline` trait: what `#[pipeline]` implements for a user's struct.

use crate::error::PlanErrors;
use crate::plan::Plan;
use crate::value::Data;

/// A pipeline: a struct of Calls whose `forward` function builds a [`Plan`].
///
/// `#[pipeline]` implements this from `forward`; writing it by hand is the
/// same as calling [`Plan::build`] with a closure that declares the source,
/// calls `forward` and declares the outputs.
pub trait Pipeline {
    /// What the source receives per root (a tuple for several source Ports).
    type Input: Data;
    /// Handles to read the outputs: an [`crate::Output`] or a tuple of them.
    type Outputs;

    /// Build and validate the plan.
    fn build_plan(&self) -> Result<(Plan, Self::Outputs), PlanErrors>;
}
