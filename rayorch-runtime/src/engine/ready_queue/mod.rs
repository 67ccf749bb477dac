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
//!   parents with queued Grains; a push is O(log P), and a run of pushes
//!   for one parent (an Expansion's children, a batch's commits) updates
//!   the order once: the last-pushed bucket's key enters the ordered set
//!   when another parent is pushed or a reservation reads it.
//! - A bucket whose slot is reused by a newer parent (a different epoch) held
//!   only Grains of a released root, all dead: it is emptied on that push.
//! - Probes (`NearestCompletion`): a parent's first batch at a Call is its
//!   probe. From its reservation until a report of it commits
//!   ([`CallQueues::reported`]) the parent is *out*: a reservation passes
//!   its bucket over for every other parent's Grains and comes back to it
//!   only to fill a batch nothing else can (work-conserving: a replica never
//!   idles for a probe). A parent that fails at once (a GroupFailure on its
//!   first pages, a document that cannot be read) then costs one batch of
//!   its Grains, not one per free replica, and its queued siblings stay
//!   queued to be suppressed by its barrier. A parent's state lives with
//!   the Call (shared by its lanes), stamped with the parent's epoch, so a
//!   reused slot starts fresh; a parent whose probe failed as a whole stays
//!   out until a retry of it commits. Passing over touches one ordered-set
//!   entry per parent out, at most the Call's batches in flight.
//! - A Call without a parent Domain has one implicit parent; its Grains use
//!   the FIFO and the policy is Elastic there.
//! - Lanes: a Call with a shape key ([`Call::shape`](crate::Call::shape))
//!   keeps one lane (its own FIFO and buckets) per key, so a batch never
//!   mixes keys; a Call without one has a single lane and reserves exactly
//!   as before, with no clock read and no extra work per Grain. A shaped or
//!   delayed Call ([`Batching`]) is *timed*: each lane keeps the arrival
//!   times of its entries (tombstones included, until skipped), so its
//!   oldest entry is known in O(log n).
//! - A timed Call reserves, in this order: from the lane holding the oldest
//!   entry once that entry has waited the delay bound (so no Grain is held
//!   longer than the bound for want of mates); else from a worthy lane (a
//!   full batch, or a preferred size) — the one served least recently,
//!   then the one with the oldest entry (the keys take turns, so a parent
//!   whose Grains span keys is not kept waiting while one key drains); else, when the bound is zero or nothing more can arrive, from
//!   the lane with the oldest entry; else it holds until the oldest entry's
//!   deadline. Within a lane the Call's policy picks the Grains, so parents
//!   still complete in nearest-completion order. Recovery groups are never
//!   held.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};

use crate::plan::call::Reservation;

/// One queued Grain: the Entity slot, its epoch, the Grain's generation
/// when it was queued, and (timed Calls only, else 0) the engine clock in
/// microseconds when it was queued.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Entry {
    pub(crate) entity: u32,
    pub(crate) epoch: u32,
    pub(crate) generation: u32,
    pub(crate) at: u64,
}

/// How a timed Call waits for mates: its delay bound and preferred sizes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Batching {
    /// Longest a ready Grain is held for want of mates, in microseconds.
    pub(crate) delay_us: u64,
    /// Batch sizes worth dispatching at once, largest first.
    pub(crate) preferred: Vec<usize>,
}

/// Arrival times of a lane's entries (a multiset: µs → count); empty and
/// never touched for an untimed Call.
#[derive(Default)]
struct Arrivals {
    timed: bool,
    at: BTreeMap<u64, u32>,
}

impl Arrivals {
    #[inline]
    fn add(&mut self, at: u64) {
        if self.timed {
            *self.at.entry(at).or_default() += 1;
        }
    }

    #[inline]
    fn remove(&mut self, at: u64) {
        if self.timed
            && let std::collections::btree_map::Entry::Occupied(mut o) = self.at.entry(at)
        {
            *o.get_mut() -= 1;
            if *o.get() == 0 {
                o.remove();
            }
        }
    }

    fn oldest(&self) -> Option<u64> {
        self.at.first_key_value().map(|(&t, _)| t)
    }
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

/// What a Call knows of each parent from its probe (see the module
/// note): per parent slot, the epoch it was stamped with and whether a
/// report of the parent's Grains has committed (`true`) or its first batch
/// is still out (`false`). A slot absent, or stamped with another epoch,
/// is a parent never dispatched here.
#[derive(Default)]
struct Probes {
    by_parent: Vec<(u32, bool)>,
}

impl Probes {
    /// Is the parent's probe out (dispatched, no report committed)?
    #[inline]
    fn out(&self, parent: u32, epoch: u32) -> bool {
        self.by_parent.get(parent as usize) == Some(&(epoch, false))
    }

    /// A batch took the parent's Grains: its probe is out unless a report
    /// of it committed already.
    #[inline]
    fn dispatched(&mut self, parent: u32, epoch: u32) {
        let p = parent as usize;
        if self.by_parent.len() <= p {
            self.by_parent.resize(p + 1, (u32::MAX, false));
        }
        if self.by_parent[p].0 != epoch {
            self.by_parent[p] = (epoch, false);
        }
    }

    /// A report of the parent's Grains committed.
    #[inline]
    fn reported(&mut self, parent: u32, epoch: u32) {
        if let Some(s) = self.by_parent.get_mut(parent as usize)
            && s.0 == epoch
        {
            s.1 = true;
        }
    }
}

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
    /// The parent pushed to last, with its epoch: its bucket is non-empty
    /// and its key is *not* in `order` until [`Buckets::settle`] puts it
    /// there. Consecutive pushes for one parent (an Expansion's children
    /// arrive together) then cost one `order` update, not one per Grain.
    open: Option<(u32, u32)>,
    clock: u64,
    next_seq: u64,
    len: usize,
    /// Keys of parents a reservation passed over (their probe is out),
    /// in order; emptied before the reservation returns.
    passed: Vec<(u64, u64, u32)>,
}

impl Buckets {
    /// Put the open bucket's key into `order` (before anything reads it).
    #[inline]
    fn settle(&mut self) {
        if let Some((parent, _)) = self.open.take() {
            let key = self.by_parent[parent as usize].key(parent);
            self.order.insert(key);
        }
    }

    fn push(&mut self, e: Entry, parent: u32, epoch: u32, arrivals: &mut Arrivals) {
        if self.open == Some((parent, epoch)) {
            // Same parent as the last push: its key is out of `order` and
            // `born`/`seq` stay; only the count (read at `settle`) grows.
            self.by_parent[parent as usize].entries.push_back(e);
            self.len += 1;
            return;
        }
        self.settle();
        let p = parent as usize;
        if self.by_parent.len() <= p {
            self.by_parent.resize_with(p + 1, Bucket::default);
        }
        let b = &mut self.by_parent[p];
        if !b.entries.is_empty() {
            self.order.remove(&b.key(parent));
            if b.epoch != epoch {
                self.len -= b.entries.len();
                for dead in b.entries.drain(..) {
                    arrivals.remove(dead.at);
                }
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
        self.open = Some((parent, epoch));
    }

    /// Move up to `max` live entries (in total) into `out`: from the
    /// parents nearest completion whose probe is not out, then (only to
    /// fill the batch) from those whose probe is.
    fn reserve(
        &mut self,
        out: &mut Vec<Entry>,
        max: usize,
        live: &impl Fn(&Entry) -> bool,
        touched: &mut u64,
        arrivals: &mut Arrivals,
        probes: &mut Probes,
    ) {
        self.settle();
        let before = out.len();
        while out.len() < max {
            let Some(key) = self.order.pop_first() else {
                break;
            };
            let parent = key.2;
            if probes.out(parent, self.by_parent[parent as usize].epoch) {
                self.passed.push(key);
                continue;
            }
            self.take(parent, out, max, live, touched, arrivals, probes);
        }
        // Work-conserving: parents whose probe is out fill what is left,
        // nearest completion first (`passed` is in key order).
        let mut passed = std::mem::take(&mut self.passed);
        for &(_, _, parent) in &passed {
            if out.len() < max {
                self.take(parent, out, max, live, touched, arrivals, probes);
            } else {
                let b = &self.by_parent[parent as usize];
                self.order.insert(b.key(parent));
            }
        }
        passed.clear();
        self.passed = passed;
        self.clock += (out.len() - before) as u64;
    }

    /// Move live entries of `parent`'s bucket (its key already out of
    /// `order`) into `out` until it holds `max`; the bucket's key goes
    /// back into `order` if entries are left.
    #[expect(
        clippy::too_many_arguments,
        reason = "the reservation's inputs, passed through"
    )]
    fn take(
        &mut self,
        parent: u32,
        out: &mut Vec<Entry>,
        max: usize,
        live: &impl Fn(&Entry) -> bool,
        touched: &mut u64,
        arrivals: &mut Arrivals,
        probes: &mut Probes,
    ) {
        let b = &mut self.by_parent[parent as usize];
        let had = out.len();
        while out.len() < max {
            let Some(e) = b.entries.pop_front() else { break };
            self.len -= 1;
            *touched += 1;
            arrivals.remove(e.at);
            if live(&e) {
                out.push(e);
            }
        }
        if out.len() > had {
            probes.dispatched(parent, b.epoch);
        }
        if !b.entries.is_empty() {
            // Fewer queued now, so a smaller key.
            self.order.insert(b.key(parent));
        }
    }
}

/// The ready Grains of one shape key: a FIFO (or per-parent buckets) and
/// their arrival times.
#[derive(Default)]
struct Lane {
    key: u64,
    fifo: VecDeque<Entry>,
    buckets: Buckets,
    arrivals: Arrivals,
    /// When a batch last came from this lane (the queue's reservation
    /// count; 0: never, or not since it was last empty).
    served: u64,
}

impl Lane {
    fn new(key: u64, timed: bool) -> Lane {
        Lane {
            key,
            arrivals: Arrivals {
                timed,
                at: BTreeMap::new(),
            },
            ..Lane::default()
        }
    }

    /// Entries queued (tombstones included).
    fn len(&self) -> usize {
        self.fifo.len() + self.buckets.len
    }

    fn push(&mut self, e: Entry, parent: Option<(u32, u32)>, policy: Reservation) {
        self.arrivals.add(e.at);
        match (policy, parent) {
            (Reservation::NearestCompletion, Some((p, epoch))) => {
                self.buckets.push(e, p, epoch, &mut self.arrivals)
            }
            _ => self.fifo.push_back(e),
        }
    }

    /// Move up to `max` live entries (in total), chosen by `policy`, into
    /// `out` (empty on entry).
    #[expect(
        clippy::too_many_arguments,
        reason = "the reservation's inputs, passed through"
    )]
    fn reserve(
        &mut self,
        out: &mut Vec<Entry>,
        max: usize,
        policy: Reservation,
        rng: &mut u64,
        live: &impl Fn(&Entry) -> bool,
        parent: &impl Fn(&Entry) -> u32,
        touched: &mut u64,
        probes: &mut Probes,
    ) {
        match policy {
            Reservation::Elastic => self.elastic(out, max, live, touched),
            Reservation::ParentBound => self.parent_bound(out, max, live, parent, touched),
            Reservation::Unordered => self.unordered(out, max, rng, live, touched),
            Reservation::NearestCompletion => {
                self.buckets
                    .reserve(out, max, live, touched, &mut self.arrivals, probes);
                self.elastic(out, max, live, touched);
            }
        }
    }

    fn elastic(
        &mut self,
        out: &mut Vec<Entry>,
        max: usize,
        live: &impl Fn(&Entry) -> bool,
        touched: &mut u64,
    ) {
        while out.len() < max {
            let Some(e) = self.fifo.pop_front() else { break };
            *touched += 1;
            self.arrivals.remove(e.at);
            if live(&e) {
                out.push(e);
            }
        }
    }

    fn parent_bound(
        &mut self,
        out: &mut Vec<Entry>,
        max: usize,
        live: &impl Fn(&Entry) -> bool,
        parent: &impl Fn(&Entry) -> u32,
        touched: &mut u64,
    ) {
        // Drop dead entries at the head; the first live one names the parent.
        let head_parent = loop {
            let Some(e) = self.fifo.front() else {
                return;
            };
            *touched += 1;
            if live(e) {
                break parent(e);
            }
            let at = e.at;
            self.fifo.pop_front();
            self.arrivals.remove(at);
        };
        let mut keep = VecDeque::with_capacity(self.fifo.len());
        while let Some(e) = self.fifo.pop_front() {
            if out.len() == max {
                keep.push_back(e);
                keep.extend(self.fifo.drain(..));
                break;
            }
            *touched += 1;
            if live(&e) && parent(&e) != head_parent {
                keep.push_back(e);
                continue;
            }
            self.arrivals.remove(e.at);
            if live(&e) {
                out.push(e);
            }
        }
        self.fifo = keep;
    }

    fn unordered(
        &mut self,
        out: &mut Vec<Entry>,
        max: usize,
        rng: &mut u64,
        live: &impl Fn(&Entry) -> bool,
        touched: &mut u64,
    ) {
        while out.len() < max && !self.fifo.is_empty() {
            // xorshift64: deterministic for a seed, independent of arrival order.
            *rng ^= *rng << 13;
            *rng ^= *rng >> 7;
            *rng ^= *rng << 17;
            let i = (*rng % self.fifo.len() as u64) as usize;
            let e = self.fifo.swap_remove_back(i).expect("index in range");
            *touched += 1;
            self.arrivals.remove(e.at);
            if live(&e) {
                out.push(e);
            }
        }
    }
}

#[derive(Default)]
pub(crate) struct CallQueues {
    policy: Reservation,
    /// One lane per shape key present (a single lane, key 0, when the Call
    /// has no shape key).
    lanes: Vec<Lane>,
    /// Shape key → lane index (shaped Calls only).
    lane_of: HashMap<u64, usize>,
    /// Set for a shaped or delayed Call: lanes are timed and reservation
    /// may hold.
    batching: Option<Batching>,
    immediate: VecDeque<Vec<Entry>>,
    deferred: VecDeque<Vec<Entry>>,
    rng: u64,
    /// Batches reserved from lanes (a timed Call's turn counter).
    turns: u64,
    /// An entry list handed back by [`CallQueues::recycle`], refilled by the
    /// next reservation from the lanes.
    spare: Vec<Entry>,
    /// Each parent's probe (`NearestCompletion` only; see the module note).
    probes: Probes,
}

/// Where a reserved batch came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Source {
    Immediate,
    /// First attempts, from the lane of this shape key (0 when unshaped).
    Lane(u64),
    Deferred,
}

/// What a reservation gave.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Reserved {
    /// A batch (never empty).
    Batch(Vec<Entry>, Source),
    /// Ready Grains are held for mates until this engine time (µs).
    Hold(u64),
    /// Nothing live is queued.
    Empty,
}

impl CallQueues {
    pub(crate) fn new(seed: u64, policy: Reservation, batching: Option<Batching>) -> CallQueues {
        let timed = batching.is_some();
        CallQueues {
            policy,
            lanes: vec![Lane::new(0, timed)],
            batching,
            rng: seed | 1,
            ..CallQueues::default()
        }
    }

    /// Does this queue keep arrival times (and may it hold)?
    pub(crate) fn timed(&self) -> bool {
        self.batching.is_some()
    }

    /// Queue a ready Grain under shape key `key` (0 for an unshaped Call).
    /// `parent` is its parent's (slot, epoch), `None` for a Call over the
    /// root Domain.
    pub(crate) fn push(&mut self, e: Entry, parent: Option<(u32, u32)>, key: u64) {
        let lane = if key == self.lanes[0].key {
            0
        } else {
            let timed = self.timed();
            let lanes = &mut self.lanes;
            *self.lane_of.entry(key).or_insert_with(|| {
                lanes.push(Lane::new(key, timed));
                lanes.len() - 1
            })
        };
        self.lanes[lane].push(e, parent, self.policy);
    }

    /// A report of Grains of `parent` (slot, epoch) committed: its probe is
    /// in, and its bucket is served in its turn again.
    #[inline]
    pub(crate) fn reported(&mut self, parent: u32, epoch: u32) {
        self.probes.reported(parent, epoch);
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
        let (first, recovery) = self.depths();
        first + recovery
    }

    /// Entries queued as (first attempts, recovery groups), tombstones
    /// included: the two queue depths a live view shows.
    pub(crate) fn depths(&self) -> (usize, usize) {
        (
            self.lanes.iter().map(Lane::len).sum(),
            self.immediate.iter().map(Vec::len).sum::<usize>()
                + self.deferred.iter().map(Vec::len).sum::<usize>(),
        )
    }

    /// Shape keys with Grains queued now (tombstones included), with their
    /// counts, in key order.
    pub(crate) fn lanes(&self) -> Vec<(u64, usize)> {
        let mut v: Vec<(u64, usize)> = self
            .lanes
            .iter()
            .filter(|l| l.len() > 0)
            .map(|l| (l.key, l.len()))
            .collect();
        v.sort_unstable();
        v
    }

    /// Every queued entry, for the stall report.
    pub(crate) fn all(&self) -> impl Iterator<Item = &Entry> {
        self.immediate
            .iter()
            .flatten()
            .chain(self.lanes.iter().flat_map(|l| {
                l.fifo
                    .iter()
                    .chain(l.buckets.by_parent.iter().flat_map(|b| b.entries.iter()))
            }))
            .chain(self.deferred.iter().flatten())
    }

    /// Reserve up to `max` live entries. `live` tells whether an entry still
    /// stands for a ready Grain; `parent` gives an entry's parent slot.
    /// `touched` counts every entry examined. A timed Call may hold instead:
    /// `now` is the engine clock (µs), `can_grow` whether more Grains may
    /// still arrive at this Call (see the module note).
    pub(crate) fn reserve(
        &mut self,
        max: usize,
        now: u64,
        can_grow: bool,
        live: impl Fn(&Entry) -> bool,
        parent: impl Fn(&Entry) -> u32,
        touched: &mut u64,
    ) -> Reserved {
        let max = max.max(1);
        if let Some(g) = Self::take_group(&mut self.immediate, max, &live, touched) {
            return Reserved::Batch(g, Source::Immediate);
        }
        let mut hold = None;
        let mut taken = std::mem::take(&mut self.spare);
        taken.clear();
        let mut key = self.lanes[0].key;
        match self.batching.take() {
            None => {
                let lane = &mut self.lanes[0];
                lane.reserve(
                    &mut taken,
                    max,
                    self.policy,
                    &mut self.rng,
                    &live,
                    &parent,
                    touched,
                    &mut self.probes,
                );
            }
            Some(b) => {
                match self.timed_reserve(&mut taken, &b, max, now, can_grow, &live, &parent, touched) {
                    Ok(k) => key = k,
                    Err(until) => hold = until,
                }
                self.batching = Some(b);
            }
        }
        if !taken.is_empty() {
            return Reserved::Batch(taken, Source::Lane(key));
        }
        self.spare = taken;
        if let Some(g) = Self::take_group(&mut self.deferred, max, &live, touched) {
            return Reserved::Batch(g, Source::Deferred);
        }
        hold.map_or(Reserved::Empty, Reserved::Hold)
    }

    /// The timed reservation of the module note: a batch (into `out`) and
    /// its lane's key, or nothing and the deadline of the oldest entry held
    /// (`None`: nothing is queued).
    #[expect(
        clippy::too_many_arguments,
        reason = "the reservation's inputs, passed through"
    )]
    fn timed_reserve(
        &mut self,
        out: &mut Vec<Entry>,
        b: &Batching,
        max: usize,
        now: u64,
        can_grow: bool,
        live: &impl Fn(&Entry) -> bool,
        parent: &impl Fn(&Entry) -> u32,
        touched: &mut u64,
    ) -> Result<u64, Option<u64>> {
        loop {
            self.drop_empty_lanes();
            // (lane, oldest arrival) of the lane holding the oldest entry.
            let oldest = |l: &Lane| l.arrivals.oldest().unwrap_or(u64::MAX);
            // Nothing queued: nothing to reserve and nothing held.
            let (first, at) = self
                .lanes
                .iter()
                .enumerate()
                .filter(|(_, l)| l.len() > 0)
                .map(|(i, l)| (i, oldest(l)))
                .min_by_key(|&(i, t)| (t, i))
                .ok_or(None)?;
            let overdue = b.delay_us == 0 || now.saturating_sub(at) >= b.delay_us;
            let worthy = |n: usize| {
                if n >= max {
                    Some(max)
                } else {
                    b.preferred.iter().copied().find(|&p| p <= n && p > 0)
                }
            };
            let pick = if overdue && b.delay_us > 0 {
                Some((first, max))
            } else if let Some((i, n)) = self
                .lanes
                .iter()
                .enumerate()
                .filter_map(|(i, l)| worthy(l.len()).map(|n| (i, n, (l.served, oldest(l)))))
                .min_by_key(|&(i, _, turn)| (turn, i))
                .map(|(i, n, _)| (i, n))
            {
                Some((i, n))
            } else if overdue || !can_grow {
                Some((first, max))
            } else {
                None
            };
            let Some((lane, n)) = pick else {
                return Err(Some(at.saturating_add(b.delay_us)));
            };
            self.lanes[lane].reserve(
                out,
                n,
                self.policy,
                &mut self.rng,
                live,
                parent,
                touched,
                &mut self.probes,
            );
            if !out.is_empty() {
                self.turns += 1;
                self.lanes[lane].served = self.turns;
                return Ok(self.lanes[lane].key);
            }
            // Only tombstones were there: that lane is empty now; choose again.
        }
    }

    /// Forget lanes with nothing queued (lane 0 stays: it is the unshaped
    /// Call's only lane and the first key's home).
    fn drop_empty_lanes(&mut self) {
        let mut i = 1;
        while i < self.lanes.len() {
            if self.lanes[i].len() == 0 {
                let gone = self.lanes.swap_remove(i);
                self.lane_of.remove(&gone.key);
                if let Some(moved) = self.lanes.get(i) {
                    self.lane_of.insert(moved.key, i);
                }
            } else {
                i += 1;
            }
        }
    }

    /// Hand back a reserved entry list once its Grains are dispatched: the
    /// next reservation refills it instead of allocating.
    pub(crate) fn recycle(&mut self, entries: Vec<Entry>) {
        if entries.capacity() > self.spare.capacity() {
            self.spare = entries;
        }
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
}

#[cfg(test)]
mod tests;
