//! The OCR job on the bundled samples with the real models, through its own
//! command line (what `cargo run --example doc_ocr -- --force-ocr` runs:
//! every page OCR'd, not read from its text layer): open → expand
//! Page → read (render) → detect → expand Line → recognize → reduce → page text →
//! embed → reduce → assemble, pages rendered one per Grain under a window in
//! pages and backpressure.
//!
//! Checks: exit status 0 (every sample ends as its manifest says, and the
//! README demo's scoring through the job's inspection hook agrees); every bad
//! input gets its failure line with a clear cause while every healthy (and
//! the empty) document is written; OCR quality per document (CER ≤ 5%);
//! recognition batches mix pages; the Parquet segments read back with the
//! expected schema and the same documents as the JSON lines.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use clap::Parser;
use rayorch::sink::FailureLine;
use rayorch_doc::Document;
use rayorch_doc::document::{document_schema, read_documents};
use rayorch_testdata::pdfgen::{SampleKind, read_manifest};
use rayorch_testdata::score::TextScores;

#[test]
fn the_job_writes_healthy_documents_and_a_failure_line_per_bad_input() {
    let samples = rayorch_doc::ocr::cli::samples_dir();
    let manifest = read_manifest(&samples).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    // Scored as the README's demo scores them: through the job's hook.
    let scores = Arc::new(Mutex::new(TextScores::new(manifest.clone())));
    let hook = scores.clone();
    let args = rayorch_doc::ocr::cli::Args::parse_from([
        "doc_ocr",
        "--no-progress",
        "--out",
        &out.display().to_string(),
        "--window",
        "4",
        "--window-pages",
        "6",
        "--backpressure",
        "1",
        // The samples are born digital: by default every page would come
        // from its text layer. This test is about OCR on real models.
        "--force-ocr",
    ]);
    let inspect = Box::new(move |name: &str, doc: Option<&Document>| {
        let texts = doc.map(|d| &d.page_texts[..]);
        hook.lock().unwrap().ended(name, texts);
    });
    let code = rayorch_doc::ocr::run_inspected(args, Some(inspect)).unwrap();
    assert_eq!(code, 0, "every sample ends as its manifest says");
    let scores = scores.lock().unwrap().scores().to_vec();
    assert_eq!(scores.len(), manifest.len(), "the hook saw every document");
    assert!(scores.iter().all(|s| s.as_expected), "{scores:?}");

    let docs: HashMap<u64, Document> = std::fs::read_to_string(out.join("documents.jsonl"))
        .unwrap()
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            assert!(v.get("cer").is_none(), "no scoring in the job's own outputs");
            (v["key"].as_u64().unwrap(), serde_json::from_value(v).unwrap())
        })
        .collect();
    let fails: HashMap<u64, FailureLine> = std::fs::read_to_string(out.join("failures.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<FailureLine>(l).unwrap())
        .map(|f| (f.key, f))
        .collect();
    assert_eq!(docs.len() + fails.len(), manifest.len(), "one line per input");
    let mut report = Vec::new();
    for (k, s) in manifest.iter().enumerate() {
        let k = k as u64;
        let file = samples.join(&s.file).display().to_string();
        match s.kind {
            SampleKind::Text => {
                let d = docs
                    .get(&k)
                    .unwrap_or_else(|| panic!("{file} written; failures: {:?}", fails.get(&k)));
                assert_eq!(d.pages, s.pages.len(), "{file}");
                assert_eq!(d.page_embeddings.len(), d.pages);
                assert!(d.page_embeddings.iter().all(|e| e.len() == 384));
                let cer = rayorch_testdata::cer::cer(&s.page_texts().join("\n"), &d.page_texts.join("\n"));
                let hooked = scores.iter().find(|h| h.name == file).and_then(|h| h.cer);
                assert_eq!(hooked, Some(cer), "{file}: the hook scored what the metric says");
                report.push(format!(
                    "{:<14} {:>2} pages  CER {:.2}%",
                    s.file,
                    d.pages,
                    cer * 100.0
                ));
                assert!(cer <= 0.05, "{file}: CER {cer:.4}\n got: {:?}", d.page_texts);
                assert!(d.markdown.starts_with(&format!("# {file}\n")));
            }
            SampleKind::Empty => {
                let d = docs.get(&k).expect("the empty PDF is a document with zero pages");
                assert_eq!((d.pages, d.page_texts.len()), (0, 0));
            }
            kind => {
                let f = fails
                    .get(&k)
                    .unwrap_or_else(|| panic!("{file} ({kind:?}) has a failure line"));
                let want = match kind {
                    SampleKind::Corrupt => "is corrupt",
                    SampleKind::Encrypted => "is encrypted",
                    _ => "not a PDF",
                };
                // The open Grain failed; the document's output was suppressed by it.
                assert_eq!(f.outcome, "failed", "{f:?}");
                assert_eq!(f.name.as_deref(), Some(file.as_str()), "{f:?}");
                assert!(f.cause.starts_with(&file) && f.cause.contains(want), "{f:?}");
                assert!(f.at.as_deref().is_some_and(|at| at.contains("open")), "{f:?}");
            }
        }
    }
    eprintln!("CER per sample document:\n{}", report.join("\n"));

    // Cross-page batching, nothing lost or retried.
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    let calls = summary["calls"].as_array().unwrap();
    let rec = calls.iter().find(|c| c["name"] == "recognize").unwrap();
    assert!(
        rec["mixed_parent_batches"].as_u64().unwrap() > 0,
        "recognition batches mix pages: {rec}"
    );
    assert_eq!(rec["attempt_failures"], 0);
    assert_eq!(summary["present"].as_u64().unwrap() as usize, docs.len());

    // Parquet: the schema, and the same documents as the JSON lines.
    let (schema, rows) = read_documents(&out.join("documents.parquet")).unwrap();
    assert_eq!(schema, document_schema(384));
    assert_eq!(rows.len(), docs.len());
    for (k, d) in rows {
        assert_eq!(&d, &docs[&k], "parquet row {k}");
    }
}
