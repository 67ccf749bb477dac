//! The behaviour of the `doc_ocr` job, through the example's own modules
//! (its command line, input discovery, sink and timeline) and the real
//! renderer; detection, recognition and embedding are replaced by plain maps
//! so the test needs no models and runs in a second or two:
//! - a PDF cut short, a render failure, a path that does not exist and a
//!   pattern that matches nothing are each one `failed` line with its cause,
//!   and the other documents are written;
//! - the exit status is 3 when a document failed, 0 when all were written
//!   (or all ended as the manifest says), 130 when interrupted;
//! - replicas and threads default from the core count, flags override them;
//! - the timeline has one rectangle per batch, on its replica's row.
#![allow(dead_code, missing_docs)]

#[path = "../examples/doc_ocr/cli.rs"]
mod cli;
#[path = "../examples/doc_ocr/outputs.rs"]
mod outputs;
#[path = "../examples/doc_ocr/progress.rs"]
mod progress;
#[path = "../examples/doc_ocr/timeline.rs"]
mod timeline;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use clap::Parser;
use rayorch::prelude::*;
use rayorch::{Output, PlanErrors, Runner};
use rayorch_models::output::Document;
use rayorch_models::pdfgen::{self, text_pdf};
use rayorch_models::{PageImage, PdfFile, PdfRender, RenderConfig};

#[derive(Domain)]
struct Pdf;
#[derive(Domain)]
#[domain(parent = Pdf)]
struct Page;

const DIM: usize = 4;

/// The job's shape with the model stages replaced: the real renderer, then
/// one text per page, gathered back per document.
struct Job {
    render: Call<PdfRender>,
    page_text: FnCall<PageImage, String>,
    name: FnCall<PdfFile, String>,
    assemble: FnCall<(String, Vec<String>), Document>,
}

#[pipeline]
impl Job {
    fn forward(&self, pdfs: Port<Pdf, PdfFile>) -> Port<Pdf, Document> {
        let pages = self.render(pdfs);
        let text = self.page_text(expand!(pages => Page));
        self.assemble(self.name(pdfs), reduce!(text))
    }
}

fn plan() -> Result<(Plan, Output<Document>), PlanErrors> {
    let cfg = RenderConfig {
        dpi: 10.0,
        ..RenderConfig::default()
    };
    Job {
        render: Call::new("render", move || Ok(PdfRender::new(cfg.clone())))
            .replicas(2)
            .batch_size(1),
        page_text: Call::map("page_text", |p: PageImage| format!("page {}", p.page + 1)),
        name: Call::map("name", |f: PdfFile| f.name.to_string()),
        assemble: Call::map("assemble", |(name, texts): (String, Vec<String>)| {
            let n = texts.len();
            Document::assemble(&name, texts, vec![vec![0.5; DIM]; n])
        }),
    }
    .build_plan()
}

fn report(pages: usize) -> Vec<u8> {
    let pages: Vec<Vec<String>> = (1..=pages)
        .map(|p| vec![format!("Page {p} of the report"), "Figures and notes".into()])
        .collect();
    text_pdf(&pages, 12.0)
}

fn temp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("rayorch-doc-ocr-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// What one run of the job left behind.
struct Ran {
    summary: rayorch::RunSummary,
    spans: Vec<timeline::Span>,
    written: Vec<serde_json::Value>,
    failures: Vec<serde_json::Value>,
    exit: u8,
}

fn jsonl(path: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Discover `inputs` as the job does, run them through the job's sink.
fn run_job(inputs: &[String], out: &Path, expected: Vec<pdfgen::Sample>) -> Ran {
    let files = cli::discover(inputs).unwrap();
    let (plan, output) = plan().unwrap();
    let names: Arc<Vec<String>> = Arc::new(files.iter().map(|f| f.display().to_string()).collect());
    let progress = Arc::new(progress::Progress::new(files.len() as u64, false));
    let mut sink = outputs::Outputs::create(out, output, names, DIM, progress, expected, false).unwrap();
    let spans = timeline::SpanLog::default();
    let summary = Runner::new(&plan)
        .window(4)
        .observe(spans.clone())
        .run(
            files
                .iter()
                .enumerate()
                .map(|(i, p)| (i as u64, PdfFile::from_path(p))),
            &mut sink,
        )
        .unwrap();
    Ran {
        summary,
        spans: spans.spans(),
        written: jsonl(&out.join("documents.jsonl")),
        failures: jsonl(&out.join("failures.jsonl")),
        exit: sink.exit_code(false),
    }
}

fn failure<'a>(ran: &'a Ran, file: &str) -> &'a serde_json::Value {
    ran.failures
        .iter()
        .find(|f| f["name"].as_str().is_some_and(|n| n.ends_with(file)))
        .unwrap_or_else(|| panic!("no failure line for {file}: {:?}", ran.failures))
}

#[test]
fn bad_documents_are_failure_lines_the_rest_are_written_and_the_exit_status_says_so() {
    let dir = temp_dir("mixed");
    let full = report(10);
    std::fs::write(dir.join("a-report.pdf"), &full).unwrap();
    std::fs::write(dir.join("b-cut.pdf"), &full[..full.len() * 3 / 10]).unwrap();
    std::fs::write(dir.join("c-letter.pdf"), report(1)).unwrap();
    std::fs::write(dir.join("d-notes.pdf"), b"these are notes, not a PDF").unwrap();
    let inputs = vec![
        dir.join("a-report.pdf").display().to_string(),
        dir.join("b-cut.pdf").display().to_string(),
        dir.join("missing.pdf").display().to_string(),
        dir.join("nothing-*.pdf").display().to_string(),
        dir.join("c-letter.pdf").display().to_string(),
        dir.join("d-notes.pdf").display().to_string(),
    ];
    let ran = run_job(&inputs, &dir.join("out"), Vec::new());

    // The good documents, whole.
    let mut pages: Vec<(String, u64)> = ran
        .written
        .iter()
        .map(|d| {
            (
                d["name"].as_str().unwrap().to_string(),
                d["pages"].as_u64().unwrap(),
            )
        })
        .collect();
    pages.sort(); // written in completion order
    assert_eq!(pages.len(), 2, "{pages:?}");
    assert!(
        pages[0].0.ends_with("a-report.pdf") && pages[0].1 == 10,
        "{pages:?}"
    );
    assert!(
        pages[1].0.ends_with("c-letter.pdf") && pages[1].1 == 1,
        "{pages:?}"
    );

    // Every bad one is one failure line, labelled failed, with its cause.
    assert_eq!(ran.failures.len(), 4, "{:?}", ran.failures);
    assert!(
        ran.failures.iter().all(|f| f["outcome"] == "failed"),
        "{:?}",
        ran.failures
    );
    for (file, says) in [
        ("b-cut.pdf", "declares 10 pages but only"),
        ("missing.pdf", "cannot read the file"),
        ("nothing-*.pdf", "cannot read the file"),
        ("d-notes.pdf", "not a PDF"),
    ] {
        let cause = failure(&ran, file)["cause"].as_str().unwrap_or_default();
        assert!(cause.contains(says), "{file}: {cause}");
    }
    // Where it arose: the render Call.
    let at = failure(&ran, "b-cut.pdf")["at"].as_str().unwrap_or_default();
    assert!(at.contains("render"), "{at}");

    assert_eq!(ran.exit, 3, "a failed document makes the exit status 3");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_run_where_everything_is_written_or_fails_as_its_manifest_says_exits_0() {
    let dir = temp_dir("clean");
    std::fs::write(dir.join("one.pdf"), report(2)).unwrap();
    let ran = run_job(&[dir.display().to_string()], &dir.join("out"), Vec::new());
    assert_eq!((ran.written.len(), ran.failures.len(), ran.exit), (1, 0, 0));

    // The bundled samples' manifest expects its bad samples to fail: a run
    // over them that ends as the manifest says is a success (the README's
    // `cargo run --example doc_ocr`), one that does not is not.
    let samples = cli::samples_dir();
    let manifest = pdfgen::read_manifest(&samples).unwrap();
    let bad: Vec<String> = manifest
        .iter()
        .filter(|s| !matches!(s.kind, pdfgen::SampleKind::Text | pdfgen::SampleKind::Empty))
        .map(|s| samples.join(&s.file).display().to_string())
        .collect();
    assert!(!bad.is_empty());
    let ran = run_job(&bad, &dir.join("out2"), manifest.clone());
    assert_eq!(ran.failures.len(), bad.len());
    assert_eq!(ran.exit, 0, "{:?}", ran.failures);
    let ran = run_job(&bad, &dir.join("out3"), Vec::new());
    assert_eq!(ran.exit, 3, "without the manifest the same failures count");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_timeline_draws_every_batch_on_its_replica_row() {
    let dir = temp_dir("timeline");
    for i in 0..5 {
        std::fs::write(dir.join(format!("doc{i}.pdf")), report(1 + i)).unwrap();
    }
    let ran = run_job(&[dir.display().to_string()], &dir.join("out"), Vec::new());
    assert_eq!(ran.written.len(), 5);
    let rpcs: u64 = ran.summary.calls.iter().map(|c| c.rpcs).sum();
    assert_eq!(ran.spans.len() as u64, rpcs, "one span per batch");
    let render = ran.summary.calls.iter().position(|c| c.name == "render").unwrap();
    assert_eq!(ran.summary.calls[render].rpcs, 5, "one document per render batch");
    assert!(
        ran.spans
            .iter()
            .all(|s| s.replica < ran.summary.calls[s.call].replicas.max(1))
    );
    let svg = timeline::svg(&ran.summary, &ran.spans, &[0.1, 0.2], "test");
    assert_eq!(svg.matches(r#"<rect class="batch""#).count() as u64, rpcs);
    // Rows: the render Call's two replicas, one for each other Call.
    assert!(svg.contains("render (B=1") && svg.contains(">#1<"), "{svg}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn defaults_follow_the_core_count_and_flags_override_them() {
    let two = cli::Knobs::for_cores(2);
    assert_eq!(two.recognize_replicas, 2, "two cores: both busy recognising");
    assert_eq!((two.threads, two.detect_replicas, two.render_replicas), (1, 1, 1));
    let one = cli::Knobs::for_cores(1);
    assert_eq!(one.recognize_replicas * one.threads, 1);
    for cores in [4, 8, 16, 64] {
        let k = cli::Knobs::for_cores(cores);
        assert_eq!(k.recognize_replicas * k.threads, cores, "{cores} cores: {k:?}");
        assert!(k.detect_replicas >= 1 && k.render_replicas >= 1 && k.detect_replicas < k.recognize_replicas);
    }
    let args = cli::Args::parse_from(["doc_ocr"]);
    assert_eq!(args.knobs(12), cli::Knobs::for_cores(12));
    let args = cli::Args::parse_from(["doc_ocr", "--threads", "3", "--recognize-replicas", "0"]);
    let k = args.knobs(16);
    assert_eq!((k.threads, k.recognize_replicas), (3, 1));
    assert_eq!(k.detect_replicas, cli::Knobs::for_cores(16).detect_replicas);
    assert!(cli::machine_cores() >= 1);
}

#[test]
fn the_help_names_the_exit_codes() {
    use clap::CommandFactory;
    let help = cli::Args::command().render_long_help().to_string();
    assert!(
        help.contains("Exit status") && help.contains("3    at least one document failed"),
        "{help}"
    );
}
