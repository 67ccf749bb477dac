//! Parquet shards as sources (the Hugging Face datasets layout): each row
//! of a shard is one input, its bytes in a binary column
//! (`--bytes-column`) or its location in a string column (`--url-column`),
//! the row's other columns its metadata.
//!
//! Invariants:
//! - **Read by row group, never a whole shard.** A reader thread decodes one
//!   row group at a time, a few rows per batch, and hands rows over a
//!   bounded channel: a shard much larger than memory streams, and a run
//!   that stops admitting stops the reading. A shard in object storage is
//!   read by byte ranges (its footer, then each row group's column chunks;
//!   `--features store`), never downloaded whole.
//! - **Stable keys.** With `--key-column` a row's key is
//!   [`root_key`](super::root_key) of its key value (whatever shard holds
//!   it, so resharding keeps the journal); without, of `SHARD#ROW` (its
//!   shard's path or URL and its row number from 0). A row is named by its
//!   key value, or by `SHARD#ROW`.
//! - **One failure per unreadable row, never a dead run.** A null or
//!   missing cell, a row group that fails to decode (each of its rows not
//!   yet yielded fails), a shard whose footer cannot be read (one failure
//!   named by the shard): each is a root whose first Call fails with what
//!   is wrong and what to do. Only a shard list that cannot be listed, or a
//!   column the flags name that the first shard lacks, is an error before
//!   the run.
//! - Metadata: every column but the bytes and the key (a location column
//!   included, as written in the shard); strings, integers, floats and
//!   booleans keep their JSON type, other types are written as their Arrow
//!   display text, nulls are left out.

use std::sync::Arc;

use crate::names::Meta;

#[cfg(feature = "parquet")]
pub use read::*;

/// Which columns of the shards hold what (`--bytes-column` or
/// `--url-column`, `--key-column`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShardColumns {
    /// The input's bytes (binary) or its location (a string), by name.
    pub input: InputColumn,
    /// The column whose value keys and names a row.
    pub key: Option<String>,
}

/// Where a row's input is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum InputColumn {
    /// The input's bytes, in this binary column.
    Bytes(String),
    /// The input's URL or path, in this string column.
    Url(String),
}

impl InputColumn {
    /// The column's name.
    pub fn name(&self) -> &str {
        match self {
            InputColumn::Bytes(c) | InputColumn::Url(c) => c,
        }
    }
}

/// The flags that give a job Parquet shards as inputs.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct ShardFlags {
    /// Parquet shards as inputs, one input per row: a file, a folder, a
    /// glob, or (`--features store`) a URL or URL pattern
    /// (`s3://bucket/shards/*.parquet`). May be given more than once.
    #[arg(long = "input-parquet", value_name = "SHARDS")]
    pub input_parquet: Vec<String>,
    /// The binary column of `--input-parquet` rows that holds the input's
    /// bytes.
    #[arg(
        long,
        value_name = "NAME",
        requires = "input_parquet",
        conflicts_with = "url_column"
    )]
    pub bytes_column: Option<String>,
    /// The string column of `--input-parquet` rows that holds the input's
    /// URL or path (instead of `--bytes-column`).
    #[arg(long, value_name = "NAME", requires = "input_parquet")]
    pub url_column: Option<String>,
    /// The column that keys and names each row (stable across shards);
    /// default: the shard and the row's number.
    #[arg(long, value_name = "NAME", requires = "input_parquet")]
    pub key_column: Option<String>,
    /// WebDataset tar shards as inputs, one input per sample (members
    /// grouped by key: `0001.pdf`, `0001.json`): the member the job reads
    /// is its input, `.json` and text members its metadata. A file, a
    /// folder, a glob, or (`--features store`) a URL or URL pattern.
    #[arg(long = "input-tar", value_name = "SHARDS")]
    pub input_tar: Vec<String>,
}

impl ShardFlags {
    /// The shard inputs and their columns (`None` without
    /// `--input-parquet`); `Err` when neither `--bytes-column` nor
    /// `--url-column` says where the input is.
    pub fn shards(&self) -> Result<Option<(Vec<String>, ShardColumns)>, String> {
        if self.input_parquet.is_empty() {
            return Ok(None);
        }
        let input = match (&self.bytes_column, &self.url_column) {
            (Some(b), _) => InputColumn::Bytes(b.clone()),
            (None, Some(u)) => InputColumn::Url(u.clone()),
            (None, None) => {
                return Err(format!(
                    "--input-parquet {}: name the column that holds each input, --bytes-column NAME (its bytes) or --url-column NAME (its URL or path)",
                    self.input_parquet.join(" ")
                ));
            }
        };
        Ok(Some((
            self.input_parquet.clone(),
            ShardColumns {
                input,
                key: self.key_column.clone(),
            },
        )))
    }
}

/// What one row of a shard (or of an input list, or one tar sample) gives:
/// its key, name, metadata, and the input or why there is none.
#[derive(Clone, Debug)]
pub struct ShardRow {
    /// The root key (see the module note).
    pub key: u64,
    /// The root's name.
    pub name: Arc<str>,
    /// The row's other columns.
    pub meta: Option<Meta>,
    /// The input.
    pub input: Result<RowInput, String>,
}

/// A row's input.
#[derive(Clone, Debug)]
pub enum RowInput {
    /// Its bytes.
    Bytes(Arc<[u8]>),
    /// Its location, resolved next to the shard when relative.
    At(String),
}

/// A shard's name for the row `row`: `SHARD#ROW`.
pub fn row_name(shard: &str, row: u64) -> String {
    format!("{shard}#{row}")
}

#[cfg(feature = "parquet")]
mod read {
    use std::sync::Arc;

    use arrow_array::cast::AsArray;
    use arrow_array::{Array, ArrayRef, RecordBatch};
    use arrow_schema::DataType;
    use parquet::arrow::arrow_reader::{
        ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReaderBuilder,
    };
    use parquet::file::reader::ChunkReader;
    use serde_json::{Map, Value};

    use super::{InputColumn, RowInput, ShardColumns, ShardRow, row_name};

    /// The rows of one batch of `shard`, the first at row `first`.
    fn batch_rows(shard: &str, cols: &ShardColumns, batch: &RecordBatch, first: u64) -> Vec<ShardRow> {
        let schema = batch.schema();
        let col = |name: &str| schema.index_of(name).ok().map(|i| batch.column(i).clone());
        let input = col(cols.input.name());
        let key = cols.key.as_deref().map(|k| (k, col(k)));
        (0..batch.num_rows())
            .map(|i| {
                let row = first + i as u64;
                let fallback = row_name(shard, row);
                let (key, name) = match &key {
                    None => (crate::store::root_key(&fallback), fallback),
                    Some((_, Some(k))) if k.is_valid(i) => {
                        let v = display(k, i);
                        (crate::store::root_key(&v), v)
                    }
                    Some((k, _)) => {
                        let why = format!(
                            "{shard} row {row}: no `{k}` (the row's key); fill it or leave out --key-column"
                        );
                        return failed(crate::store::root_key(&fallback), fallback, why);
                    }
                };
                let mut meta = Map::new();
                for (f, c) in schema.fields().iter().zip(batch.columns()) {
                    // The bytes and the key are no metadata; a location is
                    // (the row is named by its key).
                    let bytes = matches!(cols.input, InputColumn::Bytes(_)) && f.name() == cols.input.name();
                    let skip = bytes || cols.key.as_deref() == Some(f.name().as_str());
                    if !skip && c.is_valid(i) {
                        meta.insert(f.name().clone(), json(c, i));
                    }
                }
                let meta = (!meta.is_empty()).then(|| Arc::new(Value::Object(meta)));
                let input = match (&cols.input, &input) {
                    (_, None) => Err(format!("{shard}: no column `{}`", cols.input.name())),
                    (_, Some(c)) if !c.is_valid(i) => Err(format!(
                        "{shard} row {row}: `{}` is null; fill it or remove the row",
                        cols.input.name()
                    )),
                    (InputColumn::Bytes(_), Some(c)) => binary(c, i).map(RowInput::Bytes),
                    (InputColumn::Url(_), Some(c)) => Ok(RowInput::At(crate::store::input_list::resolve(
                        shard,
                        &display(c, i),
                    ))),
                };
                let input = input.map_err(|e| format!("{e} (shard {shard}, row {row})"));
                ShardRow {
                    key,
                    name: name.into(),
                    meta,
                    input,
                }
            })
            .collect()
    }

    fn failed(key: u64, name: String, why: String) -> ShardRow {
        ShardRow {
            key,
            name: name.into(),
            meta: None,
            input: Err(why),
        }
    }

    /// The bytes of a binary cell.
    fn binary(c: &ArrayRef, i: usize) -> Result<Arc<[u8]>, String> {
        let b: &[u8] = match c.data_type() {
            DataType::Binary => c.as_binary::<i32>().value(i),
            DataType::LargeBinary => c.as_binary::<i64>().value(i),
            DataType::BinaryView => c.as_binary_view().value(i),
            DataType::FixedSizeBinary(_) => c.as_fixed_size_binary().value(i),
            other => {
                return Err(format!(
                    "the bytes column is {other}, not binary; give its name with --url-column if it holds locations"
                ));
            }
        };
        Ok(Arc::from(b))
    }

    /// A cell as text (strings as they are).
    fn display(c: &ArrayRef, i: usize) -> String {
        match c.data_type() {
            DataType::Utf8 => c.as_string::<i32>().value(i).to_string(),
            DataType::LargeUtf8 => c.as_string::<i64>().value(i).to_string(),
            DataType::Utf8View => c.as_string_view().value(i).to_string(),
            _ => arrow_cast::display::ArrayFormatter::try_new(c.as_ref(), &Default::default())
                .map_or_else(|e| format!("({e})"), |f| f.value(i).to_string()),
        }
    }

    /// A cell as JSON (see the module note).
    fn json(c: &ArrayRef, i: usize) -> Value {
        use arrow_array::types::*;
        macro_rules! num {
            ($t:ty) => {
                Value::from(c.as_primitive::<$t>().value(i))
            };
        }
        match c.data_type() {
            DataType::Boolean => Value::Bool(c.as_boolean().value(i)),
            DataType::Int8 => num!(Int8Type),
            DataType::Int16 => num!(Int16Type),
            DataType::Int32 => num!(Int32Type),
            DataType::Int64 => num!(Int64Type),
            DataType::UInt8 => num!(UInt8Type),
            DataType::UInt16 => num!(UInt16Type),
            DataType::UInt32 => num!(UInt32Type),
            DataType::UInt64 => num!(UInt64Type),
            DataType::Float32 => num!(Float32Type),
            DataType::Float64 => num!(Float64Type),
            _ => Value::String(display(c, i)),
        }
    }

    /// Rows of a batch read at once: small, so a row group of large inputs is
    /// handed over a few inputs at a time.
    const BATCH_ROWS: usize = 8;

    /// Read the rows of the shard `shard` through `reader` (a file, or an
    /// object's byte ranges), calling `emit` with each; `emit` returns false
    /// to stop (the run stopped admitting for good). Every row that cannot be
    /// read is emitted as a failed row (see the module note).
    pub fn read_shard<R: ShardReader>(
        shard: &str,
        reader: R,
        cols: &ShardColumns,
        emit: &mut dyn FnMut(ShardRow) -> bool,
    ) {
        let meta = match ArrowReaderMetadata::load(&reader, ArrowReaderOptions::default()) {
            Ok(m) => m,
            Err(e) => {
                let why = format!("{shard}: not a readable Parquet file ({e}); replace or remove the shard");
                emit(failed(crate::store::root_key(shard), shard.to_string(), why));
                return;
            }
        };
        let mut first = 0u64;
        for g in 0..meta.metadata().num_row_groups() {
            let group = meta.metadata().row_group(g);
            let rows = group.num_rows().max(0) as u64;
            let mut done = 0u64;
            let spans = (0..group.num_columns()).map(|c| group.column(c).byte_range());
            if let Some((start, end)) = spans.fold(None, |acc: Option<(u64, u64)>, (s, l)| {
                Some(acc.map_or((s, s + l), |(a, b)| (a.min(s), b.max(s + l))))
            }) {
                reader.prefetch(start..end);
            }
            let read = ParquetRecordBatchReaderBuilder::new_with_metadata(reader.clone(), meta.clone())
                .with_row_groups(vec![g])
                .with_batch_size(BATCH_ROWS)
                .build();
            let mut error = None;
            match read {
                Err(e) => error = Some(e.to_string()),
                Ok(batches) => {
                    for batch in batches {
                        match batch {
                            Ok(b) => {
                                for row in batch_rows(shard, cols, &b, first + done) {
                                    if !emit(row) {
                                        return;
                                    }
                                }
                                done += b.num_rows() as u64;
                            }
                            Err(e) => {
                                error = Some(e.to_string());
                                break;
                            }
                        }
                    }
                }
            }
            if let Some(e) = error {
                // The rows of the group not yet yielded, each its own failure.
                for row in first + done..first + rows {
                    let name = row_name(shard, row);
                    let why = format!("{shard} row {row}: its row group {g} cannot be decoded ({e})");
                    if !emit(failed(crate::store::root_key(&name), name, why)) {
                        return;
                    }
                }
            }
            first += rows;
        }
    }

    /// The columns the first readable shard must have (checked before a run).
    pub fn check_columns<R: ShardReader>(shard: &str, reader: &R, cols: &ShardColumns) -> Result<(), String> {
        let Ok(meta) = ArrowReaderMetadata::load(reader, ArrowReaderOptions::default()) else {
            // An unreadable shard is its own failure in the run.
            return Ok(());
        };
        let schema = meta.schema();
        let have: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
        let input_flag = match cols.input {
            InputColumn::Bytes(_) => "--bytes-column",
            InputColumn::Url(_) => "--url-column",
        };
        for (flag, want) in [
            (input_flag, Some(cols.input.name())),
            ("--key-column", cols.key.as_deref()),
        ] {
            if let Some(w) = want.filter(|w| !have.contains(w)) {
                return Err(format!(
                    "--input-parquet {shard}: {flag} {w}: the shard has no such column (it has {})",
                    have.join(", ")
                ));
            }
        }
        Ok(())
    }

    /// A row of [`shard_of`]: `id`, the input's bytes (`None`: null), `lang`.
    pub type SpecRow<'a> = (&'a str, Option<&'a [u8]>, Option<&'a str>);

    /// A Parquet shard in the Hugging Face datasets layout, for tests,
    /// benches and tools: columns `id` (string), `bytes_column` (binary,
    /// null where `None`) and `lang` (string, nullable), `rows_per_group`
    /// rows per row group.
    ///
    /// ```
    /// use rayorch_kit::store::shards::shard_of;
    /// let shard = shard_of("pdf", &[("a", Some(b"%PDF"), Some("en")), ("b", None, None)], 1).unwrap();
    /// assert_eq!(&shard[..4], b"PAR1");
    /// ```
    pub fn shard_of(bytes_column: &str, rows: &[SpecRow], rows_per_group: usize) -> Result<Vec<u8>, String> {
        use arrow_array::{BinaryArray, StringArray};
        use arrow_schema::{Field, Schema};
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Utf8, false),
            Field::new(bytes_column, DataType::Binary, true),
            Field::new("lang", DataType::Utf8, true),
        ]));
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![
                Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.0))),
                Arc::new(BinaryArray::from_iter(rows.iter().map(|r| r.1))),
                Arc::new(StringArray::from_iter(rows.iter().map(|r| r.2))),
            ],
        )
        .map_err(|e| e.to_string())?;
        write_shard(schema, &batch, rows_per_group)
    }

    /// A Parquet shard of locations, for tests, benches and tools: columns
    /// `id` and `column` (strings), one row per `(id, location)`.
    ///
    /// ```
    /// let shard = rayorch_kit::store::shards::locations_shard_of("url", &[("a", "s3://b/a.pdf")]).unwrap();
    /// assert_eq!(&shard[..4], b"PAR1");
    /// ```
    pub fn locations_shard_of(column: &str, rows: &[(&str, &str)]) -> Result<Vec<u8>, String> {
        use arrow_array::StringArray;
        use arrow_schema::{Field, Schema};
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Utf8, false),
            Field::new(column, DataType::Utf8, false),
        ]));
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![
                Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.0))),
                Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.1))),
            ],
        )
        .map_err(|e| e.to_string())?;
        write_shard(schema, &batch, rows.len())
    }

    /// `batch` as a Parquet file, `rows_per_group` rows per row group.
    fn write_shard(
        schema: arrow_schema::SchemaRef,
        batch: &RecordBatch,
        rows_per_group: usize,
    ) -> Result<Vec<u8>, String> {
        let props = parquet::file::properties::WriterProperties::builder()
            .set_max_row_group_size(rows_per_group.max(1))
            .build();
        let mut out = Vec::new();
        let mut w =
            parquet::arrow::ArrowWriter::try_new(&mut out, schema, Some(props)).map_err(|e| e.to_string())?;
        w.write(batch).map_err(|e| e.to_string())?;
        w.close().map_err(|e| e.to_string())?;
        Ok(out)
    }

    /// A local shard's reader.
    pub fn local_reader(path: &str) -> Result<LocalShard, String> {
        let file = std::fs::File::open(path).map_err(|e| format!("{path}: {e}"))?;
        Ok(LocalShard(Arc::new(file)))
    }

    /// A local shard, shared by the readers of its row groups.
    #[derive(Clone, Debug)]
    pub struct LocalShard(Arc<std::fs::File>);

    impl parquet::file::reader::Length for LocalShard {
        fn len(&self) -> u64 {
            parquet::file::reader::Length::len(&*self.0)
        }
    }

    impl ShardReader for LocalShard {}

    impl ShardReader for bytes::Bytes {}

    /// How a shard is read: its bytes by range ([`ChunkReader`]), cheap to
    /// clone (one reader per row group), told which range a row group spans
    /// before it is read (a remote shard fetches it in one request).
    pub trait ShardReader: ChunkReader + Clone + 'static {
        /// The row group about to be read spans `range` (default: nothing to do).
        fn prefetch(&self, range: std::ops::Range<u64>) {
            let _ = range;
        }
    }

    impl ChunkReader for LocalShard {
        type T = <std::fs::File as ChunkReader>::T;
        fn get_read(&self, start: u64) -> parquet::errors::Result<Self::T> {
            self.0.get_read(start)
        }
        fn get_bytes(&self, start: u64, length: usize) -> parquet::errors::Result<bytes::Bytes> {
            self.0.get_bytes(start, length)
        }
    }

    /// Is `name` a Parquet shard's (what a folder or prefix listing keeps)?
    ///
    /// ```
    /// use rayorch_kit::store::shards::is_parquet;
    /// assert!(is_parquet("s3://b/train-00001.PARQUET") && !is_parquet("a.pdf"));
    /// ```
    pub fn is_parquet(name: &str) -> bool {
        name.rsplit('/')
            .next()
            .and_then(|n| n.rsplit_once('.'))
            .is_some_and(|(_, e)| e.eq_ignore_ascii_case("parquet"))
    }

    /// What the reader thread hands over: a row, or why reading stopped (a
    /// listing that failed).
    type Item = Result<ShardRow, String>;

    /// The rows of the shards of `inputs` (files, folders and globs; URLs and
    /// URL patterns with `store`) of `kind`, in order, read on a thread of
    /// their own and handed over a bounded channel (see the module note). An
    /// `Err` ends the stream. Dropping the stream stops the thread at its
    /// next row.
    pub fn rows(inputs: Vec<String>, kind: Kind) -> futures::stream::BoxStream<'static, Item> {
        use futures::SinkExt;
        use futures::stream::{self, StreamExt};
        let (mut tx, rx) = futures::channel::mpsc::channel(BATCH_ROWS);
        let spawned = std::thread::Builder::new()
            .name(format!("{} shards", kind.what()))
            .spawn(move || {
                let mut emit = |item: Item| futures::executor::block_on(tx.send(item)).is_ok();
                read_all(&inputs, &kind, &mut emit);
            });
        match spawned {
            Ok(_) => rx.boxed(),
            Err(e) => stream::iter([Err(format!("no thread to read the shards ({e})"))]).boxed(),
        }
    }

    fn read_all(inputs: &[String], kind: &Kind, emit: &mut dyn FnMut(Item) -> bool) {
        #[cfg(feature = "store")]
        let remote = remote::Remote::default();
        for input in inputs {
            if crate::store::input_list::is_remote(input) {
                #[cfg(feature = "store")]
                if !remote.read(input, kind, emit) {
                    return;
                }
                #[cfg(not(feature = "store"))]
                emit(Err(format!(
                    "{input}: this binary was built without object-storage inputs (the `store` feature)"
                )));
                continue;
            }
            let local = crate::store::file_url_path(input).unwrap_or_else(|| input.clone());
            let files = match crate::store::discover(&[local], kind.accepts()) {
                Ok(f) => f,
                Err(e) => {
                    emit(Err(e));
                    return;
                }
            };
            for f in files {
                if !read_local(&f.display().to_string(), kind, emit) {
                    return;
                }
            }
        }
    }

    /// Which shards are read, and how.
    #[derive(Clone, Debug)]
    pub enum Kind {
        /// Parquet shards, these columns.
        Parquet(ShardColumns),
        /// WebDataset tars; the job's input member is the one its name
        /// function takes.
        Tar(fn(&str) -> bool),
    }

    impl Kind {
        fn what(&self) -> &'static str {
            match self {
                Kind::Parquet(_) => "parquet",
                Kind::Tar(_) => "tar",
            }
        }

        fn flag(&self) -> &'static str {
            match self {
                Kind::Parquet(_) => "--input-parquet",
                Kind::Tar(_) => "--input-tar",
            }
        }

        /// The names a folder or prefix listing keeps.
        fn accepts(&self) -> fn(&str) -> bool {
            match self {
                Kind::Parquet(_) => is_parquet,
                Kind::Tar(_) => crate::store::tars::is_tar,
            }
        }
    }

    /// A shard that cannot be opened: one failed input named by it.
    fn unreadable(at: &str, why: String) -> ShardRow {
        failed(
            crate::store::root_key(at),
            at.to_string(),
            format!("{why}; give a readable shard"),
        )
    }

    /// Read the local shard `at`; false once `emit` is.
    fn read_local(at: &str, kind: &Kind, emit: &mut dyn FnMut(Item) -> bool) -> bool {
        match kind {
            Kind::Parquet(cols) => match local_reader(at) {
                Ok(r) => read_rows(at, r, cols, emit),
                Err(why) => emit(Ok(unreadable(at, why))),
            },
            Kind::Tar(accept) => match std::fs::File::open(at) {
                Ok(f) => read_tar_rows(at, &crate::store::tars::Windowed::new(f), *accept, emit),
                Err(e) => emit(Ok(unreadable(at, format!("{at}: {e}")))),
            },
        }
    }

    /// [`read_tar`](crate::store::tars::read_tar), each group emitted as an
    /// item; false once `emit` is.
    fn read_tar_rows(
        at: &str,
        r: &impl crate::store::tars::ReadAt,
        accept: fn(&str) -> bool,
        emit: &mut dyn FnMut(Item) -> bool,
    ) -> bool {
        let mut go = true;
        crate::store::tars::read_tar(at, r, accept, &mut |row| {
            go = emit(Ok(row));
            go
        });
        go
    }

    /// [`read_shard`], each row emitted as an item; false once `emit` is.
    fn read_rows<R: ShardReader>(
        shard: &str,
        reader: R,
        cols: &ShardColumns,
        emit: &mut dyn FnMut(Item) -> bool,
    ) -> bool {
        let mut go = true;
        read_shard(shard, reader, cols, &mut |row| {
            go = emit(Ok(row));
            go
        });
        go
    }

    /// Check, before a run, that the first shard opens and (Parquet) has
    /// the columns the flags name (local shards; a remote one with `store`),
    /// and that a build without `store` is given no URL (refused naming
    /// `rebuild`).
    pub fn check(inputs: &[String], kind: &Kind, built: bool, rebuild: &str) -> Result<(), String> {
        for input in inputs {
            if crate::store::input_list::is_remote(input) {
                crate::store::refuse_urls(
                    std::slice::from_ref(input),
                    built,
                    &format!("{rebuild} {}", kind.flag()),
                )?;
                #[cfg(feature = "store")]
                return remote::Remote::default().check(input, kind);
            }
            let local = crate::store::file_url_path(input).unwrap_or_else(|| input.clone());
            let files = crate::store::discover(&[local], kind.accepts())?;
            if let Some(first) = files.iter().find(|f| f.is_file()) {
                let at = first.display().to_string();
                return match kind {
                    Kind::Parquet(cols) => check_columns(&at, &local_reader(&at)?, cols),
                    Kind::Tar(_) => std::fs::File::open(&at)
                        .map(drop)
                        .map_err(|e| format!("{} {at}: {e}", kind.flag())),
                };
            }
        }
        Ok(())
    }

    #[cfg(feature = "store")]
    mod remote {
        use std::sync::{Arc, Mutex, OnceLock};

        use bytes::{Buf, Bytes};
        use futures::StreamExt;
        use object_store::path::Path as Key;
        use object_store::{ObjectStore, ObjectStoreExt};
        use parquet::errors::ParquetError;
        use parquet::file::reader::{ChunkReader, Length};

        use super::{Item, Kind, ShardReader};
        use crate::store::{StoreOptions, Stores};

        /// The shard thread's clients and the runtime their requests run on.
        #[derive(Default)]
        pub(super) struct Remote {
            rt: OnceLock<Result<Arc<tokio::runtime::Runtime>, String>>,
            stores: OnceLock<Arc<Stores>>,
        }

        impl Remote {
            fn rt(&self) -> Result<Arc<tokio::runtime::Runtime>, String> {
                self.rt
                    .get_or_init(|| {
                        tokio::runtime::Builder::new_current_thread()
                            .enable_all()
                            .build()
                            .map(Arc::new)
                            .map_err(|e| format!("no runtime to read shards ({e})"))
                    })
                    .clone()
            }

            fn stores(&self) -> Arc<Stores> {
                self.stores
                    .get_or_init(|| Stores::new(StoreOptions::default()))
                    .clone()
            }

            /// The shard URLs of `input` (a URL, a prefix or a pattern).
            fn list(&self, input: &str, kind: &Kind) -> Result<Vec<Arc<str>>, String> {
                let rt = self.rt()?;
                let listed: Vec<_> = rt.block_on(
                    crate::store::list(self.stores(), vec![input.to_string()], kind.accepts()).collect(),
                );
                listed
                    .into_iter()
                    .map(|o| o.map(|o| o.url).map_err(|e| e.to_string()))
                    .collect()
            }

            fn open(&self, url: &str) -> Result<RemoteShard, String> {
                let rt = self.rt()?;
                let (store, key) = self.stores().resolve(url).map_err(|e| e.to_string())?;
                let len = match rt.block_on(store.head(&key)) {
                    Ok(meta) => meta.size,
                    Err(object_store::Error::NotFound { .. }) => {
                        return Err(format!("{url}: no such object"));
                    }
                    Err(e) => return Err(format!("{url}: {e}")),
                };
                Ok(RemoteShard {
                    store,
                    key,
                    len,
                    rt,
                    cache: Arc::default(),
                })
            }

            /// Read every shard of `input`; false once `emit` is, or when the
            /// listing failed (emitted as the stream's last item).
            pub(super) fn read(&self, input: &str, kind: &Kind, emit: &mut dyn FnMut(Item) -> bool) -> bool {
                let urls = match self.list(input, kind) {
                    Ok(u) => u,
                    Err(e) => {
                        emit(Err(e));
                        return false;
                    }
                };
                for url in urls {
                    let go = match (self.open(&url), kind) {
                        (Ok(r), Kind::Parquet(cols)) => super::read_rows(&url, r, cols, emit),
                        (Ok(r), Kind::Tar(accept)) => {
                            super::read_tar_rows(&url, &crate::store::tars::Windowed::new(r), *accept, emit)
                        }
                        (Err(why), _) => emit(Ok(super::unreadable(&url, why))),
                    };
                    if !go {
                        return false;
                    }
                }
                true
            }

            /// The first shard of `input` lists, opens and (Parquet) has the
            /// columns.
            pub(super) fn check(&self, input: &str, kind: &Kind) -> Result<(), String> {
                let urls = self
                    .list(input, kind)
                    .map_err(|e| format!("{} {input}: {e}", kind.flag()))?;
                match (urls.first(), kind) {
                    (None, _) => Ok(()),
                    (Some(url), Kind::Parquet(cols)) => super::check_columns(url, &self.open(url)?, cols),
                    (Some(url), Kind::Tar(_)) => self.open(url).map(drop),
                }
            }
        }

        /// A shard in object storage, read by byte ranges; the row group about
        /// to be read is fetched in one request and served from memory.
        #[derive(Clone)]
        pub(super) struct RemoteShard {
            store: Arc<dyn ObjectStore>,
            key: Key,
            len: u64,
            rt: Arc<tokio::runtime::Runtime>,
            cache: Arc<Mutex<Option<(u64, Bytes)>>>,
        }

        impl RemoteShard {
            fn fetch(&self, range: std::ops::Range<u64>) -> parquet::errors::Result<Bytes> {
                self.rt
                    .block_on(self.store.get_range(&self.key, range))
                    .map_err(|e| ParquetError::External(Box::new(e)))
            }

            /// The cached bytes from `start` to the cache's end.
            fn cached_rest(&self, start: u64) -> Option<Bytes> {
                let cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
                let (at, bytes) = cache.as_ref()?;
                let from = start.checked_sub(*at)? as usize;
                (from < bytes.len()).then(|| bytes.slice(from..))
            }
        }

        impl Length for RemoteShard {
            fn len(&self) -> u64 {
                self.len
            }
        }

        /// Bytes read past `start` when a read is not in the row group's span.
        const WINDOW: u64 = 1 << 20;

        impl ChunkReader for RemoteShard {
            type T = bytes::buf::Reader<Bytes>;

            fn get_read(&self, start: u64) -> parquet::errors::Result<Self::T> {
                let rest = self.len.saturating_sub(start);
                if let Some(b) = self.cached_rest(start) {
                    return Ok(b.reader());
                }
                Ok(self.fetch(start..start + rest.min(WINDOW))?.reader())
            }

            fn get_bytes(&self, start: u64, length: usize) -> parquet::errors::Result<Bytes> {
                match self.cached_rest(start).filter(|b| b.len() >= length) {
                    Some(b) => Ok(b.slice(..length)),
                    None => self.fetch(start..start + length as u64),
                }
            }
        }

        impl crate::store::tars::ReadAt for RemoteShard {
            fn size(&self) -> u64 {
                self.len
            }

            fn read_at(&self, offset: u64, len: usize) -> Result<Vec<u8>, String> {
                self.fetch(offset..offset + len as u64)
                    .map(|b| b.to_vec())
                    .map_err(|e| format!("{len} bytes at offset {offset}: {e}"))
            }
        }

        impl ShardReader for RemoteShard {
            fn prefetch(&self, range: std::ops::Range<u64>) {
                let start = range.start;
                // A failed prefetch leaves reads to fetch their own ranges.
                let fetched = self.fetch(range).ok().map(|b| (start, b));
                *self.cache.lock().unwrap_or_else(|p| p.into_inner()) = fetched;
            }
        }
    }
}

/// Which shards are read (a build without `parquet` reads none).
#[cfg(not(feature = "parquet"))]
#[derive(Clone, Debug)]
pub enum Kind {
    /// Parquet shards, these columns.
    Parquet(ShardColumns),
    /// WebDataset tars.
    Tar(fn(&str) -> bool),
}

/// A build without the kit's `parquet` feature reads no shards: the
/// check refuses them.
#[cfg(not(feature = "parquet"))]
pub fn check(inputs: &[String], _kind: &Kind, _built: bool, _rebuild: &str) -> Result<(), String> {
    match inputs.first() {
        None => Ok(()),
        Some(i) => Err(format!(
            "--input-parquet {i}: this binary was built without Parquet (the kit's `parquet` feature)"
        )),
    }
}

/// No rows without the `parquet` feature ([`check`] refused the shards).
#[cfg(not(feature = "parquet"))]
pub fn rows(
    _inputs: Vec<String>,
    _kind: Kind,
) -> futures::stream::BoxStream<'static, Result<ShardRow, String>> {
    use futures::stream::StreamExt;
    futures::stream::empty().boxed()
}

#[cfg(all(test, feature = "parquet"))]
mod tests {
    use std::sync::Arc;

    use arrow_array::{BinaryArray, Int64Array, RecordBatch, StringArray};
    use arrow_schema::{DataType, Field, Schema};
    use parquet::arrow::ArrowWriter;
    use parquet::arrow::arrow_reader::{ArrowReaderMetadata, ArrowReaderOptions};
    use parquet::file::properties::WriterProperties;

    use super::*;

    /// A shard of `n` rows (`id`, `doc` bytes, `lang`, `pages`), two rows
    /// per row group; row 3's bytes are null.
    fn shard(n: usize) -> bytes::Bytes {
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Utf8, false),
            Field::new("doc", DataType::Binary, true),
            Field::new("lang", DataType::Utf8, true),
            Field::new("pages", DataType::Int64, false),
        ]));
        let ids: Vec<String> = (0..n).map(|i| format!("doc-{i}")).collect();
        let docs: Vec<Option<Vec<u8>>> = (0..n).map(|i| (i != 3).then(|| vec![i as u8; 3])).collect();
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![
                Arc::new(StringArray::from(ids)),
                Arc::new(BinaryArray::from_iter(docs)),
                Arc::new(StringArray::from_iter(
                    (0..n).map(|i| (i % 2 == 0).then_some("en")),
                )),
                Arc::new(Int64Array::from_iter_values((0..n).map(|i| i as i64 + 1))),
            ],
        )
        .unwrap();
        let props = WriterProperties::builder().set_max_row_group_size(2).build();
        let mut out = Vec::new();
        let mut w = ArrowWriter::try_new(&mut out, schema, Some(props)).unwrap();
        w.write(&batch).unwrap();
        w.close().unwrap();
        out.into()
    }

    fn read(shard_bytes: bytes::Bytes, cols: &ShardColumns) -> Vec<ShardRow> {
        let mut rows = Vec::new();
        read_shard("s.parquet", shard_bytes, cols, &mut |r| {
            rows.push(r);
            true
        });
        rows
    }

    fn bytes_cols(key: Option<&str>) -> ShardColumns {
        ShardColumns {
            input: InputColumn::Bytes("doc".into()),
            key: key.map(Into::into),
        }
    }

    #[test]
    fn every_row_is_one_input_with_its_other_columns_as_metadata() {
        let rows = read(shard(5), &bytes_cols(Some("id")));
        assert_eq!(rows.len(), 5);
        assert_eq!(&*rows[1].name, "doc-1");
        assert_eq!(rows[1].key, crate::store::root_key("doc-1"));
        assert!(matches!(&rows[1].input, Ok(RowInput::Bytes(b)) if b[..] == [1, 1, 1]));
        assert_eq!(
            rows[0].meta.as_deref(),
            Some(&serde_json::json!({"lang": "en", "pages": 1}))
        );
        assert_eq!(rows[1].meta.as_deref(), Some(&serde_json::json!({"pages": 2})));
        let null = rows[3].input.as_ref().unwrap_err();
        assert!(null.contains("row 3: `doc` is null"), "{null}");
        // Without a key column: shard and row.
        let rows = read(shard(3), &bytes_cols(None));
        assert_eq!(&*rows[2].name, "s.parquet#2");
        assert_eq!(rows[2].key, crate::store::root_key("s.parquet#2"));
    }

    #[test]
    fn an_unreadable_shard_or_row_group_fails_its_rows_only() {
        let good = shard(6);
        let rows = read(bytes::Bytes::from_static(b"PAR1 not parquet"), &bytes_cols(None));
        assert_eq!(rows.len(), 1);
        assert!(
            rows[0]
                .input
                .as_ref()
                .unwrap_err()
                .contains("not a readable Parquet file")
        );
        // Damage the second row group's data: its two rows fail, the rest read.
        let meta = ArrowReaderMetadata::load(&good, ArrowReaderOptions::default()).unwrap();
        let rg = meta.metadata().row_group(1);
        let (start, len) = rg.column(1).byte_range();
        let mut bad = good.to_vec();
        for b in &mut bad[start as usize..(start + len) as usize] {
            *b = 0xff;
        }
        let rows = read(bad.into(), &bytes_cols(Some("id")));
        assert_eq!(rows.len(), 6, "{rows:?}");
        let failed: Vec<&str> = rows
            .iter()
            .filter(|r| r.input.is_err())
            .map(|r| &*r.name)
            .collect();
        // Row 3 is null anyway; rows 2 and 3 are in the damaged group.
        assert_eq!(failed, ["s.parquet#2", "s.parquet#3"], "{rows:?}");
        assert!(
            rows[2]
                .input
                .as_ref()
                .unwrap_err()
                .contains("row group 1 cannot be decoded")
        );
    }

    #[test]
    fn a_url_column_resolves_next_to_the_shard_and_columns_are_checked() {
        let schema = Arc::new(Schema::new(vec![Field::new("path", DataType::Utf8, false)]));
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![Arc::new(StringArray::from(vec!["a.pdf", "s3://b/c.pdf"]))],
        )
        .unwrap();
        let mut out = Vec::new();
        let mut w = ArrowWriter::try_new(&mut out, schema, None).unwrap();
        w.write(&batch).unwrap();
        w.close().unwrap();
        let cols = ShardColumns {
            input: InputColumn::Url("path".into()),
            key: None,
        };
        let mut rows = Vec::new();
        let b = bytes::Bytes::from(out);
        read_shard("s3://b/shards/x.parquet", b.clone(), &cols, &mut |r| {
            rows.push(r);
            true
        });
        assert!(matches!(&rows[0].input, Ok(RowInput::At(a)) if a == "s3://b/shards/a.pdf"));
        assert!(matches!(&rows[1].input, Ok(RowInput::At(a)) if a == "s3://b/c.pdf"));
        assert!(check_columns("x", &b, &cols).is_ok());
        let e = check_columns("x", &b, &bytes_cols(Some("id"))).unwrap_err();
        assert!(
            e.contains("--bytes-column doc: the shard has no such column (it has path)"),
            "{e}"
        );
        let e = check_columns(
            "x",
            &b,
            &ShardColumns {
                input: InputColumn::Url("path".into()),
                key: Some("id".into()),
            },
        )
        .unwrap_err();
        assert!(e.contains("--key-column id"), "{e}");
    }
}
