//! Stages: the user code a Call runs, and its type-erased form.
//!
//! Three kinds of stage:
//! - [`Stage`]: blocking batch code (candle, ONNX Runtime, a parser). Each
//!   replica owns one instance, made by the Call's factory (the paper's
//!   `__init__`: load the model there), and runs on its own OS thread.
//! - [`AsyncStage`]: I/O (uploads, HTTP model servers). One shared instance per
//!   replica, up to `concurrency` batches in flight on the async runtime.
//! - [`AsyncRecordStage`](crate::AsyncRecordStage): I/O one record at a time,
//!   each record with its own deadline and retries; an `AsyncStage` through
//!   its adapter (`stage/records.rs`), so executors see an async stage.
//!
//! Each returns one [`Outcome`] per input, in input order. An `Err` for the
//! whole batch, or a panic, is a *physical attempt failure* handled by the
//! Call's recovery policy; a per-record outcome is a *logical* result.
//!
//! An async stage runs only as a future ([`ErasedCall::run_async`]) on the
//! executor's tokio runtime; nothing here blocks on a future except the
//! self-contained test replica (`Replica`, feature `sim`), which owns a
//! current-thread runtime with a paused clock for that.
//!
//! Executors never see `S`: each Call node is wrapped in an [`ErasedCall`]
//! that makes stage instances ([`StageBox`]) and runs erased batches on them.
//! Two Calls applied from the same `Call` value have the same stage type, so
//! one pool of instances can serve both.
//!
//! This module is the ground floor beside `value`: it imports nothing from
//! `plan/`, `engine/` or `exec/`, which all build on it.

pub(crate) mod quiet;
pub(crate) mod records;

use std::any::{Any, type_name};
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::Arc;

use crate::stage::records::RecordPolicy;
use crate::value::{Outcome, Value, Values, all_or_none};

/// A boxed error, as stages and factories return it.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// What a stage returns: one outcome per input, or a whole-batch error.
pub type StageResult<T> = Result<Vec<Outcome<T>>, BoxError>;

/// A boxed, sendable future.
pub type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// What a stage knows about the Call it runs for.
#[derive(Clone)]
pub struct StageContext {
    call: Arc<str>,
    replica: usize,
    param: Option<Arc<dyn Any + Send + Sync>>,
    /// The Call's per-record policy and concurrency, read by the
    /// per-record adapter (`stage/records.rs`).
    pub(crate) records: RecordPolicy,
    pub(crate) concurrency: usize,
    /// The Call's per-record counters (per-record Calls built by a plan).
    pub(crate) record_counts: Option<Arc<records::RecordCounts>>,
}

impl StageContext {
    /// A context for `call`, replica `replica`, without a parameter.
    pub fn new(call: &str, replica: usize) -> StageContext {
        StageContext {
            call: Arc::from(call),
            replica,
            param: None,
            records: RecordPolicy::default(),
            concurrency: 1,
            record_counts: None,
        }
    }

    /// The Call's name.
    pub fn call(&self) -> &str {
        &self.call
    }

    /// The replica's index in its pool.
    pub fn replica(&self) -> usize {
        self.replica
    }

    /// The Call's static parameter (see [`crate::Call::param`]), if it is a `P`.
    pub fn param<P: Any>(&self) -> Option<&P> {
        self.param.as_deref().and_then(|p| p.downcast_ref::<P>())
    }
}

/// Blocking batch code: a model, a parser.
///
/// ```
/// use rayorch::{Outcome, Stage, StageContext, StageResult};
/// struct Upper;
/// impl Stage for Upper {
///     type In = String;
///     type Out = String;
///     fn run(&mut self, batch: Vec<String>, _cx: &StageContext) -> StageResult<String> {
///         Ok(batch.into_iter().map(|s| Outcome::Ok(s.to_uppercase())).collect())
///     }
/// }
/// let cx = StageContext::new("upper", 0);
/// assert_eq!(Upper.run(vec!["a".into()], &cx).unwrap(), vec![Outcome::Ok("A".to_string())]);
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a rayorch Stage",
    label = "a blocking Call runs a `Stage`",
    note = "implement `Stage` (`type In`, `type Out`, `fn run(&mut self, batch: Vec<In>, cx: &StageContext) -> StageResult<Out>`, one `Outcome` per input), or build the Call from a closure with `Call::map(name, |x: In| ...)` / `Call::batch(name, |xs: Vec<In>| ...)`; async code implements `AsyncStage` and is wrapped as `Async<S>` (`Call::new_async`)"
)]
pub trait Stage: Send + 'static {
    /// One input record (a tuple for a Call with several inputs).
    type In: Send + 'static;
    /// One output record (a tuple for a Call with several outputs).
    type Out: Send + 'static;
    /// Run one physical batch.
    fn run(&mut self, batch: Vec<Self::In>, cx: &StageContext) -> StageResult<Self::Out>;
}

/// Async batch code for I/O. One instance per replica serves up to the Call's
/// `concurrency` batches at once.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a rayorch AsyncStage",
    label = "`Async<S>` needs `S: AsyncStage`",
    note = "implement `AsyncStage` (`type In`, `type Out`, `async fn run(self: Arc<Self>, batch: Vec<In>, cx: StageContext) -> StageResult<Out>`) and build the Call with `Call::new_async(name, || Ok(stage))`; blocking model code implements `Stage` instead"
)]
pub trait AsyncStage: Send + Sync + 'static {
    /// One input record.
    type In: Send + 'static;
    /// One output record.
    type Out: Send + 'static;
    /// Run one physical batch.
    fn run(
        self: Arc<Self>,
        batch: Vec<Self::In>,
        cx: StageContext,
    ) -> impl Future<Output = StageResult<Self::Out>> + Send + 'static;

    /// The name failure texts give the stage: its type's short name, or the
    /// wrapped stage's for an adapter.
    #[doc(hidden)]
    fn erased_name() -> &'static str
    where
        Self: Sized,
    {
        short_type_name::<Self>()
    }
}

/// Marks an [`AsyncStage`] for use in a [`crate::Call`]: `Call<Async<Upload>>`.
pub struct Async<S>(pub S);

/// A stage of either kind, as a Call holds it.
pub trait StageKind: Send + 'static {
    /// One input record.
    type In: Send + 'static;
    /// One output record.
    type Out: Send + 'static;
    #[doc(hidden)]
    fn erase(glue: Glue<Self>) -> Arc<dyn ErasedCall>
    where
        Self: Sized;
}

/// A stage instance of erased type.
pub type StageBox = Box<dyn Any + Send>;

/// Erased inputs of one batch, flat: `arity` slots per Grain (one per input
/// edge; `None` is a dropped optional input). One allocation per batch.
#[derive(Clone, Debug, Default)]
pub struct BatchInputs {
    arity: usize,
    values: Vec<Option<Value>>,
}

impl BatchInputs {
    pub(crate) fn with_capacity(arity: usize, grains: usize) -> BatchInputs {
        BatchInputs {
            arity,
            values: Vec::with_capacity(arity * grains),
        }
    }

    pub(crate) fn push(&mut self, v: Option<Value>) {
        self.values.push(v);
    }

    /// A batch rebuilt from its flat slots (`arity` per Grain, Grain order),
    /// e.g. by a remote worker that decoded them from a message. `None` for
    /// a slot count that is not a multiple of `arity`.
    pub fn from_slots(arity: usize, values: Vec<Option<Value>>) -> Option<BatchInputs> {
        if (arity == 0 && !values.is_empty()) || (arity > 0 && !values.len().is_multiple_of(arity)) {
            return None;
        }
        Some(BatchInputs { arity, values })
    }

    /// Input slots per Grain (one per input edge of the Call).
    pub fn arity(&self) -> usize {
        self.arity
    }

    /// Grains in the batch.
    pub fn len(&self) -> usize {
        self.values.len().checked_div(self.arity).unwrap_or(0)
    }

    /// Is the batch empty?
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// The input slots of Grain `i`.
    pub fn grain(&self, i: usize) -> &[Option<Value>] {
        &self.values[i * self.arity..(i + 1) * self.arity]
    }

    /// The input slots of each Grain, in order.
    pub fn iter(&self) -> std::slice::Chunks<'_, Option<Value>> {
        self.values.chunks(self.arity.max(1))
    }
}

/// Erased outcome of one Grain: one value per output Port on success.
pub type ErasedOutcome = Outcome<Values>;

/// Why a whole attempt failed.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum AttemptError {
    /// The replica crashed or was lost (or the attempt failed on a remote
    /// worker, where only the text travels): retryable.
    Failed(String),
    /// The stage returned `Err`: retryable; its error is kept whole, so a
    /// record this leaves failed carries it ([`Cause::stage_error`](crate::Cause::stage_error)).
    Returned(StageFailure),
    /// The stage panicked (in a blocking `run`, in an async one's future or
    /// before it): retryable, and the replica is replaced.
    Panicked(String),
    /// The attempt ran past the Call's timeout (or a worker's lease):
    /// retryable, and the replica is replaced.
    TimedOut(String),
    /// The stage broke its contract (e.g. wrong outcome count): not retried.
    Contract(String),
    /// The Call cannot run the batch at all (its replicas are gone: too many
    /// threads stuck past the timeout, [`Call::max_abandoned_threads`](crate::Call::max_abandoned_threads)):
    /// not retried; each record fails with kind `error`.
    Stopped(String),
}

impl AttemptError {
    /// Whether the Call's recovery policy may retry the attempt (a contract
    /// error never is).
    pub fn retryable(&self) -> bool {
        !matches!(self, AttemptError::Contract(_) | AttemptError::Stopped(_))
    }

    /// What went wrong, as the failure's cause will say it.
    pub fn message(&self) -> &str {
        match self {
            AttemptError::Returned(f) => &f.message,
            AttemptError::Failed(m)
            | AttemptError::Panicked(m)
            | AttemptError::TimedOut(m)
            | AttemptError::Contract(m)
            | AttemptError::Stopped(m) => m,
        }
    }

    /// The code a record's cause carries when this was its last attempt
    /// (see [`Cause::code`](crate::Cause::code)).
    pub fn code(&self) -> &'static str {
        match self {
            AttemptError::Failed(_) | AttemptError::Returned(_) => "error",
            AttemptError::Panicked(_) => "panic",
            AttemptError::TimedOut(_) => "timeout",
            AttemptError::Contract(_) => "contract",
            AttemptError::Stopped(_) => "call.stopped",
        }
    }

    /// The kind of failure a record ends with when this was its last attempt.
    pub fn kind(&self) -> crate::value::FailureKind {
        use crate::value::FailureKind;
        match self {
            AttemptError::Failed(_) | AttemptError::Returned(_) | AttemptError::Stopped(_) => {
                FailureKind::Error
            }
            AttemptError::Panicked(_) => FailureKind::Panic,
            AttemptError::TimedOut(_) => FailureKind::Timeout,
            AttemptError::Contract(_) => FailureKind::Contract,
        }
    }
}

/// A stage's `Err` for a whole batch: its text and the error itself.
#[derive(Clone, Debug)]
pub struct StageFailure {
    message: String,
    error: Arc<dyn std::error::Error + Send + Sync>,
}

impl StageFailure {
    /// Keep `error` (its text is the failure's message).
    pub fn new(error: BoxError) -> StageFailure {
        StageFailure {
            message: error.to_string(),
            error: Arc::from(error),
        }
    }

    /// The stage's error.
    pub fn error(&self) -> &Arc<dyn std::error::Error + Send + Sync> {
        &self.error
    }
}

impl PartialEq for StageFailure {
    fn eq(&self, other: &StageFailure) -> bool {
        self.message == other.message
    }
}

impl Eq for StageFailure {}

impl AttemptError {
    /// The stage's own error behind this attempt's failure, when it
    /// returned one.
    pub fn stage_error(&self) -> Option<Arc<dyn std::error::Error + Send + Sync>> {
        match self {
            AttemptError::Returned(f) => Some(f.error.clone()),
            _ => None,
        }
    }
}

/// The result of one attempt, as reported to the engine.
pub type AttemptResult = Result<Vec<ErasedOutcome>, AttemptError>;

/// How a Call's replicas run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Execution {
    /// One OS thread per replica, one batch at a time.
    Blocking,
    /// Futures on the async runtime.
    Async,
}

/// A Call node's runtime side.
pub trait ErasedCall: Send + Sync {
    /// The stage's type name, for errors.
    fn stage_name(&self) -> &'static str;
    /// Blocking or async.
    fn execution(&self) -> Execution;
    /// Initialise one stage instance (runs the factory).
    fn spawn_stage(&self) -> Result<StageBox, BoxError>;
    /// Run a batch on a blocking instance made by a Call of the same pool
    /// (an async Call answers with a contract error: executors run it with
    /// [`ErasedCall::run_async`]).
    fn run_blocking(&self, stage: &mut StageBox, replica: usize, batch: BatchInputs) -> AttemptResult;
    /// Run a batch on an async instance made by a Call of the same pool.
    fn run_async(&self, stage: &StageBox, replica: usize, batch: BatchInputs) -> BoxFuture<AttemptResult>;
    /// A per-record Call's (attempts, retries, deadline misses) so far, over
    /// every run of its plan in this process (zero for other Calls); a run
    /// reports the difference between its end and its start.
    fn record_counts(&self) -> [u64; 3] {
        [0; 3]
    }
    /// A self-contained replica (an instance plus this node's glue), handy for
    /// tests and simple executors. An async stage's batches run to completion
    /// on a current-thread tokio runtime with paused time that the replica
    /// owns, so `tokio::time::sleep` returns as soon as nothing else can run;
    /// do not call [`Replica::run`] from inside another tokio runtime. For
    /// tests (feature `sim`): production executors run async stages on real
    /// time.
    #[cfg(feature = "sim")]
    fn spawn(&self) -> Result<Box<dyn Replica + '_>, BoxError> {
        Ok(Box::new(NodeReplica {
            stage: self.spawn_stage()?,
            call: self,
            rt: None,
        }))
    }
}

/// A live replica bound to one Call node.
#[cfg(feature = "sim")]
pub trait Replica: Send {
    /// Run one batch of erased inputs.
    fn run(&mut self, batch: BatchInputs) -> AttemptResult;
}

#[cfg(feature = "sim")]
struct NodeReplica<'a, C: ?Sized> {
    stage: StageBox,
    call: &'a C,
    /// Made on the first async batch; blocking stages never need one.
    rt: Option<tokio::runtime::Runtime>,
}

#[cfg(feature = "sim")]
impl<C: ErasedCall + ?Sized> Replica for NodeReplica<'_, C> {
    fn run(&mut self, batch: BatchInputs) -> AttemptResult {
        match self.call.execution() {
            Execution::Blocking => self.call.run_blocking(&mut self.stage, 0, batch),
            Execution::Async => {
                let rt = match self.rt.take() {
                    Some(rt) => rt,
                    None => paused_runtime().map_err(|e| AttemptError::Failed(e.to_string()))?,
                };
                let rt = self.rt.insert(rt);
                rt.block_on(self.call.run_async(&self.stage, 0, batch))
            }
        }
    }
}

/// A current-thread tokio runtime whose clock is paused: timers fire in
/// deadline order the moment the runtime has nothing else to do, so async
/// stages that sleep run deterministically and at full speed. For the seeded
/// executor and test replicas; never for production runs, where time is real.
///
/// Errors when called from inside a tokio runtime: `block_on` on a second
/// runtime there would panic.
#[cfg(feature = "sim")]
pub(crate) fn paused_runtime() -> Result<tokio::runtime::Runtime, String> {
    if tokio::runtime::Handle::try_current().is_ok() {
        return Err(
            "async stages are driven on a runtime of their own: call this outside a tokio \
                    runtime (from a plain `std::thread`, not from a task or its blocking pool)"
                .into(),
        );
    }
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .map_err(|e| format!("could not start a tokio runtime for async stages: {e}"))
}

pub(crate) type Assemble<In> = fn(&mut std::vec::IntoIter<Option<Value>>) -> Option<In>;
pub(crate) type Split<Out> = fn(Out) -> Values;
pub(crate) type Factory<S> = Arc<dyn Fn() -> Result<S, BoxError> + Send + Sync>;

/// The per-node glue between erased values and a stage's types.
#[doc(hidden)]
pub struct Glue<S: StageKind> {
    pub(crate) name: Arc<str>,
    pub(crate) factory: Factory<S>,
    pub(crate) assemble: Assemble<S::In>,
    pub(crate) split: Split<S::Out>,
    pub(crate) param: Option<Arc<dyn Any + Send + Sync>>,
    pub(crate) records: RecordPolicy,
    pub(crate) concurrency: usize,
    pub(crate) record_counts: Arc<records::RecordCounts>,
}

impl<S: StageKind> Glue<S> {
    fn context(&self, replica: usize) -> StageContext {
        StageContext {
            call: self.name.clone(),
            replica,
            param: self.param.clone(),
            records: self.records,
            concurrency: self.concurrency,
            record_counts: Some(self.record_counts.clone()),
        }
    }

    fn inputs(&self, batch: BatchInputs) -> Result<Vec<S::In>, AttemptError> {
        let n = batch.len();
        let mut it = batch.values.into_iter();
        all_or_none(n, (0..n).map(|_| (self.assemble)(&mut it))).ok_or_else(|| {
            AttemptError::Contract(format!(
                "internal: inputs of stage `{}` had unexpected types",
                type_name::<S>()
            ))
        })
    }

    fn outputs(split: Split<S::Out>, r: StageResult<S::Out>) -> AttemptResult {
        let outcomes = r.map_err(|e| AttemptError::Returned(StageFailure::new(e)))?;
        Ok(outcomes.into_iter().map(|o| o.map(split)).collect())
    }

    fn wrong_kind(&self) -> AttemptError {
        AttemptError::Contract(format!(
            "internal: Call `{}` was given a stage instance of another type than `{}`",
            self.name,
            type_name::<S>()
        ))
    }
}

impl<S: Stage> StageKind for S {
    type In = S::In;
    type Out = S::Out;
    fn erase(glue: Glue<Self>) -> Arc<dyn ErasedCall> {
        Arc::new(BlockingCall(glue))
    }
}

struct BlockingCall<S: Stage>(Glue<S>);

impl<S: Stage> ErasedCall for BlockingCall<S> {
    fn stage_name(&self) -> &'static str {
        short_type_name::<S>()
    }
    fn execution(&self) -> Execution {
        Execution::Blocking
    }
    fn spawn_stage(&self) -> Result<StageBox, BoxError> {
        Ok(Box::new((self.0.factory)()?))
    }
    fn run_blocking(&self, stage: &mut StageBox, replica: usize, batch: BatchInputs) -> AttemptResult {
        let stage = stage.downcast_mut::<S>().ok_or_else(|| self.0.wrong_kind())?;
        let inputs = self.0.inputs(batch)?;
        Glue::<S>::outputs(self.0.split, stage.run(inputs, &self.0.context(replica)))
    }
    fn run_async(&self, _: &StageBox, _: usize, _: BatchInputs) -> BoxFuture<AttemptResult> {
        let err = AttemptError::Contract(format!(
            "internal: blocking stage `{}` run as async",
            type_name::<S>()
        ));
        Box::pin(std::future::ready(Err(err)))
    }
}

impl<S: AsyncStage> StageKind for Async<S> {
    type In = S::In;
    type Out = S::Out;
    fn erase(glue: Glue<Self>) -> Arc<dyn ErasedCall> {
        Arc::new(AsyncCall(glue))
    }
}

struct AsyncCall<S: AsyncStage>(Glue<Async<S>>);

impl<S: AsyncStage> ErasedCall for AsyncCall<S> {
    fn stage_name(&self) -> &'static str {
        S::erased_name()
    }
    fn execution(&self) -> Execution {
        Execution::Async
    }
    fn spawn_stage(&self) -> Result<StageBox, BoxError> {
        let Async(s) = (self.0.factory)()?;
        Ok(Box::new(Arc::new(s)))
    }
    fn run_blocking(&self, _: &mut StageBox, _: usize, _: BatchInputs) -> AttemptResult {
        // Blocking on a future here would need a runtime of its own on every
        // replica thread; executors run async stages with `run_async`.
        Err(AttemptError::Contract(format!(
            "internal: async stage `{}` run as blocking",
            type_name::<S>()
        )))
    }
    fn run_async(&self, stage: &StageBox, replica: usize, batch: BatchInputs) -> BoxFuture<AttemptResult> {
        let Some(stage) = stage.downcast_ref::<Arc<S>>().cloned() else {
            return Box::pin(std::future::ready(Err(self.0.wrong_kind())));
        };
        let inputs = match self.0.inputs(batch) {
            Ok(i) => i,
            Err(e) => return Box::pin(std::future::ready(Err(e))),
        };
        let split = self.0.split;
        let fut = stage.run(inputs, self.0.context(replica));
        Box::pin(async move { Glue::<Async<S>>::outputs(split, fut.await) })
    }
    fn record_counts(&self) -> [u64; 3] {
        self.0.record_counts.snapshot()
    }
}

/// A [`Stage`] made from a closure over a whole batch.
pub struct BatchFn<F, I, O> {
    f: F,
    _types: PhantomData<fn(I) -> O>,
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
    fn run(&mut self, batch: Vec<I>, _cx: &StageContext) -> StageResult<O> {
        (self.f)(batch)
    }
}

/// The text of a panic payload (a stage's panic becomes an attempt failure).
pub fn panic_text(p: &Box<dyn Any + Send>) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "non-string panic".into())
}

/// A stage type as its author named it, for failure texts: `OcrStage`, or
/// `BatchFn` for a closure Call, not the full path with every generic
/// argument (hundreds of characters for a closure's boxed type).
pub(crate) fn short_type_name<S>() -> &'static str {
    let full = type_name::<S>();
    let head = full.split('<').next().unwrap_or(full);
    head.rsplit("::").next().unwrap_or(head)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::{Call, Plan, domain};

    domain!(Doc);

    struct Sleepy;

    impl AsyncStage for Sleepy {
        type In = u32;
        type Out = u32;
        async fn run(self: Arc<Self>, batch: Vec<u32>, _cx: StageContext) -> StageResult<u32> {
            tokio::time::sleep(Duration::from_secs(3600)).await;
            tokio::task::yield_now().await;
            Ok(batch.into_iter().map(|x| Outcome::Ok(x + 1)).collect())
        }
    }

    #[test]
    fn a_spawned_replica_runs_an_async_stage_on_paused_tokio_time() {
        let sleepy = Call::new_async("sleepy", || Ok(Sleepy));
        let (plan, _) = Plan::build(|b| {
            let x = b.source::<Doc, u32>();
            b.output(sleepy.apply(x))
        })
        .unwrap();
        let call = &plan.calls()[0].runtime;
        let mut replica = call.spawn().unwrap();
        let mut batch = BatchInputs::with_capacity(1, 2);
        batch.push(Some(Arc::new(1u32)));
        batch.push(Some(Arc::new(2u32)));
        let out = replica.run(batch).unwrap();
        let got: Vec<u32> = out
            .into_iter()
            .map(|o| match o {
                Outcome::Ok(v) => *v[0].downcast_ref::<u32>().unwrap(),
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(got, vec![2, 3]);
        // Run as blocking, an async stage is a contract error, not a hang.
        let mut stage = call.spawn_stage().unwrap();
        let err = call.run_blocking(&mut stage, 0, BatchInputs::with_capacity(1, 0));
        assert!(matches!(err, Err(AttemptError::Contract(_))), "{err:?}");
    }
}
