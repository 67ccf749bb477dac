//! Attempt failures on the distributed backend end as they end locally:
//! async stages that panic inside their future or before returning it, in
//! Calls the owner runs itself and on a worker (in-process worker tasks,
//! compared root by root with a local `Runner` run); a poison record whose
//! blocking or async stage panics on every attempt, on worker PROCESSES
//! (this test binary re-executed), none of which dies of it; and a Call's
//! per-attempt timeout, owner-local and on a worker. Every run is bounded
//! (`common::HUNG`): a hang fails the test.

mod common;

use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{Workers, bounded, codecs, config, quiet_panics, spawn_worker};
use rayorch_dist::server::NatsServer;
use rayorch_dist::{DistError, Owner, WorkerSummary};
use rayorch_runtime::sink::Callback;
use rayorch_runtime::{
    AsyncStage, Call, Cause, Data, ItemKind, Outcome, Output, Plan, Recovery, RootOutcome, RunSummary,
    Runner, StageContext, StageResult, expand, reduce, reduce_keep_failed,
};

rayorch_runtime::domain!(Doc);
rayorch_runtime::domain!(Page: Doc);

/// What every provoked panic says (`quiet_panics` keys on it).
const POISON: &str = " is poisoned by ";

/// Doc `k` (its key as text) has `3 + k % 3` pages `"k/i"`.
fn render(doc: String) -> Vec<String> {
    let k: u64 = doc.parse().unwrap();
    (0..3 + k % 3).map(|i| format!("{k}/{i}")).collect()
}

/// The page a value is about: `"k/i"` of `"k/i>inside"`.
fn head(p: &str) -> &str {
    p.split('>').next().unwrap_or(p)
}

/// Page `"k/i"` (and what stages appended to it) as `(k, i)`.
fn page(p: &str) -> (u64, u64) {
    let (k, i) = head(p).split_once('/').unwrap();
    (k.parse().unwrap(), i.parse().unwrap())
}

fn docs(n: u64) -> Vec<(u64, String)> {
    (0..n).map(|k| (k, k.to_string())).collect()
}

/// Where an async stage panics on a poisoned record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Panic {
    /// Inside the future it returned.
    InFuture,
    /// In `run` itself, before any future exists.
    BeforeFuture,
}

/// An async stage appending `>name` to each page; a batch holding a page
/// `poison` marks panics where it says. `panics` counts them (per plan:
/// tests of this binary run side by side).
struct Poisoned {
    name: &'static str,
    poison: fn(&str) -> Option<Panic>,
    panics: Arc<AtomicU64>,
}

impl AsyncStage for Poisoned {
    type In = String;
    type Out = String;

    fn run(
        self: Arc<Self>,
        batch: Vec<String>,
        _: StageContext,
    ) -> impl Future<Output = StageResult<String>> + Send + 'static {
        let poisoned = batch
            .iter()
            .find_map(|p| (self.poison)(p).map(|at| (p.clone(), at)));
        let message = |p: &str| format!("{}{POISON}{}", self.name, head(p));
        if let Some((p, Panic::BeforeFuture)) = &poisoned {
            self.panics.fetch_add(1, Ordering::Relaxed);
            std::panic::panic_any(message(p));
        }
        let in_future = poisoned.map(|(p, _)| message(&p));
        async move {
            tokio::task::yield_now().await;
            if let Some(m) = in_future {
                self.panics.fetch_add(1, Ordering::Relaxed);
                std::panic::panic_any(m);
            }
            Ok(batch
                .into_iter()
                .map(|p| Outcome::Ok(format!("{p}>{}", self.name)))
                .collect())
        }
    }
}

/// An Isolate Call over a [`Poisoned`] stage, batches of 4.
fn poisoned(
    name: &'static str,
    poison: fn(&str) -> Option<Panic>,
    panics: &Arc<AtomicU64>,
) -> Call<rayorch_runtime::Async<Poisoned>> {
    let panics = panics.clone();
    Call::new_async(name, move || {
        Ok(Poisoned {
            name,
            poison,
            panics: panics.clone(),
        })
    })
    .batch_size(4)
    .recovery(Recovery::Isolate)
}

/// `inside` panics in its future on page 2 of docs `k % 4 == 0`; `early`
/// panics before its future on page 1 of docs `k % 4 == 2` (no doc holds
/// both, so each failed root has one cause).
fn inside_poison(p: &str) -> Option<Panic> {
    let (k, i) = page(p);
    (k % 4 == 0 && i == 2).then_some(Panic::InFuture)
}

fn early_poison(p: &str) -> Option<Panic> {
    let (k, i) = page(p);
    (k % 4 == 2 && i == 1).then_some(Panic::BeforeFuture)
}

/// render → inside → early → reduce; the two counters count `inside`'s
/// and `early`'s panics.
fn async_plan() -> (Plan, Output<Vec<String>>, [Arc<AtomicU64>; 2]) {
    let counts = [Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0))];
    let render = Call::map("render", render);
    let inside = poisoned("inside", inside_poison, &counts[0]);
    let early = poisoned("early", early_poison, &counts[1]);
    let (plan, out) = Plan::build(|b| {
        let docs = b.source::<Doc, String>();
        let page = expand::<Page, _, _>(render.apply(docs));
        b.output(reduce(early.apply(inside.apply(page))))
    })
    .unwrap();
    (plan, out, counts)
}

/// A root's output: kind, value, cause text.
type Got<T> = (ItemKind, Option<T>, Option<String>);

fn got<T: Data + Clone>(o: &RootOutcome, out: Output<T>) -> Got<T> {
    let item = o.get(out);
    let cause = item.cause().map(|c| c.message().to_string());
    (item.kind(), item.present(), cause)
}

/// The same roots through a local `Runner`: what the distributed run must give.
async fn run_locally<T: Data + Clone>(
    plan: &Plan,
    out: Output<T>,
    roots: &[(u64, String)],
) -> BTreeMap<u64, Got<T>> {
    let mut outputs = BTreeMap::new();
    Runner::new(plan)
        .run_async(
            roots.to_vec(),
            Callback(|o: &RootOutcome| {
                outputs.insert(o.key, got(o, out));
            }),
        )
        .await
        .unwrap();
    outputs
}

/// Run the roots through `owner`, each root exactly once; `each` sees every
/// root as it arrives.
async fn run_owner<T: Data + Clone>(
    mut owner: Owner,
    out: Output<T>,
    roots: &[(u64, String)],
    mut each: impl FnMut(&RootOutcome) + Send,
) -> (BTreeMap<u64, Got<T>>, RunSummary) {
    let source = futures::stream::iter(roots.iter().map(|(k, d)| (*k, d.clone())));
    let mut outputs = BTreeMap::new();
    let run = owner.run(source, |o| {
        each(o);
        assert!(
            outputs.insert(o.key, got(o, out)).is_none(),
            "root {} handed out twice",
            o.key
        );
    });
    let summary = bounded("the owner's run", run).await.unwrap();
    (outputs, summary)
}

/// A worker task in this process serving `calls` of `plan`.
fn worker_task(
    plan: &Plan,
    url: &str,
    job: &str,
    calls: &'static str,
) -> tokio::task::JoinHandle<Result<WorkerSummary, DistError>> {
    let (plan, cfg) = (plan.clone(), config(url, job));
    tokio::spawn(async move { rayorch_dist::worker(&plan, codecs(), cfg, calls).await })
}

/// Which process ran each Call's committed grains: `owner`, or a worker's name.
fn runs_where(summary: &RunSummary, call: &str) -> Vec<String> {
    let mut w: Vec<String> = summary
        .workers
        .iter()
        .filter(|g| g.call == call && g.grains > 0)
        .map(|g| g.worker.clone())
        .collect();
    w.dedup();
    w
}

/// Outputs equal the local run's; roots of poisoned docs are Suppressed by
/// their poisoned page's panic, every other root exact.
fn check_async_outputs(dist: &BTreeMap<u64, Got<Vec<String>>>, local: &BTreeMap<u64, Got<Vec<String>>>) {
    assert_eq!(dist, local, "the distributed run gives the local run's outputs");
    for (k, (kind, value, cause)) in dist {
        let want_cause = match k % 4 {
            0 => Some(format!("stage panicked: inside{POISON}{k}/2")),
            2 => Some(format!("stage panicked: early{POISON}{k}/1")),
            _ => None,
        };
        match want_cause {
            Some(c) => {
                assert_eq!(*kind, ItemKind::Suppressed, "doc {k}");
                assert_eq!(cause.as_deref(), Some(c.as_str()), "doc {k}");
            }
            None => {
                let want: Vec<String> = render(k.to_string())
                    .into_iter()
                    .map(|p| format!("{p}>inside>early"))
                    .collect();
                assert_eq!(value.as_ref(), Some(&want), "doc {k}");
            }
        }
    }
}

/// 12 docs, 6 of them poisoned, through `owner_calls` in the owner and
/// `worker_calls` on one worker task; returns the summary, the worker's
/// and the panics seen in the distributed run.
async fn async_panics_run(
    job: &str,
    owner_calls: &str,
    worker_calls: &'static str,
) -> (RunSummary, WorkerSummary, [u64; 2]) {
    quiet_panics(POISON);
    let server = NatsServer::start().unwrap();
    let url = server.url();
    let (plan, out, counts) = async_plan();
    let roots = docs(12);
    let local = run_locally(&plan, out, &roots).await;
    let before = counts.each_ref().map(|c| c.load(Ordering::Relaxed));
    let worker = worker_task(&plan, &url, job, worker_calls);
    let owner = Owner::new(&plan, codecs(), config(&url, job)).local_calls(owner_calls);
    let (dist, summary) = run_owner(owner, out, &roots, |_| {}).await;
    check_async_outputs(&dist, &local);
    let panics = [0, 1].map(|i| counts[i].load(Ordering::Relaxed) - before[i]);
    // Each poisoned page fails alone at least once (bisected down to it).
    assert!(
        panics[0] >= 3 && panics[1] >= 3,
        "panics in / before the future: {panics:?}"
    );
    // The worker ends with the run (the owner's end-of-run message), not before.
    let w = bounded("the worker", worker).await.unwrap().unwrap();
    (summary, w, panics)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn async_panics_in_calls_the_owner_runs_itself() {
    let (summary, worker, panics) = async_panics_run("ownerpanics", "inside:1,early:1", "render:1").await;
    eprintln!("owner-local: panics {panics:?}, {:?}", summary.per_worker());
    for call in ["inside", "early"] {
        assert_eq!(runs_where(&summary, call), ["owner"], "{call} ran in the owner");
    }
    assert_ne!(
        runs_where(&summary, "render"),
        ["owner"],
        "render ran on the worker"
    );
    // A panic loses its replica; the owner's pool made fresh ones.
    assert!(summary.calls[1].replicas_replaced >= 1 && summary.calls[2].replicas_replaced >= 1);
    assert!(worker.batches > 0, "{worker:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn async_panics_on_a_worker_leave_it_serving() {
    let (summary, worker, panics) = async_panics_run("workerpanics", "", "").await;
    eprintln!(
        "on a worker: panics {panics:?}, {worker:?}, {:?}",
        summary.per_worker()
    );
    for call in ["render", "inside", "early"] {
        let at = runs_where(&summary, call);
        assert!(
            at.len() == 1 && at[0] != "owner",
            "{call} ran on the one worker: {at:?}"
        );
    }
    // The only worker ran every attempt, panicked ones included, and the run
    // could not have finished had any of its slots died.
    let attempts: u64 = summary.calls.iter().map(|c| c.rpcs).sum();
    assert_eq!(worker.batches, attempts, "{worker:?} {:?}", summary.calls);
}

// ---- a poison record vs worker processes ------------------------------------------

/// `scan` (blocking) panics on page 0 of docs `k % 5 == 1`; `read` (async)
/// panics in its future on page 1 of docs `k % 5 == 3` and before it on
/// page 2 of docs `k % 5 == 4`. Every attempt holding such a page panics.
fn scan_poison(p: &str) -> bool {
    let (k, i) = page(p);
    k % 5 == 1 && i == 0
}

fn read_poison(p: &str) -> Option<Panic> {
    match page(p) {
        (k, 1) if k % 5 == 3 => Some(Panic::InFuture),
        (k, 2) if k % 5 == 4 => Some(Panic::BeforeFuture),
        _ => None,
    }
}

/// The page a doc's poison is on, and the Call it kills, if any.
fn poisoned_page(k: u64) -> Option<(u64, &'static str)> {
    match k % 5 {
        1 => Some((0, "scan")),
        3 => Some((1, "read")),
        4 => Some((2, "read")),
        _ => None,
    }
}

/// A doc's pages, each kept with its failure (`reduce_keep_failed`).
type Kept = Vec<Result<String, Cause>>;

/// render → scan → read → `reduce!(.., keep_failed)`: a root keeps its
/// pages, the poisoned one as `Err(cause)`. The counters count `scan`'s
/// and `read`'s panics in this process.
fn poison_plan() -> (Plan, Output<Kept>, [Arc<AtomicU64>; 2]) {
    let counts = [Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0))];
    let render = Call::map("render", render);
    let scanned = counts[0].clone();
    let scan = Call::batch("scan", move |pages: Vec<String>| {
        if let Some(p) = pages.iter().find(|p| scan_poison(p)) {
            scanned.fetch_add(1, Ordering::Relaxed);
            std::panic::panic_any(format!("scan{POISON}{p}"));
        }
        Ok(pages
            .into_iter()
            .map(|p| Outcome::Ok(format!("{p}>scan")))
            .collect())
    })
    .batch_size(4)
    .recovery(Recovery::Isolate);
    let read = poisoned("read", read_poison, &counts[1]);
    let (plan, out) = Plan::build(|b| {
        let docs = b.source::<Doc, String>();
        let page = expand::<Page, _, _>(render.apply(docs));
        b.output(reduce_keep_failed(read.apply(scan.apply(page))))
    })
    .unwrap();
    (plan, out, counts)
}

/// The worker side: runs only when this binary is re-executed as a worker.
/// Serves `$RAYORCH_DIST_TEST_CALLS` of the poison plan, then writes the
/// panics it survived (`scan read`) to `$RAYORCH_DIST_TEST_OUT`.
#[test]
#[ignore = "a worker process: run by this binary's tests (common::spawn_worker) with the job in its environment"]
fn worker_process() {
    let Ok(url) = std::env::var("RAYORCH_DIST_TEST_WORKER") else {
        return;
    };
    quiet_panics(POISON);
    let job = std::env::var("RAYORCH_DIST_TEST_JOB").unwrap();
    let calls = std::env::var("RAYORCH_DIST_TEST_CALLS").unwrap();
    let (plan, _, counts) = poison_plan();
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(rayorch_dist::worker(&plan, codecs(), config(&url, &job), &calls))
        .unwrap();
    let [scan, read] = counts.each_ref().map(|c| c.load(Ordering::Relaxed));
    std::fs::write(
        std::env::var("RAYORCH_DIST_TEST_OUT").unwrap(),
        format!("{scan} {read}"),
    )
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_poison_record_kills_no_worker_process() {
    let server = NatsServer::start().unwrap();
    let url = server.url();
    let dir = tempfile::tempdir().unwrap();
    let report = |w: &str| dir.path().join(w).to_string_lossy().into_owned();
    let (blocking, asynchronous) = (report("blocking"), report("async"));
    // Each stage's panics all land in one process: the blocking one's in the
    // first, the async one's in the second.
    let mut workers = Workers(vec![
        spawn_worker(
            &url,
            "poison",
            &[
                ("RAYORCH_DIST_TEST_CALLS", "render:1,scan:1"),
                ("RAYORCH_DIST_TEST_OUT", &blocking),
            ],
        ),
        spawn_worker(
            &url,
            "poison",
            &[
                ("RAYORCH_DIST_TEST_CALLS", "read:1"),
                ("RAYORCH_DIST_TEST_OUT", &asynchronous),
            ],
        ),
    ]);
    let (plan, out, _) = poison_plan();
    let roots = docs(15);
    let owner = Owner::new(&plan, codecs(), config(&url, "poison"));
    let mut alive_at_each_root = true;
    let (outputs, summary) = run_owner(owner, out, &roots, |_| {
        alive_at_each_root &= workers.all_running();
    })
    .await;
    assert!(alive_at_each_root, "a worker process died during the run");
    assert_eq!(outputs.len(), roots.len(), "every root exactly once");
    for (k, (kind, pages, _)) in &outputs {
        assert_eq!(*kind, ItemKind::Present, "doc {k} keeps its pages");
        for (i, p) in pages.as_ref().unwrap().iter().enumerate() {
            let i = i as u64;
            match (poisoned_page(*k), p) {
                (Some((at, call)), Err(c)) if at == i => {
                    assert_eq!(c.message(), format!("stage panicked: {call}{POISON}{k}/{i}"));
                }
                (_, Ok(v)) => assert_eq!(v, &format!("{k}/{i}>scan>read"), "doc {k} page {i}"),
                (_, Err(c)) => panic!("doc {k} page {i} failed: {}", c.message()),
            }
        }
        let failed = pages.as_ref().unwrap().iter().filter(|p| p.is_err()).count();
        assert_eq!(failed, usize::from(poisoned_page(*k).is_some()), "doc {k}");
    }
    // The owner ended the run: each worker exits 0 (a worker whose slot
    // died ends with an error instead, and one killed by a panic with 101).
    for (i, status) in workers.exits().into_iter().enumerate() {
        assert!(status.success(), "worker {i} ended {status:?}");
    }
    let panics = |path: &str| -> Vec<u64> {
        let text = std::fs::read_to_string(path).unwrap();
        text.split(' ').map(|n| n.parse().unwrap()).collect()
    };
    let (b, a) = (panics(&blocking), panics(&asynchronous));
    eprintln!(
        "panics survived: blocking worker {b:?}, async worker {a:?}; {:?}",
        summary.per_worker()
    );
    // Three docs poison `scan`, four `read`: each poisoned page failed alone
    // at least once, in the one process serving its Call.
    assert!(b[0] >= 3 && b[1] == 0, "blocking worker: {b:?}");
    assert!(a[1] >= 4 && a[0] == 0, "async worker: {a:?}");
}

// ---- per-attempt timeouts ------------------------------------------------------

/// An async Call with a 300 ms timeout whose future hangs (an hour) on the
/// first attempt holding page 0 of a doc `k % 3 == 0`; it retries.
fn timeout_plan() -> (Plan, Output<Vec<String>>) {
    let render = Call::map("render", render);
    let hung: Arc<Mutex<HashSet<String>>> = Arc::default();
    let slow = Call::new_async("slow", move || Ok(Hangs { hung: hung.clone() }))
        .batch_size(4)
        .timeout(Duration::from_millis(300))
        .recovery(Recovery::RetryBatch(5));
    Plan::build(|b| {
        let docs = b.source::<Doc, String>();
        let page = expand::<Page, _, _>(render.apply(docs));
        b.output(reduce(slow.apply(page)))
    })
    .unwrap()
}

/// Hangs once per page `k/0` with `k % 3 == 0` (process-wide memory).
struct Hangs {
    hung: Arc<Mutex<HashSet<String>>>,
}

impl AsyncStage for Hangs {
    type In = String;
    type Out = String;

    fn run(
        self: Arc<Self>,
        batch: Vec<String>,
        _: StageContext,
    ) -> impl Future<Output = StageResult<String>> + Send + 'static {
        let mut hung = self.hung.lock().unwrap();
        let first = batch
            .iter()
            .filter(|p| matches!(page(p), (k, 0) if k % 3 == 0))
            .fold(false, |any, p| hung.insert(p.clone()) | any);
        drop(hung);
        async move {
            if first {
                tokio::time::sleep(Duration::from_secs(3600)).await;
            }
            Ok(batch
                .into_iter()
                .map(|p| Outcome::Ok(format!("{p}>slow")))
                .collect())
        }
    }
}

async fn timeouts_run(job: &str, owner_calls: &str, worker_calls: &'static str) -> RunSummary {
    let server = NatsServer::start().unwrap();
    let url = server.url();
    let (plan, out) = timeout_plan();
    let worker = worker_task(&plan, &url, job, worker_calls);
    let roots = docs(9);
    let owner = Owner::new(&plan, codecs(), config(&url, job)).local_calls(owner_calls);
    let (outputs, summary) = run_owner(owner, out, &roots, |_| {}).await;
    for (k, (_, value, cause)) in &outputs {
        let want: Vec<String> = render(k.to_string())
            .into_iter()
            .map(|p| format!("{p}>slow"))
            .collect();
        assert_eq!(value.as_ref(), Some(&want), "doc {k}: {cause:?}");
    }
    // Docs 0, 3 and 6 hang once each: at least one timed-out attempt, and
    // every one was retried.
    let slow = &summary.calls[1];
    assert!(slow.attempt_failures >= 1, "{slow:?}");
    bounded("the worker", worker).await.unwrap().unwrap();
    summary
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_timeout_ends_a_hung_attempt_in_the_owner() {
    let summary = timeouts_run("ownertimeout", "slow:1", "render:1").await;
    assert_eq!(runs_where(&summary, "slow"), ["owner"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_timeout_ends_a_hung_attempt_on_a_worker() {
    let summary = timeouts_run("workertimeout", "", "").await;
    let at = runs_where(&summary, "slow");
    assert!(at.len() == 1 && at[0] != "owner", "{at:?}");
}

// ---- the end of the run, missed ------------------------------------------------

/// The owner announces the end of its run once, as a plain NATS message: a
/// worker that missed it (here: deaf to it from its first claim,
/// `FaultKind::Deaf`) finds its queues removed, and once pulls have failed
/// for `owner_wait` with no owner answering, it ends as if it had heard
/// the end: `Ok`, with the batches it ran, never serving on or spinning.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_that_missed_the_end_of_its_run_ends_once_its_queues_are_gone() {
    let server = NatsServer::start().unwrap();
    let url = server.url();
    let job = "deafworker";
    let (plan, out) = timeout_plan();
    let mut cfg = config(&url, job);
    cfg.owner_wait = Duration::from_secs(2);
    let fault = Some(rayorch_dist::Fault {
        kind: rayorch_dist::FaultKind::Deaf,
        at: 1,
    });
    let worker = {
        let (plan, cfg) = (plan.clone(), cfg.clone());
        tokio::spawn(async move { rayorch_dist::worker_with_fault(&plan, codecs(), cfg, "", fault).await })
    };
    let roots = docs(4);
    let (outputs, _) = run_owner(
        Owner::new(&plan, codecs(), config(&url, job)),
        out,
        &roots,
        |_| {},
    )
    .await;
    assert_eq!(outputs.len(), roots.len());
    let w = bounded("the worker that missed the end", worker)
        .await
        .unwrap()
        .unwrap();
    assert!(w.batches > 0, "the worker served the run: {w:?}");
}
