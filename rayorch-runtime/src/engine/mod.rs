//! The engine: lineage, scheduling and the commit gate, in one synchronous owner.
//!
//! The engine never runs user code and never blocks. An executor admits roots,
//! reserves batches per Call, runs them wherever it likes, and reports each
//! attempt back; the engine publishes facts, propagates them, and hands out
//! each root's outcome the moment it is terminal. Because it is synchronous
//! and deterministic, any schedule can be replayed exactly, which is what the
//! randomized contract tests rely on.
//!
//! State is dense and index-based: per Port an Item column, per Call a Grain
//! column, per child Domain an Expansion column, all indexed by Entity slot
//! (see `lineage`). A propagation step is a few array reads; nothing on the
//! hot path hashes or locks.
//!
//! Invariants (checked by the tests in `tests/conformance_*.rs`):
//! - A Grain commits only if it is in flight and the report carries its
//!   current generation and Entity epoch; anything else is counted as stale.
//! - A typed GroupFailure installs a barrier for (Call, immediate parent):
//!   queued siblings are sealed Suppressed at once, waiting ones when they
//!   would be decided, in-flight ones when they report; committed ones stay.
//! - A root is released (all its Entities, Items and Grains) right after its
//!   outcome is queued for the consumer; memory is bounded by the window.
//! - Retries never reorder the FIFO: they go to per-Call recovery queues.

pub mod grain;
pub mod lineage;
pub mod ready_queue;
pub mod rules;

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::sync::Arc;

use crate::engine::grain::{Grain, Phase, Transition};
use crate::engine::lineage::{Entities, Expansion, Publish, Slot, publish_item, state_of};
use crate::engine::ready_queue::{CallQueues, Entry};
use crate::engine::rules::{CallDecision, ExpandDecision, ExpansionState, FilterDecision, State};
use crate::error::RunError;
use crate::exec::stage::{AttemptError, AttemptResult, BatchInputs, ErasedOutcome};
use crate::plan::build::NodeKind;
use crate::plan::call::Recovery;
use crate::plan::{Output, Plan, PlanInner};
use crate::value::{Cause, Data, Item, ItemKind, Outcome, Value, take_value};

/// Engine settings.
#[derive(Clone, Debug)]
pub struct EngineConfig {
    /// At most this many roots in flight (the admission window).
    pub window: usize,
    /// Seed for the unordered reservation policy.
    pub seed: u64,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            window: 64,
            seed: 0x5eed,
        }
    }
}

/// Names one reserved batch; a report must quote it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BatchId {
    slot: u32,
    nonce: u32,
}

/// One Grain of a reserved batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GrainRef {
    /// The Call index.
    pub call: usize,
    domain: usize,
    entity: u32,
    epoch: u32,
    /// The generation this dispatch carries.
    pub generation: u32,
}

/// A physical batch handed to an executor.
#[derive(Debug)]
pub struct Batch {
    /// Quote it in the report.
    pub id: BatchId,
    /// The Call index (see [`Plan::calls`]).
    pub call: usize,
    /// Erased inputs, `arity` slots per Grain, in Grain order.
    pub inputs: BatchInputs,
    /// The Grains, in the same order.
    pub grains: Vec<GrainRef>,
}

/// Where an Entity sits: its root key, then one ordinal per level.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EntityPath {
    /// The root's key.
    pub root: u64,
    /// Ordinals below the root, outermost first.
    pub ordinals: Vec<u32>,
}

impl fmt::Display for EntityPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.root)?;
        for o in &self.ordinals {
            write!(f, "/{o}")?;
        }
        Ok(())
    }
}

/// A root's final outcome: one Item per plan output.
#[derive(Clone, Debug)]
pub struct RootOutcome {
    /// The root's key.
    pub key: u64,
    /// One Item per output, in declaration order.
    pub items: Vec<Item<Value>>,
}

impl RootOutcome {
    /// Read one output, typed.
    pub fn get<T: Data>(&self, out: Output<T>) -> Item<T> {
        match self.items.get(out.index) {
            Some(Item::Present(v)) => match take_value::<T>(v.clone()) {
                Some(t) => Item::Present(t),
                None => Item::Failed(Cause::new("internal: output type mismatch")),
            },
            Some(Item::Dropped) => Item::Dropped,
            Some(Item::Failed(c)) => Item::Failed(c.clone()),
            Some(Item::Suppressed(c)) => Item::Suppressed(c.clone()),
            None => Item::Failed(Cause::new("internal: no such output")),
        }
    }

    /// The root's overall kind: the first non-present output decides.
    pub fn kind(&self) -> ItemKind {
        self.items
            .iter()
            .map(Item::kind)
            .find(|k| *k != ItemKind::Present)
            .unwrap_or(ItemKind::Present)
    }

    /// The cause of the first non-present output, if any.
    pub fn cause(&self) -> Option<&Cause> {
        self.items.iter().find_map(Item::cause)
    }
}

/// Per-Call counters.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CallStats {
    /// Physical batches dispatched (RPCs).
    pub rpcs: u64,
    /// Grains dispatched, retries included.
    pub grains_dispatched: u64,
    /// Grains committed with a present value.
    pub committed: u64,
    /// Grains ended Failed by a RecordFailure.
    pub record_failures: u64,
    /// Grains ended Failed by a GroupFailure.
    pub group_failures: u64,
    /// Grains ended Failed after exhausting recovery.
    pub exhausted: u64,
    /// Grains ended Failed by a stage contract error.
    pub contract_errors: u64,
    /// Whole attempts that failed (Err, panic, crash, timeout).
    pub attempt_failures: u64,
    /// Grains put back for a retry.
    pub requeued: u64,
    /// Grains sealed Suppressed by a barrier before they were dispatched.
    pub suppressed_before_dispatch: u64,
    /// In-flight Grains whose report the barrier refused.
    pub suppressed_in_flight: u64,
    /// Grain reports refused by the commit gate (old generation, freed root).
    pub stale_grains: u64,
    /// Queue entries examined by reservations (tombstones included).
    pub queue_touches: u64,
    /// Batches whose Grains belong to more than one parent.
    pub mixed_parent_batches: u64,
}

/// Whole-engine counters.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EngineStats {
    /// Roots admitted.
    pub roots_admitted: u64,
    /// Roots whose outcome was handed out, by kind.
    pub roots_present: u64,
    /// See `roots_present`.
    pub roots_dropped: u64,
    /// See `roots_present`.
    pub roots_failed: u64,
    /// See `roots_present`.
    pub roots_suppressed: u64,
    /// Reports for a batch that is not in flight (stale or duplicate).
    pub rejected_reports: u64,
    /// Conflicting fact publications (always a bug; must stay 0).
    pub conflicts: u64,
    /// Rejected Grain transitions (always a bug; must stay 0).
    pub invalid_transitions: u64,
}

/// What happened to a report.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReportOutcome {
    /// The batch was in flight; this many Grains were sealed by it (with
    /// their own outcome or suppressed by a barrier), this many were stale.
    Accepted {
        /// Grains sealed by this report.
        committed: usize,
        /// Grains the gate refused.
        stale: usize,
    },
    /// The attempt failed; this many Grains were requeued.
    Retried {
        /// Grains put back.
        requeued: usize,
    },
    /// The batch is not in flight: a stale or duplicate report.
    Rejected,
}

#[derive(Clone, Copy, Debug, Default)]
struct ReduceRec {
    pending: u32,
    done: bool,
}

#[derive(Clone, Debug, Default)]
struct RootRec {
    key: u64,
    outputs_pending: u32,
}

struct BatchRec {
    nonce: u32,
    call: usize,
    grains: Vec<(u32, u32, u32)>,
}

/// The synchronous lineage engine and scheduler for one run of a [`Plan`].
pub struct Engine {
    plan: Arc<PlanInner>,
    config: EngineConfig,
    doms: Vec<Entities>,
    items: Vec<Vec<Slot>>,
    grains: Vec<Vec<Grain>>,
    exps: Vec<Vec<Expansion>>,
    reds: Vec<Vec<ReduceRec>>,
    barriers: Vec<Vec<Option<Cause>>>,
    queues: Vec<CallQueues>,
    roots: Vec<RootRec>,
    live_keys: HashMap<u64, u32>,
    batches: Vec<Option<BatchRec>>,
    batch_free: Vec<u32>,
    nonce: u32,
    in_flight: usize,
    work: VecDeque<(u32, u32)>,
    to_finish: Vec<u32>,
    finished: VecDeque<RootOutcome>,
    aborted: Option<RunError>,
    call_stats: Vec<CallStats>,
    stats: EngineStats,
    /// Stands in for a value whose only consumer has taken it.
    consumed: Value,
}

impl Engine {
    /// A fresh engine for one run of `plan`.
    pub fn new(plan: &Plan, config: EngineConfig) -> Engine {
        let p = plan.inner.clone();
        let calls = p.calls.len();
        Engine {
            doms: (0..p.domains.len()).map(|_| Entities::default()).collect(),
            items: (0..p.ports.len()).map(|_| Vec::new()).collect(),
            grains: (0..calls).map(|_| Vec::new()).collect(),
            exps: (0..p.domains.len()).map(|_| Vec::new()).collect(),
            reds: (0..p.reduces.len()).map(|_| Vec::new()).collect(),
            barriers: (0..calls).map(|_| Vec::new()).collect(),
            queues: (0..calls)
                .map(|i| {
                    CallQueues::new(
                        config
                            .seed
                            .wrapping_add(i as u64)
                            .wrapping_mul(0x9e37_79b9_7f4a_7c15),
                        p.calls[i].config.reservation,
                    )
                })
                .collect(),
            roots: Vec::new(),
            live_keys: HashMap::new(),
            batches: Vec::new(),
            batch_free: Vec::new(),
            nonce: 0,
            in_flight: 0,
            work: VecDeque::new(),
            to_finish: Vec::new(),
            finished: VecDeque::new(),
            aborted: None,
            call_stats: vec![CallStats::default(); calls],
            stats: EngineStats::default(),
            consumed: Arc::new(Consumed),
            plan: p,
            config,
        }
    }

    /// The admission window.
    pub fn window(&self) -> usize {
        self.config.window
    }

    /// Roots admitted and not yet handed out.
    pub fn live_roots(&self) -> usize {
        self.live_keys.len()
    }

    /// Can another root be admitted now?
    pub fn can_admit(&self) -> bool {
        self.aborted.is_none() && self.live_keys.len() < self.config.window
    }

    /// Batches reserved and not yet reported.
    pub fn in_flight_batches(&self) -> usize {
        self.in_flight
    }

    /// Number of Calls in the plan.
    pub fn calls(&self) -> usize {
        self.plan.calls.len()
    }

    /// Whole-engine counters.
    pub fn stats(&self) -> &EngineStats {
        &self.stats
    }

    /// Counters of Call `c`.
    pub fn call_stats(&self, c: usize) -> &CallStats {
        &self.call_stats[c]
    }

    /// The fail-stop error, once a Call with `Recovery::Abort` has failed.
    pub fn aborted(&self) -> Option<&RunError> {
        self.aborted.as_ref()
    }

    /// May Call `c` have ready work? (Cheap; may be a false positive.)
    pub fn may_have_ready(&self, c: usize) -> bool {
        self.queues[c].len_upper_bound() > 0
    }

    /// The next finished root, in completion order.
    pub fn pop_finished(&mut self) -> Option<RootOutcome> {
        self.finished.pop_front()
    }

    /// Admit one root with a typed input.
    pub fn admit_typed<T: Data>(&mut self, key: u64, input: T) -> Result<(), RunError> {
        self.admit(key, Arc::new(input))
    }

    /// Admit one root. Fails without side effects when the window is full,
    /// the key is already in flight, or the input has the wrong type.
    pub fn admit(&mut self, key: u64, input: Value) -> Result<(), RunError> {
        if let Some(e) = &self.aborted {
            return Err(e.clone());
        }
        if self.live_keys.len() >= self.config.window {
            return Err(RunError::WindowFull {
                window: self.config.window,
            });
        }
        if std::any::Any::type_id(&*input) != self.plan.source_type.0 {
            return Err(RunError::InputType {
                key,
                expected: self.plan.source_type.1,
            });
        }
        if self.live_keys.contains_key(&key) {
            return Err(RunError::DuplicateKey { key });
        }
        let root = self.plan.root;
        let r = self.alloc(root, u32::MAX, u32::MAX, 0);
        self.roots[r as usize] = RootRec {
            key,
            outputs_pending: self.plan.outputs.len() as u32,
        };
        self.live_keys.insert(key, r);
        self.stats.roots_admitted += 1;
        let plan = self.plan.clone();
        match plan.source_split {
            None => self.set(plan.source_ports[0], r, Item::Present(input)),
            Some(split) => match split(input) {
                Some(values) => {
                    for (&p, v) in plan.source_ports.iter().zip(values) {
                        self.set(p, r, Item::Present(v));
                    }
                }
                None => {
                    let cause = Cause::new("internal: the source could not split its input");
                    for &p in &plan.source_ports {
                        self.set(p, r, Item::Failed(cause.clone()));
                    }
                }
            },
        }
        self.drain();
        Ok(())
    }

    /// Reserve up to `max` ready Grains of Call `c` into a physical batch,
    /// following the Call's reservation policy; `None` when nothing is ready.
    pub fn reserve(&mut self, c: usize, max: usize) -> Option<Batch> {
        if self.aborted.is_some() {
            return None;
        }
        let plan = self.plan.clone();
        let call = &plan.calls[c];
        let dom = call.domain;
        let entries = {
            let ents = &self.doms[dom];
            let grains = &self.grains[c];
            let live = |e: &Entry| {
                ents.is(e.entity, e.epoch) && {
                    let g = &grains[e.entity as usize];
                    g.phase == Phase::Ready && g.generation == e.generation
                }
            };
            let parent = |e: &Entry| ents.ents[e.entity as usize].parent;
            let stats = &mut self.call_stats[c];
            self.queues[c]
                .reserve(
                    max,
                    call.config.reservation,
                    live,
                    parent,
                    &mut stats.queue_touches,
                )
                .0
        };
        if entries.is_empty() {
            return None;
        }
        let mut inputs = BatchInputs::with_capacity(call.inputs.len(), entries.len());
        let mut grains = Vec::with_capacity(entries.len());
        let mut rec = Vec::with_capacity(entries.len());
        for en in &entries {
            let e = en.entity;
            let g = &mut self.grains[c][e as usize];
            if g.transition(Transition::Reserve).is_err() {
                self.stats.invalid_transitions += 1;
                continue;
            }
            let generation = g.generation;
            for edge in &call.inputs {
                inputs.push(match &self.items[edge.port as usize][e as usize] {
                    Some(Item::Present(v)) => Some(v.clone()),
                    _ => None,
                });
            }
            grains.push(GrainRef {
                call: c,
                domain: dom,
                entity: e,
                epoch: en.epoch,
                generation,
            });
            rec.push((e, en.epoch, generation));
        }
        self.nonce = self.nonce.wrapping_add(1);
        let rec = BatchRec {
            nonce: self.nonce,
            call: c,
            grains: rec,
        };
        let slot = match self.batch_free.pop() {
            Some(s) => {
                self.batches[s as usize] = Some(rec);
                s
            }
            None => {
                self.batches.push(Some(rec));
                (self.batches.len() - 1) as u32
            }
        };
        self.in_flight += 1;
        let ents = &self.doms[dom].ents;
        let first_parent = ents[grains[0].entity as usize].parent;
        let mixed = grains
            .iter()
            .any(|g| ents[g.entity as usize].parent != first_parent);
        let stats = &mut self.call_stats[c];
        stats.mixed_parent_batches += u64::from(mixed);
        stats.rpcs += 1;
        stats.grains_dispatched += grains.len() as u64;
        Some(Batch {
            id: BatchId {
                slot,
                nonce: self.nonce,
            },
            call: c,
            inputs,
            grains,
        })
    }

    /// Report the result of one attempt. The commit gate decides, Grain by
    /// Grain, whether it may publish.
    pub fn report(&mut self, id: BatchId, result: AttemptResult) -> ReportOutcome {
        let rec = self
            .batches
            .get_mut(id.slot as usize)
            .and_then(|b| b.take_if(|b| b.nonce == id.nonce));
        let Some(rec) = rec else {
            self.stats.rejected_reports += 1;
            return ReportOutcome::Rejected;
        };
        self.batch_free.push(id.slot);
        self.in_flight -= 1;
        let c = rec.call;
        let plan = self.plan.clone();
        let dom = plan.calls[c].domain;
        let valid: Vec<bool> = rec
            .grains
            .iter()
            .map(|&(e, epoch, generation)| {
                self.doms[dom].is(e, epoch) && {
                    let g = &self.grains[c][e as usize];
                    g.phase == Phase::InFlight && g.generation == generation
                }
            })
            .collect();
        let stale = valid.iter().filter(|v| !**v).count();
        self.call_stats[c].stale_grains += stale as u64;
        let live: Vec<u32> = rec
            .grains
            .iter()
            .zip(&valid)
            .filter(|(_, v)| **v)
            .map(|(g, _)| g.0)
            .collect();
        let outcome = match result {
            Ok(outcomes) if outcomes.len() == rec.grains.len() => {
                let committed = live.len();
                self.commit(c, &rec.grains, &valid, outcomes);
                ReportOutcome::Accepted { committed, stale }
            }
            Ok(outcomes) => {
                let msg = format!(
                    "contract error: Call `{}` (stage `{}`) returned {} outcomes for a batch of {} inputs; a stage must return exactly one outcome per input, in input order",
                    plan.calls[c].name,
                    plan.calls[c].runtime.stage_name(),
                    outcomes.len(),
                    rec.grains.len()
                );
                self.contract_error(c, &live, &msg);
                ReportOutcome::Accepted { committed: 0, stale }
            }
            Err(AttemptError::Contract(msg)) => {
                self.contract_error(c, &live, &msg);
                ReportOutcome::Accepted { committed: 0, stale }
            }
            Err(AttemptError::Failed(msg)) => {
                self.call_stats[c].attempt_failures += 1;
                let requeued = self.recover(c, &live, &msg);
                ReportOutcome::Retried { requeued }
            }
        };
        self.drain();
        outcome
    }

    /// The path of a Grain's Entity, while its root is live.
    pub fn entity_path(&self, g: &GrainRef) -> Option<EntityPath> {
        self.doms[g.domain]
            .is(g.entity, g.epoch)
            .then(|| self.path(g.domain, g.entity))
    }

    /// If nothing is in flight and nothing is dispatchable while roots are
    /// unfinished, describe what is stuck (instead of letting a driver hang).
    pub fn stall(&self) -> Option<String> {
        if self.live_keys.is_empty() || self.in_flight > 0 || self.aborted.is_some() {
            return None;
        }
        for (c, q) in self.queues.iter().enumerate() {
            let dom = self.plan.calls[c].domain;
            let live = q.all().any(|e| {
                self.doms[dom].is(e.entity, e.epoch) && {
                    let g = &self.grains[c][e.entity as usize];
                    g.phase == Phase::Ready && g.generation == e.generation
                }
            });
            if live {
                return None;
            }
        }
        let mut msg = format!(
            "{} root(s) unfinished with nothing ready or in flight",
            self.live_keys.len()
        );
        let mut keys: Vec<u64> = self.live_keys.keys().copied().collect();
        keys.sort_unstable();
        msg.push_str(&format!("; roots {:?}", &keys[..keys.len().min(10)]));
        for (c, call) in self.plan.calls.iter().enumerate() {
            let ents = &self.doms[call.domain];
            let waiting = ents
                .ents
                .iter()
                .enumerate()
                .filter(|(i, e)| e.live && self.grains[c][*i].phase == Phase::Waiting)
                .count();
            if waiting > 0 {
                msg.push_str(&format!(
                    "; Call `{}`: {waiting} Grain(s) waiting on inputs",
                    call.name
                ));
            }
        }
        for (d, spec) in self.plan.domains.iter().enumerate() {
            if spec.expand.is_none() {
                continue;
            }
            let Some(p) = spec.parent else { continue };
            let open = self.doms[p]
                .ents
                .iter()
                .enumerate()
                .filter(|(i, e)| e.live && self.exps[d][*i].state == ExpansionState::Unresolved)
                .count();
            if open > 0 {
                msg.push_str(&format!(
                    "; {open} expansion(s) into `{}` unresolved",
                    spec.info.name
                ));
            }
        }
        Some(msg)
    }

    // ---- allocation and release -------------------------------------------------

    fn alloc(&mut self, dom: usize, root: u32, parent: u32, ordinal: u32) -> u32 {
        let (e, grew) = if root == u32::MAX {
            self.doms[dom].alloc_root()
        } else {
            self.doms[dom].alloc(root, parent, ordinal)
        };
        let plan = &self.plan;
        let spec = &plan.domains[dom];
        let i = e as usize;
        if grew {
            for &p in &spec.ports {
                self.items[p as usize].push(None);
            }
            for &c in &spec.calls {
                self.grains[c].push(Grain::new(plan.calls[c].inputs.len()));
            }
            for &ch in &spec.children {
                self.exps[ch].push(Expansion::new(expand_arity(plan, ch)));
            }
            for &r in &spec.reduces_into {
                self.reds[plan.nodes[r].dense].push(ReduceRec::default());
            }
            for &c in &spec.child_calls {
                self.barriers[c].push(None);
            }
            if dom == plan.root {
                self.roots.push(RootRec::default());
            }
        } else {
            for &c in &spec.calls {
                self.grains[c][i] = Grain::new(plan.calls[c].inputs.len());
            }
            for &ch in &spec.children {
                self.exps[ch][i] = Expansion::new(expand_arity(plan, ch));
            }
            for &r in &spec.reduces_into {
                self.reds[plan.nodes[r].dense][i] = ReduceRec::default();
            }
            for &c in &spec.child_calls {
                self.barriers[c][i] = None;
            }
        }
        e
    }

    fn free_tree(&mut self, dom: usize, e: u32) {
        let plan = self.plan.clone();
        for &ch in &plan.domains[dom].children {
            let kids = std::mem::take(&mut self.exps[ch][e as usize].children);
            for k in kids {
                self.free_tree(ch, k);
            }
        }
        for &p in &plan.domains[dom].ports {
            self.items[p as usize][e as usize] = None;
        }
        self.doms[dom].release(e);
    }

    fn finish_root(&mut self, r: u32) {
        let plan = self.plan.clone();
        let items: Vec<Item<Value>> = plan
            .outputs
            .iter()
            .map(|&p| {
                self.items[p as usize][r as usize]
                    .clone()
                    .unwrap_or_else(|| Item::Failed(Cause::new("internal: unresolved output")))
            })
            .collect();
        let key = self.roots[r as usize].key;
        self.live_keys.remove(&key);
        self.free_tree(plan.root, r);
        let out = RootOutcome { key, items };
        match out.kind() {
            ItemKind::Present => self.stats.roots_present += 1,
            ItemKind::Dropped => self.stats.roots_dropped += 1,
            ItemKind::Failed => self.stats.roots_failed += 1,
            ItemKind::Suppressed => self.stats.roots_suppressed += 1,
        }
        self.finished.push_back(out);
    }

    fn path(&self, dom: usize, e: u32) -> EntityPath {
        let mut ordinals = Vec::new();
        let (mut d, mut i) = (dom, e);
        while let Some(p) = self.plan.domains[d].parent {
            let ent = self.doms[d].ents[i as usize];
            ordinals.push(ent.ordinal);
            i = ent.parent;
            d = p;
        }
        ordinals.reverse();
        EntityPath {
            root: self.roots[i as usize].key,
            ordinals,
        }
    }

    fn context(&self, c: usize, e: u32) -> String {
        let call = &self.plan.calls[c];
        format!(
            "Call `{}` on {} {}",
            call.name,
            self.plan.domains[call.domain].info.name,
            self.path(call.domain, e)
        )
    }

    // ---- propagation ----------------------------------------------------------------

    fn set(&mut self, port: u32, e: u32, item: Item<Value>) {
        match publish_item(&mut self.items[port as usize][e as usize], item) {
            Publish::New => self.work.push_back((port, e)),
            Publish::Repeat => {}
            Publish::Conflict => {
                debug_assert!(false, "conflicting publication on port {port} entity {e}");
                self.stats.conflicts += 1;
            }
        }
    }

    fn item(&self, port: u32, e: u32) -> &Slot {
        &self.items[port as usize][e as usize]
    }

    fn cause_of(&self, port: u32, e: u32) -> Cause {
        self.item(port, e)
            .as_ref()
            .and_then(|i| i.cause().cloned())
            .unwrap_or_else(|| Cause::new("internal: missing cause"))
    }

    fn drain(&mut self) {
        let plan = self.plan.clone();
        while let Some((p, e)) = self.work.pop_front() {
            let spec = &plan.ports[p as usize];
            if spec.output.is_some() {
                let r = &mut self.roots[e as usize];
                r.outputs_pending -= 1;
                if r.outputs_pending == 0 {
                    self.to_finish.push(e);
                }
            }
            for &(node, slot) in &spec.consumers {
                match &plan.nodes[node].kind {
                    NodeKind::Call { .. } => self.on_call_input(&plan, plan.nodes[node].dense, e, slot),
                    NodeKind::Filter { .. } => self.on_filter_input(&plan, node, e),
                    NodeKind::Expand { .. } => self.on_expand_input(&plan, node, e, slot),
                    NodeKind::Reduce { .. } => self.on_reduce_input(&plan, node, e, p),
                    NodeKind::Broadcast { .. } => self.on_broadcast_value(&plan, node, e),
                    NodeKind::Source { .. } => {}
                }
            }
        }
        for r in std::mem::take(&mut self.to_finish) {
            self.finish_root(r);
        }
    }

    fn on_call_input(&mut self, plan: &PlanInner, c: usize, e: u32, slot: usize) {
        let call = &plan.calls[c];
        let g = &mut self.grains[c][e as usize];
        if g.phase != Phase::Waiting {
            return;
        }
        let port = call.inputs[slot].port;
        let st = state_of(&self.items[port as usize][e as usize]);
        if !matches!(st, State::Failed | State::Suppressed) {
            g.pending -= 1;
            if g.pending > 0 {
                return;
            }
        }
        let mut buf = [(State::Unresolved, false); 8];
        for (b, edge) in buf.iter_mut().zip(&call.inputs) {
            *b = (state_of(self.item(edge.port, e)), edge.optional);
        }
        let barrier = self.barrier(plan, c, e);
        match rules::decide_call(&buf[..call.inputs.len()], barrier.is_some()) {
            CallDecision::Wait => {}
            CallDecision::SuppressedBy(i) => {
                let cause = self.cause_of(call.inputs[i].port, e);
                self.seal(c, e, Transition::Decide, Item::Suppressed(cause));
            }
            CallDecision::SuppressedByBarrier => {
                self.call_stats[c].suppressed_before_dispatch += 1;
                let cause = barrier.unwrap_or_else(|| Cause::new("group failure"));
                self.seal(c, e, Transition::Decide, Item::Suppressed(cause));
            }
            CallDecision::Dropped => self.seal(c, e, Transition::Decide, Item::Dropped),
            CallDecision::Ready => {
                let g = &mut self.grains[c][e as usize];
                if g.transition(Transition::MakeReady).is_err() {
                    self.stats.invalid_transitions += 1;
                    return;
                }
                let entry = Entry {
                    entity: e,
                    epoch: self.doms[call.domain].ents[e as usize].epoch,
                    generation: g.generation,
                };
                let parent = plan.domains[call.domain].parent.map(|pd| {
                    let p = self.doms[call.domain].ents[e as usize].parent;
                    (p, self.doms[pd].ents[p as usize].epoch)
                });
                self.queues[c].push(entry, parent);
            }
        }
    }

    fn barrier(&self, plan: &PlanInner, c: usize, e: u32) -> Option<Cause> {
        let dom = plan.calls[c].domain;
        plan.domains[dom].parent?;
        let p = self.doms[dom].ents[e as usize].parent;
        self.barriers[c][p as usize].clone()
    }

    /// Seal Grain (c, e) and publish the same non-present Item on every output.
    fn seal(&mut self, c: usize, e: u32, t: Transition, item: Item<Value>) {
        if self.grains[c][e as usize].transition(t).is_err() {
            self.stats.invalid_transitions += 1;
            return;
        }
        self.release_inputs(c, e);
        let plan = self.plan.clone();
        for &out in &plan.calls[c].outputs {
            self.set(out, e, item.clone());
        }
    }

    /// A sealed Grain no longer needs its inputs: drop the values of those
    /// it was the only consumer of (the Item stays Present as a fact). Until
    /// the seal they are kept, because a retry needs them again.
    fn release_inputs(&mut self, c: usize, e: u32) {
        let plan = self.plan.clone();
        for edge in &plan.calls[c].inputs {
            self.take_if_sole(edge.port, e);
        }
    }

    /// Take an Item's value out of its slot when its single consumer is the
    /// caller, so the payload moves instead of being cloned; otherwise share.
    fn take_if_sole(&mut self, port: u32, e: u32) -> Option<Value> {
        let sole = self.plan.ports[port as usize].sole_consumer;
        match &mut self.items[port as usize][e as usize] {
            Some(Item::Present(v)) if sole => Some(std::mem::replace(v, self.consumed.clone())),
            Some(Item::Present(v)) => Some(v.clone()),
            _ => None,
        }
    }

    fn on_filter_input(&mut self, plan: &PlanInner, node: usize, e: u32) {
        let n = &plan.nodes[node];
        let NodeKind::Filter {
            value,
            mask,
            read_mask,
        } = n.kind
        else {
            return;
        };
        let out = n.outputs[0];
        if self.item(out, e).is_some() {
            return;
        }
        let vs = state_of(self.item(value, e));
        let ms = state_of(self.item(mask, e));
        let keep = match self.item(mask, e) {
            Some(Item::Present(v)) => read_mask(v).unwrap_or(false),
            _ => false,
        };
        let item = match rules::decide_filter(vs, ms, keep) {
            FilterDecision::Wait => return,
            FilterDecision::Value => self.item(value, e).clone(),
            FilterDecision::Mask => self.item(mask, e).clone(),
            FilterDecision::Dropped => Some(Item::Dropped),
        };
        if let Some(item) = item {
            self.set(out, e, item);
        }
    }

    fn on_expand_input(&mut self, plan: &PlanInner, node: usize, p: u32, slot: usize) {
        let n = &plan.nodes[node];
        let NodeKind::Expand { inputs, split } = &n.kind else {
            return;
        };
        let child = n.domain;
        let x = &mut self.exps[child][p as usize];
        if x.state != ExpansionState::Unresolved {
            return;
        }
        let st = state_of(&self.items[inputs[slot] as usize][p as usize]);
        if !matches!(st, State::Failed | State::Suppressed) {
            x.pending -= 1;
            if x.pending > 0 {
                return;
            }
        }
        let states: Vec<State> = inputs.iter().map(|&i| state_of(self.item(i, p))).collect();
        let lists = match rules::decide_expand(&states, None) {
            ExpandDecision::FailedBy(i) => {
                let cause = self.cause_of(inputs[i], p);
                return self.close_expansion(plan, child, p, ExpansionState::Failed, Some(cause));
            }
            ExpandDecision::Dropped => {
                return self.close_expansion(plan, child, p, ExpansionState::Dropped, None);
            }
            _ => {
                let lists: Option<Vec<Vec<Value>>> = inputs
                    .iter()
                    .zip(split)
                    .map(|(&i, f)| self.take_if_sole(i, p).and_then(f))
                    .collect();
                match lists {
                    Some(l) => l,
                    None => {
                        let cause =
                            Cause::new(format!("internal: {} could not read its input lists", n.label));
                        return self.close_expansion(plan, child, p, ExpansionState::Failed, Some(cause));
                    }
                }
            }
        };
        let lens: Vec<usize> = lists.iter().map(Vec::len).collect();
        match rules::decide_expand(&states, Some(&lens)) {
            ExpandDecision::Succeeded(_) => self.create_children(plan, node, p, lists),
            _ => {
                let parent_dom = plan.domains[child].parent.unwrap_or(plan.root);
                let cause = Cause::at(
                    format!(
                        "cardinality mismatch: aligned lists have lengths {lens:?}; every list of an aligned expansion must have the same length"
                    ),
                    format!(
                        "{} of {} {}",
                        n.label,
                        plan.domains[parent_dom].info.name,
                        self.path(parent_dom, p)
                    ),
                );
                self.close_expansion(plan, child, p, ExpansionState::Failed, Some(cause));
            }
        }
    }

    /// An Expansion that produced no children: resolve the reduces over it.
    fn close_expansion(
        &mut self,
        plan: &PlanInner,
        child: usize,
        p: u32,
        state: ExpansionState,
        cause: Option<Cause>,
    ) {
        if self.exps[child][p as usize].publish(state, cause.clone(), Vec::new()) != Publish::New {
            return;
        }
        let item = match (state, cause) {
            (ExpansionState::Failed, Some(c)) => Item::Suppressed(c),
            _ => Item::Dropped,
        };
        for &r in &plan.domains[child].reduces_over {
            self.resolve_reduce(plan, r, p, item.clone());
        }
    }

    fn create_children(&mut self, plan: &PlanInner, node: usize, p: u32, lists: Vec<Vec<Value>>) {
        let n = &plan.nodes[node];
        let child = n.domain;
        let parent_dom = plan.domains[child].parent.unwrap_or(plan.root);
        let m = lists.first().map_or(0, Vec::len);
        let root = self.doms[parent_dom].ents[p as usize].root;
        let children: Vec<u32> = (0..m as u32).map(|j| self.alloc(child, root, p, j)).collect();
        self.exps[child][p as usize].publish(ExpansionState::Succeeded, None, children);
        for &r in &plan.domains[child].reduces_over {
            let NodeKind::Reduce { inputs, members, .. } = &plan.nodes[r].kind else {
                continue;
            };
            let per_child = inputs.len() + usize::from(members.is_some());
            let rec = &mut self.reds[plan.nodes[r].dense][p as usize];
            *rec = ReduceRec {
                pending: (m * per_child) as u32,
                done: false,
            };
            if m == 0 {
                self.complete_reduce(plan, r, p);
            }
        }
        for (i, list) in lists.into_iter().enumerate() {
            let out = n.outputs[i];
            for (j, v) in list.into_iter().enumerate() {
                let ch = self.exps[child][p as usize].children[j];
                self.set(out, ch, Item::Present(v));
            }
        }
        for &b in &plan.domains[child].broadcasts_into {
            let NodeKind::Broadcast { value, .. } = plan.nodes[b].kind else {
                continue;
            };
            let vdom = plan.ports[value as usize].domain;
            let anc = self.ancestor(plan, parent_dom, p, vdom);
            if let Some(item) = self.item(value, anc).clone() {
                let out = plan.nodes[b].outputs[0];
                for j in 0..m {
                    let ch = self.exps[child][p as usize].children[j];
                    self.set(out, ch, item.clone());
                }
            }
        }
    }

    fn ancestor(&self, plan: &PlanInner, mut dom: usize, mut e: u32, target: usize) -> u32 {
        while dom != target {
            let Some(p) = plan.domains[dom].parent else { break };
            e = self.doms[dom].ents[e as usize].parent;
            dom = p;
        }
        e
    }

    fn on_reduce_input(&mut self, plan: &PlanInner, node: usize, ch: u32, port: u32) {
        let child = plan.ports[port as usize].domain;
        let p = self.doms[child].ents[ch as usize].parent;
        let rec = &mut self.reds[plan.nodes[node].dense][p as usize];
        if rec.done {
            return;
        }
        match self.items[port as usize][ch as usize] {
            Some(Item::Failed(ref c)) | Some(Item::Suppressed(ref c)) => {
                let cause = c.clone();
                self.resolve_reduce(plan, node, p, Item::Suppressed(cause));
            }
            _ => {
                rec.pending -= 1;
                if rec.pending == 0 {
                    self.complete_reduce(plan, node, p);
                }
            }
        }
    }

    fn resolve_reduce(&mut self, plan: &PlanInner, node: usize, p: u32, item: Item<Value>) {
        let rec = &mut self.reds[plan.nodes[node].dense][p as usize];
        if rec.done {
            return;
        }
        rec.done = true;
        for &out in &plan.nodes[node].outputs {
            self.set(out, p, item.clone());
        }
    }

    fn complete_reduce(&mut self, plan: &PlanInner, node: usize, p: u32) {
        let n = &plan.nodes[node];
        let NodeKind::Reduce {
            inputs,
            members,
            gather,
        } = &n.kind
        else {
            return;
        };
        let child = plan.ports[inputs[0] as usize].domain;
        let mut cols: Vec<Vec<Value>> = vec![Vec::new(); inputs.len()];
        let n_children = self.exps[child][p as usize].children.len();
        for j in 0..n_children {
            let ch = self.exps[child][p as usize].children[j];
            let member = members.is_none_or(|m| matches!(self.item(m, ch), Some(Item::Present(_))));
            let all_present = inputs
                .iter()
                .all(|&i| matches!(self.item(i, ch), Some(Item::Present(_))));
            if member && all_present {
                for (col, &i) in cols.iter_mut().zip(inputs) {
                    col.extend(self.take_if_sole(i, ch));
                }
            }
        }
        self.reds[n.dense][p as usize].done = true;
        for ((col, f), &out) in cols.into_iter().zip(gather).zip(&n.outputs) {
            let item = match f(col) {
                Some(v) => Item::Present(v),
                None => Item::Failed(Cause::new(format!(
                    "internal: {} could not gather its values",
                    n.label
                ))),
            };
            self.set(out, p, item);
        }
    }

    fn on_broadcast_value(&mut self, plan: &PlanInner, node: usize, a: u32) {
        let n = &plan.nodes[node];
        let NodeKind::Broadcast { value, .. } = n.kind else {
            return;
        };
        let Some(item) = self.item(value, a).clone() else {
            return;
        };
        let vdom = plan.ports[value as usize].domain;
        let mut down = plan.path_up(n.domain, vdom);
        down.pop();
        down.reverse();
        down.push(n.domain);
        let mut frontier = vec![a];
        let mut parent = vdom;
        for d in down {
            frontier = frontier
                .iter()
                .flat_map(|&e| self.exps[d][e as usize].children.iter().copied())
                .collect();
            parent = d;
        }
        debug_assert_eq!(parent, n.domain);
        let out = n.outputs[0];
        for t in frontier {
            self.set(out, t, item.clone());
        }
    }

    // ---- commit, failure and recovery ---------------------------------------------------

    fn commit(&mut self, c: usize, grains: &[(u32, u32, u32)], valid: &[bool], outcomes: Vec<ErasedOutcome>) {
        // Pass 1: GroupFailures install their barriers first, so successes of
        // the same (Call, parent) in this very batch are suppressed too. A
        // sibling whose parent was barred before this report arrived cannot
        // commit anything, not even its own failure: it is suppressed in pass 2.
        let plan = self.plan.clone();
        let barred_before: Vec<bool> = grains
            .iter()
            .zip(valid)
            .map(|(g, &v)| v && self.barrier(&plan, c, g.0).is_some())
            .collect();
        for (i, o) in outcomes.iter().enumerate() {
            if let (true, false, Outcome::GroupFailure(cause)) = (valid[i], barred_before[i], o) {
                let e = grains[i].0;
                let cause = cause.clone().located(|| self.context(c, e));
                self.install_barrier(c, e, cause.clone());
                self.call_stats[c].group_failures += 1;
                self.seal(c, e, Transition::Commit, Item::Failed(cause));
            }
        }
        for (i, o) in outcomes.into_iter().enumerate() {
            if !valid[i] || (!barred_before[i] && matches!(o, Outcome::GroupFailure(_))) {
                continue;
            }
            let e = grains[i].0;
            if let Some(cause) = self.barrier(&plan, c, e) {
                self.call_stats[c].suppressed_in_flight += 1;
                self.seal(c, e, Transition::Commit, Item::Suppressed(cause));
                continue;
            }
            match o {
                Outcome::Ok(values) => {
                    if self.grains[c][e as usize].transition(Transition::Commit).is_err() {
                        self.stats.invalid_transitions += 1;
                        continue;
                    }
                    self.release_inputs(c, e);
                    self.call_stats[c].committed += 1;
                    for (&out, v) in plan.calls[c].outputs.iter().zip(values) {
                        self.set(out, e, Item::Present(v));
                    }
                }
                Outcome::RecordFailure(cause) => {
                    let cause = cause.located(|| self.context(c, e));
                    self.call_stats[c].record_failures += 1;
                    self.seal(c, e, Transition::Commit, Item::Failed(cause));
                }
                Outcome::GroupFailure(_) => {}
            }
        }
    }

    fn install_barrier(&mut self, c: usize, e: u32, cause: Cause) {
        let plan = self.plan.clone();
        let dom = plan.calls[c].domain;
        if plan.domains[dom].parent.is_none() {
            return; // a root has no siblings: a GroupFailure acts on itself only
        }
        let p = self.doms[dom].ents[e as usize].parent;
        if self.barriers[c][p as usize].is_some() {
            return;
        }
        self.barriers[c][p as usize] = Some(cause.clone());
        let n = self.exps[dom][p as usize].children.len();
        for j in 0..n {
            let sib = self.exps[dom][p as usize].children[j];
            if self.grains[c][sib as usize].phase == Phase::Ready {
                self.call_stats[c].suppressed_before_dispatch += 1;
                self.seal(
                    c,
                    sib,
                    Transition::SuppressQueued,
                    Item::Suppressed(cause.clone()),
                );
            }
        }
    }

    fn contract_error(&mut self, c: usize, live: &[u32], msg: &str) {
        for &e in live {
            self.call_stats[c].contract_errors += 1;
            let cause = Cause::at(msg, self.context(c, e));
            self.seal(c, e, Transition::Commit, Item::Failed(cause));
        }
    }

    /// Apply the Call's recovery policy to the live Grains of a failed attempt.
    fn recover(&mut self, c: usize, live: &[u32], msg: &str) -> usize {
        if live.is_empty() {
            return 0;
        }
        let plan = self.plan.clone();
        let dom = plan.calls[c].domain;
        // A sibling whose parent's barrier went up while it was in flight is
        // not retried: it would be dispatched again only to be suppressed.
        let (barred, live): (Vec<u32>, Vec<u32>) =
            live.iter().partition(|&&e| self.barrier(&plan, c, e).is_some());
        for e in barred {
            let cause = self
                .barrier(&plan, c, e)
                .unwrap_or_else(|| Cause::new("group failure"));
            self.call_stats[c].suppressed_in_flight += 1;
            self.seal(c, e, Transition::Commit, Item::Suppressed(cause));
        }
        let live = &live[..];
        if live.is_empty() {
            return 0;
        }
        for &e in live {
            self.grains[c][e as usize].failures += 1;
        }
        let (budget, immediate) = match plan.calls[c].config.recovery {
            Recovery::Abort => {
                self.aborted = Some(RunError::Aborted {
                    call: plan.calls[c].name.to_string(),
                    entity: self.path(dom, live[0]).to_string(),
                    cause: msg.to_string(),
                });
                return 0;
            }
            Recovery::RetryBatch(n) => (n, true),
            Recovery::RetryTail(n) => (n, false),
            Recovery::Isolate => {
                let first_failure = live.iter().all(|&e| self.grains[c][e as usize].failures == 1);
                if live.len() == 1 && !first_failure {
                    self.exhaust(c, live[0], msg);
                    return 0;
                }
                if first_failure {
                    return self.requeue(c, live, false);
                }
                let (a, b) = live.split_at(live.len() / 2);
                return self.requeue(c, a, true) + self.requeue(c, b, true);
            }
        };
        let (retry, spent): (Vec<u32>, Vec<u32>) = live
            .iter()
            .partition(|&&e| self.grains[c][e as usize].failures <= budget);
        for e in spent {
            self.exhaust(c, e, msg);
        }
        self.requeue(c, &retry, immediate)
    }

    fn requeue(&mut self, c: usize, group: &[u32], immediate: bool) -> usize {
        let dom = self.plan.calls[c].domain;
        let mut entries = Vec::with_capacity(group.len());
        for &e in group {
            let g = &mut self.grains[c][e as usize];
            if g.transition(Transition::Retry).is_err() {
                self.stats.invalid_transitions += 1;
                continue;
            }
            entries.push(Entry {
                entity: e,
                epoch: self.doms[dom].ents[e as usize].epoch,
                generation: g.generation,
            });
        }
        self.call_stats[c].requeued += entries.len() as u64;
        let n = entries.len();
        self.queues[c].push_recovery(entries, immediate);
        n
    }

    fn exhaust(&mut self, c: usize, e: u32, msg: &str) {
        self.call_stats[c].exhausted += 1;
        let cause = Cause::at(msg, self.context(c, e));
        self.seal(c, e, Transition::Commit, Item::Failed(cause));
    }
}

/// The placeholder left in a slot whose value moved to its only consumer.
struct Consumed;

fn expand_arity(plan: &PlanInner, child: usize) -> usize {
    match plan.domains[child].expand.map(|n| &plan.nodes[n].kind) {
        Some(NodeKind::Expand { inputs, .. }) => inputs.len(),
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Call, Plan, domain, expand, reduce};

    domain!(Doc);
    domain!(Page: Doc);

    #[test]
    fn a_broken_counter_is_reported_as_a_stall_not_a_hang() {
        let split = Call::map("split", |n: u32| (0..n).collect::<Vec<u32>>());
        let ocr = Call::map("ocr", |x: u32| x + 1);
        let (plan, _) = Plan::build(|b| {
            let d = b.source::<Doc, u32>();
            b.output(reduce(ocr.apply(expand::<Page, _, _>(split.apply(d)))))
        })
        .unwrap();
        let mut eng = Engine::new(&plan, EngineConfig::default());
        eng.admit_typed(7, 2u32).unwrap();
        assert_eq!(eng.stall(), None, "split is ready");
        for c in 0..2 {
            let b = eng.reserve(c, 8).unwrap();
            let out = plan.calls()[c].runtime.spawn().unwrap().run(b.inputs);
            if c == 0 {
                // Corrupt the reduce's counter so the root can never complete.
                eng.report(b.id, out);
                eng.reds[0][0].pending += 1;
            } else {
                eng.report(b.id, out);
            }
        }
        assert!(eng.pop_finished().is_none());
        let stall = eng.stall().expect("stall must be detected");
        assert!(stall.contains("roots [7]"), "{stall}");
    }
}
