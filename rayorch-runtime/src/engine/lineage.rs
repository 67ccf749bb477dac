//! Structural lineage: Entities, Items and Expansions as live state.
//!
//! Ids: an Entity is a slot `u32` in its Domain's slab plus an `epoch` that
//! rises each time the slot is freed, so a stale reference (a queued Grain, an
//! in-flight batch) to a recycled slot is detected by comparing epochs. An
//! Item is addressed by (Port, Entity slot) in a dense column per Port; an
//! Expansion by (child Domain, parent slot). No hashing anywhere.
//!
//! Invariants:
//! - Facts are published once. Publishing an identical fact again is a no-op
//!   ([`Publish::Repeat`]); a different one is rejected ([`Publish::Conflict`])
//!   and the first stays. Terminal means: once set, never unset, until the
//!   whole root is released.
//! - An Entity's parent slot and ordinal never change while it is live;
//!   children of one Expansion are allocated together with ordinals 0..m.
//! - A root's Entities are released only after the root's outcome has been
//!   handed out; releasing drops every value the root held. A child whose
//!   parent has consumed it (every Reduce over its Domain decided for that
//!   parent) is marked `consumed` before that and stops counting against
//!   the children window; its slot stays until the root is released.

use crate::engine::propagation_rules::{ExpansionState, State};
use crate::value::{Cause, Item, Value};

/// The outcome of publishing a fact.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Publish {
    /// First publication.
    New,
    /// Identical to what was there: nothing changed.
    Repeat,
    /// Differs from what was there: rejected, the first fact stays.
    Conflict,
}

/// One Item slot: `None` while unresolved.
pub(crate) type Slot = Option<Item<Value>>;

pub(crate) fn state_of(slot: &Slot) -> State {
    match slot {
        None => State::Unresolved,
        Some(Item::Present(_)) => State::Present,
        Some(Item::Dropped) => State::Dropped,
        Some(Item::Failed(_)) => State::Failed,
        Some(Item::Suppressed(_)) => State::Suppressed,
    }
}

fn same_item(a: &Item<Value>, b: &Item<Value>) -> bool {
    match (a, b) {
        (Item::Present(x), Item::Present(y)) => std::sync::Arc::ptr_eq(x, y),
        (Item::Dropped, Item::Dropped) => true,
        (Item::Failed(x), Item::Failed(y)) | (Item::Suppressed(x), Item::Suppressed(y)) => x == y,
        _ => false,
    }
}

/// Publish an Item fact into its slot.
pub(crate) fn publish_item(slot: &mut Slot, item: Item<Value>) -> Publish {
    match slot {
        None => {
            *slot = Some(item);
            Publish::New
        }
        Some(old) if same_item(old, &item) => Publish::Repeat,
        Some(_) => Publish::Conflict,
    }
}

/// An Entity slot.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Ent {
    /// Root slot (in the root Domain).
    pub(crate) root: u32,
    /// Parent slot in the parent Domain (`u32::MAX` for a root).
    pub(crate) parent: u32,
    /// Immutable zero-based ordinal among its siblings (root: 0).
    pub(crate) ordinal: u32,
    pub(crate) epoch: u32,
    pub(crate) live: bool,
    /// Its parent has consumed it (see `admission.rs`): it no longer
    /// counts against the children window, though its slot lives on.
    pub(crate) consumed: bool,
}

/// The Entity slab of one Domain.
#[derive(Default)]
pub(crate) struct Entities {
    pub(crate) ents: Vec<Ent>,
    free: Vec<u32>,
    pub(crate) live: usize,
    /// Live slots whose parent has consumed them.
    pub(crate) consumed: usize,
}

impl Entities {
    /// Allocate a slot; returns it and whether the slab grew.
    pub(crate) fn alloc(&mut self, root: u32, parent: u32, ordinal: u32) -> (u32, bool) {
        self.live += 1;
        if let Some(i) = self.free.pop() {
            let e = &mut self.ents[i as usize];
            *e = Ent {
                root,
                parent,
                ordinal,
                epoch: e.epoch,
                live: true,
                consumed: false,
            };
            (i, false)
        } else {
            self.ents.push(Ent {
                root,
                parent,
                ordinal,
                epoch: 0,
                live: true,
                consumed: false,
            });
            ((self.ents.len() - 1) as u32, true)
        }
    }

    /// Allocate a root slot (its `root` field is itself).
    pub(crate) fn alloc_root(&mut self) -> (u32, bool) {
        let (i, grew) = self.alloc(0, u32::MAX, 0);
        self.ents[i as usize].root = i;
        (i, grew)
    }

    pub(crate) fn release(&mut self, i: u32) {
        let e = &mut self.ents[i as usize];
        debug_assert!(e.live, "double release of entity slot {i}");
        e.live = false;
        e.epoch = e.epoch.wrapping_add(1);
        self.live -= 1;
        if std::mem::take(&mut e.consumed) {
            self.consumed -= 1;
        }
        self.free.push(i);
    }

    /// Mark live slot `i` consumed by its parent; false if it already was.
    pub(crate) fn consume(&mut self, i: u32) -> bool {
        let e = &mut self.ents[i as usize];
        let new = e.live && !e.consumed;
        if new {
            e.consumed = true;
            self.consumed += 1;
        }
        new
    }

    /// Is `(slot, epoch)` still the same live Entity?
    #[inline]
    pub(crate) fn is(&self, i: u32, epoch: u32) -> bool {
        self.ents
            .get(i as usize)
            .is_some_and(|e| e.live && e.epoch == epoch)
    }
}

/// The Expansion of one parent into one child Domain.
#[derive(Debug)]
pub(crate) struct Expansion {
    pub(crate) state: ExpansionState,
    pub(crate) cause: Option<Cause>,
    /// Child slots in ordinal order.
    pub(crate) children: Vec<u32>,
    /// Producing Items not yet resolved.
    pub(crate) pending: u32,
}

impl Expansion {
    pub(crate) fn new(inputs: usize) -> Expansion {
        Expansion {
            state: ExpansionState::Unresolved,
            cause: None,
            children: Vec::new(),
            pending: inputs as u32,
        }
    }

    /// Publish the Expansion fact.
    pub(crate) fn publish(
        &mut self,
        state: ExpansionState,
        cause: Option<Cause>,
        children: Vec<u32>,
    ) -> Publish {
        if self.state == ExpansionState::Unresolved {
            self.state = state;
            self.cause = cause;
            self.children = children;
            Publish::New
        } else if self.state == state && self.cause == cause && self.children == children {
            Publish::Repeat
        } else {
            Publish::Conflict
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn item_facts_are_published_once() {
        let v: Value = Arc::new(7u32);
        let mut slot: Slot = None;
        assert_eq!(publish_item(&mut slot, Item::Present(v.clone())), Publish::New);
        assert_eq!(publish_item(&mut slot, Item::Present(v.clone())), Publish::Repeat);
        assert_eq!(
            publish_item(&mut slot, Item::Present(Arc::new(7u32))),
            Publish::Conflict
        );
        assert_eq!(publish_item(&mut slot, Item::Dropped), Publish::Conflict);
        assert!(matches!(slot, Some(Item::Present(ref x)) if Arc::ptr_eq(x, &v)));

        let mut slot: Slot = None;
        let c = Cause::new("bad");
        assert_eq!(publish_item(&mut slot, Item::Failed(c.clone())), Publish::New);
        assert_eq!(
            publish_item(&mut slot, Item::Failed(Cause::new("bad"))),
            Publish::Repeat
        );
        assert_eq!(publish_item(&mut slot, Item::Suppressed(c)), Publish::Conflict);
    }

    #[test]
    fn expansion_facts_are_published_once() {
        let mut x = Expansion::new(1);
        assert_eq!(
            x.publish(ExpansionState::Succeeded, None, vec![3, 4]),
            Publish::New
        );
        assert_eq!(
            x.publish(ExpansionState::Succeeded, None, vec![3, 4]),
            Publish::Repeat
        );
        assert_eq!(
            x.publish(ExpansionState::Succeeded, None, vec![3]),
            Publish::Conflict
        );
        assert_eq!(
            x.publish(ExpansionState::Dropped, None, vec![]),
            Publish::Conflict
        );
        assert_eq!(x.children, vec![3, 4]);
    }

    #[test]
    fn recycled_slots_change_epoch() {
        let mut ents = Entities::default();
        let (a, grew) = ents.alloc_root();
        assert!(grew);
        let epoch = ents.ents[a as usize].epoch;
        assert!(ents.is(a, epoch));
        ents.release(a);
        assert!(!ents.is(a, epoch));
        let (b, grew) = ents.alloc(a, a, 0);
        assert_eq!((b, grew), (a, false));
        assert!(
            !ents.is(b, epoch),
            "a stale reference must not see the new Entity"
        );
        assert!(ents.is(b, epoch + 1));
    }
}
