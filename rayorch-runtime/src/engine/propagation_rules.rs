//! The propagation rules of the runtime contract, as pure functions.
//!
//! These are the specification and the engine's decisions at once: the
//! engine calls [`decide_call`] for every Call Grain (barrier included),
//! [`decide_filter`] for every Filter Item, [`decide_expand`] for every
//! Expansion, and [`combine`] + [`decide_reduce`] for every Reduce parent
//! (when its Expansion resolves without children, when a child fails, and
//! when the last child resolves), or [`decide_reduce_keep_failed`] for a
//! `keep_failed` Reduce, where a failed child is gathered, never decisive. The unit tests below check these very
//! functions over the whole Cartesian product of input states
//! (CONFORMANCE.md §A). A broadcast has no decision: it copies its
//! ancestor's Item, whatever it is.

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
#[inline]
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
#[inline]
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
#[inline]
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
    /// Present: the members [`survivors`] names survive, in ordinal order.
    Present,
}

/// One child's combined state across a Reduce's aligned inputs (and
/// members): any failure wins, then unresolved, then dropped.
#[inline]
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
#[inline]
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
    ReduceDecision::Present
}

/// The members a Present Reduce gathers: those whose (combined) state is
/// Present, in ordinal order; dropped members are left out.
#[inline]
pub fn survivors(members: &[State]) -> impl Iterator<Item = usize> + '_ {
    members
        .iter()
        .enumerate()
        .filter(|(_, s)| **s == State::Present)
        .map(|(i, _)| i)
}

/// `reduce!(x, keep_failed)`: Expansion unresolved → wait; dropped →
/// Dropped; failed → Suppressed (as [`decide_reduce`]); any member
/// unresolved → wait, even when another has failed (the parent is decided
/// only when every child is terminal); else Present, child failures
/// included.
#[inline]
pub fn decide_reduce_keep_failed(expansion: ExpansionState, members: &[State]) -> ReduceDecision {
    match expansion {
        ExpansionState::Unresolved => ReduceDecision::Wait,
        ExpansionState::Dropped => ReduceDecision::Dropped,
        ExpansionState::Failed => ReduceDecision::SuppressedByExpansion,
        ExpansionState::Succeeded if members.contains(&State::Unresolved) => ReduceDecision::Wait,
        ExpansionState::Succeeded => ReduceDecision::Present,
    }
}

/// The members a Present `keep_failed` Reduce gathers, in ordinal order:
/// `(ordinal, true)` for a present child (its value), `(ordinal, false)`
/// for a failed or suppressed one (its cause); dropped members are left out.
#[inline]
pub fn kept(members: &[State]) -> impl Iterator<Item = (usize, bool)> + '_ {
    members.iter().enumerate().filter_map(|(i, s)| match s {
        State::Present => Some((i, true)),
        State::Failed | State::Suppressed => Some((i, false)),
        State::Dropped | State::Unresolved => None,
    })
}

#[cfg(test)]
mod tests {
    //! CONFORMANCE.md §A. Each expectation below is written again from the
    //! checklist text (not copied from the code above) and compared with the
    //! rule on every combination of input states.

    use super::*;

    /// Every sequence of `len` letters from `alphabet`.
    fn product<T: Copy>(alphabet: &[T], len: usize) -> Vec<Vec<T>> {
        let mut out = vec![Vec::new()];
        for _ in 0..len {
            out = out
                .into_iter()
                .flat_map(|prefix| {
                    alphabet.iter().map(move |&a| {
                        let mut v = prefix.clone();
                        v.push(a);
                        v
                    })
                })
                .collect();
        }
        out
    }

    fn is_failure(s: State) -> bool {
        matches!(s, State::Failed | State::Suppressed)
    }

    /// Every Expansion state with every member list of zero to four children.
    fn reduce_cases() -> Vec<(ExpansionState, Vec<State>)> {
        let expansions = [
            ExpansionState::Unresolved,
            ExpansionState::Succeeded,
            ExpansionState::Dropped,
            ExpansionState::Failed,
        ];
        expansions
            .into_iter()
            .flat_map(|x| {
                (0..=4).flat_map(move |len| product(&State::ALL, len).into_iter().map(move |m| (x, m)))
            })
            .collect()
    }

    /// Every input list of one to three Call inputs, each required or optional.
    fn call_inputs() -> Vec<Vec<(State, bool)>> {
        let letters: Vec<(State, bool)> = State::ALL.iter().flat_map(|&s| [(s, false), (s, true)]).collect();
        (1..=3).flat_map(|n| product(&letters, n)).collect()
    }

    /// §A bullets 1 and 2, as one precedence table.
    fn expected_call(inputs: &[(State, bool)], barrier: bool) -> CallDecision {
        let failed = inputs.iter().position(|&(s, _)| is_failure(s));
        let unresolved = inputs.iter().any(|&(s, _)| s == State::Unresolved);
        let dropped_required = inputs
            .iter()
            .any(|&(s, optional)| s == State::Dropped && !optional);
        match (failed, unresolved, barrier, dropped_required) {
            (Some(i), _, _, _) => CallDecision::SuppressedBy(i),
            (None, true, _, _) => CallDecision::Wait,
            (None, false, true, _) => CallDecision::SuppressedByBarrier,
            (None, false, false, true) => CallDecision::Dropped,
            (None, false, false, false) => CallDecision::Ready,
        }
    }

    /// "any input Failed or Suppressed → Suppressed with the cause of the input that decided it; else unresolved → wait; else Dropped → Dropped; else Ready"
    #[test]
    fn a_call_inputs_precedence() {
        let all = call_inputs();
        assert_eq!(all.len(), 10 + 100 + 1000);
        for inputs in &all {
            assert_eq!(
                decide_call(inputs, false),
                expected_call(inputs, false),
                "inputs {inputs:?}"
            );
        }
        // The sentences of the checklist, spelled out.
        use State::*;
        let req = |s| (s, false);
        let opt = |s| (s, true);
        assert_eq!(
            decide_call(&[req(Dropped), req(Failed)], false),
            CallDecision::SuppressedBy(1),
            "failure beats drop"
        );
        assert_eq!(
            decide_call(&[req(Unresolved), req(Suppressed)], false),
            CallDecision::SuppressedBy(1),
            "a failure decides even while another input is unresolved"
        );
        assert_eq!(
            decide_call(&[req(Dropped), req(Unresolved)], false),
            CallDecision::Wait,
            "a drop waits for the other inputs (one of them may still fail)"
        );
        assert_eq!(
            decide_call(&[req(Present), req(Dropped)], false),
            CallDecision::Dropped
        );
        assert_eq!(
            decide_call(&[req(Present), opt(Dropped)], false),
            CallDecision::Ready,
            "a dropped optional input is passed as missing"
        );
        assert_eq!(decide_call(&[opt(Failed)], false), CallDecision::SuppressedBy(0));
    }

    /// "If (Call, parent) carries a GroupFailure barrier, the Grain is sealed Suppressed as soon as it would be decided, even while it was still waiting."
    #[test]
    fn a_barrier_seals_waiting_grain() {
        for inputs in &call_inputs() {
            let got = decide_call(inputs, true);
            assert_eq!(got, expected_call(inputs, true), "inputs {inputs:?}");
            assert!(
                !matches!(got, CallDecision::Ready | CallDecision::Dropped),
                "a Grain under a barrier never runs and is never merely dropped: {inputs:?} -> {got:?}"
            );
        }
        // A waiting Grain under a barrier: it stays waiting while any input is
        // open and is sealed Suppressed the moment the last one resolves.
        for last in [State::Present, State::Dropped] {
            let mut inputs = [(State::Unresolved, false); 3];
            for i in 0..3 {
                assert_eq!(decide_call(&inputs, true), CallDecision::Wait);
                inputs[i].0 = if i == 2 { last } else { State::Present };
            }
            assert_eq!(decide_call(&inputs, true), CallDecision::SuppressedByBarrier);
        }
    }

    /// "Filter: value unresolved → wait; value not present → its outcome and cause; mask unresolved → wait; mask not present → its outcome; true → the value; false → Dropped."
    #[test]
    fn a_filter() {
        fn expected(value: State, mask: State, keep: bool) -> FilterDecision {
            use State::*;
            match (value, mask, keep) {
                (Unresolved, _, _) => FilterDecision::Wait,
                (Dropped | Failed | Suppressed, _, _) => FilterDecision::Value,
                (Present, Unresolved, _) => FilterDecision::Wait,
                (Present, Dropped | Failed | Suppressed, _) => FilterDecision::Mask,
                (Present, Present, true) => FilterDecision::Value,
                (Present, Present, false) => FilterDecision::Dropped,
            }
        }
        let mut n = 0;
        for value in State::ALL {
            for mask in State::ALL {
                for keep in [false, true] {
                    assert_eq!(
                        decide_filter(value, mask, keep),
                        expected(value, mask, keep),
                        "value {value:?} mask {mask:?} keep {keep}"
                    );
                    n += 1;
                }
            }
        }
        assert_eq!(n, 50);
    }

    /// "Expand: present → Succeeded(children) (empty is legal and terminal); Dropped → Expansion Dropped; Failed/Suppressed → Expansion Failed."
    #[test]
    fn a_expand() {
        // One list (`expand`) or two aligned lists (`expand_aligned`); the
        // aligned form follows the Call precedence and needs equal lengths.
        fn expected(inputs: &[State], lens: &[usize]) -> ExpandDecision {
            if let Some(i) = inputs.iter().position(|&s| is_failure(s)) {
                return ExpandDecision::FailedBy(i);
            }
            if inputs.contains(&State::Unresolved) {
                return ExpandDecision::Wait;
            }
            if inputs.contains(&State::Dropped) {
                return ExpandDecision::Dropped;
            }
            match lens {
                [n] => ExpandDecision::Succeeded(*n),
                [a, b] if a == b => ExpandDecision::Succeeded(*a),
                _ => ExpandDecision::CardinalityMismatch,
            }
        }
        let mut n = 0;
        for arity in 1..=2 {
            for inputs in product(&State::ALL, arity) {
                let all_present = inputs.iter().all(|&s| s == State::Present);
                for lens in product(&[0usize, 1, 2, 3], arity) {
                    if all_present {
                        assert_eq!(
                            decide_expand(&inputs, Some(&lens)),
                            expected(&inputs, &lens),
                            "inputs {inputs:?} lens {lens:?}"
                        );
                    } else {
                        // Lengths exist only once every list is present; the
                        // decision must not depend on them before that.
                        assert_eq!(decide_expand(&inputs, Some(&lens)), expected(&inputs, &lens));
                        assert_eq!(decide_expand(&inputs, None), expected(&inputs, &lens));
                    }
                    n += 1;
                }
            }
        }
        assert_eq!(n, 5 * 4 + 25 * 16);
        assert_eq!(
            decide_expand(&[State::Present], Some(&[0])),
            ExpandDecision::Succeeded(0),
            "an empty Expansion is legal"
        );
        assert_eq!(
            decide_expand(&[State::Present, State::Present], Some(&[2, 3])),
            ExpandDecision::CardinalityMismatch
        );
    }

    /// "Reduce: Expansion unresolved → wait; Dropped → Dropped; Failed → Suppressed; any member Failed/Suppressed → Suppressed (even while others are pending); members pending → wait; Dropped members excluded; survivors in ordinal order; zero survivors → Present(vec![])."
    #[test]
    fn a_reduce() {
        /// The decision, and for a Present one the gathered members.
        fn expected(x: ExpansionState, members: &[State]) -> (ReduceDecision, Vec<usize>) {
            let decision = match x {
                ExpansionState::Unresolved => ReduceDecision::Wait,
                ExpansionState::Dropped => ReduceDecision::Dropped,
                ExpansionState::Failed => ReduceDecision::SuppressedByExpansion,
                ExpansionState::Succeeded => {
                    if let Some(i) = members.iter().position(|&s| is_failure(s)) {
                        ReduceDecision::SuppressedBy(i)
                    } else if members.contains(&State::Unresolved) {
                        ReduceDecision::Wait
                    } else {
                        let mut survivors = Vec::new();
                        for (ordinal, s) in members.iter().enumerate() {
                            if *s == State::Present {
                                survivors.push(ordinal);
                            }
                        }
                        return (ReduceDecision::Present, survivors);
                    }
                }
            };
            (decision, Vec::new())
        }
        /// What the engine computes: the rule, then the survivors it gathers.
        fn decided(x: ExpansionState, members: &[State]) -> (ReduceDecision, Vec<usize>) {
            match decide_reduce(x, members) {
                ReduceDecision::Present => (ReduceDecision::Present, survivors(members).collect()),
                d => (d, Vec::new()),
            }
        }
        let cases = reduce_cases();
        for (x, members) in &cases {
            assert_eq!(
                decided(*x, members),
                expected(*x, members),
                "expansion {x:?} members {members:?}"
            );
        }
        assert_eq!(cases.len(), 4 * (1 + 5 + 25 + 125 + 625));
        use State::*;
        assert_eq!(
            decided(ExpansionState::Succeeded, &[]),
            (ReduceDecision::Present, vec![]),
            "an empty Expansion reduces to an empty list"
        );
        assert_eq!(
            decided(ExpansionState::Succeeded, &[Dropped, Dropped]),
            (ReduceDecision::Present, vec![]),
            "zero survivors reduce to an empty list"
        );
        assert_eq!(
            decided(ExpansionState::Succeeded, &[Present, Dropped, Present]),
            (ReduceDecision::Present, vec![0, 2]),
            "dropped members are left out, the rest keep ordinal order"
        );
        assert_eq!(
            decide_reduce(ExpansionState::Succeeded, &[Unresolved, Failed, Unresolved]),
            ReduceDecision::SuppressedBy(1),
            "a failed member decides while others are pending"
        );
    }

    /// "Reduce: ... Dropped members excluded" for aligned inputs: a child survives only where every aligned input (and the member mask) is present.
    #[test]
    fn a_reduce_combines_aligned_inputs() {
        fn expected(states: &[State]) -> State {
            if let Some(&f) = states.iter().find(|&&s| is_failure(s)) {
                f
            } else if states.contains(&State::Unresolved) {
                State::Unresolved
            } else if states.contains(&State::Dropped) {
                State::Dropped
            } else {
                State::Present
            }
        }
        for len in 1..=3 {
            for states in product(&State::ALL, len) {
                assert_eq!(combine(&states), expected(&states), "states {states:?}");
            }
        }
    }

    /// Issue 10 item 6, `reduce!(x, keep_failed)`: "a Failed or Suppressed child becomes `Err(cause)` at its ordinal position, a Dropped child is left out, a present child is `Ok(v)`; child failures do not suppress the parent; the parent is still decided only when its Expansion and every child are terminal; a failed Expansion still fails/suppresses the parent."
    #[test]
    fn a_reduce_keep_failed() {
        /// `Ok(ordinal)` for a value, `Err(ordinal)` for a cause.
        type Gathered = Vec<Result<usize, usize>>;
        fn expected(x: ExpansionState, members: &[State]) -> (ReduceDecision, Gathered) {
            let decision = match x {
                ExpansionState::Unresolved => ReduceDecision::Wait,
                ExpansionState::Dropped => ReduceDecision::Dropped,
                ExpansionState::Failed => ReduceDecision::SuppressedByExpansion,
                ExpansionState::Succeeded if members.contains(&State::Unresolved) => ReduceDecision::Wait,
                ExpansionState::Succeeded => {
                    let mut out = Vec::new();
                    for (ordinal, &s) in members.iter().enumerate() {
                        if s == State::Present {
                            out.push(Ok(ordinal));
                        } else if is_failure(s) {
                            out.push(Err(ordinal));
                        }
                    }
                    return (ReduceDecision::Present, out);
                }
            };
            (decision, Vec::new())
        }
        fn decided(x: ExpansionState, members: &[State]) -> (ReduceDecision, Gathered) {
            match decide_reduce_keep_failed(x, members) {
                ReduceDecision::Present => (
                    ReduceDecision::Present,
                    kept(members)
                        .map(|(i, ok)| if ok { Ok(i) } else { Err(i) })
                        .collect(),
                ),
                d => (d, Vec::new()),
            }
        }
        let cases = reduce_cases();
        for (x, members) in &cases {
            let got = decided(*x, members);
            assert_eq!(got, expected(*x, members), "expansion {x:?} members {members:?}");
            assert!(
                !matches!(got.0, ReduceDecision::SuppressedBy(_)),
                "a child never suppresses a keep_failed parent: {members:?}"
            );
        }
        assert_eq!(cases.len(), 4 * (1 + 5 + 25 + 125 + 625));
        use State::*;
        assert_eq!(
            decided(ExpansionState::Succeeded, &[Present, Failed, Dropped, Suppressed]),
            (ReduceDecision::Present, vec![Ok(0), Err(1), Err(3)]),
            "failures kept at their ordinal, drops left out"
        );
        assert_eq!(
            decide_reduce_keep_failed(ExpansionState::Succeeded, &[Unresolved, Failed, Present]),
            ReduceDecision::Wait,
            "a failed child does not decide while a sibling is pending"
        );
        assert_eq!(
            decided(ExpansionState::Succeeded, &[Failed, Failed]),
            (ReduceDecision::Present, vec![Err(0), Err(1)]),
            "every child failed: still Present, all causes listed"
        );
        assert_eq!(
            decided(ExpansionState::Succeeded, &[]),
            (ReduceDecision::Present, vec![]),
            "an empty Expansion reduces to an empty list"
        );
    }
}
