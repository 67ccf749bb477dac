//! Document OCR: pages/s through a rayorch pipeline vs the same models in a
//! plain sequential loop, with the same ONNX Runtime threads per session.
//!
//! Both sides do the same work on the healthy bundled samples: render every
//! page (hayro, 150 dpi), detect its lines (PP-OCRv6 tiny det), recognise
//! them (PP-OCRv6 tiny rec) and join them into page text. The loop runs one
//! document after another, one page after another (all lines of a page in
//! one recognition call). The pipeline is `render → expand Page → detect →
//! expand Line → recognize → reduce`, one replica per Call, so its stages
//! overlap and recognition batches mix lines of many pages and documents.
//! Both produce the same text (checked).
//!
//! Reported per thread count: the loop's and the pipeline's pages/s, the
//! pipeline over the loop (runtime overhead; the median of the per-round
//! ratios, rounds alternate so load from other processes hits both alike),
//! recognition batch fill, and recognition batches that mix documents and
//! that mix pages, counted by the stage itself from each batch's lines.
//!
//! `cargo bench -p rayorch-models --bench doc_ocr` (env `BENCH_THREADS`,
//! default `1,2`; `BENCH_REPEAT` copies of the corpus, default 1;
//! `BENCH_ROUNDS` alternating rounds, default 3). One JSON line per thread
//! count carries every round and `/proc/loadavg` before and after.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use rayorch::prelude::*;
use rayorch::sink::Callback;
use rayorch::{RootOutcome, Runner, Stage, StageContext, StageResult};
use rayorch_models::pdfgen::{SampleKind, samples};
use rayorch_models::{
    DetectConfig, LineRecognizer, LineText, OnnxConfig, PdfFile, PdfRender, RecognizeConfig, RenderConfig,
    TextDetect, TextDetector, TextLine, TextRecognize, page_text, render_document,
};

domain!(Pdf);
domain!(Page: Pdf);
domain!(Line: Page);

fn configs(threads: usize) -> (DetectConfig, RecognizeConfig) {
    let onnx = OnnxConfig {
        intra_threads: threads,
        ..OnnxConfig::default()
    };
    (
        DetectConfig {
            onnx: onnx.clone(),
            ..DetectConfig::default()
        },
        RecognizeConfig {
            onnx,
            ..RecognizeConfig::default()
        },
    )
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

/// Returns (pages, seconds, texts per document).
fn sequential(
    files: &[PdfFile],
    threads: usize,
    a: &rayorch_models::Assets,
) -> (usize, f64, Vec<Vec<String>>) {
    let (dc, rc) = configs(threads);
    // Model loading counts on both sides: the pipeline's wall time includes
    // its replicas' initialisation.
    let t = Instant::now();
    let mut det = TextDetector::from_assets(a, dc).expect("det loads");
    let mut rec = LineRecognizer::from_assets(a, rc).expect("rec loads");
    let mut pages = 0;
    let mut texts = Vec::new();
    for f in files {
        let imgs = render_document(f, &RenderConfig::default()).expect("samples render");
        let mut doc = Vec::new();
        for img in &imgs {
            let boxes = det.detect(&[&img.image]).expect("det runs").remove(0);
            let crops: Vec<image::RgbImage> = boxes
                .iter()
                .map(|b| {
                    let (x0, y0) = (b.x0.floor() as u32, b.y0.floor() as u32);
                    let (x1, y1) = (
                        (b.x1.ceil() as u32).min(img.image.width()),
                        (b.y1.ceil() as u32).min(img.image.height()),
                    );
                    image::imageops::crop_imm(&*img.image, x0, y0, x1 - x0, y1 - y0).to_image()
                })
                .collect();
            let refs: Vec<&image::RgbImage> = crops.iter().collect();
            let out = rec.recognize(&refs).expect("rec runs");
            let lines: Vec<LineText> = out
                .into_iter()
                .zip(&boxes)
                .map(|((text, confidence), b)| LineText {
                    text,
                    confidence,
                    low_confidence: false,
                    row: b.row,
                    bbox: [0; 4],
                })
                .collect();
            doc.push(page_text(&lines));
            pages += 1;
        }
        texts.push(doc);
    }
    (pages, t.elapsed().as_secs_f64(), texts)
}

/// Recognition batches as the stage saw them.
#[derive(Clone, Copy, Debug, Default)]
struct RecBatches {
    batches: u64,
    lines: u64,
    mixed_documents: u64,
    mixed_pages: u64,
}

/// `TextRecognize` that also counts, from its batch's own lines, how many
/// batches mix documents (the engine's `mixed_parent_batches` counts batches
/// mixing parents, which for Lines are pages).
struct CountingRecognize {
    inner: TextRecognize,
    counts: Arc<Mutex<RecBatches>>,
}

impl Stage for CountingRecognize {
    type In = TextLine;
    type Out = LineText;

    fn run(&mut self, batch: Vec<TextLine>, cx: &StageContext) -> StageResult<LineText> {
        let docs: HashSet<&str> = batch.iter().map(|l| &*l.doc).collect();
        let pages: HashSet<(&str, usize)> = batch.iter().map(|l| (&*l.doc, l.page)).collect();
        {
            let mut c = self.counts.lock().unwrap_or_else(|p| p.into_inner());
            c.batches += 1;
            c.lines += batch.len() as u64;
            c.mixed_documents += u64::from(docs.len() > 1);
            c.mixed_pages += u64::from(pages.len() > 1);
        }
        self.inner.run(batch, cx)
    }
}

fn pipeline(
    files: &[PdfFile],
    threads: usize,
    a: &rayorch_models::Assets,
) -> (usize, f64, Vec<Vec<String>>, rayorch::RunSummary, RecBatches) {
    let (dc, rc) = configs(threads);
    let (a1, a2) = (a.clone(), a.clone());
    let render = Call::new("render", || Ok(PdfRender::new(RenderConfig::default()))).batch_size(1);
    let detect = Call::new("detect", move || {
        Ok(TextDetect::new(TextDetector::from_assets(&a1, dc.clone())?))
    })
    .batch_size(4);
    let counts = Arc::new(Mutex::new(RecBatches::default()));
    let c2 = counts.clone();
    let recognize = Call::new("recognize", move || {
        Ok(CountingRecognize {
            inner: TextRecognize::new(LineRecognizer::from_assets(&a2, rc.clone())?),
            counts: c2.clone(),
        })
    })
    .batch_size(48);
    let join = Call::map("page_text", |l: Vec<LineText>| page_text(&l));
    let (plan, out) = Plan::build(|b| {
        let pdfs = b.source::<Pdf, PdfFile>();
        let pages = expand::<Page, _, _>(render.apply(pdfs));
        let lines = expand::<Line, _, _>(detect.apply(pages));
        b.output(reduce(join.apply(reduce(recognize.apply(lines)))))
    })
    .expect("the plan is valid");
    let mut texts = vec![Vec::new(); files.len()];
    let t = Instant::now();
    let summary = Runner::new(&plan)
        .window(8)
        .run(
            files.iter().cloned().enumerate().map(|(i, f)| (i as u64, f)),
            Callback(|o: &RootOutcome| {
                texts[o.key as usize] = o.get(out).present().expect("healthy samples complete");
            }),
        )
        .expect("the run completes");
    let secs = t.elapsed().as_secs_f64();
    let pages = texts.iter().map(Vec::len).sum();
    let counts = *counts.lock().unwrap_or_else(|p| p.into_inner());
    (pages, secs, texts, summary, counts)
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

fn main() {
    let assets = rayorch_models::assets::ensure().expect("assets (needs python3 + pip on first run)");
    let threads: Vec<usize> = std::env::var("BENCH_THREADS")
        .unwrap_or_else(|_| "1,2".into())
        .split(',')
        .filter_map(|t| t.trim().parse().ok())
        .collect();
    let repeat: usize = std::env::var("BENCH_REPEAT")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(1);
    let rounds: usize = std::env::var("BENCH_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(3);
    let files = corpus(repeat);
    println!(
        "document OCR: {} documents, render + detect + recognize, one replica per Call; median of {rounds} alternating rounds",
        files.len()
    );
    println!(
        "{:>8} {:>7} {:>12} {:>12} {:>7} {:>9} {:>14} {:>14}",
        "threads", "pages", "loop pg/s", "pipe pg/s", "ratio", "rec fill", "rec mixed doc", "rec mixed page"
    );
    for t in threads {
        // Warm up (page cache, ORT kernels) before timing.
        let _ = sequential(&files[..1], t, &assets);
        let load_start = loadavg();
        let (mut loop_s, mut pipe_s, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
        let (mut pages, mut fill, mut engine_mixed, mut counts) = (0, 0.0, 0, RecBatches::default());
        // Alternate the two so load from other processes hits both alike.
        for _ in 0..rounds.max(1) {
            let (lp, ls, lt) = sequential(&files, t, &assets);
            let (pp, ps, pt, summary, c) = pipeline(&files, t, &assets);
            assert_eq!(lp, pp, "both sides see the same pages");
            assert_eq!(lt, pt, "both sides read the same text");
            let rec = summary.call("recognize").expect("recognize ran");
            (pages, fill, engine_mixed, counts) = (lp, rec.fill, rec.mixed_parent_batches, c);
            assert_eq!(c.batches, rec.rpcs, "the stage saw every recognition batch once");
            loop_s.push(ls);
            pipe_s.push(ps);
            ratios.push(ls / ps);
        }
        let load_end = loadavg();
        let (ml, mp, mr) = (
            median(loop_s.clone()),
            median(pipe_s.clone()),
            median(ratios.clone()),
        );
        println!(
            "{t:>8} {pages:>7} {:>12.2} {:>12.2} {:>7.2} {:>8.0}% {:>14} {:>14}",
            pages as f64 / ml,
            pages as f64 / mp,
            mr,
            fill * 100.0,
            format!("{} of {}", counts.mixed_documents, counts.batches),
            format!("{} of {}", counts.mixed_pages, counts.batches),
        );
        let line = serde_json::json!({
            "threads": t, "pages": pages, "rounds": ratios.len(),
            "loop_s": loop_s, "pipe_s": pipe_s, "ratio_per_round": ratios, "median_ratio": mr,
            "loop_pages_per_s": pages as f64 / ml, "pipe_pages_per_s": pages as f64 / mp,
            "rec_fill": fill, "rec_batches": counts.batches, "rec_lines": counts.lines,
            "rec_mixed_document_batches": counts.mixed_documents,
            "rec_mixed_page_batches": counts.mixed_pages,
            "engine_mixed_parent_batches": engine_mixed,
            "loadavg_start": load_start, "loadavg_end": load_end,
        });
        println!("{line}");
    }
}
