//! A deterministic, seeded executor for tests: the schedule is the variable.
//!
//! It drives the [`Engine`] exactly as a real executor would (admit, reserve,
//! run, report) but chooses every scheduling decision from a seeded RNG:
//! which Call dispatches next, the batch size (1..=B), how many replicas a
//! Call has, which in-flight batch completes next, whether an attempt crashes
//! after running, whether a report arrives twice, and whether an attempt is
//! "timed out" so that its real report arrives late and must be refused.
//! Blocking stages run synchronously at dispatch; their reports are
//! delivered later, in random order. Async stages start at dispatch as tasks
//! on a current-thread tokio runtime whose clock is paused, and progress
//! together whenever the executor waits for one of them: their sleeps,
//! timeouts and `yield_now`s are real tokio timers and yields, resolved in
//! deadline order without waiting on the wall clock. The same seed always
//! yields the same run.
//!
//! Injected crashes and timeouts stand for transient faults that retries
//! absorb, so they hit only Calls whose recovery retries ([`Recovery::RetryBatch`],
//! [`Recovery::RetryTail`]); under `Isolate` or `Abort` a transient fault
//! would rightly change the result. Duplicate reports hit every Call.
//!
//! Each replica slot runs one batch at a time, async ones included (a Call's
//! `concurrency` is not modelled; the drawn replica counts give parallel
//! attempts). A Call's `timeout` applies to async attempts, on the paused
//! clock; a blocking stage cannot be preempted here.
//!
//! The simulator is a backend of the run loop every executor uses
//! (`run_loop.rs`): admission, delivery, duplicate keys and stall detection
//! are the Runner's, only the schedule is drawn.
//!
//! `run` must not be called from inside a tokio runtime when the plan has an
//! async Call: it drives them on a runtime of its own.

use std::panic::{AssertUnwindSafe, catch_unwind};

use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::engine::{Batch, BatchId, CallStats, Engine, EngineConfig, EngineStats, EntityPath, RootOutcome};
use crate::error::RunError;
use crate::exec::control::ControlState;
use crate::exec::run_loop::{Backend, Dispatch, Finished, LoopConfig, Report, run_ended};
use crate::exec::sink::Callback;
use crate::plan::Plan;
use crate::plan::call::Recovery;
use crate::stage::{AttemptError, AttemptResult, BoxFuture, Execution, StageBox, panic_text, paused_runtime};
use crate::value::Value;

/// How the simulated schedule is drawn.
#[derive(Clone, Debug)]
pub struct SimConfig {
    /// RNG seed.
    pub seed: u64,
    /// Draw each batch size from 1..=B instead of always B.
    pub random_batches: bool,
    /// Override every Call's batch size B.
    pub batch_size: Option<usize>,
    /// Replicas per Call: drawn from 1..=this when set, else the Call's own.
    pub max_replicas: Option<usize>,
    /// Complete in-flight batches in random order (else oldest first), and
    /// interleave dispatches and completions at random.
    pub random_order: bool,
    /// Probability that an attempt of a retrying Call crashes after running
    /// its stage.
    pub crash_rate: f64,
    /// Probability that an attempt of a retrying Call is declared timed out
    /// and its real report is delivered later (it must be refused by the
    /// commit gate).
    pub timeout_rate: f64,
    /// Probability that a report is delivered twice.
    pub duplicate_rate: f64,
    /// Admission window.
    pub window: usize,
    /// Record the Entity paths of every batch.
    pub record_rpcs: bool,
}

impl SimConfig {
    /// Plain sequential execution: batches of B, the Calls' replica counts,
    /// oldest batch first, no faults.
    pub fn sequential() -> SimConfig {
        SimConfig {
            seed: 1,
            random_batches: false,
            batch_size: None,
            max_replicas: None,
            random_order: false,
            crash_rate: 0.0,
            timeout_rate: 0.0,
            duplicate_rate: 0.0,
            window: 1 << 20,
            record_rpcs: true,
        }
    }

    /// A fully random legal schedule for `seed`, with faults that retries
    /// absorb (on the Calls that retry).
    pub fn random(seed: u64) -> SimConfig {
        let mut rng = Rng::new(seed);
        SimConfig {
            seed,
            random_batches: true,
            batch_size: Some(1 + rng.below(64) as usize),
            max_replicas: Some(1 + rng.below(8) as usize),
            random_order: true,
            crash_rate: 0.05,
            timeout_rate: 0.03,
            duplicate_rate: 0.05,
            window: 1 + rng.below(16) as usize,
            record_rpcs: false,
        }
    }

    /// The same schedule without crashes, timeouts and duplicates.
    #[must_use]
    pub fn without_faults(mut self) -> SimConfig {
        self.crash_rate = 0.0;
        self.timeout_rate = 0.0;
        self.duplicate_rate = 0.0;
        self
    }
}

/// What a simulated run produced.
#[derive(Debug)]
pub struct SimRun {
    /// Root outcomes in completion order.
    pub outcomes: Vec<RootOutcome>,
    /// Per Call, the Entity paths of each dispatched batch (when recorded).
    pub rpcs: Vec<Vec<Vec<EntityPath>>>,
    /// Per Call, how many times its stage ran.
    pub stage_runs: Vec<u64>,
    /// Engine counters.
    pub stats: EngineStats,
    /// Per-Call counters.
    pub call_stats: Vec<CallStats>,
}

impl SimRun {
    /// Outcomes sorted by root key.
    pub fn by_key(&self) -> Vec<&RootOutcome> {
        let mut v: Vec<&RootOutcome> = self.outcomes.iter().collect();
        v.sort_by_key(|o| o.key);
        v
    }
}

/// SplitMix64: small, fast, and good enough for schedules.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// Seeded generator.
    pub fn new(seed: u64) -> Rng {
        Rng(seed ^ 0x2545_f491_4f6c_dd1d)
    }

    /// Next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }

    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        p > 0.0 && ((self.next_u64() >> 11) as f64 / (1u64 << 53) as f64) < p
    }
}

/// An attempt's result: known at dispatch (blocking stages, and async ones
/// that failed before returning a future), or an async task still running.
enum Pending {
    Ready(AttemptResult),
    Task(JoinHandle<AttemptResult>),
}

struct InFlight {
    id: BatchId,
    call: usize,
    replica: usize,
    size: usize,
    dispatched: Instant,
    result: Pending,
    /// The injected crash: the attempt fails whatever its stage returns.
    crashed: bool,
}

/// The simulator's backend: every scheduling choice drawn from the seed.
struct SimBackend {
    plan: Plan,
    cfg: SimConfig,
    rng: Rng,
    /// Calls whose recovery retries (the only ones injected faults hit).
    retrying: Vec<bool>,
    /// Per Call, its replica slots: a stage instance once one is made.
    stages: Vec<Vec<Option<StageBox>>>,
    busy: Vec<Vec<bool>>,
    rpcs: Vec<Vec<Vec<EntityPath>>>,
    stage_runs: Vec<u64>,
    flight: Vec<InFlight>,
    /// Real reports of attempts declared timed out, delivered later.
    late: Vec<(BatchId, AttemptResult)>,
}

/// Run `plan` over typed `inputs` (root key, value) under the schedule `cfg`:
/// the way a pipeline's own tests use the seeded executor. `rayorch::sim`
/// is there with the `sim` feature only (for a pipeline's tests:
/// `rayorch = { version = "…", features = ["sim"] }` in `[dev-dependencies]`).
///
/// ```
/// use rayorch::prelude::*;
/// use rayorch::sim; // feature `sim`
///
/// #[derive(Domain)]
/// struct Doc;
///
/// struct Lengths {
///     len: FnCall<String, usize>,
/// }
///
/// #[pipeline]
/// impl Lengths {
///     fn forward(&self, docs: Port<Doc, String>) -> Port<Doc, usize> {
///         self.len(docs)
///     }
/// }
///
/// let (plan, out) = Lengths { len: Call::map("len", |s: String| s.len()) }.build_plan().unwrap();
/// let run = sim::run_typed(&plan, [(0, "abc".to_string())], &sim::SimConfig::random(7)).unwrap();
/// assert_eq!(run.by_key()[0].get(out).present(), Some(3));
/// ```
pub fn run_typed<T: crate::value::Data>(
    plan: &Plan,
    inputs: impl IntoIterator<Item = (u64, T)>,
    cfg: &SimConfig,
) -> Result<SimRun, RunError> {
    run(
        plan,
        inputs
            .into_iter()
            .map(|(k, v)| (k, std::sync::Arc::new(v) as Value)),
        cfg,
    )
}

/// Run `plan` over type-erased `inputs` (root key, value) under the schedule
/// `cfg` (see [`run_typed`] for typed inputs): the run loop every executor
/// uses, with this simulator as its backend.
pub fn run(
    plan: &Plan,
    inputs: impl IntoIterator<Item = (u64, Value)>,
    cfg: &SimConfig,
) -> Result<SimRun, RunError> {
    let mut rng = Rng::new(cfg.seed);
    let calls = plan.calls();
    let replica_count: Vec<usize> = calls
        .iter()
        .map(|c| match cfg.max_replicas {
            Some(m) => 1 + rng.below(m as u64) as usize,
            None => c.config.replicas,
        })
        .collect();
    let mut backend = SimBackend {
        plan: plan.clone(),
        cfg: cfg.clone(),
        rng,
        retrying: calls
            .iter()
            .map(|c| {
                matches!(
                    c.config.recovery,
                    Recovery::RetryBatch(_) | Recovery::RetryTail(_)
                )
            })
            .collect(),
        stages: replica_count
            .iter()
            .map(|&n| (0..n).map(|_| None).collect())
            .collect(),
        busy: replica_count.iter().map(|&n| vec![false; n]).collect(),
        rpcs: vec![Vec::new(); calls.len()],
        stage_runs: vec![0; calls.len()],
        flight: Vec::new(),
        late: Vec::new(),
    };
    let config = LoopConfig {
        engine: EngineConfig {
            window: cfg.window.max(1),
            seed: cfg.seed,
            ..EngineConfig::default()
        },
        backpressure: None,
        journal: None,
        // Tests compare every repeated key's outcome with the other backends.
        unique_keys: true,
    };
    let mut outcomes = Vec::new();
    let control = ControlState::default();
    let run = run_ended(
        plan,
        config,
        Callback::new(|o: &RootOutcome| outcomes.push(o.clone())),
        &mut backend,
        &control,
        None,
        futures::stream::iter(inputs),
    );
    // Async stages progress on a paused-clock runtime of our own; a plan of
    // blocking stages needs none (so it runs anywhere, inside a runtime too).
    let ended = if calls.iter().any(|c| c.runtime.execution() == Execution::Async) {
        paused_runtime().map_err(RunError::Runtime)?.block_on(run).0?
    } else {
        futures::executor::block_on(run).0?
    };
    Ok(SimRun {
        outcomes,
        rpcs: backend.rpcs,
        stage_runs: backend.stage_runs,
        stats: ended.stats,
        call_stats: ended.call_stats,
    })
}

impl SimBackend {
    /// Start one batch of Call `c` on its free replica `r`.
    fn start(&mut self, cx: &mut Dispatch<'_>, c: usize, r: usize, batch: Batch) -> Result<(), RunError> {
        let call = &self.plan.calls()[c];
        if self.cfg.record_rpcs {
            self.rpcs[c].push(
                batch
                    .grains
                    .iter()
                    .filter_map(|g| cx.engine().entity_path(g))
                    .collect(),
            );
        }
        if self.stages[c][r].is_none() {
            let stage = match catch_unwind(AssertUnwindSafe(|| call.runtime.spawn_stage())) {
                Ok(made) => made.map_err(|e| e.to_string()),
                Err(p) => Err(format!("the factory panicked: {}", panic_text(&p))),
            };
            self.stages[c][r] = Some(stage.map_err(|cause| RunError::ReplicaFactory {
                call: call.name.to_string(),
                stage: call.runtime.stage_name(),
                cause,
            })?);
        }
        self.stage_runs[c] += 1;
        let size = batch.grains.len();
        let stage = self.stages[c][r].as_mut().expect("spawned");
        let run = AssertUnwindSafe(|| match call.runtime.execution() {
            Execution::Blocking => Pending::Ready(call.runtime.run_blocking(stage, r, batch.inputs)),
            Execution::Async => {
                let fut = call.runtime.run_async(stage, r, batch.inputs);
                Pending::Task(tokio::spawn(with_timeout(fut, call.config.timeout)))
            }
        });
        let result = catch_unwind(run).unwrap_or_else(|p| {
            // The stage panicked (a blocking one, or an async one before
            // returning its future): its instance is replaced.
            self.stages[c][r] = None;
            Pending::Ready(Err(AttemptError::Panicked(format!(
                "stage panicked: {}",
                panic_text(&p)
            ))))
        });
        let crashed = self.rng.chance(self.cfg.crash_rate) && self.retrying[c];
        if crashed {
            self.stages[c][r] = None;
        }
        self.busy[c][r] = true;
        self.flight.push(InFlight {
            id: batch.id,
            call: c,
            replica: r,
            size,
            dispatched: Instant::now(),
            result,
            crashed,
        });
        Ok(())
    }
}

impl Backend for SimBackend {
    type Error = RunError;

    async fn start(&mut self, _: &Plan) -> Result<(), RunError> {
        Ok(())
    }

    async fn dispatch(&mut self, cx: &mut Dispatch<'_>) -> Result<(), RunError> {
        let calls = self.plan.calls().len();
        let mut refused = vec![false; calls];
        loop {
            let dispatchable: Vec<usize> = (0..calls)
                .filter(|&c| !refused[c] && cx.may_have_ready(c) && self.busy[c].iter().any(|b| !b))
                .collect();
            if dispatchable.is_empty() {
                return Ok(());
            }
            // Interleave dispatches and completions at random; in order,
            // dispatch all that can go before completing the oldest.
            if self.cfg.random_order && !self.flight.is_empty() && self.rng.chance(0.5) {
                return Ok(());
            }
            let pick = if self.cfg.random_order {
                self.rng.below(dispatchable.len() as u64) as usize
            } else {
                0
            };
            let c = dispatchable[pick];
            let b = self
                .cfg
                .batch_size
                .unwrap_or(self.plan.calls()[c].config.batch_size)
                .max(1);
            let size = if self.cfg.random_batches {
                1 + self.rng.below(b as u64) as usize
            } else {
                b
            };
            let busy = &self.busy;
            let Some((batch, _)) = cx.reserve(c, size, |d| busy[d].iter().any(|&x| x)) else {
                refused[c] = true;
                continue;
            };
            let r = self.busy[c].iter().position(|b| !b).expect("a free replica");
            self.start(cx, c, r, batch)?;
        }
    }

    fn in_flight(&self) -> bool {
        !self.flight.is_empty()
    }

    fn working(&self, c: usize) -> bool {
        self.busy[c].iter().any(|&b| b)
    }

    fn pending(&self, _: &Engine) -> bool {
        !self.late.is_empty()
    }

    async fn next(&mut self, out: &mut Vec<Report>) -> Result<(), RunError> {
        if self.flight.is_empty() {
            // Nothing runs: the late reports arrive now.
            out.extend(self.late.drain(..).map(|(id, r)| Report::Echo(id, r)));
            return Ok(());
        }
        let i = if self.cfg.random_order {
            self.rng.below(self.flight.len() as u64) as usize
        } else {
            0
        };
        // Wait for an async attempt in place (cancel-safe: the entry stays
        // until its result is in), letting the other tasks progress.
        let crashed = self.flight[i].crashed;
        if let Pending::Task(task) = &mut self.flight[i].result
            && !crashed
        {
            let result = match task.await {
                Ok(r) => r,
                Err(e) => {
                    let (c, r) = (self.flight[i].call, self.flight[i].replica);
                    self.stages[c][r] = None;
                    Err(match e.try_into_panic() {
                        Ok(p) => AttemptError::Panicked(format!("stage panicked: {}", panic_text(&p))),
                        Err(e) => AttemptError::Failed(format!("attempt cancelled: {e}")),
                    })
                }
            };
            self.flight[i].result = Pending::Ready(result);
        }
        let f = self.flight.remove(i);
        self.busy[f.call][f.replica] = false;
        let result = match f.result {
            _ if f.crashed => Err(AttemptError::Failed("simulated replica crash".into())),
            Pending::Ready(r) => r,
            Pending::Task(task) => {
                task.abort();
                Err(AttemptError::Failed("simulated replica crash".into()))
            }
        };
        let done = |result| {
            Report::Done(Finished {
                batch: f.id,
                call: f.call,
                size: f.size,
                replica: f.replica,
                dispatched: f.dispatched,
                result,
                replaced: f.crashed,
                worker: None,
            })
        };
        if result.is_ok() && self.retrying[f.call] && self.rng.chance(self.cfg.timeout_rate) {
            out.push(done(Err(AttemptError::TimedOut("simulated timeout".into()))));
            self.late.push((f.id, result));
        } else {
            let dup = self.rng.chance(self.cfg.duplicate_rate).then(|| result.clone());
            out.push(done(result));
            if let Some(d) = dup {
                out.push(Report::Echo(f.id, d));
            }
        }
        if !self.late.is_empty() && self.rng.chance(0.3) {
            let (id, r) = self
                .late
                .swap_remove(self.rng.below(self.late.len() as u64) as usize);
            out.push(Report::Echo(id, r));
        }
        Ok(())
    }

    async fn finish(&mut self, _: bool) {
        for f in self.flight.drain(..) {
            if let Pending::Task(task) = f.result {
                task.abort();
            }
        }
    }
}

/// An async attempt under the Call's time limit, measured on the runtime's
/// (paused) clock.
async fn with_timeout(fut: BoxFuture<AttemptResult>, limit: Option<std::time::Duration>) -> AttemptResult {
    match limit {
        Some(t) => tokio::time::timeout(t, fut)
            .await
            .unwrap_or_else(|_| Err(AttemptError::TimedOut(format!("attempt timed out after {t:?}")))),
        None => fut.await,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use super::*;
    use crate::{AsyncStage, Call, Item, Outcome, Output, Recovery, StageContext, StageResult, domain};

    domain!(Doc);

    /// Sleeps on tokio's clock (an hour for a batch holding 7, on its first
    /// attempt), yields, panics inside its future the first time a batch
    /// holds 13, then doubles.
    struct Slow {
        sevens: Arc<AtomicUsize>,
        thirteens: Arc<AtomicUsize>,
    }

    impl AsyncStage for Slow {
        type In = u64;
        type Out = u64;
        async fn run(self: Arc<Self>, batch: Vec<u64>, _cx: StageContext) -> StageResult<u64> {
            let mut pause = Duration::from_millis(batch.iter().sum::<u64>() % 50);
            if batch.contains(&7) && self.sevens.fetch_add(1, Ordering::SeqCst) == 0 {
                pause = Duration::from_secs(3600);
            }
            tokio::time::sleep(pause).await;
            tokio::task::yield_now().await;
            if batch.contains(&13) && self.thirteens.fetch_add(1, Ordering::SeqCst) == 0 {
                panic!("13 explodes once");
            }
            Ok(batch.into_iter().map(|x| Outcome::Ok(x * 2)).collect())
        }
    }

    fn slow_plan() -> (Plan, Output<u64>) {
        let sevens = Arc::new(AtomicUsize::new(0));
        let thirteens = Arc::new(AtomicUsize::new(0));
        let slow = Call::new_async("slow", move || {
            Ok(Slow {
                sevens: sevens.clone(),
                thirteens: thirteens.clone(),
            })
        })
        .batch_size(4)
        .timeout(Duration::from_secs(60))
        .recovery(Recovery::RetryBatch(100));
        Plan::build(|b| {
            let x = b.source::<Doc, u64>();
            b.output(slow.apply(x))
        })
        .unwrap()
    }

    fn inputs() -> Vec<(u64, Value)> {
        (0..20u64).map(|k| (k, Arc::new(k) as Value)).collect()
    }

    #[test]
    fn async_stages_sleep_yield_time_out_and_panic_on_paused_time_deterministically() {
        let cfgs = std::iter::once(SimConfig::sequential()).chain((0..12).map(SimConfig::random));
        for cfg in cfgs {
            let runs: Vec<Vec<(u64, Item<u64>)>> = (0..2)
                .map(|_| {
                    let (plan, out) = slow_plan();
                    let run = run(&plan, inputs(), &cfg).unwrap();
                    // The hour-long attempt timed out on tokio's clock, and
                    // the panicking one failed; both were retried.
                    assert!(run.call_stats[0].attempt_failures >= 2, "{cfg:?}");
                    run.outcomes.iter().map(|o| (o.key, o.get(out))).collect()
                })
                .collect();
            assert_eq!(runs[0], runs[1], "the same seed, the same run: {cfg:?}");
            let mut got = runs[0].clone();
            got.sort_by_key(|(k, _)| *k);
            let want: Vec<(u64, Item<u64>)> = (0..20).map(|k| (k, Item::Present(k * 2))).collect();
            assert_eq!(got, want, "{cfg:?}");
        }
    }

    #[test]
    fn inside_a_tokio_runtime_a_plan_with_async_calls_is_an_error_not_a_panic() {
        let (plan, _) = slow_plan();
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let got = rt.block_on(async { run(&plan, inputs(), &SimConfig::sequential()) });
        assert!(
            matches!(&got, Err(RunError::Runtime(m)) if m.contains("outside a tokio runtime")),
            "{got:?}"
        );
    }
}
