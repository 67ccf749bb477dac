//! `tracing` spans of a run: one `batch` span per physical batch (its Call,
//! size, whether it mixes parents, the replica that ran it) and one `root`
//! span per root (its key and outcome), each closed when its work ended.
//! Captured by a subscriber written here, counted against the summary.

use crate::common;

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use rayorch::sink::Callback;
use rayorch::{Cause, Outcome, RootOutcome, Runner};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};

#[derive(Clone, Debug, Default)]
struct Span {
    name: &'static str,
    fields: BTreeMap<&'static str, String>,
    closed: bool,
}

#[derive(Default)]
struct Capture {
    next: AtomicU64,
    spans: Mutex<BTreeMap<u64, Span>>,
}

struct Fields<'a>(&'a mut BTreeMap<&'static str, String>);

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name(), format!("{value:?}"));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name(), value.to_string());
    }
}

impl Subscriber for &'static Capture {
    fn enabled(&self, m: &Metadata<'_>) -> bool {
        m.target().starts_with("rayorch")
    }
    fn new_span(&self, a: &Attributes<'_>) -> Id {
        let id = self.next.fetch_add(1, Ordering::SeqCst) + 1;
        let mut span = Span {
            name: a.metadata().name(),
            ..Span::default()
        };
        a.record(&mut Fields(&mut span.fields));
        self.spans.lock().unwrap().insert(id, span);
        Id::from_u64(id)
    }
    fn record(&self, id: &Id, values: &Record<'_>) {
        if let Some(s) = self.spans.lock().unwrap().get_mut(&id.into_u64()) {
            values.record(&mut Fields(&mut s.fields));
        }
    }
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, _: &Event<'_>) {}
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
    fn try_close(&self, id: Id) -> bool {
        if let Some(s) = self.spans.lock().unwrap().get_mut(&id.into_u64()) {
            s.closed = true;
        }
        true
    }
}

#[test]
fn every_batch_and_every_root_is_one_closed_span_with_its_fields() {
    let ocr = rayorch::Call::per_record("ocr", |p: u32| match p {
        4 => Outcome::RecordFailure(Cause::new("page 4 is unreadable")),
        p => Outcome::Ok(p * 10),
    })
    .replicas(2)
    .batch_size(3);
    let (plan, _) = common::pages_plan(ocr);
    let capture: &'static Capture = Box::leak(Box::default());
    // tracing-core caches each callsite's interest when it is first hit, and
    // while only one dispatcher is registered it asks the *hitting thread's*
    // default alone. A test running beside this one (no subscriber) that
    // first hits the batch span's callsite while `capture` is the only
    // registered dispatcher would cache "never" for it, and this run would
    // record no batch span. A second registered dispatcher (one that wants
    // nothing) makes every registration ask all of them, `capture` included.
    let _others = tracing::Dispatch::new(tracing::subscriber::NoSubscriber::default());
    let summary = tracing::subscriber::with_default(capture, || {
        // That race, made certain: a run on a thread without a subscriber
        // hits every callsite first.
        std::thread::scope(|s| {
            s.spawn(|| {
                Runner::new(&plan)
                    .run([(9u64, 2u32)], Callback(|_: &RootOutcome| {}))
                    .unwrap()
            });
        });
        Runner::new(&plan)
            .window(3)
            .run(
                [(0u64, 6u32), (1, 2), (2, 5), (3, 1)],
                Callback(|_: &RootOutcome| {}),
            )
            .unwrap()
    });
    let spans: Vec<Span> = capture.spans.lock().unwrap().values().cloned().collect();
    assert!(spans.iter().all(|s| s.closed), "every span is closed: {spans:?}");
    let of = |name: &str| {
        spans
            .iter()
            .filter(|s| s.name == name)
            .cloned()
            .collect::<Vec<_>>()
    };
    let roots = of("root");
    assert_eq!(roots.len() as u64, summary.roots);
    let outcome =
        |key: &str| roots.iter().find(|s| s.fields["key"] == key).unwrap().fields["outcome"].clone();
    // Roots 0 and 2 have a page 4 (6 and 5 pages): suppressed by it (a
    // reduce over a failed page); the others present.
    assert_eq!(
        ["0", "1", "2", "3"].map(outcome),
        ["suppressed", "present", "suppressed", "present"].map(String::from)
    );
    let batches = of("batch");
    let total: u64 = summary.calls.iter().map(|c| c.rpcs).sum();
    assert_eq!(batches.len() as u64, total, "one span per batch");
    let ocr_batches: Vec<_> = batches.iter().filter(|s| s.fields["call"] == "ocr").collect();
    let m = summary.call("ocr").unwrap();
    assert_eq!(ocr_batches.len() as u64, m.rpcs);
    let grains: u64 = ocr_batches
        .iter()
        .map(|s| s.fields["size"].parse::<u64>().unwrap())
        .sum();
    assert_eq!(grains, m.grains_dispatched);
    let mixed = ocr_batches
        .iter()
        .filter(|s| s.fields["parents_mixed"] == "true")
        .count() as u64;
    assert_eq!(mixed, m.mixed_parent_batches);
    assert!(
        ocr_batches
            .iter()
            .all(|s| s.fields["replica"] == "0" || s.fields["replica"] == "1")
    );
    assert!(ocr_batches.iter().all(|s| s.fields["outcome"] == "reported"));
}
