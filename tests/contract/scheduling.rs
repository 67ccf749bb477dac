//! The nearest-completion reservation policy, checked by counts and
//! completion order under the deterministic `sim` executor (no timing):
//! a small parent admitted right after a big one that published all its
//! children at once is not held behind them; batches stay as full as under
//! FIFO; the preference holds at every level; aging bounds a big parent's
//! wait.

use crate::common;

use rayorch::prelude::*;
use rayorch::sim::{self, SimConfig, SimRun};
use rayorch::{Output, Reservation};

domain!(Doc);
domain!(Page: Doc);
domain!(Line: Page);

/// Doc(pages) -> expand pages -> ocr (batch `b`) -> reduce -> count.
fn two_level(policy: Reservation, b: usize) -> (Plan, Output<u32>) {
    two_level_with(Some(policy), b)
}

/// As `two_level`; `None` leaves the OCR Call's policy at its default.
fn two_level_with(policy: Option<Reservation>, b: usize) -> (Plan, Output<u32>) {
    let render = Call::map("render", |pages: u32| (0..pages).collect::<Vec<u32>>()).batch_size(64);
    let ocr = Call::map("ocr", |p: u32| p).batch_size(b);
    let ocr = match policy {
        Some(policy) => ocr.reservation(policy),
        None => ocr,
    };
    let count = Call::map("count", |v: Vec<u32>| v.len() as u32);
    Plan::build(|bld| {
        let doc = bld.source::<Doc, u32>();
        let page = expand::<Page, _, _>(render.apply(doc));
        bld.output(count.apply(reduce(ocr.apply(page))))
    })
    .expect("valid plan")
}

fn run(plan: &Plan, docs: &[u32], window: usize) -> SimRun {
    let cfg = SimConfig {
        window,
        ..SimConfig::sequential()
    };
    let run = sim::run(plan, common::keyed(docs.iter().copied()), &cfg).expect("run completes");
    common::assert_clean(&run.stats);
    run
}

fn completion_order(run: &SimRun) -> Vec<u64> {
    run.outcomes.iter().map(|o| o.key).collect()
}

/// The OCR batches (by root key of each Grain) in dispatch order.
fn batches_by_root(run: &SimRun, plan: &Plan, call: &str) -> Vec<Vec<u64>> {
    run.rpcs[common::call_index(plan, call)]
        .iter()
        .map(|b| b.iter().map(|p| p.root).collect())
        .collect()
}

#[test]
fn the_default_policy_lets_a_small_parent_through() {
    // No `.reservation(...)`: the default must not hold the 5-page document
    // behind the 1,200 pages published before it.
    let (plan, _) = two_level_with(None, 48);
    let r = run(&plan, &[1200, 5], 64);
    assert_eq!(completion_order(&r), vec![1, 0]);
}

#[test]
fn a_small_parent_admitted_after_a_big_one_completes_first() {
    let docs = [1200, 5];
    let (plan, out) = two_level(Reservation::NearestCompletion, 48);
    let r = run(&plan, &docs, 64);
    assert_eq!(
        completion_order(&r),
        vec![1, 0],
        "the 5-page document finishes first"
    );
    let batches = batches_by_root(&r, &plan, "ocr");
    assert_eq!(
        batches[0].iter().filter(|&&k| k == 1).count(),
        5,
        "all 5 small-parent pages ride in the first OCR batch"
    );
    assert!(batches.iter().skip(1).all(|b| !b.contains(&1)));
    assert_eq!(
        batches.len(),
        1205usize.div_ceil(48),
        "every batch but the last is full"
    );
    assert!(batches[..batches.len() - 1].iter().all(|b| b.len() == 48));
    for o in &r.outcomes {
        let want = docs[o.key as usize];
        assert_eq!(o.get(out), Item::Present(want), "root {}", o.key);
    }
}

#[test]
fn fifo_and_parent_bound_hold_the_small_parent_behind_the_big_one() {
    // The contrast that motivates the policy (and keeps the test above honest).
    for policy in [Reservation::Elastic, Reservation::ParentBound] {
        let (plan, _) = two_level(policy, 48);
        let r = run(&plan, &[1200, 5], 64);
        assert_eq!(completion_order(&r), vec![0, 1], "{policy:?}");
    }
}

#[test]
fn batches_stay_as_full_as_under_fifo() {
    let docs: Vec<u32> = (0..60).map(|i| 1 + (i * 37 % 97)).collect();
    let total: usize = docs.iter().map(|&d| d as usize).sum();
    for policy in [Reservation::Elastic, Reservation::NearestCompletion] {
        let (plan, out) = two_level(policy, 16);
        let r = run(&plan, &docs, 8);
        let ocr = &r.call_stats[common::call_index(&plan, "ocr")];
        assert_eq!(ocr.grains_dispatched as usize, total, "{policy:?}");
        for o in &r.outcomes {
            assert_eq!(o.get(out), Item::Present(docs[o.key as usize]), "{policy:?}");
        }
        // Both keep every batch full whenever B Grains are queued; the count
        // of batches is the same schedule-level figure for both policies.
        let batches = batches_by_root(&r, &plan, "ocr");
        let short = batches.iter().filter(|b| b.len() < 16).count();
        assert!(
            short <= batches.len() / 4,
            "{policy:?}: {short} short batches of {}",
            batches.len()
        );
    }
    let (pf, _) = two_level(Reservation::Elastic, 16);
    let (pn, _) = two_level(Reservation::NearestCompletion, 16);
    let fifo = run(&pf, &docs, 8).call_stats[common::call_index(&pf, "ocr")].rpcs;
    let near = run(&pn, &docs, 8).call_stats[common::call_index(&pn, "ocr")].rpcs;
    assert_eq!(near, fifo, "same number of OCR batches");
}

#[test]
fn the_preference_holds_at_every_level() {
    // Doc -> pages -> lines: the small document (2 pages of 3 lines) is
    // admitted after a big one (40 pages of 30 lines) and finishes first.
    let split = Call::map("split", |pages: u32| {
        (0..pages)
            .map(|_| if pages > 2 { 30u32 } else { 3 })
            .collect::<Vec<u32>>()
    });
    let detect = Call::map("detect", |lines: u32| (0..lines).collect::<Vec<u32>>())
        .batch_size(4)
        .reservation(Reservation::NearestCompletion);
    let rec = Call::map("recognize", |l: u32| l)
        .batch_size(32)
        .reservation(Reservation::NearestCompletion);
    let page_len = Call::map("page_len", |v: Vec<u32>| v.len() as u32);
    let doc_len = Call::map("doc_len", |v: Vec<u32>| v.iter().sum::<u32>());
    let (plan, out) = Plan::build(|bld| {
        let doc = bld.source::<Doc, u32>();
        let page = expand::<Page, _, _>(split.apply(doc));
        let line = expand::<Line, _, _>(detect.apply(page));
        let per_page = page_len.apply(reduce(rec.apply(line)));
        bld.output(doc_len.apply(reduce(per_page)))
    })
    .expect("valid plan");
    let r = run(&plan, &[40, 2], 64);
    assert_eq!(completion_order(&r), vec![1, 0]);
    assert_eq!(r.outcomes[0].get(out), Item::Present(6));
    assert_eq!(r.outcomes[1].get(out), Item::Present(1200));
    // The small document's pages go out in the first detect batch.
    let det = batches_by_root(&r, &plan, "detect");
    assert_eq!(det[0].iter().filter(|&&k| k == 1).count(), 2);
}

#[test]
fn aging_bounds_how_long_a_big_parent_waits() {
    // A 40-page document first, then 100 documents of 4 pages that each fill
    // a batch alone. Shortest-first alone would finish the big one last;
    // aging serves it once the dispatch clock passes its key (2 × 40 Grains).
    let mut docs = vec![40u32];
    docs.extend(std::iter::repeat_n(4, 100));
    let (plan, out) = two_level(Reservation::NearestCompletion, 4);
    let r = run(&plan, &docs, 8);
    let order = completion_order(&r);
    let pos = order
        .iter()
        .position(|&k| k == 0)
        .expect("the big document finished");
    assert!(
        pos < order.len() - 10,
        "the big document finished at position {pos} of {}",
        order.len()
    );
    assert!(pos > 0, "small documents admitted after it did overtake it");
    assert_eq!(r.outcomes[pos].get(out), Item::Present(40));
}

/// Doc(pages, + 1000 if its page 0 fails with a GroupFailure) -> expand
/// pages -> ocr (batch 48, 2 replicas) -> reduce -> count.
fn probed() -> (Plan, Output<u32>) {
    let render = Call::map("render", |d: u32| {
        (0..d % 1000)
            .map(|p| (d >= 1000, p))
            .collect::<Vec<(bool, u32)>>()
    })
    .batch_size(64);
    let ocr = Call::per_record("ocr", |(poisoned, p): (bool, u32)| {
        if poisoned && p == 0 {
            Outcome::GroupFailure(Cause::new("page 0 cannot be read"))
        } else {
            Outcome::Ok(p)
        }
    })
    .batch_size(48)
    .replicas(2);
    let count = Call::map("count", |v: Vec<u32>| v.len() as u32);
    Plan::build(|bld| {
        let doc = bld.source::<Doc, u32>();
        let page = expand::<Page, _, _>(render.apply(doc));
        bld.output(count.apply(reduce(ocr.apply(page))))
    })
    .expect("valid plan")
}

#[test]
fn a_parent_failing_on_its_first_batch_costs_one_batch_while_others_wait() {
    // Three documents of 100 pages publish at once, the first poisoned on
    // page 0; two OCR replicas. The first batch of a parent is its probe:
    // the second replica takes the next parent's pages instead of a
    // second batch of the poisoned one, so its failure comes back with 52
    // of its pages still queued, and they never run.
    let (plan, out) = probed();
    let r = run(&plan, &[1100, 100, 100], 64);
    let batches = batches_by_root(&r, &plan, "ocr");
    let poisoned: usize = batches
        .iter()
        .map(|b| b.iter().filter(|&&k| k == 0).count())
        .sum();
    assert_eq!(poisoned, 48, "one batch of the poisoned document ran");
    assert_eq!(batches[0], vec![0; 48]);
    assert_eq!(
        batches[1],
        vec![1; 48],
        "the second replica took the next document"
    );
    let ocr = &r.call_stats[common::call_index(&plan, "ocr")];
    assert_eq!(ocr.suppressed_before_dispatch, 52);
    assert!(matches!(
        r.by_key()[0].get(out),
        Item::Failed(_) | Item::Suppressed(_)
    ));
    assert_eq!(r.by_key()[1].get(out), Item::Present(100));
    assert_eq!(r.by_key()[2].get(out), Item::Present(100));
}

#[test]
fn a_probe_never_leaves_a_replica_idle() {
    // The poisoned document alone: nothing else could use the second
    // replica, so it takes the document's second batch (work-conserving).
    let (plan, _) = probed();
    let r = run(&plan, &[1100], 64);
    let batches = batches_by_root(&r, &plan, "ocr");
    assert_eq!(batches.len(), 2);
    assert!(batches.iter().all(|b| b.len() == 48 && b.iter().all(|&k| k == 0)));
}
