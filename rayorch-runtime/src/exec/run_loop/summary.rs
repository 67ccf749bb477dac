//! The run's figures: per-Domain counts, failures by kind and the
//! [`RunSummary`], built from the engine's counters and the loop's own.

use super::{Backend, RunLoop};
use crate::exec::metrics::{
    CallMetrics, DomainCounts, FailureCount, FailureLevel, KeyBatchCount, RunSummary, WorkerGrains, secs,
};
use crate::exec::sink::Sink;
use crate::value::ItemKind;

impl<S: Sink, B: Backend> RunLoop<'_, S, B> {
    pub(super) fn domain_counts(&self) -> Vec<DomainCounts> {
        let plan = &self.plan.inner;
        let st = self.engine.stats();
        plan.domains
            .iter()
            .enumerate()
            .map(|(d, spec)| {
                let mut counts = DomainCounts {
                    domain: spec.info.name,
                    ..DomainCounts::default()
                };
                if d == plan.root {
                    counts.published = st.roots_admitted + self.refused();
                    counts.done = st.roots_present + st.roots_dropped;
                    counts.failed = st.roots_failed + self.refused() + self.abandoned;
                    counts.suppressed = st.roots_suppressed;
                    return counts;
                }
                let calls: Vec<usize> = (0..plan.calls.len())
                    .filter(|&c| plan.calls[c].domain == d)
                    .collect();
                let (Some(&first), Some(&last)) = (calls.first(), calls.last()) else {
                    return counts;
                };
                counts.published = self.reached[first];
                counts.done = self.engine.call_stats(last).committed;
                for &c in &calls {
                    let cs = self.engine.call_stats(c);
                    counts.failed +=
                        cs.record_failures + cs.group_failures + cs.exhausted + cs.contract_errors;
                    counts.suppressed += cs.suppressed_before_dispatch + cs.suppressed_in_flight;
                }
                counts
            })
            .collect()
    }

    /// Failures by Domain and kind: the roots failed or suppressed (root
    /// Domain), then the Grains sealed Failed below and at the root.
    fn failure_counts(&self) -> Vec<FailureCount> {
        let plan = &self.plan.inner;
        let root = plan.domains[plan.root].info.name;
        let roots = self
            .root_failures
            .iter()
            .map(|(&(outcome, kind), &count)| FailureCount {
                domain: root.to_string(),
                level: if outcome == ItemKind::Failed {
                    FailureLevel::RootFailed
                } else {
                    FailureLevel::RootSuppressed
                },
                kind,
                count,
            });
        // Each Domain's failed Grains by kind: its Calls' counts, summed.
        let mut by_domain: std::collections::BTreeMap<(usize, crate::value::FailureKind), u64> =
            std::collections::BTreeMap::new();
        for (c, spec) in plan.calls.iter().enumerate() {
            for (&kind, &n) in &self.engine.call_stats(c).failed {
                *by_domain.entry((spec.domain, kind)).or_default() += n;
            }
        }
        let grains = by_domain.into_iter().map(|((d, kind), count)| FailureCount {
            domain: plan.domains[d].info.name.to_string(),
            level: FailureLevel::GrainFailed,
            kind,
            count,
        });
        roots.chain(grains).collect()
    }

    /// Roots the source gave that were refused before admission.
    fn refused(&self) -> u64 {
        self.duplicates + self.wrong_type
    }

    pub(super) fn summary(&self) -> RunSummary {
        let st = self.engine.stats();
        let calls = self
            .plan
            .calls()
            .iter()
            .enumerate()
            .map(|(c, spec)| {
                let cs = self.engine.call_stats(c);
                let t = self.timing[c];
                let timed = self.engine.waits_for_mates(c);
                let now = spec.runtime.record_counts();
                let records: [u64; 3] =
                    std::array::from_fn(|i| now[i].saturating_sub(self.record_base[c][i]));
                let mean = if cs.rpcs > 0 {
                    cs.grains_dispatched as f64 / cs.rpcs as f64
                } else {
                    0.0
                };
                CallMetrics {
                    name: spec.name.to_string(),
                    batch_size: spec.config.batch_size,
                    replicas: spec.config.replicas,
                    rpcs: cs.rpcs,
                    grains_dispatched: cs.grains_dispatched,
                    mean_batch: mean,
                    fill: mean / spec.config.batch_size as f64,
                    mixed_parent_batches: cs.mixed_parent_batches,
                    committed: cs.committed,
                    record_failures: cs.record_failures,
                    group_failures: cs.group_failures,
                    attempt_failures: cs.attempt_failures,
                    requeued: cs.requeued,
                    suppressed_before_dispatch: cs.suppressed_before_dispatch,
                    suppressed_in_flight: cs.suppressed_in_flight,
                    stale_grains: cs.stale_grains,
                    replicas_replaced: self.replaced[c],
                    shape_key_panics: cs.shape_key_panics,
                    failed_grains: cs.failed.clone(),
                    mean_wait_s: match (timed, cs.grains_dispatched) {
                        (false, _) | (_, 0) => None,
                        (true, n) => Some(cs.queue_wait_us as f64 / 1e6 / n as f64),
                    },
                    batches_by_key: key_counts(cs),
                    record_attempts: records[0],
                    record_retries: records[1],
                    record_deadline_misses: records[2],
                    threads_abandoned: self.backend.threads_abandoned(c),
                    busy_s: secs(t.busy),
                    window_start_s: t.from.map(secs),
                    window_end_s: t.to.map(secs),
                }
            })
            .collect();
        RunSummary {
            roots: st.roots_admitted + self.refused(),
            present: st.roots_present,
            dropped: st.roots_dropped,
            failed: st.roots_failed + self.refused() + self.abandoned,
            suppressed: st.roots_suppressed,
            wall_s: secs(self.start.elapsed()),
            first_root_s: self.first_root.map(secs),
            first_present_s: self.first_present.map(secs),
            duplicate_keys: self.duplicates,
            wrong_type_roots: self.wrong_type,
            cancelled: self.cancelled,
            abandoned: self.abandoned,
            threads_abandoned: (0..self.plan.calls().len())
                .map(|c| self.backend.threads_abandoned(c))
                .sum(),
            loop_wakeups: self.wakeups,
            rejected_reports: st.rejected_reports,
            forged_reports: self.backend.forged_reports(),
            backpressure_holds: self.held,
            journal_skipped: self.journal_skipped,
            journal_commits: self.journal.as_ref().map_or(0, |j| j.commits),
            calls,
            domains: self.domain_counts(),
            failures: self.failure_counts(),
            workers: self
                .per_worker
                .iter()
                .map(|((w, c), &grains)| WorkerGrains {
                    worker: w.clone(),
                    call: self.plan.calls()[*c].name.to_string(),
                    grains,
                })
                .collect(),
        }
    }
}

/// A shaped Call's batches by key, then the keys past the counted ones.
fn key_counts(cs: &crate::engine::CallStats) -> Vec<KeyBatchCount> {
    let count = |key, k: &crate::engine::KeyBatches| KeyBatchCount {
        key,
        batches: k.batches,
        grains: k.grains,
    };
    let mut v: Vec<_> = cs
        .key_batches
        .iter()
        .map(|(&key, k)| count(Some(key), k))
        .collect();
    if cs.other_keys.batches > 0 {
        v.push(count(None, &cs.other_keys));
    }
    v
}
