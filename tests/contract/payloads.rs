//! Payloads move (DESIGN, Execution; the rule is in `value.rs`): a value whose
//! Port has one consumer reaches that consumer without a deep copy whenever
//! no retry can follow the attempt; an attempt that may be retried gets one
//! copy (the engine keeps the original for the retry); each of several
//! consumers gets its own copy.
//!
//! The payload counts its clones, so every test asserts an exact number, for
//! the seeded simulator and for the threaded `Runner`, on
//! map → expand → map → reduce → map.

use crate::common;

use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use rayorch::prelude::*;
use rayorch::sim::{self, SimConfig};
use rayorch::sink::Callback;
use rayorch::{Output, RootOutcome, Runner};

domain!(Doc);
domain!(Page: Doc);

/// A payload whose `Clone` is counted in a counter shared by one test.
#[derive(Debug)]
struct Payload {
    value: u32,
    clones: Arc<AtomicUsize>,
}

impl Clone for Payload {
    fn clone(&self) -> Self {
        self.clones.fetch_add(1, Ordering::SeqCst);
        Payload {
            value: self.value,
            clones: self.clones.clone(),
        }
    }
}

fn payload(value: u32, clones: &Arc<AtomicUsize>) -> Payload {
    Payload {
        value,
        clones: clones.clone(),
    }
}

/// Pages per document, and what each root must produce.
const DOCS: [u32; 3] = [2, 3, 0];

/// Σ (page value + 1) over a document's pages, where page j of a document
/// of n pages has the value 100·n + j (unique within a run).
fn expected(n: u32) -> u32 {
    (0..n).map(|j| 100 * n + j + 1).sum()
}

/// render(doc) → expand pages → ocr(page) → reduce → assemble(doc), every
/// Call with `recovery`; with `shared`, a second Call (`meta`) reads the
/// source Port too and `assemble` combines both.
fn plan(recovery: Recovery, shared: bool, ocr_fails_once: bool) -> (Plan, Output<u32>) {
    let render = Call::map("render", |d: Payload| {
        (0..d.value)
            .map(|j| Payload {
                value: 100 * d.value + j,
                clones: d.clones.clone(),
            })
            .collect::<Vec<Payload>>()
    })
    .recovery(recovery);
    // With `ocr_fails_once`, an attempt fails as a whole when it holds a
    // page no attempt held before, so every page is retried exactly once.
    let seen = Arc::new(Mutex::new(HashSet::new()));
    let ocr = Call::batch("ocr", move |pages: Vec<Payload>| {
        let mut seen = seen.lock().unwrap();
        let fresh = pages.iter().filter(|p| seen.insert(p.value)).count();
        if ocr_fails_once && fresh > 0 {
            return Err("an attempt with a new page fails".into());
        }
        Ok(pages
            .into_iter()
            .map(|p| {
                Outcome::Ok(Payload {
                    value: p.value + 1,
                    clones: p.clones,
                })
            })
            .collect())
    })
    .recovery(recovery);
    let assemble = Call::map("assemble", |pages: Vec<Payload>| {
        pages.iter().map(|p| p.value).sum::<u32>()
    })
    .recovery(recovery);
    let meta = Call::map("meta", |d: Payload| d.value).recovery(recovery);
    let both = Call::map("both", |(sum, _n): (u32, u32)| sum).recovery(recovery);
    Plan::build(|b| {
        let doc = b.source::<Doc, Payload>();
        let page = expand::<Page, _, _>(render.apply(doc));
        let sum = assemble.apply(reduce(ocr.apply(page)));
        if shared {
            b.output(both.apply((sum, meta.apply(doc))))
        } else {
            b.output(sum)
        }
    })
    .expect("valid plan")
}

/// Run through the simulator and through `Runner`; per executor, the
/// number of clones the run made (after checking every root's value).
fn clones_per_executor(recovery: Recovery, shared: bool, ocr_fails_once: bool) -> Vec<(String, usize)> {
    let mut counts = Vec::new();
    let mut schedules = vec![SimConfig::sequential()];
    schedules.extend((0..8).map(|s| SimConfig::random(s).without_faults()));
    for cfg in schedules {
        let clones = Arc::new(AtomicUsize::new(0));
        let (plan, out) = plan(recovery, shared, ocr_fails_once);
        let inputs = DOCS
            .iter()
            .enumerate()
            .map(|(k, &n)| (k as u64, Arc::new(payload(n, &clones)) as rayorch::spi::Value));
        let run = sim::run(&plan, inputs, &cfg).expect("the run completes");
        common::assert_clean(&run.stats);
        for o in run.by_key() {
            assert_eq!(o.get(out), Item::Present(expected(DOCS[o.key as usize])));
        }
        counts.push((format!("sim seed {}", cfg.seed), clones.load(Ordering::SeqCst)));
    }
    let clones = Arc::new(AtomicUsize::new(0));
    let (plan, out) = plan(recovery, shared, ocr_fails_once);
    let got: Arc<Mutex<Vec<RootOutcome>>> = Arc::default();
    let sink = got.clone();
    let inputs = DOCS
        .iter()
        .enumerate()
        .map(|(k, &n)| (k as u64, payload(n, &clones)));
    Runner::new(&plan)
        .run(
            inputs,
            Callback(move |o: &RootOutcome| sink.lock().unwrap().push(o.clone())),
        )
        .expect("the run completes");
    let got = got.lock().unwrap();
    assert_eq!(got.len(), DOCS.len());
    for o in got.iter() {
        assert_eq!(o.get(out), Item::Present(expected(DOCS[o.key as usize])));
    }
    counts.push(("Runner".to_string(), clones.load(Ordering::SeqCst)));
    counts
}

fn assert_all(counts: &[(String, usize)], want: usize) {
    for (executor, n) in counts {
        assert_eq!(
            *n, want,
            "{executor}: {n} clones, expected {want} (all: {counts:?})"
        );
    }
}

/// Pages in all documents.
fn pages() -> usize {
    DOCS.iter().sum::<u32>() as usize
}

#[test]
fn single_consumer_values_move_when_no_retry_can_follow() {
    // Abort never retries: the source value, every rendered list, every
    // page and every gathered list moves. Zero copies.
    assert_all(&clones_per_executor(Recovery::Abort, false, false), 0);
    // A zero budget is the same.
    assert_all(&clones_per_executor(Recovery::RetryBatch(0), false, false), 0);
}

#[test]
fn an_attempt_that_may_be_retried_gets_one_copy() {
    // Isolate (the default) retries a first attempt: render copies each
    // document once, ocr each page once, assemble each page of its list once.
    // Expand and reduce still move (they cannot fail).
    let want = DOCS.len() + pages() + pages();
    assert_all(&clones_per_executor(Recovery::Isolate, false, false), want);
}

#[test]
fn the_last_allowed_attempt_moves() {
    // RetryBatch(1): the first attempt of each Grain may be retried, so it
    // gets a copy; ocr's first attempts all fail, and the retries are the
    // last attempts: they take the kept value without a copy. So the count
    // is the same as with no failure at all.
    let want = DOCS.len() + pages() + pages();
    assert_all(&clones_per_executor(Recovery::RetryBatch(1), false, false), want);
    assert_all(&clones_per_executor(Recovery::RetryBatch(1), false, true), want);
}

#[test]
fn each_of_several_consumers_gets_a_copy() {
    // The source Port feeds `render` and `meta`: the engine keeps the
    // shared value and each consumer copies it, even under Abort; the rest
    // of the pipeline still moves.
    assert_all(&clones_per_executor(Recovery::Abort, true, false), 2 * DOCS.len());
    // Under Isolate the single-consumer Ports copy as above on top.
    let want = 2 * DOCS.len() + pages() + pages();
    assert_all(&clones_per_executor(Recovery::Isolate, true, false), want);
}

/// On the JetStream owner a page a worker rendered is forwarded to `ocr` by
/// reference (its object stays in the store). Under `Abort` every attempt is
/// the last, so the engine hands its only copy of each page over with the
/// batch: the object must outlive the batch message until the batch is
/// decided, or the worker that claims it finds the page deleted.
#[test]
fn a_forwarded_page_the_last_attempt_takes_stays_readable_until_its_batch_is_decided() {
    use rayorch::dist::Codecs;

    // Pages of 100 bytes: over the test config's 64-byte inline limit.
    let pad = "x".repeat(100);
    let render = Call::map("render", move |d: String| {
        let n: usize = d.parse().unwrap_or(0);
        (0..n).map(|i| format!("{i}{pad}")).collect::<Vec<String>>()
    })
    .recovery(Recovery::Abort);
    let ocr = Call::per_record("ocr", |p: String| Outcome::Ok(p.len()))
        .batch_size(4)
        .recovery(Recovery::Abort);
    let (plan, out) = Plan::build(|b| {
        let docs = b.source::<Doc, String>();
        b.output(reduce(ocr.apply(expand::<Page, _, _>(render.apply(docs)))))
    })
    .expect("valid plan");
    let docs: Vec<(u64, String)> = (0..12u64).map(|k| (k, (k % 5 + 3).to_string())).collect();
    let codecs = Codecs::new()
        .json::<String>()
        .json::<Vec<String>>()
        .json::<usize>();
    let (summary, outcomes) =
        common::dist::run_with_one_worker(&plan, codecs, "lastattempt", docs.clone(), |o| o);
    let summary = summary.expect("no attempt fails: every page is read");
    assert_eq!(outcomes.len(), docs.len(), "{summary:?}");
    for o in &outcomes {
        let n = (o.key % 5 + 3) as usize;
        let want: Vec<usize> = (0..n).map(|i| i.to_string().len() + 100).collect();
        assert_eq!(o.get(out), Item::Present(want), "root {}", o.key);
    }
}
