//! Per-Call Ready Queues: the FIFO of ready Grains and the recovery queues.
//!
//! Invariants:
//! - Entries are never edited in place. A Grain that leaves the ready phase by
//!   another route (suppressed by a barrier, reserved by a parent-bound scan,
//!   freed with its root) leaves a tombstone that is skipped when reached.
//!   An entry is live iff its Entity epoch and Grain generation still match
//!   and the Grain is ready; the caller supplies that check.
//! - Elastic reservation pops from the head only: O(B) plus tombstones.
//! - Recovery groups keep the exact Grains of a failed batch together; the
//!   immediate queue is served before the FIFO, the deferred queue after it,
//!   so retries never reorder normal work.

use std::collections::VecDeque;

use crate::plan::call::Reservation;

/// One queued Grain: the Entity slot, its epoch, and the Grain's generation
/// when it was queued.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Entry {
    pub(crate) entity: u32,
    pub(crate) epoch: u32,
    pub(crate) generation: u32,
}

#[derive(Default)]
pub(crate) struct CallQueues {
    fifo: VecDeque<Entry>,
    immediate: VecDeque<Vec<Entry>>,
    deferred: VecDeque<Vec<Entry>>,
    rng: u64,
}

/// Where a reserved batch came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Source {
    Immediate,
    Fifo,
    Deferred,
}

impl CallQueues {
    pub(crate) fn new(seed: u64) -> CallQueues {
        CallQueues {
            rng: seed | 1,
            ..CallQueues::default()
        }
    }

    pub(crate) fn push(&mut self, e: Entry) {
        self.fifo.push_back(e);
    }

    pub(crate) fn push_recovery(&mut self, group: Vec<Entry>, immediate: bool) {
        if group.is_empty() {
            return;
        }
        if immediate {
            self.immediate.push_back(group);
        } else {
            self.deferred.push_back(group);
        }
    }

    /// Entries of any kind still queued (tombstones included).
    pub(crate) fn len_upper_bound(&self) -> usize {
        self.fifo.len()
            + self.immediate.iter().map(Vec::len).sum::<usize>()
            + self.deferred.iter().map(Vec::len).sum::<usize>()
    }

    /// Every queued entry, for the stall report.
    pub(crate) fn all(&self) -> impl Iterator<Item = &Entry> {
        self.immediate
            .iter()
            .flatten()
            .chain(self.fifo.iter())
            .chain(self.deferred.iter().flatten())
    }

    /// Reserve up to `max` live entries. `live` tells whether an entry still
    /// stands for a ready Grain; `parent` gives an entry's parent slot.
    /// `touched` counts every entry examined.
    pub(crate) fn reserve(
        &mut self,
        max: usize,
        policy: Reservation,
        live: impl Fn(&Entry) -> bool,
        parent: impl Fn(&Entry) -> u32,
        touched: &mut u64,
    ) -> (Vec<Entry>, Source) {
        let max = max.max(1);
        if let Some(g) = Self::take_group(&mut self.immediate, max, &live, touched) {
            return (g, Source::Immediate);
        }
        let taken = match policy {
            Reservation::Elastic => self.elastic(max, &live, touched),
            Reservation::ParentBound => self.parent_bound(max, &live, &parent, touched),
            Reservation::Unordered => self.unordered(max, &live, touched),
        };
        if !taken.is_empty() {
            return (taken, Source::Fifo);
        }
        if let Some(g) = Self::take_group(&mut self.deferred, max, &live, touched) {
            return (g, Source::Deferred);
        }
        (Vec::new(), Source::Fifo)
    }

    fn take_group(
        q: &mut VecDeque<Vec<Entry>>,
        max: usize,
        live: &impl Fn(&Entry) -> bool,
        touched: &mut u64,
    ) -> Option<Vec<Entry>> {
        while let Some(mut g) = q.pop_front() {
            *touched += g.len() as u64;
            g.retain(|e| live(e));
            if g.is_empty() {
                continue;
            }
            if g.len() > max {
                let rest = g.split_off(max);
                q.push_front(rest);
            }
            return Some(g);
        }
        None
    }

    fn elastic(&mut self, max: usize, live: &impl Fn(&Entry) -> bool, touched: &mut u64) -> Vec<Entry> {
        let mut out = Vec::with_capacity(max.min(self.fifo.len()));
        while out.len() < max {
            let Some(e) = self.fifo.pop_front() else { break };
            *touched += 1;
            if live(&e) {
                out.push(e);
            }
        }
        out
    }

    fn parent_bound(
        &mut self,
        max: usize,
        live: &impl Fn(&Entry) -> bool,
        parent: &impl Fn(&Entry) -> u32,
        touched: &mut u64,
    ) -> Vec<Entry> {
        // Drop dead entries at the head; the first live one names the parent.
        let head_parent = loop {
            let Some(e) = self.fifo.front() else {
                return Vec::new();
            };
            *touched += 1;
            if live(e) {
                break parent(e);
            }
            self.fifo.pop_front();
        };
        let mut out = Vec::with_capacity(max);
        let mut keep = VecDeque::with_capacity(self.fifo.len());
        while let Some(e) = self.fifo.pop_front() {
            if out.len() == max {
                keep.push_back(e);
                keep.extend(self.fifo.drain(..));
                break;
            }
            *touched += 1;
            if !live(&e) {
                continue;
            }
            if parent(&e) == head_parent {
                out.push(e);
            } else {
                keep.push_back(e);
            }
        }
        self.fifo = keep;
        out
    }

    fn unordered(&mut self, max: usize, live: &impl Fn(&Entry) -> bool, touched: &mut u64) -> Vec<Entry> {
        let mut out = Vec::with_capacity(max);
        while out.len() < max && !self.fifo.is_empty() {
            // xorshift64: deterministic for a seed, independent of arrival order.
            self.rng ^= self.rng << 13;
            self.rng ^= self.rng >> 7;
            self.rng ^= self.rng << 17;
            let i = (self.rng % self.fifo.len() as u64) as usize;
            let e = self.fifo.swap_remove_back(i).expect("index in range");
            *touched += 1;
            if live(&e) {
                out.push(e);
            }
        }
        out
    }
}
