//! The assembled document and its Parquet form.
//!
//! A [`Document`] is what the document-OCR job produces per PDF: the page
//! texts in page order, a Markdown rendering, and one sentence embedding per
//! page. [`ParquetWriter`] appends documents as they complete (one row each)
//! and flushes a row group every `rows_per_group` documents; the file is
//! readable once [`ParquetWriter::close`] has written the footer.
//!
//! [`ParquetSegments`] is the crash-safe form for journaled runs: a folder
//! of `part-NNNNN.parquet` files, one per journal commit that wrote rows.
//! A segment is closed (footer written, `fsync`ed) before the commit that
//! counts it, so the committed segment count is the folder's durable
//! position; a resume deletes the segments past it (the unclosed one a crash
//! left, and closed ones whose commit never happened). [`read_documents`]
//! reads a file or such a folder.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::builder::{FixedSizeListBuilder, Float32Builder, ListBuilder, StringBuilder};
use arrow_array::{
    Array, ArrayRef, FixedSizeListArray, Float32Array, ListArray, RecordBatch, StringArray, UInt32Array,
    UInt64Array,
};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use serde::{Deserialize, Serialize};

use crate::error::ModelError;

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
    /// use rayorch_models::output::Document;
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
    let item = |t: DataType| Arc::new(Field::new("item", t, true));
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

fn parquet_err(path: &Path) -> impl Fn(parquet::errors::ParquetError) -> ModelError + '_ {
    move |e| ModelError::model(format!("parquet {}", path.display()), e)
}

fn arrow_err(e: arrow_schema::ArrowError) -> ModelError {
    ModelError::model("arrow", e)
}

/// Streams documents into a Parquet file.
pub struct ParquetWriter {
    writer: ArrowWriter<File>,
    schema: SchemaRef,
    dim: usize,
    rows_per_group: usize,
    pending: Vec<(u64, Document)>,
    path: std::path::PathBuf,
}

impl ParquetWriter {
    /// Create (truncate) `path` for embeddings of width `dim`.
    pub fn create(path: &Path, dim: usize, rows_per_group: usize) -> Result<ParquetWriter, ModelError> {
        let file = File::create(path).map_err(ModelError::io(path))?;
        let schema = document_schema(dim);
        let props = parquet::file::properties::WriterProperties::builder()
            .set_compression(parquet::basic::Compression::SNAPPY)
            .build();
        let writer = ArrowWriter::try_new(file, schema.clone(), Some(props)).map_err(parquet_err(path))?;
        Ok(ParquetWriter {
            writer,
            schema,
            dim,
            rows_per_group: rows_per_group.max(1),
            pending: Vec::new(),
            path: path.to_path_buf(),
        })
    }

    /// Add one document; a row group is written every `rows_per_group` documents.
    pub fn write(&mut self, key: u64, doc: Document) -> Result<(), ModelError> {
        if let Some(e) = doc.page_embeddings.iter().find(|e| e.len() != self.dim) {
            return Err(ModelError::model(
                format!("parquet {}", self.path.display()),
                format!(
                    "document {} has an embedding of width {}, the file holds width {}",
                    doc.name,
                    e.len(),
                    self.dim
                ),
            ));
        }
        self.pending.push((key, doc));
        if self.pending.len() >= self.rows_per_group {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<(), ModelError> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let rows = std::mem::take(&mut self.pending);
        let mut texts = ListBuilder::new(StringBuilder::new());
        let mut embs = ListBuilder::new(FixedSizeListBuilder::new(Float32Builder::new(), self.dim as i32));
        for (_, d) in &rows {
            for t in &d.page_texts {
                texts.values().append_value(t);
            }
            texts.append(true);
            for e in &d.page_embeddings {
                embs.values().values().append_slice(e);
                embs.values().append(true);
            }
            embs.append(true);
        }
        let columns: Vec<ArrayRef> = vec![
            Arc::new(UInt64Array::from_iter_values(rows.iter().map(|(k, _)| *k))),
            Arc::new(StringArray::from_iter_values(rows.iter().map(|(_, d)| &d.name))),
            Arc::new(UInt32Array::from_iter_values(
                rows.iter().map(|(_, d)| d.pages as u32),
            )),
            Arc::new(StringArray::from_iter_values(
                rows.iter().map(|(_, d)| &d.markdown),
            )),
            Arc::new(texts.finish()),
            Arc::new(embs.finish()),
        ];
        let batch = RecordBatch::try_new(self.schema.clone(), columns).map_err(arrow_err)?;
        self.writer.write(&batch).map_err(parquet_err(&self.path))?;
        self.writer.flush().map_err(parquet_err(&self.path))?;
        Ok(())
    }

    /// Write what is pending and the footer.
    pub fn close(mut self) -> Result<(), ModelError> {
        self.flush()?;
        self.writer.close().map_err(parquet_err(&self.path))?;
        Ok(())
    }
}

/// A folder of Parquet segments that follows a run's journal (see the
/// module note): rows go to the open segment; [`ParquetSegments::sync`]
/// closes it and returns how many segments are complete.
pub struct ParquetSegments {
    dir: PathBuf,
    dim: usize,
    rows_per_group: usize,
    /// Complete segments (`part-00000` .. `part-{done-1}`).
    done: u64,
    open: Option<ParquetWriter>,
}

fn segment(dir: &Path, i: u64) -> PathBuf {
    dir.join(format!("part-{i:05}.parquet"))
}

/// The segment numbers in `dir`, ascending.
fn segments(dir: &Path) -> Result<Vec<u64>, ModelError> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(ModelError::io(dir))? {
        let name = entry.map_err(ModelError::io(dir))?.file_name();
        let name = name.to_string_lossy();
        if let Some(i) = name
            .strip_prefix("part-")
            .and_then(|n| n.strip_suffix(".parquet"))
            .and_then(|n| n.parse().ok())
        {
            found.push(i);
        }
    }
    found.sort_unstable();
    Ok(found)
}

impl ParquetSegments {
    /// Open the folder `dir` (created when missing; a plain file there is
    /// replaced), keeping its segments; `fresh`: delete them first.
    pub fn open(
        dir: &Path,
        dim: usize,
        rows_per_group: usize,
        fresh: bool,
    ) -> Result<ParquetSegments, ModelError> {
        if dir.is_file() {
            std::fs::remove_file(dir).map_err(ModelError::io(dir))?;
        }
        std::fs::create_dir_all(dir).map_err(ModelError::io(dir))?;
        let mut s = ParquetSegments {
            dir: dir.to_path_buf(),
            dim,
            rows_per_group,
            done: 0,
            open: None,
        };
        s.done = segments(dir)?.last().map_or(0, |i| i + 1);
        if fresh {
            s.truncate_to(0)?;
        }
        Ok(s)
    }

    /// Add one document to the open segment (opened on the first row).
    pub fn write(&mut self, key: u64, doc: Document) -> Result<(), ModelError> {
        if self.open.is_none() {
            let path = segment(&self.dir, self.done);
            self.open = Some(ParquetWriter::create(&path, self.dim, self.rows_per_group)?);
        }
        self.open.as_mut().map_or(Ok(()), |w| w.write(key, doc))
    }

    /// Close the open segment (footer, `fsync` of it and of the folder when
    /// `durable`) and return the number of complete segments.
    pub fn sync(&mut self, durable: bool) -> Result<u64, ModelError> {
        if let Some(w) = self.open.take() {
            let path = w.path.clone();
            w.close()?;
            if durable {
                File::open(&path)
                    .and_then(|f| f.sync_all())
                    .map_err(ModelError::io(&path))?;
                File::open(&self.dir)
                    .and_then(|f| f.sync_all())
                    .map_err(ModelError::io(&self.dir))?;
            }
            self.done += 1;
        }
        Ok(self.done)
    }

    /// Keep the first `n` segments; delete the others (and drop the open one).
    pub fn truncate_to(&mut self, n: u64) -> Result<(), ModelError> {
        self.open = None;
        let present = segments(&self.dir)?;
        if present.iter().filter(|&&i| i < n).count() as u64 != n {
            return Err(ModelError::model(
                format!("parquet {}", self.dir.display()),
                format!(
                    "the journal committed {n} segment(s) but some are missing: the folder was changed since; start the run over"
                ),
            ));
        }
        for i in present.into_iter().filter(|&i| i >= n) {
            let path = segment(&self.dir, i);
            std::fs::remove_file(&path).map_err(ModelError::io(&path))?;
        }
        self.done = n;
        Ok(())
    }

    /// Close the open segment (the run ended).
    pub fn close(&mut self) -> Result<(), ModelError> {
        self.sync(false).map(|_| ())
    }
}

/// Read a file written by [`ParquetWriter`], or a folder of
/// [`ParquetSegments`] (in segment order): its schema and `(key, document)` rows.
pub fn read_documents(path: &Path) -> Result<(SchemaRef, Vec<(u64, Document)>), ModelError> {
    if path.is_dir() {
        let mut rows = Vec::new();
        let mut schema = document_schema(0);
        for i in segments(path)? {
            let (s, r) = read_file(&segment(path, i))?;
            schema = s;
            rows.extend(r);
        }
        return Ok((schema, rows));
    }
    read_file(path)
}

fn read_file(path: &Path) -> Result<(SchemaRef, Vec<(u64, Document)>), ModelError> {
    let file = File::open(path).map_err(ModelError::io(path))?;
    let builder = ParquetRecordBatchReaderBuilder::try_new(file).map_err(parquet_err(path))?;
    let schema = builder.schema().clone();
    let reader = builder.build().map_err(parquet_err(path))?;
    let bad = |what: &str| {
        ModelError::model(
            format!("parquet {}", path.display()),
            format!("column {what} has an unexpected type"),
        )
    };
    let mut out = Vec::new();
    for batch in reader {
        let batch = batch.map_err(arrow_err)?;
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
    Ok((schema, out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documents_round_trip_through_parquet() {
        let path = std::env::temp_dir().join(format!("rayorch-output-{}.parquet", std::process::id()));
        let docs = vec![
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
        ];
        let mut w = ParquetWriter::create(&path, 2, 2).unwrap();
        for (k, d) in docs.clone() {
            w.write(k, d).unwrap();
        }
        w.close().unwrap();
        let (schema, back) = read_documents(&path).unwrap();
        assert_eq!(schema, document_schema(2));
        assert_eq!(back, docs);
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn a_wrong_embedding_width_is_refused() {
        let path = std::env::temp_dir().join(format!("rayorch-output-w-{}.parquet", std::process::id()));
        let mut w = ParquetWriter::create(&path, 3, 1).unwrap();
        let err = w
            .write(0, Document::assemble("x.pdf", vec!["t".into()], vec![vec![1.0]]))
            .unwrap_err();
        assert!(err.to_string().contains("width 1"), "{err}");
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn segments_keep_what_was_committed_and_drop_the_rest() {
        let dir = std::env::temp_dir().join(format!("rayorch-segments-{}", std::process::id()));
        let doc = |n: &str| Document::assemble(n, vec![n.into()], vec![vec![1.0, 0.0]]);
        let mut s = ParquetSegments::open(&dir, 2, 2, true).unwrap();
        assert_eq!(s.sync(true).unwrap(), 0, "no rows: no segment");
        s.write(0, doc("a")).unwrap();
        s.write(1, doc("b")).unwrap();
        assert_eq!(s.sync(true).unwrap(), 1);
        s.write(2, doc("c")).unwrap();
        assert_eq!(s.sync(true).unwrap(), 2);
        // Rows after the last commit: one closed segment, one left open.
        s.write(3, doc("d")).unwrap();
        s.sync(false).unwrap();
        s.write(4, doc("e")).unwrap();
        drop(s);
        let mut s = ParquetSegments::open(&dir, 2, 2, false).unwrap();
        s.truncate_to(2).unwrap();
        s.write(3, doc("d")).unwrap();
        s.close().unwrap();
        let (_, rows) = read_documents(&dir).unwrap();
        let keys: Vec<u64> = rows.iter().map(|(k, _)| *k).collect();
        assert_eq!(keys, vec![0, 1, 2, 3]);
        // A committed segment gone missing is an error, not a silent loss.
        std::fs::remove_file(segment(&dir, 0)).unwrap();
        assert!(
            ParquetSegments::open(&dir, 2, 2, false)
                .unwrap()
                .truncate_to(2)
                .is_err()
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
