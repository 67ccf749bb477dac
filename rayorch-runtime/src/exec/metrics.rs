//! Run metrics: what a run did, per Call, per Domain and overall.
//!
//! Invariant: every root the source yielded is counted exactly once in
//! `present + dropped + failed + suppressed`, which equals `roots`; roots the
//! engine never admitted (duplicate keys, values of the wrong type) and live roots abandoned by a
//! cancellation are among `failed`, and counted again on their own.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Serialize;

use crate::value::FailureKind;

/// Per-Call figures of one run.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct CallMetrics {
    /// The Call's name.
    pub name: String,
    /// Configured largest batch (B).
    pub batch_size: usize,
    /// Configured replicas.
    pub replicas: usize,
    /// Physical batches dispatched, retries included (the `batches` column
    /// of [`RunSummary::calls_table`] and `rayorch_call_batches_total`).
    pub rpcs: u64,
    /// Grains dispatched (retries included).
    pub grains_dispatched: u64,
    /// Mean Grains per batch.
    pub mean_batch: f64,
    /// Mean batch size over B.
    pub fill: f64,
    /// Batches holding Grains of more than one parent.
    pub mixed_parent_batches: u64,
    /// Grains committed present.
    pub committed: u64,
    /// Grains ended Failed by a RecordFailure.
    pub record_failures: u64,
    /// Grains ended Failed by a GroupFailure.
    pub group_failures: u64,
    /// Whole attempts that failed.
    pub attempt_failures: u64,
    /// Grains put back for a retry.
    pub requeued: u64,
    /// Grains suppressed by a barrier before dispatch.
    pub suppressed_before_dispatch: u64,
    /// In-flight Grains whose report a barrier refused.
    pub suppressed_in_flight: u64,
    /// Grain reports refused by the commit gate.
    pub stale_grains: u64,
    /// Replicas torn down (panic, timeout) and re-initialised.
    pub replicas_replaced: u64,
    /// Per-record Calls ([`Call::new_async_records`](crate::Call::new_async_records)):
    /// record attempts made, retries included (Calls run on distributed
    /// workers count on the worker, not here).
    pub record_attempts: u64,
    /// Per-record Calls: attempts after a record's first (a model server
    /// degrading shows here before records start failing).
    pub record_retries: u64,
    /// Per-record Calls: attempts that ran past the record deadline.
    pub record_deadline_misses: u64,
    /// Grains whose shape key function panicked (each went under key
    /// `u64::MAX`; one warning line per Call says so).
    pub shape_key_panics: u64,
    /// Grains sealed Failed at this Call, by the kind of their cause (the
    /// kinds of [`RunSummary::failures`]: a per-record Call's record that
    /// spent its retries counts as `error`, `panic` or `timeout`, as its
    /// last attempt ended, not as `record`). Summed over a Domain's Calls,
    /// these are its `grain failed` [`FailureCount`]s.
    pub failed_grains: BTreeMap<FailureKind, u64>,
    /// Calls that wait for mates ([`Call::max_batch_delay`](crate::Call::max_batch_delay)
    /// or [`Call::shape`](crate::Call::shape)): the mean time a
    /// dispatched Grain waited in the Call's queue, from ready (or requeued
    /// for a retry) to dispatch — the batch delay's cost plus the wait for a
    /// free replica. `None` for other Calls (the engine keeps no clock for
    /// them) and before the first dispatch.
    pub mean_wait_s: Option<f64>,
    /// Shaped Calls ([`Call::shape`](crate::Call::shape)): batches of
    /// first attempts by shape key, in key order (empty for an unshaped
    /// Call). At most 256 keys are listed one by one; later keys are
    /// summed in one entry with `key: None`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub batches_by_key: Vec<KeyBatchCount>,
    /// Blocking replica threads abandoned past the timeout, still running
    /// when given up on ([`Call::max_abandoned_threads`](crate::Call::max_abandoned_threads)
    /// caps those alive at once).
    pub threads_abandoned: u64,
    /// Sum of batch run times over all replicas.
    pub busy_s: f64,
    /// First batch start, seconds from the run's start.
    pub window_start_s: Option<f64>,
    /// Last batch end, seconds from the run's start.
    pub window_end_s: Option<f64>,
}

/// Batches a shaped Call dispatched under one shape key.
#[derive(Clone, Copy, Debug, Default, Serialize, PartialEq, Eq)]
pub struct KeyBatchCount {
    /// The shape key (`None`: every key past the first 256 a Call saw).
    pub key: Option<u64>,
    /// Batches dispatched.
    pub batches: u64,
    /// Grains they held (over batches: the key's mean batch).
    pub grains: u64,
}

/// Entity counts of one Domain, as the executor sees them.
///
/// Root Domain: exact, from root outcomes (`published` counts every root the
/// source yielded, `done` the present and dropped ones). Child Domain: from
/// the engine's per-Call counters of the Domain's Calls: `published` counts
/// Entities that reached the Domain's first Call (first dispatches),
/// `done` Grains the Domain's last Call committed present, `failed` Grains
/// ended Failed in any of its Calls, `suppressed` Grains a barrier sealed.
/// A child Domain without Calls stays at zero.
#[derive(Clone, Debug, Default, Serialize, PartialEq, Eq)]
pub struct DomainCounts {
    /// The Domain's name.
    pub domain: &'static str,
    /// Entities published (see above).
    pub published: u64,
    /// Entities done.
    pub done: u64,
    /// Entities failed.
    pub failed: u64,
    /// Entities suppressed.
    pub suppressed: u64,
}

/// What a whole run did.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct RunSummary {
    /// Roots the source yielded and the sink saw (admitted, plus refused
    /// duplicates and roots of the wrong type).
    pub roots: u64,
    /// Roots whose outputs are all present.
    pub present: u64,
    /// Roots dropped.
    pub dropped: u64,
    /// Roots failed: duplicates, roots of the wrong type and roots abandoned
    /// by a cancellation included.
    pub failed: u64,
    /// Roots suppressed.
    pub suppressed: u64,
    /// Wall time of the run.
    pub wall_s: f64,
    /// Time until the first root was handed to the sink.
    pub first_root_s: Option<f64>,
    /// Time until the first root whose outputs are all present reached the sink.
    pub first_present_s: Option<f64>,
    /// Roots whose key was already given to this run: each went to the sink
    /// failed, naming the key; the run went on.
    pub duplicate_keys: u64,
    /// Roots whose value was not of the type the plan's source takes (an
    /// erased source, such as the distributed owner's `run_values`): each
    /// went to the sink failed (kind `source`); the run went on.
    pub wrong_type_roots: u64,
    /// The run was cancelled through its [`CancelHandle`](crate::exec::control::CancelHandle).
    pub cancelled: bool,
    /// Live roots a cancellation abandoned (each went to the sink failed).
    pub abandoned: u64,
    /// Replica threads abandoned past a Call's timeout, over every Call
    /// (see [`CallMetrics::threads_abandoned`]).
    pub threads_abandoned: u64,
    /// Times the run loop woke up (an event, a deadline, a source item, a
    /// control request): a run's control-plane cost; it never spins.
    pub loop_wakeups: u64,
    /// Reports for batches no longer in flight (stale or duplicate).
    pub rejected_reports: u64,
    /// Reports and claims refused as not from the holder of the batch's
    /// lease: forged (a distributed owner checks each against its claimer;
    /// always 0 in one process).
    pub forged_reports: u64,
    /// Times a Call's dispatch was held by backpressure (its consumer was
    /// behind).
    pub backpressure_holds: u64,
    /// Journaled runs: roots the source gave that the journal already held
    /// as terminal (not run again, not given to the sink).
    pub journal_skipped: u64,
    /// Journaled runs: journal commits (each one fsync of the sinks and one
    /// of the journal under the default policy).
    pub journal_commits: u64,
    /// Per-Call figures, in plan order.
    pub calls: Vec<CallMetrics>,
    /// Per-Domain counts, parents before children.
    pub domains: Vec<DomainCounts>,
    /// Failures by Domain and kind (record, group, error, panic, timeout,
    /// contract, cancelled, source): the roots failed or suppressed, and
    /// every Grain sealed Failed.
    pub failures: Vec<FailureCount>,
    /// Distributed runs: Grains committed per worker and Call (empty for a
    /// run in one process).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub workers: Vec<WorkerGrains>,
}

/// How many failures of one kind one Domain saw, at one level.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct FailureCount {
    /// The Domain.
    pub domain: String,
    /// Root outcomes (by the kind of the failure that decided them) or
    /// Grains sealed Failed.
    pub level: FailureLevel,
    /// The kind of failure.
    pub kind: FailureKind,
    /// How many.
    pub count: u64,
}

/// What a [`FailureCount`] counts.
#[derive(Clone, Copy, Debug, Serialize, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FailureLevel {
    /// Roots that ended Failed.
    #[serde(rename = "root failed")]
    RootFailed,
    /// Roots that ended Suppressed.
    #[serde(rename = "root suppressed")]
    RootSuppressed,
    /// Grains sealed Failed (at any Domain).
    #[serde(rename = "grain failed")]
    GrainFailed,
}

impl FailureLevel {
    /// The level as summaries and metric labels write it (`root failed`,
    /// `root suppressed`, `grain failed`).
    pub fn as_str(self) -> &'static str {
        match self {
            FailureLevel::RootFailed => "root failed",
            FailureLevel::RootSuppressed => "root suppressed",
            FailureLevel::GrainFailed => "grain failed",
        }
    }
}

impl std::fmt::Display for FailureLevel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Grains one worker process committed for one Call (distributed runs).
#[derive(Clone, Debug, Default, Serialize, PartialEq, Eq)]
pub struct WorkerGrains {
    /// The worker's name (`owner` for Calls the owner runs itself).
    pub worker: String,
    /// The Call.
    pub call: String,
    /// Grains it committed.
    pub grains: u64,
}

impl RunSummary {
    /// Distributed runs: Grains committed per (worker, Call name).
    pub fn per_worker(&self) -> std::collections::BTreeMap<(String, String), u64> {
        self.workers
            .iter()
            .map(|w| ((w.worker.clone(), w.call.clone()), w.grains))
            .collect()
    }

    /// The figures of the Call named `name`.
    pub fn call(&self, name: &str) -> Option<&CallMetrics> {
        self.calls.iter().find(|c| c.name == name)
    }

    /// The per-Call figures as a text table, one line per Call in plan order
    /// under a header: B, batches, mean batch, fill, mixed-parent batches and
    /// busy seconds (summed over replicas). Each line ends with a newline.
    pub fn calls_table(&self) -> String {
        let w = self.calls.iter().map(|c| c.name.len()).max().unwrap_or(0).max(10);
        let mut out = format!(
            "{:<w$} {:>6} {:>8} {:>10} {:>6} {:>6} {:>8}\n",
            "call", "B", "batches", "mean", "fill", "mixed", "busy s"
        );
        for m in &self.calls {
            out += &format!(
                "{:<w$} {:>6} {:>8} {:>10.2} {:>5.0}% {:>6} {:>8.2}\n",
                m.name,
                m.batch_size,
                m.rpcs,
                m.mean_batch,
                m.fill * 100.0,
                m.mixed_parent_batches,
                m.busy_s
            );
        }
        out
    }
}

pub(crate) fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_calls_table_has_a_header_and_one_aligned_line_per_call() {
        let call = |name: &str, rpcs| CallMetrics {
            name: name.into(),
            batch_size: 8,
            rpcs,
            mean_batch: 6.5,
            fill: 0.8125,
            mixed_parent_batches: 3,
            busy_s: 1.25,
            ..CallMetrics::default()
        };
        let summary = RunSummary {
            calls: vec![call("ocr", 12), call("a_long_call_name", 1)],
            ..RunSummary::default()
        };
        let table = summary.calls_table();
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines.len(), 3, "{table}");
        assert!(lines[0].starts_with("call ") && lines[0].ends_with("busy s"));
        assert!(lines[1].starts_with("ocr "), "{table}");
        let fields: Vec<&str> = lines[1].split_whitespace().collect();
        assert_eq!(fields, ["ocr", "8", "12", "6.50", "81%", "3", "1.25"]);
        // Every line is as wide as the longest name makes it.
        assert!(lines.iter().all(|l| l.len() == lines[0].len()), "{table}");
        assert!(table.ends_with('\n'));
        assert_eq!(RunSummary::default().calls_table().lines().count(), 1);
    }
}
