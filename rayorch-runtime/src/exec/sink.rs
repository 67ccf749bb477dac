//! Sinks: where each root's outcome goes the moment it is terminal.
//!
//! A sink runs on the run loop, in completion order, once per root. A sink
//! error stops the run (a full disk must not silently drop results).
//!
//! Backpressure, not buffering: the run loop calls the sink synchronously and
//! admits, dispatches and reports nothing while it runs, so a slow sink
//! slows the run instead of letting finished roots pile up; roots pulled
//! from the source never exceed roots delivered plus the window
//! (`a_slow_sink_holds_the_source_back_instead_of_buffering` in
//! `tests/runner/memory_bounds.rs`). A sink that hands outcomes to another thread
//! must keep that property: [`BoundedChannelSink`] blocks when its channel
//! is full; [`ChannelSink`] is unbounded (for fast receivers).
//!
//! Durable half (journaled runs, see [`crate::journal`]): a sink that writes
//! files reports, at each journal commit, one *position* per file it owns
//! ([`Sink::sync`], after making everything written so far durable), and on
//! resume cuts each file back to the position of the last commit
//! ([`Sink::truncate_to`]). Positions are `u64`s in a fixed order (a tuple
//! lists its first sink's positions, then its second's), so a root's output
//! is kept iff the journal holds the root. A sink without files (a
//! [`Callback`], a [`ChannelSink`]) has no positions: on resume it gets
//! again the roots delivered after the last commit (at least once).

use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::engine::RootOutcome;
use crate::plan::Output;
use crate::stage::BoxError;
use crate::value::{Data, Item};

/// Receives root outcomes as they complete.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a rayorch Sink",
    label = "a Runner delivers each finished root here",
    note = "pass a `rayorch::sink::Callback::new(|root| ...)`, a `ChannelSink`, a `JsonlSink`, a `FailuresSink`, a tuple of sinks, or implement `Sink` for your writer"
)]
pub trait Sink: Send {
    /// One finished root.
    fn root(&mut self, outcome: &RootOutcome) -> Result<(), BoxError>;
    /// The run ended; flush.
    fn close(&mut self) -> Result<(), BoxError> {
        Ok(())
    }
    /// Journal commit: flush what was written (and `fsync` it when `durable`),
    /// then push one position per output this sink owns. Positions pushed
    /// with `durable` must cover only bytes that survive a power loss.
    fn sync(&mut self, durable: bool, positions: &mut Vec<u64>) -> Result<(), BoxError> {
        let _ = (durable, positions);
        Ok(())
    }
    /// Resume: cut each output back to its position of the last journal
    /// commit, taking this sink's positions off the front of `positions`.
    fn truncate_to(&mut self, positions: &mut &[u64]) -> Result<(), BoxError> {
        let _ = positions;
        Ok(())
    }
}

/// A closure as a sink.
///
/// [`Callback::new`] names the closure's argument type, so `|o| ...` needs
/// no annotation (`Callback(|o: &RootOutcome| ...)` is the same sink):
///
/// ```
/// use rayorch::prelude::*; // `Callback` among them
///
/// #[derive(Domain)]
/// struct Job;
///
/// struct Double {
///     double: FnCall<u64, u64>,
/// }
///
/// #[pipeline]
/// impl Double {
///     fn forward(&self, xs: Port<Job, u64>) -> Port<Job, u64> {
///         self.double(xs)
///     }
/// }
///
/// let (plan, out) = Double { double: Call::map("double", |x: u64| 2 * x) }.build_plan().unwrap();
/// let mut sum = 0;
/// Runner::new(&plan)
///     .run((0..4u64).map(|k| (k, k)), Callback::new(|o| sum += o.get(out).present().unwrap()))
///     .unwrap();
/// assert_eq!(sum, 12);
/// ```
pub struct Callback<F>(pub F);

impl<F: FnMut(&RootOutcome) + Send> Callback<F> {
    /// A sink calling `f` once per finished root.
    pub fn new(f: F) -> Self {
        Callback(f)
    }
}

impl<F: FnMut(&RootOutcome) + Send> Sink for Callback<F> {
    fn root(&mut self, outcome: &RootOutcome) -> Result<(), BoxError> {
        (self.0)(outcome);
        Ok(())
    }
}

/// Sends every outcome into a channel (the receiver may live anywhere).
/// The channel is unbounded: a receiver slower than the run lets outcomes
/// pile up in it. Use [`BoundedChannelSink`] when it may be slow.
pub struct ChannelSink(pub std::sync::mpsc::Sender<RootOutcome>);

impl Sink for ChannelSink {
    fn root(&mut self, outcome: &RootOutcome) -> Result<(), BoxError> {
        // A dropped receiver means nobody wants more results: not an error.
        let _ = self.0.send(outcome.clone());
        Ok(())
    }
}

/// Sends every outcome into a bounded channel
/// (`std::sync::mpsc::sync_channel(n)`): when `n` outcomes wait unread the
/// run waits for the receiver (backpressure), so at most `n` finished roots
/// are buffered whatever the receiver's speed.
///
/// ```
/// use rayorch::prelude::*;
/// use rayorch::sink::BoundedChannelSink;
///
/// #[derive(Domain)]
/// struct Job;
///
/// struct Ids {
///     id: FnCall<u64, u64>,
/// }
///
/// #[pipeline]
/// impl Ids {
///     fn forward(&self, xs: Port<Job, u64>) -> Port<Job, u64> {
///         self.id(xs)
///     }
/// }
///
/// let (plan, _) = Ids { id: Call::map("id", |x: u64| x) }.build_plan().unwrap();
/// let (tx, rx) = std::sync::mpsc::sync_channel(2);
/// let reader = std::thread::spawn(move || rx.iter().map(|o: RootOutcome| o.key).sum::<u64>());
/// Runner::new(&plan).run((0..10u64).map(|k| (k, k)), BoundedChannelSink(tx)).unwrap();
/// assert_eq!(reader.join().unwrap(), 45);
/// ```
pub struct BoundedChannelSink(pub std::sync::mpsc::SyncSender<RootOutcome>);

impl Sink for BoundedChannelSink {
    fn root(&mut self, outcome: &RootOutcome) -> Result<(), BoxError> {
        // Blocks while the channel is full; a dropped receiver means nobody
        // wants more results: not an error.
        let _ = self.0.send(outcome.clone());
        Ok(())
    }
}

impl<A: Sink, B: Sink> Sink for (A, B) {
    fn root(&mut self, outcome: &RootOutcome) -> Result<(), BoxError> {
        self.0.root(outcome)?;
        self.1.root(outcome)
    }
    fn close(&mut self) -> Result<(), BoxError> {
        self.0.close()?;
        self.1.close()
    }
    fn sync(&mut self, durable: bool, positions: &mut Vec<u64>) -> Result<(), BoxError> {
        self.0.sync(durable, positions)?;
        self.1.sync(durable, positions)
    }
    fn truncate_to(&mut self, positions: &mut &[u64]) -> Result<(), BoxError> {
        self.0.truncate_to(positions)?;
        self.1.truncate_to(positions)
    }
}

/// An optional sink (`None` takes every root and writes nothing).
impl<S: Sink> Sink for Option<S> {
    fn root(&mut self, outcome: &RootOutcome) -> Result<(), BoxError> {
        self.as_mut().map_or(Ok(()), |s| s.root(outcome))
    }
    fn close(&mut self) -> Result<(), BoxError> {
        self.as_mut().map_or(Ok(()), Sink::close)
    }
    fn sync(&mut self, durable: bool, positions: &mut Vec<u64>) -> Result<(), BoxError> {
        self.as_mut().map_or(Ok(()), |s| s.sync(durable, positions))
    }
    fn truncate_to(&mut self, positions: &mut &[u64]) -> Result<(), BoxError> {
        self.as_mut().map_or(Ok(()), |s| s.truncate_to(positions))
    }
}

impl<S: Sink + ?Sized> Sink for &mut S {
    fn root(&mut self, outcome: &RootOutcome) -> Result<(), BoxError> {
        (**self).root(outcome)
    }
    fn close(&mut self) -> Result<(), BoxError> {
        (**self).close()
    }
    fn sync(&mut self, durable: bool, positions: &mut Vec<u64>) -> Result<(), BoxError> {
        (**self).sync(durable, positions)
    }
    fn truncate_to(&mut self, positions: &mut &[u64]) -> Result<(), BoxError> {
        (**self).truncate_to(positions)
    }
}

/// Make a new file's directory entry durable (a power loss may otherwise
/// lose a freshly created file whose data was synced).
pub fn sync_parent(path: &Path) -> std::io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    File::open(dir)?.sync_all()
}

/// An append-only lines file that knows its length: the durable part of
/// [`JsonlSink`] and [`FailuresSink`] (and of any line writer built on it).
pub struct LinesFile {
    w: BufWriter<File>,
    path: PathBuf,
    /// Bytes handed to `w` (written or buffered) since the file's start.
    len: u64,
    /// The directory entry was made durable (once, at the first durable sync).
    dir_synced: bool,
}

impl LinesFile {
    /// Create (truncate) `path`.
    pub fn create(path: impl AsRef<Path>) -> std::io::Result<Self> {
        let path = path.as_ref().to_path_buf();
        Ok(LinesFile {
            w: BufWriter::new(File::create(&path)?),
            path,
            len: 0,
            dir_synced: false,
        })
    }

    /// Open `path` to append (created when missing): a resumed run cuts it
    /// back to the journal's position before writing.
    pub fn open(path: impl AsRef<Path>) -> std::io::Result<Self> {
        let path = path.as_ref().to_path_buf();
        let f = OpenOptions::new().create(true).append(true).open(&path)?;
        let len = f.metadata()?.len();
        Ok(LinesFile {
            w: BufWriter::new(f),
            path,
            len,
            dir_synced: false,
        })
    }

    /// Append one line (`\n` added) and hand it to the OS.
    pub fn line(&mut self, line: &[u8]) -> std::io::Result<()> {
        self.w.write_all(line)?;
        self.w.write_all(b"\n")?;
        self.len += line.len() as u64 + 1;
        // Each line reaches the OS at once: a crashed process keeps it.
        self.w.flush()
    }

    /// Flush, `fsync` when `durable`, and return the length.
    pub fn sync(&mut self, durable: bool) -> std::io::Result<u64> {
        self.w.flush()?;
        if durable {
            self.w.get_ref().sync_data()?;
            if !self.dir_synced {
                sync_parent(&self.path)?;
                self.dir_synced = true;
            }
        }
        Ok(self.len)
    }

    /// Cut the file back to `len` bytes (a torn last line goes too).
    pub fn truncate_to(&mut self, len: u64) -> std::io::Result<()> {
        self.w.flush()?;
        let f = self.w.get_ref();
        let on_disk = f.metadata()?.len();
        if on_disk < len {
            return Err(std::io::Error::other(format!(
                "{} holds {on_disk} bytes but the journal committed {len}: it was truncated or replaced since; restore it, or start the run over without the journal",
                self.path.display()
            )));
        }
        f.set_len(len)?;
        f.sync_data()?;
        // A file opened by `create` writes at its cursor, not at its end.
        self.w.get_mut().seek(SeekFrom::Start(len))?;
        self.len = len;
        Ok(())
    }

    fn take(positions: &mut &[u64], path: &Path) -> Result<u64, BoxError> {
        let (&first, rest) = positions.split_first().ok_or_else(|| {
            format!(
                "the journal records no position for {}: the run's sinks differ from the journaled run's; pass the same sinks, or start over",
                path.display()
            )
        })?;
        *positions = rest;
        Ok(first)
    }
}

impl Sink for LinesFile {
    /// A bare lines file writes nothing per root (its owner writes lines);
    /// it is a `Sink` for its durable half.
    fn root(&mut self, _: &RootOutcome) -> Result<(), BoxError> {
        Ok(())
    }
    fn close(&mut self) -> Result<(), BoxError> {
        Ok(self.w.flush()?)
    }
    fn sync(&mut self, durable: bool, positions: &mut Vec<u64>) -> Result<(), BoxError> {
        positions.push(LinesFile::sync(self, durable)?);
        Ok(())
    }
    fn truncate_to(&mut self, positions: &mut &[u64]) -> Result<(), BoxError> {
        let len = LinesFile::take(positions, &self.path)?;
        Ok(LinesFile::truncate_to(self, len)?)
    }
}

/// Writes one JSON line `{"key": k, "value": v}` per root whose output is present.
pub struct JsonlSink<T> {
    out: Output<T>,
    w: LinesFile,
}

impl<T> JsonlSink<T> {
    /// Create (truncate) `path`.
    pub fn create(path: impl AsRef<Path>, out: Output<T>) -> std::io::Result<Self> {
        Ok(JsonlSink {
            out,
            w: LinesFile::create(path)?,
        })
    }

    /// Open `path` to append, for a journaled run that may resume (see
    /// [`LinesFile::open`]).
    pub fn open(path: impl AsRef<Path>, out: Output<T>) -> std::io::Result<Self> {
        Ok(JsonlSink {
            out,
            w: LinesFile::open(path)?,
        })
    }
}

#[derive(Serialize)]
struct Line<'a, T> {
    key: u64,
    value: &'a T,
}

impl<T: Data + Serialize> Sink for JsonlSink<T> {
    fn root(&mut self, outcome: &RootOutcome) -> Result<(), BoxError> {
        if let Item::Present(v) = outcome.get(self.out) {
            let line = serde_json::to_vec(&Line {
                key: outcome.key,
                value: &v,
            })?;
            self.w.line(&line)?;
        }
        Ok(())
    }
    fn close(&mut self) -> Result<(), BoxError> {
        self.w.close()
    }
    fn sync(&mut self, durable: bool, positions: &mut Vec<u64>) -> Result<(), BoxError> {
        Sink::sync(&mut self.w, durable, positions)
    }
    fn truncate_to(&mut self, positions: &mut &[u64]) -> Result<(), BoxError> {
        Sink::truncate_to(&mut self.w, positions)
    }
}

/// Writes one JSON line per root that is not present, with its cause chain.
pub struct FailuresSink {
    w: LinesFile,
}

impl FailuresSink {
    /// Create (truncate) `path`.
    pub fn create(path: impl AsRef<Path>) -> std::io::Result<Self> {
        Ok(FailuresSink {
            w: LinesFile::create(path)?,
        })
    }

    /// Open `path` to append, for a journaled run that may resume.
    pub fn open(path: impl AsRef<Path>) -> std::io::Result<Self> {
        Ok(FailuresSink {
            w: LinesFile::open(path)?,
        })
    }
}

/// One failure line, as [`FailuresSink`] and the jobs write it: one JSON
/// object per root that is not present.
///
/// | field | type | what |
/// | --- | --- | --- |
/// | `key` | u64 | the root's key |
/// | `name` | string, optional | the root's name (a job's file path or URL) |
/// | `outcome` | `dropped`, `failed` or `suppressed` | the root's Item kind (a job may say `failed` for a suppressed root: its cause names what failed) |
/// | `kind` | string, optional | the kind of the failure that decided it: `record`, `group`, `error`, `panic`, `timeout`, `contract`, `cancelled`, `source` ([`FailureKind`](crate::FailureKind)) |
/// | `cause` | string | that failure's message (empty for dropped roots) |
/// | `at` | string, optional | where it arose, in words (`Call \`ocr\` on Pdf 7 / Page 3`) |
/// | `call` | string, optional | the Call (or operation) it arose at |
/// | `entity` | string, optional | the Entity, a Domain-named path from the root (`Pdf 7 / Page 3 / Line 12`) |
///
/// For a suppressed root, `kind`, `cause`, `call` and `entity` are those of
/// the failure that suppressed it.
#[derive(Serialize, serde::Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct FailureLine {
    /// The root's key.
    pub key: u64,
    /// The root's name (a job names its roots: a file path, a URL).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// `dropped`, `failed` or `suppressed`.
    pub outcome: String,
    /// The kind of the failure that decided the root.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// A stable, machine-readable code for grouping failures: the stage's
    /// (`pdf.corrupt`, `pdf.encrypted`, `pdf.truncated`, `input.not_pdf`,
    /// `input.missing`, …), else the engine's (`input.duplicate_key`,
    /// `input.wrong_type`, `call.stopped`), else the kind (`timeout`,
    /// `panic`, …). See [`Cause::code`](crate::Cause::code).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    /// The cause's message (empty for dropped roots).
    pub cause: String,
    /// Where the cause arose: the Call and Entity path, in words.
    pub at: Option<String>,
    /// The Call the failure arose at.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call: Option<String>,
    /// The Entity it arose at, a Domain-named path from the root.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entity: Option<String>,
}

impl FailureLine {
    /// The line of a root that is not present (`None` for a present one),
    /// named `name`.
    pub fn of(outcome: &RootOutcome, name: Option<String>) -> Option<FailureLine> {
        let kind = outcome.kind();
        let cause = outcome.cause();
        let origin = cause.and_then(|c| c.origin());
        (kind != crate::ItemKind::Present).then(|| FailureLine {
            key: outcome.key,
            name,
            outcome: format!("{kind:?}").to_lowercase(),
            kind: cause.and_then(|c| c.kind()).map(|k| k.as_str().to_string()),
            code: cause.and_then(|c| c.code()).map(String::from),
            cause: cause.map(|c| c.message().to_string()).unwrap_or_default(),
            at: cause.and_then(|c| c.context().map(String::from)),
            call: origin.map(|o| o.call.to_string()),
            entity: origin.map(|o| o.entity.clone()),
        })
    }
}

impl Sink for FailuresSink {
    fn root(&mut self, outcome: &RootOutcome) -> Result<(), BoxError> {
        let Some(line) = FailureLine::of(outcome, None) else {
            return Ok(());
        };
        self.w.line(&serde_json::to_vec(&line)?)?;
        Ok(())
    }
    fn close(&mut self) -> Result<(), BoxError> {
        self.w.close()
    }
    fn sync(&mut self, durable: bool, positions: &mut Vec<u64>) -> Result<(), BoxError> {
        Sink::sync(&mut self.w, durable, positions)
    }
    fn truncate_to(&mut self, positions: &mut &[u64]) -> Result<(), BoxError> {
        Sink::truncate_to(&mut self.w, positions)
    }
}
