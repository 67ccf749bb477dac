//! Replica pools, the [`Runner`](crate::Runner)'s backend of the run loop:
//! blocking replicas on their own OS threads, async replicas as one shared
//! instance whose attempts are tokio tasks ([`ReplicaBackend`]; the
//! distributed owner runs its own Calls on the same pools).
//!
//! Invariants:
//! - Every attempt the pool starts ends in exactly one [`Event::Done`] for
//!   its batch, or is given up (timeout, cancellation), and the backend
//!   then reports the failure itself. A panic anywhere in a stage (the
//!   synchronous part of an async `run`, its future, a blocking `run`) is
//!   caught where it happens and becomes a failed attempt with `dead` set.
//! - A slot's `incarnation` changes each time its replica is (re)started.
//!   Events carry the incarnation they were sent for; one from an abandoned
//!   replica only reaches the engine, whose commit gate decides.
//! - Nothing blocking runs on the async runtime: blocking factories and
//!   stages run on the replica's own thread; async factories run under
//!   `spawn_blocking`.
//! - A blocking attempt past its deadline abandons its thread (a thread
//!   cannot be stopped from outside): the thread is counted per Call and
//!   kept in its pool's `abandoned` list until it ends on its own. While a
//!   pool holds `max_abandoned_threads` live ones, a slot that times out is
//!   retired instead of restarted; a pool with every slot retired fails
//!   each batch it is given at once ([`AttemptError::Stopped`]), so hanging
//!   inputs cost a bounded number of threads and models, and the run ends.

use std::collections::HashMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::mpsc as std_mpsc;

use futures::FutureExt;
use tokio::sync::mpsc::UnboundedSender;
use tokio::task::AbortHandle;
use tokio::time::Instant;

use crate::engine::{Batch, BatchId};
use crate::error::RunError;
use crate::exec::run_loop::{Dispatch, Finished, Report, timed_out};
use crate::plan::Plan;
use crate::stage::quiet::{Quiet, quietly};
use crate::stage::{AttemptError, AttemptResult, BatchInputs, ErasedCall, Execution, StageBox, panic_text};

mod pool;

pub(crate) use pool::ReplicaBackend;
pub use pool::{ReplicaPool, run_attempt};

/// What replicas tell the run loop.
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
    /// A retry or a bisection step: a panic prints nothing (see
    /// `stage::quiet`).
    quiet: bool,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum SlotState {
    Initialising,
    Ready,
    /// Timed out while the pool's abandoned threads were at the cap: never
    /// restarted in this run.
    Retired,
}

struct Slot {
    incarnation: u64,
    state: SlotState,
    /// Attempts of this incarnation in flight.
    busy: usize,
    jobs: Option<std_mpsc::Sender<Job>>,
    stage: Option<StageBox>,
    thread: Option<std::thread::JoinHandle<()>>,
}

struct Pool {
    calls: Vec<usize>,
    execution: Execution,
    capacity: usize,
    slots: Vec<Slot>,
    next_call: usize,
    /// Threads given up on past a timeout, possibly still running.
    abandoned: Vec<std::thread::JoinHandle<()>>,
    /// The cap on live `abandoned` threads (the maker Call's config).
    max_abandoned: usize,
}

/// One attempt in flight, as the run loop tracks it.
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

impl Attempt {
    /// The loop's report of this attempt's end.
    fn finished(
        self,
        batch: BatchId,
        result: AttemptResult,
        replaced: bool,
        worker: Option<&str>,
    ) -> Finished {
        Finished {
            batch,
            call: self.call,
            size: self.size,
            replica: self.slot,
            dispatched: self.dispatched,
            result,
            replaced,
            worker: worker.map(String::from),
        }
    }
}

/// Every pool of a run and every attempt in flight.
pub(crate) struct Replicas {
    pools: Vec<Pool>,
    runtimes: Arc<Vec<Arc<dyn ErasedCall>>>,
    events: UnboundedSender<Event>,
    pub(crate) attempts: HashMap<BatchId, Attempt>,
    next_incarnation: u64,
    /// The pool of each Call (`None`: the Call runs elsewhere).
    pool_of: Vec<Option<usize>>,
    /// Threads abandoned by each Call's timed-out attempts.
    pub(crate) threads_abandoned: Vec<u64>,
}

/// A run dropped mid-way (its `run_async` future dropped, or a return by
/// `?` before `shutdown`) still stops its async attempts: a task whose
/// abort handle is dropped would run on. Blocking replica threads see their
/// queue closed with the pool and end after their current batch.
impl Drop for Replicas {
    fn drop(&mut self) {
        for a in self.attempts.values() {
            if let Some(h) = &a.abort {
                h.abort();
            }
        }
    }
}

impl Replicas {
    /// Pools for the Calls `serves` picks (all, for a local run), with the
    /// replicas `slots(c)` gives each (the Call's own count for a local run).
    pub(crate) fn new(
        plan: &Plan,
        events: UnboundedSender<Event>,
        serves: impl Fn(usize) -> Option<usize>,
    ) -> Replicas {
        let calls = plan.calls();
        let mut by_pool: HashMap<usize, usize> = HashMap::new();
        let mut pools: Vec<Pool> = Vec::new();
        let mut pool_of = vec![None; calls.len()];
        for (c, spec) in calls.iter().enumerate() {
            let Some(replicas) = serves(c) else { continue };
            let p = *by_pool.entry(spec.pool).or_insert_with(|| {
                pools.push(Pool {
                    calls: Vec::new(),
                    execution: spec.runtime.execution(),
                    capacity: 0,
                    slots: Vec::new(),
                    next_call: 0,
                    abandoned: Vec::new(),
                    max_abandoned: spec.config.max_abandoned_threads,
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
            pool_of[c] = Some(p);
            while pool.slots.len() < replicas.max(1) {
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
            next_incarnation: 1,
            pool_of,
            threads_abandoned: vec![0; calls.len()],
        }
    }

    /// Does this process run Call `c`?
    pub(crate) fn serves(&self, c: usize) -> bool {
        self.pool_of[c].is_some()
    }

    /// Is Call `c` at work here: a batch running, or replicas starting?
    pub(crate) fn working(&self, c: usize) -> bool {
        self.pool_of[c].is_some_and(|p| {
            self.pools[p]
                .slots
                .iter()
                .any(|s| s.busy > 0 || s.state == SlotState::Initialising)
        })
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
        s.stage = stage;
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
                self.start(plan, a.pool, a.slot);
            }
        }
        Some(a)
    }

    /// Give up on an attempt past its deadline: drop its task (async) or
    /// abandon its thread (blocking), and restart the replica, or retire
    /// it when its pool's abandoned threads still running reach the cap.
    pub(crate) fn time_out(&mut self, plan: &Plan, batch: BatchId) -> Option<Attempt> {
        let a = self.attempts.get(&batch)?;
        if let Some(h) = &a.abort {
            h.abort();
            return self.finish(plan, batch, true);
        }
        let (p, s, call) = (a.pool, a.slot, a.call);
        let pool = &mut self.pools[p];
        if pool.slots[s].incarnation != a.incarnation {
            return self.finish(plan, batch, false);
        }
        if let Some(h) = pool.slots[s].thread.take() {
            self.threads_abandoned[call] += 1;
            pool.abandoned.push(h);
        }
        // Threads that ended on their own since are released.
        let (done, live): (Vec<_>, Vec<_>) = std::mem::take(&mut pool.abandoned)
            .into_iter()
            .partition(|h| h.is_finished());
        pool.abandoned = live;
        for h in done {
            let _ = h.join();
        }
        if pool.abandoned.len() < pool.max_abandoned {
            return self.finish(plan, batch, true);
        }
        let incarnation = self.next_incarnation;
        self.next_incarnation += 1;
        let slot = &mut pool.slots[s];
        slot.incarnation = incarnation;
        slot.state = SlotState::Retired;
        slot.busy = 0;
        slot.stage = None;
        slot.jobs = None; // the stuck thread exits if it ever returns
        self.attempts.remove(&batch)
    }

    /// Every slot of pool `p` retired: why its Calls run nothing more.
    fn stopped(&self, plan: &Plan, p: usize) -> Option<String> {
        let pool = &self.pools[p];
        if !pool.slots.iter().all(|s| s.state == SlotState::Retired) {
            return None;
        }
        let maker = &plan.calls()[pool.calls[0]];
        Some(format!(
            "Call `{}` stopped: {} of its replica threads are still stuck past its {:?} timeout, the cap (Call::max_abandoned_threads), so it runs nothing more in this run; find the inputs that hang (failures of kind timeout), then raise the Call's timeout or its cap",
            maker.name,
            pool.abandoned.len(),
            maker.config.timeout.unwrap_or_default(),
        ))
    }

    /// Fail every batch of pool `p`'s Calls the engine hands out, at once
    /// (the pool has no replica left).
    fn fail_stopped(&mut self, cx: &mut Dispatch<'_>, p: usize, why: &str) {
        let calls = self.pools[p].calls.clone();
        for c in calls {
            let b = cx.plan().calls()[c].config.batch_size;
            while let Some((batch, _)) = cx.reserve(c, b, |_| false) {
                let now = Instant::now();
                self.attempts.insert(
                    batch.id,
                    Attempt {
                        call: c,
                        pool: p,
                        slot: 0,
                        incarnation: 0, // no slot's: `finish` leaves the slots alone
                        size: batch.grains.len(),
                        dispatched: now,
                        deadline: None,
                        abort: None,
                    },
                );
                let _ = self.events.send(Event::Done {
                    batch: batch.id,
                    result: Err(AttemptError::Stopped(why.to_string())),
                    dead: false,
                });
            }
        }
    }

    /// Hand ready batches to every free replica; `also_working(d)`: Call `d`
    /// is at work elsewhere (for backpressure).
    pub(crate) fn dispatch(&mut self, cx: &mut Dispatch<'_>, also_working: &dyn Fn(usize) -> bool) {
        let plan = cx.plan().clone();
        for p in 0..self.pools.len() {
            if let Some(why) = self.stopped(&plan, p) {
                self.fail_stopped(cx, p, &why);
                continue;
            }
            for s in 0..self.pools[p].slots.len() {
                loop {
                    let pool = &self.pools[p];
                    let slot = &pool.slots[s];
                    if slot.state != SlotState::Ready || slot.busy >= pool.capacity {
                        break;
                    }
                    let Some(batch) = self.reserve_for_pool(cx, p, also_working) else {
                        break;
                    };
                    self.send(&plan, p, s, batch);
                }
            }
        }
    }

    /// The next batch of one of the pool's Calls, taking turns.
    fn reserve_for_pool(
        &mut self,
        cx: &mut Dispatch<'_>,
        p: usize,
        also_working: &dyn Fn(usize) -> bool,
    ) -> Option<Batch> {
        let n = self.pools[p].calls.len();
        let working: Vec<bool> = (0..self.pool_of.len())
            .map(|d| self.working(d) || also_working(d))
            .collect();
        for i in 0..n {
            let k = (self.pools[p].next_call + i) % n;
            let c = self.pools[p].calls[k];
            let b = cx.plan().calls()[c].config.batch_size;
            if let Some((batch, _)) = cx.reserve(c, b, |d| working[d]) {
                self.pools[p].next_call = (k + 1) % n;
                return Some(batch);
            }
        }
        None
    }

    fn send(&mut self, plan: &Plan, p: usize, s: usize, batch: Batch) {
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
        // A Grain seen before makes this a later attempt: its panic printed
        // already, at the first.
        let quiet = batch.grains.iter().any(|g| g.generation > 1);
        match execution {
            Execution::Blocking => {
                let job = Job {
                    batch: id,
                    call,
                    inputs: batch.inputs,
                    quiet,
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
                let stage = slot.stage.as_ref().expect("a ready async slot holds its stage");
                let events = self.events.clone();
                // The synchronous part of the stage's `run` executes here,
                // its future in a task; a panic in either is this attempt's
                // failure, never the run loop's. (The instance is `Send` but
                // not `Sync`, so the call cannot move into the task.)
                let fut = quietly(quiet, || {
                    catch_unwind(AssertUnwindSafe(|| {
                        self.runtimes[call].run_async(stage, s, batch.inputs)
                    }))
                });
                let task = tokio::spawn(async move {
                    let run = match fut {
                        Ok(fut) => AssertUnwindSafe(Quiet::new(fut, quiet)).catch_unwind().await,
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
    AttemptError::Panicked(format!("stage panicked: {}", panic_text(p)))
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
        let run = quietly(job.quiet, || {
            catch_unwind(AssertUnwindSafe(|| {
                runtimes[job.call].run_blocking(&mut stage, slot, job.inputs)
            }))
        });
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

/// Handles one replica event: a replica came up (a failed factory ends the
/// run), or an attempt ended (its report, or an echo for an attempt given
/// up before).
pub(crate) fn on_event(
    replicas: &mut Replicas,
    plan: &Plan,
    ev: Event,
    out: &mut Vec<Report>,
    worker: Option<&str>,
) -> Result<(), RunError> {
    match ev {
        Event::Initialised {
            pool,
            slot,
            incarnation,
            result,
        } => replicas
            .initialised(pool, slot, incarnation, result)
            .map_err(|(c, cause)| {
                let spec = &plan.calls()[c];
                RunError::ReplicaFactory {
                    call: spec.name.to_string(),
                    stage: spec.runtime.stage_name(),
                    cause,
                }
            }),
        Event::Done { batch, result, dead } => {
            match replicas.finish(plan, batch, dead) {
                Some(a) => out.push(Report::Done(a.finished(batch, result, dead, worker))),
                // An attempt given up before (timed out): its report still
                // goes to the engine, whose gate refuses it.
                None => out.push(Report::Echo(batch, result)),
            }
            Ok(())
        }
    }
}

/// Attempts past their deadline: given up, their replicas replaced, each a
/// timed-out report.
pub(crate) fn expire(
    replicas: &mut Replicas,
    plan: &Plan,
    now: Instant,
    out: &mut Vec<Report>,
    worker: Option<&str>,
) {
    for batch in replicas.expired(now) {
        if let Some(a) = replicas.time_out(plan, batch) {
            // A slot retired past the stuck-thread cap was not replaced.
            let replaced = replicas.pools[a.pool].slots[a.slot].state != SlotState::Retired;
            let result = Err(timed_out(plan.calls()[a.call].config.timeout));
            out.push(Report::Done(a.finished(batch, result, replaced, worker)));
        }
    }
}
