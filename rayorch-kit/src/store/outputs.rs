//! A job's outputs at an object-store URL (`--out s3://bucket/prefix/`),
//! committed exactly once through [`commits`](super::commits) (feature
//! `store`).
//!
//! The job's sink keeps the rows of the current segment in memory (its
//! JSONL lines, its Parquet file being built) and asks [`BucketOutputs::due`]
//! after each root; when a commit is due (the segment reached its byte
//! target, or the commit interval passed) it hands the segments and the
//! roots they hold to [`BucketOutputs::commit`] and starts new ones. An
//! uploader thread writes them (segments, then the record) while the run
//! goes on.
//!
//! Invariants:
//! - **Commits land in the order made, one at a time.** At most one commit
//!   waits behind the one being uploaded: a store slower than the job holds
//!   the sink (backpressure), so memory holds at most three segments' worth.
//! - **A failed upload stops the outputs.** The next `commit` (or `finish`)
//!   returns the error; nothing after it is committed. The roots of that
//!   and later commits are in no record, so a resume runs them again.
//! - **Resume from the bucket alone.** [`BucketOutputs::open`] reads the
//!   commit records: the roots they name are done (the job skips them); no
//!   local state is needed.
//! - **Garbage goes after the first commit of this writer**, in the
//!   uploader, by the rule of [`CommitLog::collect_garbage`].

use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use object_store::ObjectStore;
use object_store::path::Path as Key;

use super::commits::{CommitError, CommitLog, Committed, Options, Segment};
use super::{StoreOptions, Stores};

/// How a job's outputs are committed to object storage.
#[derive(Clone, Debug)]
pub struct BucketOptions {
    /// A commit is due once its segments hold this many bytes (default
    /// 64 MiB): objects stay large however small the documents.
    pub target_bytes: usize,
    /// ... or once this long has passed since the last commit (default
    /// 60 s): a slow job's results do not wait long to become durable.
    pub interval: Duration,
    /// Accept a store that ignores conditional writes (at-least-once).
    pub at_least_once: bool,
    /// What the run reads (its inputs' digest; see
    /// [`Options::source`](super::commits::Options::source)).
    pub source: String,
    /// The store clients' retries and timeouts.
    pub store: StoreOptions,
}

impl Default for BucketOptions {
    fn default() -> BucketOptions {
        BucketOptions {
            target_bytes: 64 << 20,
            interval: Duration::from_secs(60),
            at_least_once: false,
            source: String::new(),
            store: StoreOptions::default(),
        }
    }
}

/// What the uploads did, so far or in all.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Uploaded {
    /// Commit records written by this writer.
    pub commits: u64,
    /// Roots they name.
    pub roots: u64,
    /// Segment bytes they hold.
    pub bytes: u64,
    /// Segment objects written.
    pub segments: u64,
    /// Garbage deleted (keys relative to the prefix).
    pub garbage: Vec<String>,
}

#[derive(Default)]
struct Shared {
    done: Uploaded,
    error: Option<String>,
}

struct Commit {
    segments: Vec<Segment>,
    roots: Vec<u64>,
}

/// The outputs of one run at one URL (see the module note).
pub struct BucketOutputs {
    url: String,
    writer: String,
    store_options: StoreOptions,
    store: Arc<dyn ObjectStore>,
    prefix: Key,
    tx: Option<SyncSender<Commit>>,
    thread: Option<JoinHandle<()>>,
    shared: Arc<Mutex<Shared>>,
    opts: BucketOptions,
    last: Instant,
}

impl std::fmt::Debug for BucketOutputs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BucketOutputs")
            .field("url", &self.url)
            .finish_non_exhaustive()
    }
}

/// The store and the prefix an output URL names: `s3://bucket/prefix/`
/// (gs, az alike) through [`Stores`], `file:///path/` on the local disk
/// (the folder is made).
pub fn output_store(url: &str, opts: &StoreOptions) -> Result<(Arc<dyn ObjectStore>, Key), String> {
    if let Some(path) = super::file_url_path(url) {
        std::fs::create_dir_all(&path).map_err(|e| format!("{url}: {e}"))?;
        let local = object_store::local::LocalFileSystem::new_with_prefix(&path)
            .map_err(|e| format!("{url}: {e}"))?;
        return Ok((Arc::new(local), Key::default()));
    }
    if !super::is_url(url) || url.starts_with("http") {
        return Err(format!(
            "{url}: not an output URL: give s3://bucket/prefix/, gs://…, az://… or file:///path/"
        ));
    }
    let stores = Stores::new(opts.clone());
    let (store, key) = stores
        .resolve(url.trim_end_matches('/'))
        .map_err(|e| e.to_string())?;
    Ok((store, key))
}

impl super::CommitFlags {
    /// The options these flags give a run reading `source` (its inputs'
    /// digest).
    pub fn options(&self, source: &str) -> Result<BucketOptions, String> {
        let interval = Duration::try_from_secs_f64(self.commit_every_s)
            .map_err(|e| format!("--commit-every-s {}: {e}", self.commit_every_s))?;
        Ok(BucketOptions {
            source: source.to_string(),
            target_bytes: self.commit_mib.max(1) << 20,
            interval,
            at_least_once: self.at_least_once,
            ..BucketOptions::default()
        })
    }
}

/// Open a job's outputs at `url` for a run starting as `start` over
/// `source`: the outputs, and the roots earlier runs committed there. A
/// plain start into a URL holding commits is refused (they are never
/// replaced: `--resume`, or another `--out`), and so is `--force`.
pub fn open_for(
    url: &str,
    start: crate::resume::Start,
    flags: &super::CommitFlags,
    source: &str,
) -> Result<(BucketOutputs, std::collections::HashSet<u64>), String> {
    use crate::resume::Start;
    if start == Start::Force {
        return Err(
            "--force: outputs at a URL are never deleted or overwritten; give another --out to start over, or --resume to continue"
                .into(),
        );
    }
    let (bucket, committed) = BucketOutputs::open(url, flags.options(source)?)?;
    let done = committed.roots();
    if start == Start::New && !done.is_empty() {
        return Err(format!(
            "{url} holds {} committed roots of an earlier run: continue it with --resume, or give another --out (committed outputs are never replaced)",
            done.len()
        ));
    }
    Ok((bucket, done))
}

impl BucketOutputs {
    /// Open the outputs at `url`: probe the store, read the commit records.
    /// Returns the outputs and what earlier runs committed (their roots are
    /// done).
    pub fn open(url: &str, opts: BucketOptions) -> Result<(BucketOutputs, Committed), String> {
        let (store, prefix) = output_store(url, &opts.store)?;
        let shared = Arc::new(Mutex::new(Shared::default()));
        let (tx, rx) = sync_channel::<Commit>(1);
        let (opened_tx, opened_rx) = sync_channel::<Result<(Committed, String), String>>(1);
        let (files_store, files_prefix) = (store.clone(), prefix.clone());
        let log_opts = Options {
            at_least_once: opts.at_least_once,
            source: opts.source.clone(),
        };
        let thread = {
            let shared = shared.clone();
            let at = url.to_string();
            std::thread::Builder::new()
                .name("rayorch-outputs".into())
                .spawn(move || upload(store, prefix, log_opts, rx, opened_tx, shared, at))
                .map_err(|e| format!("{url}: cannot start the uploader: {e}"))?
        };
        let (committed, writer) = opened_rx
            .recv()
            .map_err(|_| format!("{url}: the uploader stopped before opening the log"))??;
        Ok((
            BucketOutputs {
                url: url.to_string(),
                writer,
                store_options: opts.store.clone(),
                store: files_store,
                prefix: files_prefix,
                tx: Some(tx),
                thread: Some(thread),
                shared,
                opts,
                last: Instant::now(),
            },
            committed,
        ))
    }

    /// The URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// This writer's id (in its segments' names and records).
    pub fn writer(&self) -> &str {
        &self.writer
    }

    /// Write a file of this run beside the outputs, at
    /// `runs/<writer>/<name>` (a summary, a timeline): written once, read
    /// by people, named by no record. Returns its URL.
    pub fn put_run_file(&self, name: &str, bytes: Vec<u8>) -> Result<String, String> {
        let rel = format!("runs/{}/{name}", self.writer);
        let key = match self.prefix.as_ref() {
            "" => Key::from(rel.as_str()),
            p => Key::from(format!("{p}/{rel}")),
        };
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| e.to_string())?;
        rt.block_on(object_store::ObjectStoreExt::put(
            &*self.store,
            &key,
            bytes.into(),
        ))
        .map_err(|e| format!("{}{rel}: {e}", self.url))?;
        Ok(format!("{}/{rel}", self.url.trim_end_matches('/')))
    }

    /// Is a commit due for segments holding `pending_bytes`?
    pub fn due(&self, pending_bytes: usize) -> bool {
        pending_bytes >= self.opts.target_bytes
            || (pending_bytes > 0 && self.last.elapsed() >= self.opts.interval)
    }

    /// Commit `segments` holding `roots` (in the background; waits only
    /// while another commit is already queued). An earlier upload's error
    /// comes back here.
    pub fn commit(&mut self, segments: Vec<Segment>, roots: Vec<u64>) -> Result<(), String> {
        self.last = Instant::now();
        self.check()?;
        let sent = self.tx.as_ref().map(|tx| tx.send(Commit { segments, roots }));
        match sent {
            Some(Ok(())) => Ok(()),
            _ => Err(self
                .error()
                .unwrap_or_else(|| format!("{}: the uploader stopped", self.url))),
        }
    }

    fn error(&self) -> Option<String> {
        self.shared
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .error
            .clone()
    }

    fn check(&self) -> Result<(), String> {
        self.error().map_or(Ok(()), Err)
    }

    /// What the uploads did so far.
    pub fn uploaded(&self) -> Uploaded {
        self.shared.lock().unwrap_or_else(|p| p.into_inner()).done.clone()
    }

    /// Wait for every commit to land; what the uploads did in all.
    pub fn finish(&mut self) -> Result<Uploaded, String> {
        self.tx = None;
        if let Some(t) = self.thread.take() {
            t.join()
                .map_err(|_| format!("{}: the uploader panicked", self.url))?;
        }
        self.check()?;
        Ok(self.uploaded())
    }
}

impl Drop for BucketOutputs {
    /// Dropped without `finish` (an error path): queued commits still land;
    /// nothing waits for them.
    fn drop(&mut self) {
        self.tx = None;
    }
}

/// The uploader: open the log, then commit what comes, in order.
fn upload(
    store: Arc<dyn ObjectStore>,
    prefix: Key,
    opts: Options,
    rx: Receiver<Commit>,
    opened: SyncSender<Result<(Committed, String), String>>,
    shared: Arc<Mutex<Shared>>,
    url: String,
) {
    let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            let _ = opened.send(Err(format!("{url}: {e}")));
            return;
        }
    };
    let fail = |e: CommitError| {
        let mut s = shared.lock().unwrap_or_else(|p| p.into_inner());
        s.error.get_or_insert_with(|| e.to_string());
    };
    rt.block_on(async {
        let mut log = match CommitLog::open(store, prefix, &opts).await {
            Ok((log, committed)) => {
                let _ = opened.send(Ok((committed, log.writer().to_string())));
                log
            }
            Err(e) => {
                let _ = opened.send(Err(e.to_string()));
                return;
            }
        };
        let mut collected = false;
        while let Ok(c) = rx.recv() {
            let roots = c.roots.len() as u64;
            match log.commit(c.segments, c.roots).await {
                Ok(record) => {
                    let mut s = shared.lock().unwrap_or_else(|p| p.into_inner());
                    s.done.commits += 1;
                    s.done.roots += roots;
                    s.done.segments += record.segments.len() as u64;
                    s.done.bytes += record.segments.iter().map(|g| g.bytes).sum::<u64>();
                }
                Err(e) => return fail(e),
            }
            if !collected {
                collected = true;
                match log.collect_garbage().await {
                    Ok(gone) => shared.lock().unwrap_or_else(|p| p.into_inner()).done.garbage = gone,
                    Err(e) => return fail(e),
                }
            }
        }
    });
}

/// Every commit record at `url` (blocking, on a runtime of its own): what
/// a reader or a test follows.
pub fn read_committed(url: &str, opts: &StoreOptions) -> Result<Committed, String> {
    let (store, prefix) = output_store(url, opts)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    rt.block_on(super::commits::read(&*store, &prefix))
        .map_err(|e| e.to_string())
}

/// Read the commit records at `url` and check that no root is in two of
/// them. Returns (records, roots).
pub fn check_committed(url: &str, opts: &StoreOptions) -> Result<(u64, u64), String> {
    let committed = read_committed(url, opts)?;
    let mut seen = std::collections::HashSet::new();
    for r in &committed.records {
        for k in &r.roots {
            if !seen.insert(*k) {
                return Err(format!(
                    "{url}: root {k} is in two commit records (the second: {})",
                    r.seq
                ));
            }
        }
    }
    Ok((committed.records.len() as u64, seen.len() as u64))
}

/// The segment names of a job's outputs: its records' JSONL, its failures'
/// JSONL, its Parquet rows (`documents.jsonl`, `failures.jsonl`,
/// `documents.parquet`).
#[cfg(feature = "parquet")]
#[derive(Clone, Copy, Debug)]
pub struct Kinds {
    /// The records, one JSON line each.
    pub records: &'static str,
    /// The failures, one JSON line each.
    pub failures: &'static str,
    /// The Parquet rows (the records', or finer ones: a layout job's
    /// regions).
    pub parquet: &'static str,
}

/// A job's sink-side of [`BucketOutputs`]: the JSONL lines and Parquet rows
/// of the commit being built, committed when one is due and at the end.
/// Every root marked done (by [`RowCommits::record`], [`RowCommits::failure`]
/// or [`RowCommits::root_done`]) is named by the commit that holds its lines.
#[cfg(feature = "parquet")]
pub struct RowCommits<R: crate::parquet::Rows + Clone> {
    out: BucketOutputs,
    rows: R,
    kinds: Kinds,
    /// JSONL segments being built: (kind, bytes, lines), in first-use order.
    lines: Vec<(&'static str, Vec<u8>, u64)>,
    parquet: Option<crate::parquet::ParquetFile<R, Vec<u8>>>,
    parquet_rows: u64,
    roots: Vec<u64>,
    uploaded: Option<Uploaded>,
}

#[cfg(feature = "parquet")]
impl<R: crate::parquet::Rows + Clone> RowCommits<R> {
    /// Commit to `out`, rows of schema `rows`, segments named by `kinds`.
    pub fn new(out: BucketOutputs, rows: R, kinds: Kinds) -> RowCommits<R> {
        RowCommits {
            out,
            rows,
            kinds,
            lines: Vec::new(),
            parquet: None,
            parquet_rows: 0,
            roots: Vec::new(),
            uploaded: None,
        }
    }

    /// The outputs (for their writer id and run files).
    pub fn outputs(&self) -> &BucketOutputs {
        &self.out
    }

    /// Root `key`'s record: its JSON line (without the newline) and its
    /// row; the root is done.
    pub fn record(&mut self, key: u64, line: &[u8], row: R::Row) -> Result<(), String> {
        self.line(self.kinds.records, line);
        self.row(row)?;
        self.root_done(key)
    }

    /// Root `key`'s failure line (without the newline); the root is done.
    pub fn failure(&mut self, key: u64, line: &[u8]) -> Result<(), String> {
        self.line(self.kinds.failures, line);
        self.root_done(key)
    }

    /// One JSON line (without the newline) of the segment of `kind` (the
    /// record and failure kinds, or any other: `regions.jsonl`).
    pub fn line(&mut self, kind: &'static str, line: &[u8]) {
        let at = match self.lines.iter().position(|(k, _, _)| *k == kind) {
            Some(i) => i,
            None => {
                self.lines.push((kind, Vec::new(), 0));
                self.lines.len() - 1
            }
        };
        let (_, bytes, n) = &mut self.lines[at];
        bytes.extend_from_slice(line);
        bytes.push(b'\n');
        *n += 1;
    }

    /// One Parquet row.
    pub fn row(&mut self, row: R::Row) -> Result<(), String> {
        let parquet = match &mut self.parquet {
            Some(p) => p,
            None => self.parquet.insert(
                crate::parquet::ParquetFile::in_memory(self.kinds.parquet, self.rows.clone(), 8)
                    .map_err(|e| e.to_string())?,
            ),
        };
        parquet.write(row).map_err(|e| e.to_string())?;
        self.parquet_rows += 1;
        Ok(())
    }

    /// Root `key`'s lines and rows are all given: the next commit names it
    /// (made now if one is due).
    pub fn root_done(&mut self, key: u64) -> Result<(), String> {
        self.roots.push(key);
        let pending = self.lines.iter().map(|(_, b, _)| b.len()).sum::<usize>()
            + self
                .parquet
                .as_ref()
                .map_or(0, crate::parquet::ParquetFile::bytes_so_far);
        if self.out.due(pending) {
            self.commit()?;
        }
        Ok(())
    }

    /// Hand what is pending to the uploader as one commit.
    fn commit(&mut self) -> Result<(), String> {
        if self.roots.is_empty() {
            return Ok(());
        }
        let mut segments: Vec<Segment> = std::mem::take(&mut self.lines)
            .into_iter()
            .map(|(kind, bytes, rows)| Segment {
                kind,
                bytes: bytes.into(),
                rows,
            })
            .collect();
        if let Some(p) = self.parquet.take() {
            segments.push(Segment {
                kind: self.kinds.parquet,
                bytes: p.into_bytes().map_err(|e| e.to_string())?.into(),
                rows: std::mem::take(&mut self.parquet_rows),
            });
        }
        self.out.commit(segments, std::mem::take(&mut self.roots))
    }

    /// The run ended: commit the rest and wait for every upload.
    pub fn finish(&mut self) -> Result<(), String> {
        self.commit()?;
        self.uploaded = Some(self.out.finish()?);
        Ok(())
    }

    /// What the uploads did, once [`RowCommits::finish`] returned.
    pub fn uploaded(&self) -> Option<&Uploaded> {
        self.uploaded.as_ref()
    }

    /// A finished run's report at `url`: the uploads go into the summary
    /// (`json["job"]["outputs"]`), which is written with the timeline `svg`
    /// (if the job draws one) to `runs/<writer>/`; then the commit records
    /// are read back and checked. Returns the line the console shows
    /// (`what`: "documents").
    pub fn report(
        &self,
        url: &str,
        what: &str,
        json: &mut serde_json::Value,
        svg: Option<String>,
    ) -> Result<String, String> {
        let up = self.uploaded.clone().unwrap_or_default();
        json["job"]["outputs"] = serde_json::json!({
            "url": url,
            "writer": self.out.writer(),
            "commits": up.commits,
            "roots_committed": up.roots,
            "segments": up.segments,
            "segment_bytes": up.bytes,
            "garbage_removed": up.garbage.len(),
        });
        let body = serde_json::to_vec_pretty(json).map_err(|e| e.to_string())?;
        let summary_at = self.out.put_run_file("summary.json", body)?;
        if let Some(svg) = svg {
            self.out.put_run_file("timeline.svg", svg.into_bytes())?;
        }
        let (records, roots) = check_committed(url, &self.out.store_options)?;
        Ok(format!(
            "{url}: {roots} {what} in {records} commit records, each once (this run: {} commits, {} {what}, {} segments; summary at {summary_at})",
            up.commits, up.roots, up.segments
        ))
    }
}
