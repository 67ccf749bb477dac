//! The propagation rules of the runtime contract, as pure functions.
//!
//! These are the specification: the engine calls them at each decision point
//! (with the few input states of one Grain, Filter, Expansion or Reduce), and
//! the unit tests below check them over the whole Cartesian product of input
//! states (CONFORMANCE.md §A).

/// The state of one Item as a rule sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum State {
    /// Not yet published.
    Unresolved,
    /// Present value.
    Present,
    /// Dropped.
    Dropped,
    /// Failed.
    Failed,
    /// Suppressed.
    Suppressed,
}

impl State {
    /// All five states, for exhaustive tests.
    pub const ALL: [State; 5] = [
        State::Unresolved,
        State::Present,
        State::Dropped,
        State::Failed,
        State::Suppressed,
    ];

    fn is_failure(self) -> bool {
        matches!(self, State::Failed | State::Suppressed)
    }
}

/// What happens to a Call's Grain given its inputs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CallDecision {
    /// Some input is unresolved.
    Wait,
    /// Every output is Suppressed with the cause of input `i`.
    SuppressedBy(usize),
    /// Every output is Suppressed by the (Call, parent) GroupFailure barrier.
    SuppressedByBarrier,
    /// A required input is dropped: outputs Dropped, the stage is not called.
    Dropped,
    /// Executable.
    Ready,
}

/// Call input precedence: failed/suppressed input, then unresolved, then the
/// barrier, then a dropped required input, else ready. `inputs` pairs each
/// input's state with whether it is optional.
pub fn decide_call(inputs: &[(State, bool)], barrier: bool) -> CallDecision {
    if let Some(i) = inputs.iter().position(|(s, _)| s.is_failure()) {
        return CallDecision::SuppressedBy(i);
    }
    if inputs.iter().any(|(s, _)| *s == State::Unresolved) {
        return CallDecision::Wait;
    }
    if barrier {
        return CallDecision::SuppressedByBarrier;
    }
    if inputs.iter().any(|&(s, opt)| s == State::Dropped && !opt) {
        return CallDecision::Dropped;
    }
    CallDecision::Ready
}

/// What a Filter outputs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FilterDecision {
    /// Not decidable yet.
    Wait,
    /// Copy the value's outcome (present value passes through on `true`).
    Value,
    /// Copy the mask's non-present outcome.
    Mask,
    /// The mask is `false`.
    Dropped,
}

/// Filter: value unresolved → wait; value not present → its outcome; mask
/// unresolved → wait; mask not present → its outcome; true → the value;
/// false → Dropped. `mask` is the mask's state and, when present, its value.
pub fn decide_filter(value: State, mask: State, keep: bool) -> FilterDecision {
    match (value, mask) {
        (State::Unresolved, _) => FilterDecision::Wait,
        (State::Present, State::Unresolved) => FilterDecision::Wait,
        (State::Present, State::Present) if keep => FilterDecision::Value,
        (State::Present, State::Present) => FilterDecision::Dropped,
        (State::Present, _) => FilterDecision::Mask,
        _ => FilterDecision::Value,
    }
}

/// What an Expansion becomes given its producing Item(s).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExpandDecision {
    /// Some input is unresolved.
    Wait,
    /// Expansion Failed with the cause of input `i`.
    FailedBy(usize),
    /// Expansion Dropped.
    Dropped,
    /// The aligned lists have different lengths: Expansion Failed.
    CardinalityMismatch,
    /// Expansion Succeeded with this many children.
    Succeeded(usize),
}

/// Expand: present → Succeeded (empty is legal); dropped → Dropped;
/// failed/suppressed → Failed. `lens` holds the list lengths once all inputs
/// are present.
pub fn decide_expand(inputs: &[State], lens: Option<&[usize]>) -> ExpandDecision {
    if let Some(i) = inputs.iter().position(|s| s.is_failure()) {
        return ExpandDecision::FailedBy(i);
    }
    if inputs.contains(&State::Unresolved) {
        return ExpandDecision::Wait;
    }
    if inputs.contains(&State::Dropped) {
        return ExpandDecision::Dropped;
    }
    match lens {
        Some([first, rest @ ..]) if rest.iter().all(|l| l == first) => ExpandDecision::Succeeded(*first),
        Some(_) => ExpandDecision::CardinalityMismatch,
        None => ExpandDecision::Wait,
    }
}

/// The state of an Expansion as a Reduce sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExpansionState {
    /// Not yet materialized.
    Unresolved,
    /// Materialized (possibly empty).
    Succeeded,
    /// Its producing Item was dropped.
    Dropped,
    /// Its producing Item failed.
    Failed,
}

/// What a Reduce outputs for one parent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReduceDecision {
    /// Not decidable yet.
    Wait,
    /// The parent Item is Dropped.
    Dropped,
    /// Suppressed by the failed Expansion.
    SuppressedByExpansion,
    /// Suppressed by member `i` (failed or suppressed).
    SuppressedBy(usize),
    /// Present: these members survive, in ordinal order.
    Present(Vec<usize>),
}

/// One child's combined state across a Reduce's aligned inputs (and
/// members): any failure wins, then unresolved, then dropped.
pub fn combine(states: &[State]) -> State {
    if let Some(s) = states.iter().find(|s| s.is_failure()) {
        return *s;
    }
    if states.contains(&State::Unresolved) {
        return State::Unresolved;
    }
    if states.contains(&State::Dropped) {
        return State::Dropped;
    }
    State::Present
}

/// Reduce: Expansion unresolved → wait; dropped → Dropped; failed →
/// Suppressed; any member failed/suppressed → Suppressed (even while others
/// are pending); members pending → wait; dropped members are excluded;
/// survivors in ordinal order; zero survivors → present empty list.
pub fn decide_reduce(expansion: ExpansionState, members: &[State]) -> ReduceDecision {
    match expansion {
        ExpansionState::Unresolved => return ReduceDecision::Wait,
        ExpansionState::Dropped => return ReduceDecision::Dropped,
        ExpansionState::Failed => return ReduceDecision::SuppressedByExpansion,
        ExpansionState::Succeeded => {}
    }
    if let Some(i) = members.iter().position(|s| s.is_failure()) {
        return ReduceDecision::SuppressedBy(i);
    }
    if members.contains(&State::Unresolved) {
        return ReduceDecision::Wait;
    }
    ReduceDecision::Present(
        members
            .iter()
            .enumerate()
            .filter(|(_, s)| **s == State::Present)
            .map(|(i, _)| i)
            .collect(),
    )
}
