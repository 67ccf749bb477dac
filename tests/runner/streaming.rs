//! The threaded executor's promises: streaming per-root output, a reactor
//! that blocking stages never stall, shared pools, parameters, sinks.
//!
//! Assertions are about order and counts, never durations: costs are async
//! sleeps on paused tokio time, and waits are gates opened by events.

use crate::common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rayorch::prelude::*;
use rayorch::sink::{Callback, FailureLine, FailuresSink, JsonlSink};
use rayorch::{AsyncStage, RootOutcome, Runner, StageContext};

domain!(Doc);
domain!(Page: Doc);

#[test]
fn a_small_parent_reaches_the_sink_before_a_400_child_parent_admitted_earlier() {
    // Rendering costs time per page (as with real PDFs), so the small
    // document's pages reach the OCR queue first and its parent completes
    // while the large one is still being processed: no stage barrier. The
    // stages are async and time is tokio's, paused: the costs are exact and
    // take no wall-clock time, so the order cannot depend on the machine.
    let render = common::async_call("render", |docs: Vec<u32>| {
        Box::pin(async move {
            let pages: u32 = docs.iter().sum();
            tokio::time::sleep(Duration::from_micros(100) * pages).await;
            Ok(docs
                .into_iter()
                .map(|n| Outcome::Ok((0..n).collect::<Vec<u32>>()))
                .collect())
        })
    })
    .batch_size(1)
    .replicas(2);
    let ocr = common::async_call("ocr", |pages: Vec<u32>| {
        Box::pin(async move {
            tokio::time::sleep(Duration::from_millis(2)).await;
            Ok(pages.into_iter().map(Outcome::Ok).collect())
        })
    })
    .batch_size(16)
    .replicas(2);
    let (plan, out) = Plan::build(|b| {
        let docs = b.source::<Doc, u32>();
        b.output(reduce(ocr.apply(expand::<Page, _, _>(render.apply(docs)))))
    })
    .unwrap();
    let mut order = Vec::new();
    let runner = Runner::new(&plan);
    let run = runner.run_async(
        [(0u64, 400u32), (1, 2)],
        Callback(|o: &RootOutcome| order.push((o.key, o.get(out).present().unwrap().len()))),
    );
    common::paused_runtime().block_on(run).unwrap();
    assert_eq!(
        order,
        vec![(1, 2), (0, 400)],
        "the 2-page document must not wait for the 400-page one"
    );
}

/// An async stage that counts its batches.
struct Ticker {
    ticks: Arc<common::Count>,
}

impl AsyncStage for Ticker {
    type In = u32;
    type Out = u32;
    #[expect(
        clippy::manual_async_fn,
        reason = "spelled out to show the Send future the trait asks for"
    )]
    fn run(
        self: Arc<Self>,
        batch: Vec<u32>,
        _cx: StageContext,
    ) -> impl Future<Output = StageResult<u32>> + Send {
        async move {
            tokio::time::sleep(Duration::from_millis(5)).await;
            self.ticks.bump();
            Ok(batch.into_iter().map(Outcome::Ok).collect())
        }
    }
}

#[test]
fn blocking_replicas_never_stall_the_async_reactor() {
    // Each blocking batch holds its replica thread until the async stage has
    // finished 10 batches: if blocking work ran on the reactor, or kept it
    // from polling, the async stage could not get there.
    let ticks = Arc::new(common::Count::default());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let (t, s) = (ticks.clone(), seen.clone());
    let sleepy = Call::batch("sleepy", move |batch: Vec<u32>| {
        s.lock().unwrap().push(t.wait_for(10));
        Ok(batch.into_iter().map(Outcome::Ok).collect())
    })
    .batch_size(1)
    .replicas(4);
    let t = ticks.clone();
    let upload = Call::new_async("upload", move || Ok(Ticker { ticks: t.clone() }))
        .batch_size(1)
        .concurrency(2);
    let (plan, (slow, fast)) = Plan::build(|b| {
        let (a, c) = b.sources::<Doc, (u32, u32)>();
        (b.output(sleepy.apply(a)), b.output(upload.apply(c)))
    })
    .unwrap();
    let mut done = 0;
    Runner::new(&plan)
        .window(40)
        .run(
            (0..40u64).map(|i| (i, (i as u32, i as u32))),
            Callback(|o: &RootOutcome| {
                assert!(o.get(slow).present().is_some() && o.get(fast).present().is_some());
                done += 1;
            }),
        )
        .unwrap();
    assert_eq!(done, 40);
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 40);
    assert!(
        seen.iter().all(|&k| k >= 10),
        "async batches finished while each blocking batch waited: {seen:?}"
    );
}

#[test]
fn two_uses_of_one_call_share_a_pool_and_see_their_own_parameter() {
    let inits = Arc::new(AtomicUsize::new(0));
    let i = inits.clone();
    struct Scale;
    impl Stage for Scale {
        type In = u32;
        type Out = u32;
        fn run(&mut self, batch: Vec<u32>, cx: &StageContext) -> StageResult<u32> {
            let k = *cx.param::<u32>().ok_or("missing parameter")?;
            Ok(batch.into_iter().map(|x| Outcome::Ok(x * k)).collect())
        }
    }
    let scale = Call::new("scale", move || {
        i.fetch_add(1, Ordering::SeqCst);
        Ok(Scale)
    })
    .replicas(2);
    let double = scale.clone().param(2u32);
    let triple = scale.param(3u32);
    let (plan, out) = Plan::build(|b| {
        let x = b.source::<Doc, u32>();
        b.output(triple.apply(double.apply(x)))
    })
    .unwrap();
    let mut got = Vec::new();
    Runner::new(&plan)
        .run(
            (0..20u64).map(|k| (k, k as u32)),
            Callback(|o: &RootOutcome| got.push((o.key, o.get(out)))),
        )
        .unwrap();
    got.sort_by_key(|g| g.0);
    assert!(got.iter().all(|(k, v)| *v == Item::Present(*k as u32 * 6)));
    assert_eq!(
        inits.load(Ordering::SeqCst),
        2,
        "one pool of 2 replicas serves both Calls"
    );
}

#[test]
fn jsonl_and_failures_sinks_write_each_root_once() {
    let dir = std::env::temp_dir().join(format!("rayorch-sinks-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let render = Call::map("render", |n: u32| (0..n).collect::<Vec<u32>>());
    let ocr = Call::per_record("ocr", |p: u32| {
        if p == 13 {
            Outcome::RecordFailure("page 13 is unreadable".into())
        } else {
            Outcome::Ok(p)
        }
    });
    let (plan, out) = Plan::build(|b| {
        let docs = b.source::<Doc, u32>();
        b.output(reduce(ocr.apply(expand::<Page, _, _>(render.apply(docs)))))
    })
    .unwrap();
    let docs = dir.join("docs.jsonl");
    let fails = dir.join("failures.jsonl");
    let summary = Runner::new(&plan)
        .run(
            [(0u64, 3u32), (1, 20), (2, 0)],
            (
                JsonlSink::create(&docs, out).unwrap(),
                FailuresSink::create(&fails).unwrap(),
            ),
        )
        .unwrap();
    assert_eq!((summary.present, summary.suppressed), (2, 1));
    let mut lines: Vec<serde_json::Value> = std::fs::read_to_string(&docs)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    lines.sort_by_key(|l| l["key"].as_u64());
    assert_eq!(
        lines,
        vec![
            serde_json::json!({"key": 0, "value": [0, 1, 2]}),
            serde_json::json!({"key": 2, "value": []}),
        ]
    );
    let failures: Vec<FailureLine> = std::fs::read_to_string(&fails)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(failures.len(), 1);
    assert_eq!(failures[0].key, 1);
    assert_eq!(failures[0].outcome, "suppressed");
    assert_eq!(failures[0].cause, "page 13 is unreadable");
    assert_eq!(failures[0].at.as_deref(), Some("Call `ocr` on Doc 1 / Page 13"));
    // The suppressed root says which failure suppressed it: its kind and origin.
    assert_eq!(failures[0].kind.as_deref(), Some("record"));
    assert_eq!(failures[0].call.as_deref(), Some("ocr"));
    assert_eq!(failures[0].entity.as_deref(), Some("Doc 1 / Page 13"));
    let by_kind: Vec<(&str, &str, &str, u64)> = summary
        .failures
        .iter()
        .map(|f| (f.domain.as_str(), f.level.as_str(), f.kind.as_str(), f.count))
        .collect();
    assert_eq!(
        by_kind,
        [
            ("Doc", "root suppressed", "record", 1),
            ("Page", "grain failed", "record", 1)
        ],
        "the summary counts failures by Domain and kind"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_window_bounds_roots_in_flight() {
    let live = Arc::new(AtomicUsize::new(0));
    let peak = Arc::new(AtomicUsize::new(0));
    let (l, p) = (live.clone(), peak.clone());
    let enter = Call::map("enter", move |x: u32| {
        let now = l.fetch_add(1, Ordering::SeqCst) + 1;
        p.fetch_max(now, Ordering::SeqCst);
        x
    })
    .batch_size(64);
    let l2 = live.clone();
    let leave = Call::map("leave", move |x: u32| {
        std::thread::sleep(Duration::from_micros(200));
        l2.fetch_sub(1, Ordering::SeqCst);
        x
    })
    .batch_size(2);
    let (plan, _) = Plan::build(|b| {
        let x = b.source::<Doc, u32>();
        b.output(leave.apply(enter.apply(x)))
    })
    .unwrap();
    let summary = Runner::new(&plan)
        .window(5)
        .run((0..200u64).map(|k| (k, 0u32)), Callback(|_: &RootOutcome| {}))
        .unwrap();
    assert_eq!(summary.present, 200);
    assert!(
        peak.load(Ordering::SeqCst) <= 5,
        "peak {} roots in flight",
        peak.load(Ordering::SeqCst)
    );
}
