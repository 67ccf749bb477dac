//! The job's command line run: inputs, outputs, journal, progress, Ctrl-C,
//! and the role of this process (local, owner, worker or broker).
//!
//! Outputs in `--out` (default `target/doc_ocr`): `documents.jsonl`,
//! `documents.parquet/` (one segment per journal commit), `failures.jsonl`,
//! `summary.json`, `timeline.svg`, and the run's journal `journal.redb`.
//! Ctrl-C once: no new documents, those in flight finish and everything is
//! closed properly; twice: in-flight work is abandoned (reported as
//! failures). Either way (and after a crash or `kill -9`) `--resume`
//! continues the run: finished documents are kept, each exactly once, and
//! the others run; a run into an `--out` holding a journal needs
//! `--resume` or `--force` (start over). The exit status says whether any
//! document failed (`cli::EXIT_CODES`).

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use clap::Parser;
use rayorch::Runner;
use rayorch::spi::JournalOptions;
use rayorch_kit::progress::Progress;
use rayorch_kit::resume::{self, Start};
use rayorch_kit::role::{self, Role};
use rayorch_kit::stop;
use rayorch_kit::timeline::{self, SpanLog};
use rayorch_kit::watch;
use rayorch_models::PdfFile;
use rayorch_testdata::pdfgen::read_manifest;

use super::cli::{self, Args};
use super::outputs::Outputs;
use super::{Line, OcrJob, Page, Pdf, dist, embedding_dim, machine_cores};
use crate::document::read_documents;
use crate::inputs::discover;

type Error = rayorch::BoxError;

/// Run the job with these command-line words (tests run it in-process);
/// `Ok` carries the exit status (see `cli::EXIT_CODES`).
pub fn run_from<T: Into<std::ffi::OsString> + Clone>(argv: impl IntoIterator<Item = T>) -> Result<u8, Error> {
    run(Args::try_parse_from(argv)?)
}

/// Run the job; `Ok` carries the exit status (see `cli::EXIT_CODES`).
pub fn run(args: Args) -> Result<u8, Error> {
    let assets = || rayorch_models::assets::ensure();
    let cfg = args.config(machine_cores());
    match args.dist.role() {
        Role::Broker { listen } => role::serve_nats(listen, &args.out.join("nats")),
        Role::Worker { url, calls } => {
            let (plan, _) = OcrJob::new(&cfg, &assets()?).plan()?;
            let owner_calls = args.dist.owner_calls(OWNER_CALLS);
            let calls = calls.unwrap_or_else(|| {
                role::default_worker_calls(&plan, owner_calls, |c| cfg.knobs.replicas_of(c))
            });
            eprintln!(
                "doc_ocr worker: job `{}` at {url}, serving {calls}",
                args.dist.job_name("doc_ocr")
            );
            let s = role::run_worker(&plan, dist::codecs(), dist::config(&args, &url), &calls)?;
            println!(
                "doc_ocr worker: {} batches, {} grains; the owner ended the run",
                s.batches, s.grains
            );
            Ok(0)
        }
        Role::Owner { url } => run_here(&args, Some(&url)),
        Role::Local => run_here(&args, None),
    }
}

/// The Calls a distributed run's owner runs itself by default: the cheap
/// steps next to the data (so it never re-parses a PDF a worker opened).
const OWNER_CALLS: &str = "open:1,name:1,layer:1,page_text:1,text:1,assemble:1";

/// The documents, outputs and journal of a run in this process: the whole
/// job (`owner` `None`), or the owner of a distributed one.
fn run_here(args: &Args, owner: Option<&str>) -> Result<u8, Error> {
    // First: a bad --otlp fails before any output is touched.
    let traces = rayorch_kit::otlp::job_traces(args.otlp.as_deref(), "doc_ocr")?;
    let default_inputs = args.inputs.is_empty();
    let inputs = if default_inputs {
        vec![cli::samples_dir().display().to_string()]
    } else {
        args.inputs.clone()
    };
    let mut files = discover(&inputs)?;
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
        Some(d) => read_manifest(d).map_err(|e| format!("{}/manifest.json: {e}", d.display()))?,
        None => Vec::new(),
    };
    let assets = rayorch_models::assets::ensure()?;
    let dim = embedding_dim(&assets.embed_dir)?;
    let cfg = args.config(machine_cores());
    let (plan, out) = OcrJob::new(&cfg, &assets).plan()?;

    let progress = Progress::new(!args.no_progress)
        .root::<Pdf>("documents", files.len() as u64)
        .domain::<Page>("pages")
        .domain::<Line>("lines")
        .shared();
    let names: Arc<Vec<String>> = Arc::new(files.iter().map(|f| f.display().to_string()).collect());
    let journal = args.out.join("journal.redb");
    let source = resume::source_digest("PDF files", &names);
    let start = Start::from_flags(args.resume, args.force);
    let done = resume::prepare(&args.out, &journal, start, files.len(), &source)?;
    let mut outputs = Outputs::create(
        &args.out,
        out,
        names,
        dim,
        progress.clone(),
        expected,
        args.resume,
    )?;

    let spans = SpanLog::default();
    let (watch, _server) = watch::serve(args.metrics, &progress)?;
    let observer = (progress.observer(), (spans.clone(), watch));
    let k = cfg.knobs;
    let (summary, interrupts, owner_stats) = match owner {
        None => {
            let runner = Runner::new(&plan)
                .window(args.window)
                .window_children(args.window_pages)
                .backpressure(args.backpressure)
                .observe(observer)
                .journal(&journal)
                .journal_source(source);
            let interrupts = stop::on_ctrl_c(runner.cancel_handle(), "documents")?;
            progress.println(format!(
                "doc_ocr: {} documents, window {}, {} ONNX thread(s) per replica, replicas read {} detect {} recognize {} embed {}, outputs in {}",
                files.len(),
                args.window,
                k.threads,
                k.render_replicas,
                k.detect_replicas,
                k.recognize_replicas,
                k.embed_replicas,
                args.out.display()
            ));
            let roots = files
                .iter()
                .enumerate()
                .map(|(i, p)| (i as u64, PdfFile::from_path(p)));
            (runner.run(roots, &mut outputs)?, interrupts, None)
        }
        Some(url) => {
            let mut owner = role::owner(
                &plan,
                dist::codecs(),
                dist::config(args, url),
                JournalOptions::new(&journal, source),
                args.dist.owner_calls(OWNER_CALLS),
            )
            .observe(observer);
            let interrupts = stop::on_ctrl_c(owner.cancel_handle(), "documents")?;
            progress.println(format!(
                "doc_ocr owner: {} documents, job `{}` at {url}, window {}, outputs in {}",
                files.len(),
                args.dist.job_name("doc_ocr"),
                args.window,
                args.out.display()
            ));
            let summary = role::run_owner(&mut owner, dist::sources(&files), &mut outputs)?;
            (summary, interrupts, Some(owner.stats()))
        }
    };
    progress.finish();
    if let Some(t) = traces {
        println!("{}", t.finish());
    }

    let interrupted = interrupts.pressed();
    let pages_per_s = outputs.pages as f64 / summary.wall_s.max(1e-9);
    let first_text = outputs
        .written_at_pages
        .iter()
        .find(|(_, p)| *p > 0)
        .map(|(t, _)| *t);
    let mut json = serde_json::to_value(&summary)?;
    json["job"] = serde_json::json!({
        "documents": files.len(),
        "documents_written": outputs.written,
        "documents_failed": outputs.failed,
        "pages_written": outputs.pages,
        "pages_from_layer": outputs.layer_pages,
        "pages_ocr": outputs.pages - outputs.layer_pages,
        "pages_per_s": pages_per_s,
        "first_outcome_s": summary.first_root_s,
        "first_present_s": summary.first_present_s,
        "first_written_s": outputs.written_at.first(),
        "written_at_s": outputs.written_at,
        "first_text_document_s": first_text,
        "interrupted": interrupted,
        "resumed_documents": summary.journal_skipped,
        "not_started": not_started(&files, &outputs.seen, &done),
        "documents_unexpected": outputs.unexpected,
        "threads_per_session": k.threads,
        "replicas": {
            "read": k.render_replicas,
            "detect": k.detect_replicas,
            "recognize": k.recognize_replicas,
            "embed": k.embed_replicas,
        },
        "window": args.window,
        "window_pages": args.window_pages,
        "backpressure": args.backpressure,
        "scores": outputs.scores,
    });
    if let Some(stats) = &owner_stats {
        json["job"]["distributed"] = serde_json::json!(args.dist.job_name("doc_ocr"));
        json["owner_bytes"] = owner_bytes(stats);
    }
    rayorch_kit::check::write_json(&args.out, "summary.json", &json)?;
    let title = format!(
        "doc_ocr: {} documents, {} pages in {:.1} s",
        outputs.written, outputs.pages, summary.wall_s
    );
    std::fs::write(
        args.out.join("timeline.svg"),
        timeline::svg(
            &summary,
            &spans.spans(),
            &outputs.written_at,
            "documents written",
            &title,
        ),
    )?;

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
    if let Some(stats) = &owner_stats {
        print_workers(&summary, stats);
    }
    outputs.print_scores();
    println!("outputs in {}", args.out.display());
    println!("{}", exactly_once(&args.out)?);
    if interrupted || summary.cancelled {
        println!(
            "interrupted: continue this run with\n  {}",
            resume::resume_command("cargo run --release --example doc_ocr --")
        );
    }
    Ok(outputs.exit_code(interrupted))
}

/// The documents that never reached the sink and are not in the journal.
fn not_started(files: &[PathBuf], seen: &[u64], done: &HashSet<u64>) -> Vec<String> {
    let seen: HashSet<u64> = seen.iter().copied().collect();
    (0..files.len() as u64)
        .filter(|k| !seen.contains(k) && !done.contains(k))
        .map(|k| files[k as usize].display().to_string())
        .collect()
}

/// What crossed the broker for the owner, and what it had to decode.
fn owner_bytes(stats: &rayorch_dist::OwnerStats) -> serde_json::Value {
    let [inline, stored, fetched, messages] = stats.bytes.snapshot();
    serde_json::json!({
        "decoded": stats.bytes.decoded.load(std::sync::atomic::Ordering::Relaxed),
        "inline_sent": inline,
        "stored": stored,
        "fetched": fetched,
        "messages": messages,
    })
}

/// A distributed run: which worker ran how many Grains of each Call, and
/// the payload bytes the owner decoded.
fn print_workers(summary: &rayorch::RunSummary, stats: &rayorch_dist::OwnerStats) {
    println!("{:<24} {:<10} {:>8}", "worker", "call", "grains");
    for w in &summary.workers {
        println!("{:<24} {:<10} {:>8}", w.worker, w.call, w.grains);
    }
    println!(
        "the owner decoded {} payload bytes",
        stats.bytes.decoded.load(std::sync::atomic::Ordering::Relaxed)
    );
}

/// Check that the outputs hold each document once, the same ones in
/// `documents.jsonl` and `documents.parquet`.
fn exactly_once(dir: &Path) -> Result<String, Error> {
    let lines = rayorch_kit::check::jsonl_keys(&dir.join("documents.jsonl"))?;
    let (_, rows) = read_documents(&dir.join("documents.parquet"))?;
    let n = rayorch_kit::check::once_in_both(
        ("documents.jsonl", lines),
        ("documents.parquet", rows.into_iter().map(|(k, _)| k).collect()),
    )?;
    Ok(format!(
        "documents.jsonl and documents.parquet: {n} documents, each once, the same in both"
    ))
}
