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

use crate::engine::{BatchId, CallStats, Engine, EngineConfig, EngineStats, ReportOutcome, RootOutcome};
use crate::error::RunError;
use crate::exec::backpressure::Backpressure;
use crate::exec::control::{
    AdmissionLive, BatchFinished, CallLive, CancelHandle, ControlState, Observer, Progress, Watch,
};
use crate::exec::journal::{Journal, Seen};
use crate::exec::metrics::RunSummary;
use crate::exec::sink::Sink;
use crate::plan::Plan;
use crate::stage::{AttemptError, panic_text};
use crate::value::{Cause, FailureKind, Item, ItemKind, Outcome, Value};

mod backend;
mod summary;

use backend::Timing;
pub use backend::{Backend, Dispatch, Finished, Report};

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
    /// Each Call's per-record counters when the run started.
    record_base: Vec<[u64; 3]>,
    /// Calls whose panicking shape key was reported (one line each).
    shape_warned: Vec<bool>,
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
    root_failures: BTreeMap<(ItemKind, FailureKind), u64>,
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
    // Retries and bisection steps print no panic a first attempt printed.
    crate::stage::quiet::install();
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
        record_base: plan.calls().iter().map(|c| c.runtime.record_counts()).collect(),
        shape_warned: vec![false; calls],
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
        self.warn_shape_keys();
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

    /// One line per Call whose shape key panicked (the panics themselves
    /// print nothing; `CallMetrics::shape_key_panics` counts them).
    fn warn_shape_keys(&mut self) {
        for (c, warned) in self.shape_warned.iter_mut().enumerate() {
            let n = self.engine.call_stats(c).shape_key_panics;
            if !*warned && n > 0 {
                *warned = true;
                eprintln!(
                    "rayorch: Call `{}`: its shape key function panicked; such Grains are batched under key u64::MAX (counted in shape_key_panics, not printed again): fix the key function",
                    self.plan.calls()[c].name
                );
            }
        }
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
                    // The engine classifies every failure it seals; a
                    // cause without a kind would be its bug, counted as
                    // an error rather than lost.
                    .entry((
                        kind,
                        o.cause().and_then(Cause::kind).unwrap_or(FailureKind::Error),
                    ))
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
        // With no live root every queued entry is dead: a run that ended
        // shows empty queues, not the entries it never had to skip.
        let none_live = self.engine.live_roots() == 0;
        let calls: Vec<CallLive> = (0..self.plan.calls().len())
            .map(|c| {
                let (ready, recovery) = match none_live {
                    true => (0, 0),
                    false => self.engine.queue_depths(c),
                };
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
}

/// An attempt's failure for a replica that never reported in time.
pub(crate) fn timed_out(t: Option<Duration>) -> AttemptError {
    AttemptError::TimedOut(format!("attempt timed out after {:?}", t.unwrap_or_default()))
}
