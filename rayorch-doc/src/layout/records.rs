//! Per-region records of the layout job as Parquet rows: one row per region
//! (kind, box, text, source, confidence), appended as documents complete
//! (written with `rayorch_kit::parquet`).
//!
//! The schema is fixed (nullable `caption_of` and `table_html`).

use std::sync::Arc;

use arrow_array::ArrayRef;
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use rayorch_kit::parquet::{Rows, col};
use rayorch_models::layout::markdown::RegionResult;

fn label<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_value(v)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

/// Region rows: `doc, page, order, index, kind, x0, y0, x1, y1, text,
/// source, confidence, layout_score, caption_of?, table_html?`.
#[derive(Clone, Copy, Debug, Default)]
pub struct RegionRows;

impl Rows for RegionRows {
    type Row = RegionResult;

    fn schema(&self) -> SchemaRef {
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

    fn columns(&self, rows: &[RegionResult]) -> Result<Vec<ArrayRef>, String> {
        Ok(vec![
            col::string(rows, |r| &r.doc),
            col::u32(rows, |r| r.page as u32),
            col::u32(rows, |r| r.order as u32),
            col::u32(rows, |r| r.index as u32),
            col::owned_string(rows, |r| label(&r.kind)),
            col::u32(rows, |r| r.bbox[0]),
            col::u32(rows, |r| r.bbox[1]),
            col::u32(rows, |r| r.bbox[2]),
            col::u32(rows, |r| r.bbox[3]),
            col::string(rows, |r| &r.text),
            col::owned_string(rows, |r| label(&r.source)),
            col::f32(rows, |r| r.confidence),
            col::f32(rows, |r| r.layout_score),
            col::opt_u32(rows, |r| r.caption_of.map(|c| c as u32)),
            col::opt_string(rows, |r| r.table.as_ref().map(|t| t.to_html())),
        ])
    }
}

#[cfg(test)]
mod tests {
    use arrow_array::{Array, StringArray, UInt32Array};
    use rayorch_kit::parquet::{ParquetFile, read_batches};
    use rayorch_models::{RegionKind, TextSource};

    use super::*;

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
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("regions.parquet");
        let mut w = ParquetFile::create(&path, RegionRows, 2).unwrap();
        for row in [
            r(0, RegionKind::Figure, None),
            r(1, RegionKind::FigureCaption, Some(0)),
            r(2, RegionKind::Text, None),
        ] {
            w.write(row).unwrap();
        }
        w.close().unwrap();
        let (_, batches) = read_batches(&path).unwrap();
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
    }
}
