//! Outputs on object storage, exactly once: immutable segments and one
//! create-only commit record per commit (feature `store`).
//!
//! Layout under an output prefix `P/` (any `object_store` backend: S3, GCS,
//! Azure, the local file system):
//!
//! | key | what |
//! | --- | --- |
//! | `P/_rayorch/commits/<seq>.json` | commit record `seq` (1, 2, …; 20 digits, so names sort by number) |
//! | `P/data/<hh>/<writer>-<seq>.<ext>` | a segment: one JSONL or Parquet object of commit `seq` |
//! | `P/_rayorch/probe/<writer>` | the start-up probe's sentinel (a few bytes; its time is the writer's start) |
//!
//! `<hh>` is two hex digits of a hash of the segment's name: segments spread
//! over 256 prefixes, so a long run's PUTs do not all land on one of S3's
//! partitioned prefixes (each takes ~3,500 PUTs/s). `<writer>` is a fresh
//! random id per process that opens the log.
//!
//! A commit record ([`Record`]) names its segments (key, kind, bytes, rows)
//! and the root keys they hold. **A root is in the outputs iff a commit
//! record names it**; readers follow the records (the README's recipe), and
//! a segment no record names is garbage they never read.
//!
//! Invariants:
//! - **Nothing is overwritten or appended.** Every object is written with a
//!   create-only put (`PutMode::Create`: `If-None-Match: *` on S3, a hard
//!   link on a local disk). Objects are deleted only by
//!   [`CommitLog::collect_garbage`].
//! - **Segments before their record.** [`CommitLog::commit`] writes every
//!   segment of a commit, then the record that names them; a record never
//!   names a segment that was not written completely.
//! - **One writer per commit number.** A writer commits number `n + 1` only
//!   after number `n` (its own last, or the highest it listed at open). Of
//!   two writers of one run, the store gives each number to one: the other
//!   gets "already exists" and stops with [`CommitError::Lost`], having
//!   written no record. A retried put that finds its own record (the first
//!   try succeeded but its answer was lost) is recognised by its writer id
//!   and counts as done.
//! - **Probe before trusting the store.** [`CommitLog::open`] puts its
//!   sentinel create-only twice; a store that accepts the second ignores
//!   conditional writes (some S3-compatible servers do), so two writers
//!   could both "win" a number: the log refuses to open with
//!   [`CommitError::NoConditionalWrites`] unless the caller accepted
//!   at-least-once ([`Options::at_least_once`]).
//! - **Garbage is collected only by a writer that won.**
//!   [`CommitLog::collect_garbage`] deletes segments no record names, only
//!   after this writer's first commit (so any older writer's next commit
//!   fails): those of a number whose record exists (another writer's: the
//!   segment's writer died or lost that number, and records are written
//!   once), and others last modified before this writer's probe, on the
//!   store's own clock (so a writer that started later keeps the segments
//!   it may still commit). Older writers' probe sentinels go with them.

use std::collections::{BTreeSet, HashSet};
use std::sync::Arc;

use bytes::Bytes;
use futures::TryStreamExt;
use object_store::path::Path as Key;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload};
use serde::{Deserialize, Serialize};

/// The record format this build writes and reads.
pub const FORMAT: u32 = 1;

/// Why the log could not open or commit.
#[derive(Debug, thiserror::Error)]
pub enum CommitError {
    /// The store accepted a second create-only put of one key: it ignores
    /// conditional writes, so exactly-once cannot be promised.
    #[error(
        "{prefix}: this store ignores conditional writes (a second create-only put of {key} succeeded), so two writers could both commit: exactly-once outputs need a store that honours `If-None-Match: *` (AWS S3, GCS, Azure, MinIO, SeaweedFS); to accept at-least-once outputs on this store, say so explicitly"
    )]
    NoConditionalWrites {
        /// The output prefix.
        prefix: String,
        /// The sentinel that was written twice.
        key: String,
    },
    /// Another writer committed this number first: this one must stop.
    #[error(
        "{prefix}: commit {seq} was written by another process (writer {other}); two processes are writing this run's outputs: this one stops without committing (run one resume at a time)"
    )]
    Lost {
        /// The output prefix.
        prefix: String,
        /// The commit number taken.
        seq: u64,
        /// The writer that holds it.
        other: String,
    },
    /// A record could not be read back as this build's format.
    #[error("{key}: not a commit record this build reads: {cause}")]
    BadRecord {
        /// The record's key.
        key: String,
        /// What is wrong.
        cause: String,
    },
    /// The records were written by a run over other inputs.
    #[error(
        "{prefix}: holds the outputs of a run over other inputs ({theirs}; this run: {ours}): resume with the same inputs, or give another output prefix"
    )]
    OtherSource {
        /// The output prefix.
        prefix: String,
        /// The records' source.
        theirs: String,
        /// This run's.
        ours: String,
    },
    /// The store failed (after its client's retries).
    #[error("{key}: {cause}")]
    Store {
        /// The object.
        key: String,
        /// The client's error.
        cause: String,
    },
}

/// One segment of a commit, as its record names it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SegmentRef {
    /// Its key, relative to the output prefix (`data/3f/…-….parquet`).
    pub key: String,
    /// Its kind: the file extension (`jsonl`, `parquet`, …).
    pub kind: String,
    /// Its size.
    pub bytes: u64,
    /// Rows (or lines) it holds.
    pub rows: u64,
}

/// A commit record: what commit `seq` made durable.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    /// The record format ([`FORMAT`]).
    pub format: u32,
    /// The commit number (1, 2, …).
    pub seq: u64,
    /// The writer that committed it.
    pub writer: String,
    /// Its segments.
    pub segments: Vec<SegmentRef>,
    /// The root keys its segments hold (each root in exactly one record).
    pub roots: Vec<u64>,
    /// What the run reads (its inputs' digest), as the writer gave it: a
    /// resume over other inputs is refused.
    #[serde(default)]
    pub source: String,
}

/// One segment to commit: its kind (the extension) and its bytes.
#[derive(Clone, Debug)]
pub struct Segment {
    /// The extension (`jsonl`, `parquet`).
    pub kind: &'static str,
    /// The whole object.
    pub bytes: Bytes,
    /// Rows (or lines) in it.
    pub rows: u64,
}

/// How the log opens.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// Open on a store that ignores conditional writes (outputs become
    /// at-least-once: two writers racing could both commit a number).
    pub at_least_once: bool,
    /// What this run reads (its inputs' digest): written into every record;
    /// the log refuses to open over records of another source
    /// ([`CommitError::OtherSource`]). Empty: not checked.
    pub source: String,
}

/// What the records of earlier commits say.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Committed {
    /// The records, in commit order.
    pub records: Vec<Record>,
}

impl Committed {
    /// Every root a record names.
    pub fn roots(&self) -> HashSet<u64> {
        self.records
            .iter()
            .flat_map(|r| r.roots.iter().copied())
            .collect()
    }

    /// Every committed segment's key (relative to the prefix), in commit
    /// order: what a reader reads.
    pub fn segments(&self, kind: &str) -> Vec<String> {
        self.records
            .iter()
            .flat_map(|r| r.segments.iter())
            .filter(|s| s.kind == kind)
            .map(|s| s.key.clone())
            .collect()
    }

    /// The highest commit number (0 before the first).
    pub fn last_seq(&self) -> u64 {
        self.records.last().map_or(0, |r| r.seq)
    }
}

/// The commit log of one output prefix, held by one writer.
pub struct CommitLog {
    store: Arc<dyn ObjectStore>,
    prefix: Key,
    writer: String,
    /// The last commit number this writer knows of.
    seq: u64,
    /// This writer won a commit (so it may collect garbage).
    won: bool,
    /// When the probe was written, on the store's clock.
    started: Option<chrono::DateTime<chrono::Utc>>,
    /// Keys (relative) of committed segments.
    named: HashSet<String>,
    /// What the run reads (into every record).
    source: String,
}

impl std::fmt::Debug for CommitLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CommitLog")
            .field("prefix", &self.prefix.as_ref())
            .field("writer", &self.writer)
            .field("seq", &self.seq)
            .finish_non_exhaustive()
    }
}

fn store_err(key: &Key) -> impl Fn(object_store::Error) -> CommitError + '_ {
    move |e| CommitError::Store {
        key: key.to_string(),
        cause: e.to_string(),
    }
}

/// `prefix/rest` (an empty prefix: `rest`).
fn join(prefix: &Key, rest: &str) -> Key {
    match prefix.as_ref() {
        "" => Key::from(rest),
        p => Key::from(format!("{p}/{rest}")),
    }
}

/// The commit record's name: 20 digits, so names sort by number.
fn record_name(seq: u64) -> String {
    format!("_rayorch/commits/{seq:020}.json")
}

/// A fresh writer id: 16 hex digits from the clock, the process and a
/// counter, mixed (FNV-1a 64).
fn writer_id() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let seed = format!(
        "{nanos}:{}:{}:{:p}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed),
        &N
    );
    format!("{:016x}", super::root_key(&seed))
}

impl CommitLog {
    /// Open the log of `prefix` in `store`: probe conditional writes, then
    /// read every commit record. Returns the log (this writer's next commit
    /// follows the last record) and what earlier commits hold.
    pub async fn open(
        store: Arc<dyn ObjectStore>,
        prefix: Key,
        opts: &Options,
    ) -> Result<(CommitLog, Committed), CommitError> {
        let writer = writer_id();
        let mut log = CommitLog {
            store,
            prefix,
            writer,
            seq: 0,
            won: false,
            started: None,
            named: HashSet::new(),
            source: String::new(),
        };
        log.probe(opts).await?;
        let committed = read(&*log.store, &log.prefix).await?;
        if let Some(last) = committed.records.last()
            && !opts.source.is_empty()
            && !last.source.is_empty()
            && last.source != opts.source
        {
            return Err(CommitError::OtherSource {
                prefix: log.prefix.to_string(),
                theirs: last.source.clone(),
                ours: opts.source.clone(),
            });
        }
        log.source = opts.source.clone();
        log.seq = committed.last_seq();
        log.named = committed
            .records
            .iter()
            .flat_map(|r| r.segments.iter().map(|s| s.key.clone()))
            .collect();
        Ok((log, committed))
    }

    /// This writer's id (in its segments' names and its records).
    pub fn writer(&self) -> &str {
        &self.writer
    }

    /// The last commit number this writer knows of.
    pub fn last_seq(&self) -> u64 {
        self.seq
    }

    /// Put the sentinel create-only twice: the second must be refused.
    async fn probe(&mut self, opts: &Options) -> Result<(), CommitError> {
        let key = join(&self.prefix, &format!("_rayorch/probe/{}", self.writer));
        let put = || {
            self.store.put_opts(
                &key,
                PutPayload::from(Bytes::from(self.writer.clone().into_bytes())),
                PutOptions::from(PutMode::Create),
            )
        };
        put().await.map_err(store_err(&key))?;
        let meta = self.store.head(&key).await.map_err(store_err(&key))?;
        self.started = Some(meta.last_modified);
        match put().await {
            Err(object_store::Error::AlreadyExists { .. }) => Ok(()),
            Ok(_) if opts.at_least_once => Ok(()),
            Ok(_) => Err(CommitError::NoConditionalWrites {
                prefix: self.prefix.to_string(),
                key: key.to_string(),
            }),
            Err(e) => Err(store_err(&key)(e)),
        }
    }

    /// The key of this writer's segment of kind `kind` in commit `seq`.
    fn segment_key(&self, seq: u64, kind: &str) -> String {
        let name = format!("{}-{seq:08}.{kind}", self.writer);
        let spread = super::root_key(&name) & 0xff;
        format!("data/{spread:02x}/{name}")
    }

    /// Commit `segments` holding `roots` as the next number: every segment,
    /// then the record. Returns the record. [`CommitError::Lost`] when
    /// another writer took the number (this writer must stop; its segments
    /// are garbage for the winner to collect).
    pub async fn commit(&mut self, segments: Vec<Segment>, roots: Vec<u64>) -> Result<Record, CommitError> {
        let seq = self.seq + 1;
        let mut refs = Vec::with_capacity(segments.len());
        for s in segments {
            let rel = self.segment_key(seq, s.kind);
            let key = join(&self.prefix, &rel);
            let bytes = s.bytes.len() as u64;
            // Already there: this writer's own earlier try (its id is in
            // the name), whose answer was lost.
            self.put_create(&key, s.bytes).await?;
            refs.push(SegmentRef {
                key: rel,
                kind: s.kind.to_string(),
                bytes,
                rows: s.rows,
            });
        }
        let record = Record {
            format: FORMAT,
            seq,
            writer: self.writer.clone(),
            segments: refs,
            roots,
            source: self.source.clone(),
        };
        let key = join(&self.prefix, &record_name(seq));
        let body = serde_json::to_vec(&record).map_err(|e| CommitError::BadRecord {
            key: key.to_string(),
            cause: e.to_string(),
        })?;
        if !self.put_create(&key, Bytes::from(body)).await? {
            // Taken: by another writer, or by this one (a retry whose
            // first try succeeded and lost its answer)?
            let theirs = read_record(&*self.store, &key).await?;
            if theirs.writer != self.writer {
                return Err(CommitError::Lost {
                    prefix: self.prefix.to_string(),
                    seq,
                    other: theirs.writer,
                });
            }
        }
        self.seq = seq;
        self.won = true;
        self.named.extend(record.segments.iter().map(|s| s.key.clone()));
        Ok(record)
    }

    /// A create-only put: `true` when it wrote, `false` when the key
    /// already existed (the caller decides whose the object is).
    async fn put_create(&self, key: &Key, bytes: Bytes) -> Result<bool, CommitError> {
        let opts = PutOptions::from(PutMode::Create);
        match self.store.put_opts(key, PutPayload::from(bytes), opts).await {
            Ok(_) => Ok(true),
            Err(object_store::Error::AlreadyExists { .. }) => Ok(false),
            Err(e) => Err(store_err(key)(e)),
        }
    }

    /// Delete the segments no commit record names (see the module note for
    /// which), and other writers' probe sentinels from before this writer's
    /// probe, once this writer has committed (else nothing). Returns the
    /// keys deleted (relative to the prefix), sorted.
    pub async fn collect_garbage(&mut self) -> Result<Vec<String>, CommitError> {
        let (true, Some(started)) = (self.won, self.started) else {
            return Ok(Vec::new());
        };
        // Records another writer committed since: their segments are not
        // garbage (it cannot commit past us, but it may have before us).
        let committed = read(&*self.store, &self.prefix).await?;
        let named: HashSet<String> = committed
            .records
            .iter()
            .flat_map(|r| r.segments.iter().map(|s| s.key.clone()))
            .chain(self.named.iter().cloned())
            .collect();
        let mut listed = Vec::new();
        for dir in ["data", "_rayorch/probe"] {
            let dir = join(&self.prefix, dir);
            let found: Vec<_> = self
                .store
                .list(Some(&dir))
                .try_collect()
                .await
                .map_err(store_err(&dir))?;
            listed.extend(found);
        }
        let highest = committed.last_seq().max(self.seq);
        let mut gone = Vec::new();
        for meta in listed {
            let rel = relative(&self.prefix, &meta.location);
            // A segment of a number whose record exists and does not name
            // it can never be committed (records are written once): its
            // writer died or lost. Other unnamed objects stay when written
            // at or after this writer's start (a later writer's, this
            // writer's own probe).
            let taken = segment_seq(&rel).is_some_and(|seq| seq <= highest);
            if named.contains(&rel) || (!taken && meta.last_modified >= started) {
                continue;
            }
            match self.store.delete(&meta.location).await {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => gone.push(rel),
                Err(e) => return Err(store_err(&meta.location)(e)),
            }
        }
        gone.sort();
        Ok(gone)
    }
}

/// The commit number in a segment's name (`data/3f/<writer>-<seq>.<kind>`).
fn segment_seq(rel: &str) -> Option<u64> {
    let name = rel.strip_prefix("data/")?.rsplit('/').next()?;
    let (_, rest) = name.split_once('-')?;
    rest.split_once('.')?.0.parse().ok()
}

/// `key` without `prefix/`.
fn relative(prefix: &Key, key: &Key) -> String {
    let full = key.as_ref();
    let p = prefix.as_ref();
    match p.is_empty() {
        true => full.to_string(),
        false => full
            .strip_prefix(p)
            .and_then(|r| r.strip_prefix('/'))
            .unwrap_or(full)
            .to_string(),
    }
}

async fn read_record(store: &dyn ObjectStore, key: &Key) -> Result<Record, CommitError> {
    let got = store.get(key).await.map_err(store_err(key))?;
    let bytes = got.bytes().await.map_err(store_err(key))?;
    let record: Record = serde_json::from_slice(&bytes).map_err(|e| CommitError::BadRecord {
        key: key.to_string(),
        cause: e.to_string(),
    })?;
    if record.format != FORMAT {
        return Err(CommitError::BadRecord {
            key: key.to_string(),
            cause: format!("format {} (this build reads {FORMAT})", record.format),
        });
    }
    Ok(record)
}

/// Every commit record under `prefix`, in commit order: what a reader (or a
/// resume) needs. Records must be numbered 1, 2, … without a gap; a gap
/// (a record deleted by hand) is an error naming it.
pub async fn read(store: &dyn ObjectStore, prefix: &Key) -> Result<Committed, CommitError> {
    let dir = join(prefix, "_rayorch/commits");
    let listed: Vec<_> = store
        .list(Some(&dir))
        .try_collect()
        .await
        .map_err(store_err(&dir))?;
    let mut keys: BTreeSet<(u64, Key)> = BTreeSet::new();
    for meta in listed {
        let name = meta.location.filename().unwrap_or_default();
        let Some(seq) = name.strip_suffix(".json").and_then(|n| n.parse::<u64>().ok()) else {
            continue;
        };
        keys.insert((seq, meta.location));
    }
    let mut records = Vec::with_capacity(keys.len());
    for (i, (seq, key)) in keys.into_iter().enumerate() {
        if seq != i as u64 + 1 {
            return Err(CommitError::BadRecord {
                key: key.to_string(),
                cause: format!("commit {} is missing before it", i + 1),
            });
        }
        let record = read_record(store, &key).await?;
        if record.seq != seq {
            return Err(CommitError::BadRecord {
                key: key.to_string(),
                cause: format!("it says commit {}", record.seq),
            });
        }
        records.push(record);
    }
    Ok(Committed { records })
}
