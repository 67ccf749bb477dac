//! `videos.parquet`: one row per video ([`VideoRows`], written with
//! `rayorch_kit::parquet`), appended as each video completes.
//!
//! Columns: `key u64, name utf8, duration_s f64, fps f64, frames u32,
//! max_nsfw f32, mean_nsfw f32, transcript utf8, clip_start_s list<f64>,
//! clip_end_s list<f64>, clip_max_nsfw list<f32>, shot_start_s list<f64>,
//! embedding fixed_size_list<f32, 1024>, metadata utf8 (nullable: the
//! video's `--input-list` fields as JSON text, as `documents.parquet`
//! has them)`. The full record (clip embeddings, probe facts) is in
//! `videos.jsonl`.

use std::path::Path;
use std::sync::Arc;

use arrow_array::{Array, ArrayRef, StringArray, UInt32Array, UInt64Array};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use rayorch_kit::names::Meta;
use rayorch_kit::parquet::{OutputError, Rows, col, read_batches};

use crate::merge::VideoRecord;
use crate::nsfw::EMBED_DIM;

/// The schema of `videos.parquet`.
pub fn video_schema() -> SchemaRef {
    let item = col::item;
    let list = |n: &str, t: DataType| Field::new(n, DataType::List(item(t)), false);
    Arc::new(Schema::new(vec![
        Field::new("key", DataType::UInt64, false),
        Field::new("name", DataType::Utf8, false),
        Field::new("duration_s", DataType::Float64, false),
        Field::new("fps", DataType::Float64, false),
        Field::new("frames", DataType::UInt32, false),
        Field::new("max_nsfw", DataType::Float32, false),
        Field::new("mean_nsfw", DataType::Float32, false),
        Field::new("transcript", DataType::Utf8, false),
        list("clip_start_s", DataType::Float64),
        list("clip_end_s", DataType::Float64),
        list("clip_max_nsfw", DataType::Float32),
        list("shot_start_s", DataType::Float64),
        Field::new(
            "embedding",
            DataType::FixedSizeList(item(DataType::Float32), EMBED_DIM as i32),
            false,
        ),
        Field::new("metadata", DataType::Utf8, true),
    ]))
}

/// Video records as Parquet rows `(key, record, metadata)`.
#[derive(Clone, Copy, Debug, Default)]
pub struct VideoRows;

/// A video without frames has no embedding: its row holds zeros.
static NO_EMBEDDING: [f32; EMBED_DIM] = [0.0; EMBED_DIM];

impl Rows for VideoRows {
    type Row = (u64, VideoRecord, Option<Meta>);

    fn schema(&self) -> SchemaRef {
        video_schema()
    }

    fn columns(&self, rows: &[Self::Row]) -> Result<Vec<ArrayRef>, String> {
        let embedding = col::vector(rows, EMBED_DIM, |(_, v, _)| {
            if v.embedding.is_empty() {
                &NO_EMBEDDING[..]
            } else {
                &v.embedding[..]
            }
        })
        .map_err(|i| {
            let v = &rows[i].1;
            format!(
                "video {} has an embedding of width {}, the file holds {EMBED_DIM}",
                v.name,
                v.embedding.len()
            )
        })?;
        Ok(vec![
            col::u64(rows, |(k, _, _)| *k),
            col::string(rows, |(_, v, _)| &v.name),
            col::f64(rows, |(_, v, _)| v.info.duration_s),
            col::f64(rows, |(_, v, _)| v.info.fps),
            col::u32(rows, |(_, v, _)| v.frames as u32),
            col::f32(rows, |(_, v, _)| v.max_nsfw),
            col::f32(rows, |(_, v, _)| v.mean_nsfw),
            col::string(rows, |(_, v, _)| &v.transcript),
            col::f64s(rows, |(_, v, _)| v.clips.iter().map(|c| c.start_s).collect()),
            col::f64s(rows, |(_, v, _)| v.clips.iter().map(|c| c.end_s).collect()),
            col::f32s(rows, |(_, v, _)| v.clips.iter().map(|c| c.max_nsfw).collect()),
            col::f64s(rows, |(_, v, _)| v.shots.iter().map(|s| s.start_s).collect()),
            embedding,
            col::opt_string(rows, |(_, _, m)| m.as_ref().map(|m| m.to_string())),
        ])
    }
}

/// Read back `(key, name, frames)` of every row (for checks and tests).
pub fn read_rows(path: &Path) -> Result<Vec<(u64, String, u32)>, OutputError> {
    let (_, batches) = read_batches(path)?;
    let bad = || OutputError {
        path: path.to_path_buf(),
        cause: "unexpected column types".into(),
    };
    let mut out = Vec::new();
    for batch in batches {
        let keys = batch
            .column(0)
            .as_any()
            .downcast_ref::<UInt64Array>()
            .ok_or_else(bad)?;
        let names = batch
            .column(1)
            .as_any()
            .downcast_ref::<StringArray>()
            .ok_or_else(bad)?;
        let frames = batch
            .column(4)
            .as_any()
            .downcast_ref::<UInt32Array>()
            .ok_or_else(bad)?;
        for r in 0..batch.num_rows() {
            out.push((keys.value(r), names.value(r).to_string(), frames.value(r)));
        }
    }
    Ok(out)
}
