//! Calls: one configured use of a Stage in a pipeline.

use std::any::Any;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::plan::build::{self, NodeKind};
use crate::plan::domain::Domain;
use crate::plan::port::{Inputs, OutputSet, Port};
use crate::stage::records::{AsyncRecordStage, RecordPolicy, Records};
use crate::stage::{Assemble, Async, AsyncStage, BatchFn, BoxError, Factory, Glue, StageKind, StageResult};
use crate::value::{Data, Outcome};

/// How a Call's Ready Queue is turned into physical batches.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Reservation {
    /// Up to B Grains from the head, any parents (FIFO; O(B)).
    Elastic,
    /// Up to B siblings of the head Grain's parent; the rest keep their order.
    ParentBound,
    /// Up to B Grains from arbitrary queue positions (ablation baseline only).
    Unordered,
    /// Up to B Grains, any parents, preferring parents nearest completion:
    /// the parent with the fewest Grains queued at this Call goes first
    /// (shortest-remaining-first), aged by how long its Grains have waited so
    /// a big parent is never starved. Batches stay full; a small parent
    /// admitted right after a big one that published all its children at
    /// once is not held behind them. A parent's first batch is a probe:
    /// until a report of it commits, other parents' Grains go to the Call's
    /// other replicas first (never leaving one idle), so a parent that
    /// fails at once (a GroupFailure on its first pages) runs one batch,
    /// not one per free replica, and its queued Grains are suppressed.
    /// O(B log P) per batch for P parents with
    /// queued Grains. A Call over the root Domain has a single parent, so
    /// there it reserves exactly as `Elastic`. The default: on the long-tail
    /// workloads it ties FIFO on wall time and cuts mean parent completion by
    /// 45% when parents publish their children at once (BENCHMARKS.md).
    #[default]
    NearestCompletion,
}

/// What happens when a whole attempt fails (an `Err` or a panic).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Recovery {
    /// Fail-stop: the run ends with an error.
    Abort,
    /// Retry the exact batch up to `n` times, ahead of ready work.
    RetryBatch(u32),
    /// Retry the exact batch up to `n` times, after ready work.
    RetryTail(u32),
    /// Retry once, then bisect the batch down to the poison record, which ends
    /// Failed; everything else in the batch succeeds (the default).
    #[default]
    Isolate,
}

/// Static configuration of a Call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CallConfig {
    /// Largest physical batch (B).
    pub batch_size: usize,
    /// Replicas in the Call's pool.
    pub replicas: usize,
    /// Reservation policy.
    pub reservation: Reservation,
    /// Recovery policy for attempt failures.
    pub recovery: Recovery,
    /// Per-attempt time limit: a batch still running after it is an attempt
    /// failure and its replica is replaced.
    pub timeout: Option<Duration>,
    /// Blocking replicas only: threads given up on past the timeout that
    /// may still be running at once, per pool ([`Call::max_abandoned_threads`]).
    pub max_abandoned_threads: usize,
    /// Batches one replica of an async stage may run at once; for a
    /// per-record Call ([`Call::new_async_records`]) also the records whose
    /// attempts it runs at once.
    pub concurrency: usize,
    /// Each record's deadline, retries and backoff: read only by per-record
    /// async Calls ([`Call::new_async_records`]).
    pub records: RecordPolicy,
    /// Longest a ready Grain may wait for mates before it is dispatched in
    /// a smaller batch ([`Call::max_batch_delay`]); `None`: never waits.
    pub max_batch_delay: Option<Duration>,
    /// Batch sizes dispatched at once without waiting for a full batch
    /// ([`Call::preferred_batch_sizes`]), largest first.
    pub preferred_batch_sizes: Vec<usize>,
}

impl Default for CallConfig {
    fn default() -> Self {
        CallConfig {
            batch_size: 32,
            replicas: 1,
            reservation: Reservation::NearestCompletion,
            recovery: Recovery::Isolate,
            timeout: None,
            max_abandoned_threads: 8,
            concurrency: 1,
            records: RecordPolicy::default(),
            max_batch_delay: None,
            preferred_batch_sizes: Vec::new(),
        }
    }
}

/// A Call's shape key read from a Grain's input value (`None`: not the
/// stage's input type).
pub(crate) type ShapeFn = Arc<dyn Fn(&(dyn Any + Send + Sync)) -> Option<u64> + Send + Sync>;

/// One configured use of a Stage. Apply it to Ports inside a plan build.
///
/// ```
/// use rayorch::{Call, Outcome, Recovery, Reservation};
/// let double = Call::map("double", |x: u32| x * 2).batch_size(64).replicas(2);
/// assert_eq!(double.config().batch_size, 64);
/// // The defaults each setter names:
/// let c = Call::map("plain", |x: u32| x).config().clone();
/// assert_eq!((c.batch_size, c.replicas, c.concurrency, c.timeout), (32, 1, 1, None));
/// assert_eq!((c.reservation, c.recovery), (Reservation::NearestCompletion, Recovery::Isolate));
/// ```
// No `S: StageKind` bound here: the impls carry it, so a stage that misses
// its trait is one error at the constructor (its `on_unimplemented` note),
// not also one for the type `Call<S>` itself.
pub struct Call<S> {
    name: Arc<str>,
    config: CallConfig,
    factory: Factory<S>,
    param: Option<Arc<dyn Any + Send + Sync>>,
    shape: Option<ShapeFn>,
}

impl<S: StageKind> Clone for Call<S> {
    fn clone(&self) -> Self {
        Call {
            name: self.name.clone(),
            config: self.config.clone(),
            factory: self.factory.clone(),
            param: self.param.clone(),
            shape: self.shape.clone(),
        }
    }
}

impl<S: StageKind> fmt::Debug for Call<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Call")
            .field("name", &self.name)
            .field("stage", &std::any::type_name::<S>())
            .field("config", &self.config)
            .field("shaped", &self.shape.is_some())
            .finish()
    }
}

impl<S: StageKind> Call<S> {
    /// A Call whose replicas are made by `factory` (runs once per replica).
    pub fn new(
        name: impl Into<String>,
        factory: impl Fn() -> Result<S, BoxError> + Send + Sync + 'static,
    ) -> Self {
        Call {
            name: Arc::from(name.into()),
            config: CallConfig::default(),
            factory: Arc::new(factory),
            param: None,
            shape: None,
        }
    }

    /// The Call's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The Call's configuration.
    pub fn config(&self) -> &CallConfig {
        &self.config
    }

    /// Set the largest physical batch (at least 1; default 32).
    #[must_use = "a Call builder returns the configured Call; use the value it returns"]
    pub fn batch_size(mut self, b: usize) -> Self {
        self.config.batch_size = b.max(1);
        self
    }

    /// Set the number of replicas (at least 1; default 1).
    #[must_use = "a Call builder returns the configured Call; use the value it returns"]
    pub fn replicas(mut self, n: usize) -> Self {
        self.config.replicas = n.max(1);
        self
    }

    /// Set the reservation policy (default [`Reservation::NearestCompletion`]).
    #[must_use = "a Call builder returns the configured Call; use the value it returns"]
    pub fn reservation(mut self, r: Reservation) -> Self {
        self.config.reservation = r;
        self
    }

    /// Set the recovery policy (default [`Recovery::Isolate`]).
    #[must_use = "a Call builder returns the configured Call; use the value it returns"]
    pub fn recovery(mut self, r: Recovery) -> Self {
        self.config.recovery = r;
        self
    }

    /// Set the per-attempt time limit (default: none).
    #[must_use = "a Call builder returns the configured Call; use the value it returns"]
    pub fn timeout(mut self, t: Duration) -> Self {
        self.config.timeout = Some(t);
        self
    }

    /// Cap the threads of this Call's pool that may be stuck at once
    /// (default 8). A blocking stage's thread cannot be stopped from
    /// outside: when an attempt runs past [`Call::timeout`] its thread is
    /// abandoned, still running, and a fresh replica (a new thread and a new
    /// instance, its model loaded again) takes its place. Each abandoned
    /// thread is counted (`threads_abandoned` in
    /// [`CallMetrics`](crate::CallMetrics)) and released when it ends on its
    /// own. While `n` of them are still running, a slot whose attempt times
    /// out is not restarted; once no slot is left the Call runs nothing
    /// more in this run and fails its remaining work at once (kind `error`,
    /// a cause naming the Call and this cap) rather than leak a thread and a
    /// model per hanging input. Async stages are unaffected: their timed-out
    /// futures are dropped.
    #[must_use = "a Call builder returns the configured Call; use the value it returns"]
    pub fn max_abandoned_threads(mut self, n: usize) -> Self {
        self.config.max_abandoned_threads = n;
        self
    }

    /// Set how many batches one async replica runs at once (at least 1;
    /// default 1). For
    /// a per-record Call ([`Call::new_async_records`]) it is the number of
    /// requests one replica has in flight: at most `n` records' attempts run
    /// at once, over all its batches.
    #[must_use = "a Call builder returns the configured Call; use the value it returns"]
    pub fn concurrency(mut self, n: usize) -> Self {
        self.config.concurrency = n.max(1);
        self
    }

    /// Give each Grain a shape key read from its input (a width bucket, a
    /// token-length bucket): a batch then holds Grains of one key only, so a
    /// stage that pads to its batch's largest input pads within one bucket
    /// and makes one model call per batch. Batches still mix parents, and
    /// within a key the reservation policy still picks them (parents
    /// nearest completion first). A key with a full batch ready goes first;
    /// with [`Call::max_batch_delay`] a partial one waits at most that long
    /// for mates, without it a partial one goes out when nothing fuller is
    /// ready. Keep the keys few (buckets, not raw sizes): each key present
    /// is a lane the reservation looks at.
    ///
    /// The key reads the Call's single input, as the stage receives it; a
    /// Call with several inputs, or an optional one, is a plan error. The
    /// function runs on the engine thread when a Grain becomes ready: keep
    /// it cheap. A panic in it puts that Grain under key `u64::MAX` (it is
    /// counted in [`CallMetrics::shape_key_panics`](crate::CallMetrics::shape_key_panics),
    /// with one warning line per Call, the panics themselves not printed).
    #[must_use = "a Call builder returns the configured Call; use the value it returns"]
    pub fn shape(mut self, key: impl Fn(&S::In) -> u64 + Send + Sync + 'static) -> Self {
        self.shape = Some(Arc::new(move |v: &(dyn Any + Send + Sync)| {
            v.downcast_ref::<S::In>().map(&key)
        }));
        self
    }

    /// Let a ready Grain wait up to `d` for mates when no full (or
    /// preferred-size) batch is ready: a fuller batch is cheaper per item on
    /// a model that pays per call (Triton's maximum queue delay). It never
    /// waits past `d`, and never when nothing more can arrive at this Call
    /// (nothing upstream queued or running and no root left to admit), so
    /// a parent whose last Grains are the only work left is not delayed.
    #[must_use = "a Call builder returns the configured Call; use the value it returns"]
    pub fn max_batch_delay(mut self, d: Duration) -> Self {
        self.config.max_batch_delay = Some(d);
        self
    }

    /// Batch sizes worth dispatching without waiting for a full batch (with
    /// [`Call::max_batch_delay`]): when at least one of these many Grains of
    /// a key are ready, the largest such size goes out at once. A size below
    /// the batch size therefore means "dispatch now": it cuts the wait the
    /// delay would spend filling the batch, and lowers the fill. Set the
    /// delay alone first; add a size only where the model runs it as cheaply
    /// per item as a full batch.
    #[must_use = "a Call builder returns the configured Call; use the value it returns"]
    pub fn preferred_batch_sizes(mut self, sizes: &[usize]) -> Self {
        let mut v: Vec<usize> = sizes.iter().copied().filter(|&n| n > 0).collect();
        v.sort_unstable_by(|a, b| b.cmp(a));
        v.dedup();
        self.config.preferred_batch_sizes = v;
        self
    }

    /// Attach a static parameter that every `run` of this Call sees through
    /// [`crate::StageContext::param`]. Calls cloned from one `Call` share a
    /// replica pool but may carry different parameters.
    #[must_use = "a Call builder returns the configured Call; use the value it returns"]
    pub fn param<P: Any + Send + Sync>(mut self, p: P) -> Self {
        self.param = Some(Arc::new(p));
        self
    }

    /// Apply the Call to its input Port(s): one Grain per Entity of their Domain.
    #[track_caller]
    pub fn apply<D, I>(&self, inputs: I) -> Port<D, S::Out>
    where
        D: Domain,
        I: Inputs<D>,
        S::In: StageInput<I::Value>,
        S::Out: Data,
    {
        self.apply_assembled(inputs, assemble_as::<D, I, S::In>)
    }

    /// [`Call::apply`] with the function that reads the inputs as the
    /// stage's input (`#[pipeline]` checks the types before).
    #[track_caller]
    pub(crate) fn apply_assembled<D, I>(&self, inputs: I, assemble: Assemble<S::In>) -> Port<D, S::Out>
    where
        D: Domain,
        I: Inputs<D>,
        S::Out: Data,
    {
        let ports = self.node::<D, I, (S::Out,)>(
            inputs,
            |o| smallvec::smallvec![Arc::new(o) as crate::value::Value],
            assemble,
        );
        Port::from_id(ports[0])
    }

    /// Apply a Call whose stage returns a tuple: one Port per tuple field.
    #[track_caller]
    pub fn apply_split<D, I>(&self, inputs: I) -> <S::Out as OutputSet>::Ports<D>
    where
        D: Domain,
        I: Inputs<D>,
        S::In: StageInput<I::Value>,
        S::Out: OutputSet,
    {
        self.apply_split_assembled(inputs, assemble_as::<D, I, S::In>)
    }

    /// [`Call::apply_split`] with the function that reads the inputs.
    #[track_caller]
    pub(crate) fn apply_split_assembled<D, I>(
        &self,
        inputs: I,
        assemble: Assemble<S::In>,
    ) -> <S::Out as OutputSet>::Ports<D>
    where
        D: Domain,
        I: Inputs<D>,
        S::Out: OutputSet,
    {
        let ids = self.node::<D, I, S::Out>(inputs, <S::Out as OutputSet>::split, assemble);
        <S::Out as OutputSet>::ports::<D>(&ids)
    }

    #[track_caller]
    fn node<D: Domain, I: Inputs<D>, O: OutputSet>(
        &self,
        inputs: I,
        split: fn(S::Out) -> crate::value::Values,
        assemble: Assemble<S::In>,
    ) -> Vec<u32> {
        let Some(edges) = crate::plan::port::edges_to(inputs.edges(), &format!("Call `{}`", self.name))
        else {
            return vec![u32::MAX; O::arity()];
        };
        if self.shape.is_some() && (edges.len() != 1 || edges[0].optional) {
            build::with_draft(|d| {
                d.errors.push(crate::error::PlanError::ShapeInputs {
                    call: self.name.to_string(),
                    inputs: edges.len(),
                })
            });
            return vec![u32::MAX; O::arity()];
        }
        let runtime = S::erase(Glue {
            name: self.name.clone(),
            factory: self.factory.clone(),
            assemble,
            split,
            param: self.param.clone(),
            records: self.config.records,
            concurrency: self.config.concurrency,
            record_counts: Default::default(),
        });
        build::add_node::<D>(
            NodeKind::Call {
                name: self.name.clone(),
                config: self.config.clone(),
                runtime,
                pool: Arc::as_ptr(&self.factory) as *const () as usize,
                inputs: edges,
                shape: self.shape.clone(),
            },
            O::arity(),
        )
    }
}

/// A stage input type (`Self`) that takes what a Call's inputs carry (`V`):
/// the same type. A bound of its own rather than `Inputs<D, Value = S::In>`,
/// so that inputs in two Domains are one error (the `Inputs` one) and a value
/// mismatch is one error with this message.
#[diagnostic::on_unimplemented(
    message = "this Call's stage takes `{Self}`, but its inputs carry `{V}`",
    label = "takes `{Self}`",
    note = "give the Call Ports whose values form `{Self}`: one Port per tuple field, in order (an `.optional()` input arrives as `Option<T>`), or change the stage's input type"
)]
pub trait StageInput<V>: Sized {
    /// Identity.
    fn from_inputs(v: V) -> Self;
}

#[diagnostic::do_not_recommend]
impl<T> StageInput<T> for T {
    fn from_inputs(v: T) -> T {
        v
    }
}

/// `I::assemble`, typed as the stage's input (the identity of [`StageInput`]).
fn assemble_as<D, I: Inputs<D>, In: StageInput<I::Value>>(
    g: &mut std::vec::IntoIter<Option<crate::value::Value>>,
) -> Option<In> {
    I::assemble(g).map(In::from_inputs)
}

impl<S: AsyncStage> Call<Async<S>> {
    /// A Call over an async stage; `factory` runs once per replica.
    pub fn new_async(
        name: impl Into<String>,
        factory: impl Fn() -> Result<S, BoxError> + Send + Sync + 'static,
    ) -> Self {
        Call::new(name, move || factory().map(Async))
    }
}

/// The type of a per-record async Call ([`Call::new_async_records`]), for
/// struct fields: `fetch: RecordCall<Fetch>`.
pub type RecordCall<S> = Call<Async<Records<S>>>;

impl<S: AsyncRecordStage> RecordCall<S> {
    /// A Call over a per-record async stage: one future per record, at most
    /// [`concurrency`](Call::concurrency) of them in flight per replica, each
    /// with its own deadline and retry budget ([`RecordPolicy`]; by default
    /// 30 s, 2 retries, 100 ms backoff doubling per retry). An `Err`, a panic
    /// or a missed deadline costs only that record: the batch reports one
    /// outcome per record, so the Call's recovery never re-sends a record's
    /// healthy mates (leave the Call's [`timeout`](Call::timeout) unset, or
    /// above the longest a batch can take: when it fires, the whole batch is
    /// retried). `factory` runs once per replica. See [`AsyncRecordStage`]
    /// for an example.
    pub fn new_async_records(
        name: impl Into<String>,
        factory: impl Fn() -> Result<S, BoxError> + Send + Sync + 'static,
    ) -> Self {
        Call::new_async(name, move || factory().map(Records::new))
    }

    /// Set each record attempt's deadline (default 30 s; `Duration::MAX` for
    /// none): an attempt still running after it is dropped and counts as a
    /// failed attempt of that record.
    #[must_use = "a Call builder returns the configured Call; use the value it returns"]
    pub fn record_timeout(mut self, t: Duration) -> Self {
        self.config.records.timeout = t;
        self
    }

    /// Set how many times a record is retried after an `Err`, a panic or a
    /// missed deadline (default 2: at most three attempts); then it ends
    /// `RecordFailure`, its cause listing each attempt.
    #[must_use = "a Call builder returns the configured Call; use the value it returns"]
    pub fn record_retries(mut self, n: u32) -> Self {
        self.config.records.retries = n;
        self
    }

    /// Set the wait before a record's first retry (default 100 ms); it
    /// doubles for each further retry, up to 10 s (or to `d`, if longer).
    #[must_use = "a Call builder returns the configured Call; use the value it returns"]
    pub fn record_backoff(mut self, d: Duration) -> Self {
        self.config.records.backoff = d;
        self
    }
}

/// The type of a Call made from a closure ([`Call::map`], [`Call::per_record`],
/// [`Call::batch`]), for struct fields: `ocr: FnCall<Page, Text>`.
pub type FnCall<I, O> = Call<BatchFn<Box<dyn FnMut(Vec<I>) -> StageResult<O> + Send>, I, O>>;

impl<I, O> FnCall<I, O>
where
    I: Send + 'static,
    O: Send + 'static,
{
    /// A Call from a per-record function returning an [`Outcome`].
    pub fn per_record<F>(name: impl Into<String>, f: F) -> Self
    where
        F: Fn(I) -> Outcome<O> + Clone + Send + Sync + 'static,
    {
        Self::batch(name, move |batch: Vec<I>| {
            Ok(batch.into_iter().map(f.clone()).collect())
        })
    }

    /// A Call from an infallible per-record function.
    pub fn map<F>(name: impl Into<String>, f: F) -> Self
    where
        F: Fn(I) -> O + Clone + Send + Sync + 'static,
    {
        Self::batch(name, move |batch: Vec<I>| {
            Ok(batch.into_iter().map(|x| Outcome::Ok(f(x))).collect())
        })
    }

    /// A Call from a function over a whole batch.
    pub fn batch<F>(name: impl Into<String>, f: F) -> Self
    where
        F: FnMut(Vec<I>) -> StageResult<O> + Clone + Send + Sync + 'static,
    {
        Call::new(name, move || {
            let boxed: Box<dyn FnMut(Vec<I>) -> StageResult<O> + Send> = Box::new(f.clone());
            Ok(BatchFn::new(boxed))
        })
    }
}
