//! The layout job's sink: each document is written the moment it completes.
//!
//! - `markdown/<file stem>.md`: the document as Markdown;
//! - `documents.jsonl`: one line per document, the OCR plan's record
//!   (`Document`: name, pages, Markdown, page texts, each page's text
//!   source, reason and reason kind; no embeddings) and each page's
//!   orientation;
//! - `regions.jsonl` and `regions.parquet/` (one `part-NNNNN.parquet`
//!   segment per journal commit that wrote rows): one row per region;
//! - `failures.jsonl`: one line per document that did not complete.
//!
//! The JSONL files and the segments follow the run's journal
//! (`journal.redb` beside them), as `doc_ocr`'s do: each journal commit
//! syncs them and stores their positions, and a resumed run cuts them back
//! to those positions, so every document is in them exactly once however
//! the previous run ended. A document's Markdown file is written whole
//! each time the document is (a resumed run rewrites the files of the
//! documents it runs again).
//!
//! With `--out` an object-store URL (feature `store`) the JSONL and Parquet
//! outputs are immutable segments committed exactly once (`documents.jsonl`,
//! `regions.jsonl`, `regions.parquet`, `failures.jsonl` per commit, each
//! commit record naming its documents: `rayorch_kit::store::outputs`); the
//! Markdown is in `documents.jsonl` only (no object per document).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use rayorch::sink::Sink;
use rayorch::{BoxError, Item, Output, RootOutcome};
use rayorch_kit::expect::{self, Expected, Inspect};
use rayorch_kit::job::Tally;
use rayorch_kit::names::RootNames;
use rayorch_kit::parquet::{JobFiles, JournaledFiles};
use rayorch_kit::progress::Progress;
use rayorch_models::layout::Orientation;
use rayorch_models::layout::markdown::LayoutDocument;
use serde::Serialize;

use super::records::RegionRows;
use crate::document::{Document, PageTally};

/// A `documents.jsonl` line: the OCR plan's record (without embeddings)
/// and what was done to bring each page upright.
#[derive(Serialize)]
struct DocLine<'a> {
    key: u64,
    #[serde(flatten)]
    doc: &'a Document,
    orientations: Vec<Orientation>,
}

/// The job's segment kinds at a URL.
#[cfg(feature = "store")]
const KINDS: rayorch_kit::store::outputs::Kinds = rayorch_kit::store::outputs::Kinds {
    records: "documents.jsonl",
    failures: "failures.jsonl",
    parquet: "regions.parquet",
};

/// The regions' JSONL segment at a URL.
#[cfg(feature = "store")]
const REGIONS: &str = "regions.jsonl";

/// The job's sink (see the module note).
pub struct Outputs {
    out: Output<LayoutDocument>,
    names: Arc<RootNames>,
    files: JobFiles<RegionRows>,
    /// The Markdown files' folder (`None`: the outputs are at a URL).
    markdown: Option<PathBuf>,
    inspect: Option<Inspect<LayoutDocument>>,
    progress: Arc<Progress>,
    start: Instant,
    /// Documents written, failed, unexpected (`--expected`), and when.
    pub tally: Tally,
    /// Pages written, by source and reason.
    pub pages: PageTally,
}

impl Outputs {
    /// Create the outputs in `dir`; `expected` says which documents must
    /// fail. `resume`: keep the files (the runner cuts them back to the
    /// journal's last commit before the first document).
    pub fn create(
        dir: &Path,
        out: Output<LayoutDocument>,
        names: Arc<RootNames>,
        expected: Expected,
        progress: Arc<Progress>,
        resume: bool,
    ) -> Result<Outputs, BoxError> {
        std::fs::create_dir_all(dir.join("markdown"))?;
        let names_of = ["documents.jsonl", "failures.jsonl", "regions.parquet"];
        let files = JournaledFiles::open(dir, names_of, &["regions.jsonl"], RegionRows, 256, resume)?;
        let mut outputs = Outputs::over(JobFiles::Local(files), out, names, expected, progress);
        outputs.markdown = Some(dir.join("markdown"));
        Ok(outputs)
    }

    /// The outputs committed to `bucket` (`--out` an object-store URL).
    #[cfg(feature = "store")]
    pub fn to_bucket(
        bucket: rayorch_kit::store::outputs::BucketOutputs,
        out: Output<LayoutDocument>,
        names: Arc<RootNames>,
        expected: Expected,
        progress: Arc<Progress>,
    ) -> Outputs {
        let commits = rayorch_kit::store::outputs::RowCommits::new(bucket, RegionRows, KINDS);
        Outputs::over(
            JobFiles::Bucket(Box::new(commits)),
            out,
            names,
            expected,
            progress,
        )
    }

    /// The commits, when the outputs are at a URL.
    #[cfg(feature = "store")]
    pub fn bucket(&mut self) -> Option<&mut rayorch_kit::store::outputs::RowCommits<RegionRows>> {
        self.files.bucket()
    }

    fn over(
        files: JobFiles<RegionRows>,
        out: Output<LayoutDocument>,
        names: Arc<RootNames>,
        expected: Expected,
        progress: Arc<Progress>,
    ) -> Outputs {
        Outputs {
            out,
            names,
            files,
            markdown: None,
            inspect: None,
            progress,
            start: Instant::now(),
            tally: Tally::expecting(expected),
            pages: PageTally::default(),
        }
    }

    /// Show each ended document to `inspect` as it is written (a test's
    /// or the demo's scoring).
    pub fn inspected(mut self, inspect: Option<Inspect<LayoutDocument>>) -> Outputs {
        self.inspect = inspect;
        self
    }

    fn write_doc(&mut self, key: u64, doc: &LayoutDocument, record: &Document) -> Result<(), BoxError> {
        let line = serde_json::to_vec(&DocLine {
            key,
            doc: record,
            orientations: doc.pages.iter().map(|p| p.orientation).collect(),
        })?;
        if let Some(dir) = &self.markdown {
            let stem = Path::new(&doc.name)
                .file_stem()
                .map_or_else(|| format!("doc-{key}"), |s| s.to_string_lossy().into_owned());
            std::fs::write(dir.join(format!("{stem}.md")), &doc.markdown)?;
        }
        match &mut self.files {
            JobFiles::Local(f) => {
                f.records.line(&line)?;
                for r in doc.pages.iter().flat_map(|p| &p.regions) {
                    f.extra[0].line(&serde_json::to_vec(r)?)?;
                    f.parquet.write(r.clone())?;
                }
            }
            #[cfg(feature = "store")]
            JobFiles::Bucket(b) => {
                b.line(KINDS.records, &line);
                for p in &doc.pages {
                    for r in &p.regions {
                        b.line(REGIONS, &serde_json::to_vec(r)?);
                        b.row(r.clone())?;
                    }
                }
                b.root_done(key)?;
            }
        }
        Ok(())
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
            Item::Present(doc) => {
                let mut record = Document::from_layout(&doc);
                record.metadata = meta.map(|m| (*m).clone());
                if !name.is_empty() {
                    record.name.clone_from(&name);
                }
                self.write_doc(o.key, &doc, &record)?;
                self.tally.written(&name, doc.pages.len(), t);
                let layer = self.pages.add(&record);
                self.progress.println(format!(
                    "{t:>7.2}s  wrote  {name} ({} pages, {layer} from the text layer)",
                    doc.pages.len()
                ));
                expect::show(&mut self.inspect, &name, Some(&doc));
            }
            other => {
                // The job has one output: the root's kind is the document's.
                let Some(line) = rayorch_kit::outcome::failure_line(o, Some(name.clone())) else {
                    return Err(
                        format!("{name}: a present root without its document ({:?})", other.kind()).into(),
                    );
                };
                let cause = line.cause.clone();
                let bytes = rayorch_kit::outcome::failure_json(&line, meta.as_ref())?;
                self.files.failure(o.key, &bytes)?;
                self.tally.failed(&name);
                self.progress
                    .println(format!("{t:>7.2}s  FAILED {name}: {cause}"));
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
