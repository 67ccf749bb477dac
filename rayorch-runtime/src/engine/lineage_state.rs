//! The lineage ingredient ([`LineageState`]): Entities, Item facts, roots and the worklist.
//!
//! State: one Entity slab per Domain, one dense Item column per Port (indexed
//! by Entity slot), one [`RootRec`] per root slot, the live root keys, and the
//! queue of facts published but not yet propagated.
//!
//! Invariants:
//! - An Item is published once ([`publish_item`]); a publication that is new
//!   is queued exactly once as a [`Fact`] for propagation, so every consumer
//!   node reacts exactly once per (Port, Entity).
//! - `live_keys` holds exactly the roots admitted and not yet handed out; its
//!   size is what the admission window bounds.
//! - A value taken by its only consumer leaves the [`Consumed`] placeholder:
//!   the Item stays Present as a fact, only its payload has moved.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use crate::engine::lineage::{Entities, Publish, Slot, publish_item};
use crate::plan::PlanInner;
use crate::value::EntityPath;
use crate::value::{Cause, Item, Origin, Value};

/// A published Item waiting to be propagated to its consumers.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Fact {
    pub(crate) port: u32,
    pub(crate) entity: u32,
}

/// Per root slot: its key and how many plan outputs are still unresolved.
#[derive(Clone, Debug, Default)]
pub(crate) struct RootRec {
    pub(crate) key: u64,
    pub(crate) outputs_pending: u32,
    /// A child Entity has been allocated under this root (its first-level
    /// child count is known); see `admission.rs`.
    pub(crate) expanded: bool,
}

/// The placeholder left in a slot whose value moved to its only consumer.
struct Consumed;

pub(crate) struct LineageState {
    pub(crate) doms: Vec<Entities>,
    pub(crate) items: Vec<Vec<Slot>>,
    pub(crate) roots: Vec<RootRec>,
    pub(crate) live_keys: HashMap<u64, u32>,
    /// Live roots with no child Entity yet (`RootRec::expanded` false).
    pub(crate) unexpanded: usize,
    pub(crate) work: VecDeque<Fact>,
    pub(crate) to_finish: Vec<u32>,
    /// Conflicting publications (always a bug; must stay 0).
    pub(crate) conflicts: u64,
    consumed: Value,
}

impl LineageState {
    pub(crate) fn new(plan: &PlanInner) -> LineageState {
        LineageState {
            doms: (0..plan.domains.len()).map(|_| Entities::default()).collect(),
            items: (0..plan.ports.len()).map(|_| Vec::new()).collect(),
            roots: Vec::new(),
            live_keys: HashMap::new(),
            unexpanded: 0,
            work: VecDeque::new(),
            to_finish: Vec::new(),
            conflicts: 0,
            consumed: Arc::new(Consumed),
        }
    }

    /// Publish Item (port, e) and queue it for propagation when it is new.
    pub(crate) fn set(&mut self, port: u32, e: u32, item: Item<Value>) {
        match publish_item(&mut self.items[port as usize][e as usize], item) {
            Publish::New => self.work.push_back(Fact { port, entity: e }),
            Publish::Repeat => {}
            Publish::Conflict => {
                debug_assert!(false, "conflicting publication on port {port} entity {e}");
                self.conflicts += 1;
            }
        }
    }

    #[inline]
    pub(crate) fn item(&self, port: u32, e: u32) -> &Slot {
        &self.items[port as usize][e as usize]
    }

    /// The cause carried by a non-present Item.
    pub(crate) fn cause_of(&self, port: u32, e: u32) -> Cause {
        self.item(port, e)
            .as_ref()
            .and_then(|i| i.cause().cloned())
            .unwrap_or_else(|| Cause::new("internal: missing cause"))
    }

    /// The value of a present Item: moved out when `take` (the caller is its
    /// last reader), shared (an `Arc` clone) otherwise.
    #[inline]
    pub(crate) fn value(&mut self, port: u32, e: u32, take: bool) -> Option<Value> {
        match &mut self.items[port as usize][e as usize] {
            Some(Item::Present(v)) if take => Some(std::mem::replace(v, self.consumed.clone())),
            Some(Item::Present(v)) => Some(v.clone()),
            _ => None,
        }
    }

    /// [`LineageState::value`], taken when the Port has one consumer (the caller).
    #[inline]
    pub(crate) fn take_if_sole(&mut self, plan: &PlanInner, port: u32, e: u32) -> Option<Value> {
        self.value(port, e, plan.ports[port as usize].sole_consumer)
    }

    /// The key of the root above Entity `e` of Domain `dom` (no allocation).
    pub(crate) fn root_key(&self, plan: &PlanInner, dom: usize, e: u32) -> u64 {
        let (mut d, mut i) = (dom, e);
        while let Some(p) = plan.domains[d].parent {
            i = self.doms[d].ents[i as usize].parent;
            d = p;
        }
        self.roots[i as usize].key
    }

    /// Where Entity `e` of Domain `dom` sits.
    pub(crate) fn path(&self, plan: &PlanInner, dom: usize, e: u32) -> EntityPath {
        let mut ordinals = Vec::new();
        let (mut d, mut i) = (dom, e);
        while let Some(p) = plan.domains[d].parent {
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

    /// (dom, e) as a Domain-named path from the root: `Pdf 7 / Page 3 /
    /// Line 12` (root key, then each ordinal under its Domain's name).
    pub(crate) fn named_path(&self, plan: &PlanInner, dom: usize, e: u32) -> String {
        let path = self.path(plan, dom, e);
        let mut chain = vec![dom];
        while let Some(p) = plan.domains[*chain.last().unwrap_or(&dom)].parent {
            chain.push(p);
        }
        chain.reverse();
        let mut out = format!("{} {}", plan.domains[chain[0]].info.name, path.root);
        for (d, o) in chain[1..].iter().zip(&path.ordinals) {
            out.push_str(&format!(" / {} {o}", plan.domains[*d].info.name));
        }
        out
    }

    /// Where a Grain of Call `c` on Entity `e` is: what its causes carry.
    pub(crate) fn origin(&self, plan: &PlanInner, c: usize, e: u32) -> Origin {
        let call = &plan.calls[c];
        Origin {
            call: call.name.clone(),
            entity: self.named_path(plan, call.domain, e),
            domain: plan.domains[call.domain].info.name,
            path: self.path(plan, call.domain, e),
        }
    }

    /// The ancestor of (dom, e) in Domain `target`.
    pub(crate) fn ancestor(&self, plan: &PlanInner, mut dom: usize, mut e: u32, target: usize) -> u32 {
        while dom != target {
            let Some(p) = plan.domains[dom].parent else { break };
            e = self.doms[dom].ents[e as usize].parent;
            dom = p;
        }
        e
    }

    /// The parent slot of (dom, e).
    #[inline]
    pub(crate) fn parent(&self, dom: usize, e: u32) -> u32 {
        self.doms[dom].ents[e as usize].parent
    }

    /// A resolved plan output: count it against its root, which finishes
    /// once every declared output is resolved. A Port declared as several
    /// outputs counts once per declaration.
    pub(crate) fn output_resolved(&mut self, declared: u32, r: u32) {
        let rec = &mut self.roots[r as usize];
        rec.outputs_pending -= declared;
        if rec.outputs_pending == 0 {
            self.to_finish.push(r);
        }
    }
}
