//! The OCR job, like for like: pages/s, CPU, page faults and context
//! switches of the job's own plan (`OcrJob::plan`) vs a plain sequential
//! loop over exactly the job's stages, with the same ONNX Runtime threads
//! per session.
//!
//! Both sides run the same stage types with the same settings
//! (`OcrConfig::detect`, `OcrConfig::recognize`, the render config) on the
//! healthy bundled samples, the job with `force_ocr` (every page OCR'd,
//! as the loop does): open each document (`PdfOpen`), render its
//! pages (`PdfPageRender`), detect their lines with orientation
//! (`TextDetect`: the line classifier and warped crops on both sides),
//! recognise them (`TextRecognize`), join them (`page_text`), embed the
//! page texts (`SentenceEmbed`) and assemble the `Document`. The loop cuts
//! each stage into the batches of the job's Call for it (`render_batch`,
//! `detect_batch`, `recognize_batch` over a document's lines in page
//! order, `embed_batch`) and runs one document after another on one
//! thread; the pipeline runs one replica per Call, so its stages overlap
//! and its batches mix pages and documents. Both produce the same page
//! texts (checked).
//!
//! Reported per thread count, medians of alternating rounds: the loop's
//! and the job's pages/s (the job as it runs on a CPU by default, with
//! recognition batches blind to width as the loop's are) and their ratio
//! (the median of per-round ratios), CPU seconds, minor faults and context
//! switches per page of each (`getrusage`, every thread), then the same
//! pipeline with recognition keyed by padded width (`--recognize-by-width`,
//! the CUDA default) and recognition model calls per batch in both. Run it
//! under `taskset -c 0` for the pinned figure: the header prints the CPUs
//! the process may use.
//!
//! `cargo bench -p rayorch-doc --bench doc_ocr` (env `BENCH_THREADS`,
//! default `1,2`; `BENCH_REPEAT` copies of the corpus, default 1;
//! `BENCH_EMBED_DELAY_MS` the embed Call's batch delay, default the job's;
//! `BENCH_ROUNDS` alternating rounds, default 3). One JSON line per thread
//! count carries every round and `/proc/loadavg` before and after.

use std::sync::Arc;
use std::time::Instant;

use rayorch::sink::Callback;
use rayorch::{Call, Outcome, RootOutcome, Runner, Stage, StageContext};
use rayorch_doc::Document;
use rayorch_doc::ocr::{Knobs, OcrConfig, OcrJob};
use rayorch_models::ocr::{RecognizeCounts, RecognizeFigures};
use rayorch_models::pdf::text::{TextSource, Verdict};
use rayorch_models::{
    Assets, EmbedConfig, LineRecognizer, PageText, PdfFile, PdfOpen, PdfPageRender, SentenceEmbed,
    SentenceEmbedder, TextDetect, TextDetector, TextLine, TextRecognize, page_text,
};
use rayorch_testdata::pdfgen::{SampleKind, samples};

fn config(threads: usize) -> OcrConfig {
    let d = OcrConfig::default();
    OcrConfig {
        embed_delay: std::env::var("BENCH_EMBED_DELAY_MS")
            .ok()
            .and_then(|v| v.parse().ok())
            .map_or(d.embed_delay, std::time::Duration::from_millis),
        knobs: Knobs {
            threads,
            render_replicas: 1,
            detect_replicas: 1,
            recognize_replicas: 1,
            embed_replicas: 1,
        },
        // OCR on every page, as the loop does: the bench measures the OCR
        // path, not the text layer's shortcut.
        force_ocr: true,
        ..d
    }
}

fn corpus(repeat: usize) -> Vec<PdfFile> {
    let docs: Vec<_> = samples()
        .into_iter()
        // The digital samples only: the figures in BENCHMARKS.md are theirs.
        .filter(|s| s.kind == SampleKind::Text && !s.scanned)
        .collect();
    (0..repeat)
        .flat_map(|r| {
            docs.iter()
                .map(move |s| PdfFile::from_bytes(format!("{}#{r}", s.file), s.bytes()))
        })
        .collect()
}

/// The values of a batch whose records all succeed.
fn all<T>(out: Vec<Outcome<T>>, what: &str) -> Vec<T> {
    out.into_iter()
        .map(|o| match o {
            Outcome::Ok(v) => v,
            _ => panic!("{what}: the healthy samples give a value per record"),
        })
        .collect()
}

/// Run `stage` over `items` in batches of `b`, in order, as the pipeline's
/// Call of that batch size would cut them.
fn batched<S: Stage>(
    stage: &mut S,
    items: Vec<S::In>,
    b: usize,
    cx: &StageContext,
    what: &str,
) -> Vec<S::Out> {
    let mut out = Vec::with_capacity(items.len());
    let mut it = items.into_iter().peekable();
    while it.peek().is_some() {
        let batch: Vec<S::In> = it.by_ref().take(b.max(1)).collect();
        out.extend(all(
            stage.run(batch, cx).unwrap_or_else(|e| panic!("{what}: {e}")),
            what,
        ));
    }
    out
}

/// What one run of either side gave and cost.
struct Run {
    pages: usize,
    secs: f64,
    /// Page texts per document.
    texts: Vec<Vec<String>>,
    /// The pipeline's summary (`None` for the loop).
    summary: Option<rayorch::RunSummary>,
    /// Recognition model calls and columns (padding included).
    rec: RecognizeFigures,
    /// What the process used during the run.
    used: Usage,
}

/// The like-for-like loop: exactly the job's stages (`OcrJob::new`'s stage
/// types and settings, detection with orientation) in one thread, one
/// document after another, each stage cut into the batches of the job's
/// Call of that stage (`render_batch`, `detect_batch`, `recognize_batch`
/// over the document's lines in page order, `embed_batch`). What differs
/// from the pipeline is only what a pipeline is for: no stage overlap,
/// and recognition batches that do not mix documents.
fn sequential(files: &[PdfFile], cfg: &OcrConfig, a: &Assets) -> Run {
    let before = usage();
    // Model loading counts on both sides: the pipeline's wall time includes
    // its replicas' initialisation.
    let t = Instant::now();
    let cx = StageContext::new("loop", 0);
    let counts = Arc::new(RecognizeCounts::default());
    let mut open = PdfOpen;
    let mut render = PdfPageRender::new(cfg.render.clone());
    let mut detect = TextDetect::new(TextDetector::from_assets(a, cfg.detect()).expect("det loads"));
    let mut recognize =
        TextRecognize::new(LineRecognizer::from_assets(a, cfg.recognize()).expect("rec loads"))
            .counting(counts.clone());
    let mut embed =
        SentenceEmbed::new(SentenceEmbedder::from_assets(a, &EmbedConfig::default()).expect("embed loads"));
    let (mut pages, mut texts) = (0, Vec::new());
    for f in files {
        let handles = batched(&mut open, vec![f.clone()], 1, &cx, "open").remove(0);
        let images = batched(
            &mut render,
            handles.into_iter().collect(),
            cfg.render_batch,
            &cx,
            "render",
        );
        let per_page: Vec<Vec<TextLine>> = batched(&mut detect, images, cfg.detect_batch, &cx, "detect");
        let counts: Vec<usize> = per_page.iter().map(Vec::len).collect();
        let lines: Vec<TextLine> = per_page.into_iter().flatten().collect();
        let mut read = batched(&mut recognize, lines, cfg.recognize_batch, &cx, "recognize").into_iter();
        let doc_texts: Vec<String> = counts
            .iter()
            .map(|&n| page_text(&read.by_ref().take(n).collect::<Vec<_>>()))
            .collect();
        let embeddings = batched(&mut embed, doc_texts.clone(), cfg.embed_batch, &cx, "embed");
        pages += doc_texts.len();
        let pages_read = doc_texts
            .into_iter()
            .map(|text| PageText {
                text,
                source: TextSource::Ocr,
                verdict: Verdict::Forced,
            })
            .collect();
        let doc = Document::assemble(&f.name, pages_read, embeddings);
        texts.push(doc.page_texts);
    }
    let secs = t.elapsed().as_secs_f64();
    Run {
        pages,
        secs,
        texts,
        summary: None,
        rec: counts.figures(),
        used: usage().since(&before),
    }
}

/// The pipeline's recognition Call, counting its model calls into `calls`:
/// batches keyed by padded width (the job's own Call) or, `by_width` false,
/// blind to width (several model calls per batch).
fn recognize(
    cfg: &OcrConfig,
    a: &Assets,
    by_width: bool,
    counts: &Arc<RecognizeCounts>,
) -> Call<TextRecognize> {
    let (a, rec_cfg, counts) = (a.clone(), cfg.recognize(), counts.clone());
    let bucket = rec_cfg.clone();
    let call = Call::new("recognize", move || {
        Ok(TextRecognize::new(LineRecognizer::from_assets(&a, rec_cfg.clone())?).counting(counts.clone()))
    })
    .replicas(cfg.knobs.recognize_replicas)
    .batch_size(cfg.recognize_batch);
    if by_width {
        call.shape(move |l: &TextLine| u64::from(bucket.padded_width(l.crop.width(), l.crop.height())))
    } else {
        call
    }
}

/// What this process has used so far, every thread counted, those that
/// have exited included (`getrusage(RUSAGE_SELF)`): minor page faults, CPU
/// seconds (user + system), context switches (voluntary + involuntary).
#[derive(Clone, Copy, Debug, Default)]
struct Usage {
    faults: u64,
    cpu_s: f64,
    switches: u64,
}

impl Usage {
    fn since(&self, before: &Usage) -> Usage {
        Usage {
            faults: self.faults.saturating_sub(before.faults),
            cpu_s: self.cpu_s - before.cpu_s,
            switches: self.switches.saturating_sub(before.switches),
        }
    }
}

fn usage() -> Usage {
    use nix::sys::resource::{UsageWho, getrusage};
    use nix::sys::time::TimeValLike;
    let Ok(ru) = getrusage(UsageWho::RUSAGE_SELF) else {
        return Usage::default();
    };
    let micros = ru.user_time().num_microseconds() + ru.system_time().num_microseconds();
    Usage {
        faults: ru.minor_page_faults() as u64,
        cpu_s: micros as f64 / 1e6,
        switches: (ru.voluntary_context_switches() + ru.involuntary_context_switches()) as u64,
    }
}

/// The CPUs this process may run on (`Cpus_allowed_list`, e.g. `0` under
/// `taskset -c 0`).
fn cpus_allowed() -> Option<String> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .map(|v| v.trim().to_string())
}

fn pipeline(files: &[PdfFile], cfg: &OcrConfig, a: &Assets, by_width: bool) -> Run {
    let before = usage();
    let counts = Arc::new(RecognizeCounts::default());
    let mut job = OcrJob::new(cfg, a);
    job.recognize = recognize(cfg, a, by_width, &counts);
    let (plan, out) = job.plan().expect("the job's plan is valid");
    let mut texts = vec![Vec::new(); files.len()];
    let t = Instant::now();
    let summary = Runner::new(&plan)
        .window(8)
        .run(
            files.iter().cloned().enumerate().map(|(i, f)| (i as u64, f)),
            Callback(|o: &RootOutcome| {
                texts[o.key as usize] = o.get(out).present().expect("healthy samples complete").page_texts;
            }),
        )
        .expect("the run completes");
    let secs = t.elapsed().as_secs_f64();
    let pages = texts.iter().map(Vec::len).sum();
    Run {
        pages,
        secs,
        texts,
        summary: Some(summary),
        rec: counts.figures(),
        used: usage().since(&before),
    }
}

fn loadavg() -> Option<String> {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .map(|s| s.trim().to_string())
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn env_num(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(default)
}

/// Medians over the rounds of one side.
struct Side {
    secs: Vec<f64>,
    cpu: Vec<f64>,
    faults: Vec<f64>,
    switches: Vec<f64>,
}

impl Side {
    fn new() -> Side {
        Side {
            secs: Vec::new(),
            cpu: Vec::new(),
            faults: Vec::new(),
            switches: Vec::new(),
        }
    }

    fn push(&mut self, r: &Run) {
        self.secs.push(r.secs);
        self.cpu.push(r.used.cpu_s);
        self.faults.push(r.used.faults as f64);
        self.switches.push(r.used.switches as f64);
    }

    fn json(&self, pages: usize) -> serde_json::Value {
        serde_json::json!({
            "secs": self.secs, "cpu_s": self.cpu, "minor_faults": self.faults, "context_switches": self.switches,
            "pages_per_s": pages as f64 / median(self.secs.clone()),
            "cpu_s_per_page": median(self.cpu.clone()) / pages as f64,
            "minor_faults_per_page": median(self.faults.clone()) / pages as f64,
            "context_switches_per_page": median(self.switches.clone()) / pages as f64,
        })
    }
}

/// Recognition model calls per recognition batch of a pipeline run.
fn calls_per_batch(r: &Run) -> f64 {
    let batches = r
        .summary
        .as_ref()
        .and_then(|s| s.call("recognize"))
        .map_or(0, |c| c.rpcs);
    r.rec.model_calls as f64 / batches.max(1) as f64
}

fn main() {
    let assets = rayorch_models::assets::ensure().expect("assets (needs python3 + pip on first run)");
    let threads: Vec<usize> = std::env::var("BENCH_THREADS")
        .unwrap_or_else(|_| "1,2".into())
        .split(',')
        .filter_map(|t| t.trim().parse().ok())
        .collect();
    let (repeat, rounds) = (env_num("BENCH_REPEAT", 1), env_num("BENCH_ROUNDS", 3));
    let files = corpus(repeat);
    let cpus = cpus_allowed();
    println!(
        "the OCR job: {} documents, open + render + detect (orientation) + recognize + embed + assemble, one replica per Call, CPUs {}; median of {rounds} alternating rounds",
        files.len(),
        cpus.as_deref().unwrap_or("?")
    );
    println!(
        "{:>7} {:>5} {:>9} {:>9} {:>10} {:>9} {:>10} {:>14} {:>9} {:>16} {:>14} {:>13}",
        "threads",
        "pages",
        "loop pg/s",
        "job pg/s",
        "job/loop",
        "keyed pg/s",
        "keyed/job",
        "CPU s/pg l|j",
        "CPU j/l",
        "faults/pg l|j",
        "ctx sw/pg l|j",
        "rec calls/b k|j"
    );
    for t in threads {
        let cfg = config(t);
        // Warm up (page cache, ORT kernels) before timing.
        let _ = sequential(&files[..1], &cfg, &assets);
        let load_start = loadavg();
        let (mut lp, mut jp, mut kp) = (Side::new(), Side::new(), Side::new());
        let (mut job_ratio, mut keyed_ratio, mut cpu_ratio) = (Vec::new(), Vec::new(), Vec::new());
        let (mut pages, mut fill, mut mixed, mut batches) = (0, 0.0, 0, 0);
        let (mut keyed_calls, mut job_calls) = (0.0, 0.0);
        let (mut keyed_padded, mut job_padded) = (0.0, 0.0);
        for _ in 0..rounds.max(1) {
            let looped = sequential(&files, &cfg, &assets);
            // The job as it runs on a CPU by default: recognition batches
            // blind to width, which is what the loop's batches are too.
            let job = pipeline(&files, &cfg, &assets, false);
            // The same pipeline with recognition keyed by padded width.
            let keyed = pipeline(&files, &cfg, &assets, true);
            assert_eq!(looped.pages, job.pages, "both sides see the same pages");
            assert_eq!(looped.texts, job.texts, "both sides read the same text");
            assert_eq!(
                (keyed.pages, &keyed.texts),
                (job.pages, &job.texts),
                "batches by width read the same text"
            );
            let rec = job
                .summary
                .as_ref()
                .and_then(|s| s.call("recognize"))
                .expect("recognize ran");
            (pages, fill, mixed, batches) = (looped.pages, rec.fill, rec.mixed_parent_batches, rec.rpcs);
            (keyed_calls, job_calls) = (calls_per_batch(&keyed), calls_per_batch(&job));
            (keyed_padded, job_padded) = (keyed.rec.padded_share, job.rec.padded_share);
            job_ratio.push(looped.secs / job.secs);
            keyed_ratio.push(job.secs / keyed.secs);
            cpu_ratio.push(job.used.cpu_s / looped.used.cpu_s);
            lp.push(&looped);
            jp.push(&job);
            kp.push(&keyed);
        }
        let load_end = loadavg();
        let per_page = |v: &Vec<f64>| median(v.clone()) / pages as f64;
        println!(
            "{t:>7} {pages:>5} {:>9.2} {:>9.2} {:>10.3} {:>9.2} {:>10.3} {:>14} {:>9.3} {:>16} {:>14} {:>13}",
            pages as f64 / median(lp.secs.clone()),
            pages as f64 / median(jp.secs.clone()),
            median(job_ratio.clone()),
            pages as f64 / median(kp.secs.clone()),
            median(keyed_ratio.clone()),
            format!("{:.3}|{:.3}", per_page(&lp.cpu), per_page(&jp.cpu)),
            median(cpu_ratio.clone()),
            format!("{:.0}|{:.0}", per_page(&lp.faults), per_page(&jp.faults)),
            format!("{:.0}|{:.0}", per_page(&lp.switches), per_page(&jp.switches)),
            format!("{keyed_calls:.2}|{job_calls:.2}"),
        );
        let line = serde_json::json!({
            "threads": t, "pages": pages, "rounds": job_ratio.len(), "cpus_allowed": cpus,
            "loop": lp.json(pages), "job": jp.json(pages), "keyed": kp.json(pages),
            "job_over_loop_speed_per_round": job_ratio, "median_job_over_loop_speed": median(job_ratio.clone()),
            "keyed_over_job_speed_per_round": keyed_ratio, "median_keyed_over_job_speed": median(keyed_ratio.clone()),
            "job_over_loop_cpu_per_round": cpu_ratio, "median_job_over_loop_cpu": median(cpu_ratio.clone()),
            "rec_fill": fill, "rec_batches": batches, "rec_mixed_page_batches": mixed,
            "rec_model_calls_per_batch_keyed": keyed_calls, "rec_model_calls_per_batch_job": job_calls,
            "rec_padded_share_keyed": keyed_padded, "rec_padded_share_job": job_padded,
            "loadavg_start": load_start, "loadavg_end": load_end,
        });
        println!("{line}");
    }
}
