//! The job's sink: every document is written the moment it is complete.
//!
//! - `documents.jsonl`: one line per healthy document, flushed at once;
//! - `documents.parquet/`: the same rows, one `part-NNNNN.parquet` segment
//!   per journal commit that wrote rows (each readable once closed);
//! - `failures.jsonl`: one line per document that did not complete, with the
//!   cause and where it arose. A document whose output was never computed
//!   because an earlier step failed (the engine's `Suppressed`, e.g. a render
//!   failure) is `failed` here too: for the user the document failed, and
//!   `cause`/`at` say where.
//!
//! The three follow the run's journal (`journal.redb` beside them): each
//! journal commit syncs them and stores their positions, and a resumed run
//! cuts them back to those positions, so every document is in them exactly
//! once however the previous run ended.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use rayorch::sink::{LinesFile, Sink};
use rayorch::{BoxError, Item, ItemKind, Output, RootOutcome};
use rayorch_models::cer::cer;
use rayorch_models::output::{Document, ParquetSegments};
use rayorch_models::pdfgen::{Sample, SampleKind};
use serde::Serialize;

use super::progress::Progress;

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
    jsonl: LinesFile,
    failures: LinesFile,
    parquet: ParquetSegments,
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
        resume: bool,
    ) -> std::io::Result<Outputs> {
        std::fs::create_dir_all(dir)?;
        // A resumed run keeps the files: the runner cuts them back to the
        // journal's last commit before the first document.
        let file = |n: &str| {
            if resume {
                LinesFile::open(dir.join(n))
            } else {
                LinesFile::create(dir.join(n))
            }
        };
        let parquet = ParquetSegments::open(&dir.join("documents.parquet"), dim, 8, !resume)
            .map_err(std::io::Error::other)?;
        Ok(Outputs {
            out,
            names,
            jsonl: file("documents.jsonl")?,
            failures: file("failures.jsonl")?,
            parquet,
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
                self.jsonl.line(&serde_json::to_vec(&DocLine {
                    key: o.key,
                    doc: &doc,
                    cer,
                })?)?;
                self.written += 1;
                self.pages += doc.pages;
                self.written_at.push(t);
                self.written_at_pages.push((t, doc.pages));
                let cer_text = cer.map_or(String::new(), |c| format!(", CER {:.2}%", c * 100.0));
                self.progress.println(format!(
                    "{t:>7.2}s  wrote  {name} ({} pages{cer_text})",
                    doc.pages
                ));
                self.parquet.write(o.key, doc)?;
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
                self.failures.line(&serde_json::to_vec(&line)?)?;
                self.failed += 1;
                self.progress
                    .println(format!("{t:>7.2}s  FAILED {name}: {}", line.cause));
            }
        }
        self.progress.docs.inc(1);
        Ok(())
    }

    fn close(&mut self) -> Result<(), BoxError> {
        Sink::close(&mut self.jsonl)?;
        Sink::close(&mut self.failures)?;
        Ok(self.parquet.close()?)
    }

    fn sync(&mut self, durable: bool, positions: &mut Vec<u64>) -> Result<(), BoxError> {
        positions.push(self.jsonl.sync(durable)?);
        positions.push(self.failures.sync(durable)?);
        positions.push(self.parquet.sync(durable)?);
        Ok(())
    }

    fn truncate_to(&mut self, positions: &mut &[u64]) -> Result<(), BoxError> {
        let p: &[u64] = positions;
        let (Some(&jsonl), Some(&failures), Some(&parquet)) = (p.first(), p.get(1), p.get(2)) else {
            return Err(
                "the journal holds fewer output positions than doc_ocr writes (3): start over with --force"
                    .into(),
            );
        };
        self.jsonl.truncate_to(jsonl)?;
        self.failures.truncate_to(failures)?;
        self.parquet.truncate_to(parquet)?;
        *positions = &p[3..];
        Ok(())
    }
}
