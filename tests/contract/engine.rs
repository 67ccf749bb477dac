//! Engine contract cases from issue 9 through the public API: a Port
//! declared as an output twice (builder and `#[pipeline]`) works and never
//! stalls; `Recovery::Abort` ends the run with an error that names the
//! Entity, the Call and the error text.

use crate::common;

use std::sync::{Arc, Mutex};

use rayorch::prelude::*;
use rayorch::sim::{self, SimConfig};
use rayorch::sink::Callback;
use rayorch::spi::{Engine, EngineConfig};
use rayorch::{Output, RootOutcome, RunError, Runner};

#[derive(Domain)]
struct Doc;

#[derive(Domain)]
#[domain(parent = Doc)]
struct Page;

fn schedules() -> Vec<SimConfig> {
    let mut v = vec![SimConfig::sequential()];
    v.extend((0..20).map(|s| SimConfig::random(s).without_faults()));
    v
}

/// Run `plan` over docs of `0..n` pages through the simulator (every
/// schedule) and `Runner`, and check both outputs of every root.
fn check_twice_declared(plan: &Plan, a: Output<Vec<u32>>, b: Output<Vec<u32>>) {
    let want = |n: u64| Item::Present((0..n as u32).map(|p| p * 10).collect::<Vec<u32>>());
    for cfg in schedules() {
        let run = sim::run(plan, common::keyed([0u32, 3, 1]), &cfg).expect("no stall");
        common::assert_clean(&run.stats);
        assert_eq!(run.outcomes.len(), 3);
        for o in run.by_key() {
            let n = [0, 3, 1][o.key as usize];
            assert_eq!(o.get(a), want(n), "first declaration, seed {}", cfg.seed);
            assert_eq!(o.get(b), want(n), "second declaration, seed {}", cfg.seed);
        }
    }
    let got: Arc<Mutex<Vec<RootOutcome>>> = Arc::default();
    let sink = got.clone();
    let summary = Runner::new(plan)
        .run(
            [(0u64, 0u32), (1, 3), (2, 1)],
            Callback(move |o: &RootOutcome| sink.lock().unwrap().push(o.clone())),
        )
        .expect("no stall");
    assert_eq!(summary.present, 3);
    for o in got.lock().unwrap().iter() {
        let n = [0, 3, 1][o.key as usize];
        assert_eq!((o.get(a), o.get(b)), (want(n), want(n)));
    }
}

#[test]
fn a_port_declared_twice_as_output_gets_the_value_twice() {
    let pages = Call::map("pages", |n: u32| (0..n).collect::<Vec<u32>>());
    let ocr = Call::map("ocr", |p: u32| p * 10);
    let (plan, (a, b)) = Plan::build(|b| {
        let doc = b.source::<Doc, u32>();
        let texts = reduce(ocr.apply(expand::<Page, _, _>(pages.apply(doc))));
        (b.output(texts), b.output(texts))
    })
    .expect("a Port may be declared twice");
    assert_eq!(plan.outputs(), 2);
    check_twice_declared(&plan, a, b);
}

struct Twice {
    pages: rayorch::FnCall<u32, Vec<u32>>,
    ocr: rayorch::FnCall<u32, u32>,
}

#[pipeline]
impl Twice {
    fn forward(&self, docs: Port<Doc, u32>) -> (Port<Doc, Vec<u32>>, Port<Doc, Vec<u32>>) {
        let page = expand!(self.pages(docs) => Page);
        let texts = reduce!(self.ocr(page));
        (texts, texts)
    }
}

#[test]
fn a_pipeline_returning_the_same_port_twice_gets_the_value_twice() {
    let p = Twice {
        pages: Call::map("pages", |n: u32| (0..n).collect::<Vec<u32>>()),
        ocr: Call::map("ocr", |p: u32| p * 10),
    };
    let (plan, (a, b)) = p.build_plan().expect("valid plan");
    check_twice_declared(&plan, a, b);
}

/// `ocr` fails every attempt on page 2 of a 3-page document (only root 2
/// has one below); under `Abort` the run stops with an error naming that
/// Entity, the Call and the stage's text.
fn abort_plan() -> (Plan, Output<Vec<u32>>) {
    let pages = Call::map("pages", |n: u32| (0..n).collect::<Vec<u32>>());
    let ocr = Call::batch("ocr", |ps: Vec<(u32, u32)>| {
        if ps.iter().any(|&(pages, p)| pages == 3 && p == 2) {
            return Err("model server refused the page".into());
        }
        Ok(ps.into_iter().map(|(_, p)| Outcome::Ok(p)).collect())
    })
    .batch_size(1)
    .recovery(Recovery::Abort);
    let pair = Call::map("pair", |(d, p): (u32, u32)| (d, p));
    Plan::build(|b| {
        let doc = b.source::<Doc, u32>();
        let page = expand::<Page, _, _>(pages.apply(doc));
        let d = broadcast(doc, page);
        b.output(reduce(ocr.apply(pair.apply((d, page)))))
    })
    .expect("valid plan")
}

/// The error names `entity` (the first Entity of the failed batch), the
/// Call and the stage's text.
fn assert_abort_error(e: &RunError, want_entity: &str) {
    match e {
        RunError::Aborted { call, entity, cause } => {
            assert_eq!(call, "ocr");
            assert!(entity.starts_with(want_entity), "{entity}");
            assert_eq!(cause, "model server refused the page");
        }
        other => panic!("expected Aborted, got {other:?}"),
    }
    let text = e.to_string();
    for part in ["Call `ocr`", want_entity, "model server refused the page"] {
        assert!(text.contains(part), "{text}");
    }
}

#[test]
fn abort_ends_the_run_naming_the_entity_the_call_and_the_error() {
    let (plan, _) = abort_plan();
    // Every schedule of the simulator ends with the error; batches of one
    // (the sequential schedule keeps the Call's B = 1) name the very page.
    for cfg in schedules() {
        let inputs = common::keyed([2u32, 1, 3, 0, 1, 2]);
        let err = sim::run(&plan, inputs, &cfg).expect_err("the run aborts");
        let exact = cfg.batch_size.is_none();
        assert_abort_error(&err, if exact { "Doc 2 / Page 2" } else { "Doc " });
    }
    // Driving the engine by hand: after the failed report nothing more is
    // admitted or reserved, and `aborted()` holds the error.
    let mut eng = Engine::new(&plan, EngineConfig::default());
    eng.admit_typed(2, 3u32).unwrap();
    let mut replicas: Vec<_> = plan.calls().iter().map(|c| c.runtime.spawn().unwrap()).collect();
    while eng.aborted().is_none() {
        let c = (0..eng.calls())
            .find(|&c| eng.may_have_ready(c))
            .expect("work is ready");
        let Some(b) = eng.reserve(c, 1) else { continue };
        let r = replicas[c].run(b.inputs);
        eng.report(b.id, r);
    }
    assert_abort_error(eng.aborted().unwrap(), "Doc 2 / Page 2");
    assert!(!eng.can_admit());
    assert!(matches!(eng.admit_typed(6, 1u32), Err(RunError::Aborted { .. })));
    assert!((0..eng.calls()).all(|c| eng.reserve(c, 8).is_none()));
    assert_eq!(eng.stats().invalid_transitions, 0);
}

/// Aligned lists from two different Grains cannot be rejected before either
/// commits (each is fine alone): the Expansion fails instead, and the reduce
/// over it is Suppressed with the "cardinality mismatch" cause; both
/// producing Grains stay committed.
#[test]
fn aligned_lists_from_two_grains_fail_the_expansion() {
    let nums = Call::map("nums", |_: u32| vec![0u32, 1]);
    let names = Call::map("names", |n: u32| {
        (0..n).map(|i| format!("s{i}")).collect::<Vec<String>>()
    });
    let combine = Call::map("combine", |(a, s): (u32, String)| format!("{s}:{a}"));
    let (plan, out) = Plan::build(|b| {
        let docs = b.source::<Doc, u32>();
        let (num, name) = rayorch::expand_aligned::<Page, _, _, _>((nums.apply(docs), names.apply(docs)));
        b.output(reduce(combine.apply((num, name))))
    })
    .expect("valid plan");
    for cfg in schedules() {
        let run = sim::run(&plan, common::keyed([3u32, 2]), &cfg).expect("no stall");
        common::assert_clean(&run.stats);
        let roots = run.by_key();
        let bad = roots[0].get(out);
        assert_eq!(bad.kind(), rayorch::ItemKind::Suppressed);
        let cause = bad.cause().unwrap();
        assert!(cause.message().contains("cardinality mismatch"), "{cause}");
        assert!(cause.message().contains("[2, 3]"), "{cause}");
        assert_eq!(
            roots[1].get(out),
            Item::Present(vec!["s0:0".to_string(), "s1:1".to_string()])
        );
        for name in ["nums", "names"] {
            let c = common::call_index(&plan, name);
            assert_eq!(run.call_stats[c].committed, 2, "{name}");
        }
        assert_eq!(
            run.call_stats[common::call_index(&plan, "combine")].grains_dispatched,
            2
        );
    }
}
