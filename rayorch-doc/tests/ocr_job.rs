//! The behaviour of the OCR job through its own command line
//! (`rayorch_doc::ocr::run_from`), so the plan under test is the plan the
//! job runs. Pages are rendered at 10 dpi: the models run, but on pages too
//! small to hold readable lines, so each run takes a few seconds:
//! - a PDF cut short, a render failure, a path that does not exist and a
//!   pattern that matches nothing are each one `failed` line with its cause,
//!   and the other documents are written, whole;
//! - the exit status is 3 when a document failed, 0 when all were written
//!   (or all ended as the manifest says);
//! - replicas and threads default from the core count, flags override them;
//! - the timeline has one rectangle per batch, on its replica's row;
//! - each page's record says where its text came from and why: a page
//!   whose text layer passes every check is never detected or recognised,
//!   a blank one is OCR'd, and `--force-ocr` OCRs both; a layer that sets
//!   letters apart is OCR'd with that reason; with `--layout` the same
//!   command writes regions and Markdown and says the same; vertical
//!   Japanese is read column by column in both modes;
//! - one-page documents listed after two text-dense ones (issue 48, item
//!   5) are written before either of them: order, not time;
//! - both document jobs, `kill -9`ed after their first journal commit (a
//!   child process: the ignored `common::child_runs_the_job`), resume with
//!   every document once, as an uninterrupted run wrote it.

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use clap::Parser;
use rayorch::sink::FailureLine;
use rayorch_doc::ocr::cli::{self, Args};
use rayorch_doc::ocr::{Knobs, machine_cores};
use rayorch_testdata::pdfgen::{self, text_pdf};

fn report(pages: usize) -> Vec<u8> {
    let pages: Vec<Vec<String>> = (1..=pages)
        .map(|p| vec![format!("Page {p} of the report"), "Figures and notes".into()])
        .collect();
    text_pdf(&pages, 12.0)
}

/// What one run of the job left behind.
struct Ran {
    summary: serde_json::Value,
    written: Vec<serde_json::Value>,
    failures: Vec<FailureLine>,
    timeline: String,
    exit: u8,
}

fn jsonl(path: &Path) -> Vec<serde_json::Value> {
    rayorch_kit::check::jsonl_lines(path).unwrap()
}

/// Run the job on `inputs` into `out` at 10 dpi, with `extra` flags.
fn run_job(inputs: &[String], out: &Path, extra: &[&str]) -> Ran {
    run_job_at("10", inputs, out, extra)
}

/// [`run_job`] at `dpi`.
fn run_job_at(dpi: &str, inputs: &[String], out: &Path, extra: &[&str]) -> Ran {
    let out_s = out.display().to_string();
    let mut argv = vec![
        "doc_ocr",
        "--no-progress",
        "--dpi",
        dpi,
        "--threads",
        "1",
        "--out",
        &out_s,
    ];
    argv.extend_from_slice(extra);
    argv.extend(inputs.iter().map(String::as_str));
    let exit = rayorch_doc::ocr::run_from(&argv).unwrap();
    Ran {
        summary: serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap(),
        written: jsonl(&out.join("documents.jsonl")),
        failures: jsonl(&out.join("failures.jsonl"))
            .into_iter()
            .map(|v| serde_json::from_value(v).unwrap())
            .collect(),
        timeline: std::fs::read_to_string(out.join("timeline.svg")).unwrap(),
        exit,
    }
}

fn failure<'a>(ran: &'a Ran, file: &str) -> &'a FailureLine {
    ran.failures
        .iter()
        .find(|f| f.name.as_deref().is_some_and(|n| n.ends_with(file)))
        .unwrap_or_else(|| panic!("no failure line for {file}: {:?}", ran.failures))
}

#[test]
fn bad_documents_are_failure_lines_the_rest_are_written_and_the_exit_status_says_so() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let full = report(10);
    std::fs::write(dir.join("a-report.pdf"), &full).unwrap();
    std::fs::write(dir.join("b-cut.pdf"), &full[..full.len() * 3 / 10]).unwrap();
    std::fs::write(dir.join("c-letter.pdf"), report(1)).unwrap();
    std::fs::write(dir.join("d-notes.pdf"), b"these are notes, not a PDF").unwrap();
    let inputs: Vec<String> = [
        "a-report.pdf",
        "b-cut.pdf",
        "missing.pdf",
        "nothing-*.pdf",
        "c-letter.pdf",
        "d-notes.pdf",
    ]
    .iter()
    .map(|f| dir.join(f).display().to_string())
    .collect();
    let ran = run_job(&inputs, &dir.join("out"), &[]);

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
        ran.failures.iter().all(|f| f.outcome == "failed"),
        "{:?}",
        ran.failures
    );
    for (file, says, code) in [
        ("b-cut.pdf", "declares 10 pages but only", "pdf.truncated"),
        ("missing.pdf", "cannot read the file", "input.missing"),
        ("nothing-*.pdf", "cannot read the file", "input.missing"),
        ("d-notes.pdf", "not a PDF", "input.not_pdf"),
    ] {
        let line = failure(&ran, file);
        assert!(line.cause.contains(says), "{file}: {}", line.cause);
        // A code to group failures by, without reading the message.
        assert_eq!(line.code.as_deref(), Some(code), "{file}");
    }
    // Where it arose: the Call that failed.
    let at = failure(&ran, "d-notes.pdf").at.clone().unwrap_or_default();
    assert!(at.contains("open"), "{at}");
    assert_eq!(ran.summary["job"]["failed"], 4);
    assert_eq!(ran.exit, 3, "a failed document makes the exit status 3");
}

#[test]
fn a_run_where_everything_is_written_or_fails_as_its_manifest_says_exits_0() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::write(dir.join("one.pdf"), report(2)).unwrap();
    let ran = run_job(
        &[dir.join("one.pdf").display().to_string()],
        &dir.join("out"),
        &[],
    );
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
    let expected = samples.display().to_string();
    let ran = run_job(&bad, &dir.join("out2"), &["--expected", &expected]);
    assert_eq!(ran.failures.len(), bad.len());
    assert_eq!(ran.exit, 0, "{:?}", ran.failures);
    let ran = run_job(&bad, &dir.join("out3"), &[]);
    assert_eq!(ran.exit, 3, "without the manifest the same failures count");
}

#[test]
fn the_timeline_draws_every_batch_on_its_replica_row() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let mut inputs = Vec::new();
    for i in 0..5 {
        let p = dir.join(format!("doc{i}.pdf"));
        std::fs::write(&p, report(1 + i)).unwrap();
        inputs.push(p.display().to_string());
    }
    let ran = run_job(
        &inputs,
        &dir.join("out"),
        &["--render-replicas", "2", "--render-batch", "1"],
    );
    assert_eq!(ran.written.len(), 5);
    let calls = ran.summary["calls"].as_array().unwrap();
    let rpcs: u64 = calls.iter().map(|c| c["rpcs"].as_u64().unwrap()).sum();
    assert_eq!(
        ran.timeline.matches(r#"<rect class="batch""#).count() as u64,
        rpcs,
        "one rectangle per batch"
    );
    let read = calls.iter().find(|c| c["name"] == "read").unwrap();
    assert_eq!(read["rpcs"], 15, "one page per read batch");
    // Rows: the read Call's two replicas, one for each other Call.
    assert!(
        ran.timeline.contains("read (B=1") && ran.timeline.contains(">#1<"),
        "{}",
        ran.timeline
    );
    assert!(ran.timeline.contains("documents written"));
}

/// The summary's figure `field` for the Call named `call`.
fn call_stat(ran: &Ran, call: &str, field: &str) -> u64 {
    ran.summary["calls"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == call)
        .unwrap_or_else(|| panic!("no Call {call}"))[field]
        .as_u64()
        .unwrap()
}

/// `mixed.pdf` in `dir`: a born-digital page of two lines (returned),
/// then a blank one (no text layer at all).
fn mixed_pdf(dir: &Path) -> (std::path::PathBuf, Vec<String>) {
    let lines = vec![
        "Every parent document returns to its own place.".to_string(),
        "Pages from many documents share one batch.".to_string(),
    ];
    let pdf = dir.join("mixed.pdf");
    std::fs::write(&pdf, text_pdf(&[lines.clone(), vec![]], 18.0)).unwrap();
    (pdf, lines)
}

#[test]
fn each_page_says_where_its_text_came_from_and_a_trusted_layer_skips_the_models() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (pdf, lines) = mixed_pdf(dir);
    let inputs = [pdf.display().to_string()];
    let column = |ran: &Ran, field: &str| -> Vec<String> {
        serde_json::from_value(ran.written[0][field].clone()).unwrap()
    };

    let ran = run_job_at("150", &inputs, &dir.join("auto"), &[]);
    assert_eq!(column(&ran, "page_sources"), ["layer", "ocr"]);
    let reasons = column(&ran, "page_reasons");
    assert_eq!(reasons[0], "the text layer passed every check");
    assert!(reasons[1].starts_with("no text layer"), "{reasons:?}");
    assert_eq!(column(&ran, "page_reason_kinds"), ["trusted", "no_layer"]);
    assert_eq!(column(&ran, "page_texts")[0], lines.join("\n"));
    assert_eq!(
        (
            &ran.summary["job"]["pages_from_layer"],
            &ran.summary["job"]["pages_ocr"]
        ),
        (&1.into(), &1.into())
    );
    assert_eq!(
        ran.summary["job"]["pages_by_reason"],
        serde_json::json!({"trusted": 1, "no_layer": 1})
    );
    // The layer page gave no lines and the blank page none either: the
    // recognition model never ran.
    assert_eq!(call_stat(&ran, "recognize", "grains_dispatched"), 0);
    assert_eq!(ran.summary["job"]["recognition"]["model_calls"], 0);

    let ran = run_job_at("150", &inputs, &dir.join("forced"), &["--force-ocr"]);
    assert_eq!(column(&ran, "page_sources"), ["ocr", "ocr"]);
    assert!(
        column(&ran, "page_reasons").iter().all(|r| r.contains("forced")),
        "{:?}",
        column(&ran, "page_reasons")
    );
    assert_eq!(
        ran.summary["job"]["pages_by_reason"],
        serde_json::json!({"forced": 2})
    );
    assert_eq!(
        call_stat(&ran, "recognize", "grains_dispatched"),
        lines.len() as u64,
        "each line of the digital page recognised"
    );
    let ocr = &column(&ran, "page_texts")[0];
    assert!(ocr.contains("parent document"), "{ocr}");
    // The summary says how much of the recognition model's input was
    // padding: the crops' columns against the padded widths they ran at.
    let rec = &ran.summary["job"]["recognition"];
    let (cols, input) = (
        rec["columns"].as_u64().unwrap(),
        rec["input_columns"].as_u64().unwrap(),
    );
    assert!(rec["model_calls"].as_u64().unwrap() >= 1, "{rec}");
    assert!(0 < cols && cols <= input, "{rec}");
    let share = rec["padded_share"].as_f64().unwrap();
    assert!(
        (share - (input - cols) as f64 / input as f64).abs() < 1e-9,
        "{rec}"
    );
}

/// A layer that lies is not trusted: a page whose text layer sets every
/// letter apart ("T h e  q u i c k", as some converters write it) is
/// OCR'd, and its record says why, in both modes.
#[test]
fn a_page_whose_layer_sets_letters_apart_is_ocrd_with_that_reason() {
    let tmp = tempfile::tempdir().unwrap();
    let prose = [
        "The quick brown fox jumps over the lazy dog",
        "while seven wizards quietly judge boxing matches",
        "and a tired lion sleeps under the warm summer sun",
    ];
    let spaced: Vec<String> = prose
        .iter()
        .map(|l| {
            l.chars()
                .flat_map(|c| [c, ' '])
                .collect::<String>()
                .trim_end()
                .to_string()
        })
        .collect();
    let pdf = tmp.path().join("spaced.pdf");
    std::fs::write(&pdf, text_pdf(&[spaced], 14.0)).unwrap();
    let p = pdf.display().to_string();
    for mode in [None, Some("--layout")] {
        let out = tmp.path().join(format!("out-{}", mode.is_some()));
        let o = out.display().to_string();
        let mut argv = vec![
            "doc_ocr",
            "--no-progress",
            "--threads",
            "1",
            "--dpi",
            "72",
            "--out",
            &o,
            &p,
        ];
        argv.extend(mode);
        assert_eq!(rayorch_doc::ocr::run_from(&argv).unwrap(), 0, "{mode:?}");
        let docs = jsonl(&out.join("documents.jsonl"));
        assert_eq!(docs[0]["page_sources"], serde_json::json!(["ocr"]), "{mode:?}");
        assert_eq!(
            docs[0]["page_reason_kinds"],
            serde_json::json!(["spaced_out"]),
            "{mode:?}"
        );
        let reason = docs[0]["page_reasons"][0].as_str().unwrap();
        assert!(reason.starts_with("spaced-out letters"), "{reason}");
        let summary: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
        assert_eq!(
            summary["job"]["pages_by_reason"],
            serde_json::json!({"spaced_out": 1})
        );
    }
}

/// One command, both plans: with `--layout` the same pages are read the
/// same way (source and reason per page, counted in the summary), each
/// region is written with a Markdown file per document, and nothing is
/// embedded.
#[test]
fn with_layout_the_same_command_writes_regions_and_says_where_each_page_came_from() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (pdf, _) = mixed_pdf(dir);
    let out = dir.join("out");
    let (o, p) = (out.display().to_string(), pdf.display().to_string());
    let argv = [
        "doc_ocr",
        "--layout",
        "--no-progress",
        "--dpi",
        "72",
        "--threads",
        "1",
        "--out",
        &o,
        &p,
    ];
    assert_eq!(rayorch_doc::ocr::run_from(argv).unwrap(), 0);
    let docs = jsonl(&out.join("documents.jsonl"));
    assert_eq!(docs.len(), 1, "{docs:?}");
    let column = |field: &str| -> Vec<String> { serde_json::from_value(docs[0][field].clone()).unwrap() };
    assert_eq!(column("page_sources"), ["layer", "ocr"]);
    assert_eq!(column("page_reason_kinds"), ["trusted", "no_layer"]);
    assert_eq!(column("page_reasons")[0], "the text layer passed every check");
    let text = &column("page_texts")[0];
    assert!(
        text.contains("parent document") && text.contains("share one batch"),
        "{text}"
    );
    assert!(
        docs[0].get("page_embeddings").is_none(),
        "the layout plan embeds nothing"
    );
    let regions = jsonl(&out.join("regions.jsonl"));
    assert!(
        regions
            .iter()
            .any(|r| r["text"].as_str().is_some_and(|t| t.contains("parent document"))),
        "{regions:?}"
    );
    let markdown = std::fs::read_to_string(out.join("markdown/mixed.md")).unwrap();
    assert!(markdown.contains("share one batch"), "{markdown}");
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    let job = &summary["job"];
    assert_eq!(
        job["pages_by_reason"],
        serde_json::json!({"trusted": 1, "no_layer": 1})
    );
    assert_eq!(
        (&job["pages_from_layer"], &job["pages_ocr"]),
        (&1.into(), &1.into())
    );
    assert_eq!((&job["written"], &job["exit_status"]), (&1.into(), &0.into()));
}

/// Issue 48 item 2: an OCR'd scan's invisible layer is checked against
/// the job's own OCR of the page; a layer that says something else is not
/// the page's text, and the record says why.
#[test]
fn an_ocr_d_scan_whose_hidden_layer_lies_is_read_by_ocr_and_says_so() {
    let tmp = tempfile::tempdir().unwrap();
    let page = vec![
        "Invoices are due within thirty days of delivery.".to_string(),
        "Late payments carry a monthly fee of one percent.".to_string(),
    ];
    let lie = vec![
        "The quick brown fox jumps over the lazy dog.".to_string(),
        "Pack my box with five dozen liquor jugs.".to_string(),
    ];
    let honest = tmp.path().join("honest.pdf");
    let lying = tmp.path().join("lying.pdf");
    std::fs::write(
        &honest,
        pdfgen::scanned_pdf_with_layer(std::slice::from_ref(&page), std::slice::from_ref(&page), 18.0),
    )
    .unwrap();
    std::fs::write(
        &lying,
        pdfgen::scanned_pdf_with_layer(std::slice::from_ref(&page), &[lie], 18.0),
    )
    .unwrap();
    let out = tmp.path().join("out");
    let (o, h, l) = (
        out.display().to_string(),
        honest.display().to_string(),
        lying.display().to_string(),
    );
    let argv = ["doc_ocr", "--no-progress", "--threads", "1", "--out", &o, &h, &l];
    assert_eq!(rayorch_doc::ocr::run_from(argv).unwrap(), 0);
    let docs = jsonl(&out.join("documents.jsonl"));
    let doc = |name: &str| {
        docs.iter()
            .find(|d| d["name"].as_str().is_some_and(|n| n.ends_with(name)))
            .unwrap_or_else(|| panic!("{name} in {docs:?}"))
    };
    let truthful = doc("honest.pdf");
    assert_eq!(truthful["page_sources"], serde_json::json!(["layer"]));
    assert_eq!(truthful["page_reason_kinds"], serde_json::json!(["verified"]));
    assert_eq!(truthful["page_texts"][0], serde_json::json!(page.join("\n")));
    let liar = doc("lying.pdf");
    assert_eq!(liar["page_sources"], serde_json::json!(["ocr"]));
    assert_eq!(liar["page_reason_kinds"], serde_json::json!(["disagrees"]));
    let read = liar["page_texts"][0].as_str().unwrap();
    assert!(
        rayorch_models::pdf::agreement(read, &page.join("\n")) > 0.8,
        "the page's own words, by OCR: {read}"
    );
    // Told to trust such layers, the job takes the lie as it is.
    let trusting = tmp.path().join("trusting");
    let t = trusting.display().to_string();
    let argv = [
        "doc_ocr",
        "--no-progress",
        "--threads",
        "1",
        "--trust-scan-layers",
        "--out",
        &t,
        &l,
    ];
    assert_eq!(rayorch_doc::ocr::run_from(argv).unwrap(), 0);
    let docs = jsonl(&trusting.join("documents.jsonl"));
    assert_eq!(docs[0]["page_sources"], serde_json::json!(["layer"]));
    assert_eq!(docs[0]["page_reason_kinds"], serde_json::json!(["trusted"]));
    assert!(
        docs[0]["page_texts"][0]
            .as_str()
            .unwrap()
            .starts_with("The quick brown fox")
    );
}

/// A page set in vertical Japanese is read from its layer down each
/// column, the rightmost first, in both modes of the command.
#[test]
fn a_vertical_japanese_page_is_read_column_by_column_in_both_modes() {
    let tmp = tempfile::tempdir().unwrap();
    let columns = ["縦書きの文章は上から", "下へ右から左へ読む"].map(String::from);
    let pdf = tmp.path().join("vertical.pdf");
    std::fs::write(&pdf, pdfgen::vertical_cjk_pdf(&columns, 20.0)).unwrap();
    let p = pdf.display().to_string();
    for mode in [None, Some("--layout")] {
        let out = tmp.path().join(format!("out-{}", mode.is_some()));
        let o = out.display().to_string();
        let mut argv = vec!["doc_ocr", "--no-progress", "--threads", "1", "--out", &o, &p];
        argv.extend(mode);
        assert_eq!(rayorch_doc::ocr::run_from(&argv).unwrap(), 0, "{mode:?}");
        let docs = jsonl(&out.join("documents.jsonl"));
        assert_eq!(
            docs[0]["page_reason_kinds"],
            serde_json::json!(["trusted"]),
            "{mode:?}"
        );
        let text = docs[0]["page_texts"][0].as_str().unwrap().to_string();
        assert_eq!(text, columns.join("\n"), "{mode:?}");
    }
}

#[test]
fn defaults_follow_the_core_count_and_flags_override_them() {
    let two = Knobs::for_cores(2);
    assert_eq!(two.recognize_replicas, 2, "two cores: both busy recognising");
    assert_eq!((two.threads, two.detect_replicas, two.render_replicas), (1, 1, 1));
    let one = Knobs::for_cores(1);
    assert_eq!(one.recognize_replicas * one.threads, 1);
    for cores in [4, 8, 16, 64] {
        let k = Knobs::for_cores(cores);
        assert_eq!(k.recognize_replicas * k.threads, cores, "{cores} cores: {k:?}");
        assert!(k.detect_replicas >= 1 && k.render_replicas >= 1 && k.detect_replicas < k.recognize_replicas);
    }
    let args = Args::parse_from(["doc_ocr"]);
    assert_eq!(args.knobs(12), Knobs::for_cores(12));
    let args = Args::parse_from(["doc_ocr", "--threads", "3", "--recognize-replicas", "0"]);
    let k = args.knobs(16);
    assert_eq!((k.threads, k.recognize_replicas), (3, 1));
    assert_eq!(k.detect_replicas, Knobs::for_cores(16).detect_replicas);
    assert!(machine_cores() >= 1);
    // The plan the job builds from its flags carries them.
    assert_eq!(args.config(16).knobs, k);
    // Recognition batches by width on CUDA or when asked; blind on a CPU
    // (BENCHMARKS.md, "Shape-aware batches"). The embed delay is a flag.
    let plain = Args::parse_from(["doc_ocr"]).config(2);
    assert!(!plain.recognize_by_width);
    assert_eq!(plain.embed_delay, std::time::Duration::from_secs(1));
    assert!(
        Args::parse_from(["doc_ocr", "--recognize-by-width"])
            .config(2)
            .recognize_by_width
    );
    assert!(
        Args::parse_from(["doc_ocr", "--cuda"])
            .config(2)
            .recognize_by_width
    );
    let no_wait = Args::parse_from(["doc_ocr", "--embed-delay-ms", "0"]).config(2);
    assert_eq!(no_wait.embed_delay, std::time::Duration::ZERO);
}

#[test]
fn the_help_names_the_exit_codes() {
    use clap::CommandFactory;
    for help in [
        Args::command().render_long_help().to_string(),
        rayorch_doc::layout::cli::Args::command()
            .render_long_help()
            .to_string(),
    ] {
        assert!(
            help.contains("Exit status") && help.contains("3    at least one document failed"),
            "{help}"
        );
    }
}

/// The layout job says what the OCR job says of a document that is no PDF
/// (`rayorch_kit::outcome`): one `failed` line (not the engine's
/// `suppressed`: the document's own input failed), the others written, and
/// the exit status 3.
#[test]
fn the_layout_job_reports_a_bad_document_as_the_ocr_job_does() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::write(dir.join("a-letter.pdf"), report(1)).unwrap();
    std::fs::write(dir.join("b-notes.pdf"), b"these are notes, not a PDF").unwrap();
    let out = dir.join("out");
    let (o, a) = (out.display().to_string(), dir.display().to_string());
    let exit =
        rayorch_doc::layout::run_from(["doc_layout", "--dpi", "36", "--threads", "1", "--out", &o, &a])
            .unwrap();
    let failures: Vec<FailureLine> = jsonl(&out.join("failures.jsonl"))
        .into_iter()
        .map(|v| serde_json::from_value(v).unwrap())
        .collect();
    assert_eq!(failures.len(), 1, "{failures:?}");
    assert!(
        failures[0]
            .name
            .as_deref()
            .is_some_and(|n| n.ends_with("b-notes.pdf"))
    );
    assert_eq!(failures[0].outcome, "failed");
    assert_eq!(failures[0].code.as_deref(), Some("input.not_pdf"));
    assert_eq!(jsonl(&out.join("documents.jsonl")).len(), 1);
    assert_eq!(exit, 3, "a failed document makes the exit status 3");

    // Known to be broken (`--expected`, a manifest of the kit's format):
    // the same failure is expected, and the run succeeds.
    let known = dir.join("known");
    std::fs::create_dir_all(&known).unwrap();
    std::fs::write(
        known.join("manifest.json"),
        r#"[{"file": "b-notes.pdf", "kind": "not_pdf"}, {"file": "a-letter.pdf", "kind": "text", "pages": [[]]}]"#,
    )
    .unwrap();
    let k = known.display().to_string();
    let run = |job: &str| {
        let o = dir.join(format!("out-{job}")).display().to_string();
        let argv = [
            job,
            "--dpi",
            "36",
            "--threads",
            "1",
            "--expected",
            &k,
            "--out",
            &o,
            &a,
        ];
        match job {
            "doc_layout" => rayorch_doc::layout::run_from(argv),
            _ => rayorch_doc::ocr::run_from(argv),
        }
        .unwrap()
    };
    assert_eq!(run("doc_layout"), 0, "every document ended as the manifest says");
    assert_eq!(
        run("doc_ocr"),
        0,
        "the same manifest means the same in the OCR job"
    );
}

/// A default build carries no NATS client and no trace exporter: the
/// distributed flags and `--otlp` are refused with the command that
/// rebuilds the job with them, before anything in `--out` is touched.
#[cfg(not(any(feature = "dist", feature = "otlp", feature = "store")))]
#[test]
fn a_default_build_refuses_what_it_was_built_without_and_touches_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    std::fs::create_dir_all(&out).unwrap();
    std::fs::write(out.join("documents.jsonl"), "{\"key\":0}\n").unwrap();
    let listing = |d: &Path| {
        let mut names: Vec<_> = std::fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        names.sort();
        names
    };
    let before = listing(&out);
    let o = out.display().to_string();
    for (argv, flag, rebuild) in [
        (
            vec!["doc_ocr", "--nats", "nats://127.0.0.1:4222", "--out", &o],
            "--nats",
            "--features dist --example doc_ocr",
        ),
        (
            vec![
                "doc_ocr",
                "--nats",
                "nats://127.0.0.1:4222",
                "--role",
                "worker",
                "--out",
                &o,
            ],
            "--nats",
            "--features dist --example doc_ocr",
        ),
        (
            vec!["doc_ocr", "--serve-nats", "4222", "--out", &o],
            "--serve-nats",
            "--features dist --example doc_ocr",
        ),
        (
            vec!["doc_ocr", "--otlp", "http://127.0.0.1:4318", "--out", &o],
            "--otlp",
            "--features otlp --example",
        ),
        (
            vec!["doc_ocr", "s3://bucket/docs/", "--out", &o],
            "s3://bucket/docs/",
            "--features store --example doc_ocr -- s3://bucket/docs/",
        ),
    ] {
        let err = rayorch_doc::ocr::run_from(&argv).unwrap_err().to_string();
        assert!(err.starts_with(flag) && err.contains(rebuild), "{argv:?}: {err}");
        assert_eq!(listing(&out), before, "{argv:?} touched {}", out.display());
        assert_eq!(
            std::fs::read_to_string(out.join("documents.jsonl")).unwrap(),
            "{\"key\":0}\n"
        );
    }
    assert!(!out.join("nats").exists());
    // Outputs at a URL need `store` too: refused before any input is read.
    let samples = rayorch_doc::ocr::cli::samples_dir().display().to_string();
    let err = rayorch_doc::ocr::run_from(["doc_ocr", &samples, "--out", "s3://bucket/out/"])
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("--out s3://bucket/out/")
            && err.contains("--features store --example doc_ocr -- --out s3://bucket/out/"),
        "{err}"
    );
    // The layout job refuses a URL the same way, before making its folder.
    let fresh = dir.path().join("layout");
    let f = fresh.display().to_string();
    let err = rayorch_doc::layout::run_from(["doc_layout", "s3://bucket/docs/", "--out", &f])
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("--features store --example doc_layout -- s3://bucket/docs/"),
        "{err}"
    );
    assert!(!fresh.exists());
    // And its outputs at a URL, and --resume into a folder (no journal).
    let err = rayorch_doc::layout::run_from(["doc_layout", "--out", "s3://bucket/out/"])
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("--example doc_layout -- --out s3://bucket/out/"),
        "{err}"
    );
    let err = rayorch_doc::layout::run_from(["doc_layout", "--resume", "--out", &f])
        .unwrap_err()
        .to_string();
    assert!(err.contains("holds no journaled run to continue"), "{err}");
    assert!(!fresh.exists());
}

/// The documents of a run's `documents.jsonl` by key, each checked to be
/// there once: `field` of each (the text a run makes of it).
fn once_by_key(out: &Path, field: &str) -> std::collections::BTreeMap<u64, serde_json::Value> {
    let lines = jsonl(&out.join("documents.jsonl"));
    let by_key: std::collections::BTreeMap<u64, serde_json::Value> = lines
        .iter()
        .map(|v| (v["key"].as_u64().unwrap(), v[field].clone()))
        .collect();
    assert_eq!(by_key.len(), lines.len(), "a document twice in {}", out.display());
    by_key
}

#[test]
fn both_document_jobs_killed_mid_run_resume_with_each_document_once() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let docs = dir.join("docs");
    std::fs::create_dir_all(&docs).unwrap();
    for i in 0..8 {
        std::fs::write(docs.join(format!("doc{i}.pdf")), report(1 + i % 3)).unwrap();
    }
    let d = docs.display().to_string();
    for (job, field) in [("doc_ocr", "page_texts"), ("doc_layout", "markdown")] {
        let argv = |out: &Path, extra: &[&str]| -> Vec<String> {
            let o = out.display().to_string();
            let mut v: Vec<String> = [job, "--no-progress", "--dpi", "36", "--threads", "1"]
                .iter()
                .map(|a| a.to_string())
                .collect();
            v.extend(["--window", "1", "--out", &o, &d].map(String::from));
            v.extend(extra.iter().map(|a| a.to_string()));
            v
        };
        let spawn = |argv: &[String]| {
            Command::new(std::env::current_exe().unwrap())
                .args([common::CHILD, "--exact", "--ignored", "--nocapture"])
                .env("RAYORCH_TEST_ARGV", serde_json::to_string(argv).unwrap())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        };
        let reference = dir.join(format!("{job}-reference"));
        let child = spawn(&argv(&reference, &[])).wait_with_output().unwrap();
        let (code, console) = common::child_result(&child);
        assert_eq!(code, Ok(0), "{job}: {console}");
        let want = once_by_key(&reference, field);
        assert_eq!(want.len(), 8, "{job}");

        // Killed once its first document reached the outputs (at a journal
        // commit, or with a full write buffer before one).
        let killed = dir.join(format!("{job}-killed"));
        let mut child = spawn(&argv(&killed, &[]));
        let deadline = Instant::now() + Duration::from_secs(300);
        let jsonl_len = || std::fs::metadata(killed.join("documents.jsonl")).map_or(0, |m| m.len());
        while jsonl_len() == 0 && child.try_wait().unwrap().is_none() {
            assert!(Instant::now() < deadline, "{job}: nothing written after 300 s");
            std::thread::sleep(Duration::from_millis(5));
        }
        let _ = child.kill(); // SIGKILL
        let _ = child.wait();
        let before = jsonl(&killed.join("documents.jsonl")).len();
        eprintln!("{job}: killed with {before} of 8 documents in documents.jsonl");

        let run = |a: Vec<String>| match job {
            "doc_ocr" => rayorch_doc::ocr::run_from(a),
            _ => rayorch_doc::layout::run_from(a),
        };
        if before < 8 {
            // An unfinished journal: a plain run is refused with what to do.
            let err = run(argv(&killed, &[])).unwrap_err().to_string();
            assert!(
                err.contains("--resume") && err.contains("--force"),
                "{job}: {err}"
            );
        }
        assert_eq!(run(argv(&killed, &["--resume"])).unwrap(), 0, "{job}");
        assert_eq!(
            once_by_key(&killed, field),
            want,
            "{job}: as an uninterrupted run"
        );
        // The report every job writes (`rayorch_kit::job::RunReport`): what
        // this run wrote and what it found done.
        let summary: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(killed.join("summary.json")).unwrap()).unwrap();
        let r = &summary["job"];
        let (written, resumed) = (r["written"].as_u64().unwrap(), r["resumed"].as_u64().unwrap());
        assert_eq!(
            (written + resumed, r["failed"].as_u64()),
            (8, Some(0)),
            "{job}: {r}"
        );
        assert_eq!(
            (r["inputs"].as_u64(), r["exit_status"].as_u64()),
            (Some(8), Some(0)),
            "{job}: {r}"
        );
    }
}

/// The line of `name` (ending with it) in `lines`.
fn line_of<'a>(lines: &'a [serde_json::Value], name: &str) -> &'a serde_json::Value {
    lines
        .iter()
        .find(|l| l["name"].as_str().is_some_and(|n| n.ends_with(name)))
        .unwrap_or_else(|| panic!("no line for {name}: {lines:?}"))
}

#[test]
fn input_lists_name_the_documents_and_each_rows_fields_ride_along_to_its_outputs() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::create_dir_all(dir.join("lists/docs")).unwrap();
    std::fs::write(dir.join("lists/docs/a.pdf"), report(2)).unwrap();
    std::fs::write(dir.join("lists/docs/c.pdf"), report(1)).unwrap();
    std::fs::write(dir.join("b.pdf"), report(1)).unwrap();
    let b = dir.join("b.pdf").display().to_string();
    let list = dir.join("lists/corpus.jsonl");
    // Relative locations are next to the list; a bad row is one failure.
    std::fs::write(
        &list,
        format!(
            "{{\"url\": \"docs/a.pdf\", \"lang\": \"en\", \"batch\": 7}}\n{{\"url\": \"{b}\"}}\nthis row is not JSON\n\n{{\"url\": \"docs/missing.pdf\", \"lang\": \"de\"}}\n"
        ),
    )
    .unwrap();
    let csv = dir.join("lists/more.csv");
    std::fs::write(&csv, "title,url\n\"C, with a comma\",docs/c.pdf\n").unwrap();
    let (list_s, csv_s) = (list.display().to_string(), csv.display().to_string());
    let out = dir.join("out");
    let args = ["--input-list", &list_s, "--input-list", &csv_s];
    let ran = run_job(&[], &out, &args);

    assert_eq!(
        ran.exit, 3,
        "a bad row and a missing file fail: {:?}",
        ran.failures
    );
    assert_eq!(
        (&ran.summary["job"]["written"], &ran.summary["job"]["failed"]),
        (&3.into(), &2.into())
    );
    let a = line_of(&ran.written, "lists/docs/a.pdf");
    assert_eq!(a["metadata"], serde_json::json!({"lang": "en", "batch": 7}));
    assert_eq!(a["pages"], 2);
    // Keyed by its location, as a listed object is.
    let a_at = format!("{}/lists/docs/a.pdf", dir.display());
    assert_eq!(a["key"], rayorch_kit::store::root_key(&a_at));
    assert!(
        line_of(&ran.written, &b).get("metadata").is_none(),
        "no fields, no metadata"
    );
    let c = line_of(&ran.written, "lists/docs/c.pdf");
    assert_eq!(c["metadata"], serde_json::json!({"title": "C, with a comma"}));

    let failures = jsonl(&out.join("failures.jsonl"));
    let bad = line_of(&failures, "corpus.jsonl:3");
    let cause = bad["cause"].as_str().unwrap();
    assert!(
        cause.contains("corpus.jsonl line 3: not JSON") && cause.ends_with("fix or remove the row"),
        "{cause}"
    );
    assert_eq!(bad["code"], "input.bad_row");
    assert!(bad["at"].as_str().unwrap().contains("fetch"), "{bad}");
    let missing = line_of(&failures, "lists/docs/missing.pdf");
    assert_eq!(missing["code"], "input.missing");
    assert_eq!(missing["metadata"], serde_json::json!({"lang": "de"}));

    // The Parquet rows carry the fields too, as JSON text.
    let (_, rows) = rayorch_doc::document::read_documents(&out.join("documents.parquet")).unwrap();
    let from_parquet = rows
        .iter()
        .find(|(_, d)| d.name.ends_with("lists/docs/a.pdf"))
        .unwrap();
    assert_eq!(
        from_parquet.1.metadata,
        Some(serde_json::json!({"lang": "en", "batch": 7}))
    );

    // A list streams, so its run is resumed, and nothing is written twice.
    let again = run_job(&[], &out, &[&args[..], &["--resume"]].concat());
    assert_eq!(again.summary["job"]["written"], 0, "{:?}", again.summary["job"]);
    assert_eq!(again.written.len(), 3);
}

#[test]
fn an_input_list_that_cannot_be_read_is_refused_before_anything_is_written() {
    let tmp = tempfile::tempdir().unwrap();
    let csv = tmp.path().join("list.csv");
    std::fs::write(&csv, "id,path\n1,a.pdf\n").unwrap();
    let out = tmp.path().join("out");
    let out_s = out.display().to_string();
    let csv_s = csv.display().to_string();
    let run = |extra: &[&str]| {
        let mut argv = vec!["doc_ocr", "--no-progress", "--out", &out_s];
        argv.extend_from_slice(extra);
        rayorch_doc::ocr::run_from(&argv).map_err(|e| e.to_string())
    };
    let e = run(&["--input-list", &csv_s]).unwrap_err();
    assert!(e.contains("no `url` column") && e.contains("--url-field"), "{e}");
    let e = run(&["--input-list", "no/such/list.jsonl"]).unwrap_err();
    assert!(e.starts_with("--input-list no/such/list.jsonl: "), "{e}");
    let e = run(&["--input-list", &format!("{}.txt", csv_s)]).unwrap_err();
    assert!(e.contains("`.jsonl`"), "{e}");
    assert!(!out.exists(), "the output folder was made");
}

#[test]
fn parquet_shards_give_a_document_per_row_keyed_by_their_key_column_and_a_failure_per_bad_row() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let shards = dir.join("shards");
    std::fs::create_dir_all(&shards).unwrap();
    let (a, d) = (report(2), report(1));
    let shard = |rows: &[rayorch_kit::store::shards::SpecRow]| {
        rayorch_kit::store::shards::shard_of("pdf", rows, 2).unwrap()
    };
    let first = shard(&[
        ("doc-a", Some(&a), Some("en")),
        ("doc-b", None, Some("de")),
        ("doc-c", Some(b"notes, not a PDF"), None),
    ]);
    std::fs::write(shards.join("train-0.parquet"), first).unwrap();
    std::fs::write(
        shards.join("train-1.parquet"),
        shard(&[("doc-d", Some(&d), Some("fr"))]),
    )
    .unwrap();
    std::fs::write(shards.join("train-2.parquet"), b"PAR1 a shard cut short").unwrap();
    std::fs::write(shards.join("notes.txt"), b"not a shard").unwrap();
    let s = shards.display().to_string();
    let out = dir.join("out");
    let args = [
        "--input-parquet",
        &s,
        "--bytes-column",
        "pdf",
        "--key-column",
        "id",
    ];
    let ran = run_job(&[], &out, &args);
    assert_eq!(ran.exit, 3, "{:?}", ran.failures);
    let mut names: Vec<&str> = ran.written.iter().map(|d| d["name"].as_str().unwrap()).collect();
    names.sort_unstable();
    assert_eq!(names, ["doc-a", "doc-d"]);
    let a = line_of(&ran.written, "doc-a");
    assert_eq!(
        (&a["pages"], &a["metadata"]),
        (&2.into(), &serde_json::json!({"lang": "en"}))
    );
    // Keyed by the key column: the same key in any shard.
    assert_eq!(a["key"], rayorch_kit::store::root_key("doc-a"));
    let failures = jsonl(&out.join("failures.jsonl"));
    assert_eq!(failures.len(), 3, "{failures:?}");
    let b = line_of(&failures, "doc-b");
    assert!(b["cause"].as_str().unwrap().contains("`pdf` is null"), "{b}");
    assert_eq!(
        (&b["code"], &b["metadata"]),
        (&"input.bad_row".into(), &serde_json::json!({"lang": "de"}))
    );
    assert_eq!(line_of(&failures, "doc-c")["code"], "input.not_pdf");
    let cut = line_of(&failures, "train-2.parquet");
    assert!(
        cut["cause"]
            .as_str()
            .unwrap()
            .contains("not a readable Parquet file"),
        "{cut}"
    );
    assert_eq!(ran.summary["job"]["inputs"], 5);

    // Shards stream: the run resumes, nothing is written twice.
    let again = run_job(&[], &out, &[&args[..], &["--resume"]].concat());
    assert_eq!(again.summary["job"]["written"], 0, "{:?}", again.summary["job"]);
    assert_eq!(again.written.len(), 2);

    // A column the shards lack is refused before anything is written.
    let other = dir.join("other");
    let o = other.display().to_string();
    let argv = [
        "doc_ocr",
        "--no-progress",
        "--out",
        &o,
        "--input-parquet",
        &s,
        "--bytes-column",
        "bytes",
    ];
    let e = rayorch_doc::ocr::run_from(argv).unwrap_err().to_string();
    assert!(
        e.contains("--bytes-column bytes: the shard has no such column"),
        "{e}"
    );
    let argv = ["doc_ocr", "--no-progress", "--out", &o, "--input-parquet", &s];
    let e = rayorch_doc::ocr::run_from(argv).unwrap_err().to_string();
    assert!(
        e.contains("--bytes-column NAME") && e.contains("--url-column NAME"),
        "{e}"
    );
    assert!(!other.exists(), "the output folder was made");
}

#[test]
fn webdataset_tar_shards_give_a_document_per_sample_with_its_members_as_metadata() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (a, b) = (report(2), report(1));
    let shard = rayorch_kit::store::tars::tar_of(&[
        ("s/0001.pdf", &a),
        ("s/0001.json", br#"{"lang": "en", "source": "crawl"}"#),
        ("s/0001.txt", b"two pages"),
        ("s/0002.json", br#"{"lang": "de"}"#),
        ("s/0003.pdf", b"notes, not a PDF"),
        ("s/0004.pdf", &b),
        ("s/0004.jpg", &[0xff, 0xd8, 0xff, 0xe0, 0, 0x10, 0xff]),
    ])
    .unwrap();
    let tars = dir.join("tars");
    std::fs::create_dir_all(&tars).unwrap();
    std::fs::write(tars.join("train-0.tar"), &shard).unwrap();
    // A shard cut inside its second sample's first header: the first
    // sample is read, the cut is one failure.
    let cut = a.len().div_ceil(512) * 512 + 2560 + 100;
    std::fs::write(tars.join("train-1.tar"), &shard[..cut]).unwrap();
    let t = tars.display().to_string();
    let out = dir.join("out");
    let ran = run_job(&[], &out, &["--input-tar", &t]);
    assert_eq!(ran.exit, 3, "{:?}", ran.failures);
    let shard0 = format!("{t}/train-0.tar");
    let mut names: Vec<&str> = ran.written.iter().map(|d| d["name"].as_str().unwrap()).collect();
    names.sort_unstable();
    let want = [
        format!("{shard0}#s/0001"),
        format!("{shard0}#s/0004"),
        format!("{t}/train-1.tar#s/0001"),
    ];
    assert_eq!(names, want);
    let first = line_of(&ran.written, &want[0]);
    assert_eq!(first["pages"], 2);
    assert_eq!(
        first["metadata"],
        serde_json::json!({"lang": "en", "source": "crawl", "txt": "two pages"})
    );
    assert_eq!(first["key"], rayorch_kit::store::root_key(&want[0]));
    assert!(
        line_of(&ran.written, &want[1]).get("metadata").is_none(),
        "a JPEG is no metadata"
    );
    let failures = jsonl(&out.join("failures.jsonl"));
    let no_pdf = line_of(&failures, "train-0.tar#s/0002");
    assert!(
        no_pdf["cause"]
            .as_str()
            .unwrap()
            .contains("no member this job reads"),
        "{no_pdf}"
    );
    assert_eq!(no_pdf["metadata"], serde_json::json!({"lang": "de"}));
    assert_eq!(line_of(&failures, "train-0.tar#s/0003")["code"], "input.not_pdf");
    assert_eq!(failures.len(), 3, "{failures:?}");
    let cut_at = format!("{t}/train-1.tar@{}", cut - 100);
    assert!(
        line_of(&failures, &cut_at)["cause"]
            .as_str()
            .unwrap()
            .contains("cut short")
    );

    // A resumed run skips every sample its journal holds.
    let again = run_job(&[], &out, &["--input-tar", &t, "--resume"]);
    assert_eq!(again.summary["job"]["written"], 0, "{:?}", again.summary["job"]);
    assert_eq!(again.written.len(), 3);
}

/// Issue 48, item 5, through the job's own command line: two text-dense
/// documents (10 and 6 pages of 40 lines, OCR'd at 72 dpi: hundreds of
/// line crops) listed ahead of five one-page documents. Every Call
/// prefers the parents nearest completion, so the short documents' pages
/// are read, detected and recognised before the dense backlog and all
/// five are written before either dense document (the order of
/// `documents.jsonl`, which is write order; no clock). The engine-level
/// twin, with counts of recognition batches, is
/// `tests/runner/memory_bounds.rs`.
#[test]
fn one_page_documents_behind_two_dense_ones_are_written_first() {
    let tmp = tempfile::tempdir().unwrap();
    let dense = |pages: usize| {
        let pages: Vec<Vec<String>> = (1..=pages)
            .map(|p| {
                (1..=40)
                    .map(|l| format!("Line {l} of page {p}, set close to the next one"))
                    .collect()
            })
            .collect();
        text_pdf(&pages, 10.0)
    };
    let mut inputs = Vec::new();
    for (name, bytes) in [("a-dense.pdf", dense(10)), ("b-dense.pdf", dense(6))] {
        let path = tmp.path().join(name);
        std::fs::write(&path, bytes).unwrap();
        inputs.push(path.display().to_string());
    }
    for i in 1..=5 {
        let path = tmp.path().join(format!("c-short-{i}.pdf"));
        std::fs::write(&path, report(1)).unwrap();
        inputs.push(path.display().to_string());
    }
    let out = tmp.path().join("out");
    let ran = run_job_at("72", &inputs, &out, &["--force-ocr"]);
    assert_eq!(ran.exit, 0, "{:?}", ran.failures);
    let order: Vec<&str> = ran
        .written
        .iter()
        .map(|d| {
            let name = d["name"].as_str().unwrap();
            name.rsplit('/').next().unwrap()
        })
        .collect();
    assert_eq!(order.len(), 7, "{order:?}");
    assert!(
        order[..5].iter().all(|n| n.starts_with("c-short")),
        "the one-page documents are written first: {order:?}"
    );
    let lines = call_stat(&ran, "recognize", "grains_dispatched");
    assert!(
        lines >= 16 * 30,
        "the dense pages were read line by line: {lines} lines"
    );
}
