//! The Reduce ingredient ([`ReduceState`]): one gather record per (Reduce node, parent Entity).
//!
//! State: per Reduce node, per Entity slot of the parent Domain, how many
//! child Items (inputs and member masks) are still unresolved and whether
//! the parent's outputs are published.
//!
//! Invariants:
//! - `pending` is armed when the Expansion succeeds (children × consumed
//!   Ports) and falls by one per resolved child Item; the decision is taken
//!   by [`propagation_rules::decide_reduce`] when it reaches zero, when a child Item
//!   fails (a failure decides while others are pending), or when the
//!   Expansion resolves without children.
//! - A `keep_failed` Reduce counts a failed child Item like any other and
//!   is decided by [`propagation_rules::decide_reduce_keep_failed`] only at zero (or
//!   without children): a failure is gathered, it decides nothing.
//! - `done` is set exactly when the outputs are published; nothing after it
//!   touches the record until the root is released.
//! - When every Reduce over a child Domain is `done` for a parent, the
//!   parent has consumed those children: they (and their subtrees) are
//!   marked consumed and stop counting against the children window (see
//!   `admission.rs` for why this is what holds memory).

use crate::engine::Core;
use crate::engine::LineageState;
use crate::engine::lineage::state_of;
use crate::engine::propagation_rules::{self, ExpansionState, ReduceDecision, State};
use crate::plan::PlanInner;
use crate::plan::build::NodeKind;
use crate::value::{Cause, Item, Value};

#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct ReduceRec {
    pub(crate) pending: u32,
    pub(crate) done: bool,
}

pub(crate) struct ReduceState {
    /// Per Reduce node (dense index), per Entity slot of the parent Domain.
    pub(crate) recs: Vec<Vec<ReduceRec>>,
    /// Reused buffer: each child's combined state for one decision.
    members: Vec<State>,
}

impl ReduceState {
    pub(crate) fn new(plan: &PlanInner) -> ReduceState {
        ReduceState {
            recs: (0..plan.reduces.len()).map(|_| Vec::new()).collect(),
            members: Vec::new(),
        }
    }

    /// Make room for (or reset) the records of parent slot `i`.
    #[inline]
    pub(crate) fn init(&mut self, plan: &PlanInner, dom: usize, i: usize, grew: bool) {
        for &r in &plan.domains[dom].reduces_into {
            let recs = &mut self.recs[plan.nodes[r].dense];
            if grew {
                recs.push(ReduceRec::default());
            } else {
                recs[i] = ReduceRec::default();
            }
        }
    }
}

impl Core {
    /// The Expansion under parent `p` succeeded with `m` children.
    pub(crate) fn open_reduce(&mut self, plan: &PlanInner, node: usize, p: u32, m: usize) {
        let NodeKind::Reduce { inputs, members, .. } = &plan.nodes[node].kind else {
            return;
        };
        let per_child = inputs.len() + usize::from(members.is_some());
        self.reduces.recs[plan.nodes[node].dense][p as usize] = ReduceRec {
            pending: (m * per_child) as u32,
            done: false,
        };
        if m == 0 {
            self.decide_reduce(plan, node, p);
        }
    }

    /// A child Item the Reduce reads resolved.
    pub(crate) fn on_reduce_input(&mut self, plan: &PlanInner, node: usize, ch: u32, port: u32) {
        let child = plan.ports[port as usize].domain;
        let p = self.lineage.parent(child, ch);
        let keeps = matches!(
            plan.nodes[node].kind,
            NodeKind::Reduce {
                keep_failed: Some(_),
                ..
            }
        );
        let rec = &mut self.reduces.recs[plan.nodes[node].dense][p as usize];
        if rec.done {
            return;
        }
        match state_of(self.lineage.item(port, ch)) {
            State::Failed | State::Suppressed if !keeps => self.decide_reduce(plan, node, p),
            _ => {
                rec.pending -= 1;
                if rec.pending == 0 {
                    self.decide_reduce(plan, node, p);
                }
            }
        }
    }

    /// Decide Reduce `node` for parent `p` with the §A rule, and publish.
    pub(crate) fn decide_reduce(&mut self, plan: &PlanInner, node: usize, p: u32) {
        let n = &plan.nodes[node];
        let NodeKind::Reduce {
            inputs,
            members,
            gather,
            keep_failed,
        } = &n.kind
        else {
            return;
        };
        let dense = n.dense;
        if self.reduces.recs[dense][p as usize].done {
            return;
        }
        let child = plan.ports[inputs[0] as usize].domain;
        let expansion = self.expands.state(child, p);
        let states = &mut self.reduces.members;
        states.clear();
        if expansion == ExpansionState::Succeeded {
            let children = self.expands.children(child, p);
            if let ([port], None) = (&inputs[..], members) {
                // One Port read: a child's state is that Item's (`combine`
                // of one state is that state).
                states.extend(children.iter().map(|&ch| state_of(self.lineage.item(*port, ch))));
            } else {
                let mut buf = [State::Unresolved; 8];
                for &ch in children {
                    let read = inputs.iter().chain(members.iter());
                    let mut k = 0;
                    for (b, &port) in buf.iter_mut().zip(read) {
                        *b = state_of(self.lineage.item(port, ch));
                        k += 1;
                    }
                    states.push(propagation_rules::combine(&buf[..k]));
                }
            }
        }
        let decision = match keep_failed {
            Some(_) => propagation_rules::decide_reduce_keep_failed(expansion, states),
            None => propagation_rules::decide_reduce(expansion, states),
        };
        let item = match decision {
            ReduceDecision::Wait => return,
            ReduceDecision::Dropped => Item::Dropped,
            ReduceDecision::SuppressedByExpansion => Item::Suppressed(
                self.expands
                    .cause(child, p)
                    .unwrap_or_else(|| Cause::new("internal: failed expansion without a cause")),
            ),
            ReduceDecision::SuppressedBy(j) => {
                let ch = self.expands.children(child, p)[j];
                Item::Suppressed(child_cause(&self.lineage, inputs, *members, ch))
            }
            ReduceDecision::Present if let Some(gather) = keep_failed => {
                self.reduces.recs[dense][p as usize].done = true;
                let mut col = Vec::with_capacity(states.len());
                for (j, present) in propagation_rules::kept(states) {
                    let ch = self.expands.children(child, p)[j];
                    // Every kept child holds its ordinal's slot, even one
                    // whose value could not be read.
                    col.push(match present {
                        true => self
                            .lineage
                            .take_if_sole(plan, inputs[0], ch)
                            .ok_or_else(|| gather_failed(&n.label)),
                        false => Err(child_failure(&self.lineage, inputs, *members, ch)),
                    });
                }
                let item = gather(col).map_or_else(|| Item::Failed(gather_failed(&n.label)), Item::Present);
                self.lineage.set(n.outputs[0], p, item);
                self.maybe_consumed(plan, child, p);
                return;
            }
            ReduceDecision::Present => {
                self.reduces.recs[dense][p as usize].done = true;
                let mut cols: Vec<Vec<Value>> = (0..inputs.len())
                    .map(|_| Vec::with_capacity(states.len()))
                    .collect();
                for j in propagation_rules::survivors(states) {
                    let ch = self.expands.children(child, p)[j];
                    for (col, &i) in cols.iter_mut().zip(inputs) {
                        col.extend(self.lineage.take_if_sole(plan, i, ch));
                    }
                }
                for ((col, f), &out) in cols.into_iter().zip(gather).zip(&n.outputs) {
                    let item = f(col).map_or_else(|| Item::Failed(gather_failed(&n.label)), Item::Present);
                    self.lineage.set(out, p, item);
                }
                self.maybe_consumed(plan, child, p);
                return;
            }
        };
        self.reduces.recs[dense][p as usize].done = true;
        for &out in &n.outputs {
            self.lineage.set(out, p, item.clone());
        }
        self.maybe_consumed(plan, child, p);
    }

    /// A Reduce over Domain `child` has decided for parent `p`. Once every
    /// Reduce over `child` has, `p` has consumed its children there: mark
    /// them so.
    fn maybe_consumed(&mut self, plan: &PlanInner, child: usize, p: u32) {
        let recs = &self.reduces.recs;
        let all = plan.domains[child]
            .reduces_over
            .iter()
            .all(|&r| recs[plan.nodes[r].dense][p as usize].done);
        if all {
            self.consume_children(plan, child, p);
        }
    }
}

/// The cause of child `ch`'s first non-present Item among the ports a
/// Reduce reads (inputs, then the member mask).
fn child_cause(lineage: &LineageState, inputs: &[u32], members: Option<u32>, ch: u32) -> Cause {
    inputs
        .iter()
        .chain(members.iter())
        .find_map(|&port| lineage.item(port, ch).as_ref().and_then(Item::cause).cloned())
        .unwrap_or_else(|| Cause::new("internal: missing cause"))
}

/// A `keep_failed` Reduce's entry for a child that is not present: its
/// failure's cause, marked as a suppression when the child was suppressed
/// rather than failed itself.
fn child_failure(lineage: &LineageState, inputs: &[u32], members: Option<u32>, ch: u32) -> Cause {
    let suppressed = inputs
        .iter()
        .chain(members.iter())
        .find_map(|&port| {
            lineage
                .item(port, ch)
                .as_ref()
                .filter(|i| i.cause().is_some())
                .map(|i| matches!(i, Item::Suppressed(_)))
        })
        .unwrap_or(false);
    let cause = child_cause(lineage, inputs, members, ch);
    if suppressed { cause.suppression() } else { cause }
}

fn gather_failed(label: &str) -> Cause {
    Cause::new(format!("internal: {label} could not gather its values"))
}
