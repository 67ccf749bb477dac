//! Failures say what they were and where they came from (issue 22, item
//! 5): each cause carries its kind (record, group, error, panic, timeout,
//! contract) and origin (the Call and a Domain-named Entity path); a root
//! suppressed by a child's failure carries that failure's kind and origin;
//! the failure lines write them; the summary counts failures by Domain and
//! kind. Through the threaded `Runner`.

use std::collections::BTreeMap;
use std::time::Duration;

use rayorch::prelude::*;
use rayorch::sink::FailureLine;
use rayorch::{
    AsyncStage, FailureKind, FailureLevel, Runner, Stage, StageContext, StageResult, expand, reduce,
    reduce_keep_failed,
};

domain!(Doc);
domain!(Page: Doc);

/// Page `(doc, page)`: page 1 of doc `d` behaves as doc `d` says; every
/// other page is fine.
struct Ocr;

impl Stage for Ocr {
    type In = (u32, u32);
    type Out = u32;
    fn run(&mut self, batch: Vec<(u32, u32)>, _: &StageContext) -> StageResult<u32> {
        let mut out = Vec::new();
        for (d, p) in batch {
            out.push(match (d, p) {
                (1, 1) => Outcome::RecordFailure(Cause::new("unreadable page").with_code("page.unreadable")),
                (2, 1) => Outcome::GroupFailure("the document is torn".into()),
                (3, 1) => panic!("the model crashed on this page"),
                (4, 1) => return Err("the model server said no".into()),
                _ => Outcome::Ok(p),
            });
        }
        Ok(out)
    }
}

/// The failure lines of a run by root key, and apart the lines of roots
/// refused for a repeated key (which share their key with a root that ran,
/// and may reach the sink before or after it).
fn lines(
    plan: &Plan,
    roots: Vec<(u64, u32)>,
) -> (rayorch::RunSummary, BTreeMap<u64, FailureLine>, Vec<FailureLine>) {
    let (mut lines, mut repeated) = (BTreeMap::new(), Vec::new());
    let summary = Runner::new(plan)
        .run(
            roots,
            rayorch::sink::Callback::new(|o| match FailureLine::of(o, None) {
                Some(l) if l.kind.as_deref() == Some("source") => repeated.push(l),
                Some(l) => assert!(lines.insert(o.key, l).is_none(), "root {} failed twice", o.key),
                None => {}
            }),
        )
        .unwrap();
    (summary, lines, repeated)
}

#[test]
fn record_group_panic_error_and_duplicate_failures_say_what_and_where() {
    let pages = Call::map("pages", |d: u32| (0..3).map(|p| (d, p)).collect::<Vec<_>>());
    // Batch 1, the default recovery (retry, then bisect to the poison):
    // the panicking and erring pages end with their physical kinds.
    let ocr = Call::new("ocr", || Ok(Ocr)).batch_size(1);
    let (plan, _) = Plan::build(|b| {
        let docs = b.source::<Doc, u32>();
        b.output(reduce(ocr.apply(expand::<Page, _, _>(pages.apply(docs)))))
    })
    .unwrap();
    let (summary, lines, repeated) = lines(&plan, vec![(0, 0), (1, 1), (2, 2), (3, 3), (4, 4), (1, 5)]);
    let what = |k: u64| {
        let l = &lines[&k];
        (
            l.outcome.as_str(),
            l.kind.as_deref(),
            l.call.as_deref(),
            l.entity.as_deref(),
        )
    };
    assert!(!lines.contains_key(&0), "doc 0 is present");
    let page1 = |d: u64| format!("Doc {d} / Page 1");
    for (k, kind) in [(1, "record"), (2, "group"), (3, "panic"), (4, "error")] {
        assert_eq!(
            what(k),
            ("suppressed", Some(kind), Some("ocr"), Some(page1(k).as_str())),
            "doc {k}: {:?}",
            lines[&k]
        );
        assert_eq!(
            lines[&k].at.as_deref(),
            Some(format!("Call `ocr` on {}", page1(k)).as_str())
        );
    }
    assert!(lines[&3].cause.contains("the model crashed"), "{:?}", lines[&3]);
    // Codes to group by: the stage's own, else the kind's.
    for (k, code) in [(1, "page.unreadable"), (2, "group"), (3, "panic"), (4, "error")] {
        assert_eq!(lines[&k].code.as_deref(), Some(code), "{:?}", lines[&k]);
    }
    // The second root given key 1: the source's mistake, no Call, no Entity.
    assert_eq!(repeated.len(), 1, "{repeated:?}");
    assert_eq!(
        (
            repeated[0].key,
            repeated[0].outcome.as_str(),
            repeated[0].call.as_deref(),
            repeated[0].entity.as_deref()
        ),
        (1, "failed", None, None)
    );
    assert!(
        repeated[0].cause.contains("already given to this run"),
        "{:?}",
        repeated[0]
    );
    assert_eq!(repeated[0].code.as_deref(), Some("input.duplicate_key"));
    let dup = summary
        .failures
        .iter()
        .find(|f| f.kind == FailureKind::Source)
        .unwrap();
    assert_eq!(
        (dup.domain.as_str(), dup.level.as_str(), dup.count),
        ("Doc", "root failed", 1)
    );
    let grains: BTreeMap<&str, u64> = summary
        .failures
        .iter()
        .filter(|f| f.level == FailureLevel::GrainFailed)
        .map(|f| (f.kind.as_str(), f.count))
        .collect();
    assert_eq!(
        grains,
        BTreeMap::from([("error", 1), ("group", 1), ("panic", 1), ("record", 1)]),
        "{:?}",
        summary.failures
    );
}

struct Slow;

impl AsyncStage for Slow {
    type In = u32;
    type Out = u32;
    async fn run(self: std::sync::Arc<Self>, batch: Vec<u32>, _: StageContext) -> StageResult<u32> {
        if batch.contains(&7) {
            tokio::time::sleep(Duration::from_secs(3600)).await;
        }
        Ok(batch.into_iter().map(Outcome::Ok).collect())
    }
}

struct Miscounts;

impl Stage for Miscounts {
    type In = u32;
    type Out = u32;
    fn run(&mut self, _: Vec<u32>, _: &StageContext) -> StageResult<u32> {
        Ok(Vec::new())
    }
}

#[test]
fn a_timed_out_record_and_a_contract_error_name_their_kind() {
    let slow = Call::new_async("slow", || Ok(Slow))
        .batch_size(1)
        .timeout(Duration::from_millis(50))
        .recovery(Recovery::RetryBatch(1));
    let (plan, out) = Plan::build(|b| {
        let xs = b.source::<Doc, u32>();
        b.output(slow.apply(xs))
    })
    .unwrap();
    let mut got = BTreeMap::new();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .unwrap();
    rt.block_on(Runner::new(&plan).run_async(
        [(0u64, 1u32), (1, 7)],
        rayorch::sink::Callback::new(|o| {
            got.insert(o.key, o.get(out));
        }),
    ))
    .unwrap();
    assert_eq!(got[&0], Item::Present(1));
    let cause = got[&1].cause().unwrap();
    assert_eq!(cause.kind(), Some(FailureKind::Timeout), "{cause}");
    assert_eq!(
        cause.origin().map(|o| (&*o.call, o.entity.as_str())),
        Some(("slow", "Doc 1"))
    );

    let bad = Call::new("bad", || Ok(Miscounts));
    let (plan, out) = Plan::build(|b| {
        let xs = b.source::<Doc, u32>();
        b.output(bad.apply(xs))
    })
    .unwrap();
    let mut kinds = Vec::new();
    Runner::new(&plan)
        .run(
            [(0u64, 1u32)],
            rayorch::sink::Callback::new(|o| kinds.push(o.get(out).cause().and_then(|c| c.kind()))),
        )
        .unwrap();
    assert_eq!(kinds, [Some(FailureKind::Contract)]);
}

#[test]
fn a_keep_failed_list_tells_failed_children_from_suppressed_ones() {
    let pages = Call::map("pages", |d: u32| (0..3).map(|p| (d, p)).collect::<Vec<_>>());
    // Batch 1 in page order under FIFO: page 0 commits, page 1's
    // GroupFailure suppresses page 2 before it runs.
    let ocr = Call::new("ocr", || Ok(Ocr))
        .batch_size(1)
        .replicas(1)
        .reservation(rayorch::Reservation::Elastic);
    let (plan, out) = Plan::build(|b| {
        let docs = b.source::<Doc, u32>();
        b.output(reduce_keep_failed(
            ocr.apply(expand::<Page, _, _>(pages.apply(docs))),
        ))
    })
    .unwrap();
    let mut kept = Vec::new();
    Runner::new(&plan)
        .run(
            [(0u64, 2u32)],
            rayorch::sink::Callback::new(|o| kept = o.get(out).present().expect("the parent is kept")),
        )
        .unwrap();
    assert_eq!(kept.len(), 3);
    assert_eq!(kept[0], Ok(0));
    let (failed, suppressed) = (kept[1].as_ref().unwrap_err(), kept[2].as_ref().unwrap_err());
    assert!(
        !failed.is_suppression() && failed.kind() == Some(FailureKind::Group),
        "{failed}"
    );
    assert!(
        suppressed.is_suppression(),
        "page 2 was suppressed, not failed: {suppressed}"
    );
    assert_eq!(
        suppressed.origin().map(|o| o.entity.as_str()),
        Some("Doc 0 / Page 1"),
        "the suppressed page names the failure that suppressed it"
    );
}

/// A cause's origin is typed: the Call, the Domain and the Entity's place
/// (root key, ordinals) as fields, besides the words for people.
#[test]
fn a_causes_origin_gives_the_entity_path_as_fields() {
    let pages = Call::map("pages", |d: u32| (0..3).map(|p| (d, p)).collect::<Vec<_>>());
    let ocr = Call::new("ocr", || Ok(Ocr)).batch_size(1);
    let (plan, out) = Plan::build(|b| {
        let docs = b.source::<Doc, u32>();
        b.output(reduce(ocr.apply(expand::<Page, _, _>(pages.apply(docs)))))
    })
    .unwrap();
    let mut causes = Vec::new();
    Runner::new(&plan)
        .run(
            [(7u64, 1u32)],
            rayorch::sink::Callback::new(|o: &rayorch::RootOutcome| causes.push(o.get(out).cause().cloned())),
        )
        .unwrap();
    let cause = causes[0]
        .clone()
        .expect("doc 7 is suppressed by its page's failure");
    let origin = cause.origin().unwrap();
    assert_eq!((&*origin.call, origin.domain), ("ocr", "Page"));
    assert_eq!((origin.path.root, origin.path.ordinals.as_slice()), (7, &[1][..]));
    assert_eq!(origin.entity, "Doc 7 / Page 1");
    assert_eq!(cause.kind(), Some(FailureKind::Record));
    assert_eq!(cause.code(), Some("page.unreadable"));
}
