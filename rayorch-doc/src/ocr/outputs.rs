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

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use rayorch::sink::Sink;
use rayorch::{BoxError, Item, Output, RootOutcome};
use rayorch_kit::expect::{self, Expected, Inspect};
use rayorch_kit::job::Tally;
use rayorch_kit::names::RootNames;
use rayorch_kit::outcome;
use rayorch_kit::parquet::{JobFiles, JournaledFiles};
use rayorch_kit::progress::Progress;
use serde::Serialize;

use crate::document::{Document, DocumentRows, PageTally};

#[derive(Serialize)]
struct DocLine<'a> {
    key: u64,
    #[serde(flatten)]
    doc: &'a Document,
}

/// The job's sink (see the module note); its counters are the run's
/// figures for the summary.
pub struct Outputs {
    out: Output<Document>,
    names: Arc<RootNames>,
    files: JobFiles<DocumentRows>,
    progress: Arc<Progress>,
    start: Instant,
    inspect: Option<Inspect<Document>>,
    /// Documents written, failed, unexpected (`--expected`), and when.
    pub tally: Tally,
    /// When the first document with a page was written.
    pub first_text_s: Option<f64>,
    /// Pages written, by source and reason.
    pub pages: PageTally,
}

impl Outputs {
    /// Create the outputs in `dir` (`resume`: keep the files, the runner
    /// cuts them back to the journal's last commit).
    pub fn create(
        dir: &Path,
        out: Output<Document>,
        names: Arc<RootNames>,
        dim: usize,
        progress: Arc<Progress>,
        expected: Expected,
        resume: bool,
    ) -> std::io::Result<Outputs> {
        let names_of = ["documents.jsonl", "failures.jsonl", "documents.parquet"];
        let files = JournaledFiles::open(dir, names_of, &[], DocumentRows { dim }, 8, resume)
            .map_err(std::io::Error::other)?;
        let files = JobFiles::Local(files);
        Ok(Outputs::over(files, out, names, progress, expected))
    }

    /// The outputs committed to `bucket` (an object-store URL's outputs).
    #[cfg(feature = "store")]
    pub(super) fn to_bucket(
        bucket: rayorch_kit::store::outputs::BucketOutputs,
        out: Output<Document>,
        names: Arc<RootNames>,
        dim: usize,
        progress: Arc<Progress>,
        expected: Expected,
    ) -> Outputs {
        let files = JobFiles::Bucket(Box::new(super::bucket::bucket(bucket, dim)));
        Outputs::over(files, out, names, progress, expected)
    }

    /// The bucket the outputs go to, if they do.
    #[cfg(feature = "store")]
    pub(super) fn bucket(&mut self) -> Option<&mut super::bucket::Bucket> {
        self.files.bucket()
    }

    fn over(
        files: JobFiles<DocumentRows>,
        out: Output<Document>,
        names: Arc<RootNames>,
        progress: Arc<Progress>,
        expected: Expected,
    ) -> Outputs {
        Outputs {
            out,
            names,
            files,
            progress,
            start: Instant::now(),
            inspect: None,
            tally: Tally::expecting(expected),
            first_text_s: None,
            pages: PageTally::default(),
        }
    }

    /// Show each ended document to `inspect` after writing it (a test's
    /// or the demo's scoring).
    pub fn inspected(mut self, inspect: Option<Inspect<Document>>) -> Outputs {
        self.inspect = inspect;
        self
    }
}

impl Sink for Outputs {
    fn root(&mut self, o: &RootOutcome) -> Result<(), BoxError> {
        let t = self.start.elapsed().as_secs_f64();
        let (name, meta) = self
            .names
            .take(o.key)
            .map_or_else(Default::default, |(n, m)| (n.to_string(), m));
        match o.get(self.out) {
            Item::Present(mut doc) => {
                doc.metadata = meta.map(|m| (*m).clone());
                // The root's name (a shard row's key names it, not the
                // location its document was fetched from).
                if !name.is_empty() {
                    doc.name.clone_from(&name);
                }
                let line = serde_json::to_vec(&DocLine {
                    key: o.key,
                    doc: &doc,
                })?;
                self.tally.written(&name, doc.pages, t);
                let layer = self.pages.add(&doc);
                if doc.pages > 0 {
                    self.first_text_s.get_or_insert(t);
                }
                self.progress.println(format!(
                    "{t:>7.2}s  wrote  {name} ({} pages, {layer} from the text layer)",
                    doc.pages
                ));
                expect::show(&mut self.inspect, &name, Some(&doc));
                self.files.record(o.key, &line, (o.key, doc))?;
            }
            _ => {
                // The job has one output: the root's kind is the document's.
                let Some(line) = outcome::failure_line(o, Some(name.clone())) else {
                    return Err(format!("{name}: a present root without its document").into());
                };
                let bytes = rayorch_kit::outcome::failure_json(&line, meta.as_ref())?;
                self.files.failure(o.key, &bytes)?;
                self.tally.failed(&name);
                self.progress
                    .println(format!("{t:>7.2}s  FAILED {name}: {}", line.cause));
                expect::show(&mut self.inspect, &name, None);
            }
        }
        Ok(())
    }

    fn close(&mut self) -> Result<(), BoxError> {
        self.files.close()
    }

    fn sync(&mut self, durable: bool, positions: &mut Vec<u64>) -> Result<(), BoxError> {
        self.files.sync(durable, positions)
    }

    fn truncate_to(&mut self, positions: &mut &[u64]) -> Result<(), BoxError> {
        self.files.truncate_to(positions)
    }
}
