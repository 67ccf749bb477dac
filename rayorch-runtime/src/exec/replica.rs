//! Replica pools: blocking replicas on their own OS threads, async replicas
//! as one shared instance whose attempts are tokio tasks.
//!
//! Invariants:
//! - Every attempt the driver starts ends in exactly one [`Event::Done`] for
//!   its batch, or is given up by the driver (timeout, cancellation), which
//!   then reports the failure itself. A panic anywhere in a stage (the
//!   synchronous part of an async `run`, its future, a blocking `run`) is
//!   caught where it happens and becomes a failed attempt with `dead` set.
//! - A slot's `incarnation` changes each time its replica is (re)started.
//!   Events carry the incarnation they were sent for; one from an abandoned
//!   replica only reaches the engine, whose commit gate decides.
//! - Nothing blocking runs on the async runtime: blocking factories and
//!   stages run on the replica's own thread; async factories run under
//!   `spawn_blocking`.

use std::collections::HashMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::mpsc as std_mpsc;
use std::time::Duration;

use futures::FutureExt;
use tokio::sync::mpsc::UnboundedSender;
use tokio::task::AbortHandle;
use tokio::time::Instant;

use crate::engine::{BatchId, Engine};
use crate::exec::backpressure::Backpressure;
use crate::exec::stage::{
    AttemptError, AttemptResult, BatchInputs, ErasedCall, Execution, StageBox, panic_text,
};
use crate::plan::Plan;

/// What replicas tell the driver.
pub(crate) enum Event {
    Initialised {
        pool: usize,
        slot: usize,
        incarnation: u64,
        result: Result<Option<StageBox>, String>,
    },
    Done {
        batch: BatchId,
        result: AttemptResult,
        /// The stage's state may be corrupt (it panicked, its thread is gone).
        dead: bool,
    },
}

struct Job {
    batch: BatchId,
    call: usize,
    inputs: BatchInputs,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum SlotState {
    Initialising,
    Ready,
}

struct Slot {
    incarnation: u64,
    state: SlotState,
    /// Attempts of this incarnation in flight.
    busy: usize,
    jobs: Option<std_mpsc::Sender<Job>>,
    stage: Option<Arc<StageBox>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

struct Pool {
    calls: Vec<usize>,
    execution: Execution,
    capacity: usize,
    slots: Vec<Slot>,
    next_call: usize,
}

/// One attempt in flight, as the driver tracks it.
pub(crate) struct Attempt {
    pub(crate) call: usize,
    pub(crate) pool: usize,
    pub(crate) slot: usize,
    pub(crate) incarnation: u64,
    pub(crate) size: usize,
    pub(crate) dispatched: Instant,
    pub(crate) deadline: Option<Instant>,
    abort: Option<AbortHandle>,
}

/// Every pool of a run and every attempt in flight.
pub(crate) struct Replicas {
    pools: Vec<Pool>,
    runtimes: Arc<Vec<Arc<dyn ErasedCall>>>,
    events: UnboundedSender<Event>,
    pub(crate) attempts: HashMap<BatchId, Attempt>,
    /// Replicas torn down and restarted, per Call.
    pub(crate) replaced: Vec<u64>,
    next_incarnation: u64,
    /// Holds producers whose consumers are behind (`Runner::backpressure`).
    pub(crate) backpressure: Option<Backpressure>,
    /// The pool of each Call.
    pool_of: Vec<usize>,
}

impl Replicas {
    pub(crate) fn new(plan: &Plan, events: UnboundedSender<Event>) -> Replicas {
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
                Execution::Async => spec.config.concurrency.max(1),
            };
            pool.capacity = pool.capacity.max(per_slot);
            while pool.slots.len() < spec.config.replicas.max(1) {
                pool.slots.push(Slot {
                    incarnation: 0,
                    state: SlotState::Initialising,
                    busy: 0,
                    jobs: None,
                    stage: None,
                    thread: None,
                });
            }
        }
        Replicas {
            pools,
            runtimes: Arc::new(calls.iter().map(|c| c.runtime.clone()).collect()),
            events,
            attempts: HashMap::new(),
            replaced: vec![0; calls.len()],
            next_incarnation: 1,
            backpressure: None,
            pool_of: calls.iter().map(|c| by_pool[&c.pool]).collect(),
        }
    }

    pub(crate) fn start_all(&mut self, plan: &Plan) {
        for p in 0..self.pools.len() {
            for s in 0..self.pools[p].slots.len() {
                self.start(plan, p, s);
            }
        }
    }

    /// The Call whose factory makes the pool's replicas.
    pub(crate) fn maker(&self, pool: usize) -> usize {
        self.pools[pool].calls[0]
    }

    pub(crate) fn initialising(&self) -> bool {
        self.pools
            .iter()
            .any(|p| p.slots.iter().any(|s| s.state == SlotState::Initialising))
    }

    /// The earliest deadline over every attempt in flight, blocking or async.
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        self.attempts.values().filter_map(|a| a.deadline).min()
    }

    /// Attempts whose deadline has passed.
    pub(crate) fn expired(&self, now: Instant) -> Vec<BatchId> {
        let mut ids: Vec<(Instant, BatchId)> = self
            .attempts
            .iter()
            .filter_map(|(id, a)| a.deadline.filter(|d| *d <= now).map(|d| (d, *id)))
            .collect();
        ids.sort_by_key(|(d, _)| *d);
        ids.into_iter().map(|(_, id)| id).collect()
    }

    /// A slot's replica came up (or failed to); `Err` carries the pool's
    /// maker Call and the factory's message.
    pub(crate) fn initialised(
        &mut self,
        pool: usize,
        slot: usize,
        incarnation: u64,
        result: Result<Option<StageBox>, String>,
    ) -> Result<(), (usize, String)> {
        let maker = self.maker(pool);
        let s = &mut self.pools[pool].slots[slot];
        if s.incarnation != incarnation {
            return Ok(()); // a replica already replaced again
        }
        let stage = result.map_err(|cause| (maker, cause))?;
        s.state = SlotState::Ready;
        s.stage = stage.map(Arc::new);
        Ok(())
    }

    /// Forget a finished attempt; restart its replica when it died.
    pub(crate) fn finish(&mut self, plan: &Plan, batch: BatchId, dead: bool) -> Option<Attempt> {
        let a = self.attempts.remove(&batch)?;
        let current = self.pools[a.pool].slots[a.slot].incarnation == a.incarnation;
        if current {
            let s = &mut self.pools[a.pool].slots[a.slot];
            s.busy = s.busy.saturating_sub(1);
            if dead {
                self.replaced[a.call] += 1;
                self.start(plan, a.pool, a.slot);
            }
        }
        Some(a)
    }

    /// Give up on an attempt past its deadline: drop its task (async) or
    /// abandon its thread (blocking), and restart the replica.
    pub(crate) fn time_out(&mut self, plan: &Plan, batch: BatchId) -> Option<Attempt> {
        let a = self.attempts.get(&batch)?;
        if let Some(h) = &a.abort {
            h.abort();
        }
        self.finish(plan, batch, true)
    }

    /// Hand ready batches to every free replica; calls `seen` for each one
    /// and returns how many went out.
    pub(crate) fn dispatch(
        &mut self,
        plan: &Plan,
        engine: &mut Engine,
        mut seen: impl FnMut(&Engine, &crate::engine::Batch, bool),
    ) -> usize {
        let mut sent = 0;
        for p in 0..self.pools.len() {
            for s in 0..self.pools[p].slots.len() {
                loop {
                    let pool = &self.pools[p];
                    let slot = &pool.slots[s];
                    if slot.state != SlotState::Ready || slot.busy >= pool.capacity {
                        break;
                    }
                    let Some((batch, mixed)) = self.reserve_for_pool(plan, engine, p) else {
                        break;
                    };
                    seen(engine, &batch, mixed);
                    self.send(plan, p, s, batch);
                    sent += 1;
                }
            }
        }
        sent
    }

    fn reserve_for_pool(
        &mut self,
        plan: &Plan,
        engine: &mut Engine,
        p: usize,
    ) -> Option<(crate::engine::Batch, bool)> {
        let n = self.pools[p].calls.len();
        for i in 0..n {
            let k = (self.pools[p].next_call + i) % n;
            let c = self.pools[p].calls[k];
            if !engine.may_have_ready(c) || self.held(plan, engine, c) {
                continue;
            }
            let mixed_before = engine.call_stats(c).mixed_parent_batches;
            let b = plan.calls()[c].config.batch_size;
            if let Some(batch) = engine.reserve(c, b) {
                self.pools[p].next_call = (k + 1) % n;
                let mixed = engine.call_stats(c).mixed_parent_batches > mixed_before;
                return Some((batch, mixed));
            }
        }
        None
    }

    /// Is Call `c` held by backpressure (see `backpressure.rs`)?
    fn held(&self, plan: &Plan, engine: &Engine, c: usize) -> bool {
        self.backpressure.as_ref().is_some_and(|bp| {
            bp.held(plan, engine, c, |d| {
                self.pools[self.pool_of[d]]
                    .slots
                    .iter()
                    .any(|s| s.busy > 0 || s.state == SlotState::Initialising)
            })
        })
    }

    fn send(&mut self, plan: &Plan, p: usize, s: usize, batch: crate::engine::Batch) {
        let call = batch.call;
        let now = Instant::now();
        let timeout = plan.calls()[call].config.timeout;
        let execution = self.pools[p].execution;
        let slot = &mut self.pools[p].slots[s];
        slot.busy += 1;
        let mut attempt = Attempt {
            call,
            pool: p,
            slot: s,
            incarnation: slot.incarnation,
            size: batch.grains.len(),
            dispatched: now,
            deadline: timeout.map(|t| now + t),
            abort: None,
        };
        let id = batch.id;
        match execution {
            Execution::Blocking => {
                let job = Job {
                    batch: id,
                    call,
                    inputs: batch.inputs,
                };
                if let Some(Err(_)) = slot.jobs.as_ref().map(|tx| tx.send(job)) {
                    // The thread is gone (it panicked between batches): fail
                    // this attempt so its Grains retry on a fresh replica.
                    let _ = self.events.send(Event::Done {
                        batch: id,
                        result: Err(AttemptError::Failed("replica thread exited".into())),
                        dead: true,
                    });
                }
            }
            Execution::Async => {
                let stage = slot.stage.clone().expect("a ready async slot holds its stage");
                let events = self.events.clone();
                // The synchronous part of the stage's `run` executes here,
                // its future in a task; a panic in either is this attempt's
                // failure, never the driver's. (The instance is `Send` but
                // not `Sync`, so the call cannot move into the task.)
                let fut = catch_unwind(AssertUnwindSafe(|| {
                    self.runtimes[call].run_async(&stage, s, batch.inputs)
                }));
                let task = tokio::spawn(async move {
                    let run = match fut {
                        Ok(fut) => AssertUnwindSafe(fut).catch_unwind().await,
                        Err(p) => Err(p),
                    };
                    let (result, dead) = match run {
                        Ok(r) => (r, false),
                        Err(p) => (Err(panicked(&p)), true),
                    };
                    let _ = events.send(Event::Done {
                        batch: id,
                        result,
                        dead,
                    });
                });
                attempt.abort = Some(task.abort_handle());
            }
        }
        self.attempts.insert(id, attempt);
    }

    /// (Re)start the replica in slot `s` of pool `p` with a new incarnation;
    /// an old thread is abandoned (its late reports are refused).
    fn start(&mut self, plan: &Plan, p: usize, s: usize) {
        let incarnation = self.next_incarnation;
        self.next_incarnation += 1;
        let maker = self.pools[p].calls[0];
        let execution = self.pools[p].execution;
        let slot = &mut self.pools[p].slots[s];
        slot.incarnation = incarnation;
        slot.state = SlotState::Initialising;
        slot.busy = 0;
        slot.stage = None;
        slot.jobs = None; // the old thread's queue closes: it exits when done
        let events = self.events.clone();
        let runtimes = self.runtimes.clone();
        match execution {
            Execution::Blocking => {
                let (jtx, jrx) = std_mpsc::channel::<Job>();
                slot.jobs = Some(jtx);
                let name = format!("rayorch-{}-{s}", plan.calls()[maker].name);
                let thread = std::thread::Builder::new()
                    .name(name)
                    .spawn(move || replica_thread(runtimes, maker, p, s, incarnation, jrx, events));
                match thread {
                    Ok(h) => {
                        if let Some(old) = slot.thread.replace(h)
                            && old.is_finished()
                        {
                            let _ = old.join();
                        }
                    }
                    Err(e) => {
                        let _ = self.events.send(Event::Initialised {
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

    /// End of run: close every queue, drop async attempts, join the replica
    /// threads that are idle (a thread mid-batch is left to finish alone).
    /// `settle`: the run ended normally, so also wait for replicas still
    /// initialising (no model load outlives `run`); after an error or a
    /// cancellation they are left alone (a factory may be what hangs).
    pub(crate) fn shutdown(&mut self, settle: bool) {
        for a in self.attempts.values() {
            if let Some(h) = &a.abort {
                h.abort();
            }
        }
        let busy: Vec<(usize, usize)> = self.attempts.values().map(|a| (a.pool, a.slot)).collect();
        for (p, pool) in self.pools.iter_mut().enumerate() {
            for (s, slot) in pool.slots.iter_mut().enumerate() {
                slot.jobs = None;
                if let Some(h) = slot.thread.take()
                    && !busy.contains(&(p, s))
                    && (settle || slot.state == SlotState::Ready)
                {
                    let _ = h.join();
                }
            }
        }
    }
}

fn panicked(p: &Box<dyn std::any::Any + Send>) -> AttemptError {
    AttemptError::Failed(format!("stage panicked: {}", panic_text(p)))
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
    let initialised = |result| {
        let _ = events.send(Event::Initialised {
            pool,
            slot,
            incarnation,
            result,
        });
    };
    let mut stage = match init_stage(&*runtimes[maker]) {
        Ok(stage) => {
            initialised(Ok(None));
            stage
        }
        Err(e) => return initialised(Err(e)),
    };
    while let Ok(job) = jobs.recv() {
        let run = catch_unwind(AssertUnwindSafe(|| {
            runtimes[job.call].run_blocking(&mut stage, slot, job.inputs)
        }));
        let (result, dead) = match run {
            Ok(r) => (r, false),
            Err(p) => (Err(panicked(&p)), true),
        };
        let _ = events.send(Event::Done {
            batch: job.batch,
            result,
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
        Err(panic) => Err(format!("the factory panicked: {}", panic_text(&panic))),
    }
}

/// The text of a timeout, as the attempt's failure reports it.
pub(crate) fn timed_out(t: Option<Duration>) -> AttemptError {
    AttemptError::Failed(format!("attempt timed out after {:?}", t.unwrap_or_default()))
}
