//! Run control on the distributed backend, as in a local run: a sink that
//! panics mid-run is a typed `RunError::Sink` (through `DistError`) and the
//! owner ends the run; `stop_admitting` drains (every admitted root written,
//! the rest never pulled from the source); `cancel` abandons (every admitted
//! root reaches the sink once, the live ones failed "cancelled"). In each
//! case the worker PROCESSES (this test binary re-executed) exit 0: the
//! owner's end of the run reached them.
//!
//! Doc 0's one page holds its batch until the test opens a gate (a file),
//! so it is live whenever the sink stops the run; nothing waits on time.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{HUNG, Workers, bounded, codecs, config, quiet_panics, spawn_worker};
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
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(rayorch_dist::worker(
        &plan(gate).0,
        codecs(),
        config(&url, &job),
        "",
    ))
    .unwrap();
}

/// A broker, two worker processes of `job` (told of `gate`) and its owner.
struct Cluster {
    _server: NatsServer,
    workers: Workers,
    owner: Owner,
    out: Output<Vec<String>>,
}

fn cluster(job: &str, gate: Option<&Path>) -> Cluster {
    let server = NatsServer::start().unwrap();
    let url = server.url();
    let env: Vec<(&str, &str)> = gate
        .map(|g| ("RAYORCH_DIST_TEST_GATE", g.to_str().unwrap()))
        .into_iter()
        .collect();
    let workers = Workers(vec![spawn_worker(&url, job, &env), spawn_worker(&url, job, &env)]);
    let (plan, out) = plan(gate.map(Path::to_path_buf));
    let mut cfg = config(&url, job);
    cfg.window = WINDOW;
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
