//! Run control: a cancellation handle and an observer, both outside the stages.
//!
//! Invariants:
//! - A [`CancelHandle`] only sets flags and wakes the run loop; the run loop alone
//!   acts on them, between two events, so the engine is never touched from
//!   another thread.
//! - Cancellation is sticky: a cancelled [`Runner`](crate::Runner) stays
//!   cancelled; a run started afterwards admits nothing.
//! - After [`CancelHandle::cancel`], every root the run admitted still reaches
//!   the sink exactly once: finished ones as they were, live ones failed with a
//!   cause saying the run was cancelled. `run` then returns `Ok` with
//!   [`RunSummary::cancelled`](crate::RunSummary::cancelled) set, because every
//!   outcome the sink got is valid and the caller asked for the stop.
//! - [`Observer`] methods run on the run loop, in event order; they must return
//!   quickly (a slow observer slows dispatch, like a slow sink).

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

use serde::Serialize;

use crate::engine::RootOutcome;
use crate::exec::metrics::{DomainCounts, RunSummary};

const RUNNING: u8 = 0;
const DRAINING: u8 = 1;
const CANCELLED: u8 = 2;

#[derive(Default)]
pub(crate) struct ControlState {
    level: AtomicU8,
    wake: Notify,
}

impl ControlState {
    fn raise(&self, to: u8) {
        self.level.fetch_max(to, Ordering::SeqCst);
        // `notify_one` keeps a permit when the run loop is not waiting yet, so
        // a request between two waits is never lost.
        self.wake.notify_one();
    }

    pub(crate) fn admitting(&self) -> bool {
        self.level.load(Ordering::SeqCst) == RUNNING
    }

    pub(crate) fn cancelled(&self) -> bool {
        self.level.load(Ordering::SeqCst) == CANCELLED
    }

    pub(crate) async fn changed(&self) {
        self.wake.notified().await;
    }
}

/// Stops a run from another thread (a Ctrl-C handler, a UI, a test).
///
/// ```
/// use rayorch::prelude::*;
///
/// #[derive(Domain)]
/// struct Doc;
///
/// struct Ids {
///     id: FnCall<u32, u32>,
/// }
///
/// #[pipeline]
/// impl Ids {
///     fn forward(&self, xs: Port<Doc, u32>) -> Port<Doc, u32> {
///         self.id(xs)
///     }
/// }
///
/// let (plan, _) = Ids { id: Call::map("id", |x: u32| x) }.build_plan().unwrap();
/// let runner = Runner::new(&plan);
/// runner.cancel_handle().cancel(); // before the run: nothing is admitted
/// let summary = runner.run((0..10).map(|k| (k, k as u32)), Callback(|_: &RootOutcome| {})).unwrap();
/// assert!(summary.cancelled);
/// assert_eq!(summary.roots, 0);
/// ```
#[derive(Clone)]
pub struct CancelHandle(pub(crate) Arc<ControlState>);

impl Default for CancelHandle {
    /// A handle of its own, for an executor that is not a `Runner` (pass it
    /// to the run loop).
    fn default() -> CancelHandle {
        CancelHandle(Arc::default())
    }
}

impl CancelHandle {
    /// Admit no new roots; those in flight finish normally, then `run`
    /// returns (the source is not polled again).
    pub fn stop_admitting(&self) {
        self.0.raise(DRAINING);
    }

    /// Stop now: admit nothing more, abandon in-flight work, hand every live
    /// root to the sink as failed (cause: the run was cancelled), and return.
    /// Blocking stages mid-batch are left to finish on their own threads;
    /// async attempts are dropped.
    pub fn cancel(&self) {
        self.0.raise(CANCELLED);
    }

    /// Has [`CancelHandle::cancel`] been called?
    pub fn is_cancelled(&self) -> bool {
        self.0.cancelled()
    }
}

/// A physical batch handed to a replica.
#[derive(Clone, Debug)]
pub struct BatchDispatched<'a> {
    /// The Call's name.
    pub call: &'a str,
    /// The Call's index in [`Plan::calls`](crate::Plan::calls).
    pub call_index: usize,
    /// Grains in the batch.
    pub size: usize,
    /// The batch holds Grains of more than one parent Entity.
    pub parents_mixed: bool,
    /// Grains in the batch that are retries (dispatched before).
    pub retries: usize,
}

/// A physical batch that ended: reported, failed, timed out or panicked.
#[derive(Clone, Debug)]
pub struct BatchFinished<'a> {
    /// The Call's name.
    pub call: &'a str,
    /// The Call's index in [`Plan::calls`](crate::Plan::calls).
    pub call_index: usize,
    /// Grains in the batch.
    pub size: usize,
    /// The replica that ran it: its slot in the Call's pool, `0..replicas`
    /// (a replaced replica keeps its slot).
    pub replica: usize,
    /// When it was dispatched, from the run's start (the clock of
    /// [`RunSummary::wall_s`](crate::RunSummary::wall_s)).
    pub started: Duration,
    /// Time from dispatch to report.
    pub duration: Duration,
    /// Records the stage returned as `Outcome::Ok`.
    pub ok: usize,
    /// Records the stage returned as `Outcome::RecordFailure`.
    pub record_failures: usize,
    /// Records the stage returned as `Outcome::GroupFailure`.
    pub group_failures: usize,
    /// The whole attempt failed (an `Err`, a panic, a timeout): its text.
    /// The Call's recovery policy decides what happens to the Grains.
    pub attempt_error: Option<&'a str>,
    /// The replica was torn down and is being replaced (panic, timeout).
    pub replica_replaced: bool,
}

/// A live look at a run, every [`Observer::progress_every`] and once at the
/// end: what a metrics exporter or a live page shows.
#[derive(Clone, Debug)]
pub struct Progress<'a> {
    /// Everything counted so far, in the form of the final summary: at the
    /// last snapshot (`finished`) every count equals the [`RunSummary`] the
    /// run returns (only `wall_s` moves on, to the run's very end).
    pub summary: &'a RunSummary,
    /// Per Call, in plan order: what is queued and in flight now.
    pub calls: &'a [CallLive],
    /// The admission windows now.
    pub admission: AdmissionLive,
    /// What the backend adds (distributed runs: workers, leases,
    /// redeliveries, payload bytes); empty for a run in one process.
    pub backend: &'a [BackendGauge],
    /// The run has ended: this is the last snapshot.
    pub finished: bool,
}

/// One Call's work now.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct CallLive {
    /// Grains queued for a first attempt (an upper bound: a Grain sealed in
    /// place counts until the queue skips it; 0 once no root is live).
    pub ready: usize,
    /// Grains queued for a retry (recovery groups), the same way.
    pub recovery: usize,
    /// Batches reserved and not yet reported: the replicas (or worker
    /// slots) busy with this Call.
    pub in_flight_batches: usize,
    /// Grains in those batches.
    pub in_flight_grains: usize,
    /// Replicas that can run it now: the configured pool in one process,
    /// the live worker slots of a distributed run.
    pub replicas: usize,
}

/// The admission windows now.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct AdmissionLive {
    /// Roots admitted and not yet handed out.
    pub roots: usize,
    /// The root window.
    pub window: usize,
    /// Child Entities live (what the children window bounds).
    pub children: usize,
    /// The children window (`usize::MAX`: off).
    pub window_children: usize,
    /// Roots handed out and not yet committed to the journal (0 without one).
    pub journal_lag: usize,
    /// Root keys the loop holds to refuse a repeated one: the live roots',
    /// plus every key given with [`Runner::unique_keys`](crate::Runner::unique_keys)
    /// (the only one of these figures that can grow with the run's length).
    pub keys_held: usize,
}

/// A figure a backend adds to [`Progress`] (a counter only grows; a gauge
/// is a level now). Names are Prometheus-style, without the `rayorch_`
/// prefix (`dist_leases_expired_total`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BackendGauge {
    /// The figure's name.
    pub name: &'static str,
    /// One line of help.
    pub help: &'static str,
    /// Its labels (`worker="w1"`).
    pub labels: Vec<(&'static str, String)>,
    /// Its value.
    pub value: f64,
    /// A counter (only grows) rather than a gauge.
    pub counter: bool,
}

/// Watches a run without wrapping its stages: pass one to
/// [`Runner::observe`](crate::Runner::observe). Every method has a no-op
/// default; all run on the run loop, in event order.
pub trait Observer: Send {
    /// A batch went to a replica.
    fn batch_dispatched(&mut self, _batch: &BatchDispatched<'_>) {}
    /// A batch ended.
    fn batch_finished(&mut self, _batch: &BatchFinished<'_>) {}
    /// Per-Domain counts changed (parents before children; see
    /// [`DomainCounts`] for what each count means).
    fn domains(&mut self, _counts: &[DomainCounts]) {}
    /// A root entered the run (`at`: from the run's start).
    fn root_admitted(&mut self, _key: u64, _at: Duration) {}
    /// A root went to the sink: finished, failed, a duplicate key or
    /// abandoned by a cancellation (`at`: from the run's start).
    fn root_finished(&mut self, _outcome: &RootOutcome, _at: Duration) {}
    /// How often this observer wants a [`Progress`] snapshot (`None`, the
    /// default: never, and the run builds none). Snapshots come at the
    /// first run-loop turn after each interval, and once at the end.
    fn progress_every(&self) -> Option<Duration> {
        None
    }
    /// A live snapshot (see [`Observer::progress_every`]).
    fn progress(&mut self, _progress: &Progress<'_>) {}
}

/// Two observers: each event goes to the first, then to the second.
impl<A: Observer, B: Observer> Observer for (A, B) {
    fn batch_dispatched(&mut self, batch: &BatchDispatched<'_>) {
        self.0.batch_dispatched(batch);
        self.1.batch_dispatched(batch);
    }
    fn batch_finished(&mut self, batch: &BatchFinished<'_>) {
        self.0.batch_finished(batch);
        self.1.batch_finished(batch);
    }
    fn domains(&mut self, counts: &[DomainCounts]) {
        self.0.domains(counts);
        self.1.domains(counts);
    }
    fn root_admitted(&mut self, key: u64, at: Duration) {
        self.0.root_admitted(key, at);
        self.1.root_admitted(key, at);
    }
    fn root_finished(&mut self, outcome: &RootOutcome, at: Duration) {
        self.0.root_finished(outcome, at);
        self.1.root_finished(outcome, at);
    }
    fn progress_every(&self) -> Option<Duration> {
        match (self.0.progress_every(), self.1.progress_every()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
    fn progress(&mut self, progress: &Progress<'_>) {
        self.0.progress(progress);
        self.1.progress(progress);
    }
}

/// An observer that may be absent (a `--metrics` flag not given): events go
/// to it when it is there.
impl<O: Observer> Observer for Option<O> {
    fn batch_dispatched(&mut self, batch: &BatchDispatched<'_>) {
        if let Some(o) = self {
            o.batch_dispatched(batch);
        }
    }
    fn batch_finished(&mut self, batch: &BatchFinished<'_>) {
        if let Some(o) = self {
            o.batch_finished(batch);
        }
    }
    fn domains(&mut self, counts: &[DomainCounts]) {
        if let Some(o) = self {
            o.domains(counts);
        }
    }
    fn root_admitted(&mut self, key: u64, at: Duration) {
        if let Some(o) = self {
            o.root_admitted(key, at);
        }
    }
    fn root_finished(&mut self, outcome: &RootOutcome, at: Duration) {
        if let Some(o) = self {
            o.root_finished(outcome, at);
        }
    }
    fn progress_every(&self) -> Option<Duration> {
        self.as_ref().and_then(Observer::progress_every)
    }
    fn progress(&mut self, progress: &Progress<'_>) {
        if let Some(o) = self {
            o.progress(progress);
        }
    }
}

/// Holds the run's observer, if any, and skips work when there is none.
pub(crate) struct Watch {
    pub(crate) observer: Option<Box<dyn Observer>>,
    last: Vec<DomainCounts>,
    /// The observer's snapshot interval and when the next one is due.
    every: Option<Duration>,
    next: Option<Instant>,
}

impl Watch {
    pub(crate) fn new(observer: Option<Box<dyn Observer>>) -> Watch {
        let every = observer.as_ref().and_then(|o| o.progress_every());
        Watch {
            observer,
            last: Vec::new(),
            every,
            next: None,
        }
    }

    pub(crate) fn active(&self) -> bool {
        self.observer.is_some()
    }

    pub(crate) fn dispatched(&mut self, b: &BatchDispatched<'_>) {
        if let Some(o) = &mut self.observer {
            o.batch_dispatched(b);
        }
    }

    pub(crate) fn finished(&mut self, b: &BatchFinished<'_>) {
        if let Some(o) = &mut self.observer {
            o.batch_finished(b);
        }
    }

    pub(crate) fn root_admitted(&mut self, key: u64, at: Duration) {
        if let Some(o) = &mut self.observer {
            o.root_admitted(key, at);
        }
    }

    pub(crate) fn root_finished(&mut self, outcome: &RootOutcome, at: Duration) {
        if let Some(o) = &mut self.observer {
            o.root_finished(outcome, at);
        }
    }

    /// Is a snapshot due at `now` (`last`: the run's final one, always due
    /// when the observer takes snapshots at all)? Moves the next due time.
    pub(crate) fn progress_due(&mut self, now: Instant, last: bool) -> bool {
        let Some(every) = self.every else {
            return false;
        };
        if last || self.next.is_none_or(|t| now >= t) {
            self.next = Some(now + every);
            return true;
        }
        false
    }

    pub(crate) fn progress(&mut self, p: &Progress<'_>) {
        if let Some(o) = &mut self.observer {
            o.progress(p);
        }
    }

    /// Tell the observer when the counts differ from the last ones it saw.
    pub(crate) fn domains(&mut self, counts: Vec<DomainCounts>) {
        if let Some(o) = &mut self.observer
            && counts != self.last
        {
            o.domains(&counts);
            self.last = counts;
        }
    }
}
