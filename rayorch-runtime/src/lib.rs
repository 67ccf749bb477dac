//! rayorch's runtime: typed plan builder, lineage engine, scheduler and executors.
//!
//! The crate root is the pipeline author's API: Domains, Ports, Calls and
//! the structural operators ([`expand`], [`reduce`], [`filter`],
//! [`broadcast`], ...) build an immutable [`Plan`] (Domain mistakes are type
//! errors, see [`mod@domain`]); a [`Runner`] executes it and streams each
//! finished root to a [`sink`]; `sim` (feature `sim`) is the seeded,
//! deterministic executor for tests. An executor author finds the synchronous [`spi::Engine`] and the
//! stage-erasure types in [`spi`].
//!
//! Inside, a ground floor and three layers above it, each importing only
//! downward: `value` and `stage/` (values, causes, and the stage contract a
//! Call runs: `Stage`, `AsyncStage`, per-record `records`), then `plan/`
//! (building and checking a plan), `engine/` (the synchronous,
//! deterministic lineage engine), `exec/` (executors, sinks, metrics).

mod engine;
mod error;
mod exec;
mod plan;
mod stage;
mod value;

#[cfg(feature = "sim")]
pub use exec::sim;
pub use exec::{journal, sink};
#[doc(hidden)]
pub use plan::check;
pub use plan::domain;

// The pipeline author's API.
pub use engine::{EntityPath, RootOutcome};
pub use error::{PlanError, PlanErrors, RunError};
pub use exec::control::{
    AdmissionLive, BackendGauge, BatchDispatched, BatchFinished, CallLive, CancelHandle, Observer, Progress,
};
pub use exec::metrics::{CallMetrics, DomainCounts, FailureCount, FailureLevel, KeyBatchCount, RunSummary};
pub use exec::runner::{DEFAULT_BACKPRESSURE, DEFAULT_WINDOW, DEFAULT_WINDOW_CHILDREN, Runner};
pub use plan::call::{Call, CallConfig, FnCall, RecordCall, Recovery, Reservation};
pub use plan::domain::{ChildOf, Domain, RootDomain};
pub use plan::pipeline::Pipeline;
pub use plan::port::{
    Optional, Port, broadcast, expand, expand_aligned, filter, reduce, reduce_aligned, reduce_keep_failed,
    reduce_members,
};
pub use plan::{Output, Plan, PlanBuilder};
pub use stage::records::{AsyncRecordStage, RecordPolicy, RecordResult, Records};
pub use stage::{Async, AsyncStage, BatchFn, BoxError, BoxFuture, Stage, StageContext, StageResult};
pub use value::{Cause, Data, FailedAttempt, FailureKind, Item, ItemKind, Origin, Outcome};

// Type-level plumbing the operators' signatures name; users never write it.
#[doc(hidden)]
pub use plan::build::PortRef;
#[doc(hidden)]
pub use plan::domain::{DescendantOf, DomainInfo, Here, NoParent, ParentSlot, There};
#[doc(hidden)]
pub use plan::port::{InputPort, Inputs, OutputSet};

pub mod spi {
    //! The executor SPI: what a new executor (a cluster backend, a replay
    //! tool) drives. A pipeline author never needs it.
    //!
    //! An executor is a [`Backend`] of the one run loop ([`run`]): the loop
    //! admits roots into the [`Engine`], delivers finished roots, journals,
    //! applies backpressure, detects stalls and cancellations and builds the
    //! summary; the backend reserves [`Batch`]es per Call through its
    //! [`Dispatch`], runs each on a replica of the Call's [`ErasedCall`]
    //! ([`ReplicaPool`], [`run_attempt`]) and hands back a [`Report`] with
    //! its [`AttemptResult`]; the engine's commit gate decides what counts.

    pub use crate::engine::grain::{InvalidTransition, Phase, Transition};
    pub use crate::engine::lineage::Publish;
    pub use crate::engine::propagation_rules;
    pub use crate::engine::{
        Batch, BatchId, CallStats, Engine, EngineConfig, EngineStats, GrainRef, KeyBatches, ReportOutcome,
    };
    pub use crate::exec::backpressure::Backpressure;
    pub use crate::exec::journal::{Journal, JournalOptions};
    pub use crate::exec::metrics::WorkerGrains;
    pub use crate::exec::replica::{ReplicaPool, run_attempt};
    pub use crate::exec::run_loop::{Backend, Dispatch, Finished, LoopConfig, Report, run};
    pub use crate::plan::CallSpec;
    pub use crate::plan::forward::{Forward, ValueList, forwarding, split_output};
    #[cfg(feature = "sim")]
    pub use crate::stage::Replica;
    pub use crate::stage::{
        AttemptError, AttemptResult, BatchInputs, ErasedCall, ErasedOutcome, Execution, StageBox,
        StageFailure, StageKind, panic_text,
    };
    pub use crate::value::{Value, Values};
}
