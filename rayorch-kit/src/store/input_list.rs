//! Input lists (manifests): a JSONL or CSV file, local or in object
//! storage (`--features store`), whose rows each name one input (a URL or
//! a path, in the field `--url-field`, `url` by default) and carry the
//! rest of the row as that input's metadata, which the job writes beside
//! its output.
//!
//! ```text
//! {"url": "s3://corpus/a.pdf", "lang": "en", "source": "crawl-7"}
//! {"url": "docs/b.pdf", "lang": "de"}
//! ```
//!
//! Invariants:
//! - **Rows stream.** A local list is read line by line, an object's by
//!   its byte stream; memory holds one row (a CSV record whose quoted
//!   field spans lines included), never the list.
//! - **A row's key is its location's**: [`root_key`](super::root_key) of
//!   the resolved URL or path, the key a listed object of that URL has. A
//!   resumed run skips what its journal holds however the list was
//!   reordered; a location given twice is the engine's duplicate key (the
//!   second is one failure line, `input.duplicate_key`).
//! - **A bad row is one failed input, never a dead run**: a line that is
//!   no JSON object, a CSV record of the wrong width, a row without its
//!   location. Such a row is a root named `LIST:LINE` whose first Call
//!   fails with what is wrong and what to do ([`RowError`]); the others run.
//! - **Relative locations resolve against the list's own folder or
//!   prefix** (`s3://b/lists/x.jsonl` + `docs/a.pdf` =
//!   `s3://b/lists/docs/a.pdf`), so a list travels with its corpus.
//! - Only a list that cannot be opened (a missing file, a format not known
//!   by its extension, a CSV header without the location's column) is an
//!   error before the run ([`check`]); a list that breaks while it is read
//!   ends the stream and is reported like a broken listing.

use std::io::BufRead;
use std::sync::Arc;

use serde_json::{Map, Value};

/// One input list and the field that holds each row's location.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InputList {
    /// The list's path or URL.
    pub at: String,
    /// The JSON field or CSV column of each row's location.
    pub field: String,
}

/// The flags that give a job input lists (every job takes them).
#[derive(clap::Args, Clone, Debug, Default)]
pub struct ListFlags {
    /// Inputs listed in a JSONL or CSV file (local or a URL), one per row:
    /// the row's `--url-field` is the input's URL or path (relative ones
    /// are next to the list), every other field is metadata written
    /// beside its output. May be given more than once, and beside inputs.
    #[arg(long = "input-list", value_name = "FILE")]
    pub input_lists: Vec<String>,
    /// The JSON field or CSV column of `--input-list` rows that holds the
    /// input's location [default: url].
    #[arg(long, value_name = "NAME", requires = "input_lists")]
    pub url_field: Option<String>,
}

impl ListFlags {
    /// The lists the flags name.
    pub fn lists(&self) -> Vec<InputList> {
        let field = self.url_field.clone().unwrap_or_else(|| "url".into());
        self.input_lists
            .iter()
            .map(|at| InputList {
                at: at.clone(),
                field: field.clone(),
            })
            .collect()
    }
}

/// How a list's rows are written, by its extension.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// One JSON object per line (`.jsonl`, `.ndjson`).
    Jsonl,
    /// Comma-separated values with a header row (`.csv`, RFC 4180 quoting).
    Csv,
}

impl Format {
    /// The format of the list at `at`, by its extension.
    ///
    /// ```
    /// use rayorch_kit::store::input_list::Format;
    /// assert_eq!(Format::of("s3://b/l/x.JSONL"), Ok(Format::Jsonl));
    /// assert_eq!(Format::of("x.csv"), Ok(Format::Csv));
    /// assert!(Format::of("x.json").unwrap_err().contains(".jsonl"));
    /// ```
    pub fn of(at: &str) -> Result<Format, String> {
        let name = at.rsplit('/').next().unwrap_or(at).to_ascii_lowercase();
        match name.rsplit_once('.').map(|(_, e)| e) {
            Some("jsonl" | "ndjson") => Ok(Format::Jsonl),
            Some("csv") => Ok(Format::Csv),
            _ => Err(format!(
                "--input-list {at}: not a list this job reads by its name; give a `.jsonl` (one JSON object per line) or a `.csv` with a header row"
            )),
        }
    }
}

/// Why a row names no input (the failed root's cause).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RowError(pub String);

/// One row of a list: the input's resolved location and metadata, or why
/// the row names none; `line` is where the row starts (1-based).
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    /// The line the row starts on.
    pub line: u64,
    /// The location (URL or path), resolved against the list's folder.
    pub entry: Result<Entry, RowError>,
}

/// What a good row names.
#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    /// The input's URL or path.
    pub at: String,
    /// The row's other fields (`None` when it has none).
    pub meta: Option<Arc<Value>>,
}

impl Row {
    /// The name of a bad row's root: `LIST:LINE`.
    pub fn name(&self, list: &str) -> String {
        match &self.entry {
            Ok(e) => e.at.clone(),
            Err(_) => format!("{list}:{}", self.line),
        }
    }
}

/// `loc` as a job reads it: a `file://` URL as its path; a URL or an
/// absolute path as it is; anything else next to the list at `list`.
///
/// ```
/// use rayorch_kit::store::input_list::resolve;
/// assert_eq!(resolve("s3://b/lists/x.jsonl", "docs/a.pdf"), "s3://b/lists/docs/a.pdf");
/// assert_eq!(resolve("lists/x.csv", "a.pdf"), "lists/a.pdf");
/// assert_eq!(resolve("x.csv", "a.pdf"), "a.pdf");
/// assert_eq!(resolve("lists/x.csv", "/data/a.pdf"), "/data/a.pdf");
/// assert_eq!(resolve("lists/x.csv", "https://h/a.pdf"), "https://h/a.pdf");
/// assert_eq!(resolve("s3://b/x.csv", "file:///data/a.pdf"), "/data/a.pdf");
/// ```
pub fn resolve(list: &str, loc: &str) -> String {
    if let Some(p) = super::file_url_path(loc) {
        return p;
    }
    if super::is_url(loc) || loc.starts_with('/') {
        return loc.to_string();
    }
    let list = super::file_url_path(list).unwrap_or_else(|| list.to_string());
    match list.rfind('/') {
        Some(i) => format!("{}{loc}", &list[..=i]),
        None => loc.to_string(),
    }
}

/// Turns a list's lines into rows (see the module note): the CSV header
/// is the first record; a quoted CSV field may span lines.
#[derive(Debug)]
pub struct RowReader {
    list: String,
    field: String,
    format: Format,
    /// The CSV header, once read.
    header: Option<Vec<String>>,
    /// A CSV record still inside a quoted field, and its first line.
    pending: Option<(u64, String)>,
    line: u64,
}

impl RowReader {
    /// A reader of the list at `list` (its format by extension), whose
    /// location is in `field`.
    pub fn new(list: &InputList) -> Result<RowReader, String> {
        Ok(RowReader {
            format: Format::of(&list.at)?,
            list: list.at.clone(),
            field: list.field.clone(),
            header: None,
            pending: None,
            line: 0,
        })
    }

    /// The next line of the list (without its line end; `Err`: not UTF-8):
    /// the row it ends, if any. A CSV header without the location's column
    /// is the list's error.
    pub fn line(&mut self, text: Result<&str, String>) -> Result<Option<Row>, String> {
        self.line += 1;
        let text = match text {
            Ok(t) => {
                // A byte-order mark (spreadsheet exports write one) is no text.
                let t = match self.line {
                    1 => t.strip_prefix('\u{feff}').unwrap_or(t),
                    _ => t,
                };
                t.strip_suffix('\r').unwrap_or(t)
            }
            Err(why) => {
                self.pending = None;
                return Ok(Some(
                    self.bad(self.line, format!("the line is not UTF-8 text ({why})")),
                ));
            }
        };
        match self.format {
            Format::Jsonl => Ok(self.json(text)),
            Format::Csv => self.csv(text),
        }
    }

    /// The list ended: a CSV record left inside a quoted field is a bad row.
    pub fn finish(&mut self) -> Option<Row> {
        let (line, _) = self.pending.take()?;
        Some(self.bad(
            line,
            "a quoted field is never closed (the list ends inside it)".into(),
        ))
    }

    fn bad(&self, line: u64, why: String) -> Row {
        Row {
            line,
            entry: Err(RowError(format!(
                "input list {} line {line}: {why}; fix or remove the row",
                self.list
            ))),
        }
    }

    fn entry(&self, line: u64, loc: Option<String>, meta: Map<String, Value>) -> Row {
        match loc.filter(|l| !l.trim().is_empty()) {
            None => self.bad(line, format!("no `{}` (the input's URL or path)", self.field)),
            Some(loc) => Row {
                line,
                entry: Ok(Entry {
                    at: resolve(&self.list, loc.trim()),
                    meta: (!meta.is_empty()).then(|| Arc::new(Value::Object(meta))),
                }),
            },
        }
    }

    fn json(&self, text: &str) -> Option<Row> {
        if text.trim().is_empty() {
            return None;
        }
        Some(match serde_json::from_str::<Value>(text) {
            Ok(Value::Object(mut row)) => match row.remove(&self.field) {
                Some(Value::String(loc)) => self.entry(self.line, Some(loc), row),
                None | Some(Value::Null) => self.entry(self.line, None, row),
                Some(other) => self.bad(
                    self.line,
                    format!("`{}` is {other}, not a string (a URL or path)", self.field),
                ),
            },
            Ok(other) => self.bad(self.line, format!("{} is not a JSON object", kind_of(&other))),
            Err(e) => self.bad(self.line, format!("not JSON ({e})")),
        })
    }

    fn csv(&mut self, text: &str) -> Result<Option<Row>, String> {
        let (start, record) = match self.pending.take() {
            Some((start, mut so_far)) => {
                so_far.push('\n');
                so_far.push_str(text);
                (start, so_far)
            }
            None if text.is_empty() => return Ok(None),
            None => (self.line, text.to_string()),
        };
        let Some(fields) = csv_fields(&record) else {
            self.pending = Some((start, record));
            return Ok(None);
        };
        let Some(header) = &self.header else {
            if !fields.contains(&self.field) {
                return Err(format!(
                    "--input-list {}: its header ({}) has no `{}` column; name the column of the inputs' URLs or paths with --url-field",
                    self.list,
                    fields.join(", "),
                    self.field
                ));
            }
            self.header = Some(fields);
            return Ok(None);
        };
        if fields.len() != header.len() {
            return Ok(Some(self.bad(
                start,
                format!("{} fields where the header has {}", fields.len(), header.len()),
            )));
        }
        let mut loc = None;
        let mut meta = Map::new();
        for (name, value) in header.iter().zip(fields) {
            if *name == self.field {
                loc = Some(value);
            } else {
                meta.insert(name.clone(), Value::String(value));
            }
        }
        Ok(Some(self.entry(start, loc, meta)))
    }
}

fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Array(_) => "an array",
        Value::String(_) => "a string",
        Value::Number(_) => "a number",
        Value::Bool(_) => "a boolean",
        Value::Null => "null",
        Value::Object(_) => "an object",
    }
}

/// The fields of one CSV record (RFC 4180: `"` quotes a field, `""` is a
/// quote inside one); `None` while a quoted field is still open.
fn csv_fields(record: &str) -> Option<Vec<String>> {
    let mut fields = Vec::new();
    let mut field = String::new();
    let mut quoted = false;
    let mut chars = record.chars().peekable();
    while let Some(c) = chars.next() {
        match (quoted, c) {
            (true, '"') if chars.peek() == Some(&'"') => {
                chars.next();
                field.push('"');
            }
            (true, '"') => quoted = false,
            (false, '"') if field.is_empty() => quoted = true,
            (false, ',') => fields.push(std::mem::take(&mut field)),
            (_, c) => field.push(c),
        }
    }
    if quoted {
        return None;
    }
    fields.push(field);
    Some(fields)
}

/// The rows of a local list, as they are read.
pub fn local_rows(list: &InputList) -> Result<impl Iterator<Item = Result<Row, String>> + use<>, String> {
    let mut reader = RowReader::new(list)?;
    let file = std::fs::File::open(&list.at).map_err(|e| format!("--input-list {}: {e}", list.at))?;
    let mut lines = std::io::BufReader::new(file).split(b'\n');
    let at = list.at.clone();
    let mut ended = false;
    Ok(std::iter::from_fn(move || {
        loop {
            if ended {
                return None;
            }
            match lines.next() {
                None => {
                    ended = true;
                    return reader.finish().map(Ok);
                }
                Some(Err(e)) => {
                    ended = true;
                    return Some(Err(format!("--input-list {at}: reading it failed ({e})")));
                }
                Some(Ok(bytes)) => {
                    let text = std::str::from_utf8(&bytes).map_err(|e| e.to_string());
                    match reader.line(text) {
                        Ok(Some(row)) => return Some(Ok(row)),
                        Ok(None) => {}
                        Err(e) => {
                            ended = true;
                            return Some(Err(e));
                        }
                    }
                }
            }
        }
    }))
}

/// Is the list at `at` in object storage (not a local path or `file://`)?
pub fn is_remote(at: &str) -> bool {
    super::is_url(at) && super::file_url_path(at).is_none()
}

/// `list` with a `file://` location read as its path.
fn local(list: &InputList) -> InputList {
    InputList {
        at: super::file_url_path(&list.at).unwrap_or_else(|| list.at.clone()),
        field: list.field.clone(),
    }
}

/// The rows of `lists`, in order, as they are read: local lists from the
/// file system, remote ones (`store`) through clients of their own. An
/// `Err` is the last item (a list that cannot be opened or broke while it
/// was read). A build without `store` never sees a remote list ([`check`]
/// refused it).
pub fn rows(lists: Vec<InputList>) -> futures::stream::BoxStream<'static, (InputList, Result<Row, String>)> {
    use futures::stream::{self, StreamExt};
    #[cfg(feature = "store")]
    let stores = super::Stores::new(super::StoreOptions::default());
    stream::iter(lists)
        .flat_map(move |list| {
            #[cfg(feature = "store")]
            if is_remote(&list.at) {
                let rows = remote::rows(stores.clone(), list.clone());
                return rows.map(move |r| (list.clone(), r)).boxed();
            }
            let rows = match local_rows(&local(&list)) {
                Ok(rows) => stream::iter(rows).boxed(),
                Err(e) => stream::iter([Err(e)]).boxed(),
            };
            rows.map(move |r| (list.clone(), r)).boxed()
        })
        .scan(false, |ended, item| {
            // The first error is the last item.
            let out = (!*ended).then_some(item);
            if let Some((_, Err(_))) = &out {
                *ended = true;
            }
            futures::future::ready(out)
        })
        .boxed()
}

/// Check that each list opens (its format; the file, or the object; a CSV
/// header with the location's column) before the run touches anything:
/// what is read is the first row. A remote list in a build without
/// `store` is refused naming `rebuild`.
pub fn check(lists: &[InputList], built: bool, rebuild: &str) -> Result<(), String> {
    for list in lists {
        Format::of(&list.at)?;
        if is_remote(&list.at) {
            super::refuse_urls(
                std::slice::from_ref(&list.at),
                built,
                &format!("{rebuild} --input-list"),
            )?;
            #[cfg(feature = "store")]
            remote::check(list)?;
            continue;
        }
        let mut rows = local_rows(&local(list))?;
        if let Some(Err(e)) = rows.next() {
            return Err(e);
        }
    }
    Ok(())
}

#[cfg(feature = "store")]
mod remote {
    use std::collections::VecDeque;
    use std::sync::Arc;

    use futures::stream::{self, BoxStream, StreamExt};
    use object_store::ObjectStoreExt;

    use super::{InputList, Row, RowReader};

    /// Check that the list at a URL opens and its first row reads, on a
    /// runtime of its own (the run reads it again).
    pub(super) fn check(list: &InputList) -> Result<(), String> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("--input-list {}: no runtime for the check ({e})", list.at))?;
        let stores = crate::store::Stores::new(crate::store::StoreOptions::default());
        match rt.block_on(rows(stores, list.clone()).next()) {
            Some(Err(e)) => Err(e),
            _ => Ok(()),
        }
    }

    struct Reading {
        reader: RowReader,
        body: BoxStream<'static, object_store::Result<bytes::Bytes>>,
        buf: Vec<u8>,
        ready: VecDeque<Result<Row, String>>,
        /// Nothing more is read from the body.
        ended: bool,
        at: String,
    }

    impl Reading {
        fn line(&mut self, bytes: &[u8]) {
            let text = std::str::from_utf8(bytes).map_err(|e| e.to_string());
            match self.reader.line(text) {
                Ok(row) => self.ready.extend(row.map(Ok)),
                Err(e) => {
                    self.ready.push_back(Err(e));
                    self.ended = true;
                }
            }
        }

        /// Every whole line in the buffer, read.
        fn lines(&mut self) {
            let mut from = 0;
            while let Some(i) = self.buf[from..].iter().position(|b| *b == b'\n') {
                if self.ended {
                    break;
                }
                let line = self.buf[from..from + i].to_vec();
                self.line(&line);
                from += i + 1;
            }
            self.buf.drain(..from);
        }
    }

    /// The rows of the object at `list.at`, as its bytes arrive.
    pub(super) fn rows(
        stores: Arc<crate::store::Stores>,
        list: InputList,
    ) -> BoxStream<'static, Result<Row, String>> {
        let opened = async move {
            let reader = RowReader::new(&list)?;
            let at = list.at.clone();
            let fail = |e: &dyn std::fmt::Display| format!("--input-list {at}: {e}");
            let (store, key) = stores.resolve(&list.at).map_err(|e| fail(&e))?;
            let got = match store.get(&key).await {
                Ok(got) => got,
                Err(object_store::Error::NotFound { .. }) => return Err(fail(&"no such object")),
                Err(e) => return Err(fail(&e)),
            };
            Ok(Reading {
                reader,
                body: got.into_stream(),
                buf: Vec::new(),
                ready: VecDeque::new(),
                ended: false,
                at,
            })
        };
        stream::once(opened)
            .flat_map(|opened| match opened {
                Err(e) => stream::iter([Err(e)]).boxed(),
                Ok(reading) => stream::unfold(reading, next).boxed(),
            })
            .boxed()
    }

    async fn next(mut r: Reading) -> Option<(Result<Row, String>, Reading)> {
        loop {
            if let Some(row) = r.ready.pop_front() {
                if row.is_err() {
                    r.ready.clear();
                    r.ended = true;
                }
                return Some((row, r));
            }
            if r.ended {
                return None;
            }
            match r.body.next().await {
                Some(Ok(chunk)) => {
                    r.buf.extend_from_slice(&chunk);
                    r.lines();
                }
                Some(Err(e)) => {
                    r.ready
                        .push_back(Err(format!("--input-list {}: reading it failed ({e})", r.at)));
                    r.ended = true;
                }
                None => {
                    r.ended = true;
                    if !r.buf.is_empty() {
                        let rest = std::mem::take(&mut r.buf);
                        r.line(&rest);
                    }
                    r.ready.extend(r.reader.finish().map(Ok));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows(at: &str, field: &str, lines: &[&str]) -> Result<Vec<Row>, String> {
        let mut r = RowReader::new(&InputList {
            at: at.into(),
            field: field.into(),
        })?;
        let mut out = Vec::new();
        for l in lines {
            out.extend(r.line(Ok(l))?);
        }
        out.extend(r.finish());
        Ok(out)
    }

    fn at(row: &Row) -> &str {
        &row.entry.as_ref().unwrap().at
    }

    fn why(row: &Row) -> &str {
        &row.entry.as_ref().unwrap_err().0
    }

    #[test]
    fn jsonl_rows_give_a_location_and_the_other_fields_as_metadata() {
        let r = rows(
            "s3://b/l/x.jsonl",
            "url",
            &[
                r#"{"url": "a.pdf", "lang": "en", "n": 3}"#,
                "",
                r#"{"url": "https://h/b.pdf"}"#,
                r#"not json"#,
                r#"[1, 2]"#,
                r#"{"lang": "de"}"#,
                r#"{"url": 7}"#,
                r#"{"url": "  "}"#,
            ],
        )
        .unwrap();
        assert_eq!(r.len(), 7);
        assert_eq!(at(&r[0]), "s3://b/l/a.pdf");
        assert_eq!(
            r[0].entry.as_ref().unwrap().meta.as_deref(),
            Some(&serde_json::json!({"lang": "en", "n": 3}))
        );
        assert_eq!((at(&r[1]), r[1].line), ("https://h/b.pdf", 3));
        assert_eq!(r[1].entry.as_ref().unwrap().meta, None);
        assert!(why(&r[2]).starts_with("input list s3://b/l/x.jsonl line 4: not JSON"));
        assert!(why(&r[2]).ends_with("fix or remove the row"));
        assert!(why(&r[3]).contains("an array is not a JSON object"));
        assert!(why(&r[4]).contains("no `url`"));
        assert!(why(&r[5]).contains("`url` is 7, not a string"));
        assert!(why(&r[6]).contains("no `url`"));
        assert_eq!(r[6].name("x.jsonl"), "x.jsonl:8");
        assert_eq!(r[0].name("x.jsonl"), "s3://b/l/a.pdf");
    }

    #[test]
    fn csv_rows_follow_their_header_with_quotes_and_lines_inside_fields() {
        let r = rows(
            "lists/x.csv",
            "path",
            &[
                "\u{feff}id,path,title\r",
                "1,a.pdf,plain",
                r#"2,"b, c.pdf","a ""quoted"" title""#,
                r#"3,d.pdf,"two"#,
                r#"lines""#,
                "4,e.pdf",
                "5,,empty",
                r#"6,f.pdf,"never closed"#,
            ],
        )
        .unwrap();
        assert_eq!(r.len(), 6);
        assert_eq!(at(&r[0]), "lists/a.pdf");
        assert_eq!(
            r[0].entry.as_ref().unwrap().meta.as_deref(),
            Some(&serde_json::json!({"id": "1", "title": "plain"}))
        );
        assert_eq!(at(&r[1]), "lists/b, c.pdf");
        assert_eq!(
            r[1].entry.as_ref().unwrap().meta.as_deref().unwrap()["title"],
            "a \"quoted\" title"
        );
        assert_eq!((at(&r[2]), r[2].line), ("lists/d.pdf", 4));
        assert_eq!(
            r[2].entry.as_ref().unwrap().meta.as_deref().unwrap()["title"],
            "two\nlines"
        );
        assert!(why(&r[3]).contains("line 6: 2 fields where the header has 3"));
        assert!(why(&r[4]).contains("line 7: no `path`"));
        assert!(why(&r[5]).contains("line 8: a quoted field is never closed"));
    }

    #[test]
    fn a_csv_header_without_the_column_is_the_lists_error() {
        let e = rows("x.csv", "url", &["id,path", "1,a.pdf"]).unwrap_err();
        assert!(e.contains("no `url` column") && e.contains("--url-field"), "{e}");
        assert!(rows("x.txt", "url", &[]).unwrap_err().contains(".jsonl"));
    }

    #[test]
    fn a_local_list_is_checked_before_the_run_and_read_row_by_row() {
        let dir = tempfile::tempdir().unwrap();
        let list = |name: &str, body: &[u8]| {
            let p = dir.path().join(name);
            std::fs::write(&p, body).unwrap();
            InputList {
                at: p.display().to_string(),
                field: "url".into(),
            }
        };
        let good = list(
            "ok.jsonl",
            b"{\"url\": \"a.pdf\"}\n\xff\xfe\n{\"url\": \"/x/b.pdf\"}",
        );
        check(std::slice::from_ref(&good), false, "cargo run --").unwrap();
        let rows: Vec<Row> = local_rows(&good).unwrap().map(Result::unwrap).collect();
        assert_eq!(rows.len(), 3);
        assert_eq!(at(&rows[0]), format!("{}/a.pdf", dir.path().display()));
        assert!(why(&rows[1]).contains("line 2: the line is not UTF-8"));
        assert_eq!(at(&rows[2]), "/x/b.pdf");

        let no_column = list("bad.csv", b"id,path\n1,a.pdf\n");
        assert!(
            check(&[no_column], false, "x")
                .unwrap_err()
                .contains("no `url` column")
        );
        let missing = InputList {
            at: dir.path().join("none.jsonl").display().to_string(),
            field: "url".into(),
        };
        assert!(
            check(&[missing], false, "x")
                .unwrap_err()
                .starts_with("--input-list ")
        );
        let remote = InputList {
            at: "s3://b/l.jsonl".into(),
            field: "url".into(),
        };
        let e = check(&[remote], false, "cargo run --example j --").unwrap_err();
        assert!(e.contains("--input-list s3://b/l.jsonl"), "{e}");
    }
}
