//! The Expand ingredient ([`ExpandState`]): one Expansion per (child Domain, parent Entity),
//! and the broadcasts that copy an ancestor's Item down its children.
//!
//! State: per child Domain, one [`Expansion`] per Entity slot of the parent
//! Domain (its state, cause, ordered child slots, and how many producing
//! Items are still unresolved).
//!
//! Invariants:
//! - An Expansion is decided once, by [`propagation_rules::decide_expand`]; its children
//!   are allocated together with ordinals 0..m and never change.
//! - When it resolves without children (Dropped, Failed, or an empty list is
//!   not one of these: an empty list Succeeds) the reduces over it are
//!   resolved at once, through [`propagation_rules::decide_reduce`].
//! - A broadcast target receives the ancestor's Item exactly once: either
//!   when the ancestor's Item resolves (existing children) or when the
//!   Expansion creates the children (Item already resolved); publication is
//!   idempotent, so both paths meeting is harmless.

use crate::engine::Core;
use crate::engine::lineage::{Expansion, Publish, state_of};
use crate::engine::propagate::ChildSlot;
use crate::engine::propagation_rules::{self, ExpandDecision, ExpansionState, State};
use crate::plan::PlanInner;
use crate::plan::build::NodeKind;
use crate::value::{Cause, FailureKind, Item, Origin, Value};

pub(crate) struct ExpandState {
    /// Per child Domain, per Entity slot of the parent Domain.
    exps: Vec<Vec<Expansion>>,
}

impl ExpandState {
    pub(crate) fn new(plan: &PlanInner) -> ExpandState {
        ExpandState {
            exps: (0..plan.domains.len()).map(|_| Vec::new()).collect(),
        }
    }

    /// Make room for (or reset) the Expansions of parent slot `i`.
    #[inline]
    pub(crate) fn init(&mut self, plan: &PlanInner, dom: usize, i: usize, grew: bool) {
        for &ch in &plan.domains[dom].children {
            let x = Expansion::new(expand_arity(plan, ch));
            if grew {
                self.exps[ch].push(x);
            } else {
                self.exps[ch][i] = x;
            }
        }
    }

    /// The children of parent `p` in Domain `child`, in ordinal order.
    #[inline]
    pub(crate) fn children(&self, child: usize, p: u32) -> &[u32] {
        &self.exps[child][p as usize].children
    }

    pub(crate) fn take_children(&mut self, child: usize, p: u32) -> Vec<u32> {
        std::mem::take(&mut self.exps[child][p as usize].children)
    }

    pub(crate) fn state(&self, child: usize, p: u32) -> ExpansionState {
        self.exps[child][p as usize].state
    }

    pub(crate) fn cause(&self, child: usize, p: u32) -> Option<Cause> {
        self.exps[child][p as usize].cause.clone()
    }
}

fn expand_arity(plan: &PlanInner, child: usize) -> usize {
    match plan.domains[child].expand.map(|n| &plan.nodes[n].kind) {
        Some(NodeKind::Expand { inputs, .. }) => inputs.len(),
        _ => 0,
    }
}

impl Core {
    /// A producing Item of the Expansion of node `node` under parent `p`
    /// resolved: decide the Expansion once it can be.
    pub(crate) fn on_expand_input(&mut self, plan: &PlanInner, node: usize, p: u32, slot: usize) {
        let n = &plan.nodes[node];
        let NodeKind::Expand { inputs, split, .. } = &n.kind else {
            return;
        };
        let child = n.domain;
        let x = &mut self.expands.exps[child][p as usize];
        if x.state != ExpansionState::Unresolved {
            return;
        }
        let st = state_of(self.lineage.item(inputs[slot], p));
        if !matches!(st, State::Failed | State::Suppressed) {
            x.pending -= 1;
            if x.pending > 0 {
                return;
            }
        }
        let mut states = [State::Unresolved; 8];
        for (s, &i) in states.iter_mut().zip(inputs) {
            *s = state_of(self.lineage.item(i, p));
        }
        let states = &states[..inputs.len()];
        let lists = match propagation_rules::decide_expand(states, None) {
            ExpandDecision::FailedBy(i) => {
                let cause = self.lineage.cause_of(inputs[i], p);
                return self.close_expansion(plan, child, p, ExpansionState::Failed, Some(cause));
            }
            ExpandDecision::Dropped => {
                return self.close_expansion(plan, child, p, ExpansionState::Dropped, None);
            }
            _ => {
                let lists: Option<Vec<Vec<Value>>> = inputs
                    .iter()
                    .zip(split)
                    .map(|(&i, f)| self.lineage.take_if_sole(plan, i, p).and_then(f))
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
        match propagation_rules::decide_expand(states, Some(&lens)) {
            ExpandDecision::Succeeded(_) => self.create_children(plan, node, p, lists),
            _ => {
                // Lists from different Grains (one Grain's own lists are
                // checked before it commits, see `commit`).
                let parent_dom = plan.domains[child].parent.unwrap_or(plan.root);
                let cause = Cause::new(format!(
                    "cardinality mismatch: aligned lists have lengths {lens:?}; every list of an aligned expansion must have the same length"
                ))
                .classified(FailureKind::Record, || Origin {
                    call: n.label.as_str().into(),
                    entity: self.lineage.named_path(plan, parent_dom, p),
                    domain: plan.domains[parent_dom].info.name,
                    path: self.lineage.path(plan, parent_dom, p),
                });
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
        let x = &mut self.expands.exps[child][p as usize];
        if x.publish(state, cause, Vec::new()) != Publish::New {
            return;
        }
        for &r in &plan.domains[child].reduces_over {
            self.decide_reduce(plan, r, p);
        }
    }

    fn create_children(&mut self, plan: &PlanInner, node: usize, p: u32, lists: Vec<Vec<Value>>) {
        let n = &plan.nodes[node];
        let child = n.domain;
        let parent_dom = plan.domains[child].parent.unwrap_or(plan.root);
        let m = lists.first().map_or(0, Vec::len);
        let root = self.lineage.doms[parent_dom].ents[p as usize].root;
        let children: Vec<u32> = (0..m as u32)
            .map(|ordinal| {
                let at = ChildSlot {
                    root,
                    parent: p,
                    ordinal,
                };
                self.alloc(plan, child, Some(at))
            })
            .collect();
        self.expands.exps[child][p as usize].publish(ExpansionState::Succeeded, None, children);
        for &r in &plan.domains[child].reduces_over {
            self.open_reduce(plan, r, p, m);
        }
        for (i, list) in lists.into_iter().enumerate() {
            let out = n.outputs[i];
            for (j, v) in list.into_iter().enumerate() {
                let ch = self.expands.exps[child][p as usize].children[j];
                self.lineage.set(out, ch, Item::Present(v));
            }
        }
        for &b in &plan.domains[child].broadcasts_into {
            let NodeKind::Broadcast { value, .. } = plan.nodes[b].kind else {
                continue;
            };
            let vdom = plan.ports[value as usize].domain;
            let anc = self.lineage.ancestor(plan, parent_dom, p, vdom);
            if let Some(item) = self.lineage.item(value, anc).clone() {
                let out = plan.nodes[b].outputs[0];
                for j in 0..m {
                    let ch = self.expands.exps[child][p as usize].children[j];
                    self.lineage.set(out, ch, item.clone());
                }
            }
        }
    }

    /// The ancestor Item of a broadcast resolved: copy it to every existing
    /// descendant in the broadcast's Domain (later ones get it when their
    /// Expansion creates them).
    pub(crate) fn on_broadcast_value(&mut self, plan: &PlanInner, node: usize, a: u32) {
        let n = &plan.nodes[node];
        let NodeKind::Broadcast { value, .. } = n.kind else {
            return;
        };
        let Some(item) = self.lineage.item(value, a).clone() else {
            return;
        };
        let vdom = plan.ports[value as usize].domain;
        let mut down = plan.path_up(n.domain, vdom);
        down.pop();
        down.reverse();
        down.push(n.domain);
        let mut frontier = vec![a];
        for d in down {
            frontier = frontier
                .iter()
                .flat_map(|&e| self.expands.children(d, e).iter().copied())
                .collect();
        }
        let out = n.outputs[0];
        for t in frontier {
            self.lineage.set(out, t, item.clone());
        }
    }
}
