//! The run's figures as Prometheus metrics, through the `metrics` facade.
//!
//! Everything is recorded into the watch's own Prometheus recorder (a
//! local recorder: two runs in one process keep separate figures), from the
//! run's [`Progress`] snapshots (counters set to the run's own cumulative
//! counts, gauges to the levels now) and from each finished batch (the two
//! histograms). Names follow the Prometheus conventions: a `rayorch_`
//! prefix, the unit in the name, `_total` on counters.
//!
//! | metric | type | labels | what |
//! | --- | --- | --- | --- |
//! | `rayorch_call_queue_ready_grains` | gauge | call | Grains queued for a first attempt |
//! | `rayorch_call_queue_recovery_grains` | gauge | call | Grains queued for a retry |
//! | `rayorch_call_in_flight_grains` | gauge | call | Grains in batches not yet reported |
//! | `rayorch_call_busy_replicas` | gauge | call | batches in flight: replicas (worker slots) at work |
//! | `rayorch_call_replicas` | gauge | call | replicas (live worker slots) that can run the Call |
//! | `rayorch_call_backlog_seconds` | gauge | call | the scale signal: queued and in-flight Grains × measured replica-seconds per Grain ÷ replicas (+Inf with work and no replica; absent until a batch has finished) |
//! | `rayorch_call_backlog_replica_seconds` | gauge | call | the same work in replica-seconds (queued × seconds per Grain, not divided): the autoscaler's input (`deploy/k8s/keda-scaledobject.yaml`) |
//! | `rayorch_call_batches_total` | counter | call | batches dispatched |
//! | `rayorch_call_grains_dispatched_total` | counter | call | Grains dispatched, retries included |
//! | `rayorch_call_grains_committed_total` | counter | call | Grains committed present |
//! | `rayorch_call_retries_total` | counter | call | Grains put back for a retry (whole-batch recovery) |
//! | `rayorch_call_shape_key_panics_total` | counter | call | Grains whose shape key function panicked |
//! | `rayorch_call_record_attempts_total` | counter | call | per-record Calls: record attempts, retries included |
//! | `rayorch_call_record_retries_total` | counter | call | per-record Calls: attempts after a record's first |
//! | `rayorch_call_record_deadline_misses_total` | counter | call | per-record Calls: attempts past the record deadline |
//! | `rayorch_call_failed_grains_total` | counter | call, kind (`record`, `group`, `error`, `panic`, `timeout`, `contract`, …) | Grains sealed Failed at the Call, by the kind of their cause: summed over a Domain's Calls, `rayorch_failures_total{level="grain failed"}` |
//! | `rayorch_call_mean_wait_seconds` | gauge | call | Calls with a batch delay or a shape key: mean time a dispatched Grain waited in the Call's queue (batch delay plus wait for a replica) |
//! | `rayorch_call_key_batches_total` | counter | call, key | shaped Calls: first-attempt batches per shape key (`other`: keys past the first 256) |
//! | `rayorch_call_key_grains_total` | counter | call, key | shaped Calls: Grains in those batches |
//! | `rayorch_call_attempt_failures_total` | counter | call | whole attempts that failed (error, panic, timeout) |
//! | `rayorch_call_suppressed_grains_total` | counter | call, when (`before_dispatch`, `in_flight`) | Grains a barrier sealed |
//! | `rayorch_call_stale_reports_total` | counter | call | Grain reports the commit gate fenced |
//! | `rayorch_call_replicas_replaced_total` | counter | call | replicas torn down and restarted |
//! | `rayorch_call_threads_abandoned_total` | counter | call | blocking replica threads given up on past the Call's timeout, still running then |
//! | `rayorch_call_mixed_parent_batches_total` | counter | call | batches holding Grains of several parents |
//! | `rayorch_call_batch_fill_ratio` | gauge | call | mean batch size over the Call's batch size |
//! | `rayorch_call_batch_duration_seconds` | histogram | call | batch run times; `_sum` is the Call's busy seconds |
//! | `rayorch_call_batch_grains` | histogram | call | Grains per batch |
//! | `rayorch_domain_published_total` | counter | domain | Entities published (see `DomainCounts`) |
//! | `rayorch_domain_done_total` | counter | domain | Entities done |
//! | `rayorch_domain_failed_total` | counter | domain | Entities failed |
//! | `rayorch_domain_suppressed_total` | counter | domain | Entities suppressed |
//! | `rayorch_roots_total` | counter | outcome (`present`, `dropped`, `failed`, `suppressed`) | roots handed to the sink |
//! | `rayorch_roots_duplicate_keys_total` | counter | | roots refused for a repeated key |
//! | `rayorch_roots_abandoned_total` | counter | | live roots a cancellation failed |
//! | `rayorch_roots_journal_skipped_total` | counter | | roots a resumed run found finished |
//! | `rayorch_failures_total` | counter | domain, level, kind | failures by Domain, level (`root failed`, `root suppressed`, `grain failed`) and kind |
//! | `rayorch_window_roots` | gauge | | roots in the window now |
//! | `rayorch_window_roots_limit` | gauge | | the root window |
//! | `rayorch_window_children` | gauge | | child Entities live now |
//! | `rayorch_window_children_limit` | gauge | | the children window (absent when off) |
//! | `rayorch_journal_commits_total` | counter | | journal commits |
//! | `rayorch_journal_lag_roots` | gauge | | roots handed out, not yet committed |
//! | `rayorch_loop_wakeups_total` | counter | | run-loop turns (`rayorch_driver_wakeups_total`: the same figure under its old name, for one release) |
//! | `rayorch_rejected_reports_total` | counter | | reports for batches no longer in flight |
//! | `rayorch_backpressure_holds_total` | counter | | dispatches held by backpressure |
//! | `rayorch_run_wall_seconds` | gauge | | time since the run started (at its last snapshot) |
//! | `rayorch_run_finished` | gauge | | 1 once the run's last snapshot is in |
//! | `rayorch_worker_grains_committed_total` | counter | worker, call | distributed: Grains committed per worker |
//! | `rayorch_dist_worker_slots` | gauge | worker, call | distributed: slots of each live worker |
//! | `rayorch_dist_batches_published_total` | counter | | distributed: batches published |
//! | `rayorch_dist_leases_expired_total` | counter | | distributed: owner leases expired |
//! | `rayorch_dist_redelivered_commits_total` | counter | | distributed: commits from a JetStream redelivery |
//! | `rayorch_dist_stale_reports_fenced_total` | counter | | distributed: reports the fence refused |
//! | `rayorch_dist_payload_{inline,stored,fetched}_bytes_total` | counter | | distributed: payload bytes inline, stored, fetched back |
//! | `rayorch_dist_workers_refused_total` | counter | | distributed: workers refused for a fingerprint mismatch |

use std::sync::Mutex;

use metrics::{Histogram, Label, Recorder, counter, gauge, histogram, with_local_recorder};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle, PrometheusRecorder};
use rayorch::{BatchFinished, Progress};

const DURATION: &str = "rayorch_call_batch_duration_seconds";
const GRAINS: &str = "rayorch_call_batch_grains";
const DURATION_BUCKETS: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0,
];
const GRAIN_BUCKETS: &[f64] = &[1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0];

pub(super) struct Metrics {
    recorder: PrometheusRecorder,
    handle: PrometheusHandle,
    /// Per Call index: its two histograms, registered at its first batch.
    histograms: Mutex<Vec<Option<(Histogram, Histogram)>>>,
}

impl Metrics {
    pub(super) fn new() -> Metrics {
        let builder = PrometheusBuilder::new()
            .set_buckets_for_metric(Matcher::Full(DURATION.into()), DURATION_BUCKETS)
            .and_then(|b| b.set_buckets_for_metric(Matcher::Full(GRAINS.into()), GRAIN_BUCKETS));
        // Both bucket lists are constant and non-empty: the builder cannot
        // refuse them; without buckets the histograms render as summaries.
        let recorder = builder
            .unwrap_or_else(|_| PrometheusBuilder::new())
            .build_recorder();
        let handle = recorder.handle();
        with_local_recorder(&recorder, describe);
        Metrics {
            recorder,
            handle,
            histograms: Mutex::new(Vec::new()),
        }
    }

    pub(super) fn render(&self) -> String {
        self.handle.render()
    }

    fn record<T>(&self, f: impl FnOnce() -> T) -> T {
        with_local_recorder(&self.recorder as &dyn Recorder, f)
    }

    /// One finished batch into the histograms.
    pub(super) fn batch(&self, b: &BatchFinished<'_>) {
        let mut hs = self.histograms.lock().unwrap_or_else(|p| p.into_inner());
        if hs.len() <= b.call_index {
            hs.resize_with(b.call_index + 1, || None);
        }
        let (duration, grains) = hs[b.call_index].get_or_insert_with(|| {
            let call = b.call.to_string();
            self.record(|| {
                (
                    histogram!(DURATION, "call" => call.clone()),
                    histogram!(GRAINS, "call" => call),
                )
            })
        });
        duration.record(b.duration.as_secs_f64());
        grains.record(b.size as f64);
    }

    /// One snapshot into the counters and gauges. Returns each Call's
    /// backlog in seconds (`None` until one of its batches has finished).
    pub(super) fn progress(&self, p: &Progress<'_>) -> Vec<Option<f64>> {
        self.record(|| record_progress(p))
    }
}

fn record_progress(p: &Progress<'_>) -> Vec<Option<f64>> {
    let s = p.summary;
    let mut backlog = Vec::with_capacity(p.calls.len());
    for (m, live) in s.calls.iter().zip(p.calls) {
        let call = || m.name.clone();
        gauge!("rayorch_call_queue_ready_grains", "call" => call()).set(live.ready as f64);
        gauge!("rayorch_call_queue_recovery_grains", "call" => call()).set(live.recovery as f64);
        gauge!("rayorch_call_in_flight_grains", "call" => call()).set(live.in_flight_grains as f64);
        gauge!("rayorch_call_busy_replicas", "call" => call()).set(live.in_flight_batches as f64);
        gauge!("rayorch_call_replicas", "call" => call()).set(live.replicas as f64);
        counter!("rayorch_call_batches_total", "call" => call()).absolute(m.rpcs);
        counter!("rayorch_call_grains_dispatched_total", "call" => call()).absolute(m.grains_dispatched);
        counter!("rayorch_call_grains_committed_total", "call" => call()).absolute(m.committed);
        counter!("rayorch_call_retries_total", "call" => call()).absolute(m.requeued);
        counter!("rayorch_call_shape_key_panics_total", "call" => call()).absolute(m.shape_key_panics);
        counter!("rayorch_call_record_attempts_total", "call" => call()).absolute(m.record_attempts);
        counter!("rayorch_call_record_retries_total", "call" => call()).absolute(m.record_retries);
        counter!("rayorch_call_record_deadline_misses_total", "call" => call())
            .absolute(m.record_deadline_misses);
        for (kind, n) in &m.failed_grains {
            counter!("rayorch_call_failed_grains_total", "call" => call(), "kind" => kind.as_str())
                .absolute(*n);
        }
        if let Some(w) = m.mean_wait_s {
            gauge!("rayorch_call_mean_wait_seconds", "call" => call()).set(w);
        }
        for k in &m.batches_by_key {
            let key = k.key.map_or_else(|| "other".to_string(), |k| k.to_string());
            counter!("rayorch_call_key_batches_total", "call" => call(), "key" => key.clone())
                .absolute(k.batches);
            counter!("rayorch_call_key_grains_total", "call" => call(), "key" => key).absolute(k.grains);
        }
        counter!("rayorch_call_attempt_failures_total", "call" => call()).absolute(m.attempt_failures);
        counter!("rayorch_call_suppressed_grains_total", "call" => call(), "when" => "before_dispatch")
            .absolute(m.suppressed_before_dispatch);
        counter!("rayorch_call_suppressed_grains_total", "call" => call(), "when" => "in_flight")
            .absolute(m.suppressed_in_flight);
        counter!("rayorch_call_stale_reports_total", "call" => call()).absolute(m.stale_grains);
        counter!("rayorch_call_replicas_replaced_total", "call" => call()).absolute(m.replicas_replaced);
        counter!("rayorch_call_threads_abandoned_total", "call" => call()).absolute(m.threads_abandoned);
        counter!("rayorch_call_mixed_parent_batches_total", "call" => call())
            .absolute(m.mixed_parent_batches);
        gauge!("rayorch_call_batch_fill_ratio", "call" => call()).set(m.fill);
        // Work waiting in replica-seconds, then over the live replicas: the
        // first is what an autoscaler divides by one more worker's share.
        let work = replica_seconds(
            live.ready + live.recovery + live.in_flight_grains,
            m.busy_s,
            m.grains_dispatched.saturating_sub(live.in_flight_grains as u64),
        );
        let b = work.map(|w| over_replicas(w, live.replicas));
        if let (Some(w), Some(b)) = (work, b) {
            gauge!("rayorch_call_backlog_seconds", "call" => call()).set(b);
            gauge!("rayorch_call_backlog_replica_seconds", "call" => call()).set(w);
        }
        backlog.push(b);
    }
    for d in &s.domains {
        let domain = || d.domain.to_string();
        counter!("rayorch_domain_published_total", "domain" => domain()).absolute(d.published);
        counter!("rayorch_domain_done_total", "domain" => domain()).absolute(d.done);
        counter!("rayorch_domain_failed_total", "domain" => domain()).absolute(d.failed);
        counter!("rayorch_domain_suppressed_total", "domain" => domain()).absolute(d.suppressed);
    }
    for (outcome, n) in [
        ("present", s.present),
        ("dropped", s.dropped),
        ("failed", s.failed),
        ("suppressed", s.suppressed),
    ] {
        counter!("rayorch_roots_total", "outcome" => outcome).absolute(n);
    }
    counter!("rayorch_roots_duplicate_keys_total").absolute(s.duplicate_keys);
    counter!("rayorch_roots_abandoned_total").absolute(s.abandoned);
    counter!("rayorch_roots_journal_skipped_total").absolute(s.journal_skipped);
    for f in &s.failures {
        counter!("rayorch_failures_total", "domain" => f.domain.clone(), "level" => f.level.as_str(), "kind" => f.kind.as_str())
            .absolute(f.count);
    }
    let a = p.admission;
    gauge!("rayorch_window_roots").set(a.roots as f64);
    gauge!("rayorch_window_roots_limit").set(a.window as f64);
    gauge!("rayorch_window_children").set(a.children as f64);
    if a.window_children != usize::MAX {
        gauge!("rayorch_window_children_limit").set(a.window_children as f64);
    }
    counter!("rayorch_journal_commits_total").absolute(s.journal_commits);
    gauge!("rayorch_journal_lag_roots").set(a.journal_lag as f64);
    counter!("rayorch_loop_wakeups_total").absolute(s.loop_wakeups);
    // The old name, for dashboards built on it; removed in the next release.
    counter!("rayorch_driver_wakeups_total").absolute(s.loop_wakeups);
    counter!("rayorch_rejected_reports_total").absolute(s.rejected_reports);
    counter!("rayorch_backpressure_holds_total").absolute(s.backpressure_holds);
    gauge!("rayorch_run_wall_seconds").set(s.wall_s);
    gauge!("rayorch_run_finished").set(if p.finished { 1.0 } else { 0.0 });
    for w in &s.workers {
        counter!("rayorch_worker_grains_committed_total", "worker" => w.worker.clone(), "call" => w.call.clone())
            .absolute(w.grains);
    }
    for g in p.backend {
        let name = format!("rayorch_{}", g.name);
        let labels: Vec<Label> = g.labels.iter().map(|(k, v)| Label::new(*k, v.clone())).collect();
        if g.counter {
            metrics::describe_counter!(name.clone(), g.help);
            counter!(name, labels).absolute(g.value as u64);
        } else {
            metrics::describe_gauge!(name.clone(), g.help);
            gauge!(name, labels).set(g.value);
        }
    }
    backlog
}

/// The scale signal: `queued` Grains × replica-seconds per Grain (`busy_s`
/// over the `finished` Grains) ÷ `replicas`; infinite when work waits and
/// no replica can take it, `None` before any Grain has finished. (The
/// recorder composes the two steps itself, to export both figures.)
#[cfg(test)]
pub(super) fn backlog_seconds(queued: usize, busy_s: f64, finished: u64, replicas: usize) -> Option<f64> {
    replica_seconds(queued, busy_s, finished).map(|w| over_replicas(w, replicas))
}

/// `queued` Grains × measured replica-seconds per Grain (`None` before any
/// Grain has finished, unless nothing is queued).
fn replica_seconds(queued: usize, busy_s: f64, finished: u64) -> Option<f64> {
    match (queued, finished) {
        (0, _) => Some(0.0),
        (_, 0) => None,
        _ => Some(queued as f64 * (busy_s / finished as f64)),
    }
}

/// Replica-seconds of work as seconds of wall time on `replicas`.
fn over_replicas(work: f64, replicas: usize) -> f64 {
    match replicas {
        0 if work > 0.0 => f64::INFINITY,
        0 => 0.0,
        n => work / n as f64,
    }
}

fn describe() {
    use metrics::{describe_counter, describe_gauge, describe_histogram};
    describe_gauge!(
        "rayorch_call_queue_ready_grains",
        "Grains queued for a first attempt."
    );
    describe_gauge!("rayorch_call_queue_recovery_grains", "Grains queued for a retry.");
    describe_gauge!(
        "rayorch_call_in_flight_grains",
        "Grains in batches not yet reported."
    );
    describe_gauge!(
        "rayorch_call_busy_replicas",
        "Batches in flight: replicas at work."
    );
    describe_gauge!(
        "rayorch_call_replicas",
        "Replicas (live worker slots) that can run the Call."
    );
    describe_gauge!(
        "rayorch_call_backlog_seconds",
        "Queued and in-flight Grains times measured seconds per Grain over replicas."
    );
    describe_gauge!(
        "rayorch_call_backlog_replica_seconds",
        "Queued and in-flight Grains times measured replica-seconds per Grain."
    );
    describe_counter!("rayorch_call_batches_total", "Batches dispatched.");
    describe_counter!(
        "rayorch_call_grains_dispatched_total",
        "Grains dispatched, retries included."
    );
    describe_counter!("rayorch_call_grains_committed_total", "Grains committed present.");
    describe_counter!("rayorch_call_retries_total", "Grains put back for a retry.");
    describe_counter!(
        "rayorch_call_shape_key_panics_total",
        "Grains whose shape key function panicked."
    );
    describe_counter!(
        "rayorch_call_record_attempts_total",
        "Per-record Calls: record attempts, retries included."
    );
    describe_counter!(
        "rayorch_call_record_retries_total",
        "Per-record Calls: attempts after a record's first."
    );
    describe_counter!(
        "rayorch_call_record_deadline_misses_total",
        "Per-record Calls: attempts past the record deadline."
    );
    describe_counter!(
        "rayorch_call_failed_grains_total",
        "Grains sealed Failed at the Call, by the kind of their cause."
    );
    describe_gauge!(
        "rayorch_call_mean_wait_seconds",
        "Mean time a dispatched Grain waited in the Call's queue."
    );
    describe_counter!(
        "rayorch_call_key_batches_total",
        "Shaped Calls: first-attempt batches per shape key."
    );
    describe_counter!(
        "rayorch_call_key_grains_total",
        "Shaped Calls: Grains in the batches of each shape key."
    );
    describe_counter!(
        "rayorch_call_attempt_failures_total",
        "Whole attempts that failed."
    );
    describe_counter!("rayorch_call_suppressed_grains_total", "Grains a barrier sealed.");
    describe_counter!(
        "rayorch_call_stale_reports_total",
        "Grain reports the commit gate fenced."
    );
    describe_counter!(
        "rayorch_call_replicas_replaced_total",
        "Replicas torn down and restarted."
    );
    describe_counter!(
        "rayorch_call_threads_abandoned_total",
        "Blocking replica threads given up on past the Call's timeout."
    );
    describe_counter!(
        "rayorch_call_mixed_parent_batches_total",
        "Batches holding Grains of several parents."
    );
    describe_gauge!(
        "rayorch_call_batch_fill_ratio",
        "Mean batch size over the batch size."
    );
    describe_histogram!(DURATION, "Batch run times; the sum is the Call's busy seconds.");
    describe_histogram!(GRAINS, "Grains per batch.");
    describe_counter!("rayorch_domain_published_total", "Entities published.");
    describe_counter!("rayorch_domain_done_total", "Entities done.");
    describe_counter!("rayorch_domain_failed_total", "Entities failed.");
    describe_counter!("rayorch_domain_suppressed_total", "Entities suppressed.");
    describe_counter!("rayorch_roots_total", "Roots handed to the sink, by outcome.");
    describe_counter!(
        "rayorch_roots_duplicate_keys_total",
        "Roots refused for a repeated key."
    );
    describe_counter!(
        "rayorch_roots_abandoned_total",
        "Live roots a cancellation failed."
    );
    describe_counter!(
        "rayorch_roots_journal_skipped_total",
        "Roots a resumed run found finished."
    );
    describe_counter!("rayorch_failures_total", "Failures by Domain, level and kind.");
    describe_gauge!("rayorch_window_roots", "Roots in the admission window.");
    describe_gauge!("rayorch_window_roots_limit", "The root window.");
    describe_gauge!("rayorch_window_children", "Child Entities live.");
    describe_gauge!("rayorch_window_children_limit", "The children window.");
    describe_counter!("rayorch_journal_commits_total", "Journal commits.");
    describe_gauge!(
        "rayorch_journal_lag_roots",
        "Roots handed out and not yet committed."
    );
    describe_counter!("rayorch_loop_wakeups_total", "Run-loop turns.");
    describe_counter!(
        "rayorch_driver_wakeups_total",
        "Run-loop turns (deprecated name of rayorch_loop_wakeups_total)."
    );
    describe_counter!(
        "rayorch_rejected_reports_total",
        "Reports for batches no longer in flight."
    );
    describe_counter!(
        "rayorch_backpressure_holds_total",
        "Dispatches held by backpressure."
    );
    describe_gauge!("rayorch_run_wall_seconds", "Seconds since the run started.");
    describe_gauge!("rayorch_run_finished", "1 once the run has ended.");
    describe_counter!(
        "rayorch_worker_grains_committed_total",
        "Grains committed per worker and Call."
    );
}
