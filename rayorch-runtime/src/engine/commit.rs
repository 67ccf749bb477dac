//! The commit gate and recovery: what a report does to the Call ingredient.
//!
//! State: none of its own; it works on the Call ingredient (Grains, barriers,
//! queues, batches) and publishes into the lineage store.
//!
//! Invariants:
//! - A report is accepted once, for a batch in flight; a Grain in it commits
//!   only while its Entity epoch and generation still match (else: stale).
//! - GroupFailures of one report install their barriers before any success
//!   of the same report commits, so the barrier covers the whole report.
//! - A Grain whose outputs feed an aligned expansion commits only if the
//!   lists it produced have equal lengths; otherwise it ends Failed with a
//!   "cardinality mismatch" cause and nothing it produced is published.
//! - Recovery never requeues a Grain whose input value moved into the failed
//!   attempt (`retry_possible` decides both, from the same policy).

use crate::engine::Core;
use crate::engine::boundary::{BatchId, ReportOutcome};
use crate::engine::call_state::{InFlightGrain, retry_possible};
use crate::engine::grain::{Phase, Transition};
use crate::engine::ready_queue::Entry;
use crate::error::RunError;
use crate::plan::PlanInner;
use crate::plan::call::{Recovery, Reservation};
use crate::stage::{AttemptError, AttemptResult, ErasedOutcome};
use crate::value::{Cause, FailedAttempt, FailureKind, Item, Outcome, Value};

impl Core {
    pub(crate) fn report(&mut self, plan: &PlanInner, id: BatchId, result: AttemptResult) -> ReportOutcome {
        let Some(rec) = self.calls.take(id) else {
            self.stats.rejected_reports += 1;
            return ReportOutcome::Rejected;
        };
        let c = rec.call;
        let dom = plan.calls[c].domain;
        // The per-report flags live in reused buffers (no allocation per
        // report on the commit path).
        let mut valid = std::mem::take(&mut self.scratch.valid);
        valid.clear();
        valid.extend(rec.grains.iter().map(|g| {
            self.lineage.doms[dom].is(g.entity, g.epoch) && {
                let gr = &self.calls.grains[c][g.entity as usize];
                gr.phase == Phase::InFlight && gr.generation == g.generation
            }
        }));
        let stale = valid.iter().filter(|v| !**v).count();
        self.calls.stats[c].stale_grains += stale as u64;
        let outcome = self.judge(plan, c, &rec.grains, &valid, stale, result);
        self.scratch.valid = valid;
        self.calls.recycle(rec.grains);
        outcome
    }

    /// The report of Call `c`'s batch `grains`, whose live ones `valid`
    /// flags, with the stage's `result`.
    fn judge(
        &mut self,
        plan: &PlanInner,
        c: usize,
        grains: &[InFlightGrain],
        valid: &[bool],
        stale: usize,
        result: AttemptResult,
    ) -> ReportOutcome {
        let live = || -> Vec<u32> {
            grains
                .iter()
                .zip(valid)
                .filter(|(_, v)| **v)
                .map(|(g, _)| g.entity)
                .collect()
        };
        match result {
            Ok(outcomes) if outcomes.len() == grains.len() => {
                let committed = grains.len() - stale;
                self.commit(plan, c, grains, valid, outcomes);
                ReportOutcome::Accepted { committed, stale }
            }
            Ok(outcomes) => {
                let msg = format!(
                    "contract error: Call `{}` (stage `{}`) returned {} outcomes for a batch of {} inputs; a stage must return exactly one outcome per input, in input order",
                    plan.calls[c].name,
                    plan.calls[c].runtime.stage_name(),
                    outcomes.len(),
                    grains.len()
                );
                self.contract_error(plan, c, &live(), &msg);
                ReportOutcome::Accepted { committed: 0, stale }
            }
            Err(AttemptError::Contract(msg)) => {
                self.contract_error(plan, c, &live(), &msg);
                ReportOutcome::Accepted { committed: 0, stale }
            }
            Err(err) => {
                self.calls.stats[c].attempt_failures += 1;
                let requeued = self.recover(plan, c, &live(), grains.len(), &err);
                ReportOutcome::Retried { requeued }
            }
        }
    }

    fn commit(
        &mut self,
        plan: &PlanInner,
        c: usize,
        grains: &[InFlightGrain],
        valid: &[bool],
        outcomes: Vec<ErasedOutcome>,
    ) {
        self.probes_in(plan, c, grains, valid);
        // Pass 1: GroupFailures install their barriers first, so successes of
        // the same (Call, parent) in this very batch are suppressed too. A
        // sibling whose parent was barred before this report arrived cannot
        // commit anything, not even its own failure: it is suppressed in pass 2.
        let mut barred_before = std::mem::take(&mut self.scratch.barred);
        barred_before.clear();
        barred_before.extend(
            grains
                .iter()
                .zip(valid)
                .map(|(g, &v)| v && self.calls.barred(plan, &self.lineage, c, g.entity)),
        );
        // Whether a barrier may cover some Grain of this report: one was up
        // before, or this report installs one. Without, pass 2 skips the
        // per-Grain barrier lookup.
        let mut barriers = barred_before.contains(&true);
        for (i, o) in outcomes.iter().enumerate() {
            if let (true, false, Outcome::GroupFailure(cause)) = (valid[i], barred_before[i], o) {
                barriers = true;
                let e = grains[i].entity;
                let cause = cause
                    .clone()
                    .classified(FailureKind::Group, || self.lineage.origin(plan, c, e));
                self.install_barrier(plan, c, e, cause.clone());
                self.calls.stats[c].group_failures += 1;
                self.seal(plan, c, e, Transition::Commit, Item::Failed(cause));
            }
        }
        for (i, o) in outcomes.into_iter().enumerate() {
            if !valid[i] || (!barred_before[i] && matches!(o, Outcome::GroupFailure(_))) {
                continue;
            }
            let e = grains[i].entity;
            if let Some(cause) = barriers
                .then(|| self.calls.barrier(plan, &self.lineage, c, e))
                .flatten()
            {
                self.calls.stats[c].suppressed_in_flight += 1;
                self.seal(plan, c, e, Transition::Commit, Item::Suppressed(cause));
                continue;
            }
            match o {
                Outcome::Ok(values) => {
                    let aligned = &plan.calls[c].aligned;
                    if let Some(cause) = (!aligned.is_empty())
                        .then(|| aligned_mismatch(plan, c, &values))
                        .flatten()
                    {
                        let cause = Cause::new(cause)
                            .classified(FailureKind::Record, || self.lineage.origin(plan, c, e));
                        self.calls.stats[c].record_failures += 1;
                        self.seal(plan, c, e, Transition::Commit, Item::Failed(cause));
                        continue;
                    }
                    if !self.transition(plan, c, e, Transition::Commit) {
                        continue;
                    }
                    self.release_inputs(plan, c, e);
                    self.calls.stats[c].committed += 1;
                    for (&out, v) in plan.calls[c].outputs.iter().zip(values) {
                        self.lineage.set(out, e, Item::Present(v));
                    }
                }
                Outcome::RecordFailure(cause) => {
                    let cause = cause.classified(FailureKind::Record, || self.lineage.origin(plan, c, e));
                    self.calls.stats[c].record_failures += 1;
                    self.seal(plan, c, e, Transition::Commit, Item::Failed(cause));
                }
                Outcome::GroupFailure(_) => {}
            }
        }
        self.scratch.barred = barred_before;
    }

    /// A report of Call `c` committed: the probe of each parent of its
    /// live Grains is in (the ready queue's module note). Read before the
    /// commit, while the parents' slots and epochs are the ones the batch
    /// was reserved under.
    fn probes_in(&mut self, plan: &PlanInner, c: usize, grains: &[InFlightGrain], valid: &[bool]) {
        let dom = plan.calls[c].domain;
        let (Reservation::NearestCompletion, Some(pd)) =
            (plan.calls[c].config.reservation, plan.domains[dom].parent)
        else {
            return;
        };
        let mut last = None;
        for (g, _) in grains.iter().zip(valid).filter(|(_, v)| **v) {
            let p = self.lineage.doms[dom].ents[g.entity as usize].parent;
            if last != Some(p) {
                last = Some(p);
                let epoch = self.lineage.doms[pd].ents[p as usize].epoch;
                self.calls.queues[c].reported(p, epoch);
            }
        }
    }

    fn install_barrier(&mut self, plan: &PlanInner, c: usize, e: u32, cause: Cause) {
        let dom = plan.calls[c].domain;
        if plan.domains[dom].parent.is_none() {
            return; // a root has no siblings: a GroupFailure acts on itself only
        }
        let p = self.lineage.parent(dom, e);
        if self.calls.barriers[c][p as usize].is_some() {
            return;
        }
        self.calls.barriers[c][p as usize] = Some(cause.clone());
        let n = self.expands.children(dom, p).len();
        for j in 0..n {
            let sib = self.expands.children(dom, p)[j];
            if self.calls.grains[c][sib as usize].phase == Phase::Ready {
                self.calls.stats[c].suppressed_before_dispatch += 1;
                let item = Item::Suppressed(cause.clone());
                self.seal(plan, c, sib, Transition::SuppressQueued, item);
            }
        }
    }

    fn contract_error(&mut self, plan: &PlanInner, c: usize, live: &[u32], msg: &str) {
        for &e in live {
            self.calls.stats[c].contract_errors += 1;
            let cause = Cause::new(msg).classified(FailureKind::Contract, || self.lineage.origin(plan, c, e));
            self.seal(plan, c, e, Transition::Commit, Item::Failed(cause));
        }
    }

    /// Apply the Call's recovery policy to the live Grains of a failed attempt.
    /// `batch` is the size of the physical batch that failed, stale Grains
    /// included: a Grain is isolated as the poison only when it failed alone,
    /// not when its batch-mates went stale and left it the only live one.
    fn recover(
        &mut self,
        plan: &PlanInner,
        c: usize,
        live: &[u32],
        batch: usize,
        err: &AttemptError,
    ) -> usize {
        let msg = err.message();
        if live.is_empty() {
            return 0;
        }
        // A sibling whose parent's barrier went up while it was in flight is
        // not retried: it would be dispatched again only to be suppressed.
        let (barred, live): (Vec<u32>, Vec<u32>) = live
            .iter()
            .partition(|&&e| self.calls.barrier(plan, &self.lineage, c, e).is_some());
        for e in barred {
            let cause = self
                .calls
                .barrier(plan, &self.lineage, c, e)
                .unwrap_or_else(|| Cause::of_kind("group failure", crate::value::FailureKind::Group));
            self.calls.stats[c].suppressed_in_flight += 1;
            self.seal(plan, c, e, Transition::Commit, Item::Suppressed(cause));
        }
        if live.is_empty() {
            return 0;
        }
        let recovery = plan.calls[c].config.recovery;
        // Whether the values moved into this attempt is decided by the same
        // rule at reservation; a Grain that cannot be retried is exhausted.
        // (`batch` is the size reserved, so a Grain whose values moved is
        // never judged retryable here.)
        let n = batch;
        let (retry, spent): (Vec<u32>, Vec<u32>) = live.iter().partition(|&&e| {
            err.retryable() && retry_possible(recovery, self.calls.grains[c][e as usize].failures, n)
        });
        for &e in &live {
            self.calls.grains[c][e as usize].failures += 1;
        }
        if recovery == Recovery::Abort {
            let dom = plan.calls[c].domain;
            self.fail_stop(RunError::Aborted {
                call: plan.calls[c].name.to_string(),
                entity: self.lineage.named_path(plan, dom, live[0]),
                cause: msg.to_string(),
            });
            return 0;
        }
        for e in spent {
            self.exhaust(plan, c, e, err);
        }
        match recovery {
            Recovery::RetryBatch(_) => self.requeue(plan, c, &retry, true),
            Recovery::RetryTail(_) => self.requeue(plan, c, &retry, false),
            // First failure of the whole group: retry it as it was; after
            // that, bisect towards the poison record.
            _ if retry
                .iter()
                .all(|&e| self.calls.grains[c][e as usize].failures == 1) =>
            {
                self.requeue(plan, c, &retry, false)
            }
            _ => {
                let (a, b) = retry.split_at(retry.len() / 2);
                self.requeue(plan, c, a, true) + self.requeue(plan, c, b, true)
            }
        }
    }

    fn requeue(&mut self, plan: &PlanInner, c: usize, group: &[u32], immediate: bool) -> usize {
        let dom = plan.calls[c].domain;
        let mut entries = Vec::with_capacity(group.len());
        for &e in group {
            if !self.transition(plan, c, e, Transition::Retry) {
                return 0;
            }
            entries.push(Entry {
                entity: e,
                epoch: self.lineage.doms[dom].ents[e as usize].epoch,
                generation: self.calls.grains[c][e as usize].generation,
                at: self.clock_us,
            });
        }
        self.calls.stats[c].requeued += entries.len() as u64;
        let n = entries.len();
        self.calls.queues[c].push_recovery(entries, immediate);
        n
    }

    fn exhaust(&mut self, plan: &PlanInner, c: usize, e: u32, err: &AttemptError) {
        self.calls.stats[c].exhausted += 1;
        let last = FailedAttempt {
            kind: err.kind(),
            message: err.message().to_string(),
        };
        let cause = Cause::after_attempts(err.message().to_string(), vec![last], err.stage_error())
            .with_code(err.code())
            .classified(err.kind(), || self.lineage.origin(plan, c, e));
        self.seal(plan, c, e, Transition::Commit, Item::Failed(cause));
    }
}

/// CONFORMANCE §B11: the lists one Grain produced for an aligned expansion
/// must have equal lengths; the message when they do not.
fn aligned_mismatch(plan: &PlanInner, c: usize, values: &[Value]) -> Option<String> {
    for check in &plan.calls[c].aligned {
        // A list type without a known length is left to the Expansion.
        let lens: Option<Vec<usize>> = check
            .lists
            .iter()
            .map(|l| values.get(l.output).and_then(|v| (l.len)(v)))
            .collect();
        let Some(lens) = lens else { continue };
        if lens.iter().any(|l| *l != lens[0]) {
            return Some(format!(
                "cardinality mismatch: the lists for {} have lengths {lens:?}; every list of an aligned expansion must have the same length",
                plan.nodes[check.node].label
            ));
        }
    }
    None
}
