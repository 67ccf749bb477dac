//! The job's sink: every document is written the moment it is complete.
//!
//! - `documents.jsonl`: one line per healthy document, flushed at once;
//! - `documents.parquet`: the same rows, a row group every few documents,
//!   readable once the run has closed it (Ctrl-C closes it too);
//! - `failures.jsonl`: one line per document that did not complete, with the
//!   cause and where it arose. A document whose output was never computed
//!   because an earlier step failed (the engine's `Suppressed`, e.g. a render
//!   failure) is `failed` here too: for the user the document failed, and
//!   `cause`/`at` say where.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use rayorch::sink::Sink;
use rayorch::{BoxError, Item, ItemKind, Output, RootOutcome};
use rayorch_models::cer::cer;
use rayorch_models::output::{Document, ParquetWriter};
use rayorch_models::pdfgen::{Sample, SampleKind};
use serde::Serialize;

use crate::progress::Progress;

#[derive(Serialize)]
struct DocLine<'a> {
    key: u64,
    #[serde(flatten)]
    doc: &'a Document,
    #[serde(skip_serializing_if = "Option::is_none")]
    cer: Option<f64>,
}

#[derive(Serialize)]
pub struct FailureLine {
    pub key: u64,
    pub name: String,
    pub outcome: String,
    pub cause: String,
    pub at: Option<String>,
}

/// How one document compared with its known text.
#[derive(Serialize, Clone, Debug)]
pub struct Score {
    pub name: String,
    pub expected: SampleKind,
    /// `written` or the failure kind.
    pub outcome: String,
    pub pages: usize,
    pub cer: Option<f64>,
    /// Did it end as its kind says it should (text/empty written, bad files failed)?
    pub as_expected: bool,
}

/// The `outcome` a document's output kind is reported as.
pub fn outcome_label(kind: ItemKind) -> &'static str {
    match kind {
        ItemKind::Present => "written",
        ItemKind::Dropped => "dropped",
        // Suppressed: an upstream step (render, detect, ...) failed for this
        // document; the cause names it.
        ItemKind::Failed | ItemKind::Suppressed => "failed",
    }
}

pub struct Outputs {
    out: Output<Document>,
    names: Arc<Vec<String>>,
    jsonl: BufWriter<File>,
    failures: BufWriter<File>,
    parquet: Option<ParquetWriter>,
    progress: Arc<Progress>,
    start: Instant,
    expected: HashMap<String, Sample>,
    pub written_at: Vec<f64>,
    /// (time, pages) of each written document.
    pub written_at_pages: Vec<(f64, usize)>,
    pub written: usize,
    pub failed: usize,
    /// Documents that ended otherwise than the manifest says (no manifest
    /// entry: any document not written).
    pub unexpected: usize,
    /// Keys of every document that reached the sink.
    pub seen: Vec<u64>,
    pub pages: usize,
    pub scores: Vec<Score>,
}

fn file_name(path: &str) -> String {
    Path::new(path)
        .file_name()
        .map_or_else(|| path.to_string(), |n| n.to_string_lossy().into_owned())
}

impl Outputs {
    pub fn create(
        dir: &Path,
        out: Output<Document>,
        names: Arc<Vec<String>>,
        dim: usize,
        progress: Arc<Progress>,
        expected: Vec<Sample>,
    ) -> std::io::Result<Outputs> {
        std::fs::create_dir_all(dir)?;
        let file = |n: &str| File::create(dir.join(n)).map(BufWriter::new);
        let parquet =
            ParquetWriter::create(&dir.join("documents.parquet"), dim, 8).map_err(std::io::Error::other)?;
        Ok(Outputs {
            out,
            names,
            jsonl: file("documents.jsonl")?,
            failures: file("failures.jsonl")?,
            parquet: Some(parquet),
            progress,
            start: Instant::now(),
            expected: expected.into_iter().map(|s| (s.file.clone(), s)).collect(),
            written_at: Vec::new(),
            written_at_pages: Vec::new(),
            written: 0,
            failed: 0,
            unexpected: 0,
            seen: Vec::new(),
            pages: 0,
            scores: Vec::new(),
        })
    }

    /// Score `doc` against the manifest and count it when it ended
    /// otherwise than expected (without a manifest entry, a document is
    /// expected to be written).
    fn score(&mut self, name: &str, outcome: &str, doc: Option<&Document>) -> Option<f64> {
        let Some(sample) = self.expected.get(&file_name(name)) else {
            self.unexpected += usize::from(doc.is_none());
            return None;
        };
        let cer = match (doc, sample.kind) {
            (Some(d), SampleKind::Text) => {
                Some(cer(&sample.page_texts().join("\n"), &d.page_texts.join("\n")))
            }
            _ => None,
        };
        let as_expected = match sample.kind {
            SampleKind::Text => doc.is_some_and(|d| d.pages == sample.pages.len()),
            SampleKind::Empty => doc.is_some_and(|d| d.pages == 0),
            _ => doc.is_none(),
        };
        self.unexpected += usize::from(!as_expected);
        self.scores.push(Score {
            name: name.to_string(),
            expected: sample.kind,
            outcome: outcome.to_string(),
            pages: doc.map_or(0, |d| d.pages),
            cer,
            as_expected,
        });
        cer
    }
}

impl Outputs {
    /// The process exit status after the run (see `cli::EXIT_CODES`): 130
    /// when interrupted, 3 when any document ended otherwise than expected
    /// (failed; with a manifest: not as the manifest says), else 0.
    pub fn exit_code(&self, interrupted: bool) -> u8 {
        if interrupted {
            130
        } else if self.unexpected > 0 {
            3
        } else {
            0
        }
    }
}

impl Sink for Outputs {
    fn root(&mut self, o: &RootOutcome) -> Result<(), BoxError> {
        let t = self.start.elapsed().as_secs_f64();
        let name = self.names.get(o.key as usize).cloned().unwrap_or_default();
        self.seen.push(o.key);
        match o.get(self.out) {
            Item::Present(doc) => {
                let cer = self.score(&name, "written", Some(&doc));
                serde_json::to_writer(
                    &mut self.jsonl,
                    &DocLine {
                        key: o.key,
                        doc: &doc,
                        cer,
                    },
                )?;
                self.jsonl.write_all(b"\n")?;
                self.jsonl.flush()?;
                self.written += 1;
                self.pages += doc.pages;
                self.written_at.push(t);
                self.written_at_pages.push((t, doc.pages));
                let cer_text = cer.map_or(String::new(), |c| format!(", CER {:.2}%", c * 100.0));
                self.progress.println(format!(
                    "{t:>7.2}s  wrote  {name} ({} pages{cer_text})",
                    doc.pages
                ));
                if let Some(p) = self.parquet.as_mut() {
                    p.write(o.key, doc)?;
                }
            }
            other => {
                let outcome = outcome_label(other.kind()).to_string();
                let cause = other.cause();
                let line = FailureLine {
                    key: o.key,
                    name: name.clone(),
                    outcome: outcome.clone(),
                    cause: cause.map(|c| c.message().to_string()).unwrap_or_default(),
                    at: cause.and_then(|c| c.context().map(String::from)),
                };
                self.score(&name, &outcome, None);
                serde_json::to_writer(&mut self.failures, &line)?;
                self.failures.write_all(b"\n")?;
                self.failures.flush()?;
                self.failed += 1;
                self.progress
                    .println(format!("{t:>7.2}s  FAILED {name}: {}", line.cause));
            }
        }
        self.progress.docs.inc(1);
        Ok(())
    }

    fn close(&mut self) -> Result<(), BoxError> {
        self.jsonl.flush()?;
        self.failures.flush()?;
        if let Some(p) = self.parquet.take() {
            p.close()?;
        }
        Ok(())
    }
}
