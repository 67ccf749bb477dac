//! Run control: a cancellation handle and an observer, both outside the stages.
//!
//! Invariants:
//! - A [`CancelHandle`] only sets flags and wakes the driver; the driver alone
//!   acts on them, between two events, so the engine is never touched from
//!   another thread.
//! - Cancellation is sticky: a cancelled [`Runner`](crate::Runner) stays
//!   cancelled; a run started afterwards admits nothing.
//! - After [`CancelHandle::cancel`], every root the run admitted still reaches
//!   the sink exactly once: finished ones as they were, live ones failed with a
//!   cause saying the run was cancelled. `run` then returns `Ok` with
//!   [`RunSummary::cancelled`](crate::RunSummary::cancelled) set, because every
//!   outcome the sink got is valid and the caller asked for the stop.
//! - [`Observer`] methods run on the driver, in event order; they must return
//!   quickly (a slow observer slows dispatch, like a slow sink).

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::Duration;

use tokio::sync::Notify;

use crate::exec::metrics::DomainCounts;

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
        // `notify_one` keeps a permit when the driver is not waiting yet, so
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
/// use rayorch_runtime::{domain, Call, Plan, Runner, sink::Callback};
/// domain!(Doc);
/// let id = Call::map("id", |x: u32| x);
/// let (plan, _) = Plan::build(|b| {
///     let xs = b.source::<Doc, u32>();
///     b.output(id.apply(xs))
/// }).unwrap();
/// let runner = Runner::new(&plan);
/// runner.cancel_handle().cancel(); // before the run: nothing is admitted
/// let summary = runner.run((0..10).map(|k| (k, k as u32)), Callback(|_: &rayorch_runtime::RootOutcome| {})).unwrap();
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

/// Watches a run without wrapping its stages: pass one to
/// [`Runner::observe`](crate::Runner::observe). Every method has a no-op
/// default; all run on the driver, in event order.
pub trait Observer: Send {
    /// A batch went to a replica.
    fn batch_dispatched(&mut self, _batch: &BatchDispatched<'_>) {}
    /// A batch ended.
    fn batch_finished(&mut self, _batch: &BatchFinished<'_>) {}
    /// Per-Domain counts changed (parents before children; see
    /// [`DomainCounts`] for what each count means).
    fn domains(&mut self, _counts: &[DomainCounts]) {}
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
}

/// Holds the run's observer, if any, and skips work when there is none.
pub(crate) struct Watch {
    pub(crate) observer: Option<Box<dyn Observer>>,
    last: Vec<DomainCounts>,
}

impl Watch {
    pub(crate) fn new(observer: Option<Box<dyn Observer>>) -> Watch {
        Watch {
            observer,
            last: Vec::new(),
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
