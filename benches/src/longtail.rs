//! The simulated long-tail document pipeline (the `multigrain-workload/v1`
//! cost model; workloads from [`crate::workload`] or a file), run through
//! the real runtime (and, for the regroup baseline, through a flat engine
//! written here). Shared by `benches/longtail.rs` and
//! `tests/longtail_small.rs`.
//!
//! Costs are sleeps, so CPU cores are not the limit and only scheduling matters:
//! render(doc) = render_s_per_page × pages on R replicas; ocr(batch of n pages,
//! any parents) = a + b·n on K replicas (with `widths` > 0: a per width
//! present + b·n, and the `shaped` arm keys OCR batches by width);
//! assemble checks page order; upload(doc) = upload_s on an async stage with
//! U concurrent uploads.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use rayorch::prelude::*;
use rayorch::sink::Callback;
use rayorch::{AsyncStage, Reservation, RootOutcome, RunSummary, Runner, StageContext};

domain!(Doc);
domain!(Page: Doc);

/// The cost model (the workload file's `pipeline` object).
#[derive(Clone, Debug, serde::Deserialize)]
pub struct Costs {
    /// Render time per page of a document, seconds.
    pub render_s_per_page: f64,
    /// OCR time of a batch, fixed part (`a` in `a + b·n`), seconds.
    pub ocr_a: f64,
    /// OCR time per page of a batch (`b`), seconds.
    pub ocr_b: f64,
    /// OCR batch size.
    pub batch: usize,
    /// OCR replicas.
    pub workers: usize,
    /// Upload time per document, seconds.
    pub upload_s: f64,
    /// Render replicas.
    pub render_workers: usize,
    /// Uploads in flight at once.
    pub upload_workers: usize,
    /// Width buckets of the pages (0: one width, the paper's model). With
    /// K > 0 each page has one of K widths (drawn from its document and
    /// page number) and an OCR batch costs `a` per width present plus `b`
    /// per page, as recognition makes one model call per padded width.
    #[serde(default)]
    pub widths: u64,
    /// Raise style: a poisoned page makes the OCR call return `Err` for
    /// its whole batch (as a model wrapper that raises does), left to the
    /// Call's default recovery, instead of a per-page `GroupFailure`. The
    /// rayorch arms only.
    #[serde(default)]
    pub raise: bool,
    /// Roots admitted before they expand (`Runner::unexpanded_roots`);
    /// `None`: the runner's default (render's replicas × batch size). The
    /// rayorch arms only.
    #[serde(default)]
    pub unexpanded_roots: Option<usize>,
    /// Full OCR batches queued before render waits (`Runner::backpressure`);
    /// `None`: the runner's default. The rayorch arms only.
    #[serde(default)]
    pub backpressure: Option<usize>,
}

/// One document of a workload.
#[derive(Clone, Debug, serde::Deserialize)]
pub struct WorkDoc {
    /// Its id, the root key.
    pub doc_id: u64,
    /// Its page count.
    pub pages: u32,
}

/// A `multigrain-workload/v1` workload: the cost model and the documents.
#[derive(Clone, Debug, serde::Deserialize)]
pub struct Workload {
    /// The cost model.
    pub pipeline: Costs,
    /// How many of the largest documents are poisoned (their first page
    /// fails the OCR stage with a GroupFailure).
    #[serde(default)]
    pub fail_largest: usize,
    /// The documents, in source order.
    pub docs: Vec<WorkDoc>,
}

impl Workload {
    /// Read a workload file (panics naming the path: a bench's input).
    pub fn load(path: &str) -> Workload {
        let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {path}: {e}"));
        Workload::parse(&text, path)
    }

    /// Parse a workload's JSON; `what` names it in the panic.
    pub fn parse(text: &str, what: &str) -> Workload {
        serde_json::from_str(text).unwrap_or_else(|e| panic!("{what} is not multigrain-workload/v1: {e}"))
    }

    /// Ids of the `fail_largest` largest documents (ties by id).
    pub fn poisoned(&self) -> Vec<bool> {
        let mut idx: Vec<usize> = (0..self.docs.len()).collect();
        idx.sort_by_key(|&i| (std::cmp::Reverse(self.docs[i].pages), self.docs[i].doc_id));
        let mut p = vec![false; self.docs.len()];
        for &i in idx.iter().take(self.fail_largest) {
            p[i] = true;
        }
        p
    }
}

/// Which scheduler arm runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arm {
    /// (a) document streaming: batches never mix parents.
    DocStream,
    /// (b) flat pages, a global barrier, then group-by + sort (Ray Data / Daft shape).
    Regroup,
    /// (c) cross-parent rebatching from an unordered queue.
    Unordered,
    /// (d) rayorch: cross-parent rebatching from a FIFO Ready Queue.
    Full,
    /// (e) rayorch: cross-parent rebatching, parents nearest completion first.
    Nearest,
    /// (e) shaped: `nearest` with the OCR Call keyed by page width
    /// ([`Call::shape`]), so a batch is one width (one model call).
    Shaped,
    /// (d) watched: `full` with the metrics endpoint and live page served
    /// (`rayorch_kit::watch`) and scraped once a second, as Prometheus and an
    /// open page would (issue 24's overhead check).
    Watched,
}

impl Arm {
    /// An arm by name (`doc-stream`, `regroup`, `unordered`, `full`,
    /// `nearest`) or letter (`a` to `e`).
    pub fn parse(s: &str) -> Option<Arm> {
        Some(match s {
            "doc-stream" | "a" => Arm::DocStream,
            "regroup" | "b" => Arm::Regroup,
            "unordered" | "c" => Arm::Unordered,
            "full" | "d" => Arm::Full,
            "nearest" | "e" => Arm::Nearest,
            "watched" => Arm::Watched,
            "shaped" => Arm::Shaped,
            _ => return None,
        })
    }

    /// The arm's name, as the JSON lines print it.
    pub fn name(self) -> &'static str {
        match self {
            Arm::DocStream => "doc-stream",
            Arm::Regroup => "regroup",
            Arm::Unordered => "unordered",
            Arm::Full => "full",
            Arm::Nearest => "nearest",
            Arm::Watched => "watched",
            Arm::Shaped => "shaped",
        }
    }
}

#[derive(Clone, Debug)]
struct DocIn {
    idx: usize,
    id: u64,
    pages: u32,
    poisoned: bool,
}

#[derive(Clone, Debug)]
struct PageIn {
    doc: u64,
    page: u32,
    poisoned: bool,
    /// Its width bucket (0 when the workload has one width).
    width: u64,
}

/// Page `page` of document `doc`'s width bucket among `k` (SplitMix64 of
/// both, so runs and arms agree).
fn width_of(doc: u64, page: u32, k: u64) -> u64 {
    if k == 0 {
        return 0;
    }
    let mut z = doc.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ u64::from(page).wrapping_add(0x632b_e59b_d9b4_e019);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    (z ^ (z >> 31)) % k
}

/// Model calls an OCR batch of pages of these widths makes: one per width
/// present.
fn model_calls(widths: impl Iterator<Item = u64>) -> u64 {
    let mut w: Vec<u64> = widths.collect();
    w.sort_unstable();
    w.dedup();
    w.len().max(1) as u64
}

#[derive(Clone, Debug)]
struct PageOut {
    doc: u64,
    page: u32,
}

fn secs(s: f64) -> Duration {
    Duration::from_secs_f64(s.max(0.0))
}

/// A stage window as the paper's Figure 7 draws it.
#[derive(Clone, Copy, Debug, Default)]
pub struct Window {
    /// The stage's first call began, seconds from the start of the run.
    pub start_s: f64,
    /// Its last call ended, likewise.
    pub end_s: f64,
    /// Batches it ran.
    pub calls: u64,
    /// Time its replicas spent in calls, summed, seconds.
    pub busy_s: f64,
}

/// What one run measured.
#[derive(Clone, Debug, Default)]
pub struct Report {
    /// The arm's name.
    pub arm: &'static str,
    /// Documents in the workload.
    pub docs: usize,
    /// Pages in them.
    pub pages: u64,
    /// Wall time of the run, seconds.
    pub wall_s: f64,
    /// Pages the OCR stage ran on.
    pub udf_page_calls: u64,
    /// Poisoned pages the OCR stage ran on (each fails its document); in
    /// the raise style, OCR calls that returned `Err` (bisection included).
    pub trigger_calls: u64,
    /// OCR batches.
    pub ocr_batches: u64,
    /// Their mean size.
    pub ocr_batch_mean: f64,
    /// OCR batches holding pages of more than one document.
    pub ocr_mixed_parent_batches: u64,
    /// Model calls the OCR batches made (one per width present in each).
    pub ocr_model_calls: u64,
    /// Per document (workload order): admitted, pages published (render
    /// done), and handed out (healthy documents only), seconds from start.
    pub admit_s: Vec<f64>,
    /// See `admit_s`.
    pub expanded_s: Vec<f64>,
    /// See `admit_s`.
    pub done_at: Vec<Option<f64>>,
    /// The window of each stage (render, ocr, assemble, upload).
    pub stages: [(&'static str, Window); 4],
    /// When each healthy document was handed out, in completion order,
    /// seconds from start.
    pub doc_done_s: Vec<f64>,
    /// Every healthy document came out assembled in page order and no
    /// poisoned one came out.
    pub correct: bool,
    /// Siblings of poisoned pages the GroupFailure suppressed before they
    /// were dispatched.
    pub siblings_not_dispatched: u64,
    /// Siblings of poisoned pages in all.
    pub poisoned_siblings: u64,
    /// The lower bound on wall time ([`lower_bound`]), seconds.
    pub lb_s: f64,
    /// Each document's page count, in source order.
    pub doc_pages: Vec<u32>,
}

/// First / mean / nearest-rank percentiles / last of a set of durations.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Dist {
    /// How many.
    pub n: usize,
    /// The smallest.
    pub first: f64,
    /// The mean.
    pub mean: f64,
    /// The median (nearest rank).
    pub p50: f64,
    /// The 90th percentile (nearest rank).
    pub p90: f64,
    /// The 99th percentile (nearest rank).
    pub p99: f64,
    /// The largest.
    pub last: f64,
}

impl Dist {
    /// The distribution of `v`; `None` when it is empty.
    pub fn of(mut v: Vec<f64>) -> Option<Dist> {
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        let rank = |p: f64| v[((p * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1];
        Some(Dist {
            n: v.len(),
            first: v[0],
            mean: v.iter().sum::<f64>() / v.len() as f64,
            p50: rank(0.5),
            p90: rank(0.9),
            p99: rank(0.99),
            last: v[v.len() - 1],
        })
    }

    /// As a JSON object (`null` for `None`).
    pub fn to_json(d: Option<Dist>) -> serde_json::Value {
        match d {
            Some(d) => serde_json::json!({"n": d.n, "first": d.first, "mean": d.mean, "p50": d.p50,
                "p90": d.p90, "p99": d.p99, "last": d.last}),
            None => serde_json::Value::Null,
        }
    }
}

impl Report {
    /// Completion times from the start of the run, healthy documents.
    pub fn completion(&self) -> Option<Dist> {
        Dist::of(self.done_at.iter().flatten().copied().collect())
    }

    /// From a document's admission to its outcome (what a streaming user waits).
    pub fn latency(&self) -> Option<Dist> {
        Dist::of(self.since(&self.admit_s))
    }

    /// From the moment a document's pages were all published to its outcome.
    pub fn after_publish(&self) -> Option<Dist> {
        Dist::of(self.since(&self.expanded_s))
    }

    fn since(&self, from: &[f64]) -> Vec<f64> {
        self.done_at
            .iter()
            .zip(from)
            .filter_map(|(d, f)| d.map(|d| d - f))
            .collect()
    }

    /// What ran after the last render ended (the lower bound allows one
    /// page's OCR and an upload there): when it ended, the healthy
    /// documents finished after it, their pages, the largest of them, and
    /// the last rendered document's pages.
    pub fn tail(&self) -> serde_json::Value {
        let render_end = self.expanded_s.iter().copied().fold(0.0, f64::max);
        let after: Vec<usize> = (0..self.done_at.len())
            .filter(|&i| self.done_at[i].is_some_and(|t| t > render_end))
            .collect();
        let pages = |i: &usize| u64::from(self.doc_pages.get(*i).copied().unwrap_or(0));
        serde_json::json!({
            "render_end_s": render_end,
            "docs_after": after.len(),
            "pages_after": after.iter().map(pages).sum::<u64>(),
            "largest_after": after.iter().map(pages).max(),
            "last_rendered_pages": (0..self.expanded_s.len())
                .max_by(|&a, &b| self.expanded_s[a].total_cmp(&self.expanded_s[b]))
                .map(|i| pages(&i)),
        })
    }

    /// The JSON line the bench prints for this run.
    pub fn to_json(&self, costs: &Costs, window: usize) -> serde_json::Value {
        // Small workloads (the small-after-big case) list every document.
        let per_doc: serde_json::Value = if self.docs <= 8 {
            (0..self.docs)
                .map(|i| {
                    serde_json::json!({"doc": i, "admit_s": self.admit_s.get(i), "published_s": self.expanded_s.get(i),
                        "done_s": self.done_at.get(i).copied().flatten()})
                })
                .collect()
        } else {
            serde_json::Value::Null
        };
        let stages: serde_json::Map<String, serde_json::Value> = self
            .stages
            .iter()
            .map(|(n, w)| {
                (
                    n.to_string(),
                    serde_json::json!({"start_s": w.start_s, "end_s": w.end_s, "calls": w.calls, "busy_s": w.busy_s}),
                )
            })
            .collect();
        serde_json::json!({
            "system": format!("rayorch/{}", self.arm),
            "docs": self.docs,
            "pages": self.pages,
            "wall_s": self.wall_s,
            "pages_per_s": self.pages as f64 / self.wall_s,
            "udf_page_calls": self.udf_page_calls,
            "ocr_batches": self.ocr_batches,
            "ocr_batch_mean": self.ocr_batch_mean,
            "ocr_mixed_parent_batches": self.ocr_mixed_parent_batches,
            "ocr_model_calls": self.ocr_model_calls,
            "widths": costs.widths,
            "stages": stages,
            "completion_s": Dist::to_json(self.completion()),
            "latency_s": Dist::to_json(self.latency()),
            "after_publish_s": Dist::to_json(self.after_publish()),
            "per_doc": per_doc,
            "batch_time_s": costs.ocr_a + costs.ocr_b * costs.batch as f64,
            "correct": self.correct,
            "failure": {
                "trigger_calls": self.trigger_calls,
                "siblings_not_dispatched": self.siblings_not_dispatched,
                "poisoned_siblings": self.poisoned_siblings,
                "suppressed_fraction": if self.poisoned_siblings > 0 { self.siblings_not_dispatched as f64 / self.poisoned_siblings as f64 } else { 0.0 },
                "nontrigger_udf_calls": self.udf_page_calls - self.trigger_calls,
            },
            "config": {"workers": costs.workers, "batch": costs.batch, "window": window},
            "lower_bound": {"lb_s": self.lb_s},
            "tail": self.tail(),
            "lb_over_wall": self.lb_s / self.wall_s,
        })
    }
}

/// The workload README's lower bound on wall time (perfect packing).
pub fn lower_bound(w: &Workload, c: &Costs, poisoned: &[bool]) -> f64 {
    let healthy: u64 = w
        .docs
        .iter()
        .zip(poisoned)
        .filter(|(_, p)| !**p)
        .map(|(d, _)| u64::from(d.pages))
        .sum();
    let p = healthy + poisoned.iter().filter(|p| **p).count() as u64;
    let total_pages: u64 = w.docs.iter().map(|d| u64::from(d.pages)).sum();
    let smallest = w.docs.iter().map(|d| d.pages).min().unwrap_or(0);
    let ocr = ((p as f64 / c.batch as f64).ceil() * c.ocr_a + c.ocr_b * p as f64) / c.workers as f64
        + c.render_s_per_page * f64::from(smallest)
        + c.upload_s;
    let render =
        c.render_s_per_page * total_pages as f64 / c.render_workers as f64 + c.ocr_a + c.ocr_b + c.upload_s;
    let upload = w.docs.len() as f64 * c.upload_s / c.upload_workers as f64;
    ocr.max(render).max(upload)
}

struct Upload {
    seconds: f64,
}

impl AsyncStage for Upload {
    type In = u64;
    type Out = u64;
    #[expect(
        clippy::manual_async_fn,
        reason = "spelled out to show the Send future the trait asks for"
    )]
    fn run(
        self: Arc<Self>,
        batch: Vec<u64>,
        _cx: StageContext,
    ) -> impl Future<Output = StageResult<u64>> + Send {
        async move {
            tokio::time::sleep(secs(self.seconds * batch.len() as f64)).await;
            Ok(batch.into_iter().map(Outcome::Ok).collect())
        }
    }
}

fn window_of(s: &RunSummary, call: &str) -> Window {
    let c = s.call(call).expect("call ran");
    Window {
        start_s: c.window_start_s.unwrap_or(0.0),
        end_s: c.window_end_s.unwrap_or(0.0),
        calls: c.rpcs,
        busy_s: c.busy_s,
    }
}

/// Run one arm through rayorch's runtime (arms a, c, d) or the flat engine (b).
pub fn run(w: &Workload, c: &Costs, arm: Arm, window: usize) -> Report {
    let poisoned = w.poisoned();
    let mut r = match arm {
        Arm::Regroup => run_regroup(w, c, &poisoned),
        _ => run_rayorch(w, c, arm, window, &poisoned),
    };
    r.arm = arm.name();
    r.docs = w.docs.len();
    r.pages = w.docs.iter().map(|d| u64::from(d.pages)).sum();
    r.lb_s = lower_bound(w, c, &poisoned);
    r.doc_pages = w.docs.iter().map(|d| d.pages).collect();
    r.poisoned_siblings = w
        .docs
        .iter()
        .zip(&poisoned)
        .filter(|(_, p)| **p)
        .map(|(d, _)| u64::from(d.pages.saturating_sub(1)))
        .sum();
    r
}

fn run_rayorch(w: &Workload, c: &Costs, arm: Arm, window: usize, poisoned: &[bool]) -> Report {
    let udf_pages = Arc::new(AtomicU64::new(0));
    let triggers = Arc::new(AtomicU64::new(0));
    let model = Arc::new(AtomicU64::new(0));
    let rps = c.render_s_per_page;
    let widths = c.widths;
    let start = Instant::now();
    let expanded = Arc::new(Mutex::new(vec![0.0; w.docs.len()]));
    let ex = expanded.clone();
    let render = Call::map("render", move |d: DocIn| {
        std::thread::sleep(secs(rps * f64::from(d.pages)));
        ex.lock().unwrap()[d.idx] = start.elapsed().as_secs_f64();
        (0..d.pages)
            .map(|page| PageIn {
                doc: d.id,
                page,
                poisoned: d.poisoned,
                width: width_of(d.id, page, widths),
            })
            .collect::<Vec<_>>()
    })
    .batch_size(1)
    .replicas(c.render_workers);
    let (a, b) = (c.ocr_a, c.ocr_b);
    let (u, t, m) = (udf_pages.clone(), triggers.clone(), model.clone());
    let raise = c.raise;
    let ocr = Call::batch("ocr", move |pages: Vec<PageIn>| {
        let calls = model_calls(pages.iter().map(|p| p.width));
        std::thread::sleep(secs(a * calls as f64 + b * pages.len() as f64));
        m.fetch_add(calls, Ordering::Relaxed);
        u.fetch_add(pages.len() as u64, Ordering::Relaxed);
        if raise && pages.iter().any(|p| p.poisoned && p.page == 0) {
            t.fetch_add(1, Ordering::Relaxed);
            return Err("poisoned page in the batch".into());
        }
        Ok(pages
            .into_iter()
            .map(|p| {
                if p.poisoned && p.page == 0 {
                    t.fetch_add(1, Ordering::Relaxed);
                    Outcome::GroupFailure("poisoned document".into())
                } else {
                    Outcome::Ok(PageOut {
                        doc: p.doc,
                        page: p.page,
                    })
                }
            })
            .collect())
    })
    .batch_size(c.batch)
    .replicas(c.workers)
    .reservation(match arm {
        Arm::DocStream => Reservation::ParentBound,
        Arm::Unordered => Reservation::Unordered,
        Arm::Nearest | Arm::Shaped => Reservation::NearestCompletion,
        _ => Reservation::Elastic,
    });
    let ocr = if arm == Arm::Shaped {
        ocr.shape(|p: &PageIn| p.width)
    } else {
        ocr
    };
    let assemble = Call::map("assemble", |(d, pages): (DocIn, Vec<PageOut>)| {
        let in_order = pages.len() == d.pages as usize
            && pages
                .iter()
                .enumerate()
                .all(|(i, p)| p.doc == d.id && p.page as usize == i);
        if in_order { d.id } else { u64::MAX }
    })
    .batch_size(64);
    let upload_s = c.upload_s;
    let upload = Call::new_async("upload", move || Ok(Upload { seconds: upload_s }))
        .batch_size(1)
        .concurrency(c.upload_workers);
    let (plan, out) = Plan::build(|bld| {
        let doc = bld.source::<Doc, DocIn>();
        let page = expand::<Page, _, _>(render.apply(doc));
        let texts = reduce(ocr.apply(page));
        bld.output(upload.apply(assemble.apply((doc, texts))))
    })
    .expect("valid plan");
    let mut done = Vec::new();
    let mut done_at = vec![None; w.docs.len()];
    let admit = Mutex::new(vec![0.0; w.docs.len()]);
    let index: HashMap<u64, usize> = w.docs.iter().enumerate().map(|(i, d)| (d.doc_id, i)).collect();
    let mut correct = true;
    let watch = (arm == Arm::Watched).then(rayorch_kit::watch::Watch::new);
    let _scraper = watch.as_ref().map(Scraper::start);
    let mut runner = Runner::new(&plan).window(window);
    if let Some(k) = c.unexpanded_roots {
        runner = runner.unexpanded_roots(k);
    }
    if let Some(b) = c.backpressure {
        runner = runner.backpressure(b);
    }
    let runner = journaled(runner).observe(watch.as_ref().map(|w| w.observer()));
    let summary = runner
        .run(
            w.docs.iter().zip(poisoned).enumerate().map(|(idx, (d, &p))| {
                // The runner pulls a root exactly when it admits it.
                admit.lock().unwrap()[idx] = start.elapsed().as_secs_f64();
                (
                    d.doc_id,
                    DocIn {
                        idx,
                        id: d.doc_id,
                        pages: d.pages,
                        poisoned: p,
                    },
                )
            }),
            (
                Callback(|o: &RootOutcome| {
                    let p = poisoned_of(w, poisoned, o.key);
                    match o.get(out) {
                        Item::Present(id) => {
                            correct &= !p && id == o.key;
                            let t = start.elapsed().as_secs_f64();
                            done.push(t);
                            done_at[index[&o.key]] = Some(t);
                        }
                        Item::Suppressed(_) => correct &= p,
                        _ => correct = false,
                    }
                }),
                journal_outputs(out),
            ),
        )
        .expect("run completes");
    let ocr_m = summary.call("ocr").expect("ocr ran");
    correct &= summary.roots == w.docs.len() as u64;
    Report {
        wall_s: summary.wall_s,
        udf_page_calls: udf_pages.load(Ordering::Relaxed),
        trigger_calls: triggers.load(Ordering::Relaxed),
        ocr_batches: ocr_m.rpcs,
        ocr_batch_mean: ocr_m.mean_batch,
        ocr_mixed_parent_batches: ocr_m.mixed_parent_batches,
        ocr_model_calls: model.load(Ordering::Relaxed),
        stages: [
            ("render", window_of(&summary, "render")),
            ("ocr", window_of(&summary, "ocr")),
            ("assemble", window_of(&summary, "assemble")),
            ("upload", window_of(&summary, "upload")),
        ],
        doc_done_s: done,
        admit_s: admit.into_inner().unwrap(),
        expanded_s: expanded.lock().unwrap().clone(),
        done_at,
        correct,
        siblings_not_dispatched: ocr_m.suppressed_before_dispatch,
        ..Report::default()
    }
}

/// `BENCH_JOURNAL=DIR`: journal the run in DIR (emptied first), with the
/// outputs in a JSONL file and the failures in another, as a durable job
/// would; `BENCH_FSYNC=wakeup`: one commit per driver wakeup (default: the
/// runner's interval policy).
/// The watched arm's endpoint and a client that reads `/metrics` and
/// `/api/state` once a second until dropped.
struct Scraper {
    stop: Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
    _server: rayorch_kit::watch::WatchServer,
}

impl Scraper {
    fn start(w: &rayorch_kit::watch::Watch) -> Scraper {
        use std::io::{Read, Write};
        let server = w
            .serve(std::net::SocketAddr::from(([127, 0, 0, 1], 0)))
            .expect("serve the watch on loopback");
        let addr = server.addr();
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stopping = stop.clone();
        let thread = std::thread::spawn(move || {
            while !stopping.load(Ordering::SeqCst) {
                for path in ["/metrics", "/api/state"] {
                    if let Ok(mut c) = std::net::TcpStream::connect(addr) {
                        let _ = write!(c, "GET {path} HTTP/1.1\r\n\r\n");
                        let _ = c.read_to_end(&mut Vec::new());
                    }
                }
                std::thread::sleep(Duration::from_secs(1));
            }
        });
        Scraper {
            stop,
            thread: Some(thread),
            _server: server,
        }
    }
}

impl Drop for Scraper {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn journaled(r: Runner<'_>) -> Runner<'_> {
    let Some(dir) = std::env::var_os("BENCH_JOURNAL") else {
        return r;
    };
    let dir = std::path::PathBuf::from(dir);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("BENCH_JOURNAL folder");
    let r = r.journal(dir.join("run.journal"));
    match std::env::var("BENCH_FSYNC").as_deref() {
        Ok("wakeup") => r.fsync(rayorch::journal::FsyncPolicy::EveryWakeup),
        _ => r,
    }
}

/// The durable sinks of a journaled run (none without `BENCH_JOURNAL`).
fn journal_outputs(
    out: rayorch::Output<u64>,
) -> Option<(rayorch::sink::JsonlSink<u64>, rayorch::sink::FailuresSink)> {
    let dir = std::path::PathBuf::from(std::env::var_os("BENCH_JOURNAL")?);
    Some((
        rayorch::sink::JsonlSink::open(dir.join("out.jsonl"), out).expect("out.jsonl"),
        rayorch::sink::FailuresSink::open(dir.join("failures.jsonl")).expect("failures.jsonl"),
    ))
}

fn poisoned_of(w: &Workload, poisoned: &[bool], key: u64) -> bool {
    w.docs
        .iter()
        .position(|d| d.doc_id == key)
        .is_some_and(|i| poisoned[i])
}

/// Baseline (b): how a flat engine runs this job. Pages are independent
/// records: rendered pages go to one global queue, OCR batches any B of them,
/// and only when every page is done does a global group-by + sort rebuild the
/// documents, which are then assembled and uploaded. A failed page cannot stop
/// its siblings (the engine does not know they are siblings).
fn run_regroup(w: &Workload, c: &Costs, poisoned: &[bool]) -> Report {
    assert!(!c.raise, "the raise style runs the rayorch arms only");
    #[derive(Default)]
    struct Queue {
        pages: std::collections::VecDeque<PageIn>,
        rendered_docs: usize,
    }
    let start = Instant::now();
    let queue = Arc::new((Mutex::new(Queue::default()), Condvar::new()));
    let next_doc = Arc::new(AtomicU64::new(0));
    let results = Arc::new(Mutex::new(Vec::<(PageOut, bool)>::new()));
    let stats = Arc::new(Mutex::new(Vec::<(f64, f64, usize, &'static str)>::new()));
    let mixed = Arc::new(AtomicU64::new(0));
    let model = Arc::new(AtomicU64::new(0));
    let expanded = Arc::new(Mutex::new(vec![0.0; w.docs.len()]));
    let docs: Arc<Vec<DocIn>> = Arc::new(
        w.docs
            .iter()
            .zip(poisoned)
            .enumerate()
            .map(|(idx, (d, &p))| DocIn {
                idx,
                id: d.doc_id,
                pages: d.pages,
                poisoned: p,
            })
            .collect(),
    );
    std::thread::scope(|s| {
        for _ in 0..c.render_workers {
            let (queue, next_doc, docs, stats, expanded) = (
                queue.clone(),
                next_doc.clone(),
                docs.clone(),
                stats.clone(),
                expanded.clone(),
            );
            s.spawn(move || {
                loop {
                    let i = next_doc.fetch_add(1, Ordering::SeqCst) as usize;
                    let Some(d) = docs.get(i) else { break };
                    let t0 = start.elapsed().as_secs_f64();
                    std::thread::sleep(secs(c.render_s_per_page * f64::from(d.pages)));
                    let t1 = start.elapsed().as_secs_f64();
                    stats.lock().unwrap().push((t0, t1, 1, "render"));
                    expanded.lock().unwrap()[d.idx] = t1;
                    let (m, cv) = &*queue;
                    let mut q = m.lock().unwrap();
                    q.pages.extend((0..d.pages).map(|page| PageIn {
                        doc: d.id,
                        page,
                        poisoned: d.poisoned,
                        width: width_of(d.id, page, c.widths),
                    }));
                    q.rendered_docs += 1;
                    cv.notify_all();
                }
            });
        }
        for _ in 0..c.workers {
            let (queue, results, stats, docs, mixed, model) = (
                queue.clone(),
                results.clone(),
                stats.clone(),
                docs.clone(),
                mixed.clone(),
                model.clone(),
            );
            s.spawn(move || {
                loop {
                    let batch: Vec<PageIn> = {
                        let (m, cv) = &*queue;
                        let mut q = m.lock().unwrap();
                        while q.pages.is_empty() && q.rendered_docs < docs.len() {
                            q = cv.wait(q).unwrap();
                        }
                        if q.pages.is_empty() {
                            break;
                        }
                        let n = q.pages.len().min(c.batch);
                        q.pages.drain(..n).collect()
                    };
                    let first = batch[0].doc;
                    if batch.iter().any(|p| p.doc != first) {
                        mixed.fetch_add(1, Ordering::Relaxed);
                    }
                    let t0 = start.elapsed().as_secs_f64();
                    let calls = model_calls(batch.iter().map(|p| p.width));
                    model.fetch_add(calls, Ordering::Relaxed);
                    std::thread::sleep(secs(c.ocr_a * calls as f64 + c.ocr_b * batch.len() as f64));
                    stats
                        .lock()
                        .unwrap()
                        .push((t0, start.elapsed().as_secs_f64(), batch.len(), "ocr"));
                    let mut r = results.lock().unwrap();
                    for p in batch {
                        let failed = p.poisoned && p.page == 0;
                        r.push((
                            PageOut {
                                doc: p.doc,
                                page: p.page,
                            },
                            failed,
                        ));
                    }
                }
            });
        }
    });
    // The global barrier has passed: group by parent and sort by ordinal.
    let mut all = std::mem::take(&mut *results.lock().unwrap());
    let udf = all.len() as u64;
    let total_pages: u64 = docs.iter().map(|d| u64::from(d.pages)).sum();
    let trig = all.iter().filter(|(_, f)| *f).count() as u64;
    all.sort_by_key(|(p, _)| (p.doc, p.page));
    let mut groups: Vec<(u64, Vec<(PageOut, bool)>)> = Vec::new();
    for r in all {
        match groups.last_mut() {
            Some((d, g)) if *d == r.0.doc => g.push(r),
            _ => groups.push((r.0.doc, vec![r])),
        }
    }
    let t_asm = start.elapsed().as_secs_f64();
    let mut correct = true;
    let healthy: Vec<u64> = groups
        .iter()
        .filter(|(_, g)| !g.iter().any(|(_, f)| *f))
        .map(|(d, g)| {
            let doc = docs.iter().find(|x| x.id == *d).expect("known doc");
            correct &= !doc.poisoned
                && g.len() == doc.pages as usize
                && g.iter().enumerate().all(|(i, (p, _))| p.page as usize == i);
            *d
        })
        .collect();
    correct &= healthy.len() == docs.iter().filter(|d| !d.poisoned).count();
    let t_asm_end = start.elapsed().as_secs_f64();
    let done = Arc::new(Mutex::new(Vec::new()));
    let done_at = Arc::new(Mutex::new(vec![None; w.docs.len()]));
    let index: HashMap<u64, usize> = w.docs.iter().enumerate().map(|(i, d)| (d.doc_id, i)).collect();
    let next = Arc::new(AtomicU64::new(0));
    let t_up = start.elapsed().as_secs_f64();
    std::thread::scope(|s| {
        for _ in 0..c.upload_workers {
            let (done, done_at, next, healthy, index) =
                (done.clone(), done_at.clone(), next.clone(), &healthy, &index);
            s.spawn(move || {
                while let Some(d) = healthy.get(next.fetch_add(1, Ordering::SeqCst) as usize) {
                    std::thread::sleep(secs(c.upload_s));
                    let t = start.elapsed().as_secs_f64();
                    done.lock().unwrap().push(t);
                    done_at.lock().unwrap()[index[d]] = Some(t);
                }
            });
        }
    });
    let wall = start.elapsed().as_secs_f64();
    let stats = stats.lock().unwrap();
    let window = |name: &str| {
        let s: Vec<_> = stats.iter().filter(|x| x.3 == name).collect();
        Window {
            start_s: s.iter().map(|x| x.0).fold(f64::INFINITY, f64::min),
            end_s: s.iter().map(|x| x.1).fold(0.0, f64::max),
            calls: s.len() as u64,
            busy_s: s.iter().map(|x| x.1 - x.0).sum(),
        }
    };
    let ocr = window("ocr");
    let done = done.lock().unwrap().clone();
    Report {
        wall_s: wall,
        udf_page_calls: udf,
        trigger_calls: trig,
        ocr_batches: ocr.calls,
        ocr_batch_mean: udf as f64 / ocr.calls.max(1) as f64,
        ocr_mixed_parent_batches: mixed.load(Ordering::Relaxed),
        ocr_model_calls: model.load(Ordering::Relaxed),
        stages: [
            ("render", window("render")),
            ("ocr", ocr),
            (
                "assemble",
                Window {
                    start_s: t_asm,
                    end_s: t_asm_end,
                    calls: 1,
                    busy_s: t_asm_end - t_asm,
                },
            ),
            (
                "upload",
                Window {
                    start_s: t_up,
                    end_s: wall,
                    calls: healthy.len() as u64,
                    busy_s: healthy.len() as f64 * c.upload_s,
                },
            ),
        ],
        doc_done_s: done,
        // A flat engine takes every document at once: no admission window.
        admit_s: vec![0.0; w.docs.len()],
        expanded_s: expanded.lock().unwrap().clone(),
        done_at: done_at.lock().unwrap().clone(),
        correct,
        // Measured, not assumed: pages the UDF never saw.
        siblings_not_dispatched: total_pages - udf,
        ..Report::default()
    }
}
