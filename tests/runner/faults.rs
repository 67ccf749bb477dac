//! Every fault path of the threaded Runner ends: async panics (in the future
//! and in the synchronous part of `run`), async timeouts without a busy
//! run loop, failing replica factories, `Recovery::Abort`.

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use rayorch::prelude::*;
use rayorch::sink::Callback;
use rayorch::{AsyncStage, FailureLevel, RootOutcome, RunError, RunSummary, Runner, StageContext};

domain!(Doc);
domain!(Page: Doc);

type Rows = Vec<(u64, Item<Vec<u32>>)>;

const DOCS: [u32; 5] = [3, 0, 7, 1, 12];

fn clean_expected() -> Rows {
    DOCS.iter()
        .enumerate()
        .map(|(i, &n)| (i as u64, Item::Present((0..n).map(|p| p * 10).collect())))
        .collect()
}

fn source() -> impl Iterator<Item = (u64, u32)> {
    DOCS.into_iter().enumerate().map(|(i, n)| (i as u64, n))
}

fn collect(
    out: rayorch::Output<Vec<u32>>,
    rows: &mut Rows,
) -> Callback<impl FnMut(&RootOutcome) + Send + '_> {
    Callback(move |o: &RootOutcome| rows.push((o.key, o.get(out))))
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Fault {
    /// Panic in the synchronous part of `run` (before the future exists).
    SyncPanic,
    /// Panic inside the future, after an await point.
    FuturePanic,
    /// Never finish (an HTTP call that hangs).
    Hang,
}

/// An async OCR stand-in whose first `faulty` attempts fail with `fault`.
struct Remote {
    fault: Fault,
    faulty: usize,
    attempts: Arc<AtomicUsize>,
}

impl AsyncStage for Remote {
    type In = u32;
    type Out = u32;
    fn run(
        self: Arc<Self>,
        batch: Vec<u32>,
        _cx: StageContext,
    ) -> impl Future<Output = StageResult<u32>> + Send {
        let n = self.attempts.fetch_add(1, Ordering::SeqCst);
        let fault = (n < self.faulty).then_some(self.fault);
        if fault == Some(Fault::SyncPanic) {
            panic!("remote: the request could not be built");
        }
        async move {
            tokio::task::yield_now().await;
            match fault {
                Some(Fault::FuturePanic) => panic!("remote: the response could not be parsed"),
                Some(Fault::Hang) => tokio::time::sleep(Duration::from_secs(3600)).await,
                _ => {}
            }
            Ok(batch.into_iter().map(|p| Outcome::Ok(p * 10)).collect())
        }
    }
}

fn remote(fault: Fault, faulty: usize, attempts: &Arc<AtomicUsize>) -> Call<rayorch::Async<Remote>> {
    let attempts = attempts.clone();
    Call::new_async("remote", move || {
        Ok(Remote {
            fault,
            faulty,
            attempts: attempts.clone(),
        })
    })
    .batch_size(4)
    .concurrency(2)
}

fn run_sorted(plan: &Plan, out: rayorch::Output<Vec<u32>>) -> (Rows, RunSummary) {
    let mut rows = Vec::new();
    let summary = Runner::new(plan)
        .window(4)
        .run(source(), collect(out, &mut rows))
        .unwrap();
    rows.sort_by_key(|(k, _)| *k);
    (rows, summary)
}

/// Counts, for the observer: retried Grains dispatched, and batch ends that
/// replaced their replica (with their error text).
#[derive(Default)]
struct Faults {
    retried: usize,
    replaced: Vec<String>,
}

struct FaultWatch(Arc<std::sync::Mutex<Faults>>);

impl rayorch::Observer for FaultWatch {
    fn batch_dispatched(&mut self, b: &rayorch::BatchDispatched<'_>) {
        self.0.lock().unwrap().retried += b.retries;
    }
    fn batch_finished(&mut self, b: &rayorch::BatchFinished<'_>) {
        if b.replica_replaced {
            let error = b.attempt_error.unwrap_or("").to_string();
            self.0.lock().unwrap().replaced.push(error);
        }
    }
}

fn assert_one_panic_recovered(fault: Fault) {
    let attempts = Arc::new(AtomicUsize::new(0));
    let (plan, out) = common::pages_plan(remote(fault, 1, &attempts).recovery(Recovery::RetryBatch(2)));
    let seen = Arc::new(std::sync::Mutex::new(Faults::default()));
    let mut rows = Vec::new();
    let summary = Runner::new(&plan)
        .window(4)
        .observe(FaultWatch(seen.clone()))
        .run(source(), collect(out, &mut rows))
        .unwrap();
    rows.sort_by_key(|(k, _)| *k);
    let seen = seen.lock().unwrap();
    assert_eq!(seen.replaced.len(), 1, "the observer saw the replica replaced");
    assert!(
        seen.replaced[0].contains("stage panicked: remote:"),
        "{:?}",
        seen.replaced
    );
    assert!(
        seen.retried >= 1,
        "the failed batch's Grains were dispatched again"
    );
    assert_eq!(rows, clean_expected(), "every record recovered by the retry");
    let m = summary.call("remote").unwrap();
    assert_eq!(m.attempt_failures, 1);
    assert_eq!(m.replicas_replaced, 1, "the panicking instance is replaced");
    assert_eq!(m.committed, 23);
    assert_eq!(summary.present, 5);
}

#[test]
fn an_async_stage_panicking_inside_its_future_is_an_attempt_failure() {
    assert_one_panic_recovered(Fault::FuturePanic);
}

#[test]
fn an_async_stage_panicking_in_the_synchronous_part_of_run_is_an_attempt_failure() {
    assert_one_panic_recovered(Fault::SyncPanic);
}

#[test]
fn an_async_stage_that_always_panics_fails_its_records_and_the_run_ends() {
    let attempts = Arc::new(AtomicUsize::new(0));
    let (plan, out) = common::pages_plan(
        remote(Fault::FuturePanic, usize::MAX, &attempts).recovery(Recovery::RetryBatch(1)),
    );
    let (rows, summary) = run_sorted(&plan, out);
    for (k, item) in &rows {
        match DOCS[*k as usize] {
            0 => assert_eq!(item, &Item::Present(vec![])),
            _ => {
                let cause = item.cause().expect("a failed document");
                assert!(cause.message().contains("panicked"), "{cause:?}");
            }
        }
    }
    assert_eq!(summary.roots, 5);
    // The documents' lists are Suppressed (a Page failed), carrying the cause.
    assert_eq!(summary.failed + summary.suppressed, 4);
    let m = summary.call("remote").unwrap();
    // Two attempts in flight on one instance may both panic: the instance is
    // replaced once for them.
    assert!(m.replicas_replaced >= 1 && m.replicas_replaced <= m.attempt_failures);
}

/// A hanging async attempt is timed out by the run loop under paused time: the
/// test takes no wall time, and the run loop wakes only for real events.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn an_async_timeout_is_retried_on_a_fresh_replica_and_the_run_loop_never_spins() {
    let attempts = Arc::new(AtomicUsize::new(0));
    let call = remote(Fault::Hang, usize::MAX, &attempts)
        .batch_size(8)
        .timeout(Duration::from_secs(1))
        .recovery(Recovery::RetryBatch(2));
    let (plan, out) = common::pages_plan(call);
    let mut rows = Vec::new();
    let summary = Runner::new(&plan)
        .run_async([(0u64, 3u32)], collect(out, &mut rows))
        .await
        .unwrap();
    let cause = rows[0]
        .1
        .cause()
        .expect("the document failed")
        .message()
        .to_string();
    assert!(cause.contains("timed out after 1s"), "{cause}");
    let m = summary.call("remote").unwrap();
    assert_eq!((m.rpcs, m.attempt_failures, m.replicas_replaced), (3, 3, 3));
    // The run loop wakes for the two first replica starts (render, remote),
    // render's report, three deadlines and two replacement starts (the third
    // replacement is not waited for): 8 at most, never in between.
    assert!(summary.loop_wakeups <= 8, "{} wake-ups", summary.loop_wakeups);
    assert_eq!(attempts.load(Ordering::SeqCst), 3);
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn an_async_attempt_that_times_out_once_recovers_every_record() {
    let attempts = Arc::new(AtomicUsize::new(0));
    let call = remote(Fault::Hang, 1, &attempts)
        .timeout(Duration::from_millis(250))
        .recovery(Recovery::RetryBatch(1));
    let (plan, out) = common::pages_plan(call);
    let mut rows = Vec::new();
    let summary = Runner::new(&plan)
        .window(4)
        .run_async(source(), collect(out, &mut rows))
        .await
        .unwrap();
    rows.sort_by_key(|(k, _)| *k);
    assert_eq!(rows, clean_expected());
    let m = summary.call("remote").unwrap();
    assert_eq!((m.attempt_failures, m.replicas_replaced), (1, 1));
}

/// CPU time of the calling thread, in clock ticks (Linux).
#[cfg(target_os = "linux")]
fn thread_cpu_ticks() -> u64 {
    let stat = std::fs::read_to_string("/proc/thread-self/stat").unwrap();
    // Fields after the parenthesised command name; utime and stime are the
    // 14th and 15th fields of the whole line.
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
}

/// Real time, the run loop on this thread: while the only attempt hangs, the
/// run loop sleeps until the deadline instead of polling it.
#[cfg(target_os = "linux")]
#[tokio::test(flavor = "current_thread")]
async fn the_run_loop_uses_no_cpu_while_waiting_on_an_async_deadline() {
    let attempts = Arc::new(AtomicUsize::new(0));
    let call = remote(Fault::Hang, 2, &attempts)
        .timeout(Duration::from_millis(400))
        .recovery(Recovery::RetryBatch(2));
    let (plan, out) = common::pages_plan(call);
    let mut rows = Vec::new();
    let before = thread_cpu_ticks();
    let started = std::time::Instant::now();
    let summary = Runner::new(&plan)
        .run_async([(0u64, 2u32)], collect(out, &mut rows))
        .await
        .unwrap();
    let waited = started.elapsed();
    let spent = thread_cpu_ticks() - before;
    assert_eq!(rows, vec![(0, Item::Present(vec![0, 10]))]);
    assert!(
        waited >= Duration::from_millis(800),
        "two timeouts were waited for"
    );
    // A spinning run loop would burn ~80 ticks (800 ms at 100 Hz) here.
    assert!(
        spent <= 10,
        "the run-loop thread used {spent} ticks while waiting"
    );
    assert!(summary.loop_wakeups <= 10, "{}", summary.loop_wakeups);
}

#[test]
fn a_hung_blocking_attempt_times_out_and_its_replica_is_replaced() {
    let released = Arc::new(AtomicBool::new(false));
    let first = Arc::new(AtomicBool::new(true));
    let (r, f) = (released.clone(), first.clone());
    let ocr = Call::batch("ocr", move |batch: Vec<u32>| {
        if f.swap(false, Ordering::SeqCst) {
            // Hangs until the test ends (a stuck native call).
            while !r.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        Ok(batch.into_iter().map(|p| Outcome::Ok(p * 10)).collect())
    })
    .batch_size(4)
    .timeout(Duration::from_millis(100))
    .recovery(Recovery::RetryBatch(1));
    let (plan, out) = common::pages_plan(ocr);
    let (rows, summary) = run_sorted(&plan, out);
    released.store(true, Ordering::SeqCst);
    assert_eq!(rows, clean_expected());
    let m = summary.call("ocr").unwrap();
    assert_eq!((m.attempt_failures, m.replicas_replaced), (1, 1));
}

/// A blocking stage that never returns on `poison` (a parser looping on one
/// bad input) until `released`: every other page is parsed at once.
fn parse_hanging_on(poison: fn(u32) -> bool, released: &Arc<AtomicBool>) -> rayorch::FnCall<u32, u32> {
    let r = released.clone();
    Call::batch("parse", move |batch: Vec<u32>| {
        if batch.iter().any(|&p| poison(p)) {
            while !r.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        Ok(batch.into_iter().map(|p| Outcome::Ok(p * 10)).collect())
    })
    .batch_size(4)
    .timeout(Duration::from_millis(150))
}

#[test]
fn a_stage_that_hangs_on_one_input_fails_that_root_alone_and_counts_its_threads() {
    let released = Arc::new(AtomicBool::new(false));
    // Page 10 exists in the last document only (12 pages).
    let (plan, out) = common::pages_plan(parse_hanging_on(|p| p == 10, &released));
    let (rows, summary) = run_sorted(&plan, out);
    released.store(true, Ordering::SeqCst);
    let mut expected = clean_expected();
    expected.pop();
    assert_eq!(rows[..4], expected[..], "every other document is whole");
    let cause = rows[4].1.cause().expect("the last document failed");
    assert!(cause.message().contains("timed out after 150ms"), "{cause:?}");
    assert_eq!(summary.present, 4);
    let m = summary.call("parse").unwrap();
    // The batch holding page 10, its retry, then the halves down to page 10
    // alone: each timed out and left its thread running.
    assert!(m.threads_abandoned >= 3, "{m:?}");
    assert_eq!(
        m.threads_abandoned, m.attempt_failures,
        "every failed attempt timed out"
    );
    assert_eq!(m.replicas_replaced, m.threads_abandoned);
    assert_eq!(summary.threads_abandoned, m.threads_abandoned);
    let timeouts: u64 = summary
        .failures
        .iter()
        .filter(|f| f.level == FailureLevel::GrainFailed && f.kind == FailureKind::Timeout)
        .map(|f| f.count)
        .sum();
    assert_eq!(timeouts, 1, "{:?}", summary.failures);
}

#[test]
fn past_the_cap_of_stuck_threads_a_call_fails_its_remaining_work_instead_of_leaking() {
    let released = Arc::new(AtomicBool::new(false));
    let parse = parse_hanging_on(|_| true, &released)
        .timeout(Duration::from_millis(50))
        .max_abandoned_threads(2);
    let (plan, out) = common::pages_plan(parse);
    let (rows, summary) = run_sorted(&plan, out);
    released.store(true, Ordering::SeqCst);
    let m = summary.call("parse").unwrap();
    assert_eq!(m.threads_abandoned, 2, "{m:?}");
    assert_eq!(summary.threads_abandoned, 2);
    // The first stuck thread's replica was replaced; the second slot was
    // retired (the cap), not replaced.
    assert_eq!(m.replicas_replaced, 1, "{m:?}");
    // The empty document needs no parse; every other one failed, most of
    // them without a thread: the Call stopped.
    assert_eq!(rows[1], (1, Item::Present(vec![])));
    let causes: Vec<String> = rows
        .iter()
        .filter_map(|(_, item)| item.cause().map(|c| c.message().to_string()))
        .collect();
    assert_eq!(causes.len(), 4, "{rows:?}");
    let stopped = causes
        .iter()
        .filter(|c| c.contains("max_abandoned_threads"))
        .count();
    assert!(stopped >= 3, "{causes:?}");
    assert!(
        causes
            .iter()
            .any(|c| c.contains("Call `parse` stopped: 2 of its replica threads")),
        "{causes:?}"
    );
}

fn expect_factory_error(result: Result<RunSummary, RunError>, call: &str, cause: &str) {
    match result {
        Err(RunError::ReplicaFactory {
            call: c,
            stage,
            cause: why,
        }) => {
            assert_eq!(c, call);
            assert!(!stage.is_empty());
            assert!(why.contains(cause), "{why}");
        }
        other => panic!("expected a replica factory error, got {other:?}"),
    }
}

fn run_plan(plan: &Plan) -> Result<RunSummary, RunError> {
    Runner::new(plan).run(source(), Callback(|_: &RootOutcome| {}))
}

#[test]
fn a_blocking_factory_error_or_panic_is_a_typed_error_naming_the_call() {
    let failing: FnCall<u32, u32> = Call::new("ocr", || Err("model weights not found".into()));
    let (plan, _) = common::pages_plan(failing);
    expect_factory_error(run_plan(&plan), "ocr", "model weights not found");

    let panicking: FnCall<u32, u32> = Call::new("ocr", || panic!("no GPU"));
    let (plan, _) = common::pages_plan(panicking);
    expect_factory_error(run_plan(&plan), "ocr", "panicked: no GPU");
}

#[test]
fn an_async_factory_error_or_panic_is_a_typed_error_naming_the_call() {
    let failing: Call<rayorch::Async<Remote>> =
        Call::new_async("remote", || Err("no endpoint configured".into()));
    let (plan, _) = common::pages_plan(failing);
    expect_factory_error(run_plan(&plan), "remote", "no endpoint configured");

    let panicking: Call<rayorch::Async<Remote>> = Call::new_async("remote", || panic!("bad URL"));
    let (plan, _) = common::pages_plan(panicking);
    let err = run_plan(&plan).unwrap_err();
    assert!(err.to_string().contains("Call `remote`"), "{err}");
    expect_factory_error(Err(err), "remote", "panicked: bad URL");
}

#[test]
fn abort_ends_the_run_with_the_typed_error_without_waiting_on_unrelated_work() {
    let released = Arc::new(AtomicBool::new(false));
    let boom_calls = Arc::new(AtomicUsize::new(0));
    let (r, b) = (released.clone(), boom_calls.clone());
    // `slow` hangs on root 0 until the test releases it, after `run` returned.
    let slow = Call::map("slow", move |x: u32| {
        if x == 0 {
            while !r.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        x
    });
    let boom = Call::batch("boom", move |_: Vec<u32>| -> StageResult<u32> {
        b.fetch_add(1, Ordering::SeqCst);
        Err("the index is corrupt".into())
    })
    .batch_size(1)
    .recovery(Recovery::Abort);
    let (plan, _) = Plan::build(|b| {
        let x = b.source::<Doc, u32>();
        (b.output(slow.apply(x)), b.output(boom.apply(x)))
    })
    .unwrap();
    let mut seen = 0;
    let result = Runner::new(&plan).window(2).run(
        (0..1000u64).map(|k| (k, k as u32)),
        Callback(|_: &RootOutcome| seen += 1),
    );
    released.store(true, Ordering::SeqCst);
    match result {
        Err(RunError::Aborted { call, cause, .. }) => {
            assert_eq!(call, "boom");
            assert!(cause.contains("the index is corrupt"), "{cause}");
        }
        other => panic!("expected an abort, got {other:?}"),
    }
    assert_eq!(boom_calls.load(Ordering::SeqCst), 1, "no attempt after the abort");
    assert_eq!(seen, 0, "root 0 never finished: `run` did not wait for `slow`");
}

#[test]
fn a_panicking_sink_is_a_typed_sink_error() {
    let (plan, _) = common::pages_plan(Call::map("ocr", |p: u32| p));
    let result = Runner::new(&plan).run(
        source(),
        Callback(|o: &RootOutcome| {
            if o.key == 2 {
                panic!("disk on fire");
            }
        }),
    );
    match result {
        Err(RunError::Sink(msg)) => assert!(msg.contains("panicked: disk on fire"), "{msg}"),
        other => panic!("expected a sink error, got {other:?}"),
    }
}
