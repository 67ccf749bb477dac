//! Durable runs: a commit log (one redb file) that lets a killed run resume
//! with every root's output written exactly once.
//!
//! What the journal holds:
//! - the run's identity: the plan's [`fingerprint`](crate::Plan::fingerprint)
//!   and the source description the caller gives
//!   ([`Runner::journal_source`](crate::Runner::journal_source));
//! - per root key, its terminal outcome (present / failed with its cause /
//!   suppressed / dropped) and the run (a number each open increments)
//!   that handed it out, recorded when the root is handed to the sink;
//! - the sinks' positions at the last commit (one `u64` per output file: a
//!   byte length for a lines file, a segment count for a segmented file; see
//!   [`Sink::sync`]).
//!
//! Invariants (exactly once across a crash):
//! - A commit is one redb write transaction with `Durability::Immediate`:
//!   before it, the run loop calls [`Sink::sync`] with `durable = true`, which
//!   `fsync`s every output and returns its positions; the transaction then
//!   stores the roots delivered since the last commit *and* those positions.
//!   So after a crash at any instant, the last commit's roots are exactly the
//!   roots whose outputs lie before its positions: bytes past a position
//!   (lines of uncommitted roots, a torn last line, an unclosed segment) are
//!   not yet part of the output.
//! - Resume opens the journal, checks the identity (a changed plan or source
//!   is [`RunError::JournalMismatch`] unless forced), cuts every output back
//!   to its committed position ([`Sink::truncate_to`]), and skips the roots
//!   the journal holds; the others run again and are written once more.
//!   Hence a root is in the outputs iff it is in the journal.
//! - Commits are grouped: every root delivered in one run-loop wakeup goes in
//!   one transaction ([`FsyncPolicy::EveryWakeup`]), or at most one
//!   transaction per interval ([`FsyncPolicy::Interval`], the default: a crash
//!   repeats at most that much finished work). The end of a run, and a
//!   cancellation, always commit what was delivered before returning.
//! - Roots not journaled: a key given twice in one run (the second is a
//!   failure *of the duplicate*, not of the key) and the roots a
//!   cancellation abandons (they are written after the last commit, so a
//!   resume cuts them off and runs them).
//! - A sink without files (a callback) has no positions: on resume it gets
//!   again the roots delivered after the last commit (at least once).
//! - Nothing grows in memory with the journal's size: whether a key was
//!   finished by an earlier run (skip it) or handed out already in this one
//!   (a duplicate) is a lookup ([`Journal::seen`]) in the file and in the
//!   roots recorded since the last commit, not a set loaded at open.

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use redb::{Database, Durability, ReadableDatabase, ReadableTable, TableDefinition};
use serde::{Deserialize, Serialize};
use tokio::time::Instant;

use crate::engine::RootOutcome;
use crate::error::RunError;
use crate::exec::sink::Sink;
use crate::value::ItemKind;

const META: TableDefinition<&str, &str> = TableDefinition::new("meta");
const ROOTS: TableDefinition<u64, &[u8]> = TableDefinition::new("roots");
const FORMAT: &str = "rayorch-journal/1";

/// When journal commits happen (each commit `fsync`s the outputs and the
/// journal: that is its cost).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FsyncPolicy {
    /// Commit at the end of every run-loop wakeup that delivered roots: a
    /// crash repeats nothing that reached the sink before the last wakeup.
    EveryWakeup,
    /// Commit at most once per interval (and at the end of the run): a
    /// crash repeats at most that long of delivered roots.
    Interval(Duration),
}

impl Default for FsyncPolicy {
    fn default() -> Self {
        FsyncPolicy::Interval(Duration::from_secs(1))
    }
}

/// What a journal says about one root.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RootRecord {
    /// `present`, `failed`, `suppressed` or `dropped`.
    pub outcome: String,
    /// The cause's message (failed and suppressed roots).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cause: Option<String>,
    /// Where the cause arose (Call and Entity path).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<String>,
    /// The run that handed the root out (1 for a journal's first run; 0 in
    /// journals written before runs were numbered).
    #[serde(default)]
    pub run: u64,
}

impl RootRecord {
    fn of(o: &RootOutcome, run: u64) -> RootRecord {
        let cause = o.cause();
        RootRecord {
            outcome: format!("{:?}", o.kind()).to_lowercase(),
            cause: cause.map(|c| c.message().to_string()),
            at: cause.and_then(|c| c.context().map(String::from)),
            run,
        }
    }
}

/// What a journal knows of a root key ([`Journal::seen`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Seen {
    /// Never handed out.
    New,
    /// Terminal in an earlier run: its output is kept, it is not run again.
    Earlier,
    /// Handed out already in this run (a repeated key).
    ThisRun,
}

/// A journal's committed content, as read back (for tools and tests).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct JournalState {
    /// The plan fingerprint of the run that wrote it.
    pub fingerprint: String,
    /// The source description of that run.
    pub source: String,
    /// The sinks' positions at the last commit.
    pub positions: Vec<u64>,
    /// Every terminal root, by key.
    pub roots: BTreeMap<u64, RootRecord>,
}

impl JournalState {
    /// Read the committed state of the journal at `path` (`None` when the
    /// file does not exist). Fails while a run holds the journal open.
    pub fn read(path: impl AsRef<Path>) -> Result<Option<JournalState>, RunError> {
        let path = path.as_ref();
        if !path.exists() {
            return Ok(None);
        }
        let err = journal_err(path);
        let db = Database::open(path).or_journal(&err)?;
        let (identity, positions) = read_identity(&db, path)?;
        let Some((fingerprint, source)) = identity else {
            return Ok(Some(JournalState::default()));
        };
        let txn = db.begin_read().or_journal(&err)?;
        let table = txn.open_table(ROOTS).or_journal(&err)?;
        let mut roots = BTreeMap::new();
        for row in table.iter().or_journal(&err)? {
            let (k, v) = row.or_journal(&err)?;
            let record = serde_json::from_slice(v.value()).or_journal(&err)?;
            roots.insert(k.value(), record);
        }
        Ok(Some(JournalState {
            fingerprint,
            source,
            positions,
            roots,
        }))
    }
}

/// How a run is journaled (a [`Runner`](crate::Runner) builds these from
/// its `journal*` methods; another executor builds them directly).
#[derive(Clone, Debug)]
pub struct JournalOptions {
    pub(crate) path: PathBuf,
    pub(crate) source: String,
    pub(crate) force: bool,
    pub(crate) fsync: FsyncPolicy,
}

impl JournalOptions {
    /// A journal at `path` for a source described by `source` (see
    /// [`Runner::journal_source`](crate::Runner::journal_source)); not
    /// forced, default fsync policy.
    pub fn new(path: impl Into<PathBuf>, source: impl Into<String>) -> JournalOptions {
        JournalOptions {
            path: path.into(),
            source: source.into(),
            force: false,
            fsync: FsyncPolicy::default(),
        }
    }

    /// Resume even when the plan or source changed.
    #[must_use]
    pub fn force(mut self, force: bool) -> JournalOptions {
        self.force = force;
        self
    }

    /// When commits happen.
    #[must_use]
    pub fn fsync(mut self, policy: FsyncPolicy) -> JournalOptions {
        self.fsync = policy;
        self
    }
}

/// An open journal, owned by the executor of one run (the local run loop, or
/// a distributed owner): [`Journal::open`] before the first root,
/// [`Journal::record`] each root handed to the sink, [`Journal::commit`]
/// when [`Journal::due`] (and with `force` at the end).
pub struct Journal {
    db: Database,
    path: PathBuf,
    fsync: FsyncPolicy,
    /// Encoded records of roots delivered since the last commit.
    pending: Vec<(u64, Vec<u8>)>,
    /// Their keys.
    pending_keys: HashSet<u64>,
    /// This run's number (one more than the last run's).
    run: u64,
    last_commit: Instant,
    pub(crate) commits: u64,
}

impl std::fmt::Debug for Journal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Journal")
            .field("path", &self.path)
            .field("commits", &self.commits)
            .finish_non_exhaustive()
    }
}

fn journal_err(path: &Path) -> impl Fn(&dyn std::fmt::Display) -> RunError + '_ {
    move |e| RunError::Journal {
        path: path.display().to_string(),
        cause: e.to_string(),
    }
}

trait OrJournal<T> {
    fn or_journal(self, f: &impl Fn(&dyn std::fmt::Display) -> RunError) -> Result<T, RunError>;
}

impl<T, E: std::fmt::Display> OrJournal<T> for Result<T, E> {
    fn or_journal(self, f: &impl Fn(&dyn std::fmt::Display) -> RunError) -> Result<T, RunError> {
        self.map_err(|e| f(&e))
    }
}

type Identity = (Option<(String, String)>, Vec<u64>);

fn read_identity(db: &Database, path: &Path) -> Result<Identity, RunError> {
    let err = journal_err(path);
    let txn = db.begin_read().or_journal(&err)?;
    let meta = match txn.open_table(META) {
        Ok(t) => t,
        Err(redb::TableError::TableDoesNotExist(_)) => return Ok((None, Vec::new())),
        Err(e) => return Err(err(&e)),
    };
    let get = |k: &str| -> Result<Option<String>, RunError> {
        Ok(meta.get(k).or_journal(&err)?.map(|v| v.value().to_string()))
    };
    if let Some(f) = get("format")?
        && f != FORMAT
    {
        return Err(err(&format!(
            "written as `{f}`, this build reads `{FORMAT}`: finish it with the build that wrote it, or start over"
        )));
    }
    let (Some(fp), Some(src), Some(pos)) = (get("fingerprint")?, get("source")?, get("positions")?) else {
        return Ok((None, Vec::new()));
    };
    let positions = serde_json::from_str(&pos).or_journal(&err)?;
    Ok((Some((fp, src)), positions))
}

impl Journal {
    /// Open (or create) the journal for a run of a plan with `fingerprint`:
    /// check its identity and cut `sink`'s outputs back to the committed
    /// positions. Which keys are terminal already: [`Journal::seen`].
    pub fn open(opts: &JournalOptions, fingerprint: &str, sink: &mut impl Sink) -> Result<Journal, RunError> {
        let path = opts.path.as_path();
        let err = journal_err(path);
        let db = Database::create(path).or_journal(&err)?;
        let (identity, positions) = read_identity(&db, path)?;
        let resumed = identity.is_some();
        if let Some((fp, src)) = identity
            && !opts.force
        {
            let mismatch = |what, was: String, now: &str| RunError::JournalMismatch {
                path: path.display().to_string(),
                what,
                was,
                now: now.to_string(),
            };
            if fp != fingerprint {
                return Err(mismatch("plan fingerprint", fp, fingerprint));
            }
            if src != opts.source {
                return Err(mismatch("source", src, &opts.source));
            }
        }
        let sink_err = |e: crate::BoxError| RunError::Journal {
            path: path.display().to_string(),
            cause: format!("could not restore the outputs to the last commit: {e}"),
        };
        let positions = if resumed {
            let mut rest = positions.as_slice();
            sink.truncate_to(&mut rest).map_err(sink_err)?;
            if !rest.is_empty() {
                return Err(err(&format!(
                    "the journal records {} output position(s) more than this run's sinks own: pass the same sinks as the journaled run, or start over",
                    rest.len()
                )));
            }
            positions
        } else {
            let mut p = Vec::new();
            sink.sync(true, &mut p).map_err(sink_err)?;
            p
        };
        let run;
        {
            // Identity and positions go in first, in one durable commit, so a
            // run killed before its first root still resumes cleanly.
            let txn = db.begin_write().or_journal(&err)?;
            {
                let mut meta = txn.open_table(META).or_journal(&err)?;
                meta.insert("format", FORMAT).or_journal(&err)?;
                meta.insert("fingerprint", fingerprint).or_journal(&err)?;
                meta.insert("source", opts.source.as_str()).or_journal(&err)?;
                let pos = serde_json::to_string(&positions).or_journal(&err)?;
                meta.insert("positions", pos.as_str()).or_journal(&err)?;
                let last: u64 = match meta.get("run").or_journal(&err)? {
                    Some(v) => v.value().parse().or_journal(&err)?,
                    None => 0,
                };
                run = last + 1;
                meta.insert("run", run.to_string().as_str()).or_journal(&err)?;
                txn.open_table(ROOTS).or_journal(&err)?;
            }
            txn.commit().or_journal(&err)?;
        }
        Ok(Journal {
            db,
            path: opts.path.clone(),
            fsync: opts.fsync,
            pending: Vec::new(),
            pending_keys: HashSet::new(),
            run,
            last_commit: Instant::now(),
            commits: 0,
        })
    }

    /// Was `key` handed out before: by an earlier run of this journal, or
    /// by this one? One lookup in the file (and in the roots recorded since
    /// the last commit); nothing is held in memory per key.
    pub fn seen(&self, key: u64) -> Result<Seen, RunError> {
        if self.pending_keys.contains(&key) {
            return Ok(Seen::ThisRun);
        }
        let err = journal_err(&self.path);
        let txn = self.db.begin_read().or_journal(&err)?;
        let table = txn.open_table(ROOTS).or_journal(&err)?;
        let Some(v) = table.get(key).or_journal(&err)? else {
            return Ok(Seen::New);
        };
        let record: RootRecord = serde_json::from_slice(v.value()).or_journal(&err)?;
        Ok(if record.run == self.run {
            Seen::ThisRun
        } else {
            Seen::Earlier
        })
    }

    /// Note a root handed to the sink; it is durable at the next commit.
    pub fn record(&mut self, o: &RootOutcome) -> Result<(), RunError> {
        debug_assert!(o.kind() != ItemKind::Present || o.cause().is_none());
        let bytes =
            serde_json::to_vec(&RootRecord::of(o, self.run)).map_err(|e| journal_err(&self.path)(&e))?;
        self.pending.push((o.key, bytes));
        self.pending_keys.insert(o.key);
        Ok(())
    }

    /// Roots recorded and not yet committed.
    pub fn lag(&self) -> usize {
        self.pending.len()
    }

    /// When the pending roots must be committed (none pending: never).
    pub fn due(&self) -> Option<Instant> {
        if self.pending.is_empty() {
            return None;
        }
        Some(match self.fsync {
            FsyncPolicy::EveryWakeup => self.last_commit,
            FsyncPolicy::Interval(d) => self.last_commit + d,
        })
    }

    /// Commit the pending roots with `sink`'s durable positions when due
    /// (or now, with `force`).
    pub fn commit(&mut self, sink: &mut impl Sink, force: bool) -> Result<(), RunError> {
        match self.due() {
            Some(at) if force || at <= Instant::now() => {}
            _ => return Ok(()),
        }
        let path = self.path.clone();
        let err = journal_err(&path);
        let mut positions = Vec::new();
        sink.sync(true, &mut positions)
            .map_err(|e| RunError::Sink(e.to_string()))?;
        let mut txn = self.db.begin_write().or_journal(&err)?;
        txn.set_durability(Durability::Immediate).or_journal(&err)?;
        {
            let mut meta = txn.open_table(META).or_journal(&err)?;
            let pos = serde_json::to_string(&positions).or_journal(&err)?;
            meta.insert("positions", pos.as_str()).or_journal(&err)?;
            let mut roots = txn.open_table(ROOTS).or_journal(&err)?;
            for (key, record) in self.pending.drain(..) {
                roots.insert(key, record.as_slice()).or_journal(&err)?;
            }
        }
        txn.commit().or_journal(&err)?;
        self.pending_keys.clear();
        self.commits += 1;
        self.last_commit = Instant::now();
        Ok(())
    }

    /// Commits so far.
    pub fn commits(&self) -> u64 {
        self.commits
    }
}
