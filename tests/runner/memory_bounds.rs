//! Memory bounds of the threaded Runner, by counts (issue 12, item 4):
//! - a slow sink slows the run instead of letting finished roots pile up
//!   (roots pulled from the source ≤ roots delivered + window);
//! - a bounded channel sink buffers at most its capacity;
//! - `window_children` keeps the pages of admitted roots within the bound
//!   plus one root's pages with `unexpanded_roots(1)`, and by default still
//!   lets the Call before the Expansion run all its replicas at once
//!   (issue 26: it used to see one root at a time);
//! - a child stops counting once its parent has consumed it, so a long
//!   text-dense root does not hold short roots behind it (issue 27, item 4);
//! - `backpressure` keeps a fast producer's outputs parked in front of a
//!   slow consumer within `k` batches (plus what is in flight).
//!
//! The stages sleep to be slow; nothing asserts on time, only on counts that
//! hold under every schedule.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering::SeqCst};
use std::time::Duration;

use rayorch::prelude::*;
use rayorch::sink::{BoundedChannelSink, Callback};
use rayorch::{BatchDispatched, Observer, Output, RootOutcome, Runner};

domain!(Doc);
domain!(Page: Doc);
domain!(Line: Page);

fn doubling() -> (Plan, Output<u64>) {
    let double = Call::map("double", |x: u64| 2 * x).batch_size(4).replicas(2);
    Plan::build(|b| {
        let xs = b.source::<Doc, u64>();
        b.output(double.apply(xs))
    })
    .unwrap()
}

/// `n` roots whose source counts every root pulled from it.
fn counted(n: u64, pulled: &Arc<AtomicUsize>) -> impl Iterator<Item = (u64, u64)> + use<> {
    let pulled = pulled.clone();
    (0..n).map(move |k| {
        pulled.fetch_add(1, SeqCst);
        (k, k)
    })
}

#[test]
fn a_slow_sink_holds_the_source_back_instead_of_buffering() {
    let (plan, out) = doubling();
    let pulled = Arc::new(AtomicUsize::new(0));
    let (mut delivered, mut worst, mut sum) = (0usize, 0usize, 0u64);
    let window = 4;
    Runner::new(&plan)
        .window(window)
        .run(
            counted(200, &pulled),
            Callback::new(|o: &RootOutcome| {
                std::thread::sleep(Duration::from_millis(1));
                delivered += 1;
                sum += o.get(out).present().unwrap();
                worst = worst.max(pulled.load(SeqCst) - delivered);
            }),
        )
        .unwrap();
    assert_eq!((delivered, sum), (200, 2 * (0..200).sum::<u64>()));
    // The root being delivered is no longer live: at most `window - 1`
    // others were pulled and not yet delivered.
    assert!(worst < window, "{worst} roots pulled ahead of the sink");
}

#[test]
fn a_bounded_channel_sink_blocks_the_run_when_its_reader_is_slow() {
    let (plan, out) = doubling();
    let pulled = Arc::new(AtomicUsize::new(0));
    let (tx, rx) = std::sync::mpsc::sync_channel::<RootOutcome>(3);
    let p = pulled.clone();
    let reader = std::thread::spawn(move || {
        let (mut read, mut worst, mut sum) = (0usize, 0usize, 0u64);
        for o in rx {
            std::thread::sleep(Duration::from_millis(1));
            read += 1;
            sum += o.get(out).present().unwrap();
            worst = worst.max(p.load(SeqCst) - read);
        }
        (read, worst, sum)
    });
    let window = 4;
    Runner::new(&plan)
        .window(window)
        .run(counted(200, &pulled), BoundedChannelSink(tx))
        .unwrap();
    let (read, worst, sum) = reader.join().unwrap();
    assert_eq!((read, sum), (200, 2 * (0..200).sum::<u64>()));
    // Unread: the channel's 3, one blocked in `send`, and the window.
    assert!(
        worst <= 3 + 1 + window,
        "{worst} roots pulled ahead of the reader"
    );
}

/// Doc → `n` pages → page + 1 → sum; `live` counts pages published and not
/// yet delivered, `worst` its maximum.
fn paged(live: &Arc<AtomicI64>, worst: &Arc<AtomicI64>) -> (Plan, Output<Vec<u32>>) {
    let (l, w) = (live.clone(), worst.clone());
    let split = Call::map("split", move |n: u32| {
        let now = l.fetch_add(n as i64, SeqCst) + n as i64;
        w.fetch_max(now, SeqCst);
        (0..n).collect::<Vec<u32>>()
    })
    .replicas(2);
    let ocr = Call::map("ocr", |p: u32| p + 1).batch_size(16).replicas(2);
    Plan::build(|b| {
        let d = b.source::<Doc, u32>();
        b.output(reduce(ocr.apply(expand::<Page, _, _>(split.apply(d)))))
    })
    .unwrap()
}

#[test]
fn the_children_window_bounds_pages_in_flight_through_the_runner() {
    let (live, worst) = (Arc::new(AtomicI64::new(0)), Arc::new(AtomicI64::new(0)));
    let (plan, out) = paged(&live, &worst);
    let mut pages = 0usize;
    Runner::new(&plan)
        .window(64)
        .window_children(1_000)
        .unexpanded_roots(1)
        .run(
            (0..40u64).map(|k| (k, 427u32)),
            Callback::new(|o: &RootOutcome| {
                let n = o.get(out).present().unwrap().len();
                pages += n;
                live.fetch_sub(n as i64, SeqCst);
            }),
        )
        .unwrap();
    assert_eq!(pages, 40 * 427);
    let worst = worst.load(SeqCst);
    assert!(worst < 1_000 + 427, "{worst} pages live");
    assert!(worst >= 1_000, "{worst}: the bound was never reached");
}

#[test]
fn backpressure_keeps_a_fast_producer_a_few_batches_ahead_of_a_slow_consumer() {
    let parked = Arc::new(AtomicI64::new(0));
    let worst = Arc::new(AtomicI64::new(0));
    let (p, w, q) = (parked.clone(), worst.clone(), parked.clone());
    let split = Call::map("split", |n: u32| (0..n).collect::<Vec<u32>>());
    // Fast: counts each output as parked until the consumer starts on it.
    let render = Call::map("render", move |x: u32| {
        let now = p.fetch_add(1, SeqCst) + 1;
        w.fetch_max(now, SeqCst);
        x
    })
    .batch_size(2);
    // Slow: 1 ms per Grain.
    let detect = Call::map("detect", move |x: u32| {
        q.fetch_sub(1, SeqCst);
        std::thread::sleep(Duration::from_millis(1));
        x * 3
    })
    .batch_size(4);
    let (plan, out) = Plan::build(|b| {
        let d = b.source::<Doc, u32>();
        b.output(reduce(
            detect.apply(render.apply(expand::<Page, _, _>(split.apply(d)))),
        ))
    })
    .unwrap();
    let mut total = 0u64;
    Runner::new(&plan)
        .backpressure(2)
        .run(
            [(0u64, 300u32), (1, 5)],
            Callback::new(|o: &RootOutcome| {
                total += o
                    .get(out)
                    .present()
                    .unwrap()
                    .iter()
                    .map(|&x| x as u64)
                    .sum::<u64>();
            }),
        )
        .unwrap();
    assert_eq!(total, 3 * ((0..300u64).sum::<u64>() + (0..5u64).sum::<u64>()));
    // Held at 2 × 4 queued; plus render's batch in flight (2), detect's
    // batch being reserved (4) and one more render batch committed while
    // detect was between batches (2).
    let worst = worst.load(SeqCst);
    assert!(worst <= 2 * 4 + 2 + 4 + 2, "{worst} rendered outputs parked");
}

/// Counts the batches dispatched to one Call.
struct Dispatched {
    call: &'static str,
    batches: Arc<AtomicUsize>,
}

impl Observer for Dispatched {
    fn batch_dispatched(&mut self, b: &BatchDispatched<'_>) {
        if b.call == self.call {
            self.batches.fetch_add(1, SeqCst);
        }
    }
}

/// Under the children window, the Call before the first Expansion gets as
/// many roots at once as its replicas can run: each `render` waits (up to
/// a safety timeout) until the other replica is rendering too, and counts
/// whether it was. With `unexpanded_roots(1)` (the old rule) no two roots
/// are ever unexpanded together, so no render ever has company.
#[test]
fn the_call_before_the_expansion_runs_its_replicas_in_parallel() {
    use std::sync::{Condvar, Mutex};
    fn run(unexpanded: Option<usize>) -> (usize, usize) {
        // (renders running now, renders that met another one).
        let meet = Arc::new((Mutex::new((0usize, 0usize)), Condvar::new()));
        let m = meet.clone();
        let render = Call::map("render", move |n: u32| {
            let (lock, cv) = &*m;
            let mut g = lock.lock().unwrap();
            g.0 += 1;
            cv.notify_all();
            let (mut g, _) = cv
                .wait_timeout_while(g, Duration::from_millis(300), |g| g.0 < 2)
                .unwrap();
            if g.0 >= 2 {
                g.1 += 1;
            }
            drop(g);
            // Stay a little so the other one sees this one too.
            std::thread::sleep(Duration::from_millis(5));
            lock.lock().unwrap().0 -= 1;
            (0..n).collect::<Vec<u32>>()
        })
        .replicas(2)
        .batch_size(1);
        let ocr = Call::map("ocr", |p: u32| p + 1).batch_size(16);
        let (plan, out) = Plan::build(|b| {
            let d = b.source::<Doc, u32>();
            b.output(reduce(ocr.apply(expand::<Page, _, _>(render.apply(d)))))
        })
        .unwrap();
        let mut runner = Runner::new(&plan).window(16).window_children(1_000);
        if let Some(k) = unexpanded {
            runner = runner.unexpanded_roots(k);
        }
        let mut docs = 0;
        runner
            .run(
                (0..6u64).map(|k| (k, 3u32)),
                Callback::new(|o: &RootOutcome| {
                    assert_eq!(o.get(out).present().unwrap().len(), 3);
                    docs += 1;
                }),
            )
            .unwrap();
        (docs, meet.0.lock().unwrap().1)
    }
    let (docs, met) = run(None);
    assert_eq!(docs, 6);
    assert!(
        met >= 2,
        "by default two renders ran together ({met} met another)"
    );
    let (docs, met) = run(Some(1));
    assert_eq!(docs, 6);
    assert_eq!(met, 0, "one unexpanded root at a time: renders never overlap");
}

/// Issue 27, item 4: one text-dense document (10 pages of 40 lines) is
/// admitted first, then five one-page documents, under a children window
/// (400) above the dense document's pages (10) but below its pages and
/// lines (410). A line counts until its page has gathered it, so once the
/// dense document's first page is reduced (5 `ocr` batches of 8) there is
/// room again and the short documents pass while the dense one still has
/// most of its 50 batches to run. (Before, a line counted until its
/// document was released, and the short ones waited for all 50.)
#[test]
fn short_roots_pass_a_long_text_dense_root_under_the_children_window() {
    const PAGES: u32 = 10;
    const LINES: u32 = 40;
    const BATCH: usize = 8;
    let split = Call::map("split", |(pages, lines): (u32, u32)| {
        vec![(0..lines).collect::<Vec<u32>>(); pages as usize]
    });
    // Slow enough that the short roots' split and ocr batches are
    // dispatched while the dense root's ocr work is still queued; nothing
    // below asserts on time.
    let ocr = Call::map("ocr", |x: u32| {
        std::thread::sleep(Duration::from_millis(2));
        x + 1
    })
    .batch_size(BATCH);
    let (plan, out) = Plan::build(|b| {
        let docs = b.source::<Doc, (u32, u32)>();
        let pages = expand::<Page, _, _>(split.apply(docs));
        let lines = expand::<Line, _, _>(pages);
        b.output(reduce(reduce(ocr.apply(lines))))
    })
    .unwrap();
    let batches = Arc::new(AtomicUsize::new(0));
    let roots = std::iter::once((0u64, (PAGES, LINES))).chain((1..=5u64).map(|k| (k, (1, 1))));
    // (key, ocr batches dispatched when it reached the sink), in order.
    let mut delivered: Vec<(u64, usize)> = Vec::new();
    Runner::new(&plan)
        .window(8)
        .window_children(400)
        .observe(Dispatched {
            call: "ocr",
            batches: batches.clone(),
        })
        .run(
            roots,
            Callback::new(|o: &RootOutcome| {
                let pages = o.get(out).present().unwrap();
                let (n, lines) = if o.key == 0 { (PAGES, LINES) } else { (1, 1) };
                assert_eq!(pages, vec![(1..=lines).collect::<Vec<u32>>(); n as usize]);
                delivered.push((o.key, batches.load(SeqCst)));
            }),
        )
        .unwrap();
    let dense_at = delivered.iter().position(|&(k, _)| k == 0).unwrap();
    let total = (PAGES * LINES) as usize / BATCH;
    assert_eq!(delivered.len(), 6);
    assert_eq!(
        dense_at, 5,
        "every short root reaches the sink before the dense one: {delivered:?}"
    );
    // The first short root waits for one dense page (5 batches), the
    // batches still in flight then, and its own: a few batches, not the
    // dense root's 50.
    let first = delivered[0].1;
    assert!(
        first <= 3 * LINES as usize / BATCH,
        "{first} of {total} ocr batches were dispatched before the first short root was written: {delivered:?}"
    );
}

/// The most the loop held at any snapshot of a run, and how many it took.
#[derive(Default, Debug)]
struct Held {
    keys: usize,
    roots: usize,
    children: usize,
    snapshots: usize,
    last_keys: usize,
}

struct HeldWatch(Arc<std::sync::Mutex<Held>>);

impl Observer for HeldWatch {
    fn progress_every(&self) -> Option<Duration> {
        Some(Duration::from_millis(2))
    }
    fn progress(&mut self, p: &rayorch::Progress<'_>) {
        let mut h = self.0.lock().unwrap();
        let a = &p.admission;
        h.keys = h.keys.max(a.keys_held);
        h.roots = h.roots.max(a.roots);
        h.children = h.children.max(a.children);
        h.snapshots += 1;
        h.last_keys = a.keys_held;
    }
}

/// `n` tiny roots, each split into two pages and gathered back, watched.
fn stream_pairs(n: u64, unique_keys: bool) -> (rayorch::RunSummary, Held) {
    let split = Call::map("split", |x: u64| vec![x, x + 1]).batch_size(64);
    let add = Call::map("add", |p: u64| p + 1).batch_size(64);
    let (plan, out) = Plan::build(|b| {
        let docs = b.source::<Doc, u64>();
        b.output(reduce(add.apply(expand::<Page, _, _>(split.apply(docs)))))
    })
    .unwrap();
    let held = Arc::new(std::sync::Mutex::new(Held::default()));
    let mut wrong = 0u64;
    let summary = Runner::new(&plan)
        .window(64)
        .unique_keys(unique_keys)
        .observe(HeldWatch(held.clone()))
        .run(
            (0..n).map(|k| (k, k)),
            Callback::new(|o: &RootOutcome| {
                wrong += u64::from(o.get(out).present() != Some(vec![o.key + 1, o.key + 2]));
            }),
        )
        .unwrap();
    assert_eq!(wrong, 0, "every root's pages come back, in order");
    let held = std::mem::take(&mut *held.lock().unwrap());
    (summary, held)
}

/// A run's memory does not grow with its length: over a million roots the
/// loop holds no more keys, roots and pages than its windows allow (counts
/// from live snapshots, not timing). The run-wide key set is the opt-in
/// that grows: it holds every key at the end.
#[test]
fn a_million_roots_leave_the_loop_holding_no_more_than_its_windows() {
    let n = 1_000_000;
    let (summary, held) = stream_pairs(n, false);
    assert_eq!((summary.roots, summary.present), (n, n));
    assert!(held.snapshots >= 2, "{held:?}");
    assert!(held.keys <= 64 && held.roots <= 64, "{held:?}");
    assert!(held.children <= 2 * 64, "{held:?}");

    let n = 10_000;
    let (summary, held) = stream_pairs(n, true);
    assert_eq!(summary.present, n);
    assert_eq!(
        held.last_keys as u64, n,
        "the opt-in set holds every key: {held:?}"
    );
}

/// Issue 48, item 5: two text-dense documents (20 and 12 pages of 40
/// lines) admitted ahead of five one-page documents, through the OCR
/// job's shape and its default windows and backpressure: open (a whole
/// document) → expand pages → read (2 pages a batch) → detect (4 pages)
/// → expand lines → recognize (48 lines) → reduce → page text → reduce.
/// Counts, not time: the short documents reach the sink before the dense
/// ones, after a few recognition batches, not after the dense documents'
/// hundreds of lines. (It holds: under this shape the engine's scheduling
/// does not keep small documents behind two dense ones. With the job's
/// embedder added, a batch of 16 page texts waiting for its delay, the
/// short documents' texts wait for dense pages to fill the batch, up to
/// the delay: 16 recognition batches instead of 5 here, bounded by the
/// delay in time. The stall seen on a real corpus, minutes long, has
/// another cause, not found yet.)
#[test]
fn short_roots_pass_two_text_dense_roots_admitted_ahead_of_them() {
    const LINES: u32 = 40;
    let open = Call::map("open", |pages: u32| vec![LINES; pages as usize]).batch_size(1);
    let read = Call::map("read", |lines: u32| {
        std::thread::sleep(Duration::from_millis(1));
        lines
    })
    .batch_size(2);
    let detect = Call::map("detect", |lines: u32| {
        std::thread::sleep(Duration::from_millis(1));
        (0..lines).collect::<Vec<u32>>()
    })
    .batch_size(4);
    let recognize = Call::map("recognize", |x: u32| {
        std::thread::sleep(Duration::from_micros(200));
        x
    })
    .batch_size(48)
    .replicas(2);
    let page_text = Call::map("page_text", |lines: Vec<u32>| lines.len() as u32);
    // The embedder: batches of 16 page texts of one length bucket, each
    // waiting up to a second for a fuller batch while pages can still come.
    let embed = Call::map("embed", |n: u32| n)
        .batch_size(16)
        .shape(|n: &u32| u64::from(*n / 16))
        .max_batch_delay(Duration::from_millis(20));
    let (plan, out) = Plan::build(|b| {
        let docs = b.source::<Doc, u32>();
        let pages = read.apply(expand::<Page, _, _>(open.apply(docs)));
        let lines = expand::<Line, _, _>(detect.apply(pages));
        b.output(reduce(
            embed.apply(page_text.apply(reduce(recognize.apply(lines)))),
        ))
    })
    .unwrap();
    let batches = Arc::new(AtomicUsize::new(0));
    let sizes = [20u32, 12, 1, 1, 1, 1, 1];
    let roots = sizes.iter().enumerate().map(|(k, &p)| (k as u64, p));
    let mut delivered: Vec<(u64, usize)> = Vec::new();
    Runner::new(&plan)
        .window(8)
        .window_children(4096)
        .backpressure(2)
        .observe(Dispatched {
            call: "recognize",
            batches: batches.clone(),
        })
        .run(
            roots,
            Callback::new(|o: &RootOutcome| {
                let pages = o.get(out).present().unwrap();
                assert_eq!(pages, vec![LINES; sizes[o.key as usize] as usize]);
                delivered.push((o.key, batches.load(SeqCst)));
            }),
        )
        .unwrap();
    let total = (32 + 5) * LINES as usize / 48;
    eprintln!("(root, recognition batches dispatched) as delivered: {delivered:?}");
    let order: Vec<u64> = delivered.iter().map(|&(k, _)| k).collect();
    assert!(
        order[..5].iter().all(|&k| k >= 2),
        "the short roots reach the sink first: {delivered:?}"
    );
    let last_short = delivered[4].1;
    // 10 here unloaded (the short pages' detect and recognition batches
    // come right after those already in flight); half the run's is the
    // bound under any load.
    assert!(
        last_short <= total / 2,
        "{last_short} of ~{total} recognition batches were dispatched before the last short root was written: {delivered:?}"
    );
}
