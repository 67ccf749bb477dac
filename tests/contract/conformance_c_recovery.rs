//! CONFORMANCE.md §C: recovery policies. The checklist's setting throughout:
//! 5 values, batch 4, one replica, and the first attempt raises.

use crate::common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use common::{HandDriver, cause_text, ok, rpc_keys, run_seq, run_with};
use rayorch::prelude::*;
use rayorch::sim::SimConfig;
use rayorch::spi::{AttemptError, ReportOutcome};
use rayorch::{BatchFn, ItemKind, Output};

domain!(Doc);

const VALUES: [u32; 5] = [0, 1, 2, 3, 4];

/// One root-level Call `work` (x → 10x, batch 4, one replica) whose first
/// attempt raises; any later batch holding `poison` raises too.
fn recovery_plan(recovery: Recovery, poison: Option<u32>) -> (Plan, Output<u32>) {
    let attempts = Arc::new(AtomicUsize::new(0));
    let work = Call::batch("work", move |batch: Vec<u32>| {
        if attempts.fetch_add(1, Ordering::SeqCst) == 0 {
            return Err("first attempt raises".into());
        }
        if let Some(p) = poison.filter(|p| batch.contains(p)) {
            return Err(format!("poison record {p}").into());
        }
        Ok(batch.into_iter().map(|x| Outcome::Ok(x * 10)).collect())
    })
    .batch_size(4)
    .replicas(1)
    .recovery(recovery);
    Plan::build(|b| {
        let docs = b.source::<Doc, u32>();
        b.output(work.apply(docs))
    })
    .unwrap()
}

fn all_present() -> Vec<Item<u32>> {
    VALUES.iter().map(|x| Item::Present(x * 10)).collect()
}

/// Per root key, the generations its Grain was dispatched with, in order.
fn generations(d: &HandDriver) -> BTreeMap<u64, Vec<u32>> {
    let mut g: BTreeMap<u64, Vec<u32>> = BTreeMap::new();
    for dispatch in &d.log {
        for (p, gen_) in dispatch.paths.iter().zip(&dispatch.generations) {
            g.entry(p.root).or_default().push(*gen_);
        }
    }
    g
}

fn drive(plan: &Plan) -> HandDriver {
    let mut d = HandDriver::new(plan);
    for x in VALUES {
        d.admit(x as u64, x);
    }
    d.settle(&[]);
    d.assert_clean();
    d
}

/// "retry-batch (immediate): RPCs `[(0,1,2,3),(0,1,2,3),(4)]`."
#[test]
fn c_retry_batch_immediate() {
    let (plan, out) = recovery_plan(Recovery::RetryBatch(2), None);
    let (got, run) = run_seq(&plan, out, VALUES);
    assert_eq!(
        rpc_keys(&run, 0),
        vec![vec![0, 1, 2, 3], vec![0, 1, 2, 3], vec![4]]
    );
    assert_eq!(got, all_present());
    assert_eq!(run.call_stats[0].attempt_failures, 1);
    assert_eq!(run.call_stats[0].requeued, 4);
}

/// "retry-tail (deferred): RPCs `[(0,1,2,3),(4),(0,1,2,3)]`."
#[test]
fn c_retry_tail_deferred() {
    let (plan, out) = recovery_plan(Recovery::RetryTail(2), None);
    let (got, run) = run_seq(&plan, out, VALUES);
    assert_eq!(
        rpc_keys(&run, 0),
        vec![vec![0, 1, 2, 3], vec![4], vec![0, 1, 2, 3]]
    );
    assert_eq!(got, all_present());
}

/// "isolate (bisect) with value 2 poisoned: `[(0..3),(4),(0..3),(0,1),(2,3),(2),(3)]`; value 2 ends Failed with the error text as cause; every other value is present."
#[test]
fn c_isolate_bisects_to_poison() {
    assert_eq!(Recovery::default(), Recovery::Isolate, "the default policy");
    let (plan, out) = recovery_plan(Recovery::Isolate, Some(2));
    let (got, run) = run_seq(&plan, out, VALUES);
    assert_eq!(
        rpc_keys(&run, 0),
        vec![
            vec![0, 1, 2, 3],
            vec![4],
            vec![0, 1, 2, 3],
            vec![0, 1],
            vec![2, 3],
            vec![2],
            vec![3],
        ]
    );
    for (x, item) in got.iter().enumerate() {
        if x == 2 {
            assert_eq!(item.kind(), ItemKind::Failed);
            assert_eq!(cause_text(item), Some("poison record 2"));
        } else {
            assert_eq!(*item, Item::Present(x as u32 * 10));
        }
    }
    assert_eq!(run.call_stats[0].exhausted, 1);
}

/// "Budgets are per Grain and never reset"
#[test]
fn c_budgets_are_per_grain_and_never_reset() {
    let work = Call::map("work", |x: u32| x).recovery(Recovery::RetryBatch(1));
    let (plan, out) = Plan::build(|b| {
        let docs = b.source::<Doc, u32>();
        b.output(work.apply(docs))
    })
    .unwrap();
    let raise = || Err(AttemptError::Failed("boom".into()));
    let mut d = HandDriver::new(&plan);
    for x in 0..3u32 {
        d.admit(x as u64, x);
    }
    // Grains 0 and 1 fail together once: each has one failure, within budget.
    let b = d.reserve(0, 2).unwrap();
    assert_eq!(d.report(b.id, raise()), ReportOutcome::Retried { requeued: 2 });
    // The retry group is split across two batches; the count travels with
    // each Grain, so each one's second failure exhausts it.
    let b = d.reserve(0, 1).unwrap();
    assert_eq!(d.paths(&b), vec![common::path(0, &[])]);
    assert_eq!(d.report(b.id, raise()), ReportOutcome::Retried { requeued: 0 });
    let b = d.reserve(0, 4).unwrap();
    assert_eq!(d.paths(&b), vec![common::path(1, &[])]);
    assert_eq!(d.report(b.id, raise()), ReportOutcome::Retried { requeued: 0 });
    // Grain 2 was never in a failed batch: its budget is untouched by theirs.
    let b = d.reserve(0, 4).unwrap();
    assert_eq!(d.paths(&b), vec![common::path(2, &[])]);
    assert_eq!(d.report(b.id, raise()), ReportOutcome::Retried { requeued: 1 });
    let b = d.reserve(0, 4).unwrap();
    assert_eq!(
        d.report(b.id, Ok(vec![ok(2u32)])),
        ReportOutcome::Accepted {
            committed: 1,
            stale: 0
        }
    );
    for key in [0, 1] {
        let item = d.outcome(key).get(out);
        assert_eq!((item.kind(), cause_text(&item)), (ItemKind::Failed, Some("boom")));
    }
    assert_eq!(d.outcome(2).get(out), Item::Present(2));
    let stats = d.eng.call_stats(0);
    assert_eq!(
        (stats.attempt_failures, stats.requeued, stats.exhausted),
        (4, 3, 2)
    );
    d.assert_clean();

    // The same under isolate: a record's failures count across the retry and
    // every bisection step, so the poison ends after its fourth dispatch.
    let (plan, _) = recovery_plan(Recovery::Isolate, Some(2));
    let d = drive(&plan);
    assert_eq!(generations(&d)[&2], vec![1, 2, 3, 4]);
}

/// "generations increase by one per dispatch"
#[test]
fn c_generations_increase_by_one_per_dispatch() {
    let (plan, _) = recovery_plan(Recovery::Isolate, Some(2));
    let d = drive(&plan);
    // The hand driver replays the sequential executor's schedule exactly
    // (a fresh plan: each carries its own first-attempt counter).
    let (plan, out) = recovery_plan(Recovery::Isolate, Some(2));
    let (_, run) = run_seq(&plan, out, VALUES);
    let keys: Vec<Vec<u64>> = d
        .dispatches(0)
        .iter()
        .map(|b| b.iter().map(|p| p.root).collect())
        .collect();
    assert_eq!(keys, rpc_keys(&run, 0));
    let expected = BTreeMap::from([
        (0, vec![1, 2, 3]),
        (1, vec![1, 2, 3]),
        (2, vec![1, 2, 3, 4]),
        (3, vec![1, 2, 3, 4]),
        (4, vec![1]),
    ]);
    assert_eq!(generations(&d), expected);

    for recovery in [Recovery::RetryBatch(2), Recovery::RetryTail(2)] {
        let (plan, _) = recovery_plan(recovery, None);
        let d = drive(&plan);
        let expected = BTreeMap::from([
            (0, vec![1, 2]),
            (1, vec![1, 2]),
            (2, vec![1, 2]),
            (3, vec![1, 2]),
            (4, vec![1]),
        ]);
        assert_eq!(generations(&d), expected, "{recovery:?}");
    }
}

/// `work` whose replica panics on its first batch (once per plan), counting
/// how many replicas its factory made.
fn crashing_plan(crash: bool) -> (Plan, Output<u32>, Arc<AtomicUsize>) {
    let spawned = Arc::new(AtomicUsize::new(0));
    let crash_next = Arc::new(AtomicBool::new(crash));
    let counter = spawned.clone();
    let work = Call::new("work", move || {
        counter.fetch_add(1, Ordering::SeqCst);
        let crash_next = crash_next.clone();
        Ok(BatchFn::new(move |batch: Vec<u32>| {
            if crash_next.swap(false, Ordering::SeqCst) {
                panic!("replica crashed");
            }
            Ok(batch.into_iter().map(|x| Outcome::Ok(x * 10)).collect())
        }))
    })
    .batch_size(4)
    .replicas(1)
    .recovery(Recovery::RetryBatch(1000));
    let (plan, out) = Plan::build(|b| {
        let docs = b.source::<Doc, u32>();
        b.output(work.apply(docs))
    })
    .unwrap();
    (plan, out, spawned)
}

/// "A replica that dies (panic, crash) is replaced; its batch is retried; outputs are identical to a run without the crash."
#[test]
fn c_crashed_replica_is_replaced_output_identical() {
    let (plan, out, spawned) = crashing_plan(false);
    let (reference, run) = run_seq(&plan, out, VALUES);
    assert_eq!(reference, all_present());
    assert_eq!(rpc_keys(&run, 0), vec![vec![0, 1, 2, 3], vec![4]]);
    assert_eq!(spawned.load(Ordering::SeqCst), 1);

    let (plan, out, spawned) = crashing_plan(true);
    let (got, run) = run_seq(&plan, out, VALUES);
    assert_eq!(got, reference);
    assert_eq!(
        rpc_keys(&run, 0),
        vec![vec![0, 1, 2, 3], vec![0, 1, 2, 3], vec![4]]
    );
    assert_eq!(spawned.load(Ordering::SeqCst), 2, "the dead replica was replaced");
    assert_eq!(run.call_stats[0].attempt_failures, 1);

    // Crashes, timeouts and duplicate reports at random: the same outputs.
    for seed in 0..40 {
        let (plan, out, _) = crashing_plan(true);
        let (got, run) = run_with(&plan, out, VALUES, &SimConfig::random(seed));
        assert_eq!(got, reference, "seed {seed}");
        assert_eq!(run.call_stats[0].exhausted, 0);
    }
}
