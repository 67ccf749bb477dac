//! CONFORMANCE.md §B: end-to-end cases, each named after its checklist number.
//!
//! Cases the checklist states for any schedule run once sequentially and then
//! under seeded random schedules; cases about one exact interleaving drive the
//! engine by hand (`common::HandDriver`). Where a parent's outcome would be decided
//! early (a failed child suppresses its reduce), a `hold` Call on the root keeps
//! the root alive so that its other Grains can still be observed.

use crate::common;

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use common::{HandDriver, assert_every_schedule, cause_text, input_values, ok, path, run_seq, run_with};
use rayorch::prelude::*;
use rayorch::sim::{self, SimConfig};
use rayorch::spi::ReportOutcome;
use rayorch::{EntityPath, ItemKind, Output, Reservation};

domain!(Doc);
domain!(Chunk: Doc);
domain!(Page: Doc);
domain!(Region: Page);

/// Seeds for the schedule-independence loops.
const SEEDS: std::ops::Range<u64> = 0..40;

fn sorted(paths: Vec<EntityPath>) -> Vec<EntityPath> {
    let mut p = paths;
    p.sort();
    p
}

#[test]
fn b01_expand_broadcast_filter_reduce() {
    let text = Call::map("text", |(d, _): (String, usize)| d);
    let threshold = Call::map("threshold", |(_, t): (String, usize)| t);
    let chunker = Call::map("chunk", |d: String| {
        d.as_bytes()
            .chunks(2)
            .map(|c| String::from_utf8_lossy(c).into_owned())
            .collect::<Vec<_>>()
    });
    let long_enough = Call::map("long_enough", |(c, t): (String, usize)| c.len() >= t);
    let pair = Call::map("pair", |(d, cs): (String, Vec<String>)| (d, cs));
    let (plan, out) = Plan::build(|b| {
        let docs = b.source::<Doc, (String, usize)>();
        let d = text.apply(docs);
        let t = threshold.apply(docs);
        let chunk = expand::<Chunk, _, _>(chunker.apply(d));
        let t_c = broadcast(t, chunk);
        let mask = long_enough.apply((chunk, t_c));
        let kept = reduce(filter(chunk, mask));
        b.output(pair.apply((d, kept)))
    })
    .unwrap();
    let inputs = vec![("abcde".to_string(), 2usize), ("xy".to_string(), 2)];
    let expected = vec![
        Item::Present(("abcde".to_string(), vec!["ab".to_string(), "cd".to_string()])),
        Item::Present(("xy".to_string(), vec!["xy".to_string()])),
    ];
    assert_every_schedule(&plan, out, &inputs, &expected);
}

/// "Chained filter `filter(values, filter(bools, membership))` with values `[10,20,30]`, bools `[T,F,T]`, membership `[T,T,F]` → `[10, Dropped, Dropped]`."
#[test]
fn b02_chained_filter() {
    let value = Call::map("value", |(v, _, _): (u32, bool, bool)| v);
    let flag = Call::map("flag", |(_, f, _): (u32, bool, bool)| f);
    let member = Call::map("member", |(_, _, m): (u32, bool, bool)| m);
    let (plan, out) = Plan::build(|b| {
        let rows = b.source::<Doc, (u32, bool, bool)>();
        let mask = filter(flag.apply(rows), member.apply(rows));
        b.output(filter(value.apply(rows), mask))
    })
    .unwrap();
    let inputs = vec![(10u32, true, true), (20, false, true), (30, true, false)];
    let expected = vec![Item::Present(10u32), Item::Dropped, Item::Dropped];
    assert_every_schedule(&plan, out, &inputs, &expected);
}

/// "`None`/`Option::None` is an ordinary value and flows through unchanged."
#[test]
fn b03_none_flows_through() {
    type Pairs = Vec<(Option<u32>, Option<u32>)>;
    let maybe = Call::map("maybe", |n: u32| (n % 2 == 1).then_some(n));
    let list = Call::map("list", |n: u32| {
        (0..n)
            .map(|i| (i % 2 == 1).then_some(i))
            .collect::<Vec<Option<u32>>>()
    });
    let keep = Call::map("keep", |_: Option<u32>| true);
    let pair = Call::map("pair", |(a, b): (Option<u32>, Option<u32>)| (a, b));
    // Through an optional input a present `None` arrives as `Some(None)`:
    // only a dropped Item arrives as `None`.
    let seen = Call::map("seen", |x: Option<Option<u32>>| x.is_some());
    let (plan, (root, pairs, present)) = Plan::build(|b| {
        let docs = b.source::<Doc, u32>();
        let m = maybe.apply(docs);
        let page = expand::<Page, _, _>(list.apply(docs));
        let kept = filter(page, keep.apply(page));
        let pairs = reduce(pair.apply((kept, broadcast(m, page))));
        let present = reduce(seen.apply(kept.optional()));
        (b.output(m), b.output(pairs), b.output(present))
    })
    .unwrap();
    let inputs = [2u32, 3, 0];
    let expected_root = vec![Item::Present(None), Item::Present(Some(3)), Item::Present(None)];
    let expected_pairs: Vec<Item<Pairs>> = vec![
        Item::Present(vec![(None, None), (Some(1), None)]),
        Item::Present(vec![(None, Some(3)), (Some(1), Some(3)), (None, Some(3))]),
        Item::Present(vec![]),
    ];
    let expected_present = vec![
        Item::Present(vec![true, true]),
        Item::Present(vec![true, true, true]),
        Item::Present(vec![]),
    ];
    let mut cfgs = vec![SimConfig::sequential()];
    cfgs.extend(SEEDS.map(|s| SimConfig::random(s).without_faults()));
    for cfg in cfgs {
        let (got_root, run) = run_with(&plan, root, inputs, &cfg);
        assert_eq!(got_root, expected_root, "seed {}", cfg.seed);
        let got_pairs: Vec<Item<Pairs>> = run.by_key().iter().map(|o| o.get(pairs)).collect();
        assert_eq!(got_pairs, expected_pairs, "seed {}", cfg.seed);
        let got_present: Vec<Item<Vec<bool>>> = run.by_key().iter().map(|o| o.get(present)).collect();
        assert_eq!(got_present, expected_present, "seed {}", cfg.seed);
    }
}

/// "A dropped input on either side of a two-input Call drops the output and the stage is never called (count calls: zero)."
#[test]
fn b04_dropped_input_never_calls_stage() {
    type Row = (u32, bool, bool);
    let calls = Arc::new(AtomicUsize::new(0));
    let counter = calls.clone();
    let left = Call::map("left", |(v, _, _): Row| v);
    let right = Call::map("right", |(v, _, _): Row| v + 1);
    let keep_left = Call::map("keep_left", |(_, l, _): Row| l);
    let keep_right = Call::map("keep_right", |(_, _, r): Row| r);
    let combine = Call::batch("combine", move |batch: Vec<(u32, u32)>| {
        counter.fetch_add(batch.len(), Ordering::SeqCst);
        Ok(batch.into_iter().map(|(a, b)| Outcome::Ok(a + b)).collect())
    });
    let (plan, out) = Plan::build(|b| {
        let rows = b.source::<Doc, Row>();
        let l = filter(left.apply(rows), keep_left.apply(rows));
        let r = filter(right.apply(rows), keep_right.apply(rows));
        b.output(combine.apply((l, r)))
    })
    .unwrap();
    let combine_i = common::call_index(&plan, "combine");
    // Left dropped, right dropped, both dropped.
    let dropped: Vec<Row> = vec![(1, false, true), (2, true, false), (3, false, false)];
    let mut cfgs = vec![SimConfig::sequential()];
    cfgs.extend(SEEDS.map(|s| SimConfig::random(s).without_faults()));
    for cfg in cfgs {
        let (got, run) = run_with(&plan, out, dropped.clone(), &cfg);
        assert_eq!(got, vec![Item::Dropped; 3], "seed {}", cfg.seed);
        assert_eq!(run.stage_runs[combine_i], 0, "seed {}", cfg.seed);
        assert_eq!(run.call_stats[combine_i].grains_dispatched, 0);
        assert_eq!(calls.load(Ordering::SeqCst), 0, "seed {}", cfg.seed);
    }
    // The counter does count: with both inputs present the stage runs once.
    let (got, run) = run_seq(&plan, out, vec![(4u32, true, true)]);
    assert_eq!(got, vec![Item::Present(9)]);
    assert_eq!((run.stage_runs[combine_i], calls.load(Ordering::SeqCst)), (1, 1));
}

/// "Failure beats drop: two-input Call with one input filtered away and the other a RecordFailure("bad 10") → output `Suppressed("bad 10")`."
#[test]
fn b05_failure_beats_drop() {
    let fail = Call::per_record("fail", |v: u32| {
        if v == 10 {
            Outcome::RecordFailure(format!("bad {v}").into())
        } else {
            Outcome::Ok(v)
        }
    });
    let value = Call::map("value", |v: u32| v);
    let never = Call::map("never", |_: u32| false);
    let failed_left = Call::map("failed_left", |(a, b): (u32, u32)| a + b);
    let failed_right = Call::map("failed_right", |(a, b): (u32, u32)| a + b);
    let (plan, (lr, rl)) = Plan::build(|b| {
        let docs = b.source::<Doc, u32>();
        let f = fail.apply(docs);
        let d = filter(value.apply(docs), never.apply(docs));
        (
            b.output(failed_left.apply((f, d))),
            b.output(failed_right.apply((d, f))),
        )
    })
    .unwrap();
    let mut cfgs = vec![SimConfig::sequential()];
    cfgs.extend(SEEDS.map(|s| SimConfig::random(s).without_faults()));
    for cfg in cfgs {
        let (got, run) = run_with(&plan, lr, [10u32, 11], &cfg);
        let got_rl: Vec<Item<u32>> = run.by_key().iter().map(|o| o.get(rl)).collect();
        for items in [&got, &got_rl] {
            assert_eq!(items[0].kind(), ItemKind::Suppressed, "seed {}", cfg.seed);
            assert_eq!(cause_text(&items[0]), Some("bad 10"));
            assert_eq!(items[1], Item::Dropped, "without a failure the drop stands");
        }
        for name in ["failed_left", "failed_right"] {
            assert_eq!(run.stage_runs[common::call_index(&plan, name)], 0);
        }
    }
}

/// Docs of 3 pages each; page (1,1) fails with a RecordFailure or GroupFailure.
struct PagePlan {
    plan: Plan,
    out: Output<Vec<(u32, u32)>>,
    hold: Output<u32>,
    /// What the downstream `sink` Call received: exactly the present pages.
    sink: Arc<Mutex<Vec<(u32, u32)>>>,
}

fn page_plan(group: bool, batch: usize) -> PagePlan {
    let pages = Call::map("pages", |d: u32| (0..3).map(|p| (d, p)).collect::<Vec<_>>());
    let ocr = Call::per_record("ocr", move |(d, p): (u32, u32)| {
        if (d, p) != (1, 1) {
            Outcome::Ok((d, p))
        } else if group {
            Outcome::GroupFailure("bad page".into())
        } else {
            Outcome::RecordFailure("bad page".into())
        }
    })
    .batch_size(batch);
    let sink = Arc::new(Mutex::new(Vec::new()));
    let seen = sink.clone();
    let sink_call = Call::map("sink", move |x: (u32, u32)| {
        seen.lock().unwrap().push(x);
        x
    });
    let hold = Call::map("hold", |d: u32| d);
    let (plan, (out, hold)) = Plan::build(|b| {
        let docs = b.source::<Doc, u32>();
        let page = expand::<Page, _, _>(pages.apply(docs));
        let out = reduce(sink_call.apply(ocr.apply(page)));
        (b.output(out), b.output(hold.apply(docs)))
    })
    .unwrap();
    PagePlan {
        plan,
        out,
        hold,
        sink,
    }
}

fn all_pages() -> Vec<EntityPath> {
    (0..2).flat_map(|d| (0..3).map(move |p| path(d, &[p]))).collect()
}

/// Run docs `[0,1]` with `hold` kept back until every page-level Grain is done.
fn run_pages(p: &PagePlan) -> HandDriver {
    let mut d = HandDriver::new(&p.plan);
    d.admit(0, 0u32);
    d.admit(1, 1u32);
    let hold = d.call("hold");
    d.settle(&[hold]);
    d.settle(&[]);
    d.assert_clean();
    d
}

fn sink_values(p: &PagePlan) -> Vec<(u32, u32)> {
    let mut v = p.sink.lock().unwrap().clone();
    v.sort();
    v
}

/// "Record vs Group ... RecordFailure → `[(0,0),(0,1),(0,2),(1,0),Failed("bad page"),(1,2)]`."
#[test]
fn b06_record_failure() {
    let p = page_plan(false, 64);
    let d = run_pages(&p);
    let ocr = d.call("ocr");
    assert_eq!(d.dispatches(ocr), vec![all_pages()]);
    assert_eq!(sink_values(&p), vec![(0, 0), (0, 1), (0, 2), (1, 0), (1, 2)]);
    let stats = d.eng.call_stats(ocr);
    assert_eq!((stats.committed, stats.record_failures), (5, 1));
    assert_eq!(stats.suppressed_before_dispatch + stats.suppressed_in_flight, 0);
    assert_eq!(
        d.outcome(0).get(p.out),
        Item::Present(vec![(0, 0), (0, 1), (0, 2)])
    );
    let doc1 = d.outcome(1).get(p.out);
    assert_eq!(
        (doc1.kind(), cause_text(&doc1)),
        (ItemKind::Suppressed, Some("bad page"))
    );
    // A RecordFailure is schedule-independent.
    for seed in SEEDS {
        let (got, _) = run_with(
            &p.plan,
            p.out,
            [0u32, 1],
            &SimConfig::random(seed).without_faults(),
        );
        assert_eq!(got[0], Item::Present(vec![(0, 0), (0, 1), (0, 2)]), "seed {seed}");
        assert_eq!(
            (got[1].kind(), cause_text(&got[1])),
            (ItemKind::Suppressed, Some("bad page"))
        );
    }
}

/// "GroupFailure, batch 64 (all pages in one batch) → doc 0 intact; `(1,0)` Suppressed, `(1,1)` Failed, `(1,2)` Suppressed"
#[test]
fn b06_group_failure_same_batch() {
    let p = page_plan(true, 64);
    let d = run_pages(&p);
    let ocr = d.call("ocr");
    assert_eq!(d.dispatches(ocr), vec![all_pages()], "all pages in one batch");
    // (1,0) and (1,2) succeeded in the stage but never reach the sink.
    assert_eq!(sink_values(&p), vec![(0, 0), (0, 1), (0, 2)]);
    let stats = d.eng.call_stats(ocr);
    assert_eq!(stats.committed, 3);
    assert_eq!(stats.group_failures, 1, "(1,1) Failed");
    assert_eq!(stats.suppressed_in_flight, 2, "(1,0) and (1,2) Suppressed");
    assert_eq!(stats.suppressed_before_dispatch, 0);
    assert_eq!(
        d.outcome(0).get(p.out),
        Item::Present(vec![(0, 0), (0, 1), (0, 2)])
    );
    let doc1 = d.outcome(1).get(p.out);
    assert_eq!(
        (doc1.kind(), cause_text(&doc1)),
        (ItemKind::Suppressed, Some("bad page"))
    );
    assert_eq!(
        d.outcome(1).get(p.hold),
        Item::Present(1),
        "other Calls of the parent run on"
    );
}

/// "GroupFailure, batch 1: `(1,0)` committed before the failure and **stays** present; `(1,2)` is never dispatched (count dispatches)."
#[test]
fn b06_group_failure_batch_1() {
    let p = page_plan(true, 1);
    let d = run_pages(&p);
    let ocr = d.call("ocr");
    assert_eq!(
        d.dispatched(ocr),
        vec![
            path(0, &[0]),
            path(0, &[1]),
            path(0, &[2]),
            path(1, &[0]),
            path(1, &[1])
        ]
    );
    assert_eq!(d.eng.call_stats(ocr).rpcs, 5);
    assert_eq!(
        sink_values(&p),
        vec![(0, 0), (0, 1), (0, 2), (1, 0)],
        "(1,0) stays"
    );
    let stats = d.eng.call_stats(ocr);
    assert_eq!((stats.committed, stats.group_failures), (4, 1));
    assert_eq!(stats.suppressed_before_dispatch, 1, "(1,2) sealed in the queue");
    assert_eq!(stats.suppressed_in_flight, 0);
    let doc1 = d.outcome(1).get(p.out);
    assert_eq!(
        (doc1.kind(), cause_text(&doc1)),
        (ItemKind::Suppressed, Some("bad page"))
    );
}

/// "Nested empty groups: pages(d) = `[0,1]` if d==0 else `[]`; regions(p) = `[]` if p==0 else `[10,11]`; ... on docs `[0,1]` → `[[[],[10,11]],[]]`."
#[test]
fn b07_nested_empty_groups() {
    let pages = Call::map("pages", |d: u32| if d == 0 { vec![0u32, 1] } else { vec![] });
    let regions = Call::map("regions", |p: u32| if p == 0 { vec![] } else { vec![10u32, 11] });
    let (plan, out) = Plan::build(|b| {
        let docs = b.source::<Doc, u32>();
        let page = expand::<Page, _, _>(pages.apply(docs));
        let region = expand::<Region, _, _>(regions.apply(page));
        b.output(reduce(reduce(region)))
    })
    .unwrap();
    let expected = vec![Item::Present(vec![vec![], vec![10, 11]]), Item::Present(vec![])];
    let (got, _) = run_seq(&plan, out, [0u32, 1]);
    assert_eq!(got, expected);
    for seed in SEEDS {
        let (got, _) = run_with(&plan, out, [0u32, 1], &SimConfig::random(seed).without_faults());
        assert_eq!(got, expected, "seed {seed}");
    }
}

/// A doc of `n` pages named "page{i}" through `ocr` and a `sink`, with `hold`.
fn named_pages_plan() -> (Plan, Output<Vec<String>>, Output<u32>) {
    let pages = Call::map("pages", |n: u32| {
        (0..n).map(|i| format!("page{i}")).collect::<Vec<_>>()
    });
    let ocr = Call::map("ocr", |s: String| s);
    let sink = Call::map("sink", |s: String| s);
    let hold = Call::map("hold", |d: u32| d);
    let (plan, (out, held)) = Plan::build(|b| {
        let docs = b.source::<Doc, u32>();
        let page = expand::<Page, _, _>(pages.apply(docs));
        (
            b.output(reduce(sink.apply(ocr.apply(page)))),
            b.output(hold.apply(docs)),
        )
    })
    .unwrap();
    (plan, out, held)
}

/// "Barrier order: pages p0,p1,p2 reserved as `[p0]` and `[p1,p2]`; ... after the barrier → `[Suppressed, Failed, Suppressed]`; if before → `["page0", Failed, Suppressed]`."
#[test]
fn b08_barrier_order() {
    let (plan, out, held) = named_pages_plan();
    for p0_after_barrier in [true, false] {
        let mut d = HandDriver::new(&plan);
        let (ocr, sink, hold) = (d.call("ocr"), d.call("sink"), d.call("hold"));
        d.admit(0, 3u32);
        d.settle(&[ocr, sink, hold]);
        let b0 = d.reserve(ocr, 1).unwrap();
        let b12 = d.reserve(ocr, 2).unwrap();
        assert_eq!(d.paths(&b0), vec![path(0, &[0])]);
        assert_eq!(d.paths(&b12), vec![path(0, &[1]), path(0, &[2])]);
        let second = Ok(vec![
            Outcome::GroupFailure("page group".into()),
            ok("page2".to_string()),
        ]);
        let first = Ok(vec![ok("page0".to_string())]);
        if p0_after_barrier {
            d.report(b12.id, second);
            d.report(b0.id, first);
        } else {
            d.report(b0.id, first);
            d.report(b12.id, second);
        }
        let stats = d.eng.call_stats(ocr).clone();
        assert_eq!(stats.group_failures, 1, "p1 Failed");
        let sunk = d.reserve(sink, 8);
        if p0_after_barrier {
            assert!(sunk.is_none(), "no page is present");
            assert_eq!((stats.committed, stats.suppressed_in_flight), (0, 2));
        } else {
            let sunk = sunk.expect("p0 is present");
            assert_eq!(d.paths(&sunk), vec![path(0, &[0])]);
            assert_eq!(input_values::<String>(&sunk, 0), vec!["page0".to_string()]);
            assert_eq!((stats.committed, stats.suppressed_in_flight), (1, 1));
            let mut sunk = sunk;
            let r = d.execute(&mut sunk);
            d.report(sunk.id, r);
        }
        d.settle(&[]);
        let doc = d.outcome(0);
        assert_eq!(doc.get(out).kind(), ItemKind::Suppressed);
        assert_eq!(cause_text(&doc.get(out)), Some("page group"));
        assert_eq!(doc.get(held), Item::Present(3));
        d.assert_clean();
    }
}

/// "A barrier closes a waiting sibling: `combine(left(p), right(p))`; p0's combine reports GroupFailure while `right(p1)` is still in flight → combine(p1) is sealed Suppressed when right(p1) arrives, never dispatched."
#[test]
fn b09_barrier_closes_waiting_sibling() {
    let pages = Call::map("pages", |n: u32| (0..n).collect::<Vec<u32>>());
    let left = Call::map("left", |p: u32| p);
    let right = Call::map("right", |p: u32| p);
    let combine = Call::map("combine", |(l, r): (u32, u32)| l + r);
    let hold = Call::map("hold", |d: u32| d);
    let (plan, (out, held)) = Plan::build(|b| {
        let docs = b.source::<Doc, u32>();
        let page = expand::<Page, _, _>(pages.apply(docs));
        let both = combine.apply((left.apply(page), right.apply(page)));
        (b.output(reduce(both)), b.output(hold.apply(docs)))
    })
    .unwrap();
    let mut d = HandDriver::new(&plan);
    let (right_i, combine_i, hold_i) = (d.call("right"), d.call("combine"), d.call("hold"));
    d.admit(0, 2u32);
    d.settle(&[right_i, combine_i, hold_i]);
    d.step(right_i, 1).unwrap();
    let mut r1 = d.reserve(right_i, 1).unwrap();
    assert_eq!(d.paths(&r1), vec![path(0, &[1])]);
    let c0 = d.reserve(combine_i, 4).unwrap();
    assert_eq!(d.paths(&c0), vec![path(0, &[0])], "combine(p1) is still waiting");
    d.report(c0.id, Ok(vec![Outcome::GroupFailure("combine broken".into())]));
    assert_eq!(d.eng.call_stats(combine_i).suppressed_before_dispatch, 0);
    let r = d.execute(&mut r1);
    d.report(r1.id, r);
    let stats = d.eng.call_stats(combine_i).clone();
    assert_eq!(
        stats.suppressed_before_dispatch, 1,
        "sealed when right(p1) arrived"
    );
    assert!(d.reserve(combine_i, 4).is_none(), "never dispatched");
    assert_eq!((stats.rpcs, stats.grains_dispatched), (1, 1));
    d.settle(&[]);
    let doc = d.outcome(0);
    assert_eq!(cause_text(&doc.get(out)), Some("combine broken"));
    assert_eq!(doc.get(out).kind(), ItemKind::Suppressed);
    assert_eq!(doc.get(held), Item::Present(2));
    assert_eq!(d.dispatched(combine_i), vec![path(0, &[0])]);
    d.assert_clean();
}

/// "Generation fence: after a retry, a report carrying the old generation is rejected (counted as stale) and the retried attempt's report commits."
#[test]
fn b10_generation_fence() {
    let work = Call::map("work", |x: u32| x).recovery(Recovery::RetryBatch(3));
    let (plan, out) = Plan::build(|b| {
        let docs = b.source::<Doc, u32>();
        b.output(work.apply(docs))
    })
    .unwrap();
    let mut d = HandDriver::new(&plan);
    d.admit(0, 1u32);
    let old = d.reserve(0, 1).unwrap();
    assert_eq!(old.grains[0].generation, 1);
    // The executor gives up on the first attempt (say, a timeout) ...
    assert_eq!(
        d.report(
            old.id,
            Err(rayorch::spi::AttemptError::Failed("timed out".into()))
        ),
        ReportOutcome::Retried { requeued: 1 }
    );
    // ... and its real report turns up before and after the retry is dispatched.
    assert_eq!(d.report(old.id, Ok(vec![ok(100u32)])), ReportOutcome::Rejected);
    let retry = d.reserve(0, 1).unwrap();
    assert_eq!(retry.grains[0].generation, 2);
    assert_eq!(d.report(old.id, Ok(vec![ok(100u32)])), ReportOutcome::Rejected);
    assert_eq!(d.eng.stats().rejected_reports, 2);
    assert_eq!(
        d.report(retry.id, Ok(vec![ok(200u32)])),
        ReportOutcome::Accepted {
            committed: 1,
            stale: 0
        }
    );
    assert_eq!(d.outcome(0).get(out), Item::Present(200));
    assert_eq!(d.eng.call_stats(0).committed, 1);
    d.assert_clean();
}

/// "Aligned expand of two outputs with different lengths (2 vs 3) is rejected as a whole: no Expansion, no children, the Grain's outcome is Failed with a cause that says "cardinality mismatch"."
#[test]
fn b11_aligned_cardinality_mismatch() {
    let lists = Call::map("lists", |n: u32| {
        (
            vec![0u32, 1],
            (0..n).map(|i| format!("s{i}")).collect::<Vec<String>>(),
        )
    });
    let combine = Call::map("combine", |(a, s): (u32, String)| format!("{s}:{a}"));
    let (plan, (out, nums_out)) = Plan::build(|b| {
        let docs = b.source::<Doc, u32>();
        let (nums, names) = lists.apply_split(docs);
        let (num, name) = expand_aligned::<Page, _, _, _>((nums, names));
        // The producing Grain's own Item, to read its outcome.
        (b.output(reduce(combine.apply((num, name)))), b.output(nums))
    })
    .unwrap();
    let (lists_i, combine_i) = (
        common::call_index(&plan, "lists"),
        common::call_index(&plan, "combine"),
    );
    let mut cfgs = vec![SimConfig::sequential()];
    cfgs.extend(SEEDS.map(|s| SimConfig::random(s).without_faults()));
    for cfg in cfgs {
        let (got, run) = run_with(&plan, out, [3u32, 2], &cfg);
        let roots = run.by_key();
        // The Grain that produced the lists is Failed, located at itself.
        let grain = roots[0].get(nums_out);
        assert_eq!(grain.kind(), ItemKind::Failed, "seed {}", cfg.seed);
        let cause = grain.cause().unwrap();
        assert!(cause.message().contains("cardinality mismatch"), "{cause}");
        assert!(cause.message().contains("[2, 3]"), "{cause}");
        assert_eq!(cause.context(), Some("Call `lists` on Doc 0"));
        assert_eq!(run.call_stats[lists_i].record_failures, 1);
        assert_eq!(run.call_stats[lists_i].committed, 1);
        // Its Expansion has no children, so the reduce over it is
        // Suppressed by the Grain's failure (§A: "Failed → Suppressed").
        assert_eq!(got[0].kind(), ItemKind::Suppressed, "seed {}", cfg.seed);
        assert_eq!(got[0].cause(), Some(cause));
        assert_eq!(roots[1].get(nums_out), Item::Present(vec![0u32, 1]));
        assert_eq!(
            got[1],
            Item::Present(vec!["s0:0".to_string(), "s1:1".to_string()])
        );
        // Root 0 has no children: no page Grain of it ever runs.
        let roots: BTreeSet<u64> = run.rpcs[combine_i].iter().flatten().map(|p| p.root).collect();
        if cfg.record_rpcs {
            assert_eq!(roots, BTreeSet::from([1]));
        }
        assert_eq!(run.call_stats[combine_i].grains_dispatched, 2);
    }
}

/// "A report batch that is malformed anywhere (wrong number of outcomes) publishes nothing, installs no barrier; the Grains fail with a contract error cause that names the Call, the stage and the expected/actual counts. Not retried."
#[test]
fn b12_malformed_report_publishes_nothing() {
    let pages = Call::map("pages", |n: u32| (0..n).collect::<Vec<u32>>());
    // One GroupFailure and successes, but one outcome short.
    let ocr = Call::batch("ocr", |batch: Vec<u32>| {
        let mut out: Vec<Outcome<u32>> = batch.iter().map(|&p| Outcome::Ok(p)).collect();
        if batch.len() > 1 {
            out[0] = Outcome::GroupFailure("never installed".into());
            out.pop();
        }
        Ok(out)
    })
    .recovery(Recovery::RetryBatch(5));
    let sink = Call::map("sink", |p: u32| p);
    let hold = Call::map("hold", |d: u32| d);
    let (plan, (out, held)) = Plan::build(|b| {
        let docs = b.source::<Doc, u32>();
        let page = expand::<Page, _, _>(pages.apply(docs));
        (
            b.output(reduce(sink.apply(ocr.apply(page)))),
            b.output(hold.apply(docs)),
        )
    })
    .unwrap();
    let mut d = HandDriver::new(&plan);
    let (ocr_i, sink_i, hold_i) = (d.call("ocr"), d.call("sink"), d.call("hold"));
    d.admit(0, 4u32);
    d.settle(&[ocr_i, sink_i, hold_i]);
    assert_eq!(
        d.step(ocr_i, 3),
        Some(ReportOutcome::Accepted {
            committed: 0,
            stale: 0
        })
    );
    let stats = d.eng.call_stats(ocr_i).clone();
    assert_eq!(stats.contract_errors, 3);
    assert_eq!(
        (
            stats.committed,
            stats.group_failures,
            stats.attempt_failures,
            stats.requeued
        ),
        (0, 0, 0, 0),
        "nothing published, no barrier, not retried"
    );
    // No barrier: the queued sibling of the same parent still runs and commits.
    d.settle(&[hold_i]);
    assert_eq!(
        d.dispatches(ocr_i),
        vec![
            vec![path(0, &[0]), path(0, &[1]), path(0, &[2])],
            vec![path(0, &[3])]
        ]
    );
    assert_eq!(d.eng.call_stats(ocr_i).committed, 1);
    assert_eq!(d.dispatched(sink_i), vec![path(0, &[3])]);
    d.settle(&[]);
    let doc = d.outcome(0);
    assert_eq!(doc.get(held), Item::Present(4));
    let item = doc.get(out);
    assert_eq!(item.kind(), ItemKind::Suppressed);
    let msg = cause_text(&item).unwrap();
    let stage = plan.calls()[ocr_i].runtime.stage_name();
    assert!(msg.contains("`ocr`"), "names the Call: {msg}");
    assert!(msg.contains(stage), "names the stage `{stage}`: {msg}");
    let words: Vec<&str> = msg.split(|c: char| !c.is_ascii_alphanumeric()).collect();
    assert!(
        words.contains(&"2") && words.contains(&"3"),
        "names both counts: {msg}"
    );
    d.assert_clean();
}

/// "Streaming: after the first render Grain commits, its pages can be dispatched while the second render Grain is still ready (no stage barrier)."
#[test]
fn b13_streaming() {
    let render = Call::map("render", |n: u32| (0..n).collect::<Vec<u32>>()).batch_size(1);
    let ocr = Call::map("ocr", |p: u32| p * 10);
    let (plan, out) = Plan::build(|b| {
        let docs = b.source::<Doc, u32>();
        b.output(reduce(ocr.apply(expand::<Page, _, _>(render.apply(docs)))))
    })
    .unwrap();
    let mut d = HandDriver::new(&plan);
    let (render_i, ocr_i) = (d.call("render"), d.call("ocr"));
    d.admit(0, 2u32);
    d.admit(1, 3u32);
    d.step(render_i, 1).unwrap();
    assert!(d.eng.may_have_ready(render_i), "the second render Grain is ready");
    let pages = d.reserve(ocr_i, 8).unwrap();
    assert_eq!(d.paths(&pages), vec![path(0, &[0]), path(0, &[1])]);
    let mut pages = pages;
    let r = d.execute(&mut pages);
    d.report(pages.id, r);
    // Doc 0 is complete before doc 1 is even rendered.
    assert_eq!(d.outcome(0).get(out), Item::Present(vec![0, 10]));
    assert_eq!(d.dispatches(render_i), vec![vec![path(0, &[])]]);
    d.settle(&[]);
    assert_eq!(
        d.dispatches(render_i),
        vec![vec![path(0, &[])], vec![path(1, &[])]]
    );
    assert_eq!(d.outcome(1).get(out), Item::Present(vec![0, 10, 20]));
    d.assert_clean();
}

/// "Per-Call FIFO without scanning: 2,000 ready Grains for call A and 8 for call B; reserving 4 from B touches 4 entries."
#[test]
fn b14_per_call_fifo_without_scanning() {
    let keep = Call::map("keep", |x: u32| x < 8);
    let a = Call::map("a", |x: u32| x);
    let b_call = Call::map("b", |x: u32| x);
    let (plan, _) = Plan::build(|b| {
        let docs = b.source::<Doc, u32>();
        (
            b.output(a.apply(docs)),
            b.output(b_call.apply(filter(docs, keep.apply(docs)))),
        )
    })
    .unwrap();
    let mut d = HandDriver::new(&plan);
    let (keep_i, a_i, b_i) = (d.call("keep"), d.call("a"), d.call("b"));
    for x in 0..2000u32 {
        d.admit(x as u64, x);
    }
    d.step(keep_i, 2000).unwrap();
    assert_eq!(d.eng.call_stats(b_i).queue_touches, 0);
    let batch = d.reserve(b_i, 4).unwrap();
    let roots: Vec<u64> = d.paths(&batch).iter().map(|p| p.root).collect();
    assert_eq!(roots, vec![0, 1, 2, 3]);
    assert_eq!(d.eng.call_stats(b_i).queue_touches, 4);
    assert_eq!(
        d.eng.call_stats(a_i).queue_touches,
        0,
        "A's 2,000 entries untouched"
    );
    // And the long queue is served from its head, in O(B) as well.
    d.reserve(a_i, 4).unwrap();
    assert_eq!(d.eng.call_stats(a_i).queue_touches, 4);
    d.assert_clean();
}

/// A plan whose `prep` Call (batch 1) lets the test choose the order in
/// which page Grains become ready for `ocr`.
fn prep_plan(ocr_batch: usize) -> (Plan, Output<Vec<u32>>, Output<u32>) {
    let pages = Call::map("pages", |n: u32| (0..n).collect::<Vec<u32>>());
    // B15/B16 specify the FIFO queue (`Elastic`); the default policy serves
    // the parent with the fewest queued Grains first.
    let prep = Call::map("prep", |p: u32| p)
        .batch_size(1)
        .reservation(Reservation::Elastic);
    let ocr = Call::map("ocr", |p: u32| p)
        .batch_size(ocr_batch)
        .reservation(Reservation::Elastic);
    let hold = Call::map("hold", |d: u32| d);
    let (plan, (out, held)) = Plan::build(|b| {
        let docs = b.source::<Doc, u32>();
        let page = expand::<Page, _, _>(pages.apply(docs));
        (
            b.output(reduce(ocr.apply(prep.apply(page)))),
            b.output(hold.apply(docs)),
        )
    })
    .unwrap();
    (plan, out, held)
}

/// Reserve every ready `prep` Grain singly, then commit them in `order`
/// (indices into the reservation order).
fn commit_prep_in_order(d: &mut HandDriver, order: &[usize]) {
    let prep = d.call("prep");
    let mut batches = Vec::new();
    while let Some(b) = d.reserve(prep, 1) {
        batches.push(Some(b));
    }
    for &i in order {
        let mut b = batches[i].take().expect("each batch once");
        let r = d.execute(&mut b);
        d.report(b.id, r);
    }
}

/// "Cross-parent FIFO: ready parents `[A,B,A,B]`, batch 3 → `[g0,g1,g2]` then `[g3]`."
#[test]
fn b15_cross_parent_fifo() {
    let (plan, out, _) = prep_plan(3);
    let mut d = HandDriver::new(&plan);
    let (prep, ocr) = (d.call("prep"), d.call("ocr"));
    d.admit(0, 2u32); // A
    d.admit(1, 2u32); // B
    d.settle(&[prep, ocr]);
    // prep reserves A0, A1, B0, B1; committing A0, B0, A1, B1 queues ocr as [A,B,A,B].
    commit_prep_in_order(&mut d, &[0, 2, 1, 3]);
    let first = d.reserve(ocr, 3).unwrap();
    assert_eq!(d.paths(&first), vec![path(0, &[0]), path(1, &[0]), path(0, &[1])]);
    let second = d.reserve(ocr, 3).unwrap();
    assert_eq!(d.paths(&second), vec![path(1, &[1])]);
    for mut b in [first, second] {
        let r = d.execute(&mut b);
        d.report(b.id, r);
    }
    d.settle(&[]);
    assert_eq!(d.outcome(0).get(out), Item::Present(vec![0, 1]));
    assert_eq!(d.outcome(1).get(out), Item::Present(vec![0, 1]));
    d.assert_clean();
}

/// "Barrier sealing at reservation: ready parents `[X,X,L,X]`, barrier on X, batch 4 → dispatched batch is `[g2]`; g0,g1,g3 sealed Suppressed."
#[test]
fn b16_barrier_sealing_at_reservation() {
    let (plan, out, held) = prep_plan(4);
    let mut d = HandDriver::new(&plan);
    let (prep, ocr, hold) = (d.call("prep"), d.call("ocr"), d.call("hold"));
    d.admit(0, 4u32); // X
    d.admit(1, 1u32); // L
    d.settle(&[prep, ocr, hold]);
    let mut batches = Vec::new();
    while let Some(b) = d.reserve(prep, 1) {
        batches.push(b);
    }
    let mut run_prep = |d: &mut HandDriver, i: usize| {
        let r = d.execute(&mut batches[i]);
        d.report(batches[i].id, r);
    };
    // X0 first: it is the sibling whose GroupFailure raises the barrier.
    run_prep(&mut d, 0);
    let x0 = d.reserve(ocr, 1).unwrap();
    assert_eq!(d.paths(&x0), vec![path(0, &[0])]);
    // Then ocr's queue becomes [X1, X2, L0, X3].
    for i in [1, 2, 4, 3] {
        run_prep(&mut d, i);
    }
    d.report(x0.id, Ok(vec![Outcome::GroupFailure("x broken".into())]));
    let batch = d.reserve(ocr, 4).unwrap();
    assert_eq!(
        d.paths(&batch),
        vec![path(1, &[0])],
        "only L's Grain is dispatched"
    );
    assert_eq!(d.eng.call_stats(ocr).suppressed_before_dispatch, 3);
    let mut batch = batch;
    let r = d.execute(&mut batch);
    d.report(batch.id, r);
    d.settle(&[]);
    assert_eq!(
        sorted(d.dispatched(ocr)),
        vec![path(0, &[0]), path(1, &[0])],
        "X1..X3 never dispatched"
    );
    let x = d.outcome(0);
    assert_eq!(
        (x.get(out).kind(), cause_text(&x.get(out))),
        (ItemKind::Suppressed, Some("x broken"))
    );
    assert_eq!(x.get(held), Item::Present(4));
    assert_eq!(d.outcome(1).get(out), Item::Present(vec![0]));
    d.assert_clean();
}

/// The sequential executor and the hand driver agree on a fixed run; guards
/// the helper the interleaving cases rely on.
#[test]
fn driver_matches_sequential_executor() {
    let p = page_plan(false, 2);
    let d = run_pages(&p);
    let run = sim::run(&p.plan, common::keyed([0u32, 1]), &SimConfig::sequential()).unwrap();
    let ocr = d.call("ocr");
    assert_eq!(d.dispatches(ocr), run.rpcs[ocr]);
    for key in 0..2 {
        assert_eq!(d.outcome(key).get(p.out), run.by_key()[key as usize].get(p.out));
    }
}
