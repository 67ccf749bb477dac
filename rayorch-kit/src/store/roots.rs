//! A job's roots from its inputs: local files (found before the run) and,
//! with `store`, the objects of object-store inputs (listed while the run
//! goes), one stream, for every job.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use futures::stream::{self, BoxStream, StreamExt};

use super::input_list::{self, InputList, RowError};
use super::shards::{self, RowInput, ShardColumns, ShardRow};
use crate::names::{Meta, RootNames};

/// How a job makes a root from a name and an input's bytes.
pub type FromBytes<T> = fn(Arc<str>, Arc<[u8]>) -> T;

/// What a run reads as it goes besides listed objects: its input lists
/// (`--input-list`) and Parquet shards (`--input-parquet`).
#[derive(Clone, Debug, Default)]
pub struct Streamed {
    /// Input lists.
    pub lists: Vec<InputList>,
    /// Parquet shard inputs and the columns to read.
    pub shards: Option<(Vec<String>, ShardColumns)>,
    /// WebDataset tar shard inputs.
    pub tars: Vec<String>,
}

impl Streamed {
    /// What the job's flags name.
    pub fn of(flags: &crate::job::RunFlags) -> Result<Streamed, String> {
        Ok(Streamed {
            lists: flags.lists.lists(),
            shards: flags.shards.shards()?,
            tars: flags.shards.input_tar.clone(),
        })
    }

    /// Neither lists nor shards.
    pub fn is_empty(&self) -> bool {
        self.lists.is_empty() && self.shards.is_none() && self.tars.is_empty()
    }

    /// How the journal's source digest names them.
    pub fn describe(&self) -> Vec<String> {
        let lists = self.lists.iter().map(|l| format!("list {} ({})", l.at, l.field));
        let shards = self.shards.iter().flat_map(|(inputs, cols)| {
            inputs
                .iter()
                .map(move |i| format!("shards {i} ({:?}, key {:?})", cols.input, cols.key))
        });
        let tars = self.tars.iter().map(|t| format!("tars {t}"));
        lists.chain(shards).chain(tars).collect()
    }
}

/// Split a job's inputs into local files ([`discover`]ed now, at most
/// `limit`) and object-store inputs (each checked to list before the run
/// touches anything); `file://` URLs are local paths. Its input lists and
/// shards (`streamed`) are checked to open ([`input_list::check`],
/// [`shards::check`]). In a job built without
/// object-storage inputs (`built` false) a URL is refused, naming
/// `rebuild`. Inputs that hold nothing `accept`able, with no list beside
/// them, are an error naming `what` ("PDF files").
pub fn split(
    inputs: &[String],
    streamed: &Streamed,
    built: bool,
    rebuild: &str,
    limit: Option<usize>,
    accept: fn(&str) -> bool,
    what: &str,
) -> Result<(Vec<PathBuf>, Vec<String>), rayorch::BoxError> {
    super::refuse_urls(inputs, built, rebuild)?;
    input_list::check(&streamed.lists, built, rebuild)?;
    if let Some((shard_inputs, cols)) = &streamed.shards {
        shards::check(shard_inputs, &shards::Kind::Parquet(cols.clone()), built, rebuild)?;
    }
    shards::check(&streamed.tars, &shards::Kind::Tar(accept), built, rebuild)?;
    let (urls, local): (Vec<String>, Vec<String>) = inputs
        .iter()
        .map(|i| super::file_url_path(i).unwrap_or_else(|| i.clone()))
        .partition(|i| super::is_url(i));
    let mut files = discover(&local, accept)?;
    if let Some(n) = limit {
        files.truncate(n);
    }
    let listable = check(&urls, accept)?;
    if files.is_empty() && listable == 0 && streamed.is_empty() {
        return Err(format!("no {what} found in {}", inputs.join(", ")).into());
    }
    Ok((files, urls))
}

/// Every file of a folder and its subfolders that `accept` takes (by
/// path), in sorted order.
fn walk(dir: &Path, accept: fn(&str) -> bool, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)?
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<_, _>>()?;
    entries.sort();
    for p in entries {
        if p.is_dir() {
            walk(&p, accept, out)?;
        } else if accept(&p.to_string_lossy()) {
            out.push(p);
        }
    }
    Ok(())
}

/// Expand local inputs to files, in a stable order, without duplicates:
/// a folder gives every file below it that `accept` takes (a folder named
/// like one, `x.pdf/`, is searched, never taken); a glob pattern gives the
/// files it matches; a named file is taken whatever its name (the job's
/// reader says if it is not what it should be). An input that is neither
/// a file, a folder nor a pattern matching files is kept as a path too:
/// the run reports it as a failed input and goes on with the others. Only
/// a folder that cannot be listed, or a malformed pattern, is an error.
///
/// ```
/// let dir = tempfile::tempdir().unwrap();
/// for f in ["b.pdf", "a.pdf", "notes.txt", "sub/c.pdf"] {
///     let p = dir.path().join(f);
///     std::fs::create_dir_all(p.parent().unwrap()).unwrap();
///     std::fs::write(p, b"").unwrap();
/// }
/// std::fs::create_dir_all(dir.path().join("odd.pdf")).unwrap();
/// let is_pdf = |n: &str| n.ends_with(".pdf");
/// let d = dir.path().display().to_string();
/// let found = rayorch_kit::store::discover(&[d.clone(), format!("{d}/a.pdf"), format!("{d}/missing.pdf")], is_pdf).unwrap();
/// let names: Vec<String> = found.iter().map(|p| p.strip_prefix(dir.path()).unwrap().display().to_string()).collect();
/// assert_eq!(names, ["a.pdf", "b.pdf", "sub/c.pdf", "missing.pdf"]);
/// ```
pub fn discover(inputs: &[String], accept: fn(&str) -> bool) -> Result<Vec<PathBuf>, String> {
    let mut files = Vec::new();
    for input in inputs {
        let p = Path::new(input);
        if p.is_dir() {
            walk(p, accept, &mut files).map_err(|e| format!("{input}: {e}"))?;
        } else if p.is_file() || !input.contains(['*', '?', '[']) {
            files.push(p.to_path_buf());
        } else {
            let matches: Vec<PathBuf> = glob::glob(input)
                .map_err(|e| format!("{input}: not a file, folder or valid glob pattern ({e})"))?
                .filter_map(Result::ok)
                .filter(|m| m.is_file())
                .collect();
            if matches.is_empty() {
                // Nothing matches: one failure line names the pattern.
                files.push(p.to_path_buf());
            }
            files.extend(matches);
        }
    }
    let mut seen = HashSet::new();
    files.retain(|f| seen.insert(f.clone()));
    Ok(files)
}

#[cfg(feature = "store")]
fn check(urls: &[String], accept: fn(&str) -> bool) -> Result<usize, rayorch::BoxError> {
    Ok(super::check_listing(
        urls,
        accept,
        &super::StoreOptions::default(),
    )?)
}

#[cfg(not(feature = "store"))]
fn check(_urls: &[String], _accept: fn(&str) -> bool) -> Result<usize, rayorch::BoxError> {
    Ok(0)
}

/// The roots of a run: local files first, keyed by their place in the
/// list, then the rows of the input lists as they are read, keyed by
/// their location ([`input_list`]), then each object of the object-store
/// inputs as it is listed, keyed by its URL
/// ([`root_key`](super::root_key)), at most `limit` in all. Local names are given before the run; an object's name (its URL)
/// is given to [`RootNames`] as it is yielded (unless the journal holds it
/// already). A listing error ends the stream and is kept for the report
/// ([`Roots::listing_error`]).
pub struct Roots<T> {
    /// Local files, keyed by their place in this list.
    pub files: Vec<PathBuf>,
    /// Object-store inputs (URLs and patterns), listed as the run goes.
    pub urls: Vec<String>,
    /// Input lists and shards, read as the run goes.
    pub streamed: Streamed,
    limit: Option<usize>,
    names: Arc<RootNames>,
    done: Arc<HashSet<u64>>,
    listed: Arc<Listed>,
    /// Leave the `done` roots out of the stream (no journal skips them).
    skip_done: bool,
    accept: fn(&str) -> bool,
    from_path: fn(&Path) -> T,
    from_url: fn(Arc<str>) -> T,
    invalid: fn(Arc<str>, String) -> T,
    from_bytes: Option<FromBytes<T>>,
}

/// The listing's count and its error, filled while the run goes.
#[derive(Default)]
struct Listed {
    objects: AtomicU64,
    error: Mutex<Option<String>>,
}

/// How a job makes its root value from a local file and from an object's
/// URL, and which listed names it takes.
#[derive(Clone, Copy)]
pub struct RootKind<T> {
    /// Names a prefix listing keeps (the job's file types).
    pub accept: fn(&str) -> bool,
    /// The root of a local file.
    pub from_path: fn(&Path) -> T,
    /// The root of an object (fetched by the job's fetch Call).
    pub from_url: fn(Arc<str>) -> T,
    /// The root, named by its first argument, of an input list's row that
    /// names no input: it fails at its first Call with the second, the
    /// row's [`RowError`].
    pub invalid: fn(Arc<str>, String) -> T,
    /// The root of an input given as bytes (a Parquet shard's bytes
    /// column), named by its first argument; `None`: the job takes no
    /// bytes (such a row fails, saying so).
    pub from_bytes: Option<FromBytes<T>>,
}

impl<T: Send + 'static> Roots<T> {
    /// The roots of `files`, `lists` and `urls` (from [`split`]), at most
    /// `limit`; `names` gets the local files' names now (but those in
    /// `done`, the keys the journal holds).
    pub fn new(
        files: Vec<PathBuf>,
        (streamed, urls): (Streamed, Vec<String>),
        limit: Option<usize>,
        names: Arc<RootNames>,
        done: HashSet<u64>,
        kind: RootKind<T>,
    ) -> Roots<T> {
        for (k, f) in files.iter().enumerate() {
            if !done.contains(&(k as u64)) {
                names.insert(k as u64, f.display().to_string());
            }
        }
        Roots {
            files,
            urls,
            streamed,
            limit,
            names,
            done: Arc::new(done),
            listed: Arc::default(),
            skip_done: false,
            accept: kind.accept,
            from_path: kind.from_path,
            from_url: kind.from_url,
            invalid: kind.invalid,
            from_bytes: kind.from_bytes,
        }
    }

    /// Leave the roots in `done` out of the stream: for a run whose
    /// outputs, not a journal, say what is done (outputs at a URL). By
    /// default they are yielded and the run's journal skips them.
    #[must_use]
    pub fn skipping_done(mut self) -> Roots<T> {
        self.skip_done = true;
        self
    }

    /// "N `what`" (local), the input lists and the object-store inputs,
    /// for the console.
    pub fn describe(&self, what: &str) -> String {
        let mut streamed: Vec<String> = self
            .streamed
            .lists
            .iter()
            .map(|l| format!("the rows of {}", l.at))
            .collect();
        if let Some((inputs, _)) = &self.streamed.shards {
            streamed.push(format!("the rows of the Parquet shards {}", inputs.join(", ")));
        }
        if !self.streamed.tars.is_empty() {
            streamed.push(format!(
                "the samples of the tar shards {}",
                self.streamed.tars.join(", ")
            ));
        }
        if !self.urls.is_empty() {
            streamed.push(format!("the objects of {}", self.urls.join(", ")));
        }
        match streamed.len() {
            0 => format!("{} {what}", self.files.len()),
            _ => format!("{} local {what} and {}", self.files.len(), streamed.join(" and ")),
        }
    }

    /// The roots as the run admits them.
    pub fn stream(&self) -> BoxStream<'static, (u64, T)> {
        let from_path = self.from_path;
        let local: Vec<(u64, T)> = self
            .files
            .iter()
            .enumerate()
            .map(|(i, p)| (i as u64, from_path(p)))
            .collect();
        let (names, done, listed) = (self.names.clone(), self.done.clone(), self.listed.clone());
        let remote = self
            .rows()
            .chain(self.shard_rows())
            .chain(self.tar_rows())
            .chain(self.remote().map(|(k, url, root)| (k, url, None, root)));
        let remote = remote.map(move |(k, name, meta, root)| {
            listed.objects.fetch_add(1, Ordering::Relaxed);
            if !done.contains(&k) {
                names.insert_with(k, name, meta);
            }
            (k, root)
        });
        let (skip, done) = (self.skip_done, self.done.clone());
        stream::iter(local)
            .chain(remote)
            .take(self.limit.unwrap_or(usize::MAX))
            .filter(move |(k, _)| futures::future::ready(!(skip && done.contains(k))))
            .boxed()
    }

    /// The input lists' rows: a good row's root from its location (a URL
    /// or a path), a bad row's failing root named `LIST:LINE`.
    fn rows(&self) -> BoxStream<'static, (u64, Arc<str>, Option<Meta>, T)> {
        if self.streamed.lists.is_empty() {
            return stream::empty().boxed();
        }
        let rows = input_list::rows(self.streamed.lists.clone()).map(|(list, row)| {
            row.map(|row| {
                let name: Arc<str> = row.name(&list.at).into();
                let (meta, input) = match row.entry {
                    Ok(e) => (e.meta, Ok(RowInput::At(e.at))),
                    Err(RowError(why)) => (None, Err(why)),
                };
                ShardRow {
                    key: super::root_key(&name),
                    name,
                    meta,
                    input,
                }
            })
        });
        self.rooted(rows.boxed())
    }

    /// The Parquet shards' rows: bytes, a location, or a failing root.
    fn shard_rows(&self) -> BoxStream<'static, (u64, Arc<str>, Option<Meta>, T)> {
        match self.streamed.shards.clone() {
            None => stream::empty().boxed(),
            Some((inputs, cols)) => self.rooted(shards::rows(inputs, shards::Kind::Parquet(cols))),
        }
    }

    /// The tar shards' samples: the input member's bytes, or a failing root.
    fn tar_rows(&self) -> BoxStream<'static, (u64, Arc<str>, Option<Meta>, T)> {
        match self.streamed.tars.is_empty() {
            true => stream::empty().boxed(),
            false => self.rooted(shards::rows(
                self.streamed.tars.clone(),
                shards::Kind::Tar(self.accept),
            )),
        }
    }

    /// Roots of the rows of a list or shard: bytes, a location, or a
    /// failing root. An `Err` ends the stream and is kept for the report.
    fn rooted(
        &self,
        rows: BoxStream<'static, Result<ShardRow, String>>,
    ) -> BoxStream<'static, (u64, Arc<str>, Option<Meta>, T)> {
        let (from_path, from_url, invalid, from_bytes) =
            (self.from_path, self.from_url, self.invalid, self.from_bytes);
        let root = move |name: &Arc<str>, input: Result<RowInput, String>| match input {
            Ok(RowInput::Bytes(b)) => match from_bytes {
                Some(f) => f(name.clone(), b),
                None => invalid(
                    name.clone(),
                    format!(
                        "{name}: this job reads its inputs from files or URLs, not from a shard's bytes; for Parquet shards give a column of locations with --url-column"
                    ),
                ),
            },
            Ok(RowInput::At(at)) if super::is_url(&at) => from_url(at.into()),
            Ok(RowInput::At(at)) => from_path(Path::new(&at)),
            Err(why) => invalid(name.clone(), why),
        };
        let listed = self.listed.clone();
        rows.scan((), move |_, row| {
            let item = match row {
                Ok(row) => Some((row.key, row.name.clone(), row.meta, root(&row.name, row.input))),
                Err(e) => {
                    *listed.error.lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
                    None
                }
            };
            futures::future::ready(item)
        })
        .boxed()
    }

    #[cfg(feature = "store")]
    fn remote(&self) -> BoxStream<'static, (u64, Arc<str>, T)> {
        if self.urls.is_empty() {
            return stream::empty().boxed();
        }
        let (listed, from_url) = (self.listed.clone(), self.from_url);
        super::list(
            super::Stores::new(super::StoreOptions::default()),
            self.urls.clone(),
            self.accept,
        )
        .scan((), move |_, r| {
            futures::future::ready(match r {
                Ok(o) => Some((o.key(), o.url.clone(), from_url(o.url))),
                Err(e) => {
                    *listed.error.lock().unwrap_or_else(|p| p.into_inner()) = Some(e.to_string());
                    None
                }
            })
        })
        .boxed()
    }

    #[cfg(not(feature = "store"))]
    fn remote(&self) -> BoxStream<'static, (u64, Arc<str>, T)> {
        // A build without `store` refuses URL inputs before the run.
        let _ = (self.accept, self.from_url);
        stream::empty().boxed()
    }

    /// Roots the source yielded so far.
    pub fn yielded(&self) -> u64 {
        let all = self.files.len() as u64 + self.listed.objects.load(Ordering::Relaxed);
        self.limit.map_or(all, |n| all.min(n as u64))
    }

    /// Why the listing (or an input list) stopped early, if it did.
    pub fn listing_error(&self) -> Option<String> {
        self.listed
            .error
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}
