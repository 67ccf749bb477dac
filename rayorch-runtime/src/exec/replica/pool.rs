//! The pools as backends use them: [`ReplicaPool`] (the `Runner`'s, and the
//! distributed owner's for the Calls it keeps), the `Runner`'s backend over
//! one, and [`run_attempt`] for a batch on an instance outside any pool (a
//! distributed worker's slot).

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use futures::FutureExt;
use tokio::sync::mpsc::{UnboundedReceiver, unbounded_channel};
use tokio::time::Instant;

use crate::engine::Engine;
use crate::error::RunError;
use crate::exec::run_loop::{Backend, Dispatch, Report, timed_out};
use crate::plan::Plan;
use crate::stage::{AttemptError, AttemptResult, BatchInputs, ErasedCall, Execution, StageBox};

use super::{Event, Replicas, expire, on_event, panicked};

/// Replica pools for some Calls of a plan, as a backend uses them: the
/// [`Runner`](crate::Runner) runs every Call on one; a distributed owner
/// runs the Calls it keeps on one (panics, timeouts and dead replicas
/// handled the same way).
pub struct ReplicaPool {
    plan: Plan,
    replicas: Replicas,
    events: UnboundedReceiver<Event>,
    /// Named in reports (`None` in a local run).
    worker: Option<String>,
}

impl ReplicaPool {
    /// Pools for the Calls `slots(c)` gives a replica count (`None`: the
    /// Call runs elsewhere); `worker` names this process in reports.
    pub fn new(plan: &Plan, slots: impl Fn(usize) -> Option<usize>, worker: Option<String>) -> ReplicaPool {
        let (tx, rx) = unbounded_channel();
        ReplicaPool {
            replicas: Replicas::new(plan, tx, slots),
            plan: plan.clone(),
            events: rx,
            worker,
        }
    }

    /// Start every replica (each loads its model).
    pub fn start(&mut self) {
        self.replicas.start_all(&self.plan);
    }

    /// Does this pool run Call `c`?
    pub fn serves(&self, c: usize) -> bool {
        self.replicas.serves(c)
    }

    /// Hand ready batches of its Calls to every free replica.
    pub fn dispatch(&mut self, cx: &mut Dispatch<'_>) {
        self.replicas.dispatch(cx, &|_| false);
    }

    /// As [`ReplicaPool::dispatch`], where `also_working(d)` says Call `d`
    /// is at work outside this pool (backpressure holds a producer here
    /// behind a consumer elsewhere).
    pub fn dispatch_with(&mut self, cx: &mut Dispatch<'_>, also_working: impl Fn(usize) -> bool) {
        self.replicas.dispatch(cx, &also_working);
    }

    /// Attempts running.
    pub fn in_flight(&self) -> bool {
        !self.replicas.attempts.is_empty()
    }

    /// Is Call `c` at work here (a batch running, replicas starting)?
    pub fn working(&self, c: usize) -> bool {
        self.replicas.working(c)
    }

    /// Replicas still starting (a report, or a failed factory, is to come).
    pub fn initialising(&self) -> bool {
        self.replicas.initialising()
    }

    /// Threads Call `c`'s timed-out attempts abandoned (blocking stages;
    /// see [`Call::max_abandoned_threads`](crate::Call::max_abandoned_threads)).
    pub fn threads_abandoned(&self, c: usize) -> u64 {
        self.replicas.threads_abandoned.get(c).copied().unwrap_or(0)
    }

    /// Wait for the next replica event or attempt deadline; what ended goes
    /// to `out`. Cancel-safe. A replica whose factory failed ends the run
    /// ([`RunError::ReplicaFactory`]). Pending forever with nothing running.
    pub async fn next(&mut self, out: &mut Vec<Report>) -> Result<(), RunError> {
        let deadline = self.replicas.next_deadline();
        let ev = tokio::select! {
            ev = self.events.recv() => ev,
            _ = tokio::time::sleep_until(deadline.unwrap_or_else(Instant::now)), if deadline.is_some() => None,
        };
        let w = self.worker.as_deref();
        if let Some(ev) = ev {
            on_event(&mut self.replicas, &self.plan, ev, out, w)?;
        }
        while let Ok(ev) = self.events.try_recv() {
            on_event(&mut self.replicas, &self.plan, ev, out, w)?;
        }
        expire(&mut self.replicas, &self.plan, Instant::now(), out, w);
        Ok(())
    }

    /// The run is over: drop async attempts, join idle threads (`ok`: also
    /// wait for replicas still starting).
    pub fn shutdown(&mut self, ok: bool) {
        self.replicas.shutdown(ok);
    }
}

/// The [`Runner`](crate::Runner)'s backend: every Call on this process's
/// replica pools.
pub(crate) struct ReplicaBackend(ReplicaPool);

impl ReplicaBackend {
    pub(crate) fn new(plan: &Plan) -> ReplicaBackend {
        ReplicaBackend(ReplicaPool::new(
            plan,
            |c| Some(plan.calls()[c].config.replicas),
            None,
        ))
    }
}

impl Backend for ReplicaBackend {
    type Error = RunError;

    async fn start(&mut self, _: &Plan) -> Result<(), RunError> {
        self.0.start();
        Ok(())
    }

    async fn dispatch(&mut self, cx: &mut Dispatch<'_>) -> Result<(), RunError> {
        self.0.dispatch(cx);
        Ok(())
    }

    fn in_flight(&self) -> bool {
        self.0.in_flight()
    }

    fn working(&self, c: usize) -> bool {
        self.0.working(c)
    }

    fn pending(&self, _: &Engine) -> bool {
        self.0.initialising()
    }

    async fn next(&mut self, out: &mut Vec<Report>) -> Result<(), RunError> {
        self.0.next(out).await
    }

    fn threads_abandoned(&self, c: usize) -> u64 {
        self.0.threads_abandoned(c)
    }

    async fn finish(&mut self, ok: bool) {
        self.0.shutdown(ok);
    }
}

/// Run one batch on a stage instance outside any pool (a distributed
/// worker's slot): blocking stages on tokio's blocking pool, async ones on
/// this task, within `limit` (the Call's `timeout`) when one is set. A panic
/// anywhere (the factory excepted: see the pool) is this attempt's failure
/// and loses the instance (`stage` is left `None`, so the caller makes a
/// fresh one); it never unwinds into the caller. An attempt past its limit
/// is [`AttemptError::TimedOut`] and loses the instance too: an async future
/// is dropped there, a blocking thread finishes on its own with an instance
/// nobody uses again.
pub async fn run_attempt(
    runtime: &Arc<dyn ErasedCall>,
    stage: &mut Option<StageBox>,
    replica: usize,
    inputs: BatchInputs,
    limit: Option<std::time::Duration>,
) -> AttemptResult {
    let Some(st) = stage.take() else {
        return Err(AttemptError::Failed("the stage instance was lost".into()));
    };
    let attempt = attempt_on(runtime, st, replica, inputs);
    let (kept, result) = match limit {
        None => attempt.await,
        Some(t) => tokio::time::timeout(t, attempt)
            .await
            .unwrap_or_else(|_| (None, Err(timed_out(Some(t))))),
    };
    *stage = kept;
    result
}

/// One attempt on `st`: the instance back (unless it panicked) and the result.
async fn attempt_on(
    runtime: &Arc<dyn ErasedCall>,
    mut st: StageBox,
    replica: usize,
    inputs: BatchInputs,
) -> (Option<StageBox>, AttemptResult) {
    match runtime.execution() {
        Execution::Blocking => {
            let r = runtime.clone();
            let run = tokio::task::spawn_blocking(move || {
                let out = catch_unwind(AssertUnwindSafe(|| r.run_blocking(&mut st, replica, inputs)));
                (st, out)
            })
            .await;
            match run {
                Ok((st, Ok(out))) => (Some(st), out),
                Ok((_, Err(p))) => (None, Err(panicked(&p))),
                Err(e) => (None, Err(AttemptError::Panicked(format!("stage panicked: {e}")))),
            }
        }
        Execution::Async => {
            let fut = catch_unwind(AssertUnwindSafe(|| runtime.run_async(&st, replica, inputs)));
            let run = match fut {
                Ok(fut) => AssertUnwindSafe(fut).catch_unwind().await,
                Err(p) => Err(p),
            };
            match run {
                Ok(out) => (Some(st), out),
                Err(p) => (None, Err(panicked(&p))),
            }
        }
    }
}
