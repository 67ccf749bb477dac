//! The OCR job's record: one [`Document`] per PDF, and its Parquet row
//! schema ([`DocumentRows`]).
//!
//! A [`Document`] holds the page texts in page order, a Markdown rendering,
//! one sentence embedding per page, and where each page's text came from
//! (its text layer or OCR) and why. As Parquet (one row per document,
//! written with `rayorch_kit::parquet`): `key u64, name utf8, pages u32,
//! markdown utf8, page_texts list<utf8>, page_embeddings
//! list<fixed_size_list<f32, dim>>, page_sources list<utf8>, page_reasons
//! list<utf8>, page_reason_kinds list<utf8>`; [`read_documents`] reads a
//! file or a segments folder back.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use arrow_array::{
    Array, ArrayRef, FixedSizeListArray, Float32Array, ListArray, StringArray, UInt32Array, UInt64Array,
};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use rayorch_kit::parquet::{OutputError, Rows, col, read_batches};
use rayorch_models::PageText;
use rayorch_models::layout::markdown::LayoutDocument;
use rayorch_models::pdf::text::TextSource;
use serde::{Deserialize, Serialize};

/// One processed document.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Document {
    /// The document's name (its path).
    pub name: String,
    /// Number of pages.
    pub pages: usize,
    /// The text as Markdown: a heading per document and per page.
    pub markdown: String,
    /// Each page's text, in page order.
    pub page_texts: Vec<String>,
    /// Each page's sentence embedding, in page order (none from the
    /// layout plan, and then left out of a JSON line).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub page_embeddings: Vec<Vec<f32>>,
    /// Where each page's text came from: `layer` (the PDF's own text) or
    /// `ocr`.
    #[serde(default)]
    pub page_sources: Vec<TextSource>,
    /// Why, per page: "the text layer passed every check", or what the
    /// layer failed ("no text layer (fewer than 10 glyphs)", ...).
    #[serde(default)]
    pub page_reasons: Vec<String>,
    /// The reason's kind per page, one stable word to count pages by
    /// (`trusted`, `forced`, `no_layer`, `unmapped`, `garbage`,
    /// `spaced_out`, `scrambled`, `text_in_images`, `unreadable`, `verified`,
    /// `disagrees`:
    /// `rayorch_models::pdf::text::Verdict::kind`).
    #[serde(default)]
    pub page_reason_kinds: Vec<String>,
    /// The fields its `--input-list` row gave it beside its location (a
    /// JSON object; none for an input not from a list). Set by the job's
    /// sink, which has it from the source, not by the pipeline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<serde_json::Value>,
}

impl Document {
    /// Assemble a document from its pages' texts and embeddings.
    ///
    /// ```
    /// use rayorch_doc::Document;
    /// use rayorch_models::PageText;
    /// use rayorch_models::pdf::text::{TextSource, Verdict};
    /// let page = PageText { text: "Hello".into(), source: TextSource::Layer, verdict: Verdict::Trusted };
    /// let d = Document::assemble("a.pdf", vec![page], vec![vec![1.0, 0.0]]);
    /// assert_eq!(d.markdown, "# a.pdf\n\n## Page 1\n\nHello\n");
    /// assert_eq!(d.page_sources, [TextSource::Layer]);
    /// assert_eq!(d.page_reasons, ["the text layer passed every check"]);
    /// assert_eq!(d.page_reason_kinds, ["trusted"]);
    /// ```
    pub fn assemble(name: &str, pages: Vec<PageText>, page_embeddings: Vec<Vec<f32>>) -> Document {
        let page_sources = pages.iter().map(|p| p.source).collect();
        let page_reasons = pages.iter().map(|p| p.verdict.to_string()).collect();
        let page_reason_kinds = pages.iter().map(|p| p.verdict.kind().to_string()).collect();
        let page_texts: Vec<String> = pages.into_iter().map(|p| p.text).collect();
        let mut markdown = format!("# {name}\n");
        for (i, t) in page_texts.iter().enumerate() {
            markdown.push_str(&format!("\n## Page {}\n\n", i + 1));
            if !t.is_empty() {
                markdown.push_str(t);
                markdown.push('\n');
            }
        }
        Document {
            name: name.to_string(),
            pages: page_texts.len(),
            markdown,
            page_texts,
            page_embeddings,
            page_sources,
            page_reasons,
            page_reason_kinds,
            metadata: None,
        }
    }
}

impl Document {
    /// The record of a document the layout plan read (`doc_ocr --layout`,
    /// `doc_layout`): its Markdown, each page's plain text
    /// ([`PageResult::plain_text`](rayorch_models::layout::markdown::PageResult::plain_text)),
    /// source and reason; no embeddings (the layout plan embeds nothing).
    pub fn from_layout(doc: &LayoutDocument) -> Document {
        Document {
            name: doc.name.clone(),
            pages: doc.pages.len(),
            markdown: doc.markdown.clone(),
            page_texts: doc.pages.iter().map(|p| p.plain_text()).collect(),
            page_embeddings: Vec::new(),
            page_sources: doc.pages.iter().map(|p| p.text_source).collect(),
            page_reasons: doc.pages.iter().map(|p| p.verdict.to_string()).collect(),
            page_reason_kinds: doc.pages.iter().map(|p| p.verdict.kind().to_string()).collect(),
            metadata: None,
        }
    }
}

/// Pages written, by where their text came from and why: the figures
/// every document job reports in `summary.json`'s `job` section and on the
/// console.
#[derive(Clone, Debug, Default, Serialize)]
pub struct PageTally {
    /// Pages written.
    pub pages_written: usize,
    /// Pages whose text is their text layer.
    pub pages_from_layer: usize,
    /// Pages OCR'd.
    pub pages_ocr: usize,
    /// Pages by the kind of their reason ([`Document::page_reason_kinds`]:
    /// `trusted`, `no_layer`, …).
    pub pages_by_reason: BTreeMap<String, usize>,
}

impl PageTally {
    /// Count `doc`'s pages; returns how many came from its text layer.
    pub fn add(&mut self, doc: &Document) -> usize {
        let layer = doc
            .page_sources
            .iter()
            .filter(|&&s| s == TextSource::Layer)
            .count();
        self.pages_written += doc.pages;
        self.pages_from_layer += layer;
        self.pages_ocr += doc.pages - layer.min(doc.pages);
        for kind in &doc.page_reason_kinds {
            *self.pages_by_reason.entry(kind.clone()).or_default() += 1;
        }
        layer
    }

    /// The console's line (none before a page is written).
    ///
    /// ```
    /// use rayorch_doc::document::{Document, PageTally};
    /// use rayorch_models::PageText;
    /// use rayorch_models::pdf::text::{TextSource, Verdict};
    /// let page = |source, verdict| PageText { text: "a".into(), source, verdict };
    /// let pages = vec![page(TextSource::Layer, Verdict::Trusted), page(TextSource::Ocr, Verdict::NoLayer)];
    /// let mut tally = PageTally::default();
    /// assert_eq!(tally.add(&Document::assemble("a.pdf", pages, vec![])), 1);
    /// assert_eq!(
    ///     tally.line().as_deref(),
    ///     Some("pages: 1 from the text layer, 1 OCR'd; by reason: no_layer 1, trusted 1")
    /// );
    /// ```
    pub fn line(&self) -> Option<String> {
        let why: Vec<String> = self
            .pages_by_reason
            .iter()
            .map(|(k, n)| format!("{k} {n}"))
            .collect();
        (self.pages_written > 0).then(|| {
            format!(
                "pages: {} from the text layer, {} OCR'd; by reason: {}",
                self.pages_from_layer,
                self.pages_ocr,
                why.join(", ")
            )
        })
    }
}

/// How a source is spelled in the records (`layer`, `ocr`).
fn source_name(s: TextSource) -> &'static str {
    match s {
        TextSource::Layer => "layer",
        TextSource::Ocr => "ocr",
    }
}

fn source_named(s: &str) -> Option<TextSource> {
    match s {
        "layer" => Some(TextSource::Layer),
        "ocr" => Some(TextSource::Ocr),
        _ => None,
    }
}

/// The Parquet schema for embeddings of width `dim`:
/// `key u64, name utf8, pages u32, markdown utf8, page_texts list<utf8>,
/// page_embeddings list<fixed_size_list<f32, dim>>, page_sources
/// list<utf8>, page_reasons list<utf8>, page_reason_kinds list<utf8>`.
pub fn document_schema(dim: usize) -> SchemaRef {
    let item = col::item;
    Arc::new(Schema::new(vec![
        Field::new("key", DataType::UInt64, false),
        Field::new("name", DataType::Utf8, false),
        Field::new("pages", DataType::UInt32, false),
        Field::new("markdown", DataType::Utf8, false),
        Field::new("page_texts", DataType::List(item(DataType::Utf8)), false),
        Field::new(
            "page_embeddings",
            DataType::List(item(DataType::FixedSizeList(item(DataType::Float32), dim as i32))),
            false,
        ),
        Field::new("page_sources", DataType::List(item(DataType::Utf8)), false),
        Field::new("page_reasons", DataType::List(item(DataType::Utf8)), false),
        Field::new("page_reason_kinds", DataType::List(item(DataType::Utf8)), false),
        Field::new("metadata", DataType::Utf8, true),
    ]))
}

/// Documents as Parquet rows `(key, document)`, embeddings `dim` wide.
#[derive(Clone, Copy, Debug)]
pub struct DocumentRows {
    /// The embedding width.
    pub dim: usize,
}

impl Rows for DocumentRows {
    type Row = (u64, Document);

    fn schema(&self) -> SchemaRef {
        document_schema(self.dim)
    }

    fn columns(&self, rows: &[(u64, Document)]) -> Result<Vec<ArrayRef>, String> {
        let embeddings = col::vectors(rows, self.dim, |(_, d)| &d.page_embeddings).map_err(|i| {
            let d = &rows[i].1;
            let w = d
                .page_embeddings
                .iter()
                .find(|e| e.len() != self.dim)
                .map_or(0, Vec::len);
            format!(
                "document {} has an embedding of width {w}, the file holds width {}",
                d.name, self.dim
            )
        })?;
        Ok(vec![
            col::u64(rows, |(k, _)| *k),
            col::string(rows, |(_, d)| &d.name),
            col::u32(rows, |(_, d)| d.pages as u32),
            col::string(rows, |(_, d)| &d.markdown),
            col::strings(rows, |(_, d)| &d.page_texts),
            embeddings,
            col::strings(rows, |(_, d)| d.page_sources.iter().map(|&s| source_name(s))),
            col::strings(rows, |(_, d)| &d.page_reasons),
            col::strings(rows, |(_, d)| &d.page_reason_kinds),
            col::opt_string(rows, |(_, d)| d.metadata.as_ref().map(|m| m.to_string())),
        ])
    }
}

/// Read a file or a folder of segments written with [`DocumentRows`]: its
/// schema and `(key, document)` rows.
pub fn read_documents(path: &Path) -> Result<(SchemaRef, Vec<(u64, Document)>), OutputError> {
    let (schema, batches) = read_batches(path)?;
    let bad = |what: &str| OutputError {
        path: path.to_path_buf(),
        cause: format!("column {what} has an unexpected type"),
    };
    let mut out = Vec::new();
    for batch in batches {
        let col = |i: usize| batch.column(i).as_any();
        let keys = col(0).downcast_ref::<UInt64Array>().ok_or_else(|| bad("key"))?;
        let names = col(1).downcast_ref::<StringArray>().ok_or_else(|| bad("name"))?;
        let pages = col(2).downcast_ref::<UInt32Array>().ok_or_else(|| bad("pages"))?;
        let md = col(3)
            .downcast_ref::<StringArray>()
            .ok_or_else(|| bad("markdown"))?;
        let texts = col(4)
            .downcast_ref::<ListArray>()
            .ok_or_else(|| bad("page_texts"))?;
        let embs = col(5)
            .downcast_ref::<ListArray>()
            .ok_or_else(|| bad("page_embeddings"))?;
        let sources = col(6)
            .downcast_ref::<ListArray>()
            .ok_or_else(|| bad("page_sources"))?;
        let reasons = col(7)
            .downcast_ref::<ListArray>()
            .ok_or_else(|| bad("page_reasons"))?;
        // Columns later versions added; files written before lack them.
        let later = |i: usize| (batch.num_columns() > i).then(|| col(i));
        let kinds = later(8)
            .map(|c| {
                c.downcast_ref::<ListArray>()
                    .ok_or_else(|| bad("page_reason_kinds"))
            })
            .transpose()?;
        let metadata = later(9)
            .map(|c| c.downcast_ref::<StringArray>().ok_or_else(|| bad("metadata")))
            .transpose()?;
        let strings = |list: &ListArray, r: usize, what: &str| -> Result<Vec<String>, OutputError> {
            let v = list.value(r);
            let v = v
                .as_any()
                .downcast_ref::<StringArray>()
                .ok_or_else(|| bad(what))?;
            Ok((0..v.len()).map(|i| v.value(i).to_string()).collect())
        };
        for r in 0..batch.num_rows() {
            let page_sources = strings(sources, r, "page_sources")?
                .iter()
                .map(|s| source_named(s))
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| bad("page_sources"))?;
            let e = embs.value(r);
            let e = e
                .as_any()
                .downcast_ref::<FixedSizeListArray>()
                .ok_or_else(|| bad("page_embeddings"))?;
            let mut page_embeddings = Vec::with_capacity(e.len());
            for p in 0..e.len() {
                let v = e.value(p);
                let v = v
                    .as_any()
                    .downcast_ref::<Float32Array>()
                    .ok_or_else(|| bad("page_embeddings"))?;
                page_embeddings.push(v.values().to_vec());
            }
            out.push((
                keys.value(r),
                Document {
                    name: names.value(r).to_string(),
                    pages: pages.value(r) as usize,
                    markdown: md.value(r).to_string(),
                    page_texts: strings(texts, r, "page_texts")?,
                    page_embeddings,
                    page_sources,
                    page_reasons: strings(reasons, r, "page_reasons")?,
                    page_reason_kinds: match kinds {
                        Some(k) => strings(k, r, "page_reason_kinds")?,
                        None => Vec::new(),
                    },
                    metadata: match metadata {
                        Some(m) if m.is_valid(r) => Some(
                            serde_json::from_str(m.value(r)).map_err(|e| bad(&format!("metadata ({e})")))?,
                        ),
                        _ => None,
                    },
                },
            ));
        }
    }
    Ok((schema.unwrap_or_else(|| document_schema(0)), out))
}

#[cfg(feature = "dist")]
mod wire {
    use rayorch_models::wire::{Reader, Wire, put_u64};

    use rayorch_models::pdf::text::TextSource;

    use super::Document;

    impl Wire for Document {
        const TAG: &'static str = "document";
        fn put(&self, out: &mut Vec<u8>) {
            self.name.put(out);
            put_u64(out, self.pages as u64);
            self.markdown.put(out);
            self.page_texts.put(out);
            self.page_embeddings.put(out);
            put_u64(out, self.page_sources.len() as u64);
            for &s in &self.page_sources {
                out.push(u8::from(s == TextSource::Layer));
            }
            self.page_reasons.put(out);
            self.page_reason_kinds.put(out);
        }
        fn get(r: &mut Reader<'_>) -> Result<Document, String> {
            Ok(Document {
                name: String::get(r)?,
                pages: r.u64("a page count")? as usize,
                markdown: String::get(r)?,
                page_texts: Vec::get(r)?,
                page_embeddings: Vec::get(r)?,
                page_sources: (0..r.len("page sources")?)
                    .map(|_| match r.u8("a page source")? {
                        0 => Ok(TextSource::Ocr),
                        1 => Ok(TextSource::Layer),
                        t => Err(format!("bad value: a page source of {t}, expected 0 or 1")),
                    })
                    .collect::<Result<_, _>>()?,
                page_reasons: Vec::get(r)?,
                page_reason_kinds: Vec::get(r)?,
                metadata: None,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use rayorch_kit::parquet::{ParquetFile, ParquetSegments};

    use rayorch_models::pdf::text::Verdict;

    use super::*;

    fn layer(text: &str) -> PageText {
        PageText {
            text: text.into(),
            source: TextSource::Layer,
            verdict: Verdict::Trusted,
        }
    }

    fn ocr(text: &str, verdict: Verdict) -> PageText {
        PageText {
            text: text.into(),
            source: TextSource::Ocr,
            verdict,
        }
    }

    fn docs() -> Vec<(u64, Document)> {
        vec![
            (
                3,
                Document::assemble(
                    "a.pdf",
                    vec![layer("one"), ocr("two", Verdict::SpacedOut { percent: 80 })],
                    vec![vec![0.5, 0.5], vec![1.0, 0.0]],
                ),
            ),
            (1, Document::assemble("empty.pdf", vec![], vec![])),
            (
                7,
                Document::assemble("b.pdf", vec![ocr("", Verdict::NoLayer)], vec![vec![0.0, 1.0]]),
            ),
        ]
    }

    #[test]
    fn documents_round_trip_through_parquet() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("documents.parquet");
        let mut w = ParquetFile::create(&path, DocumentRows { dim: 2 }, 2).unwrap();
        for d in docs() {
            w.write(d).unwrap();
        }
        w.close().unwrap();
        let (schema, back) = read_documents(&path).unwrap();
        assert_eq!(schema, document_schema(2));
        assert_eq!(back, docs());
        // A folder of segments reads back the same, in segment order.
        let seg = dir.path().join("segments");
        let mut s = ParquetSegments::open(&seg, DocumentRows { dim: 2 }, 8, true).unwrap();
        for (i, d) in docs().into_iter().enumerate() {
            s.write(d).unwrap();
            if i == 0 {
                s.sync(true).unwrap();
            }
        }
        s.close().unwrap();
        assert_eq!(read_documents(&seg).unwrap().1, docs());
    }

    #[test]
    fn a_wrong_embedding_width_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = ParquetFile::create(&dir.path().join("w.parquet"), DocumentRows { dim: 3 }, 1).unwrap();
        let err = w
            .write((0, Document::assemble("x.pdf", vec![layer("t")], vec![vec![1.0]])))
            .unwrap_err();
        assert!(
            err.to_string().contains("x.pdf has an embedding of width 1"),
            "{err}"
        );
    }
}
