//! rayorch's runtime: typed plan builder, lineage engine, scheduler and executors.
//!
//! Layers, from the user inward:
//! - [`Domain`], [`Port`], [`Call`] and the structural operators ([`expand`],
//!   [`reduce`], [`filter`], [`broadcast`], ...) build an immutable [`Plan`];
//!   Domain mistakes are type errors.
//! - [`Engine`] owns one run's lineage and queues. It is synchronous and
//!   deterministic; executors drive it (see [`sim`] for the seeded one).

mod build;
mod call;
#[doc(hidden)]
pub mod check;
mod domain;
mod engine;
mod error;
mod executor;
mod grain;
mod lineage;
pub mod metrics;
mod pipeline;
mod plan;
mod port;
mod ready_queue;
pub mod rules;
pub mod sim;
pub mod sink;
mod stage;
mod value;

pub use build::PortRef;
pub use call::{Call, CallConfig, FnCall, Recovery, Reservation};
pub use domain::{ChildOf, DescendantOf, Domain, DomainInfo, Here, NoParent, ParentSlot, RootDomain, There};
pub use engine::{
    Batch, BatchId, CallStats, Engine, EngineConfig, EngineStats, EntityPath, GrainRef, ReportOutcome,
    RootOutcome,
};
pub use error::{PlanError, PlanErrors, RunError};
pub use executor::Runner;
pub use grain::{InvalidTransition, Phase, Transition};
pub use lineage::Publish;
pub use metrics::{CallMetrics, RunSummary};
pub use pipeline::Pipeline;
pub use plan::{CallSpec, Output, Plan, PlanBuilder};
pub use port::{
    InputPort, Inputs, Optional, OutputSet, Port, broadcast, expand, expand_aligned, filter, reduce,
    reduce_aligned, reduce_members,
};
pub use stage::{
    Async, AsyncStage, AttemptError, AttemptResult, BatchFn, BatchInputs, BoxError, BoxFuture, ErasedCall,
    ErasedOutcome, Execution, Replica, Stage, StageBox, StageContext, StageKind, StageResult, block_on,
    panic_text,
};
pub use value::{Cause, Data, Item, ItemKind, Outcome, Value};
