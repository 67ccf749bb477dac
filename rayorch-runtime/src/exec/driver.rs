//! The driver: one async loop that owns the [`Engine`] for a run.
//!
//! Invariants:
//! - Only the driver touches the engine, the sink and the observer.
//! - The driver never spins: each turn of the loop ends waiting on a replica
//!   event, the earliest attempt deadline (over blocking *and* async
//!   attempts), the source (only while the window has room: that is the
//!   backpressure), or a control request. `driver_wakeups` counts the turns.
//! - Finished roots are delivered before any new root is admitted: admitted
//!   roots not yet delivered never exceed the window (a slow sink holds the
//!   source back instead of letting outcomes queue up).
//! - Every root the source yields reaches the sink exactly once: its outcome,
//!   a failure naming the key when the key was already given to this run, or
//!   a cancellation failure when the run is cancelled while it is live.
//! - `run` returns once no root is live and no attempt is in flight, or at
//!   once on an error or a cancellation (attempts in flight are then given
//!   up: async tasks dropped, blocking threads left to finish alone).
//! - With a journal (`journal.rs`), every root handed out is recorded there
//!   (except duplicates and cancelled ones) and committed, grouped, before
//!   the driver waits again (or by its interval), at the end of the run, and
//!   before a cancellation hands out its abandoned roots.

use std::collections::HashSet;
use std::time::Duration;

use futures::{FutureExt, Stream, StreamExt};
use tokio::sync::mpsc::{UnboundedReceiver, unbounded_channel};
use tokio::time::Instant;

use crate::engine::{Batch, Engine, EngineConfig, RootOutcome};
use crate::error::RunError;
use crate::exec::control::{BatchDispatched, BatchFinished, ControlState, Observer, Watch};
use crate::exec::journal::Journal;
use crate::exec::metrics::{CallMetrics, DomainCounts, RunSummary, secs};
use crate::exec::replica::{Attempt, Event, Replicas, timed_out};
use crate::exec::sink::Sink;
use crate::exec::stage::{AttemptResult, panic_text};
use crate::plan::Plan;
use crate::value::{Cause, Item, ItemKind, Outcome, Value};

/// Per-Call timing: busy time, first dispatch, last report.
#[derive(Clone, Copy, Default)]
struct Timing {
    busy: Duration,
    from: Option<Duration>,
    to: Option<Duration>,
}

pub(crate) struct Driver<'p, S: Sink> {
    plan: &'p Plan,
    engine: Engine,
    pub(crate) sink: S,
    replicas: Replicas,
    events: UnboundedReceiver<Event>,
    control: &'p ControlState,
    pub(crate) watch: Watch,
    /// Every key given to this run (duplicates are refused per root).
    keys: HashSet<u64>,
    /// Keys admitted and not yet handed to the sink.
    live: HashSet<u64>,
    start: Instant,
    first_root: Option<Duration>,
    first_present: Option<Duration>,
    timing: Vec<Timing>,
    /// First dispatches per Call (Entities that reached it).
    reached: Vec<u64>,
    duplicates: u64,
    abandoned: u64,
    cancelled: bool,
    wakeups: u64,
    /// The run's commit log, when it is journaled.
    pub(crate) journal: Option<Journal>,
    /// Keys the journal holds as terminal: a resumed run skips them.
    pub(crate) journal_done: HashSet<u64>,
    journal_skipped: u64,
}

enum Wake {
    Control,
    Event(Option<Event>),
    Source(Option<(u64, Value)>),
    Deadline,
}

impl<'p, S: Sink> Driver<'p, S> {
    pub(crate) fn new(
        plan: &'p Plan,
        config: EngineConfig,
        sink: S,
        control: &'p ControlState,
        observer: Option<Box<dyn Observer>>,
    ) -> Self {
        let (tx, rx) = unbounded_channel();
        let calls = plan.calls().len();
        Driver {
            engine: Engine::new(plan, config),
            sink,
            replicas: Replicas::new(plan, tx),
            events: rx,
            control,
            watch: Watch::new(observer),
            keys: HashSet::new(),
            live: HashSet::new(),
            start: Instant::now(),
            first_root: None,
            first_present: None,
            timing: vec![Timing::default(); calls],
            reached: vec![0; calls],
            duplicates: 0,
            abandoned: 0,
            cancelled: false,
            wakeups: 0,
            journal: None,
            journal_done: HashSet::new(),
            journal_skipped: 0,
            plan,
        }
    }

    pub(crate) async fn run<St>(&mut self, mut source: St) -> Result<RunSummary, RunError>
    where
        St: Stream<Item = (u64, Value)> + Unpin,
    {
        self.start = Instant::now();
        let mut exhausted = false;
        if !self.control.cancelled() {
            self.replicas.start_all(self.plan);
        }
        loop {
            if self.control.cancelled() {
                self.deliver()?;
                self.commit(true)?;
                self.abandon_live()?;
                break;
            }
            exhausted |= !self.control.admitting();
            // Deliver before admitting: a finished root leaves the window
            // only once the sink has it, so roots pulled from the source
            // never exceed roots delivered plus the window, however slow
            // the sink (backpressure, not buffering).
            self.deliver()?;
            // Admit what the source has ready, as far as the window allows.
            while !exhausted && self.engine.can_admit() {
                match source.next().now_or_never() {
                    Some(Some((key, v))) => {
                        self.admit(key, v)?;
                        self.deliver()?;
                    }
                    Some(None) => exhausted = true,
                    None => break,
                }
            }
            self.deliver()?;
            if let Some(e) = self.engine.aborted() {
                return Err(e.clone());
            }
            if exhausted && self.engine.live_roots() == 0 && self.replicas.attempts.is_empty() {
                // Attempts still running belong to roots already handed out
                // (e.g. siblings of a failed parent); `run` returns once no
                // stage is mid-batch for this run.
                break;
            }
            let dispatched = self.dispatch();
            if dispatched == 0 && self.engine.in_flight_batches() == 0 && !self.replicas.initialising() {
                if let Some(s) = self.engine.stall() {
                    return Err(RunError::Stalled(s));
                }
                if self.engine.live_roots() > 0 && (exhausted || !self.engine.can_admit()) {
                    // Waiting here would wait forever: no event can come.
                    return Err(RunError::Stalled(format!(
                        "{} root(s) unfinished: every replica is idle and no Call could reserve a batch",
                        self.engine.live_roots()
                    )));
                }
            }
            self.observe_domains();
            self.commit(false)?;
            self.wakeups += 1;
            let want_source = !exhausted && self.engine.can_admit();
            let deadline = self.replicas.next_deadline();
            let commit_at = self.journal.as_ref().and_then(Journal::due);
            let wake = tokio::select! {
                biased;
                _ = self.control.changed() => Wake::Control,
                ev = self.events.recv() => Wake::Event(ev),
                _ = tokio::time::sleep_until(deadline.unwrap_or_else(Instant::now)), if deadline.is_some() => Wake::Deadline,
                _ = tokio::time::sleep_until(commit_at.unwrap_or_else(Instant::now)), if commit_at.is_some() => Wake::Deadline,
                item = source.next(), if want_source => Wake::Source(item),
            };
            match wake {
                Wake::Control | Wake::Deadline | Wake::Event(None) => {}
                Wake::Event(Some(ev)) => self.handle(ev)?,
                Wake::Source(Some((key, v))) => self.admit(key, v)?,
                Wake::Source(None) => exhausted = true,
            }
            while let Ok(ev) = self.events.try_recv() {
                self.handle(ev)?;
            }
            self.expire(Instant::now());
        }
        self.commit(true)?;
        self.observe_domains();
        Ok(self.summary())
    }

    /// Hold producers whose consumers are behind (`Runner::backpressure`).
    pub(crate) fn backpressure(&mut self, bp: Option<crate::exec::backpressure::Backpressure>) {
        self.replicas.backpressure = bp;
    }

    /// Commit what was handed out to the journal, if any, when due (`force`:
    /// now).
    fn commit(&mut self, force: bool) -> Result<(), RunError> {
        match self.journal.as_mut() {
            Some(j) => j.commit(&mut self.sink, force),
            None => Ok(()),
        }
    }

    pub(crate) fn shutdown(&mut self, ended_normally: bool) {
        self.replicas.shutdown(ended_normally && !self.cancelled);
    }

    fn admit(&mut self, key: u64, v: Value) -> Result<(), RunError> {
        if self.journal_done.contains(&key) {
            // Finished in an earlier run of this journal; its output is kept.
            self.journal_skipped += 1;
            return Ok(());
        }
        if !self.keys.insert(key) {
            self.duplicates += 1;
            let cause = Cause::new(format!(
                "root key {key} was already given to this run; this root was not run: give each root a unique key"
            ));
            return self.hand_out(&self.failed_outcome(key, cause), false);
        }
        self.engine.admit(key, v)?;
        self.live.insert(key);
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
        if o.kind() == ItemKind::Present {
            self.first_present.get_or_insert(at);
        }
        // The sink is user code on the driver: a panic there is a typed
        // sink error (the run still shuts its replicas down and closes).
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
            let cause = Cause::new(
                "the run was cancelled before this root finished; run it again to get its outputs",
            );
            self.hand_out(&self.failed_outcome(key, cause), false)?;
        }
        Ok(())
    }

    fn dispatch(&mut self) -> usize {
        let plan = self.plan;
        let watch = &mut self.watch;
        let reached = &mut self.reached;
        let timing = &mut self.timing;
        let since = self.start.elapsed();
        self.replicas
            .dispatch(plan, &mut self.engine, |_, batch: &Batch, mixed| {
                let c = batch.call;
                let first = batch.grains.iter().filter(|g| g.generation == 1).count();
                reached[c] += first as u64;
                let t = &mut timing[c];
                t.from.get_or_insert(since);
                watch.dispatched(&BatchDispatched {
                    call: &plan.calls()[c].name,
                    call_index: c,
                    size: batch.grains.len(),
                    parents_mixed: mixed,
                    retries: batch.grains.len() - first,
                });
            })
    }

    fn handle(&mut self, ev: Event) -> Result<(), RunError> {
        match ev {
            Event::Initialised {
                pool,
                slot,
                incarnation,
                result,
            } => self
                .replicas
                .initialised(pool, slot, incarnation, result)
                .map_err(|(c, cause)| {
                    let spec = &self.plan.calls()[c];
                    RunError::ReplicaFactory {
                        call: spec.name.to_string(),
                        stage: spec.runtime.stage_name(),
                        cause,
                    }
                }),
            Event::Done { batch, result, dead } => {
                // A report from an attempt the driver gave up on (timed out)
                // still goes to the engine, whose gate refuses it.
                if let Some(a) = self.replicas.finish(self.plan, batch, dead) {
                    self.finished(&a, &result, dead);
                }
                self.engine.report(batch, result);
                Ok(())
            }
        }
    }

    /// Fail attempts past their deadline and replace their replicas.
    fn expire(&mut self, now: Instant) {
        for batch in self.replicas.expired(now) {
            if let Some(a) = self.replicas.time_out(self.plan, batch) {
                let result = Err(timed_out(self.plan.calls()[a.call].config.timeout));
                self.finished(&a, &result, true);
                self.engine.report(batch, result);
            }
        }
    }

    /// Timing and the observer's batch event for one ended attempt.
    fn finished(&mut self, a: &Attempt, result: &AttemptResult, dead: bool) {
        let (c, dispatched) = (a.call, a.dispatched);
        let now = Instant::now();
        let t = &mut self.timing[c];
        t.busy += now.saturating_duration_since(dispatched);
        let to = now.saturating_duration_since(self.start);
        t.to = Some(t.to.map_or(to, |x| x.max(to)));
        if !self.watch.active() {
            return;
        }
        let mut counts = [0usize; 3];
        let error = match result {
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
            call: &self.plan.calls()[c].name,
            call_index: c,
            size: a.size,
            replica: a.slot,
            started: dispatched.saturating_duration_since(self.start),
            duration: now.saturating_duration_since(dispatched),
            ok: counts[0],
            record_failures: counts[1],
            group_failures: counts[2],
            attempt_error: error,
            replica_replaced: dead,
        });
    }

    fn observe_domains(&mut self) {
        if self.watch.active() {
            let counts = self.domain_counts();
            self.watch.domains(counts);
        }
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
                    counts.published = st.roots_admitted + self.duplicates;
                    counts.done = st.roots_present + st.roots_dropped;
                    counts.failed = st.roots_failed + self.duplicates + self.abandoned;
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
                    replicas_replaced: self.replicas.replaced[c],
                    busy_s: secs(t.busy),
                    window_start_s: t.from.map(secs),
                    window_end_s: t.to.map(secs),
                }
            })
            .collect();
        RunSummary {
            roots: st.roots_admitted + self.duplicates,
            present: st.roots_present,
            dropped: st.roots_dropped,
            failed: st.roots_failed + self.duplicates + self.abandoned,
            suppressed: st.roots_suppressed,
            wall_s: secs(self.start.elapsed()),
            first_root_s: self.first_root.map(secs),
            first_present_s: self.first_present.map(secs),
            duplicate_keys: self.duplicates,
            cancelled: self.cancelled,
            abandoned: self.abandoned,
            driver_wakeups: self.wakeups,
            rejected_reports: st.rejected_reports,
            journal_skipped: self.journal_skipped,
            journal_commits: self.journal.as_ref().map_or(0, |j| j.commits),
            calls,
            domains: self.domain_counts(),
        }
    }
}
