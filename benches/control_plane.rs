//! Control-plane throughput: how many Grain commits per second one engine
//! thread sustains when stages cost nothing.
//!
//! Pipeline: render(doc) → expand pages → ocr(page) → reduce → assemble(doc),
//! every stage a no-op run inline on the engine thread (so the figure is the
//! engine plus the erased stage glue, not thread hand-offs), B = 64, window
//! 256 documents. Workloads: `../shared/workloads/mineru-3689.json`
//! (174,748 pages) and a synthetic 1 M-page variant (the same page-count
//! distribution, repeated). Reports commits/s, peak RSS, and RSS after 100 k
//! and after 1 M pages (flat memory = independent of input size).
//!
//! Run: `cargo bench --bench control_plane` (add `-- --quick` for a short run).

use std::time::Instant;

use rayorch::prelude::*;
use rayorch::{Engine, EngineConfig, Output};

domain!(Doc);
domain!(Page: Doc);

#[derive(serde::Deserialize)]
struct Workload {
    docs: Vec<WorkDoc>,
}

#[derive(serde::Deserialize)]
struct WorkDoc {
    pages: u32,
}

fn load(name: &str) -> Vec<u32> {
    let path = format!("{}/../shared/workloads/{name}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {path}: {e}"));
    let w: Workload = serde_json::from_str(&text).expect("multigrain-workload/v1");
    w.docs.into_iter().map(|d| d.pages).collect()
}

fn plan() -> (Plan, Output<u32>) {
    let render = Call::map("render", |n: u32| vec![0u32; n as usize]);
    let ocr = Call::map("ocr", |p: u32| p);
    let assemble = Call::map("assemble", |pages: Vec<u32>| pages.len() as u32);
    Plan::build(|b| {
        let doc = b.source::<Doc, u32>();
        let page = expand::<Page, _, _>(render.apply(doc));
        b.output(assemble.apply(reduce(ocr.apply(page))))
    })
    .expect("valid plan")
}

fn rss_kib(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

struct Figures {
    pages: u64,
    commits: u64,
    secs: f64,
    rss_at: Vec<(u64, u64)>,
}

/// Drive the engine to completion over `docs`, sampling RSS when the number
/// of pages committed crosses each mark.
fn drive(docs: &[u32], marks: &[u64]) -> Figures {
    let (plan, out) = plan();
    let mut eng = Engine::new(&plan, EngineConfig { window: 256, seed: 1 });
    let mut replicas: Vec<_> = plan
        .calls()
        .iter()
        .map(|c| c.runtime.spawn().expect("no-op init"))
        .collect();
    let mut next = docs.iter().enumerate();
    let mut pages_done = 0u64;
    let mut rss_at = Vec::new();
    let mut marks = marks.iter().peekable();
    let start = Instant::now();
    let mut finished = 0usize;
    loop {
        while eng.can_admit() {
            match next.next() {
                Some((i, &n)) => eng.admit_typed(i as u64, n).expect("admit"),
                None => break,
            }
        }
        let mut progressed = false;
        // Deeper Calls first: finishing documents frees window slots.
        for c in (0..replicas.len()).rev() {
            while let Some(batch) = eng.reserve(c, 64) {
                let n = batch.grains.len() as u64;
                let result = replicas[c].run(batch.inputs);
                eng.report(batch.id, result);
                if c == 1 {
                    pages_done += n;
                }
                progressed = true;
            }
        }
        while let Some(o) = eng.pop_finished() {
            debug_assert!(o.get(out).present().is_some());
            finished += 1;
        }
        while marks.peek().is_some_and(|&&m| pages_done >= m) {
            rss_at.push((*marks.next().expect("peeked"), rss_kib("VmRSS:")));
        }
        if !progressed && eng.live_roots() == 0 {
            break;
        }
    }
    let secs = start.elapsed().as_secs_f64();
    assert_eq!(finished, docs.len(), "every document completes");
    let commits = (0..plan.calls().len()).map(|c| eng.call_stats(c).committed).sum();
    Figures {
        pages: pages_done,
        commits,
        secs,
        rss_at,
    }
}

/// The same pipeline through the threaded [`rayorch::Runner`]: each Call a
/// replica thread, so every batch crosses threads twice.
fn through_runner(docs: &[u32]) -> (u64, f64) {
    let render = Call::map("render", |n: u32| vec![0u32; n as usize]).batch_size(64);
    let ocr = Call::map("ocr", |p: u32| p).batch_size(64);
    let assemble = Call::map("assemble", |pages: Vec<u32>| pages.len() as u32).batch_size(64);
    let (plan, _) = Plan::build(|b| {
        let doc = b.source::<Doc, u32>();
        let page = expand::<Page, _, _>(render.apply(doc));
        b.output(assemble.apply(reduce(ocr.apply(page))))
    })
    .expect("valid plan");
    let start = Instant::now();
    let summary = rayorch::Runner::new(&plan)
        .window(256)
        .run(
            docs.iter().enumerate().map(|(i, &n)| (i as u64, n)),
            rayorch::sink::Callback(|_: &rayorch::RootOutcome| {}),
        )
        .expect("run");
    let secs = start.elapsed().as_secs_f64();
    (summary.calls.iter().map(|c| c.committed).sum(), secs)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let runs = if quick { 1 } else { 3 };
    let mineru = load("mineru-3689.json");
    if std::env::args().any(|a| a == "--profile") {
        // One engine-only pass, for `valgrind --tool=callgrind`.
        let f = drive(&mineru, &[]);
        println!("{} commits", f.commits);
        return;
    }
    let mut rates = Vec::new();
    for _ in 0..runs {
        let f = drive(&mineru, &[]);
        rates.push(f.commits as f64 / f.secs);
        println!(
            "mineru-3689: {} docs, {} pages, {} grain commits in {:.3} s = {:.0} commits/s",
            mineru.len(),
            f.pages,
            f.commits,
            f.secs,
            f.commits as f64 / f.secs
        );
    }
    println!(
        "mineru-3689 median: {:.0} grain commits/s (engine thread, inline no-op stages)",
        median(rates)
    );
    let mut rates = Vec::new();
    for _ in 0..runs {
        let (commits, secs) = through_runner(&mineru);
        rates.push(commits as f64 / secs);
        println!(
            "mineru-3689 via Runner: {commits} grain commits in {secs:.3} s = {:.0} commits/s",
            commits as f64 / secs
        );
    }
    println!(
        "mineru-3689 via Runner median: {:.0} grain commits/s (replica threads, B = 64)",
        median(rates)
    );

    // 1 M pages: the same distribution, repeated.
    let target = if quick { 300_000 } else { 1_000_000 };
    let mut big = Vec::new();
    let mut pages = 0u64;
    while pages < target {
        for &n in &mineru {
            big.push(n);
            pages += u64::from(n);
            if pages >= target {
                break;
            }
        }
    }
    let f = drive(&big, &[100_000, target / 2, target]);
    println!(
        "synthetic: {} docs, {} pages, {} grain commits in {:.3} s = {:.0} commits/s",
        big.len(),
        f.pages,
        f.commits,
        f.secs,
        f.commits as f64 / f.secs
    );
    for (mark, kib) in &f.rss_at {
        println!("RSS after {mark:>9} pages: {:>8.1} MiB", *kib as f64 / 1024.0);
    }
    if let (Some(first), Some(last)) = (f.rss_at.first(), f.rss_at.last()) {
        println!(
            "RSS growth {} → {} pages: {:+.1}%",
            first.0,
            last.0,
            (last.1 as f64 / first.1 as f64 - 1.0) * 100.0
        );
    }
    println!("peak RSS (VmHWM): {:.1} MiB", rss_kib("VmHWM:") as f64 / 1024.0);
}
