//! Calls the owner runs itself: cheap maps next to the data they need
//! (naming a document, joining a page's lines, assembling the result) gain
//! nothing from a round trip through the broker.
//!
//! Invariants:
//! - A local batch is reported to the engine exactly once: its task sends one
//!   [`Done`] on the pool's channel and the owner's loop reports it.
//! - A Call is either local (the owner never publishes it) or remote;
//!   `local_slots` instances at most run at once, made lazily and reused,
//!   like a worker's slots; a panic loses the instance (a fresh one is made
//!   for the next batch) and is a failed attempt for the Call's recovery.
//! - A local Call with batches running counts as working for backpressure
//!   and for the end-of-run and stall checks, exactly like batches out on
//!   the broker.

use std::sync::Arc;

use rayorch_runtime::spi::{
    AttemptError, AttemptResult, Batch, BatchId, BatchInputs, ErasedCall, Execution, StageBox,
};
use rayorch_runtime::{Plan, RunError};
use tokio::sync::mpsc;

use crate::error::DistError;

/// One finished local batch.
pub(crate) struct Done {
    pub(crate) call: usize,
    pub(crate) batch: BatchId,
    pub(crate) grains: usize,
    replica: usize,
    stage: Option<StageBox>,
    /// `Err`: the stage factory failed (ends the run, as in a local run).
    pub(crate) result: Result<AttemptResult, DistError>,
}

/// The owner's own slots, per Call.
pub(crate) struct LocalPool {
    slots: Vec<u32>,
    busy: Vec<u32>,
    /// Free slots per Call: (replica index, its instance once made).
    idle: Vec<Vec<(usize, Option<StageBox>)>>,
    tx: mpsc::UnboundedSender<Done>,
    rx: mpsc::UnboundedReceiver<Done>,
}

impl LocalPool {
    /// Slots per Call index (`(call, slots)`, as `parse_calls` gives).
    pub(crate) fn new(calls: usize, local: &[(usize, u32)]) -> LocalPool {
        let mut slots = vec![0u32; calls];
        for &(c, n) in local {
            if let Some(s) = slots.get_mut(c) {
                *s += n;
            }
        }
        let idle = slots
            .iter()
            .map(|&n| (0..n as usize).rev().map(|r| (r, None)).collect())
            .collect();
        let (tx, rx) = mpsc::unbounded_channel();
        LocalPool {
            busy: vec![0; calls],
            slots,
            idle,
            tx,
            rx,
        }
    }

    /// Does the owner run Call `c`?
    pub(crate) fn serves(&self, c: usize) -> bool {
        self.slots[c] > 0
    }

    /// Has Call `c` a free local slot?
    pub(crate) fn free(&self, c: usize) -> bool {
        self.busy[c] < self.slots[c]
    }

    /// Are batches of Call `c` running here?
    pub(crate) fn busy(&self, c: usize) -> bool {
        self.busy[c] > 0
    }

    /// Nothing running here.
    pub(crate) fn idle(&self) -> bool {
        self.busy.iter().all(|&b| b == 0)
    }

    /// Run `batch` on a free slot of its Call (check [`LocalPool::free`]).
    pub(crate) fn start(&mut self, plan: &Plan, batch: Batch) {
        let c = batch.call;
        let (replica, stage) = self.idle[c].pop().unwrap_or((self.busy[c] as usize, None));
        self.busy[c] += 1;
        let spec = &plan.calls()[c];
        let (rt, name, tx) = (spec.runtime.clone(), spec.name.to_string(), self.tx.clone());
        tokio::spawn(async move {
            let grains = batch.grains.len();
            let made = match stage {
                Some(st) => Ok(st),
                None => spawn_stage(&rt, &name).await,
            };
            let (stage, result) = match made {
                Ok(st) => {
                    let (st, r) = run_on(&rt, replica, st, batch.inputs).await;
                    (st, Ok(r))
                }
                Err(e) => (None, Err(e)),
            };
            let _ = tx.send(Done {
                call: c,
                batch: batch.id,
                grains,
                replica,
                stage,
                result,
            });
        });
    }

    /// The next finished batch (pending forever while none runs).
    pub(crate) async fn next(&mut self) -> Done {
        match self.rx.recv().await {
            Some(d) => d,
            // The pool holds a sender: the channel never closes.
            None => std::future::pending().await,
        }
    }

    /// Give a finished batch's slot back.
    pub(crate) fn finish(&mut self, d: &mut Done) {
        self.busy[d.call] -= 1;
        self.idle[d.call].push((d.replica, d.stage.take()));
    }
}

/// Make one stage instance on the blocking pool.
pub(crate) async fn spawn_stage(rt: &Arc<dyn ErasedCall>, call: &str) -> Result<StageBox, DistError> {
    let r = rt.clone();
    let made = tokio::task::spawn_blocking(move || r.spawn_stage().map_err(|e| e.to_string()))
        .await
        .unwrap_or_else(|e| Err(format!("the stage factory panicked: {e}")));
    made.map_err(|cause| {
        DistError::Run(RunError::ReplicaFactory {
            call: call.to_string(),
            stage: rt.stage_name(),
            cause,
        })
    })
}

/// Run one batch on `st` (blocking stages on the blocking pool); the
/// instance comes back unless the stage panicked.
pub(crate) async fn run_on(
    rt: &Arc<dyn ErasedCall>,
    replica: usize,
    mut st: StageBox,
    inputs: BatchInputs,
) -> (Option<StageBox>, AttemptResult) {
    match rt.execution() {
        Execution::Blocking => {
            let r = rt.clone();
            match tokio::task::spawn_blocking(move || {
                let out = r.run_blocking(&mut st, replica, inputs);
                (st, out)
            })
            .await
            {
                Ok((st, out)) => (Some(st), out),
                // The instance died with the panic: the slot makes a new one.
                Err(e) => (
                    None,
                    Err(AttemptError::Failed(format!("the stage panicked: {e}"))),
                ),
            }
        }
        Execution::Async => {
            let out = rt.run_async(&st, replica, inputs).await;
            (Some(st), out)
        }
    }
}
