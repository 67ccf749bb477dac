//! Per-record async stages: one future per record, each with its own
//! deadline and retry budget.
//!
//! A batch-level [`AsyncStage`] answers for its whole batch: one hanging
//! request times the batch out, and the Call's recovery (`Isolate` by
//! default) sends its healthy mates again. An [`AsyncRecordStage`] handles one
//! record at a time; its adapter [`Records`] is an `AsyncStage`, so every
//! executor (the `Runner`, `sim`, the distributed worker) runs it unchanged.
//!
//! Invariants of one batch attempt through [`Records`]:
//! - It always returns `Ok` with exactly one outcome per record, in input
//!   order: a record's `Err`, panic (before its future exists or inside it)
//!   or missed deadline is a transient failure of that record only, retried
//!   within the record's budget ([`RecordPolicy`]) after a backoff; a record
//!   that spends it ends `RecordFailure`, its cause listing every attempt.
//!   So the Call's recovery never re-sends a record because a mate failed.
//!   A record's panic is caught here, so it never replaces the replica
//!   (the instance is only reached through `Arc<S>`) on any executor.
//! - `Ok(Outcome::RecordFailure | GroupFailure)` from the stage is final.
//! - A record's outcome depends on its own attempts only (batch invariance):
//!   the backoff is deterministic (no jitter) and nothing is shared between
//!   records but the replica's permits.
//! - At most the Call's `concurrency` record attempts run at once per
//!   replica (the instance's permits), over all its batches in flight. A
//!   record holds a permit during an attempt, not while it backs off; its
//!   deadline starts once it holds one.
//! - Record futures run inside the batch's future, never as tasks of their
//!   own: when an executor drops an attempt (the Call's `timeout`, a
//!   cancellation), every request in it is dropped with it.
//!
//! The policy reaches the adapter through the [`StageContext`] of each batch
//! (from the Call's [`CallConfig`](crate::CallConfig)), like a Call's `param`:
//! two Calls made from one `Call` share replicas but keep their own policy.

use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures::FutureExt;
use tokio::sync::Semaphore;

use crate::stage::quiet::{Quiet, quietly};
use crate::stage::{AsyncStage, BoxError, StageContext, StageResult, panic_text, short_type_name};
use crate::value::{Cause, FailedAttempt, FailureKind, Outcome};

/// What [`AsyncRecordStage::run_one`] returns: the record's outcome, or an
/// error that is retried within the record's budget.
pub type RecordResult<T> = Result<Outcome<T>, BoxError>;

/// Async code that handles one record at a time: an HTTP request per record.
///
/// Build its Call with [`Call::new_async_records`](crate::Call::new_async_records).
/// One shared instance per replica; each record is its own future, with its
/// own deadline and retries (see [`RecordPolicy`] for the defaults), at most
/// the Call's `concurrency` of them running at once per replica. An `Err`, a
/// panic or a missed deadline retries only that record; `Ok(Outcome::..)` is
/// final. The input is cloned for each attempt that may be followed by a
/// retry (wrap a large payload in `Arc`).
///
/// ```
/// use std::sync::Arc;
/// use std::time::Duration;
/// use rayorch::prelude::*;
///
/// #[derive(Domain)]
/// struct Doc;
///
/// /// Stands in for a model server: odd numbers fail once, then answer.
/// struct Square { seen: std::sync::Mutex<Vec<u32>> }
///
/// impl AsyncRecordStage for Square {
///     type In = u32;
///     type Out = u32;
///     async fn run_one(self: Arc<Self>, x: u32, _cx: StageContext) -> RecordResult<u32> {
///         let first = { let mut s = self.seen.lock().unwrap(); let f = !s.contains(&x); s.push(x); f };
///         tokio::time::sleep(Duration::from_millis(1)).await; // the request
///         if x % 2 == 1 && first {
///             return Err("HTTP 503".into()); // retried, this record only
///         }
///         Ok(Outcome::Ok(x * x))
///     }
/// }
///
/// struct Squares {
///     square: RecordCall<Square>,
/// }
///
/// #[pipeline]
/// impl Squares {
///     fn forward(&self, xs: Port<Doc, u32>) -> Port<Doc, u32> {
///         self.square(xs)
///     }
/// }
///
/// let square = Call::new_async_records("square", || Ok(Square { seen: Default::default() }))
///     .batch_size(4)
///     .concurrency(8) // requests in flight per replica
///     .record_timeout(Duration::from_secs(5))
///     .record_retries(2)
///     .record_backoff(Duration::from_millis(1));
/// let (plan, out) = Squares { square }.build_plan().unwrap();
/// let mut got = Vec::new();
/// Runner::new(&plan)
///     .run((0..6).map(|k| (k, k as u32)), Callback(|o: &RootOutcome| got.push((o.key, o.get(out)))))
///     .unwrap();
/// got.sort_by_key(|(k, _)| *k);
/// assert_eq!(got, (0..6).map(|k| (k, Item::Present((k * k) as u32))).collect::<Vec<_>>());
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a rayorch AsyncRecordStage",
    label = "`Records<S>` needs `S: AsyncRecordStage`",
    note = "implement `AsyncRecordStage` (`type In: Clone`, `type Out`, `async fn run_one(self: Arc<Self>, input: In, cx: StageContext) -> RecordResult<Out>`) and build the Call with `Call::new_async_records(name, || Ok(stage))`; a stage that sends one request per batch implements `AsyncStage` instead"
)]
pub trait AsyncRecordStage: Send + Sync + 'static {
    /// One input record; cloned for each attempt that a retry may follow.
    type In: Clone + Send + 'static;
    /// One output record.
    type Out: Send + 'static;
    /// Handle one record. `Err` (or a panic, or missing the record's
    /// deadline) is retried within the record's budget; an `Ok` outcome is
    /// final.
    fn run_one(
        self: Arc<Self>,
        input: Self::In,
        cx: StageContext,
    ) -> impl Future<Output = RecordResult<Self::Out>> + Send + 'static;
}

/// Longest backoff between two attempts of a record, unless
/// [`RecordPolicy::backoff`] itself is longer.
const MAX_BACKOFF: Duration = Duration::from_secs(10);

/// How a per-record async Call treats each record: its deadline, its retry
/// budget and the wait between attempts. Set with
/// [`Call::record_timeout`](crate::Call::record_timeout),
/// [`Call::record_retries`](crate::Call::record_retries) and
/// [`Call::record_backoff`](crate::Call::record_backoff); other Calls ignore
/// it.
///
/// ```
/// use std::time::Duration;
/// use rayorch::RecordPolicy;
/// let p = RecordPolicy::default();
/// assert_eq!((p.timeout, p.retries, p.backoff), (Duration::from_secs(30), 2, Duration::from_millis(100)));
/// assert_eq!(p.backoff_before(2), Duration::from_millis(200));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordPolicy {
    /// Deadline of one attempt of one record, from the moment it holds a
    /// permit (default 30 s; `Duration::MAX` for none).
    pub timeout: Duration,
    /// Attempts after the first (default 2: three attempts in all).
    pub retries: u32,
    /// Wait before the first retry (default 100 ms); it doubles for each
    /// further retry, up to 10 s (or up to `backoff`, when that is longer).
    pub backoff: Duration,
}

impl Default for RecordPolicy {
    fn default() -> Self {
        RecordPolicy {
            timeout: Duration::from_secs(30),
            retries: 2,
            backoff: Duration::from_millis(100),
        }
    }
}

impl RecordPolicy {
    /// The wait before attempt `retry + 1` (`retry` ≥ 1): `backoff`, doubled
    /// per retry after the first, capped.
    pub fn backoff_before(&self, retry: u32) -> Duration {
        let doublings = retry.saturating_sub(1).min(31);
        self.backoff
            .saturating_mul(1 << doublings)
            .min(MAX_BACKOFF.max(self.backoff))
    }
}

/// What a per-record Call's attempts did, counted as they happen (shared by
/// the Call's replicas; the run loop reports the difference over a run).
#[derive(Debug, Default)]
pub(crate) struct RecordCounts {
    attempts: std::sync::atomic::AtomicU64,
    retries: std::sync::atomic::AtomicU64,
    deadline_misses: std::sync::atomic::AtomicU64,
}

impl RecordCounts {
    /// (attempts, retries, deadline misses) so far.
    pub(crate) fn snapshot(&self) -> [u64; 3] {
        [
            self.attempts.load(Ordering::Relaxed),
            self.retries.load(Ordering::Relaxed),
            self.deadline_misses.load(Ordering::Relaxed),
        ]
    }
}

/// An [`AsyncRecordStage`] as an [`AsyncStage`]: one future per record of
/// each batch, under the Call's concurrency. [`Call::new_async_records`]
/// wraps the stage in it; a Call's type is `Call<Async<Records<S>>>`
/// ([`RecordCall<S>`](crate::RecordCall)).
///
/// [`Call::new_async_records`]: crate::Call::new_async_records
pub struct Records<S> {
    stage: Arc<S>,
    /// Record attempts running on this replica; sized by the largest
    /// concurrency among the Calls it serves (`size_permits`).
    permits: Semaphore,
    sized: AtomicUsize,
}

impl<S: AsyncRecordStage> Records<S> {
    /// Wrap one instance.
    pub fn new(stage: S) -> Records<S> {
        Records {
            stage: Arc::new(stage),
            permits: Semaphore::new(0),
            sized: AtomicUsize::new(0),
        }
    }

    /// Grow the permits to `concurrency` (they never shrink: a pool shared
    /// by Calls of different concurrency runs at the largest, as the
    /// executors size its batch slots).
    fn size_permits(&self, concurrency: usize) {
        let want = concurrency.max(1);
        let had = self.sized.fetch_max(want, Ordering::SeqCst);
        if want > had {
            self.permits.add_permits(want - had);
        }
    }

    /// One record through its attempts.
    async fn record(self: Arc<Self>, input: S::In, cx: StageContext) -> Outcome<S::Out> {
        let policy = cx.records;
        let mut input = Some(input);
        let mut failures = Vec::new();
        for attempt in 0..=policy.retries {
            if attempt > 0 {
                tokio::time::sleep(policy.backoff_before(attempt)).await;
            }
            // The last attempt moves the input; earlier ones send a copy.
            let arg = match attempt == policy.retries {
                true => input.take(),
                false => input.clone(),
            };
            let Some(arg) = arg else { break };
            // The permits are never closed: `Err` cannot happen, and would
            // only mean running unbounded.
            let permit = self.permits.acquire().await.ok();
            if let Some(c) = &cx.record_counts {
                c.attempts.fetch_add(1, Ordering::Relaxed);
                c.retries.fetch_add(u64::from(attempt > 0), Ordering::Relaxed);
            }
            let failure = match self.attempt(arg, &cx, policy.timeout, attempt > 0).await {
                Ok(outcome) => return outcome,
                Err(failure) => failure,
            };
            drop(permit);
            if let (Some(c), FailureKind::Timeout) = (&cx.record_counts, failure.attempt.kind) {
                c.deadline_misses.fetch_add(1, Ordering::Relaxed);
            }
            failures.push(failure);
        }
        Outcome::RecordFailure(gave_up(failures))
    }

    async fn attempt(
        &self,
        input: S::In,
        cx: &StageContext,
        deadline: Duration,
        quiet: bool,
    ) -> Result<Outcome<S::Out>, Failed> {
        let stage = self.stage.clone();
        let panicked = |p: Box<dyn std::any::Any + Send>| Failed {
            attempt: FailedAttempt {
                kind: FailureKind::Panic,
                message: format!("panicked: {}", panic_text(&p)),
            },
            error: None,
        };
        // A retry's panic prints nothing: the first attempt's did.
        let fut = quietly(quiet, || {
            catch_unwind(AssertUnwindSafe(|| stage.run_one(input, cx.clone())))
        })
        .map_err(panicked)?;
        let fut = Quiet::new(fut, quiet);
        match tokio::time::timeout(deadline, AssertUnwindSafe(fut).catch_unwind()).await {
            Ok(Ok(Ok(outcome))) => Ok(outcome),
            Ok(Ok(Err(e))) => Err(Failed {
                attempt: FailedAttempt {
                    kind: FailureKind::Error,
                    message: format!("error: {e}"),
                },
                error: Some(Arc::from(e)),
            }),
            Ok(Err(p)) => Err(panicked(p)),
            Err(_) => Err(Failed {
                attempt: FailedAttempt {
                    kind: FailureKind::Timeout,
                    message: format!("timed out after {deadline:?}"),
                },
                error: None,
            }),
        }
    }
}

/// One failed attempt at a record, and the error the stage returned in it.
struct Failed {
    attempt: FailedAttempt,
    error: Option<Arc<dyn std::error::Error + Send + Sync>>,
}

/// The cause of a record that spent its budget: every attempt, in order
/// (in its text and as [`Cause::attempts`]); its kind is the last attempt's
/// (error, panic or timeout), its source the last attempt's own error.
fn gave_up(failures: Vec<Failed>) -> Cause {
    let text: Vec<String> = failures
        .iter()
        .enumerate()
        .map(|(i, f)| format!("{}: {}", i + 1, f.attempt.message))
        .collect();
    let message = format!(
        "record failed after {} attempt(s) ({})",
        failures.len(),
        text.join("; ")
    );
    let source = failures.last().and_then(|f| f.error.clone());
    Cause::after_attempts(message, failures.into_iter().map(|f| f.attempt).collect(), source)
}

impl<S: AsyncRecordStage> AsyncStage for Records<S> {
    type In = S::In;
    type Out = S::Out;

    fn run(
        self: Arc<Self>,
        batch: Vec<S::In>,
        cx: StageContext,
    ) -> impl Future<Output = StageResult<S::Out>> + Send + 'static {
        self.size_permits(cx.concurrency);
        let records: Vec<_> = batch
            .into_iter()
            .map(|input| self.clone().record(input, cx.clone()))
            .collect();
        async move { Ok(futures::future::join_all(records).await) }
    }

    fn erased_name() -> &'static str {
        short_type_name::<S>()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicU32;

    use super::*;
    use crate::sim::{self, SimConfig};
    use crate::{Call, Item, Output, Plan, domain};

    domain!(Doc);

    const RECORDS: u64 = 36;

    /// Per record, by `x % 6`: 0 answers; 1 panics before its future exists,
    /// 2 panics inside it, 3 sleeps past its deadline, each on its first
    /// attempt only; 4 always sleeps past its deadline; 5 always errs.
    /// From 30 on, a typed `RecordFailure` (final, never retried).
    struct Flaky {
        tries: Arc<Vec<AtomicU32>>,
    }

    impl AsyncRecordStage for Flaky {
        type In = u64;
        type Out = u64;
        fn run_one(
            self: Arc<Self>,
            x: u64,
            _cx: StageContext,
        ) -> impl Future<Output = RecordResult<u64>> + Send + 'static {
            let first = self.tries[x as usize].fetch_add(1, Ordering::SeqCst) == 0;
            if x % 6 == 1 && x < 30 && first {
                panic!("record {x}: the request could not be built");
            }
            async move {
                tokio::time::sleep(Duration::from_millis(x % 7)).await;
                match x % 6 {
                    _ if x >= 30 => return Ok(Outcome::RecordFailure(format!("typed {x}").into())),
                    2 if first => panic!("record {x}: the response could not be parsed"),
                    3 if first => tokio::time::sleep(Duration::from_secs(3600)).await,
                    4 => tokio::time::sleep(Duration::from_secs(3600)).await,
                    5 => return Err(format!("record {x}: HTTP 500").into()),
                    _ => {}
                }
                Ok(Outcome::Ok(x * 10))
            }
        }
    }

    fn flaky_plan(tries: &Arc<Vec<AtomicU32>>) -> (Plan, Output<u64>) {
        let tries = tries.clone();
        let flaky = Call::new_async_records("flaky", move || Ok(Flaky { tries: tries.clone() }))
            .batch_size(6)
            .concurrency(4)
            .record_timeout(Duration::from_secs(5))
            .record_retries(2)
            .record_backoff(Duration::from_millis(10));
        Plan::build(|b| {
            let x = b.source::<Doc, u64>();
            b.output(flaky.apply(x))
        })
        .unwrap()
    }

    fn expected(x: u64) -> (u32, Option<u64>) {
        match x % 6 {
            _ if x >= 30 => (1, None),
            0 => (1, Some(x * 10)),
            1..=3 => (2, Some(x * 10)),
            _ => (3, None),
        }
    }

    #[test]
    fn panics_errors_and_deadlines_retry_one_record_deterministically_under_sim() {
        let cfgs = std::iter::once(SimConfig::sequential()).chain((0..10).map(SimConfig::random));
        for cfg in cfgs {
            let runs: Vec<Vec<(u64, Item<u64>)>> = (0..2)
                .map(|_| {
                    let tries: Arc<Vec<AtomicU32>> =
                        Arc::new((0..RECORDS).map(|_| AtomicU32::new(0)).collect());
                    let (plan, out) = flaky_plan(&tries);
                    let run = sim::run_typed(&plan, (0..RECORDS).map(|x| (x, x)), &cfg).unwrap();
                    // Every batch reported one outcome per record: no attempt
                    // failed as a whole, so no batch was re-sent.
                    assert_eq!(run.call_stats[0].attempt_failures, 0, "{cfg:?}");
                    for x in 0..RECORDS {
                        let sent = tries[x as usize].load(Ordering::SeqCst);
                        assert_eq!(sent, expected(x).0, "record {x} attempts, {cfg:?}");
                    }
                    run.outcomes.iter().map(|o| (o.key, o.get(out))).collect()
                })
                .collect();
            assert_eq!(runs[0], runs[1], "the same seed, the same run: {cfg:?}");
            let mut got = runs[0].clone();
            got.sort_by_key(|(k, _)| *k);
            for (x, item) in got {
                match (expected(x).1, &item) {
                    (Some(v), Item::Present(p)) => assert_eq!(*p, v, "{cfg:?}"),
                    (None, Item::Failed(cause)) if x >= 30 => {
                        assert_eq!(cause.message(), format!("typed {x}"))
                    }
                    (None, Item::Failed(cause)) => {
                        let m = cause.message();
                        assert!(m.starts_with("record failed after 3 attempt(s)"), "{m}");
                        let want = match x % 6 {
                            4 => "timed out after 5s",
                            _ => "error: record",
                        };
                        assert_eq!(m.matches(want).count(), 3, "{m}");
                    }
                    other => panic!("record {x}: {other:?}, {cfg:?}"),
                }
            }
        }
    }

    /// Sleeps a little per record, counting how many run at once.
    struct Gauge {
        now: AtomicUsize,
        peak: Arc<AtomicUsize>,
    }

    impl AsyncRecordStage for Gauge {
        type In = u32;
        type Out = u32;
        async fn run_one(self: Arc<Self>, x: u32, _cx: StageContext) -> RecordResult<u32> {
            let n = self.now.fetch_add(1, Ordering::SeqCst) + 1;
            self.peak.fetch_max(n, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(10)).await;
            self.now.fetch_sub(1, Ordering::SeqCst);
            Ok(Outcome::Ok(x))
        }
    }

    #[test]
    fn a_replica_runs_at_most_concurrency_records_at_once() {
        for concurrency in [1, 3, 16] {
            let peak = Arc::new(AtomicUsize::new(0));
            let p = peak.clone();
            let gauge = Call::new_async_records("gauge", move || {
                Ok(Gauge {
                    now: AtomicUsize::new(0),
                    peak: p.clone(),
                })
            })
            .batch_size(8)
            .concurrency(concurrency);
            let (plan, out) = Plan::build(|b| {
                let x = b.source::<Doc, u32>();
                b.output(gauge.apply(x))
            })
            .unwrap();
            let run =
                sim::run_typed(&plan, (0..16u64).map(|k| (k, k as u32)), &SimConfig::sequential()).unwrap();
            assert!(run.outcomes.iter().all(|o| o.get(out).present().is_some()));
            // One replica, one batch of 8 at a time under `sim`.
            assert_eq!(
                peak.load(Ordering::SeqCst),
                concurrency.min(8),
                "concurrency {concurrency}"
            );
        }
    }

    #[test]
    fn backoff_doubles_up_to_its_cap() {
        let p = RecordPolicy {
            backoff: Duration::from_secs(1),
            ..RecordPolicy::default()
        };
        let waits: Vec<u64> = (1..=6).map(|r| p.backoff_before(r).as_secs()).collect();
        assert_eq!(waits, vec![1, 2, 4, 8, 10, 10]);
        let long = RecordPolicy {
            backoff: Duration::from_secs(60),
            ..RecordPolicy::default()
        };
        assert_eq!(long.backoff_before(5), Duration::from_secs(60));
        assert_eq!(long.backoff_before(u32::MAX), Duration::from_secs(60));
    }

    #[test]
    fn failure_texts_name_the_stage_not_the_adapter() {
        let tries = Arc::new(Vec::new());
        let (plan, _) = flaky_plan(&tries);
        assert_eq!(plan.calls()[0].runtime.stage_name(), "Flaky");
    }
}
