//! `videos.parquet`: one row per video, appended as each video completes.
//!
//! Columns: `key u64, name utf8, duration_s f64, fps f64, frames u32,
//! max_nsfw f32, mean_nsfw f32, transcript utf8, clip_start_s list<f64>,
//! clip_end_s list<f64>, clip_max_nsfw list<f32>, shot_start_s list<f64>,
//! embedding fixed_size_list<f32, 1024>`. The full record (clip embeddings,
//! probe facts) is in `videos.jsonl`. A row group is flushed every
//! `rows_per_group` videos; the file is readable once [`VideoParquet::close`]
//! has written the footer.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::builder::{FixedSizeListBuilder, Float32Builder, Float64Builder, ListBuilder};
use arrow_array::{ArrayRef, Float32Array, Float64Array, RecordBatch, StringArray, UInt32Array, UInt64Array};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

use crate::merge::VideoRecord;
use crate::nsfw::EMBED_DIM;

/// The schema of `videos.parquet`.
pub fn video_schema() -> SchemaRef {
    let item = |t: DataType| Arc::new(Field::new("item", t, true));
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
    ]))
}

/// Why an output file could not be written or read.
#[derive(Debug, thiserror::Error)]
#[error("{path}: {cause}")]
pub struct OutputError {
    /// The file.
    pub path: PathBuf,
    /// What went wrong.
    pub cause: String,
}

/// Streams video records into a Parquet file.
pub struct VideoParquet {
    writer: ArrowWriter<File>,
    schema: SchemaRef,
    rows_per_group: usize,
    pending: Vec<(u64, VideoRecord)>,
    path: PathBuf,
}

impl VideoParquet {
    /// Create (truncate) `path`.
    pub fn create(path: &Path, rows_per_group: usize) -> Result<VideoParquet, OutputError> {
        let err = |e: String| OutputError {
            path: path.to_path_buf(),
            cause: e,
        };
        let file = File::create(path).map_err(|e| err(e.to_string()))?;
        let schema = video_schema();
        let props = parquet::file::properties::WriterProperties::builder()
            .set_compression(parquet::basic::Compression::SNAPPY)
            .build();
        let writer =
            ArrowWriter::try_new(file, schema.clone(), Some(props)).map_err(|e| err(e.to_string()))?;
        Ok(VideoParquet {
            writer,
            schema,
            rows_per_group: rows_per_group.max(1),
            pending: Vec::new(),
            path: path.to_path_buf(),
        })
    }

    fn err(&self, e: impl ToString) -> OutputError {
        OutputError {
            path: self.path.clone(),
            cause: e.to_string(),
        }
    }

    /// Add one video.
    pub fn write(&mut self, key: u64, v: VideoRecord) -> Result<(), OutputError> {
        if !v.embedding.is_empty() && v.embedding.len() != EMBED_DIM {
            return Err(self.err(format!(
                "video {} has an embedding of width {}, the file holds {EMBED_DIM}",
                v.name,
                v.embedding.len()
            )));
        }
        self.pending.push((key, v));
        if self.pending.len() >= self.rows_per_group {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<(), OutputError> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let rows = std::mem::take(&mut self.pending);
        let f64_list = |f: &dyn Fn(&VideoRecord) -> Vec<f64>| {
            let mut b = ListBuilder::new(Float64Builder::new());
            for (_, v) in &rows {
                b.values().append_slice(&f(v));
                b.append(true);
            }
            Arc::new(b.finish()) as ArrayRef
        };
        let mut max = ListBuilder::new(Float32Builder::new());
        let mut emb = FixedSizeListBuilder::new(Float32Builder::new(), EMBED_DIM as i32);
        for (_, v) in &rows {
            max.values()
                .append_slice(&v.clips.iter().map(|c| c.max_nsfw).collect::<Vec<_>>());
            max.append(true);
            if v.embedding.len() == EMBED_DIM {
                emb.values().append_slice(&v.embedding);
            } else {
                emb.values().append_slice(&[0.0; EMBED_DIM]);
            }
            emb.append(true);
        }
        let columns: Vec<ArrayRef> = vec![
            Arc::new(UInt64Array::from_iter_values(rows.iter().map(|(k, _)| *k))),
            Arc::new(StringArray::from_iter_values(rows.iter().map(|(_, v)| &v.name))),
            Arc::new(Float64Array::from_iter_values(
                rows.iter().map(|(_, v)| v.info.duration_s),
            )),
            Arc::new(Float64Array::from_iter_values(
                rows.iter().map(|(_, v)| v.info.fps),
            )),
            Arc::new(UInt32Array::from_iter_values(
                rows.iter().map(|(_, v)| v.frames as u32),
            )),
            Arc::new(Float32Array::from_iter_values(
                rows.iter().map(|(_, v)| v.max_nsfw),
            )),
            Arc::new(Float32Array::from_iter_values(
                rows.iter().map(|(_, v)| v.mean_nsfw),
            )),
            Arc::new(StringArray::from_iter_values(
                rows.iter().map(|(_, v)| &v.transcript),
            )),
            f64_list(&|v| v.clips.iter().map(|c| c.start_s).collect()),
            f64_list(&|v| v.clips.iter().map(|c| c.end_s).collect()),
            Arc::new(max.finish()),
            f64_list(&|v| v.shots.iter().map(|s| s.start_s).collect()),
            Arc::new(emb.finish()),
        ];
        let batch = RecordBatch::try_new(self.schema.clone(), columns).map_err(|e| self.err(e))?;
        self.writer.write(&batch).map_err(|e| self.err(e))?;
        self.writer.flush().map_err(|e| self.err(e))?;
        Ok(())
    }

    /// Write what is pending and the footer.
    pub fn close(mut self) -> Result<(), OutputError> {
        self.flush()?;
        let path = self.path.clone();
        self.writer.close().map_err(|e| OutputError {
            path,
            cause: e.to_string(),
        })?;
        Ok(())
    }
}

/// Read back `(key, name, frames)` of every row (for checks and tests).
pub fn read_rows(path: &Path) -> Result<Vec<(u64, String, u32)>, OutputError> {
    let err = |e: String| OutputError {
        path: path.to_path_buf(),
        cause: e,
    };
    let file = File::open(path).map_err(|e| err(e.to_string()))?;
    let reader = ParquetRecordBatchReaderBuilder::try_new(file)
        .and_then(|b| b.build())
        .map_err(|e| err(e.to_string()))?;
    let mut out = Vec::new();
    for batch in reader {
        let batch = batch.map_err(|e| err(e.to_string()))?;
        let bad = || err("unexpected column types".into());
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
