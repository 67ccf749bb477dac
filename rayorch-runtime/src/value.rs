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

/// Why an Item is not present: the text a stage gave plus where it happened.
///
/// Cheap to clone; a Suppressed Item carries the cause of the input that
/// decided it, so a root's cause always leads back to the original failure.
#[derive(Clone, PartialEq, Eq)]
pub struct Cause(Arc<CauseInner>);

#[derive(PartialEq, Eq)]
struct CauseInner {
    message: String,
    context: Option<String>,
}

impl Cause {
    /// A cause with only a message.
    pub fn new(message: impl Into<String>) -> Cause {
        Cause(Arc::new(CauseInner {
            message: message.into(),
            context: None,
        }))
    }

    /// A cause located at a Call and an Entity.
    pub fn at(message: impl Into<String>, context: impl Into<String>) -> Cause {
        Cause(Arc::new(CauseInner {
            message: message.into(),
            context: Some(context.into()),
        }))
    }

    /// Attach a location unless one is already set.
    pub(crate) fn located(self, context: impl FnOnce() -> String) -> Cause {
        if self.0.context.is_some() {
            self
        } else {
            Cause::at(self.0.message.clone(), context())
        }
    }

    /// The text the stage (or the engine) gave.
    pub fn message(&self) -> &str {
        &self.0.message
    }

    /// Where it happened (`Call \`ocr\` on Doc#1/Page#1`), when known.
    pub fn context(&self) -> Option<&str> {
        self.0.context.as_deref()
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
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
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
