//! The run loop: one loop drives the [`Engine`] for every executor.
//!
//! A run is this loop plus a [`Backend`], which decides where and when
//! batches run: the replica pools of [`Runner`](crate::Runner) (OS threads
//! for blocking stages, tokio tasks for async ones), the seeded simulator
//! (`rayorch::sim`), or JetStream workers (`rayorch::dist`). Everything a
//! user can observe besides timing is written here, once:
//! admission (the root window, the children window, the journal's skip of
//! finished roots), delivery to the sink (each finished root at once, a
//! panicking sink a typed error), journal commits, duplicate keys (one
//! root's failure, never the run's), backpressure between Calls, stall
//! detection, cancellation (drain or abandon), the observer's events and
//! the [`RunSummary`].
//!
//! What a backend may do differently, and only this: where an attempt runs,
//! when its report arrives (in any order, late, twice: the engine's commit
//! gate decides), and which failure it reports for an attempt it lost (a
//! timeout, a dead replica, an expired lease). It may refuse a report
//! before the engine sees it (the distributed fence), and it may start
//! nothing while it waits for capacity that can still come (workers that
//! have not joined yet) — then it says so with [`Backend::pending`], and the
//! loop does not call that a stall.
//!
//! Invariants:
//! - Only the loop touches the engine, the sink and the observer; a backend
//!   reserves batches through the [`Dispatch`] it is lent.
//! - The loop never spins: each turn ends waiting on the backend's next
//!   event, the source (only while the window has room: that is the
//!   admission backpressure), a journal commit, or a control request.
//! - Finished roots are delivered before any new root is admitted: roots
//!   pulled from the source never exceed roots delivered plus the window
//!   (a slow sink holds the source back instead of letting outcomes queue).
//! - Every root the source yields reaches the sink exactly once: its
//!   outcome, a failure naming its key when the key was given before, or a
//!   cancellation failure when the run is cancelled while it is live.
//! - The run ends once the source is exhausted, no root is live and the
//!   backend has nothing in flight; or at once on an error or a
//!   cancellation (the backend gives its attempts up).
//! - With a journal, every root handed out (except duplicates and cancelled
//!   ones) is recorded and committed, grouped, before the loop waits again
//!   (or by its interval), at the end of the run, and before a cancellation
//!   hands out its abandoned roots.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Duration;

use futures::{FutureExt, Stream, StreamExt};
use tokio::time::Instant;

use crate::engine::{
    Batch, BatchId, CallStats, Engine, EngineConfig, EngineStats, ReportOutcome, RootOutcome,
};
use crate::error::RunError;
use crate::exec::backpressure::Backpressure;
use crate::exec::control::{
    AdmissionLive, BackendGauge, BatchDispatched, BatchFinished, CallLive, CancelHandle, ControlState,
    Observer, Progress, Watch,
};
use crate::exec::journal::{Journal, Seen};
use crate::exec::metrics::{CallMetrics, DomainCounts, FailureCount, RunSummary, WorkerGrains, secs};
use crate::exec::sink::Sink;
use crate::exec::stage::{AttemptError, AttemptResult, panic_text};
use crate::plan::Plan;
use crate::value::{Cause, FailureKind, Item, ItemKind, Outcome, Value};

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

    /// Figures of its own the backend adds to each [`Progress`] snapshot
    /// (default: none).
    fn gauges(&self, _out: &mut Vec<BackendGauge>) {}

    /// Threads Call `c`'s timed-out attempts left running here (blocking
    /// replicas abandoned past their timeout; default: none).
    fn threads_abandoned(&self, _c: usize) -> u64 {
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
struct Timing {
    busy: Duration,
    from: Option<Duration>,
    to: Option<Duration>,
}

/// What a backend may use while it dispatches: the engine's queues through
/// [`Dispatch::reserve`], which applies backpressure and records the
/// dispatch for the summary and the observer.
pub struct Dispatch<'a> {
    plan: &'a Plan,
    engine: &'a mut Engine,
    backpressure: Option<&'a Backpressure>,
    watch: &'a mut Watch,
    timing: &'a mut [Timing],
    reached: &'a mut [u64],
    since: Duration,
    held: &'a mut u64,
    sent: usize,
    spans: &'a mut Spans,
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

/// How a run is set up: the engine's bounds, backpressure, the journal.
pub struct LoopConfig {
    /// The engine's settings (windows, seed).
    pub engine: EngineConfig,
    /// Hold producers behind consumers with this many full batches queued.
    pub backpressure: Option<usize>,
    /// The run's commit log (it also answers which keys were handed out
    /// before: by an earlier run, or by this one).
    pub journal: Option<Journal>,
    /// Refuse a key given earlier in the run even after its root finished
    /// (a set of every key: about 16 bytes a root for the whole run). Off,
    /// a repeated key is refused while its first root is live, or when the
    /// journal holds it; memory then does not grow with the run.
    pub unique_keys: bool,
}

/// What a run leaves besides its summary (the simulator reads it).
#[cfg_attr(
    not(feature = "sim"),
    expect(dead_code, reason = "the engine's counters are read by the simulator only")
)]
pub(crate) struct Ended {
    pub(crate) summary: RunSummary,
    pub(crate) stats: EngineStats,
    pub(crate) call_stats: Vec<CallStats>,
}

enum Wake<E> {
    Control,
    Backend(Result<(), E>),
    Source(Option<(u64, Value)>),
    Timer,
}

/// The loop's state for one run.
struct RunLoop<'p, S: Sink, B: Backend> {
    plan: &'p Plan,
    engine: Engine,
    sink: S,
    backend: &'p mut B,
    control: &'p ControlState,
    watch: Watch,
    backpressure: Option<Backpressure>,
    /// With `unique_keys`: every key given to this run (duplicates are
    /// refused per root).
    keys: Option<HashSet<u64>>,
    /// Keys admitted and not yet handed to the sink.
    live: HashSet<u64>,
    start: Instant,
    first_root: Option<Duration>,
    first_present: Option<Duration>,
    timing: Vec<Timing>,
    /// First dispatches per Call (Entities that reached it).
    reached: Vec<u64>,
    /// Times a Call's dispatch was held by backpressure.
    held: u64,
    /// Replicas torn down and restarted, per Call.
    replaced: Vec<u64>,
    duplicates: u64,
    /// Roots refused for a value of another type than the source's.
    wrong_type: u64,
    abandoned: u64,
    cancelled: bool,
    wakeups: u64,
    journal: Option<Journal>,
    journal_skipped: u64,
    /// Grains committed per (worker, Call) (distributed runs).
    per_worker: BTreeMap<(String, usize), u64>,
    /// Roots handed out failed or suppressed, by the kind of the failure.
    root_failures: BTreeMap<(ItemKind, Option<FailureKind>), u64>,
    spans: Spans,
}

/// Open `tracing` spans: one per batch in flight, one per live root. Empty
/// (and never filled) when no subscriber listens to `rayorch::*`.
#[derive(Default)]
struct Spans {
    batches: HashMap<BatchId, tracing::Span>,
    roots: HashMap<u64, tracing::Span>,
}

/// Run `plan` over `source` on `backend`, each finished root into `sink`
/// (closed at the end, also after an error). The one entry point every
/// executor calls.
///
/// `control` is the run's [`CancelHandle`]: stop admitting, or cancel. The
/// observer is lent to the run and given back with its result.
pub async fn run<S, B, St>(
    plan: &Plan,
    config: LoopConfig,
    sink: S,
    backend: &mut B,
    control: &CancelHandle,
    observer: Option<Box<dyn Observer>>,
    source: St,
) -> (Result<RunSummary, B::Error>, Option<Box<dyn Observer>>)
where
    S: Sink,
    B: Backend,
    St: Stream<Item = (u64, Value)>,
{
    let (result, observer) = run_ended(plan, config, sink, backend, &control.0, observer, source).await;
    (result.map(|e| e.summary), observer)
}

/// [`run`], keeping the engine's final counters.
pub(crate) async fn run_ended<S, B, St>(
    plan: &Plan,
    config: LoopConfig,
    sink: S,
    backend: &mut B,
    control: &ControlState,
    observer: Option<Box<dyn Observer>>,
    source: St,
) -> (Result<Ended, B::Error>, Option<Box<dyn Observer>>)
where
    S: Sink,
    B: Backend,
    St: Stream<Item = (u64, Value)>,
{
    let calls = plan.calls().len();
    let mut l = RunLoop {
        plan,
        engine: Engine::new(plan, config.engine),
        sink,
        backend,
        control,
        watch: Watch::new(observer),
        backpressure: config.backpressure.map(|k| Backpressure::new(plan, k)),
        keys: config.unique_keys.then(HashSet::new),
        live: HashSet::new(),
        start: Instant::now(),
        first_root: None,
        first_present: None,
        timing: vec![Timing::default(); calls],
        reached: vec![0; calls],
        held: 0,
        replaced: vec![0; calls],
        duplicates: 0,
        wrong_type: 0,
        abandoned: 0,
        cancelled: false,
        wakeups: 0,
        journal: config.journal,
        journal_skipped: 0,
        per_worker: BTreeMap::new(),
        root_failures: BTreeMap::new(),
        spans: Spans::default(),
    };
    let result = l.run(Box::pin(source)).await;
    let ok = result.is_ok() && !l.cancelled;
    l.backend.finish(ok).await;
    let closed = l.sink.close().map_err(|e| RunError::Sink(e.to_string()));
    let observer = l.watch.observer.take();
    let result = match (result, closed) {
        (Err(e), _) => Err(e),
        (Ok(_), Err(e)) => Err(e.into()),
        (Ok(()), Ok(())) => Ok(Ended {
            summary: l.summary(),
            stats: l.engine.stats().clone(),
            call_stats: (0..calls).map(|c| l.engine.call_stats(c).clone()).collect(),
        }),
    };
    (result, observer)
}

impl<S: Sink, B: Backend> RunLoop<'_, S, B> {
    async fn run<St>(&mut self, mut source: St) -> Result<(), B::Error>
    where
        St: Stream<Item = (u64, Value)> + Unpin,
    {
        self.start = Instant::now();
        let mut exhausted = false;
        if !self.control.cancelled() {
            self.backend.start(self.plan).await?;
        }
        let mut done = Vec::new();
        loop {
            if self.control.cancelled() {
                self.deliver()?;
                self.commit(true)?;
                self.abandon_live()?;
                self.observe_domains();
                self.observe_progress(true);
                return Ok(());
            }
            // Deliver before admitting: a finished root leaves the window
            // only once the sink has it, so roots pulled from the source
            // never exceed roots delivered plus the window, however slow
            // the sink (backpressure, not buffering). The sink may stop the
            // run itself: each delivery is followed by a look at the control
            // before the source is polled again.
            self.deliver()?;
            exhausted |= !self.control.admitting();
            while !exhausted && self.engine.can_admit() {
                match source.next().now_or_never() {
                    Some(Some((key, v))) => {
                        self.admit(key, v)?;
                        self.deliver()?;
                        exhausted |= !self.control.admitting();
                    }
                    Some(None) => exhausted = true,
                    None => break,
                }
            }
            if self.control.cancelled() {
                // The sink cancelled: abandon at the top, dispatch nothing.
                continue;
            }
            if let Some(e) = self.engine.aborted() {
                return Err(e.clone().into());
            }
            if exhausted && self.engine.live_roots() == 0 && !self.backend.in_flight() {
                // Attempts still running belong to roots already handed out
                // (siblings of a failed parent); the run ends once none is.
                break;
            }
            // Calls that wait for mates read the clock and whether more
            // roots can come.
            self.engine.set_clock(self.start.elapsed());
            self.engine.set_source_open(!exhausted);
            let sent = self.dispatch().await?;
            // A Call holding ready Grains for mates dispatches them by its
            // deadline: the timer below wakes the loop then, so that is no
            // stall.
            let hold_at = self
                .engine
                .next_hold_deadline()
                .filter(|&t| t > self.engine.clock())
                .map(|t| self.start + t);
            if sent == 0
                && hold_at.is_none()
                && !self.backend.in_flight()
                && !self.backend.pending(&self.engine)
            {
                if let Some(s) = self.engine.stall() {
                    return Err(RunError::Stalled(s).into());
                }
                if self.engine.live_roots() > 0 && (exhausted || !self.engine.can_admit()) {
                    // Waiting here would wait forever: no event can come.
                    return Err(RunError::Stalled(format!(
                        "{} root(s) unfinished: nothing runs and no Call could reserve a batch",
                        self.engine.live_roots()
                    ))
                    .into());
                }
            }
            self.observe_domains();
            self.observe_progress(false);
            self.commit(false)?;
            self.wakeups += 1;
            let want_source = !exhausted && self.engine.can_admit();
            let commit_at = self.journal.as_ref().and_then(Journal::due);
            // The timer: the journal's next commit or a held Call's deadline.
            let wake_at = match (commit_at, hold_at) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            let timer = async move {
                match wake_at {
                    Some(t) => tokio::time::sleep_until(t).await,
                    None => std::future::pending().await,
                }
            };
            let wake: Wake<B::Error> = tokio::select! {
                biased;
                _ = self.control.changed() => Wake::Control,
                r = self.backend.next(&mut done) => Wake::Backend(r),
                _ = timer, if wake_at.is_some() => Wake::Timer,
                item = source.next(), if want_source => Wake::Source(item),
            };
            match wake {
                Wake::Control | Wake::Timer => {}
                Wake::Backend(r) => r?,
                Wake::Source(Some((key, v))) => self.admit(key, v)?,
                Wake::Source(None) => exhausted = true,
            }
            for r in done.drain(..) {
                self.report(r);
            }
        }
        self.commit(true)?;
        self.observe_domains();
        self.observe_progress(true);
        Ok(())
    }

    async fn dispatch(&mut self) -> Result<usize, B::Error> {
        let mut cx = Dispatch {
            plan: self.plan,
            engine: &mut self.engine,
            backpressure: self.backpressure.as_ref(),
            watch: &mut self.watch,
            timing: &mut self.timing,
            reached: &mut self.reached,
            since: self.start.elapsed(),
            held: &mut self.held,
            sent: 0,
            spans: &mut self.spans,
        };
        self.backend.dispatch(&mut cx).await?;
        Ok(cx.sent)
    }

    /// Commit what was handed out to the journal, if any, when due (`force`:
    /// now).
    fn commit(&mut self, force: bool) -> Result<(), RunError> {
        match self.journal.as_mut() {
            Some(j) => j.commit(&mut self.sink, force),
            None => Ok(()),
        }
    }

    /// A root refused before admission: to the sink failed (kind `source`).
    fn refuse(&mut self, key: u64, code: &'static str, why: String) -> Result<(), RunError> {
        let cause = Cause::of_kind(why, FailureKind::Source).with_code(code);
        self.hand_out(&self.failed_outcome(key, cause), false)
    }

    fn admit(&mut self, key: u64, v: Value) -> Result<(), RunError> {
        let seen = match &self.journal {
            Some(j) => j.seen(key)?,
            None => Seen::New,
        };
        if seen == Seen::Earlier {
            // Finished in an earlier run of this journal; its output is kept.
            self.journal_skipped += 1;
            return Ok(());
        }
        let repeated = seen == Seen::ThisRun
            || self.live.contains(&key)
            || self.keys.as_mut().is_some_and(|k| !k.insert(key));
        if repeated {
            self.duplicates += 1;
            return self.refuse(
                key,
                "input.duplicate_key",
                format!(
                    "root key {key} was already given to this run; this root was not run: give each root a unique key"
                ),
            );
        }
        let (expected_id, expected) = self.plan.inner.source_type;
        if std::any::Any::type_id(&*v) != expected_id {
            // An erased source (the distributed owner's) can hold a root of
            // another type: that root fails, the run goes on.
            self.wrong_type += 1;
            return self.refuse(
                key,
                "input.wrong_type",
                format!(
                    "root {key}: the plan's source takes `{expected}`, but this root's value is another type; it was not run: give every root a `{expected}`"
                ),
            );
        }
        self.engine.admit(key, v)?;
        self.live.insert(key);
        self.watch.root_admitted(key, self.start.elapsed());
        let span = tracing::info_span!(
            target: "rayorch::root",
            "root",
            key,
            outcome = tracing::field::Empty,
            otel.status_code = tracing::field::Empty,
            otel.status_description = tracing::field::Empty,
        );
        if !span.is_disabled() {
            self.spans.roots.insert(key, span);
        }
        Ok(())
    }

    fn failed_outcome(&self, key: u64, cause: Cause) -> RootOutcome {
        RootOutcome {
            key,
            items: vec![Item::Failed(cause); self.plan.outputs()],
            plan: self.plan.inner.id,
        }
    }

    /// Give `o` to the sink; `journaled`: record it as its key's outcome.
    fn hand_out(&mut self, o: &RootOutcome, journaled: bool) -> Result<(), RunError> {
        if journaled && let Some(j) = self.journal.as_mut() {
            j.record(o)?;
        }
        let at = self.start.elapsed();
        self.first_root.get_or_insert(at);
        match o.kind() {
            ItemKind::Present => {
                self.first_present.get_or_insert(at);
            }
            ItemKind::Dropped => {}
            kind => {
                *self
                    .root_failures
                    .entry((kind, o.cause().and_then(Cause::kind)))
                    .or_default() += 1
            }
        }
        self.watch.root_finished(o, at);
        if let Some(span) = self.spans.roots.remove(&o.key) {
            span.record("outcome", format!("{:?}", o.kind()).to_lowercase());
            // Lost to a failure (its own or a Grain's below it): an error.
            if matches!(o.kind(), ItemKind::Failed | ItemKind::Suppressed) {
                span.record("otel.status_code", "error");
                if let Some(c) = o.cause() {
                    span.record("otel.status_description", c.to_string());
                }
            }
        }
        // The sink is user code on the loop: a panic there is a typed sink
        // error (the run still shuts its backend down and closes).
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.sink.root(o))) {
            Ok(r) => r.map_err(|e| RunError::Sink(e.to_string())),
            Err(p) => Err(RunError::Sink(format!("the sink panicked: {}", panic_text(&p)))),
        }
    }

    fn deliver(&mut self) -> Result<(), RunError> {
        while let Some(o) = self.engine.pop_finished() {
            self.live.remove(&o.key);
            self.hand_out(&o, true)?;
        }
        Ok(())
    }

    /// Cancellation: every live root goes to the sink failed, in key order.
    fn abandon_live(&mut self) -> Result<(), RunError> {
        self.cancelled = true;
        let mut keys: Vec<u64> = self.live.drain().collect();
        keys.sort_unstable();
        for key in keys {
            self.abandoned += 1;
            let cause = Cause::of_kind(
                "the run was cancelled before this root finished; run it again to get its outputs",
                FailureKind::Cancelled,
            );
            self.hand_out(&self.failed_outcome(key, cause), false)?;
        }
        Ok(())
    }

    /// One report from the backend into the engine, the timing and the
    /// observer.
    fn report(&mut self, r: Report) {
        let f = match r {
            Report::Echo(batch, result) => {
                self.engine.report(batch, result);
                return;
            }
            Report::Done(f) => f,
        };
        if let Some(span) = self.spans.batches.remove(&f.batch) {
            span.record("replica", f.replica);
            span.record(
                "outcome",
                match &f.result {
                    Ok(_) => "reported",
                    Err(_) => "attempt failed",
                },
            );
            if f.result.is_err() {
                span.record("otel.status_code", "error");
            }
        }
        let now = Instant::now();
        self.replaced[f.call] += u64::from(f.replaced);
        let t = &mut self.timing[f.call];
        t.busy += now.saturating_duration_since(f.dispatched);
        let to = now.saturating_duration_since(self.start);
        t.to = Some(t.to.map_or(to, |x| x.max(to)));
        if self.watch.active() {
            let mut counts = [0usize; 3];
            let error = match &f.result {
                Ok(outcomes) => {
                    for o in outcomes {
                        counts[match o {
                            Outcome::Ok(_) => 0,
                            Outcome::RecordFailure(_) => 1,
                            Outcome::GroupFailure(_) => 2,
                        }] += 1;
                    }
                    None
                }
                Err(e) => Some(e.message()),
            };
            self.watch.finished(&BatchFinished {
                call: &self.plan.calls()[f.call].name,
                call_index: f.call,
                size: f.size,
                replica: f.replica,
                started: f.dispatched.saturating_duration_since(self.start),
                duration: now.saturating_duration_since(f.dispatched),
                ok: counts[0],
                record_failures: counts[1],
                group_failures: counts[2],
                attempt_error: error,
                replica_replaced: f.replaced,
            });
        }
        let committed = !matches!(self.engine.report(f.batch, f.result), ReportOutcome::Rejected);
        if committed && let Some(w) = f.worker {
            *self.per_worker.entry((w, f.call)).or_default() += f.size as u64;
        }
    }

    fn observe_domains(&mut self) {
        if self.watch.active() {
            let counts = self.domain_counts();
            self.watch.domains(counts);
        }
    }

    /// A [`Progress`] snapshot for the observer, when one is due (`last`:
    /// the run's final one).
    fn observe_progress(&mut self, last: bool) {
        if !self.watch.progress_due(Instant::now(), last) {
            return;
        }
        let summary = self.summary();
        let calls: Vec<CallLive> = (0..self.plan.calls().len())
            .map(|c| {
                let (ready, recovery) = self.engine.queue_depths(c);
                let (in_flight_batches, in_flight_grains) = self.engine.in_flight_of(c);
                CallLive {
                    ready,
                    recovery,
                    in_flight_batches,
                    in_flight_grains,
                    replicas: self.backend.live_replicas(self.plan, c),
                }
            })
            .collect();
        let mut backend = Vec::new();
        self.backend.gauges(&mut backend);
        let progress = Progress {
            summary: &summary,
            calls: &calls,
            admission: AdmissionLive {
                roots: self.engine.live_roots(),
                window: self.engine.window(),
                children: self.engine.live_children(),
                window_children: self.engine.window_children(),
                journal_lag: self.journal.as_ref().map_or(0, Journal::lag),
                keys_held: self.live.len() + self.keys.as_ref().map_or(0, HashSet::len),
            },
            backend: &backend,
            finished: last,
        };
        self.watch.progress(&progress);
    }

    fn domain_counts(&self) -> Vec<DomainCounts> {
        let plan = &self.plan.inner;
        let st = self.engine.stats();
        plan.domains
            .iter()
            .enumerate()
            .map(|(d, spec)| {
                let mut counts = DomainCounts {
                    domain: spec.info.name,
                    ..DomainCounts::default()
                };
                if d == plan.root {
                    counts.published = st.roots_admitted + self.refused();
                    counts.done = st.roots_present + st.roots_dropped;
                    counts.failed = st.roots_failed + self.refused() + self.abandoned;
                    counts.suppressed = st.roots_suppressed;
                    return counts;
                }
                let calls: Vec<usize> = (0..plan.calls.len())
                    .filter(|&c| plan.calls[c].domain == d)
                    .collect();
                let (Some(&first), Some(&last)) = (calls.first(), calls.last()) else {
                    return counts;
                };
                counts.published = self.reached[first];
                counts.done = self.engine.call_stats(last).committed;
                for &c in &calls {
                    let cs = self.engine.call_stats(c);
                    counts.failed +=
                        cs.record_failures + cs.group_failures + cs.exhausted + cs.contract_errors;
                    counts.suppressed += cs.suppressed_before_dispatch + cs.suppressed_in_flight;
                }
                counts
            })
            .collect()
    }

    /// Failures by Domain and kind: the roots failed or suppressed (root
    /// Domain), then the Grains sealed Failed below and at the root.
    fn failure_counts(&self) -> Vec<FailureCount> {
        let plan = &self.plan.inner;
        let root = plan.domains[plan.root].info.name;
        let kind_name = |k: Option<FailureKind>| k.map_or("unknown", FailureKind::as_str).to_string();
        let roots = self
            .root_failures
            .iter()
            .map(|(&(outcome, kind), &count)| FailureCount {
                domain: root.to_string(),
                level: if outcome == ItemKind::Failed {
                    "root failed"
                } else {
                    "root suppressed"
                }
                .to_string(),
                kind: kind_name(kind),
                count,
            });
        let grains = self
            .engine
            .stats()
            .failed_grains
            .iter()
            .map(|(&(d, kind), &count)| FailureCount {
                domain: plan.domains[d].info.name.to_string(),
                level: "grain failed".to_string(),
                kind: kind.as_str().to_string(),
                count,
            });
        roots.chain(grains).collect()
    }

    /// Roots the source gave that were refused before admission.
    fn refused(&self) -> u64 {
        self.duplicates + self.wrong_type
    }

    fn summary(&self) -> RunSummary {
        let st = self.engine.stats();
        let calls = self
            .plan
            .calls()
            .iter()
            .enumerate()
            .map(|(c, spec)| {
                let cs = self.engine.call_stats(c);
                let t = self.timing[c];
                let mean = if cs.rpcs > 0 {
                    cs.grains_dispatched as f64 / cs.rpcs as f64
                } else {
                    0.0
                };
                CallMetrics {
                    name: spec.name.to_string(),
                    batch_size: spec.config.batch_size,
                    replicas: spec.config.replicas,
                    rpcs: cs.rpcs,
                    grains_dispatched: cs.grains_dispatched,
                    mean_batch: mean,
                    fill: mean / spec.config.batch_size as f64,
                    mixed_parent_batches: cs.mixed_parent_batches,
                    committed: cs.committed,
                    record_failures: cs.record_failures,
                    group_failures: cs.group_failures,
                    attempt_failures: cs.attempt_failures,
                    requeued: cs.requeued,
                    suppressed_before_dispatch: cs.suppressed_before_dispatch,
                    suppressed_in_flight: cs.suppressed_in_flight,
                    stale_grains: cs.stale_grains,
                    replicas_replaced: self.replaced[c],
                    threads_abandoned: self.backend.threads_abandoned(c),
                    busy_s: secs(t.busy),
                    window_start_s: t.from.map(secs),
                    window_end_s: t.to.map(secs),
                }
            })
            .collect();
        RunSummary {
            roots: st.roots_admitted + self.refused(),
            present: st.roots_present,
            dropped: st.roots_dropped,
            failed: st.roots_failed + self.refused() + self.abandoned,
            suppressed: st.roots_suppressed,
            wall_s: secs(self.start.elapsed()),
            first_root_s: self.first_root.map(secs),
            first_present_s: self.first_present.map(secs),
            duplicate_keys: self.duplicates,
            wrong_type_roots: self.wrong_type,
            cancelled: self.cancelled,
            abandoned: self.abandoned,
            threads_abandoned: (0..self.plan.calls().len())
                .map(|c| self.backend.threads_abandoned(c))
                .sum(),
            driver_wakeups: self.wakeups,
            rejected_reports: st.rejected_reports,
            backpressure_holds: self.held,
            journal_skipped: self.journal_skipped,
            journal_commits: self.journal.as_ref().map_or(0, |j| j.commits),
            calls,
            domains: self.domain_counts(),
            failures: self.failure_counts(),
            workers: self
                .per_worker
                .iter()
                .map(|((w, c), &grains)| WorkerGrains {
                    worker: w.clone(),
                    call: self.plan.calls()[*c].name.to_string(),
                    grains,
                })
                .collect(),
        }
    }
}

/// An attempt's failure for a replica that never reported in time.
pub(crate) fn timed_out(t: Option<Duration>) -> AttemptError {
    AttemptError::TimedOut(format!("attempt timed out after {:?}", t.unwrap_or_default()))
}
