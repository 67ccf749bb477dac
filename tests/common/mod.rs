//! Helpers shared by the integration tests.
#![allow(
    dead_code,
    reason = "each test binary (contract, runner, plan) uses some of the helpers"
)]

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use rayorch::sim::{self, SimConfig, SimRun};
use rayorch::spi::{
    AttemptError, AttemptResult, Batch, BatchId, Engine, EngineConfig, EngineStats, ErasedOutcome, Execution,
    ReportOutcome, StageBox, Value,
};
use rayorch::{Data, EntityPath, Item, Outcome, Output, Plan, RootOutcome};

/// Inputs keyed by their position.
pub(crate) fn keyed<T: Send + Sync + 'static>(xs: impl IntoIterator<Item = T>) -> Vec<(u64, Value)> {
    xs.into_iter()
        .enumerate()
        .map(|(i, x)| (i as u64, Arc::new(x) as Value))
        .collect()
}

/// Run sequentially and return the typed output per root, in key order.
pub(crate) fn run_seq<I: Send + Sync + 'static, T: rayorch::Data>(
    plan: &Plan,
    out: Output<T>,
    inputs: impl IntoIterator<Item = I>,
) -> (Vec<Item<T>>, SimRun) {
    run_with(plan, out, inputs, &SimConfig::sequential())
}

/// Run under `cfg` and return the typed output per root, in key order.
pub(crate) fn run_with<I: Send + Sync + 'static, T: rayorch::Data>(
    plan: &Plan,
    out: Output<T>,
    inputs: impl IntoIterator<Item = I>,
    cfg: &SimConfig,
) -> (Vec<Item<T>>, SimRun) {
    let run = sim::run(plan, keyed(inputs), cfg).expect("run completes");
    assert_clean(&run.stats);
    let items = run.by_key().iter().map(|o| o.get(out)).collect();
    (items, run)
}

/// Message texts of non-present items, for compact assertions.
pub(crate) fn cause_text<T>(i: &Item<T>) -> Option<&str> {
    i.cause().map(|c| c.message())
}

/// The two counters that are bugs whenever they move.
pub(crate) fn assert_clean(stats: &EngineStats) {
    assert_eq!(
        stats.invalid_transitions, 0,
        "invalid Grain transitions: {stats:?}"
    );
    assert_eq!(stats.conflicts, 0, "conflicting publications: {stats:?}");
}

/// The index of the Call named `name` in `plan`.
pub(crate) fn call_index(plan: &Plan, name: &str) -> usize {
    plan.calls()
        .iter()
        .position(|c| &*c.name == name)
        .unwrap_or_else(|| panic!("no Call named `{name}`"))
}

/// An Entity path: root key, then ordinals.
pub(crate) fn path(root: u64, ordinals: &[u32]) -> EntityPath {
    EntityPath {
        root,
        ordinals: ordinals.to_vec(),
    }
}

/// The root keys of each recorded batch of Call `c` (root-Domain Calls).
pub(crate) fn rpc_keys(run: &SimRun, c: usize) -> Vec<Vec<u64>> {
    run.rpcs[c]
        .iter()
        .map(|b| b.iter().map(|p| p.root).collect())
        .collect()
}

/// A successful single-output outcome, as a stage's erased report carries it.
pub(crate) fn ok<T: Data>(v: T) -> ErasedOutcome {
    Outcome::Ok(std::iter::once(Arc::new(v) as Value).collect())
}

/// The values a batch carries in input slot `slot` (present inputs only).
pub(crate) fn input_values<T: Data>(b: &Batch, slot: usize) -> Vec<T> {
    b.inputs
        .iter()
        .map(|g| {
            g[slot]
                .as_ref()
                .and_then(|v| v.downcast_ref::<T>())
                .cloned()
                .expect("present input of the expected type")
        })
        .collect()
}

/// One dispatch as a [`HandDriver`] saw it.
#[derive(Clone, Debug)]
pub(crate) struct Dispatch {
    pub(crate) call: usize,
    pub(crate) paths: Vec<EntityPath>,
    pub(crate) generations: Vec<u32>,
}

/// A current-thread tokio runtime with a paused clock: an async stage's
/// sleeps and timeouts resolve in deadline order at once, the same on every
/// machine however loaded.
pub(crate) fn paused_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("a current-thread runtime starts")
}

/// Drives an [`Engine`] by hand: one replica per Call, stages run inline (an
/// async stage's future to completion on a paused-time tokio runtime), and
/// every dispatch is logged. Tests use it where the checklist fixes an exact
/// interleaving that a seeded executor would only hit by chance.
pub(crate) struct HandDriver {
    pub(crate) plan: Plan,
    pub(crate) eng: Engine,
    replicas: Vec<Option<StageBox>>,
    /// Made on the first async batch.
    rt: Option<tokio::runtime::Runtime>,
    pub(crate) log: Vec<Dispatch>,
    pub(crate) finished: Vec<RootOutcome>,
}

impl HandDriver {
    pub(crate) fn new(plan: &Plan) -> HandDriver {
        HandDriver {
            plan: plan.clone(),
            eng: Engine::new(
                plan,
                EngineConfig {
                    window: 1 << 16,
                    seed: 7,
                    ..EngineConfig::default()
                },
            ),
            replicas: plan.calls().iter().map(|_| None).collect(),
            rt: None,
            log: Vec::new(),
            finished: Vec::new(),
        }
    }

    pub(crate) fn call(&self, name: &str) -> usize {
        call_index(&self.plan, name)
    }

    pub(crate) fn admit<T: Data>(&mut self, key: u64, v: T) {
        self.eng.admit_typed(key, v).expect("admitted");
        self.collect();
    }

    /// Reserve up to `max` Grains of Call `c` and log the dispatch.
    pub(crate) fn reserve(&mut self, c: usize, max: usize) -> Option<Batch> {
        let b = self.eng.reserve(c, max)?;
        self.log.push(Dispatch {
            call: c,
            paths: self.paths(&b),
            generations: b.grains.iter().map(|g| g.generation).collect(),
        });
        Some(b)
    }

    pub(crate) fn paths(&self, b: &Batch) -> Vec<EntityPath> {
        b.grains
            .iter()
            .map(|g| self.eng.entity_path(g).expect("reserved Grains are live"))
            .collect()
    }

    /// Run a batch on Call `c`'s replica; a panicking replica is dropped and
    /// replaced on the next run, as a real executor would.
    pub(crate) fn execute(&mut self, b: &mut Batch) -> AttemptResult {
        let c = b.call;
        let inputs = std::mem::take(&mut b.inputs);
        let call = self.plan.calls()[c].runtime.clone();
        if self.replicas[c].is_none() {
            self.replicas[c] = Some(call.spawn_stage().expect("replica starts"));
        }
        let stage = self.replicas[c].as_mut().expect("spawned");
        let rt = self.rt.get_or_insert_with(paused_runtime);
        // A panic inside the future unwinds out of `block_on` like one in
        // the synchronous part of `run`.
        let run = AssertUnwindSafe(|| match call.execution() {
            Execution::Blocking => call.run_blocking(stage, 0, inputs),
            Execution::Async => rt.block_on(call.run_async(stage, 0, inputs)),
        });
        match catch_unwind(run) {
            Ok(r) => r,
            Err(p) => {
                self.replicas[c] = None;
                Err(AttemptError::Failed(format!(
                    "stage panicked: {}",
                    rayorch::spi::panic_text(&p)
                )))
            }
        }
    }

    pub(crate) fn report(&mut self, id: BatchId, r: AttemptResult) -> ReportOutcome {
        let out = self.eng.report(id, r);
        self.collect();
        out
    }

    /// Reserve, run and report one batch of Call `c`.
    pub(crate) fn step(&mut self, c: usize, max: usize) -> Option<ReportOutcome> {
        let mut b = self.reserve(c, max)?;
        let r = self.execute(&mut b);
        Some(self.report(b.id, r))
    }

    /// Run every Call except `skip` to quiescence, lowest Call index first,
    /// batches of the Call's own size, each batch reported before the next
    /// dispatch.
    pub(crate) fn settle(&mut self, skip: &[usize]) {
        loop {
            let next = (0..self.plan.calls().len())
                .filter(|c| !skip.contains(c))
                .find_map(|c| self.step(c, self.plan.calls()[c].config.batch_size));
            if next.is_none() {
                break;
            }
        }
    }

    /// The recorded batches of Call `c`.
    pub(crate) fn dispatches(&self, c: usize) -> Vec<Vec<EntityPath>> {
        self.log
            .iter()
            .filter(|d| d.call == c)
            .map(|d| d.paths.clone())
            .collect()
    }

    /// Every Entity that Call `c` was ever dispatched for, in dispatch order.
    pub(crate) fn dispatched(&self, c: usize) -> Vec<EntityPath> {
        self.dispatches(c).into_iter().flatten().collect()
    }

    /// The finished root with key `key`.
    pub(crate) fn outcome(&self, key: u64) -> &RootOutcome {
        self.finished
            .iter()
            .find(|o| o.key == key)
            .unwrap_or_else(|| panic!("root {key} has not finished"))
    }

    pub(crate) fn assert_clean(&self) {
        assert_clean(self.eng.stats());
    }

    fn collect(&mut self) {
        while let Some(o) = self.eng.pop_finished() {
            self.finished.push(o);
        }
    }
}

/// Assert `expected` (in key order) under the sequential schedule and under
/// 40 random fault-free schedules: the result must not depend on the schedule.
pub(crate) fn assert_every_schedule<I, T>(plan: &Plan, out: Output<T>, inputs: &[I], expected: &[Item<T>])
where
    I: Clone + Send + Sync + 'static,
    T: Data + PartialEq + std::fmt::Debug,
{
    let (got, _) = run_seq(plan, out, inputs.to_vec());
    assert_eq!(got, expected, "sequential schedule");
    for seed in 0..40 {
        let (got, _) = run_with(
            plan,
            out,
            inputs.to_vec(),
            &SimConfig::random(seed).without_faults(),
        );
        assert_eq!(got, expected, "seed {seed}");
    }
}

/// An async stage made from a closure over a whole batch that returns the
/// batch's future; whatever the closure does before returning the future is
/// the synchronous part of `AsyncStage::run`.
pub(crate) struct AsyncBatch<F, I, O> {
    f: F,
    _types: std::marker::PhantomData<fn(I) -> O>,
}

impl<F, I, O> rayorch::AsyncStage for AsyncBatch<F, I, O>
where
    F: Fn(Vec<I>) -> rayorch::BoxFuture<rayorch::StageResult<O>> + Send + Sync + 'static,
    I: Send + 'static,
    O: Send + 'static,
{
    type In = I;
    type Out = O;
    fn run(
        self: Arc<Self>,
        batch: Vec<I>,
        _cx: rayorch::StageContext,
    ) -> impl Future<Output = rayorch::StageResult<O>> + Send + 'static {
        (self.f)(batch)
    }
}

/// A Call over an [`AsyncBatch`] stage.
pub(crate) fn async_call<F, I, O>(name: &str, f: F) -> rayorch::Call<rayorch::Async<AsyncBatch<F, I, O>>>
where
    F: Fn(Vec<I>) -> rayorch::BoxFuture<rayorch::StageResult<O>> + Clone + Send + Sync + 'static,
    I: Send + 'static,
    O: Send + 'static,
{
    rayorch::Call::new_async(name, move || {
        Ok(AsyncBatch {
            f: f.clone(),
            _types: std::marker::PhantomData,
        })
    })
}

/// A count that threads can wait on: gates in tests open on events, not
/// after delays.
#[derive(Default)]
pub(crate) struct Count {
    n: std::sync::Mutex<usize>,
    changed: std::sync::Condvar,
}

impl Count {
    pub(crate) fn bump(&self) {
        *self.n.lock().unwrap() += 1;
        self.changed.notify_all();
    }

    pub(crate) fn get(&self) -> usize {
        *self.n.lock().unwrap()
    }

    /// Wait until the count reaches `n`; returns the count when the wait
    /// ended. The 60 s limit only turns a hang into a failed assertion (the
    /// caller checks the count); nothing is asserted about durations.
    pub(crate) fn wait_for(&self, n: usize) -> usize {
        let guard = self.n.lock().unwrap();
        let limit = std::time::Duration::from_secs(60);
        *self
            .changed
            .wait_timeout_while(guard, limit, |k| *k < n)
            .unwrap()
            .0
    }
}

/// The Domains of [`pages_plan`].
pub(crate) mod pages {
    rayorch::domain!(pub Doc);
    rayorch::domain!(pub Page: Doc);
}

/// Documents of `n` pages (render lists the page numbers), each page through
/// `ocr`, gathered back per document: the plan the executor tests put their
/// faulty stages in.
pub(crate) fn pages_plan(
    ocr: rayorch::Call<impl rayorch::spi::StageKind<In = u32, Out = u32>>,
) -> (Plan, Output<Vec<u32>>) {
    let render = rayorch::Call::map("render", |n: u32| (0..n).collect::<Vec<u32>>());
    Plan::build(|b| {
        let docs = b.source::<pages::Doc, u32>();
        let page = rayorch::expand::<pages::Page, _, _>(render.apply(docs));
        b.output(rayorch::reduce(ocr.apply(page)))
    })
    .unwrap()
}

/// The JetStream backend in one test process: an owner and worker tasks
/// over a real nats-server (`rayorch::dist::server`).
pub(crate) mod dist {
    use std::time::Duration;

    use rayorch::Plan;
    use rayorch::dist::{Codecs, DistConfig, DistError, Storage, WorkerSummary};

    /// Plain TCP to a loopback broker, ack wait 1 s, memory queues, values over 64 bytes through the object
    /// store. The owner lease is 10 s (not 3 × ack wait): a batch a lost
    /// worker held comes back through JetStream's redelivery after the ack
    /// wait; the lease stays a fallback no loaded machine trips, so it never
    /// fails an attempt that did not fail.
    pub(crate) fn config(url: &str, job: &str) -> DistConfig {
        let mut c = DistConfig::new(url, job).ack_wait(Duration::from_secs(1));
        c.security = rayorch_dist::Security::insecure();
        c.lease = Duration::from_secs(10);
        c.inline_max = 64;
        c.storage = Storage::Memory;
        c
    }

    /// `roots` through an owner (as `owner` sets it up) and one worker task
    /// serving every Call, over a fresh loopback nats-server with job
    /// `job`: the owner's result and the outcomes in the order it handed
    /// them out. The run must end within 120 s; the worker must end
    /// cleanly after a run that succeeded.
    pub(crate) fn run_with_one_worker<T: rayorch::Data>(
        plan: &Plan,
        codecs: Codecs,
        job: &str,
        roots: Vec<(u64, T)>,
        owner: impl FnOnce(rayorch::dist::Owner) -> rayorch::dist::Owner,
    ) -> (Result<rayorch::RunSummary, DistError>, Vec<rayorch::RootOutcome>) {
        let server = rayorch::dist::server::NatsServer::start().unwrap();
        let rt = tokio::runtime::Runtime::new().unwrap();
        rt.block_on(async {
            let cfg = config(&server.url(), job);
            let worker = worker_task(plan, &codecs, cfg.clone(), String::new());
            let mut owner = owner(rayorch::dist::Owner::new(plan, codecs, cfg));
            let mut outcomes = Vec::new();
            let run = owner.run(futures::stream::iter(roots), |o| outcomes.push(o.clone()));
            let result = tokio::time::timeout(Duration::from_secs(120), run)
                .await
                .expect("the owner's run ends");
            match &result {
                Ok(_) => {
                    worker.await.unwrap().unwrap();
                }
                Err(_) => worker.abort(),
            }
            (result, outcomes)
        })
    }

    /// A worker task in this process serving `calls` of `plan` until its
    /// owner ends the run.
    pub(crate) fn worker_task(
        plan: &Plan,
        codecs: &Codecs,
        cfg: DistConfig,
        calls: String,
    ) -> tokio::task::JoinHandle<Result<WorkerSummary, DistError>> {
        let (plan, codecs) = (plan.clone(), codecs.clone());
        tokio::spawn(async move { rayorch::dist::worker(&plan, codecs, cfg, &calls).await })
    }
}
