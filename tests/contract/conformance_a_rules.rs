//! CONFORMANCE.md §A through the engine: the rules that need live lineage
//! (broadcast, Expansions, early reduce decisions, Grain phases). The pure
//! rules are tested exhaustively in `rayorch-runtime/src/engine/propagation_rules.rs`.

use crate::common;

use common::{HandDriver, assert_clean, ok, path, rpc_keys, run_seq, run_with};
use rayorch::prelude::*;
use rayorch::sim::SimConfig;
use rayorch::spi::{AttemptError, InvalidTransition, Phase, ReportOutcome, Transition};
use rayorch::{ItemKind, Output, RunError};

domain!(Doc);
domain!(Page: Doc);
domain!(Region: Page);

type Broadcasts = (Vec<u32>, Vec<Vec<u32>>);

/// x % 4 picks the ancestor's Item: 0 present, 1 Failed, 2 Dropped, 3 Suppressed.
fn broadcast_plan() -> (Plan, Output<Broadcasts>) {
    let pre = Call::per_record("pre", |x: u32| {
        if x % 4 == 3 {
            Outcome::RecordFailure(format!("pre {x}").into())
        } else {
            Outcome::Ok(x)
        }
    });
    let anc = Call::per_record("anc", |x: u32| {
        if x % 4 == 1 {
            Outcome::RecordFailure(format!("bad {x}").into())
        } else {
            Outcome::Ok(x * 100)
        }
    });
    let keep = Call::map("keep", |x: u32| x % 4 != 2);
    let pages = Call::map("pages", |x: u32| vec![x; (x % 3) as usize + 1]);
    let regions = Call::map("regions", |p: u32| vec![p; 2]);
    let pair = Call::map("pair", |(a, b): (Vec<u32>, Vec<Vec<u32>>)| (a, b));
    Plan::build(|b| {
        let docs = b.source::<Doc, u32>();
        let value = filter(anc.apply(pre.apply(docs)), keep.apply(docs));
        let page = expand::<Page, _, _>(pages.apply(docs));
        let region = expand::<Region, _, _>(regions.apply(page));
        // Two levels down as well as one: the copy follows the whole path.
        let on_pages = reduce(broadcast(value, page));
        let on_regions = reduce(reduce(broadcast(value, region)));
        b.output(pair.apply((on_pages, on_regions)))
    })
    .unwrap()
}

fn broadcast_expected(xs: &[u32]) -> Vec<Item<Broadcasts>> {
    xs.iter()
        .map(|&x| {
            let n = (x % 3) as usize + 1;
            match x % 4 {
                0 => Item::Present((vec![x * 100; n], vec![vec![x * 100; 2]; n])),
                1 => Item::Suppressed(format!("bad {x}").into()),
                // Every target is Dropped, so every reduce sees zero survivors.
                2 => Item::Present((vec![], vec![vec![]; n])),
                _ => Item::Suppressed(format!("pre {x}").into()),
            }
        })
        .collect()
}

/// Kinds and message texts: causes also carry a location, which differs by design.
fn messages(items: &[Item<Broadcasts>]) -> Vec<Result<Broadcasts, (ItemKind, String)>> {
    items
        .iter()
        .map(|i| match i {
            Item::Present(v) => Ok(v.clone()),
            other => Err((
                other.kind(),
                other.cause().map(|c| c.message().to_string()).unwrap_or_default(),
            )),
        })
        .collect()
}

/// "Broadcast: each target copies the ancestor Item's outcome, value and cause."
#[test]
fn a_broadcast_copies_ancestor_item() {
    let (plan, out) = broadcast_plan();
    let xs: Vec<u32> = (0..12).collect();
    let expected = messages(&broadcast_expected(&xs));
    let (got, _) = run_seq(&plan, out, xs.clone());
    assert_eq!(messages(&got), expected);
    for seed in 0..40 {
        let (got, _) = run_with(&plan, out, xs.clone(), &SimConfig::random(seed).without_faults());
        assert_eq!(messages(&got), expected, "seed {seed}");
    }
    // Both orders for sure: the ancestor resolved before the children exist
    // (copied at expansion) and after (pushed down to existing children).
    for ancestor_first in [true, false] {
        let mut d = HandDriver::new(&plan);
        for &x in &xs {
            d.admit(x as u64, x);
        }
        let first: Vec<usize> = if ancestor_first {
            vec![d.call("pages"), d.call("regions")]
        } else {
            vec![d.call("pre"), d.call("anc"), d.call("keep")]
        };
        d.settle(&first);
        d.settle(&[]);
        let got: Vec<Item<Broadcasts>> = xs.iter().map(|&x| d.outcome(x as u64).get(out)).collect();
        assert_eq!(messages(&got), expected, "ancestor first: {ancestor_first}");
        d.assert_clean();
    }
}

/// "Expand: present → Succeeded(children) (empty is legal and terminal); Dropped → Expansion Dropped; Failed/Suppressed → Expansion Failed. No children exist in the last two cases."
#[test]
fn a_expand_through_engine() {
    let lists = Call::per_record("lists", |x: u32| match x % 4 {
        0 => Outcome::Ok(vec![x, x + 1]),
        1 => Outcome::Ok(vec![]),
        3 => Outcome::RecordFailure(format!("no list {x}").into()),
        _ => Outcome::Ok(vec![99]),
    });
    let keep = Call::map("keep", |x: u32| x % 4 != 2);
    let work = Call::map("work", |p: u32| p * 10);
    let (plan, out) = Plan::build(|b| {
        let docs = b.source::<Doc, u32>();
        let page = expand::<Page, _, _>(filter(lists.apply(docs), keep.apply(docs)));
        b.output(reduce(work.apply(page)))
    })
    .unwrap();
    let work_i = common::call_index(&plan, "work");
    let (got, run) = run_seq(&plan, out, [0u32, 1, 2, 3, 4]);
    assert_eq!(got[0], Item::Present(vec![0, 10]));
    assert_eq!(got[1], Item::Present(vec![]), "an empty Expansion is terminal");
    assert_eq!(got[2], Item::Dropped);
    assert_eq!(got[3].kind(), ItemKind::Suppressed);
    assert_eq!(common::cause_text(&got[3]), Some("no list 3"));
    assert_eq!(got[4], Item::Present(vec![40, 50]));
    // Only the present, non-empty Expansions have children to run.
    assert_eq!(
        run.rpcs[work_i].concat(),
        vec![path(0, &[0]), path(0, &[1]), path(4, &[0]), path(4, &[1])]
    );
    assert_eq!(rpc_keys(&run, work_i).concat(), vec![0, 0, 4, 4]);
    for seed in 0..30 {
        let (again, _) = run_with(
            &plan,
            out,
            [0u32, 1, 2, 3, 4],
            &SimConfig::random(seed).without_faults(),
        );
        assert_eq!(again, got, "seed {seed}");
    }
}

/// "Reduce: ... any member Failed/Suppressed → Suppressed (even while others are pending)"
#[test]
fn a_reduce_failed_member_decides_while_others_pending() {
    let pages = Call::map("pages", |n: u32| (0..n).collect::<Vec<u32>>());
    let ocr = Call::per_record("ocr", |p: u32| {
        if p == 0 {
            Outcome::RecordFailure("bad 0".into())
        } else {
            Outcome::Ok(p)
        }
    });
    let (plan, out) = Plan::build(|b| {
        let docs = b.source::<Doc, u32>();
        b.output(reduce(ocr.apply(expand::<Page, _, _>(pages.apply(docs)))))
    })
    .unwrap();
    let mut d = HandDriver::new(&plan);
    let ocr_i = d.call("ocr");
    d.admit(0, 3u32);
    d.settle(&[ocr_i]);
    let mut first = d.reserve(ocr_i, 1).unwrap();
    let mut second = d.reserve(ocr_i, 1).unwrap();
    assert_eq!(d.log.last().unwrap().paths, vec![path(0, &[1])]);
    let r = d.execute(&mut first);
    d.report(first.id, r);
    // Page 1 is still in flight and page 2 still queued, yet the parent is decided.
    let root = d.outcome(0);
    assert_eq!(root.get(out).kind(), ItemKind::Suppressed);
    assert_eq!(common::cause_text(&root.get(out)), Some("bad 0"));
    // The decided parent is released: the late sibling is stale, the queued one gone.
    let r = d.execute(&mut second);
    assert_eq!(
        d.report(second.id, r),
        ReportOutcome::Accepted {
            committed: 0,
            stale: 1
        }
    );
    assert_eq!(d.eng.call_stats(ocr_i).stale_grains, 1);
    assert!(d.reserve(ocr_i, 8).is_none());
    d.assert_clean();
}

/// "Grain phases: waiting→ready; waiting→sealed; ready→in-flight; ready→sealed; in-flight→ready (retry, generation + 1); in-flight→sealed. Any other transition is a bug and must be impossible or loudly rejected."
#[test]
fn a_grain_phases_illegal_moves_are_rejected() {
    use Phase::*;
    use Transition::*;
    let legal = [
        (Waiting, MakeReady, Ready),
        (Waiting, Decide, Sealed),
        (Ready, Reserve, InFlight),
        (Ready, SuppressQueued, Sealed),
        (InFlight, Retry, Ready),
        (InFlight, Commit, Sealed),
    ];
    for from in [Waiting, Ready, InFlight, Sealed] {
        for t in Transition::ALL {
            let want = legal
                .iter()
                .find(|(f, tr, _)| (*f, *tr) == (from, t))
                .map(|(_, _, to)| *to)
                .ok_or(InvalidTransition { from, transition: t });
            assert_eq!(from.apply(t), want, "{from:?} --{t:?}-->");
        }
    }

    // Through the engine, every move a misbehaving executor can attempt is
    // refused at the door, so no Grain ever sees an illegal transition.
    let ocr = Call::map("ocr", |p: u32| p + 1).recovery(Recovery::RetryBatch(5));
    let pages = Call::map("pages", |n: u32| (0..n).collect::<Vec<u32>>());
    let (plan, out) = Plan::build(|b| {
        let docs = b.source::<Doc, u32>();
        b.output(reduce(ocr.apply(expand::<Page, _, _>(pages.apply(docs)))))
    })
    .unwrap();
    let mut d = HandDriver::new(&plan);
    let ocr_i = d.call("ocr");
    d.admit(0, 2u32);
    assert!(matches!(
        d.eng.admit_typed(0, 2u32),
        Err(RunError::DuplicateKey { key: 0 })
    ));
    assert!(matches!(
        d.eng.admit_typed(1, "wrong"),
        Err(RunError::InputType { key: 1, .. })
    ));
    d.settle(&[ocr_i]);
    // A failed attempt, then its late real report: the batch is no longer in flight.
    let mut b = d.reserve(ocr_i, 2).unwrap();
    let late = d.execute(&mut b);
    assert_eq!(
        d.report(b.id, Err(AttemptError::Failed("timed out".into()))),
        ReportOutcome::Retried { requeued: 2 }
    );
    assert_eq!(d.report(b.id, late.clone()), ReportOutcome::Rejected);
    // The retry commits once; repeating it is rejected.
    let mut retry = d.reserve(ocr_i, 2).unwrap();
    assert_eq!(d.log.last().unwrap().generations, vec![2, 2]);
    let r = d.execute(&mut retry);
    assert_eq!(
        d.report(retry.id, r.clone()),
        ReportOutcome::Accepted {
            committed: 2,
            stale: 0
        }
    );
    assert_eq!(d.report(retry.id, r), ReportOutcome::Rejected);
    assert_eq!(d.report(b.id, late), ReportOutcome::Rejected);
    assert!(
        d.reserve(ocr_i, 2).is_none(),
        "sealed Grains are never reserved again"
    );
    assert_eq!(d.outcome(0).get(out), Item::Present(vec![1, 2]));
    assert_eq!(d.eng.stats().rejected_reports, 3);
    d.assert_clean();

    // A report built by hand for the wrong number of Grains is a contract
    // error, not a second commit.
    let mut d = HandDriver::new(&plan);
    d.admit(5, 1u32);
    d.settle(&[ocr_i]);
    let b = d.reserve(ocr_i, 1).unwrap();
    d.report(b.id, Ok(vec![ok(1u32), ok(2u32)]));
    assert_eq!(d.eng.call_stats(ocr_i).contract_errors, 1);
    assert_eq!(d.outcome(5).get(out).kind(), ItemKind::Suppressed);
    d.assert_clean();
    assert_clean(d.eng.stats());
}
