//! Sources as streams (backpressure, duplicate keys) and run control
//! (cancellation, draining, the observer) through the threaded Runner.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use rayorch::prelude::*;
use rayorch::sink::Callback;
use rayorch::{BatchDispatched, BatchFinished, DomainCounts, Observer};
use rayorch::{ItemKind, RootOutcome, Runner};

domain!(Doc);
domain!(Page: Doc);

fn id_plan(stage: FnCall<u32, u32>) -> (Plan, rayorch::Output<u32>) {
    Plan::build(|b| {
        let x = b.source::<Doc, u32>();
        b.output(stage.apply(x))
    })
    .unwrap()
}

#[test]
fn a_stream_is_polled_only_while_the_window_has_room() {
    const WINDOW: usize = 3;
    const N: usize = 10;
    let pulled = Arc::new(AtomicUsize::new(0));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let (p, s) = (pulled.clone(), seen.clone());
    // One replica, one root per batch, FIFO: while batch i runs, roots
    // i..i+WINDOW are live and the window is full.
    let stage = Call::batch("id", move |batch: Vec<u32>| {
        s.lock().unwrap().push(p.load(Ordering::SeqCst));
        Ok(batch.into_iter().map(Outcome::Ok).collect())
    })
    .batch_size(1);
    let (plan, out) = id_plan(stage);
    let p = pulled.clone();
    let source = futures::stream::iter(0..N as u64).map(move |k| {
        p.fetch_add(1, Ordering::SeqCst);
        (k, k as u32)
    });
    let mut got = Vec::new();
    let summary = Runner::new(&plan)
        .window(WINDOW)
        .run_stream(
            source,
            Callback(|o: &RootOutcome| got.push(o.get(out).present().unwrap())),
        )
        .unwrap();
    let expected: Vec<usize> = (0..N).map(|i| (WINDOW + i).min(N)).collect();
    assert_eq!(
        *seen.lock().unwrap(),
        expected,
        "items pulled when each batch ran"
    );
    assert_eq!(got, (0..N as u32).collect::<Vec<_>>());
    assert_eq!(summary.roots, N as u64);
}

#[test]
fn a_queue_fed_from_another_thread_is_a_source() {
    let stage = Call::map("double", |x: u32| 2 * x).batch_size(4);
    let (plan, out) = id_plan(stage);
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<(u64, u32)>();
    let producer = std::thread::spawn(move || {
        for k in 0..50u64 {
            tx.send((k, k as u32)).unwrap();
            if k % 10 == 0 {
                std::thread::yield_now();
            }
        }
    });
    let queue = futures::stream::unfold(rx, |mut rx| async { rx.recv().await.map(|item| (item, rx)) });
    let mut got = BTreeMap::new();
    let summary = Runner::new(&plan)
        .window(8)
        .run_stream(
            queue,
            Callback(|o: &RootOutcome| {
                got.insert(o.key, o.get(out).present().unwrap());
            }),
        )
        .unwrap();
    producer.join().unwrap();
    assert_eq!(got.len(), 50);
    assert!(got.iter().all(|(k, v)| *v == 2 * *k as u32));
    assert_eq!(summary.present, 50);
}

/// Window 1: the second key 0 arrives after the first finished.
const REPEATED_AFTER: [(u64, u32); 4] = [(0, 10), (1, 11), (0, 12), (2, 13)];

#[test]
fn a_duplicate_key_fails_that_root_only_whether_live_or_finished() {
    let stage = Call::map("id", |x: u32| x).batch_size(1);
    let (plan, out) = id_plan(stage);
    // The second key 0 arrives after the first finished (window 1): refused
    // with `unique_keys`; the second key 7 arrives while the first is still
    // live (window 4): refused always.
    let mut got: Vec<(u64, Item<u32>)> = Vec::new();
    let summary = Runner::new(&plan)
        .window(1)
        .unique_keys(true)
        .run(
            REPEATED_AFTER,
            Callback(|o: &RootOutcome| got.push((o.key, o.get(out)))),
        )
        .unwrap();
    assert_eq!(got.len(), 4, "the sink sees every root the source yielded");
    let dup = got
        .iter()
        .find(|(k, i)| *k == 0 && i.kind() == ItemKind::Failed)
        .unwrap();
    let cause = dup.1.cause().unwrap();
    assert!(
        cause.message().contains("root key 0 was already given"),
        "{cause}"
    );
    assert_eq!(
        cause.kind(),
        Some(rayorch::FailureKind::Source),
        "the source's mistake"
    );
    assert!(got.contains(&(0, Item::Present(10))) && got.contains(&(2, Item::Present(13))));
    assert_eq!(
        (
            summary.roots,
            summary.present,
            summary.failed,
            summary.duplicate_keys
        ),
        (4, 3, 1, 1)
    );

    let mut got = Vec::new();
    let summary = Runner::new(&plan)
        .window(4)
        .run(
            [(7u64, 1u32), (7, 2), (8, 3)],
            Callback(|o: &RootOutcome| got.push((o.key, o.get(out).kind()))),
        )
        .unwrap();
    got.sort_by_key(|(k, kind)| (*k, *kind == ItemKind::Present));
    assert_eq!(
        got,
        vec![
            (7, ItemKind::Failed),
            (7, ItemKind::Present),
            (8, ItemKind::Present)
        ]
    );
    assert_eq!(summary.duplicate_keys, 1);
}

/// Without `unique_keys` the run keeps no set of every key (its memory does
/// not grow with its length): a key repeated after its first root finished
/// runs again, unless the run is journaled, where the journal answers.
#[test]
fn without_unique_keys_only_live_or_journaled_keys_are_refused() {
    let stage = Call::map("id", |x: u32| x).batch_size(1);
    let (plan, out) = id_plan(stage);
    let mut got: Vec<(u64, Item<u32>)> = Vec::new();
    let summary = Runner::new(&plan)
        .window(1)
        .run(
            REPEATED_AFTER,
            Callback(|o: &RootOutcome| got.push((o.key, o.get(out)))),
        )
        .unwrap();
    assert_eq!(summary.duplicate_keys, 0);
    assert!(got.contains(&(0, Item::Present(10))) && got.contains(&(0, Item::Present(12))));

    let dir = std::env::temp_dir().join(format!("rayorch-unique-keys-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let mut got: Vec<(u64, Item<u32>)> = Vec::new();
    let summary = Runner::new(&plan)
        .window(1)
        .journal(dir.join("journal.redb"))
        .run(
            REPEATED_AFTER,
            Callback(|o: &RootOutcome| got.push((o.key, o.get(out)))),
        )
        .unwrap();
    assert_eq!((summary.duplicate_keys, summary.present), (1, 3), "{got:?}");
    assert!(got.contains(&(0, Item::Present(10))));
    let dup = got.iter().find(|(k, i)| *k == 0 && i.kind() == ItemKind::Failed);
    assert!(dup.is_some(), "{got:?}");
    // A second run over the same journal skips every finished key, the
    // repeated one included, and refuses nothing.
    let mut again = Vec::new();
    let summary = Runner::new(&plan)
        .window(1)
        .journal(dir.join("journal.redb"))
        .run(REPEATED_AFTER, Callback(|o: &RootOutcome| again.push(o.key)))
        .unwrap();
    assert_eq!((summary.journal_skipped, summary.duplicate_keys), (4, 0));
    assert!(again.is_empty(), "{again:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A stage that pulls the handle's lever when it sees key 2.
fn lever_plan(pull: impl Fn() + Clone + Send + Sync + 'static) -> (Plan, rayorch::Output<u32>) {
    let stage = Call::batch("id", move |batch: Vec<u32>| {
        if batch.contains(&2) {
            pull();
        }
        Ok(batch.into_iter().map(Outcome::Ok).collect())
    })
    .batch_size(1);
    id_plan(stage)
}

#[test]
fn cancel_hands_every_live_root_to_the_sink_as_failed_and_returns() {
    let handle = Arc::new(Mutex::new(None::<rayorch::CancelHandle>));
    let h = handle.clone();
    let (plan, out) = lever_plan(move || h.lock().unwrap().as_ref().unwrap().cancel());
    let runner = Runner::new(&plan).window(4);
    *handle.lock().unwrap() = Some(runner.cancel_handle());
    let mut got: Vec<(u64, Item<u32>)> = Vec::new();
    let pulled = AtomicUsize::new(0);
    let summary = runner
        .run(
            (0..1000u64).map(|k| {
                pulled.fetch_add(1, Ordering::SeqCst);
                (k, k as u32)
            }),
            Callback(|o: &RootOutcome| got.push((o.key, o.get(out)))),
        )
        .unwrap();
    assert!(summary.cancelled);
    // Roots 0 and 1 finished; 2..=5 were live (window 4) when key 2 cancelled.
    assert_eq!(
        pulled.load(Ordering::SeqCst),
        6,
        "nothing admitted after the cancel"
    );
    let mut keys: Vec<u64> = got.iter().map(|(k, _)| *k).collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        (0..6).collect::<Vec<_>>(),
        "each admitted root exactly once"
    );
    for (k, item) in &got {
        match k {
            0 | 1 => assert_eq!(item, &Item::Present(*k as u32)),
            3..=5 => {
                let cause = item.cause().unwrap();
                assert!(cause.message().contains("cancelled"));
                assert_eq!(cause.kind(), Some(rayorch::FailureKind::Cancelled));
            }
            _ => {} // root 2's report may beat the cancellation
        }
    }
    assert_eq!(summary.roots, 6);
    assert_eq!(summary.present + summary.failed, 6);
    assert!(summary.abandoned >= 3);
    assert!(handle.lock().unwrap().as_ref().unwrap().is_cancelled());
}

#[test]
fn stop_admitting_lets_roots_in_flight_finish() {
    let handle = Arc::new(Mutex::new(None::<rayorch::CancelHandle>));
    let h = handle.clone();
    let (plan, out) = lever_plan(move || h.lock().unwrap().as_ref().unwrap().stop_admitting());
    let runner = Runner::new(&plan).window(4);
    *handle.lock().unwrap() = Some(runner.cancel_handle());
    let mut got = Vec::new();
    let summary = runner
        .run(
            (0..1000u64).map(|k| (k, k as u32)),
            Callback(|o: &RootOutcome| got.push((o.key, o.get(out)))),
        )
        .unwrap();
    got.sort_by_key(|(k, _)| *k);
    assert_eq!(
        got,
        (0..6u64)
            .map(|k| (k, Item::Present(k as u32)))
            .collect::<Vec<_>>()
    );
    assert!(!summary.cancelled);
    assert_eq!((summary.roots, summary.abandoned), (6, 0));
}

/// A sink may stop the run itself: from its `stop_admitting` or `cancel`
/// on, the source is not polled again (the roots already pulled run, or are
/// handed out cancelled).
#[test]
fn a_sink_that_stops_the_run_has_no_further_root_pulled() {
    for cancel in [false, true] {
        let (plan, out) = id_plan(Call::map("id", |x: u32| x).batch_size(1));
        let runner = Runner::new(&plan).window(2);
        let handle = runner.cancel_handle();
        let pulled = Arc::new(AtomicUsize::new(0));
        let p = pulled.clone();
        let source = (0..20u64).map(move |k| {
            p.fetch_add(1, Ordering::SeqCst);
            (k, k as u32)
        });
        let mut at_stop = None;
        let mut got = Vec::new();
        let summary = runner
            .run(
                source,
                Callback(|o: &RootOutcome| {
                    got.push(o.get(out).kind());
                    if at_stop.is_none() {
                        match cancel {
                            true => handle.cancel(),
                            false => handle.stop_admitting(),
                        }
                        at_stop = Some(pulled.load(Ordering::SeqCst));
                    }
                }),
            )
            .unwrap();
        let pulled = pulled.load(Ordering::SeqCst);
        assert_eq!(Some(pulled), at_stop, "cancel: {cancel}");
        assert_eq!(
            (summary.roots as usize, got.len()),
            (pulled, pulled),
            "cancel: {cancel}"
        );
        assert_eq!(summary.cancelled, cancel);
    }
}

#[derive(Default)]
struct Seen {
    dispatched: Vec<(String, usize, usize)>,
    finished: Vec<(String, usize, usize)>,
    domains: Vec<Vec<DomainCounts>>,
}

struct Recorder(Arc<Mutex<Seen>>);

impl Observer for Recorder {
    fn batch_dispatched(&mut self, b: &BatchDispatched<'_>) {
        self.0
            .lock()
            .unwrap()
            .dispatched
            .push((b.call.to_string(), b.size, b.retries));
    }
    fn batch_finished(&mut self, b: &BatchFinished<'_>) {
        self.0
            .lock()
            .unwrap()
            .finished
            .push((b.call.to_string(), b.size, b.ok));
    }
    fn domains(&mut self, counts: &[DomainCounts]) {
        self.0.lock().unwrap().domains.push(counts.to_vec());
    }
}

#[test]
fn the_observer_sees_every_batch_and_per_domain_counts_without_wrapping_stages() {
    let render = Call::map("render", |n: u32| (0..n).collect::<Vec<u32>>());
    let ocr = Call::per_record("ocr", |p: u32| {
        if p == 5 {
            Outcome::RecordFailure(Cause::new("unreadable page"))
        } else {
            Outcome::Ok(p)
        }
    })
    .batch_size(4);
    let (plan, out) = Plan::build(|b| {
        let docs = b.source::<Doc, u32>();
        b.output(reduce(ocr.apply(expand::<Page, _, _>(render.apply(docs)))))
    })
    .unwrap();
    let seen = Arc::new(Mutex::new(Seen::default()));
    let docs = [3u32, 0, 7, 1, 12];
    let summary = Runner::new(&plan)
        .window(2)
        .observe(Recorder(seen.clone()))
        .run(
            docs.iter().enumerate().map(|(i, &n)| (i as u64, n)),
            Callback(|o: &RootOutcome| {
                let _ = o.get(out);
            }),
        )
        .unwrap();
    let seen = seen.lock().unwrap();
    for name in ["render", "ocr"] {
        let m = summary.call(name).unwrap();
        let d: Vec<_> = seen.dispatched.iter().filter(|(c, ..)| c == name).collect();
        let f: Vec<_> = seen.finished.iter().filter(|(c, ..)| c == name).collect();
        assert_eq!(d.len() as u64, m.rpcs, "{name}: one event per dispatched batch");
        assert_eq!(f.len() as u64, m.rpcs, "{name}: one event per finished batch");
        assert_eq!(d.iter().map(|x| x.1 as u64).sum::<u64>(), m.grains_dispatched);
        assert!(d.iter().all(|x| x.2 == 0), "no retries in this run");
    }
    let ocr = summary.call("ocr").unwrap();
    let ok: usize = seen
        .finished
        .iter()
        .filter(|(c, ..)| c == "ocr")
        .map(|x| x.2)
        .sum();
    assert_eq!(ok as u64, ocr.committed);
    assert_eq!(
        ocr.record_failures, 2,
        "page 5 of the 7- and of the 12-page document"
    );
    let last = seen.domains.last().unwrap();
    assert_eq!(last, &summary.domains, "the observer saw the final counts");
    let expect = |domain, published, done, failed, suppressed| DomainCounts {
        domain,
        published,
        done,
        failed,
        suppressed,
    };
    // Doc: the two documents with a failed page are not present. Page: a
    // document whose page failed is decided at once, so its pages not yet
    // dispatched never reach `ocr` (published counts those that did).
    let doc = &summary.domains[0];
    assert_eq!((doc.published, doc.done, doc.failed + doc.suppressed), (5, 3, 2));
    assert_eq!(
        summary.domains[1],
        expect("Page", ocr.grains_dispatched, ocr.committed, 2, 0)
    );
    assert!(
        ocr.grains_dispatched < 23,
        "the rest of the 12-page document was never run"
    );
    // Counts only grow.
    for w in seen.domains.windows(2) {
        for (a, b) in w[0].iter().zip(&w[1]) {
            assert!(b.published >= a.published && b.done >= a.done && b.failed >= a.failed);
        }
    }
}

#[test]
fn the_summary_tells_when_the_first_present_root_reached_the_sink() {
    let stage = Call::per_record("id", |x: u32| {
        if x == 0 {
            Outcome::RecordFailure(Cause::new("bad"))
        } else {
            Outcome::Ok(x)
        }
    })
    .batch_size(1);
    let (plan, _) = id_plan(stage);
    let none = |_: &RootOutcome| {};
    let summary = Runner::new(&plan)
        .window(1)
        .run([(0u64, 0u32), (1, 1)], Callback(none))
        .unwrap();
    let (first, present) = (summary.first_root_s.unwrap(), summary.first_present_s.unwrap());
    assert!(present >= first);
    let summary = Runner::new(&plan).run([(0u64, 0u32)], Callback(none)).unwrap();
    assert!(summary.first_root_s.is_some());
    assert_eq!(summary.first_present_s, None, "no root was present");
}

/// Counts drops: an async attempt given up by a cancellation is dropped.
struct DropCount(Arc<AtomicUsize>);

impl Drop for DropCount {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

struct Hang {
    started: Arc<AtomicUsize>,
    dropped: Arc<AtomicUsize>,
}

impl rayorch::AsyncStage for Hang {
    type In = u32;
    type Out = u32;
    fn run(
        self: Arc<Self>,
        _batch: Vec<u32>,
        _cx: rayorch::StageContext,
    ) -> impl Future<Output = StageResult<u32>> + Send {
        self.started.fetch_add(1, Ordering::SeqCst);
        let guard = DropCount(self.dropped.clone());
        async move {
            let _guard = guard;
            tokio::time::sleep(std::time::Duration::from_secs(3600)).await;
            Err("unreachable in this test".into())
        }
    }
}

/// One async Call whose attempts hang (batches of 2, 3 at once), with
/// the counts of attempts started and dropped.
fn hanging_plan() -> (Plan, Arc<AtomicUsize>, Arc<AtomicUsize>) {
    let (started, dropped) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let (s, d) = (started.clone(), dropped.clone());
    let hang = Call::new_async("hang", move || {
        Ok(Hang {
            started: s.clone(),
            dropped: d.clone(),
        })
    })
    .batch_size(2)
    .concurrency(3);
    let (plan, _) = Plan::build(|b| {
        let x = b.source::<Doc, u32>();
        b.output(hang.apply(x))
    })
    .unwrap();
    (plan, started, dropped)
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn cancel_drops_async_attempts_in_flight() {
    let (plan, started, dropped) = hanging_plan();
    let runner = Runner::new(&plan).window(6);
    let handle = runner.cancel_handle();
    let canceller = tokio::spawn(async move {
        tokio::time::sleep(std::time::Duration::from_secs(10)).await;
        handle.cancel();
    });
    let mut got = Vec::new();
    let summary = runner
        .run_async(
            (0..100u64).map(|k| (k, k as u32)),
            Callback(|o: &RootOutcome| got.push((o.key, o.kind()))),
        )
        .await
        .unwrap();
    canceller.await.unwrap();
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
    assert!(summary.cancelled);
    assert_eq!(
        started.load(Ordering::SeqCst),
        3,
        "window 6, batches of 2, 3 in flight"
    );
    assert_eq!(
        dropped.load(Ordering::SeqCst),
        3,
        "every attempt in flight was dropped"
    );
    got.sort_unstable_by_key(|(k, _)| *k);
    assert_eq!(got, (0..6).map(|k| (k, ItemKind::Failed)).collect::<Vec<_>>());
    assert_eq!((summary.roots, summary.abandoned, summary.failed), (6, 6, 6));
}

/// Dropping a `run_async` future (a `select!` that lost, a timeout) ends
/// the run: its async attempts in flight are dropped with it, none goes on
/// running on the runtime, and no root reaches the sink after the drop.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn dropping_a_run_future_drops_its_async_attempts() {
    let (plan, started, dropped) = hanging_plan();
    let runner = Runner::new(&plan).window(6);
    let got = std::sync::Mutex::new(Vec::new());
    let run = runner.run_async(
        (0..100u64).map(|k| (k, k as u32)),
        Callback(|o: &RootOutcome| got.lock().unwrap().push(o.key)),
    );
    let timed_out = tokio::time::timeout(std::time::Duration::from_secs(10), run).await;
    assert!(timed_out.is_err(), "the run hangs until dropped");
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
    assert_eq!(started.load(Ordering::SeqCst), 3, "3 attempts were in flight");
    assert_eq!(
        dropped.load(Ordering::SeqCst),
        3,
        "each was dropped with the run's future"
    );
    assert!(got.lock().unwrap().is_empty(), "no root finished");
}
