//! The threaded executor under real failures: panics, hangs, late reports,
//! contract errors, async timeouts and panics.
//!
//! No assertion here is about durations. Hangs are gates that the test
//! opens on an event (a replacement replica's factory, a replica's exit);
//! async stages run on a current-thread runtime with paused time, where a
//! stuck run lets the clock jump straight to its guard.

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use rayorch::prelude::*;
use rayorch::sink::Callback;
use rayorch::{RootOutcome, Runner, StageContext};

domain!(Doc);
domain!(Page: Doc);

fn collect<T: rayorch::Data>(
    out: rayorch::Output<T>,
    sink: &mut Vec<(u64, Item<T>)>,
) -> impl FnMut(&RootOutcome) + '_ {
    move |o: &RootOutcome| sink.push((o.key, o.get(out)))
}

type Rows = Vec<(u64, Item<Vec<u32>>)>;

fn run_sorted(plan: &Plan, out: rayorch::Output<Vec<u32>>, docs: &[u32]) -> (Rows, rayorch::RunSummary) {
    let mut got = Vec::new();
    let summary = Runner::new(plan)
        .window(4)
        .run(
            docs.iter().enumerate().map(|(i, &n)| (i as u64, n)),
            Callback(collect(out, &mut got)),
        )
        .unwrap();
    got.sort_by_key(|(k, _)| *k);
    (got, summary)
}

const DOCS: [u32; 5] = [3, 0, 7, 1, 12];

fn clean_expected() -> Vec<(u64, Item<Vec<u32>>)> {
    DOCS.iter()
        .enumerate()
        .map(|(i, &n)| (i as u64, Item::Present((0..n).map(|p| p * 10).collect())))
        .collect()
}

#[test]
fn a_stage_that_panics_on_its_first_attempt_gives_the_clean_output() {
    let attempts = Arc::new(AtomicUsize::new(0));
    let a = attempts.clone();
    let ocr = Call::batch("ocr", move |batch: Vec<u32>| {
        if a.fetch_add(1, Ordering::SeqCst) == 0 {
            panic!("first attempt explodes");
        }
        Ok(batch.into_iter().map(|p| Outcome::Ok(p * 10)).collect())
    })
    .batch_size(4)
    .replicas(2)
    .recovery(Recovery::RetryBatch(2));
    let (plan, out) = common::pages_plan(ocr);
    let (got, summary) = run_sorted(&plan, out, &DOCS);
    assert_eq!(got, clean_expected());
    let ocr = summary.call("ocr").unwrap();
    assert_eq!(ocr.attempt_failures, 1);
    assert_eq!(
        ocr.replicas_replaced, 1,
        "a panicking replica is torn down and re-initialised"
    );
    assert!(ocr.requeued >= 1);
}

#[test]
fn a_hung_replica_is_replaced_and_the_run_completes() {
    // The first batch hangs until a replacement replica has been made: the
    // run can only complete if the timeout abandons the hung replica.
    let inits = Arc::new(common::Count::default());
    let hung = Arc::new(AtomicUsize::new(0));
    // The hung batch says how it ended; the run may finish before the
    // abandoned thread gets to say it, so the test waits for the message.
    let (released_tx, released_by_replacement) = std::sync::mpsc::channel();
    let (i, h) = (inits.clone(), hung.clone());
    let ocr = Call::new("ocr", move || {
        i.bump();
        let (i, h, tx) = (i.clone(), h.clone(), released_tx.clone());
        Ok(rayorch::BatchFn::new(move |batch: Vec<u32>| {
            if h.fetch_add(1, Ordering::SeqCst) == 0 {
                let _ = tx.send(i.wait_for(2) >= 2);
            }
            Ok(batch.into_iter().map(|p| Outcome::Ok(p * 10)).collect())
        }))
    })
    .batch_size(4)
    .replicas(1)
    .timeout(Duration::from_millis(150))
    .recovery(Recovery::RetryBatch(3));
    let (plan, out) = common::pages_plan(ocr);
    let (got, summary) = run_sorted(&plan, out, &DOCS);
    assert_eq!(got, clean_expected());
    assert!(
        released_by_replacement
            .recv_timeout(Duration::from_secs(60))
            .expect("the hung batch returns"),
        "the hung batch was released by the replacement replica's factory"
    );
    let ocr = summary.call("ocr").unwrap();
    // A batch slowed past the limit by a loaded machine would add a timeout
    // and a replacement; the relations below hold either way.
    assert!(ocr.replicas_replaced >= 1);
    assert!(ocr.attempt_failures >= ocr.replicas_replaced);
    assert_eq!(
        inits.get() as u64,
        1 + ocr.replicas_replaced,
        "each replacement ran the factory again"
    );
}

/// A stage whose instance says when it is dropped, if it hung.
struct Hanging {
    inits: Arc<common::Count>,
    batches: Arc<AtomicUsize>,
    hung: bool,
    dropped: Arc<common::Count>,
}

impl Stage for Hanging {
    type In = u32;
    type Out = u32;
    fn run(&mut self, batch: Vec<u32>, _cx: &StageContext) -> StageResult<u32> {
        if self.batches.fetch_add(1, Ordering::SeqCst) == 0 {
            // Two replicas, plus the one that replaces this one.
            self.hung = true;
            self.inits.wait_for(3);
        }
        Ok(batch.into_iter().map(|p| Outcome::Ok(p * 10)).collect())
    }
}

impl Drop for Hanging {
    fn drop(&mut self) {
        if self.hung {
            self.dropped.bump();
        }
    }
}

#[test]
fn a_late_report_from_a_replaced_replica_is_rejected_and_counted() {
    // One replica hangs on its first batch until its replacement exists, then
    // reports (too late) and exits, dropping its stage. The last document's
    // render waits for that drop, which comes after the late report was sent:
    // the run is still open when the run loop reads it, in any timing.
    let inits = Arc::new(common::Count::default());
    let dropped = Arc::new(common::Count::default());
    let batches = Arc::new(AtomicUsize::new(0));
    let (i, d, b) = (inits.clone(), dropped.clone(), batches.clone());
    let ocr = Call::new("ocr", move || {
        i.bump();
        Ok(Hanging {
            inits: i.clone(),
            batches: b.clone(),
            hung: false,
            dropped: d.clone(),
        })
    })
    .batch_size(2)
    .replicas(2)
    .timeout(Duration::from_millis(150))
    .recovery(Recovery::RetryBatch(3));
    let d = dropped.clone();
    let render = Call::map("render", move |n: u32| {
        if n == 3 {
            d.wait_for(1);
        }
        (0..n).collect::<Vec<u32>>()
    });
    let (plan, out) = Plan::build(|b| {
        let docs = b.source::<Doc, u32>();
        let page = expand::<Page, _, _>(render.apply(docs));
        b.output(reduce(ocr.apply(page)))
    })
    .unwrap();
    let docs: Vec<u32> = std::iter::repeat_n(2, 99).chain([3]).collect();
    let (got, summary) = run_sorted(&plan, out, &docs);
    assert!(got[..99].iter().all(|(_, i)| *i == Item::Present(vec![0, 10])));
    assert_eq!(got[99].1, Item::Present(vec![0, 10, 20]));
    assert_eq!(
        dropped.get(),
        1,
        "the hung replica exited before the last document"
    );
    let ocr = summary.call("ocr").unwrap();
    assert!(ocr.replicas_replaced >= 1);
    assert!(
        summary.rejected_reports >= 1,
        "the hung replica's late report is refused"
    );
}

/// A document of `n` pages, every stage async: with paused time, a run that
/// can make no progress lets the clock jump to the guard's deadline at once.
fn async_pages_plan(
    ocr: Call<impl rayorch::spi::StageKind<In = u32, Out = u32>>,
) -> (Plan, rayorch::Output<Vec<u32>>) {
    let render = common::async_call("render", |docs: Vec<u32>| {
        Box::pin(async move {
            tokio::task::yield_now().await;
            Ok(docs
                .into_iter()
                .map(|n| Outcome::Ok((0..n).collect::<Vec<u32>>()))
                .collect())
        })
    });
    Plan::build(|b| {
        let docs = b.source::<Doc, u32>();
        let page = expand::<Page, _, _>(render.apply(docs));
        b.output(reduce(ocr.apply(page)))
    })
    .unwrap()
}

/// Run on a current-thread runtime with paused time, under a guard of an
/// hour of tokio time: `None` when the run never finishes.
fn run_paused(plan: &Plan, out: rayorch::Output<Vec<u32>>) -> Option<(Rows, rayorch::RunSummary)> {
    let mut got = Vec::new();
    let runner = Runner::new(plan).window(4);
    let run = runner.run_async(
        DOCS.iter().enumerate().map(|(i, &n)| (i as u64, n)),
        Callback(collect(out, &mut got)),
    );
    let guarded = async { tokio::time::timeout(Duration::from_secs(3600), run).await };
    let summary = common::paused_runtime().block_on(guarded).ok()?.unwrap();
    got.sort_by_key(|(k, _)| *k);
    Some((got, summary))
}

/// An async OCR stage whose first batch misbehaves as `first` says.
fn async_ocr(
    first: fn() -> rayorch::BoxFuture<StageResult<u32>>,
) -> Call<impl rayorch::spi::StageKind<In = u32, Out = u32>> {
    let batches = Arc::new(AtomicUsize::new(0));
    common::async_call("ocr", move |batch: Vec<u32>| {
        if batches.fetch_add(1, Ordering::SeqCst) == 0 {
            return first();
        }
        Box::pin(async move {
            tokio::time::sleep(Duration::from_millis(1)).await;
            Ok(batch.into_iter().map(|p| Outcome::Ok(p * 10)).collect())
        })
    })
    .batch_size(4)
    .replicas(2)
    .recovery(Recovery::RetryBatch(2))
}

#[test]
fn an_async_attempt_past_its_timeout_is_retried() {
    let ocr = async_ocr(|| {
        Box::pin(async {
            tokio::time::sleep(Duration::from_secs(600)).await;
            Ok(Vec::new())
        })
    })
    .timeout(Duration::from_secs(10));
    let (plan, out) = async_pages_plan(ocr);
    let (got, summary) = run_paused(&plan, out).expect("the run finishes");
    assert_eq!(got, clean_expected());
    assert_eq!(summary.call("ocr").unwrap().attempt_failures, 1);
}

#[test]
fn an_async_stage_panicking_inside_its_future_gives_the_clean_output() {
    let ocr = async_ocr(|| Box::pin(async { panic!("the first future explodes") }));
    let (plan, out) = async_pages_plan(ocr);
    let (got, summary) = run_paused(&plan, out).expect("the run finishes");
    assert_eq!(got, clean_expected());
    assert_eq!(summary.call("ocr").unwrap().attempt_failures, 1);
}

#[test]
fn an_async_stage_panicking_before_its_future_gives_the_clean_output() {
    let ocr = async_ocr(|| panic!("the first run explodes before its future"));
    let (plan, out) = async_pages_plan(ocr);
    let (got, summary) = run_paused(&plan, out).expect("the run finishes");
    assert_eq!(got, clean_expected());
    assert_eq!(summary.call("ocr").unwrap().attempt_failures, 1);
}

#[test]
fn a_report_with_the_wrong_number_of_outcomes_is_a_contract_error() {
    let ocr = Call::batch("ocr", |batch: Vec<u32>| {
        Ok(batch.into_iter().skip(1).map(Outcome::Ok).collect())
    })
    .batch_size(8)
    .recovery(Recovery::RetryBatch(5));
    let (plan, out) = common::pages_plan(ocr);
    let (got, summary) = run_sorted(&plan, out, &[3]);
    let Item::Suppressed(cause) = &got[0].1 else {
        panic!("{got:?}")
    };
    let msg = cause.message();
    assert!(msg.contains("contract error"), "{msg}");
    assert!(
        msg.contains("`ocr`") && msg.contains("BatchFn"),
        "names the Call and the stage: {msg}"
    );
    assert!(msg.contains("returned 2 outcomes for a batch of 3"), "{msg}");
    assert_eq!(summary.call("ocr").unwrap().requeued, 0, "never retried");
}
