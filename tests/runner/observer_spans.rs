//! The observer's per-batch spans (`BatchFinished::replica`, `started`,
//! `duration`): what a per-replica timeline is drawn from. Checked against
//! the run's own metrics, by counts and sums, never by how long anything took.

use crate::common;

use std::sync::{Arc, Mutex};

use rayorch::sink::Callback;
use rayorch::{BatchFinished, Observer, RootOutcome, Runner};

/// (call index, replica, start s, end s) of every finished batch.
type Spans = Arc<Mutex<Vec<(usize, usize, f64, f64)>>>;

struct Record(Spans);

impl Observer for Record {
    fn batch_finished(&mut self, b: &BatchFinished<'_>) {
        let start = b.started.as_secs_f64();
        let end = start + b.duration.as_secs_f64();
        self.0.lock().unwrap().push((b.call_index, b.replica, start, end));
    }
}

#[test]
fn every_batch_is_one_span_on_its_replica_and_a_replica_runs_one_at_a_time() {
    // A blocking Call on two replicas, one page per batch: many batches.
    let ocr = rayorch::Call::map("ocr", |p: u32| p * 10)
        .replicas(2)
        .batch_size(1);
    let (plan, out) = common::pages_plan(ocr);
    let spans: Spans = Arc::default();
    let mut rows = Vec::new();
    let summary = Runner::new(&plan)
        .window(4)
        .observe(Record(spans.clone()))
        .run(
            [(0u64, 6u32), (1, 9), (2, 5)],
            Callback(|o: &RootOutcome| rows.push(o.get(out))),
        )
        .unwrap();
    assert_eq!(rows.len(), 3);
    let spans = spans.lock().unwrap().clone();
    let c = common::call_index(&plan, "ocr");
    let m = summary.call("ocr").unwrap();
    let ocr: Vec<_> = spans.iter().filter(|s| s.0 == c).collect();
    assert_eq!(ocr.len() as u64, m.rpcs, "one span per batch");
    assert_eq!(m.rpcs, 20, "one page per batch");
    assert!(ocr.iter().all(|s| s.1 < 2), "replica ids are slots 0..replicas");
    // The spans add up to the Call's busy time and lie inside the run.
    let busy: f64 = ocr.iter().map(|s| s.3 - s.2).sum();
    assert!((busy - m.busy_s).abs() < 1e-6, "{busy} vs {}", m.busy_s);
    assert!(spans.iter().all(|s| s.2 <= s.3 && s.3 <= summary.wall_s + 1e-6));
    let first = ocr.iter().map(|s| s.2).fold(f64::INFINITY, f64::min);
    let last = ocr.iter().map(|s| s.3).fold(0.0, f64::max);
    assert!(m.window_start_s.unwrap() <= first + 1e-9);
    assert!((last - m.window_end_s.unwrap()).abs() < 1e-6);
    // A blocking replica holds one batch at a time: its spans never overlap.
    for r in 0..2 {
        let mut mine: Vec<_> = ocr.iter().filter(|s| s.1 == r).collect();
        mine.sort_by(|a, b| a.2.total_cmp(&b.2));
        for w in mine.windows(2) {
            assert!(w[1].2 >= w[0].3, "replica {r}: {:?} overlaps {:?}", w[0], w[1]);
        }
    }
}
