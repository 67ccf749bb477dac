//! Stages: the user code a Call runs, and its type-erased form.
//!
//! A [`Stage`] is initialised once per replica (its factory is the paper's
//! `__init__`: load the model there) and then runs batches: one
//! [`Outcome`] per input, in input order. An `Err` for the whole batch (or a
//! panic) is a *physical attempt failure*, handled by the Call's recovery
//! policy; a typed per-record outcome is a *logical* result.
//!
//! Executors never see `S` itself: the typed builder wraps each Call node in
//! an [`ErasedCall`] that spawns [`Replica`]s taking erased inputs.

use std::any::type_name;
use std::marker::PhantomData;
use std::sync::Arc;

use crate::value::{Outcome, Value};

/// A boxed error, as stages and factories return it.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// What [`Stage::run`] returns: one outcome per input, or a whole-batch error.
pub type StageResult<T> = Result<Vec<Outcome<T>>, BoxError>;

/// Reusable user code: a model, a parser, an uploader.
///
/// ```
/// use rayorch_runtime::{Outcome, Stage, StageResult};
/// struct Upper;
/// impl Stage for Upper {
///     type In = String;
///     type Out = String;
///     fn run(&mut self, batch: Vec<String>) -> StageResult<String> {
///         Ok(batch.into_iter().map(|s| Outcome::Ok(s.to_uppercase())).collect())
///     }
/// }
/// assert_eq!(Upper.run(vec!["a".into()]).unwrap(), vec![Outcome::Ok("A".to_string())]);
/// ```
pub trait Stage: Send + 'static {
    /// One input record (a tuple for a Call with several inputs).
    type In: Send + 'static;
    /// One output record (a tuple for a Call with several outputs).
    type Out: Send + 'static;
    /// Run one physical batch.
    fn run(&mut self, batch: Vec<Self::In>) -> StageResult<Self::Out>;
}

/// A [`Stage`] made from a closure over a whole batch.
pub struct BatchFn<F, I, O> {
    f: F,
    _types: PhantomData<fn(I) -> O>,
}

impl<F: Clone, I, O> Clone for BatchFn<F, I, O> {
    fn clone(&self) -> Self {
        BatchFn {
            f: self.f.clone(),
            _types: PhantomData,
        }
    }
}

impl<F, I, O> BatchFn<F, I, O>
where
    F: FnMut(Vec<I>) -> StageResult<O> + Send + 'static,
{
    /// Wrap `f`.
    pub fn new(f: F) -> Self {
        BatchFn {
            f,
            _types: PhantomData,
        }
    }
}

impl<F, I, O> Stage for BatchFn<F, I, O>
where
    F: FnMut(Vec<I>) -> StageResult<O> + Send + 'static,
    I: Send + 'static,
    O: Send + 'static,
{
    type In = I;
    type Out = O;
    fn run(&mut self, batch: Vec<I>) -> StageResult<O> {
        (self.f)(batch)
    }
}

/// Erased inputs of one Grain: one slot per input edge; `None` is a dropped
/// optional input.
pub type GrainInput = Vec<Option<Value>>;

/// Erased outcome of one Grain: one value per output Port on success.
pub type ErasedOutcome = Outcome<Vec<Value>>;

/// Why a whole attempt failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AttemptError {
    /// The stage returned `Err`, panicked, crashed or timed out: retryable.
    Failed(String),
    /// The stage broke its contract (e.g. wrong outcome count): not retried.
    Contract(String),
}

/// The result of one attempt, as reported to the engine.
pub type AttemptResult = Result<Vec<ErasedOutcome>, AttemptError>;

/// A live replica of a Call: a stage instance plus the node's erasure glue.
pub trait Replica: Send {
    /// Run one batch of erased inputs.
    fn run(&mut self, batch: Vec<GrainInput>) -> AttemptResult;
}

/// A Call node's runtime side: spawns replicas.
pub trait ErasedCall: Send + Sync {
    /// The stage's type name, for errors.
    fn stage_name(&self) -> &'static str;
    /// Initialise one replica (runs the stage factory).
    fn spawn(&self) -> Result<Box<dyn Replica>, BoxError>;
}

pub(crate) type Assemble<In> = fn(GrainInput) -> Option<In>;
pub(crate) type Split<Out> = fn(Out) -> Vec<Value>;
pub(crate) type Factory<S> = Arc<dyn Fn() -> Result<S, BoxError> + Send + Sync>;

pub(crate) struct TypedCall<S: Stage> {
    pub(crate) factory: Factory<S>,
    pub(crate) assemble: Assemble<S::In>,
    pub(crate) split: Split<S::Out>,
}

impl<S: Stage> ErasedCall for TypedCall<S> {
    fn stage_name(&self) -> &'static str {
        type_name::<S>()
    }

    fn spawn(&self) -> Result<Box<dyn Replica>, BoxError> {
        Ok(Box::new(TypedReplica {
            stage: (self.factory)()?,
            assemble: self.assemble,
            split: self.split,
        }))
    }
}

struct TypedReplica<S: Stage> {
    stage: S,
    assemble: Assemble<S::In>,
    split: Split<S::Out>,
}

impl<S: Stage> Replica for TypedReplica<S> {
    fn run(&mut self, batch: Vec<GrainInput>) -> AttemptResult {
        let inputs = batch
            .into_iter()
            .map(self.assemble)
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| {
                AttemptError::Contract(format!(
                    "internal: inputs of stage `{}` had unexpected types",
                    type_name::<S>()
                ))
            })?;
        let outcomes = self
            .stage
            .run(inputs)
            .map_err(|e| AttemptError::Failed(e.to_string()))?;
        Ok(outcomes.into_iter().map(|o| o.map(self.split)).collect())
    }
}
