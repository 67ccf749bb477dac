//! The layout job's sink: each document is written the moment it completes.
//!
//! - `markdown/<file stem>.md`: the document as Markdown;
//! - `documents.jsonl`: one line per document (name, per-page text source
//!   and orientation, Markdown);
//! - `regions.jsonl` and `regions.parquet`: one row per region;
//! - `failures.jsonl`: one line per document that did not complete.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rayorch::sink::{FailureLine, Sink};
use rayorch::{BoxError, Item, Output, RootOutcome};
use rayorch_kit::names::RootNames;
use rayorch_kit::parquet::ParquetFile;
use rayorch_models::layout::markdown::LayoutDocument;
use rayorch_models::layout::{Orientation, TextSource};
use rayorch_testdata::layoutgen::{GtPage, PageScore, score_page};
use rayorch_testdata::pdfgen::SampleKind;
use serde::Serialize;

use super::records::RegionRows;

#[derive(Serialize)]
struct DocLine<'a> {
    key: u64,
    name: &'a str,
    pages: usize,
    text_sources: Vec<TextSource>,
    orientations: Vec<Orientation>,
    markdown: &'a str,
}

/// A corpus page's score, for the summary and the console.
#[derive(Serialize)]
pub struct Scored {
    /// Zero-based page number.
    pub page: usize,
    /// Its scores.
    #[serde(flatten)]
    pub score: PageScore,
}

impl std::fmt::Display for Scored {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = &self.score;
        write!(
            f,
            "corpus page {} ({:<11}) CER {:>5.2}%  order errors {:>5.1}% over {} regions",
            self.page + 1,
            s.kind,
            s.cer * 100.0,
            s.order_errors * 100.0,
            s.matched_regions
        )?;
        if let (Some((r, c)), Some(a)) = (s.table_shape, s.cell_accuracy) {
            write!(f, "  table {r}x{c}, cells {:.0}%", a * 100.0)?;
        }
        Ok(())
    }
}

/// The job's sink (see the module note).
pub struct Outputs {
    out: Output<LayoutDocument>,
    names: Arc<RootNames>,
    dir: PathBuf,
    docs: BufWriter<File>,
    regions: BufWriter<File>,
    failures: BufWriter<File>,
    parquet: Option<ParquetFile<RegionRows>>,
    truth: Vec<(String, Vec<GtPage>)>,
    dpi: f32,
    /// The bundled samples' manifest, read at the first failure.
    manifest: Option<Vec<rayorch_testdata::pdfgen::Sample>>,
    /// A document failed that is not a bundled sample broken on purpose.
    unexpected_failure: bool,
    /// Documents written.
    pub written: usize,
    /// Documents that failed.
    pub failed: usize,
    /// Pages written.
    pub pages: usize,
    /// Corpus pages scored against their truth.
    pub scores: Vec<Scored>,
}

impl Outputs {
    /// Create the outputs in `dir`; `truth` holds the corpus documents' truth
    /// pages (rendered at `dpi`) to score against.
    pub fn create(
        dir: &Path,
        out: Output<LayoutDocument>,
        names: Arc<RootNames>,
        truth: Vec<(String, Vec<GtPage>)>,
        dpi: f32,
    ) -> Result<Outputs, BoxError> {
        std::fs::create_dir_all(dir.join("markdown"))?;
        let file = |n: &str| File::create(dir.join(n)).map(BufWriter::new);
        Ok(Outputs {
            out,
            names,
            dir: dir.to_path_buf(),
            docs: file("documents.jsonl")?,
            regions: file("regions.jsonl")?,
            failures: file("failures.jsonl")?,
            parquet: Some(ParquetFile::create(
                &dir.join("regions.parquet"),
                RegionRows,
                256,
            )?),
            truth,
            dpi,
            manifest: None,
            unexpected_failure: false,
            written: 0,
            failed: 0,
            pages: 0,
            scores: Vec::new(),
        })
    }

    /// Did only the bundled samples that are broken on purpose fail?
    pub fn only_expected_failures(&self) -> bool {
        !self.unexpected_failure
    }

    /// Note a failed document: expected only for a bundled sample that is
    /// broken on purpose (decided now, so nothing is kept per failure).
    fn note_failure(&mut self, name: &str) {
        let manifest = self.manifest.get_or_insert_with(|| {
            rayorch_testdata::pdfgen::read_manifest(&rayorch_models::assets::workspace_root().join("samples"))
                .unwrap_or_default()
        });
        let expected = manifest
            .iter()
            .any(|s| name.ends_with(&s.file) && !matches!(s.kind, SampleKind::Text | SampleKind::Empty));
        self.unexpected_failure |= !expected;
    }

    fn write_doc(&mut self, key: u64, doc: &LayoutDocument) -> Result<(), BoxError> {
        let stem = Path::new(&doc.name)
            .file_stem()
            .map_or_else(|| format!("doc-{key}"), |s| s.to_string_lossy().into_owned());
        std::fs::write(
            self.dir.join("markdown").join(format!("{stem}.md")),
            &doc.markdown,
        )?;
        serde_json::to_writer(
            &mut self.docs,
            &DocLine {
                key,
                name: &doc.name,
                pages: doc.pages.len(),
                text_sources: doc.pages.iter().map(|p| p.text_source).collect(),
                orientations: doc.pages.iter().map(|p| p.orientation).collect(),
                markdown: &doc.markdown,
            },
        )?;
        self.docs.write_all(b"\n")?;
        self.docs.flush()?;
        for p in &doc.pages {
            for r in &p.regions {
                serde_json::to_writer(&mut self.regions, r)?;
                self.regions.write_all(b"\n")?;
            }
            if let Some(pq) = self.parquet.as_mut() {
                for r in &p.regions {
                    pq.write(r.clone())?;
                }
            }
        }
        self.regions.flush()?;
        if let Some((_, truth)) = self.truth.iter().find(|(name, _)| *name == doc.name) {
            for (t, p) in truth.iter().zip(&doc.pages) {
                self.scores.push(Scored {
                    page: p.page,
                    score: score_page(t, p, self.dpi),
                });
            }
        }
        Ok(())
    }
}

impl Sink for Outputs {
    fn root(&mut self, o: &RootOutcome) -> Result<(), BoxError> {
        let name = self.names.take(o.key).map_or_else(String::new, |n| n.to_string());
        match o.get(self.out) {
            Item::Present(doc) => {
                self.write_doc(o.key, &doc)?;
                self.written += 1;
                self.pages += doc.pages.len();
                eprintln!("wrote  {name} ({} pages)", doc.pages.len());
            }
            other => {
                // The job has one output: the root's kind is the document's.
                let Some(line) = FailureLine::of(o, Some(name.clone())) else {
                    return Err(
                        format!("{name}: a present root without its document ({:?})", other.kind()).into(),
                    );
                };
                let cause = line.cause.clone();
                serde_json::to_writer(&mut self.failures, &line)?;
                self.failures.write_all(b"\n")?;
                self.failures.flush()?;
                self.failed += 1;
                eprintln!("FAILED {name}: {cause}");
                self.note_failure(&name);
            }
        }
        Ok(())
    }

    fn close(&mut self) -> Result<(), BoxError> {
        self.docs.flush()?;
        self.regions.flush()?;
        self.failures.flush()?;
        if let Some(p) = self.parquet.take() {
            p.close()?;
        }
        Ok(())
    }
}
