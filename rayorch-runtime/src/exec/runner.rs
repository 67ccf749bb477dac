//! The production executor: replica pools on OS threads and tokio, driven by
//! one async driver that owns the [`Engine`].
//!
//! Shape of a run:
//! - The driver (an async task) admits roots through the window, reserves
//!   batches, hands them to free replicas, and turns their reports into
//!   engine commits. Every finished root goes to the [`Sink`] at once.
//! - A blocking stage's replica is its own OS thread: the factory (model load)
//!   runs there, then batches, one at a time. Nothing blocking ever runs on
//!   the async reactor, so async stages keep progressing beside them.
//! - An async stage's replica is one shared instance with up to
//!   `concurrency` batches in flight as tokio tasks.
//! - Calls applied from one `Call` value share one pool of replicas.
//!
//! Failure handling: an `Err` or a panic is an attempt failure handled by the
//! Call's recovery policy. A panicking replica, or one still running when its
//! attempt times out, is abandoned and replaced by a freshly initialised one;
//! its in-flight Grains are retried at a higher generation, and if the old
//! replica reports later, the engine's commit gate refuses it (counted in
//! `rejected_reports`).

use std::collections::HashMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::mpsc as std_mpsc;
use std::time::{Duration, Instant};

use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};

use crate::engine::{BatchId, Engine, EngineConfig};
use crate::error::RunError;
use crate::exec::metrics::{CallMetrics, RunSummary, secs};
use crate::exec::sink::Sink;
use crate::exec::stage::{
    AttemptError, AttemptResult, BatchInputs, ErasedCall, Execution, StageBox, panic_text,
};
use crate::plan::Plan;
use crate::value::{Data, Value};

/// Runs a [`Plan`] over a source of roots, streaming outcomes to a sink.
///
/// ```
/// use rayorch_runtime::{domain, expand, reduce, Call, Plan, Runner, sink::Callback};
/// domain!(Doc);
/// domain!(Word: Doc);
/// let split = Call::map("split", |s: String| s.split(' ').map(String::from).collect::<Vec<_>>());
/// let len = Call::map("len", |w: String| w.len()).batch_size(8).replicas(2);
/// let (plan, out) = Plan::build(|b| {
///     let docs = b.source::<Doc, String>();
///     b.output(reduce(len.apply(expand::<Word, _, _>(split.apply(docs)))))
/// }).unwrap();
/// let mut lens = Vec::new();
/// let summary = Runner::new(&plan)
///     .run([(0, "a bb".to_string()), (1, "ccc".to_string())], Callback(|o: &rayorch_runtime::RootOutcome| {
///         lens.push((o.key, o.get(out).present().unwrap()));
///     }))
///     .unwrap();
/// lens.sort();
/// assert_eq!(lens, vec![(0, vec![1, 2]), (1, vec![3])]);
/// assert_eq!(summary.present, 2);
/// ```
pub struct Runner<'p> {
    plan: &'p Plan,
    window: usize,
    seed: u64,
}

impl<'p> Runner<'p> {
    /// A runner with a window of 64 roots.
    pub fn new(plan: &'p Plan) -> Self {
        Runner {
            plan,
            window: 64,
            seed: 0x5eed,
        }
    }

    /// At most `n` roots in flight; memory is bounded by it.
    pub fn window(mut self, n: usize) -> Self {
        self.window = n.max(1);
        self
    }

    /// Run on a fresh tokio runtime (do not call from inside one: use
    /// [`Runner::run_async`] there).
    pub fn run<T: Data>(
        &self,
        source: impl IntoIterator<Item = (u64, T)>,
        sink: impl Sink,
    ) -> Result<RunSummary, RunError> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .map_err(|e| RunError::Runtime(e.to_string()))?;
        rt.block_on(self.run_async(source, sink))
    }

    /// Run on the current tokio runtime.
    pub async fn run_async<T: Data>(
        &self,
        source: impl IntoIterator<Item = (u64, T)>,
        sink: impl Sink,
    ) -> Result<RunSummary, RunError> {
        let (tx, rx) = unbounded_channel();
        let mut d = Driver::new(self.plan, self.window, self.seed, sink, tx, rx);
        let result = d
            .run(source.into_iter().map(|(k, v)| (k, Arc::new(v) as Value)))
            .await;
        d.shutdown();
        let closed = d.sink.close().map_err(|e| RunError::Sink(e.to_string()));
        let summary = result?;
        closed?;
        Ok(summary)
    }
}

struct Job {
    batch: BatchId,
    call: usize,
    inputs: BatchInputs,
}

enum Event {
    Initialised {
        pool: usize,
        slot: usize,
        incarnation: u64,
        result: Result<Option<StageBox>, String>,
    },
    Done {
        pool: usize,
        slot: usize,
        incarnation: u64,
        batch: BatchId,
        call: usize,
        result: AttemptResult,
        started: Instant,
        ended: Instant,
        dead: bool,
    },
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum SlotState {
    Initialising,
    Ready,
}

struct Running {
    batch: BatchId,
    call: usize,
    deadline: Option<Instant>,
}

struct Slot {
    incarnation: u64,
    state: SlotState,
    jobs: Option<std_mpsc::Sender<Job>>,
    stage: Option<Arc<StageBox>>,
    running: Vec<Running>,
    thread: Option<std::thread::JoinHandle<()>>,
}

struct Pool {
    calls: Vec<usize>,
    execution: Execution,
    capacity: usize,
    slots: Vec<Slot>,
    next_call: usize,
}

struct Driver<'p, S: Sink> {
    plan: &'p Plan,
    engine: Engine,
    sink: S,
    pools: Vec<Pool>,
    runtimes: Arc<Vec<Arc<dyn ErasedCall>>>,
    tx: UnboundedSender<Event>,
    rx: UnboundedReceiver<Event>,
    start: Instant,
    first_root: Option<Duration>,
    timing: Vec<(Duration, Option<Duration>, Option<Duration>)>,
    replaced: Vec<u64>,
    next_incarnation: u64,
}

impl<'p, S: Sink> Driver<'p, S> {
    fn new(
        plan: &'p Plan,
        window: usize,
        seed: u64,
        sink: S,
        tx: UnboundedSender<Event>,
        rx: UnboundedReceiver<Event>,
    ) -> Self {
        let calls = plan.calls();
        let mut by_pool: HashMap<usize, usize> = HashMap::new();
        let mut pools: Vec<Pool> = Vec::new();
        for (c, spec) in calls.iter().enumerate() {
            let p = *by_pool.entry(spec.pool).or_insert_with(|| {
                pools.push(Pool {
                    calls: Vec::new(),
                    execution: spec.runtime.execution(),
                    capacity: 0,
                    slots: Vec::new(),
                    next_call: 0,
                });
                pools.len() - 1
            });
            let pool = &mut pools[p];
            pool.calls.push(c);
            let per_slot = match pool.execution {
                Execution::Blocking => 1,
                Execution::Async => spec.config.concurrency,
            };
            pool.capacity = pool.capacity.max(per_slot);
            while pool.slots.len() < spec.config.replicas {
                pool.slots.push(Slot {
                    incarnation: 0,
                    state: SlotState::Initialising,
                    jobs: None,
                    stage: None,
                    running: Vec::new(),
                    thread: None,
                });
            }
        }
        Driver {
            engine: Engine::new(plan, EngineConfig { window, seed }),
            sink,
            pools,
            runtimes: Arc::new(calls.iter().map(|c| c.runtime.clone()).collect()),
            tx,
            rx,
            start: Instant::now(),
            first_root: None,
            timing: vec![(Duration::ZERO, None, None); calls.len()],
            replaced: vec![0; calls.len()],
            next_incarnation: 1,
            plan,
        }
    }

    async fn run(&mut self, mut source: impl Iterator<Item = (u64, Value)>) -> Result<RunSummary, RunError> {
        self.start = Instant::now();
        for p in 0..self.pools.len() {
            for s in 0..self.pools[p].slots.len() {
                self.start_replica(p, s);
            }
        }
        let mut exhausted = false;
        loop {
            while !exhausted && self.engine.can_admit() {
                match source.next() {
                    Some((key, v)) => self.engine.admit(key, v)?,
                    None => exhausted = true,
                }
            }
            self.deliver()?;
            if let Some(e) = self.engine.aborted() {
                return Err(e.clone());
            }
            if exhausted && self.engine.live_roots() == 0 && !self.running() {
                // Batches still running belong to roots already handed out
                // (e.g. siblings of a failed parent); their reports will be
                // refused, but `run` returns only once no stage is mid-batch.
                break;
            }
            let dispatched = self.dispatch();
            let initialising = self
                .pools
                .iter()
                .any(|p| p.slots.iter().any(|s| s.state == SlotState::Initialising));
            if dispatched == 0 && self.engine.in_flight_batches() == 0 && !initialising {
                if let Some(s) = self.engine.stall() {
                    return Err(RunError::Stalled(s));
                }
                if self.engine.live_roots() > 0 {
                    continue;
                }
            }
            let deadline = self.next_deadline();
            let ev = match deadline {
                Some(d) => tokio::select! {
                    ev = self.rx.recv() => ev,
                    _ = tokio::time::sleep_until(d.into()) => None,
                },
                None => self.rx.recv().await,
            };
            if let Some(ev) = ev {
                self.handle(ev)?;
            }
            while let Ok(ev) = self.rx.try_recv() {
                self.handle(ev)?;
            }
            self.expire_timeouts();
        }
        Ok(self.summary())
    }

    fn deliver(&mut self) -> Result<(), RunError> {
        while let Some(o) = self.engine.pop_finished() {
            self.first_root.get_or_insert_with(|| self.start.elapsed());
            self.sink.root(&o).map_err(|e| RunError::Sink(e.to_string()))?;
        }
        Ok(())
    }

    /// Hand ready batches to every free replica; returns how many went out.
    fn dispatch(&mut self) -> usize {
        let mut sent = 0;
        for p in 0..self.pools.len() {
            for s in 0..self.pools[p].slots.len() {
                loop {
                    let pool = &self.pools[p];
                    let slot = &pool.slots[s];
                    if slot.state != SlotState::Ready || slot.running.len() >= pool.capacity {
                        break;
                    }
                    let Some(batch) = self.reserve_for_pool(p) else {
                        break;
                    };
                    self.send(p, s, batch);
                    sent += 1;
                }
            }
        }
        sent
    }

    fn reserve_for_pool(&mut self, p: usize) -> Option<crate::engine::Batch> {
        let n = self.pools[p].calls.len();
        for i in 0..n {
            let k = (self.pools[p].next_call + i) % n;
            let c = self.pools[p].calls[k];
            if !self.engine.may_have_ready(c) {
                continue;
            }
            let b = self.plan.calls()[c].config.batch_size;
            if let Some(batch) = self.engine.reserve(c, b) {
                self.pools[p].next_call = (k + 1) % n;
                return Some(batch);
            }
        }
        None
    }

    fn send(&mut self, p: usize, s: usize, batch: crate::engine::Batch) {
        let call = batch.call;
        let timeout = self.plan.calls()[call].config.timeout;
        let slot = &mut self.pools[p].slots[s];
        slot.running.push(Running {
            batch: batch.id,
            call,
            deadline: timeout.map(|t| Instant::now() + t),
        });
        match self.pools[p].execution {
            Execution::Blocking => {
                let job = Job {
                    batch: batch.id,
                    call,
                    inputs: batch.inputs,
                };
                let slot = &self.pools[p].slots[s];
                if let Some(Err(e)) = slot.jobs.as_ref().map(|tx| tx.send(job)) {
                    // The thread is gone (it panicked between batches): fail
                    // this attempt so its Grains retry on a fresh replica.
                    let job = e.0;
                    let _ = self.tx.send(Event::Done {
                        pool: p,
                        slot: s,
                        incarnation: slot.incarnation,
                        batch: job.batch,
                        call,
                        result: Err(AttemptError::Failed("replica thread exited".into())),
                        started: Instant::now(),
                        ended: Instant::now(),
                        dead: true,
                    });
                }
            }
            Execution::Async => {
                let slot = &self.pools[p].slots[s];
                let stage = slot.stage.clone().expect("a ready async slot holds its stage");
                let rt = self.runtimes[call].clone();
                let tx = self.tx.clone();
                let incarnation = slot.incarnation;
                let id = batch.id;
                let started = Instant::now();
                // The future owns what it needs (the stage's shared instance).
                let fut = rt.run_async(&stage, s, batch.inputs);
                tokio::spawn(async move {
                    let result = match timeout {
                        Some(t) => match tokio::time::timeout(t, fut).await {
                            Ok(r) => r,
                            Err(_) => Err(AttemptError::Failed(format!("attempt timed out after {t:?}"))),
                        },
                        None => fut.await,
                    };
                    let _ = tx.send(Event::Done {
                        pool: p,
                        slot: s,
                        incarnation,
                        batch: id,
                        call,
                        result,
                        started,
                        ended: Instant::now(),
                        dead: false,
                    });
                });
            }
        }
    }

    fn handle(&mut self, ev: Event) -> Result<(), RunError> {
        match ev {
            Event::Initialised {
                pool,
                slot,
                incarnation,
                result,
            } => {
                let s = &mut self.pools[pool].slots[slot];
                if s.incarnation != incarnation {
                    return Ok(());
                }
                match result {
                    Ok(stage) => {
                        s.state = SlotState::Ready;
                        s.stage = stage.map(Arc::new);
                    }
                    Err(cause) => {
                        let c = self.pools[pool].calls[0];
                        return Err(RunError::ReplicaInit {
                            call: self.plan.calls()[c].name.to_string(),
                            cause,
                        });
                    }
                }
            }
            Event::Done {
                pool,
                slot,
                incarnation,
                batch,
                call,
                result,
                started,
                ended,
                dead,
            } => {
                let t = &mut self.timing[call];
                t.0 += ended.saturating_duration_since(started);
                let from = started.saturating_duration_since(self.start);
                let to = ended.saturating_duration_since(self.start);
                t.1 = Some(t.1.map_or(from, |x| x.min(from)));
                t.2 = Some(t.2.map_or(to, |x| x.max(to)));
                let s = &mut self.pools[pool].slots[slot];
                if s.incarnation == incarnation {
                    s.running.retain(|r| r.batch != batch);
                    if dead {
                        self.replaced[call] += 1;
                        self.start_replica(pool, slot);
                    }
                }
                self.engine.report(batch, result);
            }
        }
        Ok(())
    }

    fn running(&self) -> bool {
        self.pools
            .iter()
            .any(|p| p.slots.iter().any(|s| !s.running.is_empty()))
    }

    fn next_deadline(&self) -> Option<Instant> {
        self.pools
            .iter()
            .flat_map(|p| p.slots.iter())
            .flat_map(|s| s.running.iter())
            .filter_map(|r| r.deadline)
            .min()
    }

    /// Fail attempts past their deadline and replace their replicas.
    fn expire_timeouts(&mut self) {
        let now = Instant::now();
        for p in 0..self.pools.len() {
            if self.pools[p].execution == Execution::Async {
                continue; // async attempts time themselves out and report
            }
            for s in 0..self.pools[p].slots.len() {
                let expired: Vec<(BatchId, usize)> = self.pools[p].slots[s]
                    .running
                    .iter()
                    .filter(|r| r.deadline.is_some_and(|d| d <= now))
                    .map(|r| (r.batch, r.call))
                    .collect();
                if expired.is_empty() {
                    continue;
                }
                for (batch, call) in expired {
                    let t = self.plan.calls()[call].config.timeout.unwrap_or_default();
                    self.engine.report(
                        batch,
                        Err(AttemptError::Failed(format!("attempt timed out after {t:?}"))),
                    );
                    self.replaced[call] += 1;
                }
                self.start_replica(p, s);
            }
        }
    }

    /// (Re)start the replica in slot `s` of pool `p` with a new incarnation;
    /// an old thread is abandoned (its late reports are refused).
    fn start_replica(&mut self, p: usize, s: usize) {
        let incarnation = self.next_incarnation;
        self.next_incarnation += 1;
        let maker = self.pools[p].calls[0];
        let execution = self.pools[p].execution;
        let slot = &mut self.pools[p].slots[s];
        slot.incarnation = incarnation;
        slot.state = SlotState::Initialising;
        slot.running.clear();
        slot.stage = None;
        slot.jobs = None; // the old thread's queue closes: it exits when done
        let events = self.tx.clone();
        let runtimes = self.runtimes.clone();
        match execution {
            Execution::Blocking => {
                let (jtx, jrx) = std_mpsc::channel::<Job>();
                slot.jobs = Some(jtx);
                let name = format!("rayorch-{}-{s}", self.plan.calls()[maker].name);
                let handle = std::thread::Builder::new()
                    .name(name)
                    .spawn(move || replica_thread(runtimes, maker, p, s, incarnation, jrx, events));
                match handle {
                    Ok(h) => {
                        if let Some(old) = slot.thread.replace(h)
                            && old.is_finished()
                        {
                            let _ = old.join();
                        }
                    }
                    Err(e) => {
                        let _ = self.tx.send(Event::Initialised {
                            pool: p,
                            slot: s,
                            incarnation,
                            result: Err(format!("could not start a replica thread: {e}")),
                        });
                    }
                }
            }
            Execution::Async => {
                tokio::task::spawn_blocking(move || {
                    let result = init_stage(&*runtimes[maker]).map(Some);
                    let _ = events.send(Event::Initialised {
                        pool: p,
                        slot: s,
                        incarnation,
                        result,
                    });
                });
            }
        }
    }

    fn shutdown(&mut self) {
        for pool in &mut self.pools {
            for slot in &mut pool.slots {
                slot.jobs = None;
                if let Some(h) = slot.thread.take() {
                    // A replica with no attempt in flight exits as its queue
                    // closes; a hung, abandoned one is left to the OS.
                    if slot.running.is_empty() {
                        let _ = h.join();
                    }
                }
            }
        }
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
                let (busy, from, to) = self.timing[c];
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
                    busy_s: secs(busy),
                    window_start_s: from.map(secs),
                    window_end_s: to.map(secs),
                }
            })
            .collect();
        RunSummary {
            roots: st.roots_admitted,
            present: st.roots_present,
            dropped: st.roots_dropped,
            failed: st.roots_failed,
            suppressed: st.roots_suppressed,
            wall_s: secs(self.start.elapsed()),
            first_root_s: self.first_root.map(secs),
            rejected_reports: st.rejected_reports,
            calls,
        }
    }
}

fn replica_thread(
    runtimes: Arc<Vec<Arc<dyn ErasedCall>>>,
    maker: usize,
    pool: usize,
    slot: usize,
    incarnation: u64,
    jobs: std_mpsc::Receiver<Job>,
    events: UnboundedSender<Event>,
) {
    let (mut stage, result) = match init_stage(&*runtimes[maker]) {
        Ok(stage) => (stage, Ok(None)),
        Err(e) => {
            let _ = events.send(Event::Initialised {
                pool,
                slot,
                incarnation,
                result: Err(e),
            });
            return;
        }
    };
    let _ = events.send(Event::Initialised {
        pool,
        slot,
        incarnation,
        result,
    });
    while let Ok(job) = jobs.recv() {
        let started = Instant::now();
        let run = catch_unwind(AssertUnwindSafe(|| {
            runtimes[job.call].run_blocking(&mut stage, slot, job.inputs)
        }));
        let (result, dead) = match run {
            Ok(r) => (r, false),
            Err(p) => (
                Err(AttemptError::Failed(format!(
                    "stage panicked: {}",
                    panic_text(&p)
                ))),
                true,
            ),
        };
        let _ = events.send(Event::Done {
            pool,
            slot,
            incarnation,
            batch: job.batch,
            call: job.call,
            result,
            started,
            ended: Instant::now(),
            dead,
        });
        if dead {
            return; // the stage's state may be corrupt: never reuse it
        }
    }
}

/// Run a Call's factory, turning an error or a panic into the message a
/// replica-initialisation failure reports.
fn init_stage(runtime: &dyn ErasedCall) -> Result<StageBox, String> {
    match catch_unwind(AssertUnwindSafe(|| runtime.spawn_stage())) {
        Ok(Ok(stage)) => Ok(stage),
        Ok(Err(e)) => Err(e.to_string()),
        Err(panic) => Err(format!("factory panicked: {}", panic_text(&panic))),
    }
}
