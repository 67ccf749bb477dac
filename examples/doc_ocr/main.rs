//! The main job: document OCR on real models, streamed per document.
//!
//! ```text
//! Pdf ─open─► expand Page ─render─► detect─► expand Line ─recognize─► reduce (page lines)
//!     ─page_text─► embed ─► reduce (page texts, page embeddings) ─assemble─► Document
//! ```
//! A document is parsed once (`open`) and expanded into page handles; each
//! page is rendered in its own Grain, so rendered pages in flight are bounded
//! by batch sizes, replicas and backpressure, not by document length, and a
//! window in child pages bounds how much work the admitted documents bring.
//! Rendering is hayro, detection and recognition PP-OCRv6 tiny on ONNX
//! Runtime, embeddings all-MiniLM-L6-v2 on candle. Recognition batches mix
//! line crops of many pages and documents; each document is written the
//! moment its last page is done, while long documents are still running.
//!
//! Run on the bundled samples (model files are fetched on first use):
//! `cargo run --example doc_ocr` (see `-- --help` for inputs and knobs; the
//! dev profile already optimises the model code and its dependencies).
//! Outputs in `--out` (default `target/doc_ocr`): `documents.jsonl`,
//! `documents.parquet/` (one segment per journal commit), `failures.jsonl`,
//! `summary.json`, `timeline.svg`, and the run's journal `journal.redb`.
//! Ctrl-C once: no new documents, those in flight finish and everything is
//! closed properly; twice: in-flight work is abandoned (reported as failures).
//! Either way (and after a crash or `kill -9`) `--resume` continues the run:
//! finished documents are kept, each exactly once, and the others run; a run
//! into an `--out` holding a journal needs `--resume` or `--force` (start
//! over). Progress bars, the timeline's per-batch spans and Ctrl-C use the
//! runner's observer and cancellation handle: the stages are the models' own,
//! unwrapped. Replicas and ONNX threads default to what the machine has
//! (`--help`); a path that cannot be read is one failed document, and the exit
//! status says whether any document failed (`cli::EXIT_CODES`).

mod cli;
mod dist;
mod outputs;
mod progress;
mod timeline;

use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};

use clap::Parser;
use rayorch::prelude::*;
use rayorch::{DomainCounts, Observer};
use rayorch::{Output, PlanErrors, Runner};
use rayorch_models::output::Document;
use rayorch_models::{
    DetectConfig, Device, EmbedConfig, LineRecognizer, LineText, OnnxConfig, PdfFile, PdfOpen, PdfPageRender,
    RecognizeConfig, RenderConfig, SentenceEmbed, SentenceEmbedder, TextDetect, TextDetector, TextRecognize,
    page_text,
};

use progress::Progress;

#[derive(Domain)]
struct Pdf;
#[derive(Domain)]
#[domain(parent = Pdf)]
struct Page;
#[derive(Domain)]
#[domain(parent = Page)]
struct Line;

/// Ctrl-C presses so far: 1 admit no new documents; 2 abandon in-flight work.
static STOP: AtomicU8 = AtomicU8::new(0);

/// Moves the page and line bars from the run's per-Domain counts: a bar's
/// length is the Entities that reached the Domain's first Call, its position
/// those that ended (done, failed or suppressed); logs every batch for the
/// timeline.
struct Bars(Arc<Progress>, timeline::SpanLog);

impl Observer for Bars {
    fn batch_finished(&mut self, b: &rayorch::BatchFinished<'_>) {
        self.1.record(b);
    }

    fn domains(&mut self, counts: &[DomainCounts]) {
        for c in counts {
            let bar = match c.domain {
                d if d == <Page as rayorch::Domain>::NAME => &self.0.pages,
                d if d == <Line as rayorch::Domain>::NAME => &self.0.lines,
                _ => continue,
            };
            bar.set_length(c.published);
            bar.set_position((c.done + c.failed + c.suppressed).min(c.published));
        }
    }
}

type MapCall<I, O> = FnCall<I, O>;
/// What `assemble` takes: the document name, its page texts and page embeddings.
type Parts = (String, Vec<String>, Vec<Vec<f32>>);

/// Every Call of the job.
struct Calls {
    open: Call<PdfOpen>,
    render: Call<PdfPageRender>,
    detect: Call<TextDetect>,
    recognize: Call<TextRecognize>,
    page_text: MapCall<Vec<LineText>, String>,
    embed: Call<SentenceEmbed>,
    name: MapCall<PdfFile, String>,
    assemble: MapCall<Parts, Document>,
}

/// The pipeline: Pdf → pages → text lines, recognized in batches that mix
/// lines of many pages and documents, gathered back in reading order.
#[pipeline]
impl Calls {
    fn forward(&self, pdfs: Port<Pdf, PdfFile>) -> Port<Pdf, Document> {
        let pages = self.render(expand!(self.open(pdfs) => Page));
        let lines = expand!(self.detect(pages) => Line);
        let text = self.page_text(reduce!(self.recognize(lines)));
        let embedding = self.embed(text);
        self.assemble(self.name(pdfs), reduce!(text), reduce!(embedding))
    }
}

fn build_plan(c: &Calls) -> Result<(Plan, Output<Document>), PlanErrors> {
    c.build_plan()
}

fn calls(args: &cli::Args, k: &cli::Knobs, assets: &rayorch_models::Assets) -> Calls {
    let onnx = OnnxConfig {
        intra_threads: k.threads,
        device: if args.cuda { Device::Cuda(0) } else { Device::Cpu },
    };
    let render_cfg = RenderConfig {
        dpi: args.dpi,
        max_pixels: args.max_pixels,
    };
    let (a1, a2, a3) = (assets.clone(), assets.clone(), assets.clone());
    let det_cfg = DetectConfig {
        onnx: onnx.clone(),
        max_side: args.det_max_side,
        orientation: !args.no_orientation,
        ..DetectConfig::default()
    };
    let rec_cfg = RecognizeConfig {
        onnx,
        ..RecognizeConfig::default()
    };
    Calls {
        open: Call::new("open", || Ok(PdfOpen)).batch_size(1),
        render: Call::new("render", move || Ok(PdfPageRender::new(render_cfg.clone())))
            .replicas(k.render_replicas)
            .batch_size(args.render_batch),
        detect: Call::new("detect", move || {
            Ok(TextDetect::new(TextDetector::from_assets(&a1, det_cfg.clone())?))
        })
        .replicas(k.detect_replicas)
        .batch_size(args.detect_batch),
        recognize: Call::new("recognize", move || {
            Ok(TextRecognize::new(LineRecognizer::from_assets(
                &a2,
                rec_cfg.clone(),
            )?))
        })
        .replicas(k.recognize_replicas)
        .batch_size(args.recognize_batch),
        page_text: Call::map("page_text", |lines: Vec<LineText>| page_text(&lines)),
        embed: Call::new("embed", move || {
            Ok(SentenceEmbed::new(SentenceEmbedder::from_assets(
                &a3,
                &EmbedConfig::default(),
            )?))
        })
        .replicas(k.embed_replicas)
        .batch_size(args.embed_batch),
        name: Call::map("name", |f: PdfFile| f.name.to_string()),
        assemble: Call::map(
            "assemble",
            |(name, texts, embs): (String, Vec<String>, Vec<Vec<f32>>)| {
                Document::assemble(&name, texts, embs)
            },
        ),
    }
}

fn embedding_dim(dir: &std::path::Path) -> Result<usize, String> {
    let text =
        std::fs::read_to_string(dir.join("config.json")).map_err(|e| format!("{}: {e}", dir.display()))?;
    let v: serde_json::Value = serde_json::from_str(&text).map_err(|e| e.to_string())?;
    v["hidden_size"]
        .as_u64()
        .map(|d| d as usize)
        .ok_or_else(|| "config.json has no hidden_size".to_string())
}

/// Run the job; `Ok` carries the exit status (see `cli::EXIT_CODES`).
fn run(args: cli::Args) -> Result<u8, Box<dyn std::error::Error>> {
    if let Some(port) = args.serve_nats {
        return dist::serve_nats(port, &args.out.join("nats"));
    }
    if let (Some(url), cli::Role::Worker) = (&args.nats, args.role) {
        return dist::run_worker(&args, url);
    }
    let default_inputs = args.inputs.is_empty();
    let inputs = if default_inputs {
        vec![cli::samples_dir().display().to_string()]
    } else {
        args.inputs.clone()
    };
    let mut files = cli::discover(&inputs)?;
    if let Some(n) = args.limit {
        files.truncate(n);
    }
    if files.is_empty() {
        return Err(format!("no PDF files found in {}", inputs.join(", ")).into());
    }
    let expected_dir = args
        .expected
        .clone()
        .or_else(|| default_inputs.then(cli::samples_dir));
    let expected = match &expected_dir {
        Some(d) => rayorch_models::pdfgen::read_manifest(d)
            .map_err(|e| format!("{}/manifest.json: {e}", d.display()))?,
        None => Vec::new(),
    };
    let assets = rayorch_models::assets::ensure()?;
    let dim = embedding_dim(&assets.embed_dir)?;

    let progress = Arc::new(Progress::new(files.len() as u64, !args.no_progress));
    let knobs = args.knobs(cli::machine_cores());
    let c = calls(&args, &knobs, &assets);
    let (plan, out) = build_plan(&c)?;
    let names: Arc<Vec<String>> = Arc::new(files.iter().map(|f| f.display().to_string()).collect());
    let journal = args.out.join("journal.redb");
    let source = source_description(&names);
    let done = journal_check(&args, &journal, files.len(), &source)?;
    let mut outputs = outputs::Outputs::create(
        &args.out,
        out,
        names.clone(),
        dim,
        progress.clone(),
        expected,
        args.resume,
    )?;

    if let Some(url) = &args.nats {
        on_ctrl_c(|| {
            eprintln!("\nCtrl-C: the owner stops; continue the run with --resume");
            std::process::exit(130)
        })?;
        progress.println(format!(
            "doc_ocr owner: {} documents, job `{}` at {url}, window {}, outputs in {}",
            files.len(),
            args.job,
            args.window,
            args.out.display()
        ));
        let opts = rayorch::spi::JournalOptions::new(&journal, source);
        let s = dist::run_owner(&args, url, &plan, &files, &mut outputs, opts)?;
        progress.finish();
        return owner_report(&args, &outputs, &s);
    }
    let spans = timeline::SpanLog::default();
    let runner = Runner::new(&plan)
        .window(args.window)
        .window_children(args.window_pages)
        .backpressure(args.backpressure)
        .observe(Bars(progress.clone(), spans.clone()))
        .journal(&journal)
        .journal_source(source);
    let stop = runner.cancel_handle();
    on_ctrl_c(move || match STOP.fetch_add(1, Ordering::SeqCst) {
        0 => {
            stop.stop_admitting();
            eprintln!("\nCtrl-C: no new documents; finishing those in flight (Ctrl-C again to abandon them)")
        }
        1 => {
            stop.cancel();
            eprintln!("\nCtrl-C: abandoning in-flight work; closing the outputs")
        }
        _ => std::process::exit(130),
    })?;

    progress.println(format!(
        "doc_ocr: {} documents, window {}, {} ONNX thread(s) per replica, replicas render {} detect {} recognize {} embed {}, outputs in {}",
        files.len(),
        args.window,
        knobs.threads,
        knobs.render_replicas,
        knobs.detect_replicas,
        knobs.recognize_replicas,
        knobs.embed_replicas,
        args.out.display()
    ));
    let source = files
        .iter()
        .enumerate()
        .map(|(i, p)| (i as u64, PdfFile::from_path(p)));
    let summary = runner.run(source, &mut outputs)?;
    progress.finish();

    let interrupted = STOP.load(Ordering::SeqCst) > 0;
    let pages_per_s = outputs.pages as f64 / summary.wall_s.max(1e-9);
    let mut json = serde_json::to_value(&summary)?;
    json["job"] = serde_json::json!({
        "documents": files.len(),
        "documents_written": outputs.written,
        "documents_failed": outputs.failed,
        "pages_written": outputs.pages,
        "pages_per_s": pages_per_s,
        "first_outcome_s": summary.first_root_s,
        "first_present_s": summary.first_present_s,
        "first_written_s": outputs.written_at.first(),
        "written_at_s": outputs.written_at,
        "first_text_document_s": outputs.written_at_pages.iter().find(|(_, p)| *p > 0).map(|(t, _)| *t),
        "interrupted": interrupted,
        "resumed_documents": summary.journal_skipped,
        "not_started": (0..files.len() as u64)
            .filter(|k| !outputs.seen.contains(k) && !done.contains(k))
            .map(|k| files[k as usize].display().to_string())
            .collect::<Vec<_>>(),
        "documents_unexpected": outputs.unexpected,
        "threads_per_session": knobs.threads,
        "replicas": {
            "render": knobs.render_replicas,
            "detect": knobs.detect_replicas,
            "recognize": knobs.recognize_replicas,
            "embed": knobs.embed_replicas,
        },
        "window": args.window,
        "window_pages": args.window_pages,
        "backpressure": args.backpressure,
        "scores": outputs.scores,
    });
    write_summary(&args.out, &json)?;
    let title = format!(
        "doc_ocr: {} documents, {} pages in {:.1} s",
        outputs.written, outputs.pages, summary.wall_s
    );
    std::fs::write(
        args.out.join("timeline.svg"),
        timeline::svg(&summary, &spans.spans(), &outputs.written_at, &title),
    )?;

    let first_text = outputs
        .written_at_pages
        .iter()
        .find(|(_, p)| *p > 0)
        .map(|(t, _)| *t);
    println!(
        "\n{} written, {} failed, {} pages in {:.2} s ({:.2} pages/s); first outcome after {:.2} s, first document with text after {:.2} s",
        outputs.written,
        outputs.failed,
        outputs.pages,
        summary.wall_s,
        pages_per_s,
        summary.first_root_s.unwrap_or(f64::NAN),
        first_text.unwrap_or(f64::NAN)
    );
    print!("{}", summary.calls_table());
    print_scores(&outputs);
    println!("outputs in {}", args.out.display());
    println!("{}", exactly_once(&args.out)?);
    if interrupted || summary.cancelled {
        println!("interrupted: continue this run with\n  {}", resume_command());
    }
    Ok(outputs.exit_code(interrupted))
}

/// `summary.json` in `out`.
fn write_summary(out: &std::path::Path, json: &serde_json::Value) -> Result<(), Box<dyn std::error::Error>> {
    std::fs::write(
        out.join("summary.json"),
        serde_json::to_string_pretty(json)? + "\n",
    )?;
    Ok(())
}

/// Each document's score against the manifest, when there is one.
fn print_scores(outputs: &outputs::Outputs) {
    if outputs.scores.is_empty() {
        return;
    }
    println!(
        "\n{:<40} {:<10} {:<11} {:>5} {:>8}",
        "document", "kind", "outcome", "pages", "CER"
    );
    for s in &outputs.scores {
        let cer = s.cer.map_or("-".to_string(), |c| format!("{:.2}%", c * 100.0));
        let mark = if s.as_expected { "" } else { "  (unexpected)" };
        println!(
            "{:<40} {:<10} {:<11} {:>5} {:>8}{mark}",
            s.name,
            format!("{:?}", s.expected).to_lowercase(),
            s.outcome,
            s.pages,
            cer
        );
    }
}

/// The owner's end of a distributed run: what was written, which worker ran
/// how many grains of each Call, the scores, and the exactly-once check.
fn owner_report(
    args: &cli::Args,
    outputs: &outputs::Outputs,
    s: &rayorch_dist::OwnerSummary,
) -> Result<u8, Box<dyn std::error::Error>> {
    let per_worker: Vec<serde_json::Value> = s
        .per_worker
        .iter()
        .map(|((w, c), n)| serde_json::json!({"worker": w, "call": c, "grains": n}))
        .collect();
    let json = serde_json::json!({
        "job": {
            "distributed": args.job,
            "documents_written": outputs.written,
            "documents_failed": outputs.failed,
            "pages_written": outputs.pages,
            "resumed_documents": s.journal_skipped,
            "scores": outputs.scores,
        },
        "per_worker": per_worker,
    });
    write_summary(&args.out, &json)?;
    println!(
        "\n{} written, {} failed, {} pages ({} resumed from the journal)",
        outputs.written, outputs.failed, outputs.pages, s.journal_skipped
    );
    println!("{:<24} {:<10} {:>8}", "worker", "call", "grains");
    for ((w, c), n) in &s.per_worker {
        println!("{w:<24} {c:<10} {n:>8}");
    }
    print_scores(outputs);
    println!("outputs in {}", args.out.display());
    println!("{}", exactly_once(&args.out)?);
    Ok(outputs.exit_code(false))
}

/// Check that the outputs hold each document once, the same ones in
/// `documents.jsonl` and `documents.parquet` (cheap: only keys are compared).
fn exactly_once(dir: &std::path::Path) -> Result<String, Box<dyn std::error::Error>> {
    let mut lines = Vec::new();
    for line in std::fs::read_to_string(dir.join("documents.jsonl"))?.lines() {
        let v: serde_json::Value = serde_json::from_str(line)?;
        lines.push(v["key"].as_u64().ok_or("documents.jsonl: a line without a key")?);
    }
    let (_, rows) = rayorch_models::output::read_documents(&dir.join("documents.parquet"))?;
    let mut rows: Vec<u64> = rows.into_iter().map(|(k, _)| k).collect();
    let (n_lines, n_rows) = (lines.len(), rows.len());
    lines.sort_unstable();
    lines.dedup();
    rows.sort_unstable();
    rows.dedup();
    if lines.len() != n_lines || rows.len() != n_rows || lines != rows {
        return Err(format!(
            "outputs disagree: documents.jsonl has {n_lines} lines ({} keys), documents.parquet {n_rows} rows ({} keys)",
            lines.len(),
            rows.len()
        )
        .into());
    }
    Ok(format!(
        "documents.jsonl and documents.parquet: {n_lines} documents, each once, the same in both"
    ))
}

/// Refuse to overwrite an unfinished journaled run by accident; `--force`
/// starts over.
/// Returns the keys the journal already holds.
fn journal_check(
    args: &cli::Args,
    journal: &std::path::Path,
    documents: usize,
    source: &str,
) -> Result<std::collections::HashSet<u64>, Box<dyn std::error::Error>> {
    let state = rayorch::journal::JournalState::read(journal)?;
    // A finished run (every document of the same list terminal) is replaced
    // like before journals: only an unfinished one needs --resume/--force.
    let finished = state
        .as_ref()
        .is_some_and(|s| s.roots.len() == documents && s.source == source);
    match (&state, args.resume, args.force) {
        (Some(_), false, false) if finished => {
            std::fs::remove_file(journal)?;
            Ok(Default::default())
        }
        (Some(s), false, false) if s.source != source => Err(format!(
            "{} holds a journaled run over another document list ({}; this run: {source}): give another --out, resume with the same inputs, or start over with --force",
            args.out.display(),
            s.source
        )
        .into()),
        (Some(s), false, false) => Err(format!(
            "{} holds a journaled run ({} of {documents} documents finished): continue it with --resume, or start over with --force",
            args.out.display(),
            s.roots.len()
        )
        .into()),
        (_, _, true) if journal.exists() => {
            std::fs::remove_file(journal)?;
            Ok(Default::default())
        }
        (None, true, _) => Err(format!(
            "--resume: {} holds no journaled run to continue; run without --resume",
            args.out.display()
        )
        .into()),
        (s, _, _) => Ok(s.as_ref().map(|s| s.roots.keys().copied().collect()).unwrap_or_default()),
    }
}

/// The documents and their keys (list order): a resume must see the same.
fn source_description(names: &[String]) -> String {
    // FNV-1a over the ordered list: stable across builds and machines.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in names.iter().flat_map(|n| n.bytes().chain([0])) {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    format!("{} PDF files, list digest {h:016x}", names.len())
}

/// This command line with `--resume` (the way to continue after Ctrl-C).
fn resume_command() -> String {
    let mut args: Vec<String> = std::env::args().skip(1).filter(|a| a != "--force").collect();
    if !args.iter().any(|a| a == "--resume") {
        args.push("--resume".into());
    }
    format!("cargo run --release --example doc_ocr -- {}", args.join(" "))
}

/// Install the Ctrl-C handler; a process that has one already (a test that
/// runs the job twice in-process) keeps the first.
fn on_ctrl_c(f: impl FnMut() + Send + 'static) -> Result<(), ctrlc::Error> {
    match ctrlc::set_handler(f) {
        Err(ctrlc::Error::MultipleHandlers) => Ok(()),
        r => r,
    }
}

/// Run the job with these command-line words (tests run it in-process).
pub fn run_from<T: Into<std::ffi::OsString> + Clone>(
    argv: impl IntoIterator<Item = T>,
) -> Result<u8, Box<dyn std::error::Error>> {
    run(cli::Args::try_parse_from(argv)?)
}

fn main() -> ExitCode {
    match run(cli::Args::parse()) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
