//! The threaded executor under real failures: panics, hangs, late reports,
//! contract errors.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use rayorch::prelude::*;
use rayorch::sink::Callback;
use rayorch::{RootOutcome, Runner};

domain!(Doc);
domain!(Page: Doc);

fn collect<T: rayorch::Data>(
    out: rayorch::Output<T>,
    sink: &mut Vec<(u64, Item<T>)>,
) -> impl FnMut(&RootOutcome) + '_ {
    move |o: &RootOutcome| sink.push((o.key, o.get(out)))
}

fn pages_plan(ocr: Call<impl rayorch::StageKind<In = u32, Out = u32>>) -> (Plan, rayorch::Output<Vec<u32>>) {
    let render = Call::map("render", |n: u32| (0..n).collect::<Vec<u32>>());
    Plan::build(|b| {
        let docs = b.source::<Doc, u32>();
        let page = expand::<Page, _, _>(render.apply(docs));
        b.output(reduce(ocr.apply(page)))
    })
    .unwrap()
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
    let (plan, out) = pages_plan(ocr);
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
    let inits = Arc::new(AtomicUsize::new(0));
    let hung_once = Arc::new(AtomicUsize::new(0));
    let (i, h) = (inits.clone(), hung_once.clone());
    let ocr = Call::new("ocr", move || {
        i.fetch_add(1, Ordering::SeqCst);
        let h = h.clone();
        Ok(rayorch::BatchFn::new(move |batch: Vec<u32>| {
            if h.fetch_add(1, Ordering::SeqCst) == 0 {
                // Hang well past the timeout, then report anyway (too late).
                std::thread::sleep(Duration::from_millis(600));
            }
            Ok(batch.into_iter().map(|p| Outcome::Ok(p * 10)).collect())
        }))
    })
    .batch_size(4)
    .replicas(1)
    .timeout(Duration::from_millis(150))
    .recovery(Recovery::RetryBatch(3));
    let (plan, out) = pages_plan(ocr);
    let (got, summary) = run_sorted(&plan, out, &DOCS);
    assert_eq!(got, clean_expected());
    let ocr = summary.call("ocr").unwrap();
    assert_eq!(ocr.replicas_replaced, 1);
    assert_eq!(ocr.attempt_failures, 1, "the timeout is one attempt failure");
    assert_eq!(
        inits.load(Ordering::SeqCst),
        2,
        "the replacement replica ran the factory again"
    );
}

#[test]
fn a_late_report_from_a_replaced_replica_is_rejected_and_counted() {
    // One replica hangs on its first batch long enough for the retry to
    // finish elsewhere; later roots keep the run alive until the late report
    // arrives, so the driver sees it and the commit gate refuses it.
    let hung_once = Arc::new(AtomicUsize::new(0));
    let h = hung_once.clone();
    let ocr = Call::new("ocr", move || {
        let h = h.clone();
        Ok(rayorch::BatchFn::new(move |batch: Vec<u32>| {
            // Margins are wide so a loaded machine cannot time out a normal
            // batch: 10 ms of work against a 150 ms limit; the hang (400 ms)
            // ends well before the ~500 ms the other batches keep the run alive.
            if h.fetch_add(1, Ordering::SeqCst) == 0 {
                std::thread::sleep(Duration::from_millis(400));
            } else {
                std::thread::sleep(Duration::from_millis(10));
            }
            Ok(batch.into_iter().map(|p| Outcome::Ok(p * 10)).collect())
        }))
    })
    .batch_size(2)
    .replicas(2)
    .timeout(Duration::from_millis(150))
    .recovery(Recovery::RetryBatch(3));
    let (plan, out) = pages_plan(ocr);
    let docs: Vec<u32> = vec![2; 100];
    let (got, summary) = run_sorted(&plan, out, &docs);
    assert!(got.iter().all(|(_, i)| *i == Item::Present(vec![0, 10])));
    assert_eq!(summary.call("ocr").unwrap().replicas_replaced, 1);
    assert_eq!(
        summary.rejected_reports, 1,
        "the hung replica's late report is refused"
    );
}

#[test]
fn a_report_with_the_wrong_number_of_outcomes_is_a_contract_error() {
    let ocr = Call::batch("ocr", |batch: Vec<u32>| {
        Ok(batch.into_iter().skip(1).map(Outcome::Ok).collect())
    })
    .batch_size(8)
    .recovery(Recovery::RetryBatch(5));
    let (plan, out) = pages_plan(ocr);
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
