//! Sinks: where each root's outcome goes the moment it is terminal.
//!
//! A sink runs on the driver, in completion order, once per root. A sink
//! error stops the run (a full disk must not silently drop results).
//!
//! Backpressure, not buffering: the driver calls the sink synchronously and
//! admits, dispatches and reports nothing while it runs, so a slow sink
//! slows the run instead of letting finished roots pile up; roots pulled
//! from the source never exceed roots delivered plus the window
//! (`tests/sink_backpressure.rs`). A sink that hands outcomes to another
//! thread must keep that property: [`BoundedChannelSink`] blocks when its
//! channel is full; [`ChannelSink`] is unbounded (for fast receivers).

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use serde::Serialize;

use crate::engine::RootOutcome;
use crate::exec::stage::BoxError;
use crate::plan::Output;
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
}

/// A closure as a sink.
///
/// [`Callback::new`] names the closure's argument type, so `|o| ...` needs
/// no annotation (`Callback(|o: &RootOutcome| ...)` is the same sink):
///
/// ```
/// use rayorch_runtime::{domain, sink::Callback, Call, Plan, Runner};
/// domain!(Job);
/// let double = Call::map("double", |x: u64| 2 * x);
/// let (plan, out) = Plan::build(|b| {
///     let xs = b.source::<Job, u64>();
///     b.output(double.apply(xs))
/// }).unwrap();
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
/// use rayorch_runtime::{domain, sink::BoundedChannelSink, Call, Plan, Runner};
/// domain!(Job);
/// let id = Call::map("id", |x: u64| x);
/// let (plan, out) = Plan::build(|b| {
///     let xs = b.source::<Job, u64>();
///     b.output(id.apply(xs))
/// }).unwrap();
/// let (tx, rx) = std::sync::mpsc::sync_channel(2);
/// let reader = std::thread::spawn(move || rx.iter().map(|o: rayorch_runtime::RootOutcome| o.key).sum::<u64>());
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
}

impl<S: Sink + ?Sized> Sink for &mut S {
    fn root(&mut self, outcome: &RootOutcome) -> Result<(), BoxError> {
        (**self).root(outcome)
    }
    fn close(&mut self) -> Result<(), BoxError> {
        (**self).close()
    }
}

/// Writes one JSON line `{"key": k, "value": v}` per root whose output is present.
pub struct JsonlSink<T> {
    out: Output<T>,
    w: BufWriter<File>,
}

impl<T> JsonlSink<T> {
    /// Create (truncate) `path`.
    pub fn create(path: impl AsRef<Path>, out: Output<T>) -> std::io::Result<Self> {
        Ok(JsonlSink {
            out,
            w: BufWriter::new(File::create(path)?),
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
            serde_json::to_writer(
                &mut self.w,
                &Line {
                    key: outcome.key,
                    value: &v,
                },
            )?;
            self.w.write_all(b"\n")?;
            // Each line is durable on its own: a crash keeps what was written.
            self.w.flush()?;
        }
        Ok(())
    }
    fn close(&mut self) -> Result<(), BoxError> {
        Ok(self.w.flush()?)
    }
}

/// Writes one JSON line per root that is not present, with its cause chain.
pub struct FailuresSink {
    w: BufWriter<File>,
}

impl FailuresSink {
    /// Create (truncate) `path`.
    pub fn create(path: impl AsRef<Path>) -> std::io::Result<Self> {
        Ok(FailuresSink {
            w: BufWriter::new(File::create(path)?),
        })
    }
}

/// One failure line, as [`FailuresSink`] writes it.
#[derive(Serialize, serde::Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct FailureLine {
    /// The root's key.
    pub key: u64,
    /// `dropped`, `failed` or `suppressed`.
    pub outcome: String,
    /// The cause's message (empty for dropped roots).
    pub cause: String,
    /// Where the cause arose: the Call and Entity path.
    pub at: Option<String>,
}

impl Sink for FailuresSink {
    fn root(&mut self, outcome: &RootOutcome) -> Result<(), BoxError> {
        let kind = outcome.kind();
        if kind == crate::ItemKind::Present {
            return Ok(());
        }
        let line = FailureLine {
            key: outcome.key,
            outcome: format!("{kind:?}").to_lowercase(),
            cause: outcome
                .cause()
                .map(|c| c.message().to_string())
                .unwrap_or_default(),
            at: outcome.cause().and_then(|c| c.context().map(String::from)),
        };
        serde_json::to_writer(&mut self.w, &line)?;
        self.w.write_all(b"\n")?;
        self.w.flush()?;
        Ok(())
    }
    fn close(&mut self) -> Result<(), BoxError> {
        Ok(self.w.flush()?)
    }
}
