//! The OCR job's record: one [`Document`] per PDF, and its Parquet row
//! schema ([`DocumentRows`]).
//!
//! A [`Document`] holds the page texts in page order, a Markdown rendering,
//! and one sentence embedding per page. As Parquet (one row per document,
//! written with `rayorch_kit::parquet`): `key u64, name utf8, pages u32,
//! markdown utf8, page_texts list<utf8>, page_embeddings
//! list<fixed_size_list<f32, dim>>`; [`read_documents`] reads a file or a
//! segments folder back.

use std::path::Path;
use std::sync::Arc;

use arrow_array::{
    Array, ArrayRef, FixedSizeListArray, Float32Array, ListArray, StringArray, UInt32Array, UInt64Array,
};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use rayorch_kit::parquet::{OutputError, Rows, col, read_batches};
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
    /// Each page's sentence embedding, in page order.
    pub page_embeddings: Vec<Vec<f32>>,
}

impl Document {
    /// Assemble a document from its page texts and embeddings.
    ///
    /// ```
    /// use rayorch_doc::Document;
    /// let d = Document::assemble("a.pdf", vec!["Hello".into()], vec![vec![1.0, 0.0]]);
    /// assert_eq!(d.markdown, "# a.pdf\n\n## Page 1\n\nHello\n");
    /// ```
    pub fn assemble(name: &str, page_texts: Vec<String>, page_embeddings: Vec<Vec<f32>>) -> Document {
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
        }
    }
}

/// The Parquet schema for embeddings of width `dim`:
/// `key u64, name utf8, pages u32, markdown utf8, page_texts list<utf8>,
/// page_embeddings list<fixed_size_list<f32, dim>>`.
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
        for r in 0..batch.num_rows() {
            let t = texts.value(r);
            let t = t
                .as_any()
                .downcast_ref::<StringArray>()
                .ok_or_else(|| bad("page_texts"))?;
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
                    page_texts: (0..t.len()).map(|i| t.value(i).to_string()).collect(),
                    page_embeddings,
                },
            ));
        }
    }
    Ok((schema.unwrap_or_else(|| document_schema(0)), out))
}

mod wire {
    use rayorch_models::wire::{Reader, Wire, put_u64};

    use super::Document;

    impl Wire for Document {
        const TAG: &'static str = "document";
        fn put(&self, out: &mut Vec<u8>) {
            self.name.put(out);
            put_u64(out, self.pages as u64);
            self.markdown.put(out);
            self.page_texts.put(out);
            self.page_embeddings.put(out);
        }
        fn get(r: &mut Reader<'_>) -> Result<Document, String> {
            Ok(Document {
                name: String::get(r)?,
                pages: r.u64("a page count")? as usize,
                markdown: String::get(r)?,
                page_texts: Vec::get(r)?,
                page_embeddings: Vec::get(r)?,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use rayorch_kit::parquet::{ParquetFile, ParquetSegments};

    use super::*;

    fn docs() -> Vec<(u64, Document)> {
        vec![
            (
                3,
                Document::assemble(
                    "a.pdf",
                    vec!["one".into(), "two".into()],
                    vec![vec![0.5, 0.5], vec![1.0, 0.0]],
                ),
            ),
            (1, Document::assemble("empty.pdf", vec![], vec![])),
            (
                7,
                Document::assemble("b.pdf", vec![String::new()], vec![vec![0.0, 1.0]]),
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
            .write((0, Document::assemble("x.pdf", vec!["t".into()], vec![vec![1.0]])))
            .unwrap_err();
        assert!(
            err.to_string().contains("x.pdf has an embedding of width 1"),
            "{err}"
        );
    }

    #[test]
    fn documents_cross_the_wire_bit_for_bit() {
        use rayorch_models::wire::Wire;
        let doc = Document::assemble(
            "a.pdf",
            vec!["Hé".into(), "".into()],
            vec![vec![0.25, 1e-9], vec![]],
        );
        assert_eq!(Document::from_wire(&doc.to_wire()).unwrap(), doc);
    }
}
