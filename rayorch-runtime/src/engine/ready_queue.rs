//! Per-Call Ready Queues: the FIFO of ready Grains, the per-parent buckets of
//! the nearest-completion policy, and the recovery queues.
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
//! - `NearestCompletion` keeps one bucket per parent (indexed by the parent's
//!   slot, stamped with its epoch) and an ordered set of non-empty buckets by
//!   key `born + AGING × queued`: `queued` is how many of the parent's Grains
//!   wait here (its remaining work at this Call), `born` the queue's dispatch
//!   clock (Grains reserved so far) when the bucket opened. The smallest key
//!   is served first, so a parent with few Grains left overtakes one with
//!   many. A bucket's key does not grow with time (only when more of its
//!   parent's Grains arrive) while every newer bucket starts at
//!   `clock + AGING` or later: once the clock passes a bucket's key nothing
//!   new can overtake it, so no parent starves (it waits at most about
//!   `AGING × queued` Grains of newer work). Reserving is O(B log P) for P
//!   parents with queued Grains; a push is O(log P).
//! - A bucket whose slot is reused by a newer parent (a different epoch) held
//!   only Grains of a released root, all dead: it is emptied on that push.
//! - A Call without a parent Domain has one implicit parent; its Grains use
//!   the FIFO and the policy is Elastic there.

use std::collections::{BTreeSet, VecDeque};

use crate::plan::call::Reservation;

/// One queued Grain: the Entity slot, its epoch, and the Grain's generation
/// when it was queued.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Entry {
    pub(crate) entity: u32,
    pub(crate) epoch: u32,
    pub(crate) generation: u32,
}

/// Aging weight of `NearestCompletion`: one queued Grain of a parent counts
/// as this many Grains of dispatch-clock age. Larger favours small parents
/// more, smaller bounds a big parent's wait tighter. Measured on mineru-1000
/// (BENCHMARKS.md, "Reservation policies"): when every parent publishes at
/// once, 1, 2 and 8 give the same mean (-45% against FIFO: the parents share
/// one birth time, so only the queued counts differ); under a 64-root window
/// 8 raised p99 latency by a third against FIFO, 2 keeps it within 10%
/// (+4% to +6% in our runs).
const AGING: u64 = 2;

/// The queued Grains of one parent (nearest-completion policy).
#[derive(Default)]
struct Bucket {
    entries: VecDeque<Entry>,
    /// The parent's epoch when these entries were queued.
    epoch: u32,
    /// Dispatch clock when the bucket last opened.
    born: u64,
    /// Opening order: ties between equal keys go to the older bucket.
    seq: u64,
}

impl Bucket {
    fn key(&self, parent: u32) -> (u64, u64, u32) {
        (self.born + AGING * self.entries.len() as u64, self.seq, parent)
    }
}

/// Per-parent buckets and their service order.
#[derive(Default)]
struct Buckets {
    by_parent: Vec<Bucket>,
    order: BTreeSet<(u64, u64, u32)>,
    clock: u64,
    next_seq: u64,
    len: usize,
}

impl Buckets {
    fn push(&mut self, e: Entry, parent: u32, epoch: u32) {
        let p = parent as usize;
        if self.by_parent.len() <= p {
            self.by_parent.resize_with(p + 1, Bucket::default);
        }
        let b = &mut self.by_parent[p];
        if !b.entries.is_empty() {
            self.order.remove(&b.key(parent));
            if b.epoch != epoch {
                self.len -= b.entries.len();
                b.entries.clear();
            }
        }
        if b.entries.is_empty() {
            b.epoch = epoch;
            b.born = self.clock;
            b.seq = self.next_seq;
            self.next_seq += 1;
        }
        b.entries.push_back(e);
        self.len += 1;
        self.order.insert(b.key(parent));
    }

    fn reserve(&mut self, max: usize, live: &impl Fn(&Entry) -> bool, touched: &mut u64) -> Vec<Entry> {
        let mut out = Vec::with_capacity(max.min(self.len));
        while out.len() < max {
            let Some((_, _, parent)) = self.order.pop_first() else {
                break;
            };
            let b = &mut self.by_parent[parent as usize];
            while out.len() < max {
                let Some(e) = b.entries.pop_front() else { break };
                self.len -= 1;
                *touched += 1;
                if live(&e) {
                    out.push(e);
                }
            }
            if !b.entries.is_empty() {
                // Fewer queued now, so a smaller key: it stays at the front.
                self.order.insert(b.key(parent));
            }
        }
        self.clock += out.len() as u64;
        out
    }
}

#[derive(Default)]
pub(crate) struct CallQueues {
    policy: Reservation,
    fifo: VecDeque<Entry>,
    buckets: Buckets,
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
    pub(crate) fn new(seed: u64, policy: Reservation) -> CallQueues {
        CallQueues {
            policy,
            rng: seed | 1,
            ..CallQueues::default()
        }
    }

    /// Queue a ready Grain. `parent` is its parent's (slot, epoch), `None`
    /// for a Call over the root Domain.
    pub(crate) fn push(&mut self, e: Entry, parent: Option<(u32, u32)>) {
        match (self.policy, parent) {
            (Reservation::NearestCompletion, Some((p, epoch))) => self.buckets.push(e, p, epoch),
            _ => self.fifo.push_back(e),
        }
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
            + self.buckets.len
            + self.immediate.iter().map(Vec::len).sum::<usize>()
            + self.deferred.iter().map(Vec::len).sum::<usize>()
    }

    /// Every queued entry, for the stall report.
    pub(crate) fn all(&self) -> impl Iterator<Item = &Entry> {
        self.immediate
            .iter()
            .flatten()
            .chain(self.fifo.iter())
            .chain(self.buckets.by_parent.iter().flat_map(|b| b.entries.iter()))
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
            Reservation::NearestCompletion => {
                let mut out = self.buckets.reserve(max, &live, touched);
                if out.len() < max {
                    out.extend(self.elastic(max - out.len(), &live, touched));
                }
                out
            }
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
