//! The document jobs' outputs scored against known truth, as they are
//! written: the README demo and the tests hand one of these to the job's
//! inspection hook (`rayorch_kit::expect::Inspect`), so no scoring lives in
//! a job's production outputs.
//!
//! - [`TextScores`]: each document's page texts against the bundled
//!   samples' manifest (character error rate; did it end as its kind says).
//! - [`LayoutScores`]: each page of the generated layout corpus (and its
//!   scanned twin) against its truth: CER, reading-order errors, tables.
//!
//! ```
//! use rayorch_testdata::pdfgen::{Sample, SampleKind};
//! use rayorch_testdata::score::TextScores;
//! let letter = Sample {
//!     file: "a.pdf".into(),
//!     kind: SampleKind::Text,
//!     font_size: 12.0,
//!     pages: vec![vec!["Hello world".into()]],
//!     scanned: false,
//! };
//! let mut s = TextScores::new(vec![letter]);
//! s.ended("/in/a.pdf", Some(&["Hello world".to_string()]));
//! s.ended("/in/b.pdf", Some(&[]));
//! assert_eq!(s.scores().len(), 1, "only documents the manifest names");
//! assert_eq!((s.scores()[0].cer, s.scores()[0].as_expected), (Some(0.0), true));
//! ```

use rayorch_models::layout::markdown::LayoutDocument;
use serde::Serialize;

use crate::cer::cer;
use crate::layoutgen::{GtPage, PageScore, score_page};
use crate::pdfgen::{Sample, SampleKind};

/// How one document compared with its known text.
#[derive(Serialize, Clone, Debug)]
pub struct Score {
    /// The document (as the job named it).
    pub name: String,
    /// What the manifest says it is.
    pub expected: SampleKind,
    /// `written` or `failed`.
    pub outcome: &'static str,
    /// Pages written.
    pub pages: usize,
    /// Character error rate against the manifest's text (text samples).
    pub cer: Option<f64>,
    /// Did it end as its kind says it should (text/empty written with
    /// every page, bad files failed)?
    pub as_expected: bool,
}

/// Documents' page texts scored against the samples' manifest (see the
/// module note).
#[derive(Debug, Default)]
pub struct TextScores {
    manifest: Vec<Sample>,
    scores: Vec<Score>,
}

/// The last segment of a path or URL.
fn file_name(name: &str) -> &str {
    name.rsplit(['/', '\\']).next().unwrap_or(name)
}

impl TextScores {
    /// Scores against `manifest` (`pdfgen::read_manifest`).
    pub fn new(manifest: Vec<Sample>) -> TextScores {
        TextScores {
            manifest,
            scores: Vec::new(),
        }
    }

    /// Score the document `name` as it ended: `Some(page texts)` when it
    /// was written. A document the manifest does not name is not scored.
    pub fn ended(&mut self, name: &str, pages: Option<&[String]>) {
        let Some(sample) = self.manifest.iter().find(|s| s.file == file_name(name)) else {
            return;
        };
        let cer = match (pages, sample.kind) {
            (Some(p), SampleKind::Text) => Some(cer(&sample.page_texts().join("\n"), &p.join("\n"))),
            _ => None,
        };
        let as_expected = match sample.kind {
            SampleKind::Text => pages.is_some_and(|p| p.len() == sample.pages.len()),
            SampleKind::Empty => pages.is_some_and(<[String]>::is_empty),
            _ => pages.is_none(),
        };
        self.scores.push(Score {
            name: name.to_string(),
            expected: sample.kind,
            outcome: if pages.is_some() { "written" } else { "failed" },
            pages: pages.map_or(0, <[String]>::len),
            cer,
            as_expected,
        });
    }

    /// Every score so far, in the order the documents ended.
    pub fn scores(&self) -> &[Score] {
        &self.scores
    }

    /// The scores as a table, one row per document (empty when none).
    pub fn table(&self) -> String {
        if self.scores.is_empty() {
            return String::new();
        }
        let mut t = format!(
            "{:<40} {:<10} {:<8} {:>5} {:>8}\n",
            "document", "kind", "outcome", "pages", "CER"
        );
        for s in &self.scores {
            let cer = s.cer.map_or("-".to_string(), |c| format!("{:.2}%", c * 100.0));
            let mark = if s.as_expected { "" } else { "  (unexpected)" };
            t += &format!(
                "{:<40} {:<10} {:<8} {:>5} {:>8}{mark}\n",
                s.name,
                format!("{:?}", s.expected).to_lowercase(),
                s.outcome,
                s.pages,
                cer
            );
        }
        t
    }
}

/// A corpus page's score.
#[derive(Serialize, Clone, Debug)]
pub struct PageScored {
    /// The document.
    pub document: String,
    /// Zero-based page number.
    pub page: usize,
    /// Its scores.
    #[serde(flatten)]
    pub score: PageScore,
}

impl std::fmt::Display for PageScored {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = &self.score;
        write!(
            f,
            "{} page {} ({:<11}) CER {:>5.2}%  order errors {:>5.1}% over {} regions",
            file_name(&self.document),
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

/// Layout documents' pages scored against the generated corpus's truth
/// (see the module note).
#[derive(Debug, Default)]
pub struct LayoutScores {
    truth: Vec<(String, Vec<GtPage>)>,
    dpi: f32,
    scores: Vec<PageScored>,
}

impl LayoutScores {
    /// Scores against `truth`: each corpus document's name (as the job
    /// names it: its path) and truth pages, rendered at `dpi`.
    pub fn new(truth: Vec<(String, Vec<GtPage>)>, dpi: f32) -> LayoutScores {
        LayoutScores {
            truth,
            dpi,
            scores: Vec::new(),
        }
    }

    /// Score the document `name` as it ended (only corpus documents are
    /// scored; a failed one has nothing to score).
    pub fn ended(&mut self, name: &str, doc: Option<&LayoutDocument>) {
        let (Some((_, truth)), Some(doc)) = (self.truth.iter().find(|(n, _)| n == name), doc) else {
            return;
        };
        for (t, p) in truth.iter().zip(&doc.pages) {
            self.scores.push(PageScored {
                document: name.to_string(),
                page: p.page,
                score: score_page(t, p, self.dpi),
            });
        }
    }

    /// Every page scored so far.
    pub fn scores(&self) -> &[PageScored] {
        &self.scores
    }
}
