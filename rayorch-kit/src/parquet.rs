//! Parquet outputs over a row schema: one writer for every job's records.
//!
//! A job describes its rows once ([`Rows`]: the Arrow schema, and how a slice
//! of rows becomes its columns, with the [`col`] helpers); [`ParquetFile`]
//! streams rows into one file, [`ParquetSegments`] into the crash-safe form
//! a journaled run needs.
//!
//! Invariants:
//! - A row group is written every `rows_per_group` rows; a file is readable
//!   once its footer is written ([`ParquetFile::close`]).
//! - [`ParquetSegments`] is a folder of `part-NNNNN.parquet` files, one per
//!   journal commit that wrote rows. A segment is closed (footer written,
//!   `fsync`ed) before the commit that counts it, so the committed segment
//!   count is the folder's durable position; a resume deletes the segments
//!   past it (the unclosed one a crash left, and closed ones whose commit
//!   never happened). Readers that take only `part-*` files in the count
//!   the journal holds see only committed rows; [`read_batches`] reads a
//!   file or such a folder in segment order.
//! - A row the schema refuses ([`Rows::columns`] returns `Err`) is an
//!   [`OutputError`] naming the file and the row; nothing of its batch is
//!   written.

use std::fs::File;
use std::path::{Path, PathBuf};

use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use rayorch::BoxError;
use rayorch::RootOutcome;
use rayorch::sink::Sink;

/// Why an output file could not be written or read.
#[derive(Debug, thiserror::Error)]
#[error("{path}: {cause}")]
pub struct OutputError {
    /// The file or folder.
    pub path: PathBuf,
    /// What went wrong.
    pub cause: String,
}

impl OutputError {
    fn at(path: &Path) -> impl Fn(String) -> OutputError + '_ {
        move |cause| OutputError {
            path: path.to_path_buf(),
            cause,
        }
    }
}

/// A row schema: the Arrow schema of a job's records and how rows become
/// its columns.
pub trait Rows: Send {
    /// One record.
    type Row: Send;
    /// The schema every file of these rows has.
    fn schema(&self) -> SchemaRef;
    /// The columns of `rows`, in schema order; `Err` names a row the schema
    /// cannot hold (and why).
    fn columns(&self, rows: &[Self::Row]) -> Result<Vec<arrow_array::ArrayRef>, String>;
}

/// Streams rows into one Parquet file (Snappy): on disk, or in memory
/// ([`ParquetFile::in_memory`]) for an object written whole.
pub struct ParquetFile<R: Rows, W: std::io::Write + Send = File> {
    writer: ArrowWriter<W>,
    rows: R,
    schema: SchemaRef,
    rows_per_group: usize,
    pending: Vec<R::Row>,
    path: PathBuf,
}

impl<R: Rows> ParquetFile<R> {
    /// Create (truncate) `path`.
    pub fn create(path: &Path, rows: R, rows_per_group: usize) -> Result<ParquetFile<R>, OutputError> {
        let file = File::create(path).map_err(|e| OutputError::at(path)(e.to_string()))?;
        ParquetFile::over(file, path, rows, rows_per_group)
    }
}

impl<R: Rows> ParquetFile<R, Vec<u8>> {
    /// A file built in memory; `name` names it in errors.
    pub fn in_memory(
        name: &str,
        rows: R,
        rows_per_group: usize,
    ) -> Result<ParquetFile<R, Vec<u8>>, OutputError> {
        ParquetFile::over(Vec::new(), Path::new(name), rows, rows_per_group)
    }

    /// Bytes written so far (row groups flushed; the footer not yet).
    pub fn bytes_so_far(&self) -> usize {
        self.writer.bytes_written()
    }

    /// Write what is pending and the footer; the whole file.
    pub fn into_bytes(mut self) -> Result<Vec<u8>, OutputError> {
        self.flush()?;
        let err = OutputError::at(&self.path);
        self.writer.into_inner().map_err(|e| err(e.to_string()))
    }
}

impl<R: Rows, W: std::io::Write + Send> ParquetFile<R, W> {
    fn over(sink: W, path: &Path, rows: R, rows_per_group: usize) -> Result<ParquetFile<R, W>, OutputError> {
        let err = OutputError::at(path);
        let file = sink;
        let schema = rows.schema();
        let props = parquet::file::properties::WriterProperties::builder()
            .set_compression(parquet::basic::Compression::SNAPPY)
            .build();
        let writer =
            ArrowWriter::try_new(file, schema.clone(), Some(props)).map_err(|e| err(e.to_string()))?;
        Ok(ParquetFile {
            writer,
            rows,
            schema,
            rows_per_group: rows_per_group.max(1),
            pending: Vec::new(),
            path: path.to_path_buf(),
        })
    }

    /// Add one row; a row group is written every `rows_per_group` rows.
    pub fn write(&mut self, row: R::Row) -> Result<(), OutputError> {
        self.pending.push(row);
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
        let err = OutputError::at(&self.path);
        let columns = self.rows.columns(&rows).map_err(&err)?;
        let batch = RecordBatch::try_new(self.schema.clone(), columns).map_err(|e| err(e.to_string()))?;
        self.writer.write(&batch).map_err(|e| err(e.to_string()))?;
        self.writer.flush().map_err(|e| err(e.to_string()))
    }

    /// Write what is pending and the footer.
    pub fn close(mut self) -> Result<(), OutputError> {
        self.flush()?;
        let err = OutputError::at(&self.path);
        self.writer.close().map(|_| ()).map_err(|e| err(e.to_string()))
    }
}

/// A folder of Parquet segments that follows a run's journal (see the
/// module note): rows go to the open segment; [`ParquetSegments::sync`]
/// closes it and returns how many segments are complete.
pub struct ParquetSegments<R: Rows + Clone> {
    dir: PathBuf,
    rows: R,
    rows_per_group: usize,
    /// Complete segments (`part-00000` .. `part-{done-1}`).
    done: u64,
    open: Option<ParquetFile<R>>,
}

fn segment(dir: &Path, i: u64) -> PathBuf {
    dir.join(format!("part-{i:05}.parquet"))
}

/// The segment numbers in `dir`, ascending.
fn segments(dir: &Path) -> Result<Vec<u64>, OutputError> {
    let err = OutputError::at(dir);
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(|e| err(e.to_string()))? {
        let name = entry.map_err(|e| err(e.to_string()))?.file_name();
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

impl<R: Rows + Clone> ParquetSegments<R> {
    /// Open the folder `dir` (created when missing; a plain file there is
    /// replaced), keeping its segments; `fresh`: delete them first.
    pub fn open(
        dir: &Path,
        rows: R,
        rows_per_group: usize,
        fresh: bool,
    ) -> Result<ParquetSegments<R>, OutputError> {
        let err = OutputError::at(dir);
        if dir.is_file() {
            std::fs::remove_file(dir).map_err(|e| err(e.to_string()))?;
        }
        std::fs::create_dir_all(dir).map_err(|e| err(e.to_string()))?;
        let done = segments(dir)?.last().map_or(0, |i| i + 1);
        let mut s = ParquetSegments {
            dir: dir.to_path_buf(),
            rows,
            rows_per_group,
            done,
            open: None,
        };
        if fresh {
            s.truncate_to(0)?;
        }
        Ok(s)
    }

    /// Add one row to the open segment (opened on the first row).
    pub fn write(&mut self, row: R::Row) -> Result<(), OutputError> {
        let w = match &mut self.open {
            Some(w) => w,
            None => self.open.insert(ParquetFile::create(
                &segment(&self.dir, self.done),
                self.rows.clone(),
                self.rows_per_group,
            )?),
        };
        w.write(row)
    }

    /// Close the open segment (footer, `fsync` of it and of the folder when
    /// `durable`) and return the number of complete segments.
    pub fn sync(&mut self, durable: bool) -> Result<u64, OutputError> {
        if let Some(w) = self.open.take() {
            let path = w.path.clone();
            w.close()?;
            if durable {
                for p in [&path, &self.dir] {
                    File::open(p)
                        .and_then(|f| f.sync_all())
                        .map_err(|e| OutputError::at(p)(e.to_string()))?;
                }
            }
            self.done += 1;
        }
        Ok(self.done)
    }

    /// Keep the first `n` segments; delete the others (and drop the open one).
    pub fn truncate_to(&mut self, n: u64) -> Result<(), OutputError> {
        self.open = None;
        let present = segments(&self.dir)?;
        if present.iter().filter(|&&i| i < n).count() as u64 != n {
            return Err(OutputError::at(&self.dir)(format!(
                "the journal committed {n} segment(s) but some are missing: the folder was changed since; start the run over"
            )));
        }
        for i in present.into_iter().filter(|&i| i >= n) {
            let path = segment(&self.dir, i);
            std::fs::remove_file(&path).map_err(|e| OutputError::at(&path)(e.to_string()))?;
        }
        self.done = n;
        Ok(())
    }

    /// Close the open segment (the run ended).
    pub fn close(&mut self) -> Result<(), OutputError> {
        self.sync(false).map(|_| ())
    }
}

/// The durable half of a job's sink: a segments folder reports its segment
/// count at each journal commit and is cut back to it on resume (its owner
/// writes the rows; `root` does nothing).
impl<R: Rows + Clone> Sink for ParquetSegments<R> {
    fn root(&mut self, _: &RootOutcome) -> Result<(), BoxError> {
        Ok(())
    }
    fn close(&mut self) -> Result<(), BoxError> {
        Ok(ParquetSegments::close(self)?)
    }
    fn sync(&mut self, durable: bool, positions: &mut Vec<u64>) -> Result<(), BoxError> {
        positions.push(ParquetSegments::sync(self, durable)?);
        Ok(())
    }
    fn truncate_to(&mut self, positions: &mut &[u64]) -> Result<(), BoxError> {
        let (&n, rest) = positions.split_first().ok_or_else(|| {
            format!(
                "the journal records no position for {}: the run's outputs differ from the journaled run's; start over",
                self.dir.display()
            )
        })?;
        *positions = rest;
        Ok(ParquetSegments::truncate_to(self, n)?)
    }
}

/// Every record batch of a Parquet file, or of a [`ParquetSegments`] folder
/// in segment order, with the schema (`None` for an empty folder).
pub fn read_batches(path: &Path) -> Result<(Option<SchemaRef>, Vec<RecordBatch>), OutputError> {
    let files: Vec<PathBuf> = if path.is_dir() {
        segments(path)?.into_iter().map(|i| segment(path, i)).collect()
    } else {
        vec![path.to_path_buf()]
    };
    let (mut schema, mut out) = (None, Vec::new());
    for f in files {
        let err = OutputError::at(&f);
        let file = File::open(&f).map_err(|e| err(e.to_string()))?;
        let builder = ParquetRecordBatchReaderBuilder::try_new(file).map_err(|e| err(e.to_string()))?;
        schema = Some(builder.schema().clone());
        for batch in builder.build().map_err(|e| err(e.to_string()))? {
            out.push(batch.map_err(|e| err(e.to_string()))?);
        }
    }
    Ok((schema, out))
}

/// The `u64` column `name` of a Parquet file, or of a [`ParquetSegments`]
/// folder in segment order: only that column is read (a run's keys, not
/// its documents).
pub fn read_u64_column(path: &Path, name: &str) -> Result<Vec<u64>, OutputError> {
    use arrow_array::cast::AsArray;
    use arrow_array::types::UInt64Type;
    let files: Vec<PathBuf> = if path.is_dir() {
        segments(path)?.into_iter().map(|i| segment(path, i)).collect()
    } else {
        vec![path.to_path_buf()]
    };
    let mut out = Vec::new();
    for f in files {
        let err = OutputError::at(&f);
        let file = File::open(&f).map_err(|e| err(e.to_string()))?;
        let builder = ParquetRecordBatchReaderBuilder::try_new(file).map_err(|e| err(e.to_string()))?;
        let Some(at) = builder.schema().fields().iter().position(|c| c.name() == name) else {
            return Err(err(format!("no column `{name}`")));
        };
        let mask = parquet::arrow::ProjectionMask::roots(builder.parquet_schema(), [at]);
        for batch in builder
            .with_projection(mask)
            .build()
            .map_err(|e| err(e.to_string()))?
        {
            let batch = batch.map_err(|e| err(e.to_string()))?;
            let col = batch.column(0);
            let Some(keys) = col.as_primitive_opt::<UInt64Type>() else {
                return Err(err(format!("column `{name}` is {}, not u64", col.data_type())));
            };
            out.extend(keys.values().iter().copied());
        }
    }
    Ok(out)
}

/// Column builders for [`Rows::columns`]: each takes the rows and a field
/// accessor.
pub mod col {
    use std::sync::Arc;

    use arrow_array::builder::{
        FixedSizeListBuilder, Float32Builder, Float64Builder, ListBuilder, StringBuilder,
    };
    use arrow_array::{ArrayRef, Float32Array, Float64Array, StringArray, UInt32Array, UInt64Array};
    use arrow_schema::{DataType, Field};

    /// A nullable list item field (what the list builders write).
    pub fn item(t: DataType) -> Arc<Field> {
        Arc::new(Field::new("item", t, true))
    }

    /// A `u64` column.
    pub fn u64<T>(rows: &[T], f: impl Fn(&T) -> u64) -> ArrayRef {
        Arc::new(UInt64Array::from_iter_values(rows.iter().map(f)))
    }

    /// A `u32` column.
    pub fn u32<T>(rows: &[T], f: impl Fn(&T) -> u32) -> ArrayRef {
        Arc::new(UInt32Array::from_iter_values(rows.iter().map(f)))
    }

    /// A nullable `u32` column.
    pub fn opt_u32<T>(rows: &[T], f: impl Fn(&T) -> Option<u32>) -> ArrayRef {
        Arc::new(rows.iter().map(f).collect::<UInt32Array>())
    }

    /// An `f32` column.
    pub fn f32<T>(rows: &[T], f: impl Fn(&T) -> f32) -> ArrayRef {
        Arc::new(Float32Array::from_iter_values(rows.iter().map(f)))
    }

    /// An `f64` column.
    pub fn f64<T>(rows: &[T], f: impl Fn(&T) -> f64) -> ArrayRef {
        Arc::new(Float64Array::from_iter_values(rows.iter().map(f)))
    }

    /// A UTF-8 column of borrowed fields.
    pub fn string<T>(rows: &[T], f: impl Fn(&T) -> &str) -> ArrayRef {
        Arc::new(StringArray::from_iter_values(rows.iter().map(f)))
    }

    /// A UTF-8 column of computed values.
    pub fn owned_string<T>(rows: &[T], f: impl Fn(&T) -> String) -> ArrayRef {
        Arc::new(StringArray::from_iter_values(rows.iter().map(f)))
    }

    /// A nullable UTF-8 column.
    pub fn opt_string<T>(rows: &[T], f: impl Fn(&T) -> Option<String>) -> ArrayRef {
        Arc::new(rows.iter().map(f).collect::<StringArray>())
    }

    /// A `list<utf8>` column.
    pub fn strings<'a, T, I>(rows: &'a [T], f: impl Fn(&'a T) -> I) -> ArrayRef
    where
        I: IntoIterator,
        I::Item: AsRef<str>,
    {
        let mut b = ListBuilder::new(StringBuilder::new());
        for r in rows {
            for s in f(r) {
                b.values().append_value(s.as_ref());
            }
            b.append(true);
        }
        Arc::new(b.finish())
    }

    /// A `list<f32>` column.
    pub fn f32s<T>(rows: &[T], f: impl Fn(&T) -> Vec<f32>) -> ArrayRef {
        let mut b = ListBuilder::new(Float32Builder::new());
        for r in rows {
            b.values().append_slice(&f(r));
            b.append(true);
        }
        Arc::new(b.finish())
    }

    /// A `list<f64>` column.
    pub fn f64s<T>(rows: &[T], f: impl Fn(&T) -> Vec<f64>) -> ArrayRef {
        let mut b = ListBuilder::new(Float64Builder::new());
        for r in rows {
            b.values().append_slice(&f(r));
            b.append(true);
        }
        Arc::new(b.finish())
    }

    /// A `fixed_size_list<f32, dim>` column; `Err` names the first row whose
    /// vector is not `dim` long.
    pub fn vector<T>(rows: &[T], dim: usize, f: impl Fn(&T) -> &[f32]) -> Result<ArrayRef, usize> {
        let mut b = FixedSizeListBuilder::new(Float32Builder::new(), dim as i32);
        for (i, r) in rows.iter().enumerate() {
            let v = f(r);
            if v.len() != dim {
                return Err(i);
            }
            b.values().append_slice(v);
            b.append(true);
        }
        Ok(Arc::new(b.finish()))
    }

    /// A `list<fixed_size_list<f32, dim>>` column (several vectors per row);
    /// `Err` names the first row holding a vector not `dim` long.
    pub fn vectors<T>(rows: &[T], dim: usize, f: impl Fn(&T) -> &[Vec<f32>]) -> Result<ArrayRef, usize> {
        let mut b = ListBuilder::new(FixedSizeListBuilder::new(Float32Builder::new(), dim as i32));
        for (i, r) in rows.iter().enumerate() {
            for v in f(r) {
                if v.len() != dim {
                    return Err(i);
                }
                b.values().values().append_slice(v);
                b.values().append(true);
            }
            b.append(true);
        }
        Ok(Arc::new(b.finish()))
    }
}

/// A job's local outputs that follow its journal: its records as JSON
/// lines, its failure lines, its rows as Parquet segments, and any further
/// JSON-lines files (`extra`). Each journal commit syncs them in that order
/// and stores their positions; a resumed run cuts each back to its
/// position, so every root is in them exactly once however the previous
/// run ended. `root` does nothing: the job's sink writes through the
/// fields.
pub struct JournaledFiles<R: Rows + Clone> {
    /// The records, one JSON line per root written.
    pub records: rayorch::sink::LinesFile,
    /// One failure line per root that did not complete.
    pub failures: rayorch::sink::LinesFile,
    /// The records' rows.
    pub parquet: ParquetSegments<R>,
    /// Further JSON-lines files, in the order they were named.
    pub extra: Vec<rayorch::sink::LinesFile>,
}

impl<R: Rows + Clone> JournaledFiles<R> {
    /// Open the files `[records, failures, parquet]` and `extra` in `dir`
    /// (created when missing). A fresh run empties them; `resume` keeps
    /// them for the runner to cut back to the journal's last commit.
    ///
    /// ```
    /// # use rayorch_kit::parquet::{JournaledFiles, Rows, col};
    /// # use std::sync::Arc;
    /// # use arrow_schema::{DataType, Field, Schema, SchemaRef};
    /// # #[derive(Clone)] struct Keys;
    /// # impl Rows for Keys {
    /// #     type Row = u64;
    /// #     fn schema(&self) -> SchemaRef { Arc::new(Schema::new(vec![Field::new("key", DataType::UInt64, false)])) }
    /// #     fn columns(&self, rows: &[u64]) -> Result<Vec<arrow_array::ArrayRef>, String> { Ok(vec![col::u64(rows, |k| *k)]) }
    /// # }
    /// use rayorch::sink::Sink;
    /// let dir = tempfile::tempdir().unwrap();
    /// let names = ["docs.jsonl", "failures.jsonl", "docs.parquet"];
    /// let mut f = JournaledFiles::open(dir.path(), names, &["notes.jsonl"], Keys, 8, false).unwrap();
    /// f.records.line(b"{\"key\":1}").unwrap();
    /// let mut at = Vec::new();
    /// f.sync(true, &mut at).unwrap();
    /// f.records.line(b"{\"key\":2}").unwrap();
    /// f.extra[0].line(b"{}").unwrap();
    /// f.close().unwrap();
    /// // A resume cuts every file back to the commit.
    /// let mut f = JournaledFiles::open(dir.path(), names, &["notes.jsonl"], Keys, 8, true).unwrap();
    /// f.truncate_to(&mut &at[..]).unwrap();
    /// assert_eq!(std::fs::read_to_string(dir.path().join("docs.jsonl")).unwrap(), "{\"key\":1}\n");
    /// assert_eq!(std::fs::read_to_string(dir.path().join("notes.jsonl")).unwrap(), "");
    /// ```
    pub fn open(
        dir: &Path,
        [records, failures, parquet]: [&str; 3],
        extra: &[&str],
        rows: R,
        rows_per_group: usize,
        resume: bool,
    ) -> Result<JournaledFiles<R>, BoxError> {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let lines = |name: &str| {
            let path = dir.join(name);
            match resume {
                true => rayorch::sink::LinesFile::open(&path),
                false => rayorch::sink::LinesFile::create(&path),
            }
            .map_err(|e| format!("{}: {e}", path.display()))
        };
        Ok(JournaledFiles {
            records: lines(records)?,
            failures: lines(failures)?,
            parquet: ParquetSegments::open(&dir.join(parquet), rows, rows_per_group, !resume)?,
            extra: extra.iter().map(|n| lines(n)).collect::<Result<_, _>>()?,
        })
    }
}

impl<R: Rows + Clone> Sink for JournaledFiles<R> {
    fn root(&mut self, _: &RootOutcome) -> Result<(), BoxError> {
        Ok(())
    }
    fn close(&mut self) -> Result<(), BoxError> {
        Sink::close(&mut self.records)?;
        Sink::close(&mut self.failures)?;
        ParquetSegments::close(&mut self.parquet)?;
        self.extra.iter_mut().try_for_each(Sink::close)
    }
    fn sync(&mut self, durable: bool, positions: &mut Vec<u64>) -> Result<(), BoxError> {
        Sink::sync(&mut self.records, durable, positions)?;
        Sink::sync(&mut self.failures, durable, positions)?;
        Sink::sync(&mut self.parquet, durable, positions)?;
        self.extra
            .iter_mut()
            .try_for_each(|f| Sink::sync(f, durable, positions))
    }
    fn truncate_to(&mut self, positions: &mut &[u64]) -> Result<(), BoxError> {
        Sink::truncate_to(&mut self.records, positions)?;
        Sink::truncate_to(&mut self.failures, positions)?;
        Sink::truncate_to(&mut self.parquet, positions)?;
        self.extra
            .iter_mut()
            .try_for_each(|f| Sink::truncate_to(f, positions))
    }
}

/// Where a job's outputs go: [`JournaledFiles`] in a folder, or commits
/// at an object-store URL (`RowCommits`, feature `store`: their commit
/// records are the journal, so they report no positions and a resume
/// needs nothing of them). As a [`Sink`] it does the durable half of the
/// job's sink (close, sync, cut back); the job's `root` writes through
/// [`JobFiles::local`] or the bucket.
#[cfg_attr(
    feature = "store",
    expect(
        clippy::large_enum_variant,
        reason = "one per run, never moved after it is made"
    )
)]
pub enum JobFiles<R: Rows + Clone> {
    /// Files in a folder.
    Local(JournaledFiles<R>),
    /// Commits at a URL.
    #[cfg(feature = "store")]
    Bucket(Box<crate::store::outputs::RowCommits<R>>),
}

impl<R: Rows + Clone> JobFiles<R> {
    /// The local files (`None`: the outputs are a bucket's).
    pub fn local(&mut self) -> Option<&mut JournaledFiles<R>> {
        match self {
            JobFiles::Local(f) => Some(f),
            #[cfg(feature = "store")]
            JobFiles::Bucket(_) => None,
        }
    }

    /// Write the record of root `key`: its JSON line and its row (a
    /// bucket's commit names `key`; the local files need only the line).
    #[cfg_attr(
        not(feature = "store"),
        expect(unused_variables, reason = "only a bucket names the key")
    )]
    pub fn record(&mut self, key: u64, line: &[u8], row: R::Row) -> Result<(), BoxError> {
        match self {
            JobFiles::Local(f) => {
                f.records.line(line)?;
                Ok(f.parquet.write(row)?)
            }
            #[cfg(feature = "store")]
            JobFiles::Bucket(b) => Ok(b.record(key, line, row)?),
        }
    }

    /// Write the failure line of root `key`.
    #[cfg_attr(
        not(feature = "store"),
        expect(unused_variables, reason = "only a bucket names the key")
    )]
    pub fn failure(&mut self, key: u64, line: &[u8]) -> Result<(), BoxError> {
        match self {
            JobFiles::Local(f) => Ok(f.failures.line(line)?),
            #[cfg(feature = "store")]
            JobFiles::Bucket(b) => Ok(b.failure(key, line)?),
        }
    }

    /// The commits, when the outputs are at a URL.
    #[cfg(feature = "store")]
    pub fn bucket(&mut self) -> Option<&mut crate::store::outputs::RowCommits<R>> {
        match self {
            JobFiles::Bucket(b) => Some(b),
            JobFiles::Local(_) => None,
        }
    }
}

impl<R: Rows + Clone> Sink for JobFiles<R> {
    fn root(&mut self, _: &RootOutcome) -> Result<(), BoxError> {
        Ok(())
    }
    fn close(&mut self) -> Result<(), BoxError> {
        match self {
            JobFiles::Local(f) => f.close(),
            // The rest committed, every upload waited for.
            #[cfg(feature = "store")]
            JobFiles::Bucket(b) => Ok(b.finish()?),
        }
    }
    fn sync(&mut self, durable: bool, positions: &mut Vec<u64>) -> Result<(), BoxError> {
        self.local().map_or(Ok(()), |f| f.sync(durable, positions))
    }
    fn truncate_to(&mut self, positions: &mut &[u64]) -> Result<(), BoxError> {
        self.local().map_or(Ok(()), |f| f.truncate_to(positions))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::{Array, StringArray, UInt64Array};
    use arrow_schema::{DataType, Field, Schema};

    use super::*;

    #[derive(Clone)]
    struct Named;

    impl Rows for Named {
        type Row = (u64, String);
        fn schema(&self) -> SchemaRef {
            Arc::new(Schema::new(vec![
                Field::new("key", DataType::UInt64, false),
                Field::new("name", DataType::Utf8, false),
            ]))
        }
        fn columns(&self, rows: &[(u64, String)]) -> Result<Vec<arrow_array::ArrayRef>, String> {
            if let Some((k, _)) = rows.iter().find(|(_, n)| n.is_empty()) {
                return Err(format!("row {k} has no name"));
            }
            Ok(vec![col::u64(rows, |r| r.0), col::string(rows, |r| &r.1)])
        }
    }

    fn keys(path: &Path) -> Vec<u64> {
        let (_, batches) = read_batches(path).unwrap();
        batches
            .iter()
            .flat_map(|b| {
                let k = b.column(0).as_any().downcast_ref::<UInt64Array>().unwrap();
                (0..k.len()).map(|i| k.value(i)).collect::<Vec<_>>()
            })
            .collect()
    }

    #[test]
    fn a_key_column_is_read_alone_from_a_file_or_its_segments() {
        let dir = tempfile::tempdir().unwrap();
        let seg = dir.path().join("segs");
        let mut s = ParquetSegments::open(&seg, Named, 2, true).unwrap();
        for (i, k) in [5u64, 2, 9, 4, 1].into_iter().enumerate() {
            s.write((k, format!("n{k}"))).unwrap();
            if i % 2 == 1 {
                s.sync(false).unwrap();
            }
        }
        s.sync(false).unwrap();
        assert_eq!(read_u64_column(&seg, "key").unwrap(), [5, 2, 9, 4, 1]);
        assert_eq!(read_u64_column(&seg, "key").unwrap(), keys(&seg));
        let e = read_u64_column(&seg, "name").unwrap_err().to_string();
        assert!(e.contains("column `name` is Utf8, not u64"), "{e}");
        let e = read_u64_column(&seg, "id").unwrap_err().to_string();
        assert!(e.contains("no column `id`"), "{e}");
    }

    #[test]
    fn rows_round_trip_and_a_refused_row_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rows.parquet");
        let mut w = ParquetFile::create(&path, Named, 2).unwrap();
        for k in [3, 1, 7] {
            w.write((k, format!("n{k}"))).unwrap();
        }
        w.close().unwrap();
        assert_eq!(keys(&path), [3, 1, 7]);
        let (_, b) = read_batches(&path).unwrap();
        let names = b[0].column(1).as_any().downcast_ref::<StringArray>().unwrap();
        assert_eq!(names.value(1), "n1");

        let mut w = ParquetFile::create(&path, Named, 1).unwrap();
        let err = w.write((9, String::new())).unwrap_err();
        assert!(err.to_string().contains("row 9 has no name"), "{err}");
    }

    #[test]
    fn segments_keep_what_was_committed_and_drop_the_rest() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("rows.parquet");
        let row = |k: u64| (k, format!("n{k}"));
        let mut s = ParquetSegments::open(&dir, Named, 2, true).unwrap();
        assert_eq!(s.sync(true).unwrap(), 0, "no rows: no segment");
        s.write(row(0)).unwrap();
        s.write(row(1)).unwrap();
        assert_eq!(s.sync(true).unwrap(), 1);
        s.write(row(2)).unwrap();
        assert_eq!(s.sync(true).unwrap(), 2);
        // Rows after the last commit: one closed segment, one left open.
        s.write(row(3)).unwrap();
        s.sync(false).unwrap();
        s.write(row(4)).unwrap();
        drop(s);
        let mut s = ParquetSegments::open(&dir, Named, 2, false).unwrap();
        s.truncate_to(2).unwrap();
        s.write(row(3)).unwrap();
        s.close().unwrap();
        assert_eq!(keys(&dir), [0, 1, 2, 3]);
        // A committed segment gone missing is an error, not a silent loss.
        std::fs::remove_file(segment(&dir, 0)).unwrap();
        assert!(
            ParquetSegments::open(&dir, Named, 2, false)
                .unwrap()
                .truncate_to(2)
                .is_err()
        );
    }
}
