//! Run control on the distributed backend, as in a local run: a sink that
//! panics mid-run is a typed `RunError::Sink` (through `DistError`) and the
//! owner ends the run; `stop_admitting` drains (every admitted root written,
//! the rest never pulled from the source); `cancel` abandons (every admitted
//! root reaches the sink once, the live ones failed "cancelled"). In each
//! case the worker PROCESSES (this test binary re-executed) exit 0: the
//! owner's end of the run reached them.
//!
//! Payloads may go through a store outside the broker that the owner and
//! the workers share (`DistConfig::payloads`; a folder here): the run is
//! the same, and a worker on another store is refused at its hello.
//!
//! Doc 0's one page holds its batch until the test opens a gate (a file),
//! so it is live whenever the sink stops the run; nothing waits on time.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{DirStore, HUNG, Workers, bounded, codecs, config, quiet_panics, spawn_worker, worker_command};
use futures::StreamExt;
use rayorch_dist::server::NatsServer;
use rayorch_dist::{DistError, Owner};
use rayorch_runtime::{
    Call, ItemKind, Outcome, Output, Plan, RootOutcome, RunError, RunSummary, expand, reduce,
};

rayorch_runtime::domain!(Doc);
rayorch_runtime::domain!(Page: Doc);

/// Roots in the source; the window admits 4 at a time, so a run stopped at
/// its third root has never pulled most of them.
const ROOTS: u64 = 13;
const WINDOW: usize = 4;

/// Doc 0 is one gated page; doc `k` has `1 + k % 4` pages `"k/i"`.
fn render(doc: String) -> Vec<String> {
    let k: u64 = doc.parse().unwrap();
    match k {
        0 => vec!["0/gate".to_string()],
        _ => (0..1 + k % 4).map(|i| format!("{k}/{i}")).collect(),
    }
}

fn expected(k: u64) -> Vec<String> {
    render(k.to_string())
        .into_iter()
        .map(|p| format!("{p}#"))
        .collect()
}

/// Waits, bounded, until the gate file exists.
fn wait_for_gate(gate: &Path) {
    let start = Instant::now();
    while !gate.exists() && start.elapsed() < HUNG {
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// render → ocr (B = 2, 10 ms a batch; a batch holding `0/gate` waits for
/// the file `gate`) → reduce.
fn plan(gate: Option<PathBuf>) -> (Plan, Output<Vec<String>>) {
    let render = Call::map("render", render);
    let ocr = Call::batch("ocr", move |pages: Vec<String>| {
        if let Some(g) = &gate
            && pages.iter().any(|p| p.ends_with("/gate"))
        {
            wait_for_gate(g);
        }
        std::thread::sleep(Duration::from_millis(10));
        Ok(pages.into_iter().map(|p| Outcome::Ok(format!("{p}#"))).collect())
    })
    .batch_size(2);
    Plan::build(|b| {
        let docs = b.source::<Doc, String>();
        let page = expand::<Page, _, _>(render.apply(docs));
        b.output(reduce(ocr.apply(page)))
    })
    .unwrap()
}

/// The worker side: runs only when this binary is re-executed as a worker.
#[test]
#[ignore = "a worker process: run by this binary's tests (common::spawn_worker) with the job in its environment"]
fn worker_process() {
    let Ok(url) = std::env::var("RAYORCH_DIST_TEST_WORKER") else {
        return;
    };
    let job = std::env::var("RAYORCH_DIST_TEST_JOB").unwrap();
    let gate = std::env::var_os("RAYORCH_DIST_TEST_GATE").map(PathBuf::from);
    let mut cfg = config(&url, &job);
    if let Some(dir) = std::env::var_os("RAYORCH_DIST_TEST_PAYLOADS") {
        cfg.payloads = Some(DirStore::shared(Path::new(&dir)));
        cfg.inline_max = 0;
    }
    let rt = tokio::runtime::Runtime::new().unwrap();
    if let Err(e) = rt.block_on(rayorch_dist::worker(&plan(gate).0, codecs(), cfg, "")) {
        eprintln!("WORKER-ERROR {e}");
        std::process::exit(3);
    }
}

/// A broker, two worker processes of `job` (told of `gate`) and its owner.
struct Cluster {
    _server: NatsServer,
    workers: Workers,
    owner: Owner,
    out: Output<Vec<String>>,
}

fn cluster(job: &str, gate: Option<&Path>) -> Cluster {
    cluster_with(job, gate, None)
}

/// [`cluster`], every payload (`inline_max` 0) through the folder store
/// at `payloads`, when given, in the owner and the workers.
fn cluster_with(job: &str, gate: Option<&Path>, payloads: Option<&Path>) -> Cluster {
    let server = NatsServer::start().unwrap();
    let url = server.url();
    let env: Vec<(&str, &str)> = gate
        .map(|g| ("RAYORCH_DIST_TEST_GATE", g.to_str().unwrap()))
        .into_iter()
        .chain(payloads.map(|p| ("RAYORCH_DIST_TEST_PAYLOADS", p.to_str().unwrap())))
        .collect();
    let workers = Workers(vec![spawn_worker(&url, job, &env), spawn_worker(&url, job, &env)]);
    let (plan, out) = plan(gate.map(Path::to_path_buf));
    let mut cfg = config(&url, job);
    cfg.window = WINDOW;
    if let Some(p) = payloads {
        cfg.payloads = Some(DirStore::shared(p));
        cfg.inline_max = 0;
    }
    Cluster {
        _server: server,
        workers,
        owner: Owner::new(&plan, codecs(), cfg),
        out,
    }
}

/// What a run gave: each root's kind, value and cause, in delivery order.
type Delivered = Vec<(u64, ItemKind, Option<Vec<String>>, Option<String>)>;

/// Run the 13 docs; `at_root(n, pulled)` is told of the n-th delivered root
/// and how many roots the source had yielded then. Returns the run's result,
/// the deliveries, and the keys the source yielded.
async fn run(
    c: &mut Cluster,
    mut at_root: impl FnMut(usize, usize) + Send,
) -> (Result<RunSummary, DistError>, Delivered, Vec<u64>) {
    let pulled: Arc<Mutex<Vec<u64>>> = Arc::default();
    let (p, so_far) = (pulled.clone(), pulled.clone());
    // The roots come once both worker processes have registered: a run that
    // ended before a slow-starting worker joined would leave that worker
    // asking for an owner until `owner_wait` and exiting NoOwner, which is
    // right for it but not what these tests are about.
    let stats = c.owner.stats();
    let joined = async move {
        let start = Instant::now();
        while stats.workers_registered.load(Ordering::Relaxed) < 2 && start.elapsed() < HUNG {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    let source = futures::stream::once(joined)
        .flat_map(|()| futures::stream::iter(0..ROOTS))
        .map(move |k| {
            p.lock().unwrap().push(k);
            (k, k.to_string())
        });
    let out = c.out;
    let mut delivered = Delivered::new();
    let result = bounded(
        "the owner's run",
        c.owner.run(source, |o: &RootOutcome| {
            let item = o.get(out);
            let cause = item.cause().map(|c| c.message().to_string());
            delivered.push((o.key, item.kind(), item.present(), cause));
            let pulled = so_far.lock().unwrap().len();
            at_root(delivered.len(), pulled);
        }),
    )
    .await;
    let pulled = pulled.lock().unwrap().clone();
    (result, delivered, pulled)
}

/// Each root delivered once, and exactly the roots pulled from the source.
fn delivered_once(delivered: &Delivered, pulled: &[u64]) -> BTreeMap<u64, usize> {
    let mut seen = BTreeMap::new();
    for (i, (k, ..)) in delivered.iter().enumerate() {
        assert!(seen.insert(*k, i).is_none(), "root {k} delivered twice");
    }
    let mut keys = pulled.to_vec();
    keys.sort_unstable();
    assert_eq!(
        seen.keys().copied().collect::<Vec<_>>(),
        keys,
        "every admitted root reaches the sink"
    );
    seen
}

fn workers_exit_0(w: &mut Workers) {
    for (i, status) in w.exits().into_iter().enumerate() {
        assert!(status.success(), "worker {i} ended {status:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_sink_is_a_typed_error_and_the_workers_end() {
    quiet_panics("the sink broke");
    let mut c = cluster("sinkpanic", None);
    let (result, delivered, _) = run(&mut c, |n, _| {
        if n == 3 {
            panic!("the sink broke at its third root");
        }
    })
    .await;
    match result {
        Err(DistError::Run(RunError::Sink(m))) => {
            assert!(m.contains("the sink broke at its third root"), "{m}")
        }
        other => panic!("expected RunError::Sink, got {other:?}"),
    }
    assert_eq!(delivered.len(), 3, "the run ended at the panic");
    workers_exit_0(&mut c.workers);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_admitting_drains_the_admitted_roots_and_pulls_no_more() {
    let dir = tempfile::tempdir().unwrap();
    let gate = dir.path().join("gate");
    let mut c = cluster("drain", Some(&gate));
    let handle = c.owner.cancel_handle();
    let mut at_stop = None;
    let (result, delivered, pulled) = run(&mut c, |n, pulled| {
        if n == 3 {
            handle.stop_admitting();
            at_stop = Some(pulled);
            std::fs::write(&gate, b"open").unwrap();
        }
    })
    .await;
    let summary = result.unwrap();
    delivered_once(&delivered, &pulled);
    for (k, kind, value, cause) in &delivered {
        assert_eq!(*kind, ItemKind::Present, "doc {k} drained: {cause:?}");
        assert_eq!(value.as_ref(), Some(&expected(*k)), "doc {k}");
    }
    assert!(pulled.contains(&0), "doc 0 was admitted (it held the run open)");
    // The source is not polled again once the sink stopped admitting.
    assert_eq!(
        Some(pulled.len()),
        at_stop,
        "pulled after stop_admitting: {pulled:?}"
    );
    assert!(pulled.len() < ROOTS as usize, "some roots were never admitted");
    assert_eq!(summary.roots, pulled.len() as u64, "{summary:?}");
    assert!(!summary.cancelled && summary.abandoned == 0, "{summary:?}");
    workers_exit_0(&mut c.workers);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_abandons_the_live_roots_and_the_workers_end() {
    let dir = tempfile::tempdir().unwrap();
    let gate = dir.path().join("gate");
    let mut c = cluster("cancel", Some(&gate));
    let handle = c.owner.cancel_handle();
    let mut at_cancel = None;
    let (result, delivered, pulled) = run(&mut c, |n, pulled| {
        if n == 3 {
            handle.cancel();
            at_cancel = Some(pulled);
        }
    })
    .await;
    let summary = result.unwrap();
    // Doc 0's batch still waits on its worker: open the gate so it ends.
    std::fs::write(&gate, b"open").unwrap();
    let order = delivered_once(&delivered, &pulled);
    let cancelled: Vec<u64> = delivered
        .iter()
        .filter(|(_, kind, ..)| *kind == ItemKind::Failed)
        .map(|(k, ..)| *k)
        .collect();
    for (k, kind, value, cause) in &delivered {
        match kind {
            ItemKind::Present => assert_eq!(value.as_ref(), Some(&expected(*k)), "doc {k}"),
            ItemKind::Failed => {
                let c = cause.as_deref().unwrap_or_default();
                assert!(c.contains("cancelled"), "doc {k}: {c}");
                assert!(
                    order[k] >= 3,
                    "doc {k} was live when the third root stopped the run"
                );
            }
            other => panic!("doc {k} ended {other:?}"),
        }
    }
    assert!(
        cancelled.contains(&0),
        "doc 0 was live at the cancel: {delivered:?}"
    );
    assert_eq!(Some(pulled.len()), at_cancel, "pulled after cancel: {pulled:?}");
    assert!(summary.cancelled, "{summary:?}");
    assert_eq!(summary.abandoned, cancelled.len() as u64, "{summary:?}");
    assert_eq!(summary.roots, pulled.len() as u64, "{summary:?}");
    workers_exit_0(&mut c.workers);
}

/// A worker is a future: one aborted (or dropped) mid-run stops entirely —
/// its slots, their pullers and its heartbeat — so no task of it keeps
/// telling the owner it serves. Its runtime ends up with no task alive.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_aborted_worker_task_leaves_nothing_running() {
    let server = NatsServer::start().unwrap();
    let url = server.url();
    let (plan, out) = plan(None);
    let mut owner = Owner::new(&plan, codecs(), config(&url, "aborted"));
    let stats = owner.stats();
    // The source stays open until the worker was aborted.
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(u64, String)>();
    let source = futures::stream::poll_fn(move |cx| rx.poll_recv(cx));
    let run = tokio::spawn(async move {
        let mut got = Vec::new();
        let summary = owner.run(source, |o| got.push(o.get(out).present())).await;
        (summary, got)
    });
    // The worker runs on a runtime of its own, to count its tasks.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let (p, cfg) = (plan.clone(), config(&url, "aborted"));
    let worker = rt.spawn(async move { rayorch_dist::worker(&p, codecs(), cfg, "").await });
    tx.send((1, "1".to_string())).unwrap();
    common::wait_for("the worker's first batches", || {
        stats.batches_committed.load(std::sync::atomic::Ordering::Relaxed) >= 2
    })
    .await;
    worker.abort();
    assert!(worker.await.unwrap_err().is_cancelled());
    common::wait_for("every task of the aborted worker to end", || {
        rt.metrics().num_alive_tasks() == 0
    })
    .await;
    drop(tx);
    let (summary, got) = bounded("the owner's run", run).await.unwrap();
    assert_eq!(summary.unwrap().present, 1);
    assert_eq!(got, [Some(expected(1))]);
    rt.shutdown_background();
}

/// Payloads through a store outside the broker (`DistConfig::payloads`,
/// here a folder the processes share): every value crosses as a key (inline
/// max 0), the owner writes its batches' inputs there and reads the
/// workers' outputs from there, and the run writes what a run through the
/// broker writes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn payloads_travel_through_a_shared_store() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = cluster_with("shared", None, Some(dir.path()));
    let stats = c.owner.stats();
    let (result, delivered, pulled) = run(&mut c, |_, _| {}).await;
    let summary = result.unwrap();
    delivered_once(&delivered, &pulled);
    for (k, kind, value, cause) in &delivered {
        assert_eq!(*kind, ItemKind::Present, "doc {k}: {cause:?}");
        assert_eq!(value.as_ref(), Some(&expected(*k)), "doc {k}");
    }
    assert_eq!(summary.roots, ROOTS, "{summary:?}");
    let [inline, stored, fetched, _] = stats.bytes.snapshot();
    assert_eq!(inline, 0, "nothing travelled inline");
    assert!(stored > 0, "the owner stored the batches' inputs in the folder");
    assert!(fetched > 0, "the owner read the workers' outputs from the folder");
    workers_exit_0(&mut c.workers);
}

/// A worker whose payload store is not its owner's is refused when it
/// says hello, naming both stores, before it serves a batch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_on_another_payload_store_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let server = NatsServer::start().unwrap();
    let url = server.url();
    let mut worker = worker_command(&url, "mismatch", &[]);
    worker.stderr(std::process::Stdio::piped());
    let (plan, _) = plan(None);
    let mut cfg = config(&url, "mismatch");
    cfg.payloads = Some(DirStore::shared(dir.path()));
    let mut owner = Owner::new(&plan, codecs(), cfg);
    let handle = owner.cancel_handle();
    let mut child = worker.spawn().unwrap();
    let owner_run = tokio::spawn(async move {
        let source = futures::stream::pending::<(u64, String)>();
        owner.run(source, |_: &RootOutcome| {}).await
    });
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(start.elapsed() < HUNG, "the worker was not refused");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    handle.cancel();
    let _ = bounded("the owner's run", owner_run).await;
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    assert!(!status.success(), "the worker ends with an error: {err}");
    let line = err
        .lines()
        .find(|l| l.starts_with("WORKER-ERROR"))
        .unwrap_or(&err);
    assert!(
        line.contains(&format!("keeps large payloads in dir://{}", dir.path().display()))
            && line.contains("this worker in the broker's object store")
            && line.contains("--payload-store"),
        "{line}"
    );
}
