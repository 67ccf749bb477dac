//! rayorch's runtime: typed plan builder, lineage engine, scheduler and executors.
//!
//! Layers, from the user inward:
//! - [`Domain`], [`Port`], [`Call`] and the structural operators ([`expand`],
//!   [`reduce`], [`filter`], [`broadcast`], ...) build an immutable [`Plan`];
//!   Domain mistakes are type errors.
//! - [`Engine`] owns one run's lineage and queues. It is synchronous and
//!   deterministic; executors drive it (see [`sim`] for the seeded one).

pub mod engine;
mod error;
pub mod exec;
pub mod plan;
mod value;

pub use engine::rules;
pub use exec::{metrics, sim, sink};
#[doc(hidden)]
pub use plan::check;

pub use engine::grain::{InvalidTransition, Phase, Transition};
pub use engine::lineage::Publish;
pub use engine::{
    Batch, BatchId, CallStats, Engine, EngineConfig, EngineStats, EntityPath, GrainRef, ReportOutcome,
    RootOutcome,
};
pub use error::{PlanError, PlanErrors, RunError};
pub use exec::runner::Runner;
pub use exec::stage::{
    Async, AsyncStage, AttemptError, AttemptResult, BatchFn, BatchInputs, BoxError, BoxFuture, ErasedCall,
    ErasedOutcome, Execution, Replica, Stage, StageBox, StageContext, StageKind, StageResult, panic_text,
};
pub use metrics::{CallMetrics, RunSummary};
pub use plan::build::PortRef;
pub use plan::call::{Call, CallConfig, FnCall, Recovery, Reservation};
pub use plan::domain::{
    ChildOf, DescendantOf, Domain, DomainInfo, Here, NoParent, ParentSlot, RootDomain, There,
};
pub use plan::pipeline::Pipeline;
pub use plan::port::{
    InputPort, Inputs, Optional, OutputSet, Port, broadcast, expand, expand_aligned, filter, reduce,
    reduce_aligned, reduce_members,
};
pub use plan::{CallSpec, Output, Plan, PlanBuilder};
pub use value::{Cause, Data, Item, ItemKind, Outcome, Value};
