//! Helpers for the ui pass cases in `tests/ui/pass/`, which build *and run*
//! their pipelines: a case that compiles but wires the plan wrongly fails too.

use rayorch::sim::{self, SimConfig};
use rayorch::{Pipeline, RootOutcome};

/// Build `p`'s plan and run it over `inputs` (root keys 0, 1, ...) on the
/// sequential schedule and on 20 random ones; checks that every schedule
/// gives the same outcomes and returns them in key order with the output
/// handles.
pub fn run<P: Pipeline>(p: &P, inputs: Vec<P::Input>) -> (P::Outputs, Vec<RootOutcome>) {
    let (plan, outputs) = p.build_plan().expect("the plan builds");
    let keyed = || {
        inputs
            .iter()
            .enumerate()
            .map(|(i, x)| (i as u64, x.clone()))
            .collect::<Vec<_>>()
    };
    let sequential = sim::run_typed(&plan, keyed(), &SimConfig::sequential()).expect("the run completes");
    let reference = format!("{:?}", sequential.by_key());
    for seed in 0..20 {
        let cfg = SimConfig::random(seed).without_faults();
        let other = sim::run_typed(&plan, keyed(), &cfg).expect("the run completes");
        assert_eq!(format!("{:?}", other.by_key()), reference, "seed {seed}");
    }
    let outcomes = sequential.by_key().into_iter().cloned().collect();
    (outputs, outcomes)
}
