//! Macro-written twins of CONFORMANCE.md §B cases B1, B6 and B7 (B1 also with
//! its operations in helper methods, B6 also with `reduce!(x, keep_failed)`).
//!
//! Each case is written twice, with `#[pipeline]` and with the builder API,
//! in the same operation order, so both plans have the same shape: under the
//! same schedule (sequential, then seeded random ones) they must produce the
//! same outcomes *and* the same engine and per-Call counters. Each case also
//! checks the checklist's expected values, so the twins cannot agree on a
//! wrong answer.

use crate::common;

use std::sync::{Arc, Mutex};

use common::HandDriver;
use rayorch::prelude::*;
use rayorch::sim::{self, SimConfig, SimRun};
use rayorch::spi::Value;
use rayorch::{ItemKind, Output, RootOutcome};

#[derive(Domain)]
struct Doc;

#[derive(Domain)]
#[domain(parent = Doc)]
struct Chunk;

#[derive(Domain)]
#[domain(parent = Doc)]
struct Page;

#[derive(Domain)]
#[domain(parent = Page)]
struct Region;

const SEEDS: std::ops::Range<u64> = 0..30;

fn run<I: Send + Sync + Clone + 'static>(plan: &Plan, inputs: &[I], cfg: &SimConfig) -> SimRun {
    let keyed = inputs
        .iter()
        .enumerate()
        .map(|(i, x)| (i as u64, Arc::new(x.clone()) as Value));
    sim::run(plan, keyed, cfg).expect("the run completes")
}

/// Everything a run decided: outcomes by key and every counter.
fn fingerprint(r: &SimRun) -> String {
    format!(
        "{:?} {:?} {:?} {:?}",
        r.by_key(),
        r.stats,
        r.call_stats,
        r.stage_runs
    )
}

/// Run both plans under `cfg`; they must agree exactly. Returns the macro
/// plan's outcomes.
fn twin_runs<I: Send + Sync + Clone + 'static>(
    by_macro: &Plan,
    by_builder: &Plan,
    inputs: &[I],
    cfg: &SimConfig,
) -> Vec<RootOutcome> {
    let (m, b) = (run(by_macro, inputs, cfg), run(by_builder, inputs, cfg));
    assert_eq!(
        fingerprint(&m),
        fingerprint(&b),
        "macro and builder plans differ under {cfg:?}"
    );
    m.by_key().into_iter().cloned().collect()
}

// === B1: expand, broadcast, filter, reduce ===

struct B1 {
    text: FnCall<(String, usize), String>,
    threshold: FnCall<(String, usize), usize>,
    chunker: FnCall<String, Vec<String>>,
    long_enough: FnCall<(String, usize), bool>,
    pair: FnCall<(String, Vec<String>), (String, Vec<String>)>,
}

#[pipeline]
impl B1 {
    fn forward(&self, docs: Port<Doc, (String, usize)>) -> Port<Doc, (String, Vec<String>)> {
        let d = self.text(docs);
        let t = self.threshold(docs);
        let chunk = expand!(self.chunker(d) => Chunk);
        let t_c = broadcast!(t, like = chunk);
        let mask = self.long_enough(chunk, t_c);
        let kept = reduce!(filter!(chunk, mask));
        self.pair(d, kept)
    }
}

impl B1 {
    fn new() -> B1 {
        B1 {
            text: Call::map("text", |(d, _): (String, usize)| d),
            threshold: Call::map("threshold", |(_, t): (String, usize)| t),
            chunker: Call::map("chunk", |d: String| {
                d.as_bytes()
                    .chunks(2)
                    .map(|c| String::from_utf8_lossy(c).into_owned())
                    .collect::<Vec<_>>()
            }),
            long_enough: Call::map("long_enough", |(c, t): (String, usize)| c.len() >= t),
            pair: Call::map("pair", |(d, cs): (String, Vec<String>)| (d, cs)),
        }
    }

    /// The same plan through the builder API.
    fn builder_plan(&self) -> (Plan, Output<(String, Vec<String>)>) {
        Plan::build(|b| {
            let docs = b.source::<Doc, (String, usize)>();
            let d = self.text.apply(docs);
            let t = self.threshold.apply(docs);
            let chunk = expand::<Chunk, _, _>(self.chunker.apply(d));
            let t_c = broadcast(t, chunk);
            let mask = self.long_enough.apply((chunk, t_c));
            let kept = reduce(filter(chunk, mask));
            b.output(self.pair.apply((d, kept)))
        })
        .unwrap()
    }
}

#[test]
fn b01_twin() {
    let p = B1::new();
    let (by_macro, out) = p.build_plan().unwrap();
    let (by_builder, _) = p.builder_plan();
    let inputs = vec![("abcde".to_string(), 2usize), ("xy".to_string(), 2)];
    let expected = vec![
        Item::Present(("abcde".to_string(), vec!["ab".to_string(), "cd".to_string()])),
        Item::Present(("xy".to_string(), vec!["xy".to_string()])),
    ];
    let configs =
        std::iter::once(SimConfig::sequential()).chain(SEEDS.map(|s| SimConfig::random(s).without_faults()));
    for cfg in configs {
        let got: Vec<_> = twin_runs(&by_macro, &by_builder, &inputs, &cfg)
            .iter()
            .map(|o| o.get(out))
            .collect();
        assert_eq!(got, expected, "{cfg:?}");
    }
}

// === B1 again, with operations in helper methods ===

/// B1's Calls, with `forward` split into helper methods of the `#[pipeline]`
/// impl: the helpers' `expand!`, `broadcast!`, `filter!` and `reduce!` are
/// rewritten like `forward`'s, so the plan is B1's builder plan exactly.
struct B1Helpers {
    text: FnCall<(String, usize), String>,
    threshold: FnCall<(String, usize), usize>,
    chunker: FnCall<String, Vec<String>>,
    long_enough: FnCall<(String, usize), bool>,
    pair: FnCall<(String, Vec<String>), (String, Vec<String>)>,
}

#[pipeline]
impl B1Helpers {
    fn forward(&self, docs: Port<Doc, (String, usize)>) -> Port<Doc, (String, Vec<String>)> {
        let d = self.text(docs);
        let t = self.threshold(docs);
        let chunk = self.chunks(d);
        let kept = self.long_chunks(chunk, t);
        self.pair(d, kept)
    }

    fn chunks(&self, d: Port<Doc, String>) -> Port<Chunk, String> {
        expand!(self.chunker(d) => Chunk)
    }

    fn long_chunks(&self, chunk: Port<Chunk, String>, t: Port<Doc, usize>) -> Port<Doc, Vec<String>> {
        let t_c = broadcast!(t, like = chunk);
        let mask = self.long_enough(chunk, t_c);
        reduce!(filter!(chunk, mask))
    }
}

#[test]
fn b01_twin_with_helper_methods() {
    let b1 = B1::new();
    let (by_builder, _) = b1.builder_plan();
    let p = B1Helpers {
        text: b1.text.clone(),
        threshold: b1.threshold.clone(),
        chunker: b1.chunker.clone(),
        long_enough: b1.long_enough.clone(),
        pair: b1.pair.clone(),
    };
    let (by_macro, out) = p.build_plan().unwrap();
    let inputs = vec![("abcde".to_string(), 2usize), ("xy".to_string(), 2)];
    let configs =
        std::iter::once(SimConfig::sequential()).chain(SEEDS.map(|s| SimConfig::random(s).without_faults()));
    for cfg in configs {
        let got: Vec<_> = twin_runs(&by_macro, &by_builder, &inputs, &cfg)
            .iter()
            .map(|o| o.get(out))
            .collect();
        assert_eq!(
            got[0],
            Item::Present(("abcde".to_string(), vec!["ab".to_string(), "cd".to_string()])),
            "{cfg:?}"
        );
    }
}

// === B6: RecordFailure vs GroupFailure ===

struct B6 {
    pages: FnCall<u32, Vec<(u32, u32)>>,
    ocr: FnCall<(u32, u32), (u32, u32)>,
    sink: FnCall<(u32, u32), (u32, u32)>,
    hold: FnCall<u32, u32>,
    /// What `sink` received: exactly the present pages.
    seen: Arc<Mutex<Vec<(u32, u32)>>>,
}

#[pipeline]
impl B6 {
    #[expect(
        clippy::type_complexity,
        reason = "forward's signature mirrors the builder twin's"
    )]
    fn forward(&self, docs: Port<Doc, u32>) -> (Port<Doc, Vec<(u32, u32)>>, Port<Doc, u32>) {
        let page = expand!(self.pages(docs) => Page);
        let out = reduce!(self.sink(self.ocr(page)));
        (out, self.hold(docs))
    }
}

impl B6 {
    /// Docs of 3 pages; page (1,1) fails with a record or a group failure.
    fn new(group: bool, batch: usize) -> B6 {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        B6 {
            pages: Call::map("pages", |d: u32| (0..3).map(|p| (d, p)).collect::<Vec<_>>()),
            ocr: Call::per_record("ocr", move |(d, p): (u32, u32)| {
                if (d, p) != (1, 1) {
                    Outcome::Ok((d, p))
                } else if group {
                    Outcome::GroupFailure("bad page".into())
                } else {
                    Outcome::RecordFailure("bad page".into())
                }
            })
            .batch_size(batch),
            sink: Call::map("sink", move |x: (u32, u32)| {
                log.lock().unwrap().push(x);
                x
            }),
            hold: Call::map("hold", |d: u32| d),
            seen,
        }
    }

    #[expect(
        clippy::type_complexity,
        reason = "the twin returns the macro's exact Outputs type"
    )]
    fn builder_plan(&self) -> (Plan, (Output<Vec<(u32, u32)>>, Output<u32>)) {
        Plan::build(|b| {
            let docs = b.source::<Doc, u32>();
            let page = expand::<Page, _, _>(self.pages.apply(docs));
            let out = reduce(self.sink.apply(self.ocr.apply(page)));
            (b.output(out), b.output(self.hold.apply(docs)))
        })
        .unwrap()
    }

    /// The pages `sink` saw since the last call, sorted.
    fn take_seen(&self) -> Vec<(u32, u32)> {
        let mut v = std::mem::take(&mut *self.seen.lock().unwrap());
        v.sort();
        v
    }
}

/// What one B6 run decided: each root's output, the pages the sink saw, and
/// the `ocr` Call's batches and counters.
#[derive(Debug, PartialEq)]
struct B6Run {
    outputs: Vec<Item<Vec<(u32, u32)>>>,
    seen: Vec<(u32, u32)>,
    ocr_batches: Vec<Vec<rayorch::EntityPath>>,
    ocr_stats: rayorch::spi::CallStats,
}

/// B6's exact interleaving (as in `conformance_b_end_to_end`): docs `[0, 1]`,
/// every page-level Grain settled before `hold` runs, so that a doc whose
/// reduce was decided early stays alive until its pages are done.
fn b06_driven(p: &B6, plan: &Plan, out: Output<Vec<(u32, u32)>>) -> B6Run {
    let mut d = HandDriver::new(plan);
    d.admit(0, 0u32);
    d.admit(1, 1u32);
    let hold = d.call("hold");
    d.settle(&[hold]);
    d.settle(&[]);
    d.assert_clean();
    let ocr = d.call("ocr");
    B6Run {
        outputs: (0..2).map(|k| d.outcome(k).get(out)).collect(),
        seen: p.take_seen(),
        ocr_batches: d.dispatches(ocr),
        ocr_stats: d.eng.call_stats(ocr).clone(),
    }
}

/// Both twins through [`b06_driven`]; they must agree exactly.
fn b06_twins(group: bool, batch: usize) -> B6Run {
    let p = B6::new(group, batch);
    let (by_macro, (out, _)) = p.build_plan().unwrap();
    let (by_builder, (builder_out, _)) = p.builder_plan();
    let m = b06_driven(&p, &by_macro, out);
    assert_eq!(m, b06_driven(&p, &by_builder, builder_out));
    m
}

fn doc0_intact_doc1_suppressed(got: &[Item<Vec<(u32, u32)>>]) {
    assert_eq!(got[0], Item::Present(vec![(0, 0), (0, 1), (0, 2)]));
    assert_eq!(
        (got[1].kind(), got[1].cause().map(|c| c.message())),
        (ItemKind::Suppressed, Some("bad page"))
    );
}

#[test]
fn b06_record_failure_twin() {
    let r = b06_twins(false, 64);
    doc0_intact_doc1_suppressed(&r.outputs);
    assert_eq!(r.seen, vec![(0, 0), (0, 1), (0, 2), (1, 0), (1, 2)]);
    assert_eq!((r.ocr_stats.committed, r.ocr_stats.record_failures), (5, 1));
    // A RecordFailure is schedule-independent.
    let p = B6::new(false, 64);
    let (by_macro, (out, _)) = p.build_plan().unwrap();
    let (by_builder, _) = p.builder_plan();
    for seed in SEEDS {
        let roots = twin_runs(
            &by_macro,
            &by_builder,
            &[0u32, 1],
            &SimConfig::random(seed).without_faults(),
        );
        let got: Vec<_> = roots.iter().map(|r| r.get(out)).collect();
        doc0_intact_doc1_suppressed(&got);
    }
}

#[test]
fn b06_group_failure_same_batch_twin() {
    let r = b06_twins(true, 64);
    doc0_intact_doc1_suppressed(&r.outputs);
    assert_eq!(r.ocr_batches.len(), 1, "all pages in one batch");
    // (1,0) and (1,2) ran in the failing batch but never reach the sink.
    assert_eq!(r.seen, vec![(0, 0), (0, 1), (0, 2)]);
    assert_eq!(
        (r.ocr_stats.group_failures, r.ocr_stats.suppressed_in_flight),
        (1, 2)
    );
}

#[test]
fn b06_group_failure_batch_1_twin() {
    let r = b06_twins(true, 1);
    doc0_intact_doc1_suppressed(&r.outputs);
    // (1,0) committed before the failure and stays; (1,2) was never dispatched.
    assert_eq!(r.seen, vec![(0, 0), (0, 1), (0, 2), (1, 0)]);
    assert_eq!(r.ocr_batches.len(), 5);
    assert_eq!(r.ocr_stats.suppressed_before_dispatch, 1);
}

// === B6 with `reduce!(x, keep_failed)`: doc 1 is kept with its failure ===

type KeptPages = Vec<Result<(u32, u32), rayorch::Cause>>;

struct B6Keep {
    pages: FnCall<u32, Vec<(u32, u32)>>,
    ocr: FnCall<(u32, u32), (u32, u32)>,
}

#[pipeline]
impl B6Keep {
    fn forward(&self, docs: Port<Doc, u32>) -> Port<Doc, KeptPages> {
        let page = expand!(self.pages(docs) => Page);
        reduce!(self.ocr(page), keep_failed)
    }
}

#[test]
fn b06_keep_failed_twin() {
    for group in [false, true] {
        let p = B6Keep {
            pages: Call::map("pages", |d: u32| (0..3).map(|p| (d, p)).collect::<Vec<_>>()),
            ocr: Call::per_record("ocr", move |page: (u32, u32)| match page {
                (1, 1) if group => Outcome::GroupFailure("bad page".into()),
                (1, 1) => Outcome::RecordFailure("bad page".into()),
                _ => Outcome::Ok(page),
            }),
        };
        let (by_macro, out) = p.build_plan().unwrap();
        let (by_builder, _) = Plan::build(|b| {
            let docs = b.source::<Doc, u32>();
            let page = expand::<Page, _, _>(p.pages.apply(docs));
            b.output(rayorch::reduce_keep_failed(p.ocr.apply(page)))
        })
        .unwrap();
        let configs = std::iter::once(SimConfig::sequential())
            .chain(SEEDS.map(|s| SimConfig::random(s).without_faults()));
        for cfg in configs {
            let got: Vec<_> = twin_runs(&by_macro, &by_builder, &[0u32, 1], &cfg)
                .iter()
                .map(|o| o.get(out))
                .collect();
            assert_eq!(
                got[0],
                Item::Present(vec![Ok((0, 0)), Ok((0, 1)), Ok((0, 2))]),
                "{cfg:?}"
            );
            let doc1: Vec<_> = got[1]
                .clone()
                .present()
                .expect("doc 1 is kept")
                .into_iter()
                .map(|r| r.map_err(|c| c.message().to_string()))
                .collect();
            assert_eq!(doc1[1], Err("bad page".to_string()), "{cfg:?}");
            if !group {
                assert_eq!(
                    (doc1[0].clone(), doc1[2].clone()),
                    (Ok((1, 0)), Ok((1, 2))),
                    "{cfg:?}"
                );
            }
        }
    }
}

// === B7: nested empty groups ===

struct B7 {
    pages: FnCall<u32, Vec<u32>>,
    regions: FnCall<u32, Vec<u32>>,
}

#[pipeline]
impl B7 {
    fn forward(&self, docs: Port<Doc, u32>) -> Port<Doc, Vec<Vec<u32>>> {
        let page = expand!(self.pages(docs) => Page);
        let region = expand!(self.regions(page) => Region);
        reduce!(reduce!(region))
    }
}

#[test]
fn b07_twin() {
    let p = B7 {
        pages: Call::map("pages", |d: u32| if d == 0 { vec![0u32, 1] } else { vec![] }),
        regions: Call::map("regions", |p: u32| if p == 0 { vec![] } else { vec![10u32, 11] }),
    };
    let (by_macro, out) = p.build_plan().unwrap();
    let (by_builder, _) = Plan::build(|b| {
        let docs = b.source::<Doc, u32>();
        let page = expand::<Page, _, _>(p.pages.apply(docs));
        let region = expand::<Region, _, _>(p.regions.apply(page));
        b.output(reduce(reduce(region)))
    })
    .unwrap();
    let expected = vec![Item::Present(vec![vec![], vec![10, 11]]), Item::Present(vec![])];
    let configs =
        std::iter::once(SimConfig::sequential()).chain(SEEDS.map(|s| SimConfig::random(s).without_faults()));
    for cfg in configs {
        let got: Vec<_> = twin_runs(&by_macro, &by_builder, &[0u32, 1], &cfg)
            .iter()
            .map(|o| o.get(out))
            .collect();
        assert_eq!(got, expected, "{cfg:?}");
    }
}
