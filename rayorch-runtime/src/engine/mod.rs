//! The engine: lineage, scheduling and the commit gate, in one synchronous owner.
//!
//! The engine never blocks and runs no user code but a Call's shape key
//! function (cheap, pure, under `catch_unwind`: see `ready_queue.rs`). An executor admits roots,
//! reserves batches per Call, runs them wherever it likes, and reports each
//! attempt back; the engine publishes facts, propagates them, and hands out
//! each root's outcome the moment it is terminal. Because it is synchronous
//! and deterministic, any schedule can be replayed exactly, which is what the
//! randomized contract tests rely on.
//!
//! Shape (a database and its ingredients, as in salsa): the [`Engine`] holds
//! the immutable plan and a `Core` of per-kind ingredients, each owning the
//! dense state of one node kind, indexed by Entity slot (module `X_state`
//! holds `XState`):
//! - `lineage_state` — lineage: Entities, Item columns, roots, the propagation
//!   worklist (over the slabs and fact slots of `lineage`);
//! - `call_state` — Call Grains, barriers, ready queues, batches in flight;
//!   `commit` — the commit gate and recovery over that state;
//! - `expand_state` — Expansions (and broadcasts, which follow them);
//! - `reduce_state` — the per-parent gathers.
//!
//! Every method takes the plan as `&PlanInner` beside `&mut self` (the Engine
//! splits its borrow once per public call), so nothing clones the plan. Every
//! decision goes through the pure functions of [`propagation_rules`].
//!
//! Invariants (checked by the tests in `tests/contract/conformance_*.rs`):
//! - A Grain commits only if it is in flight and the report carries its
//!   current generation and Entity epoch; anything else is counted as stale.
//! - A typed GroupFailure installs a barrier for (Call, immediate parent):
//!   queued siblings are sealed Suppressed at once, waiting ones when they
//!   would be decided, in-flight ones when they report; committed ones stay.
//! - A root is released (all its Entities, Items and Grains) right after its
//!   outcome is queued for the consumer; memory is bounded by the two
//!   windows (`admission.rs`: a child counts until its parent consumed it).
//! - Retries never reorder the FIFO: they go to per-Call recovery queues.
//! - A Grain transition the lifecycle forbids is a bug: it fails a debug
//!   assertion and, in release, ends the run with
//!   [`RunError::InvalidTransition`] (never a silent skip).

mod admission;
mod boundary;
mod call_state;
mod commit;
mod expand_state;
pub(crate) mod grain;
pub(crate) mod lineage;
mod lineage_state;
mod propagate;
pub mod propagation_rules;
pub(crate) mod ready_queue;
mod reduce_state;

use std::collections::VecDeque;
use std::sync::Arc;

pub use crate::value::EntityPath;
pub use boundary::{
    Batch, BatchId, CallStats, EngineConfig, EngineStats, GrainRef, KeyBatches, ReportOutcome, RootOutcome,
};

use crate::engine::call_state::CallState;
use crate::engine::expand_state::ExpandState;
use crate::engine::lineage_state::LineageState;
use crate::engine::reduce_state::ReduceState;
use crate::error::RunError;
use crate::plan::{Plan, PlanInner};
use crate::stage::AttemptResult;
use crate::value::{Cause, Data, Item, Value};

/// The synchronous lineage engine and scheduler for one run of a [`Plan`].
pub struct Engine {
    plan: Arc<PlanInner>,
    core: Core,
}

/// Everything mutable: the ingredients and the run-wide records.
pub(crate) struct Core {
    config: EngineConfig,
    lineage: LineageState,
    calls: CallState,
    expands: ExpandState,
    reduces: ReduceState,
    finished: VecDeque<RootOutcome>,
    /// The fail-stop error (a `Recovery::Abort` failure or an engine bug).
    aborted: Option<RunError>,
    stats: EngineStats,
    /// Debug builds assert on an invalid Grain transition; a unit test that
    /// provokes one on purpose turns this off to check the release path.
    assert_transitions: bool,
    /// The executor's clock, in µs since the run began ([`Engine::set_clock`]):
    /// read only by timed Calls (a shape key or a batch delay).
    clock_us: u64,
    /// May the source still yield roots ([`Engine::set_source_open`])?
    source_open: bool,
    /// Reused buffers of the commit gate.
    scratch: Scratch,
    /// Most roots live while unexpanded ([`EngineConfig::unexpanded_roots`],
    /// resolved against the plan; at least 1).
    unexpanded_bound: usize,
}

/// Buffers the commit gate refills per report instead of allocating.
#[derive(Default)]
pub(crate) struct Scratch {
    /// Per Grain of the report: still the Grain that was dispatched.
    valid: Vec<bool>,
    /// Per Grain of the report: under a barrier before the report came.
    barred: Vec<bool>,
}

impl Engine {
    /// A fresh engine for one run of `plan`.
    pub fn new(plan: &Plan, config: EngineConfig) -> Engine {
        let p = plan.inner.clone();
        let unexpanded_bound = config
            .unexpanded_roots
            .unwrap_or_else(|| admission::pre_expansion_capacity(&p))
            .clamp(1, config.window.max(1));
        let core = Core {
            lineage: LineageState::new(&p),
            calls: CallState::new(&p, config.seed),
            expands: ExpandState::new(&p),
            reduces: ReduceState::new(&p),
            finished: VecDeque::new(),
            aborted: None,
            stats: EngineStats::default(),
            assert_transitions: true,
            clock_us: 0,
            source_open: true,
            scratch: Scratch::default(),
            unexpanded_bound,
            config,
        };
        Engine { plan: p, core }
    }

    /// The admission window.
    pub fn window(&self) -> usize {
        self.core.config.window
    }

    /// The children window (`usize::MAX`: off).
    pub fn window_children(&self) -> usize {
        self.core.config.window_children
    }

    /// How many roots may be live before they have expanded while the
    /// children window is on ([`EngineConfig::unexpanded_roots`], resolved
    /// against the plan).
    pub fn unexpanded_bound(&self) -> usize {
        self.core.unexpanded_bound
    }

    /// Roots admitted and not yet handed out.
    pub fn live_roots(&self) -> usize {
        self.core.lineage.live_keys.len()
    }

    /// Child Entities live now (every Domain below the root, every depth),
    /// each from its Expansion until its parent has consumed it: what
    /// [`EngineConfig::window_children`] bounds.
    pub fn live_children(&self) -> usize {
        self.core.live_children(&self.plan)
    }

    /// Can another root be admitted now? (Both windows; see
    /// `engine/admission.rs`.)
    pub fn can_admit(&self) -> bool {
        self.core.aborted.is_none() && self.core.admissible(&self.plan)
    }

    /// Batches reserved and not yet reported.
    pub fn in_flight_batches(&self) -> usize {
        self.core.calls.in_flight
    }

    /// Number of Calls in the plan.
    pub fn calls(&self) -> usize {
        self.plan.calls.len()
    }

    /// Whole-engine counters.
    pub fn stats(&self) -> &EngineStats {
        &self.core.stats
    }

    /// Counters of Call `c`.
    pub fn call_stats(&self, c: usize) -> &CallStats {
        &self.core.calls.stats[c]
    }

    /// The fail-stop error: a Call with `Recovery::Abort` failed an attempt,
    /// or the engine caught itself making an invalid Grain transition. Once
    /// set, nothing more is admitted or reserved; the executor ends the run
    /// with it.
    pub fn aborted(&self) -> Option<&RunError> {
        self.core.aborted.as_ref()
    }

    /// May Call `c` have ready work? (Cheap; may be a false positive.)
    pub fn may_have_ready(&self, c: usize) -> bool {
        self.core.calls.queues[c].len_upper_bound() > 0
    }

    /// Grains queued at Call `c`, ready or in recovery: an upper bound
    /// (Grains suppressed or released in place count until they are
    /// skipped).
    pub fn queued_upper_bound(&self, c: usize) -> usize {
        self.core.calls.queues[c].len_upper_bound()
    }

    /// Grains queued at Call `c` as (ready for a first attempt, waiting in
    /// recovery for a retry): upper bounds, like
    /// [`queued_upper_bound`](Engine::queued_upper_bound), whose sum they are.
    pub fn queue_depths(&self, c: usize) -> (usize, usize) {
        self.core.calls.queues[c].depths()
    }

    /// Call `c`'s work in flight as (batches, Grains): reserved and not yet
    /// reported. Walks the in-flight batches (for live views, not the hot
    /// path).
    pub fn in_flight_of(&self, c: usize) -> (usize, usize) {
        self.core
            .calls
            .batches
            .iter()
            .flatten()
            .filter(|b| b.call == c)
            .fold((0, 0), |(n, g), b| (n + 1, g + b.grains.len()))
    }

    /// Advance the engine's clock to `now` (time since the run began; it
    /// never goes back). Only Calls with a shape key or a batch delay read
    /// it: a Grain's wait for mates is measured on it, so an executor that
    /// runs such Calls sets it before it reserves (the run loop does).
    pub fn set_clock(&mut self, now: std::time::Duration) {
        let us = u64::try_from(now.as_micros()).unwrap_or(u64::MAX);
        self.core.clock_us = self.core.clock_us.max(us);
    }

    /// The engine's clock (see [`Engine::set_clock`]).
    pub fn clock(&self) -> std::time::Duration {
        std::time::Duration::from_micros(self.core.clock_us)
    }

    /// Tell the engine whether the source may still yield roots (it starts
    /// open). A Call that waits for mates stops waiting once nothing more
    /// can reach it: no root left to admit and nothing upstream of it
    /// queued or in flight.
    pub fn set_source_open(&mut self, open: bool) {
        self.core.source_open = open;
    }

    /// When Call `c`'s last reservation held ready Grains for mates: the
    /// clock time by which it dispatches them anyway (the oldest one's
    /// arrival plus the Call's delay). `None` when it did not hold. An
    /// executor with a free replica for `c` wakes by then and reserves again.
    pub fn hold_deadline(&self, c: usize) -> Option<std::time::Duration> {
        self.core.calls.held_until[c].map(std::time::Duration::from_micros)
    }

    /// Does Call `c` wait for mates (a shape key or a batch delay)? Only
    /// such a Call reads the clock, so only it measures its queue wait.
    pub fn waits_for_mates(&self, c: usize) -> bool {
        self.core.calls.queues[c].timed()
    }

    /// The earliest [`hold_deadline`](Engine::hold_deadline) over all Calls.
    pub fn next_hold_deadline(&self) -> Option<std::time::Duration> {
        (0..self.plan.calls.len())
            .filter_map(|c| self.hold_deadline(c))
            .min()
    }

    /// Shape keys with Grains queued at Call `c` now, with their counts, in
    /// key order (tombstones included; a Call without a shape key has the
    /// single key 0).
    pub fn queued_shapes(&self, c: usize) -> Vec<(u64, usize)> {
        self.core.calls.queues[c].lanes()
    }

    /// The next finished root, in completion order.
    pub fn pop_finished(&mut self) -> Option<RootOutcome> {
        self.core.finished.pop_front()
    }

    /// Admit one root with a typed input.
    pub fn admit_typed<T: Data>(&mut self, key: u64, input: T) -> Result<(), RunError> {
        self.admit(key, Arc::new(input))
    }

    /// Admit one root. Fails without side effects when the window is full,
    /// the key is already in flight, or the input has the wrong type.
    pub fn admit(&mut self, key: u64, input: Value) -> Result<(), RunError> {
        self.core.admit(&self.plan, key, input)
    }

    /// Reserve up to `max` ready Grains of Call `c` into a physical batch,
    /// following the Call's reservation policy; `None` when nothing is
    /// ready, or while a Call with a shape key or a batch delay holds its
    /// ready Grains for mates (then [`Engine::hold_deadline`] says until when).
    pub fn reserve(&mut self, c: usize, max: usize) -> Option<Batch> {
        self.core.reserve(&self.plan, c, max)
    }

    /// Report the result of one attempt. The commit gate decides, Grain by
    /// Grain, whether it may publish.
    pub fn report(&mut self, id: BatchId, result: AttemptResult) -> ReportOutcome {
        let outcome = self.core.report(&self.plan, id, result);
        self.core.drain(&self.plan);
        outcome
    }

    /// The path of a Grain's Entity, while its root is live.
    pub fn entity_path(&self, g: &GrainRef) -> Option<EntityPath> {
        let lineage = &self.core.lineage;
        lineage.doms[g.domain]
            .is(g.entity, g.epoch)
            .then(|| lineage.path(&self.plan, g.domain, g.entity))
    }

    /// The root key of a Grain's Entity, while its root is live (what
    /// [`Engine::entity_path`] starts with, without building the path).
    pub(crate) fn root_of(&self, g: &GrainRef) -> Option<u64> {
        let lineage = &self.core.lineage;
        lineage.doms[g.domain]
            .is(g.entity, g.epoch)
            .then(|| lineage.root_key(&self.plan, g.domain, g.entity))
    }

    /// If nothing is in flight and nothing is dispatchable while roots are
    /// unfinished, describe what is stuck (instead of letting an executor hang).
    pub fn stall(&self) -> Option<String> {
        self.core.stall(&self.plan)
    }
}

impl Core {
    fn admit(&mut self, plan: &PlanInner, key: u64, input: Value) -> Result<(), RunError> {
        if let Some(e) = &self.aborted {
            return Err(e.clone());
        }
        if self.lineage.live_keys.len() >= self.config.window {
            return Err(RunError::WindowFull {
                window: self.config.window,
            });
        }
        if !self.admissible(plan) {
            return Err(RunError::ChildrenWindowFull {
                children: self.live_children(plan),
                window_children: self.config.window_children,
                unexpanded: self.lineage.unexpanded,
            });
        }
        if std::any::Any::type_id(&*input) != plan.source_type.0 {
            return Err(RunError::InputType {
                key,
                expected: plan.source_type.1,
            });
        }
        if self.lineage.live_keys.contains_key(&key) {
            return Err(RunError::DuplicateKey { key });
        }
        let r = self.alloc(plan, plan.root, None);
        self.lineage.roots[r as usize] = lineage_state::RootRec {
            key,
            outputs_pending: plan.outputs.len() as u32,
            expanded: false,
        };
        self.lineage.unexpanded += 1;
        self.lineage.live_keys.insert(key, r);
        self.stats.roots_admitted += 1;
        match plan.source_split {
            None => self.lineage.set(plan.source_ports[0], r, Item::Present(input)),
            Some(split) => match split(input) {
                Some(values) => {
                    for (&p, v) in plan.source_ports.iter().zip(values) {
                        self.lineage.set(p, r, Item::Present(v));
                    }
                }
                None => {
                    let cause = Cause::new("internal: the source could not split its input");
                    for &p in &plan.source_ports {
                        self.lineage.set(p, r, Item::Failed(cause.clone()));
                    }
                }
            },
        }
        self.drain(plan);
        Ok(())
    }

    fn live_children(&self, plan: &PlanInner) -> usize {
        let doms = &self.lineage.doms;
        doms.iter().map(|d| d.live - d.consumed).sum::<usize>() - doms[plan.root].live
    }

    fn admissible(&self, plan: &PlanInner) -> bool {
        let live = admission::Live {
            roots: self.lineage.live_keys.len(),
            children: self.live_children(plan),
            unexpanded_roots: self.lineage.unexpanded,
        };
        let expands = !plan.domains[plan.root].children.is_empty();
        let bounds = admission::Bounds {
            window: self.config.window,
            window_children: self.config.window_children,
            unexpanded: self.unexpanded_bound,
        };
        admission::admissible(live, bounds, expands)
    }

    /// End the run with `error` unless it already ended; the first error wins.
    fn fail_stop(&mut self, error: RunError) {
        if self.aborted.is_none() {
            self.aborted = Some(error);
        }
    }
}

#[cfg(test)]
mod tests;
