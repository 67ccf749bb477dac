//! The engine's boundary: the values that cross between the engine and an
//! executor (settings, batches and the references a report must quote, root
//! outcomes, and counters).
//!
//! Nothing here holds engine state. A [`BatchId`] and the
//! [`GrainRef`]s of a batch are the only handles an executor gets, and the
//! commit gate checks both (slot + nonce, epoch + generation) on every report.

use std::fmt;

use crate::plan::Output;
use crate::stage::BatchInputs;
use crate::value::{Cause, Data, Item, ItemKind, Value, take_value};

/// Engine settings.
#[derive(Clone, Debug)]
pub struct EngineConfig {
    /// At most this many roots in flight (the admission window).
    pub window: usize,
    /// No root is admitted while this many child Entities (all Domains
    /// below the root) are live; `usize::MAX` turns the bound off. See
    /// `engine/admission.rs` for the rule and its guarantee.
    pub window_children: usize,
    /// While the children window is on: how many roots may be admitted
    /// before they have expanded (their child counts still unknown).
    /// `None`: as many as the Calls before the first Expansion can run at
    /// once (Σ replicas × batch size × concurrency), so they are never
    /// starved; `Some(1)`: one at a time, the tightest bound. See
    /// `engine/admission.rs`.
    pub unexpanded_roots: Option<usize>,
    /// Seed for the unordered reservation policy.
    pub seed: u64,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            window: 64,
            window_children: usize::MAX,
            unexpanded_roots: None,
            seed: 0x5eed,
        }
    }
}

/// Names one reserved batch; a report must quote it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BatchId {
    pub(crate) slot: u32,
    pub(crate) nonce: u32,
}

/// One Grain of a reserved batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GrainRef {
    /// The Call index.
    pub call: usize,
    pub(crate) domain: usize,
    pub(crate) entity: u32,
    pub(crate) epoch: u32,
    /// The generation this dispatch carries.
    pub generation: u32,
}

/// A physical batch handed to an executor.
#[derive(Debug)]
pub struct Batch {
    /// Quote it in the report.
    pub id: BatchId,
    /// The Call index (see [`crate::Plan::calls`]).
    pub call: usize,
    /// Erased inputs, `arity` slots per Grain, in Grain order.
    pub inputs: BatchInputs,
    /// The Grains, in the same order.
    pub grains: Vec<GrainRef>,
}

/// A root's final outcome: one Item per plan output.
#[derive(Clone)]
pub struct RootOutcome {
    /// The root's key.
    pub key: u64,
    /// One Item per output, in declaration order.
    pub items: Vec<Item<Value>>,
    /// The id of the plan that produced it, checked against each [`Output`].
    pub(crate) plan: u32,
}

/// The plan id is left out: it says which plan's handles apply, not what
/// the root became (two builds of one pipeline print the same outcomes).
impl fmt::Debug for RootOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RootOutcome")
            .field("key", &self.key)
            .field("items", &self.items)
            .finish()
    }
}

impl RootOutcome {
    /// Read one output, typed. A handle from another plan reads as Failed
    /// (never as this plan's output at the same position).
    pub fn get<T: Data>(&self, out: Output<T>) -> Item<T> {
        if out.plan != self.plan {
            return Item::Failed(Cause::new(format!(
                "this Output (#{}) belongs to another plan: use the handle returned with this plan by build_plan()/Plan::build",
                out.index
            )));
        }
        match self.items.get(out.index) {
            Some(Item::Present(v)) => match take_value::<T>(v.clone()) {
                Some(t) => Item::Present(t),
                None => Item::Failed(Cause::new("internal: output type mismatch")),
            },
            Some(Item::Dropped) => Item::Dropped,
            Some(Item::Failed(c)) => Item::Failed(c.clone()),
            Some(Item::Suppressed(c)) => Item::Suppressed(c.clone()),
            None => Item::Failed(Cause::new("internal: no such output")),
        }
    }

    /// The root's overall kind: the first non-present output decides.
    pub fn kind(&self) -> ItemKind {
        self.items
            .iter()
            .map(Item::kind)
            .find(|k| *k != ItemKind::Present)
            .unwrap_or(ItemKind::Present)
    }

    /// The cause of the first non-present output, if any.
    pub fn cause(&self) -> Option<&Cause> {
        self.items.iter().find_map(Item::cause)
    }
}

/// Per-Call counters.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CallStats {
    /// Physical batches dispatched (RPCs).
    pub rpcs: u64,
    /// Grains dispatched, retries included.
    pub grains_dispatched: u64,
    /// Grains committed with a present value.
    pub committed: u64,
    /// Grains ended Failed by a RecordFailure.
    pub record_failures: u64,
    /// Grains ended Failed by a GroupFailure.
    pub group_failures: u64,
    /// Grains ended Failed after exhausting recovery.
    pub exhausted: u64,
    /// Grains ended Failed by a stage contract error.
    pub contract_errors: u64,
    /// Whole attempts that failed (Err, panic, crash, timeout).
    pub attempt_failures: u64,
    /// Grains put back for a retry.
    pub requeued: u64,
    /// Grains sealed Suppressed by a barrier before they were dispatched.
    pub suppressed_before_dispatch: u64,
    /// In-flight Grains whose report the barrier refused.
    pub suppressed_in_flight: u64,
    /// Grain reports refused by the commit gate (old generation, freed root).
    pub stale_grains: u64,
    /// Queue entries examined by reservations (tombstones included).
    pub queue_touches: u64,
    /// Batches whose Grains belong to more than one parent.
    pub mixed_parent_batches: u64,
    /// Reservations that held ready Grains for mates (a shape key or a
    /// batch delay, see [`Call::max_batch_delay`](crate::Call::max_batch_delay)).
    pub holds: u64,
    /// Grains whose shape key function panicked (they went under key
    /// `u64::MAX`).
    pub shape_key_panics: u64,
    /// Timed Calls (a shape key or a batch delay): sum over dispatched
    /// Grains of the time each waited in this Call's queue, from ready (or
    /// requeued) to dispatch, in engine-clock µs. Untimed Calls never read
    /// the clock (0).
    pub queue_wait_us: u64,
    /// Shaped Calls: first-attempt batches by shape key, for the first
    /// 256 keys seen; later keys add to `other_keys`.
    pub key_batches: std::collections::BTreeMap<u64, KeyBatches>,
    /// Shaped Calls: batches of keys past the first 256.
    pub other_keys: KeyBatches,
    /// Grains sealed Failed at this Call, by the kind of their cause (summed
    /// over a Domain's Calls: the Domain's failed Grains by kind).
    pub failed: std::collections::BTreeMap<crate::value::FailureKind, u64>,
}

/// How many distinct shape keys a Call counts batches for, one by one
/// ([`CallStats::key_batches`]); a Call keyed by a continuous measure stays
/// bounded.
pub(crate) const KEYS_COUNTED: usize = 256;

/// Batches dispatched under one shape key, and the Grains they held.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KeyBatches {
    /// Batches.
    pub batches: u64,
    /// Grains in them.
    pub grains: u64,
}

/// Whole-engine counters.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EngineStats {
    /// Roots admitted.
    pub roots_admitted: u64,
    /// Roots whose outcome was handed out, by kind.
    pub roots_present: u64,
    /// See `roots_present`.
    pub roots_dropped: u64,
    /// See `roots_present`.
    pub roots_failed: u64,
    /// See `roots_present`.
    pub roots_suppressed: u64,
    /// Reports for a batch that is not in flight (stale or duplicate).
    pub rejected_reports: u64,
    /// Conflicting fact publications (always a bug; must stay 0).
    pub conflicts: u64,
    /// Invalid Grain transitions caught (always a bug; must stay 0). The
    /// first one ends the run with [`crate::RunError::InvalidTransition`].
    pub invalid_transitions: u64,
}

/// What happened to a report.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReportOutcome {
    /// The batch was in flight; this many Grains were sealed by it (with
    /// their own outcome or suppressed by a barrier), this many were stale.
    Accepted {
        /// Grains sealed by this report.
        committed: usize,
        /// Grains the gate refused.
        stale: usize,
    },
    /// The attempt failed; this many Grains were requeued.
    Retried {
        /// Grains put back.
        requeued: usize,
    },
    /// The batch is not in flight: a stale or duplicate report.
    Rejected,
}
