//! Values, Items and causes: what flows along Ports.
//!
//! The engine is type-erased: a Port's values travel as [`Value`]
//! (`Arc<dyn Any + Send + Sync>`), so fan-out (one Port, many consumers) and
//! broadcast share one allocation. The typed builder records, per Port, the
//! monomorphized functions that turn erased values back into `T`; those run on
//! worker threads, never on the control plane.
//!
//! # When a payload moves and when it is copied
//!
//! A stage takes its inputs by value (`run(Vec<In>)`), so whoever hands a
//! value to a stage gives it up: if the attempt fails, the value is gone.
//! The rule, in DESIGN's terms:
//!
//! - **Single consumer** (the Port is read by one node and is not a plan
//!   output): the engine hands its only `Arc` to the batch when no retry can
//!   follow the attempt, and the glue unwraps it with `Arc::try_unwrap`:
//!   zero copies. Expand and Reduce always take their single-consumer
//!   inputs this way (they cannot fail), so lists split into children and
//!   children gathered into lists move too.
//! - **Retries**: while the Call's recovery policy may still retry the Grain
//!   after this attempt (`Isolate` on a first attempt or in a group,
//!   `RetryBatch(n)` / `RetryTail(n)` with budget left), the engine keeps
//!   its `Arc` so the retry has the value, and the glue's `try_unwrap`
//!   fails, so the stage gets one deep copy for that attempt. The last
//!   attempt the policy allows (and every attempt under `Abort` or a zero
//!   budget) moves. A copy is the price of being able to retry a stage that
//!   consumed its input; a payload behind an `Arc` makes it a reference-count
//!   bump.
//! - **Several consumers** (or a plan output): the engine keeps the Item's
//!   value until the root is released, so every consumer that needs a `T`
//!   copies it: each consuming Call's stage gets one copy per attempt, an
//!   Expand copies the list it splits, a Reduce the children it gathers, and
//!   reading a root's output ([`crate::RootOutcome::get`]) copies it. With
//!   `T = Arc<U>` each of these copies is a reference-count bump.
//!
//! The decision is `retry_possible` in the engine's Call ingredient, taken
//! at reservation; recovery consults the same function, so a Grain whose
//! values moved into a failed attempt is never requeued.

use std::any::Any;
use std::fmt;
use std::sync::Arc;

/// A type-erased Port value.
pub type Value = Arc<dyn Any + Send + Sync>;

/// The output values of one Grain, one per output Port of its Call, in
/// Port order. Inline for a Call with one output (the common case): a
/// commit allocates nothing for the list itself.
pub type Values = smallvec::SmallVec<[Value; 1]>;

/// What a Port may carry: cloneable (a value read by two consumers is cloned
/// for the second) and shareable across threads. Wrap large payloads in `Arc`
/// to make that clone free.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot flow along a rayorch Port",
    label = "Port values must be `Clone + Send + Sync + 'static`",
    note = "derive `Clone`, or wrap the value in `std::sync::Arc` to share it"
)]
pub trait Data: Clone + Send + Sync + 'static {}

impl<T: Clone + Send + Sync + 'static> Data for T {}

/// What kind of failure a [`Cause`] records: the engine classifies every
/// failure it seals, and a Suppressed Item carries the cause (so the kind
/// and origin) of the failure that suppressed it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum FailureKind {
    /// A stage's `RecordFailure`: this record is bad.
    Record,
    /// A stage's `GroupFailure`: this record dooms its queued siblings.
    Group,
    /// Physical: the attempt failed (`Err` for the batch, a crash) and the
    /// Call's recovery left no retry for this record.
    Error,
    /// Physical: the stage panicked and no retry was left.
    Panic,
    /// Physical: the attempt (or its worker's lease) ran out of time and no
    /// retry was left.
    Timeout,
    /// The stage broke its contract (a wrong number of outcomes, an output
    /// it cannot send): a bug in the stage, never retried.
    Contract,
    /// The run was cancelled before the root finished.
    Cancelled,
    /// The source gave an unusable root (a key given twice).
    Source,
}

impl FailureKind {
    /// The kind's name as failure lines write it (`record`, `panic`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            FailureKind::Record => "record",
            FailureKind::Group => "group",
            FailureKind::Error => "error",
            FailureKind::Panic => "panic",
            FailureKind::Timeout => "timeout",
            FailureKind::Contract => "contract",
            FailureKind::Cancelled => "cancelled",
            FailureKind::Source => "source",
        }
    }
}

impl fmt::Display for FailureKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where an Entity sits: its root key, then one ordinal per level.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EntityPath {
    /// The root's key.
    pub root: u64,
    /// Ordinals below the root, outermost first.
    pub ordinals: Vec<u32>,
}

impl fmt::Display for EntityPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.root)?;
        for o in &self.ordinals {
            write!(f, "/{o}")?;
        }
        Ok(())
    }
}

/// Where a failure arose: the Call and the Entity, the Entity as its path
/// from the root with each Domain named (`Pdf 7 / Page 3 / Line 12`: root
/// key 7, page ordinal 3, line ordinal 12).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Origin {
    /// The Call (or structural operation) that failed.
    pub call: Arc<str>,
    /// The Entity, as a Domain-named path from the root (for people).
    pub entity: String,
    /// The Entity's Domain.
    pub domain: &'static str,
    /// The Entity's place: its root's key and one ordinal per level below
    /// the root (for tools: no parsing of `entity`).
    pub path: EntityPath,
}

/// Why an Item is not present: the text a stage gave, what kind of failure
/// it was and where it happened (its provenance).
///
/// Cheap to clone; a Suppressed Item carries the cause of the input that
/// decided it, so a root's cause always leads back to the original failure:
/// its [`kind`](Cause::kind) and [`origin`](Cause::origin) are that
/// failure's. In a `reduce!(x, keep_failed)` list, a child that was
/// suppressed (not failed itself) holds a cause whose
/// [`is_suppression`](Cause::is_suppression) is true.
#[derive(Clone, PartialEq, Eq)]
pub struct Cause(Arc<CauseInner>);

#[derive(Clone, PartialEq, Eq)]
struct CauseInner {
    message: String,
    code: Option<Arc<str>>,
    context: Option<String>,
    kind: Option<FailureKind>,
    origin: Option<Origin>,
    suppression: bool,
    attempts: Vec<FailedAttempt>,
    source: Option<StageError>,
}

/// One failed attempt at a record, as its [`Cause::attempts`] lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FailedAttempt {
    /// How the attempt ended: `Error` (the stage returned `Err`), `Panic`
    /// or `Timeout`.
    pub kind: FailureKind,
    /// What it said (`HTTP 500`, `panicked: ...`, `timed out after 2s`).
    pub message: String,
}

/// The stage's own error, kept so that a failure can be downcast to it.
/// Two are equal when they read the same (an error type need not be `Eq`).
#[derive(Clone)]
struct StageError(Arc<dyn std::error::Error + Send + Sync>);

impl PartialEq for StageError {
    fn eq(&self, other: &StageError) -> bool {
        Arc::ptr_eq(&self.0, &other.0) || self.0.to_string() == other.0.to_string()
    }
}

impl Eq for StageError {}

impl Cause {
    /// A cause with only a message (the engine adds its kind and origin
    /// when it seals the failure).
    pub fn new(message: impl Into<String>) -> Cause {
        Cause(Arc::new(CauseInner {
            message: message.into(),
            code: None,
            context: None,
            kind: None,
            origin: None,
            suppression: false,
            attempts: Vec::new(),
            source: None,
        }))
    }

    /// A cause made from a typed error: its text is the error's, and the
    /// error itself stays reachable ([`Cause::stage_error`], and
    /// `std::error::Error::source`) so a sink can downcast it.
    ///
    /// ```
    /// use rayorch::Cause;
    ///
    /// let cause = Cause::from_error(std::io::Error::other("disk gone"));
    /// assert_eq!(cause.message(), "disk gone");
    /// let io = cause.stage_error().and_then(|e| e.downcast_ref::<std::io::Error>());
    /// assert_eq!(io.map(|e| e.kind()), Some(std::io::ErrorKind::Other));
    /// ```
    pub fn from_error(error: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Cause {
        let error: Arc<dyn std::error::Error + Send + Sync> = Arc::from(error.into());
        let mut inner = (*Cause::new(error.to_string()).0).clone();
        inner.source = Some(StageError(error));
        Cause(Arc::new(inner))
    }

    /// A record's failure after its attempts (every one, in order); the
    /// cause's kind is the last attempt's, its source the last attempt's
    /// own error, when it returned one.
    pub(crate) fn after_attempts(
        message: String,
        attempts: Vec<FailedAttempt>,
        source: Option<Arc<dyn std::error::Error + Send + Sync>>,
    ) -> Cause {
        let kind = attempts.last().map_or(FailureKind::Error, |a| a.kind);
        let mut inner = (*Cause::of_kind(message, kind).0).clone();
        inner.attempts = attempts;
        inner.source = source.map(StageError);
        Cause(Arc::new(inner))
    }

    /// Give the cause its kind and origin unless it has them (a cause that
    /// already went through the engine keeps its own).
    pub(crate) fn classified(self, kind: FailureKind, origin: impl FnOnce() -> Origin) -> Cause {
        if self.0.kind.is_some() && self.0.origin.is_some() {
            return self;
        }
        let mut inner = (*self.0).clone();
        inner.kind.get_or_insert(kind);
        if inner.origin.is_none() {
            let o = origin();
            inner
                .context
                .get_or_insert_with(|| format!("Call `{}` on {}", o.call, o.entity));
            inner.origin = Some(o);
        }
        Cause(Arc::new(inner))
    }

    /// A failure of the run itself (no Call, no Entity below the root).
    pub(crate) fn of_kind(message: impl Into<String>, kind: FailureKind) -> Cause {
        let mut inner = (*Cause::new(message).0).clone();
        inner.kind = Some(kind);
        Cause(Arc::new(inner))
    }

    /// This cause as a sibling's that it suppressed (for `keep_failed`).
    pub(crate) fn suppression(&self) -> Cause {
        let mut inner = (*self.0).clone();
        inner.suppression = true;
        Cause(Arc::new(inner))
    }

    /// This cause with a stable, machine-readable code (`pdf.corrupt`,
    /// `input.not_pdf`, …) that failure lines carry, so failures can be
    /// grouped without parsing messages. Use dotted lowercase names; the
    /// engine's own are listed at [`Cause::code`].
    #[must_use]
    pub fn with_code(self, code: impl Into<Arc<str>>) -> Cause {
        let mut inner = (*self.0).clone();
        inner.code = Some(code.into());
        Cause(Arc::new(inner))
    }

    /// The failure's code: the one its stage set ([`Cause::with_code`]),
    /// else the engine's: `input.duplicate_key`, `input.wrong_type`,
    /// `call.stopped` (a Call past its cap of stuck threads), else the
    /// kind's name (`record`, `group`, `error`, `panic`, `timeout`,
    /// `contract`, `cancelled`, `source`); `None` only for a cause no
    /// stage coded and the engine has not sealed yet.
    pub fn code(&self) -> Option<&str> {
        self.0
            .code
            .as_deref()
            .or_else(|| self.0.kind.map(FailureKind::as_str))
    }

    /// The text the stage (or the engine) gave.
    pub fn message(&self) -> &str {
        &self.0.message
    }

    /// Where it happened (`Call \`ocr\` on Doc 1 / Page 1`), when known.
    pub fn context(&self) -> Option<&str> {
        self.0.context.as_deref()
    }

    /// What kind of failure it was (`None` for a cause the engine has not
    /// sealed, e.g. one a stage just made).
    pub fn kind(&self) -> Option<FailureKind> {
        self.0.kind
    }

    /// The Call and Entity it arose at, when known.
    pub fn origin(&self) -> Option<&Origin> {
        self.0.origin.as_ref()
    }

    /// The record's failed attempts, in order: every one for a per-record
    /// Call ([`Call::new_async_records`](crate::Call::new_async_records));
    /// the last one for a batch Call whose recovery ran out (the engine
    /// counts a Grain's earlier attempts, it does not keep their text).
    /// Empty for a failure the stage returned (`RecordFailure`,
    /// `GroupFailure`) and for one that crossed a process boundary.
    pub fn attempts(&self) -> &[FailedAttempt] {
        &self.0.attempts
    }

    /// The stage's own error, when it gave one: the `Err` a batch stage or a
    /// record's last attempt returned, or the error a cause was made from
    /// ([`Cause::from_error`]). Downcast it to the stage's error type. Kept
    /// in the process that ran the stage only (a distributed worker's
    /// failure reaches the owner as its text and code).
    pub fn stage_error(&self) -> Option<&(dyn std::error::Error + Send + Sync + 'static)> {
        self.0.source.as_ref().map(|s| &*s.0)
    }

    /// In a `keep_failed` list: the child was suppressed by this failure
    /// (a sibling's or an input's), it did not fail itself.
    pub fn is_suppression(&self) -> bool {
        self.0.suppression
    }
}

impl fmt::Display for Cause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0.context {
            Some(c) => write!(f, "{} ({c})", self.0.message),
            None => f.write_str(&self.0.message),
        }
    }
}

impl std::error::Error for Cause {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0
            .source
            .as_ref()
            .map(|s| &*s.0 as &(dyn std::error::Error + 'static))
    }
}

impl fmt::Debug for Cause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.to_string())
    }
}

impl<S: Into<String>> From<S> for Cause {
    fn from(s: S) -> Cause {
        Cause::new(s)
    }
}

/// One Item: the value or outcome of one (Port, Entity).
#[derive(Clone, Debug, PartialEq)]
pub enum Item<T> {
    /// The value exists.
    Present(T),
    /// Filtered away (or an input was): not an error.
    Dropped,
    /// The producing Grain failed.
    Failed(Cause),
    /// An input failed, so this was never computed.
    Suppressed(Cause),
}

impl<T> Item<T> {
    /// The value, if present.
    pub fn present(self) -> Option<T> {
        match self {
            Item::Present(v) => Some(v),
            _ => None,
        }
    }

    /// The cause, for Failed and Suppressed Items.
    pub fn cause(&self) -> Option<&Cause> {
        match self {
            Item::Failed(c) | Item::Suppressed(c) => Some(c),
            _ => None,
        }
    }

    /// The Item's kind, without its payload.
    pub fn kind(&self) -> ItemKind {
        match self {
            Item::Present(_) => ItemKind::Present,
            Item::Dropped => ItemKind::Dropped,
            Item::Failed(_) => ItemKind::Failed,
            Item::Suppressed(_) => ItemKind::Suppressed,
        }
    }

    /// Map the present value.
    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> Item<U> {
        match self {
            Item::Present(v) => Item::Present(f(v)),
            Item::Dropped => Item::Dropped,
            Item::Failed(c) => Item::Failed(c),
            Item::Suppressed(c) => Item::Suppressed(c),
        }
    }
}

/// The terminal kind of an Item.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ItemKind {
    /// See [`Item::Present`].
    Present,
    /// See [`Item::Dropped`].
    Dropped,
    /// See [`Item::Failed`].
    Failed,
    /// See [`Item::Suppressed`].
    Suppressed,
}

/// What a stage returns for one input of a batch.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome<T> {
    /// Success: the output value.
    Ok(T),
    /// This record is bad: its Grain ends Failed; nothing else is touched.
    RecordFailure(Cause),
    /// This record dooms its siblings: a barrier for (Call, immediate parent)
    /// suppresses the parent's queued siblings in this Call.
    GroupFailure(Cause),
}

impl<T> Outcome<T> {
    /// Map the success value.
    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> Outcome<U> {
        match self {
            Outcome::Ok(v) => Outcome::Ok(f(v)),
            Outcome::RecordFailure(c) => Outcome::RecordFailure(c),
            Outcome::GroupFailure(c) => Outcome::GroupFailure(c),
        }
    }
}

impl<T> From<T> for Outcome<T> {
    fn from(v: T) -> Outcome<T> {
        Outcome::Ok(v)
    }
}

/// Every item of `items` (`n` of them), or `None` at the first `None`: a
/// list of `n` items allocated once. (`collect::<Option<Vec<_>>>()` cannot
/// know the length through its short-circuit and grows the list by doubling:
/// a reallocation chain per batch or gathered document.)
pub(crate) fn all_or_none<T>(n: usize, items: impl Iterator<Item = Option<T>>) -> Option<Vec<T>> {
    let mut out = Vec::with_capacity(n);
    for x in items {
        out.push(x?);
    }
    Some(out)
}

/// Take a `T` out of an erased value: moved when this is the last reference
/// (no copy), cloned otherwise (the one place a Port value is deep-copied).
pub(crate) fn take_value<T: Data>(v: Value) -> Option<T> {
    // Shared: copy at once (the count cannot fall to one under us in a way
    // that matters: at worst a value about to be unshared is copied).
    if Arc::strong_count(&v) > 1 {
        return v.downcast_ref::<T>().cloned();
    }
    match v.downcast::<T>() {
        Ok(arc) => Some(Arc::try_unwrap(arc).unwrap_or_else(|shared| (*shared).clone())),
        Err(_) => None,
    }
}
