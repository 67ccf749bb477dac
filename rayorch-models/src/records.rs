//! Per-region records of the layout job, as Parquet: one row per region
//! (kind, box, text, source, confidence), appended as documents complete.
//!
//! Invariants: a row group is flushed every `rows_per_group` rows; the file
//! is readable once [`RegionParquet::close`] has written the footer; the
//! schema is fixed (nullable `caption_of` and `table_html`).

use std::fs::File;
use std::path::Path;
use std::sync::Arc;

use arrow_array::builder::{Float32Builder, StringBuilder, UInt32Builder};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use parquet::arrow::ArrowWriter;

use crate::error::ModelError;
use crate::markdown::RegionResult;

fn label<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_value(v)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

/// Appends region rows to a Parquet file.
pub struct RegionParquet {
    writer: ArrowWriter<File>,
    schema: SchemaRef,
    pending: Vec<RegionResult>,
    rows_per_group: usize,
    path: String,
}

impl RegionParquet {
    /// The schema of a region row.
    pub fn schema() -> SchemaRef {
        let u = |n: &str| Field::new(n, DataType::UInt32, false);
        Arc::new(Schema::new(vec![
            Field::new("doc", DataType::Utf8, false),
            u("page"),
            u("order"),
            u("index"),
            Field::new("kind", DataType::Utf8, false),
            u("x0"),
            u("y0"),
            u("x1"),
            u("y1"),
            Field::new("text", DataType::Utf8, false),
            Field::new("source", DataType::Utf8, false),
            Field::new("confidence", DataType::Float32, false),
            Field::new("layout_score", DataType::Float32, false),
            Field::new("caption_of", DataType::UInt32, true),
            Field::new("table_html", DataType::Utf8, true),
        ]))
    }

    /// Create (or replace) the file at `path`.
    pub fn create(path: &Path, rows_per_group: usize) -> Result<RegionParquet, ModelError> {
        let file = File::create(path).map_err(ModelError::io(path))?;
        let schema = RegionParquet::schema();
        let writer = ArrowWriter::try_new(file, schema.clone(), None)
            .map_err(|e| ModelError::model(path.display().to_string(), e))?;
        Ok(RegionParquet {
            writer,
            schema,
            pending: Vec::new(),
            rows_per_group: rows_per_group.max(1),
            path: path.display().to_string(),
        })
    }

    /// Append rows (flushing a row group when enough are pending).
    pub fn write(&mut self, regions: &[RegionResult]) -> Result<(), ModelError> {
        self.pending.extend_from_slice(regions);
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
        let s = |f: &dyn Fn(&RegionResult) -> String| {
            let mut b = StringBuilder::new();
            rows.iter().for_each(|r| b.append_value(f(r)));
            Arc::new(b.finish()) as ArrayRef
        };
        let n = |f: &dyn Fn(&RegionResult) -> u32| {
            let mut b = UInt32Builder::new();
            rows.iter().for_each(|r| b.append_value(f(r)));
            Arc::new(b.finish()) as ArrayRef
        };
        let fl = |f: &dyn Fn(&RegionResult) -> f32| {
            let mut b = Float32Builder::new();
            rows.iter().for_each(|r| b.append_value(f(r)));
            Arc::new(b.finish()) as ArrayRef
        };
        let mut caption = UInt32Builder::new();
        let mut html = StringBuilder::new();
        for r in &rows {
            caption.append_option(r.caption_of.map(|c| c as u32));
            html.append_option(r.table.as_ref().map(|t| t.to_html()));
        }
        let columns: Vec<ArrayRef> = vec![
            s(&|r| r.doc.clone()),
            n(&|r| r.page as u32),
            n(&|r| r.order as u32),
            n(&|r| r.index as u32),
            s(&|r| label(&r.kind)),
            n(&|r| r.bbox[0]),
            n(&|r| r.bbox[1]),
            n(&|r| r.bbox[2]),
            n(&|r| r.bbox[3]),
            s(&|r| r.text.clone()),
            s(&|r| label(&r.source)),
            fl(&|r| r.confidence),
            fl(&|r| r.layout_score),
            Arc::new(caption.finish()),
            Arc::new(html.finish()),
        ];
        let batch = RecordBatch::try_new(self.schema.clone(), columns)
            .map_err(|e| ModelError::model(self.path.clone(), e))?;
        self.writer
            .write(&batch)
            .and_then(|_| self.writer.flush())
            .map_err(|e| ModelError::model(self.path.clone(), e))
    }

    /// Write what is pending and the footer.
    pub fn close(mut self) -> Result<(), ModelError> {
        self.flush()?;
        self.writer
            .close()
            .map(|_| ())
            .map_err(|e| ModelError::model(self.path.clone(), e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::{RegionKind, TextSource};
    use arrow_array::{Array, StringArray, UInt32Array};
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

    #[test]
    fn rows_round_trip_through_parquet() {
        let r = |index: usize, kind, caption_of| RegionResult {
            doc: "a.pdf".into(),
            page: 1,
            index,
            order: index,
            kind,
            bbox: [1, 2, 3, 4],
            text: format!("text {index}"),
            source: TextSource::Layer,
            confidence: 1.0,
            layout_score: 0.8,
            caption_of,
            table: None,
        };
        let path = std::env::temp_dir().join(format!("rayorch-regions-{}.parquet", std::process::id()));
        let mut w = RegionParquet::create(&path, 2).unwrap();
        w.write(&[
            r(0, RegionKind::Figure, None),
            r(1, RegionKind::FigureCaption, Some(0)),
        ])
        .unwrap();
        w.write(&[r(2, RegionKind::Text, None)]).unwrap();
        w.close().unwrap();
        let reader = ParquetRecordBatchReaderBuilder::try_new(File::open(&path).unwrap())
            .unwrap()
            .build()
            .unwrap();
        let batches: Vec<RecordBatch> = reader.map(Result::unwrap).collect();
        let rows: usize = batches.iter().map(|b| b.num_rows()).sum();
        assert_eq!(rows, 3);
        let kinds = batches[0]
            .column(4)
            .as_any()
            .downcast_ref::<StringArray>()
            .unwrap();
        assert_eq!(kinds.value(1), "figure_caption");
        let cap = batches[0]
            .column(13)
            .as_any()
            .downcast_ref::<UInt32Array>()
            .unwrap();
        assert!(cap.is_null(0));
        assert_eq!(cap.value(1), 0);
        std::fs::remove_file(&path).unwrap();
    }
}
