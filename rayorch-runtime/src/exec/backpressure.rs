//! Backpressure between Calls: a producer waits while its consumer is behind.
//!
//! Without it a fast Call (render a page: ~10 ms) runs ahead of a slow one
//! that reads its outputs (detect on that page: ~250 ms), and everything it
//! produced waits in the slow Call's Ready Queue, holding its payload: a
//! 2,000-page document rendered that way held 12 GiB of pages. With it,
//! [`Runner::backpressure(k)`](crate::Runner::backpressure) holds Call `c`
//! (no new batch is reserved for it) while some Call `d` that reads `c`'s
//! outputs directly (same Domain, no structural op between) has at least
//! `k × B(d)` Grains queued and its replicas are at work (or still loading
//! their model). Payloads parked between the two are then bounded by
//! `k × B(d)` plus what is in flight, whatever the document length.
//!
//! Invariants:
//! - It never stalls a run: a Call is held only while one of its consumers
//!   has work in flight or replicas starting up, and that consumer's next
//!   report (or start) wakes the run loop, which then reconsiders. With the
//!   consumer idle nothing is held, so "nothing dispatched, nothing in
//!   flight" still means a real stall.
//! - It changes when batches are reserved, never what they contain or what
//!   they produce: the outcome is the same under every schedule (the
//!   engine's contract), so it can only move time and memory.
//! - The queue length read is the engine's upper bound (it may still count
//!   Grains suppressed or released in place): it can hold a producer a turn
//!   too long, never let one run past the bound.

use crate::engine::Engine;
use crate::plan::Plan;
use crate::plan::build::NodeKind;

/// Which Calls read each Call's outputs, and the bound in batches (the
/// local runner's rule; a distributed owner applies the same one,
/// `rayorch::spi::Backpressure`).
#[derive(Clone, Debug)]
pub struct Backpressure {
    /// `consumers[c]`: Calls reading an output Port of Call `c` directly.
    consumers: Vec<Vec<usize>>,
    batches: usize,
}

impl Backpressure {
    /// Hold a producer while a consumer has `batches` full batches queued.
    pub fn new(plan: &Plan, batches: usize) -> Backpressure {
        let inner = &plan.inner;
        let consumers = inner
            .calls
            .iter()
            .map(|spec| {
                let mut cs: Vec<usize> = spec
                    .outputs
                    .iter()
                    .flat_map(|&p| &inner.ports[p as usize].consumers)
                    .filter_map(|cons| {
                        let node = &inner.nodes[cons.node];
                        matches!(node.kind, NodeKind::Call { .. }).then_some(node.dense)
                    })
                    .collect();
                cs.sort_unstable();
                cs.dedup();
                cs
            })
            .collect();
        Backpressure {
            consumers,
            batches: batches.max(1),
        }
    }

    /// Should Call `c` wait? `working(d)`: are Call `d`'s replicas busy or
    /// starting (some report of `d` is still to come and will wake the
    /// executor)?
    pub fn held(&self, plan: &Plan, engine: &Engine, c: usize, working: impl Fn(usize) -> bool) -> bool {
        self.consumers[c].iter().any(|&d| {
            let bound = self.batches * plan.calls()[d].config.batch_size.max(1);
            engine.queued_upper_bound(d) >= bound && working(d)
        })
    }
}
