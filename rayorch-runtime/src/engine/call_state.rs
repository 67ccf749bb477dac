//! The Call ingredient ([`CallState`]): Grains, GroupFailure barriers, ready queues and the
//! batches in flight, and the decisions that move a Grain up to dispatch.
//!
//! State, per Call: one [`Grain`] per Entity slot of the Call's Domain, one
//! barrier slot per Entity of the parent Domain, the FIFO and recovery queues
//! ([`CallQueues`]), and the counters. Run-wide: the slab of [`BatchRec`]s in
//! flight, addressed by [`BatchId`] (slot + nonce).
//!
//! Invariants:
//! - A Grain is in its Call's queue only while `Ready`; a queue entry whose
//!   epoch or generation no longer matches is a tombstone and is skipped.
//! - A batch record exists exactly while the batch is in flight; its Grains
//!   are `InFlight` with the generation the record quotes, unless a barrier
//!   or the release of their root overtook them (then the gate calls them
//!   stale or suppressed when the report comes).
//! - A value moves into a batch (the engine keeps no `Arc`) only when no
//!   retry can follow the attempt: see [`retry_possible`] and `value.rs`.
//! - Every Grain phase change goes through [`Core::transition`].

use crate::engine::boundary::{Batch, BatchId, CallStats, GrainRef, KEYS_COUNTED};
use crate::engine::grain::{Grain, InvalidTransition, Phase, Transition};
use crate::engine::lineage::state_of;
use crate::engine::propagation_rules::{self, CallDecision, State};
use crate::engine::ready_queue::{Batching, CallQueues, Entry, Reserved, Source};
use crate::engine::{Core, lineage_state::LineageState};
use crate::error::RunError;
use crate::plan::PlanInner;
use crate::plan::call::Recovery;
use crate::plan::call::Reservation;
use crate::stage::BatchInputs;
use crate::value::{Cause, Item, Value};

/// One Grain of a batch in flight, as the commit gate will check it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct InFlightGrain {
    pub(crate) entity: u32,
    pub(crate) epoch: u32,
    pub(crate) generation: u32,
}

/// A batch in flight.
pub(crate) struct BatchRec {
    pub(crate) nonce: u32,
    pub(crate) call: usize,
    pub(crate) grains: Vec<InFlightGrain>,
}

pub(crate) struct CallState {
    /// Per Call, per Entity slot of its Domain.
    pub(crate) grains: Vec<Vec<Grain>>,
    /// Per Call, per Entity slot of the parent Domain: the GroupFailure cause.
    pub(crate) barriers: Vec<Vec<Option<Cause>>>,
    pub(crate) queues: Vec<CallQueues>,
    pub(crate) batches: Vec<Option<BatchRec>>,
    pub(crate) batch_free: Vec<u32>,
    /// Grain lists of reported batches, kept for the next reservations.
    spare: Vec<Vec<InFlightGrain>>,
    pub(crate) nonce: u32,
    pub(crate) in_flight: usize,
    /// Batches in flight per Call.
    pub(crate) in_flight_of: Vec<usize>,
    /// Per timed Call: the Calls upstream of it (whose work may still bring
    /// it Grains); empty for the others, which never ask.
    pub(crate) upstream: Vec<Vec<usize>>,
    /// Per Call: the engine time (µs) until which its last reservation
    /// held ready Grains for mates; `None` when it did not hold.
    pub(crate) held_until: Vec<Option<u64>>,
    pub(crate) stats: Vec<CallStats>,
}

impl CallState {
    pub(crate) fn new(plan: &PlanInner, seed: u64) -> CallState {
        let n = plan.calls.len();
        let queues: Vec<CallQueues> = (0..n)
            .map(|i| {
                CallQueues::new(
                    seed.wrapping_add(i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15),
                    plan.calls[i].config.reservation,
                    batching(plan, i),
                )
            })
            .collect();
        let upstream = (0..n)
            .map(|i| {
                if queues[i].timed() {
                    upstream_calls(plan, i)
                } else {
                    Vec::new()
                }
            })
            .collect();
        CallState {
            grains: (0..n).map(|_| Vec::new()).collect(),
            barriers: (0..n).map(|_| Vec::new()).collect(),
            queues,
            batches: Vec::new(),
            batch_free: Vec::new(),
            spare: Vec::new(),
            nonce: 0,
            in_flight: 0,
            in_flight_of: vec![0; n],
            upstream,
            held_until: vec![None; n],
            stats: vec![CallStats::default(); n],
        }
    }

    /// The barrier over Grain (c, e): its parent's GroupFailure cause.
    #[inline]
    pub(crate) fn barrier(
        &self,
        plan: &PlanInner,
        lineage: &LineageState,
        c: usize,
        e: u32,
    ) -> Option<Cause> {
        let dom = plan.calls[c].domain;
        plan.domains[dom].parent?;
        self.barriers[c][lineage.parent(dom, e) as usize].clone()
    }

    /// Is Grain (c, e) under a barrier? ([`CallState::barrier`] without the cause.)
    #[inline]
    pub(crate) fn barred(&self, plan: &PlanInner, lineage: &LineageState, c: usize, e: u32) -> bool {
        let dom = plan.calls[c].domain;
        plan.domains[dom].parent.is_some() && self.barriers[c][lineage.parent(dom, e) as usize].is_some()
    }

    /// Is queue entry `en` of Call `c` still a ready Grain?
    pub(crate) fn is_ready(&self, lineage: &LineageState, dom: usize, c: usize, en: &Entry) -> bool {
        lineage.doms[dom].is(en.entity, en.epoch) && {
            let g = &self.grains[c][en.entity as usize];
            g.phase == Phase::Ready && g.generation == en.generation
        }
    }

    fn store(&mut self, rec: BatchRec) -> u32 {
        self.in_flight += 1;
        self.in_flight_of[rec.call] += 1;
        match self.batch_free.pop() {
            Some(s) => {
                self.batches[s as usize] = Some(rec);
                s
            }
            None => {
                self.batches.push(Some(rec));
                (self.batches.len() - 1) as u32
            }
        }
    }

    /// Take the record of batch `id` if it is in flight.
    pub(crate) fn take(&mut self, id: BatchId) -> Option<BatchRec> {
        let rec = self
            .batches
            .get_mut(id.slot as usize)
            .and_then(|b| b.take_if(|b| b.nonce == id.nonce))?;
        self.batch_free.push(id.slot);
        self.in_flight -= 1;
        self.in_flight_of[rec.call] -= 1;
        Some(rec)
    }

    /// Keep a reported batch's Grain list for a later reservation (as many
    /// as can be in flight at once, so the pool never exceeds the peak).
    pub(crate) fn recycle(&mut self, mut grains: Vec<InFlightGrain>) {
        if self.spare.len() < self.batches.len() {
            grains.clear();
            self.spare.push(grains);
        }
    }

    /// An empty Grain list with room for `n`, reused when one is spare.
    fn grain_list(&mut self, n: usize) -> Vec<InFlightGrain> {
        let mut v = self.spare.pop().unwrap_or_default();
        v.reserve(n);
        v
    }

    /// May more Grains still become ready at timed Call `c`? Yes while a
    /// Call upstream of it has work queued or in flight, or while a root
    /// may still be admitted (`admitting`).
    fn can_grow(&self, c: usize, admitting: bool) -> bool {
        admitting
            || self.upstream[c]
                .iter()
                .any(|&u| self.in_flight_of[u] > 0 || self.queues[u].len_upper_bound() > 0)
    }
}

/// How Call `i` waits for mates: `None` for an unshaped Call without a delay
/// (it reserves as it always did).
fn batching(plan: &PlanInner, i: usize) -> Option<Batching> {
    let spec = &plan.calls[i];
    let delay = spec.config.max_batch_delay;
    (spec.shape.is_some() || delay.is_some()).then(|| Batching {
        delay_us: delay.map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX)),
        preferred: spec.config.preferred_batch_sizes.clone(),
    })
}

/// The Calls whose outputs reach Call `c`'s inputs through any nodes.
fn upstream_calls(plan: &PlanInner, c: usize) -> Vec<usize> {
    let is_call = |ni: usize| matches!(plan.nodes[ni].kind, crate::plan::build::NodeKind::Call { .. });
    match (0..plan.nodes.len()).find(|&ni| is_call(ni) && plan.nodes[ni].dense == c) {
        Some(start) => calls_upstream_of(plan, start),
        None => Vec::new(),
    }
}

/// The Calls (dense indices, sorted) whose outputs reach node `start`'s
/// inputs through any nodes.
pub(crate) fn calls_upstream_of(plan: &PlanInner, start: usize) -> Vec<usize> {
    let mut producer = vec![usize::MAX; plan.ports.len()];
    for (ni, n) in plan.nodes.iter().enumerate() {
        for &p in &n.outputs {
            producer[p as usize] = ni;
        }
    }
    let is_call = |ni: usize| matches!(plan.nodes[ni].kind, crate::plan::build::NodeKind::Call { .. });
    let mut seen = vec![false; plan.nodes.len()];
    let mut stack = vec![start];
    let mut calls = Vec::new();
    while let Some(ni) = stack.pop() {
        for p in plan.nodes[ni].kind.input_ports() {
            let up = producer[p as usize];
            if up == usize::MAX || seen[up] {
                continue;
            }
            seen[up] = true;
            if is_call(up) {
                calls.push(plan.nodes[up].dense);
            }
            stack.push(up);
        }
    }
    calls.sort_unstable();
    calls
}

/// Can an attempt that fails be followed by another attempt of this Grain?
/// `failures` counts the Grain's failed attempts before this one; `batch`
/// is the number of Grains dispatched together. Mirrors `Core::recover`.
#[inline]
pub(crate) fn retry_possible(recovery: Recovery, failures: u32, batch: usize) -> bool {
    match recovery {
        Recovery::Abort => false,
        Recovery::RetryBatch(n) | Recovery::RetryTail(n) => failures < n,
        // Isolate retries a first failure, then bisects; a lone Grain that
        // has failed before is exhausted instead of retried.
        Recovery::Isolate => failures == 0 || batch > 1,
    }
}

impl Core {
    /// Apply transition `t` to Grain (c, e). An invalid move is an engine
    /// bug: asserted in debug builds, and in release counted and turned into
    /// the fail-stop error that names the Call, the Entity and the move.
    #[inline]
    pub(crate) fn transition(&mut self, plan: &PlanInner, c: usize, e: u32, t: Transition) -> bool {
        match self.calls.grains[c][e as usize].transition(t) {
            Ok(()) => true,
            Err(bad) => {
                self.invalid_transition(plan, c, e, bad);
                false
            }
        }
    }

    #[cold]
    #[inline(never)]
    fn invalid_transition(&mut self, plan: &PlanInner, c: usize, e: u32, bad: InvalidTransition) {
        let dom = plan.calls[c].domain;
        let error = RunError::InvalidTransition {
            call: plan.calls[c].name.to_string(),
            entity: self.lineage.named_path(plan, dom, e),
            transition: bad.to_string(),
        };
        debug_assert!(!self.assert_transitions, "{error}");
        self.stats.invalid_transitions += 1;
        self.fail_stop(error);
    }

    /// An input of Grain (c, e) resolved: decide the Grain once it can be.
    pub(crate) fn on_call_input(&mut self, plan: &PlanInner, c: usize, e: u32, slot: usize) {
        let call = &plan.calls[c];
        let g = &mut self.calls.grains[c][e as usize];
        if g.phase != Phase::Waiting {
            return;
        }
        let st = state_of(self.lineage.item(call.inputs[slot].port, e));
        if !matches!(st, State::Failed | State::Suppressed) {
            g.pending -= 1;
            if g.pending > 0 {
                return;
            }
        }
        let mut buf = [(State::Unresolved, false); 8];
        for (b, edge) in buf.iter_mut().zip(&call.inputs) {
            *b = (state_of(self.lineage.item(edge.port, e)), edge.optional);
        }
        let barrier = self.calls.barrier(plan, &self.lineage, c, e);
        match propagation_rules::decide_call(&buf[..call.inputs.len()], barrier.is_some()) {
            CallDecision::Wait => {}
            CallDecision::SuppressedBy(i) => {
                let cause = self.lineage.cause_of(call.inputs[i].port, e);
                self.seal(plan, c, e, Transition::Decide, Item::Suppressed(cause));
            }
            CallDecision::SuppressedByBarrier => {
                self.calls.stats[c].suppressed_before_dispatch += 1;
                let cause = barrier
                    .unwrap_or_else(|| Cause::of_kind("group failure", crate::value::FailureKind::Group));
                self.seal(plan, c, e, Transition::Decide, Item::Suppressed(cause));
            }
            CallDecision::Dropped => self.seal(plan, c, e, Transition::Decide, Item::Dropped),
            CallDecision::Ready => {
                if !self.transition(plan, c, e, Transition::MakeReady) {
                    return;
                }
                // Only a timed Call reads the clock: an untimed one stays
                // independent of it (the simulator's runs repeat exactly).
                let timed = self.calls.queues[c].timed();
                let entry = Entry {
                    entity: e,
                    epoch: self.lineage.doms[call.domain].ents[e as usize].epoch,
                    generation: self.calls.grains[c][e as usize].generation,
                    at: if timed { self.clock_us } else { 0 },
                };
                let key = match &call.shape {
                    Some(shape) => self.shape_key(shape, call.inputs[0].port, c, e),
                    None => 0,
                };
                // The parent (slot, epoch) lets a completion-aware policy
                // group a parent's queued Grains; root-Domain Calls have
                // none, and the other policies never read it.
                let parent = match call.config.reservation {
                    Reservation::NearestCompletion => plan.domains[call.domain].parent.map(|pd| {
                        let p = self.lineage.doms[call.domain].ents[e as usize].parent;
                        (p, self.lineage.doms[pd].ents[p as usize].epoch)
                    }),
                    _ => None,
                };
                self.calls.queues[c].push(entry, parent, key);
            }
        }
    }

    /// Grain (c, e)'s shape key from its input on `port`; a panic in the
    /// user's key function (or a value of another type) gives `u64::MAX`.
    fn shape_key(&mut self, shape: &crate::plan::call::ShapeFn, port: u32, c: usize, e: u32) -> u64 {
        let Some(Item::Present(v)) = self.lineage.item(port, e) else {
            return u64::MAX;
        };
        let v: &(dyn std::any::Any + Send + Sync) = &**v;
        // Quiet: counted here, and the run loop prints one line per Call.
        let key = crate::stage::quiet::quietly(true, || {
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| shape(v)))
        });
        match key {
            Ok(Some(k)) => k,
            Ok(None) => u64::MAX,
            Err(_) => {
                self.calls.stats[c].shape_key_panics += 1;
                u64::MAX
            }
        }
    }

    /// Seal Grain (c, e) and publish the same non-present Item on every output.
    pub(crate) fn seal(&mut self, plan: &PlanInner, c: usize, e: u32, t: Transition, item: Item<Value>) {
        if !self.transition(plan, c, e, t) {
            return;
        }
        self.release_inputs(plan, c, e);
        if let Item::Failed(cause) = &item
            && let Some(kind) = cause.kind()
        {
            *self.calls.stats[c].failed.entry(kind).or_default() += 1;
        }
        for &out in &plan.calls[c].outputs {
            self.lineage.set(out, e, item.clone());
        }
    }

    /// A sealed Grain no longer needs its inputs: drop the values of those
    /// it was the only consumer of (the Item stays Present as a fact). Until
    /// the seal they are kept, because a retry needs them again.
    #[inline]
    pub(crate) fn release_inputs(&mut self, plan: &PlanInner, c: usize, e: u32) {
        for edge in &plan.calls[c].inputs {
            self.lineage.take_if_sole(plan, edge.port, e);
        }
    }

    pub(crate) fn reserve(&mut self, plan: &PlanInner, c: usize, max: usize) -> Option<Batch> {
        if self.aborted.is_some() {
            return None;
        }
        let call = &plan.calls[c];
        let dom = call.domain;
        let admitting = self.calls.queues[c].timed() && self.source_open && self.admissible(plan);
        let entries = {
            let (calls, lineage) = (&mut self.calls, &self.lineage);
            let ents = &lineage.doms[dom];
            let grains = &calls.grains[c];
            let live = |en: &Entry| {
                ents.is(en.entity, en.epoch) && {
                    let g = &grains[en.entity as usize];
                    g.phase == Phase::Ready && g.generation == en.generation
                }
            };
            let parent = |en: &Entry| ents.ents[en.entity as usize].parent;
            let can_grow = calls.queues[c].timed() && calls.can_grow(c, admitting);
            let stats = &mut calls.stats[c];
            let reserved = calls.queues[c].reserve(
                max,
                self.clock_us,
                can_grow,
                live,
                parent,
                &mut stats.queue_touches,
            );
            calls.held_until[c] = None;
            match reserved {
                Reserved::Batch(entries, source) => {
                    if calls.queues[c].timed() {
                        let now = self.clock_us;
                        stats.queue_wait_us +=
                            entries.iter().map(|en| now.saturating_sub(en.at)).sum::<u64>();
                    }
                    if let (Source::Lane(key), Some(_)) = (source, &call.shape) {
                        let n = stats.key_batches.len();
                        let counted = match stats.key_batches.get_mut(&key) {
                            Some(k) => k,
                            None if n < KEYS_COUNTED => stats.key_batches.entry(key).or_default(),
                            None => &mut stats.other_keys,
                        };
                        counted.batches += 1;
                        counted.grains += entries.len() as u64;
                    }
                    entries
                }
                Reserved::Hold(until) => {
                    stats.holds += 1;
                    calls.held_until[c] = Some(until);
                    return None;
                }
                Reserved::Empty => return None,
            }
        };
        let mut inputs = BatchInputs::with_capacity(call.inputs.len(), entries.len());
        let mut grains = Vec::with_capacity(entries.len());
        let mut rec = self.calls.grain_list(entries.len());
        for en in &entries {
            let e = en.entity;
            if !self.transition(plan, c, e, Transition::Reserve) {
                return None;
            }
            let g = self.calls.grains[c][e as usize];
            // The last attempt this Grain may get takes the values it is the
            // only reader of; an attempt that may be retried shares them.
            let last = !retry_possible(call.config.recovery, g.failures, entries.len());
            for edge in &call.inputs {
                let take = last && plan.ports[edge.port as usize].sole_consumer;
                inputs.push(self.lineage.value(edge.port, e, take));
            }
            grains.push(GrainRef {
                call: c,
                domain: dom,
                entity: e,
                epoch: en.epoch,
                generation: g.generation,
            });
            rec.push(InFlightGrain {
                entity: e,
                epoch: en.epoch,
                generation: g.generation,
            });
        }
        self.calls.queues[c].recycle(entries);
        self.calls.nonce = self.calls.nonce.wrapping_add(1);
        let nonce = self.calls.nonce;
        let slot = self.calls.store(BatchRec {
            nonce,
            call: c,
            grains: rec,
        });
        let ents = &self.lineage.doms[dom].ents;
        let first_parent = ents[grains[0].entity as usize].parent;
        let mixed = grains
            .iter()
            .any(|g| ents[g.entity as usize].parent != first_parent);
        let stats = &mut self.calls.stats[c];
        stats.mixed_parent_batches += u64::from(mixed);
        stats.rpcs += 1;
        stats.grains_dispatched += grains.len() as u64;
        Some(Batch {
            id: BatchId { slot, nonce },
            call: c,
            inputs,
            grains,
        })
    }
}
