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
