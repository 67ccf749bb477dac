//! Run metrics: what a run did, per Call and overall.

use std::time::Duration;

use serde::Serialize;

/// Per-Call figures of one run.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct CallMetrics {
    /// The Call's name.
    pub name: String,
    /// Configured largest batch (B).
    pub batch_size: usize,
    /// Configured replicas.
    pub replicas: usize,
    /// Physical batches dispatched.
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
    /// Sum of batch run times over all replicas.
    pub busy_s: f64,
    /// First batch start, seconds from the run's start.
    pub window_start_s: Option<f64>,
    /// Last batch end, seconds from the run's start.
    pub window_end_s: Option<f64>,
}

/// What a whole run did.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct RunSummary {
    /// Roots admitted.
    pub roots: u64,
    /// Roots whose outputs are all present.
    pub present: u64,
    /// Roots dropped.
    pub dropped: u64,
    /// Roots failed.
    pub failed: u64,
    /// Roots suppressed.
    pub suppressed: u64,
    /// Wall time of the run.
    pub wall_s: f64,
    /// Time until the first root was handed to the sink.
    pub first_root_s: Option<f64>,
    /// Reports for batches no longer in flight (stale or duplicate).
    pub rejected_reports: u64,
    /// Per-Call figures, in plan order.
    pub calls: Vec<CallMetrics>,
}

impl RunSummary {
    /// The figures of the Call named `name`.
    pub fn call(&self, name: &str) -> Option<&CallMetrics> {
        self.calls.iter().find(|c| c.name == name)
    }
}

pub(crate) fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}
