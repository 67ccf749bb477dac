//! `reduce!(x, keep_failed)` (issue 10, item 6): a parent whose children
//! partly failed is kept, its list holding `Err(cause)` where a child failed.
//!
//! Docs of three pages each run through the sequential and random `sim`
//! schedules and through `Runner`: doc 0 has page (0,2) filtered away (left
//! out), doc 1 has page (1,1) failing with a RecordFailure or GroupFailure,
//! doc 2's page list itself fails (a failed Expansion still suppresses the
//! parent), doc 3 has no pages (an empty list).

use crate::common;

use std::sync::{Arc, Mutex};

use common::{cause_text, run_with};
use rayorch::prelude::*;
use rayorch::reduce_keep_failed;
use rayorch::sim::SimConfig;
use rayorch::{Cause, ItemKind, Output};

domain!(Doc);
domain!(Page: Doc);

type Kept = Vec<Result<(u32, u32), Cause>>;
/// One root as the `Runner` test's sink saw it.
type Root = (u64, Item<Kept>, Item<usize>);

struct KeepPlan {
    plan: Plan,
    kept: Output<Kept>,
    /// How many failures each doc's list carries: a Call downstream of the
    /// kept list runs, so the parent is not suppressed.
    failures: Output<usize>,
}

fn keep_plan(group: bool) -> KeepPlan {
    let pages = Call::per_record("pages", |d: u32| match d {
        2 => Outcome::RecordFailure("no page list".into()),
        3 => Outcome::Ok(Vec::new()),
        _ => Outcome::Ok((0..3).map(|p| (d, p)).collect::<Vec<_>>()),
    });
    let keep = Call::map("keep", |page: (u32, u32)| page != (0, 2));
    let ocr = Call::per_record("ocr", move |page: (u32, u32)| {
        if page != (1, 1) {
            Outcome::Ok(page)
        } else if group {
            Outcome::GroupFailure("bad page".into())
        } else {
            Outcome::RecordFailure("bad page".into())
        }
    });
    let count = Call::map("count", |k: Kept| k.iter().filter(|r| r.is_err()).count());
    let (plan, (kept, failures)) = Plan::build(|b| {
        let docs = b.source::<Doc, u32>();
        let page = expand::<Page, _, _>(pages.apply(docs));
        let page = filter(page, keep.apply(page));
        let kept = reduce_keep_failed(ocr.apply(page));
        (b.output(kept), b.output(count.apply(kept)))
    })
    .expect("a keep_failed reduce builds");
    KeepPlan { plan, kept, failures }
}

fn ok_pages(d: u32, ps: &[u32]) -> Kept {
    ps.iter().map(|&p| Ok((d, p))).collect()
}

/// The values, or `Err` texts, of a present kept list.
fn texts(k: &Item<Kept>) -> Vec<Result<(u32, u32), String>> {
    k.clone()
        .present()
        .expect("the parent is kept")
        .into_iter()
        .map(|r| r.map_err(|c| c.message().to_string()))
        .collect()
}

/// Docs 0, 2 and 3, whatever the failure kind and schedule.
fn check_common(kept: &[Item<Kept>], failures: &[Item<usize>], what: &str) {
    assert_eq!(
        kept[0],
        Item::Present(ok_pages(0, &[0, 1])),
        "{what}: a dropped page is left out"
    );
    assert_eq!(failures[0], Item::Present(0), "{what}");
    for (kind, cause) in [
        (kept[2].kind(), cause_text(&kept[2])),
        (failures[2].kind(), cause_text(&failures[2])),
    ] {
        assert_eq!(
            (kind, cause),
            (ItemKind::Suppressed, Some("no page list")),
            "{what}: a failed Expansion suppresses the parent"
        );
    }
    assert_eq!(
        kept[3],
        Item::Present(Vec::new()),
        "{what}: no pages, an empty list"
    );
    assert_eq!(failures[3], Item::Present(0), "{what}");
}

/// Docs 0..4 once sequentially and under seeded random schedules: each run
/// checked by [`check_common`], then by `check` (doc 1).
fn each_schedule(p: &KeepPlan, check: impl Fn(&[Item<Kept>], &[Item<usize>], &str)) {
    let configs = std::iter::once(SimConfig::sequential())
        .chain((0..30).map(|s| SimConfig::random(s).without_faults()));
    for cfg in configs {
        let what = format!("seed {}", cfg.seed);
        let (kept, run) = run_with(&p.plan, p.kept, [0u32, 1, 2, 3], &cfg);
        let failures: Vec<_> = run.by_key().iter().map(|o| o.get(p.failures)).collect();
        check_common(&kept, &failures, &what);
        check(&kept, &failures, &what);
    }
}

#[test]
fn record_failure_is_kept_at_its_ordinal() {
    each_schedule(&keep_plan(false), |kept, failures, what| {
        assert_eq!(
            texts(&kept[1]),
            vec![Ok((1, 0)), Err("bad page".to_string()), Ok((1, 2))],
            "{what}"
        );
        assert_eq!(failures[1], Item::Present(1), "{what}");
    });
}

#[test]
fn group_failure_is_kept_with_its_suppressed_siblings() {
    each_schedule(&keep_plan(true), |kept, failures, what| {
        // Which siblings the barrier reaches depends on the batching; each
        // one is either its own value or the group's cause, at its ordinal.
        let doc1 = texts(&kept[1]);
        assert_eq!(doc1.len(), 3, "{what}");
        assert_eq!(doc1[1], Err("bad page".to_string()), "{what}");
        for (p, r) in doc1.iter().enumerate() {
            assert!(
                *r == Ok((1, p as u32)) || *r == Err("bad page".to_string()),
                "{what}: page {p} is {r:?}"
            );
        }
        let n_err = doc1.iter().filter(|r| r.is_err()).count();
        assert_eq!(failures[1], Item::Present(n_err), "{what}");
    });
}

#[test]
fn runner_keeps_the_failures() {
    for group in [false, true] {
        let p = keep_plan(group);
        let got: Arc<Mutex<Vec<Root>>> = Arc::default();
        let sink = got.clone();
        let (kept, failures) = (p.kept, p.failures);
        let summary = Runner::new(&p.plan)
            .run(
                (0..4u32).map(|d| (u64::from(d), d)),
                Callback(move |o: &RootOutcome| {
                    sink.lock().unwrap().push((o.key, o.get(kept), o.get(failures)));
                }),
            )
            .expect("the run completes");
        let mut got = got.lock().unwrap().clone();
        got.sort_by_key(|g| g.0);
        assert_eq!(got.len(), 4);
        let kept: Vec<_> = got.iter().map(|g| g.1.clone()).collect();
        let failures: Vec<_> = got.iter().map(|g| g.2.clone()).collect();
        check_common(&kept, &failures, &format!("Runner, group {group}"));
        let doc1 = texts(&kept[1]);
        assert_eq!(doc1[1], Err("bad page".to_string()));
        if !group {
            assert_eq!(doc1, vec![Ok((1, 0)), Err("bad page".to_string()), Ok((1, 2))]);
        }
        assert_eq!((summary.roots, summary.present), (4, 3), "{summary:?}");
    }
}
