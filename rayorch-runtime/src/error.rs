//! The runtime's errors, one enum per concern.

use thiserror::Error;

/// A plan that cannot run. Every message names the offending Port or Call.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum PlanError {
    /// `Plan::build` was called while another build was active on this thread.
    #[error("a plan build is already active on this thread; build plans one at a time")]
    NestedBuild,
    /// A Port from another (or no) build was used.
    #[error(
        "{op} was given a Port that does not belong to this plan build; create every Port inside the `Plan::build` closure that uses it"
    )]
    ForeignPort {
        /// The operation that received it.
        op: String,
    },
    /// A shape key was given to a Call that has not exactly one required input.
    #[error(
        "Call `{call}` has a shape key but {inputs} input(s) or an optional one; a shape key reads the Call's single required input: key a Call with one input Port, or drop `.shape(..)`"
    )]
    ShapeInputs {
        /// The Call.
        call: String,
        /// How many inputs it was given.
        inputs: usize,
    },
    /// No source was declared.
    #[error("the plan has no source; declare one with `b.source::<Root, T>()`")]
    NoSource,
    /// More than one source was declared.
    #[error(
        "the plan declares a second source ({port}); this version takes one source per plan: pass a tuple or struct instead"
    )]
    SecondSource {
        /// The second source.
        port: String,
    },
    /// No output was declared.
    #[error("the plan has no output; return a root-Domain Port with `b.output(port)`")]
    NoOutput,
    /// A Port in the wrong Domain was used by an operation.
    #[error("{node} takes {input} from Domain `{found}`, but it needs {expected}; {hint}")]
    DomainMismatch {
        /// The node that received it.
        node: String,
        /// The offending input Port.
        input: String,
        /// The Domain it is in.
        found: &'static str,
        /// What was needed.
        expected: String,
        /// What to do.
        hint: &'static str,
    },
    /// Two expansions into the same child Domain.
    #[error(
        "{second} expands into Domain `{domain}`, which {first} already expands into; a child Domain has exactly one expansion per parent: use `expand_aligned` for several lists"
    )]
    SecondExpansion {
        /// The child Domain.
        domain: &'static str,
        /// The first expansion.
        first: String,
        /// The second one.
        second: String,
    },
    /// A second root Domain appeared.
    #[error(
        "{port} lives in root Domain `{domain}`, but the plan's source is in `{root}`; a plan has one root Domain"
    )]
    SecondRoot {
        /// The offending Port.
        port: String,
        /// Its Domain.
        domain: &'static str,
        /// The source's Domain.
        root: &'static str,
    },
    /// Work that never reaches an output.
    #[error(
        "{node} never reaches an output: its Grains would run for nothing; pass its Port on (a child-Domain Port must be `reduce`d back to the root) or remove it"
    )]
    Unused {
        /// The dead node.
        node: String,
    },
}

/// Every error found while building a plan, reported at once.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("invalid plan ({} error{}):{}", .0.len(), if .0.len() == 1 { "" } else { "s" }, .0.iter().map(|e| format!("\n  - {e}")).collect::<String>())]
pub struct PlanErrors(pub Vec<PlanError>);

/// A run that could not complete.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum RunError {
    /// A root input of the wrong type was given to the source.
    #[error(
        "root {key}: the source expects `{expected}`, but the input is another type; pass the type the plan's source declares"
    )]
    InputType {
        /// The root's key.
        key: u64,
        /// The declared type.
        expected: &'static str,
    },
    /// A [`crate::Runner`] was handed roots of another type than the plan's
    /// source takes; found before any root was admitted or any stage ran.
    #[error(
        "the plan's source (Domain `{domain}`) takes `{expected}`, but the run was given `{given}` roots; nothing ran: convert each root to `{expected}` before the run"
    )]
    SourceType {
        /// The source's (root) Domain.
        domain: &'static str,
        /// The type the source declares.
        expected: &'static str,
        /// The type the run was given.
        given: &'static str,
    },
    /// A root key is already in flight.
    #[error("root {key} is already in flight; root keys must be unique")]
    DuplicateKey {
        /// The root's key.
        key: u64,
    },
    /// The admission window is full.
    #[error("the admission window is full ({window} roots in flight); wait for a root to finish")]
    WindowFull {
        /// The window size.
        window: usize,
    },
    /// The children window is full, or a live root has not expanded yet
    /// (its child count is unknown): see `EngineConfig::window_children`.
    #[error(
        "the children window is full ({children} child Entities live, bound {window_children}, {unexpanded} root(s) not yet expanded); wait for a root to finish"
    )]
    ChildrenWindowFull {
        /// Child Entities live.
        children: usize,
        /// The bound.
        window_children: usize,
        /// Live roots without children yet.
        unexpanded: usize,
    },
    /// A Call with `Recovery::Abort` failed an attempt.
    #[error(
        "Call `{call}` aborted the run: attempt on {entity} failed: {cause}; use a retry or isolate recovery policy to keep going"
    )]
    Aborted {
        /// The Call.
        call: String,
        /// The first Entity of the failed batch.
        entity: String,
        /// The error text.
        cause: String,
    },
    // Executor errors (every backend of the run loop).
    /// A Call's replica factory returned an error or panicked.
    #[error(
        "Call `{call}` (stage `{stage}`): the replica factory failed: {cause}; fix what the factory loads (model files, device, credentials): the run stopped before this Call could run"
    )]
    ReplicaFactory {
        /// The Call whose factory failed.
        call: String,
        /// The stage type.
        stage: &'static str,
        /// The factory's error or panic text.
        cause: String,
    },
    /// The async runtime could not start.
    #[error("could not start the async runtime: {0}")]
    Runtime(String),
    /// A blocking entry point (`Runner::run`, `Runner::run_stream`) was
    /// called from inside a tokio runtime, where it cannot start its own.
    #[error(
        "Runner::run was called inside a tokio runtime, which cannot block on a run: inside async code call `Runner::run_async` (or `run_stream_async`) and await it"
    )]
    InsideRuntime,
    /// A sink failed; what it had written stays.
    #[error("the sink failed: {0}; results written before this point are kept")]
    Sink(String),
    /// The engine caught itself making a Grain transition its lifecycle
    /// forbids (a bug in the engine or an executor reporting out of
    /// protocol); the run stops rather than corrupt lineage.
    #[error(
        "internal error: Call `{call}` on {entity}: {transition}; the run was stopped to keep lineage intact; please report this with the plan and the executor used"
    )]
    InvalidTransition {
        /// The Call.
        call: String,
        /// The Entity (Domain and path).
        entity: String,
        /// The move and the phase it was attempted from.
        transition: String,
    },
    /// Nothing can make progress, yet roots are unfinished.
    #[error("the run stalled: {0}")]
    Stalled(String),
    /// The journal could not be opened, read or committed (or a sink could
    /// not be cut back to the journal's positions on resume).
    #[error("journal {path}: {cause}")]
    Journal {
        /// The journal file.
        path: String,
        /// What failed and what to do.
        cause: String,
    },
    /// The journal belongs to another run: the plan or the source changed.
    #[error(
        "journal {path} was written by another run: its {what} was `{was}`, this run's is `{now}`; nothing ran: resume with the same {what}, force the resume (`Runner::journal_force`) to keep its finished roots anyway, or give a new journal path to start over"
    )]
    JournalMismatch {
        /// The journal file.
        path: String,
        /// `plan fingerprint` or `source`.
        what: &'static str,
        /// What the journal holds.
        was: String,
        /// What this run has.
        now: String,
    },
}
