//! What a backend is (the [`Backend`] trait), what it reports
//! ([`Report`], [`Finished`]) and what it may use while it dispatches
//! ([`Dispatch`]: the engine's queues, with backpressure and the dispatch
//! recorded for the summary and the observer).

use std::time::Duration;

use tokio::time::Instant;

use super::Spans;
use crate::engine::{Batch, BatchId, Engine};
use crate::error::RunError;
use crate::exec::backpressure::Backpressure;
use crate::exec::control::{BackendGauge, BatchDispatched, Watch};
use crate::plan::Plan;
use crate::stage::AttemptResult;

/// Where and when batches run: the one thing that differs between
/// executors (see the module note for what a backend may and may not do).
pub trait Backend {
    /// What can go wrong in this backend (the loop's own failures convert
    /// into it).
    type Error: From<RunError>;

    /// Prepare before the first root is admitted (start replicas, connect).
    fn start(&mut self, plan: &Plan) -> impl Future<Output = Result<(), Self::Error>>;

    /// Start what can run now: for each Call with room, take batches with
    /// [`Dispatch::reserve`] and send them where they run.
    fn dispatch(&mut self, cx: &mut Dispatch<'_>) -> impl Future<Output = Result<(), Self::Error>>;

    /// Attempts started and not yet reported: the run does not end while
    /// there are any.
    fn in_flight(&self) -> bool;

    /// Is Call `c` at work (an attempt out, or replicas starting), so that a
    /// report of it is still to come? Backpressure holds producers only
    /// behind a consumer that is.
    fn working(&self, c: usize) -> bool;

    /// With nothing in flight: can an event still come (replicas starting,
    /// workers still to join, a late report queued)? If not and nothing
    /// could be dispatched, the run is stalled.
    fn pending(&self, engine: &Engine) -> bool;

    /// Wait for the next event and put what it finished into `out` (it may
    /// return with nothing: capacity changed, a worker joined). Must be
    /// cancel-safe: the loop drops it when another wake-up comes first.
    fn next(&mut self, out: &mut Vec<Report>) -> impl Future<Output = Result<(), Self::Error>>;

    /// The run is over (`ok`: it ended normally; else it failed or was
    /// cancelled and attempts still out are given up).
    fn finish(&mut self, ok: bool) -> impl Future<Output = ()>;

    /// Replicas (or worker slots) that can run Call `c` now, for live
    /// views and the scale signal. Default: the Call's configured pool.
    fn live_replicas(&self, plan: &Plan, c: usize) -> usize {
        plan.calls()[c].config.replicas
    }

    /// Figures of its own the backend adds to each [`Progress`](crate::Progress) snapshot
    /// (default: none).
    fn gauges(&self, _out: &mut Vec<BackendGauge>) {}

    /// Threads Call `c`'s timed-out attempts left running here (blocking
    /// replicas abandoned past their timeout; default: none).
    fn threads_abandoned(&self, _c: usize) -> u64 {
        0
    }

    /// Reports (and claims) the backend refused before the engine saw
    /// them because they did not come from the holder of the attempt's
    /// lease (a distributed owner's forged reports; default: none).
    fn forged_reports(&self) -> u64 {
        0
    }
}

/// What a backend hands the loop for one attempt.
pub enum Report {
    /// An attempt ended: its result goes to the engine, its time and
    /// counts to the summary and the observer.
    Done(Finished),
    /// A report the engine must see but that is no attempt's end (a copy of
    /// one already reported, the late report of an attempt given up): the
    /// commit gate refuses it unless it is still current.
    Echo(BatchId, AttemptResult),
}

/// One ended attempt.
pub struct Finished {
    /// The batch.
    pub batch: BatchId,
    /// Its Call.
    pub call: usize,
    /// Grains in it.
    pub size: usize,
    /// The replica (slot) that ran it.
    pub replica: usize,
    /// When it was dispatched.
    pub dispatched: Instant,
    /// Its result.
    pub result: AttemptResult,
    /// The replica was torn down (a panic, a timeout).
    pub replaced: bool,
    /// The process that ran it (distributed runs: the worker's name).
    pub worker: Option<String>,
}

/// Per-Call timing: busy time, first dispatch, last report.
#[derive(Clone, Copy, Default)]
pub(super) struct Timing {
    pub(super) busy: Duration,
    pub(super) from: Option<Duration>,
    pub(super) to: Option<Duration>,
}

/// What a backend may use while it dispatches: the engine's queues through
/// [`Dispatch::reserve`], which applies backpressure and records the
/// dispatch for the summary and the observer.
pub struct Dispatch<'a> {
    pub(super) plan: &'a Plan,
    pub(super) engine: &'a mut Engine,
    pub(super) backpressure: Option<&'a Backpressure>,
    pub(super) watch: &'a mut Watch,
    pub(super) timing: &'a mut [Timing],
    pub(super) reached: &'a mut [u64],
    pub(super) since: Duration,
    pub(super) held: &'a mut u64,
    pub(super) sent: usize,
    pub(super) spans: &'a mut Spans,
}

impl Dispatch<'_> {
    /// The plan being run.
    pub fn plan(&self) -> &Plan {
        self.plan
    }

    /// The engine (read only: queues, counters).
    pub fn engine(&self) -> &Engine {
        self.engine
    }

    /// May Call `c` have ready Grains? (cheap; `reserve` says for sure)
    pub fn may_have_ready(&self, c: usize) -> bool {
        self.engine.may_have_ready(c)
    }

    /// Reserve a batch of at most `max` Grains of Call `c`, unless
    /// backpressure holds `c` (`working(d)`: is Call `d` at work, see
    /// [`Backend::working`]). Returns the batch and whether it mixes parents.
    pub fn reserve(
        &mut self,
        c: usize,
        max: usize,
        working: impl Fn(usize) -> bool,
    ) -> Option<(Batch, bool)> {
        if !self.engine.may_have_ready(c) {
            return None;
        }
        if self
            .backpressure
            .is_some_and(|bp| bp.held(self.plan, self.engine, c, working))
        {
            *self.held += 1;
            return None;
        }
        let mixed_before = self.engine.call_stats(c).mixed_parent_batches;
        let batch = self.engine.reserve(c, max.max(1))?;
        let mixed = self.engine.call_stats(c).mixed_parent_batches > mixed_before;
        let first = batch.grains.iter().filter(|g| g.generation == 1).count();
        self.reached[c] += first as u64;
        self.timing[c].from.get_or_insert(self.since);
        self.sent += 1;
        let span = tracing::info_span!(
            target: "rayorch::batch",
            "batch",
            call = &*self.plan.calls()[c].name,
            size = batch.grains.len(),
            parents_mixed = mixed,
            retries = batch.grains.len() - first,
            replica = tracing::field::Empty,
            outcome = tracing::field::Empty,
            // An OpenTelemetry bridge marks failed attempts as errors.
            otel.status_code = tracing::field::Empty,
        );
        if !span.is_disabled() {
            // The batch serves these roots: link its span to theirs.
            let mut roots: Vec<u64> = batch
                .grains
                .iter()
                .filter_map(|g| self.engine.root_of(g))
                .collect();
            roots.sort_unstable();
            roots.dedup();
            for r in roots.iter().filter_map(|k| self.spans.roots.get(k)) {
                span.follows_from(r);
            }
            self.spans.batches.insert(batch.id, span);
        }
        self.watch.dispatched(&BatchDispatched {
            call: &self.plan.calls()[c].name,
            call_index: c,
            size: batch.grains.len(),
            parents_mixed: mixed,
            retries: batch.grains.len() - first,
        });
        Some((batch, mixed))
    }
}
