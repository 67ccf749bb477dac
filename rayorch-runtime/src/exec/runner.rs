//! The production executor's front door: [`Runner`], a builder over a plan.
//!
//! Shape of a run:
//! - The run loop (`run_loop.rs`, shared by every executor) admits roots
//!   through the window, reserves batches, hands them to free replicas
//!   (`replica.rs`, this executor's backend), and turns their reports into
//!   engine commits. Every finished root goes to the [`Sink`] at once.
//! - A blocking stage's replica is its own OS thread: the factory (model load)
//!   runs there, then batches, one at a time. Nothing blocking ever runs on
//!   the async reactor, so async stages keep progressing beside them.
//! - An async stage's replica is one shared instance with up to
//!   `concurrency` batches in flight as tokio tasks (`replica.rs`).
//! - Calls applied from one `Call` value share one pool of replicas.
//!
//! Failure handling: an `Err` or a panic (anywhere in a stage, async ones
//! included) is an attempt failure handled by the Call's recovery policy. A
//! panicking replica, or one still running when its attempt times out, is
//! abandoned and replaced by a freshly initialised one; its Grains are retried
//! at a higher generation, and if the old replica reports later, the engine's
//! commit gate refuses it (counted in `rejected_reports`). A factory that
//! fails ends the run with [`RunError::ReplicaFactory`]; a Call with
//! `Recovery::Abort` ends it with the engine's `RunError::Aborted`.
//!
//! Durable runs: with [`Runner::journal`], each run opens (or creates) a
//! commit log and resumes what it holds (see [`crate::journal`]).
//!
//! Invariant: a `Runner` holds no per-run state besides its cancellation
//! flag (sticky, see [`CancelHandle`]) and its observer (lent to one run at a
//! time); each run builds its own engine and replicas.

use std::sync::{Arc, Mutex};

use futures::{Stream, StreamExt};

use crate::engine::EngineConfig;
use crate::error::RunError;
use crate::exec::control::{CancelHandle, ControlState, Observer};
use crate::exec::journal::{FsyncPolicy, Journal, JournalOptions};
use crate::exec::metrics::RunSummary;
use crate::exec::replica::ReplicaBackend;
use crate::exec::run_loop::{self, LoopConfig};
use crate::exec::sink::Sink;
use crate::plan::Plan;
use crate::value::{Data, Value};

/// Roots in flight at once by default ([`Runner::window`]).
pub const DEFAULT_WINDOW: usize = 64;

/// Child Entities (every Domain below the root) live at once before no new
/// root is admitted, by default ([`Runner::window_children`]): 65,536 pages
/// and lines, a few hundred MB of line crops at worst; a job whose children
/// are heavier widens or narrows it.
pub const DEFAULT_WINDOW_CHILDREN: usize = 1 << 16;

/// Full batches a consumer may have queued before its producers wait, by
/// default ([`Runner::backpressure`]).
pub const DEFAULT_BACKPRESSURE: usize = 2;

/// Runs a [`Plan`] over a source of roots, streaming outcomes to a sink.
///
/// ```
/// use rayorch::prelude::*;
///
/// #[derive(Domain)]
/// struct Doc;
/// #[derive(Domain)]
/// #[domain(parent = Doc)]
/// struct Word;
///
/// struct Lengths {
///     split: FnCall<String, Vec<String>>,
///     len: FnCall<String, usize>,
/// }
///
/// #[pipeline]
/// impl Lengths {
///     fn forward(&self, docs: Port<Doc, String>) -> Port<Doc, Vec<usize>> {
///         let word = expand!(self.split(docs) => Word);
///         reduce!(self.len(word))
///     }
/// }
///
/// let p = Lengths {
///     split: Call::map("split", |s: String| s.split(' ').map(String::from).collect()),
///     len: Call::map("len", |w: String| w.len()).batch_size(8).replicas(2),
/// };
/// let (plan, out) = p.build_plan().unwrap();
/// let mut lens = Vec::new();
/// let summary = Runner::new(&plan)
///     .run([(0, "a bb".to_string()), (1, "ccc".to_string())], Callback(|o: &RootOutcome| {
///         lens.push((o.key, o.get(out).present().unwrap()));
///     }))
///     .unwrap();
/// lens.sort();
/// assert_eq!(lens, vec![(0, vec![1, 2]), (1, vec![3])]);
/// assert_eq!(summary.present, 2);
/// ```
///
/// Sources may also be streams (a directory walk, a queue, a cursor): see
/// [`Runner::run_stream`]. The stream is polled only while the window has
/// room. A key given twice is that root's failure, not the run's.
///
/// Watch a run with [`Runner::observe`] (batch events, per-Domain counts) and
/// stop it with [`Runner::cancel_handle`]: a cancelled run still returns
/// `Ok`, its summary marked [`cancelled`](RunSummary::cancelled), after the
/// sink got every admitted root (live ones failed as cancelled).
pub struct Runner<'p> {
    plan: &'p Plan,
    window: usize,
    window_children: usize,
    unexpanded_roots: Option<usize>,
    backpressure: Option<usize>,
    seed: u64,
    control: Arc<ControlState>,
    observer: Mutex<Option<Box<dyn Observer>>>,
    journal: Option<JournalOptions>,
    unique_keys: bool,
}

impl<'p> Runner<'p> {
    /// A runner with the default memory bounds: a window of
    /// [`DEFAULT_WINDOW`] roots and [`DEFAULT_WINDOW_CHILDREN`] child
    /// Entities, and backpressure at [`DEFAULT_BACKPRESSURE`] full batches.
    #[must_use]
    pub fn new(plan: &'p Plan) -> Self {
        Runner {
            plan,
            window: DEFAULT_WINDOW,
            window_children: DEFAULT_WINDOW_CHILDREN,
            unexpanded_roots: None,
            backpressure: Some(DEFAULT_BACKPRESSURE),
            seed: 0x5eed,
            control: Arc::default(),
            observer: Mutex::new(None),
            journal: None,
            unique_keys: false,
        }
    }

    /// Journal runs at `path` (one redb file, created when missing): every
    /// root handed to the sink is committed there with the sinks' positions,
    /// and a run over an existing journal *resumes* it: outputs are cut back
    /// to the last commit and the roots it holds are skipped. Give the sinks
    /// opened to append (`JsonlSink::open`, `FailuresSink::open`) so a resume
    /// keeps what was committed.
    ///
    /// ```
    /// use rayorch::prelude::*;
    /// use rayorch::sink::JsonlSink;
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
    /// let dir = std::env::temp_dir().join(format!("rayorch-doc-journal-{}", std::process::id()));
    /// std::fs::create_dir_all(&dir).unwrap();
    /// let runner = Runner::new(&plan).journal(dir.join("run.journal")).journal_source("0..6");
    /// let first = runner.run((0..3u64).map(|k| (k, k)), JsonlSink::open(dir.join("out.jsonl"), out).unwrap()).unwrap();
    /// // A second run over the same journal skips the three finished roots.
    /// let second = runner.run((0..6u64).map(|k| (k, k)), JsonlSink::open(dir.join("out.jsonl"), out).unwrap()).unwrap();
    /// assert_eq!((first.present, second.present, second.journal_skipped), (3, 3, 3));
    /// let lines = std::fs::read_to_string(dir.join("out.jsonl")).unwrap();
    /// assert_eq!(lines.lines().count(), 6);
    /// # std::fs::remove_dir_all(&dir).unwrap();
    /// ```
    #[must_use]
    pub fn journal(mut self, path: impl Into<std::path::PathBuf>) -> Self {
        let opts = self
            .journal
            .get_or_insert_with(|| JournalOptions::new(std::path::PathBuf::new(), String::new()));
        opts.path = path.into();
        self
    }

    /// Describe the source (a glob, a query, a manifest's digest): stored in
    /// the journal; resuming with another description is
    /// [`RunError::JournalMismatch`]. Needs [`Runner::journal`].
    #[must_use]
    pub fn journal_source(mut self, description: impl Into<String>) -> Self {
        if let Some(o) = self.journal.as_mut() {
            o.source = description.into();
        }
        self
    }

    /// Resume the journal even when the plan or the source description
    /// changed (its finished roots are kept; the new identity is stored).
    #[must_use]
    pub fn journal_force(mut self, force: bool) -> Self {
        if let Some(o) = self.journal.as_mut() {
            o.force = force;
        }
        self
    }

    /// When the journal commits (each commit `fsync`s the outputs and the
    /// journal). Default: [`FsyncPolicy::Interval`] of one second.
    #[must_use]
    pub fn fsync(mut self, policy: FsyncPolicy) -> Self {
        if let Some(o) = self.journal.as_mut() {
            o.fsync = policy;
        }
        self
    }

    /// At most `n` roots in flight; memory is bounded by it.
    #[must_use]
    pub fn window(mut self, n: usize) -> Self {
        self.window = n.max(1);
        self
    }

    /// No new root is admitted while `n` child Entities (all Domains below
    /// the root, all depths) are live, nor while as many admitted roots
    /// have not expanded yet as the Calls before the first Expansion can
    /// run at once ([`Runner::unexpanded_roots`]): a window of 64 roots
    /// then cannot admit 64 × 427 pages at once. A child is live from its
    /// expansion until its parent has gathered it (every `reduce` over its
    /// Domain has decided for that parent): a page's lines stop counting
    /// once the page is reduced, the page once its document is, so short
    /// documents keep flowing while a long one runs. With one level below
    /// the root the live children stay below `n` plus the children of the
    /// roots admitted unexpanded (one, with `unexpanded_roots(1)`); deeper
    /// levels count while their parent is open. A root with more children
    /// than `n` is admitted, never refused.
    /// Default: [`DEFAULT_WINDOW_CHILDREN`]; `usize::MAX` turns it off.
    ///
    /// ```
    /// use rayorch::prelude::*;
    ///
    /// #[derive(Domain)]
    /// struct Doc;
    /// #[derive(Domain)]
    /// #[domain(parent = Doc)]
    /// struct Page;
    ///
    /// struct Ocr {
    ///     split: FnCall<u32, Vec<u32>>,
    ///     ocr: FnCall<u32, u32>,
    /// }
    ///
    /// #[pipeline]
    /// impl Ocr {
    ///     fn forward(&self, docs: Port<Doc, u32>) -> Port<Doc, Vec<u32>> {
    ///         let page = expand!(self.split(docs) => Page);
    ///         reduce!(self.ocr(page))
    ///     }
    /// }
    ///
    /// let p = Ocr {
    ///     split: Call::map("split", |n: u32| (0..n).collect()),
    ///     ocr: Call::map("ocr", |p: u32| p + 1).batch_size(16),
    /// };
    /// let (plan, out) = p.build_plan().unwrap();
    /// let mut pages = 0;
    /// Runner::new(&plan)
    ///     .window(64)
    ///     .window_children(100)
    ///     .run((0..10u64).map(|k| (k, 427u32)), Callback::new(|o| pages += o.get(out).present().unwrap().len()))
    ///     .unwrap();
    /// assert_eq!(pages, 4270);
    /// ```
    #[must_use]
    pub fn window_children(mut self, n: usize) -> Self {
        self.window_children = n.max(1);
        self
    }

    /// While the children window is on, admit at most `n` roots that have
    /// not expanded yet (whose child counts are unknown). Default: as many
    /// as the root-Domain Calls before the first Expansion can run at once
    /// (Σ replicas × batch size × concurrency), so a `render(doc)` with 4
    /// replicas renders 4 documents at a time; `1` admits them one at a
    /// time, which bounds the live children tightest (the window plus one
    /// root's children) and starves those Calls of parallel work.
    #[must_use]
    pub fn unexpanded_roots(mut self, n: usize) -> Self {
        self.unexpanded_roots = Some(n.max(1));
        self
    }

    /// Hold a Call (reserve no batch for it) while a Call reading its
    /// outputs directly has `batches` full batches or more queued and its
    /// replicas are busy: a fast producer (render a page) then cannot pile
    /// its payloads up in front of a slow consumer (detect on it). It moves
    /// only time, never outcomes, and never stalls a run (an idle consumer
    /// holds nothing). Default: [`DEFAULT_BACKPRESSURE`] batches.
    #[must_use]
    pub fn backpressure(mut self, batches: usize) -> Self {
        self.backpressure = Some(batches.max(1));
        self
    }

    /// Refuse a repeated root key even when its first root finished long
    /// before (a set of every key given: about 16 bytes per root, growing
    /// with the run). By default a repeated key is refused while its first
    /// root is live and, in a journaled run, whenever the journal holds it
    /// (one lookup in the file per root), so a run's memory does not grow
    /// with its length; without a journal, a key repeated after its first
    /// root finished runs again.
    #[must_use]
    pub fn unique_keys(mut self, on: bool) -> Self {
        self.unique_keys = on;
        self
    }

    /// No backpressure: producers run as far ahead as their queues allow.
    #[must_use]
    pub fn no_backpressure(mut self) -> Self {
        self.backpressure = None;
        self
    }

    /// Seed of the `Unordered` reservation policy (runs are otherwise
    /// independent of it).
    #[must_use]
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// Watch runs with `observer` (batch events, per-Domain counts), called
    /// on the run loop; replaces an earlier observer.
    #[must_use]
    pub fn observe(self, observer: impl Observer + 'static) -> Self {
        *self.observer.lock().unwrap_or_else(|p| p.into_inner()) = Some(Box::new(observer));
        self
    }

    /// A handle that stops this runner's runs from anywhere (`Clone + Send`).
    pub fn cancel_handle(&self) -> CancelHandle {
        CancelHandle(self.control.clone())
    }

    /// Run on a fresh tokio runtime (do not call from inside one: use
    /// [`Runner::run_async`] there).
    ///
    /// Every entry point checks `T` against the plan's source type first: a
    /// mismatch is [`RunError::SourceType`] before any root is admitted.
    pub fn run<T: Data>(
        &self,
        source: impl IntoIterator<Item = (u64, T)>,
        sink: impl Sink,
    ) -> Result<RunSummary, RunError> {
        self.block_on(self.run_async(source, sink))
    }

    /// Run on the current tokio runtime.
    ///
    /// Dropping the future (a `select!` branch that lost, a timeout) ends
    /// the run where it stands: async attempts in flight are dropped with
    /// it, blocking replica threads finish their current batch and exit,
    /// and no root reaches the sink afterwards. Roots the sink already had
    /// are done; with a journal, the roots it committed are skipped by the
    /// next run and every other root runs again (to stop cleanly and get
    /// a summary, use [`Runner::cancel_handle`] or
    /// [`CancelHandle::stop_admitting`](crate::CancelHandle::stop_admitting) instead).
    pub async fn run_async<T: Data>(
        &self,
        source: impl IntoIterator<Item = (u64, T)>,
        sink: impl Sink,
    ) -> Result<RunSummary, RunError> {
        self.run_stream_async(futures::stream::iter(source), sink).await
    }

    /// Run over a stream of roots on a fresh tokio runtime.
    ///
    /// ```
    /// use rayorch::prelude::*;
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
    /// let queue = futures::stream::iter((0..5u64).map(|k| (k, k))); // any `Stream` of roots
    /// let mut sum = 0;
    /// Runner::new(&plan)
    ///     .window(2)
    ///     .run_stream(queue, Callback(|o: &RootOutcome| sum += o.get(out).present().unwrap()))
    ///     .unwrap();
    /// assert_eq!(sum, 20);
    /// ```
    pub fn run_stream<T: Data>(
        &self,
        source: impl Stream<Item = (u64, T)>,
        sink: impl Sink,
    ) -> Result<RunSummary, RunError> {
        self.block_on(self.run_stream_async(source, sink))
    }

    /// Run over a stream of roots on the current tokio runtime.
    pub async fn run_stream_async<T: Data>(
        &self,
        source: impl Stream<Item = (u64, T)>,
        mut sink: impl Sink,
    ) -> Result<RunSummary, RunError> {
        self.plan.check_source::<T>()?;
        let journal = match &self.journal {
            Some(opts) => Some(Journal::open(opts, &self.plan.fingerprint(), &mut sink)?),
            None => None,
        };
        let observer = self.observer.lock().unwrap_or_else(|p| p.into_inner()).take();
        let config = LoopConfig {
            engine: EngineConfig {
                window: self.window,
                window_children: self.window_children,
                unexpanded_roots: self.unexpanded_roots,
                seed: self.seed,
            },
            backpressure: self.backpressure,
            journal,
            unique_keys: self.unique_keys,
        };
        let source = source.map(|(k, v)| (k, Arc::new(v) as Value));
        let mut backend = ReplicaBackend::new(self.plan);
        let (result, observer) = run_loop::run(
            self.plan,
            config,
            sink,
            &mut backend,
            &self.cancel_handle(),
            observer,
            source,
        )
        .await;
        *self.observer.lock().unwrap_or_else(|p| p.into_inner()) = observer;
        result
    }

    fn block_on<F: Future<Output = Result<RunSummary, RunError>>>(&self, run: F) -> F::Output {
        if tokio::runtime::Handle::try_current().is_ok() {
            return Err(RunError::InsideRuntime);
        }
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .map_err(|e| RunError::Runtime(e.to_string()))?;
        let result = rt.block_on(run);
        // A factory still running under `spawn_blocking` (a hung model load
        // on an abandoned replica) must not hold `run` back.
        rt.shutdown_background();
        result
    }
}
