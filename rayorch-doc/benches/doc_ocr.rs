//! The OCR job: pages/s of the job's own plan (`OcrJob::plan`) vs the same
//! stages in a plain sequential loop, with the same ONNX Runtime threads per
//! session.
//!
//! Both sides run the same stage code with the same settings
//! (`OcrConfig::detect`, `OcrConfig::recognize`, the render config) on the
//! healthy bundled samples: open each document (`PdfOpen`), render each
//! page (`PdfPageRender`), detect its lines with orientation
//! (`TextDetect`), recognise them (`TextRecognize`), join them
//! (`page_text`), embed the page text (`SentenceEmbed`) and assemble the
//! `Document`. The loop runs one document after another, one page after
//! another, each stage on its own batch (all lines of a page in one
//! recognition batch); the pipeline runs one replica per Call, so its stages
//! overlap and recognition batches mix lines of many pages and documents.
//! Both produce the same page texts (checked).
//!
//! Reported per thread count: the loop's and the pipeline's pages/s, the
//! pipeline over the loop (the median of the per-round ratios; rounds
//! alternate so load from other processes hits both alike), recognition
//! batch fill and the recognition batches that mix pages, with recognition
//! keyed by padded width (`--recognize-by-width`, the default on CUDA);
//! then the same pipeline with recognition batches blind to width (no
//! shape key, the CPU default), its pages/s, the keyed pipeline's speed
//! over it, and recognition model calls per batch in both.
//!
//! `cargo bench -p rayorch-doc --bench doc_ocr` (env `BENCH_THREADS`,
//! default `1,2`; `BENCH_REPEAT` copies of the corpus, default 1;
//! `BENCH_EMBED_DELAY_MS` the embed Call's batch delay, default the job's;
//! `BENCH_ROUNDS` alternating rounds, default 3). One JSON line per thread
//! count carries every round and `/proc/loadavg` before and after.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use rayorch::sink::Callback;
use rayorch::{Call, Outcome, RootOutcome, Runner, Stage, StageContext};
use rayorch_doc::Document;
use rayorch_doc::ocr::{Knobs, OcrConfig, OcrJob};
use rayorch_models::{
    Assets, EmbedConfig, LineRecognizer, PdfFile, PdfOpen, PdfPageRender, SentenceEmbed, SentenceEmbedder,
    TextDetect, TextDetector, TextLine, TextRecognize, page_text,
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
        ..d
    }
}

fn corpus(repeat: usize) -> Vec<PdfFile> {
    let docs: Vec<_> = samples()
        .into_iter()
        .filter(|s| s.kind == SampleKind::Text)
        .collect();
    (0..repeat)
        .flat_map(|r| {
            docs.iter()
                .map(move |s| PdfFile::from_bytes(format!("{}#{r}", s.file), s.bytes()))
        })
        .collect()
}

/// The one value of a one-record batch.
fn one<T>(mut out: Vec<Outcome<T>>, what: &str) -> T {
    match out.pop() {
        Some(Outcome::Ok(v)) if out.is_empty() => v,
        _ => panic!("{what}: the healthy samples give one value"),
    }
}

/// Returns (pages, seconds, page texts per document).
fn sequential(files: &[PdfFile], cfg: &OcrConfig, a: &Assets) -> (usize, f64, Vec<Vec<String>>) {
    // Model loading counts on both sides: the pipeline's wall time includes
    // its replicas' initialisation.
    let t = Instant::now();
    let cx = StageContext::new("loop", 0);
    let mut open = PdfOpen;
    let mut render = PdfPageRender::new(cfg.render.clone());
    let mut detect = TextDetect::new(TextDetector::from_assets(a, cfg.detect()).expect("det loads"));
    let mut recognize =
        TextRecognize::new(LineRecognizer::from_assets(a, cfg.recognize()).expect("rec loads"));
    let mut embed =
        SentenceEmbed::new(SentenceEmbedder::from_assets(a, &EmbedConfig::default()).expect("embed loads"));
    let (mut pages, mut texts) = (0, Vec::new());
    for f in files {
        let handles = one(open.run(vec![f.clone()], &cx).expect("open runs"), "open");
        let (mut doc_texts, mut embeddings) = (Vec::new(), Vec::new());
        for page in handles {
            let image = one(render.run(vec![page], &cx).expect("render runs"), "render");
            let lines = one(detect.run(vec![image], &cx).expect("detect runs"), "detect");
            let read: Vec<_> = recognize
                .run(lines, &cx)
                .expect("recognize runs")
                .into_iter()
                .map(|o| match o {
                    Outcome::Ok(l) => l,
                    _ => panic!("recognize: a sample line failed"),
                })
                .collect();
            let text = page_text(&read);
            embeddings.push(one(
                embed.run(vec![text.clone()], &cx).expect("embed runs"),
                "embed",
            ));
            doc_texts.push(text);
            pages += 1;
        }
        let doc = Document::assemble(&f.name, doc_texts, embeddings);
        texts.push(doc.page_texts);
    }
    (pages, t.elapsed().as_secs_f64(), texts)
}

/// The pipeline's recognition Call, counting its model calls into `calls`:
/// batches keyed by padded width (the job's own Call) or, `by_width` false,
/// blind to width (several model calls per batch).
fn recognize(cfg: &OcrConfig, a: &Assets, by_width: bool, calls: &Arc<AtomicU64>) -> Call<TextRecognize> {
    let (a, rec_cfg, calls) = (a.clone(), cfg.recognize(), calls.clone());
    let bucket = rec_cfg.clone();
    let call = Call::new("recognize", move || {
        Ok(TextRecognize::new(LineRecognizer::from_assets(&a, rec_cfg.clone())?).counting(calls.clone()))
    })
    .replicas(cfg.knobs.recognize_replicas)
    .batch_size(cfg.recognize_batch);
    if by_width {
        call.shape(move |l: &TextLine| u64::from(bucket.padded_width(l.crop.width(), l.crop.height())))
    } else {
        call
    }
}

/// This process's minor page faults and CPU seconds (user + system) so
/// far, from `/proc/self/stat` (clock ticks of 1/100 s, Linux's USER_HZ).
fn usage() -> (u64, f64) {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // The fields after the parenthesised command name, from field 3 on.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<u64> = rest.split_whitespace().map(|x| x.parse().unwrap_or(0)).collect();
    let at = |field: usize| f.get(field - 3).copied().unwrap_or(0);
    (at(10), (at(14) + at(15)) as f64 / 100.0)
}

/// What one pipeline run gave and cost.
struct Run {
    pages: usize,
    secs: f64,
    /// Page texts per document.
    texts: Vec<Vec<String>>,
    summary: rayorch::RunSummary,
    /// Recognition model calls.
    calls: u64,
    /// The process's minor page faults and CPU seconds during the run.
    used: (u64, f64),
}

fn pipeline(files: &[PdfFile], cfg: &OcrConfig, a: &Assets, by_width: bool) -> Run {
    let before = usage();
    let calls = Arc::new(AtomicU64::new(0));
    let mut job = OcrJob::new(cfg, a);
    job.recognize = recognize(cfg, a, by_width, &calls);
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
    let after = usage();
    let used = (after.0 - before.0, after.1 - before.1);
    Run {
        pages,
        secs,
        texts,
        summary,
        calls: calls.load(Ordering::Relaxed),
        used,
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

fn main() {
    let assets = rayorch_models::assets::ensure().expect("assets (needs python3 + pip on first run)");
    let threads: Vec<usize> = std::env::var("BENCH_THREADS")
        .unwrap_or_else(|_| "1,2".into())
        .split(',')
        .filter_map(|t| t.trim().parse().ok())
        .collect();
    let (repeat, rounds) = (env_num("BENCH_REPEAT", 1), env_num("BENCH_ROUNDS", 3));
    let files = corpus(repeat);
    println!(
        "the OCR job: {} documents, open + render + detect (orientation) + recognize + embed + assemble, one replica per Call; median of {rounds} alternating rounds",
        files.len()
    );
    println!(
        "{:>8} {:>7} {:>12} {:>12} {:>7} {:>9} {:>16} {:>12} {:>13} {:>16}",
        "threads",
        "pages",
        "loop pg/s",
        "pipe pg/s",
        "ratio",
        "rec fill",
        "rec mixed pages",
        "blind pg/s",
        "pipe/blind",
        "rec calls/batch"
    );
    for t in threads {
        let cfg = config(t);
        // Warm up (page cache, ORT kernels) before timing.
        let _ = sequential(&files[..1], &cfg, &assets);
        let load_start = loadavg();
        let (mut loop_s, mut pipe_s, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
        let (mut blind_s, mut blind_ratios) = (Vec::new(), Vec::new());
        let (mut pages, mut fill, mut mixed, mut batches) = (0, 0.0, 0, 0);
        let (mut calls, mut blind_calls, mut blind_batches) = (0, 0, 0);
        let (mut faults, mut blind_faults, mut cpu, mut blind_cpu) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for _ in 0..rounds.max(1) {
            let (lp, ls, lt) = sequential(&files, &cfg, &assets);
            let keyed = pipeline(&files, &cfg, &assets, true);
            // The same pipeline with recognition batches blind to width.
            let blind = pipeline(&files, &cfg, &assets, false);
            let (pp, ps, pt, pc, pu) = (keyed.pages, keyed.secs, keyed.texts, keyed.calls, keyed.used);
            let (bp, bs, bt, bc, bu) = (blind.pages, blind.secs, blind.texts, blind.calls, blind.used);
            let (summary, blind) = (keyed.summary, blind.summary);
            faults.push(pu.0 as f64);
            cpu.push(pu.1);
            blind_faults.push(bu.0 as f64);
            blind_cpu.push(bu.1);
            assert_eq!(lp, pp, "both sides see the same pages");
            assert_eq!(lt, pt, "both sides read the same text");
            assert_eq!((bp, &bt), (pp, &pt), "batches by width read the same text");
            let rec = summary.call("recognize").expect("recognize ran");
            (pages, fill, mixed, batches) = (lp, rec.fill, rec.mixed_parent_batches, rec.rpcs);
            (calls, blind_calls) = (pc, bc);
            blind_batches = blind.call("recognize").expect("recognize ran").rpcs;
            loop_s.push(ls);
            pipe_s.push(ps);
            ratios.push(ls / ps);
            blind_s.push(bs);
            blind_ratios.push(bs / ps);
        }
        let load_end = loadavg();
        let (ml, mp, mr) = (
            median(loop_s.clone()),
            median(pipe_s.clone()),
            median(ratios.clone()),
        );
        println!(
            "{t:>8} {pages:>7} {:>12.2} {:>12.2} {:>7.2} {:>8.0}% {:>16} {:>12.2} {:>13.3} {:>16}",
            pages as f64 / ml,
            pages as f64 / mp,
            mr,
            fill * 100.0,
            format!("{mixed} of {batches}"),
            pages as f64 / median(blind_s.clone()),
            median(blind_ratios.clone()),
            format!(
                "{:.2} vs {:.2}",
                calls as f64 / batches.max(1) as f64,
                blind_calls as f64 / blind_batches.max(1) as f64
            ),
        );
        let line = serde_json::json!({
            "threads": t, "pages": pages, "rounds": ratios.len(),
            "loop_s": loop_s, "pipe_s": pipe_s, "ratio_per_round": ratios, "median_ratio": mr,
            "loop_pages_per_s": pages as f64 / ml, "pipe_pages_per_s": pages as f64 / mp,
            "rec_fill": fill, "rec_batches": batches, "rec_mixed_page_batches": mixed,
            "rec_model_calls": calls, "blind_s": blind_s, "pipe_over_blind_speed_per_round": blind_ratios,
            "blind_rec_batches": blind_batches, "blind_rec_model_calls": blind_calls,
            "minor_faults": faults, "blind_minor_faults": blind_faults, "cpu_s": cpu, "blind_cpu_s": blind_cpu,
            "median_cpu_s_per_page": median(cpu.clone()) / pages as f64,
            "median_blind_cpu_s_per_page": median(blind_cpu.clone()) / pages as f64,
            "median_minor_faults": median(faults.clone()), "median_blind_minor_faults": median(blind_faults.clone()),
            "loadavg_start": load_start, "loadavg_end": load_end,
        });
        println!("{line}");
    }
}
