//! The physical lifecycle of one Grain (one Call applied to one Entity).
//!
//! ```text
//! waiting ──ready──▶ ready ──reserve──▶ in-flight ──commit──▶ sealed
//!    │                 │ ◀────retry──────────┘
//!    └──decide─────────┴──barrier──────────────────────────▶ sealed
//! ```
//! Every change goes through [`Phase::apply`], which returns the new phase or
//! an [`InvalidTransition`]: any other move is a bug and is rejected loudly
//! rather than silently corrupting lineage. The generation counts dispatches:
//! it rises by one each time the Grain is reserved, and a report commits only
//! when it carries the current generation (the commit gate).

use std::fmt;

/// Where a Grain is in its lifecycle.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Phase {
    /// Some input is unresolved.
    Waiting,
    /// In its Call's Ready Queue (or a recovery queue).
    Ready,
    /// Reserved into a physical batch that has not reported.
    InFlight,
    /// Its outcome is published; terminal.
    Sealed,
}

/// A named lifecycle move.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Transition {
    /// waiting → ready: every input is resolved.
    MakeReady,
    /// waiting → sealed: decided without running (dropped or suppressed).
    Decide,
    /// ready → in-flight: reserved into a batch.
    Reserve,
    /// ready → sealed: suppressed by a barrier before dispatch.
    SuppressQueued,
    /// in-flight → ready: the attempt failed and will be retried.
    Retry,
    /// in-flight → sealed: a report committed.
    Commit,
}

impl Transition {
    /// Every transition, for exhaustive tests.
    pub const ALL: [Transition; 6] = [
        Transition::MakeReady,
        Transition::Decide,
        Transition::Reserve,
        Transition::SuppressQueued,
        Transition::Retry,
        Transition::Commit,
    ];
}

/// A move the lifecycle does not allow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InvalidTransition {
    /// The phase the Grain was in.
    pub from: Phase,
    /// The move attempted.
    pub transition: Transition,
}

impl fmt::Display for InvalidTransition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "invalid Grain transition {:?} from {:?}",
            self.transition, self.from
        )
    }
}

impl std::error::Error for InvalidTransition {}

impl Phase {
    /// Apply `t`, or reject it.
    #[inline]
    pub fn apply(self, t: Transition) -> Result<Phase, InvalidTransition> {
        use Phase::*;
        use Transition::*;
        match (self, t) {
            (Waiting, MakeReady) => Ok(Ready),
            (Waiting, Decide) => Ok(Sealed),
            (Ready, Reserve) => Ok(InFlight),
            (Ready, SuppressQueued) => Ok(Sealed),
            (InFlight, Retry) => Ok(Ready),
            (InFlight, Commit) => Ok(Sealed),
            (from, transition) => Err(InvalidTransition { from, transition }),
        }
    }
}

/// The engine's per-Grain record.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Grain {
    pub(crate) phase: Phase,
    /// Dispatches so far; a report must carry this value to commit.
    pub(crate) generation: u32,
    /// Inputs not yet resolved.
    pub(crate) pending: u32,
    /// Attempt failures so far (retry budgets are per Grain, never reset).
    pub(crate) failures: u32,
}

impl Grain {
    pub(crate) fn new(inputs: usize) -> Grain {
        Grain {
            phase: Phase::Waiting,
            generation: 0,
            pending: inputs as u32,
            failures: 0,
        }
    }

    /// Apply a transition; an invalid one leaves the Grain unchanged.
    #[inline]
    pub(crate) fn transition(&mut self, t: Transition) -> Result<(), InvalidTransition> {
        self.phase = self.phase.apply(t)?;
        if t == Transition::Reserve {
            self.generation += 1;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generation_counts_dispatches() {
        let mut g = Grain::new(1);
        g.transition(Transition::MakeReady).unwrap();
        for expected in 1..=3 {
            g.transition(Transition::Reserve).unwrap();
            assert_eq!(g.generation, expected);
            g.transition(Transition::Retry).unwrap();
        }
        assert!(
            g.transition(Transition::Commit).is_err(),
            "a ready Grain cannot commit"
        );
        assert_eq!(g.phase, Phase::Ready);
    }
}
