//! Propagation and the life of a root: the worklist loop that hands each
//! new fact to the ingredient of every consumer node, Entity allocation
//! across ingredients, marking consumed children, releasing a finished
//! root, and stall diagnosis.
//!
//! State: none of its own (it coordinates the ingredients of [`Core`]).
//!
//! Invariants:
//! - `drain` runs to a fixpoint before any public call returns, so an
//!   executor never sees a half-propagated engine.
//! - An Entity slot is (re)initialised in every ingredient that indexes it
//!   (Items, Grains, Expansions, ReduceState, barriers) in one place, `alloc`;
//!   a released slot's Items are cleared by `free_tree`, so a recycled slot
//!   starts with every Item unresolved.
//! - A root is released after its outcome is queued, never before.
//! - Children are marked consumed (with their subtrees, and any child
//!   allocated later under a consumed parent) once every Reduce over their
//!   Domain has decided for their parent (`ReduceState`), never before.
//!   Marking frees nothing and changes no fact: their remaining work runs
//!   as before (CONFORMANCE B6 observes it), only the count changes.

use crate::engine::Core;
use crate::engine::boundary::RootOutcome;
use crate::engine::grain::{Grain, Phase};
use crate::engine::lineage::state_of;
use crate::engine::lineage_state::Fact;
use crate::engine::propagation_rules::{self, ExpansionState, FilterDecision};
use crate::plan::PlanInner;
use crate::plan::build::NodeKind;
use crate::value::{Cause, Item, ItemKind, Value};

/// Where a new child Entity goes: its root slot, parent slot and ordinal.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ChildSlot {
    pub(crate) root: u32,
    pub(crate) parent: u32,
    pub(crate) ordinal: u32,
}

impl Core {
    /// Propagate every queued fact, then hand out the roots that finished.
    pub(crate) fn drain(&mut self, plan: &PlanInner) {
        while let Some(Fact { port, entity: e }) = self.lineage.work.pop_front() {
            let spec = &plan.ports[port as usize];
            if spec.declared_outputs > 0 {
                self.lineage.output_resolved(spec.declared_outputs, e);
            }
            for cons in &spec.consumers {
                let node = &plan.nodes[cons.node];
                match &node.kind {
                    NodeKind::Call { .. } => self.on_call_input(plan, node.dense, e, cons.slot),
                    NodeKind::Filter { .. } => self.on_filter_input(plan, cons.node, e),
                    NodeKind::Expand { .. } => self.on_expand_input(plan, cons.node, e, cons.slot),
                    NodeKind::Reduce { .. } => self.on_reduce_input(plan, cons.node, e, port),
                    NodeKind::Broadcast { .. } => self.on_broadcast_value(plan, cons.node, e),
                    NodeKind::Source { .. } => {}
                }
            }
        }
        for r in std::mem::take(&mut self.lineage.to_finish) {
            self.finish_root(plan, r);
        }
        self.stats.conflicts = self.lineage.conflicts;
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
        let lin = &self.lineage;
        if lin.item(out, e).is_some() {
            return;
        }
        let keep = match lin.item(mask, e) {
            Some(Item::Present(v)) => read_mask(v).unwrap_or(false),
            _ => false,
        };
        let vs = state_of(lin.item(value, e));
        let ms = state_of(lin.item(mask, e));
        let item = match propagation_rules::decide_filter(vs, ms, keep) {
            FilterDecision::Wait => return,
            FilterDecision::Value => lin.item(value, e).clone(),
            FilterDecision::Mask => lin.item(mask, e).clone(),
            FilterDecision::Dropped => Some(Item::Dropped),
        };
        if let Some(item) = item {
            self.lineage.set(out, e, item);
        }
    }

    /// Allocate an Entity of Domain `dom`: a root (`at` is `None`) or a
    /// child at `at`.
    pub(crate) fn alloc(&mut self, plan: &PlanInner, dom: usize, at: Option<ChildSlot>) -> u32 {
        let (e, grew) = match at {
            None => self.lineage.doms[dom].alloc_root(),
            Some(at) => {
                let root = &mut self.lineage.roots[at.root as usize];
                if !root.expanded {
                    root.expanded = true;
                    self.lineage.unexpanded -= 1;
                }
                let pd = plan.domains[dom].parent.unwrap_or(plan.root);
                let inherited = self.lineage.doms[pd].ents[at.parent as usize].consumed;
                let (e, grew) = self.lineage.doms[dom].alloc(at.root, at.parent, at.ordinal);
                if inherited {
                    // Expanded under a parent already consumed.
                    self.lineage.doms[dom].consume(e);
                }
                (e, grew)
            }
        };
        let spec = &plan.domains[dom];
        let i = e as usize;
        if grew {
            for &p in &spec.ports {
                self.lineage.items[p as usize].push(None);
            }
            for &c in &spec.calls {
                self.calls.grains[c].push(Grain::new(plan.calls[c].inputs.len()));
            }
            for &c in &spec.child_calls {
                self.calls.barriers[c].push(None);
            }
            if dom == plan.root {
                self.lineage.roots.push(Default::default());
            }
        } else {
            // A recycled slot's Items were cleared when its root was
            // released (`free_tree`); its other records are reset here.
            for &c in &spec.calls {
                self.calls.grains[c][i] = Grain::new(plan.calls[c].inputs.len());
            }
            for &c in &spec.child_calls {
                self.calls.barriers[c][i] = None;
            }
        }
        self.expands.init(plan, dom, i, grew);
        self.reduces.init(plan, dom, i, grew);
        e
    }

    /// Mark the children of parent `p` in Domain `child`, and theirs,
    /// consumed: the parent has gathered them (see `admission.rs`).
    pub(crate) fn consume_children(&mut self, plan: &PlanInner, child: usize, p: u32) {
        // Direct children first, without a stack: a leaf Domain (the usual
        // case) allocates nothing.
        let mut stack: Vec<(usize, u32)> = Vec::new();
        let deeper = !plan.domains[child].children.is_empty();
        for &k in self.expands.children(child, p) {
            if self.lineage.doms[child].consume(k) && deeper {
                stack.push((child, k));
            }
        }
        // Then their subtrees: a slot is pushed once it is newly marked.
        while let Some((d, k)) = stack.pop() {
            for &ch in &plan.domains[d].children {
                let deeper = !plan.domains[ch].children.is_empty();
                for &g in self.expands.children(ch, k) {
                    if self.lineage.doms[ch].consume(g) && deeper {
                        stack.push((ch, g));
                    }
                }
            }
        }
    }

    fn free_tree(&mut self, plan: &PlanInner, dom: usize, e: u32) {
        for &ch in &plan.domains[dom].children {
            for k in self.expands.take_children(ch, e) {
                self.free_tree(plan, ch, k);
            }
        }
        for &p in &plan.domains[dom].ports {
            self.lineage.items[p as usize][e as usize] = None;
        }
        self.lineage.doms[dom].release(e);
    }

    fn finish_root(&mut self, plan: &PlanInner, r: u32) {
        let items: Vec<Item<Value>> = plan
            .outputs
            .iter()
            .map(|&p| {
                self.lineage
                    .item(p, r)
                    .clone()
                    .unwrap_or_else(|| Item::Failed(Cause::new("internal: unresolved output")))
            })
            .collect();
        let key = self.lineage.roots[r as usize].key;
        self.lineage.live_keys.remove(&key);
        if !self.lineage.roots[r as usize].expanded {
            self.lineage.unexpanded -= 1;
        }
        self.free_tree(plan, plan.root, r);
        let out = RootOutcome {
            key,
            items,
            plan: plan.id,
        };
        match out.kind() {
            ItemKind::Present => self.stats.roots_present += 1,
            ItemKind::Dropped => self.stats.roots_dropped += 1,
            ItemKind::Failed => self.stats.roots_failed += 1,
            ItemKind::Suppressed => self.stats.roots_suppressed += 1,
        }
        self.finished.push_back(out);
    }

    /// See [`crate::spi::Engine::stall`].
    pub(crate) fn stall(&self, plan: &PlanInner) -> Option<String> {
        let lin = &self.lineage;
        if lin.live_keys.is_empty() || self.calls.in_flight > 0 || self.aborted.is_some() {
            return None;
        }
        for (c, q) in self.calls.queues.iter().enumerate() {
            let dom = plan.calls[c].domain;
            if q.all().any(|en| self.calls.is_ready(lin, dom, c, en)) {
                return None;
            }
        }
        let mut keys: Vec<u64> = lin.live_keys.keys().copied().collect();
        keys.sort_unstable();
        let mut msg = format!(
            "{} root(s) unfinished with nothing ready or in flight; roots {:?}",
            keys.len(),
            &keys[..keys.len().min(10)]
        );
        for (c, call) in plan.calls.iter().enumerate() {
            let waiting = lin.doms[call.domain]
                .ents
                .iter()
                .enumerate()
                .filter(|(i, e)| e.live && self.calls.grains[c][*i].phase == Phase::Waiting)
                .count();
            if waiting > 0 {
                msg.push_str(&format!(
                    "; Call `{}`: {waiting} Grain(s) waiting on inputs",
                    call.name
                ));
            }
        }
        for (d, spec) in plan.domains.iter().enumerate() {
            let (Some(_), Some(p)) = (spec.expand, spec.parent) else {
                continue;
            };
            let open = lin.doms[p]
                .ents
                .iter()
                .enumerate()
                .filter(|(i, e)| e.live && self.expands.state(d, *i as u32) == ExpansionState::Unresolved)
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
}
